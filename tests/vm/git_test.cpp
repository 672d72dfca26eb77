// What the account's own git trusts (docs/design.md "What git
// trusts"): the runner's git, run later outside any sandbox in the job's
// checkout, must not execute or trust anything the job planted in the git
// metadata.
//
// Each vector is planted twice. Without confine (the control), the account's
// git then demonstrably runs the planted code or follows the planted
// pointer. By a confined job under the default policy, the write is refused
// and audited, and the account's git runs nothing. Residual risks that path
// rules can't close get tests too: the job succeeds, and the account's git
// run as docs/contract.md tells runners to run it executes nothing.
//
// git costs about half a second per command under TCG: the controls run
// side by side, each in its own copy of the checkout.
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <vector>

#include "harness.h"

namespace vmtest {
namespace {

namespace fs = std::filesystem;

constexpr auto npos = std::string::npos;

// The git identity jobs commit with (a job's HOME is private and empty).
constexpr const char* kJobGit = "git -c user.name=job -c user.email=job@vmtest";

// One way to plant something. PLANT runs in the work tree (sh). CHECK is
// the account's git afterwards, in the same directory: it prints TOKEN if
// git ran or followed what was planted. OP, TARGET and COMM are the audit
// line of the confined attempt (TARGET relative to the work tree unless
// absolute).
struct Vector {
    std::string name, plant, check, token, op, target, comm;
};

class GitTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        marks_ = at("marks");
        make_dir(marks_);
        make_shared();
    }

    // Made once per test process, outside each test's own tree: the
    // upstream (src), with one commit, and a pristine clone of it made by
    // the account before any job, as a runner does. extensions.worktreeConfig
    // is on (as `git sparse-checkout` turns it on), so config.worktree
    // counts. After the clone, src gets a branch and a commit the checkout
    // lacks: for planted remotes to list and planted alternates to lend.
    void make_shared() {
        static std::string error, only_upstream;
        static bool made = false;
        if (!made) {
            made = true;
            fs::remove_all(shared());
            for (const char* d : {"", "src", "pristine"}) make_dir(shared(d));
            Result r = run_unconfined(
                fmt::format("set -e; cd {0}; git init -q; echo readme > README; git add README; {1} commit -qm init; "
                            "git clone -q {0} {2}; "
                            "sed -i 's/repositoryformatversion = 0/repositoryformatversion = 1/' {2}/.git/config; "
                            "printf '[extensions]\\n\\tworktreeConfig = true\\n' >> {2}/.git/config; "
                            "git checkout -q -b planted; {1} commit -q --allow-empty -m planted; git rev-parse HEAD",
                            shared("src"), kJobGit, shared("pristine")));
            if (r.status != 0) error = r.describe();
            only_upstream = r.out.substr(0, r.out.find('\n'));
        }
        ASSERT_EQ(error, "") << "making the upstream and the pristine checkout failed";
        only_upstream_ = only_upstream;
    }
    static std::string shared(const std::string& rel = "") {
        return "/var/tmp/confine-tests/GitTest-shared" + (rel.empty() ? "" : "/" + rel);
    }

    // Shell that fills DIR (the work tree by default) with a copy of the
    // pristine checkout.
    std::string checkout_cmd(const std::string& dir = ".") const {
        return fmt::format("cp -a {}/. {}", shared("pristine"), dir);
    }

    // Config lines, for printf, that make the account's `git status` run
    // `touch <marks>/NAME`; a pre-commit hook in DIR that does the same;
    // and the account's git that prints NAME if it ran either.
    std::string fsmonitor(const std::string& name) const {
        return fmt::format("'[core]\\n\\tfsmonitor = \"touch {}/{}; false\"\\n'", marks_, name);
    }
    std::string hook(const std::string& dir, const std::string& name) const {
        return fmt::format("printf '#!/bin/sh\\ntouch {}/{}\\n' > {}/pre-commit && chmod +x {}/pre-commit", marks_,
                           name, dir, dir);
    }
    std::string ran_by_status(const std::string& name) const {
        return fmt::format("git status >/dev/null 2>&1; test -e {0}/{1} && echo {1}", marks_, name);
    }
    std::string ran_by_commit(const std::string& name) const {
        return fmt::format(
            "git -c user.name=acct -c user.email=acct@vmtest commit -q --allow-empty -m probe "
            ">/dev/null 2>&1; test -e {0}/{1} && echo {1}",
            marks_, name);
    }

    // Every vector's plant, one after the other, in one confined job.
    Result plant_confined(const std::string& policy, const std::vector<Vector>& vectors,
                          const std::string& before = "") {
        std::string batch = before;
        for (const auto& v : vectors) batch += "( " + v.plant + " ) 2>/dev/null; ";
        return run_confined(policy, batch + "echo done");
    }
    // Every check, in the work tree: what the account's git ran or followed.
    Result probe(const std::vector<Vector>& vectors) {
        std::string cmd;
        for (const auto& v : vectors) cmd += "( " + v.check + " ); ";
        return run_unconfined(cmd + "true");
    }
    // Each vector alone and unconfined, side by side: SETUP(dir) prepares
    // the directory DIR as the vector expects, then it is planted and
    // checked. Each must print its token.
    void controls(const std::vector<Vector>& vectors, const std::function<std::string(const std::string&)>& setup) {
        std::vector<Process> procs;
        procs.reserve(vectors.size());
        for (size_t i = 0; i < vectors.size(); ++i) {
            std::string dir = at(fmt::format("control-{}", i));
            make_dir(dir);
            procs.push_back(start_unconfined(fmt::format("set -e; cd {}; {}; ( {} ); set +e; {}", dir, setup(dir),
                                                         vectors[i].plant, vectors[i].check)));
        }
        for (size_t i = 0; i < vectors.size(); ++i) {
            Result c = procs[i].wait();
            EXPECT_NE(("\n" + c.out).find("\n" + vectors[i].token + "\n"), npos)
                << vectors[i].name << ": planted without confine, the account's git did not run or follow it\n"
                << c.describe();
        }
    }

    std::string marks_, only_upstream_;
};

TEST_F(GitTest, NothingPlantedInDotGitRunsInTheAccountsGitLater) {
    const std::string w = work(), src = shared("src");
    const std::string followed_alternates =
        fmt::format("git cat-file -e {} 2>/dev/null && echo alternates", only_upstream_);
    const std::vector<Vector> vectors = {
        {"config", "printf " + fsmonitor("config") + " >> .git/config", ran_by_status("config"), "config", "open_write",
         ".git/config", "sh"},
        {"hooks", hook(".git/hooks", "hooks"), ran_by_commit("hooks"), "hooks", "create", ".git/hooks/pre-commit",
         "sh"},
        // The review's finding: config and hooks are read from where commondir points.
        {"commondir",
         "cp -r .git evil-common && printf " + fsmonitor("commondir") +
             " >> evil-common/config && echo ../evil-common > .git/commondir",
         ran_by_status("commondir"), "commondir", "create", ".git/commondir", "sh"},
        {"config.worktree", "printf " + fsmonitor("config-worktree") + " > .git/config.worktree",
         ran_by_status("config-worktree"), "config-worktree", "create", ".git/config.worktree", "sh"},
        {"alternates", fmt::format("echo {}/.git/objects > .git/objects/info/alternates", src), followed_alternates,
         "alternates", "create", ".git/objects/info/alternates", "sh"},
        {"remotes", fmt::format("mkdir .git/remotes && printf 'URL: {}\\n' > .git/remotes/up", src),
         "git ls-remote up 2>/dev/null | grep -q refs/heads/planted && echo remotes", "remotes", "mkdir",
         ".git/remotes", "mkdir"},
        {"branches", fmt::format("echo '{}#planted' > .git/branches/br", src),
         "git ls-remote br 2>/dev/null | grep -q refs/heads/planted && echo branches", "branches", "create",
         ".git/branches/br", "sh"},
        // Around the rules by moving what holds them: refused at the first move.
        {"renamed .git",
         "cp -r .git evil-moved && printf " + fsmonitor("renamed") +
             " >> evil-moved/config && mv .git g && echo ../evil-moved > g/commondir && mv g .git",
         ran_by_status("renamed"), "renamed", "rename", ".git", "mv"},
        {"renamed objects",
         fmt::format("mv .git/objects o && echo {}/.git/objects > o/info/alternates && mv o .git/objects", src),
         followed_alternates, "alternates", "rename", ".git/objects", "mv"},
        // Or by putting a symlink where a directory above them was.
        {"replaced objects/info",
         fmt::format("rm -rf .git/objects/info && mkdir pub && ln -s ../../pub .git/objects/info && "
                     "echo {}/.git/objects > .git/objects/info/alternates",
                     src),
         followed_alternates, "alternates", "symlink", ".git/objects/info", "ln"},
    };

    Result prep = run_unconfined(checkout_cmd());
    ASSERT_EQ(prep.status, 0) << prep.describe();
    const std::string config = read_file(w + "/.git/config");
    Result r = plant_confined("", vectors);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "done\n") << r.describe();
    for (const auto& v : vectors) EXPECT_DENIAL(r, v.op, w + "/" + v.target, v.comm) << v.name;
    EXPECT_EQ(r.audit.size(), vectors.size()) << r.describe();
    EXPECT_EQ(read_file(w + "/.git/config"), config);
    for (const char* rel : {".git/commondir", ".git/config.worktree", ".git/objects/info/alternates", ".git/remotes",
                            ".git/branches/br", ".git/hooks/pre-commit", "g", "o", "pub/alternates"})
        EXPECT_FALSE(exists(w + "/" + rel)) << rel << " was planted\n" << r.describe();
    Result after = probe(vectors);
    EXPECT_EQ(after.out, "") << "the account's git ran or followed what a confined job planted\n" << after.describe();

    controls(vectors, [&](const std::string&) { return checkout_cmd(); });
}

// A directory above a protected path (a guard) that is missing may be made,
// as git makes it, but not be a symlink to where the job may write.
TEST_F(GitTest, AMissingDirectoryAboveAProtectedPathCanBeMadeButNotLinked) {
    const std::string prep = checkout_cmd() + " && rm -rf .git/objects/info";
    const std::string plant = fmt::format(
        "mkdir pub && ln -s ../../pub .git/objects/info && echo {}/.git/objects > .git/objects/info/alternates",
        shared("src"));
    const std::string followed = fmt::format("git cat-file -e {} 2>/dev/null && echo followed", only_upstream_);

    const std::string dir = at("control");
    make_dir(dir);
    Result control = run_unconfined(fmt::format("cd {} && {} && {} && {}", dir, prep, plant, followed));
    ASSERT_EQ(control.out, "followed\n") << control.describe();

    ASSERT_EQ(run_unconfined(prep).status, 0);
    Result r = run_confined("", "( " + plant + " ) 2>/dev/null || echo refused; mkdir .git/objects/info && echo made");
    EXPECT_EQ(r.out, "refused\nmade\n") << r.describe();
    EXPECT_DENIAL(r, "symlink", work() + "/.git/objects/info", "ln");
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
    EXPECT_EQ(run_unconfined(followed).out, "");
}

// A work tree without .git (the runner checks out later, or the work tree
// is a directory inside a repository): a .git the job creates, directory,
// symlink or file, could point the account's git anywhere.
TEST_F(GitTest, AJobCannotCreateDotGitWhereThereIsNone) {
    const std::string w = work();
    auto evil = [&](const std::string& name) {
        return fmt::format("{} init -q {} && printf {} >> {}/.git/config", kJobGit, name, fsmonitor(name), name);
    };
    const std::vector<Vector> vectors = {
        {"directory", evil("evil-dir") + " && mkdir .git && cp -r evil-dir/.git/. .git/", ran_by_status("evil-dir"),
         "evil-dir", "mkdir", ".git", "mkdir"},
        {"symlink", evil("evil-link") + " && ln -s evil-link/.git .git", ran_by_status("evil-link"), "evil-link",
         "symlink", ".git", "ln"},
        {"gitfile", evil("evil-file") + " && echo \"gitdir: $PWD/evil-file/.git\" > .git", ran_by_status("evil-file"),
         "evil-file", "create", ".git", "sh"},
    };

    Result r = plant_confined("", vectors);
    EXPECT_EQ(r.out, "done\n") << r.describe();
    EXPECT_FALSE(fs::exists(fs::symlink_status(w + "/.git"))) << r.describe();
    for (const auto& v : vectors) EXPECT_DENIAL(r, v.op, w + "/" + v.target, v.comm) << v.name;
    EXPECT_EQ(r.audit.size(), vectors.size()) << r.describe();
    Result after = probe(vectors);
    EXPECT_EQ(after.out, "") << after.describe();

    controls(vectors, [](const std::string&) { return "true"; });
}

// A filesystem made by MKFS on a loop image of SIZE and mounted at DIR
// with OPTIONS for a test's duration; error() says why it could not be, ""
// once it is.
class LoopFs {
public:
    LoopFs(std::string dir, const std::string& mkfs, const std::string& options, const char* size = "32M")
        : dir_(std::move(dir)) {
        Process p = Process::start(
            {.argv = {"/bin/sh", "-c",
                      fmt::format("set -e; truncate -s {3} {0}.img; {1} {0}.img >/dev/null; mkdir -p {0}; "
                                  "mount -o loop{2} {0}.img {0}; chmod 755 {0}",
                                  dir_, mkfs, options.empty() ? "" : "," + options, size)}});
        Result r = p.wait();
        if (r.status != 0) error_ = r.describe();
    }
    ~LoopFs() {
        Process::start({.argv = {"/bin/umount", "-l", dir_}}).wait();
        fs::remove(dir_ + ".img");
    }
    LoopFs(const LoopFs&) = delete;
    LoopFs& operator=(const LoopFs&) = delete;
    const std::string& error() const { return error_; }

private:
    std::string dir_, error_;
};

// Where a directory folds case (chattr +F), `.git/COMMONDIR` is the file
// the account's git reads as `.git/commondir`, and `.GIT` its `.git`. The
// rules name paths byte for byte, and a kernel's Unicode folding is beyond
// them: below a case-insensitive directory that rules lie below (the work
// tree, under protect_git), every access is refused, reason `casefold`.
// Below one that no rule lies below, names are decided alike, whatever
// their case: a job's own case-insensitive directory works.
TEST_F(GitTest, CaseVariantsOfProtectedNamesAreRefusedWhereNamesFoldCase) {
    const std::string ci = at("ci");
    LoopFs mounted(ci, "mkfs.ext4 -q -O casefold -E encoding=utf8", "");
    ASSERT_EQ(mounted.error(), "") << "making a case-insensitive filesystem failed";
    const std::string w = ci + "/w", bare = ci + "/bare", plain = ci + "/plain";
    // What each plants, and how the account's git shows it ran (token).
    struct Plant {
        std::string name, plant, check, token;
    };
    const std::vector<Plant> plants = {
        {"COMMONDIR",
         "cp -r .git evil-common && printf " + fsmonitor("commondir") +
             " >> evil-common/config && echo ../evil-common > .git/COMMONDIR",
         ran_by_status("commondir"), "commondir"},
        {"ALTERNATES", fmt::format("echo {}/.git/objects > .git/objects/info/ALTERNATES", shared("src")),
         fmt::format("git cat-file -e {} 2>/dev/null && echo alternates", only_upstream_), "alternates"},
    };
    const Plant dotgit{"GIT",
                       fmt::format("{} init -q evil && printf {} >> evil/.git/config && cp -r evil/.git .GIT", kJobGit,
                                   fsmonitor("dotgit")),
                       ran_by_status("dotgit"), "dotgit"};
    // The controls: each in a case-insensitive copy, unconfined.
    for (size_t i = 0; i <= plants.size(); ++i) {
        const Plant& v = i < plants.size() ? plants[i] : dotgit;
        const std::string dir = fmt::format("{}/control-{}", ci, i);
        make_dir(dir);
        ASSERT_EQ(run_root("chattr +F " + dir).status, 0);
        Result c = run_unconfined(fmt::format("set -e; cd {}; {}; ( {} ); set +e; {}", dir,
                                              &v == &dotgit ? "true" : checkout_cmd(), v.plant, v.check));
        EXPECT_EQ(c.out, v.token + "\n") << v.name << ": planted without confine, the account's git did not run it\n"
                                         << c.describe();
    }

    for (const std::string& d : {w, bare}) {
        make_dir(d);
        ASSERT_EQ(run_root("chattr +F " + d).status, 0);
    }
    ASSERT_EQ(run_unconfined(fmt::format("cd {} && {}", w, checkout_cmd())).status, 0);
    // Each vector's write itself, and a read of the work tree.
    Result r = run({.workdir = w,
                    .argv = {"/bin/sh", "-c",
                             "echo ../evil > .git/COMMONDIR; echo /x > .git/objects/info/ALTERNATES; "
                             "cat README >/dev/null || echo refused"}});
    EXPECT_EQ(r.out, "refused\n") << r.describe();
    for (auto [op, target] : {std::pair{"create", "/.git/COMMONDIR"},
                              {"create", "/.git/objects/info/ALTERNATES"},
                              {"open_read", "/README"}}) {
        const AuditLine* l = find_line(r, op, w + target);
        ASSERT_NE(l, nullptr) << target << "\n" << r.describe();
        EXPECT_EQ(l->str("reason"), "casefold") << l->raw;
        EXPECT_EQ(l->str("verdict"), "deny") << l->raw;
    }
    for (const char* rel : {"/.git/commondir", "/.git/objects/info/alternates"})
        EXPECT_FALSE(exists(w + rel)) << rel << "\n" << r.describe();

    // A dentry spelled unlike the rule (here the name on disk; a lookup in
    // another case after the dentry was evicted does the same): times,
    // xattrs and ACLs are decided through each mount of the filesystem,
    // and must take no name's case as final either.
    ASSERT_EQ(run_unconfined(fmt::format("cd {} && mv .git/hooks .git/h && mv .git/h .git/HOOKS", w)).status, 0);
    const std::string touch_hooks = "touch -c -d @1000000000 .git/hooks";
    Result tc = run_unconfined(
        fmt::format("cd {}/control-0 && mv .git/hooks .git/h && mv .git/h .git/HOOKS && {}", ci, touch_hooks));
    EXPECT_EQ(tc.status, 0) << tc.describe();
    Result rt = run({.workdir = w, .argv = {"/bin/sh", "-c", touch_hooks + " || echo refused"}});
    EXPECT_EQ(rt.out, "refused\n") << rt.describe();
    const AuditLine* t = find_line(rt, "setattr", w + "/.git/HOOKS");
    ASSERT_NE(t, nullptr) << rt.describe();
    EXPECT_EQ(t->str("reason"), "casefold") << t->raw;

    Result rb = run({.workdir = bare, .argv = {"/bin/sh", "-c", "mkdir .GIT || echo refused"}});
    EXPECT_EQ(rb.out, "refused\n") << rb.describe();
    const AuditLine* l = find_line(rb, "mkdir", bare + "/.GIT");
    ASSERT_NE(l, nullptr) << rb.describe();
    EXPECT_EQ(l->str("reason"), "casefold") << l->raw;

    // A work tree that a job makes case-insensitive itself (it must be
    // empty), after a create that let its directory's cache slot allow
    // every name no rule has.
    const std::string self = ci + "/self", self_control = ci + "/self-control";
    const std::string fold_then_plant = "touch a && rm a && chattr +F . && mkdir .GIT";
    for (const std::string& d : {self, self_control}) make_dir(d);
    Result sc = run_unconfined(fmt::format("cd {} && {} && echo made", self_control, fold_then_plant));
    EXPECT_EQ(sc.out, "made\n") << sc.describe();
    Result rs = run({.workdir = self, .argv = {"/bin/sh", "-c", fold_then_plant + " || echo refused"}});
    EXPECT_EQ(rs.out, "refused\n") << rs.describe();
    l = find_line(rs, "mkdir", self + "/.GIT");
    ASSERT_NE(l, nullptr) << rs.describe();
    EXPECT_EQ(l->str("reason"), "casefold") << l->raw;

    // A case-insensitive directory of the job's own, in a work tree that
    // isn't: no rule lies below it.
    make_dir(plain);
    Result own = run({.workdir = plain,
                      .argv = {"/bin/sh", "-c", "mkdir own && chattr +F own && echo x > own/Name && cat own/NAME"}});
    EXPECT_EQ(own.status, 0) << own.describe();
    EXPECT_EQ(own.out, "x\n") << own.describe();
    EXPECT_TRUE(own.audit.empty()) << own.describe();
}

// A repository with one commit, made in the current directory: vfat can't
// keep the pristine checkout's modes and owners (`cp -a`).
constexpr const char* kNewRepo =
    "git init -q && echo hi > README && git add README && git -c user.email=a@b -c user.name=a commit -qm init";

// vfat (like exfat, hfsplus, cifs with nocase) folds names in every
// directory, with no encoding and no S_CASEFOLD: it compares names its own
// way (d_compare), and also finds `.git` as `GIT~1`. A work tree there is
// refused as one marked +F is (above). Below such a mount that no rule
// lies below, names are decided alike.
TEST_F(GitTest, ProtectedNamesAreRefusedOnFilesystemsThatFoldEveryName) {
    const std::string kFatOptions = fmt::format("uid=$(id -u {0}),gid=$(id -g {0}),quiet", kUser);
    const std::string fat = at("fat");
    LoopFs mounted(fat, "mkfs.vfat", kFatOptions);
    ASSERT_EQ(mounted.error(), "") << "making a vfat filesystem failed";
    const std::string w = fat + "/w", control = fat + "/control";
    const std::string plant = "echo ../evil > .git/COMMONDIR; echo x >> GIT~1/config; cat README >/dev/null";
    for (const std::string& d : {w, control}) {
        Result made = run_unconfined(fmt::format("mkdir {0} && cd {0} && {1}", d, kNewRepo));
        ASSERT_EQ(made.status, 0) << made.describe();
    }
    // The control: both names reach git's files, unconfined.
    Result c = run_unconfined(fmt::format("cd {} && {} && cat .git/commondir && tail -1 .git/config", control, plant));
    EXPECT_EQ(c.out, "../evil\nx\n") << c.describe();

    const std::string config = read_file(w + "/.git/config");
    Result r = run({.workdir = w, .argv = {"/bin/sh", "-c", plant + " || echo refused"}});
    EXPECT_EQ(r.out, "refused\n") << r.describe();
    // vfat names a directory found by its 8.3 alias by the dentry it has
    // (`.git`), if cached: the write's line names either.
    const AuditLine* alias = find_line(r, "open_write", w + "/GIT~1/config");
    const AuditLine* by_name = find_line(r, "open_write", w + "/.git/config");
    ASSERT_TRUE(alias || by_name) << r.describe();
    for (const AuditLine* l : {find_line(r, "create", w + "/.git/COMMONDIR"), alias ? alias : by_name,
                               find_line(r, "open_read", w + "/README")}) {
        ASSERT_NE(l, nullptr) << r.describe();
        EXPECT_EQ(l->str("reason"), "casefold") << l->raw;
        EXPECT_EQ(l->str("verdict"), "deny") << l->raw;
    }
    EXPECT_FALSE(exists(w + "/.git/commondir")) << r.describe();
    EXPECT_EQ(read_file(w + "/.git/config"), config);

    // A work tree at a vfat's root, which folds its entries' names but not
    // its own name. Opening it decides its entries too: that decision once
    // let every name no rule has be made there, `.GIT` among them.
    const std::string top = at("fat-top");
    LoopFs top_fs(top, "mkfs.vfat", kFatOptions);
    ASSERT_EQ(top_fs.error(), "") << "making a vfat filesystem failed";
    Result tc = run_unconfined(fmt::format("cd {} && mkdir .GIT && ls -d .git && rmdir .git", top));
    EXPECT_EQ(tc.out, ".git\n") << tc.describe();
    Result t = run({.workdir = top, .argv = {"/bin/sh", "-c", "ls >/dev/null; mkdir .GIT || echo refused"}});
    EXPECT_EQ(t.out, "refused\n") << t.describe();
    EXPECT_FALSE(exists(top + "/.git")) << t.describe();
    for (const AuditLine* l : {find_line(t, "open_read", top), find_line(t, "mkdir", top + "/.GIT")}) {
        ASSERT_NE(l, nullptr) << t.describe();
        EXPECT_EQ(l->str("reason"), "casefold") << l->raw;
    }

    // A vfat mounted in a work tree that isn't one: no rule lies below it.
    const std::string plain = at("plain"), inner = plain + "/media";
    make_dir(plain);
    LoopFs inner_fs(inner, "mkfs.vfat", kFatOptions);
    ASSERT_EQ(inner_fs.error(), "") << "making a vfat filesystem failed";
    Result own = run({.workdir = plain, .argv = {"/bin/sh", "-c", "echo x > media/Name && cat media/NAME"}});
    EXPECT_EQ(own.status, 0) << own.describe();
    EXPECT_EQ(own.out, "x\n") << own.describe();
    EXPECT_TRUE(own.audit.empty()) << own.describe();
}

// XFS made with `-n version=ci` folds names in its lookup, with no dentry
// operations the BPF walk could see. No rule below such a mount can be
// held by name: the job could create `.git/COMMONDIR`, which git later
// reads as commondir. So confine refuses to start such a job. 7.2 no
// longer mounts such a filesystem.
TEST_F(GitTest, AWorkTreeOnCaseInsensitiveXfsIsRefusedAtStart) {
    const std::string ci = at("xfs-ci"), plain = at("xfs");
    LoopFs folding(ci, "mkfs.xfs -q -n version=ci", "", "320M");
    utsname u{};
    uname(&u);
    if (!folding.error().empty()) {
        EXPECT_GE(atoi(u.release), 7) << "only 7.x refuses ascii-ci XFS; here:\n" << folding.error();
        return;
    }
    LoopFs ordinary(plain, "mkfs.xfs -q", "", "320M");
    ASSERT_EQ(ordinary.error(), "") << "making an XFS filesystem failed";
    for (const std::string& fs : {ci, plain}) {
        ASSERT_EQ(run_root(fmt::format("chown {} {}", kUser, fs)).status, 0);
        Result made = run_unconfined(
            fmt::format("mkdir {0}/w {0}/control && cd {0}/w && {1} && cd {0}/control && {1}", fs, kNewRepo));
        ASSERT_EQ(made.status, 0) << made.describe();
    }
    // The control: a new name in another case is git's file.
    Result c = run_unconfined(fmt::format("cd {}/control && echo ../evil > .git/COMMONDIR && cat .git/commondir", ci));
    EXPECT_EQ(c.out, "../evil\n") << c.describe();

    // The work tree; the same spelled in another case (the rules would
    // name W, the kernel w); one with no .git yet, where the job would make
    // `.GIT`.
    make_dir(ci + "/bare");
    for (const char* dir : {"/w", "/W", "/bare"}) {
        Result r = run({.workdir = ci + dir,
                        .argv = {"/bin/sh", "-c", "echo ../evil > .git/COMMONDIR; mkdir .GIT; echo started"}});
        EXPECT_EQ(r.status, 125) << dir << "\n" << r.describe();
        EXPECT_EQ(r.out, "") << r.describe();
        EXPECT_NE(r.err.find("XFS made case-insensitive"), std::string::npos) << r.describe();
    }
    EXPECT_FALSE(exists(ci + "/w/.git/commondir"));
    EXPECT_FALSE(exists(ci + "/bare/.git"));

    // An ordinary XFS work tree starts, and protect_git holds there.
    Result o = run({.workdir = plain + "/w", .argv = {"/bin/sh", "-c", "echo ../evil > .git/commondir || cat README"}});
    EXPECT_EQ(o.status, 0) << o.describe();
    EXPECT_EQ(o.out, "hi\n") << o.describe();
    EXPECT_DENIAL(o, "create", plain + "/w/.git/commondir", "sh");
}

// A linked worktree (`git worktree add`): .git is a file naming the
// per-worktree git directory in the main repository, whose commondir names
// the main .git. protect_git follows both. The runner lets the job write the
// main repository (else it couldn't commit).
TEST_F(GitTest, ALinkedWorktreesGitfileAndGitDirectoriesAreProtected) {
    // The main repository in DIR/main, the worktree in DIR/work.
    auto setup = [&](const std::string& dir) {
        return fmt::format("mkdir -p {0}/main {0}/work; {1}; cd {0}/main; git worktree add -q {0}/work; cd {0}/work",
                           dir, checkout_cmd(dir + "/main"));
    };
    auto vectors_in = [&](const std::string& main) {
        const std::string wt = main + "/.git/worktrees/work";
        return std::vector<Vector>{
            {"gitfile",
             fmt::format("{} init -q evil && printf {} >> evil/.git/config && echo \"gitdir: $PWD/evil/.git\" > .git",
                         kJobGit, fsmonitor("gitfile")),
             ran_by_status("gitfile"), "gitfile", "open_write", ".git", "sh"},
            {"commondir",
             fmt::format("cp -r {0}/.git evil-common && printf {1} >> evil-common/config && "
                         "echo $PWD/evil-common > {2}/commondir",
                         main, fsmonitor("commondir"), wt),
             ran_by_status("commondir"), "commondir", "open_write", wt + "/commondir", "sh"},
            {"config.worktree", fmt::format("printf {} > {}/config.worktree", fsmonitor("config-worktree"), wt),
             ran_by_status("config-worktree"), "config-worktree", "create", wt + "/config.worktree", "sh"},
            {"main hooks", hook(main + "/.git/hooks", "hooks"), ran_by_commit("hooks"), "hooks", "create",
             main + "/.git/hooks/pre-commit", "sh"},
        };
    };

    const std::string w = work(), main = base() + "/main";
    make_dir(main);
    Result prep = run_unconfined("set -e; " + setup(base()));
    ASSERT_EQ(prep.status, 0) << prep.describe();
    const std::string policy = make_policy({.write = {main, "/dev/null"}, .protect_git = {"{workdir}"}});
    const auto vectors = vectors_in(main);
    // The agent's own work in the worktree still goes through.
    Result r = plant_confined(
        policy, vectors, fmt::format("echo change >> README && {} commit -qam change && echo committed; ", kJobGit));
    EXPECT_EQ(r.out, "committed\ndone\n") << r.describe();
    for (const auto& v : vectors)
        EXPECT_DENIAL(r, v.op, v.target.starts_with('/') ? v.target : w + "/" + v.target, v.comm) << v.name;
    EXPECT_EQ(r.audit.size(), vectors.size()) << r.describe();
    Result after = probe(vectors);
    EXPECT_EQ(after.out, "") << after.describe();

    // controls() runs each vector in control-I; its main repository is in
    // control-I/main.
    std::vector<Vector> control_vectors;
    for (size_t i = 0; i < vectors.size(); ++i)
        control_vectors.push_back(vectors_in(at(fmt::format("control-{}", i)) + "/main")[i]);
    controls(control_vectors, setup);
}

TEST_F(GitTest, OrdinaryAgentGitWorkRunsWithoutADenial) {
    Result prep = run_unconfined(checkout_cmd());
    ASSERT_EQ(prep.status, 0) << prep.describe();
    // Not `git branch -d/-m`: they rewrite .git/config even when it has no
    // section for the branch (docs/design.md "What git trusts").
    const std::string cmd =
        "set -e; git config --global user.name job; git config --global user.email job@vmtest; "
        "main=$(git branch --show-current); "
        "echo a >> README; git add README; git commit -qm a; "
        "git checkout -q -b feature; echo b > b; git add b; git commit -qm b; "
        "git checkout -q \"$main\"; echo c > c; git add c; git commit -qm c; "
        "echo wip >> README; git stash -q; git stash pop -q; git commit -qam wip; "
        "git merge -q --no-edit feature; "
        "git checkout -q feature; git rebase -q \"$main\"; git checkout -q \"$main\"; git tag v1; "
        "git worktree add -q wt; git -C wt log --oneline | wc -l; git worktree remove wt; "
        "git gc -q; "
        "git diff HEAD~1 --stat >/dev/null; git status --short; git log --oneline | wc -l";
    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "6\n6\n") << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
    EXPECT_TRUE(exists(work() + "/.git/objects/info/commit-graph"));
}

// Residual risk, not closed by path rules: a nested repository the job adds
// as a submodule (a gitlink in the index and a .git in the work tree). The
// account's `git status` recurses into it and runs its config. Either of
// docs/contract.md's remedies keeps git out: --ignore-submodules=all, or
// no .git below the top (then `add -A` and `commit -a` are safe too).
TEST_F(GitTest, ResidualASubmoduleTheJobAddsIsSafeOnlyWithTheRemedies) {
    Result prep = run_unconfined(checkout_cmd());
    ASSERT_EQ(prep.status, 0) << prep.describe();
    const std::string cmd = fmt::format(
        "set -e; {0} init -q sub; cd sub; echo a > a; git add a; {0} commit -qm s; cd ..; "
        "git add sub 2>/dev/null; {0} commit -qm sub; printf {1} >> sub/.git/config; echo planted",
        kJobGit, fsmonitor("submodule"));
    Result r = run_confined("", cmd);
    EXPECT_EQ(r.out, "planted\n") << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();

    const std::string marker = marks_ + "/submodule";
    Result safe = run_unconfined(fmt::format(
        "{1} status --ignore-submodules=all >/dev/null; {1} diff --ignore-submodules=all >/dev/null; "
        "test -e {0} && echo ran-ignoring; git status >/dev/null; test -e {0} && echo ran-plain; rm -f {0}; "
        "find {2} -mindepth 2 -name .git -prune -exec rm -rf {{}} +; echo more >> README; {1} add -A; "
        "{1} -c user.name=acct -c user.email=acct@vmtest commit -qam more; test -e {0} && echo ran-after-find",
        marker, fmt::format("git --git-dir={0}/.git --work-tree={0}", work()), work()));
    EXPECT_EQ(safe.out, "ran-plain\n")
        << "want: the job's code runs with plain `git status` (if that changed, update docs/design.md), and "
           "not with either remedy\n"
        << safe.describe();
}

// Residual risk, not closed by path rules: the job breaks .git (HEAD must
// stay writable) and makes the work tree itself look like a git directory;
// git's discovery then takes the work tree for a repository with the job's
// config. Naming the git directory (--git-dir, or GIT_DIR) fails closed
// instead; so does safe.bareRepository=explicit.
TEST_F(GitTest, ResidualABrokenDotGitIsSafeOnlyWithAnExplicitGitDir) {
    Result prep = run_unconfined(checkout_cmd());
    ASSERT_EQ(prep.status, 0) << prep.describe();
    const std::string w = work();
    const std::string cmd = fmt::format(
        "set -e; echo garbage > .git/HEAD; echo 'ref: refs/heads/master' > HEAD; mkdir objects refs; "
        "cp -r .git/objects/. objects/; cp -r .git/refs/. refs/; "
        "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = %s\\n' \"$PWD\" > config; "
        "printf {} >> config; "
        "echo planted",
        fsmonitor("bare"));
    Result r = run_confined("", cmd);
    EXPECT_EQ(r.out, "planted\n") << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();

    const std::string marker = marks_ + "/bare";
    Result safe = run_unconfined(fmt::format(
        "git --git-dir={0}/.git --work-tree={0} status --ignore-submodules=all >/dev/null 2>&1; echo \"rc=$?\"; "
        "git -c safe.bareRepository=explicit status >/dev/null 2>&1; echo \"rc=$?\"; "
        "test -e {1} && echo ran-safe; git status >/dev/null 2>&1; test -e {1} && echo ran-plain",
        w, marker));
    EXPECT_EQ(safe.out, "rc=128\nrc=128\nran-plain\n")
        << "want: both safe forms fail closed, plain `git status` runs the job's code "
           "(if that changed, update docs/design.md)\n"
        << safe.describe();
}

}  // namespace
}  // namespace vmtest
