// Tests of policy/compile.cpp: variable expansion, symlink resolution, and
// the longest-prefix precedence of the contract, checked through the access
// the compiled table grants to concrete paths.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "policy/policy.h"

namespace confine::policy {

// How gtest shows a table entry in a failure.
void PrintTo(const FsTableEntry& e, std::ostream* os) {
    *os << "{" << e.prefix << " access=" << int(e.access) << (e.guard ? " guard" : "")
        << (e.listable ? " listable" : "") << "}";
}

namespace {

namespace fs = std::filesystem;

constexpr uint8_t kNone = 0, kRX = kRead | kExec, kRWX = kRead | kWrite | kExec;

std::vector<std::string> prefixes(const Compiled& c) {
    std::vector<std::string> out;
    for (const auto& e : c.fs) out.push_back(e.prefix);
    return out;
}

// Each test gets a fresh directory, with symlinks resolved, so the paths in
// its rules exist (or not) exactly as the test arranges.
class Compile : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = ::testing::TempDir() + "confine_compile_test_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        char real[PATH_MAX];
        ASSERT_NE(realpath(tmpl.c_str(), real), nullptr);
        root_ = real;
        vars_ = {root_ + "/user/work", root_ + "/jobhome", root_ + "/jobtmp", root_ + "/user"};
    }
    void TearDown() override { fs::remove_all(root_); }

    // The policy in TEXT, with every '@' standing for the test's directory.
    Policy policy(std::string_view text) {
        std::string t;
        for (char ch : text) t += ch == '@' ? root_ : std::string(1, ch);
        auto p = parse(t, "p.toml");
        if (!p) {
            for (const auto& d : p.error()) ADD_FAILURE() << d.str();
            return {};
        }
        return *p;
    }

    Compiled compiled(std::string_view text) {
        auto c = compile(policy(text), vars_);
        if (!c) {
            ADD_FAILURE() << c.error().message;
            return {};
        }
        return *c;
    }

    std::string at(std::string_view rel) const { return root_ + std::string(rel); }
    // render()'s line for the directories above root_, which no rule covers.
    std::string listable_line() const {
        std::string out = "# may be listed (names only): [\"/\"";
        for (size_t i = root_.find('/', 1); i != std::string::npos; i = root_.find('/', i + 1))
            out += ", \"" + root_.substr(0, i) + "\"";
        return out + ", \"" + root_ + "\"]\n";
    }

    std::string root_;
    Vars vars_;
};

TEST_F(Compile, DefaultPolicyCompiles) {
    fs::create_directories(at("/user/work/.git"));
    auto c = compile(default_policy(), vars_);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->mode, Mode::Enforce);
    EXPECT_FALSE(c->user_namespaces);
    EXPECT_EQ(c->env_keep, (std::vector<std::string>{"PATH", "LANG", "LC_ALL", "TERM"}));

    EXPECT_EQ(access_at(*c, "/usr/bin/sh"), kRX);
    EXPECT_EQ(access_at(*c, "/etc/passwd"), kRX);
    EXPECT_EQ(access_at(*c, "/dev/null"), kRWX);
    EXPECT_EQ(access_at(*c, "/dev/urandom"), kRX);
    EXPECT_EQ(access_at(*c, "/proc/self/status"), kRX);
    EXPECT_EQ(access_at(*c, "/dev/sda"), kNone);
    EXPECT_EQ(access_at(*c, "/root/.bashrc"), kNone);
    EXPECT_EQ(access_at(*c, "/var/run/docker.sock"), kNone);

    EXPECT_EQ(access_at(*c, at("/user/work/src/main.c")), kRWX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/HEAD")), kRWX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/hooks")), kRX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/hooks/pre-commit")), kRX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/config")), kRX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/config.lock")), kRWX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/commondir")), kRX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/objects/info/alternates")), kRX);
    EXPECT_EQ(access_at(*c, at("/user/work/.git/objects/info/commit-graph")), kRWX);
    EXPECT_EQ(access_at(*c, at("/user/.ssh/id_ed25519")), kNone);
    EXPECT_EQ(access_at(*c, at("/user/.claude/.credentials.json")), kNone);
    EXPECT_EQ(access_at(*c, at("/jobhome/.cache/x")), kRWX);
    EXPECT_EQ(access_at(*c, at("/jobtmp/x")), kRWX);

    // Nothing covers "/", so anything not granted is denied by absence.
    for (const auto& e : c->fs) EXPECT_NE(e.prefix, "/");
    auto ps = prefixes(*c);
    EXPECT_TRUE(std::is_sorted(ps.begin(), ps.end()));
    EXPECT_EQ(std::adjacent_find(ps.begin(), ps.end()), ps.end());
}

TEST_F(Compile, ExpandsEachVariable) {
    auto c = compiled(R"(version = 1
[filesystem]
read = ["{workdir}/a", "{home}/b", "{tmp}/c", "{user_home}/d", "{workdir}"]
)");
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{at("/jobhome/b"), at("/jobtmp/c"), at("/user/d"), at("/user/work"),
                                                     at("/user/work/a")}));
}

TEST_F(Compile, NormalizesRulesLexically) {
    auto c = compiled("version = 1\n[filesystem]\nread = [\"@//a/./b/\", \"{workdir}/\"]\n");
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{at("/a/b"), at("/user/work")}));
}

TEST_F(Compile, RejectsDotDotWithTheRuleAndItsPosition) {
    Policy p;
    p.source = "p.toml";
    p.fs.write.push_back({"{workdir}/../x", {4, 10}});
    auto c = compile(p, vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "p.toml:4:10: rule '{workdir}/../x' contains '..'");
}

TEST_F(Compile, RejectsDotDotInAVariablesValue) {
    Policy p;
    p.source = "p.toml";
    p.fs.write.push_back({"{workdir}/x", {4, 10}});
    vars_.workdir = at("/a/../b");
    auto c = compile(p, vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message,
              "p.toml:4:10: rule '{workdir}/x' expands to '" + at("/a/../b/x") + "', which contains '..'");
}

TEST_F(Compile, RejectsRelativeVariablesAndUnknownOnes) {
    Policy p;
    p.source = "p.toml";
    p.fs.read.push_back({"{home}", {2, 3}});
    vars_.home = "";
    auto c = compile(p, vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "p.toml:2:3: rule '{home}': {home} is '', not an absolute path");

    p.fs.read = {{"{nope}/x", {2, 3}}};
    c = compile(p, vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "p.toml:2:3: rule '{nope}/x' uses an unknown variable");

    p.fs.read = {{"relative", {2, 3}}};
    c = compile(p, vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "p.toml:2:3: rule 'relative' is not an absolute path");
}

TEST_F(Compile, ResolvesSymlinksInRules) {
    fs::create_directories(at("/real/sub"));
    std::ofstream(at("/real/file")) << "x";
    fs::create_directory_symlink(at("/real"), at("/abs"));
    fs::create_directory_symlink("real", at("/rel"));
    fs::create_directory_symlink(at("/abs"), at("/chain"));
    auto c = compiled(R"(version = 1
[filesystem]
read = ["@/abs/sub", "@/rel/sub/x", "@/chain/sub/y"]
)");
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{at("/real/sub"), at("/real/sub/x"), at("/real/sub/y")}));
}

TEST_F(Compile, KeepsTheMissingTailOfARuleAfterResolvingItsExistingPart) {
    fs::create_directories(at("/real"));
    std::ofstream(at("/real/file")) << "x";
    fs::create_directory_symlink(at("/real"), at("/link"));
    auto c = compiled(R"(version = 1
[filesystem]
deny = ["@/link/not/yet/there", "@/real/file/below", "@/missing"]
)");
    EXPECT_EQ(prefixes(c),
              (std::vector<std::string>{at("/missing"), at("/real/file/below"), at("/real/not/yet/there")}));
}

TEST_F(Compile, FollowsADanglingSymlinkToWhereTheKernelWouldCreate) {
    fs::create_directories(at("/dir"));
    fs::create_directory_symlink(at("/gone/deeper"), at("/dangling"));
    fs::create_directory_symlink("../gone2", at("/dir/reldangling"));
    auto c = compiled(R"(version = 1
[filesystem]
deny = ["@/dangling/x", "@/dir/reldangling"]
)");
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{at("/gone/deeper/x"), at("/gone2")}));
}

TEST_F(Compile, SymlinkLoopIsAnError) {
    fs::create_symlink(at("/loop"), at("/loop"));
    auto c = compile(policy("version = 1\n[filesystem]\nread = [\"@/loop/x\"]\n"), vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().err, ELOOP);
    EXPECT_NE(c.error().message.find("p.toml:3:9: rule '" + at("/loop/x") + "'"), std::string::npos)
        << c.error().message;
}

TEST_F(Compile, RulesMeetAfterResolutionAndTieAsUsual) {
    fs::create_directories(at("/real"));
    fs::create_directory_symlink(at("/real"), at("/link"));
    auto c = compiled("version = 1\n[filesystem]\nwrite = [\"@/link\"]\ndeny = [\"@/real\"]\n");
    ASSERT_EQ(c.fs.size(), 1u);
    EXPECT_EQ(c.fs[0].prefix, at("/real"));
    EXPECT_EQ(c.fs[0].access, kNone);
}

TEST_F(Compile, MatchesWholeComponentsOnly) {
    auto c = compiled("version = 1\n[filesystem]\nread = [\"@/home/u\"]\n");
    EXPECT_EQ(access_at(c, at("/home/u")), kRX);
    EXPECT_EQ(access_at(c, at("/home/u/f")), kRX);
    EXPECT_EQ(access_at(c, at("/home/user")), kNone);
    EXPECT_EQ(access_at(c, at("/home/user/f")), kNone);
    EXPECT_EQ(access_at(c, at("/home")), kNone);
}

TEST_F(Compile, WritableWorkdirInsideADeniedHomeStaysWritable) {
    auto c = compiled(R"(version = 1
[filesystem]
deny = ["{user_home}"]
write = ["{workdir}"]
)");
    EXPECT_EQ(access_at(c, at("/user/work/file")), kRWX);
    EXPECT_EQ(access_at(c, at("/user/work")), kRWX);
    EXPECT_EQ(access_at(c, at("/user/.ssh/id_rsa")), kNone);
    EXPECT_EQ(access_at(c, at("/user/workshop")), kNone);
}

TEST_F(Compile, DenyInsideAWritableHomeClosesTheHole) {
    auto c = compiled(R"(version = 1
[filesystem]
write = ["{home}"]
deny = ["{home}/.ssh"]
)");
    EXPECT_EQ(access_at(c, at("/jobhome/x")), kRWX);
    EXPECT_EQ(access_at(c, at("/jobhome/.ssh")), kNone);
    EXPECT_EQ(access_at(c, at("/jobhome/.ssh/id_ed25519")), kNone);
    EXPECT_EQ(access_at(c, at("/jobhome/.sshrc")), kRWX);
}

TEST_F(Compile, LongerRuleWinsEvenWhenItGrantsLess) {
    auto c = compiled(R"(version = 1
[filesystem]
write = ["@/a"]
read = ["@/a/ro"]
deny_write = ["@/a/hooks"]
)");
    EXPECT_EQ(access_at(c, at("/a/x")), kRWX);
    EXPECT_EQ(access_at(c, at("/a/ro/x")), kRX);
    EXPECT_EQ(access_at(c, at("/a/hooks/x")), kRX);
}

TEST_F(Compile, LongerRuleWinsEvenWhenItGrantsMore) {
    auto c = compiled(R"(version = 1
[filesystem]
deny = ["@/a"]
read = ["@/a/b"]
write = ["@/a/b/c"]
)");
    EXPECT_EQ(access_at(c, at("/a/x")), kNone);
    EXPECT_EQ(access_at(c, at("/a/b/x")), kRX);
    EXPECT_EQ(access_at(c, at("/a/b/c/x")), kRWX);
}

TEST_F(Compile, TiesAtTheSamePathGoDenyThenDenyWriteThenWriteThenRead) {
    struct Case {
        std::string lists;
        uint8_t want;
    };
    const std::vector<Case> cases = {
        {"read = [\"@/p\"]\nwrite = [\"@/p\"]\ndeny_write = [\"@/p\"]\ndeny = [\"@/p\"]\n", kNone},
        {"deny = [\"@/p\"]\nread = [\"@/p\"]\n", kNone},
        {"read = [\"@/p\"]\nwrite = [\"@/p\"]\ndeny_write = [\"@/p\"]\n", kRX},
        {"write = [\"@/p\"]\ndeny_write = [\"@/p\"]\n", kRX},
        {"read = [\"@/p\"]\nwrite = [\"@/p\"]\n", kRWX},
        {"write = [\"@/p\", \"@/p/\"]\n", kRWX},
        {"read = [\"@/p\"]\n", kRX},
    };
    for (const auto& tc : cases) {
        auto c = compiled("version = 1\n[filesystem]\n" + tc.lists);
        ASSERT_EQ(c.fs.size(), 1u) << tc.lists;
        EXPECT_EQ(c.fs[0].access, tc.want) << tc.lists;
    }
}

TEST_F(Compile, WithoutAnExecListExecFollowsRead) {
    auto c = compiled(R"(version = 1
[filesystem]
read = ["@/r"]
write = ["@/w"]
deny_write = ["@/w/dw"]
deny = ["@/r/d"]
)");
    EXPECT_EQ(access_at(c, at("/r/x")), kRX);
    EXPECT_EQ(access_at(c, at("/w/x")), kRWX);
    EXPECT_EQ(access_at(c, at("/w/dw/x")), kRX);
    EXPECT_EQ(access_at(c, at("/r/d/x")), kNone);
}

TEST_F(Compile, WithAnExecListOnlyReadableListedPathsExecute) {
    auto c = compiled(R"(version = 1
[filesystem]
read = ["@/usr"]
write = ["{workdir}"]
deny = ["@/usr/bin/bad"]
exec = ["@/usr/bin", "@/opt/tool"]
)");
    EXPECT_EQ(access_at(c, at("/usr/bin/ls")), kRX);
    EXPECT_EQ(access_at(c, at("/usr/lib/libc.so")), kRead);
    EXPECT_EQ(access_at(c, at("/usr/bin/bad")), kNone);
    EXPECT_EQ(access_at(c, at("/user/work/a.out")), kRead | kWrite);
    // Listing a path for exec grants nothing by itself, but still gets an entry.
    EXPECT_EQ(access_at(c, at("/opt/tool/run")), kNone);
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{at("/opt/tool"), at("/user/work"), at("/usr"), at("/usr/bin"),
                                                     at("/usr/bin/bad")}));
}

TEST_F(Compile, EmptyExecListForbidsAllExecution) {
    auto c = compiled("version = 1\n[filesystem]\nread = [\"@/r\"]\nexec = []\n");
    EXPECT_EQ(access_at(c, at("/r/x")), kRead);
}

TEST_F(Compile, OneSortedEntryPerDistinctPrefix) {
    auto c = compiled(R"(version = 1
[filesystem]
read = ["@/b", "@/a", "@/a/"]
write = ["@/a-b"]
exec = ["@/a"]
)");
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{at("/a"), at("/a-b"), at("/b")}));
    EXPECT_EQ(c.fs[0].access, kRX);
    EXPECT_EQ(c.fs[1].access, kRead | kWrite);
    EXPECT_EQ(c.fs[2].access, kRead);
}

TEST_F(Compile, RootEntryOnlyWhenARuleCoversRoot) {
    auto c = compiled("version = 1\n[filesystem]\nread = [\"/\"]\ndeny = [\"@\"]\n");
    ASSERT_FALSE(c.fs.empty());
    EXPECT_EQ(c.fs[0].prefix, "/");
    EXPECT_EQ(access_at(c, "/anything/at/all"), kRX);
    EXPECT_EQ(access_at(c, at("/x")), kNone);
}

TEST_F(Compile, RulePathMustFitTheBpfKey) {
    // 247 bytes of path plus the trailing '/' fill CONFINE_RULE_PATH_MAX (248).
    std::string fits = root_ + "/" + std::string(247 - root_.size() - 1, 'x');
    ASSERT_EQ(fits.size(), 247u);
    auto ok = compile(policy("version = 1\n[filesystem]\ndeny = [\"" + fits + "\"]\n"), vars_);
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->fs[0].prefix, fits);

    std::string too_long = fits + "y";
    auto bad = compile(policy("version = 1\n[filesystem]\ndeny = [\"" + too_long + "\"]\n"), vars_);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message,
              "p.toml:3:9: rule '" + too_long + "' resolves to a path of 248 bytes ('" + too_long.substr(0, 40) +
                  "...'); rule paths may have at most 247 bytes (CONFINE_RULE_PATH_MAX is 248 with "
                  "the trailing '/')");
}

TEST_F(Compile, PathLimitAppliesAfterSymlinkResolution) {
    std::string long_dir = root_ + "/" + std::string(250 - root_.size(), 'd');
    ASSERT_TRUE(fs::create_directory(long_dir));
    fs::create_directory_symlink(long_dir, at("/short"));
    auto c = compile(policy("version = 1\n[filesystem]\nread = [\"@/short\"]\n"), vars_);
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("rule '" + at("/short") + "' resolves to a path of 251 bytes"), std::string::npos)
        << c.error().message;
}

TEST_F(Compile, CopiesModeNetworkProcessAndEnv) {
    auto c = compiled(R"(version = 1
mode = "audit"
[network]
connect = ["tcp://127.0.0.1:3128", "unix-abstract:x"]
bind = ["udp://[::1]:0"]
[process]
user_namespaces = true
[env]
keep = ["PATH"]
set = { A = "1" }
)");
    EXPECT_EQ(c.mode, Mode::Audit);
    ASSERT_EQ(c.connect.size(), 2u);
    EXPECT_EQ(c.connect[0].text, "tcp://127.0.0.1:3128");
    EXPECT_EQ(c.connect[0].port, 3128);
    EXPECT_EQ(c.connect[1].name, "x");
    ASSERT_EQ(c.bind.size(), 1u);
    EXPECT_EQ(c.bind[0].kind, Endpoint::Kind::Udp);
    EXPECT_TRUE(c.user_namespaces);
    EXPECT_EQ(c.env_keep, (std::vector<std::string>{"PATH"}));
    EXPECT_EQ(c.env_set, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}}));
    EXPECT_TRUE(c.fs.empty());
}

TEST_F(Compile, RenderListsTheEffectivePolicy) {
    auto c = compiled(R"(version = 1
mode = "audit"
[filesystem]
read = ["@/usr"]
write = ["{workdir}"]
deny = ["{user_home}"]
[network]
connect = ["tcp://[::ffff:127.0.0.1]:3128", "udp://[::1]:53", "unix:/run/p.sock"]
bind = ["tcp://127.0.0.1:0"]
[env]
keep = ["PATH", "TERM"]
set = { A = "say \"hi\"", B = "" }
)");
    std::string want =
        "# Effective policy: the longest matching path wins; paths not listed are denied.\n"
        "mode = \"audit\"\n"
        "\n[filesystem]\n" +
        at("/user") + "       none\n" + at("/user/work") + "  read,write,exec\n" + at("/usr") + "        read,exec\n" +
        listable_line() +
        "\n[network]\n"
        "connect = [\"tcp://127.0.0.1:3128\", \"udp://[::1]:53\", \"unix:/run/p.sock\"]\n"
        "bind = [\"tcp://127.0.0.1:0\"]\n"
        "families = [\"unix\", \"inet\", \"inet6\"]\n"
        "\n[process]\n"
        "user_namespaces = false\n"
        "\n[env]\n"
        "keep = [\"PATH\", \"TERM\"]\n"
        "set = { A = \"say \\\"hi\\\"\", B = \"\" }\n";
    EXPECT_EQ(render(c), want);
}

TEST_F(Compile, RenderOfAnEmptyPolicy) {
    EXPECT_EQ(render(Compiled{}),
              "# Effective policy: the longest matching path wins; paths not listed are denied.\n"
              "mode = \"enforce\"\n"
              "\n[filesystem]\n"
              "\n[network]\nconnect = []\nbind = []\nfamilies = []\n"
              "\n[process]\nuser_namespaces = false\n"
              "\n[env]\nkeep = []\nset = {}\n");
}

// ---- protect_git -------------------------------------------------------------------------------

// The paths protect_git adds for a git directory G, as compile() lists them.
std::vector<std::string> trusted_in(const std::string& g) {
    return {g + "/branches",        g + "/commondir", g + "/config",
            g + "/config.worktree", g + "/hooks",     g + "/objects/info/alternates",
            g + "/remotes"};
}

std::vector<std::string> sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
}

void write(const std::string& path, std::string_view text) {
    std::ofstream(path) << text;
}

constexpr std::string_view kProtectWorkdir = R"(version = 1
[filesystem]
write = ["{workdir}"]
protect_git = ["{workdir}"]
)";

TEST_F(Compile, ProtectGitMakesWhatGitTrustsReadOnlyInAGitDirectory) {
    const std::string w = at("/user/work"), g = w + "/.git";
    fs::create_directories(g + "/objects/info");
    auto c = compiled(kProtectWorkdir);
    EXPECT_EQ(c.git_protected, trusted_in(g));
    for (const char* rel : {"/config", "/config.worktree", "/hooks", "/hooks/pre-commit", "/commondir",
                            "/objects/info/alternates", "/remotes/origin", "/branches/b"})
        EXPECT_EQ(access_at(c, g + rel), kRX) << rel;
    // What git itself writes while the agent works stays writable: index,
    // HEAD, refs, objects and packs, commit-graph, lock files, operation
    // state, linked worktrees and submodules (see docs/design.md).
    for (const char* rel :
         {"", "/HEAD", "/index", "/config.lock", "/refs/heads/main", "/packed-refs", "/objects/ab/cdef",
          "/objects/pack/p.pack", "/objects/info/commit-graph", "/objects/info/packs", "/info/exclude",
          "/info/attributes", "/logs/HEAD", "/rebase-merge/done", "/worktrees/wt/HEAD", "/modules/sub/config",
          "/hooks-old", "/configs"})
        EXPECT_EQ(access_at(c, g + rel), kRWX) << rel;
    // Every directory above a protected path is a guard: `mv .git g; echo x >
    // g/commondir; mv g .git` is refused at the first rename.
    for (const std::string& guard : {w, g, g + "/objects", g + "/objects/info"})
        EXPECT_NE(std::find(c.guards.begin(), c.guards.end(), guard), c.guards.end()) << guard;
    EXPECT_NE(render(c).find("# git metadata kept read-only (protect_git): [\"" + g + "/branches\", "),
              std::string::npos)
        << render(c);
}

TEST_F(Compile, ProtectGitMakesAMissingDotGitReadOnly) {
    const std::string w = at("/user/work");
    fs::create_directories(w);
    auto c = compiled(kProtectWorkdir);
    // Created by the job, a .git file or directory could point anywhere.
    EXPECT_EQ(c.git_protected, (std::vector<std::string>{w + "/.git"}));
    EXPECT_EQ(access_at(c, w + "/.git"), kRX);
    EXPECT_EQ(access_at(c, w + "/.git/config"), kRX);
    EXPECT_EQ(access_at(c, w + "/.github"), kRWX);
    EXPECT_EQ(access_at(c, w + "/src/.git"), kRWX);
    EXPECT_NE(std::find(c.guards.begin(), c.guards.end(), w), c.guards.end());
}

TEST_F(Compile, ProtectGitFollowsAGitfileAndTheCommonDirectory) {
    // A linked worktree: its .git file names the per-worktree git directory,
    // whose commondir names the main repository's.
    const std::string w = at("/user/work"), main = at("/main/.git"), wt = main + "/worktrees/work";
    fs::create_directories(w);
    fs::create_directories(wt);
    write(w + "/.git", "gitdir: ../../main/.git/worktrees/work\n");
    write(wt + "/commondir", "../..\n");
    auto c = compiled(R"(version = 1
[filesystem]
write = ["{workdir}", "@/main"]
protect_git = ["{workdir}"]
)");
    std::vector<std::string> want = {w + "/.git"};
    for (const auto& g : {wt, main})
        for (auto& p : trusted_in(g)) want.push_back(p);
    EXPECT_EQ(c.git_protected, sorted(want));
    EXPECT_EQ(access_at(c, w + "/.git"), kRX);
    EXPECT_EQ(access_at(c, wt + "/commondir"), kRX);
    EXPECT_EQ(access_at(c, wt + "/config.worktree"), kRX);
    EXPECT_EQ(access_at(c, main + "/config"), kRX);
    EXPECT_EQ(access_at(c, main + "/hooks/post-checkout"), kRX);
    EXPECT_EQ(access_at(c, wt + "/HEAD"), kRWX);
    EXPECT_EQ(access_at(c, wt + "/index"), kRWX);
    EXPECT_EQ(access_at(c, main + "/refs/heads/x"), kRWX);
    EXPECT_EQ(access_at(c, main + "/objects/ab/cd"), kRWX);

    // An absolute gitdir and commondir, the same places.
    write(w + "/.git", "gitdir: " + wt + "\r\n");
    write(wt + "/commondir", main);
    EXPECT_EQ(compiled(R"(version = 1
[filesystem]
write = ["{workdir}", "@/main"]
protect_git = ["{workdir}"]
)")
                  .git_protected,
              sorted(want));
}

TEST_F(Compile, ProtectGitLeavesAloneWhatTheJobCantWriteAnyway) {
    // The runner's main repository is outside the job's writable set: only
    // the .git file in the workdir needs protecting, and no rule above the
    // repository appears (no guard, nothing listable).
    const std::string w = at("/user/work"), wt = at("/main/.git/worktrees/work");
    fs::create_directories(w);
    fs::create_directories(wt);
    write(w + "/.git", "gitdir: " + wt + "\n");
    write(wt + "/commondir", "../..\n");
    auto c = compiled(kProtectWorkdir);
    EXPECT_EQ(c.git_protected, (std::vector<std::string>{w + "/.git"}));
    EXPECT_EQ(prefixes(c), (std::vector<std::string>{w, w + "/.git"}));
    EXPECT_EQ(std::find(c.guards.begin(), c.guards.end(), at("/main")), c.guards.end());
    EXPECT_EQ(std::find(c.listable.begin(), c.listable.end(), at("/main")), c.listable.end());
}

TEST_F(Compile, ProtectGitProtectsASymlinkAndWhereItLeads) {
    const std::string w = at("/user/work"), g = w + "/.git", shared = at("/user/work/shared-hooks");
    fs::create_directories(g);
    fs::create_directories(shared);
    fs::create_directory_symlink(shared, g + "/hooks");
    auto c = compiled(kProtectWorkdir);
    // The link can't be replaced, nor can what git reads through it change.
    EXPECT_EQ(access_at(c, g + "/hooks"), kRX);
    EXPECT_EQ(access_at(c, shared + "/pre-commit"), kRX);
    EXPECT_EQ(access_at(c, w + "/shared-hooks-2"), kRWX);

    // A symlinked .git directory: the link, and the files in its target.
    const std::string w2 = at("/user/work2"), real = at("/user/work2/real-git");
    fs::create_directories(real);
    fs::create_directory_symlink(real, w2 + "/.git");
    vars_.workdir = w2;
    c = compiled(kProtectWorkdir);
    std::vector<std::string> want = trusted_in(real);
    want.push_back(w2 + "/.git");
    EXPECT_EQ(c.git_protected, sorted(want));
}

TEST_F(Compile, ProtectGitIgnoresWhatGitWouldNotUse) {
    const std::string w = at("/user/work");
    fs::create_directories(w);
    // Not a gitfile: the file itself is protected, nothing else.
    write(w + "/.git", "not a gitfile\n");
    EXPECT_EQ(compiled(kProtectWorkdir).git_protected, (std::vector<std::string>{w + "/.git"}));
    // A commondir that isn't a regular file (a FIFO must not block the
    // compiler) is ignored, as git fails to read it.
    fs::remove(w + "/.git");
    fs::create_directories(w + "/.git");
    ASSERT_EQ(mkfifo((w + "/.git/commondir").c_str(), 0600), 0);
    EXPECT_EQ(compiled(kProtectWorkdir).git_protected, trusted_in(w + "/.git"));
}

TEST_F(Compile, ProtectGitRefusesPointersItWouldHaveToReadThroughASymlink) {
    const std::string w = at("/user/work");
    fs::create_directories(w + "/.git");
    write(at("/elsewhere"), "/tmp\n");
    fs::create_symlink(at("/elsewhere"), w + "/.git/commondir");
    auto c = compile(policy(kProtectWorkdir), vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "p.toml:4:16: protect_git '{workdir}': " + w +
                                     "/.git/commondir is a symlink, which git follows but confine "
                                     "doesn't read through as root; replace it with the file it points to");

    fs::remove_all(w + "/.git");
    write(at("/gitfile"), "gitdir: /tmp\n");
    fs::create_symlink(at("/gitfile"), w + "/.git");
    c = compile(policy(kProtectWorkdir), vars_);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "p.toml:4:16: protect_git '{workdir}': " + w +
                                     "/.git is a symlink to a file; make it the gitfile itself, or a "
                                     "symlink to the git directory");
}

TEST_F(Compile, ProtectGitPathsMustFitTheBpfKey) {
    // The work tree fits as a rule; its .git/objects/info/alternates doesn't.
    std::string w = root_ + "/" + std::string(220 - root_.size(), 'w');
    fs::create_directories(w + "/.git");
    vars_.workdir = w;
    auto c = compile(policy(kProtectWorkdir), vars_);
    ASSERT_FALSE(c);
    std::string alternates = w + "/.git/objects/info/alternates";
    EXPECT_EQ(c.error().message,
              "p.toml:4:16: protect_git '{workdir}' must protect '" + alternates.substr(0, 40) + "...' (" +
                  std::to_string(alternates.size()) +
                  " bytes); rule paths may have at most 247 bytes (CONFINE_RULE_PATH_MAX is 248 with "
                  "the trailing '/')");
}

TEST(CompileFamilies, FamiliesAlwaysIncludeUnixAndInet) {
    Policy p;
    p.net.families = {AF_NETLINK};
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->families, (1ull << AF_UNIX) | (1ull << AF_INET) | (1ull << AF_INET6) | (1ull << AF_NETLINK));
    EXPECT_NE(render(*c).find("families = [\"unix\", \"inet\", \"inet6\", \"netlink\"]"), std::string::npos);
}

TEST(CompileGuards, AncestorsOfLessThanWritableRulesCannotMove) {
    Policy p;
    p.fs.write = {{"/w", {}}};
    p.fs.deny_write = {{"/w/.git/hooks", {}}};
    p.fs.deny = {{"/w/a/b/secret", {}}};
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->guards, (std::vector<std::string>{"/w", "/w/.git", "/w/a", "/w/a/b"}));
    // Guards change no access.
    EXPECT_EQ(access_at(*c, "/w/.git"), kRead | kWrite | kExec);
    EXPECT_EQ(access_at(*c, "/w/.git/hooks/x"), kRead | kExec);
}

TEST(CompileListable, DirectoriesAboveReadableRulesThatNoRuleCoversMayBeListed) {
    Policy p;
    p.fs.read = {{"/usr", {}}, {"/u/w/docs", {}}};
    p.fs.write = {{"/var/tmp/w", {}}};
    p.fs.deny = {{"/u", {}}, {"/srv/secret", {}}};
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    // Not /u (a deny covers it, and the readable /u/w/docs below doesn't
    // change that), nor /srv (only a deny lies below).
    EXPECT_EQ(c->listable, (std::vector<std::string>{"/", "/var", "/var/tmp"}));
    EXPECT_EQ(access_at(*c, "/var/tmp/other"), 0);
    EXPECT_NE(render(*c).find(R"(# may be listed (names only): ["/", "/var", "/var/tmp"])"), std::string::npos)
        << render(*c);
}

// The kernel's table merges rules, guards and listable directories, one
// entry per prefix, whatever the order they were found in: a guard that is
// also a rule keeps the rule's access; a listable directory that is also a
// guard stays a guard.
TEST(CompileFsTable, RulesGuardsAndListableDirectoriesMergeByPrefix) {
    Policy p;
    p.fs.read = {{"/usr", {}}};
    p.fs.write = {{"/w", {}}};
    p.fs.deny_write = {{"/w/.git/hooks", {}}};
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    const uint8_t rwx = kRead | kWrite | kExec, rx = kRead | kExec;
    EXPECT_EQ(fs_table(*c), (std::vector<FsTableEntry>{
                                {"/", 0, false, true},             // above the readable /usr: listable
                                {"/usr", rx, false, false, true},  // a rule, nothing below it
                                {"/w", rwx, true, false},          // a rule, and a guard of .git/hooks
                                {"/w/.git", rwx, true, false},     // a guard only: the access /w gives it
                                {"/w/.git/hooks", rx, false, false, true},
                            }))
        << render(*c);
}

// Every ancestor of an entry is an entry, with the access its path has
// anyway, and a leaf has no entry below it: the kernel side relies on both
// to decide a whole directory's entries at once. "/w b" and "/w.x" sort
// between "/w" and "/w/" and must not hide "/w/sub".
TEST(CompileFsTable, AncestorsAreEntriesAndLeavesHaveNoEntryBelow) {
    Policy p;
    p.fs.write = {{"/w", {}}, {"/w b", {}}, {"/w.x", {}}, {"/w/sub/deep", {}}, {"/t", {}}};
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    std::map<std::string, bool> leaf;
    for (const FsTableEntry& e : fs_table(*c)) {
        leaf[e.prefix] = e.leaf;
        EXPECT_EQ(e.access, access_at(*c, e.prefix)) << e.prefix;
    }
    EXPECT_FALSE(leaf.at("/w"));
    EXPECT_FALSE(leaf.at("/w/sub"));  // an ancestor only
    EXPECT_TRUE(leaf.at("/w b"));
    EXPECT_TRUE(leaf.at("/w.x"));
    EXPECT_TRUE(leaf.at("/w/sub/deep"));
    EXPECT_TRUE(leaf.at("/t"));
    EXPECT_FALSE(leaf.contains("/") && leaf.at("/"));
}

TEST(CompileFsTable, AListableDirectoryGainsNoAccess) {
    Policy p;
    p.fs.read = {{"/var/lib/x", {}}};
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    for (const FsTableEntry& e : fs_table(*c)) {
        if (e.listable) {
            EXPECT_EQ(e.access, 0) << e.prefix;
        }
    }
}

// ---- [limits] ----

// TEXT's [limits] compiled for a machine with MEM_TOTAL bytes and CPUS CPUs.
Result<CompiledLimits> limits(std::string_view text, uint64_t mem_total = 8ull << 30, unsigned cpus = 4) {
    auto p = parse("version = 1\n[limits]\n" + std::string(text), "p.toml");
    if (!p) {
        for (const auto& d : p.error()) ADD_FAILURE() << d.str();
        return fail(Error::msg("parse"));
    }
    auto c = compile(*p, Vars{"/w", "/h", "/t", "/u", mem_total, cpus});
    if (!c) return fail(c.error());
    return c->limits;
}

TEST(CompileLimits, AmountsInTheKernelsUnits) {
    auto l = limits("memory = \"64M\"\nswap = \"0\"\npids = 32\ncpu = 0.25\ntimeout = \"2m\"\n");
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->memory, 64ull << 20);
    EXPECT_EQ(l->swap, 0u);
    EXPECT_EQ(l->pids, 32u);
    EXPECT_EQ(l->cpu_quota_us, 25000u);  // of kCpuPeriodUs
    EXPECT_EQ(kCpuPeriodUs, 100000u);
    EXPECT_EQ(l->timeout_s, 120u);
}

TEST(CompileLimits, PercentagesAreOfThisMachine) {
    auto l = limits("memory = \"50%\"\nswap = \"12.5%\"\ncpu = \"50%\"\n", 8ull << 30, 4);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->memory, 4ull << 30);
    EXPECT_EQ(l->swap, 1ull << 30);
    EXPECT_EQ(l->cpu_quota_us, 200000u);  // 2 of 4 CPUs
    l = limits("cpu = \"100%\"\n", 1 << 30, 1);
    ASSERT_TRUE(l) << l.error().message;
    EXPECT_EQ(l->cpu_quota_us, 100000u);
}

TEST(CompileLimits, MaxAndAbsentWriteNothing) {
    for (const char* text : {"", "memory = \"max\"\nswap = \"max\"\npids = \"max\"\ncpu = \"max\"\n"}) {
        auto l = limits(text);
        ASSERT_TRUE(l) << l.error().message;
        EXPECT_FALSE(l->memory || l->swap || l->pids || l->cpu_quota_us) << text;
        EXPECT_EQ(l->timeout_s, 0u);
    }
}

TEST(CompileLimits, ReadsTheMachineWhenNotGiven) {
    auto l = limits("memory = \"100%\"\ncpu = \"100%\"\n", 0, 0);
    ASSERT_TRUE(l) << l.error().message;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    // MemTotal is physical memory less what the kernel keeps for itself.
    EXPECT_GT(*l->memory, static_cast<uint64_t>(pages * page) / 2);
    EXPECT_LE(*l->memory, static_cast<uint64_t>(pages * page));
    EXPECT_EQ(l->cpu_quota_us, static_cast<uint64_t>(sysconf(_SC_NPROCESSORS_ONLN)) * kCpuPeriodUs);
}

TEST(CompileLimits, ACpuShareBelowTheKernelsMinimumIsAnError) {
    auto l = limits("cpu = \"0.5%\"\n", 8ull << 30, 1);
    ASSERT_FALSE(l);
    EXPECT_EQ(l.error().message,
              "p.toml:3:7: limits.cpu: 0.5% of this machine's 1 CPUs is 0.005 CPUs, less than the kernel's minimum "
              "of 0.01; give more");
}

TEST(CompileLimits, RenderShowsTheLimitsThatAreSet) {
    Policy p;
    p.limits.memory = {Limit::Kind::Value, 1 << 20, {}};
    p.limits.swap = {Limit::Kind::Value, 0, {}};
    p.limits.cpu = {Limit::Kind::Value, 1.5, {}};
    p.limits.timeout_s = 90;
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    std::string r = render(*c);
    EXPECT_NE(r.find("\n[limits]\nmemory = 1048576  # bytes\nswap = 0  # bytes\ncpu = 1.5  # CPUs\n"
                     "timeout = 90  # seconds\n"),
              std::string::npos)
        << r;
    EXPECT_EQ(render(Compiled{}).find("[limits]"), std::string::npos);
}

TEST(CompileDomains, RenderShowsThemWithTheirPorts) {
    Policy p;
    for (auto [name, ports] :
         {std::pair<std::string, std::vector<uint16_t>>{"*.github.com", {80, 443}}, {"m.test", {8080}}})
        p.net.domains.push_back({name, ports, name, {}});
    auto c = compile(p, Vars{"/w", "/h", "/t", "/u"});
    ASSERT_TRUE(c) << c.error().message;
    std::string r = render(*c);
    EXPECT_NE(r.find("domains = [\"*.github.com:80\", \"*.github.com:443\", \"m.test:8080\"]  # through the job's "
                     "proxy\n"),
              std::string::npos)
        << r;
    EXPECT_EQ(render(Compiled{}).find("domains"), std::string::npos);
}

}  // namespace
}  // namespace confine::policy
