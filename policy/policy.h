// The policy: parsed from the contract's TOML schema (parse.cpp), then
// compiled for one job (compile.cpp) into the rule tables the BPF side uses.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace confine::policy {

enum class Mode { Enforce, Audit };

struct Location {
    int line = 0;  // 1-based; 0 when unknown
    int col = 0;
    bool operator==(const Location&) const = default;
};

// "FILE:LINE:COL: message", the format of `confine check`.
struct Diagnostic {
    std::string file;
    Location where;
    std::string message;
    std::string str() const;
};

// A path rule as written, variables not yet expanded.
struct PathRule {
    std::string path;
    Location where;
    bool operator==(const PathRule&) const = default;
};

// A network destination: "tcp://127.0.0.1:3128", "udp://[::1]:53",
// "unix:/run/proxy.sock", "unix-abstract:name".
struct Endpoint {
    enum class Kind { Tcp, Udp, Unix, UnixAbstract };
    Kind kind = Kind::Tcp;
    std::array<uint8_t, 16> addr{};  // Tcp/Udp: IPv6, IPv4 as ::ffff:a.b.c.d
    uint16_t port = 0;               // Tcp/Udp, host order
    std::string name;                // Unix: path; UnixAbstract: name
    std::string text;                // as written, for messages
    Location where;
    bool operator==(const Endpoint&) const = default;
};

// A [network] domains entry: "api.example.com", "*.example.com",
// "example.com:8443". Reached through the job's filtering proxy.
struct Domain {
    std::string name;             // lowercase; "*.example.com" for a wildcard
    std::vector<uint16_t> ports;  // 80 and 443 unless the entry names one
    std::string text;             // as written, for messages
    Location where;
    bool operator==(const Domain&) const = default;
};

// S in ASCII lowercase: how host names are compared.
inline std::string lowercase(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return out;
}

// The proxy variables confine sets for a job with domains; a policy may
// neither keep nor set them.
inline constexpr std::string_view kProxyEnv[] = {"HTTP_PROXY",  "HTTPS_PROXY", "http_proxy",
                                                 "https_proxy", "NO_PROXY",    "no_proxy"};

// A [limits] value as written. Unset and Max both leave the kernel's
// default ("max") in place: nothing is written.
struct Limit {
    enum class Kind { Unset, Max, Value, Percent };
    Kind kind = Kind::Unset;
    double value = 0;  // Value: bytes, tasks or CPUs; Percent: of MemTotal or of the CPUs
    Location where;
    bool operator==(const Limit&) const = default;
};

struct Policy {
    std::string source;  // file name, or "<default>"
    int version = 1;
    Mode mode = Mode::Enforce;
    struct Fs {
        std::vector<PathRule> read, write, deny_write, deny;
        std::optional<std::vector<PathRule>> exec;  // absent: exec follows read
        // Work trees whose git metadata the account's own git will trust
        // later: compile() makes what git reads as config or code read-only.
        std::vector<PathRule> protect_git;
        bool operator==(const Fs&) const = default;
    } fs;
    struct Net {
        std::vector<Endpoint> connect, bind;
        std::vector<int> families;  // AF_* numbers granted beyond unix, inet, inet6
        std::vector<Domain> domains;
        bool operator==(const Net&) const = default;
    } net;
    bool user_namespaces = false;
    std::vector<std::string> env_keep;
    std::vector<std::pair<std::string, std::string>> env_set;
    struct Limits {
        Limit memory, swap, pids, cpu;
        uint64_t timeout_s = 0;  // wall clock; 0: none
        bool operator==(const Limits&) const = default;
    } limits;
    bool operator==(const Policy&) const = default;
};

// Every error found, not only the first.
std::expected<Policy, std::vector<Diagnostic>> parse(std::string_view text, std::string_view filename);
// Reads and parses FILE; all diagnostics joined in the error message.
Result<Policy> parse_file(const std::string& file);

// A duration: "90s", "30m", "2h", or whole seconds ("90"). Returns seconds
// (0: no timeout), or what is wrong with TEXT. [limits] timeout and
// `confine run --timeout` both read it.
std::expected<uint64_t, std::string> parse_duration(std::string_view text);

// The contract's embedded default policy (default.toml), and what it
// parses to.
std::string_view default_policy_text();
Policy default_policy();

// Values of the policy variables for one job.
struct Vars {
    std::string workdir, home, tmp, user_home;
    // What [limits] percentages are of; 0: read from this machine
    // (/proc/meminfo's MemTotal, the online CPUs).
    uint64_t mem_total = 0;  // bytes
    unsigned cpus = 0;
};

// Access bits; equal to CONFINE_FS_* in bpf/fs.h.
inline constexpr uint8_t kRead = 0x1, kWrite = 0x2, kExec = 0x4;

struct FsEntry {
    std::string prefix;  // absolute, normalized, symlinks resolved, no trailing '/' (but "/")
    uint8_t access = 0;  // effective access at and below prefix until a longer entry
};

// cpu.max's period: the quota is the number of CPUs times this.
inline constexpr uint64_t kCpuPeriodUs = 100000;

// [limits] as the job's cgroup gets them. Absent: no limit, nothing written.
struct CompiledLimits {
    std::optional<uint64_t> memory, swap;  // memory.max, memory.swap.max (bytes)
    std::optional<uint64_t> pids;          // pids.max (tasks: processes and threads)
    std::optional<uint64_t> cpu_quota_us;  // cpu.max "QUOTA 100000"
    uint64_t timeout_s = 0;                // 0: none
};

struct Compiled {
    Mode mode = Mode::Enforce;
    std::vector<FsEntry> fs;      // sorted by prefix, one entry per distinct prefix
    bool exec_allowlist = false;  // [filesystem] exec given: only it may run
    // Ancestors of rules that grant less than write. Moving one would carry
    // that rule's files to paths it doesn't cover, so none can be renamed
    // (at either end of a rename).
    std::vector<std::string> guards;
    // Directories above readable rules that no rule covers ("/", "/var"):
    // they may be listed (names only), so `ls /` works. Nothing below them
    // gains any access.
    std::vector<std::string> listable;
    // The read-only paths protect_git added (a subset of `fs`), for
    // --print-policy.
    std::vector<std::string> git_protected;
    std::vector<Endpoint> connect, bind;
    std::vector<Domain> domains;  // non-empty: the job gets a filtering proxy
    uint64_t families = 0;        // bit N: sockets of address family N may be created
    bool user_namespaces = false;
    std::vector<std::string> env_keep;
    std::vector<std::pair<std::string, std::string>> env_set;
    CompiledLimits limits;
};

// Names accepted in [network] families, and their AF_* numbers.
const std::vector<std::pair<std::string_view, int>>& family_names();

// Expands variables, resolves symlinks in rule paths (the existing part of
// each path), and merges the rules by longest-prefix precedence.
Result<Compiled> compile(const Policy& p, const Vars& vars);

// Matching is on whole components: "/home/u" covers "/home/u/x", not "/home/user".
bool covers(std::string_view prefix, std::string_view path);

// The access of PATH: the longest entry that is a whole-component prefix.
uint8_t access_at(const Compiled& c, std::string_view path);

// One entry of the kernel's table of a job's paths (the fs_rules map): the
// access at PREFIX, and whether it is a guard (no rename) or may be listed.
struct FsTableEntry {
    std::string prefix;
    uint8_t access = 0;
    bool guard = false;
    bool listable = false;
    bool leaf = false;  // no other entry lies below this one
    bool operator==(const FsTableEntry&) const = default;
};

// The table's entries, by prefix: the rules, their guards and the listable
// directories merged, and every ancestor of those, one entry per distinct
// prefix.
std::vector<FsTableEntry> fs_table(const Compiled& c);

// A job's policy within an administrator's ceiling (`confine daemon`): what
// both allow, path by path, destination by destination (docs/daemon.md
// "The ceiling"). Both must be compiled with the same variables.
Compiled intersect(const Compiled& job, const Compiled& ceiling);

// Human-readable effective policy, for `confine run --print-policy`.
std::string render(const Compiled& c);

}  // namespace confine::policy
