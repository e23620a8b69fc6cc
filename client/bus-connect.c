/* SPDX-License-Identifier: MIT */
/*
 * bus-connect.c - connecting to brokerd (socket, HELLO, our inbox) and
 * restoring names and subscriptions after a restart; disconnecting, which
 * drops every chan of the old instance and fails the calls in flight; the
 * connection's state as the application sees it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "client/bus-call.h"
#include "client/bus-chan.h"
#include "client/bus-connect.h"
#include "client/bus-control.h"
#include "client/bus-inbox.h"
#include "client/bus-match.h"
#include "client/bus-name.h"
#include "util/socket.h"

void bus_set_state(brokerd_bus *bus, int state)
{
	if (bus->state_handler)
		bus->state_handler(bus, state, bus->state_userdata);
}

void bus_disconnect(brokerd_bus *bus, bool schedule_reconnect)
{
	bool was = bus->connected;
	struct brokerd_slot *s, *next;

	if (bus->ctrl_fd >= 0) {
		(void)epoll_ctl(bus->epoll_fd, EPOLL_CTL_DEL, bus->ctrl_fd, NULL);
		(void)epoll_ctl(bus->wake_epfd, EPOLL_CTL_DEL, bus->ctrl_fd, NULL);
		close(bus->ctrl_fd);
	}
	bus->ctrl_fd = -1;
	bus->connected = false;
	bus->ctrl_failed = false;
	chan_close(&bus->ring, bus->inbox);
	bus->inbox = NULL;
	peer_inbox_clear(bus);
	bus_retired_close(bus, NULL, NULL);
	for (struct bname *b = bus->names; b; b = b->next)
		bname_close_chans(bus, b);
	bus_monitors_clear(bus);
	bus->unique_name[0] = 0;
	bus->id = 0;
	/* requests still waiting for replies get none (calls waiting for a chan fail) */
	bus_ctrl_pending_fail(bus, -ECONNRESET);
	if (schedule_reconnect && bus->reconnect && !bus->closed) {
		bus->backoff_msec = bus->backoff_msec ? bus->backoff_msec : BUS_RECONNECT_MIN_MSEC;
		bus->reconnect_at = now_usec() + bus->backoff_msec * 1000ULL;
		bus_kick(bus);
	}
	if (!was)
		return;
	/* nobody will answer the calls in flight */
	for (s = bus->slots; s; s = next) {
		next = s->next;
		if (s->type == SLOT_CALL && s->serial) {
			bus_call_complete(s, NULL, -ECONNRESET);
			next = bus->slots; /* the handler may have freed any slot */
		}
	}
	bus_set_state(bus, BROKERD_STATE_DISCONNECTED);
}

static int bus_hello(brokerd_bus *bus)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	const char *unique = NULL;
	uint64_t id = 0;
	uint32_t features = 0, inbox_size = 0;
	int k;

	/* our inbox's size too (SIZES); a brokerd older than the flag refuses it: asked again without */
	k = bus_ctrl_request(bus, CTRL_OP_HELLO, NULL, CTRL_HELLO_NAME_EVENTS | CTRL_HELLO_SIZES, &r);
	if (k == -EINVAL) {
		ctrl_reply_done(&r);
		k = bus_ctrl_request(bus, CTRL_OP_HELLO, NULL, CTRL_HELLO_NAME_EVENTS, &r);
	}
	if (k < 0)
		return k;
	ctrl_reader_init(&rd, &r.msg);
	if (ctrl_read_string(&rd, &unique, NULL) < 0 || ctrl_read_u64(&rd, &id) < 0 ||
	    ctrl_read_u32(&rd, &features) < 0 ||
	    (!ctrl_reader_at_end(&rd) && ctrl_read_u32(&rd, &inbox_size) < 0))
		return -EPROTO;
	snprintf(bus->unique_name, sizeof(bus->unique_name), "%s", unique);
	bus->id = id;
	bus->features = features;
	k = 0;
	if (features & CTRL_FEATURE_CHANNELS) {
		k = bus_chan_attach(bus, ctrl_reply_take_fd(&r, 0), IOIPC_SUB_RECV, CHAN_INBOX, NULL,
				    &bus->inbox);
		/* the largest message that reaches us inline (0: not told, 8192) */
		if (k >= 0)
			bus->inbox->msg_max = inbox_size;
	}
	return k;
}

/* Whether a control request failed because the connection did (bus_ctrl_call). */
static bool connection_broke(int k)
{
	return k == -ECONNRESET || k == -EPROTO || k == -ETIMEDOUT || k == -ENOTCONN;
}

/* (Re)connects and restores names and subscriptions. */
int bus_connect(brokerd_bus *bus)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd, k, lost = 0;

	BUG_ON(bus->connected || bus->ctrl_fd >= 0); /* or the old socket would leak */
	fd = unix_connect(bus->path, SOCK_SEQPACKET);
	if (fd < 0)
		return fd;
	ev.data.fd = fd;
	if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		k = -errno;
		close(fd);
		return k;
	}
	if (epoll_ctl(bus->wake_epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		k = -errno;
		(void)epoll_ctl(bus->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
		close(fd);
		return k;
	}
	bus->ctrl_fd = fd;
	bus->connected = true;
	k = bus_hello(bus);
	if (k < 0)
		goto fail;
	/*
	 * A name or subscription brokerd refuses now (another owner, a
	 * reloaded policy, a quota) is a loss to report, not a reason to fail
	 * the whole reconnect: that retried forever with the bus
	 * disconnected. Only a connection that broke meanwhile fails it.
	 */
	for (struct bname *b = bus->names; b; b = b->next) {
		if (b->requested) {
			k = bname_request(bus, b, b->req_flags);
			if (connection_broke(k))
				goto fail;
			if (k != BROKERD_NAME_PRIMARY_OWNER && k != BROKERD_NAME_ALREADY_OWNER)
				lost++; /* refused, or queued behind another owner */
			if (k < 0 && k != -EEXIST)
				b->requested = false;
		}
		if (b->n_subs) {
			k = bname_subscribe(bus, b);
			if (connection_broke(k))
				goto fail;
			if (k < 0)
				lost++;
		}
	}
	/* match rules without a sender: the names brokerd hands over */
	k = bus_match_rewatch(bus);
	if (connection_broke(k))
		goto fail;
	if (k < 0)
		lost++;
	bus->backoff_msec = 0;
	bus->reconnect_at = 0;
	return lost;
fail:
	bus->connected = false; /* silently: the caller decides */
	bus_disconnect(bus, false);
	return k;
}

/* --- Public API ----------------------------------------------------------------- */

_public_ int brokerd_bus_get_unique_name(brokerd_bus *bus, const char **ret)
{
	if (!bus || !ret)
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	*ret = bus->unique_name;
	return 0;
}

_public_ int brokerd_bus_is_connected(brokerd_bus *bus)
{
	if (!bus)
		return -EINVAL;
	return bus->connected;
}

_public_ int brokerd_bus_set_reconnect(brokerd_bus *bus, int enable)
{
	if (!bus || bus->closed)
		return -EINVAL;
	bus->reconnect = !!enable;
	if (!enable)
		bus->reconnect_at = 0;
	return 0;
}

_public_ int brokerd_bus_set_state_handler(brokerd_bus *bus, brokerd_state_handler_t handler, void *userdata)
{
	if (!bus || bus->closed)
		return -EINVAL;
	bus->state_handler = handler;
	bus->state_userdata = userdata;
	return 0;
}
