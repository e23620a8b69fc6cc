/* SPDX-License-Identifier: MIT */
/*
 * dbus-marshal-reader.c - what is done with a D-Bus "dbus1" body that came
 * from another process (see dbus-marshal.h): typed reads (dbus_reader_*())
 * and conversion to native byte order (dbus_body_to_native()).
 *
 * Both run only on bodies the validator (dbus-marshal-validate.c) passed,
 * and trust what it checked.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "protocol/dbus-marshal-internal.h"
#include "protocol/dbus-marshal.h"

int dbus_body_to_native(const char *signature, void *body, size_t len, char byte_order, uint32_t n_fds)
{
	int r = dbus_body_walk(signature, body, len, byte_order, n_fds, NULL);

	if (r < 0 || byte_order == DBUS_NATIVE_ENDIAN)
		return r;
	return dbus_body_walk(signature, body, len, byte_order, n_fds, body);
}

int dbus_reader_init(struct dbus_reader *r, const char *signature, const void *body, size_t len,
		     char byte_order, uint32_t n_fds)
{
	int ret;

	if (!r)
		return -EINVAL;
	ret = dbus_body_validate(signature, body, len, byte_order, n_fds);
	if (ret < 0)
		return ret;
	memset(r, 0, sizeof(*r));
	r->data = body;
	r->len = len;
	r->n_fds = n_fds;
	r->byte_order = byte_order;
	strcpy(r->signature, signature);
	r->frames[0].sig = r->signature;
	r->frames[0].sig_end = strlen(signature);
	return 0;
}

static bool reader_at_end(const struct dbus_reader *r)
{
	const struct dbus_reader_frame *f = &r->frames[r->depth];

	return f->type == 'a' ? r->pos >= f->data_end : f->sig_pos >= f->sig_end;
}

/* Past the value just read or entered. */
static void reader_advance(struct dbus_reader *r, struct dbus_reader_frame *f)
{
	if (f->type != 'a')
		f->sig_pos += dbus_sig_skip(f->sig + f->sig_pos);
}

int dbus_reader_peek(struct dbus_reader *r, char *type, const char **contents, size_t *contents_len)
{
	const struct dbus_reader_frame *f;
	const char *s, *c = NULL;
	size_t n = 0;

	if (!r)
		return -EINVAL;
	if (reader_at_end(r))
		return 0;
	f = &r->frames[r->depth];
	s = f->sig + f->sig_pos;
	switch (s[0]) {
	case 'a':
		c = s + 1;
		n = dbus_sig_skip(s) - 1;
		break;
	case '(':
	case '{':
		c = s + 1;
		n = dbus_sig_skip(s) - 2;
		break;
	case 'v':
		/* a variant needs no padding: its signature is right here */
		n = r->data[r->pos];
		c = (const char *)r->data + r->pos + 1;
		break;
	}
	if (type)
		*type = s[0];
	if (contents)
		*contents = c;
	if (contents_len)
		*contents_len = n;
	return 1;
}

/* The next value must be of this type: 1, 0 at the end, -ENXIO. */
static int reader_expect(struct dbus_reader *r, char type)
{
	char c;
	int ret = dbus_reader_peek(r, &c, NULL, NULL);

	if (ret <= 0)
		return ret;
	return c == type ? 1 : -ENXIO;
}

int dbus_reader_read_basic(struct dbus_reader *r, char type, void *value)
{
	bool swap = r && r->byte_order != DBUS_NATIVE_ENDIAN;
	unsigned int size = dbus_type_fixed_size(type);
	const uint8_t *p;
	size_t n;
	int ret;

	if (!dbus_type_is_basic(type))
		return -ENXIO;
	ret = reader_expect(r, type);
	if (ret <= 0)
		return ret;
	if (!value)
		return -EINVAL;
	r->pos = ALIGN_TO(r->pos, dbus_type_alignment(type));
	p = r->data + r->pos;

	if (type == 'b') {
		*(int *)value = load32(p, swap) != 0;
		n = 4;
	} else if (size > 0) {
		store_fixed(value, load_fixed(p, size, swap), size);
		n = size;
	} else if (type == 'g') {
		*(const char **)value = (const char *)p + 1;
		n = (size_t)p[0] + 2;
	} else { /* s, o */
		*(const char **)value = (const char *)p + 4;
		n = (size_t)load32(p, swap) + 5;
	}
	r->pos += n;
	reader_advance(r, &r->frames[r->depth]);
	return 1;
}

int dbus_reader_enter(struct dbus_reader *r, char type)
{
	struct dbus_reader_frame *parent, *f;
	bool swap;
	size_t n;
	int ret;

	if (type != 'a' && type != '(' && type != '{' && type != 'v')
		return -ENXIO;
	ret = reader_expect(r, type);
	if (ret <= 0)
		return ret;
	/* validation bounds the depth; this only guards the frame array */
	if (r->depth >= DBUS_DEPTH_MAX)
		return -ENXIO;
	swap = r->byte_order != DBUS_NATIVE_ENDIAN;
	parent = &r->frames[r->depth];
	f = &r->frames[r->depth + 1];
	*f = (struct dbus_reader_frame){ .type = type, .sig = parent->sig };
	n = dbus_sig_skip(parent->sig + parent->sig_pos);

	switch (type) {
	case 'a':
		f->sig_pos = parent->sig_pos + 1;
		f->sig_end = parent->sig_pos + n;
		r->pos = ALIGN_TO(r->pos, 4);
		n = load32(r->data + r->pos, swap);
		r->pos = ALIGN_TO(r->pos + 4, dbus_type_alignment(f->sig[f->sig_pos]));
		f->data_end = r->pos + n;
		break;
	case '(':
	case '{':
		f->sig_pos = parent->sig_pos + 1;
		f->sig_end = parent->sig_pos + n - 1;
		r->pos = ALIGN_TO(r->pos, 8);
		break;
	default: /* v */
		f->sig = (const char *)r->data + r->pos + 1;
		f->sig_end = r->data[r->pos];
		r->pos += f->sig_end + 2;
		break;
	}
	reader_advance(r, parent);
	r->depth++;
	return 1;
}

int dbus_reader_skip(struct dbus_reader *r)
{
	struct dbus_reader_frame *f;
	struct dbus_walk k;
	const char *s;
	int ret;

	if (!r)
		return -EINVAL;
	if (reader_at_end(r))
		return 0;
	f = &r->frames[r->depth];
	k = (struct dbus_walk){
		.data = r->data,
		.len = r->len,
		.pos = r->pos,
		.swap = r->byte_order != DBUS_NATIVE_ENDIAN,
		.n_fds = r->n_fds,
	};
	s = f->sig + f->sig_pos;
	/* validated already: this only finds the end */
	ret = dbus_walk_type(&k, &s, r->depth);
	if (ret < 0)
		return ret;
	r->pos = k.pos;
	reader_advance(r, f);
	return 1;
}

int dbus_reader_exit(struct dbus_reader *r)
{
	struct dbus_reader_frame *f;
	int ret;

	if (!r)
		return -EINVAL;
	if (r->depth == 0)
		return -ENXIO;
	f = &r->frames[r->depth];
	if (f->type == 'a') {
		r->pos = f->data_end;
	} else {
		while ((ret = dbus_reader_skip(r)) > 0)
			;
		if (ret < 0)
			return ret;
	}
	r->depth--;
	return 0;
}
