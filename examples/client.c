/* SPDX-License-Identifier: MIT */
/*
 * client.c - request/reply: calling a service.
 *
 * Shows: a synchronous call with a timeout (and what its errors mean), an
 * asynchronous call whose reply arrives in a callback, driven by a plain
 * poll() loop on the bus's one fd, and reading an error reply.
 *
 *   client NAME MEMBER [ARG [COUNT]]   COUNT synchronous calls (default 1),
 *                                       then one asynchronous call
 *
 * e.g. `client org.brokerd.example.Pool Work job 6` against a worker pool,
 * or `client org.brokerd.example.Creds Whoami` against the credential checker.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brokerd/brokerd.h>

#define TIMEOUT_USEC (5ULL * 1000000ULL)

static void print_reply(const char *how, brokerd_msg *reply, int r)
{
	const void *body = "";
	size_t size = 0;

	if (reply)
		brokerd_msg_get_body(reply, &body, &size);
	if (r == 0)
		printf("client: %s reply from %s: %.*s\n", how, brokerd_msg_get_sender(reply), (int)size,
		       (const char *)body);
	else if (r == -EREMOTEIO)
		printf("client: %s error from %s: %s: %.*s\n", how, brokerd_msg_get_sender(reply),
		       brokerd_msg_get_error_name(reply), (int)size, (const char *)body);
	else
		printf("client: %s call failed: %s\n", how, strerror(-r));
	fflush(stdout);
}

static int on_reply(brokerd_msg *reply, int error, void *userdata)
{
	int *done = userdata;

	print_reply("async", reply, error);
	*done = error == 0 ? 1 : 2;
	return 0;
}

int main(int argc, char **argv)
{
	const char *arg = argc > 3 ? argv[3] : "";
	int count = argc > 4 ? atoi(argv[4]) : 1, failed = 0, done = 0;
	brokerd_bus *bus = NULL;
	int r;

	if (argc < 3) {
		fprintf(stderr, "usage: client NAME MEMBER [ARG [COUNT]]\n");
		return 2;
	}
	r = brokerd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "client: connect: %s\n", strerror(-r));
		return 1;
	}
	for (int i = 0; i < count; i++) {
		brokerd_msg *reply = NULL;
		char body[256];

		snprintf(body, sizeof(body), "%s#%d", arg, i + 1);
		r = brokerd_bus_call(bus, argv[1], argv[2], body, strlen(body), TIMEOUT_USEC, &reply);
		print_reply("sync", reply, r);
		failed += r < 0;
		brokerd_msg_unref(reply);
	}

	r = brokerd_bus_call_async(bus, NULL, argv[1], argv[2], arg, strlen(arg), TIMEOUT_USEC, on_reply,
				   &done);
	if (r < 0) {
		print_reply("async", NULL, r);
		failed++;
	}
	while (r >= 0 && !done) {
		struct pollfd p = { .fd = brokerd_bus_get_fd(bus), .events = POLLIN };

		poll(&p, 1, -1);
		if (brokerd_bus_process(bus) < 0)
			break;
	}
	failed += done == 2;
	brokerd_bus_close(bus);
	return failed ? 1 : 0;
}
