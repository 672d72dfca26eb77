// Network enforcement: connect(2) to host services the policy doesn't list
// is refused; listed destinations work. The services are sockets this test
// process (root, outside any job) listens on; nothing accepts, so the
// kernel queues each connection that got through, which is what pending()
// counts.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

class Listener {
public:
    // TCP on addr ("127.0.0.1" or "::1"), on a port the kernel picks.
    static Listener tcp(const std::string& addr) {
        Listener l;
        sockaddr_storage ss{};
        socklen_t len;
        auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
        if (inet_pton(AF_INET, addr.c_str(), &sin->sin_addr) == 1) {
            sin->sin_family = AF_INET;
            len = sizeof *sin;
        } else {
            inet_pton(AF_INET6, addr.c_str(), &sin6->sin6_addr);
            sin6->sin6_family = AF_INET6;
            len = sizeof *sin6;
        }
        l.fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        l.bind_listen(reinterpret_cast<sockaddr*>(&ss), len);
        getsockname(l.fd_, reinterpret_cast<sockaddr*>(&ss), &len);
        l.port_ = ntohs(ss.ss_family == AF_INET ? sin->sin_port : sin6->sin6_port);
        return l;
    }
    // A unix stream socket at path (abstract: a name without the leading NUL).
    static Listener unix_socket(const std::string& name, bool abstract) {
        Listener l;
        sockaddr_un sun{};
        sun.sun_family = AF_UNIX;
        memcpy(sun.sun_path + (abstract ? 1 : 0), name.data(), name.size());
        l.fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (!abstract) unlink(name.c_str());
        l.bind_listen(reinterpret_cast<sockaddr*>(&sun),
                      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1));
        // Anyone may connect as far as the permission bits go: only confine
        // stands in the job's way.
        if (!abstract) chmod(name.c_str(), 0666);
        return l;
    }
    Listener(Listener&& o) noexcept : fd_(std::exchange(o.fd_, -1)), port_(o.port_) {}
    ~Listener() {
        if (fd_ >= 0) close(fd_);
    }
    uint16_t port() const { return port_; }
    // Accepts (and closes) every connection queued so far; returns how many.
    int pending() {
        int n = 0;
        for (int c; (c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; n++) close(c);
        return n;
    }

private:
    Listener() = default;
    void bind_listen(const sockaddr* sa, socklen_t len) {
        if (fd_ < 0 || bind(fd_, sa, len) != 0 || listen(fd_, 16) != 0)
            ADD_FAILURE() << "listener: " << strerror(errno);
    }
    int fd_ = -1;
    uint16_t port_ = 0;
};

class NetTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    // The connect attempt `args` (as for vmhelper connect) must succeed
    // unconfined, and be refused and audited as `target` under `policy`.
    void expect_refused(Listener& l, const std::string& policy, const std::string& args, const std::string& target) {
        const std::string cmd = "./vmhelper connect " + args;
        Result control = run_unconfined(cmd);
        ASSERT_EQ(control.status, 0) << control.describe();
        ASSERT_EQ(l.pending(), 1) << "the unconfined control did not reach the listener";

        Result r = run_confined(policy, cmd);
        EXPECT_EQ(r.status, 1) << r.describe();
        EXPECT_NE(r.out.find("connect: Operation not permitted"), npos) << r.describe();
        EXPECT_EQ(l.pending(), 0) << "the confined job reached the listener";
        EXPECT_DENIAL(r, "connect", target, "vmhelper");
    }

    // The connect attempt must succeed under `policy`, unaudited.
    void expect_allowed(Listener& l, const std::string& policy, const std::string& args) {
        Result r = run_confined(policy, "./vmhelper connect " + args);
        EXPECT_EQ(r.status, 0) << r.describe();
        EXPECT_EQ(r.out, "connected\n") << r.describe();
        EXPECT_EQ(l.pending(), 1) << "the listed destination was not reached\n" << r.describe();
        EXPECT_TRUE(r.audit.empty()) << r.describe();
    }

    std::string helper_;
};

TEST_F(NetTest, TcpToAnUnlistedLoopbackPortIsDenied) {
    Listener l = Listener::tcp("127.0.0.1");
    expect_refused(l, "", fmt::format("tcp 127.0.0.1 {}", l.port()), fmt::format("tcp://127.0.0.1:{}", l.port()));
}

TEST_F(NetTest, TcpToAListedPortWorksAndOnlyThatPort) {
    Listener listed = Listener::tcp("127.0.0.1"), other = Listener::tcp("127.0.0.1");
    const std::string policy = make_policy({.connect = {fmt::format("tcp://127.0.0.1:{}", listed.port())}});
    expect_allowed(listed, policy, fmt::format("tcp 127.0.0.1 {}", listed.port()));
    expect_refused(other, policy, fmt::format("tcp 127.0.0.1 {}", other.port()),
                   fmt::format("tcp://127.0.0.1:{}", other.port()));
}

TEST_F(NetTest, TcpOverIpv6IsDeniedUnlessListed) {
    Listener l = Listener::tcp("::1");
    const std::string args = fmt::format("tcp ::1 {}", l.port());
    expect_refused(l, "", args, fmt::format("tcp://[::1]:{}", l.port()));
    expect_allowed(l, make_policy({.connect = {fmt::format("tcp://[::1]:{}", l.port())}}), args);
}

TEST_F(NetTest, UnixSocketPathIsDeniedUnlessListed) {
    const std::string path = at("host.sock");
    Listener l = Listener::unix_socket(path, false);
    expect_refused(l, "", "unix " + path, "unix:" + path);
    expect_allowed(l, make_policy({.connect = {"unix:" + path}}), "unix " + path);
}

TEST_F(NetTest, AbstractUnixNameIsDeniedUnlessListed) {
    const std::string name = fmt::format("confine-vmtest-{}", getpid());
    Listener l = Listener::unix_socket(name, true);
    expect_refused(l, "", "abstract " + name, "unix-abstract:" + name);
    expect_allowed(l, make_policy({.connect = {"unix-abstract:" + name}}), "abstract " + name);
}

}  // namespace
}  // namespace vmtest
