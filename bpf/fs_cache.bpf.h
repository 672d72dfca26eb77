/* The decision cache: an open's decision kept on the inode, so that a hot
 * file's opens skip the path walk. Used by file_open and exec checks. */
#ifndef CONFINE_BPF_FS_CACHE_H
#define CONFINE_BPF_FS_CACHE_H

#include "bpf/fs_rules.bpf.h"

/* A decision depends on the file's path, which is fixed by (dentry, mount)
 * until a rename moves a dentry or the mount tree changes, and on the task's
 * root. So a decision is kept on the inode, tagged with all of those and
 * with the kernel's own change counters for both trees: rename_lock's
 * sequence (every d_move) and mount_lock's (every mount tree change), plus
 * `fs_gen`, which path_rename and path_link bump (64 bits: no wrap-around
 * to an old tag). A file with several hard links has several paths for one
 * inode and is never cached. See docs/design.md, "The decision cache". */
extern const void rename_lock __ksym __weak;
extern const void mount_lock __ksym __weak;

#define CACHE_SLOTS 4       /* decisions per inode, one per job (cgroup id % 4) */
#define CACHE_BITS  0x3full /* CONFINE_FS_READ | WRITE | EXEC | NOT_GUARD | LIST */

struct fs_cache {
    __u64 slot[CACHE_SLOTS]; /* tag | granted bits; 0: empty */
};
struct {
    __uint(type, BPF_MAP_TYPE_INODE_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct fs_cache);
} fs_cache SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} fs_gen SEC(".maps");

static __always_inline void fs_gen_bump(void)
{
    __u32 zero = 0;
    __u64 *gen = bpf_map_lookup_elem(&fs_gen, &zero);

    if (gen)
        __sync_fetch_and_add(gen, 1);
}

/* A seqlock's sequence (its first word); odd while a writer is in, and odd
 * too when the kernel has no such symbol, which disables the cache. */
static __always_inline __u32 seq_of(const void *lock)
{
    __u32 seq = 1;

    if (lock)
        bpf_probe_read_kernel(&seq, sizeof(seq), lock);
    return seq;
}

static __always_inline __u64 mix(__u64 h, __u64 v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

/* What a decision for job `cgid` on (dentry, mnt) depends on, or 0 if a
 * rename or mount change is under way. */
static __always_inline __u64 cache_tag(__u64 cgid, struct dentry *dentry, struct vfsmount *mnt)
{
    struct task_struct *task = bpf_get_current_task_btf();
    __u32 rs = seq_of(&rename_lock), ms = seq_of(&mount_lock), zero = 0;
    __u64 *gen = bpf_map_lookup_elem(&fs_gen, &zero), h;

    if (((rs | ms) & 1) || !gen)
        return 0;
    h = mix(cgid, (__u64)dentry);
    h = mix(h, (__u64)mnt);
    h = mix(h, (__u64)BPF_CORE_READ(task, fs, root.dentry));
    h = mix(h, (__u64)BPF_CORE_READ(task, fs, root.mnt));
    h = mix(h, ((__u64)rs << 32) | ms);
    h = mix(h, *gen);
    return h & ~CACHE_BITS;
}

/* check_path for an open file, through the cache: `file` must be a BTF
 * pointer (a hook argument), for its inode's storage. */
static __always_inline int check_file(struct confine_job *job, __u64 cgid, struct file *file,
                                      struct dentry *dentry, struct vfsmount *mnt, __u16 op, __u32 need)
{
    struct inode *inode = file->f_inode;
    struct fs_cache *c = NULL;
    __u64 tag = 0, v;
    __u32 bits;
    int ret;

    if (inode && ((inode->i_mode & S_IFMT) == S_IFDIR || inode->i_nlink <= 1))
        tag = cache_tag(cgid, dentry, mnt);
    if (tag)
        c = bpf_inode_storage_get(&fs_cache, inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (c) {
        v = *(volatile __u64 *)&c->slot[cgid & (CACHE_SLOTS - 1)];
        if ((v & ~CACHE_BITS) == tag && (v & need) == need)
            return ALLOW;
    }
    ret = decide_path(job, cgid, dentry, mnt, op, need, &bits);
    /* Kept only if nothing moved while we walked. */
    if (c && bits && cache_tag(cgid, dentry, mnt) == tag)
        *(volatile __u64 *)&c->slot[cgid & (CACHE_SLOTS - 1)] = tag | bits;
    return ret;
}

#endif
