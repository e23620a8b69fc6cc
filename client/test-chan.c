/* SPDX-License-Identifier: MIT */
/*
 * test-chan.c - host tests of chan.c's parts that do not need the kernel's
 * channels: the ring and its eventfd (a NOP completion must signal it and
 * leave the ready list alone; the low-latency spin sees it), decoding of completed receives (info header
 * counted or not, truncation, short and failed results), and that attaching
 * on a kernel without channels fails cleanly instead of crashing.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/chan.h"
#include "util/test.h"

static struct chan *fake_received(size_t buf_payload, int res, uint32_t len, const char *payload)
{
	struct chan *c = calloc(1, sizeof(*c));
	struct ioipc_msg_info info = { .pid = 7, .uid = 8, .gid = 9, .badge = 42, .len = len };

	c->buf_size = sizeof(info) + buf_payload;
	c->buf = calloc(1, c->buf_size);
	memcpy(c->buf, &info, sizeof(info));
	memcpy(c->buf + sizeof(info), payload, strlen(payload));
	c->res = res;
	return c;
}

static void free_chan(struct chan *c)
{
	free(c->buf);
	free(c);
}

static void test_message(void)
{
	const struct ioipc_msg_info *info;
	const void *p;
	size_t len;
	struct chan *c;

	/* res counts the 32-byte header and the payload */
	c = fake_received(64, 32 + 5, 5, "hello");
	ASSERT(chan_message(c, &info, &p, &len) == 0);
	ASSERT(len == 5 && memcmp(p, "hello", 5) == 0 && info->badge == 42 && info->uid == 8);
	free_chan(c);
	/* a kernel counting the payload alone */
	c = fake_received(64, 5, 5, "hello");
	ASSERT(chan_message(c, &info, &p, &len) == 0);
	ASSERT(len == 5 && memcmp(p, "hello", 5) == 0);
	free_chan(c);
	/* empty payload */
	c = fake_received(64, 32, 0, "");
	ASSERT(chan_message(c, &info, &p, &len) == 0 && len == 0);
	free_chan(c);
	/* truncated: the message was longer than the buffer */
	c = fake_received(4, 32 + 4, 100, "abcd");
	ASSERT(chan_message(c, &info, &p, &len) == -EMSGSIZE);
	free_chan(c);
	/* shorter than the header, or an error */
	c = fake_received(64, 10, 0, "");
	ASSERT(chan_message(c, &info, &p, &len) == -EBADMSG);
	c->res = -ENOENT;
	ASSERT(chan_message(c, &info, &p, &len) == -ENOENT);
	free_chan(c);
}

static void test_ring(void)
{
	struct ring r;
	struct io_uring_sqe *sqe;
	struct pollfd pfd;
	struct chan *c = NULL;
	int fd, k;

	k = ring_init(&r, 8);
	if (k < 0) {
		printf("test-chan: no io_uring here (%s), ring tests skipped\n", strerror(-k));
		return;
	}
	pfd = (struct pollfd){ .fd = r.efd, .events = POLLIN };
	ASSERT(poll(&pfd, 1, 0) == 0);
	sqe = io_uring_get_sqe(&r.uring);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, 2); /* an ignored tag */
	ASSERT(io_uring_submit(&r.uring) == 1);
	ASSERT(poll(&pfd, 1, 1000) == 1);
	ring_ack(&r);
	ASSERT(ring_reap(&r) == 1);
	ASSERT(ring_pop_ready(&r) == NULL);
	ASSERT(poll(&pfd, 1, 0) == 0);

	/* low-latency mode: the spin sees a completion without a syscall, or gives up in time */
	{
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		ASSERT(!ring_spin(&r, 2000));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* microsecond clock reads: up to 1 us short of the 2 ms */
		ASSERT((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) >= 1990000L);
		sqe = io_uring_get_sqe(&r.uring);
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, 2);
		ASSERT(io_uring_submit(&r.uring) == 1);
		ASSERT(ring_spin(&r, 1000000));
		ring_ack(&r);
		ASSERT(ring_reap(&r) == 1);
	}

	/* no channels in this kernel: attach fails with an errno, no crash */
	fd = eventfd(0, EFD_CLOEXEC);
	k = chan_attach(&r, fd, IOIPC_SUB_RECV, 128, 1, NULL, &c);
	ASSERT(k < 0 && c == NULL);
	close(fd);
	ASSERT(chan_attach(&r, -1, IOIPC_SUB_RECV, 128, 1, NULL, &c) == -EINVAL);
	ring_deinit(&r);
	ASSERT(r.efd == -1 && !r.initialized);
	ring_deinit(&r); /* twice is harmless */
}

int main(void)
{
	test_message();
	test_ring();
	printf("test-chan: ok\n");
	return 0;
}
