/* SPDX-License-Identifier: MIT */
/*
 * fuzz-dbus-body.c - libFuzzer target for dbus_body_validate() and the
 * reader, which every receiver runs on D-Bus bodies from other processes.
 *
 * Input: one byte of flags (bit 0: big-endian, bits 1-3: number of fds),
 * one byte n, n bytes of signature, then the body. A body that validates
 * must convert to native order, read back completely in either order, and
 * be rewritten by the writer to exactly the converted bytes: padding and
 * lengths are canonical, so any difference is a bug.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "protocol/fuzz/fuzz.h"

/* Copy the rest of the reader's current container into the writer. */
static void copy_values(struct dbus_reader *r, struct dbus_writer *w)
{
	char type, contents[DBUS_SIGNATURE_MAX + 1];
	const char *c;
	size_t n;

	while (dbus_reader_peek(r, &type, &c, &n) > 0) {
		if (dbus_type_is_basic(type)) {
			union {
				uint64_t u;
				const char *s;
			} v;

			CHECK(dbus_reader_read_basic(r, type, &v) == 1);
			CHECK(dbus_writer_append_basic(w, type,
						       type == 's' || type == 'o' || type == 'g' ?
							       (const void *)v.s :
							       &v) == 0);
			continue;
		}
		memcpy(contents, c, n);
		contents[n] = 0;
		CHECK(dbus_reader_enter(r, type) == 1);
		CHECK(dbus_writer_open(w, type, contents) == 0);
		copy_values(r, w);
		CHECK(dbus_reader_exit(r) == 0);
		CHECK(dbus_writer_close(w) == 0);
	}
}

/* Read body (in byte order bo) and rewrite it: must give expect. */
static void rewrite(const char *sig, const uint8_t *body, size_t len, char bo, uint32_t n_fds,
		    const uint8_t *expect)
{
	struct dbus_reader r;
	struct dbus_writer w;
	void *out = NULL;
	size_t out_len;

	CHECK(dbus_reader_init(&r, sig, body, len, bo, n_fds) == 0);
	CHECK(dbus_writer_init(&w, sig) == 0);
	copy_values(&r, &w);
	CHECK(dbus_reader_exit(&r) < 0);
	CHECK(r.pos == len);
	CHECK(dbus_writer_finish(&w, &out, &out_len) == 0);
	CHECK(w.n_fds <= n_fds);
	CHECK(out_len == len && (len == 0 || memcmp(out, expect, len) == 0));
	free(out);
	dbus_writer_deinit(&w);

	/* skipping every value ends at the end as well */
	CHECK(dbus_reader_init(&r, sig, body, len, bo, n_fds) == 0);
	while (dbus_reader_skip(&r) > 0)
		;
	CHECK(r.pos == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char sig[256];
	const uint8_t *body;
	uint8_t *native;
	uint32_t n_fds;
	size_t n, len;
	char bo;

	if (size < 2)
		return 0;
	bo = data[0] & 1 ? DBUS_BIG_ENDIAN : DBUS_LITTLE_ENDIAN;
	n_fds = (data[0] >> 1) & 7;
	n = data[1];
	if (size - 2 < n)
		return 0;
	memcpy(sig, data + 2, n);
	sig[n] = 0;
	body = data + 2 + n;
	len = size - 2 - n;

	if (dbus_body_validate(sig, body, len, bo, n_fds) < 0)
		return 0;

	native = malloc(len ? len : 1);
	if (!native)
		return 0;
	memcpy(native, body, len);
	CHECK(dbus_body_to_native(sig, native, len, bo, n_fds) == 0);
	CHECK(dbus_body_validate(sig, native, len, DBUS_NATIVE_ENDIAN, n_fds) == 0);

	rewrite(sig, body, len, bo, n_fds, native);
	rewrite(sig, native, len, DBUS_NATIVE_ENDIAN, n_fds, native);
	free(native);
	return 0;
}
