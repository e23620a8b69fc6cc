/* SPDX-License-Identifier: MIT */
/*
 * dbus-config.c - dbus-daemon's XML configuration, read with expat (see
 * dbus-config.h). One expat parser per file; an <include> or <includedir>
 * starts the next file's parser from the end handler of the element, so the
 * included rules land exactly where dbus-daemon puts them: in file order.
 */
#include <dirent.h>
#include <errno.h>
#include <expat.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/dbus-config.h"
#include "util/array.h"
#include "util/macro.h"

/* Larger files are refused: the distribution's biggest is some 20 KiB. */
#define FILE_MAX (1 << 20)
/* Text of one element (a path, an address). */
#define TEXT_MAX 4096
/* <busconfig><policy><allow> (or <selinux><associate>) is as deep as it gets. */
#define ELEMENT_DEPTH_MAX 3

static const char *const attr_names[] = {
	[DBUS_ATTR_SEND_INTERFACE] = "send_interface",
	[DBUS_ATTR_SEND_MEMBER] = "send_member",
	[DBUS_ATTR_SEND_ERROR] = "send_error",
	[DBUS_ATTR_SEND_BROADCAST] = "send_broadcast",
	[DBUS_ATTR_SEND_DESTINATION] = "send_destination",
	[DBUS_ATTR_SEND_DESTINATION_PREFIX] = "send_destination_prefix",
	[DBUS_ATTR_SEND_TYPE] = "send_type",
	[DBUS_ATTR_SEND_PATH] = "send_path",
	[DBUS_ATTR_SEND_REQUESTED_REPLY] = "send_requested_reply",
	[DBUS_ATTR_RECEIVE_INTERFACE] = "receive_interface",
	[DBUS_ATTR_RECEIVE_MEMBER] = "receive_member",
	[DBUS_ATTR_RECEIVE_ERROR] = "receive_error",
	[DBUS_ATTR_RECEIVE_SENDER] = "receive_sender",
	[DBUS_ATTR_RECEIVE_TYPE] = "receive_type",
	[DBUS_ATTR_RECEIVE_PATH] = "receive_path",
	[DBUS_ATTR_RECEIVE_REQUESTED_REPLY] = "receive_requested_reply",
	[DBUS_ATTR_EAVESDROP] = "eavesdrop",
	[DBUS_ATTR_MIN_FDS] = "min_fds",
	[DBUS_ATTR_MAX_FDS] = "max_fds",
	[DBUS_ATTR_OWN] = "own",
	[DBUS_ATTR_OWN_PREFIX] = "own_prefix",
	[DBUS_ATTR_USER] = "user",
	[DBUS_ATTR_GROUP] = "group",
};
_Static_assert(ELEMENTSOF(attr_names) == _DBUS_ATTR_MAX, "every attribute needs a name");

static const char *const context_names[] = {
	[DBUS_POLICY_DEFAULT] = "context=\"default\"",
	[DBUS_POLICY_MANDATORY] = "context=\"mandatory\"",
	[DBUS_POLICY_USER] = "user",
	[DBUS_POLICY_GROUP] = "group",
	[DBUS_POLICY_CONSOLE] = "at_console",
};
_Static_assert(ELEMENTSOF(context_names) == _DBUS_POLICY_MAX, "every context needs a name");

const char *dbus_rule_attr_to_string(enum dbus_rule_attr a)
{
	return (unsigned int)a < _DBUS_ATTR_MAX ? attr_names[a] : NULL;
}

const char *dbus_policy_context_to_string(enum dbus_policy_context c)
{
	return (unsigned int)c < _DBUS_POLICY_MAX ? context_names[c] : NULL;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

struct dbus_config *dbus_config_free(struct dbus_config *c)
{
	if (!c)
		return NULL;
	free(c->type);
	free(c->user);
	free(c->pidfile);
	free(c->servicehelper);
	strv_free(c->listen, c->n_listen);
	strv_free(c->auth, c->n_auth);
	strv_free(c->servicedirs, c->n_servicedirs);
	for (size_t i = 0; i < c->n_rules; i++) {
		free(c->rules[i].who);
		for (unsigned int a = 0; a < _DBUS_ATTR_MAX; a++)
			free(c->rules[i].attr[a]);
	}
	free(c->rules);
	for (size_t i = 0; i < c->n_limits; i++)
		free(c->limits[i].name);
	free(c->limits);
	for (size_t i = 0; i < c->n_notes; i++)
		free(c->notes[i].text);
	free(c->notes);
	strv_free(c->files, c->n_files);
	free(c);
	return NULL;
}

/* --- the loader: one per dbus_config_load(), across every file ------------ */

enum element {
	EL_NONE,
	EL_BUSCONFIG,
	EL_TYPE,
	EL_USER,
	EL_LISTEN,
	EL_SERVICEDIR,
	EL_STANDARD_SYSTEM_SERVICEDIRS,
	EL_STANDARD_SESSION_SERVICEDIRS,
	EL_INCLUDEDIR,
	EL_INCLUDE,
	EL_POLICY,
	EL_ALLOW,
	EL_DENY,
	EL_LIMIT,
	EL_APPARMOR,
	EL_SELINUX,
	EL_ASSOCIATE,
	EL_SYSLOG,
	EL_KEEP_UMASK,
	EL_ALLOW_ANONYMOUS,
	EL_AUTH,
	EL_PIDFILE,
	EL_FORK,
	EL_SERVICEHELPER,
	_EL_MAX,
};

static const struct element_info {
	const char *name;
	enum element parent; /* where it may appear */
	bool text;	     /* takes character data */
} elements[] = {
	[EL_NONE] = { "", EL_NONE, false },
	[EL_BUSCONFIG] = { "busconfig", EL_NONE, false },
	[EL_TYPE] = { "type", EL_BUSCONFIG, true },
	[EL_USER] = { "user", EL_BUSCONFIG, true },
	[EL_LISTEN] = { "listen", EL_BUSCONFIG, true },
	[EL_SERVICEDIR] = { "servicedir", EL_BUSCONFIG, true },
	[EL_STANDARD_SYSTEM_SERVICEDIRS] = { "standard_system_servicedirs", EL_BUSCONFIG, false },
	[EL_STANDARD_SESSION_SERVICEDIRS] = { "standard_session_servicedirs", EL_BUSCONFIG, false },
	[EL_INCLUDEDIR] = { "includedir", EL_BUSCONFIG, true },
	[EL_INCLUDE] = { "include", EL_BUSCONFIG, true },
	[EL_POLICY] = { "policy", EL_BUSCONFIG, false },
	[EL_ALLOW] = { "allow", EL_POLICY, false },
	[EL_DENY] = { "deny", EL_POLICY, false },
	[EL_LIMIT] = { "limit", EL_BUSCONFIG, true },
	[EL_APPARMOR] = { "apparmor", EL_BUSCONFIG, false },
	[EL_SELINUX] = { "selinux", EL_BUSCONFIG, false },
	[EL_ASSOCIATE] = { "associate", EL_SELINUX, false },
	[EL_SYSLOG] = { "syslog", EL_BUSCONFIG, false },
	[EL_KEEP_UMASK] = { "keep_umask", EL_BUSCONFIG, false },
	[EL_ALLOW_ANONYMOUS] = { "allow_anonymous", EL_BUSCONFIG, false },
	[EL_AUTH] = { "auth", EL_BUSCONFIG, true },
	[EL_PIDFILE] = { "pidfile", EL_BUSCONFIG, true },
	[EL_FORK] = { "fork", EL_BUSCONFIG, false },
	[EL_SERVICEHELPER] = { "servicehelper", EL_BUSCONFIG, true },
};
_Static_assert(ELEMENTSOF(elements) == _EL_MAX, "every element needs an entry");

struct loader {
	struct dbus_config *c;
	char *err;
	size_t err_len;
	const char *stack[DBUS_CONFIG_MAX_DEPTH + 1]; /* canonical paths being read, for cycles */
	unsigned int depth;
};

/* One file being parsed. */
struct file_parser {
	struct loader *ld;
	XML_Parser xp;
	const char *file; /* interned in c->files */
	char *dir;	  /* for relative paths */
	int error;	  /* the first failure; the parser is stopped */
	enum element el[ELEMENT_DEPTH_MAX + 1];
	unsigned int el_line[ELEMENT_DEPTH_MAX + 1];
	unsigned int n_el;
	char text[TEXT_MAX + 1];
	size_t text_len;
	/* the open <policy> */
	enum dbus_policy_context context;
	char *who;
	/* the open <include> */
	bool ignore_missing, selinux_include;
	/* the open <limit>'s name, for its end tag */
	char *limit_name;
};

static int load_file(struct loader *ld, const char *path, const char *from, unsigned int line,
		     bool ignore_missing);

static int vfail(struct loader *ld, const char *file, unsigned int line, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (ld->err && ld->err_len)
		snprintf(ld->err, ld->err_len, "%s:%u: %s", file, line, msg);
	return -EINVAL;
}

static int __attribute__((format(printf, 4, 5)))
fail_at(struct loader *ld, const char *file, unsigned int line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(ld, file, line, fmt, ap);
	va_end(ap);
	return r;
}

static unsigned int cur_line(struct file_parser *fp)
{
	return (unsigned int)XML_GetCurrentLineNumber(fp->xp);
}

/* Records the first error (r, with the message already in err) and stops expat. */
static void stop(struct file_parser *fp, int r)
{
	if (fp->error == 0)
		fp->error = r;
	XML_StopParser(fp->xp, XML_FALSE);
}

static void __attribute__((format(printf, 2, 3))) fail(struct file_parser *fp, const char *fmt, ...)
{
	va_list ap;

	if (fp->error)
		return;
	va_start(ap, fmt);
	vfail(fp->ld, fp->file, cur_line(fp), fmt, ap);
	va_end(ap);
	stop(fp, -EINVAL);
}

static int add_note(struct dbus_config *c, const char *file, unsigned int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int add_note(struct dbus_config *c, const char *file, unsigned int line, const char *fmt, ...)
{
	va_list ap;
	char *t;
	int k;

	va_start(ap, fmt);
	k = vasprintf(&t, fmt, ap);
	va_end(ap);
	if (k < 0)
		return -ENOMEM;
	if (ARRAY_RESERVE(c->notes, c->alloc_notes, c->n_notes + 1) < 0) {
		free(t);
		return -ENOMEM;
	}
	c->notes[c->n_notes++] = (struct dbus_config_note){ t, file, line };
	return 0;
}

static int strv_push(char ***v, size_t *n, size_t *alloc, const char *s)
{
	char *d = strdup(s);

	if (!d || ARRAY_RESERVE(*v, *alloc, *n + 1) < 0) {
		free(d);
		return -ENOMEM;
	}
	(*v)[(*n)++] = d;
	return 0;
}

static const char *attr_get(const XML_Char **attrs, const char *name)
{
	for (size_t i = 0; attrs[i]; i += 2)
		if (strcmp(attrs[i], name) == 0)
			return attrs[i + 1];
	return NULL;
}

/* Every attribute must be one of allowed (NULL-terminated). */
static bool attrs_only(struct file_parser *fp, const char *el, const XML_Char **attrs,
		       const char *const *allowed)
{
	for (size_t i = 0; attrs[i]; i += 2) {
		bool ok = false;

		for (size_t k = 0; allowed[k] && !ok; k++)
			ok = strcmp(attrs[i], allowed[k]) == 0;
		if (!ok) {
			fail(fp, "unknown attribute '%s' on <%s>", attrs[i], el);
			return false;
		}
	}
	return true;
}

static int yes_no(const char *v)
{
	if (!v)
		return 0;
	if (strcmp(v, "yes") == 0)
		return 1;
	if (strcmp(v, "no") == 0)
		return 0;
	return -1;
}

static bool is_bool(const char *v)
{
	return strcmp(v, "true") == 0 || strcmp(v, "false") == 0;
}

static bool is_type(const char *v)
{
	static const char *const types[] = { "method_call", "method_return", "signal", "error", "*" };

	for (size_t i = 0; i < ELEMENTSOF(types); i++)
		if (strcmp(v, types[i]) == 0)
			return true;
	return false;
}

static bool is_uint(const char *v)
{
	if (!*v || strlen(v) > 9)
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

/* A path as written, made absolute against the directory of the file it is in. */
static char *resolve(struct file_parser *fp, const char *p)
{
	char *r;

	if (p[0] == '/')
		return strdup(p);
	if (asprintf(&r, "%s/%s", fp->dir, p) < 0)
		return NULL;
	return r;
}

/* --- <policy>, <allow>, <deny> -------------------------------------------- */

static void start_policy(struct file_parser *fp, const XML_Char **attrs)
{
	static const char *const allowed[] = { "context", "user", "group", "at_console", NULL };
	const char *v;
	size_t n = 0;

	if (!attrs_only(fp, "policy", attrs, allowed))
		return;
	for (size_t i = 0; attrs[i]; i += 2)
		n++;
	if (n != 1) {
		fail(fp, "<policy> needs exactly one of context, user, group, at_console");
		return;
	}
	free(fp->who);
	fp->who = NULL;
	if ((v = attr_get(attrs, "context"))) {
		if (strcmp(v, "default") == 0)
			fp->context = DBUS_POLICY_DEFAULT;
		else if (strcmp(v, "mandatory") == 0)
			fp->context = DBUS_POLICY_MANDATORY;
		else
			fail(fp, "context=\"%s\": want default or mandatory", v);
		return;
	}
	if ((v = attr_get(attrs, "at_console"))) {
		if (!is_bool(v)) {
			fail(fp, "at_console=\"%s\": want true or false", v);
			return;
		}
		fp->context = DBUS_POLICY_CONSOLE;
	} else if ((v = attr_get(attrs, "user"))) {
		fp->context = DBUS_POLICY_USER;
	} else {
		v = attr_get(attrs, "group");
		fp->context = DBUS_POLICY_GROUP;
	}
	if (!*v) {
		fail(fp, "<policy> with an empty %s", attrs[0]);
		return;
	}
	fp->who = strdup(v);
	if (!fp->who)
		stop(fp, -ENOMEM);
}

/* eavesdrop, min_fds and max_fds are modifiers of send and receive rules */
enum attr_family { FAM_SEND, FAM_RECEIVE, FAM_OWN, FAM_CONNECT, FAM_MODIFIER };

static enum attr_family attr_family(enum dbus_rule_attr a)
{
	if (a <= DBUS_ATTR_SEND_REQUESTED_REPLY)
		return FAM_SEND;
	if (a <= DBUS_ATTR_RECEIVE_REQUESTED_REPLY)
		return FAM_RECEIVE;
	if (a == DBUS_ATTR_OWN || a == DBUS_ATTR_OWN_PREFIX)
		return FAM_OWN;
	if (a == DBUS_ATTR_USER || a == DBUS_ATTR_GROUP)
		return FAM_CONNECT;
	return FAM_MODIFIER;
}

/* The combinations dbus-daemon refuses, refused the same way. */
static const char *rule_check(const struct dbus_config_rule *r)
{
	bool fam[FAM_MODIFIER + 1] = { false };
	unsigned int n = 0;

	for (unsigned int a = 0; a < _DBUS_ATTR_MAX; a++) {
		if (!r->attr[a])
			continue;
		fam[attr_family(a)] = true;
		n++;
	}
	if (n == 0)
		return "needs at least one attribute";
	if (fam[FAM_SEND] && fam[FAM_RECEIVE])
		return "cannot combine send_* and receive_* attributes";
	if (fam[FAM_OWN] && (fam[FAM_SEND] || fam[FAM_RECEIVE] || fam[FAM_MODIFIER] || n > 1))
		return "own and own_prefix cannot be combined with other attributes";
	if (fam[FAM_CONNECT] && n > 1)
		return "user and group cannot be combined with other attributes";
	if (r->attr[DBUS_ATTR_SEND_DESTINATION] && r->attr[DBUS_ATTR_SEND_DESTINATION_PREFIX])
		return "send_destination and send_destination_prefix cannot be combined";
	if ((r->attr[DBUS_ATTR_MIN_FDS] || r->attr[DBUS_ATTR_MAX_FDS]) && !fam[FAM_SEND] && !fam[FAM_RECEIVE])
		return "min_fds and max_fds only modify send_* or receive_* rules";
	if (r->attr[DBUS_ATTR_EAVESDROP] && n == 1 && !is_bool(r->attr[DBUS_ATTR_EAVESDROP]))
		return "eavesdrop wants true or false";
	for (unsigned int a = 0; a < _DBUS_ATTR_MAX; a++) {
		const char *v = r->attr[a];

		if (!v)
			continue;
		switch (a) {
		case DBUS_ATTR_SEND_BROADCAST:
		case DBUS_ATTR_SEND_REQUESTED_REPLY:
		case DBUS_ATTR_RECEIVE_REQUESTED_REPLY:
		case DBUS_ATTR_EAVESDROP:
			if (!is_bool(v))
				return "a boolean attribute wants true or false";
			break;
		case DBUS_ATTR_SEND_TYPE:
		case DBUS_ATTR_RECEIVE_TYPE:
			if (!is_type(v))
				return "a type wants method_call, method_return, signal, error or *";
			break;
		case DBUS_ATTR_MIN_FDS:
		case DBUS_ATTR_MAX_FDS:
			if (!is_uint(v))
				return "min_fds and max_fds want a number";
			break;
		case DBUS_ATTR_OWN_PREFIX:
		case DBUS_ATTR_SEND_DESTINATION_PREFIX:
			if (!*v || strcmp(v, "*") == 0)
				return "a prefix wants a name";
			break;
		default:
			if (!*v)
				return "an empty attribute value";
			break;
		}
	}
	return NULL;
}

static void start_rule(struct file_parser *fp, bool allow, const XML_Char **attrs)
{
	struct dbus_config *c = fp->ld->c;
	struct dbus_config_rule r = { .allow = allow, .context = fp->context, .file = fp->file };
	const char *why;

	r.line = cur_line(fp);
	for (size_t i = 0; attrs[i]; i += 2) {
		int a = -1;

		for (unsigned int k = 0; k < _DBUS_ATTR_MAX && a < 0; k++)
			if (strcmp(attrs[i], attr_names[k]) == 0)
				a = (int)k;
		if (a < 0) {
			fail(fp, "unknown attribute '%s' on <%s>", attrs[i], allow ? "allow" : "deny");
			goto out;
		}
		r.attr[a] = strdup(attrs[i + 1]);
		if (!r.attr[a]) {
			stop(fp, -ENOMEM);
			goto out;
		}
	}
	why = rule_check(&r);
	if (why) {
		fail(fp, "<%s>: %s", allow ? "allow" : "deny", why);
		goto out;
	}
	if (fp->who && !(r.who = strdup(fp->who))) {
		stop(fp, -ENOMEM);
		goto out;
	}
	if (ARRAY_RESERVE(c->rules, c->alloc_rules, c->n_rules + 1) < 0) {
		stop(fp, -ENOMEM);
		goto out;
	}
	c->rules[c->n_rules++] = r;
	return;
out:
	free(r.who);
	for (unsigned int a = 0; a < _DBUS_ATTR_MAX; a++)
		free(r.attr[a]);
}

/* --- elements ------------------------------------------------------------- */

static void start_simple(struct file_parser *fp, enum element e, const XML_Char **attrs)
{
	struct dbus_config *c = fp->ld->c;
	unsigned int line = cur_line(fp);
	static const char *const none[] = { NULL };
	static const char *const include_attrs[] = { "ignore_missing", "if_selinux_enabled",
						     "selinux_root_relative", NULL };
	static const char *const limit_attrs[] = { "name", NULL };
	static const char *const apparmor_attrs[] = { "mode", NULL };
	static const char *const associate_attrs[] = { "own", "context", NULL };
	int r = 0;

	switch (e) {
	case EL_POLICY:
		start_policy(fp, attrs);
		return;
	case EL_ALLOW:
	case EL_DENY:
		start_rule(fp, e == EL_ALLOW, attrs);
		return;
	case EL_INCLUDE: {
		int im, se, sr;

		if (!attrs_only(fp, "include", attrs, include_attrs))
			return;
		im = yes_no(attr_get(attrs, "ignore_missing"));
		se = yes_no(attr_get(attrs, "if_selinux_enabled"));
		sr = yes_no(attr_get(attrs, "selinux_root_relative"));
		if (im < 0 || se < 0 || sr < 0) {
			fail(fp, "<include> attributes want yes or no");
			return;
		}
		fp->ignore_missing = im;
		fp->selinux_include = se || sr;
		return;
	}
	case EL_LIMIT:
		if (!attrs_only(fp, "limit", attrs, limit_attrs))
			return;
		if (!attr_get(attrs, "name"))
			fail(fp, "<limit> needs a name");
		return;
	case EL_APPARMOR: {
		const char *m = attr_get(attrs, "mode");

		if (!attrs_only(fp, "apparmor", attrs, apparmor_attrs))
			return;
		if (m && strcmp(m, "required") != 0 && strcmp(m, "enabled") != 0 &&
		    strcmp(m, "disabled") != 0) {
			fail(fp, "<apparmor mode=\"%s\">: want required, enabled or disabled", m);
			return;
		}
		r = add_note(c, fp->file, line, "<apparmor mode=\"%s\"/>: brokerd does no AppArmor mediation",
			     m ? m : "enabled");
		break;
	}
	case EL_ASSOCIATE: {
		const char *own = attr_get(attrs, "own"), *ctx = attr_get(attrs, "context");

		if (!attrs_only(fp, "associate", attrs, associate_attrs))
			return;
		if (!own || !ctx) {
			fail(fp, "<associate> needs own and context");
			return;
		}
		r = add_note(c, fp->file, line,
			     "<associate own=\"%s\" context=\"%s\"/>: brokerd does no SELinux mediation", own,
			     ctx);
		break;
	}
	default:
		if (!attrs_only(fp, elements[e].name, attrs, none))
			return;
		break;
	}
	switch (e) {
	case EL_STANDARD_SYSTEM_SERVICEDIRS: {
		static const char *const dirs[] = { DBUS_CONFIG_SYSTEM_SERVICEDIRS };

		for (size_t i = 0; i < ELEMENTSOF(dirs) && r == 0; i++)
			r = strv_push(&c->servicedirs, &c->n_servicedirs, &c->alloc_servicedirs, dirs[i]);
		break;
	}
	case EL_STANDARD_SESSION_SERVICEDIRS: {
		const char *rt = getenv("XDG_RUNTIME_DIR");
		char *transient = NULL;

		/* The transient services (systemd --user's generators, tests) come first, as dbus-daemon has them. */
		if (rt && rt[0] == '/') {
			r = asprintf(&transient, "%s/dbus-1/services", rt) < 0 ?
				    -ENOMEM :
				    strv_push(&c->servicedirs, &c->n_servicedirs, &c->alloc_servicedirs,
					      transient);
			free(transient);
		}
		if (r == 0)
			r = add_note(
				c, fp->file, line,
				"<standard_session_servicedirs/>: brokerd is a system bus; of the session "
				"directories only $XDG_RUNTIME_DIR/dbus-1/services (transient services) is read");
		break;
	}
	case EL_FORK:
		c->fork = true;
		r = add_note(c, fp->file, line,
			     "<fork/>: brokerd does not fork (systemd runs it, Type=notify)");
		break;
	case EL_SYSLOG:
		c->syslog = true;
		r = add_note(c, fp->file, line, "<syslog/>: brokerd logs to the journal (stderr) always");
		break;
	case EL_KEEP_UMASK:
		c->keep_umask = true;
		r = add_note(c, fp->file, line, "<keep_umask/>: brokerd keeps the umask systemd gives it");
		break;
	case EL_ALLOW_ANONYMOUS:
		c->allow_anonymous = true;
		r = add_note(c, fp->file, line,
			     "<allow_anonymous/>: not honoured, brokerd knows every peer by SO_PEERCRED");
		break;
	case EL_SELINUX:
		r = add_note(c, fp->file, line, "<selinux>: brokerd does no SELinux mediation");
		break;
	default:
		break;
	}
	if (r < 0)
		stop(fp, r);
}

static int include_dir(struct file_parser *fp, const char *dir, unsigned int line)
{
	struct dirent **list = NULL;
	int n, r = 0;

	n = scandir(dir, &list, NULL, alphasort);
	if (n < 0)
		/* dbus-daemon skips a missing directory: system.d may not exist */
		return errno == ENOENT || errno == ENOTDIR ?
			       0 :
			       fail_at(fp->ld, fp->file, line, "<includedir> %s: %s", dir, strerror(errno));
	for (int i = 0; i < n; i++) {
		const char *d = list[i]->d_name;
		size_t l = strlen(d);
		char *path;

		if (r == 0 && d[0] != '.' && l > 5 && strcmp(d + l - 5, ".conf") == 0) {
			if (asprintf(&path, "%s/%s", dir, d) < 0)
				r = -ENOMEM;
			else {
				r = load_file(fp->ld, path, fp->file, line, true);
				if (r < 0 && r != -ENOMEM && r != -EINVAL && r != -ELOOP)
					r = fail_at(fp->ld, fp->file, line, "%s: %s", path, strerror(-r));
				free(path);
			}
		}
		free(list[i]);
	}
	free(list);
	return r;
}

static void end_text(struct file_parser *fp, enum element e, unsigned int line)
{
	struct dbus_config *c = fp->ld->c;
	char *t = fp->text, *path = NULL;
	int r = 0;

	/* dbus-daemon strips the whitespace around an element's text */
	while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
		t++;
	for (size_t l = strlen(t); l > 0 && strchr(" \t\n\r", t[l - 1]); l--)
		t[l - 1] = 0;
	if (!*t) {
		fail(fp, "<%s> is empty", elements[e].name);
		return;
	}
	switch (e) {
	case EL_TYPE:
		free(c->type);
		c->type = strdup(t);
		if (!c->type)
			r = -ENOMEM;
		else if (strcmp(t, "system") != 0)
			r = add_note(c, fp->file, line, "<type>%s</type>: brokerd is a system bus", t);
		break;
	case EL_USER:
		free(c->user);
		c->user = strdup(t);
		r = c->user ? add_note(c, fp->file, line,
				       "<user>%s</user>: brokerd runs as the user of its unit", t) :
			      -ENOMEM;
		break;
	case EL_PIDFILE:
		free(c->pidfile);
		c->pidfile = strdup(t);
		r = c->pidfile ? add_note(c, fp->file, line,
					  "<pidfile>%s</pidfile>: brokerd writes no pid file", t) :
				 -ENOMEM;
		break;
	case EL_SERVICEHELPER:
		free(c->servicehelper);
		c->servicehelper = strdup(t);
		r = c->servicehelper ?
			    add_note(c, fp->file, line,
				     "<servicehelper>: not run; brokerd runs Exec= as User= itself (when root)") :
			    -ENOMEM;
		break;
	case EL_LISTEN:
		r = strv_push(&c->listen, &c->n_listen, &c->alloc_listen, t);
		if (r == 0)
			r = add_note(
				c, fp->file, line,
				"<listen>%s</listen>: brokerd listens on its own socket (--address, brokerd.socket)",
				t);
		break;
	case EL_AUTH:
		r = strv_push(&c->auth, &c->n_auth, &c->alloc_auth, t);
		if (r == 0 && strcmp(t, "EXTERNAL") != 0)
			r = add_note(c, fp->file, line,
				     "<auth>%s</auth>: brokerd knows peers by SO_PEERCRED only", t);
		break;
	case EL_SERVICEDIR:
		path = resolve(fp, t);
		r = path ? strv_push(&c->servicedirs, &c->n_servicedirs, &c->alloc_servicedirs, path) :
			   -ENOMEM;
		break;
	case EL_LIMIT: {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(t, &end, 10);
		if (errno || *end || t[0] < '0' || t[0] > '9') {
			fail(fp, "<limit>: '%s' is not a number", t);
			return;
		}
		if (ARRAY_RESERVE(c->limits, c->alloc_limits, c->n_limits + 1) < 0) {
			r = -ENOMEM;
			break;
		}
		c->limits[c->n_limits++] =
			(struct dbus_config_limit){ TAKE_PTR(fp->limit_name), v, fp->file, line };
		break;
	}
	case EL_INCLUDE:
		if (fp->selinux_include) {
			r = add_note(c, fp->file, line, "<include>%s</include>: SELinux only, not read", t);
			break;
		}
		path = resolve(fp, t);
		if (!path) {
			r = -ENOMEM;
			break;
		}
		r = load_file(fp->ld, path, fp->file, line, fp->ignore_missing);
		if (r == -ENOENT) {
			fail_at(fp->ld, fp->file, line, "cannot include %s: %s", path, strerror(ENOENT));
			r = -ENOENT;
		} else if (r < 0 && r != -ENOMEM && r != -EINVAL && r != -ELOOP)
			r = fail_at(fp->ld, fp->file, line, "cannot include %s: %s", path, strerror(-r));
		break;
	case EL_INCLUDEDIR:
		path = resolve(fp, t);
		r = path ? include_dir(fp, path, line) : -ENOMEM;
		break;
	default:
		break;
	}
	free(path);
	if (r < 0)
		stop(fp, r);
}

static void XMLCALL on_start(void *userdata, const XML_Char *name, const XML_Char **attrs)
{
	struct file_parser *fp = userdata;
	enum element parent = fp->n_el ? fp->el[fp->n_el - 1] : EL_NONE;
	enum element e = EL_NONE;

	if (fp->error)
		return;
	for (unsigned int k = 1; k < _EL_MAX && e == EL_NONE; k++)
		if (strcmp(name, elements[k].name) == 0)
			e = k;
	if (e == EL_NONE) {
		fail(fp, "unknown element <%s>", name);
		return;
	}
	if (elements[e].parent != parent) {
		if (parent == EL_NONE)
			fail(fp, "the document element must be <busconfig>, not <%s>", name);
		else
			fail(fp, "<%s> is not allowed inside <%s>", name, elements[parent].name);
		return;
	}
	BUG_ON(fp->n_el >= ELEMENT_DEPTH_MAX);
	fp->el[fp->n_el] = e;
	fp->el_line[fp->n_el++] = cur_line(fp);
	fp->text_len = 0;
	fp->text[0] = 0;
	if (e == EL_LIMIT) {
		/* keep the name for the end tag, where the value is */
		const char *n = attr_get(attrs, "name");

		start_simple(fp, e, attrs);
		if (!fp->error && n) {
			free(fp->limit_name);
			fp->limit_name = strdup(n);
			if (!fp->limit_name)
				stop(fp, -ENOMEM);
		}
		return;
	}
	if (e != EL_BUSCONFIG)
		start_simple(fp, e, attrs);
	else if (attrs[0])
		fail(fp, "unknown attribute '%s' on <busconfig>", attrs[0]);
}

static void XMLCALL on_end(void *userdata, const XML_Char *name)
{
	struct file_parser *fp = userdata;
	enum element e;
	unsigned int line;

	if (fp->error || fp->n_el == 0)
		return;
	e = fp->el[--fp->n_el];
	line = fp->el_line[fp->n_el];
	if (elements[e].text) {
		fp->text[fp->text_len] = 0;
		end_text(fp, e, line);
	}
	if (e == EL_POLICY) {
		free(fp->who);
		fp->who = NULL;
	}
	fp->text_len = 0;
}

static void XMLCALL on_text(void *userdata, const XML_Char *s, int len)
{
	struct file_parser *fp = userdata;
	enum element e = fp->n_el ? fp->el[fp->n_el - 1] : EL_NONE;

	if (fp->error)
		return;
	if (!elements[e].text) {
		for (int i = 0; i < len; i++)
			if (!strchr(" \t\r\n", s[i])) {
				fail(fp, "no text allowed inside <%s>",
				     e == EL_NONE ? "?" : elements[e].name);
				return;
			}
		return;
	}
	if (fp->text_len + (size_t)len > TEXT_MAX) {
		fail(fp, "the text of <%s> is longer than %d bytes", elements[e].name, TEXT_MAX);
		return;
	}
	memcpy(fp->text + fp->text_len, s, (size_t)len);
	fp->text_len += (size_t)len;
	fp->text[fp->text_len] = 0;
}

/* Entities could make a small file expand into a large one: no configuration needs them. */
static void XMLCALL on_entity_decl(void *userdata, const XML_Char *name, int is_param, const XML_Char *value,
				   int value_len, const XML_Char *base, const XML_Char *system_id,
				   const XML_Char *public_id, const XML_Char *notation)
{
	fail(userdata, "entity declarations are not allowed (%s)", name);
}

/* Parses text as the file shown as file (already interned) in directory dir. */
static int parse_text(struct loader *ld, const char *file, const char *text, size_t len)
{
	struct file_parser fp = { .ld = ld, .file = file };
	const char *slash = strrchr(file, '/');
	char *d;
	int r = 0;

	/* relative paths in the file are relative to its directory, made absolute */
	d = slash ? strndup(file, slash == file ? 1 : (size_t)(slash - file)) : strdup(".");
	fp.dir = d ? realpath(d, NULL) : NULL;
	if (d && !fp.dir)
		fp.dir = TAKE_PTR(d);
	free(d);
	fp.xp = XML_ParserCreate("UTF-8");
	if (!fp.dir || !fp.xp) {
		r = -ENOMEM;
		goto out;
	}
	XML_SetUserData(fp.xp, &fp);
	XML_SetElementHandler(fp.xp, on_start, on_end);
	XML_SetCharacterDataHandler(fp.xp, on_text);
	XML_SetEntityDeclHandler(fp.xp, on_entity_decl);
	if (len > INT_MAX) {
		r = fail_at(ld, file, 0, "file too large");
		goto out;
	}
	if (XML_Parse(fp.xp, text, (int)len, XML_TRUE) == XML_STATUS_ERROR && fp.error == 0)
		r = fail_at(ld, file, (unsigned int)XML_GetCurrentLineNumber(fp.xp), "%s",
			    XML_ErrorString(XML_GetErrorCode(fp.xp)));
	else
		r = fp.error;
out:
	if (fp.xp)
		XML_ParserFree(fp.xp);
	free(fp.dir);
	free(fp.who);
	free(fp.limit_name);
	return r;
}

static int intern_file(struct dbus_config *c, const char *path, const char **ret)
{
	int r = strv_push(&c->files, &c->n_files, &c->alloc_files, path);

	if (r < 0)
		return r;
	*ret = c->files[c->n_files - 1];
	return 0;
}

static int read_all(const char *path, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, alloc = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	for (;;) {
		size_t k;

		if (len + 4096 > FILE_MAX + 1) {
			(void)fclose(f);
			return -EFBIG;
		}
		if (ARRAY_RESERVE(buf, alloc, len + 4096) < 0) {
			(void)fclose(f);
			return -ENOMEM;
		}
		k = fread(buf + len, 1, alloc - len, f);
		len += k;
		if (k == 0)
			break;
	}
	(void)fclose(f);
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

/*
 * Reads path, included from file from at line (NULL: the main file). A
 * cycle or too deep nesting is -ELOOP and an XML error -EINVAL, with the
 * message in err; other errors (-ENOENT when missing and not
 * ignore_missing) leave err empty: the includer says where.
 */
static int load_file(struct loader *ld, const char *path, const char *from, unsigned int line,
		     bool ignore_missing)
{
	_cleanup_free_ char *canon = NULL, *text = NULL;
	const char *file;
	size_t len = 0;
	int r;

	canon = realpath(path, NULL);
	if (!canon) {
		if (errno == ENOENT && ignore_missing)
			return 0;
		return -errno;
	}
	for (unsigned int i = 0; i < ld->depth; i++)
		if (strcmp(ld->stack[i], canon) == 0) {
			fail_at(ld, from ? from : path, line, "include cycle: %s is already being read",
				canon);
			return -ELOOP;
		}
	if (ld->depth >= DBUS_CONFIG_MAX_DEPTH) {
		fail_at(ld, from ? from : path, line, "includes nest deeper than %d", DBUS_CONFIG_MAX_DEPTH);
		return -ELOOP;
	}
	r = read_all(path, &text, &len);
	if (r == -ENOENT && ignore_missing)
		return 0;
	if (r < 0)
		return r;
	r = intern_file(ld->c, path, &file);
	if (r < 0)
		return r;
	ld->stack[ld->depth++] = canon;
	r = parse_text(ld, file, text, len);
	ld->depth--;
	return r;
}

static int config_new(struct dbus_config **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

int dbus_config_load(struct dbus_config **ret, const char *path, char *err, size_t err_len)
{
	_cleanup_(dbus_config_freep) struct dbus_config *c = NULL;
	struct loader ld = { .err = err, .err_len = err_len };
	int r;

	if (!ret || !path)
		return -EINVAL;
	if (err && err_len)
		err[0] = 0;
	r = config_new(&c);
	if (r < 0)
		return r;
	ld.c = c;
	r = load_file(&ld, path, NULL, 0, false);
	if (r < 0) {
		if (err && err_len && !err[0])
			snprintf(err, err_len, "%s: %s", path, strerror(-r));
		return r;
	}
	*ret = TAKE_PTR(c);
	return 0;
}

int dbus_config_parse_string(struct dbus_config **ret, const char *file, const char *text, size_t len,
			     char *err, size_t err_len)
{
	_cleanup_(dbus_config_freep) struct dbus_config *c = NULL;
	struct loader ld = { .err = err, .err_len = err_len };
	const char *f;
	int r;

	if (!ret || !file || !text)
		return -EINVAL;
	if (err && err_len)
		err[0] = 0;
	r = config_new(&c);
	if (r < 0)
		return r;
	ld.c = c;
	r = intern_file(c, file, &f);
	if (r < 0)
		return r;
	r = parse_text(&ld, f, text, len);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}
