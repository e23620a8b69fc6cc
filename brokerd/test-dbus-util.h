/* SPDX-License-Identifier: MIT */
/*
 * test-dbus-util.h - what the D-Bus end-to-end tests (test-dbus.c,
 * test-dbus-access.c) share: their TAP lines, sd-bus connections to the
 * socket under test, a server process that owns a name, and waiting for a
 * name's owner.
 */
#ifndef BROKERD_TEST_DBUS_UTIL_H
#define BROKERD_TEST_DBUS_UTIL_H

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

/* "ok N - what"; ok_plan() prints the "1..N" that ends the output. */
void ok(const char *what);
void ok_plan(void);
/* A bus client on address, with fds, retried while brokerd is not listening yet. */
sd_bus *sdbus_connect(const char *address);
/*
 * A child that connects to address, lets setup add its objects, owns name
 * and serves until killed (it dies with the test).
 */
pid_t sdbus_serve(const char *address, const char *name, void (*setup)(sd_bus *b));
/* Waits until name has an owner (or none, if owned is false); fails the test after 5 s. */
void wait_owner(sd_bus *b, const char *name, bool owned);

#endif
