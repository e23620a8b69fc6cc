/* SPDX-License-Identifier: MIT */
/*
 * util/lines.h - reading line-based configuration text (INI-like files:
 * brokerd's policy and activation files): one line at a time, trimmed,
 * comments and blank lines skipped, numbered for error messages; and the
 * "FILE:LINE: what" error those parsers report.
 */
#ifndef BROKERD_UTIL_LINES_H
#define BROKERD_UTIL_LINES_H

#include <stddef.h>

#define LINE_MAX_LEN 1024 /* a longer line is an error */

struct line_reader {
	const char *next;	   /* the rest of the text */
	const char *comment_start; /* a line whose first character is one of these is a comment */
	char comment_inline;	   /* starts a comment anywhere in a line; 0: none */
	unsigned int line;	   /* number of the line last read (1 = first) */
	char buf[LINE_MAX_LEN];
};

/*
 * Reads text (NUL-terminated, not copied: it must outlive the reader). With
 * comment_inline '#', "a b # c" reads as "a b"; with comment_start "#;", a
 * line "; x" is skipped. Either may be 0 / NULL.
 */
void line_reader_init(struct line_reader *lr, const char *text, const char *comment_start,
		      char comment_inline);

/*
 * The next line that is not blank or a comment, without its comment and
 * without leading and trailing blanks (space, tab, CR): 1 with *ret in
 * lr->buf (valid until the next call, may be changed), 0 at the end of the
 * text, -E2BIG for a line of LINE_MAX_LEN bytes or more. lr->line is the
 * line's number (at the end: the number of lines).
 */
int line_reader_next(struct line_reader *lr, char **ret);

/*
 * Writes "FILE:LINE: what" into err (if err_len) and returns -EINVAL: what
 * a config parser returns for a bad file, so that its caller can log err
 * and keep its old state.
 */
int line_fail(char *err, size_t err_len, const char *file, unsigned int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
