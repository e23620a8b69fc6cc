/* SPDX-License-Identifier: MIT */
/*
 * client-policy-calls - calls across uids, allowed and refused by
 * policy. A root service owns org.brokerd.test.Calls; the test policy lets
 * alice (uid 2001) call it and not bob (2002). alice's call is answered and
 * the service saw uid 2001 and alice's unique name, stamped by the kernel;
 * bob's call fails with -EACCES before anything reaches the service. Also:
 * name-owner-changed notifications, error replies and unknown members.
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Calls"

static int on_echo(brokerd_msg *m, void *u)
{
	struct brokerd_creds c;
	char buf[256];

	if (brokerd_msg_get_creds(m, &c) < 0)
		return brokerd_msg_reply_error(m, "org.brokerd.test.Error.NoCreds", "no creds");
	snprintf(buf, sizeof(buf), "uid=%u sender=%s", (unsigned)c.uid, brokerd_msg_get_sender(m));
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int on_fail(brokerd_msg *m, void *u)
{
	return brokerd_msg_reply_error(m, "org.brokerd.test.Error.Refused", "as asked");
}

static const struct t_method methods[] = { { "Echo", on_echo }, { "Fail", on_fail }, { NULL, NULL } };

static int caller(void *arg)
{
	uid_t uid = (uid_t)(uintptr_t)arg;
	brokerd_bus *bus;
	brokerd_msg *reply = NULL;
	const char *me;
	const void *body;
	size_t size;
	char want[128];
	int r;

	t_become(uid);
	bus = t_open();
	CHECK_R(brokerd_bus_get_unique_name(bus, &me), 0);
	r = brokerd_bus_call(bus, NAME, "Echo", "x", 1, 5000000, &reply);
	if (uid == UID_BOB) {
		CHECK_R(r, -EACCES);
		CHECK(reply == NULL);
		t_log("bob refused by policy: %s", bus->error_message);
		return 0;
	}
	CHECK_R(r, 0);
	brokerd_msg_get_body(reply, &body, &size);
	snprintf(want, sizeof(want), "uid=%u sender=%s", (unsigned)uid, me);
	if (size != strlen(want) || memcmp(body, want, size) != 0)
		FAIL("reply \"%.*s\", want \"%s\"", (int)size, (const char *)body, want);
	CHECK(brokerd_msg_get_type(reply) == BROKERD_MSG_REPLY);
	CHECK(strcmp(brokerd_msg_get_sender(reply), "") != 0);
	brokerd_msg_unref(reply);

	/* an error reply reaches the caller with its name and text */
	reply = NULL;
	CHECK_R(brokerd_bus_call(bus, NAME, "Fail", NULL, 0, 5000000, &reply), -EREMOTEIO);
	CHECK(reply && strcmp(brokerd_msg_get_error_name(reply), "org.brokerd.test.Error.Refused") == 0);
	brokerd_msg_unref(reply);
	reply = NULL;
	CHECK_R(brokerd_bus_call(bus, NAME, "NoSuchMember", NULL, 0, 5000000, &reply), -EREMOTEIO);
	CHECK(reply && strcmp(brokerd_msg_get_error_name(reply), BROKERD_ERROR_UNKNOWN_METHOD) == 0);
	brokerd_msg_unref(reply);
	t_log("uid %u served", (unsigned)uid);
	brokerd_bus_close(bus);
	return 0;
}

static volatile bool gone;
static char last_old[64];

static int on_owner(brokerd_bus *bus, const char *name, const char *old, const char *new, void *u)
{
	if (strcmp(name, NAME) == 0 && !new[0]) {
		snprintf(last_old, sizeof(last_old), "%s", old);
		gone = true;
	}
	return 0;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	char owner[64];
	pid_t srv;

	t_policy("[default]\nallow own org.brokerd.test.*\nallow receive org.brokerd.test.*\n"
		 "[user alice]\nallow send org.brokerd.test.Calls\n");
	srv = t_service_start(NAME, methods);
	CHECK_R(brokerd_bus_get_name_owner(bus, NAME, owner, sizeof(owner)), 0);
	CHECK_R(brokerd_bus_watch_name(bus, NULL, NAME, on_owner, NULL), 0);

	CHECK_R(t_wait(t_fork(caller, (void *)(uintptr_t)UID_ALICE), 20000), 0);
	CHECK_R(t_wait(t_fork(caller, (void *)(uintptr_t)UID_BOB), 20000), 0);
	/* root is allowed everything by default */
	CHECK_R(t_wait(t_fork(caller, (void *)(uintptr_t)0), 20000), 0);

	/* the service goes away: watchers hear that its owner is gone */
	t_kill(srv);
	CHECK(t_pump(bus, &gone, 5000));
	CHECK(strcmp(last_old, owner) == 0);
	CHECK_R(brokerd_bus_get_name_owner(bus, NAME, owner, sizeof(owner)), -ENXIO);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
