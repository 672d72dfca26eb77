#include "harness.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <toml++/toml.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace vmtest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTestRoot = "/var/tmp/confine-tests";
constexpr const char* kPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

TestUser g_user;

// confine's own environment: what a runner would plausibly have.
std::vector<std::string> confine_env() {
    return {std::string("PATH=") + kPath, "LANG=C.UTF-8", "TERM=dumb", "HOME=/root"};
}

void chown_to_user(const std::string& path) {
    if (lchown(path.c_str(), g_user.uid, g_user.gid) != 0) ADD_FAILURE() << "chown " << path << ": " << strerror(errno);
}

// Why the guest can't run the tests; empty once the environment is ready.
std::string g_setup_error;

// Creates the test user and its fake credentials, once per guest. Returns
// what went wrong, or "".
std::string create_user() {
    if (!getpwnam(kUser)) {
        Process p = Process::start({.argv = {"/usr/sbin/useradd", "-m", "-s", "/bin/sh", kUser}, .env = confine_env()});
        if (Result r = p.wait(); r.status != 0) return "useradd failed\n" + r.describe();
    }
    const passwd* pw = getpwnam(kUser);
    if (!pw) return fmt::format("no user {} after useradd", kUser);
    if (std::string(pw->pw_dir) != kUserHome)
        return fmt::format("{} has home {}, not {}", kUser, pw->pw_dir, kUserHome);
    g_user.uid = pw->pw_uid;
    g_user.gid = pw->pw_gid;
    int n = 64;
    g_user.groups.resize(n);
    if (getgrouplist(kUser, pw->pw_gid, g_user.groups.data(), &n) < 0) return "getgrouplist failed";
    g_user.groups.resize(n);

    chmod(kUserHome, 0700);
    struct File {
        const char* path;
        std::string content;
        mode_t mode;
    };
    for (const char* dir : {"/home/confinetest/.ssh", "/home/confinetest/.claude"}) {
        mkdir(dir, 0700);
        chown_to_user(dir);
    }
    for (const File& f : {File{kSshKey, std::string(kSshSecret) + "\n", 0600},
                          File{kClaudeCreds, fmt::format("{{\"token\":\"{}\"}}\n", kClaudeSecret), 0600},
                          File{kNotes, "original\n", 0644}}) {
        std::ofstream(f.path, std::ios::trunc) << f.content;
        chown_to_user(f.path);
        chmod(f.path, f.mode);
    }
    return "";
}

// Readies the guest; returns what went wrong, or "".
std::string prepare_guest() {
    // This suite adds a user, mounts and loads BPF programs: never on a
    // developer's machine. vmtest/run sets VMTEST=1 in the guest.
    const char* vm = getenv("VMTEST");
    if (!vm || std::string(vm) != "1")
        return "confine_vm_tests must run inside a vmtest guest: vmtest/run --kernel all -- <this binary>";
    if (geteuid() != 0) return "confine_vm_tests must run as root (vmtest/run does)";

    // Debian 6.1 gates unprivileged user namespaces behind this sysctl;
    // the userns tests need them to work unconfined.
    if (exists("/proc/sys/kernel/unprivileged_userns_clone"))
        std::ofstream("/proc/sys/kernel/unprivileged_userns_clone") << "1\n";

    if (std::string e = create_user(); !e.empty()) return e;
    fs::create_directories(kTestRoot);

    Process p = Process::start({.argv = {confine_bin(), "probe"}, .env = confine_env()});
    if (Result r = p.wait(); r.status != 0)
        return "`confine probe` fails: this kernel can't enforce, so no test can run\n" + r.describe();
    return "";
}

// Runs once, before any test. A guest that can't enforce makes every test
// fail (in VmTest::SetUp), never skip: gtest would skip them all after a
// fatal failure here, so this one is not fatal.
class VmEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        g_setup_error = prepare_guest();
        if (!g_setup_error.empty()) ADD_FAILURE() << g_setup_error;
    }
};

[[maybe_unused]] auto* const g_env = ::testing::AddGlobalTestEnvironment(new VmEnvironment);

void set_nonblock(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Reads what is available now; false at EOF.
bool drain(int fd, std::string& into) {
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            into.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n < 0 && errno == EAGAIN;
    }
}

}  // namespace

const TestUser& test_user() {
    return g_user;
}

std::string confine_bin() {
    return CONFINE_BIN;
}
std::string helper_bin() {
    return HELPER_BIN;
}

// ---- audit log -------------------------------------------------------------

std::optional<std::string> AuditLine::str(std::string_view key) const {
    auto it = json.is_object() ? json.find(key) : json.end();
    if (it == json.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

std::optional<int64_t> AuditLine::num(std::string_view key) const {
    auto it = json.is_object() ? json.find(key) : json.end();
    if (it == json.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
}

std::vector<AuditLine> parse_audit(const std::string& text) {
    std::vector<AuditLine> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back({line, nlohmann::json::parse(line, nullptr, false)});
    return out;
}

std::string Result::describe() const {
    std::string s = fmt::format("exit status {}\n--- stdout ---\n{}--- stderr ---\n{}", status, out, err);
    if (!job.empty()) {
        s += fmt::format("--- audit log of job {} ({} lines) ---\n", job, audit.size());
        for (const auto& l : audit) s += l.raw + "\n";
    }
    return s;
}

::testing::AssertionResult has_denial(const Result& r, std::string_view op, std::string_view target,
                                      std::string_view comm) {
    std::vector<const AuditLine*> hits;
    for (const auto& l : r.audit)
        if (l.str("op") == op && l.str("target") == target) hits.push_back(&l);
    if (hits.size() != 1)
        return ::testing::AssertionFailure() << "expected exactly one audit line with op " << op << " and target '"
                                             << target << "', found " << hits.size();
    const AuditLine& l = *hits.front();
    auto fail = [&](const std::string& what) {
        return ::testing::AssertionFailure() << "audit line " << l.raw << ": " << what;
    };
    if (l.str("verdict") != "deny") return fail("verdict is not \"deny\"");
    if (l.str("mode") != "enforce") return fail("mode is not \"enforce\"");
    const std::string& job = r.audit_job.empty() ? r.job : r.audit_job;
    if (l.str("job") != job) return fail("job is not \"" + job + "\"");
    if (l.num("uid") != static_cast<int64_t>(g_user.uid)) return fail(fmt::format("uid is not {}", g_user.uid));
    for (const char* k : {"pid", "tgid", "cgroup_id"})
        if (l.num(k).value_or(0) <= 0) return fail(fmt::format("{} is missing or not positive", k));
    auto c = l.str("comm");
    if (!c || c->empty()) return fail("comm is missing or empty");
    if (!comm.empty() && *c != comm) return fail(fmt::format("comm is not \"{}\"", comm));

    // "2026-11-29T18:00:00.123456Z", and close to now.
    auto t = l.str("time").value_or("");
    static const std::regex time_re(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)");
    if (!std::regex_match(t, time_re)) return fail("time is not YYYY-MM-DDTHH:MM:SS.uuuuuuZ");
    std::tm tm{};
    strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    time_t when = timegm(&tm), now = time(nullptr);
    if (when > now + 5 || when < now - 600)
        return fail(fmt::format("time is {} s away from now", static_cast<long>(when - now)));
    return ::testing::AssertionSuccess();
}

Ops parse_ops(const std::string& out) {
    Ops o;
    bool later_run = false;  // a second "pid" line: indices start again
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) {
        if (l.starts_with("pid ")) {
            later_run = !o.pids.empty();
            o.pids.push_back(static_cast<pid_t>(std::stol(l.substr(4))));
            continue;
        }
        // "I OP -> RESULT"
        size_t sp = l.find(' '), arrow = l.find(" -> ");
        if (sp == std::string::npos || sp == 0 || arrow == std::string::npos || arrow < sp) continue;
        if (l.find_first_not_of("0123456789") != sp) continue;
        const size_t index = std::stoul(l.substr(0, sp));
        const std::string result = l.substr(arrow + 4);
        o.results[l.substr(sp + 1, arrow - sp - 1)] = result;
        if (!later_run && index == o.by_index.size()) o.by_index.push_back(result);
    }
    return o;
}

size_t Ops::failed() const {
    return static_cast<size_t>(
        std::count_if(by_index.begin(), by_index.end(), [](const std::string& r) { return !r.starts_with("ok"); }));
}

std::string make_policy(const PolicySpec& p) {
    auto array = [](std::vector<std::string> items, const std::vector<std::string>& more = {}) {
        items.insert(items.end(), more.begin(), more.end());
        toml::array a;
        for (const auto& i : items) a.push_back(i);
        return a;
    };
    toml::table fs{{"read", array({"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
                                   "/proc", "/sys", "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                   "/dev/urandom", "/dev/tty", "/dev/pts", "/dev/ptmx"},
                                  p.read)},
                   {"write", array({"{workdir}", "{home}", "{tmp}"}, p.write)},
                   {"deny_write", array(p.deny_write)},
                   {"deny", array({"{user_home}"}, p.deny)}};
    if (!p.exec.empty()) fs.insert("exec", array(p.exec));
    if (!p.protect_git.empty()) fs.insert("protect_git", array(p.protect_git));
    toml::table net{{"connect", array(p.connect)}, {"bind", array(p.bind)}};
    if (!p.families.empty()) net.insert("families", array(p.families));
    if (!p.domains.empty()) net.insert("domains", array(p.domains));
    toml::table env{{"keep", array({"PATH", "LANG", "LC_ALL", "TERM"}, p.env_keep)}};
    if (!p.env_set.empty()) {
        toml::table set;
        for (const auto& [name, value] : p.env_set) set.insert(name, value);
        env.insert("set", set);
    }
    toml::table policy{{"version", 1},
                       {"mode", p.mode},
                       {"filesystem", fs},
                       {"network", net},
                       {"process", toml::table{{"user_namespaces", p.user_namespaces}}},
                       {"env", env}};
    if (!p.limits.empty()) policy.insert("limits", p.limits);
    std::ostringstream out;
    out << policy << "\n";
    return out.str();
}

// ---- processes ---------------------------------------------------------------

Process Process::start(const Options& o) {
    std::vector<char*> argv, envp;
    for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : o.env) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
        // Only async-signal-safe calls from here on.
        dup2(o.stdin_fd >= 0 ? o.stdin_fd : open("/dev/null", O_RDONLY), 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (o.keep_fd >= 3) {
            close_range(3, static_cast<unsigned>(o.keep_fd) - 1, 0);
            close_range(static_cast<unsigned>(o.keep_fd) + 1, ~0U, 0);
            fcntl(o.keep_fd, F_SETFD, 0);
        } else {
            close_range(3, ~0U, 0);
        }
        if (o.uid) {
            if (setgroups(o.groups.size(), o.groups.data()) != 0 || setresgid(o.gid, o.gid, o.gid) != 0 ||
                setresuid(*o.uid, *o.uid, *o.uid) != 0)
                _exit(120);
        }
        if (o.own_group && setpgid(0, 0) != 0) _exit(122);
        if (chdir(o.cwd.c_str()) != 0) _exit(121);
        execve(argv[0], argv.data(), envp.data());
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(out[1]);
    close(err[1]);
    Process p;
    p.pid_ = pid;
    p.out_ = out[0];
    p.err_ = err[0];
    set_nonblock(p.out_);
    set_nonblock(p.err_);
    p.pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (p.pidfd_ < 0) throw std::runtime_error("pidfd_open");
    return p;
}

Process::Process(Process&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      pidfd_(std::exchange(o.pidfd_, -1)),
      out_(std::exchange(o.out_, -1)),
      err_(std::exchange(o.err_, -1)) {}

Process::~Process() {
    if (pid_ > 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    for (int fd : {pidfd_, out_, err_})
        if (fd >= 0) close(fd);
}

Result Process::wait(int timeout_s) {
    Result r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    bool out_open = true, err_open = true, timed_out = false;
    for (;;) {
        pollfd fds[3] = {{pidfd_, POLLIN, 0}, {out_open ? out_ : -1, POLLIN, 0}, {err_open ? err_ : -1, POLLIN, 0}};
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            kill(pid_, SIGKILL);
        }
        poll(fds, 3, timed_out ? -1 : static_cast<int>(left.count()));
        if (out_open && fds[1].revents) out_open = drain(out_, r.out);
        if (err_open && fds[2].revents) err_open = drain(err_, r.err);
        if (fds[0].revents & POLLIN) break;
    }
    // What the process wrote before it exited is in the pipes now; orphans
    // that still hold them are not waited for.
    if (out_open) drain(out_, r.out);
    if (err_open) drain(err_, r.err);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (timed_out) {
        r.status = -1;
        r.err += fmt::format("\n[vmtest harness: killed after {} s]\n", timeout_s);
    } else {
        r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return r;
}

// ---- per-test fixture ------------------------------------------------------------

void VmTest::SetUp() {
    if (!g_setup_error.empty())
        FAIL() << "the guest is not ready for these tests (details at the top): "
               << g_setup_error.substr(0, g_setup_error.find('\n'));
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    name_ = fmt::format("{}.{}", info->test_suite_name(), info->name());
    for (char& c : name_)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    base_ = fmt::format("{}/{}", kTestRoot, name_);
    std::error_code ec;
    fs::remove_all(base_, ec);
    fs::create_directories(base_);
    chmod(base_.c_str(), 0755);
    work_ = base_ + "/work";
    make_dir(work_);
}

std::string VmTest::job_id(int n) const {
    std::string id = name_.substr(0, 55);
    return fmt::format("{}-{}", id, n);
}

VmTest::Started VmTest::start(const RunSpec& spec) {
    int n = ++runs_;
    // A daemon's client writes its audit log as the test user.
    if (!spec.daemon.empty()) make_dir(at("client"));
    Started s{{}, job_id(n), at(fmt::format("{}audit-{}.jsonl", spec.daemon.empty() ? "" : "client/", n)), ""};
    s.audit_job = spec.daemon.empty() ? s.job : fmt::format("u{}.{}", g_user.uid, s.job);
    std::vector<std::string> argv = {confine_bin(), "run"};
    if (spec.as_user && spec.daemon.empty()) argv.insert(argv.end(), {"--user", kUser});
    argv.insert(argv.end(), {"--workdir", spec.workdir.empty() ? work_ : spec.workdir, "--audit-log", s.audit_path,
                             "--job-id", s.job});
    if (!spec.policy.empty()) {
        std::string policy_path = at(fmt::format("policy-{}.toml", n));
        std::ofstream(policy_path) << spec.policy;
        argv.insert(argv.end(), {"--policy", policy_path});
    }
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    argv.push_back("--");
    argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
    std::vector<std::string> env = confine_env();
    env.insert(env.end(), spec.env.begin(), spec.env.end());
    Process::Options o{.argv = argv,
                       .env = env,
                       .cwd = base_,
                       .keep_fd = spec.keep_fd,
                       .stdin_fd = spec.stdin_fd,
                       .own_group = spec.own_group};
    if (!spec.daemon.empty()) {
        o.env.push_back("CONFINE_SOCKET=" + spec.daemon);
        o.uid = g_user.uid;
        o.gid = g_user.gid;
        o.groups = g_user.groups;
    }
    s.proc.emplace(Process::start(o));
    return s;
}

Result VmTest::finish(Started& s, int timeout_s) {
    Result r = s.proc->wait(timeout_s);
    r.job = s.job;
    r.audit_job = s.audit_job;
    r.audit = parse_audit(read_file(s.audit_path));
    return r;
}

Result VmTest::run(const RunSpec& spec) {
    Started s = start(spec);
    return finish(s);
}

Result VmTest::run_confined(const std::string& policy, const std::string& cmd,
                            const std::vector<std::string>& extra_args) {
    return run({.policy = policy, .args = extra_args, .argv = {"/bin/sh", "-c", cmd}});
}

Process VmTest::start_unconfined(const std::string& cmd, int stdin_fd) {
    return Process::start({.argv = {"/bin/sh", "-c", cmd},
                           .env = {std::string("PATH=") + kPath, "LANG=C.UTF-8", "TERM=dumb",
                                   std::string("HOME=") + kUserHome, "TMPDIR=/var/tmp"},
                           .cwd = work_,
                           .uid = g_user.uid,
                           .gid = g_user.gid,
                           .groups = g_user.groups,
                           .stdin_fd = stdin_fd});
}

Result VmTest::run_unconfined(const std::string& cmd) {
    return start_unconfined(cmd).wait();
}

Result VmTest::run_root(const std::string& cmd) {
    Process p = Process::start({.argv = {"/bin/sh", "-c", cmd}, .env = confine_env(), .cwd = work_});
    return p.wait();
}

void VmTest::continue_past_full_disk(RunSpec spec, FullDisk& disk, const std::string& log, const std::string& first,
                                     ContinuedRun& out) {
    spec.args.insert(spec.args.end(), {"--audit-log", log, "--on-audit-error", "continue"});
    spec.argv = {"/bin/sh", "-c",
                 fmt::format("{} 2>/dev/null; touch first; while [ ! -e go ]; do sleep 0.1; done; "
                             "cat {} 2>/dev/null; touch ran",
                             first, kNotes)};
    Started s = start(spec);
    ASSERT_TRUE(wait_until([&] { return exists(work() + "/first"); }, 60)) << "the job never started";
    // confine reads the denial at once; a moment more to try its write.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    disk.free();
    write_file(work() + "/go", "");
    out.r = finish(s);
    const Result& r = out.r;
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_TRUE(exists(work() + "/ran"));
    EXPECT_NE(r.err.find("the job ran on"), std::string::npos) << r.err;
    out.lines = parse_audit(read_file(log));
    const std::vector<AuditLine>& lines = out.lines;
    ASSERT_GE(lines.size(), 2u) << read_file(log);
    EXPECT_EQ(lines[0].str("op"), "lost") << lines[0].raw;
    EXPECT_EQ(lines[0].str("reason"), "log_write_failed") << lines[0].raw;
    EXPECT_EQ(lines[0].num("count"), 1) << lines[0].raw;
    EXPECT_EQ(lines[1].str("target"), kNotes) << lines[1].raw;
}

void VmTest::write_file(const std::string& path, const std::string& content, mode_t mode) {
    std::ofstream(path, std::ios::trunc) << content;
    chown_to_user(path);
    chmod(path.c_str(), mode);
}

void VmTest::make_dir(const std::string& path, mode_t mode) {
    // Every directory this creates belongs to the test user, not only the last.
    std::vector<fs::path> created;
    for (fs::path p = path; !p.empty() && !fs::exists(p); p = p.parent_path()) created.push_back(p);
    fs::create_directories(path);
    for (const auto& p : created) {
        chown_to_user(p);
        chmod(p.c_str(), mode);
    }
}

std::string VmTest::install_helper(const std::string& dir) {
    std::string dst = dir + "/vmhelper";
    fs::copy_file(helper_bin(), dst, fs::copy_options::overwrite_existing);
    chown_to_user(dst);
    chmod(dst.c_str(), 0755);
    return dst;
}

// ---- utilities -----------------------------------------------------------------

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool exists(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
}

Result of_process(const Result& r, pid_t tgid) {
    Result s = r;
    std::erase_if(s.audit, [&](const AuditLine& l) { return l.num("tgid") != tgid; });
    return s;
}

const AuditLine* find_line(const Result& r, std::string_view op, std::string_view target) {
    for (const auto& l : r.audit)
        if (l.str("op") == op && l.str("target") == target) return &l;
    return nullptr;
}

bool alive(pid_t pid) {
    std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
    auto paren = stat.rfind(") ");
    return paren != std::string::npos && stat.compare(paren + 2, 1, "Z") != 0;
}

Sysctl::Sysctl(std::string path, const std::string& value) : path_(std::move(path)) {
    if (!exists(path_)) return;
    old_ = read_file(path_);
    std::ofstream(path_) << value << "\n";
    // The kernel may print a value back with other blanks (ping_group_range: a tab).
    auto blanks_as_spaces = [](std::string v) {
        std::replace(v.begin(), v.end(), '\t', ' ');
        return v;
    };
    if (blanks_as_spaces(read_file(path_)) != blanks_as_spaces(value + "\n"))
        ADD_FAILURE() << "can't set " << path_ << " to " << value;
}

Sysctl::~Sysctl() {
    if (!old_.empty()) std::ofstream(path_) << old_;
}

Journald::Journald() {
    constexpr const char* kSocket = "/run/systemd/journal/socket";
    // One left by an earlier test would answer for nobody.
    fs::remove_all("/run/systemd/journal");
    journald_.emplace(Process::start(
        {.argv = {"/lib/systemd/systemd-journald"}, .env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, .own_group = true}));
    auto answers = [&] {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        strcpy(addr.sun_path, kSocket);
        int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        bool ok = s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        if (s >= 0) close(s);
        return ok;
    };
    if (!wait_until(answers, 60)) error_ = fmt::format("systemd-journald never answered at {}", kSocket);
}

Journald::~Journald() {
    kill(journald_->pid(), SIGTERM);
    journald_->wait(30);
    fs::remove_all("/run/systemd/journal");
}

std::vector<std::map<std::string, std::string>> Journald::entries(const std::vector<std::string>& matches) {
    std::vector<std::string> argv = {"/usr/bin/journalctl", "--no-pager", "-o", "json"};
    argv.insert(argv.end(), matches.begin(), matches.end());
    Result r = Process::start({.argv = argv, .env = {"PATH=/usr/bin:/bin", "SYSTEMD_COLORS=0"}}).wait(60);
    std::vector<std::map<std::string, std::string>> out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object()) continue;
        auto& entry = out.emplace_back();
        for (auto& [key, value] : j.items()) {
            if (value.is_string()) {
                entry[key] = value.get<std::string>();
            } else if (value.is_array()) {
                std::string bytes;
                for (auto& b : value)
                    if (b.is_number_unsigned()) bytes += static_cast<char>(b.get<unsigned>());
                entry[key] = bytes;
            }
        }
    }
    return out;
}

FullDisk::FullDisk(std::string dir) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0777") != 0) {
        error_ = fmt::format("mounting a tmpfs on {}: {}", dir_, strerror(errno));
        return;
    }
    // Full of data; inodes are left, so a log file can still be created.
    int fd = open((dir_ + "/fill").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    char block[4096] = {};
    while (fd >= 0 && write(fd, block, sizeof block) > 0) {
    }
    if (fd >= 0) close(fd);
}

FullDisk::~FullDisk() {
    if (error_.empty()) umount2(dir_.c_str(), MNT_DETACH);
}

void FullDisk::free() {
    fs::remove(dir_ + "/fill");
}

std::string job_cgroup(const std::string& job) {
    std::error_code ec;
    // <tag>/<job>, not <tag>.proxies/<job>, the job's proxy's cgroup of the
    // same name (which of the two a directory listing gives first depends
    // on the tag).
    for (const auto& parent : fs::directory_iterator(cgroup2_mount() + "/confine", ec))
        if (!parent.path().string().ends_with(".proxies") && exists(parent.path().string() + "/" + job))
            return parent.path().string() + "/" + job;
    return "";
}

std::string cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        auto dash = line.find(" - cgroup2 ");
        if (dash == std::string::npos) continue;
        std::istringstream f(line);
        std::string id, parent, dev, root, mount;
        f >> id >> parent >> dev >> root >> mount;
        if (root == "/") return mount;
    }
    return "/sys/fs/cgroup";
}

bool wait_until(const std::function<bool()>& pred, double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

GuestHosts::GuestHosts(const std::string& lines) {
    // Only inside a vmtest guest (the fixture fails every test elsewhere).
    const char* vm = getenv("VMTEST");
    if (!vm || std::string(vm) != "1" || geteuid() != 0) {
        error_ = "not root in a vmtest guest: /etc/hosts left alone";
        return;
    }
    saved_ = read_file("/etc/hosts");
    std::string wanted = saved_;
    if (!wanted.empty() && !wanted.ends_with('\n')) wanted += '\n';
    wanted += lines;
    {
        std::ofstream out("/etc/hosts", std::ios::trunc);
        out << wanted;
        written_ = static_cast<bool>(out);
    }
    if (read_file("/etc/hosts") == wanted) return;
    // Not writable in place: a copy mounted over it.
    const std::string copy = "/var/tmp/confine-tests/hosts";
    fs::create_directories("/var/tmp/confine-tests");
    std::ofstream(copy, std::ios::trunc) << wanted;
    chmod(copy.c_str(), 0644);
    if (mount(copy.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) == 0) mounted_ = true;
    if (read_file("/etc/hosts") != wanted)
        error_ = fmt::format("can't add names to /etc/hosts (bind mount: {})", strerror(errno));
}

GuestHosts::~GuestHosts() {
    if (mounted_) umount2("/etc/hosts", MNT_DETACH);
    if (written_) std::ofstream("/etc/hosts", std::ios::trunc) << saved_;
}

}  // namespace vmtest
