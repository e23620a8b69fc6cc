/* SPDX-License-Identifier: MIT */
/* policy.c - policy file parser and evaluation (see policy.h). */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/policy.h"
#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/lines.h"
#include "util/macro.h"

enum policy_context {
	CTX_DEFAULT,
	CTX_GROUP,
	CTX_USER,
	CTX_MANDATORY,
	_CTX_MAX,
};
_Static_assert((int)CTX_DEFAULT == (int)POLICY_SCOPE_DEFAULT && (int)CTX_GROUP == (int)POLICY_SCOPE_GROUP &&
		       (int)CTX_USER == (int)POLICY_SCOPE_USER &&
		       (int)CTX_MANDATORY == (int)POLICY_SCOPE_MANDATORY,
	       "policy_scope names the contexts in their order");

struct policy_rule {
	enum policy_context ctx;
	uint32_t id; /* uid or gid for CTX_USER / CTX_GROUP */
	bool allow;
	int action;  /* enum policy_action, or -1 for any */
	char *name;  /* NULL: any name */
	bool prefix; /* name ends in ".*" (stored without it) */
	char *file;
	unsigned int line;
};

struct policy_uid_limit {
	uid_t uid;
	enum quota_kind kind;
	uint64_t limit;
};

/* A line of [channels]: the ring geometry of the names pattern matches. */
struct policy_ring {
	char *name;  /* NULL: any name */
	bool prefix; /* name ends in ".*" (stored without it) */
	uint32_t slots, slot_size;
};

struct policy {
	struct policy_rule *rules;
	size_t n_rules, alloc_rules;
	uint64_t limit[_QUOTA_MAX];
	uint64_t bus_limit[_QUOTA_BUS_MAX];
	struct policy_uid_limit *uid_limits;
	size_t n_uid_limits, alloc_uid_limits;
	struct policy_ring *rings;
	size_t n_rings, alloc_rings;
};

static const char *const action_names[] = {
	[POLICY_OWN] = "own",
	[POLICY_SEND] = "send",
	[POLICY_RECEIVE] = "receive",
};
_Static_assert(ELEMENTSOF(action_names) == _POLICY_ACTION_MAX, "every action needs a name");

const char *policy_action_to_string(enum policy_action a)
{
	return (unsigned int)a < _POLICY_ACTION_MAX ? action_names[a] : NULL;
}

int policy_action_from_string(const char *s)
{
	for (unsigned int a = 0; s && a < _POLICY_ACTION_MAX; a++)
		if (strcmp(s, action_names[a]) == 0)
			return (int)a;
	return -EINVAL;
}

int policy_new(struct policy **ret)
{
	struct policy *p;

	if (!ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (unsigned int k = 0; k < _QUOTA_MAX; k++)
		p->limit[k] = UINT64_MAX;
	for (unsigned int k = 0; k < _QUOTA_BUS_MAX; k++)
		p->bus_limit[k] = UINT64_MAX;
	*ret = p;
	return 0;
}

static void rules_free(struct policy_rule *rules, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(rules[i].name);
		free(rules[i].file);
	}
}

/* Frees what p holds, not p (a parser's embedded one too). */
static void policy_clear(struct policy *p)
{
	rules_free(p->rules, p->n_rules);
	free(p->rules);
	free(p->uid_limits);
	for (size_t i = 0; i < p->n_rings; i++)
		free(p->rings[i].name);
	free(p->rings);
}

struct policy *policy_free(struct policy *p)
{
	if (!p)
		return NULL;
	policy_clear(p);
	free(p);
	return NULL;
}

DEFINE_FREE_FUNC(struct policy, policy_free);

size_t policy_rule_count(const struct policy *p)
{
	return p ? p->n_rules : 0;
}

uint64_t policy_limit(const struct policy *p, enum quota_kind k)
{
	return p && (unsigned int)k < _QUOTA_MAX ? p->limit[k] : UINT64_MAX;
}

uint64_t policy_bus_limit(const struct policy *p, enum quota_bus_kind k)
{
	return p && (unsigned int)k < _QUOTA_BUS_MAX ? p->bus_limit[k] : UINT64_MAX;
}

bool policy_ring_geometry(const struct policy *p, const char *name, uint32_t *slots, uint32_t *slot_size)
{
	const struct policy_ring *found = NULL;

	/* the last line that matches wins, as with rules */
	for (size_t i = 0; p && name && i < p->n_rings; i++) {
		const struct policy_ring *g = &p->rings[i];
		size_t l = g->name ? strlen(g->name) : 0;

		/* a prefix matches as a rule's does: "org.x.*" is org.x and below */
		if (!g->name || (g->prefix ? strncmp(name, g->name, l) == 0 && (!name[l] || name[l] == '.') :
					     strcmp(name, g->name) == 0))
			found = g;
	}
	if (!found)
		return false;
	*slots = found->slots;
	*slot_size = found->slot_size;
	return true;
}

bool policy_limit_uid_get(const struct policy *p, size_t i, uid_t *uid, enum quota_kind *k, uint64_t *limit)
{
	if (!p || i >= p->n_uid_limits)
		return false;
	*uid = p->uid_limits[i].uid;
	*k = p->uid_limits[i].kind;
	*limit = p->uid_limits[i].limit;
	return true;
}

/* --- parsing ------------------------------------------------------------- */

int policy_parse_id(const char *s, bool user, uint32_t *id)
{
	char buf[4096], *end;
	unsigned long v;

	if (*s >= '0' && *s <= '9') {
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || *end || v >= UINT32_MAX)
			return -EINVAL;
		*id = (uint32_t)v;
		return 0;
	}
	if (user) {
		struct passwd pw, *res = NULL;

		if (getpwnam_r(s, &pw, buf, sizeof(buf), &res) != 0 || !res)
			return -ENOENT;
		*id = res->pw_uid;
	} else {
		struct group gr, *res = NULL;

		if (getgrnam_r(s, &gr, buf, sizeof(buf), &res) != 0 || !res)
			return -ENOENT;
		*id = res->gr_gid;
	}
	return 0;
}

/* Split s in place into at most max whitespace-separated words. */
static size_t split(char *s, char **w, size_t max)
{
	size_t n = 0;

	while (*s) {
		while (*s == ' ' || *s == '\t')
			*s++ = 0;
		if (!*s)
			break;
		if (n == max)
			return max + 1;
		w[n++] = s;
		while (*s && *s != ' ' && *s != '\t')
			s++;
	}
	return n;
}

static bool name_pattern_is_valid(const char *s)
{
	size_t l = strlen(s);
	char buf[CTRL_NAME_MAX + 1];

	if (strcmp(s, "*") == 0)
		return true;
	if (l > 2 && strcmp(s + l - 2, ".*") == 0) {
		/* "org.*" is a valid prefix too: check "org.x" shaped */
		if (l - 2 + 2 > CTRL_NAME_MAX)
			return false;
		memcpy(buf, s, l - 2);
		memcpy(buf + l - 2, ".x", 3);
		return ctrl_name_is_valid_wellknown(buf);
	}
	return ctrl_name_is_valid_wellknown(s);
}

/* One file being parsed: what it adds goes into the policy only when all of it parsed. */
struct policy_parser {
	const char *file;
	unsigned int line;
	char *err;
	size_t err_len;
	enum policy_context ctx; /* the section's, for rules */
	uint32_t ctx_id;
	bool have_section, in_limits, limits_uid, in_channels;
	struct policy add; /* what the file adds: rules, uid limits, and the limits it leaves */
};

#define parser_fail(pp, ...) line_fail((pp)->err, (pp)->err_len, (pp)->file, (pp)->line, __VA_ARGS__)

/* "[default]", "[mandatory]", "[user X]", "[group X]", "[limits]", "[limits user X]" */
static int parse_section(struct policy_parser *pp, char *l)
{
	size_t ll = strlen(l), nw;
	char *w[4];

	if (l[ll - 1] != ']')
		return parser_fail(pp, "section header without ']'");
	l[ll - 1] = 0;
	nw = split(l + 1, w, 3);
	pp->in_limits = pp->limits_uid = pp->in_channels = false;
	pp->have_section = true;
	if (nw == 3 && strcmp(w[0], "limits") == 0 && strcmp(w[1], "user") == 0) {
		pp->in_limits = pp->limits_uid = true;
		if (policy_parse_id(w[2], true, &pp->ctx_id) < 0)
			return parser_fail(pp, "unknown user '%s'", w[2]);
	} else if (nw == 1 && strcmp(w[0], "default") == 0) {
		pp->ctx = CTX_DEFAULT;
	} else if (nw == 1 && strcmp(w[0], "mandatory") == 0) {
		pp->ctx = CTX_MANDATORY;
	} else if (nw == 1 && strcmp(w[0], "limits") == 0) {
		pp->in_limits = true;
	} else if (nw == 1 && strcmp(w[0], "channels") == 0) {
		pp->in_channels = true;
	} else if (nw == 2 && (strcmp(w[0], "user") == 0 || strcmp(w[0], "group") == 0)) {
		bool user = w[0][0] == 'u';

		pp->ctx = user ? CTX_USER : CTX_GROUP;
		if (policy_parse_id(w[1], user, &pp->ctx_id) < 0)
			return parser_fail(pp, "unknown %s '%s'", w[0], w[1]);
	} else {
		return parser_fail(
			pp,
			"unknown section (want default, mandatory, limits, limits user X, channels, user X, group X)");
	}
	return 0;
}

/* "QUOTA VALUE" in [limits] or [limits user X] */
static int parse_limit(struct policy_parser *pp, char **w, size_t nw)
{
	unsigned long long v;
	char *end;
	int k, bk;

	if (nw != 2)
		return parser_fail(pp, "expected 'QUOTA VALUE'");
	k = quota_kind_from_string(w[0]);
	bk = k < 0 ? quota_bus_kind_from_string(w[0]) : -EINVAL;
	if (k < 0 && bk < 0)
		return parser_fail(pp, "unknown quota '%s'", w[0]);
	if (bk >= 0 && pp->limits_uid)
		return parser_fail(pp, "'%s' is for the whole bus: only in [limits]", w[0]);
	errno = 0;
	v = strtoull(w[1], &end, 10);
	if (errno || *end || w[1][0] < '0' || w[1][0] > '9')
		return parser_fail(pp, "invalid number '%s'", w[1]);
	if (bk >= 0) {
		pp->add.bus_limit[bk] = v;
		return 0;
	}
	if (!pp->limits_uid) {
		pp->add.limit[k] = v;
		return 0;
	}
	if (ARRAY_RESERVE(pp->add.uid_limits, pp->add.alloc_uid_limits, pp->add.n_uid_limits + 1) < 0)
		return -ENOMEM;
	pp->add.uid_limits[pp->add.n_uid_limits++] =
		(struct policy_uid_limit){ pp->ctx_id, (enum quota_kind)k, v };
	return 0;
}

/* "ring NAME|PREFIX.*|* SLOTS SLOT_SIZE" in [channels] (limits: policy.h) */
static int parse_ring(struct policy_parser *pp, char **w, size_t nw)
{
	struct policy_ring ring = { 0 };
	unsigned long long v[2];
	char *end;

	if (nw != 4 || strcmp(w[0], "ring") != 0)
		return parser_fail(pp, "expected 'ring NAME SLOTS SLOT_SIZE'");
	if (!name_pattern_is_valid(w[1]))
		return parser_fail(pp, "invalid name '%s'", w[1]);
	for (int i = 0; i < 2; i++) {
		errno = 0;
		v[i] = strtoull(w[2 + i], &end, 10);
		if (errno || *end || w[2 + i][0] < '0' || w[2 + i][0] > '9')
			return parser_fail(pp, "invalid number '%s'", w[2 + i]);
	}
	if (v[0] < POLICY_RING_SLOTS_MIN || v[0] > POLICY_RING_SLOTS_MAX || (v[0] & (v[0] - 1)))
		return parser_fail(pp, "slots must be a power of two from %u to %u", POLICY_RING_SLOTS_MIN,
				   POLICY_RING_SLOTS_MAX);
	if (v[1] < POLICY_RING_SLOT_SIZE_MIN || v[1] > POLICY_RING_SLOT_SIZE_MAX)
		return parser_fail(pp, "slot size must be from %u to %u bytes", POLICY_RING_SLOT_SIZE_MIN,
				   POLICY_RING_SLOT_SIZE_MAX);
	if (v[0] * v[1] > POLICY_RING_BYTES_MAX)
		return parser_fail(pp, "a ring of %llu bytes is more than the kernel's %u", v[0] * v[1],
				   POLICY_RING_BYTES_MAX);
	ring.slots = (uint32_t)v[0];
	ring.slot_size = (uint32_t)v[1];
	if (strcmp(w[1], "*") != 0) {
		size_t nl = strlen(w[1]);

		ring.prefix = nl > 2 && strcmp(w[1] + nl - 2, ".*") == 0;
		ring.name = strndup(w[1], ring.prefix ? nl - 2 : nl);
		if (!ring.name)
			return -ENOMEM;
	}
	if (ARRAY_RESERVE(pp->add.rings, pp->add.alloc_rings, pp->add.n_rings + 1) < 0) {
		free(ring.name);
		return -ENOMEM;
	}
	pp->add.rings[pp->add.n_rings++] = ring;
	return 0;
}

/* "allow|deny ACTION NAME" in a rule section */
static int parse_rule(struct policy_parser *pp, char **w, size_t nw)
{
	struct policy_rule rule = { .ctx = pp->ctx, .id = pp->ctx_id, .line = pp->line };

	if (nw != 3)
		return parser_fail(pp, "expected 'allow|deny ACTION NAME'");
	if (strcmp(w[0], "allow") == 0)
		rule.allow = true;
	else if (strcmp(w[0], "deny") != 0)
		return parser_fail(pp, "expected allow or deny, got '%s'", w[0]);
	if (strcmp(w[1], "*") == 0)
		rule.action = -1;
	else if ((rule.action = policy_action_from_string(w[1])) < 0)
		return parser_fail(pp, "unknown action '%s' (own, send, receive, *)", w[1]);
	if (!name_pattern_is_valid(w[2]))
		return parser_fail(pp, "invalid name '%s'", w[2]);
	if (strcmp(w[2], "*") != 0) {
		size_t nl = strlen(w[2]);

		rule.prefix = nl > 2 && strcmp(w[2] + nl - 2, ".*") == 0;
		rule.name = strndup(w[2], rule.prefix ? nl - 2 : nl);
	}
	rule.file = strdup(pp->file);
	if ((strcmp(w[2], "*") != 0 && !rule.name) || !rule.file ||
	    ARRAY_RESERVE(pp->add.rules, pp->add.alloc_rules, pp->add.n_rules + 1) < 0) {
		free(rule.name);
		free(rule.file);
		return -ENOMEM;
	}
	pp->add.rules[pp->add.n_rules++] = rule;
	return 0;
}

/* Moves what pp parsed into p: all of it, or on -ENOMEM nothing. */
static int parser_commit(struct policy_parser *pp, struct policy *p)
{
	if (ARRAY_RESERVE(p->rules, p->alloc_rules, p->n_rules + pp->add.n_rules) < 0 ||
	    ARRAY_RESERVE(p->uid_limits, p->alloc_uid_limits, p->n_uid_limits + pp->add.n_uid_limits) < 0 ||
	    ARRAY_RESERVE(p->rings, p->alloc_rings, p->n_rings + pp->add.n_rings) < 0)
		return -ENOMEM;
	if (pp->add.n_rings)
		memcpy(p->rings + p->n_rings, pp->add.rings, pp->add.n_rings * sizeof(*pp->add.rings));
	p->n_rings += pp->add.n_rings;
	pp->add.n_rings = 0; /* p owns their names now */
	if (pp->add.n_rules)
		memcpy(p->rules + p->n_rules, pp->add.rules, pp->add.n_rules * sizeof(*pp->add.rules));
	p->n_rules += pp->add.n_rules;
	pp->add.n_rules = 0; /* p owns their strings now */
	if (pp->add.n_uid_limits)
		memcpy(p->uid_limits + p->n_uid_limits, pp->add.uid_limits,
		       pp->add.n_uid_limits * sizeof(*pp->add.uid_limits));
	p->n_uid_limits += pp->add.n_uid_limits;
	memcpy(p->limit, pp->add.limit, sizeof(p->limit));
	memcpy(p->bus_limit, pp->add.bus_limit, sizeof(p->bus_limit));
	return 0;
}

int policy_parse_string(struct policy *p, const char *file, const char *text, char *err, size_t err_len)
{
	struct policy_parser pp = { .file = file, .err = err, .err_len = err_len, .ctx = CTX_DEFAULT };
	struct line_reader lr;
	char *l, *w[5];
	size_t nw;
	int r;

	if (!p || !file || !text)
		return -EINVAL;
	memcpy(pp.add.limit, p->limit, sizeof(pp.add.limit));
	memcpy(pp.add.bus_limit, p->bus_limit, sizeof(pp.add.bus_limit));
	line_reader_init(&lr, text, NULL, '#');
	while ((r = line_reader_next(&lr, &l)) > 0) {
		pp.line = lr.line;
		if (*l == '[') {
			r = parse_section(&pp, l);
		} else if (!pp.have_section) {
			r = parser_fail(&pp, "rule outside of a section");
		} else {
			nw = split(l, w, 4);
			r = pp.in_limits   ? parse_limit(&pp, w, nw) :
			    pp.in_channels ? parse_ring(&pp, w, nw) :
					     parse_rule(&pp, w, nw);
		}
		if (r < 0)
			break;
	}
	if (r == -E2BIG)
		r = line_fail(err, err_len, file, lr.line, "line too long");
	if (r == 0)
		r = parser_commit(&pp, p);
	policy_clear(&pp.add);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_file(const char *path, char **ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, alloc = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	for (;;) {
		/* Room for 4 KiB more at least, in a buffer of at most 16 MiB. */
		if (len + 4096 > (1 << 24)) {
			(void)fclose(f);
			return -EFBIG;
		}
		if (ARRAY_RESERVE(buf, alloc, len + 4096) < 0) {
			(void)fclose(f);
			return -ENOMEM;
		}
		size_t k = fread(buf + len, 1, alloc - len - 1, f);

		len += k;
		if (k == 0)
			break;
	}
	(void)fclose(f);
	buf[len] = 0;
	if (strlen(buf) != len)
		return -EBADMSG;
	*ret = TAKE_PTR(buf);
	return 0;
}

int policy_add_rule(struct policy *p, enum policy_scope scope, uint32_t id, bool allow, int action,
		    const char *pattern, const char *file, unsigned int line)
{
	struct policy_rule rule = {
		.ctx = (enum policy_context)scope, .id = id, .allow = allow, .action = action, .line = line
	};
	size_t nl;

	if (!p || !pattern || !file || (unsigned int)scope >= _CTX_MAX || action < -1 ||
	    action >= _POLICY_ACTION_MAX || !name_pattern_is_valid(pattern))
		return -EINVAL;
	if (strcmp(pattern, "*") != 0) {
		nl = strlen(pattern);
		rule.prefix = nl > 2 && strcmp(pattern + nl - 2, ".*") == 0;
		rule.name = strndup(pattern, rule.prefix ? nl - 2 : nl);
		if (!rule.name)
			return -ENOMEM;
	}
	rule.file = strdup(file);
	if (!rule.file || ARRAY_RESERVE(p->rules, p->alloc_rules, p->n_rules + 1) < 0) {
		free(rule.name);
		free(rule.file);
		return -ENOMEM;
	}
	p->rules[p->n_rules++] = rule;
	return 0;
}

int policy_set_limit(struct policy *p, const char *quota, uint64_t value)
{
	int k, bk;

	if (!p || !quota)
		return -EINVAL;
	k = quota_kind_from_string(quota);
	bk = k < 0 ? quota_bus_kind_from_string(quota) : -EINVAL;
	if (k >= 0)
		p->limit[k] = value;
	else if (bk >= 0)
		p->bus_limit[bk] = value;
	else
		return -EINVAL;
	return 0;
}

int policy_load(struct policy **ret, const char *const *dirs, char *err, size_t err_len)
{
	_cleanup_(policy_freep) struct policy *p = NULL;
	int r;

	if (!ret || !dirs)
		return -EINVAL;
	r = policy_new(&p);
	if (r < 0)
		return r;
	r = policy_load_into(p, dirs, err, err_len);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

int policy_load_into(struct policy *p, const char *const *dirs, char *err, size_t err_len)
{
	char **names = NULL, **paths = NULL;
	size_t n = 0, alloc_names = 0, alloc_paths = 0;
	int r;

	if (!p || !dirs)
		return -EINVAL;

	/* Collect *.conf basenames; the first directory that has one wins. */
	for (size_t d = 0; dirs[d]; d++) {
		DIR *dir = opendir(dirs[d]);
		struct dirent *de;

		if (!dir) {
			if (errno == ENOENT)
				continue;
			r = line_fail(err, err_len, dirs[d], 0, "cannot open: %s", strerror(errno));
			goto out;
		}
		while ((de = readdir(dir))) {
			size_t l = strlen(de->d_name);
			bool dup = false;

			if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".conf") != 0)
				continue;
			for (size_t i = 0; i < n; i++)
				dup = dup || strcmp(names[i], de->d_name) == 0;
			if (dup)
				continue;
			if (ARRAY_RESERVE(names, alloc_names, n + 1) < 0 ||
			    ARRAY_RESERVE(paths, alloc_paths, n + 1) < 0) {
				closedir(dir);
				r = -ENOMEM;
				goto out;
			}
			names[n] = strdup(de->d_name);
			if (asprintf(&paths[n], "%s/%s", dirs[d], de->d_name) < 0)
				paths[n] = NULL;
			n++;
			if (!names[n - 1] || !paths[n - 1]) {
				closedir(dir);
				r = -ENOMEM;
				goto out;
			}
		}
		closedir(dir);
	}
	/* Sort by basename, keeping paths paired: sort "name\0path" combos. */
	for (size_t i = 0; i < n; i++) {
		char *c;

		if (asprintf(&c, "%s/%s", names[i], paths[i]) < 0) {
			r = -ENOMEM;
			goto out;
		}
		free(names[i]);
		names[i] = c;
	}
	if (n > 0)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *text = NULL;
		const char *path = strchr(names[i], '/') + 1;

		r = read_file(path, &text);
		if (r < 0) {
			r = line_fail(err, err_len, path, 0, "cannot read: %s", strerror(-r));
			goto out;
		}
		r = policy_parse_string(p, path, text, err, err_len);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	for (size_t i = 0; i < n; i++) {
		free(names[i]);
		free(paths[i]);
	}
	free(names);
	free(paths);
	return r;
}

/* --- evaluation ---------------------------------------------------------- */

static bool rule_matches_name(const struct policy_rule *r, const char *name)
{
	size_t l;

	if (!r->name)
		return true;
	if (!r->prefix)
		return strcmp(r->name, name) == 0;
	l = strlen(r->name);
	return strncmp(r->name, name, l) == 0 && (name[l] == 0 || name[l] == '.');
}

static bool rule_applies(const struct policy_rule *r, uid_t uid, const gid_t *gids, size_t n_gids)
{
	switch (r->ctx) {
	case CTX_DEFAULT:
	case CTX_MANDATORY:
		return true;
	case CTX_USER:
		return r->id == uid;
	case CTX_GROUP:
		for (size_t i = 0; i < n_gids; i++)
			if (gids[i] == r->id)
				return true;
		return false;
	default:
		return false;
	}
}

bool policy_check(const struct policy *p, uid_t uid, const gid_t *gids, size_t n_gids, enum policy_action a,
		  const char *name, char *why, size_t why_len)
{
	const struct policy_rule *decided = NULL;
	bool allow = uid == 0;

	if (!name || (unsigned int)a >= _POLICY_ACTION_MAX) {
		if (why && why_len)
			snprintf(why, why_len, "invalid request");
		return false;
	}
	for (unsigned int ctx = 0; p && ctx < _CTX_MAX; ctx++) {
		for (size_t i = 0; i < p->n_rules; i++) {
			const struct policy_rule *r = &p->rules[i];

			if (r->ctx != ctx || (r->action >= 0 && r->action != (int)a) ||
			    !rule_applies(r, uid, gids, n_gids) || !rule_matches_name(r, name))
				continue;
			allow = r->allow;
			decided = r;
		}
	}
	if (why && why_len) {
		if (decided)
			snprintf(why, why_len, "%s %s %s%s (%s:%u)", decided->allow ? "allow" : "deny",
				 decided->action >= 0 ? action_names[decided->action] : "*",
				 decided->name ? decided->name : "*", decided->prefix ? ".*" : "",
				 decided->file, decided->line);
		else
			snprintf(why, why_len, "%s",
				 uid == 0 ? "built-in: root is allowed" :
					    "built-in: denied when no rule matches");
	}
	return allow;
}
