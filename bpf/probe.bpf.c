/* The probe of `confine probe`: the smallest lsm_cgroup program, loaded and
 * attached to a scratch cgroup to prove this kernel can enforce.
 *
 * Hooks: file_open (lsm_cgroup) - allows everything. file_open is one of the
 * hooks confine uses anyway, so probing spends no extra slot of the kernel's
 * 10 lsm_cgroup hooks. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("lsm_cgroup/file_open")
int BPF_PROG(confine_probe, struct file *file)
{
    return 1;
}
