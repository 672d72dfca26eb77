#include "loader/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/text.h"

namespace confine {
namespace {

// What [limits] needs: memory.max and memory.swap.max, pids.max, cpu.max.
constexpr const char* kControllers[] = {"memory", "pids", "cpu"};
constexpr const char* kUsualMount = "/sys/fs/cgroup";

Result<void> write_file(const std::string& path, const std::string& value) {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
        return fail(Error::sys("cgroup: writing '" + value + "' to " + path));
    return {};
}

// Whether NAME is a word of a space-separated list (cgroup.controllers).
bool listed(const std::string& list, std::string_view name) {
    return std::ranges::count(split(list), name) > 0;
}

// The value of KEY in a flat keyed file ("oom_kill 3" lines); 0 if absent.
uint64_t keyed(const std::string& path, std::string_view key) {
    return keyed_value(read_all(path), key).value_or(0);
}

// Makes CONTROLLER available to DIR's children. cgroup v2 hands a
// controller to a cgroup's children only through that cgroup's
// cgroup.subtree_control, and only if the cgroup has it itself, so every
// level from the root down enables it in turn. Such a level must hold no
// processes (the no-internal-process rule; the root is exempt): confine's
// parents only ever hold cgroups.
Result<void> delegate(const std::string& root, const std::string& dir, const char* controller) {
    // ROOT, then each cgroup on the way down, DIR included.
    for (size_t end = root.size();; end = dir.find('/', end + 1)) {
        std::string control = dir.substr(0, end) + "/cgroup.subtree_control";
        if (!listed(read_all(control), controller))
            if (auto r = write_file(control, std::string("+") + controller); !r) return r;
        if (end >= dir.size()) return {};
    }
}

bool populated(const std::string& events) {
    return keyed_value(read_all(events), "populated").value_or(0) != 0;  // unreadable: the cgroup is gone
}

}  // namespace

bool has_children(const std::string& path) {
    return keyed_value(read_all(path + "/cgroup.stat"), "nr_descendants").value_or(1) != 0;  // unreadable: look
}

std::optional<std::string> cgroup2_root_in(std::string_view mountinfo) {
    const std::vector<Mount> mounts = mounts_in(mountinfo);
    auto cgroup2_root = [](const Mount& m) { return m.root == "/" && m.type == "cgroup2"; };
    // Later lines are later mounts: one at the same point or above hides it.
    for (size_t i = 0; i < mounts.size(); i++)
        if (cgroup2_root(mounts[i]) &&
            std::none_of(mounts.begin() + static_cast<std::ptrdiff_t>(i) + 1, mounts.end(),
                         [&](const Mount& m) { return policy::covers(m.point, mounts[i].point); }))
            return mounts[i].point;
    return std::nullopt;
}

// Found once per process (a start asks three times). Usually at
// /sys/fs/cgroup, with the hierarchy's root there: the root cgroup alone has
// no cgroup.type. Otherwise from mountinfo, which costs every start more:
// hybrid systems mount cgroup v2 at /sys/fs/cgroup/unified, beside v1
// controllers, and a cgroup namespace's root has a cgroup.type.
Result<std::string> cgroup2_mount() {
    static std::string found;
    if (!found.empty()) return found;
    struct statfs fs {};
    if (statfs(kUsualMount, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC &&
        access((std::string(kUsualMount) + "/cgroup.type").c_str(), F_OK) != 0 && errno == ENOENT)
        return found = kUsualMount;
    if (auto root = cgroup2_root_in(read_all("/proc/self/mountinfo"))) return found = *root;
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
    std::string dir = sub.empty() ? path : path + "/" + sub;
    // Best effort: a job whose limit needs a controller that couldn't be
    // enabled fails in set_limits(), with the reason. A controller DIR
    // already passes to its children, every level above it passes too.
    const std::string enabled = read_all(dir + "/cgroup.subtree_control");
    for (const char* c : kControllers)
        if (!listed(enabled, c)) (void)delegate(*root, dir, c);
    return dir;
}

Result<JobCgroup> JobCgroup::create(const std::string& parent, const std::string& name) {
    const std::string path = parent + "/" + name;
    if (mkdir(path.c_str(), 0755) != 0) {
        if (errno == EEXIST)
            return fail(Error::sys("cgroup: mkdir " + path).hint("Another job has this id; pick another --job-id"));
        return fail(Error::sys("cgroup: mkdir " + path));
    }
    // Whose job it is: a later confine kills the job once this process is
    // gone (collect_orphan_jobs). Set before any process can enter.
    const std::string owner = process_identity(getpid());
    if (setxattr(path.c_str(), kOwnerXattr, owner.data(), owner.size(), 0) != 0) {
        rmdir(path.c_str());
        return fail(Error::sys("cgroup: setting " + std::string(kOwnerXattr) + " on " + path));
    }
    auto cg = adopt(path);
    if (!cg) rmdir(path.c_str());
    return cg;
}

std::string process_identity(pid_t pid) {
    // /proc/PID/stat's 22nd field, the start time, tells a reused pid apart.
    const std::string stat = read_all(fmt::format("/proc/{}/stat", pid));
    size_t at = stat.rfind(')');
    if (at == std::string::npos) return "";
    const std::vector<std::string_view> fields = split(std::string_view(stat).substr(at + 1));  // from the 3rd
    return fields.size() >= 20 ? fmt::format("{}:{}", pid, fields[19]) : "";
}

bool owner_alive(const std::string& path) {
    char buf[64];
    ssize_t n = getxattr(path.c_str(), kOwnerXattr, buf, sizeof buf - 1);
    // None: a cgroup mkdir'd a moment ago, not yet marked; its maker lives.
    if (n < 0) return true;
    std::string owner(buf, static_cast<size_t>(n));
    pid_t pid = static_cast<pid_t>(strtol(owner.c_str(), nullptr, 10));
    return pid > 0 && process_identity(pid) == owner;
}

Result<JobCgroup> JobCgroup::adopt(const std::string& path) {
    JobCgroup cg;
    cg.fd_.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    if (!cg.fd_ || fstat(cg.fd_.get(), &st) != 0) return fail(Error::sys("cgroup: opening " + path));
    cg.path_ = path;
    // On cgroup v2 the directory's inode number is the cgroup id, the value
    // bpf_get_current_cgroup_id() returns inside it.
    cg.id_ = st.st_ino;
    return cg;
}

Result<void> JobCgroup::set_limits(const policy::CompiledLimits& l) {
    struct Setting {
        const char* key;  // in [limits]
        const char* controller;
        const char* file;
        std::optional<std::string> value;
        const char* hint;  // when the file is missing
    };
    auto number = [](const std::optional<uint64_t>& v) { return v ? std::optional(std::to_string(*v)) : std::nullopt; };
    const Setting settings[] = {
        {"memory", "memory", "memory.max", number(l.memory), nullptr},
        {"swap", "memory", "memory.swap.max", number(l.swap),
         "This kernel doesn't account swap (built without CONFIG_SWAP, or booted with swapaccount=0)"},
        {"pids", "pids", "pids.max", number(l.pids), nullptr},
        {"cpu", "cpu", "cpu.max",
         l.cpu_quota_us ? std::optional(fmt::format("{} {}", *l.cpu_quota_us, policy::kCpuPeriodUs)) : std::nullopt,
         "This kernel has no CPU bandwidth control (CONFIG_CFS_BANDWIDTH)"},
    };
    std::string controllers = read_all(path_ + "/cgroup.controllers");
    for (const Setting& s : settings) {
        if (!s.value) continue;
        const std::string why = fmt::format(", so [limits] {} can't be enforced; the job was not started", s.key);
        const std::string instead = fmt::format("or set {} = \"max\" in [limits] to run without it", s.key);
        if (!listed(controllers, s.controller)) {
            auto root = cgroup2_mount();
            if (!root) return fail(root.error());
            if (!listed(read_all(*root + "/cgroup.controllers"), s.controller))
                return fail(Error::msg(fmt::format("cgroup: the kernel offers cgroup v2 no {} controller (it is not in "
                                                   "{}/cgroup.controllers){}",
                                                   s.controller, *root, why))
                                .hint(fmt::format("Boot a kernel that has it, without cgroup_disable={} and not "
                                                  "bound to a cgroup v1 hierarchy, {}",
                                                  s.controller, instead)));
            if (auto r = delegate(*root, path_.substr(0, path_.rfind('/')), s.controller); !r) {
                Error e = r.error();
                e.message += why;
                // EBUSY, or EOPNOTSUPP once threaded controllers are on.
                if (e.err == EBUSY || e.err == EOPNOTSUPP)
                    return fail(
                        std::move(e).hint("cgroup v2 passes a controller down only from a cgroup that holds "
                                          "no processes itself: move them out of that cgroup (see its "
                                          "cgroup.procs), " +
                                          instead));
                return fail(std::move(e).hint("Enable it there by hand, " + instead));
            }
            controllers = read_all(path_ + "/cgroup.controllers");
            if (!listed(controllers, s.controller))
                return fail(Error::msg(fmt::format("cgroup: the {} controller is not in {}/cgroup.controllers although "
                                                   "its parents enable it{}",
                                                   s.controller, path_, why))
                                .hint("Check the cgroups above it (cgroup.type, cgroup.subtree_control), " + instead));
        }
        std::string file = path_ + "/" + s.file;
        Fd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
        if (!fd) {
            Error e = Error::sys("cgroup: opening " + file);
            e.message += why;
            return fail(std::move(e).hint(s.hint && e.err == ENOENT ? std::string(s.hint) + ": " + instead
                                                                    : "Check the kernel's cgroup support, " + instead));
        }
        if (::write(fd.get(), s.value->data(), s.value->size()) != static_cast<ssize_t>(s.value->size())) {
            Error e = Error::sys(fmt::format("cgroup: writing '{}' to {}", *s.value, file));
            e.message += why;
            return fail(std::move(e).hint("Pick another value, " + instead));
        }
    }
    limits_ = l;
    return {};
}

Result<void> JobCgroup::kill() {
    return write_file(path_ + "/cgroup.kill", "1");
}

Result<void> JobCgroup::kill_and_remove() {
    if (path_.empty()) return {};
    if (auto r = kill(); !r) {
        if (access(path_.c_str(), F_OK) != 0 && errno == ENOENT) {
            path_.clear();
            return {};
        }
        return r;
    }
    // The job is over: what its limits stopped is final.
    if (limits_.memory) hits_.memory = keyed(path_ + "/memory.events", "oom_kill");
    if (limits_.pids) hits_.pids = keyed(path_ + "/pids.events", "max");
    if (limits_.cpu_quota_us) hits_.cpu = keyed(path_ + "/cpu.stat", "nr_throttled");

    // cgroup.events signals POLLPRI when "populated" changes.
    std::string events = path_ + "/cgroup.events";
    Fd ev(::open(events.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ev && errno != ENOENT)  // ENOENT: the cgroup is gone, nothing to wait for
        return fail(Error::sys("cgroup: opening " + events + " to wait for the job's processes to end"));
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

JobCgroup::JobCgroup(JobCgroup&& o) noexcept
    : path_(std::exchange(o.path_, std::string())),
      fd_(std::move(o.fd_)),
      id_(std::exchange(o.id_, 0)),
      limits_(o.limits_),
      hits_(o.hits_) {}

JobCgroup::~JobCgroup() {
    if (!path_.empty()) (void)kill_and_remove();
}

}  // namespace confine
