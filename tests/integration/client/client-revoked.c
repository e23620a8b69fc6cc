/* SPDX-License-Identifier: MIT */
/*
 * client-revoked - a policy reload takes rights away from a client while it
 * uses them, seen through the library as applications see it. alice (uid
 * 2001) subscribes to org.brokerd.test.Revoke's signals and calls it; the
 * test, as root, subscribes too. Then the policy stops letting alice
 * receive from and send to the name. After the reload the service's next
 * signal reaches root and not alice (the kernel detached her subscription,
 * no new cap is handed out), and alice's next call fails with -EACCES (her
 * call capability was revoked, and brokerd refuses a new one). A signal
 * sent before the reload reached both: nothing queued for those still
 * allowed is lost.
 */
#include "tests/integration/client/testlib.h"

#define NAME	     "org.brokerd.test.Revoke"
#define POLICY_BASE  "[default]\nallow own org.brokerd.test.*\n"
#define POLICY_ALICE "[user alice]\nallow send " NAME "\nallow receive " NAME "\n"

static const struct t_method methods[] = {
	{ "Tick", t_on_tick },
	{ NULL, NULL },
};

static int to_alice[2], from_alice[2];

static int alice(void *arg)
{
	struct t_hearing t = { 0 };
	brokerd_msg *reply = NULL;
	brokerd_bus *bus;
	char cmd[32];
	int k;

	t_become(UID_ALICE);
	bus = t_open();
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Tick", t_on_heard, &t), 0);
	t_tick(bus, NAME, "one");
	CHECK(t_heard(bus, &t, "one", 5000));
	t_say(from_alice[1], "subscribed");

	t_expect(to_alice[0], "reloaded", 20000);
	/* "two" was emitted after the reload; "zero" just before it */
	CHECK_R(t_hear(to_alice[0], cmd, sizeof(cmd), 20000), 0);
	if (strcmp(cmd, "ticked") != 0)
		FAIL("got \"%s\"", cmd);
	if (t_heard(bus, &t, "two", 1000))
		FAIL("alice still hears the name's signals after the reload");
	k = brokerd_bus_call(bus, NAME, "Tick", "x", 1, 5000000, &reply);
	if (k != -EACCES)
		FAIL("alice's call after the reload: %d (%s), want -EACCES", k, strerror(-k));
	brokerd_bus_close(bus);
	t_say(from_alice[1], "done");
	return 0;
}

int main(void)
{
	struct t_hearing t = { 0 };
	brokerd_bus *bus = t_open();
	pid_t srv, pid;

	t_policy(POLICY_BASE POLICY_ALICE);
	srv = t_service_start(NAME, methods);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Tick", t_on_heard, &t), 0);
	t_pipe(to_alice);
	t_pipe(from_alice);
	pid = t_fork(alice, NULL);
	t_expect(from_alice[0], "subscribed", 20000);
	CHECK(t_heard(bus, &t, "one", 5000));

	t_tick(bus, NAME, "zero");
	t_policy(POLICY_BASE);
	t_say(to_alice[1], "reloaded");
	CHECK(t_heard(bus, &t, "zero", 5000));
	t_tick(bus, NAME, "two");
	CHECK(t_heard(bus, &t, "two", 5000));
	t_say(to_alice[1], "ticked");
	t_expect(from_alice[0], "done", 20000);
	CHECK_R(t_wait(pid, 20000), 0);
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
