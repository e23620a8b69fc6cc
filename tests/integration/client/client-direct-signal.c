/* SPDX-License-Identifier: MIT */
/*
 * client-direct-signal - signals sent to one connection through its inbox.
 * A root service owns org.brokerd.test.Direct and listens for direct
 * signals; alice (allowed by the test policy to send to it) signals it by
 * its well-known name, and the service answers with a direct signal to
 * alice's unique name, which the kernel stamped on alice's signal. bob is
 * refused by policy; a subscriber of the name's broadcast signals sees none
 * of this.
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Direct"

static int ready[2];

static int on_hello(brokerd_msg *m, void *u)
{
	brokerd_bus *bus = u;
	struct brokerd_creds c;
	char body[64];

	CHECK_R(brokerd_msg_get_creds(m, &c), 0);
	snprintf(body, sizeof(body), "hello uid %u", (unsigned)c.uid);
	CHECK_R(brokerd_bus_send_signal(bus, brokerd_msg_get_sender(m), "Welcome", body, strlen(body)), 0);
	return 0;
}

static int server(void *arg)
{
	brokerd_bus *bus = t_open();

	CHECK_R(brokerd_bus_subscribe(bus, NULL, NULL, "Hello", on_hello, bus), 0);
	CHECK_R(brokerd_bus_request_name(bus, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	t_say(ready[1], "ready");
	return brokerd_bus_run(bus) < 0;
}

static volatile bool welcomed;

static int on_welcome(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;

	brokerd_msg_get_body(m, &body, &size);
	if (size != strlen("hello uid 2001") || memcmp(body, "hello uid 2001", size) != 0)
		FAIL("welcome \"%.*s\"", (int)size, (const char *)body);
	welcomed = true;
	return 0;
}

static int caller(void *arg)
{
	uid_t uid = (uid_t)(uintptr_t)arg;
	brokerd_bus *bus;

	t_become(uid);
	bus = t_open();
	if (uid == UID_BOB) {
		CHECK_R(brokerd_bus_send_signal(bus, NAME, "Hello", NULL, 0), -EACCES);
		return 0;
	}
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NULL, "Welcome", on_welcome, NULL), 0);
	CHECK_R(brokerd_bus_send_signal(bus, NAME, "Hello", NULL, 0), 0);
	CHECK(t_pump(bus, &welcomed, 5000));
	brokerd_bus_close(bus);
	return 0;
}

static volatile bool broadcast_seen;

static int on_broadcast(brokerd_msg *m, void *u)
{
	broadcast_seen = true;
	return 0;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	volatile bool never = false;
	pid_t srv;

	t_policy("[default]\nallow own org.brokerd.test.*\nallow receive org.brokerd.test.*\n"
		 "[user alice]\nallow send org.brokerd.test.Direct\n");
	t_pipe(ready);
	srv = t_fork(server, NULL);
	t_expect(ready[0], "ready", 5000);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, NULL, on_broadcast, NULL), 0);
	CHECK_R(t_wait(t_fork(caller, (void *)(uintptr_t)UID_ALICE), 20000), 0);
	CHECK_R(t_wait(t_fork(caller, (void *)(uintptr_t)UID_BOB), 20000), 0);
	t_pump(bus, &never, 300);
	CHECK(!broadcast_seen);
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
