// Policy compiler: turns the rules of a policy into the table the BPF side
// looks up, one entry per path prefix holding the effective access there.
//
// The kernel hook sees a path after the kernel has resolved it, so rules are
// resolved the same way here (variables, then symlinks), and the routing-table
// precedence is computed once, here, instead of at every access.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <sys/socket.h>
#include "bpf/fs.h"

#include "common/fd.h"
#include "policy/policy.h"

namespace confine::policy {

bool covers(std::string_view rule, std::string_view path) {
    if (rule == "/") return true;
    return path.starts_with(rule) && (path.size() == rule.size() || path[rule.size()] == '/');
}

static_assert(kRead == CONFINE_FS_READ && kWrite == CONFINE_FS_WRITE && kExec == CONFINE_FS_EXEC);

namespace {

// Ascending order is the tie-break: at the same path the later kind wins.
enum class Kind { Read, Write, DenyWrite, Deny };

uint8_t access_of(Kind k) {
    switch (k) {
        case Kind::Read: return kRead;
        case Kind::Write: return kRead | kWrite;
        case Kind::DenyWrite: return kRead;
        case Kind::Deny: return 0;
    }
    return 0;
}

struct Rule {
    std::string prefix;  // resolved
    Kind kind;
};

// The rule that decides PATH: the longest covering one; at equal length (the
// same path) the strongest kind.
const Rule* deciding_rule(const std::vector<Rule>& rules, std::string_view path) {
    const Rule* best = nullptr;
    for (const Rule& r : rules) {
        if (!covers(r.prefix, path)) continue;
        if (!best || r.prefix.size() > best->prefix.size() ||
            (r.prefix.size() == best->prefix.size() && r.kind > best->kind))
            best = &r;
    }
    return best;
}

// What git reads from a git directory as configuration or code, so what a
// job must not write for the account's git to run later (docs/design.md
// "What git trusts"). A linked worktree's own git directory and its common
// directory both get the whole list: git looks for each file in one of them.
constexpr std::string_view kGitTrusted[] = {
    "config",                   // core.fsmonitor, core.hooksPath, filters, aliases, includes
    "config.worktree",          // the same, under extensions.worktreeConfig
    "hooks",                    // run by commit, merge, checkout, push, even status
    "commondir",                // moves config, hooks and objects to where it points
    "objects/info/alternates",  // objects from anywhere the account can read
    "remotes",                  // remote URLs for names config doesn't define
    "branches",                 // likewise, the older form
};

// Git's pointer files ("gitdir: X" in a .git file, X in commondir) are a
// line of at most a path; a longer one is not followed.
constexpr size_t kPointerMax = PATH_MAX + 16;

class Compiler {
public:
    Compiler(const Policy& p, const Vars& vars) : policy_(p), vars_(vars) {}

    // The rule's path with its variable replaced, lexically normalized,
    // symlinks resolved, and checked to fit the BPF key.
    Result<std::string> resolve_rule(const PathRule& rule) {
        auto expanded = expand(rule);
        if (!expanded) return fail(std::move(expanded.error()));
        auto normal = normalize(*expanded);
        if (!normal && rule.path.find("/..") != std::string::npos)
            return fail(error(rule, fmt::format("rule '{}' contains '..'", rule.path)));
        if (!normal)  // from the variable's value
            return fail(
                error(rule, fmt::format("rule '{}' expands to '{}', which contains '..'", rule.path, *expanded)));
        auto real = resolve(*normal, rule);
        if (!real) return real;
        // The key holds the path plus a trailing '/' ("/" stays "/").
        size_t key_len = *real == "/" ? 1 : real->size() + 1;
        if (key_len > CONFINE_RULE_PATH_MAX)
            return fail(error(rule, fmt::format("rule '{}' resolves to a path of {} bytes ('{}...'); rule paths "
                                                "may have at most {} bytes (CONFINE_RULE_PATH_MAX is {} with "
                                                "the trailing '/')",
                                                rule.path, real->size(), real->substr(0, 40), CONFINE_RULE_PATH_MAX - 1,
                                                CONFINE_RULE_PATH_MAX)));
        return real;
    }

    // What protect_git makes read-only for the work tree RULE names (docs/design.md
    // "What git trusts"): .git itself unless it is a directory (else a job
    // could make it point anywhere, or create it), and kGitTrusted in the
    // git directory it leads to and in that one's common directory. Paths
    // come as the kernel will see them: a symlink among them both as itself
    // (it can be replaced) and resolved (where git reads through it).
    Result<std::vector<std::string>> git_metadata(const PathRule& rule) {
        auto top = resolve_rule(rule);
        if (!top) return fail(std::move(top.error()));
        std::string base = *top == "/" ? "" : *top;
        std::string dotgit = base + "/.git";
        std::vector<std::string> out;
        struct stat st;
        if (lstat(dotgit.c_str(), &st) != 0) {
            if (errno != ENOENT && errno != ENOTDIR)
                return fail(error(rule, Error::sys(fmt::format("protect_git '{}': lstat {}", rule.path, dotgit))));
            out.push_back(dotgit);
            return out;
        }
        std::string gitdir = dotgit;
        if (!S_ISDIR(st.st_mode)) {
            out.push_back(dotgit);
            if (S_ISREG(st.st_mode)) {
                // A linked worktree's or a submodule's "gitdir: PATH".
                auto target = read_pointer(rule, dotgit, "gitdir: ");
                if (!target) return fail(std::move(target.error()));
                if (target->empty()) return out;  // not a gitfile: git won't use it either
                gitdir = target->starts_with('/') ? *target : base + "/" + *target;
            } else if (S_ISLNK(st.st_mode)) {
                // To a git directory, or to nothing yet (which the job could
                // create): resolve() follows it. A gitfile through a symlink
                // would have to be read as root through a path the job's
                // user chose.
                struct stat target;
                if (stat(dotgit.c_str(), &target) == 0 && !S_ISDIR(target.st_mode))
                    return fail(error(rule, fmt::format("protect_git '{}': {} is a symlink to a file; "
                                                        "make it the gitfile itself, or a symlink to the "
                                                        "git directory",
                                                        rule.path, dotgit)));
            } else {
                return out;
            }
        }
        auto dir = resolve(gitdir, rule);
        if (!dir) return fail(std::move(dir.error()));
        if (auto r = add_trusted(rule, *dir, out); !r) return fail(std::move(r.error()));

        auto common = read_pointer(rule, *dir + "/commondir", "");
        if (!common) return fail(std::move(common.error()));
        if (!common->empty()) {
            auto c = resolve(common->starts_with('/') ? *common : *dir + "/" + *common, rule);
            if (!c) return fail(std::move(c.error()));
            if (auto r = add_trusted(rule, *c, out); !r) return fail(std::move(r.error()));
        }
        return out;
    }

    // A path git_metadata() found must fit the BPF key like any rule's.
    Result<void> check_git_path(const PathRule& rule, const std::string& path) const {
        if (path.size() + 1 <= CONFINE_RULE_PATH_MAX) return {};
        return fail(error(rule, fmt::format("protect_git '{}' must protect '{}...' ({} bytes); rule paths "
                                            "may have at most {} bytes (CONFINE_RULE_PATH_MAX is {} with "
                                            "the trailing '/')",
                                            rule.path, path.substr(0, 40), path.size(), CONFINE_RULE_PATH_MAX - 1,
                                            CONFINE_RULE_PATH_MAX)));
    }

private:
    Result<void> add_trusted(const PathRule& rule, const std::string& gitdir, std::vector<std::string>& out) const {
        for (std::string_view item : kGitTrusted) {
            std::string literal = (gitdir == "/" ? "" : gitdir) + "/" + std::string(item);
            auto real = resolve(literal, rule);
            if (!real) return fail(std::move(real.error()));
            out.push_back(literal);
            if (*real != literal) out.push_back(std::move(*real));
        }
        return {};
    }

    // The path in git's pointer file FILE, after PREFIX and without the
    // line end, as git reads it; empty if FILE is missing, not a regular
    // file or not of that form. Read as root from a tree the job's user
    // owns: no symlink is followed, and a FIFO can't block.
    Result<std::string> read_pointer(const PathRule& rule, const std::string& file, std::string_view prefix) const {
        Fd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
        if (!fd && errno == ELOOP)
            return fail(error(rule, fmt::format("protect_git '{}': {} is a symlink, which git follows but "
                                                "confine doesn't read through as root; replace it with "
                                                "the file it points to",
                                                rule.path, file)));
        if (!fd) {
            if (errno == ENOENT || errno == ENOTDIR) return std::string();
            return fail(error(rule, Error::sys(fmt::format("protect_git '{}': open {}", rule.path, file))));
        }
        struct stat st;
        if (fstat(fd.get(), &st) != 0)
            return fail(error(rule, Error::sys(fmt::format("protect_git '{}': fstat {}", rule.path, file))));
        if (!S_ISREG(st.st_mode)) return std::string();
        std::string text;
        char buf[4096];
        while (text.size() <= kPointerMax) {
            ssize_t n = ::read(fd.get(), buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return fail(error(rule, Error::sys(fmt::format("protect_git '{}': read {}", rule.path, file))));
            if (n == 0) break;
            text.append(buf, static_cast<size_t>(n));
        }
        if (text.size() > kPointerMax || !text.starts_with(prefix)) return std::string();
        text.erase(0, prefix.size());
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
        if (text.find('\0') != std::string::npos) return std::string();
        return text;
    }

    // "FILE:LINE:COL: message", as parse errors read.
    Error error(const PathRule& rule, Error e) const {
        e.message = Diagnostic{policy_.source, rule.where, std::move(e.message)}.str();
        return e;
    }
    Error error(const PathRule& rule, std::string message) const { return error(rule, Error::msg(std::move(message))); }

    Result<std::string> expand(const PathRule& rule) const {
        const std::string& p = rule.path;
        if (!p.starts_with('{')) {
            if (!p.starts_with('/')) return fail(error(rule, fmt::format("rule '{}' is not an absolute path", p)));
            return p;
        }
        size_t close = p.find('}');
        std::string_view name = std::string_view(p).substr(1, close == std::string::npos ? 0 : close - 1);
        const std::string* value = name == "workdir"     ? &vars_.workdir
                                   : name == "home"      ? &vars_.home
                                   : name == "tmp"       ? &vars_.tmp
                                   : name == "user_home" ? &vars_.user_home
                                                         : nullptr;
        if (close == std::string::npos || !value)
            return fail(error(rule, fmt::format("rule '{}' uses an unknown variable", p)));
        if (!value->starts_with('/'))
            return fail(error(rule, fmt::format("rule '{}': {{{}}} is '{}', not an absolute path", p, name, *value)));
        return *value + p.substr(close + 1);
    }

    // Drops empty and '.' components and a trailing '/'. A '..' yields
    // nothing: lexically it would be wrong across symlinks, and no rule needs it.
    static std::optional<std::string> normalize(const std::string& path) {
        std::string out;
        for (size_t i = 0; i < path.size();) {
            size_t end = std::min(path.find('/', i), path.size());
            std::string_view comp = std::string_view(path).substr(i, end - i);
            i = end + 1;
            if (comp.empty() || comp == ".") continue;
            if (comp == "..") return std::nullopt;
            out += '/';
            out += comp;
        }
        return out.empty() ? "/" : out;
    }

    // realpath(3) resolves the longest existing prefix; the rest is kept as
    // written so rules cover paths created later. A dangling symlink at the
    // boundary is followed by hand: the kernel would create its target.
    Result<std::string> resolve(const std::string& path, const PathRule& rule, int links = 0) const {
        std::string head = path, tail;
        for (;;) {
            std::unique_ptr<char, decltype(&std::free)> real(realpath(head.c_str(), nullptr), &std::free);
            int err = errno;
            if (real) {
                head = real.get();
                break;
            }
            if ((err != ENOENT && err != ENOTDIR) || head == "/")
                return fail(error(rule, Error::sys(fmt::format("rule '{}': realpath {}", rule.path, head), err)));
            size_t slash = head.rfind('/');
            tail = head.substr(slash) + tail;
            head = slash == 0 ? "/" : head.substr(0, slash);
        }
        if (tail.empty()) return head;

        std::string base = head == "/" ? "" : head;
        size_t end = tail.find('/', 1);
        std::string first = base + tail.substr(0, end);
        std::string rest = end == std::string::npos ? "" : tail.substr(end);
        struct stat st;
        if (lstat(first.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
            if (links >= 40) return fail(error(rule, Error::sys(fmt::format("rule '{}'", rule.path), ELOOP)));
            char target[PATH_MAX];
            ssize_t n = readlink(first.c_str(), target, sizeof target - 1);
            if (n < 0) return fail(error(rule, Error::sys(fmt::format("rule '{}': readlink {}", rule.path, first))));
            std::string t(target, static_cast<size_t>(n));
            std::string next = (t.starts_with('/') ? t : base + "/" + t) + rest;
            return resolve(next, rule, links + 1);
        }
        // What doesn't exist can't hold symlinks, but it may hold '.' or '..'
        // that came from a symlink's target.
        auto normal = normalize(base + tail);
        if (!normal)
            return fail(error(rule, fmt::format("rule '{}' resolves to '{}', which contains '..' "
                                                "after its existing part",
                                                rule.path, base + tail)));
        return std::move(*normal);
    }

    const Policy& policy_;
    const Vars& vars_;
};

std::string quote(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\')
            out += fmt::format("\\{}", static_cast<char>(c));
        else if (c < 0x20 || c == 0x7f)
            out += fmt::format("\\u{:04x}", c);
        else
            out += static_cast<char>(c);
    }
    return out + "\"";
}

// The canonical form of an endpoint: IPv4-mapped addresses print as IPv4.
std::string endpoint_text(const Endpoint& e) {
    switch (e.kind) {
        case Endpoint::Kind::Unix: return "unix:" + e.name;
        case Endpoint::Kind::UnixAbstract: return "unix-abstract:" + e.name;
        case Endpoint::Kind::Tcp:
        case Endpoint::Kind::Udp: break;
    }
    const char* scheme = e.kind == Endpoint::Kind::Tcp ? "tcp" : "udp";
    static constexpr uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char buf[INET6_ADDRSTRLEN];
    if (std::equal(std::begin(v4_mapped), std::end(v4_mapped), e.addr.begin())) {
        inet_ntop(AF_INET, e.addr.data() + 12, buf, sizeof buf);
        return fmt::format("{}://{}:{}", scheme, buf, e.port);
    }
    inet_ntop(AF_INET6, e.addr.data(), buf, sizeof buf);
    return fmt::format("{}://[{}]:{}", scheme, buf, e.port);
}

std::string access_text(uint8_t a) {
    std::string out;
    for (auto [bit, name] : {std::pair{kRead, "read"}, {kWrite, "write"}, {kExec, "exec"}}) {
        if (!(a & bit)) continue;
        if (!out.empty()) out += ',';
        out += name;
    }
    return out.empty() ? "none" : out;
}

std::string string_list(const std::vector<std::string>& items) {
    std::string out = "[";
    for (const auto& s : items) out += (out.size() > 1 ? ", " : "") + quote(s);
    return out + "]";
}

// MemTotal of /proc/meminfo, in bytes.
Result<uint64_t> machine_memory() {
    FILE* f = fopen("/proc/meminfo", "re");
    if (!f) return fail(Error::sys("limits: reading /proc/meminfo"));
    unsigned long long kb = 0;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemTotal: %llu kB", &kb) == 1;
    fclose(f);
    if (!found || kb == 0) return fail(Error::msg("limits: /proc/meminfo has no MemTotal"));
    return static_cast<uint64_t>(kb) * 1024;
}

// [limits] in the kernel's units, percentages taken of this machine.
Result<CompiledLimits> compile_limits(const Policy& p, const Vars& vars) {
    auto error = [&](const Limit& l, Error e) {
        e.message = Diagnostic{p.source, l.where, std::move(e.message)}.str();
        return fail(std::move(e));
    };
    // Far above any machine; also what the kernel reads as unlimited.
    constexpr double kHuge = 9.2e18;
    uint64_t mem_total = vars.mem_total;
    auto bytes = [&](const Limit& l, const char* key) -> Result<std::optional<uint64_t>> {
        if (l.kind == Limit::Kind::Unset || l.kind == Limit::Kind::Max) return std::nullopt;
        if (l.kind == Limit::Kind::Value) return static_cast<uint64_t>(std::min(l.value, kHuge));
        if (mem_total == 0) {
            auto m = machine_memory();
            if (!m) return error(l, Error{fmt::format("limits.{}: {}", key, m.error().message), m.error().err});
            mem_total = *m;
        }
        return static_cast<uint64_t>(static_cast<double>(mem_total) * l.value / 100);
    };

    CompiledLimits out;
    auto memory = bytes(p.limits.memory, "memory");
    if (!memory) return fail(memory.error());
    auto swap = bytes(p.limits.swap, "swap");
    if (!swap) return fail(swap.error());
    out.memory = *memory;
    out.swap = *swap;
    if (p.limits.pids.kind == Limit::Kind::Value) out.pids = static_cast<uint64_t>(p.limits.pids.value);

    const Limit& cpu = p.limits.cpu;
    if (cpu.kind == Limit::Kind::Value || cpu.kind == Limit::Kind::Percent) {
        unsigned cpus = vars.cpus ? vars.cpus : static_cast<unsigned>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
        double n = cpu.kind == Limit::Kind::Value ? cpu.value : cpus * cpu.value / 100;
        auto quota = static_cast<uint64_t>(std::llround(n * static_cast<double>(kCpuPeriodUs)));
        // The kernel refuses a quota under 1 ms.
        if (quota < 1000)
            return error(cpu, Error::msg(fmt::format("limits.cpu: {}% of this machine's {} CPUs is {} CPUs, less "
                                                     "than the kernel's minimum of 0.01; give more",
                                                     cpu.value, cpus, n)));
        out.cpu_quota_us = quota;
    }
    out.timeout_s = p.limits.timeout_s;
    return out;
}

}  // namespace

Result<Compiled> compile(const Policy& p, const Vars& vars) {
    Compiler compiler(p, vars);
    std::vector<Rule> rw;
    std::vector<std::string> exec;
    for (auto [rules, kind] : {std::pair{&p.fs.read, Kind::Read},
                               {&p.fs.write, Kind::Write},
                               {&p.fs.deny_write, Kind::DenyWrite},
                               {&p.fs.deny, Kind::Deny}}) {
        for (const PathRule& r : *rules) {
            auto prefix = compiler.resolve_rule(r);
            if (!prefix) return fail(std::move(prefix.error()));
            rw.push_back({std::move(*prefix), kind});
        }
    }
    // Git's trusted files become read-only where the rules above would let
    // the job write them; elsewhere the job can't change them anyway.
    std::vector<Rule> git;
    std::vector<std::string> git_protected;
    for (const PathRule& r : p.fs.protect_git) {
        auto paths = compiler.git_metadata(r);
        if (!paths) return fail(std::move(paths.error()));
        for (std::string& path : *paths) {
            const Rule* decides = deciding_rule(rw, path);
            if (!decides || !(access_of(decides->kind) & kWrite)) continue;
            if (auto fits = compiler.check_git_path(r, path); !fits) return fail(std::move(fits.error()));
            git_protected.push_back(path);
            git.push_back({std::move(path), Kind::DenyWrite});
        }
    }
    rw.insert(rw.end(), git.begin(), git.end());
    std::sort(git_protected.begin(), git_protected.end());
    git_protected.erase(std::unique(git_protected.begin(), git_protected.end()), git_protected.end());
    if (p.fs.exec) {
        for (const PathRule& r : *p.fs.exec) {
            auto prefix = compiler.resolve_rule(r);
            if (!prefix) return fail(std::move(prefix.error()));
            exec.push_back(std::move(*prefix));
        }
    }

    std::vector<std::string> prefixes, guards, listable;
    for (const Rule& r : rw) {
        prefixes.push_back(r.prefix);
        for (std::string a = r.prefix; a.size() > 1;) {
            a = a.substr(0, std::max<size_t>(a.rfind('/'), 1));
            // Every ancestor of a rule granting less than write is a guard.
            if (r.kind != Kind::Write && a != "/") guards.push_back(a);
            // The way down to a readable rule may be listed where no rule
            // (a deny included) covers it.
            bool readable = r.kind == Kind::Read || r.kind == Kind::Write || r.kind == Kind::DenyWrite;
            if (readable && std::none_of(rw.begin(), rw.end(), [&](const Rule& o) { return covers(o.prefix, a); }))
                listable.push_back(a);
        }
    }
    prefixes.insert(prefixes.end(), exec.begin(), exec.end());
    for (auto* v : {&prefixes, &guards, &listable}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }

    Compiled c;
    for (std::string& prefix : prefixes) {
        const Rule* best = deciding_rule(rw, prefix);
        uint8_t access = best ? access_of(best->kind) : 0;
        bool exec_allowed =
            !p.fs.exec || std::any_of(exec.begin(), exec.end(), [&](const auto& e) { return covers(e, prefix); });
        if ((access & kRead) && exec_allowed) access |= kExec;
        c.fs.push_back({std::move(prefix), access});
    }

    c.mode = p.mode;
    c.connect = p.net.connect;
    c.bind = p.net.bind;
    c.domains = p.net.domains;
    c.exec_allowlist = p.fs.exec.has_value();
    c.guards = std::move(guards);
    c.listable = std::move(listable);
    c.git_protected = std::move(git_protected);
    // unix, inet and inet6 always; anything else only when the policy says.
    c.families = (1ull << AF_UNIX) | (1ull << AF_INET) | (1ull << AF_INET6);
    for (int f : p.net.families) c.families |= 1ull << f;
    c.user_namespaces = p.user_namespaces;
    c.env_keep = p.env_keep;
    c.env_set = p.env_set;
    auto limits = compile_limits(p, vars);
    if (!limits) return fail(std::move(limits.error()));
    c.limits = *limits;
    return c;
}

std::string render(const Compiled& c) {
    std::string out = "# Effective policy: the longest matching path wins; paths not listed are denied.\n";
    out += fmt::format("mode = \"{}\"\n", c.mode == Mode::Enforce ? "enforce" : "audit");

    out += "\n[filesystem]\n";
    size_t width = 0;
    for (const auto& e : c.fs) width = std::max(width, e.prefix.size());
    for (const auto& e : c.fs) out += fmt::format("{:<{}}  {}\n", e.prefix, width, access_text(e.access));
    if (!c.listable.empty()) out += "# may be listed (names only): " + string_list(c.listable) + "\n";
    if (!c.git_protected.empty())
        out += "# git metadata kept read-only (protect_git): " + string_list(c.git_protected) + "\n";

    std::vector<std::string> connect, bind;
    for (const auto& e : c.connect) connect.push_back(endpoint_text(e));
    for (const auto& e : c.bind) bind.push_back(endpoint_text(e));
    out += "\n[network]\n";
    out += "connect = " + string_list(connect) + "\n";
    out += "bind = " + string_list(bind) + "\n";
    std::vector<std::string> domains;
    for (const auto& d : c.domains)
        for (uint16_t port : d.ports) domains.push_back(fmt::format("{}:{}", d.name, port));
    if (!domains.empty()) out += "domains = " + string_list(domains) + "  # through the job's proxy\n";
    std::vector<std::string> families;
    for (const auto& [name, number] : family_names())
        if (c.families & (1ull << number)) families.push_back(std::string(name));
    out += "families = " + string_list(families) + "\n";

    out += "\n[process]\n";
    out += fmt::format("user_namespaces = {}\n", c.user_namespaces);

    out += "\n[env]\n";
    out += "keep = " + string_list(c.env_keep) + "\n";
    out += "set = {";
    for (size_t i = 0; i < c.env_set.size(); ++i)
        out += fmt::format("{} {} = {}", i ? "," : "", c.env_set[i].first, quote(c.env_set[i].second));
    out += c.env_set.empty() ? "}\n" : " }\n";

    // Only limits that are set: the rest stay at the kernel's "max".
    const CompiledLimits& l = c.limits;
    if (l.memory || l.swap || l.pids || l.cpu_quota_us || l.timeout_s) {
        out += "\n[limits]\n";
        if (l.memory) out += fmt::format("memory = {}  # bytes\n", *l.memory);
        if (l.swap) out += fmt::format("swap = {}  # bytes\n", *l.swap);
        if (l.pids) out += fmt::format("pids = {}\n", *l.pids);
        if (l.cpu_quota_us)
            out += fmt::format("cpu = {}  # CPUs\n", static_cast<double>(*l.cpu_quota_us) / kCpuPeriodUs);
        if (l.timeout_s) out += fmt::format("timeout = {}  # seconds\n", l.timeout_s);
    }
    return out;
}

uint8_t access_at(const Compiled& c, std::string_view path) {
    // c.fs is sorted by prefix: look up the path, then each parent.
    auto find = [&](std::string_view p) {
        auto it = std::ranges::lower_bound(c.fs, p, std::less<>{}, &FsEntry::prefix);
        return it != c.fs.end() && it->prefix == p ? &*it : nullptr;
    };
    for (;;) {
        if (const FsEntry* e = find(path)) return e->access;
        size_t slash = path.rfind('/');
        if (slash == std::string_view::npos || path == "/") break;
        path = path.substr(0, std::max<size_t>(slash, 1));
    }
    const FsEntry* root = path == "/" ? nullptr : find("/");  // "/" covers any path
    return root ? root->access : 0;
}

std::vector<FsTableEntry> fs_table(const Compiled& c) {
    std::map<std::string, FsTableEntry> t;
    auto at = [&](const std::string& p) -> FsTableEntry& { return t.try_emplace(p, FsTableEntry{p}).first->second; };
    for (const FsEntry& e : c.fs) at(e.prefix).access = e.access;
    // A guard or a listable directory changes no access (listing is
    // granted separately).
    for (const std::string& g : c.guards) {
        FsTableEntry& e = at(g);
        e.access = access_at(c, g);
        e.guard = true;
    }
    for (const std::string& l : c.listable) {
        FsTableEntry& e = at(l);
        e.access |= access_at(c, l);
        e.listable = true;
    }
    // Every ancestor of an entry is an entry too, with the access its path
    // has anyway, so that one lookup tells the kernel side that no entry
    // lies below a directory (CONFINE_FS_LEAF in bpf/fs.h).
    std::vector<std::string> ancestors;
    for (const auto& [prefix, e] : t)
        for (std::string a = prefix; a.size() > 1;) {
            a = a.substr(0, std::max<size_t>(a.rfind('/'), 1));
            if (!t.contains(a)) ancestors.push_back(a);
        }
    for (const std::string& a : ancestors) at(a).access = access_at(c, a);
    // The entries below p sort together from p + "/" on (not right after p:
    // "/a b" and "/a.c" come between "/a" and "/a/"); below "/" are all others.
    for (auto& [prefix, e] : t) {
        std::string below = prefix == "/" ? prefix : prefix + "/";
        auto next = prefix == "/" ? t.upper_bound(prefix) : t.lower_bound(below);
        e.leaf = next == t.end() || !next->first.starts_with(below);
    }
    std::vector<FsTableEntry> out;
    for (auto& [prefix, e] : t) out.push_back(std::move(e));
    return out;
}

}  // namespace confine::policy
