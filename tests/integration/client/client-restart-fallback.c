/* SPDX-License-Identifier: MIT */
/*
 * client-restart-fallback - a `systemctl restart brokerd` whose hand-over
 * cannot be taken (brokerd/README.md, "Restart": the ring's keeper killed
 * with SIGKILL after the old brokerd stored its state, before the new one
 * took the ring, as a crash in the middle of the restart leaves it) falls
 * back to the reconnect path of a brokerd crash: the new brokerd starts
 * with an empty bus, and every client sees it and comes back.
 *
 * A service owns org.brokerd.test.Fallback, a subscriber listens to its
 * Tick signals, and this process has a call in flight that the service
 * never answers. After the failed restart:
 *
 * - every loss is reported to its client: the call in flight fails with
 *   -ECONNRESET, every bus's state handler says DISCONNECTED, then
 *   CONNECTED, and the service's unique name has changed;
 * - the service owns its name again, the subscriber is subscribed again,
 *   and calls and signals flow as before; nobody is told NOT_RESTORED
 *   (all was restored).
 *
 * The keeper lives a few hundred ms; when the new brokerd took the ring
 * before the kill, the restart succeeded (no disconnect) and the test
 * tries again, up to ATTEMPTS times.
 */
#include <fcntl.h>

#include "tests/integration/client/testlib.h"

#define NAME	 "org.brokerd.test.Fallback"
#define ATTEMPTS 8

static int ready[2], ticks[2], states[2];

static const struct t_method methods[] = {
	{ "Ping", t_on_ping }, { "Emit", t_on_tick }, { "Hang", t_on_hang }, { NULL, NULL }
};

static void on_state(brokerd_bus *bus, int state, void *u)
{
	t_say(states[1], "%s %s", (const char *)u,
	      state == BROKERD_STATE_CONNECTED	  ? "connected" :
	      state == BROKERD_STATE_NOT_RESTORED ? "not-restored" :
						    "disconnected");
}


static volatile bool disconnected, reconnected;
static int main_states;

static void on_main_state(brokerd_bus *bus, int state, void *u)
{
	main_states = main_states * 10 + state + 1; /* 1 disconnected, 2 connected: 12 */
	if (state == BROKERD_STATE_DISCONNECTED)
		disconnected = true;
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
	char before[64], after[64], line[64];
	pid_t ps, pu, keeper = 0;
	uint64_t t0 = 0;
	bool got = false;
	int attempt;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	CHECK_R(t_keeper_pid(), 0); /* no keeper left over from other tests */
	t_pipe(ready);
	t_pipe(ticks);
	t_pipe(states);
	seen.fd = states[0];
	ps = t_watched_start(t_service_run, NAME, methods, on_state, ready, -1);
	pu = t_watched_start(t_subscriber_run, NAME, NULL, on_state, ready, ticks[1]);
	CHECK_R(brokerd_bus_set_state_handler(bus, on_main_state, NULL), 0);

	t_service_id(bus, NAME, before, sizeof(before), 2000);
	brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", "before", 2000));
	t_expect(ticks[0], "before", 5000);
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Hang", NULL, 0, 120000000, t_on_reply, &hang), 0);
	brokerd_msg_unref(t_call_retry(bus, NAME, "Ping", "", 2000)); /* Hang has reached the service */

	for (attempt = 1; attempt <= ATTEMPTS && !disconnected; attempt++) {
		pid_t old = t_brokerd_pid(), now = 0;
		uint64_t end;

		CHECK(old > 0);
		CHECK_R(system("systemctl restart --no-block brokerd.service"), 0);
		for (end = now_usec() + 20000000; !(keeper = t_keeper_pid()) && now_usec() < end;)
			usleep(1000);
		if (!keeper)
			FAIL("attempt %d: no brokerd-keeper within 20 s of the restart", attempt);
		t0 = now_usec();
		(void)kill(keeper, SIGKILL);
		t_log("attempt %d: killed the ring's keeper (pid %d)", attempt, (int)keeper);
		/* the new brokerd running: it took the ring (a restart) or fell back (the disconnect) */
		for (end = now_usec() + 30000000; (now <= 0 || now == old) && now_usec() < end;) {
			(void)brokerd_bus_process(bus);
			usleep(20000);
			now = t_brokerd_pid();
		}
		CHECK(now > 0 && now != old);
		(void)t_pump(bus, &disconnected, 3000);
		if (!disconnected) {
			CHECK(!hang.done);
			t_log("attempt %d: the new brokerd (pid %d) had taken the ring already: a restart", attempt,
			      (int)now);
		}
	}
	if (!disconnected)
		FAIL("in %d restarts the keeper was never killed in time", ATTEMPTS);

	CHECK(t_pump(bus, &hang.done, 5000));
	t_log("the call in flight ended with %d (%s)", hang.error, strerror(-hang.error));
	CHECK_R(hang.error, -ECONNRESET);
	expect_state("service", "disconnected", 10000);
	expect_state("subscriber", "disconnected", 10000);
	CHECK(t_pump(bus, &reconnected, 15000));
	CHECK_R(main_states, 12);
	expect_state("service", "connected", 15000);
	expect_state("subscriber", "connected", 15000);
	t_log("every bus reconnected %llu ms after the keeper's kill", (unsigned long long)(now_usec() - t0) / 1000);

	t_service_id(bus, NAME, after, sizeof(after), 10000);
	t_log("service was %s, is %s", before, after);
	CHECK(strncmp(after, ":1.", 3) == 0 && strcmp(after, before) != 0);
	for (int i = 0; i < 50 && !got; i++) {
		brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", "after", 5000));
		while (t_hear(ticks[0], line, sizeof(line), 200) == 0)
			if (strcmp(line, "after") == 0)
				got = true;
	}
	if (!got)
		FAIL("the subscriber does not hear the service's signals after the fallback");
	while (t_lines_read(&seen, 200) == 0)
		;
	for (int i = 0; i < seen.n; i++)
		if (strstr(seen.line[i], "not-restored"))
			FAIL("%s: all was restored", seen.line[i]);
	CHECK_R(main_states, 12);

	t_kill(pu);
	t_kill(ps);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
