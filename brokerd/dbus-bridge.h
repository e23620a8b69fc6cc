/* SPDX-License-Identifier: MIT */
/*
 * dbus-bridge.h - calls between the two protocols of the one bus: a D-Bus
 * client (dbus-conn.c) calling a name a native client owns. brokerd does
 * what a native caller would: it holds a SEND cap on the name's call channel
 * badged with the D-Bus connection's id (so the service sees the caller as
 * that connection's unique name), and an inbox for the connection that the
 * service's receivers get ReplyCapability caps for. The D-Bus message's
 * header becomes a channel message header, its body and fds go unchanged;
 * the reply or error comes back into the inbox and goes out as a D-Bus
 * message with SENDER the service's unique name (the kernel's badge).
 *
 * The other way, brokerd receives on the call channel of a name a D-Bus
 * connection owns and passes the calls to it, its replies into the native
 * callers' inboxes; and signals cross both ways (native signal channels
 * received for D-Bus match rules, D-Bus broadcasts emitted on the signal
 * channels of the sender's names).
 *
 * The bridge's channel I/O runs on an io_uring of its own whose eventfd
 * sd-event watches: a receive waits in the kernel, a send never blocks.
 */
#ifndef BROKERD_DBUS_BRIDGE_H
#define BROKERD_DBUS_BRIDGE_H

#include "brokerd/dbus-front.h"

struct dbus_bridge;

/* *ret NULL (and 0) when the kernel has no channels: D-Bus calls to native names are refused. */
int dbus_bridge_new(struct dbus_bridge **ret, struct dbus_front *f);
struct dbus_bridge *dbus_bridge_free(struct dbus_bridge *br);

/*
 * m (stamped) from c to a destination that names a native client. Answers
 * m with an error itself when it cannot go; the fds stay the caller's.
 * Returns <0 only for a failure that should drop c (none today).
 */
int dbus_bridge_route(struct dbus_conn *c, struct dbus_message *m, const int *fds);
/* c goes: its calls are forgotten, its inbox and caps revoked and freed. */
void dbus_bridge_conn_gone(struct dbus_conn *c);
/*
 * A well-known name changed owner, old and new of either kind
 * (dbus-driver.c, before D-Bus clients hear of it): what the bridge
 * received before goes on first (to the old owner); a D-Bus owner has its
 * native callers' calls received by brokerd and passed on, a native one
 * (or none) does not; match rules get a native owner's signals. Works
 * without channels too (bridge NULL).
 */
void dbus_bridge_owner_changed(struct dbus_front *f, const char *name, struct registry_peer *old,
			       struct registry_peer *new);
/*
 * A D-Bus client added a match rule: from now on brokerd receives the
 * signals of every native name (its signal channel) and broadcasts them to
 * the D-Bus clients whose rules match.
 */
void dbus_bridge_signals_wanted(struct dbus_front *f);
/* A broadcast signal from c: onto the signal channel of each of its names native clients subscribed to. */
void dbus_bridge_signal(struct dbus_conn *c, const struct dbus_message *m, const int *fds);

#endif
