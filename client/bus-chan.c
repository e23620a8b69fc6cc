/* SPDX-License-Identifier: MIT */
/*
 * bus-chan.c - the chans of a bus: capability fds from brokerd attached to
 * its ring (and a first receive armed), messages encoded and sent, call
 * chans retired while they drain, monitor chans. What each chan is for is
 * its kind and owner (bus-internal.h); this file does not look inside.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client/bus-chan.h"
#include "protocol/dbus-marshal.h"

int bus_chan_attach(brokerd_bus *bus, int fd, unsigned int rights, unsigned int kind, void *owner,
		    struct chan **ret)
{
	struct chan *c;
	int k;

	if (fd < 0)
		return -EPROTO;
	k = chan_attach(&bus->ring, fd, rights,
			(rights & (IOIPC_SUB_RECV | IOIPC_SUB_MONITOR)) ? CHMSG_MAX : 0, kind, owner, &c);
	close(fd);
	if (k < 0)
		return k;
	/*
	 * Signals, monitor copies and our inbox: one multishot receive drains
	 * whatever arrived, without a submit per message (where the kernel has
	 * no buffer rings, the chan stays single-shot). Not calls: a receive
	 * kept posted on a name's call channel would be handed calls while the
	 * handler is busy, which a pool's other workers should take.
	 */
	if (c->buf && kind != CHAN_CALL_RECV)
		(void)chan_set_multishot(&bus->ring, c, BUS_RECV_BUFS);
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

/* --- Encoding: inline, or the body in a sealed memfd --------------------------- */

#define BODY_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

/*
 * Writes prefix (prefix_len bytes, maybe none) then body (len bytes) to fd
 * in one writev() (a memfd takes it all at once), going on after a short
 * write.
 */
static int write_all(int fd, const void *prefix, size_t prefix_len, const void *body, size_t len)
{
	struct iovec iov[2] = { { (void *)prefix, prefix_len }, { (void *)body, len } };
	struct iovec *v = prefix_len ? iov : iov + 1;
	int n_iov = prefix_len ? 2 : 1;

	while (n_iov > 0) {
		ssize_t n = writev(fd, v, n_iov);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		for (; n_iov > 0 && (size_t)n >= v->iov_len; v++, n_iov--)
			n -= (ssize_t)v->iov_len;
		if (n_iov > 0) {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/*
 * A memfd holding prefix (prefix_len bytes) then body (len bytes), sealed so
 * that no one can change it any more: the body is written once, from where
 * it lies, with the prefix in the same system call, and sealed with one
 * more (memfd_create(), writev(), fcntl(); the caller closes it once sent).
 */
static int body_memfd(const void *prefix, size_t prefix_len, const void *body, size_t len)
{
	_cleanup_close_ int fd = -1;
	int k;

	fd = memfd_create("brokerd-body", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	k = write_all(fd, prefix, prefix_len, body, len);
	if (k < 0)
		return k;
	if (fcntl(fd, F_ADD_SEALS, BODY_SEALS) < 0)
		return -errno;
	return TAKE_FD(fd);
}

void bus_out_deinit(struct bus_out *o)
{
	if (!o)
		return;
	for (unsigned int i = 0; i < o->n_fds; i++)
		close(o->fds[i]);
	o->n_fds = 0;
	if (!o->borrowed)
		free(o->buf);
	o->buf = NULL;
}

struct bus_out *bus_out_free(struct bus_out *o)
{
	bus_out_deinit(o);
	free(o);
	return NULL;
}

size_t bus_chan_inline_max(const struct chan *c)
{
	if (!c || c->msg_max < BUS_INLINE_MAX)
		return BUS_INLINE_MAX;
	/* the receivers' buffers (and ours) hold CHMSG_MAX: brokerd makes no larger slots */
	return c->msg_max < CHMSG_MAX ? c->msg_max : CHMSG_MAX;
}

uint32_t bus_reply_msg_max(const struct ctrl_reply *r)
{
	struct ctrl_reader rd;
	uint32_t result, size = 0;

	ctrl_reader_init(&rd, &r->msg);
	if (ctrl_read_u32(&rd, &result) < 0 || ctrl_reader_at_end(&rd) || ctrl_read_u32(&rd, &size) < 0)
		return 0;
	return size;
}

const char bus_bytes_signature[] = "ay";

/*
 * m (a valid message) into buf, inline_max bytes at most: the header, then
 * the body written straight after it, the one copy of its bytes the library
 * makes. A byte API body (signature bus_bytes_signature) is the bytes
 * themselves, laid out here as an "ay" (their length, then them); any other
 * body is the marshalled one m points to, checked against its signature.
 * Returns the encoded length, or -errno (-EMSGSIZE: too large for inline_max).
 */
static int encode_inline(const struct chmsg *m, const void *bytes, size_t n_bytes, uint8_t *buf,
			 size_t inline_max)
{
	uint32_t n = (uint32_t)n_bytes;
	int k;

	if (!bytes)
		return chmsg_encode(m, buf, inline_max);
	k = chmsg_encode_header(m, buf, inline_max);
	if (k < 0)
		return k;
	memcpy(buf + k, &n, 4);
	memcpy(buf + k + 4, bytes, n_bytes);
	return k + 4 + (int)n_bytes;
}

/*
 * bus_out_encode() into buf (CHMSG_MAX bytes, not o's) or, without one, a
 * buffer of o's own; with buf, a typed body with room in front of it
 * (bus->send_room) is sent from where it lies, its header written there.
 */
static int bus_out_encode_into(brokerd_bus *bus, const struct chmsg *msg, size_t inline_max, uint8_t *buf,
			       struct bus_out *o)
{
	struct chmsg m = *msg;
	const void *bytes = NULL;
	size_t n_bytes = 0;
	/* only where the message is sent at once, from the bus's buffer: o borrows the room */
	uint8_t *room = buf ? bus->send_room : NULL;
	int k;

	*o = (struct bus_out){ 0 };
	bus->send_room = NULL;
	if (m.signature == bus_bytes_signature && m.body_len > 0) {
		/* the byte API's bytes: the "ay" body is laid out where it is written, no sooner */
		if (m.body_len > DBUS_ARRAY_MAX || !m.body)
			return -EINVAL;
		bytes = m.body;
		n_bytes = m.body_len;
		m.body = NULL;
		m.body_len = (uint32_t)(4 + n_bytes);
	}
	/* the fds of the typed message being sent, if any: ours to pass, once */
	for (unsigned int i = 0; i < bus->n_send_fds; i++) {
		int fd = fcntl(bus->send_fds[i], F_DUPFD_CLOEXEC, 3);

		if (fd < 0) {
			k = -errno;
			goto fail;
		}
		o->fds[o->n_fds++] = fd;
	}
	bus->send_fds = NULL;
	bus->n_send_fds = 0;
	m.n_fds = o->n_fds;
	m.body_in_fd = false;

	o->borrowed = buf != NULL;
	o->buf = buf ?: malloc(CHMSG_MAX);
	if (!o->buf) {
		k = -ENOMEM;
		goto fail;
	}
	/* the very body the room is in front of: not another message sent meanwhile (a nested send) */
	if (room && !bytes && m.body_len > 0 && (const uint8_t *)m.body == room + MSG_HEADER_ROOM) {
		/* a typed body, sent at once: the header goes in front of it, in the room left there */
		if (dbus_body_validate(m.signature ?: "", m.body, m.body_len, DBUS_NATIVE_ENDIAN, m.n_fds) < 0) {
			k = -EINVAL;
			goto fail;
		}
		k = chmsg_encode_header(&m, o->buf, inline_max);
		if (k > 0 && (size_t)k <= MSG_HEADER_ROOM) {
			uint8_t *start = (uint8_t *)m.body - k;

			memcpy(start, o->buf, (size_t)k);
			o->buf = start;
			o->len = (size_t)k + m.body_len;
			return 0;
		}
		/* a header larger than the room: copied after it as any other body */
	}
	k = encode_inline(&m, bytes, n_bytes, o->buf, inline_max);
	if (k == -EMSGSIZE && m.body_len > 0) {
		/* too large for a slot: the header goes alone, the body in a memfd */
		if (m.body_len > CHMSG_BODY_MAX || o->n_fds >= CHMSG_FDS_MAX) {
			k = -EMSGSIZE;
			goto fail;
		}
		m.body_in_fd = true;
		m.n_fds++;
		/* a valid message first: no memfd for one that will be refused */
		k = bytes ? chmsg_encode_header(&m, o->buf, inline_max) : chmsg_encode(&m, o->buf, inline_max);
		if (k >= 0) {
			uint32_t n = (uint32_t)n_bytes;
			int fd = bytes ? body_memfd(&n, 4, bytes, n_bytes) : body_memfd(NULL, 0, m.body, m.body_len);

			if (fd < 0) {
				k = fd;
				goto fail;
			}
			o->fds[o->n_fds++] = fd;
		}
	}
	if (k < 0)
		goto fail;
	o->len = (size_t)k;
	return 0;
fail:
	bus_out_deinit(o);
	return k;
}

int bus_out_encode(brokerd_bus *bus, const struct chmsg *m, size_t inline_max, struct bus_out *o)
{
	return bus_out_encode_into(bus, m, inline_max, NULL, o);
}

int bus_out_send(brokerd_bus *bus, struct chan *c, const struct bus_out *o)
{
	if (!o->n_fds)
		return chan_send(&bus->ring, c, o->buf, o->len);
	return chan_send_fds(&bus->ring, c, o->buf, o->len, o->fds, o->n_fds);
}

int bus_out_encode_now(brokerd_bus *bus, const struct chmsg *m, size_t inline_max, struct bus_out *o)
{
	/* sent at once: encoded into the bus's buffer, no allocation per message */
	if (!bus->send_buf)
		bus->send_buf = malloc(CHMSG_MAX);
	if (!bus->send_buf) {
		bus->send_room = NULL;
		return -ENOMEM;
	}
	return bus_out_encode_into(bus, m, inline_max, bus->send_buf, o);
}

int bus_chan_send(brokerd_bus *bus, struct chan *c, const struct chmsg *m)
{
	struct bus_out o;
	int k;

	k = bus_out_encode_now(bus, m, bus_chan_inline_max(c), &o);
	if (k < 0)
		return k;
	k = bus_out_send(bus, c, &o);
	bus_out_deinit(&o);
	return k < 0 ? k : 0;
}

int bus_batch_send(brokerd_bus *bus, struct chan *c, const struct chmsg *m)
{
	struct bus_batch *b = bus->batch;
	size_t max = bus_chan_inline_max(c);
	struct bus_out *o;
	int k;

	BUG_ON(!b || !b->open);
	if (b->n == BUS_BATCH_MAX || BUS_BATCH_BYTES - b->used < max) {
		k = bus_batch_flush(bus);
		if (k < 0) {
			bus->send_room = NULL;
			bus->send_fds = NULL;
			bus->n_send_fds = 0;
			return k;
		}
	}
	o = &b->out[b->n];
	/* not sent from the typed body's room: the body may be gone before the batch goes */
	bus->send_room = NULL;
	k = bus_out_encode_into(bus, m, max, b->buf + b->used, o);
	if (k < 0)
		return k;
	k = chan_send_queue(&bus->ring, c, o->buf, o->len, o->n_fds ? o->fds : NULL, o->n_fds, &b->op[b->n]);
	if (k < 0) {
		bus_out_deinit(o);
		return k;
	}
	/* the next message 8-byte aligned, as the encoder expects of a buffer */
	b->used += (o->len + 7) & ~(size_t)7;
	b->n++;
	return 0;
}

int bus_batch_flush(brokerd_bus *bus)
{
	struct bus_batch *b = bus->batch;
	int k;

	if (!b || !b->n)
		return 0;
	k = ring_submit_sends(&bus->ring, b->op, b->n);
	if (k < 0)
		return k; /* the ring failed: the sends may still be queued, their buffers stay */
	for (unsigned int i = 0; i < b->n; i++) {
		if (b->op[i].res < 0 && !b->error)
			b->error = b->op[i].res;
		bus_out_deinit(&b->out[i]);
	}
	b->n = 0;
	b->used = 0;
	return 0;
}

int bus_bytes_body(struct chmsg *m, const void *bytes, size_t size, void **ret_data)
{
	*ret_data = NULL;
	if (size && !bytes)
		return -EINVAL;
	if (size > DBUS_ARRAY_MAX)
		return -EMSGSIZE; /* an "ay" holds at most 64 MiB */
	if (size == 0)
		return 0; /* no body at all, as a D-Bus method without arguments */
	/* not copied here: bus_out_encode() writes them once, where they are sent from */
	m->signature = bus_bytes_signature;
	m->body = bytes;
	m->body_len = (uint32_t)size;
	return 0;
}

uint32_t bus_next_serial(brokerd_bus *bus)
{
	if (++bus->msg_serial == 0)
		bus->msg_serial = 1;
	return bus->msg_serial;
}

/* --- Retired call chans ------------------------------------------------------ */

/* Keeps c receiving until it is drained (see struct retired_chan). */
void bus_chan_retire(brokerd_bus *bus, struct chan *c)
{
	struct retired_chan *r;

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

bool bus_chan_is_retired(brokerd_bus *bus, struct chan *c)
{
	for (struct retired_chan *r = bus->retired; r; r = r->next)
		if (r->chan == c)
			return true;
	return false;
}

/* Closes retired channels: c only, those owned by owner, or all (both NULL). */
void bus_retired_close(brokerd_bus *bus, struct chan *c, void *owner)
{
	for (struct retired_chan **pp = &bus->retired; *pp;) {
		struct retired_chan *r = *pp;

		if ((c && r->chan != c) || (owner && r->chan->owner != owner)) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		chan_close(&bus->ring, r->chan);
		free(r);
	}
}

/* --- Monitor chans ------------------------------------------------------------ */

int bus_monitor_add(brokerd_bus *bus, const char *name, unsigned int kind, int fd)
{
	struct monitor_chan *mc = calloc(1, sizeof(*mc));
	int k;

	if (!mc || !(mc->name = strdup(name))) {
		free(mc);
		close(fd);
		return -ENOMEM;
	}
	mc->kind = kind;
	k = bus_chan_attach(bus, fd, IOIPC_SUB_MONITOR, CHAN_MONITOR, mc, &mc->chan);
	if (k < 0) {
		free(mc->name);
		free(mc);
		return k;
	}
	mc->next = bus->monitors;
	bus->monitors = mc;
	return 0;
}

void bus_monitors_clear(brokerd_bus *bus)
{
	struct monitor_chan *m;

	while ((m = bus->monitors)) {
		bus->monitors = m->next;
		chan_close(&bus->ring, m->chan);
		free(m->name);
		free(m);
	}
}
