/* SPDX-License-Identifier: MIT */
/*
 * dbus-marshal.c - D-Bus "dbus1" message bodies: writer, one-pass
 * validator, byte-order conversion and typed reader. See dbus-marshal.h.
 *
 * The validator walks the signature and the bytes together, so its cost is
 * linear in the body (plus one signature check per variant). The reader
 * only runs on validated bodies and trusts what the validator checked.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "util/array.h"

#define ALIGN_TO(x, a) (((x) + (a)-1) & ~((size_t)(a)-1))

static uint16_t load16(const uint8_t *p, bool swap)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap16(v) : v;
}

static uint32_t load32(const uint8_t *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
}

static uint64_t load64(const uint8_t *p, bool swap)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap64(v) : v;
}

/* A fixed value of size bytes, in native order. */
static uint64_t load_fixed(const uint8_t *p, unsigned int size, bool swap)
{
	switch (size) {
	case 1:
		return p[0];
	case 2:
		return load16(p, swap);
	case 4:
		return load32(p, swap);
	default:
		return load64(p, swap);
	}
}

static void store_fixed(void *p, uint64_t v, unsigned int size)
{
	uint32_t v32 = (uint32_t)v;
	uint16_t v16 = (uint16_t)v;
	uint8_t v8 = (uint8_t)v;

	if (size == 1)
		memcpy(p, &v8, 1);
	else if (size == 2)
		memcpy(p, &v16, 2);
	else if (size == 4)
		memcpy(p, &v32, 4);
	else
		memcpy(p, &v, 8);
}

/* The rule of a string-like type: s, o or g. */
static int string_validate(char type, const char *s, size_t n)
{
	if (type == 's')
		return dbus_string_validate(s, n);
	if (type == 'o')
		return dbus_object_path_validate(s, n);
	return dbus_signature_validate(s, n);
}

/* ---- Signatures already known to be valid ----------------------------------- */

/* Length of the complete type at s. */
static size_t sig_skip(const char *s)
{
	unsigned int open = 0;
	size_t i = 0;

	for (;;) {
		char c = s[i++];

		if (c == 'a')
			continue;
		if (c == '(' || c == '{')
			open++;
		else if (c == ')' || c == '}')
			open--;
		if (open == 0)
			return i;
	}
}

/* Container levels of the complete type at *s (a, (, { and v count one). */
static unsigned int type_depth(const char **s)
{
	unsigned int d = 0, x;
	char c = *(*s)++;

	switch (c) {
	case 'a':
		return 1 + type_depth(s);
	case 'v':
		return 1;
	case '(':
	case '{':
		while (**s != ')' && **s != '}') {
			x = type_depth(s);
			if (x > d)
				d = x;
		}
		(*s)++;
		return 1 + d;
	default:
		return 0;
	}
}

static unsigned int sig_depth(const char *s, size_t n)
{
	const char *p = s;
	unsigned int d = 0, x;

	while (p < s + n) {
		x = type_depth(&p);
		if (x > d)
			d = x;
	}
	return d;
}

/* ---- Validator ---------------------------------------------------------------- */

/*
 * One pass over a body. With out set (the same buffer as data), every
 * multi-byte integer is rewritten in native order right after it was read
 * and checked; the walk is then only run on a body already validated.
 */
struct walk {
	const uint8_t *data;
	uint8_t *out;
	size_t len, pos;
	bool swap;
	uint32_t n_fds;
};

static bool walk_has(const struct walk *k, size_t n)
{
	return n <= k->len - k->pos;
}

/* Padding to a: present and zero. */
static int walk_align(struct walk *k, unsigned int a)
{
	size_t end = ALIGN_TO(k->pos, a);

	if (end > k->len)
		return -EBADMSG;
	for (; k->pos < end; k->pos++)
		if (k->data[k->pos] != 0)
			return -EBADMSG;
	return 0;
}

static int walk_fixed(struct walk *k, char type)
{
	unsigned int size = dbus_type_fixed_size(type);
	uint64_t v;
	int r;

	if (size == 0)
		return -EBADMSG;
	r = walk_align(k, size);
	if (r < 0)
		return r;
	if (!walk_has(k, size))
		return -EBADMSG;
	v = load_fixed(k->data + k->pos, size, k->swap);
	if ((type == 'b' && v > 1) || (type == 'h' && v >= k->n_fds))
		return -EBADMSG;
	if (k->out)
		store_fixed(k->out + k->pos, v, size);
	k->pos += size;
	return 0;
}

/* A uint32 length (aligned, converted when rewriting). */
static int walk_length(struct walk *k, uint32_t *n)
{
	int r = walk_align(k, 4);

	if (r < 0)
		return r;
	if (!walk_has(k, 4))
		return -EBADMSG;
	*n = load32(k->data + k->pos, k->swap);
	if (k->out)
		memcpy(k->out + k->pos, n, 4);
	k->pos += 4;
	return 0;
}

static int walk_string(struct walk *k, char type)
{
	const char *s;
	uint32_t n;
	int r;

	if (type == 'g') {
		if (!walk_has(k, 1))
			return -EBADMSG;
		n = k->data[k->pos++];
	} else {
		r = walk_length(k, &n);
		if (r < 0)
			return r;
	}
	/* n bytes and the NUL */
	if (n >= k->len - k->pos)
		return -EBADMSG;
	s = (const char *)k->data + k->pos;
	if (s[n] != 0)
		return -EBADMSG;
	if (string_validate(type, s, n) < 0)
		return -EBADMSG;
	k->pos += (size_t)n + 1;
	return 0;
}

static int walk_type(struct walk *k, const char **sig, unsigned int depth);

/* *sig: the element type; level: the array's own container level. */
static int walk_array(struct walk *k, const char **sig, unsigned int level)
{
	const char *elem = *sig, *s = elem;
	unsigned int size = dbus_type_fixed_size(elem[0]);
	size_t end;
	uint32_t n;
	int r;

	r = walk_length(k, &n);
	if (r < 0)
		return r;
	if (n > DBUS_ARRAY_MAX)
		return -EBADMSG;
	/* the padding before the first element is there even with none */
	r = walk_align(k, dbus_type_alignment(elem[0]));
	if (r < 0)
		return r;
	if (n > k->len - k->pos)
		return -EBADMSG;
	end = k->pos + n;

	if (n == 0) {
		*sig = elem + sig_skip(elem);
		return 0;
	}
	/* fixed elements without a value rule: nothing to check but the size */
	if (size > 0 && !k->out && elem[0] != 'b' && elem[0] != 'h') {
		if (n % size != 0)
			return -EBADMSG;
		k->pos = end;
		*sig = elem + 1;
		return 0;
	}
	while (k->pos < end) {
		s = elem;
		r = walk_type(k, &s, level);
		if (r < 0)
			return r;
	}
	/* the last element must end exactly where the length says */
	if (k->pos != end)
		return -EBADMSG;
	*sig = s;
	return 0;
}

/* level: the variant's own container level. */
static int walk_variant(struct walk *k, unsigned int level)
{
	const char *s;
	size_t n;

	if (!walk_has(k, 1))
		return -EBADMSG;
	n = k->data[k->pos];
	if (!walk_has(k, n + 2))
		return -EBADMSG;
	s = (const char *)k->data + k->pos + 1;
	if (s[n] != 0 || dbus_signature_validate_single(s, n) < 0)
		return -EBADMSG;
	if (level + sig_depth(s, n) > DBUS_DEPTH_MAX)
		return -EBADMSG;
	k->pos += n + 2;
	return walk_type(k, &s, level);
}

/* One value of the complete type at *sig, which is advanced past it. */
static int walk_type(struct walk *k, const char **sig, unsigned int depth)
{
	char c = *(*sig)++;
	int r;

	switch (c) {
	case 's':
	case 'o':
	case 'g':
		return walk_string(k, c);
	case 'a':
		return walk_array(k, sig, depth + 1);
	case 'v':
		return walk_variant(k, depth + 1);
	case '(':
	case '{':
		r = walk_align(k, 8);
		if (r < 0)
			return r;
		while (**sig != ')' && **sig != '}') {
			r = walk_type(k, sig, depth + 1);
			if (r < 0)
				return r;
		}
		(*sig)++;
		return 0;
	default:
		return walk_fixed(k, c);
	}
}

static int body_walk(const char *signature, const void *body, size_t len, char byte_order, uint32_t n_fds,
		     uint8_t *out)
{
	struct walk k = {
		.data = body,
		.out = out,
		.len = len,
		.swap = byte_order != DBUS_NATIVE_ENDIAN,
		.n_fds = n_fds,
	};
	const char *s = signature;
	size_t n;
	int r;

	if (!signature || (!body && len > 0))
		return -EINVAL;
	n = strnlen(signature, DBUS_SIGNATURE_MAX + 1);
	if (dbus_signature_validate(signature, n) < 0 || sig_depth(signature, n) > DBUS_DEPTH_MAX)
		return -EBADMSG;
	if ((byte_order != DBUS_LITTLE_ENDIAN && byte_order != DBUS_BIG_ENDIAN) || len > DBUS_MESSAGE_MAX)
		return -EBADMSG;
	while (*s) {
		r = walk_type(&k, &s, 0);
		if (r < 0)
			return r;
	}
	return k.pos == len ? 0 : -EBADMSG;
}

int dbus_body_validate(const char *signature, const void *body, size_t len, char byte_order, uint32_t n_fds)
{
	return body_walk(signature, body, len, byte_order, n_fds, NULL);
}

int dbus_body_to_native(const char *signature, void *body, size_t len, char byte_order, uint32_t n_fds)
{
	int r = body_walk(signature, body, len, byte_order, n_fds, NULL);

	if (r < 0 || byte_order == DBUS_NATIVE_ENDIAN)
		return r;
	return body_walk(signature, body, len, byte_order, n_fds, body);
}

/* ---- Writer ------------------------------------------------------------------- */

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

	if (n > DBUS_MESSAGE_MAX - w->len)
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
	*n = sig_skip(s + f->sig_pos);
	if (f->type != 'a')
		f->sig_pos += *n;
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
	if (dbus_signature_validate(signature, n) < 0 || sig_depth(signature, n) > DBUS_DEPTH_MAX)
		return writer_fail(w, -EINVAL);
	memcpy(w->signature, signature, n + 1);
	w->frames[0].sig_end = n;
	return 0;
}

void dbus_writer_deinit(struct dbus_writer *w)
{
	if (!w)
		return;
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

	r = string_validate(type, s, n);
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
		if (w->depth + 1 + sig_depth(contents, cn) > DBUS_DEPTH_MAX)
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

/* ---- Reader ------------------------------------------------------------------- */

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
		f->sig_pos += sig_skip(f->sig + f->sig_pos);
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
		n = sig_skip(s) - 1;
		break;
	case '(':
	case '{':
		c = s + 1;
		n = sig_skip(s) - 2;
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
	n = sig_skip(parent->sig + parent->sig_pos);

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
	struct walk k;
	const char *s;
	int ret;

	if (!r)
		return -EINVAL;
	if (reader_at_end(r))
		return 0;
	f = &r->frames[r->depth];
	k = (struct walk){
		.data = r->data,
		.len = r->len,
		.pos = r->pos,
		.swap = r->byte_order != DBUS_NATIVE_ENDIAN,
		.n_fds = r->n_fds,
	};
	s = f->sig + f->sig_pos;
	/* validated already: this only finds the end */
	ret = walk_type(&k, &s, r->depth);
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
