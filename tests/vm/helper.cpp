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
#include <linux/fs.h>  // FS_IOC_SETFLAGS; linux/mount.h: open_tree, move_mount
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/ioctl.h>
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
//   setacl PATH access|default UID [HOW] | rmacl PATH access|default [HOW]
//                              set a POSIX ACL (user::rw- user:UID:rw- group::r--
//                              mask::rw- other::r--) as the binary value of
//                              system.posix_acl_access or _default, or remove it.
//                              HOW: path (setxattr, default), lpath (lsetxattr),
//                              fd (fsetxattr on an fd opened O_RDONLY), uring
//                              and uring-fd (IORING_OP_SETXATTR, _FSETXATTR; set only)
//   chdir PATH
//   fd-chmod PATH OCTAL | fd-chown PATH | fd-utimes PATH | fd-setxattr PATH NAME VALUE
//                              the same through an fd opened O_RDONLY
//   fd-setflags PATH noatime|nodump   add an inode flag (FS_IOC_SETFLAGS) through
//                              an fd opened O_RDONLY
//   opentree-move SRC DST      open_tree(SRC, OPEN_TREE_CLONE), then move_mount
//                              it onto DST: a bind mount by the new mount API
//   mount SRC DST TYPE FLAGS [DATA]   mount(2); SRC, TYPE "-" for none; FLAGS a
//                              comma list of bind move rec, or none
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

std::string result(int rc) {
    return rc < 0 ? err(errno) : "ok";
}

std::string open_read(int fd) {
    return fd < 0 ? err(errno) : read_fd(fd);
}

int open_flags(const std::string& list) {
    int flags = 0;
    std::string f;
    for (size_t i = 0; i <= list.size(); i++) {
        if (i < list.size() && list[i] != ',') {
            f += list[i];
            continue;
        }
        if (f == "r")
            flags |= O_RDONLY;
        else if (f == "w")
            flags |= O_WRONLY;
        else if (f == "rw")
            flags |= O_RDWR;
        else if (f == "trunc")
            flags |= O_TRUNC;
        else if (f == "append")
            flags |= O_APPEND;
        else if (f == "creat")
            flags |= O_CREAT;
        else if (f == "excl")
            flags |= O_EXCL;
        else
            return -1;
        f.clear();
    }
    return flags;
}

std::string do_openat2(const std::string& dir, const std::string& path, const std::string& how) {
    open_how h{};
    h.flags = O_RDONLY;
    if (how == "no_symlinks")
        h.resolve = RESOLVE_NO_SYMLINKS;
    else if (how == "no_magiclinks")
        h.resolve = RESOLVE_NO_MAGICLINKS;
    else if (how == "beneath")
        h.resolve = RESOLVE_BENEATH;
    else if (how == "in_root")
        h.resolve = RESOLVE_IN_ROOT;
    else if (how == "no_xdev")
        h.resolve = RESOLVE_NO_XDEV;
    else if (how == "cached")
        h.resolve = RESOLVE_CACHED;
    else
        return "usage";
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
    auto* sqes = static_cast<io_uring_sqe*>(mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe), PROT_READ | PROT_WRITE,
                                                 MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES));
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

// One SQE through a ring of its own, submitted and waited for; `res` gets
// the CQE's result (-errno on failure). False, with errno set, if the ring
// itself failed. (netproc uses it too.)
bool uring_one(const io_uring_sqe& sqe, int& res) {
    io_uring_params p{};
    int ring = static_cast<int>(syscall(SYS_io_uring_setup, 2, &p));
    if (ring < 0) return false;
    size_t ring_len =
        std::max(p.sq_off.array + p.sq_entries * sizeof(__u32), p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe));
    size_t sqes_len = p.sq_entries * sizeof(io_uring_sqe);
    // Every kernel of the matrix maps both rings at once (IORING_FEAT_SINGLE_MMAP, 5.4).
    auto* r = static_cast<char*>(
        mmap(nullptr, ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING));
    auto* sqes = static_cast<io_uring_sqe*>(
        mmap(nullptr, sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES));
    bool ok = r != MAP_FAILED && sqes != MAP_FAILED && (p.features & IORING_FEAT_SINGLE_MMAP);
    if (ok) {
        auto* sq_tail = reinterpret_cast<__u32*>(r + p.sq_off.tail);
        auto* cq_head = reinterpret_cast<__u32*>(r + p.cq_off.head);
        auto* cq_tail = reinterpret_cast<__u32*>(r + p.cq_off.tail);
        __u32 tail = *sq_tail, idx = tail & *reinterpret_cast<__u32*>(r + p.sq_off.ring_mask);
        sqes[idx] = sqe;
        reinterpret_cast<__u32*>(r + p.sq_off.array)[idx] = idx;
        __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
        unsigned to_submit = 1;
        while (ok && __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE) == *cq_head) {
            if (syscall(SYS_io_uring_enter, ring, to_submit, 1, IORING_ENTER_GETEVENTS, nullptr, 0) < 0)
                ok = errno == EINTR;
            else
                to_submit = 0;
        }
        if (ok) {
            auto* cqes = reinterpret_cast<io_uring_cqe*>(r + p.cq_off.cqes);
            res = cqes[*cq_head & *reinterpret_cast<__u32*>(r + p.cq_off.ring_mask)].res;
        }
    } else if (errno == 0) {
        errno = ENOSYS;
    }
    int e = errno;
    if (r != MAP_FAILED) munmap(r, ring_len);
    if (sqes != MAP_FAILED) munmap(sqes, sqes_len);
    close(ring);
    errno = e;
    return ok;
}

// A POSIX ACL as the value of system.posix_acl_* (include/uapi/linux/
// posix_acl_xattr.h, little-endian): version 2, then the entries in the
// order posix_acl_valid() demands: by tag, ACL_USER ones by uid.
std::string acl_value(uint32_t uid) {
    struct Entry {
        uint16_t tag, perm;
        uint32_t id;
    };
    const uint32_t undefined = ~0u;
    const Entry entries[] = {{0x01 /* ACL_USER_OBJ */, 6, undefined},
                             {0x02 /* ACL_USER */, 6, uid},
                             {0x04 /* ACL_GROUP_OBJ */, 4, undefined},
                             {0x10 /* ACL_MASK */, 6, undefined},
                             {0x20 /* ACL_OTHER */, 4, undefined}};
    const uint32_t version = 2;
    std::string v(reinterpret_cast<const char*>(&version), sizeof version);
    for (const Entry& e : entries) v.append(reinterpret_cast<const char*>(&e), sizeof e);
    return v;
}

// setacl PATH access|default UID [HOW] | rmacl PATH access|default [HOW]
std::string acl_op(const std::vector<std::string>& a) {
    const bool set = a[0] == "setacl";
    const size_t fixed = set ? 4 : 3;
    if (a.size() != fixed && a.size() != fixed + 1) return "usage";
    const std::string name = a[2] == "access"    ? "system.posix_acl_access"
                             : a[2] == "default" ? "system.posix_acl_default"
                                                 : "";
    const std::string how = a.size() > fixed ? a[fixed] : "path";
    if (name.empty()) return "usage";
    const std::string value = set ? acl_value(static_cast<uint32_t>(std::stoul(a[3]))) : "";
    const char* path = a[1].c_str();
    if (how == "path")
        return result(set ? setxattr(path, name.c_str(), value.data(), value.size(), 0)
                          : removexattr(path, name.c_str()));
    if (how == "lpath")
        return result(set ? lsetxattr(path, name.c_str(), value.data(), value.size(), 0)
                          : lremovexattr(path, name.c_str()));
    if (how != "fd" && !(set && (how == "uring" || how == "uring-fd"))) return "usage";
    int fd = how == "uring" ? AT_FDCWD : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && fd != AT_FDCWD) return "open-" + err(errno);
    int rc;
    if (how == "fd") {
        rc = set ? fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) : fremovexattr(fd, name.c_str());
    } else {
        io_uring_sqe sqe{};
        sqe.opcode = how == "uring" ? IORING_OP_SETXATTR : IORING_OP_FSETXATTR;
        if (how == "uring-fd") sqe.fd = fd;
        sqe.addr = reinterpret_cast<__u64>(name.c_str());
        sqe.addr2 = reinterpret_cast<__u64>(value.data());
        sqe.len = static_cast<__u32>(value.size());
        if (how == "uring") sqe.addr3 = reinterpret_cast<__u64>(path);
        int res = 0;
        if (!uring_one(sqe, res)) {
            std::string r = "uring-" + err(errno);
            if (fd >= 0) close(fd);
            return r;
        }
        rc = res < 0 ? -1 : 0;
        errno = -res;
    }
    int e = errno;
    if (fd >= 0) close(fd);
    errno = e;
    return result(rc);
}

// Sets FLAG (noatime, nodump) among the inode flags of PATH through an fd
// opened O_RDONLY: FS_IOC_GETFLAGS, then FS_IOC_SETFLAGS (chattr's way).
std::string set_inode_flag(const std::string& path, const std::string& flag) {
    int bit = flag == "noatime" ? FS_NOATIME_FL : flag == "nodump" ? FS_NODUMP_FL : 0;
    if (!bit) return "usage";
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "open-" + err(errno);
    int flags = 0;
    std::string r;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
        r = "getflags-" + err(errno);
    } else {
        flags |= bit;
        r = result(ioctl(fd, FS_IOC_SETFLAGS, &flags));
    }
    close(fd);
    return r;
}

// mount(2) of SRC on DST: TYPE and SRC "-" for none, FLAGS a comma list of
// bind, move, rec (or none), DATA the options string.
std::string do_mount(const std::vector<std::string>& a) {
    unsigned long flags = 0;
    const std::string& list = a[4];
    for (size_t i = 0; i <= list.size();) {
        size_t j = list.find(',', i);
        if (j == std::string::npos) j = list.size();
        std::string f = list.substr(i, j - i);
        if (f == "bind")
            flags |= MS_BIND;
        else if (f == "move")
            flags |= MS_MOVE;
        else if (f == "rec")
            flags |= MS_REC;
        else if (f != "none")
            return "usage";
        i = j + 1;
    }
    const char* src = a[1] == "-" ? nullptr : a[1].c_str();
    const char* type = a[3] == "-" ? nullptr : a[3].c_str();
    const char* data = a.size() == 6 ? a[5].c_str() : nullptr;
    return result(static_cast<int>(syscall(SYS_mount, src, a[2].c_str(), type, flags, data)));
}

// A copy of the mount tree at SRC (open_tree OPEN_TREE_CLONE), attached at
// DST (move_mount): a bind mount by the new mount API.
std::string open_tree_move(const std::string& src, const std::string& dst) {
    long fd = syscall(SYS_open_tree, AT_FDCWD, src.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0) return "open_tree-" + err(errno);
    long rc = syscall(SYS_move_mount, fd, "", AT_FDCWD, dst.c_str(), MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(static_cast<int>(fd));
    errno = e;
    return result(static_cast<int>(rc));
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
    if (op == "setacl" || op == "rmacl") return acl_op(a);
    if (op == "chdir" && a.size() == 2) return result(chdir(p(1)));
    if (op == "fd-setflags" && a.size() == 3) return set_inode_flag(a[1], a[2]);
    if (op == "opentree-move" && a.size() == 3) return open_tree_move(a[1], a[2]);
    if (op == "mount" && (a.size() == 5 || a.size() == 6)) return do_mount(a);
    if (op.starts_with("fd-") && a.size() >= 2) {
        int fd = open(p(1), O_RDONLY);
        if (fd < 0) return "open-" + err(errno);
        int rc = -1;
        errno = 0;
        if (op == "fd-chmod" && a.size() == 3)
            rc = fchmod(fd, static_cast<mode_t>(strtol(p(2), nullptr, 8)));
        else if (op == "fd-chown" && a.size() == 2)
            rc = fchown(fd, getuid(), getgid());
        else if (op == "fd-utimes" && a.size() == 2)
            rc = futimens(fd, nullptr);
        else if (op == "fd-setxattr" && a.size() == 4)
            rc = fsetxattr(fd, p(2), p(3), a[3].size(), 0);
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
// scheduling, IPC, keys and terminals
#include <linux/keyctl.h>
#include <mqueue.h>
#include <pthread.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <termios.h>

#include <atomic>
#include <optional>

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
//   sendto,udp|udp-unspec,ADDR,PORT[,lo]  unconnected sendto (udp-unspec: an
//                              IPv4 address with sin_family AF_UNSPEC; lo: from a
//                              socket bound to 127.0.0.1, ::1 or ::ffff:127.0.0.1
//                              first, as a never-bound one is bound to the
//                              wildcard address by the send)
//   isocket,FAMILY,TYPE,PROTO[,uring]  socket() by numbers, then close (uring:
//                              IORING_OP_SOCKET)
//   sctp,connect|connectx|sendto,ADDR,PORT   an SCTP association to ADDR by
//                              connect(), the SCTP_SOCKOPT_CONNECTX socket option
//                              (both one-to-one sockets) or a sendto on a
//                              one-to-many socket (SOCK_SEQPACKET, protocol 0);
//                              then one message each way: ok if it comes back
//   sctp-serve,ADDR,PORT,READY,STOP   SCTP echo server (one-to-one): creates
//                              READY once listening, echoes the first message of
//                              each association until STOP exists (300 s at
//                              most): ok N (associations echoed)
//   inbound,tcp4|tcp6|udp4|udp6,HOW,FILE[,ADDR,PORT]   a never-bound socket
//                              left to the kernel's automatic bind: tcp HOW listen
//                              or uring-listen (IORING_OP_LISTEN, 6.11+); udp HOW
//                              sendto (to ADDR PORT) or send (no destination:
//                              EDESTADDRREQ expected). Writes the port it got to
//                              FILE (0: none), then waits for a connection and
//                              a byte, or a datagram, from anywhere: ok PORT, or
//                              inbound:none once FILE.done exists (or after 60 s)
//   deliver,tcp|udp,ADDR,PORT  tcp: connect (10 s at most) and send a byte;
//                              udp: sendto one datagram
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
//   srcroute,rthdr|rthdr-pktoptions|rthdr-cmsg,ADDR,PORT,VIA[,SRC]   "x" to
//                              ADDR (IPv6) on a UDP socket with a type 2 routing
//                              header through VIA: the IPV6_RTHDR socket option
//                              or one in IPV6_2292PKTOPTIONS, set before connect,
//                              or a sendmsg control message; SRC: bind there first
//   cmsgs,N,ADDR,PORT,SRC      sendmsg "x" with N IPV6_HOPLIMIT (IP_TTL) control
//                              messages, from a socket bound to SRC
//   reuse,tcp|udp,ADDR,PORT[,FILE]   hold, with SO_REUSEPORT set before bind
//   nodest,4|6,send|write      send/write on a never-bound UDP socket, no
//                              destination: "ok|CALL:ERRNO port N", its port after
//   limit,PID                  ok SOFT: the RLIMIT_FSIZE soft limit of PID, read
//                              (PID as for prlimit below)
//   cgclone,DIR                clone3(CLONE_INTO_CGROUP) into cgroup DIR (an
//                              O_PATH fd): ok CGROUP, the child's /proc/PID/cgroup
// Processes outside the job (PID: also self, child, a child this process
// forks on first use, which waits and dies with it, or thread, a thread of it):
//   prlimit,PID,N              prlimit RLIMIT_FSIZE (soft and hard) to N bytes
//   setpriority,process|pgrp|user,WHO,NICE   WHO: a PID, PGRP or UID
//   getnice,PID                ok NICE
//   ioprio,process|pgrp|user,WHO   ioprio_set best-effort level 7
//   affinity,PID,CPU           sched_setaffinity to CPU alone
//   sched,PID,batch|idle|other sched_setscheduler
//   setattr,PID,NICE           sched_setattr SCHED_OTHER with NICE
//   setparam,PID               sched_setparam, priority 0
//   child                      ok PID of the child
// IPC (KEY in hex, NAME /name): make creates the object (exclusively) with
// TEXT in it (sem: the value TEXT), then leaves it; read: ok TEXT (msg and mq:
// the first message, put back)
//   shm|msg|sem,make,KEY,TEXT | shm|msg|sem,read,KEY   SysV
//   mq|pshm,make,NAME,TEXT | mq|pshm,read,NAME          POSIX message queue, shm_open
// Keys (RING and ID: @t @p @s @u @us or a serial; keys of type "user"):
//   key,add,RING,DESC,DATA     ok SERIAL
//   key,id,RING                KEYCTL_GET_KEYRING_ID, no create: ok SERIAL
//   key,search,RING,DESC       ok SERIAL
//   key,read,ID | key,describe,ID   ok DATA | ok TYPE;UID;GID;PERM;DESC
//   key,list,RING              ok SERIAL... (KEYCTL_READ of a keyring)
//   key,link,ID,RING | key,setperm,ID,HEXPERM | key,invalidate,ID
//   key,persistent             KEYCTL_GET_PERSISTENT (own uid, into @s): ok SERIAL
// Terminals:
//   pty,hold,FILE,TEXT,N       a pty pair whose master stays open: its slave's
//                              path goes to FILE, then N lines TEXT into the master
//   pty,own                    a pty via /dev/ptmx, a line through it each way: ok SLAVE
//   ttyread,PATH               open PATH (O_NOCTTY), read a line (5 s at most): ok LINE
//   tiocsti,FD,TEXT            push TEXT and a newline into FD's input (TIOCSTI)
//   tcxonc,FD                  stop FD's output, then restart it (tcflow: TCXONC)
//   tiocsctty,FD               make FD our controlling terminal
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

pid_t pid_of(const std::string& s) {
    return s == "ppid" ? getppid() : static_cast<pid_t>(std::stol(s));
}

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
    const bool lo = f.size() == 5 && f[4] == "lo";
    if ((f.size() != 4 && !lo) || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    Fd s(socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    if (lo) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
        const char* from = ss.ss_family == AF_INET                  ? "127.0.0.1"
                           : IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) ? "::ffff:127.0.0.1"
                                                                    : "::1";
        sockaddr_storage local;
        socklen_t local_len;
        vmtest::sockaddr_of(from, 0, local, local_len);
        if (bind(s.fd, reinterpret_cast<sockaddr*>(&local), local_len) != 0) return err("bind");
    }
    if (f[1] == "udp-unspec") {
        if (ss.ss_family != AF_INET) return "usage";
        ss.ss_family = AF_UNSPEC;  // udp_sendmsg takes it as AF_INET
    }
    if (sendto(s.fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&ss), len) != 1) return err("sendto");
    return "ok";
}

// ---- inbound: SCTP, other inet protocols, the kernel's automatic bind
// (net_inbound_test.cpp) ----------------------------------------------------

std::string op_isocket(const std::vector<std::string>& f) {
    const bool uring = f.size() == 5 && f[4] == "uring";
    if (f.size() != 4 && !uring) return "usage";
    const int family = std::stoi(f[1]), type = std::stoi(f[2]), proto = std::stoi(f[3]);
    if (!uring) {
        Fd s(socket(family, type | SOCK_CLOEXEC, proto));
        return s.fd < 0 ? err("socket") : "ok";
    }
    io_uring_sqe sqe{};
    sqe.opcode = IORING_OP_SOCKET;
    sqe.fd = family;
    sqe.off = static_cast<__u64>(type | SOCK_CLOEXEC);
    sqe.len = static_cast<__u32>(proto);
    int res = 0;
    if (!fsops::uring_one(sqe, res)) return err("uring");
    errno = -res;
    if (res < 0) return err("uring-socket");
    close(res);
    return "ok";
}

// The first data message on fd (notifications skipped): ok if it is `msg`.
std::string echo_of(int fd, const std::string& msg) {
    for (int i = 0; i < 8; i++) {
        char buf[256];
        iovec iov{buf, sizeof buf};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        if (!wait_readable(fd, 20000)) return "recv:timeout";
        ssize_t n = recvmsg(fd, &mh, 0);
        if (n < 0) return err("recv");
        if (mh.msg_flags & 0x8000 /* MSG_NOTIFICATION */) continue;
        return std::string(buf, static_cast<size_t>(n)) == msg ? "ok" : "mismatch";
    }
    return "recv:notifications-only";
}

// SOL_SCTP and SCTP_SOCKOPT_CONNECTX, include/uapi/linux/sctp.h (no libsctp here).
constexpr int kSolSctp = 132, kSctpSockoptConnectx = 110;

std::string op_sctp(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    const std::string& how = f[1];
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    const std::string msg = "ping-" + how;
    if (how == "sendto") {
        Fd s(socket(ss.ss_family, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        if (s.fd < 0) return err("socket");
        if (sendto(s.fd, msg.data(), msg.size(), 0, sa, len) != static_cast<ssize_t>(msg.size())) return err("sendto");
        return echo_of(s.fd, msg);
    }
    if (how != "connect" && how != "connectx") return "usage";
    Fd s(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_SCTP));
    if (s.fd < 0) return err("socket");
    // connectx takes a packed array of addresses (here one) and returns the
    // association's id.
    if (how == "connect" ? connect(s.fd, sa, len) != 0 : setsockopt(s.fd, kSolSctp, kSctpSockoptConnectx, sa, len) < 0)
        return err(how.c_str());
    if (send(s.fd, msg.data(), msg.size(), 0) != static_cast<ssize_t>(msg.size())) return err("send");
    return echo_of(s.fd, msg);
}

std::string op_sctp_serve(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 5 || !vmtest::sockaddr_of(f[1], port_of(f[2]), ss, len)) return "usage";
    Fd srv(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_SCTP));
    if (srv.fd < 0) return err("socket");
    if (bind(srv.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return err("bind");
    if (listen(srv.fd, 16) != 0) return err("listen");
    Fd ready(open(f[3].c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (ready.fd < 0) return err("open");
    int echoed = 0;
    for (int i = 0; i < 3000 && access(f[4].c_str(), F_OK) != 0; i++) {
        if (!wait_readable(srv.fd, 100)) continue;
        Fd c(accept4(srv.fd, nullptr, nullptr, SOCK_CLOEXEC));
        char buf[256];
        if (c.fd < 0 || !wait_readable(c.fd, 20000)) continue;
        ssize_t n = recv(c.fd, buf, sizeof buf, 0);
        if (n > 0 && send(c.fd, buf, static_cast<size_t>(n), 0) == n) echoed++;
    }
    return "ok " + std::to_string(echoed);
}

bool write_atomically(const std::string& path, const std::string& text) {
    std::string tmp = path + ".tmp";
    FILE* out = fopen(tmp.c_str(), "w");
    if (!out) return false;
    fputs(text.c_str(), out);
    return fclose(out) == 0 && rename(tmp.c_str(), path.c_str()) == 0;
}

std::string op_inbound(const std::vector<std::string>& f) {
    if (f.size() != 4 && f.size() != 6) return "usage";
    const std::string &kind = f[1], &how = f[2], &file = f[3];
    const bool tcp = kind == "tcp4" || kind == "tcp6";
    if (!tcp && kind != "udp4" && kind != "udp6") return "usage";
    Fd s(socket(kind.ends_with('6') ? AF_INET6 : AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0));
    std::string failed;
    if (s.fd < 0) {
        failed = err("socket");
    } else if (tcp && how == "listen") {
        if (listen(s.fd, 4) != 0) failed = err("listen");
    } else if (tcp && how == "uring-listen") {
        io_uring_sqe sqe{};
        sqe.opcode = 57;  // IORING_OP_LISTEN (6.11), newer than these headers
        sqe.fd = s.fd;
        sqe.len = 4;
        int res = 0;
        if (!fsops::uring_one(sqe, res)) {
            failed = err("uring");
        } else if (res < 0) {
            errno = -res;
            failed = err("uring-listen");
        }
    } else if (!tcp && how == "sendto" && f.size() == 6) {
        sockaddr_storage ss;
        socklen_t len;
        if (!vmtest::sockaddr_of(f[4], port_of(f[5]), ss, len)) return "usage";
        if (sendto(s.fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&ss), len) != 1) failed = err("sendto");
    } else if (!tcp && how == "send" && f.size() == 4) {
        // The kernel binds the socket before it finds no destination.
        if (send(s.fd, "x", 1, 0) >= 0)
            failed = "send:sent";
        else if (errno != EDESTADDRREQ)
            failed = err("send");
    } else {
        return "usage";
    }
    const uint16_t port = failed.empty() ? held_port(s.fd) : 0;
    if (!write_atomically(file, std::to_string(port) + "\n")) return err("write");
    if (!failed.empty()) return failed;
    if (port == 0) return "not-bound";
    // Until something comes in, or FILE.done says the far host is done
    // (then a last look), or 60 s.
    const std::string done = file + ".done";
    bool arrived = false;
    for (int i = 0; i < 600 && !arrived; i++) {
        bool last = access(done.c_str(), F_OK) == 0;
        arrived = wait_readable(s.fd, last ? 500 : 100);
        if (last) break;
    }
    if (!arrived) return "inbound:none";
    char buf[8];
    if (tcp) {
        Fd c(accept4(s.fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (c.fd < 0) return err("accept");
        if (!wait_readable(c.fd, 20000) || read(c.fd, buf, 1) != 1) return "read:failed";
    } else if (recv(s.fd, buf, sizeof buf, 0) < 1) {
        return err("recv");
    }
    return "ok " + std::to_string(port);
}

std::string op_deliver(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    const bool tcp = f[1] == "tcp";
    Fd s(socket(ss.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    if (tcp) {
        // 10 s, not the minutes of SYN retries, when the other side drops them.
        timeval tv{10, 0};
        setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(s.fd, sa, len) != 0) return err("connect");
    }
    if ((tcp ? send(s.fd, "x", 1, 0) : sendto(s.fd, "x", 1, 0, sa, len)) != 1) return err("send");
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
            // Bound to the server's address first: a never-bound socket's
            // sendto binds it to the wildcard address, which jobs may not.
            sockaddr_storage from = ss;
            if (from.ss_family == AF_INET)
                reinterpret_cast<sockaddr_in*>(&from)->sin_port = 0;
            else
                reinterpret_cast<sockaddr_in6*>(&from)->sin6_port = 0;
            int u = inet_socket(f[1], ss.ss_family);
            if (u < 0 || bind(u, reinterpret_cast<sockaddr*>(&from), len) != 0 ||
                sendto(u, "y", 1, 0, reinterpret_cast<sockaddr*>(&ss), len) != 1)
                _exit(errno);
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

// ---- scheduling, IPC, keys and terminals (proc_sched_test.cpp, ipc_test.cpp,
// tty_test.cpp) ---------------------------------------------------------------

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

// ---- source routes, SO_REUSEPORT, sends that bind, cgroups
// (boundary_more_test.cpp) ----------------------------------------------------

// A type 2 routing header (RFC 6275; struct ipv6_rt_hdr, then 4 reserved
// bytes and one address) naming VIA: the kernel sends the packet to VIA
// first (fl6_update_dst), whatever destination connect or sendmsg named.
std::vector<uint8_t> rthdr_type2(const std::string& via) {
    std::vector<uint8_t> h(24, 0);
    h[1] = 2;  // hdrlen: 2 units of 8 bytes after the first 8
    h[2] = 2;  // type
    h[3] = 1;  // segments_left
    if (inet_pton(AF_INET6, via.c_str(), h.data() + 8) != 1) return {};
    return h;
}

// Sends "x" to ADDR:PORT (IPv6) on a new UDP socket carrying a routing
// header through VIA: set before connect() as the IPV6_RTHDR socket option
// (rthdr) or inside IPV6_2292PKTOPTIONS, whose value is a control message
// buffer (rthdr-pktoptions); or as a control message of an unconnected
// sendmsg (rthdr-cmsg). SRC: bind there first.
std::string op_srcroute(const std::vector<std::string>& f) {
    sockaddr_storage ss, src;
    socklen_t len, src_len;
    if ((f.size() != 5 && f.size() != 6) || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    const std::string& kind = f[1];
    if (kind != "rthdr" && kind != "rthdr-pktoptions" && kind != "rthdr-cmsg") return "usage";
    std::vector<uint8_t> rthdr = rthdr_type2(f[4]);
    if (rthdr.empty() || ss.ss_family != AF_INET6) return "usage";
    Fd s(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    if (f.size() == 6) {
        if (!vmtest::sockaddr_of(f[5], 0, src, src_len)) return "usage";
        if (bind(s.fd, reinterpret_cast<sockaddr*>(&src), src_len) != 0) return err("bind");
    }
    uint64_t ctl[CMSG_SPACE(24) / 8] = {};  // aligned for cmsghdr
    cmsghdr* c = reinterpret_cast<cmsghdr*>(ctl);
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_RTHDR;
    c->cmsg_len = CMSG_LEN(rthdr.size());
    memcpy(CMSG_DATA(c), rthdr.data(), rthdr.size());
    if (kind != "rthdr-cmsg") {
        int rc = kind == "rthdr" ? setsockopt(s.fd, IPPROTO_IPV6, IPV6_RTHDR, rthdr.data(), rthdr.size())
                                 : setsockopt(s.fd, IPPROTO_IPV6, IPV6_2292PKTOPTIONS, ctl, sizeof ctl);
        if (rc != 0) return err("setsockopt");
        if (connect(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return err("connect");
        if (send(s.fd, "x", 1, 0) != 1) return err("send");
        return "ok";
    }
    iovec iov{const_cast<char*>("x"), 1};
    msghdr m{};
    m.msg_name = &ss;
    m.msg_namelen = len;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    if (sendmsg(s.fd, &m, 0) != 1) return err("sendmsg");
    return "ok";
}

// sendmsg of "x" to ADDR:PORT with N harmless control messages
// (IPV6_HOPLIMIT or IP_TTL 64), from a socket bound to SRC first.
std::string op_cmsgs(const std::vector<std::string>& f) {
    sockaddr_storage ss, src;
    socklen_t len, src_len;
    if (f.size() != 5 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len) ||
        !vmtest::sockaddr_of(f[4], 0, src, src_len) || ss.ss_family != src.ss_family)
        return "usage";
    const size_t n = std::stoul(f[1]);
    if (n == 0 || n > 32) return "usage";
    Fd s(socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    if (bind(s.fd, reinterpret_cast<sockaddr*>(&src), src_len) != 0) return err("bind");
    std::vector<uint64_t> ctl((n * CMSG_SPACE(sizeof(int)) + 7) / 8, 0);  // aligned for cmsghdr
    iovec iov{const_cast<char*>("x"), 1};
    msghdr m{};
    m.msg_name = &ss;
    m.msg_namelen = len;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.data();
    m.msg_controllen = n * CMSG_SPACE(sizeof(int));
    const bool v6 = ss.ss_family == AF_INET6;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        c->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
        c->cmsg_type = v6 ? IPV6_HOPLIMIT : IP_TTL;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        int ttl = 64;
        memcpy(CMSG_DATA(c), &ttl, sizeof ttl);
    }
    if (sendmsg(s.fd, &m, 0) != 1) return err("sendmsg");
    return "ok";
}

// Like hold, with SO_REUSEPORT set first: a second socket of the same uid
// with it set may bind the same address and port, and joins the group.
std::string op_reuse(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if ((f.size() != 4 && f.size() != 5) || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    if (f[1] != "tcp" && f[1] != "udp") return "usage";
    Fd s(inet_socket(f[1], ss.ss_family));
    if (s.fd < 0) return err("socket");
    int one = 1;
    if (setsockopt(s.fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) return err("setsockopt");
    if (bind(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return err("bind");
    if (f[1] == "tcp" && listen(s.fd, 16) != 0) return err("listen");
    const uint16_t port = held_port(s.fd);
    if (f.size() == 5) {
        std::string tmp = f[4] + ".tmp";
        FILE* out = fopen(tmp.c_str(), "w");
        if (!out) return err("fopen");
        fprintf(out, "%u\n", port);
        fclose(out);
        if (rename(tmp.c_str(), f[4].c_str()) != 0) return err("rename");
    }
    g_held.push_back(s.fd);
    s.fd = -1;
    return "ok " + std::to_string(port);
}

// send() or write() of "x" on a new, never-bound UDP socket (4: IPv4, 6:
// IPv6), which has no destination; then the local port it has.
std::string op_nodest(const std::vector<std::string>& f) {
    if (f.size() != 3 || (f[1] != "4" && f[1] != "6") || (f[2] != "send" && f[2] != "write")) return "usage";
    Fd s(socket(f[1] == "4" ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return err("socket");
    ssize_t n = f[2] == "send" ? send(s.fd, "x", 1, 0) : write(s.fd, "x", 1);
    std::string r = n == 1 ? "ok" : err(f[2].c_str());
    return r + " port " + std::to_string(held_port(s.fd));
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

std::string run_op(const std::string& op) {
    std::vector<std::string> f = fields(op);
    const std::string& name = f[0];
    try {
        if (name == "connect") return op_connect(f);
        if (name == "sendto") return op_sendto(f);
        if (name == "isocket") return op_isocket(f);
        if (name == "sctp") return op_sctp(f);
        if (name == "sctp-serve") return op_sctp_serve(f);
        if (name == "inbound") return op_inbound(f);
        if (name == "deliver") return op_deliver(f);
        if (name == "fastopen") return op_fastopen(f);
        if (name == "srcroute") return op_srcroute(f);
        if (name == "cmsgs") return op_cmsgs(f);
        if (name == "reuse") return op_reuse(f);
        if (name == "nodest") return op_nodest(f);
        if (name == "limit") return op_limit(f);
        if (name == "cgclone") return op_cgclone(f);
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

// `flood PATH N`: N opens of PATH; prints how many were refused (EPERM)
// and this process's CPU time, "refused N cpu_ms M".
int flood(const char* path, long n) {
    long refused = 0;
    for (long i = 0; i < n; i++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            close(fd);
        else if (errno == EPERM)
            refused++;
    }
    timespec cpu{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    printf("refused %ld cpu_ms %ld\n", refused, cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "flood") return flood(argv[2], strtol(argv[3], nullptr, 10));
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
