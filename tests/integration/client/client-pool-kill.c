/* SPDX-License-Identifier: MIT */
/*
 * client-pool-kill - a worker of a pool killed with SIGKILL while it serves
 * a call: the caller gets a NoReply error (-EREMOTEIO) at once (brokerd tells
 * the callers of the name that one of its call receivers is gone:
 * CallReceiverEnded, protocol/README.md), never its timeout, and the workers that remain serve
 * the calls that follow. Three workers request org.brokerd.test.PoolKill
 * with BROKERD_NAME_POOL (worker 1 is the primary owner). First a queued
 * worker takes a call and is killed (nothing changes hands: only the new
 * signal tells the caller), then the primary owner (its queue is promoted).
 * Calls it does not mean to take ("die-queued" reaching the primary, say)
 * a worker refuses with an error, and the caller sends them again.
 */
#include "tests/integration/client/testlib.h"

#define NAME	   "org.brokerd.test.PoolKill"
#define WORKERS	   3
#define ERR_NOT_ME "org.brokerd.test.Error.NotMe"

static int ready[2], took[2];

static int on_work(brokerd_msg *m, void *u)
{
	int idx = (int)(uintptr_t)u;
	const void *body;
	size_t size;
	char buf[32];

	brokerd_msg_get_body(m, &body, &size);
	if ((size == 10 && memcmp(body, "die-queued", 10) == 0 && idx != 1) ||
	    (size == 11 && memcmp(body, "die-primary", 11) == 0 && idx == 1)) {
		t_say(took[1], "%d", idx);
		for (;;)
			pause(); /* mid-call, until the test kills it */
	}
	if (size >= 4 && memcmp(body, "die-", 4) == 0)
		return brokerd_msg_reply_error(m, ERR_NOT_ME, "not me");
	snprintf(buf, sizeof(buf), "%d", idx);
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int worker(void *arg)
{
	return t_pool_worker(NAME, "Work", on_work, arg, ready[1],
			     (uintptr_t)arg == 1 ? BROKERD_NAME_PRIMARY_OWNER : BROKERD_NAME_IN_QUEUE);
}

/*
 * Sends body until a worker takes it and hangs (the others refuse it), kills
 * that worker and checks that the call fails at once. Returns the worker.
 */
static int kill_mid_call(brokerd_bus *bus, const char *body, pid_t *pids)
{
	char line[16];
	int victim = 0;

	for (int attempt = 0; attempt < 20 && !victim; attempt++) {
		struct t_reply r = { 0 };
		uint64_t t0;

		CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Work", body, strlen(body), 20000000,
					       t_on_reply, &r),
			0);
		while (!r.done && !victim) {
			(void)brokerd_bus_process(bus);
			if (!r.done && t_hear(took[0], line, sizeof(line), 50) == 0)
				victim = atoi(line);
		}
		if (!victim) {
			CHECK(r.error < 0); /* refused: NotMe */
			continue;
		}
		CHECK(victim >= 1 && victim <= WORKERS);
		t_log("%s: worker %d took the call; killing it", body, victim);
		t0 = now_usec();
		t_kill(pids[victim - 1]);
		pids[victim - 1] = 0;
		if (!t_pump(bus, &r.done, 10000))
			FAIL("%s: the call taken by the killed worker %d is still pending 10 s later", body,
			     victim);
		t_log("%s: the caller got %d (%s) %llu ms after the kill", body, r.error, strerror(-r.error),
		      (unsigned long long)(now_usec() - t0) / 1000);
		CHECK_R(r.error, -EREMOTEIO); /* NoReply: the other workers still serve the name */
		CHECK(now_usec() - t0 < 5000000);
	}
	CHECK(victim);
	return victim;
}

/* n calls, each answered by a living worker. */
static void calls_served(brokerd_bus *bus, int n, const pid_t *pids)
{
	for (int i = 0; i < n; i++) {
		brokerd_msg *reply = NULL;
		const void *body;
		size_t size;
		int w;

		CHECK_R(brokerd_bus_call(bus, NAME, "Work", "x", 1, 5000000, &reply), 0);
		brokerd_msg_get_body(reply, &body, &size);
		w = size ? atoi(body) : 0;
		CHECK(w >= 1 && w <= WORKERS && pids[w - 1]);
		brokerd_msg_unref(reply);
	}
}

int main(void)
{
	brokerd_bus *bus = t_open();
	pid_t pids[WORKERS];
	int v;

	t_pipe(ready);
	t_pipe(took);
	for (int i = 0; i < WORKERS; i++) {
		pids[i] = t_fork(worker, (void *)(uintptr_t)(i + 1));
		t_expect(ready[0], "ready", 10000);
	}
	calls_served(bus, 6, pids);

	v = kill_mid_call(bus, "die-queued", pids);
	CHECK(v != 1);
	calls_served(bus, 6, pids);

	v = kill_mid_call(bus, "die-primary", pids);
	CHECK_R(v, 1);
	calls_served(bus, 6, pids);

	for (int i = 0; i < WORKERS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
