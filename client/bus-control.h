/* SPDX-License-Identifier: MIT */
/*
 * bus-control.h - the control connection's transport (bus-control.c).
 */
#ifndef BROKERD_CLIENT_BUS_CONTROL_H
#define BROKERD_CLIENT_BUS_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include "client/bus-internal.h"

void ctrl_reply_done(struct ctrl_reply *r);
#define _cleanup_ctrl_reply_ _cleanup_(ctrl_reply_done)
/* Takes fd i out of a reply so that ctrl_reply_done() does not close it: the
 * fd, or -1 when the reply has none there. */
int ctrl_reply_take_fd(struct ctrl_reply *r, unsigned int i);
int bus_ctrl_error_to_errno(const char *name);

/* Sends a finished request and waits for its reply: 0, or -errno (a control
 * ERROR is mapped to an errno and kept in bus->error_name/message). With ret
 * NULL it only sends: the reply is dropped when it comes. A broken connection
 * is -ECONNRESET (-EPROTO for garbage): the next dispatch disconnects. */
int bus_ctrl_call(brokerd_bus *bus, struct ctrl_writer *w, struct ctrl_reply *ret);
/*
 * A request of one of the common shapes, by the op's request signature:
 * "s" (name), "u" (u), "su" (name, then u) or "" (neither; the unused
 * argument is ignored). -EINVAL for an op of any other shape. Then as
 * bus_ctrl_call().
 */
int bus_ctrl_request(brokerd_bus *bus, uint16_t op, const char *name, uint32_t u, struct ctrl_reply *ret);
/* Waits for the next broker signal with code (others are queued for the
 * next dispatch): 0 with it in ret, or -errno as bus_ctrl_call(). */
int bus_ctrl_wait_signal(brokerd_bus *bus, uint16_t code, struct ctrl_reply *ret);

/*
 * A request of a common shape (as bus_ctrl_request()) whose reply is not
 * waited for: handler runs when the dispatcher meets it (or at disconnect,
 * with -ECONNRESET). 0 once sent, or -errno (then handler never runs).
 */
int bus_ctrl_request_async(brokerd_bus *bus, uint16_t op, const char *name, uint32_t u,
			   bus_ctrl_handler_t handler, void *userdata);
/* A REPLY or ERROR m (in buf, len bytes) for the dispatcher: runs its request's
 * handler, if it has one. Takes ownership of fds. */
void bus_ctrl_dispatch_reply(brokerd_bus *bus, const uint8_t *buf, size_t len, const struct ctrl_message *m,
			     int *fds, unsigned int n_fds);
/* Runs the handler of every request still waiting, with error (the connection is gone). */
void bus_ctrl_pending_fail(brokerd_bus *bus, int error);
/*
 * Reads what the control socket holds now, without waiting, into the queue
 * of the dispatcher; so that a broker signal already sent can be looked for
 * (bus-inbox.c) without running any handler.
 */
void bus_ctrl_drain(brokerd_bus *bus);

/* Receives one datagram into a new buffer: > 0 length, 0 EOF, -EAGAIN. */
int bus_ctrl_recv(brokerd_bus *bus, uint8_t **ret_buf, int *fds, unsigned int *n_fds, bool block);
/* Drops the broker signals queued during requests, closing their fds. */
void bus_ctrl_queue_clear(brokerd_bus *bus);
/* Makes the epoll fd readable, so that queued work gets dispatched. */
void bus_kick(brokerd_bus *bus);

#endif
