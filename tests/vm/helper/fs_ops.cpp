#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>  // FS_IOC_SETFLAGS; linux/mount.h: open_tree, move_mount
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "helper.h"

// Filesystem ops: each opens, creates, changes or mounts something in one
// way, so that a refusal names one path and one audit op.
namespace vmhelper {
namespace {

std::string err(int e) {
    return errno_name(e);
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
        if (i < list.size() && list[i] != '+') {
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
    if (dir != "-" && (dfd = open(dir.c_str(), O_PATH | O_DIRECTORY)) < 0) return "open:" + err(errno);
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

// One IORING_OP_OPENAT, then a read of what it opened. sqpoll: the
// kernel's SQ thread, not this task, submits it.
std::string uring_open(const std::string& path, const std::string& mode) {
    if (mode != "inline" && mode != "async" && mode != "sqpoll") return "usage";
    io_uring_sqe sqe{};
    sqe.opcode = IORING_OP_OPENAT;
    sqe.fd = AT_FDCWD;
    sqe.addr = reinterpret_cast<__u64>(path.c_str());
    sqe.open_flags = O_RDONLY;
    if (mode == "async") sqe.flags = IOSQE_ASYNC;
    int res = 0;
    if (!uring_one(sqe, res, mode == "sqpoll" ? IORING_SETUP_SQPOLL : 0)) return "io_uring:" + err(errno);
    if (res < 0) return err(-res);
    return read_fd(res);
}

}  // namespace

// Raw syscalls, not liburing: the tests submit opcodes newer than Debian
// 12's liburing 2.3 knows (IORING_OP_LISTEN, 6.11), each SQE filled by hand
// anyway.
bool uring_one(const io_uring_sqe& sqe, int& res, unsigned setup_flags) {
    const bool sqpoll = setup_flags & IORING_SETUP_SQPOLL;
    io_uring_params p{};
    p.flags = setup_flags;
    if (sqpoll) p.sq_thread_idle = 1000;
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
        // With SQPOLL the SQ thread submits, and must be woken once it
        // has gone idle.
        auto* sq_flags = reinterpret_cast<__u32*>(r + p.sq_off.flags);
        unsigned to_submit = sqpoll ? 0 : 1, enter_flags = IORING_ENTER_GETEVENTS;
        while (ok && __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE) == *cq_head) {
            if (sqpoll && (__atomic_load_n(sq_flags, __ATOMIC_ACQUIRE) & IORING_SQ_NEED_WAKEUP))
                enter_flags |= IORING_ENTER_SQ_WAKEUP;
            if (syscall(SYS_io_uring_enter, ring, to_submit, 1, enter_flags, nullptr, 0) < 0)
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

namespace {

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
std::string acl_op(const Fields& a) {
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
    if (fd < 0 && fd != AT_FDCWD) return "open:" + err(errno);
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
            std::string r = "io_uring:" + err(errno);
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
    if (fd < 0) return "open:" + err(errno);
    int flags = 0;
    std::string r;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
        r = "FS_IOC_GETFLAGS:" + err(errno);
    } else {
        flags |= bit;
        r = result(ioctl(fd, FS_IOC_SETFLAGS, &flags));
    }
    close(fd);
    return r;
}

// mount(2) of SRC on DST: TYPE and SRC "-" for none, FLAGS a '+' list of
// bind, move, rec (or none), DATA the options string.
std::string do_mount(const Fields& a) {
    unsigned long flags = 0;
    const std::string& list = a[4];
    for (size_t i = 0; i <= list.size();) {
        size_t j = list.find('+', i);
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
    if (fd < 0) return "open_tree:" + err(errno);
    long rc = syscall(SYS_move_mount, fd, "", AT_FDCWD, dst.c_str(), MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(static_cast<int>(fd));
    return rc == 0 ? "ok" : "move_mount:" + err(e);
}

// A create whose directory moves between the create's check and its open
// returning, and a times change through the new fd (see createrace).
std::string create_race(const std::string& dir, int seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    int created = 0, moved = 0, timed = 0;
    for (int i = 1; std::chrono::steady_clock::now() < end; i++) {
        std::string path = dir + "/f" + std::to_string(i);
        int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) continue;
        created++;
        if (access(path.c_str(), F_OK) != 0) {
            moved++;
            timed += futimens(fd, nullptr) == 0;
        }
        close(fd);
    }
    return "ok created " + std::to_string(created) + " moved " + std::to_string(moved) + " timed " +
           std::to_string(timed);
}

// Goes `levels` directories named `name` down from `dir`, each opened
// through the last one's fd (so no path handed to the kernel is long),
// with `make` making each first: "ok", or the errno of the first step that
// failed and its level ("EPERM at 253"; "open EPERM at 3" for an open
// after its mkdir). A file with a short name made in `dir` first has its
// path walked, which a long `name` would not. With `walk`, a rename before
// each step voids every cached decision, so each is decided by walking its
// path.
std::string nest(const std::string& dir, const std::string& name, int levels, bool walk, bool make) {
    const std::string a = dir + "/.nest-a", b = dir + "/.nest-b";
    if (close(open(a.c_str(), O_CREAT | O_WRONLY, 0644)) != 0) return "setup " + err(errno);
    int fd = open(dir.c_str(), O_DIRECTORY | O_RDONLY);
    std::string got = fd < 0 ? "open " + err(errno) : "ok";
    for (int i = 1; i <= levels && fd >= 0; i++) {
        if (walk && (rename(a.c_str(), b.c_str()) != 0 || rename(b.c_str(), a.c_str()) != 0)) {
            got = "rename " + err(errno);
            break;
        }
        if (make && mkdirat(fd, name.c_str(), 0755) != 0) {
            got = err(errno) + " at " + std::to_string(i);
            break;
        }
        int next = openat(fd, name.c_str(), O_DIRECTORY | O_RDONLY);
        if (next < 0) got = (make ? "open " : "") + err(errno) + " at " + std::to_string(i);
        close(fd);
        fd = next;
    }
    close(fd);
    unlink(a.c_str());
    return got;
}

}  // namespace

std::optional<std::string> fs_op(const Fields& a) {
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
    if (op == "list" && a.size() == 2) {
        DIR* d = opendir(p(1));
        if (!d) return err(errno);
        int n = 0;
        while (readdir(d)) n++;
        closedir(d);
        return "ok " + std::to_string(n);
    }
    if (op == "mkdir" && a.size() == 2) return result(mkdir(p(1), 0755));
    if (op == "rmdir" && a.size() == 2) return result(rmdir(p(1)));
    if (op == "unlink" && a.size() == 2) return result(unlink(p(1)));
    if (op == "mkfifo" && a.size() == 2) return result(mkfifo(p(1), 0644));
    if (op == "mknod" && a.size() == 2) return result(mknod(p(1), S_IFREG | 0644, 0));
    if (op == "bind" && a.size() == 3 && a[1] == "unix") {
        sockaddr_un sun{};
        sun.sun_family = AF_UNIX;
        if (a[2].size() >= sizeof sun.sun_path) return "usage";
        memcpy(sun.sun_path, p(2), a[2].size());
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) return "socket:" + err(errno);
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
    if (op == "createrace" && a.size() == 3) return create_race(a[1], atoi(p(2)));
    if ((op == "nest" || op == "descend") && (a.size() == 4 || (a.size() == 5 && a[4] == "walk")))
        return nest(a[1], a[2], atoi(p(3)), a.size() == 5, op == "nest");
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
        if (fd < 0) return "open:" + err(errno);
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
        if (fd < 0) return "open:" + err(errno);
        int rc = linkat(AT_FDCWD, ("/proc/self/fd/" + std::to_string(fd)).c_str(), AT_FDCWD, p(2), AT_SYMLINK_FOLLOW);
        int e = errno;
        close(fd);
        errno = e;
        return result(rc);
    }
    if (op == "opath-reopen" && (a.size() == 2 || (a.size() == 3 && a[2] == "w"))) {
        int fd = open(p(1), O_PATH);
        if (fd < 0) return "open:" + err(errno);
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
        if (dfd < 0) return "open:" + err(errno);
        std::string r = open_read(openat(dfd, p(2), O_RDONLY));
        close(dfd);
        return r;
    }
    if (op == "openat2" && a.size() == 4) return do_openat2(a[1], a[2], a[3]);
    if (op == "uring-open" && a.size() == 3) return uring_open(a[1], a[2]);
    if (op == "memfd-loader" && a.size() == 3) {
        int in = open(p(2), O_RDONLY);
        if (in < 0) return "open:" + err(errno);
        int mfd = memfd_create("prog", 0);
        if (mfd < 0) return "memfd_create:" + err(errno);
        char buf[65536];
        for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;)
            if (write(mfd, buf, static_cast<size_t>(n)) != n) return "write:" + err(errno);
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
        return "exit:" + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    if (op == "mprotect-exec" && a.size() == 2) {
        int fd = open(p(1), O_RDONLY);
        if (fd < 0) return "open:" + err(errno);
        void* m = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) return "mmap:" + err(errno);
        int rc = mprotect(m, 4096, PROT_READ | PROT_EXEC);
        int e = errno;
        munmap(m, 4096);
        return rc == 0 ? "ok" : err(e);
    }
    return std::nullopt;
}

int fs_race(const Fields& f) {
    if (f.size() != 6) return 2;
    std::string link = f[1], a = f[2], b = f[3], readpath = f[4], tmp = link + ".tmp";
    double seconds = std::stod(f[5]);
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

}  // namespace vmhelper
