/* SPDX-License-Identifier: MIT */
/*
 * dbus-signature.c - D-Bus type codes, signature grammar and the validity of
 * strings and object paths. See dbus-signature.h.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "protocol/dbus-signature.h"

bool dbus_type_is_basic(char type)
{
	switch (type) {
	case 's':
	case 'o':
	case 'g':
		return true;
	default:
		return dbus_type_is_fixed(type);
	}
}

bool dbus_type_is_fixed(char type)
{
	return dbus_type_fixed_size(type) > 0;
}

unsigned int dbus_type_fixed_size(char type)
{
	switch (type) {
	case 'y':
		return 1;
	case 'n':
	case 'q':
		return 2;
	case 'b':
	case 'i':
	case 'u':
	case 'h':
		return 4;
	case 'x':
	case 't':
	case 'd':
		return 8;
	default:
		return 0;
	}
}

unsigned int dbus_type_alignment(char type)
{
	switch (type) {
	case 'g':
	case 'v':
		return 1;
	case 's':
	case 'o':
	case 'a':
		return 4;
	case '(':
	case '{':
		return 8;
	default:
		return dbus_type_fixed_size(type);
	}
}

/*
 * One complete type; arrays and structs count the enclosing 'a' and '('/'{'
 * so that the nesting limits hold inside one signature. Recursion is bounded
 * by those limits.
 */
static int signature_next(const char *s, size_t len, unsigned int arrays, unsigned int structs)
{
	size_t i;
	int r;

	if (len == 0)
		return -EINVAL;
	if (dbus_type_is_basic(s[0]) || s[0] == 'v')
		return 1;

	switch (s[0]) {
	case 'a':
		if (arrays >= DBUS_DEPTH_ARRAY_MAX)
			return -EINVAL;
		if (len < 2 || s[1] != '{') {
			r = signature_next(s + 1, len - 1, arrays + 1, structs);
			return r < 0 ? r : 1 + r;
		}
		/* a{KV}: a basic key and exactly one value type */
		if (structs >= DBUS_DEPTH_STRUCT_MAX || len < 3 || !dbus_type_is_basic(s[2]))
			return -EINVAL;
		r = signature_next(s + 3, len - 3, arrays + 1, structs + 1);
		if (r < 0)
			return r;
		if ((size_t)r + 3 >= len || s[3 + r] != '}')
			return -EINVAL;
		return 4 + r;
	case '(':
		if (structs >= DBUS_DEPTH_STRUCT_MAX || len < 2 || s[1] == ')')
			return -EINVAL;
		for (i = 1; i < len && s[i] != ')'; i += (size_t)r) {
			r = signature_next(s + i, len - i, arrays, structs + 1);
			if (r < 0)
				return r;
		}
		if (i >= len)
			return -EINVAL;
		return (int)i + 1;
	default:
		/* '{' outside an array, ')', '}', NUL and every unknown code */
		return -EINVAL;
	}
}

int dbus_signature_next(const char *sig, size_t len)
{
	if (!sig)
		return -EINVAL;
	/* no complete type is longer than a whole signature may be */
	if (len > DBUS_SIGNATURE_MAX)
		len = DBUS_SIGNATURE_MAX;
	return signature_next(sig, len, 0, 0);
}

int dbus_signature_next_element(const char *t)
{
	char buf[DBUS_SIGNATURE_MAX + 1];
	size_t n;

	if (!t)
		return -EINVAL;
	n = strnlen(t, DBUS_SIGNATURE_MAX + 1);
	if (n > DBUS_SIGNATURE_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		buf[i] = t[i] == '{' ? '(' : t[i] == '}' ? ')' : t[i];
	return dbus_signature_next(buf, n);
}

int dbus_signature_validate(const char *sig, size_t len)
{
	size_t i;
	int r;

	if (!sig || len > DBUS_SIGNATURE_MAX)
		return -EINVAL;
	for (i = 0; i < len; i += (size_t)r) {
		r = signature_next(sig + i, len - i, 0, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

int dbus_signature_validate_single(const char *sig, size_t len)
{
	int r;

	if (!sig || len > DBUS_SIGNATURE_MAX)
		return -EINVAL;
	r = signature_next(sig, len, 0, 0);
	if (r < 0)
		return r;
	return (size_t)r == len ? 0 : -EINVAL;
}

bool dbus_signature_is_valid(const char *sig)
{
	return sig && dbus_signature_validate(sig, strlen(sig)) == 0;
}

bool dbus_signature_is_single(const char *sig)
{
	return sig && dbus_signature_validate_single(sig, strlen(sig)) == 0;
}

static bool path_char_is_valid(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

int dbus_object_path_validate(const char *path, size_t len)
{
	bool after_slash = true;

	if (!path || len == 0 || path[0] != '/')
		return -EINVAL;
	if (len == 1)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if (path[i] == '/') {
			if (after_slash)
				return -EINVAL;
			after_slash = true;
		} else if (path_char_is_valid(path[i])) {
			after_slash = false;
		} else {
			return -EINVAL;
		}
	}
	/* no trailing '/' except for "/" itself */
	return after_slash ? -EINVAL : 0;
}

bool dbus_object_path_is_valid(const char *path)
{
	return path && dbus_object_path_validate(path, strlen(path)) == 0;
}

int dbus_string_validate(const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t i = 0;

	if (!s && len > 0)
		return -EINVAL;
	while (i < len) {
		uint32_t cp, min;
		size_t n;

		if (p[i] == 0)
			return -EINVAL;
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		if ((p[i] & 0xe0) == 0xc0) {
			n = 1, cp = p[i] & 0x1f, min = 0x80;
		} else if ((p[i] & 0xf0) == 0xe0) {
			n = 2, cp = p[i] & 0x0f, min = 0x800;
		} else if ((p[i] & 0xf8) == 0xf0) {
			n = 3, cp = p[i] & 0x07, min = 0x10000;
		} else {
			return -EINVAL;
		}
		if (len - i - 1 < n)
			return -EINVAL;
		for (size_t k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return -EINVAL;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return -EINVAL;
		i += n + 1;
	}
	return 0;
}
