/* SPDX-License-Identifier: MIT */
/* util.h - small helpers shared by brokerd's modules (cleanup attributes and
 * TAKE_PTR come from protocol/macro.h, shared with the client). */
#ifndef BROKERD_UTIL_H
#define BROKERD_UTIL_H

#include "macro.h"

#endif
