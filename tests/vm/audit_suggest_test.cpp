// `confine audit --suggest`: a session run in audit mode under an empty
// policy (nothing granted: not even the C library), then under the policy
// suggested from its log, in enforce mode: the same session, with no
// denial. The control: under the empty policy alone it is refused.
#include <fmt/format.h>
#include <signal.h>

#include <fstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr const char* kEmpty = "version = 1\n";

class AuditSuggestTest : public VmTest {};

TEST_F(AuditSuggestTest, ASessionRunsUnderThePolicySuggestedFromItsAuditLog) {
    // What the session clones from: a repository outside the workdir that
    // the default policy doesn't let a job read.
    make_dir(at("origin"));
    Result made = run_unconfined(fmt::format(
        "cd {} && git init -q && printf 'int main(void) {{ return 0; }}\\n' > hello.c && "
        "printf 'test: hello\\n\\t./hello\\nhello: hello.c\\n\\tcc -o hello hello.c\\n' > Makefile && git add . && "
        "git -c user.name=t -c user.email=t@t commit -qm init",
        at("origin")));
    ASSERT_EQ(made.status, 0) << made.describe();
    // A local service the session talks to.
    Process server = Process::start({.argv = {"/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.2", "8099"},
                                     .env = {"PATH=/usr/bin:/bin"},
                                     .cwd = base()});
    ASSERT_TRUE(wait_until([&] { return run_root("curl -s -o /dev/null http://127.0.0.2:8099/").status == 0; }, 60));
    const std::string session = fmt::format(
        "git clone -q {} repo && cd repo && make -s test && echo change >> hello.c && "
        "git -c user.name=t -c user.email=t@t commit -qam change && curl -s -o /dev/null http://127.0.0.2:8099/",
        at("origin"));

    Result unconfined = run_unconfined(session + " && rm -rf " + work() + "/repo");
    ASSERT_EQ(unconfined.status, 0) << unconfined.describe();
    Result control = run_confined(kEmpty, session);
    ASSERT_NE(control.status, 0) << "the empty policy lets the session through:\n" << control.describe();
    run_root("rm -rf " + work() + "/repo");

    Result audited = run_confined(kEmpty, session, {"--mode", "audit"});
    ASSERT_EQ(audited.status, 0) << audited.describe();
    ASSERT_FALSE(audited.audit.empty());
    size_t lost = 0;
    for (const AuditLine& l : audited.audit)
        if (l.str("op") == "lost") lost += static_cast<size_t>(l.num("count").value_or(0));
    EXPECT_EQ(lost, 0u) << "of " << audited.audit.size() << " lines";
    std::string log;
    for (const AuditLine& l : audited.audit) log += l.raw + "\n";
    std::ofstream(at("session.jsonl")) << log;
    std::ofstream(at("empty.toml")) << kEmpty;
    Process suggest = Process::start({.argv = {confine_bin(), "audit", "--suggest", "--policy", at("empty.toml"),
                                               "--workdir", work(), at("session.jsonl")},
                                      .cwd = base()});
    Result suggested = suggest.wait();
    ASSERT_EQ(suggested.status, 0) << suggested.describe();
    EXPECT_NE(suggested.out.find("tcp://127.0.0.2:8099"), std::string::npos) << suggested.out;
    EXPECT_EQ(suggested.out.find("WARNING"), std::string::npos) << suggested.out;
    run_root("rm -rf " + work() + "/repo");

    std::ofstream(at("suggested.toml")) << suggested.out;
    Result enforced = run_confined(suggested.out, session);
    EXPECT_EQ(enforced.status, 0) << suggested.out << "\n" << enforced.describe();
    EXPECT_TRUE(enforced.audit.empty()) << suggested.out << "\n" << enforced.describe();
    kill(server.pid(), SIGTERM);
    server.wait(10);
}

}  // namespace
}  // namespace vmtest
