/* SPDX-License-Identifier: MIT */
/*
 * policy.h - who may own, call (send) and subscribe (receive) which names.
 *
 * Files are INI-like (see brokerd/README.md, "Policy"):
 *
 *   [default] / [group NAME|GID] / [user NAME|UID] / [mandatory] / [limits] /
 *   [limits user NAME|UID] / [channels]
 *   allow|deny own|send|receive|* NAME|PREFIX.*|*
 *   QUOTA VALUE                      (in [limits])
 *   ring NAME|PREFIX.*|* SLOTS SLOT_SIZE  (in [channels])
 *
 * Contexts are applied default, group, user, mandatory; within that order
 * the last matching rule decides. Before any rule: root is allowed,
 * everybody else denied (system bus). Pure logic besides reading files.
 */
#ifndef BROKERD_POLICY_H
#define BROKERD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "brokerd/quota.h"

#define POLICY_DIR_ETC	  "/etc/brokerd/policy.d"
#define POLICY_DIR_VENDOR "/usr/share/brokerd/policy.d"

enum policy_action {
	POLICY_OWN,
	POLICY_SEND,
	POLICY_RECEIVE,
	_POLICY_ACTION_MAX,
};

struct policy;

int policy_new(struct policy **ret);
struct policy *policy_free(struct policy *p);

/*
 * Parse text as the contents of file (used in messages). On error returns
 * -EINVAL and writes "FILE:LINE: reason" to err; p is then unchanged.
 */
int policy_parse_string(struct policy *p, const char *file, const char *text, char *err, size_t err_len);

/*
 * Load *.conf from dirs (earlier dirs mask later ones file by file; files are
 * applied sorted by name). Any error fails the whole load: the caller keeps
 * its previous policy, so a bad file never loosens anything.
 */
int policy_load(struct policy **ret, const char *const *dirs, char *err, size_t err_len);

const char *policy_action_to_string(enum policy_action a);
int policy_action_from_string(const char *s);

/*
 * A user (user) or group id from a number or a name (through NSS):
 * 0, -EINVAL for a bad number, -ENOENT for an unknown name.
 */
int policy_parse_id(const char *s, bool user, uint32_t *id);

/*
 * Decide. gids is the full group list (primary included). Returns true when
 * allowed; why (if not NULL) gets "allow own org.x.* (FILE:LINE)" or the
 * built-in default that decided.
 */
bool policy_check(const struct policy *p, uid_t uid, const gid_t *gids, size_t n_gids, enum policy_action a,
		  const char *name, char *why, size_t why_len);

/* Limits set in [limits], UINT64_MAX where the file set none. */
uint64_t policy_limit(const struct policy *p, enum quota_kind k);
/* Bus-wide limits set in [limits], UINT64_MAX where the files set none. */
uint64_t policy_bus_limit(const struct policy *p, enum quota_bus_kind k);
/* The i-th per-uid limit of [limits user X] sections; false past the end. */
bool policy_limit_uid_get(const struct policy *p, size_t i, uid_t *uid, enum quota_kind *k, uint64_t *limit);

size_t policy_rule_count(const struct policy *p);

/*
 * Ring geometry of a name's channels, from [channels]. Slots: a power of two
 * (the kernel's rule). Slot size: never below the 8 KiB every channel had
 * before, so brokerd's own messages and any client that does not learn the
 * size still fit; at most the 64 KiB a receiver takes inline (CHMSG_MAX).
 * Slots times size: at most the kernel's region limit (IOIPC_MAX_REGION_SIZE).
 */
#define POLICY_RING_SLOTS_MIN	  2U
#define POLICY_RING_SLOTS_MAX	  4096U
#define POLICY_RING_SLOT_SIZE_MIN 8192U
#define POLICY_RING_SLOT_SIZE_MAX 65536U
#define POLICY_RING_BYTES_MAX	  (64U << 20)
/* The geometry the last matching "ring" line sets for name: true, or false if none matches. */
bool policy_ring_geometry(const struct policy *p, const char *name, uint32_t *slots, uint32_t *slot_size);

/*
 * For other configuration formats (policy-dbus.c): the contexts in the order
 * they apply, a rule appended as a file's would be (pattern NAME, PREFIX.*
 * or *; action -1 for every action; -EINVAL for a bad pattern), a [limits]
 * value by its quota name (-EINVAL for an unknown one), and policy_load()
 * appending to p (on error p may hold part of it: throw it away).
 */
enum policy_scope {
	POLICY_SCOPE_DEFAULT,
	POLICY_SCOPE_GROUP,
	POLICY_SCOPE_USER,
	POLICY_SCOPE_MANDATORY,
};
int policy_add_rule(struct policy *p, enum policy_scope scope, uint32_t id, bool allow, int action,
		    const char *pattern, const char *file, unsigned int line);
int policy_set_limit(struct policy *p, const char *quota, uint64_t value);
int policy_load_into(struct policy *p, const char *const *dirs, char *err, size_t err_len);

#endif
