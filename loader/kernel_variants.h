// Which of an object's programs belong on the running kernel: the variants
// of a hook for kernels before 6.3, and hooks only newer kernels have.
#pragma once

#include <bpf/libbpf.h>

namespace confine {

// Whether `prog` of `obj` belongs on this kernel (exactly one variant of a
// hook does; a hook the kernel lacks doesn't).
bool belongs_here(bpf_object* obj, bpf_program* prog);

}  // namespace confine
