/* SPDX-License-Identifier: MIT */
/*
 * bus-dispatch.h - what arrived, to whom it goes (bus-dispatch.c).
 */
#ifndef BROKERD_CLIENT_BUS_DISPATCH_H
#define BROKERD_CLIENT_BUS_DISPATCH_H

#include <stddef.h>
#include <stdint.h>
#include "client/bus-internal.h"

/* A receive completed on c (its res and buf set): decode, re-arm, dispatch.
 * A malformed message is dropped. */
void bus_dispatch_chan(brokerd_bus *bus, struct chan *c);
/* A broker signal from the control socket, the seq-th datagram read
 * (bus->ctrl_seq); takes ownership of fds. Returns 1 (one event handled). */
int bus_dispatch_ctrl(brokerd_bus *bus, const uint8_t *buf, size_t len, int *fds, unsigned int n_fds,
		      uint64_t seq);

/* Fails the call s, which a receiver that ended may have taken
 * (s->ended_receiver), or which a process that ended took (s->taker: its
 * watch, or its name's last owner went), with a NoReply error. */
void bus_dispatch_receiver_ended(brokerd_bus *bus, struct brokerd_slot *s);

#endif
