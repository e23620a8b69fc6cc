/* SPDX-License-Identifier: MIT */
/*
 * bus-loop.c - running a bus: one dispatch pass (queued broker signals, the
 * control socket, ready chans, deadlines and the reconnect timer), the
 * epoll fd for event loops, waiting, brokerd_bus_run(), and the synchronous
 * brokerd_bus_call(), which runs passes until its reply is in.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "client/bus-alloc.h"
#include "client/bus-call.h"
#include "client/bus-chan.h"
#include "client/bus-connect.h"
#include "client/bus-control.h"
#include "client/bus-dispatch.h"
#include "client/bus-name.h"
#include "client/bus-taker.h"

static void bus_update_timer(brokerd_bus *bus)
{
	struct itimerspec its = { 0 };
	uint64_t next = UINT64_MAX;

	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->serial && s->deadline < next)
			next = s->deadline;
	if (bus->reconnect_at && bus->reconnect_at < next)
		next = bus->reconnect_at;
	if (next == 0)
		next = 1;
	/*
	 * Every dispatch pass and every wait come here: a system call only when
	 * the deadline changed, so a subscriber draining signals pays none.
	 */
	if (next == bus->timer_next)
		return;
	/*
	 * Nor when it only moved later while the armed one is still ahead (a
	 * synchronous call after another, each with its deadline a little
	 * later, or none left): the armed one fires, the pass finds nothing
	 * due and arms the right one then, one system call per deadline
	 * period instead of two per call.
	 */
	if (next > bus->timer_next && bus->timer_next > now_usec())
		return;
	bus->timer_next = next;
	if (next != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(next / 1000000ULL);
		its.it_value.tv_nsec = (long)(next % 1000000ULL) * 1000L;
	}
	(void)timerfd_settime(bus->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int bus_process_timeouts(brokerd_bus *bus)
{
	uint64_t now = now_usec(), v;
	struct brokerd_slot *s, *next;
	int n = 0, k;

	/* readable only once the armed deadline passed (re-arming clears it) */
	if (bus->timer_next != UINT64_MAX && bus->timer_next <= now)
		(void)!read(bus->timer_fd, &v, sizeof(v));
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type == SLOT_CALL && s->serial && s->deadline <= now) {
			k = bus_call_due(bus, s);
			if (k == 0)
				continue; /* waits on */
			if (k == 2)
				bus_dispatch_receiver_ended(bus, s);
			n++;
			/* the handler may have freed any slot: start over */
			next = bus->slots;
		}
	}
	if (!bus->connected && bus->reconnect && bus->reconnect_at && bus->reconnect_at <= now &&
	    !bus->closed) {
		int lost;

		n++;
		lost = bus_connect(bus);
		bus->ctrl_idle = false; /* a new socket */
		if (lost >= 0) {
			bus_set_state(bus, BROKERD_STATE_CONNECTED);
			if (lost > 0 && bus->connected)
				bus_set_state(bus, BROKERD_STATE_NOT_RESTORED);
		} else {
			bus->backoff_msec = bus->backoff_msec * 2 > BUS_RECONNECT_MAX_MSEC ?
						    BUS_RECONNECT_MAX_MSEC :
						    bus->backoff_msec * 2;
			bus->reconnect_at = now_usec() + bus->backoff_msec * 1000ULL;
		}
	}
	return n;
}

static int bus_process_internal(brokerd_bus *bus)
{
	struct ctrl_queued *q;
	struct chan *c;
	int n = 0, k;

	if (bus->closed)
		return -ENOTCONN;
	/*
	 * After our own wait, what epoll reported is known: the eventfd needs
	 * no read (edge-triggered), the control socket one only if it was
	 * reported. Otherwise (an outside loop polled the bus fd) read both.
	 */
	if (!bus->waited) {
		ring_ack(&bus->ring);
		bus->ctrl_idle = false;
		bus->takers_ready = true;
	}
	bus->waited = false;
	bus->kicked = false;
	bus_takers_check(bus); /* before the replies they sent are reaped */
	(void)ring_reap(&bus->ring);

	/* broker signals queued during control requests */
	while ((q = bus->cq_head)) {
		bus->cq_head = q->next;
		if (!bus->cq_head)
			bus->cq_tail = &bus->cq_head;
		n += bus_dispatch_ctrl(bus, q->data, q->len, q->fds, q->n_fds, q->seq);
		free(q);
	}
	/* the control socket */
	while (bus->connected && (!bus->ctrl_idle || bus->ctrl_failed)) {
		int fds[CTRL_FDS_MAX];
		unsigned int n_fds = 0;
		uint8_t *buf = NULL;

		if (bus->ctrl_failed) {
			/* a control request (perhaps a handler's, just now) found it broken */
			bus_disconnect(bus, true);
			n++;
			break;
		}
		k = bus_ctrl_recv(bus, &buf, fds, &n_fds, false);
		if (k == -EAGAIN)
			bus->ctrl_idle = true; /* until epoll reports it again */
		if (k == -EAGAIN || k == -EINTR)
			break;
		if (k <= 0 && k != -EBADMSG) {
			for (unsigned int i = 0; i < n_fds; i++)
				close(fds[i]);
			bus_disconnect(bus, true);
			n++;
			break;
		}
		if (k > 0)
			n += bus_dispatch_ctrl(bus, buf, (size_t)k, fds, n_fds, bus->ctrl_seq);
		free(buf);
	}
	/* channels: inside a synchronous call only the inbox, for the reply; a
	 * budget per call so that a flood cannot starve the caller's loop */
	for (unsigned int budget = 64; budget > 0; budget--) {
		c = bus->sync_depth ? ring_pop_ready_kind(&bus->ring, CHAN_INBOX) :
				      ring_pop_ready(&bus->ring);
		if (!c)
			break;
		bus_dispatch_chan(bus, c);
		n++;
		if (bus->closed)
			return n;
		(void)ring_reap(&bus->ring);
		if (budget == 1 && bus->ring.ready_head)
			bus_kick(bus); /* come back for the rest */
	}
	n += bus_process_timeouts(bus);
	/* sends of a batch this pass's reaps completed, or one whose end did not get to tell */
	if (!bus->closed)
		bus_emit_lost_notify(bus);
	if (!bus->closed)
		bus_update_timer(bus);
	return n;
}

/* Whether work waits in memory, which the bus fd does not signal: ready chans, queued signals, completions. */
static bool bus_pending(brokerd_bus *bus)
{
	return bus->ring.ready_head || bus->cq_head || bus->ctrl_failed ||
	       (bus->ring.initialized && io_uring_cq_ready(&bus->ring.uring));
}

/* --- Public API ----------------------------------------------------------------- */

_public_ int brokerd_bus_get_fd(brokerd_bus *bus)
{
	if (!bus || bus->closed)
		return -EINVAL;
	return bus->epoll_fd;
}

_public_ int brokerd_bus_process(brokerd_bus *bus)
{
	int k;

	if (!bus || bus->closed)
		return -EINVAL;
	bus_ref(bus);
	k = bus_process_internal(bus);
	/* an outside loop waits next, not brokerd_bus_wait(): what the pass queued goes in now */
	if (!bus->closed)
		(void)ring_flush(&bus->ring);
	bus_unref(bus);
	return k;
}

/*
 * Waits in the ring for up to usec (0: a look, without sleeping), submitting
 * what is queued (a call chan's receive, re-armed after its handler) in the
 * same io_uring_enter, and records what it saw for the next pass (see
 * brokerd_bus.waited): the ring polls the wake set (control socket, timer,
 * takers), so a completed poll says one of them has something. The one
 * system call of a wake-up: the task_work that posts a receive's
 * completion runs inside the ring's wait, where it used to stop an
 * epoll_wait() with EINTR and cost a second look. Returns 1 if there is
 * something to dispatch, 0 if not (timed out, or a signal), or -errno.
 */
static int bus_ring_wait(brokerd_bus *bus, uint64_t usec)
{
	int k;

	k = ring_wait(&bus->ring, usec);
	if (k < 0)
		return k;
	k = io_uring_cq_ready(&bus->ring.uring) > 0;
	if (bus->ring.woken) {
		bus->ring.woken = false;
		bus->ctrl_idle = false;
		bus->takers_ready = true;
		k = 1;
	}
	bus->waited = true;
	return k;
}

_public_ int brokerd_bus_wait(brokerd_bus *bus, uint64_t timeout_usec)
{
	int k;

	if (!bus || bus->closed)
		return -EINVAL;
	/* inside a synchronous call only the inbox counts: other ready
	 * channels wait for the next dispatch */
	if (bus->cq_head || bus->ctrl_failed || bus->kicked ||
	    (bus->sync_depth ? ring_has_ready_kind(&bus->ring, CHAN_INBOX) : bus->ring.ready_head != NULL)) {
		/* no sleep, but a look at the wake set, which the next pass trusts */
		k = bus_ring_wait(bus, 0);
		return k < 0 ? k : 1;
	}
	/* the timer in the wake set covers call deadlines and reconnects */
	bus_update_timer(bus);
	if (bus->spin_usec && timeout_usec && ring_spin(&bus->ring, bus->spin_usec)) {
		k = bus_ring_wait(bus, 0);
		return k < 0 ? k : 1;
	}
	return bus_ring_wait(bus, timeout_usec);
}

_public_ int brokerd_bus_set_spin(brokerd_bus *bus, uint64_t usec)
{
	if (!bus || bus->closed)
		return -EINVAL;
	if (usec > 1000000)
		return -ERANGE;
	bus->spin_usec = usec;
	return 0;
}

_public_ int brokerd_bus_exit(brokerd_bus *bus, int code)
{
	if (!bus || bus->closed)
		return -EINVAL;
	bus->exit = true;
	bus->exit_code = code;
	return 0;
}

_public_ int brokerd_bus_run(brokerd_bus *bus)
{
	int k = 0;

	if (!bus || bus->closed)
		return -EINVAL;
	bus_ref(bus);
	bus->exit = false;
	for (struct bname *b = bus->names; b; b = b->next)
		if (b->call_recv)
			(void)chan_arm(&bus->ring, b->call_recv); /* stopped by an earlier exit */
	while (!bus->exit && !bus->closed) {
		k = bus_process_internal(bus);
		if (k < 0)
			break;
		if (bus->exit || bus->closed)
			break;
		if (k == 0 && !bus->connected && !bus->reconnect) {
			k = -ENOTCONN;
			break;
		}
		/*
		 * Wait after any pass, not only after an idle one: with nothing
		 * ready in memory, what may still be pending (a completion, the
		 * control socket, the timer) makes the bus fd readable, so the
		 * wait returns at once, and an idle pass is saved on every
		 * wake-up. With work in memory, a look without sleeping: it
		 * tells the next pass whether the control socket has anything,
		 * so a flood of signals costs one system call a pass.
		 */
		k = brokerd_bus_wait(bus, k == 0 || !bus_pending(bus) ? UINT64_MAX : 0);
		if (k < 0)
			break;
	}
	if (bus->exit)
		k = bus->exit_code;
	bus_unref(bus);
	return k;
}

struct sync_call {
	bool done;
	int error;
	brokerd_msg *reply;
};

static int sync_call_handler(brokerd_msg *msg, int error, void *userdata)
{
	struct sync_call *c = userdata;

	c->done = true;
	c->error = error;
	c->reply = brokerd_msg_ref(msg);
	return 0;
}

/* Runs the loop until the call of slot s (sent with sync_call_handler and c) is answered. */
static int sync_call_wait(brokerd_bus *bus, struct brokerd_slot *s, struct sync_call *c,
			  brokerd_msg **ret_reply)
{
	int k = 0;

	bus_ref(bus);
	bus->sync_depth++;
	/*
	 * Wait first, then dispatch: a pass right after the send, with no wait
	 * before it, would know nothing of the control socket and the eventfd
	 * and read both (two system calls per call); the wait tells it what
	 * there is, and returns at once if anything is (a completion, a kick,
	 * the control socket, the timer).
	 */
	while (!c->done) {
		(void)brokerd_bus_wait(bus, bus_pending(bus) ? 0 : UINT64_MAX);
		k = bus_process_internal(bus);
		if (k < 0)
			break;
	}
	BUG_ON(bus->sync_depth <= 0);
	bus->sync_depth--;
	/* what we skipped while waiting still needs dispatching */
	if (bus->ring.ready_head || bus->cq_head)
		bus_kick(bus);
	brokerd_slot_free(s);
	bus_unref(bus);
	if (!c->done)
		return k < 0 ? k : -EIO;
	if (ret_reply)
		*ret_reply = c->reply;
	else
		brokerd_msg_unref(c->reply);
	return c->error;
}

_public_ int brokerd_bus_call(brokerd_bus *bus, const char *name, const char *member, const void *body,
			      size_t size, uint64_t timeout_usec, brokerd_msg **ret_reply)
{
	struct chmsg m = { 0 };
	_cleanup_free_ void *data = NULL;
	int k;

	k = bus_bytes_body(&m, body, size, &data);
	if (k < 0)
		return k;
	return brokerd_bus_call_method(bus, name, "/", NULL, member, m.signature, m.body, m.body_len,
				       timeout_usec, ret_reply);
}

_public_ int brokerd_bus_call_method(brokerd_bus *bus, const char *name, const char *path,
				     const char *interface, const char *member, const char *signature,
				     const void *body, size_t size, uint64_t timeout_usec,
				     brokerd_msg **ret_reply)
{
	struct sync_call c = { 0 };
	struct brokerd_slot *s = NULL;
	int k;

	if (!bus || bus->closed)
		return -EINVAL;
	bus->sync_opening = true;
	k = brokerd_bus_call_method_async(bus, &s, name, path, interface, member, signature, body, size,
					  timeout_usec, sync_call_handler, &c);
	bus->sync_opening = false;
	if (k < 0)
		return k;
	return sync_call_wait(bus, s, &c, ret_reply);
}
