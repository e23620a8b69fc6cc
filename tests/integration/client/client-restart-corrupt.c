/* SPDX-License-Identifier: MIT */
/*
 * client-restart-corrupt - `systemctl restart brokerd` with the stored
 * state damaged between the old brokerd's hand-over and the new one's
 * start (brokerd/README.md, "Restart"): the new brokerd refuses it as a
 * whole, says why in one journal line, and falls back to the reconnect
 * path of a crash; every client sees the loss and comes back with its
 * name and subscription.
 *
 * How the state is damaged: a drop-in gives brokerd.service
 * NotifyAccess=all and an ExecStopPost= (run as root, "+") of this program
 * with --store-helper. systemd runs it after the old brokerd stored its
 * state and exited, before the new one starts; it takes a copy of the
 * stored state from systemd (pidfd_getfd() on PID 1, which holds the
 * store), damages it, and replaces the store's entry through the notify
 * socket (FDSTOREREMOVE=1, FDSTORE=1), as anything in the unit's cgroup
 * may with NotifyAccess=all. Nothing in brokerd is there for the test.
 *
 * Damages, one restart each: the state cut to half its length; its
 * version changed; one bit of its end record flipped; the first channel's
 * grant count made larger than the state; the same bytes in a memfd
 * nobody sealed; no state at all (the connections and the keeper still
 * stored); a second state next to the real one; last the D-Bus state
 * (dbus-restart.c) cut to half, the native one whole. After each: the call in
 * flight fails with -ECONNRESET, every bus says DISCONNECTED then
 * CONNECTED, the service has a new unique name, owns its name again and
 * its signals reach the subscriber; brokerd's journal names the damage;
 * no keeper is left; brokerd holds no stored state and the same number of
 * fds after every fallback. With the D-Bus state damaged, the native bus
 * is taken over (nobody disconnects, the service keeps its unique name),
 * a D-Bus client's connection is closed and it gets its name again when
 * it connects again. Last, without the drop-in, a plain restart
 * hands the bus over again (nothing of the damage stays in the store).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "tests/integration/client/testlib.h"

#define NAME	     "org.brokerd.test.Corrupt"
#define DROPIN_D     "/run/systemd/system/brokerd.service.d"
#define DROPIN	     DROPIN_D "/90-client-restart-corrupt.conf"
#define MODE_FILE    "/run/brokerd-test-corrupt-mode"
#define DONE_FILE    "/run/brokerd-test-corrupt-done"
#define STATE_MEMFD  "/memfd:brokerd-state (deleted)"
#define DBUS_MEMFD   "/memfd:brokerd-dbus-state (deleted)"
#define DBUS_ADDRESS "unix:path=/run/brokerd/dbus_socket"
#define DBUS_NAME    "org.brokerd.test.CorruptDBus"

/* Each damage and the journal line the new brokerd must write for it. */
static const struct damage {
	const char *mode, *logged;
} damages[] = {
	{ "truncated", "is cut short" },
	{ "version", "is not of version 2" },
	{ "bitflip", "does not end as it was written" },
	{ "count", "malformed channel record" },
	{ "unsealed", "is not a sealed memfd" },
	{ "missing", "stored fds without a state" },
	{ "extra", "the store holds what no single hand-over of ours leaves" },
};

/* --- the ExecStopPost= helper ------------------------------------------- */

/* The fd of systemd's copy of a stored state (its memfd's link), taken from PID 1; -1 if none. */
static int stored_state(const char *memfd)
{
	DIR *d = opendir("/proc/1/fd");
	struct dirent *e;
	int pidfd, fd = -1;

	if (!d)
		return -1;
	pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
	while (pidfd >= 0 && fd < 0 && (e = readdir(d))) {
		char path[300], link[300];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/1/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (strcmp(link, memfd) == 0)
			fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(e->d_name), 0);
	}
	closedir(d);
	if (pidfd >= 0)
		close(pidfd);
	return fd;
}

/* bytes in a memfd, sealed as brokerd seals its state unless not. */
static int memfd_with(const uint8_t *p, size_t n, bool seal)
{
	int fd = memfd_create("brokerd-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n)
		return -1;
	if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -1;
	return fd;
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void done_write(const char *done)
{
	FILE *f = fopen(DONE_FILE, "we");

	if (f) {
		fprintf(f, "%s\n", done);
		fclose(f);
	}
}

/* A helper's end: its outcome to DONE_FILE, its buffer and fds let go. */
static int damage_end(const char *done, void *data, int in, int out)
{
	done_write(done);
	free(data);
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return 0;
}

/* The D-Bus state (dbus-restart.c) cut to half; the native one left as it is. */
static int dbus_helper(void)
{
	char done[128] = "dbus-truncated: no stored D-Bus state to damage";
	int in = stored_state(DBUS_MEMFD), out = -1, r;
	uint8_t *data = NULL;
	struct stat st;

	if (in >= 0 && fstat(in, &st) == 0 && st.st_size >= 16 && (data = malloc((size_t)st.st_size)) &&
	    pread(in, data, (size_t)st.st_size, 0) == st.st_size &&
	    (out = memfd_with(data, (size_t)st.st_size / 2, true)) >= 0) {
		r = getenv("NOTIFY_SOCKET") ? sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=brokerd-dbus-state") :
					      -ENOTCONN;
		if (r > 0)
			r = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=brokerd-dbus-state", &out, 1);
		if (r > 0 && sd_notify_barrier(0, 5000000) < 0)
			r = -ETIMEDOUT;
		snprintf(done, sizeof(done),
			 r > 0 ? "dbus-truncated: stored, %zu bytes damaged" :
				 "dbus-truncated: storing failed",
			 (size_t)st.st_size);
	}
	return damage_end(done, data, in, out);
}

/*
 * Damages the stored state as mode says. Its outcome goes to DONE_FILE
 * (the test checks that it ran); it always exits 0, so that the restart
 * goes on whatever happened here.
 */
static int store_helper(void)
{
	char mode[32] = "", done[128];
	uint8_t *data = NULL;
	size_t len = 0;
	struct stat st;
	int in, out = -1, r = 0;
	FILE *f = fopen(MODE_FILE, "re");

	if (!f || !fgets(mode, sizeof(mode), f))
		return 0;
	fclose(f);
	mode[strcspn(mode, "\n")] = 0;
	if (strcmp(mode, "dbus-truncated") == 0)
		return dbus_helper();
	in = stored_state(STATE_MEMFD);
	if (in < 0 || fstat(in, &st) < 0 || st.st_size < 16 || !(data = malloc((size_t)st.st_size)) ||
	    pread(in, data, (size_t)st.st_size, 0) != st.st_size) {
		snprintf(done, sizeof(done), "%s: no stored state to damage", mode);
		goto out;
	}
	len = (size_t)st.st_size;
	if (strcmp(mode, "truncated") == 0) {
		out = memfd_with(data, len / 2, true);
	} else if (strcmp(mode, "version") == 0) {
		data[8] = 9;
		out = memfd_with(data, len, true);
	} else if (strcmp(mode, "bitflip") == 0) {
		data[len - 1] ^= 0x01; /* the end record's count */
		out = memfd_with(data, len, true);
	} else if (strcmp(mode, "count") == 0) {
		/* header 16, ring record 8 + 124, bus record 8 + 16: the first channel at 172 */
		size_t at = 172, grants;

		if (len < at + 24 || get_u32(data + at) != 3) {
			snprintf(done, sizeof(done), "%s: no channel record at %zu", mode, at);
			goto out;
		}
		grants = at + 8 + 12 + 4 + get_u32(data + at + 20);
		if (grants + 4 > len) {
			snprintf(done, sizeof(done), "%s: channel record cut", mode);
			goto out;
		}
		memset(data + grants, 0xff, 4);
		out = memfd_with(data, len, true);
	} else if (strcmp(mode, "unsealed") == 0 || strcmp(mode, "extra") == 0) {
		out = memfd_with(data, len, strcmp(mode, "extra") == 0);
	} else if (strcmp(mode, "missing") != 0) {
		snprintf(done, sizeof(done), "%s: unknown mode", mode);
		goto out;
	}
	/* sd_notify() says 0 without a socket: systemd gives ExecStopPost= one only with NotifyAccess=all */
	r = getenv("NOTIFY_SOCKET") ? 1 : -ENOTCONN;
	if (r > 0 && strcmp(mode, "extra") != 0)
		r = sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=brokerd-state");
	if (r > 0 && out >= 0)
		r = sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=brokerd-state", &out, 1);
	if (r > 0 && sd_notify_barrier(0, 5000000) < 0)
		r = -ETIMEDOUT;
	if (r <= 0 || (out < 0 && strcmp(mode, "missing") != 0))
		snprintf(done, sizeof(done), "%s: storing failed: %s", mode, strerror(r < 0 ? -r : ENOTCONN));
	else
		snprintf(done, sizeof(done), "%s: stored, %zu bytes damaged", mode, len);
out:
	return damage_end(done, data, in, out);
}

/* --- the clients --------------------------------------------------------- */

static int ready[2], ticks[2], states[2];

static const struct t_method methods[] = {
	{ "Ping", t_on_ping }, { "Emit", t_on_tick }, { "Hang", t_on_hang }, { NULL, NULL }
};

/* A child's state changes, numbered: "service disconnected 1", "service connected 1", ... */
static void on_state(brokerd_bus *bus, int state, void *u)
{
	static int n_disc, n_conn;

	if (state == BROKERD_STATE_DISCONNECTED)
		t_say(states[1], "%s disconnected %d", (const char *)u, ++n_disc);
	else
		t_say(states[1], "%s %s %d", (const char *)u,
		      state == BROKERD_STATE_CONNECTED ? "connected" : "not-restored", ++n_conn);
}


/* --- the test ------------------------------------------------------------ */

static int n_disconnects, n_connects;

static void on_main_state(brokerd_bus *bus, int state, void *u)
{
	if (state == BROKERD_STATE_DISCONNECTED)
		n_disconnects++;
	else if (state == BROKERD_STATE_CONNECTED)
		n_connects++;
	else
		FAIL("main bus: state %d (all was restored)", state);
}

/* How many fds pid holds, and whether one of them is a stored state. */
static int fds_of(pid_t pid, bool *state)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	CHECK(d);
	*state = false;
	while ((e = readdir(d))) {
		char p[64 + 256], link[300];
		ssize_t l;

		if (e->d_name[0] == '.')
			continue;
		n++;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		l = readlink(p, link, sizeof(link) - 1);
		if (l > 0) {
			link[l] = 0;
			*state |= strncmp(link, "/memfd:brokerd-", 15) == 0;
		}
	}
	closedir(d);
	return n;
}

/* Does brokerd's journal (process pid) have a line containing text, within 10 s? */
static bool journal_has(pid_t pid, const char *text)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "journalctl -q -o cat _PID=%d | grep -qF '%s'", (int)pid, text);
	for (int i = 0; i < 100; i++) {
		if (system(cmd) == 0)
			return true;
		usleep(100000);
	}
	return false;
}

static void file_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	CHECK(f);
	fputs(text, f);
	CHECK(fclose(f) == 0);
}

static void cleanup(void)
{
	(void)unlink(DROPIN);
	(void)rmdir(DROPIN_D);
	(void)unlink(MODE_FILE);
	(void)unlink(DONE_FILE);
	(void)system("systemctl daemon-reload");
}

static struct t_lines seen;

/* The service's signals reach the subscriber (body tag). */
static void signals_flow(brokerd_bus *bus, const char *tag)
{
	char line[64];

	for (int i = 0; i < 50; i++) {
		brokerd_msg_unref(t_call_retry(bus, NAME, "Emit", tag, 5000));
		while (t_hear(ticks[0], line, sizeof(line), 200) == 0)
			if (strcmp(line, tag) == 0)
				return;
	}
	FAIL("the subscriber does not hear the service's signals (%s)", tag);
}

static sd_bus *dbus_connect(void)
{
	sd_bus *d = NULL;

	CHECK(sd_bus_new(&d) >= 0);
	CHECK(sd_bus_set_address(d, DBUS_ADDRESS) >= 0);
	CHECK(sd_bus_set_bus_client(d, true) >= 0);
	CHECK(sd_bus_start(d) >= 0);
	return d;
}

/*
 * The D-Bus state damaged (cut to half), the native one whole: the native
 * bus is taken over as always (no client notices), the D-Bus connections
 * are all closed (the state refused as a whole before any is restored),
 * and a D-Bus client that connects again gets its name back.
 */
static void dbus_round(brokerd_bus *bus, const char *service_unique)
{
	sd_bus *d = dbus_connect(), *d2;
	const char *unique = NULL;
	char done[128], after[64];
	pid_t old = t_brokerd_pid(), now;
	int disconnects = n_disconnects, r = 0;
	uint64_t end;
	FILE *f;

	CHECK(sd_bus_request_name(d, DBUS_NAME, 0) >= 0);
	CHECK(sd_bus_get_unique_name(d, &unique) >= 0);
	t_log("dbus-truncated: D-Bus client %s owns %s", unique, DBUS_NAME);
	(void)unlink(DONE_FILE);
	file_write(MODE_FILE, "dbus-truncated");
	CHECK_R(system("systemctl restart brokerd.service"), 0);
	now = t_brokerd_pid();
	CHECK(now > 0 && now != old);
	f = fopen(DONE_FILE, "re");
	if (!f || !fgets(done, sizeof(done), f))
		FAIL("dbus-truncated: the ExecStopPost= helper did not run");
	fclose(f);
	done[strcspn(done, "\n")] = 0;
	t_log("%s", done);
	if (!strstr(done, ": stored"))
		FAIL("dbus-truncated: the state was not damaged");
	/* the D-Bus connection closed */
	for (end = now_usec() + 10000000; r >= 0 && now_usec() < end;) {
		r = sd_bus_process(d, NULL);
		if (r == 0)
			(void)sd_bus_wait(d, 100000);
	}
	if (r >= 0)
		FAIL("dbus-truncated: the D-Bus connection still open 10 s after the restart");
	t_log("dbus-truncated: the D-Bus connection ended (%s)", strerror(-r));
	sd_bus_flush_close_unref(d);
	/* the native bus taken over: nobody disconnected, the service's unique name kept */
	{
		bool never = false;

		(void)t_pump(bus, &never, 1000);
	}
	CHECK_R(n_disconnects, disconnects);
	t_service_id(bus, NAME, after, sizeof(after), 5000);
	if (strcmp(after, service_unique) != 0)
		FAIL("dbus-truncated: the service was %s and is %s", service_unique, after);
	if (!journal_has(now, "restart: the stored D-Bus state is not usable"))
		FAIL("dbus-truncated: brokerd (pid %d) did not say the D-Bus state is not usable", (int)now);
	/* the client comes back and gets its name again */
	d2 = dbus_connect();
	CHECK(sd_bus_request_name(d2, DBUS_NAME, 0) >= 0);
	sd_bus_flush_close_unref(d2);
	t_log("dbus-truncated: refused, its connection closed, the native bus kept (%s), the name owned again",
	      after);
}

int main(int argc, char **argv)
{
	char self[4096], dropin[4096 + 256], before[64], after[64], want[64], done[128];
	brokerd_bus *bus;
	int fds[ELEMENTSOF(damages)];
	ssize_t n;
	pid_t ps, pu;

	if (argc == 2 && strcmp(argv[1], "--store-helper") == 0)
		return store_helper();
	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0);
	self[n] = 0;
	CHECK_R(t_keeper_pid(), 0);

	t_atexit(cleanup);
	CHECK(mkdir(DROPIN_D, 0755) == 0 || errno == EEXIST);
	snprintf(dropin, sizeof(dropin),
		 "# client-restart-corrupt: damage the stored state between the stop and the start\n"
		 "# nine restarts in a row: past systemd's start limit (5 in 10 s) unless it is off\n"
		 "[Unit]\nStartLimitIntervalSec=0\n"
		 "[Service]\nNotifyAccess=all\nExecStopPost=-+%s --store-helper\n",
		 self);
	file_write(DROPIN, dropin);
	CHECK_R(system("systemctl daemon-reload"), 0);

	bus = t_open();
	t_pipe(ready);
	t_pipe(ticks);
	t_pipe(states);
	seen.fd = states[0];
	ps = t_watched_start(t_service_run, NAME, methods, on_state, ready, -1);
	pu = t_watched_start(t_subscriber_run, NAME, NULL, on_state, ready, ticks[1]);
	CHECK_R(brokerd_bus_set_state_handler(bus, on_main_state, NULL), 0);
	t_service_id(bus, NAME, before, sizeof(before), 2000);
	signals_flow(bus, "before");

	for (size_t i = 0; i < ELEMENTSOF(damages); i++) {
		const struct damage *dm = &damages[i];
		struct t_reply hang = { 0 };
		pid_t old = t_brokerd_pid(), now;
		uint64_t t0;
		bool stored;
		FILE *f;
		int round = (int)i + 1;

		CHECK(old > 0);
		(void)unlink(DONE_FILE);
		file_write(MODE_FILE, dm->mode);
		CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Hang", NULL, 0, 120000000, t_on_reply,
					       &hang),
			0);
		brokerd_msg_unref(
			t_call_retry(bus, NAME, "Ping", "", 5000)); /* Hang has reached the service */

		CHECK_R(system("systemctl restart brokerd.service"), 0);
		t0 = now_usec();
		now = t_brokerd_pid();
		CHECK(now > 0 && now != old);
		f = fopen(DONE_FILE, "re");
		if (!f || !fgets(done, sizeof(done), f))
			FAIL("%s: the ExecStopPost= helper did not run", dm->mode);
		fclose(f);
		done[strcspn(done, "\n")] = 0;
		t_log("%s", done);
		if (!strstr(done, ": stored"))
			FAIL("%s: the state was not damaged", dm->mode);

		/* every loss reported: the call in flight, each bus's state */
		CHECK(t_pump(bus, &hang.done, 15000));
		CHECK_R(hang.error, -ECONNRESET);
		for (uint64_t end = now_usec() + 20000000; n_connects < round && now_usec() < end;) {
			bool never = false;

			(void)t_pump(bus, &never, 100);
		}
		CHECK_R(n_disconnects, round);
		CHECK_R(n_connects, round);
		snprintf(want, sizeof(want), "service disconnected %d", round);
		t_lines_expect(&seen, want, 10000);
		snprintf(want, sizeof(want), "subscriber disconnected %d", round);
		t_lines_expect(&seen, want, 10000);
		snprintf(want, sizeof(want), "service connected %d", round);
		t_lines_expect(&seen, want, 20000);
		snprintf(want, sizeof(want), "subscriber connected %d", round);
		t_lines_expect(&seen, want, 20000);
		t_log("%s: every bus back %llu ms after the restart returned", dm->mode,
		      (unsigned long long)(now_usec() - t0) / 1000);

		/* back with a new unique name, its name and the subscription */
		t_service_id(bus, NAME, after, sizeof(after), 10000);
		if (strncmp(after, ":1.", 3) != 0 || strcmp(after, before) == 0)
			FAIL("%s: the service was %s and is %s", dm->mode, before, after);
		snprintf(before, sizeof(before), "%s", after);
		signals_flow(bus, dm->mode);

		/* said why, left nothing behind */
		if (!journal_has(now, dm->logged))
			FAIL("%s: brokerd (pid %d) did not log \"%s\"", dm->mode, (int)now, dm->logged);
		if (!journal_has(now, "restart: starting with an empty bus"))
			FAIL("%s: brokerd (pid %d) did not say it starts empty", dm->mode, (int)now);
		CHECK_R(t_keeper_pid(), 0);
		fds[i] = fds_of(now, &stored);
		if (stored)
			FAIL("%s: brokerd holds a stored state", dm->mode);
		t_log("%s: refused (\"%s\"), brokerd holds %d fds", dm->mode, dm->logged, fds[i]);
		if (fds[i] != fds[0])
			FAIL("%s: brokerd holds %d fds, %d after the first fallback", dm->mode, fds[i],
			     fds[0]);
		while (t_lines_read(&seen, 200) == 0)
			;
		for (int j = 0; j < seen.n; j++)
			if (strstr(seen.line[j], "not-restored"))
				FAIL("%s: all was restored", seen.line[j]);
		seen.n = 0; /* the next round's lines have the next number */
	}

	dbus_round(bus, before);

	/* without the drop-in, a restart hands the bus over again: nothing of the damage stayed */
	cleanup();
	{
		pid_t old = t_brokerd_pid();
		bool never = false;

		CHECK_R(system("systemctl restart brokerd.service"), 0);
		CHECK(t_brokerd_pid() != old);
		(void)t_pump(bus, &never, 2000);
		CHECK_R(n_disconnects, (int)ELEMENTSOF(damages));
		t_service_id(bus, NAME, after, sizeof(after), 5000);
		CHECK(strcmp(after, before) == 0);
		signals_flow(bus, "handed-over");
		t_log("a plain restart afterwards handed the bus over: %s kept its unique name", after);
	}

	t_kill(pu);
	t_kill(ps);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
