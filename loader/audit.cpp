#include "loader/audit.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <utility>

#include "bpf/job.h"
#include "loader/wire.h"

namespace confine {
namespace {

const char* op_name(uint16_t op) {
    switch (op) {
#define CONFINE_OP_CASE(name, text) \
    case CONFINE_OP_##name: return text;
        CONFINE_OPS(CONFINE_OP_CASE)
#undef CONFINE_OP_CASE
        default: return "unknown";
    }
}

// Null for CONFINE_REASON_POLICY: the log names only fail-closed reasons.
const char* reason_name(uint8_t reason) {
    switch (reason) {
#define CONFINE_REASON_CASE(name, text) \
    case CONFINE_REASON_##name: return text;
        CONFINE_REASONS(CONFINE_REASON_CASE)
#undef CONFINE_REASON_CASE
        default: return nullptr;
    }
}

int64_t clock_ns(clockid_t c) {
    timespec ts{};
    clock_gettime(c, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string iso_time(int64_t ns) {
    time_t secs = ns / 1000000000;
    tm t{};
    gmtime_r(&secs, &t);
    char buf[32];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &t);
    return fmt::format("{}.{:06d}Z", buf, (ns % 1000000000) / 1000);
}

std::string inet_target(const confine_inet& in) {
    const char* scheme = in.proto == IPPROTO_UDP ? "udp" : in.proto == IPPROTO_SCTP ? "sctp" : "tcp";
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char buf[INET6_ADDRSTRLEN];
    if (memcmp(in.addr, mapped, 12) == 0) {
        inet_ntop(AF_INET, in.addr + 12, buf, sizeof buf);
        return fmt::format("{}://{}:{}", scheme, buf, in.port);
    }
    inet_ntop(AF_INET6, in.addr, buf, sizeof buf);
    return fmt::format("{}://[{}]:{}", scheme, buf, in.port);
}

std::string target(const confine_event& e) {
    switch (e.target_kind) {
        case CONFINE_TARGET_PATH: return std::string(e.target.path, strnlen(e.target.path, sizeof e.target.path));
        case CONFINE_TARGET_INET: return inet_target(e.target.inet);
        case CONFINE_TARGET_UNIX:
            return "unix:" + std::string(e.target.path, strnlen(e.target.path, sizeof e.target.path));
        case CONFINE_TARGET_UNIX_ABSTRACT:
            return "unix-abstract:" + std::string(e.target.path, std::min<size_t>(e.target_len, sizeof e.target.path));
        case CONFINE_TARGET_TASK: return fmt::format("pid:{}", e.target.task.tgid);
        case CONFINE_TARGET_PGRP: return fmt::format("pgrp:{}", e.target.task.tgid);
        case CONFINE_TARGET_KEY: return fmt::format("key:{}", e.target.key.serial);
        default: return "";
    }
}

// What makes two events the same denial: everything but the time and the
// thread, and of the target only what it means (a record's bytes past a
// string's NUL are whatever the ring held there before).
std::string event_key(const confine_event& e) {
    // Each string with its length first: no string can run into the next.
    auto field = [](std::string_view s) { return fmt::format("{}:{}", s.size(), s); };
    auto cstr = [](const char* s, size_t max) { return std::string_view(s, strnlen(s, max)); };
    std::string k = fmt::format("{}/{}/{}/{}/{}/{}/{}/{}{}", e.cgroup_id, e.tgid, e.uid, e.op, e.denied, e.reason,
                                e.target_kind, field(cstr(e.comm, sizeof e.comm)), field(target(e)));
    if (e.target_kind == CONFINE_TARGET_TASK || e.target_kind == CONFINE_TARGET_PGRP)
        k += fmt::format("/{}{}", e.target.task.signal, field(cstr(e.target.task.comm, sizeof e.target.task.comm)));
    if (e.target_kind == CONFINE_TARGET_SOCKET)
        k += fmt::format("/{}/{}/{}", e.target.sock.family, e.target.sock.type, e.target.sock.protocol);
    if (e.target_kind == CONFINE_TARGET_KEY)
        k += field(cstr(e.target.key.description, sizeof e.target.key.description));
    return k;
}

}  // namespace

// The length of the well-formed UTF-8 sequence S starts with (RFC 3629:
// no overlong forms, surrogates or code points past U+10FFFF), 0 if none.
size_t utf8_length(std::string_view s) {
    auto at = [&](size_t i) -> unsigned { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0; };
    const unsigned c = at(0);
    unsigned lo = 0x80, hi = 0xbf;  // the second byte's range
    size_t n;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : lo;
        hi = c == 0xed ? 0x9f : hi;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : lo;
        hi = c == 0xf4 ? 0x8f : hi;
    } else {
        return 0;
    }
    if (at(1) < lo || at(1) > hi) return 0;
    for (size_t j = 2; j < n; j++)
        if ((at(j) & 0xc0) != 0x80) return 0;
    return n;
}

std::string json_quote(std::string_view s) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size(); i++) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\u{:04x}", c);
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            // Pass a well-formed UTF-8 sequence through; escape stray bytes.
            if (size_t n = utf8_length(s.substr(i))) {
                out.append(s.substr(i, n));
                i += n - 1;
            } else {
                out += fmt::format("\\u{:04x}", c);
            }
        }
    }
    return out + "\"";
}

AuditLog::AuditLog(Fd fd, bool client, std::string job_id, bool audit_mode)
    : fd_(std::move(fd)),
      client_(client),
      job_(std::move(job_id)),
      audit_mode_(audit_mode),
      realtime_offset_ns_(clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC)) {}

std::optional<int> inherited_fd(std::string_view path) {
    for (std::string_view dir : {"/dev/fd/", "/proc/self/fd/"}) {
        if (!path.starts_with(dir)) continue;
        int fd = 0;
        auto [end, ec] = std::from_chars(path.data() + dir.size(), path.data() + path.size(), fd);
        if (ec == std::errc() && end == path.data() + path.size() && fd >= 0 && path.size() > dir.size()) return fd;
    }
    return std::nullopt;
}

Result<AuditLog> AuditLog::open(const std::string& path, std::string job_id, bool audit_mode) {
    // An inherited fd is used as it is: a socket can't be opened again.
    std::optional<int> given = path.empty() ? STDERR_FILENO : inherited_fd(path);
    Fd fd(given ? fcntl(*given, F_DUPFD_CLOEXEC, 3)
                : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    if (!fd) return fail(Error::sys("audit: opening " + (path.empty() ? "stderr" : path)));
    return AuditLog(std::move(fd), false, std::move(job_id), audit_mode);
}

std::string AuditLog::format(const confine_event& e) const {
    std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
    std::string line = fmt::format(
        R"({{"time":"{}","job":{},"cgroup_id":{},"pid":{},"tgid":{},"uid":{},"comm":{},"op":"{}","target":{},"verdict":"{}","mode":"{}")",
        iso_time(static_cast<int64_t>(e.ktime_ns) + realtime_offset_ns_), json_quote(job_), e.cgroup_id, e.pid, e.tgid,
        e.uid, json_quote(comm), op_name(e.op), json_quote(target(e)), e.denied ? "deny" : "allow",
        audit_mode_ ? "audit" : "enforce");
    if (const char* r = reason_name(e.reason)) line += fmt::format(R"(,"reason":"{}")", r);
    if (e.target_kind == CONFINE_TARGET_TASK || e.target_kind == CONFINE_TARGET_PGRP) {
        const auto& t = e.target.task;
        if (t.comm[0])
            line += fmt::format(R"(,"target_comm":{})", json_quote({t.comm, strnlen(t.comm, sizeof t.comm)}));
        if (e.op == CONFINE_OP_SIGNAL) line += fmt::format(R"(,"signal":{})", t.signal);
    }
    if (e.target_kind == CONFINE_TARGET_SOCKET) {
        const auto& k = e.target.sock;
        line += fmt::format(R"(,"family":{})", k.family);
        if (k.type) line += fmt::format(R"(,"type":{})", k.type);
        if (k.protocol) line += fmt::format(R"(,"protocol":{})", k.protocol);
    }
    if (e.target_kind == CONFINE_TARGET_KEY) {
        const auto& k = e.target.key;
        line += fmt::format(R"(,"description":{})",
                            json_quote({k.description, strnlen(k.description, sizeof k.description)}));
    }
    return line + "}";
}

void AuditLog::event(const confine_event& e) {
    // The same denial again (the same process, op, target, reason; any
    // thread, any time) is counted, not written: see flush_repeats().
    std::string key = event_key(e);
    if (repeated_ && key == repeated_->key) {
        if (repeated_->count++ == 0) repeated_->since = std::chrono::steady_clock::now();
        repeated_->latest = e;
        return;
    }
    flush_repeats();
    write_line(format(e));
    repeated_ = std::make_unique<Repeated>(Repeated{std::move(key), e, 0, {}});
}

void AuditLog::flush_repeats(std::chrono::milliseconds after) {
    if (!repeated_ || repeated_->count == 0 || std::chrono::steady_clock::now() - repeated_->since < after) return;
    std::string line = format(repeated_->latest);
    line.pop_back();  // the closing brace
    const uint64_t n = std::exchange(repeated_->count, 0);
    write_line(fmt::format(R"({},"repeats":{}}})", line, n), n);
}

void AuditLog::lost(uint64_t cgroup_id, uint64_t count) {
    flush_repeats();  // any record ends a run of repeats
    write_line(fmt::format(R"({{"time":"{}","job":{},"cgroup_id":{},"op":"lost","count":{}}})",
                           iso_time(clock_ns(CLOCK_REALTIME)), json_quote(job_), cgroup_id, count));
}

void AuditLog::inbound(uint64_t cgroup_id, uint64_t count) {
    flush_repeats();
    write_line(fmt::format(
        R"({{"time":"{}","job":{},"cgroup_id":{},"op":"inbound","target":"","count":{},"verdict":"{}","mode":"{}"}})",
        iso_time(clock_ns(CLOCK_REALTIME)), json_quote(job_), cgroup_id, count, audit_mode_ ? "allow" : "deny",
        audit_mode_ ? "audit" : "enforce"));
}

void AuditLog::proxy(uint64_t cgroup_id, std::string_view target, std::string_view reason) {
    flush_repeats();
    write_line(
        fmt::format(R"({{"time":"{}","job":{},"cgroup_id":{},"op":"proxy","target":{}{},"verdict":"{}","mode":"{}"}})",
                    iso_time(clock_ns(CLOCK_REALTIME)), json_quote(job_), cgroup_id, json_quote(target),
                    reason.empty() ? "" : fmt::format(R"(,"reason":{})", json_quote(reason)),
                    audit_mode_ && reason.empty() ? "allow" : "deny", audit_mode_ ? "audit" : "enforce"));
}

void AuditLog::limit(uint64_t cgroup_id, std::string_view target, uint64_t count) {
    flush_repeats();
    // Limits hold in audit mode too (they protect the machine, not files):
    // the verdict is always deny, the mode says how the job ran.
    write_line(fmt::format(
        R"({{"time":"{}","job":{},"cgroup_id":{},"op":"limit","target":{},"count":{},"verdict":"deny","mode":"{}"}})",
        iso_time(clock_ns(CLOCK_REALTIME)), json_quote(job_), cgroup_id, json_quote(target), count,
        audit_mode_ ? "audit" : "enforce"));
}

Result<AuditLog> AuditLog::to_client(int connection, std::string job_id, bool audit_mode) {
    Fd fd(fcntl(connection, F_DUPFD_CLOEXEC, 3));
    if (!fd) return fail(Error::sys("audit: the client's connection"));
    // Room for a burst of a few hundred lines (the ring holds fewer).
    int bytes = 256 << 10;
    setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes);
    return AuditLog(std::move(fd), true, std::move(job_id), audit_mode);
}

void AuditLog::deliver_rest(uint64_t cgroup_id) {
    if (!client_) return;
    client_patient_ = true;
    if (uint64_t n = std::exchange(undelivered_, 0)) lost(cgroup_id, n);
}

void AuditLog::write_line(std::string line, uint64_t events) {
    line += '\n';
    if (client_) {
        // A client that doesn't read must not stall the job's supervision
        // (its deadline, its proxy): what doesn't fit is counted, and
        // reported once the job has ended (deliver_rest).
        if (!wire::send(fd_.get(), wire::Type::Audit, line, {}, client_patient_)) {
            undelivered_ += events;
            client_patient_ = false;  // it had its send timeout once: no more waiting
        }
        return;
    }
    // One write per line: O_APPEND keeps lines whole between writers.
    (void)::write(fd_.get(), line.data(), line.size());
}

Result<JobRing> JobRing::create(AuditLog log) {
    JobRing r;
    r.log_ = std::make_unique<AuditLog>(std::move(log));
    r.map_.reset(bpf_map_create(BPF_MAP_TYPE_RINGBUF, "confine_ring", 0, 0, CONFINE_RING_BYTES, nullptr));
    if (!r.map_) return fail(Error::sys("bpf: creating the job's ring buffer"));
    auto on_event = [](void* ctx, void* data, size_t size) -> int {
        // An event is as long as its target kind needs (bpf/audit.h): the
        // rest of the struct reads as zeros.
        if (size < CONFINE_EVENT_HEADER) return 0;
        confine_event e{};
        memcpy(&e, data, std::min(size, sizeof e));
        static_cast<AuditLog*>(ctx)->event(e);
        return 0;
    };
    r.rb_.reset(ring_buffer__new(r.map_.get(), on_event, r.log_.get(), nullptr));
    if (!r.rb_) return fail(Error::sys("bpf: opening the job's ring buffer"));
    return r;
}

}  // namespace confine
