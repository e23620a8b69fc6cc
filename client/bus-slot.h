/* SPDX-License-Identifier: MIT */
/*
 * bus-slot.h - slots (bus-slot.c).
 */
#ifndef BROKERD_CLIENT_BUS_SLOT_H
#define BROKERD_CLIENT_BUS_SLOT_H

#include "client/bus-internal.h"

struct brokerd_slot *slot_new(brokerd_bus *bus, enum slot_type type, const char *name, const char *member,
			      void *userdata);
/* Gives s to the caller through ret_slot, or to the bus (floating) without one. */
int slot_hand_out(struct brokerd_slot *s, brokerd_slot **ret_slot);
void slot_unlink(struct brokerd_slot *s);
void slot_destroy(struct brokerd_slot *s);

#endif
