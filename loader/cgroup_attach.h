// cgroup programs on confine's parent cgroups: which are attached, attaching
// once, and detaching what an interrupted load left.
#pragma once

#include <bpf/bpf.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"

namespace confine {

// The id of the program PROG_FD, 0 if it can't be read.
uint32_t prog_id(int prog_fd);

// The ids of the programs attached to the cgroup with `type`. A failed
// query is an error, never "none": attach_to_parent would attach twice, and
// detach_stale would leave a stale program running.
Result<std::vector<uint32_t>> attached_ids(int cgroup_fd, bpf_attach_type type);

// Program ids per attach type.
using AttachedIds = std::map<bpf_attach_type, std::vector<uint32_t>>;

// Attaches the cgroup program pinned at PIN to a parent cgroup, unless
// program ID (the pin's, as its load recorded it) is attached already
// (attaching it twice fails with EINVAL, like a full hook budget would);
// returns the id attached. The pin is opened only to attach. `attached`
// holds what the cgroup has: each type is queried once, on first use, and a
// program attached here is added. The attachment lives as long as that
// cgroup, whatever becomes of confine.
Result<uint32_t> attach_to_parent(const std::string& pin, uint32_t id, bpf_attach_type type, int cgroup_fd,
                                  AttachedIds& attached);

// Detaches from a parent cgroup every program of these types that
// is not in `keep`: what a load interrupted after attaching left there. Its
// programs would run next to their replacements, with globals of their own.
Result<void> detach_stale(int cgroup_fd, const AttachedIds& keep);

}  // namespace confine
