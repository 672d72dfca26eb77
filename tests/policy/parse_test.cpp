// Tests of policy/parse.cpp and policy/default.toml: the TOML schema of the
// contract, and the exact FILE:LINE:COL of every kind of error.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "policy/policy.h"

namespace confine::policy {
namespace {

// The diagnostics of parsing TEXT as "p.toml", as `confine check` prints them.
std::vector<std::string> errors(std::string_view text) {
    auto p = parse(text, "p.toml");
    if (p) return {};
    std::vector<std::string> out;
    for (const auto& d : p.error()) out.push_back(d.str());
    return out;
}

using Lines = std::vector<std::string>;

Policy parse_ok(std::string_view text) {
    auto p = parse(text, "p.toml");
    if (!p) {
        for (const auto& d : p.error()) ADD_FAILURE() << d.str();
        return {};
    }
    return *p;
}

std::vector<std::string> paths(const std::vector<PathRule>& rules) {
    std::vector<std::string> out;
    for (const auto& r : rules) out.push_back(r.path);
    return out;
}

std::array<uint8_t, 16> v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

TEST(Parse, ReadsEveryKey) {
    Policy p = parse_ok(R"(version = 1
mode = "audit"

[filesystem]
read = ["/usr", "{workdir}/src"]
write = ["{home}", "{tmp}/x"]
deny_write = ["{workdir}/.git/hooks"]
deny = ["{user_home}"]
exec = ["/usr/bin"]

[network]
connect = ["tcp://127.0.0.1:3128", "udp://[2001:db8::1]:53", "unix:/run/proxy.sock", "unix-abstract:name"]
bind = ["tcp://127.0.0.1:0", "udp://[::]:5353"]

[process]
user_namespaces = true

[env]
keep = ["PATH", "LANG"]
set = { EXAMPLE = "value", B_2 = "" }
)");
    EXPECT_EQ(p.source, "p.toml");
    EXPECT_EQ(p.version, 1);
    EXPECT_EQ(p.mode, Mode::Audit);
    EXPECT_EQ(paths(p.fs.read), (Lines{"/usr", "{workdir}/src"}));
    EXPECT_EQ(p.fs.read[1].where.line, 5);
    EXPECT_EQ(p.fs.read[1].where.col, 17);
    EXPECT_EQ(paths(p.fs.write), (Lines{"{home}", "{tmp}/x"}));
    EXPECT_EQ(paths(p.fs.deny_write), (Lines{"{workdir}/.git/hooks"}));
    EXPECT_EQ(paths(p.fs.deny), (Lines{"{user_home}"}));
    ASSERT_TRUE(p.fs.exec.has_value());
    EXPECT_EQ(paths(*p.fs.exec), (Lines{"/usr/bin"}));

    ASSERT_EQ(p.net.connect.size(), 4u);
    EXPECT_EQ(p.net.connect[0].kind, Endpoint::Kind::Tcp);
    EXPECT_EQ(p.net.connect[0].addr, v4(127, 0, 0, 1));
    EXPECT_EQ(p.net.connect[0].port, 3128);
    EXPECT_EQ(p.net.connect[0].text, "tcp://127.0.0.1:3128");
    EXPECT_EQ(p.net.connect[0].where.line, 12);
    EXPECT_EQ(p.net.connect[0].where.col, 12);
    EXPECT_EQ(p.net.connect[1].kind, Endpoint::Kind::Udp);
    EXPECT_EQ(p.net.connect[1].addr,
              (std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
    EXPECT_EQ(p.net.connect[1].port, 53);
    EXPECT_EQ(p.net.connect[2].kind, Endpoint::Kind::Unix);
    EXPECT_EQ(p.net.connect[2].name, "/run/proxy.sock");
    EXPECT_EQ(p.net.connect[3].kind, Endpoint::Kind::UnixAbstract);
    EXPECT_EQ(p.net.connect[3].name, "name");
    ASSERT_EQ(p.net.bind.size(), 2u);
    EXPECT_EQ(p.net.bind[0].port, 0);
    EXPECT_EQ(p.net.bind[1].addr, (std::array<uint8_t, 16>{}));
    EXPECT_EQ(p.net.bind[1].port, 5353);

    EXPECT_TRUE(p.user_namespaces);
    EXPECT_EQ(p.env_keep, (Lines{"PATH", "LANG"}));
    // toml++ orders a table's keys by name.
    EXPECT_EQ(p.env_set, (std::vector<std::pair<std::string, std::string>>{{"B_2", ""}, {"EXAMPLE", "value"}}));
}

TEST(Parse, OmittedKeysTakeDefaults) {
    Policy p = parse_ok("version = 1\n");
    EXPECT_EQ(p.mode, Mode::Enforce);
    EXPECT_TRUE(p.fs.read.empty());
    EXPECT_TRUE(p.fs.deny.empty());
    EXPECT_FALSE(p.fs.exec.has_value());
    EXPECT_TRUE(p.net.connect.empty());
    EXPECT_FALSE(p.user_namespaces);
    EXPECT_TRUE(p.env_keep.empty());
    EXPECT_TRUE(p.env_set.empty());
}

TEST(Parse, EmptyExecListMeansNothingMayRunUnlikeAbsentExec) {
    Policy p = parse_ok("version = 1\n[filesystem]\nexec = []\n");
    ASSERT_TRUE(p.fs.exec.has_value());
    EXPECT_TRUE(p.fs.exec->empty());
}

TEST(Parse, EnvSetAcceptsAStandardTable) {
    Policy p = parse_ok("version = 1\n[env.set]\nA = \"1\"\n");
    EXPECT_EQ(p.env_set, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}}));
}

TEST(Parse, AcceptsEveryVariableAndPlainPaths) {
    Policy p = parse_ok(R"(version = 1
[filesystem]
read = ["/", "{workdir}", "{home}/a", "{tmp}/", "{user_home}/b/c", "/a//b/./c/"]
)");
    EXPECT_EQ(p.fs.read.size(), 6u);
}

TEST(Parse, Ipv4MappedIpv6IsTheSameAddressAsIpv4) {
    Policy p = parse_ok(
        "version = 1\n[network]\nconnect = [\"tcp://[::ffff:10.0.0.1]:80\", "
        "\"tcp://10.0.0.1:80\"]\n");
    ASSERT_EQ(p.net.connect.size(), 2u);
    EXPECT_EQ(p.net.connect[0].addr, v4(10, 0, 0, 1));
    EXPECT_EQ(p.net.connect[1].addr, v4(10, 0, 0, 1));
}

TEST(Parse, UnixNamesUpTo107BytesFit) {
    std::string path = "/" + std::string(106, 'p');
    std::string name(107, 'n');
    Policy p = parse_ok("version = 1\n[network]\nconnect = [\"unix:" + path + "\", \"unix-abstract:" + name + "\"]\n");
    ASSERT_EQ(p.net.connect.size(), 2u);
    EXPECT_EQ(p.net.connect[0].name, path);
    EXPECT_EQ(p.net.connect[1].name, name);
}

// ---- errors, each with its exact position ----

TEST(ParseErrors, UnknownKeyNamesItAndTheKeysExpected) {
    EXPECT_EQ(errors("version = 1\n[filesystem]\nwrte = []\n"),
              (Lines{"p.toml:3:1: unknown key 'filesystem.wrte'; expected one of read, write, "
                     "deny_write, deny, exec, protect_git"}));
    EXPECT_EQ(errors("version = 1\nmodee = \"audit\"\n"),
              (Lines{"p.toml:2:1: unknown key 'modee'; expected one of version, mode, filesystem, "
                     "network, process, env, limits"}));
    EXPECT_EQ(errors("version = 1\n[network]\nconect = []\n"),
              (Lines{"p.toml:3:1: unknown key 'network.conect'; expected one of connect, bind, families, domains"}));
    EXPECT_EQ(errors("version = 1\n[process]\nuserns = true\n"),
              (Lines{"p.toml:3:1: unknown key 'process.userns'; expected one of user_namespaces"}));
    EXPECT_EQ(errors("version = 1\n[env]\nunset = []\n"),
              (Lines{"p.toml:3:1: unknown key 'env.unset'; expected one of keep, set"}));
}

TEST(ParseErrors, UnknownTable) {
    EXPECT_EQ(errors("version = 1\n[filesytem]\nread = []\n"),
              (Lines{"p.toml:2:2: unknown table 'filesytem'; expected one of filesystem, network, "
                     "process, env, limits"}));
    EXPECT_EQ(errors("version = 1\n[network.proxy]\nx = 1\n"),
              (Lines{"p.toml:2:10: unknown key 'network.proxy'; expected one of connect, bind, families, domains"}));
}

TEST(ParseErrors, WrongTypes) {
    EXPECT_EQ(errors("version = 1\n[filesystem]\nread = \"/usr\"\n"),
              (Lines{"p.toml:3:8: filesystem.read must be an array of strings"}));
    // An element of the wrong type is reported at the element.
    EXPECT_EQ(errors("version = 1\n[filesystem]\nread = [\"/usr\", 3]\n"),
              (Lines{"p.toml:3:17: filesystem.read must be an array of strings"}));
    EXPECT_EQ(errors("version = 1\nfilesystem = 1\n"), (Lines{"p.toml:2:14: filesystem must be a table"}));
    EXPECT_EQ(errors("version = 1\n[network]\nbind = [1]\n"),
              (Lines{"p.toml:3:9: network.bind must be an array of strings"}));
    EXPECT_EQ(errors("version = 1\n[process]\nuser_namespaces = \"no\"\n"),
              (Lines{"p.toml:3:19: process.user_namespaces must be true or false"}));
    EXPECT_EQ(errors("version = 1\n[env]\nkeep = \"PATH\"\n"),
              (Lines{"p.toml:3:8: env.keep must be an array of strings"}));
    EXPECT_EQ(errors("version = 1\n[env]\nset = [\"A=1\"]\n"),
              (Lines{"p.toml:3:7: env.set must be a table of strings, such as { NAME = \"value\" }"}));
    EXPECT_EQ(errors("version = 1\n[env]\nset = { A = 1 }\n"), (Lines{"p.toml:3:13: env.set.A must be a string"}));
}

TEST(Parse, FamiliesByName) {
    Policy p = parse_ok("version = 1\n[network]\nfamilies = [\"netlink\", \"vsock\"]\n");
    EXPECT_EQ(p.net.families, (std::vector<int>{AF_NETLINK, AF_VSOCK}));
}

TEST(ParseErrors, UnknownFamily) {
    EXPECT_EQ(errors("version = 1\n[network]\nfamilies = [\"netlnk\"]\n"),
              (Lines{"p.toml:3:13: network.families: unknown address family 'netlnk' (e.g. "
                     "netlink, packet, vsock, bluetooth, can, alg)"}));
}

TEST(ParseErrors, BadEndpoint) {
    EXPECT_EQ(errors("version = 1\n[network]\nconnect = [\"tcp://localhost:80\"]\n"),
              (Lines{"p.toml:3:12: network.connect: bad endpoint 'tcp://localhost:80': 'localhost' "
                     "is not an IP address; host names are not allowed, use an IP literal such as "
                     "127.0.0.1"}));
}

TEST(ParseErrors, EachMalformedEndpointIsRejectedWithAReason) {
    struct Case {
        std::string text;
        std::string reason;
    };
    const std::vector<Case> connect_cases = {
        {"http://1.2.3.4:80", "expected tcp://IP:PORT, udp://IP:PORT, unix:/PATH or unix-abstract:NAME"},
        {"tcp://1.2.3.4", "missing ':PORT' after the address"},
        {"tcp://1.2.3.4:", "port '' is not a number from 0 to 65535"},
        {"tcp://1.2.3.4:65536", "port '65536' is not a number from 0 to 65535"},
        {"tcp://1.2.3.4:8o", "port '8o' is not a number from 0 to 65535"},
        {"tcp://1.2.3.4:-1", "port '-1' is not a number from 0 to 65535"},
        {"tcp://1.2.3.4:0", "port 0 is only allowed in network.bind"},
        {"tcp://1.2.3:80",
         "'1.2.3' is not an IP address; host names are not allowed, use an IP "
         "literal such as 127.0.0.1"},
        {"udp://example.com:53",
         "'example.com' is not an IP address; host names are not allowed, "
         "use an IP literal such as 127.0.0.1"},
        {"tcp://::1:80", "an IPv6 address must be in brackets, as in tcp://[::1]:80"},
        {"tcp://[::1:80", "missing ']' after the IPv6 address"},
        {"tcp://[::1]80", "missing ':PORT' after the address"},
        {"tcp://[1.2.3.4]:80", "'1.2.3.4' is not an IPv6 address"},
        {"tcp://[fe80::1%eth0]:80", "'fe80::1%eth0' is not an IPv6 address"},
        {"unix:run/x.sock", "a unix socket path must be absolute"},
        {"unix:/" + std::string(107, 'p'), "unix socket path is 108 bytes; at most 107 fit"},
        {"unix-abstract:", "an abstract socket name must be 1 to 107 bytes"},
        {"unix-abstract:" + std::string(108, 'n'), "an abstract socket name must be 1 to 107 bytes"},
    };
    for (const auto& c : connect_cases) {
        EXPECT_EQ(errors("version = 1\n[network]\nconnect = [\"" + c.text + "\"]\n"),
                  (Lines{"p.toml:3:12: network.connect: bad endpoint '" + c.text + "': " + c.reason}))
            << c.text;
    }
}

TEST(ParseErrors, BindAllowsPortZeroButConnectDoesNot) {
    EXPECT_EQ(errors("version = 1\n[network]\nbind = [\"tcp://127.0.0.1:0\", \"udp://[::1]:0\"]\n"), Lines{});
    EXPECT_EQ(errors("version = 1\n[network]\nconnect = [\"udp://[::1]:0\"]\n"),
              (Lines{"p.toml:3:12: network.connect: bad endpoint 'udp://[::1]:0': port 0 is only "
                     "allowed in network.bind"}));
}

TEST(ParseErrors, UnknownVariable) {
    EXPECT_EQ(errors("version = 1\n[filesystem]\nread = [\"{foo}/x\"]\n"),
              (Lines{"p.toml:3:9: filesystem.read: path '{foo}/x' uses unknown variable '{foo}'; "
                     "expected {workdir}, {home}, {tmp} or {user_home}"}));
    EXPECT_EQ(errors("version = 1\n[filesystem]\ndeny = [\"/a/{HOME}\"]\n"),
              (Lines{"p.toml:3:9: filesystem.deny: path '/a/{HOME}' uses unknown variable "
                     "'{HOME}'; expected {workdir}, {home}, {tmp} or {user_home}"}));
}

TEST(ParseErrors, MisplacedVariablesAndBraces) {
    auto one = [](std::string path) {
        auto e = errors("version = 1\n[filesystem]\nwrite = [\"" + path + "\"]\n");
        return e.size() == 1 ? e[0] : "";
    };
    EXPECT_EQ(one("/x/{home}"),
              "p.toml:3:10: filesystem.write: path '/x/{home}' has variable "
              "{home} in the middle; variables may only start a path");
    EXPECT_EQ(one("{home}x"), "p.toml:3:10: filesystem.write: path '{home}x' has variable {home} not followed by '/'");
    EXPECT_EQ(one("{home"), "p.toml:3:10: filesystem.write: path '{home' has a '{' without a closing '}'");
    EXPECT_EQ(one("/a}"), "p.toml:3:10: filesystem.write: path '/a}' has a stray '}'");
    EXPECT_EQ(one("{home}/a{"), "p.toml:3:10: filesystem.write: path '{home}/a{' has a stray '{'");
}

TEST(ParseErrors, RelativeEmptyAndDotDotPaths) {
    EXPECT_EQ(errors("version = 1\n[filesystem]\nread = [\"usr\"]\n"),
              (Lines{"p.toml:3:9: filesystem.read: path 'usr' is relative; a rule must start with "
                     "'/' or a variable such as {workdir}"}));
    EXPECT_EQ(errors("version = 1\n[filesystem]\nexec = [\"\"]\n"),
              (Lines{"p.toml:3:9: filesystem.exec: path '' is empty"}));
    EXPECT_EQ(errors("version = 1\n[filesystem]\ndeny_write = [\"{workdir}/../x\"]\n"),
              (Lines{"p.toml:3:15: filesystem.deny_write: path '{workdir}/../x' contains '..'"}));
    // Only a whole '..' component is refused.
    EXPECT_EQ(errors("version = 1\n[filesystem]\nread = [\"/a/..b/c..\"]\n"), Lines{});
}

TEST(Parse, ProtectGitListsWorkTrees) {
    Policy p = parse_ok("version = 1\n[filesystem]\nprotect_git = [\"{workdir}\", \"/srv/repo\"]\n");
    EXPECT_EQ(paths(p.fs.protect_git), (Lines{"{workdir}", "/srv/repo"}));
    EXPECT_EQ(p.fs.protect_git[1].where.line, 3);
    EXPECT_EQ(p.fs.protect_git[1].where.col, 29);
    EXPECT_TRUE(p.fs.deny_write.empty());
}

TEST(ParseErrors, ProtectGitPathsAreCheckedLikeRules) {
    EXPECT_EQ(errors("version = 1\n[filesystem]\nprotect_git = [\"repo\", \"{workdir}/../x\", 3]\n"),
              (Lines{"p.toml:3:16: filesystem.protect_git: path 'repo' is relative; a rule must start "
                     "with '/' or a variable such as {workdir}",
                     "p.toml:3:24: filesystem.protect_git: path '{workdir}/../x' contains '..'",
                     "p.toml:3:42: filesystem.protect_git must be an array of strings"}));
    EXPECT_EQ(errors("version = 1\n[filesystem]\nprotect_git = \"{workdir}\"\n"),
              (Lines{"p.toml:3:15: filesystem.protect_git must be an array of strings"}));
    EXPECT_EQ(errors("version = 1\n[filesystem]\nprotect_git = [\"{nope}\"]\n"),
              (Lines{"p.toml:3:16: filesystem.protect_git: path '{nope}' uses unknown variable '{nope}'; "
                     "expected {workdir}, {home}, {tmp} or {user_home}"}));
}

TEST(ParseErrors, BadVersion) {
    EXPECT_EQ(errors("version = 2\n"),
              (Lines{"p.toml:1:11: unsupported policy version 2; this confine reads version 1"}));
    EXPECT_EQ(errors("version = \"1\"\n"), (Lines{"p.toml:1:11: version must be the integer 1"}));
    EXPECT_EQ(errors("version = 1.0\n"), (Lines{"p.toml:1:11: version must be the integer 1"}));
    EXPECT_EQ(errors("mode = \"audit\"\n"), (Lines{"p.toml:1:1: missing 'version = 1' at the top of the policy"}));
}

TEST(ParseErrors, BadMode) {
    EXPECT_EQ(errors("version = 1\nmode = \"permissive\"\n"),
              (Lines{"p.toml:2:8: mode must be \"enforce\" or \"audit\""}));
    EXPECT_EQ(errors("version = 1\nmode = true\n"), (Lines{"p.toml:2:8: mode must be \"enforce\" or \"audit\""}));
}

TEST(ParseErrors, BadEnvNames) {
    EXPECT_EQ(errors("version = 1\n[env]\nkeep = [\"PATH\", \"A-B\", \"1X\", \"\"]\n"),
              (Lines{"p.toml:3:17: env.keep: 'A-B' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)",
                     "p.toml:3:24: env.keep: '1X' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)",
                     "p.toml:3:30: env.keep: '' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"}));
    EXPECT_EQ(errors("version = 1\n[env]\nset = { \"A B\" = \"x\" }\n"),
              (Lines{"p.toml:3:9: env.set: 'A B' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)"}));
}

TEST(ParseErrors, HomeAndTmpdirBelongToConfine) {
    EXPECT_EQ(errors("version = 1\n[env]\nkeep = [\"HOME\"]\nset = { TMPDIR = \"/tmp\" }\n"),
              (Lines{"p.toml:3:9: env.keep: HOME is set by confine (to {home}) and can't be kept or set",
                     "p.toml:4:9: env.set: TMPDIR is set by confine (to {tmp}) and can't be kept or set"}));
}

TEST(ParseErrors, SyntaxErrorCarriesTomlPosition) {
    EXPECT_EQ(errors("version = 1\nmode = \n"),
              (Lines{"p.toml:2:8: Error while parsing key-value pair: expected value, saw '\\n'"}));
    EXPECT_EQ(errors("version = 1\nversion = 2\n"),
              (Lines{"p.toml:2:11: Error while parsing key-value pair: cannot redefine existing "
                     "integer 'version'"}));
}

TEST(ParseErrors, AllErrorsAreReportedInSourceOrder) {
    auto e = errors(R"(version = 3
mode = "strict"
[filesystem]
read = ["usr", "/ok", "{nope}"]
writ = []
[network]
connect = ["tcp://proxy:3128"]
[process]
user_namespaces = 1
[env]
keep = ["HOME"]
[extra]
)");
    EXPECT_EQ(e, (Lines{
                     "p.toml:1:11: unsupported policy version 3; this confine reads version 1",
                     "p.toml:2:8: mode must be \"enforce\" or \"audit\"",
                     "p.toml:4:9: filesystem.read: path 'usr' is relative; a rule must start with "
                     "'/' or a variable such as {workdir}",
                     "p.toml:4:23: filesystem.read: path '{nope}' uses unknown variable '{nope}'; "
                     "expected {workdir}, {home}, {tmp} or {user_home}",
                     "p.toml:5:1: unknown key 'filesystem.writ'; expected one of read, write, "
                     "deny_write, deny, exec, protect_git",
                     "p.toml:7:12: network.connect: bad endpoint 'tcp://proxy:3128': 'proxy' is not "
                     "an IP address; host names are not allowed, use an IP literal such as 127.0.0.1",
                     "p.toml:9:19: process.user_namespaces must be true or false",
                     "p.toml:11:9: env.keep: HOME is set by confine (to {home}) and can't be kept or set",
                     "p.toml:12:2: unknown table 'extra'; expected one of filesystem, network, "
                     "process, env, limits",
                 }));
}

// ---- [limits] ----

TEST(Parse, LimitsInEachForm) {
    auto limits = [](std::string_view body) { return parse_ok("version = 1\n[limits]\n" + std::string(body)).limits; };
    using K = Limit::Kind;
    auto is = [](const Limit& l, K kind, double value) { return l.kind == kind && l.value == value; };

    auto l = limits("memory = 536870912\nswap = \"0\"\npids = 4096\ncpu = 1.5\ntimeout = \"90s\"\n");
    EXPECT_TRUE(is(l.memory, K::Value, 536870912));
    EXPECT_EQ(l.memory.where.line, 3);
    EXPECT_EQ(l.memory.where.col, 10);
    EXPECT_TRUE(is(l.swap, K::Value, 0));
    EXPECT_TRUE(is(l.pids, K::Value, 4096));
    EXPECT_TRUE(is(l.cpu, K::Value, 1.5));
    EXPECT_EQ(l.timeout_s, 90u);

    // Sizes are powers of 1024, either case; a fraction needs a unit.
    EXPECT_TRUE(is(limits("memory = \"512M\"\n").memory, K::Value, 512.0 * 1024 * 1024));
    EXPECT_TRUE(is(limits("memory = \"1.5G\"\n").memory, K::Value, 1.5 * 1024 * 1024 * 1024));
    EXPECT_TRUE(is(limits("memory = \"2g\"\n").memory, K::Value, 2.0 * 1024 * 1024 * 1024));
    EXPECT_TRUE(is(limits("memory = \"64K\"\n").memory, K::Value, 64.0 * 1024));
    EXPECT_TRUE(is(limits("memory = \"1T\"\n").memory, K::Value, 1024.0 * 1024 * 1024 * 1024));
    EXPECT_TRUE(is(limits("memory = \"4096\"\n").memory, K::Value, 4096));
    EXPECT_TRUE(is(limits("swap = \"25%\"\n").swap, K::Percent, 25));
    EXPECT_TRUE(is(limits("memory = \"12.5%\"\n").memory, K::Percent, 12.5));
    EXPECT_TRUE(is(limits("swap = 0\n").swap, K::Value, 0));

    EXPECT_TRUE(is(limits("cpu = 2\n").cpu, K::Value, 2));
    EXPECT_TRUE(is(limits("cpu = \"0.25\"\n").cpu, K::Value, 0.25));
    EXPECT_TRUE(is(limits("cpu = \"50%\"\n").cpu, K::Percent, 50));
    EXPECT_TRUE(is(limits("pids = \"64\"\n").pids, K::Value, 64));

    // "max" is written, unlike an absent key, but both mean no limit.
    l = limits("memory = \"max\"\nswap = \"max\"\npids = \"max\"\ncpu = \"max\"\n");
    for (const Limit* x : {&l.memory, &l.swap, &l.pids, &l.cpu}) EXPECT_EQ(x->kind, K::Max);
    l = limits("");
    for (const Limit* x : {&l.memory, &l.swap, &l.pids, &l.cpu}) EXPECT_EQ(x->kind, K::Unset);
    EXPECT_EQ(l.timeout_s, 0u);
    EXPECT_EQ(parse_ok("version = 1\n").limits.timeout_s, 0u);

    EXPECT_EQ(limits("timeout = \"30m\"\n").timeout_s, 1800u);
    EXPECT_EQ(limits("timeout = \"2h\"\n").timeout_s, 7200u);
    EXPECT_EQ(limits("timeout = 45\n").timeout_s, 45u);
    EXPECT_EQ(limits("timeout = 0\n").timeout_s, 0u);
    EXPECT_EQ(limits("timeout = \"0\"\n").timeout_s, 0u);
}

TEST(ParseErrors, LimitsSayWhatIsWrongAndWhatToWrite) {
    const std::string size_forms =
        "write bytes as an integer (536870912), a size such as \"512M\" or \"2G\" (K, M, G, T: powers of "
        "1024), a share of the machine's memory such as \"50%\", or \"max\"";
    const std::string task_forms = "write a whole number of tasks (processes and threads) such as 1024, or \"max\"";
    const std::string cpu_forms =
        "write a number of CPUs such as 1.5, a share of the machine's CPUs such as \"50%\", or \"max\"";
    auto err = [](std::string_view line) { return errors("version = 1\n[limits]\n" + std::string(line) + "\n"); };

    EXPECT_EQ(err("memory = -1"), (Lines{"p.toml:3:10: limits.memory: -1 is negative; " + size_forms}));
    EXPECT_EQ(err("memory = \"-1G\""), (Lines{"p.toml:3:10: limits.memory: \"-1G\" is negative; " + size_forms}));
    EXPECT_EQ(err("memory = \"512MB\""), (Lines{"p.toml:3:10: limits.memory: \"512MB\" is not a size; " + size_forms}));
    EXPECT_EQ(err("memory = \"512 M\""), (Lines{"p.toml:3:10: limits.memory: \"512 M\" is not a size; " + size_forms}));
    EXPECT_EQ(err("memory = \"1.5\""),
              (Lines{"p.toml:3:10: limits.memory: \"1.5\" is not a whole number; " + size_forms}));
    EXPECT_EQ(err("memory = 1.5e9"),
              (Lines{"p.toml:3:10: limits.memory: 1500000000 is not a whole number; " + size_forms}));
    EXPECT_EQ(err("memory = \"150%\""),
              (Lines{"p.toml:3:10: limits.memory: \"150%\" is more than the whole machine; " + size_forms}));
    EXPECT_EQ(err("memory = 0"),
              (Lines{"p.toml:3:10: limits.memory: 0 would stop the job from running at all; " + size_forms}));
    EXPECT_EQ(err("memory = true"), (Lines{"p.toml:3:10: limits.memory must be a number or a string; " + size_forms}));
    EXPECT_EQ(err("swap = \"lots\""), (Lines{"p.toml:3:8: limits.swap: \"lots\" is not a size; " + size_forms}));

    EXPECT_EQ(err("pids = 0"),
              (Lines{"p.toml:3:8: limits.pids: 0 would stop the job from running at all; " + task_forms}));
    EXPECT_EQ(err("pids = -5"), (Lines{"p.toml:3:8: limits.pids: -5 is negative; " + task_forms}));
    EXPECT_EQ(err("pids = \"50%\""),
              (Lines{"p.toml:3:8: limits.pids: \"50%\" is not a number of tasks; " + task_forms}));
    EXPECT_EQ(err("pids = 10.5"), (Lines{"p.toml:3:8: limits.pids: 10.5 is not a whole number; " + task_forms}));
    EXPECT_EQ(err("pids = 5000000"),
              (Lines{"p.toml:3:8: limits.pids: 5000000 is more than the kernel allows (4194304); " + task_forms}));

    EXPECT_EQ(err("cpu = 0.001"),
              (Lines{"p.toml:3:7: limits.cpu: 0.001 is less than the kernel's minimum of 0.01 CPUs (1 ms per 100 "
                     "ms); " +
                     cpu_forms}));
    EXPECT_EQ(err("cpu = -1.5"), (Lines{"p.toml:3:7: limits.cpu: -1.5 is negative; " + cpu_forms}));
    EXPECT_EQ(err("cpu = \"fast\""), (Lines{"p.toml:3:7: limits.cpu: \"fast\" is not a number of CPUs; " + cpu_forms}));
    EXPECT_EQ(err("cpu = \"2G\""), (Lines{"p.toml:3:7: limits.cpu: \"2G\" is not a number of CPUs; " + cpu_forms}));
    EXPECT_EQ(err("cpu = \"0%\""),
              (Lines{"p.toml:3:7: limits.cpu: \"0%\" would stop the job from running at all; " + cpu_forms}));
    EXPECT_EQ(err("cpu = 1e9"),
              (Lines{"p.toml:3:7: limits.cpu: 1000000000 is more CPUs than any machine has; " + cpu_forms}));

    EXPECT_EQ(err("timeout = \"1d\""),
              (Lines{"p.toml:3:11: limits.timeout: '1d' is not a duration; write \"90s\", \"30m\", \"2h\" or whole "
                     "seconds, or 0 for none"}));
    EXPECT_EQ(err("timeout = -5"),
              (Lines{"p.toml:3:11: limits.timeout: -5 is negative; write \"90s\", \"30m\", \"2h\" or whole seconds, "
                     "or 0 for none"}));
    EXPECT_EQ(err("timeout = 1.5"),
              (Lines{"p.toml:3:11: limits.timeout must be a duration such as \"90s\", \"30m\" or \"2h\", or whole "
                     "seconds"}));
    EXPECT_EQ(err("timeout = \"10000h\""),
              (Lines{"p.toml:3:11: limits.timeout: '10000h' is longer than a year; leave the timeout out for none"}));

    EXPECT_EQ(err("mem = \"1G\""),
              (Lines{"p.toml:3:1: unknown key 'limits.mem'; expected one of memory, swap, pids, cpu, timeout"}));
    EXPECT_EQ(errors("version = 1\nlimits = \"none\"\n"), (Lines{"p.toml:2:10: limits must be a table"}));
}

TEST(Parse, DomainsInEachForm) {
    Policy p = parse_ok(R"(version = 1
[network]
domains = ["API.Example.com", "*.github.com", "model.test:8080"]
)");
    ASSERT_EQ(p.net.domains.size(), 3u);
    EXPECT_EQ(p.net.domains[0].name, "api.example.com");
    EXPECT_EQ(p.net.domains[0].ports, (std::vector<uint16_t>{80, 443}));
    EXPECT_EQ(p.net.domains[0].text, "API.Example.com");
    EXPECT_EQ(p.net.domains[1].name, "*.github.com");
    EXPECT_EQ(p.net.domains[2].name, "model.test");
    EXPECT_EQ(p.net.domains[2].ports, (std::vector<uint16_t>{8080}));
}

TEST(ParseErrors, DomainsSayWhatIsWrong) {
    auto err = [](std::string_view entry) {
        return errors("version = 1\n[network]\ndomains = [\"" + std::string(entry) + "\"]\n");
    };
    const std::string where = "p.toml:3:12: network.domains: bad entry '";
    const std::string name_forms =
        "expected a host name (letters, digits, '-' and '.'), '*.' and a name, either with an optional :PORT";
    EXPECT_EQ(err("127.0.0.1"), (Lines{where + "127.0.0.1': an IP address is not a name; list addresses in "
                                               "network.connect"}));
    EXPECT_EQ(err("[::1]:443"), (Lines{where + "[::1]:443': an IP address is not a name; list addresses in "
                                               "network.connect"}));
    EXPECT_EQ(err("example.com."), (Lines{where + "example.com.': write the name without the trailing dot"}));
    EXPECT_EQ(err("example.com:0"), (Lines{where + "example.com:0': port '0' is not a number from 1 to 65535"}));
    EXPECT_EQ(err("example.com:https"),
              (Lines{where + "example.com:https': port 'https' is not a number from 1 to 65535"}));
    for (std::string_view bad : {"", "*", "*.", "a*.example.com", "*.*.example.com", "exa mple.com", "-a.example.com",
                                 "a..example.com", "example.com/path", "user@example.com", "10.0.0.256"})
        EXPECT_EQ(err(bad), (Lines{where + std::string(bad) + "': " + name_forms})) << bad;
    EXPECT_EQ(err(std::string(64, 'a') + ".com"), (Lines{where + std::string(64, 'a') + ".com': " + name_forms}));
}

TEST(ParseErrors, ProxyVariablesAreConfinesWhenDomainsAreGiven) {
    for (std::string_view name : kProxyEnv) {
        EXPECT_EQ(errors(fmt::format("version = 1\n[network]\ndomains = [\"a.test\"]\n[env]\nkeep = [\"{}\"]\n", name)),
                  (Lines{fmt::format("p.toml:5:9: env.keep: {} is set by confine to the job's proxy when "
                                     "network.domains is given, and can't be kept or set",
                                     name)}));
        // Without domains they are the policy's to keep.
        EXPECT_EQ(errors(fmt::format("version = 1\n[env]\nkeep = [\"{}\"]\n", name)), Lines{});
    }
    EXPECT_EQ(errors("version = 1\n[network]\ndomains = [\"a.test\"]\n[env.set]\nhttps_proxy = \"http://x:1\"\n"),
              (Lines{"p.toml:5:1: env.set: https_proxy is set by confine to the job's proxy when network.domains is "
                     "given, and can't be kept or set"}));
}

TEST(ParseDuration, SecondsMinutesHoursOrWholeSeconds) {
    EXPECT_EQ(parse_duration("90s"), 90u);
    EXPECT_EQ(parse_duration("30m"), 1800u);
    EXPECT_EQ(parse_duration("2h"), 7200u);
    EXPECT_EQ(parse_duration("45"), 45u);
    EXPECT_EQ(parse_duration("0"), 0u);
    EXPECT_EQ(parse_duration("8760h"), 365u * 24 * 3600);
    for (const char* bad : {"", "s", "1.5s", "-1s", "1d", "10 s", " 10s", "1h30m", "ten", "0x10"}) {
        auto d = parse_duration(bad);
        ASSERT_FALSE(d) << "'" << bad << "' parsed as " << *d;
        EXPECT_EQ(d.error(), std::string("'") + bad +
                                 "' is not a duration; write \"90s\", \"30m\", \"2h\" or "
                                 "whole seconds, or 0 for none");
    }
    for (const char* big : {"8761h", "99999999999999999999999s"})
        EXPECT_EQ(parse_duration(big).error(),
                  std::string("'") + big + "' is longer than a year; leave the timeout out for none");
}

TEST(Diagnostic, FormatsAsFileLineColMessage) {
    EXPECT_EQ((Diagnostic{"a.toml", {3, 7}, "bad"}.str()), "a.toml:3:7: bad");
    EXPECT_EQ((Diagnostic{"a.toml", {}, "bad"}.str()), "a.toml: bad");
}

// ---- files ----

class ParseFile : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = ::testing::TempDir() + "confine_parse_test_XXXXXX";
        int fd = mkstemp(path_.data());
        ASSERT_GE(fd, 0);
        close(fd);
    }
    void TearDown() override { unlink(path_.c_str()); }
    void write(std::string_view text) {
        int fd = open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
        close(fd);
    }
    std::string path_;
};

TEST_F(ParseFile, ReadsAPolicy) {
    write("version = 1\nmode = \"audit\"\n");
    auto p = parse_file(path_);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->mode, Mode::Audit);
    EXPECT_EQ(p->source, path_);
}

TEST_F(ParseFile, JoinsAllDiagnosticsWithNewlines) {
    write("version = 1\nmode = \"x\"\n[filesystem]\nread = [\"usr\"]\n");
    auto p = parse_file(path_);
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().message, path_ + ":2:8: mode must be \"enforce\" or \"audit\"\n" + path_ +
                                     ":4:9: filesystem.read: path 'usr' is relative; a rule must start with '/' or a "
                                     "variable such as {workdir}");
}

TEST_F(ParseFile, MissingFileNamesTheFileAndTheReason) {
    std::string missing = path_ + ".missing";
    auto p = parse_file(missing);
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().message, "policy: reading " + missing + ": No such file or directory");
    EXPECT_EQ(p.error().err, ENOENT);
}

TEST_F(ParseFile, DirectoryIsNotAPolicy) {
    auto p = parse_file(::testing::TempDir());
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().err, EISDIR);
    EXPECT_NE(p.error().message.find(::testing::TempDir()), std::string::npos);
}

// ---- the embedded default ----

TEST(DefaultPolicy, ParsesToTheContractsDefault) {
    Policy p = default_policy();
    EXPECT_EQ(p.source, "<default>");
    EXPECT_EQ(p.mode, Mode::Enforce);
    EXPECT_EQ(paths(p.fs.read), (Lines{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
                                       "/nix/store", "/proc", "/sys", "/dev/random", "/dev/urandom"}));
    EXPECT_EQ(paths(p.fs.write), (Lines{"{workdir}", "{home}", "{tmp}", "/dev/null", "/dev/zero", "/dev/full",
                                        "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/shm"}));
    EXPECT_TRUE(p.fs.deny_write.empty());
    EXPECT_EQ(paths(p.fs.protect_git), (Lines{"{workdir}"}));
    EXPECT_EQ(paths(p.fs.deny), (Lines{"{user_home}"}));
    EXPECT_FALSE(p.fs.exec.has_value());
    EXPECT_TRUE(p.net.connect.empty());
    EXPECT_TRUE(p.net.bind.empty());
    EXPECT_FALSE(p.user_namespaces);
    EXPECT_EQ(p.env_keep, (Lines{"PATH", "LANG", "LC_ALL", "TERM"}));
    EXPECT_TRUE(p.env_set.empty());
}

// A fork bomb and a memory hog stop inside the job; ordinary work (make -j,
// a JVM's threads) fits. See default.toml for why each value.
TEST(DefaultPolicy, LimitsStopForkBombsAndMemoryHogs) {
    const auto& l = default_policy().limits;
    EXPECT_EQ(l.memory.kind, Limit::Kind::Percent);
    EXPECT_EQ(l.memory.value, 50);
    EXPECT_EQ(l.swap.kind, Limit::Kind::Value);
    EXPECT_EQ(l.swap.value, 0);
    EXPECT_EQ(l.pids.kind, Limit::Kind::Value);
    EXPECT_EQ(l.pids.value, 4096);
    EXPECT_EQ(l.cpu.kind, Limit::Kind::Max);
    EXPECT_EQ(l.timeout_s, 0u);
}

TEST(DefaultPolicy, TextIsTheParsedText) {
    auto p = parse(default_policy_text(), "<default>");
    ASSERT_TRUE(p);
    EXPECT_NE(default_policy_text().find("version = 1"), std::string_view::npos);
}

// What the build embedded (policy/embed_default.cpp) is what default.toml
// parses to: every member of Policy carried over.
TEST(DefaultPolicy, IsItsTextParsed) {
    auto p = parse(default_policy_text(), "<default>");
    ASSERT_TRUE(p);
    EXPECT_TRUE(default_policy() == *p);
}

}  // namespace
}  // namespace confine::policy
