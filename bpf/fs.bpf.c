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
 * it up in the job's rules (fs_rules.bpf.h): longest prefix wins. Opens,
 * executable mappings, creates and deletes go through the decision cache
 * (fs_cache.bpf.h). Files on kernel-internal mounts (pipes, sockets, memfds
 * re-opened through /proc/self/fd; overlayfs layers) pass: the job already
 * holds them, or the outer open was decided. So do opens the kernel makes
 * with another user's credentials swapped in (overlayfs re-opening the real
 * file on 6.1).
 */
#include "bpf/fs_cache.bpf.h"
#include "bpf/sb_mounts.bpf.h"

/* From include/linux/fs.h, unchanged from 6.1 to 7.1 (#defines are not in
 * BTF). do_open_execat() marks an exec open with __FMODE_EXEC in f_flags,
 * not in f_mode. */
#define FMODE_WRITE   0x2
#define __FMODE_EXEC  0x20
#define O_TRUNC       01000
#define __O_TMPFILE   020000000
#define FMODE_CREATED 0x100000 /* 1 << 20, the same from 6.1 to 7.1 */

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

    if ((inode->i_mode & S_IFMT) != S_IFCHR)
        return false;
    rdev = inode->i_rdev;
    return rdev == ((1u << 20) | 3) || rdev == ((1u << 20) | 5) || rdev == ((1u << 20) | 7);
}

/* Completes the task's record of the file it is creating (struct created),
 * which path_mknod began with the dentry, mount and tag it allowed. */
static __always_inline void remember_created(struct file *file)
{
    struct task_fs *t = bpf_task_storage_get(&task_fs, bpf_get_current_task_btf(), 0, 0);
    struct inode *inode = file->f_inode;

    if (!t || !inode || t->made.inode || t->made.dentry != ptr_value(file->f_path.dentry))
        return;
    t->made.inode = ptr_value(inode);
    t->made.ino = inode->i_ino;
    t->made.generation = inode->i_generation;
}

SEC("lsm_cgroup/file_open")
int BPF_PROG(confine_file_open, struct file *file)
{
    struct confine_job *job;
    struct file_slot fs;
    struct vfsmount *mnt;
    struct dentry *dentry;
    struct path fp;
    __u32 fmode, flags, need;
    __u64 cgid;
    __u16 op;

    job = current_job(&cgid);
    if (!job)
        return DENY;

    flags = file->f_flags;
    fmode = file->f_mode;
    /* This open just created the file, and path_mknod allowed that in this
     * same call (a writable path is readable too). O_TMPFILE files are
     * created without path_mknod, and are decided below. First, before
     * any read: every create pays for this hook. */
    if ((fmode & FMODE_CREATED) && !(flags & __O_TMPFILE)) {
        remember_created(file);
        return ALLOW;
    }
    if (flags & __FMODE_EXEC) {
        BPF_CORE_READ_INTO(&fp, file, f_path);
        return check_exec(job, cgid, file, fp.mnt, fp.dentry);
    }
    /* O_TRUNC truncates even on an O_RDONLY open, after this hook. Reading
     * a directory lists it: its own rule, or a listable entry. */
    op = CONFINE_OP_OPEN_READ;
    need = CONFINE_FS_READ;
    if ((fmode & FMODE_WRITE) || (flags & O_TRUNC)) {
        op = CONFINE_OP_OPEN_WRITE;
        need = CONFINE_FS_READ | CONFINE_FS_WRITE;
    } else if ((file->f_inode->i_mode & S_IFMT) == S_IFDIR) {
        need = CONFINE_FS_LIST;
    }
    /* The cache first: what it holds was allowed, and a hot open should
     * pay for nothing else. The opens that pass below are never kept. */
    if (file_cached(file, cgid, need, &fs))
        return ALLOW;
    /* The path as plain values, as the walk takes them: one read for
     * both, a helper call (the cache check above needs none). */
    BPF_CORE_READ_INTO(&fp, file, f_path);
    mnt = fp.mnt;
    dentry = fp.dentry;
    if (internal_mount(mnt) || kernel_override(bpf_get_current_task_btf()))
        return ALLOW;
    if ((job->flags & CONFINE_JOB_USERNS) && id_map_file(file))
        return ALLOW;
    if (discard_device(file->f_inode))
        return ALLOW;
    return decide_file(job, cgid, file, dentry, mnt, op, need, &fs);
}

SEC("lsm_cgroup/path_mknod")
int BPF_PROG(confine_path_mknod, const struct path *dir, struct dentry *dentry, umode_t mode,
             unsigned int dev)
{
    struct created made = {};
    struct confine_job *job;
    struct task_fs *t;
    __u64 cgid;
    int ret;

    job = current_job(&cgid);
    if (!job)
        return DENY;
    ret = check_entry(job, cgid, dir, dentry, CONFINE_OP_CREATE, ENTRY_NEED, &made);
    /* Begins the record of a create that file_open completes, for the
     * times `tar x` sets next (struct created). Not in audit mode, where
     * the create may have passed unallowed. */
    if (ret != ALLOW || !made.tag || (job->flags & CONFINE_JOB_AUDIT))
        return ret;
    t = bpf_task_storage_get(&task_fs, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (t)
        t->made = made;
    return ret;
}

/* ---- global lsm hooks ---------------------------------------------------- */

/* Global lsm programs run for every task: those outside a job (no `jobs`
 * entry for their cgroup) pass at once. */

/* The entry `dentry` in directory `dir` must be writable. */
static __always_inline int global_entry(const struct path *dir, struct dentry *dentry, __u16 op, __u32 need)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return 0;
    return as_errno(check_entry(job, cgid, dir, dentry, op, need, NULL));
}

/* The file at `path` must be writable. */
static __always_inline int global_file(const struct path *path, __u16 op)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return 0;
    return as_errno(
        check_path(job, cgid, BPF_CORE_READ(path, dentry), BPF_CORE_READ(path, mnt), op, CONFINE_FS_WRITE));
}

SEC("lsm/path_mkdir")
int BPF_PROG(confine_path_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode)
{
    return global_entry(dir, dentry, CONFINE_OP_MKDIR, CONFINE_FS_WRITE);
}

SEC("lsm/path_rmdir")
int BPF_PROG(confine_path_rmdir, const struct path *dir, struct dentry *dentry)
{
    return global_entry(dir, dentry, CONFINE_OP_RMDIR, CONFINE_FS_WRITE);
}

SEC("lsm/path_unlink")
int BPF_PROG(confine_path_unlink, const struct path *dir, struct dentry *dentry)
{
    return global_entry(dir, dentry, CONFINE_OP_UNLINK, CONFINE_FS_WRITE);
}

SEC("lsm/path_symlink")
int BPF_PROG(confine_path_symlink, const struct path *dir, struct dentry *dentry, const char *old_name)
{
    return global_entry(dir, dentry, CONFINE_OP_SYMLINK, ENTRY_NEED);
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
    ret = as_errno(check_path(job, cgid, old_dentry, BPF_CORE_READ(old_dir, mnt), CONFINE_OP_RENAME, need));
    if (ret)
        return ret;
    return as_errno(check_path(job, cgid, new_dentry, BPF_CORE_READ(new_dir, mnt), CONFINE_OP_RENAME, need));
}

SEC("lsm/path_link")
int BPF_PROG(confine_path_link, struct dentry *old_dentry, const struct path *new_dir,
             struct dentry *new_dentry)
{
    struct confine_job *job;
    __u64 cgid;
    int ret;

    fs_gen_bump(); /* any task's link: see the decision cache */
    job = current_job(&cgid);
    if (!job)
        return 0;
    /* Hard links never cross mounts, so the source is on new_dir's mount.
     * It is no entry of new_dir, so it is decided by its own path, never
     * through new_dir's cache slot (check_entry), which it would fill with
     * its own directory's decision. */
    ret = as_errno(
        check_path(job, cgid, old_dentry, BPF_CORE_READ(new_dir, mnt), CONFINE_OP_LINK, CONFINE_FS_WRITE));
    return ret ? ret
               : as_errno(check_entry(job, cgid, new_dir, new_dentry, CONFINE_OP_LINK, ENTRY_NEED, NULL));
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
    return as_errno(
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
            return as_errno(refuse(job, cgid, CONFINE_OP_EXEC));
        mnt = BPF_CORE_READ((struct backing_file___confine *)file, user_path.mnt);
        dentry = BPF_CORE_READ((struct backing_file___confine *)file, user_path.dentry);
    }
    return as_errno(check_exec(job, cgid, NULL, mnt, dentry));
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
#define ATTR_MODE 0x1
#define ATTR_UID  0x2
#define ATTR_GID  0x4
#define ATTR_SIZE 0x8
/* Whether the file's own slot, or the task's record of creating it, holds
 * the write through `mnt` (a ptr_value) under `tag` (0: nothing may be
 * kept). A directory's slot holds it wherever its entries' write does
 * (check_entry): `tar x` sets each directory's times after filling it. */
static __always_inline bool write_kept(__u64 slot, __u64 tag, __u64 mnt, __u64 made_mnt, __u64 made_tag)
{
    return tag && (slot_has(slot, tag, CONFINE_FS_WRITE) || (made_mnt == mnt && made_tag == tag));
}

/* global_dentry's look at each mount of the file's filesystem, as a
 * bpf_loop callback: verified once, where an unrolled loop of a walk and a
 * rule lookup per mount had 7.2's verifier explore 700,000 instructions in
 * each program that decides times or xattrs. It stops at the first mount
 * that doesn't allow the write, or past the last: what bpf_loop returns,
 * the iterations run, says which. The callback writes nothing back, so
 * 7.2's verifier, which runs a callback until its entry states repeat,
 * needs no more passes. */
struct mounts_check {
    struct sb_walk w;
    struct dentry *dentry;
    __u64 cgid;
};

static long mount_allows_step(__u32 i, void *arg)
{
    struct mounts_check *m = arg;
    struct resolved r;
    bool ok;

    if (i >= m->w.n || !resolve(m->dentry, m->w.found[i & (MAX_SB_MOUNTS - 1)], &r))
        return 1;
    /* A mount under another root (a layer the job can't name) grants and
     * denies nothing; a reachable one must allow the write. */
    ok = r.reason == CONFINE_REASON_OUTSIDE_ROOT || (rule_bits(&r, m->cgid, false) & CONFINE_FS_WRITE);
    scratch_release(r.s);
    return !ok;
}

/* The file at `dentry` must be writable through every mount of its
 * filesystem in the task's mount namespace that resolves under the task's
 * root. Mounts in other namespaces (systemd services' private ones) don't
 * count; more of ours than we can check: deny. */
static __always_inline int global_dentry(struct dentry *dentry, __u16 op)
{
    struct task_struct *task = bpf_get_current_task_btf();
    struct inode *inode = dentry->d_inode;
    struct mnt_namespace *ns;
    struct super_block *sb;
    struct task_fs *t;
    struct fs_cache *c;
    struct mounts_check m = {};
    struct confine_job *job;
    __u64 cgid, base = 0, slot = 0, made_mnt = 0, made_tag = 0, one = 0, sbv, nsv;
    __u32 ms;
    long run;

    job = current_job(&cgid);
    if (!job || kernel_override(task))
        return 0;
    /* Through the decision cache (a file with one path): the file's own
     * slot may say every mount allowed this since (tag_for 0), or one
     * did (as an open for write keeps it); and the file may be the one the
     * task just created. So `tar x` setting each new file's times, or a
     * repeated `touch`, skips the walk. The slot first: a repeated `touch`
     * then pays for no task storage. Where the filesystem has more than
     * one mount, each is walked. */
    if (inode && ((inode->i_mode & S_IFMT) == S_IFDIR || inode->i_nlink <= 1)) {
        base = cache_base(cgid, ptr_value(dentry));
        c = bpf_inode_storage_get(&fs_cache, inode, 0, 0);
        if (c)
            slot = *(volatile __u64 *)&c->slot[cgid & (CACHE_SLOTS - 1)];
        if (base && slot_has(slot, tag_for(base, 0), CONFINE_FS_WRITE))
            return 0;
    }
    t = bpf_task_storage_get(&task_fs, task, 0, 0);
    if (t && base && t->made.dentry == ptr_value(dentry) && t->made.inode == ptr_value(inode) &&
        t->made.ino == inode->i_ino && t->made.generation == inode->i_generation) {
        made_mnt = t->made.mnt;
        made_tag = t->made.tag;
    }
    /* The filesystem's one mount here that the task last found, if no
     * mount changed since, may hold the write (the file's slot or the
     * create's record); otherwise its mounts are listed now. Where nothing
     * holds the write, a walk follows, which costs more than the list.
     * Direct loads here (BTF pointers), helper reads for the list. */
    sbv = ptr_value(dentry->d_sb);
    nsv = ptr_value(task->nsproxy->mnt_ns);
    ms = seq_of(&mount_lock);
    if (t && t->one.seq == ms && t->one.sb == sbv && t->one.ns == nsv &&
        write_kept(slot, tag_for(base, t->one.mnt), t->one.mnt, made_mnt, made_tag))
        return 0;
    sb = BPF_CORE_READ(dentry, d_sb);
    ns = BPF_CORE_READ(task, nsproxy, mnt_ns);
    if (!sb_mounts_in(sb, ns, &m.w))
        return as_errno(refuse_for(job, cgid, op, CONFINE_REASON_TOO_MANY_MOUNTS));
    if (m.w.n == 1)
        one = plain_ptr_value(m.w.found[0]);
    /* Only even sequences are kept, so an odd one (a writer inside) never
     * matches above. */
    if (t && m.w.n == 1 && !(ms & 1) && seq_of(&mount_lock) == ms) {
        t->one.sb = sbv;
        t->one.ns = nsv;
        t->one.mnt = one;
        t->one.seq = ms;
    }
    /* No mount of the task's reaches the file (its filesystem unmounted
     * here, or mounted only elsewhere, and the file handed to the job):
     * refused, as path_chmod refuses the same file. (A mount here but
     * outside the task's root is skipped below; a job can't change its
     * root.) The loop below, finding no mount to refuse, would allow it. */
    if (!m.w.n)
        return as_errno(refuse_for(job, cgid, op, CONFINE_REASON_OUTSIDE_ROOT));
    if (m.w.n == 1 && write_kept(slot, tag_for(base, one), one, made_mnt, made_tag))
        return 0;
    m.dentry = dentry;
    m.cgid = cgid;
    run = bpf_loop(m.w.n + 1, mount_allows_step, &m, 0);
    /* Stopped at mount run - 1 (or found no scratch slot there): that
     * mount decides, and audits. */
    if (run < 1)
        return as_errno(refuse(job, cgid, op));
    if (run <= m.w.n)
        return as_errno(
            check_path(job, cgid, dentry, m.w.found[(run - 1) & (MAX_SB_MOUNTS - 1)], op, CONFINE_FS_WRITE));
    /* Every mount allowed it: kept, if nothing moved while we walked. Not
     * for a file just created, whose times are set once (tar x): its slot
     * would cost an allocation it never pays back. */
    inode = dentry->d_inode;
    if (base && !made_mnt && inode) {
        c = bpf_inode_storage_get(&fs_cache, inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
        if (c && cache_base(cgid, ptr_value(dentry)) == base)
            cache_put(c, cgid, tag_for(base, 0), CONFINE_FS_WRITE);
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
 * variant that matches the running kernel (loader/kernel_variants.cpp). */
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
