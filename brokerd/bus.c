/* SPDX-License-Identifier: MIT */
/*
 * bus.c - the broker (see bus.h).
 *
 * One struct bus_conn per control connection. Datagrams are decoded by
 * protocol/ctrl.c and dispatched through handlers[], a table indexed by op
 * with a static assert that every op has a handler. Replies are sent
 * non-blocking; a client that does not read gets its replies queued and its
 * input paused (so a flood costs brokerd one bounded queue per connection).
 *
 * Channels: per connection an inbox (unicast), per well-known name a call
 * channel (multicast) and a signal channel (broadcast), and the bus's own
 * signal channel "brokerd". Each capability fd handed out is badged with the
 * connection id and recorded as a grant, so that what a reload, a lost name
 * or a disconnect takes away can be revoked in the kernel by badge: the caps
 * lose the rights and whatever was attached through them is detached.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "brokerd/bus.h"
#include "brokerd/channel.h"
#include "protocol/ctrl.h"
#include "brokerd/log.h"
#include "protocol/message.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "brokerd/util.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

#define CONN_OUT_MAX		256	/* queued outgoing messages before we give up on a reader */
#define CONN_BATCH		32	/* requests handled per wakeup, for fairness */
#define ACTIVATION_TIMEOUT_USEC	(25ULL * 1000000ULL)

struct grant {
	uint64_t peer_id;
	uint32_t rights;	/* IOIPC_SUB_*, of all caps minted for the peer */
};

#define GRANT_ALL	(IOIPC_SUB_SEND | IOIPC_SUB_RECV | IOIPC_SUB_MONITOR)

struct bus_channel {
	uint32_t id;
	enum ctrl_channel_kind kind;
	char *name;		/* well-known name, unique name (inbox) or "brokerd" */
	uid_t charged_uid;
	struct grant *grants;
	size_t n_grants, cap_grants;
};

struct bus_name {
	char *name;
	struct bus_channel *call, *signal;
	bool activating;
	bool revoke_pending;	/* an owner lost the name: its caps must die */
	struct bus_name *next;
};

struct out_msg {
	void *data;
	size_t len;
	int fds[CTRL_FDS_MAX];
	unsigned int n_fds;
	struct out_msg *next;
};

struct bus_conn {
	struct bus *bus;
	int fd;
	sd_event_source *src;
	struct ucred cred;
	gid_t *gids;
	size_t n_gids;
	int pidfd;
	char *label;
	struct registry_peer *peer;	/* after HELLO */
	bool over_quota;		/* connections quota hit at accept: HELLO fails */
	bool name_events;
	bool monitor;
	bool dead;
	struct bus_channel *inbox;
	struct out_msg *out_head, *out_tail;
	unsigned int out_len;
	unsigned int n_caps;
	uint64_t n_subscriptions;
	struct bus_conn *prev, *next;
};

struct activation {
	struct bus_conn *conn;
	uint32_t serial;
	char *name;
	sd_event_source *timer;
	struct activation *next;
};

struct bus {
	sd_event *event;
	int listen_fd;
	sd_event_source *listen_src, *ring_src;
	struct registry *registry;
	struct policy *policy;
	struct quota *quota;
	struct service_set *services;
	struct chanmgr chan;
	struct bus_conn *conns;
	struct bus_name *names;
	struct bus_channel *bus_signal;
	struct activation *activations;
	sd_bus *sdbus;
	const char *const *policy_dirs;
	const char *const *service_dirs;
	uint64_t activation_timeout;
	const char *activator_path;
	const char *state_path;
	uint64_t id_reserved;		/* ids below this are recorded in state_path */
	uint32_t lossy;			/* IOIPC_F_LOSSY if the kernel has it, for signal channels */
	bool gc_needed;			/* some name may have become idle */
	struct activator_req *activator_reqs;	/* waiting for the activator's answer */
	uint32_t signal_serial;
	struct bus_conn *requester;	/* conn whose request is being handled */
};

static const char *const default_policy_dirs[] = { POLICY_DIR_ETC, POLICY_DIR_VENDOR, NULL };
static const char *const default_service_dirs[] = { SERVICE_DIR_ETC, SERVICE_DIR_VENDOR, NULL };

static void conn_free(struct bus_conn *c);

/* --- sending ------------------------------------------------------------- */

static const char *conn_name(struct bus_conn *c)
{
	return c->peer ? c->peer->unique_name : "(no hello)";
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
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX)];
	} u;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (n_fds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = &u;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(&u.h), fds, sizeof(int) * n_fds);
	}
	n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return 0;
}

/*
 * Give up on a connection from anywhere (also while handling another one):
 * shutdown() makes its fd report EPOLLHUP, and its own handler frees it.
 */
static void conn_kill(struct bus_conn *c)
{
	c->dead = true;
	shutdown(c->fd, SHUT_RDWR);
	sd_event_source_set_io_events(c->src, EPOLLIN);
}

static void conn_update_events(struct bus_conn *c)
{
	/* Pause input while output is queued: a client that does not read cannot make us buffer. */
	sd_event_source_set_io_events(c->src, c->out_head ? EPOLLOUT : EPOLLIN);
}

/* Send a finished writer's message; fds in w are borrowed (the caller closes them). */
static int conn_send(struct bus_conn *c, struct ctrl_writer *w)
{
	const void *data;
	size_t len;
	struct out_msg *o;
	int r;

	if (c->dead)
		return 0;
	r = ctrl_writer_finish(w, &data, &len);
	if (r < 0) {
		/* Too large is the caller's to report; anything else is our bug. */
		log_full(r == -EMSGSIZE ? LOG_NOTICE : LOG_ERR, conn_name(c), c->cred.uid, "cannot encode %s for %s: %s",
			 ctrl_type_to_string(w->type), conn_name(c), strerror(-r));
		return r;
	}
	if (!c->out_head) {
		r = conn_sendmsg(c, data, len, w->fds, w->n_fds);
		if (r == 0)
			return 0;
		if (r != -EAGAIN) {
			conn_kill(c);	/* EPIPE and friends */
			return r;
		}
	}
	if (c->out_len >= CONN_OUT_MAX) {
		log_full(LOG_WARNING, conn_name(c), c->cred.uid,
			 "%s does not read its replies (%u queued), disconnecting", conn_name(c), c->out_len);
		conn_kill(c);
		return -ENOBUFS;
	}
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
	for (unsigned int i = 0; i < w->n_fds; i++) {
		o->fds[i] = fcntl(w->fds[i], F_DUPFD_CLOEXEC, 3);
		if (o->fds[i] < 0) {
			o->n_fds = i;
			out_msg_free(o);
			return -errno;
		}
		o->n_fds = i + 1;
	}
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->out_len++;
	conn_update_events(c);
	return 0;
}

static int conn_flush(struct bus_conn *c)
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
		c->out_len--;
		out_msg_free(o);
	}
	conn_update_events(c);
	return 0;
}

static int reply_error(struct bus_conn *c, const struct ctrl_message *m, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int reply_error(struct bus_conn *c, const struct ctrl_message *m, const char *name, const char *fmt, ...)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	char msg[512];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_full(LOG_DEBUG, conn_name(c), c->cred.uid, "%s: %s: %s",
		 m->info ? m->info->name : "?", name, msg);
	r = ctrl_writer_init(&w, CTRL_TYPE_ERROR, ctrl_op_get(m->hdr.code) ? m->hdr.code : 0, m->hdr.serial);
	if (r < 0)
		return r;
	ctrl_write_string(&w, name);
	ctrl_write_string(&w, msg);
	r = conn_send(c, &w);
	return r < 0 && r != -ENOBUFS ? r : 0;
}

static int reply_quota(struct bus_conn *c, const struct ctrl_message *m, enum quota_kind k)
{
	struct quota *q = c->bus->quota;
	unsigned long long used = quota_used(q, c->cred.uid, k), limit = quota_limit_uid(q, c->cred.uid, k);

	log_quota(c->peer ? c->peer->unique_name : NULL, c->cred.uid, quota_kind_to_string(k), used, limit);
	return reply_error(c, m, CTRL_ERROR_QUOTA_EXCEEDED, "%s: uid %u uses %llu of %llu",
			   quota_kind_to_string(k), c->cred.uid, used, limit);
}

static int reply_init(struct ctrl_writer *w, const struct ctrl_message *m)
{
	return ctrl_writer_init(w, CTRL_TYPE_REPLY, m->hdr.code, m->hdr.serial);
}

static void conn_signal(struct bus_conn *c, struct ctrl_writer *w)
{
	if (c && !c->dead && c->peer)
		(void)conn_send(c, w);
}

/* --- channels and grants ------------------------------------------------- */

static void monitor_announce(struct bus *b, struct bus_channel *ch, struct bus_conn *only);

static struct bus_channel *bus_channel_free(struct bus *b, struct bus_channel *ch)
{
	if (!ch)
		return NULL;
	if (b->chan.available)
		chanmgr_destroy(&b->chan, ch->id);
	quota_release(b->quota, ch->charged_uid, QUOTA_CHANNELS, 1);
	quota_release(b->quota, ch->charged_uid, QUOTA_RING_BYTES, CHANNEL_RING_BYTES);
	free(ch->grants);
	free(ch->name);
	free(ch);
	return NULL;
}

/* Create a channel charged to uid; *failed_quota tells which quota refused. */
static int bus_channel_new(struct bus *b, enum ctrl_channel_kind kind, const char *name, uid_t uid,
			   int *failed_quota, struct bus_channel **ret)
{
	static const uint32_t flags[] = {
		[CTRL_CHANNEL_INBOX] = 0,
		[CTRL_CHANNEL_CALL] = IOIPC_F_MULTICAST,
		[CTRL_CHANNEL_SIGNAL] = IOIPC_F_BROADCAST,
	};
	struct bus_channel *ch;
	int r;

	if (quota_charge(b->quota, uid, QUOTA_CHANNELS, 1) < 0) {
		*failed_quota = QUOTA_CHANNELS;
		return -EDQUOT;
	}
	if (quota_charge(b->quota, uid, QUOTA_RING_BYTES, CHANNEL_RING_BYTES) < 0) {
		quota_release(b->quota, uid, QUOTA_CHANNELS, 1);
		*failed_quota = QUOTA_RING_BYTES;
		return -EDQUOT;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch || !(ch->name = strdup(name))) {
		free(ch);
		r = -ENOMEM;
		goto fail;
	}
	ch->kind = kind;
	ch->charged_uid = uid;
	r = chanmgr_create(&b->chan, flags[kind] | (kind == CTRL_CHANNEL_SIGNAL ? b->lossy : 0), &ch->id);
	if (r < 0) {
		log_error("cannot create %s channel for %s: %s", kind == CTRL_CHANNEL_INBOX ? "inbox" :
			  kind == CTRL_CHANNEL_CALL ? "call" : "signal", name, strerror(-r));
		free(ch->name);
		free(ch);
		goto fail;
	}
	monitor_announce(b, ch, NULL);
	*ret = ch;
	return 0;
fail:
	quota_release(b->quota, uid, QUOTA_CHANNELS, 1);
	quota_release(b->quota, uid, QUOTA_RING_BYTES, CHANNEL_RING_BYTES);
	return r;
}

static int grant_add(struct bus_channel *ch, uint64_t peer_id, uint32_t rights)
{
	for (size_t i = 0; i < ch->n_grants; i++) {
		if (ch->grants[i].peer_id == peer_id) {
			ch->grants[i].rights |= rights;
			return 0;
		}
	}
	if (ch->n_grants == ch->cap_grants) {
		size_t cap = ch->cap_grants ? ch->cap_grants * 2 : 4;
		struct grant *g = realloc(ch->grants, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		ch->grants = g;
		ch->cap_grants = cap;
	}
	ch->grants[ch->n_grants++] = (struct grant){ .peer_id = peer_id, .rights = rights };
	return 0;
}

static bool grant_has(struct bus_channel *ch, uint64_t peer_id, uint32_t rights)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++)
		if (ch->grants[i].peer_id == peer_id)
			return (ch->grants[i].rights & rights) == rights;
	return false;
}

/*
 * Takes rights on ch back from the peer with this id: its caps lose them in
 * the kernel and what it attached through them is detached.
 */
static void grant_revoke(struct bus *b, struct bus_channel *ch, uint64_t peer_id, uint32_t rights)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++) {
		struct grant *g = &ch->grants[i];
		int r;

		if (g->peer_id != peer_id)
			continue;
		rights &= g->rights;
		if (!rights)
			return;
		r = chanmgr_revoke(&b->chan, ch->id, rights, peer_id);
		if (r < 0)
			log_error("cannot revoke rights 0x%x on %s from connection %llu: %s", rights, ch->name,
				  (unsigned long long)peer_id, strerror(-r));
		else
			log_debug("revoked rights 0x%x on %s from connection %llu: %d subscriber(s) detached", rights,
				  ch->name, (unsigned long long)peer_id, r);
		g->rights &= ~rights;
		if (!g->rights)
			*g = ch->grants[--ch->n_grants];
		return;
	}
}

/* Mint a cap for c with rights, badge = c's connection id, and record the grant. */
static int cap_mint(struct bus *b, struct bus_channel *ch, struct bus_conn *c, uint32_t rights)
{
	int fd, r;

	fd = chanmgr_mint(&b->chan, ch->id, rights, c->peer->id);
	if (fd < 0) {
		log_error("cannot mint capability on %s for %s: %s", ch->name, conn_name(c), strerror(-fd));
		return fd;
	}
	r = grant_add(ch, c->peer->id, rights);
	if (r < 0) {
		close(fd);
		return r;
	}
	c->n_caps++;
	return fd;
}

static struct bus_name *bus_name_find(struct bus *b, const char *name)
{
	for (struct bus_name *n = b->names; n; n = n->next)
		if (strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

/*
 * The name's channels, created on first use and charged to the uid that
 * caused it. They stay while anybody uses the name (bus_gc_names), so
 * subscriptions survive owner changes.
 */
static int bus_name_get(struct bus *b, const char *name, uid_t uid, int *failed_quota, struct bus_name **ret)
{
	struct bus_name *n = bus_name_find(b, name);
	int r;

	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n || !(n->name = strdup(name))) {
			free(n);
			return -ENOMEM;
		}
		n->next = b->names;
		b->names = n;
	}
	if (b->chan.available && !n->call) {
		r = bus_channel_new(b, CTRL_CHANNEL_CALL, name, uid, failed_quota, &n->call);
		if (r < 0) {
			b->gc_needed = true;	/* drop the half-made name */
			return r;
		}
	}
	if (b->chan.available && !n->signal) {
		r = bus_channel_new(b, CTRL_CHANNEL_SIGNAL, name, uid, failed_quota, &n->signal);
		if (r < 0) {
			b->gc_needed = true;
			return r;
		}
	}
	*ret = n;
	return 0;
}

/* --- monitors ------------------------------------------------------------ */

static void monitor_send(struct bus *b, struct bus_channel *ch, struct bus_conn *c)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;

	/* Without a cap the signal still comes, so the monitor's count adds up. */
	fd = cap_mint(b, ch, c, IOIPC_SUB_MONITOR);
	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_MONITOR_CHANNEL, 0) < 0)
		return;
	ctrl_write_string(&w, ch->name);
	ctrl_write_u32(&w, ch->kind);
	if (fd >= 0)
		ctrl_write_fd(&w, fd);
	conn_signal(c, &w);
}

static void monitor_announce(struct bus *b, struct bus_channel *ch, struct bus_conn *only)
{
	for (struct bus_conn *c = b->conns; c; c = c->next)
		if (c->monitor && (!only || c == only))
			monitor_send(b, ch, c);
}

static unsigned int monitor_announce_all(struct bus *b, struct bus_conn *c)
{
	unsigned int n = 0;

	if (!b->chan.available)
		return 0;
	if (b->bus_signal) {
		monitor_send(b, b->bus_signal, c);
		n++;
	}
	for (struct bus_name *bn = b->names; bn; bn = bn->next) {
		if (bn->call) {
			monitor_send(b, bn->call, c);
			n++;
		}
		if (bn->signal) {
			monitor_send(b, bn->signal, c);
			n++;
		}
	}
	for (struct bus_conn *o = b->conns; o; o = o->next) {
		if (o->inbox) {
			monitor_send(b, o->inbox, c);
			n++;
		}
	}
	return n;
}

/* --- registry callbacks: name owner changes ------------------------------ */

static void activation_settle(struct bus *b, const char *name, const char *error, const char *msg);
static void activator_reqs_close(struct bus *b, const char *name);

static void send_name_acquired(struct bus *b, struct bus_conn *c, const char *name)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int call_fd = -1, signal_fd = -1;
	struct bus_name *n = bus_name_find(b, name);

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_ACQUIRED, 0) < 0)
		return;
	ctrl_write_string(&w, name);
	if (n && n->call && n->signal) {
		call_fd = cap_mint(b, n->call, c, IOIPC_SUB_RECV);
		signal_fd = cap_mint(b, n->signal, c, IOIPC_SUB_SEND);
		if (call_fd >= 0 && signal_fd >= 0) {
			ctrl_write_fd(&w, call_fd);
			ctrl_write_fd(&w, signal_fd);
		}
	}
	conn_signal(c, &w);
}

static void send_name_signal(struct bus_conn *c, enum ctrl_signal s, const char *name)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, s, 0) < 0)
		return;
	ctrl_write_string(&w, name);
	conn_signal(c, &w);
}

static void on_owner_changed(void *userdata, const char *name, struct registry_peer *old,
			     struct registry_peer *new)
{
	struct bus *b = userdata;
	struct bus_conn *oc = old ? old->userdata : NULL, *nc = new ? new->userdata : NULL;
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };

	log_full(LOG_DEBUG, NULL, (uid_t)-1, "name %s: owner %s -> %s", name, old ? old->unique_name : "-",
		 new ? new->unique_name : "-");

	/* NameOwnerChanged: control signal to those who asked, channel message on "brokerd". */
	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0) == 0) {
		ctrl_write_string(&w, name);
		ctrl_write_string(&w, old ? old->unique_name : "");
		ctrl_write_string(&w, new ? new->unique_name : "");
		for (struct bus_conn *c = b->conns; c; c = c->next)
			if (c->name_events)
				conn_signal(c, &w);
	}
	if (b->bus_signal && w.error == 0 && w.len > CTRL_HEADER_SIZE) {
		uint8_t buf[CHANNEL_MSG_MAX];
		struct chmsg m = {
			.type = CHMSG_SIGNAL,
			.serial = ++b->signal_serial ? b->signal_serial : ++b->signal_serial,
			.member = "NameOwnerChanged",
			.body = w.buf + CTRL_HEADER_SIZE,
			.body_len = (uint32_t)(w.len - CTRL_HEADER_SIZE),
		};
		int n = chmsg_encode(&m, buf, sizeof(buf));

		if (n > 0)
			chanmgr_send(&b->chan, b->bus_signal->id, buf, (size_t)n);
	}

	b->gc_needed = true;
	if (old) {
		struct bus_name *n = bus_name_find(b, name);

		if (oc && !oc->dead)
			send_name_signal(oc, CTRL_SIGNAL_NAME_LOST, name);
		/*
		 * The old owner may still be attached to the call and signal
		 * channels: revoke its owner rights once the current operation
		 * is done (bus_process_revocations).
		 */
		if (n)
			n->revoke_pending = true;
	}
	if (nc) {
		/* The requester gets its caps in the REQUEST_NAME reply. */
		if (nc != b->requester)
			send_name_acquired(b, nc, name);
		activation_settle(b, name, NULL, NULL);
	}
}

static void bus_process_revocations(struct bus *b);

static void on_entry_changed(void *userdata, struct registry_peer *p, const char *name, int delta)
{
	struct bus *b = userdata;

	/* Checked by the REQUEST_NAME handler before the registry adds an entry. */
	if (delta > 0) {
		(void)quota_charge(b->quota, p->uid, QUOTA_NAMES, (uint64_t)delta);
	} else {
		quota_release(b->quota, p->uid, QUOTA_NAMES, (uint64_t)-delta);
		b->gc_needed = true;
	}
}

static const struct registry_ops registry_ops = {
	.owner_changed = on_owner_changed,
	.entry_changed = on_entry_changed,
};

/* --- activation ---------------------------------------------------------- */

static struct activation *activation_free(struct bus *b, struct activation *a)
{
	struct activation **pp;

	if (!a)
		return NULL;
	for (pp = &b->activations; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
	quota_release(b->quota, a->conn->cred.uid, QUOTA_ACTIVATIONS, 1);
	b->gc_needed = true;
	sd_event_source_unref(a->timer);
	free(a->name);
	free(a);
	return NULL;
}

static void activation_reply(struct bus *b, struct activation *a, const char *error, const char *msg)
{
	struct ctrl_message m = { .hdr = { .code = CTRL_OP_OPEN_CALL, .serial = a->serial } };
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus_name *n = bus_name_find(b, a->name);

	m.info = ctrl_op_get(CTRL_OP_OPEN_CALL);
	if (error) {
		reply_error(a->conn, &m, error, "%s", msg);
		return;
	}
	if (reply_init(&w, &m) < 0)
		return;
	ctrl_write_u32(&w, CTRL_CALL_OWNED);
	if (n && n->call) {
		fd = cap_mint(b, n->call, a->conn, IOIPC_SUB_SEND);
		if (fd < 0) {
			reply_error(a->conn, &m, CTRL_ERROR_FAILED, "cannot mint capability: %s", strerror(-fd));
			return;
		}
		ctrl_write_fd(&w, fd);
	}
	conn_send(a->conn, &w);
}

/*
 * Answers every call waiting for the activation of @name: with the caps when
 * @error is NULL (the name is owned now), otherwise with @error and @msg.
 */
static void activation_settle(struct bus *b, const char *name, const char *error, const char *msg)
{
	struct bus_name *n = bus_name_find(b, name);
	struct activation *a, *next;

	if (n)
		n->activating = false;
	activator_reqs_close(b, name);	/* nothing more to hear about this start */
	for (a = b->activations; a; a = next) {
		next = a->next;
		if (strcmp(a->name, name) != 0)
			continue;
		activation_reply(b, a, error, msg);
		activation_free(b, a);
	}
}

static int on_activation_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct activation *a = userdata;
	struct bus *b = a->conn->bus;
	char msg[300];

	snprintf(msg, sizeof(msg), "%s was not owned within %llu s of its activation", a->name,
		 (unsigned long long)(b->activation_timeout / 1000000));
	log_full(LOG_WARNING, conn_name(a->conn), a->conn->cred.uid, "%s", msg);
	activation_reply(b, a, CTRL_ERROR_TIMEOUT, msg);
	_cleanup_free_ char *name = strdup(a->name);
	activation_free(b, a);
	/* Nobody waits any more: the next call starts the unit again. */
	bool waiting = false;
	for (struct activation *o = b->activations; o; o = o->next)
		waiting = waiting || (name && strcmp(o->name, name) == 0);
	struct bus_name *n = name ? bus_name_find(b, name) : NULL;
	if (n && !waiting) {
		n->activating = false;
		activator_reqs_close(b, name);
	}
	return 0;
}

struct start_job {
	struct bus *bus;
	char name[];
};

static int on_start_unit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
	struct start_job *j = userdata;
	const sd_bus_error *e = sd_bus_message_get_error(reply);

	if (e) {
		char msg[512];

		snprintf(msg, sizeof(msg), "systemd refused to start the unit of %s: %s", j->name,
			 e->message ? e->message : e->name);
		log_warning("%s", msg);
		activation_settle(j->bus, j->name, CTRL_ERROR_ACTIVATION_FAILED, msg);
	}
	free(j);
	return 0;
}

/*
 * Preferred path: brokerd-activator.socket (root helper that only starts
 * units named by activation files), because brokerd itself is unprivileged
 * and may not start units. It answers one line, "ok" (start job queued) or
 * "error: REASON", read asynchronously. After "ok" the connection stays
 * open and the activator watches the unit: a unit that fails or ends
 * without taking the name comes as "failed: REASON". brokerd hangs up when
 * the activation is settled (owner, failure, timeout), which ends the
 * activator; an activator that hangs up first (EOF) has nothing to report.
 */
struct activator_req {
	struct bus *bus;
	struct activator_req *next;
	sd_event_source *src, *timer;
	int fd;
	bool started;		/* "ok" came: the unit start was queued */
	size_t len;
	char buf[512];
	char name[];
};

static void activator_req_free(struct activator_req *q)
{
	for (struct activator_req **pp = &q->bus->activator_reqs; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	sd_event_source_disable_unref(q->src);
	sd_event_source_disable_unref(q->timer);
	close(q->fd);
	free(q);
}

static void activator_reqs_close(struct bus *b, const char *name)
{
	for (struct activator_req *q = b->activator_reqs, *next; q; q = next) {
		next = q->next;
		if (strcmp(q->name, name) == 0)
			activator_req_free(q);
	}
}

/* Ends q with an activation failure: "error: ..." or "failed: ..." (or garbage). */
static void activator_req_fail(struct activator_req *q, const char *what)
{
	struct bus *b = q->bus;
	char msg[700];

	if (strncmp(what, "error: ", 7) == 0)
		what += 7;
	else if (strncmp(what, "failed: ", 8) == 0)
		what += 8;
	snprintf(msg, sizeof(msg), "activation of %s failed: %s", q->name, what);
	log_warning("%s", msg);
	/* settling closes every request for the name, q included */
	activation_settle(b, q->name, CTRL_ERROR_ACTIVATION_FAILED, msg);
}

static int on_activator_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct activator_req *q = userdata;
	ssize_t n = read(fd, q->buf + q->len, sizeof(q->buf) - 1 - q->len);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n > 0)
		q->len += (size_t)n;
	q->buf[q->len] = 0;
	while ((nl = strchr(q->buf, '\n'))) {
		*nl = 0;
		if (strcmp(q->buf, "ok") != 0 || q->started) {
			activator_req_fail(q, q->buf);
			return 0;
		}
		q->started = true;
		log_info("activation of %s: unit start queued", q->name);
		q->len -= (size_t)(nl + 1 - q->buf);
		memmove(q->buf, nl + 1, q->len + 1);
	}
	if (n > 0 && q->len < sizeof(q->buf) - 1)
		return 0;	/* the rest of the line is still to come */
	/* EOF, an error or an overlong line */
	if (!q->started) {
		activator_req_fail(q, q->len ? q->buf : "activator gave no answer");
		return 0;
	}
	activator_req_free(q);	/* it watched until the end: only the timeout is left */
	return 0;
}

static int on_activator_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	/* Waiting callers time out by their own timers; this ends the watch. */
	activator_req_free(userdata);
	return 0;
}

static int activator_start(struct bus *b, const struct service *svc)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct activator_req *q;
	char line[300];
	int fd, r;

	if (strlen(b->activator_path) >= sizeof(sa.sun_path))
		return -EINVAL;
	strcpy(sa.sun_path, b->activator_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	snprintf(line, sizeof(line), "%s\n", svc->name);
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
		close(fd);
		return -EIO;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	q = calloc(1, sizeof(*q) + strlen(svc->name) + 1);
	if (!q) {
		close(fd);
		return -ENOMEM;
	}
	q->bus = b;
	q->fd = fd;
	strcpy(q->name, svc->name);
	q->next = b->activator_reqs;
	b->activator_reqs = q;
	r = sd_event_add_io(b->event, &q->src, fd, EPOLLIN, on_activator_io, q);
	if (r >= 0)
		r = sd_event_add_time_relative(b->event, &q->timer, CLOCK_MONOTONIC, b->activation_timeout, 0,
					       on_activator_timeout, q);
	if (r < 0) {
		activator_req_free(q);
		return r;
	}
	log_info("activating %s: asked the activator to start %s", svc->name, svc->unit);
	return 0;
}

static int activation_start(struct bus *b, const struct service *svc, char *err, size_t err_len)
{
	struct start_job *j;
	int r;

	r = activator_start(b, svc);
	if (r == 0)
		return 0;
	if (r != -ENOENT && r != -ECONNREFUSED) {
		snprintf(err, err_len, "cannot reach the activator %s: %s", b->activator_path, strerror(-r));
		return r;
	}
	/* No activator (brokerd run by hand, as root): ask systemd directly. */
	if (!b->sdbus) {
		r = sd_bus_open_system(&b->sdbus);
		if (r < 0) {
			snprintf(err, err_len, "cannot connect to the system bus to reach systemd: %s", strerror(-r));
			return r;
		}
		r = sd_bus_attach_event(b->sdbus, b->event, 0);
		if (r < 0) {
			b->sdbus = sd_bus_flush_close_unref(b->sdbus);
			snprintf(err, err_len, "cannot attach to the event loop: %s", strerror(-r));
			return r;
		}
	}
	j = malloc(sizeof(*j) + strlen(svc->name) + 1);
	if (!j)
		return -ENOMEM;
	j->bus = b;
	strcpy(j->name, svc->name);
	r = sd_bus_call_method_async(b->sdbus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
				     "org.freedesktop.systemd1.Manager", "StartUnit", on_start_unit_reply, j,
				     "ss", svc->unit, "replace");
	if (r < 0) {
		free(j);
		snprintf(err, err_len, "cannot ask systemd to start %s: %s", svc->unit, strerror(-r));
		b->sdbus = sd_bus_flush_close_unref(b->sdbus);
		return r;
	}
	log_info("activating %s: starting %s", svc->name, svc->unit);
	return 0;
}

/* --- helpers for handlers ------------------------------------------------ */

/* The names p is the primary owner of, one a call; *i starts at 0. */
static const char *peer_owned_next(struct registry_peer *p, unsigned int *i)
{
	for (;;) {
		bool primary;
		const char *nm = registry_peer_entry_name(p, (*i)++, &primary);

		if (!nm || primary)
			return nm;
	}
}

static bool conn_privileged(struct bus_conn *c)
{
	return c->cred.uid == 0 || c->cred.uid == geteuid();
}

static bool conn_allowed(struct bus_conn *c, enum policy_action a, const char *name, char *why, size_t why_len)
{
	return policy_check(c->bus->policy, c->cred.uid, c->gids, c->n_gids, a, name, why, why_len);
}

static int deny(struct bus_conn *c, const struct ctrl_message *m, enum policy_action a, const char *name,
		const char *why)
{
	log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "denied %s %s to %s (uid %u): %s",
		 policy_action_to_string(a), name, conn_name(c), c->cred.uid, why);
	return reply_error(c, m, CTRL_ERROR_ACCESS_DENIED, "uid %u may not %s %s: %s", c->cred.uid,
			   policy_action_to_string(a), name, why);
}

static int no_channels(struct bus_conn *c, const struct ctrl_message *m)
{
	return reply_error(c, m, CTRL_ERROR_NOT_SUPPORTED,
			   "this kernel has no io_uring IPC channels (or no capability minting): %s",
			   strerror(-c->bus->chan.probe_error));
}

/* --- unique ids across restarts ------------------------------------------ */

#define ID_BLOCK 1024

/*
 * The state file holds a number above every id handed out in this boot (it
 * lives in /run): written in blocks before the ids are used, read at start.
 */
static void bus_ids_reserve(struct bus *b)
{
	char tmp[4096], buf[32];
	uint64_t next = registry_next_id(b->registry);
	FILE *f;

	if (!b->state_path || next < b->id_reserved)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", b->state_path);
	f = fopen(tmp, "we");
	if (!f) {
		log_warning("cannot write %s: %s (unique names may repeat after a restart)", tmp, strerror(errno));
		b->state_path = NULL;
		return;
	}
	snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)(next + ID_BLOCK));
	fputs(buf, f);
	if (fclose(f) != 0 || rename(tmp, b->state_path) < 0) {
		log_warning("cannot update %s: %s", b->state_path, strerror(errno));
		b->state_path = NULL;
		return;
	}
	b->id_reserved = next + ID_BLOCK;
}

static void bus_ids_load(struct bus *b)
{
	unsigned long long v = 0;
	FILE *f;

	if (!b->state_path)
		return;
	f = fopen(b->state_path, "re");
	if (f) {
		if (fscanf(f, "%llu", &v) == 1 && v > 1)
			registry_next_id_set(b->registry, v);
		fclose(f);
	}
	log_info("unique names start at :1.%llu", (unsigned long long)registry_next_id(b->registry));
	bus_ids_reserve(b);
}

/* --- handlers ------------------------------------------------------------ */

static int handle_hello(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	int failed_quota = -1;
	uint32_t flags;
	int r;

	if (c->peer)
		return reply_error(c, m, CTRL_ERROR_ALREADY_HELLO, "HELLO was already sent");
	ctrl_read_u32(rd, &flags);
	if (flags & ~CTRL_HELLO_NAME_EVENTS)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown HELLO flags 0x%x", flags);
	if (c->over_quota) {
		/* Say why, then close: an over-quota uid cannot pile up idle connections. */
		r = reply_quota(c, m, QUOTA_CONNECTIONS);
		if (!c->out_head)
			conn_kill(c);
		return r;
	}

	r = registry_peer_add(b->registry, c->cred.uid, &c->peer);
	if (r < 0)
		return r;
	bus_ids_reserve(b);
	c->peer->userdata = c;
	c->name_events = flags & CTRL_HELLO_NAME_EVENTS;

	if (b->chan.available) {
		r = bus_channel_new(b, CTRL_CHANNEL_INBOX, c->peer->unique_name, c->cred.uid, &failed_quota,
				    &c->inbox);
		if (r == -EDQUOT) {
			registry_peer_remove(b->registry, c->peer);
			c->peer = NULL;
			return reply_quota(c, m, failed_quota);
		}
		if (r < 0) {
			registry_peer_remove(b->registry, c->peer);
			c->peer = NULL;
			return r;
		}
		fd = cap_mint(b, c->inbox, c, IOIPC_SUB_RECV);
		if (fd < 0) {
			/* Undo, so that the client may try HELLO again. */
			c->inbox = bus_channel_free(b, c->inbox);
			registry_peer_remove(b->registry, c->peer);
			c->peer = NULL;
			return fd;
		}
	}
	r = reply_init(&w, m);
	if (r < 0)
		return r;
	ctrl_write_string(&w, c->peer->unique_name);
	ctrl_write_u64(&w, c->peer->id);
	ctrl_write_u32(&w, b->chan.available ? CTRL_FEATURE_CHANNELS | CTRL_FEATURE_BADGES : 0);
	if (fd >= 0)
		ctrl_write_fd(&w, fd);
	log_full(LOG_INFO, c->peer->unique_name, c->cred.uid, "%s connected: pid %u uid %u gid %u%s%s",
		 c->peer->unique_name, c->cred.pid, c->cred.uid, c->cred.gid, c->label ? " label " : "",
		 c->label ? c->label : "");
	return conn_send(c, &w);
}

static int handle_request_name(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int call_fd = -1, signal_fd = -1;
	struct bus *b = c->bus;
	struct bus_name *n = NULL;
	const char *name;
	uint32_t flags;
	char why[512];
	int r, failed_quota = -1;

	ctrl_read_string(rd, &name, NULL);
	ctrl_read_u32(rd, &flags);
	if (!ctrl_name_is_valid_wellknown(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	if (strcmp(name, CTRL_BUS_NAME) == 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "the bus name cannot be owned");
	if (flags & ~CTRL_NAME_FLAGS_ALL)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (!conn_allowed(c, POLICY_OWN, name, why, sizeof(why)))
		return deny(c, m, POLICY_OWN, name, why);
	if (registry_name_entry_flags(b->registry, c->peer, name) < 0 &&
	    quota_used(b->quota, c->cred.uid, QUOTA_NAMES) >= quota_limit_uid(b->quota, c->cred.uid, QUOTA_NAMES))
		return reply_quota(c, m, QUOTA_NAMES);
	r = bus_name_get(b, name, c->cred.uid, &failed_quota, &n);
	if (r == -EDQUOT)
		return reply_quota(c, m, failed_quota);
	if (r < 0)
		return r;

	b->requester = c;
	r = registry_name_request(b->registry, c->peer, name, flags);
	b->requester = NULL;
	if (r < 0)
		return r;
	/* A replaced owner's caps die before the new owner gets its own. */
	bus_process_revocations(b);

	if (r == CTRL_NAME_PRIMARY_OWNER || r == CTRL_NAME_ALREADY_OWNER ||
	    (r == CTRL_NAME_IN_QUEUE && (flags & CTRL_NAME_POOL))) {
		if (n->call) {
			call_fd = cap_mint(b, n->call, c, IOIPC_SUB_RECV);
			if (call_fd < 0)
				return call_fd;
		}
		if (n->signal && r != CTRL_NAME_IN_QUEUE) {
			signal_fd = cap_mint(b, n->signal, c, IOIPC_SUB_SEND);
			if (signal_fd < 0)
				return signal_fd;
		}
	}
	log_full(LOG_INFO, c->peer->unique_name, c->cred.uid, "%s requested %s: %s", c->peer->unique_name,
		 name, r == CTRL_NAME_PRIMARY_OWNER ? "primary owner" : r == CTRL_NAME_IN_QUEUE ? "in queue" :
		 r == CTRL_NAME_EXISTS ? "exists" : "already owner");
	r = reply_init(&w, m) < 0 ? -ENOMEM : r;
	if (r < 0)
		return r;
	ctrl_write_u32(&w, (uint32_t)r);
	if (call_fd >= 0)
		ctrl_write_fd(&w, call_fd);
	if (signal_fd >= 0)
		ctrl_write_fd(&w, signal_fd);
	return conn_send(c, &w);
}

static int handle_release_name(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus_name *n;
	const char *name;
	int r;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	r = registry_name_release(c->bus->registry, c->peer, name);
	if (r < 0)
		return r;
	if (r == CTRL_RELEASE_RELEASED) {
		n = bus_name_find(c->bus, name);
		if (n)
			n->revoke_pending = true;	/* a pool member holds a call RECV cap too */
	}
	r = reply_init(&w, m) < 0 ? -ENOMEM : r;
	if (r < 0)
		return r;
	ctrl_write_u32(&w, (uint32_t)r);
	return conn_send(c, &w);
}

/* --- listings ----------------------------------------------------------- */

/*
 * A paged reply keeps this much room for the next page's cursor, which is a
 * name (see CTRL_CURSOR_MAX); every entry that is not cut short fits in an
 * otherwise empty page, so each page makes progress.
 */
#define CURSOR_ROOM (2 + CTRL_CURSOR_MAX + 1)

static size_t string_size(const char *s)
{
	return 2 + strlen(s) + 1;
}

static int string_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* LIST_NAMES order: the bus name, well-known names in byte order, unique names by id. */
static int list_order(const char *a, const char *b)
{
	uint64_t ia = 0, ib = 0;
	int ga = strcmp(a, CTRL_BUS_NAME) == 0 ? 0 : ctrl_unique_name_parse(a, &ia) == 0 ? 2 : 1;
	int gb = strcmp(b, CTRL_BUS_NAME) == 0 ? 0 : ctrl_unique_name_parse(b, &ib) == 0 ? 2 : 1;

	if (ga != gb)
		return ga - gb;
	if (ga == 2)
		return ia < ib ? -1 : ia > ib;
	return strcmp(a, b);
}

/* The names LIST_NAMES lists, in list_order; they point into brokerd's state. */
static int list_names_collect(struct bus *b, uint32_t flags, const char ***ret, size_t *ret_n)
{
	size_t n, k = 0;
	const char **v;

	if (flags & CTRL_LIST_ACTIVATABLE) {
		n = service_set_count(b->services);
		v = calloc(n + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (; k < n; k++)
			v[k] = service_set_get(b->services, k)->name;
		qsort(v, n, sizeof(*v), string_cmp);
	} else {
		size_t nn = registry_names_list(b->registry, NULL, 0);

		n = 1 + nn + registry_peer_count(b->registry);
		v = calloc(n + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		v[k++] = CTRL_BUS_NAME;
		k += registry_names_list(b->registry, v + k, nn);	/* sorted by the registry */
		for (struct registry_peer *p = registry_peer_next(b->registry, NULL); p && k < n;
		     p = registry_peer_next(b->registry, p))
			v[k++] = p->unique_name;	/* by id */
	}
	*ret = v;
	*ret_n = k;
	return 0;
}

/*
 * LIST_NAMES, and LIST_NAMES_PAGE when paged: from the first name after
 * cursor, at most max names (0: no limit) and, paged, no more than fit in
 * one reply with the next cursor: the last name listed, or "" at the end.
 * Unpaged, a list larger than a reply fails (-EMSGSIZE).
 */
static int list_names_reply(struct bus_conn *c, const struct ctrl_message *m, uint32_t flags, uint32_t max,
			    const char *cursor, bool paged)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_free_ const char **v = NULL;
	size_t n, from = 0, i, a;
	int r;

	if (flags & ~CTRL_LIST_ACTIVATABLE)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (*cursor && !ctrl_name_is_valid_wellknown(cursor) &&
	    ((flags & CTRL_LIST_ACTIVATABLE) ||
	     (!ctrl_name_is_valid_unique(cursor) && strcmp(cursor, CTRL_BUS_NAME) != 0)))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "invalid cursor '%s'", cursor);
	r = list_names_collect(c->bus, flags, &v, &n);
	if (r < 0)
		return r;
	while (*cursor && from < n && list_order(v[from], cursor) <= 0)
		from++;
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	for (i = from; i < n && (!max || i - from < max); i++) {
		if (paged && w.len + string_size(v[i]) + CURSOR_ROOM > CTRL_MSG_MAX)
			break;
		ctrl_write_string(&w, v[i]);
	}
	ctrl_write_array_close(&w, a, (uint32_t)(i - from));
	if (paged)
		ctrl_write_string(&w, i < n ? v[i - 1] : "");
	return conn_send(c, &w);
}

static int handle_list_queued_owners(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	const char *name;
	size_t n, a;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	n = registry_name_queue(c->bus->registry, name, NULL, 0);
	if (n == 0)
		return reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	_cleanup_free_ struct registry_peer **q = calloc(n, sizeof(*q));
	if (!q)
		return -ENOMEM;
	registry_name_queue(c->bus->registry, name, q, n);
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	for (size_t i = 0; i < n; i++)
		ctrl_write_string(&w, q[i]->unique_name);
	ctrl_write_array_close(&w, a, (uint32_t)n);
	return conn_send(c, &w);
}

static int handle_get_name_owner(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct registry_peer *p;
	const char *name;

	ctrl_read_string(rd, &name, NULL);
	if (strcmp(name, CTRL_BUS_NAME) == 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "the bus itself has no unique name");
	if (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid name", name);
	p = registry_peer_resolve(c->bus->registry, name);
	if (!p)
		return reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_string(&w, p->unique_name);
	return conn_send(c, &w);
}

static int handle_get_credentials(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct registry_peer *p;
	struct bus_conn *t;
	uint32_t mask = CTRL_CREDS_PID | CTRL_CREDS_UID | CTRL_CREDS_GID | CTRL_CREDS_GIDS;
	const char *name;
	size_t a;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid name", name);
	p = registry_peer_resolve(c->bus->registry, name);
	if (!p)
		return reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	t = p->userdata;
	if (t->pidfd >= 0) {
		fd = fcntl(t->pidfd, F_DUPFD_CLOEXEC, 3);
		if (fd >= 0)
			mask |= CTRL_CREDS_PIDFD;
	}
	if (t->label)
		mask |= CTRL_CREDS_LABEL;
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, mask);
	ctrl_write_u32(&w, (uint32_t)t->cred.pid);
	ctrl_write_u32(&w, t->cred.uid);
	ctrl_write_u32(&w, t->cred.gid);
	a = ctrl_write_array_open(&w);
	for (size_t i = 0; i < t->n_gids; i++)
		ctrl_write_u32(&w, t->gids[i]);
	ctrl_write_array_close(&w, a, (uint32_t)t->n_gids);
	ctrl_write_string(&w, t->label ? t->label : "");
	if (fd >= 0)
		ctrl_write_fd(&w, fd);
	return conn_send(c, &w);
}

static int handle_subscribe(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	struct bus_channel *ch = NULL;
	struct bus_name *n;
	const char *name;
	char why[512];
	bool charged = false;
	int r, failed_quota = -1;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name) && strcmp(name, CTRL_BUS_NAME) != 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	/* Policy first: a denial does not depend on the kernel. */
	if (strcmp(name, CTRL_BUS_NAME) != 0 && !conn_allowed(c, POLICY_RECEIVE, name, why, sizeof(why)))
		return deny(c, m, POLICY_RECEIVE, name, why);
	if (!b->chan.available)
		return no_channels(c, m);
	if (strcmp(name, CTRL_BUS_NAME) == 0) {
		ch = b->bus_signal;	/* everybody may watch the bus */
	} else {
		/* One subscription per connection and name, however often it asks again. */
		n = bus_name_find(b, name);
		if (!(n && grant_has(n->signal, c->peer->id, IOIPC_SUB_RECV))) {
			if (quota_charge(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1) < 0)
				return reply_quota(c, m, QUOTA_SUBSCRIPTIONS);
			charged = true;
		}
		r = bus_name_get(b, name, c->cred.uid, &failed_quota, &n);
		if (r < 0)
			goto fail;
		ch = n->signal;
	}
	r = ch ? cap_mint(b, ch, c, IOIPC_SUB_RECV) : -EOPNOTSUPP;
	if (r < 0)
		goto fail;
	fd = r;
	if (charged)
		c->n_subscriptions++;	/* given back by UNSUBSCRIBE or at disconnect */
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_fd(&w, fd);
	return conn_send(c, &w);
fail:
	/* A subscription that did not come about does not count. */
	if (charged)
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1);
	if (r == -EDQUOT)
		return reply_quota(c, m, failed_quota);
	return r == -EOPNOTSUPP ? no_channels(c, m) : r;
}

/*
 * Ends c's subscription to name: its receive right is revoked in the kernel
 * (what it attached through the cap is detached), it no longer counts
 * against the subscriptions quota nor keeps the name's channels (and their
 * channels quota) alive.
 */
static int handle_unsubscribe(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	struct bus_channel *ch;
	struct bus_name *n;
	const char *name;
	bool bus_name, done;

	ctrl_read_string(rd, &name, NULL);
	bus_name = strcmp(name, CTRL_BUS_NAME) == 0;
	if (!ctrl_name_is_valid_wellknown(name) && !bus_name)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	n = bus_name ? NULL : bus_name_find(b, name);
	ch = bus_name ? b->bus_signal : n ? n->signal : NULL;
	done = grant_has(ch, c->peer->id, IOIPC_SUB_RECV);
	if (done)
		grant_revoke(b, ch, c->peer->id, IOIPC_SUB_RECV);
	if (done && !bus_name) {
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1);
		c->n_subscriptions--;
		b->gc_needed = true;	/* maybe nobody uses the name any more */
	}
	if (done)
		log_full(LOG_DEBUG, c->peer->unique_name, c->cred.uid, "%s unsubscribed from %s",
			 c->peer->unique_name, name);
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, done ? CTRL_UNSUBSCRIBE_DONE : CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	return conn_send(c, &w);
}

static int handle_open_call(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	const struct service *svc;
	struct bus_name *n;
	struct activation *a;
	const char *name;
	uint32_t flags;
	char why[512];
	int r, failed_quota = -1;
	bool owned;

	ctrl_read_string(rd, &name, NULL);
	ctrl_read_u32(rd, &flags);
	if (!ctrl_name_is_valid_wellknown(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	if (flags & ~(CTRL_CALL_NO_ACTIVATE | CTRL_CALL_NO_WAIT))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (!conn_allowed(c, POLICY_SEND, name, why, sizeof(why)))
		return deny(c, m, POLICY_SEND, name, why);
	owned = registry_name_owner(b->registry, name) != NULL;
	svc = owned ? NULL : service_set_find(b->services, name);
	if (!owned && (!svc || (flags & CTRL_CALL_NO_ACTIVATE)))
		return reply_error(c, m, svc ? CTRL_ERROR_NAME_HAS_NO_OWNER : CTRL_ERROR_SERVICE_UNKNOWN,
				   "%s has no owner%s", name, svc ? "" : " and is not activatable");

	r = bus_name_get(b, name, c->cred.uid, &failed_quota, &n);
	if (r == -EDQUOT)
		return reply_quota(c, m, failed_quota);
	if (r < 0)
		return r;

	if (!owned) {
		bool wait = !(flags & CTRL_CALL_NO_WAIT);

		if (wait && quota_charge(b->quota, c->cred.uid, QUOTA_ACTIVATIONS, 1) < 0)
			return reply_quota(c, m, QUOTA_ACTIVATIONS);
		if (!n->activating) {
			char err[512];

			r = activation_start(b, svc, err, sizeof(err));
			if (r < 0) {
				if (wait)
					quota_release(b->quota, c->cred.uid, QUOTA_ACTIVATIONS, 1);
				log_warning("activation of %s failed: %s", name, err);
				return reply_error(c, m, CTRL_ERROR_ACTIVATION_FAILED, "%s", err);
			}
			n->activating = true;
		}
		if (wait) {
			a = calloc(1, sizeof(*a));
			if (!a || !(a->name = strdup(name))) {
				free(a);
				quota_release(b->quota, c->cred.uid, QUOTA_ACTIVATIONS, 1);
				return -ENOMEM;
			}
			a->conn = c;
			a->serial = m->hdr.serial;
			r = sd_event_add_time_relative(b->event, &a->timer, CLOCK_MONOTONIC, b->activation_timeout,
						       0, on_activation_timeout, a);
			a->next = b->activations;
			b->activations = a;
			if (r < 0) {
				activation_free(b, a);
				return r;
			}
			return 0;	/* replied when the name is owned or on timeout */
		}
	}
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, owned ? CTRL_CALL_OWNED : CTRL_CALL_ACTIVATING);
	if (n->call) {
		fd = cap_mint(b, n->call, c, IOIPC_SUB_SEND);
		if (fd < 0)
			return fd;
		ctrl_write_fd(&w, fd);
	}
	return conn_send(c, &w);
}

/*
 * May c send to the inbox of peer t by its unique name? It needs "send" on
 * one of the names t owns; a peer that owns none (a plain client waiting for
 * replies) can always be reached.
 */
static bool inbox_send_allowed(struct bus_conn *c, struct registry_peer *t, char *why, size_t why_len)
{
	const char *owned;
	bool any = false;

	for (unsigned int i = 0; (owned = peer_owned_next(t, &i));) {
		any = true;
		if (conn_allowed(c, POLICY_SEND, owned, why, why_len))
			return true;
	}
	return !any || conn_privileged(c);
}

static int handle_open_inbox(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct registry_peer *p;
	struct bus_conn *t;
	const char *name;
	char why[512] = "";
	bool ok;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid name", name);
	if (!c->bus->chan.available)
		return no_channels(c, m);
	p = registry_peer_resolve(c->bus->registry, name);
	if (!p)
		return reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	t = p->userdata;
	/* A well-known name needs "send" on it, a unique name see inbox_send_allowed(). */
	if (ctrl_name_is_valid_wellknown(name))
		ok = conn_allowed(c, POLICY_SEND, name, why, sizeof(why));
	else
		ok = inbox_send_allowed(c, p, why, sizeof(why));
	if (!ok)
		return deny(c, m, POLICY_SEND, name, why);
	if (!t->inbox)
		return no_channels(c, m);
	fd = cap_mint(c->bus, t->inbox, c, IOIPC_SUB_SEND);
	if (fd < 0)
		return fd;
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_string(&w, p->unique_name);
	ctrl_write_fd(&w, fd);
	return conn_send(c, &w);
}

static int handle_monitor(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	uint32_t flags, n = 0;
	int r;

	ctrl_read_u32(rd, &flags);
	if (flags != 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (!b->chan.available)
		return no_channels(c, m);
	if (!b->chan.monitor)
		return reply_error(c, m, CTRL_ERROR_NOT_SUPPORTED,
				   "this kernel cannot mint monitor capabilities (IOIPC_SUB_MONITOR)");
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	/* Count first: the reply comes before the MonitorChannel signals. */
	n += b->bus_signal ? 1 : 0;
	for (struct bus_name *bn = b->names; bn; bn = bn->next)
		n += (bn->call ? 1 : 0) + (bn->signal ? 1 : 0);
	for (struct bus_conn *o = b->conns; o; o = o->next)
		n += o->inbox ? 1 : 0;
	ctrl_write_u32(&w, n);
	r = conn_send(c, &w);
	if (r < 0)
		return r;
	c->monitor = true;
	log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "%s became a monitor", conn_name(c));
	monitor_announce_all(b, c);
	return 0;
}

/*
 * One LIST_PEERS entry. Paged, only if it fits in room bytes (false if
 * not); but the first entry of a page always goes in, with as many of its
 * names as fit, so that a peer owning too many long names cannot stall
 * the listing.
 */
static bool write_peer(struct ctrl_writer *w, struct registry_peer *p, size_t room, bool first)
{
	struct bus_conn *t = p->userdata;
	const char *nm;
	size_t an, end, size = string_size(p->unique_name) + 8 + 3 * 4 + string_size(t->label ? t->label : "") + 4 + 4;
	uint32_t k = 0;

	for (unsigned int i = 0; (nm = peer_owned_next(p, &i));)
		size += string_size(nm);
	if (size > room && !first)
		return false;
	end = room == SIZE_MAX ? SIZE_MAX : w->len + room - 4;	/* where the names must end */
	ctrl_write_string(w, p->unique_name);
	ctrl_write_u64(w, p->id);
	ctrl_write_u32(w, (uint32_t)t->cred.pid);
	ctrl_write_u32(w, t->cred.uid);
	ctrl_write_u32(w, t->cred.gid);
	ctrl_write_string(w, t->label ? t->label : "");
	an = ctrl_write_array_open(w);
	for (unsigned int i = 0; (nm = peer_owned_next(p, &i));) {
		if (w->len + string_size(nm) > end)
			break;	/* cut short: the rest would not fit in any reply */
		ctrl_write_string(w, nm);
		k++;
	}
	ctrl_write_array_close(w, an, k);
	ctrl_write_u32(w, t->n_caps);
	return true;
}

/* LIST_PEERS, and LIST_PEERS_PAGE when paged (as list_names_reply, by id). */
static int list_peers_reply(struct bus_conn *c, const struct ctrl_message *m, uint32_t flags, uint32_t max,
			    const char *cursor, bool paged)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	struct registry_peer *p, *last = NULL;
	uint64_t after = 0;
	uint32_t count = 0;
	size_t a;

	if (flags != 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (*cursor && ctrl_unique_name_parse(cursor, &after) < 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "invalid cursor '%s'", cursor);
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	for (p = registry_peer_next(b->registry, NULL); p; p = registry_peer_next(b->registry, p)) {
		if (p->id <= after)
			continue;
		if (max && count == max)
			break;
		if (!write_peer(&w, p, paged ? CTRL_MSG_MAX - CURSOR_ROOM - w.len : SIZE_MAX, count == 0))
			break;
		last = p;
		count++;
	}
	ctrl_write_array_close(&w, a, count);
	if (paged)
		ctrl_write_string(&w, p && last ? last->unique_name : "");
	return conn_send(c, &w);
}

/* LIST_NAMES and LIST_PEERS, and their paged forms (flags, page size, cursor). */
static int handle_list(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	bool paged = m->hdr.code == CTRL_OP_LIST_NAMES_PAGE || m->hdr.code == CTRL_OP_LIST_PEERS_PAGE;
	const char *cursor = "";
	uint32_t flags, max = 0;

	ctrl_read_u32(rd, &flags);
	if (paged) {
		ctrl_read_u32(rd, &max);
		ctrl_read_string(rd, &cursor, NULL);
	}
	if (m->hdr.code == CTRL_OP_LIST_NAMES || m->hdr.code == CTRL_OP_LIST_NAMES_PAGE)
		return list_names_reply(c, m, flags, max, cursor, paged);
	return list_peers_reply(c, m, flags, max, cursor, paged);
}

static int fill_gids(uid_t uid, gid_t **ret, size_t *n)
{
	char buf[4096];
	struct passwd pw, *res = NULL;
	int ng = 64;
	gid_t *g;

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res) {
		*ret = NULL;
		*n = 0;
		return 0;
	}
	for (;;) {
		g = calloc((size_t)ng, sizeof(*g));
		if (!g)
			return -ENOMEM;
		int want = ng;

		if (getgrouplist(res->pw_name, res->pw_gid, g, &want) >= 0) {
			*ret = g;
			*n = (size_t)want;
			return 0;
		}
		free(g);
		if (want <= ng || want > 65536)
			return -E2BIG;
		ng = want;
	}
}

static int handle_policy_check(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_free_ gid_t *gids = NULL;
	const char *name, *action;
	size_t n_gids = 0;
	uint32_t uid;
	char why[512];
	bool allow;
	int a, r;

	ctrl_read_u32(rd, &uid);
	ctrl_read_string(rd, &name, NULL);
	ctrl_read_string(rd, &action, NULL);
	a = policy_action_from_string(action);
	if (a < 0)
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown action '%s' (own, send, receive)", action);
	if (!ctrl_name_is_valid_wellknown(name))
		return reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name", name);
	if (uid != c->cred.uid && !conn_privileged(c))
		return reply_error(c, m, CTRL_ERROR_ACCESS_DENIED, "only root may check the policy of another uid");
	if (uid == c->cred.uid) {
		allow = conn_allowed(c, (enum policy_action)a, name, why, sizeof(why));
	} else {
		r = fill_gids(uid, &gids, &n_gids);
		if (r < 0)
			return r;
		allow = policy_check(c->bus->policy, uid, gids, n_gids, (enum policy_action)a, name, why,
				     sizeof(why));
	}
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, allow ? CTRL_POLICY_ALLOW : CTRL_POLICY_DENY);
	ctrl_write_string(&w, why);
	return conn_send(c, &w);
}

static int handle_reload(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	char err[512] = "";
	int r;

	log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "reload requested by %s", conn_name(c));
	r = bus_reload(c->bus, err, sizeof(err));
	if (r == -EINVAL)
		return reply_error(c, m, CTRL_ERROR_INVALID_POLICY, "%s", err);
	if (r < 0)
		return r;
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	return conn_send(c, &w);
}

static void write_quota_uid(struct ctrl_writer *w, struct quota *q, uid_t uid)
{
	size_t a;

	ctrl_write_u32(w, uid);
	a = ctrl_write_array_open(w);
	for (unsigned int k = 0; k < _QUOTA_MAX; k++) {
		ctrl_write_string(w, quota_kind_to_string(k));
		ctrl_write_u64(w, quota_used(q, uid, k));
		ctrl_write_u64(w, quota_limit_uid(q, uid, k));
	}
	ctrl_write_array_close(w, a, _QUOTA_MAX);
}

static int handle_quota(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct quota *q = c->bus->quota;
	uint32_t uid, count = 0;
	size_t a, idx = 0;
	uid_t u;

	ctrl_read_u32(rd, &uid);
	if (uid != c->cred.uid && !conn_privileged(c))
		return reply_error(c, m, CTRL_ERROR_ACCESS_DENIED, "only root may read the quotas of other uids");
	if (reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	if (uid == CTRL_QUOTA_ALL_UIDS) {
		while (quota_uid_next(q, &idx, &u) > 0) {
			write_quota_uid(&w, q, u);
			count++;
		}
	} else {
		write_quota_uid(&w, q, uid);
		count = 1;
	}
	ctrl_write_array_close(&w, a, count);
	return conn_send(c, &w);
}

typedef int (*bus_handler_fn)(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);

static const struct bus_handler {
	bus_handler_fn handle;
	bool before_hello;
} handlers[] = {
	[CTRL_OP_HELLO] = { .handle = handle_hello, .before_hello = true },
	[CTRL_OP_REQUEST_NAME] = { .handle = handle_request_name },
	[CTRL_OP_RELEASE_NAME] = { .handle = handle_release_name },
	[CTRL_OP_LIST_NAMES] = { .handle = handle_list },
	[CTRL_OP_LIST_QUEUED_OWNERS] = { .handle = handle_list_queued_owners },
	[CTRL_OP_GET_NAME_OWNER] = { .handle = handle_get_name_owner },
	[CTRL_OP_GET_CREDENTIALS] = { .handle = handle_get_credentials },
	[CTRL_OP_SUBSCRIBE] = { .handle = handle_subscribe },
	[CTRL_OP_OPEN_CALL] = { .handle = handle_open_call },
	[CTRL_OP_OPEN_INBOX] = { .handle = handle_open_inbox },
	[CTRL_OP_MONITOR] = { .handle = handle_monitor },
	[CTRL_OP_LIST_PEERS] = { .handle = handle_list },
	[CTRL_OP_POLICY_CHECK] = { .handle = handle_policy_check },
	[CTRL_OP_RELOAD] = { .handle = handle_reload },
	[CTRL_OP_QUOTA] = { .handle = handle_quota },
	[CTRL_OP_UNSUBSCRIBE] = { .handle = handle_unsubscribe },
	[CTRL_OP_LIST_NAMES_PAGE] = { .handle = handle_list },
	[CTRL_OP_LIST_PEERS_PAGE] = { .handle = handle_list },
};
_Static_assert(ELEMENTSOF(handlers) == _CTRL_OP_MAX, "every op needs a handler");

/* --- connection input ---------------------------------------------------- */

static void conn_dispatch(struct bus_conn *c, const uint8_t *buf, size_t len, unsigned int n_fds, bool truncated)
{
	struct ctrl_message m;
	struct ctrl_reader rd;
	const struct bus_handler *h;
	int r;

	r = truncated ? -EMSGSIZE : ctrl_message_decode(&m, buf, len, n_fds);
	if (truncated)
		ctrl_message_decode(&m, buf, CTRL_HEADER_SIZE, 0);	/* for the serial only */
	if (r == 0 && m.hdr.type != CTRL_TYPE_REQUEST)
		r = -EBADMSG;
	if (r < 0) {
		const char *e = CTRL_ERROR_PROTOCOL;
		const char *why = "malformed message";

		switch (r) {
		case -EPROTO:
			e = CTRL_ERROR_VERSION;
			why = "unsupported protocol version (this broker speaks 1)";
			break;
		case -EOPNOTSUPP:
			e = CTRL_ERROR_UNKNOWN_OP;
			why = "unknown message type or op";
			break;
		case -EMSGSIZE:
			why = "message larger than 65536 bytes";
			break;
		case -ETOOMANYREFS:
			why = "requests carry no file descriptors";
			break;
		}
		m.info = ctrl_op_get(m.hdr.code);
		if (!m.info)
			m.hdr.code = 0;
		log_full(LOG_DEBUG, conn_name(c), c->cred.uid, "bad message from %s: %s", conn_name(c), why);
		reply_error(c, &m, e, "%s", why);
		return;
	}
	h = &handlers[m.hdr.code];
	if (!c->peer && !h->before_hello) {
		reply_error(c, &m, CTRL_ERROR_NO_HELLO, "send HELLO first");
		return;
	}
	if (m.info->privileged && !conn_privileged(c)) {
		reply_error(c, &m, CTRL_ERROR_ACCESS_DENIED, "%s is for root only", m.info->name);
		return;
	}
	ctrl_reader_init(&rd, &m);
	r = h->handle(c, &m, &rd);
	if (r == -EMSGSIZE && !c->dead)
		reply_error(c, &m, CTRL_ERROR_FAILED, "%s: the reply would exceed %d bytes", m.info->name,
			    CTRL_MSG_MAX);
	else if (r < 0 && r != -ENOBUFS && !c->dead)
		reply_error(c, &m, r == -ENOMEM ? CTRL_ERROR_NO_MEMORY : CTRL_ERROR_FAILED, "%s failed: %s",
			    m.info->name, strerror(-r));
	bus_process_revocations(c->bus);
}

static int conn_read(struct bus_conn *c)
{
	static uint8_t buf[CTRL_MSG_MAX + 1];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 253)];
	} u;

	for (unsigned int i = 0; i < CONN_BATCH && !c->dead && !c->out_head; i++) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u,
				     .msg_controllen = sizeof(u) };
		unsigned int n_fds = 0;
		ssize_t n;

		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET;
		/* Clients never send fds: close whatever came, then let the decoder complain. */
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				int *fds = (int *)CMSG_DATA(cm);

				for (size_t j = 0; j < k; j++)
					close(fds[j]);
				n_fds += (unsigned int)k;
			}
		}
		conn_dispatch(c, buf, (size_t)n, n_fds,
			      (mh.msg_flags & MSG_TRUNC) || (size_t)n > CTRL_MSG_MAX);
	}
	return 0;
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus_conn *c = userdata;
	int r = 0;

	if (revents & EPOLLOUT)
		r = conn_flush(c);
	if (r == 0 && !c->dead && (revents & EPOLLIN))
		r = conn_read(c);
	if (r == 0 && !c->dead && !c->out_head && (revents & (EPOLLHUP | EPOLLERR)))
		r = -ECONNRESET;
	if (r < 0 || c->dead)
		conn_free(c);
	return 0;
}

static void conn_read_creds(struct bus_conn *c)
{
	socklen_t l = sizeof(c->cred);
	char label[4096];

	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &l) < 0) {
		c->cred.uid = (uid_t)-1;	/* never matches a rule but "default" */
		c->cred.gid = (gid_t)-1;
	}
	for (size_t ng = 32; ng <= 65536; ng *= 4) {
		gid_t *g = calloc(ng, sizeof(*g));

		if (!g)
			break;
		l = (socklen_t)(ng * sizeof(*g));
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, g, &l) == 0) {
			c->gids = g;
			c->n_gids = l / sizeof(*g);
			break;
		}
		free(g);
		if (errno != ERANGE)
			break;
	}
	if (!c->gids) {
		/* At least the primary group, for group rules. */
		c->gids = calloc(1, sizeof(*c->gids));
		if (c->gids) {
			c->gids[0] = c->cred.gid;
			c->n_gids = 1;
		}
	}
	l = sizeof(c->pidfd);
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERPIDFD, &c->pidfd, &l) < 0)
		c->pidfd = -1;
	l = sizeof(label) - 1;
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERSEC, label, &l) == 0 && l > 0) {
		label[l] = 0;
		c->label = strdup(label);
	}
}

static void conn_free(struct bus_conn *c)
{
	struct bus *b;

	if (!c)
		return;
	b = c->bus;
	c->dead = true;
	for (struct activation *a = b->activations, *next; a; a = next) {
		next = a->next;
		if (a->conn == c)
			activation_free(b, a);
	}
	if (c->peer) {
		uint64_t id = c->peer->id;

		log_full(LOG_INFO, c->peer->unique_name, c->cred.uid, "%s disconnected", c->peer->unique_name);
		registry_peer_remove(b->registry, c->peer);	/* names go, queues are promoted */
		c->peer = NULL;
		/*
		 * The process may live on, attached to channels, without its
		 * connection: all it was granted goes with the connection.
		 */
		for (struct bus_name *n = b->names; n; n = n->next) {
			grant_revoke(b, n->call, id, GRANT_ALL);
			grant_revoke(b, n->signal, id, GRANT_ALL);
		}
		grant_revoke(b, b->bus_signal, id, GRANT_ALL);
		for (struct bus_conn *o = b->conns; o; o = o->next)
			grant_revoke(b, o->inbox, id, GRANT_ALL);
	}
	c->inbox = bus_channel_free(b, c->inbox);
	if (c->n_subscriptions)
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, c->n_subscriptions);
	if (!c->over_quota)
		quota_release(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1);
	while (c->out_head) {
		struct out_msg *o = c->out_head;

		c->out_head = o->next;
		out_msg_free(o);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		b->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	sd_event_source_disable_unref(c->src);
	close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c->gids);
	free(c->label);
	free(c);
	b->gc_needed = true;
	bus_process_revocations(b);
}

int bus_add_connection(struct bus *b, int cfd)
{
	struct bus_conn *c;
	int r;

	if (!b || cfd < 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(cfd);
		return -ENOMEM;
	}
	c->bus = b;
	c->fd = cfd;
	conn_read_creds(c);
	/* Over quota: keep the connection long enough to say so (and log it) in reply to HELLO. */
	if (quota_charge(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1) < 0)
		c->over_quota = true;
	r = sd_event_add_io(b->event, &c->src, cfd, EPOLLIN, on_conn_io, c);
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	if (r < 0) {
		conn_free(c);
		return r;
	}
	return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus *b = userdata;
	int cfd;

	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warning("accept: %s", strerror(errno));
		return 0;
	}
	(void)bus_add_connection(b, cfd);
	return 0;
}

/* --- policy reload and revocation ---------------------------------------- */

static void apply_limits(struct bus *b)
{
	enum quota_kind k;
	uint64_t l;
	uid_t uid;

	for (unsigned int q = 0; q < _QUOTA_MAX; q++) {
		l = policy_limit(b->policy, q);
		quota_limit_set(b->quota, q, l == UINT64_MAX ? quota_limit_default(q) : l);
	}
	quota_limit_reset_uids(b->quota);
	for (size_t i = 0; policy_limit_uid_get(b->policy, i, &uid, &k, &l); i++)
		quota_limit_set_uid(b->quota, uid, k, l);
}

/*
 * Which of rights on ch may peer p no longer hold? Owner rights (call RECV,
 * signal SEND) follow the name's ownership, the others the policy; monitor
 * rights last as long as the monitor's connection.
 */
static uint32_t grant_lost_rights(struct bus *b, struct bus_channel *ch, struct registry_peer *p, uint32_t rights)
{
	struct bus_conn *c = p->userdata;
	int flags = registry_name_entry_flags(b->registry, p, ch->name);
	bool primary = registry_name_owner(b->registry, ch->name) == p;
	struct registry_peer *t;
	uint32_t lost = 0;

	switch (ch->kind) {
	case CTRL_CHANNEL_CALL:
		if ((rights & IOIPC_SUB_RECV) && !(primary || (flags >= 0 && (flags & CTRL_NAME_POOL))))
			lost |= IOIPC_SUB_RECV;
		if ((rights & IOIPC_SUB_SEND) && !conn_allowed(c, POLICY_SEND, ch->name, NULL, 0))
			lost |= IOIPC_SUB_SEND;
		break;
	case CTRL_CHANNEL_SIGNAL:
		if ((rights & IOIPC_SUB_SEND) && !primary)
			lost |= IOIPC_SUB_SEND;
		if ((rights & IOIPC_SUB_RECV) && !conn_allowed(c, POLICY_RECEIVE, ch->name, NULL, 0))
			lost |= IOIPC_SUB_RECV;
		break;
	case CTRL_CHANNEL_INBOX:
		t = registry_peer_resolve(b->registry, ch->name);
		if ((rights & IOIPC_SUB_SEND) && t && t != p && !inbox_send_allowed(c, t, NULL, 0))
			lost |= IOIPC_SUB_SEND;
		break;
	}
	return lost;
}

static void cap_signal(struct bus_conn *c, enum ctrl_signal s, struct bus_channel *ch)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, s, 0) < 0)
		return;
	ctrl_write_string(&w, ch->name);
	ctrl_write_u32(&w, ch->kind);
	conn_signal(c, &w);
}

/* Take back from every holder of ch what policy and ownership no longer grant. */
static void channel_revoke(struct bus *b, struct bus_channel *ch)
{
	for (size_t i = 0; i < ch->n_grants;) {
		struct grant g = ch->grants[i];
		struct registry_peer *p = registry_peer_find(b->registry, g.peer_id);
		uint32_t lost = p ? grant_lost_rights(b, ch, p, g.rights) : g.rights;
		struct bus_conn *c;

		if (!lost) {
			i++;
			continue;
		}
		grant_revoke(b, ch, g.peer_id, lost);	/* may move another grant to i */
		if (!p)
			continue;
		c = p->userdata;
		log_full(LOG_NOTICE, p->unique_name, c->cred.uid, "revoked %s right of %s on %s",
			 lost == IOIPC_SUB_BOTH ? "send and receive" : lost & IOIPC_SUB_SEND ? "send" : "receive",
			 p->unique_name, ch->name);
		cap_signal(c, CTRL_SIGNAL_CAPABILITY_REVOKED, ch);
		if (i < ch->n_grants && ch->grants[i].peer_id == g.peer_id)
			i++;
	}
}

static void bus_revoke(struct bus *b)
{
	/* Owners the policy no longer allows lose their names first (NameLost, promotion). */
	for (struct registry_peer *p = registry_peer_next(b->registry, NULL); p; p = registry_peer_next(b->registry, p)) {
		struct bus_conn *c = p->userdata;

		for (unsigned int i = 0;;) {
			char why[512];
			const char *name = registry_peer_entry_name(p, i, NULL);
			_cleanup_free_ char *copy = NULL;

			if (!name)
				break;
			if (conn_allowed(c, POLICY_OWN, name, why, sizeof(why))) {
				i++;
				continue;
			}
			copy = strdup(name);
			if (!copy)
				break;
			log_full(LOG_NOTICE, p->unique_name, c->cred.uid, "%s may no longer own %s: %s",
				 p->unique_name, copy, why);
			registry_name_release(b->registry, p, copy);
		}
	}
	for (struct bus_name *n = b->names; n; n = n->next)
		n->revoke_pending = true;
	/* Inbox send rights depend on the policy too. */
	for (struct bus_conn *c = b->conns; c; c = c->next)
		if (c->inbox)
			channel_revoke(b, c->inbox);
	bus_process_revocations(b);
}

/* Monitors watch what is there; they do not keep a name's channels alive. */
static bool channel_held(struct bus *b, struct bus_channel *ch)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++)
		if ((ch->grants[i].rights & ~IOIPC_SUB_MONITOR) &&
		    registry_peer_find(b->registry, ch->grants[i].peer_id))
			return true;
	return false;
}

/*
 * A name's channels live while it has an owner or a queue, an activation is
 * pending, or a connected peer holds one of its caps (a subscriber waiting
 * for the next owner). Then they go, and the quota of the uid that caused
 * them is released.
 */
static void bus_gc_names(struct bus *b)
{
	struct bus_name **pp = &b->names;

	if (!b->gc_needed)
		return;
	b->gc_needed = false;
	while (*pp) {
		struct bus_name *n = *pp;
		bool busy = n->activating || n->revoke_pending ||
			    registry_name_queue(b->registry, n->name, NULL, 0) > 0 ||
			    channel_held(b, n->call) || channel_held(b, n->signal);

		for (struct activation *a = b->activations; a && !busy; a = a->next)
			busy = strcmp(a->name, n->name) == 0;
		if (busy) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		log_debug("name %s is idle: its channels go", n->name);
		bus_channel_free(b, n->call);
		bus_channel_free(b, n->signal);
		free(n->name);
		free(n);
	}
}

static void bus_process_revocations(struct bus *b)
{
	for (struct bus_name *n = b->names; n; n = n->next) {
		if (!n->revoke_pending)
			continue;
		n->revoke_pending = false;
		if (n->call)
			channel_revoke(b, n->call);
		if (n->signal)
			channel_revoke(b, n->signal);
	}
	bus_gc_names(b);
}

int bus_reload(struct bus *b, char *err, size_t err_len)
{
	struct policy *p = NULL;
	struct service_set *s = NULL;
	char serr[512] = "";
	unsigned int bad = 0;
	int r;

	r = policy_load(&p, b->policy_dirs, err, err_len);
	if (r < 0) {
		log_error("policy not reloaded, keeping the previous one: %s", err);
		return r;
	}
	policy_free(b->policy);
	b->policy = p;
	apply_limits(b);
	log_notice("policy loaded: %zu rules", policy_rule_count(p));
	r = service_set_load(&s, b->service_dirs, &bad, serr, sizeof(serr));
	if (r == 0) {
		service_set_free(b->services);
		b->services = s;
		if (bad)
			log_warning("%u activation file(s) ignored, last error: %s", bad, serr);
	}
	bus_revoke(b);
	return 0;
}

/* --- setup --------------------------------------------------------------- */

static int on_ring(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus *b = userdata;

	chanmgr_process(&b->chan);
	return 0;
}

int bus_new(struct bus **ret, sd_event *event, const struct bus_config *config)
{
	struct bus *b;
	char err[512] = "";
	int r, failed_quota;

	if (!ret || !event)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->event = sd_event_ref(event);
	b->listen_fd = -1;
	b->policy_dirs = config && config->policy_dirs ? config->policy_dirs : default_policy_dirs;
	b->service_dirs = config && config->service_dirs ? config->service_dirs : default_service_dirs;
	b->activator_path = config && config->activator_path ? config->activator_path : BUS_ACTIVATOR_PATH;
	b->activation_timeout = config && config->activation_timeout_usec ? config->activation_timeout_usec
									   : ACTIVATION_TIMEOUT_USEC;
	r = registry_new(&b->registry, &registry_ops, b);
	if (r < 0)
		goto fail;
	r = quota_new(&b->quota);
	if (r < 0)
		goto fail;
	b->state_path = config ? config->state_path : NULL;
	bus_ids_load(b);
	if (!(config && config->no_channels)) {
		chanmgr_init(&b->chan);
		if (!b->chan.available)
			log_warning("io_uring IPC channels unavailable (%s failed: %s): running without a data plane",
				    b->chan.probe_step, strerror(-b->chan.probe_error));
	} else {
		b->chan.probe_error = -EOPNOTSUPP;
	}
	if (b->chan.available) {
		/* A slow subscriber should lose old signals, not block the publisher (or the bus). */
		uint32_t id;

		if (chanmgr_create(&b->chan, IOIPC_F_BROADCAST | IOIPC_F_LOSSY, &id) == 0) {
			chanmgr_destroy(&b->chan, id);
			b->lossy = IOIPC_F_LOSSY;
		} else {
			log_warning("kernel has no IOIPC_F_LOSSY: a subscriber that stops reading blocks its publisher");
		}
	}
	if (b->chan.ring_ok) {
		r = sd_event_add_io(event, &b->ring_src, chanmgr_fd(&b->chan), EPOLLIN, on_ring, b);
		if (r < 0)
			goto fail;
	}
	if (b->chan.available) {
		r = bus_channel_new(b, CTRL_CHANNEL_SIGNAL, CTRL_BUS_NAME, geteuid(), &failed_quota, &b->bus_signal);
		if (r < 0)
			goto fail;
	}
	/* A bad policy at startup: run with the built-in one (root only), never a looser one. */
	r = bus_reload(b, err, sizeof(err));
	if (r == -EINVAL) {
		r = policy_new(&b->policy);
		if (r < 0)
			goto fail;
		log_error("running with the built-in policy (root only) until the policy is fixed and reloaded");
	} else if (r < 0) {
		goto fail;
	}
	*ret = b;
	return 0;
fail:
	bus_free(b);
	return r;
}

struct bus *bus_free(struct bus *b)
{
	if (!b)
		return NULL;
	while (b->activator_reqs)
		activator_req_free(b->activator_reqs);
	/* Before the rest goes: a pending StartUnit callback may still run here. */
	b->sdbus = sd_bus_flush_close_unref(b->sdbus);
	while (b->conns)
		conn_free(b->conns);
	while (b->names) {
		struct bus_name *n = b->names;

		b->names = n->next;
		bus_channel_free(b, n->call);
		bus_channel_free(b, n->signal);
		free(n->name);
		free(n);
	}
	b->bus_signal = bus_channel_free(b, b->bus_signal);
	sd_event_source_disable_unref(b->listen_src);
	sd_event_source_disable_unref(b->ring_src);
	if (b->listen_fd >= 0)
		close(b->listen_fd);
	chanmgr_deinit(&b->chan);
	registry_free(b->registry);
	policy_free(b->policy);
	quota_free(b->quota);
	service_set_free(b->services);
	sd_event_unref(b->event);
	free(b);
	return NULL;
}

int bus_listen(struct bus *b, int fd)
{
	int r;

	if (!b || fd < 0)
		return -EINVAL;
	r = sd_event_add_io(b->event, &b->listen_src, fd, EPOLLIN, on_accept, b);
	if (r < 0)
		return r;
	b->listen_fd = fd;
	return 0;
}

bool bus_channels_available(struct bus *b)
{
	return b && b->chan.available;
}

void bus_status(struct bus *b, char *buf, size_t len)
{
	snprintf(buf, len, "%zu peers, %zu names, channels %s", registry_peer_count(b->registry),
		 registry_names_list(b->registry, NULL, 0), b->chan.available ? "on" : "unavailable");
}
