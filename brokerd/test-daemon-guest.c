/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-guest.c - brokerd-daemon, the guest integration test of the
 * system brokerd: installs its policy in /etc/brokerd/policy.d, RELOADs,
 * runs the control-plane tests (test-daemon-control.c) and then the data
 * plane on the kernel's channels (test-daemon-channels.c and below), and
 * removes its policy at the end. Real processes under different uids
 * (2001 "alice" in group 2100, 2002 "bob") check allowed and denied cases.
 *
 * On the project's kernel (BROKERD_TESTS_REQUIRE=1) brokerd without
 * channels, or a kernel without a feature used here, fails; elsewhere the
 * channel parts are skipped and the exit status is 77, never 0.
 */
#include "brokerd/test-daemon.h"

static void cleanup(void)
{
	if (getpid() != main_pid)
		return; /* a child's failed assertion */
	remove_file(policy_dir, policy_file);
	remove_file(policy_dir, "51-brokerd-tests-broken.conf");
	reload();
}

static void channel_quota_main(void)
{
	struct tc c;
	struct tc_msg m;

	/* inbox (1) + two names' call and signal channels (4) = 5 of 6 */
	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", "org.brokerdtest.alice.Cq1") == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", "org.brokerdtest.alice.Cq2") == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", "org.brokerdtest.alice.Cq3") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_QUOTA_EXCEEDED);
	TC_ASSERT(strncmp(m.error_message, "channels: uid 2001", 18) == 0);
	/* names whose channels exist cost nothing more */
	TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", "org.brokerdtest.alice.Cq1") == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT_EQ(quota_used_of(&c, ALICE, "channels"), 5);
	/* unsubscribed, nobody uses Cq1: its channels go, and there is room for Cq3 */
	expect_unsubscribe(&c, "org.brokerdtest.alice.Cq1", CTRL_UNSUBSCRIBE_DONE);
	TC_ASSERT_EQ(quota_used_of(&c, ALICE, "channels"), 3);
	TC_ASSERT_EQ(quota_used_of(&c, ALICE, "subscriptions"), 1);
	expect_subscribe(&c, "org.brokerdtest.alice.Cq3");
	tc_close(&c);
}

/* Guest only: the channels quota counts the channels created for a uid. */
static void test_channel_quota(void)
{
	set_policy("channels 6\n");
	as_user(ALICE, channel_quota_main);
	set_policy("");
	printf("# channels quota per uid: ok\n");
}

/* Guest only: the data plane. Caps attach, calls carry the caller's badge. */
static void test_channels(void)
{
	struct tc svc, caller;
	struct tc_msg m;
	struct io_uring ring;
	int call_recv_fd, call_send_fd;
	uint8_t buf[512];

	if (!have_channels) {
		skip_part("channels: brokerd runs without kernel IPC channels");
		return;
	}
	TC_ASSERT(io_uring_queue_init(8, &ring, 0) == 0);
	TC_ASSERT(tc_connect_hello(&svc, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&caller, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&svc, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.root.Chan", 0) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	TC_ASSERT_EQ(m.n_fds, 2);
	call_recv_fd = m.fds[0];
	close(m.fds[1]);
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", "org.brokerdtest.root.Chan", 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_CALL_OWNED);
	TC_ASSERT_EQ(m.n_fds, 1);
	call_send_fd = m.fds[0];

	struct ioipc_channel_attach ra = { .channel_id = (uint32_t)call_recv_fd,
					   .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV };
	struct ioipc_channel_attach sa = { .channel_id = (uint32_t)call_send_fd,
					   .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_SEND };
	int r = ioipc_channel_attach(&ring, &ra);
	if (r == -EINVAL || r == -EOPNOTSUPP) {
		skip_part("channels: the kernel lacks IOIPC_SUB_BY_FD");
		return;
	}
	TC_ASSERT_EQ(r, 0);
	TC_ASSERT_EQ(ioipc_channel_attach(&ring, &sa), 0);
	/* a send-only cap cannot receive: attaching it for RECV fails */
	struct ioipc_channel_attach bad = { .channel_id = (uint32_t)call_send_fd,
					    .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV };
	TC_ASSERT(ioipc_channel_attach(&ring, &bad) < 0);

	struct chmsg call = { .type = CHMSG_CALL,
			      .serial = 1,
			      .path = "/",
			      .member = "Ping",
			      .signature = "yy",
			      .body = "hi",
			      .body_len = 2 };
	int len = chmsg_encode(&call, buf, sizeof(buf));
	TC_ASSERT(len > 0);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	struct io_uring_cqe *cqe;
	ioipc_prep_send(sqe, sa.local_id_out, buf, (unsigned int)len, 0);
	TC_ASSERT(io_uring_submit_and_wait(&ring, 1) >= 1);
	TC_ASSERT(io_uring_wait_cqe(&ring, &cqe) == 0);
	TC_ASSERT_EQ(cqe->res, len);
	io_uring_cqe_seen(&ring, cqe);

	uint8_t rbuf[1024];
	sqe = io_uring_get_sqe(&ring);
	ioipc_prep_recv(sqe, ra.local_id_out, rbuf, sizeof(rbuf), IOIPC_RECV_INFO);
	TC_ASSERT(io_uring_submit_and_wait(&ring, 1) >= 1);
	TC_ASSERT(io_uring_wait_cqe(&ring, &cqe) == 0);
	TC_ASSERT_EQ(cqe->res, (int)sizeof(struct ioipc_msg_info) + len);
	io_uring_cqe_seen(&ring, cqe);
	struct ioipc_msg_info info;
	memcpy(&info, rbuf, sizeof(info));
	TC_ASSERT_EQ(info.badge, caller.id); /* the kernel says who called */
	TC_ASSERT_EQ(info.uid, getuid());
	struct chmsg got;
	TC_ASSERT(chmsg_decode(&got, rbuf + sizeof(info), (size_t)len) == 0);
	TC_ASSERT(strcmp(got.member, "Ping") == 0);

	/*
	 * reply path without asking: brokerd pushed the owner a SEND cap to the
	 * caller's inbox before answering the caller's OPEN_CALL, so it is on
	 * the owner's socket already (no waiting), and it sends there
	 */
	TC_ASSERT(tc_wait_signal(&svc, CTRL_SIGNAL_REPLY_CAPABILITY, &m, 0) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), caller.unique) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), "org.brokerdtest.root.Chan") == 0);
	TC_ASSERT_EQ(m.n_fds, 1);
	struct ioipc_channel_attach rc = { .channel_id = (uint32_t)m.fds[0],
					   .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_SEND };
	TC_ASSERT_EQ(ioipc_channel_attach(&ring, &rc), 0);
	close(rc.channel_fd);
	struct ioipc_channel_attach rcbad = { .channel_id = (uint32_t)m.fds[0],
					      .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV };
	TC_ASSERT(ioipc_channel_attach(&ring, &rcbad) < 0); /* for sending replies only */
	tc_msg_close_fds(&m);
	struct chmsg reply = { .type = CHMSG_REPLY, .serial = 1, .reply_serial = 1 };
	len = chmsg_encode(&reply, buf, sizeof(buf));
	TC_ASSERT(len > 0);
	sqe = io_uring_get_sqe(&ring);
	ioipc_prep_send(sqe, rc.local_id_out, buf, (unsigned int)len, 0);
	TC_ASSERT(io_uring_submit_and_wait(&ring, 1) >= 1);
	TC_ASSERT(io_uring_wait_cqe(&ring, &cqe) == 0);
	TC_ASSERT_EQ(cqe->res, len);
	io_uring_cqe_seen(&ring, cqe);

	/* reply path: OPEN_INBOX of the caller */
	TC_ASSERT(tc_call(&svc, CTRL_OP_OPEN_INBOX, &m, "s", caller.unique) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT(strcmp(tc_read_string(&m), caller.unique) == 0);
	TC_ASSERT_EQ(m.n_fds, 1);
	tc_msg_close_fds(&m);
	/* subscribing to the bus itself is always allowed */
	TC_ASSERT(tc_call(&caller, CTRL_OP_SUBSCRIBE, &m, "s", CTRL_BUS_NAME) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	/* monitor: one MonitorChannel signal per channel */
	TC_ASSERT(tc_call(&svc, CTRL_OP_MONITOR, &m, "u", 0) == 0);
	if (m.m.hdr.type == CTRL_TYPE_ERROR) {
		TC_EXPECT_ERROR(&m, CTRL_ERROR_NOT_SUPPORTED);
		printf("# monitor: %s\n", m.error_message);
		skip_part("monitor: the kernel lacks the monitor right");
	} else {
		uint32_t count = tc_read_u32(&m);

		TC_ASSERT(count >= 3);
		for (uint32_t i = 0; i < count; i++) {
			TC_ASSERT(tc_wait_signal(&svc, CTRL_SIGNAL_MONITOR_CHANNEL, &m, 5000) == 0);
			TC_ASSERT_EQ(m.n_fds, 1);
			tc_msg_close_fds(&m);
		}
	}
	io_uring_queue_exit(&ring);
	close(call_recv_fd);
	close(call_send_fd);
	tc_close(&svc);
	tc_close(&caller);
	printf("# channels: caps attach with their rights, badge = caller id, reply cap, inbox, monitor: ok\n");
	test_channels_more();
	test_revocation();
	test_revocation_inbox();
	test_unsubscribe_revocation();
	test_channel_quota();
	test_channel_limits();
	test_pool_queued_member();
	test_inbox_sizes();
}

int main(int argc, char **argv)
{
	const char *req = getenv("BROKERD_TESTS_REQUIRE");
	struct tc c;

	if (argc > 1) {
		/* the helper modes live in brokerd-test-helper now */
		fprintf(stderr, "usage: %s (no arguments; see brokerd-test-helper)\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	main_pid = getpid();
	signal(SIGPIPE, SIG_IGN);
	require_features = req && strcmp(req, "1") == 0;
	if (geteuid() != 0) {
		printf("SKIP: needs root (to run clients as other uids)\n");
		return require_features ? 1 : 77;
	}
	snprintf(sock_path, sizeof(sock_path), "%s", CTRL_SOCKET_PATH);
	snprintf(policy_dir, sizeof(policy_dir), "/etc/brokerd/policy.d");
	snprintf(service_dir, sizeof(service_dir), "/etc/brokerd/services");
	if (tc_connect_hello(&c, sock_path, 0) < 0) {
		printf("FAIL: cannot reach brokerd at %s\n", sock_path);
		return 1;
	}
	have_channels = c.features & CTRL_FEATURE_CHANNELS;
	tc_close(&c);
	if (!have_channels && require_features) {
		printf("FAIL: brokerd runs without kernel IPC channels on the project kernel\n");
		return 1;
	}
	mkdir("/etc/brokerd", 0755);
	mkdir(policy_dir, 0755);
	write_file(policy_dir, policy_file, base_policy);
	reload();
	atexit(cleanup);
	printf("# brokerd guest mode, channels %s\n", have_channels ? "on" : "off");

	control_tests_run();
	test_channels();
	if (skipped_part()) {
		printf("SKIP: %s (and every part above that says skipped)\n", skipped_part());
		return 77;
	}
	printf("ok\n");
	return 0;
}
