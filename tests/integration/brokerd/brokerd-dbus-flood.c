/* SPDX-License-Identifier: MIT */
/*
 * brokerd-dbus-flood.c - D-Bus clients that try to make the system
 * brokerd buffer without bound (issue 15, item 3), against its D-Bus
 * socket in the guest.
 *
 * With dbus_bytes 64 MiB for alice and bob (a policy file of the test,
 * reloaded; 48 MiB of it for bulk):
 * - alice opens ALICE_CONNS connections and on each sends half of a
 *   16 MiB call, never the rest;
 * - bob opens BOB_READERS connections that never read, and from another
 *   one calls them with 1 MiB bodies, each reader until brokerd refuses
 *   with LimitsExceeded (its queue is full: at least one refusal is
 *   required), then the next, for FLOOD_MS or until brokerd stops reading
 *   the sender (bob's budget for bulk used up).
 * Meanwhile brokerd's VmRSS must stay within RSS_BOUND_MB of what it was
 * before: what the two uids' budgets allow and some slack (without a
 * budget, alice alone makes brokerd hold ALICE_CONNS × 8 MiB); root's
 * `busctl call` of ListNames must answer within LATENCY_BOUND_MS (the
 * worst of several is printed), and so must alice's and bob's from new
 * connections (their small calls use the quarter kept free of bulk). At
 * the end everything is closed, and the two uids' dbus_bytes (QUOTA) go
 * back to zero.
 *
 * Runs as root; skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brokerd/dbus-front.h"
#include "brokerd/test-client.h"
#include "protocol/ctrl.h"
#include "protocol/dbus-message.h"
#include "util/clock.h"
#include "util/socket.h"

#define ALICE 2001
#define BOB   2002
#define CTRL_SOCKET "/run/brokerd/socket"
#define POLICY_FILE "/etc/brokerd/policy.d/90-dbus-flood.conf"
#define BUDGET	    (64U << 20)

#define ALICE_CONNS   48
#define ALICE_MESSAGE (16U << 20)
#define BOB_READERS   8
#define BOB_CALL      (1U << 20)
/* how long each flood may take to get as far as brokerd lets it (TCG) */
#define FLOOD_MS 8000
/*
 * What brokerd may hold on top of its baseline: the two budgets, and room
 * for what glibc keeps of freed memory and the sockets' own bookkeeping.
 */
#define RSS_BOUND_MB (2 * 64 + 48)
/* Like brokerd-flood's bound for HELLO under TCG on a shared 2-core machine. */
#define LATENCY_BOUND_MS 5000

#define CHECK(x)                                                                    \
	do {                                                                        \
		if (!(x)) {                                                         \
			printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #x);         \
			fflush(stdout);                                             \
			if (getpid() == main_pid)                                   \
				cleanup();                                          \
			_exit(1);                                                   \
		}                                                                   \
	} while (0)

static pid_t main_pid, alice_pid, bob_pid;

static void reload(void);

static void cleanup(void)
{
	if (alice_pid > 0)
		kill(alice_pid, SIGKILL);
	if (bob_pid > 0)
		kill(bob_pid, SIGKILL);
	if (unlink(POLICY_FILE) == 0)
		reload();
}

static uint64_t ms_now(void)
{
	return now_usec() / 1000;
}

/* --- brokerd, as systemd, /proc and its control socket see it --------------------- */

static pid_t brokerd_pid(void)
{
	char buf[64] = "";
	FILE *f = popen("systemctl show -p MainPID --value brokerd.service", "r");

	CHECK(f);
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	pclose(f);
	return (pid_t)strtol(buf, NULL, 10);
}

static long rss_kb(pid_t pid)
{
	long v = tc_rss_kb(pid);

	CHECK(v >= 0);
	return v;
}

/* RELOAD as root: the test's limits in or out. A brokerd that does not know them says why. */
static void reload(void)
{
	struct tc c;
	struct tc_msg m;

	if (tc_connect_hello(&c, CTRL_SOCKET, 0) < 0 || tc_call(&c, CTRL_OP_RELOAD, &m, "") < 0) {
		printf("# RELOAD failed\n");
		return;
	}
	if (m.m.hdr.type != CTRL_TYPE_REPLY)
		printf("# RELOAD: %s: %s\n", m.error_name ? m.error_name : "?",
		       m.error_message ? m.error_message : "");
	tc_close(&c);
}

/* uid's dbus_bytes in use (QUOTA), or -1 if brokerd does not count them. */
static long long dbus_bytes(uid_t uid)
{
	struct tc c;
	struct tc_msg m;
	long long used = -1;
	uint64_t u, l;
	uint32_t n;

	CHECK(tc_connect_hello(&c, CTRL_SOCKET, 0) == 0);
	CHECK(tc_call(&c, CTRL_OP_QUOTA, &m, "u", (uint32_t)uid) == 0);
	CHECK(m.m.hdr.type == CTRL_TYPE_REPLY);
	CHECK(tc_read_u32(&m) == 1);
	CHECK(tc_read_u32(&m) == (uint32_t)uid);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++) {
		const char *q = tc_read_string(&m);

		CHECK(ctrl_read_u64(&m.r, &u) == 0 && ctrl_read_u64(&m.r, &l) == 0);
		if (!strcmp(q, "dbus_bytes"))
			used = (long long)u;
	}
	tc_close(&c);
	return used;
}

/* --- a raw D-Bus client ---------------------------------------------------------- */

static void become(uid_t uid)
{
	CHECK(setgroups(0, NULL) == 0);
	CHECK(setgid(uid) == 0);
	CHECK(setuid(uid) == 0);
}

static void write_all(int fd, const void *data, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, (const char *)data + done, len - done);

		CHECK(n > 0);
		done += (size_t)n;
	}
}

/* A message to the driver or dest (NULL: the driver), with an "ay" body of n bytes if n. */
static void message(const char *dest, const char *iface, const char *member, uint32_t serial, size_t n,
		    void **data, size_t *len)
{
	struct dbus_header h = { .type = DBUS_MESSAGE_METHOD_CALL,
				 .serial = serial,
				 .path = dest ? "/org/brokerdtest" : DBUS_DRIVER_PATH,
				 .interface = iface,
				 .member = member,
				 .destination = dest ? dest : DBUS_DRIVER_NAME,
				 .signature = n ? "ay" : NULL };
	uint8_t *body = NULL;
	uint32_t l = (uint32_t)n;

	if (n) {
		body = malloc(n + 4);
		CHECK(body);
		memcpy(body, &l, 4);
		memset(body + 4, 'x', n);
	}
	CHECK(dbus_message_write(&h, body, n ? n + 4 : 0, data, len) == 0);
	free(body);
}

/* Authenticated (pipelined, as the uid it runs as) and Hello sent; nothing read yet. */
static int dconnect(void)
{
	char auth[64], hex[16] = "", uid[16];
	size_t len;
	void *hello;
	int fd = unix_connect(DBUS_SOCKET_PATH, SOCK_STREAM);

	CHECK(fd >= 0);
	snprintf(uid, sizeof(uid), "%u", (unsigned int)getuid());
	for (size_t i = 0; uid[i]; i++)
		snprintf(hex + 2 * i, 3, "%02x", uid[i]);
	snprintf(auth, sizeof(auth), "AUTH EXTERNAL %s\r\nBEGIN\r\n", hex);
	write_all(fd, "", 1);
	write_all(fd, auth, strlen(auth));
	message(NULL, DBUS_DRIVER_INTERFACE, "Hello", 1, 0, &hello, &len);
	write_all(fd, hello, len);
	free(hello);
	return fd;
}

/* Reads exactly len bytes within the deadline; false if it passed. */
static bool read_until(int fd, void *buf, size_t len, uint64_t deadline)
{
	for (size_t have = 0; have < len;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (ms_now() >= deadline || poll(&p, 1, (int)(deadline - ms_now())) != 1)
			return false;
		n = read(fd, (char *)buf + have, len - have);
		CHECK(n > 0);
		have += (size_t)n;
	}
	return true;
}

/* The OK line of the pipelined authentication. */
static void skip_auth(int fd)
{
	char c[2] = "";

	while (c[0] != '\r' || c[1] != '\n') {
		c[0] = c[1];
		CHECK(read_until(fd, &c[1], 1, ms_now() + 10000));
	}
}

/* The next message within ms; false if none came. */
static bool next_message(int fd, struct dbus_message *m, int ms)
{
	uint8_t head[DBUS_HEADER_FIXED_SIZE], *data;
	uint64_t deadline = ms_now() + (uint64_t)ms;
	size_t size;

	if (!read_until(fd, head, sizeof(head), deadline))
		return false;
	CHECK(dbus_message_frame_size(head, sizeof(head), &size) == 0);
	data = malloc(size);
	CHECK(data);
	memcpy(data, head, sizeof(head));
	CHECK(read_until(fd, data + sizeof(head), size - sizeof(head), deadline + 10000));
	CHECK(dbus_message_parse(m, data, size, 0) == 0);
	return true;
}

/* The unique name from the Hello reply (the connection authenticated before). */
static void hello_name(int fd, char *name, size_t len)
{
	struct dbus_message m;

	skip_auth(fd);
	for (;;) {
		CHECK(next_message(fd, &m, 10000));
		if (m.h.reply_serial == 1)
			break;
		dbus_message_deinit(&m);
	}
	CHECK(m.h.type == DBUS_MESSAGE_METHOD_RETURN);
	snprintf(name, len, "%s", (const char *)m.body + 4);
	dbus_message_deinit(&m);
}

/* Writes data within ms (brokerd may not read: then false). */
static bool write_within(int fd, const void *data, size_t len, int ms)
{
	uint64_t deadline = ms_now() + (uint64_t)ms;

	for (size_t done = 0; done < len;) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t n = send(fd, (const char *)data + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		CHECK(n < 0 && errno == EAGAIN);
		if (ms_now() >= deadline || poll(&p, 1, (int)(deadline - ms_now())) != 1)
			return false;
	}
	return true;
}

/* --- the floods -------------------------------------------------------------------- */

/* alice: half of a 16 MiB call on each connection; reports the bytes brokerd took. */
static void alice_main(int report)
{
	static int fds[ALICE_CONNS];
	size_t len, half, sent[ALICE_CONNS] = { 0 }, total = 0;
	uint64_t end;
	void *big;
	bool more = true;

	become(ALICE);
	message(DBUS_DRIVER_NAME, "org.brokerdtest.Flood", "Big", 2, ALICE_MESSAGE, &big, &len);
	half = len / 2;
	for (int i = 0; i < ALICE_CONNS; i++)
		fds[i] = dconnect();
	end = ms_now() + FLOOD_MS;
	while (more && ms_now() < end) {
		more = false;
		for (int i = 0; i < ALICE_CONNS; i++) {
			while (sent[i] < half) {
				ssize_t n = send(fds[i], (char *)big + sent[i], half - sent[i],
						 MSG_DONTWAIT | MSG_NOSIGNAL);

				if (n <= 0)
					break;
				sent[i] += (size_t)n;
				total += (size_t)n;
			}
			more |= sent[i] < half;
		}
		usleep(20000);
	}
	CHECK(write(report, &total, sizeof(total)) == sizeof(total));
	pause();
	_exit(0);
}

struct bob_report {
	unsigned int accepted, refused;
	bool stalled;
};

/* bob: readers that never read, and 1 MiB calls to them until brokerd stops taking them. */
static void bob_main(int report)
{
	static int readers[BOB_READERS];
	static char names[BOB_READERS][64];
	struct bob_report r = { 0 };
	uint32_t serial = 2;
	uint64_t end;
	int sender;

	become(BOB);
	for (int i = 0; i < BOB_READERS; i++) {
		readers[i] = dconnect();
		hello_name(readers[i], names[i], sizeof(names[i])); /* and never reads again */
	}
	sender = dconnect();
	hello_name(sender, (char[64]){ 0 }, 64);
	end = ms_now() + FLOOD_MS;
	for (int i = 0; i < BOB_READERS && !r.stalled && ms_now() < end; i++) {
		bool full = false;

		while (!full && ms_now() < end) {
			struct dbus_message m;
			size_t len;
			void *data;
			uint32_t call = serial++, ping = serial++;

			message(names[i], "org.brokerdtest.Flood", "Data", call, BOB_CALL, &data, &len);
			r.stalled = !write_within(sender, data, len, 2000);
			free(data);
			if (r.stalled)
				break;
			message(NULL, "org.freedesktop.DBus.Peer", "Ping", ping, 0, &data, &len);
			r.stalled = !write_within(sender, data, len, 2000);
			free(data);
			/* the refusal, if any, comes before the Ping's answer */
			while (!r.stalled) {
				r.stalled = !next_message(sender, &m, 3000);
				if (r.stalled)
					break;
				if (m.h.reply_serial == call && m.h.type == DBUS_MESSAGE_ERROR) {
					CHECK(!strcmp(m.h.error_name, "org.freedesktop.DBus.Error.LimitsExceeded"));
					full = true;
				}
				if (m.h.reply_serial == ping) {
					dbus_message_deinit(&m);
					break;
				}
				dbus_message_deinit(&m);
			}
			if (r.stalled)
				break;
			if (full)
				r.refused++;
			else
				r.accepted++;
		}
	}
	CHECK(write(report, &r, sizeof(r)) == sizeof(r));
	pause();
	_exit(0);
}

/* --- what others get meanwhile ------------------------------------------------------ */

/* ms for `busctl call ... ListNames` on the D-Bus socket as uid, or -1 if it failed. */
static long busctl_ms(uid_t uid)
{
	uint64_t t0 = ms_now();
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (uid)
			become(uid);
		dup2(null, 1);
		execlp("timeout", "timeout", "20", "busctl", "--address=unix:path=" DBUS_SOCKET_PATH, "call",
		       DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE, "ListNames", (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? (long)(ms_now() - t0) : -1;
}

static pid_t spawn(void (*fn)(int), int *report)
{
	int p[2];
	pid_t pid;

	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		fn(p[1]);
	}
	close(p[1]);
	*report = p[0];
	return pid;
}

/* Waits for a child's report, sampling brokerd's VmRSS meanwhile into *peak. */
static void wait_report(int fd, void *buf, size_t len, pid_t brokerd, long *peak)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t end = ms_now() + FLOOD_MS + 30000;

	while (poll(&p, 1, 100) == 0) {
		long rss = rss_kb(brokerd);

		*peak = rss > *peak ? rss : *peak;
		CHECK(ms_now() < end);
	}
	CHECK(read(fd, buf, len) == (ssize_t)len);
}

int main(void)
{
	long base, peak = 0, worst[3] = { 0 }, rss;
	static const uid_t uids[3] = { 0, ALICE, BOB };
	struct bob_report br;
	pid_t brokerd;
	size_t alice_total;
	int ra, rb;
	FILE *f;

	setvbuf(stdout, NULL, _IOLBF, 0);
	main_pid = getpid();
	if (getuid() != 0) {
		printf("SKIP: needs root\n");
		return 77;
	}
	f = fopen(POLICY_FILE, "we");
	CHECK(f);
	fprintf(f, "# brokerd-dbus-flood: small budgets, so that a flood reaches them quickly\n"
		   "[limits user %u]\ndbus_bytes %u\n[limits user %u]\ndbus_bytes %u\n",
		ALICE, BUDGET, BOB, BUDGET);
	CHECK(fclose(f) == 0);
	reload();
	brokerd = brokerd_pid();
	CHECK(brokerd > 0);
	base = rss_kb(brokerd);
	printf("# brokerd pid %d, VmRSS %ld kB before\n", (int)brokerd, base);

	alice_pid = spawn(alice_main, &ra);
	bob_pid = spawn(bob_main, &rb);
	wait_report(ra, &alice_total, sizeof(alice_total), brokerd, &peak);
	wait_report(rb, &br, sizeof(br), brokerd, &peak);
	printf("# alice: %d connections sent %zu MiB of half messages (unbounded, that would be %u MiB)\n",
	       ALICE_CONNS, alice_total >> 20, ALICE_CONNS * (ALICE_MESSAGE >> 21));
	printf("# bob: %u calls of 1 MiB taken for readers that do not read, %u refused with LimitsExceeded, %s\n",
	       br.accepted, br.refused, br.stalled ? "then its sender was not read" : "its sender never stalled");

	/* while both floods hold what they got: root, alice and bob are answered */
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 3; i++) {
			long ms = busctl_ms(uids[i]);

			printf("# busctl call ListNames as uid %u: %ld ms\n", (unsigned int)uids[i], ms);
			CHECK(ms >= 0);
			worst[i] = ms > worst[i] ? ms : worst[i];
		}
		rss = rss_kb(brokerd);
		peak = rss > peak ? rss : peak;
	}
	printf("# worst: root %ld ms, alice %ld ms, bob %ld ms (bound %d)\n", worst[0], worst[1], worst[2],
	       LATENCY_BOUND_MS);
	printf("# brokerd VmRSS peak %ld kB, %+ld kB over the baseline (bound %d MiB)\n", peak, peak - base,
	       RSS_BOUND_MB);
	printf("# dbus_bytes in use: alice %lld, bob %lld\n", dbus_bytes(ALICE), dbus_bytes(BOB));
	CHECK(peak - base <= RSS_BOUND_MB * 1024L);
	CHECK(br.refused >= 1);
	for (int i = 0; i < 3; i++)
		CHECK(worst[i] <= LATENCY_BOUND_MS);
	CHECK(brokerd_pid() == brokerd);

	/* everything given back once the floods are gone */
	kill(alice_pid, SIGKILL);
	kill(bob_pid, SIGKILL);
	CHECK(waitpid(alice_pid, NULL, 0) == alice_pid && waitpid(bob_pid, NULL, 0) == bob_pid);
	alice_pid = bob_pid = 0;
	for (int i = 0; i < 100 && (dbus_bytes(ALICE) || dbus_bytes(BOB)); i++)
		usleep(100000);
	printf("# after: dbus_bytes alice %lld, bob %lld; VmRSS %ld kB\n", dbus_bytes(ALICE), dbus_bytes(BOB),
	       rss_kb(brokerd));
	CHECK(dbus_bytes(ALICE) == 0 && dbus_bytes(BOB) == 0);
	cleanup();
	printf("ok: brokerd held at most %+ld kB for the floods; root answered within %ld ms\n", peak - base,
	       worst[0]);
	return 0;
}
