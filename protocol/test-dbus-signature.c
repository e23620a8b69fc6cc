/* SPDX-License-Identifier: MIT */
/* test-dbus-signature.c - unit tests of dbus-signature.c. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "protocol/dbus-signature.h"
#include "util/macro.h"
#include "util/test.h"

static void test_types(void)
{
	/* code, alignment, fixed size, basic */
	static const struct {
		char code;
		unsigned int align, size;
		bool basic;
	} types[] = {
		{ 'y', 1, 1, true },  { 'b', 4, 4, true },  { 'n', 2, 2, true },  { 'q', 2, 2, true },
		{ 'i', 4, 4, true },  { 'u', 4, 4, true },  { 'x', 8, 8, true },  { 't', 8, 8, true },
		{ 'd', 8, 8, true },  { 'h', 4, 4, true },  { 's', 4, 0, true },  { 'o', 4, 0, true },
		{ 'g', 1, 0, true },  { 'a', 4, 0, false }, { 'v', 1, 0, false }, { '(', 8, 0, false },
		{ '{', 8, 0, false }, { 'r', 0, 0, false }, { 'e', 0, 0, false }, { 0, 0, 0, false },
	};

	for (size_t i = 0; i < ELEMENTSOF(types); i++) {
		ASSERT_INT(dbus_type_alignment(types[i].code), ==, types[i].align);
		ASSERT_INT(dbus_type_fixed_size(types[i].code), ==, types[i].size);
		ASSERT(dbus_type_is_fixed(types[i].code) == (types[i].size > 0));
		ASSERT(dbus_type_is_basic(types[i].code) == types[i].basic);
	}
}

static void test_valid(void)
{
	static const char *const good[] = {
		"",	     "y",	"ybnqiuxtdsogh", "v",	  "ai",
		"aai",	     "a(ii)",	"(i(ii))",	 "a{sv}", "a{oa{sa{sv}}}",
		"a{ya(ss)}", "(a{sv})", "aa{sv}",	 "(v)av", "sa{sv}as",
	};
	static const char *const bad[] = {
		"a",	"aa",	  "(",	   ")",	      "()",	 "(ii", "ii)", "{sv}", "a{}",
		"a{s}", "a{svs}", "a{vs}", "a{(s)s}", "a{as}",	 "r",	"e",   "m",    "*",
		"?",	"@",	  "a{sv",  "(i}",     "a{s(i})", "z",	"(a)",
	};

	for (size_t i = 0; i < ELEMENTSOF(good); i++) {
		if (!dbus_signature_is_valid(good[i])) {
			fprintf(stderr, "rejected %s\n", good[i]);
			ASSERT(0);
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		if (dbus_signature_is_valid(bad[i])) {
			fprintf(stderr, "accepted %s\n", bad[i]);
			ASSERT(0);
		}
	}
	ASSERT(!dbus_signature_is_valid(NULL));
	/* an embedded NUL is never a type code */
	ASSERT_INT(dbus_signature_validate("i\0i", 3), ==, -EINVAL);
}

static void test_single(void)
{
	ASSERT_INT(dbus_signature_next("a{sv}i", 6), ==, 5);
	ASSERT_INT(dbus_signature_next("(ii)(ii)", 8), ==, 4);
	ASSERT_INT(dbus_signature_next("aai", 3), ==, 3);
	ASSERT_INT(dbus_signature_next("", 0), ==, -EINVAL);
	ASSERT_INT(dbus_signature_next("aa", 2), ==, -EINVAL);
	ASSERT(dbus_signature_is_single("a(ii)"));
	ASSERT(dbus_signature_is_single("v"));
	ASSERT(!dbus_signature_is_single("ii"));
	ASSERT(!dbus_signature_is_single("aiai"));
	ASSERT(!dbus_signature_is_single(""));
	/* a dict entry standing alone, as an array's element handed on alone */
	ASSERT_INT(dbus_signature_next("{sv}i", 5), ==, -EINVAL);
	ASSERT_INT(dbus_signature_next_element("{sv}i"), ==, 4);
	ASSERT_INT(dbus_signature_next_element("a{sv}i"), ==, 5);
	ASSERT_INT(dbus_signature_next_element("{}"), ==, -EINVAL);
	ASSERT_INT(dbus_signature_next_element("{sv"), ==, -EINVAL);
	ASSERT_INT(dbus_signature_next_element(""), ==, -EINVAL);
	ASSERT_INT(dbus_signature_next_element(NULL), ==, -EINVAL);
}

static void test_limits(void)
{
	char s[300];
	size_t n = 0;

	/* 32 arrays are fine, 33 are not */
	memset(s, 'a', 32);
	s[32] = 'i';
	ASSERT_INT(dbus_signature_validate(s, 33), ==, 0);
	memset(s, 'a', 33);
	s[33] = 'i';
	ASSERT_INT(dbus_signature_validate(s, 34), ==, -EINVAL);

	/* 32 structs, then 33 */
	for (n = 0; n < 32; n++)
		s[n] = '(';
	s[n++] = 'i';
	for (int k = 0; k < 32; k++)
		s[n++] = ')';
	ASSERT_INT(dbus_signature_validate(s, n), ==, 0);
	n = 0;
	for (int k = 0; k < 33; k++)
		s[n++] = '(';
	s[n++] = 'i';
	for (int k = 0; k < 33; k++)
		s[n++] = ')';
	ASSERT_INT(dbus_signature_validate(s, n), ==, -EINVAL);

	/* dict entries count as structs: 32 of a{s..} nested is 32 + 32 */
	n = 0;
	for (int k = 0; k < 32; k++) {
		s[n++] = 'a';
		s[n++] = '{';
		s[n++] = 's';
	}
	s[n++] = 'i';
	for (int k = 0; k < 32; k++)
		s[n++] = '}';
	ASSERT_INT(dbus_signature_validate(s, n), ==, 0);

	/* 32 arrays and 32 structs together: total depth 64 */
	n = 0;
	for (int k = 0; k < 32; k++)
		s[n++] = 'a';
	for (int k = 0; k < 32; k++)
		s[n++] = '(';
	s[n++] = 'y';
	for (int k = 0; k < 32; k++)
		s[n++] = ')';
	ASSERT_INT(dbus_signature_validate(s, n), ==, 0);

	/* length: 255 bytes fine, 256 not */
	memset(s, 'y', 256);
	ASSERT_INT(dbus_signature_validate(s, 255), ==, 0);
	ASSERT_INT(dbus_signature_validate(s, 256), ==, -EINVAL);
}

static void test_object_path(void)
{
	static const char *const good[] = { "/", "/a", "/org/freedesktop/DBus", "/_1/A_b/9" };
	static const char *const bad[] = { "", "a", "//", "/a/", "/a//b", "/a-b", "/a.b", "/ä" };

	for (size_t i = 0; i < ELEMENTSOF(good); i++)
		ASSERT(dbus_object_path_is_valid(good[i]));
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ASSERT(!dbus_object_path_is_valid(bad[i]));
	ASSERT_INT(dbus_object_path_validate("/a\0b", 4), ==, -EINVAL);
}

static void test_string(void)
{
	static const char *const good[] = {
		"",
		"plain",
		"\xc3\xa4",
		"\xe2\x82\xac",
		"\xf0\x9f\x98\x80",
		"\xf4\x8f\xbf\xbf",
		"\xef\xb7\x90", /* U+FDD0, a noncharacter: allowed */
		"\xef\xbf\xbf", /* U+FFFF */
	};
	static const char *const bad[] = {
		"\x80",
		"\xc3",
		"\xc0\x80",
		"\xc1\xbf",
		"\xe0\x80\x80",
		"\xed\xa0\x80",
		"\xf0\x80\x80\x80",
		"\xf4\x90\x80\x80",
		"\xf8\x88\x80\x80\x80",
		"\xff",
		"\xe2\x82",
		"a\xc3(",
	};

	for (size_t i = 0; i < ELEMENTSOF(good); i++)
		ASSERT_INT(dbus_string_validate(good[i], strlen(good[i])), ==, 0);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		if (dbus_string_validate(bad[i], strlen(bad[i])) != -EINVAL) {
			fprintf(stderr, "accepted bad UTF-8 #%zu\n", i);
			ASSERT(0);
		}
	}
	ASSERT_INT(dbus_string_validate("a\0b", 3), ==, -EINVAL);
}

int main(void)
{
	test_types();
	test_valid();
	test_single();
	test_limits();
	test_object_path();
	test_string();
	return 0;
}
