// The boundary, second round: source routes, SO_REUSEPORT groups
// of outside sockets, prlimit on the job's own children, UDP sends that bind,
// clone3(CLONE_INTO_CGROUP) from a root job, mounts in a user namespace, and
// inode flags set through a read-only fd.
//
// Each case runs unconfined first, as the same user with the same command
// (the control, which must succeed), then confined, where it must fail with
// its exact errno and leave its audit line. The job's side is `vmhelper
// netproc` or `vmhelper fsops`; where one run makes several attempts that
// leave lines of the same op and target, each attempt is a process of its
// own and its lines are told apart by tgid.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/fs.h>
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
#include <regex>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

// has_denial for a job run as `uid` (has_denial expects the test user).
::testing::AssertionResult has_denial_of(const Result& r, std::string_view op, std::string_view target, int64_t uid,
                                         std::string_view comm) {
    auto n = std::count_if(r.audit.begin(), r.audit.end(),
                           [&](const AuditLine& l) { return l.str("op") == op && l.str("target") == target; });
    if (n != 1)
        return ::testing::AssertionFailure()
               << "expected exactly one audit line with op " << op << " and target '" << target << "', found " << n;
    const AuditLine& l = *find_line(r, op, target);
    auto fail = [&](const std::string& what) {
        return ::testing::AssertionFailure() << "audit line " << l.raw << ": " << what;
    };
    if (l.str("verdict") != "deny") return fail("verdict is not \"deny\"");
    if (l.str("mode") != "enforce") return fail("mode is not \"enforce\"");
    if (l.str("job") != r.job) return fail("job is not \"" + r.job + "\"");
    if (l.num("uid") != uid) return fail(fmt::format("uid is not {}", uid));
    if (l.num("pid").value_or(0) <= 0 || l.num("cgroup_id").value_or(0) <= 0) return fail("no pid or cgroup_id");
    if (l.str("comm") != comm) return fail(fmt::format("comm is not \"{}\"", comm));
    return ::testing::AssertionSuccess();
}

// "STEP NAME STATUS" lines a job's shell printed.
std::map<std::string, int> parse_steps(const std::string& out) {
    std::map<std::string, int> steps;
    static const std::regex re(R"((?:^|\n)STEP (\S+) ([0-9]+)(?=\n))");
    for (std::sregex_iterator m(out.begin(), out.end(), re), end; m != end; ++m)
        steps[(*m)[1].str()] = std::stoi((*m)[2].str());
    return steps;
}

// The "Max file size" soft limit in /proc/PID/limits.
std::string fsize_limit(pid_t pid) {
    std::istringstream in(read_file(fmt::format("/proc/{}/limits", pid)));
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("Max file size")) {
            std::istringstream f(line.substr(13));
            std::string soft;
            f >> soft;
            return soft;
        }
    return "(none)";
}

// The inode flags of PATH (FS_IOC_GETFLAGS), or -1.
int inode_flags(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    int flags = -1;
    if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) flags = -1;
    if (fd >= 0) close(fd);
    return flags;
}
bool has_flag(const std::string& path, int flag) {
    int flags = inode_flags(path);
    return flags >= 0 && (flags & flag);
}

class BoundaryMoreTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    // One `vmhelper netproc` process per element, in turn, in one shell.
    std::string netprocs(const std::vector<std::vector<std::string>>& runs) const {
        std::string cmd;
        for (const auto& ops : runs) cmd += fmt::format("{} netproc {}; ", helper_, fmt::join(ops, " "));
        return cmd;
    }

    std::string helper_;
};

// ---- source routes -------------------------------------------------------------

// A source route (an IPv6 routing header) sends a packet to the first hop
// it names, not to the destination connect or sendmsg checked. Each attempt
// on its own socket, to the job's own loopback socket (which a job may
// always reach), through its own loopback address. (IPv4's IP_OPTIONS and
// IP_RETOPTS source routes need CAP_NET_RAW, which no job has: unconfined,
// the test user gets EPERM from the kernel, so there is no control.)
TEST_F(BoundaryMoreTest, SourceRoutesAreRefused) {
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
    const std::string cmd = netprocs(runs);

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
TEST_F(BoundaryMoreTest, ASourceRouteSendsPacketsToItsFirstHopNotToTheDestination) {
    const std::string far = "fd00:199::2";
    LoAddresses addrs({far + "/128"});
    LoTap tap;
    ASSERT_FALSE(HasFailure());
    const std::vector<std::vector<std::string>> runs = {
        {"hold,udp,::1,0", "srcroute,rthdr,::1,held0," + far},
        {"hold,udp,::1,0", "srcroute,rthdr-pktoptions,::1,held0," + far},
        {"hold,udp,::1,0", "srcroute,rthdr-cmsg,::1,held0," + far},
    };
    const std::string cmd = netprocs(runs);

    // The port each run's `hold` got, in order.
    auto held_ports = [](const std::string& out) {
        std::vector<uint16_t> ports;
        static const std::regex re(R"((?:^|\n)hold,udp,::1,0 -> ok ([0-9]+))");
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

// ---- SO_REUSEPORT ------------------------------------------------------------------

// A socket of the same uid that sets SO_REUSEPORT may bind the address and
// port of another that did, and joins its group: the kernel then hands it a
// share of that service's connections (TCP) or datagrams (UDP). A job may
// not join a group outside it, and may still make and join its own.
TEST_F(BoundaryMoreTest, ReusePortCannotJoinAGroupOutsideTheJob) {
    const std::string tport = work() + "/tport", uport = work() + "/uport", stop = work() + "/stop";
    Process holder =
        start_unconfined(fmt::format("exec ./vmhelper netproc reuse,tcp,127.0.0.1,0,{} "
                                     "reuse,udp,127.0.0.1,0,{} wait,{}",
                                     tport, uport, stop));
    ASSERT_TRUE(wait_until([&] { return exists(tport) && exists(uport); }, 60)) << holder.wait(1).describe();
    const std::string pt = read_file(tport).substr(0, read_file(tport).find('\n'));
    const std::string pu = read_file(uport).substr(0, read_file(uport).find('\n'));
    ASSERT_NE(pt, "0");
    ASSERT_NE(pu, "0");
    const std::string join_t = "reuse,tcp,127.0.0.1," + pt, join_u = "reuse,udp,127.0.0.1," + pu;
    // The job's own group: made, then joined by a second socket.
    const std::string own = work() + "/own", own_t = "reuse,tcp,127.0.0.1,0," + own,
                      own_join = "reuse,tcp,127.0.0.1," + own, own_u = "reuse,udp,127.0.0.1,0," + own + "u",
                      own_join_u = "reuse,udp,127.0.0.1," + own + "u";
    const std::vector<std::string> ops = {join_t, join_u, own_t, own_join, own_u, own_join_u};
    const std::string cmd = fmt::format("./vmhelper netproc {}", fmt::join(ops, " "));

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    EXPECT_EQ(c[join_t], "ok " + pt) << control.describe();
    EXPECT_EQ(c[join_u], "ok " + pu) << control.describe();
    ASSERT_FALSE(HasFailure()) << "unconfined, the same user's sockets should join the groups";

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o[join_t], "bind:EPERM") << r.describe();
    EXPECT_EQ(o[join_u], "bind:EPERM") << r.describe();
    EXPECT_DENIAL(r, "bind", "tcp://127.0.0.1:" + pt, "vmhelper");
    EXPECT_DENIAL(r, "bind", "udp://127.0.0.1:" + pu, "vmhelper");
    for (const auto& op : {own_t, own_join, own_u, own_join_u})
        EXPECT_TRUE(o[op].starts_with("ok ")) << op << "\n" << r.describe();
    EXPECT_EQ(o[own_t], o[own_join]) << r.describe();
    EXPECT_EQ(o[own_u], o[own_join_u]) << r.describe();
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();

    write_file(stop, "");
    Result held = holder.wait(60);
    EXPECT_EQ(parse_ops(held.out)["wait," + stop], "ok") << held.describe();
}

// ---- prlimit -----------------------------------------------------------------------

// prlimit(2) on the job's own processes works: the helper's own child and a
// sibling the job's shell started. On a process of the same user outside
// the job: EPERM. (proc_sched_test.cpp has the outsider case in depth.)
TEST_F(BoundaryMoreTest, PrlimitWorksOnTheJobsOwnChildren) {
    Process control_outsider = start_unconfined("exec sleep 300");
    Process outsider = start_unconfined("exec sleep 300");
    ASSERT_TRUE(wait_until([&] { return read_file(fmt::format("/proc/{}/comm", outsider.pid())) == "sleep\n"; }));
    ASSERT_TRUE(
        wait_until([&] { return read_file(fmt::format("/proc/{}/comm", control_outsider.pid())) == "sleep\n"; }));
    ASSERT_EQ(fsize_limit(outsider.pid()), "unlimited");
    // {0}: the outsider. The sibling's pid is known only inside the shell.
    auto cmd_for = [](pid_t out) {
        return fmt::format(
            "sleep 300 & s=$!; echo \"sibling $s\"; ./vmhelper netproc prlimit,child,100000 limit,child "
            "prlimit,$s,200000 limit,$s prlimit,{0},300000; kill $s",
            out);
    };
    auto sibling_of = [](const std::string& out) {
        std::smatch m;
        return std::regex_search(out, m, std::regex(R"(sibling ([0-9]+))")) ? m[1].str() : std::string("?");
    };

    Result control = run_unconfined(cmd_for(control_outsider.pid()));
    Ops c = parse_ops(control.out);
    const std::string cs = sibling_of(control.out);
    EXPECT_EQ(c["prlimit,child,100000"], "ok") << control.describe();
    EXPECT_EQ(c["limit,child"], "ok 100000") << control.describe();
    EXPECT_EQ(c[fmt::format("prlimit,{},200000", cs)], "ok") << control.describe();
    EXPECT_EQ(c[fmt::format("limit,{}", cs)], "ok 200000") << control.describe();
    EXPECT_EQ(c[fmt::format("prlimit,{},300000", control_outsider.pid())], "ok") << control.describe();
    EXPECT_EQ(fsize_limit(control_outsider.pid()), "300000");
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd_for(outsider.pid()));
    Ops o = parse_ops(r.out);
    const std::string s = sibling_of(r.out);
    EXPECT_EQ(o["prlimit,child,100000"], "ok") << r.describe();
    EXPECT_EQ(o["limit,child"], "ok 100000") << r.describe();
    EXPECT_EQ(o[fmt::format("prlimit,{},200000", s)], "ok") << r.describe();
    EXPECT_EQ(o[fmt::format("limit,{}", s)], "ok 200000") << r.describe();
    EXPECT_EQ(o[fmt::format("prlimit,{},300000", outsider.pid())], "prlimit:EPERM") << r.describe();
    EXPECT_EQ(fsize_limit(outsider.pid()), "unlimited");
    const std::string target = fmt::format("pid:{}", outsider.pid());
    EXPECT_DENIAL(r, "prlimit", target, "vmhelper");
    if (const AuditLine* l = find_line(r, "prlimit", target)) {
        EXPECT_EQ(l->str("target_comm"), "sleep") << l->raw;
    }
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

// ---- UDP sends that bind -------------------------------------------------------------

// send() or write() on a UDP socket that was never bound, with no
// destination, binds it to the wildcard address on an ephemeral port before
// it fails with EDESTADDRREQ: anyone may send to it from then on.
TEST_F(BoundaryMoreTest, UdpSendWithoutADestinationCannotBind) {
    struct Way {
        std::string op, call, target;
    };
    const std::vector<Way> ways = {{"nodest,4,send", "send", "udp://0.0.0.0:0"},
                                   {"nodest,4,write", "write", "udp://0.0.0.0:0"},
                                   {"nodest,6,send", "send", "udp://[::]:0"},
                                   {"nodest,6,write", "write", "udp://[::]:0"}};
    std::vector<std::vector<std::string>> runs;
    for (const auto& w : ways) runs.push_back({w.op});
    const std::string cmd = netprocs(runs);

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& w : ways) {
        SCOPED_TRACE(w.op);
        const std::string want = w.call + ":EDESTADDRREQ port ";
        ASSERT_TRUE(c[w.op].starts_with(want)) << control.describe();
        EXPECT_GT(std::stoi(c[w.op].substr(want.size())), 0) << "unconfined, the socket should be bound\n"
                                                             << control.describe();
    }
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    ASSERT_EQ(o.pids.size(), ways.size()) << r.describe();
    for (size_t i = 0; i < ways.size(); i++) {
        SCOPED_TRACE(ways[i].op);
        EXPECT_EQ(o[ways[i].op], ways[i].call + ":EPERM port 0") << r.describe();
        Result mine = of_process(r, o.pids[i]);
        EXPECT_DENIAL(mine, "bind", ways[i].target, "vmhelper");
        EXPECT_EQ(mine.audit.size(), 1u) << r.describe();
    }
    EXPECT_EQ(r.audit.size(), ways.size()) << r.describe();
}

// ---- cgroups -------------------------------------------------------------------------

// A cgroup this test makes under the cgroup2 root, removed at the end.
class TestCgroup {
public:
    explicit TestCgroup(const std::string& name) : path_(cgroup2_mount() + "/" + name) {
        rmdir(path_.c_str());
        if (mkdir(path_.c_str(), 0755) != 0) ADD_FAILURE() << "mkdir " << path_ << ": " << strerror(errno);
    }
    ~TestCgroup() { rmdir(path_.c_str()); }
    const std::string& path() const { return path_; }
    std::string procs() const { return read_file(path_ + "/cgroup.procs"); }

private:
    std::string path_;
};

// A mount's source is the job's string, logged whole however long (past
// what a short event holds).
TEST_F(BoundaryMoreTest, ALongMountSourceIsLoggedWhole) {
    const std::string w = work();
    const std::string long_dir = fmt::format("{}/{}/{}", kUserHome, std::string(150, 'd'), std::string(150, 'e'));
    ASSERT_EQ(run_unconfined("mkdir -p " + long_dir).status, 0);
    make_dir(w + "/x");
    const std::string cmd = fmt::format("unshare -Urm mount -n --bind {} {}/x", long_dir, w);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();

    Result r = run_confined(make_policy({.user_namespaces = true}), cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "mount", long_dir, "mount");
    run_root("rm -rf " + std::string(kUserHome) + "/" + std::string(150, 'd'));
}

// clone3(CLONE_INTO_CGROUP) picks the child's cgroup by an fd (O_PATH will
// do), and the kernel then asks only for write permission on the target's
// cgroup.procs, which a root job has without any capability. A child born
// outside the job's cgroup would be unconfined and outlive the job.
TEST_F(BoundaryMoreTest, ARootJobCannotPlaceAChildInAnotherCgroup) {
    TestCgroup cg(fmt::format("confine-test-escape-{}", getpid()));
    ASSERT_FALSE(HasFailure());
    const std::string op = "cgclone," + cg.path();
    const std::string name = cg.path().substr(cgroup2_mount().size());

    Result control = run_root("./vmhelper netproc " + op);
    EXPECT_EQ(parse_ops(control.out)[op], "ok 0::" + name) << "unconfined, root's child should land in " << name << "\n"
                                                           << control.describe();
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(cg.procs(), "");

    Result r = run({.args = {"--allow-root"}, .argv = {helper_, "netproc", "child", op}, .as_user = false});
    Ops o = parse_ops(r.out);
    EXPECT_TRUE(o["child"].starts_with("ok ")) << "a plain fork should still work\n" << r.describe();
    EXPECT_EQ(o[op], "clone3:EPERM") << r.describe();
    EXPECT_TRUE(has_denial_of(r, "cgroup", "", 0, "vmhelper")) << r.describe();
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
    EXPECT_EQ(cg.procs(), "") << "a process escaped the job into " << cg.path();
}

// ---- mounts in a user namespace --------------------------------------------------------

// In a user namespace of its own (where the policy allows them) a job is
// root of its own mount namespace: a bind mount, an overlay, an attached
// open_tree clone or a moved mount would give a denied file a second path,
// under the workdir's rules. Refused; a fresh tmpfs still works. Each
// attempt in a user and mount namespace of its own: mount(8) once, as a job
// would, then mount(2) through fsops for the exact errno.
TEST_F(BoundaryMoreTest, MountsInAUserNamespaceCannotAliasDeniedFiles) {
    const std::string w = work(), ssh = std::string(kUserHome) + "/.ssh";
    for (const char* d : {"x", "m", "e", "t", "a", "b", "y"}) make_dir(w + "/" + d);
    write_file(w + "/xf", "");
    auto step = [](const std::string& name, const std::string& cmd) {
        return fmt::format("unshare -Urm {}; echo \"STEP {} $?\"; ", cmd, name);
    };
    auto fsops = [&](const std::vector<std::string>& ops) {
        std::string cmd = w + "/vmhelper fsops";
        for (const auto& op : ops) cmd += " '" + op + "'";
        return cmd;
    };
    const std::string cmd =
        step("mount8", fmt::format("sh -c 'mount -n --bind {0} {1}/x && cat {1}/x/id_ed25519'", ssh, w)) +
        step("bind", fsops({fmt::format("mount {} {}/xf - bind", kSshKey, w), "read " + w + "/xf"})) +
        step("overlay", fsops({fmt::format("mount overlay {1}/m overlay none lowerdir={0}:{1}/e", ssh, w),
                               "read " + w + "/m/id_ed25519"})) +
        step("open_tree", fsops({fmt::format("opentree-move {} {}/t", ssh, w), "read " + w + "/t/id_ed25519"})) +
        step("move", fsops({"mount - " + w + "/a tmpfs none", "open " + w + "/a/moved w,creat",
                            fmt::format("mount {0}/a {0}/b - move", w), "read " + w + "/b/moved"})) +
        step("tmpfs", fsops({"mount - " + w + "/y tmpfs none", "open " + w + "/y/f w,creat", "read " + w + "/y/f"}));
    // What each step prints, by step (fsops: one line per op).
    auto outputs = [](const std::string& out) {
        std::map<std::string, std::string> by_step;
        std::string acc;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);) {
            if (line.starts_with("STEP ")) {
                std::istringstream f(line.substr(5));
                std::string name;
                f >> name;
                by_step[name] = acc;
                acc.clear();
            } else {
                acc += line + "\n";
            }
        }
        return by_step;
    };
    const std::string secret = std::string(kSshSecret);

    Result control = run_unconfined(cmd);
    auto cs = parse_steps(control.out);
    auto co = outputs(control.out);
    for (const char* st : {"mount8", "bind", "overlay", "open_tree", "move", "tmpfs"})
        EXPECT_EQ(cs.count(st) ? cs[st] : -1, 0) << st << "\n" << control.describe();
    EXPECT_EQ(co["mount8"], secret + "\n") << control.describe();
    EXPECT_EQ(co["bind"], "0 ok\n1 ok " + secret + "\\n\n") << control.describe();
    EXPECT_EQ(co["overlay"], "0 ok\n1 ok " + secret + "\\n\n") << control.describe();
    EXPECT_EQ(co["open_tree"], "0 ok\n1 ok " + secret + "\\n\n") << control.describe();
    EXPECT_EQ(co["move"], "0 ok\n1 ok\n2 ok\n3 ok \n") << control.describe();
    EXPECT_EQ(co["tmpfs"], "0 ok\n1 ok\n2 ok \n") << control.describe();
    ASSERT_FALSE(HasFailure()) << "unconfined, every mount should work";

    Result r = run_confined(make_policy({.user_namespaces = true}), cmd);
    auto s = parse_steps(r.out);
    auto o = outputs(r.out);
    EXPECT_EQ(r.out.find(kSshSecret), npos) << "the key leaked\n" << r.describe();
    EXPECT_NE(s.count("mount8") ? s["mount8"] : 0, 0) << r.describe();
    EXPECT_EQ(o["bind"], "0 EPERM\n1 ok \n") << r.describe();  // the empty file bound onto
    EXPECT_EQ(o["overlay"], "0 EPERM\n1 ENOENT\n") << r.describe();
    EXPECT_EQ(o["open_tree"], "0 EPERM\n1 ENOENT\n") << r.describe();
    EXPECT_EQ(o["move"], "0 ok\n1 ok\n2 EPERM\n3 ENOENT\n") << r.describe();
    EXPECT_EQ(o["tmpfs"], "0 ok\n1 ok\n2 ok \n") << "a fresh tmpfs should work\n" << r.describe();
    EXPECT_DENIAL(r, "mount", ssh, "mount");
    EXPECT_DENIAL(r, "mount", kSshKey, "op0");
    EXPECT_DENIAL(r, "mount", "overlay", "op0");
    EXPECT_DENIAL(r, "mount", "", "op0");
    EXPECT_DENIAL(r, "mount", w + "/a", "op2");
    EXPECT_EQ(r.audit.size(), 5u) << r.describe();
}

// ---- inode flags -------------------------------------------------------------------------

// FS_IOC_SETFLAGS (chattr) needs only ownership and an fd, a read-only one
// included. On a file the job may read but not write: refused. (The guest's
// /var/tmp is an overlay with a tmpfs upper layer: both take the flags.)
TEST_F(BoundaryMoreTest, InodeFlagsOfFilesOutsideTheWriteSetCannotChange) {
    const std::string ro = base() + "/ro";
    make_dir(ro);
    for (const char* f : {"control-a", "control-b", "a", "b"}) write_file(ro + "/" + f, "data\n");
    auto cmd_for = [&](const std::string& a, const std::string& b) {
        return fmt::format("./vmhelper fsops 'fd-setflags {} noatime' 'fd-setflags {} nodump'", a, b);
    };

    const int before = inode_flags(ro + "/a");
    ASSERT_GE(before, 0) << "FS_IOC_GETFLAGS on " << ro << "/a: " << strerror(errno);
    Result control = run_unconfined(cmd_for(ro + "/control-a", ro + "/control-b"));
    EXPECT_EQ(control.out, "0 ok\n1 ok\n") << control.describe();
    EXPECT_TRUE(has_flag(ro + "/control-a", FS_NOATIME_FL)) << "unconfined, the flag should be set";
    EXPECT_TRUE(has_flag(ro + "/control-b", FS_NODUMP_FL)) << "unconfined, the flag should be set";
    ASSERT_FALSE(HasFailure());

    Result r = run_confined(make_policy({.read = {ro}}), cmd_for(ro + "/a", ro + "/b"));
    EXPECT_EQ(r.out, "0 EPERM\n1 EPERM\n") << r.describe();
    EXPECT_DENIAL(r, "setattr", ro + "/a", "op0");
    EXPECT_DENIAL(r, "setattr", ro + "/b", "op1");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
    EXPECT_EQ(inode_flags(ro + "/a"), before);
    EXPECT_EQ(inode_flags(ro + "/b"), before);
}

// The job's own files take the flags: in the workdir (on the guest's
// overlay, where overlayfs asks the LSM again for the upper file, as the
// mounter) and in its private /dev/shm (a tmpfs).
TEST_F(BoundaryMoreTest, InodeFlagsOfTheJobsOwnFilesCanChange) {
    const std::string own = work() + "/own";
    write_file(own, "data\n");
    const std::string cmd =
        "echo data > /dev/shm/own && ./vmhelper fsops 'fd-setflags /dev/shm/own nodump' 'fd-setflags " + own +
        " nodump'";

    Result r = run_confined("", cmd);
    EXPECT_EQ(r.out, "0 ok\n1 ok\n") << r.describe();
    EXPECT_TRUE(has_flag(own, FS_NODUMP_FL)) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

}  // namespace
}  // namespace vmtest
