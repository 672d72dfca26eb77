// Process ops: what a job may do to other processes (ptrace, memory,
// signals, scheduling, limits, cgroups, namespaces), and to IPC objects,
// keys and terminals.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <mqueue.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../sockaddr.h"
#include "helper.h"

namespace vmhelper {
namespace {

char g_secret[32] = "victim-secret-7f3a9c";

std::string op_wait(const std::string& path) {
    for (int i = 0; i < 6000; i++) {
        if (access(path.c_str(), F_OK) == 0) return "ok";
        usleep(10000);
    }
    return "wait:ETIMEDOUT";
}

std::string op_ptrace(pid_t pid) {
    if (ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) != 0) return err("ptrace");
    int status = 0;
    if (waitpid(pid, &status, __WALL) != pid) return err("waitpid");
    if (ptrace(PTRACE_DETACH, pid, nullptr, nullptr) != 0) return err("detach");
    return "ok";
}

std::string op_vmread(pid_t pid, uintptr_t addr) {
    char buf[sizeof g_secret] = {};
    iovec local{buf, sizeof buf}, remote{reinterpret_cast<void*>(addr), sizeof buf};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof buf))
        return err("process_vm_readv");
    return strcmp(buf, g_secret) == 0 ? "ok" : "mismatch";
}

std::string op_scan(const std::vector<std::string>& f) {
    if (f.size() < 2) return "usage";
    Fd fd(open(f[1].c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0) return err("open");
    std::string data;
    char buf[4096];
    for (ssize_t n; data.size() < (1 << 20) && (n = read(fd.fd, buf, sizeof buf)) > 0;) data.append(buf, n);
    if (f.size() > 2 && data.find(f[2]) == std::string::npos) return "notfound";
    return "ok";
}

std::string op_readlink(const std::string& path) {
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
    if (n < 0) return err("readlink");
    return "ok " + std::string(buf, n);
}

volatile sig_atomic_t g_sigio_seen = 0;

std::string op_sigio(const std::string& owner, int sig, const std::string& how) {
    const bool self = owner == "self";
    const pid_t who = self ? getpid() : static_cast<pid_t>(std::stol(owner));
    if (self) signal(sig, [](int) { g_sigio_seen = 1; });
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return err("socketpair");
    Fd r(sv[0]), w(sv[1]);
    if (how == "setown") {
        if (fcntl(r.fd, F_SETOWN, who) != 0) return err("F_SETOWN");
    } else if (how == "setown_ex") {
        f_owner_ex ex{who < 0 ? F_OWNER_PGRP : F_OWNER_PID, who < 0 ? -who : who};
        if (fcntl(r.fd, F_SETOWN_EX, &ex) != 0) return err("F_SETOWN_EX");
    } else if (how == "fiosetown") {
        if (ioctl(r.fd, FIOSETOWN, &who) != 0) return err("FIOSETOWN");
    } else {
        return "bad-how";
    }
    if (fcntl(r.fd, F_SETSIG, sig) != 0) return err("F_SETSIG");
    if (fcntl(r.fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) return err("F_SETFL");
    if (write(w.fd, "x", 1) != 1) return err("write");
    return !self || g_sigio_seen ? "ok" : "nosignal";
}

std::string op_ownchild() {
    pid_t child = fork();
    if (child < 0) return err("fork");
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;) pause();
    }
    std::string result = op_ptrace(child);
    if (result == "ok") result = op_vmread(child, reinterpret_cast<uintptr_t>(g_secret));
    if (result == "ok") result = op_scan({"scan", "/proc/" + std::to_string(child) + "/environ", "PATH="});
    if (result == "ok") {
        result = op_readlink("/proc/" + std::to_string(child) + "/fd/0");
        if (result.starts_with("ok")) result = "ok";
    }
    if (result == "ok" && kill(child, SIGTERM) != 0) result = err("kill");
    if (result != "ok") kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    if (result == "ok" && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) result = "child-survived";
    return result;
}

std::string op_userns(const std::string& how) {
    if (how == "unshare") return unshare(CLONE_NEWUSER) == 0 ? "ok" : err("unshare");
    long pid;
    if (how == "clone") {
        pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    } else if (how == "clone3") {
        clone_args args{};
        args.flags = CLONE_NEWUSER;
        args.exit_signal = SIGCHLD;
        pid = syscall(SYS_clone3, &args, sizeof args);
    } else {
        return "usage";
    }
    if (pid < 0) return err(how.c_str());
    if (pid == 0) _exit(0);
    int status = 0;
    waitpid(static_cast<pid_t>(pid), &status, 0);
    return "ok";
}

std::string op_bpf() {
    bpf_attr attr{};
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    if (fd < 0) return err("bpf");
    close(static_cast<int>(fd));
    return "ok";
}

// ---- scheduling ----------------------------------------------------------------

// A child forked on first use of the PID "child": it waits, and dies with us.
pid_t g_child = -1;
// A thread of ours, started on first use of the PID "thread".
std::atomic<pid_t> g_thread{-1};

pid_t own_child() {
    if (g_child > 0) return g_child;
    pid_t self = getpid();
    g_child = fork();
    if (g_child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self) _exit(0);
        for (;;) pause();
    }
    return g_child;
}

pid_t own_thread() {
    if (g_thread > 0) return g_thread;
    pthread_t t;
    auto body = [](void*) -> void* {
        g_thread = gettid();
        for (;;) pause();
    };
    if (pthread_create(&t, nullptr, body, nullptr) != 0) return -1;
    while (g_thread < 0) usleep(1000);
    return g_thread;
}

// PID fields of these ops: a number, ppid, self, child or thread.
pid_t task_of(const std::string& s) {
    if (s == "self") return getpid();
    if (s == "child") return own_child();
    if (s == "thread") return own_thread();
    return pid_of(s);
}

int which_of(const std::string& s) {
    return s == "process" ? PRIO_PROCESS : s == "pgrp" ? PRIO_PGRP : s == "user" ? PRIO_USER : -1;
}

// include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER0.
struct SchedAttr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

std::string op_sched(const std::vector<std::string>& f) {
    const std::string& name = f[0];
    if (name == "prlimit" && f.size() == 3) {
        rlimit lim{std::stoul(f[2]), std::stoul(f[2])};
        return prlimit(task_of(f[1]), RLIMIT_FSIZE, &lim, nullptr) == 0 ? "ok" : err("prlimit");
    }
    if (name == "setpriority" && f.size() == 4) {
        int which = which_of(f[1]);
        if (which < 0) return "usage";
        id_t who = which == PRIO_PROCESS ? static_cast<id_t>(task_of(f[2])) : static_cast<id_t>(std::stoul(f[2]));
        return setpriority(static_cast<__priority_which_t>(which), who, std::stoi(f[3])) == 0 ? "ok"
                                                                                              : err("setpriority");
    }
    if (name == "getnice" && f.size() == 2) {
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(task_of(f[1])));
        return errno ? err("getpriority") : "ok " + std::to_string(nice);
    }
    if (name == "ioprio" && f.size() == 3) {
        // IOPRIO_WHO_PROCESS, _PGRP, _USER are 1, 2, 3; best effort (class 2)
        // level 7. (linux/ioprio.h doesn't compile as C++.)
        int which = which_of(f[1]);
        if (which < 0) return "usage";
        long who = which == PRIO_PROCESS ? task_of(f[2]) : std::stol(f[2]);
        return syscall(SYS_ioprio_set, which + 1, who, (2 << 13) | 7) == 0 ? "ok" : err("ioprio_set");
    }
    if (name == "affinity" && f.size() == 3) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(std::stoi(f[2]), &set);
        return sched_setaffinity(task_of(f[1]), sizeof set, &set) == 0 ? "ok" : err("sched_setaffinity");
    }
    if (name == "sched" && f.size() == 3) {
        int policy = f[2] == "batch" ? SCHED_BATCH : f[2] == "idle" ? SCHED_IDLE : f[2] == "other" ? SCHED_OTHER : -1;
        if (policy < 0) return "usage";
        sched_param p{0};
        return sched_setscheduler(task_of(f[1]), policy, &p) == 0 ? "ok" : err("sched_setscheduler");
    }
    if (name == "setattr" && f.size() == 3) {
        SchedAttr a{};
        a.size = sizeof a;
        a.policy = SCHED_OTHER;
        a.nice = std::stoi(f[2]);
        return syscall(SYS_sched_setattr, task_of(f[1]), &a, 0) == 0 ? "ok" : err("sched_setattr");
    }
    if (name == "setparam" && f.size() == 2) {
        sched_param p{0};
        return sched_setparam(task_of(f[1]), &p) == 0 ? "ok" : err("sched_setparam");
    }
    if (name == "child" && f.size() == 1) {
        pid_t c = own_child();
        return c < 0 ? err("fork") : "ok " + std::to_string(c);
    }
    return "usage";
}

// ---- IPC ----

std::string op_ipc(const std::vector<std::string>& f) {
    const std::string& kind = f[0];
    if (f.size() < 3 || (f[1] != "make" && f[1] != "read")) return "usage";
    const bool make = f[1] == "make";
    if (make != (f.size() == 4)) return "usage";
    const std::string text = make ? f[3] : "";
    if (kind == "shm" || kind == "msg" || kind == "sem") {
        key_t key = static_cast<key_t>(std::stoul(f[2], nullptr, 16));
        int create = make ? IPC_CREAT | IPC_EXCL | 0600 : 0;
        if (kind == "shm") {
            int id = shmget(key, 4096, create);
            if (id < 0) return err("shmget");
            auto* mem = static_cast<char*>(shmat(id, nullptr, make ? 0 : SHM_RDONLY));
            if (mem == reinterpret_cast<char*>(-1)) return err("shmat");
            std::string r = make ? "ok " + std::to_string(id) : "ok " + std::string(mem, strnlen(mem, 4096));
            if (make) memcpy(mem, text.c_str(), std::min<size_t>(text.size() + 1, 4096));
            shmdt(mem);
            return r;
        }
        if (kind == "msg") {
            int id = msgget(key, create);
            if (id < 0) return err("msgget");
            struct {
                long type;
                char text[256];
            } m{1, {}};
            if (make) {
                snprintf(m.text, sizeof m.text, "%s", text.c_str());
                if (msgsnd(id, &m, strlen(m.text) + 1, IPC_NOWAIT) != 0) return err("msgsnd");
                return "ok " + std::to_string(id);
            }
            // Read it, then put it back for the next reader.
            ssize_t n = msgrcv(id, &m, sizeof m.text, 0, IPC_NOWAIT);
            if (n < 0) return err("msgrcv");
            if (msgsnd(id, &m, static_cast<size_t>(n), IPC_NOWAIT) != 0) return err("msgsnd");
            return "ok " + std::string(m.text, strnlen(m.text, static_cast<size_t>(n)));
        }
        int id = semget(key, 1, create);
        if (id < 0) return err("semget");
        if (make) {
            if (semctl(id, 0, SETVAL, std::stoi(text)) != 0) return err("semctl");
            return "ok " + std::to_string(id);
        }
        int v = semctl(id, 0, GETVAL);
        return v < 0 ? err("semctl") : "ok " + std::to_string(v);
    }
    if (kind == "mq") {
        mq_attr attr{};
        attr.mq_maxmsg = 4;
        attr.mq_msgsize = 256;
        mqd_t q = make ? mq_open(f[2].c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, &attr)
                       : mq_open(f[2].c_str(), O_RDWR | O_CLOEXEC);
        if (q == static_cast<mqd_t>(-1)) return err("mq_open");
        char buf[256];
        std::string r = "ok";
        if (make) {
            if (mq_send(q, text.c_str(), text.size(), 0) != 0) r = err("mq_send");
        } else {
            timespec now{};
            clock_gettime(CLOCK_REALTIME, &now);
            ssize_t n = mq_timedreceive(q, buf, sizeof buf, nullptr, &now);
            if (n < 0)
                r = err("mq_receive");
            else if (mq_send(q, buf, static_cast<size_t>(n), 0) != 0)
                r = err("mq_send");
            else
                r = "ok " + std::string(buf, static_cast<size_t>(n));
        }
        mq_close(q);
        return r;
    }
    if (kind == "pshm") {
        Fd fd(shm_open(f[2].c_str(), make ? O_RDWR | O_CREAT | O_EXCL : O_RDONLY, 0600));
        if (fd.fd < 0) return err("shm_open");
        if (make)
            return write(fd.fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? "ok" : err("write");
        char buf[256];
        ssize_t n = read(fd.fd, buf, sizeof buf);
        return n < 0 ? err("read") : "ok " + std::string(buf, static_cast<size_t>(n));
    }
    return "usage";
}

// ---- keys (raw syscalls: no libkeyutils) ----

long key_id(const std::string& s) {
    if (s == "@t") return KEY_SPEC_THREAD_KEYRING;
    if (s == "@p") return KEY_SPEC_PROCESS_KEYRING;
    if (s == "@s") return KEY_SPEC_SESSION_KEYRING;
    if (s == "@u") return KEY_SPEC_USER_KEYRING;
    if (s == "@us") return KEY_SPEC_USER_SESSION_KEYRING;
    return std::stol(s);
}

long keyctl(int cmd, unsigned long a2 = 0, unsigned long a3 = 0, unsigned long a4 = 0, unsigned long a5 = 0) {
    return syscall(SYS_keyctl, cmd, a2, a3, a4, a5);
}

std::string op_key(const std::vector<std::string>& f) {
    if (f.size() < 2) return "usage";
    const std::string& what = f[1];
    auto serial = [](long s, const char* call) { return s < 0 ? err(call) : "ok " + std::to_string(s); };
    if (what == "add" && f.size() == 5)
        return serial(syscall(SYS_add_key, "user", f[3].c_str(), f[4].data(), f[4].size(), key_id(f[2])), "add_key");
    if (what == "id" && f.size() == 3) return serial(keyctl(KEYCTL_GET_KEYRING_ID, key_id(f[2]), 0), "keyctl");
    if (what == "search" && f.size() == 4)
        return serial(keyctl(KEYCTL_SEARCH, key_id(f[2]), reinterpret_cast<unsigned long>("user"),
                             reinterpret_cast<unsigned long>(f[3].c_str()), 0),
                      "keyctl");
    if (what == "persistent" && f.size() == 2)
        return serial(keyctl(KEYCTL_GET_PERSISTENT, static_cast<unsigned long>(-1), KEY_SPEC_SESSION_KEYRING),
                      "keyctl");
    if (what == "link" && f.size() == 4)
        return keyctl(KEYCTL_LINK, key_id(f[2]), key_id(f[3])) == 0 ? "ok" : err("keyctl");
    if (what == "invalidate" && f.size() == 3)
        return keyctl(KEYCTL_INVALIDATE, key_id(f[2])) == 0 ? "ok" : err("keyctl");
    if (what == "setperm" && f.size() == 4)
        return keyctl(KEYCTL_SETPERM, key_id(f[2]), std::stoul(f[3], nullptr, 16)) == 0 ? "ok" : err("keyctl");
    char buf[4096];
    if ((what == "read" || what == "list" || what == "describe") && f.size() == 3) {
        long n = keyctl(what == "describe" ? KEYCTL_DESCRIBE : KEYCTL_READ, key_id(f[2]),
                        reinterpret_cast<unsigned long>(buf), sizeof buf);
        if (n < 0) return err("keyctl");
        size_t len = std::min(static_cast<size_t>(n), sizeof buf);
        if (what == "describe") return "ok " + std::string(buf, strnlen(buf, len));
        if (what == "read") return "ok " + std::string(buf, len);
        std::string r = "ok";
        for (size_t i = 0; i + 4 <= len; i += 4) {
            int32_t s;
            memcpy(&s, buf + i, 4);
            r += " " + std::to_string(s);
        }
        return r;
    }
    return "usage";
}

// ---- terminals ----

// Reads one line (up to 5 s) from a tty fd: the line, without its newline.
std::string tty_line(int fd) {
    if (!wait_readable(fd, 5000)) return "read:ETIMEDOUT";
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) return err("read");
    std::string s(buf, static_cast<size_t>(n));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return "ok " + s;
}

std::string op_tty(const std::vector<std::string>& f) {
    const std::string& name = f[0];
    if (name == "pty" && f.size() == 5 && f[1] == "hold") {
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0) return err("posix_openpt");
        if (grantpt(m) != 0) return err("grantpt");
        if (unlockpt(m) != 0) return err("unlockpt");
        const char* slave = ptsname(m);
        if (!slave) return err("ptsname");
        std::string path = slave;
        for (int i = 0, n = std::stoi(f[4]); i < n; i++) {
            std::string line = f[3] + "\n";
            if (write(m, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return err("write");
        }
        g_held.push_back(m);
        std::string tmp = f[2] + ".tmp";
        FILE* out = fopen(tmp.c_str(), "w");
        if (!out) return err("fopen");
        fprintf(out, "%s\n", path.c_str());
        fclose(out);
        if (rename(tmp.c_str(), f[2].c_str()) != 0) return err("rename");
        return "ok " + path;
    }
    if (name == "pty" && f.size() == 2 && f[1] == "own") {
        Fd m(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
        if (m.fd < 0) return err("posix_openpt");
        if (grantpt(m.fd) != 0) return err("grantpt");
        if (unlockpt(m.fd) != 0) return err("unlockpt");
        const char* slave = ptsname(m.fd);
        if (!slave) return err("ptsname");
        std::string path = slave;
        Fd s(open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
        if (s.fd < 0) return err("open");
        // No echo: what the master reads back is then only what the slave wrote.
        termios t;
        if (tcgetattr(s.fd, &t) != 0) return err("tcgetattr");
        t.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        if (tcsetattr(s.fd, TCSANOW, &t) != 0) return err("tcsetattr");
        if (write(m.fd, "in\n", 3) != 3) return err("write");
        std::string in = tty_line(s.fd);
        if (in != "ok in") return "slave-" + in;
        if (write(s.fd, "out\n", 4) != 4) return err("write");
        std::string out = tty_line(m.fd);
        if (out != "ok out") return "master-" + out;
        return "ok " + path;
    }
    if (name == "ttyread" && f.size() == 2) {
        Fd fd(open(f[1].c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
        if (fd.fd < 0) return err("open");
        return tty_line(fd.fd);
    }
    if (name == "tiocsti" && f.size() == 3) {
        int fd = std::stoi(f[1]);
        for (char c : f[2] + "\n")
            if (ioctl(fd, TIOCSTI, &c) != 0) return err("TIOCSTI");
        return "ok";
    }
    if (name == "tcxonc" && f.size() == 2) {
        int fd = std::stoi(f[1]);
        if (tcflow(fd, TCOOFF) != 0) return err("TCXONC");
        return tcflow(fd, TCOON) == 0 ? "ok" : err("TCXONC");
    }
    if (name == "tiocsctty" && f.size() == 2)
        return ioctl(std::stoi(f[1]), TIOCSCTTY, 0) == 0 ? "ok" : err("TIOCSCTTY");
    return "usage";
}

// The ops above, or nullopt for another op.
std::optional<std::string> op_sched_ipc_key_tty(const std::vector<std::string>& f) {
    static const std::vector<std::string> sched = {"prlimit", "setpriority", "getnice",  "ioprio", "affinity",
                                                   "sched",   "setattr",     "setparam", "child"};
    static const std::vector<std::string> ipc = {"shm", "msg", "sem", "mq", "pshm"};
    static const std::vector<std::string> tty = {"pty", "ttyread", "tiocsti", "tiocsctty", "tcxonc"};
    auto in = [&](const std::vector<std::string>& names) {
        return std::find(names.begin(), names.end(), f[0]) != names.end();
    };
    if (in(sched)) return op_sched(f);
    if (in(ipc)) return op_ipc(f);
    if (f[0] == "key") return op_key(f);
    if (in(tty)) return op_tty(f);
    return std::nullopt;
}

// RLIMIT_FSIZE of PID, read (prlimit with no new limit): ok SOFT.
std::string op_limit(const std::vector<std::string>& f) {
    if (f.size() != 2) return "usage";
    rlimit old{};
    if (prlimit(task_of(f[1]), RLIMIT_FSIZE, nullptr, &old) != 0) return err("prlimit");
    return old.rlim_cur == RLIM_INFINITY ? "ok unlimited" : "ok " + std::to_string(old.rlim_cur);
}

// clone3(CLONE_INTO_CGROUP) into the cgroup directory DIR, opened O_PATH:
// ok CGROUP, the child's own line of /proc/CHILD/cgroup ("0::/path").
std::string op_cgclone(const std::vector<std::string>& f) {
    if (f.size() != 2) return "usage";
    Fd dir(open(f[1].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (dir.fd < 0) return err("open");
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<uint64_t>(dir.fd);
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) return err("clone3");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;) pause();
    }
    std::string r;
    FILE* in = fopen(("/proc/" + std::to_string(pid) + "/cgroup").c_str(), "r");
    char line[4096] = {};
    if (!in)
        r = err("fopen");
    else if (!fgets(line, sizeof line, in))
        r = "read:empty";
    else
        r = "ok " + std::string(line, strcspn(line, "\n"));
    if (in) fclose(in);
    kill(static_cast<pid_t>(pid), SIGKILL);
    waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return r;
}

// flood,PATH,N: N opens of PATH; ok refused N cpu_ms M (how many were
// refused with EPERM, and this process's CPU time).
std::string op_flood(const std::vector<std::string>& f) {
    if (f.size() != 3) return "usage";
    const long n = std::stol(f[2]);
    long refused = 0;
    for (long i = 0; i < n; i++) {
        int fd = open(f[1].c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            close(fd);
        else if (errno == EPERM)
            refused++;
    }
    timespec cpu{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    return "ok refused " + std::to_string(refused) + " cpu_ms " +
           std::to_string(cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000);
}

}  // namespace

std::optional<std::string> proc_op(const Fields& f) {
    const std::string& name = f[0];
    if (name == "touch" && f.size() == 2) {
        Fd fd(open(f[1].c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        return fd.fd < 0 ? err("open") : "ok";
    }
    if (name == "wait" && f.size() == 2) return op_wait(f[1]);
    if (name == "ptrace" && f.size() == 2) return op_ptrace(pid_of(f[1]));
    if (name == "vmread" && f.size() == 3) return op_vmread(pid_of(f[1]), std::stoull(f[2], nullptr, 16));
    if (name == "scan") return op_scan(f);
    if (name == "readlink" && f.size() == 2) return op_readlink(f[1]);
    if (name == "kill" && f.size() == 3) return kill(pid_of(f[1]), std::stoi(f[2])) == 0 ? "ok" : err("kill");
    if (auto r = op_sched_ipc_key_tty(f)) return *r;
    if (name == "sigio" && (f.size() == 3 || f.size() == 4))
        return op_sigio(f[1], std::stoi(f[2]), f.size() == 4 ? f[3] : "setown");
    if (name == "ownchild") return op_ownchild();
    if (name == "userns" && f.size() == 2) return op_userns(f[1]);
    if (name == "bpf") return op_bpf();
    if (name == "ids") {
        uid_t r, e, s;
        getresuid(&r, &e, &s);
        return "ok " + std::to_string(r) + " " + std::to_string(e) + " " + std::to_string(s);
    }
    if (name == "limit") return op_limit(f);
    if (name == "cgclone") return op_cgclone(f);
    if (name == "flood") return op_flood(f);
    return std::nullopt;
}

int victims(const Fields& f) {
    if (f.size() != 3) return 2;
    int n = std::stoi(f[1]);
    char hex[32];
    snprintf(hex, sizeof hex, "%lx\n", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(g_secret)));
    std::string text = hex;
    pid_t self = getpid();
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != self) _exit(0);
            prctl(PR_SET_NAME, "victim");
            for (;;) pause();
        }
        text += std::to_string(pid) + "\n";
    }
    std::string tmp = f[2] + ".tmp";
    FILE* out = fopen(tmp.c_str(), "w");
    if (!out) return 1;
    fputs(text.c_str(), out);
    fclose(out);
    if (rename(tmp.c_str(), f[2].c_str()) != 0) return 1;
    // Reap victims as they die, so that they vanish from /proc.
    for (;;)
        if (wait(nullptr) < 0 && errno == ECHILD) pause();
}

}  // namespace vmhelper
