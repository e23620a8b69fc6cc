/* SPDX-License-Identifier: MIT */
/*
 * policy-dbus.c - dbus-daemon's policy, limits and servicedirs mapped onto
 * brokerd's (see policy-dbus.h).
 *
 * dbus-daemon decides per message. So does brokerd for the messages on
 * its D-Bus socket (policy-dbus-msg.c, from the same parsed rules). On
 * native channels brokerd decides per name (who may own it, open its call
 * channel, subscribe to its signals) and then stays out of the data path;
 * the rest of this comment is about that mapping. A rule whose attributes
 * select every call to a name maps exactly. One that selects only some
 * calls (send_interface, send_member, send_path, min_fds, ...) cannot:
 * brokerd grants a call channel or not. So, never loosening what the XML
 * says: such an allow is not granted, such a deny denies the whole name.
 * Both are reported. Everything else that brokerd does not decide (signals
 * and replies, which owners and callees may always send, connections,
 * eavesdropping) is either what brokerd does anyway or reported as not
 * honoured.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/dbus-config.h"
#include "brokerd/policy-dbus-msg.h"
#include "brokerd/policy-dbus.h"
#include "protocol/ctrl.h"
#include "util/macro.h"

#define DBUS_DRIVER "org.freedesktop.DBus"

static const char *const outcome_names[] = {
	[POLICY_DBUS_APPLIED] = "applied",
	[POLICY_DBUS_BUILTIN] = "built-in",
	[POLICY_DBUS_PARTLY] = "partly",
	[POLICY_DBUS_STRICTER] = "stricter",
	[POLICY_DBUS_NOT_HONOURED] = "not honoured",
};
_Static_assert(ELEMENTSOF(outcome_names) == _POLICY_DBUS_OUTCOME_MAX, "every outcome needs a name");

const char *policy_dbus_outcome_to_string(enum policy_dbus_outcome o)
{
	return (unsigned int)o < _POLICY_DBUS_OUTCOME_MAX ? outcome_names[o] : NULL;
}

/* What one rule becomes: at most one brokerd rule, and its outcome. */
struct mapping {
	enum policy_dbus_outcome outcome;
	int action; /* enum policy_action, -1: no brokerd rule */
	bool allow;
	char pattern[CTRL_NAME_MAX + 3];
	char why[512];
};

static const char *attr(const struct dbus_config_rule *r, enum dbus_rule_attr a)
{
	return r->attr[a];
}

/* Absent, or "*" where dbus-daemon takes "*" as "any message". */
static bool any(const char *v)
{
	return !v || strcmp(v, "*") == 0;
}

static bool is_true(const char *v)
{
	return v && strcmp(v, "true") == 0;
}

static void set(struct mapping *m, enum policy_dbus_outcome o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set(struct mapping *m, enum policy_dbus_outcome o, const char *fmt, ...)
{
	va_list ap;

	m->outcome = o;
	va_start(ap, fmt);
	vsnprintf(m->why, sizeof(m->why), fmt, ap);
	va_end(ap);
}

/* Sets the brokerd rule; false (and not honoured) when brokerd cannot name it. */
static bool target(struct mapping *m, int action, bool allow, const char *name, bool prefix)
{
	char check[CTRL_NAME_MAX + 3];

	m->action = action;
	m->allow = allow;
	if (!name) {
		snprintf(m->pattern, sizeof(m->pattern), "*");
		return true;
	}
	/* brokerd's own pattern check is policy_add_rule(); this only builds the text */
	if (strlen(name) > CTRL_NAME_MAX || !ctrl_name_is_valid_wellknown(name)) {
		m->action = -1;
		set(m, POLICY_DBUS_NOT_HONOURED, "'%s' is not a well-known name brokerd knows", name);
		return false;
	}
	snprintf(check, sizeof(check), "%s%s", name, prefix ? ".*" : "");
	snprintf(m->pattern, sizeof(m->pattern), "%s", check);
	return true;
}

/* The attributes that make a rule select only some of the messages to or from a name. */
static const char *narrowing(const struct dbus_config_rule *r, bool send)
{
	static const enum dbus_rule_attr s[] = { DBUS_ATTR_SEND_INTERFACE, DBUS_ATTR_SEND_MEMBER,
						 DBUS_ATTR_SEND_PATH, DBUS_ATTR_MIN_FDS, DBUS_ATTR_MAX_FDS };
	static const enum dbus_rule_attr rc[] = { DBUS_ATTR_RECEIVE_INTERFACE, DBUS_ATTR_RECEIVE_MEMBER,
						  DBUS_ATTR_RECEIVE_PATH, DBUS_ATTR_MIN_FDS,
						  DBUS_ATTR_MAX_FDS };
	const enum dbus_rule_attr *v = send ? s : rc;

	for (size_t i = 0; i < ELEMENTSOF(s); i++) {
		const char *x = attr(r, v[i]);

		/* min_fds="0" and "*" select everything */
		if (!any(x) && !((v[i] == DBUS_ATTR_MIN_FDS) && strcmp(x, "0") == 0))
			return dbus_rule_attr_to_string(v[i]);
	}
	return NULL;
}

static void map_send(const struct dbus_config_rule *r, struct mapping *m)
{
	const char *dest = attr(r, DBUS_ATTR_SEND_DESTINATION),
		   *prefix = attr(r, DBUS_ATTR_SEND_DESTINATION_PREFIX);
	const char *type = attr(r, DBUS_ATTR_SEND_TYPE), *narrow = narrowing(r, true);
	bool calls = (any(type) || strcmp(type, "method_call") == 0) && any(attr(r, DBUS_ATTR_SEND_ERROR)) &&
		     !is_true(attr(r, DBUS_ATTR_SEND_BROADCAST));
	bool eavesdrop = is_true(attr(r, DBUS_ATTR_EAVESDROP));
	const char *name = prefix ? prefix : any(dest) ? NULL : dest;

	if (!r->allow && eavesdrop) {
		set(m, POLICY_DBUS_BUILTIN,
		    "matches eavesdropping only: brokerd lets nobody but root monitor");
		return;
	}
	if (!calls) {
		if (r->allow)
			set(m, POLICY_DBUS_BUILTIN,
			    "not about method calls: in brokerd an owner may always emit its name's signals and a callee answer its caller");
		else
			set(m, POLICY_DBUS_NOT_HONOURED,
			    "brokerd does not filter signals, replies or errors (they never pass through it)");
		return;
	}
	if (name && strcmp(name, DBUS_DRIVER) == 0) {
		set(m, POLICY_DBUS_NOT_HONOURED,
		    "the bus driver: brokerd checks its own requests itself, send rules do not apply to them");
		return;
	}
	if (!target(m, POLICY_SEND, r->allow, name, prefix != NULL))
		return;
	if (narrow && r->allow) {
		m->action = -1;
		set(m, POLICY_DBUS_NOT_HONOURED,
		    "allows only some calls to %s (%s): brokerd grants all calls to a name or none, so it grants none",
		    m->pattern, narrow);
	} else if (narrow) {
		set(m, POLICY_DBUS_STRICTER, "deny send %s: every call, not only those with %s", m->pattern,
		    narrow);
	} else if (eavesdrop) {
		set(m, POLICY_DBUS_PARTLY, "%s send %s; eavesdropping is root's only",
		    r->allow ? "allow" : "deny", m->pattern);
	} else {
		set(m, POLICY_DBUS_APPLIED, "%s send %s", r->allow ? "allow" : "deny", m->pattern);
	}
}

static void map_receive(const struct dbus_config_rule *r, struct mapping *m)
{
	const char *sender = attr(r, DBUS_ATTR_RECEIVE_SENDER), *type = attr(r, DBUS_ATTR_RECEIVE_TYPE);
	const char *narrow = narrowing(r, false);
	bool all_types = any(type) && any(attr(r, DBUS_ATTR_RECEIVE_ERROR));
	bool signals = all_types ||
		       (strcmp(type ? type : "", "signal") == 0 && any(attr(r, DBUS_ATTR_RECEIVE_ERROR)));
	bool eavesdrop = is_true(attr(r, DBUS_ATTR_EAVESDROP));
	const char *name = any(sender) ? NULL : sender;

	if (!r->allow && eavesdrop) {
		set(m, POLICY_DBUS_BUILTIN,
		    "matches eavesdropping only: brokerd lets nobody but root monitor");
		return;
	}
	if (!signals) {
		if (r->allow)
			set(m, POLICY_DBUS_BUILTIN,
			    "calls and replies: in brokerd an owner always receives the calls to its names and a caller its replies");
		else
			set(m, POLICY_DBUS_NOT_HONOURED,
			    "brokerd cannot refuse calls or replies to a receiver (they never pass through it)");
		return;
	}
	if (name && strcmp(name, DBUS_DRIVER) == 0) {
		set(m, POLICY_DBUS_NOT_HONOURED,
		    "the bus driver's signals: brokerd sends its own to every peer that asks");
		return;
	}
	if (!target(m, POLICY_RECEIVE, r->allow, name, false))
		return;
	if (narrow && r->allow) {
		m->action = -1;
		set(m, POLICY_DBUS_NOT_HONOURED,
		    "allows only some signals of %s (%s): brokerd grants a name's signals whole or not, so it grants none",
		    m->pattern, narrow);
	} else if (narrow) {
		set(m, POLICY_DBUS_STRICTER, "deny receive %s: every signal, not only those with %s",
		    m->pattern, narrow);
	} else if (!r->allow && all_types) {
		set(m, POLICY_DBUS_PARTLY,
		    "deny receive %s (its signals); calls and replies from it are not refused", m->pattern);
	} else if (eavesdrop) {
		set(m, POLICY_DBUS_PARTLY, "allow receive %s; eavesdropping is root's only", m->pattern);
	} else {
		set(m, POLICY_DBUS_APPLIED, "%s receive %s", r->allow ? "allow" : "deny", m->pattern);
	}
}

static void map_rule(const struct dbus_config_rule *r, uid_t context_uid, struct mapping *m)
{
	const char *v;
	bool send = false, receive = false;

	*m = (struct mapping){ .action = -1 };
	for (unsigned int a = 0; a <= DBUS_ATTR_RECEIVE_REQUESTED_REPLY; a++)
		if (r->attr[a]) {
			send = send || a <= DBUS_ATTR_SEND_REQUESTED_REPLY;
			receive = receive || a > DBUS_ATTR_SEND_REQUESTED_REPLY;
		}
	if ((v = attr(r, DBUS_ATTR_OWN))) {
		if (target(m, POLICY_OWN, r->allow, strcmp(v, "*") == 0 ? NULL : v, false))
			set(m, POLICY_DBUS_APPLIED, "%s own %s", r->allow ? "allow" : "deny", m->pattern);
	} else if ((v = attr(r, DBUS_ATTR_OWN_PREFIX))) {
		if (target(m, POLICY_OWN, r->allow, v, true))
			set(m, POLICY_DBUS_APPLIED, "%s own %s", r->allow ? "allow" : "deny", m->pattern);
	} else if (attr(r, DBUS_ATTR_USER) || attr(r, DBUS_ATTR_GROUP)) {
		if (r->allow)
			set(m, POLICY_DBUS_BUILTIN, "brokerd lets every user connect");
		else
			set(m, POLICY_DBUS_NOT_HONOURED,
			    "brokerd does not refuse connections by user or group");
	} else if (send) {
		map_send(r, m);
	} else if (receive) {
		map_receive(r, m);
	} else if (is_true(attr(r, DBUS_ATTR_EAVESDROP))) {
		/* eavesdrop="true" alone */
		if (!r->allow)
			set(m, POLICY_DBUS_BUILTIN, "brokerd lets nobody but root monitor");
		else if (r->context == DBUS_POLICY_USER && context_uid == 0)
			set(m, POLICY_DBUS_BUILTIN, "root may monitor in brokerd");
		else
			set(m, POLICY_DBUS_NOT_HONOURED, "only root may monitor in brokerd");
	} else {
		set(m, POLICY_DBUS_BUILTIN, "eavesdrop=\"false\" alone selects nothing brokerd decides");
	}
}

/* "<allow own=\"x\"/>", attributes in the order of dbus-daemon(1). */
static void rule_text(const struct dbus_config_rule *r, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "<%s", r->allow ? "allow" : "deny");

	for (unsigned int a = 0; a < _DBUS_ATTR_MAX && o < len; a++)
		if (r->attr[a])
			o += (size_t)snprintf(buf + o, len - o, " %s=\"%s\"", dbus_rule_attr_to_string(a),
					      r->attr[a]);
	if (o < len)
		snprintf(buf + o, len - o, "/>");
}

static void emit(policy_dbus_report_fn fn, void *userdata, struct policy_dbus_counts *counts,
		 enum policy_dbus_outcome o, const char *file, unsigned int line, const char *element,
		 const char *what)
{
	if (counts) {
		counts->n[o]++;
		counts->native[o]++;
	}
	if (fn)
		fn(userdata, o, file, line, element, what);
}

/* A send or receive rule: one policy-dbus-msg.c decides per message on the D-Bus socket. */
static bool is_message_rule(const struct dbus_config_rule *r)
{
	for (unsigned int a = 0; a <= DBUS_ATTR_RECEIVE_REQUESTED_REPLY; a++)
		if (r->attr[a])
			return true;
	return r->attr[DBUS_ATTR_EAVESDROP] != NULL;
}

/* The bus driver's: checked on the D-Bus socket as any send rule (dbus-access.c); native requests are not messages. */
static bool names_driver(const struct dbus_config_rule *r)
{
	const char *d = r->attr[DBUS_ATTR_SEND_DESTINATION];

	return d && strcmp(d, DBUS_DRIVER) == 0;
}

/*
 * A message rule has two outcomes: on the D-Bus socket, where brokerd
 * decides every message as dbus-daemon does (policy-dbus-msg.c), and on
 * native channels, where it decides per name (m). The first is the one
 * reported; the second is told in the text and counted apart.
 */
static void emit_message_rule(policy_dbus_report_fn fn, void *userdata, struct policy_dbus_counts *counts,
			      const struct dbus_config_rule *rule, const char *element,
			      const struct mapping *m)
{
	enum policy_dbus_outcome o = POLICY_DBUS_APPLIED;
	char what[1024];
	const char *how = "as written";

	if (names_driver(rule)) {
		how = "as written, on messages to the bus driver";
	} else if (rule->context == DBUS_POLICY_CONSOLE) {
		how = "as written, at_console meaning a seat of the user in logind";
	}
	snprintf(what, sizeof(what), "D-Bus socket: %s; native channels: %s, %s", how,
		 outcome_names[m->outcome], m->why);
	if (counts) {
		counts->n[o]++;
		counts->native[m->outcome]++;
	}
	if (fn)
		fn(userdata, o, rule->file, rule->line, element, what);
}

/* The context of r as a brokerd scope; false (with why) when brokerd has none for it. */
static bool rule_scope(const struct dbus_config_rule *r, enum policy_scope *scope, uint32_t *id, char *why,
		       size_t why_len)
{
	*id = 0;
	switch (r->context) {
	case DBUS_POLICY_DEFAULT:
		*scope = POLICY_SCOPE_DEFAULT;
		return true;
	case DBUS_POLICY_MANDATORY:
		*scope = POLICY_SCOPE_MANDATORY;
		return true;
	case DBUS_POLICY_USER:
	case DBUS_POLICY_GROUP: {
		bool user = r->context == DBUS_POLICY_USER;

		*scope = user ? POLICY_SCOPE_USER : POLICY_SCOPE_GROUP;
		if (policy_parse_id(r->who, user, id) < 0) {
			/* dbus-daemon skips the policy of an unknown user too */
			snprintf(why, why_len, "<policy %s=\"%s\">: no such %s, the policy is skipped",
				 user ? "user" : "group", r->who, user ? "user" : "group");
			return false;
		}
		return true;
	}
	default:
		snprintf(why, why_len, "<policy at_console=\"%s\">: brokerd has no notion of the console",
			 r->who);
		return false;
	}
}

/* dbus-daemon's limits: brokerd's quota of the same meaning, or why there is none. */
static const struct {
	const char *dbus, *brokerd, *why;
} limit_map[] = {
	{ "max_completed_connections", "max_connections", NULL },
	{ "max_connections_per_user", "connections", NULL },
	{ "auth_timeout", "hello_timeout_ms", NULL },
	{ "max_incomplete_connections", NULL,
	  "brokerd holds the last reserved_connections for root and light users, and closes silent connections after hello_timeout_ms" },
	{ "max_names_per_connection", "max_names_per_connection", NULL },
	{ "max_match_rules_per_connection", "max_match_rules_per_connection", NULL },
	{ "max_pending_service_starts", NULL,
	  "brokerd counts waiting activations per uid ([limits] activations)" },
	{ "service_start_timeout", NULL, "brokerd's is --activation-timeout" },
	/* on the D-Bus socket, where messages pass through brokerd (brokerd/README.md, "D-Bus clients") */
	{ "max_incoming_bytes", NULL,
	  "built-in: brokerd holds at most one message (max_message_size) of a connection's input, and reads none while its uid's dbus_bytes are used up" },
	{ "max_incoming_unix_fds", "max_incoming_unix_fds", NULL },
	{ "max_outgoing_bytes", "max_outgoing_bytes", NULL },
	{ "max_outgoing_unix_fds", "max_outgoing_unix_fds", NULL },
	{ "max_message_size", "max_message_size", NULL },
	{ "max_message_unix_fds", NULL, "the protocol's 253 fds a message apply" },
	{ "pending_fd_timeout", NULL, "fds come with their message's first byte: brokerd holds none without a message" },
	{ "max_replies_per_connection", "max_replies_per_connection", NULL },
	{ "reply_timeout", "reply_timeout_ms", NULL },
	{ "max_containers", NULL, "brokerd has no Containers1 interface" },
	{ "max_containers_per_user", NULL, "brokerd has no Containers1 interface" },
	{ "max_container_metadata_bytes", NULL, "brokerd has no Containers1 interface" },
	{ "max_connections_per_container", NULL, "brokerd has no Containers1 interface" },
};

static int apply_limit(struct policy *p, const struct dbus_config_limit *l, policy_dbus_report_fn fn,
		       void *userdata, struct policy_dbus_counts *counts)
{
	char el[256], what[256];

	snprintf(el, sizeof(el), "<limit name=\"%s\">%llu</limit>", l->name, (unsigned long long)l->value);
	for (size_t i = 0; i < ELEMENTSOF(limit_map); i++) {
		if (strcmp(limit_map[i].dbus, l->name) != 0)
			continue;
		if (!limit_map[i].brokerd) {
			bool builtin = !strncmp(limit_map[i].why, "built-in: ", 10);

			emit(fn, userdata, counts, builtin ? POLICY_DBUS_BUILTIN : POLICY_DBUS_NOT_HONOURED, l->file,
			     l->line, el, limit_map[i].why + (builtin ? 10 : 0));
			return 0;
		}
		if (policy_set_limit(p, limit_map[i].brokerd, l->value) < 0)
			return -EINVAL; /* the table names brokerd's quotas */
		snprintf(what, sizeof(what), "[limits] %s %llu", limit_map[i].brokerd,
			 (unsigned long long)l->value);
		emit(fn, userdata, counts, POLICY_DBUS_APPLIED, l->file, l->line, el, what);
		return 0;
	}
	emit(fn, userdata, counts, POLICY_DBUS_NOT_HONOURED, l->file, l->line, el, "unknown limit");
	return 0;
}

int policy_dbus_apply(struct policy *p, const struct dbus_config *c, policy_dbus_report_fn fn, void *userdata,
		      struct policy_dbus_counts *counts)
{
	char el[1024];
	int r;

	if (!p || !c)
		return -EINVAL;
	for (size_t i = 0; i < c->n_notes; i++)
		emit(fn, userdata, counts, POLICY_DBUS_NOT_HONOURED, c->notes[i].file, c->notes[i].line,
		     c->notes[i].text, "");
	for (size_t i = 0; i < c->n_rules; i++) {
		const struct dbus_config_rule *rule = &c->rules[i];
		struct mapping m;
		enum policy_scope scope;
		uint32_t id;
		char why[256];

		rule_text(rule, el, sizeof(el));
		if (!rule_scope(rule, &scope, &id, why, sizeof(why))) {
			if (rule->context == DBUS_POLICY_CONSOLE && is_message_rule(rule)) {
				m = (struct mapping){ .outcome = POLICY_DBUS_NOT_HONOURED };
				snprintf(m.why, sizeof(m.why), "%s", why);
				emit_message_rule(fn, userdata, counts, rule, el, &m);
			} else {
				emit(fn, userdata, counts, POLICY_DBUS_NOT_HONOURED, rule->file, rule->line,
				     el, why);
			}
			continue;
		}
		map_rule(rule, (uid_t)id, &m);
		if (m.action >= 0) {
			r = policy_add_rule(p, scope, id, m.allow, m.action, m.pattern, rule->file,
					    rule->line);
			if (r == -ENOMEM)
				return r;
			if (r < 0) {
				snprintf(m.why, sizeof(m.why), "'%s' is not a name pattern brokerd knows",
					 m.pattern);
				m.outcome = POLICY_DBUS_NOT_HONOURED;
			}
		}
		if (is_message_rule(rule))
			emit_message_rule(fn, userdata, counts, rule, el, &m);
		else
			emit(fn, userdata, counts, m.outcome, rule->file, rule->line, el, m.why);
	}
	for (size_t i = 0; i < c->n_limits; i++) {
		r = apply_limit(p, &c->limits[i], fn, userdata, counts);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The activation files of dirs that brokerd cannot use, each reported. */
static void report_service_files(const char *const *dirs, policy_dbus_report_fn fn, void *userdata,
				 struct policy_dbus_counts *counts)
{
	for (size_t d = 0; dirs[d]; d++) {
		struct dirent **list = NULL;
		int n = scandir(dirs[d], &list, NULL, alphasort);

		for (int i = 0; i < n; i++) {
			const char *e = list[i]->d_name;
			size_t l = strlen(e), k;
			char path[4096], text[8192], err[512];
			struct service s;
			FILE *f;

			if (e[0] == '.' || l < 9 || strcmp(e + l - 8, ".service") != 0)
				goto next;
			snprintf(path, sizeof(path), "%s/%s", dirs[d], e);
			f = fopen(path, "re");
			if (!f)
				goto next;
			k = fread(text, 1, sizeof(text) - 1, f);
			(void)fclose(f);
			text[k] = 0;
			if (service_parse_string(&s, path, text, err, sizeof(err)) == 0) {
				service_deinit(&s);
				goto next;
			}
			if (counts) {
				counts->services_bad++;
				counts->n[POLICY_DBUS_NOT_HONOURED]++;
				counts->native[POLICY_DBUS_NOT_HONOURED]++;
			}
			if (fn)
				fn(userdata, POLICY_DBUS_NOT_HONOURED, path, 0, "service file", err);
next:
			free(list[i]);
		}
		free(list);
	}
}

int policy_dbus_load(const char *config, const char *const *policy_dirs, const char *const *service_dirs,
		     struct policy **ret_policy, struct service_set **ret_services,
		     struct policy_dbus_msg **ret_msg, policy_dbus_report_fn fn, void *userdata,
		     struct policy_dbus_counts *counts, char *err, size_t err_len)
{
	_cleanup_(dbus_config_freep) struct dbus_config *c = NULL;
	_cleanup_(policy_dbus_msg_freep) struct policy_dbus_msg *msg = NULL;
	struct policy *p = NULL;
	struct service_set *s = NULL;
	const char **dirs = NULL;
	size_t n = 0;
	int r;

	if (!config || !policy_dirs || !service_dirs || !ret_policy || !ret_services)
		return -EINVAL;
	r = dbus_config_load(&c, config, err, err_len);
	if (r < 0)
		return r;
	r = policy_new(&p);
	if (r < 0)
		return r;
	r = policy_dbus_apply(p, c, fn, userdata, counts);
	if (r == 0)
		r = policy_load_into(p, policy_dirs, err, err_len);
	if (r == 0 && ret_msg)
		r = policy_dbus_msg_new(&msg, c);
	if (r < 0)
		goto fail;
	/* brokerd's own activation directories first: they mask the D-Bus ones */
	while (service_dirs[n])
		n++;
	dirs = calloc(n + c->n_servicedirs + 1, sizeof(*dirs));
	if (!dirs) {
		r = -ENOMEM;
		goto fail;
	}
	memcpy(dirs, service_dirs, n * sizeof(*dirs));
	for (size_t i = 0; i < c->n_servicedirs; i++)
		dirs[n + i] = c->servicedirs[i];
	/* brokerd's own bad files too: the load without --dbus-config logs those as well */
	report_service_files((const char *const *)dirs, fn, userdata, counts);
	{
		char serr[512] = "";
		unsigned int bad = 0;

		r = service_set_load(&s, (const char *const *)dirs, &bad, serr, sizeof(serr));
	}
	free(dirs);
	if (r < 0)
		goto fail;
	if (counts)
		counts->services = (unsigned int)service_set_count(s);
	*ret_policy = p;
	*ret_services = s;
	if (ret_msg)
		*ret_msg = TAKE_PTR(msg);
	return 0;
fail:
	if (r == -ENOMEM && err && err_len)
		snprintf(err, err_len, "%s: %s", config, strerror(ENOMEM));
	policy_free(p);
	return r;
}

static void print_outcome(void *userdata, enum policy_dbus_outcome o, const char *file, unsigned int line,
			  const char *element, const char *what)
{
	FILE *f = userdata;

	/* a note's element says why itself */
	if (line)
		fprintf(f, "%s: %s:%u: %s%s%s\n", outcome_names[o], file, line, element, *what ? ": " : "",
			what);
	else
		fprintf(f, "%s: %s: %s%s%s\n", outcome_names[o], file, element, *what ? ": " : "", what);
}

int policy_dbus_report(FILE *f, const char *config, const char *const *policy_dirs,
		       const char *const *service_dirs)
{
	_cleanup_(dbus_config_freep) struct dbus_config *c = NULL;
	_cleanup_(policy_dbus_msg_freep) struct policy_dbus_msg *msg = NULL;
	struct policy_dbus_counts counts = { 0 };
	struct policy *p = NULL;
	struct service_set *s = NULL;
	char err[1024] = "";
	unsigned int not_honoured, native_not;
	int r;

	/* the settings, read once more for their own lines: cheap, and the load below stays one call */
	r = dbus_config_load(&c, config, err, sizeof(err));
	if (r < 0) {
		fprintf(f, "error: %s\n", err);
		return r;
	}
	fprintf(f, "dbus-config: %s\n", config);
	for (size_t i = 0; i < c->n_files; i++)
		fprintf(f, "file: %s\n", c->files[i]);
	fprintf(f, "type: %s\n", c->type ? c->type : "(none)");
	for (size_t i = 0; i < c->n_listen; i++)
		fprintf(f, "listen: %s\n", c->listen[i]);
	for (size_t i = 0; i < c->n_servicedirs; i++)
		fprintf(f, "servicedir: %s\n", c->servicedirs[i]);
	for (size_t i = 0; policy_dirs[i]; i++)
		fprintf(f, "brokerd policy dir: %s\n", policy_dirs[i]);
	for (size_t i = 0; service_dirs[i]; i++)
		fprintf(f, "brokerd service dir: %s\n", service_dirs[i]);
	r = policy_dbus_load(config, policy_dirs, service_dirs, &p, &s, &msg, print_outcome, f, &counts, err,
			     sizeof(err));
	if (r < 0) {
		fprintf(f, "error: %s\n", err);
		return r;
	}
	for (size_t i = 0; i < service_set_count(s); i++) {
		const struct service *sv = service_set_get(s, i);

		if (sv->unit)
			fprintf(f, "service: %s -> %s (%s)\n", sv->name, sv->unit, sv->file);
		else
			fprintf(f, "service: %s -> Exec=%s (%s)\n", sv->name, sv->exec, sv->file);
	}
	not_honoured = counts.n[POLICY_DBUS_PARTLY] + counts.n[POLICY_DBUS_STRICTER] +
		       counts.n[POLICY_DBUS_NOT_HONOURED];
	native_not = counts.native[POLICY_DBUS_PARTLY] + counts.native[POLICY_DBUS_STRICTER] +
		     counts.native[POLICY_DBUS_NOT_HONOURED];
	fprintf(f,
		"summary: %zu rules, %zu limits, %zu other elements; %u applied, %u built-in, %u partly, %u stricter, %u not honoured; %zu brokerd rules in all; %u services, %u service files not honoured\n",
		c->n_rules, c->n_limits, c->n_notes, counts.n[POLICY_DBUS_APPLIED],
		counts.n[POLICY_DBUS_BUILTIN], counts.n[POLICY_DBUS_PARTLY], counts.n[POLICY_DBUS_STRICTER],
		counts.n[POLICY_DBUS_NOT_HONOURED], policy_rule_count(p), counts.services,
		counts.services_bad);
	fprintf(f,
		"native channels: %u applied, %u built-in, %u partly, %u stricter, %u not honoured; "
		"D-Bus socket: %zu send and receive rules decided per message\n",
		counts.native[POLICY_DBUS_APPLIED], counts.native[POLICY_DBUS_BUILTIN],
		counts.native[POLICY_DBUS_PARTLY], counts.native[POLICY_DBUS_STRICTER],
		counts.native[POLICY_DBUS_NOT_HONOURED], policy_dbus_msg_count(msg));
	fprintf(f, "not honoured in all: %u on the D-Bus socket, %u on native channels\n", not_honoured,
		native_not);
	policy_free(p);
	service_set_free(s);
	return 0;
}
