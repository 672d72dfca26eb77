/* The audit event: one record per denial (or would-be denial in audit mode),
 * written by the BPF programs into the job's ring buffer and turned into one
 * JSON line by loader/audit.cpp. */
#ifndef CONFINE_BPF_AUDIT_H
#define CONFINE_BPF_AUDIT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Each op and reason once: its enum constant and its name, the contract's
 * `op` and `reason` values, which loader/audit.cpp prints from these lists. */
#define CONFINE_OPS(X)                                                                                       \
    X(OPEN_READ, "open_read")                                                                                \
    X(OPEN_WRITE, "open_write")                                                                              \
    X(EXEC, "exec")                                                                                          \
    X(CREATE, "create")                                                                                      \
    X(MKDIR, "mkdir")                                                                                        \
    X(UNLINK, "unlink")                                                                                      \
    X(RMDIR, "rmdir")                                                                                        \
    X(RENAME, "rename")                                                                                      \
    X(LINK, "link")                                                                                          \
    X(SYMLINK, "symlink")                                                                                    \
    X(SETATTR, "setattr")                                                                                    \
    X(SETXATTR, "setxattr")                                                                                  \
    X(CONNECT, "connect")                                                                                    \
    X(BIND, "bind")                                                                                          \
    X(SENDMSG, "sendmsg")                                                                                    \
    X(USERNS_CREATE, "userns_create")                                                                        \
    X(PTRACE, "ptrace")                                                                                      \
    X(SIGNAL, "signal")                                                                                      \
    X(BPF, "bpf")                                                                                            \
    X(SOCKET, "socket")         /* socket(2) of a family or protocol the policy doesn't grant */             \
    X(PRLIMIT, "prlimit")       /* prlimit(2) on another process */                                          \
    X(SETSCHED, "setsched")     /* nice, I/O priority, scheduling or affinity of another process */          \
    X(KEY, "key")               /* a key or keyring the job didn't create */                                 \
    X(CGROUP, "cgroup")         /* a child placed in another cgroup (clone3 CLONE_INTO_CGROUP) */            \
    X(SETSOCKOPT, "setsockopt") /* a socket option that would send traffic elsewhere */                      \
    X(MOUNT, "mount")           /* a mount, chroot or pivot_root that would give files a second path */      \
    X(TTY, "tty")               /* an ioctl typing into, or taking over, an outside terminal */

enum confine_op {
    CONFINE_OP_NONE = 0,
#define CONFINE_OP_ENUM(name, text) CONFINE_OP_##name,
    CONFINE_OPS(CONFINE_OP_ENUM)
#undef CONFINE_OP_ENUM
};

/* Why a decision was made; anything but POLICY (which has no name in the
 * log) is a fail-closed denial. */
#define CONFINE_REASONS(X)                                                                                   \
    X(PATH_TOO_LONG, "path_too_long")     /* path longer than CONFINE_PATH_MAX */                            \
    X(PATH_TOO_DEEP, "path_too_deep")     /* more than CONFINE_PATH_DEPTH components */                      \
    X(OUTSIDE_ROOT, "outside_root")       /* not reachable from the task's root */                           \
    X(TOO_MANY_MOUNTS, "too_many_mounts") /* the file's filesystem is mounted too often to check */          \
    X(OWNER_IN_USER_MEMORY, "owner_in_user_memory") /* a file owner passed by pointer */                     \
    X(MAP_FULL, "map_full")                         /* a map that must remember the object is full */        \
    X(SOURCE_ROUTE, "source_route")                 /* routing packets via another address first */          \
    X(NOTHING_LISTENING, "nothing_listening")       /* audit mode: enforce would answer ECONNREFUSED */      \
    X(CASEFOLD, "casefold")                         /* a name's case may decide: see case_matters */

enum confine_reason {
    CONFINE_REASON_POLICY = 0, /* the job's rules decided */
#define CONFINE_REASON_ENUM(name, text) CONFINE_REASON_##name,
    CONFINE_REASONS(CONFINE_REASON_ENUM)
#undef CONFINE_REASON_ENUM
};
enum confine_target_kind {
    CONFINE_TARGET_NONE = 0,
    CONFINE_TARGET_PATH,          /* target.path, NUL-terminated */
    CONFINE_TARGET_INET,          /* target.inet, IPv4 as v4-mapped IPv6 */
    CONFINE_TARGET_UNIX,          /* target.path: a unix socket path */
    CONFINE_TARGET_UNIX_ABSTRACT, /* target.path[0..target_len): raw name */
    CONFINE_TARGET_TASK,          /* target.task: another process */
    CONFINE_TARGET_PGRP,          /* target.task.tgid: a process group */
    CONFINE_TARGET_SOCKET,        /* target.sock: a socket of a refused kind */
    CONFINE_TARGET_KEY,           /* target.key: a key or keyring */
};

#define CONFINE_PATH_MAX 4096 /* PATH_MAX */

struct confine_inet {
    __u8 addr[16];
    __u16 port; /* host byte order */
    __u8 proto; /* IPPROTO_TCP or IPPROTO_UDP */
    __u8 pad;
};

struct confine_task {
    __u32 tgid;
    __u32 signal; /* task_kill: the signal number */
    char comm[16];
};

struct confine_sock {
    __u16 family;   /* AF_* */
    __u16 type;     /* SOCK_*; 0 when unknown (a connect or send) */
    __u16 protocol; /* IPPROTO_* for inet; 0 when unknown */
    __u16 pad;
};

struct confine_key {
    __s32 serial;
    __u32 pad;
    char description[64]; /* truncated, NUL-terminated */
};

struct confine_event {
    __u64 ktime_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
    __u64 cgroup_id;
    __u32 pid; /* thread id */
    __u32 tgid;
    __u32 uid;
    __u16 op;         /* enum confine_op */
    __u8 denied;      /* 1: the access was refused; 0: audit mode let it pass */
    __u8 reason;      /* enum confine_reason */
    __u8 target_kind; /* enum confine_target_kind */
    __u8 pad;
    __u16 target_len; /* bytes used in target.path (abstract names) */
    char comm[16];
    union {
        char path[CONFINE_PATH_MAX];
        struct confine_inet inet;
        struct confine_task task;
        struct confine_sock sock;
        struct confine_key key;
    } target;
};

/* An event takes only the ring space its target uses: the header and that
 * much of `target`. A path event is as long as its path (bpf/path.bpf.h,
 * report_resolved); a mount source, read before its length is known, goes
 * in a short event (CONFINE_PATH_SHORT bytes) or, if it fills that, a whole
 * one. */
#define CONFINE_EVENT_HEADER             __builtin_offsetof(struct confine_event, target)
#define CONFINE_EVENT_SIZE(target_bytes) (CONFINE_EVENT_HEADER + (target_bytes))
#define CONFINE_PATH_SHORT               256

#endif
