// The BPF programs and maps of this build, loaded once per machine and
// pinned in bpffs, shared by every job (see docs/design.md).
#pragma once

#include <bpf/libbpf.h>

#include <array>
#include <string>

#include "common/error.h"
#include "common/fd.h"

namespace confine {

// The shared maps of bpf/*.bpf.c: a typo is a compile error, not fd -1.
enum class Map { Jobs, Rings, FsRules, FsNames, NetRules, JobKeys, Proxies, Count };
// The map's name in the BPF objects and in its pin.
const char* map_name(Map m);

class BpfObjects {
public:
    // Reuses this build's pinned objects, or loads and pins them on first
    // use and attaches the cgroup programs to jobs_parent(). Serialized by a
    // lock on the pin directory.
    static Result<BpfObjects> open();

    int map_fd(Map m) const { return maps_[static_cast<size_t>(m)].get(); }
    // This build's pin directory: <bpffs>/confine/<tag>.
    const std::string& pin_dir() const { return dir_; }
    // The cgroup this build's jobs are created in: <cgroup2>/confine/<tag>.
    // Its programs are attached here once, and every job cgroup below
    // inherits them, so starting a job attaches nothing and never re-patches
    // a hook's trampoline.
    const std::string& jobs_parent() const { return parent_; }
    // The cgroup each job's filtering proxy gets a cgroup in:
    // <cgroup2>/confine/<tag>.proxies, with bpf/proxy.bpf.c attached.
    const std::string& proxies_parent() const { return proxies_parent_; }

private:
    std::string dir_, parent_, proxies_parent_;
    std::array<Fd, static_cast<size_t>(Map::Count)> maps_;
};

// bpffs root; confine's objects live below <root>/confine/<build tag>/.
inline constexpr const char* kBpffs = "/sys/fs/bpf";

}  // namespace confine
