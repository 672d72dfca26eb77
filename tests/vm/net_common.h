// What the network tests share: a far host to reach the machine from
// outside, ports nobody uses, and helper runs told apart by process.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "sockaddr.h"

namespace vmtest {

// "ok" and "ok <detail>" alike.
inline bool ok(const std::string& result) {
    return result == "ok" || result.starts_with("ok ");
}

// `HELPER OPS...`: one helper process.
inline std::string helper_cmd(const std::string& helper, const std::vector<std::string>& ops) {
    return fmt::format("{} {}", helper, fmt::join(ops, " "));
}

// One `vmhelper` process per element, run in turn by one shell, so that
// each process's audit lines can be told apart by its pid.
inline std::string helper_runs(const std::string& helper, const std::vector<std::vector<std::string>>& runs) {
    std::vector<std::string> cmds;
    for (const auto& ops : runs) cmds.push_back(fmt::format("{} {}", helper, fmt::join(ops, " ")));
    return fmt::format("{}", fmt::join(cmds, "; "));
}

// The pid of each `vmhelper` process of r, in the order they ran.
inline std::vector<pid_t> pids_of(const Result& r, size_t expected) {
    std::vector<pid_t> pids = parse_ops(r.out).pids;
    EXPECT_EQ(pids.size(), expected) << "a helper process did not run\n" << r.describe();
    pids.resize(expected, -1);
    return pids;
}

// Ports nobody uses for TCP or UDP on any address, IPv4 or IPv6, below the
// ephemeral range (so no client connection takes one meanwhile).
inline std::vector<uint16_t> free_ports(size_t n) {
    static uint16_t next = static_cast<uint16_t>(20000 + (static_cast<long>(getpid()) * 7919) % 10000);
    std::vector<uint16_t> out;
    while (out.size() < n) {
        uint16_t p = next++;
        if (next > 32000) next = 20000;
        bool free = true;
        for (const char* addr : {"0.0.0.0", "::"})
            for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
                sockaddr_storage ss;
                socklen_t len = 0;
                sockaddr_of(addr, p, ss, len);
                int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0), one = 1;
                if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
                free = free && fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
                close(fd);
            }
        if (free) out.push_back(p);
    }
    return out;
}

// The far host: a network namespace joined to the guest's by a veth pair,
// the guest 10.199.0.1, the far host 10.199.0.2, for as long as it lives.
// Its programs are the helper, run there as root.
class FarHost {
public:
    static constexpr const char* kNetns = "confine-far";
    static constexpr const char* kHostIf = "cfar0";  // the guest's end of the veth pair
    static constexpr const char* kFarIf = "cfar1";
    static constexpr const char* kHostAddr = "10.199.0.1";
    static constexpr const char* kFarAddr = "10.199.0.2";
    static constexpr const char* kPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

    explicit FarHost(std::string helper) : helper_(std::move(helper)) {
        remove();
        Result r = root(fmt::format(
            "set -e; ip netns add {ns}; ip link add {h} type veth peer name {f}; ip link set {f} netns {ns}; "
            "ip addr add {ha}/24 dev {h}; ip link set {h} up; ip -n {ns} link set lo up; "
            "ip -n {ns} addr add {fa}/24 dev {f}; ip -n {ns} link set {f} up",
            fmt::arg("ns", kNetns), fmt::arg("h", kHostIf), fmt::arg("f", kFarIf), fmt::arg("ha", kHostAddr),
            fmt::arg("fa", kFarAddr)));
        if (r.status != 0) {
            error_ =
                "cannot make the far host (a network namespace joined by a veth pair); veth is a module of "
                "Debian's kernels, which the guest has only if vmtest/lib.sh's VMTEST_MODULES lists it\n" +
                r.describe();
            return;
        }
        // The guest's end reports "up" once both ends are.
        const std::string state = fmt::format("/sys/class/net/{}/operstate", kHostIf);
        if (!wait_until([&] { return read_file(state) == "up\n"; }, 30))
            error_ = "the veth pair never came up: " + state + " says " + read_file(state);
    }
    ~FarHost() { remove(); }
    FarHost(const FarHost&) = delete;
    FarHost& operator=(const FarHost&) = delete;
    // Why the far host could not be made; "" once it is.
    const std::string& error() const { return error_; }

    // `vmhelper OPS` as root in the far host.
    Result run(const std::string& ops) { return root(fmt::format("ip netns exec {} {} {}", kNetns, helper_, ops)); }

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
                Result r = run(op);
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

private:
    static Result root(const std::string& cmd) {
        return Process::start({.argv = {"/bin/sh", "-c", cmd}, .env = {kPath}}).wait();
    }
    void remove() {
        root(fmt::format("ip netns del {} 2>/dev/null; ip link del {} 2>/dev/null; true", kNetns, kHostIf));
    }

    std::string helper_, error_;
};

// What the tests that run the helper and reach a far host share.
class HelperTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    // One `vmhelper` process per element, in turn, in one shell.
    std::string helper_runs(const std::vector<std::vector<std::string>>& runs) const {
        return vmtest::helper_runs(helper_, runs);
    }
    // The same, as ./vmhelper (the workdir's copy).
    static std::string processes(const std::vector<std::vector<std::string>>& procs) {
        return vmtest::helper_runs("./vmhelper", procs);
    }

    // A far host for this test; false (with the failure added) if it can't be made.
    bool make_far_host() {
        far_host_.emplace(helper_);
        if (far_host_->error().empty()) return true;
        ADD_FAILURE() << far_host_->error();
        return false;
    }

    std::string helper_;
    std::optional<FarHost> far_host_;
};

}  // namespace vmtest
