// Starting the job: a child born inside its cgroup (clone3 with
// CLONE_INTO_CGROUP), in IPC and mount namespaces of its own (private SysV
// IPC and POSIX message queues; a private devpts on /dev/pts and tmpfs on
// /dev/shm), in a session of its own with a fresh session keyring, as the
// target user, without capabilities, with no_new_privs, a scrubbed
// environment and only fds 0-2.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/fd.h"

namespace confine {

struct LaunchSpec {
    std::vector<std::string> argv;
    std::vector<std::string> env;  // "NAME=value"
    std::string workdir;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    int cgroup_fd = -1;
    gid_t tty_gid = 0;  // group of the job's ptys (0: the opener's)
    // The job's fd 2: not confine's own where that carries the audit log
    // (then fd 1), or a daemon client's.
    int stderr_fd = STDERR_FILENO;
};

struct Child {
    pid_t pid = -1;
    Fd pidfd;
};

// Returns once the command has been exec'd. A command that can't be run is
// an Error whose `err` is the errno of the failed execve.
Result<Child> spawn(const LaunchSpec& spec);

// Waits for the child; returns its status the way a shell reports it:
// the exit code, or 128+N if it died of signal N.
int wait_status(const Child& child);

}  // namespace confine
