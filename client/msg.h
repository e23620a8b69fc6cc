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

/* Points body/body_len at what the byte API sees of data (see struct brokerd_msg). */
void msg_set_byte_view(brokerd_msg *msg);

#endif
