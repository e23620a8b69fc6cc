/* SPDX-License-Identifier: MIT */
/*
 * bench-util - bus-bench's helpers: clocks, CPU and memory of processes,
 * percentiles, sd-bus connections, and the private dbus-daemon and dbus-broker
 * it compares brokerd with.
 */
#include "tests/bench/bus-bench.h"

const char *const bus_label[N_BUSES] = {
	[BUS_BROKERD] = "brokerd",
	[BUS_BROKERD_DBUS] = "brokerd-dbus",
	[BUS_DBUS_BROKER] = "dbus-broker",
	[BUS_DBUS_DAEMON] = "dbus-daemon",
	[BUS_P2P] = "sd-bus-p2p",
	[BUS_PIPE] = "pipe",
	[BUS_SHM_RING] = "shm-ring",
};
const char *const bus_address[N_BUSES] = {
	[BUS_BROKERD_DBUS] = "unix:path=" BROKERD_DBUS_SOCKET,
	[BUS_DBUS_BROKER] = "unix:path=" BROKER_SOCKET,
	[BUS_DBUS_DAEMON] = "unix:path=" DAEMON_SOCKET,
};
/* The process that does a bus's routing, whose CPU and memory count. */
pid_t broker_pid[N_BUSES];
pid_t launcher_pid, daemon_pid;
/* Why a D-Bus broker could not be started: each of its rows says so. */
char broker_error[N_BUSES][128];

bool short_mode;

/* ---- Small helpers ---------------------------------------------------------- */

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void die(const char *what, int err)
{
	fprintf(stderr, "bus-bench: %s: %s\n", what, strerror(err));
	exit(2);
}

/* user+system time of pid in microseconds, 0 when it is gone */
uint64_t cpu_us(pid_t pid)
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

/* what f says of each of the n processes (those > 0), summed */
static uint64_t pids_sum(uint64_t (*f)(pid_t), const pid_t *pids, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0)
			sum += f(pids[i]);
	return sum;
}

uint64_t cpu_us_sum(const pid_t *pids, size_t n)
{
	return pids_sum(cpu_us, pids, n);
}

/* context switches of pid, voluntary (it slept: a wake-up each) and not, 0 when it is gone */
static uint64_t csw(pid_t pid)
{
	char path[64], line[256];
	unsigned long n;
	uint64_t sum = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %lu", &n) == 1 ||
		    sscanf(line, "nonvoluntary_ctxt_switches: %lu", &n) == 1)
			sum += n;
	fclose(f);
	return sum;
}

uint64_t csw_sum(const pid_t *pids, size_t n)
{
	return pids_sum(csw, pids, n);
}

/* resident set (VmRSS) of pid in kB, from the second field of statm */
long rss_kb(pid_t pid)
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
pid_t find_pid(const char *comm, pid_t ppid)
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

void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		die(path, errno);
}

/* Reads one byte from fd within ms; false on timeout or EOF. */
bool wait_byte(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, ms) == 1 && read(fd, &c, 1) == 1;
}

void kill_wait(pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (size_t i = 0; i < n; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The p-quantile (nearest rank) of n sorted values, in microseconds. */
double pct_us(const uint64_t *v, size_t n, double p)
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

const char *errno_label(int err)
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

int sdbus_connect(enum bus_kind k, sd_bus **ret)
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
int sdbus_p2p(int fd, bool is_server, sd_bus **ret)
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

void sdbus_loop(sd_bus *b)
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
int wait_bus(enum bus_kind k)
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

void start_dbus_daemon(void)
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
void start_dbus_broker(void)
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

void stop_brokers(void)
{
	pid_t p[2] = { launcher_pid, daemon_pid };

	for (int i = 0; i < 2; i++)
		if (p[i] > 0)
			kill(p[i], SIGTERM);
	for (int i = 0; i < 2; i++)
		if (p[i] > 0)
			waitpid(p[i], NULL, 0);
}
