/* SPDX-License-Identifier: MIT */
/*
 * dbus-driver.c - org.freedesktop.DBus, the bus driver of the D-Bus front
 * end: Hello, names (RequestName, ReleaseName, the queues, NameOwnerChanged,
 * NameAcquired, NameLost), what the bus knows of a connection (uid, pid,
 * credentials), match rules, activation (StartServiceByName,
 * UpdateActivationEnvironment: dbus-activation.c), ReloadConfig,
 * Monitoring.BecomeMonitor (dbus-monitor.c), Debug.Stats, and the standard Peer,
 * Introspectable and Properties interfaces on the bus object. One table,
 * one handler a method.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/bus.h"
#include "brokerd/conn.h"
#include "brokerd/dbus-bridge.h"
#include "brokerd/dbus-front.h"
#include "brokerd/driver.h"
#include "brokerd/grant.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/macro.h"

#define ERR(x) "org.freedesktop.DBus.Error." x

/* The interfaces of the bus object. */
#define DBUS	   DBUS_DRIVER_INTERFACE
#define PEER	   "org.freedesktop.DBus.Peer"
#define INTRO	   "org.freedesktop.DBus.Introspectable"
#define PROPS	   "org.freedesktop.DBus.Properties"
#define MONITORING "org.freedesktop.DBus.Monitoring"
#define STATS	   "org.freedesktop.DBus.Debug.Stats"

/* ---- Owner changes (the registry's callback in driver.c) ---------------------- */

static void signal_s(struct dbus_front *f, struct dbus_conn *dest, const char *member, const char *sig,
		     const char *a, const char *b, const char *c)
{
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;

	if (dbus_writer_init(&w, sig) < 0)
		return;
	dbus_writer_append_basic(&w, 's', a);
	if (b)
		dbus_writer_append_basic(&w, 's', b);
	if (c)
		dbus_writer_append_basic(&w, 's', c);
	if (dbus_writer_finish(&w, &body, &len) == 0)
		dbus_front_driver_signal(f, dest, member, sig, body, len);
	dbus_writer_deinit(&w);
	free(body);
}

/* The D-Bus connection behind a registry peer, if it is one's and still there. */
static struct dbus_conn *conn_of(struct registry_peer *p)
{
	struct dbus_conn *c = p && p->kind == REGISTRY_PEER_DBUS ? p->userdata : NULL;

	return c && !c->dead ? c : NULL;
}

void dbus_driver_owner_changed(void *front, const char *name, struct registry_peer *old,
			       struct registry_peer *new)
{
	struct dbus_front *f = front;
	struct dbus_conn *oc = conn_of(old), *nc = conn_of(new);

	/* What a native owner sent before goes first; a D-Bus owner gets the native callers' calls. */
	dbus_bridge_owner_changed(f, name, old, new);
	if (oc)
		signal_s(f, oc, "NameLost", "s", name, NULL, NULL);
	signal_s(f, NULL, "NameOwnerChanged", "sss", name, old ? old->unique_name : "",
		 new ? new->unique_name : "");
	if (nc)
		signal_s(f, nc, "NameAcquired", "s", name, NULL, NULL);
	if (new)
		dbus_activation_owned(f, name);
}

void dbus_driver_conn_gone(struct dbus_conn *c)
{
	struct dbus_front *f = c->front;

	dbus_activation_conn_gone(c);
	registry_peer_remove(f->registry, c->peer); /* its names go: queues promoted, native owners too */
	c->peer = NULL;
	grant_revoke_pending(f->bus);
	signal_s(f, NULL, "NameOwnerChanged", "sss", c->unique, c->unique, "");
}

/* ---- Replies -------------------------------------------------------------------- */

int dbus_driver_reply_error(struct dbus_conn *c, const struct dbus_message *m, const char *name,
			    const char *text)
{
	struct dbus_header h = {
		.type = DBUS_MESSAGE_ERROR,
		.error_name = name,
		.reply_serial = m->h.serial,
		.signature = "s",
	};
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;
	int r;

	bool wanted = m->h.type == DBUS_MESSAGE_METHOD_CALL && !(m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED);

	log_full(LOG_DEBUG, c->name, c->cred.uid, "%s: %s: %s", c->name, name, text);
	/* Unwanted, the error is not sent; monitors still see it, as on dbus-daemon. */
	if (!wanted && (!c->front->n_monitors || c->monitor))
		return 0;
	r = dbus_writer_init(&w, "s");
	if (r < 0)
		return r;
	dbus_writer_append_basic(&w, 's', text);
	r = dbus_writer_finish(&w, &body, &len);
	dbus_writer_deinit(&w);
	if (r == 0)
		r = wanted ? dbus_conn_send_driver(c, &h, body, len) : dbus_conn_monitor_driver(c, &h, body, len);
	free(body);
	return r;
}

/* One call being handled: its arguments, its reply, an fd to go with it. */
struct call {
	struct dbus_conn *c;
	const struct dbus_message *m;
	struct dbus_reader r;
	struct dbus_writer w;
	int fd;
	const char *error, *error_text;
	char text[512];
	bool later;			  /* answered later (StartServiceByName that starts the name) */
	struct dbus_match *monitor_rules; /* BecomeMonitor's, once the reply is out */
	bool monitor;
};

/* A handler sets an error this way and returns 1. */
static int fail(struct call *k, const char *error, const char *fmt, const char *arg)
{
	k->error = error;
	snprintf(k->text, sizeof(k->text), fmt, arg ? arg : "");
	k->error_text = k->text;
	return 1;
}

static const char *arg_s(struct call *k)
{
	const char *s = NULL;

	(void)dbus_reader_read_basic(&k->r, 's', &s);
	return s ? s : "";
}

/* ---- Peers as the bus knows them, D-Bus or native ---------------------------- */

struct creds {
	uid_t uid;
	pid_t pid;
	const gid_t *gids;
	size_t n_gids;
	int pidfd;
	const char *label; /* the LSM's, NULL: none */
	char label_buf[4096];
};

/*
 * The security label the kernel reports for the peer of socket fd (the
 * one it had when it connected), in buf; NULL when no LSM gives one.
 */
static const char *socket_label(int fd, char *buf, size_t size)
{
	socklen_t l = (socklen_t)size - 1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERSEC, buf, &l) < 0 || l == 0)
		return NULL;
	buf[l] = 0;
	return buf[0] ? buf : NULL;
}

static int creds_of(struct call *k, const char *name, struct creds *cr)
{
	struct dbus_front *f = k->c->front;
	struct dbus_conn *d;
	struct registry_peer *p;

	memset(cr, 0, sizeof(*cr));
	cr->pidfd = -1;
	if (!strcmp(name, DBUS_DRIVER_NAME)) {
		cr->uid = getuid();
		cr->pid = getpid();
		return 0;
	}
	d = dbus_front_conn_by_name(f, name);
	if (d) {
		cr->uid = d->cred.uid;
		cr->pid = dbus_conn_pid(d);
		cr->gids = d->gids;
		cr->n_gids = d->n_gids;
		cr->pidfd = cr->pid ? d->pidfd : -1;
		cr->label = socket_label(d->fd, cr->label_buf, sizeof(cr->label_buf));
		return 0;
	}
	p = registry_peer_resolve(f->bus->registry, name);
	if (p && p->kind == REGISTRY_PEER_NATIVE && p->userdata) {
		struct bus_conn *n = p->userdata;

		cr->uid = n->cred.uid;
		cr->pid = conn_pid(n);
		cr->gids = n->gids;
		cr->n_gids = n->n_gids;
		cr->pidfd = cr->pid ? n->pidfd : -1;
		cr->label = n->label;
		return 0;
	}
	return fail(k, ERR("NameHasNoOwner"), "Could not get the credentials of %s: no such name", name);
}

/*
 * A D-Bus connection's credentials as native GET_CREDENTIALS and LIST_PEERS
 * report them (bus->dbus_peer_creds). The label is read when asked: the
 * socket keeps the one its peer had when it connected.
 */
void dbus_driver_peer_creds(struct registry_peer *p, struct bus_peer_creds *cr)
{
	struct dbus_conn *d = p->userdata;

	BUG_ON(!d || p->kind != REGISTRY_PEER_DBUS); /* every D-Bus peer is a connection's */
	cr->cred = d->cred;
	cr->gids = d->gids;
	cr->n_gids = d->n_gids;
	cr->pidfd = d->pidfd;
	cr->n_caps = 0;
	cr->label = socket_label(d->fd, cr->label_buf, sizeof(cr->label_buf));
}

/* The unique name owning name (D-Bus, native, or the driver), or NULL. */
static const char *owner_of(struct dbus_front *f, const char *name)
{
	struct registry_peer *p;

	if (!strcmp(name, DBUS_DRIVER_NAME))
		return DBUS_DRIVER_NAME;
	if (name[0] == ':') {
		struct dbus_conn *d = dbus_front_conn_by_name(f, name);

		if (d)
			return d->name;
		p = registry_peer_resolve(f->registry, name);
		return p && p->kind == REGISTRY_PEER_NATIVE ? p->unique_name : NULL;
	}
	p = registry_name_owner(f->registry, name); /* a D-Bus or a native client */
	return p ? p->unique_name : NULL;
}

/* ---- org.freedesktop.DBus ----------------------------------------------------- */

static int method_hello(struct call *k)
{
	struct dbus_conn *c = k->c;
	struct dbus_front *f = c->front;
	struct registry_peer *p;
	int r;

	if (c->peer)
		return fail(k, ERR("Failed"), "%s", "Already handled an Hello message");
	if (c->refused) /* it goes at its Hello deadline */
		return fail(k, ERR("LimitsExceeded"), "%s", c->refused);
	/* A peer of the bus's registry: no unique name is ever given twice, whatever the protocol. */
	r = registry_peer_add(f->registry, c->cred.uid, &p);
	if (r < 0)
		return r;
	driver_ids_reserve(f->bus); /* recorded as a native HELLO's: a crash never reuses the name */
	p->kind = REGISTRY_PEER_DBUS;
	p->userdata = c;
	c->peer = p;
	snprintf(c->unique, sizeof(c->unique), "%s", p->unique_name);
	c->name = c->unique;
	c->hello_timer = sd_event_source_disable_unref(c->hello_timer);
	log_full(LOG_DEBUG, c->name, c->cred.uid, "D-Bus Hello from uid %u: %s", (unsigned int)c->cred.uid,
		 c->name);
	return dbus_writer_append_basic(&k->w, 's', c->name);
}

static int method_request_name(struct call *k)
{
	struct dbus_conn *c = k->c;
	struct dbus_front *f = c->front;
	const char *name = arg_s(k);
	uint32_t flags = 0, result;
	struct quota *q = f->bus->quota;
	int r;

	(void)dbus_reader_read_basic(&k->r, 'u', &flags);
	if (!ctrl_name_is_valid_wellknown(name))
		return fail(k, ERR("InvalidArgs"),
			    "Cannot acquire a service named '%s': not a well-known name", name);
	if (!strcmp(name, DBUS_DRIVER_NAME))
		return fail(k, ERR("InvalidArgs"), "Connection is not allowed to own the service %s", name);
	if (!policy_check(f->bus->policy, c->cred.uid, c->gids, c->n_gids, POLICY_OWN, name, NULL, 0))
		return fail(k, ERR("AccessDenied"),
			    "Connection is not allowed to own the service %s by policy", name);
	if (registry_name_entry_flags(f->registry, c->peer, name) < 0) {
		uint64_t max = quota_bus_limit(q, QUOTA_BUS_MAX_NAMES);

		/* queued names count, and the unique name, as dbus-daemon counts them */
		if ((uint64_t)c->peer->n_owners + 1 >= max)
			return fail(k, ERR("LimitsExceeded"),
				    "Connection has too many names to acquire %s (max_names_per_connection)", name);
		if (quota_charge(q, c->cred.uid, QUOTA_NAMES, 1) < 0)
			return fail(k, ERR("LimitsExceeded"), "The names quota of this uid is used up (%s)",
				    quota_kind_to_string(QUOTA_NAMES));
		quota_release(q, c->cred.uid, QUOTA_NAMES, 1);
	}
	/*
	 * Only the three flags of the specification, the native ones by the same
	 * bits in the same queue (protocol/README.md, REQUEST_NAME); the native
	 * pool flag is not D-Bus's.
	 */
	r = registry_name_request(
		f->registry, c->peer, name,
		flags & (CTRL_NAME_ALLOW_REPLACEMENT | CTRL_NAME_REPLACE_EXISTING | CTRL_NAME_DO_NOT_QUEUE));
	if (r < 0)
		return fail(k, ERR("InvalidArgs"), "Cannot acquire %s", name);
	grant_revoke_pending(f->bus); /* a native owner it replaced loses its caps on the name */
	result = (uint32_t)r;
	return dbus_writer_append_basic(&k->w, 'u', &result);
}

static int method_release_name(struct call *k)
{
	const char *name = arg_s(k);
	uint32_t result;
	int r;

	if (!ctrl_name_is_valid_wellknown(name) || !strcmp(name, DBUS_DRIVER_NAME))
		return fail(k, ERR("InvalidArgs"), "Cannot release the name '%s'", name);
	r = registry_name_release(k->c->front->registry, k->c->peer, name);
	if (r < 0)
		return fail(k, ERR("InvalidArgs"), "Cannot release the name '%s'", name);
	grant_revoke_pending(k->c->front->bus); /* the name's channels may be idle now */
	result = (uint32_t)r;
	return dbus_writer_append_basic(&k->w, 'u', &result);
}

static int method_list_queued_owners(struct call *k)
{
	struct dbus_front *f = k->c->front;
	const char *name = arg_s(k);
	struct registry *reg = f->registry;
	_cleanup_free_ struct registry_peer **q = NULL;
	size_t n;

	if (!strcmp(name, DBUS_DRIVER_NAME)) {
		dbus_writer_open(&k->w, 'a', "s");
		dbus_writer_append_basic(&k->w, 's', DBUS_DRIVER_NAME);
		return dbus_writer_close(&k->w);
	}
	if (name[0] == ':') {
		const char *o = owner_of(f, name);

		if (!o)
			return fail(k, ERR("NameHasNoOwner"), "Could not get the owners of %s: no such name",
				    name);
		dbus_writer_open(&k->w, 'a', "s");
		dbus_writer_append_basic(&k->w, 's', o);
		return dbus_writer_close(&k->w);
	}
	n = registry_name_queue(reg, name, NULL, 0); /* D-Bus and native owners, one queue */
	if (!n)
		return fail(k, ERR("NameHasNoOwner"), "Could not get the owners of %s: no such name", name);
	q = calloc(n, sizeof(*q));
	if (!q)
		return -ENOMEM;
	n = registry_name_queue(reg, name, q, n);
	dbus_writer_open(&k->w, 'a', "s");
	for (size_t i = 0; i < n; i++)
		dbus_writer_append_basic(&k->w, 's', q[i]->unique_name);
	return dbus_writer_close(&k->w);
}

/* Every name of reg: unique names of its peers, well-known names with an owner. */
static int append_names(struct dbus_writer *w, struct registry *reg)
{
	_cleanup_free_ const char **names = NULL;
	size_t n;

	for (struct registry_peer *p = registry_peer_next(reg, NULL); p; p = registry_peer_next(reg, p))
		dbus_writer_append_basic(w, 's', p->unique_name);
	n = registry_names_list(reg, NULL, 0);
	if (!n)
		return 0;
	names = calloc(n, sizeof(*names));
	if (!names)
		return -ENOMEM;
	n = registry_names_list(reg, names, n);
	for (size_t i = 0; i < n; i++)
		dbus_writer_append_basic(w, 's', names[i]);
	return 0;
}

static int method_list_names(struct call *k)
{
	struct dbus_front *f = k->c->front;
	int r;

	dbus_writer_open(&k->w, 'a', "s");
	dbus_writer_append_basic(&k->w, 's', DBUS_DRIVER_NAME);
	r = append_names(&k->w, f->registry); /* one bus: native clients and their names too */
	if (r < 0)
		return r;
	return dbus_writer_close(&k->w);
}

static int method_list_activatable_names(struct call *k)
{
	const struct service_set *set = k->c->front->bus->services;

	dbus_writer_open(&k->w, 'a', "s");
	dbus_writer_append_basic(&k->w, 's', DBUS_DRIVER_NAME);
	for (size_t i = 0; set && i < service_set_count(set); i++)
		dbus_writer_append_basic(&k->w, 's', service_set_get(set, i)->name);
	return dbus_writer_close(&k->w);
}

static int method_start_service_by_name(struct call *k)
{
	const char *name = arg_s(k);
	uint32_t flags = 0, result = 2; /* DBUS_START_REPLY_ALREADY_RUNNING */
	int r;

	(void)dbus_reader_read_basic(&k->r, 'u', &flags);
	if (!dbus_bus_name_is_valid(name))
		return fail(k, ERR("InvalidArgs"), "'%s' is not a valid bus name", name);
	if (owner_of(k->c->front, name))
		return dbus_writer_append_basic(&k->w, 'u', &result);
	if (name[0] == ':')
		return fail(k, ERR("ServiceUnknown"), "The name %s has no owner and cannot be activated",
			    name);
	r = dbus_activation_start_by_name(k->c, k->m, name, &result, &k->error, k->text, sizeof(k->text));
	if (r == 1)
		k->error_text = k->text;
	else if (r == 0)
		k->later = true; /* 1 (DBUS_START_REPLY_SUCCESS) once the name is owned */
	return r;
}

/* Who may change the bus itself: root and the uid the bus runs as (dbus-daemon's rule). */
static bool caller_privileged(struct call *k)
{
	return k->c->cred.uid == 0 || k->c->cred.uid == getuid();
}

static int method_update_activation_environment(struct call *k)
{
	struct dbus_front *f = k->c->front;
	const char *key, *value;
	char **kv = NULL, **more;
	size_t n = 0;
	int r = 0;

	if (!caller_privileged(k))
		return fail(k, ERR("AccessDenied"), "%s",
			    "Only the bus's own uid and root may change the activation environment");
	/* A system bus's services get their environment from their units, not from a caller. */
	if (dbus_activation_system_bus(f))
		return fail(k, ERR("AccessDenied"), "%s",
			    "Cannot change the activation environment on a system bus");
	if (dbus_reader_enter(&k->r, 'a') <= 0)
		return fail(k, ERR("InvalidArgs"), "%s", "Expected a{ss}");
	while (dbus_reader_enter(&k->r, '{') > 0) {
		key = value = NULL;
		(void)dbus_reader_read_basic(&k->r, 's', &key);
		(void)dbus_reader_read_basic(&k->r, 's', &value);
		(void)dbus_reader_exit(&k->r);
		if (!key || !*key || strchr(key, '=') || !value) {
			r = fail(k, ERR("InvalidArgs"), "'%s' is not an environment variable name",
				 key ? key : "");
			goto out;
		}
		r = dbus_activation_setenv(f, key, value);
		if (r < 0)
			goto out;
		/* and for systemd, if it starts the services (SetEnvironment) */
		more = realloc(kv, (n + 1) * sizeof(char *));
		if (!more) {
			r = -ENOMEM;
			goto out;
		}
		kv = more;
		if (asprintf(&kv[n], "%s=%s", key, value) < 0) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	r = dbus_activation_env_forward(f, kv, n);
out:
	for (size_t i = 0; i < n; i++)
		free(kv[i]);
	free(kv);
	return r;
}

static int method_reload_config(struct call *k)
{
	char err[512] = "";
	int r = bus_reload(k->c->front->bus, err, sizeof(err));

	if (r < 0)
		return fail(k, ERR("Failed"), "Cannot reload the configuration: %s",
			    err[0] ? err : strerror(-r));
	return 0;
}

static int method_get_selinux_context(struct call *k)
{
	const char *name = arg_s(k);
	struct creds cr;
	int r = creds_of(k, name, &cr);

	if (r)
		return r;
	/* brokerd does not read SELinux contexts (and most machines have none to read). */
	return fail(k, ERR("SELinuxSecurityContextUnknown"), "Could not determine security context for '%s'",
		    name);
}

static void matches_free(struct dbus_match *x)
{
	while (x) {
		struct dbus_match *next = x->next;

		dbus_match_rule_deinit(&x->rule);
		free(x->text);
		free(x);
		x = next;
	}
}

/*
 * A rule without its eavesdrop key, which the match rule parser leaves to
 * the front end: AddMatch keeps its value (*eavesdrop; 'true' or 'false',
 * quoted or not, else -EINVAL); every monitor eavesdrops, and dbus-monitor
 * sends eavesdrop=true in the rules it gives BecomeMonitor. Keys are split
 * at commas outside quotes. -ENAMETOOLONG if out is short.
 */
static int rule_take_eavesdrop(const char *text, char *out, size_t size, bool *eavesdrop)
{
	size_t o = 0;
	const char *p = text;

	while (*p) {
		const char *start = p, *end;
		bool quoted = false;

		for (end = p; *end && (quoted || *end != ','); end++)
			if (*end == '\'')
				quoted = !quoted;
		p = *end ? end + 1 : end;
		while (start < end && (*start == ' ' || *start == '\t'))
			start++;
		if (!strncmp(start, "eavesdrop=", 10)) {
			size_t n = (size_t)(end - start) - 10;
			const char *v = start + 10;

			if (n >= 2 && v[0] == '\'' && v[n - 1] == '\'') {
				v++;
				n -= 2;
			}
			if (n == 4 && !strncmp(v, "true", 4))
				*eavesdrop = true;
			else if (n == 5 && !strncmp(v, "false", 5))
				*eavesdrop = false;
			else
				return -EINVAL;
			continue;
		}
		if (o + (size_t)(end - start) + 2 > size)
			return -ENAMETOOLONG;
		if (o)
			out[o++] = ',';
		memcpy(out + o, start, (size_t)(end - start));
		o += (size_t)(end - start);
	}
	out[o] = 0;
	return 0;
}

static int method_name_has_owner(struct call *k)
{
	int has = owner_of(k->c->front, arg_s(k)) != NULL;

	return dbus_writer_append_basic(&k->w, 'b', &has);
}

static int method_get_name_owner(struct call *k)
{
	const char *name = arg_s(k);
	const char *o = owner_of(k->c->front, name);

	if (!o)
		return fail(k, ERR("NameHasNoOwner"), "Could not get the owner of name '%s': no such name",
			    name);
	return dbus_writer_append_basic(&k->w, 's', o);
}

static int method_get_unix_user(struct call *k)
{
	struct creds cr;
	uint32_t uid;
	int r = creds_of(k, arg_s(k), &cr);

	if (r)
		return r;
	uid = cr.uid;
	return dbus_writer_append_basic(&k->w, 'u', &uid);
}

static int method_get_unix_pid(struct call *k)
{
	const char *name = arg_s(k);
	struct creds cr;
	uint32_t pid;
	int r = creds_of(k, name, &cr);

	if (r)
		return r;
	if (!cr.pid)
		return fail(k, ERR("UnixProcessIdUnknown"), "The process of %s is not known or has exited",
			    name);
	pid = (uint32_t)cr.pid;
	return dbus_writer_append_basic(&k->w, 'u', &pid);
}

static void dict_u(struct dbus_writer *w, const char *key, uint32_t v)
{
	dbus_writer_open(w, '{', "sv");
	dbus_writer_append_basic(w, 's', key);
	dbus_writer_open(w, 'v', "u");
	dbus_writer_append_basic(w, 'u', &v);
	dbus_writer_close(w);
	dbus_writer_close(w);
}

static void dict_s(struct dbus_writer *w, const char *key, const char *v)
{
	dbus_writer_open(w, '{', "sv");
	dbus_writer_append_basic(w, 's', key);
	dbus_writer_open(w, 'v', "s");
	dbus_writer_append_basic(w, 's', v);
	dbus_writer_close(w);
	dbus_writer_close(w);
}

static int method_get_credentials(struct call *k)
{
	struct creds cr;
	int r = creds_of(k, arg_s(k), &cr);

	if (r)
		return r;
	dbus_writer_open(&k->w, 'a', "{sv}");
	dict_u(&k->w, "UnixUserID", cr.uid);
	if (cr.n_gids) {
		dbus_writer_open(&k->w, '{', "sv");
		dbus_writer_append_basic(&k->w, 's', "UnixGroupIDs");
		dbus_writer_open(&k->w, 'v', "au");
		dbus_writer_open(&k->w, 'a', "u");
		for (size_t i = 0; i < cr.n_gids; i++) {
			uint32_t g = cr.gids[i];

			dbus_writer_append_basic(&k->w, 'u', &g);
		}
		dbus_writer_close(&k->w);
		dbus_writer_close(&k->w);
		dbus_writer_close(&k->w);
	}
	if (cr.pid)
		dict_u(&k->w, "ProcessID", (uint32_t)cr.pid);
	/* as dbus-daemon sends it: the bytes of the label and its terminating NUL */
	if (cr.label) {
		dbus_writer_open(&k->w, '{', "sv");
		dbus_writer_append_basic(&k->w, 's', "LinuxSecurityLabel");
		dbus_writer_open(&k->w, 'v', "ay");
		dbus_writer_append_array(&k->w, 'y', cr.label, strlen(cr.label) + 1);
		dbus_writer_close(&k->w);
		dbus_writer_close(&k->w);
	}
	/* A pidfd only to a caller that takes fds; it names the process for good, unlike a pid. */
	if (cr.pidfd >= 0 && k->c->sasl.fds_agreed) {
		k->fd = fcntl(cr.pidfd, F_DUPFD_CLOEXEC, 3);
		if (k->fd >= 0) {
			uint32_t idx = 0;

			dbus_writer_open(&k->w, '{', "sv");
			dbus_writer_append_basic(&k->w, 's', "ProcessFD");
			dbus_writer_open(&k->w, 'v', "h");
			dbus_writer_append_basic(&k->w, 'h', &idx);
			dbus_writer_close(&k->w);
			dbus_writer_close(&k->w);
		}
	}
	return dbus_writer_close(&k->w);
}

/*
 * An AddMatch or RemoveMatch rule: parsed, its canonical text (eavesdrop
 * last, when true: the same rule with and without it are two rules, as in
 * dbus-daemon) and its eavesdrop key. -EINVAL for a bad rule, -ENOMEM.
 */
static int rule_parse(const char *text, struct dbus_match_rule *rule, char **canon, bool *eavesdrop)
{
	size_t size = strlen(text) + 2;
	_cleanup_free_ char *rest = malloc(size);
	char *t = NULL;
	int r;

	*eavesdrop = false;
	*canon = NULL;
	memset(rule, 0, sizeof(*rule));
	if (!rest)
		return -ENOMEM;
	r = rule_take_eavesdrop(text, rest, size, eavesdrop);
	if (r == 0)
		r = dbus_match_rule_parse(rule, rest);
	if (r == 0)
		r = dbus_match_rule_format(rule, &t);
	if (r < 0)
		return r;
	if (*eavesdrop) {
		size_t n = strlen(t);
		char *e = malloc(n + sizeof(",eavesdrop='true'"));

		if (!e) {
			free(t);
			return -ENOMEM;
		}
		snprintf(e, n + sizeof(",eavesdrop='true'"), "%s%seavesdrop='true'", t, n ? "," : "");
		free(t);
		t = e;
	}
	*canon = t;
	return 0;
}

/* A rule of AddMatch or BecomeMonitor, parsed into *ret: 0, 1 when refused (MatchRuleInvalid), <0. */
static int match_new(struct call *k, const char *text, struct dbus_match **ret)
{
	struct dbus_match *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return -ENOMEM;
	r = rule_parse(text, &x->rule, &x->text, &x->eavesdrop);
	if (r < 0) {
		dbus_match_rule_deinit(&x->rule);
		free(x);
		if (r == -ENOMEM)
			return r;
		return fail(k, ERR("MatchRuleInvalid"), "Invalid match rule '%s'", text);
	}
	*ret = x;
	return 0;
}

static int method_add_match(struct call *k)
{
	struct dbus_conn *c = k->c;
	const char *text = arg_s(k);
	uint64_t max = quota_bus_limit(c->front->bus->quota, QUOTA_BUS_MAX_MATCH_RULES);
	struct dbus_match *x;
	int r;

	if (c->n_matches >= max)
		return fail(k, ERR("LimitsExceeded"), "%s",
			    "Too many match rules on this connection (max_match_rules_per_connection)");
	r = match_new(k, text, &x);
	if (r)
		return r;
	x->next = c->matches;
	c->matches = x;
	c->n_matches++;
	if (x->eavesdrop) {
		c->front->n_eavesdrop++;
		dbus_monitor_native_update(c->front); /* what native clients send each other */
	}
	dbus_bridge_signals_wanted(c->front); /* native signals from now on */
	return 0;
}

static int method_remove_match(struct call *k)
{
	struct dbus_conn *c = k->c;
	const char *text = arg_s(k);
	struct dbus_match_rule rule;
	_cleanup_free_ char *canon = NULL;
	bool eavesdrop;
	int r;

	r = rule_parse(text, &rule, &canon, &eavesdrop);
	dbus_match_rule_deinit(&rule);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return fail(k, ERR("MatchRuleInvalid"), "Invalid match rule '%s'", text);
	for (struct dbus_match **p = &c->matches; *p; p = &(*p)->next) {
		struct dbus_match *x = *p;

		if (strcmp(x->text, canon) != 0)
			continue;
		*p = x->next;
		c->n_matches--;
		if (x->eavesdrop) {
			c->front->n_eavesdrop--;
			dbus_monitor_native_update(c->front);
		}
		dbus_match_rule_deinit(&x->rule);
		free(x->text);
		free(x);
		return 0;
	}
	return fail(k, ERR("MatchRuleNotFound"), "The match rule '%s' was not added", text);
}

/*
 * BecomeMonitor: its rules are read as AddMatch reads them, and the
 * eavesdrop key, which a monitor does not need (it sees everything its
 * rules match), is accepted and ignored.
 */
static int method_become_monitor(struct call *k)
{
	const char *text;
	uint32_t flags = 0;

	if (!caller_privileged(k))
		return fail(k, ERR("AccessDenied"), "%s",
			    "Only the bus's own uid and root may monitor the bus");
	if (dbus_reader_enter(&k->r, 'a') <= 0)
		return fail(k, ERR("InvalidArgs"), "%s", "Expected as");
	while (dbus_reader_read_basic(&k->r, 's', &text) > 0) {
		struct dbus_match *x;
		int r = match_new(k, text, &x);

		if (r)
			return r;
		x->eavesdrop = false;
		x->next = k->monitor_rules;
		k->monitor_rules = x;
	}
	(void)dbus_reader_exit(&k->r);
	(void)dbus_reader_read_basic(&k->r, 'u', &flags);
	if (flags)
		return fail(k, ERR("InvalidArgs"), "%s", "BecomeMonitor takes no flags");
	k->monitor = true;
	return 0;
}

static int method_get_id(struct call *k)
{
	return dbus_writer_append_basic(&k->w, 's', k->c->front->guid);
}

/* ---- org.freedesktop.DBus.Debug.Stats ------------------------------------------ */

/*
 * dbus-daemon's statistics, with the figures brokerd has: what is queued
 * in it now (a message is handled as soon as it is whole, so nothing waits
 * whole on the way in), match rules and names. Peaks are not kept, so
 * their keys are left out (the dictionary is open, clients look keys up).
 * Native clients' traffic never passes through brokerd: of them only their
 * number and their names are known.
 *
 * Who may ask: dbus-daemon leaves it to its configuration, whose system.conf
 * allows the interface to root alone and whose session bus has only its
 * user. With the XML its send rules decide (dbus-access.c, before the
 * call reaches the driver); without it, root and brokerd's own uid, which
 * is what those configurations come to.
 */
static int stats_refused(struct call *k)
{
	if (k->c->front->bus->dbus_policy || caller_privileged(k))
		return 0;
	return fail(k, ERR("AccessDenied"), "%s", "Only the bus's own uid and root may read its statistics");
}

static bool conn_active(const struct dbus_conn *c)
{
	return !c->dead && (c->peer || c->monitor);
}

/* Names c owns: its unique name and the well-known names it is the primary owner of (dbus-daemon's count). */
static uint32_t names_owned(struct registry_peer *p)
{
	uint32_t n = 1;

	for (unsigned int i = 0; registry_peer_owned_next(p, &i);)
		n++;
	return n;
}

static int method_get_stats(struct call *k)
{
	struct dbus_front *f = k->c->front;
	uint32_t active = 0, incomplete = 0, rules = 0, names = 0;
	if (stats_refused(k))
		return 1;
	for (struct dbus_conn *c = f->conns; c; c = c->next) {
		if (c->dead)
			continue;
		if (!conn_active(c)) {
			incomplete++;
			continue;
		}
		active++;
		if (c->monitor) /* its rules are its monitor rules, not match rules */
			continue;
		rules += c->n_matches;
		names += names_owned(c->peer);
	}
	dbus_writer_open(&k->w, 'a', "{sv}");
	dict_u(&k->w, "Serial", f->stats_serial++);
	dict_u(&k->w, "ActiveConnections", active);
	dict_u(&k->w, "IncompleteConnections", incomplete);
	dict_u(&k->w, "MatchRules", rules);
	dict_u(&k->w, "BusNames", names);
	dict_u(&k->w, "NativeConnections", (uint32_t)registry_peer_count(f->bus->registry));
	return dbus_writer_close(&k->w);
}

static int method_get_connection_stats(struct call *k)
{
	struct dbus_front *f = k->c->front;
	const char *name = arg_s(k);
	struct dbus_conn *d;
	struct registry_peer *p;
	uint32_t messages = 0;
	if (stats_refused(k))
		return 1;
	if (!strcmp(name, DBUS_DRIVER_NAME))
		return fail(k, ERR("InvalidArgs"), "%s", "The bus driver keeps no statistics of itself");
	d = dbus_front_conn_by_name(f, name);
	if (!d || !d->peer) {
		/* a native client: its name and its names, nothing of its traffic */
		p = registry_peer_resolve(f->bus->registry, name);
		if (!p)
			return fail(k, ERR("NameHasNoOwner"),
				    "Could not get the statistics of %s: no such name", name);
		dbus_writer_open(&k->w, 'a', "{sv}");
		dict_u(&k->w, "Serial", f->stats_serial++);
		dict_s(&k->w, "UniqueName", p->unique_name);
		dict_u(&k->w, "BusNames", names_owned(p));
		return dbus_writer_close(&k->w);
	}
	for (struct dbus_out *o = d->out_head; o; o = o->next)
		messages++;
	dbus_writer_open(&k->w, 'a', "{sv}");
	dict_u(&k->w, "Serial", f->stats_serial++);
	dict_s(&k->w, "UniqueName", d->name);
	dict_u(&k->w, "IncomingMessages", 0);
	dict_u(&k->w, "IncomingBytes", (uint32_t)d->in_len);
	dict_u(&k->w, "IncomingFDs", (uint32_t)d->n_in_fds);
	dict_u(&k->w, "OutgoingMessages", messages);
	dict_u(&k->w, "OutgoingBytes", (uint32_t)d->out_bytes);
	dict_u(&k->w, "OutgoingFDs", d->out_fds);
	dict_u(&k->w, "MatchRules", d->n_matches);
	dict_u(&k->w, "BusNames", names_owned(d->peer));
	return dbus_writer_close(&k->w);
}

/* Every connection's match rules by its unique name, as AddMatch kept them. */
static int method_get_all_match_rules(struct call *k)
{
	if (stats_refused(k))
		return 1;

	dbus_writer_open(&k->w, 'a', "{sas}");
	for (struct dbus_conn *c = k->c->front->conns; c; c = c->next) {
		if (c->dead || !c->peer)
			continue;
		dbus_writer_open(&k->w, '{', "sas");
		dbus_writer_append_basic(&k->w, 's', c->name);
		dbus_writer_open(&k->w, 'a', "s");
		for (struct dbus_match *x = c->matches; x; x = x->next)
			dbus_writer_append_basic(&k->w, 's', x->text);
		dbus_writer_close(&k->w);
		dbus_writer_close(&k->w);
	}
	return dbus_writer_close(&k->w);
}

/* ---- Peer, Introspectable, Properties ------------------------------------------ */

static int method_ping(struct call *k)
{
	return 0;
}

static int method_get_machine_id(struct call *k)
{
	char id[64] = "";
	FILE *fp = fopen("/etc/machine-id", "re");

	if (fp) {
		if (!fgets(id, sizeof(id), fp))
			id[0] = 0;
		fclose(fp);
	}
	id[strcspn(id, "\n")] = 0;
	if (strlen(id) != 32)
		return fail(k, ERR("Failed"), "%s", "No machine id (/etc/machine-id)");
	return dbus_writer_append_basic(&k->w, 's', id);
}

static const char introspection[] =
	"<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
	"\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n"
	"<node>\n"
	" <interface name=\"org.freedesktop.DBus\">\n"
	"  <method name=\"Hello\"><arg direction=\"out\" type=\"s\"/></method>\n"
	"  <method name=\"RequestName\"><arg direction=\"in\" type=\"s\"/><arg direction=\"in\" type=\"u\"/>"
	"<arg direction=\"out\" type=\"u\"/></method>\n"
	"  <method name=\"ReleaseName\"><arg direction=\"in\" type=\"s\"/><arg direction=\"out\" type=\"u\"/></method>\n"
	"  <method name=\"ListQueuedOwners\"><arg direction=\"in\" type=\"s\"/><arg direction=\"out\" type=\"as\"/></method>\n"
	"  <method name=\"ListNames\"><arg direction=\"out\" type=\"as\"/></method>\n"
	"  <method name=\"ListActivatableNames\"><arg direction=\"out\" type=\"as\"/></method>\n"
	"  <method name=\"NameHasOwner\"><arg direction=\"in\" type=\"s\"/><arg direction=\"out\" type=\"b\"/></method>\n"
	"  <method name=\"GetNameOwner\"><arg direction=\"in\" type=\"s\"/><arg direction=\"out\" type=\"s\"/></method>\n"
	"  <method name=\"GetConnectionUnixUser\"><arg direction=\"in\" type=\"s\"/><arg direction=\"out\" type=\"u\"/></method>\n"
	"  <method name=\"GetConnectionUnixProcessID\"><arg direction=\"in\" type=\"s\"/>"
	"<arg direction=\"out\" type=\"u\"/></method>\n"
	"  <method name=\"GetConnectionCredentials\"><arg direction=\"in\" type=\"s\"/>"
	"<arg direction=\"out\" type=\"a{sv}\"/></method>\n"
	"  <method name=\"AddMatch\"><arg direction=\"in\" type=\"s\"/></method>\n"
	"  <method name=\"RemoveMatch\"><arg direction=\"in\" type=\"s\"/></method>\n"
	"  <method name=\"GetId\"><arg direction=\"out\" type=\"s\"/></method>\n"
	"  <method name=\"StartServiceByName\"><arg direction=\"in\" type=\"s\"/><arg direction=\"in\" type=\"u\"/>"
	"<arg direction=\"out\" type=\"u\"/></method>\n"
	"  <method name=\"UpdateActivationEnvironment\"><arg direction=\"in\" type=\"a{ss}\"/></method>\n"
	"  <method name=\"ReloadConfig\"/>\n"
	"  <method name=\"GetConnectionSELinuxSecurityContext\"><arg direction=\"in\" type=\"s\"/>"
	"<arg direction=\"out\" type=\"ay\"/></method>\n"
	"  <signal name=\"NameOwnerChanged\"><arg type=\"s\"/><arg type=\"s\"/><arg type=\"s\"/></signal>\n"
	"  <signal name=\"NameLost\"><arg type=\"s\"/></signal>\n"
	"  <signal name=\"NameAcquired\"><arg type=\"s\"/></signal>\n"
	"  <property name=\"Features\" type=\"as\" access=\"read\"/>\n"
	"  <property name=\"Interfaces\" type=\"as\" access=\"read\"/>\n"
	" </interface>\n"
	" <interface name=\"org.freedesktop.DBus.Monitoring\">\n"
	"  <method name=\"BecomeMonitor\"><arg direction=\"in\" type=\"as\"/><arg direction=\"in\" type=\"u\"/>"
	"</method>\n"
	" </interface>\n"
	" <interface name=\"org.freedesktop.DBus.Debug.Stats\">\n"
	"  <method name=\"GetStats\"><arg direction=\"out\" type=\"a{sv}\"/></method>\n"
	"  <method name=\"GetConnectionStats\"><arg direction=\"in\" type=\"s\"/>"
	"<arg direction=\"out\" type=\"a{sv}\"/></method>\n"
	"  <method name=\"GetAllMatchRules\"><arg direction=\"out\" type=\"a{sas}\"/></method>\n"
	" </interface>\n"
	" <interface name=\"org.freedesktop.DBus.Properties\">\n"
	"  <method name=\"Get\"><arg direction=\"in\" type=\"s\"/><arg direction=\"in\" type=\"s\"/>"
	"<arg direction=\"out\" type=\"v\"/></method>\n"
	"  <method name=\"GetAll\"><arg direction=\"in\" type=\"s\"/><arg direction=\"out\" type=\"a{sv}\"/></method>\n"
	"  <method name=\"Set\"><arg direction=\"in\" type=\"s\"/><arg direction=\"in\" type=\"s\"/>"
	"<arg direction=\"in\" type=\"v\"/></method>\n"
	" </interface>\n"
	" <interface name=\"org.freedesktop.DBus.Introspectable\">\n"
	"  <method name=\"Introspect\"><arg direction=\"out\" type=\"s\"/></method>\n"
	" </interface>\n"
	" <interface name=\"org.freedesktop.DBus.Peer\">\n"
	"  <method name=\"Ping\"/>\n"
	"  <method name=\"GetMachineId\"><arg direction=\"out\" type=\"s\"/></method>\n"
	" </interface>\n"
	"</node>\n";

static int method_introspect(struct call *k)
{
	return dbus_writer_append_basic(&k->w, 's', introspection);
}

/*
 * Features and Interfaces: only what brokerd does. HeaderFiltering: the
 * header of every message is rewritten from the fields brokerd knows
 * (dbus_message_stamp()), unknown ones dropped; the optional interfaces it
 * has are Monitoring and Debug.Stats. SystemdActivation only with
 * --dbus-systemd-activation, when brokerd speaks dbus-daemon's
 * ActivationRequest protocol.
 */
static const struct {
	const char *name, *values[2];
} properties[] = { { "Features", { "HeaderFiltering" } }, { "Interfaces", { MONITORING, STATS } } };

static int property_value(struct call *k, size_t i)
{
	dbus_writer_open(&k->w, 'v', "as");
	dbus_writer_open(&k->w, 'a', "s");
	for (size_t j = 0; j < ELEMENTSOF(properties[i].values) && properties[i].values[j]; j++)
		dbus_writer_append_basic(&k->w, 's', properties[i].values[j]);
	if (i == 0 && k->c->front->bus->dbus_systemd_activation)
		dbus_writer_append_basic(&k->w, 's', "SystemdActivation");
	dbus_writer_close(&k->w);
	return dbus_writer_close(&k->w);
}

/* The property prop of iface: its index, or -1 with the error (fail()) as dbus-daemon names it. */
static int property_find(struct call *k, const char *iface, const char *prop)
{
	if (strcmp(iface, DBUS_DRIVER_INTERFACE) != 0)
		return fail(k, ERR("UnknownInterface"), "No interface %s on the bus object", iface), -1;
	for (size_t i = 0; i < ELEMENTSOF(properties); i++)
		if (!strcmp(prop, properties[i].name))
			return (int)i;
	return fail(k, ERR("UnknownProperty"), "No property %s on org.freedesktop.DBus", prop), -1;
}

static int method_properties_get(struct call *k)
{
	const char *iface = arg_s(k), *prop = arg_s(k);
	int i = property_find(k, iface, prop);

	return i < 0 ? 1 : property_value(k, (size_t)i);
}

static int method_properties_set(struct call *k)
{
	const char *iface = arg_s(k), *prop = arg_s(k);

	if (property_find(k, iface, prop) < 0)
		return 1;
	return fail(k, ERR("PropertyReadOnly"), "Property %s of org.freedesktop.DBus is read-only", prop);
}

static int method_properties_get_all(struct call *k)
{
	const char *iface = arg_s(k);

	if (*iface && strcmp(iface, DBUS_DRIVER_INTERFACE) != 0)
		return fail(k, ERR("UnknownInterface"), "No interface %s on the bus object", iface);
	dbus_writer_open(&k->w, 'a', "{sv}");
	for (size_t i = 0; i < ELEMENTSOF(properties); i++) {
		dbus_writer_open(&k->w, '{', "sv");
		dbus_writer_append_basic(&k->w, 's', properties[i].name);
		property_value(k, i);
		dbus_writer_close(&k->w);
	}
	return dbus_writer_close(&k->w);
}

/* ---- The table ------------------------------------------------------------------ */

struct method {
	const char *interface, *member, *in, *out;
	int (*handle)(struct call *k);
};

static const struct method methods[] = {
	{ DBUS, "Hello", "", "s", method_hello },
	{ DBUS, "RequestName", "su", "u", method_request_name },
	{ DBUS, "ReleaseName", "s", "u", method_release_name },
	{ DBUS, "ListQueuedOwners", "s", "as", method_list_queued_owners },
	{ DBUS, "ListNames", "", "as", method_list_names },
	{ DBUS, "ListActivatableNames", "", "as", method_list_activatable_names },
	{ DBUS, "NameHasOwner", "s", "b", method_name_has_owner },
	{ DBUS, "GetNameOwner", "s", "s", method_get_name_owner },
	{ DBUS, "GetConnectionUnixUser", "s", "u", method_get_unix_user },
	{ DBUS, "GetConnectionUnixProcessID", "s", "u", method_get_unix_pid },
	{ DBUS, "GetConnectionCredentials", "s", "a{sv}", method_get_credentials },
	{ DBUS, "AddMatch", "s", "", method_add_match },
	{ DBUS, "RemoveMatch", "s", "", method_remove_match },
	{ DBUS, "GetId", "", "s", method_get_id },
	{ DBUS, "StartServiceByName", "su", "u", method_start_service_by_name },
	{ DBUS, "UpdateActivationEnvironment", "a{ss}", "", method_update_activation_environment },
	{ DBUS, "ReloadConfig", "", "", method_reload_config },
	{ DBUS, "GetConnectionSELinuxSecurityContext", "s", "ay", method_get_selinux_context },
	{ MONITORING, "BecomeMonitor", "asu", "", method_become_monitor },
	{ STATS, "GetStats", "", "a{sv}", method_get_stats },
	{ STATS, "GetConnectionStats", "s", "a{sv}", method_get_connection_stats },
	{ STATS, "GetAllMatchRules", "", "a{sas}", method_get_all_match_rules },
	{ PEER, "Ping", "", "", method_ping },
	{ PEER, "GetMachineId", "", "s", method_get_machine_id },
	{ INTRO, "Introspect", "", "s", method_introspect },
	{ PROPS, "Get", "ss", "v", method_properties_get },
	{ PROPS, "GetAll", "s", "a{sv}", method_properties_get_all },
	{ PROPS, "Set", "ssv", "", method_properties_set },
};

static const struct method *method_find(const struct dbus_message *m)
{
	for (size_t i = 0; i < ELEMENTSOF(methods); i++)
		if (!strcmp(methods[i].member, m->h.member) &&
		    (!m->h.interface || !strcmp(methods[i].interface, m->h.interface)))
			return &methods[i];
	return NULL;
}

static int send_reply(struct call *k, const struct method *md)
{
	struct dbus_conn *c = k->c;
	struct dbus_header h = {
		.type = DBUS_MESSAGE_METHOD_RETURN,
		.reply_serial = k->m->h.serial,
		.signature = md->out,
		.n_fds = k->fd >= 0,
		.sender = DBUS_DRIVER_NAME,
		.destination = c->name,
	};
	void *body = NULL, *data;
	size_t body_len = 0, len;
	int *fds = NULL, r;

	r = dbus_writer_finish(&k->w, &body, &body_len);
	if (r < 0)
		return r;
	h.serial = ++c->front->serial ? c->front->serial : ++c->front->serial;
	r = dbus_message_write(&h, body, body_len, &data, &len);
	free(body);
	if (r < 0)
		return r;
	if (k->fd >= 0) {
		fds = malloc(sizeof(int));
		if (!fds) {
			free(data);
			return -ENOMEM;
		}
		fds[0] = TAKE_FD(k->fd);
	}
	/* Monitors see the driver's replies too (without the fd: a pidfd is for the caller only). */
	if (c->front->n_monitors && !c->monitor && !fds)
		dbus_monitor_driver_message(c->front, data, len);
	(void)dbus_conn_queue(c, data, len, fds, fds ? 1 : 0);
	return 0;
}

int dbus_driver_dispatch(struct dbus_conn *c, struct dbus_message *m)
{
	const struct method *md = method_find(m);
	struct call k = { .c = c, .m = m, .fd = -1 };
	int r;

	if (!md) {
		bool known = !m->h.interface;
		char text[512];

		/* An interface the bus object does not have is named as such (dbus-daemon does so too). */
		for (size_t i = 0; i < ELEMENTSOF(methods) && !known; i++)
			known = !strcmp(methods[i].interface, m->h.interface);
		if (!known) {
			snprintf(text, sizeof(text), "The bus object has no interface %s", m->h.interface);
			return dbus_driver_reply_error(c, m, ERR("UnknownInterface"), text);
		}

		snprintf(text, sizeof(text), "%s.%s is not a method of org.freedesktop.DBus",
			 m->h.interface ? m->h.interface : "(no interface)", m->h.member);
		return dbus_driver_reply_error(c, m, ERR("UnknownMethod"), text);
	}
	/*
	 * Monitoring only on the bus object's own path: a policy that allows
	 * "/" does not make a monitor. Its properties likewise, as dbus-daemon.
	 */
	if ((!strcmp(md->interface, MONITORING) || !strcmp(md->interface, PROPS) ||
	     !strcmp(md->interface, STATS)) &&
	    strcmp(m->h.path, DBUS_DRIVER_PATH) != 0) {
		char text[512];

		snprintf(text, sizeof(text), "%s has no interface %s", m->h.path, md->interface);
		return dbus_driver_reply_error(c, m, ERR("UnknownInterface"), text);
	}
	/* Likewise the privileged method, as dbus-daemon: whatever "/" is allowed, this is not. */
	if (!strcmp(md->member, "UpdateActivationEnvironment") && strcmp(m->h.path, DBUS_DRIVER_PATH) != 0) {
		char text[512];

		snprintf(text, sizeof(text), "%s is only available at the canonical object path %s",
			 md->member, DBUS_DRIVER_PATH);
		return dbus_driver_reply_error(c, m, ERR("AccessDenied"), text);
	}
	if (strcmp(m->h.signature ? m->h.signature : "", md->in) != 0) {
		char text[512];

		snprintf(text, sizeof(text), "%s takes arguments of signature '%s', not '%s'", md->member,
			 md->in, m->h.signature ? m->h.signature : "");
		return dbus_driver_reply_error(c, m, ERR("InvalidArgs"), text);
	}
	r = dbus_reader_init(&k.r, md->in, m->body, m->body_len, m->byte_order, m->h.n_fds);
	if (r == 0)
		r = dbus_writer_init(&k.w, md->out);
	if (r < 0)
		return r;
	r = md->handle(&k);
	if (r == 0 && k.w.error)
		r = k.w.error;
	if (r == 1)
		r = dbus_driver_reply_error(c, m, k.error, k.error_text);
	else if (r == 0 && !k.later && !(m->h.flags & DBUS_FLAG_NO_REPLY_EXPECTED))
		r = send_reply(&k, md);
	else if (r < 0)
		(void)dbus_driver_reply_error(c, m, ERR("Failed"), strerror(-r));
	dbus_writer_deinit(&k.w);
	if (k.fd >= 0)
		close(k.fd);
	/* After its reply, in dbus-daemon's order (monitors see both): the others hear of it, it learns its name. */
	if (md->handle == method_hello && c->peer && r >= 0) {
		signal_s(c->front, NULL, "NameOwnerChanged", "sss", c->name, "", c->name);
		signal_s(c->front, c, "NameAcquired", "s", c->name, NULL, NULL);
	}
	/* A monitor once its reply is out: its names go (well-known ones first), it only receives. */
	if (k.monitor && r >= 0 && c->peer) {
		dbus_driver_conn_gone(c);
		signal_s(c->front, c, "NameLost", "s", c->unique, NULL, NULL);
		dbus_monitor_become(c, TAKE_PTR(k.monitor_rules));
		dbus_bridge_signals_wanted(c->front); /* native names' signals, to show them */
	}
	matches_free(k.monitor_rules);
	return r < 0 ? 0 : r;
}
