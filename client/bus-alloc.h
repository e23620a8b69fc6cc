/* SPDX-License-Identifier: MIT */
/*
 * bus-alloc.h - a brokerd_bus as an object (bus-alloc.c).
 */
#ifndef BROKERD_CLIENT_BUS_ALLOC_H
#define BROKERD_CLIENT_BUS_ALLOC_H

#include "client/bus-internal.h"

/* A new bus for path with its ring, epoll fd and timer, not connected. */
int bus_alloc(brokerd_bus **ret, const char *path);
brokerd_bus *bus_ref(brokerd_bus *bus);
brokerd_bus *bus_unref(brokerd_bus *bus);

#endif
