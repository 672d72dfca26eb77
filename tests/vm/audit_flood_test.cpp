// A flood of denials: one job refused a million opens (CONFINE_FLOOD_OPENS;
// the matrix runs the full million on one kernel) while another makes a few. The other job's denials are all logged;
// every one of the flood's is accounted for (a line, a counted repeat, or a counted loss); confine's own CPU time stays
// below the flooding job's (both reported).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

const long kFlood = [] {
    const char* n = getenv("CONFINE_FLOOD_OPENS");
    return n ? strtol(n, nullptr, 10) : 1000000;
}();

// utime + stime of PID in ms, from /proc (a zombie's are its final ones).
long cpu_ms(pid_t pid) {
    std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
    auto paren = stat.rfind(") ");
    if (paren == std::string::npos) return -1;
    std::istringstream rest(stat.substr(paren + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; i++) {
        if (i == 14) utime = std::stol(field);
        if (i == 15) stime = std::stol(field);
    }
    return (utime + stime) * 1000 / sysconf(_SC_CLK_TCK);
}

class AuditFloodTest : public VmTest {};

TEST_F(AuditFloodTest, AFloodIsAccountedForAndCostsAnotherJobNothing) {
    const std::string helper = install_helper(work());
    std::vector<std::string> secrets;
    for (char c : std::string("abcde")) {
        secrets.push_back(fmt::format("{}/secret-{}", kUserHome, c));
        write_file(secrets.back(), "secret\n");
    }
    // Controls: unconfined, every open works.
    Result unconfined = run_unconfined(fmt::format("{} flood,{},10 && cat {}", helper, kSshKey, secrets[0]));
    ASSERT_EQ(unconfined.status, 0) << unconfined.describe();
    ASSERT_NE(unconfined.out.find("refused 0 "), std::string::npos) << unconfined.describe();

    Started flood = start({.argv = {helper, fmt::format("flood,{},{}", kSshKey, kFlood)}});
    ASSERT_TRUE(wait_until([&] { return !job_cgroup(flood.job).empty(); }, 60)) << "the flood never started";
    std::string cmd;
    for (const std::string& s : secrets) cmd += fmt::format("cat {} 2>/dev/null; ", s);
    Result other = run_confined("", cmd);
    for (const std::string& s : secrets) EXPECT_DENIAL(other, "open_read", s, "cat");

    // confine's own CPU time: its final figures, read while it is a zombie.
    const pid_t confine_pid = flood.proc->pid();
    EXPECT_TRUE(wait_until([&] { return !alive(confine_pid); }, 900)) << "the flood did not end";
    const long confine_ms = cpu_ms(confine_pid);
    Result r = finish(flood);
    ASSERT_EQ(r.status, 0) << r.describe();
    long refused = -1, job_ms = -1;
    ASSERT_EQ(sscanf(parse_ops(r.out).at(0).c_str(), "ok refused %ld cpu_ms %ld", &refused, &job_ms), 2) << r.out;
    EXPECT_EQ(refused, kFlood);

    uint64_t lines = 0, repeats = 0, lost = 0;
    for (const AuditLine& l : r.audit) {
        if (l.str("op") == "lost") {
            lost += static_cast<uint64_t>(l.num("count").value_or(0));
        } else if (l.str("op") == "open_read" && l.str("target") == kSshKey) {
            // A line stands for one refusal, or for N more ("repeats":N).
            if (auto n = l.num("repeats"))
                repeats += static_cast<uint64_t>(*n);
            else
                lines++;
        } else {
            ADD_FAILURE() << "unexpected line: " << l.raw;
        }
    }
    EXPECT_EQ(lines + repeats + lost, static_cast<uint64_t>(kFlood))
        << lines << " lines, " << repeats << " repeats, " << lost << " lost";
    EXPECT_LT(r.audit.size(), 1000u) << "the flood was not summarized";
    EXPECT_LT(confine_ms, job_ms) << "confine spent more CPU than the job flooding it";
    fmt::print(
        "flood of {} denied opens: {} lines ({} of them counts of {} repeats), {} lost; CPU: confine {} ms, "
        "the job {} ms\n",
        kFlood, r.audit.size(), r.audit.size() - lines, repeats, lost, confine_ms, job_ms);
    RecordProperty("confine_cpu_ms", std::to_string(confine_ms));
    RecordProperty("job_cpu_ms", std::to_string(job_ms));
}

}  // namespace
}  // namespace vmtest
