/* SPDX-License-Identifier: MIT */
/*
 * client-pool - a worker pool serves each call exactly once. Three
 * processes request org.brokerd.test.Pool with BROKERD_NAME_POOL; 30 calls,
 * each with a unique argument, must each get one reply naming the argument,
 * and every argument must be recorded by exactly one worker. How the calls
 * spread over the workers is logged.
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Pool"
#define WORKERS 3
#define CALLS 30

static int ready[2], report[2];

static int on_work(brokerd_msg *m, void *u)
{
	int idx = (int)(uintptr_t)u;
	const void *body;
	size_t size;
	char buf[128];

	brokerd_msg_get_body(m, &body, &size);
	snprintf(buf, sizeof(buf), "%d:%.*s", idx, (int)size, (const char *)body);
	t_say(report[1], "%s", buf);
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int worker(void *arg)
{
	brokerd_bus *bus = t_open();
	int r;

	CHECK_R(brokerd_bus_add_method(bus, NULL, NAME, "Work", on_work, arg), 0);
	r = brokerd_bus_request_name(bus, NAME, BROKERD_NAME_POOL);
	CHECK(r == BROKERD_NAME_PRIMARY_OWNER || r == BROKERD_NAME_IN_QUEUE);
	t_say(ready[1], "ready");
	return brokerd_bus_run(bus) < 0;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	pid_t pids[WORKERS];
	int per_worker[WORKERS + 1] = { 0 }, seen[CALLS] = { 0 }, used = 0;

	t_pipe(ready);
	t_pipe(report);
	for (int i = 0; i < WORKERS; i++) {
		pids[i] = t_fork(worker, (void *)(uintptr_t)(i + 1));
		t_expect(ready[0], "ready", 5000);
	}
	for (int i = 0; i < CALLS; i++) {
		brokerd_msg *reply = NULL;
		char arg[16], want[16];
		const void *body;
		size_t size;
		int w;

		snprintf(arg, sizeof(arg), "c%d", i);
		CHECK_R(brokerd_bus_call(bus, NAME, "Work", arg, strlen(arg), 5000000, &reply), 0);
		brokerd_msg_get_body(reply, &body, &size);
		w = atoi(body);
		snprintf(want, sizeof(want), ":%s", arg);
		CHECK(w >= 1 && w <= WORKERS);
		CHECK(size > strlen(want) && strcmp((const char *)body + size - strlen(want), want) == 0);
		per_worker[w]++;
		brokerd_msg_unref(reply);
	}
	/* what the workers say they did: each call exactly once */
	for (int i = 0; i < CALLS; i++) {
		char line[128], *colon;
		int c;

		if (t_hear(report[0], line, sizeof(line), 5000) < 0)
			FAIL("only %d worker reports", i);
		colon = strchr(line, ':');
		CHECK(colon && colon[1] == 'c');
		c = atoi(colon + 2);
		CHECK(c >= 0 && c < CALLS);
		seen[c]++;
	}
	{
		char extra[128];

		if (t_hear(report[0], extra, sizeof(extra), 500) == 0)
			FAIL("a call was served twice: %s", extra);
	}
	for (int i = 0; i < CALLS; i++)
		if (seen[i] != 1)
			FAIL("call c%d served %d times", i, seen[i]);
	for (int w = 1; w <= WORKERS; w++) {
		t_log("worker %d served %d calls", w, per_worker[w]);
		used += per_worker[w] > 0;
	}
	/* the spread is the kernel's multicast scheduling (all waiting receivers
	 * are woken, the first to run takes the message): logged, not required */
	if (used < 2)
		t_log("note: one worker served every call");
	for (int i = 0; i < WORKERS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
