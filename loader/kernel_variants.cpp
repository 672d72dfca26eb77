#include "loader/kernel_variants.h"

#include <bpf/btf.h>

#include <memory>
#include <string>
#include <string_view>

namespace confine {
namespace {

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

}  // namespace

// Whether `prog` belongs on this kernel.
bool belongs_here(bpf_object* obj, bpf_program* prog) {
    std::string_view name = bpf_program__name(prog);
    for (const OptionalHook& h : kOptionalHooks)
        if (name == h.program) return kernel_has(std::string(h.btf_func).c_str(), BTF_KIND_FUNC);
    if (name.ends_with(kPre63)) return !kernel_has_mnt_idmap();
    std::string pre = std::string(name) + std::string(kPre63);
    return !bpf_object__find_program_by_name(obj, pre.c_str()) || kernel_has_mnt_idmap();
}

}  // namespace confine
