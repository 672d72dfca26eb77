/* Turning a (mount, dentry) pair the kernel resolved into the absolute path
 * the job's rules talk about. Used by every hook that decides on a file.
 *
 * The walk goes dentry -> d_parent up to the task's root, crossing mounts
 * through struct mount (mnt_mountpoint, mnt_parent), and prepends each name
 * into a per-CPU scratch buffer. It fails closed: a path deeper than
 * CONFINE_PATH_DEPTH components, longer than PATH_MAX, or not under the
 * task's root comes back with a reason instead of a path.
 */
#ifndef CONFINE_BPF_PATH_H
#define CONFINE_BPF_PATH_H

#include "bpf/common.bpf.h"
#include "bpf/fs.h"

/* From include/linux/mount.h and fs/mount.h, unchanged from 6.1 to 7.1. */
#define MNT_INTERNAL    0x4000
#define MNT_NS_INTERNAL ((void *)-22L) /* ERR_PTR(-EINVAL) */
#define NAME_MAX        255
/* From include/linux/fs.h, unchanged from 6.1 to 7.2: IS_CASEFOLDED. */
#define S_CASEFOLD (1 << 15)
/* From include/uapi/linux/stat.h. */
#define S_IFMT  00170000
#define S_IFCHR 0020000
#define S_IFDIR 0040000

/* Bounds a variable for the verifier where clang would otherwise fold the
 * check away. */
#define bound(var) asm volatile("" : "+r"(var))

/* The path is built back to front in buf[off, CONFINE_PATH_MAX), NUL at
 * buf[CONFINE_PATH_MAX]; the second half is slack so that masked copies stay
 * in bounds for the verifier. `key` is room for the rule lookup. */
struct scratch {
    __u32 busy;
    __u32 pad;
    char buf[2 * CONFINE_PATH_MAX];
    struct confine_fs_key key;
};

/* Several slots per CPU: LSM programs run with migration, not preemption,
 * disabled, so another task may start a walk on this CPU before ours ends.
 * A walk claims a free slot; none free means deny. */
#define SCRATCH_SLOTS 4
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, SCRATCH_SLOTS);
    __type(key, __u32);
    __type(value, struct scratch);
} scratch SEC(".maps");

static __always_inline struct scratch *scratch_claim(void)
{
    struct scratch *s;

#pragma unroll
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        __u32 slot = i;

        s = bpf_map_lookup_elem(&scratch, &slot);
        if (s && !__sync_lock_test_and_set(&s->busy, 1))
            return s;
    }
    return NULL;
}

static __always_inline void scratch_release(struct scratch *s)
{
    /* BPF has no store-release; the claim's xchg orders the next user. */
    asm volatile("" ::: "memory");
    *(volatile __u32 *)&s->busy = 0;
}

/* Mounts only the kernel makes (kern_mount): pipes, sockets, memfds, anon
 * inodes. */
static __always_inline bool kernel_mount(struct vfsmount *mnt)
{
    return BPF_CORE_READ(mnt, mnt_flags) & MNT_INTERNAL;
}

/* Mounts no path leads to: kernel mounts, and the private clones overlayfs
 * opens its layers through (clone_private_mount), whose opens the kernel
 * makes on behalf of an outer open that was already decided on the
 * overlay's own path. */
static __always_inline bool internal_mount(struct vfsmount *mnt)
{
    struct mount *m = (void *)mnt - bpf_core_field_offset(struct mount, mnt);

    return kernel_mount(mnt) || BPF_CORE_READ(m, mnt_ns) == MNT_NS_INTERNAL;
}

/* Overlayfs opens, copies up and sets attributes of its layers' files in
 * the job's context but with the mounter's credentials swapped in
 * (override_creds); those calls are the kernel's, decided already on the
 * overlay's own path. A job can't make its fsuid differ between its real
 * and effective credentials itself: setfsuid changes both. */
static __always_inline bool kernel_override(struct task_struct *task)
{
    /* task: a BTF pointer (bpf_get_current_task_btf), read directly. */
    return task->cred->fsuid.val != task->real_cred->fsuid.val;
}

/* ---- the walk ------------------------------------------------------------ */

/* Always 0, but a writable global, so the verifier can't know it: state a
 * bpf_loop callback carries from one iteration to the next starts from it
 * (resolve, sb_mounts_in; docs/design.md "Kernel facts"). */
volatile __u32 opaque_zero;

enum step_status { STEP_MORE = 0, STEP_DONE, STEP_TOO_LONG, STEP_OUTSIDE_ROOT };

/* walk.ci_end where the topmost case-folding directory is the path itself
 * (its entries' names fold, not its own), and where no directory folds. */
#define CI_TARGET CONFINE_PATH_MAX
#define CI_NONE   (CONFINE_PATH_MAX + 1)

struct walk {
    struct dentry *dentry;   /* next component to prepend */
    struct mount *mnt;       /* the mount dentry is on */
    struct dentry *mnt_root; /* and its root */
    struct dentry *root_dentry;
    struct scratch *s;
    int off;
    int status;
    __u32 name_len; /* the path's last component's */
    __u8 folding;   /* enum folding: of the mount's filesystem */
    int ci_end;     /* where the first name below the topmost case-folding directory begins (CI_*) */
};

/* Which directories of a filesystem may find an entry by a name other
 * than its own bytes: the directories marked S_CASEFOLD, on a filesystem
 * with an encoding (ext4, f2fs and, since 6.13, tmpfs with casefold);
 * every directory, where the filesystem compares names its own way
 * (d_compare in its default dentry operations: vfat, exfat, hfsplus, cifs
 * with nocase, ntfs3 with nocase, jfs for OS/2; vfat also finds `.git` as
 * `GIT~1`, and `config.` as `config`). XFS made with ascii-ci folds in its
 * lookup alone, which no field shows: a start refuses rules below such a
 * mount (loader/unseen_folding.cpp). */
enum folding { FOLD_NONE, FOLD_MARKED_DIRS, FOLD_EVERY_DIR };

/* 7.2 calls s_d_op __s_d_op: renamed by "new helper: set_default_d_op()"
 * (Al Viro, 2025), so that filesystems set it through that helper. */
struct super_block___d_op_renamed {
    const struct dentry_operations *__s_d_op;
} __attribute__((preserve_access_index));

static __always_inline __u8 folding_of(struct super_block *sb)
{
    struct super_block___d_op_renamed *renamed = (void *)sb;
    const struct dentry_operations *ops;

    /* Without CONFIG_UNICODE neither the field nor S_CASEFOLD exist. An
     * encoding's filesystem has d_compare too, deciding by the directory. */
    if (bpf_core_field_exists(struct super_block, s_encoding) && BPF_CORE_READ(sb, s_encoding))
        return FOLD_MARKED_DIRS;
    if (bpf_core_field_exists(renamed->__s_d_op))
        ops = BPF_CORE_READ(renamed, __s_d_op);
    else
        ops = BPF_CORE_READ(sb, s_d_op);
    return ops && BPF_CORE_READ(ops, d_compare) ? FOLD_EVERY_DIR : FOLD_NONE;
}

/* Notes that names below `d`, a directory of the walk, fold (folding_of):
 * the name prepended last begins at w->off. Walking up, the topmost such
 * directory is noted last: where every directory folds, the mount's root. */
static __always_inline void note_casefold(struct walk *w, struct dentry *d)
{
    if (w->folding == FOLD_EVERY_DIR ||
        (w->folding == FOLD_MARKED_DIRS && (BPF_CORE_READ(d, d_inode, i_flags) & S_CASEFOLD)))
        w->ci_end = w->off;
}

/* A dentry's parent and name. Every bpf_probe_read_kernel is a helper call,
 * and the walk makes them per component: d_parent and d_name are neighbours
 * in struct dentry (6.1 to 7.2), so one read fetches all three. */
static __always_inline void dentry_up(struct dentry *d, struct dentry **parent, const unsigned char **name,
                                      __u32 *len)
{
    struct {
        struct dentry *parent;
        struct qstr name;
    } up;

    if (bpf_core_field_offset(struct dentry, d_name) !=
        bpf_core_field_offset(struct dentry, d_parent) + sizeof(up.parent)) {
        *parent = BPF_CORE_READ(d, d_parent);
        *name = BPF_CORE_READ(d, d_name.name);
        *len = BPF_CORE_READ(d, d_name.len);
        return;
    }
    bpf_probe_read_kernel(&up, sizeof(up), (void *)d + bpf_core_field_offset(struct dentry, d_parent));
    *parent = up.parent;
    *name = up.name.name;
    *len = up.name.len;
}

static long walk_step(__u32 i, void *arg)
{
    struct walk *w = arg;
    struct dentry *d = w->dentry, *parent;
    struct mount *m = w->mnt, *up;
    const unsigned char *name;
    __u32 len;
    int off;

    /* The task's root directory ends the walk through whichever mount
     * reaches it: a job runs in a copy of its starter's mount namespace,
     * and a unix socket bound out there, or an fd opened there, carries
     * the starter's mount of that same root. */
    note_casefold(w, d);
    if (d == w->root_dentry) {
        w->status = STEP_DONE;
        return 1;
    }
    if (d == w->mnt_root) {
        up = BPF_CORE_READ(m, mnt_parent);
        if (up == m) {
            /* Top of a mount tree that never reached the task's root: a
             * detached mount, or a namespace with another root. */
            w->status = STEP_OUTSIDE_ROOT;
            return 1;
        }
        w->dentry = BPF_CORE_READ(m, mnt_mountpoint);
        w->mnt = up;
        w->mnt_root = BPF_CORE_READ(up, mnt.mnt_root);
        w->folding = folding_of(BPF_CORE_READ(up, mnt.mnt_sb));
        return 0;
    }
    dentry_up(d, &parent, &name, &len);
    if (parent == d) {
        w->status = STEP_OUTSIDE_ROOT;
        return 1;
    }
    off = w->off - (int)len - 1;
    /* Keep off >= 1 so the finished path plus its NUL fits CONFINE_PATH_MAX.
     * One branch for both tests: 6.1's verifier, which doesn't model a
     * bpf_loop callback's later iterations, found `off < 1` alone never
     * true and removed it (its xlated code shows it; the walk then allowed
     * any length). An unknown `len` keeps the branch alive. */
    if (len > NAME_MAX || off < 1) {
        w->status = STEP_TOO_LONG;
        return 1;
    }
    if (w->off == CONFINE_PATH_MAX)
        w->name_len = len;
    w->s->buf[off & (CONFINE_PATH_MAX - 1)] = '/';
    bpf_probe_read_kernel(&w->s->buf[(off + 1) & (CONFINE_PATH_MAX - 1)], len & NAME_MAX, name);
    w->off = off;
    w->dentry = parent;
    return 0;
}

/* A resolved path: s->buf[off, CONFINE_PATH_MAX), or a fail-closed reason. */
struct resolved {
    struct scratch *s;
    __u32 off;
    __u32 name_len; /* bytes of the last component; 0 for "/" */
    __u32 steps;    /* the walk's iterations: components, mount crossings, the root */
    __u32 ci_end;   /* where the names that fold case begin, or CI_TARGET, CI_NONE (walk.ci_end) */
    __u8 reason;    /* enum confine_reason; POLICY means the path is complete */
};

/* Walks (dentry, mnt) into a claimed scratch slot. Returns false if no slot
 * was free; otherwise the caller must scratch_release(r->s). */
static __always_inline bool resolve(struct dentry *dentry, struct vfsmount *mnt, struct resolved *r)
{
    struct task_struct *task = bpf_get_current_task_btf();
    struct walk w = {};
    struct scratch *s = scratch_claim();

    if (!s)
        return false;
    w.dentry = dentry;
    w.mnt = (void *)mnt - bpf_core_field_offset(struct mount, mnt);
    w.mnt_root = BPF_CORE_READ(mnt, mnt_root);
    w.root_dentry = BPF_CORE_READ(task->fs, root.dentry);
    w.s = s;
    w.off = CONFINE_PATH_MAX;
    w.folding = folding_of(BPF_CORE_READ(mnt, mnt_sb));
    /* 6.1's verifier models one iteration of the loop, in which ci_end can
     * only become CI_TARGET (the target itself is the first name): from a
     * constant start it would find the case check after the loop dead and
     * drop it. */
    w.ci_end = CI_NONE + opaque_zero;
    s->buf[CONFINE_PATH_MAX] = '\0';
    r->steps = bpf_loop(CONFINE_PATH_DEPTH, walk_step, &w, 0);

    if (w.off == CONFINE_PATH_MAX) /* the root itself */
        s->buf[--w.off] = '/';
    r->s = s;
    r->off = w.off & (CONFINE_PATH_MAX - 1);
    r->name_len = w.name_len;
    r->ci_end = w.ci_end;
    switch (w.status) {
    case STEP_DONE:
        r->reason = CONFINE_REASON_POLICY;
        break;
    case STEP_MORE: /* the loop ran out of iterations */
        r->reason = CONFINE_REASON_PATH_TOO_DEEP;
        break;
    case STEP_TOO_LONG:
        r->reason = CONFINE_REASON_PATH_TOO_LONG;
        break;
    default:
        r->reason = CONFINE_REASON_OUTSIDE_ROOT;
        break;
    }
    return true;
}

static __always_inline __u32 resolved_len(const struct resolved *r)
{
    return CONFINE_PATH_MAX - r->off;
}

/* Reports the resolved path R as the target of a denial, in a record just
 * as long as the header and the path: bpf_ringbuf_reserve() takes only a
 * constant size, its dynptr form (5.19) any. The path goes without its NUL
 * (the reader zero-fills what a record lacks), at most CONFINE_PATH_MAX - 1
 * bytes of it. */
static __always_inline void report_resolved(struct confine_job *job, __u64 cgid, __u16 op, __u8 reason,
                                            const struct resolved *r, __u8 kind)
{
    void *ring = bpf_map_lookup_elem(&rings, &job->ring);
    /* off is in [0, CONFINE_PATH_MAX]; at CONFINE_PATH_MAX the path is
     * empty and the mask's wrap to 0 copies nothing. The masks show the
     * verifier that the copy stays inside buf. */
    __u32 off = r->off & (CONFINE_PATH_MAX - 1), n = resolved_len(r);
    struct confine_event *e;
    struct bpf_dynptr d;

    if (!ring)
        return;
    if (n > CONFINE_PATH_MAX - 1)
        n = CONFINE_PATH_MAX - 1;
    n &= CONFINE_PATH_MAX - 1;
    if (bpf_ringbuf_reserve_dynptr(ring, CONFINE_EVENT_HEADER + n, 0, &d)) {
        __sync_fetch_and_add(&job->lost, 1);
        bpf_ringbuf_discard_dynptr(&d, 0); /* required even when reserving failed */
        return;
    }
    e = bpf_dynptr_data(&d, 0, CONFINE_EVENT_HEADER);
    if (!e) {
        bpf_ringbuf_discard_dynptr(&d, 0);
        return;
    }
    event_fill(e, job, cgid, op, reason);
    e->target_kind = kind;
    bpf_dynptr_write(&d, CONFINE_EVENT_HEADER, &r->s->buf[off], n, 0);
    bpf_ringbuf_submit_dynptr(&d, 0);
}

#endif
