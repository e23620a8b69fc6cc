/* SPDX-License-Identifier: MIT */
/*
 * util/clock.h - the one clock deadlines and timeouts are measured on in
 * both wings (and in their tests): CLOCK_MONOTONIC in microseconds, the unit
 * sd-event's timers take.
 */
#ifndef BROKERD_UTIL_CLOCK_H
#define BROKERD_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

#endif
