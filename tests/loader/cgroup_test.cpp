// Tests of loader/cgroup.cpp that need no cgroup: where the cgroup v2
// hierarchy is, read from mountinfo.
#include "loader/cgroup.h"

#include <gtest/gtest.h>

namespace confine {
namespace {

TEST(Cgroup2RootIn, FindsTheRootMount) {
    EXPECT_EQ(cgroup2_root_in("22 1 0:21 / / rw - ext4 /dev/vda rw\n"
                              "36 25 0:31 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"),
              "/sys/fs/cgroup");
}

TEST(Cgroup2RootIn, SkipsSubtreesAndOtherFilesystems) {
    // A hybrid system: v1 controllers at /sys/fs/cgroup, v2 beside them.
    EXPECT_EQ(cgroup2_root_in("30 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n"
                              "31 30 0:27 /job /mnt/job rw - cgroup2 cgroup2 rw\n"
                              "32 30 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
                              "33 30 0:29 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"),
              "/sys/fs/cgroup/unified");
    EXPECT_EQ(cgroup2_root_in("22 1 0:21 / / rw - ext4 /dev/vda rw\n"), std::nullopt);
}

TEST(Cgroup2RootIn, SkipsARootHiddenByALaterMount) {
    // Over the same point, over a directory above it, or over /.
    for (const char* over : {"/sys/fs/cgroup", "/sys/fs", "/"})
        EXPECT_EQ(cgroup2_root_in(std::string("36 25 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
                                              "40 36 0:40 / ") +
                                  over +
                                  " rw - tmpfs tmpfs rw\n"
                                  "41 40 0:31 / /run/cg rw - cgroup2 cgroup2 rw\n"),
                  "/run/cg")
            << over;
    // A sibling whose name starts the same hides nothing.
    EXPECT_EQ(cgroup2_root_in("36 25 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
                              "40 36 0:40 / /sys/fs/cg rw - tmpfs tmpfs rw\n"),
              "/sys/fs/cgroup");
    EXPECT_EQ(cgroup2_root_in("36 25 0:31 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
                              "40 36 0:40 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"),
              std::nullopt);
}

}  // namespace
}  // namespace confine
