/* SPDX-License-Identifier: MIT */
/*
 * restart.c - restart without losing the bus (see restart.h): the hand-over
 * to systemd's fd store on an orderly stop, the state serializer, and the
 * take-over (or the fallback to an empty bus) at start.
 *
 * The ring cannot go into the store: since Linux 6.7 the kernel refuses to
 * pass io_uring fds over a socket (net/core/scm.c, "don't allow io_uring
 * files", against reference cycles the unix garbage collector cannot see),
 * and systemd's store is fed through one. So the stopping brokerd forks a
 * keeper that holds the ring (and nothing else) and stores the keeper's
 * pidfd; the next brokerd takes the ring with pidfd_getfd() (same uid; the
 * keeper allows it under Yama) and kills the keeper. The unit has
 * KillMode=process so that systemd lets the keeper outlive the stop; it
 * exits by itself after KEEPER_USEC if nobody came.
 *
 * The state is a header (magic, version, clean mark) and a list of records
 * (type, length, payload). Each record type is a row of record_types[]
 * with its writer and reader, so new state (another module's) is a new
 * row; a reader that meets a type it does not know refuses the whole state
 * (falling back is safe, restoring half of it is not).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/admission.h"
#include "brokerd/bus-state.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/nsview.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/restart-io.h"
#include "brokerd/restart.h"
#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/macro.h"

#define STATE_MAGIC	     "BRKDSTAT"
#define STATE_VERSION	     RESTART_END_VERSION
#define FLUSH_USEC	     (1000ULL * 1000ULL)	 /* for queued replies and signals to go out */
#define DRAIN_USEC	     (1000ULL * 1000ULL)	 /* for the bus's own sends in flight */
#define KEEPER_USEC	     (60ULL * 1000ULL * 1000ULL) /* for the next brokerd to take the ring */
#define BARRIER_USEC	     (5ULL * 1000ULL * 1000ULL)
#define CONN_F_HELLO	     0x1u
#define CONN_F_NAME_EVENTS   0x2u
#define CONN_F_MONITOR	     0x4u
#define CONN_F_WATCH_SIGNALS 0x8u	/* watch.c: names owned later are handed over too */
#define CONN_F_SIZES	     0x10u	/* HELLO's SIZES: inbox sizes told in its replies and signals */
#define CONN_F_ENDED_PID     0x20u	/* OPEN_CALL asked ENDED_PID: CallReceiverEnded with the pid */
#define CONN_F_ALL	     0x3fu
#define CHANNEL_NONE	     UINT32_MAX /* no channel (ids are the kernel's, 0 included) */

enum record_tag {
	REC_RING = 1, /* struct io_uring_params of brokerd's ring, its fd number in the keeper */
	REC_BUS,      /* next unique id, lossy flag, the bus's signal channel */
	REC_CHANNEL,  /* a channel with its grants */
	REC_CONN,     /* a connection: its socket's inode, credentials, peer */
	REC_NAME,     /* a well-known name: its channels and owner queue */
};

/* --- the state as read, before anything is rebuilt ---------------------- */

struct st_grant {
	uint64_t peer_id;
	uint32_t rights;
};

struct st_channel {
	uint32_t id, kind;
	uid_t uid;
	char *name;
	struct st_grant *grants;
	size_t n_grants;
	struct bus_channel *ch; /* once rebuilt */
};

struct st_conn {
	struct restart_socket sock;
	uint64_t peer_id;
	uint32_t flags, inbox, n_caps;
	uint64_t n_subscriptions;
	int fd;
	struct bus_conn *c; /* once rebuilt */
};

struct st_name {
	char *name;
	uint32_t call, signal;
	struct restart_owner *owners;
	size_t n_owners;
};

struct state {
	bool have_ring, have_bus;
	struct io_uring_params params;
	uint32_t ring_fd;
	uint64_t next_id;
	uint32_t lossy, bus_signal;
	struct st_channel *channels;
	size_t n_channels, alloc_channels;
	struct st_conn *conns;
	size_t n_conns, alloc_conns;
	struct st_name *names;
	size_t n_names, alloc_names;
};

static void state_free(struct state *s)
{
	for (size_t i = 0; i < s->n_channels; i++) {
		free(s->channels[i].name);
		free(s->channels[i].grants);
	}
	for (size_t i = 0; i < s->n_names; i++) {
		free(s->names[i].name);
		free(s->names[i].owners);
	}
	free(s->channels);
	free(s->conns);
	free(s->names);
}

/* --- record types: one row each ---------------------------------------- */

static void save_ring(void *ctx, struct wbuf *w)
{
	struct bus *b = ctx;
	size_t at = wbuf_record_begin(w, REC_RING);

	wbuf_put(w, &b->chanmgr.params, sizeof(b->chanmgr.params));
	wbuf_put_u32(w, (uint32_t)chanmgr_fd(&b->chanmgr));
	wbuf_record_end(w, at);
}

/*
 * Could the kernel have told brokerd's ring these parameters? Set up
 * without flags, entries a power of two, and every offset inside the
 * rings they size: chanmgr_adopt() maps the ring by them and liburing
 * reads at them, so one pointing elsewhere is a read outside the mapping.
 */
static bool ring_params_sane(const struct io_uring_params *p)
{
	const struct io_sqring_offsets *so = &p->sq_off;
	const struct io_cqring_offsets *co = &p->cq_off;
	const uint32_t sq_fields[] = {
		so->head, so->tail, so->ring_mask, so->ring_entries, so->flags, so->dropped,
	};
	const uint32_t cq_fields[] = {
		co->head, co->tail, co->ring_mask, co->ring_entries, co->overflow, co->flags,
	};

	if (p->flags != 0 || p->sq_entries == 0 || p->sq_entries > 32768 ||
	    (p->sq_entries & (p->sq_entries - 1)) || p->cq_entries < p->sq_entries || p->cq_entries > 65536 ||
	    (p->cq_entries & (p->cq_entries - 1)) || so->array % 4 || co->cqes % 8 ||
	    so->array > (1U << 24) || co->cqes > (1U << 24))
		return false;
	for (size_t i = 0; i < ELEMENTSOF(sq_fields); i++)
		if (sq_fields[i] % 4 || (uint64_t)sq_fields[i] + 4 > so->array)
			return false;
	for (size_t i = 0; i < ELEMENTSOF(cq_fields); i++)
		if (cq_fields[i] % 4 || (uint64_t)cq_fields[i] + 4 > co->cqes)
			return false;
	return true;
}

static int load_ring(void *state, struct rbuf *r)
{
	struct state *s = state;

	if (s->have_ring)
		return -EBADMSG; /* one ring */
	rbuf_get(r, &s->params, sizeof(s->params));
	s->ring_fd = rbuf_get_u32(r);
	if (r->bad || !ring_params_sane(&s->params))
		return -EBADMSG;
	s->have_ring = true;
	return 0;
}

static void save_bus(void *ctx, struct wbuf *w)
{
	struct bus *b = ctx;
	size_t at = wbuf_record_begin(w, REC_BUS);

	wbuf_put_u64(w, registry_next_id(b->registry));
	wbuf_put_u32(w, b->lossy);
	wbuf_put_u32(w, b->bus_signal ? b->bus_signal->id : CHANNEL_NONE);
	wbuf_record_end(w, at);
}

static int load_bus(void *state, struct rbuf *r)
{
	struct state *s = state;

	if (s->have_bus)
		return -EBADMSG;
	s->next_id = rbuf_get_u64(r);
	s->lossy = rbuf_get_u32(r);
	s->bus_signal = rbuf_get_u32(r);
	s->have_bus = true;
	return 0;
}

static void save_one_channel(struct wbuf *w, struct bus_channel *ch)
{
	size_t at;

	if (!ch)
		return;
	at = wbuf_record_begin(w, REC_CHANNEL);
	wbuf_put_u32(w, ch->id);
	wbuf_put_u32(w, ch->kind);
	wbuf_put_u32(w, ch->charged_uid);
	wbuf_put_str(w, ch->name);
	wbuf_put_u32(w, (uint32_t)ch->n_grants);
	for (size_t i = 0; i < ch->n_grants; i++) {
		wbuf_put_u64(w, ch->grants[i].peer_id);
		wbuf_put_u32(w, ch->grants[i].rights);
	}
	wbuf_record_end(w, at);
}

static void save_channels(void *ctx, struct wbuf *w)
{
	struct bus *b = ctx;

	save_one_channel(w, b->bus_signal);
	for (struct bus_name *n = b->names; n; n = n->next) {
		save_one_channel(w, n->call);
		save_one_channel(w, n->signal);
	}
	for (struct bus_conn *c = b->conns; c; c = c->next)
		save_one_channel(w, c->inbox);
}

static int load_channel(void *state, struct rbuf *r)
{
	struct state *s = state;
	struct st_channel *ch;
	uint32_t n;

	if (ARRAY_RESERVE(s->channels, s->alloc_channels, s->n_channels + 1) < 0)
		return -ENOMEM;
	ch = &s->channels[s->n_channels++];
	*ch = (struct st_channel){ 0 };
	ch->id = rbuf_get_u32(r);
	ch->kind = rbuf_get_u32(r);
	ch->uid = rbuf_get_u32(r);
	ch->name = rbuf_get_str(r);
	n = rbuf_get_u32(r);
	if (r->bad || ch->kind < CTRL_CHANNEL_INBOX || ch->kind > CTRL_CHANNEL_SIGNAL || n > r->left / 12)
		return -EBADMSG;
	ch->grants = calloc(n ? n : 1, sizeof(*ch->grants));
	if (!ch->grants)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		ch->grants[i].peer_id = rbuf_get_u64(r);
		ch->grants[i].rights = rbuf_get_u32(r);
	}
	ch->n_grants = n;
	return 0;
}

static void save_conns(void *ctx, struct wbuf *w)
{
	struct bus *b = ctx;

	for (struct bus_conn *c = b->conns; c; c = c->next) {
		size_t at = wbuf_record_begin(w, REC_CONN);

		wbuf_put_socket(w, c->fd, &c->cred);
		wbuf_put_u64(w, c->peer ? c->peer->id : 0);
		wbuf_put_u32(w, (c->peer ? CONN_F_HELLO : 0) | (c->name_events ? CONN_F_NAME_EVENTS : 0) |
					(c->monitor ? CONN_F_MONITOR : 0) |
					(c->watch_signals ? CONN_F_WATCH_SIGNALS : 0) |
					(c->sizes ? CONN_F_SIZES : 0) | (c->ended_pid ? CONN_F_ENDED_PID : 0));
		wbuf_put_u32(w, c->inbox ? c->inbox->id : CHANNEL_NONE);
		wbuf_put_u32(w, c->n_caps);
		wbuf_put_u64(w, c->n_subscriptions);
		wbuf_record_end(w, at);
	}
}

static int load_conn(void *state, struct rbuf *r)
{
	struct state *s = state;
	struct st_conn *c;

	if (ARRAY_RESERVE(s->conns, s->alloc_conns, s->n_conns + 1) < 0)
		return -ENOMEM;
	c = &s->conns[s->n_conns++];
	*c = (struct st_conn){ .fd = -1 };
	rbuf_get_socket(r, &c->sock);
	c->peer_id = rbuf_get_u64(r);
	c->flags = rbuf_get_u32(r);
	c->inbox = rbuf_get_u32(r);
	c->n_caps = rbuf_get_u32(r);
	c->n_subscriptions = rbuf_get_u64(r);
	return r->bad || (c->flags & ~CONN_F_ALL) ? -EBADMSG : 0;
}

static void save_names(void *ctx, struct wbuf *w)
{
	struct bus *b = ctx;

	for (struct bus_name *n = b->names; n; n = n->next) {
		size_t at = wbuf_record_begin(w, REC_NAME);

		wbuf_put_str(w, n->name);
		wbuf_put_u32(w, n->call ? n->call->id : CHANNEL_NONE);
		wbuf_put_u32(w, n->signal ? n->signal->id : CHANNEL_NONE);
		wbuf_put_queue(w, b->registry, n->name, REGISTRY_PEER_NATIVE); /* D-Bus peers: dbus-restart.c's */
		wbuf_record_end(w, at);
	}
}

static int load_name(void *state, struct rbuf *r)
{
	struct state *s = state;
	struct st_name *n;

	if (ARRAY_RESERVE(s->names, s->alloc_names, s->n_names + 1) < 0)
		return -ENOMEM;
	n = &s->names[s->n_names++];
	*n = (struct st_name){ 0 };
	n->name = rbuf_get_str(r);
	n->call = rbuf_get_u32(r);
	n->signal = rbuf_get_u32(r);
	if (r->bad || !ctrl_name_is_valid_wellknown(n->name))
		return -EBADMSG;
	return rbuf_get_queue(r, &n->owners, &n->n_owners);
}

/*
 * Every piece of state that survives a restart. Written in this order, so
 * that a reader knows the channels before the connections and names that
 * refer to them. Policy, limits and activation files are read again, not
 * stored; pending activations are failed before the hand-over.
 */
static const struct restart_record record_types[] = {
	{ REC_RING, "ring", save_ring, load_ring },
	{ REC_BUS, "bus", save_bus, load_bus },
	{ REC_CHANNEL, "channel", save_channels, load_channel },
	{ REC_CONN, "connection", save_conns, load_conn },
	{ REC_NAME, "name", save_names, load_name },
};

/* --- the hand-over --------------------------------------------------------- */

bool restart_fdname_is_ours(const char *name)
{
	return name &&
	       (strcmp(name, RESTART_FDNAME_STATE) == 0 || strcmp(name, RESTART_FDNAME_KEEPER) == 0 ||
		strcmp(name, RESTART_FDNAME_KEEPER_WATCH) == 0 || strcmp(name, RESTART_FDNAME_CONN) == 0 ||
		strcmp(name, RESTART_FDNAME_DBUS_CONN) == 0 || strcmp(name, RESTART_FDNAME_DBUS_STATE) == 0);
}

bool restart_fdname_is_stored(const char *name)
{
	return name && strncmp(name, "brokerd-", 8) == 0;
}

static void store_clear(void)
{
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_STATE);
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_KEEPER);
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_KEEPER_WATCH);
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_CONN);
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_DBUS_CONN);
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_DBUS_STATE);
}

/* Every grant on ch taken back, ch destroyed (the keeper's last act when nobody came). */
static void channel_abandon(struct bus *b, struct bus_channel *ch)
{
	for (size_t i = 0; ch && i < ch->n_grants; i++)
		(void)chanmgr_revoke(&b->chanmgr, ch->id, ch->grants[i].rights, ch->grants[i].peer_id);
	if (ch)
		(void)chanmgr_destroy(&b->chanmgr, ch->id);
}

/* Closes every fd but a and b (a < b). */
static int close_all_but(int a, int b)
{
	if ((a > 3 && syscall(SYS_close_range, 3, a - 1, 0) < 0) ||
	    (b > a + 1 && syscall(SYS_close_range, a + 1, b - 1, 0) < 0) ||
	    syscall(SYS_close_range, b + 1, ~0U, 0) < 0)
		return -errno;
	return 0;
}

/*
 * Forks the keeper of the ring: it closes every other fd but its end of
 * the watch socket pair, lets a process of its uid take the ring
 * (pidfd_getfd needs ptrace access, which Yama restricts to descendants
 * unless allowed), and waits to be killed. The other end of the pair
 * (*watch) goes into the fd store: on `systemctl stop` systemd drops the
 * store, the keeper sees the hang-up and revokes every grant it knows from
 * the bus it was forked with at once, as a stopping brokerd always did, so
 * a stopped bus leaves no capability usable. If nobody comes at all (a
 * store that is kept but never taken), it does so after KEEPER_USEC.
 * Returns its pidfd.
 */
static int keeper_start(struct bus *b, int *watch)
{
	int ring = chanmgr_fd(&b->chanmgr), pidfd, pair[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		close(pair[0]);
		close(pair[1]);
		return r;
	}
	if (pid == 0) {
		struct pollfd p = { .fd = pair[1], .events = POLLIN };
		uint64_t end = now_usec() + KEEPER_USEC;

		if (close_all_but(ring < pair[1] ? ring : pair[1], ring < pair[1] ? pair[1] : ring) < 0)
			_exit(1);
		(void)prctl(PR_SET_NAME, "brokerd-keeper");
		(void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
		/* any event on the watch is its hang-up: nobody writes there */
		while (now_usec() < end && poll(&p, 1, (int)((end - now_usec()) / 1000) + 1) <= 0)
			;
		channel_abandon(b, b->bus_signal);
		for (struct bus_name *n = b->names; n; n = n->next) {
			channel_abandon(b, n->call);
			channel_abandon(b, n->signal);
		}
		for (struct bus_conn *c = b->conns; c; c = c->next)
			channel_abandon(b, c->inbox);
		_exit(0);
	}
	close(pair[1]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int r = -errno;

		(void)kill(pid, SIGKILL);
		close(pair[0]);
		return r;
	}
	*watch = pair[0];
	return pidfd;
}

/*
 * Kills the keeper and only then lets its watch go: a keeper that saw the
 * hang-up first would revoke what the next brokerd has just taken over.
 */
static void keeper_kill(int pidfd, int watch)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	if (pidfd >= 0) {
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		(void)poll(&p, 1, 1000); /* readable once it exited */
		close(pidfd);
	}
	if (watch >= 0)
		close(watch);
}

/* Can c go to the next brokerd as it is? */
static bool conn_handable(struct bus_conn *c)
{
	return !c->dead && !c->ended && !c->closing && !c->refused && !c->out_head;
}

static size_t flush_conns(void *ctx, struct pollfd *p, size_t max)
{
	struct bus *b = ctx;
	size_t n = 0;

	for (struct bus_conn *c = b->conns; c; c = c->next) {
		if (c->dead || c->ended || !c->out_head)
			continue;
		if (conn_flush(c) < 0) {
			conn_kill(c);
		} else if (c->out_head) {
			if (p && n < max)
				p[n] = (struct pollfd){ .fd = c->fd, .events = POLLOUT };
			n++;
		}
	}
	return n;
}

/*
 * Ends (the normal way: names go, grants are revoked) every connection
 * that cannot be handed over as it is: whether any went.
 */
static bool end_unhandable(void *ctx)
{
	struct bus *b = ctx;
	bool ended = false;

	for (struct bus_conn *c = b->conns, *next; c; c = next) {
		next = c->next;
		if (!c->ended && !conn_handable(c)) {
			log_full(LOG_NOTICE, conn_name(c), c->cred.uid, "%s cannot be handed over (%s): closing it",
				 conn_name(c),
				 c->closing  ? "over its output limit" :
				 c->refused  ? "refused" :
				 c->out_head ? "does not read its replies" :
					       "gone");
			admission_conn_reap_later(c);
			ended = true;
		}
	}
	admission_settle(b);
	return ended;
}

int restart_save(struct bus *b)
{
	_cleanup_free_ int *fds = NULL;
	struct wbuf w = { 0 };
	size_t n = 0;
	int r, memfd = -1, keeper = -1, watch = -1;

	if (!getenv("NOTIFY_SOCKET") || !b->chanmgr.available)
		return -EOPNOTSUPP; /* no fd store, or nothing in the kernel to keep */
	log_info("handing the bus over to the next brokerd");

	/* Stop taking new work; unread requests stay in the sockets for the next one. */
	(void)sd_event_source_set_enabled(b->listen_src, SD_EVENT_OFF);
	for (struct bus_conn *c = b->conns; c; c = c->next)
		(void)sd_event_source_set_enabled(c->src, SD_EVENT_OFF);
	/* A unit being started cannot be watched from the next process: those calls fail now. */
	while (b->activations) {
		char *name = strdup(b->activations->name);

		if (!name)
			return -ENOMEM;
		activation_settle(b, name, CTRL_ERROR_ACTIVATION_FAILED,
				  "brokerd restarted while the service was being activated");
		free(name);
	}
	grant_revoke_pending(b);
	admission_settle(b);
	/* what is queued goes out, for at most FLUSH_USEC; what cannot go over is ended */
	restart_settle(FLUSH_USEC, flush_conns, end_unhandable, b);
	r = chanmgr_drain(&b->chanmgr, DRAIN_USEC);
	if (r < 0) {
		log_error("bus signals still in flight: cannot hand over");
		return r;
	}

	restart_state_write(&w, STATE_MAGIC, STATE_VERSION, record_types, ELEMENTSOF(record_types), b);
	if (w.oom) {
		free(w.data);
		return -ENOMEM;
	}

	memfd = restart_memfd("brokerd-state", &w);
	if (memfd < 0) {
		r = memfd;
		log_error("cannot write the state for the next brokerd: %s", strerror(-r));
		goto fail;
	}

	/* The ring first: without it the connections are worth nothing; the state last. */
	keeper = keeper_start(b, &watch);
	if (keeper < 0) {
		r = keeper;
		log_error("cannot start the ring's keeper: %s", strerror(-r));
		goto fail;
	}
	r = restart_store(RESTART_FDNAME_KEEPER, &keeper, 1);
	if (r > 0)
		r = restart_store(RESTART_FDNAME_KEEPER_WATCH, &watch, 1);
	if (r <= 0)
		goto fail_store;
	fds = calloc(b->n_conns + 1, sizeof(*fds));
	if (!fds) {
		r = -ENOMEM;
		goto fail;
	}
	for (struct bus_conn *c = b->conns; c; c = c->next)
		fds[n++] = c->fd;
	if (n > 0) {
		r = restart_store(RESTART_FDNAME_CONN, fds, n);
		if (r <= 0)
			goto fail_store;
	}
	r = restart_store(RESTART_FDNAME_STATE, &memfd, 1);
	if (r <= 0)
		goto fail_store;
	/* Everything is in the store before this process is gone. */
	r = sd_notify_barrier(0, BARRIER_USEC);
	if (r < 0)
		goto fail_store;
	log_info("handed over: %zu bytes of state, %u connections", w.len, b->n_conns);
	close(keeper);
	close(watch); /* the store's copy is the one that counts now */
	close(memfd);
	free(w.data);
	return 0;

fail_store:
	if (r == 0)
		r = -EOPNOTSUPP;
	log_error("cannot store fds with systemd (FileDescriptorStoreMax=?): %s", strerror(-r));
	store_clear();
fail:
	if (keeper >= 0)
		keeper_kill(keeper, watch);
	if (memfd >= 0)
		close(memfd);
	free(w.data);
	return r;
}

/* --- the take-over --------------------------------------------------------- */

static int state_parse(struct state *s, int fd)
{
	int r = restart_state_parse(fd, "state", STATE_MAGIC, STATE_VERSION, record_types,
				    ELEMENTSOF(record_types), s);

	if (r == 0 && (!s->have_ring || !s->have_bus))
		r = -EBADMSG;
	return r;
}

static struct st_channel *st_channel_find(struct state *s, uint32_t id)
{
	for (size_t i = 0; i < s->n_channels; i++)
		if (s->channels[i].id == id)
			return &s->channels[i];
	return NULL;
}

static struct st_conn *st_conn_find(struct state *s, uint64_t peer_id)
{
	for (size_t i = 0; peer_id && i < s->n_conns; i++)
		if (s->conns[i].peer_id == peer_id)
			return &s->conns[i];
	return NULL;
}

/*
 * Marks the channel id as used by one holder of kind: false if it is not
 * there, of another kind, or held already. Each channel has one holder
 * (the bus, a name, a connection's inbox), which frees it: two would free
 * it twice.
 */
static bool st_channel_hold(struct state *s, uint32_t id, uint32_t kind, uint8_t *held)
{
	struct st_channel *ch;

	if (id == CHANNEL_NONE)
		return true;
	ch = st_channel_find(s, id);
	if (!ch || ch->kind != kind || held[ch - s->channels])
		return false;
	held[ch - s->channels] = 1;
	return true;
}

/* Is the queue of n well-formed: no peer twice, known flags, our own entries' peers there? */
static bool st_name_consistent(struct state *s, const struct st_name *n)
{
	for (size_t j = 0; j < n->n_owners; j++) {
		const struct restart_owner *o = &n->owners[j];

		if (!o->peer_id || (o->flags & ~CTRL_NAME_FLAGS_ALL))
			return false;
		if (!o->other && !st_conn_find(s, o->peer_id))
			return false;
		for (size_t k = 0; k < j; k++)
			if (n->owners[k].peer_id == o->peer_id)
				return false;
	}
	return true;
}

/*
 * What rebuild() takes for granted, checked before anything is touched:
 * every channel and peer a record refers to is there, each channel has
 * one holder of its kind and none is left without one, no channel id,
 * peer id or name is there twice, every queue is well-formed.
 */
static bool state_consistent(struct state *s)
{
	_cleanup_free_ uint8_t *held = calloc(s->n_channels ? s->n_channels : 1, 1);

	if (!held)
		return false;
	for (size_t i = 0; i < s->n_channels; i++)
		if (st_channel_find(s, s->channels[i].id) != &s->channels[i])
			return false;
	if (!st_channel_hold(s, s->bus_signal, CTRL_CHANNEL_SIGNAL, held))
		return false;
	for (size_t i = 0; i < s->n_conns; i++) {
		if (!st_channel_hold(s, s->conns[i].inbox, CTRL_CHANNEL_INBOX, held))
			return false;
		if (s->conns[i].peer_id && st_conn_find(s, s->conns[i].peer_id) != &s->conns[i])
			return false;
		if (!!s->conns[i].peer_id != !!(s->conns[i].flags & CONN_F_HELLO))
			return false;
	}
	for (size_t i = 0; i < s->n_names; i++) {
		struct st_name *n = &s->names[i];

		if (!st_channel_hold(s, n->call, CTRL_CHANNEL_CALL, held) ||
		    !st_channel_hold(s, n->signal, CTRL_CHANNEL_SIGNAL, held) || !st_name_consistent(s, n))
			return false;
		for (size_t k = 0; k < i; k++)
			if (strcmp(s->names[k].name, n->name) == 0)
				return false;
	}
	for (size_t i = 0; i < s->n_channels; i++)
		if (!held[i])
			return false;
	return true;
}

/*
 * Gives every recorded connection its fd: the stored socket with the same
 * inode, still connected to the process that was recorded. A socket the
 * store no longer has (systemd drops one whose peer hung up) gets a closed
 * socketpair, so that the connection ends the normal way once running.
 */
static int conns_match(struct state *s, struct restart_fds *fds)
{
	for (size_t i = 0; i < s->n_conns; i++) {
		struct st_conn *sc = &s->conns[i];

		sc->fd = restart_socket_take(fds->conns, fds->n_conns, &sc->sock);
		if (sc->fd == -EPERM) {
			log_warning("restart: connection of pid %u is not what was recorded",
				    (unsigned int)sc->sock.cred.pid);
			return -EPERM;
		}
		if (sc->fd < 0) {
			int sp[2];

			if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) < 0)
				return -errno;
			close(sp[1]);
			sc->fd = sp[0];
		}
	}
	return 0;
}

/* Nothing usable: take back every recorded right (if the ring can still be used), close it all. */
static void fallback(struct bus *b, struct state *s, struct restart_fds *fds, bool parsed)
{
	struct chanmgr m;
	size_t grants = 0;

	if (parsed && fds->ring >= 0 && s->n_channels > 0 &&
	    chanmgr_adopt(&m, fds->ring, &s->params, s->channels[0].id) == 0) {
		for (size_t i = 0; i < s->n_channels; i++) {
			for (size_t j = 0; j < s->channels[i].n_grants; j++, grants++)
				(void)chanmgr_revoke(&m, s->channels[i].id, s->channels[i].grants[j].rights,
						     s->channels[i].grants[j].peer_id);
			(void)chanmgr_destroy(&m, s->channels[i].id);
		}
		chanmgr_deinit(&m); /* closes the ring fd */
		fds->ring = -1;
	}
	for (size_t i = 0; i < s->n_conns; i++)
		if (s->conns[i].fd >= 0)
			close(s->conns[i].fd);
	for (size_t i = 0; i < fds->n_conns; i++)
		if (fds->conns[i] >= 0)
			close(fds->conns[i]);
	if (fds->ring >= 0)
		close(fds->ring);
	log_warning("restart: starting with an empty bus (%zu grants revoked, %zu connections closed); "
		    "clients reconnect",
		    grants, s->n_conns > fds->n_conns ? s->n_conns : fds->n_conns);
}

static struct bus_channel *channel_of(struct state *s, uint32_t id)
{
	struct st_channel *c = id == CHANNEL_NONE ? NULL : st_channel_find(s, id);

	return c ? c->ch : NULL;
}

/* Rebuilds the bus from a state that was checked. Only memory can fail here. */
static int rebuild(struct bus *b, struct state *s)
{
	for (size_t i = 0; i < s->n_channels; i++) {
		struct st_channel *sc = &s->channels[i];

		sc->ch = bus_channel_restore(b, sc->id, sc->kind, sc->name, sc->uid);
		if (!sc->ch)
			return -ENOMEM;
		for (size_t j = 0; j < sc->n_grants; j++)
			if (grant_record(sc->ch, sc->grants[j].peer_id, sc->grants[j].rights) < 0)
				return -ENOMEM;
	}
	b->bus_signal = channel_of(s, s->bus_signal);
	b->lossy = s->lossy;
	for (size_t i = 0; i < s->n_conns; i++) {
		struct st_conn *sc = &s->conns[i];
		struct bus_conn *c;
		int r = admission_conn_restore(b, sc->fd, &sc->sock.cred, sc->peer_id != 0, &c);

		if (r < 0)
			return r;
		sc->fd = -1; /* the connection's now */
		sc->c = c;
		c->name_events = sc->flags & CONN_F_NAME_EVENTS;
		c->monitor = sc->flags & CONN_F_MONITOR;
		c->watch_signals = sc->flags & CONN_F_WATCH_SIGNALS;
		c->sizes = sc->flags & CONN_F_SIZES;
		c->ended_pid = sc->flags & CONN_F_ENDED_PID;
		c->inbox = channel_of(s, sc->inbox);
		c->n_caps = sc->n_caps;
		c->n_subscriptions = sc->n_subscriptions;
		(void)quota_charge_restored(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, sc->n_subscriptions);
		if (sc->peer_id) {
			r = registry_peer_restore(b->registry, c->cred.uid, sc->peer_id, &c->peer);
			if (r < 0)
				return r;
			c->peer->userdata = c;
			/* its namespaces are read again, as at HELLO: nothing to trust in the state */
			r = nsview_read(c->cred.pid, c->pidfd, &c->nsview);
			if (r < 0)
				return r;
		}
	}
	/*
	 * Whose process each grant ends with, as cap_mint() recorded it: the
	 * pid CallReceiverEnded names, which a caller matches against the
	 * kernel's receipts. Not stored: it is the connection's, checked
	 * against the socket's SO_PEERCRED above.
	 */
	for (size_t i = 0; i < s->n_channels; i++) {
		struct bus_channel *ch = s->channels[i].ch;

		for (size_t j = 0; j < ch->n_grants; j++) {
			struct st_conn *sc = st_conn_find(s, ch->grants[j].peer_id);

			ch->grants[j].pid = sc ? sc->sock.cred.pid : 0;
		}
	}
	for (size_t i = 0; i < s->n_names; i++) {
		struct st_name *sn = &s->names[i];
		struct bus_name *n = calloc(1, sizeof(*n));

		if (!n || !(n->name = strdup(sn->name))) {
			free(n);
			return -ENOMEM;
		}
		n->call = channel_of(s, sn->call);
		n->signal = channel_of(s, sn->signal);
		n->next = b->names;
		b->names = n;
		for (size_t j = 0; j < sn->n_owners; j++) {
			struct bus_conn *c;
			int r;

			/* A D-Bus client's entry: the D-Bus state restores it and puts it back in place. */
			if (sn->owners[j].other)
				continue;
			c = st_conn_find(s, sn->owners[j].peer_id)->c;
			r = registry_name_restore(b->registry, c->peer, sn->name, sn->owners[j].flags);
			if (r < 0)
				return r;
			(void)quota_charge_restored(b->quota, c->cred.uid, QUOTA_NAMES, 1);
		}
	}
	(void)registry_next_id_set(b->registry, s->next_id);
	/* A name nobody holds any more (its last user left meanwhile) goes the normal way. */
	b->gc_needed = true;
	return 0;
}

void restart_discard(struct bus *b, struct restart_fds *fds, const char *why)
{
	struct state s = { 0 };

	store_clear();
	keeper_kill(fds->keeper, fds->keeper_watch);
	fds->keeper = fds->keeper_watch = -1;
	if (fds->state >= 0)
		close(fds->state);
	fds->state = -1;
	if (why)
		log_warning("restart: %s", why);
	fallback(b, &s, fds, false);
}

int restart_state_check(const void *data, size_t size)
{
	struct state s = { 0 };
	int r = restart_state_parse_bytes(data, size, "state", STATE_MAGIC, STATE_VERSION, record_types,
					  ELEMENTSOF(record_types), &s);

	if (r == 0 && (!s.have_ring || !s.have_bus))
		r = -EBADMSG;
	if (r == 0 && !state_consistent(&s))
		r = -EBADMSG;
	state_free(&s);
	return r;
}

int restart_load(struct bus *b, struct restart_fds *fds)
{
	struct state s = { 0 };
	char next[CTRL_UNIQUE_NAME_MAX];
	bool parsed = false;
	int r;

	if (fds->state < 0 || fds->foreign) {
		const char *why = NULL;

		if (fds->foreign)
			why = "the store holds what no single hand-over of ours leaves";
		else if (fds->n_conns > 0 || fds->keeper >= 0)
			why = "stored fds without a state (an unfinished hand-over)";
		restart_discard(b, fds, why);
		return 0;
	}
	/* First: a crash from here on must not find this state again, it will be stale. */
	store_clear();
	r = state_parse(&s, fds->state);
	close(fds->state);
	fds->state = -1;
	if (r < 0 && fds->keeper >= 0) {
		keeper_kill(fds->keeper, fds->keeper_watch);
		fds->keeper = fds->keeper_watch = -1;
	}
	if (r == 0) {
		parsed = true;
		if (!state_consistent(&s)) {
			log_warning("restart: the stored state refers to channels or peers it does not have");
			r = -EBADMSG;
		}
	}
	if (parsed && fds->keeper >= 0) {
		/* also when the state is unusable: the fallback revokes through it */
		fds->ring = (int)syscall(SYS_pidfd_getfd, fds->keeper, (int)s.ring_fd, 0);
		if (fds->ring < 0)
			log_warning("restart: cannot take the ring from its keeper: %m");
	}
	/* the ring is ours now (or lost) */
	keeper_kill(fds->keeper, fds->keeper_watch);
	fds->keeper = fds->keeper_watch = -1;
	if (r == 0 && fds->ring < 0) {
		log_warning("restart: no ring");
		r = -EBADMSG;
	}
	if (r == 0)
		r = conns_match(&s, fds);
	if (r == 0 && s.bus_signal != CHANNEL_NONE) {
		r = chanmgr_adopt(&b->chanmgr, fds->ring, &s.params, s.bus_signal);
		if (r < 0)
			log_warning("restart: cannot use the previous brokerd's ring: %s", strerror(-r));
	} else if (r == 0) {
		r = -EBADMSG;
	}
	if (r < 0) {
		fallback(b, &s, fds, parsed);
		state_free(&s);
		return 0;
	}
	fds->ring = -1; /* the chanmgr's now */
	for (size_t i = 0; i < fds->n_conns; i++)
		if (fds->conns[i] >= 0) {
			close(fds->conns[i]); /* stored but not recorded: not ours to serve */
			fds->conns[i] = -1;
		}
	r = rebuild(b, &s);
	if (r < 0) {
		for (size_t i = 0; i < s.n_conns; i++)
			if (s.conns[i].fd >= 0)
				close(s.conns[i].fd);
		state_free(&s);
		return r;
	}
	fds->restored = true;
	ctrl_unique_name_format(registry_next_id(b->registry), next);
	log_info("restart: took over %zu connections, %zu names, %zu channels; unique names continue at %s",
		 s.n_conns, s.n_names, s.n_channels, next);
	state_free(&s);
	return 1;
}
