// Tests of loader/proxy.cpp's pure parts: the tinyproxy filter, compiled
// as tinyproxy 1.11 compiles it (UrlFilter: "FilterType ere",
// "FilterCaseSensitive Off"), and the name:port read back from its log.
// The proxy itself is tested in a guest (tests/vm/proxy_test.cpp).
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "loader/proxy.h"

namespace confine {
namespace {

policy::Domain domain(std::string name, std::vector<uint16_t> ports = {80, 443}) {
    return {name, std::move(ports), name, {}};
}

// Whether the job's proxy, with the filter for DOMAINS, lets URL (the
// request target as the client sent it) through.
bool passes(const std::string& filter, const std::string& url) {
    return UrlFilter(filter).passes(url);
}

TEST(ProxyFilter, ExactNameOnItsPorts) {
    const std::string f = proxy_filter({domain("api.example.com")});
    for (std::string_view ok : {"api.example.com:443", "API.Example.COM:443", "http://api.example.com/",
                                "http://api.example.com", "http://api.example.com:80/v1?x=1"})
        EXPECT_TRUE(passes(f, std::string(ok))) << ok;
    for (std::string_view no :
         {"api.example.com:8443", "api.example.com:4433", "api.example.com", "http://api.example.com:8080/",
          "http://api.example.com.evil.test/", "apixexample.com:443", "x.api.example.com:443",
          "https://api.example.com/", "http://evil.test/?api.example.com:443", "evil.test:443/api.example.com:443"})
        EXPECT_FALSE(passes(f, std::string(no))) << no;
}

TEST(ProxyFilter, WildcardIsSubdomainsOnlyAndCantRunIntoAUserPortOrPath) {
    const std::string f = proxy_filter({domain("*.github.com")});
    for (std::string_view ok : {"codeload.github.com:443", "a.b-c.github.com:443", "http://x.github.com/a"})
        EXPECT_TRUE(passes(f, std::string(ok))) << ok;
    // The bypasses an fnmatch '*' allows: '/', '@' and ':' inside the match.
    for (std::string_view no : {"github.com:443", "evilgithub.com:443", "localhost:443/.github.com:443",
                                "http://localhost:2222/x/.github.com/", "http://user@localhost/.github.com/",
                                "http://x.github.com@evil.test/", "localhost:22#.github.com:443", "x.github.com:22"})
        EXPECT_FALSE(passes(f, std::string(no))) << no;
}

TEST(ProxyFilter, AGivenPortReplacesEightyAndFourFortyThree) {
    const std::string f = proxy_filter({domain("m.test", {8080})});
    EXPECT_TRUE(passes(f, "m.test:8080"));
    EXPECT_TRUE(passes(f, "http://m.test:8080/v1/messages"));
    for (std::string_view no :
         {"m.test:443", "http://m.test/", "http://m.test:80/", "http://m.test:80800/", "m.test:80800"})
        EXPECT_FALSE(passes(f, std::string(no))) << no;
}

TEST(ProxyFilter, NoDomainsNoLines) {
    // With FilterDefaultDeny an empty filter refuses everything.
    EXPECT_EQ(proxy_filter({}), "");
}

TEST(ProxyTarget, NameAndPortAsTinyproxyReadsThem) {
    EXPECT_EQ(proxy_target("api.example.com:443"), "api.example.com:443");
    EXPECT_EQ(proxy_target("Denied.Test:8443"), "denied.test:8443");
    EXPECT_EQ(proxy_target("denied.test"), "denied.test:443");  // CONNECT without a port goes to 443
    EXPECT_EQ(proxy_target("http://denied.test/a/b:9"), "denied.test:80");
    EXPECT_EQ(proxy_target("HTTP://denied.test:8080/x"), "denied.test:8080");
    EXPECT_EQ(proxy_target("http://user:pw@denied.test:81/"), "denied.test:81");
    EXPECT_EQ(proxy_target("[::1]:443"), "[::1]:443");
    EXPECT_EQ(proxy_target("127.0.0.1:22"), "127.0.0.1:22");
    // tinyproxy's port is a uint16_t.
    EXPECT_EQ(proxy_target("allowed.test:66016"), "allowed.test:480");
    EXPECT_EQ(proxy_target("http://allowed.test:67758/"), "allowed.test:2222");
}

// A line of tinyproxy's log, as log.c writes it.
std::string log_line(std::string_view level, std::string_view message) {
    return fmt::format("{:<9} Dec 01 03:00:00.123 [42]: {}", level, message);
}

TEST(ProxyRefusal, EnforceModeRecordsTheFiltersRefusals) {
    EXPECT_EQ(proxy_refusal(log_line("NOTICE", "Proxying refused on filtered url \"denied.test:443\""), nullptr),
              "denied.test:443");
    EXPECT_EQ(proxy_refusal(log_line("NOTICE", "Proxying refused on filtered url \"http://Denied.test/x\""), nullptr),
              "denied.test:80");
    // Cut at 800 bytes: the closing quote is lost, the refusal is not.
    const std::string cut =
        log_line("NOTICE", "Proxying refused on filtered url \"http://denied.test/" + std::string(1000, 'A') + "\"")
            .substr(0, 798);
    EXPECT_EQ(proxy_refusal(cut, nullptr), "denied.test:80");
    // What a client sent, echoed inside another message, is no refusal.
    EXPECT_EQ(
        proxy_refusal(log_line("ERROR", "Bad header: Proxying refused on filtered url \"forged.test:443\""), nullptr),
        std::nullopt);
    EXPECT_EQ(proxy_refusal(log_line("INFO", "Established connection to host \"allowed.test\""), nullptr),
              std::nullopt);
}

TEST(ProxyRefusal, AuditModeJudgesEachRequestAsTheFilterWould) {
    const UrlFilter judge(proxy_filter({domain("allowed.test")}));
    auto request = [&](std::string_view line) {
        return proxy_refusal(log_line("CONNECT", fmt::format("Request (file descriptor 7): {}", line)), &judge);
    };
    auto trans = [&](std::string_view rest) {
        return proxy_refusal(log_line("INFO", fmt::format("process_request: trans {} for 7", rest)), &judge);
    };
    EXPECT_EQ(request("CONNECT allowed.test:443 HTTP/1.1"), std::nullopt);
    EXPECT_EQ(request("GET http://allowed.test/ HTTP/1.1"), std::nullopt);
    EXPECT_EQ(request("POST HTTP://ALLOWED.TEST/v1 HTTP/1.1"), std::nullopt);
    EXPECT_EQ(request("CONNECT denied.test:443 HTTP/1.1"), "denied.test:443");
    EXPECT_EQ(request("CONNECT allowed.test:66016 HTTP/1.1"), "allowed.test:480");  // the port tinyproxy uses
    EXPECT_EQ(request("GET http://allowed.test:67758/ HTTP/1.1"), "allowed.test:2222");
    // A tab is part of the URL to tinyproxy, which then connects to "evil".
    EXPECT_EQ(request("GET http://allowed.test\t@evil/ HTTP/1.1"), "evil:80");
    // Origin form, and a lowercase "connect", which tinyproxy handles as
    // origin form: judged on the trans line, with the Host header's name.
    EXPECT_EQ(request("GET / HTTP/1.1"), std::nullopt);
    EXPECT_EQ(request("connect allowed.test:443 HTTP/1.1"), std::nullopt);
    EXPECT_EQ(trans("Host GET http://denied.test:80/"), "denied.test:80");
    EXPECT_EQ(trans("Host connect http://denied.test:80/allowed.test:443"), "denied.test:80");
    EXPECT_EQ(trans("Host GET http://allowed.test:80/"), std::nullopt);
    EXPECT_EQ(trans("IP GET http://127.0.0.1:3128/"), "127.0.0.1:3128");
    // A line cut short can't be judged: refused.
    EXPECT_EQ(request(std::string(850, 'M') + " http://denied.test/ HTTP/1.1").has_value(), true);
    // The URL tinyproxy built from a Host header: the name is up to its
    // port, the rest is the path, '@' and ':' included.
    EXPECT_EQ(trans("Host GET http://denied.test:80@allowed.test:443"), "denied.test:80");
    EXPECT_EQ(trans("Host connect http://Denied.test:80allowed.test:443"), "denied.test:80");
    // A folded Host header logged with its line break: the continuation is
    // no line of its own, and the message can't be judged.
    EXPECT_EQ(proxy_refusal(log_line("INFO", "process_request: trans Host GET http://allowed.test\r\n") +
                                "\tINFO x [1]: Request (file descriptor 9): GET http://forged.test/ HTTP/1.1:80/ for 7",
                            &judge),
              "allowed.test\r:0");
    // A request line inside another message is no request.
    EXPECT_EQ(
        proxy_refusal(log_line("ERROR", "Bad header: x Request (file descriptor 9): GET http://forged.test/"), &judge),
        std::nullopt);
}

}  // namespace
}  // namespace confine
