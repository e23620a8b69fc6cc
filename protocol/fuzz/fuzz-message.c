/* SPDX-License-Identifier: MIT */
/*
 * fuzz-message.c - libFuzzer target for chmsg_decode(), which every client
 * runs on version 2 channel messages from other processes (header, header
 * fields, body against its signature). A decoded message in native byte
 * order must encode again, and that encoding decode to the same fields.
 * chmsg_decode_generic() (no fast path) must decide and read the same.
 * A header announcing its body in a memfd (BODY_FD) has its body checked
 * by chmsg_decode_body() against the input's own bytes, cycled.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "protocol/fuzz/fuzz.h"
#include "protocol/message.h"

static int same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chmsg m, d, g;
	uint8_t *out;
	int n, r = chmsg_decode(&m, data, size);

	/* the fast path for the usual fields decides as the generic reader does, and reads the same */
	if (chmsg_decode_generic(&g, data, size) != r)
		__builtin_trap();
	if (r < 0)
		return 0;
	if (g.type != m.type || g.flags != m.flags || g.serial != m.serial || g.reply_serial != m.reply_serial ||
	    g.path != m.path || g.interface != m.interface || g.member != m.member ||
	    g.error_name != m.error_name || g.destination != m.destination || g.signature != m.signature ||
	    g.body_len != m.body_len || g.n_fds != m.n_fds || g.body_in_fd != m.body_in_fd || g.body != m.body)
		__builtin_trap();
	if (m.body_in_fd) {
		uint8_t *body;

		if (m.body == NULL && m.body_len <= 65536 && (body = malloc(m.body_len + 1))) {
			for (uint32_t i = 0; i < m.body_len; i++)
				body[i] = data[i % size];
			(void)chmsg_decode_body(&m, body);
			free(body);
		}
		return 0;
	}
	if (m.byte_order != DBUS_NATIVE_ENDIAN)
		return 0; /* the encoder writes native order only */
	/* unknown fields are dropped, so the encoding is at most as long */
	out = malloc(size);
	if (!out)
		return 0;
	n = chmsg_encode(&m, out, size);
	if (n < 0 || (size_t)n > size || chmsg_decode(&d, out, (size_t)n) < 0)
		__builtin_trap();
	if (d.type != m.type || d.flags != m.flags || d.serial != m.serial ||
	    d.reply_serial != m.reply_serial || !same(d.path, m.path) || !same(d.interface, m.interface) ||
	    !same(d.member, m.member) || !same(d.error_name, m.error_name) ||
	    !same(d.destination, m.destination) || !same(d.signature, m.signature) ||
	    d.body_len != m.body_len || d.n_fds != m.n_fds || d.body_in_fd || memcmp(d.body, m.body, m.body_len) != 0)
		__builtin_trap();
	free(out);
	return 0;
}
