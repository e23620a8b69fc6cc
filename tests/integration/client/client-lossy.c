/* SPDX-License-Identifier: MIT */
/*
 * client-lossy - loss on a lossy signal channel is never silent. The test
 * owns org.brokerd.test.Lossy and emits 600 numbered signals as fast as it
 * can, with no window, the first 300 one by one and the rest in send batches
 * of 20 (brokerd_bus_batch_begin()): no emit and no batch may fail (the
 * channel is lossy, nobody holds the emitter back). A subscriber that runs its loop and one that does not
 * dispatch until the emitter is done must each account for every signal:
 * received, or counted as lost by the library (the slot's lost handler,
 * called before the signal after each gap with exactly the gap's size,
 * brokerd_slot_get_lost() and BROKERD_COUNTER_LOST agree). The stalled one
 * must have lost some (600 signals do not fit the channel's ring and its
 * receive buffers), and it still receives the last signals in order. A
 * monitor of the name that stalls the same way accounts for every signal
 * too, its loss counted on its monitor slot.
 *
 * The emitter learns the same loss from its side: the kernel tells each
 * emit how many subscribers had not read the signal whose place in the
 * ring it took (IOIPC_SEND_LOST), and the library counts it
 * (BROKERD_COUNTER_EMIT_LOST) and tells the emit-lost handler, after each
 * emit outside a batch and only at the end of a batch. Every signal a
 * subscriber is told it lost was counted by exactly one emit, and the two
 * subscribers are the name's only ones (the monitor is not counted): the
 * emitter's count must equal the two subscribers' lost counts added up.
 */
#include "client/bus-introspect.h"
#include "tests/integration/client/testlib.h"

#define NAME  "org.brokerd.test.Lossy"
#define N     600
#define BATCH 20

struct sub {
	int ready[2], go[2], out[2];
	bool stall;
	uint64_t next;	   /* the sequence number expected next */
	uint64_t pending;  /* lost, as the handler said, not yet seen as a gap */
	uint64_t received, lost_calls, lost_total;
	brokerd_slot *slot;
};

static void on_lost(brokerd_slot *slot, uint64_t n, void *u)
{
	struct sub *s = u;

	if (slot != s->slot || n == 0)
		FAIL("lost handler called with slot %p, n %" PRIu64, (void *)slot, n);
	s->pending += n;
	s->lost_calls++;
	s->lost_total += n;
}

static int on_signal(brokerd_msg *m, void *u)
{
	struct sub *s = u;
	const void *body;
	size_t size;
	uint64_t seq;

	if (brokerd_msg_get_body(m, &body, &size) < 0 || size != sizeof(seq))
		FAIL("a signal of %zu bytes", size);
	memcpy(&seq, body, sizeof(seq));
	/* every gap was announced, with its exact size, just before */
	if (seq != s->next + s->pending)
		FAIL("got %" PRIu64 ", expected %" PRIu64 " + %" PRIu64 " announced lost", seq, s->next,
		     s->pending);
	s->pending = 0;
	s->next = seq + 1;
	s->received++;
	if (seq == N - 1) {
		uint64_t slot_lost = 0;

		CHECK_R(brokerd_slot_get_lost(s->slot, &slot_lost), 0);
		if (slot_lost != s->lost_total || brokerd_bus_get_counter(m->bus, BROKERD_COUNTER_LOST) != slot_lost)
			FAIL("lost: handler %" PRIu64 ", slot %" PRIu64 ", bus %" PRIu64, s->lost_total, slot_lost,
			     brokerd_bus_get_counter(m->bus, BROKERD_COUNTER_LOST));
		t_say(s->out[1], "%" PRIu64 " %" PRIu64 " %" PRIu64, s->received, s->lost_total, s->lost_calls);
		brokerd_bus_exit(m->bus, 0);
	}
	return 0;
}

static int subscriber(void *arg)
{
	struct sub *s = arg;
	brokerd_bus *bus = t_open();
	char buf[8];

	CHECK_R(brokerd_bus_subscribe(bus, &s->slot, NAME, "Seq", on_signal, s), 0);
	CHECK_R(brokerd_slot_set_lost_handler(s->slot, on_lost), 0);
	t_say(s->ready[1], "ready");
	/* stalled: not a single dispatch until the emitter is done */
	if (s->stall)
		CHECK(t_hear(s->go[0], buf, sizeof(buf), 30000) == 0);
	return brokerd_bus_run(bus) < 0;
}

static void on_monitor(brokerd_bus *bus, const char *name, unsigned int kind, brokerd_msg *m, int error,
		       void *u)
{
	if (!m || strcmp(brokerd_msg_get_member(m), "Seq") != 0)
		return;
	(void)on_signal(m, u);
}

/* A monitor of the name: stalls until the emitter is done, then counts like a subscriber. */
static int monitor(void *arg)
{
	struct sub *s = arg;
	brokerd_bus *bus = t_open();
	unsigned int have = 0;
	char buf[8];
	int k;

	k = bus_monitor_start(bus, &s->slot, NAME, on_monitor, s);
	if (k < 0)
		FAIL("monitor: %s", strerror(-k));
	CHECK_R(brokerd_slot_set_lost_handler(s->slot, on_lost), 0);
	/* brokerd announced k channels: wait until every one is attached */
	for (int i = 0; i < 500 && (int)have < k; i++) {
		(void)brokerd_bus_process(bus);
		have = 0;
		for (struct monitor_chan *mc = bus->monitors; mc; mc = mc->next)
			have++;
		if ((int)have < k)
			usleep(10000);
	}
	if ((int)have < k)
		FAIL("monitor: %u of %d channels attached", have, k);
	t_say(s->ready[1], "ready");
	CHECK(t_hear(s->go[0], buf, sizeof(buf), 30000) == 0);
	return brokerd_bus_run(bus) < 0;
}

/* What the emitter's handler heard. */
static struct {
	bool emitting_in_batch; /* inside an emit of an open batch: no call may come */
	uint64_t total, calls;
} told;

static void on_emit_lost(brokerd_bus *bus, const char *name, uint64_t n, void *u)
{
	if (u != &told || !name || strcmp(name, NAME) != 0 || n == 0)
		FAIL("emit-lost handler called with name %s, n %" PRIu64, name ?: "(null)", n);
	if (told.emitting_in_batch)
		FAIL("emit-lost handler called inside a batch's emit");
	told.total += n;
	told.calls++;
}

static uint64_t check_sub(struct sub *s, const char *what, bool must_lose)
{
	char line[128];
	uint64_t received, lost, calls;

	CHECK(t_hear(s->out[0], line, sizeof(line), 20000) == 0);
	if (sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64, &received, &lost, &calls) != 3)
		FAIL("%s said '%s'", what, line);
	t_log("%s: received %" PRIu64 ", lost %" PRIu64 " (told %" PRIu64 " times)", what, received, lost, calls);
	if (received + lost != N)
		FAIL("%s: %" PRIu64 " received + %" PRIu64 " lost != %d emitted", what, received, lost, N);
	if (must_lose && (lost == 0 || calls == 0))
		FAIL("%s: stalled for %d signals and lost none", what, N);
	return lost;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	struct sub fast = { 0 }, slow = { .stall = true }, mon = { .stall = true };
	uint64_t sub_lost, emit_lost;
	pid_t pf, ps, pm;
	int r;

	r = brokerd_bus_set_emit_lost_handler(bus, on_emit_lost, &told);
	if (r == -EOPNOTSUPP)
		SKIP("the kernel does not tell an emitter what it overwrote (IOIPC_SEND_LOST)");
	CHECK_R(r, 0);
	CHECK_R(brokerd_bus_request_name(bus, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	t_pipe(fast.ready), t_pipe(fast.out), t_pipe(fast.go);
	t_pipe(slow.ready), t_pipe(slow.out), t_pipe(slow.go);
	pf = t_fork(subscriber, &fast);
	ps = t_fork(subscriber, &slow);
	t_expect(fast.ready[0], "ready", 5000);
	t_expect(slow.ready[0], "ready", 5000);
	t_pipe(mon.ready), t_pipe(mon.out), t_pipe(mon.go);
	pm = t_fork(monitor, &mon);
	t_expect(mon.ready[0], "ready", 10000);
	/* the first half one by one, the second in send batches of BATCH (one submit each) */
	for (uint64_t i = 0; i < N; i++) {
		if (i >= N / 2 && (i - N / 2) % BATCH == 0)
			CHECK_R(brokerd_bus_batch_begin(bus), 0);
		told.emitting_in_batch = i >= N / 2;
		r = brokerd_bus_emit_signal(bus, NAME, "Seq", &i, sizeof(i));
		told.emitting_in_batch = false;
		if (r != 0)
			FAIL("emit %" PRIu64 " of %d: %s", i, N, strerror(-r));
		if (i >= N / 2 && ((i - N / 2) % BATCH == BATCH - 1 || i == N - 1) &&
		    (r = brokerd_bus_batch_end(bus)) != 0)
			FAIL("batch ending with %" PRIu64 " of %d: %s", i, N, strerror(-r));
	}
	t_say(slow.go[1], "go");
	t_say(mon.go[1], "go");
	sub_lost = check_sub(&fast, "running subscriber", false);
	sub_lost += check_sub(&slow, "stalled subscriber", true);
	(void)check_sub(&mon, "stalled monitor", true);
	emit_lost = brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST);
	t_log("emitter: told of %" PRIu64 " lost (%" PRIu64 " handler calls, counter %" PRIu64 ")", told.total,
	      told.calls, emit_lost);
	if (told.total != emit_lost)
		FAIL("emit-lost handler heard %" PRIu64 ", BROKERD_COUNTER_EMIT_LOST says %" PRIu64, told.total,
		     emit_lost);
	if (emit_lost != sub_lost)
		FAIL("emitter told of %" PRIu64 " lost, the subscribers lost %" PRIu64, emit_lost, sub_lost);
	CHECK_R(t_wait(pf, 5000), 0);
	CHECK_R(t_wait(ps, 5000), 0);
	CHECK_R(t_wait(pm, 5000), 0);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
