/* SPDX-License-Identifier: MIT */
/* test-dbus-sasl.c - unit tests of dbus-sasl.c: every form of EXTERNAL, refusals, limits. */
#include <errno.h>
#include <string.h>

#include "protocol/dbus-sasl.h"
#include "util/test.h"

#define GUID "0123456789abcdef0123456789abcdef"

static struct dbus_sasl s;
static char out[4096];
static size_t out_len;

/* Feed text (len bytes) and return dbus_sasl_feed()'s result; *consumed in *c. */
static int feed(const char *text, size_t len, size_t *c)
{
	size_t dummy;

	out_len = 0;
	memset(out, 0, sizeof(out));
	return dbus_sasl_feed(&s, text, len, c ? c : &dummy, out, sizeof(out), &out_len);
}
#define FEED(lit, c) feed(lit, sizeof(lit) - 1, c)

static void test_pipelined(void)
{
	/* sd-bus: everything in one write, followed by the first message's bytes */
	static const char in[] = "\0AUTH EXTERNAL 31303030\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\nl\1\0\1";
	size_t c;

	dbus_sasl_init(&s, 1000, true, GUID);
	ASSERT_INT(feed(in, sizeof(in) - 1, &c), ==, 1);
	ASSERT_STR(out, "OK " GUID "\r\nAGREE_UNIX_FD\r\n");
	ASSERT_INT(c, ==, sizeof(in) - 1 - 4); /* the message's bytes are left */
	ASSERT(s.fds_agreed);
	ASSERT_INT(s.state, ==, DBUS_SASL_DONE);
}

static void test_data_exchange(void)
{
	size_t c;

	/* libdbus without initial response: DATA, then an empty DATA */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("\0AUTH EXTERNAL\r\n", &c), ==, 0);
	ASSERT_STR(out, "DATA\r\n");
	ASSERT_INT(FEED("DATA\r\n", &c), ==, 0);
	ASSERT_STR(out, "OK " GUID "\r\n");
	ASSERT_INT(FEED("BEGIN\r\n", &c), ==, 1);
	ASSERT(!s.fds_agreed);

	/* DATA with the uid in it */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("\0AUTH EXTERNAL\r\nDATA 30\r\nBEGIN\r\n", &c), ==, 1);
	ASSERT_STR(out, "DATA\r\nOK " GUID "\r\n");

	/* DATA with another uid: rejected, and the client may try again */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("\0AUTH EXTERNAL\r\nDATA 31\r\n", &c), ==, 0);
	ASSERT_STR(out, "DATA\r\nREJECTED EXTERNAL\r\n");
	ASSERT_INT(FEED("AUTH EXTERNAL 30\r\nBEGIN\r\n", &c), ==, 1);
}

static void test_lock_step(void)
{
	size_t c;

	/* GDBus: the NUL byte alone, then one command per round trip */
	dbus_sasl_init(&s, 1000, true, GUID);
	ASSERT_INT(feed("\0", 1, &c), ==, 0);
	ASSERT_INT(c, ==, 1);
	ASSERT_INT(out_len, ==, 0);
	ASSERT_INT(FEED("AUTH EXTERNAL 31303030\r\n", &c), ==, 0);
	ASSERT_STR(out, "OK " GUID "\r\n");
	ASSERT_INT(FEED("NEGOTIATE_UNIX_FD\r\n", &c), ==, 0);
	ASSERT_STR(out, "AGREE_UNIX_FD\r\n");
	/* a line in pieces: nothing consumed until it is complete */
	ASSERT_INT(FEED("BEG", &c), ==, 0);
	ASSERT_INT(c, ==, 0);
	ASSERT_INT(FEED("BEGIN\r\n", &c), ==, 1);
	ASSERT_INT(c, ==, 7);
}

static void test_refusals(void)
{
	size_t c;

	/* another uid, another mechanism, no mechanism, bad hex, a leading zero */
	static const char *bad[] = { "AUTH EXTERNAL 31303031\r\n", "AUTH DBUS_COOKIE_SHA1 31303030\r\n",
				     "AUTH ANONYMOUS\r\n",	   "AUTH\r\n",
				     "AUTH EXTERNAL 3x303030\r\n", "AUTH EXTERNAL 3031303030\r\n",
				     "AUTH EXTERNALX 31303030\r\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dbus_sasl_init(&s, 1000, true, GUID);
		ASSERT_INT(feed("\0", 1, &c), ==, 0);
		ASSERT_INT(feed(bad[i], strlen(bad[i]), &c), ==, 0);
		ASSERT_STR(out, "REJECTED EXTERNAL\r\n");
		ASSERT_INT(s.state, ==, DBUS_SASL_AUTH);
	}

	/* no fds on this transport: NEGOTIATE_UNIX_FD gets ERROR, BEGIN still works */
	dbus_sasl_init(&s, 5, false, GUID);
	ASSERT_INT(FEED("\0AUTH EXTERNAL 35\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n", &c), ==, 1);
	ASSERT(!s.fds_agreed);
	ASSERT(strstr(out, "\r\nERROR") != NULL);

	/* NEGOTIATE_UNIX_FD before OK, unknown commands: ERROR, the exchange goes on */
	dbus_sasl_init(&s, 5, true, GUID);
	ASSERT_INT(FEED("\0NEGOTIATE_UNIX_FD\r\nHELLO\r\nDATA\r\n", &c), ==, 0);
	ASSERT_INT(c, ==, 33);
	ASSERT(strncmp(out, "ERROR", 5) == 0);
	/* CANCEL after DATA: rejected, back to AUTH */
	ASSERT_INT(FEED("AUTH EXTERNAL\r\nCANCEL\r\n", &c), ==, 0);
	ASSERT_STR(out, "DATA\r\nREJECTED EXTERNAL\r\n");
	ASSERT_INT(s.state, ==, DBUS_SASL_AUTH);

	/* CANCEL after an agreement on fds: the agreement goes with the exchange */
	dbus_sasl_init(&s, 5, true, GUID);
	ASSERT_INT(FEED("\0AUTH EXTERNAL 35\r\nNEGOTIATE_UNIX_FD\r\nCANCEL\r\n", &c), ==, 0);
	ASSERT(!s.fds_agreed);
	ASSERT_INT(s.state, ==, DBUS_SASL_AUTH);
}

static void test_errors(void)
{
	char big[DBUS_SASL_LINE_MAX + 8];
	size_t c;

	/* no credentials byte */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("AUTH EXTERNAL 30\r\n", &c), ==, -EPROTO);
	/* BEGIN before OK */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("\0BEGIN\r\n", &c), ==, -EPROTO);
	/* a bare \n, a NUL inside a line */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("\0AUTH EXTERNAL 30\n", &c), ==, -EPROTO);
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(FEED("\0AUTH \0EXTERNAL 30\r\n", &c), ==, -EPROTO);
	/* a line too long, complete or not */
	memset(big, 'A', sizeof(big));
	big[0] = 0;
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(feed(big, sizeof(big), &c), ==, -EMSGSIZE);
	big[sizeof(big) - 2] = '\r';
	big[sizeof(big) - 1] = '\n';
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(feed(big, sizeof(big), &c), ==, -EMSGSIZE);
	/* endless chatter */
	dbus_sasl_init(&s, 0, true, GUID);
	ASSERT_INT(feed("\0", 1, &c), ==, 0);
	for (int i = 0; i < DBUS_SASL_COMMANDS_MAX; i++)
		ASSERT_INT(FEED("AUTH ANONYMOUS\r\n", &c), ==, 0);
	ASSERT_INT(FEED("AUTH ANONYMOUS\r\n", &c), ==, -ELOOP);
	/* a reply buffer too small */
	dbus_sasl_init(&s, 0, true, GUID);
	out_len = 0;
	ASSERT_INT(dbus_sasl_feed(&s, "\0AUTH EXTERNAL 30\r\n", 19, &c, out, 8, &out_len), ==, -ENOBUFS);
}

int main(void)
{
	test_pipelined();
	test_data_exchange();
	test_lock_step();
	test_refusals();
	test_errors();
	return 0;
}
