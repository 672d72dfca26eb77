// Terminals across the job's boundary.
//
// A job has a devpts instance of its own on /dev/pts: the ptys it opens
// through /dev/ptmx are there, another session's /dev/pts/N is not (ENOENT,
// no audit line: the control proves it exists and holds input). And the job
// runs in a session of its own, without a controlling terminal, so a
// terminal it inherits as an fd can't be made to type (TIOCSTI) or taken
// over as its controlling terminal.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

// Whether /dev/pts is a devpts mount in this (the test's) mount namespace.
bool devpts_mounted() {
    std::istringstream in(read_file("/proc/self/mountinfo"));
    for (std::string l; std::getline(in, l);)
        if (l.find(" /dev/pts ") != npos && l.find(" - devpts ") != npos) return true;
    return false;
}

class TtyTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        ASSERT_TRUE(devpts_mounted()) << "the guest has no devpts on /dev/pts (vmtest/guest/pid1 mounts one)";
        helper_ = install_helper(work());
    }

    // A pty pair of the test user, outside any job, whose master stays open
    // until the test ends; `lines` lines of TEXT typed into it. Returns the
    // slave's path.
    std::string hold_pty(const std::string& text, int lines) {
        const std::string file = work() + "/pts", release = work() + "/release-pty";
        holder_.emplace(
            start_unconfined(fmt::format("./vmhelper 'pty,hold,{},{},{}' wait,{}", file, text, lines, release)));
        if (!wait_until([&] { return exists(file); }, 60)) {
            ADD_FAILURE() << "no pty\n" << holder_->wait(1).describe();
            return "";
        }
        std::string path = read_file(file);
        while (!path.empty() && path.back() == '\n') path.pop_back();
        return path;
    }

    // `./vmhelper OPS` with the terminal SLAVE as its stdin: as the test
    // user without confine (the control), or as a job of confine run as
    // root, confine's own stdin the terminal too (as its caller's would
    // be). `wrap` goes before either (setsid, setsid -c).
    Result unconfined_on(const std::string& slave, const std::string& ops, const std::string& wrap = "") {
        return run_root(fmt::format("exec {}setpriv --reuid={} --regid={} --init-groups ./vmhelper {} <>{}", wrap,
                                    test_user().uid, test_user().gid, ops, slave));
    }
    Result confined_on(const std::string& slave, const std::string& ops, const std::string& job,
                       const std::string& wrap = "") {
        const std::string audit = at("audit-" + job + ".jsonl");
        Result r = run_root(
            fmt::format("exec {}{} run --user {} --workdir {} --audit-log {} --job-id {} -- ./vmhelper {} <>{}", wrap,
                        confine_bin(), kUser, work(), audit, job, ops, slave));
        r.job = job;
        r.audit = parse_audit(read_file(audit));
        return r;
    }

    void TearDown() override {
        if (holder_) {
            write_file(work() + "/release-pty", "");
            holder_->wait(30);
        }
    }

    std::string helper_;
    std::optional<Process> holder_;
};

TEST_F(TtyTest, AnotherSessionsTerminalIsOutOfReach) {
    const std::string slave = hold_pty("typed input", 2);
    ASSERT_TRUE(slave.starts_with("/dev/pts/")) << slave;
    const std::string read_op = "ttyread," + slave;

    Result control = run_unconfined("./vmhelper " + read_op);
    ASSERT_EQ(parse_ops(control.out)[read_op], "ok typed input") << control.describe();

    // The job opens its own pty first: a private instance numbers from 0,
    // so its own may well be called what the outside one is.
    Result r = run_confined("", "./vmhelper pty,own " + read_op);
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["pty,own"], "ok /dev/pts/0") << r.describe();
    EXPECT_TRUE(o[read_op] == "open:ENOENT" || (slave == "/dev/pts/0" && o[read_op] == "open:EIO")) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();

    Result alone = run_confined("", "./vmhelper " + read_op + "; ls /dev/pts | tr '\\n' ' '; echo");
    EXPECT_EQ(parse_ops(alone.out)[read_op], "open:ENOENT") << alone.describe();
    EXPECT_TRUE(alone.out.ends_with("\nptmx \n")) << "/dev/pts should hold only ptmx\n" << alone.describe();
    EXPECT_TRUE(alone.audit.empty()) << alone.describe();

    // The second line is still there: the jobs read nothing.
    Result after = run_unconfined("./vmhelper " + read_op);
    EXPECT_EQ(parse_ops(after.out)[read_op], "ok typed input") << after.describe();
}

// Programs that need a terminal (script, ssh -t, expect...) get one.
TEST_F(TtyTest, TheJobMakesPtysOfItsOwn) {
    Result r = run_confined("", "./vmhelper pty,own; script -qc tty /dev/null");
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(parse_ops(r.out)["pty,own"], "ok /dev/pts/0") << r.describe();
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\n/dev/pts/[0-9]+\r?\n"))) << "script got no terminal\n"
                                                                                << r.describe();
    EXPECT_EQ(r.out.find("not a tty"), npos) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

// A terminal the job shares with confine (its stderr, where the audit log
// may go): stopping its output (tcflow, TCXONC) would make confine's writes
// wait, and the job's timeout with them.
TEST_F(TtyTest, TheJobCannotStopAnInheritedTerminalsOutput) {
    const std::string slave = hold_pty("unused", 0);
    ASSERT_TRUE(slave.starts_with("/dev/pts/")) << slave;
    const std::string op = "tcxonc,0";
    // Control: the same user, the terminal as its stdin.
    Result control = unconfined_on(slave, op);
    EXPECT_EQ(parse_ops(control.out)[op], "ok") << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = confined_on(slave, op, "tcxonc-job");
    EXPECT_EQ(parse_ops(r.out)[op], "TCXONC:EPERM") << r.describe();
    ASSERT_EQ(r.audit.size(), 1u) << r.describe();
    EXPECT_EQ(r.audit[0].str("op"), "tty") << r.describe();
}

// confine's caller's terminal, inherited as fd 0: TIOCSTI would type into
// it (the caller's shell runs it once the job ends); the kernel allows that
// only on the caller's controlling terminal, which the job, in a session of
// its own, doesn't have and can't take.
TEST_F(TtyTest, TheJobCannotTypeIntoAnInheritedTerminal) {
    // Since 6.2 TIOCSTI is off unless this is set (Debian: off).
    Sysctl legacy("/proc/sys/dev/tty/legacy_tiocsti", "1");
    const std::string slave = hold_pty("unused", 0);
    ASSERT_TRUE(slave.starts_with("/dev/pts/")) << slave;
    const std::string read_op = "ttyread," + slave;

    // Control: the same user, in a session whose controlling terminal it
    // is (setsid -c), as confine's caller would be.
    Result control = unconfined_on(slave, "'tiocsti,0,echo typed'", "setsid -c ");
    EXPECT_EQ(parse_ops(control.out)["tiocsti,0,echo typed"], "ok") << control.describe();
    Result typed = run_unconfined("./vmhelper " + read_op);
    EXPECT_EQ(parse_ops(typed.out)[read_op], "ok echo typed") << typed.describe();
    ASSERT_FALSE(HasFailure());

    // confine in that position: its stdin the terminal, which is its
    // session's controlling terminal.
    Result r = confined_on(slave, "'tiocsti,0,echo typed' tiocsctty,0 'tiocsti,0,echo again'", "tty-job", "setsid -c ");
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["tiocsti,0,echo typed"], "TIOCSTI:EPERM") << r.describe();
    EXPECT_EQ(o["tiocsctty,0"], "TIOCSCTTY:EPERM") << r.describe();
    EXPECT_EQ(o["tiocsti,0,echo again"], "TIOCSTI:EPERM") << r.describe();
    // confine refuses each (op tty); the kernel would refuse them too. A
    // tty record names no target, so the three are one record and its
    // repeats (a line with "repeats":N stands for N more).
    int64_t refusals = 0;
    for (const auto& l : r.audit) refusals += l.num("repeats").value_or(1);
    EXPECT_EQ(refusals, 3) << r.describe();
    for (const auto& l : r.audit) EXPECT_EQ(l.str("op"), "tty") << r.describe();
    Result nothing = run_unconfined("./vmhelper " + read_op);
    EXPECT_EQ(parse_ops(nothing.out)[read_op], "read:ETIMEDOUT") << "the job typed\n" << nothing.describe();
}

// A terminal that no session owns (a pty its holder opened O_NOCTTY and
// handed over as stdin, as a harness driving confine through a pty may),
// inherited as fd 0: the job, a session leader without a controlling
// terminal, could make it its own (TIOCSCTTY) and then type into it
// (TIOCSTI) for whatever reads that terminal after the job.
TEST_F(TtyTest, TheJobCannotTakeOverASessionlessTerminal) {
    Sysctl legacy("/proc/sys/dev/tty/legacy_tiocsti", "1");
    const std::string slave = hold_pty("unused", 0);
    ASSERT_TRUE(slave.starts_with("/dev/pts/")) << slave;
    const std::string read_op = "ttyread," + slave;
    const std::string ops = "tiocsctty,0 'tiocsti,0,echo typed'";

    // Control: the same user, in a session of its own (setsid) but without
    // a controlling terminal, as the job is.
    Result control = unconfined_on(slave, ops, "setsid ");
    Ops c = parse_ops(control.out);
    EXPECT_EQ(c["tiocsctty,0"], "ok") << control.describe();
    EXPECT_EQ(c["tiocsti,0,echo typed"], "ok") << control.describe();
    Result typed = run_unconfined("./vmhelper " + read_op);
    EXPECT_EQ(parse_ops(typed.out)[read_op], "ok echo typed") << typed.describe();
    ASSERT_FALSE(HasFailure());

    Result r = confined_on(slave, ops, "tty-job");
    Ops o = parse_ops(r.out);
    EXPECT_EQ(o["tiocsctty,0"], "TIOCSCTTY:EPERM") << r.describe();
    EXPECT_EQ(o["tiocsti,0,echo typed"], "TIOCSTI:EPERM") << r.describe();
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
    for (const auto& l : r.audit) EXPECT_EQ(l.str("op"), "tty") << r.describe();
    Result nothing = run_unconfined("./vmhelper " + read_op);
    EXPECT_EQ(parse_ops(nothing.out)[read_op], "read:ETIMEDOUT") << "the job typed\n" << nothing.describe();
}

}  // namespace
}  // namespace vmtest
