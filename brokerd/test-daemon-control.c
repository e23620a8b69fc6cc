/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-control.c - brokerd's control plane over its socket, the same
 * in the host test (brokerd --no-channels) and in the guest (the system
 * brokerd): HELLO, malformed input, names and their queue, credentials,
 * policy across uids, quotas, reload, introspection, paged listings,
 * and UNSUBSCRIBE (floods: test-daemon-flood.c).
 */
#include "brokerd/test-daemon.h"
#include "util/socket.h"

static void test_hello(void)
{
	struct tc c;
	struct tc_msg m;

	TC_ASSERT(tc_connect(&c, sock_path) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_GET_NAME_OWNER, &m, "s", "org.brokerdtest.X") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NO_HELLO);
	TC_ASSERT(tc_hello(&c, 0) == 0);
	TC_ASSERT(strncmp(c.unique, ":1.", 3) == 0);
	TC_ASSERT(ctrl_unique_name_parse(c.unique, NULL) == 0);
	TC_ASSERT(have_channels == !!(c.features & CTRL_FEATURE_CHANNELS));
	TC_ASSERT(have_channels == (c.inbox_fd >= 0));
	TC_ASSERT(tc_call(&c, CTRL_OP_HELLO, &m, "u", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ALREADY_HELLO);
	TC_ASSERT(tc_call(&c, CTRL_OP_HELLO, &m, "u", 0x80) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ALREADY_HELLO);

	/* unique names are never reused */
	uint64_t first = c.id;
	tc_close(&c);

	/* SIZES: the inbox's largest message after the features (0 without one), to this client only */
	{
		const char *u;
		uint64_t id;
		uint32_t features, size = 1;

		TC_ASSERT(tc_connect(&c, sock_path) == 0);
		/* a flag brokerd does not know: refused, and HELLO may come again (libbrokerd's fallback) */
		TC_ASSERT(tc_call(&c, CTRL_OP_HELLO, &m, "u", 0x40) == 0);
		TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
		TC_ASSERT(tc_call(&c, CTRL_OP_HELLO, &m, "u", CTRL_HELLO_SIZES) == 0);
		TC_EXPECT_REPLY(&m);
		TC_ASSERT(ctrl_read_string(&m.r, &u, NULL) == 0 && ctrl_read_u64(&m.r, &id) == 0 &&
			  ctrl_read_u32(&m.r, &features) == 0 && ctrl_read_u32(&m.r, &size) == 0);
		TC_ASSERT(ctrl_reader_at_end(&m.r));
		TC_ASSERT(have_channels ? size >= 8192 && size <= 65536 : size == 0);
		tc_msg_close_fds(&m);
		tc_close(&c);
		TC_ASSERT(tc_connect(&c, sock_path) == 0);
		TC_ASSERT(tc_call(&c, CTRL_OP_HELLO, &m, "u", 0) == 0);
		TC_EXPECT_REPLY(&m);
		TC_ASSERT(ctrl_read_string(&m.r, &u, NULL) == 0 && ctrl_read_u64(&m.r, &id) == 0 &&
			  ctrl_read_u32(&m.r, &features) == 0);
		TC_ASSERT(ctrl_reader_at_end(&m.r)); /* `stu`, as before */
		tc_msg_close_fds(&m);
		tc_close(&c);
	}
	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(c.id > first);
	tc_close(&c);
	printf("# hello: ok\n");
}

static void test_malformed(void)
{
	struct tc c;
	struct tc_msg m;
	uint8_t buf[64] = { 0 };
	static uint8_t big[70000];

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	/* truncated header */
	TC_ASSERT(tc_send_raw(&c, "\x01\x01\x02", 3) == 0);
	TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_PROTOCOL);
	TC_ASSERT(m.m.hdr.code == 0);
	/* wrong version, serial echoed */
	buf[0] = 9;
	buf[1] = CTRL_TYPE_REQUEST;
	buf[2] = CTRL_OP_LIST_NAMES;
	buf[4] = 77;
	buf[8] = 4;
	TC_ASSERT(tc_send_raw(&c, buf, 20) == 0);
	TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_VERSION);
	TC_ASSERT(m.m.hdr.serial == 77);
	/* unknown op */
	buf[0] = CTRL_VERSION;
	buf[2] = 200;
	TC_ASSERT(tc_send_raw(&c, buf, 20) == 0);
	TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_UNKNOWN_OP);
	/* length field lies */
	buf[2] = CTRL_OP_LIST_NAMES;
	buf[8] = 40;
	TC_ASSERT(tc_send_raw(&c, buf, 20) == 0);
	TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_PROTOCOL);
	/* a reply sent as a request */
	buf[1] = CTRL_TYPE_REPLY;
	buf[8] = 4;
	TC_ASSERT(tc_send_raw(&c, buf, 20) == 0);
	TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_PROTOCOL);
	/* oversized */
	memset(big, 0xab, sizeof(big));
	big[0] = CTRL_VERSION;
	big[1] = CTRL_TYPE_REQUEST;
	TC_ASSERT(tc_send_raw(&c, big, sizeof(big)) == 0);
	TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_PROTOCOL);
	/* fds with a request */
	{
		struct ctrl_writer w;
		const void *d;
		size_t l;
		int fd = 0;

		TC_ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_LIST_NAMES, 5) == 0);
		ctrl_write_u32(&w, 0);
		TC_ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		TC_ASSERT(unix_send_fds(c.fd, d, l, &fd, 1, 0) == 0);
		ctrl_writer_deinit(&w);
		TC_ASSERT(tc_recv(&c, &m, 5000) == 0);
		TC_EXPECT_ERROR(&m, CTRL_ERROR_PROTOCOL);
	}
	/* bad arguments */
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "not a name", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.x", 0x100) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", ":1.1", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	/* still alive and well */
	TC_ASSERT(tc_call(&c, CTRL_OP_LIST_NAMES, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_close(&c);
	printf("# malformed input: ok\n");
}

static void test_names(void)
{
	struct tc a, b, w;
	struct tc_msg m;
	const char *N = "org.brokerdtest.root.Names";

	TC_ASSERT(tc_connect_hello(&w, sock_path, CTRL_HELLO_NAME_EVENTS) == 0);
	TC_ASSERT(tc_connect_hello(&a, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&b, sock_path, 0) == 0);

	TC_ASSERT(tc_call(&a, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	TC_ASSERT_EQ(m.n_fds, have_channels ? 2 : 0);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&w, CTRL_SIGNAL_NAME_OWNER_CHANGED, &m, 5000) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), N) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), "") == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), a.unique) == 0);

	TC_ASSERT(tc_call(&a, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_ALLOW_REPLACEMENT) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_ALREADY_OWNER);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&b, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_DO_NOT_QUEUE) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_EXISTS);
	TC_ASSERT(tc_call(&b, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_IN_QUEUE);
	TC_ASSERT_EQ(m.n_fds, 0);

	TC_ASSERT(tc_call(&w, CTRL_OP_LIST_QUEUED_OWNERS, &m, "s", N) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 2);
	TC_ASSERT(strcmp(tc_read_string(&m), a.unique) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), b.unique) == 0);
	TC_ASSERT(tc_call(&w, CTRL_OP_GET_NAME_OWNER, &m, "s", N) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), a.unique) == 0);
	TC_ASSERT(tc_call(&w, CTRL_OP_GET_NAME_OWNER, &m, "s", "org.brokerdtest.Nobody") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NAME_HAS_NO_OWNER);
	TC_ASSERT(tc_call(&w, CTRL_OP_LIST_NAMES, &m, "u", 0) == 0);
	{
		uint32_t n = tc_read_u32(&m);
		bool found = false, bus = false;

		for (uint32_t i = 0; i < n; i++) {
			const char *s = tc_read_string(&m);

			found = found || strcmp(s, N) == 0;
			bus = bus || strcmp(s, CTRL_BUS_NAME) == 0;
		}
		TC_ASSERT(found && bus);
	}

	/* replacement: b takes over, a goes back in the queue and gets NameLost */
	TC_ASSERT(tc_call(&b, CTRL_OP_REQUEST_NAME, &m, "su", N, CTRL_NAME_REPLACE_EXISTING) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&a, CTRL_SIGNAL_NAME_LOST, &m, 5000) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), N) == 0);
	TC_ASSERT(tc_wait_signal(&w, CTRL_SIGNAL_NAME_OWNER_CHANGED, &m, 5000) == 0);
	tc_read_string(&m);
	TC_ASSERT(strcmp(tc_read_string(&m), a.unique) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), b.unique) == 0);

	/* release: a is promoted and told so with NameAcquired (and its caps) */
	TC_ASSERT(tc_call(&b, CTRL_OP_RELEASE_NAME, &m, "s", N) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_RELEASE_RELEASED);
	TC_ASSERT(tc_call(&b, CTRL_OP_RELEASE_NAME, &m, "s", N) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_RELEASE_NOT_OWNER);
	TC_ASSERT(tc_call(&b, CTRL_OP_RELEASE_NAME, &m, "s", "org.brokerdtest.Never") == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_RELEASE_NON_EXISTENT);
	TC_ASSERT(tc_wait_signal(&a, CTRL_SIGNAL_NAME_ACQUIRED, &m, 5000) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), N) == 0);
	TC_ASSERT_EQ(m.n_fds, have_channels ? 2 : 0);
	tc_msg_close_fds(&m);

	/* disconnect: the name goes at once */
	TC_ASSERT(tc_call(&b, CTRL_OP_REQUEST_NAME, &m, "su", N, 0) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_IN_QUEUE);
	tc_close(&a);
	TC_ASSERT(tc_wait_signal(&b, CTRL_SIGNAL_NAME_ACQUIRED, &m, 5000) == 0);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&w, CTRL_OP_GET_NAME_OWNER, &m, "s", N) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), b.unique) == 0);
	tc_close(&b);
	for (;;) { /* ... and NameOwnerChanged(N, b, "") arrives */
		TC_ASSERT(tc_wait_signal(&w, CTRL_SIGNAL_NAME_OWNER_CHANGED, &m, 5000) == 0);
		if (strcmp(tc_read_string(&m), N) != 0)
			continue;
		const char *old = tc_read_string(&m);
		const char *new = tc_read_string(&m);
		if (strcmp(old, b.unique) == 0 && strcmp(new, "") == 0)
			break;
	}
	TC_ASSERT(tc_call(&w, CTRL_OP_GET_NAME_OWNER, &m, "s", N) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NAME_HAS_NO_OWNER);
	tc_close(&w);
	printf("# names, queue, replacement, NameOwnerChanged/Acquired/Lost: ok\n");
}

static void test_credentials(void)
{
	struct tc a, q;
	struct tc_msg m;
	uint32_t mask, pid, uid, gid, n;

	TC_ASSERT(tc_connect_hello(&a, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&q, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&q, CTRL_OP_GET_CREDENTIALS, &m, "s", a.unique) == 0);
	TC_EXPECT_REPLY(&m);
	mask = tc_read_u32(&m);
	pid = tc_read_u32(&m);
	uid = tc_read_u32(&m);
	gid = tc_read_u32(&m);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++)
		tc_read_u32(&m);
	TC_ASSERT(mask & CTRL_CREDS_PID && mask & CTRL_CREDS_UID && mask & CTRL_CREDS_GIDS);
	TC_ASSERT_EQ(pid, getpid());
	TC_ASSERT_EQ(uid, getuid());
	TC_ASSERT_EQ(gid, getgid());
	if (mask & CTRL_CREDS_PIDFD) {
		TC_ASSERT_EQ(m.n_fds, 1);
		/* the pidfd refers to us: fdinfo says Pid: <our pid> */
		TC_ASSERT_EQ(tc_pidfd_pid(m.fds[0]), getpid());
	} else {
		printf("# (kernel without SO_PEERPIDFD: no pidfd)\n");
	}
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&q, CTRL_OP_GET_CREDENTIALS, &m, "s", ":1.999999999") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NAME_HAS_NO_OWNER);
	tc_close(&a);
	tc_close(&q);
	printf("# credentials: ok\n");
}

static const char *read_peer(struct tc_msg *m, uint32_t *n_names, uint32_t *pid);

/* The pid LIST_PEERS reports for the peer with this unique name. */
static uint32_t listed_pid(struct tc *c, const char *unique)
{
	struct tc_msg m;
	uint32_t n, k, pid, found = UINT32_MAX;

	TC_ASSERT(tc_call(c, CTRL_OP_LIST_PEERS, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(read_peer(&m, &k, &pid), unique) == 0)
			found = pid;
	TC_ASSERT(found != UINT32_MAX);
	return found;
}

/*
 * A connection outlives the process that made it (a child inherited the
 * socket): its pid may be another process's by now, so brokerd reports 0
 * for it (LIST_PEERS) and leaves PID out of GET_CREDENTIALS's mask.
 */
static void test_credentials_exited(void)
{
	struct tc q;
	struct tc_msg m;
	char unique[CTRL_UNIQUE_NAME_MAX] = "";
	int names[2], hold[2];
	uint32_t mask, pid;
	pid_t child;
	int status;
	ssize_t k;

	TC_ASSERT(pipe2(names, O_CLOEXEC) == 0 && pipe2(hold, O_CLOEXEC) == 0);
	child = fork();
	TC_ASSERT(child >= 0);
	if (child == 0) {
		struct tc x;
		char c;

		close(names[0]);
		close(hold[1]);
		if (tc_connect_hello(&x, sock_path, 0) < 0)
			_exit(1);
		if (write(names[1], x.unique, strlen(x.unique) + 1) < 0)
			_exit(1);
		/* the connecting process waits to be told; its child keeps the socket */
		if (read(hold[0], &c, 1) != 1)
			_exit(1);
		if (fork() == 0) {
			(void)!read(hold[0], &c, 1); /* until the test closes hold */
			_exit(0);
		}
		_exit(0);
	}
	close(names[1]);
	k = read(names[0], unique, sizeof(unique) - 1);
	TC_ASSERT(k > 1);
	close(names[0]);
	TC_ASSERT(tc_connect_hello(&q, sock_path, 0) == 0);
	/* while the process that connected runs, its pid is what it was */
	TC_ASSERT_EQ(listed_pid(&q, unique), (uint32_t)child);
	TC_ASSERT(write(hold[1], "x", 1) == 1);
	TC_ASSERT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	TC_ASSERT_EQ(listed_pid(&q, unique), 0);
	TC_ASSERT(tc_call(&q, CTRL_OP_GET_CREDENTIALS, &m, "s", unique) == 0);
	TC_EXPECT_REPLY(&m);
	mask = tc_read_u32(&m);
	pid = tc_read_u32(&m);
	TC_ASSERT(!(mask & CTRL_CREDS_PID) && (mask & CTRL_CREDS_UID));
	TC_ASSERT_EQ(pid, 0);
	tc_msg_close_fds(&m);
	close(hold[1]); /* the grandchild goes, and the connection with it */
	close(hold[0]);
	tc_close(&q);
	printf("# credentials of a peer whose process exited: no pid: ok\n");
}

static void alice_main(void)
{
	struct tc c;
	struct tc_msg m;
	uint32_t mask, uid, gid, n;
	bool in_group = false;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	/* allowed by [user 2001] */
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.alice.Svc", 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	tc_msg_close_fds(&m);
	/* not granted: denied by default */
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.Other", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	/* own credentials seen by the broker, including the supplementary group */
	TC_ASSERT(tc_call(&c, CTRL_OP_GET_CREDENTIALS, &m, "s", "org.brokerdtest.alice.Svc") == 0);
	mask = tc_read_u32(&m);
	tc_read_u32(&m);
	uid = tc_read_u32(&m);
	gid = tc_read_u32(&m);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++)
		in_group = in_group || tc_read_u32(&m) == USERS_GID;
	tc_msg_close_fds(&m);
	TC_ASSERT((mask & CTRL_CREDS_UID) && uid == ALICE && gid == ALICE && in_group);
	/* the group rule grants receive */
	if (have_channels) {
		TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", "org.brokerdtest.alice.Svc") == 0);
		TC_EXPECT_REPLY(&m);
		TC_ASSERT_EQ(m.n_fds, 1);
		tc_msg_close_fds(&m);
	}
	/* policy check: own uid allowed, other uid denied */
	TC_ASSERT(tc_call(&c, CTRL_OP_POLICY_CHECK, &m, "uss", ALICE, "org.brokerdtest.alice.X", "own") == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_POLICY_ALLOW);
	TC_ASSERT(strstr(tc_read_string(&m), policy_file));
	TC_ASSERT(tc_call(&c, CTRL_OP_POLICY_CHECK, &m, "uss", BOB, "org.brokerdtest.alice.X", "own") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	/* privileged ops */
	TC_ASSERT(tc_call(&c, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	TC_ASSERT(tc_call(&c, CTRL_OP_MONITOR, &m, "u", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	TC_ASSERT(tc_call(&c, CTRL_OP_QUOTA, &m, "u", CTRL_QUOTA_ALL_UIDS) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	/* own quota: names used 1 */
	TC_ASSERT(tc_call(&c, CTRL_OP_QUOTA, &m, "u", ALICE) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 1);
	TC_ASSERT_EQ(tc_read_u32(&m), ALICE);
	n = tc_read_u32(&m);
	bool seen = false;
	for (uint32_t i = 0; i < n; i++) {
		const char *q = tc_read_string(&m);
		uint64_t used, limit;

		ctrl_read_u64(&m.r, &used);
		ctrl_read_u64(&m.r, &limit);
		if (strcmp(q, "names") == 0) {
			TC_ASSERT(used == 1 && limit == 5);
			seen = true;
		}
	}
	TC_ASSERT(seen);
	tc_close(&c);
}

static void bob_main(void)
{
	struct tc c;
	struct tc_msg m;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.alice.Svc", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	TC_ASSERT(strstr(m.error_message, "uid 2002 may not own org.brokerdtest.alice.Svc"));
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.bob.Allowed", 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&c, CTRL_OP_OPEN_CALL, &m, "su", "org.brokerdtest.alice.Svc", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	TC_ASSERT(tc_call(&c, CTRL_OP_SUBSCRIBE, &m, "s", "org.brokerdtest.alice.Svc") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACCESS_DENIED);
	TC_ASSERT(tc_call(&c, CTRL_OP_POLICY_CHECK, &m, "uss", BOB, "org.brokerdtest.alice.Svc", "send") ==
		  0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_POLICY_DENY);
	TC_ASSERT(strstr(tc_read_string(&m), "deny * org.brokerdtest.*"));
	tc_close(&c);
}

static void test_policy(void)
{
	as_user(ALICE, alice_main);
	as_user(BOB, bob_main);
	printf("# policy across uids (allowed and denied): ok\n");
}

/*
 * Requests PREFIX0 .. PREFIX<n-1>, which must succeed, then PREFIX<n>, which
 * must fail with QuotaExceeded; its error is left in m.
 */
static void request_names_to_quota(struct tc *c, const char *prefix, int n, struct tc_msg *m)
{
	char name[64];

	for (int i = 0; i <= n; i++) {
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		TC_ASSERT(tc_call(c, CTRL_OP_REQUEST_NAME, m, "su", name, 0) == 0);
		if (i == n)
			break;
		TC_EXPECT_REPLY(m);
		tc_msg_close_fds(m);
	}
	TC_EXPECT_ERROR(m, CTRL_ERROR_QUOTA_EXCEEDED);
}

static void quota_main(void)
{
	struct tc c;
	struct tc_msg m;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	request_names_to_quota(&c, "org.brokerdtest.alice.Q", 5, &m);
	TC_ASSERT(strncmp(m.error_message, "names: uid 2001", 15) == 0);
	/* releasing one frees the quota */
	TC_ASSERT(tc_call(&c, CTRL_OP_RELEASE_NAME, &m, "s", "org.brokerdtest.alice.Q0") == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.alice.Q5", 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);

	/* connections: 8 per uid (this one included); the 9th is told why, then closed */
	struct tc more[8];
	for (int i = 0; i < 7; i++)
		TC_ASSERT(tc_connect_hello(&more[i], sock_path, 0) == 0);
	TC_ASSERT(tc_connect(&more[7], sock_path) == 0);
	TC_ASSERT(tc_call(&more[7], CTRL_OP_HELLO, &m, "u", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_QUOTA_EXCEEDED);
	TC_ASSERT(strncmp(m.error_message, "connections: uid 2001", 21) == 0);
	TC_ASSERT(tc_recv(&more[7], &m, 5000) == -ECONNRESET);
	tc_close(&more[7]);
	tc_close(&more[0]);
	/* room again, once brokerd has seen the close */
	bool again = false;
	for (int i = 0; i < 100 && !again; i++) {
		again = tc_connect_hello(&more[0], sock_path, 0) == 0;
		if (!again) {
			tc_close(&more[0]);
			usleep(20000);
		}
	}
	TC_ASSERT(again);
	for (int i = 0; i < 7; i++)
		tc_close(&more[i]);
	tc_close(&c);
}

static void quota_uid_main(void)
{
	struct tc c;
	struct tc_msg m;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	request_names_to_quota(&c, "org.brokerdtest.alice.U", 7, &m);
	TC_ASSERT(strcmp(m.error_message, "names: uid 2001 uses 7 of 7") == 0);
	tc_close(&c);
}

static void test_quota(void)
{
	as_user(ALICE, quota_main);
	/* a per-uid limit: [limits user 2001] beats [limits] */
	set_policy("[limits user 2001]\nnames 7\n");
	as_user(ALICE, quota_uid_main);
	set_policy("");
	printf("# names and connections quotas per uid, errors naming them, per-uid limits: ok\n");
}

static void test_reload(void)
{
	struct tc root, alice;
	struct tc_msg m;
	pid_t pid;
	int p[2], status;
	char ch;

	TC_ASSERT(tc_connect_hello(&root, sock_path, 0) == 0);
	/* alice owns a name, then a reload takes the right away */
	TC_ASSERT(pipe(p) == 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		become(ALICE);
		TC_ASSERT(tc_connect_hello(&alice, sock_path, 0) == 0);
		TC_ASSERT(tc_call(&alice, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.alice.Revoked",
				  0) == 0);
		TC_EXPECT_REPLY(&m);
		tc_msg_close_fds(&m);
		TC_ASSERT(write(p[1], "x", 1) == 1);
		TC_ASSERT(tc_wait_signal(&alice, CTRL_SIGNAL_NAME_LOST, &m, 10000) == 0);
		TC_ASSERT(strcmp(tc_read_string(&m), "org.brokerdtest.alice.Revoked") == 0);
		/* still connected: the peer was not dropped */
		TC_ASSERT(tc_call(&alice, CTRL_OP_LIST_NAMES, &m, "u", 0) == 0);
		TC_EXPECT_REPLY(&m);
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	TC_ASSERT(read(p[0], &ch, 1) == 1);
	close(p[0]);
	write_file(
		policy_dir, policy_file,
		"[user 2001]\nallow own org.brokerdtest.alice.*\ndeny own org.brokerdtest.alice.Revoked\n"
		"allow send org.brokerdtest.*\n[group 2100]\nallow receive org.brokerdtest.*\n"
		"[user 2002]\ndeny * org.brokerdtest.*\nallow own org.brokerdtest.bob.Allowed\n[limits]\nnames 5\n"
		"connections 8\n");
	TC_ASSERT(tc_call(&root, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	TC_ASSERT(tc_call(&root, CTRL_OP_GET_NAME_OWNER, &m, "s", "org.brokerdtest.alice.Revoked") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NAME_HAS_NO_OWNER);

	/* a broken file: reload fails with file:line, the previous policy stays */
	write_file(policy_dir, "51-brokerd-tests-broken.conf", "[default]\nallow * *\nthis is bad\n");
	TC_ASSERT(tc_call(&root, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_POLICY);
	TC_ASSERT(strstr(m.error_message, "51-brokerd-tests-broken.conf:3:"));
	TC_ASSERT(tc_call(&root, CTRL_OP_POLICY_CHECK, &m, "uss", BOB, "org.brokerdtest.alice.X", "own") ==
		  0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_POLICY_DENY);
	remove_file(policy_dir, "51-brokerd-tests-broken.conf");
	write_file(policy_dir, policy_file, base_policy);
	TC_ASSERT(tc_call(&root, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);

	tc_close(&root);
	printf("# reload revokes without dropping peers; a bad file never loosens: ok\n");
}

static void test_introspection(void)
{
	struct tc a;
	struct tc_msg m;
	uint32_t n;
	bool found = false;

	TC_ASSERT(tc_connect_hello(&a, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&a, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.root.Intro", 0) == 0);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_PEERS, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++) {
		const char *u = tc_read_string(&m);
		uint64_t id;
		uint32_t pid, k;
		bool me = strcmp(u, a.unique) == 0;

		ctrl_read_u64(&m.r, &id);
		pid = tc_read_u32(&m);
		tc_read_u32(&m);
		tc_read_u32(&m);
		tc_read_string(&m);
		k = tc_read_u32(&m);
		for (uint32_t j = 0; j < k; j++) {
			const char *nm = tc_read_string(&m);

			if (me && strcmp(nm, "org.brokerdtest.root.Intro") == 0)
				found = true;
		}
		tc_read_u32(&m);
		if (me)
			TC_ASSERT(pid == (uint32_t)getpid() && id == a.id);
	}
	TC_ASSERT(found);
	TC_ASSERT(tc_call(&a, CTRL_OP_QUOTA, &m, "u", CTRL_QUOTA_ALL_UIDS) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT(tc_read_u32(&m) >= 1);
	TC_ASSERT(tc_call(&a, CTRL_OP_POLICY_CHECK, &m, "uss", ALICE, "org.brokerdtest.alice.A", "own") == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_POLICY_ALLOW);
	TC_ASSERT(tc_call(&a, CTRL_OP_POLICY_CHECK, &m, "uss", ALICE, "org.brokerdtest.alice.A", "fly") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	tc_close(&a);
	printf("# introspection (peers, quotas, policy check): ok\n");
}

/*
 * Reads one LIST_PEERS entry: its unique name; *n_names says how many names
 * it has, *pid (if not NULL) its pid.
 */
static const char *read_peer(struct tc_msg *m, uint32_t *n_names, uint32_t *pid)
{
	const char *unique = tc_read_string(m);
	uint32_t p;
	uint64_t id;

	TC_ASSERT(ctrl_read_u64(&m->r, &id) == 0);
	p = tc_read_u32(m);
	if (pid)
		*pid = p;
	tc_read_u32(m);
	tc_read_u32(m);
	tc_read_string(m);
	*n_names = tc_read_u32(m);
	for (uint32_t j = 0; j < *n_names; j++)
		tc_read_string(m);
	tc_read_u32(m);
	return unique;
}

/* The entries of a listing reply (names, or peers' unique names), each followed by a space. */
static uint32_t read_listing(struct tc_msg *m, bool peers, char *out, size_t size, uint32_t *max_names)
{
	uint32_t n = tc_read_u32(m), k;
	size_t len = strlen(out);

	for (uint32_t i = 0; i < n; i++) {
		const char *e = peers ? read_peer(m, &k, NULL) : tc_read_string(m);

		if (peers && max_names && k > *max_names)
			*max_names = k;
		len += (size_t)snprintf(out + len, size - len, "%s ", e);
		TC_ASSERT(len < size);
	}
	return n;
}

/*
 * Lists everything with LIST_NAMES_PAGE or LIST_PEERS_PAGE in pages of max
 * entries (0: as many as fit), following the cursors: the entries in order
 * into out (see read_listing); returns the number of pages.
 */
int list_pages(struct tc *c, uint16_t op, uint32_t flags, uint32_t max, char *out, size_t size,
	       uint32_t *max_names)
{
	static struct tc_msg m;
	char cursor[CTRL_CURSOR_MAX + 1] = "";
	int pages = 0;

	out[0] = 0;
	do {
		TC_ASSERT(tc_call(c, op, &m, "uus", flags, max, cursor) == 0);
		TC_EXPECT_REPLY(&m);
		uint32_t n = read_listing(&m, op == CTRL_OP_LIST_PEERS_PAGE, out, size, max_names);
		const char *next = tc_read_string(&m);

		TC_ASSERT(ctrl_reader_at_end(&m.r));
		TC_ASSERT(!max || n <= max);
		TC_ASSERT(!*next || (n > 0 && strcmp(next, cursor) != 0)); /* each page moves on */
		snprintf(cursor, sizeof(cursor), "%s", next);
		pages++;
	} while (*cursor);
	return pages;
}

/* The unpaged LIST_NAMES or LIST_PEERS into out, as list_pages. */
static void list_unpaged(struct tc *c, uint16_t op, uint32_t flags, char *out, size_t size)
{
	static struct tc_msg m;

	out[0] = 0;
	TC_ASSERT(tc_call(c, op, &m, "u", flags) == 0);
	TC_EXPECT_REPLY(&m);
	read_listing(&m, op == CTRL_OP_LIST_PEERS, out, size, NULL);
	TC_ASSERT(ctrl_reader_at_end(&m.r));
}

size_t count_words(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == ' ';
	return n;
}

/*
 * LIST_NAMES_PAGE and LIST_PEERS_PAGE: small pages give the same entries in
 * the same order as the unpaged ops; a cursor whose name went away still
 * works; bad cursors and flags are InvalidArgs.
 */
static void test_list_pages(void)
{
	static char want[1 << 17], got[1 << 17];
	const char *names[] = { "org.brokerdtest.root.PageA", "org.brokerdtest.root.PageB",
				"org.brokerdtest.root.PageC" };
	struct tc a, b, c;
	struct tc_msg m;
	int pages;

	TC_ASSERT(tc_connect_hello(&a, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&b, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		TC_ASSERT(tc_call(&a, CTRL_OP_REQUEST_NAME, &m, "su", names[i], 0) == 0);
		TC_EXPECT_REPLY(&m);
		tc_msg_close_fds(&m);
	}
	list_unpaged(&a, CTRL_OP_LIST_NAMES, 0, want, sizeof(want));
	TC_ASSERT(strncmp(want, "brokerd ", 8) == 0 && strstr(want, names[1]) && strstr(want, c.unique));
	for (uint32_t max = 0; max <= 3; max++) {
		pages = list_pages(&a, CTRL_OP_LIST_NAMES_PAGE, 0, max, got, sizeof(got), NULL);
		TC_ASSERT(strcmp(got, want) == 0);
		TC_ASSERT_EQ(pages, max ? (count_words(want) + max - 1) / max : 1);
	}
	list_unpaged(&a, CTRL_OP_LIST_PEERS, 0, want, sizeof(want));
	TC_ASSERT(strstr(want, a.unique) && strstr(want, b.unique) && strstr(want, c.unique));
	pages = list_pages(&a, CTRL_OP_LIST_PEERS_PAGE, 0, 1, got, sizeof(got), NULL);
	TC_ASSERT(strcmp(got, want) == 0);
	TC_ASSERT_EQ(pages, count_words(want));

	/* the cursor is a position, not an entry: PageB gone, the page after it starts at PageC */
	TC_ASSERT(tc_call(&a, CTRL_OP_RELEASE_NAME, &m, "s", names[1]) == 0);
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_NAMES_PAGE, &m, "uus", 0, 1, names[1]) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 1);
	TC_ASSERT(strcmp(tc_read_string(&m), names[2]) == 0);
	TC_ASSERT(strcmp(tc_read_string(&m), names[2]) == 0);
	/* after the last peer there is nothing, and that is the last page */
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_PEERS_PAGE, &m, "uus", 0, 0, ":1.99999999") == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 0);
	TC_ASSERT(strcmp(tc_read_string(&m), "") == 0);

	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_NAMES_PAGE, &m, "uus", 0, 1, "no cursor") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_NAMES_PAGE, &m, "uus", CTRL_LIST_ACTIVATABLE, 1, ":1.1") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_NAMES_PAGE, &m, "uus", 0x10, 1, "") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_PEERS_PAGE, &m, "uus", 0, 1, names[0]) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&a, CTRL_OP_LIST_PEERS_PAGE, &m, "uus", 1, 1, "") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	tc_close(&a);
	tc_close(&b);
	tc_close(&c);
	printf("# list pages: same entries in the same order as unpaged, cursors are positions: ok\n");
}

/*
 * UNSUBSCRIBE: brokerd forgets a subscription, which then no longer counts
 * against the subscriptions quota; asking twice, or for a name never
 * subscribed to, says NOT_SUBSCRIBED.
 */
static void test_unsubscribe(void)
{
	const char *N = "org.brokerdtest.root.Unsub";
	struct tc c;
	struct tc_msg m;
	uint64_t before;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_UNSUBSCRIBE, &m, "s", "not a name") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&c, CTRL_OP_UNSUBSCRIBE, &m, "s", ":1.1") == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	expect_unsubscribe(&c, N, CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	expect_unsubscribe(&c, CTRL_BUS_NAME, CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	if (have_channels) {
		before = quota_used_of(&c, getuid(), "subscriptions");
		expect_subscribe(&c, N);
		expect_subscribe(&c, N); /* one subscription, however often */
		TC_ASSERT_EQ(quota_used_of(&c, getuid(), "subscriptions"), before + 1);
		expect_unsubscribe(&c, N, CTRL_UNSUBSCRIBE_DONE);
		TC_ASSERT_EQ(quota_used_of(&c, getuid(), "subscriptions"), before);
		expect_unsubscribe(&c, N, CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
		/* subscribing again counts again */
		expect_subscribe(&c, N);
		TC_ASSERT_EQ(quota_used_of(&c, getuid(), "subscriptions"), before + 1);
		expect_unsubscribe(&c, N, CTRL_UNSUBSCRIBE_DONE);
		/* the bus's own signals: not counted, but forgotten all the same */
		expect_subscribe(&c, CTRL_BUS_NAME);
		expect_unsubscribe(&c, CTRL_BUS_NAME, CTRL_UNSUBSCRIBE_DONE);
		expect_unsubscribe(&c, CTRL_BUS_NAME, CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
		TC_ASSERT_EQ(quota_used_of(&c, getuid(), "subscriptions"), before);
	}
	tc_close(&c);
	printf("# unsubscribe: forgotten, quota given back, twice is NOT_SUBSCRIBED: ok\n");
}

/*
 * WATCH_SIGNALS: the reply counts the SignalChannel signals that follow,
 * one per owned name (with a signal RECV cap, counted as a subscription);
 * a name owned later is handed over too, until UNWATCH_SIGNALS.
 */
static void test_watch_signals(void)
{
	const char *N1 = "org.brokerdtest.root.Watch1", *N2 = "org.brokerdtest.root.Watch2",
		   *N3 = "org.brokerdtest.root.Watch3";
	struct tc c, owner;
	struct tc_msg m;
	uint32_t count;
	uint64_t before;
	bool seen = false;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_WATCH_SIGNALS, &m, "u", 1) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_INVALID_ARGS);
	TC_ASSERT(tc_call(&c, CTRL_OP_UNWATCH_SIGNALS, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_UNWATCH_NOT_WATCHING);
	if (!have_channels) {
		TC_ASSERT(tc_call(&c, CTRL_OP_WATCH_SIGNALS, &m, "u", 0) == 0);
		TC_EXPECT_ERROR(&m, CTRL_ERROR_NOT_SUPPORTED);
		tc_close(&c);
		printf("# watch signals: NotSupported without channels, bad flags refused: ok\n");
		return;
	}
	TC_ASSERT(tc_connect_hello(&owner, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&owner, CTRL_OP_REQUEST_NAME, &m, "su", N1, 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	before = quota_used_of(&c, getuid(), "subscriptions");
	TC_ASSERT(tc_call(&c, CTRL_OP_WATCH_SIGNALS, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	count = tc_read_u32(&m);
	TC_ASSERT(count >= 1);
	for (uint32_t i = 0; i < count; i++) {
		TC_ASSERT(tc_wait_signal(&c, CTRL_SIGNAL_SIGNAL_CHANNEL, &m, 5000) == 0);
		TC_ASSERT_EQ(m.n_fds, 1);
		seen |= strcmp(tc_read_string(&m), N1) == 0;
		tc_msg_close_fds(&m);
	}
	TC_ASSERT(seen);
	TC_ASSERT_EQ(quota_used_of(&c, getuid(), "subscriptions"), before + count);
	/* watching again hands out nothing twice */
	TC_ASSERT(tc_call(&c, CTRL_OP_WATCH_SIGNALS, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 0);
	/* a name owned later */
	TC_ASSERT(tc_call(&owner, CTRL_OP_REQUEST_NAME, &m, "su", N2, 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&c, CTRL_SIGNAL_SIGNAL_CHANNEL, &m, 5000) == 0);
	TC_ASSERT_EQ(m.n_fds, 1);
	TC_ASSERT(strcmp(tc_read_string(&m), N2) == 0);
	tc_msg_close_fds(&m);
	/* each is a subscription UNSUBSCRIBE ends */
	expect_unsubscribe(&c, N2, CTRL_UNSUBSCRIBE_DONE);
	TC_ASSERT_EQ(quota_used_of(&c, getuid(), "subscriptions"), before + count);
	TC_ASSERT(tc_call(&c, CTRL_OP_UNWATCH_SIGNALS, &m, "u", 0) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_UNWATCH_DONE);
	TC_ASSERT(tc_call(&owner, CTRL_OP_REQUEST_NAME, &m, "su", N3, 0) == 0);
	TC_EXPECT_REPLY(&m);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_signal(&c, CTRL_SIGNAL_SIGNAL_CHANNEL, &m, 300) < 0);
	tc_close(&owner);
	tc_close(&c);
	printf("# watch signals: owned names now and later, counted, until unwatched: ok\n");
}

void control_tests_run(void)
{
	test_hello();
	test_malformed();
	test_names();
	test_credentials();
	test_credentials_exited();
	test_policy();
	test_quota();
	test_reload();
	test_introspection();
	test_list_pages();
	test_unsubscribe();
	test_watch_signals();
	test_flood();
}
