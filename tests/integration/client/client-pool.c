/* SPDX-License-Identifier: MIT */
/*
 * client-pool - a worker pool serves each call exactly once, and every
 * worker serves: three processes request org.brokerd.test.Pool with
 * BROKERD_NAME_POOL (one primary owner, two queued members with the call
 * channel's receive right); calls go round-robin over them (protocol
 * README, section 6). First 30 calls one after another from one caller, then
 * 30 from three callers at once; each call must get one reply naming its
 * argument, every argument must be recorded by exactly one worker, and in
 * each round every worker must have served calls. A kernel that hands every
 * call to the first receiver that waits (one worker takes everything) fails.
 */
#include "tests/integration/client/testlib.h"

#define NAME	"org.brokerd.test.Pool"
#define WORKERS 3
#define CALLERS 3
#define CALLS	30

static int ready[2], report[2], answers[2];
/*
 * The callers' start signal: one byte each. Several processes reading lines
 * from one pipe byte by byte would interleave them ("g", "ogo").
 */
static int go[2];

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
	return t_pool_worker(NAME, "Work", on_work, arg, ready[1], 0);
}

/* One call with argument arg: returns the worker that served it (1..WORKERS). */
static int call_one(brokerd_bus *bus, const char *arg)
{
	brokerd_msg *reply = NULL;
	char want[32];
	const void *body;
	size_t size;
	int w;

	CHECK_R(brokerd_bus_call(bus, NAME, "Work", arg, strlen(arg), 5000000, &reply), 0);
	brokerd_msg_get_body(reply, &body, &size);
	w = atoi(body);
	snprintf(want, sizeof(want), ":%s", arg);
	CHECK(w >= 1 && w <= WORKERS);
	CHECK(size > strlen(want) &&
	      memcmp((const char *)body + size - strlen(want), want, strlen(want)) == 0);
	brokerd_msg_unref(reply);
	return w;
}

/* A caller of the concurrent round: CALLS / CALLERS calls, says who served each. */
static int caller(void *arg)
{
	int k = (int)(uintptr_t)arg;
	brokerd_bus *bus = t_open();
	struct pollfd p = { .fd = go[0], .events = POLLIN };
	char c;

	if (poll(&p, 1, 10000) != 1 || read(go[0], &c, 1) != 1)
		FAIL("caller %d: no start signal", k);
	for (int i = 0; i < CALLS / CALLERS; i++) {
		char a[16];

		snprintf(a, sizeof(a), "c%d", 100 + k * (CALLS / CALLERS) + i);
		t_say(answers[1], "%d", call_one(bus, a));
	}
	brokerd_bus_close(bus);
	return 0;
}

/*
 * What the workers say they did in a round: each of the calls first ..
 * first + CALLS - 1 exactly once, nothing else.
 */
static void check_reports(int first)
{
	int seen[CALLS] = { 0 };
	char line[128], *colon;

	for (int i = 0; i < CALLS; i++) {
		int c;

		if (t_hear(report[0], line, sizeof(line), 5000) < 0)
			FAIL("only %d worker reports", i);
		colon = strchr(line, ':');
		CHECK(colon && colon[1] == 'c');
		c = atoi(colon + 2) - first;
		CHECK(c >= 0 && c < CALLS);
		seen[c]++;
	}
	if (t_hear(report[0], line, sizeof(line), 500) == 0)
		FAIL("a call was served twice: %s", line);
	for (int i = 0; i < CALLS; i++)
		if (seen[i] != 1)
			FAIL("call c%d served %d times", first + i, seen[i]);
}

/* Every worker served calls in this round. */
static void check_spread(const char *round, const int *per_worker)
{
	for (int w = 1; w <= WORKERS; w++)
		t_log("%s: worker %d served %d of %d calls", round, w, per_worker[w], CALLS);
	for (int w = 1; w <= WORKERS; w++)
		if (per_worker[w] == 0)
			FAIL("%s: worker %d served none of %d calls: the pool does not spread calls over its workers",
			     round, w, CALLS);
}

int main(void)
{
	brokerd_bus *bus = t_open();
	pid_t pids[WORKERS], callers[CALLERS];
	int per_worker[WORKERS + 1] = { 0 };

	t_pipe(ready);
	t_pipe(report);
	t_pipe(answers);
	t_pipe(go);
	for (int i = 0; i < WORKERS; i++) {
		pids[i] = t_fork(worker, (void *)(uintptr_t)(i + 1));
		t_expect(ready[0], "ready", 5000);
	}

	/* one caller, one call at a time: every worker is idle and waiting for each */
	for (int i = 0; i < CALLS; i++) {
		char arg[16];

		snprintf(arg, sizeof(arg), "c%d", i);
		per_worker[call_one(bus, arg)]++;
	}
	check_reports(0);
	check_spread("one caller", per_worker);

	/* three callers at once */
	memset(per_worker, 0, sizeof(per_worker));
	for (int k = 0; k < CALLERS; k++)
		callers[k] = t_fork(caller, (void *)(uintptr_t)k);
	for (int k = 0; k < CALLERS; k++)
		CHECK(write(go[1], "g", 1) == 1);
	for (int i = 0; i < CALLS; i++) {
		char line[16];

		if (t_hear(answers[0], line, sizeof(line), 10000) < 0)
			FAIL("only %d of %d concurrent calls answered", i, CALLS);
		per_worker[atoi(line)]++;
	}
	for (int k = 0; k < CALLERS; k++)
		CHECK_R(t_wait(callers[k], 10000), 0);
	check_reports(100);
	check_spread("three callers at once", per_worker);

	for (int i = 0; i < WORKERS; i++)
		t_kill(pids[i]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
