/* SPDX-License-Identifier: MIT */
/*
 * bus-object.h - objects and the standard interfaces (bus-object.c).
 */
#ifndef BROKERD_CLIENT_BUS_OBJECT_H
#define BROKERD_CLIENT_BUS_OBJECT_H

#include <stdbool.h>

#include "client/bus-internal.h"

/*
 * Serves a received call on a registered object or a standard interface:
 * 1 when it was answered (or settled by a handler), 0 when it is none of
 * the objects' business and goes on to the catch-all method, if fallback
 * says there is one (without one, what no object serves is answered
 * UnknownObject, UnknownInterface or UnknownMethod here).
 */
int bus_object_dispatch(brokerd_bus *bus, brokerd_msg *call, bool fallback);

#endif
