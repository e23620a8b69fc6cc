/* SPDX-License-Identifier: MIT */
/*
 * bus-call.c - making calls: a call slot per pending call, sent on the
 * name's call chan, completed by its reply, an error, its deadline or the
 * loss of the connection or the name. The call chan is opened without
 * blocking (an OPEN_CALL whose reply is dispatched later): calls made
 * meanwhile wait, encoded, in their slots and go out when the cap comes,
 * or fail with brokerd's error. A revoked chan is reopened the same way.
 * The synchronous brokerd_bus_call() runs the loop and lives in bus-loop.c.
 *
 * Where the kernel has receipts (IOIPC_SEND_RECEIPT), a call learns which
 * process took it: only a reply stamped with that pid answers it (one that
 * comes before the receipt waits in the slot for it), a call the kernel
 * dropped untaken fails at once, and when a worker of a pool ends only the
 * calls it took fail (CallReceiverEnded with its pid). The process a
 * receipt names is watched too (bus-taker.c): when it ends, the calls it
 * took fail at once, also when brokerd sees no connection end (a process
 * that took calls through a cap a worker passed on).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-call.h"
#include "client/bus-chan.h"
#include "client/bus-control.h"
#include "client/bus-name.h"
#include "client/bus-slot.h"
#include "client/bus-taker.h"

/* Drops the replies s kept for its receipt, counted as forgeries: none was from its taker. */
static void call_drop_held(brokerd_bus *bus, struct brokerd_slot *s)
{
	for (unsigned int i = 0; i < s->n_held; i++) {
		brokerd_msg_unref(s->held[i]);
		if (bus)
			bus->counters[BROKERD_COUNTER_FORGED_REPLY]++;
	}
	s->n_held = 0;
}

void bus_call_complete(struct brokerd_slot *s, brokerd_msg *msg, int error)
{
	brokerd_reply_handler_t h = s->handler.reply;
	void *userdata = s->userdata;
	bool floating = s->floating;

	BUG_ON(s->type != SLOT_CALL || !s->serial);
	s->serial = 0; /* done: no longer pending */
	s->deadline = 0;
	s->queued = bus_out_free(s->queued); /* never sent */
	call_drop_held(s->bus, s);
	if (s->bus)
		bus_taker_release(s->bus, s);
	if (floating)
		slot_destroy(s);
	if (h)
		h(msg, error, userdata);
}

/*
 * Asks brokerd which connections receive the calls of b's name (its owner
 * and queue: pool workers are queued owners; processes sharing a worker's
 * cap share its badge) and caches what fits. Returns 1 if badge is one of
 * them, 0 if not, or -errno.
 */
static int bname_fetch_receivers(brokerd_bus *bus, struct bname *b, uint64_t badge)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	uint32_t n;
	int k, found = 0;

	k = bus_ctrl_request(bus, CTRL_OP_LIST_QUEUED_OWNERS, b->name, 0, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	if (ctrl_read_array(&rd, &n) < 0)
		return -EPROTO;
	b->n_receivers = 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *u;
		uint64_t id;

		if (ctrl_read_string(&rd, &u, NULL) < 0)
			return -EPROTO;
		if (ctrl_unique_name_parse(u, &id) < 0)
			continue;
		if (id == badge)
			found = 1;
		if (b->n_receivers < ELEMENTSOF(b->receivers))
			b->receivers[b->n_receivers++] = id;
	}
	b->receivers_usec = now_usec();
	return found;
}

void bus_call_note_receiver(struct bname *b, uint64_t id)
{
	for (unsigned int i = 0; i < b->n_receivers; i++)
		if (b->receivers[i] == id)
			return;
	if (b->n_receivers == ELEMENTSOF(b->receivers)) {
		/* full: the oldest goes, and with it the claim to know them all */
		memmove(b->receivers, b->receivers + 1, sizeof(b->receivers) - sizeof(b->receivers[0]));
		b->n_receivers--;
		b->receivers_usec = 0;
	}
	b->receivers[b->n_receivers++] = id;
}

bool bus_call_reply_is_genuine(brokerd_bus *bus, struct brokerd_slot *s, uint64_t badge)
{
	struct bname *b = s->bname;

	if (!badge || !b)
		return false; /* brokerd never replies on a channel; a call always has its name */
	for (unsigned int i = 0; i < b->n_receivers; i++)
		if (b->receivers[i] == badge)
			return true;
	/*
	 * Not among those we know. If we asked after the call went out, whoever
	 * took it was among the answers (a full cache excepted): a forgery.
	 * Otherwise ask again, once per reply, so a forger gets one round trip
	 * per call at most.
	 */
	if (b->receivers_usec >= s->sent && b->n_receivers < ELEMENTSOF(b->receivers))
		return false;
	return bname_fetch_receivers(bus, b, badge) > 0;
}

/* The pending call with this serial, or NULL. */
static struct brokerd_slot *call_find(brokerd_bus *bus, uint64_t serial)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->serial && s->serial == serial)
			return s;
	return NULL;
}

/* The call is to be looked at in this dispatch pass's deadline check (bus_call_due()). */
static void call_look_now(brokerd_bus *bus, struct brokerd_slot *s)
{
	s->deadline = 1;
	bus_kick(bus);
}

/*
 * The kernel's receipt for the call with serial cookie: the pid of the
 * process that took it (0: not in our pid namespace), or the errno it was
 * dropped for. Called from ring_reap(), maybe inside a send: it only
 * records, and leaves what follows (a reply kept, a failure) to the
 * deadline check.
 */
static void call_receipt(void *userdata, uint64_t cookie, int res)
{
	brokerd_bus *bus = userdata;
	struct brokerd_slot *s = call_find(bus, cookie);

	if (!s || s->receipt != RECEIPT_PENDING)
		return; /* done already: answered, timed out, cancelled */
	if (res < 0) {
		s->dropped = res;
		call_look_now(bus, s);
		return;
	}
	s->receipt = RECEIPT_TAKEN;
	s->taker = res;
	if (res > 0)
		bus_taker_watch(bus, s); /* looks now if it is gone already */
	if (s->n_held || s->ended_receiver)
		call_look_now(bus, s);
}

/* Sends s's encoded call on c, with a receipt where the kernel gives them. */
static int call_out_send(brokerd_bus *bus, struct chan *c, struct brokerd_slot *s, const struct bus_out *o)
{
	bool receipt;
	int k;

	bus->ring.on_receipt = call_receipt;
	bus->ring.receipt_userdata = bus;
	/* the receipt may come at once: the slot waits for it from here on */
	bus_taker_release(bus, s);
	s->receipt = RECEIPT_PENDING;
	s->taker = 0;
	k = chan_send_receipt(&bus->ring, c, o->buf, o->len, o->n_fds ? o->fds : NULL, o->n_fds, s->serial,
			      &receipt);
	if (!receipt && s->receipt == RECEIPT_PENDING)
		s->receipt = RECEIPT_NONE;
	return k;
}

/*
 * Whether the process with this pid (0: brokerd could not say) may have
 * taken s: without receipts any receiver may have; with them, the one the
 * kernel named (all, if it could not name it to us). A call not taken yet
 * waits in the channel for the receivers left.
 */
static bool call_taken_by(const struct brokerd_slot *s, pid_t pid)
{
	switch (s->receipt) {
	case RECEIPT_PENDING:
		return false;
	case RECEIPT_TAKEN:
		return !s->taker || !pid || s->taker == pid;
	default:
		return true;
	}
}

void bus_call_reply(brokerd_bus *bus, struct brokerd_slot *s, brokerd_msg *msg)
{
	/*
	 * Anyone allowed to send to our inbox can guess a serial: the kernel's
	 * badge must name a receiver of the call, and its pid the process
	 * that took it. A forgery leaves the call waiting for the real reply.
	 */
	if (!bus_call_reply_is_genuine(bus, s, msg->creds.id) ||
	    (s->receipt == RECEIPT_TAKEN && s->taker && msg->creds.pid != s->taker)) {
		bus->counters[BROKERD_COUNTER_FORGED_REPLY]++;
		return;
	}
	if (s->receipt == RECEIPT_PENDING) {
		/* it came before the receipt: kept until the receipt says whose it is */
		if (s->n_held == ELEMENTSOF(s->held)) {
			bus->counters[BROKERD_COUNTER_FORGED_REPLY]++;
			return;
		}
		s->held[s->n_held++] = brokerd_msg_ref(msg);
		return;
	}
	bus_call_complete(s, msg, msg->type == BROKERD_MSG_ERROR ? -EREMOTEIO : 0);
}

void bus_call_mark_ended(brokerd_bus *bus, struct bname *b, uint64_t id, pid_t pid, uint64_t seq,
			 uint64_t revoked_at)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		/* a receipt still due may only not have been reaped yet: bus_call_due() decides */
		if (s->type == SLOT_CALL && s->serial && s->bname == b && !s->queued && s->ctrl_seq < seq &&
		    s->sent < revoked_at && (s->receipt == RECEIPT_PENDING || call_taken_by(s, pid))) {
			s->ended_receiver = id;
			s->ended_pid = pid;
			call_look_now(bus, s);
		}
}

int bus_call_due(brokerd_bus *bus, struct brokerd_slot *s)
{
	bool ended;

	BUG_ON(s->type != SLOT_CALL || !s->serial);
	/* receipts the kernel posted before what made us look */
	(void)ring_reap(&bus->ring);
	if (s->dropped) {
		/* nobody can take it any more: its receiver or its channel is gone */
		bus_call_complete(s, NULL, -ECONNRESET);
		return 1;
	}
	if (s->receipt == RECEIPT_TAKEN && s->n_held) {
		brokerd_msg *msg = NULL;

		for (unsigned int i = 0; i < s->n_held && !msg; i++)
			if (!s->taker || s->held[i]->creds.pid == s->taker) {
				msg = s->held[i];
				s->held[i] = s->held[--s->n_held];
			}
		call_drop_held(bus, s); /* the others were not its taker's */
		if (msg) {
			bus_call_complete(s, msg, msg->type == BROKERD_MSG_ERROR ? -EREMOTEIO : 0);
			brokerd_msg_unref(msg);
			return 1;
		}
	}
	if (s->owner_lost && s->receipt != RECEIPT_TAKEN) {
		/* the name's last owner went, and nobody took it: nobody will */
		bus_call_complete(s, NULL, -ECONNRESET);
		return 1;
	}
	if (s->ended_receiver) {
		/* NoReply: the receiver that took it ended (bus-dispatch.c) */
		if (call_taken_by(s, s->ended_pid))
			return 2;
		s->ended_receiver = 0; /* another took it, or nobody yet */
	}
	/*
	 * The process that took it ended (bus-taker.c: seen before this pass
	 * reaped), or the name's last owner went: a reply sent before is in
	 * the inbox, to be dispatched first (the next pass, if this one left
	 * it for lack of budget).
	 */
	ended = s->owner_lost || (s->watch && s->watch->ended);
	if (ended && !ring_has_ready_kind(&bus->ring, CHAN_INBOX))
		return 2;
	if (s->timeout_at <= now_usec()) {
		bus_call_complete(s, NULL, -ETIMEDOUT);
		return 1;
	}
	s->deadline = ended ? 1 : s->timeout_at;
	if (ended)
		bus_kick(bus);
	return 0;
}

/* The call of b that has waited longest for b's call chan, or NULL. */
static struct brokerd_slot *call_oldest_queued(brokerd_bus *bus, struct bname *b)
{
	struct brokerd_slot *s, *found = NULL;

	/* new slots go first in the list: the last one found is the oldest */
	for (s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->bname == b && s->queued)
			found = s;
	return found;
}

/* A call that has been sent (or failed to be): a call expecting no reply is done. */
static void call_sent(struct brokerd_slot *s, int error)
{
	if (error < 0)
		bus_call_complete(s, NULL, error);
	else if (!s->handler.reply)
		slot_destroy(s); /* floating: nothing more will happen to it */
}

static int call_open_async(brokerd_bus *bus, struct bname *b);

/*
 * b's call chan is open (error 0) or could not be opened: the calls waiting
 * for it go out in the order they were made, or fail with error.
 */
static void call_flush_queued(brokerd_bus *bus, struct bname *b, int error)
{
	struct brokerd_slot *s;

	/* handlers run here and may free any slot: b stays until the end */
	b->flushing = true;
	while (!b->opening && (s = call_oldest_queued(bus, b))) {
		struct bus_out *data = TAKE_PTR(s->queued);
		int k = error;

		if (error < 0) {
			bus_out_free(data);
			call_sent(s, error); /* brokerd's verdict */
			continue;
		}
		s->ctrl_seq = bus->ctrl_seq; /* it goes out only now (bus-dispatch.c) */
		k = b->call_send ? call_out_send(bus, b->call_send, s, data) : -ENOTCONN;
		if ((k == -EACCES || k == -ENOENT || k == -EPIPE) && !s->reopened) {
			/* revoked or gone while it opened: once more, then brokerd's verdict */
			chan_close(&bus->ring, b->call_send);
			b->call_send = NULL;
			s->queued = TAKE_PTR(data);
			s->reopened = true;
			k = call_open_async(bus, b);
			if (k >= 0)
				break;
			data = TAKE_PTR(s->queued);
		}
		bus_out_free(data);
		call_sent(s, k < 0 ? k : 0);
	}
	b->flushing = false;
}

/* The reply to our OPEN_CALL for b (a struct bname, kept while opening). */
static void call_opened(brokerd_bus *bus, struct ctrl_reply *r, int error, void *userdata)
{
	struct bname *b = userdata;

	b->opening = false;
	/* a synchronous call may have opened the chan meanwhile: keep that one */
	if (error >= 0 && !b->call_send) {
		error = bus_chan_attach(bus, ctrl_reply_take_fd(r, 0), IOIPC_SUB_SEND, CHAN_CALL_SEND, b,
					&b->call_send);
		if (error >= 0)
			b->call_send->msg_max = bus_reply_msg_max(r);
	}
	call_flush_queued(bus, b, error);
	bname_gc(bus, b); /* no call of ours is left to keep it */
}

/*
 * Asks brokerd for b's call chan without waiting (NO_WAIT: an activatable
 * name gives its cap at once, calls wait in the ring for the service).
 */
static int call_open_async(brokerd_bus *bus, struct bname *b)
{
	int k;

	if (b->opening)
		return 0;
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	k = bus_ctrl_request_async(bus, CTRL_OP_OPEN_CALL, b->name,
				   CTRL_CALL_NO_WAIT | bus_open_call_flags(bus), call_opened, b);
	if (k >= 0)
		b->opening = true;
	return k;
}

/*
 * The encoded length of m as bus_out_encode() lays it out with n_fds fds:
 * inline up to inline_max, else the header alone (the body in a memfd); 0
 * if it cannot be encoded (bus_out_encode() then says why). buf is
 * scratch for the header (CHMSG_MAX bytes).
 */
static size_t call_encoded_len(const struct chmsg *msg, unsigned int n_fds, size_t inline_max, uint8_t *buf)
{
	struct chmsg m = *msg;
	int k;

	if (m.signature == bus_bytes_signature && m.body_len > 0)
		m.body_len += 4; /* the byte API's "ay": its length, then the bytes */
	m.n_fds = n_fds;
	/* -EMSGSIZE: a body larger than any slot, which goes in a memfd */
	k = chmsg_encode_header(&m, buf, CHMSG_MAX);
	if (k < 0 && k != -EMSGSIZE)
		return 0;
	if (k >= 0 && (size_t)k + m.body_len <= inline_max)
		return (size_t)k + m.body_len;
	m.body_in_fd = true;
	m.n_fds++;
	k = chmsg_encode_header(&m, buf, CHMSG_MAX);
	return k < 0 ? 0 : (size_t)k;
}

int bus_call_encode(brokerd_bus *bus, const struct chmsg *m, size_t inline_max, bool now, struct bus_out *o)
{
	uint8_t *send_buf, *own;
	size_t len;
	int k;

	/* sent at once: into the bus's send buffer, a typed body where it lies (bus->send_room) */
	if (now)
		return bus_out_encode_now(bus, m, inline_max, o);
	/*
	 * It waits for its chan, in a buffer of its own: sized to it, and
	 * written once, as a message sent at once is, by lending that buffer
	 * to bus_out_encode_now() as the bus's send buffer (the header is laid
	 * out in the real one first, to learn its size). A typed body is
	 * copied in after its header: the message it lies in may be gone when
	 * the chan comes.
	 */
	bus->send_room = NULL;
	if (!bus->send_buf)
		bus->send_buf = malloc(CHMSG_MAX);
	if (!bus->send_buf)
		return -ENOMEM;
	len = call_encoded_len(m, bus->n_send_fds, inline_max, bus->send_buf);
	if (!len) {
		/* one it refuses: let it say why (the header alone is no reason to refuse it) */
		k = bus_out_encode_now(bus, m, inline_max, o);
		if (k >= 0)
			bus_out_deinit(o);
		return k < 0 ? k : -EINVAL;
	}
	own = malloc(len);
	if (!own)
		return -ENOMEM;
	send_buf = bus->send_buf;
	bus->send_buf = own;
	/* no more than len inline: the same choice inline_max makes, in no more room than it takes */
	k = bus_out_encode_now(bus, m, len < inline_max ? len : inline_max, o);
	bus->send_buf = send_buf;
	if (k < 0 || o->buf != own) {
		if (k >= 0)
			bus_out_deinit(o);
		free(own);
		return k < 0 ? k : -EIO;
	}
	o->borrowed = false; /* own is o's */
	return 0;
}

/*
 * Takes o (sent at once, and borrowing) into a bus_out of its own, for a
 * call that waits after all (its chan revoked under the send, or the send
 * to be tried again).
 */
static struct bus_out *call_out_keep(struct bus_out *o)
{
	struct bus_out *q = malloc(sizeof(*q));
	uint8_t *buf = q ? malloc(o->len) : NULL;

	if (!buf) {
		free(q);
		return NULL;
	}
	/* a second copy, but only for a call whose send did not go through */
	memcpy(buf, o->buf, o->len);
	*q = *o;
	q->buf = buf;
	q->borrowed = false;
	o->n_fds = 0; /* q's now */
	return q;
}

/* Sends the call m (its serial and flags are set here) to name. */
static int call_send(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name, struct chmsg *m,
		     uint64_t timeout_usec, brokerd_reply_handler_t handler, void *userdata)
{
	_cleanup_(bus_out_freep) struct bus_out *data = NULL;
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
	/*
	 * A synchronous caller is waiting anyway: it opens the chan at once
	 * (waiting for an activation), so that brokerd's refusal is its return
	 * value. An event loop must not block: its call waits in its slot.
	 */
	if (bus->sync_opening && !b->call_send && !b->opening) {
		k = bname_open_call(bus, b, true);
		if (k < 0) {
			bname_gc(bus, b);
			return k;
		}
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
	s->sent = now_usec();
	s->ctrl_seq = bus->ctrl_seq;
	s->deadline = s->timeout_at = s->sent + (timeout_usec ? timeout_usec : BUS_DEFAULT_TIMEOUT_USEC);
	k = -EAGAIN;
	if (b->call_send && !b->opening) {
		struct bus_out o;

		k = bus_call_encode(bus, m, bus_chan_inline_max(b->call_send), true, &o);
		if (k < 0) {
			slot_destroy(s);
			return k;
		}
		k = call_out_send(bus, b->call_send, s, &o);
		if (k == -EACCES || k == -ENOENT || k == -EPIPE) {
			/* capability revoked or channel gone: open it afresh, once */
			chan_close(&bus->ring, b->call_send);
			b->call_send = NULL;
			s->reopened = true;
			k = -EAGAIN;
		}
		if (k == -EAGAIN) {
			/* it waits after all: in memory of its own, the send buffer is the next send's */
			data = call_out_keep(&o);
			k = data ? -EAGAIN : -ENOMEM;
		}
		bus_out_deinit(&o);
	} else {
		/* a chan still to open: the size that fits any (it may be queued behind others) */
		data = malloc(sizeof(*data));
		k = data ? bus_call_encode(bus, m, bus_chan_inline_max(NULL), false, data) : -ENOMEM;
		if (k < 0) {
			free(TAKE_PTR(data)); /* nothing in it to free */
			slot_destroy(s);
			return k;
		}
		k = -EAGAIN;
	}
	if (k == -EAGAIN) {
		/* wait, in order, behind the calls already waiting for the chan */
		k = call_open_async(bus, b);
		if (k >= 0) {
			s->queued = TAKE_PTR(data);
			if (!handler) {
				/* nobody waits for it: the bus frees it once sent */
				if (ret_slot)
					*ret_slot = NULL;
				return slot_hand_out(s, NULL);
			}
			return slot_hand_out(s, ret_slot);
		}
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
	if (!path || !ctrl_name_is_valid_member(member) || (size && !body))
		return -EINVAL;
	if (size > CHMSG_BODY_MAX)
		return -EMSGSIZE;
	return call_send(bus, ret_slot, name, &m, timeout_usec, handler, userdata);
}
