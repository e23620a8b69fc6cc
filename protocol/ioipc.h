/* SPDX-License-Identifier: MIT */
/*
 * ioipc.h - user-space view of the io_uring IPC channel ABI.
 *
 * liburing carries its own copy of the io_uring uapi and so do we: the
 * installed <linux/io_uring.h> and liburing's copy share one include guard,
 * so whichever comes first wins and neither knows the IPC opcodes. This
 * header holds the numbers and structures of ../shared spec (the RFC's ABI,
 * which must never change) and of our kernel extensions (kernel/, documented
 * in Documentation/userspace-api/io_uring_ipc.rst in the patch series), plus
 * liburing-style inline helpers to prepare SQEs and issue register calls.
 *
 * No I/O happens here beyond the thin syscall wrappers; brokerd, the client
 * library and tests all include it.
 */
#ifndef BROKERD_PROTOCOL_IOIPC_H
#define BROKERD_PROTOCOL_IOIPC_H

#include <errno.h>
#include <liburing.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* --- RFC ABI (fixed numbers) ------------------------------------------- */

#define IOIPC_OP_SEND 65 /* IORING_OP_IPC_SEND */
#define IOIPC_OP_RECV 66 /* IORING_OP_IPC_RECV */

#define IOIPC_REGISTER_CREATE  38 /* IORING_REGISTER_IPC_CHANNEL_CREATE */
#define IOIPC_REGISTER_ATTACH  39 /* IORING_REGISTER_IPC_CHANNEL_ATTACH */
#define IOIPC_REGISTER_DETACH  40 /* IORING_REGISTER_IPC_CHANNEL_DETACH */
#define IOIPC_REGISTER_DESTROY 41 /* IORING_REGISTER_IPC_CHANNEL_DESTROY */

/* create flags */
#define IOIPC_F_BROADCAST (1U << 0)
#define IOIPC_F_MULTICAST (1U << 1)
#define IOIPC_F_PRIVATE	  (1U << 2)

/* attach flags (subscriber rights) */
#define IOIPC_SUB_SEND (1U << 0)
#define IOIPC_SUB_RECV (1U << 1)
#define IOIPC_SUB_BOTH (IOIPC_SUB_SEND | IOIPC_SUB_RECV)

struct ioipc_channel_create { /* struct io_uring_ipc_channel_create */
	uint32_t flags;
	uint32_t ring_entries;
	uint32_t max_msg_size;
	uint32_t mode;
	uint64_t key;
	uint32_t channel_id_out;
	uint32_t reserved[3];
};

struct ioipc_channel_attach { /* struct io_uring_ipc_channel_attach */
	uint32_t channel_id;
	uint32_t flags;
	uint64_t key;
	int32_t channel_fd;
	uint32_t local_id_out;
	uint64_t mmap_offset_out;
	uint32_t region_size;
	uint32_t reserved[3];
};

_Static_assert(sizeof(struct ioipc_channel_create) == 40, "create is ABI");
_Static_assert(sizeof(struct ioipc_channel_attach) == 48, "attach is ABI");
_Static_assert(offsetof(struct ioipc_channel_attach, mmap_offset_out) == 24, "attach is ABI");

/* --- Extensions (ours; RFC programs never set these bits) ---------------- */

/*
 * Create flag: broadcast receivers that fall a whole ring behind lose the
 * oldest messages instead of making senders fail with -ENOBUFS; the number
 * lost is reported in struct ioipc_msg_info.lost.
 */
#define IOIPC_F_LOSSY (1U << 3)
/* Create flag: sends carrying fds fail with -EPERM (mirrored in the region's flags). */
#define IOIPC_F_NO_FDS (1U << 4)

/* Attach flags beyond the RFC's rights. */
#define IOIPC_SUB_MONITOR (1U << 2) /* see every message, consume none */
#define IOIPC_SUB_BY_FD	  (1U << 3) /* channel_id holds a capability fd */

/* IPC_RECV flags, in sqe->ioprio (0 in RFC programs). */
#define IOIPC_RECV_WAIT	     (1U << 0) /* wait on an empty ring instead of -EAGAIN */
#define IOIPC_RECV_MULTISHOT (1U << 1) /* one CQE per message, provided buffers */
#define IOIPC_RECV_INFO	     (1U << 2) /* prefix the payload with struct ioipc_msg_info */
#define IOIPC_RECV_ZC	     (1U << 3) /* hold the next message in the region, res = slot */
#define IOIPC_RECV_RELEASE   (1U << 4) /* alone: release held message sqe->addr (msg_id) */
#define IOIPC_RECV_FDS	     (1U << 5) /* install the message's fds: struct ioipc_fds_hdr */
#define IOIPC_RECV_FDS_CLOEXEC (1U << 6) /* ... with O_CLOEXEC (only with IOIPC_RECV_FDS) */
#define IOIPC_MAX_HELD	     16	       /* messages one subscriber may hold with _ZC */

/*
 * File descriptors on channels (kernel patch 0019, "File descriptors" in
 * io_uring_ipc.rst). IPC_SEND with IOIPC_SEND_FDS in sqe->ioprio passes
 * sqe->off fds from the __s32 array at sqe->addr3 (1 to IOIPC_MAX_FDS); the
 * kernel takes its own references at issue, so the sender may close its fds
 * once the send completed. Errors: -EINVAL (count, or a ring, capability or
 * channel fd among them), -EBADF, -EPERM (channel made with IOIPC_F_NO_FDS),
 * -ETOOMANYREFS (the user's files in flight would exceed RLIMIT_NOFILE).
 *
 * A receive with IOIPC_RECV_FDS finds, after the info header (if any), a
 * struct ioipc_fds_hdr and nr fds of its own process (-1 for one that could
 * not be installed), padded to 8 bytes, then the payload; cqe->res counts all
 * of it. IOIPC_FDS_TRUNC: not every fd the message carried was installed (no
 * room in the buffer, fd table full, LSM), as MSG_CTRUNC says. A receiver that
 * does not ask gets the message and the kernel closes the fds for it.
 */
#define IOIPC_SEND_FDS	(1U << 0)
#define IOIPC_MAX_FDS	253 /* IORING_IPC_MAX_FDS, as SCM_RIGHTS */

/*
 * Receipts ("Receipts" in io_uring_ipc.rst). IPC_SEND with IOIPC_SEND_RECEIPT
 * (unicast and multicast channels; -EINVAL on broadcast) completes with
 * IORING_CQE_F_MORE, and one more CQE follows with the same user_data and
 * IORING_CQE_F_NOTIF: res is the pid (in the sender's pid namespace, 0 when
 * not visible there) of the process whose receive took the message, or a
 * negative errno when it was dropped untaken (-ENOENT or -EACCES: the
 * subscriber it was targeted at detached or revoked; -EPIPE: the channel
 * destroyed and no receiver left). It may come before the send's own CQE.
 * A kernel without receipts fails the flag with -EINVAL in the prep; one
 * with them fails a send to id 0 with -ENOENT: the probe.
 */
#define IOIPC_SEND_RECEIPT (1U << 1)
/*
 * Loss told to the sender ("Lossy broadcast" in io_uring_ipc.rst, kernel
 * patch 0023). IPC_SEND with IOIPC_SEND_LOST completes, when it succeeds,
 * with cqe->res = the number of receivers that lost a message to this send
 * (on a lossy channel: those that had not read the message whose slot it
 * reused; monitors not counted; 0 on other channels) instead of the
 * length. Every loss a receiver is told of in ioipc_msg_info.lost was
 * counted by exactly one send. A kernel without it fails the flag with
 * -EINVAL in the prep; one with it fails a send to id 0 with -ENOENT.
 */
#define IOIPC_SEND_LOST (1U << 2)
#define IOIPC_FDS_TRUNC (1U << 0)

struct ioipc_fds_hdr { /* struct io_uring_ipc_fds_hdr */
	uint32_t nr;
	uint32_t flags; /* IOIPC_FDS_* */
	int32_t fds[];
};
_Static_assert(sizeof(struct ioipc_fds_hdr) == 8, "fds hdr is ABI");

/* Bytes the fds header and nr entries take in a receive buffer. */
static inline size_t ioipc_fds_size(uint32_t nr)
{
	return sizeof(struct ioipc_fds_hdr) + (((size_t)nr * 4 + 7) & ~(size_t)7);
}

/* Limits of create (IORING_IPC_MAX_*): larger values fail with -EINVAL. */
#define IOIPC_MAX_ENTRIES     32768
#define IOIPC_MAX_MSG_SIZE    (1U << 20)
#define IOIPC_MAX_REGION_SIZE (64U << 20)

/*
 * Layout of the region mapped read-only through attach.channel_fd
 * (struct io_uring_ipc_region_hdr / io_uring_ipc_msg_desc). The kernel only
 * mirrors its private state here; with IOIPC_RECV_ZC, cqe->res = i and the
 * held message is desc[i]: region + offset, len bytes, until released.
 */
struct ioipc_region_hdr {
	uint64_t producer; /* messages published so far */
	uint64_t resv1[7];
	uint64_t consumer; /* unicast consumer position */
	uint64_t resv2[7];
	uint32_t ring_mask;
	uint32_t ring_entries;
	uint32_t max_msg_size;
	uint32_t slot_size;
	uint32_t desc_offset; /* of ring_entries struct ioipc_msg_desc */
	uint32_t data_offset;
	uint32_t flags; /* IOIPC_F_* of the channel */
	uint32_t resv3;
};
_Static_assert(sizeof(struct ioipc_region_hdr) == 160, "region header is ABI");

struct ioipc_msg_desc {
	uint32_t offset; /* of the data, from the start of the region */
	uint32_t len;
	uint64_t msg_id;      /* sequence number: pass it to IOIPC_RECV_RELEASE */
	uint64_t sender_data; /* sender's subscriber id, 0 by channel id */
};
_Static_assert(sizeof(struct ioipc_msg_desc) == 24, "msg desc is ABI");

/*
 * Written by the kernel before the payload when IOIPC_RECV_INFO is set; every
 * field is stamped at send time by the kernel, never taken from the sender.
 * pid/uid/gid are translated into the receiver's namespaces (unmapped ids
 * become the overflow ids). badge is the 64-bit value minted into the
 * capability fd the sender attached through (0 otherwise).
 */
struct ioipc_msg_info {
	uint32_t sender_id; /* sender's subscriber id, 0 for send by channel id */
	uint32_t pid;
	uint32_t uid;
	uint32_t gid;
	uint64_t badge;
	uint32_t len;  /* full message length (payload may be truncated) */
	uint32_t lost; /* messages this receiver lost before this one */
};
_Static_assert(sizeof(struct ioipc_msg_info) == 32, "msg_info is ABI");

/*
 * Register opcode 42: mint a capability fd for a channel this ring created.
 * The fd grants at most `rights` (IOIPC_SUB_SEND | IOIPC_SUB_RECV |
 * IOIPC_SUB_MONITOR) and stamps `badge` on every message sent by a subscriber
 * that attached through it. Pass it with SCM_RIGHTS; attach with
 * IOIPC_SUB_BY_FD and channel_id = the fd.
 */
#define IOIPC_REGISTER_MINT 42

struct ioipc_channel_mint {
	uint32_t channel_id;
	uint32_t rights;
	uint64_t badge;
	int32_t fd_out;
	uint32_t flags; /* O_CLOEXEC only */
	uint32_t reserved[2];
};
_Static_assert(sizeof(struct ioipc_channel_mint) == 32, "mint is ABI");

/*
 * Register opcode 43: take `rights` back from every capability of the channel
 * minted with `badge`, and detach every subscriber that attached through one
 * of them holding any of those rights (its operations then fail with
 * -EACCES). Only the creating ring may; nr_detached_out says how many went.
 */
#define IOIPC_REGISTER_REVOKE 43

struct ioipc_channel_revoke {
	uint32_t channel_id;
	uint32_t rights;
	uint64_t badge;
	uint32_t nr_detached_out;
	uint32_t reserved[3];
};
_Static_assert(sizeof(struct ioipc_channel_revoke) == 32, "revoke is ABI");

/* --- Helpers ------------------------------------------------------------ */

static inline int ioipc_register(struct io_uring *ring, unsigned int op, void *arg, unsigned int nr)
{
	long r = syscall(__NR_io_uring_register, ring->ring_fd, op, arg, nr);

	return r < 0 ? -errno : (int)r;
}

static inline int ioipc_channel_create(struct io_uring *ring, struct ioipc_channel_create *c)
{
	return ioipc_register(ring, IOIPC_REGISTER_CREATE, c, 1);
}

static inline int ioipc_channel_attach(struct io_uring *ring, struct ioipc_channel_attach *a)
{
	return ioipc_register(ring, IOIPC_REGISTER_ATTACH, a, 1);
}

static inline int ioipc_channel_detach(struct io_uring *ring, uint32_t subscriber_id)
{
	return ioipc_register(ring, IOIPC_REGISTER_DETACH, NULL, subscriber_id);
}

static inline int ioipc_channel_destroy(struct io_uring *ring, uint32_t channel_id)
{
	return ioipc_register(ring, IOIPC_REGISTER_DESTROY, NULL, channel_id);
}

static inline int ioipc_channel_mint(struct io_uring *ring, struct ioipc_channel_mint *m)
{
	return ioipc_register(ring, IOIPC_REGISTER_MINT, m, 1);
}

static inline int ioipc_channel_revoke(struct io_uring *ring, struct ioipc_channel_revoke *r)
{
	return ioipc_register(ring, IOIPC_REGISTER_REVOKE, r, 1);
}

/* id: sender's subscriber id or a channel id; target: 0 or a receiver's subscriber id */
static inline void ioipc_prep_send(struct io_uring_sqe *sqe, uint32_t id, const void *buf, unsigned int len,
				   uint32_t target)
{
	io_uring_prep_rw(IOIPC_OP_SEND, sqe, (int)id, buf, len, 0);
	sqe->file_index = target;
}

/* A send carrying n fds (IOIPC_SEND_FDS); fds must stay valid until it is issued. */
static inline void ioipc_prep_send_fds(struct io_uring_sqe *sqe, uint32_t id, const void *buf, unsigned int len,
				       uint32_t target, const int *fds, unsigned int n)
{
	ioipc_prep_send(sqe, id, buf, len, target);
	sqe->ioprio = IOIPC_SEND_FDS;
	sqe->off = n;
	sqe->addr3 = (uint64_t)(uintptr_t)fds;
}

static inline void ioipc_prep_recv(struct io_uring_sqe *sqe, uint32_t subscriber_id, void *buf,
				   unsigned int len, unsigned int recv_flags)
{
	io_uring_prep_rw(IOIPC_OP_RECV, sqe, (int)subscriber_id, buf, len, 0);
	sqe->ioprio = (uint16_t)recv_flags;
}

/* Multishot receive into provided buffers of group bgid (IOSQE_BUFFER_SELECT). */
static inline void ioipc_prep_recv_multishot(struct io_uring_sqe *sqe, uint32_t subscriber_id, uint16_t bgid,
					     unsigned int recv_flags)
{
	io_uring_prep_rw(IOIPC_OP_RECV, sqe, (int)subscriber_id, NULL, 0, 0);
	sqe->ioprio = (uint16_t)(recv_flags | IOIPC_RECV_MULTISHOT);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = bgid;
}

#endif
