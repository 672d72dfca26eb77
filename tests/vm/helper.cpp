// confine_vm_helper: what a confined job does in the network tests, with
// exact errno reporting and fast start-up (python takes seconds under TCG).
//
//   vmhelper connect tcp|udp ADDR PORT   IPv4 or IPv6 ADDR
//   vmhelper connect unix PATH
//   vmhelper connect abstract NAME
//
// Prints "connected" and exits 0, or "connect: <strerror>" and exits 1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int usage() {
    fprintf(stderr, "usage: vmhelper connect tcp|udp ADDR PORT | unix PATH | abstract NAME\n");
    return 2;
}

int report(const char* what, int rc) {
    if (rc != 0) {
        printf("%s: %s\n", what, strerror(errno));
        return 1;
    }
    printf("connected\n");
    return 0;
}

int connect_inet(int type, const char* addr, const char* port) {
    sockaddr_storage ss{};
    socklen_t len;
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    uint16_t p = htons(static_cast<uint16_t>(atoi(port)));
    if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = p;
        len = sizeof *sin;
    } else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = p;
        len = sizeof *sin6;
    } else {
        return usage();
    }
    int fd = socket(ss.ss_family, type, 0);
    if (fd < 0) return report("socket", -1);
    return report("connect", connect(fd, reinterpret_cast<sockaddr*>(&ss), len));
}

int connect_unix(const char* name, bool abstract) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n + 2 > sizeof sun.sun_path) return usage();
    memcpy(sun.sun_path + (abstract ? 1 : 0), name, n);
    // A path counts its NUL, an abstract name its leading NUL: n + 1 either way.
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return report("socket", -1);
    return report("connect", connect(fd, reinterpret_cast<sockaddr*>(&sun), len));
}

}  // namespace

// ---- filesystem operations (fs_ops_test.cpp, fs_race_test.cpp) ---------------
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <vector>

//
//   vmhelper fsops OP...        runs each OP in turn, in this one process
//   vmhelper fsrace LINK A B READPATH SECONDS
//
// fsops: each OP is one argument, its fields separated by spaces. Before OP
// number I (from 0) the process renames itself "opI", so that the audit
// line of a refusal names the OP that caused it. Prints one line per OP:
// "I ok", "I ok <data read, escaped>" or "I <errno name>", and exits 0.
//   read PATH                  open O_RDONLY and read
//   open PATH FLAGS            FLAGS: comma list of r w rw trunc append creat excl
//   mkdir|rmdir|unlink|mkfifo|mknod|bind PATH   (mknod: a regular file;
//                              bind: a unix stream socket to PATH)
//   symlink TARGET PATH | link OLD NEW | rename OLD NEW
//   renameat2 OLD NEW noreplace|exchange
//   truncate PATH LEN | chmod PATH OCTAL | chown PATH (to our own uid and gid)
//   utimes PATH set|now        explicit times, or NULL (the current time)
//   setxattr PATH NAME VALUE | removexattr PATH NAME
//   chdir PATH
//   fd-chmod PATH OCTAL | fd-chown PATH | fd-utimes PATH | fd-setxattr PATH NAME VALUE
//                              the same through an fd opened O_RDONLY
//   tmpfile DIR                open(DIR, O_TMPFILE | O_WRONLY)
//   tmpfile-link DIR NEW       an O_TMPFILE in DIR, linked in as NEW through /proc/self/fd
//   opath-reopen PATH [w]      open O_PATH, then read /proc/self/fd/N (w: open it O_WRONLY)
//   opath-at DIR NAME          open DIR O_PATH, then read openat(dirfd, NAME)
//   openat2 DIR PATH RESOLVE   DIR "-" for AT_FDCWD, else opened O_PATH;
//                              RESOLVE: no_symlinks no_magiclinks beneath
//                              in_root no_xdev cached; then read
//   uring-open PATH inline|async|sqpoll   IORING_OP_OPENAT, then read
//   memfd-loader LOADER PROGRAM   copy PROGRAM into a memfd and run it as
//                              `LOADER /proc/self/fd/N`: "ok" if it exited 0
//   mprotect-exec PATH         map PATH read-only, then mprotect it PROT_EXEC
// fsrace: a child swaps the symlink LINK between targets A and B (symlink
// to LINK.tmp, rename over LINK) while this process opens and reads
// READPATH (LINK or a path through it) for SECONDS. Prints one line per
// distinct outcome, "content <escaped> N" or "error <errno name> N".
namespace fsops {

std::string escape(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\\')
            out += "\\\\";
        else if (c < 0x20 || c >= 0x7f) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else
            out += static_cast<char>(c);
    }
    return out;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = s.find(' ', i);
        if (j == std::string::npos) j = s.size();
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

std::string err(int e) {
    const char* n = strerrorname_np(e);
    return n ? n : ("errno" + std::to_string(e));
}

// Reads fd (up to 4 KiB) and closes it: "ok <data>" or the read's errno.
std::string read_fd(int fd) {
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    if (n < 0) return err(e);
    return "ok " + escape(std::string(buf, static_cast<size_t>(n)));
}

std::string result(int rc) { return rc < 0 ? err(errno) : "ok"; }

std::string open_read(int fd) { return fd < 0 ? err(errno) : read_fd(fd); }

int open_flags(const std::string& list) {
    int flags = 0;
    std::string f;
    for (size_t i = 0; i <= list.size(); i++) {
        if (i < list.size() && list[i] != ',') {
            f += list[i];
            continue;
        }
        if (f == "r") flags |= O_RDONLY;
        else if (f == "w") flags |= O_WRONLY;
        else if (f == "rw") flags |= O_RDWR;
        else if (f == "trunc") flags |= O_TRUNC;
        else if (f == "append") flags |= O_APPEND;
        else if (f == "creat") flags |= O_CREAT;
        else if (f == "excl") flags |= O_EXCL;
        else return -1;
        f.clear();
    }
    return flags;
}

std::string do_openat2(const std::string& dir, const std::string& path, const std::string& how) {
    open_how h{};
    h.flags = O_RDONLY;
    if (how == "no_symlinks") h.resolve = RESOLVE_NO_SYMLINKS;
    else if (how == "no_magiclinks") h.resolve = RESOLVE_NO_MAGICLINKS;
    else if (how == "beneath") h.resolve = RESOLVE_BENEATH;
    else if (how == "in_root") h.resolve = RESOLVE_IN_ROOT;
    else if (how == "no_xdev") h.resolve = RESOLVE_NO_XDEV;
    else if (how == "cached") h.resolve = RESOLVE_CACHED;
    else return "usage";
    int dfd = AT_FDCWD;
    if (dir != "-" && (dfd = open(dir.c_str(), O_PATH | O_DIRECTORY)) < 0) return "dir-" + err(errno);
    long fd = -1;
    // RESOLVE_CACHED fails with EAGAIN unless every step is in the dcache:
    // a stat fills it.
    for (int tries = 0; tries < 5; tries++) {
        struct stat st;
        fstatat(dfd, path.c_str(), &st, 0);
        fd = syscall(SYS_openat2, dfd, path.c_str(), &h, sizeof h);
        if (fd >= 0 || errno != EAGAIN || how != "cached") break;
    }
    int e = errno;
    if (dfd >= 0) close(dfd);
    errno = e;
    return open_read(static_cast<int>(fd));
}

// One IORING_OP_OPENAT through a ring set up with raw syscalls.
std::string uring_open(const std::string& path, const std::string& mode) {
    io_uring_params p{};
    if (mode == "sqpoll") {
        p.flags = IORING_SETUP_SQPOLL;
        p.sq_thread_idle = 1000;
    } else if (mode != "inline" && mode != "async") {
        return "usage";
    }
    int ring = static_cast<int>(syscall(SYS_io_uring_setup, 4, &p));
    if (ring < 0) return "setup-" + err(errno);
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(__u32);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    bool single = p.features & IORING_FEAT_SINGLE_MMAP;
    if (single) sq_len = cq_len = std::max(sq_len, cq_len);
    auto* sq = static_cast<char*>(
        mmap(nullptr, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING));
    auto* cq = single ? sq
                      : static_cast<char*>(mmap(nullptr, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                                ring, IORING_OFF_CQ_RING));
    auto* sqes = static_cast<io_uring_sqe*>(mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe),
                                                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                                                 IORING_OFF_SQES));
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return "mmap-" + err(errno);

    auto* sq_tail = reinterpret_cast<__u32*>(sq + p.sq_off.tail);
    auto* sq_mask = reinterpret_cast<__u32*>(sq + p.sq_off.ring_mask);
    auto* sq_array = reinterpret_cast<__u32*>(sq + p.sq_off.array);
    auto* sq_flags = reinterpret_cast<__u32*>(sq + p.sq_off.flags);
    auto* cq_head = reinterpret_cast<__u32*>(cq + p.cq_off.head);
    auto* cq_tail = reinterpret_cast<__u32*>(cq + p.cq_off.tail);
    auto* cq_mask = reinterpret_cast<__u32*>(cq + p.cq_off.ring_mask);
    auto* cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);

    __u32 tail = *sq_tail, idx = tail & *sq_mask;
    io_uring_sqe* sqe = &sqes[idx];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = IORING_OP_OPENAT;
    sqe->fd = AT_FDCWD;
    sqe->addr = reinterpret_cast<__u64>(path.c_str());
    sqe->open_flags = O_RDONLY;
    sqe->user_data = 42;
    if (mode == "async") sqe->flags = IOSQE_ASYNC;
    sq_array[idx] = idx;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);

    unsigned enter_flags = IORING_ENTER_GETEVENTS;
    unsigned to_submit = 1;
    if (mode == "sqpoll") {
        to_submit = 0;
        if (__atomic_load_n(sq_flags, __ATOMIC_ACQUIRE) & IORING_SQ_NEED_WAKEUP) enter_flags |= IORING_ENTER_SQ_WAKEUP;
    }
    for (int tries = 0; __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE) == *cq_head; tries++) {
        if (tries > 1000) return "no-completion";
        if (syscall(SYS_io_uring_enter, ring, to_submit, 1, enter_flags, nullptr, 0) < 0 && errno != EINTR)
            return "enter-" + err(errno);
        to_submit = 0;
        if (mode == "sqpoll" && (__atomic_load_n(sq_flags, __ATOMIC_ACQUIRE) & IORING_SQ_NEED_WAKEUP))
            enter_flags |= IORING_ENTER_SQ_WAKEUP;
    }
    io_uring_cqe* cqe = &cqes[*cq_head & *cq_mask];
    int res = cqe->res;
    __atomic_store_n(cq_head, *cq_head + 1, __ATOMIC_RELEASE);
    close(ring);
    if (res < 0) return err(-res);
    return read_fd(res);
}

std::string run_op(const std::vector<std::string>& a) {
    const std::string& op = a[0];
    auto p = [&](size_t i) { return a.at(i).c_str(); };
    if (op == "read" && a.size() == 2) return open_read(open(p(1), O_RDONLY));
    if (op == "open" && a.size() == 3) {
        int flags = open_flags(a[2]);
        if (flags < 0) return "usage";
        int fd = open(p(1), flags, 0644);
        if (fd < 0) return err(errno);
        close(fd);
        return "ok";
    }
    if (op == "mkdir" && a.size() == 2) return result(mkdir(p(1), 0755));
    if (op == "rmdir" && a.size() == 2) return result(rmdir(p(1)));
    if (op == "unlink" && a.size() == 2) return result(unlink(p(1)));
    if (op == "mkfifo" && a.size() == 2) return result(mkfifo(p(1), 0644));
    if (op == "mknod" && a.size() == 2) return result(mknod(p(1), S_IFREG | 0644, 0));
    if (op == "bind" && a.size() == 2) {
        sockaddr_un sun{};
        sun.sun_family = AF_UNIX;
        if (a[1].size() >= sizeof sun.sun_path) return "usage";
        memcpy(sun.sun_path, p(1), a[1].size());
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) return "socket-" + err(errno);
        int rc = bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun);
        int e = errno;
        close(fd);
        errno = e;
        return result(rc);
    }
    if (op == "symlink" && a.size() == 3) return result(symlink(p(1), p(2)));
    if (op == "link" && a.size() == 3) return result(link(p(1), p(2)));
    if (op == "rename" && a.size() == 3) return result(rename(p(1), p(2)));
    if (op == "renameat2" && a.size() == 4) {
        unsigned flags = a[3] == "noreplace" ? RENAME_NOREPLACE : a[3] == "exchange" ? RENAME_EXCHANGE : 0;
        if (!flags) return "usage";
        return result(renameat2(AT_FDCWD, p(1), AT_FDCWD, p(2), flags));
    }
    if (op == "truncate" && a.size() == 3) return result(truncate(p(1), atol(p(2))));
    if (op == "chmod" && a.size() == 3) return result(chmod(p(1), static_cast<mode_t>(strtol(p(2), nullptr, 8))));
    if (op == "chown" && a.size() == 2) return result(chown(p(1), getuid(), getgid()));
    if (op == "utimes" && a.size() == 3) {
        if (a[2] == "now") return result(utimensat(AT_FDCWD, p(1), nullptr, 0));
        timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
        return result(utimensat(AT_FDCWD, p(1), ts, 0));
    }
    if (op == "setxattr" && a.size() == 4) return result(setxattr(p(1), p(2), p(3), a[3].size(), 0));
    if (op == "removexattr" && a.size() == 3) return result(removexattr(p(1), p(2)));
    if (op == "chdir" && a.size() == 2) return result(chdir(p(1)));
    if (op.starts_with("fd-") && a.size() >= 2) {
        int fd = open(p(1), O_RDONLY);
        if (fd < 0) return "open-" + err(errno);
        int rc = -1;
        errno = 0;
        if (op == "fd-chmod" && a.size() == 3) rc = fchmod(fd, static_cast<mode_t>(strtol(p(2), nullptr, 8)));
        else if (op == "fd-chown" && a.size() == 2) rc = fchown(fd, getuid(), getgid());
        else if (op == "fd-utimes" && a.size() == 2) rc = futimens(fd, nullptr);
        else if (op == "fd-setxattr" && a.size() == 4) rc = fsetxattr(fd, p(2), p(3), a[3].size(), 0);
        int e = errno;
        close(fd);
        if (rc < 0 && e == 0) return "usage";
        errno = e;
        return result(rc);
    }
    if (op == "tmpfile" && a.size() == 2) {
        int fd = open(p(1), O_TMPFILE | O_WRONLY, 0600);
        if (fd < 0) return err(errno);
        close(fd);
        return "ok";
    }
    if (op == "tmpfile-link" && a.size() == 3) {
        int fd = open(p(1), O_TMPFILE | O_WRONLY, 0600);
        if (fd < 0) return "tmpfile-" + err(errno);
        int rc = linkat(AT_FDCWD, ("/proc/self/fd/" + std::to_string(fd)).c_str(), AT_FDCWD, p(2), AT_SYMLINK_FOLLOW);
        int e = errno;
        close(fd);
        errno = e;
        return result(rc);
    }
    if (op == "opath-reopen" && (a.size() == 2 || (a.size() == 3 && a[2] == "w"))) {
        int fd = open(p(1), O_PATH);
        if (fd < 0) return "opath-" + err(errno);
        std::string proc = "/proc/self/fd/" + std::to_string(fd);
        std::string r;
        if (a.size() == 3) {
            int w = open(proc.c_str(), O_WRONLY);
            r = w < 0 ? err(errno) : "ok";
            if (w >= 0) close(w);
        } else {
            r = open_read(open(proc.c_str(), O_RDONLY));
        }
        close(fd);
        return r;
    }
    if (op == "opath-at" && a.size() == 3) {
        int dfd = open(p(1), O_PATH | O_DIRECTORY);
        if (dfd < 0) return "opath-" + err(errno);
        std::string r = open_read(openat(dfd, p(2), O_RDONLY));
        close(dfd);
        return r;
    }
    if (op == "openat2" && a.size() == 4) return do_openat2(a[1], a[2], a[3]);
    if (op == "uring-open" && a.size() == 3) return uring_open(a[1], a[2]);
    if (op == "memfd-loader" && a.size() == 3) {
        int in = open(p(2), O_RDONLY);
        if (in < 0) return "open-" + err(errno);
        int mfd = memfd_create("prog", 0);
        if (mfd < 0) return "memfd-" + err(errno);
        char buf[65536];
        for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;)
            if (write(mfd, buf, static_cast<size_t>(n)) != n) return "write-" + err(errno);
        close(in);
        std::string fdpath = "/proc/self/fd/" + std::to_string(mfd);
        pid_t pid = fork();
        if (pid == 0) {
            execl(p(1), p(1), fdpath.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        close(mfd);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "ok";
        return "exit" + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    if (op == "mprotect-exec" && a.size() == 2) {
        int fd = open(p(1), O_RDONLY);
        if (fd < 0) return "open-" + err(errno);
        void* m = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) return "mmap-" + err(errno);
        int rc = mprotect(m, 4096, PROT_READ | PROT_EXEC);
        int e = errno;
        munmap(m, 4096);
        return rc == 0 ? "ok" : err(e);
    }
    return "usage";
}

int ops(int argc, char** argv) {
    for (int i = 2; i < argc; i++) {
        std::string comm = "op" + std::to_string(i - 2);
        prctl(PR_SET_NAME, comm.c_str());
        std::vector<std::string> a = split(argv[i]);
        std::string r = a.empty() ? "usage" : run_op(a);
        printf("%d %s\n", i - 2, r.c_str());
        fflush(stdout);
        if (r == "usage") {
            fprintf(stderr, "vmhelper fsops: bad op '%s'\n", argv[i]);
            return 2;
        }
    }
    return 0;
}

int race(int argc, char** argv) {
    if (argc != 7) return usage();
    std::string link = argv[2], a = argv[3], b = argv[4], readpath = argv[5], tmp = link + ".tmp";
    double seconds = atof(argv[6]);
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        for (unsigned i = 0;; i++) {
            unlink(tmp.c_str());
            if (symlink(i % 2 ? b.c_str() : a.c_str(), tmp.c_str()) == 0) rename(tmp.c_str(), link.c_str());
        }
    }
    std::map<std::string, long> outcomes;
    timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long n = 0;; n++) {
        if (n % 64 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds) break;
        }
        int fd = open(readpath.c_str(), O_RDONLY);
        if (fd < 0) {
            outcomes["error " + err(errno)]++;
            continue;
        }
        std::string r = read_fd(fd);
        outcomes[r.starts_with("ok ") ? "content " + r.substr(3) : "error read-" + r]++;
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    for (const auto& [what, count] : outcomes) printf("%s %ld\n", what.c_str(), count);
    return 0;
}

}  // namespace fsops

// ---- network and process operations (net_more_test.cpp, proc_more_test.cpp) --
#include <linux/bpf.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <net/ethernet.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "sockaddr.h"

//
//   vmhelper netproc OP...     runs each OP in turn, in this one process
//   vmhelper victims N FILE    forks N children that wait for a signal
//
// netproc: each OP is one argument, its fields separated by commas. Prints
// "pid N" (this process), then one line per OP: "OP -> ok[ detail]" or
// "OP -> CALL:ERRNO_NAME" (the call that failed). Exits with the number of
// OPs that failed. ADDR is an IPv4 or IPv6 literal (::ffff:a.b.c.d: an IPv6
// socket); PORT a number, heldN (the port of the N-th socket `hold` kept) or
// /FILE (a port `hold` wrote there); PID a number or ppid; NAME a unix
// socket path, or @name for an abstract one.
//   connect,tcp|udp,ADDR,PORT  connect (udp: then send one datagram)
//   sendto,udp|udp-unspec,ADDR,PORT  unconnected sendto (udp-unspec: an
//                              IPv4 address with sin_family AF_UNSPEC)
//   fastopen,ADDR,PORT         TCP sendto with MSG_FASTOPEN
//   bind,tcp|udp|mptcp,ADDR,PORT   bind, then close
//   hold,tcp|udp,ADDR,PORT[,FILE]  bind (tcp: and listen) and keep the socket;
//                              writes the bound port to FILE
//   unbind                     connect(AF_UNSPEC) on every held socket
//   serve,tcp|udp,ADDR,PORT    a round trip to our own server: bind (and
//                              listen); a child connects and sends (udp: a
//                              connected send and a sendto); we receive
//   unix,stream|seqpacket|dgram|dgramto,NAME  connect (dgram: then send;
//                              dgramto: an unconnected sendto)
//   autobind,stream|dgram      bind to the family only (an abstract name the
//                              kernel picks), then reach it from a second socket
//   socket,netlink|packet|alg|vsock
//   touch,FILE | wait,FILE     create FILE | wait up to 60 s until it exists
//   ptrace,PID                 PTRACE_ATTACH, wait for the stop, detach
//   vmread,PID,HEXADDR         process_vm_readv; ok if it reads the victims' secret
//   open,PATH[,NEEDLE]         open O_RDONLY and read; ok if NEEDLE is in it
//   readlink,PATH | kill,PID,SIG
//   sigio,OWNER,SIG[,HOW]      a socket owned by OWNER (a PID, -PGRP or
//                              self), F_SETSIG SIG, O_ASYNC, then a write to
//                              its peer: the kernel signals OWNER. HOW sets
//                              the owner: setown (default), setown_ex or
//                              fiosetown. For self, ok only if SIG arrived.
//   ownchild                   fork a child, then ptrace it, read its environ
//                              and memory, and kill it
//   userns,clone|clone3|unshare    a new user namespace
//   bpf                        BPF_MAP_CREATE (an array)
//   ids                        ok RUID EUID SUID
// victims: each child is named "victim", dies with this process, and shares
// its memory image; FILE gets the address of the secret vmread checks, then
// one pid per line (written whole, by rename).
namespace netproc {

char g_secret[32] = "victim-secret-7f3a9c";
std::vector<int> g_held;

std::string err(const char* call) {
    const char* name = strerrorname_np(errno);
    return std::string(call) + ":" + (name ? name : std::to_string(errno));
}

std::vector<std::string> fields(const std::string& op) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t comma = op.find(',', start);
        out.push_back(op.substr(start, comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

uint16_t held_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
    return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                         : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

uint16_t port_of(const std::string& s) {
    if (s.starts_with("/")) {  // a file `hold` wrote, read now
        FILE* in = fopen(s.c_str(), "r");
        unsigned port = 0;
        if (in) {
            if (fscanf(in, "%u", &port) != 1) port = 0;
            fclose(in);
        }
        return static_cast<uint16_t>(port);
    }
    if (s.starts_with("held")) {
        size_t i = std::stoul(s.substr(4));
        return i < g_held.size() ? held_port(g_held[i]) : 0;
    }
    return static_cast<uint16_t>(std::stoul(s));
}

pid_t pid_of(const std::string& s) { return s == "ppid" ? getppid() : static_cast<pid_t>(std::stol(s)); }

socklen_t unix_addr_of(const std::string& name, sockaddr_un& sun) {
    sun = {};
    sun.sun_family = AF_UNIX;
    bool abstract = name.starts_with('@');
    std::string n = abstract ? name.substr(1) : name;
    memcpy(sun.sun_path + (abstract ? 1 : 0), n.data(), std::min(n.size(), sizeof sun.sun_path - 2));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n.size() + 1);
}

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

// socket() for KIND (tcp, udp, mptcp) in ADDR's family.
int inet_socket(const std::string& kind, int family) {
    int type = kind == "tcp" || kind == "mptcp" ? SOCK_STREAM : SOCK_DGRAM;
    int proto = kind == "mptcp" ? 262 /* IPPROTO_MPTCP */ : 0;
    return socket(family, type | SOCK_CLOEXEC, proto);
}

bool wait_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
}

std::string op_connect(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    Fd s(inet_socket(f[1], ss.ss_family));
    if (s.fd < 0) return err("socket");
    if (connect(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return err("connect");
    if (f[1] == "udp" && send(s.fd, "x", 1, 0) != 1) return err("send");
    return "ok";
}

std::string op_sendto(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    Fd s(socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    if (f[1] == "udp-unspec") {
        if (ss.ss_family != AF_INET) return "usage";
        ss.ss_family = AF_UNSPEC;  // udp_sendmsg takes it as AF_INET
    }
    if (sendto(s.fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&ss), len) != 1) return err("sendto");
    return "ok";
}

std::string op_fastopen(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 3 || !vmtest::sockaddr_of(f[1], port_of(f[2]), ss, len)) return "usage";
    Fd s(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    if (sendto(s.fd, "x", 1, MSG_FASTOPEN, reinterpret_cast<sockaddr*>(&ss), len) != 1) return err("sendto");
    return "ok";
}

std::string op_bind(const std::vector<std::string>& f, bool hold) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() < 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    int fd = inet_socket(f[1], ss.ss_family);
    if (fd < 0) return err("socket");
    Fd s(fd);
    if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return err("bind");
    if (hold && f[1] == "tcp" && listen(fd, 16) != 0) return err("listen");
    uint16_t port = held_port(fd);
    if (hold) {
        if (f.size() == 5) {
            std::string tmp = f[4] + ".tmp", text = std::to_string(port) + "\n";
            FILE* out = fopen(tmp.c_str(), "w");
            if (!out) return err("fopen");
            fputs(text.c_str(), out);
            fclose(out);
            if (rename(tmp.c_str(), f[4].c_str()) != 0) return err("rename");
        }
        g_held.push_back(fd);
        s.fd = -1;
    }
    return "ok " + std::to_string(port);
}

std::string op_unbind() {
    sockaddr sa{};
    sa.sa_family = AF_UNSPEC;
    for (int fd : g_held)
        if (connect(fd, &sa, sizeof sa) != 0) return err("connect");
    return "ok";
}

// A child reaches our own server; its exit status is its errno (0: ok).
std::string op_serve(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    bool tcp = f[1] == "tcp";
    Fd srv(inet_socket(f[1], ss.ss_family));
    if (srv.fd < 0) return err("socket");
    if (bind(srv.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return err("bind");
    if (tcp && listen(srv.fd, 16) != 0) return err("listen");
    uint16_t port = held_port(srv.fd);
    if (ss.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
    else
        reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);

    pid_t child = fork();
    if (child < 0) return err("fork");
    if (child == 0) {
        int c = inet_socket(f[1], ss.ss_family);
        if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&ss), len) != 0 || send(c, "x", 1, 0) != 1) _exit(errno);
        if (!tcp) {
            int u = inet_socket(f[1], ss.ss_family);
            if (u < 0 || sendto(u, "y", 1, 0, reinterpret_cast<sockaddr*>(&ss), len) != 1) _exit(errno);
        }
        _exit(0);
    }
    std::string result = "ok " + std::to_string(port);
    char buf[8];
    if (tcp) {
        Fd conn(wait_readable(srv.fd, 20000) ? accept4(srv.fd, nullptr, nullptr, SOCK_CLOEXEC) : -1);
        if (conn.fd < 0)
            result = "accept:failed";
        else if (!wait_readable(conn.fd, 20000) || read(conn.fd, buf, 1) != 1)
            result = "read:failed";
    } else {
        for (int i = 0; i < 2 && result.starts_with("ok"); i++)
            if (!wait_readable(srv.fd, 20000) || recv(srv.fd, buf, sizeof buf, 0) != 1) result = "recv:failed";
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        errno = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
        return err("child");
    }
    return result;
}

std::string op_unix(const std::vector<std::string>& f) {
    if (f.size() != 3) return "usage";
    const std::string& kind = f[1];
    sockaddr_un sun;
    socklen_t len = unix_addr_of(f[2], sun);
    int type = kind == "stream" ? SOCK_STREAM : kind == "seqpacket" ? SOCK_SEQPACKET : SOCK_DGRAM;
    Fd s(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    auto* sa = reinterpret_cast<sockaddr*>(&sun);
    if (kind == "dgramto") {
        if (sendto(s.fd, "x", 1, 0, sa, len) != 1) return err("sendto");
        return "ok";
    }
    if (connect(s.fd, sa, len) != 0) return err("connect");
    if (kind == "dgram" && send(s.fd, "x", 1, 0) != 1) return err("send");
    return "ok";
}

std::string op_autobind(const std::vector<std::string>& f) {
    if (f.size() != 2) return "usage";
    bool stream = f[1] == "stream";
    int type = stream ? SOCK_STREAM : SOCK_DGRAM;
    Fd s(socket(AF_UNIX, type | SOCK_CLOEXEC, 0)), c(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (s.fd < 0 || c.fd < 0) return err("socket");
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (bind(s.fd, reinterpret_cast<sockaddr*>(&sun), sizeof(sa_family_t)) != 0) return err("bind");
    socklen_t len = sizeof sun;
    if (getsockname(s.fd, reinterpret_cast<sockaddr*>(&sun), &len) != 0) return err("getsockname");
    if (len <= sizeof(sa_family_t) + 1 || sun.sun_path[0] != '\0') return "not-abstract";
    std::string name(sun.sun_path + 1, len - offsetof(sockaddr_un, sun_path) - 1);
    auto* sa = reinterpret_cast<sockaddr*>(&sun);
    char buf[8];
    if (stream) {
        if (listen(s.fd, 4) != 0) return err("listen");
        if (connect(c.fd, sa, len) != 0) return err("connect");
        Fd conn(accept4(s.fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (conn.fd < 0) return err("accept");
    } else {
        if (sendto(c.fd, "x", 1, 0, sa, len) != 1) return err("sendto");
        if (recv(s.fd, buf, sizeof buf, MSG_DONTWAIT) != 1) return err("recv");
    }
    return "ok @" + name;
}

std::string op_socket(const std::vector<std::string>& f) {
    if (f.size() != 2) return "usage";
    int fd;
    if (f[1] == "netlink")
        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    else if (f[1] == "packet")
        fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    else if (f[1] == "alg")
        fd = socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    else if (f[1] == "vsock")
        fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    else
        return "usage";
    if (fd < 0) return err("socket");
    close(fd);
    return "ok";
}

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

std::string op_open(const std::vector<std::string>& f) {
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
    if (result == "ok") result = op_open({"open", "/proc/" + std::to_string(child) + "/environ", "PATH="});
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

std::string run_op(const std::string& op) {
    std::vector<std::string> f = fields(op);
    const std::string& name = f[0];
    try {
        if (name == "connect") return op_connect(f);
        if (name == "sendto") return op_sendto(f);
        if (name == "fastopen") return op_fastopen(f);
        if (name == "bind") return op_bind(f, false);
        if (name == "hold") return op_bind(f, true);
        if (name == "unbind") return op_unbind();
        if (name == "serve") return op_serve(f);
        if (name == "unix") return op_unix(f);
        if (name == "autobind") return op_autobind(f);
        if (name == "socket") return op_socket(f);
        if (name == "touch" && f.size() == 2) {
            Fd fd(open(f[1].c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
            return fd.fd < 0 ? err("open") : "ok";
        }
        if (name == "wait" && f.size() == 2) return op_wait(f[1]);
        if (name == "ptrace" && f.size() == 2) return op_ptrace(pid_of(f[1]));
        if (name == "vmread" && f.size() == 3) return op_vmread(pid_of(f[1]), std::stoull(f[2], nullptr, 16));
        if (name == "open") return op_open(f);
        if (name == "readlink" && f.size() == 2) return op_readlink(f[1]);
        if (name == "kill" && f.size() == 3)
            return kill(pid_of(f[1]), std::stoi(f[2])) == 0 ? "ok" : err("kill");
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
    } catch (const std::exception&) {
    }
    return "usage";
}

int ops(int argc, char** argv) {
    printf("pid %d\n", getpid());
    fflush(stdout);
    int failed = 0;
    for (int i = 2; i < argc; i++) {
        std::string result = run_op(argv[i]);
        if (!result.starts_with("ok")) failed++;
        printf("%s -> %s\n", argv[i], result.c_str());
        fflush(stdout);
    }
    return std::min(failed, 100);
}

int victims(int argc, char** argv) {
    if (argc != 4) return 2;
    int n = atoi(argv[2]);
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
    std::string tmp = std::string(argv[3]) + ".tmp";
    FILE* out = fopen(tmp.c_str(), "w");
    if (!out) return 1;
    fputs(text.c_str(), out);
    fclose(out);
    if (rename(tmp.c_str(), argv[3]) != 0) return 1;
    // Reap victims as they die, so that they vanish from /proc.
    for (;;)
        if (wait(nullptr) < 0 && errno == ECHILD) pause();
}

}  // namespace netproc

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "netproc") return netproc::ops(argc, argv);
    if (argc >= 2 && std::string(argv[1]) == "victims") return netproc::victims(argc, argv);
    if (argc >= 2 && std::string(argv[1]) == "fsops") return fsops::ops(argc, argv);
    if (argc >= 2 && std::string(argv[1]) == "fsrace") return fsops::race(argc, argv);
    if (argc < 4 || std::string(argv[1]) != "connect") return usage();
    std::string kind = argv[2];
    if ((kind == "tcp" || kind == "udp") && argc == 5)
        return connect_inet(kind == "tcp" ? SOCK_STREAM : SOCK_DGRAM, argv[3], argv[4]);
    if (kind == "unix" && argc == 4) return connect_unix(argv[3], false);
    if (kind == "abstract" && argc == 4) return connect_unix(argv[3], true);
    return usage();
}
