/* SPDX-License-Identifier: MIT */
/*
 * bus-open.c - a bus's life as the application sees it: opened (allocated
 * and connected) and closed (calls already taken answered, the event source
 * detached, disconnected, the caller's slots orphaned).
 */
#include <errno.h>
#include <stdlib.h>

#include "client/bus-alloc.h"
#include "client/bus-connect.h"
#include "client/bus-match.h"
#include "client/bus-slot.h"
#include "client/msg.h"

static int bus_new(brokerd_bus **ret, const char *path)
{
	brokerd_bus *bus;
	int k;

	k = bus_alloc(&bus, path);
	if (k < 0)
		return k;
	k = bus_connect(bus);
	if (k < 0) {
		bus_unref(bus);
		return k;
	}
	*ret = bus;
	return 0;
}

_public_ int brokerd_bus_open(brokerd_bus **ret, const char *path)
{
	if (!ret || !path || path[0] != '/')
		return -EINVAL;
	return bus_new(ret, path);
}

_public_ int brokerd_bus_open_system(brokerd_bus **ret)
{
	const char *p = secure_getenv(BROKERD_SOCKET_ENV);

	if (!ret)
		return -EINVAL;
	return bus_new(ret, p && p[0] == '/' ? p : BROKERD_SYSTEM_SOCKET);
}

/*
 * Stops taking calls and answers those already taken but not dispatched with
 * an error, so that their callers learn at once instead of timing out.
 */
static void bus_drain_calls(brokerd_bus *bus)
{
	for (struct bname *b = bus->names; b; b = b->next) {
		struct chan *c = b->call_recv;
		brokerd_msg *msg = NULL;

		if (!c)
			continue;
		chan_cancel_wait(&bus->ring, c);
		if (!c->ready)
			continue;
		ring_unready(&bus->ring, c);
		if (msg_receive(bus, c, b->name, &msg) < 0)
			continue;
		if (msg->type == CHMSG_CALL)
			(void)brokerd_msg_reply_error(msg, BROKERD_ERROR_DISCONNECTED,
						      "the service closed its connection");
		brokerd_msg_unref(msg);
	}
}

_public_ brokerd_bus *brokerd_bus_close(brokerd_bus *bus)
{
	struct brokerd_slot *s;
	struct bname *b;

	if (!bus || bus->closed)
		return NULL;
	if (bus->batch && bus->batch->open)
		(void)brokerd_bus_batch_end(bus); /* the signals of a batch left open go, before the chans */
	bus->exit = true; /* no call channel is re-armed from here on */
	if (bus->connected)
		bus_drain_calls(bus);
	(void)brokerd_bus_detach_event(bus);
	bus->closed = true;
	bus->reconnect = false;
	bus->state_handler = NULL; /* closing is not news to the one closing */
	bus_disconnect(bus, false);
	while ((s = bus->slots)) {
		if (s->floating) {
			slot_destroy(s);
			continue;
		}
		/* the caller still holds it and frees it later: orphan it */
		slot_unlink(s);
		s->bname = NULL;
		s->match = NULL;
		s->bus = NULL;
	}
	bus_match_free_all(bus);
	while ((b = bus->names)) {
		bus->names = b->next;
		free(b->name);
		free(b);
	}
	bus_unref(bus);
	return NULL;
}
