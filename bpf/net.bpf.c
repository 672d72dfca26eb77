/* Network access control.
 *
 * Hooks (lsm_cgroup, attached to each job's cgroup):
 *   socket_connect      - connect(2) on TCP and UDP over IPv4 and IPv6
 *                         (v4-mapped IPv6 counts as IPv4): only the policy's
 *                         `connect` destinations, and loopback ones, which
 *                         connect4/6 below decide. Other families are refused.
 *   socket_sendmsg      - the same for sendto/sendmsg with a destination
 *                         (unconnected UDP, TCP Fast Open).
 *   unix_stream_connect - unix stream and seqpacket connect, and
 *   unix_may_send       - unix datagram connect and send: decided on the
 *                         peer the kernel found, so a path is the socket's
 *                         real, symlink-free path, and a socket that doesn't
 *                         exist is never reported. The job's own sockets are
 *                         always reachable.
 *
 * Hooks, global lsm (a task outside any job pays one hash lookup):
 *   socket_create       - only the address families the policy grants
 *                         (unix, inet, inet6, plus [network] families), so
 *                         e.g. netlink (`ip addr`) or packet sockets are
 *                         refused unless listed.
 *
 * cgroup sock programs (per cgroup, outside the lsm_cgroup slot budget):
 *   sock_create         - records which job created each TCP/UDP socket.
 *   bind4/6             - bind(2) of TCP/UDP: loopback addresses always (the
 *                         job's own); others only as the policy's `bind`
 *                         rules list them (a rule's port 0: any port).
 *   connect4/6, sendmsg4/6 - a loopback destination no rule lists: only if
 *                         the socket the kernel would deliver to is one of
 *                         the job's (bpf_sk_lookup_*).
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

#define BPF_F_CURRENT_NETNS (-1) /* uapi bpf.h; the pinned vmlinux.h lacks it */

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

/* ::ffff:a.b.c.d; `a` is 8-byte aligned (confine_net_key.addr). */
static __always_inline bool is_v4_mapped(const __u8 *a)
{
    return *(const __u64 *)a == 0 && *(const __u16 *)(a + 8) == 0 && a[10] == 0xff && a[11] == 0xff;
}

static __always_inline bool is_loopback(const __u8 *a)
{
    if (is_v4_mapped(a)) /* 127.0.0.0/8 */
        return a[12] == 127;
    return *(const __u64 *)a == 0 && *(const __u64 *)(a + 8) == bpf_cpu_to_be64(1); /* ::1 */
}

static __always_inline bool rule_allows(const struct confine_net_key *key, __u32 op)
{
    __u32 *ops = bpf_map_lookup_elem(&net_rules, key);

    return ops && (*ops & op);
}

static __always_inline void report_inet(struct confine_job *job, const struct confine_net_key *key, __u16 op)
{
    struct confine_event *e = event_reserve(job, key->cgroup_id, op, CONFINE_REASON_POLICY);

    if (e) {
        e->target_kind = CONFINE_TARGET_INET;
        __builtin_memcpy(e->target.inet.addr, key->addr, 16);
        e->target.inet.port = key->port;
        e->target.inet.proto = key->kind == CONFINE_NET_UDP ? IPPROTO_UDP : IPPROTO_TCP;
        bpf_ringbuf_submit(e, 0);
    }
}

/* Decides a TCP/UDP destination: a `connect` rule allows it; a loopback
 * one is left to the connect4/6 and sendmsg4/6 programs below, which see the
 * socket it would reach. `op` names a refusal. */
static __always_inline int check_inet(struct confine_job *job, struct socket *sock,
                                      struct sockaddr *address, __u16 family,
                                      struct confine_net_key *key, __u16 op)
{
    if (inet_key(key, sock, address, family) == 0 &&
        (rule_allows(key, CONFINE_NET_CONNECT) || is_loopback(key->addr)))
        return ALLOW;
    report_inet(job, key, op);
    return verdict(job);
}

/* Refuses a socket family no rule can grant, reporting it by number. */
static __always_inline int refuse_family(struct confine_job *job, __u64 cgid, __u16 family, __u16 op)
{
    struct confine_event *e = event_reserve(job, cgid, op, CONFINE_REASON_POLICY);

    if (e) {
        e->target_len = family;
        bpf_ringbuf_submit(e, 0);
    }
    return verdict(job);
}

SEC("lsm_cgroup/socket_connect")
int BPF_PROG(confine_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
    struct confine_net_key key = {};
    struct confine_job *job;
    __u16 family;

    key.cgroup_id = sock_cgroup_id(BPF_CORE_READ(sock, sk));
    job = bpf_map_lookup_elem(&jobs, &key.cgroup_id);
    if (!job)
        return DENY;

    family = BPF_CORE_READ(address, sa_family);
    switch (family) {
    case AF_UNSPEC: /* dissolves a UDP association; reaches nobody */
    case AF_UNIX:   /* decided on the peer by the unix_* hooks below */
        return ALLOW;
    case AF_INET:
    case AF_INET6:
        return check_inet(job, sock, address, family, &key, CONFINE_OP_CONNECT);
    default:
        return refuse_family(job, key.cgroup_id, family, CONFINE_OP_CONNECT);
    }
}

/* sendto/sendmsg with a destination: unconnected UDP, and TCP Fast Open
 * (MSG_FASTOPEN connects without connect(2)). Sends without a destination
 * go where a checked connect pointed the socket. */
SEC("lsm_cgroup/socket_sendmsg")
int BPF_PROG(confine_socket_sendmsg, struct socket *sock, struct msghdr *msg, int size)
{
    struct confine_net_key key = {};
    struct sockaddr *address = BPF_CORE_READ(msg, msg_name);
    struct confine_job *job;
    __u16 family, sock_family;

    if (!address)
        return ALLOW;
    key.cgroup_id = sock_cgroup_id(BPF_CORE_READ(sock, sk));
    job = bpf_map_lookup_elem(&jobs, &key.cgroup_id);
    if (!job)
        return DENY;
    /* Decided by the socket's family: unix datagrams by unix_may_send on the
     * peer, other families by socket_create. */
    sock_family = BPF_CORE_READ(sock, sk, __sk_common.skc_family);
    if (sock_family != AF_INET && sock_family != AF_INET6)
        return ALLOW;
    family = BPF_CORE_READ(address, sa_family);
    /* udp_sendmsg() takes an AF_UNSPEC destination as AF_INET. */
    if (family == AF_UNSPEC && sock_family == AF_INET)
        family = AF_INET;
    if (family != AF_INET && family != AF_INET6)
        return refuse_family(job, key.cgroup_id, family, CONFINE_OP_SENDMSG);
    return check_inet(job, sock, address, family, &key, CONFINE_OP_SENDMSG);
}

SEC("lsm/socket_create")
int BPF_PROG(confine_socket_create, int family, int type, int protocol, int kern)
{
    struct confine_job *job;
    __u64 cgid;

    if (kern) /* the kernel's own sockets */
        return 0;
    job = current_job(&cgid);
    if (!job || (family >= 0 && family < 64 && (job->families & (1ull << family))))
        return 0;
    return refuse_family(job, cgid, family, CONFINE_OP_SOCKET) == ALLOW ? 0 : -1 /* EPERM */;
}

/* ---- cgroup sock programs (per cgroup, no lsm_cgroup slot) ---------------- */

/* The job that created each TCP/UDP socket (its cgroup id), set when the
 * socket is created and gone with it. */
struct {
    __uint(type, BPF_MAP_TYPE_SK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, __u64);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_owner SEC(".maps");

SEC("cgroup/sock_create")
int confine_sock_create(struct bpf_sock *sk)
{
    __u64 cgid = bpf_get_current_cgroup_id();

    bpf_sk_storage_get(&sock_owner, sk, &cgid, BPF_SK_STORAGE_GET_F_CREATE);
    return 1;
}

/* The job of the socket a sock_addr program runs for: its creator's, which
 * is also the current task's unless the job passed the socket on. */
static __always_inline struct confine_job *sock_addr_job(struct bpf_sock_addr *ctx, __u64 *cgid)
{
    __u64 *owner = bpf_sk_storage_get(&sock_owner, ctx->sk, 0, 0);

    *cgid = owner ? *owner : bpf_get_current_cgroup_id();
    return bpf_map_lookup_elem(&jobs, cgid);
}

/* Fills key->kind/addr/port from a sock_addr context. Returns false for a
 * protocol other than TCP and UDP. `family` is a constant per program: the
 * v4 programs may not read user_ip6. */
static __always_inline bool sock_addr_key(struct bpf_sock_addr *ctx, __u16 family, struct confine_net_key *key)
{
    if (ctx->protocol == IPPROTO_TCP)
        key->kind = CONFINE_NET_TCP;
    else if (ctx->protocol == IPPROTO_UDP)
        key->kind = CONFINE_NET_UDP;
    else
        return false;
    if (family == AF_INET) {
        __u32 ip4 = ctx->user_ip4;

        key->addr[10] = key->addr[11] = 0xff;
        __builtin_memcpy(&key->addr[12], &ip4, 4);
    } else {
        /* One constant-offset load per word: the verifier refuses
         * computed context offsets. */
        __u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2],
              w3 = ctx->user_ip6[3];

        __builtin_memcpy(&key->addr[0], &w0, 4);
        __builtin_memcpy(&key->addr[4], &w1, 4);
        __builtin_memcpy(&key->addr[8], &w2, 4);
        __builtin_memcpy(&key->addr[12], &w3, 4);
    }
    key->port = bpf_ntohs(ctx->user_port);
    return true;
}

/* bind: loopback addresses always (the job's own); others only as the
 * policy's `bind` rules list them (a rule's port 0: any port). */
static __always_inline int check_bind(struct bpf_sock_addr *ctx, __u16 family)
{
    struct confine_net_key key = {};
    struct confine_job *job = sock_addr_job(ctx, &key.cgroup_id);
    __u16 port;

    if (!job)
        return DENY;
    if (!sock_addr_key(ctx, family, &key))
        return ALLOW; /* raw and other inet sockets: no port to own */
    if (is_loopback(key.addr))
        return ALLOW;
    port = key.port;
    key.port = 0;
    if (rule_allows(&key, CONFINE_NET_BIND))
        return ALLOW;
    key.port = port;
    if (rule_allows(&key, CONFINE_NET_BIND))
        return ALLOW;
    report_inet(job, &key, CONFINE_OP_BIND);
    return verdict(job);
}

SEC("cgroup/bind4")
int confine_bind4(struct bpf_sock_addr *ctx)
{
    return check_bind(ctx, AF_INET);
}

SEC("cgroup/bind6")
int confine_bind6(struct bpf_sock_addr *ctx)
{
    return check_bind(ctx, AF_INET6);
}

/* Whether the socket a packet to `key` would reach now (a listener or a
 * bound UDP socket, wildcards included, as the kernel's own lookup finds it)
 * is one the job created. */
static __always_inline bool reaches_own_socket(struct bpf_sock_addr *ctx, const struct confine_net_key *key)
{
    struct bpf_sock_tuple t = {};
    struct bpf_sock *sk;
    __u32 len;
    __u64 *owner;
    bool own;

    if (is_v4_mapped(key->addr)) { /* the kernel connects these over IPv4 */
        __builtin_memcpy(&t.ipv4.daddr, &key->addr[12], 4);
        t.ipv4.dport = bpf_htons(key->port);
        len = sizeof(t.ipv4);
    } else {
        __builtin_memcpy(t.ipv6.daddr, key->addr, 16);
        t.ipv6.dport = bpf_htons(key->port);
        len = sizeof(t.ipv6);
    }
    if (key->kind == CONFINE_NET_TCP)
        sk = bpf_sk_lookup_tcp(ctx, &t, len, BPF_F_CURRENT_NETNS, 0);
    else
        sk = bpf_sk_lookup_udp(ctx, &t, len, BPF_F_CURRENT_NETNS, 0);
    if (!sk)
        return false;
    owner = bpf_sk_storage_get(&sock_owner, sk, 0, 0);
    own = owner && *owner == key->cgroup_id;
    bpf_sk_release(sk);
    return own;
}

/* connect and sendto to a loopback destination that no `connect` rule
 * lists (socket_connect/socket_sendmsg let those through): allowed only if
 * the socket it reaches is the job's. Deciding on the socket itself, not on
 * what the job once bound, keeps a port the job gave back (close, or
 * connect(AF_UNSPEC) on an autobound socket) out of reach once another
 * process holds it. */
static __always_inline int check_loopback(struct bpf_sock_addr *ctx, __u16 family, __u16 op)
{
    struct confine_net_key key = {};
    struct confine_job *job = sock_addr_job(ctx, &key.cgroup_id);

    if (!job)
        return DENY;
    if (!sock_addr_key(ctx, family, &key) || !is_loopback(key.addr) ||
        rule_allows(&key, CONFINE_NET_CONNECT) || reaches_own_socket(ctx, &key))
        return ALLOW;
    report_inet(job, &key, op);
    return verdict(job);
}

/* TCP Fast Open connects from sendto(MSG_FASTOPEN), with fastopen_req set
 * for the while: audited as the sendmsg it is, as socket_sendmsg does. */
static __always_inline __u16 connect_op(struct bpf_sock_addr *ctx)
{
    struct tcp_sock *tp = bpf_skc_to_tcp_sock(ctx->sk);

    return tp && tp->fastopen_req ? CONFINE_OP_SENDMSG : CONFINE_OP_CONNECT;
}

SEC("cgroup/connect4")
int confine_connect4(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET, connect_op(ctx));
}

SEC("cgroup/connect6")
int confine_connect6(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET6, connect_op(ctx));
}

SEC("cgroup/sendmsg4")
int confine_sendmsg4(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET, CONFINE_OP_SENDMSG);
}

SEC("cgroup/sendmsg6")
int confine_sendmsg6(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET6, CONFINE_OP_SENDMSG);
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
