/* SPDX-License-Identifier: MIT */
/*
 * fuzz-recv.c - libFuzzer target for what a client parses of bytes another
 * client sent: a completed channel receive (the kernel's info header and the
 * payload, as chan_message() sees it) decoded into a brokerd_msg, and every
 * accessor on it. Any peer allowed to call or signal us controls the
 * payload.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-internal.h"
#include "client/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct ioipc_msg_info *info;
	const void *payload, *body;
	struct chan c = { 0 };
	struct brokerd_creds cr;
	struct chmsg m;
	brokerd_msg *msg;
	size_t len, n;

	if (size > sizeof(struct ioipc_msg_info) + CHMSG_MAX)
		return 0;
	c.buf_size = sizeof(struct ioipc_msg_info) + CHMSG_MAX;
	c.buf = calloc(1, c.buf_size);
	if (!c.buf)
		return 0;
	memcpy(c.buf, data, size);
	c.res = (int)size;
	if (chan_message(&c, &info, &payload, &len) < 0 || chmsg_decode(&m, payload, len) < 0) {
		free(c.buf);
		return 0;
	}
	msg = msg_new(NULL, &m, info, "org.example.Fuzz");
	if (msg) {
		(void)brokerd_msg_get_type(msg);
		(void)strlen(brokerd_msg_get_sender(msg));
		(void)strlen(brokerd_msg_get_member(msg));
		(void)strlen(brokerd_msg_get_name(msg));
		(void)brokerd_msg_get_error_name(msg);
		(void)brokerd_msg_get_creds(msg, &cr);
		(void)brokerd_msg_get_serial(msg);
		if (brokerd_msg_get_body(msg, &body, &n) == 0 && n)
			(void)((const uint8_t *)body)[n - 1];
		/* a reply without a bus connection is refused, not attempted */
		if (brokerd_msg_get_type(msg) == BROKERD_MSG_CALL && msg->bus)
			abort();
		brokerd_msg_unref(msg);
	}
	free(c.buf);
	return 0;
}
