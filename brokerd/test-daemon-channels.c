/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-channels.c - the data plane of the guest's brokerd-daemon:
 * capabilities attached and used on the kernel's channels, the identity the
 * kernel stamps on calls, and revocation in the kernel (at a reload, at
 * UNSUBSCRIBE, at a disconnect, at a replacement).
 */
#include "brokerd/test-daemon.h"
#include "protocol/dbus-marshal.h"

uint32_t attach_cap(struct io_uring *ring, int fd, uint32_t rights)
{
	struct ioipc_channel_attach a = { .channel_id = (uint32_t)fd, .flags = IOIPC_SUB_BY_FD | rights };

	TC_ASSERT_EQ(ioipc_channel_attach(ring, &a), 0);
	close(a.channel_fd); /* the region fd: we do not map it */
	return a.local_id_out;
}

int chan_send(struct io_uring *ring, uint32_t sub, const struct chmsg *msg)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	uint8_t buf[1024];
	int len = chmsg_encode(msg, buf, sizeof(buf)), r;

	TC_ASSERT(len > 0);
	ioipc_prep_send(sqe, sub, buf, (unsigned int)len, 0);
	TC_ASSERT(io_uring_submit_and_wait(ring, 1) >= 1);
	TC_ASSERT(io_uring_wait_cqe(ring, &cqe) == 0);
	r = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return r;
}

/* Receive one message (polling up to timeout_ms); returns the CQE result. */
int chan_recv(struct io_uring *ring, uint32_t sub, struct ioipc_msg_info *info, struct chmsg *msg,
	      uint8_t *buf, size_t size, int timeout_ms)
{
	for (int waited = 0;; waited += 10) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		struct io_uring_cqe *cqe;
		int r;

		ioipc_prep_recv(sqe, sub, buf, (unsigned int)size, IOIPC_RECV_INFO);
		TC_ASSERT(io_uring_submit_and_wait(ring, 1) >= 1);
		TC_ASSERT(io_uring_wait_cqe(ring, &cqe) == 0);
		r = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		if (r == -EAGAIN && waited < timeout_ms) {
			usleep(10000);
			continue;
		}
		if (r < 0)
			return r;
		TC_ASSERT(r >= (int)sizeof(*info));
		memcpy(info, buf, sizeof(*info));
		TC_ASSERT(chmsg_decode(msg, buf + sizeof(*info), (size_t)r - sizeof(*info)) == 0);
		return r;
	}
}

/*
 * Guest only: NameOwnerChanged on the bus's own channel; a call from another
 * uid carries that uid and its badge; an owner that is replaced is detached
 * by the kernel while the caller, untouched, reaches the new owner.
 */
void test_channels_more(void)
{
	const char *N = "org.brokerdtest.root.Chan2";
	struct tc watcher, svc, svc2, caller;
	struct tc_msg m;
	struct io_uring ring;
	struct ioipc_msg_info info;
	struct chmsg msg;
	uint8_t buf[1024];
	uint32_t bus_sub, svc_sub, svc2_sub, caller_sub;

	TC_ASSERT(io_uring_queue_init(16, &ring, 0) == 0);
	TC_ASSERT(tc_connect_hello(&watcher, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&watcher, CTRL_OP_SUBSCRIBE, &m, "s", CTRL_BUS_NAME) == 0);
	TC_EXPECT_REPLY(&m);
	bus_sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	tc_msg_close_fds(&m);

	/* the owner's caps */
	TC_ASSERT(tc_connect_hello(&svc, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&svc, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_ALLOW_REPLACEMENT) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	svc_sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	tc_msg_close_fds(&m);

	/* NameOwnerChanged(N, "", svc) on the bus channel, sent by brokerd (badge 0) */
	bool seen = false;
	while (!seen) {
		TC_ASSERT(chan_recv(&ring, bus_sub, &info, &msg, buf, sizeof(buf), 5000) > 0);
		TC_ASSERT(msg.type == CHMSG_SIGNAL && strcmp(msg.member, "NameOwnerChanged") == 0);
		TC_ASSERT_EQ(info.badge, 0);
		TC_ASSERT(strcmp(msg.signature, "sss") == 0 &&
			  strcmp(msg.interface, "org.freedesktop.DBus") == 0);
		struct dbus_reader r;
		const char *name, *old, *new;
		TC_ASSERT(dbus_reader_init(&r, "sss", msg.body, msg.body_len, msg.byte_order, 0) == 0);
		TC_ASSERT(dbus_reader_read_basic(&r, 's', &name) == 1);
		TC_ASSERT(dbus_reader_read_basic(&r, 's', &old) == 1);
		TC_ASSERT(dbus_reader_read_basic(&r, 's', &new) == 1);
		seen = strcmp(name, N) == 0 && strcmp(old, "") == 0 && strcmp(new, svc.unique) == 0;
	}

	/* a call from alice: the kernel stamps uid 2001 and alice's badge */
	int p[2], q[2], status;
	char ch;
	TC_ASSERT(pipe(p) == 0 && pipe(q) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct tc alice;
		struct io_uring aring;

		close(p[0]);
		close(q[1]);
		become(ALICE);
		TC_ASSERT(io_uring_queue_init(8, &aring, 0) == 0);
		TC_ASSERT(tc_connect_hello(&alice, sock_path, 0) == 0);
		TC_ASSERT(tc_call(&alice, CTRL_OP_OPEN_CALL, &m, "su", N, 0) == 0);
		TC_EXPECT_REPLY(&m);
		uint32_t s_sub = attach_cap(&aring, m.fds[0], IOIPC_SUB_SEND);
		tc_msg_close_fds(&m);
		struct chmsg call = { .type = CHMSG_CALL, .serial = 7, .path = "/", .member = "WhoAmI" };
		TC_ASSERT(chan_send(&aring, s_sub, &call) > 0);
		TC_ASSERT(write(p[1], &alice.id, sizeof(alice.id)) == sizeof(alice.id));
		TC_ASSERT(read(q[0], &ch, 1) == 1); /* stay connected until checked */
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	uint64_t alice_id;
	TC_ASSERT(read(p[0], &alice_id, sizeof(alice_id)) == sizeof(alice_id));
	TC_ASSERT(chan_recv(&ring, svc_sub, &info, &msg, buf, sizeof(buf), 5000) > 0);
	TC_ASSERT(msg.type == CHMSG_CALL && strcmp(msg.member, "WhoAmI") == 0 && msg.serial == 7);
	TC_ASSERT_EQ(info.uid, ALICE);
	TC_ASSERT_EQ(info.badge, alice_id);
	char sender[CTRL_UNIQUE_NAME_MAX];
	ctrl_unique_name_format(info.badge, sender);
	TC_ASSERT(tc_call(&svc, CTRL_OP_GET_CREDENTIALS, &m, "s", sender) == 0);
	TC_EXPECT_REPLY(&m);
	tc_read_u32(&m);
	tc_read_u32(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), ALICE);
	tc_msg_close_fds(&m);
	TC_ASSERT(write(q[1], "x", 1) == 1);
	TC_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(p[0]);
	close(q[1]);

	/*
	 * replacement: the old owner's receive right is revoked in the kernel;
	 * the caller keeps its subscription, and its next call reaches the new owner
	 */
	TC_ASSERT(tc_connect_hello(&caller, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", N, 0) == 0);
	caller_sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_SEND);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_connect_hello(&svc2, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&svc2, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_REPLACE_EXISTING) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	svc2_sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&svc, CTRL_SIGNAL_CAPABILITY_REVOKED, &m, 5000) == 0);
	/* the kernel detached the old owner's subscriber: its id is gone */
	TC_ASSERT_EQ(chan_recv(&ring, svc_sub, &info, &msg, buf, sizeof(buf), 0), -ENOENT);
	struct chmsg call2 = { .type = CHMSG_CALL, .serial = 8, .path = "/", .member = "Again" };
	TC_ASSERT(chan_send(&ring, caller_sub, &call2) > 0);
	TC_ASSERT(chan_recv(&ring, svc2_sub, &info, &msg, buf, sizeof(buf), 5000) > 0);
	TC_ASSERT(strcmp(msg.member, "Again") == 0 && info.badge == caller.id);
	TC_ASSERT(tc_wait_signal(&caller, CTRL_SIGNAL_CAPABILITY_REVOKED, &m, 300) < 0);

	io_uring_queue_exit(&ring);
	tc_close(&caller);
	tc_close(&svc2);
	tc_close(&svc);
	tc_close(&watcher);
	printf("# channels: NameOwnerChanged on the bus channel, cross-uid call identity, revocation on replacement: ok\n");
}

/* Sends until the kernel refuses (the cap was revoked); returns that error. */
static int send_until_refused(struct io_uring *ring, uint32_t sub, int timeout_ms)
{
	struct chmsg ping = { .type = CHMSG_SIGNAL,
			      .serial = 1,
			      .path = "/",
			      .interface = "org.brokerdtest.Test",
			      .member = "Ping" };
	int r;

	for (int waited = 0; (r = chan_send(ring, sub, &ping)) > 0 && waited < timeout_ms; waited += 10)
		usleep(10000);
	return r;
}

static void revoke_inbox_main(const char *target, int ready_fd)
{
	struct tc alice, alice2;
	struct tc_msg m;
	struct io_uring ring;
	uint32_t sub, sub2;

	TC_ASSERT(io_uring_queue_init(8, &ring, 0) == 0);
	TC_ASSERT(tc_connect_hello(&alice, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&alice2, sock_path, 0) == 0);
	/* target owns no name yet: anybody may reach its inbox */
	TC_ASSERT(tc_call(&alice, CTRL_OP_OPEN_INBOX, &m, "s", target) == 0);
	TC_EXPECT_REPLY(&m);
	sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_SEND);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&alice2, CTRL_OP_OPEN_INBOX, &m, "s", target) == 0);
	TC_EXPECT_REPLY(&m);
	sub2 = attach_cap(&ring, m.fds[0], IOIPC_SUB_SEND);
	tc_msg_close_fds(&m);

	/* a connection that ends takes its caps along, though the process stays */
	tc_close(&alice2);
	TC_ASSERT_EQ(send_until_refused(&ring, sub2, 5000), -ENOENT);
	TC_ASSERT(send_until_refused(&ring, sub, 0) > 0);

	TC_ASSERT(write(ready_fd, "x", 1) == 1);
	/* the parent makes target own a name alice may not send to, and reloads */
	TC_ASSERT(tc_wait_signal(&alice, CTRL_SIGNAL_CAPABILITY_REVOKED, &m, 10000) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), target) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_CHANNEL_INBOX);
	TC_ASSERT_EQ(send_until_refused(&ring, sub, 0), -ENOENT);
	TC_ASSERT(tc_call(&alice, CTRL_OP_OPEN_INBOX, &m, "s", target) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	io_uring_queue_exit(&ring);
	tc_close(&alice);
	fflush(stdout);
	_exit(0);
}

/*
 * Guest only: inbox SEND caps are revoked by a reload that no longer allows
 * them, and all caps of a connection when it ends.
 */
void test_revocation_inbox(void)
{
	const char *N = "org.brokerdtest.root.Inbox";
	struct tc target;
	struct tc_msg m;
	int p[2], status;
	char ch, text[1024];
	pid_t pid;

	if (!have_channels) {
		skip_part("revocation of inbox caps: brokerd runs without kernel IPC channels");
		return;
	}
	TC_ASSERT(tc_connect_hello(&target, sock_path, 0) == 0);
	TC_ASSERT(pipe(p) == 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		become(ALICE);
		revoke_inbox_main(target.unique, p[1]);
	}
	close(p[1]);
	TC_ASSERT(read(p[0], &ch, 1) == 1);
	close(p[0]);
	TC_ASSERT(tc_call(&target, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	tc_msg_close_fds(&m);
	snprintf(text, sizeof(text), "%s[user 2001]\ndeny send %s\n", base_policy, N);
	write_file(policy_dir, policy_file, text);
	TC_ASSERT(tc_call(&target, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	write_file(policy_dir, policy_file, base_policy);
	reload();
	tc_close(&target);
	printf("# revocation: inbox caps at a reload, all caps at a disconnect: ok\n");
}

/*
 * A reload takes the receive right on a name's signals away from alice's
 * group: alice is told, and (with channels) the kernel ends the receive she
 * has waiting on the channel with -EACCES. root, still allowed, is left
 * alone: no signal, and its subscription keeps receiving.
 */
void test_revocation(void)
{
	const char *N = "org.brokerdtest.alice.Rev";
	struct tc root, alice;
	struct tc_msg m;
	struct io_uring ring;
	int p[2], status;
	uint32_t root_sub = 0;
	pid_t pid;
	char ch;

	TC_ASSERT(tc_connect_hello(&root, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&root, CTRL_OP_SUBSCRIBE, &m, "s", N) == 0);
	TC_EXPECT_REPLY(&m);
	if (have_channels) {
		TC_ASSERT(io_uring_queue_init(8, &ring, 0) == 0);
		root_sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	}
	tc_msg_close_fds(&m);
	TC_ASSERT(pipe(p) == 0);
	pid = fork();
	if (pid == 0) {
		struct io_uring aring;
		struct io_uring_cqe *cqe;
		uint8_t buf[256];

		close(p[0]);
		become(ALICE);
		TC_ASSERT(tc_connect_hello(&alice, sock_path, 0) == 0);
		TC_ASSERT(tc_call(&alice, CTRL_OP_SUBSCRIBE, &m, "s", N) == 0);
		TC_EXPECT_REPLY(&m);
		TC_ASSERT_EQ(m.n_fds, 1);
		if (have_channels) {
			TC_ASSERT(io_uring_queue_init(8, &aring, 0) == 0);
			ioipc_prep_recv(io_uring_get_sqe(&aring),
					attach_cap(&aring, m.fds[0], IOIPC_SUB_RECV), buf, sizeof(buf),
					IOIPC_RECV_WAIT);
			TC_ASSERT(io_uring_submit(&aring) == 1);
		}
		tc_msg_close_fds(&m);
		TC_ASSERT(write(p[1], "x", 1) == 1);
		TC_ASSERT(tc_wait_signal(&alice, CTRL_SIGNAL_CAPABILITY_REVOKED, &m, 10000) == 0);
		TC_ASSERT(strcmp(tc_read_string(&m), N) == 0);
		TC_ASSERT_EQ(tc_read_u32(&m), CTRL_CHANNEL_SIGNAL);
		if (have_channels) {
			TC_ASSERT(io_uring_wait_cqe(&aring, &cqe) == 0);
			TC_ASSERT_EQ(cqe->res, -EACCES);
			io_uring_cqe_seen(&aring, cqe);
		}
		TC_ASSERT(tc_call(&alice, CTRL_OP_SUBSCRIBE, &m, "s", N) == 0);
		TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	TC_ASSERT(read(p[0], &ch, 1) == 1);
	close(p[0]);
	reload_deny_receive(&root, N);
	TC_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	TC_ASSERT(tc_wait_signal(&root, CTRL_SIGNAL_CAPABILITY_REVOKED, &m, 300) < 0);
	if (have_channels) {
		/* root's subscription was not touched: it hears the owner's next signal */
		struct chmsg sig = { .type = CHMSG_SIGNAL,
				     .serial = 1,
				     .path = "/",
				     .interface = "org.brokerdtest.Test",
				     .member = "StillThere" },
			     got;
		struct ioipc_msg_info info;
		uint8_t buf[1024];
		uint32_t send_sub;

		TC_ASSERT(tc_call(&root, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
		TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
		TC_ASSERT_EQ(m.n_fds, 2);
		send_sub = attach_cap(&ring, m.fds[1], IOIPC_SUB_SEND);
		tc_msg_close_fds(&m);
		TC_ASSERT(chan_send(&ring, send_sub, &sig) > 0);
		TC_ASSERT(chan_recv(&ring, root_sub, &info, &got, buf, sizeof(buf), 5000) > 0);
		TC_ASSERT(strcmp(got.member, "StillThere") == 0);
		io_uring_queue_exit(&ring);
	}
	write_file(policy_dir, policy_file, base_policy);
	TC_ASSERT(tc_call(&root, CTRL_OP_RELOAD, &m, "") == 0);
	tc_close(&root);
	printf("# revocation: a reload revokes alice's signal cap in the kernel, root's stays: ok\n");
}

/*
 * Guest only: UNSUBSCRIBE revokes the receive right in the kernel, so what
 * the client still had attached through its cap is detached: a receive it
 * left waiting ends with -EACCES. (test_revocation shows that the other
 * subscribers of a name are left alone.)
 */
void test_unsubscribe_revocation(void)
{
	const char *N = "org.brokerdtest.alice.UnsubRev";
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	struct tc_msg m;
	struct tc c;
	uint8_t buf[256];

	TC_ASSERT(io_uring_queue_init(8, &ring, 0) == 0);
	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", N) == 0);
	TC_EXPECT_REPLY(&m);
	ioipc_prep_recv(io_uring_get_sqe(&ring), attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV), buf,
			sizeof(buf), IOIPC_RECV_WAIT);
	tc_msg_close_fds(&m);
	TC_ASSERT(io_uring_submit(&ring) == 1);
	expect_unsubscribe(&c, N, CTRL_UNSUBSCRIBE_DONE);
	TC_ASSERT(io_uring_wait_cqe(&ring, &cqe) == 0);
	TC_ASSERT_EQ(cqe->res, -EACCES);
	io_uring_cqe_seen(&ring, cqe);
	expect_unsubscribe(&c, N, CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	io_uring_queue_exit(&ring);
	tc_close(&c);
	printf("# unsubscribe: the receive right is revoked in the kernel: ok\n");
}

/*
 * Guest only: a worker pool. The second connection to request a name with
 * POOL is queued, and gets the call channel's RECV cap (and no signal SEND
 * cap) with IN_QUEUE; through it, it receives calls, each stamped with the
 * caller's badge. A queued owner without POOL gets no cap at all.
 */
void test_pool_queued_member(void)
{
	const char *N = "org.brokerdtest.root.Pool";
	struct tc w1, w2, plain, caller;
	struct tc_msg m;
	struct io_uring ring;
	struct ioipc_msg_info info;
	struct chmsg msg;
	uint8_t buf[1024];
	uint32_t w2_recv, send_sub;

	TC_ASSERT(io_uring_queue_init(16, &ring, 0) == 0);
	TC_ASSERT(tc_connect_hello(&w1, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&w2, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&plain, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&caller, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&w1, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_POOL) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	TC_ASSERT_EQ(m.n_fds, 2);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&w2, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_POOL) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_IN_QUEUE);
	TC_ASSERT_EQ(m.n_fds, 1);
	w2_recv = attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&plain, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_IN_QUEUE);
	TC_ASSERT_EQ(m.n_fds, 0);

	/* w1 does not receive: the call waits in the ring until w2 takes it */
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", N, 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_CALL_OWNED);
	send_sub = attach_cap(&ring, m.fds[0], IOIPC_SUB_SEND);
	tc_msg_close_fds(&m);
	struct chmsg call = { .type = CHMSG_CALL, .serial = 3, .path = "/", .member = "Work" };
	TC_ASSERT(chan_send(&ring, send_sub, &call) > 0);
	TC_ASSERT(chan_recv(&ring, w2_recv, &info, &msg, buf, sizeof(buf), 5000) > 0);
	TC_ASSERT(msg.type == CHMSG_CALL && strcmp(msg.member, "Work") == 0 && msg.serial == 3);
	TC_ASSERT_EQ(info.badge, caller.id);

	io_uring_queue_exit(&ring);
	tc_close(&caller);
	tc_close(&plain);
	tc_close(&w2);
	tc_close(&w1);
	printf("# pool: a queued POOL member gets the call RECV cap and receives calls through it: ok\n");
}

/* The inbox size after the HELLO reply's features (SIZES): the slot size its inbox was made with. */
static uint32_t hello_sizes(struct tc *c)
{
	struct tc_msg m;
	const char *u;
	uint32_t size = 0;

	TC_ASSERT(tc_connect(c, sock_path) == 0);
	TC_ASSERT(tc_call(c, CTRL_OP_HELLO, &m, "u", CTRL_HELLO_SIZES) == 0);
	TC_EXPECT_REPLY(&m);
	u = tc_read_string(&m);
	snprintf(c->unique, sizeof(c->unique), "%s", u);
	TC_ASSERT(ctrl_read_u64(&m.r, &c->id) == 0 && ctrl_read_u32(&m.r, &c->features) == 0);
	TC_ASSERT(ctrl_read_u32(&m.r, &size) == 0 && ctrl_reader_at_end(&m.r));
	TC_ASSERT_EQ(m.n_fds, 1);
	tc_msg_close_fds(&m);
	return size;
}

/* OPEN_INBOX of peer from c: the size its reply tells, or UINT32_MAX when it tells none (`s`). */
static uint32_t open_inbox_size(struct tc *c, const char *peer)
{
	struct tc_msg m;
	uint32_t size = UINT32_MAX;

	TC_ASSERT(tc_call(c, CTRL_OP_OPEN_INBOX, &m, "s", peer) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT(strcmp(tc_read_string(&m), peer) == 0);
	if (!ctrl_reader_at_end(&m.r))
		TC_ASSERT(ctrl_read_u32(&m.r, &size) == 0 && ctrl_reader_at_end(&m.r));
	TC_ASSERT_EQ(m.n_fds, 1);
	tc_msg_close_fds(&m);
	return size;
}

/*
 * Guest only: a connection's inbox takes the geometry of `ring *`, fixed
 * when it is made; a client that said SIZES in its HELLO is told its own
 * inbox's slot size there, a peer's with OPEN_INBOX (`su`) and a caller's
 * with ReplyCapability (`ssu`); one that did not gets the replies as
 * before, with no field more.
 */
void test_inbox_sizes(void)
{
	const char *N = "org.brokerdtest.root.Sizes";
	struct tc big, small, plain;
	struct tc_msg m;
	uint32_t size = 0;

	/* made before: the default */
	TC_ASSERT_EQ(hello_sizes(&small), 8192);
	set_policy("[channels]\nring * 16 16384\n");
	TC_ASSERT_EQ(hello_sizes(&big), 16384);
	TC_ASSERT(tc_connect_hello(&plain, sock_path, 0) == 0);

	/* OPEN_INBOX: the peer's inbox, as it was made; not asked: `s` */
	TC_ASSERT_EQ(open_inbox_size(&big, small.unique), 8192);
	TC_ASSERT_EQ(open_inbox_size(&small, plain.unique), 16384);
	TC_ASSERT_EQ(open_inbox_size(&plain, big.unique), UINT32_MAX);

	/* ReplyCapability: the caller's inbox size to an owner that asked, none to one that did not */
	TC_ASSERT(tc_call(&small, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_POOL) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&plain, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_POOL) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_IN_QUEUE);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&big, CTRL_OP_OPEN_CALL, &m, "su", N, 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&small, CTRL_SIGNAL_REPLY_CAPABILITY, &m, 5000) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), big.unique) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), N) == 0);
	TC_ASSERT(ctrl_read_u32(&m.r, &size) == 0 && ctrl_reader_at_end(&m.r));
	TC_ASSERT_EQ(size, 16384);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&plain, CTRL_SIGNAL_REPLY_CAPABILITY, &m, 5000) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), big.unique) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), N) == 0);
	TC_ASSERT(ctrl_reader_at_end(&m.r));
	tc_msg_close_fds(&m);

	tc_close(&plain);
	tc_close(&small);
	tc_close(&big);
	set_policy("");
	printf("# inbox sizes: HELLO, OPEN_INBOX and ReplyCapability tell them to who asked: ok\n");
}
