/* SPDX-License-Identifier: MIT */
/*
 * protocol/fuzz/fuzz.h - what the fuzz targets share: the libFuzzer entry
 * point every target defines (fuzz-main.c calls it for replay builds) and a
 * check that traps, so a broken invariant is a crash the fuzzer reports even
 * in builds where assert() is compiled out.
 */
#ifndef BROKERD_PROTOCOL_FUZZ_H
#define BROKERD_PROTOCOL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                          \
	do {                              \
		if (!(x))                 \
			__builtin_trap(); \
	} while (0)

#endif
