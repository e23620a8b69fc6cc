/* SPDX-License-Identifier: MIT */
/* util/socket.c - AF_UNIX helpers (see socket.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/socket.h"

int unix_address(struct sockaddr_un *sa, const char *path)
{
	size_t n = strlen(path);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

/* A new socket of type and, in sa, the address of path: for connect() or bind(). */
static int unix_socket(const char *path, int type, struct sockaddr_un *sa)
{
	int r = unix_address(sa, path), fd;

	if (r < 0)
		return r;
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

int unix_connect(const char *path, int type)
{
	struct sockaddr_un sa;
	_cleanup_close_ int fd = unix_socket(path, type, &sa);

	if (fd < 0)
		return fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int unix_listen(const char *path, int type, int backlog)
{
	struct sockaddr_un sa;
	_cleanup_close_ int fd = unix_socket(path, type, &sa);

	if (fd < 0)
		return fd;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, backlog) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int unix_send_fds(int fd, const void *data, size_t len, const int *fds, unsigned int n_fds, int flags)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * UNIX_FDS_MAX)];
	} u;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n_fds > UNIX_FDS_MAX || (n_fds > 0 && !fds))
		return -EINVAL;
	if (n_fds > 0) {
		memset(&u, 0, CMSG_SPACE(sizeof(int) * n_fds));
		mh.msg_control = &u;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(&u.h), fds, sizeof(int) * n_fds);
	}
	if (sendmsg(fd, &mh, flags | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

unsigned int unix_close_fds(struct msghdr *mh)
{
	unsigned int n = 0;

	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int x;

			/* CMSG_DATA need not be aligned for int */
			memcpy(&x, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(x);
		}
		n += (unsigned int)k;
	}
	return n;
}
