/* SPDX-License-Identifier: MIT */
/*
 * dbus-message.c - D-Bus socket messages: framing, validation, writing
 * (dbus-message.h). The header is itself dbus1 data of signature
 * "yyyyuua(yv)", so it is validated and read with the body marshalling's
 * own validator and reader, and written with its writer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "protocol/dbus-message.h"
#include "protocol/message.h"
#include "util/macro.h"

#define HEADER_SIGNATURE "yyyyuua(yv)"
#define ALIGN8(n)	 (((n) + 7) & ~(size_t)7)

static uint32_t load_u32(const uint8_t *p, char bo)
{
	if (bo == DBUS_LITTLE_ENDIAN)
		return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

int dbus_message_frame_size(const void *data, size_t len, size_t *size)
{
	const uint8_t *p = data;
	uint64_t total;
	uint32_t body_len, fields_len;

	if (len < DBUS_HEADER_FIXED_SIZE)
		return -EAGAIN;
	if ((p[0] != DBUS_LITTLE_ENDIAN && p[0] != DBUS_BIG_ENDIAN) || p[3] != DBUS_PROTOCOL_VERSION)
		return -EBADMSG;
	body_len = load_u32(p + 4, (char)p[0]);
	fields_len = load_u32(p + 12, (char)p[0]);
	if (fields_len > DBUS_ARRAY_MAX)
		return -EBADMSG;
	total = ALIGN8((uint64_t)DBUS_HEADER_FIXED_SIZE + fields_len) + body_len;
	if (total > DBUS_MESSAGE_MAX)
		return -EBADMSG;
	*size = (size_t)total;
	return 0;
}

bool dbus_bus_name_is_valid(const char *name)
{
	size_t n = 0, elements = 1;
	bool elem_start = true;

	if (!name)
		return false;
	if (name[0] != ':')
		return ctrl_name_is_valid_wellknown(name);
	/* Unique names: elements may start with a digit. */
	for (const char *p = name + 1; *p; p++, n++) {
		char c = *p;

		if (c == '.') {
			if (elem_start)
				return false;
			elements++;
			elem_start = true;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
		elem_start = false;
	}
	return !elem_start && elements >= 2 && n + 1 <= CTRL_NAME_MAX;
}

/* The type each known field must have. */
static const char field_types[_DBUS_FIELD_MAX] = {
	[DBUS_FIELD_PATH] = 'o',       [DBUS_FIELD_INTERFACE] = 's',	[DBUS_FIELD_MEMBER] = 's',
	[DBUS_FIELD_ERROR_NAME] = 's', [DBUS_FIELD_REPLY_SERIAL] = 'u', [DBUS_FIELD_DESTINATION] = 's',
	[DBUS_FIELD_SENDER] = 's',     [DBUS_FIELD_SIGNATURE] = 'g',	[DBUS_FIELD_UNIX_FDS] = 'u',
};

/* The value of field code (already type-checked) is acceptable: 0, else -EBADMSG. */
static int field_store(struct dbus_header *h, uint8_t code, const void *v)
{
	const char *s = *(const char *const *)v;
	uint32_t u = *(const uint32_t *)v;

	switch (code) {
	case DBUS_FIELD_PATH:
		/* The library raises signals from this path itself; nobody may forge one. */
		if (strcmp(s, "/org/freedesktop/DBus/Local") == 0)
			return -EBADMSG;
		h->path = s;
		return 0;
	case DBUS_FIELD_INTERFACE:
		if (!chmsg_interface_is_valid(s) || strcmp(s, "org.freedesktop.DBus.Local") == 0)
			return -EBADMSG;
		h->interface = s;
		return 0;
	case DBUS_FIELD_MEMBER:
		if (!ctrl_name_is_valid_member(s))
			return -EBADMSG;
		h->member = s;
		return 0;
	case DBUS_FIELD_ERROR_NAME:
		if (!ctrl_name_is_valid_error(s))
			return -EBADMSG;
		h->error_name = s;
		return 0;
	case DBUS_FIELD_REPLY_SERIAL:
		if (u == 0)
			return -EBADMSG;
		h->reply_serial = u;
		return 0;
	case DBUS_FIELD_DESTINATION:
	case DBUS_FIELD_SENDER:
		if (!dbus_bus_name_is_valid(s))
			return -EBADMSG;
		if (code == DBUS_FIELD_DESTINATION)
			h->destination = s;
		else
			h->sender = s;
		return 0;
	case DBUS_FIELD_SIGNATURE:
		h->signature = s;
		return 0;
	case DBUS_FIELD_UNIX_FDS:
		if (u > DBUS_MESSAGE_FDS_MAX)
			return -EBADMSG;
		h->n_fds = u;
		return 0;
	}
	return 0;
}

/* Read the header fields (the reader is inside the a(yv)). */
static int fields_read(struct dbus_reader *r, struct dbus_header *h)
{
	uint32_t seen = 0;

	for (;;) {
		const char *vsig;
		size_t vsig_len;
		char t;
		uint8_t code;
		union {
			const char *s;
			uint32_t u;
		} v;
		int k;

		k = dbus_reader_enter(r, '(');
		if (k == 0)
			return 0;
		if (k < 0 || dbus_reader_read_basic(r, 'y', &code) != 1)
			return -EBADMSG;
		if (code == 0)
			return -EBADMSG;
		if (code < _DBUS_FIELD_MAX) {
			if (seen & (1U << code))
				return -EBADMSG;
			seen |= 1U << code;
			if (dbus_reader_peek(r, &t, &vsig, &vsig_len) != 1 || t != 'v' || vsig_len != 1 ||
			    vsig[0] != field_types[code])
				return -EBADMSG;
			if (dbus_reader_enter(r, 'v') != 1 || dbus_reader_read_basic(r, vsig[0], &v) != 1)
				return -EBADMSG;
			if (field_store(h, code, &v) < 0)
				return -EBADMSG;
			if (dbus_reader_exit(r) < 0)
				return -EBADMSG;
		}
		/* Unknown fields are ignored, as the specification says; exit skips them. */
		if (dbus_reader_exit(r) < 0)
			return -EBADMSG;
	}
}

static int header_check(const struct dbus_header *h)
{
	switch (h->type) {
	case DBUS_MESSAGE_METHOD_CALL:
		return h->path && h->member ? 0 : -EBADMSG;
	case DBUS_MESSAGE_METHOD_RETURN:
		return h->reply_serial ? 0 : -EBADMSG;
	case DBUS_MESSAGE_ERROR:
		return h->reply_serial && h->error_name ? 0 : -EBADMSG;
	case DBUS_MESSAGE_SIGNAL:
		return h->path && h->interface && h->member ? 0 : -EBADMSG;
	}
	return -EBADMSG;
}

void dbus_message_deinit(struct dbus_message *m)
{
	free(m->data);
	memset(m, 0, sizeof(*m));
}

int dbus_message_parse_copy(struct dbus_message *m, const void *data, size_t len, uint32_t n_fds)
{
	void *copy = malloc(len ? len : 1);

	if (!copy) {
		memset(m, 0, sizeof(*m));
		return -ENOMEM;
	}
	memcpy(copy, data, len);
	return dbus_message_parse(m, copy, len, n_fds);
}

int dbus_message_parse(struct dbus_message *m, void *data, size_t len, uint32_t n_fds)
{
	struct dbus_reader r;
	const uint8_t *p = data;
	size_t size, header_len, fields_end;
	uint32_t fields_len;
	int k;

	memset(m, 0, sizeof(*m));
	m->data = data;
	m->len = len;
	if (dbus_message_frame_size(data, len, &size) < 0 || size != len)
		return -EBADMSG;
	m->byte_order = (char)p[0];
	m->h.type = p[1];
	m->h.flags = p[2];
	m->h.serial = load_u32(p + 8, m->byte_order);
	fields_len = load_u32(p + 12, m->byte_order);
	if (m->h.serial == 0 || m->h.type == 0 || m->h.type >= _DBUS_MESSAGE_TYPE_MAX)
		return -EBADMSG;
	fields_end = DBUS_HEADER_FIXED_SIZE + fields_len;
	header_len = ALIGN8(fields_end);
	for (size_t i = fields_end; i < header_len; i++)
		if (p[i])
			return -EBADMSG;

	/* The header with its fields is dbus1 data: validated, then read in place. */
	k = dbus_reader_init(&r, HEADER_SIGNATURE, p, fields_end, m->byte_order, n_fds);
	if (k < 0)
		return -EBADMSG;
	for (int i = 0; i < 6; i++)
		if (dbus_reader_skip(&r) != 1)
			return -EBADMSG;
	if (dbus_reader_enter(&r, 'a') != 1 || fields_read(&r, &m->h) < 0)
		return -EBADMSG;
	if (header_check(&m->h) < 0 || m->h.n_fds > n_fds)
		return -EBADMSG;

	m->body = p + header_len;
	m->body_len = len - header_len;
	if (!m->h.signature && m->body_len)
		return -EBADMSG;
	if (m->h.signature &&
	    dbus_body_validate(m->h.signature, m->body, m->body_len, m->byte_order, m->h.n_fds) < 0)
		return -EBADMSG;
	return 0;
}

static int field_append(struct dbus_writer *w, uint8_t code, char type, const void *value)
{
	char sig[2] = { type, 0 };

	dbus_writer_open(w, '(', "yv");
	dbus_writer_append_basic(w, 'y', &code);
	dbus_writer_open(w, 'v', sig);
	dbus_writer_append_basic(w, type, value);
	dbus_writer_close(w);
	return dbus_writer_close(w);
}

int dbus_message_write(const struct dbus_header *h, const void *body, size_t body_len, void **ret,
		       size_t *ret_len)
{
	struct dbus_writer w;
	_cleanup_free_ void *hdr = NULL;
	size_t hdr_len, header_len;
	uint8_t bo = DBUS_NATIVE_ENDIAN, version = DBUS_PROTOCOL_VERSION;
	uint32_t blen = (uint32_t)body_len;
	uint8_t *out;
	int r;

	if (body_len > DBUS_MESSAGE_MAX || h->serial == 0 || h->type == 0 ||
	    h->type >= _DBUS_MESSAGE_TYPE_MAX)
		return -EINVAL;
	if ((h->interface && !chmsg_interface_is_valid(h->interface)) ||
	    (h->member && !ctrl_name_is_valid_member(h->member)) ||
	    (h->error_name && !ctrl_name_is_valid_error(h->error_name)) ||
	    (h->destination && !dbus_bus_name_is_valid(h->destination)) ||
	    (h->sender && !dbus_bus_name_is_valid(h->sender)) || header_check(h) < 0)
		return -EINVAL;
	r = dbus_writer_init(&w, HEADER_SIGNATURE);
	if (r < 0)
		return r;
	dbus_writer_append_basic(&w, 'y', &bo);
	dbus_writer_append_basic(&w, 'y', &h->type);
	dbus_writer_append_basic(&w, 'y', &h->flags);
	dbus_writer_append_basic(&w, 'y', &version);
	dbus_writer_append_basic(&w, 'u', &blen);
	dbus_writer_append_basic(&w, 'u', &h->serial);
	dbus_writer_open(&w, 'a', "(yv)");
	if (h->path)
		field_append(&w, DBUS_FIELD_PATH, 'o', h->path);
	if (h->interface)
		field_append(&w, DBUS_FIELD_INTERFACE, 's', h->interface);
	if (h->member)
		field_append(&w, DBUS_FIELD_MEMBER, 's', h->member);
	if (h->error_name)
		field_append(&w, DBUS_FIELD_ERROR_NAME, 's', h->error_name);
	if (h->reply_serial)
		field_append(&w, DBUS_FIELD_REPLY_SERIAL, 'u', &h->reply_serial);
	if (h->destination)
		field_append(&w, DBUS_FIELD_DESTINATION, 's', h->destination);
	if (h->sender)
		field_append(&w, DBUS_FIELD_SENDER, 's', h->sender);
	if (h->signature && *h->signature)
		field_append(&w, DBUS_FIELD_SIGNATURE, 'g', h->signature);
	if (h->n_fds)
		field_append(&w, DBUS_FIELD_UNIX_FDS, 'u', &h->n_fds);
	dbus_writer_close(&w);
	r = dbus_writer_finish(&w, &hdr, &hdr_len);
	dbus_writer_deinit(&w);
	if (r < 0)
		return r;
	header_len = ALIGN8(hdr_len);
	if (header_len + body_len > DBUS_MESSAGE_MAX)
		return -EMSGSIZE;
	out = calloc(1, header_len + body_len);
	if (!out)
		return -ENOMEM;
	memcpy(out, hdr, hdr_len);
	if (body_len)
		memcpy(out + header_len, body, body_len);
	*ret = out;
	*ret_len = header_len + body_len;
	return 0;
}

int dbus_message_stamp(struct dbus_message *m, const char *sender)
{
	struct dbus_header h = m->h;
	struct dbus_message n;
	void *data;
	size_t len;
	int r;

	if (m->h.signature) {
		/* Validated already, so this cannot fail; it only swaps bytes. */
		r = dbus_body_to_native(m->h.signature, (void *)m->body, m->body_len, m->byte_order,
					m->h.n_fds);
		if (r < 0)
			return r;
		m->byte_order = DBUS_NATIVE_ENDIAN;
	}
	h.sender = sender;
	r = dbus_message_write(&h, m->body, m->body_len, &data, &len);
	if (r < 0)
		return r;
	r = dbus_message_parse(&n, data, len, m->h.n_fds);
	if (r < 0) {
		dbus_message_deinit(&n);
		return -EINVAL;
	}
	dbus_message_deinit(m);
	*m = n;
	return 0;
}
