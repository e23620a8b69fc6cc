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

#endif
