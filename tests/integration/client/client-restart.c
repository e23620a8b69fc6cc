/* SPDX-License-Identifier: MIT */
/*
 * client-restart - `systemctl restart brokerd`, twice, while clients work:
 * brokerd hands its connections, ring and state to the next brokerd
 * through systemd's fd store, and the clients notice nothing. A service
 * owns org.brokerd.test.Restart (Ping, Emit, Delay, Release), two pool
 * workers share org.brokerd.test.RestartPool, a subscriber counts the
 * service's Tick signals, two callers call Ping and Emit in a loop, a
 * `brokerctl monitor` watches the service's calls, and this process has a
 * call in flight (Delay, answered only after both restarts). Then:
 *
 * - no bus's state handler was called at all (no DISCONNECTED, no
 *   CONNECTED, no NOT_RESTORED);
 * - every call was answered, none failed or timed out, and the call in
 *   flight completes;
 * - every Tick emitted reached the subscriber (a slow, lossy channel
 *   would drop some; this rate never fills it);
 * - unique names are unchanged, the pool still serves through both workers,
 *   the monitor still sees calls;
 * - brokerd's pid changed each time, its fd count and memory are back at
 *   their baseline, and the fd store is empty again (taken over).
 */
#include <fcntl.h>

#include "tests/integration/client/testlib.h"

#define NAME	"org.brokerd.test.Restart"
#define POOL	"org.brokerd.test.RestartPool"
#define CALLERS 2

static int ready[2], ticks[2], states[2], report[2], stop[2];
static brokerd_msg *delayed;

/* Keeps the call to answer it when Release comes. */
static int on_delay(brokerd_msg *m, void *u)
{
	delayed = brokerd_msg_ref(m);
	return 0;
}

static int on_release(brokerd_msg *m, void *u)
{
	CHECK(delayed);
	CHECK_R(brokerd_msg_reply(delayed, "late", 4), 0);
	brokerd_msg_unref(delayed);
	delayed = NULL;
	return brokerd_msg_reply(m, NULL, 0);
}

static const struct t_method methods[] = { { "Ping", t_on_ping },
					   { "Emit", t_on_tick },
					   { "Delay", on_delay },
					   { "Release", on_release },
					   { NULL, NULL } };

/* Any call of any bus's state handler is a failure: it goes to states. */
static void on_state(brokerd_bus *bus, int state, void *u)
{
	t_say(states[1], "%s state %d", (const char *)u, state);
}

static brokerd_bus *open_watched(const char *who)
{
	brokerd_bus *bus = t_open();

	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, (void *)who), 0);
	return bus;
}

static int worker(void *arg)
{
	brokerd_bus *bus = open_watched("worker");
	int r;

	CHECK_R(brokerd_bus_add_method(bus, NULL, POOL, "Ping", t_on_ping, bus), 0);
	r = brokerd_bus_request_name(bus, POOL, BROKERD_NAME_POOL);
	CHECK(r == BROKERD_NAME_PRIMARY_OWNER || r == BROKERD_NAME_IN_QUEUE);
	t_say(ready[1], "worker");
	return brokerd_bus_run(bus) < 0;
}

/* Calls Ping and Emit until stop closes; reports how the calls ended. */
static int caller(void *arg)
{
	brokerd_bus *bus = open_watched("caller");
	unsigned int ok = 0, failed = 0, emitted = 0, slow = 0, n = 0;
	char c, body[32];

	close(stop[1]);
	t_say(ready[1], "caller");
	while (read(stop[0], &c, 1) < 0 && errno == EAGAIN) {
		brokerd_msg *reply = NULL;
		uint64_t t0 = now_usec();
		bool emit = n++ % 4 == 0;
		int r;

		snprintf(body, sizeof(body), "%d-%u", (int)getpid(), n);
		r = brokerd_bus_call(bus, NAME, emit ? "Emit" : "Ping", emit ? body : "",
				     emit ? strlen(body) : 0, 20000000, &reply);
		if (now_usec() - t0 > 10000000)
			slow++;
		if (r == 0) {
			ok++;
			emitted += emit;
		} else {
			failed++;
			t_log("caller: call failed: %s", strerror(-r));
		}
		brokerd_msg_unref(reply);
		usleep(20000);
	}
	t_say(report[1], "%u %u %u %u", ok, failed, emitted, slow);
	return 0;
}

/* brokerd's open fds and resident memory (KiB). */
static void brokerd_usage(pid_t pid, unsigned int *fds, unsigned long *rss_kib)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "ls /proc/%d/fd | wc -l", (int)pid);
	f = popen(path, "r");
	CHECK(f && fgets(line, sizeof(line), f));
	*fds = (unsigned int)atoi(line);
	pclose(f);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	CHECK(f);
	*rss_kib = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu", rss_kib) == 1)
			break;
	fclose(f);
}

static char *ping(brokerd_bus *bus, const char *name, char *out, size_t size)
{
	brokerd_msg *reply = NULL;
	const void *body;
	size_t n;

	CHECK_R(brokerd_bus_call(bus, name, "Ping", NULL, 0, 10000000, &reply), 0);
	brokerd_msg_get_body(reply, &body, &n);
	snprintf(out, size, "%.*s", (int)n, (const char *)body);
	brokerd_msg_unref(reply);
	return out;
}

/* The distinct unique names answering the pool's Ping in 40 calls, sorted, as "a b". */
static void pool_members(brokerd_bus *bus, char *out, size_t size)
{
	char a[64] = "", b[64] = "", x[64];

	for (int i = 0; i < 40; i++) {
		ping(bus, POOL, x, sizeof(x));
		if (!*a || strcmp(a, x) == 0)
			snprintf(a, sizeof(a), "%s", x);
		else if (!*b || strcmp(b, x) == 0)
			snprintf(b, sizeof(b), "%s", x);
		else
			FAIL("a third pool member %s", x);
	}
	if (strcmp(a, b) > 0)
		snprintf(out, size, "%s %s", b, a);
	else
		snprintf(out, size, "%s %s", a, b);
}

/* How many calls the monitor has printed so far. */
static unsigned int monitor_lines(const char *path)
{
	char line[4096];
	unsigned int n = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"member\":\"Ping\""))
			n++;
	fclose(f);
	return n;
}

static void restart(int round, pid_t *pid)
{
	pid_t now;
	uint64_t t0 = now_usec();

	t_log("restart %d: systemctl restart brokerd (pid %d)", round, (int)*pid);
	if (system("systemctl restart brokerd.service") != 0)
		FAIL("systemctl restart brokerd failed");
	now = t_brokerd_pid();
	t_log("restart %d: brokerd is pid %d after %llu ms", round, (int)now,
	      (unsigned long long)(now_usec() - t0) / 1000);
	CHECK(now > 0 && now != *pid);
	*pid = now;
}

int main(void)
{
	static const char mon_path[] = "/tmp/client-restart.monitor";
	brokerd_bus *bus;
	struct t_reply delay = { 0 };
	char svc_before[64], svc_after[64], pool_before[160], pool_after[160], line[128], cmd[256];
	unsigned int ok, failed, emitted, slow, total_emitted = 0, heard = 0, fds0, fds1, fds2, mon0;
	unsigned long rss0, rss1, rss2;
	pid_t ps, pw[2], pu, pc[CALLERS], mon, pid;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	t_pipe(ready);
	t_pipe(ticks);
	t_pipe(states);
	t_pipe(report);
	bus = open_watched("main");
	ps = t_watched_start(t_service_run, NAME, methods, on_state, ready, -1);
	for (int i = 0; i < 2; i++) {
		pw[i] = t_fork(worker, NULL);
		t_expect(ready[0], "worker", 10000);
	}
	pu = t_watched_start(t_subscriber_run, NAME, NULL, on_state, ready, ticks[1]);
	(void)unlink(mon_path);
	mon = fork();
	CHECK(mon >= 0);
	if (mon == 0) {
		int fd = open(mon_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execlp("brokerctl", "brokerctl", "--json", "monitor", NAME, (char *)NULL);
		_exit(127);
	}
	CHECK(pipe2(stop, O_CLOEXEC | O_NONBLOCK) == 0);
	for (int i = 0; i < CALLERS; i++) {
		pc[i] = t_fork(caller, NULL);
		t_expect(ready[0], "caller", 10000);
	}
	close(stop[0]);

	ping(bus, NAME, svc_before, sizeof(svc_before));
	pool_members(bus, pool_before, sizeof(pool_before));
	t_log("service %s, pool %s", svc_before, pool_before);
	/* the monitor is attached once it has seen a call */
	for (int i = 0; i < 50 && monitor_lines(mon_path) == 0; i++) {
		ping(bus, NAME, line, sizeof(line));
		usleep(100000);
	}
	if (monitor_lines(mon_path) == 0) {
		system("cat /tmp/client-restart.monitor");
		FAIL("the monitor sees no calls before the restart");
	}
	CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Delay", NULL, 0, 120000000, t_on_reply, &delay), 0);
	ping(bus, NAME, line, sizeof(line)); /* Delay reached the service before brokerd goes */

	pid = t_brokerd_pid();
	CHECK(pid > 0);
	brokerd_usage(pid, &fds0, &rss0);
	t_log("brokerd before: %u fds, %lu KiB resident", fds0, rss0);
	restart(1, &pid);
	ping(bus, NAME, line, sizeof(line));
	brokerd_usage(pid, &fds1, &rss1);
	t_log("brokerd after restart 1: %u fds, %lu KiB resident", fds1, rss1);
	restart(2, &pid);
	mon0 = monitor_lines(mon_path);
	ping(bus, NAME, svc_after, sizeof(svc_after));
	pool_members(bus, pool_after, sizeof(pool_after));
	brokerd_usage(pid, &fds2, &rss2);
	t_log("brokerd after restart 2: %u fds, %lu KiB resident", fds2, rss2);
	t_log("service %s, pool %s", svc_after, pool_after);

	/* the call in flight since before the first restart completes */
	CHECK(!delay.done);
	brokerd_msg_unref(t_call_retry(bus, NAME, "Release", "", 5000));
	CHECK(t_pump(bus, &delay.done, 10000));
	CHECK_R(delay.error, 0);

	if (strcmp(svc_before, svc_after) != 0)
		FAIL("the service's unique name changed: %s -> %s", svc_before, svc_after);
	if (strcmp(pool_before, pool_after) != 0)
		FAIL("the pool changed: %s -> %s", pool_before, pool_after);
	for (int i = 0; i < 50 && monitor_lines(mon_path) <= mon0; i++)
		usleep(100000);
	if (monitor_lines(mon_path) <= mon0)
		FAIL("the monitor sees no calls after the restarts");
	t_log("the monitor saw %u Ping calls", monitor_lines(mon_path));

	close(stop[1]); /* the callers stop and report */
	for (int i = 0; i < CALLERS; i++) {
		CHECK_R(t_hear(report[0], line, sizeof(line), 30000), 0);
		CHECK(sscanf(line, "%u %u %u %u", &ok, &failed, &emitted, &slow) == 4);
		t_log("caller: %u calls answered (%u Emit), %u failed, %u slower than 10 s", ok, emitted,
		      failed, slow);
		CHECK(ok > 0);
		CHECK(failed == 0);
		CHECK(slow == 0);
		total_emitted += emitted;
	}
	for (int i = 0; i < CALLERS; i++)
		CHECK_R(t_wait(pc[i], 10000), 0);
	while (heard < total_emitted && t_hear(ticks[0], line, sizeof(line), 3000) == 0)
		heard++;
	t_log("the subscriber heard %u of %u Tick signals", heard, total_emitted);
	CHECK(heard == total_emitted);

	/* no state handler anywhere: nobody noticed */
	if (t_hear(states[0], line, sizeof(line), 500) == 0)
		FAIL("a bus noticed the restart: %s", line);

	/* back at the baseline: the same connections, nothing piled up */
	if (fds2 > fds0 + 2 || fds1 > fds0 + 2)
		FAIL("brokerd's fds grew: %u, %u, %u", fds0, fds1, fds2);
	if (rss2 > rss0 + 4096)
		FAIL("brokerd's memory grew: %lu -> %lu KiB", rss0, rss2);
	snprintf(cmd, sizeof(cmd), "systemctl show -P NFileDescriptorStore brokerd.service");
	{
		FILE *f = popen(cmd, "r");

		if (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = 0;
			t_log("fd store entries left: %s", line);
			if (*line && strcmp(line, "0") != 0)
				FAIL("the fd store still holds %s fds after the take-over", line);
		}
		if (f)
			pclose(f);
	}

	kill(mon, SIGTERM);
	waitpid(mon, NULL, 0);
	(void)unlink(mon_path);
	t_kill(ps);
	t_kill(pu);
	t_kill(pw[0]);
	t_kill(pw[1]);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
