// Process isolation: user namespaces, and nothing of the job outliving it.
#include <fmt/format.h>
#include <signal.h>

#include "harness.h"

namespace vmtest {
namespace {

using ProcTest = VmTest;

pid_t read_pid(const std::string& path) {
    std::string s = read_file(path);
    return s.empty() ? -1 : static_cast<pid_t>(std::stol(s));
}

TEST_F(ProcTest, UserNamespacesAreDenied) {
    for (const char* cmd : {"unshare -U true", "unshare -Ur true"}) {
        SCOPED_TRACE(cmd);
        Result control = run_unconfined(cmd);
        ASSERT_EQ(control.status, 0) << "unprivileged user namespaces don't work in this guest\n" << control.describe();

        Result r = run_confined("", cmd);
        EXPECT_NE(r.status, 0) << r.describe();
        EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.describe();
        EXPECT_DENIAL(r, "userns_create", "", "unshare");
        EXPECT_EQ(r.audit.size(), 1u) << r.describe();
    }
}

TEST_F(ProcTest, UserNamespacesCanBeAllowedByPolicy) {
    const std::string policy = make_policy({.user_namespaces = true});
    for (const char* cmd : {"unshare -U true", "unshare -Ur true"}) {
        SCOPED_TRACE(cmd);
        Result r = run_confined(policy, cmd);
        EXPECT_EQ(r.status, 0) << r.describe();
        EXPECT_TRUE(r.audit.empty()) << r.describe();
    }
}

TEST_F(ProcTest, LeftoverProcessesDieWithTheJob) {
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
