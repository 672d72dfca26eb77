#include "loader/proxy.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bpf/proxy.h"
#include "loader/audit.h"
#include "loader/bpf_objects.h"

namespace confine {
namespace {

constexpr const char* kTinyproxy = "/usr/bin/tinyproxy";

// How long tinyproxy may take to listen: it starts in tens of
// milliseconds natively, a few hundred under TCG.
constexpr std::chrono::seconds kStartTimeout{30};

// The proxy's own limits, in its cgroup: a job's memory limit doesn't cover
// it, and tinyproxy holds a request's headers (up to 10,000 lines of 128 KiB)
// until they end. Without them a job could fill the machine's memory
// through its proxy. One thread per connection, a few more of its own.
constexpr int kMaxClients = 64;
constexpr policy::CompiledLimits kProxyLimits{
    .memory = 256ull << 20, .swap = 0, .pids = kMaxClients + 8, .cpu_quota_us = std::nullopt, .timeout_s = 0};

// tinyproxy cuts log lines at 800 bytes (log.c, STRING_LENGTH, with the
// newline and NUL): a line this long may have lost its end.
constexpr size_t kLogLineMax = 800 - 2;

std::string regex_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (std::string_view(".[]()*+?{}|^$\\").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

// A free loopback port, as the kernel would pick one. Someone may take it
// before tinyproxy binds it; start() then tries another.
Result<uint16_t> free_port() {
    Fd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (!s || bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return fail(Error::sys("proxy: picking a loopback port"));
    return ntohs(a.sin_port);
}

// Whether process `pid` has a socket listening on 127.0.0.1:`port`: the
// proxy is up, and the port is its, not someone else's.
bool listening(pid_t pid, uint16_t port) {
    std::error_code ec;
    std::vector<std::string> inodes;
    for (const auto& e : std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
        std::string link = std::filesystem::read_symlink(e.path(), ec).string();
        if (link.starts_with("socket:[")) inodes.push_back(link.substr(8, link.size() - 9));
    }
    std::ifstream tcp("/proc/net/tcp");
    const std::string local = fmt::format("0100007F:{:04X}", port);
    std::string line;
    std::getline(tcp, line);  // header
    while (std::getline(tcp, line)) {
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
        std::istringstream f(line);
        std::string sl, loc, rem, st, q, tr, retr, uid, timeout, inode;
        f >> sl >> loc >> rem >> st >> q >> tr >> retr >> uid >> timeout >> inode;
        if (loc == local && st == "0A" && std::ranges::count(inodes, inode)) return true;
    }
    return false;
}

// tinyproxy's configuration for one job. It runs in the foreground (-d),
// started as nobody, logging to its stdout (confine's pipe). Only the
// filter decides what passes: FilterURLs matches the URL as sent, so a
// rule names the port too. In audit mode there is no filter, and every
// request is logged for confine to judge the way the filter would: its
// request line (Connect level), and for an origin-form one ("GET /" with a
// Host header) the URL tinyproxy builds from the header (Info level). The
// statistics page answers to a name no policy can list.
std::string config(uint16_t port, const std::string& filter_file, bool audit_mode) {
    std::string c = fmt::format(
        "Port {}\n"
        "Listen 127.0.0.1\n"
        "Allow 127.0.0.1\n"
        "Timeout 600\n"
        "MaxClients {}\n"
        "LogLevel {}\n"
        "DisableViaHeader Yes\n"
        "StatHost \"no_stats.invalid\"\n",
        port, kMaxClients, audit_mode ? "Info" : "Notice");
    if (!audit_mode)
        c += fmt::format(
            "Filter \"{}\"\n"
            "FilterURLs On\n"
            "FilterType ere\n"
            "FilterCaseSensitive Off\n"
            "FilterDefaultDeny Yes\n",
            filter_file);
    return c;
}

Result<void> write_file(const std::string& path, const std::string& text) {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return fail(Error::sys("proxy: writing " + path));
    return {};
}

// The message of a tinyproxy log line, "LEVEL  Mon DD HH:MM:SS.mmm [PID]:
// MESSAGE": after the first "]: ", which comes before anything a client
// sent.
std::string_view log_message(std::string_view line) {
    size_t at = line.find("]: ");
    return at == std::string_view::npos ? std::string_view() : line.substr(at + 3);
}

// The URL of a request line, "METHOD URL [PROTOCOL]", split as tinyproxy's
// sscanf("%[^ ] %[^ ] %[^ ]") does: words end at a space only, and any
// whitespace separates them.
std::pair<std::string_view, std::string_view> method_and_url(std::string_view line) {
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return {line, {}};
    std::string_view method = line.substr(0, sp), rest = line.substr(sp);
    while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
    return {method, rest.substr(0, rest.find(' '))};
}

}  // namespace

void collect_orphan_proxies(const BpfObjects& objs) {
    if (!has_children(objs.proxies_parent())) return;  // the common case: no proxy anywhere
    const int proxies_map = objs.map_fd(Map::Proxies);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(objs.proxies_parent(), ec)) {
        if (!e.is_directory(ec) || std::filesystem::exists(objs.jobs_parent() + "/" + e.path().filename().string()))
            continue;
        if (auto cg = JobCgroup::adopt(e.path())) {
            uint64_t key = cg->id();
            if (cg->kill_and_remove()) bpf_map_delete_elem(proxies_map, &key);
        }
    }
}

std::string proxy_filter(const std::vector<policy::Domain>& domains) {
    std::string out;
    for (const policy::Domain& d : domains) {
        // A wildcard's labels are letters, digits and hyphens only, so a
        // match can't run on into a user part ('@'), a port or a path.
        std::string host =
            d.name.starts_with("*.") ? "([a-z0-9-]+\\.)+" + regex_escape(d.name.substr(2)) : regex_escape(d.name);
        for (uint16_t port : d.ports) {
            out += fmt::format("^{}:{}$\n", host, port);  // CONNECT host:port
            out += fmt::format("^http://{}{}(/|$)\n", host, port == 80 ? "(:80)?" : fmt::format(":{}", port));
        }
    }
    return out;
}

UrlFilter::UrlFilter(const std::string& filter) {
    std::istringstream lines(filter);
    for (std::string line; std::getline(lines, line);) {
        auto& re = res_.emplace_back(std::make_unique<regex_t>());
        // tinyproxy's flags for "FilterType ere", "FilterCaseSensitive Off".
        if (regcomp(re.get(), line.c_str(), REG_EXTENDED | REG_NOSUB | REG_ICASE) != 0) {
            res_.pop_back();  // never: proxy_filter() writes valid rules; refusing is the safe side
            continue;
        }
    }
}

UrlFilter::~UrlFilter() {
    for (auto& re : res_) regfree(re.get());
}

bool UrlFilter::passes(std::string_view url) const {
    const std::string u(url);
    return std::ranges::any_of(res_, [&](const auto& re) { return regexec(re.get(), u.c_str(), 0, nullptr, 0) == 0; });
}

std::string proxy_target(std::string_view url) {
    uint16_t port = 443;
    if (url.size() >= 7 && strncasecmp(url.data(), "http://", 7) == 0) {
        url.remove_prefix(7);
        url = url.substr(0, url.find('/'));
        port = 80;
    }
    if (size_t at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
    size_t colon = url.rfind(':');
    if (colon != std::string_view::npos && url.find(']', colon) == std::string_view::npos) {
        // tinyproxy keeps the port in a uint16_t: ":66016" is port 480.
        long p = 0;
        auto [end, ec] = std::from_chars(url.data() + colon + 1, url.data() + url.size(), p);
        if (ec == std::errc{} && end == url.data() + url.size()) port = static_cast<uint16_t>(p);
        url = url.substr(0, colon);
    }
    return fmt::format("{}:{}", policy::lowercase(url), port);
}

// "name:port" of the URL tinyproxy builds for an origin-form request,
// "http://HOST:PORT/PATH" (build_url: the port always written, the Host
// header's name without a colon): what follows is the path, even an '@'
// or a ':' in it.
std::string built_url_target(std::string_view url) {
    url.remove_prefix(std::min<size_t>(7, url.size()));  // "http://"
    const size_t colon = std::min(url.find(':'), url.size());
    unsigned port = 0;
    std::from_chars(url.data() + std::min(colon + 1, url.size()), url.data() + url.size(), port);
    return fmt::format("{}:{}", policy::lowercase(url.substr(0, colon)), port);
}

std::optional<std::string> proxy_refusal(std::string_view line, const UrlFilter* judge) {
    // Cut at 800 bytes, or continued on a line of its own: a folded header
    // that tinyproxy logged with its line break.
    const bool cut = line.size() >= kLogLineMax || line.find('\n') != std::string_view::npos;
    line = line.substr(0, line.find('\n'));
    const std::string_view msg = log_message(line);
    if (!judge) {
        // Enforce: NOTICE ... : Proxying refused on filtered url "URL". A
        // line cut short has lost the closing quote, not the refusal.
        constexpr std::string_view key = "Proxying refused on filtered url \"";
        if (!msg.starts_with(key)) return std::nullopt;
        std::string_view url = msg.substr(key.size());
        if (url.ends_with('"')) url.remove_suffix(1);
        return proxy_target(url);
    }
    // Audit: the URL tinyproxy would have filtered. Its request line
    // holds it for an absolute URL ("http://...", any method) and for
    // CONNECT; an origin-form request is filtered on the URL built from
    // its Host header, on the next line (reqs.c, process_request).
    std::string_view url;
    bool built = false;  // url is tinyproxy's, from a Host header
    constexpr std::string_view request = "Request (file descriptor ", trans = "process_request: trans ";
    if (msg.starts_with(request)) {
        // "Request (file descriptor FD): METHOD URL PROTOCOL"
        const size_t colon = msg.find("): ");
        if (colon == std::string_view::npos) return std::nullopt;
        auto [method, target] = method_and_url(msg.substr(colon + 3));
        const bool absolute = target.size() >= 7 && strncasecmp(target.data(), "http://", 7) == 0;
        if (!absolute && method != "CONNECT" && !cut) return std::nullopt;  // origin form: judged on its trans line
        url = target;
    } else if (msg.starts_with(trans)) {
        // "process_request: trans Host|IP METHOD URL for FD"
        const std::string_view rest = msg.substr(trans.size());
        const size_t kind_end = rest.find(' '), method_end = rest.find(' ', kind_end + 1);
        if (kind_end == std::string_view::npos || method_end == std::string_view::npos) return std::nullopt;
        url = rest.substr(method_end + 1);
        if (!cut) url = url.substr(0, url.rfind(" for "));
        built = true;
    } else {
        return std::nullopt;
    }
    // A line cut short can't be judged: it counts as refused.
    if (cut || !judge->passes(url)) return built ? built_url_target(url) : proxy_target(url);
    return std::nullopt;
}

namespace {

// Starts tinyproxy with CONF, its output on OUT: into the proxy's cgroup
// (PROCS) before exec, so its sockets are born there; then as `user`, so
// tinyproxy never runs as root (its own "User" would drop root only after
// its start-up); in a session of its own, since a terminal's ^C or hangup,
// meant for confine, would end it (in the foreground SIGHUP's default
// action stands).
Result<pid_t> spawn_tinyproxy(const std::string& procs, const std::string& conf, const passwd& user, int out) {
    const uid_t uid = user.pw_uid;
    const gid_t gid = user.pw_gid;
    pid_t pid = fork();
    if (pid < 0) return fail(Error::sys("proxy: fork"));
    if (pid > 0) return pid;
    int cg_fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (cg_fd < 0 || ::write(cg_fd, "0", 1) != 1 || setsid() < 0 || null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
        dup2(out, 2) < 0 || setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0)
        _exit(126);
    syscall(SYS_close_range, 3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGTTOU}) signal(sig, SIG_DFL);  // confine ignores them; exec keeps that
    const char* argv[] = {"tinyproxy", "-d", "-c", conf.c_str(), nullptr};
    const char* envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", nullptr};
    execve(kTinyproxy, const_cast<char**>(argv), const_cast<char**>(envp));
    _exit(127);
}

// Waits up to kStartTimeout for tinyproxy (PID) to listen on PORT,
// collecting what it prints on LOG: nullopt once it listens, its wait
// status if it exited, -1 if it neither listened nor exited in time.
std::optional<int> wait_listening(pid_t pid, uint16_t port, int log, std::string& output) {
    fcntl(log, F_SETFL, O_NONBLOCK);
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (listening(pid, port)) return std::nullopt;
        pollfd pf{log, POLLIN, 0};
        poll(&pf, 1, 10);
        char buf[4096];
        for (ssize_t n; (n = read(log, buf, sizeof buf)) > 0;) output.append(buf, static_cast<size_t>(n));
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) return status;
    }
    return -1;
}

}  // namespace

Result<std::unique_ptr<JobProxy>> JobProxy::start(const BpfObjects& objs, uint64_t job_cgid, const std::string& job,
                                                  const std::vector<policy::Domain>& domains, bool audit_mode,
                                                  const std::string& dir) {
    if (access(kTinyproxy, X_OK) != 0)
        return fail(Error::sys(std::string("proxy: the policy lists network.domains, which need ") + kTinyproxy)
                        .hint("Install it: apt-get install tinyproxy"));
    std::unique_ptr<JobProxy> owner(new JobProxy);
    JobProxy& p = *owner;
    p.proxies_map_ = objs.map_fd(Map::Proxies);
    if (audit_mode) p.judge_.emplace(proxy_filter(domains));
    const passwd* nobody = getpwnam("nobody");
    if (!nobody)
        return fail(Error::msg("proxy: no user 'nobody' to run tinyproxy as").hint("Add it: useradd -r nobody"));
    auto cg = JobCgroup::create(objs.proxies_parent(), job);
    if (!cg) return fail(cg.error());
    p.cg_.emplace(std::move(*cg));
    if (auto r = p.cg_->set_limits(kProxyLimits); !r) return fail(r.error());

    if (mkdir(dir.c_str(), 0755) != 0) return fail(Error::sys("proxy: mkdir " + dir));
    const std::string filter = dir + "/filter", conf = dir + "/tinyproxy.conf";
    if (auto r = write_file(filter, proxy_filter(domains)); !r) return fail(r.error());

    std::string output;  // tinyproxy's last words, should it not start
    for (int attempt = 0; attempt < 3; attempt++) {
        auto port = free_port();
        if (!port) return fail(port.error());
        p.port_ = *port;
        if (auto r = write_file(conf, config(p.port_, filter, audit_mode)); !r) return fail(r.error());
        confine_proxy entry{job_cgid, htonl(INADDR_LOOPBACK), p.port_, 0};
        uint64_t key = p.cg_->id();
        if (bpf_map_update_elem(p.proxies_map_, &key, &entry, BPF_ANY) != 0)
            return fail(Error::sys("proxy: adding the proxy to the proxies map"));

        int pipe_fds[2];
        if (pipe2(pipe_fds, O_CLOEXEC) != 0) return fail(Error::sys("proxy: pipe"));
        Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
        auto pid = spawn_tinyproxy(p.cg_->path() + "/cgroup.procs", conf, *nobody, write_end.get());
        if (!pid) return fail(pid.error());
        write_end.reset();
        p.pid_ = *pid;
        output.clear();
        std::optional<int> status = wait_listening(*pid, p.port_, read_end.get(), output);
        if (!status) {
            p.log_ = std::move(read_end);
            p.pending_ = std::move(output);
            return owner;
        }
        if (*status < 0) break;  // neither listening nor gone
        p.pid_ = -1;
        // 71 (EX_OSERR): someone took the port between free_port() and
        // tinyproxy's bind.
        if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 71) break;
    }
    if (output.size() > 2000) output.erase(0, output.size() - 2000);
    return fail(Error::msg(fmt::format("proxy: tinyproxy did not start listening on 127.0.0.1:{}; it said:\n{}",
                                       p.port_, output))
                    .hint("Check that " + std::string(kTinyproxy) + " runs: " + kTinyproxy + " -d -c " + conf));
}

std::vector<std::string> JobProxy::environment() const {
    const std::string url = fmt::format("http://127.0.0.1:{}", port_);
    // Curl, Python, Go, Node's undici and Bun read the lowercase forms, some
    // tools only the uppercase ones.
    return {"HTTP_PROXY=" + url,
            "HTTPS_PROXY=" + url,
            "http_proxy=" + url,
            "https_proxy=" + url,
            "NO_PROXY=localhost,127.0.0.1,::1",
            "no_proxy=localhost,127.0.0.1,::1"};
}

policy::Endpoint JobProxy::endpoint() const {
    policy::Endpoint e;
    e.kind = policy::Endpoint::Kind::Tcp;
    e.addr[10] = e.addr[11] = 0xff;
    e.addr[12] = 127;
    e.addr[15] = 1;
    e.port = port_;
    e.text = fmt::format("tcp://127.0.0.1:{}", port_);
    return e;
}

void JobProxy::drain(AuditLog& log) {
    if (!log_) return;
    char buf[4096];
    ssize_t n;
    while ((n = read(log_.get(), buf, sizeof buf)) > 0) pending_.append(buf, static_cast<size_t>(n));
    if (n == 0) {
        // Every writer is gone: tinyproxy has exited.
        exited_ = true;
        if (!pending_.empty() && !pending_.ends_with('\n')) pending_ += '\n';
    }
    // A message is a line that starts with tinyproxy's prefix, and the
    // lines after it that don't: a folded header logged with its line
    // breaks, whose continuation (starting with a space or tab) could
    // otherwise pose as a line of its own. tinyproxy writes each message
    // whole, in one write(), so the last one read is complete.
    auto starts_message = [](std::string_view line) {
        return !line.empty() && std::isupper(static_cast<unsigned char>(line.front()));  // "NOTICE  ..."
    };
    std::string message;
    auto judge = [&] {
        if (!starts_message(message)) return;  // a continuation whose message was read before
        if (auto target = proxy_refusal(message, judge_ ? &*judge_ : nullptr)) log.proxy(*target);
    };
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos; pending_.erase(0, nl + 1)) {
        std::string_view line(pending_.data(), nl);
        if (starts_message(line)) {
            judge();
            message.clear();
        } else {
            message += '\n';
        }
        message += line;
    }
    judge();
    if (exited_) {
        log_.reset();
        if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
    }
}

Result<void> JobProxy::stop(AuditLog& log) {
    if (!cg_) return {};
    auto r = cg_->kill_and_remove();
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    pid_ = -1;
    drain(log);
    forget();
    return r;
}

void JobProxy::forget() {
    if (cg_ && proxies_map_ >= 0) {
        uint64_t key = cg_->id();
        bpf_map_delete_elem(proxies_map_, &key);
    }
    cg_.reset();
}

JobProxy::~JobProxy() {
    if (!cg_) return;
    (void)cg_->kill_and_remove();
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    forget();
}

}  // namespace confine
