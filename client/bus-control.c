/* SPDX-License-Identifier: MIT */
/*
 * bus-control.c - the control connection's transport: requests encoded by
 * protocol/ctrl.c go out on the AF_UNIX socket and their replies come back,
 * with the fds they carry; broker signals that arrive while a request waits
 * are queued for the dispatcher; control errors become errnos.
 *
 * Most requests are synchronous: brokerd answers them promptly. Those that
 * must not block an event loop (OPEN_CALL of an asynchronous call) are sent
 * with a handler instead, which the dispatcher runs when the reply comes; a
 * synchronous request that meets such a reply queues it for the dispatcher.
 * A broken connection is only marked here (bus->ctrl_failed): disconnecting
 * belongs to the dispatcher, which sits above.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/bus-control.h"
#include "util/socket.h"

/* --- Errors ----------------------------------------------------------------- */

static const struct {
	const char *name;
	int error;
} ctrl_errors[] = {
	{ CTRL_ERROR_FAILED, EIO },
	{ CTRL_ERROR_PROTOCOL, EPROTO },
	{ CTRL_ERROR_VERSION, EPROTO },
	{ CTRL_ERROR_UNKNOWN_OP, EOPNOTSUPP },
	{ CTRL_ERROR_INVALID_ARGS, EINVAL },
	{ CTRL_ERROR_NO_HELLO, ENOTCONN },
	{ CTRL_ERROR_ALREADY_HELLO, EALREADY },
	{ CTRL_ERROR_ACCESS_DENIED, EACCES },
	{ CTRL_ERROR_QUOTA_EXCEEDED, EDQUOT },
	{ CTRL_ERROR_NAME_HAS_NO_OWNER, ENXIO },
	{ CTRL_ERROR_SERVICE_UNKNOWN, ENXIO },
	{ CTRL_ERROR_ACTIVATION_FAILED, EHOSTDOWN },
	{ CTRL_ERROR_TIMEOUT, ETIMEDOUT },
	{ CTRL_ERROR_NOT_SUPPORTED, EOPNOTSUPP },
	{ CTRL_ERROR_INVALID_POLICY, EINVAL },
	{ CTRL_ERROR_NO_MEMORY, ENOMEM },
};

int bus_ctrl_error_to_errno(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(ctrl_errors); i++)
		if (name && strcmp(name, ctrl_errors[i].name) == 0)
			return -ctrl_errors[i].error;
	return -EIO;
}

void ctrl_reply_done(struct ctrl_reply *r)
{
	if (!r)
		return;
	for (unsigned int i = 0; i < r->n_fds; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	r->n_fds = 0;
	free(r->buf);
	r->buf = NULL;
}

int ctrl_reply_take_fd(struct ctrl_reply *r, unsigned int i)
{
	int fd;

	if (i >= r->n_fds)
		return -1;
	fd = r->fds[i];
	r->fds[i] = -1;
	return fd;
}

/* --- Control socket I/O ------------------------------------------------------ */

static int bus_ctrl_send(brokerd_bus *bus, const void *data, size_t len, const int *fds, unsigned int n_fds)
{
	return unix_send_fds(bus->ctrl_fd, data, len, fds, n_fds, 0);
}

/* Receives one datagram into a new buffer: > 0 length, 0 EOF, -EAGAIN. */
int bus_ctrl_recv(brokerd_bus *bus, uint8_t **ret_buf, int *fds, unsigned int *n_fds, bool block)
{
	union {
		struct cmsghdr cmsg;
		char buf[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX * 2)];
	} control;
	_cleanup_free_ uint8_t *buf = malloc(CTRL_MSG_MAX);
	struct iovec iov = { .iov_len = CTRL_MSG_MAX };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = &control,
		.msg_controllen = sizeof(control),
	};
	ssize_t n;

	*n_fds = 0;
	if (!buf)
		return -ENOMEM;
	iov.iov_base = buf;
	n = recvmsg(bus->ctrl_fd, &mh, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*n_fds < CTRL_FDS_MAX)
				fds[(*n_fds)++] = fd;
			else
				close(fd);
		}
	}
	if (n == 0)
		return 0;
	bus->ctrl_seq++;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (unsigned int i = 0; i < *n_fds; i++)
			close(fds[i]);
		*n_fds = 0;
		return -EBADMSG;
	}
	*ret_buf = TAKE_PTR(buf);
	return (int)n;
}

/*
 * Whether a datagram that decoding answered with k is a signal this library
 * does not know: a later brokerd's addition, which a client ignores
 * (protocol/README.md, section 5), not garbage.
 */
static bool ctrl_signal_unknown(const uint8_t *buf, size_t len, int k)
{
	return k == -EOPNOTSUPP && len >= CTRL_HEADER_SIZE && buf[1] == CTRL_TYPE_SIGNAL;
}

static void bus_ctrl_queue(brokerd_bus *bus, uint8_t *buf, size_t len, int *fds, unsigned int n_fds)
{
	struct ctrl_queued *q = malloc(sizeof(*q) + len);

	BUG_ON(n_fds > CTRL_FDS_MAX);
	if (!q) {
		for (unsigned int i = 0; i < n_fds; i++)
			close(fds[i]);
		return;
	}
	q->next = NULL;
	q->seq = bus->ctrl_seq;
	q->len = len;
	q->n_fds = n_fds;
	memcpy(q->fds, fds, sizeof(int) * n_fds);
	memcpy(q->data, buf, len);
	*bus->cq_tail = q;
	bus->cq_tail = &q->next;
}

void bus_ctrl_queue_clear(brokerd_bus *bus)
{
	struct ctrl_queued *q;

	while ((q = bus->cq_head)) {
		bus->cq_head = q->next;
		for (unsigned int i = 0; i < q->n_fds; i++)
			close(q->fds[i]);
		free(q);
	}
	bus->cq_tail = &bus->cq_head;
}

void bus_kick(brokerd_bus *bus)
{
	/* make the epoll fd readable so that queued work gets dispatched; our own wait looks at kicked */
	bus->kicked = true;
	if (bus->ring.efd >= 0)
		(void)!eventfd_write(bus->ring.efd, 1);
}

/*
 * The control connection is broken: say so, and leave disconnecting (and
 * failing the calls in flight, and scheduling a reconnect) to the next
 * dispatch, so that a control request never runs handlers of its own.
 */
static int bus_ctrl_fail(brokerd_bus *bus)
{
	bus->ctrl_failed = true;
	bus_kick(bus);
	return -ECONNRESET;
}

static struct ctrl_pending *ctrl_pending_find(brokerd_bus *bus, uint32_t serial, bool unlink)
{
	for (struct ctrl_pending **pp = &bus->ctrl_pending; *pp; pp = &(*pp)->next)
		if ((*pp)->serial == serial) {
			struct ctrl_pending *p = *pp;

			if (unlink)
				*pp = p->next;
			return p;
		}
	return NULL;
}

/* Keeps the name and message of the ERROR in r for the caller, and frees r: the errno. */
static int ctrl_reply_error(brokerd_bus *bus, struct ctrl_reply *r)
{
	struct ctrl_reader rd;
	const char *name = NULL, *text = NULL;

	ctrl_reader_init(&rd, &r->msg);
	if (ctrl_read_string(&rd, &name, NULL) >= 0)
		snprintf(bus->error_name, sizeof(bus->error_name), "%s", name);
	if (ctrl_read_string(&rd, &text, NULL) >= 0)
		snprintf(bus->error_message, sizeof(bus->error_message), "%s", text);
	ctrl_reply_done(r);
	return bus_ctrl_error_to_errno(bus->error_name);
}

/*
 * Waits for the reply with serial (0: none) or, with code, the next broker
 * signal of that code; other signals are queued for the next dispatch.
 */
static int ctrl_wait(brokerd_bus *bus, uint32_t serial, uint16_t code, struct ctrl_reply *ret)
{
	int k;

	for (;;) {
		struct pollfd pfd = { .fd = bus->ctrl_fd, .events = POLLIN };
		int fds[CTRL_FDS_MAX];
		unsigned int n_fds = 0;
		uint8_t *buf = NULL;
		struct ctrl_message m;

		k = poll(&pfd, 1, BUS_CTRL_TIMEOUT_MSEC);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ETIMEDOUT;
		k = bus_ctrl_recv(bus, &buf, fds, &n_fds, false);
		if (k == -EAGAIN || k == -EINTR)
			continue;
		if (k <= 0)
			return bus_ctrl_fail(bus);
		if (ctrl_signal_unknown(buf, (size_t)k, ctrl_message_decode(&m, buf, (size_t)k, n_fds))) {
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			continue;
		}
		if (ctrl_message_decode(&m, buf, (size_t)k, n_fds) < 0) {
			/* a broker that speaks garbage is treated as gone */
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			(void)bus_ctrl_fail(bus);
			return -EPROTO;
		}
		if ((m.hdr.type == CTRL_TYPE_SIGNAL && (!code || m.hdr.code != code)) ||
		    (m.hdr.type != CTRL_TYPE_SIGNAL && m.hdr.serial != serial &&
		     ctrl_pending_find(bus, m.hdr.serial, false))) {
			/* a signal, or the reply to a request with a handler: for the dispatcher */
			bus_ctrl_queue(bus, buf, (size_t)k, fds, n_fds);
			free(buf);
			bus_kick(bus);
			continue;
		}
		if (m.hdr.type != CTRL_TYPE_SIGNAL && (!serial || m.hdr.serial != serial)) {
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			continue;
		}
		ret->buf = buf;
		ret->msg = m;
		memcpy(ret->fds, fds, sizeof(int) * n_fds);
		ret->n_fds = n_fds;
		if (m.hdr.type == CTRL_TYPE_ERROR)
			return ctrl_reply_error(bus, ret);
		return 0;
	}
}

/* Gives w our next serial and sends it: 0 and *ret_serial, or -errno. */
static int ctrl_send_request(brokerd_bus *bus, struct ctrl_writer *w, uint32_t *ret_serial)
{
	const void *data;
	size_t len;
	uint32_t serial;
	int k;

	bus->error_name[0] = bus->error_message[0] = 0;
	if (!bus->connected || bus->ctrl_fd < 0 || bus->ctrl_failed)
		return -ENOTCONN;
	serial = ++bus->ctrl_serial ? bus->ctrl_serial : ++bus->ctrl_serial;
	/* the writer was initialized with serial 0: patch ours in */
	if (w->len >= CTRL_HEADER_SIZE) {
		uint32_t le = htole32(serial);

		memcpy(w->buf + 4, &le, 4);
	}
	k = ctrl_writer_finish(w, &data, &len);
	if (k < 0)
		return k;
	k = bus_ctrl_send(bus, data, len, w->fds, w->n_fds);
	if (k < 0)
		return bus_ctrl_fail(bus);
	bus->counters[BROKERD_COUNTER_CONTROL_REQUESTS]++;
	*ret_serial = serial;
	return 0;
}

int bus_ctrl_call(brokerd_bus *bus, struct ctrl_writer *w, struct ctrl_reply *ret)
{
	uint32_t serial = 0;
	int k;

	if (ret)
		memset(ret, 0, sizeof(*ret));
	k = ctrl_send_request(bus, w, &serial);
	if (k < 0)
		return k;
	if (!ret)
		return 0; /* its reply is dropped when it comes (serial mismatch, or no signal) */
	return ctrl_wait(bus, serial, 0, ret);
}

int bus_ctrl_wait_signal(brokerd_bus *bus, uint16_t code, struct ctrl_reply *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!bus->connected || bus->ctrl_fd < 0 || bus->ctrl_failed)
		return -ENOTCONN;
	return ctrl_wait(bus, 0, code, ret);
}

/* Encodes a request of one of the common shapes (see bus_ctrl_request()). */
static int ctrl_request_init(struct ctrl_writer *w, uint16_t op, const char *name, uint32_t u)
{
	const struct ctrl_op_info *info = ctrl_op_get(op);
	const char *sig = info ? info->request_sig : NULL;
	int k;

	if (!sig || (strcmp(sig, "") && strcmp(sig, "s") && strcmp(sig, "u") && strcmp(sig, "su")) ||
	    (sig[0] == 's' && !name))
		return -EINVAL;
	k = ctrl_writer_init(w, CTRL_TYPE_REQUEST, op, 0);
	if (k < 0)
		return k;
	if (sig[0] == 's')
		ctrl_write_string(w, name);
	if (strchr(sig, 'u'))
		ctrl_write_u32(w, u);
	return 0;
}

int bus_ctrl_request(brokerd_bus *bus, uint16_t op, const char *name, uint32_t u, struct ctrl_reply *ret)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	int k;

	k = ctrl_request_init(&w, op, name, u);
	if (k < 0)
		return k;
	return bus_ctrl_call(bus, &w, ret);
}

int bus_ctrl_request_async(brokerd_bus *bus, uint16_t op, const char *name, uint32_t u,
			   bus_ctrl_handler_t handler, void *userdata)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct ctrl_pending *p;
	int k;

	BUG_ON(!handler);
	k = ctrl_request_init(&w, op, name, u);
	if (k < 0)
		return k;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	k = ctrl_send_request(bus, &w, &p->serial);
	if (k < 0) {
		free(p);
		return k;
	}
	p->handler = handler;
	p->userdata = userdata;
	p->next = bus->ctrl_pending;
	bus->ctrl_pending = p;
	return 0;
}

void bus_ctrl_dispatch_reply(brokerd_bus *bus, const uint8_t *buf, size_t len, const struct ctrl_message *m,
			     int *fds, unsigned int n_fds)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_pending *p;
	int k;

	BUG_ON(n_fds > CTRL_FDS_MAX);
	memcpy(r.fds, fds, sizeof(int) * n_fds);
	r.n_fds = n_fds;
	p = ctrl_pending_find(bus, m->hdr.serial, true);
	if (!p)
		return; /* a reply nobody waits for (a request sent without waiting) */
	/* the reply outlives the datagram it came in: copy it */
	r.buf = malloc(len);
	k = r.buf ? 0 : -ENOMEM;
	if (k >= 0) {
		memcpy(r.buf, buf, len);
		k = ctrl_message_decode(&r.msg, r.buf, len, n_fds);
	}
	if (k >= 0 && m->hdr.type == CTRL_TYPE_ERROR)
		k = ctrl_reply_error(bus, &r);
	p->handler(bus, k < 0 ? NULL : &r, k < 0 ? k : 0, p->userdata);
	free(p);
}

void bus_ctrl_pending_fail(brokerd_bus *bus, int error)
{
	struct ctrl_pending *p;

	/* one at a time: a handler may send new requests */
	while ((p = bus->ctrl_pending)) {
		bus->ctrl_pending = p->next;
		p->handler(bus, NULL, error, p->userdata);
		free(p);
	}
}

void bus_ctrl_drain(brokerd_bus *bus)
{
	while (bus->connected && bus->ctrl_fd >= 0 && !bus->ctrl_failed) {
		int fds[CTRL_FDS_MAX];
		unsigned int n_fds = 0;
		uint8_t *buf = NULL;
		struct ctrl_message m;
		int k;

		k = bus_ctrl_recv(bus, &buf, fds, &n_fds, false);
		if (k == -EAGAIN || k == -EINTR)
			return;
		if (k > 0)
			k = ctrl_signal_unknown(buf, (size_t)k,
						ctrl_message_decode(&m, buf, (size_t)k, n_fds)) ?
				    -EOPNOTSUPP :
				    k;
		if (k == -EOPNOTSUPP) {
			/* a signal of a later brokerd: ignored */
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			continue;
		}
		if (k <= 0 || ctrl_message_decode(&m, buf, (size_t)k, n_fds) < 0) {
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			free(buf);
			(void)bus_ctrl_fail(bus);
			return;
		}
		bus_ctrl_queue(bus, buf, (size_t)k, fds, n_fds);
		free(buf);
		bus_kick(bus);
	}
}
