// Policy file parser: the contract's TOML schema, checked strictly. Every
// unknown key or wrong type is reported, since a typo in a security policy
// that is silently ignored would quietly widen or narrow what a job may do.
#include <arpa/inet.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "common/text.h"
#include "policy/policy.h"

namespace confine::policy {

std::string Diagnostic::str() const {
    if (where.line <= 0) return fmt::format("{}: {}", file, message);
    return fmt::format("{}:{}:{}: {}", file, where.line, where.col, message);
}

namespace {

// sun_path holds 108 bytes: a path needs its NUL, an abstract name its
// leading NUL, so both get 107.
constexpr size_t kUnixNameMax = sizeof(sockaddr_un{}.sun_path) - 1;

Location location(const toml::source_region& r) {
    return {static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
}

std::string join(std::initializer_list<std::string_view> names) {
    std::string out;
    for (auto n : names) {
        if (!out.empty()) out += ", ";
        out += n;
    }
    return out;
}

bool is_variable(std::string_view name) {
    return name == "workdir" || name == "home" || name == "tmp" || name == "user_home";
}

std::string unknown_variable(std::string_view name) {
    return fmt::format("uses unknown variable '{{{}}}'; expected {{workdir}}, {{home}}, {{tmp}} or {{user_home}}",
                       name);
}

// Only the syntax of a rule path is checked here; compile() expands it.
// Braces are reserved for variables, and a variable may only start a path,
// so that every rule is absolute once expanded.
std::optional<std::string> rule_path_problem(std::string_view p) {
    constexpr auto npos = std::string_view::npos;
    if (p.empty()) return "is empty";
    if (p.find('\0') != npos) return "contains a NUL byte";
    size_t body = 0;  // where the part after the variable begins
    if (p.front() == '{') {
        size_t close = p.find('}');
        if (close == npos) return "has a '{' without a closing '}'";
        auto name = p.substr(1, close - 1);
        if (!is_variable(name)) return unknown_variable(name);
        body = close + 1;
        if (body < p.size() && p[body] != '/') return fmt::format("has variable {{{}}} not followed by '/'", name);
    } else if (p.front() != '/') {
        return "is relative; a rule must start with '/' or a variable such as {workdir}";
    }
    if (size_t brace = p.find_first_of("{}", body); brace != npos) {
        size_t close = p.find('}', brace);
        if (p[brace] == '{' && close != npos) {
            auto name = p.substr(brace + 1, close - brace - 1);
            if (!is_variable(name)) return unknown_variable(name);
            return fmt::format("has variable {{{}}} in the middle; variables may only start a path", name);
        }
        return fmt::format("has a stray '{}'", p[brace]);
    }
    // '..' can't be resolved lexically once symlinks are involved.
    for (size_t i = body; i < p.size();) {
        size_t end = p.find('/', i);
        if (end == npos) end = p.size();
        if (p.substr(i, end - i) == "..") return "contains '..'";
        i = end + 1;
    }
    return std::nullopt;
}

std::optional<uint16_t> parse_port(std::string_view s) {
    unsigned v = 0;
    if (s.empty() || s.size() > 5) return std::nullopt;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || v > 65535) return std::nullopt;
    return static_cast<uint16_t>(v);
}

// "tcp://1.2.3.4:80", "udp://[::1]:53", "unix:/path", "unix-abstract:name".
// Port 0 is allowed for bind only: it means whatever port the kernel picks.
std::expected<Endpoint, std::string> parse_endpoint(std::string_view text, bool for_bind) {
    const std::string expected_forms = "expected tcp://IP:PORT, udp://IP:PORT, unix:/PATH or unix-abstract:NAME";
    Endpoint ep;
    ep.text = std::string(text);
    if (text.find('\0') != std::string_view::npos) return std::unexpected("contains a NUL byte");

    if (text.starts_with("unix:")) {
        ep.kind = Endpoint::Kind::Unix;
        ep.name = std::string(text.substr(5));
        if (!ep.name.starts_with('/')) return std::unexpected("a unix socket path must be absolute");
        if (ep.name.size() > kUnixNameMax)
            return std::unexpected(
                fmt::format("unix socket path is {} bytes; at most {} fit", ep.name.size(), kUnixNameMax));
        return ep;
    }
    if (text.starts_with("unix-abstract:")) {
        ep.kind = Endpoint::Kind::UnixAbstract;
        ep.name = std::string(text.substr(14));
        if (ep.name.empty() || ep.name.size() > kUnixNameMax)
            return std::unexpected(fmt::format("an abstract socket name must be 1 to {} bytes", kUnixNameMax));
        return ep;
    }

    std::string_view rest;
    if (text.starts_with("tcp://")) {
        ep.kind = Endpoint::Kind::Tcp;
        rest = text.substr(6);
    } else if (text.starts_with("udp://")) {
        ep.kind = Endpoint::Kind::Udp;
        rest = text.substr(6);
    } else {
        return std::unexpected(expected_forms);
    }

    std::string host;
    std::string_view port;
    bool bracketed = rest.starts_with('[');
    if (bracketed) {
        size_t close = rest.find(']');
        if (close == std::string_view::npos) return std::unexpected("missing ']' after the IPv6 address");
        host = std::string(rest.substr(1, close - 1));
        if (close + 1 >= rest.size() || rest[close + 1] != ':')
            return std::unexpected("missing ':PORT' after the address");
        port = rest.substr(close + 2);
    } else {
        size_t colon = rest.rfind(':');
        if (colon == std::string_view::npos) return std::unexpected("missing ':PORT' after the address");
        host = std::string(rest.substr(0, colon));
        port = rest.substr(colon + 1);
        if (host.find(':') != std::string::npos)
            return std::unexpected("an IPv6 address must be in brackets, as in tcp://[::1]:80");
    }

    in_addr v4{};
    in6_addr v6{};
    if (bracketed && inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
        std::copy_n(v6.s6_addr, 16, ep.addr.begin());
    } else if (!bracketed && inet_pton(AF_INET, host.c_str(), &v4) == 1) {
        // The kernel sees IPv4 through IPv6 sockets as ::ffff:a.b.c.d, so one
        // address form covers both families.
        ep.addr[10] = ep.addr[11] = 0xff;
        std::copy_n(reinterpret_cast<const uint8_t*>(&v4.s_addr), 4, ep.addr.begin() + 12);
    } else if (bracketed) {
        return std::unexpected(fmt::format("'{}' is not an IPv6 address", host));
    } else {
        return std::unexpected(
            fmt::format("'{}' is not an IP address; host names are not allowed, use an IP literal such as "
                        "127.0.0.1",
                        host));
    }

    auto p = parse_port(port);
    if (!p) return std::unexpected(fmt::format("port '{}' is not a number from 0 to 65535", port));
    if (*p == 0 && !for_bind) return std::unexpected("port 0 is only allowed in network.bind");
    ep.port = *p;
    return ep;
}

bool lower_ldh(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

// A host name as DNS spells it: dot-separated labels of letters, digits
// and inner hyphens, 1 to 63 bytes each, 253 in all, the last not all
// digits (no top-level domain is; so "127.0.0.1" is no name, nor can
// "*.0.0.1" ever match an address). Lowercase expected.
bool is_host_name(std::string_view s) {
    if (s.empty() || s.size() > 253) return false;
    for (size_t start = 0;;) {
        size_t dot = s.find('.', start);
        std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
        if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
            !std::all_of(label.begin(), label.end(), lower_ldh))
            return false;
        if (dot == std::string_view::npos)
            return !std::all_of(label.begin(), label.end(), [](char c) { return c >= '0' && c <= '9'; });
        start = dot + 1;
    }
}

// "name", "*.name" or either with ":PORT".
std::expected<Domain, std::string> parse_domain(std::string_view text) {
    Domain d;
    d.text = std::string(text);
    std::string_view name = text;
    if (size_t colon = text.rfind(':'); colon != std::string_view::npos) {
        auto port = parse_port(text.substr(colon + 1));
        if (!port || *port == 0)
            return std::unexpected(fmt::format("port '{}' is not a number from 1 to 65535", text.substr(colon + 1)));
        d.ports = {*port};
        name = text.substr(0, colon);
    } else {
        d.ports = {80, 443};
    }
    d.name = lowercase(name);
    std::string_view host = d.name;
    if (host.starts_with("*.")) host.remove_prefix(2);
    in_addr v4{};
    in6_addr v6{};
    std::string bare(host.starts_with('[') && host.ends_with(']') ? host.substr(1, host.size() - 2) : host);
    if (inet_pton(AF_INET, bare.c_str(), &v4) == 1 || inet_pton(AF_INET6, bare.c_str(), &v6) == 1)
        return std::unexpected("an IP address is not a name; list addresses in network.connect");
    if (host.ends_with('.')) return std::unexpected("write the name without the trailing dot");
    if (!is_host_name(host))
        return std::unexpected(
            "expected a host name (letters, digits, '-' and '.'), '*.' and a name, either with an optional "
            ":PORT");
    return d;
}

bool is_env_name(std::string_view s) {
    auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (s.empty() || !alpha(s.front())) return false;
    return std::all_of(s.begin() + 1, s.end(), [&](char c) { return alpha(c) || digit(c); });
}

// What is wrong with an environment variable name, if anything.
std::optional<std::string> env_name_problem(std::string_view name, const Policy& p) {
    if (!is_env_name(name)) return fmt::format("'{}' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)", name);
    if (name == "HOME" || name == "TMPDIR")
        return fmt::format("{} is set by confine (to {{{}}}) and can't be kept or set", name,
                           name == "HOME" ? "home" : "tmp");
    if (!p.net.domains.empty() && std::ranges::count(kProxyEnv, name))
        return fmt::format(
            "{} is set by confine to the job's proxy when network.domains is given, and can't be "
            "kept or set",
            name);
    return std::nullopt;
}

// A plain decimal, "512" or "1.5": no sign, exponent or spaces.
std::optional<double> parse_decimal(std::string_view s) {
    size_t dot = s.find('.');
    auto digits = [](std::string_view d) {
        return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (dot == std::string_view::npos ? !digits(s) : !digits(s.substr(0, dot)) || !digits(s.substr(dot + 1)))
        return std::nullopt;
    double v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::fixed);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return v;
}

// What a [limits] number counts.
enum class Unit { Bytes, Tasks, Cpus };

// The forms a [limits] key accepts, for messages.
std::string limit_forms(Unit unit) {
    switch (unit) {
        case Unit::Bytes:
            return "write bytes as an integer (536870912), a size such as \"512M\" or \"2G\" "
                   "(K, M, G, T: powers of 1024), a share of the machine's memory such as \"50%\", "
                   "or \"max\"";
        case Unit::Tasks: return "write a whole number of tasks (processes and threads) such as 1024, or \"max\"";
        case Unit::Cpus:
            return "write a number of CPUs such as 1.5, a share of the machine's CPUs such as "
                   "\"50%\", or \"max\"";
    }
    return "";
}

// pids.max takes at most PID_MAX_LIMIT (include/linux/threads.h, 64-bit).
constexpr double kPidsMax = 4194304;
// cpu.max refuses a quota under 1 ms (kernel/sched/core.c, min_cfs_quota_period).
constexpr double kCpuMin = 0.01;
// Far below what a chrono deadline in nanoseconds can hold.
constexpr uint64_t kTimeoutMax = 365ull * 24 * 3600;

class Parser {
public:
    explicit Parser(std::string_view file) : file_(file) {}

    Policy run(const toml::table& root) {
        Policy p;
        p.source = file_;
        check_keys(root, "", {"version", "mode", "filesystem", "network", "process", "env", "limits"});
        version(root, p);
        mode(root, p);
        if (auto* t = table(root, "filesystem")) filesystem(*t, p);
        if (auto* t = table(root, "network")) network(*t, p);
        if (auto* t = table(root, "process")) process(*t, p);
        if (auto* t = table(root, "env")) env(*t, p);
        if (auto* t = table(root, "limits")) limits(*t, p);
        return p;
    }

    std::vector<Diagnostic> take_diagnostics() {
        // Tables are walked in key order; report in source order instead.
        std::stable_sort(diags_.begin(), diags_.end(), [](const Diagnostic& a, const Diagnostic& b) {
            return std::pair(a.where.line, a.where.col) < std::pair(b.where.line, b.where.col);
        });
        return std::move(diags_);
    }

private:
    void error(Location where, std::string message) { diags_.push_back({file_, where, std::move(message)}); }
    void error(const toml::source_region& r, std::string message) { error(location(r), std::move(message)); }

    // `prefix` is the table's dotted name, empty for the top level.
    void check_keys(const toml::table& t, std::string_view prefix, std::initializer_list<std::string_view> allowed) {
        for (auto&& [key, node] : t) {
            if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
            if (prefix.empty() && node.is_table())
                error(key.source(), fmt::format("unknown table '{}'; expected one of "
                                                "filesystem, network, process, env, limits",
                                                key.str()));
            else
                error(key.source(), fmt::format("unknown key '{}{}{}'; expected one of {}", prefix,
                                                prefix.empty() ? "" : ".", key.str(), join(allowed)));
        }
    }

    const toml::table* table(const toml::table& root, std::string_view name) {
        const toml::node* n = root.get(name);
        if (!n) return nullptr;
        if (auto* t = n->as_table()) return t;
        error(n->source(), fmt::format("{} must be a table", name));
        return nullptr;
    }

    // The strings of an array; elements of other types are reported and skipped.
    std::vector<const toml::value<std::string>*> strings(const toml::node& n, std::string_view name) {
        std::vector<const toml::value<std::string>*> out;
        const toml::array* a = n.as_array();
        if (!a) {
            error(n.source(), fmt::format("{} must be an array of strings", name));
            return out;
        }
        for (const toml::node& el : *a) {
            if (auto* s = el.as_string())
                out.push_back(s);
            else
                error(el.source(), fmt::format("{} must be an array of strings", name));
        }
        return out;
    }

    void version(const toml::table& root, Policy& p) {
        const toml::node* n = root.get("version");
        if (!n) {
            error(Location{1, 1}, "missing 'version = 1' at the top of the policy");
            return;
        }
        auto v = n->value_exact<int64_t>();
        if (!v) {
            error(n->source(), "version must be the integer 1");
        } else if (*v != 1) {
            error(n->source(), fmt::format("unsupported policy version {}; this confine reads version 1", *v));
        } else {
            p.version = 1;
        }
    }

    void mode(const toml::table& root, Policy& p) {
        const toml::node* n = root.get("mode");
        if (!n) return;
        auto v = n->value_exact<std::string>();
        if (v == "enforce")
            p.mode = Mode::Enforce;
        else if (v == "audit")
            p.mode = Mode::Audit;
        else
            error(n->source(), "mode must be \"enforce\" or \"audit\"");
    }

    void rules(const toml::table& t, std::string_view key, std::vector<PathRule>& out) {
        const toml::node* n = t.get(key);
        if (!n) return;
        std::string name = fmt::format("filesystem.{}", key);
        for (auto* s : strings(*n, name)) {
            if (auto problem = rule_path_problem(s->get()))
                error(s->source(), fmt::format("{}: path '{}' {}", name, s->get(), *problem));
            else
                out.push_back({s->get(), location(s->source())});
        }
    }

    void filesystem(const toml::table& t, Policy& p) {
        check_keys(t, "filesystem", {"read", "write", "deny_write", "deny", "exec", "protect_git"});
        rules(t, "read", p.fs.read);
        rules(t, "write", p.fs.write);
        rules(t, "deny_write", p.fs.deny_write);
        rules(t, "deny", p.fs.deny);
        rules(t, "protect_git", p.fs.protect_git);
        if (t.contains("exec")) {
            p.fs.exec.emplace();
            rules(t, "exec", *p.fs.exec);
        }
    }

    void endpoints(const toml::table& t, std::string_view key, std::vector<Endpoint>& out) {
        const toml::node* n = t.get(key);
        if (!n) return;
        std::string name = fmt::format("network.{}", key);
        for (auto* s : strings(*n, name)) {
            auto ep = parse_endpoint(s->get(), key == "bind");
            if (!ep) {
                error(s->source(), fmt::format("{}: bad endpoint '{}': {}", name, s->get(), ep.error()));
                continue;
            }
            ep->where = location(s->source());
            out.push_back(std::move(*ep));
        }
    }

    void network(const toml::table& t, Policy& p) {
        check_keys(t, "network", {"connect", "bind", "families", "domains"});
        endpoints(t, "connect", p.net.connect);
        endpoints(t, "bind", p.net.bind);
        if (const toml::node* n = t.get("domains")) {
            for (auto* s : strings(*n, "network.domains")) {
                auto d = parse_domain(s->get());
                if (!d) {
                    error(s->source(), fmt::format("network.domains: bad entry '{}': {}", s->get(), d.error()));
                    continue;
                }
                d->where = location(s->source());
                p.net.domains.push_back(std::move(*d));
            }
        }
        if (const toml::node* n = t.get("families")) {
            for (auto* s : strings(*n, "network.families")) {
                auto it = std::ranges::find(family_names(), std::string_view(s->get()),
                                            &std::pair<std::string_view, int>::first);
                if (it == family_names().end())
                    error(s->source(), fmt::format("network.families: unknown address family '{}' "
                                                   "(e.g. netlink, packet, vsock, bluetooth, can, alg)",
                                                   s->get()));
                else
                    p.net.families.push_back(it->second);
            }
        }
    }

    void process(const toml::table& t, Policy& p) {
        check_keys(t, "process", {"user_namespaces"});
        if (const toml::node* n = t.get("user_namespaces")) {
            if (auto b = n->value_exact<bool>())
                p.user_namespaces = *b;
            else
                error(n->source(), "process.user_namespaces must be true or false");
        }
    }

    void env(const toml::table& t, Policy& p) {
        check_keys(t, "env", {"keep", "set"});
        if (const toml::node* n = t.get("keep")) {
            for (auto* s : strings(*n, "env.keep")) {
                if (auto problem = env_name_problem(s->get(), p))
                    error(s->source(), "env.keep: " + *problem);
                else
                    p.env_keep.push_back(s->get());
            }
        }
        if (const toml::node* n = t.get("set")) {
            const toml::table* set = n->as_table();
            if (!set) {
                error(n->source(), "env.set must be a table of strings, such as { NAME = \"value\" }");
                return;
            }
            for (auto&& [key, value] : *set) {
                if (auto problem = env_name_problem(key.str(), p))
                    error(key.source(), "env.set: " + *problem);
                else if (auto v = value.value_exact<std::string>())
                    p.env_set.emplace_back(std::string(key.str()), *v);
                else
                    error(value.source(), fmt::format("env.set.{} must be a string", key.str()));
            }
        }
    }

    // One of memory, swap, pids, cpu: a number, or a string with a unit
    // suffix, a percentage or "max". Only the form and range are checked
    // here; compile() turns percentages into amounts for the machine.
    void limit(const toml::table& t, std::string_view key, Unit unit, Limit& out) {
        const toml::node* n = t.get(key);
        if (!n) return;
        auto bad = [&](std::string why) {
            error(n->source(), fmt::format("limits.{}: {}; {}", key, why, limit_forms(unit)));
        };
        Limit l;
        l.where = location(n->source());
        l.kind = Limit::Kind::Value;
        std::string shown;  // the value as written, for messages
        if (auto i = n->value_exact<int64_t>()) {
            shown = fmt::format("{}", *i);
            if (*i < 0) return bad(shown + " is negative");
            l.value = static_cast<double>(*i);
        } else if (auto d = n->value_exact<double>()) {
            shown = fmt::format("{}", *d);
            if (unit != Unit::Cpus) return bad(shown + " is not a whole number");
            if (*d < 0) return bad(shown + " is negative");
            if (std::isnan(*d)) return bad(shown + " is not a number of CPUs");
            l.value = *d;
        } else if (auto s = n->value_exact<std::string>()) {
            shown = fmt::format("\"{}\"", *s);
            std::string_view v = *s;
            if (v == "max") {
                out = {Limit::Kind::Max, 0, l.where};
                return;
            }
            if (v.starts_with('-')) return bad(shown + " is negative");
            double scale = 1;
            if (v.ends_with('%') && unit != Unit::Tasks) {
                l.kind = Limit::Kind::Percent;
                v.remove_suffix(1);
            } else if (unit == Unit::Bytes && !v.empty()) {
                size_t at = std::string_view("KMGT").find(
                    static_cast<char>(std::toupper(static_cast<unsigned char>(v.back()))));
                if (at != std::string_view::npos) {
                    scale = std::ldexp(1.0, 10 * static_cast<int>(at + 1));
                    v.remove_suffix(1);
                }
            }
            auto number = parse_decimal(v);
            if (!number)
                return bad(shown + (unit == Unit::Bytes   ? " is not a size"
                                    : unit == Unit::Tasks ? " is not a number of tasks"
                                                          : " is not a number of CPUs"));
            // Bytes and tasks are whole; a fraction only makes sense with a
            // unit ("1.5G").
            bool fraction_ok = unit == Unit::Cpus || l.kind == Limit::Kind::Percent || scale != 1;
            if (!fraction_ok && *number != std::floor(*number)) return bad(shown + " is not a whole number");
            l.value = l.kind == Limit::Kind::Percent || unit == Unit::Cpus ? *number : std::floor(*number * scale);
        } else {
            error(n->source(), fmt::format("limits.{} must be a number or a string; {}", key, limit_forms(unit)));
            return;
        }

        // Values that would stop the job from ever running, or that the
        // kernel refuses.
        if (l.kind == Limit::Kind::Percent && l.value > 100) return bad(shown + " is more than the whole machine");
        if (l.value == 0 && key != "swap") return bad(shown + " would stop the job from running at all");
        if (unit == Unit::Tasks && l.value > kPidsMax)
            return bad(fmt::format("{} is more than the kernel allows ({})", shown, kPidsMax));
        if (unit == Unit::Cpus && l.kind == Limit::Kind::Value && l.value < kCpuMin)
            return bad(
                fmt::format("{} is less than the kernel's minimum of {} CPUs (1 ms per 100 ms)", shown, kCpuMin));
        if (unit == Unit::Cpus && l.kind == Limit::Kind::Value && l.value > 1e6)
            return bad(shown + " is more CPUs than any machine has");
        out = l;
    }

    void limits(const toml::table& t, Policy& p) {
        check_keys(t, "limits", {"memory", "swap", "pids", "cpu", "timeout"});
        limit(t, "memory", Unit::Bytes, p.limits.memory);
        limit(t, "swap", Unit::Bytes, p.limits.swap);
        limit(t, "pids", Unit::Tasks, p.limits.pids);
        limit(t, "cpu", Unit::Cpus, p.limits.cpu);
        const toml::node* n = t.get("timeout");
        if (!n) return;
        if (auto i = n->value_exact<int64_t>()) {
            if (*i < 0)
                error(n->source(), fmt::format("limits.timeout: {} is negative; write \"90s\", \"30m\", "
                                               "\"2h\" or whole seconds, or 0 for none",
                                               *i));
            else if (static_cast<uint64_t>(*i) > kTimeoutMax)
                error(n->source(), fmt::format("limits.timeout: {} s is longer than a year; leave timeout "
                                               "out for none",
                                               *i));
            else
                p.limits.timeout_s = static_cast<uint64_t>(*i);
        } else if (auto s = n->value_exact<std::string>()) {
            if (auto d = parse_duration(*s))
                p.limits.timeout_s = *d;
            else
                error(n->source(), "limits.timeout: " + d.error());
        } else {
            error(n->source(),
                  "limits.timeout must be a duration such as \"90s\", \"30m\" or \"2h\", or "
                  "whole seconds");
        }
    }

    std::string file_;
    std::vector<Diagnostic> diags_;
};

Diagnostic syntax_error(const toml::parse_error& e, std::string_view filename) {
    return {std::string(filename), location(e.source()), std::string(e.description())};
}

}  // namespace

std::expected<uint64_t, std::string> parse_duration(std::string_view text) {
    std::string_view digits = text;
    uint64_t unit = 1;
    if (!text.empty()) {
        size_t at = std::string_view("smh").find(text.back());
        if (at != std::string_view::npos) {
            unit = at == 0 ? 1 : at == 1 ? 60 : 3600;
            digits.remove_suffix(1);
        }
    }
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || end != digits.data() + digits.size() ||
        (ec != std::errc{} && ec != std::errc::result_out_of_range))
        return std::unexpected(
            fmt::format("'{}' is not a duration; write \"90s\", \"30m\", \"2h\" or whole "
                        "seconds, or 0 for none",
                        text));
    if (ec == std::errc::result_out_of_range || n > kTimeoutMax / unit)
        return std::unexpected(fmt::format("'{}' is longer than a year; leave the timeout out for none", text));
    return n * unit;
}

std::expected<Policy, std::vector<Diagnostic>> parse(std::string_view text, std::string_view filename) {
    // toml++ reports syntax errors by exception or by result, depending on
    // how it was configured; both end up as one diagnostic.
#if TOML_EXCEPTIONS
    toml::table root;
    try {
        root = toml::parse(text, std::string(filename));
    } catch (const toml::parse_error& e) {
        return std::unexpected(std::vector{syntax_error(e, filename)});
    }
#else
    toml::parse_result result = toml::parse(text, std::string(filename));
    if (!result) return std::unexpected(std::vector{syntax_error(result.error(), filename)});
    const toml::table& root = result.table();
#endif
    Parser parser(filename);
    Policy p = parser.run(root);
    auto diags = parser.take_diagnostics();
    if (!diags.empty()) return std::unexpected(std::move(diags));
    return p;
}

Result<Policy> parse_file(const std::string& file) {
    auto text = read_file(file, "policy: reading");
    if (!text) return fail(text.error());
    auto p = parse(*text, file);
    if (!p) {
        std::string message;
        for (const auto& d : p.error()) {
            if (!message.empty()) message += '\n';
            message += d.str();
        }
        return fail(Error::msg(std::move(message)));
    }
    return std::move(*p);
}

const std::vector<std::pair<std::string_view, int>>& family_names() {
    // AF_* numbers are kernel ABI (include/linux/socket.h).
    static const std::vector<std::pair<std::string_view, int>> names = {
        {"unix", AF_UNIX},
        {"inet", AF_INET},
        {"inet6", AF_INET6},
        {"netlink", AF_NETLINK},
        {"packet", AF_PACKET},
        {"key", AF_KEY},
        {"appletalk", AF_APPLETALK},
        {"ax25", AF_AX25},
        {"x25", AF_X25},
        {"llc", AF_LLC},
        {"can", AF_CAN},
        {"tipc", AF_TIPC},
        {"bluetooth", AF_BLUETOOTH},
        {"rds", AF_RDS},
        {"alg", AF_ALG},
        {"nfc", AF_NFC},
        {"vsock", AF_VSOCK},
        {"kcm", AF_KCM},
        {"qipcrtr", AF_QIPCRTR},
        {"smc", AF_SMC},
        {"xdp", AF_XDP},
        {"mctp", 45},  // AF_MCTP: newer than glibc 2.36's headers
    };
    return names;
}

}  // namespace confine::policy
