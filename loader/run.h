// `confine run`: one confined job from start to cleanup.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace confine {

struct RunOptions {
    std::string policy_file;           // empty: the embedded default
    std::string workdir;               // empty: the current directory
    std::string user;                  // empty: SUDO_UID, else refuse root
    std::optional<policy::Mode> mode;  // overrides the policy's mode
    std::string audit_log;             // empty: stderr
    std::string job_id;                // empty: generated
    bool allow_root = false;
    bool print_policy = false;
    bool keep_dirs = false;             // keep the private HOME and TMPDIR
    std::string seed_home;              // copied into the private HOME at start
    std::optional<uint64_t> timeout_s;  // overrides [limits] timeout; 0: none
    std::vector<std::string> command;
};

// Exit codes of confine's own failures, as env(1) and timeout(1) use them.
inline constexpr int kExitFailure = 125, kExitCannotRun = 126, kExitNotFound = 127;
// The job ran past its timeout, as timeout(1) reports it.
inline constexpr int kExitTimeout = 124;

// Runs the job; returns the exit status confine should exit with.
int run(const RunOptions& opts);

}  // namespace confine
