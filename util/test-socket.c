/* SPDX-License-Identifier: MIT */
/*
 * util/test-socket.c - listening and connecting by path, passing fds with
 * unix_send_fds() and closing received ones with unix_close_fds().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/socket.h"
#include "util/test.h"

/* Receives one message on fd, its fds left in mh's control buffer. */
static ssize_t recv_with_fds(int fd, struct msghdr *mh, struct iovec *iov, void *ctrl, size_t ctrl_len)
{
	*mh = (struct msghdr){
		.msg_iov = iov, .msg_iovlen = 1, .msg_control = ctrl, .msg_controllen = ctrl_len
	};
	return recvmsg(fd, mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
}

static void test_send_and_close(void)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} u;
	char data[8], c;
	struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
	struct msghdr mh;
	int sv[2], p[2], fds[2];

	ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	ASSERT(pipe2(p, O_CLOEXEC) == 0);
	/* two copies of the write end go across */
	fds[0] = fds[1] = p[1];
	ASSERT_INT(unix_send_fds(sv[0], "hi", 3, fds, 2, 0), ==, 0);
	ASSERT_INT(recv_with_fds(sv[1], &mh, &iov, &u, sizeof(u)), ==, 3);
	ASSERT_STR(data, "hi");
	close(p[1]); /* the received copies are the only writers left */
	ASSERT_INT(unix_close_fds(&mh), ==, 2);
	ASSERT_INT(read(p[0], &c, 1), ==, 0); /* EOF: both received copies were closed */
	close(p[0]);

	/* none: a plain message, nothing to close */
	ASSERT_INT(unix_send_fds(sv[0], "x", 2, NULL, 0, MSG_DONTWAIT), ==, 0);
	ASSERT_INT(recv_with_fds(sv[1], &mh, &iov, &u, sizeof(u)), ==, 2);
	ASSERT_INT(unix_close_fds(&mh), ==, 0);

	/* more than the kernel takes, or fds missing: refused before sending */
	ASSERT_INT(unix_send_fds(sv[0], "x", 2, fds, UNIX_FDS_MAX + 1, 0), ==, -EINVAL);
	ASSERT_INT(unix_send_fds(sv[0], "x", 2, NULL, 1, 0), ==, -EINVAL);
	ASSERT_INT(recv_with_fds(sv[1], &mh, &iov, &u, sizeof(u)), ==, -1);
	ASSERT_INT(errno, ==, EAGAIN);

	/* a closed peer: the error, and no SIGPIPE (MSG_NOSIGNAL) */
	close(sv[1]);
	ASSERT_INT(unix_send_fds(sv[0], "x", 2, NULL, 0, 0), ==, -EPIPE);
	close(sv[0]);
}

/* A listening socket and a connection to it, through a path. */
static void test_listen_connect(void)
{
	char dir[] = "/tmp/test-socket-XXXXXX", path[64];
	int lfd, cfd, afd;

	ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	lfd = unix_listen(path, SOCK_SEQPACKET, 1);
	ASSERT(lfd >= 0);
	ASSERT_INT(unix_listen(path, SOCK_SEQPACKET, 1), ==, -EADDRINUSE);
	cfd = unix_connect(path, SOCK_SEQPACKET);
	ASSERT(cfd >= 0);
	afd = accept(lfd, NULL, NULL);
	ASSERT(afd >= 0);
	ASSERT_INT(unix_send_fds(cfd, "ping", 5, NULL, 0, 0), ==, 0);
	ASSERT_INT(recv(afd, path, sizeof(path), 0), ==, 5);
	ASSERT_STR(path, "ping");
	close(afd);
	close(cfd);
	close(lfd);
	snprintf(path, sizeof(path), "%s/s", dir);
	ASSERT(unlink(path) == 0 && rmdir(dir) == 0);
	/* gone: nobody listens */
	ASSERT_INT(unix_connect(path, SOCK_SEQPACKET), ==, -ENOENT);
}

int main(void)
{
	test_send_and_close();
	test_listen_connect();
	return 0;
}
