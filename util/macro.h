/* SPDX-License-Identifier: MIT */
/*
 * macro.h - cleanup attributes and small macros shared by every layer
 * (protocol, brokerd, client). Lives in the lowest layer so that no layer
 * carries its own copy.
 */
#ifndef BROKERD_UTIL_MACRO_H
#define BROKERD_UTIL_MACRO_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f)  __attribute__((cleanup(f)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/*
 * BUG_ON(cond): an internal invariant that no input may break. If cond is
 * true the program has a bug: say where, and abort rather than run on with
 * broken state. Unlike assert() it is never compiled out; cond must have no
 * side effects all the same.
 */
#define BUG_ON(cond)                                                                    \
	do {                                                                            \
		if (__builtin_expect(!!(cond), 0)) {                                    \
			fprintf(stderr, "%s:%d: BUG: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                        \
		}                                                                       \
	} while (0)

/* Hand an owned pointer or fd over, leaving the cleanup nothing to free. */
#define TAKE_PTR(p)                     \
	({                              \
		__typeof__(p) _p = (p); \
		(p) = NULL;             \
		_p;                     \
	})
#define TAKE_FD(fd)             \
	({                      \
		int _fd = (fd); \
		(fd) = -1;      \
		_fd;            \
	})

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* func##p(): a cleanup helper for a destructor that must not see NULL. */
#define DEFINE_FREE_FUNC(type, func)         \
	static inline void func##p(type **p) \
	{                                    \
		if (*p)                      \
			func(*p);            \
	}

#endif
