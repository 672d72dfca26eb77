// Ways into and out of the machine that bypass the TCP/UDP destination and
// bind checks:
// - inet protocols other than TCP and UDP, SCTP first (its connectx socket
//   option connects without connect(2)), refused at socket();
// - the kernel's automatic bind to the wildcard address: listen() on a
//   socket that was never bound, and a UDP send from one, which would let a
//   host elsewhere connect or send in.
//
// The far host lives in a network namespace made for each test, joined to
// the guest's by a veth pair: the guest is 10.199.0.1, the far host
// 10.199.0.2. Its programs are `vmhelper netproc` run there as root.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
constexpr const char* kFar = "confine-far";  // the far host's network namespace
constexpr const char* kHostIf = "cfar0";     // the guest's end of the veth pair
constexpr const char* kFarIf = "cfar1";
constexpr const char* kHostAddr = "10.199.0.1";
constexpr const char* kFarAddr = "10.199.0.2";
constexpr int kSctpPort = 9899;  // the far host's own: nothing else listens there
constexpr const char* kPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

bool ok(const std::string& result) {
    return result == "ok" || result.starts_with("ok ");
}

// One `vmhelper netproc` process per entry, run in turn by one shell, so
// that each process's audit lines can be told apart by its pid.
std::string processes(const std::vector<std::vector<std::string>>& procs) {
    std::vector<std::string> cmds;
    for (const auto& ops : procs) cmds.push_back(fmt::format("./vmhelper netproc {}", fmt::join(ops, " ")));
    return fmt::format("{}", fmt::join(cmds, "; "));
}

// r with only the audit lines of process `tgid`.
Result lines_of(const Result& r, pid_t tgid) {
    Result s = r;
    std::erase_if(s.audit, [&](const AuditLine& l) { return l.num("tgid") != tgid; });
    return s;
}

// The pid of each `vmhelper netproc` process of r, in the order they ran.
std::vector<pid_t> pids_of(const Result& r, size_t expected) {
    std::vector<pid_t> pids = parse_ops(r.out).pids;
    EXPECT_EQ(pids.size(), expected) << "a helper process did not run\n" << r.describe();
    pids.resize(expected, -1);
    return pids;
}

// r (one process's lines) holds exactly one line, a refused socket() of
// (family, type, protocol). comm empty: any (io_uring may run it in a
// worker thread).
void expect_socket_denial(const Result& r, int family, int type, int protocol, std::string_view comm = "vmhelper") {
    EXPECT_DENIAL(r, "socket", "", comm);
    ASSERT_EQ(r.audit.size(), 1u) << r.describe();
    const AuditLine& l = r.audit[0];
    EXPECT_EQ(l.num("family"), family) << l.raw;
    // A zero type or protocol is left out of the line.
    EXPECT_EQ(l.num("type").value_or(0), type) << l.raw;
    EXPECT_EQ(l.num("protocol").value_or(0), protocol) << l.raw;
}

// r (one process's lines) holds exactly one line, a refused bind to target.
void expect_bind_denial(const Result& r, const std::string& target, std::string_view comm = "vmhelper") {
    EXPECT_DENIAL(r, "bind", target, comm);
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

// IORING_OP_LISTEN came with 6.11.
bool kernel_has_uring_listen() {
    utsname u{};
    uname(&u);
    int major = 0, minor = 0;
    sscanf(u.release, "%d.%d", &major, &minor);
    return major > 6 || (major == 6 && minor >= 11);
}

class NetInboundTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        if (HasFatalFailure()) return;
        helper_ = install_helper(work());
        remove_far_host();
        Result r = run_root(fmt::format(
            "set -e; ip netns add {ns}; ip link add {h} type veth peer name {f}; ip link set {f} netns {ns}; "
            "ip addr add {ha}/24 dev {h}; ip link set {h} up; ip -n {ns} link set lo up; "
            "ip -n {ns} addr add {fa}/24 dev {f}; ip -n {ns} link set {f} up",
            fmt::arg("ns", kFar), fmt::arg("h", kHostIf), fmt::arg("f", kFarIf), fmt::arg("ha", kHostAddr),
            fmt::arg("fa", kFarAddr)));
        ASSERT_EQ(r.status, 0) << "cannot make the far host (a network namespace joined by a veth pair); veth is "
                                  "a module of Debian's kernels, which the guest has only if vmtest/lib.sh's "
                                  "VMTEST_MODULES lists it\n"
                               << r.describe();
        // The guest's end reports "up" once both ends are.
        const std::string state = fmt::format("/sys/class/net/{}/operstate", kHostIf);
        ASSERT_TRUE(wait_until([&] { return read_file(state) == "up\n"; }, 30))
            << "the veth pair never came up: " << state << " says " << read_file(state);
    }

    void TearDown() override { remove_far_host(); }

    void remove_far_host() {
        run_root(fmt::format("ip netns del {} 2>/dev/null; ip link del {} 2>/dev/null; true", kFar, kHostIf));
    }

    // `vmhelper netproc OPS` as root in the far host.
    Result far(const std::string& ops) {
        return run_root(fmt::format("ip netns exec {} {} netproc {}", kFar, helper_, ops));
    }

    // What the far host got to do to a job's socket.
    struct Knock {
        uint16_t port = 0;      // the port the job's socket got; 0: none, so no knock
        std::string delivered;  // the far host's `deliver` result
    };

    // While a job runs: for each (FILE, tcp|udp) in turn, waits for the
    // port an `inbound` op writes to FILE, and if it got one, has the far
    // host connect and send a byte (tcp) or send a datagram (udp) to it;
    // then tells the op (FILE.done) that nothing more comes.
    std::vector<Knock> knock(const std::vector<std::pair<std::string, std::string>>& files) {
        std::vector<Knock> knocks;
        for (const auto& [file, proto] : files) {
            Knock& k = knocks.emplace_back();
            if (!wait_until([&] { return exists(file); }, 120)) {
                ADD_FAILURE() << "the job never wrote its port to " << file;
            } else if ((k.port = static_cast<uint16_t>(std::stoul(read_file(file)))) != 0) {
                const std::string op = fmt::format("deliver,{},{},{}", proto, kHostAddr, k.port);
                Result r = far(op);
                k.delivered = parse_ops(r.out)[op];
            }
            std::ofstream(file + ".done").close();
        }
        return knocks;
    }

    // Starts each run with no port files.
    static void clear(const std::vector<std::pair<std::string, std::string>>& files) {
        for (const auto& [f, proto] : files)
            for (const std::string& p : {f, f + ".done"}) unlink(p.c_str());
    }

    std::string helper_;
};

// ---- SCTP ------------------------------------------------------------------------

TEST_F(NetInboundTest, SctpSocketsAreRefusedSoNoAssociationLeaves) {
    const std::string ready = at("sctp.ready"), stop = at("sctp.stop");
    Process server = Process::start({.argv = {"/bin/sh", "-c",
                                              fmt::format("exec ip netns exec {} {} netproc sctp-serve,{},{},{},{}",
                                                          kFar, helper_, kFarAddr, kSctpPort, ready, stop)},
                                     .env = {kPath}});
    ASSERT_TRUE(wait_until([&] { return exists(ready); }, 60))
        << "the far host's SCTP server did not start (sctp is a module of Debian's kernels, which the guest has "
           "only if vmtest/lib.sh's VMTEST_MODULES lists it)\n"
        << server.wait(1).describe();

    // An association to the far host by connect(), by the connectx socket
    // option (decided by the sctp_bind_connect hook, not socket_connect),
    // and by a sendto on a one-to-many socket; data goes both ways.
    const std::string dest = fmt::format("{},{}", kFarAddr, kSctpPort);
    struct Case {
        std::string op;
        int family, type, protocol;
        bool uring = false;
    };
    const std::vector<Case> cases = {
        {"sctp,connect," + dest, AF_INET, SOCK_STREAM, IPPROTO_SCTP},
        {"sctp,connectx," + dest, AF_INET, SOCK_STREAM, IPPROTO_SCTP},
        // SOCK_SEQPACKET with protocol 0 is SCTP.
        {"sctp,sendto," + dest, AF_INET, SOCK_SEQPACKET, 0},
        {"isocket,2,5,132", AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP},
        {"isocket,10,1,132", AF_INET6, SOCK_STREAM, IPPROTO_SCTP},
        {"isocket,10,5,0", AF_INET6, SOCK_SEQPACKET, 0},
        {"isocket,2,1,132,uring", AF_INET, SOCK_STREAM, IPPROTO_SCTP, true},
    };
    std::vector<std::vector<std::string>> procs;
    for (const Case& c : cases) procs.push_back({c.op});
    const std::string cmd = processes(procs);

    Result control = run_unconfined(cmd);
    Ops co = parse_ops(control.out);
    for (const Case& c : cases)
        EXPECT_EQ(co[c.op], "ok") << c.op
                                  << " unconfined (EPROTONOSUPPORT or ESOCKTNOSUPPORT: the guest has no "
                                     "sctp module; vmtest/lib.sh's VMTEST_MODULES must list sctp)\n"
                                  << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, cases.size());
    for (size_t i = 0; i < cases.size(); i++) {
        const Case& c = cases[i];
        SCOPED_TRACE(c.op);
        EXPECT_EQ(o[c.op], c.uring ? "uring-socket:EPERM" : "socket:EPERM") << r.describe();
        expect_socket_denial(lines_of(r, pids[i]), c.family, c.type, c.protocol, c.uring ? "" : "vmhelper");
    }
    EXPECT_EQ(r.audit.size(), cases.size()) << r.describe();

    // No rule grants SCTP: neither a connect rule for the far host's port
    // nor a bind rule for the wildcard address.
    const std::string policy = make_policy(
        {.connect = {fmt::format("tcp://{}:{}", kFarAddr, kSctpPort), fmt::format("udp://{}:{}", kFarAddr, kSctpPort)},
         .bind = {"tcp://0.0.0.0:0", "udp://0.0.0.0:0"}});
    Result listed = run_confined(policy, cmd);
    Ops l = parse_ops(listed.out);
    for (const Case& c : cases)
        EXPECT_EQ(l[c.op], c.uring ? "uring-socket:EPERM" : "socket:EPERM") << c.op << "\n" << listed.describe();
    EXPECT_EQ(listed.audit.size(), cases.size()) << listed.describe();

    // The far host saw the control's three associations and nothing else.
    std::ofstream(stop).close();
    Result served = server.wait(60);
    EXPECT_EQ(parse_ops(served.out)[fmt::format("sctp-serve,{},{},{},{}", kFarAddr, kSctpPort, ready, stop)], "ok 3")
        << served.describe();
}

// ---- the class: every inet protocol but TCP and UDP ---------------------------------

TEST_F(NetInboundTest, InetProtocolsOtherThanTcpAndUdpAreRefusedAtSocket) {
    // ICMP "ping" sockets are open to the groups in this range: the test
    // user's, for the control.
    Sysctl ping_range("/proc/sys/net/ipv4/ping_group_range", fmt::format("{0}\t{0}", test_user().gid));
    // UDP-Lite left the kernel in 7.1: there its control fails with
    // EPROTONOSUPPORT, but confine refuses before the kernel looks.
    const bool udplite = exists("/proc/net/udplite");
    struct Case {
        std::string op;
        int family, type, protocol;
        bool uring = false, kernel_has_it = true;
    };
    const std::vector<Case> refused = {
        {"isocket,2,1,262", AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */},
        {"isocket,10,1,262", AF_INET6, SOCK_STREAM, 262},
        {"isocket,2,2,136", AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE, false, udplite},
        {"isocket,10,2,136", AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE, false, udplite},
        {"isocket,2,2,1", AF_INET, SOCK_DGRAM, IPPROTO_ICMP},
        {"isocket,10,2,58", AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6},
        // The same socket() through io_uring (IORING_OP_SOCKET).
        {"isocket,2,1,262,uring", AF_INET, SOCK_STREAM, 262, true},
        {"isocket,10,2,58,uring", AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6, true},
    };
    // TCP and UDP, by protocol 0 or by number, stay the job's.
    const std::vector<std::string> allowed = {"isocket,2,1,0",  "isocket,2,1,6",  "isocket,10,1,6",
                                              "isocket,2,2,17", "isocket,10,2,0", "isocket,10,1,0,uring"};
    std::vector<std::vector<std::string>> procs;
    for (const Case& c : refused) procs.push_back({c.op});
    procs.push_back(allowed);
    const std::string cmd = processes(procs);

    Result control = run_unconfined(cmd);
    Ops co = parse_ops(control.out);
    for (const Case& c : refused)
        EXPECT_EQ(co[c.op], c.kernel_has_it ? "ok" : "socket:EPROTONOSUPPORT") << c.op << "\n" << control.describe();
    for (const auto& op : allowed) EXPECT_EQ(co[op], "ok") << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, procs.size());
    for (size_t i = 0; i < refused.size(); i++) {
        const Case& c = refused[i];
        SCOPED_TRACE(c.op);
        EXPECT_EQ(o[c.op], c.uring ? "uring-socket:EPERM" : "socket:EPERM") << r.describe();
        expect_socket_denial(lines_of(r, pids[i]), c.family, c.type, c.protocol, c.uring ? "" : "vmhelper");
    }
    for (const auto& op : allowed) EXPECT_EQ(o[op], "ok") << op << "\n" << r.describe();
    EXPECT_TRUE(lines_of(r, pids.back()).audit.empty()) << r.describe();
    EXPECT_EQ(r.audit.size(), refused.size()) << r.describe();
}

// ---- the kernel's automatic bind ----------------------------------------------------

// The job's record of packets from off the machine that confine dropped
// (one line at the job's end), or nullopt.
std::optional<int64_t> inbound_dropped(const Result& r) {
    std::optional<int64_t> count;
    for (const AuditLine& l : r.audit)
        if (l.str("op") == "inbound") {
            EXPECT_FALSE(count.has_value()) << "more than one inbound line\n" << r.describe();
            EXPECT_EQ(l.str("verdict"), "deny") << l.raw;
            EXPECT_EQ(l.str("job"), r.job) << l.raw;
            count = l.num("count");
        }
    return count;
}

// listen() on a TCP socket that was never bound binds it to the wildcard
// address on an ephemeral port, without the bind programs: a host
// elsewhere connects in.
TEST_F(NetInboundTest, ListenOnANeverBoundSocketIsABindToTheWildcardAddress) {
    const bool uring = kernel_has_uring_listen();
    const std::string f4 = work() + "/port4", f6 = work() + "/port6", fu = work() + "/portu";
    const std::string listen4 = "inbound,tcp4,listen," + f4, listen6 = "inbound,tcp6,listen," + f6,
                      listen_uring = "inbound,tcp4,uring-listen," + fu;
    // A server on the job's own loopback address stays the job's.
    const std::vector<std::string> local = {"serve,tcp,127.0.0.1,0", "serve,tcp,::1,0"};
    std::vector<std::vector<std::string>> procs = {{listen4}, {listen6}, local};
    std::vector<std::pair<std::string, std::string>> files = {{f4, "tcp"}, {f6, "tcp"}};
    if (uring) {
        procs.push_back({listen_uring});
        files.push_back({fu, "tcp"});
    }
    const std::string cmd = processes(procs);

    // The control: each listener gets a port, and the far host's byte arrives.
    clear(files);
    Process p = start_unconfined(cmd);
    std::vector<Knock> k = knock(files);
    Result control = p.wait();
    Ops co = parse_ops(control.out);
    for (size_t i = 0; i < files.size(); i++) {
        EXPECT_NE(k[i].port, 0) << files[i].first << "\n" << control.describe();
        EXPECT_EQ(k[i].delivered, "ok") << "the far host could not connect in: " << files[i].first;
    }
    EXPECT_EQ(co[listen4], fmt::format("ok {}", k[0].port)) << control.describe();
    EXPECT_EQ(co[listen6], fmt::format("ok {}", k[1].port)) << control.describe();
    if (uring) {
        EXPECT_EQ(co[listen_uring], fmt::format("ok {}", k[2].port)) << control.describe();
    }
    for (const auto& op : local) EXPECT_TRUE(ok(co[op])) << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure());

    // Confined: refused as the bind to the wildcard address it is.
    clear(files);
    Started job = start({.argv = {"/bin/sh", "-c", cmd}});
    k = knock(files);
    Result r = finish(job);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, procs.size());
    for (size_t i = 0; i < files.size(); i++)
        EXPECT_EQ(k[i].port, 0) << "a refused listener got a port, and the far host "
                                << (k[i].delivered == "ok" ? "connected in" : "tried: " + k[i].delivered);
    EXPECT_EQ(o[listen4], "listen:EPERM") << r.describe();
    EXPECT_EQ(o[listen6], "listen:EPERM") << r.describe();
    expect_bind_denial(lines_of(r, pids[0]), "tcp://0.0.0.0:0");
    expect_bind_denial(lines_of(r, pids[1]), "tcp://[::]:0");
    if (uring) {
        EXPECT_EQ(o[listen_uring], "uring-listen:EPERM") << r.describe();
        expect_bind_denial(lines_of(r, pids[3]), "tcp://0.0.0.0:0", "");
    }
    for (const auto& op : local) EXPECT_TRUE(ok(o[op])) << op << "\n" << r.describe();
    EXPECT_TRUE(lines_of(r, pids[2]).audit.empty()) << r.describe();
    EXPECT_EQ(r.audit.size(), uring ? 3u : 2u) << r.describe();

    // A bind rule for the IPv4 wildcard address grants it, and only it:
    // the far host connects in.
    clear(files);
    Started granted_job = start({.policy = make_policy({.bind = {"tcp://0.0.0.0:0"}}), .argv = {"/bin/sh", "-c", cmd}});
    k = knock(files);
    Result granted = finish(granted_job);
    Ops g = parse_ops(granted.out);
    pids = pids_of(granted, procs.size());
    EXPECT_EQ(k[0].delivered, "ok") << "the far host could not connect in\n" << granted.describe();
    EXPECT_EQ(g[listen4], fmt::format("ok {}", k[0].port)) << granted.describe();
    EXPECT_EQ(k[1].port, 0);
    EXPECT_EQ(g[listen6], "listen:EPERM") << granted.describe();
    expect_bind_denial(lines_of(granted, pids[1]), "tcp://[::]:0");
    if (uring) {
        EXPECT_EQ(k[2].delivered, "ok") << "the far host could not connect in\n" << granted.describe();
        EXPECT_EQ(g[listen_uring], fmt::format("ok {}", k[2].port)) << granted.describe();
    }
    for (const auto& op : local) EXPECT_TRUE(ok(g[op])) << op << "\n" << granted.describe();
    EXPECT_EQ(granted.audit.size(), 1u) << granted.describe();
}

// A UDP send from a socket that was never bound binds it to the wildcard
// address first, without the bind programs. Off the machine, or with no
// destination at all, that is refused as the bind it is; to loopback it
// binds as usual, and nothing from off the machine gets in (dropped and
// counted in an `inbound` line).
TEST_F(NetInboundTest, UdpFromANeverBoundSocketTakesNothingFromOffTheMachine) {
    const std::string f4 = work() + "/port4", f6 = work() + "/port6", fs = work() + "/ports", ff = work() + "/portf";
    // The far host's discard port: nothing listens there, nor needs to.
    const std::string far_dest = fmt::format("udp://{}:9", kFarAddr);
    const std::string to_lo4 = "inbound,udp4,sendto," + f4 + ",127.0.0.1,held0",
                      to_lo6 = "inbound,udp6,sendto," + f6 + ",::1,held0",
                      // No destination: the kernel binds the socket, then
                      // fails with EDESTADDRREQ.
        no_dest = "inbound,udp4,send," + fs, to_far = fmt::format("inbound,udp4,sendto,{},{},9", ff, kFarAddr);
    // Sockets bound to loopback first, or connected, send as before.
    const std::vector<std::string> local = {"hold,udp,127.0.0.1,0", "sendto,udp,127.0.0.1,held0,lo",
                                            "connect,udp,127.0.0.1,held0", "serve,udp,127.0.0.1,0", "serve,udp,::1,0"};
    const std::vector<std::vector<std::string>> procs = {
        {"hold,udp,127.0.0.1,0", to_lo4}, {"hold,udp,::1,0", to_lo6}, {no_dest}, {to_far}, local};
    const std::vector<std::pair<std::string, std::string>> files = {{f4, "udp"}, {f6, "udp"}, {fs, "udp"}, {ff, "udp"}};
    const std::string cmd = processes(procs);
    auto run_job = [&](const std::string& policy, std::vector<Knock>& k) {
        clear(files);
        Started job = start({.policy = policy, .argv = {"/bin/sh", "-c", cmd}});
        k = knock(files);
        return finish(job);
    };
    auto connect_far = [&](std::vector<std::string> bind) {
        return make_policy({.connect = {far_dest}, .bind = bind});
    };

    // The control: each socket gets a port, and the far host's datagram arrives.
    clear(files);
    Process p = start_unconfined(cmd);
    std::vector<Knock> k = knock(files);
    Result control = p.wait();
    Ops co = parse_ops(control.out);
    for (size_t i = 0; i < files.size(); i++) {
        EXPECT_NE(k[i].port, 0) << files[i].first << "\n" << control.describe();
        EXPECT_EQ(k[i].delivered, "ok") << files[i].first;
    }
    EXPECT_EQ(co[to_lo4], fmt::format("ok {}", k[0].port)) << control.describe();
    EXPECT_EQ(co[to_lo6], fmt::format("ok {}", k[1].port)) << control.describe();
    EXPECT_EQ(co[no_dest], fmt::format("ok {}", k[2].port)) << control.describe();
    EXPECT_EQ(co[to_far], fmt::format("ok {}", k[3].port)) << control.describe();
    for (const auto& op : local) EXPECT_TRUE(ok(co[op])) << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure());

    // The default policy. To loopback: sent, but the far host's datagram
    // never reaches the socket. No destination: refused. Off the machine:
    // the destination is refused first.
    Result r = run_job("", k);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, procs.size());
    EXPECT_EQ(o[to_lo4], "inbound:none") << r.describe();
    EXPECT_EQ(o[to_lo6], "inbound:none") << r.describe();
    EXPECT_TRUE(lines_of(r, pids[0]).audit.empty()) << r.describe();
    EXPECT_TRUE(lines_of(r, pids[1]).audit.empty()) << r.describe();
    EXPECT_EQ(o[no_dest], "send:EPERM") << r.describe();
    expect_bind_denial(lines_of(r, pids[2]), "udp://0.0.0.0:0");
    EXPECT_EQ(o[to_far], "sendto:EPERM") << r.describe();
    EXPECT_DENIAL(lines_of(r, pids[3]), "sendmsg", far_dest, "vmhelper");
    EXPECT_EQ(lines_of(r, pids[3]).audit.size(), 1u) << r.describe();
    for (const auto& op : local) EXPECT_TRUE(ok(o[op])) << op << "\n" << r.describe();
    EXPECT_TRUE(lines_of(r, pids[4]).audit.empty()) << r.describe();
    EXPECT_EQ(k[2].port, 0) << "a refused socket got a port";
    EXPECT_EQ(k[3].port, 0) << "a refused socket got a port";
    // The far host's two datagrams, dropped (and nothing else, but that is
    // not this test's to say).
    EXPECT_GE(inbound_dropped(r).value_or(0), 2) << r.describe();
    EXPECT_EQ(r.audit.size(), 3u) << r.describe();

    // With the far host listed as a destination, the send off the machine
    // is refused for the automatic bind.
    Result listed = run_job(connect_far({}), k);
    Ops l = parse_ops(listed.out);
    pids = pids_of(listed, procs.size());
    EXPECT_EQ(l[to_far], "sendto:EPERM") << listed.describe();
    expect_bind_denial(lines_of(listed, pids[3]), "udp://0.0.0.0:0");
    EXPECT_EQ(l[no_dest], "send:EPERM") << listed.describe();
    expect_bind_denial(lines_of(listed, pids[2]), "udp://0.0.0.0:0");
    EXPECT_EQ(l[to_lo4], "inbound:none") << listed.describe();
    EXPECT_EQ(k[3].port, 0) << "a refused socket got a port";

    // A bind rule for the IPv4 wildcard address grants the automatic bind
    // of IPv4 sockets, and datagrams from off the machine to them.
    Result granted = run_job(connect_far({"udp://0.0.0.0:0"}), k);
    Ops g = parse_ops(granted.out);
    EXPECT_EQ(g[to_lo4], fmt::format("ok {}", k[0].port)) << granted.describe();
    EXPECT_EQ(g[no_dest], fmt::format("ok {}", k[2].port)) << granted.describe();
    EXPECT_EQ(g[to_far], fmt::format("ok {}", k[3].port)) << granted.describe();
    for (const auto& op : local) EXPECT_TRUE(ok(g[op])) << op << "\n" << granted.describe();
    // The IPv6 socket's IPv4 datagram may be dropped (counted): no other line.
    for (const AuditLine& line : granted.audit) EXPECT_EQ(line.str("op"), "inbound") << line.raw;
}

}  // namespace
}  // namespace vmtest
