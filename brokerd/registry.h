/* SPDX-License-Identifier: MIT */
/*
 * registry.h - peers and well-known names with their owner queues.
 *
 * Pure logic (no I/O): D-Bus RequestName/ReleaseName semantics, unique ids
 * that are never reused, and callbacks that tell the bus about every change
 * of primary owner and every queue entry added or removed (for quotas).
 */
#ifndef BROKERD_REGISTRY_H
#define BROKERD_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/ctrl.h"

struct registry;
struct registry_name;
struct registry_owner;

/*
 * Which protocol a peer speaks: one registry holds both, so that a name has
 * one owner queue whoever asks (brokerd/README.md, "D-Bus clients"). The
 * registry does not care; its users tell what userdata points to by it.
 */
enum registry_peer_kind {
	REGISTRY_PEER_NATIVE = 0, /* a control connection (struct bus_conn) */
	REGISTRY_PEER_DBUS,	  /* a D-Bus connection (struct dbus_conn) */
};

struct registry_peer {
	uint64_t id;
	char unique_name[CTRL_UNIQUE_NAME_MAX];
	uid_t uid;
	enum registry_peer_kind kind; /* NATIVE unless set after add or restore */
	struct registry_owner *owners; /* queue entries of this peer, any name */
	unsigned int n_owners;
	void *userdata;
};

struct registry_ops {
	/*
	 * primary owner of name changed; old or new may be NULL. requester is
	 * the peer whose registry_name_request() made the change (it learns
	 * the outcome from its reply), NULL for releases and removals.
	 */
	void (*owner_changed)(void *userdata, const char *name, struct registry_peer *old_owner,
			      struct registry_peer *new_owner, struct registry_peer *requester);
	/* peer gained (+1) or lost (-1) a queue entry (primary or queued) */
	void (*entry_changed)(void *userdata, struct registry_peer *peer, const char *name, int delta);
};

int registry_new(struct registry **ret, const struct registry_ops *ops, void *userdata);
struct registry *registry_free(struct registry *r);

/* Ids handed out from now on start at id (>= the current next id only). */
int registry_next_id_set(struct registry *r, uint64_t id);
uint64_t registry_next_id(struct registry *r);

/* Allocates the next id (1, 2, ...); ids are never reused. */
int registry_peer_add(struct registry *r, uid_t uid, struct registry_peer **ret);
/*
 * A restarted brokerd takes its peers over (brokerd/restart.c): the peer
 * with exactly this id (not in use; next ids stay above it), and its queue
 * entries appended in the order they had, without callbacks.
 */
int registry_peer_restore(struct registry *r, uid_t uid, uint64_t id, struct registry_peer **ret);
int registry_name_restore(struct registry *r, struct registry_peer *p, const char *name, uint32_t flags);
/*
 * The two halves of a restart restore a name's queue apart (native peers,
 * then D-Bus ones, each appended): puts the entries of the peers ids names
 * in that order at the front, the others after them as they were. No
 * callbacks: the owner recorded is the owner again.
 */
void registry_name_restore_order(struct registry *r, const char *name, const uint64_t *ids, size_t n);
/* Drops every queue entry of the peer (owners change, queues promote), frees it. */
void registry_peer_remove(struct registry *r, struct registry_peer *p);
struct registry_peer *registry_peer_find(struct registry *r, uint64_t id);
/* A unique name, or a well-known name (its primary owner). */
struct registry_peer *registry_peer_resolve(struct registry *r, const char *name);
size_t registry_peer_count(struct registry *r);
/* Iterate peers in id order: start with NULL. */
struct registry_peer *registry_peer_next(struct registry *r, struct registry_peer *prev);

/* Returns enum ctrl_request_name_result or -EINVAL for a bad name or flags. */
int registry_name_request(struct registry *r, struct registry_peer *p, const char *name, uint32_t flags);
/* Returns enum ctrl_release_name_result or -EINVAL. */
int registry_name_release(struct registry *r, struct registry_peer *p, const char *name);

struct registry_peer *registry_name_owner(struct registry *r, const char *name);
/* Queue of name, primary owner first; returns count, fills at most n peers. */
size_t registry_name_queue(struct registry *r, const char *name, struct registry_peer **peers, size_t n);
/* Flags of p's queue entry for name, or -ENOENT. */
int registry_name_entry_flags(struct registry *r, struct registry_peer *p, const char *name);
/* Names with an owner, sorted; returns count, fills at most n. */
size_t registry_names_list(struct registry *r, const char **names, size_t n);
/* Name of p's i-th queue entry (any order) or NULL. */
const char *registry_peer_entry_name(struct registry_peer *p, unsigned int i, bool *primary);
/* The names p is the primary owner of, one a call; *i starts at 0; NULL at the end. */
const char *registry_peer_owned_next(struct registry_peer *p, unsigned int *i);

#endif
