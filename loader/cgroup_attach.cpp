#include "loader/cgroup_attach.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "common/fd.h"

namespace confine {

uint32_t prog_id(int prog_fd) {
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    return bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0 ? info.id : 0;
}

// The ids of the programs attached to the cgroup with `type`. A failed
// query is an error, never "none": attach_to_parent would attach twice, and
// detach_stale would leave a stale program running.
Result<std::vector<uint32_t>> attached_ids(int cgroup_fd, bpf_attach_type type) {
    // For lsm_cgroup the kernel returns ids only with their attach flags.
    uint32_t ids[64], flags[64];
    LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = 64, .prog_attach_flags = flags);
    if (bpf_prog_query_opts(cgroup_fd, type, &q) != 0)
        return fail(Error::sys(fmt::format("bpf: querying the programs attached to confine's parent cgroup "
                                           "(attach type {})",
                                           static_cast<int>(type)))
                        .hint("ENOSPC means more than 64 are attached: remove the build's cgroup under "
                              "/sys/fs/cgroup/confine once no job runs"));
    return std::vector<uint32_t>(ids, ids + q.prog_cnt);
}

Result<uint32_t> attach_to_parent(const std::string& pin, uint32_t id, bpf_attach_type type, int cgroup_fd,
                                  AttachedIds& attached) {
    auto have = attached.find(type);
    if (have == attached.end()) {
        auto ids = attached_ids(cgroup_fd, type);
        if (!ids) return fail(ids.error());
        have = attached.emplace(type, std::move(*ids)).first;
    }
    if (id && std::ranges::count(have->second, id)) return id;
    Fd prog(bpf_obj_get(pin.c_str()));
    if (!prog) return fail(Error::sys("bpf: opening pinned program " + pin));
    // Kept by detach_stale by its id: without one it would be detached.
    id = prog_id(prog.get());
    if (!id) return fail(Error::sys("bpf: reading the id of pinned program " + pin));
    if (std::ranges::count(have->second, id)) return id;
    if (bpf_prog_attach(prog.get(), cgroup_fd, type, BPF_F_ALLOW_MULTI) == 0) {
        have->second.push_back(id);
        return id;
    }
    Error e = Error::sys("bpf: attaching program " + pin + " to confine's parent cgroup");
    if (errno == EINVAL)
        return fail(
            std::move(e).hint("The kernel may have no free lsm_cgroup hook slot: at most 10 distinct hooks "
                              "can carry lsm_cgroup programs machine-wide"));
    return fail(e);
}

// Detaches from a parent cgroup every program of these types that
// is not in `keep`: what a load interrupted after attaching left there. Its
// programs would run next to their replacements, with globals of their own.
Result<void> detach_stale(int cgroup_fd, const AttachedIds& keep) {
    for (const auto& [type, ids] : keep) {
        auto attached = attached_ids(cgroup_fd, type);
        if (!attached) return fail(attached.error());
        for (uint32_t id : *attached) {
            if (std::ranges::count(ids, id)) continue;
            Fd fd(bpf_prog_get_fd_by_id(id));
            if (!fd || bpf_prog_detach2(fd.get(), cgroup_fd, type) != 0)
                return fail(Error::sys(fmt::format("bpf: detaching stale program {} from confine's parent cgroup", id))
                                .hint("Remove the build's cgroup under /sys/fs/cgroup/confine once no job runs"));
        }
    }
    return {};
}

}  // namespace confine
