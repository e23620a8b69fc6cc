/* SPDX-License-Identifier: MIT */
/*
 * dbus-marshal.h - message bodies in the D-Bus "dbus1" wire format: a
 * writer that builds a body against its signature, a validator that checks
 * a body from another process in one pass, typed reads of a validated body,
 * and byte-order conversion. No I/O, no bus semantics. Offsets and
 * alignment are relative to the start of the body, which a message places
 * on an 8-byte boundary. protocol/README.md section 9 is the normative
 * description.
 *
 * C types of values, for dbus_writer_append_basic() and
 * dbus_reader_read_basic(): y uint8_t, b int (written as 0 or 1), n int16_t,
 * q uint16_t, i int32_t, u uint32_t, x int64_t, t uint64_t, d double,
 * h uint32_t (an index into the message's fd list), s/o/g const char *
 * (the pointer itself is the value: pass the string, not its address, to
 * append; read stores a pointer into the body).
 */
#ifndef BROKERD_PROTOCOL_DBUS_MARSHAL_H
#define BROKERD_PROTOCOL_DBUS_MARSHAL_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/dbus-signature.h"

/* Byte order marks of the D-Bus header. */
#define DBUS_LITTLE_ENDIAN 'l'
#define DBUS_BIG_ENDIAN	   'B'
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define DBUS_NATIVE_ENDIAN DBUS_LITTLE_ENDIAN
#else
#define DBUS_NATIVE_ENDIAN DBUS_BIG_ENDIAN
#endif

/* ---- Writer ---------------------------------------------------------------- */

/*
 * One open container (or the body itself, at depth 0). The signature it
 * follows is [sig_pos, sig_end) of either the writer's body signature or,
 * inside a variant, of the variant's signature already in the buffer (at
 * byte offset sig_data; SIZE_MAX for the body signature).
 */
struct dbus_writer_frame {
	char type; /* 0 (body), 'a', '(', '{', 'v' */
	size_t sig_data;
	size_t sig_pos, sig_end;
	size_t len_offset; /* 'a': where its uint32 length goes */
	size_t data_start; /* 'a': first element, after the padding */
};

struct dbus_writer {
	uint8_t *data;
	size_t len, cap; /* room included */
	size_t room;	 /* bytes before the body (dbus_writer_init_room()) */
	bool fixed;	 /* data is the caller's, cap its size: never grown or freed */
	uint32_t n_fds; /* highest 'h' index written + 1 */
	int error;	/* first failure; every later call returns it */
	unsigned int depth;
	char signature[DBUS_SIGNATURE_MAX + 1];
	struct dbus_writer_frame frames[DBUS_DEPTH_MAX + 1];
};

/*
 * Start a body of the given signature in native byte order. Returns 0, or
 * -EINVAL for an invalid signature.
 */
int dbus_writer_init(struct dbus_writer *w, const char *signature);
/*
 * The same, the body starting room bytes (a multiple of 8) into the buffer
 * dbus_writer_finish() returns, so that a message's header can be written
 * in front of it without moving it. The room is not part of the body (its
 * limits) but is of the length finish returns; the buffer is NULL while
 * nothing was written. -EINVAL for a room not a multiple of 8.
 */
int dbus_writer_init_room(struct dbus_writer *w, const char *signature, size_t room);
/*
 * The same, written into the caller's buf of size bytes, never grown
 * (-EMSGSIZE past its end) nor freed: no allocation, for a message header
 * laid out where it is sent from. dbus_writer_finish() returns buf.
 */
int dbus_writer_init_fixed(struct dbus_writer *w, const char *signature, void *buf, size_t size);
void dbus_writer_deinit(struct dbus_writer *w);

/*
 * Append the next value; type must be what the signature expects there.
 * Errors (the first one sticks): -ENXIO the signature expects another type
 * or nothing more here, -EINVAL an invalid value (string not UTF-8 or with
 * NUL, invalid object path or signature, 'h' index UINT32_MAX), -EMSGSIZE the
 * body would exceed DBUS_MESSAGE_MAX, -ENOMEM.
 */
int dbus_writer_append_basic(struct dbus_writer *w, char type, const void *value);

/*
 * Open a container: 'a' (contents = element type, or NULL), '(' or '{'
 * (contents = the fields without the brackets, or NULL) or 'v' (contents =
 * the single complete type of the value, required). Errors as for append,
 * and -ELOOP when more than DBUS_DEPTH_MAX containers would be open.
 */
int dbus_writer_open(struct dbus_writer *w, char type, const char *contents);

/*
 * Close the innermost container. -ENXIO if a struct, dict entry or variant
 * lacks values, -EMSGSIZE if an array exceeds DBUS_ARRAY_MAX bytes.
 */
int dbus_writer_close(struct dbus_writer *w);

/*
 * Append a whole array of a fixed type (not s, o, g): n elements of its C
 * type at values. The signature must expect "a<type>" here. Errors as for
 * dbus_writer_open() and dbus_writer_close().
 */
int dbus_writer_append_array(struct dbus_writer *w, char type, const void *values, size_t n);

/*
 * Check that the body is complete and hand it over: *body (malloc'ed, NULL
 * for an empty body) and *len. Returns 0 or the writer's error; -ENXIO if
 * containers are open or values missing. The writer is left empty.
 */
int dbus_writer_finish(struct dbus_writer *w, void **body, size_t *len);

/* ---- Validator and byte order ---------------------------------------------- */

/*
 * Validate a whole body against its signature in one pass: byte_order is
 * 'l' or 'B', n_fds the number of fds that came with the message. Checks
 * alignment padding (zero, minimal), booleans 0 or 1, strings (UTF-8, no
 * NUL inside, NUL-terminated), object paths, signatures, array lengths
 * (within the body and DBUS_ARRAY_MAX, ending on an element boundary),
 * variants (one complete type), nesting (DBUS_DEPTH_MAX containers, variants
 * included), fd indexes < n_fds, and that no byte is left over.
 * Returns 0, -EBADMSG for any invalid body, signature or byte order, or
 * -EINVAL for NULL arguments.
 */
int dbus_body_validate(const char *signature, const void *body, size_t len, char byte_order, uint32_t n_fds);

/*
 * Validate, then rewrite the body in place in native byte order (no-op when
 * it already is). Returns 0, or an error of dbus_body_validate() with the
 * body untouched.
 */
int dbus_body_to_native(const char *signature, void *body, size_t len, char byte_order, uint32_t n_fds);

/* ---- Reader ---------------------------------------------------------------- */

struct dbus_reader_frame {
	char type;	 /* 0 (body), 'a', '(', '{', 'v' */
	const char *sig; /* the body's or a variant's signature */
	size_t sig_pos, sig_end;
	size_t data_end; /* 'a': end of its elements */
};

struct dbus_reader {
	const uint8_t *data;
	size_t len, pos;
	uint32_t n_fds;
	char byte_order;
	unsigned int depth;
	char signature[DBUS_SIGNATURE_MAX + 1];
	struct dbus_reader_frame frames[DBUS_DEPTH_MAX + 1];
};

/*
 * Validate the body (dbus_body_validate(), same errors) and start reading
 * it. The body must stay valid and unchanged while the reader is used.
 */
int dbus_reader_init(struct dbus_reader *r, const char *signature, const void *body, size_t len,
		     char byte_order, uint32_t n_fds);

/*
 * What comes next in the current container: returns 1 with *type (a basic
 * code, 'a', '(', '{' or 'v') and, if contents is not NULL, *contents and
 * *contents_len (element type, fields, or the variant's signature; not
 * NUL-terminated); 0 at the end of the container.
 */
int dbus_reader_peek(struct dbus_reader *r, char *type, const char **contents, size_t *contents_len);

/*
 * Read the next value into *value (C type as above, in native byte order).
 * Returns 1, 0 at the end of the container, -ENXIO for another type.
 */
int dbus_reader_read_basic(struct dbus_reader *r, char type, void *value);

/* Enter the next value, a container of this type: 1, 0 at the end, -ENXIO. */
int dbus_reader_enter(struct dbus_reader *r, char type);

/* Leave the innermost container, skipping what was not read: 0, or -ENXIO at the body. */
int dbus_reader_exit(struct dbus_reader *r);

/* Skip the next value, whatever its type: 1, or 0 at the end. */
int dbus_reader_skip(struct dbus_reader *r);

#endif
