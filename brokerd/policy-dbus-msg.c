/* SPDX-License-Identifier: MIT */
/*
 * policy-dbus-msg.c - dbus-daemon's send and receive rules, decided per
 * message (see policy-dbus-msg.h). The matching follows dbus-daemon(1) and
 * the behaviour of dbus-daemon itself where the manual is silent:
 *  - "*" is the wildcard of every attribute; an absent attribute too.
 *  - A message without a path, member or error name is not kept out by a
 *    rule that names one; one without an interface is kept out of allow
 *    rules that name an interface but not of deny rules (so a deny cannot
 *    be dodged by leaving the interface out).
 *  - Replies: an allow rule applies to a reply only if the reply was
 *    requested, unless it says requested_reply="false"; a deny rule only
 *    if the reply was not requested, unless it says requested_reply="true".
 *    (Together with system.conf's <allow send_requested_reply="true"
 *    send_type="method_return"/> this is the implicit "a call let through
 *    may be answered".)
 *  - send_destination matches when the receiver owns the name or waits in
 *    its queue; for the driver, when the message is addressed to it.
 *    receive_sender likewise with the sender.
 *  - eavesdrop="true" on an allow also lets a monitor see the message; on
 *    a deny it makes the rule apply to monitors only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/policy-dbus-msg.h"
#include "brokerd/policy.h"
#include "util/array.h"
#include "util/macro.h"

/* dbus-daemon's limit of fds per message: max_fds defaults to it. */
#define FDS_MAX 16U

enum tristate { ANY = -1, NO = 0, YES = 1 };

struct msg_rule {
	bool allow, send;
	enum dbus_policy_context context;
	uint32_t id;  /* uid or gid */
	bool console; /* at_console="true" */
	int type;     /* DBUS_MESSAGE_*, 0: any */
	char *path, *interface, *member, *error;
	char *name; /* send_destination(_prefix) or receive_sender */
	bool name_prefix;
	enum tristate broadcast;
	bool requested_reply, eavesdrop;
	unsigned int min_fds, max_fds;
	char *file;
	unsigned int line;
};

struct policy_dbus_msg {
	struct msg_rule *rules;
	size_t n_rules, alloc_rules;
	bool console;
};

static void rule_deinit(struct msg_rule *r)
{
	free(r->path);
	free(r->interface);
	free(r->member);
	free(r->error);
	free(r->name);
	free(r->file);
}

struct policy_dbus_msg *policy_dbus_msg_free(struct policy_dbus_msg *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_rules; i++)
		rule_deinit(&p->rules[i]);
	free(p->rules);
	free(p);
	return NULL;
}

size_t policy_dbus_msg_count(const struct policy_dbus_msg *p)
{
	return p ? p->n_rules : 0;
}

bool policy_dbus_msg_uses_console(const struct policy_dbus_msg *p)
{
	return p && p->console;
}

static bool is_true(const char *v)
{
	return v && strcmp(v, "true") == 0;
}

/* An attribute as the rule keeps it: NULL for absent and for "*"; -ENOMEM on failure. */
static int dup_attr(const char *v, char **ret)
{
	*ret = NULL;
	if (!v || strcmp(v, "*") == 0)
		return 0;
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

static int type_from_string(const char *v)
{
	static const char *const names[] = {
		[DBUS_MESSAGE_METHOD_CALL] = "method_call",
		[DBUS_MESSAGE_METHOD_RETURN] = "method_return",
		[DBUS_MESSAGE_ERROR] = "error",
		[DBUS_MESSAGE_SIGNAL] = "signal",
	};

	for (int t = DBUS_MESSAGE_METHOD_CALL; v && t <= DBUS_MESSAGE_SIGNAL; t++)
		if (strcmp(v, names[t]) == 0)
			return t;
	return 0; /* "*" or absent: dbus-config.c refused anything else */
}

static unsigned int fds_attr(const char *v, unsigned int absent)
{
	unsigned long n;

	if (!v)
		return absent;
	n = strtoul(v, NULL, 10); /* digits only: dbus-config.c checked */
	return n > FDS_MAX ? FDS_MAX : (unsigned int)n;
}

/* The context of c's rule: false when dbus-daemon would skip its <policy> (unknown user or group). */
static bool rule_context(const struct dbus_config_rule *c, struct msg_rule *r)
{
	r->context = c->context;
	switch (c->context) {
	case DBUS_POLICY_USER:
	case DBUS_POLICY_GROUP:
		return policy_parse_id(c->who, c->context == DBUS_POLICY_USER, &r->id) == 0;
	case DBUS_POLICY_CONSOLE:
		r->console = is_true(c->who);
		return true;
	default:
		return true;
	}
}

static int rule_from_config(const struct dbus_config_rule *c, struct msg_rule *r, bool *skip)
{
	bool send = false, receive = false;
	int k = 0;

	*r = (struct msg_rule){ .allow = c->allow, .broadcast = ANY };
	for (unsigned int a = 0; a <= DBUS_ATTR_RECEIVE_REQUESTED_REPLY; a++)
		if (c->attr[a]) {
			send = send || a <= DBUS_ATTR_SEND_REQUESTED_REPLY;
			receive = receive || a > DBUS_ATTR_SEND_REQUESTED_REPLY;
		}
	/* <allow eavesdrop="true"/> alone is a receive rule for any message, as in dbus-daemon */
	if (!send && !receive && c->attr[DBUS_ATTR_EAVESDROP])
		receive = true;
	*skip = (!send && !receive) || !rule_context(c, r);
	if (*skip)
		return 0;
	r->send = send;
	r->eavesdrop = is_true(c->attr[DBUS_ATTR_EAVESDROP]);
	r->min_fds = fds_attr(c->attr[DBUS_ATTR_MIN_FDS], 0);
	r->max_fds = fds_attr(c->attr[DBUS_ATTR_MAX_FDS], FDS_MAX);
	if (send) {
		const char *rr = c->attr[DBUS_ATTR_SEND_REQUESTED_REPLY];
		const char *b = c->attr[DBUS_ATTR_SEND_BROADCAST];

		r->type = type_from_string(c->attr[DBUS_ATTR_SEND_TYPE]);
		/* unless said: allows are for requested replies, denies for unrequested ones */
		r->requested_reply = rr ? is_true(rr) : c->allow;
		r->broadcast = !b ? ANY : is_true(b) ? YES : NO;
		k |= dup_attr(c->attr[DBUS_ATTR_SEND_PATH], &r->path);
		k |= dup_attr(c->attr[DBUS_ATTR_SEND_INTERFACE], &r->interface);
		k |= dup_attr(c->attr[DBUS_ATTR_SEND_MEMBER], &r->member);
		k |= dup_attr(c->attr[DBUS_ATTR_SEND_ERROR], &r->error);
		if (c->attr[DBUS_ATTR_SEND_DESTINATION_PREFIX]) {
			r->name_prefix = true;
			k |= dup_attr(c->attr[DBUS_ATTR_SEND_DESTINATION_PREFIX], &r->name);
		} else {
			k |= dup_attr(c->attr[DBUS_ATTR_SEND_DESTINATION], &r->name);
		}
	} else {
		const char *rr = c->attr[DBUS_ATTR_RECEIVE_REQUESTED_REPLY];

		r->type = type_from_string(c->attr[DBUS_ATTR_RECEIVE_TYPE]);
		r->requested_reply = rr ? is_true(rr) : c->allow;
		k |= dup_attr(c->attr[DBUS_ATTR_RECEIVE_PATH], &r->path);
		k |= dup_attr(c->attr[DBUS_ATTR_RECEIVE_INTERFACE], &r->interface);
		k |= dup_attr(c->attr[DBUS_ATTR_RECEIVE_MEMBER], &r->member);
		k |= dup_attr(c->attr[DBUS_ATTR_RECEIVE_ERROR], &r->error);
		k |= dup_attr(c->attr[DBUS_ATTR_RECEIVE_SENDER], &r->name);
	}
	if (k == 0 && c->file && !(r->file = strdup(c->file)))
		k = -ENOMEM;
	r->line = c->line;
	if (k < 0) {
		rule_deinit(r);
		return -ENOMEM;
	}
	return 0;
}

int policy_dbus_msg_new(struct policy_dbus_msg **ret, const struct dbus_config *c)
{
	_cleanup_(policy_dbus_msg_freep) struct policy_dbus_msg *p = NULL;

	if (!ret || !c)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_rules; i++) {
		struct msg_rule r;
		bool skip;

		if (rule_from_config(&c->rules[i], &r, &skip) < 0)
			return -ENOMEM;
		if (skip)
			continue;
		if (ARRAY_RESERVE(p->rules, p->alloc_rules, p->n_rules + 1) < 0) {
			rule_deinit(&r);
			return -ENOMEM;
		}
		p->console = p->console || r.context == DBUS_POLICY_CONSOLE;
		p->rules[p->n_rules++] = r;
	}
	*ret = TAKE_PTR(p);
	return 0;
}

/* ---- matching ------------------------------------------------------------------ */

/* A field the rule names: a message without it passes (dbus-daemon's "if the message has one"). */
static bool field_ok(const char *rule, const char *msg)
{
	return !rule || !msg || strcmp(rule, msg) == 0;
}

/* The interface: a message without one passes deny rules only. */
static bool interface_ok(const struct msg_rule *r, const char *msg)
{
	if (!r->interface)
		return true;
	if (!msg)
		return !r->allow;
	return strcmp(r->interface, msg) == 0;
}

/* name names peer: it owns it (or waits for it); the driver (NULL) by the name in the message. */
static bool names_peer(const struct msg_rule *r, const struct policy_dbus_peer *peer, const char *in_msg)
{
	if (!r->name)
		return true;
	if (peer)
		return peer->owns && peer->owns(peer->userdata, r->name, r->name_prefix);
	if (!in_msg)
		return false;
	if (!r->name_prefix)
		return strcmp(r->name, in_msg) == 0;
	{
		size_t l = strlen(r->name);

		return strncmp(r->name, in_msg, l) == 0 && (in_msg[l] == 0 || in_msg[l] == '.');
	}
}

/* The reply conditions shared by send and receive rules. */
static bool reply_ok(const struct msg_rule *r, const struct dbus_header *h, bool requested_reply)
{
	if (h->reply_serial == 0)
		return true;
	if (r->allow && !requested_reply && r->requested_reply && !r->eavesdrop)
		return false;
	if (!r->allow && requested_reply && !r->requested_reply)
		return false;
	return true;
}

static bool common_ok(const struct msg_rule *r, const struct dbus_header *h, bool requested_reply)
{
	return (!r->type || r->type == h->type) && reply_ok(r, h, requested_reply) &&
	       field_ok(r->path, h->path) && interface_ok(r, h->interface) &&
	       field_ok(r->member, h->member) && field_ok(r->error, h->error_name) &&
	       h->n_fds >= r->min_fds && h->n_fds <= r->max_fds;
}

static bool send_matches(const struct msg_rule *r, const struct policy_dbus_peer *receiver,
			 const struct dbus_header *h, bool requested_reply)
{
	bool broadcast = !h->destination && h->type == DBUS_MESSAGE_SIGNAL;

	if (!r->send || !common_ok(r, h, requested_reply))
		return false;
	if (r->broadcast != ANY && broadcast != (r->broadcast == YES))
		return false;
	return names_peer(r, receiver, h->destination);
}

static bool receive_matches(const struct msg_rule *r, const struct policy_dbus_peer *sender,
			    const struct dbus_header *h, bool requested_reply, bool eavesdropping)
{
	if (r->send)
		return false;
	/* an allow without eavesdrop="true" lets no monitor see; a deny with it stops monitors only */
	if (eavesdropping && r->allow && !r->eavesdrop)
		return false;
	if (!eavesdropping && !r->allow && r->eavesdrop)
		return false;
	return common_ok(r, h, requested_reply) && names_peer(r, sender, h->sender);
}

/* The rules that apply to peer, in dbus-daemon's order: i walks them, *pass keeps the place. */
struct walk {
	const struct policy_dbus_msg *p;
	const struct policy_dbus_peer *peer;
	unsigned int pass; /* 0 default, 1.. groups, then user, console, mandatory */
	size_t i;
};

static const struct msg_rule *walk_next(struct walk *w)
{
	const struct policy_dbus_peer *peer = w->peer;
	size_t n_groups = peer->n_gids;

	for (;;) {
		const struct msg_rule *r;
		unsigned int pass = w->pass;

		if (pass > n_groups + 3)
			return NULL;
		if (w->i >= w->p->n_rules) {
			w->pass++;
			w->i = 0;
			continue;
		}
		r = &w->p->rules[w->i++];
		if (pass == 0) {
			if (r->context == DBUS_POLICY_DEFAULT)
				return r;
		} else if (pass <= n_groups) {
			if (r->context == DBUS_POLICY_GROUP && r->id == peer->gids[pass - 1])
				return r;
		} else if (pass == n_groups + 1) {
			if (r->context == DBUS_POLICY_USER && r->id == peer->uid)
				return r;
		} else if (pass == n_groups + 2) {
			if (r->context == DBUS_POLICY_CONSOLE && r->console == peer->at_console)
				return r;
		} else if (r->context == DBUS_POLICY_MANDATORY) {
			return r;
		}
	}
}

static void use(struct policy_dbus_verdict *v, const struct msg_rule *r)
{
	v->allowed = r->allow;
	v->matched++;
	v->file = r->file;
	v->line = r->line;
}

struct policy_dbus_verdict policy_dbus_msg_check_send(const struct policy_dbus_msg *p,
						      const struct policy_dbus_peer *sender,
						      const struct policy_dbus_peer *receiver,
						      const struct dbus_header *h, bool requested_reply)
{
	struct policy_dbus_verdict v = { .allowed = false };
	struct walk w = { .p = p, .peer = sender };
	const struct msg_rule *r;

	if (!p || !sender || !h)
		return v;
	while ((r = walk_next(&w)))
		if (send_matches(r, receiver, h, requested_reply))
			use(&v, r);
	return v;
}

struct policy_dbus_verdict policy_dbus_msg_check_receive(const struct policy_dbus_msg *p,
							 const struct policy_dbus_peer *receiver,
							 const struct policy_dbus_peer *sender,
							 const struct dbus_header *h, bool requested_reply,
							 bool eavesdropping)
{
	struct policy_dbus_verdict v = { .allowed = false };
	struct walk w = { .p = p, .peer = receiver };
	const struct msg_rule *r;

	if (!p || !receiver || !h)
		return v;
	while ((r = walk_next(&w)))
		if (receive_matches(r, sender, h, requested_reply, eavesdropping))
			use(&v, r);
	return v;
}

bool policy_dbus_msg_may_eavesdrop(const struct policy_dbus_msg *p, const struct policy_dbus_peer *receiver)
{
	struct walk w = { .p = p, .peer = receiver };
	const struct msg_rule *r;

	if (!p || !receiver)
		return false;
	while ((r = walk_next(&w)))
		if (!r->send && r->allow && r->eavesdrop)
			return true;
	return false;
}
