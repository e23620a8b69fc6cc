/* SPDX-License-Identifier: MIT */
/*
 * conn.c - a control connection's transport (see conn.h).
 *
 * Replies are sent non-blocking; a client that does not read gets its
 * replies queued and its input paused (so a flood costs brokerd one bounded
 * queue per connection), and is disconnected when the queue is full.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/conn.h"
#include "brokerd/log.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "protocol/ctrl.h"
#include "util/macro.h"
#include "util/socket.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* What a connection that does not read may have queued before we give up on it. */
#define CONN_OUT_MAX	   256 /* messages */
#define CONN_OUT_MAX_BYTES (1024 * 1024)
#define CONN_OUT_MAX_FDS   64		       /* capability fds, each a dup brokerd holds */
#define CONN_CLOSING_USEC  (5ULL * 1000000ULL) /* to read why it is closed */

struct out_msg {
	void *data;
	size_t len;
	int fds[CTRL_FDS_MAX];
	unsigned int n_fds;
	struct out_msg *next;
};

const char *conn_name(struct bus_conn *c)
{
	return c->peer ? c->peer->unique_name : "(no hello)";
}

struct bus_conn *conn_of_peer(struct registry_peer *p)
{
	return p && p->kind == REGISTRY_PEER_NATIVE ? p->userdata : NULL;
}

static void out_msg_free(struct out_msg *o)
{
	for (unsigned int i = 0; i < o->n_fds; i++)
		close(o->fds[i]);
	free(o->data);
	free(o);
}

static int conn_sendmsg(struct bus_conn *c, const void *data, size_t len, const int *fds, unsigned int n_fds)
{
	return unix_send_fds(c->fd, data, len, fds, n_fds, MSG_DONTWAIT);
}

/*
 * Give up on a connection from anywhere (also while handling another one):
 * shutdown() makes its fd report EPOLLHUP, and its own handler frees it.
 */
void conn_kill(struct bus_conn *c)
{
	c->dead = true;
	(void)shutdown(c->fd, SHUT_RDWR);
	(void)sd_event_source_set_io_events(c->src, EPOLLIN | EPOLLET);
}

static void conn_update_events(struct bus_conn *c)
{
	/*
	 * Pause input while output is queued: a client that does not read
	 * cannot make us buffer. Edge-triggered (see bus.c, on_conn_io), and
	 * setting the events re-arms the edge: input left unread while
	 * paused is reported again.
	 */
	(void)sd_event_source_set_io_events(c->src, (c->out_head ? EPOLLOUT : EPOLLIN) | EPOLLET);
}

/* Append to the output queue (fds are dup'ed). */
static int out_queue(struct bus_conn *c, const void *data, size_t len, const int *fds, unsigned int n_fds)
{
	struct out_msg *o;

	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->data = malloc(len);
	if (!o->data) {
		free(o);
		return -ENOMEM;
	}
	memcpy(o->data, data, len);
	o->len = len;
	for (unsigned int i = 0; i < n_fds; i++) {
		o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		if (o->fds[i] < 0) {
			int r = -errno;

			o->n_fds = i;
			out_msg_free(o);
			return r;
		}
		o->n_fds = i + 1;
	}
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->out_len++;
	c->out_bytes += len;
	c->out_fds += n_fds;
	conn_update_events(c);
	return 0;
}

static int on_closing_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	conn_kill(userdata);
	return 0;
}

/*
 * c does not read what it gets: drop what is queued and queue only the
 * reason; c is closed once it has read that, or after CONN_CLOSING_USEC.
 * Its requests are no longer read meanwhile, nothing else is sent to it.
 */
static void conn_overflow(struct bus_conn *c)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	const void *data;
	size_t len;

	log_full(
		LOG_WARNING, conn_name(c), c->cred.uid,
		"%s (uid %u, pid %u) does not read its replies: %u messages, %zu bytes, %u fds queued; disconnecting",
		conn_name(c), c->cred.uid, c->cred.pid, c->out_len, c->out_bytes, c->out_fds);
	conn_out_clear(c);
	c->closing = true;
	if (ctrl_writer_init(&w, CTRL_TYPE_ERROR, 0, 0) == 0) {
		ctrl_write_string(&w, CTRL_ERROR_QUOTA_EXCEEDED);
		ctrl_write_string(&w,
				  "output: too many unread replies and signals (limits: 256 messages, 1 MiB, "
				  "64 fds); closing the connection");
		if (ctrl_writer_finish(&w, &data, &len) == 0 && out_queue(c, data, len, NULL, 0) == 0 &&
		    sd_event_add_time_relative(c->bus->event, &c->closing_src, CLOCK_MONOTONIC,
					       CONN_CLOSING_USEC, 0, on_closing_timeout, c) >= 0)
			return;
	}
	conn_kill(c);
}

/* Send a finished writer's message; fds in w are borrowed (the caller closes them). */
int conn_send(struct bus_conn *c, struct ctrl_writer *w)
{
	const void *data;
	size_t len;
	int r;

	if (c->dead || c->closing)
		return 0;
	r = ctrl_writer_finish(w, &data, &len);
	if (r < 0) {
		/* Too large is the caller's to report; anything else is our bug. */
		log_full(r == -EMSGSIZE ? LOG_NOTICE : LOG_ERR, conn_name(c), c->cred.uid,
			 "cannot encode %s for %s: %s", ctrl_type_to_string(w->type), conn_name(c),
			 strerror(-r));
		return r;
	}
	if (!c->out_head) {
		r = conn_sendmsg(c, data, len, w->fds, w->n_fds);
		if (r == 0)
			return 0;
		if (r != -EAGAIN) {
			conn_kill(c); /* EPIPE and friends */
			return r;
		}
	}
	if (c->out_len >= CONN_OUT_MAX || c->out_bytes + len > CONN_OUT_MAX_BYTES ||
	    c->out_fds + w->n_fds > CONN_OUT_MAX_FDS) {
		conn_overflow(c);
		return -ENOBUFS;
	}
	return out_queue(c, data, len, w->fds, w->n_fds);
}

int conn_flush(struct bus_conn *c)
{
	while (c->out_head) {
		struct out_msg *o = c->out_head;
		int r = conn_sendmsg(c, o->data, o->len, o->fds, o->n_fds);

		if (r == -EAGAIN)
			return 0;
		if (r < 0)
			return r;
		c->out_head = o->next;
		if (!c->out_head)
			c->out_tail = NULL;
		BUG_ON(c->out_len == 0);
		c->out_len--;
		c->out_bytes -= o->len;
		c->out_fds -= o->n_fds;
		out_msg_free(o);
	}
	if (c->closing)
		return -ECONNRESET; /* it has read why */
	conn_update_events(c);
	return 0;
}

bool conn_has_room(struct bus_conn *c)
{
	return !c->dead && !c->closing && c->out_len < CONN_OUT_MAX / 2 &&
	       c->out_bytes < CONN_OUT_MAX_BYTES / 2 && c->out_fds < CONN_OUT_MAX_FDS / 2;
}

void conn_out_clear(struct bus_conn *c)
{
	while (c->out_head) {
		struct out_msg *o = c->out_head;

		c->out_head = o->next;
		out_msg_free(o);
	}
	c->out_tail = NULL;
	c->out_len = 0;
	c->out_bytes = 0;
	c->out_fds = 0;
}

int conn_reply_error(struct bus_conn *c, const struct ctrl_message *m, const char *name, const char *fmt, ...)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	char msg[512];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_full(LOG_DEBUG, conn_name(c), c->cred.uid, "%s: %s: %s", m->info ? m->info->name : "?", name,
		 msg);
	r = ctrl_writer_init(&w, CTRL_TYPE_ERROR, ctrl_op_get(m->hdr.code) ? m->hdr.code : 0, m->hdr.serial);
	if (r < 0)
		return r;
	ctrl_write_string(&w, name);
	ctrl_write_string(&w, msg);
	r = conn_send(c, &w);
	return r < 0 && r != -ENOBUFS ? r : 0;
}

int conn_reply_quota(struct bus_conn *c, const struct ctrl_message *m, enum quota_kind k)
{
	struct quota *q = c->bus->quota;
	unsigned long long used = quota_used(q, c->cred.uid, k), limit = quota_limit_uid(q, c->cred.uid, k);

	log_quota(c->peer ? c->peer->unique_name : NULL, c->cred.uid, quota_kind_to_string(k), used, limit);
	return conn_reply_error(c, m, CTRL_ERROR_QUOTA_EXCEEDED, "%s: uid %u uses %llu of %llu",
				quota_kind_to_string(k), c->cred.uid, used, limit);
}

int conn_reply_init(struct ctrl_writer *w, const struct ctrl_message *m)
{
	return ctrl_writer_init(w, CTRL_TYPE_REPLY, m->hdr.code, m->hdr.serial);
}

void conn_signal(struct bus_conn *c, struct ctrl_writer *w)
{
	if (c && !c->dead && c->peer)
		(void)conn_send(c, w);
}

void conn_signal_name(struct bus_conn *c, enum ctrl_signal s, const char *name)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, s, 0) < 0)
		return;
	ctrl_write_string(&w, name);
	conn_signal(c, &w);
}

bool conn_privileged(struct bus_conn *c)
{
	return c->cred.uid == 0 || c->cred.uid == geteuid();
}

bool conn_allowed(struct bus_conn *c, enum policy_action a, const char *name, char *why, size_t why_len)
{
	return policy_check(c->bus->policy, c->cred.uid, c->gids, c->n_gids, a, name, why, why_len);
}

void peer_creds_read(int fd, struct ucred *cred, gid_t **gids, size_t *n_gids, int *pidfd)
{
	socklen_t l = sizeof(*cred);

	*gids = NULL;
	*n_gids = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &l) < 0) {
		cred->uid = (uid_t)-1; /* never matches a rule but "default" */
		cred->gid = (gid_t)-1;
	}
	/* the group list's length is not known before: grow until it fits */
	for (size_t ng = 32; ng <= 65536; ng *= 4) {
		gid_t *g = calloc(ng, sizeof(*g));

		if (!g)
			break;
		l = (socklen_t)(ng * sizeof(*g));
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &l) == 0) {
			*gids = g;
			*n_gids = l / sizeof(*g);
			break;
		}
		free(g);
		if (errno != ERANGE)
			break;
	}
	if (!*gids) {
		/* The groups unknown: at least the primary group, for group rules. */
		*gids = calloc(1, sizeof(gid_t));
		if (*gids) {
			(*gids)[0] = cred->gid;
			*n_gids = 1;
		}
	}
	l = sizeof(*pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, pidfd, &l) < 0)
		*pidfd = -1;
}

void conn_creds_read(struct bus_conn *c)
{
	char label[4096];
	socklen_t l = sizeof(label) - 1;

	peer_creds_read(c->fd, &c->cred, &c->gids, &c->n_gids, &c->pidfd);
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERSEC, label, &l) == 0 && l > 0) {
		label[l] = 0;
		c->label = strdup(label);
	}
}

pid_t conn_pid(struct bus_conn *c)
{
	return conn_pid_running(c->pidfd, c->cred.pid);
}

pid_t conn_pid_running(int pidfd, pid_t pid)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	/*
	 * A pidfd polls readable once its process has exited. Its pid can be
	 * reused only after that (the pidfd does not pin it, but the
	 * process's end is what frees it), so a pid checked here names the
	 * process that connected, not a stranger that got its number.
	 */
	if (pidfd < 0 || poll(&p, 1, 0) != 0)
		return 0;
	return pid;
}
