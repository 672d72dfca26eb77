// The job's processes: they can't leave its cgroup (by cgroup.procs, nor
// a root job's clone3 into another cgroup), use bpf(), or gain anything by
// setuid; and none of them outlives the job (--keep-dirs keeps files only).
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
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

pid_t read_pid(const std::string& path) {
    std::string s = read_file(path);
    return s.empty() ? -1 : static_cast<pid_t>(std::stol(s));
}

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

class ProcJobTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        helper_ = install_helper(work());
    }

    std::string helper_;
};

// ---- the job's cgroup and bpf() ---------------------------------------------------------

TEST_F(ProcJobTest, TheJobCannotLeaveItsCgroupOrUseBpf) {
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
                             "sh -c 'echo $$ > {0}/b/cgroup.procs && cat /proc/self/cgroup && ./vmhelper bpf'",
                             deleg, test_user().uid, test_user().gid));
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_NE(control.out.find(fmt::format("0::/vmtest-more-{}/b\n", getpid())), npos) << control.describe();
    EXPECT_EQ(parse_ops(control.out)["bpf"], "ok") << control.describe();
    ASSERT_FALSE(HasFailure());

    const std::string cmd = fmt::format(
        "echo $$ > {0}/b/cgroup.procs; echo \"deleg=$?\"; echo $$ > {1}/cgroup.procs; echo \"root=$?\"; "
        "cat /proc/self/cgroup; ./vmhelper bpf; "
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

// ---- a root job's children ---------------------------------------------------------

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

// do), and the kernel then asks only for write permission on the target's
// cgroup.procs, which a root job has without any capability. A child born
// outside the job's cgroup would be unconfined and outlive the job.
TEST_F(ProcJobTest, ARootJobCannotPlaceAChildInAnotherCgroup) {
    TestCgroup cg(fmt::format("confine-test-escape-{}", getpid()));
    ASSERT_FALSE(HasFailure());
    const std::string op = "cgclone," + cg.path();
    const std::string name = cg.path().substr(cgroup2_mount().size());

    Result control = run_root("./vmhelper " + op);
    EXPECT_EQ(parse_ops(control.out)[op], "ok 0::" + name) << "unconfined, root's child should land in " << name << "\n"
                                                           << control.describe();
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(cg.procs(), "");

    Result r = run({.args = {"--allow-root"}, .argv = {helper_, "child", op}, .as_user = false});
    Ops o = parse_ops(r.out);
    EXPECT_TRUE(o["child"].starts_with("ok ")) << "a plain fork should still work\n" << r.describe();
    EXPECT_EQ(o[op], "clone3:EPERM") << r.describe();
    EXPECT_TRUE(has_denial_of(r, "cgroup", "", 0, "vmhelper")) << r.describe();
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
    EXPECT_EQ(cg.procs(), "") << "a process escaped the job into " << cg.path();
}

// ---- what the job gets and leaves behind ---------------------------------------------

// No setuid: copied here as root, the helper would run as root for the user.
TEST_F(ProcJobTest, SetuidGivesTheJobNothing) {
    const std::string suid = work() + "/suid-helper";
    fs::copy_file(helper_bin(), suid, fs::copy_options::overwrite_existing);
    ASSERT_EQ(chown(suid.c_str(), 0, 0), 0);
    ASSERT_EQ(chmod(suid.c_str(), 04755), 0);
    const unsigned uid = test_user().uid;

    Result control = run_unconfined("./suid-helper ids");
    ASSERT_EQ(parse_ops(control.out)["ids"], fmt::format("ok {} 0 0", uid)) << control.describe();

    Result r = run_confined("", "./suid-helper ids");
    EXPECT_EQ(parse_ops(r.out)["ids"], fmt::format("ok {0} {0} {0}", uid)) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

// --keep-dirs keeps the private HOME and TMPDIR (and what the job wrote
// there), nothing else: a double-forked daemon still dies, and the cgroup
// still goes.
TEST_F(ProcJobTest, KeepDirsKeepsHomeAndTmpdirOnly) {
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

TEST_F(ProcJobTest, LeftoverProcessesDieWithTheJob) {
    // A plain background child, and one in its own session whose parent
    // is gone: both outlive the job's main process.
    const std::string cmd =
        "sleep 1000 >/dev/null 2>&1 & echo $! > pid1; "
        "(setsid sleep 1000 >/dev/null 2>&1 & echo $! > pid2)";

    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    for (const char* f : {"pid1", "pid2"}) {
        pid_t pid = read_pid(work() + "/" + f);
        ASSERT_GT(pid, 0);
        EXPECT_TRUE(alive(pid)) << "unconfined, the " << f << " sleep should outlive its parent";
        kill(pid, SIGKILL);
    }

    // The job also names its own cgroup, wherever confine puts it.
    Result r = run_confined("", cmd + "; cut -d: -f3 /proc/self/cgroup");
    ASSERT_EQ(r.status, 0) << r.describe();
    for (const char* f : {"pid1", "pid2"}) {
        pid_t pid = read_pid(work() + "/" + f);
        ASSERT_GT(pid, 0) << r.describe();
        // confine returns once its cgroup is empty; only the guest's init
        // may still have to reap the corpse.
        EXPECT_TRUE(wait_until([&] { return !alive(pid); }, 5)) << "the job's " << f << " sleep survived it";
        kill(pid, SIGKILL);
    }
    const std::string cg = cgroup2_mount() + r.out.substr(0, r.out.find('\n'));
    ASSERT_NE(cg.find("/" + r.job), std::string::npos) << r.describe();
    EXPECT_FALSE(exists(cg)) << cg << " is left after the job";
}

}  // namespace
}  // namespace vmtest
