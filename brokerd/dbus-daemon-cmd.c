/* SPDX-License-Identifier: MIT */
/*
 * brokerd-dbus-daemon - a private brokerd behind dbus-daemon's command
 * line, for what starts "a dbus-daemon" by itself: test suites
 * (DBUS_TEST_DAEMON, G_TEST_DBUS_DAEMON, GTestDBus), session buses, scripts.
 * See brokerd-dbus-daemon(1).
 *
 * A small supervisor, not a mode of brokerd: brokerd keeps one command line
 * and one way to start (systemd's), and this program gives it what systemd
 * would. The supervisor (socket, readiness, signals, clean-up) is
 * dbus-daemon-cli.c; here is only how brokerd is started behind it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brokerd/dbus-daemon-cli.h"

#ifndef BROKERD_PATH
#define BROKERD_PATH "/usr/libexec/brokerd"
#endif

/*
 * In the supervisor's child: brokerd with the socket passed as systemd
 * passes brokerd-dbus.socket's (fd name "dbus"), its control socket and
 * (empty) policy and service directories in the private runtime
 * directory, so that only the XML configuration decides, and no activator:
 * services are started by their Exec= lines, as dbus-daemon starts them
 * (with --systemd-activation: asked of the systemd that is on the bus).
 */
static void exec_brokerd(int sock, const char *address, const char *notify, const char *config_file,
			 const char *runtime_dir)
{
	const char *brokerd = getenv("BROKERD_PATH") ?: BROKERD_PATH;
	char ctrl[PATH_MAX + 16], pdir[PATH_MAX + 16], sdir[PATH_MAX + 16], config[PATH_MAX + 32], pid[32];

	(void)address;
	/* systemd's socket passing: fd 3, named for this very process */
	if (sock != 3 && (dup2(sock, 3) < 0 || close(sock) < 0))
		_exit(127);
	(void)fcntl(3, F_SETFD, 0);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	setenv("LISTEN_FDNAMES", "dbus", 1);
	setenv("NOTIFY_SOCKET", notify, 1);
	snprintf(ctrl, sizeof(ctrl), "%s/socket", runtime_dir);
	snprintf(pdir, sizeof(pdir), "%s/policy.d", runtime_dir);
	snprintf(sdir, sizeof(sdir), "%s/services", runtime_dir);
	if (mkdir(pdir, 0755) < 0 || mkdir(sdir, 0755) < 0)
		_exit(127);
	snprintf(config, sizeof(config), "--dbus-config=%s", config_file);
	/* --activator="": no systemd unit is started for this bus, services run by their Exec= */
	execl(brokerd, brokerd, "--address", ctrl, "--state", "", "--policy-dir", pdir, "--service-dir", sdir,
	      "--no-channels", "--activator=", config,
	      dbus_daemon_cli_systemd_activation ? "--dbus-systemd-activation" : (char *)NULL, (char *)NULL);
	fprintf(stderr, "brokerd-dbus-daemon: cannot run %s: %s\n", brokerd, strerror(errno));
}

int main(int argc, char **argv)
{
	return dbus_daemon_cli_run(argc, argv, "brokerd-dbus-daemon", exec_brokerd);
}
