/* SPDX-License-Identifier: MIT */
/*
 * client-large - bodies of 1 B, 8 KiB, 1 MiB and 100 MiB between real
 * processes, through the typed API, which must not show how they travel
 * (inline in a slot, or in a sealed memfd past 8 KiB). A service owns
 * org.brokerd.test.Large:
 *
 * - Check(body): the argument direction; it answers (t size, t hash) of
 *   the body it received;
 * - Make(u size, t seed): the reply direction; it answers with a body of
 *   that size made from seed;
 * - Emit(u size, t seed): the broadcast direction; it emits the signal Blob
 *   with such a body, which two subscribers (separate processes) hash.
 *
 * Every body is hashed where it arrives and compared with the hash of what
 * was built; the time each takes is printed. A 129 MiB body fails with
 * -EMSGSIZE, through the typed API and the byte API alike. The guest has
 * 1 GiB: everything runs one size at a time.
 */
#include <inttypes.h>
#include <sys/mman.h>

#include "tests/integration/client/testlib.h"

#define NAME  "org.brokerd.test.Large"
#define IFACE "org.brokerd.test.Large1"
#define MiB   (1024U * 1024U)

static const uint32_t sizes[] = { 1, 8 * 1024, 1 * MiB, 100 * MiB };

static uint64_t hash(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ n, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 31;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t msg_hash(brokerd_msg *m, size_t *ret_size)
{
	const void *data;
	size_t n;

	CHECK_R(brokerd_msg_get_data(m, &data, &n), 0);
	*ret_size = n;
	return hash(data, n);
}

/*
 * Appends a body of exactly size bytes made from seed: "y" for 1 byte, else
 * byte arrays (one up to 64 MiB, the D-Bus limit of an array, else two).
 */
static int append_body(brokerd_msg *m, uint32_t size, uint64_t seed)
{
	uint64_t x = seed | 1;
	uint8_t *data;
	uint32_t l1, l2;
	int k;

	if (size == 1) {
		uint8_t y = (uint8_t)seed;

		return brokerd_msg_append_basic(m, 'y', &y);
	}
	data = malloc(size);
	if (!data)
		return -ENOMEM;
	for (uint32_t i = 0; i + 8 <= size; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(data + i, &x, 8);
	}
	if (size <= 64 * MiB) {
		k = brokerd_msg_append_array(m, 'y', data, size - 4);
	} else {
		/* the second length at a multiple of 4: no padding between */
		l1 = (size / 2) & ~3U;
		l1 -= 4;
		l2 = size - l1 - 8;
		k = brokerd_msg_append_array(m, 'y', data, l1);
		if (k >= 0)
			k = brokerd_msg_append_array(m, 'y', data + l1, l2);
	}
	free(data);
	return k;
}

/* The hash of the body append_body() makes, and its size. */
static uint64_t expected_hash(uint32_t size, uint64_t seed)
{
	brokerd_msg *m = NULL;
	uint64_t h;
	size_t n;

	CHECK_R(brokerd_msg_new_signal(NULL, &m, NAME, "/", IFACE, "Blob"), 0);
	CHECK_R(append_body(m, size, seed), 0);
	CHECK_R(brokerd_msg_seal(m), 0);
	h = msg_hash(m, &n);
	CHECK(n == size);
	brokerd_msg_unref(m);
	return h;
}

/* --- the service ---------------------------------------------------------------- */

static int on_check(brokerd_msg *m, void *u)
{
	size_t n;
	uint64_t h = msg_hash(m, &n);

	return brokerd_msg_return(m, "tt", (uint64_t)n, h);
}

static int on_make(brokerd_msg *m, void *u)
{
	brokerd_msg *r = NULL;
	uint32_t size;
	uint64_t seed;
	int k;

	CHECK_R(brokerd_msg_read(m, "ut", &size, &seed), 1);
	CHECK_R(brokerd_msg_new_reply(m, &r), 0);
	CHECK_R(append_body(r, size, seed), 0);
	k = brokerd_bus_send(u, r);
	brokerd_msg_unref(r);
	return k;
}

static int on_emit(brokerd_msg *m, void *u)
{
	brokerd_msg *s = NULL;
	uint32_t size;
	uint64_t seed;

	CHECK_R(brokerd_msg_read(m, "ut", &size, &seed), 1);
	CHECK_R(brokerd_msg_new_signal(u, &s, NAME, "/", IFACE, "Blob"), 0);
	CHECK_R(append_body(s, size, seed), 0);
	CHECK_R(brokerd_bus_send(u, s), 0);
	brokerd_msg_unref(s);
	return brokerd_msg_return(m, "");
}

static const struct t_method methods[] = {
	{ "Check", on_check },
	{ "Make", on_make },
	{ "Emit", on_emit },
	{ NULL, NULL },
};

/* --- the subscribers --------------------------------------------------------------- */

static int sub_ready[2], sub_report[2];

static int on_blob(brokerd_msg *m, void *u)
{
	size_t n;
	uint64_t h = msg_hash(m, &n);

	t_say(sub_report[1], "%zu %016" PRIx64, n, h);
	return 0;
}

static int subscriber(void *arg)
{
	brokerd_bus *bus = t_open();

	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Blob", on_blob, NULL), 0);
	t_say(sub_ready[1], "subscribed");
	return brokerd_bus_run(bus) < 0;
}

static double ms_since(uint64_t start)
{
	return (double)(now_usec() - start) / 1000.0;
}

int main(void)
{
	pid_t service, subs[2];
	brokerd_bus *bus;
	void *huge;

	service = t_service_start(NAME, methods);
	t_pipe(sub_ready);
	t_pipe(sub_report);
	for (int i = 0; i < 2; i++) {
		subs[i] = t_fork(subscriber, NULL);
		t_expect(sub_ready[0], "subscribed", 10000);
	}
	bus = t_open();

	for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
		uint32_t size = sizes[i];
		uint64_t seed = 0x5eed0000ULL + i, want, h, got_size;
		brokerd_msg *m = NULL, *reply = NULL;
		double t_arg, t_reply, t_signal;
		char line[128], expect[128];
		uint64_t start;
		size_t n;

		want = expected_hash(size, seed);

		/* the argument direction */
		CHECK_R(brokerd_msg_new_call(bus, &m, NAME, "/", IFACE, "Check"), 0);
		CHECK_R(append_body(m, size, seed), 0);
		start = now_usec();
		CHECK_R(brokerd_bus_call_msg(bus, m, 120000000, &reply), 0);
		t_arg = ms_since(start);
		brokerd_msg_unref(m);
		CHECK_R(brokerd_msg_read(reply, "tt", &got_size, &h), 1);
		if (got_size != size || h != want)
			FAIL("Check(%" PRIu32 " bytes): the service got %" PRIu64 " bytes, hash %016" PRIx64
			     ", want %016" PRIx64,
			     size, got_size, h, want);
		brokerd_msg_unref(reply);
		reply = NULL;

		/* the reply direction */
		CHECK_R(brokerd_msg_new_call(bus, &m, NAME, "/", IFACE, "Make"), 0);
		CHECK_R(brokerd_msg_append(m, "ut", size, seed), 0);
		start = now_usec();
		CHECK_R(brokerd_bus_call_msg(bus, m, 120000000, &reply), 0);
		t_reply = ms_since(start);
		brokerd_msg_unref(m);
		h = msg_hash(reply, &n);
		if (n != size || h != want)
			FAIL("Make(%" PRIu32 "): the reply has %zu bytes, hash %016" PRIx64 ", want %016" PRIx64,
			     size, n, h, want);
		brokerd_msg_unref(reply);
		reply = NULL;

		/* the broadcast direction: both subscribers hash the same body */
		CHECK_R(brokerd_msg_new_call(bus, &m, NAME, "/", IFACE, "Emit"), 0);
		CHECK_R(brokerd_msg_append(m, "ut", size, seed), 0);
		start = now_usec();
		CHECK_R(brokerd_bus_call_msg(bus, m, 120000000, &reply), 0);
		brokerd_msg_unref(m);
		brokerd_msg_unref(reply);
		reply = NULL;
		snprintf(expect, sizeof(expect), "%" PRIu32 " %016" PRIx64, size, want);
		for (int s = 0; s < 2; s++) {
			CHECK_R(t_hear(sub_report[0], line, sizeof(line), 120000), 0);
			if (strcmp(line, expect) != 0)
				FAIL("signal of %" PRIu32 " bytes: a subscriber got \"%s\", want \"%s\"", size, line,
				     expect);
		}
		t_signal = ms_since(start);
		t_log("%9" PRIu32 " bytes: argument %.1f ms, reply %.1f ms, signal to 2 subscribers %.1f ms", size,
		      t_arg, t_reply, t_signal);
	}

	/* over 128 MiB: refused, whichever way it is made */
	huge = mmap(NULL, 129 * MiB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(huge != MAP_FAILED);
	CHECK_R(brokerd_bus_call_method(bus, NAME, "/", IFACE, "Check", "ay", huge, 129 * MiB, 5000000, NULL),
		-EMSGSIZE);
	{
		brokerd_msg *m = NULL;

		CHECK_R(brokerd_msg_new_call(bus, &m, NAME, "/", IFACE, "Check"), 0);
		CHECK_R(brokerd_msg_append_array(m, 'y', huge, 43 * MiB), 0);
		CHECK_R(brokerd_msg_append_array(m, 'y', huge, 43 * MiB), 0);
		CHECK_R(brokerd_msg_append_array(m, 'y', huge, 43 * MiB), -EMSGSIZE);
		brokerd_msg_unref(m);
	}
	munmap(huge, 129 * MiB);
	t_log("129 MiB: -EMSGSIZE");

	brokerd_bus_close(bus);
	for (int i = 0; i < 2; i++)
		t_kill(subs[i]);
	t_kill(service);
	printf("ok\n");
	return 0;
}
