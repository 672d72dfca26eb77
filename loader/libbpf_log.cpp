#include "loader/libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace confine {
namespace {

bool g_verbose = false;
std::string g_log;  // recent libbpf output, for error messages

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args) {
    if (g_verbose) return vfprintf(stderr, fmt, args);
    if (level == LIBBPF_DEBUG) return 0;
    // Whole messages: a verifier log comes as one, and its end says why.
    va_list copy;
    va_copy(copy, args);
    const int n = vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n <= 0) return n;
    std::string message(n + 1, '\0');
    vsnprintf(message.data(), message.size(), fmt, args);
    message.pop_back();
    g_log += message;
    if (g_log.size() > 4096) g_log.erase(0, g_log.size() - 4096);
    return n;
}

}  // namespace

void set_libbpf_verbose(bool verbose) {
    g_verbose = verbose;
    libbpf_set_print(libbpf_print);
}

Error with_libbpf_log(Error e) {
    if (!g_log.empty()) e.message += "\nlibbpf said:\n" + g_log;
    return e;
}

}  // namespace confine
