#include "loader/job_policy.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include <fmt/format.h>

#include "bpf/job.h"
#include "loader/cgroup.h"

namespace confine {
namespace {

Result<void> map_error(Map map) {
    int e = errno;
    Error err = Error::sys(std::string("bpf: adding to map ") + map_name(map), e);
    if (e == E2BIG || e == ENOMEM || e == ENOSPC)
        return fail(std::move(err).hint("The map is full: too many concurrent jobs or rules; the job was not started"));
    return fail(err);
}

Result<void> update(const BpfObjects& objs, Map map, const void* key, const void* value) {
    if (bpf_map_update_elem(objs.map_fd(map), key, value, BPF_ANY) == 0) return {};
    return map_error(map);
}

// KEYS[i] -> VALUES[i] into MAP with one bpf() call where a job adds dozens
// (BPF_MAP_UPDATE_BATCH, 5.6, for hash and LPM trie maps alike).
template <class Key, class Value>
Result<void> update_all(const BpfObjects& objs, Map map, const std::vector<Key>& keys,
                        const std::vector<Value>& values) {
    auto n = static_cast<uint32_t>(keys.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
    if (n == 0 || bpf_map_update_batch(objs.map_fd(map), keys.data(), values.data(), &n, &opts) == 0) return {};
    return map_error(map);
}

// Deletes KEYS from MAP, best effort: in one call, then one by one from
// where the batch stopped (it stops at the first key missing).
template <class Key>
void erase_all(int map, const std::vector<Key>& keys) {
    auto n = static_cast<uint32_t>(keys.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (n == 0 || bpf_map_delete_batch(map, keys.data(), &n, &opts) == 0) return;
    for (size_t i = n; i < keys.size(); i++) bpf_map_delete_elem(map, &keys[i]);
}

}  // namespace

confine_fs_name fs_name_key(uint64_t cgroup_id, std::string_view path) {
    std::string_view name = path.substr(path.rfind('/') + 1);
    confine_fs_name k{};
    k.cgroup_id = cgroup_id;
    k.len = static_cast<uint32_t>(name.size());
    // As bpf_probe_read_kernel_str copies it: NUL-terminated within the field.
    memcpy(k.name, name.data(), std::min(name.size(), sizeof k.name - 1));
    return k;
}

confine_fs_key fs_key(uint64_t cgroup_id, const std::string& prefix) {
    confine_fs_key k{};
    k.cgroup_id_lo = static_cast<uint32_t>(cgroup_id);
    k.cgroup_id_hi = static_cast<uint32_t>(cgroup_id >> 32);
    // "/" stays "/"; "/usr" becomes "/usr/" so that it matches whole components.
    std::string enc = prefix == "/" ? prefix : prefix + "/";
    size_t n = std::min(enc.size(), sizeof k.path);  // compile() refuses longer rules
    memcpy(k.path, enc.data(), n);
    k.prefixlen = confine_fs_prefixlen(static_cast<uint32_t>(n));
    return k;
}

confine_net_key net_key(uint64_t cgroup_id, const policy::Endpoint& ep) {
    using Kind = policy::Endpoint::Kind;
    confine_net_key k{};
    k.cgroup_id = cgroup_id;
    switch (ep.kind) {
        case Kind::Tcp:
        case Kind::Udp:
            k.kind = ep.kind == Kind::Tcp ? CONFINE_NET_TCP : CONFINE_NET_UDP;
            k.port = ep.port;
            memcpy(k.addr, ep.addr.data(), 16);
            break;
        case Kind::Unix:
            k.kind = CONFINE_NET_UNIX;
            memcpy(k.addr, ep.name.data(), std::min(ep.name.size(), sizeof k.addr - 1));
            break;
        case Kind::UnixAbstract:
            k.kind = CONFINE_NET_UNIX_ABSTRACT;
            k.name_len = static_cast<uint16_t>(std::min(ep.name.size(), sizeof k.addr));
            memcpy(k.addr, ep.name.data(), k.name_len);
            break;
    }
    return k;
}

Result<JobPolicy> JobPolicy::install(const BpfObjects& objs, uint64_t id, const policy::Compiled& c,
                                     uint32_t ring_slot) {
    JobPolicy p(objs, id);
    std::set<std::string> names;  // fs_names keys written: many entries share a last component
    uint64_t name_lens = 0;
    std::vector<uint32_t> values;
    for (const policy::FsTableEntry& e : policy::fs_table(c)) {
        const confine_fs_key& k = p.fs_keys_.emplace_back(fs_key(id, e.prefix));
        uint32_t access = e.access | (e.guard ? CONFINE_FS_GUARD : 0) | (e.listable ? CONFINE_FS_LIST : 0) |
                          (e.leaf ? CONFINE_FS_LEAF : 0);
        // The key length tells the BPF side an exact match from a prefix one.
        values.push_back(confine_fs_value(access, confine_fs_path_bytes(k.prefixlen)));
        if (e.prefix == "/") continue;
        confine_fs_name n = fs_name_key(id, e.prefix);
        name_lens |= confine_name_len_bit(n.len);
        if (names.emplace(reinterpret_cast<const char*>(&n), sizeof n).second) p.fs_names_.push_back(n);
    }
    // Entries a failed batch never added are deleted with the rest: every
    // key carries the job's id.
    if (auto r = update_all(objs, Map::FsRules, p.fs_keys_, values); !r) return fail(r.error());
    if (auto r = update_all(objs, Map::FsNames, p.fs_names_, std::vector<uint8_t>(p.fs_names_.size(), 1)); !r)
        return fail(r.error());
    auto add_net = [&](const std::vector<policy::Endpoint>& eps, uint32_t op) -> Result<void> {
        for (const policy::Endpoint& ep : eps) {
            confine_net_key k = net_key(id, ep);
            uint32_t ops = op;
            uint32_t old = 0;
            if (bpf_map_lookup_elem(objs.map_fd(Map::NetRules), &k, &old) == 0) ops |= old;
            if (auto r = update(objs, Map::NetRules, &k, &ops); !r) return r;
            p.net_keys_.push_back(k);
        }
        return {};
    };
    if (auto r = add_net(c.connect, CONFINE_NET_CONNECT); !r) return fail(r.error());
    if (auto r = add_net(c.bind, CONFINE_NET_BIND); !r) return fail(r.error());

    // Last: a program that finds no job entry denies, so a job is never
    // half-installed in the permissive direction.
    confine_job job{};
    job.ring = ring_slot;
    if (c.mode == policy::Mode::Audit) job.flags |= CONFINE_JOB_AUDIT;
    if (c.user_namespaces) job.flags |= CONFINE_JOB_USERNS;
    if (c.exec_allowlist) job.flags |= CONFINE_JOB_EXEC_LIST;
    job.families = c.families;
    job.name_lens = name_lens;
    if (auto r = update(objs, Map::Jobs, &id, &job); !r) return fail(r.error());
    p.job_ = true;
    return p;
}

JobPolicy::JobPolicy(JobPolicy&& o) noexcept
    : objs_(o.objs_),
      id_(o.id_),
      fs_keys_(std::move(o.fs_keys_)),
      fs_names_(std::move(o.fs_names_)),
      net_keys_(std::move(o.net_keys_)),
      job_(std::exchange(o.job_, false)) {
    o.fs_keys_.clear();
    o.fs_names_.clear();
    o.net_keys_.clear();
}

// Forgets the keys of this job and of jobs gone without cleaning up (a
// killed confine). BPF has no key_free hook after 6.1; an entry left
// behind only takes room, since every key_alloc resets its address's entry.
void forget_keys(const BpfObjects& objs, uint64_t job) {
    int keys = objs.map_fd(Map::JobKeys), jobs = objs.map_fd(Map::Jobs);
    std::vector<uint64_t> stale;
    uint64_t addr = 0;
    for (int err = bpf_map_get_next_key(keys, nullptr, &addr); err == 0;
         err = bpf_map_get_next_key(keys, &addr, &addr)) {
        uint64_t owner;
        confine_job j;
        if (bpf_map_lookup_elem(keys, &addr, &owner) == 0 &&
            (owner == job || bpf_map_lookup_elem(jobs, &owner, &j) != 0))
            stale.push_back(addr);
    }
    for (uint64_t a : stale) bpf_map_delete_elem(keys, &a);
}

JobPolicy::~JobPolicy() {
    if (job_) {
        // Walking job_keys, a 65,536-bucket hash, would cost each job's
        // end about a millisecond: a job that made no more keys than the
        // entry records (its session keyring) has them forgotten one by
        // one. Those of jobs whose confine was killed go with
        // collect_orphan_jobs, or with the next walk.
        int keys = objs_->map_fd(Map::JobKeys), jobs = objs_->map_fd(Map::Jobs);
        confine_job job{};
        if (bpf_map_lookup_elem(jobs, &id_, &job) != 0 || job.keys > CONFINE_JOB_KEYS) {
            forget_keys(*objs_, id_);
        } else {
            for (uint64_t i = 0; i < job.keys; i++) {
                uint64_t owner;
                if (bpf_map_lookup_elem(keys, &job.key[i], &owner) == 0 && owner == id_)
                    bpf_map_delete_elem(keys, &job.key[i]);
            }
        }
        bpf_map_delete_elem(jobs, &id_);
    }
    erase_all(objs_->map_fd(Map::FsRules), fs_keys_);
    erase_all(objs_->map_fd(Map::FsNames), fs_names_);
    erase_all(objs_->map_fd(Map::NetRules), net_keys_);
}

uint64_t JobPolicy::inbound() const {
    confine_job job{};
    if (bpf_map_lookup_elem(objs_->map_fd(Map::Jobs), &id_, &job) != 0) return 0;
    return job.inbound;
}

uint64_t JobPolicy::lost() const {
    confine_job job{};
    if (bpf_map_lookup_elem(objs_->map_fd(Map::Jobs), &id_, &job) != 0) return 0;
    return job.lost;
}

namespace {

// Every key of MAP for which OURS says yes, read before any is deleted.
template <class Key, class Pred>
void delete_keys(int map, Pred ours) {
    std::vector<Key> doomed;
    Key k{};
    for (int err = bpf_map_get_next_key(map, nullptr, &k); err == 0; err = bpf_map_get_next_key(map, &k, &k))
        if (ours(k)) doomed.push_back(k);
    erase_all(map, doomed);
}

// What JobPolicy's destructor removes, for a job whose confine never ran it.
void forget_job(const BpfObjects& objs, uint64_t id) {
    forget_keys(objs, id);
    bpf_map_delete_elem(objs.map_fd(Map::Jobs), &id);
    delete_keys<confine_fs_key>(objs.map_fd(Map::FsRules), [&](const confine_fs_key& k) {
        return k.cgroup_id_lo == static_cast<uint32_t>(id) && k.cgroup_id_hi == static_cast<uint32_t>(id >> 32);
    });
    delete_keys<confine_fs_name>(objs.map_fd(Map::FsNames),
                                 [&](const confine_fs_name& k) { return k.cgroup_id == id; });
    delete_keys<confine_net_key>(objs.map_fd(Map::NetRules),
                                 [&](const confine_net_key& k) { return k.cgroup_id == id; });
}

}  // namespace

size_t collect_orphan_jobs(const BpfObjects& objs) {
    size_t ended = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(objs.jobs_parent(), ec)) {
        if (!entry.is_directory(ec) || owner_alive(entry.path())) continue;
        auto cg = JobCgroup::adopt(entry.path());
        if (!cg) continue;
        uint64_t id = cg->id();
        if (auto r = cg->kill_and_remove(); !r) {
            fmt::print(stderr, "confine: ending an orphaned job: {}\n", r.error().message);
            continue;
        }
        forget_job(objs, id);
        ended++;
    }
    return ended;
}

}  // namespace confine
