// Tests of loader/suggest.cpp: `confine audit --suggest`.
#include "loader/suggest.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "policy/policy.h"

namespace confine {
namespace {

std::string record(const std::string& op, const std::string& target, const std::string& extra = "") {
    return R"({"time":"2026-12-01T10:00:00.000001Z","job":"j1","cgroup_id":1,"pid":7,"tgid":7,"uid":0,"comm":"x",)"
           R"("op":")" +
           op + R"(","target":")" + target + R"(","verdict":"allow","mode":"audit")" + extra + "}\n";
}

TEST(Suggest, ThePolicyAllowsWhatTheLogAskedForWithItsVariablesAndPassesCheck) {
    std::istringstream log(record("open_read", "/root/.gitconfig") + record("open_write", "/srv/w/src/main.c") +
                           record("create", "/srv/cache/build/a.o") + record("create", "/srv/cache/build/b.o") +
                           record("open_write", "/srv/cache/build/c.o") + record("exec", "/srv/tools/bin/tool") +
                           record("create", "/var/tmp/confine-j1.AbC123/tmp/cc1.s") +
                           record("connect", "tcp://127.0.0.2:8080") + record("proxy", "api.example.com:443") +
                           record("userns_create", "") + record("socket", "", R"(,"family":16)") +
                           record("ptrace", "1") + record("open_read", "/a/b", R"(,"reason":"path_too_deep")") +
                           R"({"time":"x","job":"j1","cgroup_id":1,"op":"lost","count":3})"
                           "\n");
    auto p = suggest_policy(log, {.workdir = "/srv/w", .base_file = ""});
    ASSERT_TRUE(p) << p.error().message;
    auto parsed = policy::parse(*p, "suggested.toml");
    ASSERT_TRUE(parsed) << parsed.error().front().str() << "\n" << *p;
    for (const char* expected : {"'{user_home}/.gitconfig'", "'/srv/cache/build'", "'/srv/tools/bin/tool'",
                                 "'tcp://127.0.0.2:8080'", "'api.example.com'", "'netlink'", "user_namespaces = true",
                                 "# Grouped: /srv/cache/build: 3 files under it were used",
                                 "# Not grantable by a policy: ptrace 1", "(path_too_deep)", "3 events were lost"})
        EXPECT_NE(p->find(expected), std::string::npos) << expected << "\n" << *p;
    // Granted by the default policy already: the workdir and the job's TMPDIR.
    EXPECT_EQ(p->find("main.c"), std::string::npos) << *p;
    EXPECT_EQ(p->find("cc1.s"), std::string::npos) << *p;
    // Each grouped file is covered by its directory, not listed again.
    EXPECT_EQ(p->find("a.o"), std::string::npos) << *p;
}

// From an empty base, what tools made in the job's private TMPDIR (random
// names) and HOME is granted as those directories, never the files.
TEST(Suggest, TheJobsPrivateDirectoriesAreGrantedWhole) {
    std::istringstream log(record("create", "/var/tmp/confine-j1.AbC123/tmp/ccX1.s") +
                           record("create", "/var/tmp/confine-j1.AbC123/tmp/ccY2.o") +
                           record("open_read", "/var/tmp/confine-j1.AbC123/home/.cache/x"));
    char base[] = "/tmp/confine-suggest-XXXXXX";
    int fd = mkstemp(base);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "version = 1\n", 12), 12);
    close(fd);
    auto p = suggest_policy(log, {.workdir = "/srv/w", .base_file = base});
    unlink(base);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_NE(p->find("write = [ '{tmp}' ]"), std::string::npos) << *p;
    EXPECT_NE(p->find("read = [ '{home}' ]"), std::string::npos) << *p;
    EXPECT_NE(p->find("# Grouped: {tmp}: the job's private directory; 2 paths in it were used"), std::string::npos)
        << *p;
    EXPECT_EQ(p->find("ccX1"), std::string::npos) << *p;
}

// What a job named can't end a comment and become policy, and grouping
// grants no more than every file needed, never in the account's home.
TEST(Suggest, NamesFromTheJobStayInCommentsAndGroupsStayNarrow) {
    std::istringstream log(record("mount", R"(x\n[process]\nuser_namespaces = true\n#)") +
                           record("open_read", "/root/.config/a") + record("open_read", "/root/.config/b") +
                           record("open_read", "/root/.config/c") + record("open_read", "/srv/data/set/a") +
                           record("open_read", "/srv/data/set/b") + record("open_write", "/srv/data/set/c"));
    auto p = suggest_policy(log, {});
    ASSERT_TRUE(p) << p.error().message;
    auto parsed = policy::parse(*p, "suggested.toml");
    ASSERT_TRUE(parsed) << *p;
    EXPECT_FALSE(parsed->user_namespaces) << *p;
    EXPECT_NE(p->find(R"(# Not grantable by a policy: mount x\x0a[process])"), std::string::npos) << *p;
    EXPECT_EQ(p->find("'{user_home}/.config'"), std::string::npos) << *p;
    EXPECT_NE(p->find("'{user_home}/.config/a'"), std::string::npos) << *p;
    EXPECT_EQ(p->find("'/srv/data/set'"), std::string::npos) << *p;
    EXPECT_NE(p->find("'/srv/data/set/c'"), std::string::npos) << *p;
}

}  // namespace
}  // namespace confine
