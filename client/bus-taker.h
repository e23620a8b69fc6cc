/* SPDX-License-Identifier: MIT */
/*
 * bus-taker.h - the processes that took our calls, watched (bus-taker.c).
 */
#ifndef BROKERD_CLIENT_BUS_TAKER_H
#define BROKERD_CLIENT_BUS_TAKER_H

#include "client/bus-internal.h"

/*
 * The call s was taken by the process s->taker (its receipt, just read):
 * watch it, through one pidfd per process shared by the calls it took. A
 * process already gone marks s at once; one that cannot be watched (no
 * pidfds, no fds left) leaves s to CallReceiverEnded and its timeout.
 */
void bus_taker_watch(brokerd_bus *bus, struct brokerd_slot *s);
/* s no longer waits for its taker (answered, failed, freed, sent again). */
void bus_taker_release(brokerd_bus *bus, struct brokerd_slot *s);
/*
 * Reads which watched processes ended (when the bus fd said so, or always
 * after a wait the bus did not make) and marks the calls they took to be
 * failed by the deadline check (bus_call_due()). Runs before the pass
 * reaps completions, so that a reply the process sent before it ended is
 * dispatched before its call is failed.
 */
void bus_takers_check(brokerd_bus *bus);
/* Closes every pidfd (the bus is freed). */
void bus_takers_free(brokerd_bus *bus);

#endif
