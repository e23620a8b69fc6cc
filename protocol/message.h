/* SPDX-License-Identifier: MIT */
/*
 * message.h - the header of messages that travel on IPC channels.
 *
 * brokerd never sees these: clients exchange them directly over the
 * channels whose capability fds brokerd hands out. The sender is not part of
 * the header: receivers take it from the kernel (struct ioipc_msg_info, badge
 * = the sender's connection id, so the sender is ":1.<badge>"). Little-endian;
 * protocol/README.md is the normative spec. No I/O here.
 */
#ifndef BROKERD_PROTOCOL_MESSAGE_H
#define BROKERD_PROTOCOL_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

#define CHMSG_VERSION	  1
#define CHMSG_HEADER_SIZE 24
#define CHMSG_MAX	  65536 /* max_msg_size of every channel brokerd creates */

enum chmsg_type {
	CHMSG_CALL = 1,	  /* on a name's call channel; member = method */
	CHMSG_REPLY = 2,  /* on the caller's inbox; reply_serial = the call's serial */
	CHMSG_ERROR = 3,  /* on the caller's inbox; member = error name */
	CHMSG_SIGNAL = 4, /* on a name's signal channel, or an inbox (unicast) */
	_CHMSG_TYPE_MAX,
};

#define CHMSG_F_NO_REPLY_EXPECTED (1U << 0)
#define CHMSG_F_ALL		  CHMSG_F_NO_REPLY_EXPECTED

struct chmsg {
	uint8_t type;		 /* enum chmsg_type */
	uint16_t flags;		 /* CHMSG_F_* */
	uint32_t serial;	 /* non-zero, chosen by the sender */
	uint32_t reply_serial;	 /* REPLY/ERROR: serial of the call; else 0 */
	const char *member;	 /* CALL/SIGNAL: member; ERROR: error name; REPLY: "" */
	const char *destination; /* optional: unique name the message is for, or "" */
	const void *body;
	uint32_t body_len;
};

/*
 * Encode m into buf (size bytes). Returns the encoded length, -EINVAL for an
 * invalid message, -EMSGSIZE when it does not fit in size or CHMSG_MAX.
 */
int chmsg_encode(const struct chmsg *m, void *buf, size_t size);

/*
 * Decode len bytes. The strings and body point into buf. Returns 0, -EBADMSG
 * for anything malformed (lengths that disagree, missing NULs, bad names,
 * fields that the type forbids or requires), -EPROTO for another version.
 */
int chmsg_decode(struct chmsg *m, const void *buf, size_t len);

const char *chmsg_type_to_string(unsigned int type);

#endif
