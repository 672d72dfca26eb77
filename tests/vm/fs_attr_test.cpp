// Attributes of files outside the write set can't change: POSIX ACLs and
// inode flags. Since 6.2 setting or removing system.posix_acl_access /
// _default no longer passes the setxattr hooks (nor inode_setattr): the
// kernel asks inode_set_acl and inode_remove_acl. Every way to the same
// inode is tried: by path (setxattr, lsetxattr), through an fd (fsetxattr,
// fremovexattr), through io_uring (IORING_OP_SETXATTR, _FSETXATTR), and
// through a symlink in the workdir. FS_IOC_SETFLAGS (chattr) needs only
// ownership and an fd, a read-only one included.
//
// One `vmhelper --op-comm` run, confined and then unconfined as the same
// user (the control). The helper renames itself "opI" before operation I,
// so each audit line is tied to the operation that caused it.
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

namespace fs = std::filesystem;

// The test user's own directory under its real home, which the default
// policy denies: DAC allows every change here, confine none.
constexpr const char* kHomeDir = "/home/confinetest/acl";
constexpr const char* kAccess = "system.posix_acl_access";
constexpr const char* kDefault = "system.posix_acl_default";
constexpr uint32_t kOtherUid = 4242;  // the ACL_USER entry the helper sets

// What the root test process sees of path's ACL `name`: the uids of its
// ACL_USER entries, nullopt if it has no such ACL, or a failure.
std::optional<std::vector<uint32_t>> acl_users(const std::string& path, const char* name) {
    char buf[1024];
    ssize_t n = lgetxattr(path.c_str(), name, buf, sizeof buf);
    if (n < 0 && errno == ENODATA) return std::nullopt;
    if (n < 4) {
        ADD_FAILURE() << "getxattr " << path << " " << name << ": " << strerror(errno);
        return std::nullopt;
    }
    std::vector<uint32_t> users;
    // include/uapi/linux/posix_acl_xattr.h: a 4-byte version, 8-byte entries.
    for (ssize_t off = 4; off + 8 <= n; off += 8) {
        uint16_t tag;
        uint32_t id;
        memcpy(&tag, buf + off, 2);
        memcpy(&id, buf + off + 4, 4);
        if (tag == 0x02 /* ACL_USER */) users.push_back(id);
    }
    return users;
}

// The ACL `vmhelper setacl` sets (helper/fs_ops.cpp's acl_value), for root to
// give a file one to remove.
std::string acl_value(uint32_t uid) {
    struct Entry {
        uint16_t tag, perm;
        uint32_t id;
    };
    const uint32_t undefined = ~0u, version = 2;
    const Entry entries[] = {
        {0x01, 6, undefined}, {0x02, 6, uid}, {0x04, 4, undefined}, {0x10, 6, undefined}, {0x20, 4, undefined}};
    std::string v(reinterpret_cast<const char*>(&version), sizeof version);
    for (const Entry& e : entries) v.append(reinterpret_cast<const char*>(&e), sizeof e);
    return v;
}

// One helper operation on one file or directory.
struct AclOp {
    std::string spec;    // the helper operation
    std::string path;    // the file it changes (a symlink's target)
    const char* name;    // which ACL
    bool set;            // setting (else removing) it
    bool uring = false;  // io_uring runs it in a worker thread: any comm
};

// The inode flags of PATH (FS_IOC_GETFLAGS), or -1.
int inode_flags(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    int flags = -1;
    if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) flags = -1;
    if (fd >= 0) close(fd);
    return flags;
}
bool has_flag(const std::string& path, int flag) {
    int flags = inode_flags(path);
    return flags >= 0 && (flags & flag);
}

class FsAttrTest : public VmTest {
protected:
    void SetUp() override {
        VmTest::SetUp();
        if (HasFatalFailure()) return;
        helper_ = install_helper(work());
        ro_ = at("ro");
        make_dir(ro_);
        std::error_code ec;
        fs::remove_all(kHomeDir, ec);
        make_dir(kHomeDir);
    }

    void TearDown() override {
        std::error_code ec;
        fs::remove_all(kHomeDir, ec);
    }

    // The operations on files in dir. `by_fd`: also those that open the
    // file first (a denied directory can't be opened at all).
    std::vector<AclOp> ops_in(const std::string& dir, bool by_fd) {
        auto op = [&](std::string verb, const std::string& name, const char* acl, std::string how = "") {
            const bool set = verb == "setacl";
            std::string spec = fmt::format("{},{}/{},{}", verb, dir, name, acl == kAccess ? "access" : "default");
            if (set) spec += fmt::format(",{}", kOtherUid);
            if (!how.empty()) spec += "," + how;
            return AclOp{spec, dir + "/" + name, acl, set, how.starts_with("uring")};
        };
        std::vector<AclOp> ops = {op("setacl", "f", kAccess),          op("rmacl", "g", kAccess),
                                  op("setacl", "d", kDefault),         op("rmacl", "e", kDefault),
                                  op("setacl", "l", kAccess, "lpath"), op("rmacl", "lr", kAccess, "lpath"),
                                  op("setacl", "u", kAccess, "uring")};
        if (by_fd) {
            for (const AclOp& o : {op("setacl", "fd", kAccess, "fd"), op("rmacl", "fdr", kAccess, "fd"),
                                   op("setacl", "dfd", kDefault, "fd"), op("rmacl", "dfdr", kDefault, "fd"),
                                   op("setacl", "uf", kAccess, "uring-fd")})
                ops.push_back(o);
        }
        return ops;
    }

    // Fresh files and directories for `ops`: those an operation removes an
    // ACL from have one (set by root), the others none.
    void reset(const std::vector<AclOp>& ops) {
        for (const AclOp& o : ops) {
            std::error_code ec;
            fs::remove_all(o.path, ec);
            if (o.name == kDefault)
                make_dir(o.path);
            else
                write_file(o.path, "original\n");
            if (!o.set) {
                const std::string v = acl_value(kOtherUid);
                ASSERT_EQ(lsetxattr(o.path.c_str(), o.name, v.data(), v.size(), 0), 0)
                    << "cannot give " << o.path << " an ACL to remove (" << strerror(errno)
                    << "): this filesystem has no POSIX ACLs";
            }
        }
    }

    // Whether o's change is on its file now.
    bool changed(const AclOp& o) {
        auto users = acl_users(o.path, o.name);
        return o.set ? users == std::vector<uint32_t>{kOtherUid} : !users.has_value();
    }

    std::string command(const std::vector<AclOp>& ops) {
        std::string cmd = "./vmhelper --op-comm";
        for (const AclOp& o : ops) cmd += " '" + o.spec + "'";
        return cmd;
    }

    std::string helper_, ro_;
};

// ---- POSIX ACLs ------------------------------------------------------------------------

TEST_F(FsAttrTest, AclsOutsideTheWriteSetCannotBeSetOrRemoved) {
    const std::string link = work() + "/link-to-ro", target = ro_ + "/s";
    // Outside the write set: the denied real home, a directory the policy
    // only reads; and a file there reached through a symlink in the workdir.
    std::vector<AclOp> refused = ops_in(kHomeDir, false), in_ro = ops_in(ro_, true);
    refused.insert(refused.end(), in_ro.begin(), in_ro.end());
    refused.push_back({fmt::format("setacl,{},access,{}", link, kOtherUid), target, kAccess, true});
    const std::vector<AclOp> allowed = ops_in(work(), true);
    std::vector<AclOp> all = refused;
    all.insert(all.end(), allowed.begin(), allowed.end());
    const std::string cmd = command(all);
    const std::string policy = make_policy({.read = {ro_}});
    auto fresh = [&] {
        reset(all);
        unlink(link.c_str());
        ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0) << strerror(errno);
        lchown(link.c_str(), test_user().uid, test_user().gid);
    };

    fresh();
    ASSERT_FALSE(HasFatalFailure());
    Result r = run_confined(policy, cmd);
    Ops got = parse_ops(r.out);
    for (size_t i = 0; i < all.size(); i++) {
        const AclOp& o = all[i];
        SCOPED_TRACE(fmt::format("confined op {}: {}", i, o.spec));
        if (i < refused.size()) {
            EXPECT_EQ(got.at(i), o.spec.substr(0, o.spec.find(',')) + ":EPERM") << r.describe();
            EXPECT_FALSE(changed(o)) << "the job changed the ACL of " << o.path;
            EXPECT_DENIAL(r, "setxattr", o.path, o.uring ? "" : fmt::format("op{}", i));
        } else {
            EXPECT_EQ(got.at(i), "ok") << r.describe();
            EXPECT_TRUE(changed(o)) << "the job's change to " << o.path << " is not there";
        }
    }
    EXPECT_EQ(r.audit.size(), refused.size()) << r.describe();

    // The control: the same operations work for the user without confine.
    fresh();
    ASSERT_FALSE(HasFatalFailure());
    Result control = run_unconfined(cmd);
    got = parse_ops(control.out);
    for (size_t i = 0; i < all.size(); i++) {
        SCOPED_TRACE(fmt::format("unconfined op {}: {}", i, all[i].spec));
        EXPECT_EQ(got.at(i), "ok") << control.describe();
        EXPECT_TRUE(changed(all[i])) << "unconfined, the ACL of " << all[i].path << " did not change";
    }
}

// ---- inode flags -------------------------------------------------------------------------

// FS_IOC_SETFLAGS (chattr) needs only ownership and an fd, a read-only one
// included. On a file the job may read but not write: refused. (The guest's
// /var/tmp is an overlay with a tmpfs upper layer: both take the flags.)
TEST_F(FsAttrTest, InodeFlagsOfFilesOutsideTheWriteSetCannotChange) {
    const std::string ro = base() + "/ro";
    make_dir(ro);
    for (const char* f : {"control-a", "control-b", "a", "b"}) write_file(ro + "/" + f, "data\n");
    auto cmd_for = [&](const std::string& a, const std::string& b) {
        return fmt::format("./vmhelper --op-comm fd-setflags,{},noatime fd-setflags,{},nodump", a, b);
    };

    const int before = inode_flags(ro + "/a");
    ASSERT_GE(before, 0) << "FS_IOC_GETFLAGS on " << ro << "/a: " << strerror(errno);
    Result control = run_unconfined(cmd_for(ro + "/control-a", ro + "/control-b"));
    EXPECT_EQ(parse_ops(control.out).by_index, (std::vector<std::string>{"ok", "ok"})) << control.describe();
    EXPECT_TRUE(has_flag(ro + "/control-a", FS_NOATIME_FL)) << "unconfined, the flag should be set";
    EXPECT_TRUE(has_flag(ro + "/control-b", FS_NODUMP_FL)) << "unconfined, the flag should be set";
    ASSERT_FALSE(HasFailure());

    Result r = run_confined(make_policy({.read = {ro}}), cmd_for(ro + "/a", ro + "/b"));
    EXPECT_EQ(parse_ops(r.out).by_index, (std::vector<std::string>{"fd-setflags:EPERM", "fd-setflags:EPERM"}))
        << r.describe();
    EXPECT_DENIAL(r, "setattr", ro + "/a", "op0");
    EXPECT_DENIAL(r, "setattr", ro + "/b", "op1");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
    EXPECT_EQ(inode_flags(ro + "/a"), before);
    EXPECT_EQ(inode_flags(ro + "/b"), before);
}

// The job's own files take the flags: in the workdir (on the guest's
// overlay, where overlayfs asks the LSM again for the upper file, as the
// mounter) and in its private /dev/shm (a tmpfs).
TEST_F(FsAttrTest, InodeFlagsOfTheJobsOwnFilesCanChange) {
    const std::string own = work() + "/own";
    write_file(own, "data\n");
    const std::string cmd =
        "echo data > /dev/shm/own && ./vmhelper fd-setflags,/dev/shm/own,nodump fd-setflags," + own + ",nodump";

    Result r = run_confined("", cmd);
    EXPECT_EQ(parse_ops(r.out).by_index, (std::vector<std::string>{"ok", "ok"})) << r.describe();
    EXPECT_TRUE(has_flag(own, FS_NODUMP_FL)) << r.describe();
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

}  // namespace
}  // namespace vmtest
