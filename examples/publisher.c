/* SPDX-License-Identifier: MIT */
/*
 * publisher.c - emitting signals (broadcast).
 *
 * Shows: owning a well-known name, then emitting signals on it. Every
 * subscriber (run several `subscriber` processes) receives every signal
 * emitted after it subscribed; the signals go through the name's broadcast
 * channel straight to them, brokerd is not in the path.
 *
 *   publisher [COUNT [INTERVAL_MS]]     emits COUNT Temperature signals
 *                                        (default 10, every 200 ms), then a
 *                                        Done signal
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <brokerd/brokerd.h>

#define NAME "org.brokerd.example.Sensor"

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 10;
	int interval_ms = argc > 2 ? atoi(argv[2]) : 200;
	brokerd_bus *bus = NULL;
	int r;

	r = brokerd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "publisher: connect: %s\n", strerror(-r));
		return 1;
	}
	/* only the owner of a name may emit its signals */
	r = brokerd_bus_request_name(bus, NAME, BROKERD_NAME_DO_NOT_QUEUE);
	if (r != BROKERD_NAME_PRIMARY_OWNER) {
		fprintf(stderr, "publisher: cannot own %s: %s\n", NAME, r < 0 ? strerror(-r) : "queued");
		return 1;
	}
	for (int i = 1; i <= count; i++) {
		char body[64];

		snprintf(body, sizeof(body), "reading %d: %d.%d C", i, 20 + i % 5, i % 10);
		r = brokerd_bus_emit_signal(bus, NAME, "Temperature", body, strlen(body));
		if (r < 0)
			fprintf(stderr, "publisher: emit: %s\n", strerror(-r));
		else
			printf("publisher: emitted %s\n", body);
		fflush(stdout);
		usleep((useconds_t)interval_ms * 1000);
	}
	brokerd_bus_emit_signal(bus, NAME, "Done", NULL, 0);
	printf("publisher: done\n");
	brokerd_bus_close(bus);
	return 0;
}
