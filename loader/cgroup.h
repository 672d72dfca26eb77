// The job's cgroup: created under a confine-owned parent, emptied with
// cgroup.kill and removed when the job ends.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/fd.h"

namespace confine {

// Mount point of the cgroup v2 hierarchy, from /proc/self/mountinfo.
Result<std::string> cgroup2_mount();

// <cgroup2>/confine[/SUB], created if missing: where confine's cgroups live.
Result<std::string> confine_cgroup(const std::string& sub = "");

class JobCgroup {
public:
    // Creates PARENT/NAME. Fails if it exists.
    static Result<JobCgroup> create(const std::string& parent, const std::string& name);

    JobCgroup(JobCgroup&&) noexcept = default;
    JobCgroup& operator=(JobCgroup&&) noexcept = default;
    ~JobCgroup();

    int fd() const { return fd_.get(); }
    uint64_t id() const { return id_; }
    const std::string& path() const { return path_; }

    // Kills every process left in the cgroup, waits until it is empty, and
    // removes it.
    Result<void> kill_and_remove();

private:
    JobCgroup() = default;
    std::string path_;
    Fd fd_;
    uint64_t id_ = 0;
};

}  // namespace confine
