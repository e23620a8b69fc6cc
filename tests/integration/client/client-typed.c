/* SPDX-License-Identifier: MIT */
/*
 * client-typed - typed messages between real processes. A root service
 * owns org.brokerd.test.Typed: its method Describe takes (s a{sv}) and
 * answers with a typed reply (s u v), and it emits a typed signal. The
 * caller builds the call with the typed API, reads the reply and the
 * signal back by type, and sees the version 2 header fields.
 */
#include <inttypes.h>

#include "tests/integration/client/testlib.h"

#define NAME  "org.brokerd.test.Typed"
#define IFACE "org.brokerd.test.Typed1"

static int on_describe(brokerd_msg *m, void *u)
{
	brokerd_bus *bus = u;
	brokerd_msg *r = NULL, *sig = NULL;
	const char *who, *key;
	uint32_t n = 0, value = 0;
	char text[128];

	if (strcmp(brokerd_msg_get_signature(m), "(sa{sv})") != 0 ||
	    strcmp(brokerd_msg_get_path(m), "/obj") != 0 || strcmp(brokerd_msg_get_interface(m), IFACE) != 0)
		return -EINVAL;
	CHECK_R(brokerd_msg_enter_container(m, '(', "sa{sv}"), 1);
	CHECK_R(brokerd_msg_read(m, "s", &who), 1);
	CHECK_R(brokerd_msg_enter_container(m, 'a', "{sv}"), 1);
	while (brokerd_msg_read(m, "{sv}", &key, "u", &value) == 1)
		n += value;
	CHECK_R(brokerd_msg_exit_container(m), 0);
	CHECK_R(brokerd_msg_exit_container(m), 0);
	snprintf(text, sizeof(text), "hello %s", who);
	CHECK_R(brokerd_msg_new_reply(m, &r), 0);
	CHECK_R(brokerd_msg_append(r, "suv", text, n, "as", 2U, "x", "y"), 0);
	CHECK_R(brokerd_bus_send(bus, r), 0);
	brokerd_msg_unref(r);
	CHECK_R(brokerd_msg_new_signal(bus, &sig, NAME, "/obj", IFACE, "Described"), 0);
	CHECK_R(brokerd_msg_append(sig, "su", who, n), 0);
	CHECK_R(brokerd_bus_send(bus, sig), 0);
	brokerd_msg_unref(sig);
	return 0;
}

static volatile bool signalled;

static int on_described(brokerd_msg *m, void *u)
{
	const char *who;
	uint32_t n;

	CHECK(strcmp(brokerd_msg_get_signature(m), "su") == 0 &&
	      strcmp(brokerd_msg_get_interface(m), IFACE) == 0);
	CHECK_R(brokerd_msg_read(m, "su", &who, &n), 1);
	CHECK(strcmp(who, "alice") == 0 && n == 42);
	signalled = true;
	return 0;
}

int main(void)
{
	static const struct t_method methods[] = { { "Describe", on_describe }, { NULL, NULL } };
	brokerd_bus *bus;
	brokerd_msg *call = NULL, *reply = NULL;
	const char *text, *a, *b;
	uint32_t n;
	pid_t srv;

	t_policy("[default]\nallow own org.brokerd.test.*\nallow send org.brokerd.test.*\n"
		 "allow receive org.brokerd.test.*\n");
	srv = t_service_start(NAME, methods);
	bus = t_open();
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Described", on_described, NULL), 0);
	CHECK_R(brokerd_msg_new_call(bus, &call, NAME, "/obj", IFACE, "Describe"), 0);
	CHECK_R(brokerd_msg_append(call, "(sa{sv})", "alice", 2U, "a", "u", 40U, "b", "u", 2U), 0);
	CHECK_R(brokerd_bus_call_msg(bus, call, 10000000, &reply), 0);
	CHECK(strcmp(brokerd_msg_get_signature(reply), "suv") == 0);
	CHECK_R(brokerd_msg_read(reply, "su", &text, &n), 1);
	CHECK(strcmp(text, "hello alice") == 0 && n == 42);
	CHECK_R(brokerd_msg_enter_container(reply, 'v', "as"), 1);
	CHECK_R(brokerd_msg_enter_container(reply, 'a', "s"), 1);
	CHECK_R(brokerd_msg_read(reply, "ss", &a, &b), 1);
	CHECK(strcmp(a, "x") == 0 && strcmp(b, "y") == 0);
	CHECK(t_pump(bus, &signalled, 5000));
	t_log("typed call, reply and signal: ok; %" PRIu64 " invalid, %" PRIu64 " forged",
	      brokerd_bus_get_counter(bus, BROKERD_COUNTER_INVALID),
	      brokerd_bus_get_counter(bus, BROKERD_COUNTER_FORGED_REPLY));
	CHECK(brokerd_bus_get_counter(bus, BROKERD_COUNTER_INVALID) == 0);
	brokerd_msg_unref(reply);
	brokerd_msg_unref(call);
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
