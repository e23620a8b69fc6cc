/* SPDX-License-Identifier: MIT */
/*
 * bus-method.c - serving calls: method slots, and replies (and error
 * replies) sent to the caller's inbox. Dispatching a call to its method is
 * bus-dispatch.c's; answering lives here, below it, so that closing a bus
 * can answer calls too.
 */
#include <errno.h>
#include <string.h>

#include "client/bus-chan.h"
#include "client/bus-inbox.h"
#include "client/bus-slot.h"
#include "protocol/dbus-marshal.h"

_public_ int brokerd_bus_add_method(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				    const char *member, brokerd_msg_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name) ||
	    (member && !ctrl_name_is_valid_member(member)) || !handler)
		return -EINVAL;
	s = slot_new(bus, SLOT_METHOD, name, member, userdata);
	if (!s)
		return -ENOMEM;
	s->handler.msg = handler;
	return slot_hand_out(s, ret_slot);
}

/* Sends m (a REPLY or ERROR, body set) to the caller of call. */
static int msg_send_reply(brokerd_msg *call, struct chmsg *m)
{
	brokerd_bus *bus = call->bus;
	struct peer_inbox *p;
	int k;

	if (call->type != BROKERD_MSG_CALL || call->replied || (call->flags & CHMSG_F_NO_REPLY_EXPECTED))
		return -EBADMSG;
	if (bus->closed || !bus->connected)
		return -ENOTCONN;
	if (!call->creds.id)
		return -ENXIO;
	k = peer_inbox_get(bus, call->creds.id, &p);
	if (k < 0)
		return k;
	m->destination = call->sender;
	m->serial = bus_next_serial(bus);
	m->reply_serial = call->serial;
	k = bus_chan_send(bus, p->send, m);
	if (k == -ENOENT || k == -EACCES)
		peer_inbox_drop(bus, call->creds.id);
	call->replied = true; /* even if sending failed: one answer per call */
	return k;
}

_public_ int brokerd_msg_reply(brokerd_msg *call, const void *body, size_t size)
{
	struct chmsg m = { .type = CHMSG_REPLY };
	_cleanup_free_ void *data = NULL;
	int k;

	if (!call)
		return -EINVAL;
	k = bus_bytes_body(&m, body, size, &data);
	if (k < 0)
		return k;
	return msg_send_reply(call, &m);
}

_public_ int brokerd_msg_reply_data(brokerd_msg *call, const char *signature, const void *body, size_t size)
{
	struct chmsg m = {
		.type = CHMSG_REPLY, .signature = signature, .body = body, .body_len = (uint32_t)size
	};

	if (!call || (size && !body))
		return -EINVAL;
	if (size > CHMSG_BODY_MAX)
		return -EMSGSIZE;
	return msg_send_reply(call, &m);
}

_public_ int brokerd_msg_reply_error(brokerd_msg *call, const char *error_name, const char *text)
{
	_cleanup_(dbus_writer_deinit) struct dbus_writer w = { 0 };
	struct chmsg m = { .type = CHMSG_ERROR, .error_name = error_name, .signature = "s" };
	_cleanup_free_ void *data = NULL;
	size_t len = 0;
	int k;

	if (!call || !ctrl_name_is_valid_error(error_name))
		return -EINVAL;
	if (!text)
		text = "";
	if (strlen(text) > CHMSG_MAX / 2)
		return -EINVAL;
	/* the D-Bus convention: an error's body is one string, its message */
	k = dbus_writer_init(&w, "s");
	if (k >= 0)
		k = dbus_writer_append_basic(&w, 's', text);
	if (k >= 0)
		k = dbus_writer_finish(&w, &data, &len);
	if (k < 0)
		return k == -ENOMEM ? -ENOMEM : -EINVAL;
	m.body = data;
	m.body_len = (uint32_t)len;
	return msg_send_reply(call, &m);
}
