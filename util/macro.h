/* SPDX-License-Identifier: MIT */
/*
 * macro.h - cleanup attributes and small macros shared by every layer
 * (protocol, brokerd, client). Lives in the lowest layer so that no layer
 * carries its own copy.
 */
#ifndef BROKERD_PROTOCOL_MACRO_H
#define BROKERD_PROTOCOL_MACRO_H

#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand an owned pointer or fd over, leaving the cleanup nothing to free. */
#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

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
#define DEFINE_FREE_FUNC(type, func)			\
	static inline void func##p(type **p)		\
	{						\
		if (*p)					\
			func(*p);			\
	}

#endif
