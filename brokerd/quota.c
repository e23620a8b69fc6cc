/* SPDX-License-Identifier: MIT */
/* quota.c - per-uid resource accounting (see quota.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/quota.h"
#include "util/array.h"
#include "util/macro.h"

struct quota_uid {
	uid_t uid;
	uint64_t used[_QUOTA_MAX];
	uint64_t limit[_QUOTA_MAX]; /* UINT64_MAX: the global limit */
};

struct quota {
	uint64_t limit[_QUOTA_MAX];
	uint64_t bus_limit[_QUOTA_BUS_MAX];
	struct quota_uid *uids;
	size_t n_uids, alloc_uids;
};

static const struct {
	const char *name;
	uint64_t def;
} kinds[] = {
	[QUOTA_CONNECTIONS] = { "connections", 256 }, [QUOTA_NAMES] = { "names", 256 },
	[QUOTA_CHANNELS] = { "channels", 512 },	      [QUOTA_RING_BYTES] = { "ring_bytes", 128ULL << 20 },
	[QUOTA_ACTIVATIONS] = { "activations", 16 },  [QUOTA_SUBSCRIPTIONS] = { "subscriptions", 1024 },
	/* two messages of the largest size: a large call and its large reply */
	[QUOTA_DBUS_BYTES] = { "dbus_bytes", 256ULL << 20 },
	[QUOTA_DBUS_FDS] = { "dbus_fds", 4096 },
};
_Static_assert(ELEMENTSOF(kinds) == _QUOTA_MAX, "every quota needs a name and a default");

static const struct {
	const char *name;
	uint64_t def;
} bus_kinds[] = {
	[QUOTA_BUS_MAX_CONNECTIONS] = { "max_connections", 16384 },
	[QUOTA_BUS_RESERVED_CONNECTIONS] = { "reserved_connections", 256 },
	[QUOTA_BUS_HELLO_TIMEOUT_MS] = { "hello_timeout_ms", 5000 },
	[QUOTA_BUS_REPLY_TIMEOUT_MS] = { "reply_timeout_ms", 0 }, /* dbus-daemon's default: never */
	[QUOTA_BUS_MAX_REPLIES] = { "max_replies_per_connection", 4096 },
	[QUOTA_BUS_MAX_MATCH_RULES] = { "max_match_rules_per_connection", 1024 },
	[QUOTA_BUS_MAX_NAMES] = { "max_names_per_connection", 512 }, /* dbus-daemon's default */
	/* the names of dbus-daemon's <limit>s; message size: the specification's limit */
	[QUOTA_BUS_MAX_MESSAGE_SIZE] = { "max_message_size", 128ULL << 20 },
	[QUOTA_BUS_MAX_OUTGOING_BYTES] = { "max_outgoing_bytes", 16ULL << 20 },
	[QUOTA_BUS_MAX_OUTGOING_FDS] = { "max_outgoing_unix_fds", 1024 },
	[QUOTA_BUS_MAX_INCOMING_FDS] = { "max_incoming_unix_fds", 506 }, /* two messages' worth */
	[QUOTA_BUS_MAX_DBUS_BYTES] = { "max_dbus_bytes", 1ULL << 30 },
};
_Static_assert(ELEMENTSOF(bus_kinds) == _QUOTA_BUS_MAX, "every bus limit needs a name and a default");

const char *quota_bus_kind_to_string(enum quota_bus_kind k)
{
	return (unsigned int)k < _QUOTA_BUS_MAX ? bus_kinds[k].name : NULL;
}

int quota_bus_kind_from_string(const char *s)
{
	for (unsigned int k = 0; s && k < _QUOTA_BUS_MAX; k++)
		if (strcmp(bus_kinds[k].name, s) == 0)
			return (int)k;
	return -EINVAL;
}

uint64_t quota_bus_limit_default(enum quota_bus_kind k)
{
	return (unsigned int)k < _QUOTA_BUS_MAX ? bus_kinds[k].def : 0;
}

void quota_bus_limit_set(struct quota *q, enum quota_bus_kind k, uint64_t limit)
{
	if (q && (unsigned int)k < _QUOTA_BUS_MAX)
		q->bus_limit[k] = limit;
}

uint64_t quota_bus_limit(const struct quota *q, enum quota_bus_kind k)
{
	return q && (unsigned int)k < _QUOTA_BUS_MAX ? q->bus_limit[k] : 0;
}

const char *quota_kind_to_string(enum quota_kind k)
{
	return (unsigned int)k < _QUOTA_MAX ? kinds[k].name : NULL;
}

int quota_kind_from_string(const char *s)
{
	for (unsigned int k = 0; s && k < _QUOTA_MAX; k++)
		if (strcmp(kinds[k].name, s) == 0)
			return (int)k;
	return -EINVAL;
}

uint64_t quota_limit_default(enum quota_kind k)
{
	return (unsigned int)k < _QUOTA_MAX ? kinds[k].def : 0;
}

int quota_new(struct quota **ret)
{
	struct quota *q;

	if (!ret)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	for (unsigned int k = 0; k < _QUOTA_MAX; k++)
		q->limit[k] = kinds[k].def;
	for (unsigned int k = 0; k < _QUOTA_BUS_MAX; k++)
		q->bus_limit[k] = bus_kinds[k].def;
	*ret = q;
	return 0;
}

struct quota *quota_free(struct quota *q)
{
	if (q) {
		free(q->uids);
		free(q);
	}
	return NULL;
}

void quota_limit_set(struct quota *q, enum quota_kind k, uint64_t limit)
{
	if (q && (unsigned int)k < _QUOTA_MAX)
		q->limit[k] = limit;
}

uint64_t quota_limit(const struct quota *q, enum quota_kind k)
{
	return q && (unsigned int)k < _QUOTA_MAX ? q->limit[k] : 0;
}

static struct quota_uid *uid_find(const struct quota *q, uid_t uid)
{
	for (size_t i = 0; i < q->n_uids; i++)
		if (q->uids[i].uid == uid)
			return &q->uids[i];
	return NULL;
}

static struct quota_uid *uid_get(struct quota *q, uid_t uid)
{
	struct quota_uid *u = uid_find(q, uid);

	if (u)
		return u;
	if (ARRAY_RESERVE(q->uids, q->alloc_uids, q->n_uids + 1) < 0)
		return NULL;
	u = &q->uids[q->n_uids++];
	memset(u, 0, sizeof(*u));
	u->uid = uid;
	for (unsigned int k = 0; k < _QUOTA_MAX; k++)
		u->limit[k] = UINT64_MAX;
	return u;
}

int quota_limit_set_uid(struct quota *q, uid_t uid, enum quota_kind k, uint64_t limit)
{
	struct quota_uid *u;

	if (!q || (unsigned int)k >= _QUOTA_MAX)
		return -EINVAL;
	u = uid_get(q, uid);
	if (!u)
		return -ENOMEM;
	u->limit[k] = limit;
	return 0;
}

void quota_limit_reset_uids(struct quota *q)
{
	for (size_t i = 0; q && i < q->n_uids; i++)
		for (unsigned int k = 0; k < _QUOTA_MAX; k++)
			q->uids[i].limit[k] = UINT64_MAX;
}

uint64_t quota_limit_uid(const struct quota *q, uid_t uid, enum quota_kind k)
{
	const struct quota_uid *u;

	if (!q || (unsigned int)k >= _QUOTA_MAX)
		return 0;
	u = uid_find(q, uid);
	return u && u->limit[k] != UINT64_MAX ? u->limit[k] : q->limit[k];
}

/* Charges n to uid's use of k; within its limit only if checked. */
static int charge(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n, bool checked)
{
	struct quota_uid *u;
	uint64_t limit;

	if (!q || (unsigned int)k >= _QUOTA_MAX)
		return -EINVAL;
	u = uid_get(q, uid);
	if (!u)
		return -ENOMEM;
	limit = u->limit[k] != UINT64_MAX ? u->limit[k] : q->limit[k];
	if (checked && (n > limit || u->used[k] > limit - n))
		return -EDQUOT;
	u->used[k] += n;
	return 0;
}

int quota_charge(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n)
{
	return charge(q, uid, k, n, true);
}

int quota_charge_restored(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n)
{
	return charge(q, uid, k, n, false);
}

void quota_release(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n)
{
	struct quota_uid *u;

	if (!q || (unsigned int)k >= _QUOTA_MAX)
		return;
	u = uid_find(q, uid);
	if (!u)
		return;
	u->used[k] = u->used[k] > n ? u->used[k] - n : 0;
}

uint64_t quota_used(const struct quota *q, uid_t uid, enum quota_kind k)
{
	const struct quota_uid *u;

	if (!q || (unsigned int)k >= _QUOTA_MAX)
		return 0;
	u = uid_find(q, uid);
	return u ? u->used[k] : 0;
}

int quota_uid_next(const struct quota *q, size_t *idx, uid_t *uid)
{
	if (!q || !idx || !uid)
		return -EINVAL;
	for (; *idx < q->n_uids; (*idx)++) {
		const struct quota_uid *u = &q->uids[*idx];

		for (unsigned int k = 0; k < _QUOTA_MAX; k++) {
			if (u->used[k]) {
				*uid = u->uid;
				(*idx)++;
				return 1;
			}
		}
	}
	return 0;
}
