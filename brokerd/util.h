/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers shared by brokerd's modules: the config parsers'
 * error reporting (cleanup attributes and TAKE_PTR come from
 * protocol/macro.h, shared with the client).
 */
#ifndef BROKERD_UTIL_H
#define BROKERD_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "util/macro.h"

/*
 * Config parsers (policy, service files) report "FILE:LINE: what" into err
 * and fail with -EINVAL; the caller logs err and keeps its old state.
 */
__attribute__((format(printf, 5, 6)))
static inline int parse_fail(char *err, size_t err_len, const char *file, unsigned int line,
			     const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (err && err_len)
		snprintf(err, err_len, "%s:%u: %s", file, line, msg);
	return -EINVAL;
}

#endif
