// `confine daemon`: starts confined jobs for unprivileged clients over a
// unix socket (docs/daemon.md), and the client side of `confine run`.
#pragma once

#include <string>

#include "loader/run.h"
#include "loader/wire.h"

namespace confine {

struct DaemonOptions {
    std::string socket = wire::kDefaultSocket;
    std::string ceiling = "/etc/confine/ceiling.toml";
    std::string config = "/etc/confine/daemon.toml";
    std::string group = "confine";  // may connect (the socket's group)
};

// Serves until SIGTERM or SIGINT; returns the exit status.
int daemon_main(const DaemonOptions& opts);

// `confine run` as a client of the daemon: the same options, exit status
// and audit lines as a run as root.
int run_through_daemon(const RunOptions& opts);

}  // namespace confine
