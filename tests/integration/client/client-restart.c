/* SPDX-License-Identifier: MIT */
/*
 * client-restart - brokerd restarted mid-run, clients recover. A
 * service owns org.brokerd.test.Restart (Ping, Emit), a subscriber listens to
 * its Tick signals, and this process calls. After `systemctl restart
 * brokerd` every bus reconnects on its own, the service owns its name
 * again under a new unique name (never the old one), the subscriber is
 * subscribed again, and calls and signals flow as before. Pending calls fail with -ECONNRESET, not a hang.
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Restart"

static int ready[2], ticks[2];

static const struct t_method methods[] = {
	{ "Ping", t_on_ping }, { "Emit", t_on_tick }, { "Hang", t_on_hang }, { NULL, NULL }
};

static int subscriber(void *arg)
{
	brokerd_bus *bus = t_open();

	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Tick", t_on_say_body, (void *)(intptr_t)ticks[1]), 0);
	t_say(ready[1], "subscriber");
	return brokerd_bus_run(bus) < 0;
}

static volatile bool reconnected;
static int states;

static void on_state(brokerd_bus *bus, int state, void *u)
{
	states++;
	if (state == BROKERD_STATE_CONNECTED)
		reconnected = true;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	brokerd_msg *reply;
	struct t_reply hang = { 0 };
	char before[64], after[64], line[64];
	const void *body;
	size_t size;
	pid_t ps, pu;
	bool got = false;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	t_pipe(ready);
	t_pipe(ticks);
	ps = t_service_start(NAME, methods);
	pu = t_fork(subscriber, NULL);
	t_expect(ready[0], "subscriber", 5000);
	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, NULL), 0);

	reply = t_call_retry(bus, NAME, "Ping", "", 1000);
	brokerd_msg_get_body(reply, &body, &size);
	snprintf(before, sizeof(before), "%.*s", (int)size, (const char *)body);
	brokerd_msg_unref(reply);
	brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", "before", 1000));
	t_expect(ticks[0], "before", 5000);

	/* a call in flight when brokerd goes away */
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Hang", NULL, 0, 60000000, t_on_reply, &hang), 0);
	t_log("restarting brokerd");
	if (system("systemctl restart brokerd.service") != 0)
		FAIL("systemctl restart brokerd failed");
	CHECK(t_pump(bus, &hang.done, 10000));
	CHECK_R(hang.error, -ECONNRESET);
	CHECK(t_pump(bus, &reconnected, 10000));
	t_log("reconnected after %d state changes", states);

	reply = t_call_retry(bus, NAME, "Ping", "", 10000);
	brokerd_msg_get_body(reply, &body, &size);
	snprintf(after, sizeof(after), "%.*s", (int)size, (const char *)body);
	brokerd_msg_unref(reply);
	/* a new connection, a new unique name: the spec never reuses one within a boot */
	t_log("service was %s, is %s", before, after);
	CHECK(strncmp(after, ":1.", 3) == 0);
	if (strcmp(after, before) == 0)
		FAIL("the service got its old unique name %s back after the restart", before);

	/* the subscriber re-subscribed: a new signal reaches it */
	for (int i = 0; i < 50 && !got; i++) {
		brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", "after", 5000));
		while (t_hear(ticks[0], line, sizeof(line), 200) == 0)
			if (strcmp(line, "after") == 0)
				got = true;
	}
	CHECK(got);
	t_kill(ps);
	t_kill(pu);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
