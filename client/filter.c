/* SPDX-License-Identifier: MIT */
/*
 * filter.c - member filters: validation and matching. See filter.h.
 */
#include <string.h>

#include "client/filter.h"

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* one alternative [s, e): member chars with an optional trailing '*' */
static bool alt_is_valid(const char *s, const char *e)
{
	if (s == e)
		return false;
	if (e[-1] == '*')
		e--;
	if (s == e)
		return true; /* "*" alone */
	if ((size_t)(e - s) > 255 || !is_alpha(*s))
		return false;
	for (const char *p = s; p < e; p++)
		if (!is_alpha(*p) && !is_digit(*p))
			return false;
	return true;
}

bool filter_is_valid(const char *filter)
{
	const char *s;

	if (!filter || !*filter)
		return true;
	if (strlen(filter) > 4096)
		return false;
	for (s = filter;;) {
		const char *e = strchrnul(s, ',');

		if (!alt_is_valid(s, e))
			return false;
		if (!*e)
			return true;
		s = e + 1;
	}
}

bool filter_match(const char *filter, const char *member)
{
	const char *s;

	if (!filter || !*filter)
		return true;
	if (!member)
		return false;
	for (s = filter;;) {
		const char *e = strchrnul(s, ',');
		size_t n = (size_t)(e - s);

		if (n > 0 && s[n - 1] == '*') {
			if (strncmp(member, s, n - 1) == 0)
				return true;
		} else if (strlen(member) == n && strncmp(member, s, n) == 0) {
			return true;
		}
		if (!*e)
			return false;
		s = e + 1;
	}
}
