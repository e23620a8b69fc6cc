/* SPDX-License-Identifier: MIT */
/*
 * keyed-restart.c - a program that creates keyed channels, uses them and
 * exits without cleaning up, as a service does when it is restarted.
 * tests/kernel/run starts it three times back to back in one boot: each
 * start must find its keys free again (the previous instance's ring was
 * torn down by the time its parent reaped it), not fail with -EEXIST.
 *
 * Written with raw system calls and the ABI spec's numbers, like
 * abi-spec.c. Exit status 0 on success, 1 on failure, 77 when the kernel
 * has no IPC channels.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REG_CREATE  38
#define REG_ATTACH  39
#define F_BROADCAST (1u << 0)
#define SUB_BOTH    3u

struct create {
	uint32_t flags, ring_entries, max_msg_size, mode;
	uint64_t key;
	uint32_t channel_id_out, reserved[3];
};

struct attach {
	uint32_t channel_id, flags;
	uint64_t key;
	int32_t channel_fd;
	uint32_t local_id_out;
	uint64_t mmap_offset_out;
	uint32_t region_size, reserved[3];
};

struct params {
	uint32_t sq_entries, cq_entries, flags, sq_thread_cpu;
	uint32_t sq_thread_idle, features, wq_fd, resv[3];
	uint32_t sq_off[10], cq_off[10];
};

static int reg(int fd, unsigned int op, void *arg)
{
	return syscall(__NR_io_uring_register, fd, op, arg, 1) < 0 ? -errno : 0;
}

int main(void)
{
	static const uint64_t keys[] = { 0x6b657965642d31, 0x6b657965642d32 };
	struct params p;
	int fd, ret;

	memset(&p, 0, sizeof(p));
	fd = syscall(__NR_io_uring_setup, 8, &p);
	if (fd < 0) {
		perror("io_uring_setup");
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		struct create c = {
			.flags = i ? F_BROADCAST : 0,
			.ring_entries = 4,
			.max_msg_size = 64,
			.mode = 0600,
			.key = keys[i],
		};
		struct attach a = { .flags = SUB_BOTH, .key = keys[i] };

		ret = reg(fd, REG_CREATE, &c);
		if (ret == -EINVAL || ret == -EOPNOTSUPP)
			return 77;
		if (ret) {
			fprintf(stderr, "keyed-restart: create key %d: %s\n", i, strerror(-ret));
			return 1;
		}
		ret = reg(fd, REG_ATTACH, &a);
		if (ret) {
			fprintf(stderr, "keyed-restart: attach key %d: %s\n", i, strerror(-ret));
			return 1;
		}
	}
	/* exit with the ring, the channels and the subscribers live */
	return 0;
}
