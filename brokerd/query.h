/* SPDX-License-Identifier: MIT */
/*
 * query.h - handlers of the requests that only read the bus's state; the
 * driver's op table points at them. Each takes the connection, the decoded
 * request and a reader at its body, and replies itself (a negative errno
 * makes the driver reply Failed).
 *
 * Above conn.h; beside activation, below the driver. Calls nothing above it.
 */
#ifndef BROKERD_QUERY_H
#define BROKERD_QUERY_H

#include "brokerd/bus-state.h"
#include "protocol/ctrl.h"

/* LIST_NAMES, LIST_PEERS and their paged forms (flags, page size, cursor). */
int query_handle_list(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
/* LIST_QUEUED_OWNERS */
int query_handle_queued_owners(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
/* GET_NAME_OWNER */
int query_handle_name_owner(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
/* GET_CREDENTIALS */
int query_handle_credentials(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
/* POLICY_CHECK */
int query_handle_policy_check(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
/* QUOTA */
int query_handle_quota(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);

#endif
