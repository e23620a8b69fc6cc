/* SPDX-License-Identifier: MIT */
/*
 * restart.h - restart without losing the bus: on an orderly stop brokerd
 * hands its connections, its io_uring (and with it every channel, grant
 * and badge) and its state to systemd's fd store; the next brokerd takes
 * them over, so clients notice nothing (brokerd/README.md, "Restart").
 *
 * Below bus.c; above admission, activation, grant and conn, and the
 * registry. Calls nothing above it.
 */
#ifndef BROKERD_RESTART_H
#define BROKERD_RESTART_H

#include <stdbool.h>
#include <stddef.h>

#include "brokerd/bus-state.h"

/* The fd names brokerd stores under (FDNAME=). */
#define RESTART_FDNAME_STATE  "brokerd-state"
#define RESTART_FDNAME_KEEPER "brokerd-keeper"
/* the keeper's watch: when systemd drops the store (a stop), the keeper revokes everything */
#define RESTART_FDNAME_KEEPER_WATCH "brokerd-keeper-watch"
#define RESTART_FDNAME_CONN   "brokerd-conn"
/* the D-Bus connections and their state (dbus-restart.c) */
#define RESTART_FDNAME_DBUS_CONN  "brokerd-dbus-conn"
#define RESTART_FDNAME_DBUS_STATE "brokerd-dbus-state"

/* The fds a new brokerd got back from the store (sd_listen_fds_with_names). */
struct restart_fds {
	int state;  /* -1 if not there */
	int keeper; /* pidfd of the process keeping the ring (restart.c), or -1 */
	int keeper_watch; /* the other end of the keeper's watch socket pair, or -1 */
	int ring;   /* the ring once taken from the keeper, else -1 */
	int *conns;
	size_t n_conns;
	int dbus_state; /* the D-Bus front end's (dbus-restart.c), or -1 */
	int *dbus_conns;
	size_t n_dbus_conns;
	bool restored; /* restart_load() took the bus over: the D-Bus connections may follow */
	/*
	 * A second fd of a kind that comes once (two states, two keepers) or
	 * a "brokerd-" name this brokerd does not know (another version's):
	 * not what one hand-over of ours stores, so none of it is taken.
	 */
	bool foreign;
};

/* Is name one of ours (not the listening socket)? */
bool restart_fdname_is_ours(const char *name);
/* Is name in our namespace of fd names ("brokerd-"), known or not? */
bool restart_fdname_is_stored(const char *name);

/*
 * Hands the bus over for the next brokerd: stops reading, fails pending
 * activations, flushes, ends what cannot be handed over, serializes the
 * state into a sealed memfd and stores it with every connection in
 * systemd's fd store; the ring, which the kernel does not let through a
 * socket, stays with a keeper process the next brokerd takes it from. 0: handed over, exit now without
 * tearing anything down. Negative errno: nothing is stored (the store is
 * cleared again), stop as before (clients reconnect).
 */
int restart_save(struct bus *b);

/*
 * Takes over what a previous brokerd stored (every fd in fds is taken, the
 * store entries are cleared first). 1: the chanmgr, channels, connections,
 * names and grants are back (connections without event sources yet). 0:
 * nothing usable (no state, not clean, unknown version, a connection whose
 * credentials changed, a ring this process cannot use): the recorded
 * grants are revoked, every fd closed, the bus starts empty. Negative
 * errno: out of memory half-way (the bus cannot run).
 */
int restart_load(struct bus *b, struct restart_fds *fds);

/*
 * Takes nothing of what fds holds: clears the store, kills the keeper
 * (its ring and channels go with it), closes every fd; why (or NULL) is
 * logged. For a start that cannot take a bus over (--no-channels), and
 * restart_load()'s refusals before a state is read.
 */
void restart_discard(struct bus *b, struct restart_fds *fds, const char *why);

/*
 * What restart_load() checks of a state before it touches anything (all
 * but the fds and the ring): 0 usable, -EPROTO or -EBADMSG not, -ENOMEM.
 * For fuzz-restart and the unit tests.
 */
int restart_state_check(const void *data, size_t size);

#endif
