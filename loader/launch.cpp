#include "loader/launch.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace confine {
namespace {

// Everything below runs in the child between clone3 and execve. It reports
// the first failure's errno through `report` and exits.
[[noreturn]] void child_fail(int report, int err) {
    (void)!write(report, &err, sizeof err);
    _exit(127);
}

void drop_privileges(const LaunchSpec& s, int report) {
    // The bounding set first: it needs CAP_SETPCAP, which setuid takes away.
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) child_fail(report, errno);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) child_fail(report, errno);
    if (setgroups(s.groups.size(), s.groups.data()) != 0) child_fail(report, errno);
    if (setresgid(s.gid, s.gid, s.gid) != 0) child_fail(report, errno);
    if (setresuid(s.uid, s.uid, s.uid) != 0) child_fail(report, errno);
    // A root job (--allow-root) keeps its capabilities across setuid(0):
    // clear them explicitly. For other users this is already the case.
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capset, &hdr, data) != 0) child_fail(report, errno);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(report, errno);
}

[[noreturn]] void exec_child(const LaunchSpec& s, char* const* argv, char* const* envp,
                             const std::vector<std::string>& candidates, int report) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) signal(sig, SIG_DFL);

    // A session of its own: the job has no controlling terminal, so it can't
    // push input into the caller's (TIOCSTI) or signal its process group.
    if (setsid() < 0) child_fail(report, errno);
    drop_privileges(s, report);
    // If confine dies, so does the job's main process (set after setuid,
    // which clears it).
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (chdir(s.workdir.c_str()) != 0) child_fail(report, errno);
    // Only 0-2 survive execve; `report` is already close-on-exec.
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) child_fail(report, errno);

    int err = ENOENT;
    for (const std::string& path : candidates) {
        execve(path.c_str(), argv, envp);
        // Like execvp: keep looking after ENOENT, remember EACCES.
        if (errno != ENOENT && errno != ENOTDIR) err = errno;
        if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) break;
    }
    child_fail(report, err);
}

// Where to look for argv[0]: itself if it has a '/', else each PATH entry of
// the job's environment.
std::vector<std::string> exec_candidates(const LaunchSpec& s) {
    const std::string& cmd = s.argv.front();
    if (cmd.find('/') != std::string::npos) return {cmd};
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (const std::string& e : s.env)
        if (e.starts_with("PATH=")) path = e.substr(5);
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find(':', start);
        if (end == std::string::npos) end = path.size();
        std::string dir = path.substr(start, end - start);
        out.push_back((dir.empty() ? "." : dir) + "/" + cmd);
        start = end + 1;
    }
    return out;
}

}  // namespace

Result<Child> spawn(const LaunchSpec& s) {
    if (s.argv.empty()) return fail(Error::msg("run: no command given after --"));
    std::vector<char*> argv, envp;
    for (const auto& a : s.argv) argv.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : s.env) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    std::vector<std::string> candidates = exec_candidates(s);

    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return fail(Error::sys("run: pipe"));
    Fd report_read(pipefd[0]), report_write(pipefd[1]);

    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP | CLONE_PIDFD;
    args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<uint64_t>(s.cgroup_fd);
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) return fail(Error::sys("run: clone3(CLONE_INTO_CGROUP)").hint("confine needs Linux 5.7 or newer"));
    if (pid == 0) exec_child(s, argv.data(), envp.data(), candidates, report_write.get());

    Child child{static_cast<pid_t>(pid), Fd(pidfd)};
    report_write.reset();
    int err = 0;
    ssize_t n;
    do n = read(report_read.get(), &err, sizeof err);
    while (n < 0 && errno == EINTR);
    if (n == sizeof err) {
        waitpid(child.pid, nullptr, 0);
        Error e = Error::sys("run: cannot run '" + s.argv.front() + "'", err);
        return fail(e);
    }
    return child;
}

int wait_status(const Child& child) {
    siginfo_t info{};
    while (waitid(P_PIDFD, child.pidfd.get(), &info, WEXITED) != 0)
        if (errno != EINTR) return 125;
    if (info.si_code == CLD_EXITED) return info.si_status;
    return 128 + info.si_status;
}

}  // namespace confine
