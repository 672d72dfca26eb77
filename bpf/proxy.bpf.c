/* Who may reach a job's filtering proxy: that job's sockets only.
 *
 * Program (attached once to the build's proxies parent cgroup, inherited
 * by each proxy's cgroup):
 *   ingress (cgroup_skb) - a TCP SYN to the proxy's listening address and
 *                          port passes only if the socket that sent it is
 *                          one of the job's: on loopback the sender is
 *                          still in the established table, found by the
 *                          packet's reversed 4-tuple (bpf_sk_lookup_tcp),
 *                          and its cgroup must be the job's. Other jobs are
 *                          refused earlier, by their own connect hooks (no
 *                          rule lists this port); this wall is for
 *                          processes outside any job, which no hook
 *                          watches. Their SYNs are dropped, so their
 *                          connects time out. Drops count as the job's
 *                          `inbound` packets. Only SYNs are checked: a
 *                          connection exists only through one, and the
 *                          job's closed sockets, gone from the table, still
 *                          send their last ACKs.
 *
 * Everything else reaching the proxy's cgroup (its own upstream
 * connections' replies) passes. A proxy cgroup with no `proxies` entry
 * gets nothing: it is being set up or torn down.
 */
#include "bpf/common.bpf.h"
#include "bpf/proxy.h"

#define ETH_P_IP            0x0800
#define TCP_FLAG_SYN        0x02 /* in the TCP header's 14th byte */
#define BPF_F_CURRENT_NETNS (-1) /* uapi bpf.h; the pinned vmlinux.h lacks it */

/* key: the proxy's cgroup id. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CONFINE_MAX_JOBS);
    __type(key, __u64);
    __type(value, struct confine_proxy);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} proxies SEC(".maps");

SEC("cgroup_skb/ingress")
int confine_proxy_ingress(struct __sk_buff *skb)
{
    __u64 cgid = bpf_skb_cgroup_id(skb);
    struct confine_proxy *p = bpf_map_lookup_elem(&proxies, &cgid);
    struct bpf_sock_tuple t = {};
    struct confine_job *job;
    struct bpf_sock *sk;
    __u32 addrs[2];
    __u16 ports[2];
    __u8 vihl, proto, flags;

    if (!p)
        return 0;
    /* The proxy listens on IPv4 only; an AF_INET6 client reaches it as
     * ::ffff:127.0.0.1, in IPv4 packets. */
    if (skb->protocol != bpf_htons(ETH_P_IP))
        return 1;
    if (bpf_skb_load_bytes(skb, 0, &vihl, 1) || bpf_skb_load_bytes(skb, 9, &proto, 1) ||
        bpf_skb_load_bytes(skb, 12, addrs, sizeof(addrs)))
        return 0;
    if (proto != IPPROTO_TCP)
        return 1;
    if (bpf_skb_load_bytes(skb, (vihl & 0xf) * 4, ports, sizeof(ports)) ||
        bpf_skb_load_bytes(skb, (vihl & 0xf) * 4 + 13, &flags, 1))
        return 0;
    if (addrs[1] != p->addr || ports[1] != bpf_htons(p->port) || !(flags & TCP_FLAG_SYN))
        return 1;

    /* The sender's socket: local end = the packet's source. */
    t.ipv4.saddr = addrs[1];
    t.ipv4.sport = ports[1];
    t.ipv4.daddr = addrs[0];
    t.ipv4.dport = ports[0];
    sk = bpf_sk_lookup_tcp(skb, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
    if (sk) {
        __u64 owner = bpf_sk_cgroup_id(sk);

        bpf_sk_release(sk);
        if (owner == p->job)
            return 1;
    }
    job = bpf_map_lookup_elem(&jobs, &p->job);
    if (!job)
        return 0;
    __sync_fetch_and_add(&job->inbound, 1);
    return (job->flags & CONFINE_JOB_AUDIT) ? 1 : 0;
}
