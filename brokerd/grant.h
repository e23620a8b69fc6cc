/* SPDX-License-Identifier: MIT */
/*
 * grant.h - the channels brokerd creates and the rights it grants on them:
 * creating and destroying channels (charged to a uid's quotas), a
 * well-known name's channels, minting badged caps and recording them as
 * grants, monitors, and taking rights back (revocation) when ownership,
 * policy (reload) or a connection goes.
 *
 * Above conn.h; below activation, query and driver. Calls nothing above it.
 */
#ifndef BROKERD_GRANT_H
#define BROKERD_GRANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "brokerd/bus-state.h"
#include "protocol/ctrl.h"

/*
 * A channel charged to uid (channels and ring_bytes quotas), announced to
 * monitors. -EDQUOT with *failed_quota set to the quota that refused.
 */
/*
 * OPEN_CALL's and REQUEST_NAME's optional field: when the request asked
 * (its MSG_SIZE flag), the largest message ch takes (its slot size; 0
 * without a channel), else nothing.
 */
void grant_write_msg_size(struct ctrl_writer *w, bool asked, const struct bus_channel *ch);
/* The kernel memory ch's ring takes: slots times slot size. */
uint64_t channel_ring_bytes(const struct bus_channel *ch);
int bus_channel_new(struct bus *b, enum ctrl_channel_kind kind, const char *name, uid_t uid,
		    int *failed_quota, struct bus_channel **ret);
/* Destroys ch in the kernel and gives its quota back; NULL is fine. Returns NULL. */
struct bus_channel *bus_channel_free(struct bus *b, struct bus_channel *ch);

/*
 * A channel a previous brokerd created (restart.c): recorded and charged
 * to uid as it was, not created again. NULL on ENOMEM.
 */
struct bus_channel *bus_channel_restore(struct bus *b, uint32_t id, enum ctrl_channel_kind kind,
					const char *name, uid_t uid);
/* Records rights of peer_id on ch as granted (a grant taken over on restart). */
int grant_record(struct bus_channel *ch, uint64_t peer_id, uint32_t rights);

/* Does the peer with this id hold all of rights on ch? (ch may be NULL.) */
bool grant_has(struct bus_channel *ch, uint64_t peer_id, uint32_t rights);
/* Takes rights on ch back from the peer in the kernel, detaching what it attached. */
void grant_revoke(struct bus *b, struct bus_channel *ch, uint64_t peer_id, uint32_t rights);
/* A cap on ch with rights, badged with c's id, recorded as a grant: the fd or a negative errno. */
int cap_mint(struct bus *b, struct bus_channel *ch, struct bus_conn *c, uint32_t rights);

struct bus_name *bus_name_find(struct bus *b, const char *name);
/* The name's record with its channels, created on first use (charged to uid). */
int bus_name_get(struct bus *b, const char *name, uid_t uid, int *failed_quota, struct bus_name **ret);
/* Frees n and its channels (n must be unlinked). Returns NULL. */
struct bus_name *bus_name_free(struct bus *b, struct bus_name *n);

/* How many channels there are for a monitor to watch. */
unsigned int monitor_channel_count(struct bus *b);
/* Sends c a MonitorChannel signal (with a monitor cap) per existing channel. */
void monitor_announce_all(struct bus *b, struct bus_conn *c);

/* May c send to peer t's inbox by its unique name (needs "send" on a name t owns)? */
bool inbox_send_allowed(struct bus_conn *c, struct registry_peer *t, char *why, size_t why_len);

/*
 * Reply capabilities (protocol/README.md, "Reply capabilities"): every
 * connection that receives n's calls gets a SEND cap to the inbox of the
 * caller c, pushed as a ReplyCapability signal, so that it can answer c's
 * calls without asking brokerd. Sent before c's OPEN_CALL reply; only what
 * OPEN_INBOX would grant, and only to receivers with room to read it.
 */
void reply_caps_for_caller(struct bus *b, struct bus_name *n, struct bus_conn *c);
/* The same for a new receiver r of n's calls: a cap for each of n's callers. */
void reply_caps_for_receiver(struct bus *b, struct bus_name *n, struct bus_conn *r);

/*
 * Revokes what names marked revoke_pending no longer grant, then frees the
 * channels of names nobody uses (if gc_needed). Run after every request.
 */
void grant_revoke_pending(struct bus *b);

/*
 * Loads policy (and limits) and activation files, then takes back whatever
 * the new policy no longer grants. A policy error: -EINVAL, the old policy
 * stays, err says FILE:LINE.
 */
int grant_reload(struct bus *b, char *err, size_t err_len);

#endif
