/* SPDX-License-Identifier: MIT */
/*
 * bus-bench - brokerd against dbus-broker and dbus-daemon in one boot of the
 * guest image (tests/bench/run-bus starts it there; the integration test
 * bench-bus runs its short mode). brokerd is the system service; the two
 * D-Bus brokers are started here as private buses on sockets under
 * /run/bus-bench with the same permissive session-like configuration, and
 * are driven by sd-bus clients, brokerd by libbrokerd and, as the bus
 * "brokerd-dbus", by sd-bus clients on its D-Bus socket. The same payloads,
 * counts and window go to every bus, one bus after the other for each
 * parameter, so that drift within a boot hits them alike.
 *
 * Tables (one CSV line each, prefixed by '@' and the table name; what the
 * columns are is printed first as '@columns,...'):
 *   rtt     method call round trip (echo of an "ay" body) at 64 B .. 1 MiB:
 *           brokerd, brokerd's D-Bus socket (brokerd-dbus), dbus-broker, dbus-daemon, a direct sd-bus connection over
 *           a socketpair, and a pipe ping-pong as the blocking floor;
 *   fanout  signals from one emitter to N subscribers, the emitter waiting
 *           for every subscriber's acknowledgement (over a pipe) every
 *           WINDOW signals so no bus runs into its queue limits; delivered
 *           signals per second, end-to-end latency, lost signals;
 *   ctrl    control-plane operations per second: connect+HELLO, REQUEST_NAME,
 *           SUBSCRIBE, OPEN_CALL against Hello, RequestName, AddMatch and
 *           GetNameOwner (what a D-Bus client does to reach a name);
 *   mem     the broker's VmRSS before and after N idle connections;
 *   copies  how many times libbrokerd and the kernel copy a message's bytes
 *           on each side, by design, for each of brokerd's paths (what the
 *           code does, not a measurement: see client/README.md).
 * rtt also has the row brokerd-spin: brokerd with libbrokerd's low-latency
 * mode (brokerd_bus_set_spin(), SPIN_USEC) in the caller and the server.
 * fanout also has the row brokerd-unbatched (one submit per signal) and
 * the row shm-ring: no bus, the floor, the same emitter and subscribers
 * with the same window on a shared-memory broadcast ring (a memfd of 32
 * slots, a futex to sleep on), each subscriber copying a signal out of
 * its slot before its handler sees it.
 * CPU columns are user+system time of every process involved (client,
 * server or emitter and subscribers, the broker) from /proc/PID/stat, per
 * call or per delivered signal. A size that a bus cannot carry is reported
 * as "n/a: <errno name>", never left out; an unexpected failure as
 * "error: ...". Speed is never judged here.
 *
 * usage: bus-bench [--short] [--fanout-only SUBS SIZES]
 *   --fanout-only 1,4,16 64,16384: only the fanout table (and copies), for
 *   these subscriber counts and sizes, at the full mode's counts.
 */
#include "tests/bench/bus-bench.h"

/* ---- Copies per message --------------------------------------------------------------- */

/*
 * What libbrokerd's design copies, per side, on each of brokerd's paths
 * (client/README.md): the library encodes a message straight into its send
 * buffer, the header and then the body (the byte API's bytes laid out as
 * the "ay" right there: one copy), the kernel copies it into the channel's
 * slot and out into the receiver's multishot buffer, where the library
 * reads it in place; call channels are received single-shot and copied
 * into a message of their own, and so is a message the application keeps
 * (brokerd_bus_call()'s reply). A body above the slot travels in a sealed
 * memfd: written once from where it lies (the kernel's copy into the
 * memfd, none by the library; only the header goes through the slot),
 * read by every receiver with one pread() into a buffer of the library's
 * up to 64 KiB (the kernel's copy, cheaper than a mapping's page faults),
 * mapped above that.
 */
static void print_copies(void)
{
	static const struct {
		const char *path;
		int send_library, send_kernel, recv_kernel, recv_library;
	} rows[] = {
		{ "signal-inline", 1, 1, 1, 0 },
		{ "signal-kept", 1, 1, 1, 1 },
		{ "call-inline", 1, 1, 1, 1 },
		{ "reply-inline-async", 1, 1, 1, 0 },
		{ "reply-inline-sync", 1, 1, 1, 1 },
		{ "body-memfd-read", 0, 1, 1, 0 },
		{ "body-memfd-mapped", 0, 1, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("@copies,brokerd,%s,ok,%d,%d,%d,%d\n", rows[i].path, rows[i].send_library,
		       rows[i].send_kernel, rows[i].recv_kernel, rows[i].recv_library);
}

/* ---- Fan-out --------------------------------------------------------------------------- */

/* Every fanout row of one subscriber count and size, one after the other, the floor last. */
static void fanout_rows(int subs, size_t size)
{
	uint64_t signals = fan_signals(subs);

	for (int k = 0; k <= BUS_DBUS_DAEMON; k++) {
		bench_fanout((enum bus_kind)k, subs, size, signals, false);
		if (k == BUS_BROKERD)
			bench_fanout(BUS_BROKERD, subs, size, signals, true);
	}
	bench_fanout(BUS_SHM_RING, subs, size, signals, false);
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

	int only_subs[8], n_only_subs = 0;
	size_t only_sizes[8];
	int n_only_sizes = 0;

	if (argc == 2 && strcmp(argv[1], "--short") == 0)
		short_mode = true;
	else if (argc == 4 && strcmp(argv[1], "--fanout-only") == 0) {
		for (char *t = strtok(argv[2], ","); t && n_only_subs < 8; t = strtok(NULL, ","))
			only_subs[n_only_subs++] = atoi(t);
		for (char *t = strtok(argv[3], ","); t && n_only_sizes < 8; t = strtok(NULL, ","))
			only_sizes[n_only_sizes++] = (size_t)atol(t);
	} else if (argc != 1) {
		fprintf(stderr, "usage: bus-bench [--short] [--fanout-only SUBS SIZES]\n");
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
	/* the same process serves the D-Bus socket */
	broker_pid[BUS_BROKERD_DBUS] = broker_pid[BUS_BROKERD];
	memcpy(broker_error[BUS_BROKERD_DBUS], broker_error[BUS_BROKERD], sizeof(broker_error[0]));
	start_dbus_daemon();
	start_dbus_broker();

	printf("@env,vcpus,%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
	printf("@env,mode,%s\n", short_mode ? "short" : "full");
	printf("@env,window,%d\n", WINDOW);
	printf("@env,placement,unpinned: every process on any vCPU as the scheduler puts it\n");
	printf("@columns,rtt,bus,size,calls,status,min_us,p50_us,p90_us,p99_us,p999_us,max_us,cpu_us_per_call\n");
	printf("@columns,fanout,bus,subscribers,size,signals,status,delivered,lost,delivered_per_s,lat_p50_us,"
	       "lat_p99_us,cpu_us_per_delivered,window_timeouts,emitter_csw_per_signal,subscriber_csw_per_delivered\n");
	printf("@columns,ctrl,bus,op,count,status,per_s,p50_us\n");
	printf("@columns,mem,bus,connections,status,rss_before_kb,rss_after_kb,kb_per_100\n");
	printf("@columns,copies,bus,path,status,send_library,send_kernel,recv_kernel,recv_library\n");
	print_copies();
	if (n_only_subs) {
		for (int n = 0; n < n_only_subs; n++)
			for (int s = 0; s < n_only_sizes; s++)
				fanout_rows(only_subs[n], only_sizes[s]);
		stop_brokers();
		return 0;
	}

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

		for (int k = 0; k <= BUS_PIPE; k++)
			bench_rtt((enum bus_kind)k, rtt_sizes[s], calls, 0);
		bench_rtt(BUS_BROKERD, rtt_sizes[s], calls, SPIN_USEC);
	}
	for (int n = 0; n < nsubs; n++)
		for (size_t s = 0; s < sizeof(fan_sizes) / sizeof(fan_sizes[0]); s++)
			fanout_rows(subs[n], fan_sizes[s]);
	for (int op = 0; op < N_OPS; op++)
		for (int k = 0; k <= BUS_DBUS_DAEMON; k++)
			bench_ctrl((enum bus_kind)k, (enum bench_op)op, short_mode ? 20 : 300);

	stop_brokers();
	return 0;
}
