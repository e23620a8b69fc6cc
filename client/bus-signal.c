/* SPDX-License-Identifier: MIT */
/*
 * bus-signal.c - signals: emitting on a name's broadcast chan, sending to
 * one connection's inbox, subscribing (a member filter per slot, one
 * subscription per name), and watching NameOwnerChanged.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-chan.h"
#include "client/bus-inbox.h"
#include "client/bus-name.h"
#include "client/bus-slot.h"
#include "client/filter.h"

/* Sends the signal m on the signal channel of name, which we must own. */
static int emit(brokerd_bus *bus, const char *name, struct chmsg *m)
{
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	b = bname_get(bus, name, false);
	if (!b || !b->sig_send)
		return -EPERM; /* only the name's owner may emit its signals */
	m->serial = bus_next_serial(bus);
	/* its sends count what they cost subscribers: set when the chan was attached (bus-name.c) */
	if (bus->batch && bus->batch->open)
		return bus_batch_send(bus, b->sig_send, m);
	k = bus_chan_send(bus, b->sig_send, m);
	bus_emit_lost_notify(bus);
	return k;
}

_public_ int brokerd_bus_batch_begin(brokerd_bus *bus)
{
	struct bus_batch *b;

	if (!bus || bus->closed)
		return -EINVAL;
	if (bus->batch && bus->batch->open)
		return -EBUSY;
	if (!bus->batch) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		b->buf = malloc(BUS_BATCH_BYTES);
		if (!b->buf) {
			free(b);
			return -ENOMEM;
		}
		bus->batch = b;
	}
	bus->batch->open = true;
	bus->batch->error = 0;
	return 0;
}

_public_ int brokerd_bus_batch_end(brokerd_bus *bus)
{
	struct bus_batch *b;
	int k;

	if (!bus || !bus->batch || !bus->batch->open)
		return -EINVAL;
	b = bus->batch;
	k = bus_batch_flush(bus);
	b->open = false;
	bus_emit_lost_notify(bus);
	return k < 0 ? k : b->error;
}

_public_ int brokerd_bus_set_emit_lost_handler(brokerd_bus *bus, brokerd_emit_lost_handler_t handler,
					       void *userdata)
{
	if (!bus || bus->closed)
		return -EINVAL;
	if (!ring_send_lost(&bus->ring))
		return -EOPNOTSUPP;
	bus->emit_lost_handler = handler;
	bus->emit_lost_userdata = userdata;
	return 0;
}

_public_ int brokerd_bus_emit_signal(brokerd_bus *bus, const char *name, const char *member, const void *body,
				     size_t size)
{
	struct chmsg m = {
		.type = CHMSG_SIGNAL, .path = "/", .interface = BROKERD_BYTES_INTERFACE, .member = member
	};
	_cleanup_free_ void *data = NULL;
	int k;

	if (!ctrl_name_is_valid_member(member))
		return -EINVAL;
	k = bus_bytes_body(&m, body, size, &data);
	if (k < 0)
		return k;
	return emit(bus, name, &m);
}

_public_ int brokerd_bus_emit(brokerd_bus *bus, const char *name, const char *path, const char *interface,
			      const char *member, const char *signature, const void *body, size_t size)
{
	struct chmsg m = { .type = CHMSG_SIGNAL,
			   .path = path,
			   .interface = interface,
			   .member = member,
			   .signature = signature,
			   .body = body,
			   .body_len = (uint32_t)size };

	/* the rest is checked when the message is encoded */
	if (!path || !interface || !member || (size && !body))
		return -EINVAL;
	if (size > CHMSG_BODY_MAX)
		return -EMSGSIZE;
	return emit(bus, name, &m);
}

_public_ int brokerd_bus_send_signal(brokerd_bus *bus, const char *destination, const char *member,
				     const void *body, size_t size)
{
	struct chmsg m = {
		.type = CHMSG_SIGNAL, .path = "/", .interface = BROKERD_BYTES_INTERFACE, .member = member
	};
	_cleanup_free_ void *data = NULL;
	struct peer_inbox *p;
	int k;

	if (!bus || bus->closed || !destination ||
	    (!ctrl_name_is_valid_wellknown(destination) && !ctrl_name_is_valid_unique(destination)) ||
	    !ctrl_name_is_valid_member(member) || (size && !body))
		return -EINVAL;
	if (size > CHMSG_BODY_MAX)
		return -EMSGSIZE;
	if (!bus->connected)
		return -ENOTCONN;
	k = bus_bytes_body(&m, body, size, &data);
	if (k < 0)
		return k;
	k = peer_inbox_get_by_name(bus, destination, &p);
	if (k < 0)
		return k;
	{
		char unique[CTRL_UNIQUE_NAME_MAX];

		ctrl_unique_name_format(p->id, unique);
		m.destination = unique;
		m.serial = bus_next_serial(bus);
		k = bus_chan_send(bus, p->send, &m);
	}
	if (k == -ENOENT || k == -EACCES || k == -EPIPE)
		peer_inbox_drop(bus, p->id);
	return k;
}

_public_ int brokerd_bus_subscribe(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				   const char *member_filter, brokerd_msg_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;
	struct bname *b;
	int k;

	if (!bus || bus->closed || (name && !ctrl_name_is_valid_wellknown(name)) ||
	    !filter_is_valid(member_filter) || !handler)
		return -EINVAL;
	if (!name) {
		/* signals sent to this connection's inbox: nothing to ask brokerd */
		s = slot_new(bus, SLOT_SUBSCRIBE, NULL,
			     member_filter && *member_filter ? member_filter : NULL, userdata);
		if (!s)
			return -ENOMEM;
		s->handler.msg = handler;
		return slot_hand_out(s, ret_slot);
	}
	if (!bus->connected)
		return -ENOTCONN;
	k = bname_get_subscribed(bus, name, &b);
	if (k < 0)
		return k;
	s = slot_new(bus, SLOT_SUBSCRIBE, name, member_filter && *member_filter ? member_filter : NULL,
		     userdata);
	if (!s) {
		if (!b->n_subs)
			(void)bname_unsubscribe(bus, b, false);
		bname_gc(bus, b);
		return -ENOMEM;
	}
	s->handler.msg = handler;
	s->bname = b;
	b->n_subs++;
	return slot_hand_out(s, ret_slot);
}

_public_ int brokerd_bus_unsubscribe(brokerd_bus *bus, const char *name)
{
	struct brokerd_slot *s, *next;
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name))
		return -EINVAL;
	b = bname_get(bus, name, false);
	if (!b || !b->n_subs)
		return -ENOENT;
	/* the caller's slots go quiet (it frees them), the bus's own go now */
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type != SLOT_SUBSCRIBE || s->bname != b)
			continue;
		s->bname = NULL;
		if (s->floating)
			slot_destroy(s);
	}
	b->n_subs = 0; /* not subscribed again after a reconnect */
	b->watched = false;
	k = bname_unsubscribe(bus, b, true);
	bname_gc(bus, b);
	return k;
}

_public_ int brokerd_bus_watch_name(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				    brokerd_name_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;

	if (!bus || bus->closed || !handler || (name && !ctrl_name_is_valid_wellknown(name)))
		return -EINVAL;
	s = slot_new(bus, SLOT_WATCH, name, NULL, userdata);
	if (!s)
		return -ENOMEM;
	s->handler.name = handler;
	return slot_hand_out(s, ret_slot);
}
