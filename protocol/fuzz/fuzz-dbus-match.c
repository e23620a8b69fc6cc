/* SPDX-License-Identifier: MIT */
/*
 * fuzz-dbus-match.c - libFuzzer target for dbus-match.c. The first byte
 * picks what the rest is: a match rule string (from an application, or a
 * D-Bus front end's client) or a channel message from another process that
 * rules with arguments are matched against.
 *
 * A rule that parses must format to a canonical text that parses to the
 * same canonical text; matching never fails on a decoded message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-match.h"
#include "protocol/fuzz/fuzz.h"
#include "protocol/message.h"

static const char *const rules[] = {
	"",
	"type='signal',sender='org.example.A',interface='org.example.I',member='Changed'",
	"arg0='a',arg1path='/a/',arg2='',arg5path='/'",
	"arg0namespace='org.example',path_namespace='/org'",
	"sender=':1.1',destination=':1.2',path='/'",
	"arg63='x'",
};

static void fuzz_rule(const uint8_t *data, size_t size)
{
	struct dbus_match_rule r;
	char *text, *canonical = NULL, *again = NULL;

	text = malloc(size + 1);
	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = 0;
	if (dbus_match_rule_parse(&r, text) == 0) {
		CHECK(dbus_match_rule_format(&r, &canonical) == 0);
		dbus_match_rule_deinit(&r);
		CHECK(dbus_match_rule_parse(&r, canonical) == 0);
		CHECK(dbus_match_rule_format(&r, &again) == 0);
		CHECK(strcmp(canonical, again) == 0);
		dbus_match_rule_deinit(&r);
	}
	free(canonical);
	free(again);
	free(text);
}

static void fuzz_message(const uint8_t *data, size_t size)
{
	struct dbus_match_message mm;
	struct chmsg m;

	if (chmsg_decode(&m, data, size) < 0)
		return;
	mm = (struct dbus_match_message){
		.type = m.type,
		.sender = ":1.1",
		.sender_name = "org.example.A",
		.interface = m.interface,
		.member = m.member,
		.path = m.path,
		.destination = m.destination,
		.signature = m.signature,
		.body = m.body,
		.body_len = m.body_len,
		.byte_order = m.byte_order,
	};
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		struct dbus_match_rule r;

		CHECK(dbus_match_rule_parse(&r, rules[i]) == 0);
		(void)dbus_match_rule_matches(&r, &mm);
		dbus_match_rule_deinit(&r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_message(data + 1, size - 1);
	else
		fuzz_rule(data + 1, size - 1);
	return 0;
}
