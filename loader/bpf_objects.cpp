#include "loader/bpf_objects.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cstdarg>
#include <filesystem>
#include <map>
#include <memory>

#include "fs.skel.h"
#include "loader/cgroup.h"
#include "net.skel.h"
#include "proc.skel.h"
#include "proxy.skel.h"

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

// Which parent cgroup a feature's cgroup programs are attached to.
enum class Parent { Jobs, Proxies };

struct Feature {
    const char* name;
    const void* (*elf)(size_t*);
    Parent parent = Parent::Jobs;
};
// Every object whose programs attach to cgroups.
const Feature kFeatures[] = {
    {"fs", fs_bpf__elf_bytes},
    {"net", net_bpf__elf_bytes},
    {"proc", proc_bpf__elf_bytes},
    {"proxy", proxy_bpf__elf_bytes, Parent::Proxies},
};
const char* const kMapNames[] = {"jobs", "rings", "fs_rules", "net_rules", "job_keys", "proxies"};
static_assert(std::size(kMapNames) == static_cast<size_t>(Map::Count));

// The proxies' parent cgroup is the jobs' one's sibling: <tag> and <tag>.proxies.
constexpr std::string_view kProxiesSuffix = ".proxies";

// Pins are per build: objects from another confine version keep serving
// their own jobs and never meet this build's maps.
std::string build_tag() {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (const Feature& f : kFeatures) {
        size_t n = 0;
        auto* p = static_cast<const unsigned char*>(f.elf(&n));
        for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    }
    char buf[17];
    snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

using ObjectPtr = std::unique_ptr<bpf_object, decltype(&bpf_object__close)>;

Result<void> ensure_dir(const std::string& path) {
    if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
    return fail(Error::sys("bpf: mkdir " + path));
}

Error with_log(Error e) {
    if (!g_log.empty()) e.message += "\nlibbpf said:\n" + g_log;
    return e;
}

// A program named NAME_pre_6_3 stands in for NAME on kernels before 6.3,
// whose hooks lack the struct mnt_idmap argument; exactly one of the two
// loads.
constexpr std::string_view kPre63 = "_pre_6_3";

// Hooks that only newer kernels have, each with the program that covers
// its path on older ones.
struct OptionalHook {
    std::string_view program, btf_func;
};
constexpr OptionalHook kOptionalHooks[] = {
    // 6.8 ("lsm: new security_file_ioctl_compat() hook") split 32-bit
    // ioctls off file_ioctl; before, file_ioctl sees them.
    {"confine_file_ioctl_compat", "bpf_lsm_file_ioctl_compat"},
    {"confine_fs_file_ioctl_compat", "bpf_lsm_file_ioctl_compat"},
    // 6.17 ("fs: introduce file_getattr and file_setattr syscalls").
    {"confine_inode_file_setattr", "bpf_lsm_inode_file_setattr"},
    // 6.2 moved POSIX ACLs off the xattr hooks onto their own; before,
    // inode_setxattr/inode_removexattr see them.
    {"confine_inode_set_acl", "bpf_lsm_inode_set_acl"},
    {"confine_inode_remove_acl", "bpf_lsm_inode_remove_acl"},
};

// The kernel's BTF, parsed once: it takes tens of milliseconds under TCG.
// Only a load needs it; jobs that find the pins ready never parse it.
bool kernel_has(const char* name, int kind) {
    static const std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(), btf__free);
    return vmlinux && btf__find_by_name_kind(vmlinux.get(), name, kind) >= 0;
}

bool kernel_has_mnt_idmap() {
    return kernel_has("mnt_idmap", BTF_KIND_STRUCT);
}

// Whether `prog` belongs on this kernel.
bool belongs_here(bpf_object* obj, bpf_program* prog) {
    std::string_view name = bpf_program__name(prog);
    for (const OptionalHook& h : kOptionalHooks)
        if (name == h.program) return kernel_has(std::string(h.btf_func).c_str(), BTF_KIND_FUNC);
    if (name.ends_with(kPre63)) return !kernel_has_mnt_idmap();
    std::string pre = std::string(name) + std::string(kPre63);
    return !bpf_object__find_program_by_name(obj, pre.c_str()) || kernel_has_mnt_idmap();
}

// Global lsm programs are attached once, at load, through a pinned link: they
// serve every job and outlive any one confine process.
bool is_global(bpf_program* prog) {
    return bpf_program__expected_attach_type(prog) == BPF_LSM_MAC;
}

std::string pin_path(const std::string& dir, bpf_program* prog) {
    return dir + "/" + (is_global(prog) ? "link_" : "") + bpf_program__name(prog);
}

// Pinned last, once every program of the feature that belongs on this
// kernel is pinned: a load interrupted halfway leaves no marker, and is done
// again by the next confine.
std::string ready_marker(const std::string& dir, const char* feature) {
    return dir + "/" + feature + "_ready";
}

// Pins under a temporary name, then renames over `pin`: an old object's pin
// (and with a link's pin, its attachment) goes only once the new one is in
// place, so a reload leaves no moment without enforcement.
template <class PinTo>
int replace_pin(const std::string& pin, PinTo pin_to) {
    std::string tmp = pin + "_new";  // bpffs refuses names with a '.'
    unlink(tmp.c_str());
    if (int err = pin_to(tmp.c_str())) return err;
    return rename(tmp.c_str(), pin.c_str()) == 0 ? 0 : -errno;
}

Result<void> load_and_pin(bpf_object* obj, const char* name, const std::string& dir) {
    bpf_program* prog;
    bpf_object__for_each_program(prog, obj) bpf_program__set_autoload(prog, belongs_here(obj, prog));
    // Maps are created and pinned by name, or reused if already pinned.
    if (int err = bpf_object__load(obj); err)
        return fail(with_log(Error::sys(std::string("bpf: loading object ") + name, -err)));
    bpf_program* marked = nullptr;
    bpf_object__for_each_program(prog, obj) {
        if (!bpf_program__autoload(prog)) continue;
        std::string pin = pin_path(dir, prog);
        int err;
        if (is_global(prog)) {
            bpf_link* link = bpf_program__attach_lsm(prog);
            if (!link) return fail(with_log(Error::sys(std::string("bpf: attaching ") + bpf_program__name(prog))));
            err = replace_pin(pin, [&](const char* at) { return bpf_link__pin(link, at); });
            bpf_link__disconnect(link);  // the pin keeps it attached
            bpf_link__destroy(link);
        } else {
            err = replace_pin(pin, [&](const char* at) { return bpf_program__pin(prog, at); });
        }
        if (err) return fail(with_log(Error::sys("bpf: pinning " + pin, -err)));
        marked = prog;
    }
    // The marker is a second pin of a program: bpffs holds nothing else.
    std::string marker = ready_marker(dir, name);
    if (!marked || replace_pin(marker, [&](const char* at) { return bpf_program__pin(marked, at); }) != 0)
        return fail(with_log(Error::sys("bpf: pinning " + marker)));
    return {};
}

uint32_t prog_id(int prog_fd) {
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    return bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0 ? info.id : 0;
}

// The ids of the programs attached to the cgroup with `type`. A failed
// query is an error, never "none": attach_to_parent would attach twice, and
// detach_stale would leave a stale program running.
Result<std::vector<uint32_t>> attached_ids(int cgroup_fd, bpf_attach_type type) {
    // For lsm_cgroup the kernel returns ids only with their attach flags.
    uint32_t ids[64], flags[64];
    LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = 64, .prog_attach_flags = flags);
    if (bpf_prog_query_opts(cgroup_fd, type, &q) != 0)
        return fail(Error::sys(fmt::format("bpf: querying the programs attached to confine's parent cgroup "
                                           "(attach type {})",
                                           static_cast<int>(type)))
                        .hint("ENOSPC means more than 64 are attached: remove the build's cgroup under "
                              "/sys/fs/cgroup/confine once no job runs"));
    return std::vector<uint32_t>(ids, ids + q.prog_cnt);
}

// Attaches a cgroup program to a parent cgroup, unless it is already
// (attaching it twice fails with EINVAL, like a full hook budget would).
// The attachment lives as long as that cgroup, whatever becomes of confine.
Result<void> attach_to_parent(int prog_fd, const char* name, bpf_attach_type type, int cgroup_fd) {
    auto attached = attached_ids(cgroup_fd, type);
    if (!attached) return fail(attached.error());
    if (std::ranges::count(*attached, prog_id(prog_fd)) ||
        bpf_prog_attach(prog_fd, cgroup_fd, type, BPF_F_ALLOW_MULTI) == 0)
        return {};
    Error e = Error::sys(std::string("bpf: attaching program ") + name + " to confine's parent cgroup");
    if (errno == EINVAL)
        return fail(
            std::move(e).hint("The kernel may have no free lsm_cgroup hook slot: at most 10 distinct hooks "
                              "can carry lsm_cgroup programs machine-wide"));
    return fail(e);
}

// Detaches from a parent cgroup every program of these types that
// is not in `keep`: what a load interrupted after attaching left there. Its
// programs would run next to their replacements, with globals of their own.
Result<void> detach_stale(int cgroup_fd, const std::map<bpf_attach_type, std::vector<uint32_t>>& keep) {
    for (const auto& [type, ids] : keep) {
        auto attached = attached_ids(cgroup_fd, type);
        if (!attached) return fail(attached.error());
        for (uint32_t id : *attached) {
            if (std::ranges::count(ids, id)) continue;
            Fd fd(bpf_prog_get_fd_by_id(id));
            if (!fd || bpf_prog_detach2(fd.get(), cgroup_fd, type) != 0)
                return fail(Error::sys(fmt::format("bpf: detaching stale program {} from confine's parent cgroup", id))
                                .hint("Remove the build's cgroup under /sys/fs/cgroup/confine once no job runs"));
        }
    }
    return {};
}

// Opens one feature object, loading and pinning it unless its ready marker
// is pinned, and attaches its cgroup programs to `cgroup_fd`. Adds their ids
// to `ids`; sets `loaded` if it loaded.
Result<void> open_feature(const Feature& f, const std::string& dir, int cgroup_fd,
                          std::map<bpf_attach_type, std::vector<uint32_t>>& ids, bool& loaded) {
    size_t size = 0;
    const void* bytes = f.elf(&size);
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = f.name, .pin_root_path = dir.c_str());
    ObjectPtr obj(bpf_object__open_mem(bytes, size, &opts), bpf_object__close);
    if (!obj) return fail(with_log(Error::sys(std::string("bpf: opening object ") + f.name)));

    if (access(ready_marker(dir, f.name).c_str(), F_OK) != 0) {
        if (auto r = load_and_pin(obj.get(), f.name, dir); !r) return r;
        loaded = true;
    }

    // Only global programs vary with the kernel: every cgroup program must
    // be pinned.
    bpf_program* prog;
    bpf_object__for_each_program(prog, obj.get()) {
        if (is_global(prog)) continue;
        std::string pin = pin_path(dir, prog);
        Fd fd(bpf_obj_get(pin.c_str()));
        if (!fd) return fail(Error::sys("bpf: opening pinned program " + pin));
        bpf_attach_type type = bpf_program__expected_attach_type(prog);
        if (auto r = attach_to_parent(fd.get(), bpf_program__name(prog), type, cgroup_fd); !r) return r;
        ids[type].push_back(prog_id(fd.get()));
    }
    return {};
}

// Removes what other builds left once no job uses it: their jobs' and
// proxies' parent cgroups (their programs detach when they are freed) and
// their pins (unpinning a global program's link detaches it). Called with
// the lock held.
void collect_other_builds(const std::string& top, const std::string& keep, const std::string& cgroups) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(top, ec)) {
        std::string dir = entry.path();
        if (dir == keep || !entry.is_directory(ec)) continue;
        Fd jobs(bpf_obj_get((dir + "/jobs").c_str()));
        uint64_t key;
        if (jobs && bpf_map_get_next_key(jobs.get(), nullptr, &key) == 0) continue;  // still in use
        std::string parent = cgroups + "/" + entry.path().filename().string();
        if (rmdir(parent.c_str()) != 0 && errno != ENOENT) continue;  // a job cgroup is left
        if (rmdir((parent + std::string(kProxiesSuffix)).c_str()) != 0 && errno != ENOENT) continue;
        for (const auto& pin : std::filesystem::directory_iterator(dir, ec)) unlink(pin.path().c_str());
        rmdir(dir.c_str());
    }
}

}  // namespace

void set_libbpf_verbose(bool verbose) {
    g_verbose = verbose;
    libbpf_set_print(libbpf_print);
}

Result<BpfObjects> BpfObjects::open() {
    struct statfs fs {};
    if (statfs(kBpffs, &fs) != 0 || fs.f_type != BPF_FS_MAGIC)
        return fail(Error::msg(std::string("bpf: no bpffs mounted at ") + kBpffs)
                        .hint(std::string("Mount it: mount -t bpf bpf ") + kBpffs));
    std::string top = std::string(kBpffs) + "/confine";
    if (auto r = ensure_dir(top); !r) return fail(r.error());

    // One loader at a time; jobs that find the pins ready only read them.
    Fd lock(::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!lock || flock(lock.get(), LOCK_EX) != 0) return fail(Error::sys("bpf: locking " + top));

    BpfObjects o;
    std::string tag = build_tag();
    o.dir_ = top + "/" + tag;
    auto cgroups = confine_cgroup();
    auto parent = cgroups ? confine_cgroup(tag) : cgroups;
    auto proxies = parent ? confine_cgroup(tag + std::string(kProxiesSuffix)) : parent;
    if (!proxies) return fail(proxies.error());
    o.parent_ = *parent;
    o.proxies_parent_ = *proxies;
    collect_other_builds(top, o.dir_, *cgroups);
    if (auto r = ensure_dir(o.dir_); !r) return fail(r.error());
    struct Attached {
        Fd cgroup;
        std::map<bpf_attach_type, std::vector<uint32_t>> ids;
    };
    std::map<Parent, Attached> parents;
    for (auto [which, path] : {std::pair{Parent::Jobs, o.parent_}, {Parent::Proxies, o.proxies_parent_}}) {
        parents[which].cgroup.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!parents[which].cgroup) return fail(Error::sys("cgroup: opening " + path));
    }
    bool loaded = false;
    for (const Feature& f : kFeatures) {
        Attached& a = parents[f.parent];
        if (auto r = open_feature(f, o.dir_, a.cgroup.get(), a.ids, loaded); !r) return fail(r.error());
    }
    if (loaded)
        for (auto& [which, a] : parents)
            if (auto r = detach_stale(a.cgroup.get(), a.ids); !r) return fail(r.error());
    for (size_t i = 0; i < o.maps_.size(); i++) {
        std::string pin = o.dir_ + "/" + kMapNames[i];
        o.maps_[i].reset(bpf_obj_get(pin.c_str()));
        if (!o.maps_[i]) return fail(Error::sys("bpf: opening pinned map " + pin));
    }
    return o;
}

const char* map_name(Map m) {
    return kMapNames[static_cast<size_t>(m)];
}

}  // namespace confine
