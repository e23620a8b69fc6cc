/* SPDX-License-Identifier: MIT */
/*
 * dbus-bridge.c - D-Bus clients calling native services (dbus-bridge.h):
 * per D-Bus connection that calls one, an inbox and SEND caps on the call
 * channels of the names it calls, all badged with its id; the calls waiting
 * for their reply; the translation of headers both ways, bodies and fds
 * passed on as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
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
#include "protocol/ctrl.h"
#include "protocol/dbus-marshal.h"
#include "protocol/message.h"
#include "util/clock.h"
#include "util/macro.h"

#define ERR(x) "org.freedesktop.DBus.Error." x

#define BRIDGE_RING_ENTRIES 256
#define CHAN_KIND_INBOX	    1
#define CHAN_KIND_CALL	    2

/* The seals a body memfd must have (protocol/README.md 7.6). */
#define BODY_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

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
	uint32_t serial; /* the D-Bus caller's, also the channel message's */
	char *name;	 /* the native name called */
	struct bridge_call *next;
};

struct dbus_bridge {
	struct dbus_front *front;
	struct bus *bus;
	struct ring ring;
	sd_event_source *src;
	struct bridge_call *calls;
	unsigned long dropped; /* replies refused: invalid, unsolicited or from the wrong sender */
};

static void fds_close(const int *fds, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
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

	if (br && c->bridge)
		peer_free(br, c->bridge);
}

/* The connection's bridge state with its inbox, made on its first bridged call. */
static int peer_get(struct dbus_bridge *br, struct dbus_conn *c, int *failed_quota, struct bridge_peer **ret)
{
	struct bridge_peer *bp;
	int fd, r;

	if (c->bridge) {
		*ret = c->bridge;
		return 0;
	}
	bp = calloc(1, sizeof(*bp));
	if (!bp)
		return -ENOMEM;
	bp->bridge = br;
	bp->conn = c;
	bp->id = c->peer->id;
	/* Charged to the connection's uid as a native client's inbox is. */
	r = bus_channel_new(br->bus, CTRL_CHANNEL_INBOX, c->name, c->cred.uid, failed_quota, &bp->inbox);
	if (r < 0) {
		free(bp);
		return r;
	}
	c->bridge = bp;
	fd = chanmgr_mint(&br->bus->chanmgr, bp->inbox->id, IOIPC_SUB_RECV, bp->id);
	if (fd < 0) {
		peer_free(br, bp);
		return fd;
	}
	r = grant_record(bp->inbox, bp->id, IOIPC_SUB_RECV);
	if (r == 0)
		r = chan_attach(&br->ring, fd, IOIPC_SUB_RECV, CHMSG_MAX, CHAN_KIND_INBOX, bp, &bp->recv);
	close(fd);
	if (r == 0)
		r = chan_arm(&br->ring, bp->recv);
	if (r < 0) {
		peer_free(br, bp);
		return r;
	}
	*ret = bp;
	return 0;
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
		r = p->userdata;
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

/* The SEND cap on name's call channel, minted and attached on first use (or when the channel changed). */
static int target_get(struct dbus_bridge *br, struct bridge_peer *bp, const char *name,
		      struct bridge_target **ret)
{
	struct bus_name *n = bus_name_find(br->bus, name);
	struct bridge_target *t, **pp;
	int fd, r;

	if (!n || !n->call)
		return -ENOENT;
	for (pp = &bp->targets; (t = *pp); pp = &t->next)
		if (!strcmp(t->name, name))
			break;
	if (t && t->channel_id == n->call->id) {
		*ret = t;
		return 0;
	}
	if (t) {
		*pp = t->next;
		target_free(br, t);
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->name = strdup(name))) {
		free(t);
		return -ENOMEM;
	}
	t->channel_id = n->call->id;
	t->msg_max = n->call->slot_size;
	/*
	 * Badged with the D-Bus connection's id: the service sees the call as
	 * its unique name's. Not recorded as a grant: brokerd holds it, and
	 * checks the policy on every call it sends through it.
	 */
	fd = chanmgr_mint(&br->bus->chanmgr, n->call->id, IOIPC_SUB_SEND, bp->id);
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
	reply_caps_push(br, bp, n);
	*ret = t;
	return 0;
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
	if (fcntl(fd, F_ADD_SEALS, BODY_SEALS) < 0)
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

/* Send m as a CALL on t's channel: inline, or with its body in a memfd when it does not fit. */
static int call_send(struct dbus_bridge *br, struct bridge_target *t, const struct dbus_message *m,
		     const int *fds)
{
	struct chmsg cm = {
		.type = CHMSG_CALL,
		.flags = m->h.flags & CHMSG_F_ALL,
		.serial = m->h.serial,
		.path = m->h.path,
		.interface = m->h.interface,
		.member = m->h.member,
		.destination = m->h.destination,
		.signature = m->h.signature,
		.n_fds = m->h.n_fds,
		.body = m->body,
		.body_len = (uint32_t)m->body_len,
	};
	_cleanup_free_ uint8_t *buf = NULL;
	int all[CHMSG_FDS_MAX];
	_cleanup_close_ int memfd = -1;
	unsigned int n = m->h.n_fds;
	int len, r;

	buf = malloc(t->msg_max);
	if (!buf)
		return -ENOMEM;
	len = chmsg_encode(&cm, buf, t->msg_max);
	if (len == -EMSGSIZE) {
		if (m->h.n_fds + 1 > CHMSG_FDS_MAX || m->body_len > CHMSG_BODY_MAX)
			return -EMSGSIZE;
		cm.body_in_fd = true;
		cm.n_fds++;
		len = chmsg_encode(&cm, buf, t->msg_max);
		if (len < 0)
			return len;
		memfd = body_memfd(m->body, m->body_len);
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

int dbus_bridge_route(struct dbus_conn *c, struct dbus_message *m, const int *fds)
{
	struct dbus_front *f = c->front;
	struct dbus_bridge *br = f->bridge;
	const char *dest = m->h.destination;
	struct bridge_peer *bp;
	struct bridge_target *t;
	struct bridge_call *k;
	int failed_quota = -1, r;

	if (!br) {
		refuse(c, m, ERR("NotSupported"),
		       "%s is a native brokerd client, and this brokerd has no kernel IPC channels to reach it",
		       dest);
		return 0;
	}
	if (m->h.type != DBUS_MESSAGE_METHOD_CALL) {
		/* Replies and signals to native clients: not bridged (yet); nobody waits for them here. */
		log_full(LOG_DEBUG, c->name, c->cred.uid, "%s: %s to native %s not bridged, dropped", c->name,
			 m->h.type == DBUS_MESSAGE_SIGNAL ? "signal" : "reply", dest);
		return 0;
	}
	if (dest[0] == ':') {
		refuse(c, m, ERR("NotSupported"),
		       "%s is a native brokerd client: native clients are called by the well-known names they own",
		       dest);
		return 0;
	}
	if (!policy_check(f->bus->policy, c->cred.uid, c->gids, c->n_gids, POLICY_SEND, dest, NULL, 0)) {
		refuse(c, m, ERR("AccessDenied"), "Sending to %s is not allowed by policy", dest);
		return 0;
	}
	if (!(m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED) && c->n_replies >= DBUS_CONN_REPLIES_MAX) {
		refuse(c, m, ERR("LimitsExceeded"), "%s", "Too many calls waiting for a reply");
		return 0;
	}
	r = peer_get(br, c, &failed_quota, &bp);
	if (r == -EDQUOT) {
		refuse(c, m, ERR("LimitsExceeded"), "The %s quota of this uid is used up",
		       quota_kind_to_string(failed_quota));
		return 0;
	}
	if (r == 0)
		r = target_get(br, bp, dest, &t);
	if (r == -ENOENT) {
		refuse(c, m, ERR("ServiceUnknown"), "The name %s has no call channel", dest);
		return 0;
	}
	if (r == 0)
		r = call_send(br, t, m, fds);
	if (r < 0) {
		char text[512];

		snprintf(text, sizeof(text), "Cannot pass the call on to %s: %s", dest,
			 r == -ENOBUFS	? "its call queue is full" :
			 r == -EMSGSIZE ? "the message is too large" :
					  strerror(-r));
		(void)dbus_driver_reply_error(c, m,
					      r == -ENOBUFS || r == -EMSGSIZE ? ERR("LimitsExceeded") : ERR("Failed"),
					      text);
		return 0;
	}
	if (m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED)
		return 0;
	k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(dest))) {
		free(k);
		return 0; /* its reply will be refused as unsolicited: the caller times out */
	}
	k->peer = bp;
	k->serial = m->h.serial;
	k->next = br->calls;
	br->calls = k;
	c->n_replies++;
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

/* Maps the body memfd, which must be sealed and exactly len bytes long. */
static int body_map(int fd, size_t len, void **ret)
{
	struct stat st;
	int seals;
	void *p;

	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & BODY_SEALS) != BODY_SEALS)
		return -EBADMSG;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size != len)
		return -EBADMSG;
	p = mmap(NULL, len ? len : 1, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	*ret = p;
	return 0;
}

/*
 * A message in bp's inbox: a REPLY or ERROR to one of its bridged calls,
 * from a connection that serves the name called, or a unicast SIGNAL. It
 * goes to the D-Bus connection with SENDER the native sender's unique
 * name; anything else is dropped and counted.
 */
static void inbox_message(struct dbus_bridge *br, struct bridge_peer *bp, struct chan *ch)
{
	struct dbus_conn *c = bp->conn;
	const struct ioipc_msg_info *info = NULL;
	const struct ioipc_fds_hdr *fh;
	_cleanup_free_ int *fds = NULL;
	const void *payload;
	void *map = NULL, *body = NULL, *data = NULL;
	char sender[CTRL_UNIQUE_NAME_MAX];
	struct bridge_call **pk = NULL;
	struct dbus_header h = { 0 };
	unsigned int n = 0;
	struct chmsg m = { 0 };
	size_t len = 0, data_len;
	int r;

	r = chan_message(ch, &info, &payload, &len);
	fh = chan_take_fds(ch); /* ours from here on, whatever becomes of the message */
	if (fh && fh->nr) {
		fds = malloc(fh->nr * sizeof(int));
		if (!fds) {
			fds_close(fh->fds, fh->nr);
			br->dropped++;
			return;
		}
		n = fh->nr;
		memcpy(fds, fh->fds, n * sizeof(int));
	}
	if (r < 0 || (fh && (fh->flags & IOIPC_FDS_TRUNC)) || chmsg_decode(&m, payload, len) < 0 ||
	    m.n_fds != n)
		goto drop;
	if (m.body_in_fd) {
		if (body_map(fds[n - 1], m.body_len, &map) < 0 || chmsg_decode_body(&m, map) < 0)
			goto drop;
		close(fds[--n]);
	}
	switch (m.type) {
	case CHMSG_REPLY:
	case CHMSG_ERROR:
		pk = call_find(br, bp, m.reply_serial);
		/* Only from a connection that serves the name called: a forged reply is not passed on. */
		if (!pk || !serves(br, info->badge, (*pk)->name))
			goto drop;
		h.reply_serial = (*pk)->serial;
		h.error_name = m.error_name;
		break;
	case CHMSG_SIGNAL:
		h.path = m.path;
		h.interface = m.interface;
		h.member = m.member;
		break;
	default:
		goto drop;
	}
	if (n && !c->sasl.fds_agreed) {
		if (pk)
			call_fail(br, pk, ERR("NotSupported"),
				  "The reply carries file descriptors, and this connection did not agree to take them");
		goto out;
	}
	if (m.body_len) {
		/* The body as it came, only brought to native byte order (a copy: the buffer is the ring's). */
		body = malloc(m.body_len);
		if (!body)
			goto drop;
		memcpy(body, m.body, m.body_len);
		if (dbus_body_to_native(m.signature ? m.signature : "", body, m.body_len, m.byte_order, n) < 0)
			goto drop;
	}
	ctrl_unique_name_format(info->badge, sender);
	h.type = m.type; /* the same numbers in both protocols */
	h.serial = ++c->front->serial ? c->front->serial : ++c->front->serial;
	h.sender = sender;
	h.destination = c->name;
	h.signature = m.signature;
	h.n_fds = n;
	if (dbus_message_write(&h, body, m.body_len, &data, &data_len) < 0)
		goto drop;
	if (pk) {
		struct bridge_call *k = *pk;

		*pk = k->next;
		call_free(k);
	}
	/* Queued, or freed with its fds by dbus_conn_queue(). */
	(void)dbus_conn_queue(c, data, data_len, n ? TAKE_PTR(fds) : NULL, n);
	n = 0;
	goto out;
drop:
	br->dropped++;
	log_full(LOG_DEBUG, c->name, c->cred.uid, "bridge: a message from :1.%llu to %s's inbox dropped",
		 info ? (unsigned long long)info->badge : 0ULL, c->name);
out:
	if (fds)
		fds_close(fds, n);
	if (map)
		munmap(map, m.body_len ? m.body_len : 1);
	free(body);
}

static int on_ring(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct dbus_bridge *br = userdata;
	struct chan *ch;

	ring_ack(&br->ring);
	(void)ring_reap(&br->ring);
	while ((ch = ring_pop_ready(&br->ring))) {
		struct bridge_peer *bp = ch->owner;

		if (ch->res < 0) {
			/* Revoked or failed: the inbox is gone for good (its connection is leaving). */
			if (ch->res != -EINTR && ch->res != -ECANCELED)
				log_debug("bridge: receive on %s's inbox failed: %s", bp->conn->name,
					  strerror(-ch->res));
			if (ch->res == -EINTR)
				(void)chan_arm(&br->ring, ch);
			continue;
		}
		inbox_message(br, bp, ch);
		(void)chan_arm(&br->ring, ch);
	}
	return 0;
}

/* ---- Hooks of the native layers -------------------------------------------------- */

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

	if (!c || !c->bridge)
		return NULL;
	*ret_peer = c->peer;
	return c->bridge->inbox;
}

static void hook_handover(void *userdata)
{
	struct dbus_bridge *br = userdata;

	for (struct dbus_conn *c = br->front->conns; c; c = c->next)
		if (c->bridge)
			peer_free(br, c->bridge);
}

static const struct bus_bridge_hooks hooks = {
	.peer_ending = hook_peer_ending,
	.inbox = hook_inbox,
	.handover = hook_handover,
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
	if (br->bus->bridge == br) {
		br->bus->bridge_hooks = NULL;
		br->bus->bridge = NULL;
	}
	sd_event_source_disable_unref(br->src);
	ring_deinit(&br->ring);
	free(br);
	return NULL;
}
