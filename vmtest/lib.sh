# shellcheck shell=bash disable=SC2034 # variables are used by the scripts sourcing this
# Shared by vmtest/run and vmtest/fetch-kernels: kernel table, cache layout,
# messages, locking. Sourced, never executed.

# Failures inside $(...) must stop the script too, not only at top level.
shopt -s inherit_errexit

# The kernel matrix. One line per series: the series name used on the command
# line, then the Debian suites searched for it (the first is the main one;
# "*-security" suites live on the security mirror). To add a kernel, add a
# line here; fetch-kernels picks the newest generic -amd64 ABI of that series.
VMTEST_KERNELS=(
	"6.1 bookworm bookworm-updates bookworm-security"
	"6.12 trixie trixie-updates trixie-security"
	"7.2 sid"
)
VMTEST_DEFAULT_KERNEL=6.1

VMTEST_CACHE=${CONFINE_VMTEST_CACHE:-/var/cache/confine/vmtest}
VMTEST_MIRROR=${CONFINE_VMTEST_MIRROR:-http://deb.debian.org/debian}
VMTEST_SECURITY_MIRROR=${CONFINE_VMTEST_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# Release files are verified against the host's Debian archive keyring;
# it must hold the keys that sign every suite above (see README.md).
VMTEST_KEYRING=${CONFINE_VMTEST_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
VMTEST_BUSYBOX=${CONFINE_VMTEST_BUSYBOX:-/bin/busybox}

# Modules the initramfs loads: those needed to mount the 9p root and the
# overlay on it. Their dependencies (netfs, fscache, virtio_ring, ...) come
# from modules.dep. The guest has no other modules of its kernel (the host's
# /lib/modules is for the host's kernel): add here what tests need, e.g.
# veth; the cache is rebuilt on the next run when this list changes.
# veth: far hosts in network namespaces; sctp: the tests that show SCTP's
# own connect paths are refused (a guest can't autoload a module); fuse
# (built in from 6.12): names longer than NAME_MAX; ext4 and loop: a
# case-insensitive directory (ext4 casefold) on every kernel; vfat and the
# character sets it loads by default: a filesystem folding every name; xfs:
# one made case-insensitive (ascii-ci), which only its lookup shows.
VMTEST_MODULES=(virtio_pci 9pnet_virtio 9p overlay veth sctp fuse ext4 loop vfat nls_cp437 nls_ascii xfs)

VMTEST_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")

say() { printf 'vmtest: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 125
}

# Prints the series names of the table, one per line.
all_series() {
	local line
	for line in "${VMTEST_KERNELS[@]}"; do
		printf '%s\n' "${line%% *}"
	done
}

# Prints the suites of series $1, or fails if the series is not in the table.
series_suites() {
	local line
	for line in "${VMTEST_KERNELS[@]}"; do
		if [[ ${line%% *} == "$1" ]]; then
			printf '%s\n' "${line#* }"
			return 0
		fi
	done
	return 1
}

# Expands a --kernel argument ("all" or one series) to series names.
expand_kernels() {
	if [[ $1 == all ]]; then
		all_series
	elif series_suites "$1" >/dev/null; then
		printf '%s\n' "$1"
	else
		die "unknown kernel '$1'; known: $(all_series | tr '\n' ' ')all"
	fi
}

# Fails with an install hint unless every named command exists.
need_cmds() {
	local cmd pkg missing=()
	for cmd in "$@"; do
		command -v "$cmd" >/dev/null 2>&1 && continue
		case $cmd in
		qemu-system-x86_64) pkg=qemu-system-x86 ;;
		depmod | modprobe) pkg=kmod ;;
		dpkg-deb) pkg=dpkg ;;
		apt-get | apt-cache) pkg=apt ;;
		flock) pkg=util-linux ;;
		xz) pkg=xz-utils ;;
		*) pkg=$cmd ;;
		esac
		missing+=("$cmd (package $pkg)")
	done
	((${#missing[@]} == 0)) || die "missing host tools: ${missing[*]}; install them with apt-get install"
}

# The initramfs needs a busybox that runs without the host's libraries.
need_static_busybox() {
	[[ -x $VMTEST_BUSYBOX ]] || die "$VMTEST_BUSYBOX not found; apt-get install busybox-static"
	if LC_ALL=C ldd "$VMTEST_BUSYBOX" 2>&1 | grep -q '=>'; then
		die "$VMTEST_BUSYBOX is dynamically linked; apt-get install busybox-static"
	fi
}

series_dir() { printf '%s/%s\n' "$VMTEST_CACHE" "$1"; }

# True if the cache of series $1 holds everything a boot needs, for the
# current VMTEST_MODULES. A directory only gets its final name once complete
# (fetch-kernels renames it into place), so this mostly guards against files
# deleted by hand and a changed module list.
cache_complete() {
	local dir m
	dir=$(series_dir "$1")
	[[ -s $dir/vmlinuz && -s $dir/kernel-release && -f $dir/modules.load ]] || return 1
	[[ $(cat "$dir/modules.wanted" 2>/dev/null) == "${VMTEST_MODULES[*]}" ]] || return 1
	while read -r m; do
		[[ -s $dir/modules/$m ]] || return 1
	done <"$dir/modules.load"
}

# Takes the cache-wide lock on fd 9 (exclusive: one fetch or initramfs
# build at a time); released when the process exits.
lock_cache() {
	mkdir -p "$VMTEST_CACHE" || die "cannot create cache dir $VMTEST_CACHE; set CONFINE_VMTEST_CACHE to a writable place"
	exec 9>"$VMTEST_CACHE/.lock"
	if ! flock -n 9; then
		say "waiting for another vmtest holding $VMTEST_CACHE/.lock"
		flock 9
	fi
}
