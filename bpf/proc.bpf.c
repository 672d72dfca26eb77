/* Process isolation.
 *
 * Hooks, lsm_cgroup (attached to each job's cgroup):
 *   userns_create       - refuse new user namespaces (unshare -U,
 *                         clone(CLONE_NEWUSER)) unless the job's policy sets
 *                         [process] user_namespaces. The hook exists since
 *                         6.1 (commit 7cd4c5c2101c, "security, lsm: Introduce
 *                         security_create_user_ns()").
 *
 * Hooks, global lsm (rare; a task outside any job pays one hash lookup):
 *   ptrace_access_check - ptrace attach, /proc/PID/{environ,mem,maps,fd/N},
 *                         process_vm_readv/writev: only processes of the
 *                         same job.
 *   task_kill           - signals (kill, tgkill, sigqueue, pidfd_send_signal):
 *                         only to processes of the same job. Signals the
 *                         kernel sends (SIGCHLD, SIGPIPE, ...) don't pass here.
 *   bpf                 - no bpf() at all from a job, so a job can't reach
 *                         confine's pinned maps and programs even where
 *                         unprivileged BPF is enabled.
 */
#include "bpf/common.bpf.h"

#define EPERM 1

SEC("lsm_cgroup/userns_create")
int BPF_PROG(confine_userns_create, const struct cred *cred)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return DENY;
    if (job->flags & CONFINE_JOB_USERNS)
        return ALLOW;
    return refuse(job, cgid, CONFINE_OP_USERNS_CREATE);
}

/* Whether the current task, if in a job, may act on `target` (an errno for
 * a global lsm program: 0 allows). */
static __always_inline int same_job(struct task_struct *target, __u16 op, int sig)
{
    struct confine_event *e;
    struct confine_job *job;
    __u64 cgid;
    int ret;

    job = current_job(&cgid);
    if (!job)
        return 0;
    if (BPF_CORE_READ(target, cgroups, dfl_cgrp, kn, id) == cgid)
        return 0;
    ret = verdict(job) == ALLOW ? 0 : -EPERM;
    e = event_reserve(job, cgid, op, CONFINE_REASON_POLICY);
    if (e) {
        e->target_kind = CONFINE_TARGET_TASK;
        e->target.task.tgid = BPF_CORE_READ(target, tgid);
        e->target.task.signal = sig;
        BPF_CORE_READ_STR_INTO(&e->target.task.comm, target, comm);
        bpf_ringbuf_submit(e, 0);
    }
    return ret;
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(confine_ptrace_access_check, struct task_struct *child, unsigned int mode)
{
    return same_job(child, CONFINE_OP_PTRACE, 0);
}

SEC("lsm/task_kill")
int BPF_PROG(confine_task_kill, struct task_struct *p, struct kernel_siginfo *info, int sig)
{
    return same_job(p, CONFINE_OP_SIGNAL, sig);
}

/* Since 6.15 the hook has a fourth argument (bool kernel); only the first is
 * read, so one program fits both. */
SEC("lsm/bpf")
int BPF_PROG(confine_bpf, int cmd)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return 0;
    return refuse(job, cgid, CONFINE_OP_BPF) == ALLOW ? 0 : -EPERM;
}
