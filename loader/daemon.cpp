// `confine daemon`: one process that loaded the BPF objects, accepting
// clients on a SOCK_SEQPACKET socket; each connection is served by a
// forked worker that runs the job exactly as `confine run` as root would,
// with the caller's identity from SO_PEERCRED and its policy within the
// administrator's ceiling.
#include "loader/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <malloc.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>

#include "loader/bpf_objects.h"
#include "loader/job_policy.h"
#include "loader/probe.h"

namespace confine {
namespace {

// /etc/confine/daemon.toml: what the administrator grants callers beyond
// running jobs as themselves.
struct Config {
    size_t max_jobs = 8;                        // at once, per caller uid
    std::map<uid_t, std::vector<uid_t>> pools;  // caller -> users its jobs may run as
};

Result<uid_t> user_id(const std::string& name, const std::string& where) {
    const passwd* pw = getpwnam(name.c_str());
    if (!pw) return fail(Error::msg(fmt::format("daemon: {}: no such user '{}'", where, name)));
    if (pw->pw_uid == 0)
        return fail(Error::msg(fmt::format("daemon: {}: '{}' is root, which no job runs as", where, name)));
    return pw->pw_uid;
}

Result<Config> load_config(const std::string& path) {
    Config c;
    if (access(path.c_str(), F_OK) != 0) return c;  // none: defaults, no pools
    toml::table t;
    try {
        t = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        return fail(Error::msg(fmt::format("daemon: {}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                                           e.description())));
    }
    auto bad = [&](const std::string& what) { return fail(Error::msg("daemon: " + path + ": " + what)); };
    for (auto& [key, value] : t) {
        if (key == "max_jobs") {
            auto n = value.value<int64_t>();
            if (!n || *n < 1 || *n > 100000) return bad("max_jobs must be a number from 1 to 100000");
            c.max_jobs = static_cast<size_t>(*n);
        } else if (key == "pools" && value.is_table()) {
            std::map<uid_t, std::string> owner;  // pool user -> the caller it belongs to
            for (auto& [caller, users] : *value.as_table()) {
                std::string where = fmt::format("pools.{}", caller.str());
                auto caller_uid = user_id(std::string(caller.str()), where);
                if (!caller_uid) return fail(caller_uid.error());
                if (!users.is_array()) return bad(where + " must be a list of user names");
                for (auto& u : *users.as_array()) {
                    auto name = u.value<std::string>();
                    if (!name) return bad(where + " must be a list of user names");
                    auto uid = user_id(*name, where);
                    if (!uid) return fail(uid.error());
                    // Two callers sharing a pool user could signal each other's jobs.
                    if (auto [it, fresh] = owner.emplace(*uid, caller.str()); !fresh && it->second != caller.str())
                        return bad(fmt::format("user '{}' is in the pools of both {} and {}", *name, it->second,
                                               caller.str()));
                    c.pools[*caller_uid].push_back(*uid);
                }
            }
        } else {
            return bad(fmt::format("unknown key '{}' (known: max_jobs, [pools])", key.str()));
        }
    }
    return c;
}

// Whether systemd passed the listening socket (socket activation, fd 3).
bool socket_activated() {
    const char* pid = getenv("LISTEN_PID");
    const char* n = getenv("LISTEN_FDS");
    return pid && n && strtol(pid, nullptr, 10) == getpid() && strtol(n, nullptr, 10) >= 1;
}

// The listening socket: systemd's, or our own.
Result<Fd> listen_socket(const DaemonOptions& o) {
    if (socket_activated()) {
        fcntl(3, F_SETFD, FD_CLOEXEC);
        return Fd(3);
    }
    const group* gr = getgrnam(o.group.c_str());
    if (!gr)
        return fail(Error::msg("daemon: no group '" + o.group + "' for the socket")
                        .hint("Create it (groupadd --system " + o.group + ") and add the runner's user to it"));
    std::filesystem::path dir = std::filesystem::path(o.socket).parent_path();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(Error::msg("daemon: creating " + dir.string() + ": " + ec.message()));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (o.socket.size() >= sizeof addr.sun_path) return fail(Error::msg("daemon: socket path too long: " + o.socket));
    memcpy(addr.sun_path, o.socket.c_str(), o.socket.size());
    Fd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s) return fail(Error::sys("daemon: socket"));
    // A socket file left by a daemon that died answers nobody: replace it.
    // One that answers belongs to a running daemon: refuse.
    if (connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0)
        return fail(Error::msg("daemon: another daemon serves " + o.socket).hint("Stop it first"));
    unlink(o.socket.c_str());
    // Made with no access at all, then opened to the group: no moment
    // where anyone else could connect.
    mode_t old = umask(0777);
    int rc = bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    umask(old);
    if (rc != 0) return fail(Error::sys("daemon: bind " + o.socket));
    if (chown(o.socket.c_str(), 0, gr->gr_gid) != 0 || chmod(o.socket.c_str(), 0660) != 0)
        return fail(Error::sys("daemon: setting the owner and mode of " + o.socket));
    if (listen(s.get(), 64) != 0) return fail(Error::sys("daemon: listen"));
    return s;
}

// Refuses the client: its error, then the status of a confine failure.
void refuse(int conn, const std::string& why) {
    (void)wire::send(conn, wire::Type::Error, why);
    (void)wire::send(conn, wire::Type::Exit, std::to_string(kExitFailure));
}

// How long a client has to send its request once connected, and the
// daemon's messages to it once the job has ended (it must read them).
constexpr int kRequestTimeoutMs = 10000;
constexpr timeval kSendTimeout{10, 0};
// Refusals waiting for their request to arrive, at most (beyond: closed).
constexpr size_t kMaxPendingRefusals = 64;

// The job's user: the caller's, or one of its pool's, never root.
Result<uid_t> job_user(const Config& cfg, const ucred& cred, const std::string& requested) {
    if (requested.empty()) {
        if (cred.uid == 0)
            return fail(Error::msg("the daemon runs no job as root").hint("Run confine as root instead"));
        return cred.uid;
    }
    const passwd* pw = getpwnam(requested.c_str());
    char* end = nullptr;
    unsigned long id = strtoul(requested.c_str(), &end, 10);
    if (!pw && *end == '\0') pw = getpwuid(static_cast<uid_t>(id));
    if (pw && pw->pw_uid == cred.uid && cred.uid != 0) return cred.uid;
    auto pool = cfg.pools.find(cred.uid);
    if (pw && pool != cfg.pools.end() &&
        std::find(pool->second.begin(), pool->second.end(), pw->pw_uid) != pool->second.end())
        return pw->pw_uid;
    return fail(Error::msg(fmt::format("--user {}: not the caller (uid {}) nor in its pool", requested, cred.uid))
                    .hint("An administrator lists the users a caller's jobs may run as in the daemon's [pools]"));
}

// The client's request and its fds, or why there is none (sent as E).
struct Received {
    wire::Request request;
    std::vector<Fd> fds;
};
Result<Received> receive_request(int conn) {
    pollfd p{conn, POLLIN, 0};
    if (poll(&p, 1, kRequestTimeoutMs) != 1) return fail(Error::msg("no request within 10 s"));
    auto m = wire::receive(conn);
    if (!m) return fail(m.error());
    if (!*m) return fail(Error::msg("no request before the end of the connection"));
    if ((*m)->type != wire::Type::Request || (*m)->fds.size() != wire::kRequestFds)
        return fail(Error::msg(fmt::format("the first message must be a request with {} fds", int(wire::kRequestFds))));
    auto req = wire::decode((*m)->payload);
    if (!req) return fail(req.error());
    return Received{std::move(*req), std::move((*m)->fds)};
}

// `confine run`'s options from a request; the workdir is the directory
// the client opened, so one it can reach.
Result<RunOptions> run_options(const wire::Request& req, int workdir_fd) {
    RunOptions o;
    char workdir[PATH_MAX];
    ssize_t n = readlink(fmt::format("/proc/self/fd/{}", workdir_fd).c_str(), workdir, sizeof workdir - 1);
    struct stat st {
    }, named{};
    if (n <= 0 || fstat(workdir_fd, &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(Error::msg("run: the request's workdir is not a directory"));
    o.workdir.assign(workdir, static_cast<size_t>(n));
    // The name must still lead to the directory the client opened.
    if (stat(o.workdir.c_str(), &named) != 0 || named.st_dev != st.st_dev || named.st_ino != st.st_ino)
        return fail(Error::msg("run: the workdir " + o.workdir + " was moved or replaced after it was opened"));
    o.policy_file = req.policy_name;  // for messages only: the text came with the request
    if (!req.mode.empty()) o.mode = req.mode == "audit" ? policy::Mode::Audit : policy::Mode::Enforce;
    o.audit_log = req.audit_log;
    if (req.on_audit_error == "continue") o.on_audit_error = AuditErrorAction::Continue;
    o.job_id = req.job_id;
    o.print_policy = req.print_policy;
    o.seed_home = req.seed_home;
    if (!req.timeout.empty()) {
        auto t = policy::parse_duration(req.timeout);
        if (!t) return fail(Error::msg("run: --timeout: " + t.error()));
        o.timeout_s = *t;
    }
    o.command = req.command;
    return o;
}

// Whether PID runs inside a confine job (its cgroup is under confine's).
// A job's own policy already refuses the connect to this socket unless it
// lists it; this keeps a job from starting a wider one even then.
bool in_a_job(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/cgroup", pid));
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("0::/confine/")) return true;
    return false;
}

// A forked worker's whole life: one client, one job.
int serve(int conn, const ucred& cred, const Config& cfg, const policy::Policy& ceiling, const BpfObjects& objs) {
    setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &kSendTimeout, sizeof kSendTimeout);
    auto got = receive_request(conn);
    if (got && in_a_job(cred.pid)) got = fail(Error::msg("run: a confined job can't start jobs through the daemon"));
    auto uid = got ? job_user(cfg, cred, got->request.user) : fail(got.error());
    auto o = uid ? run_options(got->request, got->fds[wire::kWorkdir].get()) : fail(uid.error());
    if (!o) {
        refuse(conn, o.error().message);
        return kExitFailure;
    }
    std::vector<Fd>& fds = got->fds;
    Served served{
        cred.uid, *uid, fds[wire::kJobStderr].get(), conn, std::move(got->request.policy), std::move(got->request.env),
        &ceiling, &objs};
    o->served = &served;
    // The job's stdin and stdout are the client's; confine's messages go
    // to the client's stderr, as they would from a run as root.
    for (auto [from, to] : {std::pair{wire::kStdin, 0}, {wire::kStdout, 1}, {wire::kStderr, 2}})
        if (dup2(fds[from].get(), to) < 0) {
            refuse(conn, "run: taking the client's stdio: " + std::string(strerror(errno)));
            return kExitFailure;
        }
    int status = run(*o);
    (void)wire::send(conn, wire::Type::Exit, std::to_string(status));
    return status;
}

// The daemon's main process: accepts, forks a worker per connection, and
// counts each caller's workers.
class Daemon {
public:
    Daemon(const DaemonOptions& opts, const Config& cfg, const policy::Policy& ceiling, const BpfObjects& objs,
           Fd listener)
        : opts_(opts), cfg_(cfg), ceiling_(ceiling), objs_(objs), listener_(std::move(listener)) {
        sigemptyset(&sigs_);
        for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&sigs_, s);
        sigprocmask(SIG_BLOCK, &sigs_, nullptr);
        sfd_.reset(signalfd(-1, &sigs_, SFD_CLOEXEC | SFD_NONBLOCK));
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTTOU, SIG_IGN);  // as confine run: see main.cpp
    }

    // Until SIGTERM, SIGINT or SIGHUP.
    Result<void> serve_until_stopped() {
        for (bool stopping = false; !stopping;) {
            std::vector<pollfd> fds = {{listener_.get(), POLLIN, 0}, {sfd_.get(), POLLIN, 0}};
            for (const Pending& r : refusals_) fds.push_back({r.conn.get(), POLLIN, 0});
            if (poll(fds.data(), fds.size(), refusals_.empty() ? -1 : 500) < 0 && errno != EINTR)
                return fail(Error::sys("daemon: poll"));
            answer_refusals(fds);
            if (fds[1].revents & POLLIN) {
                signalfd_siginfo si{};
                while (read(sfd_.get(), &si, sizeof si) == sizeof si)
                    if (si.ssi_signo != SIGCHLD) stopping = true;
                reap();
            }
            if (!stopping && (fds[0].revents & POLLIN)) accept_one();
        }
        return {};
    }

    // Every job is asked to end (its worker passes SIGTERM on), then
    // killed; none outlives the daemon.
    void stop() {
        for (auto& [pid, caller] : workers_) kill(pid, SIGTERM);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!workers_.empty() && std::chrono::steady_clock::now() < deadline) {
            usleep(50000);
            reap();
        }
        for (auto& [pid, caller] : workers_) kill(pid, SIGKILL);
        while (!workers_.empty() && waitpid(-1, nullptr, 0) > 0) reap();
    }

private:
    void reap() {
        for (pid_t pid; (pid = waitpid(-1, nullptr, WNOHANG)) > 0;) workers_.erase(pid);
    }

    void accept_one() {
        Fd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        ucred cred{};
        socklen_t len = sizeof cred;
        if (!conn || getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
        size_t running =
            std::count_if(workers_.begin(), workers_.end(), [&](const auto& w) { return w.second == cred.uid; });
        if (running >= cfg_.max_jobs) {
            // No worker for a refusal: the daemon answers it itself, once
            // the request has arrived (a connection closed on an unread
            // request resets, and the client would never see why).
            if (refusals_.size() < kMaxPendingRefusals)
                refusals_.push_back({std::move(conn),
                                     fmt::format("daemon: uid {} has {} jobs running, its limit (max_jobs in {})",
                                                 cred.uid, running, opts_.config),
                                     std::chrono::steady_clock::now() + std::chrono::seconds(2)});
            return;
        }
        pid_t pid = fork();
        if (pid < 0) {
            refuse(conn.get(), "daemon: fork: " + std::string(strerror(errno)));
            return;
        }
        if (pid > 0) {
            workers_[pid] = cred.uid;
            return;
        }
        listener_.reset();
        sfd_.reset();
        refusals_.clear();
        sigprocmask(SIG_UNBLOCK, &sigs_, nullptr);
        _exit(serve(conn.get(), cred, cfg_, ceiling_, objs_));
    }

    // Refusals whose request came (read, then answered without waiting),
    // or whose time is up (closed).
    void answer_refusals(const std::vector<pollfd>& fds) {
        const auto now = std::chrono::steady_clock::now();
        for (size_t i = refusals_.size(); i-- > 0;) {
            Pending& r = refusals_[i];
            if (fds[2 + i].revents) {
                (void)wire::receive(r.conn.get());
                (void)wire::send(r.conn.get(), wire::Type::Error, r.why, {}, false);
                (void)wire::send(r.conn.get(), wire::Type::Exit, std::to_string(kExitFailure), {}, false);
            } else if (now < r.deadline) {
                continue;
            }
            refusals_.erase(refusals_.begin() + static_cast<ptrdiff_t>(i));
        }
    }

    const DaemonOptions& opts_;
    const Config& cfg_;
    const policy::Policy& ceiling_;
    const BpfObjects& objs_;
    Fd listener_, sfd_;
    sigset_t sigs_;
    std::map<pid_t, uid_t> workers_;  // worker -> its caller
    struct Pending {
        Fd conn;
        std::string why;
        std::chrono::steady_clock::time_point deadline;
    };
    std::vector<Pending> refusals_;
};

}  // namespace

int daemon_main(const DaemonOptions& opts) {
    auto error = [](const Error& e) {
        fmt::print(stderr, "confine: {}\n", e.message);
        return kExitFailure;
    };
    if (geteuid() != 0) return error(Error::msg("daemon: must run as root"));
    auto cfg = load_config(opts.config);
    if (!cfg) return error(cfg.error());
    if (access(opts.ceiling.c_str(), F_OK) != 0)
        return error(Error::sys("daemon: the ceiling policy " + opts.ceiling)
                         .hint("Write one (docs/daemon.md \"The ceiling\"): no client gets more than it allows"));
    auto ceiling = policy::parse_file(opts.ceiling);
    if (!ceiling) return error(Error::msg("daemon: the ceiling policy: " + ceiling.error().message));
    if (!ceiling->env_keep.empty() || !ceiling->env_set.empty())
        fmt::print(stderr,
                   "confine: daemon: {}: [env] has no effect in a ceiling: a job's environment is its "
                   "client's to give\n",
                   opts.ceiling);
    if (auto r = check_kernel(); !r) return error(r.error());
    auto objs = BpfObjects::open();
    if (!objs) return error(explain_load_failure(objs.error()));
    // Jobs a dead daemon (or a killed confine) left: still confined, now ended.
    collect_orphan_jobs(*objs);
    // Loading the objects left megabytes of freed heap (libbpf's copy of the
    // kernel's BTF): returned now, or every worker's fork copies its page
    // tables and every worker's exit tears them down.
    malloc_trim(0);
    const bool own_socket = !socket_activated();
    auto listener = listen_socket(opts);
    if (!listener) return error(listener.error());
    fmt::print(stderr, "confine: daemon serving {} (ceiling {}, at most {} jobs per caller)\n", opts.socket,
               opts.ceiling, cfg->max_jobs);
    // Each worker, forked from here, looks its caller up (getpwuid,
    // getgrouplist, getgrnam): with the NSS modules loaded once now, none
    // loads them again (a dlopen and its relocations).
    if (const passwd* pw = getpwuid(0)) {
        gid_t groups[16];
        int n = 16;
        (void)getgrouplist(pw->pw_name, pw->pw_gid, groups, &n);
    }
    (void)getgrnam("tty");
    Daemon d(opts, *cfg, *ceiling, *objs, std::move(*listener));
    auto served = d.serve_until_stopped();
    if (own_socket) unlink(opts.socket.c_str());
    d.stop();
    collect_orphan_jobs(*objs);
    return served ? 0 : error(served.error());
}

}  // namespace confine
