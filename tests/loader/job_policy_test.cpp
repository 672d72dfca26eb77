// How a job's rules are encoded into the BPF maps' keys.
#include "loader/job_policy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace confine {
namespace {

std::string key_path(const confine_fs_key& k) {
    return std::string(k.path, confine_fs_path_bytes(k.prefixlen));
}

TEST(FsKey, PathsEndInASlashSoRulesMatchWholeComponents) {
    confine_fs_key k = fs_key(0x1122334455667788ull, "/home/u");
    EXPECT_EQ(key_path(k), "/home/u/");
    EXPECT_EQ(k.prefixlen, 64u + 8 * 8);
    EXPECT_EQ(k.cgroup_id_lo, 0x55667788u);
    EXPECT_EQ(k.cgroup_id_hi, 0x11223344u);
}

TEST(FsKey, RootStaysASingleSlash) {
    EXPECT_EQ(key_path(fs_key(1, "/")), "/");
}

TEST(FsKey, TheLongestRuleFillsTheKey) {
    std::string longest = "/" + std::string(CONFINE_RULE_PATH_MAX - 2, 'a');
    confine_fs_key k = fs_key(1, longest);
    EXPECT_EQ(key_path(k), longest + "/");
    EXPECT_EQ(k.prefixlen, 64u + 8 * CONFINE_RULE_PATH_MAX);
}

// As the BPF side reads a dentry's name: the first CONFINE_NAME_BYTES - 1
// bytes and a NUL, and the whole length.
TEST(FsNameKey, TheLastComponentCutAndNulTerminatedWithItsWholeLength) {
    confine_fs_name k = fs_name_key(9, "/w/.git");
    EXPECT_EQ(k.cgroup_id, 9u);
    EXPECT_EQ(k.len, 4u);
    EXPECT_EQ(std::string(k.name), ".git");
    const std::string longer(40, 'x');
    confine_fs_name l = fs_name_key(9, "/w/" + longer);
    EXPECT_EQ(l.len, 40u);
    EXPECT_EQ(std::string(l.name), longer.substr(0, CONFINE_NAME_BYTES - 1));
}

TEST(NetKey, Ipv4IsStoredV4MappedWithItsPort) {
    policy::Endpoint ep;
    ep.kind = policy::Endpoint::Kind::Tcp;
    ep.addr = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    ep.port = 3128;
    confine_net_key k = net_key(7, ep);
    EXPECT_EQ(k.cgroup_id, 7u);
    EXPECT_EQ(k.kind, CONFINE_NET_TCP);
    EXPECT_EQ(k.port, 3128);
    EXPECT_EQ(memcmp(k.addr, ep.addr.data(), 16), 0);
}

TEST(NetKey, AbstractNamesKeepTheirLengthSoTrailingNulsCount) {
    policy::Endpoint a, b;
    a.kind = b.kind = policy::Endpoint::Kind::UnixAbstract;
    a.name = "name";
    b.name = std::string("name\0", 5);
    confine_net_key ka = net_key(1, a), kb = net_key(1, b);
    EXPECT_EQ(ka.name_len, 4);
    EXPECT_EQ(kb.name_len, 5);
    EXPECT_NE(memcmp(&ka, &kb, sizeof ka), 0);
}

TEST(NetKey, UnixPathsAreNulPadded) {
    policy::Endpoint ep;
    ep.kind = policy::Endpoint::Kind::Unix;
    ep.name = "/run/proxy.sock";
    confine_net_key k = net_key(1, ep);
    EXPECT_EQ(k.kind, CONFINE_NET_UNIX);
    EXPECT_STREQ(reinterpret_cast<const char*>(k.addr), "/run/proxy.sock");
}

}  // namespace
}  // namespace confine
