// POSIX ACLs outside the write set. Since 6.2 setting
// or removing system.posix_acl_access / _default no longer passes the
// setxattr hooks (nor inode_setattr): the kernel asks inode_set_acl and
// inode_remove_acl. Every way to the same inode is tried: by path
// (setxattr, lsetxattr), through an fd (fsetxattr, fremovexattr), through
// io_uring (IORING_OP_SETXATTR, _FSETXATTR), and through a symlink in the
// workdir.
//
// One `vmhelper fsops` run, confined and then unconfined as the same user
// (the control). The helper renames itself "opI" before operation I, so
// each audit line is tied to the operation that caused it.
#include <fmt/format.h>
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

// The ACL `vmhelper fsops setacl` sets (helper.cpp's acl_value), for root to
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
    std::string spec;    // the fsops operation
    std::string path;    // the file it changes (a symlink's target)
    const char* name;    // which ACL
    bool set;            // setting (else removing) it
    bool uring = false;  // io_uring runs it in a worker thread: any comm
};

class FsAclTest : public VmTest {
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
            std::string spec = fmt::format("{} {}/{} {}", verb, dir, name, acl == kAccess ? "access" : "default");
            if (set) spec += fmt::format(" {}", kOtherUid);
            if (!how.empty()) spec += " " + how;
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

    // Each operation's result, by index ("ok", "EPERM", ...).
    std::vector<std::string> results(const Result& r, size_t n) {
        std::vector<std::string> got(n, "(not run)");
        std::istringstream in(r.out);
        for (std::string line; std::getline(in, line);) {
            size_t sp = line.find(' ');
            if (sp == std::string::npos) continue;
            size_t i = std::stoul(line.substr(0, sp));
            if (i < n) got[i] = line.substr(sp + 1);
        }
        return got;
    }

    // Whether o's change is on its file now.
    bool changed(const AclOp& o) {
        auto users = acl_users(o.path, o.name);
        return o.set ? users == std::vector<uint32_t>{kOtherUid} : !users.has_value();
    }

    std::string command(const std::vector<AclOp>& ops) {
        std::string cmd = "./vmhelper fsops";
        for (const AclOp& o : ops) cmd += " '" + o.spec + "'";
        return cmd;
    }

    std::string helper_, ro_;
};

TEST_F(FsAclTest, AclsOutsideTheWriteSetCannotBeSetOrRemoved) {
    const std::string link = work() + "/link-to-ro", target = ro_ + "/s";
    // Outside the write set: the denied real home, a directory the policy
    // only reads; and a file there reached through a symlink in the workdir.
    std::vector<AclOp> refused = ops_in(kHomeDir, false), in_ro = ops_in(ro_, true);
    refused.insert(refused.end(), in_ro.begin(), in_ro.end());
    refused.push_back({fmt::format("setacl {} access {}", link, kOtherUid), target, kAccess, true});
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
    std::vector<std::string> got = results(r, all.size());
    for (size_t i = 0; i < all.size(); i++) {
        const AclOp& o = all[i];
        SCOPED_TRACE(fmt::format("confined op {}: {}", i, o.spec));
        if (i < refused.size()) {
            EXPECT_EQ(got[i], "EPERM") << r.describe();
            EXPECT_FALSE(changed(o)) << "the job changed the ACL of " << o.path;
            EXPECT_DENIAL(r, "setxattr", o.path, o.uring ? "" : fmt::format("op{}", i));
        } else {
            EXPECT_EQ(got[i], "ok") << r.describe();
            EXPECT_TRUE(changed(o)) << "the job's change to " << o.path << " is not there";
        }
    }
    EXPECT_EQ(r.audit.size(), refused.size()) << r.describe();

    // The control: the same operations work for the user without confine.
    fresh();
    ASSERT_FALSE(HasFatalFailure());
    Result control = run_unconfined(cmd);
    got = results(control, all.size());
    for (size_t i = 0; i < all.size(); i++) {
        SCOPED_TRACE(fmt::format("unconfined op {}: {}", i, all[i].spec));
        EXPECT_EQ(got[i], "ok") << control.describe();
        EXPECT_TRUE(changed(all[i])) << "unconfined, the ACL of " << all[i].path << " did not change";
    }
}

}  // namespace
}  // namespace vmtest
