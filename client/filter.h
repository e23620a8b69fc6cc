/* SPDX-License-Identifier: MIT */
/*
 * filter.h - member filters of signal subscriptions: validation and
 * matching. Pure; unit-tested on the host by test-filter.c.
 */
#ifndef BROKERD_CLIENT_FILTER_H
#define BROKERD_CLIENT_FILTER_H

#include <stdbool.h>

/* Member filter: NULL/"" all; alternatives separated by ','; each exact or a
 * prefix with a trailing '*'. */
bool filter_is_valid(const char *filter);
bool filter_match(const char *filter, const char *member);

#endif
