// User namespaces: denied by default, every way one can be made (unshare,
// clone, clone3, from C and from python), and allowed by policy.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>

#include "harness.h"

namespace vmtest {
namespace {

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

class UsernsTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        install_helper(work());
    }
};

TEST_F(UsernsTest, UserNamespacesAreDenied) {
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

TEST_F(UsernsTest, UserNamespacesCanBeAllowedByPolicy) {
    const std::string policy = make_policy({.user_namespaces = true});
    for (const char* cmd : {"unshare -U true", "unshare -Ur true"}) {
        SCOPED_TRACE(cmd);
        Result r = run_confined(policy, cmd);
        EXPECT_EQ(r.status, 0) << r.describe();
        EXPECT_TRUE(r.audit.empty()) << r.describe();
    }
}

TEST_F(UsernsTest, UserNamespacesAreDeniedEveryWay) {
    // CLONE_NEWUSER = 0x10000000; python's exit status is the errno.
    const std::string python =
        "/usr/bin/python3 -c 'import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
        "sys.exit(0 if libc.unshare(0x10000000) == 0 else ctypes.get_errno())'";
    // Without a user namespace, a user can't make the others at all.
    const std::string cmd = std::string(kStepFn) +
                            "step net unshare -n true; step mount unshare -m true; "
                            "step userns-net unshare -rn true; step userns-mount unshare -rm true; "
                            "step clone ./vmhelper userns,clone; step clone3 ./vmhelper userns,clone3; "
                            "step unshare ./vmhelper userns,unshare; step python " +
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

}  // namespace
}  // namespace vmtest
