// Network enforcement of what a job may speak: address families other
// than inet and unix; inet protocols other than TCP and UDP, SCTP first
// (its connectx socket option connects without connect(2)), refused at
// socket(); and what rides along a datagram: IPv6 source routes, which send
// a packet to a first hop other than the destination that was checked, and
// harmless control messages.
//
// Each case runs unconfined first, as the same user with the same command
// (the control, which must succeed, where the kernel allows it at all),
// then confined. The job's side is `vmhelper`; where one run makes several
// attempts that leave lines of the same op and target, each attempt is a
// process of its own and its lines are told apart by tgid.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "harness.h"
#include "net_common.h"
#include "sockaddr.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
constexpr const char* kFar = FarHost::kNetns;
constexpr const char* kFarAddr = FarHost::kFarAddr;
constexpr const char* kPath = FarHost::kPath;
constexpr int kSctpPort = 9899;  // the far host's own: nothing else listens there

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

// A socket() a job may not make: OP, as a process of its own, asks for
// (family, type, protocol); kernel_has_it false: the control fails with
// EPROTONOSUPPORT.
struct SocketCase {
    std::string op;
    int family, type, protocol;
    bool uring = false, kernel_has_it = true;
};

// Each case, the i-th process of r (pids), was refused at socket() with
// one line.
void expect_refused_sockets(const std::vector<SocketCase>& cases, const Result& r, const std::vector<pid_t>& pids) {
    Ops o = parse_ops(r.out);
    for (size_t i = 0; i < cases.size(); i++) {
        const SocketCase& c = cases[i];
        SCOPED_TRACE(c.op);
        EXPECT_EQ(o[c.op], c.uring ? "uring-socket:EPERM" : "socket:EPERM") << r.describe();
        expect_socket_denial(of_process(r, pids[i]), c.family, c.type, c.protocol, c.uring ? "" : "vmhelper");
    }
}

class NetProtocolTest : public HelperTest {};

// ---- address families -------------------------------------------------------------------

TEST_F(NetProtocolTest, OtherAddressFamiliesNeedARule) {
    // netlink: what `ip addr` needs, and any user may create unconfined.
    // packet: refused by the kernel too for a user without CAP_NET_RAW, but
    // confine refuses first, and says so.
    const std::string cmd = "echo; ip addr show dev lo & p=$!; wait $p; echo \"ip $p $?\"; ./vmhelper socket,packet";

    Result control = run_unconfined("ip addr show dev lo && ./vmhelper socket,netlink");
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_NE(control.out.find("127.0.0.1"), npos) << control.describe();

    auto ip_pid = [](const Result& r) {
        std::smatch m;
        return std::regex_search(r.out, m, std::regex(R"(\nip ([0-9]+) ([0-9]+)\n)"))
                   ? std::pair<pid_t, int>{std::stoi(m[1]), std::stoi(m[2])}
                   : std::pair<pid_t, int>{-1, -1};
    };
    // The lines of one process of r.
    auto of = [](const Result& r, pid_t pid) {
        Result s = r;
        std::erase_if(s.audit, [&](const AuditLine& l) { return l.num("tgid") != pid; });
        return s;
    };

    Result denied = run_confined("", cmd);
    auto [ip, ip_status] = ip_pid(denied);
    Ops d = parse_ops(denied.out);
    ASSERT_GT(ip, 0) << denied.describe();
    ASSERT_EQ(d.pids.size(), 1u) << denied.describe();
    EXPECT_NE(ip_status, 0) << denied.describe();
    EXPECT_EQ(denied.out.find("127.0.0.1"), npos) << denied.describe();
    EXPECT_NE(denied.err.find("Operation not permitted"), npos) << denied.describe();
    EXPECT_EQ(d["socket,packet"], "socket:EPERM") << denied.describe();
    Result ip_lines = of(denied, ip), helper_lines = of(denied, d.pids[0]);
    EXPECT_DENIAL(ip_lines, "socket", "", "ip");
    EXPECT_DENIAL(helper_lines, "socket", "", "vmhelper");
    if (ip_lines.audit.size() == 1) {
        EXPECT_EQ(ip_lines.audit[0].num("family"), 16) << ip_lines.audit[0].raw;
    }
    if (helper_lines.audit.size() == 1) {
        EXPECT_EQ(helper_lines.audit[0].num("family"), 17) << helper_lines.audit[0].raw;
    }
    EXPECT_EQ(denied.audit.size(), 2u) << denied.describe();

    Result listed = run_confined(make_policy({.families = {"netlink"}}), cmd);
    std::tie(ip, ip_status) = ip_pid(listed);
    Ops l = parse_ops(listed.out);
    EXPECT_EQ(ip_status, 0) << listed.describe();
    EXPECT_NE(listed.out.find("inet 127.0.0.1/8"), npos) << listed.describe();
    EXPECT_EQ(l["socket,packet"], "socket:EPERM") << listed.describe();
    ASSERT_EQ(listed.audit.size(), 1u) << listed.describe();
    EXPECT_DENIAL(listed, "socket", "", "vmhelper");
    EXPECT_EQ(listed.audit[0].num("family"), 17) << listed.audit[0].raw;
}

// ---- SCTP ------------------------------------------------------------------------

TEST_F(NetProtocolTest, SctpSocketsAreRefusedSoNoAssociationLeaves) {
    ASSERT_TRUE(make_far_host());
    const std::string ready = at("sctp.ready"), stop = at("sctp.stop");
    Process server = Process::start({.argv = {"/bin/sh", "-c",
                                              fmt::format("exec ip netns exec {} {} sctp-serve,{},{},{},{}", kFar,
                                                          helper_, kFarAddr, kSctpPort, ready, stop)},
                                     .env = {kPath}});
    ASSERT_TRUE(wait_until([&] { return exists(ready); }, 60))
        << "the far host's SCTP server did not start (sctp is a module of Debian's kernels, which the guest has "
           "only if vmtest/lib.sh's VMTEST_MODULES lists it)\n"
        << server.wait(1).describe();

    // An association to the far host by connect(), by the connectx socket
    // option (decided by the sctp_bind_connect hook, not socket_connect),
    // and by a sendto on a one-to-many socket; data goes both ways.
    const std::string dest = fmt::format("{},{}", kFarAddr, kSctpPort);
    const std::vector<SocketCase> cases = {
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
    for (const SocketCase& c : cases) procs.push_back({c.op});
    const std::string cmd = processes(procs);

    Result control = run_unconfined(cmd);
    Ops co = parse_ops(control.out);
    for (const SocketCase& c : cases)
        EXPECT_EQ(co[c.op], "ok") << c.op
                                  << " unconfined (EPROTONOSUPPORT or ESOCKTNOSUPPORT: the guest has no "
                                     "sctp module; vmtest/lib.sh's VMTEST_MODULES must list sctp)\n"
                                  << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    expect_refused_sockets(cases, r, pids_of(r, cases.size()));
    EXPECT_EQ(r.audit.size(), cases.size()) << r.describe();

    // No rule grants SCTP: neither a connect rule for the far host's port
    // nor a bind rule for the wildcard address.
    const std::string policy = make_policy(
        {.connect = {fmt::format("tcp://{}:{}", kFarAddr, kSctpPort), fmt::format("udp://{}:{}", kFarAddr, kSctpPort)},
         .bind = {"tcp://0.0.0.0:0", "udp://0.0.0.0:0"}});
    Result listed = run_confined(policy, cmd);
    Ops l = parse_ops(listed.out);
    for (const SocketCase& c : cases)
        EXPECT_EQ(l[c.op], c.uring ? "uring-socket:EPERM" : "socket:EPERM") << c.op << "\n" << listed.describe();
    EXPECT_EQ(listed.audit.size(), cases.size()) << listed.describe();

    // The far host saw the control's three associations and nothing else.
    std::ofstream(stop).close();
    Result served = server.wait(60);
    EXPECT_EQ(parse_ops(served.out)[fmt::format("sctp-serve,{},{},{},{}", kFarAddr, kSctpPort, ready, stop)], "ok 3")
        << served.describe();
}

// ---- the class: every inet protocol but TCP and UDP ---------------------------------

TEST_F(NetProtocolTest, InetProtocolsOtherThanTcpAndUdpAreRefusedAtSocket) {
    // ICMP "ping" sockets are open to the groups in this range: the test
    // user's, for the control.
    Sysctl ping_range("/proc/sys/net/ipv4/ping_group_range", fmt::format("{0}\t{0}", test_user().gid));
    // UDP-Lite left the kernel in 7.1: there its control fails with
    // EPROTONOSUPPORT, but confine refuses before the kernel looks.
    const bool udplite = exists("/proc/net/udplite");
    const std::vector<SocketCase> refused = {
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
    for (const SocketCase& c : refused) procs.push_back({c.op});
    procs.push_back(allowed);
    const std::string cmd = processes(procs);

    Result control = run_unconfined(cmd);
    Ops co = parse_ops(control.out);
    for (const SocketCase& c : refused)
        EXPECT_EQ(co[c.op], c.kernel_has_it ? "ok" : "socket:EPROTONOSUPPORT") << c.op << "\n" << control.describe();
    for (const auto& op : allowed) EXPECT_EQ(co[op], "ok") << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, procs.size());
    expect_refused_sockets(refused, r, pids);
    for (const auto& op : allowed) EXPECT_EQ(o[op], "ok") << op << "\n" << r.describe();
    EXPECT_TRUE(of_process(r, pids.back()).audit.empty()) << r.describe();
    EXPECT_EQ(r.audit.size(), refused.size()) << r.describe();
}

// ---- source routes -------------------------------------------------------------

// A source route (an IPv6 routing header) sends a packet to the first hop
// it names, not to the destination connect or sendmsg checked. Each attempt
// on its own socket, to the job's own loopback socket (which a job may
// always reach), through its own loopback address. (IPv4's IP_OPTIONS and
// IP_RETOPTS source routes need CAP_NET_RAW, which no job has: unconfined,
// the test user gets EPERM from the kernel, so there is no control.)
TEST_F(NetProtocolTest, SourceRoutesAreRefused) {
    struct Attempt {
        std::vector<std::string> ops;  // the last one is the attempt
        std::string denied;            // its result, confined
        const char* op;                // its audit line
        int family;
    };
    const std::vector<Attempt> attempts = {
        {{"hold,udp,::1,0", "srcroute,rthdr,::1,held0,::1"}, "setsockopt:EPERM", "setsockopt", AF_INET6},
        {{"hold,udp,::1,0", "srcroute,rthdr-pktoptions,::1,held0,::1"}, "setsockopt:EPERM", "setsockopt", AF_INET6},
        {{"hold,udp,::1,0", "srcroute,rthdr-cmsg,::1,held0,::1,::1"}, "sendmsg:EPERM", "sendmsg", AF_INET6},
        // More control messages than the hook reads are refused; as many pass.
        {{"hold,udp,::1,0", "cmsgs,8,::1,held0,::1", "cmsgs,9,::1,held0,::1"}, "sendmsg:EPERM", "sendmsg", AF_INET6},
    };
    std::vector<std::vector<std::string>> runs;
    for (const auto& a : attempts) runs.push_back(a.ops);
    const std::string cmd = helper_runs(runs);

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& a : attempts)
        for (const auto& op : a.ops) EXPECT_TRUE(c[op].starts_with("ok")) << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure()) << "unconfined, every source route should be accepted";

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    ASSERT_EQ(o.pids.size(), attempts.size()) << r.describe();
    for (size_t i = 0; i < attempts.size(); i++) {
        const Attempt& a = attempts[i];
        SCOPED_TRACE(a.ops.back());
        EXPECT_EQ(o[a.ops.back()], a.denied) << r.describe();
        Result mine = of_process(r, o.pids[i]);
        EXPECT_DENIAL(mine, a.op, "", "vmhelper");
        if (const AuditLine* l = find_line(mine, a.op, "")) {
            EXPECT_EQ(l->str("reason"), "source_route") << l->raw;
            EXPECT_EQ(l->num("family"), a.family) << l->raw;
        }
        EXPECT_EQ(mine.audit.size(), 1u) << r.describe();
    }
    EXPECT_TRUE(o["hold,udp,::1,0"].starts_with("ok")) << r.describe();
    EXPECT_EQ(o["cmsgs,8,::1,held0,::1"], "ok") << r.describe();
    EXPECT_EQ(r.audit.size(), attempts.size()) << r.describe();
}

// Addresses added to lo for the test's duration.
class LoAddresses {
public:
    explicit LoAddresses(std::vector<std::string> cidrs) : cidrs_(std::move(cidrs)) {
        for (const auto& a : cidrs_) {
            std::string cmd = fmt::format("/usr/sbin/ip addr add {} dev lo{}", a, a.find(':') != npos ? " nodad" : "");
            if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << cmd << " failed";
        }
    }
    ~LoAddresses() {
        for (const auto& a : cidrs_) std::system(fmt::format("/usr/sbin/ip addr del {} dev lo", a).c_str());
    }

private:
    std::vector<std::string> cidrs_;
};

// Packets on lo, seen by a packet socket of this process (root, outside
// any job): what left the sender, whatever its socket was connected to.
class LoTap {
public:
    LoTap() {
        fd_ = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
        sockaddr_ll sll{};
        sll.sll_family = AF_PACKET;
        sll.sll_protocol = htons(ETH_P_ALL);
        sll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
        if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0)
            ADD_FAILURE() << "packet socket on lo: " << strerror(errno);
    }
    ~LoTap() {
        if (fd_ >= 0) close(fd_);
    }
    // IPv6 UDP packets to `dst` with a type 2 routing header since the last
    // call, counted by UDP destination port. (Sent on a socket connected
    // with the routing header set, the header names the first hop twice:
    // the kernel keeps the flow connect() routed.)
    std::map<uint16_t, int> take(const std::string& dst) {
        in6_addr d{};
        inet_pton(AF_INET6, dst.c_str(), &d);
        std::map<uint16_t, int> seen;
        uint8_t buf[2048];
        for (;;) {
            sockaddr_ll from{};
            socklen_t len = sizeof from;
            ssize_t n = recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
            if (n < 0) break;
            // IPv6 header (40 bytes: next header at 6, destination at 24),
            // the routing header (24 bytes: next header at 0, type at 2),
            // then UDP (destination port at 2).
            if (from.sll_protocol == htons(ETH_P_IPV6) && n >= 68 && buf[6] == 43 /* routing */ &&
                memcmp(buf + 24, &d, 16) == 0 && buf[40] == IPPROTO_UDP && buf[42] == 2)
                seen[static_cast<uint16_t>(buf[66] << 8 | buf[67])]++;
        }
        return seen;
    }

private:
    int fd_ = -1;
};

// The attack itself: a socket connected to the job's own loopback port (a
// destination confine allows) whose datagrams go to another host, the
// first hop of its routing header. The other host is an address on lo that
// no socket listens on: the guest has no veth module (vmtest's
// VMTEST_MODULES), so no network namespace can be reached from this one; a
// packet socket on lo shows where the datagrams went, whoever drops them
// later.
TEST_F(NetProtocolTest, ASourceRouteSendsPacketsToItsFirstHopNotToTheDestination) {
    const std::string far = "fd00:199::2";
    LoAddresses addrs({far + "/128"});
    LoTap tap;
    ASSERT_FALSE(HasFailure());
    const std::vector<std::vector<std::string>> runs = {
        {"hold,udp,::1,0", "srcroute,rthdr,::1,held0," + far},
        {"hold,udp,::1,0", "srcroute,rthdr-pktoptions,::1,held0," + far},
        {"hold,udp,::1,0", "srcroute,rthdr-cmsg,::1,held0," + far},
    };
    const std::string cmd = helper_runs(runs);

    // The port each run's `hold` got, in order.
    auto held_ports = [](const std::string& out) {
        std::vector<uint16_t> ports;
        static const std::regex re(R"((?:^|\n)[0-9]+ hold,udp,::1,0 -> ok ([0-9]+))");
        for (std::sregex_iterator m(out.begin(), out.end(), re), end; m != end; ++m)
            ports.push_back(static_cast<uint16_t>(std::stoul((*m)[1].str())));
        return ports;
    };

    tap.take(far);
    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& ops : runs) EXPECT_EQ(c[ops.back()], "ok") << control.describe();
    auto seen = tap.take(far);
    auto ports = held_ports(control.out);
    ASSERT_EQ(ports.size(), runs.size()) << control.describe();
    for (size_t i = 0; i < runs.size(); i++)
        EXPECT_GE(seen[ports[i]], 1) << "unconfined, " << runs[i].back() << ": the datagram to [::1]:" << ports[i]
                                     << " should go to " << far << " first\n"
                                     << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o[runs[0].back()], "setsockopt:EPERM") << r.describe();
    EXPECT_EQ(o[runs[1].back()], "setsockopt:EPERM") << r.describe();
    EXPECT_EQ(o[runs[2].back()], "sendmsg:EPERM") << r.describe();
    EXPECT_TRUE(tap.take(far).empty()) << r.describe();
    ASSERT_EQ(o.pids.size(), runs.size()) << r.describe();
    const char* ops[] = {"setsockopt", "setsockopt", "sendmsg"};
    for (size_t i = 0; i < runs.size(); i++) {
        Result mine = of_process(r, o.pids[i]);
        EXPECT_DENIAL(mine, ops[i], "", "vmhelper");
        EXPECT_EQ(mine.audit.size(), 1u) << r.describe();
    }
    EXPECT_EQ(r.audit.size(), runs.size()) << r.describe();
}

}  // namespace
}  // namespace vmtest
