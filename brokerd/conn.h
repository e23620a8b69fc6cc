/* SPDX-License-Identifier: MIT */
/*
 * conn.h - a control connection's transport: sending (queued when the
 * client does not read), replies and errors to a request, signals, and the
 * credentials read at accept with the policy checks made on them.
 *
 * The lowest layer of the broker: includes bus-state.h and the modules
 * below the broker (protocol, policy, quota), calls nothing above it.
 */
#ifndef BROKERD_CONN_H
#define BROKERD_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "brokerd/bus-state.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "protocol/ctrl.h"

/* Its unique name, or "(no hello)". */
const char *conn_name(struct bus_conn *c);
/* The native connection behind a registry peer; NULL for none or a D-Bus client's. */
struct bus_conn *conn_of_peer(struct registry_peer *p);

/*
 * Sends a finished writer's message, or queues it (pausing the input) if the
 * socket is full; fds in w are borrowed. A client with too much queued, or
 * whose socket fails, is killed: -ENOBUFS or the error.
 */
int conn_send(struct bus_conn *c, struct ctrl_writer *w);
/* Sends what is queued, as far as the socket takes it. */
int conn_flush(struct bus_conn *c);
/*
 * Whether c has read enough of what it was sent for something optional
 * (a reply capability) to go out: its queue in brokerd is less than half
 * full, so optional messages never push a slow reader over its limit.
 */
bool conn_has_room(struct bus_conn *c);
/* Frees what is queued, unsent. */
void conn_out_clear(struct bus_conn *c);
/* Gives up on c from anywhere: its event handler frees it. */
void conn_kill(struct bus_conn *c);

/* A reply to m; the caller writes the body and sends it. */
int conn_reply_init(struct ctrl_writer *w, const struct ctrl_message *m);
/* An error reply to m (logged at debug level). */
int conn_reply_error(struct bus_conn *c, const struct ctrl_message *m, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* QuotaExceeded for quota k of c's uid, with a journal warning. */
int conn_reply_quota(struct bus_conn *c, const struct ctrl_message *m, enum quota_kind k);

/* Sends signal w, if c is alive and said HELLO; nothing to report otherwise. */
void conn_signal(struct bus_conn *c, struct ctrl_writer *w);
/* A signal whose body is one name (NameLost, NameAcquired without caps). */
void conn_signal_name(struct bus_conn *c, enum ctrl_signal s, const char *name);

/*
 * The credentials of the peer on socket fd, for native and D-Bus
 * connections alike: SO_PEERCRED (uid and gid -1 when unknown, matching
 * only "default" rules), the supplementary groups from SO_PEERGROUPS
 * (*n_gids may be 0; when they cannot be read, the primary group alone;
 * *gids NULL only when out of memory; room for one at least otherwise),
 * SO_PEERPIDFD (-1 when the kernel has none).
 */
void peer_creds_read(int fd, struct ucred *cred, gid_t **gids, size_t *n_gids, int *pidfd);
/* peer_creds_read() for c, and its security label (SO_PEERSEC). */
void conn_creds_read(struct bus_conn *c);
/*
 * The pid of the process that connected, as long as its pidfd says it is
 * still running; 0 once it has exited (the pid may name another process
 * by now) or when there is no pidfd to ask (no SO_PEERPIDFD: before 6.5).
 */
pid_t conn_pid(struct bus_conn *c);
/* The same for any connection's pid and pidfd (-1: none), native or D-Bus. */
pid_t conn_pid_running(int pidfd, pid_t pid);
/* Root, or brokerd's own uid. */
bool conn_privileged(struct bus_conn *c);
/* May c do a on name? why (if not NULL) gets the deciding rule. */
bool conn_allowed(struct bus_conn *c, enum policy_action a, const char *name, char *why, size_t why_len);

#endif
