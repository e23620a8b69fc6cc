/* SPDX-License-Identifier: MIT */
/*
 * dbus-broker-daemon - dbus-broker behind dbus-daemon's command line, so
 * that the D-Bus peers' test suites, which start "a dbus-daemon" through
 * DBUS_TEST_DAEMON (libdbus) or G_TEST_DBUS_DAEMON (GLib), can run against
 * dbus-broker as they run against dbus-daemon.
 *
 * dbus-broker-launch reads the same XML configuration but never listens by
 * itself: it takes a listening socket the way systemd passes one. This
 * program makes that socket where the configuration (or --address) asks,
 * prints the address and pid where dbus-daemon would, and then becomes
 * dbus-broker-launch with the socket as fd 3 (LISTEN_FDS=1, LISTEN_PID of
 * this very process, which exec keeps). The launcher also joins the bus it
 * serves as a client (--scope user, DBUS_SESSION_BUS_ADDRESS pointing at
 * the new bus): no other bus is needed, and there is no systemd to activate
 * services through, which the expected failures of tests/peers say.
 *
 * Accepted: --config-file=FILE, --session, --system, --address=ADDR,
 * --print-address[=FD], --print-pid[=FD], --nofork, --fork, --nopidfile,
 * --nosyslog, --syslog, --syslog-only, --systemd-activation (ignored:
 * dbus-broker activates through systemd in every mode). Addresses:
 * unix:path=, unix:dir=, unix:tmpdir= (a path-based socket, never
 * abstract) and, from the configuration, the first <listen> of that form.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "dbus-broker-daemon: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(1);
}

/*
 * The first unix: address in <listen> of a configuration file. A line
 * scan, not an XML parse: the files the suites pass keep <listen> on one
 * line, and an address this cannot find is an error, not a guess.
 */
static char *config_listen(const char *file)
{
	char line[4096];
	FILE *f = fopen(file, "re");

	if (!f)
		die("cannot read the configuration", file);
	while (fgets(line, sizeof(line), f)) {
		char *a = strstr(line, "<listen>"), *e;

		if (!a)
			continue;
		a += strlen("<listen>");
		e = strstr(a, "</listen>");
		if (!e || strncmp(a, "unix:", 5))
			continue;
		*e = '\0';
		fclose(f);
		return strdup(a);
	}
	fclose(f);
	return NULL;
}

/* The value of key in a D-Bus address "unix:k=v,k=v" (NULL if absent). */
static char *address_value(const char *address, const char *key)
{
	const char *p = strchr(address, ':');
	size_t klen = strlen(key);

	while (p && *++p) {
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			const char *v = p + klen + 1;

			return strndup(v, strcspn(v, ","));
		}
		p = strchr(p, ',');
	}
	return NULL;
}

/* Binds and listens on the socket the address names: its path in *pathp. */
static int listen_on(const char *address, char **pathp)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *path = address_value(address, "path"), *dir = NULL;
	int s;

	if (strncmp(address, "unix:", 5))
		die("only unix: addresses are supported", address);
	if (!path) {
		dir = address_value(address, "dir");
		if (!dir)
			dir = address_value(address, "tmpdir");
		if (!dir)
			die("no path=, dir= or tmpdir= in the address", address);
		if (asprintf(&path, "%s/dbus-broker-XXXXXX", dir) < 0)
			die("out of memory", NULL);
		/* a fresh directory per bus: the socket name cannot collide */
		if (!mkdtemp(path))
			die("cannot create a socket directory in", dir);
		if (asprintf(&path, "%s/bus", path) < 0)
			die("out of memory", NULL);
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		die("socket path too long", path);
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4096) < 0)
		die("cannot listen on", path);
	*pathp = path;
	free(dir);
	return s;
}

/* Writes text to the fd named by an optional "=FD" argument (default 1). */
static void print_to(const char *fdarg, const char *text)
{
	int fd = fdarg ? atoi(fdarg) : 1;
	size_t len = strlen(text);

	if (write(fd, text, len) != (ssize_t)len)
		die("cannot print", fdarg ? fdarg : "1");
}

/*
 * A datagram socket for sd_notify() messages, at an abstract address named
 * in NOTIFY_SOCKET for the launcher.
 */
static int notify_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("cannot make the notify socket", strerror(errno));
	len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "dbus-broker-daemon/%d", (int)getpid());
	if (bind(fd, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + 1 + len) < 0)
		die("cannot bind the notify socket", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "@dbus-broker-daemon/%d", (int)getpid());
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	return fd;
}

/* Waits up to 30 s for READY=1 on the notify socket: 0, or -ETIMEDOUT. */
static int wait_ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char msg[4096];

	for (int waited = 0; waited < 30000;) {
		ssize_t n;

		if (poll(&p, 1, 100) <= 0) {
			waited += 100;
			continue;
		}
		n = recv(fd, msg, sizeof(msg) - 1, 0);
		if (n <= 0)
			continue;
		msg[n] = '\0';
		/* one assignment a line; READY=1 may come with others */
		for (char *l = msg; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (!strncmp(l, "READY=1", 7) && (l[7] == '\n' || l[7] == '\0'))
				return 0;
	}
	return -ETIMEDOUT;
}

int main(int argc, char **argv)
{
	const char *config = NULL, *address = NULL, *print_address = NULL, *print_pid = NULL;
	bool want_address = false, want_pid = false, do_fork = false;
	char *path, *bus_address, buf[64];
	pid_t daemon_pid, pid;
	int s, notify;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "--config-file=", 14))
			config = a + 14;
		else if (!strcmp(a, "--config-file") && i + 1 < argc)
			config = argv[++i];
		else if (!strcmp(a, "--session"))
			config = "/usr/share/dbus-1/session.conf";
		else if (!strcmp(a, "--system"))
			config = "/usr/share/dbus-1/system.conf";
		else if (!strncmp(a, "--address=", 10))
			address = a + 10;
		else if (!strcmp(a, "--print-address"))
			want_address = true;
		else if (!strncmp(a, "--print-address=", 16))
			want_address = true, print_address = a + 16;
		else if (!strcmp(a, "--print-pid"))
			want_pid = true;
		else if (!strncmp(a, "--print-pid=", 12))
			want_pid = true, print_pid = a + 12;
		else if (!strcmp(a, "--fork"))
			do_fork = true;
		else if (!strcmp(a, "--nofork") || !strcmp(a, "--nopidfile") || !strcmp(a, "--nosyslog") ||
			 !strcmp(a, "--syslog") || !strcmp(a, "--syslog-only") ||
			 !strcmp(a, "--systemd-activation"))
			;
		else
			die("unsupported argument", a);
	}
	if (!config)
		die("no configuration: --config-file, --session or --system", NULL);
	if (!address)
		address = config_listen(config);
	if (!address)
		die("no unix: <listen> address in", config);

	s = listen_on(address, &path);
	if (asprintf(&bus_address, "unix:path=%s\n", path) < 0)
		die("out of memory", NULL);
	notify = notify_socket();

	/*
	 * The address may be printed only once the launcher has read the
	 * configuration: a caller such as GLib's GTestDBus deletes the file as
	 * soon as it has the address. The launcher says READY=1 on
	 * NOTIFY_SOCKET after reading it, so a process other than the daemon
	 * waits for that and then prints: with --fork the parent (which then
	 * exits, as dbus-daemon's does), without it a grandchild (the daemon
	 * keeps this pid, the one the caller started and will signal).
	 */
	daemon_pid = getpid();
	pid = fork();
	if (pid < 0)
		die("fork failed", NULL);
	if (do_fork ? pid > 0 : pid == 0) {
		if (!do_fork) {
			/* reparented to init: nobody has to reap it */
			if (fork() != 0)
				_exit(0);
		} else {
			daemon_pid = pid;
		}
		close(s);
		if (wait_ready(notify) < 0)
			die("dbus-broker-launch did not become ready", NULL);
		if (want_address)
			print_to(print_address, bus_address);
		if (want_pid) {
			snprintf(buf, sizeof(buf), "%d\n", (int)daemon_pid);
			print_to(print_pid, buf);
		}
		_exit(0);
	}
	if (do_fork)
		setsid();
	else
		waitpid(pid, NULL, 0);
	close(notify);
	/* for DBUS_SESSION_BUS_ADDRESS, without the newline */
	bus_address[strlen(bus_address) - 1] = '\0';

	/* systemd's socket passing: the socket as fd 3, named for this pid */
	if (s != 3 && dup2(s, 3) < 0)
		die("dup2 failed", NULL);
	if (s != 3)
		close(s);
	snprintf(buf, sizeof(buf), "%d", (int)getpid());
	setenv("LISTEN_PID", buf, 1);
	setenv("LISTEN_FDS", "1", 1);
	unsetenv("LISTEN_FDNAMES");
	setenv("DBUS_SESSION_BUS_ADDRESS", bus_address, 1);
	execlp("dbus-broker-launch", "dbus-broker-launch", "--scope", "user", "--config-file", config,
	       (char *)NULL);
	die("cannot run dbus-broker-launch", strerror(errno));
}
