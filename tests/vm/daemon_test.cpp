// `confine daemon` and `confine run` as its unprivileged client: the same
// job, status and audit lines as a run as root, within the administrator's
// ceiling, as the caller or a pool user only, ended with its client, and
// never outliving a dead daemon once it starts again.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "harness.h"

namespace vmtest {
namespace {

namespace fs = std::filesystem;

// The embedded default policy, as a ceiling: the system readable, the
// job's own directories writable, the account's home denied.
constexpr const char* kCeiling = R"(version = 1
[filesystem]
read = ["/"]
write = ["{workdir}", "{home}", "{tmp}"]
deny = ["{user_home}"]
)";

// A client's policy asking for more than the ceiling: the account's home.
constexpr const char* kGreedy = R"(version = 1
[filesystem]
read = ["/"]
write = ["{workdir}", "{home}", "{tmp}", "{user_home}"]
)";

class DaemonTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        // sun_path holds 108 bytes, less than base() may take.
        static int n = 0;
        socket_ = fmt::format("/var/tmp/confine-d{}.sock", ++n);
    }
    void TearDown() override { stop_daemon(); }

    // Starts the daemon with this ceiling and daemon.toml, through WRAPPER
    // if given (setpriv and its options); the test user's group may connect.
    void start_daemon(const std::string& config = "", std::vector<std::string> wrapper = {}) {
        std::ofstream(at("ceiling.toml")) << kCeiling;
        std::ofstream(at("daemon.toml")) << config;
        std::vector<std::string> argv = std::move(wrapper);
        argv.insert(argv.end(), {confine_bin(), "daemon", "--socket", socket_, "--ceiling", at("ceiling.toml"),
                                 "--config", at("daemon.toml"), "--group", kUser});
        daemon_.emplace(
            Process::start({.argv = argv, .env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, .own_group = true}));
        ASSERT_TRUE(wait_until([&] { return exists(socket_); }, 60)) << "the daemon never listened";
    }
    Result stop_daemon() {
        if (!daemon_) return {};
        kill(daemon_->pid(), SIGTERM);
        Result r = daemon_->wait(60);
        daemon_.reset();
        return r;
    }

    RunSpec client(const std::string& cmd, const std::string& policy = "") {
        return {.policy = policy, .argv = {"/bin/sh", "-c", cmd}, .daemon = socket_};
    }

    // The cgroup of a job the daemon started for the test user.
    std::string served_cgroup(const std::string& job) {
        return job_cgroup(fmt::format("u{}.{}", test_user().uid, job));
    }

    // A raw client, as the test user: python3 running SCRIPT with the
    // socket's path as its argument.
    Process raw_client(const std::string& script) {
        std::ofstream(at("client.py")) << script;
        chmod(at("client.py").c_str(), 0644);
        return Process::start({.argv = {"/usr/bin/python3", at("client.py"), socket_},
                               .env = {"PATH=/usr/bin:/bin"},
                               .cwd = work(),
                               .uid = test_user().uid,
                               .gid = test_user().gid,
                               .groups = test_user().groups});
    }

    std::string socket_;
    std::optional<Process> daemon_;
};

TEST_F(DaemonTest, AClientGetsTheStatusOutputAndAuditLinesOfARunAsRoot) {
    start_daemon();
    const std::string cmd = fmt::format("id -u; echo to-stderr >&2; ls {}; exit 3", kUserHome);
    Result unconfined = run_unconfined(cmd);
    ASSERT_EQ(unconfined.status, 3) << unconfined.describe();
    ASSERT_NE(unconfined.out, std::to_string(test_user().uid) + "\n") << "the control can't list the home";

    Result root = run_confined("", cmd);
    Result served = run(client(cmd));
    for (const Result* r : {&root, &served}) {
        EXPECT_EQ(r->status, 3) << r->describe();
        EXPECT_EQ(r->out, std::to_string(test_user().uid) + "\n") << r->describe();
        EXPECT_NE(r->err.find("to-stderr"), std::string::npos) << r->describe();
        EXPECT_DENIAL(*r, "open_read", kUserHome, "ls");
    }
}

// Under systemd the daemon has the unit's CapabilityBoundingSet and nothing
// more: a job must start, confined, with that alone. (The unit once lacked
// CAP_SETPCAP, which the job's first process needs to empty its own
// bounding set, and no job started.)
TEST_F(DaemonTest, TheUnitsCapabilitiesAreEnoughToRunAJob) {
    std::ifstream unit(std::string(SOURCE_DIR) + "/dist/systemd/confine.service");
    std::vector<std::string> caps;
    for (std::string line; std::getline(unit, line);) {
        if (!line.starts_with("CapabilityBoundingSet=")) continue;
        std::istringstream words(line.substr(line.find('=') + 1));
        for (std::string cap; words >> cap;) {
            std::transform(cap.begin(), cap.end(), cap.begin(), [](unsigned char c) { return std::tolower(c); });
            caps.push_back(cap.substr(cap.find('_') + 1));  // setpriv's names: no cap_
        }
    }
    ASSERT_FALSE(caps.empty()) << "no CapabilityBoundingSet in dist/systemd/confine.service";
    auto bounding = [&](std::string_view without) {
        std::string set = "-all";
        for (const std::string& c : caps)
            if (c != without) set += ",+" + c;
        return std::vector<std::string>{"/usr/bin/setpriv", "--bounding-set", set, "--"};
    };
    const std::string cmd = fmt::format("ls {}; id -u", kUserHome);

    // Control: one capability short, no job starts, so a missing one shows.
    start_daemon("", bounding("setpcap"));
    Result short_one = run(client(cmd));
    EXPECT_NE(short_one.status, 0) << short_one.describe();
    EXPECT_NE(short_one.err.find("Operation not permitted"), std::string::npos) << short_one.describe();
    ASSERT_EQ(stop_daemon().status, 0);

    start_daemon("", bounding(""));
    Result r = run(client(cmd));
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, std::to_string(test_user().uid) + "\n") << r.describe();
    EXPECT_DENIAL(r, "open_read", kUserHome, "ls");
}

TEST_F(DaemonTest, WithoutAnAuditLogTheLinesTakeStderrAndTheJobsStderrJoinsStdout) {
    start_daemon();
    Process p = Process::start({.argv = {confine_bin(), "run", "--workdir", work(), "--", "/bin/sh", "-c",
                                         fmt::format("echo to-stderr >&2; ls {}", kUserHome)},
                                .env = {"PATH=/usr/bin:/bin", "CONFINE_SOCKET=" + socket_},
                                .cwd = work(),
                                .uid = test_user().uid,
                                .gid = test_user().gid,
                                .groups = test_user().groups});
    Result r = p.wait();
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_NE(r.out.find("to-stderr"), std::string::npos) << r.describe();
    EXPECT_EQ(r.err.find("to-stderr"), std::string::npos) << r.describe();
    auto lines = parse_audit(r.err);
    EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const AuditLine& l) {
        return l.str("op") == "open_read" && l.str("target") == kUserHome;
    })) << r.describe();
}

// With --audit-log journal the worker, as root, writes the entries: their
// trusted fields name confine and root, not the client.
TEST_F(DaemonTest, AClientsJournalEntriesComeFromTheDaemon) {
    Journald journald;
    ASSERT_EQ(journald.error(), "");
    start_daemon();
    const std::string cmd = fmt::format("ls {}; true", kUserHome);
    ASSERT_EQ(run_unconfined(cmd).status, 0);
    RunSpec spec = client(cmd);
    spec.args = {"--audit-log", "journal"};
    Result r = run(spec);
    EXPECT_EQ(r.status, 0) << r.describe();
    std::vector<std::map<std::string, std::string>> entries;
    ASSERT_TRUE(wait_until([&] { return !(entries = Journald::entries({"CONFINE_JOB=" + r.audit_job})).empty(); }, 30))
        << r.describe();
    EXPECT_EQ(entries[0]["CONFINE_OP"], "open_read");
    EXPECT_EQ(entries[0]["CONFINE_TARGET"], kUserHome);
    EXPECT_EQ(entries[0]["CONFINE_UID"], std::to_string(test_user().uid));
    EXPECT_EQ(entries[0]["_UID"], "0");
    EXPECT_EQ(entries[0]["_COMM"], "confine");
}

// The client writes the log; when it can't, the job stops, as under root.
TEST_F(DaemonTest, AClientsLogOnAFullDiskStopsTheJob) {
    FullDisk disk(at("full"));
    ASSERT_EQ(disk.error(), "");
    start_daemon();
    const std::string cmd = fmt::format("ls {} 2>/dev/null; sleep 5; touch ran", kUserHome);
    // Control: with room for its log, the job runs to its end.
    Result control = run(client(cmd));
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(work() + "/ran"));
    unlink((work() + "/ran").c_str());

    RunSpec spec = client(cmd);
    spec.args = {"--audit-log", at("full/client-audit.jsonl")};
    Result r = run(spec);
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_TRUE(wait_until([&] { return served_cgroup(r.job).empty(); }, 30)) << "the job outlived its client";
    EXPECT_FALSE(exists(work() + "/ran")) << "the job ran on with its denials unlogged";
}

// With --on-audit-error continue, the client counts what its log missed
// and leads the next line it takes with that count, as root would.
TEST_F(DaemonTest, AClientThatContinuesCountsWhatItsLogMissed) {
    FullDisk disk(at("full"));
    ASSERT_EQ(disk.error(), "");
    start_daemon();
    ContinuedRun c;
    ASSERT_NO_FATAL_FAILURE(
        continue_past_full_disk(client(""), disk, at("full/client-audit.jsonl"), "ls " + std::string(kUserHome), c));
    EXPECT_EQ(c.lines[0].str("job"), c.r.audit_job) << c.lines[0].raw;
}

TEST_F(DaemonTest, TheCeilingHoldsWhereAClientAsksForMore) {
    start_daemon();
    write_file(kNotes, "notes\n");
    const std::string cmd = fmt::format("cat {}", kNotes);
    Result unconfined = run_unconfined(cmd);
    ASSERT_EQ(unconfined.status, 0) << unconfined.describe();
    // Control: the same policy, run by root directly, reads the file.
    Result root = run_confined(kGreedy, cmd);
    ASSERT_EQ(root.status, 0) << root.describe();
    ASSERT_EQ(root.out, "notes\n");

    Result served = run(client(cmd, kGreedy));
    EXPECT_NE(served.status, 0) << served.describe();
    EXPECT_EQ(served.out, "");
    EXPECT_DENIAL(served, "open_read", kNotes, "cat");
    // Audit mode is no way around it: the ceiling enforces.
    RunSpec audit = client(cmd, kGreedy);
    audit.args = {"--mode", "audit"};
    Result r = run(audit);
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "open_read", kNotes, "cat");
}

TEST_F(DaemonTest, AJobRunsAsItsCallerOrAPoolUserNeverRoot) {
    start_daemon("[pools]\nconfinetest = [\"nobody\"]\n");
    for (const char* who : {"root", "0", "daemon"}) {
        RunSpec s = client("id -u");
        s.args = {"--user", who};
        Result r = run(s);
        EXPECT_EQ(r.status, 125) << who << "\n" << r.describe();
        EXPECT_EQ(r.out, "") << who;
        EXPECT_NE(r.err.find("not the caller"), std::string::npos) << r.describe();
    }
    RunSpec pool = client("id -u");
    pool.args = {"--user", "nobody"};
    Result r = run(pool);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "65534\n") << r.describe();
    // And without the pool, nobody is refused.
    stop_daemon();
    start_daemon();
    r = run(pool);
    EXPECT_EQ(r.status, 125) << r.describe();
}

TEST_F(DaemonTest, SignalsReachTheJobAndItsStatusReturns) {
    start_daemon();
    Started s = start(client("trap 'exit 42' TERM; touch trapped; while :; do sleep 0.1; done"));
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/trapped"); }, 60));
    kill(s.proc->pid(), SIGTERM);
    Result r = finish(s);
    EXPECT_EQ(r.status, 42) << r.describe();
}

TEST_F(DaemonTest, AJobEndsWhenItsClientGoesAway) {
    start_daemon();
    Started s = start(client("touch started; sleep 1000"));
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/started"); }, 60));
    const std::string cg = served_cgroup(s.job);
    ASSERT_FALSE(cg.empty());
    kill(s.proc->pid(), SIGKILL);
    finish(s);
    EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 30)) << cg << " outlived its client";
}

TEST_F(DaemonTest, EachCallerHasALimitOfJobsAtOnce) {
    start_daemon("max_jobs = 1\n");
    Started first = start(client("touch started; sleep 1000"));
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/started"); }, 60));
    Result second = run(client("echo ran"));
    EXPECT_EQ(second.status, 125) << second.describe();
    EXPECT_EQ(second.out, "");
    EXPECT_NE(second.err.find("its limit"), std::string::npos) << second.describe();
    kill(first.proc->pid(), SIGKILL);
    finish(first);
    // The slot frees once the first job's worker is gone.
    ASSERT_TRUE(wait_until([&] { return run(client("echo ran")).out == "ran\n"; }, 30));
}

TEST_F(DaemonTest, AMalformedRequestGetsAnErrorAndHarmsNoOtherJob) {
    start_daemon();
    Started other = start(client("touch started; sleep 3; echo done"));
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/started"); }, 60));
    // Garbage and a wrong version with their fds, then a request without
    // fds and a message that isn't one, as the test user.
    const std::string py = fmt::format(R"(
import os, socket
fds = [0, 1, 2, 2, os.open('.', os.O_RDONLY)]
for payload, with_fds in [(b'Rgarbage', 1), (b'Rconfine/9\0arg\0ls\0', 1), (b'Rconfine/1\0arg\0ls\0', 0), (b'Q', 0)]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect('{}')
    socket.send_fds(s, [payload], fds) if with_fds else s.send(payload)
    while True:
        m = s.recv(65536)
        if not m: break
        print(m[:1].decode(), m[1:].decode())
)",
                                       socket_);
    std::ofstream(at("bad.py")) << py;
    chmod(at("bad.py").c_str(), 0644);
    Result bad = run_unconfined("python3 " + at("bad.py"));
    ASSERT_EQ(bad.status, 0) << bad.describe();
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 8) << bad.out;
    EXPECT_NE(bad.out.find("E request: the last field has no terminating NUL"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("E request: protocol 'confine/9' is not confine/1"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("E the first message must be a request with 5 fds"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("X 125"), std::string::npos) << bad.out;
    Result r = finish(other);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "done\n");
}

// A client that never reads its messages can't stall the job's
// supervision: the job floods the connection with denials (more than its
// send buffer holds), and its 6 s timeout still ends it.
TEST_F(DaemonTest, AClientThatNeverReadsCantStretchAJobPastItsTimeout) {
    start_daemon();
    write_file(kNotes, "notes\n");
    const std::string job = fmt::format(
        "i=0; while [ $i -lt 30000 ]; do read x < {} 2>/dev/null; i=$((i+1)); done; sleep 5; touch escaped", kNotes);
    Process p = raw_client(fmt::format(R"(
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
req = b'Rconfine/1\x00job_id\x00flood\x00timeout\x006s\x00arg\x00/bin/sh\x00arg\x00-c\x00arg\x00{}\x00'
socket.send_fds(s, [req], [0, 1, 2, 2, os.open('.', os.O_RDONLY)])
time.sleep(90)
)",
                                       job));
    ASSERT_TRUE(wait_until([&] { return !served_cgroup("flood").empty(); }, 30)) << "the job never started";
    const std::string cg = served_cgroup("flood");
    EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 60)) << "the job outlived its timeout";
    EXPECT_FALSE(exists(work() + "/escaped"));
    kill(p.pid(), SIGKILL);
    p.wait(10);
}

// Job ids are each caller's own: a daemon job may have the id of a job
// that runs already, where a second run as root with it is refused.
TEST_F(DaemonTest, AJobIdIsTheCallersOwn) {
    start_daemon();
    RunSpec first{.argv = {"/bin/sh", "-c", "touch started; sleep 1000"}};
    first.args = {"--job-id", "ci-7"};
    // start() names its own --job-id; the last one given wins.
    Started root = start(first);
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/started"); }, 60));
    ASSERT_FALSE(job_cgroup("ci-7").empty());
    RunSpec again{.argv = {"/bin/true"}};
    again.args = {"--job-id", "ci-7"};
    Result control = run(again);
    EXPECT_EQ(control.status, 125) << control.describe();
    RunSpec served = client("echo ran");
    served.args = {"--job-id", "ci-7"};
    Result r = run(served);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "ran\n");
    kill(root.proc->pid(), SIGTERM);
    finish(root);
}

// The daemon reads what a client names as the job's user could: git's
// pointer file in a root-only directory stays unread.
TEST_F(DaemonTest, PathsAreResolvedAsTheJobsUserNotAsRoot) {
    start_daemon();
    const std::string dir = at("rootonly");
    fs::create_directory(dir);
    chmod(dir.c_str(), 0711);  // searchable, not readable: the client can name it
    std::ofstream(dir + "/.git") << "gitdir: SECRET-TOKEN-42\n";
    chmod((dir + "/.git").c_str(), 0600);
    Result unconfined = run_unconfined("cat " + dir + "/.git");
    ASSERT_NE(unconfined.status, 0) << "the control: the test user can't read it";
    const std::string policy =
        "version = 1\n[filesystem]\nread = [\"/\"]\nwrite = [\"{workdir}\", \"{home}\", \"{tmp}\"]\n"
        "protect_git = [\"{workdir}\"]\n";
    // As root, for the same user, the pointer is read (and followed).
    RunSpec root{.policy = policy, .workdir = dir, .argv = {"/bin/true"}};
    root.args = {"--print-policy"};
    Result control = run(root);
    ASSERT_NE(control.out.find("SECRET-TOKEN-42"), std::string::npos) << control.describe();
    RunSpec served{.policy = policy, .workdir = dir, .argv = {"/bin/true"}, .daemon = socket_};
    served.args = {"--print-policy"};
    Result r = run(served);
    EXPECT_EQ((r.out + r.err).find("SECRET-TOKEN-42"), std::string::npos) << r.describe();
}

TEST_F(DaemonTest, JobsOrphanedByADeadDaemonEndWhenItStartsAgain) {
    start_daemon();
    Started s = start(client("touch started; sleep 1000"));
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/started"); }, 60));
    const std::string cg = served_cgroup(s.job);
    ASSERT_FALSE(cg.empty());
    // The daemon and its worker (its process group) die at once, as under
    // SIGKILL of the service.
    ASSERT_EQ(kill(-daemon_->pid(), SIGKILL), 0);
    daemon_->wait(30);
    daemon_.reset();
    finish(s);
    // The job's main process died with its worker; whatever else was in
    // the cgroup would still run confined. The restart ends it.
    ASSERT_TRUE(exists(cg)) << "nothing was left to collect";
    start_daemon();
    EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 30)) << cg << " survived the daemon's restart";
}

TEST_F(DaemonTest, AConfinedJobCantStartAnotherThroughTheDaemon) {
    start_daemon();
    // Where a job may run it from, as from a system's /usr/bin.
    fs::copy_file(confine_bin(), "/usr/local/bin/confine", fs::copy_options::overwrite_existing);
    const std::string cmd =
        fmt::format("CONFINE_SOCKET={} /usr/local/bin/confine run --workdir {} -- echo ran", socket_, work());
    Result outside = run_unconfined(cmd);
    ASSERT_EQ(outside.status, 0) << outside.describe();
    ASSERT_EQ(outside.out, "ran\n");
    // Even a job whose policy lets it reach the socket.
    Result inside = run_confined(make_policy({.connect = {"unix:" + socket_}}), cmd);
    EXPECT_EQ(inside.status, 125) << inside.describe();
    EXPECT_EQ(inside.out.find("ran"), std::string::npos) << inside.describe();
    EXPECT_NE(inside.err.find("a confined job can't start jobs"), std::string::npos) << inside.describe();
}

// examples/runner.ts, as a runner would run it: output streamed, denials
// collected from their own channel as they come, the status mapped.
TEST_F(DaemonTest, TheExampleRunnerStreamsOutputDenialsAndTheOutcome) {
    ASSERT_TRUE(exists(RUNNER_JS)) << RUNNER_JS << " was not built: scripts/setup installs the TypeScript compiler";
    start_daemon();
    const std::string job = fmt::format("echo hi; echo oops >&2; ls {}; exit 3", kUserHome);
    Result unconfined = run_unconfined(fmt::format("ls {}", kUserHome));
    ASSERT_EQ(unconfined.status, 0) << unconfined.describe();
    Process p = Process::start({.argv = {"/usr/bin/node", RUNNER_JS, "--workdir", work(), "--", "/bin/sh", "-c", job},
                                .env = {"PATH=/usr/bin:/bin", "CONFINE=" + confine_bin(), "CONFINE_SOCKET=" + socket_},
                                .cwd = work(),
                                .uid = test_user().uid,
                                .gid = test_user().gid,
                                .groups = test_user().groups});
    Result r = p.wait(300);
    EXPECT_EQ(r.status, 1) << r.describe();
    for (const std::string& expected :
         {std::string("out| hi\n"), std::string("err| oops\n"), fmt::format("denied: open_read {} (ls)\n", kUserHome),
          std::string(R"({"outcome":"failed","status":3,"denials":1,"lost":0})")})
        EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.describe();
}

}  // namespace
}  // namespace vmtest
