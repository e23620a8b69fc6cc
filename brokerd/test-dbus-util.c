/* SPDX-License-Identifier: MIT */
/* test-dbus-util.c - the D-Bus tests' shared helpers (test-dbus-util.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "brokerd/dbus-front.h"
#include "brokerd/test-dbus-util.h"
#include "util/test.h"

static int n_tests;

void ok(const char *what)
{
	printf("ok %d - %s\n", ++n_tests, what);
	fflush(stdout);
}

void ok_plan(void)
{
	printf("1..%d\n", n_tests);
}

sd_bus *sdbus_connect(const char *address)
{
	sd_bus *b = NULL;
	int r;

	/*
	 * The socket file exists from bind() on, before brokerd's listen():
	 * on a loaded machine a connect can fall in between (ECONNREFUSED).
	 */
	for (int i = 0;; i++) {
		ASSERT_INT(sd_bus_new(&b), ==, 0);
		ASSERT_INT(sd_bus_set_address(b, address), >=, 0);
		ASSERT_INT(sd_bus_set_bus_client(b, 1), >=, 0);
		ASSERT_INT(sd_bus_negotiate_fds(b, 1), >=, 0);
		r = sd_bus_start(b);
		if (r != -ECONNREFUSED || i >= 100)
			break;
		b = sd_bus_flush_close_unref(b);
		usleep(20000);
	}
	ASSERT_INT(r, >=, 0);
	return b;
}

pid_t sdbus_serve(const char *address, const char *name, void (*setup)(sd_bus *b))
{
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0) {
		sd_bus *b;

		(void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves nothing behind */
		b = sdbus_connect(address);
		setup(b);
		ASSERT_INT(sd_bus_request_name(b, name, 0), >=, 0);
		for (;;) {
			int r = sd_bus_process(b, NULL);

			if (r < 0)
				_exit(2);
			if (r == 0 && sd_bus_wait(b, UINT64_MAX) < 0)
				_exit(3);
		}
	}
	return pid;
}

void wait_owner(sd_bus *b, const char *name, bool owned)
{
	for (int i = 0; i < 500; i++) {
		sd_bus_error e = SD_BUS_ERROR_NULL;
		sd_bus_message *reply = NULL;
		int has = 0;

		if (sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				       "NameHasOwner", &e, &reply, "s", name) >= 0)
			(void)sd_bus_message_read(reply, "b", &has);
		sd_bus_message_unref(reply);
		sd_bus_error_free(&e);
		if (!!has == owned)
			return;
		usleep(10000);
	}
	fprintf(stderr, "%s never got %s\n", name, owned ? "an owner" : "ownerless");
	exit(1);
}
