/* SPDX-License-Identifier: MIT */
/*
 * test-daemon.c - end-to-end tests of brokerd over its control socket.
 *
 *   test-daemon BROKERD-BINARY   host mode (meson test): starts its own
 *                                brokerd --no-channels on a socket in a temp
 *                                dir with its own policy and activation dirs.
 *   test-daemon                  guest mode (installed as an integration
 *                                test): uses the system brokerd, installs its
 *                                policy in /etc/brokerd/policy.d, RELOADs,
 *                                and removes it at the end.
 *
 * Real processes under different uids (2001 "alice" in group 2100, 2002
 * "bob") check allowed and denied cases. Must run as root. Exit 0 pass,
 * 77 skip, 1 fail; output on stdout.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>

#include "brokerd/test-client.h"
#include "protocol/message.h"
#include "protocol/ioipc.h"

#define ALICE 2001
#define BOB 2002
#define USERS_GID 2100

static char sock_path[256], policy_dir[256], service_dir[256], activator_path[256], tmpdir[64];
static bool host_mode, have_channels, require_features;
static const char *skipped_what;
static pid_t daemon_pid, main_pid;
static void spawn_daemon(void);
static const char *policy_file = "50-brokerd-tests.conf";

static const char base_policy[] =
	"# written by brokerd's test-daemon\n"
	"[user 2001]\n"
	"allow own org.brokerdtest.alice.*\n"
	"allow send org.brokerdtest.*\n"
	"[group 2100]\n"
	"allow receive org.brokerdtest.*\n"
	"[user 2002]\n"
	"deny * org.brokerdtest.*\n"
	"allow own org.brokerdtest.bob.Allowed\n"
	"[limits]\n"
	"names 5\n"
	"connections 8\n";

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	TC_ASSERT(f);
	fputs(text, f);
	fclose(f);
	TC_ASSERT(rename(tmp, path) == 0);
}

static void remove_file(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

static void reload(void)
{
	struct tc c;
	struct tc_msg m;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);
	tc_close(&c);
}

/* Run fn in a child with uid/gid (and supplementary group USERS_GID for alice). */
/* Drops root for uid, with alice's supplementary group for alice. */
static void become(uid_t uid)
{
	gid_t g = USERS_GID;

	TC_ASSERT(setgroups(uid == ALICE ? 1 : 0, &g) == 0);
	TC_ASSERT(setresgid(uid, uid, uid) == 0);
	TC_ASSERT(setresuid(uid, uid, uid) == 0);
}

static void as_user(uid_t uid, void (*fn)(void))
{
	pid_t pid = fork();
	int status;

	TC_ASSERT(pid >= 0);
	if (pid == 0) {
		become(uid);
		fn();
		fflush(stdout);
		_exit(0);
	}
	TC_ASSERT(waitpid(pid, &status, 0) == pid);
	TC_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * A part that cannot run here. On the project's kernel (the harness sets
 * BROKERD_TESTS_REQUIRE=1) every feature is required: that fails at once.
 * Elsewhere the run goes on, and ends with exit 77 and the reason, never 0.
 */
static void skip_part(const char *what)
{
	if (require_features) {
		printf("FAIL: %s, but the project kernel must have it\n", what);
		exit(1);
	}
	printf("# %s: skipped\n", what);
	skipped_what = what;
}

/* --- tests ----------------------------------------------------------------- */

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
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u;
		struct ctrl_writer w;
		const void *d;
		size_t l;
		int fd = 0;

		TC_ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_LIST_NAMES, 5) == 0);
		ctrl_write_u32(&w, 0);
		TC_ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		struct iovec iov = { .iov_base = (void *)d, .iov_len = l };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u, .msg_controllen = sizeof(u) };
		memset(&u, 0, sizeof(u));
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.h), &fd, sizeof(int));
		TC_ASSERT(sendmsg(c.fd, &mh, 0) == (ssize_t)l);
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
	for (;;) {	/* ... and NameOwnerChanged(N, b, "") arrives */
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
		char path[64], line[256];
		bool ok = false;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", m.fds[0]);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strncmp(line, "Pid:", 4) == 0)
				ok = atoi(line + 4) == (int)getpid();
		if (f)
			fclose(f);
		TC_ASSERT(ok);
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
	TC_ASSERT(tc_call(&c, CTRL_OP_POLICY_CHECK, &m, "uss", BOB, "org.brokerdtest.alice.Svc", "send") == 0);
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
	char text[1024];

	as_user(ALICE, quota_main);
	/* a per-uid limit: [limits user 2001] beats [limits] */
	snprintf(text, sizeof(text), "%s[limits user 2001]\nnames 7\n", base_policy);
	write_file(policy_dir, policy_file, text);
	reload();
	as_user(ALICE, quota_uid_main);
	write_file(policy_dir, policy_file, base_policy);
	reload();
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
		TC_ASSERT(tc_call(&alice, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.alice.Revoked", 0) == 0);
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
	write_file(policy_dir, policy_file,
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
	TC_ASSERT(tc_call(&root, CTRL_OP_POLICY_CHECK, &m, "uss", BOB, "org.brokerdtest.alice.X", "own") == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_POLICY_DENY);
	remove_file(policy_dir, "51-brokerd-tests-broken.conf");
	write_file(policy_dir, policy_file, base_policy);
	TC_ASSERT(tc_call(&root, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);

	/* SIGHUP reloads too (systemctl reload) */
	if (host_mode) {
		char text[1024];
		bool changed = false;

		snprintf(text, sizeof(text), "%s[user 2002]\nallow own org.brokerdtest.bob.Hup\n", base_policy);
		write_file(policy_dir, policy_file, text);
		TC_ASSERT(kill(daemon_pid, SIGHUP) == 0);
		for (int i = 0; i < 100 && !changed; i++) {
			TC_ASSERT(tc_call(&root, CTRL_OP_POLICY_CHECK, &m, "uss", BOB, "org.brokerdtest.bob.Hup", "own") == 0);
			changed = tc_read_u32(&m) == CTRL_POLICY_ALLOW;
			if (!changed)
				usleep(20000);
		}
		TC_ASSERT(changed);
		write_file(policy_dir, policy_file, base_policy);
		TC_ASSERT(tc_call(&root, CTRL_OP_RELOAD, &m, "") == 0);
	}
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

/* Reads one LIST_PEERS entry: its unique name; *n_names says how many names it has. */
static const char *read_peer(struct tc_msg *m, uint32_t *n_names)
{
	const char *unique = tc_read_string(m);
	uint64_t id;

	TC_ASSERT(ctrl_read_u64(&m->r, &id) == 0);
	tc_read_u32(m);
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
		const char *e = peers ? read_peer(m, &k) : tc_read_string(m);

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
static int list_pages(struct tc *c, uint16_t op, uint32_t flags, uint32_t max, char *out, size_t size,
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
		TC_ASSERT(!*next || (n > 0 && strcmp(next, cursor) != 0));	/* each page moves on */
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

static size_t count_words(const char *s)
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
 * Host only (no channels to create for 300 names): more names than one
 * reply holds. The unpaged ops fail; the paged ones list everything, and
 * the peer owning them all is listed with as many of its names as fit.
 */
static void test_list_pages_large(void)
{
	static char got[1 << 18], text[2048], name[CTRL_NAME_MAX + 1];
	struct tc big, c;
	struct tc_msg m;
	uint32_t max_names = 0;
	int pages;

	if (!host_mode)
		return;
	snprintf(text, sizeof(text), "%s[limits user 0]\nnames 400\nconnections 16\n", base_policy);
	write_file(policy_dir, policy_file, text);
	reload();
	TC_ASSERT(tc_connect_hello(&big, sock_path, 0) == 0);
	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	for (int i = 0; i < 300; i++) {
		/* 230 bytes each: 300 of them are more than 64 KiB */
		snprintf(name, sizeof(name), "org.brokerdtest.root.Big.x%0199d.N%03d", 0, i);
		TC_ASSERT(tc_call(&big, CTRL_OP_REQUEST_NAME, &m, "su", name, 0) == 0);
		TC_EXPECT_REPLY(&m);
	}
	TC_ASSERT(tc_call(&c, CTRL_OP_LIST_NAMES, &m, "u", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_FAILED);
	TC_ASSERT(strstr(m.error_message, "exceed"));
	pages = list_pages(&c, CTRL_OP_LIST_NAMES_PAGE, 0, 0, got, sizeof(got), NULL);
	TC_ASSERT_EQ(pages, 2);
	TC_ASSERT(strstr(got, "N000 ") && strstr(got, "N299 ") && strstr(got, big.unique));
	TC_ASSERT(count_words(got) >= 300 + 3);	/* brokerd, 300 names, big, c */

	TC_ASSERT(tc_call(&c, CTRL_OP_LIST_PEERS, &m, "u", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_FAILED);
	pages = list_pages(&c, CTRL_OP_LIST_PEERS_PAGE, 0, 0, got, sizeof(got), &max_names);
	TC_ASSERT(strstr(got, big.unique) && strstr(got, c.unique));
	TC_ASSERT(max_names > 200 && max_names < 300);	/* cut short to fit */
	tc_close(&big);
	tc_close(&c);
	write_file(policy_dir, policy_file, base_policy);
	reload();
	printf("# list pages: names larger than a reply come in pages, a peer with too many is cut short: ok\n");
}

/* Host only: a restarted brokerd closes connections and never reuses unique names. */
static void test_restart(void)
{
	struct tc a, b;
	struct tc_msg m;

	if (!host_mode)
		return;	/* brokerd-restart does it with systemctl */
	TC_ASSERT(tc_connect_hello(&a, sock_path, 0) == 0);
	kill(daemon_pid, SIGTERM);
	TC_ASSERT(waitpid(daemon_pid, NULL, 0) == daemon_pid);
	TC_ASSERT(tc_recv(&a, &m, 5000) == -ECONNRESET);	/* the client sees EOF */
	spawn_daemon();
	TC_ASSERT(tc_connect_hello(&b, sock_path, 0) == 0);
	TC_ASSERT(b.id > a.id);
	tc_close(&a);
	tc_close(&b);
	printf("# restart: clients see EOF, unique names not reused: ok\n");
}

static void test_flood(void)
{
	struct tc f, other;
	struct tc_msg m;
	struct ctrl_writer w;
	const void *d;
	size_t l;
	int sent = 0;

	/* f sends requests and never reads: brokerd must pause it, not grow, and serve others */
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
 * Sends OPEN_CALL for name with serial without waiting for the reply, and
 * plays the activator brokerd then connects to: returns the connection,
 * after checking that brokerd asked for name.
 */
static int open_call_activate(struct tc *caller, int lfd, const char *name, uint32_t serial)
{
	struct ctrl_writer w;
	char want[300], buf[300];
	const void *d;
	size_t l;
	ssize_t n;
	int afd;

	TC_ASSERT(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_OPEN_CALL, serial) == 0);
	ctrl_write_string(&w, name);
	ctrl_write_u32(&w, 0);
	TC_ASSERT(ctrl_writer_finish(&w, &d, &l) == 0 && tc_send_raw(caller, d, l) == 0);
	ctrl_writer_deinit(&w);
	afd = accept(lfd, NULL, NULL);
	TC_ASSERT(afd >= 0);
	n = read(afd, buf, sizeof(buf) - 1);
	TC_ASSERT(n > 0);
	buf[n] = 0;
	snprintf(want, sizeof(want), "%s\n", name);
	TC_ASSERT(strcmp(buf, want) == 0);
	return afd;
}

static void activator_say(int afd, const char *line)
{
	TC_ASSERT(write(afd, line, strlen(line)) == (ssize_t)strlen(line));
}

/* A fake activator: answers "ok" and then (if own) takes the name itself. */
static void test_activation(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tc caller, svc;
	struct tc_msg m;
	int lfd, afd;
	char buf[256];

	if (!host_mode) {
		printf("# activation via systemd: covered by brokerd-activation\n");
		return;
	}
	write_file(service_dir, "org.brokerdtest.Act.service",
		   "[Service]\nName=org.brokerdtest.Act\nSystemdService=brokerdtest-act.service\n");
	write_file(service_dir, "org.brokerdtest.Slow.service",
		   "[Service]\nName=org.brokerdtest.Slow\nSystemdService=brokerdtest-slow.service\n");
	reload();
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memcpy(sa.sun_path, activator_path, strlen(activator_path) + 1);
	TC_ASSERT(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0);
	chmod(activator_path, 0666);

	TC_ASSERT(tc_connect_hello(&caller, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&caller, CTRL_OP_LIST_NAMES, &m, "u", CTRL_LIST_ACTIVATABLE) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), 2);
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", "org.brokerdtest.Unknown", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_SERVICE_UNKNOWN);
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", "org.brokerdtest.Act", CTRL_CALL_NO_ACTIVATE) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_NAME_HAS_NO_OWNER);

	/* request without waiting for the reply, play activator, then own the name */
	afd = open_call_activate(&caller, lfd, "org.brokerdtest.Act", 4242);
	activator_say(afd, "ok\n");
	TC_ASSERT(tc_recv(&caller, &m, 300) == -ETIMEDOUT);	/* still waiting */
	TC_ASSERT(tc_connect_hello(&svc, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&svc, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.Act", 0) == 0);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_NAME_PRIMARY_OWNER);
	tc_msg_close_fds(&m);
	TC_ASSERT(tc_wait_reply(&caller, 4242, &m, 5000) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), CTRL_CALL_OWNED);
	tc_msg_close_fds(&m);
	/* the activator was still watching the unit: the owner ends its watch */
	TC_ASSERT(read(afd, buf, sizeof(buf)) == 0);
	close(afd);

	/* the activator refuses: ActivationFailed with its reason */
	afd = open_call_activate(&caller, lfd, "org.brokerdtest.Slow", 4343);
	activator_say(afd, "error: unit not found\n");
	close(afd);
	TC_ASSERT(tc_wait_reply(&caller, 4343, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACTIVATION_FAILED);
	TC_ASSERT(strstr(m.error_message, "unit not found"));

	/*
	 * The unit starts, then fails: the activator says so on the open
	 * connection and the caller hears ActivationFailed at once, naming
	 * the unit and the result (long before the timeout, were it 25 s).
	 */
	afd = open_call_activate(&caller, lfd, "org.brokerdtest.Slow", 4545);
	activator_say(afd, "ok\n");
	TC_ASSERT(tc_recv(&caller, &m, 200) == -ETIMEDOUT);	/* started: still waiting */
	activator_say(afd, "failed: unit brokerdtest-slow.service failed (exit-code)\n");
	TC_ASSERT(tc_wait_reply(&caller, 4545, &m, 500) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACTIVATION_FAILED);
	TC_ASSERT(strcmp(m.error_message, "activation of org.brokerdtest.Slow failed: "
			 "unit brokerdtest-slow.service failed (exit-code)") == 0);
	TC_ASSERT(read(afd, buf, sizeof(buf)) == 0);	/* brokerd hung up */
	close(afd);

	/* the unit starts but never takes the name: Timeout */
	afd = open_call_activate(&caller, lfd, "org.brokerdtest.Slow", 4444);
	activator_say(afd, "ok\n");
	close(afd);
	TC_ASSERT(tc_wait_reply(&caller, 4444, &m, 5000) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_TIMEOUT);

	/* no activator at all: a clear error, not a hang */
	close(lfd);
	unlink(activator_path);
	TC_ASSERT(tc_call(&caller, CTRL_OP_OPEN_CALL, &m, "su", "org.brokerdtest.Slow", 0) == 0);
	TC_EXPECT_ERROR(&m, CTRL_ERROR_ACTIVATION_FAILED);
	tc_close(&svc);
	tc_close(&caller);
	printf("# activation: waits for the owner, activator errors, unit failures, timeout: ok\n");
}

/* What the uid of c uses of one quota, from QUOTA. */
static uint64_t quota_used_of(struct tc *c, uid_t uid, const char *quota)
{
	struct tc_msg m;
	uint64_t used = 0, limit, found = UINT64_MAX;
	uint32_t n;

	TC_ASSERT(tc_call(c, CTRL_OP_QUOTA, &m, "u", uid) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 1);
	TC_ASSERT_EQ(tc_read_u32(&m), uid);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++) {
		const char *q = tc_read_string(&m);

		TC_ASSERT(ctrl_read_u64(&m.r, &used) == 0 && ctrl_read_u64(&m.r, &limit) == 0);
		if (strcmp(q, quota) == 0)
			found = used;
	}
	TC_ASSERT(found != UINT64_MAX);
	return found;
}

static void expect_unsubscribe(struct tc *c, const char *name, uint32_t result)
{
	struct tc_msg m;

	TC_ASSERT(tc_call(c, CTRL_OP_UNSUBSCRIBE, &m, "s", name) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), result);
}

static void expect_subscribe(struct tc *c, const char *name)
{
	struct tc_msg m;

	TC_ASSERT(tc_call(c, CTRL_OP_SUBSCRIBE, &m, "s", name) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(m.n_fds, 1);
	tc_msg_close_fds(&m);
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
		expect_subscribe(&c, N);	/* one subscription, however often */
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
	char text[1024];

	snprintf(text, sizeof(text), "%schannels 6\n", base_policy);
	write_file(policy_dir, policy_file, text);
	reload();
	as_user(ALICE, channel_quota_main);
	write_file(policy_dir, policy_file, base_policy);
	reload();
	printf("# channels quota per uid: ok\n");
}

/* The test policy, but alice's group may no longer receive name's signals. */
static void reload_deny_receive(struct tc *root, const char *name)
{
	struct tc_msg m;
	char text[1024];

	snprintf(text, sizeof(text), "%s[group 2100]\ndeny receive %s\n", base_policy, name);
	write_file(policy_dir, policy_file, text);
	TC_ASSERT(tc_call(root, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);
}

static uint32_t attach_cap(struct io_uring *ring, int fd, uint32_t rights);
static int chan_send(struct io_uring *ring, uint32_t sub, const struct chmsg *msg);
static int chan_recv(struct io_uring *ring, uint32_t sub, struct ioipc_msg_info *info, struct chmsg *msg,
		     uint8_t *buf, size_t size, int timeout_ms);

/*
 * A reload takes the receive right on a name's signals away from alice's
 * group: alice is told, and (with channels) the kernel ends the receive she
 * has waiting on the channel with -EACCES. root, still allowed, is left
 * alone: no signal, and its subscription keeps receiving.
 */
static void test_revocation(void)
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
			ioipc_prep_recv(io_uring_get_sqe(&aring), attach_cap(&aring, m.fds[0], IOIPC_SUB_RECV), buf,
					sizeof(buf), IOIPC_RECV_WAIT);
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
		struct chmsg sig = { .type = CHMSG_SIGNAL, .serial = 1, .member = "StillThere" }, got;
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
static void test_unsubscribe_revocation(void)
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
	ioipc_prep_recv(io_uring_get_sqe(&ring), attach_cap(&ring, m.fds[0], IOIPC_SUB_RECV), buf, sizeof(buf),
			IOIPC_RECV_WAIT);
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

/* --- real channels (guest) ------------------------------------------------ */

static uint32_t attach_cap(struct io_uring *ring, int fd, uint32_t rights)
{
	struct ioipc_channel_attach a = { .channel_id = (uint32_t)fd, .flags = IOIPC_SUB_BY_FD | rights };

	TC_ASSERT_EQ(ioipc_channel_attach(ring, &a), 0);
	close(a.channel_fd);	/* the region fd: we do not map it */
	return a.local_id_out;
}

static int chan_send(struct io_uring *ring, uint32_t sub, const struct chmsg *msg)
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
static int chan_recv(struct io_uring *ring, uint32_t sub, struct ioipc_msg_info *info, struct chmsg *msg,
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
static void test_channels_more(void)
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
		TC_ASSERT(ctrl_sig_validate("sss", msg.body, msg.body_len) == 0);
		struct ctrl_reader r;
		const char *name, *old, *new;
		ctrl_reader_init_raw(&r, msg.body, msg.body_len);
		ctrl_read_string(&r, &name, NULL);
		ctrl_read_string(&r, &old, NULL);
		ctrl_read_string(&r, &new, NULL);
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
		struct chmsg call = { .type = CHMSG_CALL, .serial = 7, .member = "WhoAmI" };
		TC_ASSERT(chan_send(&aring, s_sub, &call) > 0);
		TC_ASSERT(write(p[1], &alice.id, sizeof(alice.id)) == sizeof(alice.id));
		TC_ASSERT(read(q[0], &ch, 1) == 1);	/* stay connected until checked */
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
	struct chmsg call2 = { .type = CHMSG_CALL, .serial = 8, .member = "Again" };
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
	struct chmsg ping = { .type = CHMSG_SIGNAL, .serial = 1, .member = "Ping" };
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
static void test_revocation_inbox(void)
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

	struct ioipc_channel_attach ra = { .channel_id = (uint32_t)call_recv_fd, .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV };
	struct ioipc_channel_attach sa = { .channel_id = (uint32_t)call_send_fd, .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_SEND };
	int r = ioipc_channel_attach(&ring, &ra);
	if (r == -EINVAL || r == -EOPNOTSUPP) {
		skip_part("channels: the kernel lacks IOIPC_SUB_BY_FD");
		return;
	}
	TC_ASSERT_EQ(r, 0);
	TC_ASSERT_EQ(ioipc_channel_attach(&ring, &sa), 0);
	/* a send-only cap cannot receive: attaching it for RECV fails */
	struct ioipc_channel_attach bad = { .channel_id = (uint32_t)call_send_fd, .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV };
	TC_ASSERT(ioipc_channel_attach(&ring, &bad) < 0);

	struct chmsg call = { .type = CHMSG_CALL, .serial = 1, .member = "Ping", .body = "hi", .body_len = 2 };
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
	TC_ASSERT_EQ(info.badge, caller.id);	/* the kernel says who called */
	TC_ASSERT_EQ(info.uid, getuid());
	struct chmsg got;
	TC_ASSERT(chmsg_decode(&got, rbuf + sizeof(info), (size_t)len) == 0);
	TC_ASSERT(strcmp(got.member, "Ping") == 0);

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
	printf("# channels: caps attach with their rights, badge = caller id, inbox, monitor: ok\n");
	test_channels_more();
	test_revocation();
	test_revocation_inbox();
	test_unsubscribe_revocation();
	test_channel_quota();
}

/* --- setup ----------------------------------------------------------------- */

static void cleanup(void)
{
	if (getpid() != main_pid)
		return;	/* a child's failed assertion */
	if (host_mode) {
		if (daemon_pid > 0) {
			kill(daemon_pid, SIGTERM);
			waitpid(daemon_pid, NULL, 0);
		}
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			printf("# cannot remove %s\n", tmpdir);
	} else {
		remove_file(policy_dir, policy_file);
		remove_file(policy_dir, "51-brokerd-tests-broken.conf");
		reload();
	}
}

static const char *daemon_binary;

static void start_daemon(const char *binary)
{
	daemon_binary = binary;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-daemon-XXXXXX");
	TC_ASSERT(mkdtemp(tmpdir));
	chmod(tmpdir, 0755);
	snprintf(sock_path, sizeof(sock_path), "%s/socket", tmpdir);
	snprintf(policy_dir, sizeof(policy_dir), "%s/policy.d", tmpdir);
	snprintf(service_dir, sizeof(service_dir), "%s/services", tmpdir);
	snprintf(activator_path, sizeof(activator_path), "%s/activator", tmpdir);
	TC_ASSERT(mkdir(policy_dir, 0755) == 0 && mkdir(service_dir, 0755) == 0);
	write_file(policy_dir, policy_file, base_policy);
	spawn_daemon();
}

static void spawn_daemon(void)
{
	const char *binary = daemon_binary;
	struct tc c;

	daemon_pid = fork();
	TC_ASSERT(daemon_pid >= 0);
	if (daemon_pid == 0) {
		char state[300];

		snprintf(state, sizeof(state), "%s/next-id", tmpdir);
		const char *args[] = { binary, "--state", state, "--address", sock_path, "--policy-dir", policy_dir,
				       "--service-dir", service_dir, "--activator", activator_path,
				       "--activation-timeout", "1", "--no-channels", NULL };

		execv(binary, (char **)args);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		if (tc_connect(&c, sock_path) == 0) {
			tc_close(&c);
			return;
		}
		usleep(20000);
	}
	printf("FAIL: brokerd did not come up\n");
	exit(1);
}

/* Helpers for the shell integration tests. */
static int helper(int argc, char **argv)
{
	struct tc c;
	struct tc_msg m;

	if (argc != 3)
		return 2;
	if (tc_connect_hello(&c, CTRL_SOCKET_PATH, 0) < 0) {
		printf("cannot connect\n");
		return 1;
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
			tc_msg_close_fds(&m);	/* a signal: keep reading */
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

int main(int argc, char **argv)
{
	if (argc > 1 && strncmp(argv[1], "--", 2) == 0)
		return helper(argc, argv);

	setvbuf(stdout, NULL, _IOLBF, 0);
	main_pid = getpid();
	signal(SIGPIPE, SIG_IGN);
	require_features = getenv("BROKERD_TESTS_REQUIRE") && strcmp(getenv("BROKERD_TESTS_REQUIRE"), "1") == 0;
	if (geteuid() != 0) {
		printf("SKIP: needs root (to run clients as other uids)\n");
		return require_features ? 1 : 77;
	}
	if (argc > 1) {
		host_mode = true;
		start_daemon(argv[1]);
	} else {
		struct tc c;

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
	}
	atexit(cleanup);
	printf("# brokerd %s mode, channels %s\n", host_mode ? "host" : "guest", have_channels ? "on" : "off");

	test_hello();
	test_malformed();
	test_names();
	test_credentials();
	test_policy();
	test_quota();
	test_reload();
	test_introspection();
	test_list_pages();
	test_list_pages_large();
	test_activation();
	test_unsubscribe();
	if (!host_mode)
		test_channels();	/* brokerd --no-channels in host mode: nothing to test */
	test_flood();
	test_restart();
	if (skipped_what) {
		printf("SKIP: %s (and every part above that says skipped)\n", skipped_what);
		return 77;
	}
	printf("ok\n");
	return 0;
}
