// Where the audit records go, and what a run does when they can't: the
// systemd journal (`--audit-log journal`), and a log that fails (a full
// disk, a reader gone) under `--on-audit-error kill` (the default) and
// `continue`.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "harness.h"

namespace vmtest {
namespace {

using Entry = std::map<std::string, std::string>;

std::string field(const Entry& e, const std::string& key) {
    auto it = e.find(key);
    return it == e.end() ? "" : it->second;
}

// The journal's entries for JOB, once there are at least N.
std::vector<Entry> job_entries(const std::string& job, size_t n = 1) {
    std::vector<Entry> found;
    wait_until(
        [&] {
            found = Journald::entries({"CONFINE_JOB=" + job});
            return found.size() >= n;
        },
        30);
    return found;
}

const Entry* entry_for(const std::vector<Entry>& entries, const std::string& op, const std::string& target) {
    for (const Entry& e : entries)
        if (field(e, "CONFINE_OP") == op && field(e, "CONFINE_TARGET") == target) return &e;
    return nullptr;
}

// r's journal entry for its read of the key, with the priority, verdict
// and mode of `mode` (enforce: 4, deny; audit: 5, allow).
void expect_key_entry(const Result& r, const std::string& mode, Entry& e) {
    std::vector<Entry> entries = job_entries(r.job);
    const Entry* found = entry_for(entries, "open_read", kSshKey);
    ASSERT_NE(found, nullptr) << entries.size() << " entries for the " << mode << "-mode job, none for the read";
    e = *found;
    const bool enforce = mode == "enforce";
    EXPECT_EQ(field(e, "PRIORITY"), enforce ? "4" : "5");
    EXPECT_EQ(field(e, "CONFINE_VERDICT"), enforce ? "deny" : "allow");
    EXPECT_EQ(field(e, "CONFINE_MODE"), mode);
}

class AuditJournalTest : public VmTest {};

TEST_F(AuditJournalTest, EachRecordIsAnEntryWithItsFieldsSentByRoot) {
    Journald journald;
    ASSERT_EQ(journald.error(), "");
    // Controls: the journal takes an entry and gives it back; unconfined,
    // the key reads.
    ASSERT_EQ(run_root("echo control | systemd-cat -t confine-control").status, 0);
    ASSERT_TRUE(wait_until([] { return !Journald::entries({"SYSLOG_IDENTIFIER=confine-control"}).empty(); }, 30))
        << "journalctl never showed an entry journald was sent";
    ASSERT_EQ(run_unconfined(fmt::format("cat {}", kSshKey)).status, 0);

    Result r = run_confined("", fmt::format("cat {} 2>/dev/null; echo done", kSshKey), {"--audit-log", "journal"});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << "records went to a file too:\n" << r.describe();
    Entry e;
    ASSERT_NO_FATAL_FAILURE(expect_key_entry(r, "enforce", e));
    EXPECT_EQ(field(e, "SYSLOG_IDENTIFIER"), "confine");
    EXPECT_EQ(field(e, "MESSAGE_ID"), "6c0f9e3a52d74b0e8a41c7d2f35e9b18");
    EXPECT_EQ(field(e, "CONFINE_COMM"), "cat");
    EXPECT_EQ(field(e, "CONFINE_UID"), std::to_string(test_user().uid));
    EXPECT_NE(field(e, "MESSAGE").find(fmt::format("denied open_read \"{}\" by \"cat\"", kSshKey)), std::string::npos)
        << field(e, "MESSAGE");
    // Trusted fields, stamped by journald: confine, as root, sent it.
    EXPECT_EQ(field(e, "_UID"), "0");
    EXPECT_EQ(field(e, "_COMM"), "confine");

    // A name with a newline forges no field: journald's native protocol
    // sends such a value with its length (the unconfined read is the
    // control that the file is there).
    const std::string forged = fmt::format("{}/k\nCONFINE_VERDICT=allow", kUserHome);
    write_file(forged, "x\n");
    const std::string cat_forged = fmt::format("cat \"$(printf '{}/k\\nCONFINE_VERDICT=allow')\"", kUserHome);
    ASSERT_EQ(run_unconfined(cat_forged).status, 0);
    Result nl = run_confined("", cat_forged + " 2>/dev/null; true", {"--audit-log", "journal"});
    std::vector<Entry> nl_entries = job_entries(nl.job);
    const Entry* nl_entry = entry_for(nl_entries, "open_read", forged);
    ASSERT_NE(nl_entry, nullptr) << nl_entries.size() << " entries, none for the read of the name with a newline";
    EXPECT_EQ(field(*nl_entry, "CONFINE_VERDICT"), "deny");

    // In audit mode: let through, a notice.
    Result audited =
        run_confined("", fmt::format("cat {} >/dev/null", kSshKey), {"--audit-log", "journal", "--mode", "audit"});
    EXPECT_EQ(audited.status, 0) << audited.describe();
    Entry allowed;
    ASSERT_NO_FATAL_FAILURE(expect_key_entry(audited, "audit", allowed));
}

// A flood of distinct denials: 3,000 connects to as many ports, paced (a
// millisecond apart) so that journald, not the job's ring, is what can't
// keep up: a burst that the ring can't hold is AuditFloodTest's subject.
constexpr const char* kConnectFlood =
    "import socket, time\n"
    "for port in range(1, 3001):\n"
    "    s = socket.socket()\n"
    "    try: s.connect(('10.9.9.9', port))\n"
    "    except OSError: pass\n"
    "    s.close()\n"
    "    time.sleep(0.001)\n";

// journald drops, silently, what one unit sends past its limit, and every
// job of a runner is one unit: a job's flood is held to a budget of its
// own, and what goes past it is counted, not dropped.
TEST_F(AuditJournalTest, AFloodIsHeldToABudgetAndWhatPassesItIsCounted) {
    Journald journald;
    ASSERT_EQ(journald.error(), "");
    write_file(work() + "/flood.py", kConnectFlood);
    Result r = run_confined("", fmt::format("python3 flood.py; cat {} 2>/dev/null; true", kSshKey),
                            {"--audit-log", "journal"});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_NE(r.err.find("went past the journal's budget"), std::string::npos) << r.err;
    std::vector<Entry> entries;
    uint64_t denials = 0, over_budget = 0, ring_lost = 0;
    // journald may take a moment to store the last entries. Which entry is
    // last depends on the pacing: once the budget refills, the key's denial
    // follows the count of what went past it.
    wait_until(
        [&] {
            entries = Journald::entries({"CONFINE_JOB=" + r.audit_job});
            denials = over_budget = ring_lost = 0;
            for (const Entry& e : entries) {
                if (field(e, "CONFINE_OP") == "lost")
                    (field(e, "CONFINE_REASON") == "journal_rate_limit" ? over_budget : ring_lost) +=
                        std::stoull(field(e, "CONFINE_COUNT"));
                else
                    denials += field(e, "CONFINE_REPEATS").empty() ? 1 : std::stoull(field(e, "CONFINE_REPEATS"));
            }
            return denials + over_budget + ring_lost >= 3001;
        },
        30);
    // Every denial (3,000 connects and the key) is an entry or counted.
    EXPECT_EQ(denials + over_budget + ring_lost, 3001u)
        << denials << " entries, " << over_budget << " over the budget, " << ring_lost << " lost in the ring";
    EXPECT_GT(over_budget, 0u);
    EXPECT_LT(entries.size(), 2500u) << "no budget held the flood";
}

TEST_F(AuditJournalTest, AJobCantWriteToTheJournal) {
    Journald journald;
    ASSERT_EQ(journald.error(), "");
    // Both of journald's ways in for a local process: its stream socket
    // (systemd-cat) and the syslog socket (logger; the guests' devtmpfs
    // has no /dev/log link to it).
    const std::string cmd =
        "echo forged-{0} | systemd-cat -t confine; logger -u /run/systemd/journal/dev-log -t confine forged-{0}; true";
    Result control = run_unconfined(fmt::format(fmt::runtime(cmd), "control"));
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(wait_until([] { return Journald::entries({"MESSAGE=forged-control"}).size() == 2; }, 30))
        << "the unconfined user's entries never showed: " << Journald::entries({"MESSAGE=forged-control"}).size()
        << "\n"
        << control.describe();

    Result r = run_confined("", fmt::format(fmt::runtime(cmd), "job"), {"--audit-log", "journal"});
    EXPECT_EQ(r.status, 0) << r.describe();
    std::vector<Entry> entries = job_entries(r.job, 2);
    size_t refused = 0;
    for (const Entry& e : entries)
        if (field(e, "CONFINE_TARGET").starts_with("unix:") && field(e, "CONFINE_VERDICT") == "deny") refused++;
    EXPECT_GE(refused, 2u) << entries.size() << " entries for the job";
    EXPECT_TRUE(Journald::entries({"MESSAGE=forged-job"}).empty()) << "the job wrote to the journal";
}

TEST_F(AuditJournalTest, WithoutJournaldNoJobRuns) {
    // Control: with a file for its log, the job runs.
    Result control = run_confined("", "touch ran");
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(work() + "/ran"));
    unlink((work() + "/ran").c_str());

    std::filesystem::remove_all("/run/systemd/journal");
    Result r = run_confined("", "touch ran", {"--audit-log", "journal"});
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("journald does not answer"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(work() + "/ran")) << "the job ran without its log";
}

class AuditErrorTest : public VmTest {};

// The job: one denial, then long enough to be stopped while it waits.
std::string denial_then_wait(int seconds) {
    return fmt::format("cat {} 2>/dev/null; sleep {}; touch ran", kSshKey, seconds);
}

TEST_F(AuditErrorTest, AFullDiskStopsTheJob) {
    FullDisk disk(at("full"));
    ASSERT_EQ(disk.error(), "");
    // Control: with room for its log, the same job runs to its end.
    Result control = run_confined("", denial_then_wait(5));
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(work() + "/ran"));
    EXPECT_DENIAL(control, "open_read", kSshKey, "cat");
    unlink((work() + "/ran").c_str());

    Result r = run_confined("", denial_then_wait(5), {"--audit-log", at("full/audit.jsonl")});
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the job was stopped"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(work() + "/ran")) << "the job ran on with its denials unlogged";
}

TEST_F(AuditErrorTest, AReaderGoneStopsTheJob) {
    for (bool reader : {true, false}) {
        SCOPED_TRACE(reader ? "control: the pipe has a reader" : "the reader is gone");
        int p[2];
        ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
        if (!reader) close(p[0]);
        Result r = run({.args = {"--audit-log", fmt::format("/dev/fd/{}", p[1])},
                        .argv = {"/bin/sh", "-c", denial_then_wait(5)},
                        .keep_fd = p[1]});
        close(p[1]);
        if (reader) {
            char buf[65536];
            ssize_t n = read(p[0], buf, sizeof buf);
            close(p[0]);
            EXPECT_EQ(r.status, 0) << r.describe();
            EXPECT_TRUE(exists(work() + "/ran"));
            EXPECT_NE(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0).find(kSshKey), std::string::npos);
            unlink((work() + "/ran").c_str());
        } else {
            EXPECT_EQ(r.status, 125) << r.describe();
            EXPECT_NE(r.err.find("Broken pipe"), std::string::npos) << r.err;
            EXPECT_FALSE(exists(work() + "/ran")) << "the job ran on with its denials unlogged";
        }
    }
}

// A reader that keeps the log's pipe open and reads nothing stalls no
// supervision: a line waits for it 10 s, then the job is stopped.
TEST_F(AuditErrorTest, AReaderThatStopsReadingStallsNothing) {
    write_file(work() + "/flood.py", kConnectFlood);
    const std::string fifo = at("fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const RunSpec spec = {.args = {"--audit-log", fifo, "--timeout", "3"},
                          .argv = {"/bin/sh", "-c", "python3 flood.py; sleep 100"}};
    // Control: with a reader that reads, the job's timeout ends it.
    Process reader = Process::start({.argv = {"/bin/sh", "-c", "cat " + fifo + " >/dev/null"}});
    auto t0 = std::chrono::steady_clock::now();
    Result control = run(spec);
    auto control_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(control.status, 124) << control.describe();
    reader.wait(30);

    Process holder = Process::start({.argv = {"/bin/sh", "-c", "exec 3<" + fifo + "; sleep 100"}});
    t0 = std::chrono::steady_clock::now();
    Result r = run(spec);
    auto stalled_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    kill(holder.pid(), SIGKILL);
    holder.wait(10);
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("the reader took no line for 10 s"), std::string::npos) << r.err;
    EXPECT_LT(stalled_s, control_s + 30) << "supervision stalled: " << stalled_s << " s against " << control_s;
}

TEST_F(AuditErrorTest, ContinueRunsOnAndCountsWhatTheLogMissed) {
    FullDisk disk(at("full"));
    ASSERT_EQ(disk.error(), "");
    ContinuedRun c;
    ASSERT_NO_FATAL_FAILURE(
        continue_past_full_disk({}, disk, at("full/audit.jsonl"), "cat " + std::string(kSshKey), c));
    EXPECT_EQ(c.lines[1].str("op"), "open_read") << c.lines[1].raw;
}

}  // namespace
}  // namespace vmtest
