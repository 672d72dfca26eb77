// libbpf's messages: to stderr when verbose, otherwise the recent ones kept
// for the error a failed load reports (the verifier's verdict).
#pragma once

#include "common/error.h"

namespace confine {

// Routes libbpf's messages: to stderr when verbose, otherwise kept so that a
// failure can show the last lines (the verifier's verdict).
void set_libbpf_verbose(bool verbose);
// E with the last lines libbpf printed, if it printed any.
Error with_libbpf_log(Error e);

}  // namespace confine
