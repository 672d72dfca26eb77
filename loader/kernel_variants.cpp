#include "loader/kernel_variants.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <memory>
#include <string>
#include <string_view>

#include "fs.skel.h"
#include "proc.skel.h"

namespace confine {
namespace {

// The kernel's BTF, parsed once: it takes tens of milliseconds under TCG.
// Only a load needs it; jobs that find the pins ready never parse it.
const btf* kernel_btf() {
    static const std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(), btf__free);
    return vmlinux.get();
}

bool kernel_has(const char* name, int kind) {
    return kernel_btf() && btf__find_by_name_kind(kernel_btf(), name, kind) >= 0;
}

// Whether the kernel's struct `type` has a member `member`, directly or in
// an anonymous union or struct.
bool kernel_has_member(const char* type, std::string_view member) {
    const btf* b = kernel_btf();
    const int id = b ? btf__find_by_name_kind(b, type, BTF_KIND_STRUCT) : -1;
    if (id < 0) return false;
    auto has = [&](auto& self, const btf_type* t) -> bool {
        const btf_member* m = btf_members(t);
        for (unsigned i = 0; i < btf_vlen(t); i++, m++) {
            const btf_type* mt = btf__type_by_id(b, m->type);
            if (m->name_off ? btf__name_by_offset(b, m->name_off) == member : btf_is_composite(mt) && self(self, mt))
                return true;
        }
        return false;
    };
    return has(has, btf__type_by_id(b, id));
}

// A program for an LSM hook that only newer kernels have.
void only_with_hook(bpf_program* prog, const char* hook) {
    bpf_program__set_autoload(prog, kernel_has((std::string("bpf_lsm_") + hook).c_str(), BTF_KIND_FUNC));
}

// 6.8 ("lsm: new security_file_ioctl_compat() hook") split 32-bit ioctls
// off file_ioctl; before, file_ioctl sees them.
constexpr const char* kIoctlCompat = "file_ioctl_compat";

}  // namespace

void choose_programs(fs_bpf& skel) {
    // 6.2 (commit a35b9af4ec2c): see seq_of in bpf/fs_cache.bpf.h.
    skel.rodata->have_rdonly_cast = kernel_has("bpf_rdonly_cast", BTF_KIND_FUNC);
    // f_path in a union with __f_path (7.2; not 6.12): see open_inherits
    // in bpf/fs_cache.bpf.h.
    skel.rodata->open_inherits = !kernel_has_member("file", "__f_path");
    // 6.3 (commit c1632a0f1120, "fs: port ->setattr() to pass mnt_idmap")
    // put a struct mnt_idmap * first in inode_setattr's arguments.
    const bool idmap = kernel_has("mnt_idmap", BTF_KIND_STRUCT);
    bpf_program__set_autoload(skel.progs.confine_inode_setattr, idmap);
    bpf_program__set_autoload(skel.progs.confine_inode_setattr_pre_6_3, !idmap);
    only_with_hook(skel.progs.confine_fs_file_ioctl_compat, kIoctlCompat);
    // 6.2 moved POSIX ACLs off the xattr hooks onto their own; before,
    // inode_setxattr and inode_removexattr see them.
    only_with_hook(skel.progs.confine_inode_set_acl, "inode_set_acl");
    only_with_hook(skel.progs.confine_inode_remove_acl, "inode_remove_acl");
    // 6.17 ("fs: introduce file_getattr and file_setattr syscalls"); before,
    // only the ioctls change those flags.
    only_with_hook(skel.progs.confine_inode_file_setattr, "inode_file_setattr");
}

void choose_programs(proc_bpf& skel) {
    only_with_hook(skel.progs.confine_file_ioctl_compat, kIoctlCompat);
}

}  // namespace confine
