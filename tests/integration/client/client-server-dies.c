/* SPDX-License-Identifier: MIT */
/*
 * client-server-dies - a server that dies mid-call: the caller gets an
 * error, not a hang. The service exits inside its Die handler; the caller's
 * synchronous call (20 s timeout) must fail with -ECONNRESET within a few
 * seconds (brokerd reports the owner gone and the library fails the calls
 * pending on that name), and an asynchronous call likewise.
 */
#include "tests/integration/client/testlib.h"

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
	struct t_reply async = { 0 };
	char owner[64];
	uint64_t t0, dt;
	pid_t srv;
	int r;

	srv = t_service_start(NAME, methods);
	t0 = now_usec();
	r = brokerd_bus_call(bus, NAME, "Die", NULL, 0, 20000000, &reply);
	dt = now_usec() - t0;
	t_log("sync call returned %d (%s) after %llu ms", r, strerror(-r), (unsigned long long)dt / 1000);
	CHECK_R(r, -ECONNRESET);
	CHECK(dt < 5000000);
	CHECK_R(t_wait(srv, 5000), 3);
	CHECK_R(brokerd_bus_get_name_owner(bus, NAME, owner, sizeof(owner)), -ENXIO);

	/* again, asynchronously */
	srv = t_service_start(NAME, methods);
	t0 = now_usec();
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Die", NULL, 0, 20000000, t_on_reply, &async), 0);
	CHECK(t_pump(bus, &async.done, 10000));
	CHECK_R(async.error, -ECONNRESET);
	CHECK(now_usec() - t0 < 5000000);
	CHECK_R(t_wait(srv, 5000), 3);

	/* a name nobody owns fails at once */
	CHECK_R(brokerd_bus_call(bus, NAME, "Die", NULL, 0, 20000000, NULL), -ENXIO);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
