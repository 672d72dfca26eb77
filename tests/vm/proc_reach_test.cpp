// Processes outside the job are out of its reach: ptrace,
// process_vm_readv, their /proc files and signals (kill, broadcast
// signals, SIGIO) aimed at the same user's processes and at confine
// itself; their resource limits (prlimit), nice (setpriority, every
// `which`), I/O priority, scheduling policy and CPU affinity, and the /proc
// files that change the same things. The job's own processes stay within
// its reach.
//
// Targets outside the job are `vmhelper victims`: children of one helper
// process started as the test user (or root), named "victim"; in a session
// (and process group) of their own where PRIO_PGRP must name only them.
// The job's side is `vmhelper` (one process, many operations, an exact
// errno each).
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
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

// `vmhelper victims`: N processes outside any job, the helper that forked
// them, and the address of the secret string in their memory.
struct Victims {
    std::optional<Process> proc;
    std::string secret_addr;
    pid_t pgrp = -1;          // with own_session: the helper that forked them, also their group
    std::vector<pid_t> pids;  // the victims
};
struct VictimsOf {
    bool as_user = true;       // else root
    bool own_session = false;  // a session (and process group) of their own
};

class ProcReachTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    Victims start_victims(int n, VictimsOf of = {}) {
        Victims v;
        const std::string file = work() + fmt::format("/victims-{}", ++victim_sets_);
        Process::Options o{.env = {fmt::format("VICTIM_ENV=victim-env-{}", getpid())}, .cwd = work()};
        if (of.own_session) o.argv.push_back("/usr/bin/setsid");
        o.argv.insert(o.argv.end(), {helper_, fmt::format("victims,{},{}", n, file)});
        if (of.as_user) {
            o.uid = test_user().uid;
            o.gid = test_user().gid;
            o.groups = test_user().groups;
        }
        v.proc.emplace(Process::start(o));
        if (!wait_until([&] { return exists(file); }, 60)) {
            ADD_FAILURE() << "no victims\n" << v.proc->wait(1).describe();
            return v;
        }
        std::istringstream in(read_file(file));
        in >> v.secret_addr;
        for (pid_t p; in >> p;) v.pids.push_back(p);
        EXPECT_EQ(v.pids.size(), static_cast<size_t>(n));
        if (of.own_session) {
            v.pgrp = v.proc->pid();
            EXPECT_EQ(getpgid(v.pgrp), v.pgrp) << "the victims are not in a process group of their own";
        }
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

// ---- ptrace, memory, /proc files and signals -------------------------------------------

TEST_F(ProcReachTest, ProcessesOutsideTheJobAreOutOfReach) {
    // Yama (scope 1) would refuse ptrace of a non-child even unconfined.
    Sysctl yama("/proc/sys/kernel/yama/ptrace_scope", "0");
    Victims v = start_victims(9);
    ASSERT_EQ(v.pids.size(), 9u);
    const auto& p = v.pids;
    auto ops_on = [&](pid_t killed) {
        return std::vector<std::string>{
            fmt::format("ptrace,{}", p[0]),
            fmt::format("vmread,{},{}", p[1], v.secret_addr),
            fmt::format("scan,/proc/{}/environ,VICTIM_ENV=victim-env-", p[2]),
            fmt::format("scan,/proc/{}/mem", p[3]),
            fmt::format("scan,/proc/{}/maps,vmhelper", p[4]),
            fmt::format("readlink,/proc/{}/fd/0", p[5]),
            fmt::format("kill,{},0", p[6]),
            fmt::format("kill,{},15", killed),
        };
    };

    // Control: as the same user, outside any job, all of it works.
    std::vector<std::string> control_ops = ops_on(p[7]);
    std::string cmd = "./vmhelper";
    for (const auto& op : control_ops) cmd += " " + op;
    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& op : control_ops) EXPECT_TRUE(c[op].starts_with("ok")) << op << ": " << c[op];
    EXPECT_TRUE(wait_until([&] { return !alive(p[7]); }, 10)) << "the unconfined SIGTERM did not kill";
    ASSERT_FALSE(HasFailure()) << control.describe();

    // Confined: none of it; on its own child, all of it. confine itself
    // (the parent of the job's main process, root) is out of reach too.
    std::vector<std::string> ops = ops_on(p[8]);
    std::vector<std::string> argv = {helper_};
    argv.insert(argv.end(), ops.begin(), ops.end());
    argv.push_back("ownchild");
    argv.insert(argv.end(), {"ptrace,ppid", "kill,ppid,0", "kill,ppid,18"});
    Result r = run({.argv = argv});
    Ops o = parse_ops(r.out);
    const std::vector<std::string> expected = {"ptrace:EPERM", "process_vm_readv:EPERM", "open:EACCES", "open:EACCES",
                                               "open:EACCES",  "readlink:EACCES",        "kill:EPERM",  "kill:EPERM"};
    for (size_t i = 0; i < ops.size(); i++) EXPECT_EQ(o[ops[i]], expected[i]) << ops[i] << "\n" << r.describe();
    EXPECT_EQ(o["ownchild"], "ok") << r.describe();
    for (const char* op : {"ptrace,ppid", "kill,ppid,0", "kill,ppid,18"})
        EXPECT_NE(o[op], "ok") << op << "\n" << r.describe();
    EXPECT_TRUE(alive(p[8])) << "the job killed a process outside it";

    const char* ops_audited[] = {"ptrace", "ptrace", "ptrace", "ptrace", "ptrace", "ptrace", "signal", "signal"};
    const pid_t targets[] = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[8]};
    for (size_t i = 0; i < std::size(targets); i++) {
        const std::string target = fmt::format("pid:{}", targets[i]);
        EXPECT_DENIAL(r, ops_audited[i], target, "vmhelper");
        if (const AuditLine* l = find_line(r, ops_audited[i], target)) {
            EXPECT_EQ(l->str("target_comm"), "victim") << l->raw;
            if (std::string(ops_audited[i]) == "signal") {
                EXPECT_EQ(l->num("signal"), i == 6 ? 0 : 15) << l->raw;
            }
        }
    }
    // confine runs as root: the kernel refuses the user before confine's
    // hooks are asked, so those leave no line.
    EXPECT_EQ(r.audit.size(), std::size(targets)) << r.describe();
}

// A root job (--allow-root) passes the kernel's own uid checks against
// root's processes, so only confine stands between it and them.
TEST_F(ProcReachTest, ARootJobCannotSignalConfineOrRootProcesses) {
    Victims v = start_victims(1, {.as_user = false});
    ASSERT_EQ(v.pids.size(), 1u);
    const std::string kill_victim = fmt::format("kill,{},0", v.pids[0]);

    Result control = run_root("./vmhelper " + kill_victim);
    ASSERT_EQ(parse_ops(control.out)[kill_victim], "ok") << control.describe();

    Started s = start({.args = {"--allow-root"}, .argv = {helper_, "kill,ppid,0", kill_victim}, .as_user = false});
    const pid_t confine_pid = s.proc->pid();
    Result r = finish(s);
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["kill,ppid,0"], "kill:EPERM") << r.describe();
    EXPECT_EQ(o[kill_victim], "kill:EPERM") << r.describe();
    for (const auto& [target, comm] : {std::pair{fmt::format("pid:{}", confine_pid), std::string("confine")},
                                       std::pair{fmt::format("pid:{}", v.pids[0]), std::string("victim")}}) {
        SCOPED_TRACE(target);
        auto n = std::count_if(r.audit.begin(), r.audit.end(), [&](const AuditLine& l) {
            return l.str("op") == "signal" && l.str("target") == target;
        });
        EXPECT_EQ(n, 1) << r.describe();
        if (const AuditLine* l = find_line(r, "signal", target)) {
            EXPECT_EQ(l->str("verdict"), "deny") << l->raw;
            EXPECT_EQ(l->str("mode"), "enforce") << l->raw;
            EXPECT_EQ(l->str("job"), r.job) << l->raw;
            EXPECT_EQ(l->num("uid"), 0) << l->raw;
            EXPECT_EQ(l->str("comm"), "vmhelper") << l->raw;
            EXPECT_EQ(l->str("target_comm"), comm) << l->raw;
            EXPECT_EQ(l->num("signal"), 0) << l->raw;
        }
    }
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
}

// F_SETOWN names any process or process group as a file's owner; the
// kernel then signals it (send_sigio: SIGIO, or any signal F_SETSIG picks)
// without kill(2)'s path. A job may own files itself; naming an outsider is
// refused, and so are the ways that pass the owner through user memory.
TEST_F(ProcReachTest, SigioCannotSignalOutsideTheJob) {
    Victims v = start_victims(4);
    ASSERT_EQ(v.pids.size(), 4u);
    Victims group = start_victims(1);
    ASSERT_EQ(group.pids.size(), 1u);
    const pid_t pgrp = getpgid(group.pids[0]);
    ASSERT_GT(pgrp, 0);
    auto op = [](auto owner, const char* how) { return fmt::format("sigio,{},15,{}", owner, how); };
    // Each attempt on a victim of its own: the control kills the first.
    const std::vector<std::string> outside = {op(v.pids[1], "setown"), op(-pgrp, "setown"), op(v.pids[2], "setown_ex"),
                                              op(v.pids[3], "fiosetown")};
    const std::string self = "sigio,self,10";

    Result control = run_unconfined("./vmhelper " + op(v.pids[0], "setown") + " " + self);
    ASSERT_EQ(parse_ops(control.out)[op(v.pids[0], "setown")], "ok") << control.describe();
    ASSERT_EQ(parse_ops(control.out)[self], "ok") << control.describe();
    ASSERT_TRUE(wait_until([&] { return !alive(v.pids[0]); }, 10)) << "unconfined, SIGIO's signal did not kill";

    std::string cmd = "./vmhelper " + self;
    for (const auto& o : outside) cmd += " " + o;
    Result r = run_confined("", cmd);
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o[self], "ok") << "a job's own SIGIO must work\n" << r.describe();
    EXPECT_EQ(o[outside[0]], "F_SETOWN:EPERM") << r.describe();
    EXPECT_EQ(o[outside[1]], "F_SETOWN:EPERM") << r.describe();
    EXPECT_EQ(o[outside[2]], "F_SETOWN_EX:EPERM") << r.describe();
    EXPECT_EQ(o[outside[3]], "FIOSETOWN:EPERM") << r.describe();
    for (int i = 1; i < 4; i++) EXPECT_TRUE(alive(v.pids[i])) << "the job killed a process outside it via SIGIO";
    EXPECT_TRUE(alive(group.pids[0])) << "the job killed a process group outside it via SIGIO";
    EXPECT_DENIAL(r, "signal", fmt::format("pid:{}", v.pids[1]), "vmhelper");
    EXPECT_DENIAL(r, "signal", fmt::format("pgrp:{}", pgrp), "vmhelper");
    int unverifiable = 0;
    for (const auto& l : r.audit) unverifiable += l.str("reason") == "owner_in_user_memory";
    EXPECT_EQ(unverifiable, 2) << r.describe();
    EXPECT_EQ(r.audit.size(), 4u) << r.describe();
}

// ---- limits, priorities and scheduling -----------------------------------------------------

// prlimit(2) lowers another process's limits; with RLIMIT_FSIZE at 0 the
// kernel kills it (SIGXFSZ) on its next write.
TEST_F(ProcReachTest, PrlimitOfAProcessOutsideTheJobIsRefused) {
    Process control_target = start_writer(work() + "/go-control", work() + "/out-control");
    Process target = start_writer(work() + "/go", work() + "/out");
    ASSERT_EQ(fsize_limit(target.pid()), "unlimited");

    const std::string control_op = fmt::format("prlimit,{},0", control_target.pid());
    Result control = run_unconfined("./vmhelper " + control_op + " prlimit,child,1000000");
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
    std::vector<std::string> argv = {helper_, op};
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
TEST_F(ProcReachTest, SchedulingOfProcessesOutsideTheJobIsRefused) {
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

    Victims c = start_victims(n, {.own_session = true}), v = start_victims(n, {.own_session = true});
    ASSERT_EQ(c.pids.size(), ways.size());
    ASSERT_EQ(v.pids.size(), ways.size());
    const std::string cpus = status_field(v.pids[0], "Cpus_allowed_list");
    ASSERT_NE(cpus, "0") << "the guest has one CPU: affinity would change nothing";

    std::string cmd = "./vmhelper";
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
    std::vector<std::string> argv = {helper_};
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
TEST_F(ProcReachTest, PriorityOfAGroupOrUserOnlyReachesTheJob) {
    const uid_t uid = test_user().uid;
    {
        Victims c = start_victims(2, {.own_session = true});
        ASSERT_EQ(c.pids.size(), 2u);
        const std::string pgrp_op = fmt::format("setpriority,pgrp,{},3", c.pgrp);
        const std::string user_op = fmt::format("setpriority,user,{},4", uid);
        Result control = run_unconfined(fmt::format("./vmhelper {}", pgrp_op));
        EXPECT_EQ(parse_ops(control.out)[pgrp_op], "ok") << control.describe();
        for (pid_t p : c.pids) EXPECT_EQ(nice_of(p), "3");
        control = run_unconfined(fmt::format("./vmhelper {}", user_op));
        EXPECT_EQ(parse_ops(control.out)[user_op], "ok") << control.describe();
        for (pid_t p : c.pids) EXPECT_EQ(nice_of(p), "4");
        ASSERT_FALSE(HasFailure());
    }

    Victims v = start_victims(2, {.own_session = true});
    ASSERT_EQ(v.pids.size(), 2u);
    std::vector<pid_t> outside = v.pids;
    outside.push_back(v.pgrp);
    std::vector<std::string> before;
    for (pid_t p : outside) before.push_back(sched_state(p));
    const std::vector<std::string> ops = {fmt::format("setpriority,pgrp,{},5", v.pgrp),
                                          fmt::format("setpriority,user,{},6", uid),
                                          fmt::format("ioprio,pgrp,{}", v.pgrp), fmt::format("ioprio,user,{}", uid)};
    std::vector<std::string> argv = {helper_, "child"};
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
TEST_F(ProcReachTest, BroadcastSignalsMissProcessesOutsideTheJob) {
    Victims v = start_victims(2, {.own_session = true});
    ASSERT_EQ(v.pids.size(), 2u);
    std::vector<pid_t> outside = v.pids;
    outside.push_back(v.pgrp);
    const std::string group = fmt::format("kill,-{},0", v.pgrp);

    Result control = run_unconfined("./vmhelper kill,-1,0 " + group);
    EXPECT_EQ(parse_ops(control.out)["kill,-1,0"], "ok") << control.describe();
    EXPECT_EQ(parse_ops(control.out)[group], "ok") << control.describe();
    ASSERT_FALSE(HasFailure());

    // kill(-1) reports no EPERM (it counts the processes it tried, and
    // succeeds); kill(-PGRP) fails if no member was signalled.
    const std::string group_term = fmt::format("kill,-{},15", v.pgrp);
    Result r = run({.argv = {helper_, "kill,-1,0", group_term, "kill,-1,15"}});
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
TEST_F(ProcReachTest, ProcFilesOfProcessesOutsideTheJobAreReadOnly) {
    Victims c = start_victims(1, {.own_session = true}), v = start_victims(1, {.own_session = true});
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

// ---- the job's own processes ---------------------------------------------------------

// prlimit(2) on the job's own processes works: the helper's own child and a
// sibling the job's shell started. On a process of the same user outside
// the job: EPERM. (PrlimitOfAProcessOutsideTheJobIsRefused has the
// outsider case in depth.)
TEST_F(ProcReachTest, PrlimitWorksOnTheJobsOwnChildren) {
    Process control_outsider = start_unconfined("exec sleep 300");
    Process outsider = start_unconfined("exec sleep 300");
    ASSERT_TRUE(wait_until([&] { return read_file(fmt::format("/proc/{}/comm", outsider.pid())) == "sleep\n"; }));
    ASSERT_TRUE(
        wait_until([&] { return read_file(fmt::format("/proc/{}/comm", control_outsider.pid())) == "sleep\n"; }));
    ASSERT_EQ(fsize_limit(outsider.pid()), "unlimited");
    // {0}: the outsider. The sibling's pid is known only inside the shell.
    auto cmd_for = [](pid_t out) {
        return fmt::format(
            "sleep 300 & s=$!; echo \"sibling $s\"; ./vmhelper prlimit,child,100000 limit,child "
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

}  // namespace
}  // namespace vmtest
