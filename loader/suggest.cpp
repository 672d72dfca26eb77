#include "loader/suggest.h"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/socket.h>

#include <toml++/toml.h>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "common/text.h"
#include "policy/policy.h"

namespace confine {
namespace {

// What an op needs of its target path: policy::kRead, kWrite, kExec bits.
uint8_t path_need(const std::string& op) {
    if (op == "open_read") return policy::kRead;
    if (op == "exec") return policy::kRead | policy::kExec;
    static const std::set<std::string> writes = {"open_write", "create", "mkdir",   "unlink",  "rmdir",
                                                 "rename",     "link",   "symlink", "setattr", "setxattr"};
    return writes.count(op) ? policy::kWrite : 0;
}

// Gives a path its variable back: the job's private HOME and TMPDIR (by
// their shape, <TMPDIR>/confine-<job>.XXXXXX/{home,tmp}), the workdir, the
// account's home.
class Variables {
public:
    Variables(std::string workdir, std::string user_home)
        : workdir_(std::move(workdir)), user_home_(std::move(user_home)) {}

    std::string put_back(const std::string& path) {
        static const std::regex job_dir(R"(^(.*/confine-[^/]+\.[A-Za-z0-9]{6})/(home|tmp)(/.*)?$)");
        std::smatch m;
        if (std::regex_match(path, m, job_dir)) {
            private_root_ = m[1];
            return "{" + m[2].str() + "}" + m[3].str();
        }
        for (auto [value, name] : {std::pair{&workdir_, "{workdir}"}, {&user_home_, "{user_home}"}})
            if (!value->empty() && policy::covers(*value, path)) return name + path.substr(value->size());
        return path;
    }

    // Values to compile the base policy with, so its rules are compared
    // with the log's paths as the job saw them.
    policy::Vars vars() const {
        std::string root = private_root_.empty() ? "/nonexistent/confine-job.XXXXXX" : private_root_;
        return {workdir_.empty() ? "/nonexistent/workdir" : workdir_, root + "/home", root + "/tmp",
                user_home_.empty() ? "/nonexistent/home" : user_home_};
    }

private:
    std::string workdir_, user_home_, private_root_;
};

struct Wanted {
    std::map<std::string, uint8_t> paths;  // as the job saw them
    std::set<std::string> connect, bind, domains;
    std::set<std::string> families;
    bool user_namespaces = false;
    std::set<std::string> not_grantable;  // "op target (reason)"
    uint64_t lost = 0;
    uid_t uid = static_cast<uid_t>(-1);
};

std::string str(const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

Wanted read_log(std::istream& in) {
    Wanted w;
    for (std::string line; std::getline(in, line);) {
        nlohmann::json o = nlohmann::json::parse(line, nullptr, false);
        if (o.is_discarded() || !o.is_object()) continue;
        const std::string op = str(o, "op"), target = str(o, "target"), reason = str(o, "reason");
        if (op == "lost") {
            if (o.contains("count") && o["count"].is_number_unsigned()) w.lost += o["count"].get<uint64_t>();
            continue;
        }
        if (!o.contains("verdict")) continue;
        if (o.contains("uid") && o["uid"].is_number_unsigned() && o["uid"].get<uint64_t>() < UINT32_MAX)
            w.uid = static_cast<uid_t>(o["uid"].get<uint64_t>());
        // A fail-closed decision (a path too deep, a map full) or an
        // answer for nothing listening is no rule's to change.
        if (reason == "nothing_listening") continue;
        if (!reason.empty() && reason != "policy") {
            w.not_grantable.insert(fmt::format("{} {} ({})", op, target, reason));
        } else if (uint8_t need = path_need(op); need && target.starts_with("/")) {
            w.paths[target] |= need;
        } else if ((op == "connect" || op == "sendmsg") &&
                   (target.starts_with("tcp://") || target.starts_with("udp://") || target.starts_with("unix:") ||
                    target.starts_with("unix-abstract:"))) {
            w.connect.insert(target);
        } else if (op == "bind" && (target.starts_with("tcp://") || target.starts_with("udp://"))) {
            w.bind.insert(target);
        } else if (op == "proxy" && !target.empty()) {
            size_t colon = target.rfind(':');
            std::string port = colon == std::string::npos ? "" : target.substr(colon + 1);
            w.domains.insert(port == "443" || port == "80" ? target.substr(0, colon) : target);
        } else if (op == "socket" && o.contains("family") && o["family"].is_number_integer() &&
                   !o.contains("protocol")) {
            int family = o["family"].get<int>();
            std::string name;
            for (const auto& [n, number] : policy::family_names())
                if (number == family) name = n;
            if (name.empty())
                w.not_grantable.insert(fmt::format("socket of family {}", family));
            else
                w.families.insert(name);
        } else if (op == "userns_create") {
            w.user_namespaces = true;
        } else {
            w.not_grantable.insert(fmt::format("{} {}", op, target));
        }
    }
    return w;
}

// Several files of one directory become the directory: FILES (variables
// put back) -> the rules, with a note for each grouping.
std::map<std::string, uint8_t> group(std::map<std::string, uint8_t> files, std::vector<std::string>& notes) {
    // The job's private HOME and TMPDIR are its own and gone after it, and
    // what tools make there has random names (cc's temporaries): granted
    // whole.
    for (const char* own : {"{home}", "{tmp}"}) {
        uint8_t need = 0;
        size_t n = std::erase_if(files, [&](const auto& f) {
            if (!policy::covers(own, f.first)) return false;
            need |= f.second;
            return true;
        });
        if (!n) continue;
        files[own] = need;
        notes.push_back(fmt::format("{}: the job's private directory; {} paths in it were used", own, n));
    }
    std::map<std::string, std::vector<std::string>> by_dir;
    for (const auto& [path, need] : files) {
        size_t slash = path.rfind('/');
        if (slash != std::string::npos && slash > 0) by_dir[path.substr(0, slash)].push_back(path);
    }
    std::map<std::string, uint8_t> out;
    for (const auto& [dir, members] : by_dir) {
        // Not too wide to grant for a few files in it: a variable alone, a
        // directory less than three deep ("/home/u"), or anything in the
        // account's home, where credentials sit beside what was used.
        bool wide = dir.find('/') == std::string::npos || std::count(dir.begin(), dir.end(), '/') < 3 ||
                    dir.starts_with("{user_home}");
        // And only what every file needed: two reads and a write stay apart.
        const uint8_t need = files.at(members.front());
        bool same = std::all_of(members.begin(), members.end(), [&](const auto& m) { return files.at(m) == need; });
        if (members.size() < 3 || wide || !same) continue;
        out[dir] = need;
        notes.push_back(fmt::format("{}: {} files under it were used", dir, members.size()));
    }
    for (const auto& [path, need] : files) {
        bool inside = std::any_of(out.begin(), out.end(), [&](const auto& g) {
            return g.first != path && policy::covers(g.first, path) && (g.second & need) == need;
        });
        if (!inside) out[path] |= need;
    }
    return out;
}

toml::array& array_at(toml::table& root, const char* table, const char* key) {
    toml::table* t = root[table].as_table();
    if (!t) t = root.insert_or_assign(table, toml::table{}).first->second.as_table();
    toml::array* a = (*t)[key].as_array();
    if (!a) a = t->insert_or_assign(key, toml::array{}).first->second.as_array();
    return *a;
}

void add_unique(toml::array& a, const std::string& value) {
    for (const auto& v : a)
        if (v.value<std::string>() == value) return;
    a.push_back(value);
}

// The base policy's text: FILE's, or the embedded default's.
Result<std::string> read_base(const std::string& file) {
    if (file.empty()) return std::string(policy::default_policy_text());
    return read_file(file, "audit: reading the base policy");
}

}  // namespace

Result<std::string> suggest_policy(std::istream& log, const SuggestOptions& o) {
    Wanted w = read_log(log);
    std::string user_home;
    if (const passwd* pw = w.uid == static_cast<uid_t>(-1) ? nullptr : getpwuid(w.uid)) user_home = pw->pw_dir;
    Variables vars(o.workdir, user_home);
    // Finds the job's private directories before the base is compiled.
    for (const auto& [path, need] : w.paths) vars.put_back(path);

    auto base_text = read_base(o.base_file);
    if (!base_text) return fail(base_text.error());
    auto base = policy::parse(*base_text, o.base_file.empty() ? "<default>" : o.base_file);
    if (!base) return fail(Error::msg("audit: the base policy: " + base.error().front().str()));
    auto compiled = policy::compile(*base, vars.vars());
    if (!compiled) return fail(Error::msg("audit: the base policy: " + compiled.error().message));
    toml::table root = toml::parse(*base_text);

    // Only what the base doesn't grant already.
    std::map<std::string, uint8_t> missing;
    for (const auto& [path, need] : w.paths) {
        uint8_t have = policy::access_at(*compiled, path);
        if ((have & need) != need) missing[vars.put_back(path)] |= need & ~have;
    }
    std::vector<std::string> notes;
    for (const auto& [rule, need] : group(missing, notes)) {
        if (need & policy::kWrite)
            add_unique(array_at(root, "filesystem", "write"), rule);
        else if (need & (policy::kRead | policy::kExec))
            add_unique(array_at(root, "filesystem", "read"), rule);
        if ((need & policy::kExec) && base->fs.exec) add_unique(array_at(root, "filesystem", "exec"), rule);
    }
    for (const std::string& c : w.connect)
        if (std::none_of(compiled->connect.begin(), compiled->connect.end(),
                         [&](const policy::Endpoint& e) { return e.text == c; }))
            add_unique(array_at(root, "network", "connect"), c);
    for (const std::string& b : w.bind) add_unique(array_at(root, "network", "bind"), b);
    for (const std::string& d : w.domains) add_unique(array_at(root, "network", "domains"), d);
    for (const std::string& f : w.families) add_unique(array_at(root, "network", "families"), f);
    if (w.user_namespaces) {
        toml::table* p = root["process"].as_table();
        if (!p) p = root.insert_or_assign("process", toml::table{}).first->second.as_table();
        p->insert_or_assign("user_namespaces", true);
    }
    root.insert_or_assign("mode", "enforce");

    std::string out = fmt::format(
        "# Suggested by `confine audit --suggest` from {} decisions, on {}.\n",
        w.paths.size() + w.connect.size() + w.bind.size() + w.domains.size() + w.families.size() + w.user_namespaces,
        o.base_file.empty() ? "the embedded default policy" : o.base_file);
    if (w.lost)
        out += fmt::format(
            "# WARNING: {} events were lost: the log is incomplete, and so is this policy. Run "
            "again, or with less at once.\n",
            w.lost);
    if (o.workdir.empty()) out += "# The workdir was not given (--workdir): its paths are written out in full.\n";
    // What the job named goes into comments with every control character
    // escaped: a newline in a path must not end its comment.
    auto comment = [](const std::string& s) {
        std::string c;
        for (unsigned char ch : s) c += ch < 0x20 || ch == 0x7f ? fmt::format("\\x{:02x}", ch) : std::string(1, ch);
        return c;
    };
    for (const std::string& n : notes) out += "# Grouped: " + comment(n) + "\n";
    for (const std::string& n : w.not_grantable) out += "# Not grantable by a policy: " + comment(n) + "\n";
    std::ostringstream ss;
    ss << root;
    out += ss.str() + "\n";
    // What is printed is a policy, and only the one meant.
    if (auto p = policy::parse(out, "<suggested>"); !p)
        return fail(Error::msg("audit: the suggested policy does not parse (a bug): " + p.error().front().str()));
    return out;
}

}  // namespace confine
