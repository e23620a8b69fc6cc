/* SPDX-License-Identifier: MIT */
/*
 * dbus-message.h - D-Bus messages as they travel on a socket (the
 * specification's "Message Format"): the fixed header, the header fields,
 * the body. Finding where a message ends in a byte stream, validating one
 * from another process completely (both byte orders, every header field,
 * the body against its signature, the limits of the specification), and
 * writing one, which is also how brokerd stamps the SENDER field on what it
 * forwards. No I/O, no bus semantics. protocol/README.md section 11.
 */
#ifndef BROKERD_PROTOCOL_DBUS_MESSAGE_H
#define BROKERD_PROTOCOL_DBUS_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/dbus-marshal.h"

/* The fixed header: endianness, type, flags, version, body length, serial, fields length. */
#define DBUS_HEADER_FIXED_SIZE 16
#define DBUS_PROTOCOL_VERSION  1
/* At most this many fds per message (the kernel's SCM_MAX_FD). */
#define DBUS_MESSAGE_FDS_MAX 253

enum dbus_message_type {
	DBUS_MESSAGE_METHOD_CALL = 1,
	DBUS_MESSAGE_METHOD_RETURN = 2,
	DBUS_MESSAGE_ERROR = 3,
	DBUS_MESSAGE_SIGNAL = 4,
	_DBUS_MESSAGE_TYPE_MAX,
};

enum {
	DBUS_FLAG_NO_REPLY_EXPECTED = 0x1,
	DBUS_FLAG_NO_AUTO_START = 0x2,
	DBUS_FLAG_ALLOW_INTERACTIVE_AUTHORIZATION = 0x4,
};

enum dbus_header_field {
	DBUS_FIELD_PATH = 1,
	DBUS_FIELD_INTERFACE = 2,
	DBUS_FIELD_MEMBER = 3,
	DBUS_FIELD_ERROR_NAME = 4,
	DBUS_FIELD_REPLY_SERIAL = 5,
	DBUS_FIELD_DESTINATION = 6,
	DBUS_FIELD_SENDER = 7,
	DBUS_FIELD_SIGNATURE = 8,
	DBUS_FIELD_UNIX_FDS = 9,
	_DBUS_FIELD_MAX,
};

/* What the header says; strings are NULL when the field is absent. */
struct dbus_header {
	uint8_t type, flags;
	uint32_t serial, reply_serial, n_fds;
	const char *path, *interface, *member, *error_name, *destination, *sender, *signature;
};

struct dbus_message {
	struct dbus_header h; /* strings point into data */
	char byte_order;
	uint8_t *data; /* the whole message, owned */
	size_t len;
	const uint8_t *body; /* into data */
	size_t body_len;
};

/*
 * The size of the message whose first DBUS_HEADER_FIXED_SIZE bytes are at
 * data (len of them available): 0 and *size, -EAGAIN if len is less than
 * that, -EBADMSG for a byte order, version or size no valid message has.
 */
int dbus_message_frame_size(const void *data, size_t len, size_t *size);

/*
 * Validate the len bytes at data, one whole message that arrived with
 * n_fds fds, and take data over (malloc'ed; freed by dbus_message_deinit()
 * also on failure). Checks the fixed header (byte order, type, version,
 * serial, lengths), every header field (its type, its value: object path,
 * interface, member, error and bus names, no field twice, no reserved
 * Local path or interface), the fields each type requires, the padding,
 * the UNIX_FDS count (at most n_fds), and the body against SIGNATURE.
 * Returns 0 or -EBADMSG.
 */
int dbus_message_parse(struct dbus_message *m, void *data, size_t len, uint32_t n_fds);
/*
 * dbus_message_parse() of a copy of the len bytes at data (which stay the
 * caller's): for a message already written on, seen again by monitors.
 * -ENOMEM, -EBADMSG or 0; dbus_message_deinit() m in every case.
 */
int dbus_message_parse_copy(struct dbus_message *m, const void *data, size_t len, uint32_t n_fds);
void dbus_message_deinit(struct dbus_message *m);

/*
 * Write a message in native byte order: h's fields (reply_serial 0 and
 * NULL strings are left out; signature "" too, n_fds 0 too) and the body
 * (in native order, matching h->signature). *ret is malloc'ed. 0, -EINVAL
 * for a field value no valid message has, -EMSGSIZE past DBUS_MESSAGE_MAX,
 * -ENOMEM.
 */
int dbus_message_write(const struct dbus_header *h, const void *body, size_t body_len, void **ret,
		       size_t *ret_len);

/*
 * Rewrite a parsed message with SENDER set to sender, replacing any the
 * client put there (a bus never lets a client name its own sender). The
 * result is in native byte order (the body converted), unknown header
 * fields are dropped, and m stays parsed (on failure, unchanged).
 * 0, or an error of dbus_message_write().
 */
int dbus_message_stamp(struct dbus_message *m, const char *sender);

/* Bus names of the specification: unique (":1.42") or well-known. */
bool dbus_bus_name_is_valid(const char *name);

#endif
