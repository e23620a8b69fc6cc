/* SPDX-License-Identifier: MIT */
/*
 * quota.h - per-uid resource accounting (not per connection: a uid that
 * opens many connections shares one budget). Pure logic; the bus charges
 * before it commits a change and releases when the resource goes away.
 */
#ifndef BROKERD_QUOTA_H
#define BROKERD_QUOTA_H

#include <stdint.h>
#include <sys/types.h>

enum quota_kind {
	QUOTA_CONNECTIONS,
	QUOTA_NAMES,	     /* queue entries: owned or queued names */
	QUOTA_CHANNELS,	     /* channels brokerd created on behalf of the uid */
	QUOTA_RING_BYTES,    /* ring memory of those channels */
	QUOTA_ACTIVATIONS,   /* pending activations started by the uid */
	QUOTA_SUBSCRIPTIONS, /* names subscribed to, once per connection and name */
	QUOTA_DBUS_BYTES,    /* bytes brokerd holds for the uid's D-Bus connections, in and out */
	QUOTA_DBUS_FDS,	     /* fds brokerd holds for them, received or queued */
	_QUOTA_MAX,
};

/* Bus-wide limits, all uids together ([limits] only, never per uid). */
enum quota_bus_kind {
	QUOTA_BUS_MAX_CONNECTIONS,	/* open connections, HELLO or not */
	QUOTA_BUS_RESERVED_CONNECTIONS, /* the last of them: root and light users only */
	QUOTA_BUS_HELLO_TIMEOUT_MS,	/* a connection without HELLO is closed after this */
	QUOTA_BUS_REPLY_TIMEOUT_MS,	/* a D-Bus call unanswered this long gets NoReply; 0: never */
	QUOTA_BUS_MAX_REPLIES,		/* calls of one D-Bus connection waiting for replies */
	QUOTA_BUS_MAX_MATCH_RULES,	/* AddMatch rules of one D-Bus connection */
	QUOTA_BUS_MAX_NAMES,		/* names of one D-Bus connection, its unique name included */
	QUOTA_BUS_MAX_MESSAGE_SIZE,	/* the largest D-Bus message brokerd reads */
	QUOTA_BUS_MAX_OUTGOING_BYTES,	/* bytes queued for one D-Bus connection */
	QUOTA_BUS_MAX_OUTGOING_FDS,	/* fds queued for one D-Bus connection */
	QUOTA_BUS_MAX_INCOMING_FDS,	/* fds received from one D-Bus connection, not yet its messages' */
	QUOTA_BUS_MAX_DBUS_BYTES,	/* dbus_bytes of all uids but root and light users together */
	_QUOTA_BUS_MAX,
};

struct quota;

int quota_new(struct quota **ret);
struct quota *quota_free(struct quota *q);

const char *quota_kind_to_string(enum quota_kind k);
int quota_kind_from_string(const char *s); /* enum quota_kind or -EINVAL */
uint64_t quota_limit_default(enum quota_kind k);

/* Limits apply to every uid, root included (a runaway root client is still a bug)... */
void quota_limit_set(struct quota *q, enum quota_kind k, uint64_t limit);
uint64_t quota_limit(const struct quota *q, enum quota_kind k);
/* ... unless a uid has its own limit. */
int quota_limit_set_uid(struct quota *q, uid_t uid, enum quota_kind k, uint64_t limit);
void quota_limit_reset_uids(struct quota *q);
uint64_t quota_limit_uid(const struct quota *q, uid_t uid, enum quota_kind k);

/* 0, or -EDQUOT when uid would exceed the limit (nothing is charged then). */
int quota_charge(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n);
void quota_release(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n);
/* Charges what a restarted brokerd took over, whatever the limit: it is in use already. */
int quota_charge_restored(struct quota *q, uid_t uid, enum quota_kind k, uint64_t n);
uint64_t quota_used(const struct quota *q, uid_t uid, enum quota_kind k);

const char *quota_bus_kind_to_string(enum quota_bus_kind k);
int quota_bus_kind_from_string(const char *s); /* enum quota_bus_kind or -EINVAL */
uint64_t quota_bus_limit_default(enum quota_bus_kind k);
void quota_bus_limit_set(struct quota *q, enum quota_bus_kind k, uint64_t limit);
uint64_t quota_bus_limit(const struct quota *q, enum quota_bus_kind k);

/* Iterate uids with any use: returns 1 and sets *uid, or 0 at the end. Start with idx 0. */
int quota_uid_next(const struct quota *q, size_t *idx, uid_t *uid);

#endif
