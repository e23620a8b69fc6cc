/* SPDX-License-Identifier: MIT */
/* util/array.c - growing arrays (see array.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/array.h"

int array_reserve(void **p, size_t *cap, size_t need, size_t elem_size)
{
	size_t n;
	void *a;

	if (need <= *cap)
		return 0;
	n = *cap ? *cap : 4;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem_size && n > SIZE_MAX / elem_size)
		return -ENOMEM;
	a = realloc(*p, n * elem_size);
	if (!a)
		return -ENOMEM;
	*p = a;
	*cap = n;
	return 0;
}
