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

/* *p made a copy of s (or NULL), keeping the one there if it is the same. */
static bool slot_str_reuse(char **p, const char *s)
{
	if (*p && s && strcmp(*p, s) == 0)
		return true;
	free(*p);
	*p = s ? strdup(s) : NULL;
	return !s || *p;
}

/*
 * The bus's spare call slot, zeroed, with name and member (its own, or
 * copies), or NULL: calls one after another, as a synchronous caller
 * makes them, allocate nothing for their slots.
 */
static struct brokerd_slot *slot_spare_take(brokerd_bus *bus, const char *name, const char *member)
{
	struct brokerd_slot *s = bus->slot_spare;
	char *n, *m;

	if (!s)
		return NULL;
	bus->slot_spare = NULL;
	n = s->name;
	m = s->member;
	if (!slot_str_reuse(&n, name) || !slot_str_reuse(&m, member)) {
		free(n);
		free(m);
		free(s);
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	s->name = n;
	s->member = m;
	return s;
}

struct brokerd_slot *slot_new(brokerd_bus *bus, enum slot_type type, const char *name, const char *member,
			      void *userdata)
{
	struct brokerd_slot *s = type == SLOT_CALL ? slot_spare_take(bus, name, member) : NULL;

	if (s)
		goto link;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if ((name && !(s->name = strdup(name))) || (member && !(s->member = strdup(member)))) {
		free(s->name);
		free(s);
		return NULL;
	}
link:
	s->bus = bus;
	s->type = type;
	s->userdata = userdata;
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
	if (s->type == SLOT_CALL && !bus->slot_spare) {
		bus->slot_spare = s; /* slot_spare_take() zeroes it */
		return;
	}
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
