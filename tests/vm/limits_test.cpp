// [limits] and --timeout: a job can't take the machine. A fork bomb stops at
// pids.max, a memory hog is OOM-killed at memory.max, a spinner gets its
// cpu.max share, another job still runs while they do, and a timeout ends
// the whole job with status 124. Each limit hit is one `limit` audit record.
//
// Each test has its control: the same program unconfined does what the
// limit stops (forks past the limit, allocates past it, spins a whole CPU),
// or, for the timeout, the same job without one is still running.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
using Clock = std::chrono::steady_clock;

using LimitsTest = VmTest;

// The policy of the other VM tests, plus a [limits] table. /dev/null is
// writable, as in the default policy, for dd's output.
std::string with_limits(const std::string& limits) {
    return make_policy({.write = {"/dev/null"}, .limits = toml::parse(limits)});
}

// KEY's value in a flat keyed file such as cpu.stat; -1 if it can't be read.
int64_t keyed(const std::string& path, const std::string& key) {
    std::ifstream in(path);
    std::string k;
    int64_t v;
    while (in >> k >> v)
        if (k == key) return v;
    return -1;
}

// Whether the process hasn't exited yet (it is not reaped).
bool running(const Process& p) {
    siginfo_t info{};
    return waitid(P_PID, p.pid(), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

// utime + stime of PID, in seconds.
double cpu_seconds(pid_t pid) {
    std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
    auto close = stat.rfind(')');
    if (close == npos) return -1;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    // Fields 3.. after the comm; utime and stime are fields 14 and 15.
    for (int i = 3; i < 14; i++) rest >> field;
    long utime = 0, stime = 0;
    rest >> utime >> stime;
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU time of a job's cgroup, in seconds.
double cgroup_cpu_seconds(const std::string& cg) {
    return static_cast<double>(keyed(cg + "/cpu.stat", "usage_usec")) / 1e6;
}

// The share of one CPU that `usage` (seconds of CPU, read twice) took over
// `window`.
template <class F>
double cpu_share(F usage, std::chrono::milliseconds window) {
    double u0 = usage();
    auto t0 = Clock::now();
    std::this_thread::sleep_for(window);
    double u1 = usage();
    auto t1 = Clock::now();
    return (u1 - u0) / std::chrono::duration<double>(t1 - t0).count();
}

// Checks that r's audit log has exactly one `limit` record for TARGET, well
// formed, in r's job, with a count of at least MIN_COUNT.
::testing::AssertionResult has_limit(const Result& r, std::string_view target, int64_t min_count = 1) {
    std::vector<const AuditLine*> hits;
    for (const auto& l : r.audit)
        if (l.str("op") == "limit" && l.str("target") == target) hits.push_back(&l);
    if (hits.size() != 1)
        return ::testing::AssertionFailure()
               << "expected exactly one `limit` record with target " << target << ", found " << hits.size();
    const AuditLine& l = *hits.front();
    auto fail = [&](const std::string& what) {
        return ::testing::AssertionFailure() << "audit line " << l.raw << ": " << what;
    };
    if (l.str("verdict") != "deny") return fail("verdict is not \"deny\"");
    if (l.str("mode") != "enforce") return fail("mode is not \"enforce\"");
    if (l.str("job") != r.job) return fail("job is not \"" + r.job + "\"");
    if (l.num("cgroup_id").value_or(0) <= 0) return fail("cgroup_id is missing or not positive");
    if (l.num("count").value_or(0) < min_count) return fail(fmt::format("count is less than {}", min_count));
    static const std::regex time_re(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)");
    if (!std::regex_match(l.str("time").value_or(""), time_re)) return fail("time is not YYYY-MM-DDTHH:MM:SS.uuuuuuZ");
    return ::testing::AssertionSuccess();
}
#define EXPECT_LIMIT(r, ...) EXPECT_TRUE(has_limit((r), __VA_ARGS__)) << (r).describe()

bool has_any_limit(const Result& r) {
    for (const auto& l : r.audit)
        if (l.str("op") == "limit") return true;
    return false;
}

// Forks N children that sleep, or until fork fails; prints how many it
// forked and the errno name of the failure ("none"), then reaps them.
constexpr const char* kForker = R"(import errno, os, sys, time
kids, err = [], "none"
for i in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    kids.append(pid)
print(len(kids), err, flush=True)
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
)";

// A fork bomb that never gives up: only for confined jobs.
constexpr const char* kBomb = R"(import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(300)
            os._exit(0)
    except OSError:
        time.sleep(0.01)
)";

constexpr const char* kSpin = "while :; do :; done";
// 256 MiB, every page written (read(2) from /dev/zero fills the buffer).
constexpr const char* kHog = "dd if=/dev/zero of=/dev/null bs=256M count=1";

TEST_F(LimitsTest, AForkBombStopsAtPidsMax) {
    write_file(work() + "/forker.py", kForker);
    // Control: the same user forks 64 children without confine.
    Result control = run_unconfined("python3 forker.py 64");
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_EQ(control.out, "64 none\n") << control.describe();

    // pids.max 32: python itself and 31 children; the 32nd fork fails.
    Result r = run({.policy = with_limits("pids = 32\n"), .argv = {"/usr/bin/python3", "forker.py", "64"}});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "31 EAGAIN\n") << r.describe();
    EXPECT_LIMIT(r, "pids");
}

TEST_F(LimitsTest, AMemoryHogIsOomKilled) {
    Result control = run_unconfined(kHog);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_NE(control.err.find("1+0 records in"), npos) << control.describe();

    Result r = run({.policy = with_limits("memory = \"64M\"\nswap = \"0\"\n"),
                    .argv = {"/bin/sh", "-c", std::string("exec ") + kHog}});
    EXPECT_EQ(r.status, 137) << r.describe();
    EXPECT_EQ(r.err.find("records in"), npos) << r.describe();
    EXPECT_LIMIT(r, "memory");
}

TEST_F(LimitsTest, ASpinnerGetsItsCpuShare) {
    using namespace std::chrono_literals;
    // Control: unconfined, the spinner takes a whole CPU (of two).
    Process spinner = start_unconfined(kSpin);
    double control = cpu_share([&] { return cpu_seconds(spinner.pid()); }, 2000ms);
    kill(spinner.pid(), SIGKILL);
    EXPECT_GT(control, 0.6) << "the unconfined spinner got " << control << " of a CPU";

    Started job = start({.policy = with_limits("cpu = 0.25\n"), .argv = {"/bin/sh", "-c", kSpin}});
    std::string cg;
    ASSERT_TRUE(wait_until([&] { return !(cg = job_cgroup(job.job)).empty() && cgroup_cpu_seconds(cg) > 0; }, 60))
        << finish(job, 1).describe();
    EXPECT_EQ(read_file(cg + "/cpu.max"), "25000 100000\n");
    double share = cpu_share([&] { return cgroup_cpu_seconds(cg); }, 2000ms);
    EXPECT_LT(share, 0.4) << "the job got " << share << " of a CPU under cpu = 0.25";
    EXPECT_GT(share, 0.1) << "the job got " << share << " of a CPU under cpu = 0.25";

    kill(job.proc->pid(), SIGTERM);  // forwarded to the job's shell
    Result r = finish(job);
    EXPECT_EQ(r.status, 143) << r.describe();
    EXPECT_LIMIT(r, "cpu");
}

// While a fork bomb, a memory hog and a spinner run, each at its limit,
// another job (under the default policy) starts and finishes normally.
TEST_F(LimitsTest, AnotherJobRunsWhileHogsRunAtTheirLimits) {
    write_file(work() + "/bomb.py", kBomb);
    Started bomb = start({.policy = with_limits("pids = 64\n"), .argv = {"/usr/bin/python3", "bomb.py"}});
    Started hog = start({.policy = with_limits("memory = \"64M\"\nswap = \"0\"\n"),
                         .argv = {"/bin/sh", "-c", fmt::format("while :; do {} 2>/dev/null; done", kHog)}});
    Started spinner = start(
        {.policy = with_limits("cpu = 0.25\n"), .argv = {"/bin/sh", "-c", fmt::format("{0} & {0} & {0}", kSpin)}});
    std::string bomb_cg, hog_cg, spin_cg;
    // Each is at its limit: the counters say so. Also the controls: without
    // these counters moving, nothing here would be hogging anything.
    auto counts = [&] {
        return std::tuple{keyed(bomb_cg + "/pids.events", "max"), keyed(hog_cg + "/memory.events", "oom_kill"),
                          keyed(spin_cg + "/cpu.stat", "nr_throttled")};
    };
    ASSERT_TRUE(wait_until(
        [&] {
            bomb_cg = job_cgroup(bomb.job), hog_cg = job_cgroup(hog.job), spin_cg = job_cgroup(spinner.job);
            auto [forks, kills, throttled] = counts();
            return forks > 0 && kills > 0 && throttled > 0;
        },
        90))
        << finish(bomb, 1).describe() << finish(hog, 1).describe() << finish(spinner, 1).describe();
    // A fork being refused counts for a moment too.
    int pids = std::stoi("0" + read_file(bomb_cg + "/pids.current"));
    EXPECT_GE(pids, 60);
    EXPECT_LE(pids, 65);
    auto before = counts();

    auto t0 = Clock::now();
    Result other = run({.argv = {"/bin/sh", "-c", "echo hello from $(id -un); cat /proc/self/cgroup"}});
    double took = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(other.status, 0) << other.describe();
    EXPECT_NE(other.out.find(fmt::format("hello from {}\n", kUser)), npos) << other.describe();
    EXPECT_NE(other.out.find("/" + other.job + "\n"), npos) << other.describe();
    EXPECT_FALSE(has_any_limit(other)) << other.describe();
    EXPECT_LT(took, 30) << "the other job took " << took << " s";

    // And they kept at it: each counter moves past where it was before the
    // other job (a hog's round, fault 64M then die, can outlast that job).
    EXPECT_TRUE(wait_until(
        [&] {
            auto [forks, kills, throttled] = counts();
            return forks > std::get<0>(before) && kills > std::get<1>(before) && throttled > std::get<2>(before);
        },
        60))
        << "pids.events max, memory.events oom_kill, cpu.stat nr_throttled stopped at " << std::get<0>(counts()) << ", "
        << std::get<1>(counts()) << ", " << std::get<2>(counts());

    for (Started* s : {&bomb, &hog, &spinner}) kill(s->proc->pid(), SIGTERM);
    Result b = finish(bomb), h = finish(hog), s = finish(spinner);
    EXPECT_EQ(b.status, 143) << b.describe();
    EXPECT_EQ(h.status, 143) << h.describe();
    EXPECT_EQ(s.status, 143) << s.describe();
    EXPECT_LIMIT(b, "pids");
    EXPECT_LIMIT(h, "memory");
    EXPECT_LIMIT(s, "cpu");
    for (const std::string& cg : {bomb_cg, hog_cg, spin_cg}) EXPECT_FALSE(exists(cg)) << cg << " outlived its job";
}

// `--timeout` beats the policy's timeout. At the deadline the job's main
// process gets SIGTERM; it dies, and a child that ignores SIGTERM is killed
// with the rest of the job.
TEST_F(LimitsTest, TimeoutEndsTheJobWith124) {
    const std::string policy = with_limits("timeout = \"1h\"\n");
    // The child ignores SIGTERM (ignored signals stay ignored across exec);
    // its pid goes to the file named by $1.
    const std::string cmd = "(trap '' TERM; exec sleep 60) & echo $! > $1; exec sleep 60";

    // Control: the same job without --timeout, under the policy's hour.
    Started control = start({.policy = policy, .argv = {"/bin/sh", "-c", cmd, "sh", "control.pid"}});
    ASSERT_TRUE(wait_until([&] { return !read_file(work() + "/control.pid").empty(); }, 60))
        << finish(control, 1).describe();

    Started job =
        start({.policy = policy, .args = {"--timeout", "2s"}, .argv = {"/bin/sh", "-c", cmd, "sh", "bg.pid"}});
    pid_t bg = 0;
    ASSERT_TRUE(wait_until([&] { return !read_file(work() + "/bg.pid").empty(); }, 60)) << finish(job, 1).describe();
    auto started = Clock::now();
    bg = std::stoi(read_file(work() + "/bg.pid"));
    EXPECT_TRUE(alive(bg));
    Result r = finish(job, 60);
    double took = std::chrono::duration<double>(Clock::now() - started).count();
    EXPECT_EQ(r.status, 124) << r.describe();
    // The main process died of SIGTERM: no grace period was needed.
    EXPECT_GT(took, 1.0) << r.describe();
    EXPECT_LT(took, 5) << r.describe();
    EXPECT_FALSE(alive(bg)) << "the child that ignores SIGTERM (pid " << bg << ") outlived the job";
    EXPECT_LIMIT(r, "timeout");
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();

    // The control started first and has no timeout: it is still running.
    EXPECT_TRUE(running(*control.proc)) << finish(control, 1).describe();
    kill(control.proc->pid(), SIGTERM);
    Result c = finish(control);
    EXPECT_EQ(c.status, 143) << c.describe();
    EXPECT_FALSE(has_any_limit(c)) << c.describe();
}

// A main process that ignores SIGTERM gets the grace period (5 s), then the
// whole job is killed. The policy's own timeout, in whole seconds.
TEST_F(LimitsTest, AJobThatIgnoresSigtermIsKilledAfterTheGrace) {
    Started job = start({.policy = with_limits("timeout = 2\n"),
                         .argv = {"/bin/sh", "-c", "trap '' TERM; echo $$ > main.pid; sleep 60; echo survived"}});
    ASSERT_TRUE(wait_until([&] { return !read_file(work() + "/main.pid").empty(); }, 60)) << finish(job, 1).describe();
    auto started = Clock::now();
    pid_t main_pid = std::stoi(read_file(work() + "/main.pid"));
    Result r = finish(job, 60);
    double took = std::chrono::duration<double>(Clock::now() - started).count();
    EXPECT_EQ(r.status, 124) << r.describe();
    EXPECT_EQ(r.out.find("survived"), npos) << r.describe();
    EXPECT_GT(took, 6.0) << r.describe();  // 2 s, then 5 s of grace
    EXPECT_LT(took, 15) << r.describe();
    EXPECT_FALSE(alive(main_pid));
    EXPECT_LIMIT(r, "timeout");
}

TEST_F(LimitsTest, AJobThatFinishesInTimeKeepsItsStatus) {
    Result r = run({.policy = with_limits("timeout = \"30s\"\n"),
                    .args = {"--timeout", "1m"},
                    .argv = {"/bin/sh", "-c", "exit 3"}});
    EXPECT_EQ(r.status, 3) << r.describe();
    EXPECT_FALSE(has_any_limit(r)) << r.describe();
    // 124 of the job's own is its own too.
    r = run({.args = {"--timeout", "1m"}, .argv = {"/bin/sh", "-c", "exit 124"}});
    EXPECT_EQ(r.status, 124) << r.describe();
    EXPECT_FALSE(has_any_limit(r)) << r.describe();
}

TEST_F(LimitsTest, TheJobsCgroupCarriesItsLimits) {
    // The job reads its own cgroup's files: what it sees is what it got
    // from its first instruction on.
    Result r = run({.policy = with_limits("memory = \"96M\"\nswap = \"0\"\npids = 100\ncpu = 1.5\n"),
                    .argv = {"/bin/sh", "-c",
                             "cg=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup); "
                             "cat $cg/memory.max $cg/memory.swap.max $cg/pids.max $cg/cpu.max"}});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, fmt::format("{}\n0\n100\n150000 100000\n", 96 << 20)) << r.describe();

    // "max" and absent write nothing: the kernel's defaults stay.
    r = run({.policy = with_limits("memory = \"max\"\npids = \"max\"\n"),
             .argv = {"/bin/sh", "-c",
                      "cg=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup); "
                      "cat $cg/memory.max $cg/memory.swap.max $cg/pids.max $cg/cpu.max"}});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "max\nmax\nmax\nmax 100000\n") << r.describe();
}

// Fail closed: a limit that can't be enforced keeps the job from starting,
// and the message names the controller or file and what to do. Simulated in
// a private mount namespace: the build's parent has memory turned off for
// its children, and a read-only file stands in for either the parent's
// cgroup.subtree_control (memory can't be turned back on) or the root's
// cgroup.controllers (the kernel has no memory controller, as with
// cgroup_disable=memory).
TEST_F(LimitsTest, ALimitThatCantBeEnforcedStopsTheJob) {
    // The build's parent: the job's cgroup's parent.
    Result probe = run_confined(make_policy({}), "cut -d: -f3 /proc/self/cgroup");
    ASSERT_EQ(probe.status, 0) << probe.describe();
    std::string rel = probe.out.substr(0, probe.out.find('\n'));
    const std::string root = cgroup2_mount();
    const std::string parent = root + rel.substr(0, rel.rfind('/'));
    ASSERT_TRUE(exists(parent + "/cgroup.subtree_control")) << parent;
    const std::string fake = at("fake");
    write_file(fake, "cpu pids\n");
    const std::string no_limit = at("no-limit.toml"), limit = at("limit.toml");
    write_file(no_limit, make_policy({}));
    write_file(limit, with_limits("memory = \"1G\"\n"));

    // confine run, in a mount namespace where FAKE is mounted read-only over
    // each of TARGETS and memory is off below the build's parent.
    auto run_with = [&](const std::vector<std::string>& targets, const std::string& policy, const std::string& marker) {
        std::string mounts;
        for (const auto& t : targets)
            mounts += fmt::format("mount --bind {0} {1} && mount -o remount,bind,ro {1} && ", fake, t);
        return run_root(fmt::format(
            "echo -memory > {0}/cgroup.subtree_control && unshare -m sh -c '{1} exec {2} run --user {3} --workdir {4} "
            "--policy {5} -- touch {6}'",
            parent, mounts, confine_bin(), kUser, work(), policy, marker));
    };
    struct Case {
        std::vector<std::string> targets;
        std::vector<std::string> says;
    };
    const std::string subtree_control = parent + "/cgroup.subtree_control";
    const Case cases[] = {
        {{subtree_control}, {"writing '+memory' to " + subtree_control + ": Read-only file system"}},
        {{subtree_control, root + "/cgroup.controllers"},
         {"the kernel offers cgroup v2 no memory controller (it is not in " + root + "/cgroup.controllers)",
          "cgroup_disable=memory"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.targets.back());
        // Control: without a memory limit the same job runs.
        Result control = run_with(c.targets, no_limit, "control-ran");
        EXPECT_EQ(control.status, 0) << control.describe();
        EXPECT_TRUE(exists(work() + "/control-ran")) << control.describe();
        unlink((work() + "/control-ran").c_str());

        Result r = run_with(c.targets, limit, "ran");
        EXPECT_EQ(r.status, 125) << r.describe();
        EXPECT_FALSE(exists(work() + "/ran")) << "the job ran without its memory limit";
        std::vector<std::string> says = c.says;
        says.insert(says.end(), {"[limits] memory can't be enforced; the job was not started", "memory = \"max\""});
        for (const std::string& s : says)
            EXPECT_NE(r.err.find(s), npos) << "the message doesn't say " << s << "\n" << r.describe();
    }

    // Outside the namespace, the next job turns memory back on.
    Result after = run_confined(with_limits("memory = \"1G\"\n"), "touch ran");
    EXPECT_EQ(after.status, 0) << after.describe();
    EXPECT_TRUE(exists(work() + "/ran"));
}

}  // namespace
}  // namespace vmtest
