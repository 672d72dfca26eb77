// `confine run`: one confined job from start to cleanup.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace confine {

class BpfObjects;

// What `confine daemon` adds for a client's job (loader/daemon.cpp).
struct Served {
    uid_t caller = 0;              // who asked (SO_PEERCRED): its jobs' names are its own
    uid_t uid = 0;                 // the job's user: the caller, or a pool user
    int job_stderr = -1;           // the job's fd 2 (0 and 1 are the worker's); confine's own messages go to 2
    int connection = -1;           // the client: audit lines go there, signals come from it, EOF ends the job
    std::string policy_text;       // the client's policy; empty: the embedded default
    std::vector<std::string> env;  // the client's environment, for [env].keep
    const policy::Policy* ceiling = nullptr;
    const BpfObjects* objs = nullptr;  // loaded once by the daemon
};

// What a run does when its audit log can't be written (a full disk, a
// closed pipe, no journald): stop the job (the default), or let it run on,
// counting the records the log missed.
enum class AuditErrorAction { Kill, Continue };

struct RunOptions {
    std::string policy_file;           // empty: the embedded default
    std::string workdir;               // empty: the current directory
    std::string user;                  // empty: SUDO_UID, else refuse root
    std::optional<policy::Mode> mode;  // overrides the policy's mode
    std::string audit_log;             // empty: stderr; "journal": the systemd journal
    AuditErrorAction on_audit_error = AuditErrorAction::Kill;
    std::string job_id;  // empty: generated
    bool allow_root = false;
    bool print_policy = false;
    bool keep_dirs = false;             // keep the private HOME and TMPDIR
    std::string seed_home;              // copied into the private HOME at start
    std::optional<uint64_t> timeout_s;  // overrides [limits] timeout; 0: none
    std::vector<std::string> command;
    const Served* served = nullptr;  // set by the daemon, never by a flag
};

// Exit codes of confine's own failures, as env(1) and timeout(1) use them.
inline constexpr int kExitFailure = 125, kExitCannotRun = 126, kExitNotFound = 127;
// The job ran past its timeout, as timeout(1) reports it.
inline constexpr int kExitTimeout = 124;

// Runs the job; returns the exit status confine should exit with.
int run(const RunOptions& opts);

}  // namespace confine
