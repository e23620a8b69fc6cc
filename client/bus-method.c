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

static int msg_send_reply(brokerd_msg *call, int type, const char *member, const void *body, size_t size)
{
	brokerd_bus *bus = call->bus;
	struct chmsg m = { .type = (uint8_t)type,
			   .member = member,
			   .destination = call->sender,
			   .body = body,
			   .body_len = (uint32_t)size };
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
	m.serial = bus_next_serial(bus);
	m.reply_serial = call->serial;
	k = bus_chan_send(bus, p->send, &m);
	if (k == -ENOENT || k == -EACCES)
		peer_inbox_drop(bus, call->creds.id);
	call->replied = true; /* even if sending failed: one answer per call */
	return k;
}

_public_ int brokerd_msg_reply(brokerd_msg *call, const void *body, size_t size)
{
	if (!call || (size && !body) || size > CHMSG_MAX)
		return -EINVAL;
	return msg_send_reply(call, CHMSG_REPLY, "", body, size);
}

_public_ int brokerd_msg_reply_error(brokerd_msg *call, const char *error_name, const char *text)
{
	if (!call || !ctrl_name_is_valid_error(error_name))
		return -EINVAL;
	if (!text)
		text = "";
	if (strlen(text) > CHMSG_MAX / 2)
		return -EINVAL;
	return msg_send_reply(call, CHMSG_ERROR, error_name, text, strlen(text));
}
