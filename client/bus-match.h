/* SPDX-License-Identifier: MIT */
/*
 * bus-match.h - match rules on a bus (bus-match.c): shared by the slots
 * that add identical rules, subscribed to the sender's signals or (without
 * a well-known sender) to every name's through brokerd's WATCH_SIGNALS.
 */
#ifndef BROKERD_CLIENT_BUS_MATCH_H
#define BROKERD_CLIENT_BUS_MATCH_H

#include "client/bus-internal.h"

/* What a rule sees of msg; channel: the name of the signal channel that
 * carried it (CTRL_BUS_NAME: the bus, org.freedesktop.DBus to a rule), or NULL. */
void bus_match_message_init(struct dbus_match_message *mm, brokerd_msg *msg, const char *channel);
/* Hands msg (a signal) to the slots of every rule it matches. */
void bus_match_dispatch(brokerd_bus *bus, brokerd_msg *msg);
/* A slot of m goes: the last one ends m and its subscription. */
void bus_match_slot_gone(brokerd_bus *bus, struct bus_match *m);
/* SignalChannel from brokerd: name's signal RECV cap (fd, or -1), taken. */
void bus_match_take_channel(brokerd_bus *bus, const char *name, int fd);
/* After a reconnect: the watch again, if a rule needs it. */
int bus_match_rewatch(brokerd_bus *bus);
/* brokerd_bus_close(): the rules' memory (their slots are gone or orphaned). */
void bus_match_free_all(brokerd_bus *bus);

#endif
