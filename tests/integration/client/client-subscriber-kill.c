/* SPDX-License-Identifier: MIT */
/*
 * client-subscriber-kill - subscribers of a broadcast signal killed with
 * SIGKILL while the publisher emits: the publisher never stalls and never
 * fails (the signal channel is lossy, protocol/README.md section 6: a
 * subscriber that falls a ring behind loses its oldest signals, the
 * publisher's sends do not wait for it), and the subscribers still alive
 * keep receiving.
 *
 * The test owns org.brokerd.test.SubKill and five children subscribe. One
 * is stopped (SIGSTOP) from the start: it never reads, its ring fills.
 * The test emits 300 signals as fast as it can; after 50 it kills two
 * subscribers, after 150 the stopped one. Every emit must succeed, none may
 * take more than 500 ms (the worst under TCG is a few ms). Then five
 * signals, one at a time: each reaches both living subscribers.
 */
#include "tests/integration/client/testlib.h"

#define NAME	 "org.brokerd.test.SubKill"
#define SUBS	 5
#define EMITS	 300
#define LIVE_MIN 3 /* subscribers 3 and 4 live on */

static int ready[2], heard[SUBS][2];

static int subscriber(void *arg)
{
	brokerd_bus *bus = t_open();

	/* every body it hears goes to its pipe: the test looks for "end-K" */
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Tick", t_on_say_body,
				      (void *)(intptr_t)heard[(int)(uintptr_t)arg][1]),
		0);
	t_say(ready[1], "subscribed");
	return brokerd_bus_run(bus) < 0;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	pid_t pids[SUBS];
	uint64_t worst = 0, t0, total;
	char line[64];

	t_pipe(ready);
	CHECK_R(brokerd_bus_request_name(bus, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	for (int i = 0; i < SUBS; i++) {
		t_pipe(heard[i]);
		pids[i] = t_fork(subscriber, (void *)(uintptr_t)i);
		t_expect(ready[0], "subscribed", 10000);
	}
	CHECK_R(kill(pids[2], SIGSTOP), 0);

	total = now_usec();
	for (int i = 0; i < EMITS; i++) {
		char body[32];
		uint64_t dt;
		int n = snprintf(body, sizeof(body), "tick-%d", i);

		if (i == 50) {
			t_kill(pids[0]);
			t_kill(pids[1]);
		}
		if (i == 150) {
			kill(pids[2], SIGKILL); /* stopped: SIGKILL still ends it */
			waitpid(pids[2], NULL, 0);
		}
		t0 = now_usec();
		CHECK_R(brokerd_bus_emit_signal(bus, NAME, "Tick", body, (size_t)n), 0);
		dt = now_usec() - t0;
		if (dt > worst)
			worst = dt;
		(void)brokerd_bus_process(bus);
	}
	total = now_usec() - total;
	t_log("%d signals emitted in %llu ms, the slowest emit took %llu us", EMITS,
	      (unsigned long long)total / 1000, (unsigned long long)worst);
	if (worst > 500000)
		FAIL("an emit took %llu ms: the publisher stalled", (unsigned long long)worst / 1000);

	for (int k = 0; k < 5; k++) {
		char want[16];

		snprintf(want, sizeof(want), "end-%d", k);
		CHECK_R(brokerd_bus_emit_signal(bus, NAME, "Tick", want, strlen(want)), 0);
		for (int i = LIVE_MIN; i < SUBS; i++) {
			/* the signals it heard in order; the first "end-k" after the burst */
			do {
				if (t_hear(heard[i][0], line, sizeof(line), 10000) < 0)
					FAIL("subscriber %d did not hear %s", i, want);
			} while (strcmp(line, want) != 0);
		}
	}
	for (int i = LIVE_MIN; i < SUBS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
