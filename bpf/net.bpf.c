/* Network access control.
 *
 * Hooks (lsm_cgroup, attached to each job's cgroup):
 *   socket_connect      - connect(2) on TCP and UDP over IPv4 and IPv6
 *                         (v4-mapped IPv6 counts as IPv4): only the policy's
 *                         `connect` destinations and loopback ports the job
 *                         bound itself. Other families are refused.
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
 *   bind4/6             - bind(2) of TCP/UDP: loopback addresses always (the
 *                         job's own); others only as the policy's `bind`
 *                         rules list them (a rule's port 0: any port).
 *   post_bind4/6, sock_release - keep `job_ports`, the TCP/UDP ports the
 *                         job's sockets are bound to.
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

/* key: job cgroup id, TCP or UDP, port; value: how many of the job's
 * sockets are bound to that port. Filled by post_bind4/6 and emptied by
 * sock_release, so "the job's own loopback port" is exact while it lasts. */
struct port_key {
    __u64 cgroup_id;
    __u16 kind; /* CONFINE_NET_TCP or CONFINE_NET_UDP */
    __u16 port;
    __u32 pad;
    __u8 addr[16]; /* the bound address, IPv4 v4-mapped */
};
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_NET_RULES);
    __type(key, struct port_key);
    __type(value, __u32);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} job_ports SEC(".maps");

static __always_inline bool is_loopback(const __u8 *a)
{
    if (a[10] == 0xff && a[11] == 0xff) /* v4-mapped: 127.0.0.0/8 */
        return a[12] == 127;
    /* ::1; `a` is 8-byte aligned (confine_net_key.addr) */
    return *(const __u64 *)a == 0 && *(const __u64 *)(a + 8) == bpf_cpu_to_be64(1);
}

/* Whether one of the job's own sockets is bound to this loopback address and
 * port, or to the wildcard address of either family on that port (a socket
 * on [::] also takes IPv4). */
static __always_inline bool own_port(const struct confine_net_key *key)
{
    struct port_key pk = {.cgroup_id = key->cgroup_id, .kind = key->kind, .port = key->port};

    __builtin_memcpy(pk.addr, key->addr, 16);
    if (bpf_map_lookup_elem(&job_ports, &pk))
        return true;
    if (pk.addr[10] == 0xff) { /* v4-mapped: 0.0.0.0 */
        pk.addr[12] = pk.addr[13] = pk.addr[14] = pk.addr[15] = 0;
        if (bpf_map_lookup_elem(&job_ports, &pk))
            return true;
    }
    __builtin_memset(pk.addr, 0, 16); /* :: */
    return bpf_map_lookup_elem(&job_ports, &pk) != NULL;
}

/* Decides a TCP/UDP destination: a `connect` rule, or a loopback port one of
 * the job's own sockets is bound to. `op` names a refusal. */
static __always_inline int check_inet(struct confine_job *job, struct socket *sock,
                                      struct sockaddr *address, __u16 family,
                                      struct confine_net_key *key, __u16 op)
{
    struct confine_event *e;
    __u32 *ops;

    if (inet_key(key, sock, address, family) == 0) {
        ops = bpf_map_lookup_elem(&net_rules, key);
        if (ops && (*ops & CONFINE_NET_CONNECT))
            return ALLOW;
        if (is_loopback(key->addr) && own_port(key))
            return ALLOW;
    }
    e = event_reserve(job, key->cgroup_id, op, CONFINE_REASON_POLICY);
    if (e) {
        e->target_kind = CONFINE_TARGET_INET;
        __builtin_memcpy(e->target.inet.addr, key->addr, 16);
        e->target.inet.port = key->port;
        e->target.inet.proto = key->kind == CONFINE_NET_UDP ? IPPROTO_UDP : IPPROTO_TCP;
        bpf_ringbuf_submit(e, 0);
    }
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

/* `family` is a constant per program: bind4 may not read user_ip6. */
static __always_inline int check_bind(struct bpf_sock_addr *ctx, __u16 family)
{
    struct confine_net_key key = {};
    struct confine_event *e;
    struct confine_job *job;
    __u32 *ops;

    key.cgroup_id = bpf_get_current_cgroup_id();
    job = bpf_map_lookup_elem(&jobs, &key.cgroup_id);
    if (!job)
        return DENY;
    if (ctx->protocol == IPPROTO_TCP)
        key.kind = CONFINE_NET_TCP;
    else if (ctx->protocol == IPPROTO_UDP)
        key.kind = CONFINE_NET_UDP;
    else
        return ALLOW; /* raw and other inet sockets: no port to own */
    if (family == AF_INET) {
        __u32 ip4 = ctx->user_ip4;

        key.addr[10] = key.addr[11] = 0xff;
        __builtin_memcpy(&key.addr[12], &ip4, 4);
    } else {
        /* One constant-offset load per word: the verifier refuses
         * computed context offsets. */
        __u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2],
              w3 = ctx->user_ip6[3];

        __builtin_memcpy(&key.addr[0], &w0, 4);
        __builtin_memcpy(&key.addr[4], &w1, 4);
        __builtin_memcpy(&key.addr[8], &w2, 4);
        __builtin_memcpy(&key.addr[12], &w3, 4);
    }
    if (is_loopback(key.addr))
        return ALLOW;
    key.port = bpf_ntohs(ctx->user_port);
    ops = bpf_map_lookup_elem(&net_rules, &key);
    if (ops && (*ops & CONFINE_NET_BIND))
        return ALLOW;
    key.port = 0; /* a rule for any port on this address */
    ops = bpf_map_lookup_elem(&net_rules, &key);
    if (ops && (*ops & CONFINE_NET_BIND))
        return ALLOW;

    e = event_reserve(job, key.cgroup_id, CONFINE_OP_BIND, CONFINE_REASON_POLICY);
    if (e) {
        e->target_kind = CONFINE_TARGET_INET;
        __builtin_memcpy(e->target.inet.addr, key.addr, 16);
        e->target.inet.port = bpf_ntohs(ctx->user_port);
        e->target.inet.proto = key.kind == CONFINE_NET_UDP ? IPPROTO_UDP : IPPROTO_TCP;
        bpf_ringbuf_submit(e, 0);
    }
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

/* ---- the job's own ports (cgroup sock programs: no LSM slot) ------------- */

/* key: socket cookie; value: the job_ports entry the socket counts in.
 * sock_release can't read a socket's port, but it can name the socket. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_NET_RULES);
    __type(key, __u64);
    __type(value, struct port_key);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} bound_socks SEC(".maps");

/* `family` is a constant per program: post_bind4 may not read src_ip6. */
static __always_inline int record_bind(struct bpf_sock *sk, __u16 family)
{
    __u64 cookie = bpf_get_socket_cookie(sk);
    struct port_key pk = {};
    __u32 one = 1, *count;

    if (sk->protocol == IPPROTO_TCP)
        pk.kind = CONFINE_NET_TCP;
    else if (sk->protocol == IPPROTO_UDP)
        pk.kind = CONFINE_NET_UDP;
    else
        return 1;
    pk.cgroup_id = bpf_get_current_cgroup_id();
    pk.port = sk->src_port;
    if (family == AF_INET) {
        __u32 ip4 = sk->src_ip4;

        pk.addr[10] = pk.addr[11] = 0xff;
        __builtin_memcpy(&pk.addr[12], &ip4, 4);
    } else {
        __u32 w0 = sk->src_ip6[0], w1 = sk->src_ip6[1], w2 = sk->src_ip6[2], w3 = sk->src_ip6[3];

        __builtin_memcpy(&pk.addr[0], &w0, 4);
        __builtin_memcpy(&pk.addr[4], &w1, 4);
        __builtin_memcpy(&pk.addr[8], &w2, 4);
        __builtin_memcpy(&pk.addr[12], &w3, 4);
    }
    if (!bpf_map_lookup_elem(&jobs, &pk.cgroup_id) ||
        bpf_map_update_elem(&bound_socks, &cookie, &pk, BPF_NOEXIST))
        return 1;
    count = bpf_map_lookup_elem(&job_ports, &pk);
    if (count)
        __sync_fetch_and_add(count, 1);
    else
        bpf_map_update_elem(&job_ports, &pk, &one, BPF_NOEXIST);
    return 1;
}

SEC("cgroup/post_bind4")
int confine_post_bind4(struct bpf_sock *sk)
{
    return record_bind(sk, AF_INET);
}

SEC("cgroup/post_bind6")
int confine_post_bind6(struct bpf_sock *sk)
{
    return record_bind(sk, AF_INET6);
}

SEC("cgroup/sock_release")
int confine_sock_release(struct bpf_sock *sk)
{
    __u64 cookie = bpf_get_socket_cookie(sk);
    struct port_key *pk = bpf_map_lookup_elem(&bound_socks, &cookie);
    __u32 *count;

    if (!pk)
        return 1;
    count = bpf_map_lookup_elem(&job_ports, pk);
    if (count && __sync_fetch_and_add(count, -1) <= 1)
        bpf_map_delete_elem(&job_ports, pk);
    bpf_map_delete_elem(&bound_socks, &cookie);
    return 1;
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
