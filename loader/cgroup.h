// The job's cgroup: created under a confine-owned parent, limited
// ([limits]), emptied with cgroup.kill and removed when the job ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/fd.h"
#include "policy/policy.h"

namespace confine {

// Mount point of the cgroup v2 hierarchy's root, as this process sees it.
Result<std::string> cgroup2_mount();

// The mount point of the first cgroup v2 root in MOUNTINFO (the text of
// /proc/self/mountinfo) that no later mount hides; none if there is none.
std::optional<std::string> cgroup2_root_in(std::string_view mountinfo);

// <cgroup2>/confine[/SUB], created if missing: where confine's cgroups live.
// The memory, pids and cpu controllers are enabled down to it (where the
// kernel lets us), so that the cgroups below can be limited.
Result<std::string> confine_cgroup(const std::string& sub = "");

// Whether the cgroup at PATH has child cgroups (cgroup.stat, one read
// where listing it would read every control file's name).
bool has_children(const std::string& path);

// How often the job's limits stopped it, from its cgroup's counters.
struct LimitHits {
    uint64_t memory = 0;  // memory.events oom_kill: processes OOM-killed
    uint64_t pids = 0;    // pids.events max: forks refused
    uint64_t cpu = 0;     // cpu.stat nr_throttled: periods the job was throttled in
};

// The xattr on a job's cgroup naming the confine process that supervises it.
inline constexpr const char* kOwnerXattr = "trusted.confine.owner";
// "PID:STARTTIME" of a live process, "" if there is none with that PID.
std::string process_identity(pid_t pid);
// Whether the confine that made the job cgroup at PATH still runs.
bool owner_alive(const std::string& path);

class JobCgroup {
public:
    // Creates PARENT/NAME. Fails if it exists.
    static Result<JobCgroup> create(const std::string& parent, const std::string& name);
    // Takes over an existing cgroup, to end what another confine left.
    static Result<JobCgroup> adopt(const std::string& path);

    // A moved-from JobCgroup owns nothing (its path is empty). No move
    // assignment: it would have to end a live cgroup, which can fail.
    JobCgroup(JobCgroup&& o) noexcept;
    JobCgroup& operator=(JobCgroup&&) = delete;
    ~JobCgroup();

    int fd() const { return fd_.get(); }
    uint64_t id() const { return id_; }
    const std::string& path() const { return path_; }

    // Writes the limits that are set (memory.max, memory.swap.max,
    // pids.max, cpu.max); call it before the first process enters. Fails,
    // naming the controller or file and what to do, if a limit can't be
    // enforced here.
    Result<void> set_limits(const policy::CompiledLimits& limits);

    // SIGKILL to every process in the cgroup (cgroup.kill); doesn't wait.
    Result<void> kill();

    // Kills every process left in the cgroup, waits until it is empty, and
    // removes it. A cgroup someone else removed already is fine.
    Result<void> kill_and_remove();

    // The counters of the limits that were set, as kill_and_remove() read
    // them last; zero for the others.
    const LimitHits& hits() const { return hits_; }

private:
    JobCgroup() = default;
    std::string path_;
    Fd fd_;
    uint64_t id_ = 0;
    policy::CompiledLimits limits_;
    LimitHits hits_;
};

}  // namespace confine
