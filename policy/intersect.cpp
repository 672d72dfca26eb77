// A job's policy intersected with the administrator's ceiling: what a
// client of `confine daemon` gets is never more than the ceiling allows.
//
// Paths are the subtle part. Each side is a longest-prefix table: the
// access at a path is that of its longest covering prefix. For any path,
// the longest covering prefix among the union U of both sides' prefixes is
// at least as long as each side's own, and neither side has a prefix in
// between, so each side's access there equals its access at that U prefix.
// The table with U's prefixes, each holding the AND of both sides' access
// at it, therefore gives exactly (job AND ceiling) at every path.
#include <algorithm>
#include <set>

#include "policy/policy.h"

namespace confine::policy {
namespace {

std::vector<FsEntry> intersect_fs(const Compiled& job, const Compiled& ceiling) {
    std::set<std::string> prefixes;
    for (const Compiled* c : {&job, &ceiling})
        for (const FsEntry& e : c->fs) prefixes.insert(e.prefix);
    std::vector<FsEntry> out;
    for (const std::string& p : prefixes)
        out.push_back({p, static_cast<uint8_t>(access_at(job, p) & access_at(ceiling, p))});
    return out;
}

// As compile() derives them, from the merged table: every ancestor of an
// entry without write is a guard; an ancestor of a readable entry that no
// entry covers may be listed.
void derive_guards_and_listable(Compiled& c) {
    std::set<std::string> guards, listable;
    for (const FsEntry& e : c.fs) {
        for (std::string a = e.prefix; a.size() > 1;) {
            a = a.substr(0, std::max<size_t>(a.rfind('/'), 1));
            if (!(e.access & kWrite) && a != "/") guards.insert(a);
            if ((e.access & kRead) &&
                std::none_of(c.fs.begin(), c.fs.end(), [&](const FsEntry& o) { return covers(o.prefix, a); }))
                listable.insert(a);
        }
    }
    c.guards.assign(guards.begin(), guards.end());
    c.listable.assign(listable.begin(), listable.end());
}

// Endpoints the job lists that the ceiling lists too; a ceiling bind rule
// with port 0 (any port) covers the job's rules for that address.
std::vector<Endpoint> intersect_endpoints(const std::vector<Endpoint>& job, const std::vector<Endpoint>& ceiling) {
    std::vector<Endpoint> out;
    for (const Endpoint& e : job)
        if (std::any_of(ceiling.begin(), ceiling.end(), [&](const Endpoint& c) {
                return c.kind == e.kind && c.addr == e.addr && c.name == e.name && (c.port == e.port || c.port == 0);
            }))
            out.push_back(e);
    return out;
}

// Whether the names ceiling domain C matches include every name job
// domain D matches: the same entry, or C "*.x" and D a name under x.
bool domain_covers(const std::string& c, const std::string& d) {
    if (c == d) return true;
    if (!c.starts_with("*.")) return false;
    std::string_view base = std::string_view(c).substr(1);  // ".x"
    std::string_view name = d.starts_with("*.") ? std::string_view(d).substr(1) : std::string_view(d);
    // "*.x" covers "*.x" (equal, above) and "a.x", "*.a.x", not "x".
    return name.size() > base.size() && name.ends_with(base);
}

std::vector<Domain> intersect_domains(const std::vector<Domain>& job, const std::vector<Domain>& ceiling) {
    std::vector<Domain> out;
    for (const Domain& d : job) {
        Domain kept = d;
        kept.ports.clear();
        for (uint16_t port : d.ports)
            if (std::any_of(ceiling.begin(), ceiling.end(), [&](const Domain& c) {
                    return domain_covers(c.name, d.name) &&
                           std::find(c.ports.begin(), c.ports.end(), port) != c.ports.end();
                }))
                kept.ports.push_back(port);
        if (!kept.ports.empty()) out.push_back(std::move(kept));
    }
    return out;
}

// The smaller limit; an unset one is no limit.
std::optional<uint64_t> min_limit(std::optional<uint64_t> a, std::optional<uint64_t> b) {
    if (!a) return b;
    if (!b) return a;
    return std::min(*a, *b);
}

}  // namespace

Compiled intersect(const Compiled& job, const Compiled& ceiling) {
    Compiled c;
    // Audit mode enforces nothing, so a client gets it only where the
    // ceiling itself is in audit mode.
    c.mode = job.mode == Mode::Audit && ceiling.mode == Mode::Audit ? Mode::Audit : Mode::Enforce;
    c.fs = intersect_fs(job, ceiling);
    c.exec_allowlist = job.exec_allowlist || ceiling.exec_allowlist;
    derive_guards_and_listable(c);
    std::set<std::string> git(job.git_protected.begin(), job.git_protected.end());
    git.insert(ceiling.git_protected.begin(), ceiling.git_protected.end());
    c.git_protected.assign(git.begin(), git.end());
    c.connect = intersect_endpoints(job.connect, ceiling.connect);
    c.bind = intersect_endpoints(job.bind, ceiling.bind);
    c.domains = intersect_domains(job.domains, ceiling.domains);
    c.families = job.families & ceiling.families;
    c.user_namespaces = job.user_namespaces && ceiling.user_namespaces;
    // The environment is the client's own to give its job.
    c.env_keep = job.env_keep;
    c.env_set = job.env_set;
    c.limits.memory = min_limit(job.limits.memory, ceiling.limits.memory);
    c.limits.swap = min_limit(job.limits.swap, ceiling.limits.swap);
    c.limits.pids = min_limit(job.limits.pids, ceiling.limits.pids);
    c.limits.cpu_quota_us = min_limit(job.limits.cpu_quota_us, ceiling.limits.cpu_quota_us);
    auto timeout = [](uint64_t t) { return t ? std::optional<uint64_t>(t) : std::nullopt; };
    c.limits.timeout_s = min_limit(timeout(job.limits.timeout_s), timeout(ceiling.limits.timeout_s)).value_or(0);
    return c;
}

}  // namespace confine::policy
