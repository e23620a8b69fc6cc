/* SPDX-License-Identifier: MIT */
/*
 * test-restart.c - the stored states of a restart as a fault or an
 * attacker leaves them (brokerd/README.md, "Restart"): a native state
 * (restart.c) and a D-Bus state (dbus-restart.c) written by hand as the
 * previous brokerd writes them, then cut at every length, flipped at every
 * bit, given another version, counts larger than the record, and states
 * that parse but do not hold together (a channel held twice or of the
 * wrong kind, a peer twice in a queue, unknown flags, a ring whose offsets
 * point outside it). Each must be refused as a whole, before anything is
 * rebuilt, and none may read outside its bytes (the sanitizer build runs
 * this too). The record numbers are the stored format's, spelled out here
 * on purpose: a change to them is a change of version.
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/dbus-front.h"
#include "brokerd/log.h"
#include "brokerd/restart-io.h"
#include "brokerd/restart.h"
#include "protocol/ctrl.h"
#include "util/macro.h"
#include "util/test.h"

/* native records (restart.c) */
enum { REC_RING = 1, REC_BUS, REC_CHANNEL, REC_CONN, REC_NAME };
/* D-Bus records (dbus-restart.c) */
enum { DREC_FRONT = 1, DREC_CONN, DREC_NAME, DREC_REPLY };

#define NONE UINT32_MAX

/* What a native state holds; each test changes one thing of the default. */
struct nat {
	struct io_uring_params params;
	uint32_t bus_signal;
	uint32_t kinds[4]; /* channels 1..4: the bus's, the inbox, the name's call and signal */
	uint32_t grants;   /* of channel 1 (its count, as written) */
	uint32_t conn_flags;
	uint32_t inbox;	       /* the connection's inbox channel */
	uint32_t call, signal; /* the name's */
	uint32_t owner_flags;
	int owners;	       /* entries of the queue: the connection, this many times */
	int names;	       /* name records */
	int rings;	       /* ring records */
	bool conn_last;	       /* the connection record after the names */
	uint32_t version;      /* 1: without the end record */
	size_t boundaries[16]; /* where records begin, and the end */
	size_t n_boundaries;
};

static void nat_default(struct nat *n)
{
	/* as a 6.12 kernel answers io_uring_setup(64) without flags */
	*n = (struct nat){
		.params = { .sq_entries = 64,
			    .cq_entries = 128,
			    .features = 0x3fff,
			    .sq_off = { .head = 0,
					.tail = 64,
					.ring_mask = 256,
					.ring_entries = 264,
					.flags = 276,
					.dropped = 272,
					.array = 2368 },
			    .cq_off = { .head = 128,
					.tail = 192,
					.ring_mask = 260,
					.ring_entries = 268,
					.overflow = 284,
					.cqes = 320,
					.flags = 280 } },
		.bus_signal = 1,
		.kinds = { CTRL_CHANNEL_SIGNAL, CTRL_CHANNEL_INBOX, CTRL_CHANNEL_CALL, CTRL_CHANNEL_SIGNAL },
		.grants = 1,
		.conn_flags = 0x1, /* HELLO */
		.inbox = 2,
		.call = 3,
		.signal = 4,
		.owners = 1,
		.names = 1,
		.rings = 1,
		.version = 2,
	};
}

static void put_socket(struct wbuf *w, uint64_t ino, uint32_t pid)
{
	wbuf_put_u64(w, 0x16);
	wbuf_put_u64(w, ino);
	wbuf_put_u32(w, pid);
	wbuf_put_u32(w, 1000);
	wbuf_put_u32(w, 1000);
}

static void nat_conn(struct nat *n, struct wbuf *w)
{
	size_t at = wbuf_record_begin(w, REC_CONN);

	put_socket(w, 4242, 77);
	wbuf_put_u64(w, 5); /* peer id */
	wbuf_put_u32(w, n->conn_flags);
	wbuf_put_u32(w, n->inbox);
	wbuf_put_u32(w, 3); /* caps */
	wbuf_put_u64(w, 1); /* subscriptions */
	wbuf_record_end(w, at);
}

/* The end record of a state of version 2: how many records came before it. */
static void put_end(struct wbuf *w)
{
	uint32_t records = w->records;
	size_t at = wbuf_record_begin(w, RESTART_REC_END);

	wbuf_put_u32(w, records);
	wbuf_record_end(w, at);
}

static void mark(struct nat *n, struct wbuf *w)
{
	if (n->n_boundaries < ELEMENTSOF(n->boundaries))
		n->boundaries[n->n_boundaries++] = w->len;
}

static void nat_write(struct nat *n, struct wbuf *w)
{
	size_t at;

	*w = (struct wbuf){ 0 };
	n->n_boundaries = 0;
	wbuf_put(w, "BRKDSTAT", 8);
	wbuf_put_u32(w, n->version);
	wbuf_put_u32(w, 1);
	for (int i = 0; i < n->rings; i++) {
		mark(n, w);
		at = wbuf_record_begin(w, REC_RING);
		wbuf_put(w, &n->params, sizeof(n->params));
		wbuf_put_u32(w, 7);
		wbuf_record_end(w, at);
	}
	mark(n, w);
	at = wbuf_record_begin(w, REC_BUS);
	wbuf_put_u64(w, 1024);
	wbuf_put_u32(w, 0);
	wbuf_put_u32(w, n->bus_signal);
	wbuf_record_end(w, at);
	for (uint32_t id = 1; id <= 4; id++) {
		mark(n, w);
		at = wbuf_record_begin(w, REC_CHANNEL);
		wbuf_put_u32(w, id);
		wbuf_put_u32(w, n->kinds[id - 1]);
		wbuf_put_u32(w, 1000);
		wbuf_put_str(w, id == 1 ? "org.brokerd" : id == 2 ? ":1.5" : "org.example.Name");
		wbuf_put_u32(w, id == 1 ? n->grants : 0);
		if (id == 1) {
			wbuf_put_u64(w, 5);
			wbuf_put_u32(w, 2);
		}
		wbuf_record_end(w, at);
	}
	if (!n->conn_last) {
		mark(n, w);
		nat_conn(n, w);
	}
	for (int k = 0; k < n->names; k++) {
		mark(n, w);
		at = wbuf_record_begin(w, REC_NAME);
		wbuf_put_str(w, "org.example.Name");
		wbuf_put_u32(w, n->call);
		wbuf_put_u32(w, n->signal);
		wbuf_put_u32(w, (uint32_t)n->owners);
		for (int i = 0; i < n->owners; i++) {
			wbuf_put_u64(w, 5);
			wbuf_put_u32(w, n->owner_flags);
		}
		wbuf_record_end(w, at);
	}
	if (n->conn_last) {
		mark(n, w);
		nat_conn(n, w);
	}
	mark(n, w);
	if (n->version >= 2)
		put_end(w);
	ASSERT(!w->oom);
}

/* restart_state_check() of n as written. */
static int nat_check(struct nat *n)
{
	struct wbuf w;
	int r;

	nat_write(n, &w);
	r = restart_state_check(w.data, w.len);
	free(w.data);
	return r;
}

static void test_native_valid(void)
{
	struct nat n;

	nat_default(&n);
	ASSERT_INT(nat_check(&n), ==, 0);
	/* one a brokerd from before the end record wrote */
	n.version = 1;
	ASSERT_INT(nat_check(&n), ==, 0);
	printf("# a native state as brokerd writes it is taken, and as one of version 1 wrote it: ok\n");
}

static void test_native_cut_and_flipped(void)
{
	struct nat n;
	struct wbuf w;
	size_t taken = 0, flips = 0;

	nat_default(&n);
	nat_write(&n, &w);
	/* every length short of the whole, at a record's end or not: nothing to take */
	for (size_t len = 0; len < w.len; len++)
		ASSERT_INT(restart_state_check(w.data, len), !=, 0);
	/* every bit flipped: never read outside, and the header's flips always refused */
	for (size_t bit = 0; bit < w.len * 8; bit++, flips++) {
		int r;

		w.data[bit / 8] ^= (uint8_t)(1U << (bit % 8));
		r = restart_state_check(w.data, w.len);
		w.data[bit / 8] ^= (uint8_t)(1U << (bit % 8));
		ASSERT(r == 0 || r == -EBADMSG || r == -EPROTO);
		if (bit < 16 * 8)
			ASSERT_INT(r, !=, 0);
		taken += r == 0;
	}
	printf("# a native state of %zu bytes: all %zu shorter lengths refused; of %zu one-bit flips "
	       "%zu taken (ids, credentials, counts and rights that stay consistent): ok\n",
	       w.len, w.len, flips, taken);
	free(w.data);
}

static void test_native_refused(void)
{
	struct nat n;
	struct wbuf w;
	uint8_t *p;

	/* another version, no clean mark */
	nat_default(&n);
	nat_write(&n, &w);
	w.data[8] = 3;
	ASSERT_INT(restart_state_check(w.data, w.len), ==, -EPROTO);
	w.data[8] = 2;
	w.data[12] = 0;
	ASSERT_INT(restart_state_check(w.data, w.len), ==, -EPROTO);
	/* a record's length beyond the state */
	w.data[12] = 1;
	p = w.data + n.boundaries[0] + 4;
	p[0] = p[1] = p[2] = p[3] = 0xff;
	ASSERT_INT(restart_state_check(w.data, w.len), ==, -EBADMSG);
	free(w.data);

	/* a grant count larger than the record */
	nat_default(&n);
	n.grants = UINT32_MAX;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* an owner queue larger than the record */
	nat_default(&n);
	n.owners = 1;
	nat_write(&n, &w);
	p = w.data + n.boundaries[n.n_boundaries - 2] + 8 + 4 + strlen("org.example.Name") + 8;
	ASSERT_INT(p[0], ==, 1);
	p[0] = p[1] = p[2] = 0xff;
	ASSERT_INT(restart_state_check(w.data, w.len), ==, -EBADMSG);
	free(w.data);

	/* two rings, two names of one name, records out of order */
	nat_default(&n);
	n.rings = 2;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.names = 2;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.conn_last = true;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	printf("# another version, no clean mark, lengths and counts beyond the record, records twice or "
	       "out of order: refused: ok\n");
}

static void test_native_inconsistent(void)
{
	struct nat n;

	/* one channel held by two (the name's call is the connection's inbox): freed twice */
	nat_default(&n);
	n.call = 2;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* a channel of another kind than its use */
	nat_default(&n);
	n.kinds[2] = CTRL_CHANNEL_INBOX;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.kinds[0] = 0;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* a channel nobody refers to */
	nat_default(&n);
	n.signal = NONE;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* a channel that is not there */
	nat_default(&n);
	n.bus_signal = 9;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* a peer twice in one queue, flags no owner has */
	nat_default(&n);
	n.owners = 2;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.owner_flags = 0x100;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* a connection flag no brokerd sets; HELLO without a peer is checked since the start */
	nat_default(&n);
	n.conn_flags = 0x1 | 0x80;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	/* ring offsets outside the ring, entries that are no power of two, flags brokerd never sets */
	nat_default(&n);
	n.params.sq_off.tail = 1U << 20;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.params.cq_off.head = n.params.cq_off.cqes;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.params.sq_entries = 48;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	nat_default(&n);
	n.params.flags = IORING_SETUP_SQPOLL;
	ASSERT_INT(nat_check(&n), ==, -EBADMSG);
	printf("# states that parse but do not hold together (channels shared, of another kind, unheld or "
	       "missing; queues with a peer twice or unknown flags; ring offsets outside the ring): "
	       "refused: ok\n");
}

/* What a D-Bus state holds. */
struct dbs {
	const char *guid;
	int fronts;
	uint32_t in_len;    /* as written; the bytes that follow are 4 */
	uint32_t n_matches; /* as written; one rule follows */
	int names;
	int owners;
	uint32_t owner_flags;
	uint64_t reply_callee;
	size_t boundaries[16];
	size_t n_boundaries;
};

static void dbs_default(struct dbs *d)
{
	*d = (struct dbs){ .guid = "0123456789abcdef0123456789abcdef",
			   .fronts = 1,
			   .in_len = 4,
			   .n_matches = 1,
			   .names = 1,
			   .owners = 1,
			   .reply_callee = 9 };
}

static void dbs_write(struct dbs *d, struct wbuf *w)
{
	size_t at;

	*w = (struct wbuf){ 0 };
	d->n_boundaries = 0;
	wbuf_put(w, "BRKDDBUS", 8);
	wbuf_put_u32(w, 2);
	wbuf_put_u32(w, 1);
	for (int i = 0; i < d->fronts; i++) {
		d->boundaries[d->n_boundaries++] = w->len;
		at = wbuf_record_begin(w, DREC_FRONT);
		wbuf_put_str(w, d->guid);
		wbuf_put_u32(w, 12);
		wbuf_record_end(w, at);
	}
	for (uint64_t id = 8; id <= 9; id++) {
		d->boundaries[d->n_boundaries++] = w->len;
		at = wbuf_record_begin(w, DREC_CONN);
		put_socket(w, 5000 + id, 100 + (uint32_t)id);
		wbuf_put_u64(w, id);
		wbuf_put_u32(w, 1);
		wbuf_put_u32(w, d->in_len);
		wbuf_put(w, "l\1\0\1", 4);
		wbuf_put_u32(w, d->n_matches);
		wbuf_put_u32(w, 0);
		wbuf_put_str(w, "type='signal'");
		wbuf_record_end(w, at);
	}
	for (int k = 0; k < d->names; k++) {
		d->boundaries[d->n_boundaries++] = w->len;
		at = wbuf_record_begin(w, DREC_NAME);
		wbuf_put_str(w, "org.example.DBus");
		wbuf_put_u32(w, (uint32_t)d->owners + 1);
		for (int i = 0; i < d->owners; i++) {
			wbuf_put_u64(w, 8);
			wbuf_put_u32(w, d->owner_flags);
		}
		wbuf_put_u64(w, 5); /* a native client's entry */
		wbuf_put_u32(w, 1U << 31);
		wbuf_record_end(w, at);
	}
	d->boundaries[d->n_boundaries++] = w->len;
	at = wbuf_record_begin(w, DREC_REPLY);
	wbuf_put_u64(w, 8);
	wbuf_put_u64(w, d->reply_callee);
	wbuf_put_u32(w, 3);
	wbuf_put_u64(w, 123456789);
	wbuf_record_end(w, at);
	d->boundaries[d->n_boundaries++] = w->len;
	put_end(w);
	ASSERT(!w->oom);
}

static int dbs_check(struct dbs *d)
{
	struct wbuf w;
	int r;

	dbs_write(d, &w);
	r = dbus_front_state_check(w.data, w.len);
	free(w.data);
	return r;
}

static void test_dbus(void)
{
	struct dbs d;
	struct wbuf w;
	size_t taken = 0;

	dbs_default(&d);
	ASSERT_INT(dbs_check(&d), ==, 0);
	dbs_write(&d, &w);
	/* cut anywhere, between records too (it would hold together without the names): refused */
	for (size_t len = 0; len < w.len; len++)
		ASSERT_INT(dbus_front_state_check(w.data, len), !=, 0);
	for (size_t bit = 0; bit < w.len * 8; bit++) {
		int r;

		w.data[bit / 8] ^= (uint8_t)(1U << (bit % 8));
		r = dbus_front_state_check(w.data, w.len);
		w.data[bit / 8] ^= (uint8_t)(1U << (bit % 8));
		ASSERT(r == 0 || r == -EBADMSG || r == -EPROTO);
		if (bit < 16 * 8)
			ASSERT_INT(r, !=, 0);
		taken += r == 0;
	}
	printf("# a D-Bus state of %zu bytes: every shorter length refused; of %zu one-bit flips %zu taken: ok\n",
	       w.len, w.len * 8, taken);
	w.data[8] = 7;
	ASSERT_INT(dbus_front_state_check(w.data, w.len), ==, -EPROTO);
	free(w.data);

	dbs_default(&d);
	d.in_len = UINT32_MAX;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.n_matches = UINT32_MAX;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.fronts = 2;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.guid = "0123456789abcdef0123456789abcdeZ";
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.names = 2;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.owners = 2;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.owner_flags = 0x40;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	dbs_default(&d);
	d.reply_callee = 10;
	ASSERT_INT(dbs_check(&d), ==, -EBADMSG);
	printf("# D-Bus states with counts beyond the record, two fronts, a bus id not in hex, a name twice, "
	       "a peer twice in a queue, unknown flags, a call to nobody: refused: ok\n");
}

/* The states above as seeds of fuzz-restart (its first byte picks the parser): brokerd/fuzz/corpus. */
static void write_seed(const char *dir, const char *name, uint8_t which, const struct wbuf *w)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	ASSERT(f);
	ASSERT(fwrite(&which, 1, 1, f) == 1 && fwrite(w->data, 1, w->len, f) == w->len);
	ASSERT(fclose(f) == 0);
}

static void write_seeds(const char *dir)
{
	struct nat n;
	struct dbs d;
	struct wbuf w;

	nat_default(&n);
	nat_write(&n, &w);
	write_seed(dir, "native", 0, &w);
	free(w.data);
	n.version = 1;
	nat_write(&n, &w);
	write_seed(dir, "native-v1", 0, &w);
	free(w.data);
	dbs_default(&d);
	dbs_write(&d, &w);
	write_seed(dir, "dbus", 1, &w);
	free(w.data);
}

int main(int argc, char **argv)
{
	log_set_max_level(-1); /* the refusals' warnings are what a real start logs; not needed here */
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
		write_seeds(argv[2]);
		return 0;
	}
	test_native_valid();
	test_native_cut_and_flipped();
	test_native_refused();
	test_native_inconsistent();
	test_dbus();
	return 0;
}
