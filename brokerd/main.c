/* SPDX-License-Identifier: MIT */
/*
 * main.c - brokerd: command line, listening socket (socket activation or
 * binding the path), signals, sd_notify READY/STATUS/WATCHDOG. Everything
 * else lives in libbrokerd (bus.c and below).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "brokerd/bus.h"
#include "brokerd/dbus-front.h"
#include "brokerd/log.h"
#include "brokerd/policy-dbus.h"
#include "brokerd/restart.h"
#include "protocol/ctrl.h"
#include "util/macro.h"
#include "util/socket.h"

static const char *arg_address = CTRL_SOCKET_PATH;
static const char *arg_policy_dir, *arg_service_dir;
static const char *arg_dbus_config;
static bool arg_dbus_config_report, arg_dbus_systemd_activation;
static const char *arg_activator;
static const char *arg_state;
static uint64_t arg_activation_timeout;
static bool arg_no_channels;
static const char *arg_dbus_address;

static void help(void)
{
	printf("Usage: brokerd [OPTIONS]\n\n"
	       "A local message bus on io_uring IPC channels.\n\n"
	       "  -a, --address=PATH      listen on PATH when not socket-activated (default %s)\n"
	       "      --policy-dir=DIR    read policy from DIR only (default /etc/brokerd/policy.d\n"
	       "                          and /usr/share/brokerd/policy.d)\n"
	       "      --service-dir=DIR   read activation files from DIR only\n"
	       "      --dbus-config=FILE  also read dbus-daemon's XML configuration (policy, limits,\n"
	       "                          servicedirs); brokerd's own policy files apply after it\n"
	       "      --dbus-config-report  print what --dbus-config=FILE loads and every rule\n"
	       "                          brokerd does not honour as written, then exit\n"
	       "      --activator=PATH    activation helper socket (default /run/brokerd/activator)\n"
	       "      --activation-timeout=SEC  how long a call waits for an activated name (25)\n"
	       "      --state=PATH        where the next connection id is kept across restarts\n"
	       "                          (default $RUNTIME_DIRECTORY/next-id under systemd, else\n"
	       "                          ADDRESS.next-id when binding ADDRESS; \"\" for none)\n"
	       "      --no-channels       do not use kernel IPC channels (control plane only)\n"
	       "      --dbus-address=unix:path=PATH  serve D-Bus clients on PATH when not\n"
	       "                          socket-activated (brokerd-dbus.socket, fd name \"dbus\")\n"
	       "      --dbus-systemd-activation  D-Bus activation asks the bus's org.freedesktop.systemd1\n"
	       "                          (ActivationRequest signals), as dbus-daemon --systemd-activation\n"
	       "  -v, --verbose           log debug messages\n"
	       "  -h, --help              show this help\n",
	       CTRL_SOCKET_PATH);
}

static int parse_argv(int argc, char **argv)
{
	enum {
		ARG_POLICY_DIR = 0x100,
		ARG_SERVICE_DIR,
		ARG_NO_CHANNELS,
		ARG_ACTIVATOR,
		ARG_ACTIVATION_TIMEOUT,
		ARG_STATE,
		ARG_DBUS_CONFIG,
		ARG_DBUS_CONFIG_REPORT,
		ARG_DBUS_ADDRESS,
		ARG_DBUS_SYSTEMD_ACTIVATION
	};
	static const struct option options[] = { { "address", required_argument, NULL, 'a' },
						 { "policy-dir", required_argument, NULL, ARG_POLICY_DIR },
						 { "service-dir", required_argument, NULL, ARG_SERVICE_DIR },
						 { "no-channels", no_argument, NULL, ARG_NO_CHANNELS },
						 { "activator", required_argument, NULL, ARG_ACTIVATOR },
						 { "state", required_argument, NULL, ARG_STATE },
						 { "dbus-config", required_argument, NULL, ARG_DBUS_CONFIG },
						 { "dbus-config-report", no_argument, NULL, ARG_DBUS_CONFIG_REPORT },
						 { "dbus-address", required_argument, NULL, ARG_DBUS_ADDRESS },
						 { "dbus-systemd-activation", no_argument, NULL,
						   ARG_DBUS_SYSTEMD_ACTIVATION },
						 { "activation-timeout", required_argument, NULL,
						   ARG_ACTIVATION_TIMEOUT },
						 { "verbose", no_argument, NULL, 'v' },
						 { "help", no_argument, NULL, 'h' },
						 {} };
	int c;

	while ((c = getopt_long(argc, argv, "a:vh", options, NULL)) >= 0) {
		switch (c) {
		case 'a':
			arg_address = optarg;
			break;
		case ARG_POLICY_DIR:
			arg_policy_dir = optarg;
			break;
		case ARG_SERVICE_DIR:
			arg_service_dir = optarg;
			break;
		case ARG_NO_CHANNELS:
			arg_no_channels = true;
			break;
		case ARG_ACTIVATOR:
			arg_activator = optarg;
			break;
		case ARG_STATE:
			arg_state = optarg;
			break;
		case ARG_DBUS_CONFIG:
			arg_dbus_config = optarg;
			break;
		case ARG_DBUS_CONFIG_REPORT:
			arg_dbus_config_report = true;
			break;
		case ARG_DBUS_SYSTEMD_ACTIVATION:
			arg_dbus_systemd_activation = true;
			break;
		case ARG_DBUS_ADDRESS:
			arg_dbus_address = optarg;
			break;
		case ARG_ACTIVATION_TIMEOUT: {
			char *end;
			double v = strtod(optarg, &end);

			if (*end || v <= 0 || v > 3600) {
				fprintf(stderr, "brokerd: invalid timeout '%s'\n", optarg);
				return -EINVAL;
			}
			arg_activation_timeout = (uint64_t)(v * 1e6);
			break;
		}
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		case 'h':
			help();
			return 0;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "brokerd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (arg_dbus_config_report && !arg_dbus_config) {
		fprintf(stderr, "brokerd: --dbus-config-report needs --dbus-config=FILE\n");
		return -EINVAL;
	}
	return 1;
}

/*
 * What systemd passed: the listening socket of brokerd.socket, that of
 * brokerd-dbus.socket (fd name "dbus"), and what a previous brokerd left in
 * the fd store for us (restart.h), sorted by name.
 */
static int passed_fds(int *listen_fd, int *dbus_fd, struct restart_fds *store)
{
	char **names = NULL;
	int n, r = 0;

	*listen_fd = -1;
	*dbus_fd = -1;
	n = sd_listen_fds_with_names(true, &names);
	if (n < 0) {
		log_error("cannot read the fds passed by systemd: %s", strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names ? names[i] : NULL;

		if (name && strcmp(name, RESTART_FDNAME_STATE) == 0 && store->state < 0)
			store->state = fd;
		else if (name && strcmp(name, RESTART_FDNAME_KEEPER) == 0 && store->keeper < 0)
			store->keeper = fd;
		else if (name && strcmp(name, RESTART_FDNAME_KEEPER_WATCH) == 0 && store->keeper_watch < 0)
			store->keeper_watch = fd;
		else if (name && strcmp(name, RESTART_FDNAME_CONN) == 0 && store->conns)
			store->conns[store->n_conns++] = fd;
		else if (name && strcmp(name, RESTART_FDNAME_DBUS_STATE) == 0 && store->dbus_state < 0)
			store->dbus_state = fd;
		else if (name && strcmp(name, RESTART_FDNAME_DBUS_CONN) == 0 && store->dbus_conns)
			store->dbus_conns[store->n_dbus_conns++] = fd;
		else if (name && strcmp(name, "dbus") == 0 && *dbus_fd < 0)
			*dbus_fd = fd;
		else if (restart_fdname_is_stored(name)) {
			/* a second one of a kind, or another version's: not from one hand-over of ours */
			log_warning("restart: %s fd %s in the store: not taking it over",
				    restart_fdname_is_ours(name) ? "a second" : "an unknown", name);
			store->foreign = true;
			close(fd);
			if (!restart_fdname_is_ours(name)) /* restart_load() clears only ours */
				(void)sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", name);
		} else if (*listen_fd < 0)
			*listen_fd = fd;
		else {
			log_error("expected one socket from systemd, got another (%s)", name ? name : "?");
			r = -EINVAL;
		}
	}
	if (names)
		for (int i = 0; i < n; i++)
			free(names[i]);
	free(names);
	return r;
}

/* The socket from brokerd.socket (fd, or -1), or one we bind ourselves. */
static int listen_socket(int fd)
{
	struct sockaddr_un sa;

	if (fd >= 0) {
		if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
			log_error(
				"the socket passed by systemd is not a listening AF_UNIX SOCK_SEQPACKET socket");
			return -EINVAL;
		}
		log_info("using the socket passed by systemd");
		return fd;
	}
	if (unix_address(&sa, arg_address) < 0) {
		log_error("address too long: %s", arg_address);
		return -EINVAL;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)unlink(arg_address);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(arg_address, 0666) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		int r = -errno;

		log_error("cannot listen on %s: %s", arg_address, strerror(errno));
		close(fd);
		return r;
	}
	log_info("listening on %s", arg_address);
	return fd;
}

/*
 * Every connection costs fds (socket, pidfd): take all the kernel lets us
 * have, as dbus-broker does; the bus caps connections below it
 * (max_connections, brokerd/README.md "Quotas").
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warning("cannot raise RLIMIT_NOFILE to %llu: %s", (unsigned long long)rl.rlim_max,
			    strerror(errno));
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct bus *b = userdata;
	char err[512], status[256];

	log_notice("SIGHUP: reloading policy and activation files");
	(void)sd_notify(0, "RELOADING=1");
	if (bus_reload(b, err, sizeof(err)) < 0)
		log_error("reload failed, previous policy kept: %s", err);
	bus_status(b, status, sizeof(status));
	(void)sd_notifyf(0, "READY=1\nSTATUS=%s", status);
	return 0;
}

/*
 * SIGTERM: under systemd, hand the bus over to the next brokerd (a restart
 * or an upgrade) through the fd store; without one (or if that fails), stop
 * as before.
 */
static bool handed_over;
static struct dbus_front *front; /* the D-Bus front end, if it runs */

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct bus *b = userdata;

	(void)sd_notify(0, "STOPPING=1\nSTATUS=handing over to the next brokerd");
	if (b->bridge_hooks) /* not handed over: the channels brokerd made for D-Bus callers */
		b->bridge_hooks->handover(b->bridge);
	/* before the native connections: closing a D-Bus one may queue signals for them */
	if (front && b->chanmgr.available)
		(void)dbus_front_handover(front);
	handed_over = bus_handover(b) == 0;
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct bus *b = userdata;
	char status[256];

	bus_status(b, status, sizeof(status));
	(void)sd_notifyf(0, "STATUS=%s", status);
	(void)sd_event_source_set_time_relative(s, 5 * 1000000ULL);
	return 0;
}

int main(int argc, char **argv)
{
	sd_event *event = NULL;
	struct bus *bus = NULL;
	const char *pdirs[2] = { arg_policy_dir, NULL }, *sdirs[2] = { arg_service_dir, NULL };
	struct bus_config config = { 0 };
	char status[256];
	struct restart_fds store = { .state = -1, .keeper = -1, .keeper_watch = -1, .ring = -1, .dbus_state = -1 };
	_cleanup_free_ int *store_conns = NULL, *store_dbus_conns = NULL;
	int r, fd, passed, passed_dbus, n;

	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? 1 : 0;
	pdirs[0] = arg_policy_dir;
	sdirs[0] = arg_service_dir;
	if (arg_dbus_config_report) {
		static const char *const pdefault[] = { POLICY_DIR_ETC, POLICY_DIR_VENDOR, NULL };
		static const char *const sdefault[] = { SERVICE_DIR_ETC, SERVICE_DIR_VENDOR, NULL };

		r = policy_dbus_report(stdout, arg_dbus_config, arg_policy_dir ? pdirs : pdefault,
				       arg_service_dir ? sdirs : sdefault);
		return r < 0 ? 1 : 0;
	}
	config.dbus_config = arg_dbus_config;
	config.policy_dirs = arg_policy_dir ? pdirs : NULL;
	config.service_dirs = arg_service_dir ? sdirs : NULL;
	config.no_channels = arg_no_channels;
	config.activator_path = arg_activator;
	config.dbus_systemd_activation = arg_dbus_systemd_activation;
	/* Unique names stay unique across restarts: keep the next id where a restart finds it. */
	_cleanup_free_ char *state = NULL;
	if (!arg_state) {
		const char *rt = getenv("RUNTIME_DIRECTORY");

		if (rt && asprintf(&state, "%s/next-id", rt) < 0)
			state = NULL;
		else if (!rt && sd_listen_fds(false) <= 0 && asprintf(&state, "%s.next-id", arg_address) < 0)
			state = NULL;
		arg_state = state;
	}
	config.state_path = arg_state && *arg_state ? arg_state : NULL;
	config.activation_timeout_usec = arg_activation_timeout;

	/* Blocked before any thread or fd is created; delivered through sd-event. */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGHUP);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	(void)sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	raise_nofile();
	n = sd_listen_fds(false);
	store_conns = calloc(n > 0 ? (size_t)n : 1, sizeof(int));
	store_dbus_conns = calloc(n > 0 ? (size_t)n : 1, sizeof(int));
	if (!store_conns || !store_dbus_conns)
		return 1;
	store.conns = store_conns;
	store.dbus_conns = store_dbus_conns;
	r = passed_fds(&passed, &passed_dbus, &store);
	if (r < 0)
		goto out;
	if (store.state >= 0 || store.keeper >= 0 || store.keeper_watch >= 0 || store.n_conns > 0 ||
	    store.dbus_state >= 0 || store.n_dbus_conns > 0)
		config.restore = &store;
	r = sd_event_default(&event);
	if (r < 0)
		goto out;
	r = bus_new(&bus, event, &config);
	if (r < 0) {
		log_error("cannot set up the bus: %s", strerror(-r));
		goto out;
	}
	fd = listen_socket(passed);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	r = bus_listen(bus, fd);
	if (r < 0)
		goto out;
	if (passed_dbus >= 0 || arg_dbus_address) {
		r = dbus_front_new(&front, bus, event);
		if (r >= 0)
			r = passed_dbus >= 0 ? dbus_front_listen(front, passed_dbus) :
					       dbus_front_listen_address(front, arg_dbus_address);
		if (r < 0)
			goto out;
	}
	/* The D-Bus connections of a previous brokerd, if it handed the bus over; else they close. */
	if (front && store.restored && store.dbus_state >= 0) {
		(void)dbus_front_restore(front, store.dbus_state, store.dbus_conns, store.n_dbus_conns);
	} else {
		if (store.dbus_state >= 0)
			close(store.dbus_state);
		for (size_t i = 0; i < store.n_dbus_conns; i++)
			close(store.dbus_conns[i]);
	}
	store.dbus_state = -1;
	store.n_dbus_conns = 0;
	(void)sd_event_add_signal(event, NULL, SIGHUP, on_sighup, bus);
	(void)sd_event_add_signal(event, NULL, SIGTERM, on_sigterm, bus);
	(void)sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
	(void)sd_event_set_watchdog(event, true); /* WATCHDOG=1 at half of WatchdogSec= */
	sd_event_add_time_relative(event, NULL, CLOCK_MONOTONIC, 5 * 1000000ULL, 0, on_status_timer, bus);

	bus_status(bus, status, sizeof(status));
	(void)sd_notifyf(0, "READY=1\nSTATUS=%s", status);
	log_info("brokerd ready: %s", status);
	r = sd_event_loop(event);
	if (handed_over) {
		/* Not bus_free(): it would destroy the channels the next brokerd takes over. */
		sd_event_unref(event);
		return 0;
	}
	(void)sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
out:
	dbus_front_free(front);
	bus_free(bus);
	sd_event_unref(event);
	return r < 0 ? 1 : 0;
}
