/* SPDX-License-Identifier: MIT */
/* policy.c - policy file parser and evaluation (see policy.h). */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "brokerd/policy.h"
#include "brokerd/util.h"

enum policy_context {
	CTX_DEFAULT,
	CTX_GROUP,
	CTX_USER,
	CTX_MANDATORY,
	_CTX_MAX,
};

struct policy_rule {
	enum policy_context ctx;
	uint32_t id;		/* uid or gid for CTX_USER / CTX_GROUP */
	bool allow;
	int action;		/* enum policy_action, or -1 for any */
	char *name;		/* NULL: any name */
	bool prefix;		/* name ends in ".*" (stored without it) */
	char *file;
	unsigned int line;
};

struct policy_uid_limit {
	uid_t uid;
	enum quota_kind kind;
	uint64_t limit;
};

struct policy {
	struct policy_rule *rules;
	size_t n_rules, cap_rules;
	uint64_t limit[_QUOTA_MAX];
	struct policy_uid_limit *uid_limits;
	size_t n_uid_limits;
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

struct policy *policy_free(struct policy *p)
{
	if (!p)
		return NULL;
	rules_free(p->rules, p->n_rules);
	free(p->rules);
	free(p->uid_limits);
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

static int parse_id(const char *s, bool user, uint32_t *id)
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

static int rule_add(struct policy_rule **rules, size_t *n, size_t *cap, const struct policy_rule *r)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 32;
		struct policy_rule *a = realloc(*rules, c * sizeof(*a));

		if (!a)
			return -ENOMEM;
		*rules = a;
		*cap = c;
	}
	(*rules)[(*n)++] = *r;
	return 0;
}

int policy_parse_string(struct policy *p, const char *file, const char *text, char *err, size_t err_len)
{
	struct policy_rule *rules = NULL;
	size_t n = 0, cap = 0;
	uint64_t limit[_QUOTA_MAX];
	struct policy_uid_limit *uid_limits = NULL;
	size_t n_uid_limits = 0;
	enum policy_context ctx = CTX_DEFAULT;
	bool in_limits = false, limits_uid = false, have_section = false;
	uint32_t ctx_id = 0;
	unsigned int line = 0;
	const char *s = text;
	int r = 0;

	if (!p || !file || !text)
		return -EINVAL;
	memcpy(limit, p->limit, sizeof(limit));

	while (*s) {
		char buf[1024], *w[4], *l;
		const char *eol = strchr(s, '\n');
		size_t len = eol ? (size_t)(eol - s) : strlen(s);
		size_t nw;

		line++;
		if (len >= sizeof(buf)) {
			r = parse_fail(err, err_len, file, line, "line too long");
			goto out;
		}
		memcpy(buf, s, len);
		buf[len] = 0;
		s += len + (eol ? 1 : 0);
		if (memchr(buf, 0, len)) {
			r = parse_fail(err, err_len, file, line, "NUL byte");
			goto out;
		}
		l = strchr(buf, '#');
		if (l)
			*l = 0;
		for (l = buf + strlen(buf); l > buf && (l[-1] == ' ' || l[-1] == '\t' || l[-1] == '\r'); l--)
			l[-1] = 0;
		l = buf;
		while (*l == ' ' || *l == '\t')
			l++;
		if (!*l)
			continue;

		if (*l == '[') {
			size_t ll = strlen(l);

			if (l[ll - 1] != ']') {
				r = parse_fail(err, err_len, file, line, "section header without ']'");
				goto out;
			}
			l[ll - 1] = 0;
			nw = split(l + 1, w, 3);
			in_limits = limits_uid = false;
			have_section = true;
			if (nw == 3 && strcmp(w[0], "limits") == 0 && strcmp(w[1], "user") == 0) {
				in_limits = limits_uid = true;
				if (parse_id(w[2], true, &ctx_id) < 0) {
					r = parse_fail(err, err_len, file, line, "unknown user '%s'", w[2]);
					goto out;
				}
			} else if (nw == 1 && strcmp(w[0], "default") == 0)
				ctx = CTX_DEFAULT;
			else if (nw == 1 && strcmp(w[0], "mandatory") == 0)
				ctx = CTX_MANDATORY;
			else if (nw == 1 && strcmp(w[0], "limits") == 0)
				in_limits = true;
			else if (nw == 2 && (strcmp(w[0], "user") == 0 || strcmp(w[0], "group") == 0)) {
				bool user = w[0][0] == 'u';

				ctx = user ? CTX_USER : CTX_GROUP;
				if (parse_id(w[1], user, &ctx_id) < 0) {
					r = parse_fail(err, err_len, file, line, "unknown %s '%s'", w[0], w[1]);
					goto out;
				}
			} else {
				r = parse_fail(err, err_len, file, line,
					 "unknown section (want default, mandatory, limits, limits user X, user X, group X)");
				goto out;
			}
			continue;
		}
		if (!have_section) {
			r = parse_fail(err, err_len, file, line, "rule outside of a section");
			goto out;
		}
		nw = split(l, w, 3);
		if (in_limits) {
			char *end;
			unsigned long long v;
			int k;

			if (nw != 2) {
				r = parse_fail(err, err_len, file, line, "expected 'QUOTA VALUE'");
				goto out;
			}
			k = quota_kind_from_string(w[0]);
			if (k < 0) {
				r = parse_fail(err, err_len, file, line, "unknown quota '%s'", w[0]);
				goto out;
			}
			errno = 0;
			v = strtoull(w[1], &end, 10);
			if (errno || *end || w[1][0] < '0' || w[1][0] > '9') {
				r = parse_fail(err, err_len, file, line, "invalid number '%s'", w[1]);
				goto out;
			}
			if (limits_uid) {
				struct policy_uid_limit *a = realloc(uid_limits, (n_uid_limits + 1) * sizeof(*a));

				if (!a) {
					r = -ENOMEM;
					goto out;
				}
				uid_limits = a;
				uid_limits[n_uid_limits++] = (struct policy_uid_limit){ ctx_id, (enum quota_kind)k, v };
			} else {
				limit[k] = v;
			}
			continue;
		}
		if (nw != 3) {
			r = parse_fail(err, err_len, file, line, "expected 'allow|deny ACTION NAME'");
			goto out;
		}
		struct policy_rule rule = { .ctx = ctx, .id = ctx_id, .line = line };

		if (strcmp(w[0], "allow") == 0)
			rule.allow = true;
		else if (strcmp(w[0], "deny") != 0) {
			r = parse_fail(err, err_len, file, line, "expected allow or deny, got '%s'", w[0]);
			goto out;
		}
		if (strcmp(w[1], "*") == 0)
			rule.action = -1;
		else if ((rule.action = policy_action_from_string(w[1])) < 0) {
			r = parse_fail(err, err_len, file, line, "unknown action '%s' (own, send, receive, *)", w[1]);
			goto out;
		}
		if (!name_pattern_is_valid(w[2])) {
			r = parse_fail(err, err_len, file, line, "invalid name '%s'", w[2]);
			goto out;
		}
		if (strcmp(w[2], "*") != 0) {
			size_t nl = strlen(w[2]);

			rule.prefix = nl > 2 && strcmp(w[2] + nl - 2, ".*") == 0;
			rule.name = strndup(w[2], rule.prefix ? nl - 2 : nl);
		}
		rule.file = strdup(file);
		if ((strcmp(w[2], "*") != 0 && !rule.name) || !rule.file ||
		    rule_add(&rules, &n, &cap, &rule) < 0) {
			free(rule.name);
			free(rule.file);
			r = -ENOMEM;
			goto out;
		}
	}

	/* Commit only a fully parsed file. */
	if (n > 0) {
		for (size_t i = 0; i < n; i++) {
			r = rule_add(&p->rules, &p->n_rules, &p->cap_rules, &rules[i]);
			if (r < 0) {
				/* rules i.. not yet owned by p */
				rules_free(rules + i, n - i);
				free(rules);
				return r;
			}
		}
		free(rules);
		rules = NULL;
		n = 0;
	}
	if (n_uid_limits > 0) {
		struct policy_uid_limit *a = realloc(p->uid_limits, (p->n_uid_limits + n_uid_limits) * sizeof(*a));

		if (!a) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(a + p->n_uid_limits, uid_limits, n_uid_limits * sizeof(*a));
		p->uid_limits = a;
		p->n_uid_limits += n_uid_limits;
	}
	memcpy(p->limit, limit, sizeof(limit));
out:
	rules_free(rules, n);
	free(rules);
	free(uid_limits);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_file(const char *path, char **ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	for (;;) {
		if (cap - len < 4096) {
			char *b;

			cap = cap ? cap * 2 : 8192;
			if (cap > (1 << 24)) {
				fclose(f);
				return -EFBIG;
			}
			b = realloc(buf, cap);
			if (!b) {
				fclose(f);
				return -ENOMEM;
			}
			buf = b;
		}
		size_t k = fread(buf + len, 1, cap - len - 1, f);

		len += k;
		if (k == 0)
			break;
	}
	fclose(f);
	buf[len] = 0;
	if (strlen(buf) != len)
		return -EBADMSG;
	*ret = TAKE_PTR(buf);
	return 0;
}

int policy_load(struct policy **ret, const char *const *dirs, char *err, size_t err_len)
{
	_cleanup_(policy_freep) struct policy *p = NULL;
	char **names = NULL, **paths = NULL;
	size_t n = 0, cap = 0;
	int r;

	if (!ret || !dirs)
		return -EINVAL;
	r = policy_new(&p);
	if (r < 0)
		return r;

	/* Collect *.conf basenames; the first directory that has one wins. */
	for (size_t d = 0; dirs[d]; d++) {
		DIR *dir = opendir(dirs[d]);
		struct dirent *de;

		if (!dir) {
			if (errno == ENOENT)
				continue;
			r = parse_fail(err, err_len, dirs[d], 0, "cannot open: %s", strerror(errno));
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
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				names = realloc(names, cap * sizeof(*names));
				paths = realloc(paths, cap * sizeof(*paths));
				if (!names || !paths) {
					closedir(dir);
					r = -ENOMEM;
					goto out;
				}
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
			r = parse_fail(err, err_len, path, 0, "cannot read: %s", strerror(-r));
			goto out;
		}
		r = policy_parse_string(p, path, text, err, err_len);
		if (r < 0)
			goto out;
	}
	*ret = TAKE_PTR(p);
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

bool policy_check(const struct policy *p, uid_t uid, const gid_t *gids, size_t n_gids,
		  enum policy_action a, const char *name, char *why, size_t why_len)
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
			snprintf(why, why_len, "%s", uid == 0 ? "built-in: root is allowed"
							     : "built-in: denied when no rule matches");
	}
	return allow;
}
