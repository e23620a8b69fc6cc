/* SPDX-License-Identifier: MIT */
/*
 * watch.c - signal watches: WATCH_SIGNALS and UNWATCH_SIGNALS, and the
 * SignalChannel signals that hand a watcher the signal channel of each
 * owned name (protocol/README.md section 4). Each cap handed out is a
 * subscription as SUBSCRIBE makes it: charged to the subscriptions quota,
 * ended by UNSUBSCRIBE or at disconnect, revoked at a reload like any.
 */
#include <errno.h>
#include <string.h>

#include "brokerd/conn.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/watch.h"
#include "util/macro.h"

/*
 * Names c is offered: owned, with a signal channel, not subscribed yet
 * (its cap is in the client's hands already), receive allowed by policy.
 */
static bool offered(struct bus_conn *c, struct bus_name *n)
{
	struct bus *b = c->bus;
	char why[512];

	return n->signal && registry_name_owner(b->registry, n->name) &&
	       !grant_has(n->signal, c->peer->id, IOIPC_SUB_RECV) &&
	       conn_allowed(c, POLICY_RECEIVE, n->name, why, sizeof(why));
}

/*
 * A name a D-Bus client owns has channels only once a native client used
 * it; a watcher wants its signals (the bridge puts the owner's broadcasts
 * on its signal channel, dbus-bridge.c), so they are made for it, charged
 * to the watcher's uid as SUBSCRIBE charges them. NULL when that fails (a
 * quota, no channels): the watcher is not offered the name.
 */
static struct bus_name *dbus_name_channels(struct bus_conn *c, const char *name)
{
	struct bus *b = c->bus;
	struct registry_peer *owner = registry_name_owner(b->registry, name);
	struct bus_name *n = bus_name_find(b, name);
	int failed_quota = -1;
	char why[512];

	if (!owner || owner->kind != REGISTRY_PEER_DBUS || (n && n->signal) ||
	    !conn_allowed(c, POLICY_RECEIVE, name, why, sizeof(why)))
		return n;
	if (bus_name_get(b, name, c->cred.uid, &failed_quota, &n) < 0) {
		log_full(LOG_DEBUG, c->peer->unique_name, c->cred.uid,
			 "%s watches signals, but %s's channels cannot be made: left out", c->peer->unique_name,
			 name);
		return NULL;
	}
	return n;
}

/*
 * SignalChannel with a RECV cap; without one when the subscriptions quota
 * is used up (or minting failed), so that the count of the reply holds.
 */
static void offer(struct bus_conn *c, struct bus_name *n)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_SIGNAL_CHANNEL, 0) < 0)
		return;
	ctrl_write_string(&w, n->name);
	if (quota_charge(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1) == 0) {
		fd = cap_mint(b, n->signal, c, IOIPC_SUB_RECV);
		if (fd >= 0) {
			c->n_subscriptions++; /* given back by UNSUBSCRIBE or at disconnect */
			ctrl_write_fd(&w, fd);
		} else {
			quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1);
		}
	} else {
		log_full(LOG_DEBUG, c->peer->unique_name, c->cred.uid,
			 "%s watches signals but is at its subscriptions quota: %s left out",
			 c->peer->unique_name, n->name);
	}
	conn_signal(c, &w);
}

int watch_handle_watch(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	uint32_t flags, count = 0;
	int r;

	ctrl_read_u32(rd, &flags);
	if (flags)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (!b->chanmgr.available)
		return conn_reply_error(c, m, CTRL_ERROR_NOT_SUPPORTED,
					"this kernel has no io_uring IPC channels");
	/* D-Bus clients' names first get the channels their signals are to come on */
	for (struct registry_peer *p = registry_peer_next(b->registry, NULL); p;
	     p = registry_peer_next(b->registry, p)) {
		const char *nm;

		if (p->kind != REGISTRY_PEER_DBUS)
			continue;
		for (unsigned int i = 0; (nm = registry_peer_owned_next(p, &i));)
			(void)dbus_name_channels(c, nm);
	}
	for (struct bus_name *n = b->names; n; n = n->next)
		count += offered(c, n);
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, count);
	r = conn_send(c, &w);
	if (r < 0)
		return r;
	/* the same walk as the count: nothing changed in between */
	for (struct bus_name *n = b->names; n; n = n->next)
		if (offered(c, n))
			offer(c, n);
	c->watch_signals = true;
	log_full(LOG_DEBUG, c->peer->unique_name, c->cred.uid, "%s watches signals (%u names)",
		 c->peer->unique_name, count);
	return 0;
}

int watch_handle_unwatch(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	uint32_t flags;
	bool was = c->watch_signals;

	ctrl_read_u32(rd, &flags);
	if (flags)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	c->watch_signals = false;
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, was ? CTRL_UNWATCH_DONE : CTRL_UNWATCH_NOT_WATCHING);
	return conn_send(c, &w);
}

void watch_name_owned(struct bus *b, const char *name)
{
	struct bus_name *n = bus_name_find(b, name);

	for (struct bus_conn *c = b->conns; c; c = c->next) {
		if (!c->watch_signals || c->dead || !c->peer)
			continue;
		if (!n || !n->signal) /* a D-Bus client's name: channels for the first watcher that may have them */
			n = dbus_name_channels(c, name);
		if (n && offered(c, n))
			offer(c, n);
	}
}
