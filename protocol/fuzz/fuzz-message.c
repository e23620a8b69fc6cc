/* SPDX-License-Identifier: MIT */
/*
 * fuzz-message.c - libFuzzer target for chmsg_decode(), which every client
 * runs on channel messages from other processes. A decoded message must
 * re-encode to exactly the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chmsg m;
	uint8_t *out;
	int n;

	if (chmsg_decode(&m, data, size) < 0)
		return 0;
	out = malloc(size);
	if (!out)
		return 0;
	n = chmsg_encode(&m, out, size);
	if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
		__builtin_trap();
	free(out);
	return 0;
}
