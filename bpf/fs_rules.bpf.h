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

/* The length of "DIR/" for the directory whose names decide_path judges
 * alike: the path's own directory, or with `below` the path itself, a
 * directory ("/" for the root). */
static __always_inline __u32 alike_dir_len(const struct resolved *r, bool below)
{
    __u32 len = resolved_len(r);

    if (!below)
        return len - r->name_len;
    return len > 1 ? len + 1 : 1;
}

/* The access bits the job's rules grant a resolved path, plus
 * CONFINE_FS_NOT_GUARD unless the path is a guard entry itself,
 * CONFINE_FS_LIST where it may be read or is a listable entry itself, and
 * CONFINE_FS_ALIKE(_UNNAMED) where every (unnamed) name in the path's
 * directory, or with `below` in the path itself, gets the same bits as
 * the path. */
static __always_inline __u32 granted(const struct resolved *r, __u64 cgid, bool below)
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
    /* No entry lies below the directory, so every name in it gets these
     * bits, when the match is above the directory (the directory would be
     * an entry, as the ancestor of one), or is the directory itself and a
     * leaf. When it is the directory with entries below, each of those
     * lies under a child that is an entry itself, so every other name gets
     * these bits. A cut key can't tell, and names are alike only if the
     * walk would resolve each of them too: any of NAME_MAX bytes, and with
     * `below` one step more. Where the path's own names are alike, the
     * path is no guard, and differs from them only if exact (LIST without
     * READ): the rule deciding them decides it. */
    dir_len = alike_dir_len(r, below);
    if (plen < CONFINE_RULE_PATH_MAX && (below || r->name_len) && dir_len + NAME_MAX < CONFINE_PATH_MAX &&
        r->steps + below <= CONFINE_PATH_DEPTH) {
        if (mlen < dir_len || (mlen == dir_len && (*access & CONFINE_FS_LEAF)))
            bits |= CONFINE_FS_ALIKE;
        else if (mlen == dir_len)
            bits |= CONFINE_FS_ALIKE_UNNAMED;
    }
    return bits;
}

/* Whether the decision on resolved path R, and with `below` on its
 * entries, may hang on the case of their names: some of them lie in a
 * case-insensitive directory (R->ci_end), and a rule lies below the
 * topmost such directory. Rules name paths byte for byte, but there
 * `.GIT/CONFIG` is `.git/config` to every later lookup, and a dentry may
 * carry either spelling. Unicode's folding (and its normalization) is
 * beyond a BPF program: such a path is refused (CONFINE_REASON_CASEFOLD).
 * Below a case-insensitive directory that no rule lies below, every name
 * is decided alike, whatever its case. A path that folds only its
 * entries' names (CI_TARGET: a vfat mount's root, a directory marked +F
 * under one that isn't) matters only for those: without this, opening a
 * work tree at a vfat root gave its slot CACHE_UNNAMED_WRITE, and the job
 * created `.GIT` there (the review of 889437b). */
static __always_inline bool case_matters(const struct resolved *r, __u64 cgid, bool below)
{
    struct confine_fs_key *k = &r->s->key;
    __u32 klen, *access;

    if (r->ci_end > CI_TARGET || (r->ci_end == CI_TARGET && !below))
        return false;
    /* The directory's path, and a '/' ("/" for the root, whose path is
     * kept as "/" when it is the target). Where that is longer than the
     * longest rule, no rule lies below. */
    klen = r->ci_end - r->off;
    if (klen == 1)
        klen = 0;
    bound(klen);
    if (klen >= CONFINE_RULE_PATH_MAX)
        return false;
    if (klen)
        bpf_probe_read_kernel(k->path, klen, &r->s->buf[r->off]);
    k->path[klen++] = '/';
    k->prefixlen = confine_fs_prefixlen(klen);
    k->cgroup_id_lo = (__u32)cgid;
    k->cgroup_id_hi = cgid >> 32;
    access = bpf_map_lookup_elem(&fs_rules, k);
    /* The rules below a directory make it an entry (their ancestor), and
     * not a leaf. */
    return access && confine_fs_value_path_bytes(*access) == klen && !(*access & CONFINE_FS_LEAF);
}

/* Synthesized with CONFINE_FS_ALIKE by decide_path, never stored in a rule:
 * how many levels of directories below the directory whose names are
 * alike a walk would still resolve, with room for any name at each (up to
 * 15). A directory below inherits its parent's decision on its entries
 * (inherited) with one level less, so nothing is allowed deeper or longer
 * than a walk would reach. */
#define FS_LEVELS_SHIFT 11
#define FS_LEVELS_MAX   15u
#define FS_LEVELS       (FS_LEVELS_MAX << FS_LEVELS_SHIFT)

/* The levels below the directory alike_dir_len names (its entries lie at
 * level 0), as FS_LEVELS bits. An entry of a directory g levels down has a
 * path of at most dir + g * (NAME_MAX + 1) + NAME_MAX bytes, and its walk
 * takes g more steps than an entry's: than this walk's, or with `below`
 * one more. */
static __always_inline __u32 levels_below(const struct resolved *r, bool below)
{
    __u32 dir_len = alike_dir_len(r, below), steps = r->steps + below, room, levels;

    if (dir_len + NAME_MAX >= CONFINE_PATH_MAX || steps >= CONFINE_PATH_DEPTH)
        return 0;
    room = CONFINE_PATH_MAX - 1 - NAME_MAX - dir_len;
    levels = room / (NAME_MAX + 1);
    if (levels > CONFINE_PATH_DEPTH - steps)
        levels = CONFINE_PATH_DEPTH - steps;
    if (levels > FS_LEVELS_MAX)
        levels = FS_LEVELS_MAX;
    return levels << FS_LEVELS_SHIFT;
}

/* What the job's rules grant resolved path R (granted, with levels_below
 * where names are alike), the one way from a resolved path to access bits.
 * Nothing where the walk decided already (R->reason), or where a name's
 * case may decide (case_matters), which sets R->reason to say so. */
static __always_inline __u32 rule_bits(struct resolved *r, __u64 cgid, bool below)
{
    __u32 bits;

    if (r->reason != CONFINE_REASON_POLICY)
        return 0;
    if (case_matters(r, cgid, below)) {
        r->reason = CONFINE_REASON_CASEFOLD;
        return 0;
    }
    bits = granted(r, cgid, below);
    if (bits & CONFINE_FS_ALIKE)
        bits |= levels_below(r, below);
    return bits;
}

/* Decides an access needing `need` (CONFINE_FS_*) to the file at
 * (dentry, mnt), reporting a refusal as `op`. Sets *bits to rule_bits, or
 * 0 if the walk failed closed. */
static __always_inline int decide_path(struct confine_job *job, __u64 cgid, struct dentry *dentry,
                                       struct vfsmount *mnt, __u16 op, __u32 need, bool below, __u32 *bits)
{
    struct resolved r;
    int ret;

    *bits = 0;
    if (!resolve(dentry, mnt, &r))
        return refuse(job, cgid, op);
    *bits = rule_bits(&r, cgid, below);
    if (r.reason == CONFINE_REASON_POLICY && (*bits & need) == need) {
        scratch_release(r.s);
        return ALLOW;
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

    return decide_path(job, cgid, dentry, mnt, op, need, false, &bits);
}

#endif
