#include "loader/audit.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <endian.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

// A path the kernel side walked, which fills it from its end: a walk that
// gave up (too long, too deep) holds the end it reached, which "..." in
// front marks as such (".../" for a file whose own name is longer than
// NAME_MAX, where it stopped at once).
std::string walked_path(const confine_event& e) {
    std::string path(e.target.path, strnlen(e.target.path, sizeof e.target.path));
    if (e.reason == CONFINE_REASON_PATH_TOO_LONG || e.reason == CONFINE_REASON_PATH_TOO_DEEP) return "..." + path;
    return path;
}

std::string target(const confine_event& e) {
    switch (e.target_kind) {
        case CONFINE_TARGET_PATH: return walked_path(e);
        case CONFINE_TARGET_INET: return inet_target(e.target.inet);
        case CONFINE_TARGET_UNIX: return "unix:" + walked_path(e);
        case CONFINE_TARGET_UNIX_ABSTRACT:
            return "unix-abstract:" + std::string(e.target.path, std::min<size_t>(e.target_len, sizeof e.target.path));
        case CONFINE_TARGET_TASK: return fmt::format("pid:{}", e.target.task.tgid);
        case CONFINE_TARGET_PGRP: return fmt::format("pgrp:{}", e.target.task.tgid);
        case CONFINE_TARGET_KEY: return fmt::format("key:{}", e.target.key.serial);
        default: return "";
    }
}

// Whether two events are the same denial: everything but the time and
// the thread, and of the target only what it means (a record's bytes past
// a string's NUL are whatever the ring held there before). Compared field
// by field: a flood calls this for each of its events.
bool same_denial(const confine_event& a, const confine_event& b) {
    auto same_str = [](const char* x, const char* y, size_t max) { return strncmp(x, y, max) == 0; };
    if (a.cgroup_id != b.cgroup_id || a.tgid != b.tgid || a.uid != b.uid || a.op != b.op || a.denied != b.denied ||
        a.reason != b.reason || a.target_kind != b.target_kind || !same_str(a.comm, b.comm, sizeof a.comm))
        return false;
    const auto &x = a.target, &y = b.target;
    switch (a.target_kind) {
        case CONFINE_TARGET_PATH:
        case CONFINE_TARGET_UNIX: return same_str(x.path, y.path, sizeof x.path);
        case CONFINE_TARGET_UNIX_ABSTRACT:
            return a.target_len == b.target_len &&
                   memcmp(x.path, y.path, std::min<size_t>(a.target_len, sizeof x.path)) == 0;
        case CONFINE_TARGET_INET:
            return memcmp(x.inet.addr, y.inet.addr, sizeof x.inet.addr) == 0 && x.inet.port == y.inet.port &&
                   x.inet.proto == y.inet.proto;
        case CONFINE_TARGET_TASK:
        case CONFINE_TARGET_PGRP:
            return x.task.tgid == y.task.tgid && x.task.signal == y.task.signal &&
                   same_str(x.task.comm, y.task.comm, sizeof x.task.comm);
        case CONFINE_TARGET_SOCKET:
            return x.sock.family == y.sock.family && x.sock.type == y.sock.type && x.sock.protocol == y.sock.protocol;
        case CONFINE_TARGET_KEY:
            return x.key.serial == y.key.serial &&
                   same_str(x.key.description, y.key.description, sizeof x.key.description);
        default: return true;
    }
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

// What a job chose (a target, a name) as a terminal shows it: control
// characters, C1 controls and bidirectional overrides escaped, so no line
// of the summary can be erased, reordered or forged.
std::string for_terminal(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        auto c = static_cast<unsigned char>(s[i]);
        auto next = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
        const bool c1 = c == 0xc2 && next(1) >= 0x80 && next(1) <= 0x9f;
        const bool bidi = c == 0xe2 && ((next(1) == 0x80 && next(2) >= 0xaa && next(2) <= 0xae) ||
                                        (next(1) == 0x81 && next(2) >= 0xa6 && next(2) <= 0xa9));
        if (c < 0x20 || c == 0x7f || c1 || bidi) {
            for (size_t k = 0; k < (bidi ? 3u : c1 ? 2u : 1u); k++) out += fmt::format("\\x{:02x}", next(k));
            i += bidi ? 2 : c1 ? 1 : 0;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
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

Record& Record::str(std::string_view key, std::string_view value) {
    fields_.push_back({std::string(key), std::string(value), true});
    return *this;
}

Record& Record::num(std::string_view key, uint64_t value) {
    fields_.push_back({std::string(key), std::to_string(value), false});
    return *this;
}

std::optional<std::string_view> Record::get(std::string_view key) const {
    for (const Field& f : fields_)
        if (f.key == key) return f.value;
    return std::nullopt;
}

std::string Record::json() const {
    std::string out = "{";
    for (const Field& f : fields_) {
        if (out.size() > 1) out += ',';
        out += json_quote(f.key) + ':' + (f.quoted ? json_quote(f.value) : f.value);
    }
    return out + "}";
}

std::vector<std::string> Record::journal_fields() const {
    auto field = [&](std::string_view key) { return get(key).value_or(""); };
    const std::string_view op = field("op"), verdict = field("verdict");
    // MESSAGE is read as text: what the job named is quoted, escaped as a
    // terminal would need it, and cut short of journald's 4 KiB display
    // limit (CONFINE_TARGET has it whole).
    auto text = [](std::string_view s) {
        constexpr size_t kMax = 1024;
        return for_terminal(json_quote(s.substr(0, kMax))) + (s.size() > kMax ? "..." : "");
    };
    std::string msg;
    if (op == "lost") {
        msg = fmt::format("lost {} audit events", field("count"));
    } else {
        msg = fmt::format("{} {} {}", verdict == "deny" ? "denied" : "would deny (audit mode)", op,
                          text(field("target")));
        if (get("comm")) msg += fmt::format(" by {} (pid {})", text(field("comm")), field("pid"));
        if (get("count")) msg += fmt::format(", {} times", field("count"));
        if (get("repeats")) msg += fmt::format(", {} times more", field("repeats"));
    }
    if (get("reason")) msg += fmt::format(" ({})", text(field("reason")));
    msg += fmt::format(" [job {}]", text(field("job")));
    // A lost event is a hole in the record: an error; a denial a warning;
    // what audit mode let through a notice.
    const char* priority = op == "lost" ? "3" : verdict == "deny" ? "4" : "5";
    std::vector<std::string> out = {"MESSAGE=confine: " + msg, std::string("PRIORITY=") + priority,
                                    "SYSLOG_IDENTIFIER=confine", fmt::format("MESSAGE_ID={}", kJournalMessageId)};
    for (const Field& f : fields_) {
        std::string name = "CONFINE_";
        for (char c : f.key) name += static_cast<char>(toupper(static_cast<unsigned char>(c)));
        out.push_back(name + "=" + f.value);
    }
    return out;
}

AuditLog::AuditLog(Sink sink, Fd fd, std::string destination, std::string job_id, bool audit_mode)
    : sink_(sink),
      fd_(std::move(fd)),
      destination_(std::move(destination)),
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

// journald's native protocol (systemd's "Native Journal Protocol"): one
// datagram an entry, a field a line, NAME=value; a value holding a newline
// (a path may) goes as NAME, a newline, its length as 64-bit little endian,
// the value and a newline. An entry is at most a few KiB (a path is cut at
// PATH_MAX), far below a datagram's limit, so no memfd is needed.
std::string journal_datagram(const std::vector<std::string>& fields) {
    std::string out;
    for (const std::string& f : fields) {
        const size_t eq = f.find('=');
        if (f.find('\n', eq) == std::string::npos) {
            out += f;
        } else {
            const uint64_t size = htole64(f.size() - eq - 1);
            out.append(f, 0, eq).append("\n").append(reinterpret_cast<const char*>(&size), sizeof size);
            out.append(f, eq + 1);
        }
        out += '\n';
    }
    return out;
}

// Each entry is sent to the address, so a journald restarted while the job
// runs gets the next one; the socket is connected too, so that poll() waits
// for room in journald's queue.
const sockaddr_un kJournalSocket = {AF_UNIX, "/run/systemd/journal/socket"};

Result<AuditLog> AuditLog::open(const std::string& path, std::string job_id, bool audit_mode) {
    if (path == kJournal) {
        // Refused up front rather than lost later: journald must be there.
        Fd sock(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (!sock ||
            connect(sock.get(), reinterpret_cast<const sockaddr*>(&kJournalSocket), sizeof kJournalSocket) != 0)
            return fail(Error::sys(fmt::format("audit: --audit-log journal: journald does not answer at {}",
                                               kJournalSocket.sun_path))
                            .hint("Start systemd-journald, or pass --audit-log FILE"));
        return AuditLog(Sink::Journal, std::move(sock), "the journal", std::move(job_id), audit_mode);
    }
    std::optional<int> given = path.empty() ? STDERR_FILENO : inherited_fd(path);
    Fd fd(given ? fcntl(*given, F_DUPFD_CLOEXEC, 3)
                : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    const std::string name = path.empty() ? "stderr" : path;
    if (!fd) return fail(Error::sys("audit: opening " + name));
    // A reader that stops reading (a pipe, a FIFO, a terminal held with ^S)
    // must not stall supervision: writes never block, and a line waits for
    // room at most kStall. A pipe or terminal given as an fd is opened again
    // for a description of confine's own, whose flags are not the runner's;
    // a socket can't be, and is sent to with MSG_DONTWAIT instead.
    struct stat st {};
    fstat(fd.get(), &st);
    const bool socket = S_ISSOCK(st.st_mode);
    if (given && !socket && !S_ISREG(st.st_mode)) {
        // O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of waiting.
        Fd own(::open(fmt::format("/proc/self/fd/{}", *given).c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
        if (own) fd = std::move(own);
    }
    if (!socket && (!given || !S_ISREG(st.st_mode))) fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    return AuditLog(socket ? Sink::Socket : Sink::Fd, std::move(fd), name, std::move(job_id), audit_mode);
}

Record record_header(std::string_view job, uint64_t cgroup_id, std::string_view op) {
    Record r;
    r.str("time", iso_time(clock_ns(CLOCK_REALTIME))).str("job", job).num("cgroup_id", cgroup_id).str("op", op);
    return r;
}

Record AuditLog::record(const confine_event& e) const {
    Record r;
    r.str("time", iso_time(static_cast<int64_t>(e.ktime_ns) + realtime_offset_ns_))
        .str("job", job_)
        .num("cgroup_id", e.cgroup_id)
        .num("pid", e.pid)
        .num("tgid", e.tgid)
        .num("uid", e.uid)
        .str("comm", {e.comm, strnlen(e.comm, sizeof e.comm)})
        .str("op", op_name(e.op))
        .str("target", target(e))
        .str("verdict", e.denied ? "deny" : "allow")
        .str("mode", audit_mode_ ? "audit" : "enforce");
    if (const char* reason = reason_name(e.reason)) r.str("reason", reason);
    if (e.target_kind == CONFINE_TARGET_TASK || e.target_kind == CONFINE_TARGET_PGRP) {
        const auto& t = e.target.task;
        if (t.comm[0]) r.str("target_comm", {t.comm, strnlen(t.comm, sizeof t.comm)});
        if (e.op == CONFINE_OP_SIGNAL) r.num("signal", t.signal);
    }
    if (e.target_kind == CONFINE_TARGET_SOCKET) {
        const auto& k = e.target.sock;
        r.num("family", k.family);
        if (k.type) r.num("type", k.type);
        if (k.protocol) r.num("protocol", k.protocol);
    }
    if (e.target_kind == CONFINE_TARGET_KEY)
        r.str("description",
              {e.target.key.description, strnlen(e.target.key.description, sizeof e.target.key.description)});
    return r;
}

void AuditLog::event(const confine_event& e) {
    // The same denial again (the same process, op, target, reason; any
    // thread, any time) is counted, not written: see flush_repeats().
    if (repeated_ && same_denial(e, repeated_->event)) {
        if (repeated_->count++ == 0) repeated_->since = std::chrono::steady_clock::now();
        repeated_->event.ktime_ns = e.ktime_ns;
        repeated_->event.pid = e.pid;
        return;
    }
    flush_repeats();
    write(record(e));
    repeated_ = std::make_unique<Repeated>(Repeated{e, 0, {}});
}

void AuditLog::flush_repeats(std::chrono::milliseconds after) {
    if (!repeated_ || repeated_->count == 0 || std::chrono::steady_clock::now() - repeated_->since < after) return;
    const uint64_t n = std::exchange(repeated_->count, 0);
    write(record(repeated_->event).num("repeats", n), n);
}

Record lost_record(std::string_view job, uint64_t cgroup_id, uint64_t count, std::string_view reason) {
    Record r = record_header(job, cgroup_id, "lost");
    r.num("count", count);
    if (!reason.empty()) r.str("reason", reason);
    return r;
}

void AuditLog::lost(uint64_t count) {
    flush_repeats();  // any record ends a run of repeats
    // It stands for COUNT records: if it can't be written, so many more
    // are missing.
    write(lost_record(job_, cgroup_id_, count), count);
}

void AuditLog::inbound(uint64_t count) {
    flush_repeats();
    write(header("inbound")
              .str("target", "")
              .num("count", count)
              .str("verdict", audit_mode_ ? "allow" : "deny")
              .str("mode", audit_mode_ ? "audit" : "enforce"));
}

void AuditLog::proxy(std::string_view target, std::string_view reason) {
    flush_repeats();
    Record r = header("proxy").str("target", target);
    if (!reason.empty()) r.str("reason", reason);
    write(r.str("verdict", audit_mode_ && reason.empty() ? "allow" : "deny")
              .str("mode", audit_mode_ ? "audit" : "enforce"));
}

void AuditLog::limit(std::string_view target, uint64_t count) {
    flush_repeats();
    // Limits hold in audit mode too (they protect the machine, not files):
    // the verdict is always deny, the mode says how the job ran.
    write(header("limit")
              .str("target", target)
              .num("count", count)
              .str("verdict", "deny")
              .str("mode", audit_mode_ ? "audit" : "enforce"));
}

Result<AuditLog> AuditLog::to_client(int connection, std::string job_id, bool audit_mode) {
    Fd fd(fcntl(connection, F_DUPFD_CLOEXEC, 3));
    if (!fd) return fail(Error::sys("audit: the client's connection"));
    // Room for a burst of a few hundred lines (the ring holds fewer).
    int bytes = 256 << 10;
    setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes);
    return AuditLog(Sink::Client, std::move(fd), "the client", std::move(job_id), audit_mode);
}

void AuditLog::deliver_rest() {
    if (sink_ != Sink::Client) return;
    client_patient_ = true;
    if (uint64_t n = std::exchange(undelivered_, 0)) lost(n);
}

void AuditLog::write(const Record& r, uint64_t events) {
    if (sink_ == Sink::Client) {
        // A client that doesn't read must not stall the job's supervision
        // (its deadline, its proxy): what doesn't fit is counted, and
        // reported once the job has ended (deliver_rest).
        if (!wire::send(fd_.get(), wire::Type::Audit, r.json() + "\n", {}, client_patient_)) {
            undelivered_ += events;
            client_patient_ = false;  // it had its send timeout once: no more waiting
        }
        return;
    }
    if (sink_ == Sink::Journal && !take_journal_token()) {
        over_budget_ += events;
        over_budget_total_ += events;
        return;
    }
    write_lost(over_budget_, "journal_rate_limit");
    // After a failure, the first record the log takes again says how many
    // it missed (--on-audit-error continue; under kill the job is gone).
    write_lost(unwritten_, "log_write_failed");
    if (unwritten_ || !write_out(r)) unwritten_ += events;
}

void AuditLog::write_lost(uint64_t& count, std::string_view reason) {
    if (count && write_out(lost_record(job_, cgroup_id_, count, reason))) count = 0;
}

void AuditLog::close() {
    // The last count of what went over the journal's budget, budget or not.
    write_lost(over_budget_, "journal_rate_limit");
}

bool AuditLog::take_journal_token() {
    const auto now = std::chrono::steady_clock::now();
    const std::chrono::duration<double> since = now - tokens_at_;
    tokens_ = std::min(kJournalBurst, tokens_ + since.count() * kJournalPerSecond);
    tokens_at_ = now;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
}

bool AuditLog::write_out(const Record& r) {
    auto failed = [&](std::string why) {
        if (!failure_) failure_ = std::move(why);
        return false;
    };
    // One write per line, so O_APPEND keeps lines whole between writers. A
    // line cut short by a failure is ended before the next one. The journal
    // takes an entry as one datagram, whole or not at all.
    std::string line =
        sink_ == Sink::Journal ? journal_datagram(r.journal_fields()) : (partial_ ? "\n" : "") + r.json() + "\n";
    std::string_view rest = line;
    while (!rest.empty()) {
        const bool journal = sink_ == Sink::Journal;
        ssize_t n = sink_ == Sink::Fd ? ::write(fd_.get(), rest.data(), rest.size())
                                      : sendto(fd_.get(), rest.data(), rest.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                                               journal ? reinterpret_cast<const sockaddr*>(&kJournalSocket) : nullptr,
                                               journal ? sizeof kJournalSocket : 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            // Room, a while; once a reader has let kStall pass, no more
            // waiting until it takes a line again.
            pollfd p{fd_.get(), POLLOUT, 0};
            if (!stalled_ && poll(&p, 1, static_cast<int>(kStall.count())) > 0) continue;
            stalled_ = true;
            partial_ = rest.size() < line.size();
            return failed(fmt::format("the reader took no line for {} s", kStall.count() / 1000));
        }
        if (n <= 0) {
            partial_ = rest.size() < line.size();
            return failed(n < 0 ? strerror(errno) : "nothing written");
        }
        rest.remove_prefix(static_cast<size_t>(n));
    }
    stalled_ = partial_ = false;
    return true;
}

// Slots below this keep their rings when their jobs end, for the next ones;
// a burst of more jobs at once gives the rest back as they end.
constexpr uint32_t kWarmRings = 64;

Result<RingSlot> RingSlot::claim(const BpfObjects& objs) {
    const std::string dir = objs.pin_dir() + "/ring_slots";  // "rings" is the map
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fail(Error::sys("bpf: mkdir " + dir));
    // The lowest free slot, so the warm ones are used first.
    for (uint32_t n = 0; n < CONFINE_MAX_JOBS; n++) {
        const std::string path = fmt::format("{}/{}", dir, n);
        Fd lock(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!lock && errno == ENOENT && (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST))
            lock.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!lock) return fail(Error::sys("bpf: opening " + path));
        if (flock(lock.get(), LOCK_EX | LOCK_NB) == 0) return RingSlot(std::move(lock), objs.map_fd(Map::Rings), n);
        if (errno != EWOULDBLOCK) return fail(Error::sys("bpf: locking " + path));
    }
    return fail(Error::msg(fmt::format("bpf: all {} ring buffers of the pool are in use", CONFINE_MAX_JOBS))
                    .hint("Wait for a job to end"));
}

RingSlot::~RingSlot() {
    // Still holding the lock: no one else has the slot yet.
    if (lock_ && index_ >= kWarmRings) bpf_map_delete_elem(rings_, &index_);
}

Result<JobRing> JobRing::create(AuditLog log, const BpfObjects& objs) {
    JobRing r;
    auto slot = RingSlot::claim(objs);
    if (!slot) return fail(slot.error());
    r.slot_.emplace(std::move(*slot));
    r.log_ = std::make_unique<AuditLog>(std::move(log));
    const int rings = objs.map_fd(Map::Rings);
    const uint32_t index = r.slot_->index();
    uint32_t id = 0;
    if (bpf_map_lookup_elem(rings, &index, &id) == 0) {
        r.map_.reset(bpf_map_get_fd_by_id(id));
        if (!r.map_) return fail(Error::sys(fmt::format("bpf: opening ring buffer {} of the pool", index)));
    } else {
        r.map_.reset(bpf_map_create(BPF_MAP_TYPE_RINGBUF, "confine_ring", 0, 0, CONFINE_RING_BYTES, nullptr));
        if (!r.map_) return fail(Error::sys("bpf: creating the job's ring buffer"));
        const uint32_t fd = static_cast<uint32_t>(r.map_.get());
        if (bpf_map_update_elem(rings, &index, &fd, BPF_ANY) != 0)
            return fail(Error::sys(fmt::format("bpf: adding ring buffer {} to the pool", index)));
    }
    auto on_event = [](void* ctx, void* data, size_t size) -> int {
        // An event is as long as its target kind needs (bpf/audit.h): the
        // rest of the struct reads as zeros.
        if (size < CONFINE_EVENT_HEADER) return 0;
        confine_event e;
        const size_t n = std::min(size, sizeof e);
        memcpy(&e, data, n);
        memset(reinterpret_cast<char*>(&e) + n, 0, sizeof e - n);
        // The ring was another job's before: what that job's programs wrote
        // after its confine last drained (a confine killed, its job not yet
        // collected) is not this job's.
        auto* log = static_cast<AuditLog*>(ctx);
        if (e.cgroup_id == log->cgroup_id()) log->event(e);
        return 0;
    };
    r.rb_.reset(ring_buffer__new(r.map_.get(), on_event, r.log_.get(), nullptr));
    if (!r.rb_) return fail(Error::sys("bpf: opening the job's ring buffer"));
    // What the slot's last holder left, for the job's records to have the
    // whole ring: none is this job's, whose cgroup doesn't exist yet.
    ring_buffer__consume(r.rb_.get());
    return r;
}

}  // namespace confine
