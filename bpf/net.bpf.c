/* Network access control.
 *
 * Hooks (lsm_cgroup, attached to each job's cgroup):
 *   socket_connect      - connect(2) on TCP and UDP over IPv4 and IPv6
 *                         (v4-mapped IPv6 counts as IPv4): only the policy's
 *                         `connect` destinations. Families other than inet,
 *                         inet6 and unix are refused.
 *   unix_stream_connect - unix stream and seqpacket connect, and
 *   unix_may_send       - unix datagram connect and send: decided on the
 *                         peer the kernel found, so a path is the socket's
 *                         real, symlink-free path, and a socket that doesn't
 *                         exist is never reported. The job's own sockets are
 *                         always reachable.
 *
 * The kernel runs socket hooks for the cgroup of the socket's creator
 * (bpf_lsm_find_cgroup_shim picks the socket/sock shim for a first argument
 * of those types), so the job is found through the socket's cgroup, not the
 * current task's.
 */
#include "bpf/path.bpf.h"
#include "bpf/net.h"

#define AF_UNSPEC 0
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

/* key: job cgroup id and destination; value: CONFINE_NET_* bits. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_NET_RULES);
    __type(key, struct confine_net_key);
    __type(value, __u32);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} net_rules SEC(".maps");

static __always_inline __u64 sock_cgroup_id(struct sock *sk)
{
    return BPF_CORE_READ(sk, sk_cgrp_data.cgroup, kn, id);
}

/* Fills key->kind/port/addr from an IPv4 or IPv6 sockaddr. Returns 0, or -1
 * for a protocol other than TCP and UDP. */
static __always_inline int inet_key(struct confine_net_key *key, struct socket *sock,
                                    struct sockaddr *address, __u16 family)
{
    __u16 proto = BPF_CORE_READ(sock, sk, sk_protocol);

    if (proto == IPPROTO_TCP)
        key->kind = CONFINE_NET_TCP;
    else if (proto == IPPROTO_UDP)
        key->kind = CONFINE_NET_UDP;
    else
        return -1;

    if (family == AF_INET) {
        struct sockaddr_in *sin = (void *)address;

        key->port = bpf_ntohs(BPF_CORE_READ(sin, sin_port));
        key->addr[10] = 0xff;
        key->addr[11] = 0xff;
        bpf_probe_read_kernel(&key->addr[12], 4, &sin->sin_addr);
    } else {
        struct sockaddr_in6 *sin6 = (void *)address;

        key->port = bpf_ntohs(BPF_CORE_READ(sin6, sin6_port));
        bpf_probe_read_kernel(key->addr, 16, &sin6->sin6_addr);
    }
    return 0;
}

SEC("lsm_cgroup/socket_connect")
int BPF_PROG(confine_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
    struct confine_net_key key = {};
    struct confine_event *e;
    struct confine_job *job;
    __u32 *ops;
    __u16 family;
    int bad;

    key.cgroup_id = sock_cgroup_id(BPF_CORE_READ(sock, sk));
    job = bpf_map_lookup_elem(&jobs, &key.cgroup_id);
    if (!job)
        return DENY;

    family = BPF_CORE_READ(address, sa_family);
    switch (family) {
    case AF_UNSPEC: /* dissolves a UDP association; reaches nobody */
        return ALLOW;
    case AF_INET:
    case AF_INET6:
        bad = inet_key(&key, sock, address, family);
        break;
    case AF_UNIX: /* decided on the peer by the unix_* hooks below */
        return ALLOW;
    default:
        bad = 1;
        break;
    }
    if (!bad) {
        ops = bpf_map_lookup_elem(&net_rules, &key);
        if (ops && (*ops & CONFINE_NET_CONNECT))
            return ALLOW;
    }

    e = event_reserve(job, key.cgroup_id, CONFINE_OP_CONNECT, CONFINE_REASON_POLICY);
    if (e) {
        switch (key.kind) {
        case CONFINE_NET_TCP:
        case CONFINE_NET_UDP:
            e->target_kind = CONFINE_TARGET_INET;
            __builtin_memcpy(e->target.inet.addr, key.addr, 16);
            e->target.inet.port = key.port;
            e->target.inet.proto = key.kind == CONFINE_NET_TCP ? IPPROTO_TCP : IPPROTO_UDP;
            break;
        default: /* another family: report it as its number */
            e->target_kind = CONFINE_TARGET_NONE;
            e->target_len = family;
            break;
        }
        bpf_ringbuf_submit(e, 0);
    }
    return verdict(job);
}

/* ---- unix sockets -------------------------------------------------------- */

/* Decides whether job socket `sk` may reach unix socket `peer`. */
static __always_inline int check_unix_peer(struct sock *sk, struct sock *peer, __u16 op)
{
    struct unix_sock *u = (void *)peer;
    struct confine_net_key key = {};
    struct unix_address *addr;
    struct confine_event *e;
    struct confine_job *job;
    struct resolved r = {};
    bool have_path = false;
    __u32 *ops, len = 0;
    int ret;
    char first;

    key.cgroup_id = sock_cgroup_id(sk);
    job = bpf_map_lookup_elem(&jobs, &key.cgroup_id);
    if (!job)
        return DENY;
    /* The job's own sockets (its test servers, socketpairs) are its own. */
    if (sock_cgroup_id(peer) == key.cgroup_id)
        return ALLOW;
    addr = BPF_CORE_READ(u, addr);
    if (!addr) /* unbound: reachable only through an fd the job was given */
        return ALLOW;

    bpf_probe_read_kernel(&first, 1, &addr->name[0].sun_path[0]);
    if (!first) {
        /* Abstract: the name is what follows the leading NUL, NULs included. */
        len = BPF_CORE_READ(addr, len) - offsetof(struct sockaddr_un, sun_path) - 1;
        bound(len);
        if (len > CONFINE_UNIX_PATH_MAX - 1)
            len = CONFINE_UNIX_PATH_MAX - 1;
        key.kind = CONFINE_NET_UNIX_ABSTRACT;
        key.port = len;
        bpf_probe_read_kernel(key.addr, len, &addr->name[0].sun_path[1]);
    } else {
        key.kind = CONFINE_NET_UNIX;
        if (!resolve(BPF_CORE_READ(u, path.dentry), BPF_CORE_READ(u, path.mnt), &r))
            return refuse(job, key.cgroup_id, op);
        have_path = true;
        len = resolved_len(&r);
        bound(len);
        if (r.reason == CONFINE_REASON_POLICY && len < CONFINE_UNIX_PATH_MAX)
            bpf_probe_read_kernel(key.addr, len, &r.s->buf[r.off]);
        else
            key.kind = 0; /* too long for any rule: no match */
    }
    ops = bpf_map_lookup_elem(&net_rules, &key);
    if (ops && (*ops & CONFINE_NET_CONNECT)) {
        if (have_path)
            scratch_release(r.s);
        return ALLOW;
    }

    ret = verdict(job);
    e = event_reserve(job, key.cgroup_id, op, have_path ? r.reason : CONFINE_REASON_POLICY);
    if (e) {
        if (have_path) {
            resolved_to_event(&r, e, CONFINE_TARGET_UNIX);
        } else {
            e->target_kind = CONFINE_TARGET_UNIX_ABSTRACT;
            e->target_len = len;
            __builtin_memcpy(e->target.path, key.addr, CONFINE_UNIX_PATH_MAX);
        }
        bpf_ringbuf_submit(e, 0);
    }
    if (have_path)
        scratch_release(r.s);
    return ret;
}

SEC("lsm_cgroup/unix_stream_connect")
int BPF_PROG(confine_unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk)
{
    return check_unix_peer(sock, other, CONFINE_OP_CONNECT);
}

SEC("lsm_cgroup/unix_may_send")
int BPF_PROG(confine_unix_may_send, struct socket *sock, struct socket *other)
{
    return check_unix_peer(BPF_CORE_READ(sock, sk), BPF_CORE_READ(other, sk), CONFINE_OP_SENDMSG);
}
