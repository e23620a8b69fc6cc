/* SPDX-License-Identifier: MIT */
/*
 * test-dbus-marshal.c - unit tests of dbus-marshal.c: writer, validator,
 * reader and byte-order conversion, with byte vectors from the examples of
 * the D-Bus specification.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "util/macro.h"
#include "util/test.h"

static bool little_endian(void)
{
	return DBUS_NATIVE_ENDIAN == DBUS_LITTLE_ENDIAN;
}

static char other_endian(void)
{
	return little_endian() ? DBUS_BIG_ENDIAN : DBUS_LITTLE_ENDIAN;
}

static void writer_deinitp(struct dbus_writer *w)
{
	dbus_writer_deinit(w);
}
#define _cleanup_writer_ _cleanup_(writer_deinitp)

/* Writes the body of the signature with the calls in fn, checks it validates. */
static size_t build(const char *sig, void (*fn)(struct dbus_writer *), uint8_t *out, size_t size)
{
	_cleanup_writer_ struct dbus_writer w;
	_cleanup_free_ void *body = NULL;
	size_t len;

	ASSERT_INT(dbus_writer_init(&w, sig), ==, 0);
	fn(&w);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, 0);
	ASSERT(len <= size);
	if (len > 0)
		memcpy(out, body, len);
	ASSERT_INT(dbus_body_validate(sig, out, len, DBUS_NATIVE_ENDIAN, w.n_fds), ==, 0);
	return len;
}

/* ---- Basic types ---------------------------------------------------------- */

static void write_basic(struct dbus_writer *w)
{
	uint8_t y = 0xfe;
	int b = 7; /* any non-zero is true */
	int16_t n = -2;
	uint16_t q = 0xbeef;
	int32_t i = -100000;
	uint32_t u = 0xdeadbeef;
	int64_t x = -5000000000LL;
	uint64_t t = 0x0102030405060708ULL;
	double d = -1.5;
	uint32_t h = 2;

	ASSERT_INT(dbus_writer_append_basic(w, 'y', &y), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'b', &b), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'n', &n), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'q', &q), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'i', &i), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'u', &u), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'x', &x), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 't', &t), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'd', &d), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 's', "h\xc3\xa9llo"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'o', "/org/example/Obj1"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'g', "a{sv}"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'h', &h), ==, 0);
	ASSERT_INT(w->n_fds, ==, 3);
}

static void read_basic(struct dbus_reader *r)
{
	uint8_t y;
	int b;
	int16_t n;
	uint16_t q;
	int32_t i;
	uint32_t u, h;
	int64_t x;
	uint64_t t;
	double d;
	const char *s, *o, *g;

	ASSERT_INT(dbus_reader_read_basic(r, 'y', &y), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'b', &b), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'n', &n), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'q', &q), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'i', &i), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'u', &u), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'x', &x), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 't', &t), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'd', &d), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 's', &s), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'o', &o), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'g', &g), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'h', &h), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(r, 'h', &h), ==, 0);
	ASSERT(y == 0xfe && b == 1 && n == -2 && q == 0xbeef && i == -100000);
	ASSERT(u == 0xdeadbeef && x == -5000000000LL && t == 0x0102030405060708ULL);
	ASSERT(d == -1.5 && h == 2);
	ASSERT(strcmp(s, "h\xc3\xa9llo") == 0 && strcmp(o, "/org/example/Obj1") == 0);
	ASSERT(strcmp(g, "a{sv}") == 0);
}

static void test_basic(void)
{
	const char *sig = "ybnqiuxtdsogh";
	struct dbus_reader r;
	uint8_t buf[256];
	size_t len;

	len = build(sig, write_basic, buf, sizeof(buf));
	/* y @0, pad 3, b @4, n @8, q @10, i @12, u @16, pad 4, x @24, t @32, d @40 */
	ASSERT_INT(len, ==, 48 + 4 + 7 + 1 + 4 + 18 + 7 + 3 + 4);
	ASSERT(buf[0] == 0xfe && buf[1] == 0 && buf[2] == 0 && buf[3] == 0);
	ASSERT(buf[20] == 0 && buf[21] == 0 && buf[22] == 0 && buf[23] == 0);
	ASSERT_INT(dbus_reader_init(&r, sig, buf, len, DBUS_NATIVE_ENDIAN, 3), ==, 0);
	read_basic(&r);
	/* the fd index 2 needs three fds */
	ASSERT_INT(dbus_body_validate(sig, buf, len, DBUS_NATIVE_ENDIAN, 2), ==, -EBADMSG);

	/* in the other byte order the boolean 1 reads as 1 << 24 */
	ASSERT_INT(dbus_reader_init(&r, "ybnq", buf, 12, other_endian(), 0), ==, -EBADMSG);
	ASSERT_INT(dbus_reader_init(&r, "y", buf, 1, other_endian(), 0), ==, 0);
}

/* ---- Containers ------------------------------------------------------------- */

static void write_dict(struct dbus_writer *w)
{
	uint32_t u = 7;
	int32_t i = 42;

	ASSERT_INT(dbus_writer_open(w, 'a', "{sv}"), ==, 0);

	ASSERT_INT(dbus_writer_open(w, '{', "sv"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 's', "Count"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'v', "u"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'u', &u), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);

	/* nested variants: v(v(a{si})) */
	ASSERT_INT(dbus_writer_open(w, '{', NULL), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 's', "Nested"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'v', "v"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'v', "a{si}"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'a', "{si}"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, '{', "si"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 's', "answer"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'i', &i), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);

	/* an empty array of structs inside a variant */
	ASSERT_INT(dbus_writer_open(w, '{', NULL), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 's', "Empty"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'v', "a(tt)"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'a', NULL), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);

	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'y', &(uint8_t){ 9 }), ==, 0);
}

static void test_dict(void)
{
	const char *sig = "a{sv}y", *s, *c;
	struct dbus_reader r;
	uint8_t buf[512];
	size_t len, cl;
	uint32_t u;
	int32_t i;
	uint8_t y;
	char t;

	len = build(sig, write_dict, buf, sizeof(buf));
	ASSERT_INT(dbus_reader_init(&r, sig, buf, len, DBUS_NATIVE_ENDIAN, 0), ==, 0);

	ASSERT_INT(dbus_reader_peek(&r, &t, &c, &cl), ==, 1);
	ASSERT(t == 'a' && cl == 4 && memcmp(c, "{sv}", 4) == 0);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, -ENXIO);
	ASSERT_INT(dbus_reader_enter(&r, 'a'), ==, 1);

	ASSERT_INT(dbus_reader_enter(&r, '{'), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, 1);
	ASSERT(strcmp(s, "Count") == 0);
	ASSERT_INT(dbus_reader_peek(&r, &t, &c, &cl), ==, 1);
	ASSERT(t == 'v' && cl == 1 && c[0] == 'u');
	ASSERT_INT(dbus_reader_enter(&r, 'v'), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 'u', &u), ==, 1);
	ASSERT_INT(u, ==, 7);
	ASSERT_INT(dbus_reader_read_basic(&r, 'u', &u), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);

	ASSERT_INT(dbus_reader_enter(&r, '{'), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, 1);
	ASSERT(strcmp(s, "Nested") == 0);
	ASSERT_INT(dbus_reader_enter(&r, 'v'), ==, 1);
	ASSERT_INT(dbus_reader_enter(&r, 'v'), ==, 1);
	ASSERT_INT(dbus_reader_enter(&r, 'a'), ==, 1);
	ASSERT_INT(dbus_reader_enter(&r, '{'), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 'i', &i), ==, 1);
	ASSERT(strcmp(s, "answer") == 0 && i == 42);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_enter(&r, '{'), ==, 0); /* end of the array */
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);

	/* skip the third entry whole, then leave the array */
	ASSERT_INT(dbus_reader_skip(&r), ==, 1);
	ASSERT_INT(dbus_reader_skip(&r), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_read_basic(&r, 'y', &y), ==, 1);
	ASSERT_INT(y, ==, 9);
	ASSERT_INT(dbus_reader_peek(&r, &t, NULL, NULL), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, -ENXIO);

	/* leaving early skips what was not read */
	ASSERT_INT(dbus_reader_init(&r, sig, buf, len, DBUS_NATIVE_ENDIAN, 0), ==, 0);
	ASSERT_INT(dbus_reader_enter(&r, 'a'), ==, 1);
	ASSERT_INT(dbus_reader_enter(&r, '{'), ==, 1);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);
	ASSERT_INT(dbus_reader_read_basic(&r, 'y', &y), ==, 1);
	ASSERT_INT(y, ==, 9);

	/* every truncation and one byte more are invalid */
	for (size_t k = 0; k < len; k++)
		ASSERT_INT(dbus_body_validate(sig, buf, k, DBUS_NATIVE_ENDIAN, 0), ==, -EBADMSG);
	buf[len] = 0;
	ASSERT_INT(dbus_body_validate(sig, buf, len + 1, DBUS_NATIVE_ENDIAN, 0), ==, -EBADMSG);
}

static void write_empty_8(struct dbus_writer *w)
{
	uint8_t y = 1;

	ASSERT_INT(dbus_writer_append_basic(w, 'y', &y), ==, 0);
	ASSERT_INT(dbus_writer_append_array(w, 't', NULL, 0), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'a', "(y)"), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
}

/* Padding before the first element is there even when there is none. */
static void test_empty_array(void)
{
	uint8_t buf[64] = { 0 };
	size_t len = build("yata(y)", write_empty_8, buf, sizeof(buf));
	uint8_t expect[] = {
		1, 0, 0, 0, 0, 0, 0, 0, /* y, pad, at: length 0 (at 8 already) */
		0, 0, 0, 0, 0, 0, 0, 0, /* a(y): length 0, pad to 8 */
	};

	ASSERT_INT(len, ==, 16);
	ASSERT(memcmp(buf, expect, 16) == 0);
	/* without the padding it is invalid */
	ASSERT_INT(dbus_body_validate("yat", buf, 8, DBUS_NATIVE_ENDIAN, 0), ==, 0);
	ASSERT_INT(dbus_body_validate("at", buf + 4, 4, DBUS_NATIVE_ENDIAN, 0), ==, -EBADMSG);
	ASSERT_INT(dbus_body_validate("at", buf + 8, 8, DBUS_NATIVE_ENDIAN, 0), ==, 0);
}

static void write_aligned(struct dbus_writer *w)
{
	uint8_t y[3] = { 1, 2, 3 };
	uint64_t t = 5;

	ASSERT_INT(dbus_writer_open(w, 'a', "(yt)"), ==, 0);
	for (int k = 0; k < 2; k++) {
		ASSERT_INT(dbus_writer_open(w, '(', "yt"), ==, 0);
		ASSERT_INT(dbus_writer_append_basic(w, 'y', &y[k]), ==, 0);
		ASSERT_INT(dbus_writer_append_basic(w, 't', &t), ==, 0);
		ASSERT_INT(dbus_writer_close(w), ==, 0);
	}
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_append_array(w, 'y', y, 3), ==, 0);
	ASSERT_INT(dbus_writer_append_array(w, 'b', (int[]){ 1, 0 }, 2), ==, 0);
}

/* Array length: from the first element to the end of the last, no padding. */
static void test_array_length(void)
{
	uint8_t buf[128];
	size_t len = build("a(yt)ayab", write_aligned, buf, sizeof(buf));
	uint32_t n;

	memcpy(&n, buf, 4);
	ASSERT_INT(n, ==, 32);
	memcpy(&n, buf + 40, 4);
	ASSERT_INT(n, ==, 3);
	memcpy(&n, buf + 48, 4);
	ASSERT_INT(n, ==, 8);
	ASSERT_INT(len, ==, 60);

	/* lengths that end inside the second element */
	n = 31;
	memcpy(buf, &n, 4);
	ASSERT_INT(dbus_body_validate("a(yt)ayab", buf, len, DBUS_NATIVE_ENDIAN, 0), ==, -EBADMSG);
	n = 20;
	memcpy(buf, &n, 4);
	ASSERT_INT(dbus_body_validate("a(yt)ayab", buf, len, DBUS_NATIVE_ENDIAN, 0), ==, -EBADMSG);
	n = 7;
	memcpy(buf + 48, &n, 4);
	ASSERT_INT(dbus_body_validate("ab", buf + 48, 12, DBUS_NATIVE_ENDIAN, 0), ==, -EBADMSG);
}

/* ---- Byte order: the vectors of the specification ------------------------------ */

static void test_spec_vectors(void)
{
	/* big-endian array holding the int64 5 */
	uint8_t at[] = { 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	/* big-endian variant holding the uint64 5 */
	uint8_t vt[] = { 1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	/* little-endian strings 'foo', '+', 'bar' */
	uint8_t sss[] = {
		3, 0, 0, 0, 'f', 'o', 'o', 0, 1, 0, 0, 0, '+', 0, 0, 0, 3, 0, 0, 0, 'b', 'a', 'r', 0,
	};
	struct dbus_reader r;
	const char *s;
	int64_t x;
	uint64_t t;

	ASSERT_INT(dbus_reader_init(&r, "ax", at, sizeof(at), DBUS_BIG_ENDIAN, 0), ==, 0);
	ASSERT_INT(dbus_reader_enter(&r, 'a'), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 'x', &x), ==, 1);
	ASSERT_INT(x, ==, 5);
	ASSERT_INT(dbus_reader_read_basic(&r, 'x', &x), ==, 0);
	ASSERT_INT(dbus_reader_exit(&r), ==, 0);

	ASSERT_INT(dbus_reader_init(&r, "v", vt, sizeof(vt), DBUS_BIG_ENDIAN, 0), ==, 0);
	ASSERT_INT(dbus_reader_enter(&r, 'v'), ==, 1);
	ASSERT_INT(dbus_reader_read_basic(&r, 't', &t), ==, 1);
	ASSERT_INT(t, ==, 5);

	ASSERT_INT(dbus_reader_init(&r, "sss", sss, sizeof(sss), DBUS_LITTLE_ENDIAN, 0), ==, 0);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, 1);
	ASSERT(strcmp(s, "foo") == 0);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, 1);
	ASSERT(strcmp(s, "+") == 0);
	ASSERT_INT(dbus_reader_read_basic(&r, 's', &s), ==, 1);
	ASSERT(strcmp(s, "bar") == 0);

	/* the same bytes read in the wrong order: lengths make no sense */
	ASSERT_INT(dbus_body_validate("ax", at, sizeof(at), DBUS_LITTLE_ENDIAN, 0), ==, -EBADMSG);
	ASSERT_INT(dbus_body_validate("sss", sss, sizeof(sss), DBUS_BIG_ENDIAN, 0), ==, -EBADMSG);
	ASSERT_INT(dbus_body_validate("ax", at, sizeof(at), 'x', 0), ==, -EBADMSG);
}

static void write_mixed(struct dbus_writer *w)
{
	int16_t n = -300;
	uint32_t u = 0x11223344, h = 0;
	double d = 3.25;
	int b = 1;

	ASSERT_INT(dbus_writer_append_basic(w, 'n', &n), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'a', "{ov}"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, '{', "ov"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'o', "/a/b"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'v', "(ubdh)"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, '(', "ubdh"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'u', &u), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'b', &b), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'd', &d), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'h', &h), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_append_array(w, 'q', (uint16_t[]){ 1, 0x102 }, 2), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'g', "ss"), ==, 0);
}

/* Swap every integer of a native body by hand: the other byte order. */
static void test_convert(void)
{
	const char *sig = "na{ov}aqg";
	uint8_t buf[256], foreign[256];
	size_t len = build(sig, write_mixed, buf, sizeof(buf));
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	memcpy(foreign, buf, len);
	/*
	 * n @0; a length @4; {ov} @8: o length @8, "/a/b" @12; v: "(ubdh)"
	 * @17..24; (ubdh) @32: u @32, b @36, d @40, h @48; aq length @52,
	 * q @56 @58; g "ss" @60..63.
	 */
	memcpy(&v16, foreign, 2), v16 = __builtin_bswap16(v16), memcpy(foreign, &v16, 2);
	static const size_t at32[] = { 4, 8, 32, 36, 48, 52 };
	for (size_t k = 0; k < ELEMENTSOF(at32); k++) {
		memcpy(&v32, foreign + at32[k], 4);
		v32 = __builtin_bswap32(v32);
		memcpy(foreign + at32[k], &v32, 4);
	}
	memcpy(&v64, foreign + 40, 8), v64 = __builtin_bswap64(v64), memcpy(foreign + 40, &v64, 8);
	for (size_t at = 56; at <= 58; at += 2)
		memcpy(&v16, foreign + at, 2), v16 = __builtin_bswap16(v16), memcpy(foreign + at, &v16, 2);
	ASSERT_INT(len, ==, 64);
	ASSERT(memcmp(foreign, buf, len) != 0);

	ASSERT_INT(dbus_body_validate(sig, foreign, len, other_endian(), 1), ==, 0);
	/* n_fds checked before anything changes */
	ASSERT_INT(dbus_body_to_native(sig, foreign, len, other_endian(), 0), ==, -EBADMSG);
	ASSERT_INT(dbus_body_to_native(sig, foreign, len, other_endian(), 1), ==, 0);
	ASSERT(memcmp(foreign, buf, len) == 0);
	/* native stays as it is */
	ASSERT_INT(dbus_body_to_native(sig, foreign, len, DBUS_NATIVE_ENDIAN, 1), ==, 0);
	ASSERT(memcmp(foreign, buf, len) == 0);
}

static void write_readme(struct dbus_writer *w)
{
	ASSERT_INT(dbus_writer_open(w, 'a', "{sv}"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, '{', "sv"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 's', "n"), ==, 0);
	ASSERT_INT(dbus_writer_open(w, 'v', "u"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(w, 'u', &(uint32_t){ 7 }), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
	ASSERT_INT(dbus_writer_close(w), ==, 0);
}

/* The example of protocol/README.md section 9.2, byte for byte. */
static void test_readme_example(void)
{
	static const uint8_t le[] = {
		0x10, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0x6e, 0, 0x01, 0x75, 0, 0, 0, 0, 0x07, 0, 0, 0,
	};
	uint8_t buf[64];
	size_t len = build("a{sv}", write_readme, buf, sizeof(buf));

	ASSERT_INT(len, ==, sizeof(le));
	if (little_endian())
		ASSERT(memcmp(buf, le, len) == 0);
	memcpy(buf, le, len);
	ASSERT_INT(dbus_body_to_native("a{sv}", buf, len, DBUS_LITTLE_ENDIAN, 0), ==, 0);
	ASSERT_INT(dbus_body_validate("a{sv}", buf, len, DBUS_NATIVE_ENDIAN, 0), ==, 0);
}

/* ---- Rejections ------------------------------------------------------------------ */

static void expect_bad(const char *sig, const void *body, size_t len, uint32_t n_fds)
{
	int r = dbus_body_validate(sig, body, len, DBUS_LITTLE_ENDIAN, n_fds);

	if (r != -EBADMSG) {
		fprintf(stderr, "accepted invalid body for \"%s\" (%d)\n", sig, r);
		ASSERT(0);
	}
}

static void expect_good(const char *sig, const void *body, size_t len, uint32_t n_fds)
{
	ASSERT_INT(dbus_body_validate(sig, body, len, DBUS_LITTLE_ENDIAN, n_fds), ==, 0);
}

static void test_reject(void)
{
	static uint8_t big[80];

	/* padding must be zero */
	expect_good("yu", "\1\0\0\0\1\0\0\0", 8, 0);
	expect_bad("yu", "\1\0\1\0\1\0\0\0", 8, 0);
	/* booleans are 0 or 1 */
	expect_good("b", "\1\0\0\0", 4, 0);
	expect_bad("b", "\2\0\0\0", 4, 0);
	expect_bad("ab", "\4\0\0\0\0\0\0\1", 8, 0);
	/* strings: UTF-8, no NUL inside, NUL at the end */
	expect_good("s", "\2\0\0\0\xc3\xa4", 7, 0);
	expect_bad("s", "\2\0\0\0\xc0\x80", 7, 0);
	expect_bad("s", "\2\0\0\0a\0", 7, 0);
	expect_bad("s", "\2\0\0\0abc", 7, 0);
	expect_bad("s", "\2\0\0\0a", 6, 0);
	expect_bad("s", "\xff\xff\xff\xff", 4, 0);
	/* object paths and signatures */
	expect_good("o", "\2\0\0\0/a", 7, 0);
	expect_bad("o", "\2\0\0\0a/", 7, 0);
	expect_good("g", "\2ai", 4, 0);
	expect_bad("g", "\2aa", 4, 0);
	expect_bad("g", "\2ai", 3, 0);
	/* variants: one complete type */
	expect_good("v", "\1y\0\7", 4, 0);
	expect_bad("v", "\2yy\0\7\7", 6, 0);
	expect_bad("v", "\0\0", 2, 0);
	expect_bad("v", "\1{\0", 3, 0);
	/* fd indexes below n_fds */
	expect_good("h", "\1\0\0\0", 4, 2);
	expect_bad("h", "\2\0\0\0", 4, 2);
	expect_bad("h", "\0\0\0\0", 4, 0);
	/* trailing and missing bytes */
	expect_bad("y", "\1\0", 2, 0);
	expect_bad("", "\0", 1, 0);
	expect_good("", NULL, 0, 0);
	expect_bad("q", "\1", 1, 0);
	expect_bad("x", "\1\0\0\0\0\0\0", 7, 0);
	/* arrays: longer than the body, longer than 64 MiB */
	expect_bad("ay", "\5\0\0\0\1\2\3\4", 8, 0);
	expect_bad("ay", "\1\0\0\4\1", 5, 0);
	expect_bad("ay", "\0\0\0\xff\1", 5, 0);
	/* the signature itself */
	expect_bad("a", "\0\0\0\0", 4, 0);
	expect_bad("{yy}", "\1\1", 2, 0);
	/* structs start on 8 */
	expect_good("y(y)", "\1\0\0\0\0\0\0\0\2", 9, 0);
	expect_bad("y(y)", "\1\2", 2, 0);
	/* NULL */
	ASSERT_INT(dbus_body_validate(NULL, "", 0, 'l', 0), ==, -EINVAL);
	ASSERT_INT(dbus_body_validate("y", NULL, 1, 'l', 0), ==, -EINVAL);

	/* an array length just past 64 MiB is refused before it is followed */
	memset(big, 0, sizeof(big));
	big[0] = 1, big[3] = 4; /* 0x04000001 */
	expect_bad("ay", big, sizeof(big), 0);
}

/*
 * levels variants in a row, the innermost with signature inner; when inner
 * is an array, an empty one follows (padding and length 0).
 */
static size_t nest(uint8_t *buf, unsigned int levels, const char *inner)
{
	size_t n = 0, k = strlen(inner);

	for (unsigned int l = 1; l < levels; l++)
		buf[n++] = 1, buf[n++] = 'v', buf[n++] = 0;
	buf[n++] = (uint8_t)k;
	memcpy(buf + n, inner, k + 1);
	n += k + 1;
	if (inner[0] == 'y') {
		buf[n++] = 7;
		return n;
	}
	while (n % 4)
		buf[n++] = 0;
	memset(buf + n, 0, 4);
	return n + 4;
}

/* Containers nested up to the depth of 64, variants included. */
static void test_depth(void)
{
	uint8_t buf[3 * 70 + 16];
	_cleanup_writer_ struct dbus_writer w;
	_cleanup_free_ void *body = NULL;
	size_t len;

	/* the innermost variant at level 64 holds a byte */
	expect_good("v", buf, nest(buf, 63, "y"), 0);
	expect_good("v", buf, nest(buf, 64, "y"), 0);
	expect_bad("v", buf, nest(buf, 65, "y"), 0);
	/* the levels a variant's signature describes count, even when empty */
	expect_good("v", buf, nest(buf, 63, "ai"), 0);
	expect_bad("v", buf, nest(buf, 63, "aai"), 0);
	expect_good("v", buf, nest(buf, 62, "aai"), 0);
	expect_bad("v", buf, nest(buf, 64, "av"), 0);

	/* the writer stops at the same depth */
	ASSERT_INT(dbus_writer_init(&w, "v"), ==, 0);
	for (int k = 0; k < 62; k++)
		ASSERT_INT(dbus_writer_open(&w, 'v', "v"), ==, 0);
	ASSERT_INT(dbus_writer_open(&w, 'v', "aai"), ==, -ELOOP);
	ASSERT_INT(dbus_writer_close(&w), ==, -ELOOP); /* sticky */
	dbus_writer_deinit(&w);

	ASSERT_INT(dbus_writer_init(&w, "v"), ==, 0);
	for (int k = 0; k < 63; k++)
		ASSERT_INT(dbus_writer_open(&w, 'v', "v"), ==, 0);
	ASSERT_INT(dbus_writer_open(&w, 'v', "y"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'y', &(uint8_t){ 7 }), ==, 0);
	for (int k = 0; k < 64; k++)
		ASSERT_INT(dbus_writer_close(&w), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, 0);
	ASSERT_INT(len, ==, 64 * 3 + 1);
	ASSERT_INT(nest(buf, 64, "y"), ==, len);
	ASSERT(memcmp(body, buf, len) == 0);
	expect_good("v", body, len, 0);
}

/* ---- Writer errors ------------------------------------------------------------------ */

/* Open a container (contents != NULL or type is a container) on a fresh writer. */
static int writer_try(const char *sig, char type, const char *arg)
{
	_cleanup_writer_ struct dbus_writer w;

	ASSERT_INT(dbus_writer_init(&w, sig), ==, 0);
	if (dbus_type_is_basic(type) && (type == 's' || type == 'o' || type == 'g'))
		return dbus_writer_append_basic(&w, type, arg);
	return dbus_writer_open(&w, type, arg);
}

static void test_writer_errors(void)
{
	static const struct {
		const char *sig;
		char type;
		const char *arg;
		int ret;
	} cases[] = {
		{ "is", 's', "x", -ENXIO },    /* another type */
		{ "(ii)", '(', "iu", -ENXIO }, /* contents that disagree */
		{ "ai", 'a', "u", -ENXIO },	 { "ai", '(', "i", -ENXIO },
		{ "v", 'v', NULL, -EINVAL },	 /* a variant needs contents */
		{ "v", 'v', "ii", -EINVAL },	 /* of one complete type */
		{ "a{sv}", 'r', NULL, -EINVAL }, /* not a container code */
		{ "s", 's', "\xc3", -EINVAL },	 /* invalid values */
		{ "o", 'o', "/a/", -EINVAL },	 { "g", 'g', "a", -EINVAL },
	};
	_cleanup_writer_ struct dbus_writer w;
	void *body;
	size_t len;
	int32_t i = 1;

	for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
		if (writer_try(cases[k].sig, cases[k].type, cases[k].arg) != cases[k].ret) {
			fprintf(stderr, "writer case %zu\n", k);
			ASSERT(0);
		}
	}

	ASSERT_INT(dbus_writer_init(&w, "aa"), ==, -EINVAL);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, -EINVAL);
	dbus_writer_deinit(&w);

	/* an error sticks */
	ASSERT_INT(dbus_writer_init(&w, "is"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 's', "x"), ==, -ENXIO);
	ASSERT_INT(dbus_writer_append_basic(&w, 'i', &i), ==, -ENXIO);
	dbus_writer_deinit(&w);

	/* too few values, too many */
	ASSERT_INT(dbus_writer_init(&w, "i"), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, -ENXIO);
	dbus_writer_deinit(&w);
	ASSERT_INT(dbus_writer_init(&w, "i"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'i', &i), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'i', &i), ==, -ENXIO);
	dbus_writer_deinit(&w);

	/* closing: a struct or variant missing values, nothing open */
	ASSERT_INT(dbus_writer_init(&w, "(ii)"), ==, 0);
	ASSERT_INT(dbus_writer_open(&w, '(', NULL), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'i', &i), ==, 0);
	ASSERT_INT(dbus_writer_close(&w), ==, -ENXIO);
	dbus_writer_deinit(&w);
	ASSERT_INT(dbus_writer_init(&w, "v"), ==, 0);
	ASSERT_INT(dbus_writer_open(&w, 'v', "i"), ==, 0);
	ASSERT_INT(dbus_writer_close(&w), ==, -ENXIO);
	dbus_writer_deinit(&w);
	ASSERT_INT(dbus_writer_init(&w, "ai"), ==, 0);
	ASSERT_INT(dbus_writer_close(&w), ==, -ENXIO);
	dbus_writer_deinit(&w);

	/* fd index UINT32_MAX cannot be counted; arrays of s are not fixed */
	ASSERT_INT(dbus_writer_init(&w, "h"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'h', &(uint32_t){ UINT32_MAX }), ==, -EINVAL);
	dbus_writer_deinit(&w);
	ASSERT_INT(dbus_writer_init(&w, "as"), ==, 0);
	ASSERT_INT(dbus_writer_append_array(&w, 's', NULL, 0), ==, -EINVAL);
	dbus_writer_deinit(&w);

	/* an empty body */
	ASSERT_INT(dbus_writer_init(&w, ""), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, 0);
	ASSERT(body == NULL && len == 0);
}

/* Arrays of 64 MiB and bodies of 128 MiB are the most the writer builds. */
static void test_array_limit(void)
{
	_cleanup_writer_ struct dbus_writer w;
	_cleanup_free_ uint8_t *bytes = calloc(1, DBUS_ARRAY_MAX + 1);
	_cleanup_free_ void *body = NULL;
	size_t len;

	ASSERT(bytes);
	ASSERT_INT(dbus_writer_init(&w, "ay"), ==, 0);
	ASSERT_INT(dbus_writer_append_array(&w, 'y', bytes, DBUS_ARRAY_MAX + 1), ==, -EMSGSIZE);
	dbus_writer_deinit(&w);

	ASSERT_INT(dbus_writer_init(&w, "ay"), ==, 0);
	ASSERT_INT(dbus_writer_open(&w, 'a', "y"), ==, 0);
	ASSERT_INT(dbus_writer_append_array(&w, 'y', bytes, 1), ==, -ENXIO);
	dbus_writer_deinit(&w);

	ASSERT_INT(dbus_writer_init(&w, "ay"), ==, 0);
	ASSERT_INT(dbus_writer_append_array(&w, 'y', bytes, DBUS_ARRAY_MAX), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, 0);
	ASSERT_INT(len, ==, DBUS_ARRAY_MAX + 4);
	ASSERT_INT(dbus_body_validate("ay", body, len, DBUS_NATIVE_ENDIAN, 0), ==, 0);
	dbus_writer_deinit(&w);

	/* two of them and their lengths pass 128 MiB: refused before growing */
	ASSERT_INT(dbus_writer_init(&w, "ayay"), ==, 0);
	ASSERT_INT(dbus_writer_append_array(&w, 'y', bytes, DBUS_ARRAY_MAX), ==, 0);
	ASSERT_INT(dbus_writer_append_array(&w, 'y', bytes, DBUS_ARRAY_MAX), ==, -EMSGSIZE);
	ASSERT(w.cap <= DBUS_MESSAGE_MAX);
}

/*
 * A body marshalled after a room (dbus_writer_init_room()) is the same bytes
 * as without one, with the same padding, only room bytes further in; a room
 * not a multiple of 8 is refused, and nothing is allocated for an empty body.
 */
static void test_writer_room(void)
{
	struct dbus_writer a, b;
	void *da = NULL, *db = NULL;
	size_t la = 0, lb = 0;
	uint8_t y = 7;
	uint64_t t = 0x0102030405060708ULL;

	ASSERT_INT(dbus_writer_init(&a, "ytas"), ==, 0);
	ASSERT_INT(dbus_writer_init_room(&b, "ytas", 24), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&a, 'y', &y), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&b, 'y', &y), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&a, 't', &t), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&b, 't', &t), ==, 0);
	ASSERT_INT(dbus_writer_open(&a, 'a', "s"), ==, 0);
	ASSERT_INT(dbus_writer_open(&b, 'a', "s"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&a, 's', "x"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&b, 's', "x"), ==, 0);
	ASSERT_INT(dbus_writer_close(&a), ==, 0);
	ASSERT_INT(dbus_writer_close(&b), ==, 0);
	ASSERT_INT(dbus_writer_finish(&a, &da, &la), ==, 0);
	ASSERT_INT(dbus_writer_finish(&b, &db, &lb), ==, 0);
	ASSERT_INT(lb, ==, la + 24);
	ASSERT(memcmp(da, (uint8_t *)db + 24, la) == 0);
	free(da);
	free(db);
	dbus_writer_deinit(&a);
	dbus_writer_deinit(&b);

	ASSERT_INT(dbus_writer_init_room(&b, "", 12), ==, -EINVAL);
	dbus_writer_deinit(&b);
	ASSERT_INT(dbus_writer_init_room(&b, "", 256), ==, 0);
	ASSERT_INT(dbus_writer_finish(&b, &db, &lb), ==, 0);
	ASSERT(db == NULL);
	ASSERT_INT(lb, ==, 256);
	dbus_writer_deinit(&b);
}

int main(void)
{
	test_basic();
	test_dict();
	test_empty_array();
	test_array_length();
	test_spec_vectors();
	test_convert();
	test_readme_example();
	test_reject();
	test_depth();
	test_writer_errors();
	test_array_limit();
	test_writer_room();
	return 0;
}
