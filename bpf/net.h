/* Network rules, shared by net.bpf.c and the loader.
 *
 * Exact-match destinations keyed by the job's cgroup id. IPv4 addresses are
 * stored as v4-mapped IPv6 (::ffff:a.b.c.d) so that a v4-mapped destination
 * on an AF_INET6 socket hits the same rule as the plain IPv4 one. */
#ifndef CONFINE_BPF_NET_H
#define CONFINE_BPF_NET_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum confine_net_kind {
    CONFINE_NET_TCP = 1,
    CONFINE_NET_UDP,
    CONFINE_NET_UNIX,          /* addr: socket path, NUL-padded */
    CONFINE_NET_UNIX_ABSTRACT, /* addr: name without the leading NUL */
};

#define CONFINE_UNIX_PATH_MAX 108 /* sizeof(sun_path) */

struct confine_net_key {
    __u64 cgroup_id;
    __u16 kind;     /* enum confine_net_kind */
    __u16 port;     /* TCP/UDP: host byte order */
    __u16 name_len; /* abstract: the name's bytes in addr */
    __u16 pad;
    __u8 addr[CONFINE_UNIX_PATH_MAX];
};

/* Value bits: which operations the destination is allowed for. */
#define CONFINE_NET_CONNECT 0x1u
#define CONFINE_NET_BIND    0x2u

#endif
