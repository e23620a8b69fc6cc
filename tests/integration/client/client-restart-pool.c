/* SPDX-License-Identifier: MIT */
/*
 * client-restart-pool - a pool worker's end fails only its own calls, also
 * after `systemctl restart brokerd`: three workers serve
 * org.brokerd.test.RestartPool with BROKERD_NAME_POOL and each holds one
 * of three calls the caller made (the kernel's receipts told the caller
 * which took which). brokerd is restarted (the hand-over through systemd's
 * fd store), then one worker is killed with SIGKILL: the call it held fails
 * at once with NoReply (the caller watches the process its receipt named),
 * and the two calls the other workers hold stay pending and get their
 * answers: brokerd's CallReceiverEnded, which comes after, still carries
 * the worker's pid (the caller's ENDED_PID and the workers' pids are in the
 * handed-over state). A brokerd that forgot either would make the library
 * fail all three (protocol/README.md, Worker pools).
 */
#include <inttypes.h>

#include "tests/integration/client/testpool.h"

#define NAME	     "org.brokerd.test.RestartPool"
#define WORKERS	     3
#define CALL_TIMEOUT 20000000ULL
#define BOUND_USEC   2000000ULL /* a tenth of the timeout */

static int ready[2], took[2], cmd[WORKERS][2];

/* Holds the call, says so, and answers it when told. */
static int on_work(brokerd_msg *m, void *u)
{
	int idx = (int)(uintptr_t)u;
	char buf[16];

	t_say(took[1], "%d", idx);
	t_expect(cmd[idx - 1][0], "reply", 60000);
	snprintf(buf, sizeof(buf), "%d", idx);
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int worker(void *arg)
{
	return t_pool_worker(NAME, "Work", on_work, arg, ready[1], 0);
}

static void on_state(brokerd_bus *bus, int state, void *u)
{
	FAIL("the caller's bus noticed the restart (state %d)", state);
}

int main(void)
{
	brokerd_bus *bus;
	struct t_outcome calls[WORKERS] = { 0 };
	int holder[WORKERS]; /* call -> the worker that took it */
	pid_t pids[WORKERS], brokerd;
	uint64_t t0;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	bus = t_open();
	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, NULL), 0);
	t_pool_hold_calls(bus, NAME, CALL_TIMEOUT, worker, WORKERS, pids, ready, took, cmd, calls, holder, NULL);
	for (int i = 0; i < WORKERS; i++)
		t_log("call %d held by worker %d (pid %d)", i, holder[i], (int)pids[holder[i] - 1]);
	/* the receipts are in before brokerd goes */
	t_pool_quiet(bus, 300, calls, WORKERS);

	brokerd = t_brokerd_pid();
	t0 = now_usec();
	if (system("systemctl restart brokerd.service") != 0)
		FAIL("systemctl restart brokerd failed");
	CHECK(t_brokerd_pid() != brokerd);
	t_log("brokerd restarted in %llu ms (pid %d -> %d)", (unsigned long long)(now_usec() - t0) / 1000,
	      (int)brokerd, (int)t_brokerd_pid());
	t_pool_quiet(bus, 300, calls, WORKERS);

	/* the worker of call 2 is killed: its call alone fails */
	t_pool_kill_holder(bus, calls, holder, pids, WORKERS, BOUND_USEC);

	/* the workers that live answer the calls they hold */
	t_pool_answer(bus, calls, holder, 2, cmd);
	t_log("calls 0 and 1 answered by their workers %d and %d after the restart", holder[0], holder[1]);

	for (int i = 0; i < WORKERS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
