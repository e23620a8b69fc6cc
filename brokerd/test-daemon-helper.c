/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-helper.c - brokerd-test-helper, what the guest's shell tests
 * (brokerd-activation, brokerd-fulldisk, brokerd-restart, brokerd-service)
 * drive brokerd with:
 *
 *   brokerd-test-helper --own NAME           owns NAME, prints its unique
 *                                            name, sleeps until killed
 *   brokerd-test-helper --own-until-eof NAME owns NAME, reads its connection
 *                                            and exits 0 at EOF
 *   brokerd-test-helper --open-call NAME     OPEN_CALL: prints "owned",
 *                                            "activating" or the error
 *   brokerd-test-helper --hello -            HELLO only: prints its unique
 *                                            name ("unique :1.N")
 *   brokerd-test-helper --sizes-on-usr1 -    HELLO with SIZES, prints its
 *                                            unique name; on SIGUSR1 asks
 *                                            OPEN_INBOX for its own inbox
 *                                            and prints "told N" (the size
 *                                            the reply carries) or "told
 *                                            nothing"
 *
 * Installed beside the harness, not as a test.
 */
#include "brokerd/test-client.h"

int main(int argc, char **argv)
{
	struct tc c;
	struct tc_msg m;

	bool sizes = argc == 3 && strcmp(argv[1], "--sizes-on-usr1") == 0;
	sigset_t usr1;

	if (argc != 3)
		return 2;
	/* blocked before anyone can know us: taken by sigwait() below */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	if (tc_connect_hello(&c, CTRL_SOCKET_PATH, sizes ? CTRL_HELLO_SIZES : 0) < 0) {
		printf("cannot connect\n");
		return 1;
	}
	if (strcmp(argv[1], "--hello") == 0) {
		printf("unique %s\n", c.unique);
		return 0;
	}
	if (sizes) {
		/* a connection's SIZES outlives a brokerd restart (the hand-over) */
		uint32_t size;
		int sig;

		printf("unique %s\n", c.unique);
		fflush(stdout);
		if (sigwait(&usr1, &sig) != 0)
			return 1;
		TC_ASSERT(tc_call(&c, CTRL_OP_OPEN_INBOX, &m, "s", c.unique) == 0);
		if (m.m.hdr.type != CTRL_TYPE_REPLY) {
			printf("%s: %s\n", m.error_name, m.error_message);
			return 1;
		}
		(void)tc_read_string(&m);
		if (ctrl_reader_at_end(&m.r))
			printf("told nothing\n");
		else if (ctrl_read_u32(&m.r, &size) == 0)
			printf("told %u\n", size);
		tc_msg_close_fds(&m);
		return 0;
	}
	if (strcmp(argv[1], "--own") == 0) {
		TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", argv[2], 0) == 0);
		if (m.m.hdr.type != CTRL_TYPE_REPLY) {
			printf("%s: %s\n", m.error_name, m.error_message);
			return 1;
		}
		printf("owner of %s: %u\nunique %s\n", argv[2], tc_read_u32(&m), c.unique);
		fflush(stdout);
		for (;;)
			pause();
	}
	if (strcmp(argv[1], "--own-until-eof") == 0) {
		/* owns the name, then reads until brokerd closes the connection */
		TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", argv[2], 0) == 0);
		if (m.m.hdr.type != CTRL_TYPE_REPLY) {
			printf("%s: %s\n", m.error_name, m.error_message);
			return 1;
		}
		printf("owner of %s: %u\nunique %s\n", argv[2], tc_read_u32(&m), c.unique);
		tc_msg_close_fds(&m);
		fflush(stdout);
		for (;;) {
			int r = tc_recv(&c, &m, 600000);

			if (r == -ECONNRESET) {
				printf("disconnected: EOF\n");
				return 0;
			}
			if (r < 0) {
				printf("recv: %s\n", strerror(-r));
				return 1;
			}
			tc_msg_close_fds(&m); /* a signal: keep reading */
		}
	}
	if (strcmp(argv[1], "--open-call") == 0) {
		tc_timeout_ms = 120000;
		TC_ASSERT(tc_call(&c, CTRL_OP_OPEN_CALL, &m, "su", argv[2], 0) == 0);
		if (m.m.hdr.type != CTRL_TYPE_REPLY) {
			printf("%s: %s\n", m.error_name, m.error_message);
			return 1;
		}
		printf("%s\n", tc_read_u32(&m) == CTRL_CALL_OWNED ? "owned" : "activating");
		return 0;
	}
	return 2;
}
