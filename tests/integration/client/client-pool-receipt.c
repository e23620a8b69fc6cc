/* SPDX-License-Identifier: MIT */
/*
 * client-pool-receipt - a caller knows which worker of a pool took each of
 * its calls (the kernel's receipts, IOIPC_SEND_RECEIPT): three workers
 * serve org.brokerd.test.PoolReceipt with BROKERD_NAME_POOL and each holds
 * one of three calls the caller made on one bus. A worker that answers
 * another worker's call (it may reach the caller's inbox and is a receiver
 * of the name, so the badge alone would not tell) is dropped and counted
 * as forged. Then one worker is killed with SIGKILL: only the call it held
 * fails, with NoReply (-EREMOTEIO) at once, from brokerd's CallReceiverEnded
 * and its pid (protocol/README.md, Worker pools); the calls the others hold
 * stay pending and get their answers.
 */
#include <inttypes.h>

#include "client/bus-chan.h"
#include "client/bus-inbox.h"
#include "tests/integration/client/testlib.h"

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

/* The outcome of an asynchronous call, with the error's name and the body. */
struct outcome {
	volatile bool done;
	int error;
	uint64_t at;
	char error_name[128];
	char body[256];
};

static int on_outcome(brokerd_msg *m, int error, void *u)
{
	struct outcome *o = u;
	const void *body;
	size_t size;

	o->error = error;
	o->at = now_usec();
	if (m) {
		snprintf(o->error_name, sizeof(o->error_name), "%s",
			 brokerd_msg_get_type(m) == BROKERD_MSG_ERROR ? brokerd_msg_get_member(m) : "");
		if (brokerd_msg_get_body(m, &body, &size) == 0)
			snprintf(o->body, sizeof(o->body), "%.*s", (int)size, (const char *)body);
	}
	o->done = true;
	return 0;
}

/* Runs bus for ms; no call may complete meanwhile. */
static void quiet(brokerd_bus *bus, int ms, struct outcome *calls, int n)
{
	volatile bool never = false;

	(void)t_pump(bus, &never, ms);
	for (int i = 0; i < n; i++)
		if (calls[i].done)
			FAIL("call %d completed (%d %s: %s) though its worker holds it", i, calls[i].error,
			     calls[i].error_name, calls[i].body);
}

int main(void)
{
	brokerd_bus *bus = t_open();
	struct outcome calls[WORKERS] = { 0 };
	int holder[WORKERS];	  /* call -> the worker that took it */
	uint32_t serial[WORKERS]; /* call -> its serial */
	char line[128], caller[64];
	pid_t pids[WORKERS];
	int victim, forger;
	uint64_t t0;

	t_pipe(ready);
	t_pipe(took);
	for (int i = 0; i < WORKERS; i++) {
		t_pipe(cmd[i]);
		pids[i] = t_fork(worker, (void *)(uintptr_t)(i + 1));
		t_expect(ready[0], "ready", 10000);
	}

	/* each call goes to a worker with a receive posted: one that holds a call has none */
	for (int i = 0; i < WORKERS; i++) {
		uint64_t end = now_usec() + 10000000;
		int w;

		CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Work", "hold", 4, CALL_TIMEOUT, on_outcome,
					       &calls[i]),
			0);
		while (t_hear(took[0], line, sizeof(line), 10) < 0) {
			(void)brokerd_bus_process(bus);
			if (now_usec() > end)
				FAIL("no worker took call %d within 10 s", i);
		}
		CHECK(sscanf(line, "%d %63s %" SCNu32, &w, caller, &serial[i]) == 3);
		CHECK(w >= 1 && w <= WORKERS);
		for (int j = 0; j < i; j++)
			if (holder[j] == w)
				FAIL("worker %d took calls %d and %d", w, j, i);
		holder[i] = w;
		t_log("call %d (serial %" PRIu32 ") held by worker %d (pid %d)", i, serial[i], w,
		      (int)pids[w - 1]);
	}
	CHECK_R(brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY), 0);

	/* the worker of call 0 answers call 1, which another worker holds: a forgery */
	forger = holder[0];
	t_say(cmd[forger - 1][1], "forge %s %" PRIu32, caller, serial[1]);
	t_expect(took[0], "forged", 10000);
	quiet(bus, 300, calls, WORKERS);
	CHECK_R(brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY), 1);
	t_log("worker %d's answer to worker %d's call was dropped as forged", forger, holder[1]);

	/* the worker of call 2 is killed: its call alone fails */
	victim = holder[2];
	t0 = now_usec();
	t_kill(pids[victim - 1]);
	pids[victim - 1] = 0;
	if (!t_pump(bus, &calls[2].done, 10000))
		FAIL("the call held by the killed worker %d is still pending 10 s later", victim);
	t_log("call 2 got %d (%s: %s) %llu ms after the kill of worker %d (timeout %llu ms)", calls[2].error,
	      calls[2].error_name, calls[2].body, (unsigned long long)(calls[2].at - t0) / 1000, victim,
	      CALL_TIMEOUT / 1000);
	CHECK_R(calls[2].error, -EREMOTEIO);
	CHECK(strcmp(calls[2].error_name, BROKERD_ERROR_NO_REPLY) == 0);
	CHECK(strncmp(calls[2].body, "receiver ended", 14) == 0);
	CHECK(calls[2].at - t0 < BOUND_USEC);
	quiet(bus, 500, calls, 2);

	/* the workers that live answer the calls they hold */
	for (int i = 0; i < 2; i++) {
		char want[16];

		t_say(cmd[holder[i] - 1][1], "reply");
		if (!t_pump(bus, &calls[i].done, 10000))
			FAIL("call %d: no answer from worker %d within 10 s", i, holder[i]);
		snprintf(want, sizeof(want), "%d", holder[i]);
		CHECK_R(calls[i].error, 0);
		if (strcmp(calls[i].body, want) != 0)
			FAIL("call %d answered \"%s\", not by its worker %d", i, calls[i].body, holder[i]);
	}
	CHECK_R(brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY), 1);
	t_log("calls 0 and 1 answered by their workers %d and %d", holder[0], holder[1]);

	for (int i = 0; i < WORKERS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
