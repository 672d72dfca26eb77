// Network ops: sockets of every family and protocol, connected, sent
// from, bound, held, served and reached from outside.
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

socklen_t unix_addr_of(const std::string& name, sockaddr_un& sun) {
    sun = {};
    sun.sun_family = AF_UNIX;
    bool abstract = name.starts_with('@');
    std::string n = abstract ? name.substr(1) : name;
    memcpy(sun.sun_path + (abstract ? 1 : 0), n.data(), std::min(n.size(), sizeof sun.sun_path - 2));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n.size() + 1);
}

// socket() for KIND (tcp, udp, mptcp) in ADDR's family.
int inet_socket(const std::string& kind, int family) {
    int type = kind == "tcp" || kind == "mptcp" ? SOCK_STREAM : SOCK_DGRAM;
    int proto = kind == "mptcp" ? 262 /* IPPROTO_MPTCP */ : 0;
    return socket(family, type | SOCK_CLOEXEC, proto);
}

std::string op_connect(const std::vector<std::string>& f) {
    sockaddr_storage ss;
    socklen_t len;
    if (f.size() != 4 || !vmtest::sockaddr_of(f[2], port_of(f[3]), ss, len)) return "usage";
    if (f[1] == "stdin") return connect(0, reinterpret_cast<sockaddr*>(&ss), len) == 0 ? "ok" : err("connect");
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
        socklen_t local_len = 0;
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

// ---- SCTP, other inet protocols, the kernel's automatic bind -----------------

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
    if (!uring_one(sqe, res)) return err("uring");
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
        if (!uring_one(sqe, res)) {
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

// ---- source routes, control messages, SO_REUSEPORT, sends that bind --------

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

// sendmsg of the one byte "x" to `to`, with `control` as its control
// messages: true if it was sent.
bool send_one(int fd, sockaddr_storage& to, socklen_t len, void* control, size_t control_len) {
    iovec iov{const_cast<char*>("x"), 1};
    msghdr m{};
    m.msg_name = &to;
    m.msg_namelen = len;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = control_len;
    return sendmsg(fd, &m, 0) == 1;
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
    if (!send_one(s.fd, ss, len, ctl, sizeof ctl)) return err("sendmsg");
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
    const size_t space = CMSG_SPACE(sizeof(int));
    std::vector<uint64_t> ctl((n * space + 7) / 8, 0);  // aligned for cmsghdr
    const bool v6 = ss.ss_family == AF_INET6;
    for (size_t i = 0; i < n; i++) {
        auto* c = reinterpret_cast<cmsghdr*>(reinterpret_cast<char*>(ctl.data()) + i * space);
        c->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
        c->cmsg_type = v6 ? IPV6_HOPLIMIT : IP_TTL;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        int ttl = 64;
        memcpy(CMSG_DATA(c), &ttl, sizeof ttl);
    }
    if (!send_one(s.fd, ss, len, ctl.data(), n * space)) return err("sendmsg");
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

}  // namespace

std::optional<std::string> net_op(const Fields& f) {
    const std::string& name = f[0];
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
    if (name == "bind") return op_bind(f, false);
    if (name == "hold") return op_bind(f, true);
    if (name == "unbind") return op_unbind();
    if (name == "serve") return op_serve(f);
    if (name == "unix") return op_unix(f);
    if (name == "autobind") return op_autobind(f);
    if (name == "socket") return op_socket(f);
    return std::nullopt;
}

}  // namespace vmhelper
