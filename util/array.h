/* SPDX-License-Identifier: MIT */
/*
 * util/array.h - growing arrays. One helper instead of a hand-written
 * realloc-and-double in every module that keeps a vector.
 */
#ifndef BROKERD_UTIL_ARRAY_H
#define BROKERD_UTIL_ARRAY_H

#include <stddef.h>

/*
 * Makes *p hold at least need elements of elem_size bytes, growing the
 * capacity *cap geometrically. Returns 0, or -ENOMEM with *p and *cap
 * untouched (what was there stays valid and owned by the caller).
 */
int array_reserve(void **p, size_t *cap, size_t need, size_t elem_size);

/* ARRAY_RESERVE(a, cap, need): array_reserve() typed by a's element size. */
#define ARRAY_RESERVE(a, cap, need) array_reserve((void **)&(a), &(cap), (need), sizeof(*(a)))

#endif
