/* A job's filtering proxy, shared by proxy.bpf.c and the loader.
 *
 * The proxy (tinyproxy) runs in a cgroup of its own below the build's
 * proxies parent, outside the job's; the `proxies` map says which job it
 * serves and where it listens. */
#ifndef CONFINE_BPF_PROXY_H
#define CONFINE_BPF_PROXY_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Value of the `proxies` map (key: __u64 id of the proxy's cgroup). */
struct confine_proxy {
    __u64 job;  /* cgroup id of the job it serves */
    __u32 addr; /* listening IPv4 address, network byte order */
    __u16 port; /* listening port, host byte order */
    __u16 pad;
};

#endif
