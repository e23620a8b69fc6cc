/* SPDX-License-Identifier: MIT */
/*
 * chan.h - the client's io_uring channel layer: one ring per bus, channels
 * attached through capability fds from brokerd, receives that complete into
 * a per-channel buffer (single-shot) or into a ring of provided buffers
 * (multishot: one receive for many messages), and synchronous sends. Knows
 * nothing about the message format above it.
 */
#ifndef BROKERD_CLIENT_CHAN_H
#define BROKERD_CLIENT_CHAN_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/ioipc.h"

struct chan {
	uint32_t sub_id;
	unsigned int rights; /* IOIPC_SUB_* */
	bool armed;	     /* a receive is in flight */
	bool ready;	     /* on the ring's ready list */
	bool closing;	     /* freed when its receive completes */
	int res;	     /* result of the completed receive */
	bool want_fds;	     /* receives ask for fds: a struct ioipc_fds_hdr follows the info */
	bool fds_taken;	     /* the received fds are someone else's to close */
	unsigned int kind;   /* owner's tag */
	uint32_t msg_max;    /* largest message its channel takes, as brokerd told; 0: not told */
	bool count_lost;     /* sends ask what receivers lost to them (chan_count_lost()) */
	void *owner;	     /* owner's object */
	struct chan *ready_next;
	size_t buf_size;
	uint8_t *buf; /* struct ioipc_msg_info + payload */

	/*
	 * Multishot (chan_set_multishot()): one receive fills the provided
	 * buffers of group bgid, each completion is queued in done[] until it
	 * is dispatched, and the message being dispatched is cur (its buffer
	 * goes back to the kernel on the next chan_arm()). buf is then the
	 * first provided buffer, which a fallback to single-shot receives into.
	 */
	bool multishot;
	uint16_t bgid;
	unsigned int nbufs;   /* a power of two */
	struct io_uring_buf_ring *br;
	uint8_t *bufs;	      /* nbufs buffers of buf_size bytes */
	struct chan_done {
		int32_t bid; /* -1: the receive's end, res its error */
		int32_t res;
	} *done;
	unsigned int done_head, done_n;
	bool has_cur;	/* holds a completion from done[] (cur NULL: the receive's end) */
	uint8_t *cur;	/* the message being dispatched (NULL: none, or c->buf's) */
	int32_t cur_bid; /* cur's buffer, -1 none */
	bool ended;	 /* the multishot receive ended for good (its error is queued) */
	unsigned int holds; /* buffers taken by chan_hold(): c is freed only when all are back */
};

/* A send queued by chan_send_queue(): done and its result (bytes sent or -errno) once its CQE came. */
struct chan_send_op {
	int res;
	bool done;
	/* a send of a chan that counts losses: the CQE's res is the count, reported to on_lost */
	bool count_lost;
	uint32_t sub_id;
	uint32_t len;
};

struct ring {
	struct io_uring uring;
	bool initialized;
	int efd; /* eventfd signalled on each completion */
	struct chan *ready_head, **ready_tail;
	struct chan *zombies; /* closed with a receive still in flight */
	/* receipts (chan_send_receipt): the owner's, called from ring_reap() */
	void (*on_receipt)(void *userdata, uint64_t cookie, int res);
	void *receipt_userdata;
	int receipts;		/* the kernel posts them: 1 yes, -1 no, 0 not asked yet */
	uintptr_t receipt_wait; /* the receipt send waiting for its own CQE */
	int receipt_res;
	/*
	 * Losses told to sends (chan_count_lost()): the owner's, called from
	 * ring_reap() with the sending subscriber and how many receivers lost
	 * a message to one send (n > 0); it must not send or reap.
	 */
	void (*on_lost)(void *userdata, uint32_t sub_id, uint32_t n);
	void *lost_userdata;
	int send_lost; /* the kernel tells sends (IOIPC_SEND_LOST): 1 yes, -1 no, 0 not asked yet */
	bool lost_probing; /* the probe's send is in the ring; its CQE fills lost_probe */
	struct chan_send_op lost_probe __attribute__((aligned(8)));
	uint64_t bgid_used[1024]; /* provided buffer group ids in use, a bit each */
	/*
	 * ring_wait(): wake_fd (the owner's, -1: none) is polled in the ring,
	 * so that one io_uring_enter waits for completions and for it alike;
	 * woken says its poll completed (set by ring_wait() and ring_reap(),
	 * cleared by the owner).
	 */
	int wake_fd;
	bool wake_armed;
	bool woken;
	bool defer; /* SQEs queued for the next wait's submit (chan_arm_deferred()) */
};

int ring_init(struct ring *r, unsigned int entries);
void ring_deinit(struct ring *r);

/* Drains completions; receive completions go on the ready list. */
int ring_reap(struct ring *r);
/*
 * Spins up to usec microseconds for a completion (a message, say) to appear
 * in the CQ, without a syscall: true if one did (reap it), false at the end.
 */
bool ring_spin(struct ring *r, uint64_t usec);
/* Clears the eventfd; call before reaping so no wakeup is lost. */
void ring_ack(struct ring *r);
struct chan *ring_pop_ready(struct ring *r);
bool ring_has_ready_kind(const struct ring *r, unsigned int kind);
/* Pops the first ready channel of `kind`, leaving others queued. */
struct chan *ring_pop_ready_kind(struct ring *r, unsigned int kind);

/* Attaches through a capability fd (not closed). recv_size 0: send only. */
int chan_attach(struct ring *r, int cap_fd, unsigned int rights, size_t recv_size, unsigned int kind,
		void *owner, struct chan **ret);
/*
 * Receives c's messages with one multishot receive into nbufs (a power of
 * two) provided buffers of c->buf_size bytes instead of a waiting receive
 * each; call after chan_attach(), before the first chan_arm(). Fails (and c
 * stays single-shot) where the kernel has no buffer rings; a kernel without
 * multishot IPC receives is found out at the first receive, which then goes
 * on single-shot.
 */
int chan_set_multishot(struct ring *r, struct chan *c, unsigned int nbufs);
/*
 * Done with the message c holds, if any: arms the next receive. Single-shot:
 * submits one waiting receive with the kernel's info header. Multishot: gives
 * the message's buffer back to the kernel, makes the next completed message
 * (if any) ready, and submits a new multishot receive only if the kernel
 * ended the last one.
 */
int chan_arm(struct ring *r, struct chan *c);
/*
 * chan_arm(), but a single-shot receive is only queued, not submitted: it
 * goes in with the ring's next submit, which ring_wait() (or ring_flush())
 * makes, so that re-arming and waiting are one system call.
 */
int chan_arm_deferred(struct ring *r, struct chan *c);
/* Submits what is queued (deferred receives): 0 or -errno. */
int ring_flush(struct ring *r);
/*
 * Submits what is queued and waits, in one io_uring_enter, until a
 * completion is in the CQ, wake_fd's poll completed (r->woken) or usec
 * passed (UINT64_MAX: no limit; 0: only submits, and looks). 0 or -errno
 * (not -EINTR or -ETIME: those are a return without a completion).
 */
int ring_wait(struct ring *r, uint64_t usec);
/* Sends and waits for the send's own completion: bytes sent or -errno. */
int chan_send(struct ring *r, struct chan *c, const void *buf, size_t len);
/*
 * Queues a send of buf (and n fds) on c without submitting it: it goes to
 * the kernel with the ring's next submit (ring_submit_sends(), or any other
 * submit, e.g. a full SQ's or a receive's), in the order queued. buf, the
 * fds and op must stay valid until op->done. 0, or -EINVAL/-EBUSY (nothing
 * queued).
 */
int chan_send_queue(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds, unsigned int n,
		    struct chan_send_op *op);
/*
 * Submits everything queued in one system call and waits until every one
 * of ops[0..n) is done (sends complete at once, so one io_uring_enter
 * does both). 0 or the error of io_uring_enter() itself.
 */
int ring_submit_sends(struct ring *r, struct chan_send_op *ops, unsigned int n);
/* The same, passing n fds (1..IOIPC_MAX_FDS); the kernel takes its own references. */
int chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds, unsigned int n);
/*
 * chan_send_fds() (n may be 0) with a receipt (IOIPC_SEND_RECEIPT): once the
 * message is taken or dropped in the kernel, ring_reap() calls the ring's
 * on_receipt with cookie (not 0) and the taker's pid or -errno, exactly
 * once; it must not send or reap. *ret_receipt says whether one will come:
 * false if the send failed or the kernel has no receipts (a plain send).
 */
int chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
		      unsigned int n, uint64_t cookie, bool *ret_receipt);
/*
 * Whether the kernel tells a send how many receivers lost a message to it
 * (IOIPC_SEND_LOST), asked once per ring: a send to id 0 with the flag
 * fails -ENOENT if it knows it, -EINVAL if not.
 */
bool ring_send_lost(struct ring *r);
/*
 * From now on every send of c (chan_send*(), chan_send_queue(); not those
 * with a receipt) asks the kernel how many receivers lost a message to it,
 * and ring_reap() hands each count above 0 to the ring's on_lost; the sends
 * still return their length. 0, or -EOPNOTSUPP: the kernel cannot tell.
 */
int chan_count_lost(struct ring *r, struct chan *c);
/* Cancels a parked receive and waits (briefly) for its completion: after it
 * the channel is either idle or ready with a message it had already taken. */
void chan_cancel_wait(struct ring *r, struct chan *c);
/*
 * Multishot: takes the buffer of the message c holds away from the next
 * chan_arm(), so that the message can be read in place while c moves on to
 * the next one. The buffer, and c, stay valid (even through chan_close())
 * until chan_release(). Returns the buffer id, or -1 when c cannot lend one
 * (single-shot: its one buffer is reused by the next receive).
 */
int chan_hold(struct chan *c);
/* Gives a buffer chan_hold() took back to the kernel (or frees a closed c with its last one). */
void chan_release(struct ring *r, struct chan *c, int bid);
/* Takes a ready channel off the ready list. */
void ring_unready(struct ring *r, struct chan *c);
/* Detaches; the struct is freed now or once its receive completes. */
void chan_close(struct ring *r, struct chan *c);

/* For a completed receive: the info header and payload, or -errno. */
int chan_message(const struct chan *c, const struct ioipc_msg_info **ret_info, const void **ret_payload,
		 size_t *ret_len);
/*
 * The fds a completed receive installed in this process (NULL: none asked
 * for, or the receive failed). The caller owns them from here on; fds not
 * taken are closed when the chan is armed again or freed, so a message
 * dropped for any reason leaks none.
 */
const struct ioipc_fds_hdr *chan_take_fds(struct chan *c);

#endif
