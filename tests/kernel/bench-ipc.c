/* SPDX-License-Identifier: MIT */
/*
 * bench-ipc.c - two measurements issue 3 asks of the channel extensions:
 *
 *  1. receive latency by message size, copying (IPC_RECV) against
 *     zero-copy (IOIPC_RECV_ZC + IOIPC_RECV_RELEASE, reading the message
 *     in the mapped region): the zero-copy column should stay flat from
 *     64 B to 32 KB;
 *  2. the cost of waiting: receives parked with IOIPC_RECV_WAIT for a
 *     second must use no CPU and no extra thread.
 *
 * Built against the kernel's installed uapi headers (build/kernel/usr/
 * include), statically, and run in the VM:
 *   gcc -static -O2 -I build/kernel/usr/include -o bench-ipc tests/kernel/bench-ipc.c
 *   tests/vm/vm-run --add bench-ipc:/bin/bench-ipc -- /bin/bench-ipc
 * Exit status 0, or 1 when waiting burnt CPU or spawned threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/io_uring.h>

struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r)
{
	struct io_uring_params p = { 0 };
	size_t size;
	void *m;

	r->fd = syscall(__NR_io_uring_setup, 16, &p);
	if (r->fd < 0)
		return -errno;
	size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.sq_off.array + p.sq_entries * 4 > size)
		size = p.sq_off.array + p.sq_entries * 4;
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		 r->fd, IORING_OFF_SQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       IORING_OFF_SQES);
	if (m == MAP_FAILED || r->sqes == MAP_FAILED)
		return -errno;
	r->sq_tail = m + p.sq_off.tail;
	r->sq_mask = m + p.sq_off.ring_mask;
	r->sq_array = m + p.sq_off.array;
	r->cq_head = m + p.cq_off.head;
	r->cq_tail = m + p.cq_off.tail;
	r->cq_mask = m + p.cq_off.ring_mask;
	r->cqes = m + p.cq_off.cqes;
	return 0;
}

static struct io_uring_sqe *sqe_get(struct ring *r)
{
	unsigned int tail = *r->sq_tail, idx = tail & *r->sq_mask;

	memset(&r->sqes[idx], 0, sizeof(r->sqes[idx]));
	r->sq_array[idx] = idx;
	return &r->sqes[idx];
}

static void sqe_push(struct ring *r)
{
	__atomic_store_n(r->sq_tail, *r->sq_tail + 1, __ATOMIC_RELEASE);
}

static int reap(struct ring *r)
{
	unsigned int head = *r->cq_head;
	int res;

	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return -100000;
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static int run(struct ring *r, int op, int fd, const void *addr,
	       unsigned int len, unsigned int ioprio)
{
	struct io_uring_sqe *sqe = sqe_get(r);

	sqe->opcode = op;
	sqe->fd = fd;
	sqe->addr = (unsigned long)addr;
	sqe->len = len;
	sqe->ioprio = ioprio;
	sqe_push(r);
	if (syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS,
		    NULL, 0) != 1)
		return -100001;
	return reap(r);
}

static int reg(struct ring *r, unsigned int op, void *arg, unsigned int nr)
{
	int ret = syscall(__NR_io_uring_register, r->fd, op, arg, nr);

	return ret < 0 ? -errno : ret;
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

#define ITERS	2000

static int bench_sizes(struct ring *r)
{
	static const unsigned int sizes[] = { 64, 256, 1024, 4096, 16384, 32768 };
	static char buf[32768];
	unsigned int i, n;

	printf("%8s %14s %14s\n", "size", "copy ns/recv", "zc ns/recv");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct io_uring_ipc_channel_create c = {
			.flags = IOIPC_F_BROADCAST, .ring_entries = 64,
			.max_msg_size = 32768, .mode = 0600,
		};
		struct io_uring_ipc_channel_attach a = { .flags = IOIPC_SUB_RECV };
		struct io_uring_ipc_region_hdr *hdr;
		struct io_uring_ipc_msg_desc *desc;
		uint64_t t_copy = 0, t_zc = 0, t0;
		volatile char sink = 0;
		void *map;

		if (reg(r, IORING_REGISTER_IPC_CHANNEL_CREATE, &c, 1))
			return -1;
		a.channel_id = c.channel_id_out;
		if (reg(r, IORING_REGISTER_IPC_CHANNEL_ATTACH, &a, 1))
			return -1;
		map = mmap(NULL, a.region_size, PROT_READ, MAP_SHARED,
			   a.channel_fd, a.mmap_offset_out);
		if (map == MAP_FAILED)
			return -1;
		hdr = map;
		desc = map + hdr->desc_offset;
		memset(buf, 'x', sizeof(buf));
		for (n = 0; n < ITERS; n++) {
			int idx;

			if (run(r, IORING_OP_IPC_SEND, c.channel_id_out, buf,
				sizes[i], 0) != (int)sizes[i])
				return -1;
			t0 = now_ns(CLOCK_MONOTONIC);
			if (run(r, IORING_OP_IPC_RECV, a.local_id_out, buf,
				sizes[i], 0) != (int)sizes[i])
				return -1;
			t_copy += now_ns(CLOCK_MONOTONIC) - t0;

			if (run(r, IORING_OP_IPC_SEND, c.channel_id_out, buf,
				sizes[i], 0) != (int)sizes[i])
				return -1;
			t0 = now_ns(CLOCK_MONOTONIC);
			idx = run(r, IORING_OP_IPC_RECV, a.local_id_out, NULL, 0,
				  IOIPC_RECV_ZC);
			if (idx < 0)
				return -1;
			/* read in place: the first and last byte */
			sink += *(char *)(map + desc[idx].offset);
			sink += *(char *)(map + desc[idx].offset + desc[idx].len - 1);
			if (run(r, IORING_OP_IPC_RECV, a.local_id_out,
				(void *)(uintptr_t)desc[idx].msg_id, 0,
				IOIPC_RECV_RELEASE))
				return -1;
			t_zc += now_ns(CLOCK_MONOTONIC) - t0;
		}
		printf("%8u %14llu %14llu\n", sizes[i],
		       (unsigned long long)(t_copy / ITERS),
		       (unsigned long long)(t_zc / ITERS));
		munmap(map, a.region_size);
		close(a.channel_fd);
		reg(r, IORING_REGISTER_IPC_CHANNEL_DESTROY, NULL, c.channel_id_out);
	}
	return 0;
}

static int nr_threads(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static int bench_idle_wait(struct ring *r)
{
	struct io_uring_ipc_channel_create c = {
		.ring_entries = 16, .max_msg_size = 64, .mode = 0600,
	};
	struct io_uring_ipc_channel_attach a = { .flags = IOIPC_SUB_RECV };
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	static char bufs[8][64];
	uint64_t cpu0, wall0, cpu, wall;
	int i, threads0, threads;

	if (reg(r, IORING_REGISTER_IPC_CHANNEL_CREATE, &c, 1))
		return -1;
	a.channel_id = c.channel_id_out;
	if (reg(r, IORING_REGISTER_IPC_CHANNEL_ATTACH, &a, 1))
		return -1;
	threads0 = nr_threads();
	for (i = 0; i < 8; i++) {
		struct io_uring_sqe *sqe = sqe_get(r);

		sqe->opcode = IORING_OP_IPC_RECV;
		sqe->fd = a.local_id_out;
		sqe->addr = (unsigned long)bufs[i];
		sqe->len = 64;
		sqe->ioprio = IOIPC_RECV_WAIT;
		sqe_push(r);
	}
	if (syscall(__NR_io_uring_enter, r->fd, 8, 0, 0, NULL, 0) != 8)
		return -1;
	cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	wall0 = now_ns(CLOCK_MONOTONIC);
	poll(&pfd, 1, 1000);
	cpu = now_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	wall = now_ns(CLOCK_MONOTONIC) - wall0;
	threads = nr_threads();
	printf("8 waiting receives for %llu ms: %llu us of CPU, %d threads (%d before)\n",
	       (unsigned long long)(wall / 1000000), (unsigned long long)(cpu / 1000),
	       threads, threads0);
	return cpu < 20000000ULL && threads == threads0 ? 0 : 1;
}

int main(void)
{
	struct ring r;
	int ret;

	if (ring_init(&r))
		return 77;
	if (bench_sizes(&r)) {
		fprintf(stderr, "bench-ipc: size run failed\n");
		return 1;
	}
	ret = bench_idle_wait(&r);
	if (ret < 0)
		fprintf(stderr, "bench-ipc: idle run failed\n");
	return ret ? 1 : 0;
}
