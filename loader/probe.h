// Can this kernel enforce? The checks of `confine probe`, also run by
// `confine run` before it starts anything.
#pragma once

#include "common/error.h"

namespace confine {

// Static checks: root, BPF LSM active, kernel BTF, cgroup v2, bpffs.
// The error says exactly what is missing and how to fix it.
Result<void> check_kernel();

// check_kernel(), then a real load and attach of a tiny lsm_cgroup program
// on a scratch cgroup, then a load of confine's own programs.
Result<void> probe();

// Explains a failure to load or attach an LSM program.
Error explain_load_failure(Error e);

}  // namespace confine
