/* SPDX-License-Identifier: MIT */
/*
 * util/test.h - assertions for host unit tests, one definition instead of a
 * copy per test file. A failed check names the file, line and expression
 * and ends the test with exit status 1 (meson: failed; 77 means skipped).
 * They evaluate their argument even under NDEBUG, unlike assert().
 */
#ifndef BROKERD_UTIL_TEST_H
#define BROKERD_UTIL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(x)                                                                                 \
	do {                                                                                      \
		if (!(x)) {                                                                       \
			fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #x); \
			exit(1);                                                                  \
		}                                                                                 \
	} while (0)

/* ASSERT_INT(a, op, b): also prints both values. */
#define ASSERT_INT(a, op, b)                                                                            \
	do {                                                                                            \
		long long _a = (long long)(a), _b = (long long)(b);                                     \
		if (!(_a op _b)) {                                                                      \
			fprintf(stderr, "%s:%d: assertion failed: %s %s %s (%lld %s %lld)\n", __FILE__, \
				__LINE__, #a, #op, #b, _a, #op, _b);                                    \
			exit(1);                                                                        \
		}                                                                                       \
	} while (0)

/* ASSERT_STR(a, b): the strings are equal; prints both if not. */
#define ASSERT_STR(a, b)                                                                             \
	do {                                                                                         \
		const char *_a = (a), *_b = (b);                                                     \
		if (strcmp(_a, _b) != 0) {                                                           \
			fprintf(stderr, "%s:%d: assertion failed: %s == %s (got '%s', want '%s')\n", \
				__FILE__, __LINE__, #a, #b, _a, _b);                                 \
			exit(1);                                                                     \
		}                                                                                    \
	} while (0)

#endif
