/* SPDX-License-Identifier: MIT */
/*
 * test-filter.c - host unit tests of the member filters: validation and
 * matching.
 */
#include <stdio.h>
#include <string.h>

#include "client/filter.h"
#include "util/test.h"

static void test_filter_valid(void)
{
	ASSERT(filter_is_valid(NULL));
	ASSERT(filter_is_valid(""));
	ASSERT(filter_is_valid("Changed"));
	ASSERT(filter_is_valid("Changed,Removed"));
	ASSERT(filter_is_valid("Temp*"));
	ASSERT(filter_is_valid("*"));
	ASSERT(filter_is_valid("A*,B"));
	ASSERT(!filter_is_valid(","));
	ASSERT(!filter_is_valid("A,"));
	ASSERT(!filter_is_valid(",A"));
	ASSERT(!filter_is_valid("A,,B"));
	ASSERT(!filter_is_valid("1abc"));
	ASSERT(!filter_is_valid("a.b"));
	ASSERT(!filter_is_valid("a*b"));
	ASSERT(!filter_is_valid("**"));
	ASSERT(!filter_is_valid("a b"));
}

static void test_filter_match(void)
{
	ASSERT(filter_match(NULL, "Anything"));
	ASSERT(filter_match("", "Anything"));
	ASSERT(filter_match("Changed", "Changed"));
	ASSERT(!filter_match("Changed", "Change"));
	ASSERT(!filter_match("Changed", "ChangedX"));
	ASSERT(filter_match("Temp*", "Temp"));
	ASSERT(filter_match("Temp*", "Temperature"));
	ASSERT(!filter_match("Temp*", "Tem"));
	ASSERT(filter_match("*", "X"));
	ASSERT(filter_match("A,B,C", "B"));
	ASSERT(filter_match("A,B*,C", "Bee"));
	ASSERT(!filter_match("A,B,C", "D"));
	ASSERT(!filter_match("A", NULL));
}

int main(void)
{
	test_filter_valid();
	test_filter_match();
	printf("test-filter: ok\n");
	return 0;
}
