// A build-time tool, run on the build host: parses the default policy
// (default.toml) with the policy parser and writes it out as C++, so that a
// job on the default policy pays for no TOML parse (about 0.2 ms of a
// job's start under icount, docs/benchmarks.md). The TOML file stays the
// one source: its text is embedded too, and a unit test checks that the
// two agree.
//
//   embed_default default.toml > default_policy.h
//
// The header defines kDefaultPolicyText and parsed_default_policy().
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "policy/policy.h"

namespace confine::policy {
namespace {

std::string emit(const std::string& s) {
    std::string out = "std::string(\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\')
            out += fmt::format("\\{}", static_cast<char>(c));
        else if (c < 0x20 || c >= 0x7f)
            out += fmt::format("\\{:03o}", c);  // three digits: no following digit joins it
        else
            out += static_cast<char>(c);
    }
    return out + "\", " + std::to_string(s.size()) + ")";
}
std::string emit(int v) {
    return std::to_string(v);
}
std::string emit(double v) {
    return fmt::format("{:a}", v);  // exact
}
std::string emit(const Location& l) {
    return fmt::format("Location{{{}, {}}}", l.line, l.col);
}
std::string emit(const std::pair<std::string, std::string>& p) {
    return fmt::format("std::pair{{{}, {}}}", emit(p.first), emit(p.second));
}
std::string emit(const PathRule& r) {
    return fmt::format("PathRule{{{}, {}}}", emit(r.path), emit(r.where));
}
std::string emit(const Endpoint& e) {
    return fmt::format("Endpoint{{Endpoint::Kind({}), {{{}}}, {}, {}, {}, {}}}", static_cast<int>(e.kind),
                       fmt::join(e.addr, ", "), e.port, emit(e.name), emit(e.text), emit(e.where));
}
std::string emit(const Domain& d) {
    return fmt::format("Domain{{{}, std::vector<uint16_t>{{{}}}, {}, {}}}", emit(d.name), fmt::join(d.ports, ", "),
                       emit(d.text), emit(d.where));
}
// After the overloads for its elements, which it finds by name.
template <class T>
std::string emit(const std::vector<T>& v) {
    std::string out = "{";
    for (const T& e : v) out += emit(e) + ", ";
    return out + "}";
}
std::string emit(const Limit& l) {
    return fmt::format("Limit{{Limit::Kind({}), {}, {}}}", static_cast<int>(l.kind), emit(l.value), emit(l.where));
}
std::string emit(const std::optional<std::vector<PathRule>>& v) {
    return v ? "std::vector<PathRule>" + emit(*v) : "std::nullopt";
}

// Every member of Policy: one left out here makes the unit test
// DefaultPolicy.IsItsTextParsed fail.
std::string emit(const Policy& p) {
    std::string out;
    auto set = [&](const char* member, const std::string& value) {
        out += fmt::format("    p.{} = {};\n", member, value);
    };
    set("source", emit(p.source));
    set("version", emit(p.version));
    set("mode", fmt::format("Mode({})", static_cast<int>(p.mode)));
    set("fs.read", "std::vector<PathRule>" + emit(p.fs.read));
    set("fs.write", "std::vector<PathRule>" + emit(p.fs.write));
    set("fs.deny_write", "std::vector<PathRule>" + emit(p.fs.deny_write));
    set("fs.deny", "std::vector<PathRule>" + emit(p.fs.deny));
    set("fs.exec", emit(p.fs.exec));
    set("fs.protect_git", "std::vector<PathRule>" + emit(p.fs.protect_git));
    set("net.connect", "std::vector<Endpoint>" + emit(p.net.connect));
    set("net.bind", "std::vector<Endpoint>" + emit(p.net.bind));
    set("net.families", "std::vector<int>" + emit(p.net.families));
    set("net.domains", "std::vector<Domain>" + emit(p.net.domains));
    set("user_namespaces", p.user_namespaces ? "true" : "false");
    set("env_keep", "std::vector<std::string>" + emit(p.env_keep));
    set("env_set", "std::vector<std::pair<std::string, std::string>>" + emit(p.env_set));
    set("limits.memory", emit(p.limits.memory));
    set("limits.swap", emit(p.limits.swap));
    set("limits.pids", emit(p.limits.pids));
    set("limits.cpu", emit(p.limits.cpu));
    set("limits.timeout_s", std::to_string(p.limits.timeout_s) + "u");
    return out;
}

}  // namespace
}  // namespace confine::policy

int main(int argc, char** argv) {
    using namespace confine::policy;
    if (argc != 2) {
        fprintf(stderr, "usage: embed_default default.toml\n");
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    if (!in || text.empty()) {
        fprintf(stderr, "embed_default: can't read %s\n", argv[1]);
        return 1;
    }
    // A build whose own default doesn't parse must not build.
    auto p = parse(text, "<default>");
    if (!p) {
        for (const Diagnostic& d : p.error()) fprintf(stderr, "%s: %s\n", argv[1], d.str().c_str());
        return 1;
    }
    const std::string delim = "confine_toml";
    if (text.find(")" + delim + "\"") != std::string::npos) {
        fprintf(stderr, "embed_default: %s contains the raw string's end, )%s\"\n", argv[1], delim.c_str());
        return 1;
    }
    fmt::print(
        "// Generated from policy/default.toml by policy/embed_default.cpp.\n"
        "namespace confine::policy {{\n\n"
        "constexpr std::string_view kDefaultPolicyText = R\"{0}({1}){0}\";\n\n"
        "inline Policy parsed_default_policy() {{\n"
        "    Policy p;\n"
        "{2}"
        "    return p;\n"
        "}}\n\n"
        "}}  // namespace confine::policy\n",
        delim, text, emit(*p));
    return 0;
}
