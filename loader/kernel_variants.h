// Which of an object's programs belong on the running kernel: the variants
// of a hook for kernels before 6.3, and hooks only newer kernels have; and
// the kernel features an object's code tests (its .rodata flags).
// Programs are named through the skeletons, so a renamed program is a
// compile error here rather than a variant silently loaded everywhere.
#pragma once

struct fs_bpf;
struct net_bpf;
struct proc_bpf;
struct proxy_bpf;

namespace confine {

// Sets, before the object is loaded, which programs load on this kernel:
// exactly one variant of each hook, and no program for a hook the kernel
// lacks (older kernels reach its path through another hook); and the
// object's feature flags.
void choose_programs(fs_bpf& skel);
void choose_programs(proc_bpf& skel);
inline void choose_programs(net_bpf&) {}
inline void choose_programs(proxy_bpf&) {}

}  // namespace confine
