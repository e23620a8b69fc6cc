/* SPDX-License-Identifier: MIT */
/*
 * bus-connect.h - connecting and disconnecting (bus-connect.c).
 */
#ifndef BROKERD_CLIENT_BUS_CONNECT_H
#define BROKERD_CLIENT_BUS_CONNECT_H

#include <stdbool.h>
#include "client/bus-internal.h"

/* Tells the state handler (BROKERD_STATE_*). */
void bus_set_state(brokerd_bus *bus, int state);
/* Drops the connection and everything of the old instance; fails the calls
 * in flight; schedule_reconnect: retry after the backoff. */
void bus_disconnect(brokerd_bus *bus, bool schedule_reconnect);
/* (Re)connects and restores names and subscriptions: how many of them
 * brokerd refused (a name it did not give back, a subscription), or -errno
 * with the bus silently disconnected. */
int bus_connect(brokerd_bus *bus);

#endif
