// Tests of policy/intersect.cpp: a job's policy within the daemon's ceiling.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "policy/policy.h"

namespace confine::policy {
namespace {

constexpr uint8_t kRX = kRead | kExec, kRWX = kRead | kWrite | kExec;

Compiled compiled(std::string_view toml) {
    auto p = parse("version = 1\n" + std::string(toml), "p.toml");
    if (!p) {
        for (const auto& d : p.error()) ADD_FAILURE() << d.str();
        return {};
    }
    auto c = compile(*p, {"/nonexistent/w", "/nonexistent/h", "/nonexistent/t", "/nonexistent/u"});
    if (!c) {
        ADD_FAILURE() << c.error().message;
        return {};
    }
    return *c;
}

// The claim intersect.cpp rests on: at every path, the result grants what
// both sides grant, whatever their prefixes.
TEST(Intersect, EveryPathGetsWhatBothSidesGrant) {
    std::mt19937 rng(20261201);
    const std::vector<std::string> names = {"a", "b", "ab", "c"};
    auto random_path = [&](size_t max_depth) {
        std::string p;
        for (size_t d = rng() % (max_depth + 1); d > 0; --d) p += "/" + names[rng() % names.size()];
        return p.empty() ? std::string("/") : p;
    };
    auto random_table = [&] {
        Compiled c;
        std::set<std::string> prefixes;  // compile() sorts them
        for (int i = rng() % 8; i > 0; --i) prefixes.insert(random_path(3));
        for (const std::string& p : prefixes) c.fs.push_back({p, static_cast<uint8_t>(rng() % 8)});
        return c;
    };
    // The definition access_at's lookup of each parent must agree with.
    auto longest_match = [](const Compiled& c, const std::string& path) {
        const FsEntry* best = nullptr;
        for (const FsEntry& e : c.fs)
            if (covers(e.prefix, path) && (!best || e.prefix.size() > best->prefix.size())) best = &e;
        return best ? best->access : 0;
    };
    for (int round = 0; round < 2000; ++round) {
        Compiled job = random_table(), ceiling = random_table();
        Compiled both = intersect(job, ceiling);
        for (int i = 0; i < 30; ++i) {
            std::string path = random_path(5);
            ASSERT_EQ(longest_match(both, path), longest_match(job, path) & longest_match(ceiling, path))
                << "at " << path << " in round " << round;
            for (const Compiled* c : {&job, &ceiling, &both})
                ASSERT_EQ(access_at(*c, path), longest_match(*c, path)) << "at " << path << " in round " << round;
        }
    }
}

TEST(Intersect, TheCeilingsDenyAndDenyWriteHoldUnderAJobsWiderGrant) {
    Compiled ceiling = compiled(R"(
        [filesystem]
        read = ["/usr", "{user_home}"]
        write = ["{workdir}", "{home}"]
        deny = ["{user_home}/.ssh"]
        deny_write = ["{workdir}/.git/hooks"]
    )");
    Compiled job = compiled(R"(
        [filesystem]
        read = ["/"]
        write = ["{workdir}", "{user_home}", "/etc"]
    )");
    Compiled both = intersect(job, ceiling);
    EXPECT_EQ(access_at(both, "/nonexistent/u/.ssh/id_ed25519"), 0);
    EXPECT_EQ(access_at(both, "/nonexistent/u/notes"), kRX);  // the job's write, capped at the ceiling's read
    EXPECT_EQ(access_at(both, "/nonexistent/w/.git/hooks/pre-commit"), kRX);
    EXPECT_EQ(access_at(both, "/nonexistent/w/src/main.c"), kRWX);
    EXPECT_EQ(access_at(both, "/etc/passwd"), 0);  // the ceiling grants nothing there
    EXPECT_EQ(access_at(both, "/usr/bin/git"), kRX);
    // The read-only hooks directory can't be carried away by a rename.
    EXPECT_TRUE(std::ranges::count(both.guards, "/nonexistent/w/.git"));
    EXPECT_TRUE(std::ranges::count(both.guards, "/nonexistent/w"));
}

TEST(Intersect, AJobGetsNoMoreThanItAsksFor) {
    Compiled ceiling = compiled(R"(
        [filesystem]
        read = ["/"]
        write = ["/nonexistent"]
        [network]
        connect = ["tcp://127.0.0.1:3128"]
        [process]
        user_namespaces = true
    )");
    Compiled job = compiled(R"(
        [filesystem]
        read = ["/usr"]
        write = ["{workdir}"]
    )");
    Compiled both = intersect(job, ceiling);
    EXPECT_EQ(access_at(both, "/etc/passwd"), 0);
    EXPECT_EQ(access_at(both, "/usr/bin/git"), kRX);
    EXPECT_EQ(access_at(both, "/nonexistent/w/x"), kRWX);
    EXPECT_TRUE(both.connect.empty());
    EXPECT_FALSE(both.user_namespaces);
    // "/" and "/nonexistent" hold readable entries of their own: not merely listable.
    EXPECT_TRUE(both.listable.empty());
}

TEST(Intersect, ListableDirectoriesAreTheWayDownToWhatBothAllow) {
    Compiled ceiling = compiled(R"(
        [filesystem]
        read = ["/usr", "/opt/tools"]
    )");
    Compiled job = compiled(R"(
        [filesystem]
        read = ["/usr/lib", "/opt"]
    )");
    Compiled both = intersect(job, ceiling);
    EXPECT_EQ(both.listable, (std::vector<std::string>{"/"}));
    EXPECT_EQ(access_at(both, "/opt/other"), 0);
    EXPECT_EQ(access_at(both, "/opt/tools/x"), kRX);
    EXPECT_EQ(access_at(both, "/usr/bin"), 0);
}

TEST(Intersect, DestinationsFamiliesAndNamesMustBeInBoth) {
    Compiled ceiling = compiled(R"(
        [network]
        connect = ["tcp://127.0.0.1:3128", "unix:/run/a.sock"]
        bind = ["tcp://10.0.0.1:0"]
        domains = ["*.github.com", "api.anthropic.com"]
        families = ["netlink"]
    )");
    Compiled job = compiled(R"(
        [network]
        connect = ["tcp://127.0.0.1:3128", "tcp://127.0.0.1:3129", "unix:/run/a.sock", "unix:/run/b.sock"]
        bind = ["tcp://10.0.0.1:8080", "tcp://10.0.0.2:8080"]
        domains = ["api.github.com", "*.api.github.com", "github.com", "api.anthropic.com:8443",
                   "api.anthropic.com", "*.anthropic.com"]
        families = ["netlink", "packet"]
    )");
    Compiled both = intersect(job, ceiling);
    std::vector<std::string> connect, bind, domains;
    for (const auto& e : both.connect) connect.push_back(e.text);
    for (const auto& e : both.bind) bind.push_back(e.text);
    for (const auto& d : both.domains)
        for (uint16_t port : d.ports) domains.push_back(d.name + ":" + std::to_string(port));
    EXPECT_EQ(connect, (std::vector<std::string>{"tcp://127.0.0.1:3128", "unix:/run/a.sock"}));
    EXPECT_EQ(bind, (std::vector<std::string>{"tcp://10.0.0.1:8080"}));
    EXPECT_EQ(domains,
              (std::vector<std::string>{"api.github.com:80", "api.github.com:443", "*.api.github.com:80",
                                        "*.api.github.com:443", "api.anthropic.com:80", "api.anthropic.com:443"}));
    EXPECT_TRUE(both.families & (1ull << AF_NETLINK));
    EXPECT_FALSE(both.families & (1ull << AF_PACKET));
    EXPECT_TRUE(both.families & (1ull << AF_UNIX));
}

TEST(Intersect, AuditModeLimitsAndTimeout) {
    Compiled ceiling = compiled(R"(
        [limits]
        memory = "1G"
        pids = 100
        timeout = "1h"
    )");
    Compiled job = compiled(R"(
        mode = "audit"
        [limits]
        memory = "2G"
        cpu = 1
        timeout = "2h"
    )");
    Compiled both = intersect(job, ceiling);
    EXPECT_EQ(both.mode, Mode::Enforce);  // the ceiling enforces: a client can't opt out
    EXPECT_EQ(both.limits.memory, 1ull << 30);
    EXPECT_EQ(both.limits.pids, 100u);
    EXPECT_EQ(both.limits.cpu_quota_us, kCpuPeriodUs);
    EXPECT_EQ(both.limits.timeout_s, 3600u);
    ceiling.mode = Mode::Audit;
    EXPECT_EQ(intersect(job, ceiling).mode, Mode::Audit);
}

}  // namespace
}  // namespace confine::policy
