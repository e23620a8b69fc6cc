/* SPDX-License-Identifier: MIT */
/*
 * client-server-dies - a server that dies mid-call: the caller gets an
 * error, not a hang. The service exits inside its Die handler; the caller's
 * synchronous call (20 s timeout) must fail at once, and an asynchronous
 * call likewise: NoReply (-EREMOTEIO, "receiver ended"), as the call of a
 * process that ended before it replied (the kernel's receipt named it, the
 * library watches it), before brokerd's NameOwnerChanged to no owner could
 * fail it with -ECONNRESET. A call to the name with no owner left fails
 * with -ENXIO.
 */
#include "tests/integration/client/testpool.h"

#define NAME "org.brokerd.test.Dies"

static int on_die(brokerd_msg *m, void *u)
{
	_exit(3);
}

static const struct t_method methods[] = { { "Die", on_die }, { NULL, NULL } };

int main(void)
{
	brokerd_bus *bus = t_open();
	brokerd_msg *reply = NULL;
	struct t_outcome async = { 0 };
	char owner[64];
	uint64_t t0, dt;
	const void *body;
	size_t size;
	pid_t srv;
	int r;

	srv = t_service_start(NAME, methods);
	t0 = now_usec();
	r = brokerd_bus_call(bus, NAME, "Die", NULL, 0, 20000000, &reply);
	dt = now_usec() - t0;
	t_log("sync call returned %d after %llu ms", r, (unsigned long long)dt / 1000);
	CHECK_R(r, -EREMOTEIO);
	CHECK(reply && strcmp(brokerd_msg_get_member(reply), BROKERD_ERROR_NO_REPLY) == 0);
	CHECK_R(brokerd_msg_get_body(reply, &body, &size), 0);
	t_log("its error: %.*s", (int)size, (const char *)body);
	CHECK(size >= 14 && memcmp(body, "receiver ended", 14) == 0);
	CHECK(dt < 5000000);
	brokerd_msg_unref(reply);
	CHECK_R(t_wait(srv, 5000), 3);
	CHECK_R(brokerd_bus_get_name_owner(bus, NAME, owner, sizeof(owner)), -ENXIO);

	/* again, asynchronously */
	srv = t_service_start(NAME, methods);
	t0 = now_usec();
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Die", NULL, 0, 20000000, t_on_outcome, &async), 0);
	t_expect_receiver_ended(bus, &async, t0, 5000000, "the asynchronous call");
	CHECK_R(t_wait(srv, 5000), 3);

	/* a name nobody owns fails at once */
	CHECK_R(brokerd_bus_call(bus, NAME, "Die", NULL, 0, 20000000, NULL), -ENXIO);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
