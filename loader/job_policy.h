// A job's policy inside the shared BPF maps, keyed by its cgroup id, and the
// programs attached to its cgroup.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bpf/fs.h"
#include "bpf/net.h"
#include "common/error.h"
#include "loader/bpf_objects.h"
#include "policy/policy.h"

namespace confine {

class JobPolicy {
public:
    // Writes the compiled policy, and the job's slot in the pool of ring
    // buffers, into the maps. Fails (and leaves nothing behind) if a map is
    // full.
    static Result<JobPolicy> install(const BpfObjects& objs, uint64_t cgroup_id, const policy::Compiled& compiled,
                                     uint32_t ring_slot);

    JobPolicy(JobPolicy&& o) noexcept;
    JobPolicy& operator=(JobPolicy&&) = delete;
    ~JobPolicy();  // removes every entry install() wrote

    // Events the job's ring buffer had no room for, so far.
    uint64_t lost() const;
    // Packets from off the machine dropped on their way to the job's sockets.
    uint64_t inbound() const;

private:
    JobPolicy(const BpfObjects& objs, uint64_t id) : objs_(&objs), id_(id) {}
    const BpfObjects* objs_;
    uint64_t id_;
    std::vector<confine_fs_key> fs_keys_;
    std::vector<confine_fs_name> fs_names_;
    std::vector<confine_net_key> net_keys_;
    bool job_ = false;
};

// Kills and removes every job whose confine is gone (a worker of a daemon
// that died, a confine that was SIGKILLed), and its entries in the maps.
// Its programs kept it confined until then. Returns how many it ended.
size_t collect_orphan_jobs(const BpfObjects& objs);

// Encodes a rule prefix into its LPM key (exposed for tests).
confine_fs_key fs_key(uint64_t cgroup_id, const std::string& prefix);
// The fs_names key of a path's last component.
confine_fs_name fs_name_key(uint64_t cgroup_id, std::string_view path);
confine_net_key net_key(uint64_t cgroup_id, const policy::Endpoint& ep);

}  // namespace confine
