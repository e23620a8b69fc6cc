/* SPDX-License-Identifier: MIT */
/*
 * test-brokerctl-args.c - host test of brokerctl's busctl-style bodies:
 * command-line arguments appended by signature (every basic type, arrays,
 * structs, dicts, nested variants), printed back as text and as JSON, and
 * the refusals (bad values, too few or too many arguments).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <fcntl.h>

#include "client/brokerctl-args.h"
#include "util/test.h"

static brokerd_msg *build(const char *sig, const char *line, char *err, size_t err_size, int *ret)
{
	char *copy = strdup(line), *args[64], *save = NULL;
	brokerd_msg *m = NULL;
	int n = 0;

	for (char *t = strtok_r(copy, " ", &save); t && n < 64; t = strtok_r(NULL, " ", &save))
		args[n++] = strcmp(t, "''") == 0 ? "" : t;
	if (brokerd_msg_new_call(NULL, &m, "org.brokerd.test.Echo", "/", "org.brokerd.test.Echo", "Echo") < 0)
		abort();
	*ret = args_append(m, sig, n, args, err, err_size);
	free(copy);
	if (*ret == 0 && brokerd_msg_seal(m) < 0)
		abort();
	return m;
}

static void check_ok(const char *sig, const char *line, const char *text, const char *json)
{
	char err[256] = "", *buf = NULL;
	size_t size = 0;
	FILE *f;
	int k;
	brokerd_msg *m = build(sig, line, err, sizeof(err), &k);

	if (k < 0)
		printf("refused %s %s: %s\n", sig, line, err);
	ASSERT_INT(k, ==, 0);
	f = open_memstream(&buf, &size);
	ASSERT_INT(body_print(m, f), ==, 0);
	fclose(f);
	ASSERT_STR(buf, text);
	free(buf);
	f = open_memstream(&buf, &size);
	ASSERT_INT(body_print_json(m, f, false), ==, 0);
	fclose(f);
	ASSERT_STR(buf, json);
	free(buf);
	brokerd_msg_unref(m);
}

static void check_refused(const char *sig, const char *line, const char *what)
{
	char err[256] = "";
	int k;
	brokerd_msg *m = build(sig, line, err, sizeof(err), &k);

	printf("%s %s: %s\n", sig, line, err);
	ASSERT_INT(k, ==, -EINVAL);
	ASSERT(strstr(err, what));
	brokerd_msg_unref(m);
}

int main(void)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f;
	int k;
	char err[256];
	brokerd_msg *m;

	check_ok("s", "hello", "s \"hello\"\n", "{\"type\":\"s\",\"data\":[\"hello\"]}\n");
	check_ok("as", "2 a b", "as 2 \"a\" \"b\"\n", "{\"type\":\"as\",\"data\":[[\"a\",\"b\"]]}\n");
	check_ok("ybnqiuxtd", "255 yes -5 7 -100000 4000000000 -9000000000 18000000000000000000 2.5",
		 "ybnqiuxtd 255 true -5 7 -100000 4000000000 -9000000000 18000000000000000000 2.5\n",
		 "{\"type\":\"ybnqiuxtd\",\"data\":[255,true,-5,7,-100000,4000000000,-9000000000,"
		 "18000000000000000000,2.5]}\n");
	check_ok("ddd", "0.1 -1e300 3", "ddd 0.1 -1e+300 3\n",
		 "{\"type\":\"ddd\",\"data\":[0.1,-1e+300,3]}\n");
	check_ok("bog", "off /a/b a{sv}", "bog false \"/a/b\" \"a{sv}\"\n",
		 "{\"type\":\"bog\",\"data\":[false,\"/a/b\",\"a{sv}\"]}\n");
	check_ok("a{sv}", "2 key s hello n v i -3", "a{sv} 2 \"key\" s \"hello\" \"n\" v i -3\n",
		 "{\"type\":\"a{sv}\",\"data\":[{\"key\":{\"type\":\"s\",\"data\":\"hello\"},"
		 "\"n\":{\"type\":\"v\",\"data\":{\"type\":\"i\",\"data\":-3}}}]}\n");
	check_ok("(sai)a{ub}", "x 3 1 2 3 1 7 true", "(sai)a{ub} \"x\" 3 1 2 3 1 7 true\n",
		 "{\"type\":\"(sai)a{ub}\",\"data\":[[\"x\",[1,2,3]],{\"7\":true}]}\n");
	check_ok("asv", "0 as 0", "asv 0 as 0\n",
		 "{\"type\":\"asv\",\"data\":[[],{\"type\":\"as\",\"data\":[]}]}\n");
	check_ok("ss", "'' a\"b\\c", "ss \"\" \"a\\\"b\\\\c\"\n",
		 "{\"type\":\"ss\",\"data\":[\"\",\"a\\\"b\\\\c\"]}\n");
	check_ok("", "", "", "{\"type\":\"\",\"data\":[]}\n");

	check_refused("u", "-1", "not a valid value of type 'u'");
	check_refused("y", "256", "not a valid value of type 'y'");
	check_refused("b", "maybe", "not a valid value of type 'b'");
	check_refused("i", "12x", "not a valid value of type 'i'");
	check_refused("o", "a/b", "not a valid object path");
	check_refused("ss", "one", "too few arguments");
	check_refused("as", "3 a b", "too few arguments");
	check_refused("s", "one two", "too many arguments");
	check_refused("", "one", "too many arguments");
	check_refused("as", "x", "not an element count");
	check_refused("v", "ss a b", "not a single complete type");
	check_refused("a{", "0", "invalid signature");
	check_refused("h", "/nonexistent/file", "cannot open");

	/* 'h' as busctl takes it: a file, opened read-only and passed */
	{
		char herr[256] = "";
		struct stat st;
		int hk, fd = -1;
		brokerd_msg *hm = build("sh", "x /dev/null", herr, sizeof(herr), &hk);
		const char *x;

		ASSERT_INT(hk, ==, 0);
		ASSERT_INT(brokerd_msg_read(hm, "sh", &x, &fd), ==, 1);
		ASSERT(fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
		ASSERT((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
		brokerd_msg_unref(hm);
	}

	/* pretty JSON: one value a line, tab-indented, "key" : value */
	m = build("a{sv}", "1 k as 1 x", err, sizeof(err), &k);
	f = open_memstream(&buf, &size);
	body_print_json(m, f, true);
	fclose(f);
	ASSERT_INT(k, ==, 0);
	ASSERT_STR(buf, "{\n\t\"type\" : \"a{sv}\",\n\t\"data\" : [\n\t\t{\n\t\t\t\"k\" : {\n"
			"\t\t\t\t\"type\" : \"as\",\n\t\t\t\t\"data\" : [\n\t\t\t\t\t\"x\"\n"
			"\t\t\t\t]\n\t\t\t}\n\t\t}\n\t]\n}\n");
	free(buf);
	brokerd_msg_unref(m);

	return 0;
}
