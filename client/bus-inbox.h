/* SPDX-License-Identifier: MIT */
/*
 * bus-inbox.h - SEND caps to other connections' inboxes (bus-inbox.c).
 */
#ifndef BROKERD_CLIENT_BUS_INBOX_H
#define BROKERD_CLIENT_BUS_INBOX_H

#include <stdint.h>
#include "client/bus-internal.h"

/*
 * A SEND cap to the inbox of `name` (unique, or well-known: its primary
 * owner), cached per connection id for the BUS_PEERS_MAX most recent peers.
 */
int peer_inbox_get_by_name(brokerd_bus *bus, const char *name, struct peer_inbox **ret);
/* The same by connection id, taking the caps brokerd pushed first. */
int peer_inbox_get(brokerd_bus *bus, uint64_t id, struct peer_inbox **ret);
/*
 * Keeps the cap *fd to a caller's inbox that a ReplyCapability signal
 * (read by rd) carries, with the inbox size when it says one; *fd is -1
 * once taken, left to the caller when the signal is malformed.
 */
void peer_inbox_read_cap_signal(brokerd_bus *bus, struct ctrl_reader *rd, int *fd);
/* Forgets the cap to id's inbox (it is gone, or the cap revoked). */
void peer_inbox_drop(brokerd_bus *bus, uint64_t id);
void peer_inbox_clear(brokerd_bus *bus);

#endif
