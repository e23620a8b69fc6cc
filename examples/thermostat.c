/* SPDX-License-Identifier: MIT */
/*
 * thermostat.c - a service organised as an object, the way D-Bus services
 * are: org.brokerd.example.Thermostat serves the object
 * /org/brokerd/example/Thermostat with the interface
 * org.brokerd.example.Thermostat1.
 *
 * Shows: a vtable of methods (one with structured arguments, a(sd) in,
 * (ud) out), properties (one read-only that changes by itself and tells
 * its subscribers with PropertiesChanged, one writable) and a signal;
 * typed replies with brokerd_msg_return(); errors as D-Bus error names.
 * The library answers Introspect, Get/GetAll/Set and Ping for it.
 *
 *   thermostat [SECONDS]   serve for SECONDS (default 20) or until Quit;
 *                          the temperature moves half a degree towards
 *                          the target every 200 ms
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <brokerd/brokerd.h>

#define NAME  "org.brokerd.example.Thermostat"
#define PATH  "/org/brokerd/example/Thermostat"
#define IFACE "org.brokerd.example.Thermostat1"

struct thermostat {
	brokerd_bus *bus;
	double temperature, target;
	unsigned int n_schedule;
	bool quit;
};

/* SetSchedule(a(sd) entries) -> (u count, d mean): entries of a time ("07:00") and a target. */
static int on_set_schedule(brokerd_msg *call, void *userdata)
{
	struct thermostat *t = userdata;
	const char *when;
	double target, sum = 0;
	unsigned int n = 0;
	int k;

	k = brokerd_msg_enter_container(call, 'a', "(sd)");
	if (k < 0)
		return k;
	while ((k = brokerd_msg_read(call, "(sd)", &when, &target)) > 0) {
		if (target < 5 || target > 30)
			return brokerd_msg_reply_errorf(call, "org.brokerd.example.Error.OutOfRange",
							"%.1f at %s is not between 5 and 30", target, when);
		printf("thermostat: at %s: %.1f\n", when, target);
		sum += target;
		n++;
	}
	if (k < 0)
		return k;
	t->n_schedule = n;
	/* the schedule's new length is told by invalidation: ask for it if you care */
	(void)brokerd_bus_emit_properties_changed(t->bus, NAME, PATH, IFACE,
						  (const char *const[]){ "ScheduleLength", NULL });
	return brokerd_msg_return(call, "(ud)", n, n ? sum / n : 0.0);
}

static int on_quit(brokerd_msg *call, void *userdata)
{
	struct thermostat *t = userdata;

	t->quit = true;
	return 0; /* declared NoReply: callers send it without waiting (else the library would answer) */
}

static int get_temperature(brokerd_bus *bus, const char *path, const char *interface, const char *property,
			   brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;

	return brokerd_msg_append(m, "d", t->temperature);
}

static int get_target(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;

	return brokerd_msg_append(m, "d", t->target);
}

/* A Set of Target: the library has checked that the value is a double. */
static int set_target(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;
	double v;
	int k = brokerd_msg_read(m, "d", &v);

	if (k < 0)
		return k;
	if (v < 5 || v > 30)
		return -EINVAL; /* InvalidArgs for the caller */
	t->target = v;
	printf("thermostat: target %.1f\n", v);
	return 0;
}

static int get_schedule_length(brokerd_bus *bus, const char *path, const char *interface,
			       const char *property, brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;

	return brokerd_msg_append(m, "u", t->n_schedule);
}

static const struct brokerd_vtable thermostat_vtable[] = {
	BROKERD_METHOD_NAMED("SetSchedule", "a(sd)", "entries", "(ud)", "summary", on_set_schedule, 0),
	BROKERD_METHOD_NAMED("Quit", "", NULL, "", NULL, on_quit, BROKERD_METHOD_NO_REPLY),
	BROKERD_PROPERTY("Temperature", "d", get_temperature, BROKERD_PROPERTY_EMITS_CHANGE),
	BROKERD_WRITABLE_PROPERTY("Target", "d", get_target, set_target, BROKERD_PROPERTY_EMITS_CHANGE),
	BROKERD_PROPERTY("ScheduleLength", "u", get_schedule_length, BROKERD_PROPERTY_EMITS_INVALIDATION),
	BROKERD_SIGNAL_NAMED("Reached", "d", "temperature", 0),
	BROKERD_VTABLE_END_ENTRY,
};

static uint64_t now_msec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Every tick the temperature moves towards the target; subscribers hear each change. */
static void tick(struct thermostat *t)
{
	const char *const changed[] = { "Temperature", NULL };
	double step = t->target > t->temperature ? 0.5 : -0.5;
	brokerd_msg *sig = NULL;

	if (t->temperature == t->target)
		return;
	t->temperature = (step > 0 ? t->temperature + step > t->target : t->temperature + step < t->target) ?
				 t->target :
				 t->temperature + step;
	(void)brokerd_bus_emit_properties_changed(t->bus, NAME, PATH, IFACE, changed);
	if (t->temperature == t->target &&
	    brokerd_msg_new_signal(t->bus, &sig, NAME, PATH, IFACE, "Reached") >= 0) {
		if (brokerd_msg_append(sig, "d", t->temperature) >= 0)
			(void)brokerd_bus_send(t->bus, sig);
		brokerd_msg_unref(sig);
	}
}

int main(int argc, char **argv)
{
	struct thermostat t = { .temperature = 18, .target = 18 };
	uint64_t end = now_msec() + (uint64_t)(argc > 1 ? atoi(argv[1]) : 20) * 1000, next;
	int r;

	r = brokerd_bus_open_system(&t.bus);
	if (r < 0) {
		fprintf(stderr, "thermostat: connect: %s\n", strerror(-r));
		return 1;
	}
	r = brokerd_bus_add_object(t.bus, NULL, PATH, IFACE, thermostat_vtable, &t);
	if (r >= 0)
		r = brokerd_bus_request_name(t.bus, NAME, BROKERD_NAME_DO_NOT_QUEUE);
	if (r < 0) {
		fprintf(stderr, "thermostat: %s\n", strerror(-r));
		brokerd_bus_close(t.bus);
		return 1;
	}
	printf("thermostat: serving %s on %s\n", PATH, NAME);
	fflush(stdout);
	next = now_msec() + 200;
	while (!t.quit && now_msec() < end) {
		r = brokerd_bus_process(t.bus);
		if (r < 0)
			break;
		if (r > 0)
			continue;
		if (now_msec() >= next) {
			tick(&t);
			next = now_msec() + 200;
		}
		(void)brokerd_bus_wait(t.bus, 50000);
		fflush(stdout);
	}
	printf("thermostat: %s at %.1f\n", t.quit ? "asked to quit" : "time is up", t.temperature);
	brokerd_bus_close(t.bus);
	return r < 0 ? 1 : 0;
}
