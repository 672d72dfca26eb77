// Mounts a job makes: in a user namespace of its own (where the policy
// allows them) a job is root of its own mount namespace, and a bind mount,
// an overlay, an attached open_tree clone or a moved mount would give a
// denied file a second path; and a mount's source is logged whole.
#include <fmt/format.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

// "STEP NAME STATUS" lines a job's shell printed.
std::map<std::string, int> parse_steps(const std::string& out) {
    std::map<std::string, int> steps;
    static const std::regex re(R"((?:^|\n)STEP (\S+) ([0-9]+)(?=\n))");
    for (std::sregex_iterator m(out.begin(), out.end(), re), end; m != end; ++m)
        steps[(*m)[1].str()] = std::stoi((*m)[2].str());
    return steps;
}

class FsMountTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        install_helper(work());
    }
};

// A mount's source is the job's string, logged whole however long (past
// what a short event holds).
TEST_F(FsMountTest, ALongMountSourceIsLoggedWhole) {
    const std::string w = work();
    const std::string long_dir = fmt::format("{}/{}/{}", kUserHome, std::string(150, 'd'), std::string(150, 'e'));
    ASSERT_EQ(run_unconfined("mkdir -p " + long_dir).status, 0);
    make_dir(w + "/x");
    const std::string cmd = fmt::format("unshare -Urm mount -n --bind {} {}/x", long_dir, w);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();

    Result r = run_confined(make_policy({.user_namespaces = true}), cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "mount", long_dir, "mount");
    run_root("rm -rf " + std::string(kUserHome) + "/" + std::string(150, 'd'));
}

// ---- mounts in a user namespace --------------------------------------------------------

// In a user namespace of its own (where the policy allows them) a job is
// root of its own mount namespace: a bind mount, an overlay, an attached
// open_tree clone or a moved mount would give a denied file a second path,
// under the workdir's rules. Refused; a fresh tmpfs still works. Each
// attempt in a user and mount namespace of its own: mount(8) once, as a job
// would, then mount(2) through the helper for the exact errno.
TEST_F(FsMountTest, MountsInAUserNamespaceCannotAliasDeniedFiles) {
    const std::string w = work(), ssh = std::string(kUserHome) + "/.ssh";
    for (const char* d : {"x", "m", "e", "t", "a", "b", "y"}) make_dir(w + "/" + d);
    write_file(w + "/xf", "");
    auto step = [](const std::string& name, const std::string& cmd) {
        return fmt::format("unshare -Urm {}; echo \"STEP {} $?\"; ", cmd, name);
    };
    auto helper = [&](const std::vector<std::string>& ops) {
        std::string cmd = w + "/vmhelper --op-comm";
        for (const auto& op : ops) cmd += " '" + op + "'";
        return cmd;
    };
    const std::string cmd =
        step("mount8", fmt::format("sh -c 'mount -n --bind {0} {1}/x && cat {1}/x/id_ed25519'", ssh, w)) +
        step("bind", helper({fmt::format("mount,{},{}/xf,-,bind", kSshKey, w), "read," + w + "/xf"})) +
        step("overlay", helper({fmt::format("mount,overlay,{1}/m,overlay,none,lowerdir={0}:{1}/e", ssh, w),
                                "read," + w + "/m/id_ed25519"})) +
        step("open_tree", helper({fmt::format("opentree-move,{},{}/t", ssh, w), "read," + w + "/t/id_ed25519"})) +
        step("move", helper({"mount,-," + w + "/a,tmpfs,none", "open," + w + "/a/moved,w+creat",
                             fmt::format("mount,{0}/a,{0}/b,-,move", w), "read," + w + "/b/moved"})) +
        step("tmpfs", helper({"mount,-," + w + "/y,tmpfs,none", "open," + w + "/y/f,w+creat", "read," + w + "/y/f"}));
    // What each step prints, by step.
    auto outputs = [](const std::string& out) {
        std::map<std::string, std::string> by_step;
        std::string acc;
        std::istringstream in(out);
        for (std::string line; std::getline(in, line);) {
            if (line.starts_with("STEP ")) {
                std::istringstream f(line.substr(5));
                std::string name;
                f >> name;
                by_step[name] = acc;
                acc.clear();
            } else {
                acc += line + "\n";
            }
        }
        return by_step;
    };
    const std::string secret = std::string(kSshSecret);
    using Results = std::vector<std::string>;  // a helper step's results, in order
    auto results = [](const std::string& step_out) { return parse_ops(step_out).by_index; };

    Result control = run_unconfined(cmd);
    auto cs = parse_steps(control.out);
    auto co = outputs(control.out);
    for (const char* st : {"mount8", "bind", "overlay", "open_tree", "move", "tmpfs"})
        EXPECT_EQ(cs.count(st) ? cs[st] : -1, 0) << st << "\n" << control.describe();
    EXPECT_EQ(co["mount8"], secret + "\n") << control.describe();
    EXPECT_EQ(results(co["bind"]), (Results{"ok", "ok " + secret + "\\n"})) << control.describe();
    EXPECT_EQ(results(co["overlay"]), (Results{"ok", "ok " + secret + "\\n"})) << control.describe();
    EXPECT_EQ(results(co["open_tree"]), (Results{"ok", "ok " + secret + "\\n"})) << control.describe();
    EXPECT_EQ(results(co["move"]), (Results{"ok", "ok", "ok", "ok "})) << control.describe();
    EXPECT_EQ(results(co["tmpfs"]), (Results{"ok", "ok", "ok "})) << control.describe();
    ASSERT_FALSE(HasFailure()) << "unconfined, every mount should work";

    Result r = run_confined(make_policy({.user_namespaces = true}), cmd);
    auto s = parse_steps(r.out);
    auto o = outputs(r.out);
    EXPECT_EQ(r.out.find(kSshSecret), npos) << "the key leaked\n" << r.describe();
    EXPECT_NE(s.count("mount8") ? s["mount8"] : 0, 0) << r.describe();
    EXPECT_EQ(results(o["bind"]), (Results{"mount:EPERM", "ok "})) << r.describe();  // the empty file bound onto
    EXPECT_EQ(results(o["overlay"]), (Results{"mount:EPERM", "read:ENOENT"})) << r.describe();
    EXPECT_EQ(results(o["open_tree"]), (Results{"move_mount:EPERM", "read:ENOENT"})) << r.describe();
    EXPECT_EQ(results(o["move"]), (Results{"ok", "ok", "mount:EPERM", "read:ENOENT"})) << r.describe();
    EXPECT_EQ(results(o["tmpfs"]), (Results{"ok", "ok", "ok "})) << "a fresh tmpfs should work\n" << r.describe();
    EXPECT_DENIAL(r, "mount", ssh, "mount");
    EXPECT_DENIAL(r, "mount", kSshKey, "op0");
    EXPECT_DENIAL(r, "mount", "overlay", "op0");
    EXPECT_DENIAL(r, "mount", "", "op0");
    EXPECT_DENIAL(r, "mount", w + "/a", "op2");
    EXPECT_EQ(r.audit.size(), 5u) << r.describe();
}

// A new root gives every file a second path too: paths are resolved up to
// the task's root, so after `chroot ~` the key would be decided as
// /.ssh/id_ed25519, which a policy reading "/" allows. chroot and
// pivot_root are refused, in a user namespace the policy allows.
TEST_F(FsMountTest, ANewRootIsRefused) {
    const std::string w = work(), home = "/home/confinetest";
    // Each python's exit status: 0, or the errno.
    const std::string chroot = fmt::format(
        R"py(unshare -Ur /usr/bin/python3 -c 'import os; os.chroot("{}"); print(open("/.ssh/id_ed25519").read(), end="")')py",
        home);
    const std::string pivot = fmt::format(
        R"py(mkdir -p {0}/nr && unshare -Urm sh -c 'mount -n -t tmpfs t {0}/nr && mkdir {0}/nr/old && cd {0}/nr && )py"
        R"py(/usr/bin/python3 -c "import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); )py"
        R"py(sys.exit(0 if l.syscall(155, b\".\", b\"old\") == 0 else ctypes.get_errno())"')py",
        w);
    const std::string cmd = chroot + "; echo \"STEP chroot $?\"; " + pivot + "; echo \"STEP pivot_root $?\"";
    const std::string policy = make_policy({.read = {"/"}, .deny = {home + "/.ssh"}, .user_namespaces = true});

    Result control = run_unconfined(cmd);
    auto cs = parse_steps(control.out);
    EXPECT_EQ(cs["chroot"], 0) << control.describe();
    EXPECT_NE(control.out.find(kSshSecret), npos) << control.describe();
    EXPECT_EQ(cs["pivot_root"], 0) << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = run_confined(policy, cmd);
    auto rs = parse_steps(r.out);
    EXPECT_NE(rs["chroot"], 0) << r.describe();
    EXPECT_EQ(r.out.find(kSshSecret), npos) << r.describe();
    EXPECT_EQ(rs["pivot_root"], 1) << "pivot_root should fail with EPERM\n" << r.describe();
    ASSERT_EQ(r.audit.size(), 2u) << r.describe();
    for (const auto& line : r.audit) {  // the chroot, then the pivot_root
        Result one = r;
        one.audit = {line};
        EXPECT_DENIAL(one, "mount", "", "python3");
    }
}

}  // namespace
}  // namespace vmtest
