// Harness of the VM test suite: drives the real `confine` binary through its
// CLI, as root inside a vmtest guest, against a dedicated test user.
//
// Every enforcement test pairs a confined attempt with the same command run
// unconfined as the same user in the same directory (the control), which
// must succeed: the denial is then confine's doing, and the test fails if
// confine enforces nothing.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vmtest {

// The account jobs run as, and the fake credentials in its real home.
inline constexpr const char* kUser = "confinetest";
inline constexpr const char* kUserHome = "/home/confinetest";
inline constexpr const char* kSshKey = "/home/confinetest/.ssh/id_ed25519";
inline constexpr const char* kClaudeCreds = "/home/confinetest/.claude/.credentials.json";
inline constexpr const char* kNotes = "/home/confinetest/notes.txt";
inline constexpr const char* kSshSecret = "SSH-SECRET-d41d8cd98f00b204";
inline constexpr const char* kClaudeSecret = "CLAUDE-SECRET-e9800998ecf8427e";

struct TestUser {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
};
const TestUser& test_user();

// One line of the audit log, and the JSON object it holds (null if it
// holds none).
struct AuditLine {
    std::string raw;
    nlohmann::json json;
    std::optional<std::string> str(std::string_view key) const;  // a string field, unescaped
    std::optional<int64_t> num(std::string_view key) const;      // an integer field
};
std::vector<AuditLine> parse_audit(const std::string& text);

struct Result {
    int status = -1;  // exit status, 128+N after signal N, -1 if it timed out
    std::string out, err;
    std::vector<AuditLine> audit;  // this run's audit log (confined runs only)
    std::string job;               // its --job-id
    std::string audit_job;         // what its records name, if not `job`: u<UID>.<ID> through a daemon
    std::string describe() const;  // everything above, for failure messages
};

// How to call `confine run`.
struct RunSpec {
    std::string policy;             // TOML text; empty: the embedded default
    std::string workdir;            // --workdir; empty: work()
    std::vector<std::string> args;  // more options before "--"
    std::vector<std::string> env;   // more NAME=VALUE for confine's own environment
    std::vector<std::string> argv;  // the command; empty: sh -c <cmd>
    bool as_user = true;            // pass --user confinetest
    int keep_fd = -1;               // an fd >= 3 confine inherits from the test
    int stdin_fd = -1;              // confine's stdin, which the job inherits; -1: /dev/null
    bool own_group = false;         // confine leads a process group, as a shell's job would
    std::string daemon;             // a daemon's socket: confine runs as the test user, its client
};

// What `vmhelper OP...` printed (see tests/vm/helper/main.cpp): each OP's
// result ("ok[ DETAIL]" or "CALL:ERRNO"), by OP and by index, and the pid
// of each helper process that printed (several may print into one output).
struct Ops {
    std::vector<pid_t> pids;
    std::map<std::string, std::string> results;  // by OP; the last one run
    std::vector<std::string> by_index;           // by index; the first run's
    std::string operator[](const std::string& op) const {
        auto it = results.find(op);
        return it == results.end() ? "(not run)" : it->second;
    }
    std::string at(size_t i) const { return i < by_index.size() ? by_index[i] : "(not run)"; }
    size_t failed() const;  // results of the first run that are not "ok..."
};
Ops parse_ops(const std::string& out);

// A policy like the default one (the system readable; {workdir}, {home},
// {tmp} writable; {user_home} denied; PATH, LANG, LC_ALL and TERM kept)
// plus these; `exec` empty: no exec list (exec follows read).
struct PolicySpec {
    std::vector<std::string> read, write, deny_write, deny, exec, protect_git;
    std::vector<std::string> connect, bind, families, domains;
    bool user_namespaces = false;
    std::string mode = "enforce";
    std::vector<std::string> env_keep;           // kept besides the four above
    std::map<std::string, std::string> env_set;  // [env] set
    toml::table limits;                          // [limits], if not empty
};
std::string make_policy(const PolicySpec& spec);

// A child process whose stdout and stderr are collected.
class Process {
public:
    struct Options {
        std::vector<std::string> argv, env;
        std::string cwd = "/";
        std::optional<uid_t> uid;  // drop to this user (with gid and groups below)
        gid_t gid = 0;
        std::vector<gid_t> groups;
        int keep_fd = -1;
        int stdin_fd = -1;       // -1: /dev/null
        bool own_group = false;  // setpgid(0, 0)
    };
    static Process start(const Options& o);
    Process(Process&& o) noexcept;
    Process& operator=(Process&&) = delete;
    ~Process();
    // Waits for the process (not for its orphans); kills it after `timeout_s`.
    Result wait(int timeout_s = 120);
    pid_t pid() const { return pid_; }

private:
    Process() = default;
    pid_t pid_ = -1;
    int pidfd_ = -1, out_ = -1, err_ = -1;
};

class FullDisk;

// One test: a fresh directory tree under /var/tmp/confine-tests/<Suite.Test>:
//   base()            owned by root, 0755
//   work()            the job's --workdir, owned by the test user
//   base()/audit-N.jsonl, policy-N.toml   per confine run, root-only
class VmTest : public ::testing::Test {
protected:
    void SetUp() override;

    const std::string& base() const { return base_; }
    const std::string& work() const { return work_; }
    std::string at(std::string_view rel) const { return base_ + "/" + std::string(rel); }

    // `confine run --user confinetest --workdir W --audit-log A --job-id J
    //  [--policy P] -- sh -c CMD`.
    Result run_confined(const std::string& policy, const std::string& cmd,
                        const std::vector<std::string>& extra_args = {});
    Result run(const RunSpec& spec);
    // The same, started in the background; finish with finish().
    struct Started {
        std::optional<Process> proc;
        std::string job, audit_path, audit_job;
    };
    Started start(const RunSpec& spec);
    Result finish(Started& s, int timeout_s = 120);

    // sh -c CMD as the test user in work(), without confine: the control.
    Result run_unconfined(const std::string& cmd);
    // The same, in the background (stdin: as Process::Options).
    Process start_unconfined(const std::string& cmd, int stdin_fd = -1);
    // sh -c CMD as root in work().
    Result run_root(const std::string& cmd);

    // Files and directories owned by the test user (mode as given).
    void write_file(const std::string& path, const std::string& content, mode_t mode = 0644);
    void make_dir(const std::string& path, mode_t mode = 0755);
    // A job under `--on-audit-error continue` whose log `log` is on `disk`,
    // full: `first` (a command confine denies) while it is full, then, with
    // room again, a denied read of kNotes. Checks that the job ran on and
    // that its log leads with the count of the line it missed, then the
    // read of kNotes. `spec`: how to run it (its argv is this job's).
    struct ContinuedRun {
        Result r;
        std::vector<AuditLine> lines;  // the log's
    };
    void continue_past_full_disk(RunSpec spec, FullDisk& disk, const std::string& log, const std::string& first,
                                 ContinuedRun& out);

    // Copies the helper binary into dir and returns its path.
    std::string install_helper(const std::string& dir);

    std::string job_id(int n) const;

private:
    std::string base_, work_, name_;
    int runs_ = 0;
};

// Checks that r's audit log has exactly one line for (op, target) and that
// it is a well-formed enforce-mode denial by the test user in r's job.
::testing::AssertionResult has_denial(const Result& r, std::string_view op, std::string_view target,
                                      std::string_view comm = {});
#define EXPECT_DENIAL(r, ...) EXPECT_TRUE(::vmtest::has_denial((r), __VA_ARGS__)) << (r).describe()

// r with only the audit lines of process `tgid`.
Result of_process(const Result& r, pid_t tgid);
// r's first audit line with this op and target, or nullptr.
const AuditLine* find_line(const Result& r, std::string_view op, std::string_view target);
// True while `pid` exists and is not a zombie (a dead orphan may wait a
// moment for the guest's init to reap it).
bool alive(pid_t pid);

// Sets a sysctl for the test's duration, if the kernel has it, and puts
// the old value back.
class Sysctl {
public:
    Sysctl(std::string path, const std::string& value);
    ~Sysctl();
    Sysctl(const Sysctl&) = delete;
    Sysctl& operator=(const Sysctl&) = delete;

private:
    std::string path_, old_;
};

// Host names added to the guest's /etc/hosts (its root is a throwaway
// overlay) while it lives, for a suite's servers on loopback addresses.
// error() says why they could not be, "" once they are.
class GuestHosts {
public:
    explicit GuestHosts(const std::string& lines);
    ~GuestHosts();
    GuestHosts(const GuestHosts&) = delete;
    GuestHosts& operator=(const GuestHosts&) = delete;
    const std::string& error() const { return error_; }

private:
    std::string error_, saved_;
    bool written_ = false, mounted_ = false;
};

// systemd-journald, started for a test and stopped after it (the guests
// boot no systemd). error() says why it isn't answering, "" once it is.
class Journald {
public:
    Journald();
    ~Journald();
    Journald(const Journald&) = delete;
    Journald& operator=(const Journald&) = delete;
    const std::string& error() const { return error_; }
    // `journalctl -o json MATCH...`: each entry's fields (binary ones,
    // which journalctl gives as arrays of bytes, as bytes).
    static std::vector<std::map<std::string, std::string>> entries(const std::vector<std::string>& matches);

private:
    std::optional<Process> journald_;
    std::string error_;
};

// A small tmpfs at DIR, full (a file fills it), for a test's duration: the
// audit log's full disk. free() gives the room back.
class FullDisk {
public:
    explicit FullDisk(std::string dir);
    ~FullDisk();
    FullDisk(const FullDisk&) = delete;
    FullDisk& operator=(const FullDisk&) = delete;
    const std::string& error() const { return error_; }
    void free();

private:
    std::string dir_, error_;
};

// Small utilities.
std::string read_file(const std::string& path);
bool exists(const std::string& path);
std::string cgroup2_mount();
// <cgroup2>/confine/<build tag>/<job>, or "" if the job has none (yet, or any more).
std::string job_cgroup(const std::string& job);
std::string confine_bin();
std::string helper_bin();
// Polls `pred` every 20 ms until it holds or `timeout_s` pass.
bool wait_until(const std::function<bool()>& pred, double timeout_s = 30);

}  // namespace vmtest
