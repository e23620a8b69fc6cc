/* SPDX-License-Identifier: MIT */
/*
 * json.h - a minimal JSON writer for brokerctl --json: objects, arrays,
 * strings (escaped per RFC 8259), integers and booleans, with the commas kept
 * track of. Writes to a FILE; unit-tested by test-json.c.
 */
#ifndef BROKERD_CLIENT_JSON_H
#define BROKERD_CLIENT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH_MAX 16

struct json {
	FILE *f;
	unsigned int depth;
	bool need_comma[JSON_DEPTH_MAX];
	bool after_key;
};

void json_init(struct json *j, FILE *f);
void json_begin_object(struct json *j);
void json_end_object(struct json *j);
void json_begin_array(struct json *j);
void json_end_array(struct json *j);
void json_key(struct json *j, const char *key);
void json_string(struct json *j, const char *s);
/* bytes that may not be UTF-8 text: invalid bytes become \u00XX */
void json_string_len(struct json *j, const char *s, size_t len);
void json_int(struct json *j, int64_t v);
void json_uint(struct json *j, uint64_t v);
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* a key and its value: what objects are mostly made of */
void json_member_string(struct json *j, const char *key, const char *s);
void json_member_uint(struct json *j, const char *key, uint64_t v);
/* ends the document with a newline */
void json_finish(struct json *j);

#endif
