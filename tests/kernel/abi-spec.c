/* SPDX-License-Identifier: MIT */
/*
 * abi-spec.c - conformance test of the io_uring IPC channel ABI, written
 * only against ../shared/spec/io_uring_ipc_abi.md: every number and
 * structure below is copied from the spec text, nothing comes from the
 * project's or the kernel's headers, and the ring is driven with raw
 * system calls. It stands for a program built against the RFC that must
 * run unchanged on our kernel.
 *
 * Build: gcc -static -O2 -o abi-spec abi-spec.c; run as root in the VM.
 * Exit status 0 when every check passes, 1 otherwise, 77 when the kernel
 * has no IPC channels.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- from the spec ------------------------------------------------------ */

#define OP_IPC_SEND 65
#define OP_IPC_RECV 66
#define REG_CREATE  38
#define REG_ATTACH  39
#define REG_DETACH  40
#define REG_DESTROY 41

#define F_BROADCAST (1u << 0)
#define F_MULTICAST (1u << 1)
#define F_PRIVATE   (1u << 2)
#define SUB_SEND    (1u << 0)
#define SUB_RECV    (1u << 1)
#define SUB_BOTH    (SUB_SEND | SUB_RECV)

struct chan_create {
	uint32_t flags;
	uint32_t ring_entries;
	uint32_t max_msg_size;
	uint32_t mode;
	uint64_t key;
	uint32_t channel_id_out;
	uint32_t reserved[3];
};

struct chan_attach {
	uint32_t channel_id;
	uint32_t flags;
	uint64_t key;
	int32_t channel_fd;
	uint32_t local_id_out;
	uint64_t mmap_offset_out;
	uint32_t region_size;
	uint32_t reserved[3];
};

_Static_assert(sizeof(struct chan_create) == 40, "spec: 40 bytes");
_Static_assert(sizeof(struct chan_attach) == 48, "spec: 48 bytes");

/* --- io_uring, the generic parts of its ABI ---------------------------- */

struct sqe {
	uint8_t opcode, flags;
	uint16_t ioprio;
	int32_t fd;
	uint64_t off, addr;
	uint32_t len, rw_flags;
	uint64_t user_data;
	uint16_t buf_index, personality;
	uint32_t file_index;
	uint64_t addr3, pad2;
};

struct cqe {
	uint64_t user_data;
	int32_t res;
	uint32_t flags;
};

struct sq_offsets {
	uint32_t head, tail, ring_mask, ring_entries, flags, dropped, array, resv1;
	uint64_t user_addr;
};

struct cq_offsets {
	uint32_t head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1;
	uint64_t user_addr;
};

struct params {
	uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd, resv[3];
	struct sq_offsets sq_off;
	struct cq_offsets cq_off;
};

_Static_assert(sizeof(struct sqe) == 64, "sqe");
_Static_assert(sizeof(struct params) == 120, "params");

#define OFF_SQ_RING	0ULL
#define OFF_SQES	0x10000000ULL
#define ENTER_GETEVENTS 1u

struct ring {
	int fd;
	uint32_t *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct sqe *sqes;
	struct cqe *cqes;
};

static int failures;

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "abi-spec:%d: check failed: %s\n", __LINE__, #cond); \
			failures++;                                                          \
		}                                                                            \
	} while (0)

#define CHECK_EQ(want, got)                                                                                  \
	do {                                                                                                 \
		long long __w = (want), __g = (got);                                                         \
		if (__w != __g) {                                                                            \
			fprintf(stderr, "abi-spec:%d: %s: want %lld, got %lld\n", __LINE__, #got, __w, __g); \
			failures++;                                                                          \
		}                                                                                            \
	} while (0)

static int ring_init(struct ring *r)
{
	struct params p;
	size_t size;
	void *map;

	memset(&p, 0, sizeof(p));
	r->fd = syscall(__NR_io_uring_setup, 8, &p);
	if (r->fd < 0)
		return -errno;
	size = p.sq_off.array + p.sq_entries * 4;
	if (p.cq_off.cqes + p.cq_entries * sizeof(struct cqe) > size)
		size = p.cq_off.cqes + p.cq_entries * sizeof(struct cqe);
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, OFF_SQ_RING);
	if (map == MAP_FAILED)
		return -errno;
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, OFF_SQES);
	if (r->sqes == MAP_FAILED)
		return -errno;
	r->sq_tail = (uint32_t *)((char *)map + p.sq_off.tail);
	r->sq_mask = (uint32_t *)((char *)map + p.sq_off.ring_mask);
	r->sq_array = (uint32_t *)((char *)map + p.sq_off.array);
	r->cq_head = (uint32_t *)((char *)map + p.cq_off.head);
	r->cq_tail = (uint32_t *)((char *)map + p.cq_off.tail);
	r->cq_mask = (uint32_t *)((char *)map + p.cq_off.ring_mask);
	r->cqes = (struct cqe *)((char *)map + p.cq_off.cqes);
	return 0;
}

/* Runs one SQE and returns its cqe->res */
static int run(struct ring *r, int op, int fd, const void *addr, uint32_t len, uint32_t file_index)
{
	uint32_t tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
	struct sqe *sqe = &r->sqes[idx];
	int ret;

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = op;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)addr;
	sqe->len = len;
	sqe->file_index = file_index;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	ret = syscall(__NR_io_uring_enter, r->fd, 1, 1, ENTER_GETEVENTS, NULL, 0);
	if (ret != 1)
		return -10000;
	head = *r->cq_head;
	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return -10001;
	ret = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return ret;
}

static int reg(struct ring *r, unsigned int op, void *arg, unsigned int nr)
{
	int ret = syscall(__NR_io_uring_register, r->fd, op, arg, nr);

	return ret < 0 ? -errno : ret;
}

static int create(struct ring *r, uint32_t flags, uint32_t entries, uint32_t size, uint32_t mode,
		  uint64_t key, uint32_t *id)
{
	struct chan_create c = {
		.flags = flags,
		.ring_entries = entries,
		.max_msg_size = size,
		.mode = mode,
		.key = key,
	};
	int ret = reg(r, REG_CREATE, &c, 1);

	if (!ret && id)
		*id = c.channel_id_out;
	return ret;
}

static int attach(struct ring *r, uint32_t id, uint64_t key, uint32_t flags, struct chan_attach *out)
{
	struct chan_attach a = { .channel_id = id, .key = key, .flags = flags };
	int ret = reg(r, REG_ATTACH, &a, 1);

	if (ret)
		return ret;
	if (out)
		*out = a;
	else
		close(a.channel_fd);
	return (int)a.local_id_out;
}

static int snd(struct ring *r, uint32_t id, const char *s, uint32_t target)
{
	return run(r, OP_IPC_SEND, id, s, strlen(s), target);
}

static const char *rcv(struct ring *r, uint32_t id)
{
	static char buf[128];
	int ret = run(r, OP_IPC_RECV, id, buf, sizeof(buf) - 1, 0);

	if (ret < 0)
		return "<error>";
	buf[ret] = 0;
	return buf;
}

#define CHECK_STR(want, got)                                                                                \
	do {                                                                                                \
		const char *__g = (got);                                                                    \
		if (strcmp(want, __g)) {                                                                    \
			fprintf(stderr, "abi-spec:%d: %s: want \"%s\", got \"%s\"\n", __LINE__, #got, want, \
				__g);                                                                       \
			failures++;                                                                         \
		}                                                                                           \
	} while (0)

static uint64_t next_key(void)
{
	static uint64_t n;

	return 0xab1000000000ULL + ((uint64_t)getpid() << 8) + ++n;
}

/* --- the checks, in the order of the spec -------------------------------- */

static void check_create(struct ring *r)
{
	struct chan_create c = { .ring_entries = 4, .max_msg_size = 8, .mode = 0600 };
	uint64_t key = next_key();
	uint32_t id;

	CHECK_EQ(-EINVAL, create(r, 0, 0, 8, 0600, 0, NULL));
	CHECK_EQ(-EINVAL, create(r, 0, 6, 8, 0600, 0, NULL));
	CHECK_EQ(-EINVAL, create(r, 0, 4, 0, 0600, 0, NULL));
	CHECK_EQ(-EINVAL, create(r, F_BROADCAST | F_MULTICAST, 4, 8, 0600, 0, NULL));
	CHECK_EQ(-EINVAL, create(r, 1u << 30, 4, 8, 0600, 0, NULL));
	c.reserved[0] = 7;
	CHECK_EQ(-EINVAL, reg(r, REG_CREATE, &c, 1));
	c.reserved[0] = 0;
	CHECK_EQ(-EINVAL, reg(r, REG_CREATE, &c, 2));
	CHECK_EQ(0, create(r, 0, 4, 8, 0600, key, &id));
	CHECK(id != 0);
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
}

static void check_attach(struct ring *r)
{
	uint64_t key = next_key();
	struct chan_attach a;
	uint32_t id;
	void *map;
	int s;

	CHECK_EQ(0, create(r, 0, 4, 64, 0600, key, &id));
	CHECK_EQ(-ENOENT, attach(r, 0, next_key(), SUB_BOTH, NULL));
	CHECK_EQ(-EINVAL, attach(r, id, 0, 0, NULL));
	CHECK_EQ(-EINVAL, attach(r, id, 0, 1u << 29, NULL));
	s = attach(r, 0, key, SUB_BOTH, &a);
	CHECK(s > 0);
	CHECK(a.channel_fd >= 0);
	CHECK(a.region_size > 0);
	map = mmap(NULL, a.region_size, PROT_READ, MAP_SHARED, a.channel_fd, a.mmap_offset_out);
	CHECK(map != MAP_FAILED);
	if (map != MAP_FAILED)
		munmap(map, a.region_size);
	close(a.channel_fd);
	CHECK(attach(r, id, 0, SUB_RECV, NULL) > 0);
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
}

static void check_unicast(struct ring *r)
{
	char big[65] = { 0 }, small[4];
	uint32_t id;
	int s, ro, wo, other;

	CHECK_EQ(0, create(r, 0, 2, 64, 0600, 0, &id));
	s = attach(r, id, 0, SUB_BOTH, NULL);
	ro = attach(r, id, 0, SUB_RECV, NULL);
	wo = attach(r, id, 0, SUB_SEND, NULL);
	CHECK(s > 0 && ro > 0 && wo > 0);
	CHECK_EQ(-EAGAIN, run(r, OP_IPC_RECV, s, small, 4, 0));
	CHECK_EQ(3, snd(r, s, "one", 0));
	CHECK_EQ(3, snd(r, wo, "two", 0));
	/* ring full */
	CHECK_EQ(-ENOBUFS, snd(r, s, "three", 0));
	CHECK_STR("one", rcv(r, s));
	CHECK_STR("two", rcv(r, ro));
	CHECK_EQ(-EAGAIN, run(r, OP_IPC_RECV, ro, small, 4, 0));
	/* truncation: first bytes delivered, message consumed */
	CHECK_EQ(6, snd(r, s, "abcdef", 0));
	CHECK_EQ(4, run(r, OP_IPC_RECV, s, small, 4, 0));
	CHECK(!memcmp(small, "abcd", 4));
	CHECK_EQ(-EAGAIN, run(r, OP_IPC_RECV, s, small, 4, 0));
	/* errors */
	CHECK_EQ(-EMSGSIZE, run(r, OP_IPC_SEND, s, big, 65, 0));
	CHECK_EQ(-EACCES, snd(r, ro, "x", 0));
	CHECK_EQ(-EACCES, run(r, OP_IPC_RECV, wo, small, 4, 0));
	CHECK_EQ(-ENOENT, snd(r, 0x7ffffff1, "x", 0));
	CHECK_EQ(-ENOENT, run(r, OP_IPC_RECV, 0x7ffffff1, small, 4, 0));
	CHECK_EQ(-ENOENT, snd(r, s, "x", 0x7ffffff1));
	CHECK_EQ(-ENOENT, snd(r, s, "x", wo));
	/* targeted unicast: for its target only */
	other = attach(r, id, 0, SUB_RECV, NULL);
	CHECK_EQ(2, snd(r, s, "to", other));
	CHECK_EQ(-EAGAIN, run(r, OP_IPC_RECV, ro, small, 4, 0));
	CHECK_STR("to", rcv(r, other));
	/* send by channel id, from the creating ring */
	CHECK_EQ(2, snd(r, id, "id", 0));
	CHECK_STR("id", rcv(r, s));
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
}

static void check_broadcast(struct ring *r)
{
	uint32_t id;
	int a, b;

	/* the spec's example */
	CHECK_EQ(0, create(r, F_BROADCAST, 2, 16, 0600, 0, &id));
	a = attach(r, id, 0, SUB_RECV, NULL);
	b = attach(r, id, 0, SUB_RECV, NULL);
	CHECK_EQ(1, snd(r, id, "1", 0));
	CHECK_EQ(1, snd(r, id, "2", 0));
	CHECK_EQ(-ENOBUFS, snd(r, id, "3", 0));
	CHECK_STR("1", rcv(r, a));
	CHECK_STR("2", rcv(r, a));
	CHECK_EQ(-ENOBUFS, snd(r, id, "3", 0));
	CHECK_STR("1", rcv(r, b));
	CHECK_STR("2", rcv(r, b));
	CHECK_EQ(1, snd(r, id, "4", 0));
	CHECK_STR("4", rcv(r, a));
	CHECK_STR("4", rcv(r, b));
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
}

static void check_multicast(struct ring *r)
{
	char x[8] = { 0 }, y[8] = { 0 };
	uint32_t id;
	int a, b;

	CHECK_EQ(0, create(r, F_MULTICAST, 4, 16, 0600, 0, &id));
	a = attach(r, id, 0, SUB_RECV, NULL);
	b = attach(r, id, 0, SUB_RECV, NULL);
	CHECK_EQ(2, snd(r, id, "m1", 0));
	CHECK_EQ(2, snd(r, id, "m2", 0));
	CHECK_EQ(2, run(r, OP_IPC_RECV, a, x, 8, 0));
	CHECK_EQ(2, run(r, OP_IPC_RECV, b, y, 8, 0));
	CHECK(strcmp(x, y) != 0);
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
}

static void check_detach_destroy(struct ring *r)
{
	uint64_t key = next_key();
	uint32_t id;
	int s, ret;

	CHECK_EQ(0, create(r, 0, 4, 16, 0600, key, &id));
	s = attach(r, id, 0, SUB_BOTH, NULL);
	CHECK_EQ(1, snd(r, s, "a", 0));
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
	ret = reg(r, REG_DESTROY, NULL, id);
	CHECK(ret == 0 || ret == -ENOENT);
	/* still attached: keeps working */
	CHECK_STR("a", rcv(r, s));
	CHECK_EQ(1, snd(r, s, "b", 0));
	CHECK_STR("b", rcv(r, s));
	CHECK_EQ(0, reg(r, REG_DETACH, NULL, s));
	CHECK_EQ(-ENOENT, reg(r, REG_DETACH, NULL, s));
	CHECK_EQ(-ENOENT, run(r, OP_IPC_RECV, s, (char[4]){ 0 }, 4, 0));
}

/* A child with its own ring attaches by key and gets what we send by id */
static void check_cross_process(struct ring *r)
{
	uint64_t key = next_key();
	int status, p[2];
	uint32_t id;
	pid_t pid;

	CHECK_EQ(0, create(r, 0, 4, 32, 0600, key, &id));
	if (pipe(p))
		abort();
	pid = fork();
	if (!pid) {
		struct ring c;
		char buf[32];
		int s, n = 0, ret;

		if (ring_init(&c))
			_exit(1);
		s = attach(&c, 0, key, SUB_RECV, NULL);
		if (s <= 0)
			_exit(2);
		if (write(p[1], "", 1) != 1)
			_exit(3);
		while ((ret = run(&c, OP_IPC_RECV, s, buf, 32, 0)) == -EAGAIN && n++ < 100000)
			usleep(100);
		_exit(ret == 5 && !memcmp(buf, "cross", 5) ? 0 : 4);
	}
	CHECK_EQ(1, read(p[0], (char[1]){ 0 }, 1));
	CHECK_EQ(5, snd(r, id, "cross", 0));
	CHECK_EQ(pid, waitpid(pid, &status, 0));
	CHECK_EQ(0, WEXITSTATUS(status));

	/* across users, subject to mode */
	if (geteuid() == 0) {
		pid = fork();
		if (!pid) {
			struct ring c;

			if (setgid(65534) || setuid(65534) || ring_init(&c))
				_exit(1);
			if (attach(&c, 0, key, SUB_RECV, NULL) != -EACCES)
				_exit(2);
			if (snd(&c, id, "x", 0) != -EACCES)
				_exit(3);
			_exit(0);
		}
		CHECK_EQ(pid, waitpid(pid, &status, 0));
		CHECK_EQ(0, WEXITSTATUS(status));
	}
	CHECK_EQ(0, reg(r, REG_DESTROY, NULL, id));
}

int main(void)
{
	struct ring r;
	int ret;

	if (ring_init(&r)) {
		fprintf(stderr, "abi-spec: no io_uring\n");
		return 77;
	}
	ret = create(&r, 0, 2, 8, 0600, 0, NULL);
	if (ret == -EINVAL || ret == -EOPNOTSUPP) {
		fprintf(stderr, "abi-spec: kernel without IPC channels\n");
		return 77;
	}
	check_create(&r);
	check_attach(&r);
	check_unicast(&r);
	check_broadcast(&r);
	check_multicast(&r);
	check_detach_destroy(&r);
	check_cross_process(&r);
	if (failures) {
		fprintf(stderr, "abi-spec: %d checks failed\n", failures);
		return 1;
	}
	printf("abi-spec: all checks passed\n");
	return 0;
}
