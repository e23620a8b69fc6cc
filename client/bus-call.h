/* SPDX-License-Identifier: MIT */
/*
 * bus-call.h - making calls (bus-call.c).
 */
#ifndef BROKERD_CLIENT_BUS_CALL_H
#define BROKERD_CLIENT_BUS_CALL_H

#include "client/bus-internal.h"

/* Ends the pending call s with msg or error and runs its handler (s is
 * freed first if floating). */
void bus_call_complete(struct brokerd_slot *s, brokerd_msg *msg, int error);
/*
 * Whether a reply to the pending call s that the kernel stamped with badge
 * comes from a connection that receives the calls of s's name (which may
 * ask brokerd). Anything else is a forgery.
 */
bool bus_call_reply_is_genuine(brokerd_bus *bus, struct brokerd_slot *s, uint64_t badge);
/* Remembers that connection id receives the calls of b's name (it became its owner). */
void bus_call_note_receiver(struct bname *b, uint64_t id);

#endif
