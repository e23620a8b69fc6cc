/* SPDX-License-Identifier: MIT */
/*
 * event.c - attaching a bus to an sd_event loop: the bus's one epoll fd
 * becomes an I/O source whose callback runs brokerd_bus_process().
 */
#include <errno.h>
#include <sys/epoll.h>
#include <systemd/sd-event.h>

#include "client/bus-internal.h"

static int bus_io_handler(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	brokerd_bus *bus = userdata;

	/* errors are the application's to see through the state handler; a
	 * failing callback would disable the source for good */
	(void)brokerd_bus_process(bus);
	return 0;
}

_public_ int brokerd_bus_attach_event(brokerd_bus *bus, struct sd_event *event, int64_t priority)
{
	sd_event_source *src = NULL;
	int k;

	if (!bus || bus->closed || !event || priority < INT32_MIN || priority > INT32_MAX)
		return -EINVAL;
	if (bus->event_source)
		return -EBUSY;
	k = sd_event_add_io(event, &src, bus->epoll_fd, EPOLLIN, bus_io_handler, bus);
	if (k < 0)
		return k;
	k = sd_event_source_set_priority(src, priority);
	if (k < 0) {
		sd_event_source_unref(src);
		return k;
	}
	(void)sd_event_source_set_description(src, "brokerd-bus");
	bus->event_source = src;
	bus->event = sd_event_ref(event);
	/* anything already queued must not wait for the next wakeup */
	(void)brokerd_bus_process(bus);
	return 0;
}

_public_ int brokerd_bus_detach_event(brokerd_bus *bus)
{
	if (!bus)
		return -EINVAL;
	if (!bus->event_source)
		return 0;
	sd_event_source_disable_unref(bus->event_source);
	bus->event_source = NULL;
	bus->event = sd_event_unref(bus->event);
	return 0;
}
