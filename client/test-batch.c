/* SPDX-License-Identifier: MIT */
/*
 * test-batch.c - send batches (brokerd_bus_batch_begin()/_end()) without the
 * kernel: the channel layer's sends are wrapped, so the test counts what
 * goes to the kernel how. Outside a batch every signal is one send (one
 * io_uring_enter) before the emit returns; inside one, signals are only
 * queued, their bytes intact in the batch's buffer until the one submit
 * of the whole batch at its end (or of every 32), the kernel's error of
 * one send comes from the batch's end, and no emit allocates.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-alloc.h"
#include "client/bus-name.h"
#include "util/test.h"

#define NAME "org.test.Emitter"

/* --- The wrapped channel layer and malloc ----------------------------------------- */

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
int __wrap_chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			 unsigned int n);
int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len);
int __wrap_chan_send_queue(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			   unsigned int n, struct chan_send_op *op);
int __wrap_ring_submit_sends(struct ring *r, struct chan_send_op *ops, unsigned int n);
void __wrap_chan_close(struct ring *r, struct chan *c);

static bool counting;
static unsigned int n_alloc;

void *__wrap_malloc(size_t size)
{
	if (counting)
		n_alloc++;
	return __real_malloc(size);
}

/* What reached the kernel: sends one by one, queued ones, and the submits of queued ones. */
static struct {
	unsigned int sends, queued, submits, last_submit_n;
	const uint8_t *buf[64];
	size_t len[64];
} k;
/* The index (from 1) of the queued send the kernel fails with -ENOBUFS, 0: none. */
static unsigned int fail_queued;

int __wrap_chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			 unsigned int n)
{
	k.sends++;
	return (int)len;
}

int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len)
{
	return __wrap_chan_send_fds(r, c, buf, len, NULL, 0);
}

int __wrap_chan_send_queue(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			   unsigned int n, struct chan_send_op *op)
{
	ASSERT(k.queued < ELEMENTSOF(k.buf));
	k.buf[k.queued] = buf;
	k.len[k.queued] = len;
	k.queued++;
	*op = (struct chan_send_op){ .res = (int)len };
	return 0;
}

int __wrap_ring_submit_sends(struct ring *r, struct chan_send_op *ops, unsigned int n)
{
	k.submits++;
	k.last_submit_n = n;
	for (unsigned int i = 0; i < n; i++) {
		ops[i].done = true;
		if (k.queued - n + i + 1 == fail_queued)
			ops[i].res = -ENOBUFS;
	}
	return 0;
}

void __wrap_chan_close(struct ring *r, struct chan *c)
{
}

/* --- The bus under test -------------------------------------------------------------- */

static struct chan sig_send = { .kind = CHAN_SIGNAL_SEND, .rights = IOIPC_SUB_SEND };

/* A bus connected as far as emitting can tell, owning NAME with its signal chan. */
static brokerd_bus *bus_new(void)
{
	brokerd_bus *bus = NULL;
	struct bname *b;

	ASSERT_INT(bus_alloc(&bus, "/nonexistent/brokerd/socket"), ==, 0);
	bus->connected = true;
	bus->features = CTRL_FEATURE_CHANNELS;
	b = bname_get(bus, NAME, true);
	ASSERT(b);
	b->sig_send = &sig_send;
	return bus;
}

/* The queued send i carries the byte API's body of 64 bytes of value v at its end. */
static void check_body(unsigned int i, uint8_t v)
{
	uint8_t want[64];

	memset(want, v, sizeof(want));
	ASSERT(k.len[i] > sizeof(want));
	ASSERT(memcmp(k.buf[i] + k.len[i] - sizeof(want), want, sizeof(want)) == 0);
}

static void test_batch(void)
{
	brokerd_bus *bus = bus_new();
	uint8_t body[64];

	/* outside a batch: one send each, before the emit returns */
	for (int i = 0; i < 3; i++)
		ASSERT_INT(brokerd_bus_emit_signal(bus, NAME, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(k.sends, ==, 3);
	ASSERT_INT(k.queued, ==, 0);

	/* sixteen in a batch: queued, then one submit of all of them */
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, -EBUSY);
	counting = true;
	for (uint8_t i = 0; i < 16; i++) {
		memset(body, i, sizeof(body));
		ASSERT_INT(brokerd_bus_emit_signal(bus, NAME, "Tick", body, sizeof(body)), ==, 0);
	}
	counting = false;
	ASSERT_INT(n_alloc, ==, 0); /* no allocation per message */
	ASSERT_INT(k.queued, ==, 16);
	ASSERT_INT(k.submits, ==, 0);
	ASSERT_INT(k.sends, ==, 3);
	/* each its own bytes, none overwritten by the next: the caller's body was reused */
	for (unsigned int i = 0; i < 16; i++)
		check_body(i, (uint8_t)i);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(k.submits, ==, 1);
	ASSERT_INT(k.last_submit_n, ==, 16);
	ASSERT_INT(k.sends, ==, 3);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, -EINVAL);

	/* forty: a submit once 32 are queued, the rest at the end */
	k.queued = k.submits = 0;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	for (uint8_t i = 0; i < 40; i++) {
		memset(body, i, sizeof(body));
		ASSERT_INT(brokerd_bus_emit_signal(bus, NAME, "Tick", body, sizeof(body)), ==, 0);
	}
	ASSERT_INT(k.submits, ==, 1);
	ASSERT_INT(k.last_submit_n, ==, BUS_BATCH_MAX);
	/* the second part starts over in the buffer, after the first went */
	check_body(BUS_BATCH_MAX, BUS_BATCH_MAX);
	ASSERT(k.buf[BUS_BATCH_MAX] == k.buf[0]);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(k.submits, ==, 2);
	ASSERT_INT(k.last_submit_n, ==, 40 - BUS_BATCH_MAX);

	/* the kernel fails the third: the emit said 0, the end says why, the others went */
	k.queued = k.submits = 0;
	fail_queued = 3;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	for (int i = 0; i < 5; i++)
		ASSERT_INT(brokerd_bus_emit_signal(bus, NAME, "Tick", body, sizeof(body)), ==, 0);
	/* refused before the kernel: at once, and not queued */
	ASSERT_INT(brokerd_bus_emit_signal(bus, "org.test.NotOurs", "Tick", body, sizeof(body)), ==, -EPERM);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, -ENOBUFS);
	ASSERT_INT(k.last_submit_n, ==, 5);
	fail_queued = 0;

	/* the next batch starts without the old error; one left open ends when the bus closes */
	k.queued = k.submits = 0;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	ASSERT_INT(brokerd_bus_emit_signal(bus, NAME, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	ASSERT_INT(brokerd_bus_emit_signal(bus, NAME, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(k.submits, ==, 1);
	ASSERT(brokerd_bus_close(bus) == NULL);
	ASSERT_INT(k.submits, ==, 2);
	ASSERT_INT(brokerd_bus_batch_begin(NULL), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_batch_end(NULL), ==, -EINVAL);
}

int main(void)
{
	test_batch();
	printf("test-batch: ok\n");
	return 0;
}
