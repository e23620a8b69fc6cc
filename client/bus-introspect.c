/* SPDX-License-Identifier: MIT */
/*
 * bus-introspect.c - what only brokerctl asks of a bus: paged listings of
 * names and peers, and monitoring. Built into brokerctl, not the shared
 * library: nothing exported uses it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-control.h"
#include "client/bus-introspect.h"
#include "client/bus-slot.h"
#include "util/array.h"

int bus_list(brokerd_bus *bus, uint16_t op, uint32_t flags, uint32_t page_size, bus_list_page_t page,
	     void *userdata)
{
	char cursor[CTRL_CURSOR_MAX + 1] = "";
	uint16_t old_op = op == CTRL_OP_LIST_NAMES_PAGE ? CTRL_OP_LIST_NAMES : CTRL_OP_LIST_PEERS;
	bool paged = true;
	int k;

	if (!bus || bus->closed || !page || (op != CTRL_OP_LIST_NAMES_PAGE && op != CTRL_OP_LIST_PEERS_PAGE))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	for (bool first = true;; first = false) {
		struct ctrl_writer w;
		_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
		struct ctrl_reader rd;
		const char *next = "";
		uint32_t n = 0;

		k = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, paged ? op : old_op, 0);
		if (k < 0)
			return k;
		ctrl_write_u32(&w, flags);
		if (paged) {
			ctrl_write_u32(&w, page_size);
			ctrl_write_string(&w, cursor);
		}
		k = bus_ctrl_call(bus, &w, &r);
		ctrl_writer_deinit(&w);
		if (k < 0 && paged && first && strcmp(bus->error_name, CTRL_ERROR_UNKNOWN_OP) == 0) {
			paged = false; /* a brokerd from before paging: one reply of at most 64 KiB */
			continue;
		}
		if (k < 0)
			return k;
		ctrl_reader_init(&rd, &r.msg);
		k = ctrl_read_array(&rd, &n);
		if (k >= 0)
			k = page(&rd, n, userdata);
		if (k >= 0 && paged)
			k = ctrl_read_string(&rd, &next, NULL);
		/* a page that does not move on would make us loop forever */
		if (k >= 0 && *next &&
		    (n == 0 || strlen(next) > CTRL_CURSOR_MAX || strcmp(next, cursor) == 0))
			k = -EPROTO;
		if (k >= 0)
			snprintf(cursor, sizeof(cursor), "%s", next);
		if (k < 0 || !paged || !*cursor)
			return k < 0 ? k : 0;
	}
}

struct name_list {
	char **v; /* NULL-terminated whenever it is not NULL */
	size_t n, cap;
};

static int name_list_page(struct ctrl_reader *rd, uint32_t n, void *userdata)
{
	struct name_list *l = userdata;
	const char *s;
	int k;

	k = ARRAY_RESERVE(l->v, l->cap, l->n + n + 1);
	if (k < 0)
		return k;
	l->v[l->n] = NULL;
	for (uint32_t i = 0; i < n; i++) {
		k = ctrl_read_string(rd, &s, NULL);
		if (k < 0)
			return k;
		l->v[l->n] = strdup(s);
		if (!l->v[l->n])
			return -ENOMEM;
		l->v[++l->n] = NULL;
	}
	return 0;
}

int bus_list_names(brokerd_bus *bus, uint32_t flags, uint32_t page_size, char ***ret)
{
	struct name_list l = { 0 };
	int k;

	if (!ret)
		return -EINVAL;
	k = bus_list(bus, CTRL_OP_LIST_NAMES_PAGE, flags, page_size, name_list_page, &l);
	if (k >= 0 && !l.v && !(l.v = calloc(1, sizeof(*l.v))))
		k = -ENOMEM;
	if (k < 0) {
		strv_free(l.v);
		return k;
	}
	*ret = l.v;
	return l.n > INT32_MAX ? INT32_MAX : (int)l.n;
}

char **strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
	return NULL;
}

int bus_monitor_start(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
		      bus_monitor_handler_t handler, void *userdata)
{
	struct brokerd_slot *s;
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	int k;

	if (!bus || bus->closed || !handler || (name && !ctrl_name_is_valid_wellknown(name)))
		return -EINVAL;
	if (!bus->connected)
		return -ENOTCONN;
	for (s = bus->slots; s; s = s->next)
		if (s->type == SLOT_MONITOR)
			return -EBUSY;
	s = slot_new(bus, SLOT_MONITOR, name, NULL, userdata);
	if (!s)
		return -ENOMEM;
	s->handler.monitor = handler;
	k = bus_ctrl_request(bus, CTRL_OP_MONITOR, NULL, 0, &r);
	if (k < 0) {
		slot_destroy(s);
		return k;
	}
	{
		struct ctrl_reader rd;
		uint32_t n = 0;

		ctrl_reader_init(&rd, &r.msg);
		k = ctrl_read_u32(&rd, &n) < 0 ? 0 : (int)(n > INT32_MAX ? INT32_MAX : n);
	}
	(void)slot_hand_out(s, ret_slot);
	return k; /* channels announced; each comes as a MonitorChannel signal */
}
