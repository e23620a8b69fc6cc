/* SPDX-License-Identifier: MIT */
/*
 * test-filter.c - host unit tests of the member filters: validation and
 * matching.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "client/filter.h"

static void test_filter_valid(void)
{
	assert(filter_is_valid(NULL));
	assert(filter_is_valid(""));
	assert(filter_is_valid("Changed"));
	assert(filter_is_valid("Changed,Removed"));
	assert(filter_is_valid("Temp*"));
	assert(filter_is_valid("*"));
	assert(filter_is_valid("A*,B"));
	assert(!filter_is_valid(","));
	assert(!filter_is_valid("A,"));
	assert(!filter_is_valid(",A"));
	assert(!filter_is_valid("A,,B"));
	assert(!filter_is_valid("1abc"));
	assert(!filter_is_valid("a.b"));
	assert(!filter_is_valid("a*b"));
	assert(!filter_is_valid("**"));
	assert(!filter_is_valid("a b"));
}

static void test_filter_match(void)
{
	assert(filter_match(NULL, "Anything"));
	assert(filter_match("", "Anything"));
	assert(filter_match("Changed", "Changed"));
	assert(!filter_match("Changed", "Change"));
	assert(!filter_match("Changed", "ChangedX"));
	assert(filter_match("Temp*", "Temp"));
	assert(filter_match("Temp*", "Temperature"));
	assert(!filter_match("Temp*", "Tem"));
	assert(filter_match("*", "X"));
	assert(filter_match("A,B,C", "B"));
	assert(filter_match("A,B*,C", "Bee"));
	assert(!filter_match("A,B,C", "D"));
	assert(!filter_match("A", NULL));
}

int main(void)
{
	test_filter_valid();
	test_filter_match();
	printf("test-filter: ok\n");
	return 0;
}
