/* SPDX-License-Identifier: MIT */
/*
 * body-memfd.c - a body memfd checked and mapped, or read, as
 * protocol/README.md 7.6 says (body-memfd.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/body-memfd.h"

/* Whether fd is a memfd that nobody can change any more. */
static bool body_sealed(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	/* not a memfd, or one its sender could still change */
	return seals >= 0 && (seals & CHMSG_BODY_SEALS) == CHMSG_BODY_SEALS;
}

int chmsg_body_map(int fd, size_t len, void **ret)
{
	struct stat st;
	void *p;

	if (fd < 0 || !len || !ret || !body_sealed(fd))
		return -EBADMSG;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size != len)
		return -EBADMSG;
	p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	*ret = p;
	return 0;
}

int chmsg_body_read(int fd, size_t len, void *buf)
{
	ssize_t n;

	if (fd < 0 || !len || !buf || !body_sealed(fd))
		return -EBADMSG;
	/*
	 * F_GET_SEALS answers only for memfds (shmem and hugetlbfs files):
	 * regular files, whose reads are short only at their end. Anything but
	 * exactly len, one byte more asked for, is a file of another size, or
	 * an error.
	 */
	do
		n = pread(fd, buf, len + 1, 0);
	while (n < 0 && errno == EINTR);
	return n >= 0 && (size_t)n == len ? 0 : -EBADMSG;
}
