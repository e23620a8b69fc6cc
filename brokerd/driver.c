/* SPDX-License-Identifier: MIT */
/*
 * driver.c - the broker's request driver (see driver.h): decodes each
 * request, checks HELLO and privilege, and runs its handler from
 * handlers[], a table indexed by op with a static assert that every op has
 * one. The handlers that change state are here, the read-only ones in
 * query.c. Also the registry's callbacks (owner changes: NameOwnerChanged,
 * NameAcquired, NameLost, revocation, settling activations; quota of queue
 * entries) and the unique ids kept across restarts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/bus-state.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
#include "brokerd/driver.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/nsview.h"
#include "brokerd/policy.h"
#include "brokerd/query.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "brokerd/watch.h"
#include "protocol/ctrl.h"
#include "protocol/dbus-marshal.h"
#include "protocol/message.h"
#include "util/macro.h"

/* --- registry callbacks: name owner changes ------------------------------ */

static void send_name_acquired(struct bus *b, struct bus_conn *c, const char *name)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int call_fd = -1, signal_fd = -1;
	struct bus_name *n = bus_name_find(b, name);

	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_ACQUIRED, 0) < 0)
		return;
	ctrl_write_string(&w, name);
	if (n && n->call && n->signal) {
		call_fd = cap_mint(b, n->call, c, IOIPC_SUB_RECV);
		signal_fd = cap_mint(b, n->signal, c, IOIPC_SUB_SEND);
		if (call_fd >= 0 && signal_fd >= 0) {
			ctrl_write_fd(&w, call_fd);
			ctrl_write_fd(&w, signal_fd);
		}
	}
	conn_signal(c, &w);
	if (call_fd >= 0)
		reply_caps_for_receiver(b, n, c); /* the name's callers, for its replies */
}

/* NameOwnerChanged on the bus's signal channel: a channel message, body "sss" in dbus1. */
static void send_bus_name_owner_changed(struct bus *b, const char *name, const char *old_owner,
					const char *new_owner)
{
	_cleanup_(dbus_writer_deinit) struct dbus_writer dw = { 0 };
	_cleanup_free_ void *body = NULL;
	struct chmsg m = {
		.type = CHMSG_SIGNAL,
		.path = "/org/freedesktop/DBus",
		.interface = "org.freedesktop.DBus",
		.member = "NameOwnerChanged",
		.signature = "sss",
	};
	uint8_t buf[CHANNEL_MSG_MAX];
	size_t len = 0;
	int n;

	if (dbus_writer_init(&dw, "sss") < 0 || dbus_writer_append_basic(&dw, 's', name) < 0 ||
	    dbus_writer_append_basic(&dw, 's', old_owner) < 0 ||
	    dbus_writer_append_basic(&dw, 's', new_owner) < 0 || dbus_writer_finish(&dw, &body, &len) < 0)
		return;
	m.serial = ++b->signal_serial ? b->signal_serial : ++b->signal_serial;
	m.body = body;
	m.body_len = (uint32_t)len;
	n = chmsg_encode(&m, buf, sizeof(buf));
	if (n > 0)
		(void)chanmgr_send(&b->chanmgr, b->bus_signal->id, buf, (size_t)n);
}

void driver_notify_owner_changed(struct bus *b, const char *name, const char *old_owner, const char *new_owner)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };

	/* NameOwnerChanged: control signal to those who asked, channel message on "brokerd". */
	if (ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0) == 0) {
		ctrl_write_string(&w, name);
		ctrl_write_string(&w, old_owner);
		ctrl_write_string(&w, new_owner);
		for (struct bus_conn *c = b->conns; c; c = c->next)
			if (c->name_events)
				conn_signal(c, &w);
	}
	if (b->bus_signal)
		send_bus_name_owner_changed(b, name, old_owner, new_owner);
}

static void on_owner_changed(void *userdata, const char *name, struct registry_peer *old,
			     struct registry_peer *new, struct registry_peer *requester)
{
	struct bus *b = userdata;
	/* One queue for both protocols: old and new may each be a native or a D-Bus client. */
	struct bus_conn *oc = conn_of_peer(old), *nc = conn_of_peer(new);

	log_full(LOG_DEBUG, NULL, (uid_t)-1, "name %s: owner %s -> %s", name, old ? old->unique_name : "-",
		 new ? new->unique_name : "-");
	driver_notify_owner_changed(b, name, old ? old->unique_name : "", new ? new->unique_name : "");
	/* D-Bus clients see it too, and a D-Bus owner gets the native callers' calls (dbus-driver.c) */
	if (b->dbus_owner_changed)
		b->dbus_owner_changed(b->dbus_front, name, old, new);

	b->gc_needed = true;
	if (old) {
		struct bus_name *n = bus_name_find(b, name);

		if (oc && !oc->dead)
			conn_signal_name(oc, CTRL_SIGNAL_NAME_LOST, name);
		/*
		 * The old owner may still be attached to the call and signal
		 * channels: revoke its owner rights once the current operation
		 * is done (grant_revoke_pending).
		 */
		if (n)
			n->revoke_pending = true;
	}
	if (nc) {
		/* The requester gets its caps in the REQUEST_NAME reply. */
		if (new != requester)
			send_name_acquired(b, nc, name);
	}
	if (new) {
		/* match rules without a sender: watchers get the new owner's signals, a D-Bus one's too */
		watch_name_owned(b, name);
		/* OPEN_CALLs waiting for an activation: a D-Bus owner is called through the bridge */
		activation_settle(b, name, NULL, NULL);
	}
}

static void on_entry_changed(void *userdata, struct registry_peer *p, const char *name, int delta)
{
	struct bus *b = userdata;

	/* Checked by the REQUEST_NAME handler before the registry adds an entry. */
	if (delta > 0) {
		(void)quota_charge(b->quota, p->uid, QUOTA_NAMES, (uint64_t)delta);
	} else {
		quota_release(b->quota, p->uid, QUOTA_NAMES, (uint64_t)-delta);
		b->gc_needed = true;
	}
}

const struct registry_ops driver_registry_ops = {
	.owner_changed = on_owner_changed,
	.entry_changed = on_entry_changed,
};

static int deny(struct bus_conn *c, const struct ctrl_message *m, enum policy_action a, const char *name,
		const char *why)
{
	log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "denied %s %s to %s (uid %u): %s",
		 policy_action_to_string(a), name, conn_name(c), c->cred.uid, why);
	return conn_reply_error(c, m, CTRL_ERROR_ACCESS_DENIED, "uid %u may not %s %s: %s", c->cred.uid,
				policy_action_to_string(a), name, why);
}

static int no_channels(struct bus_conn *c, const struct ctrl_message *m)
{
	return conn_reply_error(c, m, CTRL_ERROR_NOT_SUPPORTED,
				"this kernel has no io_uring IPC channels (or no capability minting): %s",
				strerror(-c->bus->chanmgr.probe_error));
}

/* --- unique ids across restarts ------------------------------------------ */

#define ID_BLOCK 1024
/* After a failed write, the next try waits this long (a full disk is not fixed at once). */
#define ID_RETRY_USEC 1000000ULL

/*
 * Writes the reservation: a temporary file, flushed to its disk, renamed
 * over the old one, so the file always holds a whole number, the old one or
 * the new. 0 or -errno; on failure the temporary file is removed.
 */
static int ids_write(const char *path, uint64_t value)
{
	char tmp[4096], buf[32];
	FILE *f;
	int r = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)value);
	if (fputs(buf, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) < 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r < 0 ? r : 0;
}

/*
 * The state file holds a number above every id handed out in this boot (it
 * lives in /run): written in blocks before the ids are used, read at start.
 * When it cannot be written (a full disk, most likely) brokerd serves on:
 * one warning, a retry at most every ID_RETRY_USEC from the next HELLO, one
 * notice when it works again. Meanwhile ids go beyond what is recorded and
 * may repeat if brokerd restarts before the file could be written.
 */
void driver_ids_reserve(struct bus *b)
{
	uint64_t next = registry_next_id(b->registry), now = 0;
	int r;

	if (!b->state_path || next < b->id_reserved)
		return;
	(void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
	if (b->ids_failing && now < b->ids_retry_usec)
		return;
	r = ids_write(b->state_path, next + ID_BLOCK);
	if (r < 0) {
		if (!b->ids_failing)
			log_warning("cannot record unique ids in %s: %s (serving on; names may repeat "
				    "after a restart until it can be written)",
				    b->state_path, strerror(-r));
		b->ids_failing = true;
		b->ids_retry_usec = now + ID_RETRY_USEC;
		return;
	}
	if (b->ids_failing) {
		char upto[CTRL_UNIQUE_NAME_MAX];

		ctrl_unique_name_format(next + ID_BLOCK, upto);
		log_notice("unique ids recorded in %s again (up to %s)", b->state_path, upto);
	}
	b->ids_failing = false;
	b->id_reserved = next + ID_BLOCK;
}

void driver_ids_load(struct bus *b)
{
	char first[CTRL_UNIQUE_NAME_MAX];
	unsigned long long v = 0;
	FILE *f;

	if (!b->state_path)
		return;
	f = fopen(b->state_path, "re");
	if (f) {
		if (fscanf(f, "%llu", &v) == 1 && v > 1)
			(void)registry_next_id_set(b->registry, v);
		(void)fclose(f);
	}
	ctrl_unique_name_format(registry_next_id(b->registry), first);
	log_info("unique names start at %s", first);
	driver_ids_reserve(b);
}

/* --- handlers ------------------------------------------------------------ */

static int handle_hello(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	int failed_quota = -1;
	uint32_t flags;
	int r;

	if (c->peer)
		return conn_reply_error(c, m, CTRL_ERROR_ALREADY_HELLO, "HELLO was already sent");
	ctrl_read_u32(rd, &flags);
	if (flags & ~(CTRL_HELLO_NAME_EVENTS | CTRL_HELLO_SIZES))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown HELLO flags 0x%x", flags);

	/* Containers: how it sees others' ids, for answers about them (nsview.h). */
	free(c->nsview);
	c->nsview = NULL;
	r = nsview_read(c->cred.pid, c->pidfd, &c->nsview);
	if (r < 0)
		return r;

	r = registry_peer_add(b->registry, c->cred.uid, &c->peer);
	if (r < 0)
		return r;
	driver_ids_reserve(b);
	c->peer->userdata = c;
	c->name_events = flags & CTRL_HELLO_NAME_EVENTS;
	c->sizes = flags & CTRL_HELLO_SIZES;

	if (b->chanmgr.available) {
		r = bus_channel_new(b, CTRL_CHANNEL_INBOX, c->peer->unique_name, c->cred.uid, &failed_quota,
				    &c->inbox);
		if (r == -EDQUOT) {
			registry_peer_remove(b->registry, c->peer);
			c->peer = NULL;
			return conn_reply_quota(c, m, failed_quota);
		}
		if (r < 0) {
			registry_peer_remove(b->registry, c->peer);
			c->peer = NULL;
			return r;
		}
		fd = cap_mint(b, c->inbox, c, IOIPC_SUB_RECV);
		if (fd < 0) {
			/* Undo, so that the client may try HELLO again. */
			c->inbox = bus_channel_free(b, c->inbox);
			registry_peer_remove(b->registry, c->peer);
			c->peer = NULL;
			return fd;
		}
	}
	r = conn_reply_init(&w, m);
	if (r < 0)
		return r;
	ctrl_write_string(&w, c->peer->unique_name);
	ctrl_write_u64(&w, c->peer->id);
	ctrl_write_u32(&w, b->chanmgr.available ? CTRL_FEATURE_CHANNELS | CTRL_FEATURE_BADGES |
							  CTRL_FEATURE_MSG_SIZE | CTRL_FEATURE_ENDED_PID :
						  0);
	/* the largest message its inbox takes, to a client that asked (0: it has none) */
	if (c->sizes)
		ctrl_write_u32(&w, c->inbox ? c->inbox->slot_size : 0);
	if (fd >= 0)
		ctrl_write_fd(&w, fd);
	if (log_ratelimit_test(&b->conn_log))
		log_full(LOG_INFO, c->peer->unique_name, c->cred.uid,
			 "%s connected: pid %u uid %u gid %u%s%s", c->peer->unique_name, c->cred.pid,
			 c->cred.uid, c->cred.gid, c->label ? " label " : "", c->label ? c->label : "");
	return conn_send(c, &w);
}

static int handle_request_name(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int call_fd = -1, signal_fd = -1;
	struct bus *b = c->bus;
	struct bus_name *n = NULL;
	const char *name;
	uint32_t flags;
	char why[512];
	int r, failed_quota = -1;

	ctrl_read_string(rd, &name, NULL);
	ctrl_read_u32(rd, &flags);
	if (!ctrl_name_is_valid_wellknown(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	if (strcmp(name, CTRL_BUS_NAME) == 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "the bus name cannot be owned");
	if (flags & ~(CTRL_NAME_FLAGS_ALL | CTRL_NAME_MSG_SIZE))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (!conn_allowed(c, POLICY_OWN, name, why, sizeof(why)))
		return deny(c, m, POLICY_OWN, name, why);
	if (registry_name_entry_flags(b->registry, c->peer, name) < 0 &&
	    quota_used(b->quota, c->cred.uid, QUOTA_NAMES) >=
		    quota_limit_uid(b->quota, c->cred.uid, QUOTA_NAMES))
		return conn_reply_quota(c, m, QUOTA_NAMES);
	r = bus_name_get(b, name, c->cred.uid, &failed_quota, &n);
	if (r == -EDQUOT)
		return conn_reply_quota(c, m, failed_quota);
	if (r < 0)
		return r;

	r = registry_name_request(b->registry, c->peer, name, flags & CTRL_NAME_FLAGS_ALL);
	if (r < 0)
		return r;
	/* A replaced owner's caps die before the new owner gets its own. */
	grant_revoke_pending(b);

	if (r == CTRL_NAME_PRIMARY_OWNER || r == CTRL_NAME_ALREADY_OWNER ||
	    (r == CTRL_NAME_IN_QUEUE && (flags & CTRL_NAME_POOL))) {
		if (n->call) {
			call_fd = cap_mint(b, n->call, c, IOIPC_SUB_RECV);
			if (call_fd < 0)
				return call_fd;
		}
		if (n->signal && r != CTRL_NAME_IN_QUEUE) {
			signal_fd = cap_mint(b, n->signal, c, IOIPC_SUB_SEND);
			if (signal_fd < 0)
				return signal_fd;
		}
	}
	log_full(LOG_INFO, c->peer->unique_name, c->cred.uid, "%s requested %s: %s", c->peer->unique_name,
		 name,
		 r == CTRL_NAME_PRIMARY_OWNER ? "primary owner" :
		 r == CTRL_NAME_IN_QUEUE      ? "in queue" :
		 r == CTRL_NAME_EXISTS	      ? "exists" :
						"already owner");
	r = conn_reply_init(&w, m) < 0 ? -ENOMEM : r;
	if (r < 0)
		return r;
	ctrl_write_u32(&w, (uint32_t)r);
	grant_write_msg_size(&w, flags & CTRL_NAME_MSG_SIZE, n->signal);
	if (call_fd >= 0)
		ctrl_write_fd(&w, call_fd);
	if (signal_fd >= 0)
		ctrl_write_fd(&w, signal_fd);
	r = conn_send(c, &w);
	if (r >= 0 && call_fd >= 0)
		reply_caps_for_receiver(b, n, c); /* the name's callers, for its replies */
	return r;
}

static int handle_release_name(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus_name *n;
	const char *name;
	int r;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	r = registry_name_release(c->bus->registry, c->peer, name);
	if (r < 0)
		return r;
	if (r == CTRL_RELEASE_RELEASED) {
		n = bus_name_find(c->bus, name);
		if (n)
			n->revoke_pending = true; /* a pool member holds a call RECV cap too */
	}
	r = conn_reply_init(&w, m) < 0 ? -ENOMEM : r;
	if (r < 0)
		return r;
	ctrl_write_u32(&w, (uint32_t)r);
	return conn_send(c, &w);
}

static int handle_subscribe(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	struct bus_channel *ch = NULL;
	struct bus_name *n;
	const char *name;
	char why[512];
	bool charged = false;
	int r, failed_quota = -1;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name) && strcmp(name, CTRL_BUS_NAME) != 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	/* Policy first: a denial does not depend on the kernel. */
	if (strcmp(name, CTRL_BUS_NAME) != 0 && !conn_allowed(c, POLICY_RECEIVE, name, why, sizeof(why)))
		return deny(c, m, POLICY_RECEIVE, name, why);
	if (!b->chanmgr.available)
		return no_channels(c, m);
	if (strcmp(name, CTRL_BUS_NAME) == 0) {
		ch = b->bus_signal; /* everybody may watch the bus */
	} else {
		/* One subscription per connection and name, however often it asks again. */
		n = bus_name_find(b, name);
		if (!(n && grant_has(n->signal, c->peer->id, IOIPC_SUB_RECV))) {
			if (quota_charge(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1) < 0)
				return conn_reply_quota(c, m, QUOTA_SUBSCRIPTIONS);
			charged = true;
		}
		r = bus_name_get(b, name, c->cred.uid, &failed_quota, &n);
		if (r < 0)
			goto fail;
		ch = n->signal;
	}
	r = ch ? cap_mint(b, ch, c, IOIPC_SUB_RECV) : -EOPNOTSUPP;
	if (r < 0)
		goto fail;
	fd = r;
	if (charged)
		c->n_subscriptions++; /* given back by UNSUBSCRIBE or at disconnect */
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_fd(&w, fd);
	return conn_send(c, &w);
fail:
	/* A subscription that did not come about does not count. */
	if (charged)
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1);
	if (r == -EDQUOT)
		return conn_reply_quota(c, m, failed_quota);
	return r == -EOPNOTSUPP ? no_channels(c, m) : r;
}

/*
 * Ends c's subscription to name: its receive right is revoked in the kernel
 * (what it attached through the cap is detached), it no longer counts
 * against the subscriptions quota nor keeps the name's channels (and their
 * channels quota) alive.
 */
static int handle_unsubscribe(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	struct bus_channel *ch;
	struct bus_name *n;
	const char *name;
	bool bus_name, done;

	ctrl_read_string(rd, &name, NULL);
	bus_name = strcmp(name, CTRL_BUS_NAME) == 0;
	if (!ctrl_name_is_valid_wellknown(name) && !bus_name)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	n = bus_name ? NULL : bus_name_find(b, name);
	ch = bus_name ? b->bus_signal : n ? n->signal : NULL;
	done = grant_has(ch, c->peer->id, IOIPC_SUB_RECV);
	if (done)
		grant_revoke(b, ch, c->peer->id, IOIPC_SUB_RECV);
	if (done && !bus_name) {
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, 1);
		c->n_subscriptions--;
		b->gc_needed = true; /* maybe nobody uses the name any more */
	}
	if (done)
		log_full(LOG_DEBUG, c->peer->unique_name, c->cred.uid, "%s unsubscribed from %s",
			 c->peer->unique_name, name);
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, done ? CTRL_UNSUBSCRIBE_DONE : CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED);
	return conn_send(c, &w);
}

static int handle_open_call(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	const struct service *svc;
	struct registry_peer *owner;
	struct bus_name *n;
	const char *name;
	uint32_t flags;
	char why[512];
	int r, failed_quota = -1;
	bool owned, bridged;

	ctrl_read_string(rd, &name, NULL);
	ctrl_read_u32(rd, &flags);
	if (!ctrl_name_is_valid_wellknown(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	if (flags & ~(CTRL_CALL_NO_ACTIVATE | CTRL_CALL_NO_WAIT | CTRL_CALL_MSG_SIZE | CTRL_CALL_ENDED_PID))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	/* for good: a caller that can use the pid once can use it always */
	if (flags & CTRL_CALL_ENDED_PID)
		c->ended_pid = true;
	if (!conn_allowed(c, POLICY_SEND, name, why, sizeof(why)))
		return deny(c, m, POLICY_SEND, name, why);
	owner = registry_name_owner(b->registry, name);
	owned = owner != NULL;
	/* A D-Bus client's name: brokerd serves its call channel and passes the calls on (dbus-bridge.c). */
	bridged = owner && owner->kind == REGISTRY_PEER_DBUS && b->bridge_hooks;
	svc = owned ? NULL : service_set_find(b->services, name);
	if (!owned && (!svc || (flags & CTRL_CALL_NO_ACTIVATE)))
		return conn_reply_error(c, m, svc ? CTRL_ERROR_NAME_HAS_NO_OWNER : CTRL_ERROR_SERVICE_UNKNOWN,
					"%s has no owner%s", name, svc ? "" : " and is not activatable");

	r = bus_name_get(b, name, c->cred.uid, &failed_quota, &n);
	if (r == -EDQUOT)
		return conn_reply_quota(c, m, failed_quota);
	if (r == 0 && bridged)
		r = b->bridge_hooks->serve(b->bridge, n);
	if (r < 0)
		return r;

	if (!owned) {
		bool wait = !(flags & CTRL_CALL_NO_WAIT);

		if (wait && quota_charge(b->quota, c->cred.uid, QUOTA_ACTIVATIONS, 1) < 0)
			return conn_reply_quota(c, m, QUOTA_ACTIVATIONS);
		if (!n->activating) {
			char err[512];

			r = activation_start(b, svc, err, sizeof(err));
			if (r < 0) {
				if (wait)
					quota_release(b->quota, c->cred.uid, QUOTA_ACTIVATIONS, 1);
				log_warning("activation of %s failed: %s", name, err);
				return conn_reply_error(c, m, CTRL_ERROR_ACTIVATION_FAILED, "%s", err);
			}
			n->activating = true;
		}
		if (wait) {
			r = activation_add(b, c, m->hdr.serial, flags, name);
			if (r < 0)
				return r;
			return 0; /* replied when the name is owned or on timeout */
		}
	}
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, owned ? CTRL_CALL_OWNED : CTRL_CALL_ACTIVATING);
	grant_write_msg_size(&w, flags & CTRL_CALL_MSG_SIZE, n->call);
	if (n->call) {
		fd = cap_mint(b, n->call, c, IOIPC_SUB_SEND);
		if (fd < 0)
			return fd;
		ctrl_write_fd(&w, fd);
		/* before the caller has the cap, so before its first call */
		reply_caps_for_caller(b, n, c);
	}
	return conn_send(c, &w);
}

static int handle_open_inbox(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct registry_peer *p;
	struct bus_channel *inbox = NULL;
	const char *name;
	char why[512] = "";
	bool ok;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid name", name);
	if (!c->bus->chanmgr.available)
		return no_channels(c, m);
	p = registry_peer_resolve(c->bus->registry, name);
	if (p && p->kind == REGISTRY_PEER_NATIVE) {
		struct bus_conn *t = p->userdata;

		BUG_ON(!t); /* every native peer is a connection's */
		inbox = t->inbox;
	} else if (p) {
		/* A D-Bus caller of ours: the inbox brokerd keeps for it (dbus-bridge.c), if it has one. */
		p = NULL;
		if (c->bus->bridge_hooks)
			inbox = c->bus->bridge_hooks->inbox(c->bus->bridge, name, &p);
	}
	if (!p)
		return conn_reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	/* A well-known name needs "send" on it, a unique name see inbox_send_allowed(). */
	if (ctrl_name_is_valid_wellknown(name))
		ok = conn_allowed(c, POLICY_SEND, name, why, sizeof(why));
	else
		ok = inbox_send_allowed(c, p, why, sizeof(why));
	if (!ok)
		return deny(c, m, POLICY_SEND, name, why);
	if (!inbox)
		return no_channels(c, m);
	fd = cap_mint(c->bus, inbox, c, IOIPC_SUB_SEND);
	if (fd < 0)
		return fd;
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_string(&w, p->unique_name);
	if (c->sizes)
		ctrl_write_u32(&w, inbox->slot_size); /* what replies to it may send inline */
	ctrl_write_fd(&w, fd);
	return conn_send(c, &w);
}

static int handle_monitor(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	uint32_t flags;
	int r;

	ctrl_read_u32(rd, &flags);
	if (flags != 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (!b->chanmgr.available)
		return no_channels(c, m);
	if (!b->chanmgr.monitor)
		return conn_reply_error(c, m, CTRL_ERROR_NOT_SUPPORTED,
					"this kernel cannot mint monitor capabilities (IOIPC_SUB_MONITOR)");
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	/* Count first: the reply comes before the MonitorChannel signals. */
	ctrl_write_u32(&w, monitor_channel_count(b));
	r = conn_send(c, &w);
	if (r < 0)
		return r;
	c->monitor = true;
	log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "%s became a monitor", conn_name(c));
	monitor_announce_all(b, c);
	return 0;
}

static int handle_reload(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	char err[512] = "";
	int r;

	log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "reload requested by %s", conn_name(c));
	r = grant_reload(c->bus, err, sizeof(err));
	if (r == -EINVAL)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_POLICY, "%s", err);
	if (r < 0)
		return r;
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	return conn_send(c, &w);
}

typedef int (*bus_handler_fn)(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);

static const struct bus_handler {
	bus_handler_fn handle;
	bool before_hello;
} handlers[] = {
	[CTRL_OP_HELLO] = { .handle = handle_hello, .before_hello = true },
	[CTRL_OP_REQUEST_NAME] = { .handle = handle_request_name },
	[CTRL_OP_RELEASE_NAME] = { .handle = handle_release_name },
	[CTRL_OP_LIST_NAMES] = { .handle = query_handle_list },
	[CTRL_OP_LIST_QUEUED_OWNERS] = { .handle = query_handle_queued_owners },
	[CTRL_OP_GET_NAME_OWNER] = { .handle = query_handle_name_owner },
	[CTRL_OP_GET_CREDENTIALS] = { .handle = query_handle_credentials },
	[CTRL_OP_SUBSCRIBE] = { .handle = handle_subscribe },
	[CTRL_OP_OPEN_CALL] = { .handle = handle_open_call },
	[CTRL_OP_OPEN_INBOX] = { .handle = handle_open_inbox },
	[CTRL_OP_MONITOR] = { .handle = handle_monitor },
	[CTRL_OP_LIST_PEERS] = { .handle = query_handle_list },
	[CTRL_OP_POLICY_CHECK] = { .handle = query_handle_policy_check },
	[CTRL_OP_RELOAD] = { .handle = handle_reload },
	[CTRL_OP_QUOTA] = { .handle = query_handle_quota },
	[CTRL_OP_UNSUBSCRIBE] = { .handle = handle_unsubscribe },
	[CTRL_OP_LIST_NAMES_PAGE] = { .handle = query_handle_list },
	[CTRL_OP_LIST_PEERS_PAGE] = { .handle = query_handle_list },
	/* signal watches (watch.c) */
	[CTRL_OP_WATCH_SIGNALS] = { .handle = watch_handle_watch },
	[CTRL_OP_UNWATCH_SIGNALS] = { .handle = watch_handle_unwatch },
};
_Static_assert(ELEMENTSOF(handlers) == _CTRL_OP_MAX, "every op needs a handler");

/* --- dispatch ------------------------------------------------------------ */

void driver_dispatch(struct bus_conn *c, const uint8_t *buf, size_t len, unsigned int n_fds, bool truncated)
{
	struct ctrl_message m;
	struct ctrl_reader rd;
	const struct bus_handler *h;
	int r;

	r = truncated ? -EMSGSIZE : ctrl_message_decode(&m, buf, len, n_fds);
	if (truncated)
		(void)ctrl_message_decode(&m, buf, CTRL_HEADER_SIZE, 0); /* for the serial only */
	if (c->refused) {
		/* Over a connection limit at accept: its first request learns why, then it is closed. */
		(void)conn_reply_error(c, &m, CTRL_ERROR_QUOTA_EXCEEDED, "%s", c->refusal);
		conn_kill(c);
		return;
	}
	if (r == 0 && m.hdr.type != CTRL_TYPE_REQUEST)
		r = -EBADMSG;
	if (r < 0) {
		const char *e = CTRL_ERROR_PROTOCOL;
		const char *why = len < CTRL_HEADER_SIZE && !truncated ?
					  "datagram shorter than the 16-byte header" :
					  "malformed message";

		switch (r) {
		case -EPROTO:
			e = CTRL_ERROR_VERSION;
			why = "unsupported protocol version (this broker speaks 1)";
			break;
		case -EOPNOTSUPP:
			e = CTRL_ERROR_UNKNOWN_OP;
			why = "unknown message type or op";
			break;
		case -EMSGSIZE:
			why = "message larger than 65536 bytes";
			break;
		case -ETOOMANYREFS:
			why = "requests carry no file descriptors";
			break;
		}
		m.info = ctrl_op_get(m.hdr.code);
		if (!m.info)
			m.hdr.code = 0;
		log_full(LOG_DEBUG, conn_name(c), c->cred.uid, "bad message from %s: %s", conn_name(c), why);
		(void)conn_reply_error(c, &m, e, "%s", why);
		return;
	}
	h = &handlers[m.hdr.code];
	BUG_ON(!h->handle); /* the decoder knows only ops that handlers[] has */
	if (!c->peer && !h->before_hello) {
		(void)conn_reply_error(c, &m, CTRL_ERROR_NO_HELLO, "send HELLO first");
		return;
	}
	if (m.info->privileged && !conn_privileged(c)) {
		(void)conn_reply_error(c, &m, CTRL_ERROR_ACCESS_DENIED, "%s is for root only", m.info->name);
		return;
	}
	ctrl_reader_init(&rd, &m);
	r = h->handle(c, &m, &rd);
	if (r == -EMSGSIZE && !c->dead)
		(void)conn_reply_error(c, &m, CTRL_ERROR_FAILED, "%s: the reply would exceed %d bytes",
				       m.info->name, CTRL_MSG_MAX);
	else if (r < 0 && r != -ENOBUFS && !c->dead)
		(void)conn_reply_error(c, &m, r == -ENOMEM ? CTRL_ERROR_NO_MEMORY : CTRL_ERROR_FAILED,
				       "%s failed: %s", m.info->name, strerror(-r));
	grant_revoke_pending(c->bus);
}
