/* SPDX-License-Identifier: MIT */
/*
 * msg.h - received messages (msg.c).
 */
#ifndef BROKERD_CLIENT_MSG_H
#define BROKERD_CLIENT_MSG_H

#include "client/bus-internal.h"

/* A message decoded from a receive, sender and credentials from info; holds a
 * reference on bus (which may be NULL). NULL without memory. */
brokerd_msg *msg_new(brokerd_bus *bus, const struct chmsg *m, const struct ioipc_msg_info *info,
		     const char *name);

/*
 * The message of c's completed receive: decoded, its fds (UNIX_FDS of them,
 * else dropped: -EBADMSG), a BODY_FD body mapped and checked. Every fd that
 * came is the message's or closed. -EMFILE when the kernel could not
 * install every fd here (fd table full), -EBADMSG, -EMSGSIZE (truncated),
 * -ENOMEM, or the receive's error.
 */
int msg_receive(brokerd_bus *bus, struct chan *c, const char *name, brokerd_msg **ret);

/*
 * The same, read in place where c lends its receive buffer (multishot): no
 * copy, no allocation; the message holds the buffer until it is freed or
 * kept. Elsewhere as msg_receive().
 */
int msg_receive_in_place(brokerd_bus *bus, struct chan *c, const char *name, brokerd_msg **ret);

/*
 * For a message read in place that someone keeps past its dispatch: copies
 * its strings and body into memory of its own and gives the buffer back.
 * 0 (also for a message not read in place), or -ENOMEM (it keeps the
 * buffer).
 */
int msg_keep(brokerd_msg *msg);

/* Points body/body_len at what the byte API sees of data (see struct brokerd_msg). */
void msg_set_byte_view(brokerd_msg *msg);

#endif
