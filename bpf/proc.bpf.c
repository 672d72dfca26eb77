/* Process isolation.
 *
 * Hooks, lsm_cgroup (attached once to the build's parent of the jobs' cgroups,
 * so they run for every job's processes and no one else's):
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
 *   task_setnice, task_setioprio, task_setscheduler - nice (setpriority,
 *                         including PRIO_PGRP and PRIO_USER, which ask once
 *                         per process), I/O priority, scheduling policy and
 *                         CPU affinity: only of processes of the same job.
 *   task_setrlimit      - prlimit(2) setting the limits of a process: only
 *                         of processes of the same job.
 *   task_alloc          - clone3(CLONE_INTO_CGROUP) from a job: refused, a
 *                         child must be born in the job's cgroup.
 *   key_alloc, key_permission - keys and keyrings: a job may use only
 *                         those it created itself (recorded by address at
 *                         key_alloc, forgotten when the job ends), never the
 *                         account's user keyrings, the persistent keyring,
 *                         or the session keyring it was started from.
 *   sb_mount, move_mount - mounts (possible only in a user namespace the
 *                         policy let the job make): no bind mounts, moved
 *                         or attached trees, nor overlays, which would give
 *                         files a second path; fresh tmpfs, proc, sysfs,
 *                         mqueue and devpts alias nothing and pass.
 *   path_chroot, sb_pivotroot - never (possible only in such a namespace
 *                         too): a new root gives every file a second path,
 *                         the one the job's rules would be checked against.
 *   file_ioctl (terminals) - TIOCSCTTY and TCXONC only on a pty of the
 *                         job's own, TIOCSTI and TIOCLINUX never: no typing
 *                         into a terminal outside the job, nor stopping its
 *                         output (confine's audit lines may go there).
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

#define ENOMEM 12

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
    ret = as_errno(verdict(job));
    e = event_reserve(job, cgid, op, CONFINE_REASON_POLICY, CONFINE_EVENT_SIZE(sizeof(struct confine_task)));
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

SEC("lsm/task_setnice")
int BPF_PROG(confine_task_setnice, struct task_struct *p, int nice)
{
    return same_job(p, CONFINE_OP_SETSCHED, 0);
}

SEC("lsm/task_setioprio")
int BPF_PROG(confine_task_setioprio, struct task_struct *p, int ioprio)
{
    return same_job(p, CONFINE_OP_SETSCHED, 0);
}

SEC("lsm/task_setscheduler")
int BPF_PROG(confine_task_setscheduler, struct task_struct *p)
{
    return same_job(p, CONFINE_OP_SETSCHED, 0);
}

/* prlimit(2) writing another process's limits (and setrlimit(2) on
 * itself). task_prlimit, asked first, names the target by its credentials
 * only; this one names the task. Reading another process's limits is no
 * secret (/proc/PID/limits is world-readable). */
SEC("lsm/task_setrlimit")
int BPF_PROG(confine_task_setrlimit, struct task_struct *p, unsigned int resource, struct rlimit *new_rlim)
{
    return same_job(p, CONFINE_OP_PRLIMIT, 0);
}

/* CLONE_INTO_CGROUP picks the child's cgroup by an fd, O_PATH included,
 * which no file_open sees; the kernel then checks only write permission on
 * the target's cgroup.procs, which a job run as root (--allow-root) passes
 * without any capability. A child born outside the job's cgroup would run
 * unconfined and outlive cgroup.kill, so a job may not pick. Every fork on
 * the machine comes here: the flag is tested before the job is looked up. */
#define CLONE_INTO_CGROUP 0x200000000ULL

SEC("lsm/task_alloc")
int BPF_PROG(confine_task_alloc, struct task_struct *task, unsigned long clone_flags)
{
    struct confine_job *job;
    __u64 cgid;

    if (!(clone_flags & CLONE_INTO_CGROUP))
        return 0;
    job = current_job(&cgid);
    if (!job)
        return 0;
    return as_errno(refuse(job, cgid, CONFINE_OP_CGROUP));
}

/* ---- mounts --------------------------------------------------------------- */

/* A job can mount only inside a user namespace of its own, so only where
 * its policy allows user namespaces. A bind mount, a moved or attached
 * tree (move_mount: open_tree clones, fsmount), or an overlay would give a
 * file a second path, under rules it was never meant to have: refused.
 * Filesystems that alias nothing may be mounted fresh. confine's own
 * setup of the job's mount namespace (launch.cpp) runs in the job's cgroup
 * too, as root of the initial user namespace, before it drops every
 * capability: that passes (confine_setup). From include/uapi/linux/mount.h. */
#define MS_REMOUNT 32
#define MS_BIND    4096
#define MS_MOVE    8192
#define MS_PROPAGATION                                                                                       \
    ((1 << 17) | (1 << 18) | (1 << 19) | (1 << 20)) /* UNBINDABLE, PRIVATE, SLAVE, SHARED */

/* Typeless: kernel BTF describes per-CPU variables only. */
extern const void init_user_ns __ksym;

/* Root of the initial user namespace: confine's own setup, or a job run
 * as root (--allow-root), which has no capability left, so the kernel
 * refuses its mounts anyway (may_mount, right after this hook). */
static __always_inline bool confine_setup(void)
{
    struct task_struct *task = bpf_get_current_task_btf();
    const struct cred *cred = task->cred;

    return (const void *)BPF_CORE_READ(cred, user_ns) == &init_user_ns && BPF_CORE_READ(cred, euid.val) == 0;
}

static __always_inline bool aliases_nothing(const char *type)
{
    static const char names[][8] = {"tmpfs", "ramfs", "proc", "sysfs", "mqueue", "devpts"};
    char t[8] = {};

    if (!type || bpf_probe_read_kernel_str(t, sizeof(t), type) < 0)
        return false;
    for (int i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        bool same = true;

        for (int j = 0; j < sizeof(t); j++)
            if (t[j] != names[i][j]) {
                same = false;
                break;
            }
        if (same)
            return true;
    }
    return false;
}

static __always_inline int refuse_mount(const char *source)
{
    struct confine_event *e;
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job || confine_setup())
        return 0;
    /* A short event first; a source that fills it goes again in a whole
     * one (the verifier wants a constant size for each reservation). */
    e = event_reserve(job, cgid, CONFINE_OP_MOUNT, CONFINE_REASON_POLICY,
                      CONFINE_EVENT_SIZE(CONFINE_PATH_SHORT));
    if (e) {
        e->target_kind = CONFINE_TARGET_PATH;
        e->target.path[0] = 0;
        if (source &&
            bpf_probe_read_kernel_str(e->target.path, CONFINE_PATH_SHORT, source) == CONFINE_PATH_SHORT) {
            bpf_ringbuf_discard(e, 0);
            e = event_reserve(job, cgid, CONFINE_OP_MOUNT, CONFINE_REASON_POLICY,
                              CONFINE_EVENT_SIZE(CONFINE_PATH_MAX));
            if (e) {
                e->target_kind = CONFINE_TARGET_PATH;
                e->target.path[0] = 0;
                bpf_probe_read_kernel_str(e->target.path, CONFINE_PATH_MAX, source);
            }
        }
        if (e)
            bpf_ringbuf_submit(e, 0);
    }
    return as_errno(verdict(job));
}

SEC("lsm/sb_mount")
int BPF_PROG(confine_sb_mount, const char *dev_name, const struct path *path, const char *type,
             unsigned long flags, void *data)
{
    /* In path_mount()'s order: remounts (MS_BIND among them, which only
     * changes a mount's flags) and propagation changes make no new path. */
    if (flags & MS_REMOUNT)
        return 0;
    if (!(flags & (MS_BIND | MS_MOVE)) && ((flags & MS_PROPAGATION) || aliases_nothing(type)))
        return 0;
    return refuse_mount(dev_name);
}

SEC("lsm/move_mount")
int BPF_PROG(confine_move_mount, const struct path *from_path, const struct path *to_path)
{
    return refuse_mount(0);
}

/* Paths are resolved up to the task's root, so after `chroot /home/u` the
 * job's ~/.ssh/id_rsa would be decided as /.ssh/id_rsa, and after a
 * pivot_root the old tree as /old/...: audited as mounts. */
SEC("lsm/path_chroot")
int BPF_PROG(confine_path_chroot, const struct path *path)
{
    return refuse_mount(0);
}

SEC("lsm/sb_pivotroot")
int BPF_PROG(confine_sb_pivotroot, const struct path *old_path, const struct path *new_path)
{
    return refuse_mount(0);
}

/* ---- keys ----------------------------------------------------------------- */

/* key: a struct key's address; value: the cgroup id of the job that
 * created it. Not the serial: key_alloc() gives the key its serial only
 * after asking the LSM. Every key_alloc on the machine rewrites or deletes
 * the entry of its address, so an address freed and reused for someone
 * else's key never carries a job's ownership over. The loader removes a
 * job's entries when it ends (BPF has no key_free hook after 6.1). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_KEYS);
    __type(key, __u64);
    __type(value, __u64);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} job_keys SEC(".maps");

/* include/linux/key.h */
#define KEY_ALLOC_UID_KEYRING 0x0010

static __always_inline void report_key(struct confine_job *job, __u64 cgid, struct key *key, __u8 reason)
{
    struct confine_event *e =
        event_reserve(job, cgid, CONFINE_OP_KEY, reason, CONFINE_EVENT_SIZE(sizeof(struct confine_key)));

    if (e) {
        e->target_kind = CONFINE_TARGET_KEY;
        e->target.key.serial = BPF_CORE_READ(key, serial);
        e->target.key.pad = 0;
        bpf_probe_read_kernel_str(e->target.key.description, sizeof(e->target.key.description),
                                  BPF_CORE_READ(key, description));
        bpf_ringbuf_submit(e, 0);
    }
}

static __always_inline bool has_prefix(const char *s, const char *prefix, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] != prefix[i])
            return false;
    return true;
}

/* Keys the job makes are its own, except the keyrings the kernel keeps for
 * the account across jobs: the user and user-session keyrings (made on a
 * job's first look-up of @u or @us) and the persistent keyring. Those the
 * job never gets, whoever made them. */
SEC("lsm/key_alloc")
int BPF_PROG(confine_key_alloc, struct key *key, const struct cred *cred, unsigned long flags)
{
    static const char persistent[] = "_persistent.";
    char desc[sizeof(persistent)] = {};
    __u64 addr = (__u64)key, cgid;
    struct confine_job *job;

    job = current_job(&cgid);
    bpf_probe_read_kernel_str(desc, sizeof(desc), BPF_CORE_READ(key, description));
    if (!job || (flags & KEY_ALLOC_UID_KEYRING) || has_prefix(desc, persistent, sizeof(persistent) - 1)) {
        bpf_map_delete_elem(&job_keys, &addr);
        return 0;
    }
    if (bpf_map_update_elem(&job_keys, &addr, &cgid, BPF_ANY) == 0) {
        __u64 n = __sync_fetch_and_add(&job->keys, 1);

        if (n < CONFINE_JOB_KEYS)
            job->key[n & (CONFINE_JOB_KEYS - 1)] = addr;
        return 0;
    }
    /* No room to remember it: the job could never use it. */
    report_key(job, cgid, key, CONFINE_REASON_MAP_FULL);
    return -ENOMEM;
}

/* The first argument is a key_ref_t, a pointer to a struct the kernel
 * only declares: the verifier refuses to read it from the context
 * ("arg0 type FWD is not a struct"), so it is fetched as a number. */
SEC("lsm/key_permission")
int confine_key_permission(__u64 *ctx)
{
    struct confine_job *job;
    __u64 cgid, *owner, ref = 0;

    job = current_job(&cgid);
    if (!job)
        return 0;
    /* A key_ref_t is the key's address with bit 0 saying "possessed". */
    bpf_get_func_arg(ctx, 0, &ref);
    ref &= ~1ULL;
    owner = bpf_map_lookup_elem(&job_keys, &ref);
    if (owner && *owner == cgid)
        return 0;
    report_key(job, cgid, (struct key *)ref, CONFINE_REASON_POLICY);
    return verdict(job) == ALLOW ? 0 : -EACCES;
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
    return as_errno(refuse(job, cgid, CONFINE_OP_BPF));
}

/* ---- file owners (SIGIO, SIGURG) ----------------------------------------- */

#define F_SETOWN    8
#define F_SETOWN_EX 15
#define FIOSETOWN   0x8901
#define SIOCSPGRP   0x8902
#define SIGIO       29

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
    ret = as_errno(verdict(job));
    e = event_reserve(job, cgid, CONFINE_OP_SIGNAL,
                      cmd == F_SETOWN ? CONFINE_REASON_POLICY : CONFINE_REASON_OWNER_IN_USER_MEMORY,
                      CONFINE_EVENT_SIZE(sizeof(struct confine_task)));
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

/* ---- terminals ------------------------------------------------------------- */

/* A job is a session of its own with no controlling terminal, which keeps
 * TIOCSTI (typing into a terminal's input) out of reach, unless it makes a
 * terminal it inherited its controlling one: a pty that no session owns,
 * passed down as stdin, would do. So a job may take as controlling
 * terminal only one of its own (a pty opened in its own mount namespace,
 * whose devpts is private), and never types into one, nor uses TIOCLINUX
 * (selection paste on a console). Nor may it stop (TCXONC: tcflow()) the
 * output of a terminal it shares with confine, whose writes there would
 * wait. From include/uapi/asm-generic/ioctls.h. */
#define TCXONC    0x540A
#define TIOCSCTTY 0x540E
#define TIOCSTI   0x5412
#define TIOCLINUX 0x541C

static __always_inline bool own_terminal(struct file *file)
{
    struct task_struct *task = bpf_get_current_task_btf();
    struct vfsmount *mnt = BPF_CORE_READ(file, f_path.mnt);
    struct mount *m = (void *)mnt - bpf_core_field_offset(struct mount, mnt);

    return BPF_CORE_READ(m, mnt_ns) == BPF_CORE_READ(task, nsproxy, mnt_ns);
}

static __always_inline int check_tty(struct file *file, unsigned int cmd)
{
    struct confine_job *job;
    __u64 cgid;

    if (cmd != TIOCSCTTY && cmd != TCXONC && cmd != TIOCSTI && cmd != TIOCLINUX)
        return 0;
    job = current_job(&cgid);
    if (!job || ((cmd == TIOCSCTTY || cmd == TCXONC) && own_terminal(file)))
        return 0;
    return as_errno(refuse(job, cgid, CONFINE_OP_TTY));
}

SEC("lsm/file_fcntl")
int BPF_PROG(confine_file_fcntl, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_owner(cmd, arg);
}

SEC("lsm/file_ioctl")
int BPF_PROG(confine_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_owner(cmd, arg) ?: check_tty(file, cmd);
}

SEC("lsm/file_ioctl_compat")
int BPF_PROG(confine_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_owner(cmd, arg) ?: check_tty(file, cmd);
}
