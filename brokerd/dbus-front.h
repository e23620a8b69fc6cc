/* SPDX-License-Identifier: MIT */
/*
 * dbus-front.h - brokerd's D-Bus front end: D-Bus clients on an AF_UNIX
 * stream socket (/run/brokerd/dbus_socket), next to the native control
 * socket and served by the same process and event loop. dbus-conn.c is the
 * transport and the routing (SASL, buffering, fds, SENDER, unicast and
 * matched broadcast, reply tracking), dbus-driver.c the org.freedesktop.DBus
 * driver. Both include this header; the daemon calls only the functions
 * of the last two sections.
 *
 * One bus, two protocols, as far as it goes today (brokerd/README.md,
 * "D-Bus clients"): D-Bus connections are peers of the native registry
 * (REGISTRY_PEER_DBUS), so that no unique name is ever given twice and a
 * well-known name has one owner queue whoever asks; quotas and the
 * own/send policy are the native ones, both protocols list both kinds of
 * names, and calls and signals between a D-Bus and a native client go
 * through dbus-bridge.c.
 */
#ifndef BROKERD_DBUS_FRONT_H
#define BROKERD_DBUS_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "brokerd/log.h"
#include "protocol/dbus-match.h"
#include "protocol/dbus-message.h"
#include "protocol/dbus-sasl.h"

#define DBUS_SOCKET_PATH      "/run/brokerd/dbus_socket"
#define DBUS_DRIVER_NAME      "org.freedesktop.DBus"
#define DBUS_DRIVER_PATH      "/org/freedesktop/DBus"
#define DBUS_DRIVER_INTERFACE "org.freedesktop.DBus"

/* Connections over a limit kept until their Hello is refused (or its deadline); more are closed. */
#define DBUS_REFUSED_MAX 64U

struct bus;
struct bridge_peer;
struct dbus_bridge;
struct registry;
struct registry_peer;

struct dbus_out {
	uint8_t *data;
	size_t len, pos;
	int *fds;
	unsigned int n_fds;
	struct dbus_out *next;
};

struct dbus_match {
	char *text; /* canonical, to find it again for RemoveMatch */
	struct dbus_match_rule rule;
	bool eavesdrop; /* eavesdrop='true': also unicast messages to others, as the policy allows */
	struct dbus_match *next;
};

struct dbus_conn {
	struct dbus_front *front;
	int fd;
	sd_event_source *src, *hello_timer;
	struct ucred cred;
	gid_t *gids;
	size_t n_gids;
	int pidfd;
	struct dbus_sasl sasl;
	struct registry_peer *peer; /* after Hello */
	const char *name;	    /* unique name after Hello, else "(no hello)" */
	char unique[32];	    /* the unique name, kept after the peer is gone */
	bool charged;		    /* counted by admission_count() */
	char *refused;		    /* over a connection limit (why): its Hello gets LimitsExceeded */
	/* input: bytes and fds not yet part of a whole message */
	uint8_t *in;
	size_t in_len, in_cap;
	int *in_fds;
	size_t n_in_fds;
	/* output */
	struct dbus_out *out_head, *out_tail;
	size_t out_bytes;
	unsigned int out_fds;
	/* what the input buffer, its fds and the output hold, charged to the uid (dbus-budget.c) */
	uint64_t budget_bytes;
	unsigned int budget_fds;
	bool paused;				   /* not read until its uid's budget has room */
	struct dbus_conn *paused_prev, *paused_next; /* the front's list of paused connections */
	struct dbus_match *matches;
	unsigned int n_matches;
	unsigned int n_replies; /* calls it made that wait for a reply */
	struct bridge_peer *bridge; /* its calls to native services (dbus-bridge.c), if any */
	struct chan *monitor_send;  /* copies of its messages for native monitors (dbus-monitor-channel.c) */
	bool monitor;		/* BecomeMonitor: receive-only, matches are its monitor rules */
	bool write_broken;	/* its peer hung up: what it sent is still read, nothing is written */
	bool dead;
	struct dbus_conn *prev, *next;
};

/*
 * A method call waiting for its reply: only that reply may pass (unsolicited
 * ones are refused). The front's list is in deadline order, so that one
 * timer, armed for the first, times them all out.
 */
struct dbus_reply {
	struct dbus_conn *caller, *callee;
	uint32_t serial;   /* the caller's */
	uint64_t deadline; /* CLOCK_MONOTONIC usec; UINT64_MAX: none (reply_timeout_ms 0) */
	struct dbus_reply *prev, *next;
};

struct dbus_front {
	struct bus *bus;
	sd_event *event;
	int listen_fd;
	sd_event_source *listen_src;
	struct registry *registry; /* the bus's (struct bus), peers and names of both protocols */
	struct dbus_conn *conns;
	struct dbus_reply *replies, *replies_tail; /* by deadline */
	sd_event_source *reply_timer;		   /* for the first deadline */
	struct dbus_bridge *bridge; /* calls to native services; NULL without kernel channels */
	char guid[33];
	uint32_t serial;			  /* the driver's */
	unsigned long unsolicited;		  /* replies refused */
	struct dbus_activation_state *activation; /* dbus-activation.c, created on first use */
	unsigned int n_monitors;		  /* dbus-monitor.c */
	struct dbus_native_monitor *native_monitor; /* dbus-monitor-native.c, while monitors exist */
	struct dbus_monitor_channel *monitor_channel; /* dbus-monitor-channel.c */
	unsigned int n_refused;			  /* connections with refused set */
	unsigned int n_eavesdrop;		  /* rules with eavesdrop='true', of all connections */
	uint32_t stats_serial;			  /* Debug.Stats: one a reply, as dbus-daemon counts */
	/* dbus-budget.c */
	uint64_t budget_total;		    /* dbus_bytes charged to all uids but root */
	struct dbus_conn *paused;	    /* connections not read for want of budget */
	sd_event_source *resume_src;	    /* looks at them again once something was released */
	struct log_ratelimit budget_log;    /* connections closed over their output limits */
	unsigned long full_refused;	    /* messages refused: their destination's queue was full */
};

/* ---- dbus-conn.c ----------------------------------------------------------- */

/* Queue a message (taken: data and fds, freed on failure) for c; a slow reader over its limit is killed. */
int dbus_conn_queue(struct dbus_conn *c, void *data, size_t len, int *fds, unsigned int n_fds);
/* Write a message from the driver to c (sender org.freedesktop.DBus); h->serial is filled in. */
int dbus_conn_send_driver(struct dbus_conn *c, struct dbus_header *h, const void *body, size_t body_len);
/* The same, shown to monitors only: the error for a message that wanted no reply. */
int dbus_conn_monitor_driver(struct dbus_conn *c, struct dbus_header *h, const void *body, size_t body_len);
/* A signal from the driver to every connection with a matching rule (destination NULL) or to one. */
void dbus_front_driver_signal(struct dbus_front *f, struct dbus_conn *dest, const char *member,
			      const char *signature, const void *body, size_t body_len);
/*
 * A signal m (sender stamped) with its fds to every connection with a
 * matching rule; sender_name, if not NULL, is the native name whose signal
 * channel it came from (dbus-bridge.c): it goes only to connections the
 * policy lets receive that name's signals.
 */
void dbus_front_broadcast(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			  struct registry_peer *sender_peer, const char *sender_name);
/*
 * m (stamped), from sender (a D-Bus or a native client; NULL: gone since)
 * to recipient (NULL: a native client): a copy to every other connection
 * with a matching eavesdrop='true' rule that the policy lets eavesdrop
 * (monitors have theirs already). lossy: one whose output cannot take it
 * as a message it did not ask for misses it (what native clients send
 * each other, which nobody waits for).
 */
void dbus_front_eavesdrop(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			  struct registry_peer *sender, struct dbus_conn *recipient, bool lossy);
void dbus_conn_kill(struct dbus_conn *c, const char *why);
/*
 * A call m of c that wants a reply while c has max_replies_per_connection
 * calls waiting: answered with LimitsExceeded, true (m goes nowhere).
 */
bool dbus_conn_replies_full(struct dbus_conn *c, const struct dbus_message *m);
struct dbus_conn *dbus_front_conn_by_name(struct dbus_front *f, const char *name);
/* The pid of the process that connected while it runs (pidfd), else 0. */
pid_t dbus_conn_pid(struct dbus_conn *c);
/* Writes what is queued for c as far as its socket takes it; <0: c was killed. */
int dbus_conn_flush(struct dbus_conn *c);
/* Frees the connections that died (with what goes with them: names, waiting calls) now. */
void dbus_front_reap(struct dbus_front *f);
/*
 * A restarted brokerd's connection on socket fd (taken), authenticated
 * before (dbus-restart.c): counted as accept counts it (dead if over the
 * quota), reading. -ENOMEM with *ret dead or NULL.
 */
int dbus_conn_adopt(struct dbus_front *f, int fd, bool fds_agreed, struct dbus_conn **ret);
/* A call from caller to callee waiting for its reply until deadline (restored). */
int dbus_front_reply_restore(struct dbus_front *f, struct dbus_conn *caller, struct dbus_conn *callee,
			     uint32_t serial, uint64_t deadline);

/*
 * Can c take a message of len bytes with n_fds fds on top of what is queued
 * for it (max_outgoing_bytes, max_outgoing_unix_fds, its uid's dbus_bytes
 * and dbus_fds; bulk: a message c did not ask for, held to the part of its
 * uid's budget bulk may use)? If not, why (for the log).
 */
bool dbus_conn_out_room(struct dbus_conn *c, size_t len, unsigned int n_fds, bool bulk, char *why, size_t why_len);
/* dbus-budget.c: a paused connection whose next read now fits its uid's budget is read again. */
bool dbus_conn_input_fits(struct dbus_conn *c);
void dbus_conn_input_resume(struct dbus_conn *c);

/* ---- dbus-budget.c: what brokerd holds for D-Bus connections, per uid ---- */

/*
 * Would its uid's dbus_bytes and dbus_fds (and max_dbus_bytes) take bytes
 * and fds more for c? Bulk (a large message read, a message c did not ask
 * for) stops a quarter short of the uid's limits.
 */
bool dbus_budget_fits(const struct dbus_conn *c, uint64_t bytes, unsigned int fds, bool bulk);
/* The most of its uid's dbus_bytes that c may use, for bulk or not. */
uint64_t dbus_budget_limit(const struct dbus_conn *c, bool bulk);
/* Charged to c's uid whatever the limits: what fits was asked before, or it is held already. */
void dbus_budget_charge(struct dbus_conn *c, uint64_t bytes, unsigned int fds);
/* Given back; paused connections are looked at again. */
void dbus_budget_release(struct dbus_conn *c, uint64_t bytes, unsigned int fds);
/* c is not read until its next read fits (dbus_conn_input_fits()). */
void dbus_budget_pause(struct dbus_conn *c);
/* c goes: whatever is still charged for it is given back. */
void dbus_budget_conn_gone(struct dbus_conn *c);
void dbus_budget_init(struct dbus_front *f);
void dbus_budget_deinit(struct dbus_front *f);

/* ---- dbus-driver.c --------------------------------------------------------- */

/*
 * A name's primary owner changed (struct bus's dbus_owner_changed, from the
 * registry's callback in driver.c), whatever kind old and new are:
 * NameLost, NameOwnerChanged, NameAcquired, the bridge's part, what waited
 * for an activation.
 */
void dbus_driver_owner_changed(void *front, const char *name, struct registry_peer *old,
			       struct registry_peer *new);
/* A message to org.freedesktop.DBus (sender stamped). Returns <0 to drop the connection. */
int dbus_driver_dispatch(struct dbus_conn *c, struct dbus_message *m);
/* A connection goes: its names and what others see of it. */
void dbus_driver_conn_gone(struct dbus_conn *c);
/* The credentials of a D-Bus peer, for native clients (struct bus's dbus_peer_creds). */
struct bus_peer_creds;
void dbus_driver_peer_creds(struct registry_peer *p, struct bus_peer_creds *cr);
/* An error reply to m from the driver (if m wants one). */
int dbus_driver_reply_error(struct dbus_conn *c, const struct dbus_message *m, const char *name,
			    const char *text);

/* ---- dbus-activation.c: activatable names for D-Bus clients --------------- */

/*
 * A message from c to name, which has no owner (taken: *fds and m->data when
 * it returns 1). 0: name is not activatable, or m asked not to start it
 * (NO_AUTO_START): the caller refuses it as usual. 1: it waits for the name
 * to be owned (then routed as if sent then) or was answered with an error.
 */
int dbus_activation_queue(struct dbus_conn *c, struct dbus_message *m, int **fds);
/*
 * A message from c about to be shown to monitors and routed: if it starts a
 * name through systemd on this bus, the ActivationRequest goes now, so that
 * monitors see it first, as dbus-daemon shows them.
 */
void dbus_activation_before_monitors(struct dbus_conn *c, const struct dbus_message *m);
/* StartServiceByName: 0 and *started (1 now, or 2 already running), 1 with an error set, <0. */
int dbus_activation_start_by_name(struct dbus_conn *c, const struct dbus_message *m, const char *name,
				  uint32_t *result, const char **error, char *text, size_t text_len);
/* name was owned: what waited for it goes on (from the registry callback). */
void dbus_activation_owned(struct dbus_front *f, const char *name);
/* A signal from c to org.freedesktop.DBus: systemd's ActivationFailure (from systemd1's owner only). */
void dbus_activation_signal(struct dbus_conn *c, const struct dbus_message *m);
/* c goes: what it sent that waits is dropped. */
void dbus_activation_conn_gone(struct dbus_conn *c);
/* UpdateActivationEnvironment: KEY=VALUE set for what is started later (taken). */
int dbus_activation_setenv(struct dbus_front *f, const char *key, const char *value);
/*
 * UpdateActivationEnvironment's n KEY=VALUE, with --dbus-systemd-activation:
 * SetEnvironment to systemd (kept until org.freedesktop.systemd1 is owned).
 */
int dbus_activation_env_forward(struct dbus_front *f, char *const *kv, size_t n);
/* The activation state, the XML configuration read for it (at the front's start). */
int dbus_activation_init(struct dbus_front *f);
void dbus_activation_free(struct dbus_front *f);
/* The XML configuration says <type>system</type>. */
bool dbus_activation_system_bus(struct dbus_front *f);
/* Route a stamped message from c as if it had just come (dbus-conn.c); *fds taken. */
int dbus_conn_route(struct dbus_conn *c, struct dbus_message *m, int **fds);

/* ---- dbus-monitor.c: BecomeMonitor ---------------------------------------- */

/* A copy of every message on the bus (stamped) to each monitor whose rules match it. */
void dbus_monitor_message(struct dbus_front *f, const struct dbus_message *m, const int *fds);
/* The same for a message the driver wrote (data, len), parsed only if somebody monitors. */
void dbus_monitor_driver_message(struct dbus_front *f, const void *data, size_t len);
/*
 * What the bridge passes from a native client to the D-Bus side: a signal
 * that came on the signal channel of native name sender_name (m), or a
 * call or reply it wrote for a D-Bus connection (data, len, with n_fds fds).
 */
void dbus_monitor_native(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			 const char *sender_name);
void dbus_monitor_written(struct dbus_front *f, const void *data, size_t len, const int *fds, unsigned int n_fds);
/* c, whose names are gone already, becomes a monitor with rules (parsed, taken; NULL: everything). */
void dbus_monitor_become(struct dbus_conn *c, struct dbus_match *rules);
/*
 * A message between native clients (dbus-monitor-native.c) to the monitors
 * whose rules match, each with its fds; one whose output backs up misses it.
 */
void dbus_monitor_native_copy(struct dbus_front *f, const struct dbus_message *m, const int *fds);

/* ---- dbus-monitor-native.c: D-Bus monitors of native traffic ------------- */

/*
 * Monitors or eavesdroppers came or went (BecomeMonitor, AddMatch,
 * RemoveMatch, a restart's rules): brokerd watches the native channels
 * (MONITOR caps) while there is a monitor or an eavesdrop='true' rule of a
 * connection the policy may let eavesdrop, and only then.
 */
void dbus_monitor_native_update(struct dbus_front *f);
/* The policy was reloaded (struct bus's dbus_reloaded): who may eavesdrop is judged again. */
void dbus_monitor_native_reloaded(void *front);
/* c goes (monitor or not): what it sent is shown first; the last watcher's end stops the watch. */
void dbus_monitor_native_conn_gone(struct dbus_conn *c);
void dbus_monitor_native_stop(struct dbus_front *f);

/* ---- dbus-monitor-channel.c: native monitors of D-Bus traffic ------------ */

/* brokerd's channel for native monitors (kind CTRL_CHANNEL_DBUS), if the kernel has monitors. */
int dbus_monitor_channel_new(struct dbus_front *f);
/* Destroys it (stop, restart: the next brokerd makes its own). */
void dbus_monitor_channel_free(struct dbus_front *f);
/* m (stamped) from c: a copy on it if it goes to D-Bus clients only and a native monitor watches. */
void dbus_monitor_channel_copy(struct dbus_conn *c, const struct dbus_message *m, const int *fds);
void dbus_monitor_channel_conn_gone(struct dbus_conn *c);

/* ---- dbus-restart.c: D-Bus connections across a restart ------------------- */

/*
 * SIGTERM under systemd, after the bridge let go of its channels and before
 * the native hand-over (restart.h): stops reading, flushes, closes what
 * cannot be handed over, and stores the rest with their state in the fd
 * store. 0: stored. Negative errno: nothing stored; the connections close
 * with the process, as before.
 */
int dbus_front_handover(struct dbus_front *f);
/*
 * At start, once the native bus was taken over: the connections a
 * previous brokerd stored, with their names, match rules and waiting
 * calls. Takes state_fd and every fd of fds. Returns how many connections
 * came back; 0 also when the state was unusable (every fd closed: the
 * clients see EOF and reconnect).
 */
int dbus_front_restore(struct dbus_front *f, int state_fd, int *fds, size_t n_fds);
/*
 * What dbus_front_restore() checks of a state before it touches anything
 * (those of its checks that need no running bus): 0 usable, -EPROTO or
 * -EBADMSG not, -ENOMEM. For fuzz-restart and the unit tests.
 */
int dbus_front_state_check(const void *data, size_t size);

/* ---- the daemon ------------------------------------------------------------ */

int dbus_front_new(struct dbus_front **ret, struct bus *bus, sd_event *event);
struct dbus_front *dbus_front_free(struct dbus_front *f);
/* Serve a listening AF_UNIX SOCK_STREAM socket (taken; -EINVAL if it is not one). */
int dbus_front_listen(struct dbus_front *f, int fd);
/* Bind and serve a D-Bus address ("unix:path=PATH", the path replaced if it exists, mode 0666). */
int dbus_front_listen_address(struct dbus_front *f, const char *address);

#endif
