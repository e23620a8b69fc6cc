/* SPDX-License-Identifier: MIT */
/*
 * dbus-sasl.h - the server side of the D-Bus authentication handshake
 * (the specification's "Authentication Protocol"), as a state machine with
 * no I/O: the connection feeds it the bytes it read and sends back what it
 * answers, until the client says BEGIN. Only EXTERNAL is offered, and only
 * for the uid the kernel reported for the socket (SO_PEERCRED): an AUTH
 * naming another uid, or any other mechanism, is answered REJECTED EXTERNAL.
 *
 * Accepted forms of EXTERNAL:
 *   - pipelined: "\0AUTH EXTERNAL <hex uid>\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n"
 *     in one write (sd-bus, libdbus), answered "OK ...", "AGREE_UNIX_FD";
 *   - without an initial response: "AUTH EXTERNAL" gets "DATA", the client
 *     answers "DATA" (empty: the transport's uid) or "DATA <hex uid>";
 *   - lock-step, one command per round trip (GDBus), with the leading
 *     credentials NUL byte sent alone.
 * protocol/README.md section 11 describes the exchange.
 */
#ifndef BROKERD_PROTOCOL_DBUS_SASL_H
#define BROKERD_PROTOCOL_DBUS_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A command line, "\r\n" included. Longer lines end the connection. */
#define DBUS_SASL_LINE_MAX 1024
/* Commands before BEGIN: a client that chatters on is not authenticating. */
#define DBUS_SASL_COMMANDS_MAX 32
/* The longest answer one command gets, "\r\n" included. */
#define DBUS_SASL_REPLY_MAX 64

enum dbus_sasl_state {
	DBUS_SASL_NUL,	/* waiting for the credentials byte */
	DBUS_SASL_AUTH, /* waiting for AUTH */
	DBUS_SASL_DATA, /* AUTH EXTERNAL without a response: waiting for DATA */
	DBUS_SASL_OK,	/* authenticated: NEGOTIATE_UNIX_FD or BEGIN */
	DBUS_SASL_DONE, /* BEGIN: what follows is the message stream */
};

struct dbus_sasl {
	enum dbus_sasl_state state;
	uid_t uid;	 /* from SO_PEERCRED */
	bool can_fds;	 /* the transport passes fds (AF_UNIX) */
	bool fds_agreed; /* NEGOTIATE_UNIX_FD was answered AGREE_UNIX_FD */
	unsigned int n_commands;
	char guid[33]; /* the server's, 32 hex digits */
};

/* Start a handshake for a peer of this uid; guid is the bus id (32 hex digits). */
void dbus_sasl_init(struct dbus_sasl *s, uid_t uid, bool can_fds, const char *guid);

/*
 * Consume what the client sent: in[0, len). Complete lines are handled one
 * by one, and their answers appended to out (out_size bytes, at least
 * DBUS_SASL_REPLY_MAX per line consumed; *out_len is advanced). Stops after
 * BEGIN or at an incomplete line; *consumed says how far it got, so the
 * caller keeps the rest (after BEGIN: the first bytes of the first message).
 *
 * Returns 1 after BEGIN (authenticated), 0 if it needs more input, or an
 * error that ends the connection: -EPROTO (no leading NUL, a line without
 * "\r\n" or with a NUL in it, BEGIN before OK), -EMSGSIZE (a line longer
 * than DBUS_SASL_LINE_MAX), -ELOOP (more than DBUS_SASL_COMMANDS_MAX
 * commands), -ENOBUFS (out too small).
 */
int dbus_sasl_feed(struct dbus_sasl *s, const void *in, size_t len, size_t *consumed, char *out,
		   size_t out_size, size_t *out_len);

#endif
