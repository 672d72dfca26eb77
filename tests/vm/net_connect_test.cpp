// Network enforcement of where a job connects and sends: TCP, UDP, IPv4,
// IPv6 and IPv4-mapped IPv6, connect, sendto and TCP Fast Open; unix
// sockets by path (stream, datagram, seqpacket, through symlinks) and by
// abstract name; the job's own loopback servers; and a real proxy.
//
// Host services are sockets this test process (root, outside any job)
// binds; nothing accepts or reads, so the kernel queues what got through,
// which is what pending() counts. The job's side is `vmhelper` (one
// process, many operations, an exact errno for each). Each case runs
// unconfined as the same user first (the control, which must reach the
// service), then confined.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "harness.h"
#include "net_common.h"
#include "sockaddr.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
namespace fs = std::filesystem;

// ---- host services ----------------------------------------------------------------

// A socket of this (root) process: a TCP or unix stream/seqpacket listener
// that never accepts on its own, or a UDP or unix datagram socket that never
// reads; pending() takes what arrived since the last call.
class HostSock {
public:
    static HostSock inet(int type, const std::string& addr, uint16_t port = 0) {
        HostSock s(type);
        sockaddr_storage ss;
        socklen_t len = 0;
        if (!sockaddr_of(addr, port, ss, len)) ADD_FAILURE() << "bad address " << addr;
        s.fd_ = socket(ss.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1;
        setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ss.ss_family == AF_INET6) setsockopt(s.fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        s.bind_listen(reinterpret_cast<sockaddr*>(&ss), len, fmt::format("{} port {}", addr, port));
        getsockname(s.fd_, reinterpret_cast<sockaddr*>(&ss), &len);
        s.port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
        return s;
    }
    // NAME is a path, or "@name" for an abstract name. Anyone may connect
    // as far as the permission bits go: only confine stands in the job's way.
    static HostSock local(int type, const std::string& name) {
        HostSock s(type);
        sockaddr_un sun{};
        sun.sun_family = AF_UNIX;
        bool abstract = name.starts_with('@');
        std::string n = abstract ? name.substr(1) : name;
        memcpy(sun.sun_path + (abstract ? 1 : 0), n.data(), n.size());
        s.fd_ = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (!abstract) unlink(n.c_str());
        s.bind_listen(reinterpret_cast<sockaddr*>(&sun),
                      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n.size() + 1), name);
        if (!abstract) chmod(n.c_str(), 0666);
        return s;
    }
    HostSock(HostSock&& o) noexcept : type_(o.type_), fd_(std::exchange(o.fd_, -1)), port_(o.port_) {}
    ~HostSock() {
        if (fd_ >= 0) close(fd_);
    }
    uint16_t port() const { return port_; }
    int pending() {
        int n = 0;
        if (type_ == SOCK_DGRAM) {
            char buf[64];
            while (recv(fd_, buf, sizeof buf, MSG_DONTWAIT) >= 0) n++;
        } else {
            for (int c; (c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; n++) close(c);
        }
        return n;
    }

private:
    explicit HostSock(int type) : type_(type) {}
    void bind_listen(const sockaddr* sa, socklen_t len, const std::string& what) {
        if (fd_ < 0 || bind(fd_, sa, len) != 0 || (type_ != SOCK_DGRAM && listen(fd_, 16) != 0))
            ADD_FAILURE() << "host socket " << what << ": " << strerror(errno);
    }
    int type_;
    int fd_ = -1;
    uint16_t port_ = 0;
};

// ---- the fixture --------------------------------------------------------------------

class NetConnectTest : public HelperTest {
protected:
    // The connect attempt `op` (a helper operation) must succeed
    // unconfined, and be refused and audited as `target` under `policy`.
    void expect_refused(HostSock& l, const std::string& policy, const std::string& op, const std::string& target) {
        const std::string cmd = "./vmhelper " + op;
        Result control = run_unconfined(cmd);
        ASSERT_EQ(control.status, 0) << control.describe();
        ASSERT_EQ(l.pending(), 1) << "the unconfined control did not reach the listener";

        Result r = run_confined(policy, cmd);
        EXPECT_EQ(r.status, 1) << r.describe();
        EXPECT_EQ(parse_ops(r.out)[op], "connect:EPERM") << r.describe();
        EXPECT_EQ(l.pending(), 0) << "the confined job reached the listener";
        EXPECT_DENIAL(r, "connect", target, "vmhelper");
    }

    // The connect attempt must succeed under `policy`, unaudited.
    void expect_allowed(HostSock& l, const std::string& policy, const std::string& op) {
        Result r = run_confined(policy, "./vmhelper " + op);
        EXPECT_EQ(r.status, 0) << r.describe();
        EXPECT_EQ(parse_ops(r.out).by_index, std::vector<std::string>{"ok"}) << r.describe();
        EXPECT_EQ(l.pending(), 1) << "the listed destination was not reached\n" << r.describe();
        EXPECT_TRUE(r.audit.empty()) << r.describe();
    }
};

// ---- TCP and unix stream sockets, one connect each -------------------------------------

TEST_F(NetConnectTest, TcpToAnUnlistedLoopbackPortIsDenied) {
    HostSock l = HostSock::inet(SOCK_STREAM, "127.0.0.1");
    expect_refused(l, "", fmt::format("connect,tcp,127.0.0.1,{}", l.port()),
                   fmt::format("tcp://127.0.0.1:{}", l.port()));
}

// A socket made outside any job and handed to one (here as its stdin, as
// a runner might hand one) is decided by the job's policy, and its refusal
// audited like any other: a listed port works, another is refused.
TEST_F(NetConnectTest, ASocketHandedInFromOutsideIsDecidedForTheJob) {
    HostSock listed = HostSock::inet(SOCK_STREAM, "127.0.0.1"), other = HostSock::inet(SOCK_STREAM, "127.0.0.1");
    const std::string policy = make_policy({.connect = {fmt::format("tcp://127.0.0.1:{}", listed.port())}});
    auto handed = [] { return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); };
    for (HostSock* l : {&listed, &other}) {
        const std::string op = fmt::format("connect,stdin,127.0.0.1,{}", l->port());
        int fd = handed();
        Result control = start_unconfined("./vmhelper " + op, fd).wait();
        close(fd);
        EXPECT_EQ(parse_ops(control.out)[op], "ok") << control.describe();
        EXPECT_EQ(l->pending(), 1) << "the unconfined control did not reach the listener";

        fd = handed();
        Result r = run({.policy = policy, .argv = {"./vmhelper", op}, .stdin_fd = fd});
        close(fd);
        if (l == &listed) {
            EXPECT_EQ(parse_ops(r.out)[op], "ok") << r.describe();
            EXPECT_EQ(l->pending(), 1) << "the listed port was not reached\n" << r.describe();
            EXPECT_TRUE(r.audit.empty()) << r.describe();
        } else {
            EXPECT_EQ(parse_ops(r.out)[op], "connect:EPERM") << r.describe();
            EXPECT_EQ(l->pending(), 0) << "the job reached an unlisted port\n" << r.describe();
            EXPECT_DENIAL(r, "connect", fmt::format("tcp://127.0.0.1:{}", l->port()), "vmhelper");
        }
    }
}

TEST_F(NetConnectTest, TcpToAListedPortWorksAndOnlyThatPort) {
    HostSock listed = HostSock::inet(SOCK_STREAM, "127.0.0.1"), other = HostSock::inet(SOCK_STREAM, "127.0.0.1");
    const std::string policy = make_policy({.connect = {fmt::format("tcp://127.0.0.1:{}", listed.port())}});
    expect_allowed(listed, policy, fmt::format("connect,tcp,127.0.0.1,{}", listed.port()));
    expect_refused(other, policy, fmt::format("connect,tcp,127.0.0.1,{}", other.port()),
                   fmt::format("tcp://127.0.0.1:{}", other.port()));
}

TEST_F(NetConnectTest, TcpOverIpv6IsDeniedUnlessListed) {
    HostSock l = HostSock::inet(SOCK_STREAM, "::1");
    const std::string args = fmt::format("connect,tcp,::1,{}", l.port());
    expect_refused(l, "", args, fmt::format("tcp://[::1]:{}", l.port()));
    expect_allowed(l, make_policy({.connect = {fmt::format("tcp://[::1]:{}", l.port())}}), args);
}

TEST_F(NetConnectTest, UnixSocketPathIsDeniedUnlessListed) {
    const std::string path = at("host.sock");
    HostSock l = HostSock::local(SOCK_STREAM, path);
    expect_refused(l, "", "unix,stream," + path, "unix:" + path);
    expect_allowed(l, make_policy({.connect = {"unix:" + path}}), "unix,stream," + path);
}

TEST_F(NetConnectTest, AbstractUnixNameIsDeniedUnlessListed) {
    const std::string name = fmt::format("confine-vmtest-{}", getpid());
    HostSock l = HostSock::local(SOCK_STREAM, "@" + name);
    expect_refused(l, "", "unix,stream,@" + name, "unix-abstract:" + name);
    expect_allowed(l, make_policy({.connect = {"unix-abstract:" + name}}), "unix,stream,@" + name);
}

// ---- TCP and UDP ----------------------------------------------------------------------

TEST_F(NetConnectTest, TcpAndUdpOverIpv4Ipv6AndMappedAreDeniedUnlessListed) {
    struct Case {
        HostSock sock;
        std::string op, audit_op, target, rule;
    };
    std::vector<Case> cases;
    auto add = [&](int type, const std::string& host, const std::string& verb, const std::string& dest,
                   const std::string& audit_op, const std::string& shown, const std::string& rule_addr) {
        HostSock s = HostSock::inet(type, host);
        const uint16_t p = s.port();
        const char* proto = type == SOCK_STREAM ? "tcp" : "udp";
        std::string op = verb == "fastopen" ? fmt::format("fastopen,{},{}", dest, p)
                                            : fmt::format("{},{},{},{}", verb, proto, dest, p);
        // From a socket bound to loopback: a never-bound one is refused
        // first, for its automatic bind to the wildcard address
        // (net_protocol_test.cpp), and this test is about destinations.
        if (verb == "sendto") op += ",lo";
        cases.push_back({std::move(s), op, audit_op, fmt::format("{}://{}:{}", proto, shown, p),
                         fmt::format("{}://{}:{}", proto, rule_addr, p)});
    };
    // Each attempt has a service of its own, so each audit target is unique.
    // A v4-mapped destination is IPv4: audited as such, and matched by a
    // rule in either form.
    add(SOCK_STREAM, "127.0.0.1", "connect", "127.0.0.1", "connect", "127.0.0.1", "127.0.0.1");
    add(SOCK_STREAM, "::1", "connect", "::1", "connect", "[::1]", "[::1]");
    add(SOCK_STREAM, "127.0.0.1", "connect", "::ffff:127.0.0.1", "connect", "127.0.0.1", "127.0.0.1");
    add(SOCK_STREAM, "127.0.0.1", "fastopen", "127.0.0.1", "sendmsg", "127.0.0.1", "[::ffff:127.0.0.1]");
    add(SOCK_DGRAM, "127.0.0.1", "connect", "127.0.0.1", "connect", "127.0.0.1", "[::ffff:127.0.0.1]");
    add(SOCK_DGRAM, "::1", "connect", "::1", "connect", "[::1]", "[::1]");
    add(SOCK_DGRAM, "127.0.0.1", "connect", "::ffff:127.0.0.1", "connect", "127.0.0.1", "127.0.0.1");
    add(SOCK_DGRAM, "127.0.0.1", "sendto", "127.0.0.1", "sendmsg", "127.0.0.1", "127.0.0.1");
    add(SOCK_DGRAM, "::1", "sendto", "::1", "sendmsg", "[::1]", "[::1]");
    add(SOCK_DGRAM, "127.0.0.1", "sendto", "::ffff:127.0.0.1", "sendmsg", "127.0.0.1", "[::ffff:127.0.0.1]");

    std::vector<std::string> ops, rules;
    for (const Case& c : cases) {
        ops.push_back(c.op);
        rules.push_back(c.rule);
    }
    const std::string cmd = helper_cmd("./vmhelper", ops);

    Result control = run_unconfined(cmd);
    Ops co = parse_ops(control.out);
    for (Case& c : cases) {
        EXPECT_TRUE(ok(co[c.op])) << c.op << ": " << co[c.op];
        EXPECT_EQ(c.sock.pending(), 1) << "unconfined, " << c.op << " did not reach the service";
    }
    ASSERT_FALSE(HasFailure()) << control.describe();

    Result denied = run_confined("", cmd);
    Ops d = parse_ops(denied.out);
    for (Case& c : cases) {
        SCOPED_TRACE(c.op);
        const bool sends = c.op.starts_with("sendto") || c.op.starts_with("fastopen");
        EXPECT_EQ(d[c.op], sends ? "sendto:EPERM" : "connect:EPERM") << denied.describe();
        EXPECT_EQ(c.sock.pending(), 0) << "the confined job reached the service";
        EXPECT_DENIAL(denied, c.audit_op, c.target, "vmhelper");
    }
    EXPECT_EQ(denied.audit.size(), cases.size()) << denied.describe();

    Result listed = run_confined(make_policy({.connect = rules}), cmd);
    Ops l = parse_ops(listed.out);
    for (Case& c : cases) {
        EXPECT_TRUE(ok(l[c.op])) << c.op << ": " << l[c.op] << "\n" << listed.describe();
        EXPECT_EQ(c.sock.pending(), 1) << "the listed " << c.op << " did not reach the service";
    }
    EXPECT_TRUE(listed.audit.empty()) << listed.describe();
}

// udp_sendmsg() takes a destination whose sin_family is AF_UNSPEC as IPv4
// (an old compatibility rule), so such a sendto reaches the address it names.
TEST_F(NetConnectTest, UdpSendtoWithAnUnspecifiedFamilyIsStillChecked) {
    HostSock s = HostSock::inet(SOCK_DGRAM, "127.0.0.1");
    // From a socket bound to loopback, so that the destination is what is decided.
    const std::string op = fmt::format("sendto,udp-unspec,127.0.0.1,{},lo", s.port());
    const std::string cmd = helper_cmd("./vmhelper", {op});

    Result control = run_unconfined(cmd);
    ASSERT_EQ(parse_ops(control.out)[op], "ok") << control.describe();
    ASSERT_EQ(s.pending(), 1) << "unconfined, the datagram did not arrive";

    Result r = run_confined("", cmd);
    EXPECT_EQ(parse_ops(r.out)[op], "sendto:EPERM");
    EXPECT_EQ(s.pending(), 0) << "the confined job sent a datagram to an unlisted host service";
    EXPECT_DENIAL(r, "sendmsg", fmt::format("udp://127.0.0.1:{}", s.port()), "vmhelper");
}

// ---- unix sockets ---------------------------------------------------------------------

TEST_F(NetConnectTest, UnixSocketsByPathAndNameAreDeniedUnlessListed) {
    const std::string stream = at("stream.sock"), seqpacket = at("seqpacket.sock"), dgram = at("dgram.sock"),
                      dgramto = at("dgramto.sock"), other = at("other.sock"), to_listed = at("to-listed"),
                      to_other = at("to-other");
    const std::string abs_listed = fmt::format("@confine-more-{}-listed", getpid()),
                      abs_other = fmt::format("@confine-more-{}-other", getpid());
    HostSock s_stream = HostSock::local(SOCK_STREAM, stream), s_seq = HostSock::local(SOCK_SEQPACKET, seqpacket),
             s_dgram = HostSock::local(SOCK_DGRAM, dgram), s_dgramto = HostSock::local(SOCK_DGRAM, dgramto),
             s_other = HostSock::local(SOCK_STREAM, other), s_abs_listed = HostSock::local(SOCK_STREAM, abs_listed),
             s_abs_other = HostSock::local(SOCK_STREAM, abs_other);
    // Committed-symlink style: links the job could have made itself.
    ASSERT_EQ(symlink(stream.c_str(), to_listed.c_str()), 0);
    ASSERT_EQ(symlink(other.c_str(), to_other.c_str()), 0);

    const std::string op_stream = "unix,stream," + stream, op_seq = "unix,seqpacket," + seqpacket,
                      op_dgram = "unix,dgram," + dgram, op_dgramto = "unix,dgramto," + dgramto,
                      op_to_listed = "unix,stream," + to_listed, op_to_other = "unix,stream," + to_other,
                      op_abs_listed = "unix,stream," + abs_listed, op_abs_other = "unix,stream," + abs_other;
    const std::vector<std::string> own = {"autobind,stream", "autobind,dgram"};
    std::vector<std::string> all = {op_stream,    op_seq,      op_dgram,      op_dgramto,
                                    op_to_listed, op_to_other, op_abs_listed, op_abs_other};
    all.insert(all.end(), own.begin(), own.end());
    const std::string cmd = helper_cmd("./vmhelper", all);
    auto counts = [&] {
        return std::vector<int>{s_stream.pending(), s_seq.pending(),        s_dgram.pending(),    s_dgramto.pending(),
                                s_other.pending(),  s_abs_listed.pending(), s_abs_other.pending()};
    };

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& op : all) EXPECT_TRUE(ok(c[op])) << op << ": " << c[op];
    // stream.sock twice: directly and through its symlink.
    ASSERT_EQ(counts(), (std::vector<int>{2, 1, 1, 1, 1, 1, 1})) << control.describe();

    // Nothing listed: every host socket is refused, the job's own are not.
    Result denied = run_confined("", cmd);
    Ops d = parse_ops(denied.out);
    for (const auto& op : {op_stream, op_seq, op_to_listed, op_to_other, op_abs_listed, op_abs_other})
        EXPECT_EQ(d[op], "connect:EPERM") << op << "\n" << denied.describe();
    EXPECT_EQ(d[op_dgram], "connect:EPERM") << denied.describe();
    EXPECT_EQ(d[op_dgramto], "sendto:EPERM") << denied.describe();
    for (const auto& op : own) EXPECT_TRUE(ok(d[op])) << op << ": " << d[op] << "\n" << denied.describe();
    EXPECT_EQ(counts(), (std::vector<int>(7, 0))) << "the confined job reached a host socket";
    // Connecting through a symlink is audited as the socket the kernel found.
    for (const auto& [op, target] :
         std::vector<std::pair<std::string, std::string>>{{"connect", "unix:" + stream},
                                                          {"connect", "unix:" + seqpacket},
                                                          {"sendmsg", "unix:" + dgram},
                                                          {"sendmsg", "unix:" + dgramto},
                                                          {"connect", "unix:" + other},
                                                          {"connect", "unix-abstract:" + abs_listed.substr(1)},
                                                          {"connect", "unix-abstract:" + abs_other.substr(1)}}) {
        // stream.sock is refused twice (directly and through to-listed).
        if (target == "unix:" + stream) {
            EXPECT_EQ(std::count_if(denied.audit.begin(), denied.audit.end(),
                                    [&](const AuditLine& l) { return l.str("target") == target; }),
                      2)
                << denied.describe();
            continue;
        }
        EXPECT_DENIAL(denied, op, target, "vmhelper");
    }
    EXPECT_EQ(denied.audit.size(), 8u) << denied.describe();

    // Listed by their real paths: reachable directly and through symlinks;
    // the unlisted ones stay refused, whichever way they are named.
    const std::string policy = make_policy({.connect = {"unix:" + stream, "unix:" + seqpacket, "unix:" + dgram,
                                                        "unix:" + dgramto, "unix-abstract:" + abs_listed.substr(1)}});
    Result listed = run_confined(policy, cmd);
    Ops l = parse_ops(listed.out);
    for (const auto& op : {op_stream, op_seq, op_dgram, op_dgramto, op_to_listed, op_abs_listed, own[0], own[1]})
        EXPECT_TRUE(ok(l[op])) << op << ": " << l[op] << "\n" << listed.describe();
    EXPECT_EQ(l[op_to_other], "connect:EPERM") << listed.describe();
    EXPECT_EQ(l[op_abs_other], "connect:EPERM") << listed.describe();
    EXPECT_EQ(counts(), (std::vector<int>{2, 1, 1, 1, 0, 1, 0}));
    EXPECT_DENIAL(listed, "connect", "unix:" + other, "vmhelper");
    EXPECT_DENIAL(listed, "connect", "unix-abstract:" + abs_other.substr(1), "vmhelper");
    EXPECT_EQ(listed.audit.size(), 2u) << listed.describe();
}

// ---- the job's own loopback -----------------------------------------------------------

TEST_F(NetConnectTest, LoopbackServersOfTheJobAreItsOwnUntilClosed) {
    const std::vector<uint16_t> p = free_ports(6);
    const uint16_t released = p[4], held = p[5];
    // Round trips to servers the job starts itself: TCP and UDP, IPv4 and
    // IPv6, on a port the kernel picks and on a fixed one.
    std::vector<std::string> serve;
    int i = 0;
    for (const char* proto : {"tcp", "udp"})
        for (const char* addr : {"127.0.0.1", "::1"}) {
            serve.push_back(fmt::format("serve,{},{},0", proto, addr));
            serve.push_back(fmt::format("serve,{},{},{}", proto, addr, p[i++]));
        }
    const std::string closed = work() + "/closed", rebound = work() + "/rebound";
    const std::string connect_tcp = fmt::format("connect,tcp,127.0.0.1,{}", released),
                      sendto_udp = fmt::format("sendto,udp,127.0.0.1,{},lo", released);
    std::vector<std::string> ops = serve;
    // Then a server that closes: its port stops being the job's, and the
    // host's service that takes it over is out of reach.
    for (const std::string& op :
         {fmt::format("bind,tcp,127.0.0.1,{}", released), fmt::format("bind,udp,127.0.0.1,{}", released),
          fmt::format("hold,tcp,127.0.0.1,{}", held), "touch," + closed, "wait," + rebound, connect_tcp, sendto_udp})
        ops.push_back(op);

    Started job = start({.argv = {"/bin/sh", "-c", helper_cmd("./vmhelper", ops)}});
    ASSERT_TRUE(wait_until([&] { return exists(closed); }, 60)) << finish(job, 1).describe();
    HostSock host_tcp = HostSock::inet(SOCK_STREAM, "127.0.0.1", released),
             host_udp = HostSock::inet(SOCK_DGRAM, "127.0.0.1", released);
    write_file(rebound, "");
    Result r = finish(job);
    Ops o = parse_ops(r.out);
    for (const auto& op : serve) EXPECT_TRUE(ok(o[op])) << op << ": " << o[op] << "\n" << r.describe();
    EXPECT_EQ(o[connect_tcp], "connect:EPERM") << r.describe();
    EXPECT_EQ(o[sendto_udp], "sendto:EPERM") << r.describe();
    EXPECT_EQ(host_tcp.pending(), 0);
    EXPECT_EQ(host_udp.pending(), 0);
    EXPECT_DENIAL(r, "connect", fmt::format("tcp://127.0.0.1:{}", released), "vmhelper");
    EXPECT_DENIAL(r, "sendmsg", fmt::format("udp://127.0.0.1:{}", released), "vmhelper");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();

    // Control: the host services the job was refused are there for the user.
    Result control = run_unconfined(helper_cmd("./vmhelper", {connect_tcp, sendto_udp}));
    Ops c = parse_ops(control.out);
    EXPECT_EQ(c[connect_tcp], "ok") << control.describe();
    EXPECT_EQ(c[sendto_udp], "ok") << control.describe();
    EXPECT_EQ(host_tcp.pending(), 1);
    EXPECT_EQ(host_udp.pending(), 1);
}

// A port is the job's on the loopback address it bound, not on every one:
// holding 127.0.0.2:P must not open the host's 127.0.0.1:P (a database, a
// resolver on 127.0.0.53) to the job.
TEST_F(NetConnectTest, AJobPortOnOneLoopbackAddressOpensNoOther) {
    const uint16_t port = free_ports(1)[0];
    HostSock host_tcp = HostSock::inet(SOCK_STREAM, "127.0.0.1", port),
             host_udp = HostSock::inet(SOCK_DGRAM, "127.0.0.1", port);
    const std::string connect_tcp = fmt::format("connect,tcp,127.0.0.1,{}", port),
                      sendto_udp = fmt::format("sendto,udp,127.0.0.1,{},lo", port);
    const std::vector<std::string> ops = {fmt::format("hold,tcp,127.0.0.2,{}", port),
                                          fmt::format("hold,udp,127.0.0.2,{}", port), connect_tcp, sendto_udp};
    const std::string cmd = helper_cmd("./vmhelper", ops);

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& op : ops) EXPECT_TRUE(ok(c[op])) << op << ": " << c[op];
    ASSERT_EQ(host_tcp.pending(), 1) << control.describe();
    ASSERT_EQ(host_udp.pending(), 1) << control.describe();

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    EXPECT_TRUE(ok(o[ops[0]]) && ok(o[ops[1]])) << "loopback binds must work\n" << r.describe();
    EXPECT_EQ(o[connect_tcp], "connect:EPERM");
    EXPECT_EQ(o[sendto_udp], "sendto:EPERM");
    EXPECT_EQ(host_tcp.pending(), 0) << "the job reached the host's 127.0.0.1 service";
    EXPECT_EQ(host_udp.pending(), 0) << "the job reached the host's 127.0.0.1 service";
    EXPECT_DENIAL(r, "connect", fmt::format("tcp://127.0.0.1:{}", port), "vmhelper");
    EXPECT_DENIAL(r, "sendmsg", fmt::format("udp://127.0.0.1:{}", port), "vmhelper");
}

// A loopback port where nothing is there protects nothing: the job gets
// the kernel's own answer, ECONNREFUSED, with no audit record, so a job
// polling for its own test server to come up keeps polling. UDP is refused
// at connect and send (the kernel reports it at the next send): a
// connected socket would otherwise reach a host service bound later.
TEST_F(NetConnectTest, ALoopbackPortWithNothingThereIsRefusedAsTheKernelWould) {
    const std::vector<uint16_t> p = free_ports(2);
    std::vector<std::string> ops;
    for (const char* addr : {"127.0.0.1", "::1"}) ops.push_back(fmt::format("connect,tcp,{},{}", addr, p[0]));
    ops.push_back(fmt::format("fastopen,127.0.0.1,{}", p[0]));
    for (const char* addr : {"127.0.0.1", "::1"}) {
        ops.push_back(fmt::format("connect,udp,{},{}", addr, p[1]));
        ops.push_back(fmt::format("sendto,udp,{},{},lo", addr, p[1]));
    }
    const std::string cmd = helper_cmd("./vmhelper", ops);

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& op : ops) {
        if (op.starts_with("connect,tcp")) {
            EXPECT_EQ(c[op], "connect:ECONNREFUSED") << control.describe();
        }
    }

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    for (const auto& op : ops) {
        const bool sends = op.starts_with("sendto") || op.starts_with("fastopen");
        EXPECT_EQ(o[op], sends ? "sendto:ECONNREFUSED" : "connect:ECONNREFUSED") << op << "\n" << r.describe();
    }
    EXPECT_TRUE(r.audit.empty()) << r.describe();

    // Audit mode lets it through, and records what enforce mode refuses.
    Result audited = run_confined("", helper_cmd("./vmhelper", {ops[0]}), {"--mode", "audit"});
    EXPECT_EQ(parse_ops(audited.out)[ops[0]], "connect:ECONNREFUSED") << audited.describe();
    ASSERT_EQ(audited.audit.size(), 1u) << audited.describe();
    EXPECT_EQ(audited.audit[0].str("target"), fmt::format("tcp://127.0.0.1:{}", p[0]));
    EXPECT_EQ(audited.audit[0].str("reason"), "nothing_listening") << audited.describe();
    EXPECT_EQ(audited.audit[0].str("verdict"), "allow") << audited.describe();

    // A host service on that port is still out of reach, and audited.
    HostSock host = HostSock::inet(SOCK_STREAM, "127.0.0.1", p[0]);
    Result taken = run_confined("", helper_cmd("./vmhelper", {ops[0]}));
    EXPECT_EQ(parse_ops(taken.out)[ops[0]], "connect:EPERM") << taken.describe();
    EXPECT_EQ(host.pending(), 0);
    EXPECT_DENIAL(taken, "connect", fmt::format("tcp://127.0.0.1:{}", p[0]), "vmhelper");
}

// A socket bound to port 0 gives its port back on connect(AF_UNSPEC)
// without being closed. The port is no longer the job's, whoever binds it
// next.
// (A record of the ports the job bound, kept until the socket closed, got
// this wrong; confine now decides on the socket the kernel would reach.)
TEST_F(NetConnectTest, APortTheJobGaveBackWithoutClosingIsNoLongerItsOwn) {
    const std::string tport = work() + "/tport", uport = work() + "/uport", released = work() + "/released",
                      taken = work() + "/taken";
    // The last two OPs read the port numbers from the files at that time.
    const std::string connect_tcp = "connect,tcp,127.0.0.1," + tport,
                      sendto_udp = "sendto,udp,127.0.0.1," + uport + ",lo";
    const std::string cmd =
        helper_cmd("./vmhelper", {"hold,tcp,127.0.0.1,0," + tport, "hold,udp,127.0.0.1,0," + uport, "unbind",
                                  "touch," + released, "wait," + taken, connect_tcp, sendto_udp});
    // Runs `cmd` (started by `begin`), takes over its ports as the host once
    // it gave them back, and returns its result and what the host received.
    struct Outcome {
        Result r;
        uint16_t tcp_port, udp_port;
        int tcp_pending, udp_pending;
    };
    auto play = [&](auto&& begin, auto&& end) -> std::optional<Outcome> {
        for (const auto& f : {tport, uport, released, taken}) unlink(f.c_str());
        auto handle = begin();
        if (!wait_until([&] { return exists(released); }, 60)) {
            ADD_FAILURE() << "the job never gave its ports back\n" << end(handle).describe();
            return std::nullopt;
        }
        auto tp = static_cast<uint16_t>(std::stoul(read_file(tport))),
             up = static_cast<uint16_t>(std::stoul(read_file(uport)));
        HostSock host_tcp = HostSock::inet(SOCK_STREAM, "127.0.0.1", tp),
                 host_udp = HostSock::inet(SOCK_DGRAM, "127.0.0.1", up);
        write_file(taken, "");
        Outcome o{end(handle), tp, up, 0, 0};
        o.tcp_pending = host_tcp.pending();
        o.udp_pending = host_udp.pending();
        return o;
    };

    auto control = play([&] { return start_unconfined(cmd); }, [](Process& p) { return p.wait(); });
    ASSERT_TRUE(control);
    Ops c = parse_ops(control->r.out);
    ASSERT_EQ(c[connect_tcp], "ok") << control->r.describe();
    ASSERT_EQ(c[sendto_udp], "ok") << control->r.describe();
    ASSERT_EQ(control->tcp_pending, 1);
    ASSERT_EQ(control->udp_pending, 1);

    auto confined = play(
        [&] {
            return start({.argv = {"/bin/sh", "-c", cmd}});
        },
        [&](Started& s) { return finish(s); });
    ASSERT_TRUE(confined);
    const Result& r = confined->r;
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["unbind"], "ok") << r.describe();
    EXPECT_EQ(o[connect_tcp], "connect:EPERM");
    EXPECT_EQ(o[sendto_udp], "sendto:EPERM");
    EXPECT_EQ(confined->tcp_pending, 0) << "the job reached the host's service on a port it gave back";
    EXPECT_EQ(confined->udp_pending, 0) << "the job reached the host's service on a port it gave back";
    EXPECT_DENIAL(r, "connect", fmt::format("tcp://127.0.0.1:{}", confined->tcp_port), "vmhelper");
    EXPECT_DENIAL(r, "sendmsg", fmt::format("udp://127.0.0.1:{}", confined->udp_port), "vmhelper");
}

// ---- a real proxy ------------------------------------------------------------------------

// An HTTP server (root, outside any job) on 127.0.0.2:8000, [::1]:8000 and
// a unix socket, serving the directory it runs in.
constexpr const char* kHttpServer = R"py(
import http.server, os, socket, socketserver, sys, threading
root, unix_path, ready = sys.argv[1:4]
os.chdir(root)
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass
    def address_string(self): return "client"
class V6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
class Unix(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    def get_request(self):
        conn, _ = self.socket.accept()
        return conn, ("unix", 0)
if os.path.exists(unix_path): os.unlink(unix_path)
servers = [http.server.ThreadingHTTPServer(("127.0.0.2", 8000), Handler), V6(("::1", 8000), Handler),
           Unix(unix_path, Handler)]
os.chmod(unix_path, 0o666)
for s in servers: threading.Thread(target=s.serve_forever, daemon=True).start()
open(ready, "w").close()
threading.Event().wait()
)py";

TEST_F(NetConnectTest, OnlyTheListedProxyReachesServicesBeyondIt) {
    const std::string body = fmt::format("body-through-the-proxy-{}\n", getpid());
    const std::string docroot = at("www"), unix_path = at("http.sock"), ready = at("http.ready");
    make_dir(docroot);
    write_file(docroot + "/f", body);
    write_file(at("server.py"), kHttpServer);
    write_file(at("tinyproxy.conf"), "Port 8888\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 60\n");
    Process http = Process::start(
        {.argv = {"/usr/bin/python3", at("server.py"), docroot, unix_path, ready}, .env = {"PATH=/usr/bin:/bin"}});
    Process proxy = Process::start(
        {.argv = {"/usr/bin/tinyproxy", "-d", "-c", at("tinyproxy.conf")}, .env = {"PATH=/usr/bin:/bin"}});
    HostSock udp4 = HostSock::inet(SOCK_DGRAM, "127.0.0.2", 8000), udp6 = HostSock::inet(SOCK_DGRAM, "::1", 8000);
    ASSERT_TRUE(wait_until([&] { return exists(ready); }, 60)) << http.wait(1).describe();
    ASSERT_TRUE(wait_until([&] { return tcp_reachable("127.0.0.1", 8888); }, 60)) << proxy.wait(1).describe();

    // Each curl prints its exit status after the body: "=N".
    const std::string curl = "curl -sS --max-time 60 -o - -w '=%{exitcode}\\n' ";
    const std::string via_proxy = curl + "-x http://127.0.0.1:8888 http://127.0.0.2:8000/f",
                      direct4 = curl + "http://127.0.0.2:8000/f", direct6 = curl + "'http://[::1]:8000/f'",
                      via_unix = curl + "--unix-socket " + unix_path + " http://localhost/f";
    const std::string udp_ops = "./vmhelper sendto,udp,127.0.0.2,8000,lo connect,udp,::1,8000";
    const std::string direct = direct4 + "; " + direct6 + "; " + via_unix + "; " + udp_ops;

    Result control = run_unconfined(direct);
    EXPECT_EQ(control.out.substr(0, control.out.find("pid ")), body + "=0\n" + body + "=0\n" + body + "=0\n")
        << control.describe();
    Ops c = parse_ops(control.out);
    EXPECT_EQ(c["sendto,udp,127.0.0.2,8000,lo"], "ok");
    EXPECT_EQ(c["connect,udp,::1,8000"], "ok");
    EXPECT_EQ(udp4.pending(), 1);
    EXPECT_EQ(udp6.pending(), 1);
    ASSERT_FALSE(HasFailure()) << control.describe();

    Result r = run_confined(make_policy({.connect = {"tcp://127.0.0.1:8888"}}), via_proxy + "; " + direct);
    // The proxy fetches the body; every direct way is refused.
    EXPECT_TRUE(r.out.starts_with(body + "=0\n")) << r.describe();
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '='), 4) << r.describe();
    EXPECT_EQ(r.out.find(body, body.size()), npos) << "the body came through a direct way\n" << r.describe();
    EXPECT_NE(r.out.find(body + "=0\n=7\n=7\n=7\n"), npos) << "curl exits 7 when it can't connect\n" << r.describe();
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["sendto,udp,127.0.0.2,8000,lo"], "sendto:EPERM") << r.describe();
    EXPECT_EQ(o["connect,udp,::1,8000"], "connect:EPERM") << r.describe();
    EXPECT_EQ(udp4.pending(), 0);
    EXPECT_EQ(udp6.pending(), 0);
    EXPECT_DENIAL(r, "connect", "tcp://127.0.0.2:8000", "curl");
    EXPECT_DENIAL(r, "connect", "tcp://[::1]:8000", "curl");
    EXPECT_DENIAL(r, "connect", "unix:" + unix_path, "curl");
    EXPECT_DENIAL(r, "sendmsg", "udp://127.0.0.2:8000", "vmhelper");
    EXPECT_DENIAL(r, "connect", "udp://[::1]:8000", "vmhelper");
    EXPECT_EQ(r.audit.size(), 5u) << r.describe();
}

}  // namespace
}  // namespace vmtest
