/* SPDX-License-Identifier: MIT */
/*
 * dbus-bridge.c - calls between D-Bus and native clients (dbus-bridge.h).
 * D-Bus to native: per D-Bus connection that calls a native service, an
 * inbox and SEND caps on the call channels of the names it calls, all
 * badged with its id, and the calls waiting for their reply. Native to
 * D-Bus: brokerd receives on the call channel of a name a D-Bus connection
 * owns, and sends the reply into the native caller's inbox with a cap
 * badged with the D-Bus callee's id. Headers are translated both ways,
 * bodies and fds passed on as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/chan-msg.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
#include "brokerd/dbus-access.h"
#include "brokerd/dbus-bridge.h"
#include "brokerd/grant.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
/*
 * The client library's channel layer, linked as it is (brokerd/meson.build):
 * brokerd here is a client of the channels like any other, and this is the
 * one place where the daemon reaches across to client/.
 */
#include "client/chan.h"
#include "protocol/body-memfd.h"
#include "protocol/ctrl.h"
#include "protocol/dbus-marshal.h"
#include "protocol/message.h"
#include "util/clock.h"
#include "util/macro.h"

#define ERR(x) "org.freedesktop.DBus.Error." x

#define BRIDGE_RING_ENTRIES 256
#define CHAN_KIND_INBOX	    1 /* a D-Bus caller's inbox: RECV */
#define CHAN_KIND_CALL	    2 /* a call channel, or a native caller's inbox: SEND */
#define CHAN_KIND_SERVE	    3 /* the call channel of a D-Bus client's name: RECV */
#define CHAN_KIND_SIGNAL    4 /* a native name's signal channel: RECV */

/* The badge of brokerd's own receive caps (never stamped: nothing is sent through them). */
#define BRIDGE_BADGE (UINT64_MAX - 1)

/* A native name a D-Bus connection calls: the SEND cap on its call channel, attached. */
struct bridge_target {
	char *name;
	uint32_t channel_id; /* the channel the cap is for: a name owned anew has a new one */
	uint32_t msg_max;    /* its slot size: larger messages carry their body in a memfd */
	struct chan *send;
	struct bridge_target *next;
};

/* A D-Bus connection that called a native service. */
struct bridge_peer {
	struct dbus_bridge *bridge;
	struct dbus_conn *conn;
	uint64_t id;
	struct bus_channel *inbox; /* replies come here: brokerd holds RECV */
	struct chan *recv;
	struct bridge_target *targets;
};

/* A bridged call waiting for its reply. */
struct bridge_call {
	struct bridge_peer *peer;
	uint32_t serial;   /* the D-Bus caller's, also the channel message's */
	char *name;	   /* the native name called */
	uint64_t deadline; /* CLOCK_MONOTONIC usec: NoReply then (reply_timeout_ms); UINT64_MAX never */
	struct bridge_call *next;
};

/* A name a D-Bus connection owns that native clients call: brokerd receives its calls. */
struct bridge_serve {
	char *name;
	uint64_t owner; /* the D-Bus owner's id: changed only once what came for the last one went to it */
	uint32_t channel_id;
	struct chan *recv;
	struct bridge_serve *next;
};

/* A native client's call passed on to a D-Bus connection, waiting for its reply. */
struct bridge_ncall {
	struct dbus_conn *callee;
	uint32_t serial;	/* of the D-Bus message brokerd wrote */
	uint64_t caller;	/* the native caller's id (the kernel's badge) */
	uint32_t caller_serial; /* its call's */
	uint64_t deadline;	/* as a bridge_call's */
	struct bridge_ncall *next;
};

/* A native name whose signals brokerd receives for D-Bus clients' match rules. */
struct bridge_sub {
	char *name;
	uint32_t channel_id;
	struct chan *recv;
	struct bridge_sub *next;
};

/* Native calls waiting for a D-Bus reply, all callees together: beyond this, no reply is waited for. */
#define BRIDGE_NCALLS_MAX 65536U

struct dbus_bridge {
	struct dbus_front *front;
	struct bus *bus;
	struct ring ring;
	sd_event_source *src;
	struct bridge_call *calls;
	struct bridge_serve *serves;
	struct bridge_sub *subs;
	bool watching; /* some D-Bus client has a match rule: native signals are received */
	struct bridge_ncall *ncalls;
	unsigned int n_ncalls;
	sd_event_source *timer; /* at the first deadline of calls and ncalls, or earlier */
	uint64_t timer_at;	/* when it fires; UINT64_MAX: off */
	uint32_t serial;	/* of the calls brokerd writes to D-Bus callees */
	unsigned long dropped; /* messages refused: invalid, unsolicited or from the wrong sender */
};

/* ---- Reply timeouts -------------------------------------------------------------- */

/*
 * Bridged calls time out as calls between D-Bus clients do (dbus-conn.c):
 * after reply_timeout_ms (never when 0, dbus-daemon's default) the caller
 * gets NoReply from the bus, a D-Bus caller as a D-Bus error, a native
 * caller as an ERROR in its inbox, and a late reply is refused.
 */
static const char timed_out[] = "Message did not receive a reply (timeout by message bus)";

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static uint64_t call_deadline(struct dbus_bridge *br)
{
	uint64_t ms = quota_bus_limit(br->bus->quota, QUOTA_BUS_REPLY_TIMEOUT_MS);

	return ms == 0 || ms > UINT64_MAX / 2 / 1000ULL ? UINT64_MAX : now_usec() + ms * 1000ULL;
}

/* The timer fires at deadline, or earlier if it is set to. */
static void timer_arm(struct dbus_bridge *br, uint64_t deadline)
{
	int r;

	if (deadline == UINT64_MAX || deadline >= br->timer_at)
		return;
	br->timer_at = deadline;
	if (!br->timer)
		r = sd_event_add_time(br->front->event, &br->timer, CLOCK_MONOTONIC, deadline, 1000ULL,
				      on_timer, br);
	else if ((r = sd_event_source_set_time(br->timer, deadline)) >= 0)
		r = sd_event_source_set_enabled(br->timer, SD_EVENT_ONESHOT);
	if (r < 0) {
		br->timer_at = UINT64_MAX;
		log_error("bridge: cannot arm the reply timer: bridged calls may wait past reply_timeout_ms");
	}
}

/* ---- Per D-Bus connection ---------------------------------------------------- */

static struct bridge_target *target_free(struct dbus_bridge *br, struct bridge_target *t)
{
	if (!t)
		return NULL;
	chan_close(&br->ring, t->send);
	free(t->name);
	free(t);
	return NULL;
}

static void ncall_drop(struct dbus_bridge *br, struct bridge_ncall **pk)
{
	struct bridge_ncall *k = *pk;

	*pk = k->next;
	br->n_ncalls--;
	free(k);
}

static void call_free(struct bridge_call *k)
{
	if (k->peer->conn->n_replies > 0)
		k->peer->conn->n_replies--;
	free(k->name);
	free(k);
}

static void peer_free(struct dbus_bridge *br, struct bridge_peer *bp)
{
	for (struct bridge_call **p = &br->calls; *p;) {
		struct bridge_call *k = *p;

		if (k->peer != bp) {
			p = &k->next;
			continue;
		}
		*p = k->next;
		call_free(k);
	}
	while (bp->targets) {
		struct bridge_target *t = bp->targets;

		bp->targets = t->next;
		target_free(br, t);
	}
	chan_close(&br->ring, bp->recv);
	/* An inbox's SEND caps (the services' reply caps) are revoked with it. */
	bus_channel_free(br->bus, bp->inbox);
	bp->conn->bridge = NULL;
	free(bp);
}

void dbus_bridge_conn_gone(struct dbus_conn *c)
{
	struct dbus_bridge *br = c->front->bridge;

	if (!br)
		return;
	/* Native calls it did not answer: its callers learn from NameOwnerChanged that it went. */
	for (struct bridge_ncall **pk = &br->ncalls; *pk;)
		if ((*pk)->callee == c)
			ncall_drop(br, pk);
		else
			pk = &(*pk)->next;
	if (c->bridge)
		peer_free(br, c->bridge);
}

/* The connection's bridge state, made when it first calls or serves across. */
static int peer_get(struct dbus_bridge *br, struct dbus_conn *c, struct bridge_peer **ret)
{
	struct bridge_peer *bp;

	if (!c->bridge) {
		bp = calloc(1, sizeof(*bp));
		if (!bp)
			return -ENOMEM;
		bp->bridge = br;
		bp->conn = c;
		bp->id = c->peer->id;
		c->bridge = bp;
	}
	*ret = c->bridge;
	return 0;
}

/* Its inbox, made on its first call to a native service, with brokerd receiving there. */
static int peer_inbox(struct dbus_bridge *br, struct bridge_peer *bp, int *failed_quota)
{
	struct dbus_conn *c = bp->conn;
	int fd, r;

	if (bp->inbox)
		return 0;
	/* Charged to the connection's uid as a native client's inbox is. */
	r = bus_channel_new(br->bus, CTRL_CHANNEL_INBOX, c->name, c->cred.uid, failed_quota, &bp->inbox);
	if (r < 0)
		return r;
	fd = chanmgr_mint(&br->bus->chanmgr, bp->inbox->id, IOIPC_SUB_RECV, bp->id);
	if (fd < 0)
		r = fd;
	if (r == 0)
		r = grant_record(bp->inbox, bp->id, IOIPC_SUB_RECV);
	if (r == 0)
		r = chan_attach(&br->ring, fd, IOIPC_SUB_RECV, CHMSG_MAX, CHAN_KIND_INBOX, bp, &bp->recv);
	if (fd >= 0)
		close(fd);
	if (r == 0)
		r = chan_arm(&br->ring, bp->recv);
	if (r < 0) {
		chan_close(&br->ring, bp->recv);
		bp->recv = NULL;
		bp->inbox = bus_channel_free(br->bus, bp->inbox);
	}
	return r;
}

/*
 * Every receiver of n's calls gets a SEND cap to bp's inbox, as for a
 * native caller (grant.c, reply_caps_for_caller()): it answers without
 * asking brokerd, and OPEN_INBOX stays its fallback.
 */
static void reply_caps_push(struct dbus_bridge *br, struct bridge_peer *bp, struct bus_name *n)
{
	struct bus *b = br->bus;

	for (size_t i = 0; n->call && i < n->call->n_grants; i++) {
		_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
		_cleanup_close_ int fd = -1;
		struct registry_peer *p;
		struct bus_conn *r;

		if (!(n->call->grants[i].rights & IOIPC_SUB_RECV) ||
		    !(p = registry_peer_find(b->registry, n->call->grants[i].peer_id)))
			continue;
		r = conn_of_peer(p);
		if (!r || r->dead || r->ended || !conn_has_room(r) ||
		    !inbox_send_allowed(r, bp->conn->peer, NULL, 0))
			continue;
		if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_REPLY_CAPABILITY, 0) < 0)
			continue;
		fd = cap_mint(b, bp->inbox, r, IOIPC_SUB_SEND);
		if (fd < 0)
			continue;
		ctrl_write_string(&w, bp->conn->name);
		ctrl_write_string(&w, n->name);
		ctrl_write_fd(&w, TAKE_FD(fd));
		conn_signal(r, &w);
	}
}

/*
 * A SEND cap on channel ch (a name's call channel, or a native caller's
 * inbox, key its name), badged with bp's connection id, minted and
 * attached on first use or when the key has a new channel. Not recorded as
 * a grant: brokerd holds it, and checks the policy on every call it sends.
 */
static int target_get(struct dbus_bridge *br, struct bridge_peer *bp, const char *key, struct bus_channel *ch,
		      struct bridge_target **ret)
{
	struct bridge_target *t, **pp;
	int fd, r;

	for (pp = &bp->targets; (t = *pp); pp = &t->next)
		if (!strcmp(t->name, key))
			break;
	if (t && t->channel_id == ch->id) {
		*ret = t;
		return 0;
	}
	if (t) {
		*pp = t->next;
		target_free(br, t);
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->name = strdup(key))) {
		free(t);
		return -ENOMEM;
	}
	t->channel_id = ch->id;
	t->msg_max = ch->slot_size;
	fd = chanmgr_mint(&br->bus->chanmgr, ch->id, IOIPC_SUB_SEND, bp->id);
	if (fd < 0) {
		target_free(br, t);
		return fd;
	}
	r = chan_attach(&br->ring, fd, IOIPC_SUB_SEND, 0, CHAN_KIND_CALL, bp, &t->send);
	close(fd);
	if (r < 0) {
		target_free(br, t);
		return r;
	}
	t->next = bp->targets;
	bp->targets = t;
	*ret = t;
	return 0;
}

/* The SEND cap for calls to native name; its receivers get reply caps for bp's inbox first. */
static int call_target_get(struct dbus_bridge *br, struct bridge_peer *bp, const char *name,
			   struct bridge_target **ret)
{
	struct bus_name *n = bus_name_find(br->bus, name);
	struct bridge_target *t = NULL;
	int r;

	if (!n || !n->call)
		return -ENOENT;
	for (t = bp->targets; t && strcmp(t->name, name); t = t->next)
		;
	if (t && t->channel_id == n->call->id) {
		*ret = t;
		return 0;
	}
	r = target_get(br, bp, name, n->call, ret);
	if (r == 0)
		reply_caps_push(br, bp, n);
	return r;
}

/* ---- D-Bus to native ----------------------------------------------------------- */

/* A memfd holding body (len bytes), sealed against any change (protocol/README.md 7.6). */
static int body_memfd(const void *body, size_t len)
{
	_cleanup_close_ int fd = -1;
	size_t done = 0;

	fd = memfd_create("brokerd-bridge-body", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, (const uint8_t *)body + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, CHMSG_BODY_SEALS) < 0)
		return -errno;
	return TAKE_FD(fd);
}

static void refuse(struct dbus_conn *c, const struct dbus_message *m, const char *error, const char *fmt,
		   const char *arg)
{
	char text[512];

	snprintf(text, sizeof(text), fmt, arg);
	(void)dbus_driver_reply_error(c, m, error, text);
}

/* Send cm (its body native, fds n) on t's channel: inline, or with its body in a memfd when it does not fit. */
static int msg_send(struct dbus_bridge *br, struct bridge_target *t, struct chmsg *cm, const int *fds,
		    unsigned int n)
{
	_cleanup_free_ uint8_t *buf = NULL;
	int all[CHMSG_FDS_MAX];
	_cleanup_close_ int memfd = -1;
	int len, r;

	buf = malloc(t->msg_max);
	if (!buf)
		return -ENOMEM;
	cm->n_fds = n;
	len = chmsg_encode(cm, buf, t->msg_max);
	if (len == -EMSGSIZE) {
		if (n + 1 > CHMSG_FDS_MAX || cm->body_len > CHMSG_BODY_MAX)
			return -EMSGSIZE;
		cm->body_in_fd = true;
		cm->n_fds++;
		len = chmsg_encode(cm, buf, t->msg_max);
		if (len < 0)
			return len;
		memfd = body_memfd(cm->body, cm->body_len);
		if (memfd < 0)
			return memfd;
	}
	if (len < 0)
		return len;
	if (n)
		memcpy(all, fds, n * sizeof(int));
	if (memfd >= 0)
		all[n++] = memfd;
	/* The kernel takes its own references: ours are closed by the callers after this. */
	r = chan_send_fds(&br->ring, t->send, buf, (size_t)len, n ? all : NULL, n);
	return r < 0 ? r : 0;
}

/* The channel message of type for D-Bus message m: its header fields, its body as it is. */
static void chmsg_of(struct chmsg *cm, uint8_t type, const struct dbus_message *m)
{
	*cm = (struct chmsg){
		.type = type,
		.flags = m->h.flags & CHMSG_F_ALL,
		.serial = m->h.serial,
		.path = m->h.path,
		.interface = m->h.interface,
		.member = m->h.member,
		.destination = m->h.destination,
		.signature = m->h.signature,
		.body = m->body,
		.body_len = (uint32_t)m->body_len,
	};
}

static int call_send(struct dbus_bridge *br, struct bridge_target *t, const struct dbus_message *m,
		     const int *fds)
{
	struct chmsg cm;

	chmsg_of(&cm, CHMSG_CALL, m);
	return msg_send(br, t, &cm, fds, m->h.n_fds);
}

static struct bridge_ncall **ncall_find(struct dbus_bridge *br, struct dbus_conn *callee, uint32_t serial)
{
	for (struct bridge_ncall **p = &br->ncalls; *p; p = &(*p)->next)
		if ((*p)->callee == callee && (*p)->serial == serial)
			return p;
	return NULL;
}

/*
 * cm (its REPLY_SERIAL the native call's) from D-Bus callee c into the
 * inbox of native caller id, through a cap badged with c's id (the caller
 * accepts replies from the name's owners only, and LIST_QUEUED_OWNERS
 * names it).
 */
static void reply_to_native(struct dbus_bridge *br, struct dbus_conn *c, uint64_t id, struct chmsg *cm,
			    const int *fds, unsigned int n)
{
	struct registry_peer *p = registry_peer_find(br->bus->registry, id);
	struct bus_conn *nc = conn_of_peer(p);
	struct bridge_peer *bp;
	struct bridge_target *t;
	int r;

	if (!nc || nc->dead || !nc->inbox)
		return; /* the caller is gone */
	cm->destination = p->unique_name;
	r = peer_get(br, c, &bp);
	if (r == 0)
		r = target_get(br, bp, p->unique_name, nc->inbox, &t);
	if (r == 0)
		r = msg_send(br, t, cm, fds, n);
	if (r < 0)
		log_full(LOG_DEBUG, c->name, c->cred.uid, "reply from %s to native %s not passed on: %s", c->name,
			 p->unique_name, strerror(-r));
}

/* A D-Bus callee's METHOD_RETURN or ERROR to a native caller (reply_to_native()). */
static int reply_route(struct dbus_bridge *br, struct dbus_conn *c, struct dbus_message *m, const int *fds)
{
	struct bridge_ncall **pk = ncall_find(br, c, m->h.reply_serial);
	struct chmsg cm = {
		.type = m->h.type == DBUS_MESSAGE_ERROR ? CHMSG_ERROR : CHMSG_REPLY,
		.serial = m->h.serial,
		.error_name = m->h.error_name,
		.signature = m->h.signature,
		.body = m->body,
		.body_len = (uint32_t)m->body_len,
	};
	uint64_t id;

	if (!pk || ctrl_unique_name_parse(m->h.destination, &id) < 0 || id != (*pk)->caller) {
		c->front->unsolicited++;
		log_full(LOG_DEBUG, c->name, c->cred.uid, "unsolicited reply from %s to native %s refused",
			 c->name, m->h.destination);
		return 0;
	}
	cm.reply_serial = (*pk)->caller_serial;
	ncall_drop(br, pk);
	dbus_front_eavesdrop(c->front, m, fds, c->peer, NULL, false);
	reply_to_native(br, c, id, &cm, fds, m->h.n_fds);
	return 0;
}

/* k's time is up: its native caller gets NoReply, as from its callee (whose reply it waits for). */
static void ncall_time_out(struct dbus_bridge *br, struct bridge_ncall **pk)
{
	struct bridge_ncall *k = *pk;
	struct chmsg cm = {
		.type = CHMSG_ERROR,
		.serial = ++br->serial ? br->serial : ++br->serial,
		.reply_serial = k->caller_serial,
		.error_name = ERR("NoReply"),
		.signature = "s",
	};
	struct dbus_conn *callee = k->callee;
	uint64_t caller = k->caller;
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;

	ncall_drop(br, pk);
	log_full(LOG_DEBUG, callee->name, callee->cred.uid, "call from native :1.%llu to %s timed out",
		 (unsigned long long)caller, callee->name);
	if (dbus_writer_init(&w, "s") < 0)
		return;
	dbus_writer_append_basic(&w, 's', timed_out);
	if (dbus_writer_finish(&w, &body, &len) == 0) {
		cm.body = body;
		cm.body_len = (uint32_t)len;
		reply_to_native(br, callee, caller, &cm, NULL, 0);
	}
	dbus_writer_deinit(&w);
	free(body);
}

/*
 * May D-Bus client c send a unicast message m to native peer p (dest: its
 * unique or a well-known name)? As OPEN_INBOX decides for a native sender:
 * "send" on the well-known name, or on one of the names p owns (a peer that
 * owns none can always be reached), dbus-daemon's rules when --dbus-config
 * gives them.
 */
static bool send_to_peer_allowed(struct dbus_conn *c, const struct dbus_message *m, const char *dest,
				 struct registry_peer *p, char *text, size_t text_len)
{
	const char *owned;
	bool any = false;

	if (dest[0] != ':')
		return dbus_access_send_to_name(c, m, dest, text, text_len);
	for (unsigned int i = 0; (owned = registry_peer_owned_next(p, &i));) {
		any = true;
		if (dbus_access_send_to_name(c, m, owned, text, text_len))
			return true;
	}
	if (!any || c->cred.uid == 0)
		return true;
	snprintf(text, text_len, "Sending to %s is not allowed by policy", dest);
	return false;
}

/*
 * A signal of D-Bus client c to one native client (its DESTINATION the
 * unique name or a well-known name it owns): into that client's inbox, as
 * a native client's brokerd_bus_send_signal() goes, through a cap badged
 * with c's id. A signal wants no answer: one that cannot go is dropped
 * (monitors see the bus's error).
 */
static int signal_to_native(struct dbus_bridge *br, struct dbus_conn *c, const struct dbus_message *m,
			    const int *fds)
{
	const char *dest = m->h.destination;
	struct registry_peer *p = registry_peer_resolve(br->bus->registry, dest);
	struct bus_conn *nc = conn_of_peer(p);
	struct bridge_peer *bp;
	struct chmsg cm;
	struct bridge_target *t;
	char text[1024];
	int r;

	if (!nc || nc->dead || !nc->inbox) {
		refuse(c, m, ERR("ServiceUnknown"), "The name %s has no inbox to send to", dest);
		return 0;
	}
	if (!send_to_peer_allowed(c, m, dest, p, text, sizeof(text))) {
		(void)dbus_driver_reply_error(c, m, ERR("AccessDenied"), text);
		return 0;
	}
	chmsg_of(&cm, CHMSG_SIGNAL, m);
	r = peer_get(br, c, &bp);
	if (r == 0)
		r = target_get(br, bp, p->unique_name, nc->inbox, &t);
	if (r == 0)
		r = msg_send(br, t, &cm, fds, m->h.n_fds);
	if (r == 0)
		dbus_front_eavesdrop(c->front, m, fds, c->peer, NULL, false);
	if (r < 0) {
		snprintf(text, sizeof(text), "Cannot pass the signal on to %s: %s", dest, strerror(-r));
		(void)dbus_driver_reply_error(c, m, r == -ENOBUFS || r == -EMSGSIZE ? ERR("LimitsExceeded") : ERR("Failed"),
					      text);
	}
	return 0;
}

int dbus_bridge_route(struct dbus_conn *c, struct dbus_message *m, const int *fds)
{
	struct dbus_front *f = c->front;
	struct dbus_bridge *br = f->bridge;
	const char *dest = m->h.destination;
	struct bridge_peer *bp;
	struct bridge_target *t;
	struct bridge_call *k;
	int failed_quota = -1, r;
	char text[1024];

	if (!br) {
		refuse(c, m, ERR("NotSupported"),
		       "%s is a native brokerd client, and this brokerd has no kernel IPC channels to reach it",
		       dest);
		return 0;
	}
	if (m->h.type == DBUS_MESSAGE_METHOD_RETURN || m->h.type == DBUS_MESSAGE_ERROR)
		return reply_route(br, c, m, fds);
	if (m->h.type != DBUS_MESSAGE_METHOD_CALL)
		return signal_to_native(br, c, m, fds);
	if (dest[0] == ':') {
		refuse(c, m, ERR("NotSupported"),
		       "%s is a native brokerd client: native clients are called by the well-known names they own",
		       dest);
		return 0;
	}
	if (!dbus_access_send_to_name(c, m, dest, text, sizeof(text))) {
		(void)dbus_driver_reply_error(c, m, ERR("AccessDenied"), text);
		return 0;
	}
	if (dbus_conn_replies_full(c, m))
		return 0;
	r = peer_get(br, c, &bp);
	if (r == 0)
		r = peer_inbox(br, bp, &failed_quota);
	if (r == -EDQUOT) {
		refuse(c, m, ERR("LimitsExceeded"), "The %s quota of this uid is used up",
		       quota_kind_to_string(failed_quota));
		return 0;
	}
	if (r == 0)
		r = call_target_get(br, bp, dest, &t);
	if (r == -ENOENT) {
		refuse(c, m, ERR("ServiceUnknown"), "The name %s has no call channel", dest);
		return 0;
	}
	if (r == 0)
		r = call_send(br, t, m, fds);
	if (r < 0) {
		snprintf(text, sizeof(text), "Cannot pass the call on to %s: %s", dest,
			 r == -ENOBUFS	? "its call queue is full" :
			 r == -EMSGSIZE ? "the message is too large" :
					  strerror(-r));
		(void)dbus_driver_reply_error(c, m,
					      r == -ENOBUFS || r == -EMSGSIZE ? ERR("LimitsExceeded") : ERR("Failed"),
					      text);
		return 0;
	}
	dbus_front_eavesdrop(f, m, fds, c->peer, NULL, false);
	if (m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED)
		return 0;
	k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(dest))) {
		free(k);
		return 0; /* its reply will be refused as unsolicited: the caller times out */
	}
	k->peer = bp;
	k->serial = m->h.serial;
	k->deadline = call_deadline(br);
	k->next = br->calls;
	br->calls = k;
	c->n_replies++;
	timer_arm(br, k->deadline);
	return 0;
}

/* ---- Native to D-Bus ------------------------------------------------------------ */

/* An error from the driver to the caller of k, which is forgotten. */
static void call_fail(struct dbus_bridge *br, struct bridge_call **pk, const char *error, const char *text)
{
	struct bridge_call *k = *pk;
	struct dbus_header h = {
		.type = DBUS_MESSAGE_ERROR,
		.error_name = error,
		.reply_serial = k->serial,
		.signature = "s",
	};
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;

	if (dbus_writer_init(&w, "s") == 0) {
		dbus_writer_append_basic(&w, 's', text);
		if (dbus_writer_finish(&w, &body, &len) == 0)
			(void)dbus_conn_send_driver(k->peer->conn, &h, body, len);
		dbus_writer_deinit(&w);
		free(body);
	}
	*pk = k->next;
	call_free(k);
}

static struct bridge_call **call_find(struct dbus_bridge *br, struct bridge_peer *bp, uint32_t serial)
{
	for (struct bridge_call **p = &br->calls; *p; p = &(*p)->next)
		if ((*p)->peer == bp && (*p)->serial == serial)
			return p;
	return NULL;
}

/* Does the native connection with this id receive name's calls (its primary owner or a queued owner)? */
static bool serves(struct dbus_bridge *br, uint64_t id, const char *name)
{
	struct registry_peer *p = registry_peer_find(br->bus->registry, id);
	const char *e;

	for (unsigned int i = 0; p && (e = registry_peer_entry_name(p, i, NULL)); i++)
		if (!strcmp(e, name))
			return true;
	return false;
}

/* The D-Bus connection with this id, or NULL. */
static struct dbus_conn *conn_of_id(struct dbus_bridge *br, uint64_t id)
{
	struct registry_peer *p = registry_peer_find(br->front->registry, id);
	struct dbus_conn *c = p && p->kind == REGISTRY_PEER_DBUS ? p->userdata : NULL;

	return c && !c->dead ? c : NULL;
}

/* The D-Bus connection that owns name, or NULL. */
static struct dbus_conn *dbus_owner(struct dbus_bridge *br, const char *name)
{
	struct registry_peer *p = registry_name_owner(br->front->registry, name);
	struct dbus_conn *c = p && p->kind == REGISTRY_PEER_DBUS ? p->userdata : NULL;

	return c && !c->dead ? c : NULL;
}

/*
 * A signal on native name sub's channel (sent by its owner, the kernel's
 * badge) to every D-Bus connection whose rules match it, with SENDER the
 * owner's unique name; a rule with the well-known sender sub->name matches.
 */
static void signal_broadcast(struct dbus_bridge *br, struct bridge_sub *sub, const struct ioipc_msg_info *info,
			     const struct chmsg *m, const int *fds, unsigned int n)
{
	char sender[CTRL_UNIQUE_NAME_MAX];
	struct dbus_header h = {
		.type = DBUS_MESSAGE_SIGNAL,
		.path = m->path,
		.interface = m->interface,
		.member = m->member,
		.signature = m->signature,
		.n_fds = n,
		.sender = sender,
	};
	struct dbus_message dm;
	void *body = NULL, *data = NULL;
	size_t len;

	if (m->body_len) {
		body = malloc(m->body_len);
		if (!body)
			return;
		memcpy(body, m->body, m->body_len);
		if (dbus_body_to_native(m->signature ? m->signature : "", body, m->body_len, m->byte_order, n) < 0) {
			br->dropped++;
			free(body);
			return;
		}
	}
	ctrl_unique_name_format(info->badge, sender);
	h.serial = ++br->serial ? br->serial : ++br->serial;
	if (dbus_message_write(&h, body, m->body_len, &data, &len) == 0 &&
	    dbus_message_parse(&dm, data, len, n) == 0) {
		dbus_front_broadcast(br->front, &dm, fds, NULL, sub->name); /* each receiver its own fds */
		dbus_monitor_native(br->front, &dm, fds, sub->name);
	} else
		br->dropped++;
	if (data)
		dbus_message_deinit(&dm);
	free(body);
}

/*
 * A message received on ch, passed to a D-Bus connection with SENDER the
 * native sender's unique name (the kernel's badge), its body brought to
 * brokerd's byte order and its fds passed on; anything else is dropped and
 * counted. In a D-Bus caller's inbox (CHAN_KIND_INBOX): a REPLY or ERROR
 * to one of its bridged calls from a connection that serves the name
 * called, or a unicast SIGNAL. On the call channel of a name a D-Bus
 * connection owns (CHAN_KIND_SERVE): a CALL, to the name's owner.
 */
/* What the bridge wrote for c, from native peer id: to the eavesdroppers (c is its recipient). */
static void eavesdrop_written(struct dbus_bridge *br, struct dbus_conn *c, uint64_t id, const void *data,
			      size_t len, const int *fds, unsigned int n_fds)
{
	struct dbus_message m;

	if (!br->front->n_eavesdrop)
		return;
	if (dbus_message_parse_copy(&m, data, len, n_fds) == 0)
		dbus_front_eavesdrop(br->front, &m, fds, registry_peer_find(br->bus->registry, id), c, false);
	dbus_message_deinit(&m);
}

static void channel_message(struct dbus_bridge *br, struct chan *ch)
{
	struct bridge_peer *bp = ch->kind == CHAN_KIND_INBOX ? ch->owner : NULL;
	struct bridge_serve *sv = ch->kind == CHAN_KIND_SERVE ? ch->owner : NULL;
	struct bridge_sub *sub = ch->kind == CHAN_KIND_SIGNAL ? ch->owner : NULL;
	struct dbus_conn *c = bp ? bp->conn : NULL;
	const struct ioipc_msg_info *info = NULL;
	_cleanup_free_ int *fds = NULL;
	void *map = NULL, *body = NULL, *data = NULL;
	char sender[CTRL_UNIQUE_NAME_MAX];
	struct bridge_call **pk = NULL;
	struct dbus_header h = { 0 };
	unsigned int n = 0;
	struct chmsg m = { 0 };
	size_t data_len;

	if (chan_msg_take(ch, &info, &m, &fds, &n, &map) < 0)
		goto drop;
	if (sub) {
		if (m.type == CHMSG_SIGNAL)
			signal_broadcast(br, sub, info, &m, fds, n);
		else
			br->dropped++;
		goto out;
	}
	switch (sv ? (m.type == CHMSG_CALL ? CHMSG_CALL : 0) : m.type == CHMSG_CALL ? 0 : m.type) {
	case CHMSG_CALL:
		c = conn_of_id(br, sv->owner);
		if (!c)
			goto drop; /* its callers learn from NameOwnerChanged */
		h.flags = m.flags & CHMSG_F_ALL;
		h.serial = ++br->serial ? br->serial : ++br->serial;
		h.path = m.path;
		h.interface = m.interface;
		h.member = m.member;
		h.destination = sv->name;
		break;
	case CHMSG_REPLY:
	case CHMSG_ERROR:
		pk = call_find(br, bp, m.reply_serial);
		/* Only from a connection that serves the name called: a forged reply is not passed on. */
		if (!pk || !serves(br, info->badge, (*pk)->name))
			goto drop;
		h.reply_serial = (*pk)->serial;
		h.error_name = m.error_name;
		h.destination = c->name;
		break;
	case CHMSG_SIGNAL:
		h.path = m.path;
		h.interface = m.interface;
		h.member = m.member;
		h.destination = c->name;
		break;
	default:
		goto drop;
	}
	if (n && !c->sasl.fds_agreed) {
		if (pk)
			call_fail(br, pk, ERR("NotSupported"),
				  "The reply carries file descriptors, and this connection did not agree to take them");
		else
			br->dropped++;
		goto out;
	}
	/* The body as it came, only brought to native byte order. */
	if (chan_msg_body_native(&m, n, &body) < 0)
		goto drop;
	ctrl_unique_name_format(info->badge, sender);
	h.type = m.type; /* the same numbers in both protocols */
	if (!sv)
		h.serial = ++c->front->serial ? c->front->serial : ++c->front->serial;
	h.sender = sender;
	h.signature = m.signature;
	h.n_fds = n;
	if (dbus_message_write(&h, body, m.body_len, &data, &data_len) < 0)
		goto drop;
	if (pk) {
		struct bridge_call *k = *pk;

		*pk = k->next;
		call_free(k);
	}
	if (sv && !(m.flags & CHMSG_F_NO_REPLY_EXPECTED) && br->n_ncalls < BRIDGE_NCALLS_MAX) {
		struct bridge_ncall *k = calloc(1, sizeof(*k));

		if (k) {
			k->callee = c;
			k->serial = h.serial;
			k->caller = info->badge;
			k->caller_serial = m.serial;
			k->deadline = call_deadline(br);
			k->next = br->ncalls;
			br->ncalls = k;
			br->n_ncalls++;
			timer_arm(br, k->deadline);
		}
	}
	dbus_monitor_written(c->front, data, data_len, fds, n);
	eavesdrop_written(br, c, info->badge, data, data_len, fds, n);
	/* Queued, or freed with its fds by dbus_conn_queue(). */
	(void)dbus_conn_queue(c, data, data_len, n ? TAKE_PTR(fds) : NULL, n);
	n = 0;
	goto out;
drop:
	br->dropped++;
	log_debug("bridge: a message from :1.%llu to %s dropped", info ? (unsigned long long)info->badge : 0ULL,
		  sv ? sv->name : sub ? sub->name : c->name);
out:
	chan_msg_release(fds, n, map, &m, body);
}

/* Dispatches the receives completed so far; how many. */
static unsigned int ring_dispatch(struct dbus_bridge *br)
{
	unsigned int n = 0;
	struct chan *ch;

	(void)ring_reap(&br->ring);
	while ((ch = ring_pop_ready(&br->ring))) {
		n++;
		if (ch->res < 0) {
			/* Revoked, or its channel gone: nothing more comes (its owner closes it). */
			if (ch->res != -EINTR && ch->res != -ECANCELED)
				log_debug("bridge: a receive failed: %s", strerror(-ch->res));
			if (ch->res == -EINTR)
				(void)chan_arm(&br->ring, ch);
			continue;
		}
		channel_message(br, ch);
		(void)chan_arm(&br->ring, ch);
	}
	return n;
}

static int on_ring(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct dbus_bridge *br = userdata;

	ring_ack(&br->ring);
	(void)ring_dispatch(br);
	return 0;
}

/*
 * What native clients sent before an owner change or a connection's end is
 * passed on before what brokerd says about it: a signal sent just before
 * its emitter left reaches D-Bus clients before NameOwnerChanged (GDBus
 * drops a signal from a name's former owner), a reply before NoReply.
 * Nothing of it can still be on its way in the kernel: a message published
 * wakes the bridge's parked receive through task_work queued to brokerd's
 * thread, which runs before the syscall that brought the news (the control
 * socket's RELEASE_NAME or hang-up) returns, and posts the completion. So
 * the completions are in the CQ (or its overflow list, which
 * io_uring_get_events() flushes), or reaped and on the ready list, only not
 * dispatched yet: dispatch them now, round after round until nothing more
 * is there (bounded, so that a flood cannot hold brokerd here).
 */
static void ring_drain(struct dbus_bridge *br)
{
	for (unsigned int i = 0; i < 16; i++) {
		(void)io_uring_get_events(&br->ring.uring);
		if (!ring_dispatch(br))
			break;
	}
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct dbus_bridge *br = userdata;
	uint64_t now = now_usec(), next = UINT64_MAX;
	unsigned int expired = 0;

	(void)s;
	(void)usec;
	br->timer_at = UINT64_MAX;
	for (struct bridge_call **pk = &br->calls; *pk;) {
		if ((*pk)->deadline <= now) {
			call_fail(br, pk, ERR("NoReply"), timed_out);
			expired++;
			continue;
		}
		if ((*pk)->deadline < next)
			next = (*pk)->deadline;
		pk = &(*pk)->next;
	}
	for (struct bridge_ncall **pk = &br->ncalls; *pk;) {
		if ((*pk)->deadline <= now) {
			ncall_time_out(br, pk);
			expired++;
			continue;
		}
		if ((*pk)->deadline < next)
			next = (*pk)->deadline;
		pk = &(*pk)->next;
	}
	if (expired) {
		unsigned int n_calls = 0;

		for (struct bridge_call *k = br->calls; k; k = k->next)
			n_calls++;
		log_info("bridge: %u bridged call(s) timed out (NoReply); %u call(s) of D-Bus clients and %u of "
			 "native clients still wait for a reply",
			 expired, n_calls, br->n_ncalls);
	}
	timer_arm(br, next);
	return 0;
}

/* ---- Hooks of the native layers -------------------------------------------------- */

/* NameOwnerChanged from the driver to the D-Bus clients whose rules match it. */
static void name_owner_changed_signal(struct dbus_bridge *br, const char *name, const char *old_owner,
				      const char *new_owner)
{
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;

	if (dbus_writer_init(&w, "sss") < 0)
		return;
	dbus_writer_append_basic(&w, 's', name);
	dbus_writer_append_basic(&w, 's', old_owner);
	dbus_writer_append_basic(&w, 's', new_owner);
	if (dbus_writer_finish(&w, &body, &len) == 0)
		dbus_front_driver_signal(br->front, NULL, "NameOwnerChanged", "sss", body, len);
	dbus_writer_deinit(&w);
	free(body);
}

/*
 * A native connection ends: a bridged call to a name it received calls of
 * may have been its own, and will never be answered. As libbrokerd does for
 * native callers (protocol/README.md, Worker pools), every such call fails
 * now with NoReply rather than at its caller's timeout.
 */
static void hook_peer_ending(void *userdata, struct registry_peer *p)
{
	struct dbus_bridge *br = userdata;
	const char *e;

	ring_drain(br); /* its last replies and signals first */
	/* Its calls to D-Bus services: nobody waits for their replies any more. */
	for (struct bridge_ncall **pk = &br->ncalls; *pk;)
		if ((*pk)->caller == p->id)
			ncall_drop(br, pk);
		else
			pk = &(*pk)->next;
	/* Its unique name goes, for the D-Bus clients that watch it (its well-known names follow). */
	name_owner_changed_signal(br, p->unique_name, p->unique_name, "");
	for (unsigned int i = 0; (e = registry_peer_entry_name(p, i, NULL)); i++)
		for (struct bridge_call **pk = &br->calls; *pk;) {
			char text[512];

			if (strcmp((*pk)->name, e) != 0) {
				pk = &(*pk)->next;
				continue;
			}
			snprintf(text, sizeof(text), "%s, a receiver of %s, ended before it replied",
				 p->unique_name, e);
			call_fail(br, pk, ERR("NoReply"), text);
		}
}

static struct bus_channel *hook_inbox(void *userdata, const char *name, struct registry_peer **ret_peer)
{
	struct dbus_bridge *br = userdata;
	struct dbus_conn *c = dbus_front_conn_by_name(br->front, name);

	if (!c || !c->bridge || !c->bridge->inbox)
		return NULL;
	*ret_peer = c->peer;
	return c->bridge->inbox;
}

static struct bridge_serve **serve_find(struct dbus_bridge *br, const char *name)
{
	for (struct bridge_serve **p = &br->serves; *p; p = &(*p)->next)
		if (!strcmp((*p)->name, name))
			return p;
	return NULL;
}

static void serve_drop(struct dbus_bridge *br, struct bridge_serve **p)
{
	struct bridge_serve *sv = *p;

	*p = sv->next;
	chan_close(&br->ring, sv->recv);
	free(sv->name);
	free(sv);
}

/* brokerd takes n's calls for the D-Bus connection that owns it (attached once per call channel). */
static int hook_serve(void *userdata, struct bus_name *n)
{
	struct dbus_bridge *br = userdata;
	struct bridge_serve **p = serve_find(br, n->name), *sv;
	struct dbus_conn *owner = dbus_owner(br, n->name);
	int fd, r;

	if (!n->call || !owner)
		return -EOPNOTSUPP;
	if (p && (*p)->channel_id == n->call->id) {
		(*p)->owner = owner->peer->id; /* its owner now: what came before went to the last one */
		return 0;
	}
	if (p)
		serve_drop(br, p);
	sv = calloc(1, sizeof(*sv));
	if (!sv || !(sv->name = strdup(n->name))) {
		free(sv);
		return -ENOMEM;
	}
	sv->channel_id = n->call->id;
	sv->owner = owner->peer->id;
	fd = chanmgr_mint(&br->bus->chanmgr, n->call->id, IOIPC_SUB_RECV, owner->peer->id);
	r = fd < 0 ? fd : chan_attach(&br->ring, fd, IOIPC_SUB_RECV, CHMSG_MAX, CHAN_KIND_SERVE, sv, &sv->recv);
	if (fd >= 0)
		close(fd);
	if (r == 0)
		r = chan_arm(&br->ring, sv->recv);
	if (r < 0) {
		chan_close(&br->ring, sv->recv);
		free(sv->name);
		free(sv);
		return r;
	}
	sv->next = br->serves;
	br->serves = sv;
	return 0;
}

static void sub_drop(struct dbus_bridge *br, struct bridge_sub **p)
{
	struct bridge_sub *sub = *p;

	*p = sub->next;
	chan_close(&br->ring, sub->recv);
	free(sub->name);
	free(sub);
}

static void hook_handover(void *userdata)
{
	struct dbus_bridge *br = userdata;

	for (struct dbus_conn *c = br->front->conns; c; c = c->next)
		if (c->bridge)
			peer_free(br, c->bridge);
	while (br->serves)
		serve_drop(br, &br->serves);
	while (br->subs)
		sub_drop(br, &br->subs);
	br->watching = false;
}

/* Receive name's signals (its signal channel now), if it has native channels. */
static void sub_name(struct dbus_bridge *br, const char *name)
{
	struct bus_name *n = bus_name_find(br->bus, name);
	struct bridge_sub **p, *sub;
	int fd, r;

	if (!n || !n->signal)
		return;
	for (p = &br->subs; (sub = *p); p = &sub->next)
		if (!strcmp(sub->name, name))
			break;
	if (sub && sub->channel_id == n->signal->id)
		return;
	if (sub)
		sub_drop(br, p);
	sub = calloc(1, sizeof(*sub));
	if (!sub || !(sub->name = strdup(name))) {
		free(sub);
		return;
	}
	sub->channel_id = n->signal->id;
	fd = chanmgr_mint(&br->bus->chanmgr, n->signal->id, IOIPC_SUB_RECV, BRIDGE_BADGE);
	r = fd < 0 ? fd : chan_attach(&br->ring, fd, IOIPC_SUB_RECV, CHMSG_MAX, CHAN_KIND_SIGNAL, sub, &sub->recv);
	if (fd >= 0)
		close(fd);
	if (r == 0)
		r = chan_arm(&br->ring, sub->recv);
	if (r < 0) {
		log_debug("bridge: cannot receive the signals of %s: %s", name, strerror(-r));
		chan_close(&br->ring, sub->recv);
		free(sub->name);
		free(sub);
		return;
	}
	sub->next = br->subs;
	br->subs = sub;
}

void dbus_bridge_signals_wanted(struct dbus_front *f)
{
	struct dbus_bridge *br = f->bridge;
	_cleanup_free_ const char **names = NULL;
	size_t n;

	if (!br || br->watching)
		return;
	br->watching = true;
	n = registry_names_list(br->bus->registry, NULL, 0);
	names = n ? calloc(n, sizeof(*names)) : NULL;
	if (!names)
		return;
	n = registry_names_list(br->bus->registry, names, n);
	for (size_t i = 0; i < n; i++)
		if (!dbus_owner(br, names[i])) /* a D-Bus owner's signals reach D-Bus clients directly */
			sub_name(br, names[i]);
}

void dbus_bridge_signal(struct dbus_conn *c, const struct dbus_message *m, const int *fds)
{
	struct dbus_bridge *br = c->front->bridge;
	struct bridge_peer *bp;
	const char *name;

	if (!br || !c->peer)
		return;
	for (unsigned int i = 0; (name = registry_peer_owned_next(c->peer, &i));) {
		struct bus_name *n = bus_name_find(br->bus, name);
		struct bridge_target *t;
		char key[CTRL_NAME_MAX + 2];
		struct chmsg cm;
		int r;

		/* Only where native clients subscribed (their SUBSCRIBE or WATCH_SIGNALS made the channel). */
		if (!n || !n->signal)
			continue;
		chmsg_of(&cm, CHMSG_SIGNAL, m); /* afresh: msg_send() marks a body it put in a memfd */
		snprintf(key, sizeof(key), "/%s", name); /* no bus name has a '/': apart from call targets */
		r = peer_get(br, c, &bp);
		if (r == 0)
			r = target_get(br, bp, key, n->signal, &t);
		if (r == 0)
			r = msg_send(br, t, &cm, fds, m->h.n_fds);
		if (r < 0)
			log_debug("bridge: signal of %s on %s not sent: %s", c->name, name, strerror(-r));
	}
}

void dbus_bridge_owner_changed(struct dbus_front *f, const char *name, struct registry_peer *old,
			       struct registry_peer *new)
{
	struct dbus_bridge *br = f->bridge;
	struct bridge_serve **p;
	struct bridge_sub **ps;
	struct bus_name *n;

	(void)old;
	if (!br)
		return;
	ring_drain(br); /* what a native old owner sent, before the news that it went */
	if (new && new->kind == REGISTRY_PEER_DBUS) {
		/* Native callers hold SEND caps on its call channel: brokerd receives there for the new owner. */
		n = bus_name_find(br->bus, name);
		if (n && n->call && hook_serve(br, n) < 0)
			log_warning("bridge: cannot take the calls of %s for its D-Bus owner %s", name,
				    new->unique_name);
		/* Its signals reach D-Bus clients directly: none back from the signal channel. */
		for (ps = &br->subs; *ps && strcmp((*ps)->name, name); ps = &(*ps)->next)
			;
		if (*ps)
			sub_drop(br, ps);
		return;
	}
	/* A native owner (or none) receives the calls itself; what brokerd took is passed on already. */
	if ((p = serve_find(br, name)))
		serve_drop(br, p);
	if (new && br->watching)
		sub_name(br, name);
}

static const struct bus_bridge_hooks hooks = {
	.peer_ending = hook_peer_ending,
	.inbox = hook_inbox,
	.handover = hook_handover,
	.serve = hook_serve,
};

/* ---- The bridge ----------------------------------------------------------------- */

int dbus_bridge_new(struct dbus_bridge **ret, struct dbus_front *f)
{
	struct dbus_bridge *br;
	int r;

	*ret = NULL;
	if (!f->bus->chanmgr.available)
		return 0;
	br = calloc(1, sizeof(*br));
	if (!br)
		return -ENOMEM;
	br->front = f;
	br->bus = f->bus;
	br->timer_at = UINT64_MAX;
	r = ring_init(&br->ring, BRIDGE_RING_ENTRIES);
	if (r == 0)
		r = sd_event_add_io(f->event, &br->src, br->ring.efd, EPOLLIN, on_ring, br);
	if (r < 0) {
		dbus_bridge_free(br);
		return r;
	}
	f->bus->bridge_hooks = &hooks;
	f->bus->bridge = br;
	*ret = br;
	return 0;
}

struct dbus_bridge *dbus_bridge_free(struct dbus_bridge *br)
{
	if (!br)
		return NULL;
	hook_handover(br);
	while (br->ncalls)
		ncall_drop(br, &br->ncalls);
	if (br->bus->bridge == br) {
		br->bus->bridge_hooks = NULL;
		br->bus->bridge = NULL;
	}
	sd_event_source_disable_unref(br->src);
	sd_event_source_disable_unref(br->timer);
	ring_deinit(&br->ring);
	free(br);
	return NULL;
}
