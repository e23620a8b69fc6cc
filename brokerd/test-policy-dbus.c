/* SPDX-License-Identifier: MIT */
/*
 * test-policy-dbus.c - unit tests of the mapping of dbus-daemon's policy
 * onto brokerd's (policy-dbus.c), on the fixtures in test-dbus-config/:
 * the outcome of every kind of rule, dbus-daemon's order (default, group,
 * user, mandatory; later wins), brokerd's policy.d after the XML, limits,
 * and D-Bus service files. Send and receive rules are reported with their
 * outcome on the D-Bus socket (decided per message: test-policy-dbus-msg)
 * and their native one in the text.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "brokerd/policy-dbus.h"
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

/* Every outcome, as "outcome|element|what" lines. */
struct log {
	char text[64 * 1024];
	size_t len;
};

static void record(void *userdata, enum policy_dbus_outcome o, const char *file, unsigned int line,
		   const char *element, const char *what)
{
	struct log *l = userdata;

	l->len += (size_t)snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s|%s|%s\n",
				   policy_dbus_outcome_to_string(o), element, what);
	ASSERT(l->len < sizeof(l->text));
}

static void has(const struct log *l, const char *line)
{
	if (!strstr(l->text, line)) {
		fprintf(stderr, "missing: %s\nin:\n%s", line, l->text);
		ASSERT(strstr(l->text, line));
	}
}

static bool check(const struct policy *p, uid_t uid, gid_t gid, enum policy_action a, const char *name)
{
	char why[256];

	return policy_check(p, uid, &gid, 1, a, name, why, sizeof(why));
}

static void test_outcomes(void)
{
	static struct log l;
	struct dbus_config *c = NULL;
	struct policy *p = NULL;
	struct policy_dbus_counts n = { 0 };
	char err[512] = "", why[256];
	gid_t root = 0;

	ASSERT_INT(dbus_config_load(&c, fixture("all.conf"), err, sizeof(err)), ==, 0);
	ASSERT_INT(policy_new(&p), ==, 0);
	ASSERT_INT(policy_dbus_apply(p, c, record, &l, &n), ==, 0);
	has(&l, "applied|<deny own=\"*\"/>|deny own *\n");
	has(&l, "applied|<allow own=\"org.example.Own\"/>|allow own org.example.Own\n");
	has(&l, "applied|<allow own_prefix=\"org.example.Pre\"/>|allow own org.example.Pre.*\n");
	has(&l, "applied|<deny send_type=\"method_call\"/>|D-Bus socket: as written; native channels: "
	    "applied, deny send *\n");
	has(&l, "applied|<allow send_type=\"signal\"/>|D-Bus socket: as written; native channels: "
	    "built-in, not about method calls");
	has(&l, "applied|<allow send_type=\"method_return\" send_requested_reply=\"true\"/>|D-Bus socket: "
	    "as written; native channels: built-in, not about method calls");
	has(&l, "applied|<deny send_error=\"org.example.Error\" send_type=\"error\"/>|D-Bus socket: as "
	    "written; native channels: not honoured, brokerd does not filter signals");
	has(&l, "applied|<allow send_destination=\"org.example.Dest\"/>|D-Bus socket: as written; native "
	    "channels: applied, allow send org.example.Dest\n");
	has(&l, "applied|<allow send_destination_prefix=\"org.example.DestPre\"/>|D-Bus socket: as "
	    "written; native channels: applied, allow send org.example.DestPre.*\n");
	has(&l, "applied|<allow send_interface=\"org.example.I\" send_member=\"M\" "
	    "send_destination=\"org.example.Part\" send_path=\"/p\"/>|D-Bus socket: as written; native "
	    "channels: not honoured, allows only some calls to org.example.Part (send_interface)");
	has(&l, "applied|<deny send_member=\"Reboot\" send_destination=\"org.example.Dest2\"/>|D-Bus "
	    "socket: as written; native channels: stricter, deny send org.example.Dest2: every call, "
	    "not only those with send_member\n");
	has(&l, "applied|<deny send_destination=\"org.example.Fds\" min_fds=\"1\" max_fds=\"4\"/>|D-Bus "
	    "socket: as written; native channels: stricter, deny send org.example.Fds: every call, not "
	    "only those with min_fds\n");
	has(&l, "applied|<allow send_broadcast=\"true\"/>|D-Bus socket: as written; native channels: "
	    "built-in, not about method calls");
	has(&l, "applied|<deny send_broadcast=\"false\" send_destination=\"org.example.Uni\"/>|D-Bus "
	    "socket: as written; native channels: applied, deny send org.example.Uni\n");
	has(&l, "applied|<allow send_interface=\"org.freedesktop.DBus\" "
	    "send_destination=\"org.freedesktop.DBus\"/>|D-Bus socket: as written, on messages to the "
	    "bus driver; native channels: not honoured, the bus driver");
	has(&l, "applied|<allow receive_type=\"method_call\"/>|D-Bus socket: as written; native channels: "
	    "built-in, calls and replies");
	has(&l, "applied|<allow receive_type=\"signal\"/>|D-Bus socket: as written; native channels: "
	    "applied, allow receive *\n");
	has(&l, "applied|<deny receive_sender=\"org.example.Quiet\"/>|D-Bus socket: as written; native channels: "
		"partly, deny receive org.example.Quiet (its signals); calls and replies from it are not refused\n");
	has(&l, "applied|<deny receive_interface=\"org.example.I\" receive_member=\"S\" "
	    "receive_sender=\"org.example.Muted\" receive_type=\"signal\" receive_path=\"/q\"/>|D-Bus "
	    "socket: as written; native channels: stricter, deny receive org.example.Muted: every "
	    "signal, not only those with receive_interface\n");
	has(&l, "applied|<deny receive_error=\"org.example.E\" receive_type=\"error\" "
	    "receive_requested_reply=\"false\"/>|D-Bus socket: as written; native channels: not "
	    "honoured, brokerd cannot refuse calls or replies");
	has(&l, "applied|<allow eavesdrop=\"true\"/>|D-Bus socket: as written; native channels: not "
	    "honoured, only root may monitor in brokerd\n");
	has(&l, "applied|<deny eavesdrop=\"true\"/>|D-Bus socket: as written; native channels: built-in, "
	    "brokerd lets nobody but root monitor\n");
	has(&l, "applied|<allow send_destination=\"org.example.Eaves\" eavesdrop=\"true\"/>|D-Bus socket: as written; "
		"native channels: partly, allow send org.example.Eaves; eavesdropping is root's only\n");
	has(&l, "built-in|<allow user=\"*\"/>|brokerd lets every user connect\n");
	has(&l,
	    "not honoured|<deny group=\"wheel\"/>|brokerd does not refuse connections by user or group\n");
	has(&l, "applied|<deny own=\"org.example.Never\"/>|deny own org.example.Never\n");
	has(&l, "applied|<allow own=\"org.example.Root\"/>|allow own org.example.Root\n");
	has(&l, "applied|<allow eavesdrop=\"true\"/>|D-Bus socket: as written; native channels: built-in, "
	    "root may monitor in brokerd\n");
	has(&l, "applied|<allow send_destination=\"org.example.Group\"/>|D-Bus socket: as written; native "
	    "channels: applied, allow send org.example.Group\n");
	has(&l,
	    "not honoured|<allow own=\"org.example.Nobody\"/>|<policy user=\"no-such-user-brokerd-test\">: no such user, the policy is skipped\n");
	has(&l, "applied|<allow send_destination=\"org.example.Console\"/>|D-Bus socket: as written, "
	    "at_console meaning a seat of the user in logind; native channels: not honoured, <policy "
	    "at_console=\"true\">: brokerd has no notion of the console\n");
	has(&l,
	    "applied|<limit name=\"max_completed_connections\">100</limit>|[limits] max_connections 100\n");
	has(&l, "applied|<limit name=\"max_connections_per_user\">7</limit>|[limits] connections 7\n");
	has(&l, "applied|<limit name=\"auth_timeout\">3000</limit>|[limits] hello_timeout_ms 3000\n");
	has(&l,
	    "not honoured|<limit name=\"max_pending_service_starts\">512</limit>|brokerd counts waiting activations per uid ([limits] activations)\n");
	has(&l, "not honoured|<limit name=\"no_such_limit\">1</limit>|unknown limit\n");
	has(&l, "not honoured|<fork/>: brokerd does not fork");
	has(&l, "not honoured|<apparmor mode=\"required\"/>");
	/* every rule, limit and note has exactly one outcome */
	ASSERT_INT(n.n[0] + n.n[1] + n.n[2] + n.n[3] + n.n[4], ==, c->n_rules + c->n_limits + c->n_notes);
	ASSERT_INT(policy_limit(p, QUOTA_CONNECTIONS), ==, 7);
	ASSERT_INT(policy_bus_limit(p, QUOTA_BUS_MAX_CONNECTIONS), ==, 100);
	ASSERT_INT(policy_bus_limit(p, QUOTA_BUS_HELLO_TIMEOUT_MS), ==, 3000);

	/* what the applied rules decide */
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Own"));
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Pre"));
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Pre.Sub"));
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Prefix"));
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Other"));
	ASSERT(!check(p, 0, 0, POLICY_OWN, "org.example.Other")); /* deny own="*" holds for root too */
	ASSERT(check(p, 0, 0, POLICY_OWN, "org.example.Root"));
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Root"));
	ASSERT(!check(p, 0, 0, POLICY_OWN, "org.example.Never"));
	ASSERT(check(p, 1000, 1000, POLICY_SEND, "org.example.Dest"));
	ASSERT(check(p, 1000, 1000, POLICY_SEND, "org.example.DestPre.X"));
	ASSERT(!check(p, 1000, 1000, POLICY_SEND, "org.example.Part"));	 /* only some calls: none */
	ASSERT(!check(p, 1000, 1000, POLICY_SEND, "org.example.Dest2")); /* denied anyway */
	ASSERT(!check(p, 1000, 1000, POLICY_SEND, "org.example.Group"));
	ASSERT(policy_check(p, 1000, &root, 1, POLICY_SEND, "org.example.Group", why, sizeof(why)));
	ASSERT(strstr(why, "allow send org.example.Group (") && strstr(why, "all.conf:"));
	ASSERT(check(p, 1000, 1000, POLICY_RECEIVE, "org.example.Any"));
	ASSERT(!check(p, 1000, 1000, POLICY_RECEIVE, "org.example.Quiet"));
	ASSERT(!check(p, 1000, 1000, POLICY_RECEIVE, "org.example.Muted"));
	/* includedir order: 10-first allows, 20-second denies later: denied */
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Second"));
	policy_free(p);
	dbus_config_free(c);
}

/* dbus-daemon's order: default, group, user, mandatory; within each, file order; the last match wins. */
static void test_order(void)
{
	struct dbus_config *c = NULL;
	struct policy *p = NULL;
	char err[512] = "", why[256];
	gid_t g0 = 0;

	ASSERT_INT(dbus_config_load(&c, fixture("order.conf"), err, sizeof(err)), ==, 0);
	ASSERT_INT(policy_new(&p), ==, 0);
	ASSERT_INT(policy_dbus_apply(p, c, NULL, NULL, NULL), ==, 0);
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Twice"));
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Flip"));
	ASSERT(!check(p, 0, 0, POLICY_OWN, "org.example.Flip"));
	/* default allows, group root allows, user root denies: user is applied last */
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Later"));
	ASSERT(check(p, 1000, 0, POLICY_OWN, "org.example.Later"));
	ASSERT(!check(p, 0, 0, POLICY_OWN, "org.example.Later"));
	ASSERT(!policy_check(p, 0, &g0, 1, POLICY_OWN, "org.example.Later", why, sizeof(why)));
	ASSERT(strstr(why, "deny own org.example.Later (") && strstr(why, "order.conf:6)"));
	/* group denies, a later user policy allows */
	ASSERT(check(p, 0, 0, POLICY_OWN, "org.example.UserWins"));
	ASSERT(!check(p, 1000, 0, POLICY_OWN, "org.example.UserWins"));
	/* mandatory beats the default and user allows */
	ASSERT(!check(p, 0, 0, POLICY_SEND, "org.example.Mand"));
	ASSERT(!check(p, 1000, 1000, POLICY_SEND, "org.example.Mand"));
	/* prefix, then a deny of one name below it */
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Tree.Other"));
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Tree.Sub"));
	/* no rule: brokerd's built-in default (root yes, others no) */
	ASSERT(!check(p, 1000, 1000, POLICY_OWN, "org.example.Unmentioned"));
	ASSERT(check(p, 0, 0, POLICY_OWN, "org.example.Unmentioned"));
	policy_free(p);
	dbus_config_free(c);
}

/* The whole load: brokerd's policy.d after the XML, services from both. */
static void test_load(void)
{
	static struct log l;
	const char *pdirs[] = { fixture("brokerd-policy.d"), NULL };
	const char *sdirs[] = { fixture("brokerd-services"), NULL };
	struct policy *p = NULL;
	struct service_set *s = NULL;
	struct policy_dbus_counts n = { 0 };
	const struct service *sv;
	char err[512] = "";
	FILE *f;
	char *out = NULL;
	size_t out_len = 0;

	ASSERT_INT(policy_dbus_load(fixture("load.conf"), pdirs, sdirs, &p, &s, NULL, record, &l, &n, err,
				    sizeof(err)),
		   ==, 0);
	/* the XML's own="*" deny, then policy.d allows: policy.d comes later in [default] */
	ASSERT(check(p, 1000, 1000, POLICY_OWN, "org.example.Local"));
	/* the XML grants no call to Part (only some calls), policy.d grants all */
	ASSERT(check(p, 1000, 1000, POLICY_SEND, "org.example.Part"));
	/* the XML's mandatory still beats policy.d's [default] */
	ASSERT(!check(p, 0, 0, POLICY_OWN, "org.example.Never"));
	sv = service_set_find(s, "org.example.Svc");
	ASSERT(sv && strcmp(sv->unit, "example-svc.service") == 0);
	sv = service_set_find(s, "org.example.Masked");
	ASSERT(sv && strcmp(sv->unit, "from-brokerd.service") == 0); /* brokerd's dirs mask the D-Bus ones */
	/* Exec= only: the D-Bus front end runs it (dbus-activation.c) */
	sv = service_set_find(s, "org.example.ExecOnly");
	ASSERT(sv && !sv->unit && strcmp(sv->exec, "/usr/bin/example-exec-only") == 0);
	has(&l, "not honoured|service file|");
	/* brokerd's own bad activation files are reported too */
	ASSERT(strstr(l.text, "brokerd-services/org.example.Bad.service:2: Name= and SystemdService= are required"));
	ASSERT_INT(n.services_bad, ==, 1);
	policy_free(p);
	service_set_free(s);

	/* a bad brokerd policy file fails the whole load */
	{
		const char *bad[] = { fixture("conf.d"), NULL }; /* holds XML, not brokerd policy */

		ASSERT_INT(policy_dbus_load(fixture("load.conf"), bad, sdirs, &p, &s, NULL, NULL, NULL, NULL, err,
					    sizeof(err)),
			   ==, -EINVAL);
		ASSERT(strstr(err, "conf.d/10-first.conf:1: "));
	}
	ASSERT_INT(policy_dbus_load(fixture("cycle-a.conf"), pdirs, sdirs, &p, &s, NULL, NULL, NULL, NULL, err,
				    sizeof(err)),
		   ==, -ELOOP);
	ASSERT(strstr(err, "include cycle"));

	/* the report: settings, one line per outcome, a summary */
	f = open_memstream(&out, &out_len);
	ASSERT(f);
	ASSERT_INT(policy_dbus_report(f, fixture("load.conf"), pdirs, sdirs), ==, 0);
	fclose(f);
	ASSERT(strstr(out, "type: system\n"));
	ASSERT(strstr(out, "listen: unix:path=/run/test_socket\n"));
	ASSERT(strstr(out, "servicedir: /"));
	ASSERT(strstr(out, "applied: ") &&
	       strstr(out, "load.conf:8: <allow own=\"org.example.Own\"/>: allow own org.example.Own\n"));
	ASSERT(strstr(out,
		      "load.conf:9: <allow send_member=\"M\" send_destination=\"org.example.Part\"/>: D-Bus socket: as "
		      "written; native channels: not honoured, allows only some calls"));
	ASSERT(strstr(out, "load.conf:14: <fork/>: brokerd does not fork"));
	ASSERT(strstr(out, "service: org.example.Svc -> example-svc.service ("));
	ASSERT(strstr(out, "service: org.example.Masked -> from-brokerd.service ("));
	ASSERT(strstr(out, "service: org.example.ExecOnly -> Exec=/usr/bin/example-exec-only ("));
	ASSERT(strstr(
		out,
		"summary: 4 rules, 0 limits, 2 other elements; 4 applied, 0 built-in, 0 partly, 0 stricter, 3 not honoured; 5 brokerd rules in all; 3 services, 1 service files not honoured\n"
		"native channels: 3 applied, 0 built-in, 0 partly, 0 stricter, 4 not honoured; D-Bus socket: 1 send and receive rules decided per message\n"
		"not honoured in all: 3 on the D-Bus socket, 4 on native channels\n"));
	free(out);
}

/* Runs cmd, returns its exit status and (in out) what it printed. */
static int run(const char *cmd, char *out, size_t size)
{
	FILE *f = popen(cmd, "r");
	size_t n;
	int st;

	ASSERT(f);
	n = fread(out, 1, size - 1, f);
	out[n] = 0;
	st = pclose(f);
	ASSERT(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* The daemon's options: --dbus-config-report on a fixture, and an error. */
static void test_daemon_report(const char *brokerd)
{
	static char out[64 * 1024];
	char cmd[2048], want[1024];

	snprintf(cmd, sizeof(cmd),
		 "%s --dbus-config=%s --dbus-config-report --policy-dir=%s --service-dir=%s 2>&1", brokerd,
		 fixture("load.conf"), fixture("brokerd-policy.d"), fixture("brokerd-services"));
	ASSERT_INT(run(cmd, out, sizeof(out)), ==, 0);
	snprintf(want, sizeof(want),
		 "applied: %s:8: <allow own=\"org.example.Own\"/>: allow own org.example.Own\n",
		 fixture("load.conf"));
	ASSERT(strstr(out, want));
	ASSERT(strstr(out, "\nsummary: 4 rules, 0 limits, 2 other elements; 4 applied, "));
	snprintf(cmd, sizeof(cmd), "%s --dbus-config=%s --dbus-config-report 2>&1", brokerd,
		 fixture("malformed.conf"));
	ASSERT_INT(run(cmd, out, sizeof(out)), ==, 1);
	snprintf(want, sizeof(want), "error: %s:4: mismatched tag\n", fixture("malformed.conf"));
	ASSERT_STR(out, want);
	snprintf(cmd, sizeof(cmd), "%s --dbus-config-report 2>&1", brokerd);
	ASSERT_INT(run(cmd, out, sizeof(out)), ==, 1);
	ASSERT_STR(out, "brokerd: --dbus-config-report needs --dbus-config=FILE\n");
}

/* <limit name="reply_timeout"> is brokerd's reply_timeout_ms (NoReply for calls between D-Bus clients). */
static void test_reply_timeout(void)
{
	static const char xml[] = "<busconfig><limit name=\"reply_timeout\">250</limit></busconfig>";
	static struct log l;
	struct dbus_config *c = NULL;
	struct policy *p = NULL;
	struct policy_dbus_counts n = { 0 };
	char err[512] = "";

	ASSERT_INT(dbus_config_parse_string(&c, "timeout.conf", xml, strlen(xml), err, sizeof(err)), ==, 0);
	ASSERT_INT(policy_new(&p), ==, 0);
	ASSERT_INT(policy_dbus_apply(p, c, record, &l, &n), ==, 0);
	has(&l, "applied|<limit name=\"reply_timeout\">250</limit>|[limits] reply_timeout_ms 250\n");
	ASSERT_INT(policy_bus_limit(p, QUOTA_BUS_REPLY_TIMEOUT_MS), ==, 250);
	policy_free(p);
	dbus_config_free(c);
}

/* <limit name="max_replies_per_connection"> is applied under the same name. */
static void test_max_replies(void)
{
	static const char xml[] =
		"<busconfig><limit name=\"max_replies_per_connection\">3</limit></busconfig>";
	static struct log l;
	struct dbus_config *c = NULL;
	struct policy *p = NULL;
	struct policy_dbus_counts n = { 0 };
	char err[512] = "";

	ASSERT_INT(dbus_config_parse_string(&c, "replies.conf", xml, strlen(xml), err, sizeof(err)), ==, 0);
	ASSERT_INT(policy_new(&p), ==, 0);
	ASSERT_INT(policy_dbus_apply(p, c, record, &l, &n), ==, 0);
	has(&l, "applied|<limit name=\"max_replies_per_connection\">3</limit>|[limits] max_replies_per_connection 3\n");
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_REPLIES) == 3);
	policy_free(p);
	dbus_config_free(c);
}

/* dbus-daemon's message size and queue limits apply on the D-Bus socket under their names. */
static void test_message_limits(void)
{
	static const char xml[] = "<busconfig><limit name=\"max_message_size\">1000</limit>"
				  "<limit name=\"max_outgoing_bytes\">2000</limit>"
				  "<limit name=\"max_outgoing_unix_fds\">30</limit>"
				  "<limit name=\"max_incoming_unix_fds\">40</limit>"
				  "<limit name=\"max_incoming_bytes\">5000</limit></busconfig>";
	static struct log l;
	struct dbus_config *c = NULL;
	struct policy *p = NULL;
	struct policy_dbus_counts n = { 0 };
	char err[512] = "";

	ASSERT_INT(dbus_config_parse_string(&c, "size.conf", xml, strlen(xml), err, sizeof(err)), ==, 0);
	ASSERT_INT(policy_new(&p), ==, 0);
	ASSERT_INT(policy_dbus_apply(p, c, record, &l, &n), ==, 0);
	has(&l, "applied|<limit name=\"max_message_size\">1000</limit>|[limits] max_message_size 1000\n");
	has(&l, "applied|<limit name=\"max_outgoing_bytes\">2000</limit>|[limits] max_outgoing_bytes 2000\n");
	has(&l, "built-in|<limit name=\"max_incoming_bytes\">5000</limit>|brokerd holds at most one message");
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_MESSAGE_SIZE) == 1000);
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_OUTGOING_BYTES) == 2000);
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_OUTGOING_FDS) == 30);
	ASSERT(policy_bus_limit(p, QUOTA_BUS_MAX_INCOMING_FDS) == 40);
	policy_free(p);
	dbus_config_free(c);
}

int main(int argc, char **argv)
{
	ASSERT(argc == 2 || argc == 3);
	dir = argv[1];
	test_outcomes();
	test_order();
	test_load();
	test_reply_timeout();
	test_max_replies();
	test_message_limits();
	if (argc == 3)
		test_daemon_report(argv[2]);
	printf("test-policy-dbus: ok\n");
	return 0;
}
