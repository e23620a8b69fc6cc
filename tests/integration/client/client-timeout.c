/* SPDX-License-Identifier: MIT */
/*
 * client-timeout - a caller that times out. The service receives Slow
 * calls and never answers them. A synchronous call with a 500 ms timeout
 * returns -ETIMEDOUT after about that long, an asynchronous one with 300 ms
 * gets -ETIMEDOUT in its callback, and the bus keeps working: a Fast call
 * afterwards is answered, and a late reply to a timed-out call is ignored.
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Timeout"

static brokerd_msg *held[8];
static int n_held;

static int on_slow(brokerd_msg *m, void *u)
{
	/* keep the call: an answer can come later, or never */
	if (n_held < 8)
		held[n_held++] = brokerd_msg_ref(m);
	return 0;
}

static int on_fast(brokerd_msg *m, void *u)
{
	/* answer the oldest held call first: the caller gave up on it */
	if (n_held > 0) {
		brokerd_msg_reply(held[0], "late", 4);
		brokerd_msg_unref(held[0]);
		memmove(held, held + 1, sizeof(held[0]) * (size_t)--n_held);
	}
	return brokerd_msg_reply(m, "fast", 4);
}

static const struct t_method methods[] = { { "Slow", on_slow }, { "Fast", on_fast }, { NULL, NULL } };

int main(void)
{
	brokerd_bus *bus = t_open();
	brokerd_msg *reply = NULL;
	struct t_reply async = { 0 };
	uint64_t t0, dt;
	pid_t srv;

	srv = t_service_start(NAME, methods);

	t0 = now_usec();
	CHECK_R(brokerd_bus_call(bus, NAME, "Slow", NULL, 0, 500000, &reply), -ETIMEDOUT);
	dt = now_usec() - t0;
	t_log("sync call timed out after %llu ms", (unsigned long long)dt / 1000);
	CHECK(reply == NULL);
	CHECK(dt >= 450000 && dt < 3000000);

	t0 = now_usec();
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Slow", NULL, 0, 300000, t_on_reply, &async), 0);
	CHECK(t_pump(bus, &async.done, 5000));
	dt = now_usec() - t0;
	CHECK_R(async.error, -ETIMEDOUT);
	CHECK(dt >= 250000 && dt < 3000000);

	/* still healthy; the late answer to the first Slow call is dropped */
	for (int i = 0; i < 2; i++) {
		const void *body;
		size_t size;

		CHECK_R(brokerd_bus_call(bus, NAME, "Fast", NULL, 0, 5000000, &reply), 0);
		brokerd_msg_get_body(reply, &body, &size);
		CHECK(size == 4 && memcmp(body, "fast", 4) == 0);
		reply = brokerd_msg_unref(reply);
	}
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
