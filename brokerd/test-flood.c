/* SPDX-License-Identifier: MIT */
/*
 * test-flood.c - brokerd under hostile clients: malformed datagrams,
 * connection floods, request floods, mass disconnects. While one uid
 * floods, root and another uid must still connect and get HELLO answered
 * within a bound; the latencies are printed as TAP comments.
 *
 *   test-flood BROKERD-BINARY   host mode (meson test): its own brokerd
 *                               --no-channels on a socket in a temp dir
 *   test-flood                  guest mode (brokerd-flood): the system bus,
 *                               with a policy file in /etc/brokerd/policy.d
 *
 * Runs as root (clients as alice 2001 and bob 2002); skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/ctrl.h"

#define ALICE	2001
#define BOB	2002
#define LATENCY_BOUND_MS	2000

#define CHECK(x) do { if (!(x)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #x); fflush(stdout); \
	_exit(1); } } while (0)

static bool host_mode;
static char tmpdir[64], sock_path[108], policy_dir[128], policy_file[192];
static const char *daemon_binary;
static pid_t daemon_pid = -1, main_pid;

/* No rules: HELLO and the listings need none. Limits are added per test. */
static const char base_policy[] = "# brokerd flood tests\n";

/* --- a raw client ------------------------------------------------------------ */

static int sock_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

static int send_request(int fd, uint16_t op, uint32_t serial, const char *sig, uint32_t u)
{
	struct ctrl_writer w;
	const void *d;
	size_t l;
	int r;

	r = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, op, serial);
	if (r < 0)
		return r;
	if (sig && *sig == 'u')
		ctrl_write_u32(&w, u);
	r = ctrl_writer_finish(&w, &d, &l);
	if (r == 0 && send(fd, d, l, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)l)
		r = -errno;
	ctrl_writer_deinit(&w);
	return r;
}

struct msg {
	uint8_t buf[CTRL_MSG_MAX];
	struct ctrl_message m;
	const char *error_name, *error_message;
};

/* One message within timeout_ms: 0, -ETIMEDOUT, -ECONNRESET or -EBADMSG. Fds are closed. */
static int recv_msg(int fd, struct msg *out, int timeout_ms)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX)];
	} u;
	struct iovec iov = { .iov_base = out->buf, .iov_len = sizeof(out->buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u, .msg_controllen = sizeof(u) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	unsigned int n_fds = 0;
	struct ctrl_reader rd;
	ssize_t n;

	if (poll(&p, 1, timeout_ms) == 0)
		return -ETIMEDOUT;
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n == 0 ? -ECONNRESET : -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			unsigned int k = (unsigned int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (unsigned int i = 0; i < k; i++)
				close(((int *)CMSG_DATA(cm))[i]);
			n_fds += k;
		}
	if (ctrl_message_decode(&out->m, out->buf, (size_t)n, n_fds) < 0)
		return -EBADMSG;
	out->error_name = out->error_message = NULL;
	if (out->m.hdr.type == CTRL_TYPE_ERROR) {
		ctrl_reader_init(&rd, &out->m);
		ctrl_read_string(&rd, &out->error_name, NULL);
		ctrl_read_string(&rd, &out->error_message, NULL);
	}
	return 0;
}

static bool is_error(const struct msg *m, const char *name)
{
	return m->m.hdr.type == CTRL_TYPE_ERROR && strcmp(m->error_name, name) == 0;
}

/* HELLO on fd: 0 when answered with a REPLY, else what came instead. */
static int hello(int fd, int timeout_ms)
{
	struct msg *m = malloc(sizeof(*m));
	int r;

	CHECK(m);
	r = send_request(fd, CTRL_OP_HELLO, 1, "u", 0);
	while (r == 0) {
		r = recv_msg(fd, m, timeout_ms);
		if (r == 0 && m->m.hdr.type == CTRL_TYPE_SIGNAL)
			continue;
		if (r == 0 && m->m.hdr.type != CTRL_TYPE_REPLY) {
			printf("# HELLO: %s: %s\n", m->error_name ? m->error_name : "?",
			       m->error_message ? m->error_message : "");
			r = -EPERM;
		}
		break;
	}
	free(m);
	return r;
}

/* --- policy and the daemon ----------------------------------------------------- */

static void write_policy(const char *text)
{
	char tmp[400];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", policy_file);
	f = fopen(tmp, "w");
	CHECK(f);
	CHECK(fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
	CHECK(rename(tmp, policy_file) == 0);
}

/* RELOAD as root: the policy is in force when it returns. */
static void reload(void)
{
	int fd = sock_connect();
	struct msg *m = malloc(sizeof(*m));

	CHECK(fd >= 0 && m);
	CHECK(hello(fd, 10000) == 0);
	CHECK(send_request(fd, CTRL_OP_RELOAD, 2, NULL, 0) == 0);
	CHECK(recv_msg(fd, m, 10000) == 0);
	CHECK(m->m.hdr.type == CTRL_TYPE_REPLY);
	free(m);
	close(fd);
}

static void set_policy(const char *extra)
{
	char text[2048];

	snprintf(text, sizeof(text), "%s%s", base_policy, extra);
	write_policy(text);
	reload();
}

static void spawn_daemon(void)
{
	daemon_pid = fork();
	CHECK(daemon_pid >= 0);
	if (daemon_pid == 0) {
		char state[400], service_dir[400];

		snprintf(state, sizeof(state), "%s/next-id", tmpdir);
		snprintf(service_dir, sizeof(service_dir), "%s/services", tmpdir);
		(void)mkdir(service_dir, 0755);
		const char *args[] = { daemon_binary, "--state", state, "--address", sock_path, "--policy-dir",
				       policy_dir, "--service-dir", service_dir, "--no-channels", NULL };
		execv(daemon_binary, (char **)args);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = sock_connect();

		if (fd >= 0) {
			close(fd);
			return;
		}
		usleep(20000);
	}
	printf("FAIL: brokerd did not come up\n");
	exit(1);
}

static void cleanup(void)
{
	char cmd[400];

	if (getpid() != main_pid)
		return;
	if (host_mode) {
		if (daemon_pid > 0) {
			kill(daemon_pid, SIGTERM);
			waitpid(daemon_pid, NULL, 0);
		}
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			printf("# cannot remove %s\n", tmpdir);
	} else {
		(void)unlink(policy_file);
		reload();
	}
}

/* --- malformed input ----------------------------------------------------------- */

static void test_malformed(void)
{
	struct msg *m = malloc(sizeof(*m));
	int fd = sock_connect(), p[2];
	char c;

	CHECK(fd >= 0 && m);
	/* a zero-length datagram, before and after HELLO: ProtocolError, code 0, and the connection lives */
	CHECK(send(fd, "", 0, MSG_NOSIGNAL) == 0);
	CHECK(recv_msg(fd, m, 5000) == 0);
	CHECK(is_error(m, CTRL_ERROR_PROTOCOL));
	CHECK(m->m.hdr.code == 0 && m->m.hdr.serial == 0);
	CHECK(hello(fd, 5000) == 0);
	CHECK(send(fd, "", 0, MSG_NOSIGNAL) == 0);
	CHECK(recv_msg(fd, m, 5000) == 0);
	CHECK(is_error(m, CTRL_ERROR_PROTOCOL));
	printf("# zero-length datagram: %s\n", m->error_message);

	/* an fd where none is allowed: ProtocolError, and brokerd closed it (the pipe sees EOF) */
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	{
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u = { 0 };
		struct ctrl_writer w;
		const void *d;
		size_t l;

		CHECK(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_LIST_NAMES, 5) == 0);
		ctrl_write_u32(&w, 0);
		CHECK(ctrl_writer_finish(&w, &d, &l) == 0);
		struct iovec iov = { .iov_base = (void *)d, .iov_len = l };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u,
				     .msg_controllen = CMSG_SPACE(sizeof(int)) };
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.h), &p[1], sizeof(int));
		CHECK(sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)l);
		ctrl_writer_deinit(&w);
	}
	close(p[1]);
	CHECK(recv_msg(fd, m, 5000) == 0);
	CHECK(is_error(m, CTRL_ERROR_PROTOCOL) && m->m.hdr.serial == 5);
	{
		struct pollfd pp = { .fd = p[0], .events = POLLIN };

		CHECK(poll(&pp, 1, 5000) == 1);
		CHECK(read(p[0], &c, 1) == 0);	/* EOF: no copy of the write end is left */
	}
	close(p[0]);
	/* a zero-length datagram carrying an fd: the same */
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	{
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } u = { 0 };
		struct iovec iov = { .iov_base = &c, .iov_len = 0 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u,
				     .msg_controllen = CMSG_SPACE(sizeof(int)) };

		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.h), &p[1], sizeof(int));
		CHECK(sendmsg(fd, &mh, MSG_NOSIGNAL) == 0);
	}
	close(p[1]);
	CHECK(recv_msg(fd, m, 5000) == 0);
	CHECK(is_error(m, CTRL_ERROR_PROTOCOL));
	{
		struct pollfd pp = { .fd = p[0], .events = POLLIN };

		CHECK(poll(&pp, 1, 5000) == 1);
		CHECK(read(p[0], &c, 1) == 0);
	}
	close(p[0]);
	/* still served */
	CHECK(send_request(fd, CTRL_OP_LIST_NAMES, 6, "u", 0) == 0);
	CHECK(recv_msg(fd, m, 5000) == 0);
	CHECK(m->m.hdr.type == CTRL_TYPE_REPLY && m->m.hdr.serial == 6);
	close(fd);
	free(m);
	printf("# malformed: zero-length datagrams and unwanted fds get ProtocolError, fds closed: ok\n");
}

/* --- setup ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	main_pid = getpid();
	if (geteuid() != 0) {
		printf("# needs root (to run clients as other uids); skipped\n");
		return 77;
	}
	if (argc > 1) {
		host_mode = true;
		daemon_binary = argv[1];
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-flood-XXXXXX");
		CHECK(mkdtemp(tmpdir));
		CHECK(chmod(tmpdir, 0755) == 0);
		snprintf(sock_path, sizeof(sock_path), "%s/socket", tmpdir);
		snprintf(policy_dir, sizeof(policy_dir), "%s/policy.d", tmpdir);
		CHECK(mkdir(policy_dir, 0755) == 0);
		snprintf(policy_file, sizeof(policy_file), "%s/50-test-flood.conf", policy_dir);
		write_policy(base_policy);
		atexit(cleanup);
		spawn_daemon();
	} else {
		snprintf(sock_path, sizeof(sock_path), "%s", CTRL_SOCKET_PATH);
		snprintf(policy_dir, sizeof(policy_dir), "/etc/brokerd/policy.d");
		snprintf(policy_file, sizeof(policy_file), "%s/50-brokerd-flood.conf", policy_dir);
		(void)mkdir("/etc/brokerd", 0755);
		(void)mkdir(policy_dir, 0755);
		atexit(cleanup);
		set_policy("");
	}
	printf("# brokerd %s mode\n", host_mode ? "host" : "guest");

	test_malformed();
	printf("ok\n");
	return 0;
}
