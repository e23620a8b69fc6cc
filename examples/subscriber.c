/* SPDX-License-Identifier: MIT */
/*
 * subscriber.c - receiving signals, with a member filter.
 *
 * Shows: subscribing to a name's signals (the name need not be owned yet),
 * filtering on the member, learning who sent each signal from the kernel
 * (sender's unique name, uid, pid: not something the sender can fake), and
 * the blocking brokerd_bus_run() loop. Run several of these next to one
 * `publisher`: each gets every signal.
 *
 *   subscriber [FILTER]     default "Temperature,Done"; exits on Done
 */
#include <stdio.h>
#include <string.h>

#include <brokerd/brokerd.h>

#define NAME "org.brokerd.example.Sensor"

static int on_signal(brokerd_msg *m, void *userdata)
{
	brokerd_bus *bus = userdata;
	struct brokerd_creds c = { 0 };
	const void *body;
	size_t size;

	brokerd_msg_get_body(m, &body, &size);
	brokerd_msg_get_creds(m, &c);
	printf("subscriber: %s from %s (uid %u, pid %d): %.*s\n", brokerd_msg_get_member(m),
	       brokerd_msg_get_sender(m), (unsigned)c.uid, (int)c.pid, (int)size, (const char *)body);
	fflush(stdout);
	if (strcmp(brokerd_msg_get_member(m), "Done") == 0)
		brokerd_bus_exit(bus, 0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *filter = argc > 1 ? argv[1] : "Temperature,Done";
	brokerd_bus *bus = NULL;
	int r;

	r = brokerd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "subscriber: connect: %s\n", strerror(-r));
		return 1;
	}
	r = brokerd_bus_subscribe(bus, NULL, NAME, filter, on_signal, bus);
	if (r < 0) {
		fprintf(stderr, "subscriber: subscribe: %s\n", strerror(-r));
		return 1;
	}
	printf("subscriber: listening to %s (%s)\n", NAME, filter);
	fflush(stdout);
	r = brokerd_bus_run(bus);
	brokerd_bus_close(bus);
	return r < 0 ? 1 : 0;
}
