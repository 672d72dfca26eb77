// The daemon's wire protocol (docs/daemon.md): messages on a SOCK_SEQPACKET
// unix socket, each one type byte and a payload, so boundaries need no
// framing of their own and file descriptors ride along with SCM_RIGHTS.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/fd.h"

namespace confine::wire {

// The first line of every request; a daemon refuses any other version.
inline constexpr std::string_view kVersion = "confine/1";
inline constexpr const char* kDefaultSocket = "/run/confine/confine.sock";
// A request's payload is at most this; the socket's send buffer holds it.
inline constexpr size_t kMaxRequest = 128 * 1024;
// At most this many command arguments, environment entries, each.
inline constexpr size_t kMaxItems = 4096;

enum class Type : char {
    Request = 'R',  // client: the job (first message; carries the fds)
    Signal = 'S',   // client: a signal for the job, as a decimal number
    Audit = 'A',    // daemon: one audit log line (with its newline)
    Error = 'E',    // daemon: why the job could not start (for stderr)
    Exit = 'X',     // daemon: the job's exit status, as confine run's; the last message
};

// The fds a request carries, in this order.
enum RequestFd { kStdin, kStdout, kJobStderr, kStderr, kWorkdir, kRequestFds };

// What a client asks for: `confine run`'s options as it was given them.
struct Request {
    std::string policy;       // TOML text; empty: the embedded default
    std::string policy_name;  // the client's file name, for diagnostics
    std::string mode;         // "", "enforce" or "audit"
    std::string job_id;
    std::string timeout;  // as --timeout takes it
    std::string user;     // a pool user; empty: the caller
    std::string seed_home;
    std::string audit_log;       // the client's --audit-log, resolved: checked against the job's writable set;
                                 // "journal": the worker writes to the journal
    std::string on_audit_error;  // "", "kill" or "continue": for the worker's own writes (the journal)
    bool print_policy = false;
    std::vector<std::string> command;
    std::vector<std::string> env;  // the client's environment, NAME=value, for [env].keep
};

// "confine/1\0" then NUL-terminated key and value pairs; `arg` and `env`
// repeat, in order.
std::string encode(const Request& r);
// Never trusts its input: anything malformed is an Error naming what.
Result<Request> decode(std::string_view payload);

struct Message {
    Type type;
    std::string payload;
    std::vector<Fd> fds;
};

// One message; fds are sent with it. A full send buffer blocks (up to
// the socket's SO_SNDTIMEO), or with `wait` false fails at once (EAGAIN).
Result<void> send(int sock, Type type, std::string_view payload, const std::vector<int>& fds = {}, bool wait = true);
// One message, at most kMaxRequest bytes and kRequestFds fds; nullopt at
// end of stream. A longer message or more fds is an error.
Result<std::optional<Message>> receive(int sock);

}  // namespace confine::wire
