/* SPDX-License-Identifier: MIT */
/* test-dbus-message.c - unit tests of dbus-message.c: framing, validation, writing, stamping. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-message.h"
#include "util/macro.h"
#include "util/test.h"

/* A signal in big-endian order, written by hand from the specification. */
/* clang-format off */
static const uint8_t be_signal[] = {
	'B', 4, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 55,
	/* PATH "/a" */
	1, 1, 'o', 0, 0, 0, 0, 2, '/', 'a', 0, 0, 0, 0, 0, 0,
	/* INTERFACE "a.b" */
	2, 1, 's', 0, 0, 0, 0, 3, 'a', '.', 'b', 0, 0, 0, 0, 0,
	/* MEMBER "C" */
	3, 1, 's', 0, 0, 0, 0, 1, 'C', 0, 0, 0, 0, 0, 0, 0,
	/* SIGNATURE "u", then the header's padding */
	8, 1, 'g', 0, 1, 'u', 0, 0,
	/* body: 42 */
	0, 0, 0, 42,
};
/* clang-format on */

static void test_big_endian(void)
{
	struct dbus_message m;
	size_t size;

	ASSERT_INT(dbus_message_frame_size(be_signal, 15, &size), ==, -EAGAIN);
	ASSERT_INT(dbus_message_frame_size(be_signal, 16, &size), ==, 0);
	ASSERT_INT(size, ==, sizeof(be_signal));
	ASSERT_INT(dbus_message_parse_copy(&m, be_signal, sizeof(be_signal), 0), ==, 0);
	ASSERT_INT(m.byte_order, ==, 'B');
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_SIGNAL);
	ASSERT_INT(m.h.serial, ==, 1);
	ASSERT_STR(m.h.path, "/a");
	ASSERT_STR(m.h.interface, "a.b");
	ASSERT_STR(m.h.member, "C");
	ASSERT_STR(m.h.signature, "u");
	ASSERT(!m.h.sender && !m.h.destination);
	ASSERT_INT(m.body_len, ==, 4);

	/* stamping converts it to native order with SENDER added */
	ASSERT_INT(dbus_message_stamp(&m, ":1.7"), ==, 0);
	ASSERT_INT(m.byte_order, ==, DBUS_NATIVE_ENDIAN);
	ASSERT_STR(m.h.sender, ":1.7");
	ASSERT_STR(m.h.member, "C");
	{
		uint32_t v;

		memcpy(&v, m.body, 4);
		ASSERT_INT(v, ==, 42);
	}
	/* stamping again replaces the sender, never adds a second one */
	ASSERT_INT(dbus_message_stamp(&m, ":1.8"), ==, 0);
	ASSERT_STR(m.h.sender, ":1.8");
	dbus_message_deinit(&m);
}

/* Parse a copy of be_signal with byte i set to v: the result. */
static int parse_mutated(size_t i, uint8_t v, uint32_t n_fds)
{
	uint8_t buf[sizeof(be_signal)];
	struct dbus_message m;
	int r;

	memcpy(buf, be_signal, sizeof(buf));
	buf[i] = v;
	r = dbus_message_parse_copy(&m, buf, sizeof(buf), n_fds);
	dbus_message_deinit(&m);
	return r;
}

static void test_invalid(void)
{
	struct dbus_message m;
	size_t size;

	ASSERT_INT(parse_mutated(0, 'x', 0), ==, -EBADMSG);  /* byte order */
	ASSERT_INT(parse_mutated(1, 0, 0), ==, -EBADMSG);    /* type 0 */
	ASSERT_INT(parse_mutated(1, 5, 0), ==, -EBADMSG);    /* unknown type */
	ASSERT_INT(parse_mutated(1, 1, 0), ==, 0);	     /* a call needs only path and member */
	ASSERT_INT(parse_mutated(1, 2, 0), ==, -EBADMSG);    /* a return without REPLY_SERIAL */
	ASSERT_INT(parse_mutated(3, 2, 0), ==, -EBADMSG);    /* version */
	ASSERT_INT(parse_mutated(11, 0, 0), ==, -EBADMSG);   /* serial 0 */
	ASSERT_INT(parse_mutated(18, 's', 0), ==, -EBADMSG); /* PATH as a string */
	ASSERT_INT(parse_mutated(25, '-', 0), ==, -EBADMSG); /* invalid path "/-"... */
	ASSERT_INT(parse_mutated(25, 'b', 0), ==, 0);	     /* ... a valid one "/b" */
	ASSERT_INT(parse_mutated(41, '-', 0), ==, -EBADMSG); /* interface "a-b" */
	ASSERT_INT(parse_mutated(40, '1', 0), ==, -EBADMSG); /* interface "1.b" */
	ASSERT_INT(parse_mutated(56, '.', 0), ==, -EBADMSG); /* member "." */
	ASSERT_INT(parse_mutated(48, 1, 0), ==, -EBADMSG);   /* PATH twice */
	ASSERT_INT(parse_mutated(48, 0, 0), ==, -EBADMSG);   /* field code 0 */
	ASSERT_INT(parse_mutated(48, 200, 0), ==, -EBADMSG); /* unknown field ok, but MEMBER now missing */
	ASSERT_INT(parse_mutated(69, 'i', 0), ==, 0);	     /* body as "i" */
	ASSERT_INT(parse_mutated(69, 's', 0), ==, -EBADMSG); /* body not a string */
	ASSERT_INT(parse_mutated(71, 1, 0), ==, -EBADMSG);   /* header padding not zero */
	ASSERT_INT(parse_mutated(15, 54, 0), ==, -EBADMSG);  /* fields length off by one */
	ASSERT_INT(parse_mutated(7, 5, 0), ==, -EBADMSG);    /* body length beyond the message */

	/* truncated */
	ASSERT_INT(dbus_message_parse_copy(&m, be_signal, sizeof(be_signal) - 1, 0), ==, -EBADMSG);
	dbus_message_deinit(&m);

	/* sizes past the limits, seen from the fixed header alone */
	{
		uint8_t h[16] = { 'l', 1, 0, 1, 0, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0, 0 };

		ASSERT_INT(dbus_message_frame_size(h, 16, &size), ==, -EBADMSG); /* 128 MiB body + header */
		h[7] = 7;
		ASSERT_INT(dbus_message_frame_size(h, 16, &size), ==, 0);
		h[15] = 0x04;
		h[7] = 0;
		ASSERT_INT(dbus_message_frame_size(h, 16, &size), ==, 0); /* 64 MiB of fields */
		h[12] = 1;
		ASSERT_INT(dbus_message_frame_size(h, 16, &size), ==, -EBADMSG);
	}
}

static void test_write(void)
{
	struct dbus_header h = { .type = DBUS_MESSAGE_METHOD_CALL,
				 .flags = DBUS_FLAG_NO_AUTO_START,
				 .serial = 9,
				 .path = "/org/example",
				 .interface = "org.example.I",
				 .member = "Do",
				 .destination = "org.example.S",
				 .signature = "h",
				 .n_fds = 1 };
	struct dbus_message m;
	uint32_t idx = 0;
	void *data;
	size_t len;

	ASSERT_INT(dbus_message_write(&h, &idx, 4, &data, &len), ==, 0);
	/* the fds must have come with it */
	ASSERT_INT(dbus_message_parse_copy(&m, data, len, 0), ==, -EBADMSG);
	dbus_message_deinit(&m);
	ASSERT_INT(dbus_message_parse(&m, data, len, 2), ==, 0);
	ASSERT_INT(m.h.flags, ==, DBUS_FLAG_NO_AUTO_START);
	ASSERT_INT(m.h.n_fds, ==, 1);
	ASSERT_STR(m.h.destination, "org.example.S");
	ASSERT_STR(m.h.interface, "org.example.I");
	dbus_message_deinit(&m);

	/* an error and a return, with unique names */
	struct dbus_header e = { .type = DBUS_MESSAGE_ERROR,
				 .serial = 1,
				 .reply_serial = 9,
				 .error_name = "org.freedesktop.DBus.Error.Failed",
				 .destination = ":1.42",
				 .sender = "org.freedesktop.DBus" };
	ASSERT_INT(dbus_message_write(&e, NULL, 0, &data, &len), ==, 0);
	ASSERT_INT(dbus_message_parse(&m, data, len, 0), ==, 0);
	ASSERT_INT(m.h.reply_serial, ==, 9);
	ASSERT_STR(m.h.error_name, "org.freedesktop.DBus.Error.Failed");
	dbus_message_deinit(&m);

	/* what no valid message has */
	e.reply_serial = 0;
	ASSERT_INT(dbus_message_write(&e, NULL, 0, &data, &len), ==, -EINVAL);
	e.reply_serial = 1;
	e.destination = "no-dots";
	ASSERT_INT(dbus_message_write(&e, NULL, 0, &data, &len), ==, -EINVAL);
	h.path = "/org/freedesktop/DBus/Local";
	h.interface = NULL;
	h.destination = NULL;
	ASSERT_INT(dbus_message_write(&h, &idx, 4, &data, &len), ==, 0);
	ASSERT_INT(dbus_message_parse(&m, data, len, 1), ==, -EBADMSG); /* the reserved Local path */
	dbus_message_deinit(&m);
}

static void test_names(void)
{
	ASSERT(dbus_bus_name_is_valid(":1.42"));
	ASSERT(dbus_bus_name_is_valid(":a.0-b"));
	ASSERT(dbus_bus_name_is_valid("org.example"));
	ASSERT(!dbus_bus_name_is_valid(":1"));
	ASSERT(!dbus_bus_name_is_valid(":1..2"));
	ASSERT(!dbus_bus_name_is_valid(":1.2."));
	ASSERT(!dbus_bus_name_is_valid("org"));
	ASSERT(!dbus_bus_name_is_valid("org.1example"));
	ASSERT(!dbus_bus_name_is_valid(""));
}

int main(void)
{
	test_big_endian();
	test_invalid();
	test_write();
	test_names();
	return 0;
}
