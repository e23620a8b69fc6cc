/* SPDX-License-Identifier: MIT */
/*
 * test-msg-typed.c - the typed message API of the shared library (no bus,
 * no channels): every D-Bus type appended value by value and printf-like,
 * sealed, and read back value by value and scanf-like; the signature that
 * grows with the body; refusals of what the signature does not allow.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "brokerd/brokerd.h"
#include "util/test.h"

#define NAME "org.test.Typed"

/* Every basic type, an array, a struct, a dict and nested variants, by value. */
static void test_basic_roundtrip(void)
{
	brokerd_msg *m = NULL;
	uint8_t y = 200, ry;
	int b = 1, rb;
	int16_t n = -12345, rn;
	uint16_t q = 54321, rq;
	int32_t i = -2000000000, ri;
	uint32_t u = 4000000000U, ru;
	int64_t x = -9000000000000000000LL, rx;
	uint64_t t = 18000000000000000000ULL, rt;
	double d = 3.25, rd;
	const char *s, *o, *g;
	const void *data;
	size_t len;
	char type;
	const char *contents;

	ASSERT_INT(brokerd_msg_new_call(NULL, &m, NAME, "/org/test/Obj", "org.test.Iface", "Everything"), ==,
		   0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'y', &y), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'b', &b), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'n', &n), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'q', &q), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'i', &i), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'u', &u), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'x', &x), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 't', &t), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'd', &d), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "héllo"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'o', "/a/b"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'g', "a{sv}"), ==, 0);
	/* array of strings */
	ASSERT_INT(brokerd_msg_open_container(m, 'a', "s"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "one"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "two"), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	/* struct (i(s)) */
	ASSERT_INT(brokerd_msg_open_container(m, '(', "i(s)"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'i', &i), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(m, '(', "s"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "inner"), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	/* dict a{sv} with a nested variant <<u 7>> */
	ASSERT_INT(brokerd_msg_open_container(m, 'a', "{sv}"), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(m, '{', "sv"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "k"), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(m, 'v', "v"), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(m, 'v', "u"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'u', &u), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	/* a top-level variant */
	ASSERT_INT(brokerd_msg_open_container(m, 'v', "s"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "in a variant"), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(m), ==, 0);
	/* reading before sealing is refused */
	ASSERT_INT(brokerd_msg_read_basic(m, 'y', &ry), ==, -EPERM);
	ASSERT_INT(brokerd_msg_seal(m), ==, 0);
	ASSERT_STR(brokerd_msg_get_signature(m), "ybnqiuxtdsogas(i(s))a{sv}v");
	ASSERT_INT(brokerd_msg_append_basic(m, 'y', &y), ==, -EPERM);
	ASSERT_INT(brokerd_msg_get_data(m, &data, &len), ==, 0);
	ASSERT(len > 0);

	ASSERT_INT(brokerd_msg_read_basic(m, 'y', &ry), ==, 1);
	ASSERT_INT(ry, ==, y);
	ASSERT_INT(brokerd_msg_read_basic(m, 'u', &ru), ==, -ENXIO); /* a boolean comes next */
	ASSERT_INT(brokerd_msg_read_basic(m, 'b', &rb), ==, 1);
	ASSERT_INT(rb, ==, 1);
	ASSERT_INT(brokerd_msg_read_basic(m, 'n', &rn), ==, 1);
	ASSERT_INT(rn, ==, n);
	ASSERT_INT(brokerd_msg_read_basic(m, 'q', &rq), ==, 1);
	ASSERT_INT(rq, ==, q);
	ASSERT_INT(brokerd_msg_read_basic(m, 'i', &ri), ==, 1);
	ASSERT_INT(ri, ==, i);
	ASSERT_INT(brokerd_msg_read_basic(m, 'u', &ru), ==, 1);
	ASSERT(ru == u);
	ASSERT_INT(brokerd_msg_read_basic(m, 'x', &rx), ==, 1);
	ASSERT(rx == x);
	ASSERT_INT(brokerd_msg_read_basic(m, 't', &rt), ==, 1);
	ASSERT(rt == t);
	ASSERT_INT(brokerd_msg_read_basic(m, 'd', &rd), ==, 1);
	ASSERT(rd == d);
	ASSERT_INT(brokerd_msg_read_basic(m, 's', &s), ==, 1);
	ASSERT_STR(s, "héllo");
	ASSERT_INT(brokerd_msg_read_basic(m, 'o', &o), ==, 1);
	ASSERT_STR(o, "/a/b");
	ASSERT_INT(brokerd_msg_read_basic(m, 'g', &g), ==, 1);
	ASSERT_STR(g, "a{sv}");
	ASSERT_INT(brokerd_msg_peek_type(m, &type, &contents), ==, 1);
	ASSERT(type == 'a');
	ASSERT_STR(contents, "s");
	ASSERT_INT(brokerd_msg_enter_container(m, 'a', "u"), ==, -ENXIO);
	ASSERT_INT(brokerd_msg_enter_container(m, 'a', "s"), ==, 1);
	ASSERT_INT(brokerd_msg_read_basic(m, 's', &s), ==, 1);
	ASSERT_STR(s, "one");
	ASSERT_INT(brokerd_msg_read_basic(m, 's', &s), ==, 1);
	ASSERT_STR(s, "two");
	ASSERT_INT(brokerd_msg_read_basic(m, 's', &s), ==, 0); /* end of the array */
	ASSERT_INT(brokerd_msg_exit_container(m), ==, 0);
	/* the struct, scanf-like */
	ASSERT_INT(brokerd_msg_read(m, "(i(s))", &ri, &s), ==, 1);
	ASSERT_INT(ri, ==, i);
	ASSERT_STR(s, "inner");
	/* the dict, entered, its entry scanf-like with the nested variant */
	ASSERT_INT(brokerd_msg_enter_container(m, 'a', "{sv}"), ==, 1);
	ASSERT_INT(brokerd_msg_read(m, "{sv}", &s, "v", "u", &ru), ==, 1);
	ASSERT_STR(s, "k");
	ASSERT(ru == u);
	ASSERT_INT(brokerd_msg_exit_container(m), ==, 0);
	/* a variant read as another type is refused, as itself read */
	ASSERT_INT(brokerd_msg_read(m, "v", "u", &ru), ==, -ENXIO);
	ASSERT_INT(brokerd_msg_read(m, "v", "s", &s), ==, 1);
	ASSERT_STR(s, "in a variant");
	ASSERT_INT(brokerd_msg_peek_type(m, &type, NULL), ==, 0); /* the end */

	/* again from the start */
	ASSERT_INT(brokerd_msg_rewind(m), ==, 0);
	ASSERT_INT(
		brokerd_msg_read(m, "ybnqiuxtdsog", &ry, &rb, &rn, &rq, &ri, &ru, &rx, &rt, &rd, &s, &o, &g),
		==, 1);
	ASSERT(ry == y && rb == 1 && rn == n && rq == q && ri == i && ru == u && rx == x && rt == t &&
	       rd == d);
	ASSERT_STR(g, "a{sv}");
	brokerd_msg_unref(m);
}

/* The same body printf-like gives the same bytes. */
static void test_append_varargs(void)
{
	brokerd_msg *a = NULL, *b = NULL;
	const void *da, *db;
	size_t la, lb;
	int32_t ri;
	uint32_t ru;
	const char *s, *s2;
	double rd;

	ASSERT_INT(brokerd_msg_new_signal(NULL, &a, NAME, "/", "org.test.Iface", "Changed"), ==, 0);
	ASSERT_INT(brokerd_msg_append(a, "yisa{sv}(id)v", 7, (int32_t)-5, "str", 2U, "one", "u", (uint32_t)1,
				      "two", "as", 2U, "x", "y", (int32_t)3, 2.5, "(s)", "deep"),
		   ==, 0);
	ASSERT_INT(brokerd_msg_seal(a), ==, 0);
	ASSERT_STR(brokerd_msg_get_signature(a), "yisa{sv}(id)v");

	/* built value by value */
	uint8_t y = 7;
	int32_t i = -5, i3 = 3;
	uint32_t one = 1;
	double d = 2.5;
	ASSERT_INT(brokerd_msg_new_signal(NULL, &b, NAME, "/", "org.test.Iface", "Changed"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(b, 'y', &y), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(b, 'i', &i), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(b, 's', "str"), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(b, 'a', "{sv}"), ==, 0);
	ASSERT_INT(brokerd_msg_append(b, "{sv}", "one", "u", one), ==, 0);
	ASSERT_INT(brokerd_msg_append(b, "{sv}", "two", "as", 2U, "x", "y"), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(b), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(b, '(', "id"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(b, 'i', &i3), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(b, 'd', &d), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(b), ==, 0);
	ASSERT_INT(brokerd_msg_open_container(b, 'v', "(s)"), ==, 0);
	ASSERT_INT(brokerd_msg_append(b, "(s)", "deep"), ==, 0);
	ASSERT_INT(brokerd_msg_close_container(b), ==, 0);
	ASSERT_INT(brokerd_msg_seal(b), ==, 0);

	ASSERT_INT(brokerd_msg_get_data(a, &da, &la), ==, 0);
	ASSERT_INT(brokerd_msg_get_data(b, &db, &lb), ==, 0);
	ASSERT(la == lb && memcmp(da, db, la) == 0);

	/* read back what follows the dict */
	ASSERT_INT(brokerd_msg_read(a, "yis", &y, &ri, &s), ==, 1);
	ASSERT_INT(brokerd_msg_enter_container(a, 'a', NULL), ==, 1);
	ASSERT_INT(brokerd_msg_read(a, "{sv}", &s, "u", &ru), ==, 1);
	ASSERT(ru == 1);
	ASSERT_INT(brokerd_msg_enter_container(a, '{', "sv"), ==, 1);
	ASSERT_INT(brokerd_msg_read(a, "s", &s), ==, 1);
	ASSERT_INT(brokerd_msg_enter_container(a, 'v', "as"), ==, 1);
	ASSERT_INT(brokerd_msg_enter_container(a, 'a', "s"), ==, 1);
	ASSERT_INT(brokerd_msg_read(a, "ss", &s, &s2), ==, 1);
	ASSERT(strcmp(s, "x") == 0 && strcmp(s2, "y") == 0);
	ASSERT_INT(brokerd_msg_exit_container(a), ==, 0);
	ASSERT_INT(brokerd_msg_exit_container(a), ==, 0);
	ASSERT_INT(brokerd_msg_exit_container(a), ==, 0);
	ASSERT_INT(brokerd_msg_exit_container(a), ==, 0);
	ASSERT_INT(brokerd_msg_read(a, "(id)v", &ri, &rd, "(s)", &s), ==, 1);
	ASSERT(ri == 3 && rd == 2.5);
	ASSERT_STR(s, "deep");
	/* arrays are entered, not read whole */
	ASSERT_INT(brokerd_msg_rewind(a), ==, 0);
	ASSERT_INT(brokerd_msg_read(a, "yis", &y, &ri, &s), ==, 1);
	ASSERT_INT(brokerd_msg_read(a, "a{sv}", NULL), ==, -EOPNOTSUPP);
	brokerd_msg_unref(a);
	brokerd_msg_unref(b);
}

/* What the signature does not allow is refused, and the message stays usable. */
static void test_refusals(void)
{
	brokerd_msg *m = NULL, *r = NULL;
	uint32_t u = 1;

	ASSERT_INT(brokerd_msg_new_call(NULL, &m, "noname", "/", NULL, "M"), ==, -EINVAL);
	ASSERT_INT(brokerd_msg_new_call(NULL, &m, NAME, "bad/path", NULL, "M"), ==, -EINVAL);
	ASSERT_INT(brokerd_msg_new_signal(NULL, &m, NAME, "/", NULL, "M"), ==,
		   -EINVAL); /* a signal needs an interface */
	ASSERT_INT(brokerd_msg_new_call(NULL, &m, NAME, "/", NULL, "M"), ==, 0);
	/* a reply is to a received call only */
	ASSERT_INT(brokerd_msg_new_reply(m, &r), ==, -EINVAL);
	ASSERT_INT(brokerd_msg_append_basic(m, 'z', &u), ==, -EINVAL);
	ASSERT_INT(brokerd_msg_open_container(m, '{', "su"), ==, -EINVAL); /* a dict entry outside an array */
	ASSERT_INT(brokerd_msg_open_container(m, 'a', "u"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 's', "not a u"), ==, -ENXIO);
	/* the writer's first error sticks: the message cannot be sealed */
	ASSERT(brokerd_msg_append_basic(m, 'u', &u) < 0);
	ASSERT(brokerd_msg_seal(m) < 0);
	brokerd_msg_unref(m);

	ASSERT_INT(brokerd_msg_new_call(NULL, &m, NAME, "/", NULL, "M"), ==, 0);
	ASSERT_INT(brokerd_msg_append(m, "s", "bad \xff utf-8"), ==, -EINVAL);
	brokerd_msg_unref(m);
	ASSERT_INT(brokerd_msg_new_call(NULL, &m, NAME, "/", NULL, "M"), ==, 0);
	ASSERT_INT(brokerd_msg_append(m, "v", "uu", 1U, 2U), ==, -EINVAL); /* a variant holds one type */
	ASSERT_INT(brokerd_bus_send(NULL, m), ==, -EINVAL);
	brokerd_msg_unref(m);
	/* an empty body seals to signature "" */
	ASSERT_INT(brokerd_msg_new_call(NULL, &m, NAME, "/", NULL, "M"), ==, 0);
	ASSERT_INT(brokerd_msg_seal(m), ==, 0);
	ASSERT_STR(brokerd_msg_get_signature(m), "");
	ASSERT_INT(brokerd_msg_read_basic(m, 'u', &u), ==, 0);
	brokerd_msg_unref(m);
}

int main(void)
{
	test_basic_roundtrip();
	test_append_varargs();
	test_refusals();
	printf("test-msg-typed: ok\n");
	return 0;
}
