/* SPDX-License-Identifier: MIT */
/*
 * bus-call.c - making calls: a call slot per pending call, sent on the
 * name's call chan (reopened once if revoked), completed by its reply, an
 * error, its deadline or the loss of the connection or the name. The
 * synchronous brokerd_bus_call() runs the loop and lives in bus-loop.c.
 */
#include <errno.h>
#include <string.h>

#include "client/bus-call.h"
#include "client/bus-chan.h"
#include "client/bus-name.h"
#include "client/bus-slot.h"

void bus_call_complete(struct brokerd_slot *s, brokerd_msg *msg, int error)
{
	brokerd_reply_handler_t h = s->handler.reply;
	void *userdata = s->userdata;
	bool floating = s->floating;

	BUG_ON(s->type != SLOT_CALL || !s->serial);
	s->serial = 0; /* done: no longer pending */
	s->deadline = 0;
	if (floating)
		slot_destroy(s);
	if (h)
		h(msg, error, userdata);
}

/* Sends the call m (its serial and flags are set here) to name. */
static int call_send(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name, struct chmsg *m,
		     uint64_t timeout_usec, brokerd_reply_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	if (!bus->inbox)
		return -EOPNOTSUPP;
	b = bname_get(bus, name, true);
	if (!b)
		return -ENOMEM;
	/* a synchronous caller is waiting anyway; an event loop must not block */
	k = bname_open_call(bus, b, bus->sync_opening);
	if (k < 0) {
		bname_gc(bus, b);
		return k;
	}
	s = slot_new(bus, SLOT_CALL, name, m->member, userdata);
	if (!s) {
		bname_gc(bus, b);
		return -ENOMEM;
	}
	s->bname = b;
	s->handler.reply = handler;
	s->serial = m->serial = bus_next_serial(bus);
	if (!handler)
		m->flags |= CHMSG_F_NO_REPLY_EXPECTED;
	s->deadline = now_usec() + (timeout_usec ? timeout_usec : BUS_DEFAULT_TIMEOUT_USEC);
	k = bus_chan_send(bus, b->call_send, m);
	if (k == -EACCES || k == -ENOENT || k == -EPIPE) {
		/* capability revoked or channel gone: open it afresh once */
		chan_close(&bus->ring, b->call_send);
		b->call_send = NULL;
		k = bname_open_call(bus, b, bus->sync_opening);
		if (k >= 0)
			k = bus_chan_send(bus, b->call_send, m);
	}
	if (k < 0 || !handler) {
		slot_destroy(s);
		return k < 0 ? k : 0;
	}
	return slot_hand_out(s, ret_slot);
}

_public_ int brokerd_bus_call_async(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				    const char *member, const void *body, size_t size, uint64_t timeout_usec,
				    brokerd_reply_handler_t handler, void *userdata)
{
	struct chmsg m = { 0 };
	_cleanup_free_ void *data = NULL;
	int k;

	if ((size && !body) || size > CHMSG_MAX)
		return -EINVAL;
	k = bus_bytes_body(&m, body, size, &data);
	if (k < 0)
		return k;
	return brokerd_bus_call_method_async(bus, ret_slot, name, "/", NULL, member, m.signature, m.body,
					     m.body_len, timeout_usec, handler, userdata);
}

_public_ int brokerd_bus_call_method_async(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
					   const char *path, const char *interface, const char *member,
					   const char *signature, const void *body, size_t size,
					   uint64_t timeout_usec, brokerd_reply_handler_t handler,
					   void *userdata)
{
	struct chmsg m = { .type = CHMSG_CALL,
			   .path = path,
			   .interface = interface,
			   .member = member,
			   .signature = signature,
			   .body = body,
			   .body_len = (uint32_t)size };

	/* the rest of the message is checked when it is encoded */
	if (!path || !ctrl_name_is_valid_member(member) || (size && !body) || size > CHMSG_MAX)
		return -EINVAL;
	return call_send(bus, ret_slot, name, &m, timeout_usec, handler, userdata);
}
