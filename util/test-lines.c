/* SPDX-License-Identifier: MIT */
/* util/test-lines.c - the config line reader and line_fail(). */
#include <errno.h>
#include <string.h>

#include "util/lines.h"
#include "util/test.h"

static void test_policy_style(void)
{
	struct line_reader lr;
	char *l;

	/* '#' anywhere starts a comment; blank and comment-only lines are skipped. */
	line_reader_init(&lr, "# head\n\n[default]  \r\n\t allow send a.b # why\r\n   # indented\nlast", NULL,
			 '#');
	ASSERT_INT(line_reader_next(&lr, &l), ==, 1);
	ASSERT(strcmp(l, "[default]") == 0);
	ASSERT_INT(lr.line, ==, 3);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 1);
	ASSERT(strcmp(l, "allow send a.b") == 0);
	ASSERT_INT(lr.line, ==, 4);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 1);
	ASSERT(strcmp(l, "last") == 0); /* no newline at the end */
	ASSERT_INT(lr.line, ==, 6);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 0);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 0);
	ASSERT_INT(lr.line, ==, 6);
}

static void test_service_style(void)
{
	struct line_reader lr;
	char *l;

	/* '#' and ';' only at the start of a line; in a value they are kept. */
	line_reader_init(&lr, "; c\n  # c\n[Service]\nName=a.b # not a comment\n\n", "#;", 0);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 1);
	ASSERT(strcmp(l, "[Service]") == 0);
	ASSERT_INT(lr.line, ==, 3);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 1);
	ASSERT(strcmp(l, "Name=a.b # not a comment") == 0);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 0);
	ASSERT_INT(lr.line, ==, 5); /* the trailing empty line counts */
}

static void test_limits(void)
{
	static char text[2 * LINE_MAX_LEN + 8];
	struct line_reader lr;
	char *l;

	/* LINE_MAX_LEN - 1 bytes is the longest line. */
	memset(text, 'x', LINE_MAX_LEN - 1);
	strcpy(text + LINE_MAX_LEN - 1, "\n");
	memset(text + LINE_MAX_LEN, 'y', LINE_MAX_LEN);
	line_reader_init(&lr, text, NULL, 0);
	ASSERT_INT(line_reader_next(&lr, &l), ==, 1);
	ASSERT_INT(strlen(l), ==, LINE_MAX_LEN - 1);
	ASSERT_INT(line_reader_next(&lr, &l), ==, -E2BIG);
	ASSERT_INT(lr.line, ==, 2);

	line_reader_init(&lr, "", "#", '#');
	ASSERT_INT(line_reader_next(&lr, &l), ==, 0);
	ASSERT_INT(lr.line, ==, 0);
}

static void test_fail(void)
{
	char err[64];

	ASSERT_INT(line_fail(err, sizeof(err), "/etc/x.conf", 3, "unknown action '%s'", "eat"), ==, -EINVAL);
	ASSERT(strcmp(err, "/etc/x.conf:3: unknown action 'eat'") == 0);
	ASSERT_INT(line_fail(NULL, 0, "f", 1, "x"), ==, -EINVAL);
	ASSERT_INT(line_fail(err, 8, "file", 12, "long message"), ==, -EINVAL);
	ASSERT(strcmp(err, "file:12") == 0); /* cut, still terminated */
}

int main(void)
{
	test_policy_style();
	test_service_style();
	test_limits();
	test_fail();
	return 0;
}
