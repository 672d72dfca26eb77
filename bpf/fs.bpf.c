/* Filesystem access control.
 *
 * Hooks, lsm_cgroup (attached once to the build's parent of the jobs' cgroups,
 * so they run for every job's processes; hot for each of them):
 *   file_open    - every open of a file: for read (open_read), for write or
 *                  with O_TRUNC (open_write), and by execve (exec), but
 *                  /dev/null, /dev/zero and /dev/full always open. This
 *                  includes re-opens through /proc/self/fd/N and
 *                  /proc/self/root, opens issued by io_uring, and O_PATH fds
 *                  turned into real ones: the kernel has resolved the path to
 *                  a (mount, dentry) pair by now, which is what we decide on.
 *   path_mknod   - create: open(O_CREAT) of a new file, mknod, mkfifo, and
 *                  binding a unix socket to a path.
 *
 * Hooks, global lsm (rare operations; a task outside any job pays one hash
 * lookup, see docs/design.md "The hook budget"):
 *   path_mkdir, path_rmdir, path_unlink, path_symlink - the new or removed
 *                  entry must be writable.
 *   path_rename  - both ends writable (RENAME_EXCHANGE swaps two existing
 *                  entries, each needs it anyway).
 *   path_link    - the new name must be writable, and so must the source:
 *                  linking a file the job can't write into its workdir would
 *                  give it a second, writable-tree path to that file.
 *   path_truncate, path_chmod, path_chown - the file must be writable.
 *   file_ioctl, file_ioctl_compat (inode flags, project ids, fs-verity,
 *                  encryption policies), inode_file_setattr (6.17+: the
 *                  same by path) - the file must be writable.
 *   mmap_file, file_mprotect - under an exec list, a file mapped executable
 *                  must be on it, like a program (the loader, libraries).
 *   inode_setattr (times only: utimes, touch), inode_setxattr,
 *   inode_removexattr, inode_set_acl, inode_remove_acl (POSIX ACLs, 6.2+)
 *                - the file must be writable. These hooks get a dentry
 *                  but no mount: the file's path is computed through each
 *                  mount of its filesystem that the task can reach, and every
 *                  one must allow the write.
 *
 * A decision resolves that pair to an absolute path (path.bpf.h) and looks
 * it up in the job's rules: longest prefix wins (see fs.h). Files on
 * kernel-internal mounts (pipes, sockets, memfds re-opened through
 * /proc/self/fd; overlayfs layers) pass: the job already holds them, or the
 * outer open was decided. So do opens the kernel makes with another user's
 * credentials swapped in (overlayfs re-opening the real file on 6.1).
 */
#include "bpf/path.bpf.h"

/* From include/linux/fs.h, unchanged from 6.1 to 7.1 (#defines are not in
 * BTF). do_open_execat() marks an exec open with __FMODE_EXEC in f_flags,
 * not in f_mode. */
#define FMODE_WRITE   0x2
#define __FMODE_EXEC  0x20
#define O_TRUNC       01000
#define __O_TMPFILE   020000000
#define FMODE_CREATED 0x100000 /* 1 << 20, the same from 6.1 to 7.1 */
#define S_IFMT        00170000
#define S_IFCHR       0020000
#define S_IFDIR       0040000

/* key: the job's cgroup id then the path with a trailing '/';
 * value: CONFINE_FS_* access bits granted at and below that path. */
struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, CONFINE_MAX_FS_RULES);
    __type(key, struct confine_fs_key);
    __type(value, __u32);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} fs_rules SEC(".maps");

/* The access bits the job's rules grant a resolved path, plus
 * CONFINE_FS_NOT_GUARD unless the path is a guard entry itself, and
 * CONFINE_FS_LIST where it may be read or is a listable entry itself. */
static __always_inline __u32 granted(const struct resolved *r, __u64 cgid)
{
    struct confine_fs_key *k = &r->s->key;
    __u32 plen = resolved_len(r), klen = plen, *access, bits;
    bool exact;

    /* Key: "/" for the root, else the path and a '/', cut to the key size
     * (no rule is longer, so the longest match is unchanged). */
    if (plen > 1) {
        bound(klen);
        if (klen > CONFINE_RULE_PATH_MAX)
            klen = CONFINE_RULE_PATH_MAX;
        bpf_probe_read_kernel(k->path, klen, &r->s->buf[r->off]);
        if (plen < CONFINE_RULE_PATH_MAX) {
            klen = plen;
            bound(klen);
            if (klen >= CONFINE_RULE_PATH_MAX)
                klen = CONFINE_RULE_PATH_MAX - 1;
            k->path[klen++] = '/';
        }
    } else {
        k->path[0] = '/';
    }
    k->prefixlen = confine_fs_prefixlen(klen);
    k->cgroup_id_lo = (__u32)cgid;
    k->cgroup_id_hi = cgid >> 32;
    access = bpf_map_lookup_elem(&fs_rules, k);
    if (!access)
        return CONFINE_FS_NOT_GUARD;
    exact = confine_fs_value_path_bytes(*access) == klen;
    bits = *access & (CONFINE_FS_READ | CONFINE_FS_WRITE | CONFINE_FS_EXEC);
    if ((bits & CONFINE_FS_READ) || (exact && (*access & CONFINE_FS_LIST)))
        bits |= CONFINE_FS_LIST;
    if (!(exact && (*access & CONFINE_FS_GUARD)))
        bits |= CONFINE_FS_NOT_GUARD;
    return bits;
}

/* Decides an access needing `need` (CONFINE_FS_*) to the file at
 * (dentry, mnt), reporting a refusal as `op`. Sets *bits to what the rules
 * grant the path, or 0 if the walk failed closed. */
static __always_inline int decide_path(struct confine_job *job, __u64 cgid, struct dentry *dentry,
                                       struct vfsmount *mnt, __u16 op, __u32 need, __u32 *bits)
{
    struct resolved r;
    int ret;

    *bits = 0;
    if (!resolve(dentry, mnt, &r))
        return refuse(job, cgid, op);
    if (r.reason == CONFINE_REASON_POLICY) {
        *bits = granted(&r, cgid);
        if ((*bits & need) == need) {
            scratch_release(r.s);
            return ALLOW;
        }
    }
    ret = verdict(job);
    report_resolved(job, cgid, op, r.reason, &r, CONFINE_TARGET_PATH);
    scratch_release(r.s);
    return ret;
}

static __always_inline int check_path(struct confine_job *job, __u64 cgid, struct dentry *dentry,
                                      struct vfsmount *mnt, __u16 op, __u32 need)
{
    __u32 bits;

    return decide_path(job, cgid, dentry, mnt, op, need, &bits);
}

/* ---- the decision cache -------------------------------------------------- */

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

    if (inode && ((BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFDIR || BPF_CORE_READ(inode, i_nlink) <= 1))
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

/* ---- lsm_cgroup hooks ---------------------------------------------------- */

#define PROC_SUPER_MAGIC 0x9fa0

static __always_inline bool same(const char *a, const char *b, int n)
{
#pragma unroll
    for (int i = 0; i < 10; i++)
        if (i < n && a[i] != b[i])
            return false;
    return true;
}

/* /proc/PID/{uid_map,gid_map,setgroups}: a job allowed user namespaces must
 * write these to make one usable (the kernel decides whose maps it may
 * write). */
static __always_inline bool id_map_file(struct file *file)
{
    char name[10] = {};

    if (BPF_CORE_READ(file, f_path.dentry, d_sb, s_magic) != PROC_SUPER_MAGIC)
        return false;
    bpf_probe_read_kernel_str(name, sizeof(name), BPF_CORE_READ(file, f_path.dentry, d_name.name));
    return same(name, "uid_map", 8) || same(name, "gid_map", 8) || same(name, "setgroups", 10);
}

/* Whether code from `file` may run: an exec, or (under an exec list) a
 * PROT_EXEC mapping. Kernel-internal files pass, but under an exec list a
 * memfd the job wrote a program into may not run: no path allows it. */
static __always_inline int check_exec(struct confine_job *job, __u64 cgid, struct file *file,
                                      struct vfsmount *mnt, struct dentry *dentry)
{
    if (internal_mount(mnt)) {
        if ((job->flags & CONFINE_JOB_EXEC_LIST) && kernel_mount(mnt))
            return refuse(job, cgid, CONFINE_OP_EXEC);
        return ALLOW;
    }
    if (kernel_override(bpf_get_current_task_btf()))
        return ALLOW;
    if (file)
        return check_file(job, cgid, file, dentry, mnt, CONFINE_OP_EXEC, CONFINE_FS_EXEC);
    return check_path(job, cgid, dentry, mnt, CONFINE_OP_EXEC, CONFINE_FS_EXEC);
}

/* /dev/null, /dev/zero and /dev/full (char 1:3, 1:5, 1:7, wherever their
 * node is) open for read and write under every policy, as the job's own
 * loopback is reachable: writing them changes nothing, and tools need them
 * (`> /dev/null`; git stops without it). MKDEV is (major << 20) | minor. */
static __always_inline bool discard_device(struct inode *inode)
{
    __u32 rdev;

    if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFCHR)
        return false;
    rdev = BPF_CORE_READ(inode, i_rdev);
    return rdev == ((1u << 20) | 3) || rdev == ((1u << 20) | 5) || rdev == ((1u << 20) | 7);
}

SEC("lsm_cgroup/file_open")
int BPF_PROG(confine_file_open, struct file *file)
{
    struct confine_job *job;
    struct vfsmount *mnt;
    struct dentry *dentry;
    __u32 fmode, flags;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return DENY;

    mnt = BPF_CORE_READ(file, f_path.mnt);
    dentry = BPF_CORE_READ(file, f_path.dentry);
    flags = BPF_CORE_READ(file, f_flags);
    if (flags & __FMODE_EXEC)
        return check_exec(job, cgid, file, mnt, dentry);
    if (internal_mount(mnt) || kernel_override(bpf_get_current_task_btf()))
        return ALLOW;
    if ((job->flags & CONFINE_JOB_USERNS) && id_map_file(file))
        return ALLOW;
    if (discard_device(BPF_CORE_READ(file, f_inode)))
        return ALLOW;
    fmode = BPF_CORE_READ(file, f_mode);
    /* This open just created the file, and path_mknod allowed that in this
     * same call (a writable path is readable too). O_TMPFILE files are
     * created without path_mknod, and are decided here. */
    if ((fmode & FMODE_CREATED) && !(flags & __O_TMPFILE))
        return ALLOW;
    /* O_TRUNC truncates even on an O_RDONLY open, after this hook. */
    if ((fmode & FMODE_WRITE) || (flags & O_TRUNC))
        return check_file(job, cgid, file, dentry, mnt, CONFINE_OP_OPEN_WRITE,
                          CONFINE_FS_READ | CONFINE_FS_WRITE);
    /* Reading a directory lists it: its own rule, or a listable entry. */
    if ((BPF_CORE_READ(file, f_inode, i_mode) & S_IFMT) == S_IFDIR)
        return check_file(job, cgid, file, dentry, mnt, CONFINE_OP_OPEN_READ, CONFINE_FS_LIST);
    return check_file(job, cgid, file, dentry, mnt, CONFINE_OP_OPEN_READ, CONFINE_FS_READ);
}

SEC("lsm_cgroup/path_mknod")
int BPF_PROG(confine_path_mknod, const struct path *dir, struct dentry *dentry, umode_t mode,
             unsigned int dev)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return DENY;
    return check_path(job, cgid, dentry, BPF_CORE_READ(dir, mnt), CONFINE_OP_CREATE, CONFINE_FS_WRITE);
}

/* ---- global lsm hooks ---------------------------------------------------- */

/* Global lsm programs return an errno (0: allow) and run for every task:
 * those outside a job (no `jobs` entry for their cgroup) pass at once. */
#define EPERM           1
#define GLOBAL(verdict) ((verdict) == ALLOW ? 0 : -EPERM)

/* The entry `dentry` in directory `dir` must be writable. */
static __always_inline int global_entry(const struct path *dir, struct dentry *dentry, __u16 op)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return 0;
    return GLOBAL(check_path(job, cgid, dentry, BPF_CORE_READ(dir, mnt), op, CONFINE_FS_WRITE));
}

/* The file at `path` must be writable. */
static __always_inline int global_file(const struct path *path, __u16 op)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return 0;
    return GLOBAL(
        check_path(job, cgid, BPF_CORE_READ(path, dentry), BPF_CORE_READ(path, mnt), op, CONFINE_FS_WRITE));
}

SEC("lsm/path_mkdir")
int BPF_PROG(confine_path_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode)
{
    return global_entry(dir, dentry, CONFINE_OP_MKDIR);
}

SEC("lsm/path_rmdir")
int BPF_PROG(confine_path_rmdir, const struct path *dir, struct dentry *dentry)
{
    return global_entry(dir, dentry, CONFINE_OP_RMDIR);
}

SEC("lsm/path_unlink")
int BPF_PROG(confine_path_unlink, const struct path *dir, struct dentry *dentry)
{
    return global_entry(dir, dentry, CONFINE_OP_UNLINK);
}

SEC("lsm/path_symlink")
int BPF_PROG(confine_path_symlink, const struct path *dir, struct dentry *dentry, const char *old_name)
{
    return global_entry(dir, dentry, CONFINE_OP_SYMLINK);
}

/* Moving a directory moves its whole subtree to new paths: neither end may
 * be a guard (an ancestor of a rule that grants less than write), or
 * `mv .git g; echo x > g/hooks/pre-commit; mv g .git` would escape the
 * .git/hooks carve-out. */
SEC("lsm/path_rename")
int BPF_PROG(confine_path_rename, const struct path *old_dir, struct dentry *old_dentry,
             const struct path *new_dir, struct dentry *new_dentry, unsigned int flags)
{
    const __u32 need = CONFINE_FS_WRITE | CONFINE_FS_NOT_GUARD;
    struct confine_job *job;
    __u64 cgid;
    int ret;

    fs_gen_bump(); /* any task's rename: see the decision cache */
    job = current_job(&cgid);
    if (!job)
        return 0;
    ret = GLOBAL(check_path(job, cgid, old_dentry, BPF_CORE_READ(old_dir, mnt), CONFINE_OP_RENAME, need));
    if (ret)
        return ret;
    return GLOBAL(check_path(job, cgid, new_dentry, BPF_CORE_READ(new_dir, mnt), CONFINE_OP_RENAME, need));
}

SEC("lsm/path_link")
int BPF_PROG(confine_path_link, struct dentry *old_dentry, const struct path *new_dir,
             struct dentry *new_dentry)
{
    /* Hard links never cross mounts, so the source is on new_dir's mount. */
    int ret;

    fs_gen_bump(); /* any task's link: see the decision cache */
    ret = global_entry(new_dir, old_dentry, CONFINE_OP_LINK);

    return ret ? ret : global_entry(new_dir, new_dentry, CONFINE_OP_LINK);
}

/* From include/uapi/asm-generic/mman-common.h and include/linux/mm.h. */
#define PROT_EXEC 0x4
#define VM_EXEC   0x4

/* Under an exec list, mapping a file executable runs its code as surely as
 * execve does: without this, `ld.so ./prog` (the loader reads and maps
 * prog itself) would run any readable program. Without an exec list, exec
 * follows read, which the open already decided. */
static __always_inline struct confine_job *exec_list_job(__u64 *cgid)
{
    struct confine_job *job = current_job(cgid);

    return job && (job->flags & CONFINE_JOB_EXEC_LIST) ? job : NULL;
}

SEC("lsm/mmap_file")
int BPF_PROG(confine_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot,
             unsigned long flags)
{
    struct confine_job *job;
    __u64 cgid;

    if (!file || !(prot & PROT_EXEC) || !(job = exec_list_job(&cgid)))
        return 0;
    return GLOBAL(
        check_exec(job, cgid, file, BPF_CORE_READ(file, f_path.mnt), BPF_CORE_READ(file, f_path.dentry)));
}

/* Since 6.8 ("fs: store real path instead of fake path in backing file
 * f_path"; seen on 6.12 and 7.2) overlayfs maps a file through a backing
 * file whose f_path is the layer's, on a private mount no path leads to; the
 * path the job used is kept beside it. 6.1 puts the job's path in f_path. */
struct backing_file___confine {
    struct path user_path;
} __attribute__((preserve_access_index));

/* A mapping made without PROT_EXEC and made executable later. */
SEC("lsm/file_mprotect")
int BPF_PROG(confine_file_mprotect, struct vm_area_struct *vma, unsigned long reqprot, unsigned long prot)
{
    struct file *file = BPF_CORE_READ(vma, vm_file);
    struct confine_job *job;
    struct vfsmount *mnt;
    struct dentry *dentry;
    struct mount *m;
    __u64 cgid;

    if (!file || !(prot & PROT_EXEC) || (BPF_CORE_READ(vma, vm_flags) & VM_EXEC) ||
        !(job = exec_list_job(&cgid)))
        return 0;
    mnt = BPF_CORE_READ(file, f_path.mnt);
    dentry = BPF_CORE_READ(file, f_path.dentry);
    m = (void *)mnt - bpf_core_field_offset(struct mount, mnt);
    if (!kernel_mount(mnt) && BPF_CORE_READ(m, mnt_ns) == MNT_NS_INTERNAL) {
        if (!bpf_core_type_exists(struct backing_file___confine))
            return GLOBAL(refuse(job, cgid, CONFINE_OP_EXEC));
        mnt = BPF_CORE_READ((struct backing_file___confine *)file, user_path.mnt);
        dentry = BPF_CORE_READ((struct backing_file___confine *)file, user_path.dentry);
    }
    return GLOBAL(check_exec(job, cgid, NULL, mnt, dentry));
}

/* Inode flags (chattr: noatime, nodump, sync, casefold...), project ids,
 * fs-verity (a file made read-only for good) and encryption policies are
 * set through an ioctl on any fd the owner holds, a read-only one
 * included: the file must be writable as for chmod. From
 * include/uapi/linux/fs.h, fsverity.h, fscrypt.h (x86-64 encodings). */
#define FS_IOC_SETFLAGS              0x40086602
#define FS_IOC32_SETFLAGS            0x40046602
#define FS_IOC_FSSETXATTR            0x401c5820
#define FS_IOC_ENABLE_VERITY         0x40806685
#define FS_IOC_SET_ENCRYPTION_POLICY 0x800c6613

static __always_inline int check_inode_ioctl(struct file *file, unsigned int cmd)
{
    if (cmd != FS_IOC_SETFLAGS && cmd != FS_IOC32_SETFLAGS && cmd != FS_IOC_FSSETXATTR &&
        cmd != FS_IOC_ENABLE_VERITY && cmd != FS_IOC_SET_ENCRYPTION_POLICY)
        return 0;
    /* Overlayfs asks again for its upper file, on its private mount and
     * with the mounter's credentials (ovl_security_fileattr): the overlay's
     * own file was decided first. */
    if (internal_mount(BPF_CORE_READ(file, f_path.mnt)) || kernel_override(bpf_get_current_task_btf()))
        return 0;
    return global_file(&file->f_path, CONFINE_OP_SETATTR);
}

SEC("lsm/file_ioctl")
int BPF_PROG(confine_fs_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_inode_ioctl(file, cmd);
}

SEC("lsm/file_ioctl_compat")
int BPF_PROG(confine_fs_file_ioctl_compat, struct file *file, unsigned int cmd, unsigned long arg)
{
    return check_inode_ioctl(file, cmd);
}

SEC("lsm/path_truncate")
int BPF_PROG(confine_path_truncate, const struct path *path)
{
    return global_file(path, CONFINE_OP_SETATTR);
}

SEC("lsm/path_chmod")
int BPF_PROG(confine_path_chmod, const struct path *path, umode_t mode)
{
    return global_file(path, CONFINE_OP_SETATTR);
}

SEC("lsm/path_chown")
int BPF_PROG(confine_path_chown, const struct path *path)
{
    return global_file(path, CONFINE_OP_SETATTR);
}

/* ---- dentry-only hooks --------------------------------------------------- */

/* From include/linux/fs.h (unchanged 6.1 to 7.1). */
#define ATTR_MODE     0x1
#define ATTR_UID      0x2
#define ATTR_GID      0x4
#define ATTR_SIZE     0x8
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

/* Collects the mounts of a superblock that are in the task's namespace. */
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

    if (!m)
        return 1;
    if (BPF_CORE_READ(m, mnt_ns) == w->ns) {
        if (w->n >= MAX_SB_MOUNTS) {
            w->overflow = true;
            return 1;
        }
        w->found[w->n & (MAX_SB_MOUNTS - 1)] = (void *)m + bpf_core_field_offset(struct mount, mnt);
        w->n++;
    }
    w->m = sb_next_mount(w->sb, m);
    return 0;
}

/* The file at `dentry` must be writable through every mount of its
 * filesystem in the task's mount namespace that resolves under the task's
 * root. Mounts in other namespaces (systemd services' private ones) don't
 * count; more of ours than we can check: deny. */
static __always_inline int global_dentry(struct dentry *dentry, __u16 op)
{
    struct task_struct *task = bpf_get_current_task_btf();
    struct sb_walk w = {};
    struct confine_event *e;
    struct confine_job *job;
    struct resolved r;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job || kernel_override(task))
        return 0;
    w.sb = BPF_CORE_READ(dentry, d_sb);
    w.ns = BPF_CORE_READ(task, nsproxy, mnt_ns);
    w.m = sb_first_mount(w.sb);
    bpf_loop(MAX_SB_LIST, sb_step, &w, 0);
    if (w.overflow || w.m) {
        e = event_reserve(job, cgid, op, CONFINE_REASON_TOO_MANY_MOUNTS, CONFINE_EVENT_HEADER);
        if (e)
            bpf_ringbuf_submit(e, 0);
        return GLOBAL(verdict(job));
    }
    for (__u32 i = 0; i < w.n && i < MAX_SB_MOUNTS; i++) {
        if (!resolve(dentry, w.found[i], &r))
            return GLOBAL(refuse(job, cgid, op));
        /* A mount under another root (a layer the job can't name) grants
         * and denies nothing; a reachable one must allow the write. */
        if (r.reason == CONFINE_REASON_OUTSIDE_ROOT ||
            (r.reason == CONFINE_REASON_POLICY && (granted(&r, cgid) & CONFINE_FS_WRITE))) {
            scratch_release(r.s);
            continue;
        }
        scratch_release(r.s);
        return GLOBAL(check_path(job, cgid, dentry, w.found[i], op, CONFINE_FS_WRITE));
    }
    return 0;
}

/* Mode, owner and size changes were decided by path_chmod, path_chown,
 * path_truncate and file_open; what is left are the times. */
static __always_inline int setattr_times(struct dentry *dentry, struct iattr *attr)
{
    if (BPF_CORE_READ(attr, ia_valid) & (ATTR_MODE | ATTR_UID | ATTR_GID | ATTR_SIZE))
        return 0;
    return global_dentry(dentry, CONFINE_OP_SETATTR);
}

struct mnt_idmap; /* not in 6.1's BTF */

/* Since 6.3 (commit c1632a0f1120, "fs: port ->setattr() to pass mnt_idmap")
 * inode_setattr takes a struct mnt_idmap * first. The loader loads the
 * variant that matches the running kernel: a program whose name ends in
 * _pre_6_3 replaces its namesake on kernels without struct mnt_idmap. */
SEC("lsm/inode_setattr")
int BPF_PROG(confine_inode_setattr, struct mnt_idmap *idmap, struct dentry *dentry, struct iattr *attr)
{
    return setattr_times(dentry, attr);
}

SEC("lsm/inode_setattr")
int BPF_PROG(confine_inode_setattr_pre_6_3, struct dentry *dentry, struct iattr *attr)
{
    return setattr_times(dentry, attr);
}

/* The xattr hooks have the dentry second both before 6.3 (after a struct
 * user_namespace *) and since (after a struct mnt_idmap *). */
SEC("lsm/inode_setxattr")
int BPF_PROG(confine_inode_setxattr, void *idmap, struct dentry *dentry)
{
    return global_dentry(dentry, CONFINE_OP_SETXATTR);
}

SEC("lsm/inode_removexattr")
int BPF_PROG(confine_inode_removexattr, void *idmap, struct dentry *dentry)
{
    return global_dentry(dentry, CONFINE_OP_SETXATTR);
}

/* Since 6.2 (the series with "security: add set acl hook") POSIX ACLs no
 * longer pass setxattr nor inode_setattr: setting or removing
 * system.posix_acl_access or _default comes here. Before 6.2
 * inode_setxattr/inode_removexattr above see them. The loader loads these
 * only where the kernel has the hooks. */
SEC("lsm/inode_set_acl")
int BPF_PROG(confine_inode_set_acl, void *idmap, struct dentry *dentry)
{
    return global_dentry(dentry, CONFINE_OP_SETXATTR);
}

SEC("lsm/inode_remove_acl")
int BPF_PROG(confine_inode_remove_acl, void *idmap, struct dentry *dentry)
{
    return global_dentry(dentry, CONFINE_OP_SETXATTR);
}

/* Since 6.17 file_setattr(2) changes the same inode flags by path, with no
 * open: decided like the ioctls above. */
SEC("lsm/inode_file_setattr")
int BPF_PROG(confine_inode_file_setattr, struct dentry *dentry)
{
    return global_dentry(dentry, CONFINE_OP_SETATTR);
}
