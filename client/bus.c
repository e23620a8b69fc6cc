/* SPDX-License-Identifier: MIT */
/*
 * bus.c - a connection to brokerd: the control socket (requests, replies and
 * broker signals, encoded by protocol/ctrl.c), the channels whose capability
 * fds brokerd hands out, dispatch of received messages to slots, the one
 * epoll fd for event loops, and reconnecting after a brokerd restart.
 *
 * Control requests are synchronous: brokerd answers them promptly, and
 * signals that arrive meanwhile are queued and dispatched later. Channel
 * messages are copied out of the receive buffer and the receive re-armed
 * before any handler runs, so handlers may make calls of their own.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/bus-internal.h"
#include "client/filter.h"

static void retired_close(brokerd_bus *bus, struct chan *c, void *owner);
static int bname_unsubscribe(brokerd_bus *bus, struct bname *b, bool wait);
static int bus_dispatch_ctrl(brokerd_bus *bus, const uint8_t *buf, size_t len, int *fds,
			     unsigned int n_fds);

/* --- Errors ----------------------------------------------------------------- */

static const struct {
	const char *name;
	int error;
} ctrl_errors[] = {
	{ CTRL_ERROR_FAILED, EIO },
	{ CTRL_ERROR_PROTOCOL, EPROTO },
	{ CTRL_ERROR_VERSION, EPROTO },
	{ CTRL_ERROR_UNKNOWN_OP, EOPNOTSUPP },
	{ CTRL_ERROR_INVALID_ARGS, EINVAL },
	{ CTRL_ERROR_NO_HELLO, ENOTCONN },
	{ CTRL_ERROR_ALREADY_HELLO, EALREADY },
	{ CTRL_ERROR_ACCESS_DENIED, EACCES },
	{ CTRL_ERROR_QUOTA_EXCEEDED, EDQUOT },
	{ CTRL_ERROR_NAME_HAS_NO_OWNER, ENXIO },
	{ CTRL_ERROR_SERVICE_UNKNOWN, ENXIO },
	{ CTRL_ERROR_ACTIVATION_FAILED, EHOSTDOWN },
	{ CTRL_ERROR_TIMEOUT, ETIMEDOUT },
	{ CTRL_ERROR_NOT_SUPPORTED, EOPNOTSUPP },
	{ CTRL_ERROR_INVALID_POLICY, EINVAL },
	{ CTRL_ERROR_NO_MEMORY, ENOMEM },
};

int bus_ctrl_error_to_errno(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(ctrl_errors); i++)
		if (name && strcmp(name, ctrl_errors[i].name) == 0)
			return -ctrl_errors[i].error;
	return -EIO;
}

void ctrl_reply_done(struct ctrl_reply *r)
{
	if (!r)
		return;
	for (unsigned int i = 0; i < r->n_fds; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	r->n_fds = 0;
	free(r->buf);
	r->buf = NULL;
}

/* --- Control socket I/O ------------------------------------------------------ */

static int ctrl_send(brokerd_bus *bus, const void *data, size_t len, const int *fds,
		     unsigned int n_fds)
{
	union {
		struct cmsghdr cmsg;
		char buf[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX)];
	} control;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n_fds) {
		struct cmsghdr *c;

		memset(&control, 0, sizeof(control));
		mh.msg_control = &control;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	if (sendmsg(bus->ctrl_fd, &mh, MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

/* Receives one datagram into a new buffer: > 0 length, 0 EOF, -EAGAIN. */
static int ctrl_recv(brokerd_bus *bus, uint8_t **ret_buf, int *fds, unsigned int *n_fds,
		     bool block)
{
	union {
		struct cmsghdr cmsg;
		char buf[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX * 2)];
	} control;
	_cleanup_free_ uint8_t *buf = malloc(CTRL_MSG_MAX);
	struct iovec iov = { .iov_len = CTRL_MSG_MAX };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = &control, .msg_controllen = sizeof(control),
	};
	ssize_t n;

	*n_fds = 0;
	if (!buf)
		return -ENOMEM;
	iov.iov_base = buf;
	n = recvmsg(bus->ctrl_fd, &mh, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*n_fds < CTRL_FDS_MAX)
				fds[(*n_fds)++] = fd;
			else
				close(fd);
		}
	}
	if (n == 0)
		return 0;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (unsigned int i = 0; i < *n_fds; i++)
			close(fds[i]);
		*n_fds = 0;
		return -EBADMSG;
	}
	*ret_buf = TAKE_PTR(buf);
	return (int)n;
}

static void ctrl_queue(brokerd_bus *bus, uint8_t *buf, size_t len, int *fds, unsigned int n_fds)
{
	struct ctrl_queued *q = malloc(sizeof(*q) + len);

	if (!q) {
		for (unsigned int i = 0; i < n_fds; i++)
			close(fds[i]);
		return;
	}
	q->next = NULL;
	q->len = len;
	q->n_fds = n_fds;
	memcpy(q->fds, fds, sizeof(int) * n_fds);
	memcpy(q->data, buf, len);
	*bus->cq_tail = q;
	bus->cq_tail = &q->next;
}

static void bus_kick(brokerd_bus *bus)
{
	/* make the epoll fd readable so that queued work gets dispatched */
	if (bus->ring.efd >= 0)
		(void)!eventfd_write(bus->ring.efd, 1);
}

/*
 * The control connection is broken: say so, and leave disconnecting (and
 * failing the calls in flight, and scheduling a reconnect) to the next
 * dispatch, so that a control request never runs handlers of its own.
 */
static int ctrl_fail(brokerd_bus *bus)
{
	bus->ctrl_failed = true;
	bus_kick(bus);
	return -ECONNRESET;
}

int bus_ctrl_call(brokerd_bus *bus, struct ctrl_writer *w, struct ctrl_reply *ret)
{
	const void *data;
	size_t len;
	uint32_t serial;
	int k;

	if (ret)
		memset(ret, 0, sizeof(*ret));
	bus->error_name[0] = bus->error_message[0] = 0;
	if (!bus->connected || bus->ctrl_fd < 0 || bus->ctrl_failed)
		return -ENOTCONN;
	serial = ++bus->ctrl_serial ? bus->ctrl_serial : ++bus->ctrl_serial;
	/* the writer was initialized with serial 0: patch ours in */
	if (w->len >= CTRL_HEADER_SIZE) {
		uint32_t le = htole32(serial);

		memcpy(w->buf + 4, &le, 4);
	}
	k = ctrl_writer_finish(w, &data, &len);
	if (k < 0)
		return k;
	k = ctrl_send(bus, data, len, w->fds, w->n_fds);
	if (k < 0)
		return ctrl_fail(bus);
	if (!ret)
		return 0;	/* its reply is dropped when it comes (serial mismatch, or no signal) */
	for (;;) {
		struct pollfd pfd = { .fd = bus->ctrl_fd, .events = POLLIN };
		int fds[CTRL_FDS_MAX];
		unsigned int n_fds = 0;
		uint8_t *buf = NULL;
		struct ctrl_message m;

		k = poll(&pfd, 1, BUS_CTRL_TIMEOUT_MSEC);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ETIMEDOUT;
		k = ctrl_recv(bus, &buf, fds, &n_fds, false);
		if (k == -EAGAIN || k == -EINTR)
			continue;
		if (k <= 0)
			return ctrl_fail(bus);
		if (ctrl_message_decode(&m, buf, (size_t)k, n_fds) < 0) {
			/* a broker that speaks garbage is treated as gone */
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			(void)ctrl_fail(bus);
			return -EPROTO;
		}
		if (m.hdr.type == CTRL_TYPE_SIGNAL) {
			ctrl_queue(bus, buf, (size_t)k, fds, n_fds);
			free(buf);
			bus_kick(bus);
			continue;
		}
		if (m.hdr.serial != serial) {
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			continue;
		}
		ret->buf = buf;
		ret->msg = m;
		memcpy(ret->fds, fds, sizeof(int) * n_fds);
		ret->n_fds = n_fds;
		if (m.hdr.type == CTRL_TYPE_ERROR) {
			struct ctrl_reader r;
			const char *name = NULL, *text = NULL;

			ctrl_reader_init(&r, &ret->msg);
			if (ctrl_read_string(&r, &name, NULL) >= 0)
				snprintf(bus->error_name, sizeof(bus->error_name), "%s", name);
			if (ctrl_read_string(&r, &text, NULL) >= 0)
				snprintf(bus->error_message, sizeof(bus->error_message), "%s", text);
			ctrl_reply_done(ret);
			return bus_ctrl_error_to_errno(bus->error_name);
		}
		return 0;
	}
}

int bus_ctrl_request(brokerd_bus *bus, uint16_t op, const char *name, uint32_t u,
		     struct ctrl_reply *ret)
{
	const struct ctrl_op_info *info = ctrl_op_get(op);
	const char *sig = info ? info->request_sig : NULL;
	struct ctrl_writer w;
	int k;

	if (!sig || (strcmp(sig, "") && strcmp(sig, "s") && strcmp(sig, "u") && strcmp(sig, "su")) ||
	    (sig[0] == 's' && !name))
		return -EINVAL;
	k = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, op, 0);
	if (k < 0)
		return k;
	if (sig[0] == 's')
		ctrl_write_string(&w, name);
	if (strchr(sig, 'u'))
		ctrl_write_u32(&w, u);
	k = bus_ctrl_call(bus, &w, ret);
	ctrl_writer_deinit(&w);
	return k;
}

int ctrl_reply_take_fd(struct ctrl_reply *r, unsigned int i)
{
	int fd;

	if (i >= r->n_fds)
		return -1;
	fd = r->fds[i];
	r->fds[i] = -1;
	return fd;
}

/* --- Objects ----------------------------------------------------------------- */

static struct bname *bname_get(brokerd_bus *bus, const char *name, bool create)
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

static void bname_close_chans(brokerd_bus *bus, struct bname *b)
{
	chan_close(&bus->ring, b->sig_recv);
	chan_close(&bus->ring, b->sig_send);
	chan_close(&bus->ring, b->call_recv);
	chan_close(&bus->ring, b->call_send);
	b->sig_recv = b->sig_send = b->call_recv = b->call_send = NULL;
}

/* frees b if nothing refers to it any more */
static void bname_gc(brokerd_bus *bus, struct bname *b)
{
	if (!b || b->n_subs || b->requested || b->sig_recv || b->sig_send || b->call_recv ||
	    b->call_send)
		return;
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->bname == b)
			return;
	retired_close(bus, NULL, b);
	for (struct bname **p = &bus->names; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			break;
		}
	free(b->name);
	free(b);
}

static void peers_clear(brokerd_bus *bus)
{
	struct peer *p;

	while ((p = bus->peers)) {
		bus->peers = p->next;
		chan_close(&bus->ring, p->send);
		free(p);
	}
	bus->n_peers = 0;
}

/* Keeps c receiving until it is drained (see struct retired). */
static void chan_retire(brokerd_bus *bus, struct chan *c)
{
	struct retired *r;

	if (!c)
		return;
	r = calloc(1, sizeof(*r));
	if (!r) {
		chan_close(&bus->ring, c);
		return;
	}
	r->chan = c;
	r->next = bus->retired;
	bus->retired = r;
}

static bool chan_is_retired(brokerd_bus *bus, struct chan *c)
{
	for (struct retired *r = bus->retired; r; r = r->next)
		if (r->chan == c)
			return true;
	return false;
}

/* Closes retired channels: c only, those owned by owner, or all (both NULL). */
static void retired_close(brokerd_bus *bus, struct chan *c, void *owner)
{
	for (struct retired **pp = &bus->retired; *pp;) {
		struct retired *r = *pp;

		if ((c && r->chan != c) || (owner && r->chan->owner != owner)) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		chan_close(&bus->ring, r->chan);
		free(r);
	}
}

brokerd_bus *bus_ref(brokerd_bus *bus)
{
	if (bus)
		bus->n_ref++;
	return bus;
}

static void bus_free(brokerd_bus *bus)
{
	struct ctrl_queued *q;

	ring_deinit(&bus->ring);
	while ((q = bus->cq_head)) {
		bus->cq_head = q->next;
		for (unsigned int i = 0; i < q->n_fds; i++)
			close(q->fds[i]);
		free(q);
	}
	if (bus->epoll_fd >= 0)
		close(bus->epoll_fd);
	if (bus->timer_fd >= 0)
		close(bus->timer_fd);
	free(bus->path);
	free(bus);
}

brokerd_bus *bus_unref(brokerd_bus *bus)
{
	if (bus && --bus->n_ref == 0)
		bus_free(bus);
	return NULL;
}

struct brokerd_slot *slot_new(brokerd_bus *bus, enum slot_type type, const char *name,
			      const char *member, void *userdata)
{
	struct brokerd_slot *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->bus = bus;
	s->type = type;
	s->userdata = userdata;
	if ((name && !(s->name = strdup(name))) || (member && !(s->member = strdup(member)))) {
		free(s->name);
		free(s);
		return NULL;
	}
	s->next = bus->slots;
	if (bus->slots)
		bus->slots->prev = s;
	bus->slots = s;
	return s;
}

/* Gives s to the caller through ret_slot, or to the bus (floating) without one. */
static int slot_hand_out(struct brokerd_slot *s, brokerd_slot **ret_slot)
{
	s->floating = !ret_slot;
	if (ret_slot)
		*ret_slot = s;
	return 0;
}

static void monitors_clear(brokerd_bus *bus)
{
	struct monitor_chan *m;

	while ((m = bus->monitors)) {
		bus->monitors = m->next;
		chan_close(&bus->ring, m->chan);
		free(m->name);
		free(m);
	}
}

static void slot_unlink(struct brokerd_slot *s)
{
	brokerd_bus *bus = s->bus;

	if (s->prev)
		s->prev->next = s->next;
	else if (bus->slots == s)
		bus->slots = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

static void slot_destroy(struct brokerd_slot *s)
{
	brokerd_bus *bus = s->bus;
	struct bname *b = s->bname;

	if (!bus) {
		/* orphaned by brokerd_bus_close(): only the memory is left */
		free(s->name);
		free(s->member);
		free(s);
		return;
	}
	slot_unlink(s);
	if (s->type == SLOT_SUBSCRIBE && b) {
		if (b->n_subs > 0 && --b->n_subs == 0)
			(void)bname_unsubscribe(bus, b, false);
	}
	if (s->type == SLOT_MONITOR)
		monitors_clear(bus);
	s->bname = NULL;
	bname_gc(bus, b);
	free(s->name);
	free(s->member);
	free(s);
}

_public_ brokerd_slot *brokerd_slot_free(brokerd_slot *slot)
{
	if (slot)
		slot_destroy(slot);
	return NULL;
}

/* --- Channels from capability fds ------------------------------------------- */

static int attach_fd(brokerd_bus *bus, int fd, unsigned int rights, unsigned int kind, void *owner,
		     struct chan **ret)
{
	struct chan *c;
	int k;

	if (fd < 0)
		return -EPROTO;
	k = chan_attach(&bus->ring, fd, rights, (rights & (IOIPC_SUB_RECV | IOIPC_SUB_MONITOR)) ?
			CHMSG_MAX : 0, kind, owner, &c);
	close(fd);
	if (k < 0)
		return k;
	if (c->buf) {
		k = chan_arm(&bus->ring, c);
		if (k < 0) {
			chan_close(&bus->ring, c);
			return k;
		}
	}
	*ret = c;
	return 0;
}

/*
 * We own b (or are queued in its pool): fds[0] receives its calls, fds[1]
 * sends its signals. New caps replace old ones (a pool member promoted to
 * primary owner gets its caps again).
 */
static int bname_take_owner_fds(brokerd_bus *bus, struct bname *b, struct ctrl_reply *r)
{
	struct chan *c;
	int k = 0;

	/* A cap can be revoked before it arrives: then keep what we have. */
	if (r->n_fds > 0) {
		k = attach_fd(bus, ctrl_reply_take_fd(r, 0), IOIPC_SUB_RECV, CHAN_CALL_RECV, b, &c);
		if (k >= 0) {
			chan_retire(bus, b->call_recv);	/* calls already queued there still count */
			b->call_recv = c;
		}
	}
	if (r->n_fds > 1) {
		int k2 = attach_fd(bus, ctrl_reply_take_fd(r, 1), IOIPC_SUB_SEND, CHAN_SIGNAL_SEND, b, &c);

		if (k2 >= 0) {
			chan_close(&bus->ring, b->sig_send);
			b->sig_send = c;
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
static int bname_open_chan(brokerd_bus *bus, struct bname *b, uint16_t op, uint32_t u,
			   unsigned int rights, unsigned int kind, struct chan **chan)
{
	struct ctrl_reply r;
	int k;

	if (*chan)
		return 0;
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	k = bus_ctrl_request(bus, op, b->name, u, &r);
	if (k < 0)
		return k;
	k = attach_fd(bus, ctrl_reply_take_fd(&r, 0), rights, kind, b, chan);
	ctrl_reply_done(&r);
	return k;
}

static int bname_subscribe(brokerd_bus *bus, struct bname *b)
{
	return bname_open_chan(bus, b, CTRL_OP_SUBSCRIBE, 0, IOIPC_SUB_RECV, CHAN_SIGNAL_RECV,
			       &b->sig_recv);
}

/*
 * Ends our subscription to b's signals: detaches the channel and tells
 * brokerd, which stops counting it. With wait, brokerd's answer is awaited
 * (0, or -errno); without (from a destructor), the request goes out and its
 * reply is dropped. Disconnected, there is nobody to tell: a new brokerd
 * knows nothing of it.
 */
static int bname_unsubscribe(brokerd_bus *bus, struct bname *b, bool wait)
{
	struct ctrl_reply r;
	int k;

	chan_close(&bus->ring, b->sig_recv);
	b->sig_recv = NULL;
	if (!bus->connected || !(bus->features & CTRL_FEATURE_CHANNELS))
		return 0;
	k = bus_ctrl_request(bus, CTRL_OP_UNSUBSCRIBE, b->name, 0, wait ? &r : NULL);
	if (k < 0 || !wait)
		return k;
	/* NOT_SUBSCRIBED is fine too: a reload may have revoked it already */
	ctrl_reply_done(&r);
	return 0;
}

static int bname_request(brokerd_bus *bus, struct bname *b, unsigned int flags)
{
	struct ctrl_reply r;
	struct ctrl_reader rd;
	uint32_t result = 0;
	int k;

	k = bus_ctrl_request(bus, CTRL_OP_REQUEST_NAME, b->name, flags, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	k = ctrl_read_u32(&rd, &result);
	if (k >= 0 && (result == CTRL_NAME_PRIMARY_OWNER || result == CTRL_NAME_ALREADY_OWNER ||
		       result == CTRL_NAME_IN_QUEUE))
		k = bname_take_owner_fds(bus, b, &r);	/* IN_QUEUE has a cap with POOL */
	ctrl_reply_done(&r);
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
static int bname_open_call(brokerd_bus *bus, struct bname *b, bool wait)
{
	return bname_open_chan(bus, b, CTRL_OP_OPEN_CALL, wait ? 0 : CTRL_CALL_NO_WAIT, IOIPC_SUB_SEND,
			       CHAN_CALL_SEND, &b->call_send);
}

static struct peer *peer_find(brokerd_bus *bus, uint64_t id)
{
	struct peer *p, **pp;

	for (pp = &bus->peers; (p = *pp); pp = &p->next)
		if (p->id == id) {
			/* most recently used first */
			*pp = p->next;
			p->next = bus->peers;
			bus->peers = p;
			return p;
		}
	return NULL;
}

/*
 * A SEND cap to the inbox of `name` (unique, or well-known: its primary
 * owner), cached per connection id for the BUS_PEERS_MAX most recent peers.
 */
static int peer_get_by_name(brokerd_bus *bus, const char *name, struct peer **ret)
{
	struct ctrl_reply r;
	struct ctrl_reader rd;
	const char *unique = NULL;
	struct peer *p, **pp;
	uint64_t id;
	int k;

	if (ctrl_unique_name_parse(name, &id) >= 0 && (p = peer_find(bus, id))) {
		*ret = p;
		return 0;
	}
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	k = bus_ctrl_request(bus, CTRL_OP_OPEN_INBOX, name, 0, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	if (ctrl_read_string(&rd, &unique, NULL) < 0 || ctrl_unique_name_parse(unique, &id) < 0) {
		ctrl_reply_done(&r);
		return -EPROTO;
	}
	p = peer_find(bus, id);	/* a well-known name of a peer we know */
	if (p) {
		ctrl_reply_done(&r);
		*ret = p;
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		ctrl_reply_done(&r);
		return -ENOMEM;
	}
	k = attach_fd(bus, ctrl_reply_take_fd(&r, 0), IOIPC_SUB_SEND, CHAN_PEER_SEND, p, &p->send);
	ctrl_reply_done(&r);
	if (k < 0) {
		free(p);
		return k;
	}
	p->id = id;
	p->next = bus->peers;
	bus->peers = p;
	if (++bus->n_peers > BUS_PEERS_MAX) {
		/* drop the least recently used */
		for (pp = &bus->peers; (*pp)->next; pp = &(*pp)->next)
			;
		chan_close(&bus->ring, (*pp)->send);
		free(*pp);
		*pp = NULL;
		bus->n_peers--;
	}
	*ret = p;
	return 0;
}

static int peer_get(brokerd_bus *bus, uint64_t id, struct peer **ret)
{
	char unique[CTRL_UNIQUE_NAME_MAX];

	ctrl_unique_name_format(id, unique);
	return peer_get_by_name(bus, unique, ret);
}

static void peer_drop(brokerd_bus *bus, uint64_t id)
{
	for (struct peer **pp = &bus->peers; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			struct peer *p = *pp;

			*pp = p->next;
			chan_close(&bus->ring, p->send);
			free(p);
			bus->n_peers--;
			return;
		}
}

static int chan_send_msg(brokerd_bus *bus, struct chan *c, const struct chmsg *m)
{
	uint8_t *buf;
	int k;

	buf = malloc(CHMSG_MAX);
	if (!buf)
		return -ENOMEM;
	k = chmsg_encode(m, buf, CHMSG_MAX);
	if (k >= 0)
		k = chan_send(&bus->ring, c, buf, (size_t)k);
	free(buf);
	return k < 0 ? k : 0;
}

static uint32_t bus_next_serial(brokerd_bus *bus)
{
	if (++bus->msg_serial == 0)
		bus->msg_serial = 1;
	return bus->msg_serial;
}

/* --- Connecting ------------------------------------------------------------- */

static void bus_set_state(brokerd_bus *bus, int state)
{
	if (bus->state_handler)
		bus->state_handler(bus, state, bus->state_userdata);
}

static void call_complete(struct brokerd_slot *s, brokerd_msg *msg, int error);

static void bus_disconnect(brokerd_bus *bus, bool schedule_reconnect)
{
	bool was = bus->connected;
	struct brokerd_slot *s, *next;

	if (bus->ctrl_fd >= 0) {
		epoll_ctl(bus->epoll_fd, EPOLL_CTL_DEL, bus->ctrl_fd, NULL);
		close(bus->ctrl_fd);
	}
	bus->ctrl_fd = -1;
	bus->connected = false;
	bus->ctrl_failed = false;
	chan_close(&bus->ring, bus->inbox);
	bus->inbox = NULL;
	peers_clear(bus);
	retired_close(bus, NULL, NULL);
	for (struct bname *b = bus->names; b; b = b->next)
		bname_close_chans(bus, b);
	monitors_clear(bus);
	bus->unique_name[0] = 0;
	bus->id = 0;
	if (schedule_reconnect && bus->reconnect && !bus->closed) {
		bus->backoff_msec = bus->backoff_msec ? bus->backoff_msec : BUS_RECONNECT_MIN_MSEC;
		bus->reconnect_at = now_usec() + bus->backoff_msec * 1000ULL;
		bus_kick(bus);
	}
	if (!was)
		return;
	/* nobody will answer the calls in flight */
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type == SLOT_CALL && s->serial) {
			call_complete(s, NULL, -ECONNRESET);
			next = bus->slots;	/* the handler may have freed any slot */
		}
	}
	bus_set_state(bus, BROKERD_STATE_DISCONNECTED);
}

static int bus_hello(brokerd_bus *bus)
{
	struct ctrl_reply r;
	struct ctrl_reader rd;
	const char *unique = NULL;
	uint64_t id = 0;
	uint32_t features = 0;
	int k;

	k = bus_ctrl_request(bus, CTRL_OP_HELLO, NULL, CTRL_HELLO_NAME_EVENTS, &r);
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	if (ctrl_read_string(&rd, &unique, NULL) < 0 || ctrl_read_u64(&rd, &id) < 0 ||
	    ctrl_read_u32(&rd, &features) < 0) {
		ctrl_reply_done(&r);
		return -EPROTO;
	}
	snprintf(bus->unique_name, sizeof(bus->unique_name), "%s", unique);
	bus->id = id;
	bus->features = features;
	k = 0;
	if (features & CTRL_FEATURE_CHANNELS)
		k = attach_fd(bus, ctrl_reply_take_fd(&r, 0), IOIPC_SUB_RECV, CHAN_INBOX, NULL,
			      &bus->inbox);
	ctrl_reply_done(&r);
	return k;
}

/* (Re)connects and restores names and subscriptions. */
static int bus_connect(brokerd_bus *bus)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN };
	int fd, k;

	if (strlen(bus->path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, bus->path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		k = -errno;
		close(fd);
		return k;
	}
	ev.data.fd = fd;
	if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		k = -errno;
		close(fd);
		return k;
	}
	bus->ctrl_fd = fd;
	bus->connected = true;
	k = bus_hello(bus);
	if (k < 0)
		goto fail;
	for (struct bname *b = bus->names; b; b = b->next) {
		if (b->requested) {
			k = bname_request(bus, b, b->req_flags);
			if (k < 0 && k != -EEXIST)
				goto fail;
		}
		if (b->n_subs) {
			k = bname_subscribe(bus, b);
			if (k < 0 && k != -EACCES)
				goto fail;
		}
	}
	bus->backoff_msec = 0;
	bus->reconnect_at = 0;
	return 0;
fail:
	bus->connected = false;	/* silently: the caller decides */
	bus_disconnect(bus, false);
	return k;
}

static int bus_new(brokerd_bus **ret, const char *path)
{
	struct epoll_event ev = { .events = EPOLLIN };
	brokerd_bus *bus;
	int k;

	bus = calloc(1, sizeof(*bus));
	if (!bus)
		return -ENOMEM;
	bus->n_ref = 1;
	bus->ctrl_fd = bus->epoll_fd = bus->timer_fd = -1;
	bus->ring.efd = -1;
	bus->reconnect = true;
	bus->cq_tail = &bus->cq_head;
	bus->path = strdup(path);
	if (!bus->path) {
		k = -ENOMEM;
		goto fail;
	}
	k = ring_init(&bus->ring, 64);
	if (k < 0)
		goto fail;
	bus->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	bus->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (bus->epoll_fd < 0 || bus->timer_fd < 0) {
		k = -errno;
		goto fail;
	}
	ev.data.fd = bus->ring.efd;
	if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, bus->ring.efd, &ev) < 0) {
		k = -errno;
		goto fail;
	}
	ev.data.fd = bus->timer_fd;
	if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, bus->timer_fd, &ev) < 0) {
		k = -errno;
		goto fail;
	}
	k = bus_connect(bus);
	if (k < 0)
		goto fail;
	*ret = bus;
	return 0;
fail:
	bus_free(bus);
	return k;
}

_public_ int brokerd_bus_open(brokerd_bus **ret, const char *path)
{
	if (!ret || !path || path[0] != '/')
		return -EINVAL;
	return bus_new(ret, path);
}

_public_ int brokerd_bus_open_system(brokerd_bus **ret)
{
	const char *p = secure_getenv(BROKERD_SOCKET_ENV);

	if (!ret)
		return -EINVAL;
	return bus_new(ret, p && p[0] == '/' ? p : BROKERD_SYSTEM_SOCKET);
}

/*
 * Stops taking calls and answers those already taken but not dispatched with
 * an error, so that their callers learn at once instead of timing out.
 */
static void bus_drain_calls(brokerd_bus *bus)
{
	for (struct bname *b = bus->names; b; b = b->next) {
		struct chan *c = b->call_recv;
		const struct ioipc_msg_info *info;
		const void *payload;
		brokerd_msg *msg;
		struct chmsg m;
		size_t len;

		if (!c)
			continue;
		chan_cancel_wait(&bus->ring, c);
		if (!c->ready)
			continue;
		ring_unready(&bus->ring, c);
		if (chan_message(c, &info, &payload, &len) < 0 || chmsg_decode(&m, payload, len) < 0 ||
		    m.type != CHMSG_CALL)
			continue;
		msg = msg_new(bus, &m, info, b->name);
		if (msg)
			brokerd_msg_reply_error(msg, BROKERD_ERROR_DISCONNECTED,
						"the service closed its connection");
		brokerd_msg_unref(msg);
	}
}

_public_ brokerd_bus *brokerd_bus_close(brokerd_bus *bus)
{
	struct brokerd_slot *s;
	struct bname *b;

	if (!bus || bus->closed)
		return NULL;
	bus->exit = true;	/* no call channel is re-armed from here on */
	if (bus->connected)
		bus_drain_calls(bus);
	brokerd_bus_detach_event(bus);
	bus->closed = true;
	bus->reconnect = false;
	bus->state_handler = NULL;	/* closing is not news to the one closing */
	bus_disconnect(bus, false);
	while ((s = bus->slots)) {
		if (s->floating) {
			slot_destroy(s);
			continue;
		}
		/* the caller still holds it and frees it later: orphan it */
		slot_unlink(s);
		s->bname = NULL;
		s->bus = NULL;
	}
	while ((b = bus->names)) {
		bus->names = b->next;
		free(b->name);
		free(b);
	}
	bus_unref(bus);
	return NULL;
}

_public_ int brokerd_bus_get_unique_name(brokerd_bus *bus, const char **ret)
{
	if (!bus || !ret)
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	*ret = bus->unique_name;
	return 0;
}

_public_ int brokerd_bus_is_connected(brokerd_bus *bus)
{
	if (!bus)
		return -EINVAL;
	return bus->connected;
}

_public_ int brokerd_bus_set_reconnect(brokerd_bus *bus, int enable)
{
	if (!bus || bus->closed)
		return -EINVAL;
	bus->reconnect = !!enable;
	if (!enable)
		bus->reconnect_at = 0;
	return 0;
}

_public_ int brokerd_bus_set_state_handler(brokerd_bus *bus, brokerd_state_handler_t handler,
					   void *userdata)
{
	if (!bus || bus->closed)
		return -EINVAL;
	bus->state_handler = handler;
	bus->state_userdata = userdata;
	return 0;
}

/* --- Names --------------------------------------------------------------------- */

_public_ int brokerd_bus_request_name(brokerd_bus *bus, const char *name, unsigned int flags)
{
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name) ||
	    (flags & ~CTRL_NAME_FLAGS_ALL))
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
	struct ctrl_reply r;
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
	ctrl_reply_done(&r);
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

_public_ int brokerd_bus_watch_name(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				    brokerd_name_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;

	if (!bus || bus->closed || !handler || (name && !ctrl_name_is_valid_wellknown(name)))
		return -EINVAL;
	s = slot_new(bus, SLOT_WATCH, name, NULL, userdata);
	if (!s)
		return -ENOMEM;
	s->handler.name = handler;
	return slot_hand_out(s, ret_slot);
}

_public_ int brokerd_bus_get_name_owner(brokerd_bus *bus, const char *name, char *buf, size_t size)
{
	struct ctrl_reply r;
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
	ctrl_reply_done(&r);
	return k < 0 ? k : 0;
}

/* --- Signals --------------------------------------------------------------------- */

_public_ int brokerd_bus_emit_signal(brokerd_bus *bus, const char *name, const char *member,
				     const void *body, size_t size)
{
	struct chmsg m = { .type = CHMSG_SIGNAL, .member = member, .destination = "",
			   .body = body, .body_len = (uint32_t)size };
	struct bname *b;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name) ||
	    !ctrl_name_is_valid_member(member) || (size && !body) || size > CHMSG_MAX)
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	if (!(bus->features & CTRL_FEATURE_CHANNELS))
		return -EOPNOTSUPP;
	b = bname_get(bus, name, false);
	if (!b || !b->sig_send)
		return -EPERM;	/* only the name's owner may emit its signals */
	m.serial = bus_next_serial(bus);
	return chan_send_msg(bus, b->sig_send, &m);
}

_public_ int brokerd_bus_send_signal(brokerd_bus *bus, const char *destination, const char *member,
				     const void *body, size_t size)
{
	struct chmsg m = { .type = CHMSG_SIGNAL, .member = member, .body = body,
			   .body_len = (uint32_t)size };
	struct peer *p;
	int k;

	if (!bus || bus->closed || !destination ||
	    (!ctrl_name_is_valid_wellknown(destination) && !ctrl_name_is_valid_unique(destination)) ||
	    !ctrl_name_is_valid_member(member) || (size && !body) || size > CHMSG_MAX)
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	k = peer_get_by_name(bus, destination, &p);
	if (k < 0)
		return k;
	{
		char unique[CTRL_UNIQUE_NAME_MAX];

		ctrl_unique_name_format(p->id, unique);
		m.destination = unique;
		m.serial = bus_next_serial(bus);
		k = chan_send_msg(bus, p->send, &m);
	}
	if (k == -ENOENT || k == -EACCES || k == -EPIPE)
		peer_drop(bus, p->id);
	return k;
}

_public_ int brokerd_bus_subscribe(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				   const char *member_filter, brokerd_msg_handler_t handler,
				   void *userdata)
{
	struct brokerd_slot *s;
	struct bname *b;
	int k;

	if (!bus || bus->closed || (name && !ctrl_name_is_valid_wellknown(name)) ||
	    !filter_is_valid(member_filter) || !handler)
		return -EINVAL;
	if (!name) {
		/* signals sent to this connection's inbox: nothing to ask brokerd */
		s = slot_new(bus, SLOT_SUBSCRIBE, NULL,
			     member_filter && *member_filter ? member_filter : NULL, userdata);
		if (!s)
			return -ENOMEM;
		s->handler.msg = handler;
		return slot_hand_out(s, ret_slot);
	}
	if (!bus->connected)
		return -ENOTCONN;
	b = bname_get(bus, name, true);
	if (!b)
		return -ENOMEM;
	k = bname_subscribe(bus, b);
	if (k < 0) {
		bname_gc(bus, b);
		return k;
	}
	s = slot_new(bus, SLOT_SUBSCRIBE, name,
		     member_filter && *member_filter ? member_filter : NULL, userdata);
	if (!s) {
		if (!b->n_subs)
			(void)bname_unsubscribe(bus, b, false);
		bname_gc(bus, b);
		return -ENOMEM;
	}
	s->handler.msg = handler;
	s->bname = b;
	b->n_subs++;
	return slot_hand_out(s, ret_slot);
}

_public_ int brokerd_bus_unsubscribe(brokerd_bus *bus, const char *name)
{
	struct brokerd_slot *s, *next;
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name))
		return -EINVAL;
	b = bname_get(bus, name, false);
	if (!b || !b->n_subs)
		return -ENOENT;
	/* the caller's slots go quiet (it frees them), the bus's own go now */
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type != SLOT_SUBSCRIBE || s->bname != b)
			continue;
		s->bname = NULL;
		if (s->floating)
			slot_destroy(s);
	}
	b->n_subs = 0;	/* not subscribed again after a reconnect */
	k = bname_unsubscribe(bus, b, true);
	bname_gc(bus, b);
	return k;
}

/* --- Calls ------------------------------------------------------------------------- */

static void call_complete(struct brokerd_slot *s, brokerd_msg *msg, int error)
{
	brokerd_reply_handler_t h = s->handler.reply;
	void *userdata = s->userdata;
	bool floating = s->floating;

	s->serial = 0;		/* done: no longer pending */
	s->deadline = 0;
	if (floating)
		slot_destroy(s);
	if (h)
		h(msg, error, userdata);
}

_public_ int brokerd_bus_call_async(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				    const char *member, const void *body, size_t size,
				    uint64_t timeout_usec, brokerd_reply_handler_t handler,
				    void *userdata)
{
	struct chmsg m = { .type = CHMSG_CALL, .member = member, .destination = "",
			   .body = body, .body_len = (uint32_t)size };
	struct brokerd_slot *s;
	struct bname *b;
	int k;

	if (!bus || bus->closed || !ctrl_name_is_valid_wellknown(name) ||
	    !ctrl_name_is_valid_member(member) || (size && !body) || size > CHMSG_MAX)
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
	s = slot_new(bus, SLOT_CALL, name, member, userdata);
	if (!s) {
		bname_gc(bus, b);
		return -ENOMEM;
	}
	s->bname = b;
	s->handler.reply = handler;
	s->serial = m.serial = bus_next_serial(bus);
	if (!handler)
		m.flags = CHMSG_F_NO_REPLY_EXPECTED;
	s->deadline = now_usec() + (timeout_usec ? timeout_usec : BUS_DEFAULT_TIMEOUT_USEC);
	k = chan_send_msg(bus, b->call_send, &m);
	if (k == -EACCES || k == -ENOENT || k == -EPIPE) {
		/* capability revoked or channel gone: open it afresh once */
		chan_close(&bus->ring, b->call_send);
		b->call_send = NULL;
		k = bname_open_call(bus, b, bus->sync_opening);
		if (k >= 0)
			k = chan_send_msg(bus, b->call_send, &m);
	}
	if (k < 0 || !handler) {
		slot_destroy(s);
		return k < 0 ? k : 0;
	}
	return slot_hand_out(s, ret_slot);
}

struct sync_call {
	bool done;
	int error;
	brokerd_msg *reply;
};

static int sync_call_handler(brokerd_msg *msg, int error, void *userdata)
{
	struct sync_call *c = userdata;

	c->done = true;
	c->error = error;
	c->reply = brokerd_msg_ref(msg);
	return 0;
}

static int bus_process_internal(brokerd_bus *bus);

_public_ int brokerd_bus_call(brokerd_bus *bus, const char *name, const char *member,
			      const void *body, size_t size, uint64_t timeout_usec,
			      brokerd_msg **ret_reply)
{
	struct sync_call c = { 0 };
	struct brokerd_slot *s = NULL;
	int k;

	if (!bus || bus->closed)
		return -EINVAL;
	bus->sync_opening = true;
	k = brokerd_bus_call_async(bus, &s, name, member, body, size, timeout_usec,
				   sync_call_handler, &c);
	bus->sync_opening = false;
	if (k < 0)
		return k;
	bus_ref(bus);
	bus->sync_depth++;
	while (!c.done) {
		k = bus_process_internal(bus);
		if (k < 0)
			break;
		if (c.done)
			break;
		if (k == 0)
			brokerd_bus_wait(bus, UINT64_MAX);
	}
	bus->sync_depth--;
	/* what we skipped while waiting still needs dispatching */
	if (bus->ring.ready_head || bus->cq_head)
		bus_kick(bus);
	brokerd_slot_free(s);
	bus_unref(bus);
	if (!c.done)
		return k < 0 ? k : -EIO;
	if (ret_reply)
		*ret_reply = c.reply;
	else
		brokerd_msg_unref(c.reply);
	return c.error;
}

/* --- Methods ------------------------------------------------------------------------ */

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

static int msg_send_reply(brokerd_msg *call, int type, const char *member, const void *body,
			  size_t size)
{
	brokerd_bus *bus = call->bus;
	struct chmsg m = { .type = (uint8_t)type, .member = member, .destination = call->sender,
			   .body = body, .body_len = (uint32_t)size };
	struct peer *p;
	int k;

	if (call->type != BROKERD_MSG_CALL || call->replied ||
	    (call->flags & CHMSG_F_NO_REPLY_EXPECTED))
		return -EBADMSG;
	if (bus->closed || !bus->connected)
		return -ENOTCONN;
	if (!call->creds.id)
		return -ENXIO;
	k = peer_get(bus, call->creds.id, &p);
	if (k < 0)
		return k;
	m.serial = bus_next_serial(bus);
	m.reply_serial = call->serial;
	k = chan_send_msg(bus, p->send, &m);
	if (k == -ENOENT || k == -EACCES)
		peer_drop(bus, call->creds.id);
	call->replied = true;	/* even if sending failed: one answer per call */
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

/* --- Dispatch ------------------------------------------------------------------------- */

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
	if (!match)
		match = fallback;
	if (!match) {
		brokerd_msg_reply_error(msg, BROKERD_ERROR_UNKNOWN_METHOD, msg->member);
		return;
	}
	k = match->handler.msg(msg, match->userdata);
	/* a handler that kept a reference answers later (or never) */
	if (msg->replied || (msg->flags & CHMSG_F_NO_REPLY_EXPECTED) || msg->n_ref > 1)
		return;
	if (k < 0) {
		char text[64];

		snprintf(text, sizeof(text), "%s", strerror(-k));
		brokerd_msg_reply_error(msg, BROKERD_ERROR_FAILED, text);
	} else {
		brokerd_msg_reply(msg, NULL, 0);
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
}

static void dispatch_reply(brokerd_bus *bus, brokerd_msg *msg)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->serial && s->serial == msg->reply_serial) {
			call_complete(s, msg, msg->type == BROKERD_MSG_ERROR ? -EREMOTEIO : 0);
			return;
		}
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

/* A receive completed on c: decode, re-arm, dispatch. */
static void dispatch_chan(brokerd_bus *bus, struct chan *c)
{
	const struct ioipc_msg_info *info;
	const void *payload;
	struct bname *b = NULL;
	struct monitor_chan *mc = NULL;
	const char *name = "";
	brokerd_msg *msg = NULL;
	struct chmsg m;
	size_t len;
	int k;

	if (c->kind == CHAN_CALL_RECV || c->kind == CHAN_SIGNAL_RECV) {
		b = c->owner;
		name = b->name;
	} else if (c->kind == CHAN_MONITOR) {
		mc = c->owner;
		name = mc->name;
	}
	k = chan_message(c, &info, &payload, &len);
	if (k >= 0)
		k = chmsg_decode(&m, payload, len);
	if (k < 0 && c->kind == CHAN_CALL_RECV && c->res >= 0 && !bus->exit)
		chan_arm(&bus->ring, c);	/* a malformed call: take the next one */
	if (k >= 0) {
		msg = msg_new(bus, &m, info, name);
		if (!msg)
			k = -ENOMEM;
	}
	if (c->res < 0 && c->res != -EINTR && c->res != -ETIME) {
		/* detached, revoked or unsupported: re-arming would fail the same way */
		if (mc)
			dispatch_monitor(bus, mc, NULL, c->res);
		if (chan_is_retired(bus, c)) {
			retired_close(bus, c, NULL);	/* drained */
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
		chan_arm(&bus->ring, c);
	if (k < 0) {
		/* malformed or truncated: the sender's bug, not ours; drop it */
		if (mc)
			dispatch_monitor(bus, mc, NULL, k);
		return;
	}
	bus_ref(bus);
	switch (c->kind) {
	case CHAN_INBOX:
		if (msg->type == BROKERD_MSG_REPLY || msg->type == BROKERD_MSG_ERROR)
			dispatch_reply(bus, msg);
		else if (msg->type == BROKERD_MSG_SIGNAL)
			dispatch_signal(bus, NULL, msg);	/* sent to us directly */
		break;
	case CHAN_CALL_RECV:
		if (msg->type == BROKERD_MSG_CALL)
			dispatch_call(bus, msg);
		/* the handler may have released the name or closed the bus */
		if (!bus->closed && !bus->exit && (b->call_recv == c || chan_is_retired(bus, c)))
			chan_arm(&bus->ring, c);
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
	brokerd_msg_unref(msg);
	bus_unref(bus);
}

static void dispatch_name_owner_changed(brokerd_bus *bus, const char *name, const char *old_owner,
					const char *new_owner)
{
	struct brokerd_slot *s, *next;
	struct bname *b = bname_get(bus, name, false);
	uint64_t id;

	if (name[0] == ':' && !new_owner[0] && ctrl_unique_name_parse(name, &id) >= 0)
		peer_drop(bus, id);
	if (b && !new_owner[0]) {
		/* the name's last owner is gone: so are the calls it was serving */
		chan_close(&bus->ring, b->call_send);
		b->call_send = NULL;
		for (s = bus->slots; s; s = next) {
			next = s->next;
			if (s->type == SLOT_CALL && s->serial && s->bname == b) {
				call_complete(s, NULL, -ECONNRESET);
				next = bus->slots;
			}
		}
	}
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type == SLOT_WATCH && (!s->name || strcmp(s->name, name) == 0))
			s->handler.name(bus, name, old_owner, new_owner, s->userdata);
	}
}

static int monitor_add_chan(brokerd_bus *bus, const char *name, unsigned int kind, int fd)
{
	struct monitor_chan *mc = calloc(1, sizeof(*mc));
	int k;

	if (!mc || !(mc->name = strdup(name))) {
		free(mc);
		close(fd);
		return -ENOMEM;
	}
	mc->kind = kind;
	k = attach_fd(bus, fd, IOIPC_SUB_MONITOR, CHAN_MONITOR, mc, &mc->chan);
	if (k < 0) {
		free(mc->name);
		free(mc);
		return k;
	}
	mc->next = bus->monitors;
	bus->monitors = mc;
	return 0;
}

/* Takes ownership of fds. */
static int bus_dispatch_ctrl(brokerd_bus *bus, const uint8_t *buf, size_t len, int *fds,
			     unsigned int n_fds)
{
	struct ctrl_message m;
	struct ctrl_reader r;
	const char *a = NULL, *o = NULL, *n = NULL;
	int k;

	k = ctrl_message_decode(&m, buf, len, n_fds);
	if (k < 0 || m.hdr.type != CTRL_TYPE_SIGNAL)
		goto done;
	ctrl_reader_init(&r, &m);
	switch (m.hdr.code) {
	case CTRL_SIGNAL_NAME_OWNER_CHANGED:
		if (ctrl_read_string(&r, &a, NULL) >= 0 && ctrl_read_string(&r, &o, NULL) >= 0 &&
		    ctrl_read_string(&r, &n, NULL) >= 0)
			dispatch_name_owner_changed(bus, a, o, n);
		break;
	case CTRL_SIGNAL_NAME_ACQUIRED:
		if (ctrl_read_string(&r, &a, NULL) >= 0) {
			struct bname *b = bname_get(bus, a, false);
			struct ctrl_reply rep = { .n_fds = n_fds };

			memcpy(rep.fds, fds, sizeof(int) * n_fds);
			n_fds = 0;
			if (b)
				bname_take_owner_fds(bus, b, &rep);
			ctrl_reply_done(&rep);
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

		if (n_fds >= 1 && ctrl_read_string(&r, &a, NULL) >= 0 &&
		    ctrl_read_u32(&r, &kind) >= 0) {
			monitor_add_chan(bus, a, kind, fds[0]);
			fds[0] = -1;
		}
		break;
	}
	case CTRL_SIGNAL_CAPABILITY_REVOKED:
		/*
		 * The kernel has already detached what we attached through the
		 * revoked caps: receives in flight end with -EACCES (see
		 * dispatch_chan), sends fail and reopen through brokerd,
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

static void bus_update_timer(brokerd_bus *bus)
{
	struct itimerspec its = { 0 };
	uint64_t next = UINT64_MAX;

	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->serial && s->deadline < next)
			next = s->deadline;
	if (bus->reconnect_at && bus->reconnect_at < next)
		next = bus->reconnect_at;
	if (next != UINT64_MAX) {
		if (next == 0)
			next = 1;
		its.it_value.tv_sec = (time_t)(next / 1000000ULL);
		its.it_value.tv_nsec = (long)(next % 1000000ULL) * 1000L;
	}
	timerfd_settime(bus->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int bus_process_timeouts(brokerd_bus *bus)
{
	uint64_t now = now_usec(), v;
	struct brokerd_slot *s, *next;
	int n = 0;

	(void)!read(bus->timer_fd, &v, sizeof(v));
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type == SLOT_CALL && s->serial && s->deadline <= now) {
			call_complete(s, NULL, -ETIMEDOUT);
			n++;
			/* the handler may have freed any slot: start over */
			next = bus->slots;
		}
	}
	if (!bus->connected && bus->reconnect && bus->reconnect_at && bus->reconnect_at <= now &&
	    !bus->closed) {
		n++;
		if (bus_connect(bus) >= 0) {
			bus_set_state(bus, BROKERD_STATE_CONNECTED);
		} else {
			bus->backoff_msec = bus->backoff_msec * 2 > BUS_RECONNECT_MAX_MSEC ?
					    BUS_RECONNECT_MAX_MSEC : bus->backoff_msec * 2;
			bus->reconnect_at = now_usec() + bus->backoff_msec * 1000ULL;
		}
	}
	return n;
}

static int bus_process_internal(brokerd_bus *bus)
{
	struct ctrl_queued *q;
	struct chan *c;
	int n = 0, k;

	if (bus->closed)
		return -ENOTCONN;
	ring_ack(&bus->ring);
	ring_reap(&bus->ring);

	/* broker signals queued during control requests */
	while ((q = bus->cq_head)) {
		bus->cq_head = q->next;
		if (!bus->cq_head)
			bus->cq_tail = &bus->cq_head;
		n += bus_dispatch_ctrl(bus, q->data, q->len, q->fds, q->n_fds);
		free(q);
	}
	/* a control request found the connection broken */
	if (bus->connected && bus->ctrl_failed) {
		bus_disconnect(bus, true);
		n++;
	}
	/* the control socket */
	while (bus->connected) {
		int fds[CTRL_FDS_MAX];
		unsigned int n_fds = 0;
		uint8_t *buf = NULL;

		k = ctrl_recv(bus, &buf, fds, &n_fds, false);
		if (k == -EAGAIN || k == -EINTR)
			break;
		if (k <= 0 && k != -EBADMSG) {
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			bus_disconnect(bus, true);
			n++;
			break;
		}
		if (k > 0)
			n += bus_dispatch_ctrl(bus, buf, (size_t)k, fds, n_fds);
		free(buf);
	}
	/* channels: inside a synchronous call only the inbox, for the reply; a
	 * budget per call so that a flood cannot starve the caller's loop */
	for (unsigned int budget = 64; budget > 0; budget--) {
		c = bus->sync_depth ? ring_pop_ready_kind(&bus->ring, CHAN_INBOX) :
				      ring_pop_ready(&bus->ring);
		if (!c)
			break;
		dispatch_chan(bus, c);
		n++;
		if (bus->closed)
			return n;
		ring_reap(&bus->ring);
		if (budget == 1 && bus->ring.ready_head)
			bus_kick(bus);	/* come back for the rest */
	}
	n += bus_process_timeouts(bus);
	if (!bus->closed)
		bus_update_timer(bus);
	return n;
}

/* --- Event loop ------------------------------------------------------------------------ */

_public_ int brokerd_bus_get_fd(brokerd_bus *bus)
{
	if (!bus || bus->closed)
		return -EINVAL;
	return bus->epoll_fd;
}

_public_ int brokerd_bus_process(brokerd_bus *bus)
{
	int k;

	if (!bus || bus->closed)
		return -EINVAL;
	bus_ref(bus);
	k = bus_process_internal(bus);
	bus_unref(bus);
	return k;
}

_public_ int brokerd_bus_wait(brokerd_bus *bus, uint64_t timeout_usec)
{
	struct pollfd pfd;
	int k, ms;

	if (!bus || bus->closed)
		return -EINVAL;
	/* inside a synchronous call only the inbox counts: other ready
	 * channels wait for the next dispatch */
	if (bus->cq_head || bus->ctrl_failed || (bus->sync_depth ? ring_has_ready_kind(&bus->ring, CHAN_INBOX) :
				  bus->ring.ready_head != NULL))
		return 1;
	/* the timer in the epoll set covers call deadlines and reconnects */
	bus_update_timer(bus);
	pfd = (struct pollfd){ .fd = bus->epoll_fd, .events = POLLIN };
	ms = timeout_usec == UINT64_MAX ? -1 :
	     timeout_usec / 1000 > INT32_MAX ? INT32_MAX : (int)((timeout_usec + 999) / 1000);
	k = poll(&pfd, 1, ms);
	if (k < 0)
		return errno == EINTR ? 0 : -errno;
	return k;
}

_public_ int brokerd_bus_exit(brokerd_bus *bus, int code)
{
	if (!bus || bus->closed)
		return -EINVAL;
	bus->exit = true;
	bus->exit_code = code;
	return 0;
}

_public_ int brokerd_bus_run(brokerd_bus *bus)
{
	int k = 0;

	if (!bus || bus->closed)
		return -EINVAL;
	bus_ref(bus);
	bus->exit = false;
	for (struct bname *b = bus->names; b; b = b->next)
		if (b->call_recv)
			chan_arm(&bus->ring, b->call_recv);	/* stopped by an earlier exit */
	while (!bus->exit && !bus->closed) {
		k = bus_process_internal(bus);
		if (k < 0)
			break;
		if (bus->exit || bus->closed)
			break;
		if (k == 0 && !bus->connected && !bus->reconnect) {
			k = -ENOTCONN;
			break;
		}
		if (k == 0) {
			k = brokerd_bus_wait(bus, UINT64_MAX);
			if (k < 0)
				break;
		}
	}
	if (bus->exit)
		k = bus->exit_code;
	bus_unref(bus);
	return k;
}

/* --- Listings -------------------------------------------------------------------------- */

int bus_list(brokerd_bus *bus, uint16_t op, uint32_t flags, uint32_t page_size, bus_list_page_t page,
	     void *userdata)
{
	char cursor[CTRL_CURSOR_MAX + 1] = "";
	uint16_t old_op = op == CTRL_OP_LIST_NAMES_PAGE ? CTRL_OP_LIST_NAMES : CTRL_OP_LIST_PEERS;
	bool paged = true;
	int k;

	if (!bus || bus->closed || !page || (op != CTRL_OP_LIST_NAMES_PAGE && op != CTRL_OP_LIST_PEERS_PAGE))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	for (bool first = true;; first = false) {
		struct ctrl_writer w;
		struct ctrl_reply r;
		struct ctrl_reader rd;
		const char *next = "";
		uint32_t n = 0;

		k = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, paged ? op : old_op, 0);
		if (k < 0)
			return k;
		ctrl_write_u32(&w, flags);
		if (paged) {
			ctrl_write_u32(&w, page_size);
			ctrl_write_string(&w, cursor);
		}
		k = bus_ctrl_call(bus, &w, &r);
		ctrl_writer_deinit(&w);
		if (k < 0 && paged && first && strcmp(bus->error_name, CTRL_ERROR_UNKNOWN_OP) == 0) {
			paged = false;	/* a brokerd from before paging: one reply of at most 64 KiB */
			continue;
		}
		if (k < 0)
			return k;
		ctrl_reader_init(&rd, &r.msg);
		k = ctrl_read_array(&rd, &n);
		if (k >= 0)
			k = page(&rd, n, userdata);
		if (k >= 0 && paged)
			k = ctrl_read_string(&rd, &next, NULL);
		/* a page that does not move on would make us loop forever */
		if (k >= 0 && *next && (n == 0 || strlen(next) > CTRL_CURSOR_MAX || strcmp(next, cursor) == 0))
			k = -EPROTO;
		if (k >= 0)
			snprintf(cursor, sizeof(cursor), "%s", next);
		ctrl_reply_done(&r);
		if (k < 0 || !paged || !*cursor)
			return k < 0 ? k : 0;
	}
}

struct name_list {
	char **v;
	size_t n;
};

static int name_list_page(struct ctrl_reader *rd, uint32_t n, void *userdata)
{
	struct name_list *l = userdata;
	char **v = realloc(l->v, (l->n + n + 1) * sizeof(*v));
	const char *s;
	int k;

	if (!v)
		return -ENOMEM;
	l->v = v;
	for (uint32_t i = 0; i < n; i++) {
		k = ctrl_read_string(rd, &s, NULL);
		if (k < 0)
			return k;
		l->v[l->n] = strdup(s);
		if (!l->v[l->n])
			return -ENOMEM;
		l->v[++l->n] = NULL;
	}
	return 0;
}

int bus_list_names(brokerd_bus *bus, uint32_t flags, uint32_t page_size, char ***ret)
{
	struct name_list l = { 0 };
	int k;

	if (!ret)
		return -EINVAL;
	k = bus_list(bus, CTRL_OP_LIST_NAMES_PAGE, flags, page_size, name_list_page, &l);
	if (k >= 0 && !l.v && !(l.v = calloc(1, sizeof(*l.v))))
		k = -ENOMEM;
	if (k < 0) {
		strv_free(l.v);
		return k;
	}
	*ret = l.v;
	return l.n > INT32_MAX ? INT32_MAX : (int)l.n;
}

char **strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
	return NULL;
}

/* --- Monitoring ------------------------------------------------------------------------- */

int bus_monitor_start(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
		      bus_monitor_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;
	struct ctrl_reply r;
	int k;

	if (!bus || bus->closed || !handler || (name && !ctrl_name_is_valid_wellknown(name)))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	for (s = bus->slots; s; s = s->next)
		if (s->type == SLOT_MONITOR)
			return -EBUSY;
	s = slot_new(bus, SLOT_MONITOR, name, NULL, userdata);
	if (!s)
		return -ENOMEM;
	s->handler.monitor = handler;
	k = bus_ctrl_request(bus, CTRL_OP_MONITOR, NULL, 0, &r);
	if (k < 0) {
		slot_destroy(s);
		return k;
	}
	{
		struct ctrl_reader rd;
		uint32_t n = 0;

		ctrl_reader_init(&rd, &r.msg);
		k = ctrl_read_u32(&rd, &n) < 0 ? 0 : (int)(n > INT32_MAX ? INT32_MAX : n);
	}
	ctrl_reply_done(&r);
	slot_hand_out(s, ret_slot);
	return k;	/* channels announced; each comes as a MonitorChannel signal */
}
