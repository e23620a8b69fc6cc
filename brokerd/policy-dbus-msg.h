/* SPDX-License-Identifier: MIT */
/*
 * policy-dbus-msg.h - dbus-daemon's send and receive rules decided per
 * message, as dbus-daemon decides them, for the messages brokerd carries
 * itself: those on its D-Bus socket (dbus-front.h). Native channel
 * traffic never passes through brokerd and keeps the per-name decision of
 * policy.h (policy-dbus.c maps the same rules onto it).
 *
 * The rules of one configuration (dbus-config.h) in dbus-daemon's order
 * for a connection: <policy context="default">, then <policy group=...>
 * for each of its groups, <policy user=...> for its uid, <policy
 * at_console=...>, <policy context="mandatory">; each in file order, and
 * the last rule that matches a message decides; no match is a denial. A
 * send rule is checked against the sender's rules, a receive rule against
 * the recipient's. See brokerd/README.md, "D-Bus configuration".
 */
#ifndef BROKERD_POLICY_DBUS_MSG_H
#define BROKERD_POLICY_DBUS_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "brokerd/dbus-config.h"
#include "protocol/dbus-message.h"

struct policy_dbus_msg;

/*
 * One end of a message: a connection's credentials and the names it owns
 * or waits for (owns(userdata, name, prefix): name itself, or with prefix
 * any name equal to it or below it). A NULL peer is the bus driver
 * org.freedesktop.DBus, which is matched by the name in the message.
 */
struct policy_dbus_peer {
	uid_t uid;
	const gid_t *gids; /* every group, the primary one included */
	size_t n_gids;
	bool at_console; /* logged in on a seat (sd_uid_get_seats()) */
	bool (*owns)(void *userdata, const char *name, bool prefix);
	void *userdata;
};

/* What decided: how many rules matched and the last of them (file NULL when none did). */
struct policy_dbus_verdict {
	bool allowed;
	unsigned int matched;
	const char *file;
	unsigned int line;
};

/*
 * The send and receive rules of c (own, user and group rules are not
 * message rules: policy.h decides those). A user or group brokerd does
 * not know skips its <policy>, as in dbus-daemon. -ENOMEM only.
 */
int policy_dbus_msg_new(struct policy_dbus_msg **ret, const struct dbus_config *c);
struct policy_dbus_msg *policy_dbus_msg_free(struct policy_dbus_msg *p);
DEFINE_FREE_FUNC(struct policy_dbus_msg, policy_dbus_msg_free);

size_t policy_dbus_msg_count(const struct policy_dbus_msg *p);
/* Whether some rule is in an at_console policy: only then is at_console worth finding out. */
bool policy_dbus_msg_uses_console(const struct policy_dbus_msg *p);

/*
 * May sender send h to receiver? requested_reply: h answers a call of
 * receiver that was let through and still waits (replies only). For a
 * broadcast signal, receiver is each recipient in turn. sender must not
 * be NULL (the driver's own messages are not checked on sending).
 */
struct policy_dbus_verdict policy_dbus_msg_check_send(const struct policy_dbus_msg *p,
						      const struct policy_dbus_peer *sender,
						      const struct policy_dbus_peer *receiver,
						      const struct dbus_header *h, bool requested_reply);

/*
 * May receiver receive h from sender (NULL: the driver)? eavesdropping:
 * receiver is not the one h is addressed to (a monitor).
 */
struct policy_dbus_verdict policy_dbus_msg_check_receive(const struct policy_dbus_msg *p,
							 const struct policy_dbus_peer *receiver,
							 const struct policy_dbus_peer *sender,
							 const struct dbus_header *h, bool requested_reply,
							 bool eavesdropping);

/*
 * Could receiver ever eavesdrop: has it a receive rule that allows with
 * eavesdrop="true"? Whether a message may be seen is still for
 * policy_dbus_msg_check_receive() to say; this tells whether to look.
 */
bool policy_dbus_msg_may_eavesdrop(const struct policy_dbus_msg *p, const struct policy_dbus_peer *receiver);

#endif
