#include "loader/unseen_folding.h"

#include <gtest/gtest.h>

namespace confine {
namespace {

TEST(XfsMountPointsIn, TakesXfsMountsOnlyUnescapedAndOnce) {
    const char* mountinfo =
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "36 22 8:2 / /srv rw,relatime shared:9 - xfs /dev/sda2 rw,attr2\n"
        "37 22 8:3 / /mnt/my\\040disk rw - xfs /dev/sdb1 rw\n"
        "38 22 8:2 /sub /var/w rw - xfs /dev/sda2 rw\n"
        "39 22 8:2 / /srv rw - xfs /dev/sda2 rw\n"
        "40 22 0:5 / /mnt/xfsx rw - xfsx none rw\n"
        "41 22 0:6 / /dev/shm rw - tmpfs xfs rw\n";
    EXPECT_EQ(xfs_mount_points_in(mountinfo), (std::vector<std::string>{"/srv", "/mnt/my disk", "/var/w"}));
}

TEST(BelowMount, IsStrictlyBelowAtAComponentBoundary) {
    EXPECT_TRUE(below_mount("/srv/w/.git", "/srv"));
    EXPECT_FALSE(below_mount("/srv", "/srv"));
    EXPECT_FALSE(below_mount("/srv2/w", "/srv"));
    EXPECT_TRUE(below_mount("/usr", "/"));
    EXPECT_FALSE(below_mount("/", "/"));
}

}  // namespace
}  // namespace confine
