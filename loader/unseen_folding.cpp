#include "loader/unseen_folding.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "common/fd.h"
#include "common/text.h"

namespace confine {
namespace {

// From include/uapi/linux/xfs_fs.h (6.1 to 7.2): the geometry every XFS
// reports, and its flag for a filesystem made with `-n version=ci`.
struct XfsGeometryV1 {
    uint32_t blocksize, rtextsize, agblocks, agcount, logblocks, sectsize, inodesize, imaxpct;
    uint64_t datablocks, rtblocks, rtextents, logstart;
    unsigned char uuid[16];
    uint32_t sunit, swidth;
    int32_t version;
    uint32_t flags, logsectsize, rtsectsize, dirblocksize;
};
constexpr unsigned long kXfsIocFsgeometryV1 = _IOR('X', 100, XfsGeometryV1);
constexpr uint32_t kXfsGeomFlagsDirV2Ci = 1u << 12;

// XFS made with ascii-ci folds names in its lookup (xfs_vn_ci_lookup,
// d_add_ci) and has no dentry operations to show it: the BPF walk can't
// tell it from any XFS. Unreadable: assume it folds.
bool folds_case(const std::string& mount) {
    Fd fd(open(mount.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    XfsGeometryV1 geo{};
    return !fd || ioctl(fd.get(), kXfsIocFsgeometryV1, &geo) != 0 || (geo.flags & kXfsGeomFlagsDirV2Ci);
}

}  // namespace

std::vector<std::string> xfs_mount_points_in(std::string_view mountinfo) {
    std::vector<std::string> out;
    for (Mount& m : mounts_in(mountinfo))
        if (m.type == "xfs" && std::find(out.begin(), out.end(), m.point) == out.end())
            out.push_back(std::move(m.point));
    return out;
}

bool below_mount(std::string_view path, std::string_view mount) {
    return path != mount && policy::covers(mount, path);
}

Result<void> check_unseen_folding(const policy::Compiled& c) {
    // The xfs module makes /sys/fs/xfs when it loads: without it (most
    // machines) no XFS is mounted, and a start reads no mountinfo.
    if (access("/sys/fs/xfs", F_OK) != 0) return {};
    for (const std::string& mount : xfs_mount_points_in(read_all("/proc/self/mountinfo"))) {
        auto rule = std::find_if(c.fs.begin(), c.fs.end(),
                                 [&](const policy::FsEntry& e) { return below_mount(e.prefix, mount); });
        if (rule == c.fs.end() || !folds_case(mount)) continue;
        return fail(Error::msg(fmt::format("policy: the rule for {} lies below {}, XFS made case-insensitive "
                                           "(mkfs.xfs -n version=ci), where confine can't hold a rule by name: a "
                                           "job could create or name its paths in another case",
                                           rule->prefix, mount))
                        .hint("Put the checkout on a case-sensitive filesystem"));
    }
    return {};
}

}  // namespace confine
