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
/*
 * A reply (or error) to the pending call s came: it completes s if it is
 * genuine (above, and stamped with the pid of the process the kernel's
 * receipt names), waits in s if the receipt is still to come, and is
 * dropped and counted as forged otherwise.
 */
void bus_call_reply(brokerd_bus *bus, struct brokerd_slot *s, brokerd_msg *msg);
/*
 * CallReceiverEnded, the seq-th control datagram: b's receiver with this id
 * and pid (0: not told) ended, its RECV revoked at revoked_at. The calls it
 * may have taken, sent before both, are marked (ended_receiver) and looked
 * at by the deadline check at the end of the pass: a reply already in the
 * inbox wins, and with receipts only the calls that pid took fail.
 */
void bus_call_mark_ended(brokerd_bus *bus, struct bname *b, uint64_t id, pid_t pid, uint64_t seq,
			 uint64_t revoked_at);
/*
 * The deadline check for the pending call s (its deadline passed, or it was
 * to be looked at now): 1 if it completed (a kept reply, a call dropped in
 * the kernel, its timeout), 2 if it is to fail because the receiver that
 * took it ended (CallReceiverEnded, or the end of the process its receipt
 * named: bus_dispatch_receiver_ended()), 0 if it waits on.
 */
int bus_call_due(brokerd_bus *bus, struct brokerd_slot *s);
/*
 * Encodes the call m into o, the library's one copy of its bytes: sent at
 * once (now), into the bus's send buffer, which o borrows until the next
 * send, and a typed body with room in front of it (bus->send_room) not
 * copied at all, its header written in the room; to wait for its chan,
 * into a buffer of o's own sized to the message. As bus_out_encode()
 * otherwise (inline up to inline_max, else the body in a memfd; the typed
 * message's fds taken).
 */
int bus_call_encode(brokerd_bus *bus, const struct chmsg *m, size_t inline_max, bool now, struct bus_out *o);

#endif
