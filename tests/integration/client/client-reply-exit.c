/* SPDX-License-Identifier: MIT */
/*
 * client-reply-exit - a pool of two workers serves org.brokerd.test.ReplyExit;
 * one takes a call and is killed with SIGKILL before it answers, while the
 * other lives on. The caller of the killed worker gets
 * org.freedesktop.DBus.Error.NoReply ("receiver ended", -EREMOTEIO) at
 * once, from brokerd's CallReceiverEnded signal (protocol/README.md, Worker
 * pools), never its 20 s timeout; the other caller's calls, before, during
 * and after, are answered by the worker that lives, and neither bus
 * reconnects. Then a worker answers a call and kills itself right away: its
 * reply, already in the caller's inbox when the signal comes, wins over the
 * signal (the library reads its inbox before it fails calls), and the
 * worker left serves the calls that follow.
 */
#include <signal.h>

#include "tests/integration/client/testpool.h"

#define NAME	     "org.brokerd.test.ReplyExit"
#define CALL_TIMEOUT 20000000ULL
#define BOUND_USEC   2000000ULL /* a tenth of the timeout */

static int ready[2], took[2];

static int on_work(brokerd_msg *m, void *u)
{
	int idx = (int)(uintptr_t)u;
	const void *body;
	size_t size;
	char buf[32];

	brokerd_msg_get_body(m, &body, &size);
	snprintf(buf, sizeof(buf), "%d", idx);
	if (size == 4 && memcmp(body, "hang", 4) == 0) {
		t_say(took[1], "%d", idx);
		for (;;)
			pause(); /* mid-call, until the test kills it */
	}
	if (size == 10 && memcmp(body, "reply-exit", 10) == 0) {
		CHECK_R(brokerd_msg_reply(m, buf, strlen(buf)), 0);
		t_say(took[1], "%d", idx);
		raise(SIGKILL); /* the reply is in the caller's inbox already */
	}
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int worker(void *arg)
{
	return t_pool_worker(NAME, "Work", on_work, arg, ready[1], 0);
}

/* n calls from bus, each answered by the worker alive. */
static void calls_served(brokerd_bus *bus, int n, int alive)
{
	for (int i = 0; i < n; i++) {
		brokerd_msg *reply = NULL;
		const void *body;
		size_t size;

		CHECK_R(brokerd_bus_call(bus, NAME, "Work", "x", 1, 5000000, &reply), 0);
		brokerd_msg_get_body(reply, &body, &size);
		CHECK_R(size ? atoi(body) : 0, alive);
		brokerd_msg_unref(reply);
	}
}

static int states;

static void on_state(brokerd_bus *bus, int state, void *u)
{
	states++;
}

int main(void)
{
	brokerd_bus *bus = t_open(), *other = t_open();
	struct t_outcome hung = { 0 }, last = { 0 };
	pid_t pids[3];
	char line[16];
	int victim, alive;
	uint64_t t0;

	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, NULL), 0);
	CHECK_R(brokerd_bus_set_state_handler(other, on_state, NULL), 0);
	t_pipe(ready);
	t_pipe(took);
	t_pool_start(pids, 2, worker, ready[0]);

	/* one worker takes the call and hangs in it */
	t_call_taken(bus, NAME, "Work", "hang", CALL_TIMEOUT, &hung, took[0], line, sizeof(line));
	victim = atoi(line);
	CHECK(victim == 1 || victim == 2);
	alive = 3 - victim;
	t_log("worker %d took the call and hangs; worker %d serves the others", victim, alive);
	/* while it hangs, the other caller is served by the other worker */
	calls_served(other, 5, alive);
	CHECK(!hung.done);

	t0 = now_usec();
	t_kill(pids[victim - 1]);
	pids[victim - 1] = 0;
	t_expect_receiver_ended(bus, &hung, t0, BOUND_USEC, "the call taken by the killed worker");
	/* the other caller, which had nothing pending, goes on as before */
	calls_served(other, 5, alive);
	calls_served(bus, 5, alive);

	/* a worker that answers and dies at once: its reply wins */
	pids[2] = t_fork(worker, (void *)(uintptr_t)3);
	t_expect(ready[0], "ready", 10000);
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Work", "reply-exit", 10, CALL_TIMEOUT, t_on_outcome, &last),
		0);
	if (!t_pump(bus, &last.done, 10000))
		FAIL("reply-exit: no answer within 10 s");
	t_log("reply-exit: %d, answered by worker %s", last.error, last.body);
	CHECK_R(last.error, 0);
	victim = atoi(last.body);
	CHECK(victim == alive || victim == 3);
	(void)t_wait(pids[victim == 3 ? 2 : alive - 1], 5000);
	if (victim == 3)
		pids[2] = 0;
	else
		pids[alive - 1] = 0;
	alive = victim == 3 ? alive : 3;
	/*
	 * brokerd sees the end and revokes meanwhile: calls sent before that
	 * could have gone to the dying worker (it failed nothing: no call was
	 * pending); those sent after go to the survivor and must not fail.
	 */
	{
		volatile bool never = false;

		(void)t_pump(bus, &never, 500);
	}
	calls_served(bus, 5, alive);
	calls_served(other, 5, alive);
	CHECK_R(states, 0);

	for (int i = 0; i < 3; i++)
		t_kill(pids[i]);
	brokerd_bus_close(other);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
