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

int main(int argc, char** argv) {
    if (argc < 4 || std::string(argv[1]) != "connect") return usage();
    std::string kind = argv[2];
    if ((kind == "tcp" || kind == "udp") && argc == 5)
        return connect_inet(kind == "tcp" ? SOCK_STREAM : SOCK_DGRAM, argv[3], argv[4]);
    if (kind == "unix" && argc == 4) return connect_unix(argv[3], false);
    if (kind == "abstract" && argc == 4) return connect_unix(argv[3], true);
    return usage();
}
