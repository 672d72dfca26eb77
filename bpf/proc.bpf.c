/* Process isolation.
 *
 * Hooks (lsm_cgroup, attached to each job's cgroup):
 *   userns_create  - refuse new user namespaces (unshare -U, clone(CLONE_NEWUSER))
 *                    unless the job's policy sets [process] user_namespaces.
 *                    The hook exists since 6.1 (commit 7cd4c5c2101c,
 *                    "security, lsm: Introduce security_create_user_ns()").
 */
#include "bpf/common.bpf.h"

SEC("lsm_cgroup/userns_create")
int BPF_PROG(confine_userns_create, const struct cred *cred)
{
    struct confine_job *job;
    __u64 cgid;

    job = current_job(&cgid);
    if (!job)
        return DENY;
    if (job->flags & CONFINE_JOB_USERNS)
        return ALLOW;
    return refuse(job, cgid, CONFINE_OP_USERNS_CREATE);
}
