// Network enforcement of what a job binds, and so what may reach it: bind
// rules outside loopback; the kernel's automatic bind to the wildcard
// address (listen() on a socket that was never bound, and a UDP send from
// one, with or without a destination), which would let a host elsewhere
// connect or send in; and SO_REUSEPORT groups of sockets outside the job.
//
// Each case runs unconfined first, as the same user with the same command
// (the control, which must succeed), then confined. The job's side is
// `vmhelper`; where one run makes several attempts that leave lines of the
// same op and target, each attempt is a process of its own and its lines
// are told apart by tgid. Hosts elsewhere are a FarHost (net_common.h).
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
#include <regex>
#include <utility>

#include "harness.h"
#include "net_common.h"
#include "sockaddr.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
constexpr const char* kFarAddr = FarHost::kFarAddr;

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

using PortFiles = std::vector<std::pair<std::string, std::string>>;  // (FILE, tcp|udp), as FarHost::knock takes

class NetBindTest : public HelperTest {
protected:
    struct Control {
        std::vector<FarHost::Knock> knocks;
        Result result;
        Ops ops;
    };

    // cmd unconfined while the far host knocks at each of files; each
    // socket must have got a port, and each knock arrived.
    Control control_run(const std::string& cmd, const PortFiles& files) {
        FarHost::clear(files);
        Process p = start_unconfined(cmd);
        Control c{.knocks = far_host_->knock(files)};
        c.result = p.wait();
        c.ops = parse_ops(c.result.out);
        for (size_t i = 0; i < files.size(); i++) {
            EXPECT_NE(c.knocks[i].port, 0) << files[i].first << "\n" << c.result.describe();
            EXPECT_EQ(c.knocks[i].delivered, "ok") << "the far host's knock did not arrive: " << files[i].first;
        }
        return c;
    }

    // cmd confined by policy while the far host knocks at each of files (k).
    Result run_job(const std::string& policy, const std::string& cmd, const PortFiles& files,
                   std::vector<FarHost::Knock>& k) {
        FarHost::clear(files);
        Started job = start({.policy = policy, .argv = {"/bin/sh", "-c", cmd}});
        k = far_host_->knock(files);
        return finish(job);
    }
};

// ---- bind rules ---------------------------------------------------------------------------

TEST_F(NetBindTest, BindOutsideLoopbackNeedsARule) {
    const std::vector<uint16_t> p = free_ports(3);
    auto bind_op = [](const char* proto, const char* addr, uint16_t port) {
        return fmt::format("bind,{},{},{}", proto, addr, port);
    };
    // Loopback, IPv4 and IPv6, any address of 127.0.0.0/8: always the job's.
    const std::vector<std::string> loopback = {bind_op("tcp", "127.0.0.1", p[0]), bind_op("udp", "127.0.0.1", p[0]),
                                               bind_op("tcp", "::1", p[0]), bind_op("udp", "127.0.0.2", p[0])};
    const std::string any_tcp = bind_op("tcp", "0.0.0.0", p[0]), any_tcp_other = bind_op("tcp", "0.0.0.0", p[1]),
                      any_udp = bind_op("udp", "0.0.0.0", p[0]), any_udp_other = bind_op("udp", "0.0.0.0", p[1]),
                      any_udp_picked = "bind,udp,0.0.0.0,0", any6_tcp = bind_op("tcp", "::", p[0]),
                      mptcp = bind_op("mptcp", "0.0.0.0", p[2]);
    std::vector<std::string> ops = loopback;
    for (const auto& op : {any_tcp, any_tcp_other, any_udp, any_udp_other, any_udp_picked, any6_tcp, mptcp})
        ops.push_back(op);
    const std::string cmd = helper_cmd("./vmhelper", ops);

    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    // MPTCP may be compiled out; everything else must work for the user.
    for (const auto& op : ops)
        if (op != mptcp) {
            EXPECT_TRUE(ok(c[op])) << op << ": " << c[op] << "\n" << control.describe();
        }
    ASSERT_FALSE(HasFailure());

    Result denied = run_confined("", cmd);
    Ops d = parse_ops(denied.out);
    for (const auto& op : loopback) EXPECT_TRUE(ok(d[op])) << op << ": " << d[op] << "\n" << denied.describe();
    for (const auto& op : {any_tcp, any_tcp_other, any_udp, any_udp_other, any6_tcp})
        EXPECT_EQ(d[op], "bind:EPERM") << op << "\n" << denied.describe();
    EXPECT_DENIAL(denied, "bind", fmt::format("tcp://0.0.0.0:{}", p[0]), "vmhelper");
    EXPECT_DENIAL(denied, "bind", fmt::format("tcp://0.0.0.0:{}", p[1]), "vmhelper");
    EXPECT_DENIAL(denied, "bind", fmt::format("udp://0.0.0.0:{}", p[0]), "vmhelper");
    EXPECT_DENIAL(denied, "bind", fmt::format("udp://0.0.0.0:{}", p[1]), "vmhelper");
    EXPECT_DENIAL(denied, "bind", fmt::format("tcp://[::]:{}", p[0]), "vmhelper");
    // MPTCP is no socket a job may make (net_protocol_test.cpp), bind or not.
    EXPECT_EQ(d[mptcp], "socket:EPERM") << denied.describe();
    EXPECT_DENIAL(denied, "socket", "", "vmhelper");
    for (const AuditLine& l : denied.audit)
        if (l.str("op") == "socket") {
            EXPECT_EQ(l.num("protocol"), 262) << l.raw;
        }

    // One exact port for TCP; port 0 (any port) for UDP. Neither covers IPv6.
    const std::string policy = make_policy({.bind = {fmt::format("tcp://0.0.0.0:{}", p[0]), "udp://0.0.0.0:0"}});
    Result ruled = run_confined(policy, cmd);
    Ops b = parse_ops(ruled.out);
    for (const auto& op : loopback) EXPECT_TRUE(ok(b[op])) << op << ": " << b[op] << "\n" << ruled.describe();
    for (const auto& op : {any_tcp, any_udp, any_udp_other, any_udp_picked})
        EXPECT_TRUE(ok(b[op])) << op << ": " << b[op] << "\n" << ruled.describe();
    EXPECT_EQ(b[any_tcp_other], "bind:EPERM") << ruled.describe();
    EXPECT_EQ(b[any6_tcp], "bind:EPERM") << ruled.describe();
    EXPECT_DENIAL(ruled, "bind", fmt::format("tcp://0.0.0.0:{}", p[1]), "vmhelper");
    EXPECT_DENIAL(ruled, "bind", fmt::format("tcp://[::]:{}", p[0]), "vmhelper");
    EXPECT_EQ(b[mptcp], "socket:EPERM") << ruled.describe();
    EXPECT_DENIAL(ruled, "socket", "", "vmhelper");
    EXPECT_EQ(ruled.audit.size(), 3u) << ruled.describe();
}

// ---- SO_REUSEPORT ------------------------------------------------------------------

// A socket of the same uid that sets SO_REUSEPORT may bind the address and
// port of another that did, and joins its group: the kernel then hands it a
// share of that service's connections (TCP) or datagrams (UDP). A job may
// not join a group outside it, and may still make and join its own.
TEST_F(NetBindTest, ReusePortCannotJoinAGroupOutsideTheJob) {
    const std::string tport = work() + "/tport", uport = work() + "/uport", stop = work() + "/stop";
    Process holder =
        start_unconfined(fmt::format("exec ./vmhelper reuse,tcp,127.0.0.1,0,{} "
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
    const std::string cmd = fmt::format("./vmhelper {}", fmt::join(ops, " "));

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

// ---- UDP sends that bind -------------------------------------------------------------

// send() or write() on a UDP socket that was never bound, with no
// destination, binds it to the wildcard address on an ephemeral port before
// it fails with EDESTADDRREQ: anyone may send to it from then on.
TEST_F(NetBindTest, UdpSendWithoutADestinationCannotBind) {
    struct Way {
        std::string op, call, target;
    };
    const std::vector<Way> ways = {{"nodest,4,send", "send", "udp://0.0.0.0:0"},
                                   {"nodest,4,write", "write", "udp://0.0.0.0:0"},
                                   {"nodest,6,send", "send", "udp://[::]:0"},
                                   {"nodest,6,write", "write", "udp://[::]:0"}};
    std::vector<std::vector<std::string>> runs;
    for (const auto& w : ways) runs.push_back({w.op});
    const std::string cmd = helper_runs(runs);

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
TEST_F(NetBindTest, ListenOnANeverBoundSocketIsABindToTheWildcardAddress) {
    ASSERT_TRUE(make_far_host());
    const bool uring = kernel_has_uring_listen();
    const std::string f4 = work() + "/port4", f6 = work() + "/port6", fu = work() + "/portu";
    const std::string listen4 = "inbound,tcp4,listen," + f4, listen6 = "inbound,tcp6,listen," + f6,
                      listen_uring = "inbound,tcp4,uring-listen," + fu;
    // A server on the job's own loopback address stays the job's.
    const std::vector<std::string> local = {"serve,tcp,127.0.0.1,0", "serve,tcp,::1,0"};
    std::vector<std::vector<std::string>> procs = {{listen4}, {listen6}, local};
    PortFiles files = {{f4, "tcp"}, {f6, "tcp"}};
    if (uring) {
        procs.push_back({listen_uring});
        files.push_back({fu, "tcp"});
    }
    const std::string cmd = processes(procs);

    // The control: each listener gets a port, and the far host's byte arrives.
    auto [k, control, co] = control_run(cmd, files);
    EXPECT_EQ(co[listen4], fmt::format("ok {}", k[0].port)) << control.describe();
    EXPECT_EQ(co[listen6], fmt::format("ok {}", k[1].port)) << control.describe();
    if (uring) {
        EXPECT_EQ(co[listen_uring], fmt::format("ok {}", k[2].port)) << control.describe();
    }
    for (const auto& op : local) EXPECT_TRUE(ok(co[op])) << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure());

    // Confined: refused as the bind to the wildcard address it is.
    Result r = run_job("", cmd, files, k);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, procs.size());
    for (size_t i = 0; i < files.size(); i++)
        EXPECT_EQ(k[i].port, 0) << "a refused listener got a port, and the far host "
                                << (k[i].delivered == "ok" ? "connected in" : "tried: " + k[i].delivered);
    EXPECT_EQ(o[listen4], "listen:EPERM") << r.describe();
    EXPECT_EQ(o[listen6], "listen:EPERM") << r.describe();
    expect_bind_denial(of_process(r, pids[0]), "tcp://0.0.0.0:0");
    expect_bind_denial(of_process(r, pids[1]), "tcp://[::]:0");
    if (uring) {
        EXPECT_EQ(o[listen_uring], "uring-listen:EPERM") << r.describe();
        expect_bind_denial(of_process(r, pids[3]), "tcp://0.0.0.0:0", "");
    }
    for (const auto& op : local) EXPECT_TRUE(ok(o[op])) << op << "\n" << r.describe();
    EXPECT_TRUE(of_process(r, pids[2]).audit.empty()) << r.describe();
    EXPECT_EQ(r.audit.size(), uring ? 3u : 2u) << r.describe();

    // A bind rule for the IPv4 wildcard address grants it, and only it:
    // the far host connects in.
    Result granted = run_job(make_policy({.bind = {"tcp://0.0.0.0:0"}}), cmd, files, k);
    Ops g = parse_ops(granted.out);
    pids = pids_of(granted, procs.size());
    EXPECT_EQ(k[0].delivered, "ok") << "the far host could not connect in\n" << granted.describe();
    EXPECT_EQ(g[listen4], fmt::format("ok {}", k[0].port)) << granted.describe();
    EXPECT_EQ(k[1].port, 0);
    EXPECT_EQ(g[listen6], "listen:EPERM") << granted.describe();
    expect_bind_denial(of_process(granted, pids[1]), "tcp://[::]:0");
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
TEST_F(NetBindTest, UdpFromANeverBoundSocketTakesNothingFromOffTheMachine) {
    ASSERT_TRUE(make_far_host());
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
    const PortFiles files = {{f4, "udp"}, {f6, "udp"}, {fs, "udp"}, {ff, "udp"}};
    const std::string cmd = processes(procs);
    auto connect_far = [&](std::vector<std::string> bind) {
        return make_policy({.connect = {far_dest}, .bind = bind});
    };

    // The control: each socket gets a port, and the far host's datagram arrives.
    auto [k, control, co] = control_run(cmd, files);
    EXPECT_EQ(co[to_lo4], fmt::format("ok {}", k[0].port)) << control.describe();
    EXPECT_EQ(co[to_lo6], fmt::format("ok {}", k[1].port)) << control.describe();
    EXPECT_EQ(co[no_dest], fmt::format("ok {}", k[2].port)) << control.describe();
    EXPECT_EQ(co[to_far], fmt::format("ok {}", k[3].port)) << control.describe();
    for (const auto& op : local) EXPECT_TRUE(ok(co[op])) << op << "\n" << control.describe();
    ASSERT_FALSE(HasFailure());

    // The default policy. To loopback: sent, but the far host's datagram
    // never reaches the socket. No destination: refused. Off the machine:
    // the destination is refused first.
    Result r = run_job("", cmd, files, k);
    Ops o = parse_ops(r.out);
    std::vector<pid_t> pids = pids_of(r, procs.size());
    EXPECT_EQ(o[to_lo4], "inbound:none") << r.describe();
    EXPECT_EQ(o[to_lo6], "inbound:none") << r.describe();
    EXPECT_TRUE(of_process(r, pids[0]).audit.empty()) << r.describe();
    EXPECT_TRUE(of_process(r, pids[1]).audit.empty()) << r.describe();
    EXPECT_EQ(o[no_dest], "send:EPERM") << r.describe();
    expect_bind_denial(of_process(r, pids[2]), "udp://0.0.0.0:0");
    EXPECT_EQ(o[to_far], "sendto:EPERM") << r.describe();
    EXPECT_DENIAL(of_process(r, pids[3]), "sendmsg", far_dest, "vmhelper");
    EXPECT_EQ(of_process(r, pids[3]).audit.size(), 1u) << r.describe();
    for (const auto& op : local) EXPECT_TRUE(ok(o[op])) << op << "\n" << r.describe();
    EXPECT_TRUE(of_process(r, pids[4]).audit.empty()) << r.describe();
    EXPECT_EQ(k[2].port, 0) << "a refused socket got a port";
    EXPECT_EQ(k[3].port, 0) << "a refused socket got a port";
    // The far host's two datagrams, dropped (and nothing else, but that is
    // not this test's to say).
    EXPECT_GE(inbound_dropped(r).value_or(0), 2) << r.describe();
    EXPECT_EQ(r.audit.size(), 3u) << r.describe();

    // With the far host listed as a destination, the send off the machine
    // is refused for the automatic bind.
    Result listed = run_job(connect_far({}), cmd, files, k);
    Ops l = parse_ops(listed.out);
    pids = pids_of(listed, procs.size());
    EXPECT_EQ(l[to_far], "sendto:EPERM") << listed.describe();
    expect_bind_denial(of_process(listed, pids[3]), "udp://0.0.0.0:0");
    EXPECT_EQ(l[no_dest], "send:EPERM") << listed.describe();
    expect_bind_denial(of_process(listed, pids[2]), "udp://0.0.0.0:0");
    EXPECT_EQ(l[to_lo4], "inbound:none") << listed.describe();
    EXPECT_EQ(k[3].port, 0) << "a refused socket got a port";

    // A bind rule for the IPv4 wildcard address grants the automatic bind
    // of IPv4 sockets, and datagrams from off the machine to them.
    Result granted = run_job(connect_far({"udp://0.0.0.0:0"}), cmd, files, k);
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
