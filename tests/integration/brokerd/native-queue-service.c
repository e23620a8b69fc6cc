/* SPDX-License-Identifier: MIT */
/*
 * native-queue-service.c - brokerd-native-queue, a libbrokerd service that
 * shares a name's owner queue with D-Bus clients (brokerd-dbus-queue):
 *
 *   brokerd-native-queue NAME FLAGS  requests NAME with FLAGS (the
 *                                    BROKERD_NAME_* bits) and prints
 *                                    "primary" or "queued", then one line
 *                                    "owner NAME OLD NEW" per change of
 *                                    NAME's owner the bus reports, and
 *                                    "signal SENDER MEMBER" per signal sent
 *                                    to it alone
 *
 * Methods of NAME: Owner() -> s "native PID", so that a caller sees whom its
 * call reached; Requeue() releases NAME and requests it again with FLAGS
 * (behind whoever waited), answering s "primary" or "queued".
 *
 *   brokerd-native-queue --listen RULE
 *                                    prints its unique name ("listening
 *                                    :1.N"), then "signal SENDER MEMBER" for
 *                                    every signal sent to it alone and every
 *                                    one RULE (a match rule) matches
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <brokerd/brokerd.h>

static const char *name;
static unsigned int flags;

/* A dbus1 body of signature "s" (native byte order). */
static int reply_s(brokerd_msg *call, const char *s)
{
	char body[256];
	uint32_t len = (uint32_t)strlen(s);

	if (len + 5 > sizeof(body))
		return -EINVAL;
	memcpy(body, &len, 4);
	memcpy(body + 4, s, len + 1);
	return brokerd_msg_reply_data(call, "s", body, len + 5);
}

static int on_owner(brokerd_msg *call, void *userdata)
{
	char s[64];

	snprintf(s, sizeof(s), "native %d", (int)getpid());
	return reply_s(call, s);
}

static const char *request(brokerd_bus *bus)
{
	int r = brokerd_bus_request_name(bus, name, flags);

	if (r < 0) {
		fprintf(stderr, "brokerd-native-queue: %s: %s\n", name, strerror(-r));
		exit(1);
	}
	return r == BROKERD_NAME_IN_QUEUE ? "queued" : "primary";
}

static int on_requeue(brokerd_msg *call, void *userdata)
{
	brokerd_bus *bus = userdata;
	const char *state;
	int r = brokerd_bus_release_name(bus, name);

	if (r < 0)
		return r;
	state = request(bus);
	printf("%s\n", state);
	fflush(stdout);
	return reply_s(call, state);
}

static int on_owner_changed(brokerd_bus *bus, const char *n, const char *old_owner, const char *new_owner,
			    void *userdata)
{
	printf("owner %s '%s' '%s'\n", n, old_owner, new_owner);
	fflush(stdout);
	return 0;
}

static int on_signal(brokerd_msg *msg, void *userdata)
{
	printf("signal %s %s\n", brokerd_msg_get_sender(msg), brokerd_msg_get_member(msg));
	fflush(stdout);
	return 0;
}

/* Serves until the bus ends; the exit status. */
static int run(brokerd_bus *bus)
{
	int r = brokerd_bus_run(bus);

	brokerd_bus_close(bus);
	return r < 0 ? 1 : 0;
}

static int listen_signals(const char *rule)
{
	brokerd_bus *bus = NULL;
	const char *unique = NULL;
	int r = brokerd_bus_open_system(&bus);

	if (r >= 0)
		r = brokerd_bus_subscribe(bus, NULL, NULL, NULL, on_signal, NULL);
	if (r >= 0)
		r = brokerd_bus_add_match(bus, NULL, rule, on_signal, NULL);
	if (r >= 0)
		r = brokerd_bus_get_unique_name(bus, &unique);
	if (r < 0) {
		fprintf(stderr, "brokerd-native-queue: --listen: %s\n", strerror(-r));
		return 1;
	}
	printf("listening %s\n", unique);
	fflush(stdout);
	return run(bus);
}

int main(int argc, char **argv)
{
	brokerd_bus *bus = NULL;
	int r;

	if (argc == 3 && !strcmp(argv[1], "--listen"))
		return listen_signals(argv[2]);
	if (argc != 3) {
		fprintf(stderr, "usage: brokerd-native-queue NAME FLAGS\n");
		return 2;
	}
	name = argv[1];
	flags = (unsigned int)strtoul(argv[2], NULL, 0);
	r = brokerd_bus_open_system(&bus);
	if (r >= 0)
		r = brokerd_bus_watch_name(bus, NULL, name, on_owner_changed, NULL);
	if (r >= 0)
		r = brokerd_bus_subscribe(bus, NULL, NULL, NULL, on_signal, NULL);
	if (r >= 0)
		r = brokerd_bus_add_method(bus, NULL, name, "Owner", on_owner, NULL);
	if (r >= 0)
		r = brokerd_bus_add_method(bus, NULL, name, "Requeue", on_requeue, bus);
	if (r < 0) {
		fprintf(stderr, "brokerd-native-queue: %s\n", strerror(-r));
		return 1;
	}
	printf("%s\n", request(bus));
	fflush(stdout);
	return run(bus);
}
