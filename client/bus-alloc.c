/* SPDX-License-Identifier: MIT */
/*
 * bus-alloc.c - a brokerd_bus as an object: its memory, its io_uring, its
 * epoll fd (holding the ring's eventfd and a timerfd; the control socket
 * joins it when connected) and its reference count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "client/bus-alloc.h"
#include "client/bus-control.h"
#include "client/bus-taker.h"

brokerd_bus *bus_ref(brokerd_bus *bus)
{
	if (bus)
		bus->n_ref++;
	return bus;
}

static void bus_free(brokerd_bus *bus)
{
	ring_deinit(&bus->ring);
	bus_takers_free(bus);
	if (bus->slot_spare) {
		free(bus->slot_spare->name);
		free(bus->slot_spare->member);
		free(bus->slot_spare);
	}
	free(bus->msg_cache);
	free(bus->msg_block);
	free(bus->body_cache);
	free(bus->send_buf);
	if (bus->batch)
		free(bus->batch->buf);
	free(bus->batch);
	bus_ctrl_queue_clear(bus);
	if (bus->epoll_fd >= 0)
		close(bus->epoll_fd);
	if (bus->wake_epfd >= 0)
		close(bus->wake_epfd);
	if (bus->timer_fd >= 0)
		close(bus->timer_fd);
	free(bus->path);
	free(bus);
}

brokerd_bus *bus_unref(brokerd_bus *bus)
{
	if (bus && --bus->n_ref == 0)
		bus_free(bus);
	return NULL;
}

int bus_alloc(brokerd_bus **ret, const char *path)
{
	struct epoll_event ev = { .events = EPOLLIN };
	brokerd_bus *bus;
	int k;

	bus = calloc(1, sizeof(*bus));
	if (!bus)
		return -ENOMEM;
	bus->n_ref = 1;
	bus->ctrl_fd = bus->epoll_fd = bus->timer_fd = bus->taker_epfd = bus->wake_epfd = -1;
	bus->ring.efd = -1;
	bus->reconnect = true;
	bus->cq_tail = &bus->cq_head;
	bus->path = strdup(path);
	if (!bus->path) {
		k = -ENOMEM;
		goto fail;
	}
	k = ring_init(&bus->ring, 64);
	if (k < 0)
		goto fail;
	bus->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	bus->wake_epfd = epoll_create1(EPOLL_CLOEXEC);
	bus->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (bus->epoll_fd < 0 || bus->wake_epfd < 0 || bus->timer_fd < 0) {
		k = -errno;
		goto fail;
	}
	/*
	 * Edge-triggered: every completion the kernel posts (and every
	 * bus_kick()) is an edge of its own, so brokerd_bus_wait() wakes for
	 * each and the passes of brokerd_bus_run() never read the eventfd; a
	 * pass after an outside event loop's poll does (ring_ack()), or the
	 * count would keep the bus fd readable.
	 */
	ev.events = EPOLLIN | EPOLLET;
	ev.data.fd = bus->ring.efd;
	if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, bus->ring.efd, &ev) < 0) {
		k = -errno;
		goto fail;
	}
	ev.events = EPOLLIN;
	ev.data.fd = bus->timer_fd;
	if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, bus->timer_fd, &ev) < 0 ||
	    epoll_ctl(bus->wake_epfd, EPOLL_CTL_ADD, bus->timer_fd, &ev) < 0) {
		k = -errno;
		goto fail;
	}
	bus->ring.wake_fd = bus->wake_epfd;
	*ret = bus;
	return 0;
fail:
	bus_free(bus);
	return k;
}
