/* SPDX-License-Identifier: MIT */
/*
 * dbus-monitor-native.c - D-Bus monitors (BecomeMonitor) and eavesdroppers
 * (eavesdrop='true' match rules) of what native clients send each other on
 * the kernel's channels, which never passes through brokerd. While at
 * least one D-Bus monitor exists, or an eavesdrop rule of a connection the
 * policy may let eavesdrop (dbus_access_may_eavesdrop()), brokerd holds a
 * MONITOR cap (IOIPC_SUB_MONITOR: sees every message, consumes none, holds
 * no sender back) on the call channel of every well-known name and on the
 * inbox of every native connection, those created meanwhile included,
 * receives there, translates each message to D-Bus as the bridge does (the
 * header; the body and fds as they came) and shows it to the monitors whose
 * rules match and to the eavesdroppers whose rules match and whom the
 * policy lets see it. When the last of them goes the caps go too: native
 * traffic costs brokerd nothing while nobody looks.
 *
 * What the bridge carries (dbus-bridge.c) its monitors have seen already and
 * is skipped here: messages sent by D-Bus clients (their badge is a D-Bus
 * connection's id), calls to names a D-Bus client owns, and native names'
 * signals (the bridge receives every signal channel while a monitor exists).
 *
 * Lossy on both sides: the kernel skips a monitor that falls a ring behind
 * (counted), and a D-Bus monitor or eavesdropper whose output backs up
 * misses copies (dbus-monitor.c, dbus_front_eavesdrop()) instead of being
 * dropped as a slow reader.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/chan-msg.h"
#include "brokerd/dbus-access.h"
#include "brokerd/dbus-front.h"
#include "brokerd/registry.h"
#include "util/macro.h"

#define NMON_RING_ENTRIES 256
/* The badge of brokerd's monitor caps: a monitor sends nothing, so it is never stamped. */
#define NMON_BADGE (UINT64_MAX - 2)

/* One channel watched: a well-known name's call channel or a native connection's inbox. */
struct nmon_chan {
	uint32_t id;
	enum ctrl_channel_kind kind;
	char *name; /* the well-known name, or the inbox owner's unique name */
	struct chan *recv;
	struct nmon_chan *next;
};

struct dbus_native_monitor {
	struct dbus_front *front;
	struct ring ring;
	sd_event_source *src;
	struct nmon_chan *chans;
	uint32_t serial;       /* for a native message without one (none should come) */
	unsigned long lost;    /* the kernel skipped them: brokerd fell a ring behind */
	unsigned long dropped; /* malformed, or not translatable */
};

static void nchan_free(struct dbus_native_monitor *nm, struct nmon_chan *mc)
{
	chan_close(&nm->ring, mc->recv);
	free(mc->name);
	free(mc);
}

static void nchan_unlink(struct dbus_native_monitor *nm, struct nmon_chan *mc)
{
	for (struct nmon_chan **p = &nm->chans; *p; p = &(*p)->next)
		if (*p == mc) {
			*p = mc->next;
			break;
		}
}

static bool is_dbus(const struct registry_peer *p)
{
	return p && p->kind == REGISTRY_PEER_DBUS;
}

/* Does a D-Bus client receive what comes on mc? Then the bridge passes it on, and shows it. */
static bool bridge_receives(struct dbus_front *f, const struct nmon_chan *mc)
{
	if (mc->kind == CTRL_CHANNEL_CALL)
		return is_dbus(registry_name_owner(f->registry, mc->name));
	return dbus_front_conn_by_name(f, mc->name) != NULL;
}

/*
 * A message seen on mc: to the D-Bus monitors, with SENDER the native
 * sender's unique name (the kernel's badge) and DESTINATION the name the
 * channel belongs to unless the message names one.
 */
static void nchan_message(struct dbus_native_monitor *nm, struct nmon_chan *mc)
{
	struct dbus_front *f = nm->front;
	const struct ioipc_msg_info *info = NULL;
	_cleanup_free_ int *fds = NULL;
	void *map = NULL, *body = NULL, *data = NULL;
	char sender[CTRL_UNIQUE_NAME_MAX];
	struct dbus_header h = { 0 };
	struct dbus_message dm;
	struct chmsg m = { 0 };
	unsigned int n = 0;
	size_t data_len;
	int r;

	r = chan_msg_take(mc->recv, &info, &m, &fds, &n, &map);
	if (info && info->lost)
		nm->lost += info->lost;
	/* What a D-Bus client sent, or a D-Bus client receives, the bridge carries: seen already. */
	if (info && (is_dbus(registry_peer_find(f->registry, info->badge)) || bridge_receives(f, mc)))
		goto out;
	/* The body as it came, only brought to native byte order. */
	if (r < 0 || chan_msg_body_native(&m, n, &body) < 0)
		goto drop;
	ctrl_unique_name_format(info->badge, sender);
	h.type = m.type; /* the same numbers in both protocols */
	h.flags = m.flags & CHMSG_F_ALL;
	h.serial = m.serial ? m.serial : (++nm->serial ? nm->serial : ++nm->serial);
	h.reply_serial = m.reply_serial;
	h.path = m.path;
	h.interface = m.interface;
	h.member = m.member;
	h.error_name = m.error_name;
	h.destination = m.destination && *m.destination ? m.destination : mc->name;
	h.sender = sender;
	h.signature = m.signature;
	h.n_fds = n;
	if (dbus_message_write(&h, body, m.body_len, &data, &data_len) < 0)
		goto drop;
	if (dbus_message_parse(&dm, data, data_len, n) == 0) {
		dbus_monitor_native_copy(f, &dm, fds);
		dbus_front_eavesdrop(f, &dm, fds, registry_peer_find(f->registry, info->badge), NULL, true);
	}
	dbus_message_deinit(&dm);
	goto out;
drop:
	nm->dropped++;
	log_debug("D-Bus monitors: a message from :1.%llu on %s dropped",
		  info ? (unsigned long long)info->badge : 0ULL, mc->name);
out:
	chan_msg_release(fds, n, map, &m, body);
}

static void ring_dispatch(struct dbus_native_monitor *nm)
{
	struct chan *ch;

	(void)ring_reap(&nm->ring);
	while ((ch = ring_pop_ready(&nm->ring))) {
		struct nmon_chan *mc = ch->owner;

		if (ch->res == -EINTR) {
			(void)chan_arm(&nm->ring, ch);
			continue;
		}
		if (ch->res < 0) {
			/* The channel is gone (or the cap): nothing more comes there. */
			nchan_unlink(nm, mc);
			nchan_free(nm, mc);
			continue;
		}
		nchan_message(nm, mc);
		(void)chan_arm(&nm->ring, ch);
	}
}

static int on_ring(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct dbus_native_monitor *nm = userdata;

	ring_ack(&nm->ring);
	ring_dispatch(nm);
	return 0;
}

/* Watch ch if it carries messages between native clients only. */
static void watch(struct dbus_native_monitor *nm, struct bus_channel *ch)
{
	struct bus *b = nm->front->bus;
	struct nmon_chan *mc;
	int fd, r;

	if (ch->kind != CTRL_CHANNEL_CALL && ch->kind != CTRL_CHANNEL_INBOX)
		return; /* signal channels: the bridge receives them all while a monitor exists */
	if (ch->kind == CTRL_CHANNEL_INBOX && dbus_front_conn_by_name(nm->front, ch->name))
		return; /* a D-Bus caller's inbox (the bridge's) */
	for (mc = nm->chans; mc; mc = mc->next)
		if (mc->id == ch->id)
			return;
	mc = calloc(1, sizeof(*mc));
	if (!mc || !(mc->name = strdup(ch->name))) {
		free(mc);
		return;
	}
	mc->id = ch->id;
	mc->kind = ch->kind;
	fd = chanmgr_mint(&b->chanmgr, ch->id, IOIPC_SUB_MONITOR, NMON_BADGE);
	/* a buffer of the channel's slot size: no message on it is larger */
	r = fd < 0 ? fd :
		     chan_attach(&nm->ring, fd, IOIPC_SUB_MONITOR, ch->slot_size ? ch->slot_size : CHMSG_MAX,
				 ch->kind, mc, &mc->recv);
	if (fd >= 0)
		close(fd);
	if (r == 0)
		r = chan_arm(&nm->ring, mc->recv);
	if (r < 0) {
		log_debug("D-Bus monitors: cannot watch the %s channel of %s: %s",
			  ch->kind == CTRL_CHANNEL_CALL ? "call" : "inbox", ch->name, strerror(-r));
		nchan_free(nm, mc);
		return;
	}
	mc->next = nm->chans;
	nm->chans = mc;
}

static void on_channel_created(void *userdata, struct bus_channel *ch)
{
	watch(userdata, ch);
}

static void stop(struct dbus_front *f)
{
	struct dbus_native_monitor *nm = f->native_monitor;

	if (!nm)
		return;
	if (f->bus->channel_created_userdata == nm) {
		f->bus->channel_created = NULL;
		f->bus->channel_created_userdata = NULL;
	}
	while (nm->chans) {
		struct nmon_chan *mc = nm->chans;

		nm->chans = mc->next;
		nchan_free(nm, mc);
	}
	if (nm->lost || nm->dropped)
		log_info("D-Bus monitors: %lu native messages lost (brokerd fell behind), %lu dropped",
			 nm->lost, nm->dropped);
	sd_event_source_disable_unref(nm->src);
	ring_deinit(&nm->ring);
	free(nm);
	f->native_monitor = NULL;
}

/* Is there anybody to show native traffic to: a monitor, or an eavesdropper the policy may let see? */
static bool wanted(struct dbus_front *f)
{
	if (f->n_monitors)
		return true;
	if (!f->n_eavesdrop)
		return false;
	for (struct dbus_conn *c = f->conns; c; c = c->next) {
		if (c->dead || !c->peer || c->monitor)
			continue;
		for (struct dbus_match *x = c->matches; x; x = x->next)
			if (x->eavesdrop) {
				if (dbus_access_may_eavesdrop(c))
					return true;
				break;
			}
	}
	return false;
}

static void start(struct dbus_front *f)
{
	struct bus *b = f->bus;
	struct dbus_native_monitor *nm;

	if (f->native_monitor || !f->bridge || !b->chanmgr.monitor)
		return;
	nm = calloc(1, sizeof(*nm));
	if (!nm)
		return;
	nm->front = f;
	if (ring_init(&nm->ring, NMON_RING_ENTRIES) < 0 ||
	    sd_event_add_io(f->event, &nm->src, nm->ring.efd, EPOLLIN, on_ring, nm) < 0) {
		log_warning("D-Bus monitors will not see messages between native clients: no ring");
		ring_deinit(&nm->ring);
		free(nm);
		return;
	}
	f->native_monitor = nm;
	b->channel_created = on_channel_created;
	b->channel_created_userdata = nm;
	for (struct bus_name *n = b->names; n; n = n->next)
		if (n->call)
			watch(nm, n->call);
	for (struct bus_conn *c = b->conns; c; c = c->next)
		if (c->inbox)
			watch(nm, c->inbox);
}

void dbus_monitor_native_update(struct dbus_front *f)
{
	if (wanted(f))
		start(f);
	else
		stop(f);
}

/*
 * An eavesdrop rule is kept whatever the policy says when it is added;
 * whether it lets its connection see anything is the policy's, so a reload
 * that grants or takes eavesdropping starts or stops the watch.
 */
void dbus_monitor_native_reloaded(void *front)
{
	dbus_monitor_native_update(front);
}

void dbus_monitor_native_conn_gone(struct dbus_conn *c)
{
	struct dbus_front *f = c->front;
	struct dbus_native_monitor *nm = f->native_monitor;

	if (!nm)
		return;
	if (!wanted(f)) {
		stop(f);
		return;
	}
	/*
	 * What c sent through the bridge is known by its badge only while c is
	 * there: what of it is in the ring goes now (its sends completed
	 * before brokerd got here, so nothing of it is still on its way).
	 */
	(void)io_uring_get_events(&nm->ring.uring);
	ring_dispatch(nm);
}

void dbus_monitor_native_stop(struct dbus_front *f)
{
	stop(f);
}
