/* Filesystem rules, shared by fs.bpf.c and the loader.
 *
 * Rules live in one LPM trie for all jobs. The key is the job's cgroup id
 * followed by the path with a trailing '/', so the longest match is the
 * job's longest rule and "/home/u/" never matches "/home/user/". */
#ifndef CONFINE_BPF_FS_H
#define CONFINE_BPF_FS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* LPM trie keys hold at most 256 data bytes: 8 for the cgroup id, the rest
 * for the path. A rule's path (with its trailing '/') must fit; an accessed
 * path that is longer is cut to this length before the lookup, which still
 * finds its longest matching rule because no rule is longer. */
#define CONFINE_RULE_PATH_MAX 248

/* Value of the `fs_rules` map: access bits (no bit: deny), the guard flag,
 * and the entry's key length in bytes, which tells an exact match. */
#define CONFINE_FS_READ  0x1u /* open for read, list */
#define CONFINE_FS_WRITE 0x2u /* open for write, create, delete, rename, ... */
#define CONFINE_FS_EXEC  0x4u /* execve */
#define CONFINE_FS_GUARD 0x8u /* a less-than-writable rule lies below: no rename */
/* The directory itself may be listed (opened for read), nothing below it.
 * Stored on exact entries; the lookup also grants it wherever READ is. */
#define CONFINE_FS_LIST 0x20u
/* No other entry of the job lies below this one. Every ancestor of an
 * entry is an entry too (the loader writes them with the access their path
 * has anyway), so the lookup can tell when no entry lies below a path's
 * directory: see CONFINE_FS_ALIKE. */
#define CONFINE_FS_LEAF         0x40u
#define CONFINE_FS_KEYLEN_SHIFT 16
/* Synthesized by the lookup, never stored: the path is not a guard entry
 * itself. A rename needs WRITE | CONFINE_FS_NOT_GUARD at both ends. */
#define CONFINE_FS_NOT_GUARD 0x10u
/* Synthesized: every name in the looked-up path's directory is granted the
 * same bits, so one decision serves a directory's creates and deletes; or,
 * for ALIKE_UNNAMED, every name there that no entry has as its last
 * component (fs_names below), such as a workdir's names besides ".git". */
#define CONFINE_FS_ALIKE         0x80u
#define CONFINE_FS_ALIKE_UNNAMED 0x100u

struct confine_fs_key {
    __u32 prefixlen;    /* bits: 64 for the cgroup id + 8 per path byte */
    __u32 cgroup_id_lo; /* the cgroup id, split so the key has no padding */
    __u32 cgroup_id_hi;
    char path[CONFINE_RULE_PATH_MAX];
};

/* Key of the `fs_names` hash: the last component of each of a job's
 * entries (a name of up to CONFINE_NAME_BYTES - 1 bytes, the rest of a
 * longer one left out, NUL-padded) and its whole length. A name found here
 * may be singled out by a rule; one not found is decided like its
 * directory's other unnamed entries. */
#define CONFINE_NAME_BYTES 20
struct confine_fs_name {
    __u64 cgroup_id;
    __u32 len;
    char name[CONFINE_NAME_BYTES];
};

/* The key and value encodings, for fs.bpf.c and the loader alike. */
static inline __u32 confine_fs_prefixlen(__u32 path_bytes)
{
    return 64 + 8 * path_bytes;
}
static inline __u32 confine_fs_path_bytes(__u32 prefixlen)
{
    return (prefixlen - 64) / 8;
}
static inline __u32 confine_fs_value(__u32 access, __u32 path_bytes)
{
    return access | path_bytes << CONFINE_FS_KEYLEN_SHIFT;
}
/* The path bytes of the entry a value was stored with. */
static inline __u32 confine_fs_value_path_bytes(__u32 value)
{
    return value >> CONFINE_FS_KEYLEN_SHIFT;
}

/* Walk limits (fail closed: deeper or longer paths are denied and audited). */
#define CONFINE_PATH_DEPTH 256

#endif
