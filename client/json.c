/* SPDX-License-Identifier: MIT */
/*
 * json.c - minimal JSON writer, see json.h.
 */
#include <inttypes.h>
#include <string.h>

#include "client/json.h"

void json_init(struct json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

/* a value is about to be written at the current level */
static void json_value_prefix(struct json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->need_comma[j->depth])
		fputc(',', j->f);
	j->need_comma[j->depth] = true;
}

static void json_open(struct json *j, char c)
{
	json_value_prefix(j);
	fputc(c, j->f);
	if (j->depth + 1 < JSON_DEPTH_MAX)
		j->depth++;
	j->need_comma[j->depth] = false;
}

static void json_close(struct json *j, char c)
{
	fputc(c, j->f);
	if (j->depth > 0)
		j->depth--;
}

void json_begin_object(struct json *j)
{
	json_open(j, '{');
}
void json_end_object(struct json *j)
{
	json_close(j, '}');
}
void json_begin_array(struct json *j)
{
	json_open(j, '[');
}
void json_end_array(struct json *j)
{
	json_close(j, ']');
}

/* length of a valid UTF-8 sequence at s (max n bytes), 0 if invalid */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void json_write_string(struct json *j, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', j->f);
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t l;

		switch (c) {
		case '"':
			fputs("\\\"", j->f);
			i++;
			continue;
		case '\\':
			fputs("\\\\", j->f);
			i++;
			continue;
		case '\n':
			fputs("\\n", j->f);
			i++;
			continue;
		case '\r':
			fputs("\\r", j->f);
			i++;
			continue;
		case '\t':
			fputs("\\t", j->f);
			i++;
			continue;
		case '\b':
			fputs("\\b", j->f);
			i++;
			continue;
		case '\f':
			fputs("\\f", j->f);
			i++;
			continue;
		default:
			break;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(j->f, "\\u%04x", c);
			i++;
			continue;
		}
		l = utf8_len(s + i, n - i);
		if (l == 0) {
			fprintf(j->f, "\\u%04x", c); /* stray byte: show it, stay valid */
			i++;
			continue;
		}
		fwrite(s + i, 1, l, j->f);
		i += l;
	}
	fputc('"', j->f);
}

void json_key(struct json *j, const char *key)
{
	json_value_prefix(j);
	json_write_string(j, key, strlen(key));
	fputc(':', j->f);
	j->after_key = true;
}

void json_string(struct json *j, const char *s)
{
	if (!s) {
		json_null(j);
		return;
	}
	json_string_len(j, s, strlen(s));
}

void json_string_len(struct json *j, const char *s, size_t len)
{
	json_value_prefix(j);
	json_write_string(j, s, len);
}

void json_int(struct json *j, int64_t v)
{
	json_value_prefix(j);
	fprintf(j->f, "%" PRId64, v);
}

void json_uint(struct json *j, uint64_t v)
{
	json_value_prefix(j);
	fprintf(j->f, "%" PRIu64, v);
}

void json_bool(struct json *j, bool v)
{
	json_value_prefix(j);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j)
{
	json_value_prefix(j);
	fputs("null", j->f);
}

void json_member_string(struct json *j, const char *key, const char *s)
{
	json_key(j, key);
	json_string(j, s);
}

void json_member_uint(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	json_uint(j, v);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}
