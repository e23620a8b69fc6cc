/* SPDX-License-Identifier: MIT */
/*
 * bus-introspect.h - listings and monitoring for brokerctl (bus-introspect.c,
 * not in the shared library).
 */
#ifndef BROKERD_CLIENT_BUS_INTROSPECT_H
#define BROKERD_CLIENT_BUS_INTROSPECT_H

#include <stdint.h>
#include "client/bus-internal.h"

/*
 * Paged listings: LIST_NAMES_PAGE or LIST_PEERS_PAGE (op) with flags,
 * page_size entries a request (0: as many as fit), until the last page.
 * page() gets each reply's entries: the reader is at the first of n, and it
 * must read all n (or fail with -errno, which ends the listing). A brokerd
 * without paging is asked LIST_NAMES / LIST_PEERS once.
 */
typedef int (*bus_list_page_t)(struct ctrl_reader *rd, uint32_t n, void *userdata);
int bus_list(brokerd_bus *bus, uint16_t op, uint32_t flags, uint32_t page_size, bus_list_page_t page,
	     void *userdata);
/* Every name LIST_NAMES lists (flags as there) as a NULL-terminated array
 * to free with strv_free(); returns how many. */
int bus_list_names(brokerd_bus *bus, uint32_t flags, uint32_t page_size, char ***ret);
char **strv_free(char **v);

/* Monitoring (privileged): the number of channels brokerd announced, or
 * -errno. Each comes as a MonitorChannel signal; handler gets their traffic. */
int bus_monitor_start(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
		      bus_monitor_handler_t handler, void *userdata);

#endif
