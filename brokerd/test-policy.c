/* SPDX-License-Identifier: MIT */
/* test-policy.c - unit tests of the policy parser and evaluation (policy.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brokerd/policy.h"
#include "util/test.h"

static const char text[] = "# test policy\n"
			   "[default]\n"
			   "allow send org.example.*\n"
			   "allow receive *\n"
			   "deny send org.example.Secret\n"
			   "[group 2100]\n"
			   "allow own org.example.Shared   # group members may own it\n"
			   "[user 2001]\n"
			   "allow own org.example.Alice\n"
			   "allow send org.example.Secret\n"
			   "[user 2002]\n"
			   "deny * org.example.*\n"
			   "[mandatory]\n"
			   "deny own org.freedesktop.*\n"
			   "[limits]\n"
			   "names 8\n"
			   "[limits user 0]\n"
			   "connections 1024\n";

static void test_eval(void)
{
	struct policy *p;
	char why[256], err[256];
	gid_t alice[] = { 2001, 2100 }, bob[] = { 2002 }, root[] = { 0 };

	ASSERT(policy_new(&p) == 0);
	ASSERT(policy_parse_string(p, "t.conf", text, err, sizeof(err)) == 0);
	ASSERT(policy_rule_count(p) == 8);
	ASSERT(policy_limit(p, QUOTA_NAMES) == 8);
	ASSERT(policy_limit(p, QUOTA_CHANNELS) == UINT64_MAX);
	ASSERT(policy_limit(p, QUOTA_CONNECTIONS) == UINT64_MAX);
	{
		uid_t u;
		enum quota_kind k;
		uint64_t v;

		ASSERT(policy_limit_uid_get(p, 0, &u, &k, &v) && u == 0 && k == QUOTA_CONNECTIONS &&
		       v == 1024);
		ASSERT(!policy_limit_uid_get(p, 1, &u, &k, &v));
	}

	ASSERT(policy_check(p, 2001, alice, 2, POLICY_OWN, "org.example.Alice", why, sizeof(why)));
	ASSERT(strcmp(why, "allow own org.example.Alice (t.conf:9)") == 0);
	ASSERT(policy_check(p, 2001, alice, 2, POLICY_OWN, "org.example.Shared", NULL, 0));
	ASSERT(!policy_check(p, 2002, bob, 1, POLICY_OWN, "org.example.Shared", why, sizeof(why)));
	ASSERT(strcmp(why, "deny * org.example.* (t.conf:12)") == 0);
	ASSERT(!policy_check(p, 3000, NULL, 0, POLICY_OWN, "org.example.Shared", why, sizeof(why)));
	ASSERT(strcmp(why, "built-in: denied when no rule matches") == 0);
	ASSERT(!policy_check(p, 2001, alice, 2, POLICY_OWN, "org.example.Other", NULL, 0));
	/* prefix matches the name itself and children, not lookalikes */
	ASSERT(policy_check(p, 2001, alice, 2, POLICY_SEND, "org.example.Foo", NULL, 0));
	ASSERT(policy_check(p, 2001, alice, 2, POLICY_SEND, "org.example", NULL, 0));
	ASSERT(!policy_check(p, 2001, alice, 2, POLICY_SEND, "org.examplex.Foo", NULL, 0));
	/* user context overrides default */
	ASSERT(policy_check(p, 2001, alice, 2, POLICY_SEND, "org.example.Secret", NULL, 0));
	ASSERT(!policy_check(p, 3000, NULL, 0, POLICY_SEND, "org.example.Secret", why, sizeof(why)));
	ASSERT(strcmp(why, "deny send org.example.Secret (t.conf:5)") == 0);
	ASSERT(!policy_check(p, 2002, bob, 1, POLICY_RECEIVE, "org.example.Foo", why, sizeof(why)));
	ASSERT(strcmp(why, "deny * org.example.* (t.conf:12)") == 0);
	ASSERT(policy_check(p, 2002, bob, 1, POLICY_RECEIVE, "org.other.Foo", NULL, 0));
	/* root: allowed by default, but mandatory still applies */
	ASSERT(policy_check(p, 0, root, 1, POLICY_OWN, "org.anything.X", why, sizeof(why)));
	ASSERT(strcmp(why, "built-in: root is allowed") == 0);
	ASSERT(!policy_check(p, 0, root, 1, POLICY_OWN, "org.freedesktop.DBus", NULL, 0));
	/* empty policy: deny all but root */
	policy_free(p);
	ASSERT(policy_new(&p) == 0);
	ASSERT(!policy_check(p, 2001, alice, 2, POLICY_SEND, "a.b", NULL, 0));
	ASSERT(policy_check(p, 0, root, 1, POLICY_SEND, "a.b", NULL, 0));
	policy_free(p);
}

static void expect_error(const char *t, const char *msg)
{
	struct policy *p;
	char err[256] = "";

	ASSERT(policy_new(&p) == 0);
	ASSERT(policy_parse_string(p, "bad.conf", t, err, sizeof(err)) == -EINVAL);
	ASSERT_STR(err, msg);
	ASSERT(policy_rule_count(p) == 0);
	policy_free(p);
}

static void test_errors(void)
{
	expect_error("allow own a.b\n", "bad.conf:1: rule outside of a section");
	expect_error("[default]\nallow own a.b\nallow eat a.b\n",
		     "bad.conf:3: unknown action 'eat' (own, send, receive, *)");
	expect_error("[default]\npermit own a.b\n", "bad.conf:2: expected allow or deny, got 'permit'");
	expect_error("[default]\nallow own\n", "bad.conf:2: expected 'allow|deny ACTION NAME'");
	expect_error("[default]\nallow own a.b c\n", "bad.conf:2: expected 'allow|deny ACTION NAME'");
	expect_error("\n\n[default\n", "bad.conf:3: section header without ']'");
	expect_error(
		"[users x]\n",
		"bad.conf:1: unknown section (want default, mandatory, limits, limits user X, channels, user X, group X)");
	expect_error(
		"[limits user 0 1]\n",
		"bad.conf:1: unknown section (want default, mandatory, limits, limits user X, channels, user X, group X)");
	expect_error("[limits user nobody-here-xyz]\n", "bad.conf:1: unknown user 'nobody-here-xyz'");
	expect_error("[user no-such-user-here]\n", "bad.conf:1: unknown user 'no-such-user-here'");
	expect_error("[default]\nallow own org..x\n", "bad.conf:2: invalid name 'org..x'");
	expect_error("[default]\nallow own org*\n", "bad.conf:2: invalid name 'org*'");
	expect_error("[limits]\nnames -1\n", "bad.conf:2: invalid number '-1'");
	expect_error("[limits]\nfoo 1\n", "bad.conf:2: unknown quota 'foo'");
	expect_error("[limits user 0]\nmax_connections 5\n",
		     "bad.conf:2: 'max_connections' is for the whole bus: only in [limits]");
	{
		static char long_line[2048] = "[default]\n# ";

		memset(long_line + strlen(long_line), 'x', 1100);
		expect_error(long_line, "bad.conf:2: line too long");
	}

	/* a file that fails halfway adds nothing: earlier good rules of it are dropped */
	struct policy *p;
	char err[256];

	ASSERT(policy_new(&p) == 0);
	ASSERT(policy_parse_string(p, "good.conf", "[default]\ndeny own a.b\n", err, sizeof(err)) == 0);
	ASSERT(policy_parse_string(p, "bad.conf", "[limits]\nnames 1\n[default]\nallow own a.b\nbogus\n", err,
				   sizeof(err)) == -EINVAL);
	ASSERT(policy_rule_count(p) == 1);
	ASSERT(policy_limit(p, QUOTA_NAMES) == UINT64_MAX);
	ASSERT(!policy_check(p, 5, NULL, 0, POLICY_OWN, "a.b", NULL, 0));

	/* per-uid limits of several files add up, in file order */
	ASSERT(policy_parse_string(p, "l1.conf", "[limits user 7]\nnames 3\n", err, sizeof(err)) == 0);
	ASSERT(policy_parse_string(p, "l2.conf", "[limits user 8]\nnames 4\nchannels 5\n", err,
				   sizeof(err)) == 0);
	{
		uid_t u;
		enum quota_kind k;
		uint64_t v;

		ASSERT(policy_limit_uid_get(p, 0, &u, &k, &v) && u == 7 && k == QUOTA_NAMES && v == 3);
		ASSERT(policy_limit_uid_get(p, 1, &u, &k, &v) && u == 8 && k == QUOTA_NAMES && v == 4);
		ASSERT(policy_limit_uid_get(p, 2, &u, &k, &v) && u == 8 && k == QUOTA_CHANNELS && v == 5);
		ASSERT(!policy_limit_uid_get(p, 3, &u, &k, &v));
	}
	/* bus-wide limits: set in [limits], unset is UINT64_MAX */
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_CONNECTIONS) == UINT64_MAX);
	ASSERT(policy_parse_string(p, "l3.conf", "[limits]\nmax_connections 100\nhello_timeout_ms 250\n", err,
				   sizeof(err)) == 0);
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_CONNECTIONS) == 100);
	ASSERT(policy_bus_limit(p, QUOTA_BUS_HELLO_TIMEOUT_MS) == 250);
	ASSERT(policy_bus_limit(p, QUOTA_BUS_RESERVED_CONNECTIONS) == UINT64_MAX);
	policy_free(p);
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	ASSERT(f);
	fputs(s, f);
	fclose(f);
}

static void test_load(void)
{
	char tmp[] = "/tmp/test-policy-XXXXXX", etc[256], usr[256], path[300], err[512];
	const char *dirs[3] = { etc, usr, NULL };
	struct policy *p = NULL;

	ASSERT(mkdtemp(tmp));
	snprintf(etc, sizeof(etc), "%s/etc", tmp);
	snprintf(usr, sizeof(usr), "%s/usr", tmp);
	ASSERT(mkdir(etc, 0755) == 0 && mkdir(usr, 0755) == 0);
	snprintf(path, sizeof(path), "%s/10-a.conf", usr);
	write_file(path, "[default]\nallow own org.vendor.A\n");
	snprintf(path, sizeof(path), "%s/20-b.conf", usr);
	write_file(path, "[default]\nallow own org.vendor.B\n");
	snprintf(path, sizeof(path), "%s/20-b.conf", etc); /* masks the vendor file */
	write_file(path, "[default]\ndeny own org.vendor.*\nallow own org.local.B\n");
	snprintf(path, sizeof(path), "%s/README", etc); /* not *.conf: ignored */
	write_file(path, "garbage");

	ASSERT(policy_load(&p, dirs, err, sizeof(err)) == 0);
	ASSERT(policy_rule_count(p) == 3);
	ASSERT(!policy_check(p, 7, NULL, 0, POLICY_OWN, "org.vendor.A", NULL, 0)); /* 20-b after 10-a */
	ASSERT(!policy_check(p, 7, NULL, 0, POLICY_OWN, "org.vendor.B", NULL, 0));
	ASSERT(policy_check(p, 7, NULL, 0, POLICY_OWN, "org.local.B", NULL, 0));
	policy_free(p);

	snprintf(path, sizeof(path), "%s/30-bad.conf", etc);
	write_file(path, "[default]\nallow * *\nnonsense here now\n");
	p = NULL;
	ASSERT(policy_load(&p, dirs, err, sizeof(err)) == -EINVAL);
	ASSERT(!p);
	ASSERT(strstr(err, "30-bad.conf:3: expected allow or deny, got 'nonsense'"));
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ASSERT(system(cmd) == 0);
}

/* [channels]: ring geometry per name, the last matching line wins; the kernel's limits hold. */
static void test_channels(void)
{
	struct policy *p;
	char err[256] = "";
	uint32_t slots = 0, size = 0;

	ASSERT(policy_new(&p) == 0);
	ASSERT(!policy_ring_geometry(p, "org.example.Big", &slots, &size)); /* none: the caller's default */
	ASSERT(policy_parse_string(p, "a.conf",
				   "[channels]\n"
				   "ring * 64 8192\n"
				   "ring org.example.* 16 16384\n"
				   "ring org.example.Big 16 65536   # bulk transfers\n"
				   "[default]\n"
				   "allow send *\n",
				   err, sizeof(err)) == 0);
	ASSERT(policy_ring_geometry(p, "org.other.Name", &slots, &size));
	ASSERT(slots == 64 && size == 8192);
	ASSERT(policy_ring_geometry(p, ":1.7", &slots, &size)); /* "*": inboxes too */
	ASSERT(slots == 64 && size == 8192);
	ASSERT(policy_ring_geometry(p, "org.example", &slots, &size));
	ASSERT(slots == 16 && size == 16384);
	ASSERT(policy_ring_geometry(p, "org.example.Small", &slots, &size));
	ASSERT(slots == 16 && size == 16384);
	ASSERT(policy_ring_geometry(p, "org.example.Big", &slots, &size));
	ASSERT(slots == 16 && size == 65536);
	ASSERT(policy_ring_geometry(p, "org.example.Bigger", &slots, &size));
	ASSERT(slots == 16 && size == 16384); /* a name, not a prefix of names */
	ASSERT(policy_rule_count(p) == 1);
	/* a later file's line wins over an earlier one's */
	ASSERT(policy_parse_string(p, "b.conf", "[channels]\nring org.example.Big 8 32768\n", err,
				   sizeof(err)) == 0);
	ASSERT(policy_ring_geometry(p, "org.example.Big", &slots, &size));
	ASSERT(slots == 8 && size == 32768);
	policy_free(p);

	expect_error("[channels]\nring org.x.Y 16\n", "bad.conf:2: expected 'ring NAME SLOTS SLOT_SIZE'");
	expect_error("[channels]\nslots org.x.Y 16 8192\n",
		     "bad.conf:2: expected 'ring NAME SLOTS SLOT_SIZE'");
	expect_error("[channels]\nring org 16 8192\n", "bad.conf:2: invalid name 'org'");
	expect_error("[channels]\nring * 16 8k\n", "bad.conf:2: invalid number '8k'");
	expect_error("[channels]\nring * 24 8192\n",
		     "bad.conf:2: slots must be a power of two from 2 to 4096");
	expect_error("[channels]\nring * 1 8192\n",
		     "bad.conf:2: slots must be a power of two from 2 to 4096");
	expect_error("[channels]\nring * 8192 8192\n",
		     "bad.conf:2: slots must be a power of two from 2 to 4096");
	expect_error("[channels]\nring * 32 4096\n",
		     "bad.conf:2: slot size must be from 8192 to 65536 bytes");
	expect_error("[channels]\nring * 32 65537\n",
		     "bad.conf:2: slot size must be from 8192 to 65536 bytes");
	expect_error("[channels]\nring * 2048 65536\n",
		     "bad.conf:2: a ring of 134217728 bytes is more than the kernel's 67108864");
	/* a bad line anywhere: nothing of the file is taken */
	ASSERT(policy_new(&p) == 0);
	ASSERT(policy_parse_string(p, "bad.conf", "[channels]\nring * 16 65536\nring * 3 8192\n", err,
				   sizeof(err)) == -EINVAL);
	ASSERT(!policy_ring_geometry(p, "org.x.Y", &slots, &size));
	policy_free(p);
}

int main(void)
{
	test_eval();
	test_errors();
	test_load();
	test_channels();
	printf("test-policy: ok\n");
	return 0;
}
