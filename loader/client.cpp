// `confine run` without root: the same job, started by `confine daemon`.
// The client passes its stdio and workdir as fds, forwards the signals a
// terminal or a runner sends it, writes the audit lines it receives where
// a run as root would, and exits with the job's status.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "loader/audit.h"
#include "loader/daemon.h"

extern char** environ;

namespace confine {
namespace {

bool same_file(int a, int b) {
    struct stat sa {
    }, sb{};
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
           (S_ISREG(sa.st_mode) || S_ISFIFO(sa.st_mode) || S_ISSOCK(sa.st_mode));
}

// The request, and where the audit lines go (the --audit-log file, opened
// as the caller, or stderr), refused where the job could write into it.
struct Prepared {
    wire::Request request;
    Fd audit;          // -1: stderr
    int job_stderr;    // which of our fds the job gets as its fd 2
    Fd workdir, null;  // null: for a closed stdio fd
};

Result<Prepared> prepare(const RunOptions& o) {
    Prepared p;
    wire::Request& r = p.request;
    if (o.allow_root) return fail(Error::msg("run: --allow-root: the daemon runs no job as root"));
    if (o.keep_dirs) return fail(Error::msg("run: --keep-dirs needs root: the daemon removes a job's directories"));
    if (!o.policy_file.empty()) {
        auto text = read_file(o.policy_file, "run: reading the policy");
        if (!text) return fail(text.error());
        r.policy = std::move(*text);
        r.policy_name = o.policy_file;
    }
    if (o.mode) r.mode = *o.mode == policy::Mode::Audit ? "audit" : "enforce";
    if (o.on_audit_error == AuditErrorAction::Continue) r.on_audit_error = "continue";
    r.job_id = o.job_id;
    if (o.timeout_s) r.timeout = std::to_string(*o.timeout_s);
    r.user = o.user;
    std::error_code ec;
    if (!o.seed_home.empty()) r.seed_home = std::filesystem::absolute(o.seed_home, ec).string();
    r.print_policy = o.print_policy;
    r.command = o.command;
    for (char** e = environ; *e; ++e) r.env.emplace_back(*e);
    if (r.env.size() > wire::kMaxItems) r.env.resize(wire::kMaxItems);

    p.workdir.reset(open(o.workdir.empty() ? "." : o.workdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!p.workdir) return fail(Error::sys("run: workdir " + (o.workdir.empty() ? "." : o.workdir)));
    if (o.audit_log.empty()) {
        // As a run as root: the audit lines take stderr, the job's stderr
        // joins its stdout, and a stdout that is stderr is refused.
        if (same_file(STDOUT_FILENO, STDERR_FILENO))
            return fail(Error::msg("audit: confine's stderr, where the audit log goes, is also the job's stdout")
                            .hint("Pass --audit-log FILE, or give confine's stderr a file or pipe of its own "
                                  "(not 2>&1), so no line in the log can be forged"));
        p.job_stderr = STDOUT_FILENO;
    } else if (o.audit_log == kJournal) {
        r.audit_log = o.audit_log;  // the worker writes the entries, as root
        p.job_stderr = STDERR_FILENO;
    } else {
        std::optional<int> given = inherited_fd(o.audit_log);
        p.audit.reset(given ? fcntl(*given, F_DUPFD_CLOEXEC, 3)
                            : open(o.audit_log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
        if (!p.audit) return fail(Error::sys("audit: opening " + o.audit_log));
        for (int fd : {0, 1, 2})
            if (same_file(p.audit.get(), fd))
                return fail(Error::msg("audit: the audit log " + o.audit_log + " is the job's stdin, stdout or stderr")
                                .hint("Give --audit-log a file or pipe of its own, so no line in it can be forged"));
        struct stat st {};
        if (fstat(p.audit.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
            return fail(
                Error::msg("audit: the audit log " + o.audit_log + " has other hard links, which the job may reach")
                    .hint("Give --audit-log a file with one name, outside the job's writable set"));
        // The daemon checks a named file is outside the job's writable set.
        if (!given) r.audit_log = std::filesystem::absolute(o.audit_log, ec).string();
        p.job_stderr = STDERR_FILENO;
    }
    p.null.reset(open("/dev/null", O_RDWR | O_CLOEXEC));
    return p;
}

Result<Fd> connect_daemon(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) return fail(Error::msg("run: socket path too long: " + path));
    memcpy(addr.sun_path, path.c_str(), path.size());
    Fd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s || connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        return fail(Error::sys("run: not root, and no confine daemon answers at " + path)
                        .hint("Start the daemon (docs/daemon.md), join its group, or run confine as root"));
    return s;
}

// Empty, or why S could not be written.
std::string write_all(int fd, std::string_view s) {
    while (!s.empty()) {
        ssize_t n = write(fd, s.data(), s.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? strerror(errno) : "nothing written";
        s.remove_prefix(static_cast<size_t>(n));
    }
    return "";
}

// Where the client writes the lines the daemon sends. After a failure, the
// first line the log takes again is led by a count of those it missed, as
// a run as root writes it.
class LineLog {
public:
    LineLog(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
    // Empty, or why LINE could not be written.
    std::string write(const std::string& line) {
        if (unwritten_) {
            auto j = nlohmann::json::parse(line, nullptr, false);
            const std::string job = j.is_object() ? j.value("job", "") : "";
            const uint64_t cgid = j.is_object() ? j.value("cgroup_id", uint64_t{0}) : 0;
            if (write_all(fd_, lost_record(job, cgid, unwritten_, "log_write_failed").json() + "\n").empty())
                unwritten_ = 0;
        }
        std::string why = unwritten_ ? failure_ : write_all(fd_, line);
        if (!why.empty()) {
            if (failure_.empty()) failure_ = why;
            unwritten_++;
            missed_++;
        }
        return why;
    }
    const std::string& name() const { return name_; }
    const std::string& failure() const { return failure_; }
    uint64_t missed() const { return missed_; }

private:
    int fd_;
    std::string name_, failure_;           // the first write that failed
    uint64_t unwritten_ = 0, missed_ = 0;  // since the log last took a line; all told
};

int error(const Error& e) {
    fmt::print(stderr, "confine: {}\n", e.message);
    return kExitFailure;
}

// The daemon's messages until the job's exit status: audit lines written
// to AUDIT, errors to stderr; signals (on SFD) passed on.
int relay(int sock, int sfd, int audit, const RunOptions& o) {
    LineLog log(audit, o.audit_log.empty() ? "stderr" : o.audit_log);
    for (;;) {
        pollfd pfds[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(pfds, 2, -1) < 0 && errno != EINTR) return error(Error::sys("run: poll"));
        if (pfds[1].revents & POLLIN) {
            signalfd_siginfo si{};
            while (read(sfd, &si, sizeof si) == sizeof si)
                (void)wire::send(sock, wire::Type::Signal, std::to_string(si.ssi_signo));
        }
        if (!pfds[0].revents) continue;
        auto m = wire::receive(sock);
        if (!m) return error(m.error());
        if (!*m) return error(Error::msg("run: the daemon closed the connection before the job's status"));
        switch ((*m)->type) {
            case wire::Type::Audit:
                // As a run as root does (--on-audit-error): returning closes
                // the connection, which ends the job; or it runs on.
                if (std::string why = log.write((*m)->payload);
                    !why.empty() && o.on_audit_error == AuditErrorAction::Kill)
                    return error(
                        Error::msg(fmt::format("audit: writing the audit log to {} failed ({}); the job was stopped",
                                               log.name(), why))
                            .hint("Give the log room or a reader; --on-audit-error continue lets jobs run on"));
                break;
            case wire::Type::Error: fmt::print(stderr, "confine: {}\n", (*m)->payload); break;
            case wire::Type::Exit:
                if (log.missed())
                    fmt::print(stderr,
                               "confine: audit: writing the audit log to {} failed ({}); {} lines were not written; "
                               "the job ran on\n",
                               log.name(), log.failure(), log.missed());
                return atoi((*m)->payload.c_str());
            default: return error(Error::msg("run: the daemon sent a message of an unknown type"));
        }
    }
}

}  // namespace

int run_through_daemon(const RunOptions& o) {
    auto p = prepare(o);
    if (!p) return error(p.error());
    std::string payload = wire::encode(p->request);
    if (payload.size() > wire::kMaxRequest)
        return error(Error::msg(fmt::format("run: the request is {} bytes, more than the daemon takes ({})",
                                            payload.size(), wire::kMaxRequest))
                         .hint("Shorten the policy or the environment"));
    const char* path = getenv("CONFINE_SOCKET");
    auto sock = connect_daemon(path && *path ? path : wire::kDefaultSocket);
    if (!sock) return error(sock.error());

    // A closed stdio fd travels as /dev/null.
    auto or_null = [&](int fd) { return fcntl(fd, F_GETFD) < 0 ? p->null.get() : fd; };
    std::vector<int> fds(wire::kRequestFds);
    fds[wire::kStdin] = or_null(STDIN_FILENO);
    fds[wire::kStdout] = or_null(STDOUT_FILENO);
    fds[wire::kJobStderr] = or_null(p->job_stderr);
    fds[wire::kStderr] = or_null(STDERR_FILENO);
    fds[wire::kWorkdir] = p->workdir.get();

    // Blocked before the request goes, so none is lost: each is passed on.
    sigset_t sigs;
    sigemptyset(&sigs);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);
    Fd sfd(signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK));
    if (auto r = wire::send(sock->get(), wire::Type::Request, payload, fds); !r) return error(r.error());
    p->workdir.reset();

    return relay(sock->get(), sfd.get(), p->audit ? p->audit.get() : STDERR_FILENO, o);
}

}  // namespace confine
