/* SPDX-License-Identifier: MIT */
/*
 * dbus-marshal-validate.c - the one-pass validator of D-Bus "dbus1"
 * message bodies (dbus_body_validate(), see dbus-marshal.h), and the
 * signature walks the writer and reader share with it.
 *
 * The validator walks the signature and the bytes together, so its cost is
 * linear in the body (plus one signature check per variant). The same walk
 * rewrites a validated body in native byte order (dbus-marshal-reader.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "protocol/dbus-marshal-internal.h"
#include "protocol/dbus-marshal.h"

/* The rule of a string-like type: s, o or g. */
int dbus_string_like_validate(char type, const char *s, size_t n)
{
	if (type == 's')
		return dbus_string_validate(s, n);
	if (type == 'o')
		return dbus_object_path_validate(s, n);
	return dbus_signature_validate(s, n);
}

/* ---- Signatures already known to be valid ----------------------------------- */

/* Length of the complete type at s. */
size_t dbus_sig_skip(const char *s)
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

unsigned int dbus_sig_depth(const char *s, size_t n)
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

static bool walk_has(const struct dbus_walk *k, size_t n)
{
	return n <= k->len - k->pos;
}

/* Padding to a: present and zero. */
static int walk_align(struct dbus_walk *k, unsigned int a)
{
	size_t end = ALIGN_TO(k->pos, a);

	if (end > k->len)
		return -EBADMSG;
	for (; k->pos < end; k->pos++)
		if (k->data[k->pos] != 0)
			return -EBADMSG;
	return 0;
}

static int walk_fixed(struct dbus_walk *k, char type)
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
static int walk_length(struct dbus_walk *k, uint32_t *n)
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

static int walk_string(struct dbus_walk *k, char type)
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
	if (dbus_string_like_validate(type, s, n) < 0)
		return -EBADMSG;
	k->pos += (size_t)n + 1;
	return 0;
}

/* *sig: the element type; level: the array's own container level. */
static int walk_array(struct dbus_walk *k, const char **sig, unsigned int level)
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
		*sig = elem + dbus_sig_skip(elem);
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
		r = dbus_walk_type(k, &s, level);
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
static int walk_variant(struct dbus_walk *k, unsigned int level)
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
	if (level + dbus_sig_depth(s, n) > DBUS_DEPTH_MAX)
		return -EBADMSG;
	k->pos += n + 2;
	return dbus_walk_type(k, &s, level);
}

int dbus_walk_type(struct dbus_walk *k, const char **sig, unsigned int depth)
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
			r = dbus_walk_type(k, sig, depth + 1);
			if (r < 0)
				return r;
		}
		(*sig)++;
		return 0;
	default:
		return walk_fixed(k, c);
	}
}

int dbus_body_walk(const char *signature, const void *body, size_t len, char byte_order, uint32_t n_fds,
		   uint8_t *out)
{
	struct dbus_walk k = {
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
	if (dbus_signature_validate(signature, n) < 0 || dbus_sig_depth(signature, n) > DBUS_DEPTH_MAX)
		return -EBADMSG;
	if ((byte_order != DBUS_LITTLE_ENDIAN && byte_order != DBUS_BIG_ENDIAN) || len > DBUS_MESSAGE_MAX)
		return -EBADMSG;
	while (*s) {
		r = dbus_walk_type(&k, &s, 0);
		if (r < 0)
			return r;
	}
	return k.pos == len ? 0 : -EBADMSG;
}

int dbus_body_validate(const char *signature, const void *body, size_t len, char byte_order, uint32_t n_fds)
{
	return dbus_body_walk(signature, body, len, byte_order, n_fds, NULL);
}
