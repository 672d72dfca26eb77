// Reading and splitting the small files a start reads (cgroup and proc
// files, the LSM list) without iostreams. A process's first stream sets up
// libstdc++'s classic locale, every facet for char and wchar_t: under
// icount, 400 µs in a small program, and 260 µs of a confine start.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/fd.h"

namespace confine {

// All of FD from where it is, or the errno of the read that failed: a
// policy cut short by a read error must never pass for a whole one.
inline std::expected<std::string, int> read_fd(int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::unexpected(errno);
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

// PATH's whole text; errors name WHAT ("policy: reading /x: Is a directory").
inline Result<std::string> read_file(const std::string& path, const std::string& what) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return fail(Error::sys(what + " " + path));
    auto text = read_fd(fd.get());
    if (!text) return fail(Error::sys(what + " " + path, text.error()));
    return std::move(*text);
}

// "" if PATH can't be read, whole: a cgroup or proc file, whose callers
// give an unreadable one a meaning of its own.
inline std::string read_all(const std::string& path) {
    return read_file(path, "").value_or(std::string());
}

// The pieces of TEXT between any of SEPARATORS, empty ones left out.
inline std::vector<std::string_view> split(std::string_view text, std::string_view separators = " \t\n") {
    std::vector<std::string_view> out;
    for (size_t b = text.find_first_not_of(separators); b != std::string_view::npos;
         b = text.find_first_not_of(separators, b)) {
        size_t e = text.find_first_of(separators, b);
        out.push_back(text.substr(b, e - b));
        b = e;
    }
    return out;
}

// The number after KEY in "key value" text (cgroup.events, memory.events,
// cgroup.stat); nullopt if KEY is missing or its value isn't a number.
inline std::optional<uint64_t> keyed_value(std::string_view text, std::string_view key) {
    const std::vector<std::string_view> w = split(text);
    for (size_t i = 0; i + 1 < w.size(); i += 2) {
        if (w[i] != key) continue;
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(w[i + 1].data(), w[i + 1].data() + w[i + 1].size(), v);
        if (ec != std::errc() || end != w[i + 1].data() + w[i + 1].size()) return std::nullopt;
        return v;
    }
    return std::nullopt;
}

// One line of /proc/self/mountinfo, "36 25 8:1 /sub /srv rw,... - xfs
// /dev/sda1 rw": the mount point (unescaped: the kernel writes ' ', '\t',
// '\n' and '\\' as \ and three octal digits), the root of the mount in
// its filesystem, and the filesystem type. Later lines are later mounts.
struct Mount {
    std::string point;
    std::string_view root, type;
};

inline std::vector<Mount> mounts_in(std::string_view mountinfo) {
    auto unescape = [](std::string_view s) {
        std::string out;
        auto octal = [&](size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
        for (size_t i = 0; i < s.size(); i++) {
            if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
                out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
                i += 3;
            } else {
                out += s[i];
            }
        }
        return out;
    };
    std::vector<Mount> out;
    for (std::string_view line : split(mountinfo, "\n")) {
        auto dash = line.find(" - ");
        if (dash == std::string_view::npos) continue;
        const std::vector<std::string_view> fields = split(line.substr(0, dash));  // id, parent, dev, root, point
        const std::vector<std::string_view> after = split(line.substr(dash + 3));  // type, source, options
        if (fields.size() <= 4 || after.empty()) continue;
        out.push_back({unescape(fields[4]), fields[3], after[0]});
    }
    return out;
}

}  // namespace confine
