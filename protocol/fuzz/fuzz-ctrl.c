/* SPDX-License-Identifier: MIT */
/*
 * fuzz-ctrl.c - libFuzzer target for ctrl_message_decode(), the parser brokerd
 * runs on every control datagram, and for the readers clients run on replies.
 * The first input byte selects the fd count the datagram "arrived" with.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "protocol/fuzz/fuzz.h"

static const char *sig_skip(const char *s)
{
	if (*s == 'a')
		return sig_skip(s + 1);
	if (*s == '(') {
		for (s++; *s != ')';)
			s = sig_skip(s);
	}
	return s + 1;
}

/* Read one value of the type at sig; must never fail after decode succeeded. */
static void walk(struct ctrl_reader *r, const char *sig)
{
	uint32_t u, n;
	uint64_t t;
	const char *s;

	switch (*sig) {
	case 'u':
		if (ctrl_read_u32(r, &u) < 0)
			__builtin_trap();
		return;
	case 't':
		if (ctrl_read_u64(r, &t) < 0)
			__builtin_trap();
		return;
	case 's':
		if (ctrl_read_string(r, &s, NULL) < 0 || strlen(s) > CTRL_STRING_MAX)
			__builtin_trap();
		return;
	case 'a':
		if (ctrl_read_array(r, &n) < 0)
			__builtin_trap();
		for (uint32_t i = 0; i < n; i++)
			walk(r, sig + 1);
		return;
	case '(':
		for (sig++; *sig != ')'; sig = sig_skip(sig))
			walk(r, sig);
		return;
	}
	__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctrl_message m;
	struct ctrl_reader r;
	const char *sig;

	if (size < 1)
		return 0;
	if (ctrl_message_decode(&m, data + 1, size - 1, data[0] % (CTRL_FDS_MAX + 1)) < 0)
		return 0;
	ctrl_reader_init(&r, &m);
	for (sig = m.sig; *sig; sig = sig_skip(sig))
		walk(&r, sig);
	if (!ctrl_reader_at_end(&r))
		__builtin_trap();
	return 0;
}
