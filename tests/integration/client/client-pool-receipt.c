/* SPDX-License-Identifier: MIT */
/*
 * client-pool-receipt - a caller knows which worker of a pool took each of
 * its calls (the kernel's receipts, IOIPC_SEND_RECEIPT): three workers
 * serve org.brokerd.test.PoolReceipt with BROKERD_NAME_POOL and each holds
 * one of three calls the caller made on one bus. A worker that answers
 * another worker's call (it may reach the caller's inbox and is a receiver
 * of the name, so the badge alone would not tell) is dropped and counted
 * as forged. Then one worker is killed with SIGKILL: only the call it held
 * fails, with NoReply (-EREMOTEIO) at once (the caller watches the process
 * its receipt named; brokerd's CallReceiverEnded and its pid, which come
 * after, fail nothing more: protocol/README.md, Worker pools); the calls
 * the others hold stay pending and get their answers.
 */
#include <inttypes.h>

#include "client/bus-chan.h"
#include "client/bus-inbox.h"
#include "tests/integration/client/testpool.h"

#define NAME	     "org.brokerd.test.PoolReceipt"
#define WORKERS	     3
#define CALL_TIMEOUT 20000000ULL
#define BOUND_USEC   2000000ULL /* a tenth of the timeout */

static int ready[2], took[2], cmd[WORKERS][2];
static brokerd_bus *wbus; /* the worker's own bus, in its process */

/* Answers the call with serial to caller from this worker, though it does not hold it. */
static void forge(const char *caller, uint32_t serial)
{
	struct chmsg r = { .type = CHMSG_REPLY, .serial = 1, .reply_serial = serial, .destination = caller };
	_cleanup_free_ void *data = NULL;
	struct peer_inbox *p;

	CHECK_R(peer_inbox_get_by_name(wbus, caller, &p), 0);
	CHECK_R(bus_bytes_body(&r, "forged", 6, &data), 0);
	CHECK_R(bus_chan_send(wbus, p->send, &r), 0);
}

/* Holds the call, says so, then does what the test says until told to answer it. */
static int on_work(brokerd_msg *m, void *u)
{
	int idx = (int)(uintptr_t)u;
	char line[128], caller[64], buf[16];
	uint32_t serial;

	t_say(took[1], "%d %s %" PRIu64, idx, brokerd_msg_get_sender(m), brokerd_msg_get_serial(m));
	for (;;) {
		CHECK_R(t_hear(cmd[idx - 1][0], line, sizeof(line), 30000), 0);
		if (sscanf(line, "forge %63s %" SCNu32, caller, &serial) == 2) {
			forge(caller, serial);
			t_say(took[1], "forged");
		} else if (strcmp(line, "reply") == 0) {
			snprintf(buf, sizeof(buf), "%d", idx);
			return brokerd_msg_reply(m, buf, strlen(buf));
		}
	}
}

static int worker(void *arg)
{
	wbus = t_open();
	CHECK_R(brokerd_bus_add_method(wbus, NULL, NAME, "Work", on_work, arg), 0);
	CHECK(brokerd_bus_request_name(wbus, NAME, BROKERD_NAME_POOL) >= 0);
	t_say(ready[1], "ready");
	return brokerd_bus_run(wbus) < 0;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	struct t_outcome calls[WORKERS] = { 0 };
	int holder[WORKERS];	  /* call -> the worker that took it */
	uint32_t serial[WORKERS]; /* call -> its serial */
	char lines[WORKERS][T_POOL_LINE_MAX], caller[64];
	pid_t pids[WORKERS];
	int forger;

	t_pool_hold_calls(bus, NAME, CALL_TIMEOUT, worker, WORKERS, pids, ready, took, cmd, calls, holder, lines);
	for (int i = 0; i < WORKERS; i++) {
		CHECK(sscanf(lines[i], "%*d %63s %" SCNu32, caller, &serial[i]) == 2);
		t_log("call %d (serial %" PRIu32 ") held by worker %d (pid %d)", i, serial[i], holder[i],
		      (int)pids[holder[i] - 1]);
	}
	CHECK_R(brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY), 0);

	/* the worker of call 0 answers call 1, which another worker holds: a forgery */
	forger = holder[0];
	t_say(cmd[forger - 1][1], "forge %s %" PRIu32, caller, serial[1]);
	t_expect(took[0], "forged", 10000);
	t_pool_quiet(bus, 300, calls, WORKERS);
	CHECK_R(brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY), 1);
	t_log("worker %d's answer to worker %d's call was dropped as forged", forger, holder[1]);

	/* the worker of call 2 is killed: its call alone fails */
	t_pool_kill_holder(bus, calls, holder, pids, WORKERS, BOUND_USEC);

	/* the workers that live answer the calls they hold */
	t_pool_answer(bus, calls, holder, 2, cmd);
	CHECK_R(brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY), 1);
	t_log("calls 0 and 1 answered by their workers %d and %d", holder[0], holder[1]);

	for (int i = 0; i < WORKERS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
