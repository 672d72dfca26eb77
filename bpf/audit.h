/* The audit event: one record per denial (or would-be denial in audit mode),
 * written by the BPF programs into the job's ring buffer and turned into one
 * JSON line by loader/audit.cpp. */
#ifndef CONFINE_BPF_AUDIT_H
#define CONFINE_BPF_AUDIT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Keep in sync with op_name() in loader/audit.cpp; the names are the
 * contract's `op` values. */
enum confine_op {
    CONFINE_OP_OPEN_READ = 1,
    CONFINE_OP_OPEN_WRITE,
    CONFINE_OP_EXEC,
    CONFINE_OP_CREATE,
    CONFINE_OP_MKDIR,
    CONFINE_OP_UNLINK,
    CONFINE_OP_RMDIR,
    CONFINE_OP_RENAME,
    CONFINE_OP_LINK,
    CONFINE_OP_SYMLINK,
    CONFINE_OP_SETATTR,
    CONFINE_OP_SETXATTR,
    CONFINE_OP_CONNECT,
    CONFINE_OP_BIND,
    CONFINE_OP_SENDMSG,
    CONFINE_OP_USERNS_CREATE,
    CONFINE_OP_PTRACE,
    CONFINE_OP_SIGNAL,
    CONFINE_OP_BPF,
    CONFINE_OP_SOCKET, /* socket(2) of a family or protocol the policy doesn't grant */
    CONFINE_OP_PRLIMIT,  /* prlimit(2) on another process */
    CONFINE_OP_SETSCHED, /* nice, I/O priority, scheduling policy or affinity of another process */
    CONFINE_OP_KEY,      /* a key or keyring the job didn't create */
    CONFINE_OP_CGROUP,   /* a child placed in another cgroup (clone3 CLONE_INTO_CGROUP) */
    CONFINE_OP_SETSOCKOPT, /* a socket option that would send traffic elsewhere (source routing) */
    CONFINE_OP_MOUNT,    /* a mount that would give files a second path */
    CONFINE_OP_TTY,      /* a terminal ioctl that would type into, or take over, a terminal outside the job */
};

/* Why a decision was made; anything but POLICY is a fail-closed denial. */
enum confine_reason {
    CONFINE_REASON_POLICY = 0,   /* the job's rules decided */
    CONFINE_REASON_PATH_TOO_LONG, /* path longer than CONFINE_PATH_MAX */
    CONFINE_REASON_PATH_TOO_DEEP, /* more than CONFINE_PATH_DEPTH components */
    CONFINE_REASON_OUTSIDE_ROOT,  /* not reachable from the task's root */
    CONFINE_REASON_TOO_MANY_MOUNTS, /* the file's filesystem is mounted too often to check */
    CONFINE_REASON_OWNER_IN_USER_MEMORY, /* a file owner passed by pointer: can't be checked race-free */
    CONFINE_REASON_MAP_FULL,      /* a map that must remember the object is full */
    CONFINE_REASON_SOURCE_ROUTE,  /* an option routing packets via another address first */
    CONFINE_REASON_NOTHING_LISTENING, /* audit mode: enforce would answer ECONNREFUSED */
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
    __u16 op;          /* enum confine_op */
    __u8 denied;       /* 1: the access was refused; 0: audit mode let it pass */
    __u8 reason;       /* enum confine_reason */
    __u8 target_kind;  /* enum confine_target_kind */
    __u8 pad;
    __u16 target_len;  /* bytes used in target.path (abstract names) */
    char comm[16];
    union {
        char path[CONFINE_PATH_MAX];
        struct confine_inet inet;
        struct confine_task task;
        struct confine_sock sock;
        struct confine_key key;
    } target;
};

#endif
