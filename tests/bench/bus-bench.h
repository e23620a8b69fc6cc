/* SPDX-License-Identifier: MIT */
/*
 * bus-bench.h - what the parts of bus-bench share: the buses compared, the
 * helpers that time and account for processes, the private D-Bus brokers,
 * and one entry point per table (bus-bench.c says what the tables are).
 */
#ifndef BROKERD_BUS_BENCH_H
#define BROKERD_BUS_BENCH_H

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
#define BROKERD_DBUS_SOCKET "/run/brokerd/dbus_socket"

#define ECHO_NAME "org.brokerd.bench.Echo"
#define FAN_NAME  "org.brokerd.bench.Fan"
#define OBJ_PATH  "/org/brokerd/bench"
#define FAN_IFACE "org.brokerd.bench.Fan"
#define WINDOW	  16   /* brokerd's channels have 32 slots; the same window for every bus */
#define SAMPLES	  4096 /* latency samples kept per subscriber */
#define CALL_USEC (30ULL * 1000000)
#define ACK_MSEC  3000
#define SPIN_USEC 200 /* brokerd-spin: longer than a round trip under TCG */

/*
 * BUS_BROKERD_DBUS is the system brokerd again, through its D-Bus socket
 * with sd-bus clients: the compatibility path, reported apart from the
 * native one. BUS_SHM_RING is no bus: the fanout table's floor, a
 * shared-memory broadcast ring between the same processes (bench-fanout.c).
 */
enum bus_kind {
	BUS_BROKERD,
	BUS_BROKERD_DBUS,
	BUS_DBUS_BROKER,
	BUS_DBUS_DAEMON,
	BUS_P2P,
	BUS_PIPE,
	BUS_SHM_RING,
	N_BUSES
};
enum bench_op { OP_CONNECT, OP_NAME, OP_SUBSCRIBE, OP_REACH, N_OPS };

extern const char *const bus_label[N_BUSES];
/* sd-bus addresses of the private D-Bus brokers */
extern const char *const bus_address[N_BUSES];
/* The process that does a bus's routing, whose CPU and memory count. */
extern pid_t broker_pid[N_BUSES];
extern pid_t launcher_pid, daemon_pid;
/* Why a D-Bus broker could not be started: each of its rows says so. */
extern char broker_error[N_BUSES][128];
extern bool short_mode;

uint64_t now_ns(void);
void die(const char *what, int err);
uint64_t cpu_us(pid_t pid);
uint64_t cpu_us_sum(const pid_t *pids, size_t n);
uint64_t csw_sum(const pid_t *pids, size_t n);
long rss_kb(pid_t pid);
pid_t find_pid(const char *comm, pid_t ppid);
void write_file(const char *path, const char *text);
bool wait_byte(int fd, int ms);
void kill_wait(pid_t *pids, size_t n);
int cmp_u64(const void *a, const void *b);
double pct_us(const uint64_t *v, size_t n, double p);
const char *errno_label(int err);
int sdbus_connect(enum bus_kind k, sd_bus **ret);
int sdbus_p2p(int fd, bool is_server, sd_bus **ret);
void sdbus_loop(sd_bus *b);
int wait_bus(enum bus_kind k);
void start_dbus_daemon(void);
void start_dbus_broker(void);
void stop_brokers(void);
/* spin_usec: libbrokerd's low-latency mode in caller and server (BUS_BROKERD only; row brokerd-spin) */
void bench_rtt(enum bus_kind k, size_t size, int calls, uint64_t spin_usec);
/*
 * k: a D-Bus bus, BUS_BROKERD or BUS_SHM_RING; unbatched: brokerd's emitter
 * sends each signal on its own (BUS_BROKERD only; row brokerd-unbatched)
 */
void bench_fanout(enum bus_kind k, int nsubs, size_t size, uint64_t signals, bool unbatched);
void bench_ctrl(enum bus_kind k, enum bench_op op, int n);
void bench_mem(enum bus_kind k, int n);
uint64_t fan_signals(int subs);

#endif
