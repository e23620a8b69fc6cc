/* SPDX-License-Identifier: MIT */
/*
 * bus-inbox.c - SEND caps to other connections' inboxes, for replies and
 * unicast signals: asked of brokerd (OPEN_INBOX) by name, cached per
 * connection id for the BUS_PEERS_MAX most recently used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-chan.h"
#include "client/bus-control.h"
#include "client/bus-inbox.h"

static struct peer_inbox *peer_inbox_find(brokerd_bus *bus, uint64_t id)
{
	struct peer_inbox *p, **pp;

	for (pp = &bus->peer_inboxes; (p = *pp); pp = &p->next)
		if (p->id == id) {
			/* most recently used first */
			*pp = p->next;
			p->next = bus->peer_inboxes;
			bus->peer_inboxes = p;
			return p;
		}
	return NULL;
}

/*
 * A SEND cap to the inbox of `name` (unique, or well-known: its primary
 * owner), cached per connection id for the BUS_PEERS_MAX most recent peers.
 */
int peer_inbox_get_by_name(brokerd_bus *bus, const char *name, struct peer_inbox **ret)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	const char *unique = NULL;
	struct peer_inbox *p, **pp;
	uint64_t id;
	int k;

	if (ctrl_unique_name_parse(name, &id) >= 0 && (p = peer_inbox_find(bus, id))) {
		*ret = p;
		return 0;
	}
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	k = bus_ctrl_request(bus, CTRL_OP_OPEN_INBOX, name, 0, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	if (ctrl_read_string(&rd, &unique, NULL) < 0 || ctrl_unique_name_parse(unique, &id) < 0)
		return -EPROTO;
	p = peer_inbox_find(bus, id); /* a well-known name of a peer we know */
	if (p) {
		*ret = p;
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	k = bus_chan_attach(bus, ctrl_reply_take_fd(&r, 0), IOIPC_SUB_SEND, CHAN_PEER_SEND, p, &p->send);
	if (k < 0) {
		free(p);
		return k;
	}
	p->id = id;
	p->next = bus->peer_inboxes;
	bus->peer_inboxes = p;
	if (++bus->n_peer_inboxes > BUS_PEERS_MAX) {
		/* drop the least recently used */
		for (pp = &bus->peer_inboxes; (*pp)->next; pp = &(*pp)->next)
			;
		chan_close(&bus->ring, (*pp)->send);
		free(*pp);
		*pp = NULL;
		BUG_ON(bus->n_peer_inboxes == 0);
		bus->n_peer_inboxes--;
	}
	*ret = p;
	return 0;
}

int peer_inbox_get(brokerd_bus *bus, uint64_t id, struct peer_inbox **ret)
{
	char unique[CTRL_UNIQUE_NAME_MAX];

	ctrl_unique_name_format(id, unique);
	return peer_inbox_get_by_name(bus, unique, ret);
}

void peer_inbox_drop(brokerd_bus *bus, uint64_t id)
{
	for (struct peer_inbox **pp = &bus->peer_inboxes; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			struct peer_inbox *p = *pp;

			*pp = p->next;
			chan_close(&bus->ring, p->send);
			free(p);
			BUG_ON(bus->n_peer_inboxes == 0);
			bus->n_peer_inboxes--;
			return;
		}
}

void peer_inbox_clear(brokerd_bus *bus)
{
	struct peer_inbox *p;

	while ((p = bus->peer_inboxes)) {
		bus->peer_inboxes = p->next;
		chan_close(&bus->ring, p->send);
		free(p);
	}
	bus->n_peer_inboxes = 0;
}
