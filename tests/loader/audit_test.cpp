// The audit log's JSON lines, formatted from raw BPF events.
#include "loader/audit.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <vector>

namespace confine {
namespace {

confine_event event(uint16_t op) {
    confine_event e{};
    e.ktime_ns = 1;
    e.cgroup_id = 42;
    e.pid = e.tgid = 7;
    e.uid = 1000;
    e.op = op;
    e.denied = 1;
    strcpy(e.comm, "cat");
    return e;
}

std::string format(const confine_event& e, bool audit_mode = false) {
    auto log = AuditLog::open("/dev/null", "job-1", audit_mode);
    EXPECT_TRUE(log) << log.error().message;
    return log->format(e);
}

TEST(AuditFormat, PathDenialHasEveryFieldOfTheContract) {
    confine_event e = event(CONFINE_OP_OPEN_READ);
    e.target_kind = CONFINE_TARGET_PATH;
    strcpy(e.target.path, "/home/u/.ssh/id_ed25519");
    std::string line = format(e);
    EXPECT_TRUE(std::regex_match(
        line, std::regex(R"(\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z","job":"job-1","cgroup_id":42,"pid":7,)"
                         R"("tgid":7,"uid":1000,"comm":"cat","op":"open_read","target":"/home/u/\.ssh/id_ed25519",)"
                         R"("verdict":"deny","mode":"enforce"\})")))
        << line;
}

TEST(AuditFormat, AuditModeAllows) {
    confine_event e = event(CONFINE_OP_USERNS_CREATE);
    e.denied = 0;
    std::string line = format(e, true);
    EXPECT_NE(line.find(R"("verdict":"allow","mode":"audit")"), std::string::npos) << line;
}

TEST(AuditFormat, InetTargetsAsUrls) {
    confine_event e = event(CONFINE_OP_CONNECT);
    e.target_kind = CONFINE_TARGET_INET;
    uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4};
    memcpy(e.target.inet.addr, v4, 16);
    e.target.inet.port = 443;
    e.target.inet.proto = IPPROTO_TCP;
    EXPECT_NE(format(e).find(R"("target":"tcp://1.2.3.4:443")"), std::string::npos);

    uint8_t v6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    memcpy(e.target.inet.addr, v6, 16);
    e.target.inet.port = 53;
    e.target.inet.proto = IPPROTO_UDP;
    EXPECT_NE(format(e).find(R"("target":"udp://[::1]:53")"), std::string::npos);
}

TEST(AuditFormat, UnixTargets) {
    confine_event e = event(CONFINE_OP_CONNECT);
    e.target_kind = CONFINE_TARGET_UNIX;
    strcpy(e.target.path, "/run/x.sock");
    EXPECT_NE(format(e).find(R"("target":"unix:/run/x.sock")"), std::string::npos);
    e.target_kind = CONFINE_TARGET_UNIX_ABSTRACT;
    memcpy(e.target.path, "a\0b", 3);
    e.target_len = 3;
    EXPECT_NE(format(e).find(R"("target":"unix-abstract:a\u0000b")"), std::string::npos) << format(e);
}

TEST(AuditFormat, FailClosedDenialsSayWhy) {
    confine_event e = event(CONFINE_OP_OPEN_READ);
    e.reason = CONFINE_REASON_PATH_TOO_DEEP;
    EXPECT_NE(format(e).find(R"("reason":"path_too_deep")"), std::string::npos);
}

// A walk that gave up holds the path's end only, and says so.
TEST(AuditFormat, PathsTooLongOrDeepAreTheirEndAfterDots) {
    confine_event e = event(CONFINE_OP_OPEN_READ);
    e.target_kind = CONFINE_TARGET_PATH;
    strcpy(e.target.path, "/d/d/f");
    EXPECT_NE(format(e).find(R"("target":"/d/d/f")"), std::string::npos) << format(e);
    for (auto reason : {CONFINE_REASON_PATH_TOO_DEEP, CONFINE_REASON_PATH_TOO_LONG}) {
        e.reason = reason;
        EXPECT_NE(format(e).find(R"("target":".../d/d/f")"), std::string::npos) << format(e);
    }
    e.target_kind = CONFINE_TARGET_UNIX;
    EXPECT_NE(format(e).find(R"("target":"unix:.../d/d/f")"), std::string::npos) << format(e);
    e.reason = CONFINE_REASON_OUTSIDE_ROOT;
    EXPECT_NE(format(e).find(R"("target":"unix:/d/d/f")"), std::string::npos) << format(e);
}

TEST(AuditFormat, SignalsNameTheirTarget) {
    confine_event e = event(CONFINE_OP_SIGNAL);
    e.target_kind = CONFINE_TARGET_TASK;
    e.target.task.tgid = 99;
    e.target.task.signal = 15;
    strcpy(e.target.task.comm, "sleep");
    std::string line = format(e);
    EXPECT_NE(line.find(R"("target":"pid:99")"), std::string::npos) << line;
    EXPECT_NE(line.find(R"("target_comm":"sleep","signal":15)"), std::string::npos) << line;
}

TEST(AuditFormat, FileOwnersNameAProcessGroupOrSayWhyNot) {
    confine_event e = event(CONFINE_OP_SIGNAL);
    e.target_kind = CONFINE_TARGET_PGRP;
    e.target.task.tgid = 42;
    e.target.task.signal = 29;
    std::string line = format(e);
    EXPECT_NE(line.find(R"("target":"pgrp:42")"), std::string::npos) << line;
    EXPECT_NE(line.find(R"("signal":29)"), std::string::npos) << line;
    EXPECT_EQ(line.find("target_comm"), std::string::npos) << line;
    e = event(CONFINE_OP_SIGNAL);
    e.reason = CONFINE_REASON_OWNER_IN_USER_MEMORY;
    line = format(e);
    EXPECT_NE(line.find(R"("target":"","verdict":"deny")"), std::string::npos) << line;
    EXPECT_NE(line.find(R"("reason":"owner_in_user_memory")"), std::string::npos) << line;
}

TEST(AuditFormat, RefusedSocketsSayWhatTheyAre) {
    confine_event e = event(CONFINE_OP_SOCKET);
    e.target_kind = CONFINE_TARGET_SOCKET;
    e.target.sock = {2, 5, 132, 0};
    std::string line = format(e);
    EXPECT_NE(line.find(R"("target":"","verdict":"deny")"), std::string::npos) << line;
    EXPECT_NE(line.find(R"("family":2,"type":5,"protocol":132)"), std::string::npos) << line;
    // A refused sendmsg family is kept too (it used to be dropped).
    e = event(CONFINE_OP_SENDMSG);
    e.target_kind = CONFINE_TARGET_SOCKET;
    e.target.sock = {16, 0, 0, 0};
    line = format(e);
    EXPECT_NE(line.find(R"("family":16})"), std::string::npos) << line;
}

TEST(AuditFormat, SctpTargetsAreNamedSo) {
    confine_event e = event(CONFINE_OP_CONNECT);
    e.target_kind = CONFINE_TARGET_INET;
    const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
    memcpy(e.target.inet.addr, v4, 16);
    e.target.inet.port = 9;
    e.target.inet.proto = IPPROTO_SCTP;
    EXPECT_NE(format(e).find(R"("target":"sctp://10.0.0.2:9")"), std::string::npos) << format(e);
}

TEST(AuditFormat, KeysNameTheirSerialAndDescription) {
    confine_event e = event(CONFINE_OP_KEY);
    e.target_kind = CONFINE_TARGET_KEY;
    e.target.key.serial = 123456;
    strcpy(e.target.key.description, "_uid.1000");
    std::string line = format(e);
    EXPECT_NE(line.find(R"("target":"key:123456")"), std::string::npos) << line;
    EXPECT_NE(line.find(R"("description":"_uid.1000")"), std::string::npos) << line;
}

TEST(JsonQuote, EscapesQuotesControlsAndStrayBytesButKeepsUtf8) {
    EXPECT_EQ(json_quote("a\"b\\c"), R"("a\"b\\c")");
    EXPECT_EQ(json_quote("tab\tnl\n"), R"("tab\u0009nl\u000a")");
    EXPECT_EQ(json_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
    EXPECT_EQ(json_quote("bad\xff"), R"("bad\u00ff")");
    EXPECT_EQ(json_quote("cut\xc3"), R"("cut\u00c3")");
}

// RFC 3629: lead bytes past 0xf4, overlong forms and surrogates are stray
// bytes (JSON readers refuse them), not characters.
TEST(AuditFormat, OnlyWellFormedUtf8PassesThrough) {
    EXPECT_EQ(json_quote("\xf8\x80\x80"), R"("\u00f8\u0080\u0080")");
    EXPECT_EQ(json_quote("\xc0\xaf"), R"("\u00c0\u00af")");
    EXPECT_EQ(json_quote("\xed\xa0\x80"), R"("\u00ed\u00a0\u0080")");
    EXPECT_EQ(json_quote("\xf4\x90\x80\x80"), R"("\u00f4\u0090\u0080\u0080")");
    EXPECT_EQ(json_quote("\xe2\x82\xac \xf0\x9f\x98\x80"), "\"\xe2\x82\xac \xf0\x9f\x98\x80\"");
}

// The lines an AuditLog writes while WRITE feeds it.
std::vector<std::string> written(const std::function<void(AuditLog&)>& write) {
    char path[] = "/tmp/confine-audit-test-XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    close(fd);
    {
        auto log = AuditLog::open(path, "job-1", false);
        EXPECT_TRUE(log);
        if (log) write(*log);
    }
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    unlink(path);
    return lines;
}

// Two denials a job made look alike by moving a '/' between its name and
// the target: they are two, not a repeat.
TEST(AuditRepeats, NoTwoDifferentDenialsAreTakenForRepeats) {
    std::vector<std::string> lines = written([](AuditLog& log) {
        confine_event a = event(CONFINE_OP_CONNECT), b = a;
        a.comm[0] = 0;
        a.target_kind = b.target_kind = CONFINE_TARGET_UNIX;
        strcpy(a.target.path, "/tmp/unix:/run/dbus/system_bus_socket");
        strcpy(b.comm, "/unix:/tmp");
        strcpy(b.target.path, "/run/dbus/system_bus_socket");
        log.event(a);
        log.event(b);
        log.flush_repeats();
    });
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[1].find(R"("target":"unix:/run/dbus/system_bus_socket")"), std::string::npos) << lines[1];
}

// The same denial again and again is one line and a count: the first at
// once, the count when the run ends (another event, or flush_repeats).
TEST(AuditRepeats, ARunOfTheSameDenialIsOneLineAndACount) {
    std::vector<std::string> lines = written([](AuditLog& log) {
        confine_event e = event(CONFINE_OP_OPEN_READ);
        strcpy(e.target.path, "/home/u/.ssh/id_ed25519");
        e.target_kind = CONFINE_TARGET_PATH;
        for (int i = 0; i < 5; i++) {
            e.ktime_ns = 1000 + i;
            e.pid = 7 + i % 2;  // any thread of the process
            log.event(e);
        }
        confine_event other = e;
        strcpy(other.target.path, "/etc/shadow");
        log.event(other);
        log.event(other);
        log.flush_repeats();
        log.flush_repeats();  // nothing more to say
    });
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0].find("repeats"), std::string::npos);
    EXPECT_NE(lines[1].find(R"("target":"/home/u/.ssh/id_ed25519","verdict":"deny","mode":"enforce","repeats":4})"),
              std::string::npos)
        << lines[1];
    EXPECT_NE(lines[2].find(R"("target":"/etc/shadow")"), std::string::npos);
    EXPECT_EQ(lines[2].find("repeats"), std::string::npos);
    EXPECT_NE(lines[3].find(R"("repeats":1})"), std::string::npos) << lines[3];
}

// A journal entry: the record's fields as CONFINE_*, unescaped, a MESSAGE
// that escapes what the job named, and a priority by verdict.
TEST(AuditJournal, AnEntryHasTheRecordsFieldsAndAPriorityByVerdict) {
    Record r;
    r.str("job", "j").num("pid", 7).str("comm", "c\nat").str("op", "open_read").str("target", "/a\nb");
    std::vector<std::string> deny = Record(r).str("verdict", "deny").journal_fields();
    EXPECT_EQ(deny[0], R"(MESSAGE=confine: denied open_read "/a\u000ab" by "c\u000aat" (pid 7) [job "j"])");
    EXPECT_EQ(deny[1], "PRIORITY=4");
    EXPECT_EQ(deny[2], "SYSLOG_IDENTIFIER=confine");
    EXPECT_EQ(deny[3], std::string("MESSAGE_ID=") + std::string(kJournalMessageId));
    EXPECT_NE(std::find(deny.begin(), deny.end(), "CONFINE_TARGET=/a\nb"), deny.end());
    EXPECT_NE(std::find(deny.begin(), deny.end(), "CONFINE_PID=7"), deny.end());
    EXPECT_EQ(Record(r).str("verdict", "allow").journal_fields()[1], "PRIORITY=5");
    // Shown as text: bidirectional overrides escaped, a long target cut.
    std::vector<std::string> bidi =
        Record().str("job", "j").str("op", "open_read").str("target", "/a\u202etxt.exe").journal_fields();
    EXPECT_NE(bidi[0].find(R"("/a\xe2\x80\xaetxt.exe")"), std::string::npos) << bidi[0];
    std::vector<std::string> long_target =
        Record().str("job", "j").str("op", "open_read").str("target", "/" + std::string(4000, 'x')).journal_fields();
    EXPECT_LT(long_target[0].size(), 1200u);
    EXPECT_NE(std::find(long_target.begin(), long_target.end(), "CONFINE_TARGET=/" + std::string(4000, 'x')),
              long_target.end());
    std::vector<std::string> lost = Record().str("job", "j").str("op", "lost").num("count", 3).journal_fields();
    EXPECT_EQ(lost[0], R"(MESSAGE=confine: lost 3 audit events [job "j"])");
    EXPECT_EQ(lost[1], "PRIORITY=3");
}

// journald's native protocol: a value with a newline goes with its length,
// so a path the job named can't start a field of its own.
TEST(AuditJournal, AValueWithANewlineTravelsWithItsLength) {
    const std::string d = journal_datagram({"PRIORITY=4", "CONFINE_TARGET=/a\nCONFINE_VERDICT=allow", "X="});
    const std::string target = "/a\nCONFINE_VERDICT=allow";
    std::string want = "PRIORITY=4\nCONFINE_TARGET\n";
    want += std::string(1, static_cast<char>(target.size())) + std::string(7, '\0') + target + "\nX=\n";
    EXPECT_EQ(d, want);
}

// A log that can't be written says why, and counts what it missed.
TEST(AuditFailure, AFullDiskIsAFailureAndItsRecordsAreCounted) {
    auto log = AuditLog::open("/dev/full", "job-1", false);
    ASSERT_TRUE(log) << log.error().message;
    EXPECT_FALSE(log->failure());
    log->event(event(CONFINE_OP_OPEN_READ));
    log->set_cgroup_id(42);
    log->lost(5);
    ASSERT_TRUE(log->failure());
    EXPECT_EQ(*log->failure(), strerror(ENOSPC));
    // The event, and the five the lost record stands for.
    EXPECT_EQ(log->unwritten(), 6u);
    EXPECT_EQ(log->destination(), "/dev/full");
}

}  // namespace
}  // namespace confine
