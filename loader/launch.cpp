#include "loader/launch.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/text.h"

namespace confine {
namespace {

// Everything below runs in the child between clone3 and execve, in
// confine's memory (see clone_child): it allocates nothing and changes
// nothing of confine's but errno. It reports the failed step and its errno
// through `report` and exits.
enum class Step : int { Exec, Namespace, Privileges, Keyring, Workdir, Fds };

struct Failure {
    Step step;
    int err;
};

[[noreturn]] void child_fail(int report, Step step, int err) {
    Failure f{step, err};
    (void)!write(report, &f, sizeof f);
    _exit(127);
}

const char* step_name(Step s) {
    switch (s) {
        case Step::Namespace: return "setting up the job's mount namespace (private /dev/pts and /dev/shm)";
        case Step::Privileges: return "dropping privileges";
        case Step::Keyring: return "joining a fresh session keyring";
        case Step::Workdir: return "entering the workdir";
        case Step::Fds: return "closing inherited fds";
        case Step::Exec: break;
    }
    return "exec";
}

bool is_dir(const char* path) {
    struct stat st {};
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// The job's mount namespace, still as root: nothing it mounts propagates
// back, and its terminals and POSIX shared memory are its own. A private
// devpts instance holds only the ptys the job opens through /dev/ptmx
// (which finds the devpts mounted at /dev/pts beside it), so no other
// session's terminal can be opened; the tmpfs on /dev/shm goes away with
// the job. Where the machine has no /dev/pts or /dev/shm, there is nothing
// to hide.
void private_mounts(const LaunchSpec& s, int report) {
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) child_fail(report, Step::Namespace, errno);
    if (is_dir("/dev/pts")) {
        char opts[96];
        int n = snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620");
        if (s.tty_gid) snprintf(opts + n, sizeof opts - n, ",gid=%u", static_cast<unsigned>(s.tty_gid));
        if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, opts) != 0)
            child_fail(report, Step::Namespace, errno);
    }
    if (is_dir("/dev/shm") && mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        child_fail(report, Step::Namespace, errno);
}

// Raw prctl/capset rather than libcap-ng: this runs in the child between
// clone3 and exec, where only async-signal-safe calls belong, and
// capng_change_id() sets supplementary groups through initgroups() (NSS),
// where the job must get exactly the groups resolved before the clone.
void drop_privileges(const LaunchSpec& s, int report) {
    // The bounding set first: it needs CAP_SETPCAP, which setuid takes away.
    auto fail = [&] { child_fail(report, Step::Privileges, errno); };
    // EINVAL: past the kernel's last capability, as every one after it is,
    // if reading it says so too (an LSM could refuse the drop with EINVAL).
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
            if (errno == EINVAL && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0 && errno == EINVAL) break;
            fail();
        }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) fail();
    // Raw syscalls: glibc's wrappers would, in a process with threads, have
    // every thread of confine (whose memory the child shares) change too.
    if (syscall(SYS_setgroups, s.groups.size(), s.groups.data()) != 0) fail();
    if (syscall(SYS_setresgid, s.gid, s.gid, s.gid) != 0) fail();
    if (syscall(SYS_setresuid, s.uid, s.uid, s.uid) != 0) fail();
    // A root job (--allow-root) keeps its capabilities across setuid(0):
    // clear them explicitly. For other users this is already the case.
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capset, &hdr, data) != 0) fail();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail();
}

[[noreturn]] void exec_child(const LaunchSpec& s, char* const* argv, char* const* envp,
                             const std::vector<std::string>& candidates, int report) {
    // Default dispositions before unblocking: no signal may reach one of
    // confine's in here.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTTOU, SIGCHLD}) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);

    // A session of its own: the job has no controlling terminal, so it can't
    // push input into the caller's (TIOCSTI) or signal its process group.
    if (setsid() < 0) child_fail(report, Step::Privileges, errno);
    private_mounts(s, report);
    drop_privileges(s, report);
    // A session keyring of the job's own, made as the user: the one
    // inherited from confine (root's, or the caller's login session) holds
    // keys the job must not see. No keyrings in the kernel: nothing to hide.
    if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 && errno != ENOSYS)
        child_fail(report, Step::Keyring, errno);
    // If confine dies, so does the job's main process (set after setuid,
    // which clears it).
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (chdir(s.workdir.c_str()) != 0) child_fail(report, Step::Workdir, errno);
    // Without that fd (a closed stdout), the job gets no stderr, never confine's.
    if (s.stderr_fd != STDERR_FILENO && dup2(s.stderr_fd, STDERR_FILENO) < 0 &&
        (errno != EBADF || close(STDERR_FILENO) != 0))
        child_fail(report, Step::Fds, errno);
    // Only 0-2 survive execve; `report` is already close-on-exec.
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) child_fail(report, Step::Fds, errno);

    int err = ENOENT;
    for (const std::string& path : candidates) {
        execve(path.c_str(), argv, envp);
        // Like execvp: keep looking after ENOENT, remember EACCES.
        if (errno != ENOENT && errno != ENOTDIR) err = errno;
        if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) break;
    }
    child_fail(report, Step::Exec, err);
}

struct ChildArgs {
    const LaunchSpec* spec;
    char* const* argv;
    char* const* envp;
    const std::vector<std::string>* candidates;
    int report;
};

int child_main(void* p) {
    const ChildArgs& a = *static_cast<const ChildArgs*>(p);
    exec_child(*a.spec, a.argv, a.envp, *a.candidates, a.report);
}

#if defined(__x86_64__)
// clone3 that runs fn(arg) in the child, on the stack the args name, and
// exits with its result; returns the child's pid or -errno. A CLONE_VM
// child can't return from syscall() as fork's does: it would overwrite the
// parent's frames, which it shares. glibc's clone and posix_spawn do the same.
extern "C" long confine_clone3_run(clone_args* args, size_t size, int (*fn)(void*), void* arg);
asm(R"(
    .text
    .globl confine_clone3_run
    .type confine_clone3_run, @function
confine_clone3_run:
    mov %rcx, %r8      # arg: the syscall clobbers rcx; rdx (fn) and r8 survive it
    mov $435, %eax     # SYS_clone3
    syscall
    test %rax, %rax
    jnz 1f
    xor %ebp, %ebp     # the child, on its own stack: no frame above it
    mov %r8, %rdi
    call *%rdx
    mov %eax, %edi
    mov $60, %eax      # SYS_exit
    syscall
    hlt
1:  ret
    .size confine_clone3_run, .-confine_clone3_run
)");

// The child's stack while it shares confine's memory, with a guard page
// below it.
class ChildStack {
public:
    static constexpr size_t kGuard = 4096, kSize = 64 * 1024;
    ChildStack() {
        void* p = mmap(nullptr, kGuard + kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (p == MAP_FAILED) return;
        base_ = p;
        if (mprotect(base_, kGuard, PROT_NONE) != 0) {
            munmap(base_, kGuard + kSize);
            base_ = nullptr;
        }
    }
    ~ChildStack() {
        if (base_) munmap(base_, kGuard + kSize);
    }
    ChildStack(const ChildStack&) = delete;
    ChildStack& operator=(const ChildStack&) = delete;
    explicit operator bool() const { return base_ != nullptr; }
    uint64_t bottom() const { return reinterpret_cast<uint64_t>(base_) + kGuard; }

private:
    void* base_ = nullptr;
};

// Whether the child may share confine's memory: not where fs.suid_dumpable
// is 1, where a process that drops to a user stays open to that user's
// ptrace and /proc/PID/mem (commit_creds sets its memory's dumpability from
// it), and the memory would be root confine's. 0 and 2 close it.
bool may_share_memory() {
    const std::string v = read_all("/proc/sys/fs/suid_dumpable");
    return v.starts_with('0') || v.starts_with('2');
}
#endif

// Starts the child in the job's cgroup and namespaces; returns its pid, or
// -1 with errno set. On x86-64 the child shares confine's memory until it
// execs (CLONE_VM | CLONE_VFORK, as posix_spawn does): no page tables
// copied, no page copied on write on either side, no copy to tear down at
// the exec. Under icount on 6.12 that took 0.7 ms off each job's start
// (9.5 to 8.8 ms, bench/ "Job start"). Elsewhere, and where it may not
// (above), the child gets a copy, as fork's does.
long clone_child(clone_args args, ChildArgs& child) {
#if defined(__x86_64__)
    if (may_share_memory()) {
        ChildStack stack;
        if (!stack) return -1;
        args.flags |= CLONE_VM | CLONE_VFORK;
        args.stack = stack.bottom();
        args.stack_size = ChildStack::kSize;
        long r = confine_clone3_run(&args, sizeof args, child_main, &child);
        if (r >= 0) return r;
        errno = static_cast<int>(-r);
        return -1;
    }
#endif
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) child_main(&child);
    return pid;
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
    // Fresh IPC and mount namespaces: SysV objects and POSIX message queues
    // of other processes are out of sight, and the job's own die with it.
    args.flags = CLONE_INTO_CGROUP | CLONE_PIDFD | CLONE_NEWIPC | CLONE_NEWNS;
    args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<uint64_t>(s.cgroup_fd);
    ChildArgs child_args{&s, argv.data(), envp.data(), &candidates, report_write.get()};
    long pid = clone_child(args, child_args);
    if (pid < 0) return fail(Error::sys("run: clone3(CLONE_INTO_CGROUP)").hint("confine needs Linux 5.7 or newer"));

    Child child{static_cast<pid_t>(pid), Fd(pidfd)};
    report_write.reset();
    Failure f{};
    ssize_t n;
    do n = read(report_read.get(), &f, sizeof f);
    while (n < 0 && errno == EINTR);
    if (n == sizeof f) {
        waitpid(child.pid, nullptr, 0);
        if (f.step == Step::Exec) return fail(Error::sys("run: cannot run '" + s.argv.front() + "'", f.err));
        return fail(Error::sys(std::string("run: ") + step_name(f.step) + " for '" + s.argv.front() + "'", f.err));
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
