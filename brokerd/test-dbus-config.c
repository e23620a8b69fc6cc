/* SPDX-License-Identifier: MIT */
/*
 * test-dbus-config.c - unit tests of the dbus-daemon XML reader
 * (dbus-config.c) on the fixtures in test-dbus-config/ (argv[1]): every
 * element and attribute, include order, includedir sorting, include cycles
 * and nesting limits, and malformed input with FILE:LINE errors.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/dbus-config.h"
#include "util/test.h"

static const char *dir;

static char *fixture(const char *name)
{
	static char buf[8][PATH_MAX];
	static unsigned int k;
	char *b = buf[k++ % 8];

	snprintf(b, PATH_MAX, "%s/%s", dir, name);
	return b;
}

static const struct dbus_config_rule *find_rule(const struct dbus_config *c, enum dbus_rule_attr a,
						const char *v)
{
	for (size_t i = 0; i < c->n_rules; i++)
		if (c->rules[i].attr[a] && strcmp(c->rules[i].attr[a], v) == 0)
			return &c->rules[i];
	return NULL;
}

static bool has_note(const struct dbus_config *c, const char *prefix)
{
	for (size_t i = 0; i < c->n_notes; i++)
		if (strncmp(c->notes[i].text, prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

static void test_all(void)
{
	struct dbus_config *c = NULL;
	const struct dbus_config_rule *r;
	char err[512] = "";
	unsigned int seen[_DBUS_ATTR_MAX] = { 0 };

	ASSERT_INT(dbus_config_load(&c, fixture("all.conf"), err, sizeof(err)), ==, 0);
	ASSERT_STR(c->type, "system");
	ASSERT_STR(c->user, "messagebus");
	ASSERT_STR(c->pidfile, "/run/test.pid");
	ASSERT_STR(c->servicehelper, "/usr/lib/helper");
	ASSERT(c->fork && c->keep_umask && c->syslog && c->allow_anonymous);
	ASSERT_INT(c->n_auth, ==, 2);
	ASSERT_STR(c->auth[1], "ANONYMOUS");
	ASSERT_INT(c->n_listen, ==, 2);
	ASSERT_STR(c->listen[0], "unix:path=/run/test_socket");
	ASSERT_STR(c->listen[1], "unix:abstract=/x"); /* whitespace around text is dropped */
	/* relative servicedir against the file's directory, then the standard ones in order */
	ASSERT_INT(c->n_servicedirs, ==, 4);
	ASSERT_STR(c->servicedirs[0], fixture("services"));
	ASSERT_STR(c->servicedirs[1], "/usr/local/share/dbus-1/system-services");
	ASSERT_STR(c->servicedirs[2], "/usr/share/dbus-1/system-services");
	ASSERT_STR(c->servicedirs[3], "/lib/dbus-1/system-services");
	/* every attribute of <allow>/<deny> is used somewhere in all.conf and kept as written */
	for (size_t i = 0; i < c->n_rules; i++)
		for (unsigned int a = 0; a < _DBUS_ATTR_MAX; a++)
			seen[a] += c->rules[i].attr[a] != NULL;
	for (unsigned int a = 0; a < _DBUS_ATTR_MAX; a++) {
		if (!seen[a])
			fprintf(stderr, "attribute %s not covered\n", dbus_rule_attr_to_string(a));
		ASSERT(seen[a] > 0);
	}
	r = find_rule(c, DBUS_ATTR_SEND_DESTINATION, "org.example.Part");
	ASSERT(r && r->allow && r->context == DBUS_POLICY_DEFAULT && r->line == 36);
	ASSERT_STR(r->attr[DBUS_ATTR_SEND_INTERFACE], "org.example.I");
	ASSERT_STR(r->attr[DBUS_ATTR_SEND_MEMBER], "M");
	ASSERT_STR(r->attr[DBUS_ATTR_SEND_PATH], "/p");
	ASSERT_STR(r->file, fixture("all.conf"));
	r = find_rule(c, DBUS_ATTR_OWN, "org.example.Never");
	ASSERT(r && !r->allow && r->context == DBUS_POLICY_MANDATORY);
	r = find_rule(c, DBUS_ATTR_OWN, "org.example.Root");
	ASSERT(r && r->context == DBUS_POLICY_USER && strcmp(r->who, "root") == 0);
	r = find_rule(c, DBUS_ATTR_SEND_DESTINATION, "org.example.Group");
	ASSERT(r && r->context == DBUS_POLICY_GROUP && strcmp(r->who, "root") == 0);
	r = find_rule(c, DBUS_ATTR_SEND_DESTINATION, "org.example.Console");
	ASSERT(r && r->context == DBUS_POLICY_CONSOLE && strcmp(r->who, "true") == 0);
	/* includedir: 10-first before 20-second, both after all.conf's own rules */
	r = find_rule(c, DBUS_ATTR_OWN, "org.example.Second");
	ASSERT(r && r->allow && strstr(r->file, "conf.d/10-first.conf"));
	ASSERT(!c->rules[c->n_rules - 1].allow &&
	       strstr(c->rules[c->n_rules - 1].file, "conf.d/20-second.conf"));
	ASSERT_INT(c->n_files, ==, 3);
	/* limits in order, with their lines */
	ASSERT_INT(c->n_limits, ==, 5);
	ASSERT_STR(c->limits[0].name, "max_completed_connections");
	ASSERT_INT(c->limits[0].value, ==, 100);
	ASSERT_INT(c->limits[2].value, ==, 3000);
	ASSERT_STR(c->limits[4].name, "no_such_limit");
	ASSERT_INT(c->limits[4].line, ==, 73);
	/* what brokerd does not act on is noted, with its line */
	ASSERT(has_note(c, "<fork/>"));
	ASSERT(has_note(c, "<keep_umask/>"));
	ASSERT(has_note(c, "<syslog/>"));
	ASSERT(has_note(c, "<allow_anonymous/>"));
	ASSERT(has_note(c, "<pidfile>"));
	ASSERT(has_note(c, "<servicehelper>"));
	ASSERT(has_note(c, "<user>messagebus</user>"));
	ASSERT(has_note(c, "<listen>unix:path=/run/test_socket</listen>"));
	ASSERT(has_note(c, "<auth>ANONYMOUS</auth>"));
	ASSERT(!has_note(c, "<auth>EXTERNAL</auth>"));
	ASSERT(!has_note(c, "<type>"));
	ASSERT(has_note(c, "<standard_session_servicedirs/>"));
	ASSERT(has_note(c, "<apparmor mode=\"required\"/>"));
	ASSERT(has_note(c, "<selinux>"));
	ASSERT(has_note(c, "<associate own=\"org.example.Sel\""));
	ASSERT(has_note(c, "<include>contexts/dbus_contexts</include>: SELinux only"));
	ASSERT_INT(c->notes[0].line, ==, 6); /* <user> */
	dbus_config_free(c);
}

static void load_fails(const char *name, int want, const char *msg)
{
	struct dbus_config *c = NULL;
	char err[1024] = "", expect[1024];

	int r = dbus_config_load(&c, fixture(name), err, sizeof(err));

	if (r != want)
		fprintf(stderr, "%s: %s\n", name, err);
	ASSERT_INT(r, ==, want);
	ASSERT(c == NULL);
	/* messages name the fixture directory: put it in */
	snprintf(expect, sizeof(expect), msg, dir, dir, dir);
	ASSERT_STR(err, expect);
}

static void parse_fails(const char *text, const char *msg)
{
	struct dbus_config *c = NULL;
	char err[512] = "";

	ASSERT_INT(dbus_config_parse_string(&c, "/t/x.conf", text, strlen(text), err, sizeof(err)), ==,
		   -EINVAL);
	ASSERT(c == NULL);
	ASSERT_STR(err, msg);
}

static void test_errors(void)
{
	load_fails("cycle-a.conf", -ELOOP,
		   "%s/cycle-b.conf:3: include cycle: %s/cycle-a.conf is already being read");
	load_fails("self.conf", -ELOOP, "%s/self.conf:2: include cycle: %s/self.conf is already being read");
	load_fails("missing.conf", -ENOENT,
		   "%s/missing.conf:3: cannot include %s/not-there.conf: No such file or directory");
	load_fails("malformed.conf", -EINVAL, "%s/malformed.conf:4: mismatched tag");
	load_fails("includes-malformed.conf", -EINVAL, "%s/malformed.conf:4: mismatched tag");
	load_fails("nonexistent.conf", -ENOENT, "%s/nonexistent.conf: No such file or directory");

	parse_fails("", "/t/x.conf:1: no element found");
	parse_fails("<busconfig>\n<policy context=\"default\">\n<allow own=\"a\"\n",
		    "/t/x.conf:3: unclosed token");
	parse_fails("<policy/>", "/t/x.conf:1: the document element must be <busconfig>, not <policy>");
	parse_fails("<busconfig>\n <bogus/>\n</busconfig>", "/t/x.conf:2: unknown element <bogus>");
	parse_fails("<busconfig><allow own=\"a\"/></busconfig>",
		    "/t/x.conf:1: <allow> is not allowed inside <busconfig>");
	parse_fails(
		"<busconfig><policy context=\"default\"><policy context=\"default\"/></policy></busconfig>",
		"/t/x.conf:1: <policy> is not allowed inside <policy>");
	parse_fails("<busconfig><policy/></busconfig>",
		    "/t/x.conf:1: <policy> needs exactly one of context, user, group, at_console");
	parse_fails("<busconfig><policy context=\"other\"/></busconfig>",
		    "/t/x.conf:1: context=\"other\": want default or mandatory");
	parse_fails("<busconfig><policy user=\"a\" group=\"b\"/></busconfig>",
		    "/t/x.conf:1: <policy> needs exactly one of context, user, group, at_console");
	parse_fails("<busconfig><policy at_console=\"maybe\"/></busconfig>",
		    "/t/x.conf:1: at_console=\"maybe\": want true or false");
#define RULE(x) "<busconfig><policy context=\"default\">\n" x "</policy></busconfig>"
	parse_fails(RULE("<allow/>"), "/t/x.conf:2: <allow>: needs at least one attribute");
	parse_fails(RULE("<allow bogus=\"1\"/>"), "/t/x.conf:2: unknown attribute 'bogus' on <allow>");
	parse_fails(RULE("<deny send_destination=\"a\" receive_sender=\"b\"/>"),
		    "/t/x.conf:2: <deny>: cannot combine send_* and receive_* attributes");
	parse_fails(RULE("<allow own=\"a\" send_destination=\"b\"/>"),
		    "/t/x.conf:2: <allow>: own and own_prefix cannot be combined with other attributes");
	parse_fails(RULE("<allow user=\"a\" group=\"b\"/>"),
		    "/t/x.conf:2: <allow>: user and group cannot be combined with other attributes");
	parse_fails(RULE("<allow send_destination=\"a\" send_destination_prefix=\"b\"/>"),
		    "/t/x.conf:2: <allow>: send_destination and send_destination_prefix cannot be combined");
	parse_fails(RULE("<allow send_type=\"call\"/>"),
		    "/t/x.conf:2: <allow>: a type wants method_call, method_return, signal, error or *");
	parse_fails(RULE("<allow send_broadcast=\"yes\"/>"),
		    "/t/x.conf:2: <allow>: a boolean attribute wants true or false");
	parse_fails(RULE("<allow eavesdrop=\"1\"/>"), "/t/x.conf:2: <allow>: eavesdrop wants true or false");
	parse_fails(RULE("<allow min_fds=\"x\" send_destination=\"a\"/>"),
		    "/t/x.conf:2: <allow>: min_fds and max_fds want a number");
	parse_fails(RULE("<allow max_fds=\"1\"/>"),
		    "/t/x.conf:2: <allow>: min_fds and max_fds only modify send_* or receive_* rules");
	parse_fails(RULE("<allow own_prefix=\"*\"/>"), "/t/x.conf:2: <allow>: a prefix wants a name");
	parse_fails(RULE("<allow own=\"\"/>"), "/t/x.conf:2: <allow>: an empty attribute value");
	parse_fails(RULE("text"), "/t/x.conf:2: no text allowed inside <policy>");
	parse_fails("<busconfig><type> </type></busconfig>", "/t/x.conf:1: <type> is empty");
	parse_fails("<busconfig><limit>1</limit></busconfig>", "/t/x.conf:1: <limit> needs a name");
	parse_fails("<busconfig><limit name=\"x\">12a</limit></busconfig>",
		    "/t/x.conf:1: <limit>: '12a' is not a number");
	parse_fails("<busconfig><fork x=\"1\"/></busconfig>", "/t/x.conf:1: unknown attribute 'x' on <fork>");
	parse_fails("<busconfig><include ignore_missing=\"maybe\">a</include></busconfig>",
		    "/t/x.conf:1: <include> attributes want yes or no");
	parse_fails("<busconfig><apparmor mode=\"loud\"/></busconfig>",
		    "/t/x.conf:1: <apparmor mode=\"loud\">: want required, enabled or disabled");
	parse_fails("<busconfig><selinux><associate own=\"a\"/></selinux></busconfig>",
		    "/t/x.conf:1: <associate> needs own and context");
	parse_fails("<!DOCTYPE busconfig [<!ENTITY a \"aaaa\">]>\n<busconfig/>",
		    "/t/x.conf:1: entity declarations are not allowed (a)");
	{
		const char *t = "<busconfig>\n\n<include>/nonexistent/x.conf</include></busconfig>";
		struct dbus_config *c = NULL;
		char err[512];

		ASSERT_INT(dbus_config_parse_string(&c, "/t/x.conf", t, strlen(t), err, sizeof(err)), ==,
			   -ENOENT);
		ASSERT_STR(err, "/t/x.conf:3: cannot include /nonexistent/x.conf: No such file or directory");
	}
}

/* A chain of 40 files, each including the next: refused at DBUS_CONFIG_MAX_DEPTH. */
static void test_depth(void)
{
	char tmp[] = "/tmp/test-dbus-config.XXXXXX", path[PATH_MAX], err[512] = "", want[512];
	struct dbus_config *c = NULL;
	FILE *f;

	ASSERT(mkdtemp(tmp));
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "%s/%d.conf", tmp, i);
		f = fopen(path, "w");
		ASSERT(f);
		if (i < 39)
			fprintf(f, "<busconfig>\n<include>%d.conf</include>\n</busconfig>\n", i + 1);
		else
			fprintf(f, "<busconfig><type>deep</type></busconfig>\n");
		fclose(f);
	}
	/* 31 levels of includes below the main file are fine */
	snprintf(path, sizeof(path), "%s/8.conf", tmp);
	ASSERT_INT(dbus_config_load(&c, path, err, sizeof(err)), ==, 0);
	ASSERT_STR(c->type, "deep");
	ASSERT_STR(c->notes[0].text, "<type>deep</type>: brokerd is a system bus");
	ASSERT_INT(c->n_files, ==, 32);
	c = dbus_config_free(c);
	snprintf(path, sizeof(path), "%s/0.conf", tmp);
	ASSERT_INT(dbus_config_load(&c, path, err, sizeof(err)), ==, -ELOOP);
	snprintf(want, sizeof(want), "%s/31.conf:2: includes nest deeper than 32", tmp);
	ASSERT_STR(err, want);
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "%s/%d.conf", tmp, i);
		unlink(path);
	}
	rmdir(tmp);
}

int main(int argc, char **argv)
{
	static char real[PATH_MAX];

	ASSERT(argc == 2);
	ASSERT(realpath(argv[1], real)); /* messages and servicedirs name absolute paths */
	dir = real;
	test_all();
	test_depth();
	test_errors();
	printf("test-dbus-config: ok\n");
	return 0;
}
