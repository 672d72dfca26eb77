// Processes outside the job, beyond signals and ptrace:
// their resource limits (prlimit), nice (setpriority, every `which`), I/O
// priority, scheduling policy and CPU affinity, and the /proc files that
// change the same things.
//
// Targets outside the job are `vmhelper victims` started as the test user in
// a session (and process group) of their own, so that PRIO_PGRP names only
// them. The job's side is `vmhelper netproc`.
#include <fmt/format.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <optional>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

// Field N (from 1, as in proc(5)) of /proc/PID/stat; "" if gone.
std::string stat_field(pid_t pid, int n) {
    std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
    auto paren = stat.rfind(')');
    if (paren == npos) return "";
    std::istringstream in(stat.substr(paren + 2));
    std::string f;
    for (int i = 3; i <= n && in >> f; i++) {
    }
    return f;
}
std::string nice_of(pid_t pid) {
    return stat_field(pid, 19);
}
std::string policy_of(pid_t pid) {
    return stat_field(pid, 41);
}

// The value of a "Name:\tvalue" line of /proc/PID/status.
std::string status_field(pid_t pid, const std::string& name) {
    std::istringstream in(read_file(fmt::format("/proc/{}/status", pid)));
    for (std::string l; std::getline(in, l);)
        if (l.starts_with(name + ":")) return l.substr(l.find_first_not_of(" \t", name.size() + 1));
    return "";
}

long ioprio_of(pid_t pid) {
    return syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, pid);
}

// The "Max file size" soft limit of /proc/PID/limits.
std::string fsize_limit(pid_t pid) {
    std::istringstream in(read_file(fmt::format("/proc/{}/limits", pid)));
    for (std::string l; std::getline(in, l);)
        if (l.starts_with("Max file size")) {
            std::istringstream f(l.substr(13));
            std::string soft;
            f >> soft;
            return soft;
        }
    return "";
}

// Everything a victim's scheduling is made of, to compare before and after.
std::string sched_state(pid_t pid) {
    return fmt::format("nice {} policy {} cpus {} ioprio {}", nice_of(pid), policy_of(pid),
                       status_field(pid, "Cpus_allowed_list"), ioprio_of(pid));
}

// r with only its audit lines for (op, target), each checked as a
// well-formed denial by the job. How many there are depends on how often
// the kernel asks (PRIO_USER asks once per process of the user).
struct Denials {
    size_t count = 0;
    ::testing::AssertionResult ok = ::testing::AssertionSuccess();
};
Denials denials(const Result& r, std::string_view op, std::string_view target) {
    Denials d;
    for (const auto& l : r.audit) {
        if (l.str("op") != op || l.str("target") != target) continue;
        d.count++;
        Result one = r;
        one.audit = {l};
        if (auto ok = has_denial(one, op, target, "vmhelper"); !ok) d.ok = ok;
    }
    return d;
}

struct Victims {
    std::optional<Process> proc;
    pid_t pgrp = -1;          // the helper that forked them, also their group
    std::vector<pid_t> pids;  // the victims
};

class ProcSchedTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    // N victims of the test user in a session of their own.
    Victims start_victims(int n) {
        Victims v;
        const std::string file = work() + fmt::format("/victims-{}", ++victim_sets_);
        v.proc.emplace(Process::start({.argv = {"/usr/bin/setsid", helper_, "victims", std::to_string(n), file},
                                       .cwd = work(),
                                       .uid = test_user().uid,
                                       .gid = test_user().gid,
                                       .groups = test_user().groups}));
        if (!wait_until([&] { return exists(file); }, 60)) {
            ADD_FAILURE() << "no victims\n" << v.proc->wait(1).describe();
            return v;
        }
        std::istringstream in(read_file(file));
        std::string secret_addr;
        in >> secret_addr;
        for (pid_t p; in >> p;) v.pids.push_back(p);
        v.pgrp = v.proc->pid();
        EXPECT_EQ(v.pids.size(), static_cast<size_t>(n));
        EXPECT_EQ(getpgid(v.pgrp), v.pgrp) << "the victims are not in a process group of their own";
        return v;
    }

    // A shell of the test user, outside any job, that waits for FILE and
    // then writes a file itself (dash's echo is a builtin): a process that
    // dies of SIGXFSZ if its file size limit was lowered to 0.
    Process start_writer(const std::string& go, const std::string& out) {
        return start_unconfined(
            fmt::format("while [ ! -e {0} ]; do sleep 0.05; done; echo written > {1}; echo survived", go, out));
    }

    std::string helper_;
    int victim_sets_ = 0;
};

// prlimit(2) lowers another process's limits; with RLIMIT_FSIZE at 0 the
// kernel kills it (SIGXFSZ) on its next write.
TEST_F(ProcSchedTest, PrlimitOfAProcessOutsideTheJobIsRefused) {
    Process control_target = start_writer(work() + "/go-control", work() + "/out-control");
    Process target = start_writer(work() + "/go", work() + "/out");
    ASSERT_EQ(fsize_limit(target.pid()), "unlimited");

    const std::string control_op = fmt::format("prlimit,{},0", control_target.pid());
    Result control = run_unconfined("./vmhelper netproc " + control_op + " prlimit,child,1000000");
    ASSERT_EQ(parse_ops(control.out)[control_op], "ok") << control.describe();
    ASSERT_EQ(parse_ops(control.out)["prlimit,child,1000000"], "ok") << control.describe();
    EXPECT_EQ(fsize_limit(control_target.pid()), "0");
    write_file(work() + "/go-control", "");
    Result died = control_target.wait(60);
    EXPECT_EQ(died.status, 128 + SIGXFSZ) << "unconfined, the prlimit should kill the writer\n" << died.describe();
    ASSERT_FALSE(HasFailure());

    // Confined: not on the outsider; on itself, its threads and its own
    // child, always.
    const std::string op = fmt::format("prlimit,{},0", target.pid());
    const std::vector<std::string> own = {"prlimit,0,1000000", "prlimit,self,1000000", "prlimit,thread,1000000",
                                          "prlimit,child,1000000"};
    std::vector<std::string> argv = {helper_, "netproc", op};
    argv.insert(argv.end(), own.begin(), own.end());
    Result r = run({.argv = argv});
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o[op], "prlimit:EPERM") << r.describe();
    for (const auto& own_op : own) EXPECT_EQ(o[own_op], "ok") << own_op << "\n" << r.describe();
    const std::string target_name = fmt::format("pid:{}", target.pid());
    EXPECT_DENIAL(r, "prlimit", target_name, "vmhelper");
    for (const auto& l : r.audit)
        if (l.str("target") == target_name) {
            EXPECT_EQ(l.str("target_comm"), "sh") << l.raw;
        }
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();

    EXPECT_EQ(fsize_limit(target.pid()), "unlimited");
    write_file(work() + "/go", "");
    Result lived = target.wait(60);
    EXPECT_EQ(lived.status, 0) << lived.describe();
    EXPECT_EQ(lived.out, "survived\n") << lived.describe();
    EXPECT_EQ(read_file(work() + "/out"), "written\n");
}

// Every call that changes another process's scheduling, each on a victim of
// its own; then the same on the job's own child, which works.
TEST_F(ProcSchedTest, SchedulingOfProcessesOutsideTheJobIsRefused) {
    struct Way {
        const char* op;  // {} is the target
        const char* denied;
    };
    // SCHED_IDLE last: an unprivileged process can't leave it again.
    const std::vector<Way> ways = {
        {"setpriority,process,{},5", "setpriority:EPERM"}, {"ioprio,process,{}", "ioprio_set:EPERM"},
        {"affinity,{},0", "sched_setaffinity:EPERM"},      {"sched,{},batch", "sched_setscheduler:EPERM"},
        {"setattr,{},5", "sched_setattr:EPERM"},           {"setparam,{}", "sched_setparam:EPERM"},
        {"sched,{},idle", "sched_setscheduler:EPERM"},
    };
    const int n = static_cast<int>(ways.size());
    auto op_on = [](const Way& w, const std::string& target) { return fmt::format(fmt::runtime(w.op), target); };

    Victims c = start_victims(n), v = start_victims(n);
    ASSERT_EQ(c.pids.size(), ways.size());
    ASSERT_EQ(v.pids.size(), ways.size());
    const std::string cpus = status_field(v.pids[0], "Cpus_allowed_list");
    ASSERT_NE(cpus, "0") << "the guest has one CPU: affinity would change nothing";

    std::string cmd = "./vmhelper netproc";
    for (int i = 0; i < n; i++) cmd += " " + op_on(ways[i], std::to_string(c.pids[i]));
    Result control = run_unconfined(cmd);
    Ops co = parse_ops(control.out);
    for (int i = 0; i < n; i++) {
        const std::string op = op_on(ways[i], std::to_string(c.pids[i]));
        EXPECT_EQ(co[op], "ok") << op << "\n" << control.describe();
    }
    EXPECT_EQ(nice_of(c.pids[0]), "5");
    EXPECT_EQ(ioprio_of(c.pids[1]), (2 << 13) | 7);  // best effort, level 7
    EXPECT_EQ(status_field(c.pids[2], "Cpus_allowed_list"), "0");
    EXPECT_EQ(policy_of(c.pids[3]), "3");  // SCHED_BATCH
    EXPECT_EQ(nice_of(c.pids[4]), "5");
    EXPECT_EQ(policy_of(c.pids[6]), "5");  // SCHED_IDLE
    ASSERT_FALSE(HasFailure());

    std::vector<std::string> before;
    for (pid_t p : v.pids) before.push_back(sched_state(p));
    std::vector<std::string> argv = {helper_, "netproc"};
    for (int i = 0; i < n; i++) argv.push_back(op_on(ways[i], std::to_string(v.pids[i])));
    for (const Way& w : ways) argv.push_back(op_on(w, "child"));
    argv.push_back("getnice,child");
    Result r = run({.argv = argv});
    Ops o = parse_ops(r.out);
    for (int i = 0; i < n; i++) {
        SCOPED_TRACE(ways[i].op);
        EXPECT_EQ(o[op_on(ways[i], std::to_string(v.pids[i]))], ways[i].denied) << r.describe();
        EXPECT_EQ(o[op_on(ways[i], "child")], "ok") << r.describe();
        EXPECT_DENIAL(r, "setsched", fmt::format("pid:{}", v.pids[i]), "vmhelper");
        for (const auto& l : r.audit)
            if (l.str("target") == fmt::format("pid:{}", v.pids[i])) {
                EXPECT_EQ(l.str("target_comm"), "victim") << l.raw;
            }
        EXPECT_EQ(sched_state(v.pids[i]), before[i]);
    }
    EXPECT_EQ(o["getnice,child"], "ok 5") << r.describe();
    EXPECT_EQ(r.audit.size(), ways.size()) << r.describe();
}

// setpriority and ioprio_set with PRIO_PGRP or PRIO_USER name many
// processes at once; the kernel asks once per process. The job's own
// change, those outside keep their priority.
TEST_F(ProcSchedTest, PriorityOfAGroupOrUserOnlyReachesTheJob) {
    const uid_t uid = test_user().uid;
    {
        Victims c = start_victims(2);
        ASSERT_EQ(c.pids.size(), 2u);
        const std::string pgrp_op = fmt::format("setpriority,pgrp,{},3", c.pgrp);
        const std::string user_op = fmt::format("setpriority,user,{},4", uid);
        Result control = run_unconfined(fmt::format("./vmhelper netproc {}", pgrp_op));
        EXPECT_EQ(parse_ops(control.out)[pgrp_op], "ok") << control.describe();
        for (pid_t p : c.pids) EXPECT_EQ(nice_of(p), "3");
        control = run_unconfined(fmt::format("./vmhelper netproc {}", user_op));
        EXPECT_EQ(parse_ops(control.out)[user_op], "ok") << control.describe();
        for (pid_t p : c.pids) EXPECT_EQ(nice_of(p), "4");
        ASSERT_FALSE(HasFailure());
    }

    Victims v = start_victims(2);
    ASSERT_EQ(v.pids.size(), 2u);
    std::vector<pid_t> outside = v.pids;
    outside.push_back(v.pgrp);
    std::vector<std::string> before;
    for (pid_t p : outside) before.push_back(sched_state(p));
    const std::vector<std::string> ops = {fmt::format("setpriority,pgrp,{},5", v.pgrp),
                                          fmt::format("setpriority,user,{},6", uid),
                                          fmt::format("ioprio,pgrp,{}", v.pgrp), fmt::format("ioprio,user,{}", uid)};
    std::vector<std::string> argv = {helper_, "netproc", "child"};
    argv.insert(argv.end(), ops.begin(), ops.end());
    argv.insert(argv.end(), {"getnice,child", "getnice,self"});
    Result r = run({.argv = argv});
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o[ops[0]], "setpriority:EPERM") << r.describe();
    EXPECT_EQ(o[ops[1]], "setpriority:EPERM") << r.describe();
    EXPECT_EQ(o[ops[2]], "ioprio_set:EPERM") << r.describe();
    EXPECT_EQ(o[ops[3]], "ioprio_set:EPERM") << r.describe();
    EXPECT_EQ(o["getnice,child"], "ok 6") << "PRIO_USER should reach the job's own processes\n" << r.describe();
    EXPECT_EQ(o["getnice,self"], "ok 6") << r.describe();
    for (size_t i = 0; i < outside.size(); i++) {
        SCOPED_TRACE(fmt::format("pid {}", outside[i]));
        EXPECT_EQ(sched_state(outside[i]), before[i]);
        // At least PRIO_PGRP and PRIO_USER of setpriority asked about it
        // (ioprio_set stops at its first refusal).
        Denials d = denials(r, "setsched", fmt::format("pid:{}", outside[i]));
        EXPECT_GE(d.count, 2u) << r.describe();
        EXPECT_TRUE(d.ok) << r.describe();
    }
    for (const auto& l : r.audit) {
        EXPECT_EQ(l.str("op"), "setsched") << l.raw;
        EXPECT_NE(l.str("target"), fmt::format("pid:{}", o.pids.at(0))) << "the job's own process: " << l.raw;
    }
}

// kill(-1) and kill(-PGRP) signal every process the caller may signal: the
// kernel asks task_kill about each one, and only the job's own answer yes.
TEST_F(ProcSchedTest, BroadcastSignalsMissProcessesOutsideTheJob) {
    Victims v = start_victims(2);
    ASSERT_EQ(v.pids.size(), 2u);
    std::vector<pid_t> outside = v.pids;
    outside.push_back(v.pgrp);
    const std::string group = fmt::format("kill,-{},0", v.pgrp);

    Result control = run_unconfined("./vmhelper netproc kill,-1,0 " + group);
    EXPECT_EQ(parse_ops(control.out)["kill,-1,0"], "ok") << control.describe();
    EXPECT_EQ(parse_ops(control.out)[group], "ok") << control.describe();
    ASSERT_FALSE(HasFailure());

    // kill(-1) reports no EPERM (it counts the processes it tried, and
    // succeeds); kill(-PGRP) fails if no member was signalled.
    const std::string group_term = fmt::format("kill,-{},15", v.pgrp);
    Result r = run({.argv = {helper_, "netproc", "kill,-1,0", group_term, "kill,-1,15"}});
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["kill,-1,0"], "ok") << r.describe();
    EXPECT_EQ(o[group_term], "kill:EPERM") << r.describe();
    EXPECT_EQ(o["kill,-1,15"], "ok") << r.describe();
    for (pid_t p : outside) {
        SCOPED_TRACE(fmt::format("pid {}", p));
        EXPECT_EQ(kill(p, 0), 0) << "the job killed a process outside it";
        Denials d = denials(r, "signal", fmt::format("pid:{}", p));
        EXPECT_EQ(d.count, 3u) << r.describe();
        EXPECT_TRUE(d.ok) << r.describe();
    }
}

// /proc/PID/autogroup sets the nice of the target's whole autogroup (the
// kernel asks task_setnice about the writer, not the target), and
// /proc/PID/oom_score_adj makes it the OOM killer's first choice. Both
// belong to the target's owner; /proc is read-only to a job.
TEST_F(ProcSchedTest, ProcFilesOfProcessesOutsideTheJobAreReadOnly) {
    Victims c = start_victims(1), v = start_victims(1);
    ASSERT_EQ(c.pids.size(), 1u);
    ASSERT_EQ(v.pids.size(), 1u);
    auto cmd = [](pid_t p) {
        return fmt::format(
            "echo 10 > /proc/{0}/autogroup; a=$?; echo 500 > /proc/{0}/oom_score_adj; "
            "echo \"autogroup=$a oom=$?\"",
            p);
    };
    ASSERT_TRUE(exists(fmt::format("/proc/{}/autogroup", c.pids[0]))) << "no CONFIG_SCHED_AUTOGROUP";
    ASSERT_NE(read_file(fmt::format("/proc/{}/autogroup", c.pids[0])).find(" nice 0"), npos);

    Result control = run_unconfined(cmd(c.pids[0]));
    EXPECT_EQ(control.out, "autogroup=0 oom=0\n") << control.describe();
    EXPECT_NE(read_file(fmt::format("/proc/{}/autogroup", c.pids[0])).find(" nice 10"), npos);
    EXPECT_EQ(read_file(fmt::format("/proc/{}/oom_score_adj", c.pids[0])), "500\n");
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd(v.pids[0]));
    EXPECT_EQ(r.out, "autogroup=2 oom=2\n") << r.describe();
    EXPECT_NE(read_file(fmt::format("/proc/{}/autogroup", v.pids[0])).find(" nice 0"), npos);
    EXPECT_EQ(read_file(fmt::format("/proc/{}/oom_score_adj", v.pids[0])), "0\n");
    EXPECT_DENIAL(r, "open_write", fmt::format("/proc/{}/autogroup", v.pids[0]), "sh");
    EXPECT_DENIAL(r, "open_write", fmt::format("/proc/{}/oom_score_adj", v.pids[0]), "sh");
}

}  // namespace
}  // namespace vmtest
