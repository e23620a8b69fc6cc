/* SPDX-License-Identifier: MIT */
/*
 * chan.c - io_uring channel I/O for the client library. Every receive is a
 * single-shot IPC_RECV with IOIPC_RECV_WAIT | IOIPC_RECV_INFO | IOIPC_RECV_FDS:
 * it parks in the kernel until a message arrives (nothing busy-polls) and the
 * kernel writes the sender's credentials and the fds it installed for us
 * (O_CLOEXEC) in front of the payload. The ring's eventfd is what
 * the bus's epoll fd watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/chan.h"

/* user_data tags in the low bits; chans and send ops are 8-byte aligned */
#define TAG_RECV   0UL
#define TAG_SEND   1UL
#define TAG_IGNORE 2UL
#define TAG_RCPT   3UL /* a send with a receipt: its cookie above the tag, both its CQEs */
#define TAG_MASK   3UL

struct send_op {
	int res;
	bool done;
};

int ring_init(struct ring *r, unsigned int entries)
{
	int k;

	memset(r, 0, sizeof(*r));
	r->efd = -1;
	r->ready_tail = &r->ready_head;
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

/* Where the payload starts in c's buffer, after the info and fds headers. */
static size_t payload_offset(const struct chan *c)
{
	const struct ioipc_fds_hdr *h;

	if (!c->want_fds)
		return sizeof(struct ioipc_msg_info);
	if (c->res < 0 || (size_t)c->res < sizeof(struct ioipc_msg_info) + sizeof(*h))
		return SIZE_MAX;
	h = (const struct ioipc_fds_hdr *)(c->buf + sizeof(struct ioipc_msg_info));
	if (h->nr > IOIPC_MAX_FDS || sizeof(struct ioipc_msg_info) + ioipc_fds_size(h->nr) > (size_t)c->res)
		return SIZE_MAX;
	return sizeof(struct ioipc_msg_info) + ioipc_fds_size(h->nr);
}

const struct ioipc_fds_hdr *chan_take_fds(struct chan *c)
{
	if (!c->want_fds || c->fds_taken || payload_offset(c) == SIZE_MAX)
		return NULL;
	c->fds_taken = true;
	return (const struct ioipc_fds_hdr *)(c->buf + sizeof(struct ioipc_msg_info));
}

/* Closes the fds of the last receive nobody took. */
static void chan_drop_fds(struct chan *c)
{
	const struct ioipc_fds_hdr *h = chan_take_fds(c);

	for (uint32_t i = 0; h && i < h->nr; i++)
		if (h->fds[i] >= 0)
			close(h->fds[i]);
}

static void chan_free(struct chan *c)
{
	if (!c)
		return;
	chan_drop_fds(c);
	free(c->buf);
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
		chan_free(c);
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
		if (tag == TAG_RCPT) {
			ring_reap_receipt(r, ud, cqe);
		} else if (tag == TAG_SEND) {
			struct send_op *op = p;

			op->res = cqe->res;
			op->done = true;
		} else if (tag == TAG_RECV && p) {
			struct chan *c = p;

			c->armed = false;
			c->res = cqe->res;
			c->fds_taken = false;
			if (c->closing) {
				zombie_remove(r, c);
				chan_free(c);
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
		chan_free(c);
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

int chan_arm(struct ring *r, struct chan *c)
{
	struct io_uring_sqe *sqe;
	int k;

	if (!c || !c->buf || c->closing)
		return -EINVAL;
	if (c->armed || c->ready)
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

int chan_send_fds(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds, unsigned int n)
{
	struct send_op op = { 0 };
	struct io_uring_sqe *sqe;
	int k;

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

int chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
		      unsigned int n, uint64_t cookie, bool *ret_receipt)
{
	struct io_uring_sqe *sqe;
	int k;

	*ret_receipt = false;
	if (!cookie || cookie > (UINTPTR_MAX >> 2) || !ring_receipts(r))
		return chan_send_fds(r, c, buf, len, fds, n);
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
	if (!c->armed || !r->initialized) {
		chan_free(c);
		return;
	}
	/* the kernel still holds our buffer: free once the receive completes */
	c->closing = true;
	c->ready_next = r->zombies;
	r->zombies = c;
	if (recv_cancel_prep(r, c) == 0)
		(void)io_uring_submit(&r->uring);
}

int chan_message(const struct chan *c, const struct ioipc_msg_info **ret_info, const void **ret_payload,
		 size_t *ret_len)
{
	const struct ioipc_msg_info *info;
	size_t got, off;

	if (c->res < 0)
		return c->res;
	info = (const struct ioipc_msg_info *)c->buf;
	if (c->want_fds) {
		/* our own receives: res counts the info, the fds header and the payload */
		off = payload_offset(c);
		if (off == SIZE_MAX)
			return -EBADMSG;
		got = (size_t)c->res - off;
		if (info->len > got)
			return -EMSGSIZE;
		*ret_info = info;
		*ret_payload = c->buf + off;
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
