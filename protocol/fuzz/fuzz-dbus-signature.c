/* SPDX-License-Identifier: MIT */
/*
 * fuzz-dbus-signature.c - libFuzzer target for the signature parser and
 * the string and object path checks of dbus-signature.c, which run on
 * signatures from other processes (message headers and variants).
 *
 * A valid signature must split into single complete types that are valid
 * alone, and (within the depth limit) the writer must build a body for it
 * that the validator accepts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-marshal.h"
#include "protocol/fuzz/fuzz.h"

/* A value for each complete type in [s, s + n): zeros, empty arrays, "y" variants. */
static void fill(struct dbus_writer *w, const char *s, size_t n)
{
	static const uint64_t zero;
	size_t i = 0, k;

	while (i < n) {
		k = (size_t)dbus_signature_next(s + i, n - i);
		switch (s[i]) {
		case 's':
		case 'g':
			CHECK(dbus_writer_append_basic(w, s[i], "") == 0);
			break;
		case 'o':
			CHECK(dbus_writer_append_basic(w, 'o', "/") == 0);
			break;
		case 'a':
			CHECK(dbus_writer_open(w, 'a', NULL) == 0);
			CHECK(dbus_writer_close(w) == 0);
			break;
		case 'v':
			CHECK(dbus_writer_open(w, 'v', "y") == 0);
			CHECK(dbus_writer_append_basic(w, 'y', &zero) == 0);
			CHECK(dbus_writer_close(w) == 0);
			break;
		case '(':
			CHECK(dbus_writer_open(w, '(', NULL) == 0);
			fill(w, s + i + 1, k - 2);
			CHECK(dbus_writer_close(w) == 0);
			break;
		default:
			CHECK(dbus_writer_append_basic(w, s[i], &zero) == 0);
			break;
		}
		i += k;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	char sig[DBUS_SIGNATURE_MAX + 1];
	struct dbus_writer w;
	void *body;
	size_t i, len;
	int k;

	/* the other checks must not crash on anything */
	(void)dbus_object_path_validate(s, size);
	(void)dbus_string_validate(s, size);

	if (dbus_signature_validate(s, size) < 0)
		return 0;
	CHECK(size <= DBUS_SIGNATURE_MAX);
	for (i = 0; i < size; i += (size_t)k) {
		k = dbus_signature_next(s + i, size - i);
		CHECK(k > 0 && (size_t)k <= size - i);
		CHECK(dbus_signature_validate_single(s + i, (size_t)k) == 0);
		CHECK(dbus_type_alignment(s[i]) > 0);
	}
	CHECK((dbus_signature_validate_single(s, size) == 0) ==
	      (size > 0 && (size_t)dbus_signature_next(s, size) == size));

	memcpy(sig, s, size);
	sig[size] = 0;
	/* -EINVAL only where the variants' depth rule says so */
	if (dbus_writer_init(&w, sig) < 0)
		return 0;
	fill(&w, sig, size);
	CHECK(dbus_writer_finish(&w, &body, &len) == 0);
	CHECK(dbus_body_validate(sig, body, len, DBUS_NATIVE_ENDIAN, w.n_fds) == 0);
	free(body);
	dbus_writer_deinit(&w);
	return 0;
}
