/* SPDX-License-Identifier: MIT */
/*
 * driver.h - the broker's request driver: every control request goes
 * through driver_dispatch(), which answers it through the op table; the
 * registry reports name changes to driver_registry_ops.
 *
 * The top of the stack below bus.c: calls query, activation, grant and conn.
 */
#ifndef BROKERD_DRIVER_H
#define BROKERD_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/bus-state.h"
#include "brokerd/registry.h"

/* Registry callbacks; their userdata is the struct bus. */
extern const struct registry_ops driver_registry_ops;

/*
 * Handles one datagram read from c (n_fds: how many fds came with it, all
 * closed already; truncated: it was larger than a request may be). Answers
 * every request, then runs the revocations it caused.
 */
void driver_dispatch(struct bus_conn *c, const uint8_t *buf, size_t len, unsigned int n_fds, bool truncated);

/* Reads the first unique id from the state file and reserves a block. */
void driver_ids_load(struct bus *b);
/*
 * A unique id was just taken from the registry (a native HELLO, a D-Bus
 * Hello): records a new block in the state file when the ids reach the end
 * of the recorded one, so that a brokerd started after a crash never hands
 * out an id again.
 */
void driver_ids_reserve(struct bus *b);

/*
 * NameOwnerChanged as native clients get it (a control signal to those that
 * asked, a channel message on the bus's signal channel): for a name the
 * D-Bus front end's registry holds (dbus-bridge.c). "" for no owner.
 */
void driver_notify_owner_changed(struct bus *b, const char *name, const char *old_owner, const char *new_owner);

#endif
