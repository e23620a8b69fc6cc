/* SPDX-License-Identifier: MIT */
/*
 * dbus-restart.c - D-Bus connections across `systemctl restart brokerd`
 * (see dbus-front.h): their sockets go into systemd's fd store next to
 * the native connections (restart.c), with a state the next brokerd
 * rebuilds them from, so that a D-Bus client connected before does not
 * notice.
 *
 * The hand-over is a drain point: brokerd stops reading, so every whole
 * message it read was routed and what the socket holds waits for the next
 * brokerd; the bytes of a message not read whole yet are stored as they
 * are. Queued output is flushed (1 s at most). What cannot be handed over
 * so is closed the normal way first (its names go, its callers get
 * NoReply): a connection still authenticating or before Hello, one whose
 * output did not drain, one holding fds of a message not read whole (the
 * fd store keeps one copy of a file, so their order could not be kept),
 * and monitors. Bridged calls in flight (dbus-bridge.c) are not kept: the
 * bridge lets go of its channels first.
 *
 * The state: a header (magic, version) and records of a type and a length,
 * as restart.c writes its own: the front (the bus id, which GetId and
 * SASL's OK told clients, and the driver's serial), then each connection,
 * each well-known name with its queue, each call waiting for its reply.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/dbus-bridge.h"
#include "brokerd/dbus-front.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/restart-io.h"
#include "brokerd/restart.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/macro.h"

#define DSTATE_MAGIC   "BRKDDBUS"
#define DSTATE_VERSION RESTART_END_VERSION
#define FLUSH_USEC     (1000ULL * 1000ULL)
#define EAVESDROP_TRUE "eavesdrop='true'" /* how dbus-driver.c ends a rule's canonical text */
#define IN_BYTES_MAX   (256U << 20)	  /* more than a message can be */

enum {
	DREC_FRONT = 1, /* the bus id, the driver's serial */
	DREC_CONN,	/* a connection: socket, credentials, unique id, input, match rules */
	DREC_NAME,	/* a well-known name and its queue */
	DREC_REPLY,	/* a call waiting for its reply */
};

/* --- the hand-over --------------------------------------------------------- */

/* Can c go to the next brokerd as it is? */
static bool conn_handable(const struct dbus_conn *c)
{
	return !c->dead && c->peer && c->sasl.state == DBUS_SASL_DONE && !c->monitor && !c->out_head &&
	       c->n_in_fds == 0;
}

static size_t flush_conns(void *ctx, struct pollfd *p, size_t max)
{
	struct dbus_front *f = ctx;
	size_t n = 0;

	for (struct dbus_conn *c = f->conns; c; c = c->next)
		if (!c->dead && c->out_head && dbus_conn_flush(c) == 0 && c->out_head) {
			if (p && n < max)
				p[n] = (struct pollfd){ .fd = c->fd, .events = POLLOUT };
			n++;
		}
	return n;
}

/* Closes the connections that cannot be handed over: whether any went. */
static bool kill_unhandable(void *ctx)
{
	struct dbus_front *f = ctx;
	bool killed = false;

	for (struct dbus_conn *c = f->conns; c; c = c->next) {
		if (c->dead || conn_handable(c))
			continue;
		dbus_conn_kill(c, !c->peer    ? "brokerd restarts before its Hello" :
				  c->monitor  ? "brokerd restarts: a monitor is not handed over" :
				  c->out_head ? "brokerd restarts and it does not read" :
						"brokerd restarts while it sends fds");
		killed = true;
	}
	dbus_front_reap(f);
	return killed;
}

static void save_front(void *ctx, struct wbuf *w)
{
	struct dbus_front *f = ctx;
	size_t at = wbuf_record_begin(w, DREC_FRONT);

	wbuf_put_str(w, f->guid);
	wbuf_put_u32(w, f->serial);
	wbuf_record_end(w, at);
}

static void save_conn(struct dbus_conn *c, struct wbuf *w)
{
	size_t at = wbuf_record_begin(w, DREC_CONN);
	unsigned int n = 0;

	wbuf_put_socket(w, c->fd, &c->cred);
	wbuf_put_u64(w, c->peer->id);
	wbuf_put_u32(w, c->sasl.fds_agreed);
	wbuf_put_u32(w, (uint32_t)c->in_len);
	if (c->in_len)
		wbuf_put(w, c->in, c->in_len);
	for (struct dbus_match *x = c->matches; x; x = x->next)
		n++;
	wbuf_put_u32(w, n);
	for (struct dbus_match *x = c->matches; x; x = x->next) {
		wbuf_put_u32(w, x->eavesdrop);
		wbuf_put_str(w, x->text);
	}
	wbuf_record_end(w, at);
}

static void save_conns(void *ctx, struct wbuf *w)
{
	struct dbus_front *f = ctx;

	for (struct dbus_conn *c = f->conns; c; c = c->next)
		save_conn(c, w);
}

/* Has a D-Bus connection an entry in name's queue? */
static bool queue_has_dbus(struct registry *reg, const char *name)
{
	for (struct registry_peer *p = registry_peer_next(reg, NULL); p; p = registry_peer_next(reg, p))
		if (p->kind == REGISTRY_PEER_DBUS && registry_name_entry_flags(reg, p, name) >= 0)
			return true;
	return false;
}

/*
 * Every name a D-Bus connection owns or waits for, with its whole queue:
 * native entries marked as the other half's, so that the D-Bus entries go
 * back where they were among them (restart.c restores the native ones).
 */
static void save_names(void *ctx, struct wbuf *w)
{
	struct dbus_front *f = ctx;
	size_t n = registry_names_list(f->registry, NULL, 0);
	_cleanup_free_ const char **names = calloc(n ? n : 1, sizeof(*names));

	if (!names) {
		w->oom = true;
		return;
	}
	n = registry_names_list(f->registry, names, n);
	for (size_t i = 0; i < n; i++) {
		size_t at;

		if (!queue_has_dbus(f->registry, names[i]))
			continue;
		at = wbuf_record_begin(w, DREC_NAME);
		wbuf_put_str(w, names[i]);
		wbuf_put_queue(w, f->registry, names[i], REGISTRY_PEER_DBUS);
		wbuf_record_end(w, at);
	}
}

static void save_replies(void *ctx, struct wbuf *w)
{
	struct dbus_front *f = ctx;

	for (struct dbus_reply *r = f->replies; r; r = r->next) {
		size_t at = wbuf_record_begin(w, DREC_REPLY);

		wbuf_put_u64(w, r->caller->peer->id);
		wbuf_put_u64(w, r->callee->peer->id);
		wbuf_put_u32(w, r->serial);
		wbuf_put_u64(w, r->deadline); /* CLOCK_MONOTONIC: the same clock for the next brokerd */
		wbuf_record_end(w, at);
	}
}

static void store_remove(void)
{
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_DBUS_CONN);
	(void)sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" RESTART_FDNAME_DBUS_STATE);
}

/* --- the take-over --------------------------------------------------------- */

struct dst_match {
	bool eavesdrop;
	char *text;
};

struct dst_conn {
	struct restart_socket sock;
	uint64_t id;
	bool fds_agreed;
	uint8_t *in;
	size_t in_len;
	struct dst_match *matches;
	size_t n_matches;
	struct dbus_conn *c; /* once rebuilt */
};

struct dst_name {
	char *name;
	struct restart_owner *owners;
	size_t n_owners;
};

struct dst_reply {
	uint64_t caller, callee, deadline;
	uint32_t serial;
};

struct dstate {
	bool have_front;
	char *guid;
	uint32_t serial;
	struct dst_conn *conns;
	size_t n_conns, alloc_conns;
	struct dst_name *names;
	size_t n_names, alloc_names;
	struct dst_reply *replies;
	size_t n_replies, alloc_replies;
};

static void dstate_free(struct dstate *s)
{
	for (size_t i = 0; i < s->n_conns; i++) {
		for (size_t j = 0; j < s->conns[i].n_matches; j++)
			free(s->conns[i].matches[j].text);
		free(s->conns[i].matches);
		free(s->conns[i].in);
	}
	for (size_t i = 0; i < s->n_names; i++) {
		free(s->names[i].name);
		free(s->names[i].owners);
	}
	free(s->conns);
	free(s->names);
	free(s->replies);
	free(s->guid);
}

static int load_front(void *state, struct rbuf *r)
{
	struct dstate *s = state;

	if (s->have_front)
		return -EBADMSG; /* one front */
	s->guid = rbuf_get_str(r);
	s->serial = rbuf_get_u32(r);
	if (r->bad || strlen(s->guid) != 32 || strspn(s->guid, "0123456789abcdef") != 32)
		return -EBADMSG;
	s->have_front = true;
	return 0;
}

static int load_conn(void *state, struct rbuf *r)
{
	struct dstate *s = state;
	struct dst_conn *c;
	uint32_t n;

	if (ARRAY_RESERVE(s->conns, s->alloc_conns, s->n_conns + 1) < 0)
		return -ENOMEM;
	c = &s->conns[s->n_conns++];
	*c = (struct dst_conn){ 0 };
	rbuf_get_socket(r, &c->sock);
	c->id = rbuf_get_u64(r);
	c->fds_agreed = rbuf_get_u32(r);
	n = rbuf_get_u32(r);
	if (r->bad || n > r->left || n > IN_BYTES_MAX || !c->id)
		return -EBADMSG;
	c->in = malloc(n ? n : 1);
	if (!c->in)
		return -ENOMEM;
	rbuf_get(r, c->in, n);
	c->in_len = n;
	n = rbuf_get_u32(r);
	if (r->bad || n > r->left) /* each rule takes bytes: no more than are left */
		return -EBADMSG;
	c->matches = calloc(n ? n : 1, sizeof(*c->matches));
	if (!c->matches)
		return -ENOMEM;
	for (; c->n_matches < n; c->n_matches++) {
		c->matches[c->n_matches].eavesdrop = rbuf_get_u32(r);
		c->matches[c->n_matches].text = rbuf_get_str(r);
		if (r->bad)
			return -EBADMSG;
	}
	return 0;
}

static int load_name(void *state, struct rbuf *r)
{
	struct dstate *s = state;
	struct dst_name *n;

	if (ARRAY_RESERVE(s->names, s->alloc_names, s->n_names + 1) < 0)
		return -ENOMEM;
	n = &s->names[s->n_names++];
	*n = (struct dst_name){ 0 };
	n->name = rbuf_get_str(r);
	if (r->bad || !ctrl_name_is_valid_wellknown(n->name))
		return -EBADMSG;
	return rbuf_get_queue(r, &n->owners, &n->n_owners);
}

static int load_reply(void *state, struct rbuf *r)
{
	struct dstate *s = state;
	struct dst_reply *rep;

	if (ARRAY_RESERVE(s->replies, s->alloc_replies, s->n_replies + 1) < 0)
		return -ENOMEM;
	rep = &s->replies[s->n_replies++];
	rep->caller = rbuf_get_u64(r);
	rep->callee = rbuf_get_u64(r);
	rep->serial = rbuf_get_u32(r);
	rep->deadline = rbuf_get_u64(r);
	return 0;
}

/* The records in the order they are written: the connections before what refers to them. */
static const struct restart_record record_types[] = {
	{ DREC_FRONT, "front", save_front, load_front },
	{ DREC_CONN, "connection", save_conns, load_conn },
	{ DREC_NAME, "name", save_names, load_name },
	{ DREC_REPLY, "reply", save_replies, load_reply },
};

int dbus_front_handover(struct dbus_front *f)
{
	_cleanup_free_ int *fds = NULL;
	struct wbuf w = { 0 };
	size_t n = 0, n_conns = 0;
	int memfd, r;

	if (!f || !getenv("NOTIFY_SOCKET"))
		return -EOPNOTSUPP;
	(void)sd_event_source_set_enabled(f->listen_src, SD_EVENT_OFF);
	dbus_monitor_channel_free(f); /* the next brokerd makes its own */
	for (struct dbus_conn *c = f->conns; c; c = c->next)
		(void)sd_event_source_set_enabled(c->src, SD_EVENT_OFF);
	/* every connection flushed for at most FLUSH_USEC, those that cannot go over closed */
	restart_settle(FLUSH_USEC, flush_conns, kill_unhandable, f);

	restart_state_write(&w, DSTATE_MAGIC, DSTATE_VERSION, record_types, ELEMENTSOF(record_types), f);
	for (struct dbus_conn *c = f->conns; c; c = c->next)
		n_conns++;
	fds = calloc(n_conns + 1, sizeof(*fds));
	if (w.oom || !fds) {
		free(w.data);
		return -ENOMEM;
	}
	for (struct dbus_conn *c = f->conns; c; c = c->next)
		fds[n++] = c->fd;
	memfd = restart_memfd("brokerd-dbus-state", &w);
	free(w.data);
	if (memfd < 0) {
		log_error("cannot write the D-Bus state for the next brokerd: %s", strerror(-memfd));
		return memfd;
	}
	/* The state last: a next brokerd that finds it finds the connections too. */
	r = n > 0 ? restart_store(RESTART_FDNAME_DBUS_CONN, fds, n) : 1;
	if (r > 0)
		r = restart_store(RESTART_FDNAME_DBUS_STATE, &memfd, 1);
	close(memfd);
	if (r <= 0) {
		log_error("cannot store the D-Bus connections with systemd: %s",
			  strerror(r < 0 ? -r : EOPNOTSUPP));
		store_remove();
		return r < 0 ? r : -EOPNOTSUPP;
	}
	log_info("handing over %zu D-Bus connections", n);
	return 0;
}

static struct dst_conn *dst_conn_find(struct dstate *s, uint64_t id)
{
	for (size_t i = 0; i < s->n_conns; i++)
		if (s->conns[i].id == id)
			return &s->conns[i];
	return NULL;
}

/*
 * Every peer a name or a reply refers to is there, no id or name twice, no
 * peer twice in a queue, only the flags an owner can have.
 */
static bool dstate_consistent(struct dstate *s)
{
	for (size_t i = 0; i < s->n_conns; i++)
		if (dst_conn_find(s, s->conns[i].id) != &s->conns[i])
			return false;
	for (size_t i = 0; i < s->n_names; i++) {
		const struct dst_name *n = &s->names[i];

		for (size_t k = 0; k < i; k++)
			if (strcmp(s->names[k].name, n->name) == 0)
				return false;
		for (size_t j = 0; j < n->n_owners; j++) {
			if (!n->owners[j].peer_id || (n->owners[j].flags & ~CTRL_NAME_FLAGS_ALL))
				return false;
			if (!n->owners[j].other && !dst_conn_find(s, n->owners[j].peer_id))
				return false;
			for (size_t k = 0; k < j; k++)
				if (n->owners[k].peer_id == n->owners[j].peer_id)
					return false;
		}
	}
	for (size_t i = 0; i < s->n_replies; i++)
		if (!dst_conn_find(s, s->replies[i].caller) || !dst_conn_find(s, s->replies[i].callee))
			return false;
	return true;
}

/* A rule as AddMatch parsed it: the canonical text, eavesdrop='true' last when it was given. */
static int match_restore(struct dbus_conn *c, const struct dst_match *m)
{
	size_t len = strlen(m->text), cut = len;
	_cleanup_free_ char *rule = NULL;
	struct dbus_match *x;
	int r;

	if (m->eavesdrop) {
		if (len < strlen(EAVESDROP_TRUE) ||
		    strcmp(m->text + len - strlen(EAVESDROP_TRUE), EAVESDROP_TRUE))
			return -EBADMSG;
		cut = len - strlen(EAVESDROP_TRUE);
		if (cut > 0 && m->text[cut - 1] == ',')
			cut--;
	}
	rule = strndup(m->text, cut);
	x = calloc(1, sizeof(*x));
	if (!rule || !x || !(x->text = strdup(m->text))) {
		free(x);
		return -ENOMEM;
	}
	r = dbus_match_rule_parse(&x->rule, rule);
	if (r < 0) {
		dbus_match_rule_deinit(&x->rule);
		free(x->text);
		free(x);
		return r;
	}
	x->eavesdrop = m->eavesdrop;
	x->next = c->matches;
	c->matches = x;
	c->n_matches++;
	if (x->eavesdrop)
		c->front->n_eavesdrop++;
	return 0;
}

/* Rebuilds connection sc on fd (taken). */
static int conn_restore(struct dbus_front *f, struct dst_conn *sc, int fd)
{
	struct dbus_conn *c;
	int r;

	r = dbus_conn_adopt(f, fd, sc->fds_agreed, &c);
	sc->c = c;
	if (r < 0 || !c || c->dead)
		return r;
	r = registry_peer_restore(f->registry, c->cred.uid, sc->id, &c->peer);
	if (r < 0)
		return r;
	c->peer->kind = REGISTRY_PEER_DBUS;
	c->peer->userdata = c;
	snprintf(c->unique, sizeof(c->unique), "%s", c->peer->unique_name);
	c->name = c->unique;
	if (sc->in_len) {
		c->in = TAKE_PTR(sc->in);
		c->in_len = c->in_cap = sc->in_len;
		dbus_budget_charge(c, c->in_cap, 0); /* held already, whatever the budget */
	}
	/* in the order AddMatch linked them: the last added first */
	for (size_t j = sc->n_matches; j > 0; j--) {
		r = match_restore(c, &sc->matches[j - 1]);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			log_warning("restart: a match rule of %s no longer parses: dropped", c->name);
	}
	return 0;
}

int dbus_front_state_check(const void *data, size_t size)
{
	struct dstate s = { 0 };
	int r = restart_state_parse_bytes(data, size, "D-Bus state", DSTATE_MAGIC, DSTATE_VERSION,
					  record_types, ELEMENTSOF(record_types), &s);

	if (r == 0 && (!s.have_front || !dstate_consistent(&s)))
		r = -EBADMSG;
	dstate_free(&s);
	return r;
}

int dbus_front_restore(struct dbus_front *f, int state_fd, int *fds, size_t n_fds)
{
	struct dstate s = { 0 };
	size_t back = 0;
	bool matches = false;
	int r;

	store_remove();
	r = restart_state_parse(state_fd, "D-Bus state", DSTATE_MAGIC, DSTATE_VERSION, record_types,
				ELEMENTSOF(record_types), &s);
	close(state_fd);
	if (r == 0 && !s.have_front)
		r = -EBADMSG;
	if (r == 0 && !dstate_consistent(&s))
		r = -EBADMSG;
	/* the unique ids are the native registry's: one a native peer has is not this state's */
	for (size_t i = 0; r == 0 && i < s.n_conns; i++)
		if (registry_peer_find(f->registry, s.conns[i].id))
			r = -EBADMSG;
	if (r < 0) {
		log_warning(
			"restart: the stored D-Bus state is not usable (%s): its %zu connections are closed",
			strerror(-r), n_fds);
		goto out;
	}
	memcpy(f->guid, s.guid, sizeof(f->guid));
	f->serial = s.serial;
	for (size_t i = 0; i < s.n_conns; i++) {
		struct dst_conn *sc = &s.conns[i];
		int fd = restart_socket_take(fds, n_fds, &sc->sock);

		if (fd < 0) {
			int sp[2];

			/* hung up meanwhile: it comes back closed and ends the normal way (its names go) */
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) < 0) {
				r = -errno;
				goto out;
			}
			close(sp[1]);
			fd = sp[0];
		} else {
			back++;
		}
		r = conn_restore(f, sc, fd);
		if (r < 0)
			goto out;
		matches |= sc->c && sc->c->matches;
	}
	for (size_t i = 0; i < s.n_names; i++) {
		struct dst_name *sn = &s.names[i];
		_cleanup_free_ uint64_t *order = calloc(sn->n_owners ? sn->n_owners : 1, sizeof(*order));
		struct registry_peer *owner;
		struct bus_name *n;

		if (!order) {
			r = -ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < sn->n_owners; j++) {
			struct dbus_conn *c;

			order[j] = sn->owners[j].peer_id;
			if (sn->owners[j].other) /* a native client's: restart.c restored it */
				continue;
			c = dst_conn_find(&s, sn->owners[j].peer_id)->c;
			if (!c || !c->peer)
				continue;
			r = registry_name_restore(f->registry, c->peer, sn->name, sn->owners[j].flags);
			if (r < 0)
				goto out;
			(void)quota_charge_restored(f->bus->quota, c->cred.uid, QUOTA_NAMES, 1);
		}
		/* one queue: the D-Bus entries back in their places among the native ones */
		registry_name_restore_order(f->registry, sn->name, order, sn->n_owners);
		/* native callers hold caps on its call channel: brokerd receives there for its owner again */
		n = bus_name_find(f->bus, sn->name);
		owner = registry_name_owner(f->registry, sn->name);
		if (n && n->call && f->bus->bridge_hooks && owner && owner->kind == REGISTRY_PEER_DBUS)
			(void)f->bus->bridge_hooks->serve(f->bus->bridge, n);
	}
	for (size_t i = 0; i < s.n_replies; i++) {
		struct dbus_conn *caller = dst_conn_find(&s, s.replies[i].caller)->c,
				 *callee = dst_conn_find(&s, s.replies[i].callee)->c;

		if (!caller || !callee || !caller->peer || !callee->peer)
			continue;
		r = dbus_front_reply_restore(f, caller, callee, s.replies[i].serial, s.replies[i].deadline);
		if (r < 0)
			goto out;
	}
	if (matches)
		dbus_bridge_signals_wanted(f); /* native signals for their rules again */
	if (f->n_eavesdrop)
		dbus_monitor_native_update(f); /* and what native clients send each other, for eavesdroppers */
	log_info(
		"restart: took over %zu D-Bus connections (%zu hung up meanwhile), %zu names, %zu waiting calls",
		back, s.n_conns - back, s.n_names, s.n_replies);
	r = 0;
out:
	for (size_t i = 0; i < n_fds; i++)
		if (fds[i] >= 0)
			close(fds[i]); /* stored but not recorded, or all of them when the state is unusable */
	if (r < 0 && r != -EBADMSG && r != -EPROTO)
		log_error("restart: D-Bus connections lost half-way: %s", strerror(-r));
	dstate_free(&s);
	return r < 0 ? 0 : (int)back;
}
