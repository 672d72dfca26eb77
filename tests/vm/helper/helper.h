// What every part of confine_vm_helper shares: the result format, the
// field grammar, and the little state that ops of different subjects use.
#pragma once

#include <fcntl.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace vmhelper {

// One OP: its fields, the op's name first.
using Fields = std::vector<std::string>;

// The fields of OP: separated by commas (a field holds no comma; lists
// inside a field are joined by '+').
inline Fields fields(const std::string& op) {
    Fields out;
    size_t start = 0;
    for (;;) {
        size_t comma = op.find(',', start);
        out.push_back(op.substr(start, comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

inline std::string errno_name(int e) {
    const char* n = strerrorname_np(e);
    return n ? n : ("errno" + std::to_string(e));
}

// The result of a failed CALL, from errno: "CALL:ERRNO_NAME".
inline std::string err(const char* call) {
    return std::string(call) + ":" + errno_name(errno);
}

// Bytes read, printable on one line.
inline std::string escape(const std::string& s) {
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

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

// Sockets and pty masters kept open until the helper exits (`hold`,
// `reuse`, `pty,hold`).
extern std::vector<int> g_held;

inline bool wait_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
}

inline pid_t pid_of(const std::string& s) {
    return s == "ppid" ? getppid() : static_cast<pid_t>(std::stol(s));
}

// One SQE through a ring of its own, submitted and waited for; `res` gets
// the CQE's result (-errno on failure). False, with errno set, if the ring
// itself failed. setup_flags: IORING_SETUP_*, SQPOLL among them.
bool uring_one(const io_uring_sqe& sqe, int& res, unsigned setup_flags = 0);

// Each subject's ops: the result ("ok[ DETAIL]", "CALL:ERRNO_NAME", or a
// bare errno name the runner prefixes with the op's name), or nullopt if
// the op is none of theirs. "usage" for a malformed op.
std::optional<std::string> fs_op(const Fields& f);
std::optional<std::string> net_op(const Fields& f);
std::optional<std::string> proc_op(const Fields& f);

// The modes that take the whole process.
int fs_race(const Fields& f);
int victims(const Fields& f);

}  // namespace vmhelper
