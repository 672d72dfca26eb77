#include "loader/bpf_objects.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>

#include "fs.manifest.h"
#include "fs.skel.h"
#include "loader/cgroup.h"
#include "loader/cgroup_attach.h"
#include "loader/kernel_variants.h"
#include "loader/libbpf_log.h"
#include "net.manifest.h"
#include "net.skel.h"
#include "proc.manifest.h"
#include "proc.skel.h"
#include "proxy.manifest.h"
#include "proxy.skel.h"

namespace confine {
namespace {

// Which parent cgroup a feature's cgroup programs are attached to.
enum class Parent { Jobs, Proxies };

// A feature object opened through its skeleton, which owns it.
struct Opened {
    std::unique_ptr<void, void (*)(void*)> skel{nullptr, nullptr};
    bpf_object* obj = nullptr;
    void (*choose_programs)(void* skel) = nullptr;  // before a load only
};

template <class Skel, Skel* (*Open)(const bpf_object_open_opts*), void (*Destroy)(Skel*)>
Opened open_skeleton(const bpf_object_open_opts* opts) {
    Skel* s = Open(opts);
    if (!s) return {};
    return {{s, [](void* p) { Destroy(static_cast<Skel*>(p)); }}, s->obj, [](void* p) {
                choose_programs(*static_cast<Skel*>(p));
            }};
}

struct Feature {
    const char* name;
    Opened (*open)(const bpf_object_open_opts*);
    // From its manifest (bpf/manifest.cpp): what a confine that finds the
    // object loaded needs, without parsing its ELF.
    uint64_t hash;
    std::span<const confine_cgroup_prog> cgroup_progs;
    std::span<const char* const> global_progs;
    std::span<const char* const> shared_maps;
    Parent parent = Parent::Jobs;
};
#define CONFINE_MANIFEST(name) name##_bpf_hash, name##_bpf_cgroup_progs, name##_bpf_global_progs, name##_bpf_shared_maps
// Every object whose programs attach to cgroups.
const Feature kFeatures[] = {
    {"fs", open_skeleton<fs_bpf, fs_bpf__open_opts, fs_bpf__destroy>, CONFINE_MANIFEST(fs)},
    {"net", open_skeleton<net_bpf, net_bpf__open_opts, net_bpf__destroy>, CONFINE_MANIFEST(net)},
    {"proc", open_skeleton<proc_bpf, proc_bpf__open_opts, proc_bpf__destroy>, CONFINE_MANIFEST(proc)},
    {"proxy", open_skeleton<proxy_bpf, proxy_bpf__open_opts, proxy_bpf__destroy>, CONFINE_MANIFEST(proxy),
     Parent::Proxies},
};
#undef CONFINE_MANIFEST
const char* const kMapNames[] = {"jobs", "rings", "fs_rules", "fs_names", "net_rules", "job_keys", "proxies"};
static_assert(std::size(kMapNames) == static_cast<size_t>(Map::Count));

// The proxies' parent cgroup is the jobs' one's sibling: <tag> and <tag>.proxies.
constexpr std::string_view kProxiesSuffix = ".proxies";

// What a feature's ready marker holds (see ready_marker).
struct Ready {
    uint32_t links;                // global programs linked
    uint32_t cgroup_prog_ids[24];  // its cgroup programs' ids, in manifest order
};
static_assert(std::max({std::size(fs_bpf_cgroup_progs), std::size(net_bpf_cgroup_progs),
                        std::size(proc_bpf_cgroup_progs), std::size(proxy_bpf_cgroup_progs)}) <=
              std::extent_v<decltype(Ready::cgroup_prog_ids)>);
// Bumped with Ready's layout, which is the loader's and not in the
// objects' hashes.
constexpr uint64_t kPinFormat = 2;

// Pins are per build: objects from another confine version keep serving
// their own jobs and never meet this build's maps.
std::string build_tag() {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the objects' hashes and the pin format
    auto add = [&](uint64_t v) {
        for (int shift = 0; shift < 64; shift += 8) h = (h ^ ((v >> shift) & 0xff)) * 0x100000001b3ull;
    };
    for (const Feature& f : kFeatures) add(f.hash);
    add(kPinFormat);
    return fmt::format("{:016x}", h);
}

Result<void> ensure_dir(const std::string& path) {
    if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
    return fail(Error::sys("bpf: mkdir " + path));
}

// Global lsm programs are attached once, at load, through a pinned link: they
// serve every job and outlive any one confine process.
bool is_global(bpf_program* prog) {
    return bpf_program__expected_attach_type(prog) == BPF_LSM_MAC;
}

std::string pin_name(const char* prog, bool global) {
    return std::string(global ? "link_" : "") + prog;
}

std::string pin_path(const std::string& dir, const char* prog, bool global) {
    return dir + "/" + pin_name(prog, global);
}

// Pinned last, once every program of the feature that belongs on this
// kernel is pinned: a load interrupted halfway leaves no marker, and is done
// again by the next confine. It is a one-entry array of Ready: the number of
// global programs the load linked, which only a load knows (which hooks the
// kernel has: kernel_variants.cpp), and a start counts their link pins
// against it (loaded_whole); and the ids of the cgroup programs it pinned,
// which a start finds attached to the parent cgroup without opening each
// program's pin (open_feature).
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

Result<Ready> load_and_pin(const Opened& o, const Feature& f, const std::string& dir) {
    const char* name = f.name;
    // A marker stays only if this load finishes: one left from before would
    // vouch for pins replaced since.
    const std::string marker = ready_marker(dir, name);
    if (unlink(marker.c_str()) != 0 && errno != ENOENT) return fail(Error::sys("bpf: removing " + marker));
    o.choose_programs(o.skel.get());
    bpf_object* obj = o.obj;
    bpf_program* prog;
    // Maps are created and pinned by name, or reused if already pinned.
    if (int err = bpf_object__load(obj); err)
        return fail(with_libbpf_log(Error::sys(std::string("bpf: loading object ") + name, -err)));
    Ready ready{};
    bpf_object__for_each_program(prog, obj) {
        if (!bpf_program__autoload(prog)) continue;
        std::string pin = pin_path(dir, bpf_program__name(prog), is_global(prog));
        int err;
        if (is_global(prog)) {
            bpf_link* link = bpf_program__attach_lsm(prog);
            if (!link)
                return fail(with_libbpf_log(Error::sys(std::string("bpf: attaching ") + bpf_program__name(prog))));
            err = replace_pin(pin, [&](const char* at) { return bpf_link__pin(link, at); });
            bpf_link__disconnect(link);  // the pin keeps it attached
            bpf_link__destroy(link);
            ready.links++;
        } else {
            err = replace_pin(pin, [&](const char* at) { return bpf_program__pin(prog, at); });
        }
        if (err) return fail(with_libbpf_log(Error::sys("bpf: pinning " + pin, -err)));
    }
    for (size_t i = 0; i < f.cgroup_progs.size(); i++) {
        prog = bpf_object__find_program_by_name(obj, f.cgroup_progs[i].name);
        ready.cgroup_prog_ids[i] = prog ? prog_id(bpf_program__fd(prog)) : 0;
    }
    Fd map(bpf_map_create(BPF_MAP_TYPE_ARRAY, "confine_ready", sizeof(uint32_t), sizeof ready, 1, nullptr));
    uint32_t key = 0;
    if (!map || bpf_map_update_elem(map.get(), &key, &ready, BPF_ANY) != 0 ||
        replace_pin(marker, [&](const char* at) { return bpf_obj_pin(map.get(), at); }) != 0)
        return fail(Error::sys("bpf: pinning " + marker));
    return ready;
}

// The names in DIR, read once: a start checks some 40 pins.
std::set<std::string> names_in(const std::string& dir) {
    std::set<std::string> names;
    std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
    while (const dirent* e = d ? readdir(d.get()) : nullptr) names.insert(e->d_name);
    return names;
}

// A feature's ready marker if it is loaded, and still whole: every global
// link the marker counted still pinned (`pins`: the names in DIR).
// Unpinning a link detaches its program (only root can: the pins are 0700),
// and the marker alone would let jobs start without that hook.
std::optional<Ready> loaded_whole(const Feature& f, const std::string& dir, const std::set<std::string>& pins) {
    Fd marker(bpf_obj_get(ready_marker(dir, f.name).c_str()));
    bpf_map_info info{};
    uint32_t len = sizeof info;
    Ready ready{};
    uint32_t key = 0, pinned = 0;
    // The lookup copies the map's value size: only a map this build made.
    if (!marker || bpf_obj_get_info_by_fd(marker.get(), &info, &len) != 0 || info.type != BPF_MAP_TYPE_ARRAY ||
        info.key_size != sizeof key || info.value_size != sizeof ready || info.max_entries != 1 ||
        bpf_map_lookup_elem(marker.get(), &key, &ready) != 0)
        return std::nullopt;
    for (const char* prog : f.global_progs) pinned += pins.contains(pin_name(prog, true));
    if (pinned != ready.links) return std::nullopt;
    return ready;
}

// A feature about to be loaded makes each of its shared maps that isn't
// pinned; a feature already loaded keeps using its own. If both name one,
// the two would split a job's state (a `jobs` entry one of them never
// sees): refused, naming the map, until the build's pins are removed.
Result<void> check_shared_maps(const Feature& f, const std::string& dir,
                               const std::map<const Feature*, std::optional<Ready>>& whole) {
    for (const char* m : f.shared_maps) {
        std::string pin = dir + "/" + m;
        if (access(pin.c_str(), F_OK) == 0) continue;
        for (const auto& [other, ready] : whole) {
            if (other == &f || !ready) continue;
            if (std::ranges::any_of(other->shared_maps, [&](const char* n) { return std::string_view(n) == m; }))
                return fail(
                    Error::msg(fmt::format("bpf: the pinned map {} is gone, but the loaded {} programs still use "
                                           "theirs; loading {} would give it another",
                                           pin, other->name, f.name))
                        .hint(fmt::format("Once no job runs, remove {} (or reboot), then run again", dir)));
        }
    }
    return {};
}

// Loads and pins one feature object unless it is loaded whole (`ready`,
// its marker), and attaches its cgroup programs to `cgroup_fd` (which has
// `attached`). Adds their ids to `ids`; sets `loaded` if it loaded.
Result<void> open_feature(const Feature& f, std::optional<Ready> ready, const std::string& dir, int cgroup_fd,
                          AttachedIds& attached, AttachedIds& ids, bool& loaded) {
    if (!ready) {
        LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = dir.c_str());
        const Opened o = f.open(&opts);
        if (!o.obj) return fail(with_libbpf_log(Error::sys(std::string("bpf: opening object ") + f.name)));
        auto r = load_and_pin(o, f, dir);
        if (!r) return fail(r.error());
        ready = *r;
        loaded = true;
    }
    // Only global programs vary with the kernel: every cgroup program must
    // be pinned.
    for (size_t i = 0; i < f.cgroup_progs.size(); i++) {
        const confine_cgroup_prog& prog = f.cgroup_progs[i];
        auto id = attach_to_parent(pin_path(dir, prog.name, false), ready->cgroup_prog_ids[i], prog.type, cgroup_fd,
                                   attached);
        if (!id) return fail(id.error());
        ids[prog.type].push_back(*id);
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
        std::filesystem::remove_all(dir, ec);  // its pins, and its ring slots' lock directories
    }
}

}  // namespace

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
        AttachedIds attached, ids;  // what the cgroup has; what this build's are
    };
    std::map<Parent, Attached> parents;
    for (auto [which, path] : {std::pair{Parent::Jobs, o.parent_}, {Parent::Proxies, o.proxies_parent_}}) {
        parents[which].cgroup.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!parents[which].cgroup) return fail(Error::sys("cgroup: opening " + path));
    }
    std::map<const Feature*, std::optional<Ready>> whole;
    const std::set<std::string> pins = names_in(o.dir_);
    for (const Feature& f : kFeatures) whole[&f] = loaded_whole(f, o.dir_, pins);
    for (const Feature& f : kFeatures)
        if (!whole[&f])
            if (auto r = check_shared_maps(f, o.dir_, whole); !r) return fail(r.error());
    bool loaded = false;
    for (const Feature& f : kFeatures) {
        Attached& a = parents[f.parent];
        if (auto r = open_feature(f, whole[&f], o.dir_, a.cgroup.get(), a.attached, a.ids, loaded); !r)
            return fail(r.error());
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
