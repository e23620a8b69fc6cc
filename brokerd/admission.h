/* SPDX-License-Identifier: MIT */
/*
 * admission.h - who may connect and for how long: the per-uid connections
 * quota and the bus-wide cap (with headroom reserved for root and light
 * users) checked at accept, the HELLO deadline, pausing accept when fds run
 * out, refusals logged as a summary, and a connection's end: its grants
 * revoked in batches, its fds and memory reaped at low priority.
 *
 * Below bus.c (which accepts and reads requests); above activation.c,
 * grant.c and conn.c. Calls nothing above it.
 */
#ifndef BROKERD_ADMISSION_H
#define BROKERD_ADMISSION_H

#include "brokerd/bus-state.h"

/* Creates admission's timers and reads the connection budget RLIMIT_NOFILE leaves. */
int admission_init(struct bus *b);
/* Frees every connection and admission's timers (the bus is going). */
void admission_deinit(struct bus *b);

/*
 * Admits connected socket fd (taken over) or refuses it. 0: admitted, *ret
 * waits for HELLO. -EDQUOT: refused, and either told why and closed (*ret
 * NULL) or kept a moment to answer its first request (*ret). Else an error,
 * fd closed. The caller adds (*ret)->src, or frees *ret if it cannot.
 */
int admission_conn_new(struct bus *b, int fd, struct bus_conn **ret);
/*
 * A connection a previous brokerd had admitted (restart.c): admitted again
 * whatever the limits, with a HELLO deadline unless hello, with the
 * credentials recorded at its accept (cred). *ret is linked
 * in; the caller adds (*ret)->src.
 */
int admission_conn_restore(struct bus *b, int fd, const struct ucred *cred, bool hello,
			   struct bus_conn **ret);
/*
 * A connection admission does not own (a D-Bus client): checked against
 * its uid's connections quota and the bus-wide cap and reserve, and counted
 * in both. 0: admitted; -EDQUOT: refused (why says which limit, the refusal
 * goes into the periodic summary). admission_uncount() when it goes.
 */
int admission_count(struct bus *b, uid_t uid, char *why, size_t why_len);
void admission_uncount(struct bus *b, uid_t uid);
/* Revokes every ended connection's grants now and frees them (brokerd is handing over). */
void admission_settle(struct bus *b);
/* Frees c at once (also a connection that has not ended yet). */
void admission_conn_free(struct bus_conn *c);
/* c said HELLO: its deadline no longer applies. */
void admission_conn_hello(struct bus_conn *c);

/* c is over: gone for the others now, its fds and memory freed later. */
void admission_conn_reap_later(struct bus_conn *c);
/* A bus too busy to reap at low priority: frees a batch if the oldest waited too long. */
void admission_reap_overdue(struct bus *b);

/* accept() ran out of fds or memory (err): stop accepting until an fd is freed or a moment passed. */
void admission_accept_pause(struct bus *b, int err);

#endif
