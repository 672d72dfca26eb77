#include "loader/wire.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace confine::wire {
namespace {

void put(std::string& out, std::string_view key, std::string_view value) {
    out.append(key).push_back('\0');
    out.append(value).push_back('\0');
}

}  // namespace

std::string encode(const Request& r) {
    std::string out(kVersion);
    out.push_back('\0');
    for (auto [key, value] : {std::pair<std::string_view, const std::string&>{"policy", r.policy},
                              {"policy_name", r.policy_name},
                              {"mode", r.mode},
                              {"job_id", r.job_id},
                              {"timeout", r.timeout},
                              {"user", r.user},
                              {"seed_home", r.seed_home},
                              {"audit_log", r.audit_log},
                              {"on_audit_error", r.on_audit_error}})
        if (!value.empty()) put(out, key, value);
    if (r.print_policy) put(out, "print_policy", "1");
    for (const std::string& a : r.command) put(out, "arg", a);
    for (const std::string& e : r.env) put(out, "env", e);
    return out;
}

Result<Request> decode(std::string_view in) {
    auto bad = [](const std::string& what) { return fail(Error::msg("request: " + what)); };
    if (in.size() > kMaxRequest) return bad(fmt::format("{} bytes, more than {}", in.size(), kMaxRequest));
    std::vector<std::string_view> fields;
    while (!in.empty()) {
        size_t end = in.find('\0');
        if (end == std::string_view::npos) return bad("the last field has no terminating NUL");
        fields.push_back(in.substr(0, end));
        in.remove_prefix(end + 1);
    }
    if (fields.empty() || fields[0] != kVersion)
        return bad(fmt::format("protocol '{}' is not {}", fields.empty() ? "" : std::string(fields[0].substr(0, 32)),
                               kVersion));
    if (fields.size() % 2 != 1) return bad("a key has no value");
    Request r;
    std::vector<std::string_view> seen;
    for (size_t i = 1; i < fields.size(); i += 2) {
        std::string_view key = fields[i], value = fields[i + 1];
        if (key == "arg" || key == "env") {
            auto& list = key == "arg" ? r.command : r.env;
            if (list.size() == kMaxItems) return bad(fmt::format("more than {} {} fields", kMaxItems, key));
            if (key == "env" && value.find('=') == std::string_view::npos) return bad("env entry without '='");
            list.emplace_back(value);
            continue;
        }
        if (std::find(seen.begin(), seen.end(), key) != seen.end())
            return bad(fmt::format("field '{}' given twice", key.substr(0, 32)));
        seen.push_back(key);
        if (key == "policy")
            r.policy = value;
        else if (key == "policy_name")
            r.policy_name = value;
        else if (key == "mode")
            r.mode = value;
        else if (key == "job_id")
            r.job_id = value;
        else if (key == "timeout")
            r.timeout = value;
        else if (key == "user")
            r.user = value;
        else if (key == "seed_home")
            r.seed_home = value;
        else if (key == "audit_log")
            r.audit_log = value;
        else if (key == "on_audit_error")
            r.on_audit_error = value;
        else if (key == "print_policy" && value == "1")
            r.print_policy = true;
        else
            return bad(fmt::format("unknown field '{}'", key.substr(0, 32)));
    }
    if (!r.mode.empty() && r.mode != "enforce" && r.mode != "audit")
        return bad(fmt::format("mode '{}' is not enforce or audit", r.mode.substr(0, 32)));
    if (!r.on_audit_error.empty() && r.on_audit_error != "kill" && r.on_audit_error != "continue")
        return bad(fmt::format("on_audit_error '{}' is not kill or continue", r.on_audit_error.substr(0, 32)));
    if (r.command.empty() && !r.print_policy) return bad("no command");
    return r;
}

Result<void> send(int sock, Type type, std::string_view payload, const std::vector<int>& fds, bool wait) {
    std::string msg(1, static_cast<char>(type));
    msg.append(payload);
    iovec iov{msg.data(), msg.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kRequestFds)]{};
    if (!fds.empty()) {
        if (fds.size() > kRequestFds) return fail(Error::msg("wire: too many fds for one message"));
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    for (;;) {
        if (sendmsg(sock, &mh, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT)) >= 0) return {};
        if (errno != EINTR) return fail(Error::sys("wire: sending a message"));
    }
}

Result<std::optional<Message>> receive(int sock) {
    // Not zeroed: the kernel writes the n bytes it reads. Zeroing all of it,
    // and faulting in each of its pages, cost every job started through the
    // daemon some 0.7 ms (icount), in its worker and in its client.
    constexpr size_t kRoom = kMaxRequest + 2;
    std::unique_ptr<char[]> buf(new char[kRoom]);
    iovec iov{buf.get(), kRoom};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kRequestFds)]{};
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0)
        if (errno != EINTR) return fail(Error::sys("wire: receiving a message"));
    Message m{};
    // Every fd that arrived is owned, so none leaks whatever is wrong below.
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                m.fds.emplace_back(fd);
            }
    if (n == 0) return std::nullopt;
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        return fail(Error::msg(fmt::format("wire: a message of more than {} bytes or {} fds", kMaxRequest + 1,
                                           static_cast<int>(kRequestFds))));
    m.type = static_cast<Type>(buf[0]);
    m.payload.assign(buf.get() + 1, static_cast<size_t>(n) - 1);
    return m;
}

}  // namespace confine::wire
