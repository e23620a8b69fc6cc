/* SPDX-License-Identifier: MIT */
/* test-message.c - unit tests of the channel message codec (message.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/message.h"
#include "util/test.h"

static void test_roundtrip(void)
{
	uint8_t buf[256];
	struct chmsg m = {
		.type = CHMSG_CALL, .serial = 5, .member = "Ping", .destination = ":1.3",
		.body = "hello", .body_len = 5,
	}, d;
	int n;

	n = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(n == CHMSG_HEADER_SIZE + 5 + 5 + 5);
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == 0);
	ASSERT(d.type == CHMSG_CALL && d.serial == 5 && d.reply_serial == 0);
	ASSERT(strcmp(d.member, "Ping") == 0 && strcmp(d.destination, ":1.3") == 0);
	ASSERT(d.body_len == 5 && memcmp(d.body, "hello", 5) == 0);
	/* every truncation and one extra byte fail */
	for (int k = 0; k < n; k++)
		ASSERT(chmsg_decode(&d, buf, (size_t)k) == -EBADMSG);
	ASSERT(chmsg_decode(&d, buf, (size_t)n + 1) == -EBADMSG);
	/* too small a buffer */
	ASSERT(chmsg_encode(&m, buf, 10) == -EMSGSIZE);

	/* reply: no member, reply serial required */
	struct chmsg r = { .type = CHMSG_REPLY, .serial = 1, .reply_serial = 5 };
	n = chmsg_encode(&r, buf, sizeof(buf));
	ASSERT(n == CHMSG_HEADER_SIZE + 2);
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == 0 && d.reply_serial == 5 && d.body_len == 0);
	r.reply_serial = 0;
	ASSERT(chmsg_encode(&r, buf, sizeof(buf)) == -EINVAL);
	r.reply_serial = 5;
	r.member = "X";
	ASSERT(chmsg_encode(&r, buf, sizeof(buf)) == -EINVAL);

	/* error: member must be an error name */
	struct chmsg e = { .type = CHMSG_ERROR, .serial = 2, .reply_serial = 5, .member = "Bad" };
	ASSERT(chmsg_encode(&e, buf, sizeof(buf)) == -EINVAL);
	e.member = "org.example.Error.Bad";
	ASSERT(chmsg_encode(&e, buf, sizeof(buf)) > 0);

	/* invalid: serial 0, unknown type, unknown flag, bad destination */
	m.serial = 0;
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) == -EINVAL);
	m.serial = 1;
	m.type = 9;
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) == -EINVAL);
	m.type = CHMSG_SIGNAL;
	m.flags = 0x80;
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) == -EINVAL);
	m.flags = 0;
	m.destination = "org.example.Foo";
	ASSERT(chmsg_encode(&m, buf, sizeof(buf)) == -EINVAL);
}

static void test_malformed(void)
{
	uint8_t buf[256];
	struct chmsg m = { .type = CHMSG_SIGNAL, .serial = 1, .member = "Tick" }, d;
	int n = chmsg_encode(&m, buf, sizeof(buf));

	ASSERT(n > 0);
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == 0);
	buf[0] = 2;
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == -EPROTO);
	buf[0] = CHMSG_VERSION;
	buf[20] = 1; /* reserved */
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == -EBADMSG);
	buf[20] = 0;
	buf[CHMSG_HEADER_SIZE + 4] = 'x'; /* member NUL overwritten */
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == -EBADMSG);
	buf[CHMSG_HEADER_SIZE + 4] = 0;
	buf[12] = 0xff; /* member length beyond the message */
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == -EBADMSG);
	buf[12] = 4;
	buf[16] = 0xff;
	buf[17] = 0xff;
	buf[18] = 0xff;
	buf[19] = 0xff; /* body length */
	ASSERT(chmsg_decode(&d, buf, (size_t)n) == -EBADMSG);
}

int main(void)
{
	test_roundtrip();
	test_malformed();
	printf("test-message: ok\n");
	return 0;
}
