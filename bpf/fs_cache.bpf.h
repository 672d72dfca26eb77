/* The decision cache: an open's decision kept on the inode, so that a hot
 * file's opens skip the path walk (check_file: opens, execs, executable
 * mappings), and a directory's decision on its entries (check_entry:
 * creates, deletes, a link's new name). */
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

#define CACHE_SLOTS 4 /* decisions per inode, one per job (cgroup id % 4) */
/* A directory's slot may also say that every entry in it, or every one
 * not in fs_names, is decided as the directory is and may be written
 * (created, removed): see check_entry. With CACHE_ENTRY_WRITE, its
 * FS_LEVELS say how far down the directories below it inherit that. */
#define CACHE_ENTRY_WRITE   0x200ull
#define CACHE_UNNAMED_WRITE 0x400ull
#define CACHE_BITS          0x7fffull /* CONFINE_FS_* as granted() returns them, CACHE_*_WRITE, FS_LEVELS */
#define CACHE_ACCESS        (CONFINE_FS_READ | CONFINE_FS_WRITE | CONFINE_FS_EXEC | CONFINE_FS_LIST)

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

/* 6.2 (commit a35b9af4ec2c, "bpf: Add a kfunc for generic type cast")
 * added bpf_rdonly_cast, which makes an address a pointer the program may
 * load through: a seqlock's sequence is then one load instead of a helper
 * call of some 80 instructions, twice on every cached decision. The
 * loader sets have_rdonly_cast where the kernel has it; elsewhere the call
 * is dead code, which the verifier drops (libbpf leaves a weak kfunc it
 * can't find as a call to nothing). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
const volatile bool have_rdonly_cast;

/* A seqlock's sequence (its first word); odd while a writer is in, and odd
 * too when the kernel has no such symbol, which disables the cache. */
static __always_inline __u32 seq_of(const void *lock)
{
    __u32 seq = 1;

    if (!lock)
        return seq;
    if (have_rdonly_cast) {
        struct seqcount *s = bpf_rdonly_cast(lock, bpf_core_type_id_kernel(struct seqcount));

        return *(volatile __u32 *)&s->sequence;
    }
    bpf_probe_read_kernel(&seq, sizeof(seq), lock);
    return seq;
}

static __always_inline __u64 mix(__u64 h, __u64 v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

/* What every decision of job `cgid` depends on but the file: the task's
 * root and both trees' change counters; 0 if a rename or mount change is
 * under way. */
static __always_inline __u64 tag_ctx(__u64 cgid)
{
    __u32 rs = seq_of(&rename_lock), ms = seq_of(&mount_lock), zero = 0;
    __u64 *gen = bpf_map_lookup_elem(&fs_gen, &zero), h;
    struct fs_struct *fs = bpf_get_current_task_btf()->fs;

    if (((rs | ms) & 1) || !gen)
        return 0;
    h = mix(cgid, ptr_value(fs->root.dentry));
    h = mix(h, ptr_value(fs->root.mnt));
    h = mix(h, ((__u64)rs << 32) | ms);
    return mix(h, *gen);
}

/* Adds a dentry, as ptr_value gives it, to a tag_ctx. */
static __always_inline __u64 base_in(__u64 ctx, __u64 dentry)
{
    return ctx ? mix(ctx, dentry) : 0;
}

/* What a decision for job `cgid` on a dentry (its ptr_value) depends on,
 * but its mount (tag_for adds that), or 0 if a rename or mount change is
 * under way. */
static __always_inline __u64 cache_base(__u64 cgid, __u64 dentry)
{
    return base_in(tag_ctx(cgid), dentry);
}

/* The tag of a decision through mount `mnt` (its ptr_value; 0: through
 * every mount of the file's filesystem, see global_dentry), or 0 for none. */
static __always_inline __u64 tag_for(__u64 base, __u64 mnt)
{
    return base ? mix(base, mnt) & ~CACHE_BITS : 0;
}

/* What a decision for job `cgid` on (dentry, mnt), both as ptr_value gives
 * them, depends on, or 0 if a rename or mount change is under way. */
static __always_inline __u64 cache_tag(__u64 cgid, __u64 dentry, __u64 mnt)
{
    return tag_for(cache_base(cgid, dentry), mnt);
}

/* Whether a slot's value `v` holds `need` under `tag`. */
static __always_inline bool slot_has(__u64 v, __u64 tag, __u64 need)
{
    return (v & ~CACHE_BITS) == tag && (v & need) == need;
}

/* Whether the job's slot holds `need` under `tag`. */
static __always_inline bool cache_has(struct fs_cache *c, __u64 cgid, __u64 tag, __u64 need)
{
    return slot_has(*(volatile __u64 *)&c->slot[cgid & (CACHE_SLOTS - 1)], tag, need);
}

/* Keeps `bits` in the job's slot; bits already there under the same tag
 * stay (a directory's own decision and its entries' share a tag). Levels
 * come only with CACHE_ENTRY_WRITE, and replace the old: two bounds OR-ed
 * could exceed both. */
static __always_inline void cache_put(struct fs_cache *c, __u64 cgid, __u64 tag, __u64 bits)
{
    __u64 *slot = &c->slot[cgid & (CACHE_SLOTS - 1)], old = *(volatile __u64 *)slot, keep = CACHE_BITS;

    if (bits & CACHE_ENTRY_WRITE)
        keep &= ~(__u64)FS_LEVELS;
    else
        bits &= ~(__u64)FS_LEVELS;
    if ((old & ~CACHE_BITS) == tag)
        bits |= old & keep;
    *(volatile __u64 *)slot = tag | bits;
}

/* The file a task is creating or created last, with the write that
 * allowed it through its mount: path_mknod fills in the dentry, the mount
 * and the tag from before its decision (so a rename while it decided voids
 * it), file_open the rest. Named by its dentry and inode, and the inode's
 * number and generation, so a file that later reuses the freed objects'
 * addresses doesn't match; its tag (cache_tag) voids it after any rename
 * or mount change. */
struct created {
    __u64 dentry; /* ptr_value, as are mnt and inode */
    __u64 mnt;
    __u64 tag;
    __u64 inode; /* 0 until file_open */
    __u64 ino;
    __u32 generation;
};

/* What a task's own recent work lets global_dentry skip (inode_setattr,
 * which gets no mount, would otherwise walk the file's path through every
 * mount of its filesystem, listing them first): `tar x`, `cp -p` and rsync
 * set each new file's times right after writing it. Kept on the task, not
 * the inode: inode storage would cost every create an allocation. */
struct task_fs {
    struct created made;
    /* The last filesystem found to have one mount, `mnt`, in namespace
     * `ns`: true while mount_lock's sequence is `seq`, as every change to a
     * filesystem's mounts, or to the namespace a mount is in, moves it. */
    struct {
        __u64 sb; /* ptr_value, as are ns and mnt */
        __u64 ns;
        __u64 mnt;
        __u32 seq;
    } one;
};
struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct task_fs);
} task_fs SEC(".maps");

/* The tag of job `cgid`'s decision on an open file (a BTF pointer). */
static __always_inline __u64 file_tag(struct file *file, __u64 cgid)
{
    return cache_tag(cgid, ptr_value(file->f_path.dentry), ptr_value(file->f_path.mnt));
}

/* Where job `cgid`'s decision on an open file is kept: `c` its inode's
 * storage (NULL: none yet), `tag` (0: it may not be kept), and `ctx` the
 * tag_ctx the tag was made with. */
struct file_slot {
    struct fs_cache *c;
    __u64 ctx;
    __u64 tag;
};

/* Whether job `cgid`'s cached decision on an open file (`file` a BTF
 * pointer, a hook argument) holds `need`. If not, *fs says where
 * decide_file may keep the decision. */
static __always_inline bool file_cached(struct file *file, __u64 cgid, __u32 need, struct file_slot *fs)
{
    struct inode *inode = file->f_inode;

    fs->c = NULL;
    fs->ctx = fs->tag = 0;
    if (inode && ((inode->i_mode & S_IFMT) == S_IFDIR || inode->i_nlink <= 1)) {
        fs->ctx = tag_ctx(cgid);
        fs->tag = tag_for(base_in(fs->ctx, ptr_value(file->f_path.dentry)), ptr_value(file->f_path.mnt));
    }
    if (fs->tag)
        fs->c = bpf_inode_storage_get(&fs_cache, inode, 0, 0);
    return fs->c && cache_has(fs->c, cgid, fs->tag, need);
}

/* Whether directory `inode` (a BTF pointer) became case-insensitive after
 * its slot was made: then a name no rule has may be one a rule has in
 * another case, and the slot's CACHE_UNNAMED_WRITE serves none of its
 * entries (the walk decides; see case_matters). Only a directory marked
 * S_CASEFOLD can: it was empty when it became so, but may have had that
 * slot already. Where every directory of a filesystem folds names
 * (FOLD_EVERY_DIR), this one did when the walk made the slot: only a rule
 * at the directory with rules below it grants CACHE_UNNAMED_WRITE, and
 * case_matters refuses that walk, the directory being the topmost that
 * folds or below it. So one field of the inode is read here, at every
 * create and unlink, not the superblock's operations (180 instructions a
 * create). */
static __always_inline bool marked_casefold(struct inode *inode)
{
    return inode && (inode->i_flags & S_CASEFOLD);
}

/* What a directory's slot `v` says of its entries', where its
 * CACHE_*_WRITE covers them: the directory's access, which the rule
 * deciding both grants (listing follows read; LIST alone is an exact
 * entry's, and they are none), and no guard (no entry lies there). */
static __always_inline __u64 entry_bits(__u64 v)
{
    __u64 bits = (v & (CONFINE_FS_READ | CONFINE_FS_WRITE | CONFINE_FS_EXEC)) | CONFINE_FS_NOT_GUARD;

    if (v & CONFINE_FS_READ)
        bits |= CONFINE_FS_LIST;
    return bits;
}

/* What `dentry`, a directory's entry at its path through `mnt` (BTF
 * pointers), takes from the directory's slot for job `cgid` under `ctx`
 * (a tag_ctx read before d_parent), or 0: its own decision (entry_bits)
 * where the directory's CACHE_ENTRY_WRITE covers it, or its
 * CACHE_UNNAMED_WRITE and no rule has its name; with CACHE_ENTRY_WRITE
 * and levels left, the same for its own entries, with one level less (a
 * file's slot never serves entries). So a tree a job made, or whose top
 * one walk decided, needs no more walks: `tar x`, `git clone` and
 * `mkdir -p` create in the directories they made, `rm -rf` and
 * `git status` open each. Not through a mount's root or the task's root,
 * whose parents' paths aren't theirs, nor for a name the walk would
 * refuse (longer than NAME_MAX: FUSE allows them). Reading tag_ctx again after
 * d_parent shows that no rename moved the entry in between. */
static __always_inline __u64 inherited(struct confine_job *job, __u64 cgid, __u64 ctx, struct dentry *dentry,
                                       struct vfsmount *mnt)
{
    struct dentry *parent = dentry->d_parent;
    struct fs_cache *pc;
    __u64 v, bits, levels;

    if (!ctx || parent == dentry || dentry->d_name.len > NAME_MAX || dentry == mnt->mnt_root ||
        dentry == bpf_get_current_task_btf()->fs->root.dentry)
        return 0;
    pc = bpf_inode_storage_get(&fs_cache, parent->d_inode, 0, 0);
    if (!pc)
        return 0;
    v = *(volatile __u64 *)&pc->slot[cgid & (CACHE_SLOTS - 1)];
    if ((v & ~CACHE_BITS) != tag_for(base_in(ctx, ptr_value(parent)), ptr_value(mnt)))
        return 0;
    bits = entry_bits(v);
    levels = v & FS_LEVELS;
    if (v & CACHE_ENTRY_WRITE) {
        if (levels)
            bits |= CACHE_ENTRY_WRITE | (levels - (1u << FS_LEVELS_SHIFT));
    } else if (!(v & CACHE_UNNAMED_WRITE) || marked_casefold(parent->d_inode) || named(job, cgid, dentry)) {
        return 0;
    }
    return tag_ctx(cgid) == ctx ? bits : 0;
}

/* Whether an open that its file's slot doesn't settle may take its
 * decision from its directory's (inherited): that needs the file's dentry
 * as a pointer bpf_inode_storage_get takes. Since struct file holds f_path
 * in a union with __f_path (7.2 has it, 6.12 not), the verifier marks
 * what is loaded through it untrusted, and refuses it there. The loader
 * sets this where struct file has no __f_path; elsewhere the call is dead
 * code, which the verifier drops. */
const volatile bool open_inherits;

/* What a walk's bits keep in a slot: the path's own decision and, where
 * it may be written and its names are alike (a walk `below` it, of a
 * directory), its entries'. */
static __always_inline __u64 walk_slot(__u32 bits)
{
    __u64 v = bits & (CACHE_ACCESS | CONFINE_FS_NOT_GUARD);

    if (!(bits & CONFINE_FS_WRITE))
        return v;
    if (bits & CONFINE_FS_ALIKE)
        return v | CACHE_ENTRY_WRITE | (bits & FS_LEVELS);
    if (bits & CONFINE_FS_ALIKE_UNNAMED)
        return v | CACHE_UNNAMED_WRITE;
    return v;
}

/* check_path for an open file that file_cached didn't settle: from its
 * directory's slot (inherited), else by a walk, which for a directory also
 * decides its entries. Kept in the file's slot. The inode's storage is
 * made here, not by file_cached: files that never get this far (those on
 * kernel-internal mounts) cost no allocation. */
static __always_inline int decide_file(struct confine_job *job, __u64 cgid, struct file *file,
                                       struct dentry *dentry, struct vfsmount *mnt, __u16 op, __u32 need,
                                       struct file_slot *fs)
{
    struct inode *inode = file->f_inode;
    bool dir = (inode->i_mode & S_IFMT) == S_IFDIR;
    struct fs_cache *c = fs->c;
    __u64 v;
    __u32 bits;
    int ret;

    if (!c && fs->tag)
        c = bpf_inode_storage_get(&fs_cache, inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (c && open_inherits) {
        v = inherited(job, cgid, fs->ctx, file->f_path.dentry, file->f_path.mnt);
        if ((v & need) == need) {
            cache_put(c, cgid, fs->tag, v);
            return ALLOW;
        }
    }
    ret = decide_path(job, cgid, dentry, mnt, op, need, dir, &bits);
    /* Kept only if nothing moved while we walked. */
    if (c && bits && file_tag(file, cgid) == fs->tag)
        cache_put(c, cgid, fs->tag, walk_slot(bits));
    return ret;
}

/* check_path for an open file, through the cache. */
static __always_inline int check_file(struct confine_job *job, __u64 cgid, struct file *file,
                                      struct dentry *dentry, struct vfsmount *mnt, __u16 op, __u32 need)
{
    struct file_slot fs;

    if (file_cached(file, cgid, need, &fs))
        return ALLOW;
    return decide_file(job, cgid, file, dentry, mnt, op, need, &fs);
}

/* What making an entry other than a directory needs: that it is no guard
 * (an ancestor of a rule that grants less than write), which must stay a
 * directory or be absent. Else `rmdir .git/objects/info; ln -s ../../pub
 * .git/objects/info` would move .git/objects/info/alternates to a writable
 * path. Removing a guard stays allowed: it fails unless empty (git's
 * cleanups try it on the way up), and only a directory can come back. A
 * cached decision (below) is never a guard's: guards are entries, and
 * named. */
#define ENTRY_NEED (CONFINE_FS_WRITE | CONFINE_FS_NOT_GUARD)

/* check_path for creating or removing the entry `dentry` in directory
 * `dir` (both hook arguments), through the directory's cache slot: where
 * every name in the directory, or every unnamed one, is granted alike
 * (CONFINE_FS_ALIKE*), one walk serves all its creates and deletes, not one
 * per file. */
static __always_inline int check_entry(struct confine_job *job, __u64 cgid, const struct path *dir,
                                       struct dentry *dentry, __u16 op, __u32 need, struct created *made)
{
    struct inode *inode = dir->dentry->d_inode;
    __u64 dir_dentry = ptr_value(dir->dentry), dir_mnt = ptr_value(dir->mnt), ctx, tag;
    struct fs_cache *c = NULL;
    struct vfsmount *mnt;
    __u32 bits;
    __u64 v;
    int ret;

    ctx = tag_ctx(cgid);
    tag = tag_for(base_in(ctx, dir_dentry), dir_mnt);
    /* The entry's own tag, from before the decision (path_mknod's record
     * of a create). */
    if (made) {
        made->dentry = ptr_value(dentry);
        made->mnt = dir_mnt;
        made->tag = tag_for(base_in(ctx, made->dentry), dir_mnt);
    }

    if (tag && inode)
        c = bpf_inode_storage_get(&fs_cache, inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    /* A name longer than NAME_MAX (FUSE allows them) is the walk's to
     * refuse. */
    if (c && dentry->d_name.len <= NAME_MAX) {
        if (cache_has(c, cgid, tag, CACHE_ENTRY_WRITE) ||
            (cache_has(c, cgid, tag, CACHE_UNNAMED_WRITE) && !marked_casefold(inode) &&
             !named(job, cgid, dentry)))
            return ALLOW;
        v = inherited(job, cgid, ctx, dir->dentry, dir->mnt);
        if (v & CACHE_ENTRY_WRITE) {
            cache_put(c, cgid, tag, v);
            return ALLOW;
        }
    }
    /* The walk takes the mount as a plain value. */
    bpf_probe_read_kernel(&mnt, sizeof(mnt), &dir->mnt);
    ret = decide_path(job, cgid, dentry, mnt, op, need, false, &bits);
    /* The entry's decision, where its names are alike, is the directory's
     * too, but for the guard bit where only unnamed ones are: the
     * directory is an entry then, perhaps a guard. */
    if (c && (bits & (CONFINE_FS_ALIKE | CONFINE_FS_ALIKE_UNNAMED)) &&
        cache_tag(cgid, dir_dentry, dir_mnt) == tag) {
        v = walk_slot(bits);
        if (!(bits & CONFINE_FS_ALIKE))
            v &= ~(__u64)CONFINE_FS_NOT_GUARD;
        cache_put(c, cgid, tag, v);
    }
    return ret;
}

#endif
