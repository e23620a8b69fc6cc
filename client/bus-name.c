/* SPDX-License-Identifier: MIT */
/*
 * bus-name.c - the well-known names a bus uses (struct bname): owning one
 * (REQUEST_NAME, RELEASE_NAME and the caps that come with ownership),
 * subscribing to its signals, opening its call chan, asking for its owner.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-chan.h"
#include "client/bus-control.h"
#include "client/bus-name.h"

struct bname *bname_get(brokerd_bus *bus, const char *name, bool create)
{
	struct bname *b;

	for (b = bus->names; b; b = b->next)
		if (strcmp(b->name, name) == 0)
			return b;
	if (!create)
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->name = strdup(name);
	if (!b->name) {
		free(b);
		return NULL;
	}
	b->next = bus->names;
	bus->names = b;
	return b;
}

void bname_close_chans(brokerd_bus *bus, struct bname *b)
{
	chan_close(&bus->ring, b->sig_recv);
	chan_close(&bus->ring, b->sig_send);
	chan_close(&bus->ring, b->call_recv);
	chan_close(&bus->ring, b->call_send);
	b->sig_recv = b->sig_send = b->call_recv = b->call_send = NULL;
}

/* frees b if nothing refers to it any more */
void bname_gc(brokerd_bus *bus, struct bname *b)
{
	if (!b || b->n_subs || b->requested || b->opening || b->flushing || b->sig_recv || b->sig_send ||
	    b->call_recv || b->call_send)
		return;
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->bname == b)
			return;
	bus_retired_close(bus, NULL, b);
	bus->emit_lost_unowned += b->emit_lost; /* still to be told, without a name */
	for (struct bname **p = &bus->names; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			break;
		}
	free(b->name);
	free(b);
}

/* c, a signal chan we send on, counts what its sends cost subscribers (bname_emit_lost()). */
void bname_sig_send_counts(brokerd_bus *bus, struct chan *c)
{
	/*
	 * Set where every signal chan we send on is attached (again after a
	 * reconnect), not on every emit; the kernel is asked once per ring.
	 */
	bus->ring.on_lost = bname_emit_lost;
	bus->ring.lost_userdata = bus;
	(void)chan_count_lost(&bus->ring, c);
}

/*
 * We own b (or are queued in its pool): fds[0] receives its calls, fds[1]
 * sends its signals. New caps replace old ones (a pool member promoted to
 * primary owner gets its caps again).
 */
int bname_take_owner_fds(brokerd_bus *bus, struct bname *b, struct ctrl_reply *r)
{
	struct chan *c;
	int k = 0;

	/* A cap can be revoked before it arrives: then keep what we have. */
	if (r->n_fds > 0) {
		k = bus_chan_attach(bus, ctrl_reply_take_fd(r, 0), IOIPC_SUB_RECV, CHAN_CALL_RECV, b, &c);
		if (k >= 0) {
			bus_chan_retire(bus, b->call_recv); /* calls already queued there still count */
			b->call_recv = c;
		}
	}
	if (r->n_fds > 1) {
		int k2 = bus_chan_attach(bus, ctrl_reply_take_fd(r, 1), IOIPC_SUB_SEND, CHAN_SIGNAL_SEND, b,
					 &c);

		if (k2 >= 0) {
			chan_close(&bus->ring, b->sig_send);
			b->sig_send = c;
			bname_sig_send_counts(bus, c);
		} else if (k >= 0) {
			k = k2;
		}
	}
	return k;
}

/*
 * Asks brokerd for a capability for b (op: SUBSCRIBE or OPEN_CALL, with u
 * as its flags) and attaches it as *chan, unless there is one already.
 */
static int bname_open_chan(brokerd_bus *bus, struct bname *b, uint16_t op, uint32_t u, unsigned int rights,
			   unsigned int kind, struct chan **chan)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	int k;

	if (*chan)
		return 0;
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	if (op == CTRL_OP_OPEN_CALL)
		u |= bus_open_call_flags(bus);
	k = bus_ctrl_request(bus, op, b->name, u, &r);
	if (k < 0)
		return k;
	k = bus_chan_attach(bus, ctrl_reply_take_fd(&r, 0), rights, kind, b, chan);
	if (k >= 0 && op == CTRL_OP_OPEN_CALL)
		(*chan)->msg_max = bus_reply_msg_max(&r);
	return k;
}

int bname_subscribe(brokerd_bus *bus, struct bname *b)
{
	return bname_open_chan(bus, b, CTRL_OP_SUBSCRIBE, 0, IOIPC_SUB_RECV, CHAN_SIGNAL_RECV, &b->sig_recv);
}

int bname_get_subscribed(brokerd_bus *bus, const char *name, struct bname **ret)
{
	struct bname *b = bname_get(bus, name, true);
	int k;

	if (!b)
		return -ENOMEM;
	k = bname_subscribe(bus, b);
	if (k < 0) {
		bname_gc(bus, b);
		return k;
	}
	*ret = b;
	return 0;
}

void bname_subscription_put(brokerd_bus *bus, struct bname *b)
{
	/* a match rule without a sender still wants its signals: the watch keeps them */
	if (b->n_subs == 1 && bus->n_watch_matches && !b->watched && b->sig_recv) {
		b->watched = true;
		return;
	}
	if (b->n_subs > 0 && --b->n_subs == 0)
		(void)bname_unsubscribe(bus, b, false);
}

/*
 * Ends our subscription to b's signals: detaches the channel and tells
 * brokerd, which stops counting it. With wait, brokerd's answer is awaited
 * (0, or -errno); without (from a destructor), the request goes out and its
 * reply is dropped. Disconnected, there is nobody to tell: a new brokerd
 * knows nothing of it.
 */
int bname_unsubscribe(brokerd_bus *bus, struct bname *b, bool wait)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	int k;

	chan_close(&bus->ring, b->sig_recv);
	b->sig_recv = NULL;
	if (!bus->connected || !(bus->features & CTRL_FEATURE_CHANNELS))
		return 0;
	k = bus_ctrl_request(bus, CTRL_OP_UNSUBSCRIBE, b->name, 0, wait ? &r : NULL);
	if (k < 0 || !wait)
		return k;
	/* NOT_SUBSCRIBED is fine too: a reload may have revoked it already */
	return 0;
}

int bname_request(brokerd_bus *bus, struct bname *b, unsigned int flags)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	uint32_t result = 0;
	bool sig_cap;
	int k;

	/* the signal channel's size, if this brokerd tells it */
	if (bus->features & CTRL_FEATURE_MSG_SIZE)
		flags |= CTRL_NAME_MSG_SIZE;
	k = bus_ctrl_request(bus, CTRL_OP_REQUEST_NAME, b->name, flags, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	k = ctrl_read_u32(&rd, &result);
	sig_cap = r.n_fds > 1;
	if (k >= 0 && (result == CTRL_NAME_PRIMARY_OWNER || result == CTRL_NAME_ALREADY_OWNER ||
		       result == CTRL_NAME_IN_QUEUE))
		k = bname_take_owner_fds(bus, b, &r); /* IN_QUEUE has a cap with POOL */
	if (k >= 0 && sig_cap && b->sig_send)
		b->sig_send->msg_max = bus_reply_msg_max(&r);
	if (k < 0)
		return k;
	switch (result) {
	case CTRL_NAME_PRIMARY_OWNER:
		return BROKERD_NAME_PRIMARY_OWNER;
	case CTRL_NAME_IN_QUEUE:
		return BROKERD_NAME_IN_QUEUE;
	case CTRL_NAME_ALREADY_OWNER:
		return BROKERD_NAME_ALREADY_OWNER;
	case CTRL_NAME_EXISTS:
		return -EEXIST;
	default:
		return -EPROTO;
	}
}

/*
 * wait: for an activatable name that has no owner yet, let brokerd answer
 * only once the service owns it (or activation failed); otherwise get the
 * cap at once and let the call wait in the channel's ring.
 */
int bname_open_call(brokerd_bus *bus, struct bname *b, bool wait)
{
	return bname_open_chan(bus, b, CTRL_OP_OPEN_CALL, wait ? 0 : CTRL_CALL_NO_WAIT, IOIPC_SUB_SEND,
			       CHAN_CALL_SEND, &b->call_send);
}

/* --- Public API ----------------------------------------------------------------- */

void bname_emit_lost(void *userdata, uint32_t sub_id, uint32_t n)
{
	brokerd_bus *bus = userdata;

	bus->counters[BROKERD_COUNTER_EMIT_LOST] += n;
	/* by the sending subscriber: the chan itself may be gone by the time its send completes */
	for (struct bname *b = bus->names; b; b = b->next)
		if (b->sig_send && b->sig_send->sub_id == sub_id) {
			b->emit_lost += n;
			return;
		}
	bus->emit_lost_unowned += n;
}

void bus_emit_lost_notify(brokerd_bus *bus)
{
	uint64_t n;

	if (!bus->emit_lost_handler || (bus->batch && bus->batch->open))
		return;
	/* one name at a time, from the start: the handler may emit, release names, close the bus's names */
	for (;;) {
		struct bname *b = bus->names;

		while (b && !b->emit_lost)
			b = b->next;
		if (!b)
			break;
		n = b->emit_lost;
		b->emit_lost = 0;
		bus->emit_lost_handler(bus, b->name, n, bus->emit_lost_userdata);
		if (bus->closed || !bus->emit_lost_handler)
			return;
	}
	n = bus->emit_lost_unowned;
	bus->emit_lost_unowned = 0;
	if (n)
		bus->emit_lost_handler(bus, NULL, n, bus->emit_lost_userdata);
}

_public_ int brokerd_bus_request_name(brokerd_bus *bus, const char *name, unsigned int flags)
{
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name) || (flags & ~CTRL_NAME_FLAGS_ALL))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	b = bname_get(bus, name, true);
	if (!b)
		return -ENOMEM;
	k = bname_request(bus, b, flags);
	if (k == BROKERD_NAME_PRIMARY_OWNER || k == BROKERD_NAME_IN_QUEUE ||
	    k == BROKERD_NAME_ALREADY_OWNER) {
		b->requested = true;
		b->req_flags = flags;
	}
	bname_gc(bus, b);
	return k;
}

_public_ int brokerd_bus_release_name(brokerd_bus *bus, const char *name)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	struct bname *b;
	uint32_t result = 0;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	b = bname_get(bus, name, false);
	if (b) {
		b->requested = false;
		chan_close(&bus->ring, b->call_recv);
		chan_close(&bus->ring, b->sig_send);
		b->call_recv = b->sig_send = NULL;
		bname_gc(bus, b);
	}
	k = bus_ctrl_request(bus, CTRL_OP_RELEASE_NAME, name, 0, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	k = ctrl_read_u32(&rd, &result);
	if (k < 0)
		return k;
	switch (result) {
	case CTRL_RELEASE_RELEASED:
		return 0;
	case CTRL_RELEASE_NON_EXISTENT:
		return -ENXIO;
	case CTRL_RELEASE_NOT_OWNER:
		return -EPERM;
	default:
		return -EPROTO;
	}
}

_public_ int brokerd_bus_get_name_owner(brokerd_bus *bus, const char *name, char *buf, size_t size)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	const char *owner = NULL;
	int k;

	if (!bus || bus->closed || !name || !buf || size == 0 ||
	    (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name)))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	k = bus_ctrl_request(bus, CTRL_OP_GET_NAME_OWNER, name, 0, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	k = ctrl_read_string(&rd, &owner, NULL);
	if (k >= 0) {
		if (!owner[0])
			k = -ENXIO;
		else if (strlen(owner) >= size)
			k = -ENOBUFS;
		else
			strcpy(buf, owner);
	}
	return k < 0 ? k : 0;
}
