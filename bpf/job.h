/* Per-job state shared by every confine BPF program and the loader.
 *
 * A job is identified by the id of its cgroup (the kernfs inode number of the
 * cgroup directory, which is also what bpf_get_current_cgroup_id() returns).
 * Every map that holds policy is keyed by that id, so one set of pinned
 * programs serves all jobs; see docs/design.md, "How a program finds its
 * job's policy".
 */
#ifndef CONFINE_BPF_JOB_H
#define CONFINE_BPF_JOB_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* confine_job.flags */
#define CONFINE_JOB_AUDIT     0x1u /* log would-be denials, allow them */
#define CONFINE_JOB_USERNS    0x2u /* [process] user_namespaces = true */
#define CONFINE_JOB_EXEC_LIST 0x4u /* [filesystem] exec is an allowlist */

/* Keys of a job that its end forgets without walking job_keys. */
#define CONFINE_JOB_KEYS 2

/* Value of the `jobs` map (key: __u64 cgroup id). */
struct confine_job {
    __u32 flags;
    __u32 ring;      /* the job's slot in `rings`, the pool of ring buffers */
    __u64 families;  /* bit N: the job may create sockets of address family N */
    __u64 lost;      /* events dropped because the job's ring buffer was full */
    __u64 inbound;   /* packets from off the machine dropped on their way to the job's sockets */
    __u64 name_lens; /* confine_name_len_bit of each name in fs_names for the job */
    __u64 keys;      /* keys the job made (its session keyring is one) */
    /* The addresses of the first ones, which the job's end forgets. */
    __u64 key[CONFINE_JOB_KEYS];
};

/* A name length's bit in confine_job.name_lens; 63 and longer share one. */
static inline __u64 confine_name_len_bit(__u32 len)
{
    return 1ull << (len < 63 ? len : 63);
}

/* Sizes of the shared maps. A full map makes `confine run` refuse to start
 * the job, never run it half-confined. */
#define CONFINE_MAX_JOBS      16384
#define CONFINE_MAX_FS_RULES  262144
#define CONFINE_MAX_NET_RULES 65536
#define CONFINE_MAX_KEYS      65536
#define CONFINE_RING_BYTES    (32 * 1024)

#endif
