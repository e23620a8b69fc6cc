/* SPDX-License-Identifier: MIT */
/*
 * bus-taker.c - watching the processes that took our calls. The kernel's
 * receipt names the pid of the process that took a call (bus-call.c); a
 * pidfd opened for it when the receipt is read tells when that process
 * ends, so its calls fail at once (NoReply, "receiver ended") even where
 * brokerd sees no connection end: a process that took calls through a cap
 * it was passed (a pool worker's forked child). One pidfd per process,
 * shared by the calls it took, in an epoll set of its own that sits in the
 * bus's; the most recent idle ones are kept, so that a caller of a pool
 * opens one per worker, not one per call.
 *
 * A pid is not a process: the taker may end and its pid go to another
 * process before its pidfd is opened. The pidfd is opened as the receipt
 * is read, and when a watched process ends, its pid is looked up once
 * more: if a live process has it now, that one may have taken the calls
 * (their receipts name only the pid), so they wait for it instead. A call
 * is never failed while a process with its taker's pid lives (unless no fd
 * was left to look it up with); what is left is a call waiting for its
 * timeout (or that process's end) when the pid space wrapped around
 * between the taker's end and the receipt being read. The receipt tells
 * the pid alone, so there is nothing a start time could be compared with
 * but the moment the receipt was read, microseconds before the pidfd is
 * opened.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/bus-control.h"
#include "client/bus-taker.h"

/* Idle pidfds kept (their processes took calls, none now). */
#define TAKERS_IDLE_MAX 8

/* A pidfd for t's pid (in our pid namespace: receipts name it in the sender's), or -errno. */
static int taker_pidfd(const struct bus_taker *t)
{
	int fd = (int)syscall(SYS_pidfd_open, t->pid, 0);

	return fd < 0 ? -errno : fd;
}

/* t watches the process of pidfd fd (taken, closed on failure): fd into the bus's set for t. */
static int taker_add(brokerd_bus *bus, struct bus_taker *t, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = t };

	if (bus->taker_epfd < 0) {
		struct epoll_event outer = { .events = EPOLLIN };

		bus->taker_epfd = epoll_create1(EPOLL_CLOEXEC);
		if (bus->taker_epfd < 0)
			goto fail;
		outer.data.fd = bus->taker_epfd;
		if (epoll_ctl(bus->epoll_fd, EPOLL_CTL_ADD, bus->taker_epfd, &outer) < 0 ||
		    epoll_ctl(bus->wake_epfd, EPOLL_CTL_ADD, bus->taker_epfd, &outer) < 0) {
			(void)epoll_ctl(bus->epoll_fd, EPOLL_CTL_DEL, bus->taker_epfd, NULL);
			close(bus->taker_epfd);
			bus->taker_epfd = -1;
			goto fail;
		}
	}
	if (epoll_ctl(bus->taker_epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		goto fail;
	t->pidfd = fd;
	return 0;
fail:
	close(fd);
	return -ENOSPC;
}

/*
 * Whether the process of pidfd fd lives (a zombie, not reaped yet, is one
 * that ended: its pidfd is readable); fd is closed if not.
 */
static bool taker_lives(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 0) == 0)
		return true;
	close(fd);
	return false;
}

/* Whether a live process has t's pid now (t watches it from here on). */
static bool taker_reopen(brokerd_bus *bus, struct bus_taker *t)
{
	int fd = taker_pidfd(t);

	return fd >= 0 && taker_lives(fd) && taker_add(bus, t, fd) >= 0;
}

static void taker_close(brokerd_bus *bus, struct bus_taker *t)
{
	if (t->pidfd < 0)
		return;
	/*
	 * Out of the set first: a child forked since shares the pidfd's file,
	 * which then outlives our close(), and with it its entry in the set.
	 */
	(void)epoll_ctl(bus->taker_epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
	close(t->pidfd);
	t->pidfd = -1;
}

static void taker_free(brokerd_bus *bus, struct bus_taker *t)
{
	struct bus_taker **p;

	for (p = &bus->takers; *p != t; p = &(*p)->next)
		;
	*p = t->next;
	taker_close(bus, t);
	free(t);
}

/* t's process ended: its calls are failed, or wait for the live process that has its pid now. */
static void taker_ended(brokerd_bus *bus, struct bus_taker *t)
{
	bool marked = false;

	taker_close(bus, t);
	if (!t->n_calls) {
		bus->n_takers_idle--;
		taker_free(bus, t);
		return;
	}
	if (taker_reopen(bus, t))
		return;
	t->ended = true;
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_CALL && s->watch == t) {
			s->deadline = 1; /* looked at by this pass's deadline check */
			marked = true;
		}
	if (marked)
		bus_kick(bus);
}

void bus_taker_watch(brokerd_bus *bus, struct brokerd_slot *s)
{
	struct bus_taker *t;
	int fd;

	BUG_ON(s->watch || s->taker <= 0);
	for (t = bus->takers; t; t = t->next)
		if (t->pid == s->taker && !t->ended)
			break;
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return;
		t->pid = s->taker;
		t->pidfd = -1;
		fd = taker_pidfd(t);
		/* no process has the pid (or none leads a thread group with it), or it ended: gone */
		if (fd == -ESRCH || fd == -EINVAL || (fd >= 0 && !taker_lives(fd)))
			t->ended = true;
		else if (fd < 0 || taker_add(bus, t, fd) < 0) {
			free(t);
			return;
		}
		t->next = bus->takers;
		bus->takers = t;
	} else if (!t->n_calls)
		bus->n_takers_idle--;
	t->n_calls++;
	s->watch = t;
	if (t->ended) {
		s->deadline = 1;
		bus_kick(bus);
	}
}

void bus_taker_release(brokerd_bus *bus, struct brokerd_slot *s)
{
	struct bus_taker *t = TAKE_PTR(s->watch), *oldest = NULL;

	if (!t || --t->n_calls)
		return;
	if (t->ended) {
		taker_free(bus, t);
		return;
	}
	if (++bus->n_takers_idle <= TAKERS_IDLE_MAX)
		return;
	/* new ones go first in the list: the last idle one is the oldest */
	for (t = bus->takers; t; t = t->next)
		if (!t->n_calls)
			oldest = t;
	bus->n_takers_idle--;
	taker_free(bus, oldest);
}

void bus_takers_check(brokerd_bus *bus)
{
	struct epoll_event ev[8];
	int k;

	if (!bus->takers_ready)
		return;
	bus->takers_ready = false;
	if (bus->taker_epfd < 0 || !bus->takers)
		return;
	do {
		k = epoll_wait(bus->taker_epfd, ev, ELEMENTSOF(ev), 0);
		for (int i = 0; i < k; i++)
			taker_ended(bus, ev[i].data.ptr);
	} while (k == (int)ELEMENTSOF(ev));
}

void bus_takers_free(brokerd_bus *bus)
{
	while (bus->takers)
		taker_free(bus, bus->takers);
	bus->n_takers_idle = 0;
	if (bus->taker_epfd >= 0)
		close(bus->taker_epfd);
	bus->taker_epfd = -1;
}
