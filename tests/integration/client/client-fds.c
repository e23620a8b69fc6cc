/* SPDX-License-Identifier: MIT */
/*
 * client-fds - file descriptors ('h') between real processes, and no fd
 * leaked anywhere when messages carrying them are lost.
 *
 * 1. A call carries a memfd, the write end of a pipe and one end of a
 *    socketpair to a service (org.brokerd.test.Fds.Use): it reads the memfd,
 *    writes through the pipe and the socket, and answers what it read with
 *    the pipe's write end, through which the test writes in turn.
 * 2. The test owns org.brokerd.test.FdsSig and emits the same three in a
 *    signal; three subscribers (two root, one alice) each get fds of their
 *    own and use them the same way.
 *    `brokerctl call ... Read h FILE` passes a file as busctl does, and
 *    `brokerctl monitor` (text and --json) shows the three fds of a signal.
 *    A subscriber whose fd table has room for one more fd is sent three:
 *    the message is dropped and counted (BROKERD_COUNTER_FDS_LOST), not
 *    handed to it with fds missing.
 * 3. Leaks, after: a lossy overwrite (a stopped subscriber misses most of 200
 *    signals carrying fds), kill -9 of a stopped subscriber with signals
 *    queued for it, a revocation (the policy stops letting alice receive
 *    while signals wait for her) and `systemctl restart brokerd` with fds
 *    in flight. Each scenario sends the write end of a pipe of its own: once
 *    the test closes its copy, the read end sees EOF only if no process and
 *    no message in the kernel still holds one. And /proc/PID/fd of the
 *    test, the service and every subscriber still alive counts what it
 *    counted before.
 */
#include <dirent.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "tests/integration/client/testlib.h"

#define NAME	    "org.brokerd.test.Fds"
#define SIGNAME	    "org.brokerd.test.FdsSig"
#define IFACE	    "org.brokerd.test.Fds1"
#define CONTENT	    "memfd contents"
#define POLICY_BASE "[default]\nallow own org.brokerd.test.*\n"
#define POLICY_ALICE                        \
	"[user alice]\nallow receive " SIGNAME \
	"\n"

static unsigned int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	unsigned int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		FAIL("opendir %s: %m", path);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return pid == getpid() ? n - 1 : n; /* our own count includes the dir being read */
}

/* Reads the memfd from its start, writes `who` through the pipe and the socket. */
static void use_fds(int memfd, int pipe_wr, int sock, const char *who)
{
	char buf[64] = { 0 }, line[64];
	int n;

	if (pread(memfd, buf, sizeof(buf) - 1, 0) != (ssize_t)strlen(CONTENT) || strcmp(buf, CONTENT) != 0)
		FAIL("%s: the memfd reads \"%s\"", who, buf);
	/* one write: lines from several writers must not interleave */
	n = snprintf(line, sizeof(line), "%s\n", who);
	if (write(pipe_wr, line, (size_t)n) != n)
		FAIL("%s: write to the pipe: %m", who);
	if (send(sock, who, strlen(who), 0) != (ssize_t)strlen(who))
		FAIL("%s: send on the socket: %m", who);
}

/* --- the service --------------------------------------------------------------- */

static int on_use(brokerd_msg *m, void *u)
{
	int memfd, wr, sock;
	char buf[64] = { 0 };

	CHECK_R(brokerd_msg_read(m, "hhh", &memfd, &wr, &sock), 1);
	use_fds(memfd, wr, sock, "service");
	CHECK(pread(memfd, buf, sizeof(buf) - 1, 0) > 0);
	/* and the pipe's write end goes back in the reply: fds both ways */
	return brokerd_msg_return(m, "sh", buf, wr);
}

/* Read(h): what the file passed reads from its start (brokerctl's 'h' is a file). */
static int on_read(brokerd_msg *m, void *u)
{
	char buf[128] = { 0 };
	int fd;

	CHECK_R(brokerd_msg_read(m, "h", &fd), 1);
	if (pread(fd, buf, sizeof(buf) - 1, 0) < 0)
		return -errno;
	return brokerd_msg_return(m, "s", buf);
}

static const struct t_method methods[] = {
	{ "Use", on_use },
	{ "Read", on_read },
	{ NULL, NULL },
};

/* --- the subscribers ------------------------------------------------------------ */

static int sub_report[2];

struct sub {
	const char *who;
	uid_t uid;
	int ready[2];
	unsigned int n_drop;
};

static int on_signal(brokerd_msg *m, void *u)
{
	struct sub *s = u;
	const char *member = brokerd_msg_get_member(m);
	int memfd, wr, sock;

	if (strcmp(member, "Take") == 0) {
		CHECK_R(brokerd_msg_read(m, "hhh", &memfd, &wr, &sock), 1);
		use_fds(memfd, wr, sock, s->who);
	} else if (strcmp(member, "Drop") == 0) {
		s->n_drop++; /* the fd goes with the message */
	} else if (strcmp(member, "Sync") == 0) {
		uint32_t seq;

		CHECK_R(brokerd_msg_read(m, "u", &seq), 1);
		t_say(sub_report[1], "%s synced %u", s->who, seq);
	}
	return 0;
}

static int subscriber(void *arg)
{
	struct sub *s = arg;
	brokerd_bus *bus;

	if (s->uid)
		t_become(s->uid);
	bus = t_open();
	CHECK_R(brokerd_bus_subscribe(bus, NULL, SIGNAME, NULL, on_signal, s), 0);
	t_say(s->ready[1], "subscribed");
	return brokerd_bus_run(bus) < 0;
}

static struct sub subs[3] = {
	{ .who = "sub0" },
	{ .who = "sub1" },
	{ .who = "alice", .uid = UID_ALICE },
};
static pid_t sub_pid[3];
static bool sub_alive[3];

/* A subscriber with room for one more fd (RLIMIT_NOFILE just above its lowest free fd). */
static int tight_ready[2], tight_report[2];

static int on_tight(brokerd_msg *m, void *u)
{
	const char *member = brokerd_msg_get_member(m);

	if (strcmp(member, "Tight") == 0)
		t_say(tight_report[1], "delivered with %u fds", m->n_fds);
	else if (strcmp(member, "TightSync") == 0)
		t_say(tight_report[1], "lost=%" PRIu64, brokerd_bus_get_counter(u, BROKERD_COUNTER_FDS_LOST));
	return 0;
}

static int tight(void *arg)
{
	brokerd_bus *b = t_open();
	struct rlimit rl;
	int lowest;

	CHECK_R(brokerd_bus_subscribe(b, NULL, SIGNAME, NULL, on_tight, b), 0);
	lowest = fcntl(0, F_DUPFD, 0);
	CHECK(lowest >= 0);
	close(lowest);
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = (rlim_t)lowest + 1; /* every fd below is taken: one free place */
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	t_say(tight_ready[1], "subscribed");
	return brokerd_bus_run(b) < 0;
}

/* --- the test ------------------------------------------------------------------- */

static brokerd_bus *bus;

/* Emits member carrying the n fds that follow (and, for Sync, a sequence number). */
static void emit(const char *member, uint32_t seq, unsigned int n, ...)
{
	brokerd_msg *m = NULL;
	va_list ap;
	int k;

	CHECK_R(brokerd_msg_new_signal(bus, &m, SIGNAME, "/", IFACE, member), 0);
	va_start(ap, n);
	for (unsigned int i = 0; i < n; i++) {
		int fd = va_arg(ap, int);

		CHECK_R(brokerd_msg_append_basic(m, 'h', &fd), 0);
	}
	va_end(ap);
	if (seq)
		CHECK_R(brokerd_msg_append(m, "u", seq), 0);
	k = brokerd_bus_send(bus, m);
	brokerd_msg_unref(m);
	CHECK_R(k, 0);
}

/*
 * Every live subscriber has handled everything emitted before: each answers
 * Sync(seq) with "who synced seq". Sync goes out again every second until
 * all answered, since a subscriber's channel may still be on its way when
 * the name was just taken (older answers are skipped).
 */
static void sync_all(void)
{
	static uint32_t seq;
	char line[128], want[64];
	bool done[3] = { false };
	unsigned int left = 0;
	uint64_t end;

	seq++;
	for (int i = 0; i < 3; i++)
		left += sub_alive[i];
	end = now_usec() + 30000000;
	emit("Sync", seq, 0);
	while (left) {
		if (now_usec() > end)
			FAIL("%u subscribers never answered Sync %u", left, seq);
		if (t_hear(sub_report[0], line, sizeof(line), 1000) < 0) {
			emit("Sync", seq, 0);
			continue;
		}
		for (int i = 0; i < 3; i++) {
			snprintf(want, sizeof(want), "%s synced %u", subs[i].who, seq);
			if (sub_alive[i] && !done[i] && strcmp(line, want) == 0) {
				done[i] = true;
				left--;
			}
		}
	}
}

/*
 * Until monitor f has a line to read. A monitor may start listening to the
 * name's signal channel after Take went out (its first channel attached
 * says it is ready, and the JSON one says nothing at all), so signals Mon
 * with the same fds follow every 2 s until it prints (subscribers ignore them).
 */
static void monitor_wait(FILE *f, int a, int b, int c)
{
	for (int i = 0;; i++) {
		struct pollfd pf = { .fd = fileno(f), .events = POLLIN };

		if (poll(&pf, 1, 2000) > 0)
			return;
		if (i == 15)
			FAIL("brokerctl monitor printed nothing in 30 s");
		emit("Mon", 0, 3, a, b, c);
	}
}

/* Reads lines from fd until it has seen each of the n words in want. */
static void expect_words(int fd, const char *const *want, unsigned int n, bool datagrams)
{
	bool seen[8] = { 0 };
	char buf[256];
	unsigned int left = n;

	while (left) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, 20000) <= 0)
			FAIL("%u of %u users of the fds never wrote", left, n);
		if (datagrams) {
			k = recv(fd, buf, sizeof(buf) - 1, 0);
			if (k <= 0)
				FAIL("recv: %m");
			buf[k] = 0;
		} else if (t_hear(fd, buf, sizeof(buf), 5000) < 0) {
			FAIL("the pipe closed early");
		}
		for (unsigned int i = 0; i < n; i++)
			if (!seen[i] && strcmp(buf, want[i]) == 0) {
				seen[i] = true;
				left--;
				break;
			}
	}
}

/* The fd counts of the test, the service and every live subscriber. */
struct counts {
	unsigned int self, service, sub[3];
};
static pid_t service;

static struct counts counts_now(void)
{
	struct counts c = { .self = count_fds(getpid()), .service = count_fds(service) };

	for (int i = 0; i < 3; i++)
		c.sub[i] = sub_alive[i] ? count_fds(sub_pid[i]) : 0;
	return c;
}

static void counts_check(const struct counts *before, const char *scenario)
{
	struct counts now = counts_now();

	if (now.self != before->self)
		FAIL("%s: the test has %u fds, had %u", scenario, now.self, before->self);
	if (now.service != before->service)
		FAIL("%s: the service has %u fds, had %u", scenario, now.service, before->service);
	for (int i = 0; i < 3; i++)
		if (sub_alive[i] && now.sub[i] != before->sub[i])
			FAIL("%s: %s has %u fds, had %u", scenario, subs[i].who, now.sub[i], before->sub[i]);
	t_log("%s: fd counts unchanged (test %u, service %u, subscribers %u %u %u)", scenario, now.self,
	      now.service, now.sub[0], now.sub[1], now.sub[2]);
}

/* After the test closed its write end: EOF within ms, or some copy leaked. */
static void expect_eof(int rd, const char *scenario, int ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * 1000;
	char buf[256];

	while (now_usec() < end) {
		struct pollfd p = { .fd = rd, .events = POLLIN };
		ssize_t k;

		if (poll(&p, 1, 100) <= 0)
			continue;
		k = read(rd, buf, sizeof(buf));
		if (k == 0) {
			t_log("%s: every copy of the pipe's write end is closed", scenario);
			return;
		}
	}
	FAIL("%s: a copy of the pipe's write end is still open somewhere after %d ms", scenario, ms);
}

static void stop(int i)
{
	CHECK(kill(sub_pid[i], SIGSTOP) == 0);
}

static void cont(int i)
{
	CHECK(kill(sub_pid[i], SIGCONT) == 0);
}

int main(void)
{
	const char *callers[] = { "service" }, *all[] = { "sub0", "sub1", "alice" };
	brokerd_msg *m = NULL, *reply = NULL;
	int memfd, pipefd[2], sp[2], p[2];
	struct counts base;
	const char *text;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl");
	t_policy(POLICY_BASE POLICY_ALICE);
	t_pipe(sub_report);
	for (int i = 0; i < 3; i++) {
		t_pipe(subs[i].ready);
		sub_pid[i] = t_fork(subscriber, &subs[i]);
		close(subs[i].ready[1]);
		t_expect(subs[i].ready[0], "subscribed", 10000);
		close(subs[i].ready[0]);
		sub_alive[i] = true;
	}
	service = t_service_start(NAME, methods);
	bus = t_open();
	CHECK_R(brokerd_bus_request_name(bus, SIGNAME, 0), BROKERD_NAME_PRIMARY_OWNER);

	memfd = memfd_create("client-fds", MFD_CLOEXEC);
	CHECK(memfd >= 0);
	CHECK(write(memfd, CONTENT, strlen(CONTENT)) == (ssize_t)strlen(CONTENT));
	t_pipe(pipefd);
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp) == 0);

	/* 1. a call */
	CHECK_R(brokerd_msg_new_call(bus, &m, NAME, "/", IFACE, "Use"), 0);
	CHECK_R(brokerd_msg_append(m, "hhh", memfd, pipefd[1], sp[1]), 0);
	CHECK_R(brokerd_bus_call_msg(bus, m, 10000000, &reply), 0);
	brokerd_msg_unref(m);
	{
		const char *replied[] = { "reply" };
		int back = -1;

		CHECK_R(brokerd_msg_read(reply, "sh", &text, &back), 1);
		CHECK(strcmp(text, CONTENT) == 0);
		CHECK(back >= 0 && back != pipefd[1]);
		CHECK(write(back, "reply\n", 6) == 6);
		brokerd_msg_unref(reply);
		expect_words(pipefd[0], callers, 1, false);
		expect_words(pipefd[0], replied, 1, false);
	}
	expect_words(sp[0], callers, 1, true);
	t_log("call: the service read the memfd and wrote through the pipe and the socket");

	/* brokerctl passes a file for an h argument */
	{
		FILE *f = fopen("/tmp/client-fds.txt", "we");
		char out[512] = "";
		size_t n;

		CHECK(f);
		fputs("passed by brokerctl", f);
		fclose(f);
		f = popen("brokerctl call " NAME " / " IFACE " Read h /tmp/client-fds.txt", "r");
		CHECK(f);
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = 0;
		CHECK_R(pclose(f), 0);
		if (!strstr(out, "passed by brokerctl"))
			FAIL("brokerctl call ... h FILE printed \"%s\"", out);
		unlink("/tmp/client-fds.txt");
		t_log("brokerctl call ... h FILE: the service read the file");
	}

	/* 2. a signal to three subscribers, each with fds of its own, seen by monitors */
	sync_all(); /* all three attached to the name's channel */
	{
		FILE *mon_json = popen("brokerctl --json=short --count 1 monitor " SIGNAME, "r");
		FILE *mon = popen("brokerctl --count 1 monitor " SIGNAME, "r");
		char line[2048];

		CHECK(mon && mon_json);
		CHECK(fgets(line, sizeof(line), mon)); /* "Monitoring ..." */
		emit("Take", 0, 3, memfd, pipefd[1], sp[1]);
		expect_words(pipefd[0], all, 3, false);
		expect_words(sp[0], all, 3, true);
		t_log("signal: 3 subscribers read the memfd and wrote through the pipe and the socket");
		monitor_wait(mon, memfd, pipefd[1], sp[1]);
		CHECK(fgets(line, sizeof(line), mon));
		if ((!strstr(line, "member=Take") && !strstr(line, "member=Mon")) ||
		    !strstr(line, "fds=3 (file,pipe,socket)"))
			FAIL("brokerctl monitor printed: %s", line);
		t_log("monitor: %.*s", (int)strcspn(line, "\n"), line);
		monitor_wait(mon_json, memfd, pipefd[1], sp[1]);
		CHECK(fgets(line, sizeof(line), mon_json));
		if ((!strstr(line, "\"member\":\"Take\"") && !strstr(line, "\"member\":\"Mon\"")) ||
		    !strstr(line, "\"fds\":["))
			FAIL("brokerctl --json monitor printed: %s", line);
		t_log("monitor --json: %.*s", (int)strcspn(line, "\n"), line);
		CHECK_R(pclose(mon), 0);
		CHECK_R(pclose(mon_json), 0);
	}
	/* a receiver whose fd table is full drops the message and counts it */
	{
		char line[128];
		pid_t pid;
		int tries = 0;

		t_pipe(tight_ready);
		t_pipe(tight_report);
		pid = t_fork(tight, NULL);
		t_expect(tight_ready[0], "subscribed", 10000);
		do { /* until its subscription is attached */
			CHECK(++tries < 30);
			emit("TightSync", 0, 0);
		} while (t_hear(tight_report[0], line, sizeof(line), 1000) < 0);
		CHECK(strcmp(line, "lost=0") == 0);
		while (t_hear(tight_report[0], line, sizeof(line), 500) == 0) /* the other TightSyncs */
			CHECK(strcmp(line, "lost=0") == 0);
		emit("Tight", 0, 3, memfd, pipefd[1], sp[1]);
		emit("TightSync", 0, 0);
		CHECK_R(t_hear(tight_report[0], line, sizeof(line), 10000), 0);
		if (strcmp(line, "lost=1") != 0)
			FAIL("a receiver with room for 1 fd, sent 3: \"%s\", want \"lost=1\"", line);
		t_log("fd table full: the message was dropped and counted (BROKERD_COUNTER_FDS_LOST)");
		t_kill(pid);
		close(tight_ready[0]);
		close(tight_ready[1]);
		close(tight_report[0]);
		close(tight_report[1]);
	}
	sync_all();
	base = counts_now();

	/* 3a. lossy overwrite: sub1 stopped while 200 fds pass (the ring holds 32) */
	t_pipe(p);
	stop(1);
	for (int i = 0; i < 200; i++)
		emit("Drop", 0, 1, p[1]);
	cont(1);
	sync_all();
	close(p[1]);
	expect_eof(p[0], "lossy overwrite", 10000);
	close(p[0]);
	counts_check(&base, "lossy overwrite");

	/* 3b. kill -9 of sub1, stopped with fds queued for it */
	t_pipe(p);
	stop(1);
	for (int i = 0; i < 10; i++)
		emit("Drop", 0, 1, p[1]);
	t_kill(sub_pid[1]);
	sub_alive[1] = false;
	sync_all();
	close(p[1]);
	expect_eof(p[0], "kill -9 of a receiver", 10000);
	close(p[0]);
	counts_check(&base, "kill -9 of a receiver");

	/* 3c. revocation: alice may no longer receive, with fds waiting for her */
	t_pipe(p);
	stop(2);
	for (int i = 0; i < 10; i++)
		emit("Drop", 0, 1, p[1]);
	t_policy(POLICY_BASE);
	cont(2);
	sub_alive[2] = false; /* no longer hears Sync; still counted below */
	sync_all();
	close(p[1]);
	expect_eof(p[0], "revocation", 10000);
	close(p[0]);
	usleep(500000); /* alice's failed receive is handled */
	{
		unsigned int now = count_fds(sub_pid[2]);

		if (now != base.sub[2])
			FAIL("revocation: alice has %u fds, had %u", now, base.sub[2]);
	}
	counts_check(&base, "revocation");

	/* 3d. systemctl restart brokerd with fds in flight to a stopped subscriber */
	t_pipe(p);
	stop(0);
	for (int i = 0; i < 10; i++)
		emit("Drop", 0, 1, p[1]);
	if (system("systemctl restart brokerd.service") != 0)
		FAIL("systemctl restart brokerd failed");
	cont(0);
	for (int i = 0; i < 10; i++)
		emit("Drop", 0, 1, p[1]);
	sync_all();
	close(p[1]);
	expect_eof(p[0], "brokerd restart", 10000);
	close(p[0]);
	counts_check(&base, "brokerd restart");

	/* the fds of steps 1 and 2 are the test's alone again */
	close(memfd);
	close(pipefd[1]);
	close(sp[1]);
	expect_eof(pipefd[0], "calls and signals", 5000);
	brokerd_bus_close(bus);
	for (int i = 0; i < 3; i++)
		t_kill(sub_pid[i]);
	t_kill(service);
	printf("ok\n");
	return 0;
}
