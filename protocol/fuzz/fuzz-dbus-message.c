/* SPDX-License-Identifier: MIT */
/*
 * fuzz-dbus-message.c - libFuzzer target for dbus_message_parse(), which
 * brokerd runs on every message a D-Bus client sends it.
 *
 * Input: one byte, the number of fds that came with the message (0-7), then
 * the message. A message that parses must have the size framing says, and
 * stamping it must give a message that parses again with the same header
 * and the new sender.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/dbus-message.h"
#include "protocol/fuzz/fuzz.h"

static int streq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dbus_message m;
	struct dbus_header h;
	uint32_t n_fds;
	size_t frame;
	void *copy;

	if (size < 1)
		return 0;
	n_fds = data[0] & 7;
	data++;
	size--;
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (dbus_message_parse(&m, copy, size, n_fds) < 0) {
		dbus_message_deinit(&m);
		return 0;
	}
	CHECK(dbus_message_frame_size(data, size, &frame) == 0 && frame == size);
	h = m.h;
	CHECK(dbus_message_stamp(&m, ":1.1") == 0);
	CHECK(streq(m.h.sender, ":1.1"));
	CHECK(m.h.type == h.type && m.h.serial == h.serial && m.h.reply_serial == h.reply_serial);
	CHECK(m.h.n_fds == h.n_fds);
	dbus_message_deinit(&m);
	return 0;
}
