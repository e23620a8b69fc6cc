/* SPDX-License-Identifier: MIT */
/*
 * fuzz-dbus-sasl.c - libFuzzer target for dbus_sasl_feed(), which brokerd
 * runs on the first bytes of every D-Bus connection.
 *
 * Input: one byte of flags (bit 0: the transport passes fds; bits 1-7: the
 * size of the pieces the rest arrives in, 0 = all at once), then what the
 * client sends. Whatever it is, the state machine must consume only whole
 * lines, never answer more than it was given room for, and agree to fds
 * only on a transport that has them and only once authenticated.
 */
#include <stdint.h>
#include <string.h>

#include "protocol/dbus-sasl.h"
#include "protocol/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[DBUS_SASL_REPLY_MAX * (DBUS_SASL_COMMANDS_MAX + 1)];
	struct dbus_sasl s;
	uint8_t buf[2 * DBUS_SASL_LINE_MAX + 128];
	size_t piece, have = 0, pos = 0;

	if (size < 1)
		return 0;
	dbus_sasl_init(&s, 1000, data[0] & 1, "0123456789abcdef0123456789abcdef");
	piece = data[0] >> 1;
	data++;
	size--;
	while (pos < size || have) {
		size_t n = piece ? piece : size - pos, consumed, out_len = 0;
		int r;

		if (n > size - pos)
			n = size - pos;
		if (n > sizeof(buf) - have)
			n = sizeof(buf) - have;
		memcpy(buf + have, data + pos, n);
		have += n;
		pos += n;
		r = dbus_sasl_feed(&s, buf, have, &consumed, out, sizeof(out), &out_len);
		CHECK(consumed <= have && out_len <= sizeof(out));
		CHECK(!s.fds_agreed || (s.can_fds && s.state >= DBUS_SASL_OK));
		if (r != 0)
			break;
		memmove(buf, buf + consumed, have - consumed);
		have -= consumed;
		if (!n && !consumed)
			break;
	}
	return 0;
}
