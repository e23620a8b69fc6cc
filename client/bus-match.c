/* SPDX-License-Identifier: MIT */
/*
 * bus-match.c - match rules (brokerd_bus_add_match()): a rule is parsed
 * and kept once per canonical text, shared by the slots that add it. A rule
 * with a well-known sender subscribes to that name's signals as
 * brokerd_bus_subscribe() does; one without (or with a unique name, whose
 * signals may come on any channel) needs every name's signals: the bus
 * asks brokerd to WATCH_SIGNALS while such a rule exists and attaches each
 * signal channel brokerd hands over, now and when names appear later.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/bus-chan.h"
#include "client/bus-control.h"
#include "client/bus-match.h"
#include "client/bus-name.h"
#include "client/bus-slot.h"
#include "protocol/dbus-marshal.h"

/* D-Bus's name for the bus itself: its signals come on the channel of CTRL_BUS_NAME */
#define DRIVER_NAME "org.freedesktop.DBus"

static struct bus_match *match_find(brokerd_bus *bus, const char *text)
{
	for (struct bus_match *m = bus->matches; m; m = m->next)
		if (strcmp(m->text, text) == 0)
			return m;
	return NULL;
}

static void match_unref(brokerd_bus *bus, struct bus_match *m)
{
	if (--m->n_ref > 0)
		return;
	for (struct bus_match **p = &bus->matches; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	dbus_match_rule_deinit(&m->rule);
	free(m->text);
	free(m);
}

void bus_match_take_channel(brokerd_bus *bus, const char *name, int fd)
{
	struct bname *b;

	/* no fd: the subscriptions quota is used up, nothing came about */
	if (fd < 0)
		return;
	if (!bus->n_watch_matches) {
		/*
		 * Sent before brokerd had our UNWATCH_SIGNALS: it counts, so end
		 * it, unless a slot subscribed to the name since (the same one).
		 */
		close(fd);
		b = bname_get(bus, name, false);
		if (ctrl_name_is_valid_wellknown(name) && !(b && b->n_subs))
			(void)bus_ctrl_request(bus, CTRL_OP_UNSUBSCRIBE, name, 0, NULL);
		return;
	}
	b = ctrl_name_is_valid_wellknown(name) ? bname_get(bus, name, true) : NULL;
	if (!b || b->sig_recv || b->watched) {
		close(fd); /* subscribed already: brokerd does not send it then */
		bname_gc(bus, b);
		return;
	}
	if (bus_chan_attach(bus, fd, IOIPC_SUB_RECV, CHAN_SIGNAL_RECV, b, &b->sig_recv) < 0) {
		bname_gc(bus, b);
		return;
	}
	b->watched = true;
	b->n_subs++;
}

/* WATCH_SIGNALS, then the channels it announces, which follow its reply. */
static int watch_start(brokerd_bus *bus)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	struct bname *b;
	uint32_t count = 0;
	int k;

	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	/* the bus's own signals (NameOwnerChanged) match rules without a sender too */
	b = bname_get(bus, CTRL_BUS_NAME, true);
	if (!b)
		return -ENOMEM;
	if (!b->watched) {
		k = bname_subscribe(bus, b);
		if (k < 0) {
			bname_gc(bus, b);
			return k;
		}
		b->watched = true;
		b->n_subs++;
	}
	k = bus_ctrl_request(bus, CTRL_OP_WATCH_SIGNALS, NULL, 0, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	k = ctrl_read_u32(&rd, &count);
	if (k < 0)
		return k;
	for (uint32_t i = 0; i < count; i++) {
		_cleanup_ctrl_reply_ struct ctrl_reply s = { 0 };
		const char *name;

		k = bus_ctrl_wait_signal(bus, CTRL_SIGNAL_SIGNAL_CHANNEL, &s);
		if (k < 0)
			return k;
		ctrl_reader_init(&rd, &s.msg);
		if (ctrl_read_string(&rd, &name, NULL) >= 0)
			bus_match_take_channel(bus, name, ctrl_reply_take_fd(&s, 0));
	}
	return 0;
}

/* The last rule that needed the watch went: so do the watch and its subscriptions. */
static void watch_stop(brokerd_bus *bus)
{
	struct bname *b, *next;

	if (bus->connected && (bus->features & CTRL_FEATURE_CHANNELS))
		(void)bus_ctrl_request(bus, CTRL_OP_UNWATCH_SIGNALS, NULL, 0, NULL);
	for (b = bus->names; b; b = next) {
		next = b->next;
		if (!b->watched)
			continue;
		b->watched = false;
		bname_subscription_put(bus, b);
		bname_gc(bus, b);
	}
}

int bus_match_rewatch(brokerd_bus *bus)
{
	return bus->n_watch_matches ? watch_start(bus) : 0;
}

/* A new rule subscribes: to its sender's signals, or to all of them. */
static int match_subscribe(brokerd_bus *bus, struct bus_match *m)
{
	const char *sender = m->rule.sender;
	struct bname *b;
	int k;

	if (sender && strcmp(sender, DRIVER_NAME) == 0)
		sender = CTRL_BUS_NAME;
	if (sender && (ctrl_name_is_valid_wellknown(sender) || strcmp(sender, CTRL_BUS_NAME) == 0)) {
		k = bname_get_subscribed(bus, sender, &b);
		if (k < 0)
			return k;
		b->n_subs++;
		m->bname = b;
		return 0;
	}
	/* counted first: the channels handed over meanwhile are for this rule */
	if (++bus->n_watch_matches == 1) {
		k = watch_start(bus);
		if (k < 0) {
			bus->n_watch_matches = 0;
			watch_stop(bus);
			return k;
		}
	}
	m->watch = true;
	return 0;
}

void bus_match_slot_gone(brokerd_bus *bus, struct bus_match *m)
{
	if (--m->n_slots == 0) {
		if (m->bname) {
			struct bname *b = m->bname;

			m->bname = NULL;
			bname_subscription_put(bus, b);
			bname_gc(bus, b);
		}
		if (m->watch) {
			m->watch = false;
			if (--bus->n_watch_matches == 0)
				watch_stop(bus);
		}
	}
	match_unref(bus, m);
}

void bus_match_message_init(struct dbus_match_message *mm, brokerd_msg *msg, const char *channel)
{
	*mm = (struct dbus_match_message){
		.type = (uint8_t)msg->type,
		.sender = msg->sender,
		.sender_name = !channel				     ? NULL :
			       strcmp(channel, CTRL_BUS_NAME) == 0   ? DRIVER_NAME :
			       ctrl_name_is_valid_wellknown(channel) ? channel :
								       NULL,
		.interface = msg->interface,
		.member = msg->member,
		.path = msg->path,
		.destination = msg->destination,
		.signature = msg->signature,
		.body = msg->data,
		.body_len = msg->data_len,
		.byte_order = DBUS_NATIVE_ENDIAN,
	};
}

void bus_match_dispatch(brokerd_bus *bus, brokerd_msg *msg)
{
	struct dbus_match_message mm;
	struct bus_match *m, *next;

	/* signals on an inbox carry no name: they were sent to us directly */
	bus_match_message_init(&mm, msg, msg->name);

	for (m = bus->matches; m; m = next) {
		bool yes = m->n_slots && dbus_match_rule_matches(&m->rule, &mm);
		struct brokerd_slot *s, *snext;

		m->n_ref++; /* a handler may free its slot, the rule's last */
		for (s = yes ? bus->slots : NULL; s && !bus->closed; s = snext) {
			snext = s->next;
			if (s->type == SLOT_MATCH && s->match == m)
				s->handler.msg(msg, s->userdata);
		}
		next = m->next;
		match_unref(bus, m);
		if (bus->closed)
			return;
	}
}

void bus_match_free_all(brokerd_bus *bus)
{
	struct bus_match *m;

	while ((m = bus->matches)) {
		bus->matches = m->next;
		dbus_match_rule_deinit(&m->rule);
		free(m->text);
		free(m);
	}
	bus->n_watch_matches = 0;
}

_public_ int brokerd_bus_add_match(brokerd_bus *bus, brokerd_slot **ret_slot, const char *rule,
				   brokerd_msg_handler_t handler, void *userdata)
{
	struct dbus_match_rule parsed;
	_cleanup_free_ char *text = NULL;
	struct brokerd_slot *s;
	struct bus_match *m;
	int k;

	if (!bus || bus->closed || !rule || !handler)
		return -EINVAL;
	k = dbus_match_rule_parse(&parsed, rule);
	if (k < 0)
		return k;
	k = dbus_match_rule_format(&parsed, &text);
	if (k < 0) {
		dbus_match_rule_deinit(&parsed);
		return k;
	}
	m = match_find(bus, text);
	if (m) {
		dbus_match_rule_deinit(&parsed); /* identical: shared */
	} else {
		if (!bus->connected) {
			dbus_match_rule_deinit(&parsed);
			return -ENOTCONN;
		}
		m = calloc(1, sizeof(*m));
		if (!m) {
			dbus_match_rule_deinit(&parsed);
			return -ENOMEM;
		}
		m->rule = parsed;
		m->text = TAKE_PTR(text);
		k = match_subscribe(bus, m);
		if (k < 0) {
			dbus_match_rule_deinit(&m->rule);
			free(m->text);
			free(m);
			return k;
		}
		m->next = bus->matches;
		bus->matches = m;
	}
	s = slot_new(bus, SLOT_MATCH, NULL, NULL, userdata);
	if (!s) {
		m->n_ref++;
		m->n_slots++;
		bus_match_slot_gone(bus, m);
		return -ENOMEM;
	}
	s->handler.msg = handler;
	s->match = m;
	m->n_slots++;
	m->n_ref++;
	return slot_hand_out(s, ret_slot);
}
