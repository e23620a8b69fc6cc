/* SPDX-License-Identifier: MIT */
/*
 * bus-inbox.c - SEND caps to other connections' inboxes, for replies and
 * unicast signals: pushed by brokerd for the callers of the names we serve
 * (ReplyCapability), else asked of brokerd (OPEN_INBOX) by name; cached per
 * connection id for the BUS_PEERS_MAX most recently used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
 * Attaches cap fd (always consumed) to id's inbox and caches it as *ret;
 * size is the inbox's slot size as brokerd told it (0: not told), which
 * sets how large a reply or unicast signal goes inline.
 */
static int peer_inbox_attach(brokerd_bus *bus, uint64_t id, int fd, uint32_t size, struct peer_inbox **ret)
{
	struct peer_inbox *p, **pp;
	int k;

	p = calloc(1, sizeof(*p));
	if (!p) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	k = bus_chan_attach(bus, fd, IOIPC_SUB_SEND, CHAN_PEER_SEND, p, &p->send);
	if (k < 0) {
		free(p);
		return k;
	}
	p->send->msg_max = size;
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

/* Keeps cap fd (always consumed) to id's inbox of size (0: not told). */
static int peer_inbox_add(brokerd_bus *bus, uint64_t id, int fd, uint32_t size)
{
	struct peer_inbox *p;

	if (peer_inbox_find(bus, id)) {
		close(fd); /* we have one: a cap to the same inbox with the same rights */
		return 0;
	}
	return peer_inbox_attach(bus, id, fd, size, &p);
}

void peer_inbox_read_cap_signal(brokerd_bus *bus, struct ctrl_reader *rd, int *fd)
{
	const char *caller, *called;
	uint32_t size = 0;
	uint64_t id;

	/* `ss`, or `ssu` with the caller's inbox size (HELLO's SIZES) */
	if (*fd < 0 || ctrl_read_string(rd, &caller, NULL) < 0 || ctrl_unique_name_parse(caller, &id) < 0 ||
	    ctrl_read_string(rd, &called, NULL) < 0 ||
	    (!ctrl_reader_at_end(rd) && ctrl_read_u32(rd, &size) < 0))
		return;
	(void)peer_inbox_add(bus, id, *fd, size);
	*fd = -1;
}

int peer_inbox_get_by_name(brokerd_bus *bus, const char *name, struct peer_inbox **ret)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	const char *unique = NULL;
	struct peer_inbox *p;
	uint32_t size = 0;
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
	/* `s`, or `su` with the peer's inbox size (HELLO's SIZES) */
	if (ctrl_read_string(&rd, &unique, NULL) < 0 || ctrl_unique_name_parse(unique, &id) < 0 ||
	    (!ctrl_reader_at_end(&rd) && ctrl_read_u32(&rd, &size) < 0))
		return -EPROTO;
	p = peer_inbox_find(bus, id); /* a well-known name of a peer we know */
	if (p) {
		*ret = p;
		return 0;
	}
	return peer_inbox_attach(bus, id, ctrl_reply_take_fd(&r, 0), size, ret);
}

/*
 * Takes the ReplyCapability signals that have come so far, from the socket
 * too, out of the dispatcher's queue and keeps their caps. Nothing else is
 * dispatched here: this runs inside method handlers.
 */
static void peer_inbox_take_pushed(brokerd_bus *bus)
{
	struct ctrl_queued **qq = &bus->cq_head, *q;

	bus_ctrl_drain(bus);
	while ((q = *qq)) {
		struct ctrl_message m;
		struct ctrl_reader rd;

		if (q->n_fds != 1 || ctrl_message_decode(&m, q->data, q->len, q->n_fds) < 0 ||
		    m.hdr.type != CTRL_TYPE_SIGNAL || m.hdr.code != CTRL_SIGNAL_REPLY_CAPABILITY) {
			qq = &q->next;
			continue;
		}
		ctrl_reader_init(&rd, &m);
		peer_inbox_read_cap_signal(bus, &rd, &q->fds[0]);
		if (q->fds[0] >= 0)
			close(q->fds[0]);
		*qq = q->next;
		if (bus->cq_tail == &q->next)
			bus->cq_tail = qq;
		free(q);
	}
}

int peer_inbox_get(brokerd_bus *bus, uint64_t id, struct peer_inbox **ret)
{
	char unique[CTRL_UNIQUE_NAME_MAX];

	/*
	 * brokerd pushed the cap for a caller of ours before the caller could
	 * call: it is in our cache, or on the control socket by now. Asking
	 * (OPEN_INBOX) is for a cap brokerd did not push (a receiver that was
	 * behind in reading, a policy that does not grant it) or we dropped.
	 */
	if (!peer_inbox_find(bus, id) && (bus->features & CTRL_FEATURE_CHANNELS))
		peer_inbox_take_pushed(bus);
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
