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
    char line[1024];
    int n = vsnprintf(line, sizeof line, fmt, args);
    g_log += line;
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
