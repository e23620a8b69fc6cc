/* SPDX-License-Identifier: MIT */
/*
 * test-body-memfd.c - chmsg_body_map() and chmsg_body_read(): a sealed
 * memfd of the right size is mapped, or read to the same bytes; a memfd
 * missing a seal, of another size (one byte more or less), an empty body,
 * a pipe are refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protocol/body-memfd.h"
#include "util/test.h"

/* The byte at offset i of memfd_with()'s memfds. */
static char byte_at(size_t i)
{
	return (char)('a' + i % 23);
}

/* A memfd holding len bytes (byte_at()), with the given seals. */
static int memfd_with(size_t len, int seals)
{
	char buf[64];
	int fd = memfd_create("test-body", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ASSERT(fd >= 0);
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = byte_at(done + i);
		ASSERT(write(fd, buf, n) == (ssize_t)n);
		done += n;
	}
	if (seals)
		ASSERT_INT(fcntl(fd, F_ADD_SEALS, seals), ==, 0);
	return fd;
}

/* chmsg_body_read(): the bytes of a sealed memfd of exactly len bytes, all others refused. */
static void test_read(void)
{
	static const size_t sizes[] = { 1, 100, 4096, 16388, 65536 };
	char *buf = malloc(65536 + 2);
	int fd, pipefd[2];

	ASSERT(buf);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];

		fd = memfd_with(len, CHMSG_BODY_SEALS);
		memset(buf, 0, len + 1);
		ASSERT_INT(chmsg_body_read(fd, len, buf), ==, 0);
		for (size_t j = 0; j < len; j++)
			ASSERT(buf[j] == byte_at(j));
		/* the header says one byte less, or more, than the memfd holds */
		if (len > 1)
			ASSERT_INT(chmsg_body_read(fd, len - 1, buf), ==, -EBADMSG);
		ASSERT_INT(chmsg_body_read(fd, len + 1, buf), ==, -EBADMSG);
		close(fd);
	}
	fd = memfd_with(100, CHMSG_BODY_SEALS);
	ASSERT_INT(chmsg_body_read(fd, 0, buf), ==, -EBADMSG);
	close(fd);
	/* each seal missing in turn, at the right size */
	for (int s = F_SEAL_SEAL; s <= F_SEAL_WRITE; s <<= 1) {
		fd = memfd_with(100, CHMSG_BODY_SEALS & ~s);
		ASSERT_INT(chmsg_body_read(fd, 100, buf), ==, -EBADMSG);
		close(fd);
	}
	ASSERT_INT(pipe(pipefd), ==, 0);
	ASSERT_INT(write(pipefd[1], buf, 100), ==, 100);
	ASSERT_INT(chmsg_body_read(pipefd[0], 100, buf), ==, -EBADMSG);
	close(pipefd[0]);
	close(pipefd[1]);
	ASSERT_INT(chmsg_body_read(-1, 100, buf), ==, -EBADMSG);
	free(buf);
}

int main(void)
{
	void *p = NULL;
	int fd, pipefd[2];

	fd = memfd_with(100, CHMSG_BODY_SEALS);
	ASSERT_INT(chmsg_body_map(fd, 100, &p), ==, 0);
	close(fd); /* the mapping keeps the pages */
	ASSERT(((const char *)p)[0] == byte_at(0) && ((const char *)p)[99] == byte_at(99));
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
	test_read();
	return 0;
}
