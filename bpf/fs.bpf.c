/* Filesystem access control.
 *
 * Hooks (lsm_cgroup, attached to each job's cgroup):
 *   file_open - every open of a file: for read (open_read), for write or with
 *               O_TRUNC (open_write), and by execve (exec). This includes
 *               re-opens through /proc/self/fd/N and /proc/self/root, opens
 *               issued by io_uring, and O_PATH fds turned into real ones: the
 *               kernel has resolved the path to a (mount, dentry) pair by now,
 *               which is what we decide on.
 *
 * A decision resolves that pair to an absolute path (path.bpf.h) and looks
 * it up in the job's rules: longest prefix wins (see fs.h). Files on
 * kernel-internal mounts (pipes, sockets, memfds re-opened through
 * /proc/self/fd; overlayfs layers) pass: the job already holds them, or the
 * outer open was decided.
 */
#include "bpf/path.bpf.h"

/* From include/linux/fs.h, unchanged from 6.1 to 7.1 (#defines are not in
 * BTF). do_open_execat() marks an exec open with __FMODE_EXEC in f_flags,
 * not in f_mode. */
#define FMODE_WRITE 0x2
#define __FMODE_EXEC 0x20
#define O_TRUNC 01000

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

/* The access bits the job's rules grant a resolved path. */
static __always_inline __u32 granted(const struct resolved *r, __u64 cgid)
{
    struct confine_fs_key *k = &r->s->key;
    __u32 plen = resolved_len(r), klen = plen, *access;

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
    k->prefixlen = 64 + 8 * klen;
    k->cgroup_id_lo = (__u32)cgid;
    k->cgroup_id_hi = cgid >> 32;
    access = bpf_map_lookup_elem(&fs_rules, k);
    return access ? *access : 0;
}

/* Decides an access needing `need` (CONFINE_FS_*) to the file at
 * (dentry, mnt), reporting a refusal as `op`. */
static __always_inline int check_path(struct confine_job *job, __u64 cgid, struct dentry *dentry,
                                      struct vfsmount *mnt, __u16 op, __u32 need)
{
    struct confine_event *e;
    struct resolved r;
    int ret;

    if (!resolve(dentry, mnt, &r))
        return refuse(job, cgid, op);
    if (r.reason == CONFINE_REASON_POLICY && (granted(&r, cgid) & need) == need) {
        scratch_release(r.s);
        return ALLOW;
    }
    ret = verdict(job);
    e = event_reserve(job, cgid, op, r.reason);
    if (e) {
        resolved_to_event(&r, e, CONFINE_TARGET_PATH);
        bpf_ringbuf_submit(e, 0);
    }
    scratch_release(r.s);
    return ret;
}

/* ---- hooks --------------------------------------------------------------- */

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
    if (internal_mount(mnt))
        return ALLOW;

    dentry = BPF_CORE_READ(file, f_path.dentry);
    fmode = BPF_CORE_READ(file, f_mode);
    flags = BPF_CORE_READ(file, f_flags);
    if (flags & __FMODE_EXEC)
        return check_path(job, cgid, dentry, mnt, CONFINE_OP_EXEC, CONFINE_FS_EXEC);
    /* O_TRUNC truncates even on an O_RDONLY open, after this hook. */
    if ((fmode & FMODE_WRITE) || (flags & O_TRUNC))
        return check_path(job, cgid, dentry, mnt, CONFINE_OP_OPEN_WRITE,
                          CONFINE_FS_READ | CONFINE_FS_WRITE);
    return check_path(job, cgid, dentry, mnt, CONFINE_OP_OPEN_READ, CONFINE_FS_READ);
}
