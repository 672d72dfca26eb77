/* The mounts of one filesystem: hooks that get a dentry but no mount
 * (inode_setattr, the xattr and ACL hooks) decide through each mount of the
 * dentry's superblock that the task's namespace has. The kernel changed how
 * a superblock lists its mounts after 6.12 (see sb_first_mount). */
#ifndef CONFINE_BPF_SB_MOUNTS_H
#define CONFINE_BPF_SB_MOUNTS_H

#include "bpf/path.bpf.h"

#define MAX_SB_MOUNTS 4    /* mounts of one filesystem we decide through */
#define MAX_SB_LIST   4096 /* mounts of one filesystem, all namespaces, we look at */

/* The mounts of a superblock: a list_head through mount.mnt_instance up to
 * 6.12; later kernels (seen in 7.2) chain them from a struct mount *
 * s_mounts through mount.mnt_next_for_sb. */
struct super_block___mount_chain {
    struct mount *s_mounts;
} __attribute__((preserve_access_index));
struct mount___mount_chain {
    struct mount *mnt_next_for_sb;
} __attribute__((preserve_access_index));

static __always_inline bool mount_chain(void)
{
    return bpf_core_field_exists(struct mount___mount_chain, mnt_next_for_sb);
}

static __always_inline struct mount *sb_first_mount(struct super_block *sb)
{
    struct list_head *head, *next;

    if (mount_chain())
        return BPF_CORE_READ((struct super_block___mount_chain *)sb, s_mounts);
    head = (void *)sb + bpf_core_field_offset(struct super_block, s_mounts);
    next = BPF_CORE_READ(sb, s_mounts.next);
    return next == head ? NULL : (void *)next - bpf_core_field_offset(struct mount, mnt_instance);
}

static __always_inline struct mount *sb_next_mount(struct super_block *sb, struct mount *m)
{
    struct list_head *head, *next;

    if (mount_chain())
        return BPF_CORE_READ((struct mount___mount_chain *)m, mnt_next_for_sb);
    head = (void *)sb + bpf_core_field_offset(struct super_block, s_mounts);
    next = BPF_CORE_READ(m, mnt_instance.next);
    return next == head ? NULL : (void *)next - bpf_core_field_offset(struct mount, mnt_instance);
}

/* Collects the mounts of a superblock that are in one mount namespace. */
struct sb_walk {
    struct super_block *sb;
    struct mount *m; /* next to look at; NULL when the list is done */
    struct mnt_namespace *ns;
    struct vfsmount *found[MAX_SB_MOUNTS];
    __u32 n;
    bool overflow;
};

static long sb_step(__u32 i, void *arg)
{
    struct sb_walk *w = arg;
    struct mount *m = w->m; /* a local: CO-RE reads can't start in our struct */
    __u32 n;

    if (!m)
        return 1;
    if (BPF_CORE_READ(m, mnt_ns) == w->ns) {
        n = w->n;
        if (n >= MAX_SB_MOUNTS) {
            w->overflow = true;
            return 1;
        }
        /* The mask stays whatever the check above becomes (clang would
         * drop it as implied). */
        barrier_var(n);
        w->found[n & (MAX_SB_MOUNTS - 1)] = (void *)m + bpf_core_field_offset(struct mount, mnt);
        w->n = n + 1;
    }
    w->m = sb_next_mount(w->sb, m);
    return 0;
}

/* Collects into w->found the mounts of `sb` in namespace `ns`. False when
 * they can't all be known: more of them than MAX_SB_MOUNTS, or a list longer
 * than MAX_SB_LIST (the caller fails closed).
 *
 * 6.1's verifier checks a bpf_loop callback once, from the caller's state,
 * and removes a branch it never saw taken. From a count known to be 0 it
 * never saw the bound reached and removed it: the fifth mount was stored
 * past `found`. A count it can't know (opaque_zero) covers every
 * iteration's. */
static __always_inline bool sb_mounts_in(struct super_block *sb, struct mnt_namespace *ns, struct sb_walk *w)
{
    w->sb = sb;
    w->ns = ns;
    w->m = sb_first_mount(sb);
    w->n = opaque_zero;
    bpf_loop(MAX_SB_LIST, sb_step, w, 0);
    return !w->overflow && !w->m;
}

#endif
