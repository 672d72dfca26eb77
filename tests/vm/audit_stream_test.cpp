// Audit lines can't be forged: whatever the job
// writes, wherever the log goes, no line of the log comes from the job.
//
// Without --audit-log the log is confine's stderr, and the job's stderr is
// joined to its stdout; confine refuses to start where that stdout is its
// stderr too (2>&1). --audit-log naming a file the job may write, or the
// job's own stdio, is refused as well. These tests call confine directly
// (the harness's run() always passes --audit-log).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

std::vector<std::string> confine_env() {
    return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=dumb",
            "HOME=/root"};
}

// A line that looks like confine's, naming the job, with a marker.
std::string forged_line(const std::string& job, const std::string& marker) {
    return fmt::format(
        R"({{"time":"2026-01-01T00:00:00.000000Z","job":"{}","cgroup_id":1,"pid":1,"tgid":1,"uid":0,"comm":"{}",)"
        R"("op":"lost","target":"","verdict":"deny","mode":"enforce","count":99}})",
        job, marker);
}

class AuditStreamTest : public VmTest {
protected:
    // `confine run --user confinetest --workdir W --job-id J ARGS -- sh -c CMD`
    // as root from base(); `shell_redirect`, if given, is applied by a
    // shell around confine (e.g. "2>&1").
    Result confine(const std::string& job, const std::vector<std::string>& args, const std::string& cmd,
                   const std::string& shell_redirect = "") {
        std::vector<std::string> argv = {confine_bin(), "run", "--user", kUser, "--workdir", work(), "--job-id", job};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--", "/bin/sh", "-c", cmd});
        if (!shell_redirect.empty())
            argv.insert(argv.begin(), {"/bin/sh", "-c", "exec \"$@\" " + shell_redirect, "sh"});
        Process p = Process::start({.argv = argv, .env = confine_env(), .cwd = base()});
        Result r = p.wait();
        r.job = job;
        return r;
    }

    // Writes forged lines for `job` into work()/forgedN (N from 1).
    void plant_forgeries(const std::string& job, int n) {
        for (int i = 1; i <= n; i++)
            write_file(work() + fmt::format("/forged{}", i), forged_line(job, fmt::format("forged-{}", i)) + "\n");
    }
};

// The JSON lines of a stream; other lines (confine's own messages) apart.
std::vector<AuditLine> json_lines(const std::string& text) {
    std::vector<AuditLine> out;
    for (auto& l : parse_audit(text))
        if (l.raw.starts_with("{")) out.push_back(l);
    return out;
}

TEST_F(AuditStreamTest, TheJobCannotWriteIntoTheLogOnStderr) {
    const std::string job = job_id(101);
    plant_forgeries(job, 4);
    // Every way to stderr: fd 2; reopening it (/dev/stderr,
    // /proc/self/fd/2), which root's pipes here refuse to the user, and
    // would give the pipe of fd 2 anyway; confine's own fd 2 (confine is
    // the job's parent).
    const std::string cmd = fmt::format(
        "cat forged1 >&2; cat forged2 > /dev/stderr; cat forged3 > /proc/self/fd/2; "
        "cat forged4 > /proc/$PPID/fd/2; cat {}; echo done",
        kSshKey);

    Result control = run_unconfined(cmd);
    EXPECT_NE(control.err.find("forged-1"), npos) << control.describe();
    EXPECT_NE(control.out.find(kSshSecret), npos) << control.describe();
    ASSERT_FALSE(HasFailure());

    Result r = confine(job, {}, cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_TRUE(r.out.ends_with("done\n")) << r.describe();
    r.audit = json_lines(r.err);
    EXPECT_DENIAL(r, "open_read", kSshKey, "cat");
    EXPECT_EQ(r.err.find("forged"), npos) << "a forged line reached the log\n" << r.describe();
    EXPECT_NE(r.out.find("forged-1"), npos) << "fd 2 should be the job's stdout\n" << r.describe();
    EXPECT_EQ(r.out.find(kSshSecret), npos) << r.describe();
}

// `2>&1` into a pipe or a file: the job's stdout would be the log.
TEST_F(AuditStreamTest, StderrThatIsStdoutIsRefused) {
    const std::string ran = work() + "/ran";
    const std::string cmd = "touch ran";
    const std::string why = "audit: confine's stderr, where the audit log goes, is also the job's stdout";

    Result control = confine(job_id(101), {}, cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(ran));
    unlink(ran.c_str());

    Result piped = confine(job_id(102), {}, cmd, "2>&1");
    EXPECT_EQ(piped.status, 125) << piped.describe();
    EXPECT_NE(piped.out.find(why), npos) << piped.describe();
    EXPECT_FALSE(exists(ran)) << "the job ran";

    const std::string file = at("out.txt");
    Result to_file = confine(job_id(103), {}, cmd, "> " + file + " 2>&1");
    EXPECT_EQ(to_file.status, 125) << to_file.describe();
    EXPECT_NE(read_file(file).find(why), npos) << read_file(file);
    EXPECT_FALSE(exists(ran)) << "the job ran";

    // Appending both to one file is the same file.
    Result appended = confine(job_id(104), {}, cmd, ">> " + file + " 2>> " + file);
    EXPECT_EQ(appended.status, 125) << appended.describe() << read_file(file);
    EXPECT_FALSE(exists(ran)) << "the job ran";
}

TEST_F(AuditStreamTest, AnAuditLogTheJobCouldWriteIsRefused) {
    const std::string ran = work() + "/ran";
    const std::string cmd = "touch ran";
    const std::string in_workdir = work() + "/audit.jsonl";

    Result control = confine(job_id(101), {"--audit-log", at("audit.jsonl")}, cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(ran));
    unlink(ran.c_str());

    struct Case {
        std::string path, why;
    };
    ASSERT_EQ(symlink(in_workdir.c_str(), at("link.jsonl").c_str()), 0);
    const std::vector<Case> cases = {
        {in_workdir, "is writable by the job under its policy"},
        {at("link.jsonl"), "is writable by the job under its policy"},  // a symlink into the workdir
        {"/dev/stderr", "is the job's stdin, stdout or stderr"},
        {"/dev/stdout", "is the job's stdin, stdout or stderr"},
        {"/proc/self/fd/1", "is the job's stdin, stdout or stderr"},
    };
    int n = 102;
    for (const Case& c : cases) {
        SCOPED_TRACE(c.path);
        Result r = confine(job_id(n++), {"--audit-log", c.path}, cmd);
        EXPECT_EQ(r.status, 125) << r.describe();
        EXPECT_NE(r.err.find(c.why), npos) << r.describe();
        EXPECT_FALSE(exists(ran)) << "the job ran";
        EXPECT_FALSE(exists(in_workdir)) << "confine made the log in the workdir";
        unlink(ran.c_str());
        unlink(in_workdir.c_str());
    }
}

// A log outside the job's write set that the account itself may write (it
// owns it): the job still can't add a line.
TEST_F(AuditStreamTest, AnAuditLogOutsideTheWriteSetIsOutOfTheJobsReach) {
    const std::string log = at("user-audit.jsonl");
    write_file(log, "", 0644);
    const std::string job = job_id(101);
    plant_forgeries(job, 1);
    const std::string cmd = fmt::format("cat forged1 >> {}; echo \"append=$?\"; cat {}", log, kSshKey);

    Result control = run_unconfined(cmd);
    EXPECT_NE(control.out.find("append=0"), npos) << control.describe();
    EXPECT_NE(read_file(log).find("forged-1"), npos) << "unconfined, the account should append to its own file";
    ASSERT_FALSE(HasFailure());
    write_file(log, "", 0644);

    Result r = confine(job, {"--audit-log", log}, cmd);
    EXPECT_NE(r.out.find("append=2"), npos) << r.describe();
    r.audit = parse_audit(read_file(log));
    EXPECT_EQ(read_file(log).find("forged"), npos) << r.describe();
    EXPECT_DENIAL(r, "open_write", log, "sh");
    EXPECT_DENIAL(r, "open_read", kSshKey, "cat");
    for (const auto& l : r.audit) EXPECT_EQ(l.str("job"), job) << l.raw;
}

}  // namespace
}  // namespace vmtest
