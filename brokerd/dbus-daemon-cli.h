/* SPDX-License-Identifier: MIT */
/*
 * dbus-daemon-cli.h - dbus-daemon's command line in front of another bus
 * daemon: what brokerd-dbus-daemon is made of, shared with the peers'
 * test launcher for dbus-broker (tests/peers/dbus-broker-daemon.c).
 */
#ifndef BROKERD_DBUS_DAEMON_CLI_H
#define BROKERD_DBUS_DAEMON_CLI_H

#include <stdbool.h>

/*
 * Starts the daemon in the child of the supervisor, never returns: sock
 * is the listening socket, address the one printed for clients, notify
 * the NOTIFY_SOCKET to say READY=1 on, config the configuration file,
 * runtime_dir a private directory (removed with what is in it at the end).
 */
typedef void (*dbus_daemon_exec_fn)(int sock, const char *address, const char *notify, const char *config,
				    const char *runtime_dir);

/*
 * Takes dbus-daemon's options (--config-file, --session, --system,
 * --address, --print-address[=FD], --print-pid[=FD], --fork/--nofork, and
 * ignores --nopidfile, --nosyslog, --syslog, --syslog-only; sets
 * dbus_daemon_cli_systemd_activation for --systemd-activation), listens where --address or the configuration's
 * first unix: <listen> asks, runs exec_daemon in a child, prints the
 * address and pid once the daemon said READY=1, passes SIGTERM, SIGINT and
 * SIGHUP on and exits with the daemon's status. prog names it in messages.
 */
/* --systemd-activation was given: activation asks the bus's org.freedesktop.systemd1. */
extern bool dbus_daemon_cli_systemd_activation;

int dbus_daemon_cli_run(int argc, char **argv, const char *prog, dbus_daemon_exec_fn exec_daemon);

#endif
