/* SPDX-License-Identifier: MIT */
/* test-quota.c - unit tests of per-uid accounting (quota.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/quota.h"
#include "util/test.h"

int main(void)
{
	struct quota *q;
	size_t idx = 0;
	uid_t u;

	ASSERT(quota_new(&q) == 0);
	ASSERT(quota_limit(q, QUOTA_NAMES) == quota_limit_default(QUOTA_NAMES));
	quota_limit_set(q, QUOTA_NAMES, 2);
	ASSERT(quota_charge(q, 1000, QUOTA_NAMES, 1) == 0);
	ASSERT(quota_charge(q, 1000, QUOTA_NAMES, 1) == 0);
	ASSERT(quota_charge(q, 1000, QUOTA_NAMES, 1) == -EDQUOT);
	ASSERT(quota_used(q, 1000, QUOTA_NAMES) == 2);
	/* per uid, not global */
	ASSERT(quota_charge(q, 1001, QUOTA_NAMES, 2) == 0);
	ASSERT(quota_charge(q, 1001, QUOTA_NAMES, 1) == -EDQUOT);
	quota_release(q, 1000, QUOTA_NAMES, 1);
	ASSERT(quota_charge(q, 1000, QUOTA_NAMES, 1) == 0);
	/* no overflow on huge requests; release never goes below zero */
	ASSERT(quota_charge(q, 1000, QUOTA_RING_BYTES, UINT64_MAX) == -EDQUOT);
	quota_release(q, 1002, QUOTA_NAMES, 5);
	quota_release(q, 1000, QUOTA_CONNECTIONS, 5);
	ASSERT(quota_used(q, 1000, QUOTA_CONNECTIONS) == 0);
	ASSERT(quota_kind_from_string("ring_bytes") == QUOTA_RING_BYTES);
	ASSERT(quota_kind_from_string("nope") == -EINVAL);
	ASSERT(quota_kind_from_string("dbus_bytes") == QUOTA_DBUS_BYTES);
	ASSERT(quota_limit_default(QUOTA_DBUS_BYTES) >= 2 * quota_bus_limit_default(QUOTA_BUS_MAX_MESSAGE_SIZE));
	ASSERT(quota_bus_kind_from_string("max_outgoing_unix_fds") == QUOTA_BUS_MAX_OUTGOING_FDS);
	ASSERT(strcmp(quota_kind_to_string(QUOTA_ACTIVATIONS), "activations") == 0);
	/* a per-uid limit wins over the global one, until reset */
	ASSERT(quota_limit_set_uid(q, 0, QUOTA_NAMES, 3) == 0);
	ASSERT(quota_limit_uid(q, 0, QUOTA_NAMES) == 3 && quota_limit_uid(q, 1000, QUOTA_NAMES) == 2);
	ASSERT(quota_charge(q, 0, QUOTA_NAMES, 3) == 0);
	ASSERT(quota_charge(q, 0, QUOTA_NAMES, 1) == -EDQUOT);
	quota_limit_reset_uids(q);
	ASSERT(quota_limit_uid(q, 0, QUOTA_NAMES) == 2);
	quota_release(q, 0, QUOTA_NAMES, 3);
	idx = 0;
	ASSERT(quota_uid_next(q, &idx, &u) == 1 && u == 1000);
	ASSERT(quota_uid_next(q, &idx, &u) == 1 && u == 1001);
	ASSERT(quota_uid_next(q, &idx, &u) == 0);
	/* bus-wide limits: defaults, names, set */
	ASSERT(quota_bus_limit(q, QUOTA_BUS_MAX_CONNECTIONS) ==
	       quota_bus_limit_default(QUOTA_BUS_MAX_CONNECTIONS));
	ASSERT(quota_bus_kind_from_string("reserved_connections") == QUOTA_BUS_RESERVED_CONNECTIONS);
	ASSERT(quota_bus_kind_from_string("connections") == -EINVAL);
	ASSERT(strcmp(quota_bus_kind_to_string(QUOTA_BUS_HELLO_TIMEOUT_MS), "hello_timeout_ms") == 0);
	quota_bus_limit_set(q, QUOTA_BUS_MAX_CONNECTIONS, 9);
	ASSERT(quota_bus_limit(q, QUOTA_BUS_MAX_CONNECTIONS) == 9);
	quota_free(q);
	printf("test-quota: ok\n");
	return 0;
}
