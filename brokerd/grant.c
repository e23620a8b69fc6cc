/* SPDX-License-Identifier: MIT */
/*
 * grant.c - channels and the rights granted on them (see grant.h).
 *
 * Channels: per connection an inbox (unicast), per well-known name a call
 * channel (multicast) and a signal channel (broadcast), and the bus's own
 * signal channel "brokerd". Each capability fd handed out is badged with the
 * connection id and recorded as a grant, so that what a reload, a lost name
 * or a disconnect takes away can be revoked in the kernel by badge: the caps
 * lose the rights and whatever was attached through them is detached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/nsview.h"
#include "brokerd/policy-dbus.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/macro.h"

/* --- channels and grants ------------------------------------------------- */

static void monitor_announce(struct bus *b, struct bus_channel *ch, struct bus_conn *only);

void grant_write_msg_size(struct ctrl_writer *w, bool asked, const struct bus_channel *ch)
{
	if (asked)
		ctrl_write_u32(w, ch ? ch->slot_size : 0);
}

uint64_t channel_ring_bytes(const struct bus_channel *ch)
{
	return (uint64_t)ch->slots * ch->slot_size;
}

/* name's ring geometry: policy [channels], else the default (channel.h). */
static void channel_geometry(struct bus *b, const char *name, uint32_t *slots, uint32_t *slot_size)
{
	if (!policy_ring_geometry(b->policy, name, slots, slot_size)) {
		*slots = CHANNEL_SLOTS;
		*slot_size = CHANNEL_MSG_MAX;
	}
}

struct bus_channel *bus_channel_free(struct bus *b, struct bus_channel *ch)
{
	if (!ch)
		return NULL;
	if (b->chanmgr.available) {
		/*
		 * A destroyed channel keeps working for whoever is still
		 * attached (io_uring_ipc.rst), so destroying it takes nothing
		 * back. Grants of connections that have ended and whose batch
		 * (bus.c, on_revoke_batch) has not come yet are revoked here
		 * first: an ended connection's inbox may be freed before its
		 * revocation, and its process must not keep receiving there
		 * or reading the region.
		 */
		for (size_t i = 0; i < ch->n_grants; i++)
			/*
			 * An inbox goes with its connection: nobody will read
			 * what is sent there, so the SEND caps others hold
			 * (reply caps, OPEN_INBOX) are revoked too, or each
			 * would keep the dead ring's memory until its holder
			 * dropped it.
			 */
			if (ch->kind == CTRL_CHANNEL_INBOX ||
			    !registry_peer_find(b->registry, ch->grants[i].peer_id))
				(void)chanmgr_revoke(&b->chanmgr, ch->id, ch->grants[i].rights,
						     ch->grants[i].peer_id);
		(void)chanmgr_destroy(&b->chanmgr, ch->id);
	}
	quota_release(b->quota, ch->charged_uid, QUOTA_CHANNELS, 1);
	quota_release(b->quota, ch->charged_uid, QUOTA_RING_BYTES, channel_ring_bytes(ch));
	free(ch->grants);
	free(ch->name);
	free(ch);
	return NULL;
}

/* Create a channel charged to uid; *failed_quota tells which quota refused. */
int bus_channel_new(struct bus *b, enum ctrl_channel_kind kind, const char *name, uid_t uid,
		    int *failed_quota, struct bus_channel **ret)
{
	static const uint32_t flags[] = {
		[CTRL_CHANNEL_INBOX] = 0,
		[CTRL_CHANNEL_CALL] = IOIPC_F_MULTICAST,
		[CTRL_CHANNEL_SIGNAL] = IOIPC_F_BROADCAST,
		[CTRL_CHANNEL_DBUS] = IOIPC_F_BROADCAST, /* nobody receives there: monitors only */
	};
	struct bus_channel *ch;
	uint32_t slots, slot_size, lossy;
	uint64_t bytes;
	int r;

	BUG_ON((unsigned int)kind >= ELEMENTSOF(flags));
	channel_geometry(b, name, &slots, &slot_size);
	bytes = (uint64_t)slots * slot_size;
	if (quota_charge(b->quota, uid, QUOTA_CHANNELS, 1) < 0) {
		*failed_quota = QUOTA_CHANNELS;
		return -EDQUOT;
	}
	if (quota_charge(b->quota, uid, QUOTA_RING_BYTES, bytes) < 0) {
		quota_release(b->quota, uid, QUOTA_CHANNELS, 1);
		*failed_quota = QUOTA_RING_BYTES;
		return -EDQUOT;
	}
	r = chanmgr_memory_room(&b->chanmgr, bytes);
	if (r < 0)
		goto fail; /* NoMemory to the client, brokerd goes on */
	ch = calloc(1, sizeof(*ch));
	if (!ch || !(ch->name = strdup(name))) {
		free(ch);
		r = -ENOMEM;
		goto fail;
	}
	ch->kind = kind;
	ch->charged_uid = uid;
	ch->slots = slots;
	ch->slot_size = slot_size;
	lossy = kind == CTRL_CHANNEL_SIGNAL || kind == CTRL_CHANNEL_DBUS ? b->lossy : 0;
	r = chanmgr_create(&b->chanmgr, flags[kind] | lossy, slots, slot_size, &ch->id);
	if (r < 0) {
		log_error("cannot create %s channel for %s: %s",
			  kind == CTRL_CHANNEL_INBOX ? "inbox" :
			  kind == CTRL_CHANNEL_CALL  ? "call" :
						       "signal",
			  name, strerror(-r));
		free(ch->name);
		free(ch);
		goto fail;
	}
	monitor_announce(b, ch, NULL);
	if (b->channel_created)
		b->channel_created(b->channel_created_userdata, ch);
	*ret = ch;
	return 0;
fail:
	quota_release(b->quota, uid, QUOTA_CHANNELS, 1);
	quota_release(b->quota, uid, QUOTA_RING_BYTES, bytes);
	return r;
}

struct bus_channel *bus_channel_restore(struct bus *b, uint32_t id, enum ctrl_channel_kind kind,
					const char *name, uid_t uid)
{
	struct bus_channel *ch = calloc(1, sizeof(*ch));

	if (!ch || !(ch->name = strdup(name))) {
		free(ch);
		return NULL;
	}
	ch->id = id;
	ch->kind = kind;
	ch->charged_uid = uid;
	/*
	 * The restart state does not carry the geometry (and the policy is
	 * not loaded yet): assume the default. Its 8 KiB is the smallest slot
	 * size there is, so the size told to clients is never more than the
	 * ring takes; larger bodies go in a memfd until the channel is made
	 * anew. The ring_bytes quota counts it as the default too.
	 */
	ch->slots = CHANNEL_SLOTS;
	ch->slot_size = CHANNEL_MSG_MAX;
	(void)quota_charge_restored(b->quota, uid, QUOTA_CHANNELS, 1);
	(void)quota_charge_restored(b->quota, uid, QUOTA_RING_BYTES, channel_ring_bytes(ch));
	return ch;
}

int grant_record(struct bus_channel *ch, uint64_t peer_id, uint32_t rights)
{
	for (size_t i = 0; i < ch->n_grants; i++) {
		if (ch->grants[i].peer_id == peer_id) {
			ch->grants[i].rights |= rights;
			return 0;
		}
	}
	if (ARRAY_RESERVE(ch->grants, ch->alloc_grants, ch->n_grants + 1) < 0)
		return -ENOMEM;
	ch->grants[ch->n_grants++] = (struct grant){ .peer_id = peer_id, .rights = rights };
	return 0;
}

bool grant_has(struct bus_channel *ch, uint64_t peer_id, uint32_t rights)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++)
		if (ch->grants[i].peer_id == peer_id)
			return (ch->grants[i].rights & rights) == rights;
	return false;
}

/*
 * The connection peer_id, which could receive ch's calls, has ended: a call
 * it had taken will never be answered. Its callers (whoever holds SEND) are
 * told at once, since no other party knows which receiver took which call
 * (protocol/README.md, Worker pools). Called after its RECV was revoked in
 * the kernel: the signal says when, so that a call sent later (it went to
 * the receivers left) is not failed for it. When no receiver is left,
 * NameOwnerChanged to no owner says it already. A caller that asked
 * (OPEN_CALL's ENDED_PID) also learns the pid of the receiver's process as
 * it sees it: with the kernel's receipts it knows which worker took which
 * call, and fails only that one's.
 */
static void call_receiver_ended(struct bus *b, struct bus_channel *ch, uint64_t peer_id, pid_t pid)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	char receiver[CTRL_UNIQUE_NAME_MAX];
	uint64_t revoked_at = now_usec();
	bool receivers = false;
	struct bus_conn *conn;

	for (size_t i = 0; i < ch->n_grants; i++)
		receivers |= ch->grants[i].rights & IOIPC_SUB_RECV;
	if (!receivers)
		return;
	ctrl_unique_name_format(peer_id, receiver);
	for (size_t i = 0; i < ch->n_grants; i++) {
		struct registry_peer *p;

		if (!(ch->grants[i].rights & IOIPC_SUB_SEND))
			continue;
		p = registry_peer_find(b->registry, ch->grants[i].peer_id);
		conn = conn_of_peer(p);
		if (!conn || ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CALL_RECEIVER_ENDED, 0) < 0)
			continue;
		ctrl_write_string(&w, ch->name);
		ctrl_write_string(&w, receiver);
		ctrl_write_u64(&w, revoked_at);
		/* 0 when it cannot be told there (another container, gone, unknown) */
		if (conn->ended_pid)
			ctrl_write_u32(&w, pid > 0 ? (uint32_t)nsview_pid(conn->nsview, pid) : 0);
		conn_signal(conn, &w);
		ctrl_writer_deinit(&w);
	}
}

/*
 * Takes rights on ch back from the peer with this id: its caps lose them in
 * the kernel and what it attached through them is detached.
 */
void grant_revoke(struct bus *b, struct bus_channel *ch, uint64_t peer_id, uint32_t rights)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++) {
		struct grant *g = &ch->grants[i];
		int r;

		pid_t pid = g->pid;

		if (g->peer_id != peer_id)
			continue;
		rights &= g->rights;
		if (!rights)
			return;
		r = chanmgr_revoke(&b->chanmgr, ch->id, rights, peer_id);
		if (r < 0)
			log_error("cannot revoke rights 0x%x on %s from connection %llu: %s", rights,
				  ch->name, (unsigned long long)peer_id, strerror(-r));
		else
			log_debug("revoked rights 0x%x on %s from connection %llu: %d subscriber(s) detached",
				  rights, ch->name, (unsigned long long)peer_id, r);
		g->rights &= ~rights;
		if (!g->rights)
			*g = ch->grants[--ch->n_grants];
		if (ch->kind == CTRL_CHANNEL_CALL && (rights & IOIPC_SUB_RECV) &&
		    !registry_peer_find(b->registry, peer_id))
			call_receiver_ended(b, ch, peer_id, pid); /* its connection ended */
		return;
	}
}

/* Mint a cap for c with rights, badge = c's connection id, and record the grant. */
int cap_mint(struct bus *b, struct bus_channel *ch, struct bus_conn *c, uint32_t rights)
{
	int fd, r;

	BUG_ON(!c->peer); /* the badge is the id HELLO assigns */
	fd = chanmgr_mint(&b->chanmgr, ch->id, rights, c->peer->id);
	if (fd < 0) {
		log_error("cannot mint capability on %s for %s: %s", ch->name, conn_name(c), strerror(-fd));
		return fd;
	}
	r = grant_record(ch, c->peer->id, rights);
	if (r < 0) {
		close(fd);
		return r;
	}
	/* who ends with the connection, for CallReceiverEnded */
	for (size_t i = 0; i < ch->n_grants; i++)
		if (ch->grants[i].peer_id == c->peer->id)
			ch->grants[i].pid = c->cred.pid;
	c->n_caps++;
	return fd;
}

struct bus_name *bus_name_find(struct bus *b, const char *name)
{
	for (struct bus_name *n = b->names; n; n = n->next)
		if (strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

struct bus_name *bus_name_free(struct bus *b, struct bus_name *n)
{
	if (!n)
		return NULL;
	bus_channel_free(b, n->call);
	bus_channel_free(b, n->signal);
	free(n->name);
	free(n);
	return NULL;
}

/*
 * The name's channels, created on first use and charged to the uid that
 * caused it. They stay while anybody uses the name (bus_gc_names), so
 * subscriptions survive owner changes.
 */
int bus_name_get(struct bus *b, const char *name, uid_t uid, int *failed_quota, struct bus_name **ret)
{
	struct bus_name *n = bus_name_find(b, name);
	int r;

	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n || !(n->name = strdup(name))) {
			free(n);
			return -ENOMEM;
		}
		n->next = b->names;
		b->names = n;
	}
	if (b->chanmgr.available && !n->call) {
		r = bus_channel_new(b, CTRL_CHANNEL_CALL, name, uid, failed_quota, &n->call);
		if (r < 0) {
			b->gc_needed = true; /* drop the half-made name */
			return r;
		}
	}
	if (b->chanmgr.available && !n->signal) {
		r = bus_channel_new(b, CTRL_CHANNEL_SIGNAL, name, uid, failed_quota, &n->signal);
		if (r < 0) {
			b->gc_needed = true;
			return r;
		}
	}
	*ret = n;
	return 0;
}

/* --- monitors ------------------------------------------------------------ */

static void monitor_send(struct bus *b, struct bus_channel *ch, struct bus_conn *c)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;

	/* Without a cap the signal still comes, so the monitor's count adds up. */
	fd = cap_mint(b, ch, c, IOIPC_SUB_MONITOR);
	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_MONITOR_CHANNEL, 0) < 0)
		return;
	ctrl_write_string(&w, ch->name);
	ctrl_write_u32(&w, ch->kind);
	if (fd >= 0)
		ctrl_write_fd(&w, fd);
	conn_signal(c, &w);
}

static void monitor_announce(struct bus *b, struct bus_channel *ch, struct bus_conn *only)
{
	for (struct bus_conn *c = b->conns; c; c = c->next)
		if (c->monitor && (!only || c == only))
			monitor_send(b, ch, c);
}

unsigned int monitor_channel_count(struct bus *b)
{
	unsigned int count = (b->bus_signal ? 1 : 0) + (b->dbus_channel ? 1 : 0);

	for (struct bus_name *n = b->names; n; n = n->next)
		count += (n->call ? 1 : 0) + (n->signal ? 1 : 0);
	for (struct bus_conn *o = b->conns; o; o = o->next)
		count += o->inbox ? 1 : 0;
	return count;
}

void monitor_announce_all(struct bus *b, struct bus_conn *c)
{
	if (!b->chanmgr.available)
		return;
	if (b->bus_signal)
		monitor_send(b, b->bus_signal, c);
	if (b->dbus_channel)
		monitor_send(b, b->dbus_channel, c);
	for (struct bus_name *n = b->names; n; n = n->next) {
		if (n->call)
			monitor_send(b, n->call, c);
		if (n->signal)
			monitor_send(b, n->signal, c);
	}
	for (struct bus_conn *o = b->conns; o; o = o->next)
		if (o->inbox)
			monitor_send(b, o->inbox, c);
}

/*
 * May c send to the inbox of peer t by its unique name? It needs "send" on
 * one of the names t owns; a peer that owns none (a plain client waiting for
 * replies) can always be reached.
 */
bool inbox_send_allowed(struct bus_conn *c, struct registry_peer *t, char *why, size_t why_len)
{
	const char *owned;
	bool any = false;

	for (unsigned int i = 0; (owned = registry_peer_owned_next(t, &i));) {
		any = true;
		if (conn_allowed(c, POLICY_SEND, owned, why, why_len))
			return true;
	}
	return !any || conn_privileged(c);
}

/* --- reply capabilities ------------------------------------------------- */

/*
 * Pushes r a SEND cap to caller's inbox, for its replies to calls on name.
 * It grants no more than OPEN_INBOX would (the same policy rule, so a
 * reload revokes it alike), and it is optional: without it r asks with
 * OPEN_INBOX. So it goes only to a receiver whose queue has room, and a
 * cap that cannot be minted is simply not sent.
 */
static void reply_cap_send(struct bus *b, struct bus_conn *caller, struct bus_conn *r, const char *name)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;

	if (r == caller || !caller->inbox || !caller->peer || !r->peer || r->ended || !conn_has_room(r) ||
	    !inbox_send_allowed(r, caller->peer, NULL, 0))
		return;
	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_REPLY_CAPABILITY, 0) < 0)
		return;
	fd = cap_mint(b, caller->inbox, r, IOIPC_SUB_SEND);
	if (fd < 0)
		return;
	ctrl_write_string(&w, caller->peer->unique_name);
	ctrl_write_string(&w, name);
	if (r->sizes)
		ctrl_write_u32(&w, caller->inbox->slot_size); /* as OPEN_INBOX tells it */
	ctrl_write_fd(&w, fd);
	conn_signal(r, &w);
}

/* The live connection behind grant g, or NULL. */
static struct bus_conn *grant_conn(struct bus *b, const struct grant *g)
{
	struct bus_conn *c = conn_of_peer(registry_peer_find(b->registry, g->peer_id));

	return c && !c->dead && !c->ended ? c : NULL;
}

void reply_caps_for_caller(struct bus *b, struct bus_name *n, struct bus_conn *c)
{
	/* cap_mint adds to the caller's inbox's grants, never to n->call's */
	for (size_t i = 0; n->call && i < n->call->n_grants; i++) {
		struct bus_conn *r;

		if ((n->call->grants[i].rights & IOIPC_SUB_RECV) && (r = grant_conn(b, &n->call->grants[i])))
			reply_cap_send(b, c, r, n->name);
	}
}

void reply_caps_for_receiver(struct bus *b, struct bus_name *n, struct bus_conn *r)
{
	for (size_t i = 0; n->call && i < n->call->n_grants; i++) {
		struct bus_conn *c;

		if ((n->call->grants[i].rights & IOIPC_SUB_SEND) && (c = grant_conn(b, &n->call->grants[i])))
			reply_cap_send(b, c, r, n->name);
	}
}

/* --- policy reload and revocation ---------------------------------------- */

static void apply_limits(struct bus *b)
{
	enum quota_kind k;
	uint64_t l;
	uid_t uid;

	for (unsigned int q = 0; q < _QUOTA_MAX; q++) {
		l = policy_limit(b->policy, q);
		quota_limit_set(b->quota, q, l == UINT64_MAX ? quota_limit_default(q) : l);
	}
	for (unsigned int bk = 0; bk < _QUOTA_BUS_MAX; bk++) {
		l = policy_bus_limit(b->policy, bk);
		quota_bus_limit_set(b->quota, bk, l == UINT64_MAX ? quota_bus_limit_default(bk) : l);
	}
	quota_limit_reset_uids(b->quota);
	for (size_t i = 0; policy_limit_uid_get(b->policy, i, &uid, &k, &l); i++)
		quota_limit_set_uid(b->quota, uid, k, l);
}

/*
 * Which of rights on ch may peer p no longer hold? Owner rights (call RECV,
 * signal SEND) follow the name's ownership, the others the policy; monitor
 * rights last as long as the monitor's connection.
 */
static uint32_t grant_lost_rights(struct bus *b, struct bus_channel *ch, struct registry_peer *p,
				  uint32_t rights)
{
	struct bus_conn *c = conn_of_peer(p);
	int flags = registry_name_entry_flags(b->registry, p, ch->name);
	bool primary = registry_name_owner(b->registry, ch->name) == p;
	struct registry_peer *t;
	uint32_t lost = 0;

	/* A D-Bus client's own inbox (dbus-bridge.c): brokerd checks its policy on every message. */
	if (!c)
		return 0;
	switch (ch->kind) {
	case CTRL_CHANNEL_CALL:
		if ((rights & IOIPC_SUB_RECV) && !(primary || (flags >= 0 && (flags & CTRL_NAME_POOL))))
			lost |= IOIPC_SUB_RECV;
		if ((rights & IOIPC_SUB_SEND) && !conn_allowed(c, POLICY_SEND, ch->name, NULL, 0))
			lost |= IOIPC_SUB_SEND;
		break;
	case CTRL_CHANNEL_SIGNAL:
		if ((rights & IOIPC_SUB_SEND) && !primary)
			lost |= IOIPC_SUB_SEND;
		if ((rights & IOIPC_SUB_RECV) && !conn_allowed(c, POLICY_RECEIVE, ch->name, NULL, 0))
			lost |= IOIPC_SUB_RECV;
		break;
	case CTRL_CHANNEL_INBOX:
		t = registry_peer_resolve(b->registry, ch->name);
		if ((rights & IOIPC_SUB_SEND) && t && t != p && !inbox_send_allowed(c, t, NULL, 0))
			lost |= IOIPC_SUB_SEND;
		break;
	case CTRL_CHANNEL_DBUS: /* monitor caps only */
		break;
	}
	return lost;
}

static void cap_signal(struct bus_conn *c, enum ctrl_signal s, struct bus_channel *ch)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, s, 0) < 0)
		return;
	ctrl_write_string(&w, ch->name);
	ctrl_write_u32(&w, ch->kind);
	conn_signal(c, &w);
}

/* Take back from every holder of ch what policy and ownership no longer grant. */
static void channel_revoke(struct bus *b, struct bus_channel *ch)
{
	for (size_t i = 0; i < ch->n_grants;) {
		struct grant g = ch->grants[i];
		struct registry_peer *p = registry_peer_find(b->registry, g.peer_id);
		uint32_t lost = p ? grant_lost_rights(b, ch, p, g.rights) : g.rights;
		struct bus_conn *c;

		if (!lost) {
			i++;
			continue;
		}
		grant_revoke(b, ch, g.peer_id, lost); /* may move another grant to i */
		if (!p)
			continue;
		c = p->userdata;
		log_full(LOG_NOTICE, p->unique_name, c->cred.uid, "revoked %s right of %s on %s",
			 lost == IOIPC_SUB_BOTH ? "send and receive" :
			 lost & IOIPC_SUB_SEND	? "send" :
						  "receive",
			 p->unique_name, ch->name);
		cap_signal(c, CTRL_SIGNAL_CAPABILITY_REVOKED, ch);
		if (i < ch->n_grants && ch->grants[i].peer_id == g.peer_id)
			i++;
	}
}

static void bus_revoke(struct bus *b)
{
	/* Owners the policy no longer allows lose their names first (NameLost, promotion). */
	for (struct registry_peer *p = registry_peer_next(b->registry, NULL); p;
	     p = registry_peer_next(b->registry, p)) {
		struct bus_conn *c = conn_of_peer(p);

		/* D-Bus clients' names: RequestName checks them; a reload does not take them yet */
		for (unsigned int i = 0; c;) {
			char why[512];
			const char *name = registry_peer_entry_name(p, i, NULL);
			_cleanup_free_ char *copy = NULL;

			if (!name)
				break;
			if (conn_allowed(c, POLICY_OWN, name, why, sizeof(why))) {
				i++;
				continue;
			}
			copy = strdup(name);
			if (!copy)
				break;
			log_full(LOG_NOTICE, p->unique_name, c->cred.uid, "%s may no longer own %s: %s",
				 p->unique_name, copy, why);
			(void)registry_name_release(b->registry, p, copy);
		}
	}
	for (struct bus_name *n = b->names; n; n = n->next)
		n->revoke_pending = true;
	/* Inbox send rights depend on the policy too. */
	for (struct bus_conn *c = b->conns; c; c = c->next)
		if (c->inbox)
			channel_revoke(b, c->inbox);
	grant_revoke_pending(b);
}

/* Monitors watch what is there; they do not keep a name's channels alive. */
static bool channel_held(struct bus *b, struct bus_channel *ch)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++)
		if ((ch->grants[i].rights & ~IOIPC_SUB_MONITOR) &&
		    registry_peer_find(b->registry, ch->grants[i].peer_id))
			return true;
	return false;
}

/*
 * A name's channels live while it has an owner or a queue, an activation is
 * pending, or a connected peer holds one of its caps (a subscriber waiting
 * for the next owner). Then they go, and the quota of the uid that caused
 * them is released.
 */
static void bus_gc_names(struct bus *b)
{
	struct bus_name **pp = &b->names;

	if (!b->gc_needed)
		return;
	b->gc_needed = false;
	while (*pp) {
		struct bus_name *n = *pp;
		bool busy = n->activating || n->revoke_pending ||
			    registry_name_queue(b->registry, n->name, NULL, 0) > 0 ||
			    channel_held(b, n->call) || channel_held(b, n->signal);

		for (struct activation *a = b->activations; a && !busy; a = a->next)
			busy = strcmp(a->name, n->name) == 0;
		if (busy) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		log_debug("name %s is idle: its channels go", n->name);
		bus_name_free(b, n);
	}
}

void grant_revoke_pending(struct bus *b)
{
	for (struct bus_name *n = b->names; n; n = n->next) {
		if (!n->revoke_pending)
			continue;
		n->revoke_pending = false;
		if (n->call)
			channel_revoke(b, n->call);
		if (n->signal)
			channel_revoke(b, n->signal);
	}
	bus_gc_names(b);
}

/* Every rule of the XML not honoured as written is logged: policy-dbus.h. */
static void log_outcome(void *userdata, enum policy_dbus_outcome o, const char *file, unsigned int line,
			const char *element, const char *what)
{
	if (o == POLICY_DBUS_APPLIED || o == POLICY_DBUS_BUILTIN)
		return;
	log_warning("%s:%u: %s%s%s (%s)", file, line, element, *what ? ": " : "", what,
		    policy_dbus_outcome_to_string(o));
}

/* --dbus-config: the XML, then policy_dirs, in one policy; services from both kinds of directory. */
static int grant_reload_dbus(struct bus *b, char *err, size_t err_len)
{
	struct policy_dbus_counts n = { 0 };
	struct policy *p = NULL;
	struct service_set *s = NULL;
	struct policy_dbus_msg *m = NULL;
	int r;

	r = policy_dbus_load(b->dbus_config, b->policy_dirs, b->service_dirs, &p, &s, &m, log_outcome, NULL,
			     &n, err, err_len);
	if (r < 0) {
		log_error("policy not reloaded, keeping the previous one: %s", err);
		return r;
	}
	policy_free(b->policy);
	b->policy = p;
	policy_dbus_msg_free(b->dbus_policy);
	b->dbus_policy = m;
	apply_limits(b);
	service_set_free(b->services);
	b->services = s;
	log_notice(
		"policy loaded: %zu rules, from %s and brokerd's policy files; %u XML rules and elements applied, "
		"%u built-in, %u not honoured as written, %u not on native channels (brokerd --dbus-config-report "
		"lists them); %zu send and receive rules decided per message on the D-Bus socket; %u services",
		policy_rule_count(p), b->dbus_config, n.n[POLICY_DBUS_APPLIED], n.n[POLICY_DBUS_BUILTIN],
		n.n[POLICY_DBUS_PARTLY] + n.n[POLICY_DBUS_STRICTER] + n.n[POLICY_DBUS_NOT_HONOURED],
		n.native[POLICY_DBUS_PARTLY] + n.native[POLICY_DBUS_STRICTER] +
			n.native[POLICY_DBUS_NOT_HONOURED],
		policy_dbus_msg_count(m), n.services);
	bus_revoke(b);
	return 0;
}

/* A new policy applies: the D-Bus front end judges its eavesdroppers again (dbus-monitor-native.c). */
static void reloaded(struct bus *b)
{
	if (b->dbus_front && b->dbus_reloaded)
		b->dbus_reloaded(b->dbus_front);
}

int grant_reload(struct bus *b, char *err, size_t err_len)
{
	struct policy *p = NULL;
	struct service_set *s = NULL;
	char serr[512] = "";
	unsigned int bad = 0;
	int r;

	if (b->dbus_config) {
		r = grant_reload_dbus(b, err, err_len);
		if (r >= 0)
			reloaded(b);
		return r;
	}
	r = policy_load(&p, b->policy_dirs, err, err_len);
	if (r < 0) {
		log_error("policy not reloaded, keeping the previous one: %s", err);
		return r;
	}
	policy_free(b->policy);
	b->policy = p;
	apply_limits(b);
	log_notice("policy loaded: %zu rules", policy_rule_count(p));
	r = service_set_load(&s, b->service_dirs, &bad, serr, sizeof(serr));
	if (r == 0) {
		service_set_free(b->services);
		b->services = s;
		if (bad)
			log_warning("%u activation file(s) ignored, last error: %s", bad, serr);
	}
	bus_revoke(b);
	reloaded(b);
	return 0;
}
