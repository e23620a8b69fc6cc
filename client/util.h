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

#include "util/macro.h"

#define _public_ __attribute__((visibility("default")))

/* Member filter: NULL/"" all; alternatives separated by ','; each exact or a
 * prefix with a trailing '*'. */
bool filter_is_valid(const char *filter);
bool filter_match(const char *filter, const char *member);

/* CLOCK_MONOTONIC in microseconds */
uint64_t now_usec(void);


#endif
