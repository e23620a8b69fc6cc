/* SPDX-License-Identifier: MIT */
/*
 * fuzz-dbus-config.c - libFuzzer target for the dbus-daemon XML
 * configuration reader (expat plus our element handlers) and its mapping
 * onto brokerd's policy. A parse either fails with a "FILE:LINE: reason"
 * message or yields a configuration every rule of which maps to an outcome,
 * a policy that answers every check, and per-message rules that decide a
 * call, a reply and a broadcast. Includes name files relative to
 * /nonexistent, so the input is all that is read.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/dbus-config.h"
#include "brokerd/policy-dbus-msg.h"
#include "brokerd/policy-dbus.h"
#include "protocol/fuzz/fuzz.h"

static bool owns(void *userdata, const char *name, bool prefix)
{
	return strcmp(name, "org.example.Foo") == 0 || (prefix && strcmp(name, "org.example") == 0);
}

/* Every kind of message between a user and root; the answers only must not crash. */
static void check_messages(const struct dbus_config *c)
{
	struct policy_dbus_msg *m = NULL;
	gid_t g = 100;
	struct policy_dbus_peer user = { .uid = 1000, .gids = &g, .n_gids = 1, .owns = owns },
				root = { .uid = 0, .at_console = true, .owns = owns };
	struct dbus_header h = { .serial = 2,
				 .path = "/",
				 .interface = "org.example.I",
				 .member = "M",
				 .destination = "org.example.Foo",
				 .sender = ":1.1" };

	if (policy_dbus_msg_new(&m, c) < 0)
		return;
	for (uint8_t t = DBUS_MESSAGE_METHOD_CALL; t <= DBUS_MESSAGE_SIGNAL; t++) {
		h.type = t;
		h.reply_serial = t == DBUS_MESSAGE_METHOD_RETURN || t == DBUS_MESSAGE_ERROR;
		h.error_name = t == DBUS_MESSAGE_ERROR ? "org.example.E" : NULL;
		(void)policy_dbus_msg_check_send(m, &user, &root, &h, true);
		(void)policy_dbus_msg_check_send(m, &root, NULL, &h, false);
		(void)policy_dbus_msg_check_receive(m, &user, NULL, &h, false, true);
		(void)policy_dbus_msg_check_receive(m, &root, &user, &h, true, false);
	}
	policy_dbus_msg_free(m);
}

static void count(void *userdata, enum policy_dbus_outcome o, const char *file, unsigned int line,
		  const char *element, const char *what)
{
	CHECK((unsigned int)o < _POLICY_DBUS_OUTCOME_MAX && file && element && what);
	(*(size_t *)userdata)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dbus_config *c = NULL;
	struct policy *p = NULL;
	char err[512];
	gid_t gids[] = { 0, 100 };
	size_t n = 0;
	int r;

	if (size > 256 * 1024)
		return 0;
	r = dbus_config_parse_string(&c, "/nonexistent/fuzz.conf", (const char *)data, size, err,
				     sizeof(err));
	if (r < 0) {
		/* every failure but memory says where */
		CHECK(r == -ENOMEM || strncmp(err, "/nonexistent/", 13) == 0);
		return 0;
	}
	if (policy_new(&p) == 0) {
		struct policy_dbus_counts counts = { 0 };

		if (policy_dbus_apply(p, c, count, &n, &counts) == 0) {
			CHECK(n == c->n_rules + c->n_limits + c->n_notes);
			for (int a = 0; a < _POLICY_ACTION_MAX; a++) {
				policy_check(p, 1000, gids + 1, 1, a, "org.example.Foo", err, sizeof(err));
				policy_check(p, 0, gids, 2, a, "org.freedesktop.DBus", err, sizeof(err));
			}
		}
		policy_free(p);
	}
	check_messages(c);
	dbus_config_free(c);
	return 0;
}
