/* SPDX-License-Identifier: MIT */
/* util.h - small helpers shared by brokerd's modules: cleanup attributes, TAKE_PTR. */
#ifndef BROKERD_UTIL_H
#define BROKERD_UTIL_H

#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

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

#define DEFINE_FREE_FUNC(type, func)			\
	static inline void func##p(type **p)		\
	{						\
		if (*p)					\
			func(*p);			\
	}

#endif
