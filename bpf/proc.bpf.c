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
 *   file_fcntl, file_ioctl, file_ioctl_compat - the owner of a file, whom
 *                         the kernel signals (SIGIO, SIGURG; no task_kill on
 *                         that path), may only be the caller's own process or
 *                         process group. F_SETOWN_EX, FIOSETOWN and
 *                         SIOCSPGRP pass the owner through user memory, which
 *                         the job could change after the check: refused.
 *                         file_ioctl_compat exists since 6.8 ("lsm: new
 *                         security_file_ioctl_compat() hook"); before,
 *                         compat ioctls reach file_ioctl.
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

/* ---- file owners (SIGIO, SIGURG) ----------------------------------------- */

#define F_SETOWN 8
#define F_SETOWN_EX 15
#define FIOSETOWN 0x8901
#define SIOCSPGRP 0x8902
#define SIGIO 29

/* The number of pid `p` in the pid namespace at `level`, or 0 if it has none
 * there. */
static __always_inline int pid_nr_at(struct pid *p, unsigned int level)
{
    int nr = 0;

    if (p && BPF_CORE_READ(p, level) >= level && level < 32 /* MAX_PID_NS_LEVEL */)
        bpf_probe_read_kernel(&nr, sizeof(nr), &p->numbers[level].nr);
    return nr;
}

/* Whether F_SETOWN's `who` (a pid, or minus a process group, in the caller's
 * pid namespace) is the caller's own process or process group: the job's,
 * since a job is a session of its own and can't let outsiders in. */
static __always_inline bool owner_is_self(int who)
{
    struct task_struct *task = bpf_get_current_task_btf();
    unsigned int level = BPF_CORE_READ(task, thread_pid, level);

    if (who > 0)
        return who == pid_nr_at(BPF_CORE_READ(task, group_leader, thread_pid), level);
    return -who == pid_nr_at(BPF_CORE_READ(task, signal, pids[PIDTYPE_PGID]), level);
}

static __always_inline int check_owner(unsigned int cmd, unsigned long arg)
{
    struct confine_event *e;
    struct confine_job *job;
    int who = (int)arg;
    __u64 cgid;
    int ret;

    if (cmd != F_SETOWN && cmd != F_SETOWN_EX && cmd != FIOSETOWN && cmd != SIOCSPGRP)
        return 0;
    job = current_job(&cgid);
    if (!job || (cmd == F_SETOWN && (who == 0 || owner_is_self(who))))
        return 0;
    ret = verdict(job) == ALLOW ? 0 : -EPERM;
    e = event_reserve(job, cgid, CONFINE_OP_SIGNAL,
                      cmd == F_SETOWN ? CONFINE_REASON_POLICY : CONFINE_REASON_OWNER_IN_USER_MEMORY);
    if (e) {
        if (cmd == F_SETOWN) {
            e->target_kind = who > 0 ? CONFINE_TARGET_TASK : CONFINE_TARGET_PGRP;
            e->target.task.tgid = who > 0 ? who : -who;
            e->target.task.signal = SIGIO; /* unless F_SETSIG picks another */
            e->target.task.comm[0] = 0;
        }
        bpf_ringbuf_submit(e, 0);
    }
    return ret;
}

SEC("lsm/file_fcntl")
int BPF_PROG(confine_file_fcntl, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_owner(cmd, arg);
}

SEC("lsm/file_ioctl")
int BPF_PROG(confine_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_owner(cmd, arg);
}

SEC("lsm/file_ioctl_compat")
int BPF_PROG(confine_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_owner(cmd, arg);
}
