/* SPDX-License-Identifier: MIT */
/*
 * bus-slot.c - slots: what a caller registered on a bus (a subscription, a
 * method, a name watch, a pending call, a monitor), owned by the caller or
 * floating (owned by the bus). Freeing the last subscription slot of a name
 * ends the subscription.
 */
#include <stdlib.h>
#include <string.h>

#include "client/bus-chan.h"
#include "client/bus-match.h"
#include "client/bus-name.h"
#include "client/bus-slot.h"
#include "client/bus-taker.h"

struct brokerd_slot *slot_new(brokerd_bus *bus, enum slot_type type, const char *name, const char *member,
			      void *userdata)
{
	struct brokerd_slot *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->bus = bus;
	s->type = type;
	s->userdata = userdata;
	if ((name && !(s->name = strdup(name))) || (member && !(s->member = strdup(member)))) {
		free(s->name);
		free(s);
		return NULL;
	}
	s->next = bus->slots;
	if (bus->slots)
		bus->slots->prev = s;
	bus->slots = s;
	return s;
}

/* Gives s to the caller through ret_slot, or to the bus (floating) without one. */
int slot_hand_out(struct brokerd_slot *s, brokerd_slot **ret_slot)
{
	s->floating = !ret_slot;
	if (ret_slot)
		*ret_slot = s;
	return 0;
}

void slot_unlink(struct brokerd_slot *s)
{
	brokerd_bus *bus = s->bus;

	if (s->prev)
		s->prev->next = s->next;
	else if (bus->slots == s)
		bus->slots = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

void slot_destroy(struct brokerd_slot *s)
{
	brokerd_bus *bus = s->bus;
	struct bname *b = s->bname;

	/* replies a call kept for its receipt, the watch on its taker */
	for (unsigned int i = 0; i < s->n_held; i++)
		brokerd_msg_unref(s->held[i]);
	s->n_held = 0;
	if (bus)
		bus_taker_release(bus, s);
	if (!bus) {
		/* orphaned by brokerd_bus_close(): only the memory is left */
		s->queued = bus_out_free(s->queued);
		free(s->name);
		free(s->member);
		free(s);
		return;
	}
	slot_unlink(s);
	if (s->type == SLOT_SUBSCRIBE && b)
		bname_subscription_put(bus, b);
	if (s->type == SLOT_MONITOR)
		bus_monitors_clear(bus);
	if (s->type == SLOT_MATCH && s->match)
		bus_match_slot_gone(bus, s->match);
	s->bname = NULL;
	bname_gc(bus, b);
	s->queued = bus_out_free(s->queued);
	free(s->name);
	free(s->member);
	free(s);
}

_public_ brokerd_slot *brokerd_slot_free(brokerd_slot *slot)
{
	if (slot)
		slot_destroy(slot);
	return NULL;
}
