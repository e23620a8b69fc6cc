/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-flood.c - peers that do not play along with brokerd's flow
 * control: one that floods requests and never reads the replies is paused
 * while others are served (host and guest); one that never reads what
 * brokerd sends it is disconnected (host only: in the guest every cycle
 * makes, caps and revokes a name's channels and logs it, and hundreds of
 * them under TCG kept brokerd from its watchdog).
 */
#include "brokerd/test-daemon.h"

/* f sends requests and never reads: brokerd must pause it, not grow, and serve others. */
void test_flood(void)
{
	struct tc f, other;
	struct tc_msg m;
	struct ctrl_writer w;
	const void *d;
	size_t l;
	int sent = 0;

	TC_ASSERT(tc_connect_hello(&f, sock_path, 0) == 0);
	TC_ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_LIST_NAMES, 1) == 0);
	ctrl_write_u32(&w, 0);
	TC_ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
	int flags = fcntl(f.fd, F_GETFL);
	fcntl(f.fd, F_SETFL, flags | O_NONBLOCK);
	for (int i = 0; i < 100000; i++) {
		if (send(f.fd, d, l, MSG_NOSIGNAL) < 0)
			break;
		sent++;
	}
	ctrl_writer_deinit(&w);
	TC_ASSERT(sent > 0);
	TC_ASSERT(tc_connect_hello(&other, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&other, CTRL_OP_LIST_NAMES, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_close(&other);
	tc_close(&f);
	printf("# flood of %d unread requests: others still served: ok\n", sent);
}

/*
 * A connection that asked for NameOwnerChanged and never reads: once what
 * brokerd queues for it passes the output limit, the queue is replaced by a
 * QuotaExceeded error saying why; the peer reads what fit in its socket, then
 * that error, then EOF, and its name is gone.
 */
void test_flood_disconnect(void)
{
	const char *N = "org.brokerdtest.root.Flood";
	struct tc f, g;
	static struct tc_msg m;
	int cycles, r, read_back = 0;

	TC_ASSERT(tc_connect_hello(&f, sock_path, CTRL_HELLO_NAME_EVENTS) == 0);
	TC_ASSERT(tc_connect_hello(&g, sock_path, 0) == 0);
	/* two NameOwnerChanged to f per cycle: more than its socket and brokerd's 256 hold */
	for (cycles = 0; cycles < 500; cycles++) {
		TC_ASSERT(tc_call(&g, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
		TC_EXPECT_REPLY(&m);
		tc_msg_close_fds(&m);
		TC_ASSERT(tc_call(&g, CTRL_OP_RELEASE_NAME, &m, "s", N) == 0);
		TC_EXPECT_REPLY(&m);
	}
	while ((r = tc_recv(&f, &m, 5000)) == 0 && m.m.hdr.type == CTRL_TYPE_SIGNAL) {
		tc_msg_close_fds(&m);
		read_back++;
	}
	TC_ASSERT_EQ(r, 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_QUOTA_EXCEEDED);
	TC_ASSERT(strncmp(m.error_message, "output:", 7) == 0);
	TC_ASSERT_EQ(tc_recv(&f, &m, 5000), -ECONNRESET);
	TC_ASSERT(read_back < 2 * cycles);
	/* f's name is gone, and g, which reads, is still served */
	TC_ASSERT(tc_call(&g, CTRL_OP_GET_CREDENTIALS, &m, "s", f.unique) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NAME_HAS_NO_OWNER);
	TC_ASSERT(tc_call(&g, CTRL_OP_LIST_NAMES, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_close(&f);
	tc_close(&g);
	printf("# flood: a peer that never reads read %d signals, then QuotaExceeded, then EOF: ok\n",
	       read_back);
}
