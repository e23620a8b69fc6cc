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
#include "protocol/dbus-marshal.h"

/* Copies the NUL-terminated s (NULL = "") to *p and advances it. */
static char *put_string(uint8_t **p, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *r = (char *)*p;

	memcpy(r, s ? s : "", n);
	*p += n;
	return r;
}

/* The byte API's view of a native-order body: an "ay" array or an "s" string, after its length. */
void msg_set_byte_view(brokerd_msg *msg)
{
	uint32_t n;

	msg->body = msg->data;
	msg->body_len = msg->data_len;
	if ((strcmp(msg->signature, "ay") != 0 && strcmp(msg->signature, "s") != 0) || msg->data_len < 4)
		return;
	/* validated: the length fits the body, and the bytes follow at offset 4 */
	memcpy(&n, msg->data, 4);
	msg->body = (uint8_t *)msg->data + 4;
	msg->body_len = n;
}

brokerd_msg *msg_new(brokerd_bus *bus, const struct chmsg *m, const struct ioipc_msg_info *info,
		     const char *name)
{
	/* member: what brokerd_msg_get_member() returns, an error's error name */
	const char *member = m->type == CHMSG_ERROR ? m->error_name : m->member;
	const char *strings[] = { member,	 name,		 m->path,     m->interface,
				  m->error_name, m->destination, m->signature };
	size_t size = 0;
	brokerd_msg *msg;
	uint8_t *p;

	for (size_t i = 0; i < ELEMENTSOF(strings); i++)
		size += strlen(strings[i] ? strings[i] : "") + 1;
	/* the body first, at the 8-byte alignment its values were laid out for */
	msg = calloc(1, sizeof(*msg) + m->body_len + 8 + size);
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
	p = msg->buf;
	msg->data = p;
	msg->data_len = m->body_len;
	if (m->body_len)
		memcpy(p, m->body, m->body_len);
	p[m->body_len] = 0; /* text bodies can be printed as they are */
	p += m->body_len + 1;
	msg->member = put_string(&p, member);
	msg->name = put_string(&p, name);
	msg->path = put_string(&p, m->path);
	msg->interface = put_string(&p, m->interface);
	msg->error_name = put_string(&p, m->error_name);
	msg->destination = put_string(&p, m->destination);
	msg->signature = put_string(&p, m->signature);
	/* decoded means validated; only the byte order may still differ */
	if (dbus_body_to_native(msg->signature, msg->data, msg->data_len,
				m->byte_order ? m->byte_order : DBUS_NATIVE_ENDIAN, m->n_fds) < 0) {
		brokerd_msg_unref(msg);
		return NULL;
	}
	msg_set_byte_view(msg);
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
	if (msg->writer)
		dbus_writer_deinit(msg->writer);
	free(msg->writer);
	free(msg->reader);
	brokerd_msg_unref(msg->call);
	free(msg->owned_data);
	free(msg->owned_signature);
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
	return msg->error_name;
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

_public_ const char *brokerd_msg_get_path(brokerd_msg *msg)
{
	return msg ? msg->path : NULL;
}

_public_ const char *brokerd_msg_get_interface(brokerd_msg *msg)
{
	return msg ? msg->interface : NULL;
}

_public_ const char *brokerd_msg_get_signature(brokerd_msg *msg)
{
	return msg ? msg->signature : NULL;
}

_public_ const char *brokerd_msg_get_destination(brokerd_msg *msg)
{
	return msg ? msg->destination : NULL;
}

_public_ int brokerd_msg_get_data(brokerd_msg *msg, const void **ret, size_t *ret_size)
{
	if (!msg || !ret || !ret_size)
		return -EINVAL;
	*ret = msg->data;
	*ret_size = msg->data_len;
	return 0;
}
