/* SPDX-License-Identifier: MIT */
/*
 * test-body-memfd.c - chmsg_body_map(): a sealed memfd of the right size is
 * mapped; a memfd missing a seal, of another size, an empty body, a pipe
 * are refused.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protocol/body-memfd.h"
#include "util/test.h"

/* A memfd holding len bytes of 'x', with the given seals. */
static int memfd_with(size_t len, int seals)
{
	char buf[64];
	int fd = memfd_create("test-body", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ASSERT(fd >= 0);
	memset(buf, 'x', sizeof(buf));
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		ASSERT(write(fd, buf, n) == (ssize_t)n);
		done += n;
	}
	if (seals)
		ASSERT_INT(fcntl(fd, F_ADD_SEALS, seals), ==, 0);
	return fd;
}

int main(void)
{
	void *p = NULL;
	int fd, pipefd[2];

	fd = memfd_with(100, CHMSG_BODY_SEALS);
	ASSERT_INT(chmsg_body_map(fd, 100, &p), ==, 0);
	close(fd); /* the mapping keeps the pages */
	ASSERT(((const char *)p)[0] == 'x' && ((const char *)p)[99] == 'x');
	ASSERT_INT(munmap(p, 100), ==, 0);

	fd = memfd_with(100, CHMSG_BODY_SEALS);
	ASSERT_INT(chmsg_body_map(fd, 99, &p), ==, -EBADMSG);
	ASSERT_INT(chmsg_body_map(fd, 101, &p), ==, -EBADMSG);
	ASSERT_INT(chmsg_body_map(fd, 0, &p), ==, -EBADMSG);
	close(fd);

	/* each seal missing in turn: its sender could still change it */
	for (int s = F_SEAL_SEAL; s <= F_SEAL_WRITE; s <<= 1) {
		fd = memfd_with(100, CHMSG_BODY_SEALS & ~s);
		ASSERT_INT(chmsg_body_map(fd, 100, &p), ==, -EBADMSG);
		close(fd);
	}
	ASSERT_INT(pipe(pipefd), ==, 0);
	ASSERT_INT(chmsg_body_map(pipefd[0], 100, &p), ==, -EBADMSG);
	close(pipefd[0]);
	close(pipefd[1]);
	ASSERT_INT(chmsg_body_map(-1, 100, &p), ==, -EBADMSG);
	return 0;
}
