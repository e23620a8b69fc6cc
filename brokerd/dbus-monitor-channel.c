/* SPDX-License-Identifier: MIT */
/*
 * dbus-monitor-channel.c - native monitors (MONITOR, brokerctl monitor) of
 * what D-Bus clients send each other through brokerd's socket, which no
 * kernel channel carries: brokerd keeps a channel of its own for it, kind
 * CTRL_CHANNEL_DBUS named org.freedesktop.DBus (broadcast, lossy, nobody
 * receives on it), announced to native monitors as every channel is, and
 * while a native monitor holds a cap on it puts a native-format copy of
 * each such message there: a unicast message from one D-Bus client to
 * another, a broadcast signal (protocol/README.md, section 6). The sender
 * is the kernel's badge as everywhere: brokerd sends each D-Bus client's
 * copies through a SEND cap badged with its id, minted at its first copy.
 *
 * What crosses to native clients is on their channels already and not
 * copied: messages to native names (the bridge's calls), a broadcast of a
 * client whose name native clients subscribed to (dbus_bridge_signal()).
 * Nor are the driver's messages. Lossy: a copy that does not fit the
 * channel's slot (bodies in a memfd are not made for copies) or finds the
 * ring full is dropped and counted; no D-Bus client waits for a copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/dbus-front.h"
#include "brokerd/grant.h"
#include "brokerd/registry.h"
#include "client/chan.h"
#include "protocol/message.h"
#include "util/macro.h"

#define MCH_RING_ENTRIES 64

struct dbus_monitor_channel {
	struct bus_channel *ch;
	struct ring ring;
	bool ring_ok;
	uint8_t *buf; /* the channel's slot size */
	unsigned long dropped;
};

/* Does m leave a copy on a native channel anyway (or is it not between D-Bus clients)? */
static bool carried_natively(struct dbus_conn *c, const struct dbus_message *m)
{
	struct dbus_front *f = c->front;
	const char *name;

	if (m->h.destination)
		return !strcmp(m->h.destination, DBUS_DRIVER_NAME) ||
		       !dbus_front_conn_by_name(f, m->h.destination);
	if (m->h.type != DBUS_MESSAGE_SIGNAL)
		return true;
	for (unsigned int i = 0; (name = registry_peer_owned_next(c->peer, &i));) {
		struct bus_name *n = bus_name_find(f->bus, name);

		if (n && n->signal)
			return true; /* on its signal channel (dbus_bridge_signal()) */
	}
	return false;
}

void dbus_monitor_channel_copy(struct dbus_conn *c, const struct dbus_message *m, const int *fds)
{
	struct dbus_monitor_channel *mch = c->front->monitor_channel;
	struct chmsg cm;
	int len, r;

	/* only while a native monitor holds a cap on it: nothing costs when nobody watches */
	if (!mch || !mch->ch->n_grants || !c->peer || carried_natively(c, m))
		return;
	if (!c->monitor_send) {
		int fd = chanmgr_mint(&c->front->bus->chanmgr, mch->ch->id, IOIPC_SUB_SEND, c->peer->id);

		r = fd < 0 ? fd : chan_attach(&mch->ring, fd, IOIPC_SUB_SEND, 0, 0, NULL, &c->monitor_send);
		if (fd >= 0)
			close(fd);
		if (r < 0) {
			mch->dropped++;
			return;
		}
	}
	cm = (struct chmsg){
		.type = m->h.type, /* the same numbers in both protocols */
		.flags = m->h.flags & CHMSG_F_ALL,
		.serial = m->h.serial,
		.reply_serial = m->h.reply_serial,
		.path = m->h.path,
		.interface = m->h.interface,
		.member = m->h.member,
		.error_name = m->h.error_name,
		.destination = m->h.destination,
		.signature = m->h.signature,
		.n_fds = m->h.n_fds,
		.body = m->body,
		.body_len = (uint32_t)m->body_len,
	};
	len = chmsg_encode(&cm, mch->buf, mch->ch->slot_size);
	r = len < 0    ? len :
	    m->h.n_fds ? chan_send_fds(&mch->ring, c->monitor_send, mch->buf, (size_t)len, fds, m->h.n_fds) :
			 chan_send(&mch->ring, c->monitor_send, mch->buf, (size_t)len);
	if (r < 0 && mch->dropped++ % 1000 == 0)
		log_debug("native monitors: a copy of a message of %s dropped: %s (%lu so far)", c->name,
			  strerror(-r), mch->dropped);
}

void dbus_monitor_channel_conn_gone(struct dbus_conn *c)
{
	struct dbus_monitor_channel *mch = c->front->monitor_channel;

	if (mch && c->monitor_send)
		chan_close(&mch->ring, c->monitor_send);
	c->monitor_send = NULL;
}

int dbus_monitor_channel_new(struct dbus_front *f)
{
	struct bus *b = f->bus;
	struct dbus_monitor_channel *mch;
	int failed_quota, r;

	if (!b->chanmgr.available || !b->chanmgr.monitor || f->monitor_channel)
		return 0;
	mch = calloc(1, sizeof(*mch));
	if (!mch)
		return -ENOMEM;
	r = ring_init(&mch->ring, MCH_RING_ENTRIES);
	if (r == 0)
		r = bus_channel_new(b, CTRL_CHANNEL_DBUS, DBUS_DRIVER_NAME, geteuid(), &failed_quota,
				    &mch->ch);
	if (r == 0 && !(mch->buf = malloc(mch->ch->slot_size)))
		r = -ENOMEM;
	if (r < 0) {
		mch->ch = bus_channel_free(b, mch->ch);
		ring_deinit(&mch->ring);
		free(mch);
		return r;
	}
	b->dbus_channel = mch->ch;
	f->monitor_channel = mch;
	return 0;
}

void dbus_monitor_channel_free(struct dbus_front *f)
{
	struct dbus_monitor_channel *mch = f->monitor_channel;

	if (!mch)
		return;
	for (struct dbus_conn *c = f->conns; c; c = c->next)
		dbus_monitor_channel_conn_gone(c);
	if (f->bus->dbus_channel == mch->ch)
		f->bus->dbus_channel = NULL;
	/* the next brokerd makes its own: a restart does not hand this one over */
	bus_channel_free(f->bus, mch->ch);
	ring_deinit(&mch->ring);
	free(mch->buf);
	free(mch);
	f->monitor_channel = NULL;
}
