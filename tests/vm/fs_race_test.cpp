// Filesystem decisions under a race (issue #3): a symlink in the workdir is
// swapped, atomically and as fast as the job can, between an allowed file
// and the denied ~/.ssh/id_ed25519, while the same job keeps opening and
// reading through it. confine decides on the object the kernel resolved, so
// no byte of the key may ever come back, whichever way the race falls.
//
// Both loops run inside one confined job (`vmhelper fsrace` forks the
// swapper). The unconfined control runs the same race and must read the
// key: it shows the race really reaches it, so the test can fail.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
// How long each race runs confined; the control needs less to leak.
constexpr double kRaceSeconds = 3;
constexpr double kControlSeconds = 1;

// `vmhelper fsrace` prints "content <escaped> N" and "error <name> N" lines.
std::map<std::string, long> outcomes(const std::string& out) {
    std::map<std::string, long> m;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        size_t sp = line.rfind(' ');
        if (sp != std::string::npos) m[line.substr(0, sp)] = std::stol(line.substr(sp + 1));
    }
    return m;
}

class FsRaceTest : public VmTest {
protected:
    // Races LINK (in the workdir) between `allowed` and `denied`, reading
    // `through` (LINK, or a path below it); the allowed side reads "allowed".
    void race(const std::string& link, const std::string& allowed, const std::string& denied,
              const std::string& through) {
        const std::string helper = install_helper(work());
        auto argv = [&](double s) {
            return std::vector<std::string>{helper, "fsrace", link, allowed, denied, through, fmt::format("{}", s)};
        };

        Result r = run({.argv = argv(kRaceSeconds)});
        ASSERT_EQ(r.status, 0) << r.describe();
        auto got = outcomes(r.out);
        EXPECT_EQ(r.out.find(kSshSecret), npos) << "the key leaked through the race\n" << r.out;
        // A lookup racing the rename can also miss the name altogether
        // (ENOENT, seen on the guest's overlayfs); confine's refusals are EPERM.
        for (const auto& [what, n] : got)
            EXPECT_TRUE(what == "content allowed\\n" || what == "error EPERM" || what == "error ENOENT")
                << what << " (" << n << " times)\n"
                << r.out;
        // Both sides of the race were hit: reads of the allowed file worked,
        // and opens that reached the key were refused.
        EXPECT_GT(got["content allowed\\n"], 0) << r.out;
        EXPECT_GT(got["error EPERM"], 0) << r.out;

        // Every audit line is a refused read of the key (or a count of
        // events the ring had no room for). Thousands of lines: plain
        // substring checks, and the full check on the first few.
        const std::string op = R"("op":"open_read")", target = fmt::format(R"("target":"{}")", kSshKey);
        size_t checked = 0;
        for (const auto& l : r.audit) {
            if (l.raw.find(R"("op":"lost")") != npos) continue;
            EXPECT_TRUE(l.raw.find(op) != npos && l.raw.find(target) != npos) << l.raw;
            if (checked++ < 3) {
                Result one = r;
                one.audit = {l};
                EXPECT_TRUE(has_denial(one, "open_read", kSshKey, "vmhelper")) << l.raw;
            }
        }
        EXPECT_GT(checked, 0u) << r.describe();

        // The control: the same race unconfined reads the key.
        std::string cmd;
        for (const auto& a : argv(kControlSeconds)) cmd += "'" + a + "' ";
        Result control = run_unconfined(cmd);
        ASSERT_EQ(control.status, 0) << control.describe();
        EXPECT_NE(control.out.find(kSshSecret), npos) << "unconfined, the race never reached the key\n"
                                                      << control.out;
        EXPECT_NE(control.out.find("content allowed\\n"), npos) << control.out;
    }
};

TEST_F(FsRaceTest, SwappingAFileSymlinkNeverLeaksTheKey) {
    write_file(work() + "/allowed", "allowed\n");
    race(work() + "/link", work() + "/allowed", kSshKey, work() + "/link");
}

// The job can't rename anything into a denied place, so the directory
// variant swaps a symlink to a directory: ~/.ssh, or an allowed directory
// holding an id_ed25519 of its own.
TEST_F(FsRaceTest, SwappingADirectorySymlinkNeverLeaksTheKey) {
    make_dir(work() + "/dir");
    write_file(work() + "/dir/id_ed25519", "allowed\n");
    race(work() + "/dirlink", work() + "/dir", "/home/confinetest/.ssh", work() + "/dirlink/id_ed25519");
}

}  // namespace
}  // namespace vmtest
