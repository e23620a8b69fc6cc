/* SPDX-License-Identifier: MIT */
/*
 * dbus-echo-service.c - brokerd-dbus-echo, a D-Bus service written with
 * sd-bus alone, for brokerd-dbus-bridge to call from native clients
 * (brokerctl call) through brokerd's D-Bus socket:
 *
 *   brokerd-dbus-echo ADDRESS NAME   owns NAME, serves /org/brokerdtest with
 *                                    org.brokerdtest.Echo1 until killed
 *
 * Methods: Echo(s) -> s; Add(ii) -> i; Who() -> s, the caller's unique name
 * as the bus said (SENDER); Fail() -> the error org.brokerdtest.Error.Failed;
 * Hang() never answers; Emit(ss member, text) broadcasts the signal
 * org.brokerdtest.Echo1.<member>(s text) from /org/brokerdtest; Owner() ->
 * s "dbus PID", so that a caller sees whom its call reached. Prints
 * "ready" once it owns NAME.
 *
 *   brokerd-dbus-echo --queue ADDRESS NAME
 *                                    the same, but waits in NAME's queue
 *                                    (RequestName with ALLOW_REPLACEMENT,
 *                                    queueing) and prints "ready" or
 *                                    "queued", then "NameAcquired NAME" and
 *                                    "NameLost NAME" as the bus says them
 *
 *   brokerd-dbus-echo --bench ADDRESS NAME N
 *                                    calls NAME's Peer.Ping N times, one
 *                                    after the other, and prints the mean
 *                                    round trip (a figure, not a test)
 *
 *   brokerd-dbus-echo --watch ADDRESS NAME
 *                                    asks the bus for NAME's signals and
 *                                    its NameOwnerChanged by match rules
 *                                    on the well-known name (AddMatch
 *                                    sender='NAME', as a client that
 *                                    subscribes before the name has an
 *                                    owner does), prints "watching", then
 *                                    one line per signal in the order the
 *                                    bus delivered them ("SENDER MEMBER
 *                                    ARGS..."); exits once NAME lost its
 *                                    owner
 *
 *   brokerd-dbus-echo --match ADDRESS RULE...
 *                                    adds each RULE as it is (AddMatch; an
 *                                    eavesdropper's with eavesdrop='true'),
 *                                    prints "matching", then one line per
 *                                    message it receives but the driver's
 *                                    ("TYPE SENDER DESTINATION MEMBER
 *                                    ARGS..."), until killed
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

static int method_echo(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s;
	int r = sd_bus_message_read(m, "s", &s);

	return r < 0 ? r : sd_bus_reply_method_return(m, "s", s);
}

static int method_add(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	int32_t a, b;
	int r = sd_bus_message_read(m, "ii", &a, &b);

	return r < 0 ? r : sd_bus_reply_method_return(m, "i", a + b);
}

static int method_who(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *sender = sd_bus_message_get_sender(m);

	return sd_bus_reply_method_return(m, "s", sender ? sender : "");
}

static int method_fail(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	return sd_bus_error_set(error, "org.brokerdtest.Error.Failed", "failed as asked");
}

static int method_hang(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	return 1; /* handled, never answered */
}

static int method_emit(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *member, *text;
	int r = sd_bus_message_read(m, "ss", &member, &text);

	if (r >= 0)
		r = sd_bus_emit_signal(sd_bus_message_get_bus(m), "/org/brokerdtest", "org.brokerdtest.Echo1", member,
				       "s", text);
	return r < 0 ? r : sd_bus_reply_method_return(m, "");
}

static int method_owner(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	char s[64];

	snprintf(s, sizeof(s), "dbus %d", (int)getpid());
	return sd_bus_reply_method_return(m, "s", s);
}

/* --queue: the driver's NameAcquired and NameLost to this connection, as they come. */
static int on_name_signal(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s = NULL;

	if ((sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameAcquired") ||
	     sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameLost")) &&
	    sd_bus_message_read_basic(m, 's', &s) > 0 && !strcmp(s, userdata)) {
		printf("%s %s\n", sd_bus_message_get_member(m), s);
		fflush(stdout);
	}
	return 0;
}

static const sd_bus_vtable vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Echo", "s", "s", method_echo, 0),
	SD_BUS_METHOD("Add", "ii", "i", method_add, 0),
	SD_BUS_METHOD("Who", "", "s", method_who, 0),
	SD_BUS_METHOD("Fail", "", "", method_fail, 0),
	SD_BUS_METHOD("Hang", "", "", method_hang, 0),
	SD_BUS_METHOD("Emit", "ss", "", method_emit, 0),
	SD_BUS_METHOD("Owner", "", "s", method_owner, 0),
	SD_BUS_VTABLE_END,
};

static int connect_bus(const char *address, sd_bus **ret)
{
	int r = sd_bus_new(ret);

	if (r >= 0)
		r = sd_bus_set_address(*ret, address);
	if (r >= 0)
		r = sd_bus_set_bus_client(*ret, 1);
	if (r >= 0)
		r = sd_bus_start(*ret);
	return r;
}

static int bench(const char *address, const char *name, int n)
{
	sd_bus *bus = NULL;
	struct timespec a, b;
	int r;

	r = connect_bus(address, &bus);
	/* one first, so that the bridge's caps and inbox are there before the clock runs */
	if (r >= 0)
		r = sd_bus_call_method(bus, name, "/", "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, "");
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; r >= 0 && i < n; i++)
		r = sd_bus_call_method(bus, name, "/", "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, "");
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (r < 0) {
		fprintf(stderr, "brokerd-dbus-echo: bench %s: %s\n", name, strerror(-r));
		return 1;
	}
	printf("bench: %s: %d calls, %.1f us per call\n", name, n,
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / n);
	sd_bus_flush_close_unref(bus);
	return 0;
}

/* --watch: every signal as it came, its string arguments after it; done when the name lost its owner. */
static int on_watched(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *name = userdata, *arg[3] = { "", "", "" }, *s;
	uint8_t type = 0;
	int n = 0;

	if (sd_bus_message_get_type(m, &type) < 0 || type != SD_BUS_MESSAGE_SIGNAL)
		return 0;
	printf("%s %s", sd_bus_message_get_sender(m), sd_bus_message_get_member(m));
	while (sd_bus_message_peek_type(m, NULL, NULL) > 0 && sd_bus_message_read_basic(m, 's', &s) > 0) {
		printf(" '%s'", s);
		if (n < 3)
			arg[n++] = s;
	}
	printf("\n");
	fflush(stdout);
	/* NameOwnerChanged(name, old, "") : its owner went */
	if (sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameOwnerChanged") && n == 3 &&
	    !strcmp(arg[0], name) && !*arg[2])
		exit(0);
	return 0;
}

/*
 * Connects, adds the match rules as they are (sd-bus's own matching would
 * filter by sender itself, and what an eavesdropper gets), says ready and
 * hands every message to filter until the bus goes.
 */
static int filter_run(const char *address, sd_bus_message_handler_t filter, void *u, char **rules, int n,
		      const char *ready)
{
	sd_bus *bus = NULL;
	int r = connect_bus(address, &bus);

	if (r >= 0)
		r = sd_bus_add_filter(bus, NULL, filter, u);
	for (int i = 0; r >= 0 && i < n; i++)
		r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
				       "AddMatch", NULL, NULL, "s", rules[i]);
	if (r < 0) {
		fprintf(stderr, "brokerd-dbus-echo: %s: %s\n", ready, strerror(-r));
		return 1;
	}
	printf("%s\n", ready);
	fflush(stdout);
	while ((r = sd_bus_process(bus, NULL)) >= 0)
		if (r == 0 && (r = sd_bus_wait(bus, UINT64_MAX)) < 0)
			break;
	fprintf(stderr, "brokerd-dbus-echo: %s\n", strerror(-r));
	return 1;
}

static int watch(const char *address, const char *name)
{
	char rule[2][512];

	snprintf(rule[0], sizeof(rule[0]), "type='signal',sender='%s'", name);
	snprintf(rule[1], sizeof(rule[1]),
		 "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='%s'", name);
	return filter_run(address, on_watched, (void *)name, (char *[]){ rule[0], rule[1] }, 2, "watching");
}

/* --match: every message that came but the driver's, as a line. */
static int on_matched(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	static const char *const types[] = { "invalid", "method_call", "method_return", "error", "signal" };
	const char *s, *sender = sd_bus_message_get_sender(m), *dest = sd_bus_message_get_destination(m),
		       *member = sd_bus_message_get_member(m);
	uint8_t type = 0;

	if (sd_bus_message_get_type(m, &type) < 0 || type >= 5 || (sender && !strcmp(sender, "org.freedesktop.DBus")))
		return 0;
	printf("%s %s %s %s", types[type], sender ? sender : "-", dest ? dest : "-", member ? member : "-");
	while (sd_bus_message_peek_type(m, NULL, NULL) > 0 && sd_bus_message_read_basic(m, 's', &s) > 0)
		printf(" '%s'", s);
	printf("\n");
	fflush(stdout);
	return 1; /* handled: sd-bus answers no call meant for somebody else */
}

int main(int argc, char **argv)
{
	sd_bus *bus = NULL;
	bool queue = false;
	int r;

	if (argc == 5 && !strcmp(argv[1], "--bench"))
		return bench(argv[2], argv[3], atoi(argv[4]));
	if (argc == 4 && !strcmp(argv[1], "--watch"))
		return watch(argv[2], argv[3]);
	if (argc >= 4 && !strcmp(argv[1], "--match"))
		return filter_run(argv[2], on_matched, NULL, argv + 3, argc - 3, "matching");
	if (argc == 4 && !strcmp(argv[1], "--queue")) {
		queue = true;
		argv++;
		argc--;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: brokerd-dbus-echo ADDRESS NAME\n");
		return 2;
	}
	r = connect_bus(argv[1], &bus);
	if (r >= 0)
		r = sd_bus_add_object_vtable(bus, NULL, "/org/brokerdtest", "org.brokerdtest.Echo1", vtable, NULL);
	if (r >= 0 && queue)
		r = sd_bus_add_filter(bus, NULL, on_name_signal, argv[2]);
	if (r >= 0)
		r = sd_bus_request_name(bus, argv[2],
					queue ? SD_BUS_NAME_QUEUE | SD_BUS_NAME_ALLOW_REPLACEMENT : 0);
	if (r < 0) {
		fprintf(stderr, "brokerd-dbus-echo: %s\n", strerror(-r));
		return 1;
	}
	printf("%s\n", r == 0 && queue ? "queued" : "ready");
	fflush(stdout);
	for (;;) {
		r = sd_bus_process(bus, NULL);
		if (r < 0)
			break;
		if (r > 0)
			continue;
		r = sd_bus_wait(bus, UINT64_MAX);
		if (r < 0)
			break;
	}
	fprintf(stderr, "brokerd-dbus-echo: %s\n", strerror(-r));
	return 1;
}
