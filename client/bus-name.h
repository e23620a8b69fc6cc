/* SPDX-License-Identifier: MIT */
/*
 * bus-name.h - the well-known names a bus uses (bus-name.c).
 */
#ifndef BROKERD_CLIENT_BUS_NAME_H
#define BROKERD_CLIENT_BUS_NAME_H

#include <stdbool.h>
#include "client/bus-internal.h"

/* The bname of name; with create, a new one if there is none (NULL without
 * memory). */
struct bname *bname_get(brokerd_bus *bus, const char *name, bool create);
void bname_close_chans(brokerd_bus *bus, struct bname *b);
/* Frees b if nothing refers to it any more. */
void bname_gc(brokerd_bus *bus, struct bname *b);
/* Takes the caps that come with owning b out of r (call receive, signal send). */
int bname_take_owner_fds(brokerd_bus *bus, struct bname *b, struct ctrl_reply *r);
int bname_subscribe(brokerd_bus *bus, struct bname *b);
/* The bname of name, subscribed to its signals (freed again on failure): 0 or -errno. */
int bname_get_subscribed(brokerd_bus *bus, const char *name, struct bname **ret);
/* One user of b's subscription less (n_subs): the last ends it, without waiting,
 * unless a match rule without a sender needs it (it stays, as watched). */
void bname_subscription_put(brokerd_bus *bus, struct bname *b);
/* Ends the subscription to b's signals; wait: for brokerd's answer. */
int bname_unsubscribe(brokerd_bus *bus, struct bname *b, bool wait);
/* REQUEST_NAME: a BROKERD_NAME_* result or -errno. */
int bname_request(brokerd_bus *bus, struct bname *b, unsigned int flags);
/* Opens b's call chan; wait: let brokerd activate the name first. */
int bname_open_call(brokerd_bus *bus, struct bname *b, bool wait);
/*
 * The ring's on_lost: a send of ours on chan sub_id (a name's signal chan)
 * made n subscribers lose a signal; counted, and kept for the handler.
 */
void bname_emit_lost(void *userdata, uint32_t sub_id, uint32_t n);
/* c, a name's signal chan just attached: its sends count what they cost subscribers, told to bname_emit_lost() */
void bname_sig_send_counts(brokerd_bus *bus, struct chan *c);
/* Tells the emit-lost handler what it was not told yet (not while a send batch is open). */
void bus_emit_lost_notify(brokerd_bus *bus);

#endif
