// `confine audit`: what a security team reads first in one or more audit
// logs: denials per job, per op and per target, when, and what was lost.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>

namespace confine {

struct AuditSummary {
    struct Count {
        uint64_t denials = 0;     // denials, or would-be denials in audit mode (verdict allow)
        std::string first, last;  // ISO times
    };
    struct Job : Count {
        uint64_t lost = 0;  // events the job's ring had no room for
        std::string mode;
    };
    std::map<std::string, Job> jobs;
    std::map<std::string, Count> ops;
    std::map<std::pair<std::string, std::string>, Count> targets;  // (target, op)
    uint64_t denials = 0, lost = 0;
    uint64_t unreadable = 0;  // lines that are not an audit record
    std::string first, last;

    // Adds one log's lines. A record's "repeats" counts as that many more.
    void add(std::istream& in);
    // For a terminal: a header line, then jobs, ops and the top targets.
    std::string text(size_t top_targets = 20) const;
    // The same, whole, as one JSON object.
    std::string json() const;
};

}  // namespace confine
