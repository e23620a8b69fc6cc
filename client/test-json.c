/* SPDX-License-Identifier: MIT */
/*
 * test-json.c - host unit tests of brokerctl's JSON writer: nesting, commas,
 * escaping of control characters, quotes and invalid UTF-8.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/json.h"
#include "util/test.h"

static char *render(void (*fn)(struct json *))
{
	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);
	struct json j;

	ASSERT(f);
	json_init(&j, f);
	fn(&j);
	fclose(f);
	return out;
}

static void doc_nested(struct json *j)
{
	json_begin_object(j);
	json_key(j, "name");
	json_string(j, "org.example.Foo");
	json_key(j, "owners");
	json_begin_array(j);
	json_string(j, ":1.1");
	json_string(j, ":1.2");
	json_end_array(j);
	json_key(j, "uid");
	json_uint(j, 2001);
	json_key(j, "delta");
	json_int(j, -3);
	json_key(j, "ok");
	json_bool(j, true);
	json_key(j, "none");
	json_null(j);
	json_key(j, "empty");
	json_begin_array(j);
	json_end_array(j);
	json_key(j, "objs");
	json_begin_array(j);
	json_begin_object(j);
	json_end_object(j);
	json_begin_object(j);
	json_key(j, "a");
	json_uint(j, 1);
	json_member_string(j, "b", "x");
	json_member_uint(j, "c", 2);
	json_end_object(j);
	json_end_array(j);
	json_end_object(j);
	json_finish(j);
}

static void doc_escape(struct json *j)
{
	json_begin_array(j);
	json_string(j, "q\"b\\n\n\t\x01\x7f");
	json_string(j, "caf\xc3\xa9");
	json_string_len(j,
			"a\xff"
			"b\xc3",
			4);
	json_string_len(j, "z\0y", 3);
	json_end_array(j);
}

int main(void)
{
	char *s;

	s = render(doc_nested);
	ASSERT(strcmp(s, "{\"name\":\"org.example.Foo\",\"owners\":[\":1.1\",\":1.2\"],"
			 "\"uid\":2001,\"delta\":-3,\"ok\":true,\"none\":null,\"empty\":[],"
			 "\"objs\":[{},{\"a\":1,\"b\":\"x\",\"c\":2}]}\n") == 0);
	free(s);

	s = render(doc_escape);
	ASSERT(strcmp(s, "[\"q\\\"b\\\\n\\n\\t\\u0001\\u007f\",\"caf\xc3\xa9\","
			 "\"a\\u00ffb\\u00c3\",\"z\\u0000y\"]") == 0);
	free(s);
	printf("test-json: ok\n");
	return 0;
}
