/* SPDX-License-Identifier: MIT */
/*
 * query.c - the requests that only read the bus's state (see query.h):
 * listings of names and peers (whole or paged), queued owners, a name's
 * owner, a peer's credentials, policy checks and quotas.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/conn.h"
#include "brokerd/nsview.h"
#include "brokerd/policy.h"
#include "brokerd/query.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/macro.h"

/* --- listings ----------------------------------------------------------- */

/*
 * A paged reply keeps this much room for the next page's cursor, which is a
 * name (see CTRL_CURSOR_MAX); every entry that is not cut short fits in an
 * otherwise empty page, so each page makes progress.
 */
#define CURSOR_ROOM (2 + CTRL_CURSOR_MAX + 1)

static size_t string_size(const char *s)
{
	return 2 + strlen(s) + 1;
}

static int string_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* LIST_NAMES order: the bus name, well-known names in byte order, unique names by id. */
static int list_order(const char *a, const char *b)
{
	uint64_t ia = 0, ib = 0;
	int ga = strcmp(a, CTRL_BUS_NAME) == 0 ? 0 : ctrl_unique_name_parse(a, &ia) == 0 ? 2 : 1;
	int gb = strcmp(b, CTRL_BUS_NAME) == 0 ? 0 : ctrl_unique_name_parse(b, &ib) == 0 ? 2 : 1;

	if (ga != gb)
		return ga - gb;
	if (ga == 2)
		return ia < ib ? -1 : ia > ib;
	return strcmp(a, b);
}

/* The names LIST_NAMES lists, in list_order; they point into brokerd's state. */
static int list_names_collect(struct bus *b, uint32_t flags, const char ***ret, size_t *ret_n)
{
	size_t n, k = 0;
	const char **v;

	if (flags & CTRL_LIST_ACTIVATABLE) {
		n = service_set_count(b->services);
		v = calloc(n + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (; k < n; k++)
			v[k] = service_set_get(b->services, k)->name;
		qsort(v, n, sizeof(*v), string_cmp);
	} else {
		/* One bus: D-Bus clients and the names they own are the registry's too. */
		size_t nn = registry_names_list(b->registry, NULL, 0);

		n = 1 + nn + registry_peer_count(b->registry);
		v = calloc(n + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		v[k++] = CTRL_BUS_NAME;
		k += registry_names_list(b->registry, v + k, nn); /* sorted by the registry */
		for (struct registry_peer *p = registry_peer_next(b->registry, NULL); p && k < n;
		     p = registry_peer_next(b->registry, p))
			v[k++] = p->unique_name; /* by id */
	}
	*ret = v;
	*ret_n = k;
	return 0;
}

/*
 * LIST_NAMES, and LIST_NAMES_PAGE when paged: from the first name after
 * cursor, at most max names (0: no limit) and, paged, no more than fit in
 * one reply with the next cursor: the last name listed, or "" at the end.
 * Unpaged, a list larger than a reply fails (-EMSGSIZE).
 */
static int list_names_reply(struct bus_conn *c, const struct ctrl_message *m, uint32_t flags, uint32_t max,
			    const char *cursor, bool paged)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_free_ const char **v = NULL;
	size_t n, from = 0, i, a;
	int r;

	if (flags & ~CTRL_LIST_ACTIVATABLE)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (*cursor && !ctrl_name_is_valid_wellknown(cursor) &&
	    ((flags & CTRL_LIST_ACTIVATABLE) ||
	     (!ctrl_name_is_valid_unique(cursor) && strcmp(cursor, CTRL_BUS_NAME) != 0)))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "invalid cursor '%s'", cursor);
	r = list_names_collect(c->bus, flags, &v, &n);
	if (r < 0)
		return r;
	while (*cursor && from < n && list_order(v[from], cursor) <= 0)
		from++;
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	for (i = from; i < n && (!max || i - from < max); i++) {
		if (paged && w.len + string_size(v[i]) + CURSOR_ROOM > CTRL_MSG_MAX)
			break;
		ctrl_write_string(&w, v[i]);
	}
	ctrl_write_array_close(&w, a, (uint32_t)(i - from));
	if (paged)
		ctrl_write_string(&w, i < n ? v[i - 1] : "");
	return conn_send(c, &w);
}

int query_handle_queued_owners(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct registry *reg = c->bus->registry;
	const char *name;
	size_t n, a;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	/* Native and D-Bus owners in one queue: callers accept replies from its owners (dbus-bridge.c). */
	n = registry_name_queue(reg, name, NULL, 0);
	if (n == 0)
		return conn_reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	_cleanup_free_ struct registry_peer **q = calloc(n, sizeof(*q));
	if (!q)
		return -ENOMEM;
	(void)registry_name_queue(reg, name, q, n);
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	for (size_t i = 0; i < n; i++)
		ctrl_write_string(&w, q[i]->unique_name);
	ctrl_write_array_close(&w, a, (uint32_t)n);
	return conn_send(c, &w);
}

int query_handle_name_owner(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct registry_peer *p;
	const char *name;

	ctrl_read_string(rd, &name, NULL);
	if (strcmp(name, CTRL_BUS_NAME) == 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "the bus itself has no unique name");
	if (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid name", name);
	p = registry_peer_resolve(c->bus->registry, name); /* native or D-Bus */
	if (!p)
		return conn_reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_string(&w, p->unique_name);
	return conn_send(c, &w);
}

/* The credentials of p, a native connection's or a D-Bus connection's, as the same report gives them. */
static void peer_creds(struct bus *b, struct registry_peer *p, struct bus_peer_creds *cr)
{
	struct bus_conn *t = p->userdata;

	if (p->kind == REGISTRY_PEER_DBUS) {
		b->dbus_peer_creds(p, cr);
		return;
	}
	BUG_ON(!t); /* every peer is a connection's */
	cr->cred = t->cred;
	cr->gids = t->gids;
	cr->n_gids = t->n_gids;
	cr->pidfd = t->pidfd;
	cr->label = t->label;
	cr->n_caps = t->n_caps;
}

/*
 * A peer's pid as requester c sees it from its pid namespace (0: not
 * there, or not known for sure), checked again after /proc was read; self:
 * the peer is c.
 */
static pid_t pid_seen_by(struct bus_conn *c, const struct bus_peer_creds *cr, bool self)
{
	pid_t pid = conn_pid_running(cr->pidfd, cr->cred.pid);

	if (!c->nsview || pid <= 0)
		return pid;
	pid = self ? nsview_self_pid(c->nsview, pid) : nsview_pid(c->nsview, pid);
	return conn_pid_running(cr->pidfd, cr->cred.pid) > 0 ? pid : 0;
}

int query_handle_credentials(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus *b = c->bus;
	struct bus_peer_creds cr;
	struct registry_peer *p;
	uint32_t mask = CTRL_CREDS_UID | CTRL_CREDS_GID | CTRL_CREDS_GIDS;
	const char *name;
	pid_t pid;
	size_t a;

	ctrl_read_string(rd, &name, NULL);
	if (!ctrl_name_is_valid_wellknown(name) && !ctrl_name_is_valid_unique(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid name", name);
	p = registry_peer_resolve(b->registry, name); /* a native or a D-Bus client, or a name one owns */
	if (!p)
		return conn_reply_error(c, m, CTRL_ERROR_NAME_HAS_NO_OWNER, "%s has no owner", name);
	peer_creds(b, p, &cr);
	if (cr.pidfd >= 0) {
		fd = fcntl(cr.pidfd, F_DUPFD_CLOEXEC, 3);
		if (fd >= 0)
			mask |= CTRL_CREDS_PIDFD;
	}
	if (cr.label)
		mask |= CTRL_CREDS_LABEL;
	pid = pid_seen_by(c, &cr, p == c->peer); /* 0 once the process is gone: its pid could name another */
	if (pid > 0)
		mask |= CTRL_CREDS_PID;
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, mask);
	ctrl_write_u32(&w, (uint32_t)pid);
	ctrl_write_u32(&w, nsview_uid(c->nsview, cr.cred.uid));
	ctrl_write_u32(&w, nsview_gid(c->nsview, cr.cred.gid));
	a = ctrl_write_array_open(&w);
	for (size_t i = 0; i < cr.n_gids; i++)
		ctrl_write_u32(&w, nsview_gid(c->nsview, cr.gids[i]));
	ctrl_write_array_close(&w, a, (uint32_t)cr.n_gids);
	ctrl_write_string(&w, cr.label ? cr.label : "");
	if (fd >= 0)
		ctrl_write_fd(&w, fd);
	return conn_send(c, &w);
}

/*
 * One LIST_PEERS entry. Paged, only if it fits in room bytes (false if
 * not); but the first entry of a page always goes in, with as many of its
 * names as fit, so that a peer owning too many long names cannot stall
 * the listing.
 */
static bool write_peer(struct bus_conn *c, struct ctrl_writer *w, struct registry_peer *p, size_t room,
		       bool first)
{
	struct bus_peer_creds cr;
	const char *nm;
	size_t an, end, size;
	uint32_t k = 0;

	peer_creds(c->bus, p, &cr);
	size = string_size(p->unique_name) + 8 + 3 * 4 + string_size(cr.label ? cr.label : "") + 4 + 4;
	for (unsigned int i = 0; (nm = registry_peer_owned_next(p, &i));)
		size += string_size(nm);
	if (size > room && !first)
		return false;
	end = room == SIZE_MAX ? SIZE_MAX : w->len + room - 4; /* where the names must end */
	ctrl_write_string(w, p->unique_name);
	ctrl_write_u64(w, p->id);
	ctrl_write_u32(w, (uint32_t)pid_seen_by(c, &cr, p == c->peer)); /* 0: exited, or not known for sure */
	ctrl_write_u32(w, nsview_uid(c->nsview, cr.cred.uid));
	ctrl_write_u32(w, nsview_gid(c->nsview, cr.cred.gid));
	ctrl_write_string(w, cr.label ? cr.label : "");
	an = ctrl_write_array_open(w);
	for (unsigned int i = 0; (nm = registry_peer_owned_next(p, &i));) {
		if (w->len + string_size(nm) > end)
			break; /* cut short: the rest would not fit in any reply */
		ctrl_write_string(w, nm);
		k++;
	}
	ctrl_write_array_close(w, an, k);
	ctrl_write_u32(w, cr.n_caps);
	return true;
}

/*
 * LIST_PEERS, and LIST_PEERS_PAGE when paged (as list_names_reply, by id):
 * native and D-Bus peers merged, as their ids come from one sequence.
 */
static int list_peers_reply(struct bus_conn *c, const struct ctrl_message *m, uint32_t flags, uint32_t max,
			    const char *cursor, bool paged)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct bus *b = c->bus;
	struct registry_peer *p, *last = NULL;
	uint64_t after = 0;
	uint32_t count = 0;
	size_t a;

	if (flags != 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "unknown flags 0x%x", flags);
	if (*cursor && ctrl_unique_name_parse(cursor, &after) < 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "invalid cursor '%s'", cursor);
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	for (p = registry_peer_next(b->registry, NULL); p; p = registry_peer_next(b->registry, p)) {
		if (p->id <= after)
			continue;
		if (max && count == max)
			break;
		if (!write_peer(c, &w, p, paged ? CTRL_MSG_MAX - CURSOR_ROOM - w.len : SIZE_MAX, count == 0))
			break;
		last = p;
		count++;
	}
	ctrl_write_array_close(&w, a, count);
	if (paged)
		ctrl_write_string(&w, p && last ? last->unique_name : "");
	return conn_send(c, &w);
}

/* LIST_NAMES and LIST_PEERS, and their paged forms (flags, page size, cursor). */
int query_handle_list(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	bool paged = m->hdr.code == CTRL_OP_LIST_NAMES_PAGE || m->hdr.code == CTRL_OP_LIST_PEERS_PAGE;
	const char *cursor = "";
	uint32_t flags, max = 0;

	ctrl_read_u32(rd, &flags);
	if (paged) {
		ctrl_read_u32(rd, &max);
		ctrl_read_string(rd, &cursor, NULL);
	}
	if (m->hdr.code == CTRL_OP_LIST_NAMES || m->hdr.code == CTRL_OP_LIST_NAMES_PAGE)
		return list_names_reply(c, m, flags, max, cursor, paged);
	return list_peers_reply(c, m, flags, max, cursor, paged);
}

static int fill_gids(uid_t uid, gid_t **ret, size_t *n)
{
	char buf[4096];
	struct passwd pw, *res = NULL;
	int ng = 64;
	gid_t *g;

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res) {
		*ret = NULL;
		*n = 0;
		return 0;
	}
	for (;;) {
		g = calloc((size_t)ng, sizeof(*g));
		if (!g)
			return -ENOMEM;
		int want = ng;

		if (getgrouplist(res->pw_name, res->pw_gid, g, &want) >= 0) {
			*ret = g;
			*n = (size_t)want;
			return 0;
		}
		free(g);
		if (want <= ng || want > 65536)
			return -E2BIG;
		ng = want;
	}
}

int query_handle_policy_check(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_free_ gid_t *gids = NULL;
	const char *name, *action;
	size_t n_gids = 0;
	uint32_t uid;
	char why[512];
	bool allow;
	int a, r;

	ctrl_read_u32(rd, &uid);
	ctrl_read_string(rd, &name, NULL);
	ctrl_read_string(rd, &action, NULL);
	a = policy_action_from_string(action);
	if (a < 0)
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS,
					"unknown action '%s' (own, send, receive)", action);
	if (!ctrl_name_is_valid_wellknown(name))
		return conn_reply_error(c, m, CTRL_ERROR_INVALID_ARGS, "'%s' is not a valid well-known name",
					name);
	if (uid != c->cred.uid && !conn_privileged(c))
		return conn_reply_error(c, m, CTRL_ERROR_ACCESS_DENIED,
					"only root may check the policy of another uid");
	if (uid == c->cred.uid) {
		allow = conn_allowed(c, (enum policy_action)a, name, why, sizeof(why));
	} else {
		r = fill_gids(uid, &gids, &n_gids);
		if (r < 0)
			return r;
		allow = policy_check(c->bus->policy, uid, gids, n_gids, (enum policy_action)a, name, why,
				     sizeof(why));
	}
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	ctrl_write_u32(&w, allow ? CTRL_POLICY_ALLOW : CTRL_POLICY_DENY);
	ctrl_write_string(&w, why);
	return conn_send(c, &w);
}

static void write_quota_uid(struct ctrl_writer *w, struct quota *q, uid_t uid)
{
	size_t a;

	ctrl_write_u32(w, uid);
	a = ctrl_write_array_open(w);
	for (unsigned int k = 0; k < _QUOTA_MAX; k++) {
		ctrl_write_string(w, quota_kind_to_string(k));
		ctrl_write_u64(w, quota_used(q, uid, k));
		ctrl_write_u64(w, quota_limit_uid(q, uid, k));
	}
	ctrl_write_array_close(w, a, _QUOTA_MAX);
}

int query_handle_quota(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd)
{
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	struct quota *q = c->bus->quota;
	uint32_t uid, count = 0;
	size_t a, idx = 0;
	uid_t u;

	ctrl_read_u32(rd, &uid);
	if (uid != c->cred.uid && !conn_privileged(c))
		return conn_reply_error(c, m, CTRL_ERROR_ACCESS_DENIED,
					"only root may read the quotas of other uids");
	if (conn_reply_init(&w, m) < 0)
		return -ENOMEM;
	a = ctrl_write_array_open(&w);
	if (uid == CTRL_QUOTA_ALL_UIDS) {
		while (quota_uid_next(q, &idx, &u) > 0) {
			write_quota_uid(&w, q, u);
			count++;
		}
	} else {
		write_quota_uid(&w, q, uid);
		count = 1;
	}
	ctrl_write_array_close(&w, a, count);
	return conn_send(c, &w);
}
