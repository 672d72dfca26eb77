// The audit log: one well-formed JSON line per denial, no more, no less.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <regex>

#include "harness.h"

namespace vmtest {
namespace {

using AuditTest = VmTest;

TEST_F(AuditTest, OneLinePerDenial) {
    // Exactly two denied accesses, with allowed ones around them.
    const std::string cmd =
        fmt::format("cat /etc/hostname >/dev/null; cat {}; cat {}; echo ok > f", kSshKey, kClaudeCreds);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();

    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();  // the last command's status
    ASSERT_EQ(r.audit.size(), 2u) << r.describe();
    EXPECT_DENIAL(r, "open_read", kSshKey, "cat");
    EXPECT_DENIAL(r, "open_read", kClaudeCreds, "cat");

    // Each line is one flat JSON object with every field of the contract,
    // and both come from the same job cgroup but different processes.
    static const std::regex object(R"(^\{"[a-z_]+":.*\}$)");
    for (const auto& l : r.audit) {
        EXPECT_TRUE(std::regex_match(l.raw, object)) << l.raw;
        for (const char* k : {"time", "job", "comm", "op", "target", "verdict", "mode"})
            EXPECT_TRUE(l.str(k)) << "no string field " << k << " in " << l.raw;
        for (const char* k : {"cgroup_id", "pid", "tgid", "uid"})
            EXPECT_TRUE(l.num(k)) << "no integer field " << k << " in " << l.raw;
    }
    EXPECT_EQ(r.audit[0].num("cgroup_id"), r.audit[1].num("cgroup_id"));
    EXPECT_NE(r.audit[0].num("pid"), r.audit[1].num("pid"));
}

TEST_F(AuditTest, TargetsAreJsonEscaped) {
    const std::string weird = std::string(kUserHome) + "/we\"ird\\na\tme";
    write_file(weird, "secret\n");
    Result r = run({.argv = {"/bin/cat", weird}});
    unlink(weird.c_str());
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "open_read", weird, "cat");
    for (const auto& l : r.audit) EXPECT_EQ(l.raw.find('\t'), std::string::npos) << "raw control byte in " << l.raw;
}

TEST_F(AuditTest, AuditModeAllowsAndLogsWouldBeDenials) {
    Result r = run({.args = {"--mode", "audit"}, .argv = {"/bin/cat", kSshKey}});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, std::string(kSshSecret) + "\n") << r.describe();
    ASSERT_EQ(r.audit.size(), 1u) << r.describe();
    const AuditLine& l = r.audit[0];
    EXPECT_EQ(l.str("op"), "open_read") << l.raw;
    EXPECT_EQ(l.str("target"), kSshKey) << l.raw;
    EXPECT_EQ(l.str("verdict"), "allow") << l.raw;
    EXPECT_EQ(l.str("mode"), "audit") << l.raw;
    EXPECT_EQ(l.str("job"), r.job) << l.raw;
}

// Events never block the job: a flood of denials either reaches the log or
// is counted in "lost" records, one or the other for every attempt.
TEST_F(AuditTest, EveryDenialIsLoggedOrCountedAsLost) {
    constexpr int kAttempts = 1500;
    const std::string cmd = fmt::format(
        "/usr/bin/python3 -c 'import os\nn = 0\nfor i in range({}):\n"
        "    try: os.close(os.open(\"{}\", os.O_RDONLY))\n    except PermissionError: n += 1\nprint(n)'",
        kAttempts, kSshKey);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_EQ(control.out, "0\n") << control.describe();

    Result r = run_confined("", cmd);
    ASSERT_EQ(r.status, 0) << r.describe();
    ASSERT_EQ(r.out, fmt::format("{}\n", kAttempts)) << r.describe();
    int64_t logged = 0, lost = 0;
    for (const auto& l : r.audit) {
        if (l.str("op") == "lost")
            lost += l.num("count").value_or(0);
        else if (l.str("op") == "open_read" && l.str("target") == kSshKey)
            // A line stands for one attempt, or for N more ("repeats":N).
            logged += l.num("repeats").value_or(1);
    }
    EXPECT_EQ(logged + lost, kAttempts) << "logged " << logged << ", lost " << lost;
    EXPECT_GT(logged, 0);
}

// Rings are a pool that jobs reuse. A job whose confine was killed goes on
// writing into its ring, which the next job gets: none of it may reach the
// next job's log (its own denial does).
TEST_F(AuditTest, ARingsNextJobNeverLogsThePreviousJobsDenials) {
    const std::string secret = std::string(kUserHome) + "/secret-of-the-first-job";
    write_file(secret, "secret\n");
    const std::string deny_50 = fmt::format("for i in $(seq 50); do cat {} 2>/dev/null; done", secret);
    // Controls: unconfined, both files read.
    ASSERT_EQ(run_unconfined(fmt::format("cat {} {}", secret, kSshKey)).status, 0);

    Started first = start({.argv = {"/bin/sh", "-c",
                                    fmt::format("({0}; touch killed-wait; while [ ! -e go ]; do sleep 0.1; done; {0}; "
                                                "touch written; sleep 600) & wait",
                                                deny_50)}});
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/killed-wait"); }, 60)) << finish(first, 1).describe();
    const std::string first_cg = job_cgroup(first.job);
    ASSERT_FALSE(first_cg.empty());
    // Its confine dies (its slot's lock with it, and the job's first
    // process, by its parent-death signal); the job's other process writes
    // 50 more events into the ring, which no one drains.
    kill(first.proc->pid(), SIGKILL);
    ASSERT_TRUE(wait_until([&] { return !alive(first.proc->pid()); }, 30));
    write_file(work() + "/go", "");
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/written"); }, 60)) << "the first job never wrote again";

    Result next = run_confined("", fmt::format("cat {} 2>/dev/null; true", kSshKey));
    EXPECT_EQ(next.status, 0) << next.describe();
    EXPECT_DENIAL(next, "open_read", kSshKey, "cat");
    for (const AuditLine& l : next.audit) EXPECT_NE(l.str("target"), secret) << l.raw;
    EXPECT_EQ(
        run_root(fmt::format("echo 1 >{0}/cgroup.kill; while ! rmdir {0} 2>/dev/null; do sleep 0.1; done", first_cg))
            .status,
        0);
    finish(first, 1);
}

}  // namespace
}  // namespace vmtest
