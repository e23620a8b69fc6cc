/* SPDX-License-Identifier: MIT */
/*
 * util.h - pure helpers of the client library and brokerctl: member filters,
 * time, cleanup attributes. Name validation is protocol/ctrl.h's. No I/O;
 * unit-tested on the host by test-util.c.
 */
#ifndef BROKERD_CLIENT_UTIL_H
#define BROKERD_CLIENT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _public_ __attribute__((visibility("default")))
#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

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

#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

/* Member filter: NULL/"" all; alternatives separated by ','; each exact or a
 * prefix with a trailing '*'. */
bool filter_is_valid(const char *filter);
bool filter_match(const char *filter, const char *member);

/* CLOCK_MONOTONIC in microseconds */
uint64_t now_usec(void);


#endif
