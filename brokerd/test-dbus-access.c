/* SPDX-License-Identifier: MIT */
/*
 * test-dbus-access.c - dbus-daemon's send and receive rules on the D-Bus
 * socket end to end: the real brokerd (argv[1]) with --dbus-config on a
 * deny-by-default XML written here, a server process that owns
 * org.brokerdtest.Policy with the same method on an interface the policy
 * opens and on one it does not, and an sd-bus client. The client's calls
 * are let through or refused with AccessDenied per interface, the replies
 * to the calls let through pass, and a signal the receive rules deny never
 * arrives while the one after it does. A send rule on the bus driver holds.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "brokerd/test-dbus-util.h"
#include "util/test.h"

#define NAME   "org.brokerdtest.Policy"
#define PATH   "/org/brokerdtest"
#define OPEN   "org.brokerdtest.Open"
#define CLOSED "org.brokerdtest.Closed"
#define HIDDEN "org.brokerdtest.Hidden"

static const char config[] = "<busconfig>\n"
			     "  <type>system</type>\n"
			     "  <policy context=\"default\">\n"
			     "    <allow user=\"*\"/>\n"
			     "    <allow own=\"" NAME "\"/>\n"
			     "    <deny send_type=\"method_call\"/>\n"
			     "    <allow send_type=\"signal\"/>\n"
			     "    <allow send_type=\"method_return\" send_requested_reply=\"true\"/>\n"
			     "    <allow send_type=\"error\" send_requested_reply=\"true\"/>\n"
			     "    <allow receive_type=\"*\"/>\n"
			     "    <allow send_destination=\"org.freedesktop.DBus\"/>\n"
			     "    <deny send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"\n"
			     "          send_member=\"GetId\"/>\n"
			     "    <deny send_destination=\"org.freedesktop.DBus\"\n"
			     "          send_interface=\"org.freedesktop.DBus.Debug.Stats\"/>\n"
			     "    <allow send_destination=\"" NAME "\" send_interface=\"" OPEN "\"/>\n"
			     "    <deny receive_interface=\"" HIDDEN "\" receive_type=\"signal\"/>\n"
			     "    <deny receive_interface=\"org.freedesktop.DBus\" receive_member=\"NameAcquired\"/>\n"
			     "  </policy>\n"
			     "</busconfig>\n";

static char address[320];
static int on_echo(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	const char *s;
	int r = sd_bus_message_read(m, "s", &s);

	return r < 0 ? r : sd_bus_reply_method_return(m, "s", s);
}

/* A signal the client's receive rules refuse, then one they let through. */
static int on_emit(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	sd_bus *b = sd_bus_message_get_bus(m);

	(void)sd_bus_emit_signal(b, PATH, HIDDEN, "Secret", "s", "not for you");
	(void)sd_bus_emit_signal(b, PATH, OPEN, "Ping", "u", 42U);
	return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable open_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Echo", "s", "s", on_echo, 0),
	SD_BUS_METHOD("Emit", "", "", on_emit, 0),
	SD_BUS_VTABLE_END,
};

static const sd_bus_vtable closed_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Echo", "s", "s", on_echo, 0),
	SD_BUS_VTABLE_END,
};

static void server_setup(sd_bus *b)
{
	ASSERT_INT(sd_bus_add_object_vtable(b, NULL, PATH, OPEN, open_vtable, NULL), >=, 0);
	ASSERT_INT(sd_bus_add_object_vtable(b, NULL, PATH, CLOSED, closed_vtable, NULL), >=, 0);
}

/* Calls iface.Echo (iface NULL: a call without interface); returns the error name or NULL. */
static char *echo(sd_bus *b, const char *iface, char *msg, size_t len)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *s;
	char *name = NULL;
	int r;

	r = sd_bus_call_method(b, NAME, PATH, iface, "Echo", &e, &reply, "s", "hi");
	if (r < 0) {
		name = strdup(e.name ? e.name : "?");
		snprintf(msg, len, "%s", e.message ? e.message : "");
	} else {
		ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
		ASSERT_STR(s, "hi");
	}
	sd_bus_error_free(&e);
	sd_bus_message_unref(reply);
	return name;
}

static void test_calls(sd_bus *b)
{
	char msg[1024] = "", *err;

	ASSERT(!echo(b, OPEN, msg, sizeof(msg)));
	ok("a call to the open interface and its reply pass");
	err = echo(b, CLOSED, msg, sizeof(msg));
	ASSERT(err && strcmp(err, "org.freedesktop.DBus.Error.AccessDenied") == 0);
	ASSERT(strstr(msg, "Rejected send message, 1 matched rules; type=\"method_call\", sender=\":"));
	ASSERT(strstr(msg,
		      "interface=\"" CLOSED "\" member=\"Echo\" error name=\"(unset)\" requested_reply=\"0\" "
		      "destination=\"" NAME "\""));
	free(err);
	ok("a call to the other interface is refused with AccessDenied, worded as dbus-daemon words it");
	err = echo(b, NULL, msg, sizeof(msg));
	ASSERT(err && strcmp(err, "org.freedesktop.DBus.Error.AccessDenied") == 0);
	free(err);
	ok("a call without interface passes no allow that names one");
}

/* The send rules hold for the bus driver too, matched by its name, as on dbus-daemon. */
static void test_driver(sd_bus *b)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;

	ASSERT_INT(sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				      "org.freedesktop.DBus", "GetId", &e, &reply, ""),
		   <, 0);
	ASSERT_STR(e.name, "org.freedesktop.DBus.Error.AccessDenied");
	ASSERT(strstr(e.message, "Rejected send message, 3 matched rules; type=\"method_call\""));
	ASSERT(strstr(e.message, "member=\"GetId\" error name=\"(unset)\" requested_reply=\"0\" "
				 "destination=\"org.freedesktop.DBus\""));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				      "org.freedesktop.DBus", "ListNames", &e, &reply, ""),
		   >=, 0);
	reply = sd_bus_message_unref(reply);
	/* Debug.Stats as system.conf holds it: denied by interface, whoever asks (root too) */
	ASSERT_INT(sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				      "org.freedesktop.DBus.Debug.Stats", "GetStats", &e, &reply, ""),
		   <, 0);
	ASSERT_STR(e.name, "org.freedesktop.DBus.Error.AccessDenied");
	ASSERT(strstr(e.message, "Rejected send message"));
	sd_bus_error_free(&e);
	ok("a call to the bus driver a send rule denies is refused (GetId, Debug.Stats), the others pass "
	   "(ListNames)");
}

static int on_signal(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	int *seen = userdata;

	if (sd_bus_message_is_signal(m, HIDDEN, "Secret"))
		seen[0]++;
	if (sd_bus_message_is_signal(m, OPEN, "Ping"))
		seen[1]++;
	return 0;
}

static void test_signals(sd_bus *b)
{
	int seen[2] = { 0, 0 };

	ASSERT_INT(sd_bus_match_signal(b, NULL, NAME, NULL, NULL, NULL, on_signal, seen), >=, 0);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, OPEN, "Emit", NULL, NULL, ""), >=, 0);
	/* the signals were sent before the reply: both have arrived or been refused */
	for (int i = 0; i < 500 && !seen[1]; i++) {
		if (sd_bus_process(b, NULL) == 0)
			(void)sd_bus_wait(b, 10000);
	}
	ASSERT_INT(seen[1], ==, 1);
	ASSERT_INT(seen[0], ==, 0);
	ok("a broadcast the receive rules deny is not delivered, the next one is");
}

/* The next message mon sees (5 s at most), with its type. */
static sd_bus_message *next_monitored(sd_bus *mon, uint8_t *type)
{
	for (int spins = 0; spins < 500;) {
		sd_bus_message *m = NULL;
		int r = sd_bus_process(mon, &m);

		ASSERT(r >= 0);
		if (m) {
			ASSERT_INT(sd_bus_message_get_type(m, type), >=, 0);
			return m;
		}
		if (r == 0) {
			(void)sd_bus_wait(mon, 10000);
			spins++;
		}
	}
	ASSERT(!"nothing more for the monitor");
	return NULL;
}

/*
 * A monitor sees the refused broadcast and then the AccessDenied
 * dbus-daemon answers it with (to the sender, who, as the signal wants no
 * reply, is not sent it), once for the one subscriber refused, and the
 * next broadcast without an error after it.
 */
static void test_monitor_sees_refusal(sd_bus *b)
{
	sd_bus *mon = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	uint64_t secret_serial = 0;
	char secret_sender[64] = "";
	int secret = -1, denied = -1, ping = -1, n_denied = 0, i = 0;
	bool done = false;

	ASSERT_INT(sd_bus_match_signal(b, NULL, NAME, NULL, NULL, NULL, NULL, NULL), >=, 0);
	ASSERT_INT(sd_bus_new(&mon), ==, 0);
	ASSERT_INT(sd_bus_set_address(mon, address), >=, 0);
	ASSERT_INT(sd_bus_set_bus_client(mon, 1), >=, 0);
	ASSERT_INT(sd_bus_set_monitor(mon, 1), >=, 0);
	ASSERT_INT(sd_bus_start(mon), >=, 0);
	ASSERT_INT(sd_bus_call_method(mon, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				      "org.freedesktop.DBus.Monitoring", "BecomeMonitor", &e, NULL, "asu", 0, 0U),
		   >=, 0);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, OPEN, "Emit", NULL, NULL, ""), >=, 0);
	while (!done) {
		uint8_t type = 0;
		uint64_t rs = 0;
		sd_bus_message *m = next_monitored(mon, &type);

		if (sd_bus_message_is_signal(m, HIDDEN, "Secret")) {
			secret = i;
			ASSERT_INT(sd_bus_message_get_cookie(m, &secret_serial), >=, 0);
			snprintf(secret_sender, sizeof(secret_sender), "%s", sd_bus_message_get_sender(m));
		} else if (sd_bus_message_is_signal(m, OPEN, "Ping")) {
			ping = i;
		} else if (type == SD_BUS_MESSAGE_METHOD_ERROR &&
			   !strcmp(sd_bus_message_get_error(m)->name, "org.freedesktop.DBus.Error.AccessDenied")) {
			ASSERT_STR(sd_bus_message_get_sender(m), "org.freedesktop.DBus");
			ASSERT_INT(sd_bus_message_get_reply_cookie(m, &rs), >=, 0);
			ASSERT(rs == secret_serial);
			ASSERT_STR(sd_bus_message_get_destination(m), secret_sender);
			ASSERT(strstr(sd_bus_message_get_error(m)->message,
				      "Rejected receive message, 2 matched rules; type=\"signal\""));
			denied = i;
			n_denied++;
		} else if (type == SD_BUS_MESSAGE_METHOD_RETURN && ping >= 0) {
			done = true; /* Emit's reply: the signals came before it */
		}
		i++;
		sd_bus_message_unref(m);
	}
	ASSERT(secret >= 0 && secret < denied && denied < ping);
	ASSERT_INT(n_denied, ==, 1);
	ok("a monitor sees a refused broadcast, then its AccessDenied, once per refused subscriber");

	/* A NameAcquired the receive rules refuse: the driver's AccessDenied to itself follows it. */
	sd_bus *late = sdbus_connect(address);
	const char *late_name;
	uint64_t acquired_serial = 0;

	ASSERT_INT(sd_bus_get_unique_name(late, &late_name), >=, 0);
	done = false;
	while (!done) {
		uint8_t type = 0;
		uint64_t rs = 0;
		sd_bus_message *m = next_monitored(mon, &type);

		if (sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameAcquired") &&
		    !strcmp(sd_bus_message_get_destination(m), late_name))
			ASSERT_INT(sd_bus_message_get_cookie(m, &acquired_serial), >=, 0);
		if (type == SD_BUS_MESSAGE_METHOD_ERROR) {
			ASSERT(acquired_serial != 0);
			ASSERT_STR(sd_bus_message_get_error(m)->name, "org.freedesktop.DBus.Error.AccessDenied");
			ASSERT_STR(sd_bus_message_get_sender(m), "org.freedesktop.DBus");
			ASSERT_STR(sd_bus_message_get_destination(m), "org.freedesktop.DBus");
			ASSERT_INT(sd_bus_message_get_reply_cookie(m, &rs), >=, 0);
			ASSERT(rs == acquired_serial);
			done = true;
		}
		sd_bus_message_unref(m);
	}
	sd_bus_flush_close_unref(late);
	sd_bus_error_free(&e);
	sd_bus_flush_close_unref(mon);
	ok("a NameAcquired the receive rules refuse: monitors see it, then the driver's AccessDenied to itself");
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/test-dbus-access-XXXXXX", path[400], sock[300], ctrl[300], conf[300], pdir[300],
	     sdir[300], arg[400], conf_arg[400];
	pid_t daemon, server;
	FILE *f;
	sd_bus *b;
	int status;

	ASSERT(argc == 2);
	ASSERT(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/dbus", dir);
	snprintf(ctrl, sizeof(ctrl), "%s/socket", dir);
	snprintf(conf, sizeof(conf), "%s/system.conf", dir);
	snprintf(pdir, sizeof(pdir), "%s/policy.d", dir);
	snprintf(sdir, sizeof(sdir), "%s/services", dir);
	ASSERT(mkdir(pdir, 0755) == 0 && mkdir(sdir, 0755) == 0);
	f = fopen(conf, "we");
	ASSERT(f);
	fputs(config, f);
	ASSERT_INT(fclose(f), ==, 0);
	daemon = fork();
	ASSERT(daemon >= 0);
	if (daemon == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(arg, sizeof(arg), "--dbus-address=unix:path=%s", sock);
		snprintf(conf_arg, sizeof(conf_arg), "--dbus-config=%s", conf);
		execl(argv[1], argv[1], "--state", "", "--address", ctrl, "--policy-dir", pdir,
		      "--service-dir", sdir, "--no-channels", conf_arg, arg, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && access(sock, F_OK) < 0; i++)
		usleep(10000);
	snprintf(address, sizeof(address), "unix:path=%s", sock);
	server = sdbus_serve(address, NAME, server_setup);
	b = sdbus_connect(address);
	wait_owner(b, NAME, true);
	test_calls(b);
	test_driver(b);
	test_signals(b);
	test_monitor_sees_refusal(b);
	sd_bus_flush_close_unref(b);

	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	ASSERT_INT(waitpid(daemon, &status, WNOHANG), ==, 0);
	kill(daemon, SIGTERM);
	ASSERT_INT(waitpid(daemon, &status, 0), ==, daemon);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path) != 0)
		printf("# cannot remove %s\n", dir);
	ok_plan();
	return 0;
}
