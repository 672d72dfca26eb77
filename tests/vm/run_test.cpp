// `confine run` as a launcher: who the job runs as and with what, exit
// statuses, refusals that must run nothing, `confine check`, and what is
// left behind after a job.
#include <fcntl.h>
#include <fmt/format.h>

#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>

#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;

class RunTest : public VmTest {
protected:
    std::string loaded_build();
    void expect_mkdir_outside_refused();
};

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

// "Name:\tvalue" lines of /proc/PID/status.
std::map<std::string, std::string> status_fields(const std::string& text) {
    std::map<std::string, std::string> out;
    for (const auto& l : lines(text))
        if (auto colon = l.find(':'); colon != npos) {
            auto v = l.find_first_not_of(" \t", colon + 1);
            out[l.substr(0, colon)] = v == npos ? "" : l.substr(v);
        }
    return out;
}

// A kernel that can't enforce is a failure, never a skip. The environment
// already stops the whole suite on it; this names it as a test of its own.
TEST_F(RunTest, ProbeSaysThisKernelCanEnforce) {
    Process p = Process::start({.argv = {confine_bin(), "probe"}, .env = {"PATH=/usr/bin:/bin"}});
    Result r = p.wait();
    EXPECT_EQ(r.status, 0) << r.describe();
}

// ---- who and what the job is ---------------------------------------------------

TEST_F(RunTest, JobRunsAsTheTargetUserWithItsGroups) {
    Result control = run_unconfined("id -u; id -g; id -G");
    ASSERT_EQ(control.status, 0) << control.describe();
    Result r = run_confined("", "id -u; id -g; id -G");
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, control.out);
    EXPECT_EQ(lines(r.out).at(0), std::to_string(test_user().uid)) << r.describe();
    EXPECT_EQ(lines(r.out).at(1), std::to_string(test_user().gid)) << r.describe();
}

TEST_F(RunTest, EnvironmentIsScrubbed) {
    Result r = run({.env = {"CONFINE_TEST_SECRET=xyz", "SSH_AUTH_SOCK=/run/user/1000/ssh", "GITHUB_TOKEN=ghp_xyz",
                            "LD_PRELOAD=/nonexistent.so", "LC_ALL=C"},
                    .argv = {"/usr/bin/env"}});
    ASSERT_EQ(r.status, 0) << r.describe();
    std::map<std::string, std::string> env;
    for (const auto& l : lines(r.out)) env[l.substr(0, l.find('='))] = l.substr(l.find('=') + 1);
    std::set<std::string> names;
    for (const auto& [k, v] : env) names.insert(k);
    EXPECT_EQ(names, (std::set<std::string>{"HOME", "LANG", "LC_ALL", "PATH", "TERM", "TMPDIR"})) << r.out;
    EXPECT_EQ(r.out.find("xyz"), npos) << r.out;
    EXPECT_EQ(env["PATH"], "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    EXPECT_EQ(env["LANG"], "C.UTF-8");
    EXPECT_EQ(env["LC_ALL"], "C");
    EXPECT_EQ(env["TERM"], "dumb");
}

// A policy that neither keeps nor sets PATH still lets the job find its
// programs (gcc would not even find its own cc1 without one).
TEST_F(RunTest, AJobWhosePolicyHasNoPathGetsTheStandardOne) {
    const std::string policy =
        "version = 1\n[filesystem]\nread = [\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc\"]\n"
        "write = [\"{workdir}\"]\n[env]\nkeep = []\n";
    Result r =
        run({.policy = policy, .env = {"PATH=/nonexistent"}, .argv = {"sh", "-c", "echo $PATH; command -v git"}});
    ASSERT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n/usr/bin/git\n") << r.describe();

    // One the policy keeps is the caller's.
    r = run({.policy = policy + "set = { PATH = \"/bin\" }\n", .argv = {"/bin/sh", "-c", "echo $PATH"}});
    EXPECT_EQ(r.out, "/bin\n") << r.describe();
}

// --seed-home copies a directory the runner owns into the fresh HOME, as
// the job's user: files, modes and symlinks (as symlinks), nothing the
// user couldn't read, and nothing but files, directories and symlinks.
TEST_F(RunTest, SeedHomeIsCopiedIntoThePrivateHomeAsTheJobsUser) {
    const std::string seed = at("seed");
    make_dir(seed);
    make_dir(seed + "/.config");
    make_dir(seed + "/.config/agent");
    write_file(seed + "/.config/agent/settings.json", "{\"baseURL\": \"http://127.0.0.2:8080\"}\n", 0600);
    write_file(seed + "/.profile", "export X=1\n", 0644);
    ASSERT_EQ(symlink(".config/agent/settings.json", (seed + "/settings").c_str()), 0);
    ASSERT_EQ(lchown((seed + "/settings").c_str(), test_user().uid, test_user().gid), 0);

    Result r = run({.args = {"--seed-home", seed},
                    .argv = {"/bin/sh", "-c",
                             "cd \"$HOME\" && find . -mindepth 1 -printf '%P %y %m %u\\n' | sort && "
                             "cat settings && echo more >> .profile && ls -ld \"$HOME\" | cut -c1-10"}});
    ASSERT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, fmt::format(".config d 755 {0}\n.config/agent d 755 {0}\n.config/agent/settings.json f 600 {0}\n"
                                 ".profile f 644 {0}\nsettings l 777 {0}\n"
                                 "{{\"baseURL\": \"http://127.0.0.2:8080\"}}\ndrwx------\n",
                                 kUser))
        << r.describe();
    EXPECT_EQ(read_file(seed + "/.profile"), "export X=1\n") << "the job wrote through to the runner's seed";
    EXPECT_TRUE(r.audit.empty()) << r.describe();

    // What the job's user can't read is not copied: the job never starts.
    write_file(seed + "/secret", "x", 0600);
    ASSERT_EQ(chown((seed + "/secret").c_str(), 0, 0), 0);
    r = run({.args = {"--seed-home", seed}, .argv = {"/bin/sh", "-c", "touch ran"}});
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("--seed-home " + seed), npos) << r.describe();
    EXPECT_FALSE(exists(work() + "/ran"));
    unlink((seed + "/secret").c_str());

    // Nor a seed the job could have chosen: in its writable set, or
    // reached through a symlink it can write (here, to the real home).
    const std::string in_work = work() + "/seed";
    make_dir(in_work);
    ASSERT_EQ(symlink(kUserHome, (work() + "/agent").c_str()), 0);
    for (const std::string& dir : {in_work, work() + "/agent/.ssh", work() + "/agent/.ssh/"}) {
        r = run({.args = {"--seed-home", dir}, .argv = {"/bin/sh", "-c", "touch ran"}});
        EXPECT_EQ(r.status, 125) << dir << "\n" << r.describe();
        EXPECT_NE(r.err.find("writable"), npos) << r.describe();
    }
    EXPECT_FALSE(exists(work() + "/ran"));

    // Nor a fifo, nor a seed that isn't a directory.
    ASSERT_EQ(mkfifo((seed + "/fifo").c_str(), 0644), 0);
    r = run({.args = {"--seed-home", seed}, .argv = {"/bin/sh", "-c", "touch ran"}});
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find(seed + "/fifo: not a file, directory or symlink"), npos) << r.describe();
    unlink((seed + "/fifo").c_str());
    r = run({.args = {"--seed-home", seed + "/.profile"}, .argv = {"/bin/sh", "-c", "touch ran"}});
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("not a directory"), npos) << r.describe();
    EXPECT_FALSE(exists(work() + "/ran"));
}

TEST_F(RunTest, HomeAndTmpdirArePrivateFreshAndWritable) {
    Result r = run_confined("",
                            "for d in \"$HOME\" \"$TMPDIR\"; do "
                            "  [ -z \"$(ls -A \"$d\")\" ] || echo \"$d not empty\"; "
                            "  stat -c '%u %a' \"$d\" && touch \"$d/x\" || exit 1; "
                            "done; echo \"$HOME\"; echo \"$TMPDIR\"");
    ASSERT_EQ(r.status, 0) << r.describe();
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 4u) << r.describe();
    const std::string owner_private = fmt::format("{} 700", test_user().uid);
    EXPECT_EQ(l[0], owner_private) << "HOME is not the user's alone";
    EXPECT_EQ(l[1], owner_private) << "TMPDIR is not the user's alone";
    const std::string& home = l[2];
    const std::string& tmp = l[3];
    EXPECT_NE(home, kUserHome);
    EXPECT_NE(home, tmp);
    EXPECT_NE(home.rfind('/', 0), npos);
    EXPECT_FALSE(exists(home)) << "the private HOME " << home << " outlived the job";
    EXPECT_FALSE(exists(tmp)) << "the private TMPDIR " << tmp << " outlived the job";
    EXPECT_TRUE(r.audit.empty()) << r.describe();
}

TEST_F(RunTest, NoCapabilitiesAndNoNewPrivs) {
    const std::string cmd = "cat /proc/self/status";
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    auto c = status_fields(control.out);
    // As a plain user the bounding set is full and no_new_privs is off:
    // what confine must change.
    ASSERT_NE(c["CapBnd"], "0000000000000000");
    ASSERT_EQ(c["NoNewPrivs"], "0");

    Result r = run_confined("", cmd);
    ASSERT_EQ(r.status, 0) << r.describe();
    auto s = status_fields(r.out);
    for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
        EXPECT_EQ(s[cap], "0000000000000000") << cap;
    EXPECT_EQ(s["NoNewPrivs"], "1");
    EXPECT_EQ(s["Uid"], fmt::format("{0}\t{0}\t{0}\t{0}", test_user().uid));
}

// Where fs.suid_dumpable is 1, a process that drops to a user stays open to
// that user's /proc/PID/mem, so there the job's first process gets a copy
// of confine's memory rather than sharing it (launch.cpp, may_share_memory):
// that way must start the job too.
TEST_F(RunTest, AJobStartsWhereProcessesThatDropToAUserStayDumpable) {
    const std::string knob = "/proc/sys/fs/suid_dumpable";
    const std::string before = read_file(knob);
    auto set = [&](const std::string& v) { ASSERT_TRUE(std::ofstream(knob) << v) << knob; };
    set("1");
    Result r = run_confined("", "id -u");
    set(before);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, std::to_string(test_user().uid) + "\n") << r.describe();
}

TEST_F(RunTest, OnlyStdioIsInherited) {
    // An fd without close-on-exec in confine's own process, as a careless
    // runner might leave one.
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int leak = fcntl(null, F_DUPFD, 7);  // F_DUPFD leaves close-on-exec off
    close(null);
    ASSERT_GE(leak, 7);
    const std::vector<std::string> ls = {"/bin/ls", "/proc/self/fd"};

    // Control: the same fd does reach a process started without confine.
    Process p = Process::start({.argv = ls, .env = {"PATH=/usr/bin:/bin"}, .keep_fd = leak});
    Result control = p.wait();
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_NE(control.out.find(std::to_string(leak) + "\n"), npos) << control.describe();

    Result r = run({.argv = ls, .keep_fd = leak});
    close(leak);
    ASSERT_EQ(r.status, 0) << r.describe();
    // 0-2, plus 3: the directory ls itself opens to list /proc/self/fd.
    EXPECT_EQ(r.out, "0\n1\n2\n3\n") << r.describe();
}

// The job leads a session of its own, without a controlling terminal, so it
// can't push input into its caller's terminal (TIOCSTI) after it ends.
TEST_F(RunTest, JobHasASessionOfItsOwn) {
    // Field 6 of /proc/self/stat is the session id; the shell is its own
    // process (exec'd by sh -c), so "leader" means sid == $$.
    const std::string cmd = "set -- $(cat /proc/$$/stat); [ \"$6\" = $$ ] && echo leader || echo member";
    Result control = run_unconfined(cmd);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_EQ(control.out, "member\n") << control.describe();

    Result r = run_confined("", cmd);
    ASSERT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "leader\n") << r.describe();
}

// ---- exit statuses -------------------------------------------------------------

TEST_F(RunTest, CommandStatusPassesThrough) {
    // 126 is also one of confine's own codes: the job's must pass through unchanged.
    for (int code : {0, 7, 126, 255}) {
        Result r = run_confined("", fmt::format("exit {}", code));
        EXPECT_EQ(r.status, code) << r.describe();
    }
}

TEST_F(RunTest, DeathBySignalIs128PlusN) {
    Result r = run_confined("", "kill -9 $$");
    EXPECT_EQ(r.status, 137) << r.describe();
    r = run_confined("", "kill -TERM $$");
    EXPECT_EQ(r.status, 143) << r.describe();
}

TEST_F(RunTest, CommandNotFoundIs127) {
    Result r = run({.argv = {"no-such-command-confinetest"}});
    EXPECT_EQ(r.status, 127) << r.describe();
    EXPECT_NE(r.err.find("no-such-command-confinetest"), npos) << r.describe();
    r = run({.argv = {work() + "/missing"}});
    EXPECT_EQ(r.status, 127) << r.describe();
}

TEST_F(RunTest, CommandNotExecutableIs126) {
    write_file(work() + "/notexec", "#!/bin/sh\necho ran\n", 0644);
    make_dir(work() + "/dir");
    for (const char* cmd : {"./notexec", "./dir"}) {
        SCOPED_TRACE(cmd);
        Result r = run({.argv = {cmd}});
        EXPECT_EQ(r.status, 126) << r.describe();
        EXPECT_EQ(r.out.find("ran"), npos) << r.describe();
    }
}

TEST_F(RunTest, BadPolicyFileIs125WithFileLineCol) {
    Result r = run({.policy = "version = 1\n\n[filesystem]\nread = [\"/usr\", \"etc\"]\n",
                    .argv = {"/bin/sh", "-c", "touch marker"}});
    EXPECT_EQ(r.status, 125) << r.describe();
    const std::regex where(R"(policy-1\.toml:4:[0-9]+: )");
    EXPECT_TRUE(std::regex_search(r.err, where)) << r.describe();
    EXPECT_FALSE(exists(work() + "/marker")) << "the job ran despite the bad policy";
}

TEST_F(RunTest, RefusesRootWithoutAllowRoot) {
    Result r = run({.argv = {"/bin/sh", "-c", "touch /var/tmp/confine-tests/root-marker"}, .as_user = false});
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("root"), npos) << r.describe();
    EXPECT_NE(r.err.find("--allow-root"), npos) << r.describe();
    EXPECT_FALSE(exists("/var/tmp/confine-tests/root-marker"));
    unlink("/var/tmp/confine-tests/root-marker");

    // It is about root: with --allow-root the same job starts, still confined.
    r = run({.args = {"--allow-root"},
             .argv = {"/bin/sh", "-c", "id -u; grep CapEff /proc/self/status"},
             .as_user = false});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(r.out, "0\nCapEff:\t0000000000000000\n") << r.describe();
}

TEST_F(RunTest, RefusesToStartWhenTheProbeFails) {
    // In a private mount namespace, hide bpf from the LSM list, as on a
    // kernel booted without lsm=...,bpf.
    const std::string marker = work() + "/marker";
    auto confined_touch = [&](const std::string& fake_lsm) {
        std::string mount =
            fake_lsm.empty() ? "true" : fmt::format("mount --bind {} /sys/kernel/security/lsm", fake_lsm);
        return run_root(fmt::format(
            "unshare -m sh -c '{} && {} probe; echo probe=$? >&2; exec {} run --user {} --workdir {} -- touch {}'",
            mount, confine_bin(), confine_bin(), kUser, work(), marker));
    };

    // Control: in the same setup without the fake list, the job runs.
    Result control = confined_touch("");
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(marker)) << control.describe();
    ASSERT_NE(control.err.find("probe=0"), npos) << control.describe();
    unlink(marker.c_str());

    for (const char* lsms : {"lockdown,capability,landlock,yama,apparmor\n", ""}) {
        SCOPED_TRACE(fmt::format("lsm list '{}'", lsms));
        const std::string fake = at("lsm");
        write_file(fake, lsms);
        Result r = confined_touch(fake);
        EXPECT_EQ(r.status, 125) << r.describe();
        EXPECT_NE(r.err.find("probe=1"), npos) << "confine probe should fail too\n" << r.describe();
        EXPECT_NE(r.err.find("BPF LSM"), npos) << r.describe();
        EXPECT_NE(r.err.find("lsm="), npos) << r.describe();
        EXPECT_FALSE(exists(marker)) << "the job ran although enforcement was impossible";
        unlink(marker.c_str());
    }
}

// ---- what a job leaves behind ---------------------------------------------------

Result bpftool(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/sbin/bpftool"};
    argv.insert(argv.end(), args.begin(), args.end());
    Process p = Process::start({.argv = argv, .env = {"PATH=/usr/sbin:/usr/bin:/bin"}});
    return p.wait();
}

// Names of confine's pinned maps (under /sys/fs/bpf/confine/) that hold an
// entry whose key carries cgroup id `cgid`, as a u64 at a 4-byte aligned
// offset (how every per-job map key starts, split in two u32 or not).
std::set<std::string> maps_keyed_by(uint64_t cgid) {
    std::set<std::string> out;
    Result show = bpftool({"-j", "-f", "map", "show"});
    EXPECT_EQ(show.status, 0) << show.describe();
    // Socket storage can't be listed; it goes with its sockets anyway.
    static const std::regex pin_re(R"re("type":"(?!sk_storage")[^{}]*"(/sys/fs/bpf/confine/[^"]+)")re");
    static const std::regex key_re(R"re("key":\[([^\]]*)\])re");
    static const std::regex byte_re(R"re("0x([0-9a-f]{2})")re");
    std::set<std::string> pins;
    for (std::sregex_iterator it(show.out.begin(), show.out.end(), pin_re), end; it != end; ++it)
        pins.insert((*it)[1].str());
    EXPECT_FALSE(pins.empty()) << "no pinned confine maps\n" << show.describe();
    for (const std::string& pin : pins) {
        // The ring pool is keyed by slot, not by job, and dumping its 16,384
        // slots takes bpftool minutes under TCG.
        if (pin.ends_with("/rings")) continue;
        Result dump = bpftool({"-j", "map", "dump", "pinned", pin});
        EXPECT_EQ(dump.status, 0) << dump.describe();
        for (std::sregex_iterator k(dump.out.begin(), dump.out.end(), key_re), end; k != end; ++k) {
            std::string hex = (*k)[1].str();
            std::vector<uint8_t> key;
            for (std::sregex_iterator b(hex.begin(), hex.end(), byte_re); b != end; ++b)
                key.push_back(static_cast<uint8_t>(std::stoul((*b)[1].str(), nullptr, 16)));
            for (size_t off = 0; off + 8 <= key.size(); off += 4) {
                uint64_t v;
                memcpy(&v, key.data() + off, 8);
                if (v == cgid) out.insert(pin.substr(pin.rfind('/') + 1));
            }
        }
    }
    return out;
}

// How many keys job_keys holds as made by cgroup `cgid` (its value).
size_t keys_of_job(uint64_t cgid) {
    Result show = bpftool({"-j", "-f", "map", "show"});
    static const std::regex pin_re(R"re("(/sys/fs/bpf/confine/[^"]+/job_keys)")re");
    std::smatch pin;
    EXPECT_TRUE(std::regex_search(show.out, pin, pin_re)) << "no pinned job_keys\n" << show.describe();
    Result dump = bpftool({"-j", "map", "dump", "pinned", pin[1].str()});
    EXPECT_EQ(dump.status, 0) << dump.describe();
    static const std::regex value_re(R"re("value":\[([^\]]*)\])re");
    static const std::regex byte_re(R"re("0x([0-9a-f]{2})")re");
    size_t n = 0;
    for (std::sregex_iterator v(dump.out.begin(), dump.out.end(), value_re), end; v != end; ++v) {
        std::string hex = (*v)[1].str();
        uint64_t owner = 0;
        int shift = 0;
        for (std::sregex_iterator b(hex.begin(), hex.end(), byte_re); b != end && shift < 64; ++b, shift += 8)
            owner |= std::stoull((*b)[1].str(), nullptr, 16) << shift;
        n += owner == cgid;
    }
    return n;
}

TEST_F(RunTest, NothingIsLeftAttachedOrMappedAfterTheJob) {
    const std::string policy = make_policy({.connect = {"tcp://127.0.0.1:9"}});
    Started job =
        start({.policy = policy,
               .argv = {"/bin/sh", "-c",
                        fmt::format("cat {}; touch ready; while [ ! -e release ]; do sleep 0.1; done", kSshKey)}});
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << finish(job, 1).describe();
    // Job cgroups live in their build's parent: <cgroup2>/confine/<tag>/<job>.
    const std::string cg = job_cgroup(job.job);
    ASSERT_FALSE(cg.empty()) << "no cgroup for " << job.job;
    const std::string parent = cg.substr(0, cg.rfind('/'));
    struct stat st {};
    ASSERT_EQ(stat(cg.c_str(), &st), 0) << cg;
    const uint64_t cgid = st.st_ino;

    // While the job runs, its cgroup carries the programs (inherited from the
    // build's parent, where they are attached once) and its map entries.
    Result effective = bpftool({"cgroup", "show", cg, "effective"});
    EXPECT_NE(effective.out.find("confine_file_open"), npos) << effective.describe();
    std::set<std::string> during = maps_keyed_by(cgid);
    EXPECT_TRUE(during.contains("jobs")) << "the jobs map has no entry for cgroup " << cgid;
    EXPECT_GE(during.size(), 3u) << fmt::format("maps with cgroup {}: {}", cgid, fmt::join(during, ", "));
    EXPECT_EQ(keys_of_job(cgid), 1u) << "the job's session keyring is not in job_keys";

    write_file(work() + "/release", "");
    Result r = finish(job);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_DENIAL(r, "open_read", kSshKey, "cat");
    for (const auto& l : r.audit) EXPECT_EQ(l.num("cgroup_id"), static_cast<int64_t>(cgid)) << l.raw;

    EXPECT_FALSE(exists(cg)) << cg << " outlived the job";
    // Only the build's parents (of jobs, and of job proxies) still carry
    // programs, for the next job.
    Result tree = bpftool({"cgroup", "tree"});
    EXPECT_EQ(tree.status, 0) << tree.describe();
    EXPECT_EQ(tree.out.find(cg), npos) << tree.describe();
    for (size_t at = tree.out.find("/confine/"); at != npos; at = tree.out.find("/confine/", at + 1)) {
        size_t eol = tree.out.find('\n', at);
        std::string path = tree.out.substr(tree.out.rfind('\n', at) + 1, eol - tree.out.rfind('\n', at) - 1);
        path = path.substr(0, path.find_first_of(" \t"));
        EXPECT_TRUE(path == parent || path == parent + ".proxies") << "programs on " << path << "\n" << tree.describe();
    }
    std::set<std::string> after = maps_keyed_by(cgid);
    EXPECT_TRUE(after.empty()) << fmt::format("maps still holding cgroup {}: {}", cgid, fmt::join(after, ", "));
    EXPECT_EQ(keys_of_job(cgid), 0u);
}

// A job's end forgets its keys one by one while it made no more than its
// entry records (CONFINE_JOB_KEYS), and by walking job_keys past that:
// either way none of them outlives it.
TEST_F(RunTest, NoKeyOfAJobOutlivesItHoweverManyItMade) {
    install_helper(work());
    for (int added : {0, 1, 4}) {
        SCOPED_TRACE(fmt::format("{} keys added to the session keyring", added));
        std::string adds;
        for (int i = 0; i < added; i++) adds += fmt::format(" key,add,@s,k{0},v{0}", i);
        unlink((work() + "/ready").c_str());
        unlink((work() + "/release").c_str());
        Started job = start({.argv = {"/bin/sh", "-c",
                                      (added ? "./vmhelper" + adds + "; " : std::string()) +
                                          "touch ready; while [ ! -e release ]; do sleep 0.1; done"}});
        ASSERT_TRUE(wait_until([&] { return exists(work() + "/ready"); }, 60)) << finish(job, 1).describe();
        const std::string cg = job_cgroup(job.job);
        struct stat st {};
        ASSERT_EQ(stat(cg.c_str(), &st), 0) << cg;
        EXPECT_EQ(keys_of_job(st.st_ino), 1u + added);
        write_file(work() + "/release", "");
        Result r = finish(job);
        EXPECT_EQ(r.status, 0) << r.describe();
        for (int i = 0; i < added; i++)
            EXPECT_NE(r.out.find(fmt::format("key,add,@s,k{0},v{0} -> ok", i)), npos) << r.describe();
        EXPECT_EQ(keys_of_job(st.st_ino), 0u);
    }
}

// The build's pins, /sys/fs/bpf/confine/<build tag>, after a first run
// (which loads them if no test did yet); "" if there are none.
std::string RunTest::loaded_build() {
    EXPECT_EQ(run_confined("", "true").status, 0);
    for (const auto& e : std::filesystem::directory_iterator("/sys/fs/bpf/confine"))
        if (exists(e.path().string() + "/fs_ready")) return e.path().string();
    return "";
}

// A job that tries mkdir outside its workdir is refused and audited, as
// the unconfined control shows it could otherwise.
void RunTest::expect_mkdir_outside_refused() {
    const std::string outside = at("outside");
    make_dir(outside, 0777);
    Result control = run_unconfined(fmt::format("mkdir {0}/control && rmdir {0}/control", outside));
    ASSERT_EQ(control.status, 0) << control.describe();
    Result r = run_confined("", fmt::format("mkdir {}/new", outside));
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_FALSE(exists(outside + "/new"));
    EXPECT_DENIAL(r, "mkdir", outside + "/new", "mkdir");
}

// A confine killed while loading leaves some pins but no ready marker; the
// next confine loads again, and its job is enforced. Unpinning a global
// program's link detaches it, so here mkdir goes unguarded until that load.
TEST_F(RunTest, ALoadInterruptedHalfwayIsDoneAgain) {
    const std::string dir = loaded_build();
    ASSERT_FALSE(dir.empty()) << "no fs_ready marker under /sys/fs/bpf/confine";
    // The programs on the build's parent cgroup, which every job inherits.
    const std::string parent = cgroup2_mount() + "/confine/" + dir.substr(dir.rfind('/') + 1);
    Result before = bpftool({"cgroup", "show", parent});
    ASSERT_EQ(before.status, 0) << before.describe();
    for (const char* pin : {"/fs_ready", "/link_confine_path_mkdir"})
        ASSERT_EQ(unlink((dir + pin).c_str()), 0) << dir << pin << ": " << strerror(errno);

    expect_mkdir_outside_refused();
    for (const char* pin : {"/fs_ready", "/link_confine_path_mkdir"}) EXPECT_TRUE(exists(dir + pin)) << dir << pin;
    // The reload replaced the parent's programs instead of adding to them.
    Result after = bpftool({"cgroup", "show", parent});
    EXPECT_EQ(lines(after.out).size(), lines(before.out).size()) << before.describe() << after.describe();
}

// Root unpinning one global program's link detaches the program but leaves
// the ready marker. A start counts the links against the marker's count,
// finds one gone, and loads again before the job runs.
TEST_F(RunTest, AGlobalProgramsLinkUnpinnedIsLinkedAgain) {
    const std::string dir = loaded_build();
    ASSERT_FALSE(dir.empty()) << "no fs_ready marker under /sys/fs/bpf/confine";
    const std::string link = dir + "/link_confine_path_mkdir";
    ASSERT_EQ(unlink(link.c_str()), 0) << link << ": " << strerror(errno);

    expect_mkdir_outside_refused();
    EXPECT_TRUE(exists(link));
}

// Root detaching a cgroup program from the build's parent cgroup leaves its
// pin, and the ready marker that holds its id. A start finds that id
// missing among the parent's programs and attaches the pin again before
// the job runs: here creating a file outside the workdir (path_mknod, an
// lsm_cgroup program) goes unguarded until then.
TEST_F(RunTest, ACgroupProgramDetachedFromTheParentIsAttachedAgain) {
    const std::string dir = loaded_build();
    ASSERT_FALSE(dir.empty()) << "no fs_ready marker under /sys/fs/bpf/confine";
    const std::string parent = cgroup2_mount() + "/confine/" + dir.substr(dir.rfind('/') + 1);
    Result before = bpftool({"cgroup", "show", parent});
    ASSERT_EQ(before.status, 0) << before.describe();
    Result detach = bpftool({"cgroup", "detach", parent, "lsm_cgroup", "pinned", dir + "/confine_path_mknod"});
    ASSERT_EQ(detach.status, 0) << detach.describe();
    Result detached = bpftool({"cgroup", "show", parent});
    ASSERT_EQ(lines(detached.out).size() + 1, lines(before.out).size()) << before.describe() << detached.describe();

    const std::string outside = at("outside");
    make_dir(outside, 0777);
    Result control = run_unconfined(fmt::format("touch {0}/control && rm {0}/control", outside));
    ASSERT_EQ(control.status, 0) << control.describe();
    Result r = run_confined("", fmt::format("touch {}/new", outside));
    EXPECT_NE(r.status, 0) << r.describe();
    EXPECT_FALSE(exists(outside + "/new"));
    EXPECT_DENIAL(r, "create", outside + "/new", "touch");
    Result after = bpftool({"cgroup", "show", parent});
    EXPECT_EQ(lines(after.out).size(), lines(before.out).size()) << before.describe() << after.describe();
}

// With `jobs` unpinned and fs's marker gone too, loading fs would make it a
// new `jobs` map while net and proc keep theirs, and their hooks would not
// see the job. The start refuses instead, naming the map and the remedy,
// and runs nothing; doing as it says makes a whole load again.
TEST_F(RunTest, ASharedMapUnpinnedUnderLoadedProgramsIsRefused) {
    const std::string dir = loaded_build();
    ASSERT_FALSE(dir.empty()) << "no fs_ready marker under /sys/fs/bpf/confine";
    const std::string ran = work() + "/ran";
    Result control = run_confined("", "touch " + ran);
    ASSERT_EQ(control.status, 0) << control.describe();
    ASSERT_TRUE(exists(ran));
    unlink(ran.c_str());
    // Whatever fails below, the tests after this one must start from a whole
    // pin directory: removed, the next start loads the build afresh.
    struct Unpinned {
        std::string dir;
        ~Unpinned() { std::filesystem::remove_all(dir); }
    } unpinned{dir};
    for (const char* pin : {"/jobs", "/fs_ready"})
        ASSERT_EQ(unlink((dir + pin).c_str()), 0) << dir << pin << ": " << strerror(errno);

    Result r = run_confined("", "touch " + ran);
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("the pinned map " + dir + "/jobs is gone"), npos) << r.describe();
    EXPECT_NE(r.err.find("remove " + dir), npos) << r.describe();
    EXPECT_FALSE(exists(ran)) << "the job ran half-confined";

    std::filesystem::remove_all(dir);  // the remedy the message names
    expect_mkdir_outside_refused();
}

// ---- confine check ---------------------------------------------------------------

// --print-policy compiles against private directories made where and as a
// run makes them (then removed): through a TMPDIR that is a symlink, its
// rules name the directories a run's job really gets, bar the random suffix.
TEST_F(RunTest, PrintPolicyShowsTheDirectoriesARunUses) {
    const std::string real = at("tmp-real"), link = at("tmp-link");
    ASSERT_TRUE(std::filesystem::create_directory(real));
    std::filesystem::create_directory_symlink(real, link);
    Result job = run({.env = {"TMPDIR=" + link}, .argv = {"/bin/sh", "-c", "realpath \"$TMPDIR\""}});
    ASSERT_EQ(job.status, 0) << job.describe();
    // .../tmp-real/confine-<job>.<suffix>/tmp
    const std::string job_tmp = job.out.substr(0, job.out.find('\n'));
    ASSERT_TRUE(job_tmp.starts_with(real + "/confine-" + job.job + ".")) << job_tmp;

    Result shown = run({.args = {"--print-policy"}, .env = {"TMPDIR=" + link}, .argv = {"true"}});
    ASSERT_EQ(shown.status, 0) << shown.describe();
    const std::regex tmp_rule("\n" + real + "/confine-" + shown.job + R"(\.[A-Za-z0-9]{6}/tmp +read,write)");
    EXPECT_TRUE(std::regex_search(shown.out, tmp_rule)) << "no rule for the run's private tmp\n" << shown.describe();
    EXPECT_EQ(shown.out.find(".XXXXXX/"), std::string::npos) << "a template, not a directory\n" << shown.describe();
    EXPECT_TRUE(std::filesystem::is_empty(real)) << "--print-policy left its directories in " << real;
}

TEST_F(RunTest, CheckAcceptsAGoodPolicy) {
    const std::string file = at("good.toml");
    write_file(file, make_policy({.read = {"/srv"}, .connect = {"tcp://127.0.0.1:3128"}}));
    Process p = Process::start({.argv = {confine_bin(), "check", file}, .env = {"PATH=/usr/bin:/bin"}});
    Result r = p.wait();
    EXPECT_EQ(r.status, 0) << r.describe();
}

TEST_F(RunTest, CheckReportsFileLineColumn) {
    const std::string file = at("bad.toml");
    write_file(file, "version = 1\n\n[network]\nconnect = [\"tcp://127.0.0.1:99999\"]\n");
    Process p = Process::start({.argv = {confine_bin(), "check", file}, .env = {"PATH=/usr/bin:/bin"}});
    Result r = p.wait();
    EXPECT_NE(r.status, 0) << r.describe();
    const std::regex where("(^|\n)" + std::regex_replace(file, std::regex(R"([.])"), R"(\.)") + R"(:4:[0-9]+: )");
    EXPECT_TRUE(std::regex_search(r.err, where)) << r.describe();
}

}  // namespace
}  // namespace vmtest
