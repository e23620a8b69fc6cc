/* SPDX-License-Identifier: MIT */
/* test-dbus-match.c - unit tests of dbus-match.c: parsing, canonical text, matching. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "protocol/dbus-match.h"
#include "protocol/dbus-message.h"
#include "protocol/message.h"
#include "util/macro.h"
#include "util/test.h"

static void expect_canonical(const char *text, const char *canonical)
{
	struct dbus_match_rule r;
	char *out = NULL;

	ASSERT_INT(dbus_match_rule_parse(&r, text), ==, 0);
	ASSERT_INT(dbus_match_rule_format(&r, &out), ==, 0);
	ASSERT_STR(out, canonical);
	dbus_match_rule_deinit(&r);
	/* the canonical text is a rule with the same canonical text */
	ASSERT_INT(dbus_match_rule_parse(&r, canonical), ==, 0);
	free(out);
	ASSERT_INT(dbus_match_rule_format(&r, &out), ==, 0);
	ASSERT_STR(out, canonical);
	free(out);
	dbus_match_rule_deinit(&r);
}

static void test_parse(void)
{
	expect_canonical("", "");
	expect_canonical("type=signal", "type='signal'");
	/* key order and quoting do not matter */
	expect_canonical("member='Changed',type='signal',sender=org.example.A",
			 "type='signal',sender='org.example.A',member='Changed'");
	expect_canonical("  interface='org.example.I',path=/a/b", "interface='org.example.I',path='/a/b'");
	/* quoting: a backslash is literal inside quotes, \' outside is a quote */
	expect_canonical("arg0='a\\b'", "arg0='a\\b'");
	expect_canonical("arg0='it'\\''s'", "arg0='it'\\''s'");
	expect_canonical("arg0=it\\'s", "arg0='it'\\''s'");
	expect_canonical("arg0=a\\b", "arg0='a\\b'");
	expect_canonical("arg0='a,b'", "arg0='a,b'");
	expect_canonical("arg0=''", "arg0=''");
	expect_canonical("arg3='x',arg1path='/a/'", "arg1path='/a/',arg3='x'");
	expect_canonical("arg63='x'", "arg63='x'");
	expect_canonical("arg0namespace='org.example',path_namespace='/org'",
			 "path_namespace='/org',arg0namespace='org.example'");
	expect_canonical("sender=':1.5',destination=':1.7',type='method_return'",
			 "type='method_return',sender=':1.5',destination=':1.7'");
	expect_canonical("type='error'", "type='error'");
	expect_canonical("type='method_call'", "type='method_call'");
}

static void test_invalid(void)
{
	static const char *const bad[] = {
		"type",
		"=signal",
		"type='signal",
		"type='bogus'",
		"type='signal',type='signal'",
		"type='signal',",
		"sender='not a name'",
		"sender='x'",
		"interface='noDots'",
		"interface='a..b'",
		"member='a.b'",
		"member=''",
		"path='a/b'",
		"path='/a/'",
		"path='/a',path_namespace='/a'",
		"path_namespace='/a',path='/a'",
		"destination='1bad.name'",
		"arg64='x'",
		"arg01='x'",
		"arg='x'",
		"arg0x='x'",
		"arg0='a',arg0='b'",
		"arg0='a',arg0path='/b'",
		"arg0='a',arg0namespace='b'",
		"arg0namespace='b',arg0='a'",
		"arg0namespace='a..b'",
		"arg0namespace='1a'",
		"arg1namespace='a'",
		"eavesdrop='true'",
		"unknown='x'",
		"averyveryveryveryverylongkeyname='x'",
	};
	struct dbus_match_rule r;
	char *big;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		if (dbus_match_rule_parse(&r, bad[i]) != -EINVAL) {
			fprintf(stderr, "accepted: %s\n", bad[i]);
			ASSERT(false);
		}
	}
	ASSERT_INT(dbus_match_rule_parse(&r, NULL), ==, -EINVAL);
	big = malloc(DBUS_MATCH_TEXT_MAX + 16);
	ASSERT(big);
	memset(big, 'a', DBUS_MATCH_TEXT_MAX + 15);
	memcpy(big, "arg0=", 5);
	big[DBUS_MATCH_TEXT_MAX + 15] = 0;
	ASSERT_INT(dbus_match_rule_parse(&r, big), ==, -EINVAL);
	free(big);
}

/* A signal from :1.9 on org.example.A's channel with body "sos" + "i". */
struct sample {
	struct dbus_match_message m;
	void *body;
};

static void sample_init(struct sample *s, const char *a0, const char *a1, const char *a2)
{
	struct dbus_writer w;
	int32_t i = 5;
	size_t len;

	ASSERT_INT(dbus_writer_init(&w, "sosi"), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 's', a0), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'o', a1), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 's', a2), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'i', &i), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &s->body, &len), ==, 0);
	dbus_writer_deinit(&w);
	s->m = (struct dbus_match_message){
		.type = CHMSG_SIGNAL,
		.sender = ":1.9",
		.sender_name = "org.example.A",
		.interface = "org.example.I",
		.member = "Changed",
		.path = "/org/example/obj",
		.destination = "",
		.signature = "sosi",
		.body = s->body,
		.body_len = len,
		.byte_order = DBUS_NATIVE_ENDIAN,
	};
}

static bool matches(const char *text, const struct dbus_match_message *m)
{
	struct dbus_match_rule r;
	bool yes;

	ASSERT_INT(dbus_match_rule_parse(&r, text), ==, 0);
	yes = dbus_match_rule_matches(&r, m);
	dbus_match_rule_deinit(&r);
	return yes;
}

static void test_match(void)
{
	static const struct {
		const char *rule;
		bool yes;
	} cases[] = {
		{ "", true },
		{ "type='signal'", true },
		{ "type='method_call'", false },
		{ "sender='org.example.A'", true },
		{ "sender=':1.9'", true },
		{ "sender=':1.8'", false },
		{ "sender='org.example.B'", false },
		{ "interface='org.example.I'", true },
		{ "interface='org.example.J'", false },
		{ "member='Changed'", true },
		{ "member='Change'", false },
		{ "path='/org/example/obj'", true },
		{ "path='/org/example'", false },
		{ "path_namespace='/org/example'", true },
		{ "path_namespace='/org/example/obj'", true },
		{ "path_namespace='/org/exam'", false },
		{ "path_namespace='/'", true },
		{ "destination=':1.1'", false },
		{ "arg0='org.example.Foo.Bar'", true },
		{ "arg0='org.example.Foo'", false },
		{ "arg0namespace='org.example.Foo'", true },
		{ "arg0namespace='org.example'", true },
		{ "arg0namespace='org.exam'", false },
		{ "arg0namespace='org.example.Foo.Bar'", true },
		/* argN is for strings: the object path at 1 does not match */
		{ "arg1='/a/b/c'", false },
		{ "arg1path='/a/b/c'", true },
		{ "arg1path='/a/b/'", true },
		{ "arg1path='/a/b'", false },
		{ "arg1path='/'", true },
		{ "arg1path='/a/b/c/d'", false },
		/* arg2 is "/x/" (a string): a rule value below it matches argNpath */
		{ "arg2path='/x/y/z'", true },
		{ "arg2path='/x'", false },
		{ "arg2='/x/'", true },
		/* arg 3 is an int32: no string to compare; arg 4 does not exist */
		{ "arg3='5'", false },
		{ "arg4=''", false },
		{ "type='signal',sender='org.example.A',arg0='org.example.Foo.Bar',arg1path='/a/'", true },
		{ "type='signal',sender='org.example.A',arg0='org.example.Foo.Bar',arg2='y'", false },
	};
	struct sample s;

	sample_init(&s, "org.example.Foo.Bar", "/a/b/c", "/x/");
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		if (matches(cases[i].rule, &s.m) != cases[i].yes) {
			fprintf(stderr, "wrong: %s\n", cases[i].rule);
			ASSERT(false);
		}
	/* the other byte order reads the same arguments */
	{
		static const uint8_t be[] = { 0, 0, 0, 2, 'a', 'b', 0 }, le[] = { 2, 0, 0, 0, 'a', 'b', 0 };
		struct dbus_match_message o = s.m;

		o.signature = "s";
		o.body_len = sizeof(be);
		o.body = be;
		o.byte_order = 'B';
		ASSERT(matches("arg0='ab'", &o));
		o.body = le;
		o.byte_order = 'l';
		ASSERT(matches("arg0='ab'", &o));
		ASSERT(!matches("arg0='a'", &o));
	}
	/* no body, but a rule about arguments */
	s.m.signature = "";
	ASSERT(!matches("arg0=''", &s.m));
	ASSERT(matches("member='Changed'", &s.m));
	/* a unicast signal has a destination */
	s.m.destination = ":1.1";
	ASSERT(matches("destination=':1.1'", &s.m));
	/* an unowned channel: only the unique name identifies the sender */
	s.m.sender_name = NULL;
	ASSERT(!matches("sender='org.example.A'", &s.m));
	free(s.body);
}

static bool parsed_matches(const struct dbus_message *m, const char *sender_name, const char *rule)
{
	struct dbus_match_message mm;
	struct dbus_match_rule r;
	bool yes;

	dbus_match_message_of(&mm, m, sender_name);
	ASSERT_INT(dbus_match_rule_parse(&r, rule), ==, 0);
	yes = dbus_match_rule_matches(&r, &mm);
	dbus_match_rule_deinit(&r);
	return yes;
}

/* A message of the D-Bus socket as a rule sees it: its header, and the driver as a well-known sender. */
static void test_message_of(void)
{
	struct dbus_header h = { .type = DBUS_MESSAGE_SIGNAL,
				 .serial = 1,
				 .path = "/org/freedesktop/DBus",
				 .interface = "org.freedesktop.DBus",
				 .member = "NameLost",
				 .destination = ":1.7",
				 .sender = "org.freedesktop.DBus" };
	struct dbus_match_message mm;
	struct dbus_message m;
	void *data;
	size_t len;

	ASSERT_INT(dbus_message_write(&h, NULL, 0, &data, &len), ==, 0);
	ASSERT_INT(dbus_message_parse(&m, data, len, 0), ==, 0);
	dbus_match_message_of(&mm, &m, NULL);
	ASSERT_INT(mm.type, ==, DBUS_MESSAGE_SIGNAL);
	ASSERT_STR(mm.sender, "org.freedesktop.DBus");
	ASSERT_STR(mm.sender_name, "org.freedesktop.DBus");
	ASSERT_STR(mm.path, "/org/freedesktop/DBus");
	ASSERT_STR(mm.interface, "org.freedesktop.DBus");
	ASSERT_STR(mm.member, "NameLost");
	ASSERT_STR(mm.destination, ":1.7");
	ASSERT_STR(mm.signature, "");
	ASSERT_INT(mm.body_len, ==, 0);
	ASSERT(parsed_matches(&m, NULL, "sender='org.freedesktop.DBus',member='NameLost',destination=':1.7'"));
	dbus_message_deinit(&m);

	/* another sender: a well-known name only when the caller says whose channel carried it */
	h.sender = ":1.9";
	h.member = "Changed";
	ASSERT_INT(dbus_message_write(&h, NULL, 0, &data, &len), ==, 0);
	ASSERT_INT(dbus_message_parse(&m, data, len, 0), ==, 0);
	dbus_match_message_of(&mm, &m, NULL);
	ASSERT(!mm.sender_name);
	ASSERT(parsed_matches(&m, NULL, "sender=':1.9'"));
	ASSERT(!parsed_matches(&m, NULL, "sender='org.example.A'"));
	ASSERT(parsed_matches(&m, "org.example.A", "sender='org.example.A',member='Changed'"));
	dbus_message_deinit(&m);
}

int main(void)
{
	test_parse();
	test_invalid();
	test_match();
	test_message_of();
	return 0;
}
