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

int unix_connect(const char *path, int type)
{
	struct sockaddr_un sa;
	_cleanup_close_ int fd = -1;
	int r;

	r = unix_address(&sa, path);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return TAKE_FD(fd);
}
