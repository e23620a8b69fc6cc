/* SPDX-License-Identifier: MIT */
/*
 * dbus-conn.c - D-Bus connections on brokerd's stream socket: accepting
 * (by the native connection limits, admission.c), the SASL handshake,
 * reading whole messages with their fds, writing with a per-connection
 * limit, and routing what clients send: to the driver, to one connection
 * by unique or well-known name, or as a broadcast signal to every
 * connection with a matching rule.
 * Calls are remembered until their reply, so that only the callee can
 * answer a call and a callee that goes away answers NoReply for itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "brokerd/admission.h"
#include "brokerd/bus-state.h"
#include "brokerd/conn.h"
#include "brokerd/dbus-access.h"
#include "brokerd/dbus-bridge.h"
#include "brokerd/dbus-front.h"
#include "brokerd/log.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "util/clock.h"
#include "util/macro.h"
#include "util/socket.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

#define READ_CHUNK (64U * 1024U)
/* fds received and not yet claimed by a message: one message's worth and a bit. */
#define IN_FDS_MAX (2U * DBUS_MESSAGE_FDS_MAX)

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static void out_free(struct dbus_out *o)
{
	if (!o)
		return;
	close_fds(o->fds, o->n_fds);
	free(o->fds);
	free(o->data);
	free(o);
}

/* Everything queued for c, unsent, given up (and given back to its uid's budget). */
static void out_drop(struct dbus_conn *c)
{
	while (c->out_head) {
		struct dbus_out *o = c->out_head;

		c->out_head = o->next;
		c->out_bytes -= o->len - o->pos;
		c->out_fds -= o->n_fds;
		dbus_budget_release(c, o->len - o->pos, o->n_fds);
		out_free(o);
	}
	c->out_tail = NULL;
}

static void conn_update_events(struct dbus_conn *c)
{
	if (c->dead || !c->src)
		return;
	(void)sd_event_source_set_io_events(c->src, (c->paused ? 0 : EPOLLIN) | (c->out_head ? EPOLLOUT : 0));
}

static uint64_t bus_limit(struct dbus_conn *c, enum quota_bus_kind k)
{
	return quota_bus_limit(c->front->bus->quota, k);
}

static void schedule_reap(struct dbus_front *f);

void dbus_conn_kill(struct dbus_conn *c, const char *why)
{
	if (c->dead)
		return;
	log_full(LOG_INFO, c->name, c->cred.uid, "D-Bus connection %s (uid %u) closed: %s", c->name,
		 (unsigned int)c->cred.uid, why);
	c->dead = true;
	c->src = sd_event_source_disable_unref(c->src);
	c->hello_timer = sd_event_source_disable_unref(c->hello_timer);
	schedule_reap(c->front);
}

/* Write what is queued as far as the socket takes it. */
int dbus_conn_flush(struct dbus_conn *c)
{
	while (c->out_head) {
		struct dbus_out *o = c->out_head;
		struct iovec iov = { .iov_base = o->data + o->pos, .iov_len = o->len - o->pos };
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int) * DBUS_MESSAGE_FDS_MAX)];
		} control;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		/* The fds go with the first byte of their message. */
		if (o->pos == 0 && o->n_fds) {
			struct cmsghdr *cm;

			memset(&control, 0, sizeof(control));
			mh.msg_control = &control;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * o->n_fds);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int) * o->n_fds);
			memcpy(CMSG_DATA(cm), o->fds, sizeof(int) * o->n_fds);
		}
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			if (errno == EPIPE || errno == ECONNRESET) {
				/*
				 * The client hung up, but what it sent before
				 * (busctl emit: Hello, a signal, close) is still
				 * in the socket to be read and routed: only the
				 * way back is gone. Reading ends the connection
				 * at end of file.
				 */
				out_drop(c);
				c->write_broken = true;
				conn_update_events(c);
				return -ECONNRESET;
			}
			dbus_conn_kill(c, strerror(errno));
			return -errno;
		}
		if (o->pos == 0 && o->n_fds) {
			close_fds(o->fds, o->n_fds);
			c->out_fds -= o->n_fds;
			dbus_budget_release(c, 0, o->n_fds);
			o->n_fds = 0;
		}
		o->pos += (size_t)n;
		c->out_bytes -= (size_t)n;
		dbus_budget_release(c, (size_t)n, 0);
		if (o->pos < o->len)
			break;
		c->out_head = o->next;
		if (!c->out_head)
			c->out_tail = NULL;
		out_free(o);
	}
	conn_update_events(c);
	return 0;
}

bool dbus_conn_out_room(struct dbus_conn *c, size_t len, unsigned int n_fds, bool bulk, char *why, size_t why_len)
{
	uint64_t max_bytes = bus_limit(c, QUOTA_BUS_MAX_OUTGOING_BYTES);
	uint64_t max_fds = bus_limit(c, QUOTA_BUS_MAX_OUTGOING_FDS);

	/*
	 * What it had waiting before this message counts against its own
	 * limit, so that one message larger than the limit (up to
	 * max_message_size) still passes; its uid's budget takes the message
	 * whole or not at all.
	 */
	if (c->out_bytes > max_bytes || c->out_fds + (uint64_t)n_fds > max_fds)
		snprintf(why, why_len, "%zu bytes and %u fds queued, %u more (max_outgoing_bytes %llu, max_outgoing_unix_fds %llu)",
			 c->out_bytes, c->out_fds, n_fds, (unsigned long long)max_bytes,
			 (unsigned long long)max_fds);
	else if (!dbus_budget_fits(c, len, n_fds, bulk))
		snprintf(why, why_len, "its uid's dbus_bytes or dbus_fds cannot take %zu bytes and %u fds more",
			 len, n_fds);
	else
		return true;
	return false;
}

int dbus_conn_queue(struct dbus_conn *c, void *data, size_t len, int *fds, unsigned int n_fds)
{
	struct dbus_out *o;
	char why[192];

	if (c->dead || c->write_broken) {
		close_fds(fds, n_fds);
		free(fds);
		free(data);
		return -ECONNRESET;
	}
	/*
	 * A reader that does not keep up must not make brokerd hold its
	 * backlog. What is queued here is what it is owed (replies, the
	 * driver's messages) or subscribed to (signals): it is told by its
	 * connection closing, rather than missing some of it unawares. Calls
	 * and unicast signals to it were refused to their senders before
	 * (route_unicast()).
	 */
	if (!dbus_conn_out_room(c, len, n_fds, false, why, sizeof(why))) {
		close_fds(fds, n_fds);
		free(fds);
		free(data);
		if (log_ratelimit_test(&c->front->budget_log))
			log_full(LOG_WARNING, c->name, c->cred.uid, "D-Bus connection %s of uid %u is not read: %s",
				 c->name, (unsigned int)c->cred.uid, why);
		dbus_conn_kill(c, "slow reader: its output is over its limits");
		return -ENOBUFS;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		close_fds(fds, n_fds);
		free(fds);
		free(data);
		return -ENOMEM;
	}
	o->data = data;
	o->len = len;
	o->fds = fds;
	o->n_fds = n_fds;
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->out_bytes += len;
	c->out_fds += n_fds;
	dbus_budget_charge(c, len, n_fds);
	return dbus_conn_flush(c);
}

/* A message from the driver to c, shown to monitors (unless c is one) and, if deliver, queued for c. */
static int send_driver(struct dbus_conn *c, struct dbus_header *h, const void *body, size_t body_len,
		       bool deliver)
{
	void *data;
	size_t len;
	int r;

	if (c->dead)
		return -ECONNRESET;
	h->serial = ++c->front->serial ? c->front->serial : ++c->front->serial;
	h->sender = DBUS_DRIVER_NAME;
	if (!h->destination && c->peer)
		h->destination = c->name;
	r = dbus_message_write(h, body, body_len, &data, &len);
	if (r < 0)
		return r;
	if (c->front->n_monitors && !c->monitor)
		dbus_monitor_driver_message(c->front, data, len);
	if (!deliver) {
		free(data);
		return 0;
	}
	return dbus_conn_queue(c, data, len, NULL, 0);
}

/* An error h (name, reply serial and destination set) with text as its body, as send_driver() sends. */
static void send_driver_error(struct dbus_conn *c, struct dbus_header *h, const char *text, bool deliver)
{
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;

	if (dbus_writer_init(&w, "s") < 0)
		return;
	h->signature = "s";
	dbus_writer_append_basic(&w, 's', text);
	if (dbus_writer_finish(&w, &body, &len) == 0)
		(void)send_driver(c, h, body, len, deliver);
	dbus_writer_deinit(&w);
	free(body);
}

int dbus_conn_send_driver(struct dbus_conn *c, struct dbus_header *h, const void *body, size_t body_len)
{
	return send_driver(c, h, body, body_len, true);
}

int dbus_conn_monitor_driver(struct dbus_conn *c, struct dbus_header *h, const void *body, size_t body_len)
{
	return send_driver(c, h, body, body_len, false);
}

pid_t dbus_conn_pid(struct dbus_conn *c)
{
	struct pollfd p = { .fd = c->pidfd, .events = POLLIN };

	/* As conn_pid(): a pid is reported only while the pidfd says its process runs. */
	if (c->pidfd < 0 || poll(&p, 1, 0) != 0)
		return 0;
	return c->cred.pid;
}

struct dbus_conn *dbus_front_conn_by_name(struct dbus_front *f, const char *name)
{
	struct registry_peer *p = registry_peer_resolve(f->registry, name);
	struct dbus_conn *c = p && p->kind == REGISTRY_PEER_DBUS ? p->userdata : NULL;

	return c && !c->dead ? c : NULL;
}

/* ---- Routing ----------------------------------------------------------------- */

static int *fds_dup(const int *fds, unsigned int n)
{
	int *d;

	if (!n)
		return NULL;
	d = calloc(n, sizeof(int));
	if (!d)
		return NULL;
	for (unsigned int i = 0; i < n; i++) {
		d[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		if (d[i] < 0) {
			close_fds(d, i);
			free(d);
			return NULL;
		}
	}
	return d;
}

/* Deliver a (stamped) message to c, copying it and its fds. */
static int deliver_copy(struct dbus_conn *c, const struct dbus_message *m, const int *fds)
{
	void *data;
	int *d = NULL;

	if (m->h.n_fds && !c->sasl.fds_agreed)
		return -EOPNOTSUPP;
	data = malloc(m->len);
	if (!data)
		return -ENOMEM;
	memcpy(data, m->data, m->len);
	if (m->h.n_fds && !(d = fds_dup(fds, m->h.n_fds))) {
		free(data);
		return -ENOMEM;
	}
	return dbus_conn_queue(c, data, m->len, d, m->h.n_fds);
}

/* Has c a rule that matches mm (eavesdropping: only its eavesdrop='true' rules)? */
static bool conn_matches(struct dbus_front *f, struct dbus_conn *c, const struct dbus_match_message *mm,
			 struct registry_peer *sender_peer, bool eavesdropping)
{
	for (struct dbus_match *x = c->matches; x; x = x->next) {
		struct dbus_match_message m = *mm;

		if (eavesdropping && !x->eavesdrop)
			continue;

		/* A rule's well-known sender matches the messages of its current owner. */
		if (x->rule.sender && x->rule.sender[0] != ':' && strcmp(x->rule.sender, mm->sender) != 0 &&
		    !(mm->sender_name && !strcmp(x->rule.sender, mm->sender_name))) {
			struct registry_peer *owner = registry_name_owner(f->registry, x->rule.sender);

			if (!owner || owner != sender_peer)
				continue;
			m.sender_name = x->rule.sender;
		}
		if (dbus_match_rule_matches(&x->rule, &m))
			return true;
	}
	return false;
}

/* A signal without destination: to every connection with a rule that matches it. */
static void broadcast(struct dbus_front *f, const struct dbus_message *m, const int *fds,
		      struct registry_peer *sender_peer)
{
	dbus_front_broadcast(f, m, fds, sender_peer, NULL);
}

void dbus_front_broadcast(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			  struct registry_peer *sender_peer, const char *sender_name)
{
	struct dbus_match_message mm;

	dbus_match_message_of(&mm, m, sender_name);
	for (struct dbus_conn *c = f->conns; c; c = c->next) {
		if (c->dead || !c->peer || !c->matches || !conn_matches(f, c, &mm, sender_peer, false) ||
		    !dbus_access_broadcast(f, sender_peer, c, m))
			continue;
		/* A native name's signals: to those its receive policy allows, as for native subscribers. */
		if (sender_name && !policy_check(f->bus->policy, c->cred.uid, c->gids, c->n_gids, POLICY_RECEIVE,
						 sender_name, NULL, 0))
			continue;
		(void)deliver_copy(c, m, fds);
	}
}

/*
 * The driver's signal h to dest, which dest's receive rules refuse: as on
 * dbus-daemon, monitors see it and then the AccessDenied the driver
 * answers itself with; dest gets neither.
 */
static void driver_refused(struct dbus_conn *dest, struct dbus_header *h, const void *body, size_t body_len,
			   const char *text)
{
	struct dbus_header e = {
		.type = DBUS_MESSAGE_ERROR,
		.error_name = "org.freedesktop.DBus.Error.AccessDenied",
		.destination = DBUS_DRIVER_NAME,
	};

	if (send_driver(dest, h, body, body_len, false) < 0)
		return;
	e.reply_serial = h->serial;
	send_driver_error(dest, &e, text, false);
}

void dbus_front_driver_signal(struct dbus_front *f, struct dbus_conn *dest, const char *member,
			      const char *signature, const void *body, size_t body_len)
{
	struct dbus_header h = {
		.type = DBUS_MESSAGE_SIGNAL,
		.path = DBUS_DRIVER_PATH,
		.interface = DBUS_DRIVER_INTERFACE,
		.member = member,
		.signature = signature,
		.sender = DBUS_DRIVER_NAME,
	};
	struct dbus_message m;
	void *data;
	size_t len;

	if (dest) {
		char text[1024];

		h.destination = dest->name;
		if (dbus_access_driver_signal(dest, &h, text, sizeof(text)))
			(void)dbus_conn_send_driver(dest, &h, body, body_len);
		else if (f->n_monitors)
			driver_refused(dest, &h, body, body_len, text);
		return;
	}
	h.serial = ++f->serial ? f->serial : ++f->serial;
	if (dbus_message_write(&h, body, body_len, &data, &len) < 0)
		return;
	if (dbus_message_parse(&m, data, len, 0) == 0) {
		broadcast(f, &m, NULL, NULL);
		dbus_monitor_message(f, &m, NULL);
	}
	dbus_message_deinit(&m);
}

static struct dbus_reply *reply_find(struct dbus_front *f, struct dbus_conn *caller, struct dbus_conn *callee,
				     uint32_t serial)
{
	for (struct dbus_reply *r = f->replies; r; r = r->next)
		if (r->caller == caller && r->callee == callee && r->serial == serial)
			return r;
	return NULL;
}

static void reply_unlink(struct dbus_front *f, struct dbus_reply *rep)
{
	if (rep->prev)
		rep->prev->next = rep->next;
	else
		f->replies = rep->next;
	if (rep->next)
		rep->next->prev = rep->prev;
	else
		f->replies_tail = rep->prev;
	rep->caller->n_replies--;
}

/* The driver's NoReply to the call serial of c. */
static void send_no_reply(struct dbus_conn *c, uint32_t serial, const char *text)
{
	struct dbus_header h = {
		.type = DBUS_MESSAGE_ERROR,
		.error_name = "org.freedesktop.DBus.Error.NoReply",
		.reply_serial = serial,
	};

	send_driver_error(c, &h, text, true);
}

static int on_reply_timeout(sd_event_source *s, uint64_t usec, void *userdata);

/*
 * Keep the one reply timer at or before the first deadline. Entries only
 * leave or come after the first without it, so it may fire early (and find
 * nothing due), never late.
 */
static int reply_timer_arm(struct dbus_front *f)
{
	struct dbus_reply *first = f->replies;

	if (!first || first->deadline == UINT64_MAX)
		return 0;
	if (!f->reply_timer)
		return sd_event_add_time(f->event, &f->reply_timer, CLOCK_MONOTONIC, first->deadline, 1000ULL,
					 on_reply_timeout, f);
	if (sd_event_source_set_time(f->reply_timer, first->deadline) < 0)
		return -EIO;
	return sd_event_source_set_enabled(f->reply_timer, SD_EVENT_ONESHOT);
}

/* In deadline order (rep->deadline set); from the end, where a call made now almost always goes. */
static int reply_insert_at(struct dbus_front *f, struct dbus_reply *rep)
{
	struct dbus_reply *after = f->replies_tail;

	while (after && after->deadline > rep->deadline)
		after = after->prev;
	rep->prev = after;
	rep->next = after ? after->next : f->replies;
	if (rep->next)
		rep->next->prev = rep;
	else
		f->replies_tail = rep;
	if (after)
		after->next = rep;
	else
		f->replies = rep;
	rep->caller->n_replies++;
	return after ? 0 : reply_timer_arm(f);
}

static int reply_insert(struct dbus_front *f, struct dbus_reply *rep)
{
	uint64_t ms = quota_bus_limit(f->bus->quota, QUOTA_BUS_REPLY_TIMEOUT_MS);

	rep->deadline = ms == 0 || ms > UINT64_MAX / 2 / 1000ULL ? UINT64_MAX : now_usec() + ms * 1000ULL;
	return reply_insert_at(f, rep);
}

int dbus_front_reply_restore(struct dbus_front *f, struct dbus_conn *caller, struct dbus_conn *callee,
			     uint32_t serial, uint64_t deadline)
{
	struct dbus_reply *rep = calloc(1, sizeof(*rep));
	int r;

	if (!rep)
		return -ENOMEM;
	*rep = (struct dbus_reply){ .caller = caller, .callee = callee, .serial = serial, .deadline = deadline };
	r = reply_insert_at(f, rep);
	if (r < 0) {
		reply_unlink(f, rep);
		free(rep);
	}
	return r;
}

/* dbus-daemon's words for a call timed out: libdbus's tests compare them */
static const char timed_out[] = "Message did not receive a reply (timeout by message bus)";

/* reply_timeout_ms passed: the caller gets NoReply, a reply coming later is unsolicited. */
static int on_reply_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct dbus_front *f = userdata;
	uint64_t now = now_usec();

	(void)s;
	(void)usec;
	while (f->replies && f->replies->deadline <= now) {
		struct dbus_reply *rep = f->replies;

		reply_unlink(f, rep);
		log_full(LOG_DEBUG, rep->caller->name, rep->caller->cred.uid,
			 "call from %s to %s (serial %u) timed out", rep->caller->name, rep->callee->name,
			 rep->serial);
		if (!rep->caller->dead)
			send_no_reply(rep->caller, rep->serial, timed_out);
		free(rep);
	}
	if (reply_timer_arm(f) < 0)
		log_error("cannot arm the D-Bus reply timer: calls may wait past reply_timeout_ms");
	return 0;
}

/* Answer a call from the driver with an error, naming why it went nowhere. */
static void refuse(struct dbus_conn *c, const struct dbus_message *m, const char *error, const char *fmt,
		   const char *arg)
{
	char text[512];

	snprintf(text, sizeof(text), fmt, arg);
	(void)dbus_driver_reply_error(c, m, error, text);
}

bool dbus_conn_replies_full(struct dbus_conn *c, const struct dbus_message *m)
{
	uint64_t max = quota_bus_limit(c->front->bus->quota, QUOTA_BUS_MAX_REPLIES);
	char text[128];

	if (m->h.type != DBUS_MESSAGE_METHOD_CALL || (m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED) ||
	    c->n_replies < max)
		return false;
	snprintf(text, sizeof(text), "Too many calls waiting for a reply (max_replies_per_connection %llu)",
		 (unsigned long long)max);
	(void)dbus_driver_reply_error(c, m, "org.freedesktop.DBus.Error.LimitsExceeded", text);
	return true;
}

void dbus_front_eavesdrop(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			  struct registry_peer *sender, struct dbus_conn *recipient, bool lossy)
{
	struct dbus_match_message mm;
	char why[192];

	if (!f->n_eavesdrop)
		return;
	dbus_match_message_of(&mm, m, NULL);
	for (struct dbus_conn *e = f->conns; e; e = e->next) {
		if (e == recipient || e->dead || !e->peer || e->monitor || !conn_matches(f, e, &mm, sender, true) ||
		    !dbus_access_eavesdrop(f, sender, e, m))
			continue;
		if (lossy && !dbus_conn_out_room(e, m->len, m->h.n_fds, true, why, sizeof(why)))
			continue;
		(void)deliver_copy(e, m, fds);
	}
}

/* Route to one connection; *fds is taken when the message is queued. */
static int route_unicast(struct dbus_conn *c, struct dbus_message *m, int **fds)
{
	struct dbus_front *f = c->front;
	const char *dest = m->h.destination;
	struct dbus_conn *t = dbus_front_conn_by_name(f, dest);
	struct dbus_reply *rep;
	char text[192];

	if (!t) {
		struct registry_peer *p = registry_peer_resolve(f->registry, dest);

		if (p && p->kind == REGISTRY_PEER_NATIVE)
			return dbus_bridge_route(c, m, *fds); /* a native client's */
		else if (dbus_activation_queue(c, m, fds) == 0)
			refuse(c, m, "org.freedesktop.DBus.Error.ServiceUnknown", "The name %s has no owner",
			       dest);
		return 0;
	}
	if (!dbus_access_unicast(c, t, m))
		return 0;
	if (m->h.n_fds && !t->sasl.fds_agreed) {
		refuse(c, m, "org.freedesktop.DBus.Error.NotSupported", "%s does not accept file descriptors",
		       dest);
		return 0;
	}
	/*
	 * As dbus-daemon: a call or signal that t's queue cannot take goes
	 * back to its sender as LimitsExceeded; t stays connected. A reply
	 * is owed to t, and is queued or closes t (dbus_conn_queue()).
	 */
	if ((m->h.type == DBUS_MESSAGE_METHOD_CALL || m->h.type == DBUS_MESSAGE_SIGNAL) &&
	    !dbus_conn_out_room(t, m->len, m->h.n_fds, true, text, sizeof(text))) {
		f->full_refused++;
		log_full(LOG_DEBUG, c->name, c->cred.uid, "message from %s to %s refused: %s", c->name, t->name,
			 text);
		/* dbus-daemon's words */
		refuse(c, m, "org.freedesktop.DBus.Error.LimitsExceeded",
		       "Rejected: destination %s has a full message queue", dest);
		return 0;
	}

	switch (m->h.type) {
	case DBUS_MESSAGE_METHOD_CALL:
		if (m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED)
			break;
		if (dbus_conn_replies_full(c, m))
			return 0;
		rep = calloc(1, sizeof(*rep));
		if (!rep)
			return -ENOMEM;
		rep->caller = c;
		rep->callee = t;
		rep->serial = m->h.serial;
		if (reply_insert(f, rep) < 0) {
			reply_unlink(f, rep);
			free(rep);
			return -ENOMEM;
		}
		break;
	case DBUS_MESSAGE_METHOD_RETURN:
	case DBUS_MESSAGE_ERROR:
		rep = reply_find(f, t, c, m->h.reply_serial);
		if (!rep) {
			/* Nobody asked c for this: a forged or late reply. */
			f->unsolicited++;
			log_full(LOG_DEBUG, c->name, c->cred.uid,
				 "unsolicited reply from %s to %s (serial %u) refused", c->name, t->name,
				 m->h.reply_serial);
			return 0;
		}
		reply_unlink(f, rep);
		free(rep);
		break;
	}
	dbus_front_eavesdrop(f, m, *fds, c->peer, t, false);
	/* Queued or, if t cannot take it, freed by dbus_conn_queue(): either way not ours any more. */
	(void)dbus_conn_queue(t, TAKE_PTR(m->data), m->len, TAKE_PTR(*fds), m->h.n_fds);
	return 0;
}

int dbus_conn_route(struct dbus_conn *c, struct dbus_message *m, int **fds)
{
	return route_unicast(c, m, fds);
}

/* A whole message from c with its fds (taken). Returns <0 to drop c. */
static int conn_dispatch(struct dbus_conn *c, struct dbus_message *m, int *fds)
{
	bool to_driver = !m->h.destination || !strcmp(m->h.destination, DBUS_DRIVER_NAME);
	int r = 0;

	if (!c->peer &&
	    !(to_driver && m->h.type == DBUS_MESSAGE_METHOD_CALL && !strcmp(m->h.member, "Hello"))) {
		dbus_conn_kill(c, "a message before Hello");
		r = -EPROTO;
		goto out;
	}
	if (c->peer) {
		r = dbus_message_stamp(m, c->name);
		if (r < 0) {
			dbus_conn_kill(c, "cannot stamp the sender");
			goto out;
		}
		/*
		 * What the message makes the bus send at once, monitors see
		 * before it, as dbus-daemon shows them: the errors an
		 * ActivationFailure gives, the ActivationRequest a message to
		 * an activatable name causes.
		 */
		if (m->h.destination && to_driver && m->h.type == DBUS_MESSAGE_SIGNAL)
			dbus_activation_signal(c, m); /* systemd's ActivationFailure */
		else if (c->front->n_monitors)
			dbus_activation_before_monitors(c, m);
		if (c->front->n_monitors)
			dbus_monitor_message(c->front, m, fds);
		dbus_monitor_channel_copy(c, m, fds); /* for native monitors */
	} else if (c->front->n_monitors && dbus_message_stamp(m, ":not.active.yet") == 0) {
		/* Its Hello, from the sender dbus-daemon shows for a connection without a name yet. */
		dbus_monitor_message(c->front, m, fds);
	}
	if (!m->h.destination && m->h.type == DBUS_MESSAGE_SIGNAL) {
		broadcast(c->front, m, fds, c->peer);
		dbus_bridge_signal(c, m, fds); /* native subscribers of its names */
		goto out;
	}
	if (to_driver) {
		if (!dbus_access_driver(c, m))
			goto out;
		/* Replies to the driver: it never calls anybody, so they answer nothing. */
		if (m->h.type == DBUS_MESSAGE_METHOD_CALL)
			r = dbus_driver_dispatch(c, m);
		goto out;
	}
	r = route_unicast(c, m, &fds);
out:
	if (fds)
		close_fds(fds, m->h.n_fds);
	free(fds);
	return r;
}

/* ---- Input ------------------------------------------------------------------- */

/*
 * The input buffer: a chunk to read into, or the whole of a message whose
 * header came. The whole is charged to the uid before any more of it is
 * read, so that a message begun can always be finished (connections of a
 * uid that each hold part of a message cannot wait on each other), and a
 * message announced costs its sender's budget, whether its bytes come or
 * not. The pages of a large buffer are touched only as its bytes come.
 */
static size_t in_need(struct dbus_conn *c)
{
	size_t size;

	if (c->sasl.state == DBUS_SASL_DONE && dbus_message_frame_size(c->in, c->in_len, &size) == 0 &&
	    size > READ_CHUNK)
		return size;
	return READ_CHUNK;
}

/* fds a read may bring: the uid must have room for them before c is read. */
static unsigned int in_fds_need(struct dbus_conn *c)
{
	return c->sasl.fds_agreed ? DBUS_MESSAGE_FDS_MAX : 0;
}

/* A large message is bulk; a chunk for small ones may use the whole budget. */
bool dbus_conn_input_fits(struct dbus_conn *c)
{
	size_t need = in_need(c);

	return dbus_budget_fits(c, need > c->in_cap ? need - c->in_cap : 0, in_fds_need(c), need > READ_CHUNK);
}

void dbus_conn_input_resume(struct dbus_conn *c)
{
	if (c->dead || !c->src)
		return;
	(void)sd_event_source_set_enabled(c->src, SD_EVENT_ON);
	conn_update_events(c);
}

static void in_pause(struct dbus_conn *c)
{
	dbus_budget_pause(c);
	conn_update_events(c);
}

/* Room for the next read; false: c was paused or killed. */
static bool in_room(struct dbus_conn *c)
{
	size_t need = in_need(c);
	uint8_t *p;

	if (!dbus_conn_input_fits(c)) {
		in_pause(c);
		return false;
	}
	if (need > c->in_cap) {
		p = realloc(c->in, need);
		if (!p) {
			dbus_conn_kill(c, "out of memory");
			return false;
		}
		dbus_budget_charge(c, need - c->in_cap, 0);
		c->in = p;
		c->in_cap = need;
	}
	if (c->in_len >= c->in_cap) {
		dbus_conn_kill(c, "input too long");
		return false;
	}
	return true;
}

/* Nothing left to hold beyond what the next read needs: an empty connection holds no buffer. */
static void in_shrink(struct dbus_conn *c)
{
	uint8_t *p;

	if (!c->in_len) {
		free(c->in);
		c->in = NULL;
		dbus_budget_release(c, c->in_cap, 0);
		c->in_cap = 0;
	} else if (c->in_cap > READ_CHUNK && in_need(c) <= READ_CHUNK && c->in_len <= READ_CHUNK &&
		   (p = realloc(c->in, READ_CHUNK))) {
		c->in = p;
		dbus_budget_release(c, c->in_cap - READ_CHUNK, 0);
		c->in_cap = READ_CHUNK;
	}
}

static void in_consume(struct dbus_conn *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

/* The first n fds received are a message's now, or closed: no longer held for c. */
static void in_fds_drop(struct dbus_conn *c, size_t n)
{
	memmove(c->in_fds, c->in_fds + n, (c->n_in_fds - n) * sizeof(int));
	c->n_in_fds -= n;
	dbus_budget_release(c, 0, (unsigned int)n);
}

/* Handle what is buffered: SASL lines, then whole messages. */
static void conn_process(struct dbus_conn *c)
{
	while (!c->dead && c->sasl.state != DBUS_SASL_DONE && c->in_len) {
		char out[DBUS_SASL_REPLY_MAX * (DBUS_SASL_COMMANDS_MAX + 1)];
		size_t consumed, out_len = 0;
		int r = dbus_sasl_feed(&c->sasl, c->in, c->in_len, &consumed, out, sizeof(out), &out_len);

		in_consume(c, consumed);
		if (out_len) {
			void *d = malloc(out_len);

			if (d) {
				memcpy(d, out, out_len);
				(void)dbus_conn_queue(c, d, out_len, NULL, 0);
			}
		}
		if (r < 0) {
			dbus_conn_kill(c, r == -EPROTO	 ? "authentication protocol violated" :
					  r == -EMSGSIZE ? "authentication line too long" :
							   "authentication failed");
			return;
		}
		if (r == 0)
			return;
	}
	while (!c->dead && c->sasl.state == DBUS_SASL_DONE) {
		struct dbus_message m;
		size_t size;
		uint8_t *data;
		int *fds = NULL;
		int r = dbus_message_frame_size(c->in, c->in_len, &size);

		if (r == -EAGAIN)
			return;
		if (r < 0) {
			dbus_conn_kill(c, "invalid message header");
			return;
		}
		if (size > bus_limit(c, QUOTA_BUS_MAX_MESSAGE_SIZE)) {
			dbus_conn_kill(c, "message over max_message_size");
			return;
		}
		/* It would wait for room forever. */
		if ((size > READ_CHUNK && size > dbus_budget_limit(c, true)) ||
		    (c->cred.uid != 0 && size > bus_limit(c, QUOTA_BUS_MAX_DBUS_BYTES))) {
			dbus_conn_kill(c, "message over its uid's dbus_bytes");
			return;
		}
		if (c->in_len < size)
			return;
		if (c->in_len == size && c->in_cap > READ_CHUNK) {
			/* a large message alone in its buffer: handed on, not copied */
			data = TAKE_PTR(c->in);
			dbus_budget_release(c, c->in_cap, 0);
			c->in_len = c->in_cap = 0;
		} else {
			data = malloc(size);
			if (!data) {
				dbus_conn_kill(c, "out of memory");
				return;
			}
			memcpy(data, c->in, size);
			in_consume(c, size);
		}
		if (dbus_message_parse(&m, data, size, (uint32_t)c->n_in_fds) < 0) {
			dbus_message_deinit(&m);
			dbus_conn_kill(c, "invalid message");
			return;
		}
		/* This message's fds are the first that came; any others with it are strays. */
		if (m.h.n_fds) {
			fds = calloc(m.h.n_fds, sizeof(int));
			if (!fds) {
				dbus_message_deinit(&m);
				dbus_conn_kill(c, "out of memory");
				return;
			}
			memcpy(fds, c->in_fds, m.h.n_fds * sizeof(int));
			in_fds_drop(c, m.h.n_fds);
		}
		if (!c->in_len && c->n_in_fds) {
			close_fds(c->in_fds, c->n_in_fds);
			in_fds_drop(c, c->n_in_fds);
		}
		(void)conn_dispatch(c, &m, fds);
		dbus_message_deinit(&m);
	}
}

static void conn_read(struct dbus_conn *c)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * DBUS_MESSAGE_FDS_MAX)];
	} control;
	struct iovec iov;
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control)
	};
	uint64_t in_fds_max = bus_limit(c, QUOTA_BUS_MAX_INCOMING_FDS);
	ssize_t n;

	if (!in_room(c))
		return;
	iov.iov_base = c->in + c->in_len;
	iov.iov_len = c->in_cap - c->in_len;
	n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			dbus_conn_kill(c, strerror(errno));
		in_shrink(c);
		return;
	}
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;
		int *got;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		got = (int *)CMSG_DATA(cm);
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		/* Without NEGOTIATE_UNIX_FD, or too many: closed, never passed on. */
		if (!c->sasl.fds_agreed || c->n_in_fds + k > IN_FDS_MAX || c->n_in_fds + k > in_fds_max) {
			close_fds(got, k);
			continue;
		}
		if (!c->in_fds)
			c->in_fds = calloc(IN_FDS_MAX, sizeof(int));
		if (!c->in_fds) {
			close_fds(got, k);
			continue;
		}
		memcpy(c->in_fds + c->n_in_fds, got, k * sizeof(int));
		c->n_in_fds += k;
		dbus_budget_charge(c, 0, (unsigned int)k); /* in_room() saw room for them */
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		dbus_conn_kill(c, "too many fds in one message");
		return;
	}
	if (n == 0) {
		dbus_conn_kill(c, "disconnected");
		return;
	}
	c->in_len += (size_t)n;
	conn_process(c);
	if (!c->dead)
		in_shrink(c);
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct dbus_conn *c = userdata;

	if (revents & EPOLLOUT)
		(void)dbus_conn_flush(c);
	if (!c->dead && c->paused && (revents & (EPOLLHUP | EPOLLERR)))
		/* not read meanwhile: its hang-up would come back at every turn of the loop */
		(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
	else if (!c->dead && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_read(c);
	return 0;
}

static int on_hello_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct dbus_conn *c = userdata;

	c->hello_timer = sd_event_source_disable_unref(c->hello_timer);
	if (!c->peer)
		dbus_conn_kill(c, "no Hello in time");
	return 0;
}

/* ---- Connections ------------------------------------------------------------- */

static void conn_free(struct dbus_conn *c)
{
	struct dbus_front *f = c->front;

	while (c->out_head) {
		struct dbus_out *o = c->out_head;

		c->out_head = o->next;
		out_free(o);
	}
	while (c->matches) {
		struct dbus_match *x = c->matches;

		c->matches = x->next;
		if (x->eavesdrop)
			c->front->n_eavesdrop--;
		dbus_match_rule_deinit(&x->rule);
		free(x->text);
		free(x);
	}
	close_fds(c->in_fds, c->n_in_fds);
	free(c->in_fds);
	free(c->in);
	dbus_budget_conn_gone(c);
	free(c->gids);
	if (c->pidfd >= 0)
		close(c->pidfd);
	sd_event_source_disable_unref(c->src);
	sd_event_source_disable_unref(c->hello_timer);
	if (c->fd >= 0)
		close(c->fd);
	if (c->charged)
		admission_uncount(f->bus, c->cred.uid);
	if (c->refused)
		f->n_refused--;
	free(c->refused);
	if (c->prev)
		c->prev->next = c->next;
	else
		f->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
}

/* A dead connection leaves: calls waiting on it fail with NoReply, its names go. */
static void conn_gone(struct dbus_conn *c)
{
	struct dbus_front *f = c->front;

	for (struct dbus_reply *rep = f->replies, *next; rep; rep = next) {
		next = rep->next;
		if (rep->caller != c && rep->callee != c)
			continue;
		reply_unlink(f, rep);
		if (rep->callee == c && !rep->caller->dead)
			/* dbus-daemon's words: libdbus's tests compare them */
			send_no_reply(rep->caller, rep->serial,
				      "Message recipient disconnected from message bus without replying");
		free(rep);
	}
	dbus_bridge_conn_gone(c);
	if (c->monitor)
		f->n_monitors--;
	dbus_monitor_native_conn_gone(c);
	dbus_monitor_channel_conn_gone(c);
	if (c->peer)
		dbus_driver_conn_gone(c);
}

void dbus_front_reap(struct dbus_front *f)
{
	bool again = true;

	/* Leaving may make others leave (a slow reader of NameOwnerChanged): until none is left. */
	while (again) {
		again = false;
		for (struct dbus_conn *c = f->conns, *next; c; c = next) {
			next = c->next;
			if (!c->dead)
				continue;
			conn_gone(c);
			conn_free(c);
			again = true;
			break;
		}
	}
}

static int on_reap(sd_event_source *s, void *userdata)
{
	dbus_front_reap(userdata);
	return 0;
}

/*
 * Fails once the loop has ended (brokerd is stopping and dbus_front_free()
 * frees every connection itself, killing some on the way when the
 * NameOwnerChanged of a departing one cannot be written): nothing to do then.
 */
static void schedule_reap(struct dbus_front *f)
{
	sd_event_source *s = NULL;

	if (sd_event_add_defer(f->event, &s, on_reap, f) < 0)
		return;
	(void)sd_event_source_set_floating(s, true);
	sd_event_source_unref(s);
}

/*
 * A connection on socket cfd (taken), counted against its uid's quota; one
 * over it comes back with refused set (its Hello is refused), or dead (and
 * is reaped) when too many are. NULL: out of memory, cfd closed.
 */
static struct dbus_conn *conn_new(struct dbus_front *f, int cfd)
{
	struct dbus_conn *c = calloc(1, sizeof(*c));
	char why[160];

	if (!c) {
		close(cfd);
		return NULL;
	}
	c->front = f;
	c->fd = cfd;
	c->pidfd = -1;
	c->name = "(no hello)";
	peer_creds_read(c->fd, &c->cred, &c->gids, &c->n_gids, &c->pidfd);
	/* D-Bus policy takes every group, the primary one included, also without supplementary ones */
	if (c->gids && !c->n_gids) {
		c->gids[0] = c->cred.gid;
		c->n_gids = 1;
	}
	c->next = f->conns;
	if (f->conns)
		f->conns->prev = c;
	f->conns = c;
	/*
	 * The limits of native connections: the uid's quota, the bus-wide cap
	 * and its reserve. As dbus-daemon, a client over one learns it from
	 * its Hello (LimitsExceeded); a few such connections at a time, until
	 * their Hello deadline, the others are closed at once.
	 */
	if (admission_count(f->bus, c->cred.uid, why, sizeof(why)) < 0) {
		log_full(LOG_DEBUG, NULL, c->cred.uid, "D-Bus connection of uid %u refused: %s",
			 (unsigned int)c->cred.uid, why);
		if (f->n_refused >= DBUS_REFUSED_MAX || !(c->refused = strdup(why))) {
			c->dead = true;
			schedule_reap(f);
			return c;
		}
		f->n_refused++;
		return c;
	}
	c->charged = true;
	return c;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct dbus_front *f = userdata;
	struct dbus_conn *c;
	int cfd;

	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0)
		return 0;
	c = conn_new(f, cfd);
	if (!c || c->dead)
		return 0;
	dbus_sasl_init(&c->sasl, c->cred.uid, true, f->guid);
	if (sd_event_add_io(f->event, &c->src, cfd, EPOLLIN, on_conn_io, c) < 0 ||
	    /* Authentication and Hello within the native HELLO deadline: it holds a quota slot meanwhile. */
	    sd_event_add_time_relative(f->event, &c->hello_timer, CLOCK_MONOTONIC,
				       quota_bus_limit(f->bus->quota, QUOTA_BUS_HELLO_TIMEOUT_MS) * 1000ULL,
				       0, on_hello_timeout, c) < 0) {
		dbus_conn_kill(c, "out of memory");
		return 0;
	}
	log_full(LOG_DEBUG, NULL, c->cred.uid, "D-Bus connection from uid %u pid %d",
		 (unsigned int)c->cred.uid, (int)c->cred.pid);
	return 0;
}

int dbus_conn_adopt(struct dbus_front *f, int fd, bool fds_agreed, struct dbus_conn **ret)
{
	struct dbus_conn *c = conn_new(f, fd);

	if (!c)
		return -ENOMEM;
	*ret = c;
	if (c->dead)
		return 0;
	if (c->refused) { /* its Hello was long ago: it cannot be told why any more */
		dbus_conn_kill(c, c->refused);
		return 0;
	}
	/* authenticated before: what SASL agreed on is all that is left of it */
	dbus_sasl_init(&c->sasl, c->cred.uid, true, f->guid);
	c->sasl.state = DBUS_SASL_DONE;
	c->sasl.fds_agreed = fds_agreed;
	if (sd_event_add_io(f->event, &c->src, fd, EPOLLIN, on_conn_io, c) < 0) {
		dbus_conn_kill(c, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* ---- The front end ----------------------------------------------------------- */

int dbus_front_new(struct dbus_front **ret, struct bus *bus, sd_event *event)
{
	struct dbus_front *f;
	uint8_t id[16];
	int r;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->bus = bus;
	f->event = sd_event_ref(event);
	f->listen_fd = -1;
	dbus_budget_init(f);
	/* One bus: D-Bus connections are peers of the native registry, their names in its queues. */
	f->registry = bus->registry;
	/* The bus id (GetId, the SASL OK line): new for every brokerd, as dbus-daemon's. */
	if (getrandom(id, sizeof(id), 0) != sizeof(id)) {
		dbus_front_free(f);
		return -EIO;
	}
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(f->guid + 2 * i, 3, "%02x", id[i]);
	bus->dbus_front = f;
	bus->dbus_peer_creds = dbus_driver_peer_creds;
	bus->dbus_owner_changed = dbus_driver_owner_changed;
	bus->dbus_reloaded = dbus_monitor_native_reloaded;
	r = dbus_activation_init(f);
	if (r >= 0)
		r = dbus_bridge_new(&f->bridge, f);
	if (r < 0) {
		dbus_front_free(f);
		return r;
	}
	r = dbus_monitor_channel_new(f);
	if (r < 0)
		log_warning("native monitors will not see messages between D-Bus clients: %s", strerror(-r));
	*ret = f;
	return 0;
}

struct dbus_front *dbus_front_free(struct dbus_front *f)
{
	if (!f)
		return NULL;
	while (f->replies) {
		struct dbus_reply *rep = f->replies;

		f->replies = rep->next;
		free(rep);
	}
	f->replies_tail = NULL;
	f->reply_timer = sd_event_source_disable_unref(f->reply_timer);
	/*
	 * Stopping: every client sees its connection close, as dbus-daemon's
	 * do, and no NameLost or NameOwnerChanged for the names that go with
	 * the others first (GLib's name owners take a NameLost for a
	 * refusal by a bus that is still there).
	 */
	for (struct dbus_conn *c = f->conns; c; c = c->next)
		c->dead = true;
	dbus_monitor_native_stop(f);
	dbus_monitor_channel_free(f);
	f->bridge = dbus_bridge_free(f->bridge);
	if (f->bus->dbus_front == f) {
		f->bus->dbus_front = NULL;
		f->bus->dbus_peer_creds = NULL;
		f->bus->dbus_owner_changed = NULL;
		f->bus->dbus_reloaded = NULL;
	}
	while (f->conns) {
		struct dbus_conn *c = f->conns;

		if (c->peer)
			registry_peer_remove(f->registry, c->peer);
		c->peer = NULL;
		c->dead = true;
		conn_free(c);
	}
	dbus_activation_free(f);
	dbus_budget_deinit(f);
	sd_event_source_disable_unref(f->listen_src);
	if (f->listen_fd >= 0)
		close(f->listen_fd);
	sd_event_unref(f->event);
	free(f);
	return NULL;
}

int dbus_front_listen(struct dbus_front *f, int fd)
{
	int r;

	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_error("the D-Bus socket is not a listening AF_UNIX SOCK_STREAM socket");
		close(fd);
		return -EINVAL;
	}
	f->listen_fd = fd;
	r = sd_event_add_io(f->event, &f->listen_src, fd, EPOLLIN, on_accept, f);
	return r < 0 ? r : 0;
}

int dbus_front_listen_address(struct dbus_front *f, const char *address)
{
	const char *path;
	int fd;

	/* Only what a local bus needs; abstract sockets, tcp and guids are not offered. */
	if (strncmp(address, "unix:path=", 10) != 0 || !address[10] || strchr(address + 10, ',')) {
		log_error("unsupported D-Bus address '%s' (only unix:path=PATH)", address);
		return -EINVAL;
	}
	path = address + 10;
	(void)unlink(path);
	fd = unix_listen(path, SOCK_STREAM | SOCK_NONBLOCK, SOMAXCONN);
	if (fd < 0 || chmod(path, 0666) < 0) {
		log_error("cannot listen on %s: %s", path, strerror(fd < 0 ? -fd : errno));
		if (fd >= 0)
			close(fd);
		return fd < 0 ? fd : -errno;
	}
	log_info("D-Bus clients: listening on %s", address);
	return dbus_front_listen(f, fd);
}
