/* SPDX-License-Identifier: MIT */
/*
 * restart-io.h - what both hand-overs of a restart share (restart.c, the
 * native bus; dbus-restart.c, the D-Bus connections): the byte encoding of
 * a state, the sealed memfd it travels in, systemd's fd store, and finding
 * a stored socket again.
 */
#ifndef BROKERD_RESTART_IO_H
#define BROKERD_RESTART_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <sys/socket.h>

#include "brokerd/registry.h"

/* A state being written: a failed allocation sets oom, and everything after it is dropped. */
struct wbuf {
	uint8_t *data;
	size_t len, alloc;
	uint32_t records; /* begun so far: the end record counts them */
	bool oom;
};

void wbuf_put(struct wbuf *w, const void *p, size_t n);
void wbuf_put_u32(struct wbuf *w, uint32_t v);
void wbuf_put_u64(struct wbuf *w, uint64_t v);
void wbuf_put_str(struct wbuf *w, const char *s);
/* Starts a record of type t; wbuf_record_end() fills in its length. Returns where the length goes. */
size_t wbuf_record_begin(struct wbuf *w, uint32_t t);
void wbuf_record_end(struct wbuf *w, size_t at);

/* A state being read: reading past the end sets bad and yields zeros. */
struct rbuf {
	const uint8_t *p;
	size_t left;
	bool bad;
};

void rbuf_get(struct rbuf *r, void *out, size_t n);
uint32_t rbuf_get_u32(struct rbuf *r);
uint64_t rbuf_get_u64(struct rbuf *r);
/* A NUL-terminated copy (freed by the caller), NULL if the record is short. */
char *rbuf_get_str(struct rbuf *r);

/* A connection's socket as a state records it: how its fd is found again, and whose it was. */
struct restart_socket {
	uint64_t dev, ino;
	struct ucred cred;
};

/*
 * An entry of a name's owner queue. A queue holds native and D-Bus peers
 * alike, and each half of the state (restart.c, dbus-restart.c) restores
 * its own; other marks the entries of the other half's peers (stored as a
 * high bit of the flags, so that a state written before queues were shared
 * reads as it did).
 */
struct restart_owner {
	uint64_t peer_id;
	uint32_t flags;
	bool other;
};

/* fd's device and inode with cred; an fd that cannot be stat'ed fails the whole state (oom). */
void wbuf_put_socket(struct wbuf *w, int fd, const struct ucred *cred);
void rbuf_get_socket(struct rbuf *r, struct restart_socket *s);
/* The owner queue of name in reg, in order, with each entry's flags; peers not of kind marked other. */
void wbuf_put_queue(struct wbuf *w, struct registry *reg, const char *name, enum registry_peer_kind kind);
/* A queue as wbuf_put_queue() wrote it: *ret (freed by the caller) and *n. -EBADMSG, -ENOMEM. */
int rbuf_get_queue(struct rbuf *r, struct restart_owner **ret, size_t *n);

/*
 * One kind of record of a state: save writes every record of the kind
 * (from ctx), load reads one into the reader's state. A state is a header
 * (magic, version, the clean mark) and records of a type and a length,
 * then, from version RESTART_END_VERSION on, an end record (type
 * RESTART_REC_END, which no row may use) with the number of records
 * before it: a state cut between two records is not a smaller state.
 */
#define RESTART_REC_END	    0u
#define RESTART_END_VERSION 2u
struct restart_record {
	uint32_t type;
	const char *what;
	void (*save)(void *ctx, struct wbuf *w);
	int (*load)(void *state, struct rbuf *r);
};

/* The header, then every kind's records in the order of types, then the end record. */
void restart_state_write(struct wbuf *w, const char *magic, uint32_t version,
			 const struct restart_record *types, size_t n_types, void *ctx);
/* More than any state brokerd writes: a larger one is not a state. */
#define RESTART_STATE_MAX (1U << 30)

/*
 * Reads the state in fd into state, each record by the load of its type's
 * row; what names the state in the log. fd must be a memfd sealed as
 * restart_memfd() seals it. version is the one written; when it is
 * RESTART_END_VERSION, a state of version 1 (the same records without
 * the end record, from a brokerd before it) is read too. -EPROTO: not
 * sealed, another magic or version, no clean mark, or a type no row has;
 * -EBADMSG: cut short (also between records), a record malformed or out
 * of the rows' order; -ENOMEM. What the loads read before a failure stays
 * in state for its owner to free.
 */
int restart_state_parse(int fd, const char *what, const char *magic, uint32_t version,
			const struct restart_record *types, size_t n_types, void *state);
/* The same from size bytes at data (the fuzzers and unit tests read states so). */
int restart_state_parse_bytes(const void *data, size_t size, const char *what, const char *magic,
			      uint32_t version, const struct restart_record *types, size_t n_types,
			      void *state);

/* w's bytes in a memfd sealed against any change: its fd, or -errno. */
int restart_memfd(const char *name, const struct wbuf *w);
/* Stores n fds (any number) in systemd's fd store under name: > 0 stored, 0 no store, -errno. */
int restart_store(const char *name, const int *fds, size_t n);
/*
 * Takes the socket s recorded out of fds[n] (its slot set
 * to -1), checks that its peer is still the process that was recorded and
 * makes it non-blocking: the fd; -ENOENT when the store no longer has it;
 * -EPERM (the fd closed) when its peer is another.
 */
int restart_socket_take(int *fds, size_t n, const struct restart_socket *s);

/*
 * The drain and the clean-up before a hand-over, for at most usec (by
 * now_usec()'s clock), in rounds. A round calls flush until it says no
 * connection has output left or the time is up, waiting up to 50 ms
 * between calls for any of them to take more: flush sends what each
 * connection can take now, puts a POLLOUT entry for each one still
 * holding output into p (up to max; p is NULL to count only) and returns
 * how many still hold output. Then close_rest closes (and reaps) what
 * cannot be handed over and says whether it closed anything: what it
 * closed may have queued output for the others (signals), so another
 * round, four at most.
 */
void restart_settle(uint64_t usec, size_t (*flush)(void *ctx, struct pollfd *p, size_t max),
		    bool (*close_rest)(void *ctx), void *ctx);

#endif
