/* SPDX-License-Identifier: MIT */
/*
 * admission.c - who may connect and for how long (see admission.h): the
 * connection limits checked at accept, the HELLO deadline, the accept pause
 * at the fd limit, refusal summaries, and a connection's end (batched
 * revocation, reaping at low priority).
 *
 * Its one reason to change is a connection flood or a mass disconnect: the
 * limits and the costs of coming and going. Reading requests is bus.c's.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/admission.h"
#include "brokerd/bus-state.h"
#include "brokerd/conn.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/macro.h"
#include "util/socket.h"

#define REFUSED_MAX	    64 /* refused connections kept to answer their first request */
#define REFUSED_LINGER_USEC (500ULL * 1000ULL)
#define ACCEPT_RETRY_USEC   (100ULL * 1000ULL)	 /* after EMFILE, unless an fd is freed first */
#define REFUSAL_LOG_USEC    (10ULL * 1000000ULL) /* one summary of refusals per interval */
#define FDS_PER_CONN	    2			 /* the socket and its pidfd */
#define FDS_SPARE	    128			 /* for everything else: channels, queued caps, refusals */
#define REVOKE_BATCH	    256			 /* ended connections revoked per walk over all channels */
#define REAP_BATCH	    64			 /* ended connections freed per turn */
#define REAP_MAX_DELAY_USEC (50ULL * 1000ULL)	 /* freed by then even on a busy bus */

static void admission_conn_end(struct bus_conn *c);

/* --- deadlines: HELLO, and the answer to a refused connection ------------- */

static void fifo_push(struct conn_fifo *f, struct bus_conn *c, uint64_t deadline)
{
	c->fifo = f;
	c->deadline = deadline;
	c->fifo_next = NULL;
	c->fifo_prev = f->tail;
	if (f->tail)
		f->tail->fifo_next = c;
	else
		f->head = c;
	f->tail = c;
}

static void fifo_remove(struct bus_conn *c)
{
	struct conn_fifo *f = c->fifo;

	if (!f)
		return;
	if (c->fifo_prev)
		c->fifo_prev->fifo_next = c->fifo_next;
	else
		f->head = c->fifo_next;
	if (c->fifo_next)
		c->fifo_next->fifo_prev = c->fifo_prev;
	else
		f->tail = c->fifo_prev;
	c->fifo = NULL;
	c->fifo_prev = c->fifo_next = NULL;
}

/* Each fifo is in deadline order, so the earliest deadline is one of the heads. */
static void deadline_arm(struct bus *b)
{
	uint64_t next = UINT64_MAX;

	if (b->hello_fifo.head)
		next = b->hello_fifo.head->deadline;
	if (b->refused_fifo.head && b->refused_fifo.head->deadline < next)
		next = b->refused_fifo.head->deadline;
	if (!b->deadline_src)
		return;
	if (next == UINT64_MAX) {
		(void)sd_event_source_set_enabled(b->deadline_src, SD_EVENT_OFF);
		return;
	}
	(void)sd_event_source_set_time(b->deadline_src, next);
	(void)sd_event_source_set_enabled(b->deadline_src, SD_EVENT_ONESHOT);
}

/* An ERROR straight on a socket, with serial and code of the request it answers (0: none). */
static void send_error(int fd, uint16_t code, uint32_t serial, const char *name, const char *msg)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	const void *d;
	size_t l;

	if (ctrl_writer_init(&w, CTRL_TYPE_ERROR, ctrl_op_get(code) ? code : 0, serial) < 0)
		return;
	ctrl_write_string(&w, name);
	ctrl_write_string(&w, msg);
	if (ctrl_writer_finish(&w, &d, &l) == 0)
		(void)send(fd, d, l, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct bus *b = userdata;
	uint64_t now = now_usec();
	struct bus_conn *c;
	char msg[128];

	while ((c = b->refused_fifo.head) && c->deadline <= now) {
		/* It sent nothing to answer: say why with serial 0. */
		send_error(c->fd, 0, 0, CTRL_ERROR_QUOTA_EXCEEDED, c->refusal);
		admission_conn_free(c);
	}
	while ((c = b->hello_fifo.head) && c->deadline <= now) {
		snprintf(msg, sizeof(msg), "no HELLO within %llu ms",
			 (unsigned long long)quota_bus_limit(b->quota, QUOTA_BUS_HELLO_TIMEOUT_MS));
		log_full(LOG_DEBUG, NULL, c->cred.uid, "closing a connection of uid %u: %s", c->cred.uid,
			 msg);
		send_error(c->fd, 0, 0, CTRL_ERROR_TIMEOUT, msg);
		admission_conn_free(c);
	}
	deadline_arm(b);
	return 0;
}

/* --- refusals, logged as one summary per interval -------------------------- */

static int on_refusal_log(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct bus *b = userdata;
	unsigned int secs = (unsigned int)(REFUSAL_LOG_USEC / 1000000ULL);

	for (unsigned int i = 0; i < b->n_refusals; i++) {
		struct bus_refusals *r = &b->refusals[i];

		log_full(
			LOG_WARNING, NULL, r->uid,
			"refused %lu connection(s) of uid %u in the last %u s: %lu over its connections quota "
			"(%llu), %lu at the bus's max_connections",
			r->quota + r->cap, r->uid, secs, r->quota,
			(unsigned long long)quota_limit_uid(b->quota, r->uid, QUOTA_CONNECTIONS), r->cap);
	}
	if (b->refusals_other)
		log_warning("refused %lu more connection(s) of other uids in the last %u s",
			    b->refusals_other, secs);
	if (b->accept_pauses)
		log_warning("accepting paused %lu time(s) in the last %u s: %s", b->accept_pauses, secs,
			    strerror(b->accept_errno));
	b->n_refusals = 0;
	b->refusals_other = 0;
	b->accept_pauses = 0;
	return 0;
}

static void refusal_log_arm(struct bus *b)
{
	int enabled = SD_EVENT_OFF;

	if (!b->refusal_log_src)
		return;
	(void)sd_event_source_get_enabled(b->refusal_log_src, &enabled);
	if (enabled != SD_EVENT_OFF)
		return;
	(void)sd_event_source_set_time(b->refusal_log_src, now_usec() + REFUSAL_LOG_USEC);
	(void)sd_event_source_set_enabled(b->refusal_log_src, SD_EVENT_ONESHOT);
}

static void refusal_note(struct bus *b, uid_t uid, bool cap)
{
	unsigned int i;

	for (i = 0; i < b->n_refusals && b->refusals[i].uid != uid; i++)
		;
	if (i == b->n_refusals) {
		if (i == ELEMENTSOF(b->refusals)) {
			b->refusals_other++;
			refusal_log_arm(b);
			return;
		}
		b->refusals[b->n_refusals++] = (struct bus_refusals){ .uid = uid };
	}
	if (cap)
		b->refusals[i].cap++;
	else
		b->refusals[i].quota++;
	refusal_log_arm(b);
}

/* --- admission ---------------------------------------------------------------- */

static uint64_t bus_max_connections(struct bus *b)
{
	uint64_t max = quota_bus_limit(b->quota, QUOTA_BUS_MAX_CONNECTIONS);

	return max < b->fd_conn_budget ? max : b->fd_conn_budget;
}

/*
 * May a connection of uid come in? Its uid's connections quota counts
 * connections with and without HELLO; the bus-wide max_connections keeps
 * its last reserved_connections for root and for uids that use less than
 * a quarter of their quota, so a flood of many uids cannot lock them out.
 * Refused: false, with the message of the QuotaExceeded error in why.
 */
static bool bus_admit(struct bus *b, uid_t uid, char *why, size_t why_len, bool *cap)
{
	uint64_t used = quota_used(b->quota, uid, QUOTA_CONNECTIONS);
	uint64_t limit = quota_limit_uid(b->quota, uid, QUOTA_CONNECTIONS);
	uint64_t max = bus_max_connections(b);
	uint64_t reserved = quota_bus_limit(b->quota, QUOTA_BUS_RESERVED_CONNECTIONS);
	bool privileged = uid == 0 || uid == geteuid();

	*cap = false;
	if (used >= limit) {
		snprintf(why, why_len, "connections: uid %u uses %llu of %llu", uid, (unsigned long long)used,
			 (unsigned long long)limit);
		return false;
	}
	*cap = true;
	if (b->n_conns >= max) {
		snprintf(why, why_len, "max_connections: the bus has %u of %llu connections", b->n_conns,
			 (unsigned long long)max);
		return false;
	}
	if (reserved > max)
		reserved = max;
	if (b->n_conns >= max - reserved && !privileged && used >= limit / 4) {
		snprintf(
			why, why_len,
			"max_connections: the bus has %u of %llu connections; the last %llu are for root and "
			"uids with fewer than %llu",
			b->n_conns, (unsigned long long)max, (unsigned long long)reserved,
			(unsigned long long)(limit / 4));
		return false;
	}
	return true;
}

/*
 * Tell a refused connection why, with the serial of its HELLO if it sent
 * one already (clients send it right after connect), and close it; or keep
 * it a moment (a few of them, cheaply) to answer its first request.
 * Returns true when fd was closed.
 */
static bool bus_refuse_now(struct bus *b, int fd, const char *why)
{
	uint8_t buf[CTRL_HEADER_SIZE];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX)];
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u, .msg_controllen = sizeof(u)
	};
	struct ctrl_message m;
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && errno == EAGAIN && b->n_refused < REFUSED_MAX)
		return false;
	if (n >= 0)
		(void)unix_close_fds(&mh);
	(void)ctrl_message_decode(&m, buf, n > 0 ? (size_t)n : 0, 0); /* the header, for the serial */
	send_error(fd, m.hdr.code, m.hdr.serial, CTRL_ERROR_QUOTA_EXCEEDED, why);
	close(fd);
	return true;
}

/*
 * A D-Bus connection (dbus-conn.c) is not a bus_conn, but it costs brokerd
 * the same (a socket, a pidfd, buffers): it is admitted by the same uid
 * quota and the same bus-wide cap and reserve, so neither protocol can
 * crowd out the other's root or light users.
 */
int admission_count(struct bus *b, uid_t uid, char *why, size_t why_len)
{
	bool cap;

	if (!bus_admit(b, uid, why, why_len, &cap)) {
		refusal_note(b, uid, cap);
		return -EDQUOT;
	}
	(void)quota_charge(b->quota, uid, QUOTA_CONNECTIONS, 1); /* bus_admit() checked */
	b->n_conns++;
	return 0;
}

void admission_uncount(struct bus *b, uid_t uid)
{
	quota_release(b->quota, uid, QUOTA_CONNECTIONS, 1);
	b->n_conns--;
}

void admission_conn_hello(struct bus_conn *c)
{
	fifo_remove(c);
}

/* --- revocation of ended connections, in batches --------------------------- */

static int id_compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Revokes every grant on ch of the peers in ids (sorted). */
static void channel_revoke_ids(struct bus *b, struct bus_channel *ch, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; ch && i < ch->n_grants;) {
		uint64_t id = ch->grants[i].peer_id;

		if (bsearch(&id, ids, n, sizeof(*ids), id_compare))
			grant_revoke(b, ch, id, GRANT_ALL); /* the grant goes: another moves to i */
		else
			i++;
	}
}

/* Revokes every grant of the peers in ids (sorted) on every channel brokerd made. */
static void revoke_ids(struct bus *b, const uint64_t *ids, size_t n)
{
	for (struct bus_name *nm = b->names; nm; nm = nm->next) {
		channel_revoke_ids(b, nm->call, ids, n);
		channel_revoke_ids(b, nm->signal, ids, n);
	}
	channel_revoke_ids(b, b->bus_signal, ids, n);
	channel_revoke_ids(b, b->dbus_channel, ids, n);
	for (struct bus_conn *o = b->conns; o; o = o->next)
		channel_revoke_ids(b, o->inbox, ids, n);
}

/*
 * A connection's caps are revoked (its process may live on, attached to
 * channels) in batches: one walk over all channels per REVOKE_BATCH ended
 * connections instead of one per connection, so that thousands of them
 * closing at once cost O(n) and others are answered in between.
 */
static int on_revoke_batch(sd_event_source *s, void *userdata)
{
	struct bus *b = userdata;
	size_t n = b->n_revoke_ids < REVOKE_BATCH ? b->n_revoke_ids : REVOKE_BATCH;
	uint64_t *ids = b->revoke_ids + b->n_revoke_ids - n;

	qsort(ids, n, sizeof(*ids), id_compare);
	revoke_ids(b, ids, n);
	b->n_revoke_ids -= n;
	if (b->n_revoke_ids == 0)
		(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
	b->gc_needed = true; /* names only ended connections held may go now */
	grant_revoke_pending(b);
	return 0;
}

static void revoke_later(struct bus *b, uint64_t id)
{
	if (ARRAY_RESERVE(b->revoke_ids, b->alloc_revoke_ids, b->n_revoke_ids + 1) < 0 || !b->revoke_src) {
		/* No memory to queue it: revoke now rather than not at all. */
		revoke_ids(b, &id, 1);
		return;
	}
	b->revoke_ids[b->n_revoke_ids++] = id;
	(void)sd_event_source_set_enabled(b->revoke_src, SD_EVENT_ON);
}

static void reap(struct bus *b, unsigned int max)
{
	for (unsigned int i = 0; i < max && b->reap_head; i++) {
		struct bus_conn *c = b->reap_head;

		b->reap_head = c->reap_next;
		if (!b->reap_head)
			b->reap_tail = NULL;
		admission_conn_free(c);
	}
	if (!b->reap_head)
		(void)sd_event_source_set_enabled(b->reap_src, SD_EVENT_OFF);
}

static int on_reap(sd_event_source *s, void *userdata)
{
	reap(userdata, REAP_BATCH);
	return 0;
}

void admission_reap_overdue(struct bus *b)
{
	if (b->reap_head && now_usec() - b->reap_head->deadline > REAP_MAX_DELAY_USEC)
		reap(b, REAP_BATCH);
}

/*
 * A connection that ended is gone for the others at once (admission_conn_end);
 * closing its fds and freeing it waits for a moment when nothing else is
 * pending (at most REAP_MAX_DELAY_USEC), so that thousands ending at once
 * do not stand between a new client and its HELLO.
 */
void admission_conn_reap_later(struct bus_conn *c)
{
	struct bus *b = c->bus;

	if (!b->reap_src) {
		admission_conn_free(c);
		return;
	}
	admission_conn_end(c);
	c->deadline = now_usec(); /* when it ended (it is on no fifo now) */
	c->reap_next = NULL;
	if (b->reap_tail)
		b->reap_tail->reap_next = c;
	else
		b->reap_head = c;
	b->reap_tail = c;
	(void)sd_event_source_set_enabled(b->reap_src, SD_EVENT_ON);
}

/*
 * The part of a connection's end that others see: its names go (queues are
 * promoted), its calls waiting for an activation, its revocation is queued.
 * Its fds, inbox, quota and memory go in admission_conn_free().
 */
static void admission_conn_end(struct bus_conn *c)
{
	struct bus *b = c->bus;
	bool had_peer = false;

	c->ended = true;
	c->dead = true;
	c->monitor = false;
	c->name_events = false;
	activation_drop_conn(b, c);
	if (c->peer) {
		uint64_t id = c->peer->id;

		if (log_ratelimit_test(&b->conn_log))
			log_full(LOG_INFO, c->peer->unique_name, c->cred.uid, "%s disconnected",
				 c->peer->unique_name);
		if (b->bridge_hooks) /* D-Bus callers waiting on its names: NoReply */
			b->bridge_hooks->peer_ending(b->bridge, c->peer);
		registry_peer_remove(b->registry, c->peer); /* names go, queues are promoted */
		c->peer = NULL;
		/*
		 * The process may live on, attached to channels, without its
		 * connection: all it was granted goes with the connection, in
		 * the next batch (on_revoke_batch).
		 */
		revoke_later(b, id);
		had_peer = true;
	}
	fifo_remove(c);
	(void)sd_event_source_set_enabled(c->src, SD_EVENT_OFF);
	/* No longer counted: a new connection may take its place before it is freed. */
	if (c->refused) {
		b->n_refused--;
	} else {
		quota_release(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1);
		b->n_conns--;
	}
	if (had_peer) {
		/* Its names went to the next in their queues: revoke at once what that took away. */
		b->gc_needed = true;
		grant_revoke_pending(b);
	}
}

void admission_conn_free(struct bus_conn *c)
{
	struct bus *b;

	if (!c)
		return;
	b = c->bus;
	if (!c->ended)
		admission_conn_end(c);
	c->inbox = bus_channel_free(b, c->inbox);
	if (c->n_subscriptions)
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, c->n_subscriptions);
	fifo_remove(c);
	conn_out_clear(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		b->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	sd_event_source_disable_unref(c->src);
	sd_event_source_disable_unref(c->closing_src);
	close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c->gids);
	free(c->label);
	free(c->nsview);
	free(c);
	if (b->accept_paused) {
		/* An fd is free again: accept before the retry timer says so. */
		b->accept_paused = false;
		(void)sd_event_source_set_enabled(b->listen_src, SD_EVENT_ON);
		(void)sd_event_source_set_enabled(b->accept_src, SD_EVENT_OFF);
	}
}

static int on_accept_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct bus *b = userdata;

	b->accept_paused = false;
	(void)sd_event_source_set_enabled(b->listen_src, SD_EVENT_ON);
	return 0;
}

/*
 * Out of fds (or memory): stop polling the socket instead of spinning on
 * it; a freed connection or a short timer resumes.
 */
void admission_accept_pause(struct bus *b, int err)
{
	b->accept_pauses++;
	b->accept_errno = err;
	refusal_log_arm(b);
	if (!b->accept_src &&
	    sd_event_add_time(b->event, &b->accept_src, CLOCK_MONOTONIC, 0, 0, on_accept_retry, b) < 0)
		return; /* no timer: keep polling rather than never accept again */
	b->accept_paused = true;
	(void)sd_event_source_set_enabled(b->listen_src, SD_EVENT_OFF);
	(void)sd_event_source_set_time(b->accept_src, now_usec() + ACCEPT_RETRY_USEC);
	(void)sd_event_source_set_enabled(b->accept_src, SD_EVENT_ONESHOT);
}

int admission_conn_new(struct bus *b, int fd, struct bus_conn **ret)
{
	struct bus_conn *c;
	struct ucred cred = { .uid = (uid_t)-1, .gid = (gid_t)-1 };
	socklen_t l = sizeof(cred);
	char why[sizeof(c->refusal)];
	bool admitted, cap;

	*ret = NULL;
	/* Before the connection costs anything: is its uid (or the bus) over a limit? */
	(void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l);
	admitted = bus_admit(b, cred.uid, why, sizeof(why), &cap);
	if (!admitted) {
		refusal_note(b, cred.uid, cap);
		if (bus_refuse_now(b, fd, why))
			return -EDQUOT;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->bus = b;
	c->fd = fd;
	c->pidfd = -1;
	if (admitted) {
		conn_creds_read(c);
		(void)quota_charge(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1); /* bus_admit() checked */
		b->n_conns++;
		fifo_push(&b->hello_fifo, c,
			  now_usec() + quota_bus_limit(b->quota, QUOTA_BUS_HELLO_TIMEOUT_MS) * 1000ULL);
	} else {
		c->cred = cred;
		c->refused = true;
		snprintf(c->refusal, sizeof(c->refusal), "%s", why);
		b->n_refused++;
		fifo_push(&b->refused_fifo, c, now_usec() + REFUSED_LINGER_USEC);
	}
	deadline_arm(b);
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	*ret = c;
	return admitted ? 0 : -EDQUOT;
}

int admission_conn_restore(struct bus *b, int fd, const struct ucred *cred, bool hello, struct bus_conn **ret)
{
	struct bus_conn *c = calloc(1, sizeof(*c));

	*ret = NULL;
	if (!c)
		return -ENOMEM;
	c->bus = b;
	c->fd = fd;
	c->pidfd = -1;
	conn_creds_read(c);
	c->cred = *cred; /* checked against SO_PEERCRED, or a closed stand-in that has none */
	(void)quota_charge_restored(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1);
	b->n_conns++;
	if (!hello) {
		fifo_push(&b->hello_fifo, c,
			  now_usec() + quota_bus_limit(b->quota, QUOTA_BUS_HELLO_TIMEOUT_MS) * 1000ULL);
		deadline_arm(b);
	}
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	*ret = c;
	return 0;
}

void admission_settle(struct bus *b)
{
	if (b->n_revoke_ids > 0) {
		qsort(b->revoke_ids, b->n_revoke_ids, sizeof(*b->revoke_ids), id_compare);
		revoke_ids(b, b->revoke_ids, b->n_revoke_ids);
		b->n_revoke_ids = 0;
		(void)sd_event_source_set_enabled(b->revoke_src, SD_EVENT_OFF);
	}
	reap(b, UINT_MAX);
}

/* --- setup ------------------------------------------------------------------ */

int admission_init(struct bus *b)
{
	struct rlimit rl;
	int r;

	b->fd_conn_budget = UINT64_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		b->fd_conn_budget = rl.rlim_cur > FDS_SPARE ? (rl.rlim_cur - FDS_SPARE) / FDS_PER_CONN : 0;
	r = sd_event_add_time(b->event, &b->deadline_src, CLOCK_MONOTONIC, 0, 10000, on_deadline, b);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(b->deadline_src, SD_EVENT_OFF);
	r = sd_event_add_defer(b->event, &b->reap_src, on_reap, b);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(b->reap_src, SD_EVENT_OFF);
	(void)sd_event_source_set_priority(b->reap_src, SD_EVENT_PRIORITY_IDLE);
	r = sd_event_add_defer(b->event, &b->revoke_src, on_revoke_batch, b);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(b->revoke_src, SD_EVENT_OFF);
	r = sd_event_add_time(b->event, &b->refusal_log_src, CLOCK_MONOTONIC, 0, 0, on_refusal_log, b);
	if (r < 0)
		return r;
	(void)sd_event_source_set_enabled(b->refusal_log_src, SD_EVENT_OFF);
	return 0;
}

void admission_deinit(struct bus *b)
{
	b->reap_head = b->reap_tail = NULL; /* they are all in conns */
	while (b->conns)
		admission_conn_free(b->conns);
	b->reap_src = sd_event_source_disable_unref(b->reap_src);
	b->revoke_src = sd_event_source_disable_unref(b->revoke_src);
	free(b->revoke_ids); /* their channels are destroyed with the names, after this */
	b->revoke_ids = NULL;
	b->n_revoke_ids = b->alloc_revoke_ids = 0;
	b->deadline_src = sd_event_source_disable_unref(b->deadline_src);
	b->refusal_log_src = sd_event_source_disable_unref(b->refusal_log_src);
	b->accept_src = sd_event_source_disable_unref(b->accept_src);
}
