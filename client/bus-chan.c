/* SPDX-License-Identifier: MIT */
/*
 * bus-chan.c - the chans of a bus: capability fds from brokerd attached to
 * its ring (and a first receive armed), messages encoded and sent, call
 * chans retired while they drain, monitor chans. What each chan is for is
 * its kind and owner (bus-internal.h); this file does not look inside.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/bus-chan.h"
#include "protocol/dbus-marshal.h"

int bus_chan_attach(brokerd_bus *bus, int fd, unsigned int rights, unsigned int kind, void *owner,
		    struct chan **ret)
{
	struct chan *c;
	int k;

	if (fd < 0)
		return -EPROTO;
	k = chan_attach(&bus->ring, fd, rights,
			(rights & (IOIPC_SUB_RECV | IOIPC_SUB_MONITOR)) ? CHMSG_MAX : 0, kind, owner, &c);
	close(fd);
	if (k < 0)
		return k;
	if (c->buf) {
		k = chan_arm(&bus->ring, c);
		if (k < 0) {
			chan_close(&bus->ring, c);
			return k;
		}
	}
	*ret = c;
	return 0;
}

int bus_chan_send(brokerd_bus *bus, struct chan *c, const struct chmsg *m)
{
	uint8_t *buf;
	int k;

	buf = malloc(CHMSG_MAX);
	if (!buf)
		return -ENOMEM;
	k = chmsg_encode(m, buf, CHMSG_MAX);
	if (k >= 0)
		k = chan_send(&bus->ring, c, buf, (size_t)k);
	free(buf);
	return k < 0 ? k : 0;
}

int bus_bytes_body(struct chmsg *m, const void *bytes, size_t size, void **ret_data)
{
	_cleanup_(dbus_writer_deinit) struct dbus_writer w = { 0 };
	size_t len = 0;
	int k;

	*ret_data = NULL;
	if ((size && !bytes) || size > CHMSG_MAX)
		return -EINVAL;
	if (size == 0)
		return 0; /* no body at all, as a D-Bus method without arguments */
	k = dbus_writer_init(&w, "ay");
	if (k >= 0)
		k = dbus_writer_append_array(&w, 'y', bytes, size);
	if (k >= 0)
		k = dbus_writer_finish(&w, ret_data, &len);
	if (k < 0)
		return k == -ENOMEM ? -ENOMEM : -EINVAL;
	m->signature = "ay";
	m->body = *ret_data;
	m->body_len = (uint32_t)len;
	return 0;
}

uint32_t bus_next_serial(brokerd_bus *bus)
{
	if (++bus->msg_serial == 0)
		bus->msg_serial = 1;
	return bus->msg_serial;
}

/* --- Retired call chans ------------------------------------------------------ */

/* Keeps c receiving until it is drained (see struct retired_chan). */
void bus_chan_retire(brokerd_bus *bus, struct chan *c)
{
	struct retired_chan *r;

	if (!c)
		return;
	r = calloc(1, sizeof(*r));
	if (!r) {
		chan_close(&bus->ring, c);
		return;
	}
	r->chan = c;
	r->next = bus->retired;
	bus->retired = r;
}

bool bus_chan_is_retired(brokerd_bus *bus, struct chan *c)
{
	for (struct retired_chan *r = bus->retired; r; r = r->next)
		if (r->chan == c)
			return true;
	return false;
}

/* Closes retired channels: c only, those owned by owner, or all (both NULL). */
void bus_retired_close(brokerd_bus *bus, struct chan *c, void *owner)
{
	for (struct retired_chan **pp = &bus->retired; *pp;) {
		struct retired_chan *r = *pp;

		if ((c && r->chan != c) || (owner && r->chan->owner != owner)) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		chan_close(&bus->ring, r->chan);
		free(r);
	}
}

/* --- Monitor chans ------------------------------------------------------------ */

int bus_monitor_add(brokerd_bus *bus, const char *name, unsigned int kind, int fd)
{
	struct monitor_chan *mc = calloc(1, sizeof(*mc));
	int k;

	if (!mc || !(mc->name = strdup(name))) {
		free(mc);
		close(fd);
		return -ENOMEM;
	}
	mc->kind = kind;
	k = bus_chan_attach(bus, fd, IOIPC_SUB_MONITOR, CHAN_MONITOR, mc, &mc->chan);
	if (k < 0) {
		free(mc->name);
		free(mc);
		return k;
	}
	mc->next = bus->monitors;
	bus->monitors = mc;
	return 0;
}

void bus_monitors_clear(brokerd_bus *bus)
{
	struct monitor_chan *m;

	while ((m = bus->monitors)) {
		bus->monitors = m->next;
		chan_close(&bus->ring, m->chan);
		free(m->name);
		free(m);
	}
}
