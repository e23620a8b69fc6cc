/* SPDX-License-Identifier: MIT */
/* test-ctrl.c - unit tests of the control protocol codec (ctrl.c). */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "util/test.h"

static void test_table(void)
{
	/* Every op and signal is named, has a valid signature and a min_len that matches it. */
	for (unsigned int op = 1; op < _CTRL_OP_MAX; op++) {
		const struct ctrl_op_info *i = ctrl_op_get(op);

		ASSERT(i && i->name && i->request_sig && i->reply_sig);
		ASSERT(ctrl_sig_min_len(i->request_sig) == (int)i->min_len);
		ASSERT(ctrl_sig_min_len(i->reply_sig) >= 0);
		ASSERT(i->max_reply_fds <= CTRL_FDS_MAX);
	}
	for (unsigned int s = 1; s < _CTRL_SIGNAL_MAX; s++) {
		const struct ctrl_op_info *i = ctrl_signal_get(s);

		if (!i && s < CTRL_SIGNAL_REPLY_CAPABILITY)
			continue; /* a number kept for signals of other changes */
		ASSERT(i && i->name && !i->request_sig && i->reply_sig);
		ASSERT(ctrl_sig_min_len(i->reply_sig) == (int)i->min_len);
	}
	ASSERT(!ctrl_op_get(0));
	ASSERT(!ctrl_op_get(_CTRL_OP_MAX));
	ASSERT(!ctrl_signal_get(_CTRL_SIGNAL_MAX));
	ASSERT(ctrl_sig_min_len("a(") == -EINVAL);
	ASSERT(ctrl_sig_min_len("()") == -EINVAL);
	ASSERT(ctrl_sig_min_len("x") == -EINVAL);
	ASSERT(ctrl_sig_min_len("aaaaaau") == -EINVAL); /* too deep */
	ASSERT(ctrl_sig_min_len("(ut)s") == 15);
}

static void test_roundtrip(void)
{
	struct ctrl_writer w;
	struct ctrl_message m;
	struct ctrl_reader r;
	const void *d;
	size_t l, sl;
	const char *s;
	uint32_t u, n;
	uint64_t t;

	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_REQUEST_NAME, 7) == 0);
	ctrl_write_string(&w, "org.example.Foo");
	ctrl_write_u32(&w, CTRL_NAME_DO_NOT_QUEUE);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(l == CTRL_HEADER_SIZE + 2 + 15 + 1 + 4);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
	ASSERT(m.hdr.type == CTRL_TYPE_REQUEST && m.hdr.code == CTRL_OP_REQUEST_NAME && m.hdr.serial == 7);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_string(&r, &s, &sl) == 0 && sl == 15 && strcmp(s, "org.example.Foo") == 0);
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == CTRL_NAME_DO_NOT_QUEUE);
	ASSERT(ctrl_reader_at_end(&r));
	ASSERT(ctrl_read_u32(&r, &u) == -EBADMSG);
	/* fds must agree with the header */
	ASSERT(ctrl_message_decode(&m, d, l, 1) == -ETOOMANYREFS);
	/* truncation at every length is rejected */
	for (size_t k = 0; k < l; k++)
		ASSERT(ctrl_message_decode(&m, d, k, 0) < 0);
	ctrl_writer_deinit(&w);

	/* a reply with a nested array and fds */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_QUOTA, 9) == 0);
	size_t a = ctrl_write_array_open(&w);
	ctrl_write_u32(&w, 2001);
	size_t b = ctrl_write_array_open(&w);
	ctrl_write_string(&w, "names");
	ctrl_write_u64(&w, 3);
	ctrl_write_u64(&w, 256);
	ctrl_write_array_close(&w, b, 1);
	ctrl_write_array_close(&w, a, 1);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_array(&r, &n) == 0 && n == 1);
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == 2001);
	ASSERT(ctrl_read_array(&r, &n) == 0 && n == 1);
	ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && strcmp(s, "names") == 0);
	ASSERT(ctrl_read_u64(&r, &t) == 0 && t == 3);
	ASSERT(ctrl_read_u64(&r, &t) == 0 && t == 256);
	ASSERT(ctrl_reader_at_end(&r));
	ctrl_writer_deinit(&w);

	/* a wrong array count (claims 2 entries) is caught by the writer's self check */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_LIST_NAMES, 1) == 0);
	a = ctrl_write_array_open(&w);
	ctrl_write_string(&w, "a.b");
	ctrl_write_array_close(&w, a, 2);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
	ctrl_writer_deinit(&w);

	/* too many fds for the op */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_SUBSCRIBE, 1) == 0);
	ctrl_write_fd(&w, 0);
	ctrl_write_fd(&w, 1);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == -ETOOMANYREFS);
	ctrl_writer_deinit(&w);

	/* errors and signals */
	ASSERT(ctrl_writer_error(&w, CTRL_OP_HELLO, 3, CTRL_ERROR_QUOTA_EXCEEDED, "connections: uid 5") == 0);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0 && m.hdr.type == CTRL_TYPE_ERROR);
	ctrl_writer_deinit(&w);
	ASSERT(ctrl_writer_error(&w, CTRL_OP_HELLO, 3, "not an error name", "x") == -EINVAL);
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0) == 0);
	ctrl_write_string(&w, "org.example.Foo");
	ctrl_write_string(&w, "");
	ctrl_write_string(&w, ":1.4");
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ctrl_writer_deinit(&w);
}

static void put(uint8_t *b, size_t off, uint32_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[off + i] = (uint8_t)(v >> (8 * i));
}

static void test_malformed(void)
{
	uint8_t b[64] = { 0 };
	struct ctrl_message m;

	/* HELLO request with flags 0 */
	b[0] = CTRL_VERSION;
	b[1] = CTRL_TYPE_REQUEST;
	put(b, 2, CTRL_OP_HELLO, 2);
	put(b, 4, 42, 4);
	put(b, 8, 4, 4);
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == 0);
	/* length field disagrees with the datagram */
	ASSERT(ctrl_message_decode(&m, b, 21, 0) == -EBADMSG);
	put(b, 8, 5, 4);
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == -EBADMSG);
	ASSERT(m.hdr.serial == 42); /* still known, for the error reply */
	put(b, 8, 4, 4);
	/* version, unknown op, unknown type, reserved */
	b[0] = 2;
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == -EPROTO);
	b[0] = CTRL_VERSION;
	put(b, 2, 999, 2);
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == -EOPNOTSUPP);
	put(b, 2, 0, 2);
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == -EOPNOTSUPP);
	put(b, 2, CTRL_OP_HELLO, 2);
	b[1] = 9;
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == -EOPNOTSUPP);
	b[1] = CTRL_TYPE_REQUEST;
	b[14] = 1;
	ASSERT(ctrl_message_decode(&m, b, 20, 0) == -EBADMSG);
	b[14] = 0;
	/* requests never carry fds */
	put(b, 12, 1, 2);
	ASSERT(ctrl_message_decode(&m, b, 20, 1) == -ETOOMANYREFS);
	put(b, 12, 0, 2);

	/* GET_NAME_OWNER: string without NUL, with embedded NUL, overlong length */
	put(b, 2, CTRL_OP_GET_NAME_OWNER, 2);
	put(b, 8, 6, 4);
	put(b, 16, 3, 2);
	memcpy(b + 18, "a.b", 3);
	b[21] = 0;
	ASSERT(ctrl_message_decode(&m, b, 22, 0) == 0);
	b[21] = 'x';
	ASSERT(ctrl_message_decode(&m, b, 22, 0) == -EBADMSG);
	b[21] = 0;
	b[19] = 0;
	ASSERT(ctrl_message_decode(&m, b, 22, 0) == -EBADMSG);
	b[19] = '.';
	put(b, 16, 0xffff, 2);
	ASSERT(ctrl_message_decode(&m, b, 22, 0) == -EBADMSG);

	/* array count larger than the bytes could hold */
	uint8_t arr[] = { 0xff, 0xff, 0xff, 0x7f };
	ASSERT(ctrl_sig_validate("as", arr, sizeof(arr)) == -EBADMSG);
	ASSERT(ctrl_sig_validate("au", arr, sizeof(arr)) == -EBADMSG);
	uint8_t empty[] = { 0, 0, 0, 0 };
	ASSERT(ctrl_sig_validate("a(stt)", empty, sizeof(empty)) == 0);
	/* trailing garbage */
	uint8_t extra[] = { 0, 0, 0, 0, 1 };
	ASSERT(ctrl_sig_validate("u", extra, sizeof(extra)) == -EBADMSG);
	/* oversized */
	ASSERT(ctrl_message_decode(&m, b, CTRL_MSG_MAX + 1, 0) == -EMSGSIZE);
}

static void test_names(void)
{
	char buf[CTRL_UNIQUE_NAME_MAX];
	uint64_t id;

	ASSERT(ctrl_name_is_valid_wellknown("org.example.Foo"));
	ASSERT(ctrl_name_is_valid_wellknown("a.b-c._d9"));
	ASSERT(!ctrl_name_is_valid_wellknown("org"));
	ASSERT(!ctrl_name_is_valid_wellknown("org..x"));
	ASSERT(!ctrl_name_is_valid_wellknown(".org.x"));
	ASSERT(!ctrl_name_is_valid_wellknown("org.x."));
	ASSERT(!ctrl_name_is_valid_wellknown("org.9x"));
	ASSERT(!ctrl_name_is_valid_wellknown(":1.5"));
	ASSERT(!ctrl_name_is_valid_wellknown(""));
	ASSERT(!ctrl_name_is_valid_wellknown("org.ex ample"));
	char longname[300];
	memset(longname, 'a', sizeof(longname));
	longname[1] = '.';
	longname[299] = 0;
	ASSERT(!ctrl_name_is_valid_wellknown(longname));
	ASSERT(ctrl_name_is_valid_member("Ping"));
	ASSERT(!ctrl_name_is_valid_member("Pi.ng"));
	ASSERT(!ctrl_name_is_valid_member("1Ping"));
	ASSERT(ctrl_name_is_valid_error("brokerd.Error.AccessDenied"));
	ASSERT(!ctrl_name_is_valid_error("brokerd.Error-x.A"));

	/* dbus-daemon's numbering: id N is :1.(N-1), id 0 (no badge) has no name */
	ASSERT(ctrl_unique_name_format(1, buf) == 0 && strcmp(buf, ":1.0") == 0);
	ASSERT(ctrl_unique_name_format(2, buf) == 0 && strcmp(buf, ":1.1") == 0);
	ASSERT(ctrl_unique_name_format(43, buf) == 0 && strcmp(buf, ":1.42") == 0);
	ASSERT(ctrl_unique_name_format(0, buf) == -EINVAL);
	ASSERT(ctrl_unique_name_format(UINT64_MAX, buf) == 0 && strcmp(buf, ":1.18446744073709551614") == 0);
	ASSERT(ctrl_unique_name_parse(buf, &id) == 0 && id == UINT64_MAX);
	ASSERT(ctrl_unique_name_parse(":1.18446744073709551615", &id) == -EINVAL);
	ASSERT(ctrl_unique_name_parse(":1.0", &id) == 0 && id == 1);
	ASSERT(ctrl_unique_name_parse(":1.7", &id) == 0 && id == 8);
	ASSERT(ctrl_unique_name_parse(":1.10", &id) == 0 && id == 11);
	ASSERT(ctrl_unique_name_parse(":1.07", &id) == -EINVAL);
	ASSERT(ctrl_unique_name_parse(":1.00", &id) == -EINVAL);
	ASSERT(ctrl_unique_name_parse(":1.", &id) == -EINVAL);
	ASSERT(ctrl_unique_name_parse(":2.1", &id) == -EINVAL);
	ASSERT(ctrl_unique_name_parse(":1.99999999999999999999999", &id) == -EINVAL);
	ASSERT(ctrl_unique_name_parse(":1.1x", &id) == -EINVAL);
}

/* Write one sample value of the type at sig; returns the signature after it. */
static const char *write_sample(struct ctrl_writer *w, const char *sig)
{
	size_t a;

	switch (*sig) {
	case 'u':
		ctrl_write_u32(w, 0xdeadbeef);
		return sig + 1;
	case 't':
		ctrl_write_u64(w, 0x0123456789abcdefULL);
		return sig + 1;
	case 's':
		ctrl_write_string(w, "org.example.Sample");
		return sig + 1;
	case 'a': {
		const char *end;

		a = ctrl_write_array_open(w);
		end = write_sample(w, sig + 1);
		write_sample(w, sig + 1);
		ctrl_write_array_close(w, a, 2);
		return end;
	}
	case '(':
		for (sig++; *sig != ')';)
			sig = write_sample(w, sig);
		return sig + 1;
	}
	abort();
}

/* Every op's request and reply, and every signal, encodes and decodes with sample values. */
static void test_every_op(void)
{
	struct ctrl_writer w;
	struct ctrl_message m;
	const void *d;
	size_t l;
	int fds[CTRL_FDS_MAX] = { 0, 1, 2, 0 };

	for (unsigned int op = 1; op < _CTRL_OP_MAX; op++) {
		const struct ctrl_op_info *i = ctrl_op_get(op);

		ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, (uint16_t)op, op) == 0);
		for (const char *p = i->request_sig; *p;)
			p = write_sample(&w, p);
		ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		ASSERT(ctrl_message_decode(&m, d, l, 0) == 0 && m.info == i && m.hdr.serial == op);
		ctrl_writer_deinit(&w);

		ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, (uint16_t)op, op) == 0);
		for (const char *p = i->reply_sig; *p;)
			p = write_sample(&w, p);
		for (unsigned int k = 0; k < i->max_reply_fds; k++)
			ctrl_write_fd(&w, fds[k]);
		ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		ASSERT(ctrl_message_decode(&m, d, l, i->max_reply_fds) == 0);
		/* one byte less is always wrong */
		ASSERT(ctrl_message_decode(&m, d, l - 1, i->max_reply_fds) < 0);
		ctrl_writer_deinit(&w);
	}
	for (unsigned int sg = 1; sg < _CTRL_SIGNAL_MAX; sg++) {
		const struct ctrl_op_info *i = ctrl_signal_get(sg);

		if (!i && sg < CTRL_SIGNAL_REPLY_CAPABILITY)
			continue; /* a number kept for signals of other changes */
		ASSERT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, (uint16_t)sg, 0) == 0);
		for (const char *p = i->reply_sig; *p;)
			p = write_sample(&w, p);
		ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
		ctrl_writer_deinit(&w);
	}
}

/* UNSUBSCRIBE: a name in, a result out, never an fd either way. */
static void test_unsubscribe(void)
{
	const struct ctrl_op_info *i = ctrl_op_get(CTRL_OP_UNSUBSCRIBE);
	struct ctrl_writer w;
	struct ctrl_message m;
	struct ctrl_reader r;
	const void *d;
	size_t l;
	const char *s;
	uint32_t u;

	ASSERT(i && strcmp(i->name, "Unsubscribe") == 0 && !i->privileged && i->max_reply_fds == 0);
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_UNSUBSCRIBE, 11) == 0);
	ctrl_write_string(&w, "org.example.Foo");
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0 && m.info == i && m.hdr.serial == 11);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && strcmp(s, "org.example.Foo") == 0);
	ASSERT(ctrl_reader_at_end(&r));
	ctrl_writer_deinit(&w);
	/* a flags word after the name is not part of it */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_UNSUBSCRIBE, 11) == 0);
	ctrl_write_string(&w, "org.example.Foo");
	ctrl_write_u32(&w, 0);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
	ctrl_writer_deinit(&w);

	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_UNSUBSCRIBE, 11) == 0);
	ctrl_write_u32(&w, CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	ASSERT(ctrl_message_decode(&m, d, l, 1) == -ETOOMANYREFS); /* no cap comes back */
	ctrl_writer_deinit(&w);
}

/*
 * The paged listings: (flags, page size, cursor) in; the entries and the
 * next cursor out. A reply of the unpaged op is not one of the paged op.
 */
static void test_list_pages(void)
{
	struct ctrl_writer w;
	struct ctrl_message m;
	struct ctrl_reader r;
	const void *d;
	size_t l, a;
	const char *s;
	uint32_t u, n;

	ASSERT(strcmp(ctrl_op_get(CTRL_OP_LIST_NAMES_PAGE)->name, "ListNamesPage") == 0);
	ASSERT(strcmp(ctrl_op_get(CTRL_OP_LIST_PEERS_PAGE)->name, "ListPeersPage") == 0);
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_LIST_NAMES_PAGE, 3) == 0);
	ctrl_write_u32(&w, CTRL_LIST_ACTIVATABLE);
	ctrl_write_u32(&w, 2);
	ctrl_write_string(&w, "org.example.B");
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == CTRL_LIST_ACTIVATABLE);
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == 2);
	ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && strcmp(s, "org.example.B") == 0);
	ASSERT(ctrl_reader_at_end(&r));
	/* LIST_NAMES's request (flags only) is too short for the paged op */
	ASSERT(ctrl_message_decode(&m, d, CTRL_HEADER_SIZE + 4, 0) < 0);
	ctrl_writer_deinit(&w);

	/* two names and the cursor of the next page */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_LIST_NAMES_PAGE, 3) == 0);
	a = ctrl_write_array_open(&w);
	ctrl_write_string(&w, "org.example.C");
	ctrl_write_string(&w, "org.example.D");
	ctrl_write_array_close(&w, a, 2);
	ctrl_write_string(&w, "org.example.D");
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_array(&r, &n) == 0 && n == 2);
	ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && strcmp(s, "org.example.C") == 0);
	ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && strcmp(s, "org.example.D") == 0);
	ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && strcmp(s, "org.example.D") == 0);
	ASSERT(ctrl_reader_at_end(&r));
	/* without the cursor it is LIST_NAMES's reply, not this one's */
	ASSERT(ctrl_message_decode(&m, d, l - 16, 0) < 0);
	ctrl_writer_deinit(&w);

	/* the last page of peers: one entry, empty cursor */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_LIST_PEERS_PAGE, 4) == 0);
	a = ctrl_write_array_open(&w);
	ctrl_write_string(&w, ":1.7");
	ctrl_write_u64(&w, 7);
	ctrl_write_u32(&w, 100);
	ctrl_write_u32(&w, 0);
	ctrl_write_u32(&w, 0);
	ctrl_write_string(&w, "");
	size_t an = ctrl_write_array_open(&w);
	ctrl_write_array_close(&w, an, 0);
	ctrl_write_u32(&w, 3);
	ctrl_write_array_close(&w, a, 1);
	ctrl_write_string(&w, "");
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
	ASSERT(ctrl_message_decode(&m, d, l - 3, 0) < 0); /* cursor missing */
	ctrl_writer_deinit(&w);
}

/* OPEN_CALL's (and REQUEST_NAME's) reply: `u`, or `uu` (the channel's size) for a request that asked; nothing longer. */
static void test_open_call_size(void)
{
	const struct ctrl_op_info *i = ctrl_op_get(CTRL_OP_OPEN_CALL);
	struct ctrl_writer w;
	struct ctrl_message m;
	struct ctrl_reader r;
	const void *d;
	size_t l;
	uint32_t u;

	ASSERT(i && strcmp(i->reply_sig, "u") == 0 && strcmp(i->reply_sig_ext, "uu") == 0);
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_OPEN_CALL, 5) == 0);
	ctrl_write_u32(&w, CTRL_CALL_OWNED);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0 && strcmp(m.sig, "u") == 0);
	ctrl_writer_deinit(&w);

	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_OPEN_CALL, 5) == 0);
	ctrl_write_u32(&w, CTRL_CALL_OWNED);
	ctrl_write_u32(&w, 65536);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0 && strcmp(m.sig, "uu") == 0);
	ctrl_reader_init(&r, &m);
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == CTRL_CALL_OWNED);
	ASSERT(!ctrl_reader_at_end(&r));
	ASSERT(ctrl_read_u32(&r, &u) == 0 && u == 65536);
	ASSERT(ctrl_reader_at_end(&r));
	ctrl_writer_deinit(&w);

	/* a third field is trailing bytes */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_OPEN_CALL, 5) == 0);
	for (int k = 0; k < 3; k++)
		ctrl_write_u32(&w, 1);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
	ctrl_writer_deinit(&w);
	/* only replies: a request stays `su` */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_OPEN_CALL, 5) == 0);
	ctrl_write_string(&w, "org.example.Foo");
	ctrl_write_u32(&w, 0);
	ctrl_write_u32(&w, 0);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
	ctrl_writer_deinit(&w);
	/* REQUEST_NAME's too (its signal channel's size) */
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_REQUEST_NAME, 5) == 0);
	ctrl_write_u32(&w, CTRL_NAME_PRIMARY_OWNER);
	ctrl_write_u32(&w, 8192);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	ASSERT(ctrl_message_decode(&m, d, l, 0) == 0 && strcmp(m.sig, "uu") == 0);
	ctrl_writer_deinit(&w);
	/* and only where an op has one: RELEASE_NAME's reply is `u` alone */
	ASSERT(!ctrl_op_get(CTRL_OP_RELEASE_NAME)->reply_sig_ext);
	ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_RELEASE_NAME, 5) == 0);
	ctrl_write_u32(&w, 1);
	ctrl_write_u32(&w, 1);
	ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
	ctrl_writer_deinit(&w);
}

/* CallReceiverEnded: `sst`, or `sstu` (the receiver's pid) to a client that asked; nothing longer. */
static void test_receiver_ended_pid(void)
{
	const struct ctrl_op_info *i = ctrl_signal_get(CTRL_SIGNAL_CALL_RECEIVER_ENDED);
	struct ctrl_writer w;
	struct ctrl_message m;
	struct ctrl_reader r;
	const char *s;
	const void *d;
	uint64_t t;
	uint32_t u;
	size_t l;

	ASSERT(i && strcmp(i->reply_sig, "sst") == 0 && strcmp(i->reply_sig_ext, "sstu") == 0);
	for (int extra = 0; extra <= 2; extra++) {
		ASSERT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CALL_RECEIVER_ENDED, 0) == 0);
		ctrl_write_string(&w, "org.example.Foo");
		ctrl_write_string(&w, ":1.7");
		ctrl_write_u64(&w, 1234);
		for (int k = 0; k < extra; k++)
			ctrl_write_u32(&w, 4242);
		if (extra == 2) {
			/* a second field is trailing bytes */
			ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
			ctrl_writer_deinit(&w);
			break;
		}
		ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
		ASSERT(strcmp(m.sig, extra ? "sstu" : "sst") == 0);
		ctrl_reader_init(&r, &m);
		ASSERT(ctrl_read_string(&r, &s, NULL) == 0 && ctrl_read_string(&r, &s, NULL) == 0);
		ASSERT(ctrl_read_u64(&r, &t) == 0 && t == 1234);
		ASSERT(ctrl_reader_at_end(&r) == !extra);
		if (extra)
			ASSERT(ctrl_read_u32(&r, &u) == 0 && u == 4242 && ctrl_reader_at_end(&r));
		ctrl_writer_deinit(&w);
	}
}

/*
 * SIZES (HELLO's flag): HELLO's reply `stuu`, OPEN_INBOX's `su` and
 * ReplyCapability `ssu` carry an inbox's size; without it they are as
 * before, and nothing longer is accepted.
 */
static void test_inbox_sizes(void)
{
	static const struct {
		unsigned int type, code;
		const char *sig, *ext;
	} cases[] = {
		{ CTRL_TYPE_REPLY, CTRL_OP_HELLO, "stu", "stuu" },
		{ CTRL_TYPE_REPLY, CTRL_OP_OPEN_INBOX, "s", "su" },
		{ CTRL_TYPE_SIGNAL, CTRL_SIGNAL_REPLY_CAPABILITY, "ss", "ssu" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct ctrl_op_info *info = cases[i].type == CTRL_TYPE_SIGNAL ? ctrl_signal_get(cases[i].code) :
										       ctrl_op_get(cases[i].code);

		ASSERT(info && strcmp(info->reply_sig, cases[i].sig) == 0 &&
		       strcmp(info->reply_sig_ext, cases[i].ext) == 0);
		for (int extra = 0; extra <= 2; extra++) {
			struct ctrl_writer w;
			struct ctrl_message m;
			struct ctrl_reader r;
			const void *d;
			uint32_t u;
			size_t l;

			ASSERT(ctrl_writer_init(&w, cases[i].type, cases[i].code,
						cases[i].type == CTRL_TYPE_SIGNAL ? 0 : 9) == 0);
			for (const char *t = cases[i].sig; *t; t++) {
				if (*t == 's')
					ctrl_write_string(&w, ":1.5");
				else if (*t == 't')
					ctrl_write_u64(&w, 5);
				else
					ctrl_write_u32(&w, 1);
			}
			for (int k = 0; k < extra; k++)
				ctrl_write_u32(&w, 16384);
			if (extra == 2) {
				/* a second field is trailing bytes */
				ASSERT(ctrl_writer_finish(&w, &d, &l) == -EBADMSG);
				ctrl_writer_deinit(&w);
				continue;
			}
			ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
			ASSERT(ctrl_message_decode(&m, d, l, 0) == 0);
			ASSERT(strcmp(m.sig, extra ? cases[i].ext : cases[i].sig) == 0);
			if (extra) {
				ctrl_reader_init_raw(&r, (const uint8_t *)m.payload + m.payload_len - 4, 4);
				ASSERT(ctrl_read_u32(&r, &u) == 0 && u == 16384);
			}
			ctrl_writer_deinit(&w);
		}
	}
	/* the request stays `u`: the flag is a bit of it */
	ASSERT(strcmp(ctrl_op_get(CTRL_OP_HELLO)->request_sig, "u") == 0);
}

int main(void)
{
	test_table();
	test_receiver_ended_pid();
	test_inbox_sizes();
	test_unsubscribe();
	test_open_call_size();
	test_list_pages();
	test_every_op();
	test_roundtrip();
	test_malformed();
	test_names();
	printf("test-ctrl: ok\n");
	return 0;
}
