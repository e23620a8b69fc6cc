/* SPDX-License-Identifier: MIT */
/*
 * testlib.h - helpers for the client library's guest integration tests:
 * checks that print and exit 1, skips (exit 77), forking helpers that become
 * another user, pipes to synchronize processes, a forked service that owns a
 * name, the outcome of an asynchronous call, a temporary policy file.
 * Tests run as root inside the booted guest with brokerd.service up.
 */
#ifndef BROKERD_TESTS_CLIENT_TESTLIB_H
#define BROKERD_TESTS_CLIENT_TESTLIB_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/bus-control.h"
#include "client/bus-internal.h"

#define UID_ALICE 2001
#define UID_BOB	  2002
#define GID_USERS 2100

/* the process that registered a cleanup (t_atexit) runs it at exit, even on
 * FAIL; its children just go */
static pid_t t_cleanup_owner;
static inline __attribute__((noreturn)) void t_exit(int code)
{
	fflush(stdout);
	if (getpid() == t_cleanup_owner)
		exit(code);
	_exit(code);
}

/* Puts something back when the test ends, passed or failed (not in children). */
static inline void t_atexit(void (*fn)(void))
{
	t_cleanup_owner = getpid();
	atexit(fn);
}

#define FAIL(...)                                           \
	do {                                                \
		printf("FAIL %s:%d: ", __FILE__, __LINE__); \
		printf(__VA_ARGS__);                        \
		printf("\n");                               \
		t_exit(1);                                  \
	} while (0)
#define CHECK(x)                        \
	do {                            \
		if (!(x))               \
			FAIL("%s", #x); \
	} while (0)
#define CHECK_R(expr, want)                                                                            \
	do {                                                                                           \
		int _r = (expr);                                                                       \
		if (_r != (want))                                                                      \
			FAIL("%s = %d (%s), want %d", #expr, _r, _r < 0 ? strerror(-_r) : "", (want)); \
	} while (0)
/*
 * A test that cannot run here skips with its reason ("SKIP: reason", which
 * the harness puts in the TAP line). On the project's kernel and image the
 * harness sets BROKERD_TESTS_REQUIRE=1: nothing may be missing there, so the
 * same call fails.
 */
static inline bool t_required(void)
{
	const char *e = getenv("BROKERD_TESTS_REQUIRE");

	return e && strcmp(e, "1") == 0;
}
#define SKIP(...)                                                             \
	do {                                                                  \
		if (t_required())                                             \
			FAIL("required on the project kernel: " __VA_ARGS__); \
		printf("SKIP: ");                                             \
		printf(__VA_ARGS__);                                          \
		printf("\n");                                                 \
		fflush(stdout);                                               \
		exit(77);                                                     \
	} while (0)

static inline void t_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

/* Connects to the system bus; skips (or fails: SKIP) when brokerd has no channels. */
static inline brokerd_bus *t_open(void)
{
	brokerd_bus *bus = NULL;
	int r = brokerd_bus_open_system(&bus);

	if (r < 0)
		FAIL("cannot connect to brokerd: %s", strerror(-r));
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		SKIP("brokerd runs without kernel IPC channels");
	return bus;
}

/* Drops root for uid (alice gets brokerusers as a supplementary group). */
static inline void t_become(uid_t uid)
{
	gid_t gid = uid == UID_ALICE ? GID_USERS : uid;
	gid_t groups[1] = { GID_USERS };

	if (setgroups(uid == UID_ALICE ? 1 : 0, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		FAIL("cannot become uid %u: %m", (unsigned)uid);
}

/* Forks; the child (killed with the parent) runs fn and exits with its result. */
static inline pid_t t_fork(int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %m");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(fn(arg));
	}
	return pid;
}

/* Exit status of pid (waiting at most timeout_ms), -1 on timeout/signal. */
static inline int t_wait(pid_t pid, int timeout_ms)
{
	int status;

	for (int i = 0; i < timeout_ms / 10; i++) {
		pid_t p = waitpid(pid, &status, WNOHANG);

		if (p == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static inline void t_kill(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

/* Sync pipes: one line per event. */
static inline void t_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		FAIL("pipe: %m");
}

static inline void t_say(int fd, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)!write(fd, buf, (size_t)n);
}

/*
 * Reads one line into buf (timeout in ms): 0, or -ETIMEDOUT / -EPIPE. A line
 * begun is read to its end (t_say() writes it whole) for up to 5 s more: a
 * short timeout that ran out in the middle of one would lose its start.
 */
static inline int t_hear(int fd, char *buf, size_t size, int timeout_ms)
{
	size_t n = 0;
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000;

	while (n + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = now_usec(), limit = end + (n ? 5000000 : 0);
		ssize_t k;

		if (now >= limit)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)((limit - now) / 1000) + 1) <= 0)
			continue;
		k = read(fd, buf + n, 1);
		if (k <= 0)
			return -EPIPE;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	return 0;
}

static inline void t_expect(int fd, const char *want, int timeout_ms)
{
	char buf[512];
	int r = t_hear(fd, buf, sizeof(buf), timeout_ms);

	if (r < 0)
		FAIL("waiting for \"%s\": %s", want, strerror(-r));
	if (strcmp(buf, want) != 0)
		FAIL("got \"%s\", want \"%s\"", buf, want);
}

/*
 * Lines several processes write to one pipe, kept as they are heard: the
 * processes' lines interleave, so each is waited for by content, in any
 * order, and what was heard can be looked through afterwards.
 */
struct t_lines {
	int fd;
	int n;
	char line[32][64];
};

/* Keeps one more line if one comes within timeout_ms: 0, or -ETIMEDOUT / -EPIPE. */
static inline int t_lines_read(struct t_lines *l, int timeout_ms)
{
	char line[64];
	int r = t_hear(l->fd, line, sizeof(line), timeout_ms);

	if (r < 0)
		return r;
	t_log("heard: %s", line);
	CHECK(l->n < (int)(sizeof(l->line) / sizeof(l->line[0])));
	snprintf(l->line[l->n++], sizeof(l->line[0]), "%s", line);
	return 0;
}

/* Whether the line want has been heard. */
static inline bool t_lines_seen(const struct t_lines *l, const char *want)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->line[i], want) == 0)
			return true;
	return false;
}

/* Waits up to timeout_ms for the line want, failing the test without it. */
static inline void t_lines_expect(struct t_lines *l, const char *want, int timeout_ms)
{
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000;

	while (!t_lines_seen(l, want)) {
		if (now_usec() >= end)
			FAIL("no \"%s\" within %d ms", want, timeout_ms);
		(void)t_lines_read(l, 200);
	}
}

/* Processes the bus until *flag becomes true or timeout_ms passes. */
static inline bool t_pump(brokerd_bus *bus, volatile bool *flag, int timeout_ms)
{
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000;

	while (!*flag && now_usec() < end) {
		if (brokerd_bus_process(bus) < 0)
			return false;
		if (!*flag)
			brokerd_bus_wait(bus, 50000);
	}
	return *flag;
}

/* --- a service and its callers ------------------------------------------- */

/* One method of a test service; the handler's userdata is the service's bus. */
struct t_method {
	const char *member;
	brokerd_msg_handler_t handler;
};

/*
 * A child (t_fork()) that serves methods owning name (t_service_run) or
 * says the body of each of name's Tick signals as a line on ticks_fd
 * (t_subscriber_run), until it is killed. Once set up it says who (or
 * "ready" when who is NULL) on ready_fd. state, if set, is its bus's state
 * handler, with who as its userdata: the tests that restart or kill
 * brokerd watch their children's connections through it.
 */
struct t_service {
	const char *name;
	const struct t_method *methods;
	int ready_fd;
	int ticks_fd;
	const char *who;
	brokerd_state_handler_t state;
};

static inline brokerd_bus *t_service_open(const struct t_service *s)
{
	brokerd_bus *bus = t_open();

	if (s->state)
		CHECK_R(brokerd_bus_set_state_handler(bus, s->state, (void *)s->who), 0);
	return bus;
}

static inline int t_service_run(void *arg)
{
	const struct t_service *s = arg;
	brokerd_bus *bus = t_service_open(s);

	for (const struct t_method *m = s->methods; m->member; m++)
		CHECK_R(brokerd_bus_add_method(bus, NULL, s->name, m->member, m->handler, bus), 0);
	CHECK_R(brokerd_bus_request_name(bus, s->name, 0), BROKERD_NAME_PRIMARY_OWNER);
	t_say(s->ready_fd, "%s", s->who ? s->who : "ready");
	return brokerd_bus_run(bus) < 0;
}

static inline int t_on_say_body(brokerd_msg *m, void *u);

static inline int t_subscriber_run(void *arg)
{
	const struct t_service *s = arg;
	brokerd_bus *bus = t_service_open(s);

	CHECK_R(brokerd_bus_subscribe(bus, NULL, s->name, "Tick", t_on_say_body, (void *)(intptr_t)s->ticks_fd),
		0);
	t_say(s->ready_fd, "%s", s->who ? s->who : "ready");
	return brokerd_bus_run(bus) < 0;
}

/*
 * Forks a service (killed with the parent) that owns name alone and serves
 * methods (ended by an entry without member) until it is killed or a handler
 * exits; returns its pid once it owns the name. A service that fails before
 * that fails the test at once: its end of the pipe closes.
 */
static inline pid_t t_service_start(const char *name, const struct t_method *methods)
{
	struct t_service s = { .name = name, .methods = methods };
	int ready[2];
	pid_t pid;

	t_pipe(ready);
	s.ready_fd = ready[1];
	pid = t_fork(t_service_run, &s);
	close(ready[1]);
	t_expect(ready[0], "ready", 5000);
	close(ready[0]);
	return pid;
}

/*
 * A service method (its userdata the service's bus): emits its call's body
 * as the signal Tick of the name it was called on, then replies.
 */
static inline int t_on_tick(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	CHECK_R(brokerd_bus_emit_signal(u, brokerd_msg_get_name(m), "Tick", body, size), 0);
	return brokerd_msg_reply(m, NULL, 0);
}

/* A service method: replies with the service's unique name. */
static inline int t_on_ping(brokerd_msg *m, void *u)
{
	const char *me = "";

	brokerd_bus_get_unique_name(u, &me);
	return brokerd_msg_reply(m, me, strlen(me));
}

/* A service method: replies "uid U pid P", the caller as the kernel stamped it. */
static inline int t_on_who(brokerd_msg *m, void *u)
{
	struct brokerd_creds c;
	char body[64];

	(void)u;
	CHECK_R(brokerd_msg_get_creds(m, &c), 0);
	snprintf(body, sizeof(body), "uid %u pid %d", (unsigned)c.uid, (int)c.pid);
	return brokerd_msg_reply(m, body, strlen(body));
}

/* A service method that never answers (a call left in flight). */
static inline int t_on_hang(brokerd_msg *m, void *u)
{
	brokerd_msg_ref(m);
	return 0;
}

/* A signal handler that says each signal's body as a line on the fd in u. */
static inline int t_on_say_body(brokerd_msg *m, void *u)
{
	const void *body;
	size_t size;

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	t_say((int)(intptr_t)u, "%.*s", (int)size, (const char *)body);
	return 0;
}

/*
 * Forks a child of the tests that restart or kill brokerd, watched through
 * state: the service (run t_service_run, owning name with methods) or the
 * subscriber (t_subscriber_run, each Tick body a line on ticks_fd), and
 * waits until it says "service" or "subscriber" on the pipe ready.
 */
static inline pid_t t_watched_start(int (*run)(void *), const char *name, const struct t_method *methods,
				    brokerd_state_handler_t state, const int ready[2], int ticks_fd)
{
	struct t_service s = { .name = name,
			       .methods = methods,
			       .ready_fd = ready[1],
			       .ticks_fd = ticks_fd,
			       .who = run == t_subscriber_run ? "subscriber" : "service",
			       .state = state };
	pid_t pid = t_fork(run, &s);

	t_expect(ready[0], s.who, 10000);
	return pid;
}

/* name.Tick(body), which must be answered within 5 s. */
static inline void t_tick(brokerd_bus *bus, const char *name, const char *body)
{
	brokerd_msg *reply = NULL;

	CHECK_R(brokerd_bus_call(bus, name, "Tick", body, strlen(body), 5000000, &reply), 0);
	brokerd_msg_unref(reply);
}

/* A subscriber waiting for the signal with body want (t_on_heard, t_heard). */
struct t_hearing {
	const char *want;
	volatile bool seen;
};

static inline int t_on_heard(brokerd_msg *m, void *u)
{
	struct t_hearing *t = u;
	const void *body;
	size_t size;

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	if (t->want && size == strlen(t->want) && memcmp(body, t->want, size) == 0)
		t->seen = true;
	return 0;
}

/* Whether the signal with body want comes within timeout_ms (others pass by). */
static inline bool t_heard(brokerd_bus *bus, struct t_hearing *t, const char *want, int timeout_ms)
{
	t->want = want;
	t->seen = false;
	return t_pump(bus, &t->seen, timeout_ms);
}

/* Calls name.member(arg) until it is answered (2 s a try) or ms have passed: the reply. */
static inline brokerd_msg *t_call_retry(brokerd_bus *bus, const char *name, const char *member,
					const char *arg, int ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * 1000;
	brokerd_msg *reply = NULL;
	int r;

	do {
		r = brokerd_bus_call(bus, name, member, arg, strlen(arg), 2000000, &reply);
		if (r == 0)
			return reply;
		usleep(100000);
	} while (now_usec() < end);
	FAIL("%s.%s still fails after %d ms: %s", name, member, ms, strerror(-r));
}

/* The unique name of name's service, as it answers Ping (t_on_ping), called until it does within ms. */
static inline void t_service_id(brokerd_bus *bus, const char *name, char *buf, size_t size, int ms)
{
	brokerd_msg *reply = t_call_retry(bus, name, "Ping", "", ms);
	const void *body;
	size_t n;

	brokerd_msg_get_body(reply, &body, &n);
	snprintf(buf, size, "%.*s", (int)n, (const char *)body);
	brokerd_msg_unref(reply);
}

/*
 * A worker of a pool (BROKERD_NAME_POOL): serves name.member with handler
 * (userdata u), says "ready" on ready_fd once REQUEST_NAME answered want
 * (0: primary owner or queued, either), and runs until killed.
 */
static inline int t_pool_worker(const char *name, const char *member, brokerd_msg_handler_t handler, void *u,
				int ready_fd, int want)
{
	brokerd_bus *bus = t_open();
	int r;

	CHECK_R(brokerd_bus_add_method(bus, NULL, name, member, handler, u), 0);
	r = brokerd_bus_request_name(bus, name, BROKERD_NAME_POOL);
	if (want)
		CHECK_R(r, want);
	else
		CHECK(r == BROKERD_NAME_PRIMARY_OWNER || r == BROKERD_NAME_IN_QUEUE);
	t_say(ready_fd, "ready");
	return brokerd_bus_run(bus) < 0;
}

/* brokerd.service's main pid (systemd's MainPID; 0 while it is not running). */
static inline pid_t t_brokerd_pid(void)
{
	char buf[32] = "";
	FILE *f = popen("systemctl show -P MainPID brokerd.service", "r");

	if (!f || !fgets(buf, sizeof(buf), f))
		FAIL("systemctl show MainPID");
	pclose(f);
	return (pid_t)atoi(buf);
}

/* The pid of brokerd's ring keeper (a process named brokerd-keeper), 0 if none runs. */
static inline pid_t t_keeper_pid(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	CHECK(d);
	while (!found && (e = readdir(d))) {
		char path[300], comm[32] = "";
		int fd;
		ssize_t n;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (n == 15 && strncmp(comm, "brokerd-keeper\n", 15) == 0)
			found = (pid_t)atoi(e->d_name);
	}
	closedir(d);
	return found;
}

/* The outcome of an asynchronous call: pass with t_on_reply, then t_pump(&done). */
struct t_reply {
	volatile bool done;
	int error;
};

static inline int t_on_reply(brokerd_msg *m, int error, void *u)
{
	struct t_reply *r = u;

	r->error = error;
	r->done = true;
	return 0;
}

/* What brokerd counts of this bus's uid's subscriptions. */
static inline uint64_t t_subscriptions_used(brokerd_bus *bus)
{
	struct ctrl_writer w;
	struct ctrl_reply r;
	struct ctrl_reader rd;
	uint32_t n, uid, nq;
	uint64_t used = UINT64_MAX, u, limit;

	CHECK_R(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_QUOTA, 0), 0);
	ctrl_write_u32(&w, getuid());
	CHECK_R(bus_ctrl_call(bus, &w, &r), 0);
	ctrl_writer_deinit(&w);
	ctrl_reader_init(&rd, &r.msg);
	CHECK(ctrl_read_array(&rd, &n) == 0 && n == 1);
	CHECK(ctrl_read_u32(&rd, &uid) == 0 && ctrl_read_array(&rd, &nq) == 0);
	for (uint32_t i = 0; i < nq; i++) {
		const char *q;

		CHECK(ctrl_read_string(&rd, &q, NULL) == 0 && ctrl_read_u64(&rd, &u) == 0 &&
		      ctrl_read_u64(&rd, &limit) == 0);
		if (strcmp(q, "subscriptions") == 0)
			used = u;
	}
	ctrl_reply_done(&r);
	CHECK(used != UINT64_MAX);
	return used;
}

/* --- policy ----------------------------------------------------------------- */

#define T_POLICY_FILE "/etc/brokerd/policy.d/60-client-tests.conf"

static inline int t_reload(void)
{
	brokerd_bus *bus = NULL;
	struct ctrl_writer w;
	struct ctrl_reply r;
	int k;

	k = brokerd_bus_open_system(&bus);
	if (k < 0)
		return k;
	k = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_RELOAD, 0);
	if (k >= 0) {
		k = bus_ctrl_call(bus, &w, &r);
		ctrl_writer_deinit(&w);
		if (k >= 0)
			ctrl_reply_done(&r);
	}
	brokerd_bus_close(bus);
	return k;
}

static inline void t_policy_remove(void)
{
	unlink(T_POLICY_FILE);
	t_reload();
}

/* Installs a policy file for this test and reloads; removed at exit. */
static inline void t_policy(const char *text)
{
	FILE *f;
	int k;

	(void)!system("mkdir -p /etc/brokerd/policy.d");
	f = fopen(T_POLICY_FILE, "we");
	if (!f)
		FAIL("cannot write %s: %m", T_POLICY_FILE);
	fputs(text, f);
	fclose(f);
	t_atexit(t_policy_remove);
	k = t_reload();
	if (k < 0)
		FAIL("policy reload: %s", strerror(-k));
}

#endif
