/* SPDX-License-Identifier: MIT */
/*
 * dbus-marshal-internal.h - what the three parts of the body marshalling
 * share (dbus-marshal-validate.c, -writer.c, -reader.c): loads and stores
 * of fixed values in either byte order, walking signatures already known to
 * be valid, and the validator's walk, which the reader reuses to skip a
 * value and byte-order conversion reuses to rewrite one.
 *
 * Private to protocol/: nothing outside the dbus-marshal-*.c files includes
 * it. The public API is dbus-marshal.h.
 */
#ifndef BROKERD_PROTOCOL_DBUS_MARSHAL_INTERNAL_H
#define BROKERD_PROTOCOL_DBUS_MARSHAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "protocol/dbus-marshal.h"

#define ALIGN_TO(x, a) (((x) + (a)-1) & ~((size_t)(a)-1))

static inline uint16_t load16(const uint8_t *p, bool swap)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap16(v) : v;
}

static inline uint32_t load32(const uint8_t *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
}

static inline uint64_t load64(const uint8_t *p, bool swap)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap64(v) : v;
}

/* A fixed value of size bytes, in native order. */
static inline uint64_t load_fixed(const uint8_t *p, unsigned int size, bool swap)
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

static inline void store_fixed(void *p, uint64_t v, unsigned int size)
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
int dbus_string_like_validate(char type, const char *s, size_t n);

/* ---- Signatures already known to be valid ----------------------------------- */

/* Length of the complete type at s. */
size_t dbus_sig_skip(const char *s);
/* Container levels of the n bytes of complete types at s (a, (, { and v count one). */
unsigned int dbus_sig_depth(const char *s, size_t n);

/* ---- The validator's walk ------------------------------------------------------ */

/*
 * One pass over a body. With out set (the same buffer as data), every
 * multi-byte integer is rewritten in native order right after it was read
 * and checked; the walk is then only run on a body already validated.
 */
struct dbus_walk {
	const uint8_t *data;
	uint8_t *out;
	size_t len, pos;
	bool swap;
	uint32_t n_fds;
};

/*
 * One value of the complete type at *sig, which is advanced past it; depth:
 * the container level it is in. 0 or -EBADMSG.
 */
int dbus_walk_type(struct dbus_walk *k, const char **sig, unsigned int depth);

/*
 * The whole body, validated (out NULL) or, on a body validated already,
 * rewritten into out in native byte order. 0, -EBADMSG or -EINVAL.
 */
int dbus_body_walk(const char *signature, const void *body, size_t len, char byte_order, uint32_t n_fds,
		   uint8_t *out);

#endif
