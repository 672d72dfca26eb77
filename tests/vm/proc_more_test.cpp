// Process isolation, the whole surface: user namespaces every way
// they can be made; ptrace, process_vm_readv, /proc/PID files and signals
// aimed outside the job (at the same user's processes and at confine
// itself); the job's cgroup and bpf(); and what a job leaves behind.
//
// Targets outside the job are `vmhelper victims`: children of one helper
// process started as the test user, named "victim". The job's side is
// `vmhelper netproc` (one process, many operations, an exact errno each).
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
namespace fs = std::filesystem;

// `vmhelper victims`: N processes of the test user (or root) outside any
// job, and the address of the secret string in their memory.
struct Victims {
    std::optional<Process> proc;
    std::string secret_addr;
    std::vector<pid_t> pids;
};

// What a job's shell step printed: "STEP NAME PID STATUS".
struct Step {
    pid_t pid = -1;
    int status = -1;
};
std::map<std::string, Step> parse_steps(const std::string& out) {
    std::map<std::string, Step> steps;
    static const std::regex re(R"((?:^|\n)STEP (\S+) ([0-9]+) ([0-9]+)(?=\n))");
    for (std::sregex_iterator m(out.begin(), out.end(), re), end; m != end; ++m)
        steps[(*m)[1].str()] = {static_cast<pid_t>(std::stol((*m)[2].str())), std::stoi((*m)[3].str())};
    return steps;
}
// A shell function that runs a command as its own process and reports it.
constexpr const char* kStepFn = "step() { n=$1; shift; \"$@\" & p=$!; wait $p; echo \"STEP $n $p $?\"; }; ";

class ProcMoreTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    Victims start_victims(int n, bool as_user = true) {
        Victims v;
        const std::string file = work() + fmt::format("/victims-{}", ++victim_sets_);
        Process::Options o{.argv = {helper_, "victims", std::to_string(n), file},
                           .env = {fmt::format("VICTIM_ENV=victim-env-{}", getpid())},
                           .cwd = work()};
        if (as_user) {
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
        return v;
    }

    std::string helper_;
    int victim_sets_ = 0;
};

// ---- user namespaces ----------------------------------------------------------------

TEST_F(ProcMoreTest, UserNamespacesAreDeniedEveryWay) {
    // CLONE_NEWUSER = 0x10000000; python's exit status is the errno.
    const std::string python =
        "/usr/bin/python3 -c 'import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
        "sys.exit(0 if libc.unshare(0x10000000) == 0 else ctypes.get_errno())'";
    // Without a user namespace, a user can't make the others at all.
    const std::string cmd = std::string(kStepFn) +
                            "step net unshare -n true; step mount unshare -m true; "
                            "step userns-net unshare -rn true; step userns-mount unshare -rm true; "
                            "step clone ./vmhelper netproc userns,clone; step clone3 ./vmhelper netproc userns,clone3; "
                            "step unshare ./vmhelper netproc userns,unshare; step python " +
                            python;
    struct Way {
        const char* step;
        const char* comm;
        const char* helper_op;  // and its result when denied
        const char* helper_denied;
    };
    const std::vector<Way> ways = {{"userns-net", "unshare", nullptr, nullptr},
                                   {"userns-mount", "unshare", nullptr, nullptr},
                                   {"clone", "vmhelper", "userns,clone", "clone:EPERM"},
                                   {"clone3", "vmhelper", "userns,clone3", "clone3:EPERM"},
                                   {"unshare", "vmhelper", "userns,unshare", "unshare:EPERM"},
                                   {"python", "python3", nullptr, nullptr}};

    Result control = run_unconfined(cmd);
    auto cs = parse_steps(control.out);
    for (const Way& w : ways) EXPECT_EQ(cs[w.step].status, 0) << w.step << " unconfined\n" << control.describe();
    EXPECT_NE(cs["net"].status, 0) << control.describe();
    EXPECT_NE(cs["mount"].status, 0) << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined("", cmd);
    auto steps = parse_steps(r.out);
    Ops o = parse_ops(r.out);
    EXPECT_NE(steps["net"].status, 0) << r.describe();
    EXPECT_NE(steps["mount"].status, 0) << r.describe();
    for (const Way& w : ways) {
        SCOPED_TRACE(w.step);
        ASSERT_GT(steps[w.step].pid, 0) << r.describe();
        EXPECT_NE(steps[w.step].status, 0) << r.describe();
        if (w.helper_op) {
            EXPECT_EQ(o[w.helper_op], w.helper_denied) << r.describe();
        }
        EXPECT_DENIAL(of_process(r, steps[w.step].pid), "userns_create", "", w.comm);
    }
    EXPECT_EQ(steps["python"].status, 1) << "python's unshare should fail with EPERM\n" << r.describe();
    // unshare -n and -m fail in the kernel, before any user namespace.
    EXPECT_EQ(r.audit.size(), ways.size()) << r.describe();
}

// ---- processes outside the job -----------------------------------------------------

TEST_F(ProcMoreTest, ProcessesOutsideTheJobAreOutOfReach) {
    // Yama (scope 1) would refuse ptrace of a non-child even unconfined.
    Sysctl yama("/proc/sys/kernel/yama/ptrace_scope", "0");
    Victims v = start_victims(9);
    ASSERT_EQ(v.pids.size(), 9u);
    const auto& p = v.pids;
    auto ops_on = [&](pid_t killed) {
        return std::vector<std::string>{
            fmt::format("ptrace,{}", p[0]),
            fmt::format("vmread,{},{}", p[1], v.secret_addr),
            fmt::format("open,/proc/{}/environ,VICTIM_ENV=victim-env-", p[2]),
            fmt::format("open,/proc/{}/mem", p[3]),
            fmt::format("open,/proc/{}/maps,vmhelper", p[4]),
            fmt::format("readlink,/proc/{}/fd/0", p[5]),
            fmt::format("kill,{},0", p[6]),
            fmt::format("kill,{},15", killed),
        };
    };

    // Control: as the same user, outside any job, all of it works.
    std::vector<std::string> control_ops = ops_on(p[7]);
    std::string cmd = "./vmhelper netproc";
    for (const auto& op : control_ops) cmd += " " + op;
    Result control = run_unconfined(cmd);
    Ops c = parse_ops(control.out);
    for (const auto& op : control_ops) EXPECT_TRUE(c[op].starts_with("ok")) << op << ": " << c[op];
    EXPECT_TRUE(wait_until([&] { return !alive(p[7]); }, 10)) << "the unconfined SIGTERM did not kill";
    ASSERT_FALSE(HasFailure()) << control.describe();

    // Confined: none of it; on its own child, all of it. confine itself
    // (the parent of the job's main process, root) is out of reach too.
    std::vector<std::string> ops = ops_on(p[8]);
    std::vector<std::string> argv = {helper_, "netproc"};
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
TEST_F(ProcMoreTest, ARootJobCannotSignalConfineOrRootProcesses) {
    Victims v = start_victims(1, /*as_user=*/false);
    ASSERT_EQ(v.pids.size(), 1u);
    const std::string kill_victim = fmt::format("kill,{},0", v.pids[0]);

    Result control = run_root("./vmhelper netproc " + kill_victim);
    ASSERT_EQ(parse_ops(control.out)[kill_victim], "ok") << control.describe();

    Started s =
        start({.args = {"--allow-root"}, .argv = {helper_, "netproc", "kill,ppid,0", kill_victim}, .as_user = false});
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
TEST_F(ProcMoreTest, SigioCannotSignalOutsideTheJob) {
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

    Result control = run_unconfined("./vmhelper netproc " + op(v.pids[0], "setown") + " " + self);
    ASSERT_EQ(parse_ops(control.out)[op(v.pids[0], "setown")], "ok") << control.describe();
    ASSERT_EQ(parse_ops(control.out)[self], "ok") << control.describe();
    ASSERT_TRUE(wait_until([&] { return !alive(v.pids[0]); }, 10)) << "unconfined, SIGIO's signal did not kill";

    std::string cmd = "./vmhelper netproc " + self;
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

// ---- the job's cgroup and bpf() ---------------------------------------------------------

TEST_F(ProcMoreTest, TheJobCannotLeaveItsCgroupOrUseBpf) {
    // A cgroup subtree delegated to the user, where it may move its own
    // processes; and unprivileged bpf() enabled machine-wide.
    const std::string deleg = fmt::format("{}/vmtest-more-{}", cgroup2_mount(), getpid());
    struct Cleanup {
        std::string d;
        ~Cleanup() {
            rmdir((d + "/a").c_str());
            rmdir((d + "/b").c_str());
            rmdir(d.c_str());
        }
    } cleanup{deleg};
    for (const std::string& d : {deleg, deleg + "/a", deleg + "/b"}) {
        ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d << ": " << strerror(errno);
        for (const std::string& f : {d, d + "/cgroup.procs"})
            ASSERT_EQ(chown(f.c_str(), test_user().uid, test_user().gid), 0) << f;
    }
    Sysctl unpriv_bpf("/proc/sys/kernel/unprivileged_bpf_disabled", "0");

    Result control =
        run_root(fmt::format("echo $$ > {0}/a/cgroup.procs && exec setpriv --reuid={1} --regid={2} --init-groups "
                             "sh -c 'echo $$ > {0}/b/cgroup.procs && cat /proc/self/cgroup && ./vmhelper netproc bpf'",
                             deleg, test_user().uid, test_user().gid));
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_NE(control.out.find(fmt::format("0::/vmtest-more-{}/b\n", getpid())), npos) << control.describe();
    EXPECT_EQ(parse_ops(control.out)["bpf"], "ok") << control.describe();
    ASSERT_FALSE(HasFailure());

    const std::string cmd = fmt::format(
        "echo $$ > {0}/b/cgroup.procs; echo \"deleg=$?\"; echo $$ > {1}/cgroup.procs; echo \"root=$?\"; "
        "cat /proc/self/cgroup; ./vmhelper netproc bpf; "
        "bpftool map list & p=$!; wait $p; echo \"bpftool $p $?\"",
        deleg, cgroup2_mount());
    Result r = run_confined("", cmd);
    // A failed redirection: the shell's status 2.
    EXPECT_NE(r.out.find("deleg=2\n"), npos) << r.describe();
    EXPECT_NE(r.out.find("root=2\n"), npos) << r.describe();
    EXPECT_NE(r.err.find("b/cgroup.procs: Operation not permitted"), npos) << r.describe();
    EXPECT_TRUE(std::regex_search(r.out, std::regex("(^|\n)0::/confine/(.*/)?" + r.job + "\n"))) << r.describe();
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["bpf"], "bpf:EPERM") << r.describe();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(bpftool ([0-9]+) ([0-9]+)\n)"))) << r.describe();
    EXPECT_NE(m[2].str(), "0") << r.describe();

    EXPECT_DENIAL(r, "open_write", deleg + "/b/cgroup.procs", "sh");
    ASSERT_EQ(o.pids.size(), 1u) << r.describe();
    EXPECT_DENIAL(of_process(r, o.pids[0]), "bpf", "", "vmhelper");
    Result bpftool_lines = of_process(r, std::stoi(m[1].str()));
    EXPECT_FALSE(bpftool_lines.audit.empty()) << r.describe();
    for (const auto& l : bpftool_lines.audit) EXPECT_EQ(l.str("op"), "bpf") << l.raw;
}

// ---- what the job gets and leaves behind ---------------------------------------------

// No setuid: copied here as root, the helper would run as root for the user.
TEST_F(ProcMoreTest, SetuidGivesTheJobNothing) {
    const std::string suid = work() + "/suid-helper";
    fs::copy_file(helper_bin(), suid, fs::copy_options::overwrite_existing);
    ASSERT_EQ(chown(suid.c_str(), 0, 0), 0);
    ASSERT_EQ(chmod(suid.c_str(), 04755), 0);
    const unsigned uid = test_user().uid;

    Result control = run_unconfined("./suid-helper netproc ids");
    ASSERT_EQ(parse_ops(control.out)["ids"], fmt::format("ok {} 0 0", uid)) << control.describe();

    Result r = run_confined("", "./suid-helper netproc ids");
    EXPECT_EQ(parse_ops(r.out)["ids"], fmt::format("ok {0} {0} {0}", uid)) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

// --keep-dirs keeps the private HOME and TMPDIR (and what the job wrote
// there), nothing else: a double-forked daemon still dies, and the cgroup
// still goes.
TEST_F(ProcMoreTest, KeepDirsKeepsHomeAndTmpdirOnly) {
    const std::string cmd =
        "echo \"$HOME\" > dirs; echo \"$TMPDIR\" >> dirs; echo kept > \"$HOME/h\"; echo kept > \"$TMPDIR/t\"; "
        "setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > daemon' & wait; "
        "touch ready; while [ ! -e release ]; do sleep 0.1; done";
    Started job = start({.args = {"--keep-dirs"}, .argv = {"/bin/sh", "-c", cmd}});
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << finish(job, 1).describe();
    const std::string cg = job_cgroup(job.job);
    EXPECT_FALSE(cg.empty()) << "no cgroup named " << job.job;
    const pid_t daemon = static_cast<pid_t>(std::stol("0" + read_file(work() + "/daemon")));
    ASSERT_GT(daemon, 0);
    EXPECT_TRUE(alive(daemon));
    EXPECT_NE(read_file(fmt::format("/proc/{}/cgroup", daemon)).find(job.job), npos) << "the daemon left the job";
    write_file(work() + "/release", "");
    Result r = finish(job);
    EXPECT_EQ(r.status, 0) << r.describe();

    EXPECT_TRUE(wait_until([&] { return !alive(daemon); }, 5)) << "the job's daemon survived it";
    kill(daemon, SIGKILL);
    if (!cg.empty()) {
        EXPECT_FALSE(exists(cg)) << cg << " outlived the job";
    }
    std::istringstream dirs(read_file(work() + "/dirs"));
    std::string home, tmp;
    dirs >> home >> tmp;
    ASSERT_FALSE(home.empty() || tmp.empty()) << r.describe();
    EXPECT_EQ(read_file(home + "/h"), "kept\n") << "HOME was not kept";
    EXPECT_EQ(read_file(tmp + "/t"), "kept\n") << "TMPDIR was not kept";
    std::error_code ec;
    fs::remove_all(fs::path(home).parent_path(), ec);
}

}  // namespace
}  // namespace vmtest
