/* SPDX-License-Identifier: MIT */
/*
 * bus-bench - brokerd against dbus-broker and dbus-daemon in one boot of the
 * guest image (tests/bench/run-bus starts it there; the integration test
 * bench-bus runs its short mode). brokerd is the system service; the two
 * D-Bus brokers are started here as private buses on sockets under
 * /run/bus-bench with the same permissive session-like configuration, and
 * are driven by sd-bus clients, brokerd by libbrokerd. The same payloads,
 * counts and window go to every bus, one bus after the other for each
 * parameter, so that drift within a boot hits them alike.
 *
 * Tables (one CSV line each, prefixed by '@' and the table name; what the
 * columns are is printed first as '@columns,...'):
 *   rtt     method call round trip (echo of an "ay" body) at 64 B .. 1 MiB:
 *           brokerd, dbus-broker, dbus-daemon, a direct sd-bus connection over
 *           a socketpair, and a pipe ping-pong as the blocking floor;
 *   fanout  signals from one emitter to N subscribers, the emitter waiting
 *           for every subscriber's acknowledgement (over a pipe) every
 *           WINDOW signals so no bus runs into its queue limits; delivered
 *           signals per second, end-to-end latency, lost signals;
 *   ctrl    control-plane operations per second: connect+HELLO, REQUEST_NAME,
 *           SUBSCRIBE, OPEN_CALL against Hello, RequestName, AddMatch and
 *           GetNameOwner (what a D-Bus client does to reach a name);
 *   mem     the broker's VmRSS before and after N idle connections.
 * CPU columns are user+system time of every process involved (client,
 * server or emitter and subscribers, the broker) from /proc/PID/stat, per
 * call or per delivered signal. A size that a bus cannot carry is reported
 * as "n/a: <errno name>", never left out; an unexpected failure as
 * "error: ...". Speed is never judged here.
 *
 * usage: bus-bench [--short]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-id128.h>
#include <time.h>
#include <unistd.h>

#include "client/bus-name.h"
#include "client/include/brokerd/brokerd.h"
#include "protocol/message.h"

#define RUN_DIR	      "/run/bus-bench"
#define DAEMON_SOCKET RUN_DIR "/dbus-daemon"
#define BROKER_SOCKET RUN_DIR "/dbus-broker"
#define DAEMON_CONF   RUN_DIR "/dbus-daemon.conf"
#define BROKER_CONF   RUN_DIR "/dbus-broker.conf"

#define ECHO_NAME "org.brokerd.bench.Echo"
#define FAN_NAME  "org.brokerd.bench.Fan"
#define OBJ_PATH  "/org/brokerd/bench"
#define FAN_IFACE "org.brokerd.bench.Fan"
#define WINDOW	  16   /* brokerd's channels have 32 slots; the same window for every bus */
#define SAMPLES	  4096 /* latency samples kept per subscriber */
#define CALL_USEC (30ULL * 1000000)
#define ACK_MSEC  3000

enum bus_kind { BUS_BROKERD, BUS_DBUS_BROKER, BUS_DBUS_DAEMON, BUS_P2P, BUS_PIPE, N_BUSES };

static const char *const bus_label[N_BUSES] = {
	[BUS_BROKERD] = "brokerd",
	[BUS_DBUS_BROKER] = "dbus-broker",
	[BUS_DBUS_DAEMON] = "dbus-daemon",
	[BUS_P2P] = "sd-bus-p2p",
	[BUS_PIPE] = "pipe",
};
static const char *const bus_address[N_BUSES] = {
	[BUS_DBUS_BROKER] = "unix:path=" BROKER_SOCKET,
	[BUS_DBUS_DAEMON] = "unix:path=" DAEMON_SOCKET,
};
/* The process that does a bus's routing, whose CPU and memory count. */
static pid_t broker_pid[N_BUSES];
static pid_t launcher_pid, daemon_pid;
/* Why a D-Bus broker could not be started: each of its rows says so. */
static char broker_error[N_BUSES][128];

static bool short_mode;

/* ---- Small helpers ---------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "bus-bench: %s: %s\n", what, strerror(err));
	exit(2);
}

/* user+system time of pid in microseconds, 0 when it is gone */
static uint64_t cpu_us(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	/* the command may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (uint64_t)(ut + st) * 1000000ULL / (uint64_t)sysconf(_SC_CLK_TCK);
}

static uint64_t cpu_us_sum(const pid_t *pids, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0)
			sum += cpu_us(pids[i]);
	return sum;
}

/* resident set (VmRSS) of pid in kB, from the second field of statm */
static long rss_kb(pid_t pid)
{
	char path[64];
	unsigned long pages;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fscanf(f, "%*u %lu", &pages);
	fclose(f);
	return n == 1 ? (long)(pages * (unsigned long)sysconf(_SC_PAGESIZE) / 1024) : -1;
}

/* The first process named comm (with parent ppid, unless 0). */
static pid_t find_pid(const char *comm, pid_t ppid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		char path[300], buf[512], name[64];
		int pid = atoi(de->d_name), pp;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%*d (%63[^)]) %*c %d", name, &pp) == 2 &&
		    strcmp(name, comm) == 0 && (!ppid || pp == ppid))
			found = pid;
		fclose(f);
	}
	closedir(d);
	return found;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		die(path, errno);
}

/* Reads one byte from fd within ms; false on timeout or EOF. */
static bool wait_byte(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 1;
}

static void kill_wait(pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The p-quantile (nearest rank) of n sorted values, in microseconds. */
static double pct_us(const uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)(p * (double)n + 0.999999);

	if (n == 0)
		return 0;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)v[k - 1] / 1000.0;
}

static const char *errno_label(int err)
{
	static char buf[32];

	switch (err) {
	case EMSGSIZE:
		return "EMSGSIZE";
	case ENOBUFS:
		return "ENOBUFS";
	case E2BIG:
		return "E2BIG";
	default:
		snprintf(buf, sizeof(buf), "errno %d", err);
		return buf;
	}
}

/* ---- Connections -------------------------------------------------------------- */

static int sdbus_connect(enum bus_kind k, sd_bus **ret)
{
	sd_bus *b = NULL;
	const char *u;
	int r;

	r = sd_bus_new(&b);
	if (r < 0)
		return r;
	r = sd_bus_set_address(b, bus_address[k]);
	if (r >= 0)
		r = sd_bus_set_bus_client(b, 1);
	if (r >= 0)
		r = sd_bus_start(b);
	/* waits for Hello's reply: a connection counts once it is on the bus */
	if (r >= 0)
		r = sd_bus_get_unique_name(b, &u);
	if (r < 0) {
		sd_bus_unref(b);
		return r;
	}
	*ret = b;
	return 0;
}

/* The p2p pair: fd's end as the server (is_server) or the client. */
static int sdbus_p2p(int fd, bool is_server, sd_bus **ret)
{
	sd_bus *b = NULL;
	sd_id128_t id;
	int r;

	r = sd_bus_new(&b);
	if (r < 0)
		return r;
	r = sd_bus_set_fd(b, fd, fd);
	if (r >= 0 && is_server) {
		r = sd_id128_randomize(&id);
		if (r >= 0)
			r = sd_bus_set_server(b, 1, id);
	}
	if (r >= 0)
		r = sd_bus_start(b);
	if (r < 0) {
		sd_bus_unref(b);
		return r;
	}
	*ret = b;
	return 0;
}

static void sdbus_loop(sd_bus *b)
{
	for (;;) {
		int r = sd_bus_process(b, NULL);

		if (r < 0)
			_exit(1);
		if (r == 0 && sd_bus_wait(b, UINT64_MAX) < 0)
			_exit(1);
	}
}

/* ---- The D-Bus brokers ---------------------------------------------------------- */

/*
 * The limits of Debian's session.conf, so neither broker refuses what the
 * benchmark sends; the policy lets everybody own and send everything.
 */
static const char conf_head[] =
	"<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
	" \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
	"<busconfig>\n"
	"  <type>session</type>\n"
	"  <auth>EXTERNAL</auth>\n"
	"  <policy context=\"default\">\n"
	"    <allow send_destination=\"*\"/>\n"
	"    <allow receive_sender=\"*\"/>\n"
	"    <allow own=\"*\"/>\n"
	"  </policy>\n";
static const char conf_limits[] = "  <limit name=\"max_incoming_bytes\">1000000000</limit>\n"
				  "  <limit name=\"max_outgoing_bytes\">1000000000</limit>\n"
				  "  <limit name=\"max_message_size\">1000000000</limit>\n"
				  "  <limit name=\"max_completed_connections\">100000</limit>\n"
				  "  <limit name=\"max_incomplete_connections\">10000</limit>\n"
				  "  <limit name=\"max_connections_per_user\">100000</limit>\n"
				  "  <limit name=\"max_names_per_connection\">50000</limit>\n"
				  "  <limit name=\"max_match_rules_per_connection\">50000</limit>\n"
				  "  <limit name=\"max_replies_per_connection\">50000</limit>\n";

/* Waits until a client gets through Hello on bus k (10 s at most). */
static int wait_bus(enum bus_kind k)
{
	int r = -ETIMEDOUT;

	for (int i = 0; i < 200; i++) {
		sd_bus *b = NULL;

		r = sdbus_connect(k, &b);
		if (r >= 0) {
			sd_bus_flush_close_unref(b);
			return 0;
		}
		usleep(50000);
	}
	return r;
}

static void start_dbus_daemon(void)
{
	char conf[4096];
	int r;

	snprintf(conf, sizeof(conf), "%s  <listen>unix:path=%s</listen>\n%s</busconfig>\n", conf_head,
		 DAEMON_SOCKET, conf_limits);
	write_file(DAEMON_CONF, conf);
	daemon_pid = fork();
	if (daemon_pid < 0)
		die("fork", errno);
	if (daemon_pid == 0) {
		execlp("dbus-daemon", "dbus-daemon", "--nofork", "--nopidfile", "--config-file=" DAEMON_CONF,
		       (char *)NULL);
		_exit(127);
	}
	r = wait_bus(BUS_DBUS_DAEMON);
	if (r < 0) {
		snprintf(broker_error[BUS_DBUS_DAEMON], sizeof(broker_error[0]),
			 "dbus-daemon did not start: %s", strerror(-r));
		return;
	}
	broker_pid[BUS_DBUS_DAEMON] = daemon_pid;
}

/*
 * dbus-broker-launch takes its listening socket as systemd passes it
 * (LISTEN_FDS), so the socket is made here and handed over as fd 3.
 */
static void start_dbus_broker(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = BROKER_SOCKET };
	char conf[4096];
	int s, r;

	snprintf(conf, sizeof(conf), "%s%s</busconfig>\n", conf_head, conf_limits);
	write_file(BROKER_CONF, conf);
	unlink(BROKER_SOCKET);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4096) < 0)
		die("dbus-broker socket", errno);
	launcher_pid = fork();
	if (launcher_pid < 0)
		die("fork", errno);
	if (launcher_pid == 0) {
		char pid[16];

		/* dup2() onto itself would keep O_CLOEXEC: clear it instead */
		if (s == 3 ? fcntl(s, F_SETFD, 0) < 0 : dup2(s, 3) < 0)
			_exit(127);
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		setenv("LISTEN_FDS", "1", 1);
		/* the launcher joins the bus it runs as a client, found as the user bus */
		setenv("DBUS_SESSION_BUS_ADDRESS", bus_address[BUS_DBUS_BROKER], 1);
		setenv("LISTEN_PID", pid, 1);
		unsetenv("LISTEN_FDNAMES");
		execlp("dbus-broker-launch", "dbus-broker-launch", "--scope", "user", "--config-file",
		       BROKER_CONF, (char *)NULL);
		_exit(127);
	}
	close(s);
	r = wait_bus(BUS_DBUS_BROKER);
	if (r < 0) {
		snprintf(broker_error[BUS_DBUS_BROKER], sizeof(broker_error[0]),
			 "dbus-broker-launch did not start: %s", strerror(-r));
		return;
	}
	broker_pid[BUS_DBUS_BROKER] = find_pid("dbus-broker", launcher_pid);
	if (!broker_pid[BUS_DBUS_BROKER])
		snprintf(broker_error[BUS_DBUS_BROKER], sizeof(broker_error[0]), "no dbus-broker process");
}

static void stop_brokers(void)
{
	pid_t p[2] = { launcher_pid, daemon_pid };

	for (int i = 0; i < 2; i++)
		if (p[i] > 0)
			kill(p[i], SIGTERM);
	for (int i = 0; i < 2; i++)
		if (p[i] > 0)
			waitpid(p[i], NULL, 0);
}

/* ---- Method call round trip -------------------------------------------------------- */

static int on_brokerd_echo(brokerd_msg *m, void *userdata)
{
	const void *body;
	size_t size;
	int r = brokerd_msg_get_body(m, &body, &size);

	return r < 0 ? r : brokerd_msg_reply(m, body, size);
}

static int on_sdbus_echo(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	sd_bus_message *reply = NULL;
	const void *p;
	size_t n;
	int r;

	r = sd_bus_message_read_array(m, 'y', &p, &n);
	if (r >= 0)
		r = sd_bus_message_new_method_return(m, &reply);
	if (r >= 0)
		r = sd_bus_message_append_array(reply, 'y', p, n);
	if (r >= 0)
		r = sd_bus_send(NULL, reply, NULL);
	sd_bus_message_unref(reply);
	return r < 0 ? r : 1;
}

/* The echo server of bus k; says 'r' on ready once it serves. */
static void echo_server(enum bus_kind k, int ready, int fd_a, int fd_b, size_t size)
{
	sd_bus *b = NULL;

	switch (k) {
	case BUS_BROKERD: {
		brokerd_bus *bus = NULL;

		if (brokerd_bus_open_system(&bus) < 0 ||
		    brokerd_bus_add_method(bus, NULL, ECHO_NAME, "Echo", on_brokerd_echo, NULL) < 0 ||
		    brokerd_bus_request_name(bus, ECHO_NAME, 0) != BROKERD_NAME_PRIMARY_OWNER)
			_exit(1);
		(void)!write(ready, "r", 1);
		brokerd_bus_run(bus);
		_exit(0);
	}
	case BUS_DBUS_BROKER:
	case BUS_DBUS_DAEMON:
		if (sdbus_connect(k, &b) < 0 ||
		    sd_bus_add_object(b, NULL, OBJ_PATH, on_sdbus_echo, NULL) < 0 ||
		    sd_bus_request_name(b, ECHO_NAME, 0) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		sdbus_loop(b);
		break;
	case BUS_P2P:
		if (sdbus_p2p(fd_a, true, &b) < 0 ||
		    sd_bus_add_object(b, NULL, OBJ_PATH, on_sdbus_echo, NULL) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		sdbus_loop(b);
		break;
	case BUS_PIPE: {
		char *buf = malloc(size);

		(void)!write(ready, "r", 1);
		for (;;) {
			size_t got = 0;

			while (got < size) {
				ssize_t n = read(fd_a, buf + got, size - got);

				if (n <= 0)
					_exit(0);
				got += (size_t)n;
			}
			for (size_t put = 0; put < size;) {
				ssize_t n = write(fd_b, buf + put, size - put);

				if (n <= 0)
					_exit(0);
				put += (size_t)n;
			}
		}
	}
	default:
		break;
	}
	_exit(1);
}

/* One round trip on the client's side; 0 or -errno. */
struct rtt_client {
	enum bus_kind k;
	brokerd_bus *bbus;
	sd_bus *sbus;
	int fd_out, fd_in;
	char *buf;
	size_t size;
};

static int rtt_once(struct rtt_client *c)
{
	switch (c->k) {
	case BUS_BROKERD: {
		brokerd_msg *reply = NULL;
		const void *body;
		size_t n;
		int r = brokerd_bus_call(c->bbus, ECHO_NAME, "Echo", c->buf, c->size, CALL_USEC, &reply);

		if (r < 0)
			return r;
		r = brokerd_msg_get_body(reply, &body, &n);
		brokerd_msg_unref(reply);
		return r < 0 ? r : n == c->size ? 0 : -EBADMSG;
	}
	case BUS_PIPE: {
		for (size_t put = 0; put < c->size;) {
			ssize_t n = write(c->fd_out, c->buf + put, c->size - put);

			if (n <= 0)
				return -EPIPE;
			put += (size_t)n;
		}
		for (size_t got = 0; got < c->size;) {
			ssize_t n = read(c->fd_in, c->buf + got, c->size - got);

			if (n <= 0)
				return -EPIPE;
			got += (size_t)n;
		}
		return 0;
	}
	default: {
		sd_bus_message *m = NULL, *reply = NULL;
		sd_bus_error err = SD_BUS_ERROR_NULL;
		const void *p;
		size_t n = 0;
		int r;

		r = sd_bus_message_new_method_call(c->sbus, &m, c->k == BUS_P2P ? NULL : ECHO_NAME, OBJ_PATH,
						   "org.brokerd.bench.Echo", "Echo");
		if (r >= 0)
			r = sd_bus_message_append_array(m, 'y', c->buf, c->size);
		if (r >= 0)
			r = sd_bus_call(c->sbus, m, CALL_USEC, &err, &reply);
		if (r >= 0)
			r = sd_bus_message_read_array(reply, 'y', &p, &n);
		sd_bus_error_free(&err);
		sd_bus_message_unref(m);
		sd_bus_message_unref(reply);
		return r < 0 ? r : n == c->size ? 0 : -EBADMSG;
	}
	}
}

static void bench_rtt(enum bus_kind k, size_t size, int calls)
{
	struct rtt_client c = { .k = k, .size = size, .fd_out = -1, .fd_in = -1 };
	int ready[2], a[2] = { -1, -1 }, b[2] = { -1, -1 }, r = 0, done = 0;
	pid_t pids[3] = { 0 };
	uint64_t *lat = calloc((size_t)calls, sizeof(*lat)), cpu0 = 0, cpu1 = 0;
	char status[160] = "ok";

	if (broker_error[k][0]) {
		printf("@rtt,%s,%zu,%d,error: %s,,,,,,,\n", bus_label[k], size, calls, broker_error[k]);
		free(lat);
		return;
	}
	c.buf = malloc(size);
	memset(c.buf, 0x5a, size);
	if (pipe2(ready, O_CLOEXEC) < 0)
		die("pipe", errno);
	if (k == BUS_P2P && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) < 0)
		die("socketpair", errno);
	if (k == BUS_PIPE && (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0))
		die("pipe", errno);
	pids[0] = fork();
	if (pids[0] < 0)
		die("fork", errno);
	if (pids[0] == 0) {
		close(ready[0]);
		/* p2p: the server's end is a[0]; pipe: it reads a[0] and writes b[1] */
		echo_server(k, ready[1], a[0], b[1], size);
	}
	close(ready[1]);
	if (!wait_byte(ready[0], 20000)) {
		snprintf(status, sizeof(status), "error: the echo server did not start");
		goto out;
	}
	switch (k) {
	case BUS_BROKERD:
		r = brokerd_bus_open_system(&c.bbus);
		break;
	case BUS_P2P:
		r = sdbus_p2p(a[1], false, &c.sbus);
		break;
	case BUS_PIPE:
		c.fd_out = a[1];
		c.fd_in = b[0];
		break;
	default:
		r = sdbus_connect(k, &c.sbus);
		break;
	}
	if (r < 0) {
		snprintf(status, sizeof(status), "error: connect: %s", strerror(-r));
		goto out;
	}
	/* one call outside the measurement: it opens brokerd's call channel */
	r = rtt_once(&c);
	if (r == -EMSGSIZE || r == -ENOBUFS || r == -E2BIG) {
		snprintf(status, sizeof(status), "n/a: %s", errno_label(-r));
		goto out;
	}
	/* libbrokerd refuses a body above CHMSG_MAX before the kernel sees it */
	if (k == BUS_BROKERD && r == -EINVAL && size > CHMSG_MAX) {
		snprintf(status, sizeof(status), "n/a: EINVAL above the library's %d bytes", CHMSG_MAX);
		goto out;
	}
	if (r < 0) {
		snprintf(status, sizeof(status), "error: first call: %s", strerror(-r));
		goto out;
	}
	pids[1] = getpid();
	pids[2] = broker_pid[k];
	cpu0 = cpu_us_sum(pids, 3);
	for (done = 0; done < calls; done++) {
		uint64_t t0 = now_ns();

		r = rtt_once(&c);
		if (r < 0) {
			snprintf(status, sizeof(status), "error: call %d: %s", done, strerror(-r));
			break;
		}
		lat[done] = now_ns() - t0;
	}
	cpu1 = cpu_us_sum(pids, 3);
out:
	if (strcmp(status, "ok") == 0) {
		qsort(lat, (size_t)done, sizeof(*lat), cmp_u64);
		printf("@rtt,%s,%zu,%d,ok,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", bus_label[k], size, calls,
		       (double)lat[0] / 1000.0, pct_us(lat, (size_t)done, 0.5),
		       pct_us(lat, (size_t)done, 0.9), pct_us(lat, (size_t)done, 0.99),
		       pct_us(lat, (size_t)done, 0.999), (double)lat[done - 1] / 1000.0,
		       (double)(cpu1 - cpu0) / (double)done);
	} else {
		printf("@rtt,%s,%zu,%d,%s,,,,,,,\n", bus_label[k], size, calls, status);
	}
	fflush(stdout);
	brokerd_bus_close(c.bbus);
	sd_bus_flush_close_unref(c.sbus);
	for (int i = 0; i < 2; i++) {
		if (a[i] >= 0)
			close(a[i]);
		if (b[i] >= 0)
			close(b[i]);
	}
	close(ready[0]);
	kill_wait(pids, 1);
	free(c.buf);
	free(lat);
}

/* ---- Signal fan-out -------------------------------------------------------------- */

struct sub_stats {
	uint64_t delivered;
	uint32_t nsamples;
	uint64_t lat_ns[SAMPLES];
};

struct fan_result {
	uint64_t t_start, t_end, sent, window_timeouts, retries;
	int error;
};

/* What the forked emitter and subscribers share with the parent. */
static struct {
	struct sub_stats *subs;
	struct fan_result *res;
	int ack[2];
	uint64_t signals;
	size_t size;
} fan;

/* The first 16 bytes of a signal: its sequence number and when it was sent. */
struct fan_head {
	uint64_t seq, sent_ns;
};

static void fan_received(struct sub_stats *st, const void *body, size_t size)
{
	struct fan_head h;

	if (size < sizeof(h))
		return;
	memcpy(&h, body, sizeof(h));
	if (st->nsamples < SAMPLES)
		st->lat_ns[st->nsamples++] = now_ns() - h.sent_ns;
	__atomic_add_fetch(&st->delivered, 1, __ATOMIC_RELEASE);
	if ((h.seq + 1) % WINDOW == 0 || h.seq + 1 == fan.signals)
		(void)!write(fan.ack[1], "a", 1);
}

static int on_brokerd_tick(brokerd_msg *m, void *userdata)
{
	const void *body;
	size_t size;

	if (brokerd_msg_get_body(m, &body, &size) >= 0)
		fan_received(userdata, body, size);
	return 0;
}

static int on_sdbus_tick(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const void *p;
	size_t n;

	if (sd_bus_message_read_array(m, 'y', &p, &n) >= 0)
		fan_received(userdata, p, n);
	return 0;
}

static void subscriber(enum bus_kind k, struct sub_stats *st, int ready)
{
	if (k == BUS_BROKERD) {
		brokerd_bus *bus = NULL;

		if (brokerd_bus_open_system(&bus) < 0 ||
		    brokerd_bus_subscribe(bus, NULL, FAN_NAME, "Tick", on_brokerd_tick, st) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		brokerd_bus_run(bus);
	} else {
		sd_bus *b = NULL;

		if (sdbus_connect(k, &b) < 0 ||
		    sd_bus_add_match(b, NULL, "type='signal',interface='" FAN_IFACE "',member='Tick'",
				     on_sdbus_tick, st) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		sdbus_loop(b);
	}
	_exit(1);
}

/* Sends one signal; brokerd's -ENOBUFS (ring full) is retried, and counted. */
static int emit_one(enum bus_kind k, brokerd_bus *bbus, sd_bus *sbus, const void *body)
{
	if (k == BUS_BROKERD) {
		for (int tries = 0;; tries++) {
			int r = brokerd_bus_emit_signal(bbus, FAN_NAME, "Tick", body, fan.size);

			if (r != -ENOBUFS || tries > 2000)
				return r;
			fan.res->retries++;
			brokerd_bus_process(bbus);
			usleep(500);
		}
	} else {
		sd_bus_message *m = NULL;
		int r = sd_bus_message_new_signal(sbus, &m, OBJ_PATH, FAN_IFACE, "Tick");

		if (r >= 0)
			r = sd_bus_message_append_array(m, 'y', body, fan.size);
		if (r >= 0)
			r = sd_bus_send(sbus, m, NULL);
		sd_bus_message_unref(m);
		return r;
	}
}

static void emitter(enum bus_kind k, int nsubs, int ready, int go, int done)
{
	brokerd_bus *bbus = NULL;
	sd_bus *sbus = NULL;
	char *body = calloc(1, fan.size);
	int r = 0;

	if (k == BUS_BROKERD) {
		if (brokerd_bus_open_system(&bbus) < 0 ||
		    brokerd_bus_request_name(bbus, FAN_NAME, 0) != BROKERD_NAME_PRIMARY_OWNER)
			_exit(1);
	} else if (sdbus_connect(k, &sbus) < 0) {
		_exit(1);
	}
	(void)!write(ready, "r", 1);
	if (!wait_byte(go, 60000))
		_exit(1);
	fan.res->t_start = now_ns();
	for (uint64_t i = 0; i < fan.signals; i++) {
		struct fan_head h = { .seq = i, .sent_ns = now_ns() };

		memcpy(body, &h, sizeof(h));
		r = emit_one(k, bbus, sbus, body);
		if (r < 0)
			break;
		fan.res->sent++;
		if ((i + 1) % WINDOW == 0 || i + 1 == fan.signals) {
			if (sbus && (r = sd_bus_flush(sbus)) < 0)
				break;
			r = 0;
			for (int a = 0; a < nsubs; a++)
				if (!wait_byte(fan.ack[0], ACK_MSEC)) {
					fan.res->window_timeouts++;
					break;
				}
		}
	}
	fan.res->t_end = now_ns();
	fan.res->error = r < 0 ? -r : 0;
	(void)!write(done, "d", 1);
	pause();
	_exit(0);
}

static void bench_fanout(enum bus_kind k, int nsubs, size_t size, uint64_t signals)
{
	size_t shm_size = sizeof(struct fan_result) + (size_t)nsubs * sizeof(struct sub_stats);
	int ready[2], go[2], done[2], started = 0;
	pid_t *pids = calloc((size_t)nsubs + 2, sizeof(*pids));
	uint64_t cpu0 = 0, cpu1 = 0, delivered = 0, lost, *lat = NULL;
	size_t nlat = 0;
	char status[160] = "ok";
	void *shm;

	if (broker_error[k][0]) {
		printf("@fanout,%s,%d,%zu,%" PRIu64 ",error: %s,,,,,,,\n", bus_label[k], nsubs, size, signals,
		       broker_error[k]);
		free(pids);
		return;
	}
	/* a signal brokerd cannot carry at all: one send says so, as a row */
	shm = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		die("mmap", errno);
	fan.res = shm;
	fan.subs = (struct sub_stats *)(fan.res + 1);
	fan.signals = signals;
	fan.size = size;
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0 ||
	    pipe2(fan.ack, O_CLOEXEC) < 0)
		die("pipe", errno);

	/* the emitter first: on brokerd it owns the name the subscribers ask for */
	pids[nsubs] = fork();
	if (pids[nsubs] < 0)
		die("fork", errno);
	if (pids[nsubs] == 0)
		emitter(k, nsubs, ready[1], go[0], done[1]);
	if (!wait_byte(ready[0], 30000)) {
		snprintf(status, sizeof(status), "error: the emitter did not start");
		goto out;
	}
	for (started = 0; started < nsubs; started++) {
		pids[started] = fork();
		if (pids[started] < 0)
			die("fork", errno);
		if (pids[started] == 0)
			subscriber(k, &fan.subs[started], ready[1]);
		if (!wait_byte(ready[0], 30000)) {
			snprintf(status, sizeof(status), "error: subscriber %d did not start", started);
			started++;
			goto out;
		}
	}
	pids[nsubs + 1] = broker_pid[k];
	cpu0 = cpu_us_sum(pids, (size_t)nsubs + 2) + cpu_us(getpid());
	(void)!write(go[1], "g", 1);
	if (!wait_byte(done[0], short_mode ? 60000 : 600000)) {
		snprintf(status, sizeof(status), "error: the emitter did not finish");
		goto out;
	}
	/*
	 * Signals still on their way when a window's acknowledgements timed out
	 * (a bus far behind under TCG): wait while they keep arriving, so that
	 * "lost" counts what never came, not what came late; give up after 3 s
	 * without progress.
	 */
	for (uint64_t last = 0, idle_ms = 0; idle_ms < 3000; idle_ms += 50) {
		delivered = 0;
		for (int s = 0; s < nsubs; s++)
			delivered += __atomic_load_n(&fan.subs[s].delivered, __ATOMIC_ACQUIRE);
		if (delivered >= fan.res->sent * (uint64_t)nsubs)
			break;
		if (delivered > last)
			idle_ms = 0;
		last = delivered;
		usleep(50000);
	}
	cpu1 = cpu_us_sum(pids, (size_t)nsubs + 2) + cpu_us(getpid());
	if (fan.res->error == EMSGSIZE || fan.res->error == ENOBUFS || fan.res->error == E2BIG) {
		if (fan.res->sent == 0) {
			snprintf(status, sizeof(status), "n/a: %s", errno_label(fan.res->error));
			goto out;
		}
		snprintf(status, sizeof(status), "error: emit %" PRIu64 ": %s", fan.res->sent,
			 errno_label(fan.res->error));
		goto out;
	}
	if (fan.res->error) {
		snprintf(status, sizeof(status), "error: emit %" PRIu64 ": %s", fan.res->sent,
			 strerror(fan.res->error));
		goto out;
	}
	lat = malloc((size_t)nsubs * SAMPLES * sizeof(*lat));
	for (int s = 0; s < nsubs; s++) {
		memcpy(lat + nlat, fan.subs[s].lat_ns, fan.subs[s].nsamples * sizeof(*lat));
		nlat += fan.subs[s].nsamples;
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
out:
	if (strcmp(status, "ok") == 0) {
		double secs = (double)(fan.res->t_end - fan.res->t_start) / 1e9;

		lost = signals * (uint64_t)nsubs - delivered;
		printf("@fanout,%s,%d,%zu,%" PRIu64 ",ok,%" PRIu64 ",%" PRIu64 ",%.0f,%.1f,%.1f,%.2f,%" PRIu64
		       "\n",
		       bus_label[k], nsubs, size, signals, delivered, lost, (double)delivered / secs,
		       pct_us(lat, nlat, 0.5), pct_us(lat, nlat, 0.99),
		       delivered ? (double)(cpu1 - cpu0) / (double)delivered : 0.0, fan.res->window_timeouts);
	} else {
		printf("@fanout,%s,%d,%zu,%" PRIu64 ",%s,,,,,,,\n", bus_label[k], nsubs, size, signals,
		       status);
	}
	fflush(stdout);
	pids[nsubs + 1] = 0;
	kill_wait(pids, (size_t)nsubs + 1);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
	close(fan.ack[0]);
	close(fan.ack[1]);
	munmap(shm, shm_size);
	free(lat);
	free(pids);
}

/* ---- Control plane -------------------------------------------------------------- */

enum bench_op { OP_CONNECT, OP_NAME, OP_SUBSCRIBE, OP_REACH, N_OPS };

/* brokerd's operation / the D-Bus one it is compared with */
static const char *const op_label[N_OPS][2] = {
	[OP_CONNECT] = { "connect+HELLO", "connect+Hello" },
	[OP_NAME] = { "REQUEST_NAME", "RequestName" },
	[OP_SUBSCRIBE] = { "SUBSCRIBE", "AddMatch" },
	[OP_REACH] = { "OPEN_CALL", "GetNameOwner" },
};

static int noop_brokerd(brokerd_msg *m, void *userdata)
{
	return 0;
}

/* One timed operation number i; the undo after it is not timed. */
static int ctrl_once(enum bus_kind k, enum bench_op op, brokerd_bus *bb, sd_bus *sb, int i, uint64_t *ns)
{
	char name[64];
	uint64_t t0;
	int r;

	snprintf(name, sizeof(name), "org.brokerd.bench.N%d", i);
	t0 = now_ns();
	if (k == BUS_BROKERD) {
		brokerd_bus *nb = NULL;
		brokerd_slot *slot = NULL;

		switch (op) {
		case OP_CONNECT:
			r = brokerd_bus_open_system(&nb);
			*ns = now_ns() - t0;
			brokerd_bus_close(nb);
			return r;
		case OP_NAME:
			r = brokerd_bus_request_name(bb, name, BROKERD_NAME_DO_NOT_QUEUE);
			*ns = now_ns() - t0;
			if (r >= 0)
				r = brokerd_bus_release_name(bb, name);
			return r;
		case OP_SUBSCRIBE:
			r = brokerd_bus_subscribe(bb, &slot, name, NULL, noop_brokerd, NULL);
			*ns = now_ns() - t0;
			if (r >= 0)
				r = brokerd_bus_unsubscribe(bb, name);
			brokerd_slot_free(slot);
			return r;
		case OP_REACH: {
			struct bname *b = bname_get(bb, ECHO_NAME, true);

			if (!b)
				return -ENOMEM;
			t0 = now_ns();
			r = bname_open_call(bb, b, false);
			*ns = now_ns() - t0;
			bname_close_chans(bb, b);
			bname_gc(bb, b);
			return r;
		}
		default:
			return -EINVAL;
		}
	} else {
		sd_bus_error err = SD_BUS_ERROR_NULL;
		sd_bus_message *reply = NULL;
		sd_bus_slot *slot = NULL;
		sd_bus *nb = NULL;
		char match[128];

		switch (op) {
		case OP_CONNECT:
			r = sdbus_connect(k, &nb);
			*ns = now_ns() - t0;
			sd_bus_flush_close_unref(nb);
			return r;
		case OP_NAME:
			r = sd_bus_request_name(sb, name, 0);
			*ns = now_ns() - t0;
			if (r >= 0)
				r = sd_bus_release_name(sb, name);
			return r;
		case OP_SUBSCRIBE:
			snprintf(match, sizeof(match), "type='signal',sender='%s',member='Tick'", name);
			t0 = now_ns();
			r = sd_bus_add_match(sb, &slot, match, on_sdbus_tick, NULL);
			*ns = now_ns() - t0;
			sd_bus_slot_unref(slot);
			return r;
		case OP_REACH:
			r = sd_bus_call_method(sb, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					       "org.freedesktop.DBus", "GetNameOwner", &err, &reply, "s",
					       ECHO_NAME);
			*ns = now_ns() - t0;
			sd_bus_message_unref(reply);
			sd_bus_error_free(&err);
			return r;
		default:
			return -EINVAL;
		}
	}
}

static void bench_ctrl(enum bus_kind k, enum bench_op op, int n)
{
	brokerd_bus *bb = NULL, *owner = NULL;
	sd_bus *sb = NULL;
	uint64_t *lat = calloc((size_t)n, sizeof(*lat)), total = 0;
	const char *label = op_label[op][k != BUS_BROKERD];
	char status[160] = "ok";
	int r = 0, i = 0;

	if (broker_error[k][0]) {
		printf("@ctrl,%s,%s,%d,error: %s,,\n", bus_label[k], label, n, broker_error[k]);
		free(lat);
		return;
	}
	/* the name OPEN_CALL and GetNameOwner reach is owned by a second connection */
	if (k == BUS_BROKERD) {
		r = brokerd_bus_open_system(&bb);
		if (r >= 0 && op == OP_REACH) {
			r = brokerd_bus_open_system(&owner);
			if (r >= 0)
				r = brokerd_bus_request_name(owner, ECHO_NAME, 0);
		}
	} else {
		r = sdbus_connect(k, &sb);
		if (r >= 0 && op == OP_REACH)
			r = sd_bus_request_name(sb, ECHO_NAME, 0);
	}
	if (r < 0) {
		snprintf(status, sizeof(status), "error: set-up: %s", strerror(-r));
		goto out;
	}
	for (i = 0; i < n; i++) {
		r = ctrl_once(k, op, bb, sb, i, &lat[i]);
		if (r < 0) {
			snprintf(status, sizeof(status), "error: %s %d: %s", label, i, strerror(-r));
			break;
		}
		total += lat[i];
	}
out:
	if (strcmp(status, "ok") == 0) {
		qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
		printf("@ctrl,%s,%s,%d,ok,%.0f,%.1f\n", bus_label[k], label, n,
		       (double)n * 1e9 / (double)total, pct_us(lat, (size_t)n, 0.5));
	} else {
		printf("@ctrl,%s,%s,%d,%s,,\n", bus_label[k], label, n, status);
	}
	fflush(stdout);
	brokerd_bus_close(bb);
	brokerd_bus_close(owner);
	sd_bus_flush_close_unref(sb);
	free(lat);
}

/* ---- Memory per connection ----------------------------------------------------------- */

static void bench_mem(enum bus_kind k, int n)
{
	brokerd_bus **bb = calloc((size_t)n, sizeof(*bb));
	sd_bus **sb = calloc((size_t)n, sizeof(*sb));
	long before, after = -1;
	char status[160] = "ok";
	int r = 0;

	if (broker_error[k][0]) {
		printf("@mem,%s,%d,error: %s,,,\n", bus_label[k], n, broker_error[k]);
		goto out;
	}
	usleep(300000);
	before = rss_kb(broker_pid[k]);
	for (int i = 0; i < n && r >= 0; i++)
		r = k == BUS_BROKERD ? brokerd_bus_open_system(&bb[i]) : sdbus_connect(k, &sb[i]);
	if (r < 0) {
		snprintf(status, sizeof(status), "error: connect: %s", strerror(-r));
	} else {
		/* whatever the broker does after HELLO (brokerd: the inbox) settles */
		usleep(500000);
		after = rss_kb(broker_pid[k]);
	}
	if (strcmp(status, "ok") == 0 && before > 0 && after > 0)
		printf("@mem,%s,%d,ok,%ld,%ld,%.0f\n", bus_label[k], n, before, after,
		       (double)(after - before) * 100.0 / n);
	else
		printf("@mem,%s,%d,%s,,,\n", bus_label[k], n,
		       strcmp(status, "ok") ? status : "error: no VmRSS for the broker");
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		brokerd_bus_close(bb[i]);
		sd_bus_flush_close_unref(sb[i]);
	}
out:
	free(bb);
	free(sb);
}

/* Signals per fan-out run: fewer for more subscribers, so that the largest
 * runs stay within minutes under TCG; whole windows of WINDOW each. */
static uint64_t fan_signals(int subs)
{
	if (short_mode)
		return 3 * WINDOW;
	if (subs >= 200)
		return 6 * WINDOW;
	if (subs >= 64)
		return 16 * WINDOW;
	if (subs >= 16)
		return 64 * WINDOW;
	return 128 * WINDOW;
}

/* ---- Main ---------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const size_t rtt_sizes[] = { 64, 1024, 16384, 1048576 };
	static const size_t fan_sizes[] = { 64, 1024, 16384 };
	static const int subs_full[] = { 1, 4, 16, 64, 200 }, subs_short[] = { 1, 4 };
	const int *subs;
	struct rlimit rl;
	int nsubs;

	if (argc == 2 && strcmp(argv[1], "--short") == 0)
		short_mode = true;
	else if (argc != 1) {
		fprintf(stderr, "usage: bus-bench [--short]\n");
		return 2;
	}
	subs = short_mode ? subs_short : subs_full;
	nsubs = short_mode ? 2 : 5;
	/* hundreds of connections in one process: brokerd's take five fds each */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (mkdir(RUN_DIR, 0755) < 0 && errno != EEXIST)
		die(RUN_DIR, errno);

	broker_pid[BUS_BROKERD] = find_pid("brokerd", 1);
	if (!broker_pid[BUS_BROKERD])
		snprintf(broker_error[BUS_BROKERD], sizeof(broker_error[0]), "brokerd is not running");
	start_dbus_daemon();
	start_dbus_broker();

	printf("@env,vcpus,%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
	printf("@env,mode,%s\n", short_mode ? "short" : "full");
	printf("@env,window,%d\n", WINDOW);
	printf("@env,placement,unpinned: every process on any vCPU as the scheduler puts it\n");
	printf("@columns,rtt,bus,size,calls,status,min_us,p50_us,p90_us,p99_us,p999_us,max_us,cpu_us_per_call\n");
	printf("@columns,fanout,bus,subscribers,size,signals,status,delivered,lost,delivered_per_s,lat_p50_us,"
	       "lat_p99_us,cpu_us_per_delivered,window_timeouts\n");
	printf("@columns,ctrl,bus,op,count,status,per_s,p50_us\n");
	printf("@columns,mem,bus,connections,status,rss_before_kb,rss_after_kb,kb_per_100\n");

	/*
	 * Memory first: the other tables open hundreds of connections, and the
	 * heap a broker grew for them stays resident, so idle connections
	 * opened afterwards fit into it and cost nothing measurable.
	 */
	for (int k = 0; k <= BUS_DBUS_DAEMON; k++)
		bench_mem((enum bus_kind)k, short_mode ? 50 : 100);
	for (size_t s = 0; s < sizeof(rtt_sizes) / sizeof(rtt_sizes[0]); s++) {
		int calls = rtt_sizes[s] >= 1048576 ? (short_mode ? 5 : 100) :
			    rtt_sizes[s] >= 16384   ? (short_mode ? 30 : 1000) :
						      (short_mode ? 50 : 2000);

		for (int k = 0; k < N_BUSES; k++)
			bench_rtt((enum bus_kind)k, rtt_sizes[s], calls);
	}
	for (int n = 0; n < nsubs; n++)
		for (size_t s = 0; s < sizeof(fan_sizes) / sizeof(fan_sizes[0]); s++) {
			uint64_t signals = fan_signals(subs[n]);

			for (int k = 0; k <= BUS_DBUS_DAEMON; k++)
				bench_fanout((enum bus_kind)k, subs[n], fan_sizes[s], signals);
		}
	for (int op = 0; op < N_OPS; op++)
		for (int k = 0; k <= BUS_DBUS_DAEMON; k++)
			bench_ctrl((enum bus_kind)k, (enum bench_op)op, short_mode ? 20 : 300);

	stop_brokers();
	return 0;
}
