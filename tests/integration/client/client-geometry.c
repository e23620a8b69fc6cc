/* SPDX-License-Identifier: MIT */
/*
 * client-geometry - the ring geometry of a name set in brokerd's policy
 * ([channels], brokerd/README.md "Ring geometry") and the size OPEN_CALL
 * tells the caller (MSG_SIZE, protocol/README.md). A policy file gives
 * org.brokerd.test.GeomBig 16 slots of 64 KiB and leaves
 * org.brokerd.test.GeomSmall the default 8 KiB; a service owns each, and
 * its method Check answers how the call's body came ("inline" or "memfd":
 * whether the library read or mapped a body memfd), its size and its hash.
 *
 * The caller is told 65536 for GeomBig and sends 32 KiB and 60 KiB bodies
 * there inline; 100 KiB (over a slot) still arrive intact in a memfd. The
 * same 32 KiB to GeomSmall go in a memfd: the configuration made the
 * difference, not the library. Signals too: the owner is told the size of
 * its signal channel (REQUEST_NAME), and Emit(size) broadcasts a body of
 * 60 KiB inline, 100 KiB in a memfd, to the test as a subscriber.
 *
 * The library is told its own inbox's size (HELLO's SIZES flag): 8192, the
 * default; a connection made after a `ring *` line is read has an inbox of
 * that geometry, and is told 16384. A service replies inline up to the
 * caller's inbox size (told with ReplyCapability): Reply(12 KiB) comes
 * inline to the 16 KiB inbox and in a memfd to the 8 KiB one.
 *
 * Then it times calls of 100 B .. 60 KiB to both (the measurement behind
 * the default geometry, brokerd/README.md): printed, not checked, since
 * times under TCG vary.
 */
#include <inttypes.h>

#include "client/bus-name.h"
#include "tests/integration/client/testlib.h"

#define BIG   "org.brokerd.test.GeomBig"
#define SMALL "org.brokerd.test.GeomSmall"
#define KiB   1024U

static uint64_t hash(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* How m's body came: in a memfd the library read (up to 64 KiB) or mapped, or inline. */
static const char *came(const brokerd_msg *m)
{
	return m->map || m->body_buf ? "memfd" : "inline";
}

/* Check(bytes): "inline|memfd SIZE HASH" of the body that came. */
static int on_check(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;
	char out[128];

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	snprintf(out, sizeof(out), "%s %zu %" PRIx64, came(m), size, hash(body, size));
	return brokerd_msg_reply(m, out, strlen(out));
}

/* Emit("SIZE"): the signal Blob with a body of SIZE bytes, once told the channel's size. */
static int on_emit(brokerd_msg *m, void *u)
{
	struct bname *b = bname_get(u, brokerd_msg_get_name(m), false);
	const void *arg;
	size_t n, size;
	uint8_t *body;
	char text[32];

	CHECK_R(brokerd_msg_get_body(m, &arg, &n), 0);
	CHECK(n < sizeof(text));
	memcpy(text, arg, n);
	text[n] = 0;
	size = strtoul(text, NULL, 10);
	/* REQUEST_NAME told the owner its signal channel's slot size */
	CHECK(b && b->sig_send);
	CHECK_R((int)b->sig_send->msg_max, strcmp(brokerd_msg_get_name(m), BIG) == 0 ? 65536 : 8192);
	body = malloc(size);
	CHECK(body);
	for (size_t i = 0; i < size; i++)
		body[i] = (uint8_t)(i * 31 + size);
	CHECK_R(brokerd_bus_emit_signal(u, brokerd_msg_get_name(m), "Blob", body, size), 0);
	free(body);
	return brokerd_msg_reply(m, NULL, 0);
}

/* What the last Blob was: "inline|memfd SIZE HASH". */
struct blob {
	char got[128];
	volatile bool seen;
};

static int on_blob(brokerd_msg *m, void *u)
{
	struct blob *bl = u;
	const void *body;
	size_t size;

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	snprintf(bl->got, sizeof(bl->got), "%s %zu %" PRIx64, came(m), size,
		 hash(body, size));
	bl->seen = true;
	return 0;
}

/* name.Emit(size): the Blob it broadcasts comes whole, the way want says. */
static void check_signal(brokerd_bus *bus, struct blob *bl, const char *name, size_t size, const char *want)
{
	uint8_t *body = malloc(size);
	brokerd_msg *reply = NULL;
	char arg[32], expect[128];

	CHECK(body);
	for (size_t i = 0; i < size; i++)
		body[i] = (uint8_t)(i * 31 + size);
	snprintf(expect, sizeof(expect), "%s %zu %" PRIx64, want, size, hash(body, size));
	snprintf(arg, sizeof(arg), "%zu", size);
	bl->seen = false;
	CHECK_R(brokerd_bus_call(bus, name, "Emit", arg, strlen(arg), 5000000, &reply), 0);
	brokerd_msg_unref(reply);
	if (!t_pump(bus, &bl->seen, 5000))
		FAIL("%s: no Blob of %zu bytes", name, size);
	if (strcmp(bl->got, expect) != 0)
		FAIL("%s: signal of %zu bytes: got '%s', want '%s'", name, size, bl->got, expect);
	t_log("%s: signal of %zu bytes %s", name, size, want);
	free(body);
}

/* Reply("SIZE"): a reply of SIZE bytes */
static int on_reply(brokerd_msg *m, void *u)
{
	const void *arg;
	char text[32];
	size_t n, size;
	uint8_t *body;
	int r;

	CHECK_R(brokerd_msg_get_body(m, &arg, &n), 0);
	CHECK(n < sizeof(text));
	memcpy(text, arg, n);
	text[n] = '\0';
	size = strtoul(text, NULL, 10);
	body = malloc(size);
	CHECK(body);
	for (size_t i = 0; i < size; i++)
		body[i] = (uint8_t)(i * 7 + size);
	r = brokerd_msg_reply(m, body, size);
	free(body);
	return r;
}

/* name.Reply(size) to bus: the reply comes whole, the way want says. */
static void check_reply(brokerd_bus *bus, const char *name, size_t size, const char *want)
{
	brokerd_msg *reply = NULL;
	const void *data;
	uint8_t *expect = malloc(size);
	char arg[32];
	size_t n;

	CHECK(expect);
	for (size_t i = 0; i < size; i++)
		expect[i] = (uint8_t)(i * 7 + size);
	snprintf(arg, sizeof(arg), "%zu", size);
	CHECK_R(brokerd_bus_call(bus, name, "Reply", arg, strlen(arg), 5000000, &reply), 0);
	CHECK_R(brokerd_msg_get_body(reply, &data, &n), 0);
	if (n != size || memcmp(data, expect, size) != 0)
		FAIL("%s: reply of %zu bytes came as %zu other bytes", name, size, n);
	if (strcmp(came(reply), want) != 0)
		FAIL("%s: reply of %zu bytes came %s, want %s", name, size, came(reply), want);
	t_log("%s: reply of %zu bytes %s", name, size, want);
	brokerd_msg_unref(reply);
	free(expect);
}

/* Time(bytes): an empty reply (the body is only received) */
static int on_time(brokerd_msg *m, void *u)
{
	return brokerd_msg_reply(m, NULL, 0);
}

/* Calls name.Check with size bytes and checks that they came whole, the way want says. */
static void check(brokerd_bus *bus, const char *name, size_t size, const char *want)
{
	uint8_t *body = malloc(size);
	brokerd_msg *reply = NULL;
	const void *data;
	size_t n;
	char expect[128];

	CHECK(body);
	for (size_t i = 0; i < size; i++)
		body[i] = (uint8_t)(i * 31 + size);
	CHECK_R(brokerd_bus_call(bus, name, "Check", body, size, 5000000, &reply), 0);
	CHECK_R(brokerd_msg_get_body(reply, &data, &n), 0);
	snprintf(expect, sizeof(expect), "%s %zu %" PRIx64, want, size, hash(body, size));
	if (n != strlen(expect) || memcmp(data, expect, n) != 0)
		FAIL("%s: %zu bytes: got '%.*s', want '%s'", name, size, (int)n, (const char *)data, expect);
	t_log("%s: %zu bytes %s", name, size, want);
	brokerd_msg_unref(reply);
	free(body);
}

/* Prints the mean time of n calls of size bytes to name. */
static void timed(brokerd_bus *bus, const char *name, size_t size, unsigned int n)
{
	uint8_t *body = calloc(1, size);
	brokerd_msg *reply = NULL;
	uint64_t start;

	CHECK(body);
	start = now_usec();
	for (unsigned int i = 0; i < n; i++) {
		CHECK_R(brokerd_bus_call(bus, name, "Time", body, size, 5000000, &reply), 0);
		brokerd_msg_unref(reply);
	}
	t_log("time: %s %6zu B: %" PRIu64 " us a call", name, size, (now_usec() - start) / n);
	free(body);
}

/* The size brokerd told for name's call channel (0: not told). */
static uint32_t told(brokerd_bus *bus, const char *name)
{
	struct bname *b = bname_get(bus, name, false);

	CHECK(b && b->call_send);
	return b->call_send->msg_max;
}

int main(void)
{
	static const struct t_method methods[] = {
		{ "Check", on_check }, { "Emit", on_emit }, { "Reply", on_reply },
		{ "Time", on_time },   { NULL, NULL }
	};
	static struct blob big_blob, small_blob;
	brokerd_bus *bus, *bus2;

	t_policy("[channels]\n"
		 "ring " BIG " 16 65536\n");
	t_service_start(BIG, methods);
	t_service_start(SMALL, methods);
	bus = t_open();
	CHECK(bus->features & CTRL_FEATURE_MSG_SIZE);

	check(bus, BIG, 100, "inline");
	CHECK_R((int)told(bus, BIG), 65536);
	check(bus, BIG, 32 * KiB, "inline");
	check(bus, BIG, 60 * KiB, "inline");
	check(bus, BIG, 100 * KiB, "memfd");
	check(bus, BIG, 1024 * KiB, "memfd");

	check(bus, SMALL, 100, "inline");
	CHECK_R((int)told(bus, SMALL), 8192);
	check(bus, SMALL, 32 * KiB, "memfd");

	CHECK_R(brokerd_bus_subscribe(bus, NULL, BIG, "Blob", on_blob, &big_blob), 0);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, SMALL, "Blob", on_blob, &small_blob), 0);
	check_signal(bus, &big_blob, BIG, 60 * KiB, "inline");
	check_signal(bus, &big_blob, BIG, 100 * KiB, "memfd");
	check_signal(bus, &small_blob, SMALL, 32 * KiB, "memfd");

	/* HELLO told us our inbox's slot size: the default, as `ring *` was not set */
	CHECK(bus->inbox);
	CHECK_R((int)bus->inbox->msg_max, 8192);
	/* an inbox made after `ring *` has its geometry, and HELLO tells it */
	t_policy("[channels]\n"
		 "ring * 16 16384\n"
		 "ring " BIG " 16 65536\n");
	bus2 = t_open();
	CHECK(bus2->inbox);
	CHECK_R((int)bus2->inbox->msg_max, 16384);
	t_log("inbox sizes told: 8192, 16384 after ring *");
	/* the service was told each caller's inbox size with its reply cap */
	check_reply(bus2, BIG, 12 * KiB, "inline");
	check_reply(bus, BIG, 12 * KiB, "memfd");
	check_reply(bus2, BIG, 20 * KiB, "memfd");
	brokerd_bus_close(bus2);

	for (unsigned int i = 0; i < 4; i++) {
		static const size_t sizes[] = { 100, 4 * KiB, 32 * KiB, 60 * KiB };

		timed(bus, SMALL, sizes[i], 200);
		timed(bus, BIG, sizes[i], 200);
	}

	brokerd_bus_close(bus);
	printf("client-geometry: ok\n");
	return 0;
}
