// confine: run a command confined by BPF-LSM programs attached to its cgroup.
#include <fcntl.h>
#include <fmt/format.h>
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <string>

#include "common/text.h"
#include "loader/audit_summary.h"
#include "loader/bpf_objects.h"
#include "loader/daemon.h"
#include "loader/libbpf_log.h"
#include "loader/probe.h"
#include "loader/run.h"
#include "loader/suggest.h"
#include "policy/policy.h"

namespace {

constexpr const char* kUsage = R"(usage:
  confine run [--policy FILE] [--workdir DIR] [--user USER] [--mode enforce|audit]
              [--audit-log FILE|journal] [--on-audit-error kill|continue] [--job-id ID]
              [--timeout DURATION] [--allow-root] [--seed-home DIR] [--keep-dirs]
              [--print-policy] [-v] -- CMD [ARG...]
  confine daemon [--socket PATH] [--ceiling FILE] [--config FILE] [--group GROUP]
                         start jobs for users without root (docs/daemon.md)
  confine audit [--json] [FILE...]
                         summarize audit logs (stdin without FILE): denials per job, op, target
  confine audit --suggest [--policy BASE] [--workdir DIR] [FILE...]
                         the policy that would have allowed a run logged in audit mode
  confine probe [-v]     can this kernel enforce? exit 0, or explain and exit 1
  confine check FILE     validate a policy; errors as FILE:LINE:COL: message
)";

int usage_error(const std::string& what) {
    fmt::print(stderr, "confine: {}\n{}", what, kUsage);
    return confine::kExitFailure;
}

int cmd_run(int argc, char** argv) {
    confine::RunOptions o;
    bool verbose = false;
    enum {
        kPolicy = 256,
        kWorkdir,
        kUser,
        kMode,
        kAuditLog,
        kJobId,
        kAllowRoot,
        kPrintPolicy,
        kKeepDirs,
        kTimeout,
        kSeedHome,
        kOnAuditError
    };
    static const option longopts[] = {
        {"policy", required_argument, nullptr, kPolicy},
        {"workdir", required_argument, nullptr, kWorkdir},
        {"user", required_argument, nullptr, kUser},
        {"mode", required_argument, nullptr, kMode},
        {"audit-log", required_argument, nullptr, kAuditLog},
        {"job-id", required_argument, nullptr, kJobId},
        {"allow-root", no_argument, nullptr, kAllowRoot},
        {"print-policy", no_argument, nullptr, kPrintPolicy},
        {"keep-dirs", no_argument, nullptr, kKeepDirs},
        {"timeout", required_argument, nullptr, kTimeout},
        {"seed-home", required_argument, nullptr, kSeedHome},
        {"on-audit-error", required_argument, nullptr, kOnAuditError},
        {"verbose", no_argument, nullptr, 'v'},
        {nullptr, 0, nullptr, 0},
    };
    int c;
    // '+': stop at the first non-option, so CMD's own options stay its own.
    while ((c = getopt_long(argc, argv, "+v", longopts, nullptr)) != -1) {
        switch (c) {
            case kPolicy: o.policy_file = optarg; break;
            case kWorkdir: o.workdir = optarg; break;
            case kUser: o.user = optarg; break;
            case kMode:
                if (strcmp(optarg, "enforce") == 0)
                    o.mode = confine::policy::Mode::Enforce;
                else if (strcmp(optarg, "audit") == 0)
                    o.mode = confine::policy::Mode::Audit;
                else
                    return usage_error(fmt::format("--mode must be enforce or audit, not '{}'", optarg));
                break;
            case kAuditLog: o.audit_log = optarg; break;
            case kJobId: o.job_id = optarg; break;
            case kAllowRoot: o.allow_root = true; break;
            case kPrintPolicy: o.print_policy = true; break;
            case kKeepDirs: o.keep_dirs = true; break;
            case kSeedHome: o.seed_home = optarg; break;
            case kOnAuditError:
                if (strcmp(optarg, "kill") == 0)
                    o.on_audit_error = confine::AuditErrorAction::Kill;
                else if (strcmp(optarg, "continue") == 0)
                    o.on_audit_error = confine::AuditErrorAction::Continue;
                else
                    return usage_error(fmt::format("--on-audit-error must be kill or continue, not '{}'", optarg));
                break;
            case kTimeout:
                if (auto d = confine::policy::parse_duration(optarg))
                    o.timeout_s = *d;
                else
                    return usage_error("--timeout: " + d.error());
                break;
            case 'v': verbose = true; break;
            default: return usage_error("run: bad option");
        }
    }
    for (int i = optind; i < argc; i++) o.command.push_back(argv[i]);
    confine::set_libbpf_verbose(verbose);
    // A log reader that went away is a write error to handle
    // (--on-audit-error), not the end of confine and its supervision. And
    // a job that sets TOSTOP on a terminal it shares with confine must not
    // stop confine with SIGTTOU when it writes there.
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    // Without root, the daemon starts the job.
    return geteuid() == 0 ? confine::run(o) : confine::run_through_daemon(o);
}

int cmd_daemon(int argc, char** argv) {
    confine::DaemonOptions o;
    static const option longopts[] = {
        {"socket", required_argument, nullptr, 's'},
        {"ceiling", required_argument, nullptr, 'c'},
        {"config", required_argument, nullptr, 'f'},
        {"group", required_argument, nullptr, 'g'},
        {nullptr, 0, nullptr, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
        switch (c) {
            case 's': o.socket = optarg; break;
            case 'c': o.ceiling = optarg; break;
            case 'f': o.config = optarg; break;
            case 'g': o.group = optarg; break;
            default: return usage_error("daemon: bad option");
        }
    }
    if (optind != argc) return usage_error("daemon: unexpected argument '" + std::string(argv[optind]) + "'");
    return confine::daemon_main(o);
}

int cmd_audit(int argc, char** argv) {
    bool as_json = false, suggest = false;
    confine::SuggestOptions so;
    std::vector<std::string> files;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--json")
            as_json = true;
        else if (a == "--suggest")
            suggest = true;
        else if ((a == "--policy" || a == "--workdir") && i + 1 < argc)
            (a == "--policy" ? so.base_file : so.workdir) = argv[++i];
        else if (a.starts_with("-") && a != "-")
            return usage_error("audit: unknown option '" + a + "'");
        else
            files.push_back(a);
    }
    // Every log, one text (an empty one adds nothing).
    std::string text;
    if (files.empty()) files.push_back("-");
    for (const std::string& f : files) {
        confine::Fd in(f == "-" ? dup(STDIN_FILENO) : open(f.c_str(), O_RDONLY | O_CLOEXEC));
        auto log = in ? confine::read_fd(in.get()) : std::unexpected(errno);
        if (!log) {
            fmt::print(stderr, "confine: audit: reading {}: {}\n", f, strerror(log.error()));
            return 1;
        }
        text += *log + '\n';
    }
    std::istringstream all(text);
    if (suggest) {
        auto p = confine::suggest_policy(all, so);
        if (!p) {
            fmt::print(stderr, "confine: {}\n", p.error().message);
            return 1;
        }
        fmt::print("{}", *p);
        return 0;
    }
    confine::AuditSummary s;
    s.add(all);
    fmt::print("{}", as_json ? s.json() : s.text());
    return 0;
}

int cmd_probe(int argc, char** argv) {
    bool verbose = argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--verbose") == 0);
    confine::set_libbpf_verbose(verbose);
    if (auto r = confine::probe(); !r) {
        fmt::print(stderr, "confine: {}\n", r.error().message);
        return 1;
    }
    fmt::print("confine: this kernel can enforce (BPF LSM active, lsm_cgroup programs load and attach)\n");
    return 0;
}

int cmd_check(int argc, char** argv) {
    if (argc != 2) return usage_error("check: expected exactly one FILE");
    auto p = confine::policy::parse_file(argv[1]);
    if (!p) {
        fmt::print(stderr, "{}\n", p.error().message);
        return 1;
    }
    fmt::print("{}: ok\n", argv[1]);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage_error("missing command");
    std::string cmd = argv[1];
    if (cmd == "run") return cmd_run(argc - 1, argv + 1);
    if (cmd == "daemon") return cmd_daemon(argc - 1, argv + 1);
    if (cmd == "audit") return cmd_audit(argc - 1, argv + 1);
    if (cmd == "probe") return cmd_probe(argc - 1, argv + 1);
    if (cmd == "check") return cmd_check(argc - 1, argv + 1);
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        fmt::print("{}", kUsage);
        return 0;
    }
    return usage_error("unknown command '" + cmd + "'");
}
