// ADDR and PORT as a sockaddr, shared by the test binary and the helper it
// runs inside jobs.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace vmtest {

// False if ADDR is no IPv4 or IPv6 literal.
inline bool sockaddr_of(const std::string& addr, uint16_t port, sockaddr_storage& ss, socklen_t& len) {
    ss = {};
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (inet_pton(AF_INET, addr.c_str(), &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        len = sizeof *sin;
        return true;
    }
    if (inet_pton(AF_INET6, addr.c_str(), &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        len = sizeof *sin6;
        return true;
    }
    return false;
}

// Whether a TCP connect to ADDR:PORT succeeds now (a server is up).
inline bool tcp_reachable(const std::string& addr, uint16_t port) {
    sockaddr_storage ss;
    socklen_t len = 0;
    if (!sockaddr_of(addr, port, ss, len)) return false;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
    close(fd);
    return ok;
}

}  // namespace vmtest
