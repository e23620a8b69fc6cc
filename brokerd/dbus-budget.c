/* SPDX-License-Identifier: MIT */
/*
 * dbus-budget.c - the memory and fds brokerd spends on D-Bus connections,
 * charged to their uids: the input buffer (with the whole of a message
 * whose header came), fds received and not yet a message's, and the output
 * queue, against the uid's dbus_bytes and dbus_fds quotas; all uids but
 * root together against max_dbus_bytes, which a uid using no more than a
 * quarter of its dbus_bytes is not held to (so that a flood from several
 * uids cannot starve the light users). The last quarter of a uid's
 * budget is kept for what its connections are owed (replies, the driver's
 * messages, signals they subscribed to) and for small reads: bulk (a
 * large message read, a call or signal queued for a connection) stops
 * short of it, so that a uid whose large messages or unread queues use up
 * the rest can still talk. A connection whose next read does not fit is
 * paused, not buffered, and read again once something of the budget was
 * given back (brokerd/README.md, "D-Bus clients").
 */
#include <errno.h>

#include "brokerd/bus-state.h"
#include "brokerd/dbus-front.h"
#include "brokerd/quota.h"

static int on_resume(sd_event_source *s, void *userdata);

void dbus_budget_init(struct dbus_front *f)
{
	f->budget_log = (struct log_ratelimit){ .what = "D-Bus output limit", .interval_usec = 10000000,
						.burst = 10 };
}

void dbus_budget_deinit(struct dbus_front *f)
{
	f->resume_src = sd_event_source_disable_unref(f->resume_src);
}

/* Is uid held to max_dbus_bytes with used bytes of its dbus_bytes limit? */
static bool held_to_total(uid_t uid, uint64_t used, uint64_t limit)
{
	return uid != 0 && used > limit / 4;
}

uint64_t dbus_budget_limit(const struct dbus_conn *c, bool bulk)
{
	uint64_t limit = quota_limit_uid(c->front->bus->quota, c->cred.uid, QUOTA_DBUS_BYTES);

	return bulk ? limit - limit / 4 : limit;
}

bool dbus_budget_fits(const struct dbus_conn *c, uint64_t bytes, unsigned int fds, bool bulk)
{
	const struct quota *q = c->front->bus->quota;
	uid_t uid = c->cred.uid;
	uint64_t used = quota_used(q, uid, QUOTA_DBUS_BYTES), limit = dbus_budget_limit(c, bulk);
	uint64_t used_fds = quota_used(q, uid, QUOTA_DBUS_FDS), limit_fds = quota_limit_uid(q, uid, QUOTA_DBUS_FDS);
	uint64_t total = quota_bus_limit(q, QUOTA_BUS_MAX_DBUS_BYTES);

	if (bulk)
		limit_fds -= limit_fds / 4;
	if (bytes > limit || used > limit - bytes || fds > limit_fds || used_fds > limit_fds - fds)
		return false;
	if (bytes && held_to_total(uid, used + bytes, dbus_budget_limit(c, false)) &&
	    (bytes > total || c->front->budget_total > total - bytes))
		return false;
	return true;
}

void dbus_budget_charge(struct dbus_conn *c, uint64_t bytes, unsigned int fds)
{
	struct quota *q = c->front->bus->quota;

	/* Cannot fail but for memory, and the uid has a quota entry once it connected. */
	(void)quota_charge_restored(q, c->cred.uid, QUOTA_DBUS_BYTES, bytes);
	(void)quota_charge_restored(q, c->cred.uid, QUOTA_DBUS_FDS, fds);
	if (c->cred.uid != 0)
		c->front->budget_total += bytes;
	c->budget_bytes += bytes;
	c->budget_fds += fds;
}

void dbus_budget_release(struct dbus_conn *c, uint64_t bytes, unsigned int fds)
{
	struct dbus_front *f = c->front;
	struct quota *q = f->bus->quota;

	bytes = bytes < c->budget_bytes ? bytes : c->budget_bytes;
	fds = fds < c->budget_fds ? fds : c->budget_fds;
	if (!bytes && !fds)
		return;
	quota_release(q, c->cred.uid, QUOTA_DBUS_BYTES, bytes);
	quota_release(q, c->cred.uid, QUOTA_DBUS_FDS, fds);
	if (c->cred.uid != 0)
		f->budget_total -= bytes < f->budget_total ? bytes : f->budget_total;
	c->budget_bytes -= bytes;
	c->budget_fds -= fds;
	if (!f->paused)
		return;
	/* Once per loop iteration, however much was released in it. */
	if (!f->resume_src) {
		if (sd_event_add_defer(f->event, &f->resume_src, on_resume, f) < 0)
			return; /* they are looked at with the next release */
		(void)sd_event_source_set_priority(f->resume_src, SD_EVENT_PRIORITY_IDLE);
	}
	(void)sd_event_source_set_enabled(f->resume_src, SD_EVENT_ONESHOT);
}

static void paused_unlink(struct dbus_conn *c)
{
	struct dbus_front *f = c->front;

	if (!c->paused)
		return;
	if (c->paused_prev)
		c->paused_prev->paused_next = c->paused_next;
	else
		f->paused = c->paused_next;
	if (c->paused_next)
		c->paused_next->paused_prev = c->paused_prev;
	c->paused_prev = c->paused_next = NULL;
	c->paused = false;
}

void dbus_budget_pause(struct dbus_conn *c)
{
	struct dbus_front *f = c->front;

	if (c->paused)
		return;
	c->paused = true;
	c->paused_prev = NULL;
	c->paused_next = f->paused;
	if (f->paused)
		f->paused->paused_prev = c;
	f->paused = c;
}

/* What was released may let paused connections read: those whose next read fits now. */
static int on_resume(sd_event_source *s, void *userdata)
{
	struct dbus_front *f = userdata;

	(void)s;
	for (struct dbus_conn *c = f->paused, *next; c; c = next) {
		next = c->paused_next;
		if (c->dead || !dbus_conn_input_fits(c))
			continue;
		paused_unlink(c);
		dbus_conn_input_resume(c);
	}
	return 0;
}

void dbus_budget_conn_gone(struct dbus_conn *c)
{
	paused_unlink(c);
	dbus_budget_release(c, c->budget_bytes, c->budget_fds);
}
