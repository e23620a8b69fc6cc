/* SPDX-License-Identifier: MIT */
/*
 * channel.c - channel creation, minting and the bus's own sends, and the
 * check that a new channel's ring still fits under brokerd's cgroup memory
 * limit (see channel.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "brokerd/channel.h"
#include "brokerd/log.h"

/* Opens memory.max and memory.current of the cgroup we run in (cgroup v2). */
static void memory_files_open(struct chanmgr *m)
{
	char line[512], path[600];
	FILE *f = fopen("/proc/self/cgroup", "re");

	m->memory_max_fd = m->memory_current_fd = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", line + 3);
		m->memory_max_fd = open(path, O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", line + 3);
		m->memory_current_fd = open(path, O_RDONLY | O_CLOEXEC);
		break;
	}
	fclose(f);
	m->memory_files = m->memory_max_fd >= 0 && m->memory_current_fd >= 0;
	if (!m->memory_files) {
		if (m->memory_max_fd >= 0)
			close(m->memory_max_fd);
		if (m->memory_current_fd >= 0)
			close(m->memory_current_fd);
	}
}

/* A cgroup file's number ("max": UINT64_MAX); 0 when it cannot be read. */
static uint64_t memory_file_read(int fd)
{
	char buf[32];
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (strncmp(buf, "max", 3) == 0)
		return UINT64_MAX;
	return strtoull(buf, NULL, 10);
}

int chanmgr_memory_room(struct chanmgr *m, uint64_t bytes)
{
	uint64_t max = m->memory_files ? memory_file_read(m->memory_max_fd) : 0, cur, spare;

	if (max == 0 || max == UINT64_MAX)
		return 0; /* no limit (or none we can see) */
	cur = memory_file_read(m->memory_current_fd);
	/*
	 * Keep a quarter of the limit (at least 1 MiB) for everything else
	 * brokerd needs to go on answering: its heap, socket buffers, the
	 * replies that say no.
	 */
	spare = max / 4 > (1ULL << 20) ? max / 4 : (1ULL << 20);
	if (cur + bytes + spare <= max)
		return 0;
	if (log_ratelimit_test(&m->memory_log))
		log_warning("memory: %llu of %llu bytes used (memory.max): no new channels of %llu bytes",
			    (unsigned long long)cur, (unsigned long long)max, (unsigned long long)bytes);
	return -ENOMEM;
}

int chanmgr_init(struct chanmgr *m)
{
	uint32_t id;
	int r, fd;

	memset(m, 0, sizeof(*m));
	m->memory_log =
		(struct log_ratelimit){ .what = "memory limit", .interval_usec = 10000000, .burst = 5 };
	memory_files_open(m);
	/*
	 * No IORING_SETUP_SINGLE_ISSUER or DEFER_TASKRUN: a restarted brokerd
	 * takes this ring over from the fd store (restart.c), and with them the
	 * kernel would refuse its submissions and registrations (-EEXIST).
	 */
	r = io_uring_queue_init_params(64, &m->ring, &m->params);
	if (r < 0) {
		m->probe_error = r;
		m->probe_step = "setting up an io_uring";
		return 0;
	}
	m->ring_ok = true;
	/* Probe: create a channel, mint a cap for it and revoke it; all must work. */
	r = chanmgr_create(m, IOIPC_F_BROADCAST, CHANNEL_SLOTS, CHANNEL_MSG_MAX, &id);
	if (r < 0) {
		m->probe_error = r;
		m->probe_step = "creating a private channel";
		return 0;
	}
	fd = chanmgr_mint(m, id, IOIPC_SUB_MONITOR, 0);
	m->monitor = fd >= 0;
	if (fd >= 0)
		close(fd);
	fd = chanmgr_mint(m, id, IOIPC_SUB_RECV, 1);
	r = fd < 0 ? 0 : chanmgr_revoke(m, id, IOIPC_SUB_RECV, 1);
	(void)ioipc_channel_destroy(&m->ring, id);
	if (fd < 0) {
		m->probe_error = fd;
		m->probe_step = "minting a capability (IOIPC_REGISTER_MINT)";
		return 0;
	}
	close(fd);
	if (r < 0) {
		/* without it a reload could not take access back: no data plane */
		m->probe_error = r;
		m->probe_step = "revoking a capability (IOIPC_REGISTER_REVOKE)";
		return 0;
	}
	m->available = true;
	return 0;
}

/* What io_uring_queue_mmap() mapped (liburing has no public call that only unmaps). */
static void ring_unmap(struct io_uring *ring)
{
	(void)munmap(ring->sq.sqes, ring->sq.ring_entries * sizeof(struct io_uring_sqe));
	if (ring->cq.ring_ptr && ring->cq.ring_ptr != ring->sq.ring_ptr)
		(void)munmap(ring->cq.ring_ptr, ring->cq.ring_sz);
	(void)munmap(ring->sq.ring_ptr, ring->sq.ring_sz);
}

/* A cap minted and revoked again with a badge no connection has: may this process use the ring? */
#define PROBE_BADGE UINT64_MAX

int chanmgr_adopt(struct chanmgr *m, int fd, const struct io_uring_params *params, uint32_t probe_id)
{
	struct io_uring_params p = *params;
	int r, cap;

	memset(m, 0, sizeof(*m));
	m->memory_log =
		(struct log_ratelimit){ .what = "memory limit", .interval_usec = 10000000, .burst = 5 };
	r = io_uring_queue_mmap(fd, &p, &m->ring);
	if (r < 0)
		return r;
	/*
	 * liburing sized the SQE array by the recorded entries but indexes it
	 * by the kernel's mask: a ring of another size than recorded would
	 * have us write past the mapping.
	 */
	if (m->ring.sq.ring_entries != params->sq_entries || m->ring.sq.ring_mask != params->sq_entries - 1 ||
	    m->ring.cq.ring_entries != params->cq_entries || m->ring.cq.ring_mask != params->cq_entries - 1) {
		ring_unmap(&m->ring);
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	/*
	 * liburing keeps its own copy of the SQ tail, which starts at 0 in a
	 * fresh mapping: continue from where the kernel's is, or the next
	 * flush would move the tail backwards.
	 */
	m->ring.sq.sqe_head = m->ring.sq.sqe_tail = *m->ring.sq.ktail;
	m->params = *params;
	m->ring_ok = true;
	cap = chanmgr_mint(m, probe_id, IOIPC_SUB_RECV, PROBE_BADGE);
	r = cap < 0 ? cap : chanmgr_revoke(m, probe_id, IOIPC_SUB_RECV, PROBE_BADGE);
	if (cap >= 0)
		close(cap);
	if (r < 0) {
		/* Unmap only: the fd is the caller's, and closing it would destroy the channels. */
		ring_unmap(&m->ring);
		memset(m, 0, sizeof(*m));
		return r;
	}
	m->available = true;
	m->monitor = true; /* the previous brokerd minted monitor caps on this kernel */
	memory_files_open(m);
	return 0;
}

int chanmgr_drain(struct chanmgr *m, uint64_t timeout_usec)
{
	struct __kernel_timespec ts = { .tv_sec = (long long)(timeout_usec / 1000000),
					.tv_nsec = (long long)(timeout_usec % 1000000) * 1000 };
	struct io_uring_cqe *cqe;

	chanmgr_process(m);
	while (m->inflight > 0) {
		if (io_uring_wait_cqe_timeout(&m->ring, &cqe, &ts) < 0)
			return -ETIMEDOUT;
		chanmgr_process(m);
	}
	return 0;
}

void chanmgr_deinit(struct chanmgr *m)
{
	if (m->ring_ok) {
		chanmgr_process(m);
		io_uring_queue_exit(&m->ring);
	}
	m->ring_ok = m->available = false;
	if (m->memory_files) {
		close(m->memory_max_fd);
		close(m->memory_current_fd);
		m->memory_files = false;
	}
}

int chanmgr_create(struct chanmgr *m, uint32_t flags, uint32_t slots, uint32_t slot_size, uint32_t *id)
{
	struct ioipc_channel_create c = {
		.flags = flags | IOIPC_F_PRIVATE,
		.ring_entries = slots,
		.max_msg_size = slot_size,
		.mode = 0600,
	};
	int r;

	if (!m->ring_ok)
		return -EOPNOTSUPP;
	r = ioipc_channel_create(&m->ring, &c);
	if (r < 0)
		return r;
	*id = c.channel_id_out;
	return 0;
}

int chanmgr_mint(struct chanmgr *m, uint32_t id, uint32_t rights, uint64_t badge)
{
	struct ioipc_channel_mint c = {
		.channel_id = id,
		.rights = rights,
		.badge = badge,
		.flags = O_CLOEXEC,
	};
	int r;

	if (!m->ring_ok)
		return -EOPNOTSUPP;
	r = ioipc_channel_mint(&m->ring, &c);
	if (r < 0)
		return r;
	return c.fd_out;
}

int chanmgr_revoke(struct chanmgr *m, uint32_t id, uint32_t rights, uint64_t badge)
{
	struct ioipc_channel_revoke c = {
		.channel_id = id,
		.rights = rights,
		.badge = badge,
	};
	int r;

	if (!m->ring_ok)
		return -EOPNOTSUPP;
	r = ioipc_channel_revoke(&m->ring, &c);
	if (r < 0)
		return r;
	return (int)c.nr_detached_out;
}

int chanmgr_destroy(struct chanmgr *m, uint32_t id)
{
	if (!m->ring_ok)
		return -EOPNOTSUPP;
	return ioipc_channel_destroy(&m->ring, id);
}

int chanmgr_send(struct chanmgr *m, uint32_t id, const void *buf, size_t len)
{
	struct io_uring_sqe *sqe;
	void *copy;
	int r;

	if (!m->available)
		return -EOPNOTSUPP;
	sqe = io_uring_get_sqe(&m->ring);
	if (!sqe) {
		chanmgr_process(m);
		sqe = io_uring_get_sqe(&m->ring);
		if (!sqe)
			return -EBUSY;
	}
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	ioipc_prep_send(sqe, id, copy, (unsigned int)len, 0);
	io_uring_sqe_set_data(sqe, copy);
	m->inflight++;
	r = io_uring_submit(&m->ring);
	return r < 0 ? r : 0;
}

void chanmgr_process(struct chanmgr *m)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&m->ring, &cqe) == 0) {
		/* A full broadcast ring (-ENOBUFS) means a slow subscriber: its loss, logged. */
		if (cqe->res < 0)
			log_debug("bus signal send failed: %s", strerror(-cqe->res));
		free(io_uring_cqe_get_data(cqe));
		io_uring_cqe_seen(&m->ring, cqe);
		if (m->inflight > 0)
			m->inflight--;
	}
}

int chanmgr_fd(struct chanmgr *m)
{
	return m->ring_ok ? m->ring.ring_fd : -EBADF;
}
