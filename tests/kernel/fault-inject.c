/* SPDX-License-Identifier: MIT */
/*
 * fault-inject.c - drives the error paths of IORING_REGISTER_IPC_CHANNEL_CREATE
 * and IORING_REGISTER_IPC_CHANNEL_ATTACH (by key and by capability fd), and of
 * IORING_OP_IPC_SEND and IORING_OP_IPC_RECV carrying file descriptors, with
 * per-task fault injection on the debug kernel: failslab and fail_usercopy
 * are set up in debugfs for this task only (task-filter, make-it-fail),
 * and /proc/thread-self/fail-nth makes the n-th allocation or user copy of
 * the call fail, for n = 1, 2, ... until the call gets through without
 * reaching the n-th. Each failed call must return an error code and leave
 * nothing behind: the key can be created again, a broadcast channel is not
 * held back by a half-attached subscriber, no file descriptor is left
 * open, no reference to a file sent is kept, a message whose receive
 * failed is received with its fds next time, and kmemleak finds nothing
 * allocated by io_uring unreferenced. A kernel splat fails the run through
 * tests/vm/vm-run.
 *
 * tests/kernel/run runs it on kernels built with CONFIG_FAULT_INJECTION_DEBUG_FS
 * and CONFIG_DEBUG_KMEMLEAK (kernel/config/debug.config). Built against
 * the kernel's uapi headers. Exit status 0 on success, 1 on failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEBUGFS "/sys/kernel/debug"
#define MAX_NTH 500 /* no path of these calls has this many fault points */
#define ENTRIES 4

static int failures;

#define CHECK(cond, ...)                                              \
	do {                                                          \
		if (!(cond)) {                                        \
			printf("# FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                          \
			printf("\n");                                 \
			failures++;                                   \
		}                                                     \
	} while (0)

struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	unsigned int tail;
};

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int ring_init(struct ring *r)
{
	struct io_uring_params p;
	size_t sq_size, cq_size;
	void *sq;

	memset(&p, 0, sizeof(p));
	memset(r, 0, sizeof(*r));
	r->fd = syscall(__NR_io_uring_setup, 8, &p);
	if (r->fd < 0)
		return -errno;
	sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	sq = mmap(NULL, sq_size > cq_size ? sq_size : cq_size, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || r->sqes == MAP_FAILED)
		return -ENOMEM;
	r->sq_tail = sq + p.sq_off.tail;
	r->sq_mask = sq + p.sq_off.ring_mask;
	r->sq_array = sq + p.sq_off.array;
	r->cq_head = sq + p.cq_off.head;
	r->cq_tail = sq + p.cq_off.tail;
	r->cq_mask = sq + p.cq_off.ring_mask;
	r->cqes = sq + p.cq_off.cqes;
	r->tail = *r->sq_tail;
	return 0;
}

/* Runs one IPC SQE and returns its result */
static int ring_run(struct ring *r, int op, uint32_t id, void *buf, unsigned int len)
{
	unsigned int idx = r->tail & *r->sq_mask, head;
	struct io_uring_sqe *sqe = &r->sqes[idx];
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	int res;

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = op;
	sqe->fd = id;
	sqe->addr = (unsigned long)buf;
	sqe->len = len;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, ++r->tail, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, NULL, 0) != 1)
		return -10000;
	head = *r->cq_head;
	while (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		if (poll(&pfd, 1, 5000) <= 0)
			return -10001;
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static int reg(struct ring *r, unsigned int op, void *arg, unsigned int nr)
{
	return syscall(__NR_io_uring_register, r->fd, op, arg, nr) < 0 ? -errno : 0;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/*
 * Arms fail-nth for the next call: its n-th fault point fails. Returns
 * whether the fault was injected during the call; the fd stays open, so
 * that opening it is not one of the call's fault points.
 */
static int nth_fd = -1;

static void nth_arm(unsigned int n)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%u", n);
	if (pwrite(nth_fd, buf, strlen(buf), 0) < 0) {
		printf("# cannot arm fail-nth: %s\n", strerror(errno));
		exit(1);
	}
}

static int nth_injected(void)
{
	char buf[16] = "";

	/*
	 * The read's own copy-out is a fault point too: when the call
	 * did not reach the n-th point, the read may be where it lands
	 * (EFAULT). Either way that means "not injected in the call".
	 */
	if (pread(nth_fd, buf, sizeof(buf) - 1, 0) < 0)
		return 0;
	if (atoi(buf) != 0) {
		/* disarm; if this write's own copy is the n-th, that disarms too */
		if (pwrite(nth_fd, "0", 1, 0) < 0 && errno != EFAULT)
			printf("# cannot disarm fail-nth: %s\n", strerror(errno));
		return 0;
	}
	return 1;
}

static int injected_error(int ret)
{
	return ret == -ENOMEM || ret == -EFAULT;
}

static int create(struct ring *r, uint32_t flags, uint64_t key, uint32_t *id)
{
	struct io_uring_ipc_channel_create c = {
		.flags = flags,
		.ring_entries = ENTRIES,
		.max_msg_size = 64,
		.mode = 0600,
		.key = key,
	};
	int ret = reg(r, IORING_REGISTER_IPC_CHANNEL_CREATE, &c, 1);

	if (!ret)
		*id = c.channel_id_out;
	return ret;
}

/* CREATE fails cleanly at each of its fault points, and the key stays free */
static int test_create(struct ring *r)
{
	const uint64_t key = 0x6661756c742d31;
	int before = count_fds(), ret;
	unsigned int n;
	uint32_t id;

	for (n = 1; n < MAX_NTH; n++) {
		nth_arm(n);
		ret = create(r, 0, key, &id);
		if (!nth_injected()) {
			CHECK(ret == 0, "CREATE without a fault: %d", ret);
			if (!ret)
				CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DESTROY, NULL, id) == 0, "DESTROY");
			break;
		}
		/* a fault the call absorbed must leave a working channel */
		CHECK(ret == 0 || injected_error(ret), "CREATE fault %u: %d", n, ret);
		if (!ret)
			CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DESTROY, NULL, id) == 0,
			      "DESTROY after CREATE fault %u", n);
		ret = create(r, 0, key, &id);
		CHECK(ret == 0, "key not free after CREATE fault %u: %d", n, ret);
		if (!ret)
			CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DESTROY, NULL, id) == 0, "DESTROY");
		CHECK(count_fds() == before, "fds leaked by CREATE fault %u", n);
	}
	printf("# CREATE: %u fault points\n", n - 1);
	return n - 1;
}

/*
 * ATTACH fails cleanly at each of its fault points, by key and through a
 * capability fd: no fd is left behind, and no half-attached receiver holds
 * the broadcast channel back (twice its ring of messages still passes to
 * the one real receiver).
 */
static int test_attach(struct ring *r, struct ring *rx, int by_fd)
{
	const uint64_t key = 0x6661756c742d32 + by_fd;
	struct io_uring_ipc_channel_attach a;
	int before, cap = -1, ret, i;
	uint32_t id, sub;
	unsigned int n;
	char buf[64];

	if (create(r, IOIPC_F_BROADCAST, key, &id))
		return printf("# FAIL: CREATE\n"), failures++, 0;
	memset(&a, 0, sizeof(a));
	a.channel_id = id;
	a.flags = IOIPC_SUB_RECV;
	if (reg(rx, IORING_REGISTER_IPC_CHANNEL_ATTACH, &a, 1))
		return printf("# FAIL: ATTACH of the receiver\n"), failures++, 0;
	close(a.channel_fd);
	sub = a.local_id_out;
	if (by_fd) {
		struct io_uring_ipc_channel_mint m = { .channel_id = id, .rights = IOIPC_SUB_RECV };

		if (reg(r, IORING_REGISTER_IPC_CHANNEL_MINT, &m, 1))
			return printf("# FAIL: MINT\n"), failures++, 0;
		cap = m.fd_out;
	}
	before = count_fds();
	for (n = 1; n < MAX_NTH; n++) {
		memset(&a, 0, sizeof(a));
		a.channel_id = by_fd ? (uint32_t)cap : 0;
		a.key = by_fd ? 0 : key;
		a.flags = IOIPC_SUB_RECV | (by_fd ? IOIPC_SUB_BY_FD : 0);
		nth_arm(n);
		ret = reg(r, IORING_REGISTER_IPC_CHANNEL_ATTACH, &a, 1);
		if (!nth_injected()) {
			CHECK(ret == 0, "ATTACH without a fault: %d", ret);
			if (!ret) {
				close(a.channel_fd);
				CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DETACH, NULL, a.local_id_out) == 0,
				      "DETACH");
			}
			break;
		}
		CHECK(ret == 0 || injected_error(ret), "ATTACH fault %u: %d", n, ret);
		if (!ret) {
			close(a.channel_fd);
			CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DETACH, NULL, a.local_id_out) == 0,
			      "DETACH after ATTACH fault %u", n);
		}
		CHECK(count_fds() == before, "fds leaked by ATTACH fault %u", n);
		for (i = 0; i < 2 * ENTRIES; i++) {
			ret = ring_run(r, IORING_OP_IPC_SEND, id, "m", 1);
			CHECK(ret == 1, "send %d after ATTACH fault %u: %d", i, n, ret);
			ret = ring_run(rx, IORING_OP_IPC_RECV, sub, buf, sizeof(buf));
			CHECK(ret == 1, "receive %d after ATTACH fault %u: %d", i, n, ret);
		}
	}
	printf("# ATTACH %s: %u fault points\n", by_fd ? "by fd" : "by key", n - 1);
	if (cap >= 0)
		close(cap);
	CHECK(reg(rx, IORING_REGISTER_IPC_CHANNEL_DETACH, NULL, sub) == 0, "DETACH");
	CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DESTROY, NULL, id) == 0, "DESTROY");
	return n - 1;
}

/*
 * Runs @tmpl with the n-th fault point failing (none for n == 0), and says
 * in *injected whether it did. A fault in io_uring's own submission leaves
 * the SQE unconsumed: it is then submitted again, unarmed.
 */
static int run_nth(struct ring *r, const struct io_uring_sqe *tmpl, unsigned int n, int *injected)
{
	unsigned int idx = r->tail & *r->sq_mask, head;
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	int ret, res;

	r->sqes[idx] = *tmpl;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, ++r->tail, __ATOMIC_RELEASE);
	if (n)
		nth_arm(n);
	ret = syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, NULL, 0);
	*injected = n && nth_injected();
	if (ret != 1 && syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, NULL, 0) != 1)
		return -10000;
	head = *r->cq_head;
	while (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		if (poll(&pfd, 1, 5000) <= 0)
			return -10001;
	res = r->cqes[head & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

/* A receive with IOIPC_RECV_FDS: closes the fds it got, returns their number */
static int recv_close(struct ring *rx, const struct io_uring_sqe *recv, unsigned int n, int *injected)
{
	int *buf = (int *)(uintptr_t)recv->addr, ret, i;

	ret = run_nth(rx, recv, n, injected);
	if (ret < 8)
		return ret < 0 ? ret : -10002;
	for (i = 0; i < buf[0]; i++)
		if (buf[2 + i] >= 0)
			close(buf[2 + i]);
	return buf[0];
}

/*
 * A send carrying fds, and a receive installing them, fail cleanly at each
 * of their fault points: a failed send publishes nothing and keeps no
 * reference (the pipe's write end is closed everywhere in the end), a
 * failed receive installs nothing and gives the message back, fds and all.
 */
static int test_fds(struct ring *r, struct ring *rx)
{
	struct io_uring_ipc_channel_attach a;
	struct io_uring_sqe send, recv;
	int p[2], fds[2], before, injected, got, ret, i;
	unsigned int n, points;
	static int buf[64];
	uint32_t id, sub;
	char c;

	if (create(r, IOIPC_F_BROADCAST, 0x6661756c742d33, &id) || pipe2(p, O_NONBLOCK))
		return printf("# FAIL: CREATE\n"), failures++, 0;
	memset(&a, 0, sizeof(a));
	a.channel_id = id;
	a.flags = IOIPC_SUB_RECV;
	if (reg(rx, IORING_REGISTER_IPC_CHANNEL_ATTACH, &a, 1))
		return printf("# FAIL: ATTACH of the receiver\n"), failures++, 0;
	close(a.channel_fd);
	sub = a.local_id_out;
	fds[0] = fds[1] = p[1];
	memset(&send, 0, sizeof(send));
	send.opcode = IORING_OP_IPC_SEND;
	send.fd = id;
	send.addr = (unsigned long)"m";
	send.len = 1;
	send.ioprio = IOIPC_SEND_FDS;
	send.addr3 = (unsigned long)fds;
	send.off = 2;
	memset(&recv, 0, sizeof(recv));
	recv.opcode = IORING_OP_IPC_RECV;
	recv.fd = sub;
	recv.addr = (unsigned long)buf;
	recv.len = sizeof(buf);
	recv.ioprio = IOIPC_RECV_FDS;
	before = count_fds();
	for (n = 1; n < MAX_NTH; n++) {
		ret = run_nth(r, &send, n, &injected);
		CHECK(ret == 1 || (injected && injected_error(ret)), "send fault %u: %d", n, ret);
		got = recv_close(rx, &recv, 0, &i);
		CHECK(got == (ret == 1 ? 2 : -EAGAIN), "receive after send fault %u: %d", n, got);
		CHECK(count_fds() == before, "fds leaked by send fault %u", n);
		if (!injected)
			break;
	}
	points = n - 1;
	printf("# SEND with fds: %u fault points\n", points);
	for (n = 1; n < MAX_NTH; n++) {
		CHECK(run_nth(r, &send, 0, &i) == 1, "send before receive fault %u", n);
		got = recv_close(rx, &recv, n, &injected);
		if (got < 0) {
			CHECK(injected && injected_error(got), "receive fault %u: %d", n, got);
			got = recv_close(rx, &recv, 0, &i);
		}
		CHECK(got == 2, "receive after receive fault %u: %d", n, got);
		CHECK(count_fds() == before, "fds leaked by receive fault %u", n);
		if (!injected)
			break;
	}
	printf("# RECV with fds: %u fault points\n", n - 1);
	points += n - 1;
	close(p[1]);
	/* the last reference may go in task_work or a worker: give it time */
	for (i = 0; i < 200 && read(p[0], &c, 1) < 0; i++)
		usleep(10000);
	CHECK(i < 200, "a reference to the pipe's write end is left behind");
	close(p[0]);
	CHECK(reg(rx, IORING_REGISTER_IPC_CHANNEL_DETACH, NULL, sub) == 0, "DETACH");
	CHECK(reg(r, IORING_REGISTER_IPC_CHANNEL_DESTROY, NULL, id) == 0, "DESTROY");
	return points;
}

/* Fault injection for this task only, stepped by fail-nth */
static int setup(void)
{
	static const char *const attrs[] = { "failslab", "fail_usercopy" };
	char path[128];
	unsigned int i;

	if (mount("debugfs", DEBUGFS, "debugfs", 0, NULL) && errno != EBUSY) {
		printf("# cannot mount debugfs: %s\n", strerror(errno));
		return -1;
	}
	for (i = 0; i < 2; i++) {
		static const char *const set[][2] = {
			{ "task-filter", "Y" }, { "probability", "0" }, { "interval", "1" },
			{ "times", "-1" },	{ "space", "0" },	{ "verbose", "0" },
		};
		unsigned int j;

		for (j = 0; j < sizeof(set) / sizeof(set[0]); j++) {
			snprintf(path, sizeof(path), DEBUGFS "/%s/%s", attrs[i], set[j][0]);
			if (write_str(path, set[j][1])) {
				printf("# cannot set %s\n", path);
				return -1;
			}
		}
	}
	/* GFP_KERNEL allocations are what these paths make */
	if (write_str(DEBUGFS "/failslab/ignore-gfp-wait", "N") ||
	    write_str("/proc/self/make-it-fail", "1")) {
		printf("# cannot set up failslab for this task\n");
		return -1;
	}
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	if (nth_fd < 0) {
		printf("# no /proc/thread-self/fail-nth: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* Suspected leaks whose allocation went through io_uring */
static int kmemleak_report(void)
{
	char line[512], block[8192];
	size_t used = 0;
	int leaks = 0, ours = 0;
	FILE *f;

	if (write_str(DEBUGFS "/kmemleak", "scan")) {
		printf("# kmemleak scan failed\n");
		return -1;
	}
	f = fopen(DEBUGFS "/kmemleak", "r");
	if (!f)
		return -1;
	block[0] = 0;
	for (;;) {
		int end = !fgets(line, sizeof(line), f);

		if (end || !strncmp(line, "unreferenced object", 19)) {
			if (ours) {
				printf("# leak:\n%s", block);
				leaks++;
			}
			if (end)
				break;
			used = 0;
			ours = 0;
		}
		if (strstr(line, "io_ipc") || strstr(line, "io_uring"))
			ours = 1;
		if (used + strlen(line) < sizeof(block)) {
			memcpy(block + used, line, strlen(line) + 1);
			used += strlen(line);
		}
	}
	fclose(f);
	return leaks;
}

int main(void)
{
	struct ring r, rx;
	int leaks;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (setup())
		return 1;
	if (write_str(DEBUGFS "/kmemleak", "scan") || write_str(DEBUGFS "/kmemleak", "clear")) {
		printf("# no kmemleak\n");
		return 1;
	}
	if (ring_init(&r) || ring_init(&rx)) {
		printf("# io_uring_setup failed\n");
		return 1;
	}
	CHECK(test_create(&r) > 2, "CREATE has fewer fault points than its two copies");
	CHECK(test_attach(&r, &rx, 0) > 2, "ATTACH has fewer fault points than expected");
	CHECK(test_attach(&r, &rx, 1) > 2, "ATTACH by fd has fewer fault points than expected");
	/* at least the allocation of the send and the copy-out of the receive */
	CHECK(test_fds(&r, &rx) >= 2, "SEND and RECV with fds have fewer fault points than expected");
	write_str("/proc/self/make-it-fail", "0");
	close(r.fd);
	close(rx.fd);
	/* kmemleak reports only objects older than five seconds */
	sleep(6);
	leaks = kmemleak_report();
	CHECK(leaks == 0, "%d suspected leaks through io_uring", leaks);
	printf("# %s\n", failures ? "failed" : "passed");
	return failures ? 1 : 0;
}
