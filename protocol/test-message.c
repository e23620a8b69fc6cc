/* SPDX-License-Identifier: MIT */
/* test-message.c - unit tests of the version 2 channel message codec (message.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "protocol/message.h"
#include "util/macro.h"
#include "util/test.h"

/* README section 7.4's example: CALL serial 1, path "/", member "Ping", no body. */
static const uint8_t ping_le[48] = {
	'l', 1, 0,   2, 0, 0, 0, 0, 1,	 0,   0,   0,	29, 0, 0, 0, /* fixed header */
	1,   1, 'o', 0, 1, 0, 0, 0, '/', 0,   0,   0,	0,  0, 0, 0, /* PATH "/" */
	3,   1, 's', 0, 4, 0, 0, 0, 'P', 'i', 'n', 'g', 0,  0, 0, 0, /* MEMBER "Ping" */
};

static void test_layout(void)
{
	uint8_t buf[64], be[48];
	struct chmsg m = { .type = CHMSG_CALL, .serial = 1, .path = "/", .member = "Ping" }, d;
	int n;

	n = chmsg_encode(&m, buf, sizeof(buf));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	ASSERT_INT(n, ==, (int)sizeof(ping_le));
	ASSERT(memcmp(buf, ping_le, sizeof(ping_le)) == 0);
#endif
	ASSERT_INT(chmsg_decode(&d, ping_le, sizeof(ping_le)), ==, 0);
	ASSERT(d.type == CHMSG_CALL && d.serial == 1 && d.byte_order == 'l');
	ASSERT_STR(d.path, "/");
	ASSERT_STR(d.member, "Ping");
	ASSERT(!d.interface && !d.signature && d.body_len == 0);

	/* the same message big-endian: every integer swapped, nothing else */
	memcpy(be, ping_le, sizeof(be));
	be[0] = 'B';
	be[8] = 0, be[11] = 1;	 /* serial */
	be[12] = 0, be[15] = 29; /* fields length */
	be[20] = 0, be[23] = 1;	 /* path length */
	be[36] = 0, be[39] = 4;	 /* member length */
	ASSERT_INT(chmsg_decode(&d, be, sizeof(be)), ==, 0);
	ASSERT(d.byte_order == 'B' && d.serial == 1);
	ASSERT_STR(d.member, "Ping");

	/* every truncation and a trailing byte are refused */
	for (size_t k = 0; k < sizeof(ping_le); k++)
		ASSERT(chmsg_decode(&d, ping_le, k) < 0);
	memcpy(buf, ping_le, sizeof(ping_le));
	buf[48] = 0;
	ASSERT_INT(chmsg_decode(&d, buf, 49), ==, -EBADMSG);
}

static void test_roundtrip(void)
{
	struct dbus_writer w;
	const char *s = "hello";
	uint32_t u = 42;
	void *body;
	size_t blen;
	uint8_t buf[512];
	struct chmsg m = { .type = CHMSG_CALL,
			   .flags = CHMSG_F_NO_AUTO_START | CHMSG_F_ALLOW_INTERACTIVE_AUTHORIZATION,
			   .serial = 5,
			   .path = "/org/example/Obj",
			   .interface = "org.example.Iface",
			   .member = "Ping",
			   .destination = ":1.3",
			   .signature = "su" },
		     d;
	int n;

	ASSERT_INT(dbus_writer_init(&w, "su"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 's', s), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'u', &u), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &blen), ==, 0);
	m.body = body;
	m.body_len = (uint32_t)blen;
	n = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(n > 0 && n % 8 == 0);
	ASSERT_INT(chmsg_decode(&d, buf, (size_t)n), ==, 0);
	ASSERT(d.type == CHMSG_CALL && d.serial == 5 && d.reply_serial == 0 && d.flags == m.flags);
	ASSERT_STR(d.path, m.path);
	ASSERT_STR(d.interface, m.interface);
	ASSERT_STR(d.member, "Ping");
	ASSERT_STR(d.destination, ":1.3");
	ASSERT_STR(d.signature, "su");
	ASSERT(d.body_len == blen && memcmp(d.body, body, blen) == 0);
	ASSERT_INT(chmsg_encode(&m, buf, (size_t)n - 1), ==, -EMSGSIZE);

	/* a body that does not follow its signature is neither sent nor taken */
	m.signature = "us";
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.signature = "su";
	n = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(n > 0);
	buf[n - blen + 4 + 1] = 0xff; /* 'e' of "hello" becomes invalid UTF-8 */
	ASSERT_INT(chmsg_decode(&d, buf, (size_t)n), ==, -EBADMSG);
	free(body);

	/* replies and errors */
	struct chmsg r = { .type = CHMSG_REPLY, .serial = 1, .reply_serial = 5 };
	n = chmsg_encode(&r, buf, sizeof(buf));
	ASSERT(n > 0);
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == 0 && d.reply_serial == 5 && d.body_len == 0);
	r.reply_serial = 0;
	ASSERT_INT(chmsg_encode(&r, buf, sizeof(buf)), ==, -EINVAL);
	r.reply_serial = 5;
	r.member = "Nope"; /* a reply has no member */
	ASSERT_INT(chmsg_encode(&r, buf, sizeof(buf)), ==, -EINVAL);

	struct chmsg e = { .type = CHMSG_ERROR, .serial = 2, .reply_serial = 5, .error_name = "Bad" };
	ASSERT_INT(chmsg_encode(&e, buf, sizeof(buf)), ==, -EINVAL);
	e.error_name = "org.example.Error.Bad";
	n = chmsg_encode(&e, buf, sizeof(buf));
	ASSERT(n > 0);
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == 0);
	ASSERT_STR(d.error_name, "org.example.Error.Bad");
}

static void test_rules(void)
{
	uint8_t buf[256];
	struct chmsg m = { .type = CHMSG_SIGNAL, .serial = 1, .path = "/", .member = "Tick" };

	/* a signal needs an interface, a call or signal a path */
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.interface = "org.example.Clock";
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) > 0);
	m.path = "/trailing/";
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.path = "/";
	m.interface = "noDots";
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.interface = "org.example.Clock";
	m.member = "Not.A.Member";
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.member = "Tick";
	m.flags = 0x80;
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.flags = 0;
	m.serial = 0;
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.serial = 1;
	m.error_name = "org.example.Error";
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.error_name = NULL;
	m.destination = "not a name";
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.destination = "org.example.Peer";
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) > 0);
	m.n_fds = CHMSG_FDS_MAX + 1; /* more than SCM_RIGHTS and the kernel take */
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.body_in_fd = true; /* a body in a memfd needs the fd and a body */
	m.n_fds = 0;
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.body_in_fd = false;
	m.body = "x";
	m.body_len = 1; /* a body needs a signature */
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
	m.signature = "y";
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) > 0);
	m.type = 9;
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);
}

/* Builds a header by hand with the fields given as (code, type, value) triples. */
static size_t build(uint8_t *out, const char *f1sig, uint8_t f1, const void *v1, uint8_t f2, const void *v2)
{
	struct dbus_writer w;
	uint8_t order = DBUS_NATIVE_ENDIAN, type = CHMSG_CALL, flags = 0, version = CHMSG_VERSION;
	uint32_t blen = 0, serial = 3;
	uint8_t mcode = CHMSG_FIELD_MEMBER, pcode = CHMSG_FIELD_PATH;
	void *data;
	size_t len;

	ASSERT_INT(dbus_writer_init(&w, "yyyyuua(yv)"), ==, 0);
	dbus_writer_append_basic(&w, 'y', &order);
	dbus_writer_append_basic(&w, 'y', &type);
	dbus_writer_append_basic(&w, 'y', &flags);
	dbus_writer_append_basic(&w, 'y', &version);
	dbus_writer_append_basic(&w, 'u', &blen);
	dbus_writer_append_basic(&w, 'u', &serial);
	dbus_writer_open(&w, 'a', "(yv)");
	dbus_writer_open(&w, '(', NULL);
	dbus_writer_append_basic(&w, 'y', &pcode);
	dbus_writer_open(&w, 'v', "o");
	dbus_writer_append_basic(&w, 'o', "/");
	dbus_writer_close(&w);
	dbus_writer_close(&w);
	dbus_writer_open(&w, '(', NULL);
	dbus_writer_append_basic(&w, 'y', &mcode);
	dbus_writer_open(&w, 'v', "s");
	dbus_writer_append_basic(&w, 's', "M");
	dbus_writer_close(&w);
	dbus_writer_close(&w);
	for (int i = 0; i < 2; i++) {
		uint8_t code = i ? f2 : f1;
		const void *v = i ? v2 : v1;

		if (!code)
			continue;
		dbus_writer_open(&w, '(', NULL);
		dbus_writer_append_basic(&w, 'y', &code);
		dbus_writer_open(&w, 'v', f1sig);
		dbus_writer_append_basic(&w, f1sig[0], v);
		dbus_writer_close(&w);
		dbus_writer_close(&w);
	}
	dbus_writer_close(&w);
	ASSERT_INT(dbus_writer_finish(&w, &data, &len), ==, 0);
	memcpy(out, data, len);
	free(data);
	while (len % 8)
		out[len++] = 0;
	return len;
}

static void test_fields(void)
{
	uint8_t buf[512];
	struct chmsg d;
	size_t n;

	n = build(buf, "s", 0, NULL, 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, 0);
	/* an unknown field is skipped */
	n = build(buf, "s", 42, "future", 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, 0);
	ASSERT_STR(d.member, "M");
	/* the sender is never a field */
	n = build(buf, "s", CHMSG_FIELD_SENDER, ":1.1", 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	/* a field twice, or with the wrong type */
	n = build(buf, "s", CHMSG_FIELD_MEMBER, "Other", 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	n = build(buf, "s", CHMSG_FIELD_SIGNATURE, "s", 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	n = build(buf, "g", CHMSG_FIELD_SIGNATURE, "", 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, 0);
	/* a body announced by the signature but missing */
	n = build(buf, "g", CHMSG_FIELD_SIGNATURE, "u", 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	/* UNIX_FDS up to what the kernel passes */
	uint32_t one = 1, zero = 0, many = CHMSG_FDS_MAX + 1;
	n = build(buf, "u", CHMSG_FIELD_UNIX_FDS, &one, 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, 0);
	ASSERT_INT(d.n_fds, ==, 1);
	n = build(buf, "u", CHMSG_FIELD_UNIX_FDS, &many, 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	n = build(buf, "u", CHMSG_FIELD_UNIX_FDS, &zero, 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, 0);
	/* BODY_FD without fds */
	n = build(buf, "u", CHMSG_FIELD_BODY_FD, &zero, 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	/* a reply serial on a call */
	n = build(buf, "u", CHMSG_FIELD_REPLY_SERIAL, &one, 0, NULL);
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);

	/* version, byte order, padding */
	n = build(buf, "s", 0, NULL, 0, NULL);
	buf[3] = 1;
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EPROTO);
	buf[3] = CHMSG_VERSION;
	buf[0] = 'x';
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
	buf[0] = DBUS_NATIVE_ENDIAN;
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, 0);
	buf[n - 1] = 1; /* the padding before the (empty) body */
	ASSERT_INT(chmsg_decode(&d, buf, n), ==, -EBADMSG);
}

/* UNIX_FDS and BODY_FD: 'h' values index the fds before the body's memfd. */
static void test_fds(void)
{
	static const uint32_t idx[2] = { 0, 1 };
	uint8_t buf[CHMSG_MAX], body[16];
	struct chmsg m = { .type = CHMSG_SIGNAL, .serial = 9, .path = "/", .interface = "org.example.I",
			   .member = "Fds", .signature = "hh", .body = idx, .body_len = 8, .n_fds = 2 };
	struct chmsg d;
	int n;

	/* inline body with two fds */
	n = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(n > 0);
	ASSERT_INT(chmsg_decode(&d, buf, (size_t)n), ==, 0);
	ASSERT_INT(d.n_fds, ==, 2);
	ASSERT(!d.body_in_fd);
	m.n_fds = 1; /* index 1 without a second fd */
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EINVAL);

	/* the same body in a memfd: a third fd, the header alone on the wire */
	m.n_fds = 3;
	m.body_in_fd = true;
	n = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(n > 0);
	ASSERT_INT(n % 8, ==, 0);
	ASSERT_INT(chmsg_decode(&d, buf, (size_t)n), ==, 0);
	ASSERT(d.body_in_fd);
	ASSERT(d.body == NULL);
	ASSERT_INT(d.body_len, ==, 8);
	ASSERT_INT(d.n_fds, ==, 3);
	memcpy(body, idx, 8);
	ASSERT_INT(chmsg_decode_body(&d, body), ==, 0);
	ASSERT(d.body == body);
	/* the body's 'h' may not name the memfd itself */
	body[4] = 2;
	d.body = NULL;
	ASSERT_INT(chmsg_decode_body(&d, body), ==, -EBADMSG);
	/* an inline body after a BODY_FD header is malformed */
	memset(buf + n, 0, 8);
	ASSERT_INT(chmsg_decode(&d, buf, (size_t)n + 8), ==, -EBADMSG);
	/* the memfd must be the last fd */
	m.n_fds = 2;
	m.signature = "h";
	m.body_len = 4;
	n = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(n > 0);
	ASSERT_INT(chmsg_decode(&d, buf, (size_t)n), ==, 0);
	ASSERT_INT(d.n_fds, ==, 2);
	/* a large body fits only in a memfd */
	m.body_in_fd = false;
	m.body_len = CHMSG_MAX + 1;
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EMSGSIZE);
	m.body_in_fd = true;
	m.body_len = CHMSG_BODY_MAX + 1;
	ASSERT_INT(chmsg_encode(&m, buf, sizeof(buf)), ==, -EMSGSIZE);
}

/*
 * chmsg_encode_header() writes what chmsg_encode() writes before the body,
 * byte for byte, and returns where the body goes; it checks the rest of the
 * message and the room for the body as chmsg_encode() does.
 */
static void test_header_only(void)
{
	uint8_t body[7] = { 0, 0, 0, 0, 'a', 'b', 'c' }, full[256], hdr[256];
	uint32_t three = 3;
	struct chmsg m = { .type = CHMSG_SIGNAL,
			   .serial = 9,
			   .path = "/a",
			   .interface = "org.x.I",
			   .member = "S",
			   .signature = "ay",
			   .body = body,
			   .body_len = sizeof(body) };
	int n, off;

	memcpy(body, &three, 4); /* an "ay" of 3 bytes, in native order */
	n = chmsg_encode(&m, full, sizeof(full));
	ASSERT(n > 0);
	memset(hdr, 0xaa, sizeof(hdr));
	off = chmsg_encode_header(&m, hdr, sizeof(hdr));
	ASSERT_INT(off % 8, ==, 0);
	ASSERT_INT(off + (int)sizeof(body), ==, n);
	ASSERT(memcmp(full, hdr, (size_t)off) == 0);
	ASSERT_INT(hdr[off], ==, 0xaa); /* the body is the caller's to write */
	/* the body is not read: NULL is fine, only its length counts */
	m.body = NULL;
	ASSERT_INT(chmsg_encode_header(&m, hdr, sizeof(hdr)), ==, off);
	ASSERT_INT(chmsg_encode_header(&m, hdr, (size_t)n - 1), ==, -EMSGSIZE);
	m.member = "not a member";
	ASSERT_INT(chmsg_encode_header(&m, hdr, sizeof(hdr)), ==, -EINVAL);
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* chmsg_decode() (its fast path for the usual fields) and the generic reader agree on n bytes at b. */
static void check_same(const uint8_t *b, size_t n)
{
	struct chmsg f, g;
	int rf = chmsg_decode(&f, b, n), rg = chmsg_decode_generic(&g, b, n);

	if (rf != rg)
		fprintf(stderr, "fast %d, generic %d\n", rf, rg);
	ASSERT_INT(rf, ==, rg);
	if (rf < 0)
		return;
	ASSERT(f.type == g.type && f.flags == g.flags && f.serial == g.serial && f.reply_serial == g.reply_serial);
	ASSERT(f.n_fds == g.n_fds && f.body_in_fd == g.body_in_fd && f.body_len == g.body_len && f.body == g.body);
	ASSERT(same_str(f.path, g.path) && same_str(f.interface, g.interface) && same_str(f.member, g.member));
	ASSERT(same_str(f.error_name, g.error_name) && same_str(f.destination, g.destination));
	ASSERT(same_str(f.signature, g.signature));
}

/*
 * The fast path against the generic one: messages of every type and
 * field, in both byte orders, and every header byte of each changed to
 * values that move lengths, codes, types and padding, and cut short.
 */
static void test_fast_path(void)
{
	static const uint8_t values[] = { 0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 0x7f, 0x80, 0xff,
					  'o', 's', 'g', 'u', 'v', 'y', '/', '.', 'a' };
	uint32_t one;
	uint8_t buf[512], mut[512];
	struct chmsg ms[] = {
		{ .type = CHMSG_CALL, .serial = 7, .path = "/a/b", .interface = "org.x.Y", .member = "M",
		  .destination = ":1.9", .signature = "su", .body = (const uint8_t[]){ 1, 0, 0, 0, 'x', 0, 0, 0, 5, 0, 0, 0 },
		  .body_len = 12 },
		{ .type = CHMSG_SIGNAL, .serial = 1, .path = "/", .interface = "org.x.Y", .member = "Tick",
		  .signature = "ay", .body = (const uint8_t[]){ 2, 0, 0, 0, 9, 9 }, .body_len = 6 },
		{ .type = CHMSG_REPLY, .serial = 3, .reply_serial = 2, .signature = "h", .n_fds = 2,
		  .body = (const uint8_t[]){ 1, 0, 0, 0 }, .body_len = 4 },
		{ .type = CHMSG_ERROR, .serial = 4, .reply_serial = 1, .error_name = "org.x.Error.Failed" },
		{ .type = CHMSG_CALL, .serial = 5, .path = "/p", .member = "Big", .signature = "ay", .n_fds = 1,
		  .body_in_fd = true, .body_len = 100000 },
	};
	unsigned int checked = 0;

	for (size_t i = 0; i < ELEMENTSOF(ms); i++) {
		int n = ms[i].body_in_fd ? chmsg_encode_header(&ms[i], buf, sizeof(buf)) :
					   chmsg_encode(&ms[i], buf, sizeof(buf));
		size_t hend;

		ASSERT(n > 0);
		check_same(buf, (size_t)n);
		/* the header: 16 bytes and the fields */
		memcpy(&one, buf + 12, 4);
		hend = 16 + one;
		for (int order = 0; order < 2; order++) {
			memcpy(mut, buf, (size_t)n);
			if (order) {
				/* the same fields read big-endian: lengths and values move */
				mut[0] = mut[0] == 'l' ? 'B' : 'l';
			}
			check_same(mut, (size_t)n);
			for (size_t k = 0; k < hend; k++)
				for (size_t v = 0; v < ELEMENTSOF(values); v++) {
					uint8_t was = mut[k];

					mut[k] = values[v];
					check_same(mut, (size_t)n);
					mut[k] = was;
					checked++;
				}
		}
		for (size_t cut = 0; cut < (size_t)n; cut++)
			check_same(buf, cut);
	}
	ASSERT(checked > 1000);
}

int main(void)
{
	test_layout();
	test_roundtrip();
	test_rules();
	test_fields();
	test_fds();
	test_header_only();
	test_fast_path();
	printf("test-message: ok\n");
	return 0;
}
