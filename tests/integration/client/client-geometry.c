/* SPDX-License-Identifier: MIT */
/*
 * client-geometry - the ring geometry of a name set in brokerd's policy
 * ([channels], brokerd/README.md "Ring geometry") and the size OPEN_CALL
 * tells the caller (MSG_SIZE, protocol/README.md). A policy file gives
 * org.brokerd.test.GeomBig 16 slots of 64 KiB and leaves
 * org.brokerd.test.GeomSmall the default 8 KiB; a service owns each, and
 * its method Check answers how the call's body came ("inline" or "memfd":
 * whether the library mapped a body memfd), its size and its hash.
 *
 * The caller is told 65536 for GeomBig and sends 32 KiB and 60 KiB bodies
 * there inline; 100 KiB (over a slot) still arrive intact in a memfd. The
 * same 32 KiB to GeomSmall go in a memfd: the configuration made the
 * difference, not the library.
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

/* Check(bytes): "inline|memfd SIZE HASH" of the body that came. */
static int on_check(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;
	char out[128];

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	snprintf(out, sizeof(out), "%s %zu %" PRIx64, m->map ? "memfd" : "inline", size, hash(body, size));
	return brokerd_msg_reply(m, out, strlen(out));
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
	static const struct t_method methods[] = { { "Check", on_check },
						   { "Time", on_time },
						   { NULL, NULL } };
	brokerd_bus *bus;

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

	for (unsigned int i = 0; i < 4; i++) {
		static const size_t sizes[] = { 100, 4 * KiB, 32 * KiB, 60 * KiB };

		timed(bus, SMALL, sizes[i], 200);
		timed(bus, BIG, sizes[i], 200);
	}

	brokerd_bus_close(bus);
	printf("client-geometry: ok\n");
	return 0;
}
