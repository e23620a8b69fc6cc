/* SPDX-License-Identifier: MIT */
/*
 * client-brokerd-memlimit - brokerd under a memory cgroup limit, flooded.
 * brokerd.service gets MemoryMax = what it uses now + 12 MiB (systemctl
 * set-property --runtime); then three processes of alice (uid 2001) each
 * open up to 80 connections, each owning a name and subscribing to it.
 * Every channel's ring (256 KiB) is charged to brokerd's cgroup, so the
 * limit is reached long before alice's quotas: brokerd must refuse what
 * needs a new channel (NoMemory) rather than make it, since the kernel's
 * OOM killer would end brokerd, and a flood that comes back after each
 * restart would soon stop systemd from restarting it at all.
 *
 * Asserted: every operation ends at once with success or an error (none
 * takes 10 s: nobody hangs), the limit was hit (some failed, or brokerd was
 * restarted), and afterwards, the flood gone and the limit lifted, brokerd
 * is running and sound: alice's names are gone, a new service owns a name
 * and answers calls, and its signals reach a subscriber.
 */
#include <fcntl.h>

#include "tests/integration/client/testlib.h"

#define FLOODERS  3
#define CONNS	  80
#define HEADROOM  (12ULL << 20)
#define SLOW_USEC 10000000ULL
#define NAME	  "org.brokerd.test.MemCheck"

static int report[2], done[2];

static unsigned long long unit_property(const char *prop)
{
	char cmd[128], buf[64] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "systemctl show -P %s brokerd.service", prop);
	f = popen(cmd, "r");
	if (!f || !fgets(buf, sizeof(buf), f))
		FAIL("%s", cmd);
	pclose(f);
	return strtoull(buf, NULL, 10);
}

static void set_memory_max(const char *value)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "systemctl set-property --runtime brokerd.service MemoryMax=%s", value);
	if (system(cmd) != 0)
		FAIL("%s failed", cmd);
}

static void lift_limit(void)
{
	(void)!system("systemctl set-property --runtime brokerd.service MemoryMax=infinity");
}

/* Counts an operation's outcome; r < 0 is an error (its errno noted). */
static void count(int r, uint64_t t0, unsigned int *ok, unsigned int *err, unsigned int *slow, int *last_err)
{
	if (now_usec() - t0 > SLOW_USEC)
		(*slow)++;
	if (r >= 0) {
		(*ok)++;
	} else {
		(*err)++;
		*last_err = -r;
	}
}

static int on_nothing(brokerd_msg *m, void *u)
{
	return 0;
}

static int flooder(void *arg)
{
	int k = (int)(uintptr_t)arg;
	brokerd_bus *buses[CONNS] = { 0 };
	unsigned int ok = 0, err = 0, slow = 0;
	int last_err = 0;
	char c;

	close(done[1]);
	t_become(UID_ALICE);
	for (int i = 0; i < CONNS; i++) {
		char name[64];
		uint64_t t0 = now_usec();
		int r = brokerd_bus_open_system(&buses[i]);

		count(r, t0, &ok, &err, &slow, &last_err);
		if (r < 0) {
			buses[i] = NULL;
			continue;
		}
		(void)brokerd_bus_set_reconnect(buses[i], 0);
		snprintf(name, sizeof(name), "org.brokerd.test.Mem.F%d.C%d", k, i);
		t0 = now_usec();
		r = brokerd_bus_request_name(buses[i], name, BROKERD_NAME_DO_NOT_QUEUE);
		count(r, t0, &ok, &err, &slow, &last_err);
		t0 = now_usec();
		r = brokerd_bus_subscribe(buses[i], NULL, name, NULL, on_nothing, NULL);
		count(r, t0, &ok, &err, &slow, &last_err);
	}
	t_say(report[1], "%u %u %u %d", ok, err, slow, last_err);
	(void)!read(done[0], &c, 1); /* until the test has looked */
	for (int i = 0; i < CONNS; i++)
		if (buses[i])
			brokerd_bus_close(buses[i]);
	return 0;
}

static int on_echo(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;

	brokerd_msg_get_body(m, &body, &size);
	CHECK_R(brokerd_bus_emit_signal(u, NAME, "Echoed", body, size), 0);
	return brokerd_msg_reply(m, body, size);
}

static const struct t_method methods[] = { { "Echo", on_echo }, { NULL, NULL } };

static volatile bool echoed;

static int on_echoed(brokerd_msg *m, void *u)
{
	echoed = true;
	return 0;
}

int main(void)
{
	unsigned long long cur, pid0, restarts0, ok, err, slow, total_err = 0, total_slow = 0, total_ok = 0;
	pid_t pids[FLOODERS], srv;
	brokerd_bus *bus;
	brokerd_msg *reply = NULL;
	char limit[32], owner[64], line[128];
	bool restarted;
	int last_err;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	bus = t_open();
	brokerd_bus_close(bus);
	t_policy("[default]\nallow own org.brokerd.test.*\nallow receive org.brokerd.test.*\n");
	pid0 = unit_property("MainPID");
	restarts0 = unit_property("NRestarts");
	cur = unit_property("MemoryCurrent");
	CHECK(pid0 > 0 && cur > 0 && cur < (1ULL << 40));
	snprintf(limit, sizeof(limit), "%llu", cur + HEADROOM);
	t_log("brokerd (pid %llu) uses %llu KiB; MemoryMax=%llu KiB", pid0, cur >> 10,
	      (cur + HEADROOM) >> 10);
	set_memory_max(limit);
	atexit(lift_limit);

	t_pipe(report);
	t_pipe(done);
	for (int i = 0; i < FLOODERS; i++)
		pids[i] = t_fork(flooder, (void *)(uintptr_t)i);
	for (int i = 0; i < FLOODERS; i++) {
		CHECK_R(t_hear(report[0], line, sizeof(line), 120000), 0);
		CHECK(sscanf(line, "%llu %llu %llu %d", &ok, &err, &slow, &last_err) == 4);
		t_log("flooder: %llu operations succeeded, %llu failed (last: %s), %llu took over 10 s", ok,
		      err, strerror(last_err), slow);
		total_ok += ok;
		total_err += err;
		total_slow += slow;
	}
	t_log("brokerd uses %llu KiB now", unit_property("MemoryCurrent") >> 10);
	close(done[1]);
	for (int i = 0; i < FLOODERS; i++)
		CHECK_R(t_wait(pids[i], 60000), 0);
	lift_limit();
	CHECK_R(total_slow, 0);
	CHECK(total_ok > 0);

	/* brokerd is running again, or still */
	for (int i = 0; i < 200 && !unit_property("MainPID"); i++)
		usleep(100000);
	CHECK(unit_property("MainPID") > 0);
	restarted = unit_property("MainPID") != pid0;
	t_log("brokerd %s (restarts %llu -> %llu)", restarted ? "was restarted" : "survived", restarts0,
	      unit_property("NRestarts"));
	if (!restarted && total_err == 0)
		FAIL("the flood never reached the memory limit: nothing failed and brokerd was not restarted");

	/* sound: alice's names went with her connections; a service works */
	bus = t_open();
	for (int k = 0; k < FLOODERS; k++) {
		char name[64];
		int r = -1;

		snprintf(name, sizeof(name), "org.brokerd.test.Mem.F%d.C0", k);
		for (int i = 0;
		     i < 100 && (r = brokerd_bus_get_name_owner(bus, name, owner, sizeof(owner))) != -ENXIO;
		     i++)
			usleep(100000);
		CHECK_R(r, -ENXIO);
	}
	srv = t_service_start(NAME, methods);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Echoed", on_echoed, NULL), 0);
	CHECK_R(brokerd_bus_call(bus, NAME, "Echo", "hi", 2, 5000000, &reply), 0);
	brokerd_msg_unref(reply);
	CHECK(t_pump(bus, &echoed, 5000));
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
