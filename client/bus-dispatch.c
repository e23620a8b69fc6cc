/* SPDX-License-Identifier: MIT */
/*
 * bus-dispatch.c - what arrived, to whom it goes: a completed channel
 * receive is decoded, its receive re-armed and the message handed to a
 * method, the subscriptions, a pending call or the monitor; a broker signal
 * on the control socket updates names, caps and monitors and reaches the
 * name watches. The receive is re-armed before any handler runs, so that
 * handlers may make calls of their own: a message from a multishot receive
 * is read in place, its buffer lent until the dispatch ends (copied out
 * then if a handler kept the message), others are copied out first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/bus-alloc.h"
#include "client/bus-call.h"
#include "client/bus-chan.h"
#include "client/bus-control.h"
#include "client/bus-dispatch.h"
#include "client/bus-inbox.h"
#include "client/bus-match.h"
#include "client/bus-name.h"
#include "client/bus-object.h"
#include "client/filter.h"
#include "client/msg.h"
#include "protocol/dbus-marshal.h"

static void dispatch_call(brokerd_bus *bus, brokerd_msg *msg)
{
	struct brokerd_slot *s, *fallback = NULL, *match = NULL;
	int k;

	for (s = bus->slots; s; s = s->next) {
		if (s->type != SLOT_METHOD || strcmp(s->name, msg->name) != 0)
			continue;
		if (s->member && strcmp(s->member, msg->member) == 0) {
			match = s;
			break;
		}
		if (!s->member && !fallback)
			fallback = s;
	}
	/* objects serve what no method of its own member claims (bus-object.c) */
	if (!match && bus_object_dispatch(bus, msg, fallback != NULL) > 0)
		return;
	if (!match)
		match = fallback;
	if (!match) {
		(void)brokerd_msg_reply_error(msg, BROKERD_ERROR_UNKNOWN_METHOD, msg->member);
		return;
	}
	k = match->handler.msg(msg, match->userdata);
	/* a handler that kept a reference answers later (or never) */
	if (msg->replied || (msg->flags & CHMSG_F_NO_REPLY_EXPECTED) || msg->n_ref > 1)
		return;
	if (k < 0) {
		char text[64];

		snprintf(text, sizeof(text), "%s", strerror(-k));
		(void)brokerd_msg_reply_error(msg, BROKERD_ERROR_FAILED, text);
	} else {
		(void)brokerd_msg_reply(msg, NULL, 0);
	}
}

static void dispatch_signal(brokerd_bus *bus, struct bname *b, brokerd_msg *msg)
{
	struct brokerd_slot *s, *next;

	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type != SLOT_SUBSCRIBE || s->bname != b || (!b && s->name) ||
		    !filter_match(s->member, msg->member))
			continue;
		s->handler.msg(msg, s->userdata);
		if (bus->closed)
			return;
	}
	/* match rules (bus-match.c) see every signal, whichever channel brought it */
	bus_match_dispatch(bus, msg);
}

static void dispatch_reply(brokerd_bus *bus, brokerd_msg *msg)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->serial && s->serial == msg->reply_serial) {
			bus_call_reply(bus, s, msg); /* unless it is a forgery */
			return;
		}
	bus->counters[BROKERD_COUNTER_UNEXPECTED_REPLY]++; /* late, cancelled, or never asked */
}

static void dispatch_monitor(brokerd_bus *bus, struct monitor_chan *mc, brokerd_msg *msg, int error)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_MONITOR) {
			if (!s->name || strcmp(s->name, mc->name) == 0)
				s->handler.monitor(bus, mc->name, mc->kind, msg, error, s->userdata);
			return;
		}
}

/* Whether slot s would have heard a message lost on c. */
static bool slot_hears(const struct brokerd_slot *s, const struct chan *c)
{
	switch (c->kind) {
	case CHAN_SIGNAL_RECV:
		if (s->type == SLOT_SUBSCRIBE)
			return s->bname && s->bname == c->owner;
		/* a rule without a well-known sender hears every name's signals */
		return s->type == SLOT_MATCH && s->match && (s->match->bname == c->owner || s->match->watch);
	case CHAN_MONITOR:
		return s->type == SLOT_MONITOR &&
		       (!s->name || strcmp(s->name, ((const struct monitor_chan *)c->owner)->name) == 0);
	default:
		return false;
	}
}

/*
 * The kernel dropped n messages for c before the one it holds now (a lossy
 * signal channel or a monitor fell a ring behind): counted for the bus and
 * every slot that would have heard them, whose lost handlers learn it
 * before the message is dispatched.
 */
static void dispatch_lost(brokerd_bus *bus, struct chan *c, uint32_t n)
{
	struct brokerd_slot *s, *next;

	bus->counters[BROKERD_COUNTER_LOST] += n;
	for (s = bus->slots; s; s = s->next)
		if (slot_hears(s, c))
			s->lost += n;
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (slot_hears(s, c) && s->lost_handler)
			s->lost_handler(s, n, s->userdata);
		if (bus->closed)
			return;
	}
}

/* A receive completed on c: decode, re-arm, dispatch. */
void bus_dispatch_chan(brokerd_bus *bus, struct chan *c)
{
	struct bname *b = NULL;
	struct monitor_chan *mc = NULL;
	const struct ioipc_msg_info *info;
	const char *name = "";
	brokerd_msg *msg = NULL;
	const void *payload;
	uint32_t lost;
	size_t len;
	int k;

	if (c->kind == CHAN_CALL_RECV || c->kind == CHAN_SIGNAL_RECV) {
		b = c->owner;
		BUG_ON(!b);
		name = b->name;
	} else if (c->kind == CHAN_MONITOR) {
		mc = c->owner;
		BUG_ON(!mc);
		name = mc->name;
	}
	/* counted even when what follows the loss turns out malformed */
	lost = chan_message(c, &info, &payload, &len) >= 0 ? info->lost : 0;
	k = msg_receive_in_place(bus, c, name, &msg);
	if (k < 0 && c->kind == CHAN_CALL_RECV && c->res >= 0 && !bus->exit)
		(void)chan_arm(&bus->ring, c); /* a malformed call: take the next one */
	if (c->res < 0 && c->res != -EINTR && c->res != -ETIME) {
		/* detached, revoked or unsupported: re-arming would fail the same way */
		if (mc)
			dispatch_monitor(bus, mc, NULL, c->res);
		if (bus_chan_is_retired(bus, c)) {
			bus_retired_close(bus, c, NULL); /* drained */
			return;
		}
		if (c->kind == CHAN_SIGNAL_RECV && (c->res == -ENOENT || c->res == -EPIPE) && b &&
		    b->sig_recv == c) {
			/* the channel went away under us: subscribe again */
			chan_close(&bus->ring, c);
			b->sig_recv = NULL;
			(void)bname_subscribe(bus, b);
		} else if (c->res == -EACCES && b && (b->sig_recv == c || b->call_recv == c)) {
			/* revoked: the slots stay, but go quiet */
			chan_close(&bus->ring, c);
			if (b->sig_recv == c)
				b->sig_recv = NULL;
			else
				b->call_recv = NULL;
		}
		return;
	}
	/*
	 * Re-arm before running handlers, so that a handler's own synchronous
	 * call can receive its reply; but a call channel only afterwards: a
	 * receive parked there takes the next call away from the other workers
	 * of a pool, and a bus about to exit would swallow it.
	 */
	if (c->kind != CHAN_CALL_RECV)
		(void)chan_arm(&bus->ring, c);
	if (k < 0) {
		/* malformed or truncated: the sender's bug, not ours; drop it */
		if (c->res >= 0 && k != -ENOMEM)
			bus->counters[k == -EMFILE ? BROKERD_COUNTER_FDS_LOST : BROKERD_COUNTER_INVALID]++;
		if (mc)
			dispatch_monitor(bus, mc, NULL, k);
		if (lost)
			dispatch_lost(bus, c, lost);
		return;
	}
	bus_ref(bus);
	/* the loss first, then the message that told of it */
	if (lost)
		dispatch_lost(bus, c, lost);
	if (bus->closed)
		goto done;
	switch (c->kind) {
	case CHAN_INBOX:
		if (msg->type == BROKERD_MSG_REPLY || msg->type == BROKERD_MSG_ERROR)
			dispatch_reply(bus, msg);
		else if (msg->type == BROKERD_MSG_SIGNAL)
			dispatch_signal(bus, NULL, msg); /* sent to us directly */
		break;
	case CHAN_CALL_RECV:
		if (msg->type == BROKERD_MSG_CALL)
			dispatch_call(bus, msg);
		/* the handler may have released the name or closed the bus */
		/* submitted with the next wait (or at the end of brokerd_bus_process()) */
		if (!bus->closed && !bus->exit && (b->call_recv == c || bus_chan_is_retired(bus, c)))
			(void)chan_arm_deferred(&bus->ring, c);
		break;
	case CHAN_SIGNAL_RECV:
		if (msg->type == BROKERD_MSG_SIGNAL)
			dispatch_signal(bus, b, msg);
		break;
	case CHAN_MONITOR:
		dispatch_monitor(bus, mc, msg, 0);
		break;
	default:
		break;
	}
done:
	/* kept by a handler (or a synchronous call's caller): copied out of the buffer now */
	if (msg->n_ref > 1)
		(void)msg_keep(msg);
	brokerd_msg_unref(msg);
	bus_unref(bus);
}

/*
 * A receiver of b's calls is gone, as the seq-th control datagram said: the
 * calls it may have taken will never be answered. Those sent after that
 * datagram was read went to whoever receives now, and keep waiting. A call
 * sent with a receipt is failed by the deadline check at the end of the
 * pass (owner_lost): NoReply if a receipt says it was taken, as when its
 * taker's end is seen first (bus-taker.c), so that the error does not
 * depend on which came first; a reply already in the inbox wins.
 */
static void fail_calls_sent_before(brokerd_bus *bus, struct bname *b, uint64_t seq)
{
	struct brokerd_slot *s, *next;

	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type != SLOT_CALL || !s->serial || s->bname != b || s->queued || s->ctrl_seq >= seq)
			continue;
		if (s->receipt != RECEIPT_NONE) {
			s->owner_lost = true;
			s->deadline = 1;
			bus_kick(bus);
			continue;
		}
		bus_call_complete(s, NULL, -ECONNRESET);
		next = bus->slots;
	}
}

void bus_dispatch_receiver_ended(brokerd_bus *bus, struct brokerd_slot *s)
{
	char receiver[CTRL_UNIQUE_NAME_MAX], text[160];
	uint8_t body[4 + sizeof(text)];
	struct chmsg m = {
		.type = CHMSG_ERROR,
		.byte_order = DBUS_NATIVE_ENDIAN,
		.serial = 1,
		.reply_serial = s->serial,
		.error_name = BROKERD_ERROR_NO_REPLY,
		.signature = "s",
		.body = body,
	};
	brokerd_msg *msg;
	uint32_t n;

	if (s->ended_receiver)
		ctrl_unique_name_format(s->ended_receiver, receiver);
	else /* the process its receipt named; brokerd may not know of it (bus-taker.c) */
		(void)snprintf(receiver, sizeof(receiver), "process %d", (int)s->taker);
	n = (uint32_t)snprintf(text, sizeof(text), "receiver ended: %s, a receiver of %s, ended before it replied",
			       receiver, s->name ? s->name : "?");
	if (n >= sizeof(text))
		n = sizeof(text) - 1;
	memcpy(body, &n, 4);
	memcpy(body + 4, text, n + 1);
	m.body_len = 4 + n + 1;
	msg = msg_new(bus, &m, NULL, s->name ? s->name : "");
	bus_call_complete(s, msg, msg ? -EREMOTEIO : -ECONNRESET);
	brokerd_msg_unref(msg);
}

static void dispatch_name_owner_changed(brokerd_bus *bus, const char *name, const char *old_owner,
					const char *new_owner, uint64_t seq)
{
	struct brokerd_slot *s, *next;
	struct bname *b = bname_get(bus, name, false);
	uint64_t id;

	if (name[0] == ':' && !new_owner[0] && ctrl_unique_name_parse(name, &id) >= 0)
		peer_inbox_drop(bus, id);
	/* the new owner takes calls: its replies are genuine, even after it left */
	if (b && new_owner[0] && ctrl_unique_name_parse(new_owner, &id) >= 0)
		bus_call_note_receiver(b, id);
	if (b && !new_owner[0]) {
		/* the name's last owner is gone: so are the calls it was serving */
		chan_close(&bus->ring, b->call_send);
		b->call_send = NULL;
		fail_calls_sent_before(bus, b, seq);
	}
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type == SLOT_WATCH && (!s->name || strcmp(s->name, name) == 0))
			s->handler.name(bus, name, old_owner, new_owner, s->userdata);
	}
}

/* Takes ownership of fds. */
int bus_dispatch_ctrl(brokerd_bus *bus, const uint8_t *buf, size_t len, int *fds, unsigned int n_fds,
		      uint64_t seq)
{
	struct ctrl_message m;
	struct ctrl_reader r;
	const char *a = NULL, *o = NULL, *n = NULL;
	int k;

	BUG_ON(!fds && n_fds > 0);
	k = ctrl_message_decode(&m, buf, len, n_fds);
	if (k >= 0 && (m.hdr.type == CTRL_TYPE_REPLY || m.hdr.type == CTRL_TYPE_ERROR)) {
		/* the reply to a request sent with a handler (an asynchronous OPEN_CALL) */
		bus_ctrl_dispatch_reply(bus, buf, len, &m, fds, n_fds);
		return 1;
	}
	if (k < 0 || m.hdr.type != CTRL_TYPE_SIGNAL)
		goto done;
	ctrl_reader_init(&r, &m);
	switch (m.hdr.code) {
	case CTRL_SIGNAL_NAME_OWNER_CHANGED:
		if (ctrl_read_string(&r, &a, NULL) >= 0 && ctrl_read_string(&r, &o, NULL) >= 0 &&
		    ctrl_read_string(&r, &n, NULL) >= 0)
			dispatch_name_owner_changed(bus, a, o, n, seq);
		break;
	case CTRL_SIGNAL_NAME_ACQUIRED:
		if (ctrl_read_string(&r, &a, NULL) >= 0) {
			struct bname *b = bname_get(bus, a, false);
			_cleanup_ctrl_reply_ struct ctrl_reply rep = { .n_fds = n_fds };

			memcpy(rep.fds, fds, sizeof(int) * n_fds);
			n_fds = 0;
			if (b)
				(void)bname_take_owner_fds(bus, b, &rep);
		}
		break;
	case CTRL_SIGNAL_NAME_LOST:
		if (ctrl_read_string(&r, &a, NULL) >= 0) {
			struct bname *b = bname_get(bus, a, false);

			if (b) {
				chan_close(&bus->ring, b->call_recv);
				chan_close(&bus->ring, b->sig_send);
				b->call_recv = b->sig_send = NULL;
			}
		}
		break;
	case CTRL_SIGNAL_MONITOR_CHANNEL: {
		uint32_t kind = 0;

		if (n_fds >= 1 && ctrl_read_string(&r, &a, NULL) >= 0 && ctrl_read_u32(&r, &kind) >= 0) {
			(void)bus_monitor_add(bus, a, kind, fds[0]);
			fds[0] = -1;
		}
		break;
	}
	case CTRL_SIGNAL_CALL_RECEIVER_LOST:
		/* an older brokerd's: a receiver of the name's calls died, any call sent before may have been its */
		if (ctrl_read_string(&r, &a, NULL) >= 0) {
			struct bname *b = bname_get(bus, a, false);

			if (b)
				fail_calls_sent_before(bus, b, seq);
		}
		break;
	case CTRL_SIGNAL_CALL_RECEIVER_ENDED: {
		/* one of the name's receivers ended, others remain: its calls fail, replies first */
		uint64_t id, revoked_at;
		uint32_t pid = 0; /* `sstu` (ENDED_PID), or `sst` from a brokerd that does not tell */

		if (ctrl_read_string(&r, &a, NULL) >= 0 && ctrl_read_string(&r, &n, NULL) >= 0 &&
		    ctrl_read_u64(&r, &revoked_at) >= 0 && ctrl_unique_name_parse(n, &id) >= 0 &&
		    (ctrl_reader_at_end(&r) || ctrl_read_u32(&r, &pid) >= 0)) {
			struct bname *b = bname_get(bus, a, false);

			if (b)
				bus_call_mark_ended(bus, b, id, (pid_t)pid, seq, revoked_at);
		}
		break;
	}
	case CTRL_SIGNAL_SIGNAL_CHANNEL:
		/* a name appeared that a match rule without a sender may hear */
		if (ctrl_read_string(&r, &a, NULL) >= 0) {
			bus_match_take_channel(bus, a, n_fds ? fds[0] : -1);
			if (n_fds)
				fds[0] = -1;
		}
		break;
	case CTRL_SIGNAL_REPLY_CAPABILITY:
		/* brokerd's cap for our replies to a caller of a name we serve */
		if (n_fds >= 1)
			peer_inbox_read_cap_signal(bus, &r, &fds[0]);
		break;
	case CTRL_SIGNAL_CAPABILITY_REVOKED:
		/*
		 * The kernel has already detached what we attached through the
		 * revoked caps: receives in flight end with -EACCES (see
		 * bus_dispatch_chan), sends fail and reopen through brokerd,
		 * which then answers with the policy's verdict.
		 */
		break;
	default:
		break;
	}
done:
	for (unsigned int i = 0; i < n_fds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return 1;
}

_public_ int brokerd_slot_get_lost(brokerd_slot *slot, uint64_t *ret)
{
	if (!slot || !ret)
		return -EINVAL;
	if (slot->type != SLOT_SUBSCRIBE && slot->type != SLOT_MATCH && slot->type != SLOT_MONITOR)
		return -EOPNOTSUPP;
	*ret = slot->lost;
	return 0;
}

_public_ int brokerd_slot_set_lost_handler(brokerd_slot *slot, brokerd_lost_handler_t handler)
{
	if (!slot)
		return -EINVAL;
	if (slot->type != SLOT_SUBSCRIBE && slot->type != SLOT_MATCH && slot->type != SLOT_MONITOR)
		return -EOPNOTSUPP;
	slot->lost_handler = handler;
	return 0;
}

_public_ uint64_t brokerd_bus_get_counter(brokerd_bus *bus, int counter)
{
	if (!bus || counter < 0 || counter >= _BROKERD_COUNTER_MAX)
		return 0;
	return bus->counters[counter];
}
