/* SPDX-License-Identifier: MIT */
/*
 * chan.c - io_uring channel I/O for the client library. A receive is an
 * IPC_RECV with IOIPC_RECV_INFO | IOIPC_RECV_FDS: the kernel writes the
 * sender's credentials and the fds it installed for us (O_CLOEXEC) in front
 * of the payload. Either single-shot with IOIPC_RECV_WAIT, parked in the
 * kernel until a message arrives (nothing busy-polls), one submit per
 * message; or, for channels set multishot, one IOIPC_RECV_MULTISHOT receive
 * that copies every message into a provided buffer of the chan's buffer ring
 * and posts one completion each, submitted again only when the kernel ends
 * it (out of buffers, CQ overflow). Both copy a message once, from the
 * channel's ring into our buffer, where the layer above reads it in place.
 * The ring's eventfd is what the bus's epoll fd watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client/chan.h"
#include "util/macro.h"

/* user_data tags in the low bits; chans and send ops are 8-byte aligned */
#define TAG_RECV   0UL
#define TAG_SEND   1UL
#define TAG_IGNORE 2UL
#define TAG_RCPT   3UL /* a send with a receipt: its cookie above the tag, both its CQEs */
#define TAG_MASK   3UL

int ring_init(struct ring *r, unsigned int entries)
{
	int k;

	memset(r, 0, sizeof(*r));
	r->efd = r->wake_fd = -1;
	r->ready_tail = &r->ready_head;
	/*
	 * A multishot receive posts a completion per message until its buffers
	 * run out: room for many in the CQ, so that a burst on a few channels
	 * does not overflow it (which would end their receives).
	 */
	k = io_uring_queue_init_params(entries, &r->uring,
				       &(struct io_uring_params){ .flags = IORING_SETUP_CQSIZE, .cq_entries = 1024 });
	if (k == -EINVAL)
		k = io_uring_queue_init(entries, &r->uring, 0);
	if (k < 0)
		return k;
	r->initialized = true;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		k = -errno;
		ring_deinit(r);
		return k;
	}
	k = io_uring_register_eventfd(&r->uring, r->efd);
	if (k < 0) {
		ring_deinit(r);
		return k;
	}
	return 0;
}

/* The buffer of the message c holds: a provided buffer, or c->buf. */
static uint8_t *recv_buf(const struct chan *c)
{
	return c->cur ? c->cur : c->buf;
}

/* Where the payload starts in c's buffer, after the info and fds headers. */
static size_t payload_offset(const struct chan *c)
{
	const struct ioipc_fds_hdr *h;

	if (!c->want_fds)
		return sizeof(struct ioipc_msg_info);
	if (c->res < 0 || (size_t)c->res < sizeof(struct ioipc_msg_info) + sizeof(*h))
		return SIZE_MAX;
	h = (const struct ioipc_fds_hdr *)(recv_buf(c) + sizeof(struct ioipc_msg_info));
	if (h->nr > IOIPC_MAX_FDS || sizeof(struct ioipc_msg_info) + ioipc_fds_size(h->nr) > (size_t)c->res)
		return SIZE_MAX;
	return sizeof(struct ioipc_msg_info) + ioipc_fds_size(h->nr);
}

const struct ioipc_fds_hdr *chan_take_fds(struct chan *c)
{
	if (!c->want_fds || c->fds_taken || payload_offset(c) == SIZE_MAX)
		return NULL;
	c->fds_taken = true;
	return (const struct ioipc_fds_hdr *)(recv_buf(c) + sizeof(struct ioipc_msg_info));
}

/* Closes the fds of the last receive nobody took. */
static void chan_drop_fds(struct chan *c)
{
	const struct ioipc_fds_hdr *h = chan_take_fds(c);

	for (uint32_t i = 0; h && i < h->nr; i++)
		if (h->fds[i] >= 0)
			close(h->fds[i]);
}

/* Closes the fds a completed multishot receive installed in buffer bid (res bytes). */
static void buf_drop_fds(struct chan *c, int32_t bid, int32_t res)
{
	uint8_t *cur = c->cur;
	int32_t cur_res = c->res;
	bool taken = c->fds_taken;

	if (bid < 0 || (unsigned int)bid >= c->nbufs)
		return;
	c->cur = c->bufs + (size_t)bid * c->buf_size;
	c->res = res;
	c->fds_taken = false;
	chan_drop_fds(c);
	c->cur = cur;
	c->res = cur_res;
	c->fds_taken = taken;
}

static void chan_free(struct ring *r, struct chan *c)
{
	if (!c)
		return;
	chan_drop_fds(c);
	if (c->bufs) {
		/* messages completed and never dispatched: their fds are ours */
		for (unsigned int i = 0; i < c->done_n; i++) {
			const struct chan_done *d = &c->done[(c->done_head + i) % (c->nbufs + 1)];

			buf_drop_fds(c, d->bid, d->res);
		}
		if (r->initialized)
			(void)io_uring_unregister_buf_ring(&r->uring, c->bgid);
		r->bgid_used[c->bgid / 64] &= ~(1ULL << (c->bgid % 64));
		if (c->br)
			(void)munmap(c->br, c->nbufs * sizeof(struct io_uring_buf));
		(void)munmap(c->bufs, c->nbufs * c->buf_size);
		free(c->done);
	} else {
		free(c->buf);
	}
	free(c);
}

void ring_deinit(struct ring *r)
{
	struct chan *c;

	/* tearing the ring down detaches every subscriber in the kernel */
	if (r->initialized)
		io_uring_queue_exit(&r->uring);
	r->initialized = false;
	if (r->efd >= 0)
		close(r->efd);
	r->efd = -1;
	while ((c = r->zombies)) {
		r->zombies = c->ready_next;
		chan_free(r, c);
	}
	r->ready_head = NULL;
	r->ready_tail = &r->ready_head;
}

void ring_ack(struct ring *r)
{
	uint64_t v;

	if (r->efd >= 0)
		(void)!read(r->efd, &v, sizeof(v));
}

/* A spinning CPU's hint to its sibling thread and its power management. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

bool ring_spin(struct ring *r, uint64_t usec)
{
	struct timespec ts;
	uint64_t end, now;

	if (!r->initialized)
		return false;
	/*
	 * A completion is posted by task_work, which the kernel runs when it
	 * interrupts this thread (the IPI of task_work's notification), so
	 * watching the CQ tail from user space sees it; a clock read every 64
	 * looks keeps the cost of looking low.
	 */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000 + usec;
	do {
		for (unsigned int i = 0; i < 64; i++) {
			if (io_uring_cq_ready(&r->uring))
				return true;
			cpu_relax();
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
	} while (now < end);
	return false;
}

static void zombie_remove(struct ring *r, struct chan *c)
{
	for (struct chan **p = &r->zombies; *p; p = &(*p)->ready_next)
		if (*p == c) {
			*p = c->ready_next;
			return;
		}
}

static void ready_push(struct ring *r, struct chan *c)
{
	c->ready = true;
	c->ready_next = NULL;
	*r->ready_tail = c;
	r->ready_tail = &c->ready_next;
}

/* Takes *p, a link of the ready list, out of it. */
static struct chan *ready_unlink(struct ring *r, struct chan **p)
{
	struct chan *c = *p;

	*p = c->ready_next;
	if (!*p)
		r->ready_tail = p;
	c->ready = false;
	c->ready_next = NULL;
	return c;
}

/* A free SQE, submitting what is queued first if the ring is full. */
static struct io_uring_sqe *ring_get_sqe(struct ring *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->uring);

	if (!sqe) {
		(void)io_uring_submit(&r->uring);
		sqe = io_uring_get_sqe(&r->uring);
	}
	return sqe;
}

/* Queues a cancel of c's parked receive (not submitted); its own completion is ignored. */
static int recv_cancel_prep(struct ring *r, struct chan *c)
{
	struct io_uring_sqe *sqe = ring_get_sqe(r);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel64(sqe, (uintptr_t)c | TAG_RECV, 0);
	io_uring_sqe_set_data64(sqe, TAG_IGNORE);
	return 0;
}

/*
 * A CQE of a send with a receipt: the kernel's receipt (IORING_CQE_F_NOTIF)
 * goes to the ring's owner, the send's own CQE to chan_send_receipt()
 * waiting for it.
 */
static void ring_reap_receipt(struct ring *r, uintptr_t ud, const struct io_uring_cqe *cqe)
{
	if (cqe->flags & IORING_CQE_F_NOTIF) {
		if (r->on_receipt)
			r->on_receipt(r->receipt_userdata, ud >> 2, cqe->res);
	} else if (r->receipt_wait == ud) {
		r->receipt_res = cqe->res;
		r->receipt_wait = 0;
	}
}

/* --- Multishot receives into provided buffers ------------------------------------ */

static void done_push(struct chan *c, int32_t bid, int32_t res)
{
	BUG_ON(c->done_n > c->nbufs);
	c->done[(c->done_head + c->done_n) % (c->nbufs + 1)] = (struct chan_done){ .bid = bid, .res = res };
	c->done_n++;
}

/* Gives buffer bid back to the kernel. */
static void buf_recycle(struct chan *c, int32_t bid)
{
	io_uring_buf_ring_add(c->br, c->bufs + (size_t)bid * c->buf_size, (unsigned int)c->buf_size, (uint16_t)bid,
			      io_uring_buf_ring_mask(c->nbufs), 0);
	io_uring_buf_ring_advance(c->br, 1);
}

/* Buffers the kernel filled that we did not give back yet: queued, current, or lent to a message. */
static unsigned int multishot_held(const struct chan *c)
{
	unsigned int n = (c->cur_bid >= 0) + c->holds;

	for (unsigned int i = 0; i < c->done_n; i++)
		n += c->done[(c->done_head + i) % (c->nbufs + 1)].bid >= 0;
	return n;
}

/* Makes the next completed message c's current one and c ready; false if none. */
static bool multishot_next(struct ring *r, struct chan *c)
{
	struct chan_done d;

	if (c->ready || c->has_cur || !c->done_n)
		return false;
	d = c->done[c->done_head];
	c->done_head = (c->done_head + 1) % (c->nbufs + 1);
	c->done_n--;
	c->cur_bid = d.bid;
	c->cur = d.bid >= 0 ? c->bufs + (size_t)d.bid * c->buf_size : NULL;
	c->has_cur = true;
	c->res = d.res;
	c->fds_taken = false;
	ready_push(r, c);
	return true;
}

/*
 * Makes the bus fd readable, so that its owner calls ring_reap() again: for
 * work that waits in memory (an SQE a submit could not take) and that no
 * completion would announce.
 */
static void ring_kick(struct ring *r)
{
	uint64_t one = 1;

	if (r->efd >= 0)
		(void)!write(r->efd, &one, sizeof(one));
}

static int multishot_submit(struct ring *r, struct chan *c)
{
	struct io_uring_sqe *sqe = ring_get_sqe(r);
	int k;

	if (!sqe)
		return -EBUSY;
	ioipc_prep_recv_multishot(sqe, c->sub_id, c->bgid,
				  IOIPC_RECV_INFO | (c->want_fds ? IOIPC_RECV_FDS | IOIPC_RECV_FDS_CLOEXEC : 0));
	io_uring_sqe_set_data64(sqe, (uintptr_t)c | TAG_RECV);
	c->armed = true;
	/*
	 * A submit that fails (the CQ overflowing: -EBUSY) leaves the SQE in
	 * the SQ: it goes in with the next submit (ring_reap() makes one), so
	 * the receive counts as armed either way.
	 */
	k = io_uring_submit(&r->uring);
	if (k == -EBUSY || k == -EAGAIN || k == -EINTR) {
		/* no completion may come to make that next submit: our own wake-up does */
		ring_kick(r);
		return 0;
	}
	return k < 0 ? k : 0;
}

/*
 * A completion of c's multishot receive: a message in a buffer, queued for
 * dispatch, and/or the receive's end. An end for want of buffers or room in
 * the CQ, or a transient one, is ours to handle (submit again, at once or
 * when a buffer comes back); any other end is queued after the messages, for
 * the layer above to see as the receive's error, as a single-shot one's.
 */
static void multishot_complete(struct ring *r, struct chan *c, int res, unsigned int flags)
{
	bool more = flags & IORING_CQE_F_MORE;
	bool has_buf = flags & IORING_CQE_F_BUFFER;
	int32_t bid = has_buf ? (int32_t)(flags >> IORING_CQE_BUFFER_SHIFT) : -1;
	bool again = false;

	if (has_buf && (unsigned int)bid >= c->nbufs)
		has_buf = false; /* not one of ours: cannot happen */
	if (!more)
		c->armed = false;
	if (c->closing) {
		if (has_buf)
			buf_drop_fds(c, bid, res);
		if (!more && !c->holds) {
			zombie_remove(r, c);
			chan_free(r, c);
		}
		return;
	}
	if (has_buf && res < 0) {
		/* a buffer the kernel took for a message it did not deliver: empty, back to the ring */
		buf_recycle(c, bid);
		has_buf = false;
	}
	if (has_buf)
		done_push(c, bid, res);
	if (more) {
		/* still receiving */
	} else if (has_buf || res == -EINTR || res == -ETIME || res == -EOVERFLOW) {
		again = true; /* ended by the CQ's overflow, or interrupted */
	} else if (res == -ENOBUFS) {
		/*
		 * Every buffer waits for dispatch, and chan_arm() submits again
		 * when one comes back; unless one came back meanwhile.
		 */
		again = multishot_held(c) < c->nbufs;
	} else if (res == -EINVAL && c->want_fds) {
		c->want_fds = false; /* a kernel without fds on channels */
		again = true;
	} else if (res == -EINVAL && !c->done_n && !c->has_cur) {
		/* a kernel without multishot IPC receives: single-shot from now */
		c->multishot = false;
		c->buf = c->bufs;
		(void)chan_arm(r, c);
		return;
	} else {
		done_push(c, -1, res); /* for good: the layer above sees why */
		c->ended = true;
	}
	if (again)
		(void)multishot_submit(r, c);
	(void)multishot_next(r, c);
}

int chan_set_multishot(struct ring *r, struct chan *c, unsigned int nbufs)
{
	struct io_uring_buf_reg reg = { 0 };
	unsigned int id;
	int k;

	if (!r->initialized || !c || !c->buf || c->multishot || c->armed || !nbufs || nbufs > 32768 ||
	    (nbufs & (nbufs - 1)))
		return -EINVAL;
	for (id = 0; id < 65536 && (r->bgid_used[id / 64] & (1ULL << (id % 64))); id++)
		;
	if (id == 65536)
		return -EBUSY;
	/* mapped, not allocated: pages are only backed where messages were written */
	c->bufs = mmap(NULL, nbufs * c->buf_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (c->bufs == MAP_FAILED) {
		c->bufs = NULL;
		return -ENOMEM;
	}
	c->br = mmap(NULL, nbufs * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c->done = calloc(nbufs + 1, sizeof(*c->done));
	if (c->br == MAP_FAILED || !c->done) {
		k = -ENOMEM;
		goto fail;
	}
	io_uring_buf_ring_init(c->br);
	reg.ring_addr = (uint64_t)(uintptr_t)c->br;
	reg.ring_entries = nbufs;
	reg.bgid = (uint16_t)id;
	k = io_uring_register_buf_ring(&r->uring, &reg, 0);
	if (k < 0)
		goto fail;
	r->bgid_used[id / 64] |= 1ULL << (id % 64);
	c->bgid = (uint16_t)id;
	c->nbufs = nbufs;
	for (unsigned int i = 0; i < nbufs; i++)
		io_uring_buf_ring_add(c->br, c->bufs + (size_t)i * c->buf_size, (unsigned int)c->buf_size, (uint16_t)i,
				      io_uring_buf_ring_mask(nbufs), (int)i);
	io_uring_buf_ring_advance(c->br, (int)nbufs);
	free(c->buf);
	c->buf = c->bufs;
	c->cur_bid = -1;
	c->multishot = true;
	return 0;
fail:
	if (c->br && c->br != MAP_FAILED)
		(void)munmap(c->br, nbufs * sizeof(struct io_uring_buf));
	c->br = NULL;
	(void)munmap(c->bufs, nbufs * c->buf_size);
	c->bufs = NULL;
	free(c->done);
	c->done = NULL;
	return k;
}

int ring_reap(struct ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	if (!r->initialized)
		return 0;
	io_uring_for_each_cqe(&r->uring, head, cqe)
	{
		uintptr_t ud = (uintptr_t)io_uring_cqe_get_data64(cqe);
		uintptr_t tag = ud & TAG_MASK;
		void *p = (void *)(ud & ~TAG_MASK);

		n++;
		if (tag == TAG_IGNORE && p == r) {
			/* ring_wait()'s poll of wake_fd, unless ring_wait() saw it already */
			if (r->wake_armed)
				r->woken = true;
			r->wake_armed = false;
		} else if (tag == TAG_RCPT) {
			ring_reap_receipt(r, ud, cqe);
		} else if (tag == TAG_SEND) {
			struct chan_send_op *op = p;

			op->res = cqe->res;
			op->done = true;
			if (op->count_lost && cqe->res >= 0) {
				/* IOIPC_SEND_LOST: res is what the send cost the receivers, not its length */
				if (cqe->res > 0 && r->on_lost)
					r->on_lost(r->lost_userdata, op->sub_id, (uint32_t)cqe->res);
				op->res = (int)op->len;
			}
		} else if (tag == TAG_RECV && p && ((struct chan *)p)->multishot) {
			multishot_complete(r, p, cqe->res, cqe->flags);
		} else if (tag == TAG_RECV && p) {
			struct chan *c = p;

			c->armed = false;
			c->res = cqe->res;
			c->fds_taken = false;
			if (c->closing) {
				zombie_remove(r, c);
				chan_free(r, c);
				continue;
			}
			c->res = cqe->res;
			if (c->res == -EINVAL && c->want_fds) {
				/* a kernel without fds on channels refuses IOIPC_RECV_FDS: do without */
				c->want_fds = false;
				if (chan_arm(r, c) == 0)
					continue;
			}
			ready_push(r, c);
		}
	}
	io_uring_cq_advance(&r->uring, n);
	/*
	 * Completions the kernel could not post for want of room in the CQ wait
	 * in its overflow list, which nothing announces again: flush and reap.
	 */
	if (io_uring_cq_has_overflow(&r->uring) && io_uring_get_events(&r->uring) == 0 && io_uring_cq_ready(&r->uring))
		return (int)n + ring_reap(r);
	/*
	 * Receives queued while a submit could not go in (see
	 * multishot_submit()); deferred ones wait for the next wait's submit.
	 */
	if (!r->defer && io_uring_sq_ready(&r->uring)) {
		int k = io_uring_submit(&r->uring);

		if (k == -EBUSY || k == -EAGAIN || k == -EINTR)
			ring_kick(r); /* again on the next pass */
	}
	return (int)n;
}

bool ring_has_ready_kind(const struct ring *r, unsigned int kind)
{
	for (const struct chan *c = r->ready_head; c; c = c->ready_next)
		if (c->kind == kind)
			return true;
	return false;
}

struct chan *ring_pop_ready_kind(struct ring *r, unsigned int kind)
{
	for (struct chan **p = &r->ready_head; *p; p = &(*p)->ready_next)
		if (kind == UINT32_MAX || (*p)->kind == kind)
			return ready_unlink(r, p);
	return NULL;
}

struct chan *ring_pop_ready(struct ring *r)
{
	return ring_pop_ready_kind(r, UINT32_MAX);
}

int chan_attach(struct ring *r, int cap_fd, unsigned int rights, size_t recv_size, unsigned int kind,
		void *owner, struct chan **ret)
{
	struct ioipc_channel_attach a = {
		.channel_id = (uint32_t)cap_fd,
		.flags = IOIPC_SUB_BY_FD | rights,
		.channel_fd = -1,
	};
	struct chan *c;
	int k;

	if (!r->initialized || cap_fd < 0 || !rights || !ret)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (recv_size) {
		/* room for every fd a message may carry, so none is ever cut off */
		c->want_fds = true;
		c->buf_size = sizeof(struct ioipc_msg_info) + ioipc_fds_size(IOIPC_MAX_FDS) + recv_size;
		c->buf = malloc(c->buf_size);
		if (!c->buf) {
			free(c);
			return -ENOMEM;
		}
	}
	k = ioipc_channel_attach(&r->uring, &a);
	if (k < 0) {
		chan_free(r, c);
		return k;
	}
	/* we never map the shared region: receives copy into our buffer */
	if (a.channel_fd > 2 && a.channel_fd != cap_fd)
		close(a.channel_fd);
	c->sub_id = a.local_id_out;
	c->rights = rights;
	c->kind = kind;
	c->owner = owner;
	*ret = c;
	return 0;
}

static int chan_arm_sq(struct ring *r, struct chan *c, bool submit);

int chan_arm(struct ring *r, struct chan *c)
{
	return chan_arm_sq(r, c, true);
}

int chan_arm_deferred(struct ring *r, struct chan *c)
{
	return chan_arm_sq(r, c, false);
}

int ring_flush(struct ring *r)
{
	int k = 0;

	r->defer = false;
	if (r->initialized && io_uring_sq_ready(&r->uring))
		k = io_uring_submit(&r->uring);
	return k < 0 ? k : 0;
}

/* Whether wake_fd's poll has completed, its CQE not reaped yet (ring_reap() ignores it then). */
static void wake_peek(struct ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned int head;

	if (!r->wake_armed)
		return;
	io_uring_for_each_cqe(&r->uring, head, cqe)
	{
		if (io_uring_cqe_get_data64(cqe) == ((uintptr_t)r | TAG_IGNORE)) {
			r->wake_armed = false;
			r->woken = true;
			return;
		}
	}
}

int ring_wait(struct ring *r, uint64_t usec)
{
	struct __kernel_timespec ts, *tsp = NULL;
	struct io_uring_cqe *cqe;
	int k;

	if (!r->initialized)
		return -EINVAL;
	if (r->wake_fd >= 0 && !r->wake_armed) {
		struct io_uring_sqe *sqe = ring_get_sqe(r);

		if (!sqe)
			return -EBUSY;
		io_uring_prep_poll_add(sqe, r->wake_fd, POLLIN);
		io_uring_sqe_set_data64(sqe, (uintptr_t)r | TAG_IGNORE);
		r->wake_armed = true;
	}
	r->defer = false;
	if (usec == 0) {
		/*
		 * A look: completions whose task_work is pending get posted (as
		 * epoll_wait(0) did), unless some are there already: the pass has
		 * work, and what is pending runs with the next system call (a
		 * completion in the CQ means task_work ran since).
		 */
		if (io_uring_sq_ready(&r->uring))
			k = io_uring_submit(&r->uring);
		else
			k = io_uring_cq_ready(&r->uring) ? 0 : io_uring_get_events(&r->uring);
	} else {
		if (usec != UINT64_MAX) {
			ts.tv_sec = (long long)(usec / 1000000ULL);
			ts.tv_nsec = (long long)(usec % 1000000ULL) * 1000LL;
			tsp = &ts;
		}
		/*
		 * Waiting in the ring rather than in epoll_wait(): the task_work
		 * that posts a receive's completion runs inside this wait, where it
		 * would stop an epoll_wait() with EINTR and cost a second look.
		 */
		k = io_uring_submit_and_wait_timeout(&r->uring, &cqe, 1, tsp, NULL);
	}
	wake_peek(r);
	/* -EBUSY, -EAGAIN: the CQ is full (overflowed); the pass's reap makes room, the next wait submits */
	return k < 0 && k != -EINTR && k != -ETIME && k != -EBUSY && k != -EAGAIN ? k : 0;
}

static int chan_arm_sq(struct ring *r, struct chan *c, bool submit)
{
	struct io_uring_sqe *sqe;
	int k;

	if (!c || !c->buf || c->closing)
		return -EINVAL;
	if (c->ready)
		return 0;
	if (c->multishot) {
		/* done with the current message: its fds and buffer go */
		chan_drop_fds(c);
		if (c->cur_bid >= 0)
			buf_recycle(c, c->cur_bid);
		c->cur = NULL;
		c->cur_bid = -1;
		c->has_cur = false;
		c->res = 0;
		if (multishot_next(r, c) || c->armed || c->ended)
			return 0;
		/* the kernel ended it (for want of buffers, say): again */
		return multishot_submit(r, c);
	}
	if (c->armed)
		return 0;
	chan_drop_fds(c); /* the buffer is about to be reused */
	sqe = ring_get_sqe(r);
	if (!sqe)
		return -EBUSY;
	ioipc_prep_recv(sqe, c->sub_id, c->buf, (unsigned int)c->buf_size,
			IOIPC_RECV_WAIT | IOIPC_RECV_INFO |
				(c->want_fds ? IOIPC_RECV_FDS | IOIPC_RECV_FDS_CLOEXEC : 0));
	io_uring_sqe_set_data64(sqe, (uintptr_t)c | TAG_RECV);
	c->armed = true;
	if (!submit) {
		r->defer = true;
		return 0;
	}
	k = io_uring_submit(&r->uring);
	if (k < 0) {
		c->armed = false;
		return k;
	}
	return 0;
}

int chan_send(struct ring *r, struct chan *c, const void *buf, size_t len)
{
	return chan_send_fds(r, c, buf, len, NULL, 0);
}

/*
 * Checks a send's arguments and prepares its SQE on c (not submitted, no
 * user_data yet): chan_send_fds() and chan_send_receipt() alike.
 */
static int send_prep(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds, unsigned int n,
		     struct io_uring_sqe **ret)
{
	struct io_uring_sqe *sqe;

	if (!c || !(c->rights & IOIPC_SUB_SEND) || !buf || len > UINT32_MAX || n > IOIPC_MAX_FDS ||
	    (n && !fds))
		return -EINVAL;
	sqe = ring_get_sqe(r);
	if (!sqe)
		return -EBUSY;
	if (n)
		ioipc_prep_send_fds(sqe, c->sub_id, buf, (unsigned int)len, 0, fds, n);
	else
		ioipc_prep_send(sqe, c->sub_id, buf, (unsigned int)len, 0);
	*ret = sqe;
	return 0;
}

/* Asks for the send's losses where c counts them (chan_count_lost()). */
static void send_count_lost(struct chan *c, struct io_uring_sqe *sqe, size_t len, struct chan_send_op *op)
{
	if (!c->count_lost)
		return;
	sqe->ioprio |= IOIPC_SEND_LOST;
	op->count_lost = true;
	op->sub_id = c->sub_id;
	op->len = (uint32_t)len;
}

int chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds, unsigned int n)
{
	struct chan_send_op op = { 0 };
	struct io_uring_sqe *sqe;
	int k;

	k = send_prep(r, c, buf, len, fds, n, &sqe);
	if (k < 0)
		return k;
	send_count_lost(c, sqe, len, &op);
	io_uring_sqe_set_data64(sqe, (uintptr_t)&op | TAG_SEND);
	/* a send never waits in the kernel: its completion comes right away */
	while (!op.done) {
		k = io_uring_submit_and_wait(&r->uring, 1);
		if (k < 0 && k != -EINTR && k != -EAGAIN && k != -ETIME)
			return k;
		(void)ring_reap(r);
	}
	return op.res;
}

int chan_send_queue(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds, unsigned int n,
		    struct chan_send_op *op)
{
	struct io_uring_sqe *sqe;
	int k;

	k = send_prep(r, c, buf, len, fds, n, &sqe);
	if (k < 0)
		return k;
	*op = (struct chan_send_op){ 0 };
	send_count_lost(c, sqe, len, op);
	io_uring_sqe_set_data64(sqe, (uintptr_t)op | TAG_SEND);
	return 0;
}

int ring_submit_sends(struct ring *r, struct chan_send_op *ops, unsigned int n)
{
	unsigned int i = 0;
	int k;

	for (;;) {
		while (i < n && ops[i].done)
			i++;
		if (i == n)
			return 0;
		/* the sends queued since the last submit, all in one io_uring_enter, and their completions */
		k = io_uring_submit_and_wait(&r->uring, 1);
		/* -EBUSY: the CQ overflowed; the reap makes room and the next enter submits */
		if (k < 0 && k != -EINTR && k != -EAGAIN && k != -ETIME && k != -EBUSY)
			return k;
		(void)ring_reap(r);
	}
}

/* Submits a send of cookie's user_data and waits for its own completion. */
static int send_receipt_wait(struct ring *r, struct io_uring_sqe *sqe, uint64_t cookie)
{
	uintptr_t ud = (uintptr_t)(cookie << 2) | TAG_RCPT;
	int k;

	sqe->ioprio |= IOIPC_SEND_RECEIPT;
	io_uring_sqe_set_data64(sqe, ud);
	r->receipt_wait = ud;
	while (r->receipt_wait) {
		k = io_uring_submit_and_wait(&r->uring, 1);
		if (k < 0 && k != -EINTR && k != -EAGAIN && k != -ETIME) {
			r->receipt_wait = 0;
			return k;
		}
		(void)ring_reap(r);
	}
	return r->receipt_res;
}

/* Whether the kernel posts receipts: a send to id 0 fails -ENOENT if it knows the flag, else -EINVAL. */
static bool ring_receipts(struct ring *r)
{
	struct io_uring_sqe *sqe;

	if (r->receipts)
		return r->receipts > 0;
	sqe = ring_get_sqe(r);
	if (!sqe)
		return false; /* ask again next time */
	ioipc_prep_send(sqe, 0, "", 0, 0);
	r->receipts = send_receipt_wait(r, sqe, 0) == -ENOENT ? 1 : -1;
	return r->receipts > 0;
}

bool ring_send_lost(struct ring *r)
{
	struct io_uring_sqe *sqe;
	int k;

	if (r->send_lost || !r->initialized)
		return r->send_lost > 0;
	if (!r->lost_probing) {
		sqe = ring_get_sqe(r);
		if (!sqe)
			return false; /* ask again next time */
		ioipc_prep_send(sqe, 0, "", 0, 0);
		sqe->ioprio = IOIPC_SEND_LOST;
		/* the ring's own op: reaped whenever its CQE comes, even after we gave up waiting */
		r->lost_probe = (struct chan_send_op){ 0 };
		io_uring_sqe_set_data64(sqe, (uintptr_t)&r->lost_probe | TAG_SEND);
		r->lost_probing = true;
	}
	while (!r->lost_probe.done) {
		k = io_uring_submit_and_wait(&r->uring, 1);
		if (k < 0 && k != -EINTR && k != -EAGAIN && k != -ETIME)
			return false; /* ask again next time */
		(void)ring_reap(r);
	}
	r->lost_probing = false;
	r->send_lost = r->lost_probe.res == -ENOENT ? 1 : -1;
	return r->send_lost > 0;
}

int chan_count_lost(struct ring *r, struct chan *c)
{
	if (!c)
		return -EINVAL;
	if (!c->count_lost && !ring_send_lost(r))
		return -EOPNOTSUPP;
	c->count_lost = true;
	return 0;
}

int chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
		      unsigned int n, uint64_t cookie, bool *ret_receipt)
{
	struct io_uring_sqe *sqe;
	int k;

	*ret_receipt = false;
	if (!cookie || cookie > (UINTPTR_MAX >> 2) || !ring_receipts(r))
		return chan_send_fds(r, c, buf, len, fds, n);
	k = send_prep(r, c, buf, len, fds, n, &sqe);
	if (k < 0)
		return k;
	k = send_receipt_wait(r, sqe, cookie);
	/* a send that failed owes no receipt */
	*ret_receipt = k >= 0;
	return k;
}

void ring_unready(struct ring *r, struct chan *c)
{
	if (!c->ready)
		return;
	for (struct chan **p = &r->ready_head; *p; p = &(*p)->ready_next)
		if (*p == c) {
			ready_unlink(r, p);
			return;
		}
	c->ready = false;
	c->ready_next = NULL;
}

void chan_cancel_wait(struct ring *r, struct chan *c)
{
	if (!c || !c->armed || !r->initialized)
		return;
	if (recv_cancel_prep(r, c) < 0)
		return;
	/* the receive completes with -ECANCELED, or with the message it took */
	for (int i = 0; i < 100 && c->armed; i++) {
		struct __kernel_timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
		struct io_uring_cqe *cqe;

		(void)io_uring_submit(&r->uring);
		(void)io_uring_wait_cqe_timeout(&r->uring, &cqe, &ts);
		(void)ring_reap(r);
	}
	if (c->ready && c->res < 0)
		ring_unready(r, c); /* canceled: nothing to look at */
}

void chan_close(struct ring *r, struct chan *c)
{
	if (!c)
		return;
	ring_unready(r, c);
	if (r->initialized)
		(void)ioipc_channel_detach(&r->uring, c->sub_id);
	if ((!c->armed && !c->holds) || !r->initialized) {
		chan_free(r, c);
		return;
	}
	/* the kernel or a message read in place still holds a buffer: free once they are done */
	c->closing = true;
	c->ready_next = r->zombies;
	r->zombies = c;
	if (c->armed && recv_cancel_prep(r, c) == 0)
		(void)io_uring_submit(&r->uring);
}

int chan_message(const struct chan *c, const struct ioipc_msg_info **ret_info, const void **ret_payload,
		 size_t *ret_len)
{
	const struct ioipc_msg_info *info;
	size_t got, off;

	if (c->res < 0)
		return c->res;
	info = (const struct ioipc_msg_info *)recv_buf(c);
	if (c->want_fds) {
		/* our own receives: res counts the info, the fds header and the payload */
		off = payload_offset(c);
		if (off == SIZE_MAX)
			return -EBADMSG;
		got = (size_t)c->res - off;
		if (info->len > got)
			return -EMSGSIZE;
		*ret_info = info;
		*ret_payload = recv_buf(c) + off;
		*ret_len = info->len;
		return 0;
	}
	/*
	 * res counts the info header and the payload copied after it. Should a
	 * kernel count the payload alone, info->len says so: accept both.
	 */
	if (info->len == (size_t)c->res && (size_t)c->res + sizeof(*info) <= c->buf_size)
		got = (size_t)c->res;
	else if ((size_t)c->res >= sizeof(*info))
		got = (size_t)c->res - sizeof(*info);
	else
		return -EBADMSG;
	if (info->len > got)
		return -EMSGSIZE; /* truncated: longer than our buffer */
	*ret_info = info;
	*ret_payload = c->buf + sizeof(*info);
	*ret_len = info->len;
	return 0;
}

int chan_hold(struct chan *c)
{
	int bid;

	if (!c || !c->multishot || c->cur_bid < 0)
		return -1;
	bid = c->cur_bid;
	c->cur_bid = -1;
	c->holds++;
	return bid;
}

void chan_release(struct ring *r, struct chan *c, int bid)
{
	if (!c || bid < 0 || (unsigned int)bid >= c->nbufs)
		return;
	BUG_ON(!c->holds);
	c->holds--;
	if (c->closing) {
		if (!c->holds && !c->armed) {
			zombie_remove(r, c);
			chan_free(r, c);
		}
		return;
	}
	buf_recycle(c, bid);
	/* the kernel may have ended the receive for want of this very buffer */
	if (c->multishot && !c->armed && !c->ended && !c->has_cur && !c->done_n)
		(void)multishot_submit(r, c);
}
