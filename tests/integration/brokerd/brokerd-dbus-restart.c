/* SPDX-License-Identifier: MIT */
/*
 * brokerd-dbus-restart - D-Bus connections survive `systemctl restart
 * brokerd` (brokerd/README.md, "Restart"; brokerd/dbus-restart.c): two
 * sd-bus clients on brokerd's D-Bus socket, connected before the restart,
 * go on through the same connections after it.
 *
 * A service (its own process) owns org.brokerdtest.DBusRestart, answers
 * Echo(s) and keeps Late() unanswered until Release(), and has a match
 * rule for the signal org.brokerdtest.Poke.Poke, which it answers by
 * emitting Poked with the same text. The caller subscribes to Poked, calls
 * Echo and pokes, and leaves a Late() call waiting; then brokerd is
 * restarted. After it, on the same two connections: Echo is answered, a
 * Poke reaches the service through its match rule and its Poked the caller
 * through its own, GetNameOwner still names the service's unique name,
 * GetId is the bus id of before, Release lets the service answer the Late()
 * call made before the restart (the reply is still expected), and neither
 * client saw its connection close.
 *
 * A third connection has an eavesdrop='true' rule (root may eavesdrop) on
 * calls to org.brokerdtest.RestartEav: the rule is carried over with the
 * connection, and brokerd watches native traffic again after the restart
 * (dbus-monitor-native.c): a native call from brokerctl to a native
 * service that takes that name after the restart reaches the eavesdropper.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "util/test.h"

#define ADDRESS "unix:path=/run/brokerd/dbus_socket"
#define NAME	"org.brokerdtest.DBusRestart"
#define PATH	"/org/brokerdtest"
#define IFACE	"org.brokerdtest.DBusRestart"
#define POKE	"org.brokerdtest.Poke"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static sd_bus *connect_bus(void)
{
	sd_bus *bus = NULL;

	ASSERT_INT(sd_bus_new(&bus), >=, 0);
	ASSERT_INT(sd_bus_set_address(bus, ADDRESS), >=, 0);
	ASSERT_INT(sd_bus_set_bus_client(bus, true), >=, 0);
	ASSERT_INT(sd_bus_negotiate_fds(bus, true), >=, 0);
	ASSERT_INT(sd_bus_start(bus), >=, 0);
	return bus;
}

/* --- the service ----------------------------------------------------------- */

static sd_bus_message *late;

static int on_method(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s;

	if (sd_bus_message_is_method_call(m, IFACE, "Echo")) {
		ASSERT_INT(sd_bus_message_read(m, "s", &s), >=, 0);
		return sd_bus_reply_method_return(m, "s", s);
	}
	if (sd_bus_message_is_method_call(m, IFACE, "Late")) {
		late = sd_bus_message_ref(m);
		return 1;
	}
	if (sd_bus_message_is_method_call(m, IFACE, "Release")) {
		ASSERT(late);
		ASSERT_INT(sd_bus_reply_method_return(late, "s", "late"), >=, 0);
		late = sd_bus_message_unref(late);
		return sd_bus_reply_method_return(m, "");
	}
	return 0;
}

static int on_poke(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s;

	ASSERT_INT(sd_bus_message_read(m, "s", &s), >=, 0);
	return sd_bus_emit_signal(sd_bus_message_get_bus(m), PATH, POKE, "Poked", "s", s);
}

static void service(int ready)
{
	sd_bus *bus = connect_bus();
	const char *unique;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	ASSERT_INT(sd_bus_add_object(bus, NULL, PATH, on_method, NULL), >=, 0);
	ASSERT_INT(sd_bus_add_match(bus, NULL, "type='signal',interface='" POKE "',member='Poke'", on_poke,
				    NULL),
		   >=, 0);
	ASSERT_INT(sd_bus_request_name(bus, NAME, 0), >=, 0);
	ASSERT_INT(sd_bus_get_unique_name(bus, &unique), >=, 0);
	dprintf(ready, "%s\n", unique);
	for (;;) {
		int r = sd_bus_process(bus, NULL);

		if (r < 0) {
			fprintf(stderr, "service: the connection ended: %s\n", strerror(-r));
			_exit(2);
		}
		if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
			_exit(2);
	}
}

/* --- the caller ------------------------------------------------------------- */

static char poked[64];
static bool late_done;
static char late_reply[64];

static int on_poked(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s;

	if (sd_bus_message_read(m, "s", &s) > 0)
		snprintf(poked, sizeof(poked), "%s", s);
	return 0;
}

static int on_late(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s = "";

	if (sd_bus_message_is_method_error(m, NULL))
		snprintf(late_reply, sizeof(late_reply), "error %s", sd_bus_message_get_error(m)->name);
	else if (sd_bus_message_read(m, "s", &s) > 0)
		snprintf(late_reply, sizeof(late_reply), "%s", s);
	late_done = true;
	return 0;
}

/* Processes bus until *done or ms pass. */
static bool pump(sd_bus *bus, volatile bool *done, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (!*done && now_ms() < end) {
		int r = sd_bus_process(bus, NULL);

		if (r < 0) {
			fprintf(stderr, "FAIL: the caller's connection ended: %s\n", strerror(-r));
			exit(1);
		}
		if (r == 0)
			(void)sd_bus_wait(bus, 50000);
	}
	return *done;
}

static void echo(sd_bus *bus, const char *text)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *s;
	int r = sd_bus_call_method(bus, NAME, PATH, IFACE, "Echo", &e, &reply, "s", text);

	if (r < 0) {
		fprintf(stderr, "FAIL: Echo(%s): %s: %s\n", text, e.name, e.message);
		exit(1);
	}
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT_STR(s, text);
	sd_bus_message_unref(reply);
	printf("Echo(%s) answered\n", text);
}

static void poke(sd_bus *bus, const char *text)
{
	volatile bool got = false;
	uint64_t end = now_ms() + 10000;

	poked[0] = 0;
	ASSERT_INT(sd_bus_emit_signal(bus, "/", POKE, "Poke", "s", text), >=, 0);
	while (strcmp(poked, text) != 0 && now_ms() < end)
		(void)pump(bus, &got, 100);
	if (strcmp(poked, text) != 0) {
		fprintf(stderr, "FAIL: Poke(%s) was not answered with Poked within 10 s\n", text);
		exit(1);
	}
	printf("Poke(%s): the service's match rule took it, the caller's took its Poked\n", text);
}

static char *call_s(sd_bus *bus, const char *member, const char *sig, const char *arg)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *s;
	char *out;

	if (sig)
		ASSERT_INT(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					      "org.freedesktop.DBus", member, &e, &reply, sig, arg),
			   >=, 0);
	else
		ASSERT_INT(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					      "org.freedesktop.DBus", member, &e, &reply, NULL),
			   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	out = strdup(s);
	sd_bus_message_unref(reply);
	return out;
}

#define EAV_NAME "org.brokerdtest.RestartEav"
#define HELPER	 "/usr/libexec/brokerd-integration/brokerd-test-helper"

static volatile bool eav_seen;

/* Everything the eavesdropper gets: sd-bus's own matching would drop calls not for it. */
static int on_eav(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	uint8_t type = 0;

	(void)sd_bus_message_get_type(m, &type);
	if (type == SD_BUS_MESSAGE_METHOD_CALL && sd_bus_message_get_destination(m) &&
	    !strcmp(sd_bus_message_get_destination(m), EAV_NAME) && sd_bus_message_get_member(m) &&
	    !strcmp(sd_bus_message_get_member(m), "AfterRestart")) {
		printf("the eavesdropper saw %s's call %s.AfterRestart\n", sd_bus_message_get_sender(m), EAV_NAME);
		eav_seen = true;
	}
	return 0;
}

static pid_t brokerd_pid(void)
{
	char buf[32] = "";
	FILE *f = popen("systemctl show -P MainPID brokerd.service", "r");

	ASSERT(f && fgets(buf, sizeof(buf), f));
	pclose(f);
	return (pid_t)atoi(buf);
}

int main(void)
{
	char unique[128] = "", *id0, *id1, *owner;
	sd_bus *bus, *eav;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	pid_t svc, before, after, helper;
	int ready[2], status;
	uint64_t t0;
	ssize_t n;

	if (system("systemctl --version >/dev/null 2>&1") != 0)
		return 77;
	setvbuf(stdout, NULL, _IOLBF, 0);
	ASSERT(pipe(ready) == 0);
	svc = fork();
	ASSERT(svc >= 0);
	if (svc == 0) {
		close(ready[0]);
		service(ready[1]);
	}
	close(ready[1]);
	n = read(ready[0], unique, sizeof(unique) - 1);
	ASSERT(n > 1);
	unique[n - 1] = 0;
	printf("the service is %s\n", unique);

	bus = connect_bus();
	ASSERT_INT(sd_bus_add_match(bus, NULL, "type='signal',interface='" POKE "',member='Poked'", on_poked,
				    NULL),
		   >=, 0);
	eav = connect_bus();
	ASSERT_INT(sd_bus_add_filter(eav, NULL, on_eav, NULL), >=, 0);
	ASSERT_INT(sd_bus_call_method(eav, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
				      "AddMatch", &e, NULL, "s",
				      "eavesdrop='true',type='method_call',destination='" EAV_NAME "'"),
		   >=, 0);
	echo(bus, "before");
	poke(bus, "p1");
	id0 = call_s(bus, "GetId", NULL, NULL);
	ASSERT_INT(sd_bus_call_method_async(bus, NULL, NAME, PATH, IFACE, "Late", on_late, NULL, ""), >=, 0);
	(void)pump(bus, &late_done, 300); /* sent, and taken by the service */
	ASSERT(!late_done);

	before = brokerd_pid();
	t0 = now_ms();
	ASSERT(system("systemctl restart brokerd.service") == 0);
	after = brokerd_pid();
	printf("brokerd restarted in %llu ms (pid %d -> %d)\n", (unsigned long long)(now_ms() - t0),
	       (int)before, (int)after);
	ASSERT(after > 0 && after != before);

	echo(bus, "after");
	poke(bus, "p2");
	owner = call_s(bus, "GetNameOwner", "s", NAME);
	printf("%s is owned by %s\n", NAME, owner);
	ASSERT_STR(owner, unique);
	id1 = call_s(bus, "GetId", NULL, NULL);
	printf("bus id %s before, %s after\n", id0, id1);
	ASSERT_STR(id0, id1);
	ASSERT_INT(sd_bus_call_method(bus, NAME, PATH, IFACE, "Release", &e, NULL, ""), >=, 0);
	if (!pump(bus, &late_done, 10000)) {
		fprintf(stderr, "FAIL: the call made before the restart got no answer\n");
		return 1;
	}
	printf("the call made before the restart: %s\n", late_reply);
	ASSERT_STR(late_reply, "late");
	ASSERT(sd_bus_is_open(bus) > 0);
	ASSERT(waitpid(svc, &status, WNOHANG) == 0); /* the service's connection did not end either */

	/* the eavesdrop rule came through the restart, and with it the watch of native traffic */
	helper = fork();
	ASSERT(helper >= 0);
	if (helper == 0) {
		execl(HELPER, HELPER, "--own", EAV_NAME, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && system("brokerctl list 2>/dev/null | grep -q '^" EAV_NAME " '") != 0; i++)
		usleep(100000);
	(void)!system("timeout 20 brokerctl -t 1 call " EAV_NAME " AfterRestart >/dev/null 2>&1");
	if (!pump(eav, &eav_seen, 10000)) {
		fprintf(stderr, "FAIL: the eavesdropper did not see a native call after the restart\n");
		kill(helper, SIGKILL);
		return 1;
	}
	kill(helper, SIGKILL);
	waitpid(helper, &status, 0);
	sd_bus_flush_close_unref(eav);

	kill(svc, SIGKILL);
	waitpid(svc, &status, 0);
	sd_bus_flush_close_unref(bus);
	free(id0);
	free(id1);
	free(owner);
	printf("ok\n");
	return 0;
}
