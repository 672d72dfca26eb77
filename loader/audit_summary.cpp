#include "loader/audit_summary.h"

#include "loader/audit.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

namespace confine {
namespace {

void seen(AuditSummary::Count& c, uint64_t n, const std::string& time) {
    c.denials += n;
    // ISO 8601 in UTC with a fixed width: text order is time order.
    if (c.first.empty() || time < c.first) c.first = time;
    if (time > c.last) c.last = time;
}

std::string str(const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

uint64_t num(const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

// "1,234,567": counts are read at a glance.
std::string grouped(uint64_t n) {
    const std::string digits = std::to_string(n);
    std::string out;
    for (size_t i = 0; i < digits.size(); i++) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

}  // namespace

void AuditSummary::add(std::istream& in) {
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        nlohmann::json o = nlohmann::json::parse(line, nullptr, false);
        if (o.is_discarded() || !o.is_object() || !o.contains("op") || !o.contains("job")) {
            unreadable++;
            continue;
        }
        const std::string job = str(o, "job"), op = str(o, "op"), time = str(o, "time");
        Job& j = jobs[job];
        if (op == "lost") {
            uint64_t n = num(o, "count");
            j.lost += n;
            lost += n;
            continue;
        }
        if (!o.contains("verdict")) continue;  // not a decision
        // inbound and limit records count what they stood for.
        // inbound and limit records count what they stood for; a line with
        // "repeats":N stands for N more of the line before it.
        uint64_t n = op == "inbound" || op == "limit" ? std::max<uint64_t>(num(o, "count"), 1) : 1;
        if (o.contains("repeats")) n = num(o, "repeats");
        if (j.mode.empty()) j.mode = str(o, "mode");
        seen(j, n, time);
        seen(ops[op], n, time);
        seen(targets[{str(o, "target"), op}], n, time);
        denials += n;
        if (first.empty() || time < first) first = time;
        if (time > last) last = time;
    }
}

std::string AuditSummary::text(size_t top_targets) const {
    std::string out = fmt::format("{} denials in {} job{}", grouped(denials), jobs.size(), jobs.size() == 1 ? "" : "s");
    if (!first.empty()) out += fmt::format(", {} to {}", for_terminal(first), for_terminal(last));
    out += lost ? fmt::format("; {} events lost (the ring was full: more happened than is listed)\n", grouped(lost))
                : "; none lost\n";
    if (unreadable)
        out += fmt::format("{} {} not an audit record\n", grouped(unreadable),
                           unreadable == 1 ? "line was" : "lines were");

    out += fmt::format("\n{:<32} {:>8} {:>10} {:>8}  {:<28} {}\n", "job", "mode", "denials", "lost", "first", "last");
    for (const auto& [name, j] : jobs)
        out += fmt::format("{:<32} {:>8} {:>10} {:>8}  {:<28} {}\n", for_terminal(name), for_terminal(j.mode),
                           grouped(j.denials), grouped(j.lost), for_terminal(j.first), for_terminal(j.last));

    std::vector<std::pair<std::string, Count>> by_op(ops.begin(), ops.end());
    std::stable_sort(by_op.begin(), by_op.end(),
                     [](const auto& a, const auto& b) { return a.second.denials > b.second.denials; });
    out += fmt::format("\n{:<20} {:>10}\n", "op", "denials");
    for (const auto& [op, c] : by_op) out += fmt::format("{:<20} {:>10}\n", for_terminal(op), grouped(c.denials));

    std::vector<std::pair<std::pair<std::string, std::string>, Count>> by_target(targets.begin(), targets.end());
    std::stable_sort(by_target.begin(), by_target.end(),
                     [](const auto& a, const auto& b) { return a.second.denials > b.second.denials; });
    out += fmt::format("\n{:>10}  {:<14} {}\n", "denials", "op", "target");
    for (size_t i = 0; i < by_target.size() && i < top_targets; i++)
        out += fmt::format("{:>10}  {:<14} {}\n", grouped(by_target[i].second.denials),
                           for_terminal(by_target[i].first.second), for_terminal(by_target[i].first.first));
    if (by_target.size() > top_targets)
        out += fmt::format("({} more targets; --json lists them all)\n", by_target.size() - top_targets);
    return out;
}

std::string AuditSummary::json() const {
    auto count = [](const Count& c) {
        return nlohmann::json{{"denials", c.denials}, {"first", c.first}, {"last", c.last}};
    };
    nlohmann::json o{
        {"denials", denials}, {"lost", lost}, {"unreadable_lines", unreadable}, {"first", first}, {"last", last}};
    o["jobs"] = nlohmann::json::object();
    for (const auto& [name, j] : jobs) {
        o["jobs"][name] = count(j);
        o["jobs"][name]["lost"] = j.lost;
        o["jobs"][name]["mode"] = j.mode;
    }
    o["ops"] = nlohmann::json::object();
    for (const auto& [op, c] : ops) o["ops"][op] = count(c);
    o["targets"] = nlohmann::json::array();
    for (const auto& [key, c] : targets) {
        nlohmann::json t = count(c);
        t["target"] = key.first;
        t["op"] = key.second;
        o["targets"].push_back(std::move(t));
    }
    return o.dump(2) + "\n";
}

}  // namespace confine
