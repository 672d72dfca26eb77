#include "loader/probe.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "common/text.h"
#include "loader/bpf_objects.h"
#include "loader/cgroup.h"
#include "probe.skel.h"

namespace confine {
namespace {

constexpr const char* kLsmList = "/sys/kernel/security/lsm";

std::string read_first_line(const char* path) {
    const std::string text = read_all(path);
    return text.substr(0, text.find('\n'));
}

bool has_lsm(const std::string& list, const std::string& name) {
    return std::ranges::count(split(list, ","), name) > 0;
}

}  // namespace

Result<void> check_kernel() {
    if (geteuid() != 0)
        return fail(Error::msg("probe: confine must run as root (it loads BPF programs and creates cgroups)")
                        .hint("Run it through sudo; the job itself runs as SUDO_UID"));
    if (access(kLsmList, R_OK) != 0)
        return fail(Error::sys(std::string("probe: reading ") + kLsmList)
                        .hint("Mount securityfs: mount -t securityfs securityfs /sys/kernel/security"));
    std::string lsms = read_first_line(kLsmList);
    if (!has_lsm(lsms, "bpf"))
        return fail(Error::msg("probe: the BPF LSM is not active; active LSMs: " + lsms)
                        .hint("Add bpf to the lsm= kernel parameter. On Ubuntu: in /etc/default/grub set "
                              "GRUB_CMDLINE_LINUX=\"lsm=" +
                              lsms + ",bpf\", run update-grub and reboot"));
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        return fail(Error::sys("probe: reading /sys/kernel/btf/vmlinux")
                        .hint("The kernel lacks BTF type information; use a kernel built with "
                              "CONFIG_DEBUG_INFO_BTF=y (Debian's and Ubuntu's are)"));
    if (auto cg = cgroup2_mount(); !cg) return fail(cg.error());
    return {};
}

Error explain_load_failure(Error e) {
    if (e.err == EPERM)
        return std::move(e).hint(
            "The kernel refused to load an LSM program although bpf is an active LSM. Some kernels "
            "(hardened or sandboxed hosts) forbid LSM programs even to root; enforce on another "
            "kernel, or test confine in a VM: vmtest/run -- CMD");
    return e;
}

Result<void> probe() {
    if (auto r = check_kernel(); !r) return r;

    std::unique_ptr<probe_bpf, decltype(&probe_bpf__destroy)> skel(probe_bpf__open_and_load(), probe_bpf__destroy);
    if (!skel) return fail(explain_load_failure(Error::sys("probe: loading an lsm_cgroup program")));
    auto parent = confine_cgroup();
    auto cg = parent ? JobCgroup::create(*parent, "probe-" + std::to_string(getpid())) : fail(parent.error());
    if (!cg) return fail(cg.error());
    if (bpf_prog_attach(bpf_program__fd(skel->progs.confine_probe), cg->fd(), BPF_LSM_CGROUP, BPF_F_ALLOW_MULTI) != 0)
        return fail(explain_load_failure(Error::sys("probe: attaching an lsm_cgroup program to " + cg->path())));
    if (auto r = cg->kill_and_remove(); !r) return r;

    if (auto objs = BpfObjects::open(); !objs) return fail(explain_load_failure(objs.error()));
    return {};
}

}  // namespace confine
