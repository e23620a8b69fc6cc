/* SPDX-License-Identifier: MIT */
/* util/test-array.c - array_reserve(): growth, no-op and overflow. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/array.h"
#include "util/macro.h"
#include "util/test.h"

int main(void)
{
	_cleanup_free_ int *a = NULL;
	size_t cap = 0;
	int *before;

	ASSERT_INT(ARRAY_RESERVE(a, cap, 1), ==, 0);
	ASSERT(a && cap >= 1);
	for (int i = 0; i < 1000; i++) {
		ASSERT_INT(ARRAY_RESERVE(a, cap, (size_t)i + 1), ==, 0);
		a[i] = i;
	}
	ASSERT(cap >= 1000);
	for (int i = 0; i < 1000; i++)
		ASSERT_INT(a[i], ==, i);
	before = a;
	ASSERT_INT(ARRAY_RESERVE(a, cap, 10), ==, 0);
	ASSERT(a == before);
	ASSERT_INT(ARRAY_RESERVE(a, cap, SIZE_MAX / 2), ==, -ENOMEM);
	ASSERT(a == before && cap >= 1000);
	return 0;
}
