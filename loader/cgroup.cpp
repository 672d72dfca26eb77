#include "loader/cgroup.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

namespace confine {
namespace {

Result<void> write_file(const std::string& path, const std::string& value) {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
        return fail(Error::sys("cgroup: writing '" + value + "' to " + path));
    return {};
}

bool populated(const std::string& events) {
    std::ifstream in(events);
    std::string key, value;
    while (in >> key >> value)
        if (key == "populated") return value != "0";
    return false;  // the cgroup is gone
}

}  // namespace

Result<std::string> cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // "36 25 0:31 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw"
        auto dash = line.find(" - ");
        if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
        std::istringstream fields(line);
        std::string id, parent, dev, root, mount;
        fields >> id >> parent >> dev >> root >> mount;
        if (root == "/") return mount;
    }
    return fail(Error::msg("cgroup: no cgroup v2 hierarchy is mounted")
                    .hint("Mount it: mount -t cgroup2 none /sys/fs/cgroup (confine needs cgroup v2)"));
}

Result<std::string> confine_cgroup(const std::string& sub) {
    auto root = cgroup2_mount();
    if (!root) return fail(root.error());
    std::string path = *root + "/confine";
    for (const std::string& dir : {path, path + "/" + sub}) {
        if (dir.ends_with("/")) continue;
        if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return fail(Error::sys("cgroup: mkdir " + dir).hint("confine must run as root"));
    }
    return sub.empty() ? path : path + "/" + sub;
}

Result<JobCgroup> JobCgroup::create(const std::string& parent, const std::string& name) {
    JobCgroup cg;
    cg.path_ = parent + "/" + name;
    if (mkdir(cg.path_.c_str(), 0755) != 0) {
        if (errno == EEXIST)
            return fail(Error::sys("cgroup: mkdir " + cg.path_)
                            .hint("Another job has this id; pick another --job-id"));
        return fail(Error::sys("cgroup: mkdir " + cg.path_));
    }
    cg.fd_.reset(::open(cg.path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    if (!cg.fd_ || fstat(cg.fd_.get(), &st) != 0) {
        Error e = Error::sys("cgroup: opening " + cg.path_);
        rmdir(cg.path_.c_str());
        return fail(e);
    }
    // On cgroup v2 the directory's inode number is the cgroup id, the value
    // bpf_get_current_cgroup_id() returns inside it.
    cg.id_ = st.st_ino;
    return cg;
}

Result<void> JobCgroup::kill_and_remove() {
    if (path_.empty()) return {};
    if (auto r = write_file(path_ + "/cgroup.kill", "1"); !r) return r;

    // cgroup.events signals POLLPRI when "populated" changes.
    std::string events = path_ + "/cgroup.events";
    Fd ev(::open(events.c_str(), O_RDONLY | O_CLOEXEC));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (populated(events)) {
        if (std::chrono::steady_clock::now() > deadline)
            return fail(Error::msg("cgroup: " + path_ + " still has processes 30 s after cgroup.kill")
                            .hint("Check for tasks stuck in uninterruptible sleep (ps -eo pid,stat,cmd)"));
        pollfd p{ev.get(), POLLPRI, 0};
        poll(&p, 1, 100);
        char buf[256];
        pread(ev.get(), buf, sizeof buf, 0);  // re-arms the notification
    }
    fd_.reset();
    if (rmdir(path_.c_str()) != 0 && errno != ENOENT) return fail(Error::sys("cgroup: rmdir " + path_));
    path_.clear();
    return {};
}

JobCgroup::~JobCgroup() {
    if (!path_.empty()) (void)kill_and_remove();
}

}  // namespace confine
