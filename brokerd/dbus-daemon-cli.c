/* SPDX-License-Identifier: MIT */
/*
 * dbus-daemon-cli - dbus-daemon's command line as a small supervisor in
 * front of another daemon (see dbus-daemon-cli.h): brokerd-dbus-daemon
 * runs brokerd behind it, the peers' harness dbus-broker-launch.
 *
 * It makes the listening socket where --address or the configuration's
 * first <listen> asks (so abstract sockets work too) and a private runtime
 * directory, and starts the daemon with NOTIFY_SOCKET pointing here. The
 * address and pid are printed only after the daemon said READY=1: a caller
 * such as GTestDBus deletes the configuration file as soon as it has the
 * address.
 *
 * The printed pid is this process's: SIGTERM, SIGINT and SIGHUP are passed
 * on to the daemon, which dies with it otherwise (PR_SET_PDEATHSIG, set
 * here before the exec); when the daemon has exited, the socket and the
 * runtime directory are removed and this process exits with its status.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brokerd/dbus-config.h"
#include "brokerd/dbus-daemon-cli.h"
#include "util/macro.h"

#define READY_TIMEOUT_MS 30000

static const char *prog_name;
static const char *arg_config, *arg_address, *arg_print_address, *arg_print_pid;
static bool arg_want_address, arg_want_pid, arg_fork;
bool dbus_daemon_cli_systemd_activation;

static char runtime_dir[PATH_MAX], socket_path[PATH_MAX];

/* Removes the socket and the runtime directory with what the daemon left in it (one level). */
static void cleanup(void)
{
	char p[PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	if (socket_path[0])
		(void)unlink(socket_path);
	if (!runtime_dir[0])
		return;
	d = opendir(runtime_dir);
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", runtime_dir, de->d_name);
		if (unlink(p) < 0)
			(void)rmdir(p);
	}
	if (d)
		closedir(d);
	(void)rmdir(runtime_dir);
}

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cleanup();
	exit(1);
}

static void parse_argv(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "--config-file=", 14))
			arg_config = a + 14;
		else if (!strcmp(a, "--config-file") && i + 1 < argc)
			arg_config = argv[++i];
		else if (!strcmp(a, "--session"))
			arg_config = "/usr/share/dbus-1/session.conf";
		else if (!strcmp(a, "--system"))
			arg_config = "/usr/share/dbus-1/system.conf";
		else if (!strncmp(a, "--address=", 10))
			arg_address = a + 10;
		else if (!strcmp(a, "--address") && i + 1 < argc)
			arg_address = argv[++i];
		else if (!strcmp(a, "--print-address"))
			arg_want_address = true;
		else if (!strncmp(a, "--print-address=", 16))
			arg_want_address = true, arg_print_address = a + 16;
		else if (!strcmp(a, "--print-pid"))
			arg_want_pid = true;
		else if (!strncmp(a, "--print-pid=", 12))
			arg_want_pid = true, arg_print_pid = a + 12;
		else if (!strcmp(a, "--fork"))
			arg_fork = true;
		else if (!strcmp(a, "--nofork"))
			arg_fork = false;
		/* brokerd logs to the journal or stderr, keeps no pidfile, activates as configured */
		else if (!strcmp(a, "--nopidfile") || !strcmp(a, "--nosyslog") || !strcmp(a, "--syslog") ||
			 !strcmp(a, "--syslog-only"))
			;
		else if (!strcmp(a, "--systemd-activation"))
			dbus_daemon_cli_systemd_activation = true;
		else if (!strcmp(a, "--version")) {
			printf("%s (brokerd), dbus-daemon command line\n", prog_name);
			exit(0);
		} else if (!strcmp(a, "--help")) {
			printf("%s [--config-file=FILE|--session|--system] [--address=ADDRESS]\n"
			       "    [--print-address[=FD]] [--print-pid[=FD]] [--fork|--nofork]\n",
			       prog_name);
			exit(0);
		} else
			die("unknown option '%s' (see --help)", a);
	}
	if (!arg_config)
		die("no configuration file: --config-file=FILE, --session or --system");
}

/* The value of key in one D-Bus address "unix:k=v,k=v" (NULL if absent), unescaped. */
static char *address_value(const char *address, const char *key)
{
	const char *p = strchr(address, ':');
	size_t klen = strlen(key);

	while (p && *++p) {
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			const char *v = p + klen + 1;
			size_t n = strcspn(v, ",;");
			char *out = malloc(n + 1), *o = out;

			if (!out)
				die("out of memory");
			for (size_t i = 0; i < n; i++) {
				if (v[i] == '%' && i + 2 < n + 1 && v[i + 1] && v[i + 2]) {
					char hex[3] = { v[i + 1], v[i + 2], 0 };

					*o++ = (char)strtol(hex, NULL, 16);
					i += 2;
				} else {
					*o++ = v[i];
				}
			}
			*o = '\0';
			return out;
		}
		p += strcspn(p, ",;");
		if (*p != ',')
			break;
	}
	return NULL;
}

/* "unix:KEY=VALUE" with VALUE escaped as D-Bus addresses want (%XX for all but [-0-9A-Za-z_/.\\*]). */
static void address_format(char *out, size_t size, const char *key, const char *value)
{
	size_t o = (size_t)snprintf(out, size, "unix:%s=", key);

	for (const unsigned char *p = (const unsigned char *)value; *p && o + 4 < size; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr("-_/.\\*", *p))
			out[o++] = (char)*p;
		else
			o += (size_t)snprintf(out + o, size - o, "%%%02x", *p);
	}
	out[o < size ? o : size - 1] = 0;
}

/*
 * Binds the first address of the list that this can serve: unix: with
 * path=, dir=, tmpdir= (a fresh socket in that directory), abstract=, or
 * runtime=yes ($XDG_RUNTIME_DIR/bus). Writes the address clients use to
 * printed (without guid: brokerd's is not known yet, and clients do not
 * need it).
 */
static int listen_on(const char *list, char *printed, size_t printed_len)
{
	for (const char *a = list; a && *a; a = strchr(a, ';') ? strchr(a, ';') + 1 : NULL) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		_cleanup_free_ char *path = NULL, *dir = NULL, *abstract = NULL, *runtime = NULL;
		socklen_t len;
		int s;

		if (strncmp(a, "unix:", 5))
			continue;
		path = address_value(a, "path");
		dir = address_value(a, "dir");
		if (!dir)
			dir = address_value(a, "tmpdir");
		abstract = address_value(a, "abstract");
		runtime = address_value(a, "runtime");
		if (runtime && !strcmp(runtime, "yes")) {
			const char *rt = getenv("XDG_RUNTIME_DIR");

			if (!rt)
				die("unix:runtime=yes but XDG_RUNTIME_DIR is not set");
			if (asprintf(&path, "%s/bus", rt) < 0)
				die("out of memory");
		}
		if (!path && dir) {
			char rnd[11];
			FILE *f = fopen("/dev/urandom", "re");

			if (!f || fread(rnd, 1, 10, f) != 10)
				die("cannot read /dev/urandom");
			fclose(f);
			for (int i = 0; i < 10; i++)
				rnd[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(unsigned char)rnd[i] % 36];
			rnd[10] = '\0';
			if (asprintf(&path, "%s/dbus-%s", dir, rnd) < 0)
				die("out of memory");
		}
		if (path) {
			if (strlen(path) >= sizeof(sa.sun_path))
				die("socket path too long: %s", path);
			strcpy(sa.sun_path, path);
			len = sizeof(sa);
			address_format(printed, printed_len, "path", path);
		} else if (abstract) {
			if (strlen(abstract) + 1 >= sizeof(sa.sun_path))
				die("abstract socket name too long: %s", abstract);
			strcpy(sa.sun_path + 1, abstract);
			len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abstract);
			address_format(printed, printed_len, "abstract", abstract);
		} else {
			continue;
		}
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (s < 0)
			die("socket: %s", strerror(errno));
		if (path)
			(void)unlink(path); /* dbus-daemon replaces a stale socket too */
		if (bind(s, (struct sockaddr *)&sa, len) < 0 || listen(s, SOMAXCONN) < 0)
			die("cannot listen on %s: %s", printed, strerror(errno));
		if (path) {
			(void)chmod(path, 0666);
			snprintf(socket_path, sizeof(socket_path), "%s", path);
		}
		return s;
	}
	die("no address this can listen on in '%s' (unix: path=, dir=, tmpdir=, abstract=, runtime=yes)",
	    list);
}

/*
 * The private runtime directory (the daemon's control socket, its empty
 * policy and service directories) in runtime_dir: under XDG_RUNTIME_DIR
 * when that is a writable directory short enough for the socket's address,
 * else under /tmp. Test suites set XDG_RUNTIME_DIR to whatever suits them
 * (a file, a directory that is not there yet), and dbus-daemon, which never
 * uses it unless told to, starts anyway. 0 or -1 with errno set.
 */
static int make_runtime_dir(const char *name)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (rt && *rt && stat(rt, &st) == 0 && S_ISDIR(st.st_mode) && access(rt, W_OK) == 0 &&
	    strlen(rt) + strlen(name) + sizeof("/.XXXXXX/socket") <= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(runtime_dir, sizeof(runtime_dir), "%s/%s.XXXXXX", rt, name);
		if (mkdtemp(runtime_dir))
			return 0;
	}
	snprintf(runtime_dir, sizeof(runtime_dir), "/tmp/%s.XXXXXX", name);
	return mkdtemp(runtime_dir) ? 0 : -1;
}

/* A datagram socket for the daemon's sd_notify(), named in NOTIFY_SOCKET (abstract). */
static int notify_socket(char *name, size_t name_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, n;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("notify socket: %s", strerror(errno));
	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s/%d", prog_name, (int)getpid());
	if (bind(fd, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + 1 + n) < 0)
		die("cannot bind the notify socket: %s", strerror(errno));
	snprintf(name, name_len, "@%s", sa.sun_path + 1);
	return fd;
}

/* READY=1 in one notification (one assignment a line)? */
static bool is_ready(int fd)
{
	char msg[4096];
	ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);

	if (n <= 0)
		return false;
	msg[n] = '\0';
	for (char *l = msg; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, "READY=1", 7) && (l[7] == '\n' || l[7] == '\0'))
			return true;
	return false;
}

static void print_to(const char *fdarg, const char *text)
{
	int fd = fdarg && *fdarg ? atoi(fdarg) : 1;
	size_t len = strlen(text);

	if (write(fd, text, len) != (ssize_t)len)
		die("cannot print to fd %d: %s", fd, strerror(errno));
}

/*
 * The transient services directory ($XDG_RUNTIME_DIR/dbus-1/services, of
 * <standard_session_servicedirs/>) is made at start, as dbus-daemon makes
 * it, so that a service file can be put there before ReloadConfig.
 */
static void make_transient_dir(const struct dbus_config *config)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	char dir[PATH_MAX];

	if (!rt || rt[0] != '/' ||
	    (size_t)snprintf(dir, sizeof(dir), "%s/dbus-1/services", rt) >= sizeof(dir))
		return;
	for (size_t i = 0; i < config->n_servicedirs; i++)
		if (!strcmp(config->servicedirs[i], dir)) {
			dir[strlen(rt) + strlen("/dbus-1")] = '\0';
			(void)mkdir(dir, 0700);
			snprintf(dir, sizeof(dir), "%s/dbus-1/services", rt);
			(void)mkdir(dir, 0700);
			return;
		}
}

/* dbus-daemon's floor of fds when it starts as root. */
#define NOFILE_ROOT_MIN 65536U

/*
 * The fds the bus may have, raised here, in the process whose pid is
 * printed: a test reads the bus's limit from that pid (libdbus's
 * test-dbus-daemon /fd-limit), and the daemon inherits it. Every uid
 * takes its hard limit, as brokerd itself does; root, as dbus-daemon,
 * goes to 65536 at least, hard limit included, when it may.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (geteuid() == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < NOFILE_ROOT_MIN) {
		rl.rlim_cur = rl.rlim_max = NOFILE_ROOT_MIN;
		(void)setrlimit(RLIMIT_NOFILE, &rl); /* EPERM without CAP_SYS_RESOURCE: as it is */
	}
}

int dbus_daemon_cli_run(int argc, char **argv, const char *prog, dbus_daemon_exec_fn exec_daemon)
{
	char address[PATH_MAX + 32], notify_name[108], err[512], line[PATH_MAX + 40];
	int sock, notify, sfd, forked[2] = { -1, -1 }, status = 0;
	struct dbus_config *config = NULL;
	sigset_t ss;
	pid_t child;
	bool ready = false;
	int r;

	prog_name = prog;
	parse_argv(argc, argv);

	/* The configuration is brokerd's to apply; here only its <listen>, and errors early. */
	r = dbus_config_load(&config, arg_config, err, sizeof(err));
	if (r < 0)
		die("%s", err);
	if (!arg_address && config->n_listen == 0)
		die("%s: no <listen> and no --address", arg_config);
	if (arg_address) {
		sock = listen_on(arg_address, address, sizeof(address));
	} else {
		sock = -1;
		for (size_t i = 0; i < config->n_listen && sock < 0; i++)
			if (!strncmp(config->listen[i], "unix:", 5))
				sock = listen_on(config->listen[i], address, sizeof(address));
		if (sock < 0)
			die("%s: no unix: <listen> address", arg_config);
	}
	make_transient_dir(config);
	config = dbus_config_free(config);
	raise_nofile();

	/* --fork: the parent waits for the daemon's word and exits, as dbus-daemon's does */
	if (arg_fork) {
		if (pipe2(forked, O_CLOEXEC) < 0)
			die("pipe: %s", strerror(errno));
		child = fork();
		if (child < 0)
			die("fork: %s", strerror(errno));
		if (child > 0) {
			char c;

			socket_path[0] = '\0'; /* the daemon's now */
			close(forked[1]);
			close(sock);
			_exit(read(forked[0], &c, 1) == 1 ? 0 : 1);
		}
		close(forked[0]);
		(void)setsid();
	}

	if (make_runtime_dir(prog_name) < 0) {
		runtime_dir[0] = '\0';
		die("cannot make a runtime directory: %s", strerror(errno));
	}
	notify = notify_socket(notify_name, sizeof(notify_name));

	/* Signals are read from a signalfd from here on; brokerd gets the default mask back. */
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigaddset(&ss, SIGCHLD);
	(void)sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	if (sfd < 0)
		die("signalfd: %s", strerror(errno));

	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (child == 0) {
		sigset_t none;

		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
		exec_daemon(sock, address, notify_name, arg_config, runtime_dir);
		_exit(127);
	}
	close(sock);

	for (;;) {
		struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .fd = notify, .events = POLLIN } };
		struct signalfd_siginfo si;

		if (poll(p, ready ? 1 : 2, ready ? -1 : READY_TIMEOUT_MS) == 0) {
			kill(child, SIGKILL);
			(void)waitpid(child, NULL, 0);
			die("the daemon did not become ready within %d s", READY_TIMEOUT_MS / 1000);
		}
		if (!ready && (p[1].revents & POLLIN) && is_ready(notify)) {
			ready = true;
			close(notify);
			if (arg_want_address) {
				snprintf(line, sizeof(line), "%s\n", address);
				print_to(arg_print_address, line);
			}
			if (arg_want_pid) {
				snprintf(line, sizeof(line), "%d\n", (int)getpid());
				print_to(arg_print_pid, line);
			}
			if (forked[1] >= 0) {
				(void)!write(forked[1], "r", 1);
				close(forked[1]);
				forked[1] = -1;
			}
		}
		if (!(p[0].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			kill(child, (int)si.ssi_signo);
			continue;
		}
		if (waitpid(child, &status, WNOHANG) == child)
			break;
	}
	cleanup();
	if (!ready)
		fprintf(stderr, "%s: the daemon exited before it was ready\n", prog_name);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return ready ? WEXITSTATUS(status) : 1;
}
