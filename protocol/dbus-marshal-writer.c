/* SPDX-License-Identifier: MIT */
/*
 * dbus-marshal-writer.c - building a D-Bus "dbus1" message body against
 * its signature (dbus_writer_*(), see dbus-marshal.h): alignment, values
 * checked as they are appended, containers and their lengths.
 *
 * The first error sticks, so a caller may append a whole body and check
 * only dbus_writer_finish().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal-internal.h"
#include "protocol/dbus-marshal.h"
#include "util/array.h"

static const char *writer_sig(const struct dbus_writer *w, const struct dbus_writer_frame *f)
{
	return f->sig_data == SIZE_MAX ? w->signature : (const char *)w->data + f->sig_data;
}

static int writer_fail(struct dbus_writer *w, int r)
{
	if (!w->error)
		w->error = r;
	return w->error;
}

static int writer_put(struct dbus_writer *w, const void *p, size_t n)
{
	int r;

	if (n > DBUS_MESSAGE_MAX - (w->len - w->room))
		return -EMSGSIZE;
	if (w->fixed && n > w->cap - w->len)
		return -EMSGSIZE;
	r = array_reserve((void **)&w->data, &w->cap, w->len + n, 1);
	if (r < 0)
		return r;
	if (n > 0)
		memcpy(w->data + w->len, p, n);
	w->len += n;
	return 0;
}

static int writer_align(struct dbus_writer *w, unsigned int a)
{
	static const uint8_t zero[8];

	return writer_put(w, zero, ALIGN_TO(w->len, a) - w->len);
}

static int writer_put_aligned(struct dbus_writer *w, const void *p, unsigned int size)
{
	int r = writer_align(w, size);

	return r < 0 ? r : writer_put(w, p, size);
}

/*
 * The innermost frame's next complete type must start with type: *pos and
 * *n locate it in the frame's signature, which moves past it (an array's
 * element type stays: it is the type of every element).
 */
static int writer_expect(struct dbus_writer *w, char type, size_t *pos, size_t *n)
{
	struct dbus_writer_frame *f = &w->frames[w->depth];
	const char *s = writer_sig(w, f);

	if (f->sig_pos >= f->sig_end || s[f->sig_pos] != type)
		return -ENXIO;
	*pos = f->sig_pos;
	*n = dbus_sig_skip(s + f->sig_pos);
	if (f->type != 'a')
		f->sig_pos += *n;
	return 0;
}

int dbus_writer_init_room(struct dbus_writer *w, const char *signature, size_t room)
{
	int k;

	k = dbus_writer_init(w, signature);
	if (k < 0 || room == 0)
		return k;
	if (room % 8 != 0 || room > DBUS_MESSAGE_MAX)
		return writer_fail(w, -EINVAL);
	/* the body's alignment stays that of its own offsets: room is a multiple of 8 */
	w->room = w->len = room;
	return 0;
}

int dbus_writer_init_fixed(struct dbus_writer *w, const char *signature, void *buf, size_t size)
{
	int k;

	k = dbus_writer_init(w, signature);
	if (k < 0)
		return k;
	if (!buf)
		return writer_fail(w, -EINVAL);
	w->data = buf;
	w->cap = size;
	w->fixed = true;
	return 0;
}

int dbus_writer_init(struct dbus_writer *w, const char *signature)
{
	size_t n;

	if (!w)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->frames[0].sig_data = SIZE_MAX;
	if (!signature)
		return writer_fail(w, -EINVAL);
	n = strnlen(signature, DBUS_SIGNATURE_MAX + 1);
	if (dbus_signature_validate(signature, n) < 0 || dbus_sig_depth(signature, n) > DBUS_DEPTH_MAX)
		return writer_fail(w, -EINVAL);
	memcpy(w->signature, signature, n + 1);
	w->frames[0].sig_end = n;
	return 0;
}

void dbus_writer_deinit(struct dbus_writer *w)
{
	if (!w)
		return;
	if (!w->fixed)
		free(w->data);
	w->data = NULL;
	w->len = w->cap = 0;
}

static int writer_put_string(struct dbus_writer *w, char type, const char *s)
{
	size_t n = strnlen(s, DBUS_MESSAGE_MAX);
	uint32_t n32 = (uint32_t)n;
	uint8_t n8 = (uint8_t)n;
	int r;

	r = dbus_string_like_validate(type, s, n);
	if (r < 0)
		return r;
	if (n >= DBUS_MESSAGE_MAX)
		return -EMSGSIZE;
	if (type == 'g')
		r = writer_put(w, &n8, 1);
	else
		r = writer_put_aligned(w, &n32, 4);
	return r < 0 ? r : writer_put(w, s, n + 1);
}

static int writer_put_basic(struct dbus_writer *w, char type, const void *value)
{
	uint32_t v32;

	switch (type) {
	case 's':
	case 'o':
	case 'g':
		return writer_put_string(w, type, value);
	case 'b':
		v32 = *(const int *)value != 0;
		return writer_put_aligned(w, &v32, 4);
	case 'h':
		v32 = *(const uint32_t *)value;
		if (v32 == UINT32_MAX)
			return -EINVAL;
		if (v32 >= w->n_fds)
			w->n_fds = v32 + 1;
		return writer_put_aligned(w, &v32, 4);
	default:
		return writer_put_aligned(w, value, dbus_type_fixed_size(type));
	}
}

int dbus_writer_append_basic(struct dbus_writer *w, char type, const void *value)
{
	size_t pos, n;
	int r;

	if (!w)
		return -EINVAL;
	if (w->error)
		return w->error;
	if (!value || !dbus_type_is_basic(type))
		return writer_fail(w, -EINVAL);
	r = writer_expect(w, type, &pos, &n);
	if (r < 0)
		return writer_fail(w, r);
	r = writer_put_basic(w, type, value);
	return r < 0 ? writer_fail(w, r) : 0;
}

/* contents, when given, must be [pos, pos + n) of the frame's signature. */
static bool contents_match(const char *contents, const char *s, size_t n)
{
	return !contents || (strnlen(contents, n + 1) == n && memcmp(contents, s, n) == 0);
}

static int writer_open(struct dbus_writer *w, char type, const char *contents)
{
	struct dbus_writer_frame *parent = &w->frames[w->depth], *f = &w->frames[w->depth + 1];
	const char *s;
	unsigned int align;
	size_t pos, n, cn;
	uint8_t n8;
	int r;

	if (type != 'a' && type != '(' && type != '{' && type != 'v')
		return -EINVAL;
	if (w->depth >= DBUS_DEPTH_MAX)
		return -ELOOP;
	r = writer_expect(w, type, &pos, &n);
	if (r < 0)
		return r;
	s = writer_sig(w, parent);
	*f = (struct dbus_writer_frame){ .type = type, .sig_data = parent->sig_data };

	switch (type) {
	case 'a':
		if (!contents_match(contents, s + pos + 1, n - 1))
			return -ENXIO;
		f->sig_pos = pos + 1;
		f->sig_end = pos + n;
		/* s can move with the buffer (a variant's signature): read it first */
		align = dbus_type_alignment(s[pos + 1]);
		r = writer_align(w, 4);
		if (r < 0)
			return r;
		f->len_offset = w->len;
		r = writer_put(w, &(uint32_t){ 0 }, 4);
		if (r < 0)
			return r;
		r = writer_align(w, align);
		if (r < 0)
			return r;
		f->data_start = w->len;
		break;
	case '(':
	case '{':
		if (!contents_match(contents, s + pos + 1, n - 2))
			return -ENXIO;
		f->sig_pos = pos + 1;
		f->sig_end = pos + n - 1;
		r = writer_align(w, 8);
		if (r < 0)
			return r;
		break;
	case 'v':
		if (!contents)
			return -EINVAL;
		cn = strnlen(contents, DBUS_SIGNATURE_MAX + 1);
		if (dbus_signature_validate_single(contents, cn) < 0)
			return -EINVAL;
		/* the variant's level plus the levels inside it */
		if (w->depth + 1 + dbus_sig_depth(contents, cn) > DBUS_DEPTH_MAX)
			return -ELOOP;
		n8 = (uint8_t)cn;
		r = writer_put(w, &n8, 1);
		if (r < 0)
			return r;
		f->sig_data = w->len;
		f->sig_pos = 0;
		f->sig_end = cn;
		r = writer_put(w, contents, cn + 1);
		if (r < 0)
			return r;
		break;
	}
	w->depth++;
	return 0;
}

int dbus_writer_open(struct dbus_writer *w, char type, const char *contents)
{
	int r;

	if (!w)
		return -EINVAL;
	if (w->error)
		return w->error;
	r = writer_open(w, type, contents);
	return r < 0 ? writer_fail(w, r) : 0;
}

int dbus_writer_close(struct dbus_writer *w)
{
	struct dbus_writer_frame *f;
	uint32_t n;

	if (!w)
		return -EINVAL;
	if (w->error)
		return w->error;
	if (w->depth == 0)
		return writer_fail(w, -ENXIO);
	f = &w->frames[w->depth];
	if (f->type == 'a') {
		if (w->len - f->data_start > DBUS_ARRAY_MAX)
			return writer_fail(w, -EMSGSIZE);
		n = (uint32_t)(w->len - f->data_start);
		memcpy(w->data + f->len_offset, &n, 4);
	} else if (f->sig_pos != f->sig_end) {
		return writer_fail(w, -ENXIO);
	}
	w->depth--;
	return 0;
}

static int writer_put_array(struct dbus_writer *w, char type, const uint8_t *values, size_t n)
{
	size_t size = dbus_type_fixed_size(type);
	int r;

	if (n > DBUS_ARRAY_MAX / size)
		return -EMSGSIZE;
	if (type != 'b' && type != 'h')
		return writer_put(w, values, n * size);
	/* b is an int in C; h counts the fds */
	for (size_t i = 0; i < n; i++) {
		r = writer_put_basic(w, type, values + i * (type == 'b' ? sizeof(int) : 4));
		if (r < 0)
			return r;
	}
	return 0;
}

int dbus_writer_append_array(struct dbus_writer *w, char type, const void *values, size_t n)
{
	int r;

	if (!w)
		return -EINVAL;
	if (w->error)
		return w->error;
	if (!dbus_type_is_fixed(type) || (!values && n > 0))
		return writer_fail(w, -EINVAL);
	r = dbus_writer_open(w, 'a', (char[]){ type, 0 });
	if (r < 0)
		return r;
	r = writer_put_array(w, type, values, n);
	if (r < 0)
		return writer_fail(w, r);
	return dbus_writer_close(w);
}

int dbus_writer_finish(struct dbus_writer *w, void **body, size_t *len)
{
	if (!w || !body || !len)
		return -EINVAL;
	if (w->error)
		return w->error;
	if (w->depth > 0 || w->frames[0].sig_pos != w->frames[0].sig_end)
		return writer_fail(w, -ENXIO);
	*body = w->data;
	*len = w->len;
	w->data = NULL;
	w->len = w->cap = 0;
	return 0;
}
