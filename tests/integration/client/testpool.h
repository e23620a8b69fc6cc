/* SPDX-License-Identifier: MIT */
/*
 * testpool.h - what the worker-pool tests share (client-reply-exit,
 * client-pool-receipt, client-restart-pool, client-pool-child): starting
 * the workers, calls whose outcome is kept, waiting until a worker says it
 * took a call, having each worker hold one, and
 * the check that a call failed the way CallReceiverEnded makes it fail
 * (protocol/README.md, Worker pools).
 */
#ifndef BROKERD_TESTS_TESTPOOL_H
#define BROKERD_TESTS_TESTPOOL_H

#include "tests/integration/client/testlib.h"

/* The outcome of an asynchronous call (t_on_outcome), with the error's name and the body. */
struct t_outcome {
	volatile bool done;
	int error;
	uint64_t at; /* CLOCK_MONOTONIC usec */
	char error_name[128];
	char body[256];
};

static inline int t_on_outcome(brokerd_msg *m, int error, void *u)
{
	struct t_outcome *o = u;
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

/* Forks n workers fn(1) ... fn(n) into pids, one after the other, each once it said "ready" on ready_fd. */
static inline void t_pool_start(pid_t *pids, int n, int (*fn)(void *), int ready_fd)
{
	for (int i = 0; i < n; i++) {
		pids[i] = t_fork(fn, (void *)(uintptr_t)(i + 1));
		t_expect(ready_fd, "ready", 10000);
	}
}

/*
 * Calls name.member with body from bus (timeout usec, the outcome into o)
 * and processes bus until a worker says on took_fd that it took the call:
 * its line goes into line.
 */
static inline void t_call_taken(brokerd_bus *bus, const char *name, const char *member, const char *body,
				uint64_t timeout, struct t_outcome *o, int took_fd, char *line, size_t size)
{
	uint64_t end = now_usec() + 10000000;

	CHECK_R(brokerd_bus_call_async(bus, NULL, name, member, body, strlen(body), timeout, t_on_outcome, o),
		0);
	while (t_hear(took_fd, line, size, 10) < 0) {
		(void)brokerd_bus_process(bus);
		if (now_usec() > end)
			FAIL("no worker took the call \"%s\" within 10 s", body);
	}
}

#define T_POOL_LINE_MAX 128

/*
 * Makes the pipes (ready, took, n in cmd), starts n workers fn
 * (t_pool_start()) and has each hold one call: call i, name.Work("hold")
 * with timeout usec (its outcome into calls[i]), goes to the worker with a
 * receive posted (one that holds a call has none): holder[i], from 1, the
 * number the worker's line on took starts with; the line into lines[i]
 * unless lines is NULL. No worker may hold two.
 */
static inline void t_pool_hold_calls(brokerd_bus *bus, const char *name, uint64_t timeout, int (*fn)(void *),
				     int n, pid_t *pids, int ready[2], int took[2], int (*cmd)[2],
				     struct t_outcome *calls, int *holder, char (*lines)[T_POOL_LINE_MAX])
{
	char line[T_POOL_LINE_MAX];

	t_pipe(ready);
	t_pipe(took);
	for (int i = 0; i < n; i++)
		t_pipe(cmd[i]);
	t_pool_start(pids, n, fn, ready[0]);
	for (int i = 0; i < n; i++) {
		t_call_taken(bus, name, "Work", "hold", timeout, &calls[i], took[0], line, sizeof(line));
		if (sscanf(line, "%d", &holder[i]) != 1 || holder[i] < 1 || holder[i] > n)
			FAIL("call %d: \"%s\" names no worker", i, line);
		for (int j = 0; j < i; j++)
			if (holder[j] == holder[i])
				FAIL("worker %d took calls %d and %d", holder[i], j, i);
		if (lines)
			memcpy(lines[i], line, sizeof(line));
	}
}

/*
 * Processes bus until the call o fails as the call of a receiver that
 * ended: NoReply, "receiver ended", -EREMOTEIO, within bound usec of t0
 * (its end); what names it in the log.
 */
static inline void t_expect_receiver_ended(brokerd_bus *bus, struct t_outcome *o, uint64_t t0, uint64_t bound,
					   const char *what)
{
	if (!t_pump(bus, &o->done, 10000))
		FAIL("%s: still pending 10 s after its receiver ended", what);
	t_log("%s: %d (%s: %s) %llu ms after its receiver ended", what, o->error, o->error_name, o->body,
	      (unsigned long long)(o->at - t0) / 1000);
	CHECK_R(o->error, -EREMOTEIO);
	CHECK(strcmp(o->error_name, BROKERD_ERROR_NO_REPLY) == 0);
	CHECK(strncmp(o->body, "receiver ended", 14) == 0);
	CHECK(o->at - t0 < bound);
}

/* Processes bus for ms: none of the n calls may complete meanwhile. */
static inline void t_pool_quiet(brokerd_bus *bus, int ms, const struct t_outcome *calls, int n)
{
	volatile bool never = false;

	(void)t_pump(bus, &never, ms);
	for (int i = 0; i < n; i++)
		if (calls[i].done)
			FAIL("call %d completed (%d %s: %s) though its worker holds it", i, calls[i].error,
			     calls[i].error_name, calls[i].body);
}

/*
 * Kills the worker holding call i (holder[i], from 1, its pid in pids,
 * zeroed): call i alone fails, at once (within bound usec), as the call of
 * a receiver that ended; the other n - 1 calls, held by others, stay
 * pending. Call i is the last of the n.
 */
static inline void t_pool_kill_holder(brokerd_bus *bus, struct t_outcome *calls, const int *holder,
				      pid_t *pids, int n, uint64_t bound)
{
	int victim = holder[n - 1];
	uint64_t t0 = now_usec();
	char what[64];

	t_kill(pids[victim - 1]);
	pids[victim - 1] = 0;
	snprintf(what, sizeof(what), "call %d, held by the killed worker %d", n - 1, victim);
	t_expect_receiver_ended(bus, &calls[n - 1], t0, bound, what);
	t_pool_quiet(bus, 500, calls, n - 1);
}

/*
 * Tells the worker of each of the n calls (holder[i], from 1; its command
 * pipe cmd[holder[i] - 1]) to answer it with "reply", and checks that the
 * answer came from that worker (its body is the worker's number).
 */
static inline void t_pool_answer(brokerd_bus *bus, struct t_outcome *calls, const int *holder, int n,
				 int (*cmd)[2])
{
	for (int i = 0; i < n; i++) {
		char want[16];

		t_say(cmd[holder[i] - 1][1], "reply");
		if (!t_pump(bus, &calls[i].done, 10000))
			FAIL("call %d: no answer from worker %d within 10 s", i, holder[i]);
		snprintf(want, sizeof(want), "%d", holder[i]);
		CHECK_R(calls[i].error, 0);
		if (strcmp(calls[i].body, want) != 0)
			FAIL("call %d answered \"%s\", not by its worker %d", i, calls[i].body, holder[i]);
	}
}

#endif
