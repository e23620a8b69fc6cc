/* SPDX-License-Identifier: MIT */
/*
 * dbus-access.c - the policy of each message on the D-Bus socket (see
 * dbus-access.h): the connections as policy-dbus-msg.h sees them (uid,
 * groups, console, the names they own or queue for), the decision, and a
 * refusal worded as dbus-daemon words it, so that logs and tools that
 * look for "Rejected send message" read it the same.
 */
#include <stdio.h>
#include <string.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/dbus-access.h"
#include "brokerd/log.h"
#include "brokerd/policy-dbus-msg.h"
#include "brokerd/policy.h"
#include "brokerd/registry.h"

#define ACCESS_DENIED "org.freedesktop.DBus.Error.AccessDenied"

/* Whether peer p owns name or waits in its queue (prefix: or a name below it); its unique name too. */
static bool peer_owns(struct registry *r, struct registry_peer *p, const char *unique, const char *name,
		      bool prefix)
{
	size_t l = strlen(name);
	const char *n;

	if (!p)
		return false;
	if (name[0] == ':')
		return !prefix && strcmp(unique, name) == 0;
	if (!prefix)
		return registry_name_entry_flags(r, p, name) >= 0;
	for (unsigned int i = 0; (n = registry_peer_entry_name(p, i, NULL)); i++)
		if (strncmp(n, name, l) == 0 && (n[l] == 0 || n[l] == '.'))
			return true;
	return false;
}

static bool conn_owns(void *userdata, const char *name, bool prefix)
{
	struct dbus_conn *c = userdata;

	return peer_owns(c->front->registry, c->peer, c->unique, name, prefix);
}

/* A native client, as policy-dbus-msg.h sees the sender of what it sends (dbus-monitor-native.c). */
struct native_peer {
	struct registry *registry;
	struct registry_peer *peer;
};

static bool native_owns(void *userdata, const char *name, bool prefix)
{
	struct native_peer *n = userdata;

	return n->peer && peer_owns(n->registry, n->peer, n->peer->unique_name, name, prefix);
}

/* dbus-daemon's at_console: the user has a seat in logind (and logind runs). */
static bool at_console(uid_t uid)
{
	if (access("/run/systemd/seats/", F_OK) < 0)
		return false;
	return sd_uid_get_seats(uid, 0, NULL) > 0;
}

static void peer_of(struct dbus_conn *c, const struct policy_dbus_msg *p, struct policy_dbus_peer *ret)
{
	*ret = (struct policy_dbus_peer){
		.uid = c->cred.uid,
		.gids = c->gids,
		.n_gids = c->n_gids,
		.at_console = policy_dbus_msg_uses_console(p) && at_console(c->cred.uid),
		.owns = conn_owns,
		.userdata = c,
	};
}

static const char *type_name(uint8_t t)
{
	switch (t) {
	case DBUS_MESSAGE_METHOD_CALL:
		return "method_call";
	case DBUS_MESSAGE_METHOD_RETURN:
		return "method_return";
	case DBUS_MESSAGE_ERROR:
		return "error";
	case DBUS_MESSAGE_SIGNAL:
		return "signal";
	default:
		return "invalid";
	}
}

static const char *unset(const char *s)
{
	return s ? s : "(unset)";
}

/* dbus-daemon's wording, with what decided it for the log. */
static void rejected(char *buf, size_t len, const char *what, const struct policy_dbus_verdict *v,
		     const struct dbus_conn *from, const struct dbus_conn *to, const struct dbus_message *m,
		     bool requested_reply)
{
	snprintf(buf, len,
		 "Rejected %s message, %u matched rules; type=\"%s\", sender=\"%s\" (uid=%u pid=%d) "
		 "interface=\"%s\" member=\"%s\" error name=\"%s\" requested_reply=\"%d\" destination=\"%s\" "
		 "(uid=%u pid=%d)",
		 what, v->matched, type_name(m->h.type), from ? from->unique : unset(m->h.sender),
		 from ? (unsigned int)from->cred.uid : 0U, from ? (int)from->cred.pid : 0,
		 unset(m->h.interface), unset(m->h.member), unset(m->h.error_name), requested_reply,
		 m->h.destination ? m->h.destination : "(unset)", to ? (unsigned int)to->cred.uid : 0U,
		 to ? (int)to->cred.pid : 0);
}

static void log_refusal(const struct dbus_conn *c, const char *text, const struct policy_dbus_verdict *v)
{
	if (v->file)
		log_full(LOG_INFO, c->name, c->cred.uid, "%s (decided by %s:%u)", text, v->file, v->line);
	else
		log_full(LOG_INFO, c->name, c->cred.uid, "%s (no rule matched: denied by default)", text);
}

/* Is there a call of t to c that m answers? */
static bool reply_requested(struct dbus_conn *c, struct dbus_conn *t, const struct dbus_message *m)
{
	for (struct dbus_reply *r = c->front->replies; r; r = r->next)
		if (r->caller == t && r->callee == c && r->serial == m->h.reply_serial)
			return true;
	return false;
}

bool dbus_access_unicast(struct dbus_conn *c, struct dbus_conn *t, const struct dbus_message *m)
{
	struct bus *b = c->front->bus;
	const struct policy_dbus_msg *p = b->dbus_policy;
	struct policy_dbus_peer from, to;
	struct policy_dbus_verdict v;
	bool reply = m->h.type == DBUS_MESSAGE_METHOD_RETURN || m->h.type == DBUS_MESSAGE_ERROR;
	bool requested = reply && reply_requested(c, t, m);
	char text[1024];

	if (!p) {
		const char *dest = m->h.destination;

		if (dest[0] == ':' ||
		    policy_check(b->policy, c->cred.uid, c->gids, c->n_gids, POLICY_SEND, dest, NULL, 0))
			return true;
		snprintf(text, sizeof(text), "Sending to %s is not allowed by policy", dest);
		(void)dbus_driver_reply_error(c, m, ACCESS_DENIED, text);
		return false;
	}
	/* unsolicited replies: the router drops them, whatever a rule would say */
	if (reply && !requested)
		return true;
	peer_of(c, p, &from);
	peer_of(t, p, &to);
	v = policy_dbus_msg_check_send(p, &from, &to, &m->h, requested);
	if (v.allowed) {
		v = policy_dbus_msg_check_receive(p, &to, &from, &m->h, requested, false);
		if (v.allowed)
			return true;
		rejected(text, sizeof(text), "receive", &v, c, t, m, requested);
	} else {
		rejected(text, sizeof(text), "send", &v, c, t, m, requested);
	}
	log_refusal(c, text, &v);
	(void)dbus_driver_reply_error(c, m, ACCESS_DENIED, text);
	return false;
}

bool dbus_access_driver(struct dbus_conn *c, const struct dbus_message *m)
{
	const struct policy_dbus_msg *p = c->front->bus->dbus_policy;
	struct policy_dbus_peer from;
	struct policy_dbus_verdict v;
	char text[1024];

	if (!p || !c->peer)
		return true;
	peer_of(c, p, &from);
	v = policy_dbus_msg_check_send(p, &from, NULL, &m->h, false);
	if (v.allowed)
		return true;
	rejected(text, sizeof(text), "send", &v, c, NULL, m, false);
	log_refusal(c, text, &v);
	(void)dbus_driver_reply_error(c, m, ACCESS_DENIED, text);
	return false;
}

bool dbus_access_broadcast(struct dbus_front *f, struct registry_peer *sender, struct dbus_conn *t,
			   const struct dbus_message *m)
{
	const struct policy_dbus_msg *p = f->bus->dbus_policy;
	struct dbus_conn *c = sender ? sender->userdata : NULL;
	struct policy_dbus_peer from, to;
	struct policy_dbus_verdict v;
	const char *what = "send";
	char text[1024];

	/* without the XML, signals are not brokerd's to filter (as on native channels) */
	if (!p)
		return true;
	peer_of(t, p, &to);
	if (c) {
		peer_of(c, p, &from);
		v = policy_dbus_msg_check_send(p, &from, &to, &m->h, false);
		if (v.allowed) {
			what = "receive";
			v = policy_dbus_msg_check_receive(p, &to, &from, &m->h, false, false);
		}
	} else {
		v = policy_dbus_msg_check_receive(p, &to, NULL, &m->h, false, false);
	}
	if (v.allowed)
		return true;
	/*
	 * The sender gets no error for a signal, but monitors see the
	 * AccessDenied dbus-daemon would have answered, once per subscriber
	 * refused, as dbus-daemon shows them.
	 */
	if (c && f->n_monitors) {
		rejected(text, sizeof(text), what, &v, c, t, m, false);
		(void)dbus_driver_reply_error(c, m, ACCESS_DENIED, text);
	}
	return false;
}

bool dbus_access_driver_signal(struct dbus_conn *t, const struct dbus_header *h, char *text, size_t text_len)
{
	const struct policy_dbus_msg *p = t->front->bus->dbus_policy;
	const struct dbus_message m = { .h = *h };
	struct policy_dbus_peer to;
	struct policy_dbus_verdict v;

	if (!p)
		return true;
	peer_of(t, p, &to);
	v = policy_dbus_msg_check_receive(p, &to, NULL, h, false, false);
	if (v.allowed)
		return true;
	rejected(text, text_len, "receive", &v, NULL, t, &m, false);
	log_refusal(t, text, &v);
	return false;
}

bool dbus_access_eavesdrop(struct dbus_front *f, struct registry_peer *sender, struct dbus_conn *e,
			   const struct dbus_message *m)
{
	const struct policy_dbus_msg *p = f->bus->dbus_policy;
	struct native_peer n = { .registry = f->registry, .peer = sender };
	struct policy_dbus_peer from, to;

	if (!p)
		return e->cred.uid == 0 || e->cred.uid == getuid();
	if (sender && sender->kind == REGISTRY_PEER_DBUS) {
		peer_of(sender->userdata, p, &from);
	} else {
		/* a native client (or one gone since it sent): its uid, groups and names */
		struct bus_conn *bc = sender ? sender->userdata : NULL;

		from = (struct policy_dbus_peer){
			.uid = sender ? sender->uid : (uid_t)-1,
			.gids = bc ? bc->gids : NULL,
			.n_gids = bc ? bc->n_gids : 0,
			.at_console = sender && policy_dbus_msg_uses_console(p) && at_console(sender->uid),
			.owns = native_owns,
			.userdata = &n,
		};
	}
	peer_of(e, p, &to);
	return policy_dbus_msg_check_receive(p, &to, &from, &m->h, false, true).allowed;
}

bool dbus_access_may_eavesdrop(struct dbus_conn *e)
{
	const struct policy_dbus_msg *p = e->front->bus->dbus_policy;
	struct policy_dbus_peer to;

	if (!p)
		return e->cred.uid == 0 || e->cred.uid == getuid();
	peer_of(e, p, &to);
	return policy_dbus_msg_may_eavesdrop(p, &to);
}

/* The would-be recipient of a name no D-Bus connection owns: it owns that name alone. */
static bool name_owns(void *userdata, const char *name, bool prefix)
{
	const char *own = userdata;
	size_t l = strlen(name);

	if (!prefix)
		return strcmp(own, name) == 0;
	return strncmp(own, name, l) == 0 && (own[l] == 0 || own[l] == '.');
}

bool dbus_access_send_to_name(struct dbus_conn *c, const struct dbus_message *m, const char *name, char *text,
			      size_t text_len)
{
	struct bus *b = c->front->bus;
	const struct policy_dbus_msg *p = b->dbus_policy;
	struct policy_dbus_peer from, to = {
		.uid = (uid_t)-1,
		.owns = name_owns,
		.userdata = (void *)name,
	};
	struct policy_dbus_verdict v;

	if (!p) {
		if (policy_check(b->policy, c->cred.uid, c->gids, c->n_gids, POLICY_SEND, name, NULL, 0))
			return true;
		snprintf(text, text_len, "Sending to %s is not allowed by policy", name);
		return false;
	}
	/* StartServiceByName sends nothing to the name: dbus-daemon lets anyone start it, as here */
	if (!m)
		return true;
	peer_of(c, p, &from);
	v = policy_dbus_msg_check_send(p, &from, &to, &m->h, false);
	if (v.allowed)
		return true;
	rejected(text, text_len, "send", &v, c, NULL, m, false);
	log_refusal(c, text, &v);
	return false;
}
