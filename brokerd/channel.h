/* SPDX-License-Identifier: MIT */
/*
 * channel.h - brokerd's io_uring: creates private channels, mints and
 * revokes capability fds, destroys channels, and sends the bus's own signals
 * by channel id. When the kernel lacks IPC channels (or the MINT and REVOKE
 * extensions), available is false and brokerd runs without a data plane
 * (names, policy, credentials and quotas still work; fd-passing ops report
 * NotSupported).
 */
#ifndef BROKERD_CHANNEL_H
#define BROKERD_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/log.h"
#include "protocol/ioipc.h"

/*
 * The default ring geometry (policy [channels] sets others per name): 32
 * slots of 8 KiB, 256 KiB a channel (brokerd/README.md, "Ring geometry"):
 * most messages are far smaller, and every connection has an inbox.
 */
#define CHANNEL_SLOTS	   32
#define CHANNEL_MSG_MAX	   8192
#define CHANNEL_RING_BYTES ((uint64_t)CHANNEL_SLOTS * CHANNEL_MSG_MAX)

struct chanmgr {
	struct io_uring ring;
	struct io_uring_params params; /* as set up: a restarted brokerd maps the ring with them */
	unsigned int inflight;	       /* sends not yet completed */
	bool ring_ok;
	bool available;
	bool monitor;		/* caps with IOIPC_SUB_MONITOR can be minted */
	int probe_error;	/* why not available (negative errno) ... */
	const char *probe_step; /* ... and in which step */
	/* our cgroup's memory.max and memory.current (if memory_files) */
	bool memory_files;
	int memory_max_fd, memory_current_fd;
	struct log_ratelimit memory_log;
};

int chanmgr_init(struct chanmgr *m);
void chanmgr_deinit(struct chanmgr *m);
/*
 * Takes over ring fd of a previous brokerd (set up with params), probing that
 * this process may mint and revoke on channel probe_id (one of the ring's).
 * params' offsets are used as they are (restart.c checks them against the
 * sizes first); a ring whose entries are not params' is refused
 * (-EPROTO). 0, or a negative errno and m is left unset (the fd is not
 * closed).
 */
int chanmgr_adopt(struct chanmgr *m, int fd, const struct io_uring_params *params, uint32_t probe_id);
/* Waits up to timeout_usec for every send in flight to complete: 0, or -ETIMEDOUT. */
int chanmgr_drain(struct chanmgr *m, uint64_t timeout_usec);
/*
 * Whether bytes more of kernel memory fit under our cgroup's memory.max
 * with room to spare: 0, or -ENOMEM (logged, rate-limited). Channel rings
 * are charged to brokerd's cgroup; a channel made up to the limit would
 * get brokerd OOM-killed (the only process there) instead of failing.
 */
int chanmgr_memory_room(struct chanmgr *m, uint64_t bytes);
/*
 * flags: IOIPC_F_BROADCAST, IOIPC_F_MULTICAST or 0 (unicast); PRIVATE is
 * added. slots (a power of two) of slot_size bytes, the largest message.
 */
int chanmgr_create(struct chanmgr *m, uint32_t flags, uint32_t slots, uint32_t slot_size, uint32_t *id);
/* Returns a new O_CLOEXEC capability fd or negative errno. */
int chanmgr_mint(struct chanmgr *m, uint32_t id, uint32_t rights, uint64_t badge);
/*
 * Takes rights back from the caps minted with badge and detaches what was
 * attached through them. Returns the number of subscribers detached.
 */
int chanmgr_revoke(struct chanmgr *m, uint32_t id, uint32_t rights, uint64_t badge);
int chanmgr_destroy(struct chanmgr *m, uint32_t id);
/* Queue an IPC_SEND by channel id; the buffer is copied. */
int chanmgr_send(struct chanmgr *m, uint32_t id, const void *buf, size_t len);
/* Reap completions (call when the ring fd is readable). */
void chanmgr_process(struct chanmgr *m);
int chanmgr_fd(struct chanmgr *m);

#endif
