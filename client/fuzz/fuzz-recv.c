/* SPDX-License-Identifier: MIT */
/*
 * fuzz-recv.c - libFuzzer target for what a client parses of bytes another
 * client sent: a completed channel receive (the kernel's info header and the
 * payload, as chan_message() sees it) decoded into a brokerd_msg, and every
 * accessor on it. Any peer allowed to call or signal us controls the
 * payload; its body is read through the typed API.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-internal.h"
#include "client/msg.h"
#include "protocol/fuzz/fuzz.h"

/* Reads every value of the current container by type, as a handler would. */
static void walk(brokerd_msg *msg, unsigned int depth)
{
	union {
		uint64_t u;
		double d;
		const char *s;
	} v;
	char type;

	while (depth < 70 && brokerd_msg_peek_type(msg, &type, NULL) == 1) {
		if (type == 'a' || type == '(' || type == '{' || type == 'v') {
			if (brokerd_msg_enter_container(msg, type, NULL) != 1)
				abort(); /* peeked as this: entering must work */
			walk(msg, depth + 1);
			if (brokerd_msg_exit_container(msg) < 0)
				abort();
		} else if (brokerd_msg_read_basic(msg, type, &v) != 1) {
			abort();
		} else if (type == 's' || type == 'o' || type == 'g') {
			(void)strlen(v.s);
		}
	}
}

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
	/* a BODY_FD body would be a memfd: the header alone is fuzzed here (fuzz-message too) */
	if (chan_message(&c, &info, &payload, &len) < 0 || chmsg_decode(&m, payload, len) < 0 || m.body_in_fd) {
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
		(void)strlen(brokerd_msg_get_path(msg));
		(void)strlen(brokerd_msg_get_interface(msg));
		(void)strlen(brokerd_msg_get_signature(msg));
		(void)strlen(brokerd_msg_get_destination(msg));
		if (brokerd_msg_get_body(msg, &body, &n) == 0 && n)
			(void)((const uint8_t *)body)[n - 1];
		if (brokerd_msg_get_data(msg, &body, &n) == 0 && n)
			(void)((const uint8_t *)body)[n - 1];
		/* the body was validated on receipt: every value reads back */
		walk(msg, 0);
		/* a reply without a bus connection is refused, not attempted */
		if (brokerd_msg_get_type(msg) == BROKERD_MSG_CALL && msg->bus)
			abort();
		brokerd_msg_unref(msg);
	}
	free(c.buf);
	return 0;
}
