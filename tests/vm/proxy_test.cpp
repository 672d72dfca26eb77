// The filtering proxy of `[network] domains`: a job whose policy
// names domains reaches them, and only them, through a tinyproxy of its own
// that confine starts outside the job's cgroup and points the job's proxy
// variables at. Each test pairs what the job gets with what the same user
// gets unconfined, straight from the servers (the control, which must
// succeed): a refusal is then the proxy's or the kernel's doing.
//
// The guest has no network, only loopback, so the names live in its
// /etc/hosts for this suite (the guest's root is a tmpfs overlay: the host's
// file is never touched), and the "internet" is a python server (root,
// outside any job) on 127.0.0.2 and 127.0.0.3, plain HTTP on 80 and 8443,
// HTTPS on 443 with a certificate made for the test. Every answer carries a
// token unique to the test and the address it came from, so a body can only
// have come from this test's server, and from the right one.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "harness.h"

namespace vmtest {
namespace {

constexpr auto npos = std::string::npos;
namespace fs = std::filesystem;

// The names of this suite. a.allowed.test and xwild.test resolve too, so
// that a refusal of them is the proxy's matching, not a failed lookup.
constexpr const char* kHostsLines =
    "# confine ProxyTest\n"
    "127.0.0.2 allowed.test a.allowed.test a.wild.test a.b.wild.test wild.test xwild.test\n"
    "127.0.0.3 denied.test port.test\n";
// Names in the certificate of the HTTPS servers (one wildcard label covers
// a.wild.test, not a.b.wild.test), and the addresses, for the IP-literal
// controls.
constexpr const char* kCertNames =
    "subjectAltName=DNS:allowed.test,DNS:*.wild.test,DNS:a.b.wild.test,DNS:wild.test,DNS:denied.test,"
    "DNS:port.test,IP:127.0.0.2,IP:127.0.0.3";
// What confine sets NO_PROXY and no_proxy to.
constexpr const char* kNoProxy = "localhost,127.0.0.1,::1";

// The servers: one per "SCHEME:ADDR:PORT" argument, each answering every
// GET with "TOKEN SCHEME://ADDR:PORT\n". The TLS handshake is done in the
// request's thread, so a client that never finishes one holds up no other.
constexpr const char* kServers = R"py(
import http.server, ssl, sys, threading
token, ready, cert, key = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def setup(self):
        if isinstance(self.request, ssl.SSLSocket): self.request.do_handshake()
        super().setup()
    def do_GET(self):
        addr, port = self.server.server_address[:2]
        body = f"{token} {self.server.scheme}://{addr}:{port}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def get_request(self):
        conn, addr = self.socket.accept()
        if self.scheme == "https":
            conn = ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, addr
servers = []
for spec in sys.argv[5:]:
    scheme, addr, port = spec.split(":")
    s = Server((addr, int(port)), Handler)
    s.scheme = scheme
    servers.append(s)
for s in servers: threading.Thread(target=s.serve_forever, daemon=True).start()
open(ready, "w").close()
threading.Event().wait()
)py";

// ---- policies -------------------------------------------------------------------------

// make_policy's default-like policy with `[network] domains`.
std::string domains_policy(const std::vector<std::string>& domains, const std::string& mode = "enforce") {
    return make_policy({.domains = domains, .mode = mode});
}

// ---- fetching -------------------------------------------------------------------------

// One curl, labelled: "<<LABEL>>", the body, and "\n=CODE:CONNECT_CODE:EXIT"
// (the HTTP status, the status of the proxy's answer to CONNECT, and curl's
// exit status). Without -x or --noproxy, curl takes the proxy variables.
std::string fetch(const std::string& label, const std::string& url, const std::string& opts = "") {
    return fmt::format(
        "echo '<<{}>>'; curl -sS --max-time 20 --cacert ./ca.pem {} -o - "
        "-w '\\n=%{{http_code}}:%{{http_connect}}:%{{exitcode}}\\n' '{}'\n",
        label, opts, url);
}

// An origin-form request ("GET /", "Host: NAME:PORT") sent straight to the
// job's proxy, as a transparent proxy gets one: the proxy judges the name
// in the Host header.
std::string origin_form_fetch(const std::string& label, const std::string& name, int port) {
    return fetch(label, fmt::format("http://{}:{}/", name, port),
                 fmt::format("--noproxy '*' --connect-to {}:{}:127.0.0.1:\"${{HTTP_PROXY##*:}}\"", name, port));
}

// The proxy variables the job sees, as a "<<env>>" section.
constexpr const char* kPrintProxyEnv =
    "echo '<<env>>'; for v in HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NO_PROXY no_proxy; do "
    "echo \"$v=$(printenv $v)\"; done\n";

// The output's "<<LABEL>>" sections.
std::map<std::string, std::string> sections(const std::string& out) {
    std::map<std::string, std::string> s;
    std::string* cur = nullptr;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        if (line.size() > 4 && line.starts_with("<<") && line.ends_with(">>")) {
            cur = &s[line.substr(2, line.size() - 4)];
            continue;
        }
        if (cur) *cur += line + "\n";
    }
    return s;
}

struct Fetch {
    bool ran = false;
    std::string body, code, connect_code, text;
    int exit = -1;
};

std::map<std::string, Fetch> parse_fetches(const std::string& out) {
    std::map<std::string, Fetch> got;
    static const std::regex tail(R"(^=(\d{3}):(\d{3}):(\d+)\n$)");
    for (const auto& [label, text] : sections(out)) {
        Fetch& f = got[label];
        f.ran = true;
        f.text = text;
        auto eq = text.rfind("\n=");
        std::smatch m;
        std::string rest = eq == npos ? "" : text.substr(eq + 1);
        if (eq == npos || !std::regex_match(rest, m, tail)) continue;
        f.body = text.substr(0, eq);
        f.code = m[1];
        f.connect_code = m[2];
        f.exit = std::stoi(m[3]);
    }
    return got;
}

std::string show(const std::string& label, const Fetch& f) {
    return f.ran ? fmt::format("fetch '{}' got:\n{}", label, f.text) : fmt::format("fetch '{}' did not run", label);
}

// The fetch got exactly `body`, with 200 and exit 0.
::testing::AssertionResult served(const std::map<std::string, Fetch>& got, const std::string& label,
                                  const std::string& body) {
    auto it = got.find(label);
    Fetch f = it == got.end() ? Fetch{} : it->second;
    if (f.exit == 0 && f.code == "200" && f.body == body) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "expected 200, exit 0 and body '" << body << "'; " << show(label, f);
}

// The proxy refused the fetch of `url`: a plain-HTTP request gets the
// proxy's 403 (curl exits 0: it got an answer); an https one, a CONNECT,
// gets 403 for the tunnel, which curl reports as exit 56 with no HTTP
// status. Either way none of the test's bodies.
::testing::AssertionResult refused_by_proxy(const std::map<std::string, Fetch>& got, const std::string& label,
                                            const std::string& url, const std::string& token) {
    auto it = got.find(label);
    Fetch f = it == got.end() ? Fetch{} : it->second;
    const bool connect = url.starts_with("https://");
    const bool as_expected =
        connect ? f.exit == 56 && f.code == "000" && f.connect_code == "403" : f.exit == 0 && f.code == "403";
    if (as_expected && f.body.find(token) == npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (connect ? "expected a CONNECT refused with 403 (curl exit 56)"
                                                     : "expected the proxy's 403 (curl exit 0)")
                                         << " and no body of the test's servers; " << show(label, f);
}

// The fetch never got a connection: curl exit `exit` (7: refused, 28: timed out).
::testing::AssertionResult unconnected(const std::map<std::string, Fetch>& got, const std::string& label, int exit) {
    auto it = got.find(label);
    Fetch f = it == got.end() ? Fetch{} : it->second;
    if (f.exit == exit && f.code == "000") return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "expected no connection, curl exit " << exit << "; " << show(label, f);
}

// r's audit log has exactly one `proxy` line for TARGET ("name:port"), with
// this verdict and mode, in r's job. The proxy can't know which process
// asked, so there is no pid or comm to check.
::testing::AssertionResult has_proxy_line(const Result& r, const std::string& target, std::string_view verdict,
                                          std::string_view mode) {
    std::vector<const AuditLine*> hits;
    for (const auto& l : r.audit)
        if (l.str("op") == "proxy" && l.str("target") == target) hits.push_back(&l);
    if (hits.size() != 1)
        return ::testing::AssertionFailure()
               << "expected exactly one audit line with op proxy and target '" << target << "', found " << hits.size();
    const AuditLine& l = *hits.front();
    auto fail = [&](const std::string& what) {
        return ::testing::AssertionFailure() << "audit line " << l.raw << ": " << what;
    };
    if (l.str("verdict") != verdict) return fail(fmt::format("verdict is not \"{}\"", verdict));
    if (l.str("mode") != mode) return fail(fmt::format("mode is not \"{}\"", mode));
    if (l.str("job") != r.job) return fail("job is not \"" + r.job + "\"");
    static const std::regex time_re(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)");
    if (!std::regex_match(l.str("time").value_or(""), time_re)) return fail("time is not YYYY-MM-DDTHH:MM:SS.uuuuuuZ");
    return ::testing::AssertionSuccess();
}

size_t count_op(const Result& r, std::string_view op) {
    return static_cast<size_t>(
        std::count_if(r.audit.begin(), r.audit.end(), [&](const AuditLine& l) { return l.str("op") == op; }));
}

// The port of "http://127.0.0.1:PORT", or 0.
uint16_t proxy_port(const std::string& url) {
    std::smatch m;
    static const std::regex re(R"(^http://127\.0\.0\.1:([0-9]{1,5})$)");
    if (!std::regex_match(url, m, re)) return 0;
    unsigned long p = std::stoul(m[1]);
    return p > 0 && p < 65536 ? static_cast<uint16_t>(p) : 0;
}

// ---- the proxy process ------------------------------------------------------------------

// Inodes of the TCP sockets listening on PORT, on any address.
std::set<std::string> listening(uint16_t port) {
    std::set<std::string> inodes;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::istringstream in(read_file(table));
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream f(line);
            std::string sl, local, remote, st, queues, timer, retransmits, uid, timeout, inode;
            f >> sl >> local >> remote >> st >> queues >> timer >> retransmits >> uid >> timeout >> inode;
            auto colon = local.rfind(':');
            if (st == "0A" && colon != npos && std::stoul(local.substr(colon + 1), nullptr, 16) == port)
                inodes.insert(inode);
        }
    }
    return inodes;
}

std::vector<pid_t> all_pids() {
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename();
        if (!name.empty() && name.find_first_not_of("0123456789") == npos) pids.push_back(std::stoi(name));
    }
    return pids;
}

// The processes holding one of these sockets.
std::set<pid_t> holders(const std::set<std::string>& inodes) {
    std::set<pid_t> out;
    for (pid_t pid : all_pids()) {
        std::error_code ec;
        for (const auto& fd : fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
            std::string link = fs::read_symlink(fd.path(), ec).string();
            if (link.starts_with("socket:[") && inodes.contains(link.substr(8, link.size() - 9))) out.insert(pid);
        }
    }
    return out;
}

std::string comm_of(pid_t pid) {
    std::string c = read_file(fmt::format("/proc/{}/comm", pid));
    if (c.ends_with('\n')) c.pop_back();
    return c;
}

// Processes (not zombies) whose command line is `cmdline`.
std::vector<pid_t> running_with_cmdline(const std::string& cmdline) {
    std::vector<pid_t> out;
    for (pid_t pid : all_pids())
        if (read_file(fmt::format("/proc/{}/cmdline", pid)) == cmdline && alive(pid)) out.push_back(pid);
    return out;
}

// A job's proxy: its pid and its cgroup's path.
struct RunningProxy {
    pid_t pid = -1;
    std::string cgroup;
};

// ---- the fixture --------------------------------------------------------------------------

class ProxyTest : public VmTest {
protected:
    static void SetUpTestSuite() { hosts_.emplace(kHostsLines); }
    static void TearDownTestSuite() { hosts_.reset(); }

    void SetUp() override {
        VmTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_EQ(hosts_->error(), "");
        std::random_device rd;
        token_ = fmt::format("{}-{:08x}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), rd());

        // A certificate for the HTTPS servers, made now; the job checks the
        // servers' names against it (--cacert), so it is in the workdir.
        Process openssl =
            Process::start({.argv = {"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                     "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", at("key.pem"), "-out",
                                     at("cert.pem"), "-subj", "/CN=allowed.test", "-addext", kCertNames, "-days", "1"},
                            .env = {"PATH=/usr/bin:/bin"},
                            .cwd = base()});
        Result made = openssl.wait();
        ASSERT_EQ(made.status, 0) << made.describe();
        write_file(work() + "/ca.pem", read_file(at("cert.pem")));

        write_file(at("servers.py"), kServers);
        const std::string ready = at("servers.ready");
        std::vector<std::string> argv = {"/usr/bin/python3", at("servers.py"), token_, ready,
                                         at("cert.pem"),     at("key.pem")};
        for (const char* s : {"http:127.0.0.2:80", "http:127.0.0.2:8443", "https:127.0.0.2:443", "http:127.0.0.3:80",
                              "http:127.0.0.3:8443", "https:127.0.0.3:443"})
            argv.push_back(s);
        servers_.emplace(Process::start({.argv = argv, .env = {"PATH=/usr/bin:/bin"}}));
        ASSERT_TRUE(wait_until([&] { return exists(ready); }, 60)) << servers_->wait(1).describe();
    }

    // What the server at SCHEME://ADDR:PORT answers.
    std::string body(const std::string& server) const { return token_ + " " + server + "\n"; }

    // One request of a test: `server` is where the name leads, `deny` the
    // audit target ("name:port") if the proxy must refuse it, "" if it
    // must pass it.
    struct Case {
        std::string label, url, server, deny;
    };

    static std::string fetches(const std::vector<Case>& cases, const std::string& opts = "") {
        std::string cmd;
        for (const Case& c : cases) cmd += fetch(c.label, c.url, opts);
        return cmd;
    }

    // The control: unconfined, without a proxy, every case's server answers
    // under its name.
    void expect_served_directly(const std::vector<Case>& cases) {
        Result c = start_unconfined(fetches(cases, "--noproxy '*'")).wait(300);
        auto got = parse_fetches(c.out);
        for (const Case& k : cases) EXPECT_TRUE(served(got, k.label, body(k.server))) << c.describe();
    }

    // `confine run` of CMD, which ends with `true`: status 0 means the job
    // ran to its end (a policy confine can't enforce stops it with 125).
    Result run_job(const std::string& policy, const std::string& cmd, const std::vector<std::string>& args = {}) {
        Started s = start({.policy = policy, .args = args, .argv = {"/bin/sh", "-c", cmd + "true\n"}});
        return finish(s, 300);
    }

    // A job that publishes its HTTP_PROXY, then runs SLEEP (shell).
    Started start_sleeping_job(RunSpec spec = {}, const std::string& sleep = "exec sleep 600");
    // Its proxy, once it is up (pid -1, and a failure, if none is).
    RunningProxy proxy_of(const Started& job);

    static inline std::optional<GuestHosts> hosts_;
    std::string token_;
    std::optional<Process> servers_;
};

// ---- what passes and what doesn't ----------------------------------------------------------

TEST_F(ProxyTest, ListedNamesPassOnTheirPortsAndNothingElse) {
    const std::string policy = domains_policy({"allowed.test", "*.wild.test", "port.test:8443"});
    const std::vector<Case> cases = {
        // Exact names, in any case, on 80 and 443.
        {"allowed-http", "http://allowed.test/", "http://127.0.0.2:80", ""},
        {"allowed-https", "https://allowed.test/", "https://127.0.0.2:443", ""},
        {"upper-http", "http://ALLOWED.TEST/", "http://127.0.0.2:80", ""},
        {"upper-https", "https://Allowed.Test/", "https://127.0.0.2:443", ""},
        // A wildcard: one label more, or several.
        {"wild-http", "http://a.wild.test/", "http://127.0.0.2:80", ""},
        {"wild-https", "https://a.wild.test/", "https://127.0.0.2:443", ""},
        {"deep-wild-http", "http://a.b.wild.test/", "http://127.0.0.2:80", ""},
        {"deep-wild-https", "https://a.b.wild.test/", "https://127.0.0.2:443", ""},
        // A name with a port: that port only.
        {"port-8443-http", "http://port.test:8443/", "http://127.0.0.3:8443", ""},
        // The wildcard's bare name, and names that only end the same way.
        {"bare-wild-http", "http://wild.test/", "http://127.0.0.2:80", "wild.test:80"},
        {"bare-wild-https", "https://WILD.TEST/", "https://127.0.0.2:443", "wild.test:443"},
        {"xwild-http", "http://xwild.test/", "http://127.0.0.2:80", "xwild.test:80"},
        {"below-exact-http", "http://a.allowed.test/", "http://127.0.0.2:80", "a.allowed.test:80"},
        // Other ports than the entry's.
        {"port-80-http", "http://port.test/", "http://127.0.0.3:80", "port.test:80"},
        {"port-443-https", "https://port.test/", "https://127.0.0.3:443", "port.test:443"},
        {"allowed-8443-http", "http://allowed.test:8443/", "http://127.0.0.2:8443", "allowed.test:8443"},
    };
    expect_served_directly(cases);
    ASSERT_FALSE(HasFailure());

    Result r = run_job(policy, kPrintProxyEnv + fetches(cases));
    ASSERT_EQ(r.status, 0) << r.describe();

    // The job's proxy variables: all four at one loopback port, and
    // loopback itself never through the proxy.
    std::map<std::string, std::string> env;
    std::istringstream in(sections(r.out)["env"]);
    for (std::string line; std::getline(in, line);)
        if (auto eq = line.find('='); eq != npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    EXPECT_NE(proxy_port(env["HTTP_PROXY"]), 0) << "HTTP_PROXY=" << env["HTTP_PROXY"];
    for (const char* v : {"HTTPS_PROXY", "http_proxy", "https_proxy"}) EXPECT_EQ(env[v], env["HTTP_PROXY"]) << v;
    EXPECT_EQ(env["NO_PROXY"], kNoProxy);
    EXPECT_EQ(env["no_proxy"], kNoProxy);

    auto got = parse_fetches(r.out);
    size_t refused = 0;
    for (const Case& c : cases) {
        SCOPED_TRACE(c.label);
        if (c.deny.empty()) {
            EXPECT_TRUE(served(got, c.label, body(c.server))) << r.describe();
        } else {
            refused++;
            EXPECT_TRUE(refused_by_proxy(got, c.label, c.url, token_)) << r.describe();
            // The name as the proxy matched it: lowercase.
            EXPECT_TRUE(has_proxy_line(r, c.deny, "deny", "enforce")) << r.describe();
        }
    }
    // Nothing else: what passed is not logged, and the job's connections
    // to its proxy are allowed.
    EXPECT_EQ(r.audit.size(), refused) << r.describe();
}

TEST_F(ProxyTest, UnlistedNamesAndAddressesAreRefusedAndAudited) {
    const std::string policy = domains_policy({"allowed.test"});
    const std::vector<Case> cases = {
        // The proxy works for this job: a listed name passes.
        {"allowed-http", "http://allowed.test/", "http://127.0.0.2:80", ""},
        {"denied-http", "http://denied.test/", "http://127.0.0.3:80", "denied.test:80"},
        {"denied-https", "https://denied.test/", "https://127.0.0.3:443", "denied.test:443"},
        // An address is no name, even the address of a listed one.
        {"ip-http", "http://127.0.0.2/", "http://127.0.0.2:80", "127.0.0.2:80"},
        {"ip-https", "https://127.0.0.2/", "https://127.0.0.2:443", "127.0.0.2:443"},
    };
    expect_served_directly(cases);
    expect_served_directly({{"origin", "http://denied.test:8443/", "http://127.0.0.3:8443", ""}});
    ASSERT_FALSE(HasFailure());

    Result r = run_job(policy, fetches(cases) + origin_form_fetch("origin", "denied.test", 8443));
    ASSERT_EQ(r.status, 0) << r.describe();
    auto got = parse_fetches(r.out);
    EXPECT_TRUE(served(got, "allowed-http", body("http://127.0.0.2:80"))) << r.describe();
    for (const Case& c : cases) {
        if (c.deny.empty()) continue;
        SCOPED_TRACE(c.label);
        EXPECT_TRUE(refused_by_proxy(got, c.label, c.url, token_)) << r.describe();
        EXPECT_TRUE(has_proxy_line(r, c.deny, "deny", "enforce")) << r.describe();
    }
    // A name in a Host header is judged like one in a URL.
    EXPECT_TRUE(refused_by_proxy(got, "origin", "http://denied.test:8443/", token_)) << r.describe();
    EXPECT_TRUE(has_proxy_line(r, "denied.test:8443", "deny", "enforce")) << r.describe();
    EXPECT_EQ(r.audit.size(), 5u) << r.describe();
}

// The proxy is the only way out: the names are listed, but the kernel still
// refuses a connection straight to their servers.
TEST_F(ProxyTest, DirectConnectionsToListedNamesAreStillRefused) {
    const std::vector<Case> cases = {
        {"direct-http", "http://allowed.test/", "http://127.0.0.2:80", ""},
        {"direct-https", "https://allowed.test/", "https://127.0.0.2:443", ""},
    };
    expect_served_directly(cases);
    ASSERT_FALSE(HasFailure());

    Result r = run_job(domains_policy({"allowed.test"}),
                       fetches(cases, "--noproxy '*'") + fetch("proxied-http", "http://allowed.test/"));
    ASSERT_EQ(r.status, 0) << r.describe();
    auto got = parse_fetches(r.out);
    EXPECT_TRUE(served(got, "proxied-http", body("http://127.0.0.2:80"))) << r.describe();
    EXPECT_TRUE(unconnected(got, "direct-http", 7)) << r.describe();
    EXPECT_TRUE(unconnected(got, "direct-https", 7)) << r.describe();
    EXPECT_DENIAL(r, "connect", "tcp://127.0.0.2:80", "curl");
    EXPECT_DENIAL(r, "connect", "tcp://127.0.0.2:443", "curl");
    EXPECT_EQ(r.audit.size(), 2u) << r.describe();
}

// ---- whose proxy it is ---------------------------------------------------------------------

// A job's proxy serves that job only: another job is refused by the kernel
// (the port is no connect rule of its own), and a process outside any job
// gets no answer at all (its SYNs are dropped), root included.
TEST_F(ProxyTest, AJobsProxyServesNoOtherJobAndNoHostProcess) {
    const std::string url_file = work() + "/proxy-a", go = work() + "/go";
    Started a = start({.policy = domains_policy({"allowed.test"}),
                       .argv = {"/bin/sh", "-c",
                                "printenv HTTP_PROXY > proxy-a.tmp && mv proxy-a.tmp proxy-a\n"
                                "until [ -e go ]; do sleep 0.1; done\n" +
                                    fetch("a-own", "http://allowed.test/") + "true\n"}});
    if (!wait_until([&] { return exists(url_file); }, 60)) {
        write_file(go, "");
        FAIL() << "job A never wrote its HTTP_PROXY\n" << finish(a).describe();
    }
    std::string url = read_file(url_file);
    if (url.ends_with('\n')) url.pop_back();
    const uint16_t port = proxy_port(url);
    if (port == 0) {
        write_file(go, "");
        FAIL() << "job A's HTTP_PROXY is '" << url << "'\n" << finish(a).describe();
    }
    const std::string via_a = fmt::format("--connect-timeout 3 -x http://127.0.0.1:{}", port);

    // The server answers anyone who asks it directly.
    expect_served_directly({{"direct", "http://allowed.test/", "http://127.0.0.2:80", ""}});

    // Job B, with a proxy of its own that works, is refused A's.
    Result b = run_job(domains_policy({"allowed.test"}),
                       fetch("b-via-a", "http://allowed.test/", via_a) + fetch("b-own", "http://allowed.test/"));
    EXPECT_EQ(b.status, 0) << b.describe();
    auto got_b = parse_fetches(b.out);
    EXPECT_TRUE(served(got_b, "b-own", body("http://127.0.0.2:80"))) << b.describe();
    EXPECT_TRUE(unconnected(got_b, "b-via-a", 7)) << b.describe();
    EXPECT_DENIAL(b, "connect", fmt::format("tcp://127.0.0.1:{}", port), "curl");
    EXPECT_EQ(b.audit.size(), 1u) << b.describe();

    // Outside any job: the user, and root.
    const std::string host_cmd = fetch("host", "http://allowed.test/", via_a);
    Result user = start_unconfined(host_cmd).wait(60);
    EXPECT_TRUE(unconnected(parse_fetches(user.out), "host", 28)) << user.describe();
    Result root = run_root(host_cmd);
    EXPECT_TRUE(unconnected(parse_fetches(root.out), "host", 28)) << root.describe();

    // The control: A itself still fetches through it.
    write_file(go, "");
    Result ra = finish(a, 300);
    EXPECT_EQ(ra.status, 0) << ra.describe();
    EXPECT_TRUE(served(parse_fetches(ra.out), "a-own", body("http://127.0.0.2:80"))) << ra.describe();
    // The host's SYNs, dropped on their way to A's proxy, are A's inbound
    // count: at least one from each of the two attempts, and nothing else.
    ASSERT_EQ(ra.audit.size(), 1u) << ra.describe();
    EXPECT_EQ(ra.audit[0].str("op"), "inbound") << ra.describe();
    EXPECT_GE(ra.audit[0].num("count").value_or(0), 2) << ra.describe();
}

// ---- audit mode ------------------------------------------------------------------------------

TEST_F(ProxyTest, AuditModePassesAndRecordsWhatEnforceWouldRefuse) {
    const std::vector<Case> cases = {
        {"allowed-http", "http://allowed.test/", "http://127.0.0.2:80", ""},
        {"denied-http", "http://denied.test/", "http://127.0.0.3:80", "denied.test:80"},
        {"denied-https", "https://denied.test/", "https://127.0.0.3:443", "denied.test:443"},
    };
    expect_served_directly(cases);
    expect_served_directly({{"origin", "http://denied.test:8443/", "http://127.0.0.3:8443", ""}});
    ASSERT_FALSE(HasFailure());

    Result r = run_job(domains_policy({"allowed.test"}, "audit"),
                       fetches(cases) + origin_form_fetch("origin", "denied.test", 8443));
    ASSERT_EQ(r.status, 0) << r.describe();
    auto got = parse_fetches(r.out);
    for (const Case& c : cases) {
        SCOPED_TRACE(c.label);
        // Through the proxy (the job's connections to the servers would be
        // refused, and recorded, as connect lines), every one passes.
        EXPECT_TRUE(served(got, c.label, body(c.server))) << r.describe();
        if (!c.deny.empty()) {
            EXPECT_TRUE(has_proxy_line(r, c.deny, "allow", "audit")) << r.describe();
        }
    }
    // An origin-form request too: the name is the Host header's.
    EXPECT_TRUE(served(got, "origin", body("http://127.0.0.3:8443"))) << r.describe();
    EXPECT_TRUE(has_proxy_line(r, "denied.test:8443", "allow", "audit")) << r.describe();
    EXPECT_EQ(count_op(r, "proxy"), 3u) << "a listed name is not recorded\n" << r.describe();
    EXPECT_EQ(count_op(r, "connect"), 0u) << "the job went around its proxy\n" << r.describe();
}

// ---- the proxy's lifetime ----------------------------------------------------------------------

// The job's proxy is gone when `confine run` returns, whether the job ended
// on its own or at its timeout: no process of it is left, and nothing
// listens on its port.
TEST_F(ProxyTest, TheProxyEndsWithTheJob) {
    const std::string url_file = work() + "/proxy-url", go = work() + "/go";
    const std::string publish = "printenv HTTP_PROXY > proxy-url.tmp && mv proxy-url.tmp proxy-url\n";
    struct Ending {
        std::string how;
        std::vector<std::string> args;
        std::string rest;
        int status;
    };
    for (const Ending& e : {Ending{"on its own", {}, "until [ -e go ]; do sleep 0.1; done\n", 0},
                            Ending{"at its timeout", {"--timeout", "10"}, "exec sleep 120\n", 124}}) {
        SCOPED_TRACE(e.how);
        unlink(url_file.c_str());
        unlink(go.c_str());
        Started s = start(
            {.policy = domains_policy({"allowed.test"}), .args = e.args, .argv = {"/bin/sh", "-c", publish + e.rest}});
        if (!wait_until([&] { return exists(url_file); }, 60)) {
            write_file(go, "");
            ADD_FAILURE() << "the job never wrote its HTTP_PROXY\n" << finish(s).describe();
            continue;
        }
        std::string url = read_file(url_file);
        if (url.ends_with('\n')) url.pop_back();
        const uint16_t port = proxy_port(url);
        // While the job runs: a tinyproxy listens there (and whatever else
        // holds its socket must go with it).
        const std::set<pid_t> proxy = port ? holders(listening(port)) : std::set<pid_t>{};
        std::map<pid_t, std::string> cmdlines;
        std::string comms;
        for (pid_t pid : proxy) {
            comms += fmt::format(" {}:{}", pid, comm_of(pid));
            cmdlines[pid] = read_file(fmt::format("/proc/{}/cmdline", pid));
        }
        write_file(go, "");
        Result r = finish(s, 300);
        EXPECT_EQ(r.status, e.status) << r.describe();
        ASSERT_NE(port, 0) << "HTTP_PROXY is '" << url << "'";
        ASSERT_NE(comms.find(":tinyproxy"), npos) << "no tinyproxy listened on " << url << " while the job ran;"
                                                  << " holders of its socket:" << comms;

        // Checked at once: confine returned, so the proxy must be gone already.
        EXPECT_TRUE(listening(port).empty()) << "something still listens on " << url;
        for (const auto& [pid, cmdline] : cmdlines) {
            EXPECT_FALSE(alive(pid)) << "the job's proxy, pid " << pid << ", outlived it";
            if (cmdline.empty()) continue;  // gone already; kernel threads have none either
            // pgrep -f: its command line names the job's own config file.
            auto left = running_with_cmdline(cmdline);
            EXPECT_TRUE(left.empty()) << left.size() << " processes with the proxy's command line are left, pid "
                                      << left.front();
        }
    }
}

// ---- the proxy's own limits, and its death -------------------------------------------------

VmTest::Started ProxyTest::start_sleeping_job(RunSpec spec, const std::string& sleep) {
    unlink((work() + "/proxy-url").c_str());
    spec.policy = domains_policy({"allowed.test"});
    spec.argv = {"/bin/sh", "-c", "printenv HTTP_PROXY > proxy-url.tmp && mv proxy-url.tmp proxy-url\n" + sleep};
    return start(spec);
}

RunningProxy ProxyTest::proxy_of(const Started& job) {
    RunningProxy p;
    const std::string url_file = work() + "/proxy-url";
    if (!wait_until([&] { return exists(url_file); }, 60)) {
        ADD_FAILURE() << "the job never wrote its HTTP_PROXY";
        return p;
    }
    std::string url = read_file(url_file);
    if (url.ends_with('\n')) url.pop_back();
    const std::set<pid_t> pids = holders(listening(proxy_port(url)));
    if (pids.size() != 1 || comm_of(*pids.begin()) != "tinyproxy") {
        ADD_FAILURE() << "not one tinyproxy listening on " << url << " for job " << job.job << " but " << pids.size()
                      << " processes";
        return p;
    }
    p.pid = *pids.begin();
    std::string cg = read_file(fmt::format("/proc/{}/cgroup", p.pid));  // "0::/confine/<tag>.proxies/<job>\n"
    if (cg.ends_with('\n')) cg.pop_back();
    p.cgroup = cgroup2_mount() + cg.substr(cg.find("::") + 2);
    return p;
}

// A job's memory limit doesn't cover its proxy, which holds what clients
// send it: the proxy has limits of its own, and runs as nobody. If it
// dies, confine stops the job (status 125): its way out is gone, and its
// connect rule names a port any local process could take.
TEST_F(ProxyTest, TheProxyHasLimitsOfItsOwnAndItsJobStopsWhenItDies) {
    Started job = start_sleeping_job();
    const RunningProxy p = proxy_of(job);
    if (p.pid < 0) {
        kill(job.proc->pid(), SIGTERM);
        FAIL() << finish(job, 60).describe();
    }
    EXPECT_TRUE(p.cgroup.ends_with(".proxies/" + job.job)) << p.cgroup;
    EXPECT_EQ(read_file(p.cgroup + "/memory.max"), "268435456\n");
    EXPECT_EQ(read_file(p.cgroup + "/memory.swap.max"), "0\n");
    EXPECT_EQ(read_file(p.cgroup + "/pids.max"), "72\n");
    const std::string status = read_file(fmt::format("/proc/{}/status", p.pid));
    EXPECT_NE(status.find("\nUid:\t65534\t65534\t65534\t65534\n"), npos) << status;

    kill(p.pid, SIGKILL);
    Result r = finish(job, 60);
    EXPECT_EQ(r.status, 125) << r.describe();
    EXPECT_NE(r.err.find("the job's proxy (tinyproxy, for network.domains) exited while the job ran; stopping the job"),
              npos)
        << r.describe();
    EXPECT_TRUE(std::any_of(r.audit.begin(), r.audit.end(),
                            [](const AuditLine& l) {
                                return l.str("op") == "proxy" && l.str("reason") == "proxy_exited" &&
                                       l.str("verdict") == "deny";
                            }))
        << "no audit record says the proxy exited\n"
        << r.describe();
    EXPECT_EQ(job_cgroup(r.job), "") << "the job outlived its proxy";
    EXPECT_FALSE(exists(p.cgroup)) << p.cgroup << " outlived the job";
}

// ^C at a terminal signals its foreground process group: confine, which
// passes it on to the job (in a session of its own). An agent takes ^C as
// "stop what you are doing" and goes on. The proxy has a session of its own
// too: were it in confine's group, it would quit on SIGINT, and the job,
// having lost its proxy, would be stopped (125, proxy_exited).
TEST_F(ProxyTest, AnInterruptAtTheTerminalReachesTheJobNotTheProxy) {
    Started job = start_sleeping_job({.own_group = true},
                                     "trap 'touch interrupted' INT\ntouch trapped\n"
                                     "while :; do sleep 600 & wait $!; done");
    const RunningProxy p = proxy_of(job);
    if (p.pid < 0 || !wait_until([&] { return exists(work() + "/trapped"); }, 30)) {
        kill(job.proc->pid(), SIGTERM);
        FAIL() << finish(job, 60).describe();
    }
    kill(-job.proc->pid(), SIGINT);
    EXPECT_TRUE(wait_until([&] { return exists(work() + "/interrupted"); }, 30)) << "the job never saw the ^C";
    usleep(500'000);  // time for a proxy that quit to be noticed
    EXPECT_TRUE(alive(p.pid)) << "the proxy quit on the terminal's ^C";
    EXPECT_NE(job_cgroup(job.job), "") << "the job was stopped";

    kill(job.proc->pid(), SIGTERM);
    Result r = finish(job, 60);
    EXPECT_EQ(r.status, 128 + SIGTERM) << r.describe();
    EXPECT_FALSE(std::any_of(r.audit.begin(), r.audit.end(), [](const AuditLine& l) {
        return l.str("reason") == "proxy_exited";
    })) << r.describe();
}

// A confine killed outright (SIGKILL) leaves its job running, still
// confined, and the job's proxy with it, holding the port the job's rule
// names. Once the job's cgroup is gone (the runner ended it), the next
// confine ends the proxy.
TEST_F(ProxyTest, AProxyLeftByAKilledConfineEndsOnceItsJobIsGone) {
    Started job = start_sleeping_job();
    const RunningProxy p = proxy_of(job);
    if (p.pid < 0) {
        kill(job.proc->pid(), SIGTERM);
        FAIL() << finish(job, 60).describe();
    }
    kill(job.proc->pid(), SIGKILL);
    finish(job, 60);
    const std::string job_cg = job_cgroup(job.job);
    ASSERT_NE(job_cg, "") << "the job died with confine";
    EXPECT_TRUE(alive(p.pid)) << "the proxy died with confine while its job runs: its port is free for anyone";

    // What a runner does with a job whose confine is gone.
    std::ofstream(job_cg + "/cgroup.kill") << "1";
    ASSERT_TRUE(wait_until([&] { return read_file(job_cg + "/cgroup.events").find("populated 0") != npos; }, 30));
    ASSERT_EQ(rmdir(job_cg.c_str()), 0) << job_cg << ": " << strerror(errno);
    EXPECT_TRUE(alive(p.pid));

    Result next = run_confined("", "true");
    EXPECT_EQ(next.status, 0) << next.describe();
    EXPECT_FALSE(alive(p.pid)) << "the orphaned proxy is still running";
    EXPECT_FALSE(exists(p.cgroup)) << p.cgroup << " is left";
}

// ---- the proxy variables are confine's -----------------------------------------------------

// With domains, the proxy variables point at the job's proxy; a policy that
// sets or keeps one of them would send the job elsewhere, so it is refused,
// by `check` and by `run` (which never starts the job). Without domains the
// same policies are fine (policies/claude-code.toml sets HTTP_PROXY).
TEST_F(ProxyTest, APolicyWithDomainsMayNotSetOrKeepTheProxyVariables) {
    const std::map<std::string, std::string> set = {{"HTTP_PROXY", "http://127.0.0.1:3128"}};
    const std::vector<std::string> keep = {"https_proxy"};
    struct Variant {
        std::string name, variable, bad, good;
    };
    const std::vector<Variant> variants = {
        {"set", "HTTP_PROXY", make_policy({.domains = {"allowed.test"}, .env_set = set}),
         make_policy({.env_set = set})},
        {"keep", "https_proxy", make_policy({.domains = {"allowed.test"}, .env_keep = keep}),
         make_policy({.env_keep = keep})},
    };
    auto check = [&](const std::string& file) {
        return Process::start({.argv = {confine_bin(), "check", file}, .env = {"PATH=/usr/bin:/bin"}}).wait();
    };
    for (const Variant& v : variants) {
        SCOPED_TRACE(v.name);
        const std::string bad = at(v.name + "-bad.toml"), good = at(v.name + "-good.toml");
        const std::string ran = work() + "/ran-" + v.name;
        write_file(bad, v.bad);
        write_file(good, v.good);

        Result ok = check(good);
        EXPECT_EQ(ok.status, 0) << ok.describe();
        Result refused = check(bad);
        EXPECT_NE(refused.status, 0) << refused.describe();
        const std::regex where("(^|\n)" + std::regex_replace(bad, std::regex(R"([.])"), R"(\.)") +
                               R"(:[0-9]+:[0-9]+: )");
        EXPECT_TRUE(std::regex_search(refused.err, where)) << refused.describe();
        EXPECT_NE(refused.err.find(v.variable), npos) << refused.describe();

        Result control = run_confined(v.good, "touch " + ran);
        EXPECT_EQ(control.status, 0) << control.describe();
        EXPECT_TRUE(exists(ran)) << control.describe();
        unlink(ran.c_str());
        Result r = run_confined(v.bad, "touch " + ran);
        EXPECT_EQ(r.status, 125) << r.describe();
        EXPECT_FALSE(exists(ran)) << "the job ran\n" << r.describe();
        EXPECT_NE(r.err.find(v.variable), npos) << r.describe();
    }
}

}  // namespace
}  // namespace vmtest
