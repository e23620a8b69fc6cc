/* SPDX-License-Identifier: MIT */
/*
 * worker.c - a worker pool: several processes serving one name.
 *
 * Shows: requesting a name with BROKERD_NAME_POOL so that every worker, the
 * primary owner and the queued ones alike, receives calls; the name's
 * multicast channel hands each call to exactly one worker, round-robin.
 * Also: a handler per member, replying, and an sd-event loop (a bus plugs
 * into one with brokerd_bus_attach_event()).
 *
 *   worker [ID]      serves org.brokerd.example.Pool: Work ARG -> "worker ID
 *                    (pid P) did ARG"; Quit -> the worker exits
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <brokerd/brokerd.h>

#define NAME "org.brokerd.example.Pool"

static const char *id = "1";
static sd_event *event;

static int on_work(brokerd_msg *call, void *userdata)
{
	char reply[512];
	const void *body;
	size_t size;

	brokerd_msg_get_body(call, &body, &size);
	snprintf(reply, sizeof(reply), "worker %s (pid %d) did %.*s", id, (int)getpid(),
		 (int)(size > 256 ? 256 : size), (const char *)body);
	printf("worker %s: Work from %s: %.*s\n", id, brokerd_msg_get_sender(call), (int)size,
	       (const char *)body);
	fflush(stdout);
	return brokerd_msg_reply(call, reply, strlen(reply));
}

static int on_quit(brokerd_msg *call, void *userdata)
{
	brokerd_msg_reply(call, "bye", 3);
	/* take no further calls: they stay with the other workers */
	brokerd_bus_exit(userdata, 0);
	sd_event_exit(event, 0);
	return 0;
}

int main(int argc, char **argv)
{
	brokerd_bus *bus = NULL;
	int r;

	if (argc > 1)
		id = argv[1];
	if (sd_event_default(&event) < 0)
		return 1;
	r = brokerd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "worker: connect: %s\n", strerror(-r));
		return 1;
	}
	brokerd_bus_add_method(bus, NULL, NAME, "Work", on_work, NULL);
	brokerd_bus_add_method(bus, NULL, NAME, "Quit", on_quit, bus);
	r = brokerd_bus_request_name(bus, NAME, BROKERD_NAME_POOL);
	if (r < 0) {
		fprintf(stderr, "worker: cannot serve %s: %s\n", NAME, strerror(-r));
		return 1;
	}
	printf("worker %s: serving %s (%s)\n", id, NAME,
	       r == BROKERD_NAME_PRIMARY_OWNER ? "primary owner" : "pool member");
	fflush(stdout);
	r = brokerd_bus_attach_event(bus, event, 0);
	if (r >= 0)
		r = sd_event_loop(event);
	brokerd_bus_close(bus);
	sd_event_unref(event);
	return r < 0 ? 1 : 0;
}
