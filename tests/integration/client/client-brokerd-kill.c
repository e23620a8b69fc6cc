/* SPDX-License-Identifier: MIT */
/*
 * client-brokerd-kill - brokerd killed with SIGKILL under load: systemd
 * restarts it (Restart=on-failure) and the clients, with reconnect on (the
 * default, brokerd_bus_set_reconnect(3)), come back on their own. A
 * service owns org.brokerd.test.Kill, a subscriber listens to its Tick
 * signals, two callers call it in a loop, and this process has a call in
 * flight that the service never answers. After the kill:
 *
 * - every bus is told through its state handler: DISCONNECTED, then
 *   CONNECTED (the loss of signals meanwhile and of its old unique name);
 * - the call in flight fails with -ECONNRESET at once, and so does any
 *   call of the callers that was in flight; no call ever times out;
 * - the service owns its name again (under a new unique name), the
 *   subscriber is subscribed again, and calls and signals flow as before;
 * - a process of alice owned org.brokerd.test.KillAlice, which the policy
 *   brokerd reads when it starts again no longer allows: her bus
 *   reconnects all the same, and its state handler says
 *   BROKERD_STATE_NOT_RESTORED right after CONNECTED; the others' do not.
 */
#include <fcntl.h>

#include "tests/integration/client/testlib.h"

#define NAME	   "org.brokerd.test.Kill"
#define ALICE_NAME "org.brokerd.test.KillAlice"
#define CALLERS	   2

static int ready[2], ticks[2], states[2], report[2], stop[2];

static const struct t_method methods[] = {
	{ "Ping", t_on_ping }, { "Emit", t_on_tick }, { "Hang", t_on_hang }, { NULL, NULL }
};

/* The state changes of the service's and the subscriber's buses go to states. */
static void on_state(brokerd_bus *bus, int state, void *u)
{
	t_say(states[1], "%s %s", (const char *)u,
	      state == BROKERD_STATE_CONNECTED	  ? "connected" :
	      state == BROKERD_STATE_NOT_RESTORED ? "not-restored" :
						    "disconnected");
}

static int alice(void *arg)
{
	brokerd_bus *bus;

	t_become(UID_ALICE);
	bus = t_open();
	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, "alice"), 0);
	CHECK_R(brokerd_bus_request_name(bus, ALICE_NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	t_say(ready[1], "alice");
	return brokerd_bus_run(bus) < 0;
}


/* Calls Ping until stop closes; reports how the calls ended. */
static int caller(void *arg)
{
	brokerd_bus *bus = t_open();
	unsigned int ok = 0, reset = 0, other = 0, timeouts = 0, slow = 0;
	char c;

	close(stop[1]);
	t_say(ready[1], "caller");
	while (read(stop[0], &c, 1) < 0 && errno == EAGAIN) {
		brokerd_msg *reply = NULL;
		uint64_t t0 = now_usec();
		int r = brokerd_bus_call(bus, NAME, "Ping", NULL, 0, 10000000, &reply);

		if (now_usec() - t0 > 5000000)
			slow++;
		if (r == 0)
			ok++;
		else if (r == -ECONNRESET)
			reset++;
		else if (r == -ETIMEDOUT)
			timeouts++;
		else
			other++; /* brokerd not back yet, or the name not yet owned again */
		brokerd_msg_unref(reply);
		if (r < 0)
			usleep(20000);
	}
	t_say(report[1], "%u %u %u %u %u", ok, reset, other, timeouts, slow);
	return 0;
}

static volatile bool reconnected;
static int main_states;

static void on_main_state(brokerd_bus *bus, int state, void *u)
{
	main_states = main_states * 10 + state + 1; /* 1 disconnected, 2 connected: 12 */
	if (state == BROKERD_STATE_CONNECTED)
		reconnected = true;
}

/* The state changes the processes report: "service connected", ... */
static struct t_lines seen;

/* Waits for the line "who state". */
static void expect_state(const char *who, const char *state, int timeout_ms)
{
	char want[64];

	snprintf(want, sizeof(want), "%s %s", who, state);
	t_lines_expect(&seen, want, timeout_ms);
}

int main(void)
{
	brokerd_bus *bus = t_open();
	struct t_reply hang = { 0 };
	pid_t ps, pu, pa, pc[CALLERS], old, now = 0;
	FILE *f;
	char before[64], after[64], line[128];
	brokerd_msg *reply;
	const void *body;
	unsigned int ok, reset, other, timeouts, slow;
	uint64_t t0;
	size_t size;
	bool got = false;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	t_pipe(ready);
	t_pipe(ticks);
	t_pipe(states);
	seen.fd = states[0];
	t_pipe(report);
	t_policy("[user alice]\nallow own " ALICE_NAME "\n");
	pa = t_fork(alice, NULL);
	t_expect(ready[0], "alice", 10000);
	/* what brokerd reads when it starts again: alice may no longer own it */
	f = fopen(T_POLICY_FILE, "we");
	CHECK(f);
	fputs("# client-brokerd-kill: nothing for alice\n", f);
	fclose(f);
	ps = t_watched_start(t_service_run, NAME, methods, on_state, ready, -1);
	pu = t_watched_start(t_subscriber_run, NAME, NULL, on_state, ready, ticks[1]);
	CHECK(pipe2(stop, O_CLOEXEC | O_NONBLOCK) == 0);
	for (int i = 0; i < CALLERS; i++) {
		pc[i] = t_fork(caller, NULL);
		t_expect(ready[0], "caller", 10000);
	}
	close(stop[0]);
	CHECK_R(brokerd_bus_set_state_handler(bus, on_main_state, NULL), 0);

	reply = t_call_retry(bus, NAME, "Ping", "", 2000);
	brokerd_msg_get_body(reply, &body, &size);
	snprintf(before, sizeof(before), "%.*s", (int)size, (const char *)body);
	brokerd_msg_unref(reply);
	brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", "before", 2000));
	t_expect(ticks[0], "before", 5000);
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Hang", NULL, 0, 60000000, t_on_reply, &hang), 0);
	/* the Hang call reaches the service before brokerd goes */
	brokerd_msg_unref(t_call_retry(bus, NAME, "Ping", "", 2000));

	old = t_brokerd_pid();
	CHECK(old > 0);
	t_log("killing brokerd (pid %d) with SIGKILL", (int)old);
	t0 = now_usec();
	CHECK_R(kill(old, SIGKILL), 0);
	CHECK(t_pump(bus, &hang.done, 5000));
	t_log("the call in flight ended with %d (%s) after %llu ms", hang.error, strerror(-hang.error),
	      (unsigned long long)(now_usec() - t0) / 1000);
	CHECK_R(hang.error, -ECONNRESET);
	expect_state("service", "disconnected", 10000);
	expect_state("subscriber", "disconnected", 10000);
	for (int i = 0; i < 200 && (now <= 0 || now == old); i++) {
		usleep(100000);
		now = t_brokerd_pid();
	}
	CHECK(now > 0 && now != old);
	t_log("systemd restarted brokerd: pid %d after %llu ms", (int)now,
	      (unsigned long long)(now_usec() - t0) / 1000);
	CHECK(t_pump(bus, &reconnected, 15000));
	CHECK_R(main_states, 12);
	expect_state("service", "connected", 15000);
	expect_state("subscriber", "connected", 15000);
	expect_state("alice", "connected", 15000);
	t_log("every bus reconnected after %llu ms", (unsigned long long)(now_usec() - t0) / 1000);
	expect_state("alice", "not-restored", 5000);
	CHECK_R(brokerd_bus_get_name_owner(bus, ALICE_NAME, line, sizeof(line)), -ENXIO);

	reply = t_call_retry(bus, NAME, "Ping", "", 10000);
	brokerd_msg_get_body(reply, &body, &size);
	snprintf(after, sizeof(after), "%.*s", (int)size, (const char *)body);
	brokerd_msg_unref(reply);
	t_log("service was %s, is %s", before, after);
	CHECK(strncmp(after, ":1.", 3) == 0 && strcmp(after, before) != 0);
	for (int i = 0; i < 50 && !got; i++) {
		brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", "after", 5000));
		while (t_hear(ticks[0], line, sizeof(line), 200) == 0)
			if (strcmp(line, "after") == 0)
				got = true;
	}
	if (!got)
		FAIL("the subscriber does not hear the service's signals after the restart");
	if (t_lines_seen(&seen, "service not-restored") || t_lines_seen(&seen, "subscriber not-restored"))
		FAIL("the service or the subscriber was told all was not restored, though it was");

	close(stop[1]); /* the callers stop and report */
	for (int i = 0; i < CALLERS; i++) {
		CHECK_R(t_hear(report[0], line, sizeof(line), 20000), 0);
		CHECK(sscanf(line, "%u %u %u %u %u", &ok, &reset, &other, &timeouts, &slow) == 5);
		t_log("caller: %u calls answered, %u reset, %u failed while brokerd was away, %u timed out, %u slow",
		      ok, reset, other, timeouts, slow);
		CHECK(ok > 0);
		CHECK_R(timeouts, 0);
		CHECK_R(slow, 0);
	}
	for (int i = 0; i < CALLERS; i++)
		CHECK_R(t_wait(pc[i], 10000), 0);
	t_kill(ps);
	t_kill(pu);
	t_kill(pa);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
