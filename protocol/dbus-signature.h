/* SPDX-License-Identifier: MIT */
/*
 * dbus-signature.h - the D-Bus type system: type codes, signatures, and the
 * validity rules of the string-like values (strings, object paths). Used by
 * the body marshalling (dbus-marshal.h) and by anything that checks a
 * signature or path from another process. Pure functions, no I/O.
 * protocol/README.md section 9 states the rules; the D-Bus specification
 * ("Type System", "Valid Signatures") is their origin.
 */
#ifndef BROKERD_PROTOCOL_DBUS_SIGNATURE_H
#define BROKERD_PROTOCOL_DBUS_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>

/* Limits of the specification. */
#define DBUS_SIGNATURE_MAX    255	 /* bytes, without the NUL */
#define DBUS_DEPTH_ARRAY_MAX  32	 /* 'a' nesting in one signature */
#define DBUS_DEPTH_STRUCT_MAX 32	 /* '(' and '{' nesting in one signature */
#define DBUS_DEPTH_MAX	      64	 /* containers around a value, variants included */
#define DBUS_MESSAGE_MAX      (1U << 27) /* 128 MiB: a whole message, so a body too */
#define DBUS_ARRAY_MAX	      (1U << 26) /* 64 MiB of array data */

enum dbus_type {
	DBUS_TYPE_BYTE = 'y',
	DBUS_TYPE_BOOLEAN = 'b',
	DBUS_TYPE_INT16 = 'n',
	DBUS_TYPE_UINT16 = 'q',
	DBUS_TYPE_INT32 = 'i',
	DBUS_TYPE_UINT32 = 'u',
	DBUS_TYPE_INT64 = 'x',
	DBUS_TYPE_UINT64 = 't',
	DBUS_TYPE_DOUBLE = 'd',
	DBUS_TYPE_STRING = 's',
	DBUS_TYPE_OBJECT_PATH = 'o',
	DBUS_TYPE_SIGNATURE = 'g',
	DBUS_TYPE_UNIX_FD = 'h',
	DBUS_TYPE_ARRAY = 'a',
	DBUS_TYPE_VARIANT = 'v',
	DBUS_TYPE_STRUCT_BEGIN = '(',
	DBUS_TYPE_STRUCT_END = ')',
	DBUS_TYPE_DICT_ENTRY_BEGIN = '{',
	DBUS_TYPE_DICT_ENTRY_END = '}',
};

/* Basic: a fixed type or s, o, g (the only types allowed as dict keys). */
bool dbus_type_is_basic(char type);
/* Fixed: basic types of constant size (all basic types but s, o, g). */
bool dbus_type_is_fixed(char type);
/* Wire alignment of a value of the type starting with this code; 0 if none. */
unsigned int dbus_type_alignment(char type);
/* Size on the wire of a fixed type; 0 for any other code. */
unsigned int dbus_type_fixed_size(char type);

/*
 * Length of the single complete type at the start of the len bytes at sig,
 * checking it fully (dict entries only as array elements with a basic key,
 * no empty struct, the nesting limits). Returns a length ≥ 1, or -EINVAL.
 */
int dbus_signature_next(const char *sig, size_t len);
/*
 * As dbus_signature_next() for the NUL-terminated t, but a dict entry may
 * stand alone, as an array's element does where the elements are appended,
 * read or handed on one by one: it is checked as a struct, whose rules a
 * dict entry's are a subset of (the array around it is checked with the
 * whole signature). -EINVAL if t starts with no complete type.
 */
int dbus_signature_next_element(const char *t);

/* 0 if the len bytes at sig are a valid signature (any number of complete
 * types, ≤ DBUS_SIGNATURE_MAX bytes), else -EINVAL. */
int dbus_signature_validate(const char *sig, size_t len);
/* As dbus_signature_validate(), but exactly one complete type (a variant's). */
int dbus_signature_validate_single(const char *sig, size_t len);
bool dbus_signature_is_valid(const char *sig);
bool dbus_signature_is_single(const char *sig);

/* 0 if the len bytes at path are a valid object path, else -EINVAL. */
int dbus_object_path_validate(const char *path, size_t len);
bool dbus_object_path_is_valid(const char *path);

/*
 * 0 if the len bytes at s are strictly valid UTF-8 (no overlong form, no
 * surrogate, nothing above U+10FFFF) without a NUL, else -EINVAL.
 */
int dbus_string_validate(const char *s, size_t len);

#endif
