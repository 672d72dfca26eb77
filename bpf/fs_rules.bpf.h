/* The job's filesystem rules and the decision on one resolved path.
 *
 * fs_rules is an LPM trie keyed by the job's cgroup id then the path with a
 * trailing '/' (bpf/fs.h owns the encoding, which the loader shares), so a
 * lookup finds the longest rule that covers a path: longest prefix wins.
 */
#ifndef CONFINE_BPF_FS_RULES_H
#define CONFINE_BPF_FS_RULES_H

#include "bpf/path.bpf.h"

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

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_FS_RULES);
    __type(key, struct confine_fs_name);
    __type(value, __u8);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} fs_names SEC(".maps");

/* Whether `dentry`'s name (a BTF pointer) may be an entry's last
 * component: then a rule may single it out. First by its length, which
 * settles most names without reading them. */
static __always_inline bool named(struct confine_job *job, __u64 cgid, struct dentry *dentry)
{
    struct confine_fs_name k = {.cgroup_id = cgid, .len = dentry->d_name.len};

    if (!(job->name_lens & confine_name_len_bit(k.len)))
        return false;
    bpf_probe_read_kernel_str(k.name, sizeof(k.name), dentry->d_name.name);
    return bpf_map_lookup_elem(&fs_names, &k) != NULL;
}

/* The access bits the job's rules grant a resolved path, plus
 * CONFINE_FS_NOT_GUARD unless the path is a guard entry itself,
 * CONFINE_FS_LIST where it may be read or is a listable entry itself, and
 * CONFINE_FS_ALIKE(_UNNAMED) where every (unnamed) name in the path's
 * directory gets the same. */
static __always_inline __u32 granted(const struct resolved *r, __u64 cgid)
{
    struct confine_fs_key *k = &r->s->key;
    __u32 plen = resolved_len(r), klen = plen, *access, bits, mlen, dir_len;
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
    mlen = confine_fs_value_path_bytes(*access);
    exact = mlen == klen;
    bits = *access & (CONFINE_FS_READ | CONFINE_FS_WRITE | CONFINE_FS_EXEC);
    if ((bits & CONFINE_FS_READ) || (exact && (*access & CONFINE_FS_LIST)))
        bits |= CONFINE_FS_LIST;
    if (!(exact && (*access & CONFINE_FS_GUARD)))
        bits |= CONFINE_FS_NOT_GUARD;
    /* No entry lies below the path's directory, so every name in it gets
     * these bits, when the match is above the directory (the directory
     * would be an entry, as the ancestor of one), or is the directory
     * itself and a leaf. When it is the directory with entries below, each
     * of those lies under a child that is an entry itself, so every other
     * name gets these bits. A cut key can't tell. */
    dir_len = plen - r->name_len; /* "DIR/" */
    if (plen < CONFINE_RULE_PATH_MAX && r->name_len) {
        if (mlen < dir_len || (mlen == dir_len && (*access & CONFINE_FS_LEAF)))
            bits |= CONFINE_FS_ALIKE;
        else if (mlen == dir_len)
            bits |= CONFINE_FS_ALIKE_UNNAMED;
    }
    return bits;
}

/* Synthesized with CONFINE_FS_ALIKE by decide_path, never stored in a rule:
 * how many levels of directories below the path's directory a walk would
 * still resolve, with room for any name at each (up to 15). A directory
 * below inherits its parent's decision on its entries (check_entry) with
 * one level less, so no create is allowed deeper or longer than a walk
 * would reach. */
#define FS_LEVELS_SHIFT 11
#define FS_LEVELS_MAX   15u
#define FS_LEVELS       (FS_LEVELS_MAX << FS_LEVELS_SHIFT)

/* The levels below a resolved path's directory (its entries lie at level
 * 0), as FS_LEVELS bits. An entry of a directory g levels down has a path
 * of at most dir + g * (NAME_MAX + 1) + NAME_MAX bytes, and its walk takes
 * g more steps than this one's. */
static __always_inline __u32 levels_below(const struct resolved *r)
{
    __u32 dir_len = resolved_len(r) - r->name_len, room, levels;

    if (dir_len + NAME_MAX >= CONFINE_PATH_MAX || r->steps >= CONFINE_PATH_DEPTH)
        return 0;
    room = CONFINE_PATH_MAX - 1 - NAME_MAX - dir_len;
    levels = room / (NAME_MAX + 1);
    if (levels > CONFINE_PATH_DEPTH - r->steps)
        levels = CONFINE_PATH_DEPTH - r->steps;
    if (levels > FS_LEVELS_MAX)
        levels = FS_LEVELS_MAX;
    return levels << FS_LEVELS_SHIFT;
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
        /* Names in the directory are alike only if theirs, up to
         * NAME_MAX, fit the walk too. */
        if (resolved_len(&r) + NAME_MAX >= CONFINE_PATH_MAX)
            *bits &= ~(CONFINE_FS_ALIKE | CONFINE_FS_ALIKE_UNNAMED);
        else if (*bits & CONFINE_FS_ALIKE)
            *bits |= levels_below(&r);
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

#endif
