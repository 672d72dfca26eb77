// The embedded default policy of the contract, used when `confine run` gets
// no --policy. It is kept as TOML text and goes through the same parser as a
// user's policy, so it can be shown, copied and edited as a starting point.
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "policy/policy.h"

namespace confine::policy {

namespace {

constexpr std::string_view kDefaultPolicy = R"(# confine's embedded default policy.
version = 1
mode = "enforce"

[filesystem]
# The system, read-only. Paths missing on this machine (/nix/store, /lib32)
# are harmless: their rules simply never match.
read = [
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
  "/etc", "/opt", "/nix/store",
  "/proc", "/sys", "/dev/random", "/dev/urandom",
]
# The job's own tree, plus the device nodes every shell writes to
# (`> /dev/null`, the terminal, new ptys): writing them changes no file.
# /dev/pts and /dev/shm are the job's own: a private devpts instance (only
# the ptys it opens) and a private tmpfs (POSIX shared memory, semaphores),
# both gone with the job.
write = [
  "{workdir}", "{home}", "{tmp}",
  "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/shm",
]
# A hostile checkout must not plant anything in the repository's git
# metadata that the account's own git, run later outside the job, would
# execute or trust: hooks, config, commondir and the like, even before they
# exist, and .git itself where it is a file or missing (docs/design.md
# "What git trusts"; `confine run --print-policy` lists the paths).
protect_git = ["{workdir}"]
# The real account home holds credentials. Longer rules inside it, such as a
# workdir under it, still win.
deny = ["{user_home}"]

[network]
# Nothing but the job's own loopback, which is always allowed.
connect = []
bind = []

[process]
user_namespaces = false

[env]
# Enough for tools to find programs, pick a locale and drive the terminal;
# anything secret (tokens, SSH_AUTH_SOCK) stays out. HOME and TMPDIR are
# always set by confine.
keep = ["PATH", "LANG", "LC_ALL", "TERM"]

[limits]
# Half the machine's memory: room for a parallel build, a linker or a test
# suite, while a runaway job is OOM-killed inside its own cgroup long before
# the machine runs short and the kernel picks a victim outside it.
memory = "50%"
# No swap: a job past its memory is killed at once instead of thrashing the
# disk and filling the swap that the rest of the machine relies on.
swap = "0"
# Tasks count threads too, so a JVM or a parallel build may use hundreds;
# 4096 leaves plenty of room, while a fork bomb stops there instead of at
# the kernel's pid_max with the whole machine unable to fork.
pids = 4096
# No cap: the job's cgroup already gets only its fair share of the CPUs
# when others want them (cgroup v2 weights), and a cap would only slow
# builds on an idle machine.
cpu = "max"
# No wall-clock limit by default: only the runner knows how long a task may
# take (`confine run --timeout`).
)";

}  // namespace

std::string_view default_policy_text() {
    return kDefaultPolicy;
}

// toml++ reads a comment byte by byte like any other text, and comments are
// two thirds of the default: cutting them first took the policy's share of
// a job's start from 0.55 to 0.33 ms under icount. Lines stay where they
// are. Enough TOML for the default: no escaped quotes, no multi-line strings.
std::string without_comments(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    bool in_string = false, in_comment = false;
    for (char c : text) {
        if (c == '\n') {
            in_comment = in_string = false;
        } else if (in_comment || (c == '#' && !in_string)) {
            in_comment = true;
            continue;
        } else if (c == '"') {
            in_string = !in_string;
        }
        out += c;
    }
    return out;
}

// Parsed once per process: the daemon parses it before it forks workers,
// which start from its copy.
Policy default_policy() {
    static const Policy parsed = [] {
        auto p = parse(without_comments(kDefaultPolicy), "<default>");
        if (!p) {
            // A build whose own default doesn't parse must not run any job.
            for (const auto& d : p.error()) fmt::print(stderr, "confine: {}\n", d.str());
            fmt::print(stderr, "confine: the embedded default policy is invalid\n");
            std::abort();
        }
        return std::move(*p);
    }();
    return parsed;
}

}  // namespace confine::policy
