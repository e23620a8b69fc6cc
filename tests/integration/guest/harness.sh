# Shared helpers of the guest-side harness scripts (sourced, not executed).
# The host talks to the guest over named virtio-serial ports (QEMU's
# virtserialport name=...), which show up under /sys/class/virtio-ports.

# Prints the device node of the virtio port NAME, fails when there is none.
harness_port() {
	local d
	for d in /sys/class/virtio-ports/*; do
		[ "$(cat "$d/name" 2>/dev/null)" = "$1" ] || continue
		echo "/dev/${d##*/}"
		return 0
	done
	return 1
}

# Prints the value of brokerd.KEY=VALUE on the kernel command line, or $2.
harness_param() {
	local word
	for word in $(cat /proc/cmdline); do
		case $word in
		"brokerd.$1="*) echo "${word#*=}"; return 0 ;;
		esac
	done
	echo "${2-}"
}
