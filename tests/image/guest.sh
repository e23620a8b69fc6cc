# Shared host-side helpers of tests/integration/run and tests/image/boot
# (sourced, not executed): finding the kernel and image, building the QEMU
# command line for the systemd guest, and spotting kernel splats.
#
# The guest boots build/kernel/bzImage directly (no boot loader, no initrd)
# with the image as a virtio disk holding an ext4 root file system, opened
# with snapshot=on so that no run ever changes the image. The host and the
# guest's harness units talk over named virtio-serial ports, each backed by a
# file on the host (see tests/integration/guest/harness.sh).

guest_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
guest_kernel=${BROKERD_KERNEL:-$guest_top/build/kernel/bzImage}
guest_image=$guest_top/build/image/brokerd.raw
guest_mem=${BROKERD_GUEST_MEM:-2048}
guest_smp=${BROKERD_GUEST_SMP:-2}

# For runs nobody watches: no login on the serial console (the autologin
# session would start a user manager for nothing), and the journal copied to
# the console as it is written, so console.log tells what a guest that hung
# was doing even though its journal never came back.
guest_batch_cmdline="systemd.mask=serial-getty@ttyS0.service systemd.journald.forward_to_console=1"

guest_die() { echo "${guest_prog:-guest}: $*" >&2; exit 2; }

# Builds or refreshes the image unless told not to. Without root the
# existing image is used as it is (mkosi needs root).
guest_build_image() { # NO_BUILD
	[ -f "$guest_kernel" ] || guest_die "no kernel at $guest_kernel (run kernel/build, or pass --kernel)"
	if [ "$1" -eq 1 ]; then
		:
	elif [ "$(id -u)" -eq 0 ]; then
		"$guest_top/tests/image/build" || guest_die "image build failed"
	elif [ -f "$guest_image" ]; then
		echo "${guest_prog:-guest}: not root, using the existing $guest_image without rebuilding" >&2
	else
		guest_die "no image at $guest_image, and building it needs root (tests/image/build)"
	fi
	[ -f "$guest_image" ] || guest_die "no image at $guest_image (tests/image/build)"
}

# Fills the array guest_cmd with the QEMU command line.
#   $1: extra kernel command line (non-interactive runs add
#       $guest_batch_cmdline)
#   $2: console log file ("" for the terminal: interactive use)
#   rest: virtio ports as NAME=FILE, and raw QEMU arguments after "--"
guest_qemu_cmd() {
	local append=$1 console=$2 accel port i=0
	shift 2
	mapfile -t accel < <("$guest_top/tests/vm/qemu-accel" "$guest_kernel")
	guest_accel=${accel[1]%%,*}
	guest_cmd=(qemu-system-x86_64 "${accel[@]}"
		-m "$guest_mem" -smp "$guest_smp"
		-nodefaults -nographic -no-reboot
		-kernel "$guest_kernel"
		-append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.firstboot=off $append"
		-drive "file=$guest_image,format=raw,if=virtio,snapshot=on"
		-device virtio-rng-pci
		-device virtio-serial-pci)
	if [ -n "$console" ]; then
		guest_cmd+=(-chardev "file,id=console,path=$console" -serial chardev:console)
	else
		guest_cmd+=(-serial mon:stdio)
	fi
	while [ $# -gt 0 ]; do
		[ "$1" = -- ] && { shift; break; }
		port=$1; shift
		i=$((i + 1))
		guest_cmd+=(-chardev "file,id=port$i,path=${port#*=}"
			-device "virtserialport,chardev=port$i,name=${port%%=*}")
	done
	guest_cmd+=("$@")
}

# Makes and prints a fresh log directory build/logs/KIND/<time>-<pid>,
# points build/logs/KIND/latest at it and keeps the ten newest.
guest_log_dir() {
	local base=$guest_top/build/logs/$1 dir
	dir=$base/$(date +%Y%m%d-%H%M%S)-$$
	mkdir -p "$dir"
	ln -sfn "${dir##*/}" "$base/latest"
	ls -1d "$base"/[0-9]*-* 2>/dev/null | sort | head -n -10 | xargs -r rm -rf
	echo "$dir"
}

# Kernel problems on the console turn a run into a failure even when every
# test passed (same list as tests/vm/vm-run). BUG: and WARNING: count as
# words only: a test's "GLib-DEBUG: ..." on the console is not a splat.
guest_splat='\bWARNING:|\bBUG:|KASAN:|KFENCE:|UBSAN:|Oops|Kernel panic|general protection fault|possible circular locking|inconsistent lock state|possible recursive locking|suspicious RCU usage|INFO: task .* blocked'
