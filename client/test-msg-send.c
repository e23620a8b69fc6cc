/* SPDX-License-Identifier: MIT */
/*
 * test-msg-send.c - the send side of calls copies a message's bytes once,
 * counted without the kernel: the channel layer's sends are wrapped (the
 * test sees the very buffer handed to the kernel) and so is malloc (it
 * counts what the library allocates per call). A call sent at once is
 * encoded into the bus's one send buffer, a typed call sent from where
 * its body was marshalled with its header written in front; a call that
 * waits for its chan is encoded once into a buffer sized to it (one whose
 * chan was revoked under its send copied once more, into its own); no
 * call allocates a buffer of CHMSG_MAX. Send batches
 * (brokerd_bus_batch_begin()/_end()): outside a batch every signal is one
 * send (one io_uring_enter) before the emit returns; inside one, signals
 * are only queued, their bytes intact in the batch's buffer until the one
 * submit of the whole batch at its end (or of every 32), the kernel's
 * error of one send comes from the batch's end, and no emit allocates.
 * What emits cost subscribers (IOIPC_SEND_LOST), as the wrapped sends
 * report it through the ring's on_lost as ring_reap() would: counted in
 * BROKERD_COUNTER_EMIT_LOST, told to the handler with the name before an
 * emit returns, in a batch only at its end, for a name gone without it;
 * nothing asked of a kernel that cannot tell.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/bus-alloc.h"
#include "client/bus-call.h"
#include "client/bus-name.h"
#include "util/test.h"

#define SVC     "org.test.Svc"
#define LATE    "org.test.Late"
#define EMITTER "org.test.Emitter"

/* --- The wrapped channel layer and malloc ----------------------------------------- */

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len);
int __wrap_chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			 unsigned int n);
int __wrap_chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			     unsigned int n, uint64_t cookie, bool *ret_receipt);
void __wrap_chan_close(struct ring *r, struct chan *c);
int __wrap_chan_send_queue(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			   unsigned int n, struct chan_send_op *op);
int __wrap_ring_submit_sends(struct ring *r, struct chan_send_op *ops, unsigned int n);

/*
 * Allocations the library made while counting of more than a struct
 * bus_out (a call that waits has one: its fds take 1 KiB), and their sizes.
 */
#define BIG (sizeof(struct bus_out) + 1)
static bool counting;
static unsigned int n_big, n_alloc;
static size_t big[16];

void *__wrap_malloc(size_t size)
{
	if (counting)
		n_alloc++;
	if (counting && size >= BIG) {
		if (n_big < ELEMENTSOF(big))
			big[n_big] = size;
		n_big++;
	}
	return __real_malloc(size);
}

/* The last send: the buffer the kernel would have copied from, and what it held. */
static struct {
	unsigned int n;
	const uint8_t *buf;
	size_t len;
	uint8_t bytes[CHMSG_MAX];
} sent;

/* What the next send returns instead of its length (0: none), once. */
static int send_error;
/* What the kernel tells a send of a chan that counts losses (chan_count_lost()) */
static uint32_t lost_next;

int __wrap_chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			 unsigned int n)
{
	int k = send_error;

	send_error = 0;
	if (k < 0)
		return k;
	ASSERT(len <= sizeof(sent.bytes));
	sent.n++;
	sent.buf = buf;
	sent.len = len;
	memcpy(sent.bytes, buf, len);
	/* as ring_reap() does with the CQE of a send that asked */
	if (c->count_lost && lost_next && r->on_lost)
		r->on_lost(r->lost_userdata, c->sub_id, lost_next);
	return (int)len;
}

int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len)
{
	return __wrap_chan_send_fds(r, c, buf, len, NULL, 0);
}

int __wrap_chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			     unsigned int n, uint64_t cookie, bool *ret_receipt)
{
	*ret_receipt = false;
	return __wrap_chan_send_fds(r, c, buf, len, fds, n);
}

void __wrap_chan_close(struct ring *r, struct chan *c)
{
}

/* Sends queued for a batch, and the submits of queued ones. */
static struct {
	unsigned int queued, submits, last_submit_n;
	const uint8_t *buf[64];
	size_t len[64];
} batch;
/* The index (from 1) of the queued send the kernel fails with -ENOBUFS, 0: none. */
static unsigned int fail_queued;

int __wrap_chan_send_queue(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			   unsigned int n, struct chan_send_op *op)
{
	ASSERT(batch.queued < ELEMENTSOF(batch.buf));
	batch.buf[batch.queued] = buf;
	batch.len[batch.queued] = len;
	batch.queued++;
	*op = (struct chan_send_op){ .res = (int)len, .count_lost = c->count_lost, .sub_id = c->sub_id };
	return 0;
}

int __wrap_ring_submit_sends(struct ring *r, struct chan_send_op *ops, unsigned int n)
{
	batch.submits++;
	batch.last_submit_n = n;
	for (unsigned int i = 0; i < n; i++) {
		ops[i].done = true;
		if (batch.queued - n + i + 1 == fail_queued)
			ops[i].res = -ENOBUFS;
		else if (ops[i].count_lost && lost_next && r->on_lost)
			r->on_lost(r->lost_userdata, ops[i].sub_id, lost_next);
	}
	return 0;
}

/* --- The bus under test -------------------------------------------------------------- */

static struct chan inbox = { .kind = CHAN_INBOX, .rights = IOIPC_SUB_RECV };
static struct chan call_send = { .kind = CHAN_CALL_SEND, .rights = IOIPC_SUB_SEND };
static struct chan sig_send = { .kind = CHAN_SIGNAL_SEND, .rights = IOIPC_SUB_SEND };

/* A bus connected as far as calls can tell, SVC's call chan open, LATE's opening. */
static brokerd_bus *bus_new(void)
{
	brokerd_bus *bus = NULL;
	struct bname *b;

	ASSERT_INT(bus_alloc(&bus, "/nonexistent/brokerd/socket"), ==, 0);
	bus->connected = true;
	bus->features = CTRL_FEATURE_CHANNELS;
	bus->inbox = &inbox;
	b = bname_get(bus, SVC, true);
	ASSERT(b);
	b->call_send = &call_send;
	call_send.owner = b;
	b = bname_get(bus, LATE, true);
	ASSERT(b);
	/* an OPEN_CALL on its way (call_open_async() asks nothing more): calls wait */
	b->opening = true;
	/* a name we own, with its signal chan */
	b = bname_get(bus, EMITTER, true);
	ASSERT(b);
	b->sig_send = &sig_send;
	return bus;
}

static int on_reply(brokerd_msg *reply, int error, void *userdata)
{
	return 0;
}

/* The call waiting for name's chan (the newest: new slots go first). */
static struct bus_out *queued(brokerd_bus *bus, const char *name)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->queued && strcmp(s->bname->name, name) == 0)
			return s->queued;
	ASSERT(!"no call waits");
	return NULL;
}

/* The decoded message in buf, its body the "ay" of bytes (n of them). */
static void check_bytes_call(const uint8_t *buf, size_t len, const uint8_t *bytes, size_t n)
{
	struct chmsg m;
	uint32_t blen;

	ASSERT_INT(chmsg_decode(&m, buf, len), ==, 0);
	ASSERT_INT(m.type, ==, CHMSG_CALL);
	ASSERT_STR(m.signature, "ay");
	ASSERT_INT(m.body_len, ==, 4 + n);
	memcpy(&blen, m.body, 4);
	ASSERT_INT(blen, ==, n);
	ASSERT(memcmp((const uint8_t *)m.body + 4, bytes, n) == 0);
}

/* --- Tests ------------------------------------------------------------------------- */

/*
 * The byte API's call sent at once: its bytes written once, straight
 * into the bus's send buffer (the one the kernel copies from), nothing
 * allocated for it beyond its slot.
 */
static void test_bytes_now(void)
{
	brokerd_bus *bus = bus_new();
	static const size_t sizes[] = { 1, 100, 4000, 8000 };
	static uint8_t bytes[8000];

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 7 + 1);
	/* the first send makes the bus's buffer, once */
	ASSERT_INT(brokerd_bus_call_async(bus, NULL, SVC, "Warm", "x", 1, 0, NULL, NULL), ==, 0);
	ASSERT(bus->send_buf);
	for (size_t s = 0; s < ELEMENTSOF(sizes); s++) {
		unsigned int n = sent.n;

		counting = true;
		n_big = 0;
		ASSERT_INT(brokerd_bus_call_async(bus, NULL, SVC, "Ping", bytes, sizes[s], 0, on_reply, NULL), ==,
			   0);
		counting = false;
		ASSERT_INT(sent.n, ==, n + 1);
		ASSERT(sent.buf == bus->send_buf);
		ASSERT_INT(n_big, ==, 0);
		check_bytes_call(sent.bytes, sent.len, bytes, sizes[s]);
	}
	ASSERT(brokerd_bus_close(bus) == NULL);
}

/* A typed call of body "sua{sv}" and a byte array of n, to name, sealed. */
static brokerd_msg *typed_call(brokerd_bus *bus, const char *name, size_t n)
{
	static uint8_t bytes[20000];
	brokerd_msg *m = NULL;

	ASSERT(n <= sizeof(bytes));
	for (size_t i = 0; i < n; i++)
		bytes[i] = (uint8_t)(i * 11 + 3);
	ASSERT_INT(brokerd_msg_new_call(bus, &m, name, "/p", "org.test.I", "T"), ==, 0);
	ASSERT_INT(brokerd_msg_append(m, "sua{sv}", "text", 42u, 0), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(m, 'y', bytes, n), ==, 0);
	ASSERT_INT(brokerd_msg_seal(m), ==, 0);
	return m;
}

/* buf holds a call whose body is m's, byte for byte. */
static void check_typed_call(const uint8_t *buf, size_t len, brokerd_msg *m)
{
	struct chmsg d;

	ASSERT_INT(chmsg_decode(&d, buf, len), ==, 0);
	ASSERT_INT(d.type, ==, CHMSG_CALL);
	ASSERT_STR(d.member, "T");
	ASSERT_STR(d.signature, m->signature);
	ASSERT_INT(d.body_len, ==, m->data_len);
	ASSERT(memcmp(d.body, m->data, m->data_len) == 0);
}

/*
 * A typed call sent at once goes from where its body was marshalled (the
 * one copy of its values into bytes): the buffer the kernel copies from
 * ends where the body ends, its header written in the room in front.
 * Before, its body was copied again, after its header, into a buffer of
 * CHMSG_MAX allocated per call.
 */
static void test_typed_now(void)
{
	brokerd_bus *bus = bus_new();
	static const size_t sizes[] = { 0, 100, 6000 };

	ASSERT_INT(brokerd_bus_call_async(bus, NULL, SVC, "Warm", "x", 1, 0, NULL, NULL), ==, 0);
	for (size_t s = 0; s < ELEMENTSOF(sizes); s++) {
		brokerd_msg *m = typed_call(bus, SVC, sizes[s]);
		unsigned int n = sent.n;

		counting = true;
		n_big = 0;
		ASSERT_INT(brokerd_bus_send(bus, m), ==, 0);
		counting = false;
		ASSERT_INT(sent.n, ==, n + 1);
		ASSERT(sent.buf + sent.len == (const uint8_t *)m->data + m->data_len);
		ASSERT(sent.buf >= (const uint8_t *)m->owned_data);
		ASSERT_INT(n_big, ==, 0);
		ASSERT(bus->send_room == NULL); /* taken */
		check_typed_call(sent.bytes, sent.len, m);
		brokerd_msg_unref(m);
	}
	/* brokerd_bus_call_msg() too: sent in place before it waits (for a reply that cannot come: no socket) */
	{
		brokerd_msg *m = typed_call(bus, SVC, 100), *reply = NULL;
		unsigned int n = sent.n;

		ASSERT(brokerd_bus_call_msg(bus, m, 1000, &reply) < 0 && !reply);
		ASSERT_INT(sent.n, ==, n + 1);
		ASSERT(sent.buf + sent.len == (const uint8_t *)m->data + m->data_len);
		ASSERT(bus->send_room == NULL);
		check_typed_call(sent.bytes, sent.len, m);
		brokerd_msg_unref(m);
	}
	ASSERT(brokerd_bus_close(bus) == NULL);
}

/*
 * A call that waits for its chan (OPEN_CALL on its way) is encoded once,
 * into a buffer of its own of exactly its length: the byte API's bytes
 * and a typed call's body alike, and a body too large for a slot as its
 * header alone, the body in a memfd.
 */
static void test_queued(void)
{
	brokerd_bus *bus = bus_new();
	static const size_t big_sizes[] = { 20000, 1U << 20 };
	int sv[2];
	static uint8_t bytes[3000];
	struct bus_out *o;
	brokerd_msg *m;

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 5 + 2);
	ASSERT_INT(brokerd_bus_call_async(bus, NULL, SVC, "Warm", "x", 1, 0, NULL, NULL), ==, 0);

	counting = true;
	n_big = 0;
	ASSERT_INT(brokerd_bus_call_async(bus, NULL, LATE, "Ping", bytes, 3000, 0, on_reply, NULL), ==, 0);
	counting = false;
	o = queued(bus, LATE);
	ASSERT(!o->borrowed && o->buf != bus->send_buf);
	ASSERT_INT(n_big, ==, 1);
	ASSERT_INT(big[0], ==, o->len);
	ASSERT_INT(o->n_fds, ==, 0);
	check_bytes_call(o->buf, o->len, bytes, 3000);

	/* typed: copied after its header, the message it lies in may be gone when the chan comes */
	m = typed_call(bus, LATE, 3000);
	counting = true;
	n_big = 0;
	ASSERT_INT(brokerd_bus_send(bus, m), ==, 0);
	counting = false;
	ASSERT(bus->send_room == NULL);
	o = queued(bus, LATE);
	ASSERT(!o->borrowed && o->buf != bus->send_buf);
	ASSERT(o->buf + o->len <= (uint8_t *)m->owned_data || o->buf >= (uint8_t *)m->data + m->data_len);
	ASSERT_INT(n_big, ==, 1);
	ASSERT_INT(big[0], ==, o->len);
	check_typed_call(o->buf, o->len, m);
	brokerd_msg_unref(m);

	/*
	 * Larger than a slot of a chan whose size is not known yet, and than
	 * any slot: the header alone; the body went to the memfd.
	 */
	for (size_t i = 0; i < ELEMENTSOF(big_sizes); i++) {
		size_t size = big_sizes[i];
		uint8_t *body = calloc(1, size);
		struct chmsg d;

		ASSERT(body);
		counting = true;
		n_big = 0;
		ASSERT_INT(brokerd_bus_call_async(bus, NULL, LATE, "Big", body, size, 0, on_reply, NULL), ==, 0);
		counting = false;
		o = queued(bus, LATE);
		ASSERT_INT(o->n_fds, ==, 1);
		ASSERT(o->len < 256);
		ASSERT_INT(n_big, ==, 0); /* no more than the small header */
		ASSERT_INT(chmsg_decode(&d, o->buf, o->len), ==, 0);
		ASSERT(d.body_in_fd);
		ASSERT_INT(d.body_len, ==, 4 + size);
		free(body);
	}

	/*
	 * Its chan revoked under the send: it waits for the new one (an
	 * OPEN_CALL to a socket nobody answers), copied once more into its own.
	 */
	ASSERT_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), ==, 0);
	bus->ctrl_fd = sv[0];
	send_error = -EACCES;
	ASSERT_INT(brokerd_bus_call_async(bus, NULL, SVC, "Again", bytes, 3000, 0, on_reply, NULL), ==, 0);
	ASSERT(bname_get(bus, SVC, false)->call_send == NULL);
	o = queued(bus, SVC);
	ASSERT(!o->borrowed && o->buf != bus->send_buf);
	check_bytes_call(o->buf, o->len, bytes, 3000);
	ASSERT(brokerd_bus_close(bus) == NULL);
	close(sv[1]);
}

/* The queued send i carries the byte API's body of 64 bytes of value v at its end. */
static void check_body(unsigned int i, uint8_t v)
{
	uint8_t want[64];

	memset(want, v, sizeof(want));
	ASSERT(batch.len[i] > sizeof(want));
	ASSERT(memcmp(batch.buf[i] + batch.len[i] - sizeof(want), want, sizeof(want)) == 0);
}

static void test_batch(void)
{
	brokerd_bus *bus = bus_new();
	uint8_t body[64];

	sent.n = 0;

	/* outside a batch: one send each, before the emit returns */
	for (int i = 0; i < 3; i++)
		ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(sent.n, ==, 3);
	ASSERT_INT(batch.queued, ==, 0);

	/* sixteen in a batch: queued, then one submit of all of them */
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, -EBUSY);
	counting = true;
	n_alloc = 0;
	for (uint8_t i = 0; i < 16; i++) {
		memset(body, i, sizeof(body));
		ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	}
	counting = false;
	ASSERT_INT(n_alloc, ==, 0); /* no allocation per message */
	ASSERT_INT(batch.queued, ==, 16);
	ASSERT_INT(batch.submits, ==, 0);
	ASSERT_INT(sent.n, ==, 3);
	/* each its own bytes, none overwritten by the next: the caller's body was reused */
	for (unsigned int i = 0; i < 16; i++)
		check_body(i, (uint8_t)i);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(batch.submits, ==, 1);
	ASSERT_INT(batch.last_submit_n, ==, 16);
	ASSERT_INT(sent.n, ==, 3);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, -EINVAL);

	/* forty: a submit once 32 are queued, the rest at the end */
	batch.queued = batch.submits = 0;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	for (uint8_t i = 0; i < 40; i++) {
		memset(body, i, sizeof(body));
		ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	}
	ASSERT_INT(batch.submits, ==, 1);
	ASSERT_INT(batch.last_submit_n, ==, BUS_BATCH_MAX);
	/* the second part starts over in the buffer, after the first went */
	check_body(BUS_BATCH_MAX, BUS_BATCH_MAX);
	ASSERT(batch.buf[BUS_BATCH_MAX] == batch.buf[0]);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(batch.submits, ==, 2);
	ASSERT_INT(batch.last_submit_n, ==, 40 - BUS_BATCH_MAX);

	/* the kernel fails the third: the emit said 0, the end says why, the others went */
	batch.queued = batch.submits = 0;
	fail_queued = 3;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	for (int i = 0; i < 5; i++)
		ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	/* refused before the kernel: at once, and not queued */
	ASSERT_INT(brokerd_bus_emit_signal(bus, "org.test.NotOurs", "Tick", body, sizeof(body)), ==, -EPERM);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, -ENOBUFS);
	ASSERT_INT(batch.last_submit_n, ==, 5);
	fail_queued = 0;

	/* the next batch starts without the old error; one left open ends when the bus closes */
	batch.queued = batch.submits = 0;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(batch.submits, ==, 1);
	ASSERT(brokerd_bus_close(bus) == NULL);
	ASSERT_INT(batch.submits, ==, 2);
	ASSERT_INT(brokerd_bus_batch_begin(NULL), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_batch_end(NULL), ==, -EINVAL);
}

/* What the emit-lost handler heard. */
static struct {
	unsigned int calls, unnamed;
	uint64_t total;
	bool in_emit; /* an emit of an open batch is running: no call may come */
} heard;

static void on_emit_lost(brokerd_bus *bus, const char *name, uint64_t n, void *userdata)
{
	ASSERT(userdata == &heard);
	ASSERT(!heard.in_emit);
	ASSERT(n > 0);
	if (name)
		ASSERT_STR(name, EMITTER);
	else
		heard.unnamed++;
	heard.calls++;
	heard.total += n;
}

static void emit_in_batch(brokerd_bus *bus)
{
	uint8_t body[16] = { 0 };

	heard.in_emit = true;
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	heard.in_emit = false;
}

static void test_emit_lost(void)
{
	brokerd_bus *bus = bus_new();
	uint8_t body[16] = { 0 };

	/* a kernel that cannot tell: nothing set, nothing asked, nothing counted */
	bus->ring.send_lost = -1;
	bname_sig_send_counts(bus, &sig_send); /* as attaching it does */
	ASSERT_INT(brokerd_bus_set_emit_lost_handler(bus, on_emit_lost, &heard), ==, -EOPNOTSUPP);
	lost_next = 2;
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT(!sig_send.count_lost);
	ASSERT_INT(brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST), ==, 0);
	ASSERT(brokerd_bus_close(bus) == NULL);

	/* one that tells */
	bus = bus_new();
	bus->ring.send_lost = 1;
	sig_send.sub_id = 7;
	bname_sig_send_counts(bus, &sig_send);
	batch.queued = batch.submits = 0;
	ASSERT_INT(brokerd_bus_set_emit_lost_handler(bus, on_emit_lost, &heard), ==, 0);
	/* outside a batch: told before the emit returns; a send that cost nothing is not told */
	lost_next = 3;
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT(sig_send.count_lost);
	ASSERT_INT(heard.calls, ==, 1);
	ASSERT_INT(heard.total, ==, 3);
	lost_next = 0;
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(heard.calls, ==, 1);
	ASSERT_INT(brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST), ==, 3);

	/* forty in a batch (a submit at 32 on the way): counted as they complete, told once, at the end */
	lost_next = 2;
	ASSERT_INT(brokerd_bus_batch_begin(bus), ==, 0);
	for (int i = 0; i < 40; i++)
		emit_in_batch(bus);
	ASSERT_INT(batch.submits, ==, 1);
	ASSERT_INT(heard.calls, ==, 1);
	ASSERT_INT(brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST), ==, 3 + 2 * BUS_BATCH_MAX);
	ASSERT_INT(brokerd_bus_batch_end(bus), ==, 0);
	ASSERT_INT(batch.submits, ==, 2);
	ASSERT_INT(heard.calls, ==, 2);
	ASSERT_INT(heard.total, ==, 3 + 2 * 40);
	ASSERT_INT(brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST), ==, 3 + 2 * 40);

	/* a send that completed after its name's chan went: told without a name, with the next emit */
	bus->ring.on_lost(bus->ring.lost_userdata, 99, 5);
	ASSERT_INT(heard.calls, ==, 2);
	lost_next = 0;
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(heard.calls, ==, 3);
	ASSERT_INT(heard.unnamed, ==, 1);
	ASSERT_INT(heard.total, ==, 3 + 2 * 40 + 5);
	ASSERT_INT(brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST), ==, 3 + 2 * 40 + 5);

	/* cleared: counted still, told to nobody */
	lost_next = 2;
	ASSERT_INT(brokerd_bus_set_emit_lost_handler(bus, NULL, NULL), ==, 0);
	ASSERT_INT(brokerd_bus_emit_signal(bus, EMITTER, "Tick", body, sizeof(body)), ==, 0);
	ASSERT_INT(heard.calls, ==, 3);
	ASSERT_INT(brokerd_bus_get_counter(bus, BROKERD_COUNTER_EMIT_LOST), ==, 3 + 2 * 40 + 5 + 2);
	lost_next = 0;
	sig_send.count_lost = false;
	ASSERT(brokerd_bus_close(bus) == NULL);
}

int main(void)
{
	test_bytes_now();
	test_typed_now();
	test_queued();
	test_batch();
	test_emit_lost();
	printf("test-msg-send: ok\n");
	return 0;
}
