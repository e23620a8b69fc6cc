/* SPDX-License-Identifier: MIT */
/*
 * test-policy-dbus-msg.c - unit tests of the per-message decision of
 * dbus-daemon's send and receive rules (policy-dbus-msg.c): a table of
 * messages between peers against the fixtures in test-dbus-config/, the
 * semantics of Debian's system.conf and logind's policy
 * (msg-system.conf, msg-system.d/) and one rule feature after another
 * (msg-features.conf).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/policy-dbus-msg.h"
#include "util/test.h"

#define M_CALL	 DBUS_MESSAGE_METHOD_CALL
#define M_RETURN DBUS_MESSAGE_METHOD_RETURN
#define M_ERROR	 DBUS_MESSAGE_ERROR
#define M_SIGNAL DBUS_MESSAGE_SIGNAL

#define DRIVER "org.freedesktop.DBus"
#define LOGIN1 "org.freedesktop.login1"
#define ALICE  2001
#define ROOT   0

enum expect { DENY = 0, ALLOW = 1, SKIP = -1 };

/* A peer: its uid and group, the names it owns (space separated), or DRIVER for the bus driver. */
struct who {
	uid_t uid;
	gid_t gid;
	const char *names;
	bool console;
};

struct row {
	const char *what;
	struct who from, to;
	uint8_t type;
	const char *dest, *path, *iface, *member, *error;
	bool requested; /* replies: answers a call that waits */
	unsigned int fds;
	bool eavesdrop;
	enum expect send, receive;
};

static bool owns(void *userdata, const char *name, bool prefix)
{
	const char *names = userdata, *p = names;
	size_t l = strlen(name);

	while (p && *p) {
		size_t k = strcspn(p, " ");

		if ((k == l && strncmp(p, name, l) == 0) ||
		    (prefix && k > l && strncmp(p, name, l) == 0 && p[l] == '.'))
			return true;
		p += k;
		p += strspn(p, " ");
	}
	return false;
}

/* The peer of w; NULL for the driver. */
static const struct policy_dbus_peer *peer(const struct who *w, struct policy_dbus_peer *buf, gid_t *gid)
{
	if (w->names && strcmp(w->names, DRIVER) == 0)
		return NULL;
	*gid = w->gid;
	*buf = (struct policy_dbus_peer){ .uid = w->uid,
					  .gids = gid,
					  .n_gids = 1,
					  .at_console = w->console,
					  .owns = owns,
					  .userdata = (void *)w->names };
	return buf;
}

static unsigned int run_table(const struct policy_dbus_msg *p, const struct row *rows, size_t n)
{
	unsigned int failed = 0;

	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		struct policy_dbus_peer fb, tb;
		gid_t fg, tg;
		const struct policy_dbus_peer *from = peer(&r->from, &fb, &fg), *to = peer(&r->to, &tb, &tg);
		char sender[256];
		struct dbus_header h = {
			.type = r->type,
			.serial = 7,
			.reply_serial = (r->type == M_RETURN || r->type == M_ERROR) ? 3 : 0,
			.n_fds = r->fds,
			.path = r->path,
			.interface = r->iface,
			.member = r->member,
			.error_name = r->error,
			.destination = r->dest,
			.sender = sender,
		};
		struct policy_dbus_verdict v;

		/* the sender's first name stands for it in the message; unique otherwise */
		snprintf(sender, sizeof(sender), "%.*s",
			 (int)strcspn(r->from.names ? r->from.names : ":1.1", " "),
			 r->from.names ? r->from.names : ":1.1");
		if (r->send != SKIP) {
			v = policy_dbus_msg_check_send(p, from, to, &h, r->requested);
			if (v.allowed != (r->send == ALLOW)) {
				fprintf(stderr, "FAILED send: %s: %s (%u rules matched, last %s:%u)\n",
					r->what, v.allowed ? "allowed" : "denied", v.matched,
					v.file ? v.file : "-", v.line);
				failed++;
			}
		}
		if (r->receive != SKIP) {
			v = policy_dbus_msg_check_receive(p, to, from, &h, r->requested, r->eavesdrop);
			if (v.allowed != (r->receive == ALLOW)) {
				fprintf(stderr, "FAILED receive: %s: %s (%u rules matched, last %s:%u)\n",
					r->what, v.allowed ? "allowed" : "denied", v.matched,
					v.file ? v.file : "-", v.line);
				failed++;
			}
		}
	}
	return failed;
}

static struct policy_dbus_msg *load(const char *dir, const char *name)
{
	char path[PATH_MAX], err[512] = "";
	struct dbus_config *c = NULL;
	struct policy_dbus_msg *p = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (dbus_config_load(&c, path, err, sizeof(err)) < 0)
		fprintf(stderr, "%s\n", err);
	ASSERT(c);
	ASSERT_INT(policy_dbus_msg_new(&p, c), ==, 0);
	dbus_config_free(c);
	return p;
}

#define ALICE_ ((struct who){ ALICE, ALICE, ":1.10", false })
#define BOB_   ((struct who){ 2002, 2002, ":1.11", false })
#define ROOT_  ((struct who){ ROOT, ROOT, ":1.1", false })
#define LOGIND ((struct who){ ROOT, ROOT, ":1.3 " LOGIN1, false })
#define BUS    ((struct who){ 0, 0, DRIVER, false })

/* Debian's system bus: deny by default, the holes logind's file punches, replies and signals. */
static const struct row system_rows[] = {
	{ "alice calls logind's ListSessions", ALICE_, LOGIND, M_CALL, LOGIN1, "/org/freedesktop/login1",
	  LOGIN1 ".Manager", "ListSessions", NULL, false, 0, false, ALLOW, ALLOW },
	{ "alice gets a property of logind", ALICE_, LOGIND, M_CALL, LOGIN1, "/org/freedesktop/login1",
	  "org.freedesktop.DBus.Properties", "Get", NULL, false, 0, false, ALLOW, ALLOW },
	{ "alice may not set one", ALICE_, LOGIND, M_CALL, LOGIN1, "/org/freedesktop/login1",
	  "org.freedesktop.DBus.Properties", "Set", NULL, false, 0, false, DENY, SKIP },
	{ "alice may not call CreateSession", ALICE_, LOGIND, M_CALL, LOGIN1, "/org/freedesktop/login1",
	  LOGIN1 ".Manager", "CreateSession", NULL, false, 0, false, DENY, SKIP },
	{ "ListSessions without an interface passes no allow that names one", ALICE_, LOGIND, M_CALL, LOGIN1,
	  "/org/freedesktop/login1", NULL, "ListSessions", NULL, false, 0, false, DENY, SKIP },
	{ "logind's unique name is logind too", ALICE_, LOGIND, M_CALL, ":1.3", "/org/freedesktop/login1",
	  LOGIN1 ".Manager", "ListSessions", NULL, false, 0, false, ALLOW, ALLOW },
	{ "root calls CreateSession", ROOT_, LOGIND, M_CALL, LOGIN1, "/org/freedesktop/login1",
	  LOGIN1 ".Manager", "CreateSession", NULL, false, 0, false, ALLOW, ALLOW },
	{ "logind answers alice", LOGIND, ALICE_, M_RETURN, ":1.10", NULL, NULL, NULL, NULL, true, 0, false,
	  ALLOW, ALLOW },
	{ "logind's error to alice", LOGIND, ALICE_, M_ERROR, ":1.10", NULL, NULL, NULL,
	  "org.freedesktop.DBus.Error.AccessDenied", true, 0, false, ALLOW, ALLOW },
	{ "a reply nobody asked for", LOGIND, ALICE_, M_RETURN, ":1.10", NULL, NULL, NULL, NULL, false, 0,
	  false, DENY, DENY },
	{ "alice answers a call of logind", ALICE_, LOGIND, M_RETURN, ":1.3", NULL, NULL, NULL, NULL, true, 0,
	  false, ALLOW, ALLOW },
	{ "logind's broadcast SessionNew reaches alice", LOGIND, ALICE_, M_SIGNAL, NULL,
	  "/org/freedesktop/login1", LOGIN1 ".Manager", "SessionNew", NULL, false, 0, false, ALLOW, ALLOW },
	{ "alice's signal to bob", ALICE_, BOB_, M_SIGNAL, ":1.11", "/x", "org.example.X", "S", NULL, false,
	  0, false, ALLOW, ALLOW },
	{ "alice may not call bob", ALICE_, BOB_, M_CALL, ":1.11", "/x", "org.example.X", "M", NULL, false, 0,
	  false, DENY, SKIP },
	{ "nor may root call bob", ROOT_, BOB_, M_CALL, ":1.11", "/x", "org.example.X", "M", NULL, false, 0,
	  false, DENY, SKIP },
	{ "alice asks the driver for ListNames", ALICE_, BUS, M_CALL, DRIVER, "/org/freedesktop/DBus", DRIVER,
	  "ListNames", NULL, false, 0, false, ALLOW, SKIP },
	{ "alice may not UpdateActivationEnvironment", ALICE_, BUS, M_CALL, DRIVER, "/org/freedesktop/DBus",
	  DRIVER, "UpdateActivationEnvironment", NULL, false, 0, false, DENY, SKIP },
	{ "alice may not become a monitor", ALICE_, BUS, M_CALL, DRIVER, "/org/freedesktop/DBus",
	  DRIVER ".Monitoring", "BecomeMonitor", NULL, false, 0, false, DENY, SKIP },
	{ "root may", ROOT_, BUS, M_CALL, DRIVER, "/org/freedesktop/DBus", DRIVER ".Monitoring",
	  "BecomeMonitor", NULL, false, 0, false, ALLOW, SKIP },
	{ "the driver's NameOwnerChanged reaches alice", BUS, ALICE_, M_SIGNAL, NULL, "/org/freedesktop/DBus",
	  DRIVER, "NameOwnerChanged", NULL, false, 0, false, SKIP, ALLOW },
};

#define PATH_ ((struct who){ ALICE, ALICE, ":1.20 org.example.Path", false })
#define PRE_X ((struct who){ ALICE, ALICE, ":1.21 org.example.Pre.X", false })
#define PREFIXED ((struct who){ ALICE, ALICE, ":1.22 org.example.Prefix", false })
#define FDS ((struct who){ ALICE, ALICE, ":1.23 org.example.Fds", false })
#define IFACE ((struct who){ ALICE, ALICE, ":1.24 org.example.Iface", false })
#define ORDER ((struct who){ ALICE, ALICE, ":1.25 org.example.Order", false })
#define MUTED ((struct who){ 3000, 3000, ":1.26 org.example.Muted", false })
#define CONSOLE ((struct who){ ALICE, ALICE, ":1.27 org.example.Console", false })
#define NOT_CONSOLE ((struct who){ ALICE, ALICE, ":1.31 org.example.NotConsole", false })
#define GROUP100 ((struct who){ 2003, 100, ":1.28", false })
#define AT_SEAT ((struct who){ 2004, 2004, ":1.29", true })

static const struct row feature_rows[] = {
	{ "send_path matches", ALICE_, PATH_, M_CALL, "org.example.Path", "/ok", "org.example.I", "M", NULL,
	  false, 0, false, ALLOW, ALLOW },
	{ "send_path does not", ALICE_, PATH_, M_CALL, "org.example.Path", "/no", "org.example.I", "M", NULL,
	  false, 0, false, DENY, SKIP },
	{ "send_error allows an unrequested error of its name", ALICE_, BOB_, M_ERROR, ":1.11", NULL, NULL,
	  NULL, "org.example.Error.A", false, 0, false, ALLOW, SKIP },
	{ "not of another name", ALICE_, BOB_, M_ERROR, ":1.11", NULL, NULL, NULL, "org.example.Error.B",
	  false, 0, false, DENY, SKIP },
	{ "a requested error of any name", ALICE_, BOB_, M_ERROR, ":1.11", NULL, NULL, NULL,
	  "org.example.Error.B", true, 0, false, ALLOW, ALLOW },
	{ "send_requested_reply=\"true\" on a deny: even requested", ALICE_, BOB_, M_ERROR, ":1.11", NULL,
	  NULL, NULL, "org.example.Error.Never", true, 0, false, DENY, SKIP },
	{ "unrequested replies: the allow without send_requested_reply does not apply", ALICE_, BOB_,
	  M_RETURN, ":1.11", NULL, NULL, NULL, NULL, false, 0, false, DENY, SKIP },
	{ "send_broadcast=\"true\": a broadcast", ALICE_, BOB_, M_SIGNAL, NULL, "/s", "org.example.Bcast",
	  "S", NULL, false, 0, false, ALLOW, ALLOW },
	{ "send_broadcast=\"true\": not a unicast signal", ALICE_, BOB_, M_SIGNAL, ":1.11", "/s",
	  "org.example.Bcast", "S", NULL, false, 0, false, DENY, SKIP },
	{ "send_broadcast=\"false\": a unicast signal", ALICE_, BOB_, M_SIGNAL, ":1.11", "/s",
	  "org.example.Uni", "S", NULL, false, 0, false, ALLOW, ALLOW },
	{ "send_broadcast=\"false\": not a broadcast", ALICE_, BOB_, M_SIGNAL, NULL, "/s", "org.example.Uni",
	  "S", NULL, false, 0, false, DENY, SKIP },
	{ "a prefix: a name below it", ALICE_, PRE_X, M_CALL, "org.example.Pre.X", "/", NULL, "M", NULL,
	  false, 0, false, ALLOW, ALLOW },
	{ "a prefix: not a longer word", ALICE_, PREFIXED, M_CALL, "org.example.Prefix", "/", NULL, "M", NULL,
	  false, 0, false, DENY, SKIP },
	{ "fds: none", ALICE_, FDS, M_CALL, "org.example.Fds", "/", "org.example.I", "M", NULL, false, 0,
	  false, ALLOW, ALLOW },
	{ "fds: min_fds=\"1\" denies one", ALICE_, FDS, M_CALL, "org.example.Fds", "/", "org.example.I", "M",
	  NULL, false, 1, false, DENY, SKIP },
	{ "an interface the deny names", ALICE_, IFACE, M_CALL, "org.example.Iface", "/", "org.example.No",
	  "M", NULL, false, 0, false, DENY, SKIP },
	{ "another interface", ALICE_, IFACE, M_CALL, "org.example.Iface", "/", "org.example.Yes", "M", NULL,
	  false, 0, false, ALLOW, ALLOW },
	{ "no interface: the deny applies", ALICE_, IFACE, M_CALL, "org.example.Iface", "/", NULL, "M", NULL,
	  false, 0, false, DENY, SKIP },
	{ "default allows Order", ALICE_, ORDER, M_CALL, "org.example.Order", "/", "org.example.Order", "M",
	  NULL, false, 0, false, ALLOW, ALLOW },
	{ "group 100 denies after the default", GROUP100, ORDER, M_CALL, "org.example.Order", "/",
	  "org.example.Order", "M", NULL, false, 0, false, DENY, SKIP },
	{ "user 0 allows after its group 0", ROOT_, ORDER, M_CALL, "org.example.Order", "/",
	  "org.example.Order", "M", NULL, false, 0, false, ALLOW, ALLOW },
	{ "mandatory beats them all", ROOT_, ORDER, M_CALL, "org.example.Order", "/", "org.example.Order",
	  "Never", NULL, false, 0, false, DENY, SKIP },
	{ "Muted's signals: denied to alice", MUTED, ALICE_, M_SIGNAL, NULL, "/m", "org.example.M", "S", NULL,
	  false, 0, false, SKIP, DENY },
	{ "allowed to group 100", MUTED, GROUP100, M_SIGNAL, NULL, "/m", "org.example.M", "S", NULL, false, 0,
	  false, SKIP, ALLOW },
	{ "Muted's replies: not signals", MUTED, ALICE_, M_RETURN, ":1.10", NULL, NULL, NULL, NULL, true, 0,
	  false, ALLOW, ALLOW },
	{ "the driver's Secret signal by its name", BUS, ALICE_, M_SIGNAL, NULL, "/org/freedesktop/DBus",
	  DRIVER, "Secret", NULL, false, 0, false, SKIP, DENY },
	{ "its other signals", BUS, ALICE_, M_SIGNAL, NULL, "/org/freedesktop/DBus", DRIVER, "NameLost", NULL,
	  false, 0, false, SKIP, ALLOW },
	{ "a monitor sees Watched (eavesdrop=\"true\")", ALICE_, BOB_, M_SIGNAL, ":1.30", "/w",
	  "org.example.Watched", "S", NULL, false, 0, true, SKIP, ALLOW },
	{ "and nothing else", ALICE_, BOB_, M_SIGNAL, ":1.30", "/w", "org.example.Other", "S", NULL, false, 0,
	  true, SKIP, DENY },
	{ "a deny with eavesdrop=\"true\" spares the addressee", ALICE_, BOB_, M_SIGNAL, ":1.11", "/p",
	  "org.example.Private", "S", NULL, false, 0, false, SKIP, ALLOW },
	{ "at_console=\"true\" for a user on a seat", AT_SEAT, CONSOLE, M_CALL, "org.example.Console", "/",
	  "org.example.I", "M", NULL, false, 0, false, ALLOW, ALLOW },
	{ "not for others", ALICE_, CONSOLE, M_CALL, "org.example.Console", "/", "org.example.I", "M", NULL,
	  false, 0, false, DENY, SKIP },
	{ "at_console=\"false\" for others", ALICE_, NOT_CONSOLE, M_CALL, "org.example.NotConsole", "/",
	  "org.example.I", "M", NULL, false, 0, false, ALLOW, ALLOW },
	{ "not for a user on a seat", AT_SEAT, NOT_CONSOLE, M_CALL, "org.example.NotConsole", "/",
	  "org.example.I", "M", NULL, false, 0, false, DENY, SKIP },
};

/* The decision tells how many rules matched and which one decided. */
static void test_verdict(const struct policy_dbus_msg *p)
{
	struct policy_dbus_peer a = { .uid = ALICE, .owns = owns, .userdata = (void *)":1.10" };
	struct policy_dbus_peer l = { .uid = ROOT, .owns = owns, .userdata = (void *)":1.3 " LOGIN1 };
	struct dbus_header h = { .type = M_CALL,
				 .serial = 1,
				 .path = "/org/freedesktop/login1",
				 .interface = LOGIN1 ".Manager",
				 .member = "CreateSession",
				 .destination = LOGIN1,
				 .sender = ":1.10" };
	struct policy_dbus_verdict v = policy_dbus_msg_check_send(p, &a, &l, &h, false);

	ASSERT(!v.allowed);
	ASSERT_INT(v.matched, ==, 2); /* deny send_type="method_call", deny send_destination=login1 */
	ASSERT(v.file && strstr(v.file, "msg-system.d/org.freedesktop.login1.conf"));
	ASSERT_INT(v.line, ==, 12);
	ASSERT(!policy_dbus_msg_uses_console(p));
	/* system.conf lets nobody eavesdrop, root neither */
	ASSERT(!policy_dbus_msg_may_eavesdrop(p, &a));
	ASSERT(!policy_dbus_msg_may_eavesdrop(p, &l));
}

int main(int argc, char **argv)
{
	struct policy_dbus_msg *p;
	unsigned int failed;

	ASSERT(argc == 2);
	p = load(argv[1], "msg-system.conf");
	/* every send and receive rule; own, user and group rules are not message rules */
	ASSERT_INT(policy_dbus_msg_count(p), ==, 15 + 3 + 14);
	failed = run_table(p, system_rows, ELEMENTSOF(system_rows));
	test_verdict(p);
	policy_dbus_msg_free(p);

	p = load(argv[1], "msg-features.conf");
	ASSERT(policy_dbus_msg_uses_console(p));
	failed += run_table(p, feature_rows, ELEMENTSOF(feature_rows));
	{
		/* an allow with eavesdrop="true" in the default context: anybody may look */
		struct policy_dbus_peer a = { .uid = ALICE, .owns = owns, .userdata = (void *)":1.10" };

		ASSERT(policy_dbus_msg_may_eavesdrop(p, &a));
	}
	policy_dbus_msg_free(p);
	ASSERT_INT(failed, ==, 0);
	printf("test-policy-dbus-msg: ok (%zu messages)\n",
	       ELEMENTSOF(system_rows) + ELEMENTSOF(feature_rows));
	return 0;
}
