/* SPDX-License-Identifier: MIT */
/*
 * client-reply-path - the reply path needs no brokerd, and neither does an
 * asynchronous call (issue 12, item 4).
 *
 * 1. A service answers a thousand distinct callers (ten processes with a
 *    hundred connections each, all kept open) without a single control
 *    request of its own after it took its name: brokerd pushed it a reply
 *    cap for each caller with the caller's call grant. The service counts
 *    its requests (BROKERD_COUNTER_CONTROL_REQUESTS) and the distinct
 *    senders it served, and says both when asked at the end.
 * 2. With brokerd stopped (SIGSTOP), brokerd_bus_call_async() to a name
 *    this bus has never called returns at once; so does one to a name
 *    without owner, and one with a short deadline fails with -ETIMEDOUT
 *    while brokerd is still stopped. After SIGCONT the first gets its
 *    reply and the second -ENXIO.
 */
#include <inttypes.h>
#include <sys/resource.h>

#include "tests/integration/client/testlib.h"

#define NAME	 "org.brokerd.test.ReplyPath"
#define PROCS	 10
#define BUSES	 100
#define INFLIGHT 3 /* per process: 30 calls at most in the name's 32-slot ring */
#define CALLERS	 (PROCS * BUSES)

static uint64_t base_requests, seen_ids[CALLERS + 16];
static unsigned int n_seen, n_calls;

static int on_echo(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;
	uint64_t id = 0;
	bool known = false;

	/* the sender is the kernel's badge: one id per caller connection */
	CHECK_R(ctrl_unique_name_parse(brokerd_msg_get_sender(m), &id), 0);
	n_calls++;
	for (unsigned int i = 0; i < n_seen && !known; i++)
		known = seen_ids[i] == id;
	if (!known && n_seen < ELEMENTSOF(seen_ids))
		seen_ids[n_seen++] = id;
	brokerd_msg_get_body(m, &body, &size);
	return brokerd_msg_reply(m, body, size);
}

/* "calls distinct-callers control-requests" since the service took its name. */
static int on_stats(brokerd_msg *m, void *u)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "%u %u %" PRIu64, n_calls, n_seen,
		 brokerd_bus_get_counter(u, BROKERD_COUNTER_CONTROL_REQUESTS) - base_requests);
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int ready[2];

static int service(void *arg)
{
	brokerd_bus *bus = t_open();

	CHECK_R(brokerd_bus_add_method(bus, NULL, NAME, "Echo", on_echo, bus), 0);
	CHECK_R(brokerd_bus_add_method(bus, NULL, NAME, "Stats", on_stats, bus), 0);
	CHECK_R(brokerd_bus_request_name(bus, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	base_requests = brokerd_bus_get_counter(bus, BROKERD_COUNTER_CONTROL_REQUESTS);
	t_say(ready[1], "ready");
	return brokerd_bus_run(bus) < 0;
}

struct caller_call {
	char want[32];
	bool done;
	int error;
};

static int on_caller_reply(brokerd_msg *m, int error, void *u)
{
	struct caller_call *c = u;
	const void *body;
	size_t size;

	c->done = true;
	c->error = error;
	if (error == 0) {
		brokerd_msg_get_body(m, &body, &size);
		if (size != strlen(c->want) || memcmp(body, c->want, size) != 0)
			c->error = -EBADMSG;
	}
	return 0;
}

/* One process with BUSES connections, each calling NAME.Echo once, INFLIGHT at a time. */
static int callers(void *arg)
{
	static brokerd_bus *buses[BUSES];
	static struct caller_call calls[BUSES];
	int p = (int)(intptr_t)arg;
	struct rlimit rl;
	unsigned int next = 0, done = 0;
	uint64_t end = now_usec() + 150 * 1000000ULL;

	/* each bus has a socket, a ring, an epoll fd, an eventfd and a timerfd */
	CHECK_R(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	CHECK_R(setrlimit(RLIMIT_NOFILE, &rl), 0);
	for (int i = 0; i < BUSES; i++)
		buses[i] = t_open();
	while (done < BUSES) {
		unsigned int inflight = next - done;
		bool progress = false;

		if (now_usec() > end)
			FAIL("process %d: %u of %d callers answered", p, done, BUSES);
		while (next < BUSES && inflight < INFLIGHT) {
			struct caller_call *c = &calls[next];
			int r;

			snprintf(c->want, sizeof(c->want), "p%d-b%u", p, next);
			r = brokerd_bus_call_async(buses[next], NULL, NAME, "Echo", c->want, strlen(c->want),
						   60000000, on_caller_reply, c);
			if (r == -ENOBUFS)
				break; /* the name's ring is full for a moment: later */
			if (r < 0)
				FAIL("call_async of %s: %s", c->want, strerror(-r));
			next++;
			inflight++;
		}
		for (unsigned int i = done; i < next; i++) {
			if (brokerd_bus_process(buses[i]) > 0)
				progress = true;
		}
		/* replies come in any order: count the prefix that is done */
		for (unsigned int i = done; i < next && calls[i].done; i++) {
			if (calls[i].error == -ENOBUFS) {
				/* the name's ring was full for a moment: that is the caller's to retry */
				int r;

				calls[i].done = false;
				r = brokerd_bus_call_async(buses[i], NULL, NAME, "Echo", calls[i].want,
							   strlen(calls[i].want), 60000000, on_caller_reply,
							   &calls[i]);
				if (r == -ENOBUFS) {
					calls[i].done = true; /* still full: try again next round */
				} else if (r < 0) {
					FAIL("call_async of %s: %s", calls[i].want, strerror(-r));
				}
				break;
			}
			if (calls[i].error != 0)
				FAIL("%s: %s", calls[i].want, strerror(-calls[i].error));
			done = i + 1;
			progress = true;
		}
		if (!progress)
			usleep(2000);
	}
	for (int i = 0; i < BUSES; i++)
		brokerd_bus_close(buses[i]);
	return 0;
}

static pid_t brokerd_pid;

static void brokerd_continue(void)
{
	if (brokerd_pid > 0)
		kill(brokerd_pid, SIGCONT);
}

static pid_t brokerd_main_pid(void)
{
	FILE *f = popen("systemctl show -P MainPID brokerd.service", "r");
	long pid = 0;

	if (!f || fscanf(f, "%ld", &pid) != 1)
		FAIL("systemctl show MainPID");
	pclose(f);
	CHECK(pid > 1);
	return (pid_t)pid;
}

/* Part 2: the first call_async to a name while brokerd does not answer. */
static void async_while_stopped(void)
{
	struct caller_call echo = { .want = "stopped" }, nobody = { 0 }, late = { 0 };
	brokerd_bus *bus = t_open();
	uint64_t t0, took, end;

	brokerd_pid = brokerd_main_pid();
	CHECK_R(kill(brokerd_pid, SIGSTOP), 0);
	t0 = now_usec();
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Echo", "stopped", 7, 20000000, on_caller_reply,
				       &echo),
		0);
	took = now_usec() - t0;
	CHECK_R(brokerd_bus_call_async(bus, NULL, "org.brokerd.test.Nobody", "X", NULL, 0, 20000000,
				       on_caller_reply, &nobody),
		0);
	CHECK_R(brokerd_bus_call_async(bus, NULL, "org.brokerd.test.Late", "X", NULL, 0, 300000,
				       on_caller_reply, &late),
		0);
	t_log("first call_async with brokerd stopped returned in %" PRIu64 " us", took);
	CHECK(took < 1000000); /* a blocking OPEN_CALL would wait for brokerd (30 s) */
	/* the deadline runs while brokerd is stopped */
	CHECK(t_pump(bus, (volatile bool *)&late.done, 5000));
	CHECK_R(late.error, -ETIMEDOUT);
	CHECK(!echo.done && !nobody.done);
	CHECK_R(kill(brokerd_pid, SIGCONT), 0);
	brokerd_pid = 0;
	end = now_usec() + 20000000;
	while ((!echo.done || !nobody.done) && now_usec() < end) {
		brokerd_bus_process(bus);
		brokerd_bus_wait(bus, 50000);
	}
	CHECK(echo.done && nobody.done);
	CHECK_R(echo.error, 0);
	CHECK_R(nobody.error, -ENXIO);
	t_log("after SIGCONT: the call was answered, the call to a name without owner got -ENXIO");
	brokerd_bus_close(bus);
}

int main(void)
{
	pid_t srv, procs[PROCS];
	brokerd_msg *reply = NULL;
	unsigned int calls = 0, seen = 0;
	uint64_t requests = UINT64_MAX, t0;
	char stats[128];
	const void *body;
	size_t size;

	t_policy("[limits user root]\nconnections 4096\nchannels 4096\nring_bytes 4294967296\n");
	t_atexit(brokerd_continue);
	t_pipe(ready);
	srv = t_fork(service, NULL);
	close(ready[1]);
	t_expect(ready[0], "ready", 10000);

	t0 = now_usec();
	for (int p = 0; p < PROCS; p++)
		procs[p] = t_fork(callers, (void *)(intptr_t)p);
	for (int p = 0; p < PROCS; p++)
		CHECK_R(t_wait(procs[p], 180000), 0);
	t_log("%d processes with %d connections each answered in %.1f s", PROCS, BUSES,
	      (now_usec() - t0) / 1e6);

	brokerd_bus *bus = t_open();
	CHECK_R(brokerd_bus_call(bus, NAME, "Stats", NULL, 0, 10000000, &reply), 0);
	brokerd_msg_get_body(reply, &body, &size);
	snprintf(stats, sizeof(stats), "%.*s", (int)size, (const char *)body);
	CHECK(sscanf(stats, "%u %u %" SCNu64, &calls, &seen, &requests) == 3);
	brokerd_msg_unref(reply);
	t_log("service: %u calls from %u distinct callers, %" PRIu64 " control requests", calls, seen,
	      requests);
	CHECK(calls == CALLERS && seen == CALLERS);
	if (requests != 0)
		FAIL("the service made %" PRIu64 " control requests to answer its callers", requests);
	brokerd_bus_close(bus);

	async_while_stopped();
	t_kill(srv);
	printf("ok\n");
	return 0;
}
