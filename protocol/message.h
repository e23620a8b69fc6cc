/* SPDX-License-Identifier: MIT */
/*
 * message.h - channel messages, version 2: the D-Bus message layout (fixed
 * header, header fields, a body in the "dbus1" wire format) as clients
 * exchange it directly over the IPC channels whose capability fds brokerd
 * hands out. The sender is never a field: receivers take it from the kernel
 * (struct ioipc_msg_info, badge = the sender's connection id, so the sender
 * is ":1.<badge - 1>"). protocol/README.md section 7 is the normative spec. No
 * I/O here; the body codec is dbus-marshal.h.
 */
#ifndef BROKERD_PROTOCOL_MESSAGE_H
#define BROKERD_PROTOCOL_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHMSG_VERSION		2
#define CHMSG_FIXED_HEADER_SIZE 16
#define CHMSG_MAX		65536 /* largest message a receiver takes inline (channels allow 8192) */
#define CHMSG_BODY_MAX		(1U << 27) /* largest body, in a memfd (BODY_FD): 128 MiB */
#define CHMSG_FDS_MAX		253	   /* fds a message carries, the body's memfd included */

enum chmsg_type {
	CHMSG_CALL = 1,	  /* on a name's call channel */
	CHMSG_REPLY = 2,  /* on the caller's inbox; reply_serial = the call's serial */
	CHMSG_ERROR = 3,  /* on the caller's inbox; error_name, reply_serial */
	CHMSG_SIGNAL = 4, /* on a name's signal channel, or an inbox (unicast) */
	_CHMSG_TYPE_MAX,
};

/* Flags: the D-Bus specification's bits. */
#define CHMSG_F_NO_REPLY_EXPECTED		(1U << 0)
#define CHMSG_F_NO_AUTO_START			(1U << 1)
#define CHMSG_F_ALLOW_INTERACTIVE_AUTHORIZATION (1U << 2)
#define CHMSG_F_ALL \
	(CHMSG_F_NO_REPLY_EXPECTED | CHMSG_F_NO_AUTO_START | CHMSG_F_ALLOW_INTERACTIVE_AUTHORIZATION)

/* Header field codes: the D-Bus specification's, except that SENDER (7) is forbidden. */
enum chmsg_field {
	CHMSG_FIELD_PATH = 1,	      /* o */
	CHMSG_FIELD_INTERFACE = 2,    /* s */
	CHMSG_FIELD_MEMBER = 3,	      /* s */
	CHMSG_FIELD_ERROR_NAME = 4,   /* s */
	CHMSG_FIELD_REPLY_SERIAL = 5, /* u */
	CHMSG_FIELD_DESTINATION = 6,  /* s */
	CHMSG_FIELD_SENDER = 7,	      /* never on a channel: the kernel's badge says who sent */
	CHMSG_FIELD_SIGNATURE = 8,    /* g */
	CHMSG_FIELD_UNIX_FDS = 9,     /* u: fds carried, the body's memfd included */
	CHMSG_FIELD_BODY_FD = 10,     /* u: index of the sealed memfd holding the body (the last fd) */
};

/*
 * A message. Absent string fields are NULL or "" (both mean absent); the
 * body is body_len bytes in byte order byte_order ('l' or 'B'; 0 on encode
 * means native, the only order chmsg_encode() writes) following signature.
 */
struct chmsg {
	uint8_t type;		 /* enum chmsg_type */
	uint8_t flags;		 /* CHMSG_F_* */
	char byte_order;	 /* 'l' or 'B' */
	uint32_t serial;	 /* non-zero, chosen by the sender */
	uint32_t reply_serial;	 /* REPLY/ERROR: serial of the call; else 0 */
	const char *path;	 /* CALL/SIGNAL: object path (required) */
	const char *interface;	 /* optional for CALL, required for SIGNAL */
	const char *member;	 /* CALL/SIGNAL: member (required) */
	const char *error_name;	 /* ERROR: error name (required) */
	const char *destination; /* optional: bus name the message is for */
	const char *signature;	 /* of the body; absent = empty body */
	uint32_t n_fds;		 /* UNIX_FDS: fds carried, the body's memfd (last) included */
	/*
	 * BODY_FD: the body travels in a sealed memfd, the message's last fd,
	 * not after the header; body_len is its length all the same. On decode
	 * body is NULL until chmsg_decode_body() checked the mapped bytes.
	 */
	bool body_in_fd;
	const void *body;
	uint32_t body_len;
};

/*
 * Encode m into buf (size bytes). Returns the encoded length, -EINVAL for an
 * invalid message (fields the type forbids or requires, invalid names, a
 * body that does not match its signature, more than CHMSG_FDS_MAX fds, or
 * body_in_fd without an fd for it), -EMSGSIZE when it does not fit in size
 * or CHMSG_MAX (a body in a memfd counts only up to CHMSG_BODY_MAX), -ENOMEM.
 * With body_in_fd the body is validated but not written: only the header.
 */
int chmsg_encode(const struct chmsg *m, void *buf, size_t size);

/*
 * Only the header of m (m->body is not read: body_len bytes are to follow),
 * padded to 8, into buf, for a caller that writes the body straight after
 * it and vouches that it matches the signature. Returns the body's offset
 * (the header's padded length), or the errors of chmsg_encode(); -EMSGSIZE
 * also when the body would not fit after the header.
 */
int chmsg_encode_header(const struct chmsg *m, void *buf, size_t size);

/*
 * Decode and validate len bytes: the fixed header, every header field, and
 * the body against its signature (dbus_body_validate()). The strings and
 * the body point into buf; the body stays in m->byte_order. Returns 0,
 * -EBADMSG for anything malformed, -EPROTO for another version.
 * With BODY_FD (m->body_in_fd) the body is not in buf: m->body is NULL and
 * the caller maps the memfd and hands it to chmsg_decode_body().
 */
int chmsg_decode(struct chmsg *m, const void *buf, size_t len);
/*
 * chmsg_decode() without its fast path for the usual header fields: every
 * field through the generic D-Bus validator and reader. The same result
 * for every input; the tests and fuzz-recv hold chmsg_decode() against it.
 */
int chmsg_decode_generic(struct chmsg *m, const void *buf, size_t len);

/*
 * The body of a decoded BODY_FD message: body_len bytes (mapped from the
 * memfd) validated against the signature with the fds before the memfd.
 * Sets m->body. Returns 0 or -EBADMSG.
 */
int chmsg_decode_body(struct chmsg *m, const void *body);

const char *chmsg_type_to_string(unsigned int type);

/* A name of D-Bus interface syntax (the same rules as an error name). */
bool chmsg_interface_is_valid(const char *name);

#endif
