/* SPDX-License-Identifier: MIT */
/*
 * bus.h - the broker: accepts control connections, runs the op table over
 * the registry, policy, quotas and channels, and does activation. Everything
 * brokerd does except main(); tests drive it on a socket in a temp dir.
 */
#ifndef BROKERD_BUS_H
#define BROKERD_BUS_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#define BUS_ACTIVATOR_PATH "/run/brokerd/activator"

struct bus;
struct restart_fds;

struct bus_config {
	const char *const *policy_dirs;	  /* NULL: /etc/brokerd/policy.d, /usr/share/... */
	const char *const *service_dirs;  /* NULL: /etc/brokerd/services, /usr/share/... */
	const char *dbus_config;	  /* dbus-daemon XML read before policy_dirs; NULL: none */
	uint64_t activation_timeout_usec; /* 0: 25 s */
	const char *activator_path;	  /* NULL: BUS_ACTIVATOR_PATH */
	const char *state_path;		  /* keeps ids unique across restarts; NULL: none */
	bool no_channels;		  /* do not even probe the kernel */
	bool dbus_systemd_activation;	  /* D-Bus activation by ActivationRequest signals (dbus-activation.c) */
	struct restart_fds *restore;	  /* from the fd store: take the bus over (taken) */
};

int bus_new(struct bus **ret, sd_event *event, const struct bus_config *config);
struct bus *bus_free(struct bus *b);

/* Take a listening SEQPACKET socket (from sd_listen_fds or bound by main). */
int bus_listen(struct bus *b, int fd);

/*
 * Serve one connected SEQPACKET socket (non-blocking; taken over even on
 * error). -EDQUOT: over a connection limit, it is told why and closed.
 */
int bus_add_connection(struct bus *b, int fd);

/*
 * SIGTERM under systemd: hand connections, ring and state to the fd store
 * for the next brokerd (brokerd/README.md, "Restart"). 0: handed over, exit
 * 0 without bus_free(), which would tear down what the next one takes
 * over. Negative errno: nothing stored, stop as usual.
 */
int bus_handover(struct bus *b);

/* Reload policy and services. On a policy error returns -EINVAL, keeps the old policy, err says FILE:LINE. */
int bus_reload(struct bus *b, char *err, size_t err_len);

/* For STATUS=: "N peers, M names, channels: yes/no". */
void bus_status(struct bus *b, char *buf, size_t len);
bool bus_channels_available(struct bus *b);

#endif
