/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-limits.c - the limits of brokerd's channels on the kernel
 * (guest): a message longer than the channel's message size fails with
 * -EMSGSIZE, a send to a full ring with -ENOBUFS, and a subscriber that
 * falls behind on a lossy signal channel is told how many signals it lost.
 */
#include "brokerd/channel.h"
#include "brokerd/test-daemon.h"

static int raw_send(struct io_uring *ring, uint32_t sub, const void *buf, size_t len)
{
	struct io_uring_cqe *cqe;
	int r;

	ioipc_prep_send(io_uring_get_sqe(ring), sub, buf, (unsigned int)len, 0);
	TC_ASSERT(io_uring_submit_and_wait(ring, 1) >= 1);
	TC_ASSERT(io_uring_wait_cqe(ring, &cqe) == 0);
	r = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return r;
}

static int raw_recv(struct io_uring *ring, uint32_t sub, void *buf, size_t size, uint32_t flags)
{
	struct io_uring_cqe *cqe;
	int r;

	ioipc_prep_recv(io_uring_get_sqe(ring), sub, buf, (unsigned int)size, flags);
	TC_ASSERT(io_uring_submit_and_wait(ring, 1) >= 1);
	TC_ASSERT(io_uring_wait_cqe(ring, &cqe) == 0);
	r = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return r;
}

/*
 * Guest only: the sizes brokerd gives its channels (CHANNEL_MSG_MAX bytes a
 * message, CHANNEL_SLOTS slots) hold on the kernel's channels.
 */
void test_channel_limits(void)
{
	const char *N = "org.brokerdtest.root.Limits";
	static uint8_t big[CHANNEL_MSG_MAX + 1], buf[CHANNEL_MSG_MAX + 64];
	struct tc svc, caller, sub;
	struct tc_msg m;
	struct io_uring ring;
	uint32_t call_recv, call_send, sig_send, sig_recv;
	uint32_t i;

	TC_ASSERT(io_uring_queue_init(64, &ring, 0) == 0);
	TC_ASSERT(tc_connect_hello(&svc, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&caller, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&sub, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&svc, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	TC_ASSERT_EQ(m.n_fds, 2);
	call_recv = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	sig_send = attach_cap(&ring, m.fds[1], IOIPC_SUB_SEND);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", N, 0) == 0);
	TC_EXPECT_REPLY(&m);
	call_send = attach_cap(&ring, m.fds[0], IOIPC_SUB_SEND);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&sub, CTRL_OP_SUBSCRIBE, &m, "s", N) == 0);
	TC_EXPECT_REPLY(&m);
	sig_recv = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	tc_msg_close_fds(&m);

	/* the message size: CHANNEL_MSG_MAX fits, one byte more is -EMSGSIZE */
	memset(big, 'm', sizeof(big));
	TC_ASSERT_EQ(raw_send(&ring, call_send, big, CHANNEL_MSG_MAX + 1), -EMSGSIZE);
	TC_ASSERT_EQ(raw_send(&ring, call_send, big, CHANNEL_MSG_MAX), CHANNEL_MSG_MAX);
	TC_ASSERT_EQ(raw_recv(&ring, call_recv, buf, sizeof(buf), 0), CHANNEL_MSG_MAX);
	TC_ASSERT_EQ(raw_recv(&ring, call_recv, buf, sizeof(buf), 0), -EAGAIN);
	printf("# channels: %d bytes fit, %d are -EMSGSIZE: ok\n", CHANNEL_MSG_MAX, CHANNEL_MSG_MAX + 1);

	/* a call channel whose owner does not receive: CHANNEL_SLOTS calls, then -ENOBUFS */
	for (i = 0; i < CHANNEL_SLOTS; i++)
		TC_ASSERT_EQ(raw_send(&ring, call_send, &i, sizeof(i)), sizeof(i));
	TC_ASSERT_EQ(raw_send(&ring, call_send, &i, sizeof(i)), -ENOBUFS);
	/* one received, room for one more, in order */
	TC_ASSERT_EQ(raw_recv(&ring, call_recv, buf, sizeof(buf), 0), sizeof(i));
	TC_ASSERT_EQ(*(uint32_t *)buf, 0);
	TC_ASSERT_EQ(raw_send(&ring, call_send, &i, sizeof(i)), sizeof(i));
	TC_ASSERT_EQ(raw_send(&ring, call_send, &i, sizeof(i)), -ENOBUFS);
	for (i = 1; i <= CHANNEL_SLOTS; i++) {
		TC_ASSERT_EQ(raw_recv(&ring, call_recv, buf, sizeof(buf), 0), sizeof(i));
		TC_ASSERT_EQ(*(uint32_t *)buf, i);
	}
	printf("# channels: a full ring of %d calls is -ENOBUFS, and takes calls again once read: ok\n",
	       CHANNEL_SLOTS);

	/*
	 * The signal channel is lossy: the publisher never gets -ENOBUFS; the
	 * subscriber that did not read loses the oldest 8 of CHANNEL_SLOTS + 8
	 * and is told so with the first signal it gets.
	 */
	for (i = 0; i < CHANNEL_SLOTS + 8; i++)
		TC_ASSERT_EQ(raw_send(&ring, sig_send, &i, sizeof(i)), sizeof(i));
	for (i = 8; i < CHANNEL_SLOTS + 8; i++) {
		struct ioipc_msg_info info;

		TC_ASSERT_EQ(raw_recv(&ring, sig_recv, buf, sizeof(buf), IOIPC_RECV_INFO),
			     sizeof(info) + sizeof(i));
		memcpy(&info, buf, sizeof(info));
		TC_ASSERT_EQ(*(uint32_t *)(buf + sizeof(info)), i);
		TC_ASSERT_EQ(info.lost, i == 8 ? 8 : 0);
		TC_ASSERT_EQ(info.badge, svc.id);
	}
	TC_ASSERT_EQ(raw_recv(&ring, sig_recv, buf, sizeof(buf), 0), -EAGAIN);
	printf("# channels: a lossy signal channel: the laggard is told it lost 8 of %d: ok\n",
	       CHANNEL_SLOTS + 8);

	io_uring_queue_exit(&ring);
	tc_close(&sub);
	tc_close(&caller);
	tc_close(&svc);
}
