/* SPDX-License-Identifier: MIT */
/*
 * msg.c - received messages, with the sender's unique name and credentials
 * taken from the kernel's struct ioipc_msg_info, never from the message
 * itself; the fds it carried, and a body that came in a sealed memfd: read
 * into a buffer the bus reuses (up to BUS_BODY_READ_MAX), else mapped
 * read-only. A message from a multishot receive is read in place: its header
 * strings and body stay in the receive buffer the kernel copied it into,
 * lent by the chan until the message is freed, in a struct reused from one
 * message to the next, so that dispatching it copies and allocates nothing;
 * a message the application keeps past its dispatch is copied out once
 * (msg_keep()). Other receives are copied into a message of their own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/bus-alloc.h"
#include "client/bus-internal.h"
#include "client/msg.h"
#include "protocol/body-memfd.h"
#include "protocol/dbus-marshal.h"

/* Copies the NUL-terminated s (NULL = "") to *p and advances it. */
static char *put_string(uint8_t **p, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *r = (char *)*p;

	memcpy(r, s ? s : "", n);
	*p += n;
	return r;
}

/* The byte API's view of a native-order body: an "ay" array or an "s" string, after its length. */
void msg_set_byte_view(brokerd_msg *msg)
{
	uint32_t n;

	msg->body = msg->data;
	msg->body_len = msg->data_len;
	if ((strcmp(msg->signature, "ay") != 0 && strcmp(msg->signature, "s") != 0) || msg->data_len < 4)
		return;
	/* validated: the length fits the body, and the bytes follow at offset 4 */
	memcpy(&n, msg->data, 4);
	msg->body = (uint8_t *)msg->data + 4;
	msg->body_len = n;
}

/*
 * A block for a copied message of need bytes: the one the last freed such
 * message left (a call channel receives single-shot and copies each call,
 * so a server answering calls one by one allocates nothing per call), or
 * a new one of at least MSG_BLOCK_MIN bytes, that most next messages fit.
 */
static brokerd_msg *msg_block_get(brokerd_bus *bus, size_t need)
{
	brokerd_msg *msg = bus ? TAKE_PTR(bus->msg_block) : NULL;
	size_t size;

	if (msg && msg->block_size >= need) {
		size = msg->block_size;
		memset(msg, 0, sizeof(*msg));
	} else {
		free(msg);
		size = need < MSG_BLOCK_MIN ? MSG_BLOCK_MIN : need;
		msg = calloc(1, size);
		if (!msg)
			return NULL;
	}
	msg->block_size = size;
	return msg;
}

brokerd_msg *msg_new(brokerd_bus *bus, const struct chmsg *m, const struct ioipc_msg_info *info,
		     const char *name)
{
	/* member: what brokerd_msg_get_member() returns, an error's error name */
	const char *member = m->type == CHMSG_ERROR ? m->error_name : m->member;
	const char *strings[] = { member,	 name,		 m->path,     m->interface,
				  m->error_name, m->destination, m->signature };
	size_t size = 0;
	brokerd_msg *msg;
	uint8_t *p;

	/* a body in a memfd stays where it was read or mapped (msg_decode()): no copy, however large */
	uint32_t copy_len = m->body_in_fd ? 0 : m->body_len;

	for (size_t i = 0; i < ELEMENTSOF(strings); i++)
		size += strlen(strings[i] ? strings[i] : "") + 1;
	/* the body first, at the 8-byte alignment its values were laid out for */
	msg = msg_block_get(bus, sizeof(*msg) + copy_len + 8 + size);
	if (!msg)
		return NULL;
	msg->n_ref = 1;
	msg->bus = bus_ref(bus);
	msg->type = m->type;
	msg->flags = m->flags;
	msg->serial = m->serial;
	msg->reply_serial = m->reply_serial;
	if (info) {
		msg->creds.pid = (pid_t)info->pid;
		msg->creds.uid = (uid_t)info->uid;
		msg->creds.gid = (gid_t)info->gid;
		msg->creds.id = info->badge;
		msg->lost = info->lost;
		if (info->badge)
			ctrl_unique_name_format(info->badge, msg->sender);
	}
	p = msg->buf;
	msg->data = m->body_in_fd ? (void *)m->body : p;
	msg->data_len = m->body_len;
	if (copy_len)
		memcpy(p, m->body, copy_len);
	p[copy_len] = 0; /* text bodies can be printed as they are */
	p += copy_len + 1;
	msg->member = put_string(&p, member);
	msg->name = put_string(&p, name);
	msg->path = put_string(&p, m->path);
	msg->interface = put_string(&p, m->interface);
	msg->error_name = put_string(&p, m->error_name);
	msg->destination = put_string(&p, m->destination);
	msg->signature = put_string(&p, m->signature);
	/* decoded means validated; only the byte order may still differ (walking a native body again is waste) */
	if (m->byte_order && m->byte_order != DBUS_NATIVE_ENDIAN &&
	    dbus_body_to_native(msg->signature, msg->data, msg->data_len, m->byte_order,
				m->body_in_fd ? m->n_fds - 1 : m->n_fds) < 0) {
		brokerd_msg_unref(msg);
		return NULL;
	}
	msg_set_byte_view(msg);
	return msg;
}

static void fds_close(int *fds, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* What msg_decode() found in a receive: the message, its fds (owned), a memfd body read or mapped. */
struct received {
	const struct ioipc_msg_info *info;
	struct chmsg m;
	int *fds;
	unsigned int n_fds;
	void *map;
	void *buf; /* BUS_BODY_READ_MAX + 1 bytes */
};

/* A buffer for a memfd body: the bus's spare one, or a new one. */
static void *body_buf_get(brokerd_bus *bus)
{
	void *b = bus ? TAKE_PTR(bus->body_cache) : NULL;

	return b ? b : malloc(BUS_BODY_READ_MAX + 1);
}

/* Gives b back for the next message's body, or frees it. */
static void body_buf_put(brokerd_bus *bus, void *b)
{
	if (b && bus && !bus->body_cache)
		bus->body_cache = b;
	else
		free(b);
}

static void received_clear(struct received *r)
{
	if (r->map)
		(void)munmap(r->map, r->m.body_len);
	free(r->buf);
	if (r->fds)
		fds_close(r->fds, r->n_fds);
	free(r->fds);
	*r = (struct received){ 0 };
}

/*
 * The body of r's message from its memfd, the last fd, into r->buf (from
 * bus) or a private mapping; validated. A byte-order conversion will write
 * to it: the mapping is made writable then (copy on write, never the
 * sender's pages).
 */
static int body_take(brokerd_bus *bus, struct received *r)
{
	int fd = r->fds[r->n_fds - 1];
	void *body;
	int k;

	if (r->m.body_len <= BUS_BODY_READ_MAX) {
		/* a copy, but no mapping, no page faults, no munmap() (client/README.md) */
		r->buf = body_buf_get(bus);
		if (!r->buf)
			return -ENOMEM;
		k = chmsg_body_read(fd, r->m.body_len, r->buf);
		((uint8_t *)r->buf)[r->m.body_len] = 0; /* text bodies can be printed as they are */
		body = r->buf;
	} else {
		k = chmsg_body_map(fd, r->m.body_len, &r->map);
		body = r->map;
	}
	if (k >= 0)
		k = chmsg_decode_body(&r->m, body);
	if (k >= 0 && r->map && r->m.byte_order && r->m.byte_order != DBUS_NATIVE_ENDIAN &&
	    mprotect(r->map, r->m.body_len, PROT_READ | PROT_WRITE) < 0)
		k = -ENOMEM;
	return k;
}

/* Decodes c's completed receive into r; on failure every fd is closed. */
static int msg_decode(brokerd_bus *bus, struct chan *c, struct received *r)
{
	const struct ioipc_fds_hdr *h;
	const void *payload;
	size_t len;
	int k;

	*r = (struct received){ 0 };
	k = chan_message(c, &r->info, &payload, &len);
	/* the fds are ours from here, whatever becomes of the message */
	h = chan_take_fds(c);
	if (h && h->nr) {
		r->fds = malloc(h->nr * sizeof(int));
		if (!r->fds) {
			for (uint32_t i = 0; i < h->nr; i++)
				if (h->fds[i] >= 0)
					close(h->fds[i]);
			return -ENOMEM;
		}
		r->n_fds = h->nr;
		memcpy(r->fds, h->fds, r->n_fds * sizeof(int));
	}
	if (k < 0)
		goto fail;
	if (h && (h->flags & IOIPC_FDS_TRUNC)) {
		/* some fd could not be installed here: the fd table is full, most likely */
		k = -EMFILE;
		goto fail;
	}
	k = chmsg_decode(&r->m, payload, len);
	if (k >= 0 && r->m.n_fds != r->n_fds)
		k = -EBADMSG; /* the header must say how many came */
	if (k < 0)
		goto fail;
	if (r->m.body_in_fd) {
		k = body_take(bus, r);
		if (k < 0)
			goto fail;
		/* the copy or the mapping holds the body: the fd itself is not needed any more */
		close(r->fds[--r->n_fds]);
	}
	return 0;
fail:
	received_clear(r);
	return k;
}

/* Hands r's fds and its body's buffer or mapping to msg. */
static void received_give(struct received *r, brokerd_msg *msg)
{
	msg->fds = r->n_fds ? TAKE_PTR(r->fds) : NULL;
	msg->n_fds = r->n_fds;
	msg->map = TAKE_PTR(r->map);
	msg->map_len = r->m.body_len;
	msg->body_buf = TAKE_PTR(r->buf);
	free(r->fds);
	r->fds = NULL;
}

int msg_receive(brokerd_bus *bus, struct chan *c, const char *name, brokerd_msg **ret)
{
	struct received r;
	brokerd_msg *msg;
	int k;

	k = msg_decode(bus, c, &r);
	if (k < 0)
		return k;
	msg = msg_new(bus, &r.m, r.info, name);
	if (!msg) {
		received_clear(&r);
		return -ENOMEM;
	}
	received_give(&r, msg);
	*ret = msg;
	return 0;
}

/* The struct of a message read in place: the bus's spare one, or a new one. */
static brokerd_msg *msg_struct_get(brokerd_bus *bus)
{
	brokerd_msg *msg = TAKE_PTR(bus->msg_cache);

	if (!msg) {
		msg = calloc(1, sizeof(*msg));
		if (!msg)
			return NULL;
	}
	msg->cached = true;
	return msg;
}

int msg_receive_in_place(brokerd_bus *bus, struct chan *c, const char *name, brokerd_msg **ret)
{
	struct received r;
	brokerd_msg *msg;
	const struct chmsg *m = &r.m;
	uint8_t *end;
	size_t name_len;
	int k;

	/* a body in a memfd is read or mapped either way: the copying path costs nothing more */
	if (!c->multishot || c->cur_bid < 0)
		return msg_receive(bus, c, name, ret);
	k = msg_decode(bus, c, &r);
	if (k < 0)
		return k;
	/* room for a NUL after the body in the buffer, so that text bodies can be printed as they are */
	end = m->body_in_fd ? NULL : (uint8_t *)m->body + m->body_len;
	if (end && end >= c->cur + c->buf_size) {
		received_clear(&r);
		return msg_receive(bus, c, name, ret); /* cannot happen: the buffer has room beyond CHMSG_MAX */
	}
	msg = msg_struct_get(bus);
	if (!msg) {
		received_clear(&r);
		return -ENOMEM;
	}
	msg->n_ref = 1;
	msg->bus = bus_ref(bus);
	msg->type = m->type;
	msg->flags = m->flags;
	msg->serial = m->serial;
	msg->reply_serial = m->reply_serial;
	msg->creds.pid = (pid_t)r.info->pid;
	msg->creds.uid = (uid_t)r.info->uid;
	msg->creds.gid = (gid_t)r.info->gid;
	msg->creds.id = r.info->badge;
	msg->lost = r.info->lost;
	if (r.info->badge)
		ctrl_unique_name_format(r.info->badge, msg->sender);
	/* decoded strings are NUL-terminated where they lie */
	msg->member = (char *)((m->type == CHMSG_ERROR ? m->error_name : m->member) ?: "");
	/* what snprintf() would keep, without its cost on every message */
	name_len = name ? strnlen(name, sizeof(msg->name_buf) - 1) : 0;
	memcpy(msg->name_buf, name ? name : "", name_len);
	msg->name_buf[name_len] = 0;
	msg->name = msg->name_buf;
	msg->path = (char *)(m->path ?: "");
	msg->interface = (char *)(m->interface ?: "");
	msg->error_name = (char *)(m->error_name ?: "");
	msg->destination = (char *)(m->destination ?: "");
	msg->signature = (char *)(m->signature ?: "");
	msg->data = (void *)m->body;
	msg->data_len = m->body_len;
	if (end)
		*end = 0;
	received_give(&r, msg);
	msg->held_chan = c;
	msg->held_bid = chan_hold(c);
	/* the buffer is ours: a byte-order conversion writes to it (a native body was validated already) */
	if (m->byte_order && m->byte_order != DBUS_NATIVE_ENDIAN &&
	    dbus_body_to_native(msg->signature, msg->data, msg->data_len, m->byte_order, msg->n_fds) < 0)
		k = -EBADMSG;
	if (k < 0) {
		brokerd_msg_unref(msg);
		return k;
	}
	msg_set_byte_view(msg);
	*ret = msg;
	return 0;
}

int msg_keep(brokerd_msg *msg)
{
	size_t size = 0, copy_len, body_off;
	uint8_t *block, *p;

	if (!msg || !msg->held_chan)
		return 0;
	const char *strings[] = { msg->member, msg->path, msg->interface, msg->error_name, msg->destination,
				  msg->signature };
	body_off = (uint8_t *)msg->body - (uint8_t *)msg->data;
	/* a memfd body is the message's own already */
	copy_len = msg->map || msg->body_buf ? 0 : msg->data_len;
	for (size_t i = 0; i < ELEMENTSOF(strings); i++)
		size += strlen(strings[i]) + 1;
	/* the body first, 8-byte aligned as its values were laid out */
	block = malloc(copy_len + 1 + size);
	if (!block)
		return -ENOMEM; /* it keeps the buffer instead */
	p = block;
	if (!msg->map && !msg->body_buf) {
		const uint8_t *old = msg->data;

		memcpy(p, msg->data, copy_len);
		p[copy_len] = 0;
		msg->data = p;
		msg->body = p + body_off;
		/* a typed read under way goes on in the copy: its pointers into the body move along */
		if (msg->reader && msg->reader->data == old) {
			msg->reader->data = p;
			for (unsigned int i = 0; i <= msg->reader->depth && i <= DBUS_DEPTH_MAX; i++) {
				const char *sig = msg->reader->frames[i].sig;

				if (sig && (const uint8_t *)sig >= old && (const uint8_t *)sig < old + copy_len)
					msg->reader->frames[i].sig = (const char *)p + ((const uint8_t *)sig - old);
			}
		}
	}
	p += copy_len + 1;
	msg->member = put_string(&p, msg->member);
	msg->path = put_string(&p, msg->path);
	msg->interface = put_string(&p, msg->interface);
	msg->error_name = put_string(&p, msg->error_name);
	msg->destination = put_string(&p, msg->destination);
	msg->signature = put_string(&p, msg->signature);
	msg->kept = block;
	chan_release(&msg->bus->ring, msg->held_chan, msg->held_bid);
	msg->held_chan = NULL;
	msg->held_bid = -1;
	return 0;
}

_public_ brokerd_msg *brokerd_msg_ref(brokerd_msg *msg)
{
	if (msg)
		msg->n_ref++;
	return msg;
}

_public_ brokerd_msg *brokerd_msg_unref(brokerd_msg *msg)
{
	brokerd_bus *bus;

	if (!msg || --msg->n_ref > 0)
		return NULL;
	bus = msg->bus;
	if (msg->held_chan)
		chan_release(&bus->ring, msg->held_chan, msg->held_bid);
	if (msg->writer)
		dbus_writer_deinit(msg->writer);
	free(msg->writer);
	free(msg->reader);
	brokerd_msg_unref(msg->call);
	if (msg->map)
		(void)munmap(msg->map, msg->map_len);
	body_buf_put(bus, msg->body_buf);
	if (msg->fds)
		fds_close(msg->fds, msg->n_fds);
	free(msg->fds);
	free(msg->owned_data);
	free(msg->owned_signature);
	free(msg->kept);
	if (msg->cached && bus && !bus->msg_cache) {
		/* the next message read in place takes this struct */
		memset(msg, 0, sizeof(*msg));
		bus->msg_cache = msg;
	} else if (msg->block_size && msg->block_size <= MSG_BLOCK_KEEP_MAX && bus && !bus->msg_block) {
		/* the next copied message takes this block (msg_block_get()) */
		bus->msg_block = msg;
	} else {
		free(msg);
	}
	bus_unref(bus);
	return NULL;
}

_public_ int brokerd_msg_get_type(brokerd_msg *msg)
{
	if (!msg)
		return -EINVAL;
	return msg->type;
}

_public_ const char *brokerd_msg_get_sender(brokerd_msg *msg)
{
	return msg ? msg->sender : NULL;
}

_public_ int brokerd_msg_get_creds(brokerd_msg *msg, struct brokerd_creds *ret)
{
	if (!msg || !ret)
		return -EINVAL;
	if (!msg->creds.id && !msg->creds.pid)
		return -ENODATA;
	*ret = msg->creds;
	return 0;
}

_public_ const char *brokerd_msg_get_name(brokerd_msg *msg)
{
	return msg ? msg->name : NULL;
}

_public_ const char *brokerd_msg_get_member(brokerd_msg *msg)
{
	return msg ? msg->member : NULL;
}

_public_ const char *brokerd_msg_get_error_name(brokerd_msg *msg)
{
	if (!msg || msg->type != BROKERD_MSG_ERROR)
		return NULL;
	return msg->error_name;
}

_public_ int brokerd_msg_get_body(brokerd_msg *msg, const void **ret, size_t *ret_size)
{
	if (!msg || !ret || !ret_size)
		return -EINVAL;
	*ret = msg->body;
	*ret_size = msg->body_len;
	return 0;
}

_public_ uint64_t brokerd_msg_get_serial(brokerd_msg *msg)
{
	return msg ? msg->serial : 0;
}

_public_ const char *brokerd_msg_get_path(brokerd_msg *msg)
{
	return msg ? msg->path : NULL;
}

_public_ const char *brokerd_msg_get_interface(brokerd_msg *msg)
{
	return msg ? msg->interface : NULL;
}

_public_ const char *brokerd_msg_get_signature(brokerd_msg *msg)
{
	return msg ? msg->signature : NULL;
}

_public_ const char *brokerd_msg_get_destination(brokerd_msg *msg)
{
	return msg ? msg->destination : NULL;
}

_public_ int brokerd_msg_get_data(brokerd_msg *msg, const void **ret, size_t *ret_size)
{
	if (!msg || !ret || !ret_size)
		return -EINVAL;
	*ret = msg->data;
	*ret_size = msg->data_len;
	return 0;
}
