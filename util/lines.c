/* SPDX-License-Identifier: MIT */
/* util/lines.c - reading line-based configuration text (see lines.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/lines.h"

void line_reader_init(struct line_reader *lr, const char *text, const char *comment_start,
		      char comment_inline)
{
	memset(lr, 0, sizeof(*lr));
	lr->next = text;
	lr->comment_start = comment_start;
	lr->comment_inline = comment_inline;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

int line_reader_next(struct line_reader *lr, char **ret)
{
	while (*lr->next) {
		const char *eol = strchr(lr->next, '\n');
		size_t len = eol ? (size_t)(eol - lr->next) : strlen(lr->next);
		char *l, *end;

		lr->line++;
		if (len >= sizeof(lr->buf))
			return -E2BIG;
		memcpy(lr->buf, lr->next, len);
		lr->buf[len] = 0;
		lr->next += len + (eol ? 1 : 0);
		if (lr->comment_inline) {
			l = strchr(lr->buf, lr->comment_inline);
			if (l)
				*l = 0;
		}
		for (end = lr->buf + strlen(lr->buf); end > lr->buf && is_blank(end[-1]); end--)
			end[-1] = 0;
		for (l = lr->buf; *l == ' ' || *l == '\t'; l++)
			;
		if (!*l || (lr->comment_start && strchr(lr->comment_start, *l)))
			continue;
		*ret = l;
		return 1;
	}
	return 0;
}

int line_fail(char *err, size_t err_len, const char *file, unsigned int line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (err && err_len)
		snprintf(err, err_len, "%s:%u: %s", file, line, msg);
	return -EINVAL;
}
