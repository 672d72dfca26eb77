// Rules the BPF programs can't hold: below a mount of a filesystem that
// folds names where no hook can see it (docs/design.md "Names that fold
// case"). Checked once per start, after the policy is compiled.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "policy/policy.h"

namespace confine {

// The mount points of XFS filesystems in MOUNTINFO (/proc/self/mountinfo
// text), unescaped.
std::vector<std::string> xfs_mount_points_in(std::string_view mountinfo);

// Whether PATH lies strictly below mount point MOUNT (every path but "/"
// lies below "/").
bool below_mount(std::string_view path, std::string_view mount);

// Refuses a policy with a rule below a mount of XFS made case-insensitive
// (mkfs.xfs -n version=ci), naming the rule and the mount.
Result<void> check_unseen_folding(const policy::Compiled& c);

}  // namespace confine
