/* SPDX-License-Identifier: MIT */
/*
 * body-memfd.c - a body memfd checked and mapped as protocol/README.md 7.6
 * says (body-memfd.h).
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "protocol/body-memfd.h"

int chmsg_body_map(int fd, size_t len, void **ret)
{
	struct stat st;
	int seals;
	void *p;

	if (fd < 0 || !len || !ret)
		return -EBADMSG;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & CHMSG_BODY_SEALS) != CHMSG_BODY_SEALS)
		return -EBADMSG; /* not a memfd, or one its sender could still change */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (size_t)st.st_size != len)
		return -EBADMSG;
	p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	*ret = p;
	return 0;
}
