/* Network access control.
 *
 * Hooks (lsm_cgroup, attached once to the build's parent of the jobs' cgroups,
 * so they run for every job's processes and no one else's):
 *   socket_connect      - connect(2) on TCP and UDP over IPv4 and IPv6
 *                         (v4-mapped IPv6 counts as IPv4): only the policy's
 *                         `connect` destinations, and loopback ones, which
 *                         connect4/6 below decide. Other families are refused.
 *   socket_sendmsg      - the same for sendto/sendmsg with a destination
 *                         (unconnected UDP, TCP Fast Open). A UDP send
 *                         from a socket that was never bound binds it to
 *                         the wildcard address first (inet_send_prepare),
 *                         past bind4/6: refused like listen() below when
 *                         the send goes off the machine or nowhere (to
 *                         loopback, the ingress program keeps the socket
 *                         out of reach from elsewhere). Control messages
 *                         carrying a source route (IP_RETOPTS, IPV6_RTHDR)
 *                         are refused too.
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
 *                         refused unless listed; and of inet and inet6 only
 *                         TCP and UDP. Every other inet protocol (SCTP,
 *                         MPTCP, UDP-Lite, ICMP "ping", L2TP, SMC) has ways
 *                         to connect and bind that the TCP/UDP hooks below
 *                         never see: SCTP's connectx and bindx socket
 *                         options, for one.
 *   sctp_bind_connect   - SCTP's own bind and connect paths: refused (a
 *                         job can't make SCTP sockets; this is the second
 *                         wall should one ever reach it).
 *   socket_setsockopt   - source routes (IP_OPTIONS, IPV6_RTHDR and kin):
 *                         they send packets to a first hop other than the
 *                         destination connect checked. Refused.
 *   socket_listen       - listen() on a socket that was never bound binds
 *                         it to the wildcard address (inet_csk_get_port)
 *                         without running bind4/6: allowed only where a
 *                         `bind` rule grants the wildcard address.
 *
 * cgroup sock programs (per cgroup, outside the lsm_cgroup slot budget):
 *   sock_create         - records which job created each UDP socket (a TCP
 *                         one's is read from the socket itself).
 *   bind4/6             - bind(2) of TCP/UDP: loopback addresses always (the
 *                         job's own); others only as the policy's `bind`
 *                         rules list them (a rule's port 0: any port).
 *   connect4/6, sendmsg4/6 - a loopback destination no rule lists: only if
 *                         the socket the kernel would deliver to is one of
 *                         the job's (bpf_sk_lookup_*).
 *   ingress (cgroup_skb) - packets to the job's sockets from off the
 *                         machine: only from `connect` destinations or to
 *                         `bind` addresses; the rest are dropped and
 *                         counted.
 *
 * The kernel runs socket hooks for the cgroup of the socket's creator
 * (bpf_lsm_find_cgroup_shim picks the socket/sock shim for a first argument
 * of those types), so the job is found through the socket's cgroup, not the
 * current task's.
 */
#include "bpf/path.bpf.h"
#include "bpf/net.h"

#define AF_UNSPEC   0
#define AF_UNIX     1
#define AF_INET     2
#define AF_INET6    10
#define SOCK_STREAM 1
#define SOCK_DGRAM  2

#define BPF_F_CURRENT_NETNS (-1) /* uapi bpf.h; the pinned vmlinux.h lacks it */

/* key: job cgroup id and destination; value: CONFINE_NET_* bits. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_NET_RULES);
    __type(key, struct confine_net_key);
    __type(value, __u32);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} net_rules SEC(".maps");

/* The cgroup of the socket's creator. `sk` must be a BTF pointer (a hook
 * argument, or a field of one), checked for NULL (the verifier takes
 * socket.sk as maybe NULL): direct loads, not a helper call each, as
 * connect and send pay for this. */
static __always_inline __u64 sock_cgroup_id(struct sock *sk)
{
    return sk->sk_cgrp_data.cgroup->kn->id;
}

/* The job a socket operation is decided for: the socket's creator's, or,
 * for a socket made outside any job and handed to one (inherited, passed
 * over a unix socket), the job of the task using it. NULL for neither.
 * lsm_cgroup programs run for the current task's cgroup, socket hooks
 * included (docs/design.md, "Kernel facts"), so theirs is always found. */
static __always_inline struct confine_job *sock_job(struct sock *sk, __u64 *cgid)
{
    struct confine_job *job;

    *cgid = sock_cgroup_id(sk);
    job = bpf_map_lookup_elem(&jobs, cgid);
    return job ? job : current_job(cgid);
}

/* Fills key->kind/port/addr from an IPv4 or IPv6 sockaddr. Returns 0, or -1
 * for a protocol other than TCP and UDP. */
static __always_inline int inet_key(struct confine_net_key *key, struct sock *sk, struct sockaddr *address,
                                    __u16 family)
{
    __u16 proto = sk->sk_protocol;
    /* One read for the port and the address: the hook's sockaddr is the
     * kernel's copy, a struct sockaddr_storage (move_addr_to_kernel). */
    union {
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
    } a;

    if (proto == IPPROTO_TCP)
        key->kind = CONFINE_NET_TCP;
    else if (proto == IPPROTO_UDP)
        key->kind = CONFINE_NET_UDP;
    else
        return -1;

    bpf_probe_read_kernel(&a, sizeof(a), address);
    if (family == AF_INET) {
        key->port = bpf_ntohs(a.v4.sin_port);
        key->addr[10] = 0xff;
        key->addr[11] = 0xff;
        __builtin_memcpy(&key->addr[12], &a.v4.sin_addr, 4);
    } else {
        key->port = bpf_ntohs(a.v6.sin6_port);
        __builtin_memcpy(key->addr, &a.v6.sin6_addr, 16);
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

static __always_inline void report_inet_why(struct confine_job *job, const struct confine_net_key *key,
                                            __u16 op, __u8 proto, __u8 reason)
{
    struct confine_event *e =
        event_reserve(job, key->cgroup_id, op, reason, CONFINE_EVENT_SIZE(sizeof(struct confine_inet)));

    if (e) {
        e->target_kind = CONFINE_TARGET_INET;
        __builtin_memcpy(e->target.inet.addr, key->addr, 16);
        e->target.inet.port = key->port;
        e->target.inet.proto = proto;
        bpf_ringbuf_submit(e, 0);
    }
}

static __always_inline void report_inet_proto(struct confine_job *job, const struct confine_net_key *key,
                                              __u16 op, __u8 proto)
{
    report_inet_why(job, key, op, proto, CONFINE_REASON_POLICY);
}

static __always_inline void report_inet(struct confine_job *job, const struct confine_net_key *key, __u16 op)
{
    report_inet_proto(job, key, op, key->kind == CONFINE_NET_UDP ? IPPROTO_UDP : IPPROTO_TCP);
}

/* Refuses a socket kind no rule can grant, reporting what it is. */
static __always_inline int refuse_socket(struct confine_job *job, __u64 cgid, __u16 op, __u16 family,
                                         __u16 type, __u16 protocol)
{
    struct confine_event *e =
        event_reserve(job, cgid, op, CONFINE_REASON_POLICY, CONFINE_EVENT_SIZE(sizeof(struct confine_sock)));

    if (e) {
        e->target_kind = CONFINE_TARGET_SOCKET;
        e->target.sock.family = family;
        e->target.sock.type = type;
        e->target.sock.protocol = protocol;
        e->target.sock.pad = 0;
        bpf_ringbuf_submit(e, 0);
    }
    return verdict(job);
}

static __always_inline int refuse_family(struct confine_job *job, __u64 cgid, __u16 family, __u16 op)
{
    return refuse_socket(job, cgid, op, family, 0, 0);
}

static __always_inline int refuse_source_route(struct confine_job *job, __u64 cgid, __u16 op, __u16 family)
{
    struct confine_event *e = event_reserve(job, cgid, op, CONFINE_REASON_SOURCE_ROUTE,
                                            CONFINE_EVENT_SIZE(sizeof(struct confine_sock)));

    if (e) {
        e->target_kind = CONFINE_TARGET_SOCKET;
        e->target.sock.family = family;
        e->target.sock.type = 0;
        e->target.sock.protocol = 0;
        e->target.sock.pad = 0;
        bpf_ringbuf_submit(e, 0);
    }
    return verdict(job);
}

/* Decides a TCP/UDP destination: a `connect` rule allows it; a loopback
 * one is left to the connect4/6 and sendmsg4/6 programs below, which see the
 * socket it would reach. `op` names a refusal. Sockets of other inet
 * protocols can't be made by a job (socket_create); one that got here
 * anyway is refused as what it is. */
static __always_inline int check_inet(struct confine_job *job, struct sock *sk, struct sockaddr *address,
                                      __u16 family, struct confine_net_key *key, __u16 op)
{
    if (inet_key(key, sk, address, family) != 0)
        return refuse_socket(job, key->cgroup_id, op, family, sk->sk_type, sk->sk_protocol);
    /* Loopback is decided by the cgroup connect and sendmsg programs,
     * which run for the socket's cgroup: not for a socket handed to the
     * job from outside any job, whose loopback destinations are decided
     * here, by the rules alone. */
    if ((is_loopback(key->addr) && sock_cgroup_id(sk) == key->cgroup_id) ||
        rule_allows(key, CONFINE_NET_CONNECT))
        return ALLOW;
    report_inet(job, key, op);
    return verdict(job);
}

/* The socket has no local port yet, so the kernel is about to bind it to
 * the wildcard address (inet_autobind, inet_csk_get_port) without running
 * the bind4/6 programs. Allowed only where a `bind` rule grants the
 * wildcard address (with port 0, as any ephemeral port is picked);
 * otherwise refused and reported as the bind it is. Returns ALLOW for a
 * socket that is bound already. */
static __always_inline int check_autobind(struct confine_job *job, __u64 cgid, struct sock *sk, __u16 kind)
{
    struct confine_net_key key = {};

    if (BPF_CORE_READ(sk, __sk_common.skc_num))
        return ALLOW;
    key.cgroup_id = cgid;
    key.kind = kind;
    if (BPF_CORE_READ(sk, __sk_common.skc_family) == AF_INET)
        key.addr[10] = key.addr[11] = 0xff; /* 0.0.0.0, v4-mapped */
    if (rule_allows(&key, CONFINE_NET_BIND))
        return ALLOW;
    report_inet(job, &key, CONFINE_OP_BIND);
    return verdict(job);
}

SEC("lsm_cgroup/socket_connect")
int BPF_PROG(confine_socket_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
    struct sock *sk = sock->sk;
    struct confine_net_key key = {};
    struct confine_job *job;
    __u16 family;

    if (!sk)
        return DENY;
    job = sock_job(sk, &key.cgroup_id);
    if (!job)
        return DENY;

    family = address->sa_family;
    switch (family) {
    case AF_UNSPEC: /* dissolves a UDP association; reaches nobody */
    case AF_UNIX:   /* decided on the peer by the unix_* hooks below */
        return ALLOW;
    case AF_INET:
    case AF_INET6:
        return check_inet(job, sk, address, family, &key, CONFINE_OP_CONNECT);
    default:
        return refuse_family(job, key.cgroup_id, family, CONFINE_OP_CONNECT);
    }
}

/* sendto/sendmsg with a destination: unconnected UDP, and TCP Fast Open
 * (MSG_FASTOPEN connects without connect(2)). Sends without a destination
 * go where a checked connect pointed the socket. */
/* Options that put another address in front of the destination (IPv4
 * loose/strict source routes, IPv6 routing headers, incl. segment routing):
 * the packet is routed to the first hop they name, not to the destination
 * connect/sendmsg checked (fl6_update_dst, ip_route_connect's faddr). From
 * include/uapi/linux/in.h and in6.h. */
#define SOL_IP              0
#define SOL_IPV6            41
#define IP_OPTIONS          4
#define IP_RETOPTS          7
#define IPV6_2292PKTOPTIONS 6
#define IPV6_2292RTHDR      5
#define IPV6_FLOWLABEL_MGR  32 /* a flow label can carry options, a routing header among them */
#define IPV6_RTHDR          57
#define CMSG_MAX            8 /* control messages checked per send; more: refused */

static __always_inline bool source_route_cmsg(int level, int type)
{
    return (level == SOL_IP && type == IP_RETOPTS) ||
           (level == SOL_IPV6 && (type == IPV6_RTHDR || type == IPV6_2292RTHDR));
}

/* Whether a send's control messages include a source route, or can't all
 * be read (then: yes). The kernel has copied them into its own memory by
 * now (____sys_sendmsg); a buffer still in user memory (io_uring) can't be
 * read race-free, and is refused. */
static __always_inline bool routes_elsewhere(struct msghdr *msg)
{
    const __u8 *ctl = BPF_CORE_READ(msg, msg_control);
    __u64 len = BPF_CORE_READ(msg, msg_controllen), off = 0;
    struct cmsghdr h;

    for (int i = 0; i < CMSG_MAX; i++) {
        if (off + sizeof(h) > len)
            return false;
        if (bpf_probe_read_kernel(&h, sizeof(h), ctl + off) != 0)
            return true;
        if (source_route_cmsg(h.cmsg_level, h.cmsg_type))
            return true;
        if (h.cmsg_len < sizeof(h))
            return false; /* the kernel refuses the message */
        off += (h.cmsg_len + 7) & ~7ULL;
    }
    return off + sizeof(h) <= len;
}

/* sendto/sendmsg with a destination: unconnected UDP, and TCP Fast Open
 * (MSG_FASTOPEN connects without connect(2)). Sends without a destination
 * go where a checked connect pointed the socket, unless a source route in
 * their control messages sends them elsewhere, or the socket was never
 * bound and is about to be, to the wildcard address. */
SEC("lsm_cgroup/socket_sendmsg")
int BPF_PROG(confine_socket_sendmsg, struct socket *sock, struct msghdr *msg, int size)
{
    struct sock *sk = sock->sk;
    struct sockaddr *address = msg->msg_name;
    struct confine_net_key key = {};
    struct confine_job *job;
    __u16 family, sock_family;

    /* Decided by the socket's family: unix datagrams by unix_may_send on the
     * peer, other families by socket_create. */
    if (!sk)
        return DENY;
    sock_family = sk->__sk_common.skc_family;
    if (sock_family != AF_INET && sock_family != AF_INET6)
        return ALLOW;
    /* The common case, a plain send on a connected socket. */
    if (!address && !msg->msg_controllen && sk->__sk_common.skc_num)
        return ALLOW;
    job = sock_job(sk, &key.cgroup_id);
    if (!job)
        return DENY;
    if (BPF_CORE_READ(msg, msg_controllen) && routes_elsewhere(msg) &&
        refuse_source_route(job, key.cgroup_id, CONFINE_OP_SENDMSG, sock_family) != ALLOW)
        return DENY;
    if (address) {
        family = BPF_CORE_READ(address, sa_family);
        /* udp_sendmsg() takes an AF_UNSPEC destination as AF_INET. */
        if (family == AF_UNSPEC && sock_family == AF_INET)
            family = AF_INET;
        if (family != AF_INET && family != AF_INET6)
            return refuse_family(job, key.cgroup_id, family, CONFINE_OP_SENDMSG);
        /* The destination first: a refused one is what the log should say. */
        if (check_inet(job, sk, address, family, &key, CONFINE_OP_SENDMSG) != ALLOW)
            return DENY;
        /* To loopback, the autobind is the job's own business: nothing from
         * off the machine reaches the socket (confine_ingress). */
        if (is_loopback(key.addr))
            return ALLOW;
    }
    if (BPF_CORE_READ(sk, sk_protocol) == IPPROTO_UDP)
        return check_autobind(job, key.cgroup_id, sk, CONFINE_NET_UDP);
    return ALLOW;
}

/* inet and inet6: TCP and UDP only. `type` is already masked with
 * SOCK_TYPE_MASK (__sys_socket_create), and protocol 0 picks the type's
 * default, which for SOCK_SEQPACKET is SCTP: hence the type check. */
static __always_inline bool tcp_or_udp(int type, int protocol)
{
    return (type == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP)) ||
           (type == SOCK_DGRAM && (protocol == 0 || protocol == IPPROTO_UDP));
}

SEC("lsm/socket_create")
int BPF_PROG(confine_socket_create, int family, int type, int protocol, int kern)
{
    struct confine_job *job;
    __u64 cgid;

    if (kern) /* the kernel's own sockets */
        return 0;
    job = current_job(&cgid);
    if (!job)
        return 0;
    if (family >= 0 && family < 64 && (job->families & (1ull << family)) &&
        ((family != AF_INET && family != AF_INET6) || tcp_or_udp(type, protocol)))
        return 0;
    return as_errno(refuse_socket(job, cgid, CONFINE_OP_SOCKET, family, type, protocol));
}

/* SCTP_SOCKOPT_CONNECTX* and SCTP_SENDMSG_CONNECT connect; the rest bind
 * or set addresses (include/uapi/linux/sctp.h). */
#define SCTP_SOCKOPT_CONNECTX_OLD 107
#define SCTP_SOCKOPT_CONNECTX     110
#define SCTP_SOCKOPT_CONNECTX3    111
#define SCTP_SENDMSG_CONNECT      120

SEC("lsm/sctp_bind_connect")
int BPF_PROG(confine_sctp_bind_connect, struct sock *sk, int optname, struct sockaddr *address, int addrlen)
{
    struct confine_job *job;
    __u16 op = CONFINE_OP_BIND;
    __u64 cgid;

    job = sock_job(sk, &cgid);
    if (!job)
        return 0;
    if (optname == SCTP_SOCKOPT_CONNECTX_OLD || optname == SCTP_SOCKOPT_CONNECTX ||
        optname == SCTP_SOCKOPT_CONNECTX3 || optname == SCTP_SENDMSG_CONNECT)
        op = CONFINE_OP_CONNECT;
    return as_errno(refuse_socket(job, cgid, op, BPF_CORE_READ(address, sa_family),
                                  BPF_CORE_READ(sk, sk_type), IPPROTO_SCTP));
}

SEC("lsm/socket_listen")
int BPF_PROG(confine_socket_listen, struct socket *sock, int backlog)
{
    struct sock *sk = sock->sk;
    struct confine_job *job;
    __u16 family;
    __u64 cgid;

    if (!sk)
        return 0;
    job = sock_job(sk, &cgid);
    if (!job)
        return 0;
    family = BPF_CORE_READ(sk, __sk_common.skc_family);
    if ((family != AF_INET && family != AF_INET6) || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
        return 0; /* unix: bound by path_mknod or as the job's abstract name */
    return as_errno(check_autobind(job, cgid, sk, CONFINE_NET_TCP));
}

SEC("lsm/socket_setsockopt")
int BPF_PROG(confine_socket_setsockopt, struct socket *sock, int level, int optname)
{
    struct sock *sk;
    struct confine_job *job;
    __u64 cgid;

    if (!(level == SOL_IP && optname == IP_OPTIONS) &&
        !(level == SOL_IPV6 && (optname == IPV6_RTHDR || optname == IPV6_2292RTHDR ||
                                optname == IPV6_2292PKTOPTIONS || optname == IPV6_FLOWLABEL_MGR)))
        return 0;
    sk = sock->sk;
    if (!sk)
        return 0;
    job = sock_job(sk, &cgid);
    if (!job)
        return 0;
    return as_errno(
        refuse_source_route(job, cgid, CONFINE_OP_SETSOCKOPT, BPF_CORE_READ(sk, __sk_common.skc_family)));
}

/* ---- cgroup sock programs (per cgroup, no lsm_cgroup slot) ---------------- */

/* The job that created each UDP socket (its cgroup id), set when the
 * socket is created and gone with it. A sock_addr program reaches a TCP
 * socket's own record of its creator's cgroup (sk_cgrp_data) through
 * bpf_skc_to_tcp_sock; a UDP one it can't on 6.1 (bpf_skc_to_udp6_sock is
 * IPv6 only), so UDP pays for this storage and TCP doesn't. */
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

    if (sk->protocol == IPPROTO_UDP)
        bpf_sk_storage_get(&sock_owner, sk, &cgid, BPF_SK_STORAGE_GET_F_CREATE);
    return 1;
}

/* The cgroup id of a TCP or UDP socket's creator, or 0 if unknown (a UDP
 * socket made before the job's programs were attached). */
static __always_inline __u64 sock_owner_id(struct bpf_sock *sk)
{
    struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
    __u64 *owner, id;

    if (tp) {
        id = tp->inet_conn.icsk_inet.sk.sk_cgrp_data.cgroup->kn->id;
        /* Else clang makes this load and the one below a single load from
         * either pointer, which the verifier refuses. */
        barrier_var(id);
        return id;
    }
    owner = bpf_sk_storage_get(&sock_owner, sk, 0, 0);
    return owner ? *owner : 0;
}

/* The job of the socket a sock_addr program runs for: its creator's, which
 * is also the current task's unless the job passed the socket on. */
static __always_inline struct confine_job *sock_addr_job(struct bpf_sock_addr *ctx, __u64 *cgid)
{
    *cgid = sock_owner_id(ctx->sk);
    if (!*cgid)
        *cgid = bpf_get_current_cgroup_id();
    return bpf_map_lookup_elem(&jobs, cgid);
}

/* Fills key->kind/addr/port from a sock_addr context. Returns false for a
 * protocol other than TCP and UDP. `family` is a constant per program: the
 * v4 programs may not read user_ip6. */
static __always_inline bool sock_addr_key(struct bpf_sock_addr *ctx, __u16 family,
                                          struct confine_net_key *key)
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
        __u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1], w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];

        __builtin_memcpy(&key->addr[0], &w0, 4);
        __builtin_memcpy(&key->addr[4], &w1, 4);
        __builtin_memcpy(&key->addr[8], &w2, 4);
        __builtin_memcpy(&key->addr[12], &w3, 4);
    }
    key->port = bpf_ntohs(ctx->user_port);
    return true;
}

enum reach { REACH_NOBODY, REACH_OWN, REACH_OTHER };

/* Who owns the socket a packet to `key` would reach now (a listener or a
 * bound UDP socket, wildcards included, as the kernel's own lookup finds
 * it): nobody, the job, or someone else. */
static __always_inline enum reach socket_at(struct bpf_sock_addr *ctx, const struct confine_net_key *key)
{
    struct bpf_sock_tuple t = {};
    struct bpf_sock *sk;
    __u32 len;
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
        return REACH_NOBODY;
    own = sock_owner_id(sk) == key->cgroup_id;
    bpf_sk_release(sk);
    return own ? REACH_OWN : REACH_OTHER;
}

/* bind: loopback addresses always (the job's own), unless the port is
 * held by a socket outside the job: the kernel lets a socket of the same
 * uid join another's SO_REUSEPORT group, which would hand the job a share
 * of a host service's connections. Other addresses only as the policy's
 * `bind` rules list them (a rule's port 0: any port). */
static __always_inline int check_bind(struct bpf_sock_addr *ctx, __u16 family)
{
    struct confine_net_key key = {};
    struct confine_job *job = sock_addr_job(ctx, &key.cgroup_id);
    __u16 port;

    if (!job)
        return DENY;
    if (!sock_addr_key(ctx, family, &key))
        return ALLOW; /* raw and other inet sockets: no port to own */
    if (is_loopback(key.addr) && (!key.port || socket_at(ctx, &key) != REACH_OTHER))
        return ALLOW;
    if (is_loopback(key.addr)) {
        report_inet(job, &key, CONFINE_OP_BIND);
        return verdict(job);
    }
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

#define ECONNREFUSED 111

/* TCP Fast Open connects from sendto(MSG_FASTOPEN), with fastopen_req set
 * for the while: audited as the sendmsg it is, as socket_sendmsg does. */
static __always_inline __u16 connect_op(struct bpf_sock_addr *ctx)
{
    struct tcp_sock *tp = bpf_skc_to_tcp_sock(ctx->sk);

    return tp && tp->fastopen_req ? CONFINE_OP_SENDMSG : CONFINE_OP_CONNECT;
}

/* connect and sendto to a loopback destination that no `connect` rule
 * lists (socket_connect/socket_sendmsg let those through): allowed only if
 * the socket it reaches is the job's. Deciding on the socket itself, not on
 * what the job once bound, keeps a port the job gave back (close, or
 * connect(AF_UNSPEC) on an autobound socket) out of reach once another
 * process holds it.
 *
 * Where nothing is there, there is nothing to protect: the job gets the
 * kernel's own answer for a closed port, ECONNREFUSED, and no audit
 * record, so tools that wait for their own server to come up keep
 * waiting. It is refused here rather than let through, so a host service
 * that starts listening after this lookup still never sees the
 * connection. (The job learns no more than /proc/net/tcp tells it.)
 * "Nothing there" is what the lookup finds, and it can't find a socket
 * bound to a device (SO_BINDTODEVICE: the helpers look up with ifindex
 * 0): refusing keeps those out of reach too. Audit mode, which lets the
 * connection through, records it (reason nothing_listening), as it does
 * every refusal enforce mode would make. `connect`: run for a connect (or
 * a Fast Open send), not a UDP send. */
static __always_inline int check_loopback(struct bpf_sock_addr *ctx, __u16 family, bool connect)
{
    struct confine_net_key key = {};
    struct confine_job *job = sock_addr_job(ctx, &key.cgroup_id);
    enum reach reach;
    __u16 op;

    if (!job)
        return DENY;
    if (!sock_addr_key(ctx, family, &key) || !is_loopback(key.addr))
        return ALLOW;
    /* The job's own server first: the common case, and no rule lookup. */
    reach = socket_at(ctx, &key);
    if (reach == REACH_OWN || rule_allows(&key, CONFINE_NET_CONNECT))
        return ALLOW;
    op = connect ? connect_op(ctx) : CONFINE_OP_SENDMSG;
    if (reach == REACH_NOBODY && (job->flags & CONFINE_JOB_AUDIT)) {
        report_inet_why(job, &key, op, key.kind == CONFINE_NET_UDP ? IPPROTO_UDP : IPPROTO_TCP,
                        CONFINE_REASON_NOTHING_LISTENING);
        return ALLOW;
    }
    if (reach == REACH_NOBODY) {
        bpf_set_retval(-ECONNREFUSED);
        return DENY;
    }
    report_inet(job, &key, op);
    return verdict(job);
}

SEC("cgroup/connect4")
int confine_connect4(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET, true);
}

SEC("cgroup/connect6")
int confine_connect6(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET6, true);
}

SEC("cgroup/sendmsg4")
int confine_sendmsg4(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET, false);
}

SEC("cgroup/sendmsg6")
int confine_sendmsg6(struct bpf_sock_addr *ctx)
{
    return check_loopback(ctx, AF_INET6, false);
}

/* ---- inbound -------------------------------------------------------------- */

#define LOOPBACK_IFINDEX 1 /* every network namespace's lo */
#define ETH_P_IP         0x0800
#define ETH_P_IPV6       0x86DD

/* Packets delivered to a job's sockets. What never left the machine (it
 * came in on lo) passes; from off the machine, only replies from a
 * `connect` destination and traffic to a `bind` address. This is the
 * second wall behind the bind programs and socket_listen: whatever way a
 * socket came to be bound to the wildcard address (an automatic bind the
 * hooks can't see, such as 6.1's sendfile into an unbound UDP socket, or a
 * UDP connect that failed after its autobind), nobody elsewhere reaches
 * it. Drops are counted (confine_job.inbound), not logged one by one. */
SEC("cgroup_skb/ingress")
int confine_ingress(struct __sk_buff *skb)
{
    struct confine_net_key key = {};
    struct confine_job *job;
    struct bpf_sock *sk;
    __u8 local[16] = {};
    __u16 ports[2];
    __u32 l4;
    __u16 port;

    if (skb->ingress_ifindex == LOOPBACK_IFINDEX)
        return 1;
    key.cgroup_id = bpf_skb_cgroup_id(skb);
    job = bpf_map_lookup_elem(&jobs, &key.cgroup_id);
    if (!job)
        return 1;
    sk = skb->sk;
    if (sk)
        sk = bpf_sk_fullsock(sk);
    if (!sk)
        goto drop;
    if (sk->protocol == IPPROTO_TCP)
        key.kind = CONFINE_NET_TCP;
    else if (sk->protocol == IPPROTO_UDP)
        key.kind = CONFINE_NET_UDP;
    else
        goto drop;
    /* The data starts at the network header. */
    if (skb->protocol == bpf_htons(ETH_P_IP)) {
        __u8 vihl;

        if (bpf_skb_load_bytes(skb, 0, &vihl, 1) || bpf_skb_load_bytes(skb, 12, &key.addr[12], 4) ||
            bpf_skb_load_bytes(skb, 16, &local[12], 4))
            goto drop;
        key.addr[10] = key.addr[11] = local[10] = local[11] = 0xff;
        l4 = (vihl & 0xf) * 4;
    } else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
        __u8 next;

        if (bpf_skb_load_bytes(skb, 6, &next, 1) || bpf_skb_load_bytes(skb, 8, key.addr, 16) ||
            bpf_skb_load_bytes(skb, 24, local, 16))
            goto drop;
        if (next != sk->protocol) /* extension headers: nothing a job needs from off the machine */
            goto drop;
        l4 = 40;
    } else {
        goto drop;
    }
    if (bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)))
        goto drop;
    key.port = bpf_ntohs(ports[0]);
    if (rule_allows(&key, CONFINE_NET_CONNECT))
        return 1;
    /* To a bind rule's address: the one the packet came to, or the
     * wildcard (a socket bound to 0.0.0.0 or :: under such a rule, and
     * the connections it accepted). Port 0 in a rule: any port. */
    port = bpf_ntohs(ports[1]);
    for (int i = 0; i < 3; i++) {
        if (i == 0)
            __builtin_memcpy(key.addr, local, 16);
        else
            __builtin_memset(key.addr, 0, 16);
        if (i == 1)
            key.addr[10] = key.addr[11] = 0xff; /* 0.0.0.0 */
        key.port = 0;
        if (rule_allows(&key, CONFINE_NET_BIND))
            return 1;
        key.port = port;
        if (rule_allows(&key, CONFINE_NET_BIND))
            return 1;
    }
drop:
    __sync_fetch_and_add(&job->inbound, 1);
    return (job->flags & CONFINE_JOB_AUDIT) ? 1 : 0;
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

    job = sock_job(sk, &key.cgroup_id);
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
        key.name_len = len;
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
    if (have_path) {
        report_resolved(job, key.cgroup_id, op, r.reason, &r, CONFINE_TARGET_UNIX);
        scratch_release(r.s);
        return ret;
    }
    e = event_reserve(job, key.cgroup_id, op, CONFINE_REASON_POLICY,
                      CONFINE_EVENT_SIZE(CONFINE_UNIX_PATH_MAX));
    if (e) {
        e->target_kind = CONFINE_TARGET_UNIX_ABSTRACT;
        e->target_len = len;
        __builtin_memcpy(e->target.path, key.addr, CONFINE_UNIX_PATH_MAX);
        bpf_ringbuf_submit(e, 0);
    }
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
    struct sock *sk = sock->sk, *peer = other->sk;

    if (!sk || !peer)
        return DENY;
    return check_unix_peer(sk, peer, CONFINE_OP_SENDMSG);
}
