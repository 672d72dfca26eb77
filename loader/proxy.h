// A job's filtering HTTP proxy, for [network] domains: Debian's tinyproxy,
// configured for the one job, in a cgroup of its own below the build's
// proxies parent (bpf/proxy.bpf.c lets only the job's sockets reach it),
// listening on a loopback port the job's policy gets a connect rule for.
// Its log is read back into the audit log: one `proxy` record per request
// the domains refuse (in audit mode: would refuse).
#pragma once

#include <regex.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/fd.h"
#include "loader/cgroup.h"
#include "policy/policy.h"

namespace confine {

class AuditLog;
class BpfObjects;

// A tinyproxy filter, compiled as tinyproxy compiles it ("FilterType ere",
// "FilterCaseSensitive Off"): audit mode judges each request with it
// exactly as enforce mode's proxy would.
class UrlFilter {
public:
    explicit UrlFilter(const std::string& filter);  // proxy_filter()'s text
    UrlFilter(UrlFilter&&) = default;
    ~UrlFilter();
    // Whether some rule matches URL, the request target as the client sent it.
    bool passes(std::string_view url) const;

private:
    std::vector<std::unique_ptr<regex_t>> res_;
};

class JobProxy {
public:
    // Starts tinyproxy for job `job_cgid`, its configuration in `dir` (a
    // directory of confine's, outside the job's writable set), and returns
    // once it accepts connections.
    static Result<std::unique_ptr<JobProxy>> start(const BpfObjects& objs, uint64_t job_cgid, const std::string& job,
                                                   const std::vector<policy::Domain>& domains, bool audit_mode,
                                                   const std::string& dir);

    JobProxy(const JobProxy&) = delete;
    JobProxy& operator=(const JobProxy&) = delete;
    ~JobProxy();

    uint16_t port() const { return port_; }
    // HTTP_PROXY and kin, for the job's environment.
    std::vector<std::string> environment() const;
    // The connect rule the job needs to reach it.
    policy::Endpoint endpoint() const;

    // Readable when the proxy logged something, or exited; -1 once it has.
    int log_fd() const { return log_.get(); }
    // Turns what the proxy logged since the last call into audit records.
    void drain(AuditLog& log);
    // Whether tinyproxy has exited (seen by drain()): the job has lost its
    // way out, and its rule names a port anyone may take now.
    bool exited() const { return exited_; }

    // Ends the proxy (cgroup.kill), removes its cgroup and map entry, and
    // records what it logged last.
    Result<void> stop(AuditLog& log);

private:
    JobProxy() = default;
    void forget();
    std::optional<JobCgroup> cg_;
    int proxies_map_ = -1;            // owned by BpfObjects
    std::optional<UrlFilter> judge_;  // audit mode: what enforce mode would refuse
    pid_t pid_ = -1;                  // tinyproxy, until reaped
    uint16_t port_ = 0;
    Fd log_;
    std::string pending_;  // a log line not yet complete
    bool exited_ = false;
};

// The tinyproxy filter for DOMAINS: one extended regex per line, matched
// without regard to case against the request's URL as the client sent it
// ("host:port" for CONNECT, "http://host[:port]/path" otherwise). Exposed
// for tests.
std::string proxy_filter(const std::vector<policy::Domain>& domains);

// "name:port" of a URL tinyproxy logged, the way tinyproxy reads it
// (default port 443 for CONNECT's "host:port" form, 80 for http://; the
// port wraps at 65536). For the audit record only: the decision is the
// filter's. Exposed for tests.
std::string proxy_target(std::string_view url);

// Ends what earlier confines left below the proxies' parent: a proxy whose
// job's cgroup is gone outlived a confine killed before it could stop it,
// and serves no one. While its job's cgroup exists it stays, holding its
// port, which the job's rule names. (A confine between removing its job's
// cgroup and stopping its proxy finds it gone, which is fine.)
void collect_orphan_proxies(const BpfObjects& objs);

// What one line of tinyproxy's log records, if anything: the target
// ("name:port") of a request the proxy refused (JUDGE null: enforce mode,
// its filter decided) or would have refused (JUDGE: audit mode, no filter
// in the proxy; the request line, or for an origin-form request the URL
// built from its Host header, judged as the filter would). Only the
// message after tinyproxy's own prefix counts, so text a client sent can't
// pose as a line. A line cut at tinyproxy's 800 bytes, or continued on
// more lines (a folded header, logged with its line breaks: LINE holds
// them all), counts as refused.
std::optional<std::string> proxy_refusal(std::string_view line, const UrlFilter* judge);

}  // namespace confine
