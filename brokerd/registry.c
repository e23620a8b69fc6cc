/* SPDX-License-Identifier: MIT */
/*
 * registry.c - peers and names with owner queues (see registry.h).
 *
 * Names live in a sorted array (binary search, sorted listing for free),
 * peers in an array sorted by id (ids only grow, so adding appends). Each
 * queue entry is on two lists: its name's queue and its peer's entries.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/registry.h"
#include "util/array.h"
#include "util/macro.h"

struct registry_name {
	char *name;
	struct registry_owner *head, *tail;
};

struct registry_owner {
	struct registry_name *name;
	struct registry_peer *peer;
	uint32_t flags;
	struct registry_owner *qprev, *qnext; /* name's queue */
	struct registry_owner *pprev, *pnext; /* peer's entries */
};

struct registry {
	const struct registry_ops *ops;
	void *userdata;
	uint64_t next_id;
	struct registry_peer **peers;
	size_t n_peers, alloc_peers;
	struct registry_name **names;
	size_t n_names, alloc_names;
};

int registry_new(struct registry **ret, const struct registry_ops *ops, void *userdata)
{
	struct registry *r;

	if (!ret)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ops = ops;
	r->userdata = userdata;
	r->next_id = 1;
	*ret = r;
	return 0;
}

struct registry *registry_free(struct registry *r)
{
	if (!r)
		return NULL;
	/* No callbacks on teardown: the bus is going away too. */
	r->ops = NULL;
	while (r->n_peers > 0)
		registry_peer_remove(r, r->peers[r->n_peers - 1]);
	free(r->peers);
	free(r->names);
	free(r);
	return NULL;
}

/* --- lookup -------------------------------------------------------------- */

static size_t name_index(struct registry *r, const char *name, bool *found)
{
	size_t lo = 0, hi = r->n_names;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->names[mid]->name, name);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static struct registry_name *name_find(struct registry *r, const char *name)
{
	bool found;
	size_t i = name_index(r, name, &found);

	return found ? r->names[i] : NULL;
}

static struct registry_name *name_get(struct registry *r, const char *name)
{
	struct registry_name *n;
	bool found;
	size_t i = name_index(r, name, &found);

	if (found)
		return r->names[i];
	if (ARRAY_RESERVE(r->names, r->alloc_names, r->n_names + 1) < 0)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->name = strdup(name);
	if (!n->name) {
		free(n);
		return NULL;
	}
	memmove(r->names + i + 1, r->names + i, (r->n_names - i) * sizeof(*r->names));
	r->names[i] = n;
	r->n_names++;
	return n;
}

static void name_drop_if_empty(struct registry *r, struct registry_name *n)
{
	bool found;
	size_t i;

	if (n->head)
		return;
	i = name_index(r, n->name, &found);
	if (found) {
		memmove(r->names + i, r->names + i + 1, (r->n_names - i - 1) * sizeof(*r->names));
		r->n_names--;
	}
	free(n->name);
	free(n);
}

static size_t peer_index(struct registry *r, uint64_t id, bool *found)
{
	size_t lo = 0, hi = r->n_peers;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->peers[mid]->id == id) {
			*found = true;
			return mid;
		}
		if (r->peers[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

struct registry_peer *registry_peer_find(struct registry *r, uint64_t id)
{
	bool found;
	size_t i;

	if (!r)
		return NULL;
	i = peer_index(r, id, &found);
	return found ? r->peers[i] : NULL;
}

struct registry_peer *registry_peer_resolve(struct registry *r, const char *name)
{
	uint64_t id;

	if (!r || !name)
		return NULL;
	if (ctrl_unique_name_parse(name, &id) == 0)
		return registry_peer_find(r, id);
	return registry_name_owner(r, name);
}

size_t registry_peer_count(struct registry *r)
{
	return r ? r->n_peers : 0;
}

struct registry_peer *registry_peer_next(struct registry *r, struct registry_peer *prev)
{
	bool found;
	size_t i;

	if (!r || r->n_peers == 0)
		return NULL;
	if (!prev)
		return r->peers[0];
	i = peer_index(r, prev->id, &found);
	i += found ? 1 : 0;
	return i < r->n_peers ? r->peers[i] : NULL;
}

/* --- queue entries ------------------------------------------------------- */

static struct registry_owner *entry_find(struct registry_name *n, struct registry_peer *p)
{
	for (struct registry_owner *o = n->head; o; o = o->qnext)
		if (o->peer == p)
			return o;
	return NULL;
}

static void queue_unlink(struct registry_owner *o)
{
	struct registry_name *n = o->name;

	if (o->qprev)
		o->qprev->qnext = o->qnext;
	else
		n->head = o->qnext;
	if (o->qnext)
		o->qnext->qprev = o->qprev;
	else
		n->tail = o->qprev;
	o->qprev = o->qnext = NULL;
}

static void queue_insert_after(struct registry_owner *o, struct registry_owner *after)
{
	struct registry_name *n = o->name;

	o->qprev = after;
	o->qnext = after ? after->qnext : n->head;
	if (o->qnext)
		o->qnext->qprev = o;
	else
		n->tail = o;
	if (after)
		after->qnext = o;
	else
		n->head = o;
}

static struct registry_owner *entry_new(struct registry *r, struct registry_name *n, struct registry_peer *p,
					uint32_t flags)
{
	struct registry_owner *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->name = n;
	o->peer = p;
	o->flags = flags;
	o->pnext = p->owners;
	if (p->owners)
		p->owners->pprev = o;
	p->owners = o;
	p->n_owners++;
	return o;
}

static void entry_free(struct registry *r, struct registry_owner *o)
{
	struct registry_peer *p = o->peer;

	if (o->pprev)
		o->pprev->pnext = o->pnext;
	else
		p->owners = o->pnext;
	if (o->pnext)
		o->pnext->pprev = o->pprev;
	BUG_ON(p->n_owners == 0);
	p->n_owners--;
	if (r->ops && r->ops->entry_changed)
		r->ops->entry_changed(r->userdata, p, o->name->name, -1);
	free(o);
}

static void notify_owner(struct registry *r, struct registry_name *n, struct registry_peer *old,
			 struct registry_peer *new, struct registry_peer *requester)
{
	if (old != new && r->ops && r->ops->owner_changed)
		r->ops->owner_changed(r->userdata, n->name, old, new, requester);
}

int registry_name_request(struct registry *r, struct registry_peer *p, const char *name, uint32_t flags)
{
	struct registry_owner *primary, *e;
	struct registry_name *n;

	if (!r || !p || !ctrl_name_is_valid_wellknown(name) || (flags & ~CTRL_NAME_FLAGS_ALL))
		return -EINVAL;
	n = name_get(r, name);
	if (!n)
		return -ENOMEM;
	primary = n->head;
	e = entry_find(n, p);

	if (primary && primary->peer == p) {
		primary->flags = flags;
		return CTRL_NAME_ALREADY_OWNER;
	}
	if (!primary) {
		e = entry_new(r, n, p, flags);
		if (!e) {
			name_drop_if_empty(r, n);
			return -ENOMEM;
		}
		queue_insert_after(e, NULL);
		if (r->ops && r->ops->entry_changed)
			r->ops->entry_changed(r->userdata, p, n->name, +1);
		notify_owner(r, n, NULL, p, p);
		return CTRL_NAME_PRIMARY_OWNER;
	}
	if ((flags & CTRL_NAME_REPLACE_EXISTING) && (primary->flags & CTRL_NAME_ALLOW_REPLACEMENT)) {
		struct registry_peer *old = primary->peer;
		bool added = false;

		if (e) {
			queue_unlink(e);
			e->flags = flags;
		} else {
			e = entry_new(r, n, p, flags);
			if (!e)
				return -ENOMEM;
			added = true;
		}
		queue_insert_after(e, NULL);
		if (added && r->ops && r->ops->entry_changed)
			r->ops->entry_changed(r->userdata, p, n->name, +1);
		/* The replaced owner waits at the front of the queue, unless it refused to queue. */
		if (primary->flags & CTRL_NAME_DO_NOT_QUEUE) {
			queue_unlink(primary);
			entry_free(r, primary);
		}
		notify_owner(r, n, old, p, p);
		return CTRL_NAME_PRIMARY_OWNER;
	}
	if (flags & CTRL_NAME_DO_NOT_QUEUE) {
		if (e) {
			queue_unlink(e);
			entry_free(r, e);
		}
		return CTRL_NAME_EXISTS;
	}
	if (e) {
		e->flags = flags;
		return CTRL_NAME_IN_QUEUE;
	}
	e = entry_new(r, n, p, flags);
	if (!e)
		return -ENOMEM;
	queue_insert_after(e, n->tail);
	if (r->ops && r->ops->entry_changed)
		r->ops->entry_changed(r->userdata, p, n->name, +1);
	return CTRL_NAME_IN_QUEUE;
}

static void entry_release(struct registry *r, struct registry_owner *e)
{
	struct registry_name *n = e->name;
	struct registry_peer *old = e->peer;
	bool was_primary = n->head == e;

	queue_unlink(e);
	entry_free(r, e);
	if (was_primary)
		notify_owner(r, n, old, n->head ? n->head->peer : NULL, NULL);
	name_drop_if_empty(r, n);
}

int registry_name_release(struct registry *r, struct registry_peer *p, const char *name)
{
	struct registry_name *n;
	struct registry_owner *e;

	if (!r || !p || !ctrl_name_is_valid_wellknown(name))
		return -EINVAL;
	n = name_find(r, name);
	if (!n)
		return CTRL_RELEASE_NON_EXISTENT;
	e = entry_find(n, p);
	if (!e)
		return CTRL_RELEASE_NOT_OWNER;
	entry_release(r, e);
	return CTRL_RELEASE_RELEASED;
}

/* --- peers --------------------------------------------------------------- */

int registry_next_id_set(struct registry *r, uint64_t id)
{
	if (!r || id < r->next_id)
		return -EINVAL;
	r->next_id = id;
	return 0;
}

uint64_t registry_next_id(struct registry *r)
{
	return r ? r->next_id : 0;
}

int registry_peer_add(struct registry *r, uid_t uid, struct registry_peer **ret)
{
	struct registry_peer *p;

	if (!r || !ret)
		return -EINVAL;
	if (ARRAY_RESERVE(r->peers, r->alloc_peers, r->n_peers + 1) < 0)
		return -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->id = r->next_id++;
	p->uid = uid;
	ctrl_unique_name_format(p->id, p->unique_name);
	r->peers[r->n_peers++] = p;
	*ret = p;
	return 0;
}

int registry_peer_restore(struct registry *r, uid_t uid, uint64_t id, struct registry_peer **ret)
{
	struct registry_peer *p;
	bool found;
	size_t i;

	if (!r || !ret || id == 0)
		return -EINVAL;
	i = peer_index(r, id, &found);
	if (found)
		return -EEXIST;
	if (ARRAY_RESERVE(r->peers, r->alloc_peers, r->n_peers + 1) < 0)
		return -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->id = id;
	p->uid = uid;
	ctrl_unique_name_format(p->id, p->unique_name);
	memmove(r->peers + i + 1, r->peers + i, (r->n_peers - i) * sizeof(*r->peers));
	r->peers[i] = p;
	r->n_peers++;
	if (r->next_id <= id)
		r->next_id = id + 1;
	*ret = p;
	return 0;
}

int registry_name_restore(struct registry *r, struct registry_peer *p, const char *name, uint32_t flags)
{
	struct registry_name *n;
	struct registry_owner *o;

	if (!r || !p || !ctrl_name_is_valid_wellknown(name) || (flags & ~CTRL_NAME_FLAGS_ALL))
		return -EINVAL;
	n = name_get(r, name);
	if (!n)
		return -ENOMEM;
	if (entry_find(n, p))
		return -EEXIST;
	o = entry_new(r, n, p, flags);
	if (!o) {
		name_drop_if_empty(r, n);
		return -ENOMEM;
	}
	queue_insert_after(o, n->tail);
	return 0;
}

void registry_name_restore_order(struct registry *r, const char *name, const uint64_t *ids, size_t n)
{
	struct registry_name *nm;
	struct registry_owner *last = NULL;

	if (!r || !name || !(nm = name_find(r, name)))
		return;
	/* Each recorded entry in turn moves to just after the one placed before it. */
	for (size_t i = 0; i < n; i++) {
		struct registry_owner *o;

		for (o = nm->head; o && o->peer->id != ids[i]; o = o->qnext)
			;
		if (!o || o == last)
			continue;
		queue_unlink(o);
		queue_insert_after(o, last);
		last = o;
	}
}

void registry_peer_remove(struct registry *r, struct registry_peer *p)
{
	bool found;
	size_t i;

	if (!r || !p)
		return;
	while (p->owners)
		entry_release(r, p->owners);
	i = peer_index(r, p->id, &found);
	if (found) {
		memmove(r->peers + i, r->peers + i + 1, (r->n_peers - i - 1) * sizeof(*r->peers));
		r->n_peers--;
	}
	free(p);
}

/* --- queries ------------------------------------------------------------- */

struct registry_peer *registry_name_owner(struct registry *r, const char *name)
{
	struct registry_name *n;

	if (!r || !name)
		return NULL;
	n = name_find(r, name);
	return n && n->head ? n->head->peer : NULL;
}

size_t registry_name_queue(struct registry *r, const char *name, struct registry_peer **peers, size_t max)
{
	struct registry_name *n;
	size_t k = 0;

	if (!r || !name)
		return 0;
	n = name_find(r, name);
	if (!n)
		return 0;
	for (struct registry_owner *o = n->head; o; o = o->qnext, k++)
		if (k < max)
			peers[k] = o->peer;
	return k;
}

int registry_name_entry_flags(struct registry *r, struct registry_peer *p, const char *name)
{
	struct registry_name *n;
	struct registry_owner *e;

	if (!r || !p || !name)
		return -EINVAL;
	n = name_find(r, name);
	e = n ? entry_find(n, p) : NULL;
	return e ? (int)e->flags : -ENOENT;
}

size_t registry_names_list(struct registry *r, const char **names, size_t max)
{
	size_t k = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->n_names; i++) {
		if (!r->names[i]->head)
			continue;
		if (k < max)
			names[k] = r->names[i]->name;
		k++;
	}
	return k;
}

const char *registry_peer_entry_name(struct registry_peer *p, unsigned int i, bool *primary)
{
	struct registry_owner *o;

	if (!p)
		return NULL;
	for (o = p->owners; o && i > 0; o = o->pnext, i--)
		;
	if (!o)
		return NULL;
	if (primary)
		*primary = o->name->head == o;
	return o->name->name;
}

const char *registry_peer_owned_next(struct registry_peer *p, unsigned int *i)
{
	for (;;) {
		bool primary;
		const char *nm = registry_peer_entry_name(p, (*i)++, &primary);

		if (!nm || primary)
			return nm;
	}
}
