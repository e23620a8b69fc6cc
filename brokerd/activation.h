/* SPDX-License-Identifier: MIT */
/*
 * activation.h - activation: asks for the unit of an activatable name to be
 * started (through brokerd-activator, or systemd's StartUnit when there is
 * no activator) and answers the OPEN_CALLs waiting for the name: with the
 * call cap once it is owned, with ActivationFailed, or with Timeout.
 *
 * Above grant.h and conn.h; called by the driver (and bus.c at teardown).
 */
#ifndef BROKERD_ACTIVATION_H
#define BROKERD_ACTIVATION_H

#include <stddef.h>
#include <stdint.h>

#include "brokerd/bus-state.h"
#include "brokerd/service.h"

/* Starts svc's unit; on failure err says why (for the caller's ActivationFailed). */
int activation_start(struct bus *b, const struct service *svc, char *err, size_t err_len);

/*
 * Makes c's OPEN_CALL (serial) wait for name, charged to the activations
 * quota already (given back when it is answered, also on failure here).
 * flags: the request's (CTRL_CALL_*), for the shape of the reply.
 */
int activation_add(struct bus *b, struct bus_conn *c, uint32_t serial, uint32_t flags, const char *name);

/*
 * Answers every call waiting for name: with the caps when error is NULL (the
 * name is owned now), otherwise with error and msg; ends the activator watch.
 */
void activation_settle(struct bus *b, const char *name, const char *error, const char *msg);

/* Forgets c's waiting calls (c is going). */
void activation_drop_conn(struct bus *b, struct bus_conn *c);

/* Ends every activator request and the systemd connection (the bus is going). */
void activation_deinit(struct bus *b);

#endif
