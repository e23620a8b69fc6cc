/* SPDX-License-Identifier: MIT */
/*
 * ipc-bench - side-by-side measurements of io_uring IPC channels, run inside
 * a QEMU guest on the project's kernel (tests/bench/run). Every figure is
 * compared with another one taken in the same run, so the ratios mean
 * something even under TCG, where absolute times do not.
 *
 *  1. idle: CPU time a receiver burns while waiting 1 s for a message that
 *     does not come, with IOIPC_RECV_WAIT versus polling on -EAGAIN, and the
 *     number of io-wq threads the waiting receive created.
 *  2. latency: round trip between two processes for 64 B .. 32 KiB, over a
 *     unicast channel pair (copying receive), a pipe pair and an AF_UNIX
 *     SOCK_SEQPACKET pair.
 *  3. zero-copy: receive cost per message for 64 B .. 32 KiB with copying
 *     receive versus IOIPC_RECV_ZC (read in place, then release); the
 *     zero-copy column should stay flat while the copy column grows.
 *  4. waiters: send/receive cost per message on a unicast channel while 1,
 *     16, 64 or 256 other receivers wait on it with IOIPC_RECV_WAIT and the
 *     messages are targeted elsewhere; nobody of them should be woken, so
 *     the cost should stay flat in the number of waiters.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/ioipc.h"

#define MAX_MSG (32 * 1024)

static const unsigned int sizes[] = { 64, 256, 1024, 4096, 16384, 32768 };
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

static void die(const char *what, int err)
{
	fprintf(stderr, "ipc-bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int count_iowq_threads(void)
{
	char path[300], comm[64];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-wrk", 7))
			n++;
		fclose(f);
	}
	closedir(dir);
	return n;
}

/* Submits one SQE and waits for its CQE; returns cqe->res. */
static int submit_wait(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int r;

	r = io_uring_submit_and_wait(ring, 1);
	if (r < 0)
		die("io_uring_submit_and_wait", r);
	r = io_uring_peek_cqe(ring, &cqe);
	if (r < 0)
		die("io_uring_peek_cqe", r);
	r = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return r;
}

static uint32_t channel_new(struct io_uring *ring, uint64_t key, uint32_t entries)
{
	struct ioipc_channel_create c = {
		.ring_entries = entries,
		.max_msg_size = MAX_MSG,
		.mode = 0600,
		.key = key,
	};
	int r = ioipc_channel_create(ring, &c);

	if (r < 0)
		die("channel create", r);
	return c.channel_id_out;
}

static uint32_t channel_join(struct io_uring *ring, uint64_t key, uint32_t flags,
			     struct ioipc_channel_attach *out)
{
	struct ioipc_channel_attach a = { .flags = flags, .key = key };
	int r = ioipc_channel_attach(ring, &a);

	if (r < 0)
		die("channel attach", r);
	if (out)
		*out = a;
	return a.local_id_out;
}

static int ipc_send(struct io_uring *ring, uint32_t id, const void *buf, unsigned int len)
{
	ioipc_prep_send(io_uring_get_sqe(ring), id, buf, len, 0);
	return submit_wait(ring);
}

static int ipc_recv(struct io_uring *ring, uint32_t id, void *buf, unsigned int len, unsigned int flags)
{
	ioipc_prep_recv(io_uring_get_sqe(ring), id, buf, len, flags);
	return submit_wait(ring);
}

/* ---- 1. idle waiting receive --------------------------------------------- */

static void bench_idle(void)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = 1 };
	char buf[64];
	double c0, wait_ms, poll_ms, t_end;
	uint32_t sub;
	int threads, r;

	if (io_uring_queue_init(8, &ring, 0) < 0)
		die("io_uring_queue_init", errno);
	channel_new(&ring, 0x1d1e, 8);
	sub = channel_join(&ring, 0x1d1e, IOIPC_SUB_RECV, NULL);

	/* waiting receive: one SQE, then sleep in io_uring_wait_cqe for 1 s */
	c0 = cpu_ms();
	ioipc_prep_recv(io_uring_get_sqe(&ring), sub, buf, sizeof(buf), IOIPC_RECV_WAIT);
	io_uring_submit(&ring);
	r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
	wait_ms = cpu_ms() - c0;
	threads = count_iowq_threads();
	if (r != -ETIME) {
		printf("idle: waiting receive completed early (%d): not measured\n", r);
		io_uring_queue_exit(&ring);
		return;
	}

	/* polling: resubmit a non-waiting receive until 1 s has passed */
	c0 = cpu_ms();
	t_end = now_ns() + 1e9;
	while (now_ns() < t_end) {
		r = ipc_recv(&ring, sub, buf, sizeof(buf), 0);
		if (r != -EAGAIN)
			break;
	}
	poll_ms = cpu_ms() - c0;

	printf("idle 1 s: waiting receive %.1f ms CPU (%d io-wq threads), "
	       "polling %.1f ms CPU; polling/waiting = %.0fx\n",
	       wait_ms, threads, poll_ms, poll_ms / (wait_ms > 0.1 ? wait_ms : 0.1));
	io_uring_queue_exit(&ring);
}

/* ---- 2. round-trip latency ---------------------------------------------- */

struct pingpong {
	const char *name;
	void (*setup)(void);
	void (*child)(unsigned int size, int iters);	/* echoes */
	double (*parent)(unsigned int size, int iters); /* ns per round trip */
};

static int fds_a[2], fds_b[2];
static char payload[MAX_MSG];

static void pipe_setup(void)
{
	if (pipe(fds_a) || pipe(fds_b))
		die("pipe", errno);
}

static void xread(int fd, char *buf, size_t len)
{
	while (len) {
		ssize_t n = read(fd, buf, len);

		if (n <= 0)
			die("read", n < 0 ? errno : EPIPE);
		buf += n;
		len -= n;
	}
}

static void pipe_child(unsigned int size, int iters)
{
	for (int i = 0; i < iters; i++) {
		xread(fds_a[0], payload, size);
		if (write(fds_b[1], payload, size) != (ssize_t)size)
			die("write", errno);
	}
}

static double pipe_parent(unsigned int size, int iters)
{
	double t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		if (write(fds_a[1], payload, size) != (ssize_t)size)
			die("write", errno);
		xread(fds_b[0], payload, size);
	}
	return (now_ns() - t0) / iters;
}

static void unix_setup(void)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds_a))
		die("socketpair", errno);
	fds_b[0] = fds_a[0];
	fds_b[1] = fds_a[1];
}

static void unix_child(unsigned int size, int iters)
{
	for (int i = 0; i < iters; i++) {
		if (recv(fds_a[1], payload, size, 0) != (ssize_t)size ||
		    send(fds_a[1], payload, size, 0) != (ssize_t)size)
			die("unix echo", errno);
	}
}

static double unix_parent(unsigned int size, int iters)
{
	double t0 = now_ns();

	for (int i = 0; i < iters; i++) {
		if (send(fds_a[0], payload, size, 0) != (ssize_t)size ||
		    recv(fds_a[0], payload, size, 0) != (ssize_t)size)
			die("unix ping", errno);
	}
	return (now_ns() - t0) / iters;
}

/* Two unicast channels, "ping" (parent to child) and "pong" (child to parent). */
#define KEY_PING 0xb0b1
#define KEY_PONG 0xb0b2

static struct io_uring owner_ring;

static void ipc_setup(void)
{
	if (io_uring_queue_init(8, &owner_ring, 0) < 0)
		die("io_uring_queue_init", errno);
	channel_new(&owner_ring, KEY_PING, 16);
	channel_new(&owner_ring, KEY_PONG, 16);
}

static void ipc_side(unsigned int size, int iters, uint64_t rx_key, uint64_t tx_key, int first_send,
		     double *ns)
{
	struct io_uring ring;
	uint32_t rx, tx;
	double t0;

	if (io_uring_queue_init(8, &ring, 0) < 0)
		die("io_uring_queue_init", errno);
	rx = channel_join(&ring, rx_key, IOIPC_SUB_RECV, NULL);
	tx = channel_join(&ring, tx_key, IOIPC_SUB_SEND, NULL);
	t0 = now_ns();
	for (int i = 0; i < iters; i++) {
		int r;

		if (first_send && (r = ipc_send(&ring, tx, payload, size)) != (int)size)
			die("ipc send", r);
		if ((r = ipc_recv(&ring, rx, payload, size, IOIPC_RECV_WAIT)) != (int)size)
			die("ipc recv", r);
		if (!first_send && (r = ipc_send(&ring, tx, payload, size)) != (int)size)
			die("ipc send", r);
	}
	if (ns)
		*ns = (now_ns() - t0) / iters;
	ioipc_channel_detach(&ring, rx);
	ioipc_channel_detach(&ring, tx);
	io_uring_queue_exit(&ring);
}

static void ipc_child(unsigned int size, int iters)
{
	ipc_side(size, iters, KEY_PING, KEY_PONG, 0, NULL);
}

static double ipc_parent(unsigned int size, int iters)
{
	double ns;

	ipc_side(size, iters, KEY_PONG, KEY_PING, 1, &ns);
	return ns;
}

static const struct pingpong transports[] = {
	{ "io_uring ipc", ipc_setup, ipc_child, ipc_parent },
	{ "pipe", pipe_setup, pipe_child, pipe_parent },
	{ "unix seqpacket", unix_setup, unix_child, unix_parent },
};
#define N_TRANSPORTS (sizeof(transports) / sizeof(transports[0]))

static void bench_latency(int iters)
{
	double ns[N_TRANSPORTS][N_SIZES];

	for (size_t t = 0; t < N_TRANSPORTS; t++) {
		transports[t].setup();
		for (size_t s = 0; s < N_SIZES; s++) {
			pid_t pid = fork();
			int status;

			if (pid < 0)
				die("fork", errno);
			if (pid == 0) {
				transports[t].child(sizes[s], iters);
				_exit(0);
			}
			ns[t][s] = transports[t].parent(sizes[s], iters);
			waitpid(pid, &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				die("echo child failed", EIO);
		}
	}

	printf("\nround trip, ns (%d iterations; ratios: ipc / other)\n", iters);
	printf("%8s %14s %14s %14s %10s %10s\n", "size", transports[0].name, transports[1].name,
	       transports[2].name, "ipc/pipe", "ipc/unix");
	for (size_t s = 0; s < N_SIZES; s++)
		printf("%8u %14.0f %14.0f %14.0f %10.2f %10.2f\n", sizes[s], ns[0][s], ns[1][s], ns[2][s],
		       ns[0][s] / ns[1][s], ns[0][s] / ns[2][s]);
}

/* ---- 3. zero-copy receive -------------------------------------------------- */

#ifdef IOIPC_RECV_ZC
static double recv_cost(struct io_uring *ring, uint32_t tx, uint32_t rx, const char *region,
			unsigned int size, int iters, int zc)
{
	static char buf[MAX_MSG];
	volatile unsigned long sum = 0;
	double spent = 0;

	for (int i = 0; i < iters; i++) {
		double t0;
		int r = ipc_send(ring, tx, payload, size);

		if (r != (int)size)
			die("zc send", r);
		t0 = now_ns();
		if (!zc) {
			r = ipc_recv(ring, rx, buf, size, 0);
			if (r != (int)size)
				die("copy recv", r);
			sum += buf[size - 1];
		} else {
			const struct ioipc_region_hdr *hdr = (const void *)region;
			const struct ioipc_msg_desc *desc;

			r = ipc_recv(ring, rx, NULL, 0, IOIPC_RECV_ZC);
			if (r == -EINVAL)
				return -1; /* a kernel without zero-copy receive */
			if (r < 0)
				die("zc recv", r);
			desc = (const void *)(region + hdr->desc_offset) + r * sizeof(*desc);
			if (desc->len != size)
				die("zc length", EIO);
			/* touch the message in place, as a reader would */
			sum += region[desc->offset + size - 1];
			/* release: sqe->addr names the held message */
			ioipc_prep_recv(io_uring_get_sqe(ring), rx, (void *)(uintptr_t)desc->msg_id, 0,
					IOIPC_RECV_RELEASE);
			r = submit_wait(ring);
			if (r < 0)
				die("zc release", r);
		}
		spent += now_ns() - t0;
	}
	(void)sum;
	return spent / iters;
}

static void bench_zerocopy(int iters)
{
	struct ioipc_channel_attach a;
	struct io_uring ring;
	uint32_t tx, rx;
	char *region;

	if (io_uring_queue_init(8, &ring, 0) < 0)
		die("io_uring_queue_init", errno);
	channel_new(&ring, 0x2c0, 16);
	tx = channel_join(&ring, 0x2c0, IOIPC_SUB_SEND, NULL);
	rx = channel_join(&ring, 0x2c0, IOIPC_SUB_RECV, &a);
	region = mmap(NULL, a.region_size, PROT_READ, MAP_SHARED, a.channel_fd, a.mmap_offset_out);
	if (region == MAP_FAILED)
		die("mmap region", errno);

	printf("\nreceive cost, ns per message (%d iterations)\n", iters);
	printf("%8s %12s %12s %10s\n", "size", "copy", "zero-copy", "copy/zc");
	for (size_t s = 0; s < N_SIZES; s++) {
		double copy = recv_cost(&ring, tx, rx, region, sizes[s], iters, 0);
		double zc = recv_cost(&ring, tx, rx, region, sizes[s], iters, 1);

		if (zc < 0) {
			printf("zero-copy receive: not supported by this kernel\n");
			break;
		}
		printf("%8u %12.0f %12.0f %10.2f\n", sizes[s], copy, zc, copy / zc);
	}
	munmap(region, a.region_size);
	io_uring_queue_exit(&ring);
}
#else
static void bench_zerocopy(int iters)
{
	printf("\nzero-copy receive: not in this build's ABI header\n");
}
#endif

/* ---- 4. waiters that are not woken -------------------------------------- */

static const unsigned int waiter_counts[] = { 1, 16, 64, 256 };
#define N_WAITERS (sizeof(waiter_counts) / sizeof(waiter_counts[0]))

/*
 * ns per message sent to, and received by, one subscriber while @n others
 * of the same channel wait in a ring of their own. The waiters' ring
 * belongs to this process, so whatever work waking them costs lands here.
 */
static double waiters_cost(unsigned int n, int iters)
{
	static char buf[64];
	struct ioipc_channel_attach a;
	struct io_uring ring, wring;
	static uint64_t key = 0x2d0;
	uint32_t tx, rx;
	double t0, spent;
	unsigned int i;

	if (io_uring_queue_init(8, &ring, 0) < 0)
		die("io_uring_queue_init", errno);
	if (io_uring_queue_init(512, &wring, 0) < 0)
		die("io_uring_queue_init", errno);
	key++;
	channel_new(&ring, key, 64);
	tx = channel_join(&ring, key, IOIPC_SUB_SEND, &a);
	close(a.channel_fd);
	rx = channel_join(&ring, key, IOIPC_SUB_RECV, &a);
	close(a.channel_fd);
	for (i = 0; i < n; i++) {
		uint32_t w = channel_join(&wring, key, IOIPC_SUB_RECV, &a);

		close(a.channel_fd);

		ioipc_prep_recv(io_uring_get_sqe(&wring), w, buf, sizeof(buf), IOIPC_RECV_WAIT);
	}
	if (io_uring_submit(&wring) != (int)n)
		die("submit waiters", EIO);

	t0 = now_ns();
	for (int it = 0; it < iters; it++) {
		ioipc_prep_send(io_uring_get_sqe(&ring), tx, payload, 64, rx);
		if (submit_wait(&ring) != 64)
			die("targeted send", EIO);
		if (ipc_recv(&ring, rx, buf, sizeof(buf), 0) != 64)
			die("receive", EIO);
	}
	spent = (now_ns() - t0) / iters;
	/* the waiters must still be waiting: none was handed a message */
	if (io_uring_cq_ready(&wring))
		die("a waiter completed", EIO);
	io_uring_queue_exit(&wring);
	io_uring_queue_exit(&ring);
	return spent;
}

static void bench_waiters(int iters)
{
	double base = 0;

	printf("\ntargeted send + receive, ns per message, with N other receivers waiting (%d iterations)\n",
	       iters);
	printf("%8s %12s %10s\n", "waiters", "ns/msg", "vs 1");
	for (size_t w = 0; w < N_WAITERS; w++) {
		/* best of three: TCG and a busy host only ever add time */
		double c = waiters_cost(waiter_counts[w], iters);

		for (int k = 0; k < 2; k++) {
			double again = waiters_cost(waiter_counts[w], iters);

			if (again < c)
				c = again;
		}

		if (!w)
			base = c;
		printf("%8u %12.0f %10.2f\n", waiter_counts[w], c, c / base);
	}
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 2000;

	memset(payload, 'x', sizeof(payload));
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 && !strcmp(argv[2], "waiters")) {
		bench_waiters(iters);
		return 0;
	}
	bench_idle();
	bench_latency(iters);
	bench_zerocopy(iters);
	bench_waiters(iters);
	return 0;
}
