/* SPDX-License-Identifier: MIT */
/*
 * inspector.c - a client of an object: the thermostat example's.
 *
 * Shows: introspecting an object (the XML of
 * org.freedesktop.DBus.Introspectable, listed here by element); reading
 * and setting properties through org.freedesktop.DBus.Properties;
 * subscribing to PropertiesChanged and reading its a{sv}; calling a method
 * with structured arguments built printf-like and reading a struct reply
 * scanf-like; a D-Bus error reply; a call that expects no reply.
 *
 *   inspector [NAME [PATH]]   (default: the thermostat example)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brokerd/brokerd.h>

#define IFACE	   "org.brokerd.example.Thermostat1"
#define PROPERTIES "org.freedesktop.DBus.Properties"
#define TIMEOUT	   (5ULL * 1000000ULL)

static const char *name = "org.brokerd.example.Thermostat", *path = "/org/brokerd/example/Thermostat";

/* Calls, and prints what went wrong if it did (a D-Bus error: its name and message). */
static int call_checked(brokerd_bus *bus, brokerd_msg *call, brokerd_msg **reply, const char *what)
{
	const char *text = "";
	int r = brokerd_bus_call_msg(bus, call, TIMEOUT, reply);

	if (r == -EREMOTEIO) {
		(void)brokerd_msg_read(*reply, "s", &text);
		printf("inspector: %s: %s: %s\n", what, brokerd_msg_get_error_name(*reply), text);
	} else if (r < 0) {
		printf("inspector: %s: %s\n", what, strerror(-r));
	}
	return r;
}

/* Lists the elements of the Introspect XML that name an interface or a member. */
static int introspect(brokerd_bus *bus)
{
	brokerd_msg *call = NULL, *reply = NULL;
	const char *xml, *p;
	int r;

	r = brokerd_msg_new_call(bus, &call, name, path, "org.freedesktop.DBus.Introspectable", "Introspect");
	if (r < 0)
		return r;
	r = call_checked(bus, call, &reply, "Introspect");
	brokerd_msg_unref(call);
	if (r >= 0 && brokerd_msg_read(reply, "s", &xml) > 0) {
		/* a real client would use an XML parser; the elements are enough here */
		for (p = strchr(xml, '<'); p; p = strchr(p + 1, '<')) {
			static const char *const kinds[] = { "interface", "method", "property", "signal" };

			for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
				size_t n = strlen(kinds[i]);
				const char *v;

				if (strncmp(p + 1, kinds[i], n) != 0 ||
				    strncmp(p + 1 + n, " name=\"", 7) != 0)
					continue;
				v = p + 1 + n + 7;
				printf("inspector: %s%s %.*s\n", i ? "  " : "", kinds[i],
				       (int)strcspn(v, "\""), v);
			}
		}
	}
	brokerd_msg_unref(reply);
	return r;
}

static int get_double(brokerd_bus *bus, const char *property, double *ret)
{
	brokerd_msg *call = NULL, *reply = NULL;
	int r;

	r = brokerd_msg_new_call(bus, &call, name, path, PROPERTIES, "Get");
	if (r >= 0)
		r = brokerd_msg_append(call, "ss", IFACE, property);
	if (r >= 0)
		r = call_checked(bus, call, &reply, "Get");
	/* the value comes in a variant, whose type we name when reading it */
	if (r >= 0)
		r = brokerd_msg_read(reply, "v", "d", ret);
	brokerd_msg_unref(call);
	brokerd_msg_unref(reply);
	return r < 0 ? r : 0;
}

static int set_target(brokerd_bus *bus, double target)
{
	brokerd_msg *call = NULL, *reply = NULL;
	char what[64];
	int r;

	snprintf(what, sizeof(what), "Set Target %.1f", target);
	r = brokerd_msg_new_call(bus, &call, name, path, PROPERTIES, "Set");
	if (r >= 0)
		r = brokerd_msg_append(call, "ssv", IFACE, "Target", "d", target);
	if (r >= 0)
		r = call_checked(bus, call, &reply, what);
	brokerd_msg_unref(call);
	brokerd_msg_unref(reply);
	return r;
}

static int set_schedule(brokerd_bus *bus)
{
	brokerd_msg *call = NULL, *reply = NULL;
	uint32_t n;
	double mean;
	int r;

	r = brokerd_msg_new_call(bus, &call, name, path, IFACE, "SetSchedule");
	/* an array is its count, then each struct's fields */
	if (r >= 0)
		r = brokerd_msg_append(call, "a(sd)", 3U, "06:30", 21.0, "08:00", 19.0, "22:00", 17.5);
	if (r >= 0)
		r = call_checked(bus, call, &reply, "SetSchedule");
	if (r >= 0 && brokerd_msg_read(reply, "(ud)", &n, &mean) > 0)
		printf("inspector: schedule of %u entries, mean %.2f\n", n, mean);
	brokerd_msg_unref(call);
	brokerd_msg_unref(reply);
	return r;
}

static int heard;

/* PropertiesChanged: s interface, a{sv} changed values, as invalidated names. */
static int on_properties_changed(brokerd_msg *m, void *userdata)
{
	const char *interface, *property;
	double v;

	if (strcmp(brokerd_msg_get_path(m), path) != 0 || brokerd_msg_read(m, "s", &interface) <= 0 ||
	    brokerd_msg_enter_container(m, 'a', "{sv}") <= 0)
		return 0;
	while (brokerd_msg_read(m, "{sv}", &property, "d", &v) > 0) {
		printf("inspector: %s.%s changed to %.1f\n", interface, property, v);
		heard += strcmp(property, "Temperature") == 0;
	}
	(void)brokerd_msg_exit_container(m);
	if (brokerd_msg_enter_container(m, 'a', "s") > 0)
		while (brokerd_msg_read(m, "s", &property) > 0)
			printf("inspector: %s.%s changed (read it to know)\n", interface, property);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	brokerd_bus *bus = NULL;
	brokerd_msg *call = NULL;
	double temperature = 0;
	int r;

	if (argc > 1)
		name = argv[1];
	if (argc > 2)
		path = argv[2];
	r = brokerd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "inspector: connect: %s\n", strerror(-r));
		return 1;
	}
	r = brokerd_bus_subscribe(bus, NULL, name, "PropertiesChanged", on_properties_changed, NULL);
	if (r >= 0)
		r = introspect(bus);
	if (r >= 0)
		r = get_double(bus, "Temperature", &temperature);
	if (r >= 0) {
		printf("inspector: Temperature is %.1f\n", temperature);
		/* refused by the service's setter: InvalidArgs */
		(void)set_target(bus, 99);
		r = set_target(bus, 20);
	}
	if (r >= 0)
		r = set_schedule(bus);
	/* the temperature climbs half a degree a tick: four changes to 20 */
	for (int i = 0; r >= 0 && heard < 4 && i < 100; i++) {
		r = brokerd_bus_process(bus);
		if (r == 0)
			r = brokerd_bus_wait(bus, 100000);
	}
	if (r >= 0 && heard < 4) {
		printf("inspector: heard only %d changes\n", heard);
		r = -ETIMEDOUT;
	}
	/* Quit is declared NoReply: sent without waiting for an answer */
	if (r >= 0) {
		r = brokerd_msg_new_call(bus, &call, name, path, IFACE, "Quit");
		if (r >= 0)
			r = brokerd_bus_send(bus, call);
		brokerd_msg_unref(call);
		if (r >= 0)
			printf("inspector: asked the thermostat to quit\n");
	}
	brokerd_bus_close(bus);
	return r < 0 ? 1 : 0;
}
