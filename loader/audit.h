// The audit log: every denial (or would-be denial in audit mode) as one JSON
// line, read from the job's own BPF ring buffer.
#pragma once

#include <bpf/libbpf.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpf/audit.h"
#include "common/error.h"
#include "common/fd.h"
#include "loader/bpf_objects.h"

namespace confine {

// One audit record: its fields in order, written as a JSON line or as a
// journal entry's CONFINE_* fields.
class Record {
public:
    Record& str(std::string_view key, std::string_view value);
    Record& num(std::string_view key, uint64_t value);
    // The field's value as it was given, if the record has it.
    std::optional<std::string_view> get(std::string_view key) const;
    std::string json() const;
    // The journal entry's KEY=value items: MESSAGE, PRIORITY (by the
    // verdict), SYSLOG_IDENTIFIER, MESSAGE_ID, then CONFINE_<KEY> for each
    // field, values unescaped.
    std::vector<std::string> journal_fields() const;

private:
    struct Field {
        std::string key, value;
        bool quoted;
    };
    std::vector<Field> fields_;
};

// KEY=value items as one datagram of journald's native protocol.
std::string journal_datagram(const std::vector<std::string>& fields);

// The leading fields of a record confine writes itself: time, job,
// cgroup_id, op.
Record record_header(std::string_view job, uint64_t cgroup_id, std::string_view op);
// A `lost` record: COUNT records of the job that the log does not have.
Record lost_record(std::string_view job, uint64_t cgroup_id, uint64_t count, std::string_view reason = "");

// The journal entries' MESSAGE_ID (docs/contract.md), for journalctl
// MESSAGE_ID=... and catalogs.
inline constexpr std::string_view kJournalMessageId = "6c0f9e3a52d74b0e8a41c7d2f35e9b18";
// --audit-log's value that sends the records to the systemd journal.
inline constexpr std::string_view kJournal = "journal";
// How many records a job may send the journal: a burst, then so many a
// second. journald drops, silently, what a unit sends past its own limit
// (by default 10,000 in 30 s for all of a unit's jobs together); what a
// job sends past this budget is counted in `lost` records instead.
inline constexpr double kJournalBurst = 1000, kJournalPerSecond = 100;

class AuditLog {
public:
    // `path` empty: standard error; /dev/fd/N: that fd, as inherited (a
    // pipe or socket of the runner's); "journal": the systemd journal. A
    // file is opened for appending.
    static Result<AuditLog> open(const std::string& path, std::string job_id, bool audit_mode);
    // Lines go to a daemon client, one wire::Type::Audit message each,
    // never waiting while the job runs: what the client has no room for is
    // counted, and deliver_rest() reports it.
    static Result<AuditLog> to_client(int connection, std::string job_id, bool audit_mode);
    // The job's cgroup id, for the records confine writes itself (events
    // carry their own): set once the cgroup exists, before the job runs.
    void set_cgroup_id(uint64_t id) { cgroup_id_ = id; }
    uint64_t cgroup_id() const { return cgroup_id_; }
    // Once the job has ended: the lines from here on wait for the client
    // (up to its connection's send timeout), led by a `lost` record of
    // those it had no room for.
    void deliver_rest();

    void event(const confine_event& e);
    // Writes the count of the latest event's repeats, if there are some
    // and the first came at least `after` ago: one line for a run of the
    // same denial, then one a second at most while it goes on.
    void flush_repeats(std::chrono::milliseconds after = std::chrono::milliseconds(0));
    void lost(uint64_t count);
    // Packets from off the machine the job's sockets never got (one record,
    // at the job's end; a flood must not become a flood of lines).
    void inbound(uint64_t count);
    // A request to the job's proxy for TARGET ("name:port") that its
    // [network] domains don't allow: refused, or in audit mode passed. With
    // a reason and no target, the proxy itself failed.
    void proxy(std::string_view target, std::string_view reason = "");
    // A [limits] limit the job hit: TARGET is memory, pids, cpu or timeout,
    // COUNT how often (see docs/contract.md). Written at the job's end.
    void limit(std::string_view target, uint64_t count);

    // The JSON line for an event, without the newline (exposed for tests).
    std::string format(const confine_event& e) const { return record(e).json(); }

    // Why a record could not be written (a full disk, a closed pipe, no
    // journald), if one couldn't; the records lost so since.
    const std::optional<std::string>& failure() const { return failure_; }
    uint64_t unwritten() const { return unwritten_; }
    // Records counted, not sent, past the journal's budget (all told).
    uint64_t over_budget() const { return over_budget_total_; }
    // At the job's end: the last count of what went past the journal's
    // budget, sent whatever the budget.
    void close();
    // Where the records go, for messages.
    const std::string& destination() const { return destination_; }

private:
    enum class Sink { Fd, Socket, Client, Journal };
    // How long a line waits for a reader that takes none.
    static constexpr std::chrono::milliseconds kStall{10000};
    AuditLog(Sink sink, Fd fd, std::string destination, std::string job_id, bool audit_mode);
    Record record(const confine_event& e) const;
    // The fields every record confine writes itself starts with.
    Record header(std::string_view op) const { return record_header(job_, cgroup_id_, op); }
    // Writes the `lost` record that COUNT (if any) stands for, with REASON,
    // and zeroes COUNT once it is written.
    void write_lost(uint64_t& count, std::string_view reason);
    // EVENTS: how many the record stands for (a repeats line: its count),
    // what a client that had no room for it, or a log that failed, lost.
    void write(const Record& r, uint64_t events = 1);
    bool write_out(const Record& r);
    bool take_journal_token();
    // The last event written, and its repeats since.
    struct Repeated {
        confine_event event;  // with the time and thread of the last repeat
        uint64_t count;
        std::chrono::steady_clock::time_point since;  // of the first repeat
    };
    std::unique_ptr<Repeated> repeated_;
    Sink sink_;
    Fd fd_;
    std::string destination_;
    bool client_patient_ = false;
    uint64_t undelivered_ = 0;
    std::optional<std::string> failure_;
    uint64_t unwritten_ = 0, cgroup_id_ = 0;
    bool stalled_ = false, partial_ = false;  // the reader let kStall pass; a line was cut short
    // The journal's budget (kJournalBurst), and what went past it.
    double tokens_ = kJournalBurst;
    std::chrono::steady_clock::time_point tokens_at_ = std::chrono::steady_clock::now();
    uint64_t over_budget_ = 0, over_budget_total_ = 0;
    std::string job_;
    bool audit_mode_ = false;
    int64_t realtime_offset_ns_ = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC at open
};

// A slot of this build's pool of ring buffers (bpf/common.bpf.h, `rings`),
// held by an flock on <pins>/ring_slots/<N>, which the kernel drops when confine
// exits, however it exits.
class RingSlot {
public:
    static Result<RingSlot> claim(const BpfObjects& objs);
    RingSlot(RingSlot&&) = default;
    ~RingSlot();  // slots past the warm pool give their ring back

    uint32_t index() const { return index_; }

private:
    RingSlot(Fd lock, int rings, uint32_t index) : lock_(std::move(lock)), rings_(rings), index_(index) {}
    Fd lock_;
    int rings_;
    uint32_t index_;
};

// The job's ring buffer, in its slot of the pool, consumed into the job's
// AuditLog, which it owns. libbpf keeps a pointer to the log, so the log
// lives on the heap, where moving the JobRing leaves it, and outlives the
// ring buffer (members end in reverse order; the slot last).
class JobRing {
public:
    static Result<JobRing> create(AuditLog log, const BpfObjects& objs);

    AuditLog& log() { return *log_; }
    uint32_t slot() const { return slot_->index(); }
    int poll_fd() const { return ring_buffer__epoll_fd(rb_.get()); }
    void drain() {
        ring_buffer__consume(rb_.get());
        log_->flush_repeats(std::chrono::seconds(1));
    }

private:
    JobRing() : rb_(nullptr, ring_buffer__free) {}
    std::optional<RingSlot> slot_;
    std::unique_ptr<AuditLog> log_;
    Fd map_;
    std::unique_ptr<ring_buffer, decltype(&ring_buffer__free)> rb_;
};

// N for "/dev/fd/N" or "/proc/self/fd/N": an audit log given as an fd.
std::optional<int> inherited_fd(std::string_view path);

// Quotes a string as JSON; bytes that are not valid UTF-8 become \u00XX.
std::string json_quote(std::string_view s);
// What a job chose (a target, a name) as a terminal shows it: control
// characters, C1 controls and bidirectional overrides escaped as \xNN, so
// no line can be erased, reordered or forged.
std::string for_terminal(std::string_view s);

}  // namespace confine
