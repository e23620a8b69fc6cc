/* SPDX-License-Identifier: MIT */
/*
 * bus-state.h - the broker's shared state: struct bus and what hangs off it
 * (connections, the channels brokerd created with the rights it granted on
 * them, well-known names, calls waiting for an activation). Types only.
 *
 * Internal to brokerd-core. The broker is a stack, each layer calling only
 * the ones below it (brokerd/README.md, "Code"):
 *   bus.c -> driver.c, admission.c -> query.c, activation.c -> grant.c -> conn.c
 * and every layer includes this header.
 */
#ifndef BROKERD_BUS_STATE_H
#define BROKERD_BUS_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "brokerd/channel.h"
#include "brokerd/log.h"
#include "protocol/ctrl.h"

struct activator_req;
struct nsview;
struct registry_peer;
struct bus_conn;
struct out_msg;

/* Connections in the order of their deadlines (the same timeout for all: FIFO). */
struct conn_fifo {
	struct bus_conn *head, *tail;
};

/* The rights a connection holds on a channel: what a revocation by its badge can take back. */
struct grant {
	uint64_t peer_id;
	uint32_t rights; /* IOIPC_SUB_*, of all caps minted for the peer */
	pid_t pid;	 /* the peer's process (brokerd's pid namespace), 0: unknown */
};

#define GRANT_ALL (IOIPC_SUB_SEND | IOIPC_SUB_RECV | IOIPC_SUB_MONITOR)

/* A channel brokerd created (its chanmgr id), with every grant on it. */
struct bus_channel {
	uint32_t id;
	enum ctrl_channel_kind kind;
	char *name; /* well-known name, unique name (inbox) or "brokerd" */
	uid_t charged_uid;
	uint32_t slots, slot_size; /* ring geometry: slot_size is the largest message */
	struct grant *grants;
	size_t n_grants, alloc_grants;
};

/* A well-known name's channels; owners and queues are the registry's. */
struct bus_name {
	char *name;
	struct bus_channel *call, *signal;
	bool activating;
	bool revoke_pending; /* an owner lost the name: its caps must die */
	struct bus_name *next;
};

/* One control connection. */
struct bus_conn {
	struct bus *bus;
	int fd;
	sd_event_source *src;
	struct ucred cred;
	gid_t *gids;
	size_t n_gids;
	int pidfd;
	char *label;
	struct nsview *nsview;	    /* its namespaces, from HELLO; NULL: brokerd's (nsview.h) */
	struct registry_peer *peer; /* after HELLO */
	bool refused;		    /* over a connection limit: its first request learns why */
	char refusal[160];	    /* "QUOTA: ..." message of the QuotaExceeded it gets */
	struct conn_fifo *fifo;	    /* waiting for HELLO (or, refused, for a request) */
	struct bus_conn *fifo_prev, *fifo_next;
	uint64_t deadline; /* CLOCK_MONOTONIC usec, while on a fifo */
	bool name_events;
	bool sizes;	    /* HELLO asked SIZES: inbox sizes told (HELLO, OPEN_INBOX, ReplyCapability) */
	bool watch_signals; /* WATCH_SIGNALS: SignalChannel for names owned later */
	bool ended_pid;	    /* OPEN_CALL asked ENDED_PID: CallReceiverEnded with the pid */
	bool monitor;
	bool dead;
	bool ended; /* gone for the others; its fds and memory go in a batch */
	struct bus_conn *reap_next;
	struct bus_channel *inbox;
	struct out_msg *out_head, *out_tail;
	unsigned int out_len, out_fds;
	size_t out_bytes;
	bool closing;		      /* over the output limit: says why, then goes */
	sd_event_source *closing_src; /* closes it if it never reads that */
	unsigned int n_caps;
	uint64_t n_subscriptions;
	struct bus_conn *prev, *next;
};

/* An OPEN_CALL waiting for its name to be owned after an activation. */
struct activation {
	struct bus_conn *conn;
	uint32_t serial;
	uint32_t flags; /* of the OPEN_CALL (CTRL_CALL_*) */
	char *name;
	sd_event_source *timer;
	struct activation *next;
};

/*
 * What the native layers ask of the D-Bus bridge (dbus-bridge.c), which
 * sits above them: set by it, NULL when no D-Bus front end runs.
 */
struct bus_bridge_hooks {
	/* A native connection ends, before its names go: calls bridged to the names it served fail. */
	void (*peer_ending)(void *bridge, struct registry_peer *p);
	/* OPEN_INBOX of a D-Bus connection (unique or well-known name): its inbox and peer, or NULL. */
	struct bus_channel *(*inbox)(void *bridge, const char *name, struct registry_peer **ret_peer);
	/* brokerd hands the bus over (restart): D-Bus connections are not, so their inboxes go now. */
	void (*handover)(void *bridge);
	/* OPEN_CALL of a name a D-Bus connection owns: brokerd receives n's calls for it. */
	int (*serve)(void *bridge, struct bus_name *n);
};

/*
 * A peer's credentials as GET_CREDENTIALS and LIST_PEERS report them, the
 * same for a native connection and a D-Bus one.
 */
struct bus_peer_creds {
	struct ucred cred; /* pid: the process that connected, whether it still runs or not */
	const gid_t *gids;
	size_t n_gids;
	int pidfd;	   /* -1: none */
	const char *label; /* NULL: none */
	uint32_t n_caps;
	char label_buf[4096]; /* where label may point */
};

struct bus {
	sd_event *event;
	int listen_fd;
	sd_event_source *listen_src, *ring_src;
	struct registry *registry;
	struct policy *policy;
	struct policy_dbus_msg *dbus_policy; /* --dbus-config's send/receive rules, for the D-Bus socket */
	struct quota *quota;
	struct service_set *services;
	struct chanmgr chanmgr;
	struct bus_conn *conns;
	struct bus_name *names;
	struct bus_channel *bus_signal;
	struct bus_channel *dbus_channel; /* D-Bus clients' messages for monitors (dbus-monitor-channel.c) */
	struct activation *activations;
	sd_bus *sdbus;
	const char *const *policy_dirs;
	const char *const *service_dirs;
	const char *dbus_config; /* --dbus-config: policy-dbus.h */
	uint64_t activation_timeout;
	const char *activator_path;
	bool dbus_systemd_activation; /* --dbus-systemd-activation: dbus-activation.c */
	const char *state_path;
	uint64_t id_reserved;		      /* ids below this are recorded in state_path */
	bool ids_failing;		      /* state_path could not be written: retrying */
	uint64_t ids_retry_usec;	      /* CLOCK_MONOTONIC: not before this */
	uint32_t lossy;			      /* IOIPC_F_LOSSY if the kernel has it, for signal channels */
	bool gc_needed;			      /* some name may have become idle */
	struct activator_req *activator_reqs; /* waiting for the activator's answer */
	/* The D-Bus front end's (dbus-activation.c): the unit of name failed to start. */
	void (*activation_failed)(void *userdata, const char *name, const char *msg);
	void *activation_failed_userdata;
	/* The D-Bus front end's (dbus-monitor-native.c), while D-Bus monitors watch native channels. */
	void (*channel_created)(void *userdata, struct bus_channel *ch);
	void *channel_created_userdata;
	uint32_t signal_serial;
	const struct bus_bridge_hooks *bridge_hooks;
	void *bridge;
	/*
	 * The D-Bus front end (dbus-front.h), NULL without one. Its connections
	 * are peers of registry too (REGISTRY_PEER_DBUS), so every name has one
	 * owner queue for both kinds of client.
	 */
	void *dbus_front;
	/* The credentials of a D-Bus peer (dbus-driver.c), set with dbus_front. */
	void (*dbus_peer_creds)(struct registry_peer *p, struct bus_peer_creds *ret);
	/*
	 * A name's primary owner changed, whatever kind old and new are: D-Bus
	 * clients get NameOwnerChanged (NameLost, NameAcquired for their own
	 * connections) and the bridge serves the name's call channel for a
	 * D-Bus owner (dbus-driver.c). Set with dbus_front.
	 */
	void (*dbus_owner_changed)(void *front, const char *name, struct registry_peer *old,
				   struct registry_peer *new);
	/*
	 * A reload (SIGHUP, ReloadConfig) applied a new policy: who may
	 * eavesdrop may have changed, and with it whether brokerd watches
	 * native traffic (dbus-monitor-native.c). Set with dbus_front.
	 */
	void (*dbus_reloaded)(void *front);

	/* Connection floods (admission.c) */
	unsigned int n_conns;	 /* admitted, with or without HELLO */
	unsigned int n_refused;	 /* refused, waiting a moment for a request to answer */
	uint64_t fd_conn_budget; /* connections RLIMIT_NOFILE leaves room for */
	struct conn_fifo hello_fifo, refused_fifo;
	sd_event_source *deadline_src; /* the earliest deadline of both fifos */
	sd_event_source *accept_src;   /* resumes accepting after EMFILE */
	bool accept_paused;
	sd_event_source *refusal_log_src; /* summary of refusals, once per interval */
	struct bus_refusals {
		uid_t uid;
		unsigned long quota, cap; /* over the uid's quota, over max_connections */
	} refusals[32];
	unsigned int n_refusals;
	unsigned long refusals_other; /* of uids beyond the table */
	unsigned long accept_pauses;
	int accept_errno;

	/* Mass disconnects (admission.c): the badges whose caps are still to be revoked */
	uint64_t *revoke_ids;
	size_t n_revoke_ids, alloc_revoke_ids;
	sd_event_source *revoke_src; /* revokes them in batches, between other work */
	/* Ended connections whose fds and memory are freed at low priority, a batch at a time */
	struct bus_conn *reap_head, *reap_tail;
	sd_event_source *reap_src;
	/* "connected", "disconnected": a flood of them would throttle brokerd on the journal */
	struct log_ratelimit conn_log;
};

#endif
