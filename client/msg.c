/* SPDX-License-Identifier: MIT */
/*
 * msg.c - received messages: a private copy of what arrived on a channel,
 * with the sender's unique name and credentials taken from the kernel's
 * struct ioipc_msg_info, never from the message itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-alloc.h"
#include "client/bus-internal.h"
#include "client/msg.h"

brokerd_msg *msg_new(brokerd_bus *bus, const struct chmsg *m, const struct ioipc_msg_info *info,
		     const char *name)
{
	size_t lm = strlen(m->member ? m->member : ""), ln = strlen(name ? name : "");
	brokerd_msg *msg;
	uint8_t *p;

	msg = calloc(1, sizeof(*msg) + lm + 1 + ln + 1 + m->body_len + 1);
	if (!msg)
		return NULL;
	msg->n_ref = 1;
	msg->bus = bus_ref(bus);
	msg->type = m->type;
	msg->flags = m->flags;
	msg->serial = m->serial;
	msg->reply_serial = m->reply_serial;
	if (info) {
		msg->creds.pid = (pid_t)info->pid;
		msg->creds.uid = (uid_t)info->uid;
		msg->creds.gid = (gid_t)info->gid;
		msg->creds.id = info->badge;
		if (info->badge)
			ctrl_unique_name_format(info->badge, msg->sender);
	}
	p = msg->data;
	msg->member = (char *)p;
	memcpy(p, m->member ? m->member : "", lm + 1);
	p += lm + 1;
	msg->name = (char *)p;
	memcpy(p, name ? name : "", ln + 1);
	p += ln + 1;
	msg->body = p;
	msg->body_len = m->body_len;
	if (m->body_len)
		memcpy(p, m->body, m->body_len);
	p[m->body_len] = 0; /* text bodies can be printed as they are */
	return msg;
}

_public_ brokerd_msg *brokerd_msg_ref(brokerd_msg *msg)
{
	if (msg)
		msg->n_ref++;
	return msg;
}

_public_ brokerd_msg *brokerd_msg_unref(brokerd_msg *msg)
{
	if (!msg || --msg->n_ref > 0)
		return NULL;
	bus_unref(msg->bus);
	free(msg);
	return NULL;
}

_public_ int brokerd_msg_get_type(brokerd_msg *msg)
{
	if (!msg)
		return -EINVAL;
	return msg->type;
}

_public_ const char *brokerd_msg_get_sender(brokerd_msg *msg)
{
	return msg ? msg->sender : NULL;
}

_public_ int brokerd_msg_get_creds(brokerd_msg *msg, struct brokerd_creds *ret)
{
	if (!msg || !ret)
		return -EINVAL;
	if (!msg->creds.id && !msg->creds.pid)
		return -ENODATA;
	*ret = msg->creds;
	return 0;
}

_public_ const char *brokerd_msg_get_name(brokerd_msg *msg)
{
	return msg ? msg->name : NULL;
}

_public_ const char *brokerd_msg_get_member(brokerd_msg *msg)
{
	return msg ? msg->member : NULL;
}

_public_ const char *brokerd_msg_get_error_name(brokerd_msg *msg)
{
	if (!msg || msg->type != BROKERD_MSG_ERROR)
		return NULL;
	return msg->member;
}

_public_ int brokerd_msg_get_body(brokerd_msg *msg, const void **ret, size_t *ret_size)
{
	if (!msg || !ret || !ret_size)
		return -EINVAL;
	*ret = msg->body;
	*ret_size = msg->body_len;
	return 0;
}

_public_ uint64_t brokerd_msg_get_serial(brokerd_msg *msg)
{
	return msg ? msg->serial : 0;
}
