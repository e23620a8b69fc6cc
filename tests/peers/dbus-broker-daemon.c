/* SPDX-License-Identifier: MIT */
/*
 * dbus-broker-daemon - dbus-broker behind dbus-daemon's command line, so
 * that the D-Bus peers' test suites, which start "a dbus-daemon" through
 * DBUS_TEST_DAEMON (libdbus) or G_TEST_DBUS_DAEMON (GLib), can run against
 * dbus-broker as they run against dbus-daemon.
 *
 * The supervisor is brokerd-dbus-daemon's (brokerd/dbus-daemon-cli.h):
 * it listens, waits for READY=1, prints the address and pid, passes
 * signals on and cleans up. dbus-broker-launch reads the same XML
 * configuration but never listens by itself: it takes the socket the way
 * systemd passes one, and says READY=1 once it has read the
 * configuration. It also joins the bus it serves as a client (--scope
 * user, DBUS_SESSION_BUS_ADDRESS pointing at the new bus): no other bus is
 * needed, and there is no systemd to activate services through, which the
 * expected failures of tests/peers say.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/dbus-daemon-cli.h"

static void exec_dbus_broker(int sock, const char *address, const char *notify, const char *config,
			     const char *runtime_dir)
{
	char pid[32];

	(void)runtime_dir;
	/* systemd's socket passing: fd 3, named for this very process */
	if (sock != 3 && (dup2(sock, 3) < 0 || close(sock) < 0))
		_exit(127);
	(void)fcntl(3, F_SETFD, 0);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	unsetenv("LISTEN_FDNAMES");
	setenv("NOTIFY_SOCKET", notify, 1);
	setenv("DBUS_SESSION_BUS_ADDRESS", address, 1);
	execlp("dbus-broker-launch", "dbus-broker-launch", "--scope", "user", "--config-file", config,
	       (char *)NULL);
	fprintf(stderr, "dbus-broker-daemon: cannot run dbus-broker-launch: %s\n", strerror(errno));
}

int main(int argc, char **argv)
{
	return dbus_daemon_cli_run(argc, argv, "dbus-broker-daemon", exec_dbus_broker);
}
