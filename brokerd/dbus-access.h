/* SPDX-License-Identifier: MIT */
/*
 * dbus-access.h - may this message on the D-Bus socket go from one
 * connection to another? With --dbus-config, dbus-daemon's send and
 * receive rules decide each message as dbus-daemon would
 * (policy-dbus-msg.h): the sender's send rules, then the recipient's
 * receive rules. Without it (or while the XML failed to load), brokerd's
 * per-name policy decides calls to well-known names, as on native channels.
 * Messages to the driver meet the sender's send rules with the XML, as on
 * dbus-daemon (no receive rules: the driver has none); beyond them the
 * driver refuses what it refuses (dbus-driver.c).
 */
#ifndef BROKERD_DBUS_ACCESS_H
#define BROKERD_DBUS_ACCESS_H

#include <stdbool.h>

#include "brokerd/dbus-front.h"

/*
 * c sends m (stamped) to t. When refused, c gets
 * org.freedesktop.DBus.Error.AccessDenied (if m wants a reply) and this
 * returns false. A reply nobody waits for is let through: the router
 * drops those whatever the policy says.
 */
bool dbus_access_unicast(struct dbus_conn *c, struct dbus_conn *t, const struct dbus_message *m);

/*
 * c, which said Hello, sends m (stamped) to org.freedesktop.DBus: with the
 * XML, c's send rules decide it, the driver matched by its name (system.conf
 * allows its interfaces but UpdateActivationEnvironment and Debug.Stats,
 * those to root). When refused, c gets AccessDenied (if m wants a reply)
 * and this returns false. Hello itself is never checked, as on dbus-daemon.
 */
bool dbus_access_driver(struct dbus_conn *c, const struct dbus_message *m);

/* A broadcast signal from sender (NULL: the driver) to t, a matching subscriber: refused silently. */
bool dbus_access_broadcast(struct dbus_front *f, struct registry_peer *sender, struct dbus_conn *t,
			   const struct dbus_message *m);

/*
 * A signal of the driver's own (h) to t alone, such as NameAcquired: with
 * the XML, t's receive rules decide it as dbus-daemon's do; when refused,
 * text says why and this returns false.
 */
bool dbus_access_driver_signal(struct dbus_conn *t, const struct dbus_header *h, char *text, size_t text_len);

/*
 * May e, which is not m's recipient, see m (from sender, a D-Bus or a
 * native client, NULL if gone) by its eavesdrop='true' rule? With the XML,
 * e's receive rules decide as dbus-daemon's do for an eavesdropper (only an
 * allow with eavesdrop="true" lets it); without it, only root and brokerd's
 * uid, who may monitor the bus anyway.
 */
bool dbus_access_eavesdrop(struct dbus_front *f, struct registry_peer *sender, struct dbus_conn *e,
			   const struct dbus_message *m);

/* Could e see anything by an eavesdrop='true' rule (is it worth watching native channels for)? */
bool dbus_access_may_eavesdrop(struct dbus_conn *e);

/*
 * c sends m (NULL: StartServiceByName) to name, which no D-Bus connection
 * owns: an activatable name, or a native client's through the bridge. With
 * the XML, c's send rules decide m (the recipient's receive rules are not
 * D-Bus rules: a native client's are its name's, an activated one's apply
 * when the message is routed to it); without it, the per-name policy. When
 * refused, text says why and this returns false; the caller answers.
 */
bool dbus_access_send_to_name(struct dbus_conn *c, const struct dbus_message *m, const char *name, char *text,
			      size_t text_len);

#endif
