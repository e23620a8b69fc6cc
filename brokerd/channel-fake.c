/* SPDX-License-Identifier: MIT */
/*
 * channel-fake.c - a stand-in for channel.c for the fuzz target fuzz-bus,
 * which runs on the host, where the kernel has no IPC channels, so that the
 * request paths that mint capabilities are fuzzed too. Tests of what brokerd
 * mints run in the guest on the real channels. A "capability fd" here is a
 * memfd whose contents say what a real cap would carry:
 *
 *   "ioipc-cap channel=ID flags=F rights=R badge=B live=1\n"
 *
 * Channel ids are never reused, so a recreated (revoked) channel is visible
 * as a new id. Only fuzz-bus links this.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "channel.h"

#define FAKE_MAX 65536

static uint32_t fake_flags[FAKE_MAX];
static bool fake_live[FAKE_MAX];
static uint32_t fake_next = 1;

int chanmgr_init(struct chanmgr *m)
{
	memset(m, 0, sizeof(*m));
	m->available = true;	/* ring_ok stays false: no io_uring, no event source */
	m->monitor = true;
	return 0;
}

void chanmgr_deinit(struct chanmgr *m)
{
	m->available = false;
}

int chanmgr_create(struct chanmgr *m, uint32_t flags, uint32_t *id)
{
	if (!m->available)
		return -EOPNOTSUPP;
	if ((flags & IOIPC_F_BROADCAST) && (flags & IOIPC_F_MULTICAST))
		return -EINVAL;
	if (fake_next >= FAKE_MAX)
		return -ENOSPC;
	*id = fake_next++;
	fake_flags[*id] = flags | IOIPC_F_PRIVATE;	/* as channel.c creates them */
	fake_live[*id] = true;
	return 0;
}

int chanmgr_mint(struct chanmgr *m, uint32_t id, uint32_t rights, uint64_t badge)
{
	char buf[160];
	int fd, n;

	if (!m->available)
		return -EOPNOTSUPP;
	if (id == 0 || id >= FAKE_MAX || !fake_live[id])
		return -ENOENT;
	if (!rights || (rights & ~(IOIPC_SUB_SEND | IOIPC_SUB_RECV | IOIPC_SUB_MONITOR)))
		return -EINVAL;
	fd = memfd_create("ioipc-cap", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "ioipc-cap channel=%u flags=%u rights=%u badge=%llu\n", id, fake_flags[id],
		     rights, (unsigned long long)badge);
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		return -EIO;
	}
	return fd;
}

int chanmgr_destroy(struct chanmgr *m, uint32_t id)
{
	if (id == 0 || id >= FAKE_MAX || !fake_live[id])
		return -ENOENT;
	fake_live[id] = false;
	return 0;
}

int chanmgr_send(struct chanmgr *m, uint32_t id, const void *buf, size_t len)
{
	if (id == 0 || id >= FAKE_MAX || !fake_live[id])
		return -ENOENT;
	return len > CHANNEL_MSG_MAX ? -EMSGSIZE : 0;
}

void chanmgr_process(struct chanmgr *m)
{
}

int chanmgr_fd(struct chanmgr *m)
{
	return -EBADF;
}
