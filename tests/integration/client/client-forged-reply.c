/* SPDX-License-Identifier: MIT */
/*
 * client-forged-reply - a reply is taken only from the connection that
 * received the call. alice calls org.brokerd.test.Forge; while the root
 * service holds the call, bob, who may send to alice's inbox like anyone
 * may reach a plain client, forges a reply and an error with the call's
 * serial. The kernel stamps bob's badge on them: alice's library drops and
 * counts both, and brokerd_bus_call() returns the service's real reply.
 */
#include <inttypes.h>

#include "client/bus-chan.h"
#include "client/bus-inbox.h"
#include "protocol/dbus-marshal.h"
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Forge"

static int took[2], go[2];

/* Holds the call until the forgeries are out, then answers it. */
static int on_slow(brokerd_msg *m, void *u)
{
	t_say(took[1], "%s %" PRIu64, brokerd_msg_get_sender(m), brokerd_msg_get_serial(m));
	t_expect(go[0], "go", 20000);
	CHECK_R(brokerd_msg_reply(m, "real", 4), 0);
	return 0;
}

static int caller(void *arg)
{
	brokerd_msg *reply = NULL;
	const void *body;
	size_t size;

	t_become(UID_ALICE);
	brokerd_bus *bus = t_open();
	CHECK_R(brokerd_bus_call(bus, NAME, "Slow", NULL, 0, 20000000, &reply), 0);
	brokerd_msg_get_body(reply, &body, &size);
	if (size != 4 || memcmp(body, "real", 4) != 0)
		FAIL("reply \"%.*s\" from %s", (int)size, (const char *)body, brokerd_msg_get_sender(reply));
	if (brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY) != 2)
		FAIL("%" PRIu64 " forged replies counted, not 2",
		     brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY));
	t_log("alice got the real reply from %s and dropped 2 forgeries", brokerd_msg_get_sender(reply));
	brokerd_msg_unref(reply);
	brokerd_bus_close(bus);
	return 0;
}

struct victim {
	char unique[64];
	uint32_t serial;
};

/* bob answers alice's call himself: a reply, then an error, with its serial. */
static int forger(void *arg)
{
	const struct victim *v = arg;
	struct chmsg r = { .type = CHMSG_REPLY, .reply_serial = v->serial, .destination = v->unique };
	_cleanup_free_ void *data = NULL;
	struct peer_inbox *p;

	t_become(UID_BOB);
	brokerd_bus *bus = t_open();
	CHECK_R(peer_inbox_get_by_name(bus, v->unique, &p), 0);
	CHECK_R(bus_bytes_body(&r, "forged", 6, &data), 0);
	r.serial = 1;
	CHECK_R(bus_chan_send(bus, p->send, &r), 0);
	r.type = CHMSG_ERROR;
	r.serial = 2;
	r.error_name = "org.brokerd.test.Error.Forged";
	CHECK_R(bus_chan_send(bus, p->send, &r), 0);
	brokerd_bus_close(bus);
	return 0;
}

int main(void)
{
	static const struct t_method methods[] = { { "Slow", on_slow }, { NULL, NULL } };
	struct victim v = { 0 };
	char line[128];
	pid_t srv, alice;

	t_policy(
		"[default]\nallow own org.brokerd.test.*\n[user alice]\nallow send org.brokerd.test.Forge\n");
	t_pipe(took);
	t_pipe(go);
	srv = t_service_start(NAME, methods);
	alice = t_fork(caller, NULL);
	CHECK_R(t_hear(took[0], line, sizeof(line), 10000), 0);
	CHECK(sscanf(line, "%63s %" SCNu32, v.unique, &v.serial) == 2);
	CHECK_R(t_wait(t_fork(forger, &v), 20000), 0);
	t_say(go[1], "go");
	CHECK_R(t_wait(alice, 20000), 0);
	t_kill(srv);
	printf("ok\n");
	return 0;
}
