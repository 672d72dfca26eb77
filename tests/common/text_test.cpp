#include "common/text.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace confine {
namespace {

using Words = std::vector<std::string_view>;

TEST(Split, DropsEmptyPiecesBetweenAnySeparator) {
    EXPECT_EQ(split("  cpu  io\tmemory\npids \n"), (Words{"cpu", "io", "memory", "pids"}));
    EXPECT_EQ(split("capability,landlock,,bpf", ","), (Words{"capability", "landlock", "bpf"}));
    EXPECT_EQ(split(""), Words{});
    EXPECT_EQ(split(" \n\t"), Words{});
}

TEST(KeyedValue, ReadsTheNumberAfterItsKeyOnly) {
    const char* events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 3\noom_group_kill 0\n";
    EXPECT_EQ(keyed_value(events, "oom_kill"), 3u);
    EXPECT_EQ(keyed_value(events, "max"), 12u);
    EXPECT_EQ(keyed_value(events, "oom_kil"), std::nullopt);
    EXPECT_EQ(keyed_value("populated 1\nfrozen 0\n", "populated"), 1u);
    // A key's value is never taken for a key: pairs are read in step.
    EXPECT_EQ(keyed_value("a b\nc 4\n", "b"), std::nullopt);
    EXPECT_EQ(keyed_value("nr_descendants x\n", "nr_descendants"), std::nullopt);
    EXPECT_EQ(keyed_value("nr_descendants 7x\n", "nr_descendants"), std::nullopt);
    EXPECT_EQ(keyed_value("nr_descendants\n", "nr_descendants"), std::nullopt);
}

TEST(ReadAll, ReadsAWholeFileAndNothingWhenThereIsNone) {
    char path[] = "/tmp/confine-text-test.XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string big(3 * 4096 + 17, 'x');  // past read_fd's buffer
    ASSERT_EQ(write(fd, big.data(), big.size()), static_cast<ssize_t>(big.size()));
    close(fd);
    EXPECT_EQ(read_all(path), big);
    EXPECT_EQ(read_file(path, "test: reading").value_or(""), big);
    unlink(path);
    EXPECT_EQ(read_all(path), "");
}

// A read that fails after the open (a directory opens, then gives EISDIR)
// is an error, never the text read so far: the daemon's client would send
// the daemon a policy cut short.
TEST(ReadFile, AFailedReadIsAnErrorNamingTheFile) {
    auto text = read_file("/", "policy: reading");
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().err, EISDIR);
    EXPECT_EQ(text.error().message, "policy: reading /: Is a directory");
    EXPECT_EQ(read_all("/"), "");
    Fd dir(open("/", O_RDONLY | O_DIRECTORY));
    EXPECT_EQ(read_fd(dir.get()), std::unexpected(EISDIR));
}

}  // namespace
}  // namespace confine
