#include "loader/run.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>

#include "loader/audit.h"
#include "loader/bpf_objects.h"
#include "loader/cgroup.h"
#include "loader/job_policy.h"
#include "loader/launch.h"
#include "loader/probe.h"
#include "loader/proxy.h"
#include "loader/unseen_folding.h"
#include "loader/wire.h"

extern char** environ;

namespace confine {
namespace {

struct User {
    uid_t uid;
    gid_t gid;
    std::string name, home;
    std::vector<gid_t> groups;
};

Result<User> lookup_user(const passwd* pw, const std::string& what) {
    if (!pw) return fail(Error::msg("run: no such user: " + what).hint("Pass an existing --user"));
    User u{pw->pw_uid, pw->pw_gid, pw->pw_name, pw->pw_dir, {}};
    int n = 64;
    u.groups.resize(n);
    if (getgrouplist(pw->pw_name, pw->pw_gid, u.groups.data(), &n) < 0) {
        u.groups.resize(n);
        getgrouplist(pw->pw_name, pw->pw_gid, u.groups.data(), &n);
    }
    u.groups.resize(n);
    return u;
}

// --user, else the sudo caller, else the current user (root: refused
// unless --allow-root).
Result<User> target_user(const RunOptions& o) {
    Result<User> u = fail(Error::msg(""));
    if (o.served) {
        u = lookup_user(getpwuid(o.served->uid), std::to_string(o.served->uid));
    } else if (!o.user.empty()) {
        char* end = nullptr;
        unsigned long id = strtoul(o.user.c_str(), &end, 10);
        u = lookup_user(*end == '\0' ? getpwuid(static_cast<uid_t>(id)) : getpwnam(o.user.c_str()), o.user);
    } else if (const char* sudo_uid = getenv("SUDO_UID")) {
        u = lookup_user(getpwuid(static_cast<uid_t>(strtoul(sudo_uid, nullptr, 10))), sudo_uid);
        if (u)
            if (const char* sudo_gid = getenv("SUDO_GID")) u->gid = static_cast<gid_t>(strtoul(sudo_gid, nullptr, 10));
    } else {
        u = lookup_user(getpwuid(getuid()), std::to_string(getuid()));
    }
    if (u && u->uid == 0 && !o.allow_root)
        return fail(Error::msg("run: refusing to run the job as root")
                        .hint("Pass --user USER, run confine through sudo, or pass --allow-root"));
    return u;
}

std::string random_job_id() {
    std::random_device rd;
    return fmt::format("job-{:08x}{:04x}", rd(), rd() & 0xffff);
}

bool valid_job_id(const std::string& id) {
    if (id.empty() || id.size() > 64 || id[0] == '.') return false;
    for (char c : id)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
    return true;
}

// Where the job's private directories go: <TMPDIR>/confine-<job>.XXXXXX.
std::string private_dirs_template(const std::string& job) {
    const char* base = getenv("TMPDIR");
    return fmt::format("{}/confine-{}.XXXXXX", base && *base ? base : "/tmp", job);
}

// The job's private HOME and TMPDIR: <TMPDIR>/confine-<job>.XXXXXX/{home,tmp}.
class PrivateDirs {
public:
    // OWNER: the job's user, who gets home and tmp; none for --print-policy,
    // which needs the real names (a TMPDIR through a symlink resolves) only.
    static Result<PrivateDirs> create(const std::string& job, const User* owner, bool keep) {
        std::string tmpl = private_dirs_template(job);
        if (!mkdtemp(tmpl.data())) return fail(Error::sys("run: creating a private directory in " + tmpl));
        PrivateDirs d;
        d.root_ = tmpl;
        d.keep_ = keep;
        if (chmod(d.root_.c_str(), 0711) != 0) return fail(Error::sys("run: chmod " + d.root_));
        for (const std::string& dir : {d.home(), d.tmp()})
            if (mkdir(dir.c_str(), 0700) != 0 || (owner && chown(dir.c_str(), owner->uid, owner->gid) != 0))
                return fail(Error::sys("run: creating " + dir));
        return d;
    }
    PrivateDirs(PrivateDirs&& o) noexcept : root_(std::exchange(o.root_, "")), keep_(o.keep_) {}
    PrivateDirs& operator=(PrivateDirs&&) = delete;
    ~PrivateDirs() {
        // remove_all never follows the symlinks the job may have left.
        std::error_code ec;
        if (!root_.empty() && !keep_) std::filesystem::remove_all(root_, ec);
    }
    std::string home() const { return root_ + "/home"; }
    std::string tmp() const { return root_ + "/tmp"; }
    // The job's proxy configuration: confine's, readable, not writable by the job.
    std::string proxy() const { return root_ + "/proxy"; }

private:
    PrivateDirs() = default;
    std::string root_;
    bool keep_ = false;
};

// The PATH of a job whose policy neither keeps nor sets one: systemd's
// default for services.
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// [env].keep takes its values from `from` (a daemon client's environment),
// else from confine's own.
std::vector<std::string> job_environment(const policy::Compiled& c, const std::string& home, const std::string& tmp,
                                         const JobProxy* proxy, const std::vector<std::string>* from) {
    std::vector<std::string> env;
    if (proxy) env = proxy->environment();
    for (const std::string& name : c.env_keep) {
        if (!from) {
            if (const char* v = getenv(name.c_str())) env.push_back(name + "=" + v);
            continue;
        }
        auto it =
            std::find_if(from->begin(), from->end(), [&](const std::string& e) { return e.starts_with(name + "="); });
        if (it != from->end()) env.push_back(*it);
    }
    for (const auto& [name, value] : c.env_set) env.push_back(name + "=" + value);
    env.push_back("HOME=" + home);
    env.push_back("TMPDIR=" + tmp);
    // A job with no PATH can't find its programs (gcc not even its own cc1).
    if (std::none_of(env.begin(), env.end(), [](const std::string& e) { return e.starts_with("PATH="); }))
        env.push_back(std::string("PATH=") + kDefaultPath);
    return env;
}

// Copies the directory open at `from` into the one open at `to`, entry by
// entry through directory fds, never following a symlink: a symlink is
// copied as one, and a name swapped for a symlink, a fifo or a device
// between the look and the open is refused, not followed or blocked on.
// False, with `err` naming the entry, on anything but files, directories
// and symlinks.
bool copy_tree(int from, int to, const std::string& where, int depth, std::string& err) {
    auto failed = [&](const std::string& name, const std::string& what) {
        err = fmt::format("{}/{}: {}", where, name, what);
        return false;
    };
    if (depth > 64) return failed("", "more than 64 directories deep");
    DIR* d = fdopendir(dup(from));
    if (!d) return failed("", strerror(errno));
    std::unique_ptr<DIR, int (*)(DIR*)> dir(d, closedir);
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        struct stat st {};
        if (fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return failed(name, strerror(errno));
        const mode_t mode = st.st_mode & 0777;
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(from, name.c_str(), target, sizeof target - 1);
            if (n < 0) return failed(name, strerror(errno));
            target[n] = '\0';
            if (symlinkat(target, to, name.c_str()) != 0) return failed(name, strerror(errno));
        } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
            const bool is_dir = S_ISDIR(st.st_mode);
            Fd in(openat(from, name.c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0)));
            struct stat now {};
            if (!in || fstat(in.get(), &now) != 0) return failed(name, strerror(errno));
            if (now.st_dev != st.st_dev || now.st_ino != st.st_ino) return failed(name, "changed while being copied");
            if (is_dir) {
                // Writable while it is filled; its own mode at the end.
                if (mkdirat(to, name.c_str(), 0700) != 0) return failed(name, strerror(errno));
                Fd out(openat(to, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
                if (!out) return failed(name, strerror(errno));
                if (!copy_tree(in.get(), out.get(), where + "/" + name, depth + 1, err)) return false;
                if (fchmod(out.get(), mode) != 0) return failed(name, strerror(errno));
            } else {
                Fd out(openat(to, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
                if (!out) return failed(name, strerror(errno));
                char buf[65536];
                for (ssize_t n; (n = read(in.get(), buf, sizeof buf)) != 0;) {
                    if (n < 0 && errno == EINTR) continue;
                    if (n < 0 || write(out.get(), buf, static_cast<size_t>(n)) != n)
                        return failed(name, strerror(errno));
                }
            }
        } else {
            return failed(name, "not a file, directory or symlink");
        }
    }
    return true;
}

// Copies the runner's directory `from` into the job's fresh HOME: how a
// runner hands the agent its settings without opening the account home to
// it. The copy runs as the job's user, so it reads only what that user
// could; and `from` must not be something the job itself could have
// written or redirected (it or a symlink on the way to it in the job's
// writable set), or the job would choose what the copy reads.
Result<void> seed_home(const std::string& from, const std::string& home, const User& u, const policy::Compiled& c) {
    auto refuse = [&](const std::string& why) {
        return fail(Error::msg("run: --seed-home " + from + ": " + why)
                        .hint("Seed from a directory of the runner's, outside the job's writable set, holding only "
                              "files, directories and symlinks the job's user can read"));
    };
    std::string path;
    for (const auto& part : std::filesystem::absolute(from).lexically_normal()) {
        if (part == "/" || part.empty()) continue;
        path += "/" + part.string();
        struct stat st {};
        if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && (policy::access_at(c, path) & policy::kWrite))
            return refuse("its path goes through " + path + ", a symlink the job can write");
    }
    char real[PATH_MAX];
    struct stat st {};
    if (!realpath(from.c_str(), real) || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) return refuse("not a directory");
    if (policy::access_at(c, real) & policy::kWrite)
        return refuse(fmt::format("{} is in the job's writable set", real));

    pid_t pid = fork();
    if (pid < 0) return fail(Error::sys("run: fork to seed HOME"));
    if (pid == 0) {
        std::string err;
        if (u.uid != 0 && (setgroups(u.groups.size(), u.groups.data()) != 0 || setresgid(u.gid, u.gid, u.gid) != 0 ||
                           setresuid(u.uid, u.uid, u.uid) != 0))
            err = fmt::format("dropping to uid {}: {}", u.uid, strerror(errno));
        Fd src(open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)),
            dst(open(home.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (err.empty() && (!src || !dst)) err = fmt::format("{}: {}", real, strerror(errno));
        if (err.empty()) copy_tree(src.get(), dst.get(), real, 0, err);
        if (!err.empty()) fmt::print(stderr, "confine: run: copying into the job's HOME as {}: {}\n", u.name, err);
        _exit(err.empty() ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return refuse("could not be copied (above)");
    return {};
}

Result<std::string> resolve_workdir(const std::string& dir) {
    char buf[PATH_MAX];
    if (!realpath(dir.empty() ? "." : dir.c_str(), buf)) return fail(Error::sys("run: workdir " + dir));
    struct stat st {};
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(Error::msg(fmt::format("run: workdir {} is not a directory", buf)));
    return std::string(buf);
}

// Reports events the ring had no room for since the last report.
void report_lost(const JobPolicy& pol, AuditLog& log, uint64_t& reported) {
    if (uint64_t lost = pol.lost(); lost > reported) {
        log.lost(lost - reported);
        reported = lost;
    }
}

// How long a job past its timeout has between SIGTERM and cgroup.kill:
// enough for a build or test runner to stop its children and flush its
// output, short enough that a job ignoring SIGTERM is gone soon after its
// deadline.
constexpr std::chrono::seconds kTimeoutGrace{5};

// The job's wall-clock limit ([limits] timeout, --timeout): at the deadline
// SIGTERM to the main process, kTimeoutGrace later cgroup.kill of the job.
class Deadline {
public:
    explicit Deadline(uint64_t timeout_s)
        : stage_(timeout_s ? Stage::Running : Stage::None),
          next_(std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s)) {}

    // How long poll() may sleep before the next step is due, at most `cap` ms.
    int wait_ms(int cap) const {
        if (stage_ != Stage::Running && stage_ != Stage::Terminating) return cap;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(next_ - std::chrono::steady_clock::now());
        return static_cast<int>(std::clamp<int64_t>(left.count(), 0, cap));
    }

    // Takes the step that is due, if any.
    void step(const Child& child, JobCgroup& cg) {
        if ((stage_ != Stage::Running && stage_ != Stage::Terminating) || std::chrono::steady_clock::now() < next_)
            return;
        if (stage_ == Stage::Running) {
            kill(child.pid, SIGTERM);
            stage_ = Stage::Terminating;
            next_ += kTimeoutGrace;
        } else {
            if (auto r = cg.kill(); !r) {
                fmt::print(stderr, "confine: {}\n", r.error().message);
                kill(child.pid, SIGKILL);
            }
            stage_ = Stage::Killed;
        }
    }

    bool expired() const { return stage_ == Stage::Terminating || stage_ == Stage::Killed; }

private:
    enum class Stage { None, Running, Terminating, Killed } stage_;
    std::chrono::steady_clock::time_point next_;
};

// One `limit` record for each limit the job hit.
void report_limits(AuditLog& log, const JobCgroup& cg, bool timed_out) {
    const LimitHits& h = cg.hits();
    for (auto [target, count] :
         {std::pair{"memory", h.memory}, {"pids", h.pids}, {"cpu", h.cpu}, {"timeout", uint64_t{timed_out}}})
        if (count) log.limit(target, count);
}

void print_error(const Error& e) {
    fmt::print(stderr, "confine: {}\n", e.message);
}

// A stream someone reads back as a log: a file, a pipe or a socket (not a
// terminal, which a person reads, nor /dev/null).
bool log_like(const struct stat& st) {
    return S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

bool same_file(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The audit log PATH (empty: none) must not be in the job's writable set.
Result<void> audit_outside_writable_set(const std::string& path, const policy::Compiled& c) {
    if (path.empty() || path == kJournal) return {};
    // Where the log really is: through symlinks at the end too, dangling
    // ones included (the log would be created where they point).
    std::error_code ec;
    std::filesystem::path real = std::filesystem::absolute(path);
    for (int i = 0; i < 40 && std::filesystem::is_symlink(real, ec); i++) {
        std::filesystem::path target = std::filesystem::read_symlink(real, ec);
        real = target.is_absolute() ? target : real.parent_path() / target;
    }
    std::filesystem::path dir = std::filesystem::canonical(real.parent_path(), ec);
    std::string resolved = ec ? real.string() : (dir / real.filename()).string();
    if (policy::access_at(c, resolved) & policy::kWrite)
        return fail(Error::msg("audit: the audit log " + resolved + " is writable by the job under its policy")
                        .hint("Put it outside the job's writable set, so no line in it can be forged"));
    return {};
}

// The security team must be able to trust every line of the audit log, so
// the job never gets to write into it. With --audit-log FILE, FILE must not
// be in the job's writable set, nor be the file or pipe of the job's stdio.
// Without it, the log is confine's stderr, and the job's stderr is joined
// to its stdout (returns true); a stdout that is confine's stderr too
// (`2>&1` into a file or pipe) would let the job write into the log.
Result<bool> audit_apart_from_job(const std::string& path, const policy::Compiled& c) {
    // Whether the job, whose fd 2 is `err_fd`, can write to the file `st`:
    // through fd 1 or 2, or fd 0 where that is a socket.
    auto job_writes = [](const struct stat& st, int err_fd) {
        for (int fd : {0, 1, err_fd}) {
            struct stat io {};
            if (fstat(fd, &io) == 0 && log_like(io) && same_file(io, st) && (fd > 0 || S_ISSOCK(io.st_mode)))
                return true;
        }
        return false;
    };
    if (path.empty()) {
        struct stat err {};
        if (fstat(STDERR_FILENO, &err) == 0 && job_writes(err, STDOUT_FILENO))
            return fail(Error::msg("audit: confine's stderr, where the audit log goes, is also the job's stdout")
                            .hint("Pass --audit-log FILE, or give confine's stderr a file or pipe of its own "
                                  "(not 2>&1), so no line in the log can be forged"));
        return true;
    }
    if (path == kJournal) return false;  // journald stamps who sent each entry
    if (auto r = audit_outside_writable_set(path, c); !r) return fail(r.error());
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && job_writes(st, STDERR_FILENO))
        return fail(Error::msg("audit: the audit log " + path + " is the job's stdin, stdout or stderr")
                        .hint("Give --audit-log a file or pipe of its own, so no line in it can be forged"));
    // A second name could be in the job's writable set.
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
        return fail(Error::msg("audit: the audit log " + path + " has other hard links, which the job may reach")
                        .hint("Give --audit-log a file with one name, outside the job's writable set"));
    return false;
}

// While it lives, file access checks are the job user's (fsuid, fsgid,
// groups), not root's: a daemon's worker resolves what its client names
// (workdir, rule paths and the git metadata under them, seed home, audit
// log) as that user could, and learns nothing root alone could read. The
// worker is single-threaded. No user: nothing changes (a run as root).
class AsUser {
public:
    explicit AsUser(const User* u) : active_(u != nullptr) {
        if (!active_) return;
        saved_.resize(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
        saved_.resize(static_cast<size_t>(std::max(getgroups(static_cast<int>(saved_.size()), saved_.data()), 0)));
        setgroups(u->groups.size(), u->groups.data());
        setfsgid(u->gid);
        setfsuid(u->uid);
    }
    ~AsUser() {
        if (!active_) return;
        setfsuid(0);
        setfsgid(0);
        setgroups(saved_.size(), saved_.data());
    }
    AsUser(const AsUser&) = delete;
    AsUser& operator=(const AsUser&) = delete;

private:
    bool active_;
    std::vector<gid_t> saved_;
};

// The job's policy: the embedded default, a file, or a daemon client's text.
Result<policy::Policy> job_policy(const RunOptions& o) {
    // A daemon never opens a client's policy file itself: it reads as root.
    if (o.served && !o.served->policy_text.empty()) {
        auto p = policy::parse(o.served->policy_text, o.policy_file.empty() ? "<client>" : o.policy_file);
        if (p) return *p;
        std::string all;
        for (const policy::Diagnostic& d : p.error()) all += (all.empty() ? "" : "\n") + d.str();
        return fail(Error::msg(all));
    }
    if (o.served || o.policy_file.empty()) return policy::default_policy();
    return policy::parse_file(o.policy_file);
}

// The policy compiled for this job, within the daemon's ceiling if served.
Result<policy::Compiled> compile_for(const RunOptions& o, const policy::Policy& p, const policy::Vars& vars) {
    auto c = policy::compile(p, vars);
    if (c && o.served) {
        auto ceiling = policy::compile(*o.served->ceiling, vars);
        if (!ceiling) return fail(Error::msg("daemon: the ceiling: " + ceiling.error().message));
        c = policy::intersect(*c, *ceiling);
    }
    if (c)
        if (auto r = check_unseen_folding(*c); !r) return fail(r.error());
    return c;
}

// Who runs what, where: settled before anything is made.
struct Target {
    policy::Policy policy;  // with --mode and --timeout applied
    std::string id, unit;   // the job id; the name of its cgroup and directories
    User user;
    std::string workdir;
};

Result<Target> resolve_target(const RunOptions& o, policy::Policy pol) {
    if (o.mode) pol.mode = *o.mode;
    if (o.timeout_s) pol.limits.timeout_s = *o.timeout_s;
    std::string id = o.job_id.empty() ? random_job_id() : o.job_id;
    if (!valid_job_id(id))
        return fail(Error::msg("run: invalid --job-id '" + id + "'").hint("Use 1-64 of [A-Za-z0-9._-]"));
    // A daemon's jobs are named per caller: no caller can take (or block)
    // another's job id.
    std::string unit = o.served ? fmt::format("u{}.{}", o.served->caller, id) : id;
    auto user = target_user(o);
    if (!user) return fail(user.error());
    AsUser as(o.served ? &*user : nullptr);
    auto workdir = resolve_workdir(o.workdir);
    if (!workdir) return fail(workdir.error());
    return Target{std::move(pol), std::move(id), std::move(unit), std::move(*user), std::move(*workdir)};
}

int failed(const Error& e) {
    print_error(e);
    return kExitFailure;
}

// --print-policy: compiled against directories made as the run makes
// them, so the paths are the ones a run enforces (bar the random suffix).
int print_policy(const RunOptions& o, const Target& t) {
    auto dirs = PrivateDirs::create(t.unit, nullptr, false);
    if (!dirs) return failed(dirs.error());
    AsUser as(o.served ? &t.user : nullptr);
    auto compiled = compile_for(o, t.policy, {t.workdir, dirs->home(), dirs->tmp(), t.user.home});
    if (!compiled) return failed(compiled.error());
    fmt::print("{}", policy::render(*compiled));
    fflush(stdout);
    return 0;
}

// What a job is while it runs, made in this order by build_job(). The
// members end in reverse: the policy's map entries, the proxy, the cgroup
// (whatever is left in it killed), the ring and its audit log, and last
// the private directories.
struct Job {
    PrivateDirs dirs;
    policy::Compiled compiled;
    bool stderr_to_stdout;  // the audit log is confine's stderr: the job's joins its stdout
    JobRing ring;
    JobCgroup cg;
    std::unique_ptr<JobProxy> proxy;
    JobPolicy policy;
};

// What supervise() leaves for finish_job().
struct Outcome {
    int status = 0;
    uint64_t reported_lost = 0;
    bool timed_out = false;
};

// As the job's user (in a daemon's worker): the policy compiled, HOME
// seeded, and the audit log checked to be out of the job's reach; returns
// whether the job's stderr joins its stdout.
Result<bool> prepare_as_user(const RunOptions& o, const Target& t, const PrivateDirs& dirs,
                             std::optional<policy::Compiled>& compiled) {
    AsUser as(o.served ? &t.user : nullptr);
    auto c = compile_for(o, t.policy, {t.workdir, dirs.home(), dirs.tmp(), t.user.home});
    if (!c) return fail(c.error());
    compiled = std::move(*c);
    if (!o.seed_home.empty())
        if (auto r = seed_home(o.seed_home, dirs.home(), t.user, *compiled); !r) return fail(r.error());
    // A daemon's client keeps its stdio apart from its log itself; its log
    // file must still be out of the job's reach.
    if (!o.served) return audit_apart_from_job(o.audit_log, *compiled);
    if (auto r = audit_outside_writable_set(o.audit_log, *compiled); !r) return fail(r.error());
    return false;
}

Result<Job> build_job(const RunOptions& o, const Target& t, const BpfObjects& objs) {
    auto dirs = PrivateDirs::create(t.unit, &t.user, o.keep_dirs);
    if (!dirs) return fail(dirs.error());
    std::optional<policy::Compiled> compiled;
    auto stderr_to_stdout = prepare_as_user(o, t, *dirs, compiled);
    if (!stderr_to_stdout) return fail(stderr_to_stdout.error());
    const bool audit_mode = compiled->mode == policy::Mode::Audit;
    // A daemon's worker writes to the journal itself: its entries then
    // carry root's trusted fields, which no client or job can forge.
    // Records name the job as its cgroup does: a daemon's as u<CALLER>.<ID>,
    // so no caller can put records under another's job id.
    auto log = o.served && o.audit_log != kJournal ? AuditLog::to_client(o.served->connection, t.unit, audit_mode)
                                                   : AuditLog::open(o.audit_log, t.unit, audit_mode);
    if (!log) return fail(log.error());
    auto ring = JobRing::create(std::move(*log), objs);
    if (!ring) return fail(ring.error());
    // The cgroup inherits this build's programs from its parent the moment
    // it exists; they deny everything until the policy below is in place.
    auto cg = JobCgroup::create(objs.jobs_parent(), t.unit);
    if (!cg) return fail(cg.error());
    ring->log().set_cgroup_id(cg->id());
    // Limits are in place before the job's first process exists.
    if (auto r = cg->set_limits(compiled->limits); !r) return fail(r.error());
    // The proxy listens before the job starts, and only the job gets a
    // rule for its port.
    std::unique_ptr<JobProxy> proxy;
    if (!compiled->domains.empty()) {
        auto started = JobProxy::start(objs, cg->id(), t.unit, compiled->domains, audit_mode, dirs->proxy());
        if (!started) return fail(started.error());
        proxy = std::move(*started);
        compiled->connect.push_back(proxy->endpoint());
    }
    auto installed = JobPolicy::install(objs, cg->id(), *compiled, ring->slot());
    if (!installed) return fail(installed.error());
    return Job{std::move(*dirs), std::move(*compiled), *stderr_to_stdout,    std::move(*ring),
               std::move(*cg),   std::move(proxy),     std::move(*installed)};
}

// Waits for the job's main process while writing its audit events, and
// forwards termination requests to it. A job still running at its timeout
// (0: none) is ended (Deadline); `out.timed_out` says so, and the status is
// then kExitTimeout whatever the main process's own.
// A daemon client sends signals as messages; its going away ends the job.
void supervise(const Child& child, Job& job, const RunOptions& o, Outcome& out) {
    AuditLog& log = job.ring.log();
    JobCgroup& cg = job.cg;
    JobProxy* proxy = job.proxy.get();
    const bool kill_on_audit_error = o.on_audit_error == AuditErrorAction::Kill;
    int client = o.served ? o.served->connection : -1;
    sigset_t sigs;
    sigemptyset(&sigs);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
    Fd sfd(signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK));
    Deadline deadline(job.compiled.limits.timeout_s);
    bool proxy_lost = false, audit_failed = false;

    for (;;) {
        pollfd fds[5] = {{child.pidfd.get(), POLLIN, 0},
                         {job.ring.poll_fd(), POLLIN, 0},
                         {sfd.get(), POLLIN, 0},
                         {proxy ? proxy->log_fd() : -1, POLLIN, 0},
                         {client, POLLIN, 0}};
        if (poll(fds, 5, deadline.wait_ms(1000)) < 0 && errno != EINTR) break;
        job.ring.drain();
        if (proxy) proxy->drain(log);
        if (proxy && proxy->exited() && !proxy_lost) {
            // Fail closed: without its proxy the job has no way out, and its
            // connect rule names a port any local process may take now.
            proxy_lost = true;
            log.proxy("", "proxy_exited");
            fmt::print(stderr,
                       "confine: the job's proxy (tinyproxy, for network.domains) exited while the job ran; "
                       "stopping the job (the kernel log says if it ran out of its memory limit)\n");
            if (auto r = cg.kill(); !r) kill(child.pid, SIGKILL);
        }
        report_lost(job.policy, log, out.reported_lost);
        if (log.failure() && kill_on_audit_error && !audit_failed) {
            // Denials nobody can see are denials nobody audits: the job
            // stops (run() says why once it has ended).
            audit_failed = true;
            if (auto r = cg.kill(); !r) kill(child.pid, SIGKILL);
        }
        if (fds[2].revents & POLLIN) {
            signalfd_siginfo si{};
            // The job has its own session, so Ctrl-C at the caller's
            // terminal reaches confine only: pass every request on.
            while (read(sfd.get(), &si, sizeof si) == sizeof si) kill(child.pid, static_cast<int>(si.ssi_signo));
        }
        if (fds[4].revents) {
            auto m = wire::receive(client);
            if (m && *m && (*m)->type == wire::Type::Signal) {
                int sig = atoi((*m)->payload.c_str());
                if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) kill(child.pid, sig);
            } else if (!m || !*m) {
                // The client is gone: nobody is left to read the job's audit
                // lines or status, so the job ends.
                client = -1;
                if (auto r = cg.kill(); !r) kill(child.pid, SIGKILL);
            }
        }
        if (fds[0].revents & POLLIN) break;
        deadline.step(child, cg);
    }
    const int status = wait_status(child);
    out.timed_out = deadline.expired();
    out.status = proxy_lost || audit_failed ? kExitFailure : out.timed_out ? kExitTimeout : status;
}

// Starts the job's command in its cgroup and supervises it to its end.
Outcome run_job(const RunOptions& o, const Target& t, Job& job) {
    // Signals that should end the job reach confine through a signalfd;
    // blocked from here on so none is lost between spawn and poll.
    sigset_t sigs;
    sigemptyset(&sigs);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);

    const group* tty = getgrnam("tty");
    LaunchSpec spec{o.command,
                    job_environment(job.compiled, job.dirs.home(), job.dirs.tmp(), job.proxy.get(),
                                    o.served ? &o.served->env : nullptr),
                    t.workdir,
                    t.user.uid,
                    t.user.gid,
                    t.user.groups,
                    job.cg.fd(),
                    tty ? tty->gr_gid : 0,
                    o.served               ? o.served->job_stderr
                    : job.stderr_to_stdout ? STDOUT_FILENO
                                           : STDERR_FILENO};
    Outcome out;
    if (auto child = spawn(spec); child) {
        supervise(*child, job, o, out);
    } else {
        print_error(child.error());
        out.status = child.error().err == ENOENT ? kExitNotFound : kExitCannotRun;
    }
    return out;
}

// Once the job's command has ended: everything left in the job killed, and
// its last records written; returns the exit status.
int finish_job(const RunOptions& o, Job& job, Outcome out) {
    int status = out.status;
    if (auto r = job.cg.kill_and_remove(); !r) status = failed(r.error());
    AuditLog& audit = job.ring.log();
    audit.deliver_rest();
    if (job.proxy)
        if (auto r = job.proxy->stop(audit); !r) status = failed(r.error());
    job.ring.drain();
    audit.flush_repeats();
    report_lost(job.policy, audit, out.reported_lost);
    if (uint64_t n = job.policy.inbound()) audit.inbound(n);
    report_limits(audit, job.cg, out.timed_out);
    audit.close();
    if (uint64_t n = audit.over_budget())
        fmt::print(stderr,
                   "confine: audit: {} records went past the journal's budget ({:g} a second after {:g}); they are "
                   "counted in lost records, reason journal_rate_limit\n",
                   n, kJournalPerSecond, kJournalBurst);
    if (const auto& why = audit.failure()) {
        const bool stop = o.on_audit_error == AuditErrorAction::Kill;
        print_error(Error::msg(fmt::format("audit: writing the audit log to {} failed ({}); {}", audit.destination(),
                                           *why, stop ? "the job was stopped" : "the job ran on"))
                        .hint(stop ? "Give the log room or a reader; --on-audit-error continue lets jobs run on"
                                   : "Records the log missed are counted in a lost record when it takes one again"));
        if (stop) status = kExitFailure;
    }
    return status;
}

}  // namespace

int run(const RunOptions& o) {
    // A policy's diagnostics are FILE:LINE:COL lines of their own.
    auto pol = job_policy(o);
    if (!pol) {
        fmt::print(stderr, "{}\n", pol.error().message);
        return kExitFailure;
    }
    auto target = resolve_target(o, std::move(*pol));
    if (!target) return failed(target.error());
    if (o.print_policy) return print_policy(o, *target);
    if (o.command.empty())
        return failed(Error::msg("run: no command").hint("Usage: confine run [OPTIONS] -- CMD [ARG...]"));

    // Every step below must succeed before the job exists: nothing runs
    // half-confined.
    if (auto r = check_kernel(); !r) return failed(r.error());
    // The daemon loaded them once; a run as root loads (or finds) them now.
    std::optional<BpfObjects> own_objs;
    if (!o.served) {
        auto opened = BpfObjects::open();
        if (!opened) return failed(explain_load_failure(opened.error()));
        own_objs.emplace(std::move(*opened));
    }
    const BpfObjects& objs = o.served ? *o.served->objs : *own_objs;
    collect_orphan_proxies(objs);
    auto job = build_job(o, *target, objs);
    if (!job) return failed(job.error());
    return finish_job(o, *job, run_job(o, *target, *job));
}

}  // namespace confine
