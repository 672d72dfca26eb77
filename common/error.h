// The one error type of confine: what failed, on what, and what to do.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <utility>

namespace confine {

struct Error {
    std::string message;  // "what failed on what[: strerror]. what to do"
    int err = 0;          // errno when a system call failed, else 0

    // "cgroup: mkdir /sys/fs/cgroup/confine/job: Permission denied"
    static Error sys(std::string what, int e = errno) { return Error{std::move(what) + ": " + std::strerror(e), e}; }
    static Error msg(std::string what) { return Error{std::move(what), 0}; }

    // Appends a remedy sentence: Error::sys(...).hint("Run as root.")
    Error hint(const std::string& what_to_do) && {
        message += ". " + what_to_do;
        return std::move(*this);
    }
};

template <class T = void>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Error e) {
    return std::unexpected(std::move(e));
}

}  // namespace confine
