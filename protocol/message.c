/* SPDX-License-Identifier: MIT */
/*
 * message.c - encoder and decoder of version 2 channel messages (see
 * message.h). The fixed header and the header fields are themselves a
 * dbus1 value of signature "yyyyuua(yv)", so the one-pass validator and
 * the reader of dbus-marshal.c check and read them as they do bodies;
 * chmsg_decode() reads the fields every sender writes straight from the
 * bytes first (the generic way cost a 64-byte signal's receiver about
 * 9,000 instructions of its 14,000), and leaves the rest to them.
 * chmsg_decode() is what every receiver runs on bytes from another process.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "protocol/dbus-marshal-internal.h"
#include "protocol/dbus-marshal.h"
#include "protocol/message.h"
#include "util/macro.h"

#define HEADER_SIGNATURE "yyyyuua(yv)"

/* What each type requires (R) or forbids (F) of its fields; others optional. */
static const struct chmsg_type_info {
	const char *name;
	bool call_like; /* path and member required, error name forbidden */
	bool interface_required;
	bool is_error;
	bool is_reply; /* reply serial required, path/interface/member forbidden */
} types[] = {
	[CHMSG_CALL] = { .name = "call", .call_like = true },
	[CHMSG_REPLY] = { .name = "reply", .is_reply = true },
	[CHMSG_ERROR] = { .name = "error", .is_error = true, .is_reply = true },
	[CHMSG_SIGNAL] = { .name = "signal", .call_like = true, .interface_required = true },
};
_Static_assert(ELEMENTSOF(types) == _CHMSG_TYPE_MAX, "every channel message type needs an entry");

const char *chmsg_type_to_string(unsigned int type)
{
	if (type == 0 || type >= ELEMENTSOF(types))
		return NULL;
	return types[type].name;
}

bool chmsg_interface_is_valid(const char *name)
{
	/* the D-Bus rules for interface and error names are the same */
	return ctrl_name_is_valid_error(name);
}

static bool has(const char *s)
{
	return s && *s;
}

/* The rules of README section 7.3 on fields, which encode and decode share. */
static int chmsg_check(const struct chmsg *m)
{
	const struct chmsg_type_info *t;

	if (!chmsg_type_to_string(m->type))
		return -EINVAL;
	t = &types[m->type];
	if ((m->flags & ~CHMSG_F_ALL) || m->serial == 0)
		return -EINVAL;
	if (t->is_reply != (m->reply_serial != 0))
		return -EINVAL;
	if (t->call_like) {
		if (!has(m->path) || !dbus_object_path_is_valid(m->path) || !has(m->member) ||
		    !ctrl_name_is_valid_member(m->member))
			return -EINVAL;
		if (t->interface_required && !has(m->interface))
			return -EINVAL;
		if (has(m->interface) && !chmsg_interface_is_valid(m->interface))
			return -EINVAL;
	} else if (has(m->path) || has(m->interface) || has(m->member)) {
		return -EINVAL;
	}
	if (t->is_error != has(m->error_name) || (t->is_error && !ctrl_name_is_valid_error(m->error_name)))
		return -EINVAL;
	if (has(m->destination) && !ctrl_name_is_valid_unique(m->destination) &&
	    !ctrl_name_is_valid_wellknown(m->destination))
		return -EINVAL;
	if (has(m->signature) && !dbus_signature_is_valid(m->signature))
		return -EINVAL;
	if (!has(m->signature) && m->body_len != 0)
		return -EINVAL;
	if (m->n_fds > CHMSG_FDS_MAX || (m->body_in_fd && (m->n_fds == 0 || m->body_len == 0)))
		return -EINVAL;
	return 0;
}

static void write_field(struct dbus_writer *w, uint8_t code, char type, const void *value)
{
	const char sig[2] = { type, 0 };

	(void)dbus_writer_open(w, '(', NULL);
	(void)dbus_writer_append_basic(w, 'y', &code);
	(void)dbus_writer_open(w, 'v', sig);
	(void)dbus_writer_append_basic(w, type, value);
	(void)dbus_writer_close(w);
	(void)dbus_writer_close(w);
}

/* Fds the body's 'h' values may refer to: all but the body's own memfd. */
static uint32_t body_fds(const struct chmsg *m)
{
	return m->body_in_fd ? m->n_fds - 1 : m->n_fds;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* The checks both encoders make, the body's aside. */
static int encode_check(const struct chmsg *m, const void *buf, size_t size)
{
	if (!m || (!buf && size))
		return -EINVAL;
	if (m->byte_order && m->byte_order != DBUS_NATIVE_ENDIAN)
		return -EINVAL;
	if (chmsg_check(m) < 0)
		return -EINVAL;
	if (m->body_len > (m->body_in_fd ? CHMSG_BODY_MAX : CHMSG_MAX))
		return -EMSGSIZE;
	return 0;
}

/* The header of m into buf, padded to 8: the body's offset, or -errno. */
static int encode_header(const struct chmsg *m, void *buf, size_t size)
{
	const uint8_t version = CHMSG_VERSION, order = DBUS_NATIVE_ENDIAN;
	_cleanup_(dbus_writer_deinit) struct dbus_writer w = { 0 };
	void *hdr = NULL;
	size_t hlen = 0, total;
	int k;

	/* straight into buf: a message sent allocates nothing for its header */
	k = dbus_writer_init_fixed(&w, HEADER_SIGNATURE, buf, size < CHMSG_MAX ? size : CHMSG_MAX);
	if (k < 0)
		return k;
	(void)dbus_writer_append_basic(&w, 'y', &order);
	(void)dbus_writer_append_basic(&w, 'y', &m->type);
	(void)dbus_writer_append_basic(&w, 'y', &m->flags);
	(void)dbus_writer_append_basic(&w, 'y', &version);
	(void)dbus_writer_append_basic(&w, 'u', &m->body_len);
	(void)dbus_writer_append_basic(&w, 'u', &m->serial);
	(void)dbus_writer_open(&w, 'a', "(yv)");
	/* fields in the order of their codes: any order is valid, this one is canonical */
	if (has(m->path))
		write_field(&w, CHMSG_FIELD_PATH, 'o', m->path);
	if (has(m->interface))
		write_field(&w, CHMSG_FIELD_INTERFACE, 's', m->interface);
	if (has(m->member))
		write_field(&w, CHMSG_FIELD_MEMBER, 's', m->member);
	if (has(m->error_name))
		write_field(&w, CHMSG_FIELD_ERROR_NAME, 's', m->error_name);
	if (m->reply_serial)
		write_field(&w, CHMSG_FIELD_REPLY_SERIAL, 'u', &m->reply_serial);
	if (has(m->destination))
		write_field(&w, CHMSG_FIELD_DESTINATION, 's', m->destination);
	if (has(m->signature))
		write_field(&w, CHMSG_FIELD_SIGNATURE, 'g', m->signature);
	if (m->n_fds)
		write_field(&w, CHMSG_FIELD_UNIX_FDS, 'u', &m->n_fds);
	if (m->body_in_fd) {
		uint32_t idx = m->n_fds - 1;

		write_field(&w, CHMSG_FIELD_BODY_FD, 'u', &idx);
	}
	(void)dbus_writer_close(&w);
	k = dbus_writer_finish(&w, &hdr, &hlen);
	if (k < 0)
		return k == -ENOMEM ? -ENOMEM : k == -EMSGSIZE ? -EMSGSIZE : -EINVAL;

	total = align8(hlen) + (m->body_in_fd ? 0 : m->body_len);
	if (total > CHMSG_MAX || total > size)
		return -EMSGSIZE;
	memset((uint8_t *)buf + hlen, 0, align8(hlen) - hlen);
	return (int)align8(hlen);
}

int chmsg_encode(const struct chmsg *m, void *buf, size_t size)
{
	int k;

	if (m && !m->body && m->body_len)
		return -EINVAL;
	k = encode_check(m, buf, size);
	if (k < 0)
		return k;
	/* a writer sends only what every receiver accepts */
	if (dbus_body_validate(has(m->signature) ? m->signature : "", m->body, m->body_len,
			       DBUS_NATIVE_ENDIAN, body_fds(m)) < 0)
		return -EINVAL;
	k = encode_header(m, buf, size);
	if (k < 0)
		return k;
	if (m->body_len && !m->body_in_fd)
		memcpy((uint8_t *)buf + k, m->body, m->body_len);
	return k + (m->body_in_fd ? 0 : (int)m->body_len);
}

int chmsg_encode_header(const struct chmsg *m, void *buf, size_t size)
{
	int k;

	k = encode_check(m, buf, size);
	if (k < 0)
		return k;
	return encode_header(m, buf, size);
}

static uint32_t get_u32(const uint8_t *p, char order)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return order == DBUS_LITTLE_ENDIAN ? le32toh(v) : be32toh(v);
}

/* The D-Bus type each known field's variant must hold. */
static char field_type(uint8_t code)
{
	static const char t[] = { [CHMSG_FIELD_PATH] = 'o',	    [CHMSG_FIELD_INTERFACE] = 's',
				  [CHMSG_FIELD_MEMBER] = 's',	    [CHMSG_FIELD_ERROR_NAME] = 's',
				  [CHMSG_FIELD_REPLY_SERIAL] = 'u', [CHMSG_FIELD_DESTINATION] = 's',
				  [CHMSG_FIELD_SIGNATURE] = 'g',    [CHMSG_FIELD_UNIX_FDS] = 'u',
				  [CHMSG_FIELD_BODY_FD] = 'u' };

	return code < ELEMENTSOF(t) ? t[code] : 0;
}

/* Where a known field's value goes: a string's pointer, or a u32 (body_fd: BODY_FD's). */
static void *field_value(struct chmsg *m, uint8_t code, uint32_t *body_fd)
{
	switch (code) {
	case CHMSG_FIELD_REPLY_SERIAL:
		return &m->reply_serial;
	case CHMSG_FIELD_UNIX_FDS:
		return &m->n_fds;
	case CHMSG_FIELD_BODY_FD:
		return body_fd;
	case CHMSG_FIELD_PATH:
		return &m->path;
	case CHMSG_FIELD_INTERFACE:
		return &m->interface;
	case CHMSG_FIELD_MEMBER:
		return &m->member;
	case CHMSG_FIELD_ERROR_NAME:
		return &m->error_name;
	case CHMSG_FIELD_DESTINATION:
		return &m->destination;
	default:
		return &m->signature;
	}
}

/* What both ways of reading the fields check once they are read. */
static int fields_done(struct chmsg *m, uint32_t seen, uint32_t body_fd)
{
	/* an empty string field is the field's absence to the rules, not a value */
	if ((seen & (1U << CHMSG_FIELD_REPLY_SERIAL)) && m->reply_serial == 0)
		return -EBADMSG;
	if (seen & (1U << CHMSG_FIELD_BODY_FD)) {
		/* the body's memfd is the last fd, so the body's 'h' values index the ones before */
		if (m->n_fds == 0 || body_fd != m->n_fds - 1)
			return -EBADMSG;
		m->body_in_fd = true;
	}
	return 0;
}

static int read_fields(struct chmsg *m, struct dbus_reader *r)
{
	uint32_t seen = 0, body_fd = 0;
	int k;

	if (dbus_reader_enter(r, 'a') != 1)
		return -EBADMSG;
	while ((k = dbus_reader_enter(r, '(')) == 1) {
		const char *contents;
		size_t clen;
		uint8_t code;
		char vt, want;
		void *value;

		if (dbus_reader_read_basic(r, 'y', &code) != 1 ||
		    dbus_reader_peek(r, &vt, &contents, &clen) != 1 || vt != 'v')
			return -EBADMSG;
		if (code == 0 || code == CHMSG_FIELD_SENDER)
			return -EBADMSG; /* invalid; the sender is the kernel's to say */
		want = field_type(code);
		if (!want) {
			/* unknown fields are ignored, as D-Bus says: later versions may add some */
			if (dbus_reader_exit(r) < 0)
				return -EBADMSG;
			continue;
		}
		if (seen & (1U << code))
			return -EBADMSG; /* a field at most once */
		seen |= 1U << code;
		if (clen != 1 || contents[0] != want || dbus_reader_enter(r, 'v') != 1)
			return -EBADMSG;
		value = field_value(m, code, &body_fd);
		if (dbus_reader_read_basic(r, want, value) != 1)
			return -EBADMSG;
		if (dbus_reader_exit(r) < 0 || dbus_reader_exit(r) < 0)
			return -EBADMSG;
	}
	if (k < 0 || dbus_reader_exit(r) < 0)
		return -EBADMSG;
	return fields_done(m, seen, body_fd);
}

/*
 * The header fields as every sender lays them out: known codes, each
 * variant holding its field's type, read straight from the bytes, with
 * the checks the validator and reader below make on them (zero padding,
 * bounds, the strings' rules, a field at most once). What this does not
 * know (an unknown or forbidden code, another variant type) it leaves to
 * read_fields(): 1 read, 0 not for this path (nothing kept), -EBADMSG.
 */
static int read_fields_fast(struct chmsg *m, const uint8_t *p, size_t hend, uint32_t *seen, uint32_t *body_fd)
{
	size_t pos = CHMSG_FIXED_HEADER_SIZE; /* the array's first element, 8-aligned */

	while (pos < hend) {
		size_t end = align8(pos);
		uint32_t n, v;
		uint8_t code;
		char want;

		for (; pos < end; pos++)
			if (pos >= hend || p[pos] != 0)
				return -EBADMSG;
		/* code, signature length 1, the type, its NUL */
		if (hend - pos < 4)
			return -EBADMSG;
		code = p[pos];
		want = field_type(code);
		if (!want || p[pos + 1] != 1 || p[pos + 2] != (uint8_t)want || p[pos + 3] != 0)
			return 0;
		if (*seen & (1U << code))
			return -EBADMSG;
		*seen |= 1U << code;
		pos += 4;
		if (want == 'g') {
			if (pos >= hend)
				return -EBADMSG;
			n = p[pos++];
		} else {
			/* a u32 (the value, or a string's length) after zero padding to 4 */
			for (end = (pos + 3) & ~(size_t)3; pos < end; pos++)
				if (pos >= hend || p[pos] != 0)
					return -EBADMSG;
			if (hend - pos < 4)
				return -EBADMSG;
			v = get_u32(p + pos, m->byte_order);
			pos += 4;
			if (want == 'u') {
				*(uint32_t *)field_value(m, code, body_fd) = v;
				continue;
			}
			n = v;
		}
		/* n bytes and the NUL, inside the header */
		if (pos >= hend || n >= hend - pos || p[pos + n] != 0 ||
		    dbus_string_like_validate(want, (const char *)p + pos, n) < 0)
			return -EBADMSG;
		*(const char **)field_value(m, code, body_fd) = (const char *)p + pos;
		pos += (size_t)n + 1;
	}
	return 1;
}

static int decode(struct chmsg *m, const void *buf, size_t len, bool fast)
{
	struct dbus_reader r;
	const uint8_t *p = buf;
	uint32_t flen, blen;
	size_t hend, boff;
	uint8_t v8;
	int k;

	if (!m || (!buf && len))
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	if (len < CHMSG_FIXED_HEADER_SIZE || len > CHMSG_MAX)
		return -EBADMSG;
	if (p[3] != CHMSG_VERSION)
		return -EPROTO;
	if (p[0] != DBUS_LITTLE_ENDIAN && p[0] != DBUS_BIG_ENDIAN)
		return -EBADMSG;
	m->byte_order = (char)p[0];
	blen = get_u32(p + 4, m->byte_order);
	flen = get_u32(p + 12, m->byte_order);
	/* len <= CHMSG_MAX, so none of these sums can wrap */
	if (flen > len - CHMSG_FIXED_HEADER_SIZE)
		return -EBADMSG;
	hend = CHMSG_FIXED_HEADER_SIZE + (size_t)flen;
	boff = align8(hend);
	/* with BODY_FD the body is elsewhere: read_fields() tells, so check after it too */
	if (boff > len || (blen != len - boff && len != boff))
		return -EBADMSG;
	for (size_t i = hend; i < boff; i++)
		if (p[i] != 0)
			return -EBADMSG;
	k = 0;
	if (fast) {
		uint32_t seen = 0, body_fd = 0;

		m->type = p[1];
		m->flags = p[2];
		m->serial = get_u32(p + 8, m->byte_order);
		k = read_fields_fast(m, p, hend, &seen, &body_fd);
		if (k < 0 || (k > 0 && fields_done(m, seen, body_fd) < 0))
			return -EBADMSG;
		if (k == 0) {
			/* the reader's turn, from a clean start */
			memset(m, 0, sizeof(*m));
			m->byte_order = (char)p[0];
		}
	}
	if (k == 0) {
		if (dbus_reader_init(&r, HEADER_SIGNATURE, p, hend, m->byte_order, 0) < 0)
			return -EBADMSG;
		if (dbus_reader_read_basic(&r, 'y', &v8) != 1 || dbus_reader_read_basic(&r, 'y', &m->type) != 1 ||
		    dbus_reader_read_basic(&r, 'y', &m->flags) != 1 || dbus_reader_read_basic(&r, 'y', &v8) != 1 ||
		    dbus_reader_read_basic(&r, 'u', &blen) != 1 ||
		    dbus_reader_read_basic(&r, 'u', &m->serial) != 1)
			return -EBADMSG;
		if (read_fields(m, &r) < 0)
			return -EBADMSG;
	}
	m->body_len = blen;
	if (m->body_in_fd ? (len != boff || blen > CHMSG_BODY_MAX) : blen != len - boff)
		return -EBADMSG;
	if (chmsg_check(m) < 0)
		return -EBADMSG;
	if (m->body_in_fd)
		return 0; /* chmsg_decode_body() checks it once mapped */
	return chmsg_decode_body(m, p + boff);
}

int chmsg_decode(struct chmsg *m, const void *buf, size_t len)
{
	return decode(m, buf, len, true);
}

int chmsg_decode_generic(struct chmsg *m, const void *buf, size_t len)
{
	return decode(m, buf, len, false);
}

int chmsg_decode_body(struct chmsg *m, const void *body)
{
	if (!m || (!body && m->body_len))
		return -EINVAL;
	if (dbus_body_validate(has(m->signature) ? m->signature : "", body, m->body_len, m->byte_order,
			       body_fds(m)) < 0)
		return -EBADMSG;
	m->body = body;
	return 0;
}
