/* SPDX-License-Identifier: MIT */
/*
 * test-client.h - a minimal synchronous control-protocol client for tests
 * (host tests of the daemon and the guest integration tests). It speaks the
 * wire format directly through protocol/ctrl.h, so it also checks that
 * brokerd and the spec agree, independently of the client library.
 *
 * Two levels: tc_fd_*() on a bare socket (test-flood holds thousands of
 * them), and struct tc, a connection that remembers its serials, its
 * unique name and the signals that came while it waited for a reply.
 */
#ifndef BROKERD_TEST_CLIENT_H
#define BROKERD_TEST_CLIENT_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/ctrl.h"
#include "util/socket.h"
#include "util/test.h"

/* util/test.h's, after what the test printed so far (the log reads in order). */
#define TC_ASSERT(x)            \
	do {                    \
		fflush(stdout); \
		ASSERT(x);      \
	} while (0)
#define TC_ASSERT_EQ(a, b)            \
	do {                          \
		fflush(stdout);       \
		ASSERT_INT(a, ==, b); \
	} while (0)

struct tc_msg {
	uint8_t buf[CTRL_MSG_MAX];
	size_t len;
	int fds[CTRL_FDS_MAX];
	unsigned int n_fds;
	struct ctrl_message m;
	struct ctrl_reader r;
	const char *error_name, *error_message;
};

#define TC_QUEUE_MAX 64

struct tc {
	int fd;
	uint32_t serial;
	char unique[CTRL_UNIQUE_NAME_MAX];
	uint64_t id;
	uint32_t features;
	int inbox_fd;
	struct tc_msg *queue[TC_QUEUE_MAX]; /* signals received while waiting for a reply */
	unsigned int n_queue;
};

/* How long tc_call waits for a reply (activation may take 25 s). */
static int tc_timeout_ms = 10000;

static inline void tc_msg_close_fds(struct tc_msg *m)
{
	for (unsigned int i = 0; i < m->n_fds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->n_fds = 0;
}

/* --- on a bare socket ---------------------------------------------------------- */

/* A process's VmRSS in kB, from /proc/PID/status; -1 if unreadable. */
static inline long tc_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* A request with arguments per sig ('u' uint32_t, 't' uint64_t, 's' const char *; NULL: none). */
/* The pid a pidfd (GET_CREDENTIALS's) refers to, from its fdinfo's "Pid:" line; -1 if unreadable. */
static inline int tc_pidfd_pid(int fd)
{
	char path[64], line[256];
	int pid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "Pid:", 4) == 0)
			pid = atoi(line + 4);
	if (f)
		fclose(f);
	return pid;
}

static inline int tc_fd_vrequest(int fd, int flags, uint16_t op, uint32_t serial, const char *sig, va_list ap)
{
	struct ctrl_writer w;
	const void *d;
	size_t l;
	int r;

	r = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, op, serial);
	if (r < 0)
		return r;
	for (const char *p = sig ? sig : ""; *p; p++) {
		if (*p == 'u')
			ctrl_write_u32(&w, va_arg(ap, uint32_t));
		else if (*p == 't')
			ctrl_write_u64(&w, va_arg(ap, uint64_t));
		else if (*p == 's')
			ctrl_write_string(&w, va_arg(ap, const char *));
	}
	r = ctrl_writer_finish(&w, &d, &l);
	if (r == 0 && send(fd, d, l, flags | MSG_NOSIGNAL) != (ssize_t)l)
		r = -errno;
	ctrl_writer_deinit(&w);
	return r;
}

/* Sends a request (flags as for send(), e.g. MSG_DONTWAIT for a flood): 0 or a negative errno. */
static inline int tc_fd_request(int fd, int flags, uint16_t op, uint32_t serial, const char *sig, ...)
{
	va_list ap;
	int r;

	va_start(ap, sig);
	r = tc_fd_vrequest(fd, flags, op, serial, sig, ap);
	va_end(ap);
	return r;
}

/* Receive one message (any type) on fd. 0, -ETIMEDOUT, -ECONNRESET, -EBADMSG. */
static inline int tc_fd_recv(int fd, struct tc_msg *out, int timeout_ms)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX)];
	} u;
	struct iovec iov = { .iov_base = out->buf, .iov_len = sizeof(out->buf) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u, .msg_controllen = sizeof(u)
	};
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;
	int r;

	r = poll(&p, 1, timeout_ms);
	if (r == 0)
		return -ETIMEDOUT;
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : -errno;
	out->len = (size_t)n;
	out->n_fds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			unsigned int k = (unsigned int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			memcpy(out->fds + out->n_fds, CMSG_DATA(cm), k * sizeof(int));
			out->n_fds += k;
		}
	r = ctrl_message_decode(&out->m, out->buf, out->len, out->n_fds);
	if (r < 0) {
		tc_msg_close_fds(out);
		return -EBADMSG;
	}
	ctrl_reader_init(&out->r, &out->m);
	out->error_name = out->error_message = NULL;
	if (out->m.hdr.type == CTRL_TYPE_ERROR) {
		ctrl_read_string(&out->r, &out->error_name, NULL);
		ctrl_read_string(&out->r, &out->error_message, NULL);
	}
	return 0;
}

/*
 * HELLO with flags and serial on a new connection: 0 when its REPLY came (in
 * *out, unless out is NULL), -EPERM for an ERROR (printed), or what
 * tc_fd_recv() returned. Signals before the answer are skipped.
 */
static inline int tc_fd_hello(int fd, uint32_t flags, uint32_t serial, struct tc_msg *out, int timeout_ms)
{
	struct tc_msg *m = out ? out : malloc(sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	r = tc_fd_request(fd, 0, CTRL_OP_HELLO, serial, "u", flags);
	while (r == 0) {
		r = tc_fd_recv(fd, m, timeout_ms);
		if (r == 0 && m->m.hdr.type == CTRL_TYPE_SIGNAL) {
			tc_msg_close_fds(m);
			continue;
		}
		if (r == 0 && m->m.hdr.type != CTRL_TYPE_REPLY) {
			printf("# HELLO failed: %s: %s\n", m->error_name ? m->error_name : "?",
			       m->error_message ? m->error_message : "");
			r = -EPERM;
		}
		break;
	}
	if (!out) {
		if (r == 0)
			tc_msg_close_fds(m);
		free(m);
	}
	return r;
}

/* --- a connection --------------------------------------------------------------- */

static inline int tc_connect(struct tc *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->inbox_fd = -1;
	c->fd = unix_connect(path, SOCK_SEQPACKET);
	return c->fd < 0 ? c->fd : 0;
}

static inline void tc_close(struct tc *c)
{
	for (unsigned int i = 0; i < c->n_queue; i++) {
		tc_msg_close_fds(c->queue[i]);
		free(c->queue[i]);
	}
	c->n_queue = 0;
	if (c->inbox_fd >= 0)
		close(c->inbox_fd);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static inline int tc_send_raw(struct tc *c, const void *data, size_t len)
{
	return send(c->fd, data, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

/* Receive one message (any type). 0, -ETIMEDOUT, -ECONNRESET, -EBADMSG. */
static inline int tc_recv(struct tc *c, struct tc_msg *out, int timeout_ms)
{
	return tc_fd_recv(c->fd, out, timeout_ms);
}

/* Wait for the reply to serial; signals are queued. Returns 0 (REPLY or ERROR) or negative. */
static inline int tc_wait_reply(struct tc *c, uint32_t serial, struct tc_msg *out, int timeout_ms)
{
	for (;;) {
		int r = tc_recv(c, out, timeout_ms);

		if (r < 0)
			return r;
		if (out->m.hdr.type == CTRL_TYPE_SIGNAL) {
			if (c->n_queue < TC_QUEUE_MAX) {
				struct tc_msg *q = malloc(sizeof(*q));

				memcpy(q, out, sizeof(*q));
				/* re-point the decoded views into the copy */
				ctrl_message_decode(&q->m, q->buf, q->len, q->n_fds);
				ctrl_reader_init(&q->r, &q->m);
				c->queue[c->n_queue++] = q;
			} else {
				tc_msg_close_fds(out);
			}
			continue;
		}
		if (out->m.hdr.serial == serial)
			return 0;
		tc_msg_close_fds(out);
	}
}

/* Next signal with code (0: any), from the queue or the socket. */
static inline int tc_wait_signal(struct tc *c, uint16_t code, struct tc_msg *out, int timeout_ms)
{
	for (unsigned int i = 0; i < c->n_queue; i++) {
		if (code && c->queue[i]->m.hdr.code != code)
			continue;
		memcpy(out, c->queue[i], sizeof(*out));
		ctrl_message_decode(&out->m, out->buf, out->len, out->n_fds);
		ctrl_reader_init(&out->r, &out->m);
		free(c->queue[i]);
		memmove(c->queue + i, c->queue + i + 1, (c->n_queue - i - 1) * sizeof(c->queue[0]));
		c->n_queue--;
		return 0;
	}
	for (;;) {
		int r = tc_recv(c, out, timeout_ms);

		if (r < 0)
			return r;
		if (out->m.hdr.type == CTRL_TYPE_SIGNAL && (!code || out->m.hdr.code == code))
			return 0;
		tc_msg_close_fds(out);
	}
}

/* Send op with arguments per sig (as for tc_fd_request()) and wait for its reply. */
static inline int tc_call(struct tc *c, uint16_t op, struct tc_msg *out, const char *sig, ...)
{
	uint32_t serial = ++c->serial;
	va_list ap;
	int r;

	va_start(ap, sig);
	r = tc_fd_vrequest(c->fd, 0, op, serial, sig, ap);
	va_end(ap);
	if (r < 0)
		return r;
	return tc_wait_reply(c, serial, out, tc_timeout_ms);
}

static inline int tc_hello(struct tc *c, uint32_t flags)
{
	struct tc_msg *m = malloc(sizeof(*m));
	const char *u;
	int r;

	if (!m)
		return -ENOMEM;
	r = tc_fd_hello(c->fd, flags, ++c->serial, m, tc_timeout_ms);
	if (r == 0) {
		ctrl_read_string(&m->r, &u, NULL);
		snprintf(c->unique, sizeof(c->unique), "%s", u);
		ctrl_read_u64(&m->r, &c->id);
		ctrl_read_u32(&m->r, &c->features);
		c->inbox_fd = m->n_fds ? m->fds[0] : -1;
	}
	free(m);
	return r;
}

static inline int tc_connect_hello(struct tc *c, const char *path, uint32_t flags)
{
	int r = tc_connect(c, path);

	return r < 0 ? r : tc_hello(c, flags);
}

/* Expect an ERROR named name; returns its message. */
#define TC_EXPECT_ERROR(msg, name)                                                                    \
	do {                                                                                          \
		if ((msg)->m.hdr.type != CTRL_TYPE_ERROR || strcmp((msg)->error_name, (name)) != 0) { \
			printf("FAIL %s:%d: expected %s, got %s %s %s\n", __FILE__, __LINE__, (name), \
			       ctrl_type_to_string((msg)->m.hdr.type),                                \
			       (msg)->error_name ? (msg)->error_name : "",                            \
			       (msg)->error_message ? (msg)->error_message : "");                     \
			fflush(stdout);                                                               \
			exit(1);                                                                      \
		}                                                                                     \
	} while (0)

#define TC_EXPECT_REPLY(msg)                                                                    \
	do {                                                                                    \
		if ((msg)->m.hdr.type != CTRL_TYPE_REPLY) {                                     \
			printf("FAIL %s:%d: expected a reply, got %s %s\n", __FILE__, __LINE__, \
			       (msg)->error_name ? (msg)->error_name : "?",                     \
			       (msg)->error_message ? (msg)->error_message : "");               \
			fflush(stdout);                                                         \
			exit(1);                                                                \
		}                                                                               \
	} while (0)

static inline uint32_t tc_read_u32(struct tc_msg *m)
{
	uint32_t v = 0;

	TC_ASSERT(ctrl_read_u32(&m->r, &v) == 0);
	return v;
}

static inline const char *tc_read_string(struct tc_msg *m)
{
	const char *s = NULL;

	TC_ASSERT(ctrl_read_string(&m->r, &s, NULL) == 0);
	return s;
}

/* --- a brokerd of the test's own (host mode) ------------------------------------- */

/* Stops it (pid > 0: SIGTERM, then reaped) and removes dir, the temp directory it ran in. */
static inline void tc_daemon_stop(pid_t pid, const char *dir)
{
	char cmd[300];

	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# cannot remove %s\n", dir);
}

#endif
