// Tests of loader/audit_summary.cpp: `confine audit`'s counts.
#include "loader/audit_summary.h"

#include <gtest/gtest.h>

#include <sstream>

namespace confine {
namespace {

constexpr const char* kLog =
    R"({"time":"2026-12-01T10:00:00.000001Z","job":"j1","cgroup_id":1,"pid":7,"tgid":7,"uid":1000,"comm":"cat","op":"open_read","target":"/home/u/.ssh/id","verdict":"deny","mode":"enforce"}
{"time":"2026-12-01T10:00:01.000001Z","job":"j1","cgroup_id":1,"pid":7,"tgid":7,"uid":1000,"comm":"cat","op":"open_read","target":"/home/u/.ssh/id","verdict":"deny","mode":"enforce","repeats":1234}
{"time":"2026-12-01T10:00:02Z","job":"j1","cgroup_id":1,"op":"lost","count":5}
not json
{"time":"2026-12-01T09:59:00.000001Z","job":"j2","cgroup_id":2,"pid":8,"tgid":8,"uid":1000,"comm":"curl","op":"connect","target":"tcp://1.2.3.4:443","verdict":"allow","mode":"audit"}
{"time":"2026-12-01T10:03:00Z","job":"j2","cgroup_id":2,"op":"limit","target":"pids","count":3,"verdict":"deny","mode":"audit"}
)";

TEST(AuditSummary, CountsPerJobOpAndTargetWithRepeatsAndLosses) {
    AuditSummary s;
    std::istringstream in(kLog);
    s.add(in);
    EXPECT_EQ(s.denials, 1u + 1234 + 1 + 3);
    EXPECT_EQ(s.lost, 5u);
    EXPECT_EQ(s.unreadable, 1u);
    EXPECT_EQ(s.first, "2026-12-01T09:59:00.000001Z");
    EXPECT_EQ(s.last, "2026-12-01T10:03:00Z");
    ASSERT_EQ(s.jobs.size(), 2u);
    EXPECT_EQ(s.jobs.at("j1").denials, 1235u);
    EXPECT_EQ(s.jobs.at("j1").lost, 5u);
    EXPECT_EQ(s.jobs.at("j2").mode, "audit");
    EXPECT_EQ(s.ops.at("limit").denials, 3u);
    EXPECT_EQ((s.targets.at({"/home/u/.ssh/id", "open_read"}).denials), 1235u);
    const std::string text = s.text();
    EXPECT_NE(text.find("1,239 denials in 2 jobs, 2026-12-01T09:59:00.000001Z to 2026-12-01T10:03:00Z; 5 events lost"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("1 line was not an audit record"), std::string::npos) << text;
    const std::string json = s.json();
    EXPECT_NE(json.find(R"("unreadable_lines": 1)"), std::string::npos) << json;
}

}  // namespace
}  // namespace confine
