/* What every confine BPF program shares: the per-job maps, how a program
 * finds its job, and how it reports a denial.
 *
 * Maps here are pinned by name (LIBBPF_PIN_BY_NAME) under the build's pin
 * directory, so every feature object (fs, net, proc) reuses the same
 * instance: one `jobs` entry and one ring buffer per job, whichever hook
 * fires. */
#ifndef CONFINE_BPF_COMMON_H
#define CONFINE_BPF_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/audit.h"
#include "bpf/job.h"

char LICENSE[] SEC("license") = "GPL";

/* ---- maps ---------------------------------------------------------------- */

/* key: job cgroup id; value: the job's flags and lost-event counter. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_JOBS);
    __type(key, __u64);
    __type(value, struct confine_job);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} jobs SEC(".maps");

/* The jobs' ring buffers, a pool: a job's `jobs` entry names its slot, which
 * its `confine run` holds (an flock; loader/audit.h, RingSlot) and drains,
 * so jobs never see or steal each other's events. Rings stay in their slots
 * from job to job: every update of a map of maps waits for an RCU grace
 * period, which a job's start and end would otherwise each pay. */
struct job_ring {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, CONFINE_RING_BYTES);
};
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    __uint(max_entries, CONFINE_MAX_JOBS);
    __type(key, __u32);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
    __array(values, struct job_ring);
} rings SEC(".maps");

/* A BTF pointer's value as a plain number, to hash or to keep in a map.
 * The verifier allows no arithmetic on a pointer it tracks but one:
 * pointer minus pointer, which gives a number, and only to programs that
 * may see kernel addresses (allow_ptr_leaks: CAP_PERFMON, which every LSM
 * program needs to load). Subtracting one fixed pointer shifts every value
 * alike. The other way, reading the pointer into a variable with
 * bpf_probe_read_kernel, is a helper call of some 80 instructions. So `p`
 * must be a pointer the verifier tracks (a hook argument, or loaded through
 * one), never a number read with a helper: that fails to load. */
static __always_inline __u64 ptr_value(const void *p)
{
    return (__u64)p - (__u64)&jobs;
}

/* What ptr_value gives for a pointer held as a plain number (read with a
 * helper): one helper call, for paths that walk anyway. */
static __always_inline __u64 plain_ptr_value(const void *plain)
{
    const void *base = &jobs;
    __u64 at = 0;

    bpf_probe_read_kernel(&at, sizeof(at), &base);
    return (__u64)plain - at;
}

/* ---- verdicts ------------------------------------------------------------ */

/* lsm_cgroup programs return 1 to allow and 0 to deny (-EPERM). */
#define ALLOW 1
#define DENY  0

/* Global lsm programs return 0 or an errno instead. */
#define EPERM  1
#define EACCES 13
static __always_inline int as_errno(int verdict)
{
    return verdict == ALLOW ? 0 : -EPERM;
}

/* The job of the current task. Programs are attached only to job cgroups,
 * and a job never gets to create child cgroups, so the task's own cgroup id
 * is the job's key. NULL means the job is being torn down: deny. */
static __always_inline struct confine_job *current_job(__u64 *cgid)
{
    *cgid = bpf_get_current_cgroup_id();
    return bpf_map_lookup_elem(&jobs, cgid);
}

/* Fills in an audit record's header: who did what, and why it was refused. */
static __always_inline void event_fill(struct confine_event *e, struct confine_job *job, __u64 cgid, __u16 op,
                                       __u8 reason)
{
    __u64 id = bpf_get_current_pid_tgid();

    e->ktime_ns = bpf_ktime_get_ns();
    e->cgroup_id = cgid;
    e->pid = (__u32)id;
    e->tgid = id >> 32;
    e->uid = (__u32)bpf_get_current_uid_gid();
    e->op = op;
    e->denied = !(job->flags & CONFINE_JOB_AUDIT);
    e->reason = reason;
    e->target_kind = CONFINE_TARGET_NONE;
    e->pad = 0;
    e->target_len = 0;
    bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* Reserves an audit record of SIZE bytes (a constant: CONFINE_EVENT_SIZE of
 * what the caller writes into `target`) for a denial in job `cgid`, and
 * fills in who did it. Returns NULL when the ring is full (counted as lost)
 * or missing. */
static __always_inline struct confine_event *event_reserve(struct confine_job *job, __u64 cgid, __u16 op,
                                                           __u8 reason, __u32 size)
{
    void *ring = bpf_map_lookup_elem(&rings, &job->ring);
    struct confine_event *e;

    if (!ring)
        return NULL;
    e = bpf_ringbuf_reserve(ring, size, 0);
    if (!e) {
        __sync_fetch_and_add(&job->lost, 1);
        return NULL;
    }
    event_fill(e, job, cgid, op, reason);
    return e;
}

/* What a refused access returns: deny, unless the job is in audit mode. */
static __always_inline int verdict(struct confine_job *job)
{
    return (job->flags & CONFINE_JOB_AUDIT) ? ALLOW : DENY;
}

/* Reports an access without a target, refused for `reason`, and returns
 * the verdict. */
static __always_inline int refuse_for(struct confine_job *job, __u64 cgid, __u16 op, __u8 reason)
{
    struct confine_event *e = event_reserve(job, cgid, op, reason, CONFINE_EVENT_HEADER);

    if (e)
        bpf_ringbuf_submit(e, 0);
    return verdict(job);
}

static __always_inline int refuse(struct confine_job *job, __u64 cgid, __u16 op)
{
    return refuse_for(job, cgid, op, CONFINE_REASON_POLICY);
}

#endif
