/* SPDX-License-Identifier: MIT */
/*
 * dbus-match.c - D-Bus match rules: parser, canonical text and matcher.
 * See dbus-match.h; protocol/README.md section 10 says what is accepted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "protocol/dbus-marshal.h"
#include "protocol/dbus-match.h"
#include "protocol/dbus-message.h"
#include "protocol/dbus-signature.h"
#include "protocol/message.h"
#include "util/macro.h"

static const char *const type_names[] = {
	[CHMSG_CALL] = "method_call",
	[CHMSG_REPLY] = "method_return",
	[CHMSG_ERROR] = "error",
	[CHMSG_SIGNAL] = "signal",
};

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-';
}

/* A bus name namespace: one or more '.'-separated elements of bus name characters. */
static bool namespace_is_valid(const char *s)
{
	size_t n = strlen(s), elem = 0;

	if (n == 0 || n > CTRL_NAME_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (s[i] == '.' || s[i] == 0) {
			if (elem == 0)
				return false;
			elem = 0;
		} else if (!is_name_char(s[i]) || (elem == 0 && s[i] >= '0' && s[i] <= '9')) {
			return false;
		} else {
			elem++;
		}
	}
	return true;
}

static int set(char **field, const char *value, bool valid)
{
	if (*field)
		return -EINVAL; /* a key given twice */
	if (!valid)
		return -EINVAL;
	*field = strdup(value);
	return *field ? 0 : -ENOMEM;
}

/* argN or argNpath: N is 0..63 in decimal without a leading zero. */
static int set_arg(struct dbus_match_rule *r, const char *key, const char *value)
{
	const char *p = key + 3;
	unsigned int n = 0;
	bool is_path;

	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (unsigned int)(*p - '0');
		if (n >= DBUS_MATCH_ARGS_MAX)
			return -EINVAL;
	}
	if (strcmp(p, "path") == 0)
		is_path = true;
	else if (*p == 0)
		is_path = false;
	else
		return -EINVAL;
	if (r->args[n] || (n == 0 && r->arg0namespace))
		return -EINVAL;
	r->args[n] = strdup(value);
	if (!r->args[n])
		return -ENOMEM;
	r->arg_is_path[n] = is_path;
	if (n + 1 > r->n_args)
		r->n_args = n + 1;
	return 0;
}

static int apply(struct dbus_match_rule *r, const char *key, const char *value)
{
	if (strcmp(key, "type") == 0) {
		if (r->type)
			return -EINVAL;
		for (unsigned int t = 1; t < ELEMENTSOF(type_names); t++)
			if (strcmp(value, type_names[t]) == 0) {
				r->type = (uint8_t)t;
				return 0;
			}
		return -EINVAL;
	}
	if (strcmp(key, "sender") == 0)
		return set(&r->sender, value,
			   ctrl_name_is_valid_wellknown(value) || ctrl_name_is_valid_unique(value));
	if (strcmp(key, "interface") == 0)
		return set(&r->interface, value, chmsg_interface_is_valid(value));
	if (strcmp(key, "member") == 0)
		return set(&r->member, value, ctrl_name_is_valid_member(value));
	if (strcmp(key, "path") == 0)
		return set(&r->path, value, dbus_object_path_is_valid(value) && !r->path_namespace);
	if (strcmp(key, "path_namespace") == 0)
		return set(&r->path_namespace, value, dbus_object_path_is_valid(value) && !r->path);
	if (strcmp(key, "destination") == 0)
		return set(&r->destination, value,
			   ctrl_name_is_valid_wellknown(value) || ctrl_name_is_valid_unique(value));
	if (strcmp(key, "arg0namespace") == 0)
		return set(&r->arg0namespace, value, namespace_is_valid(value) && !r->args[0]);
	if (strncmp(key, "arg", 3) == 0)
		return set_arg(r, key, value);
	return -EINVAL; /* eavesdrop included: brokerd has monitors for that */
}

/*
 * The specification's quoting: a value is a run of characters up to an
 * unquoted ','; '...' quotes (a backslash is literal inside); outside
 * quotes \' is a quote and any other backslash is literal.
 */
static int parse(struct dbus_match_rule *r, const char *text, char *buf)
{
	const char *p = text;

	for (;;) {
		char key[32];
		size_t n = 0;
		bool quoted = false;
		int k;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			return 0;
		while (*p && *p != '=') {
			if (n + 1 >= sizeof(key))
				return -EINVAL;
			key[n++] = *p++;
		}
		key[n] = 0;
		if (*p != '=' || n == 0)
			return -EINVAL;
		p++;
		for (n = 0; *p && (quoted || *p != ','); p++) {
			if (*p == '\'') {
				quoted = !quoted;
				continue;
			}
			if (!quoted && p[0] == '\\' && p[1] == '\'')
				p++;
			buf[n++] = *p;
		}
		buf[n] = 0;
		if (quoted)
			return -EINVAL;
		k = apply(r, key, buf);
		if (k < 0)
			return k;
		if (*p == ',') {
			p++;
			if (!*p)
				return -EINVAL; /* a trailing comma promises another key */
		}
	}
}

int dbus_match_rule_parse(struct dbus_match_rule *r, const char *text)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int k;

	memset(r, 0, sizeof(*r));
	if (!text)
		return -EINVAL;
	len = strlen(text);
	if (len > DBUS_MATCH_TEXT_MAX)
		return -EINVAL;
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	k = parse(r, text, buf);
	if (k < 0)
		dbus_match_rule_deinit(r);
	return k;
}

void dbus_match_rule_deinit(struct dbus_match_rule *r)
{
	if (!r)
		return;
	free(r->sender);
	free(r->interface);
	free(r->member);
	free(r->path);
	free(r->path_namespace);
	free(r->destination);
	free(r->arg0namespace);
	for (unsigned int i = 0; i < r->n_args; i++)
		free(r->args[i]);
	memset(r, 0, sizeof(*r));
}

/* key='value', a quote inside as '\'' */
static void put(FILE *f, bool *first, const char *key, const char *value)
{
	if (!value)
		return;
	fprintf(f, "%s%s='", *first ? "" : ",", key);
	for (const char *p = value; *p; p++)
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	fputc('\'', f);
	*first = false;
}

int dbus_match_rule_format(const struct dbus_match_rule *r, char **ret)
{
	char *text = NULL;
	size_t size = 0;
	bool first = true;
	FILE *f;

	f = open_memstream(&text, &size);
	if (!f)
		return -ENOMEM;
	put(f, &first, "type", r->type ? type_names[r->type] : NULL);
	put(f, &first, "sender", r->sender);
	put(f, &first, "interface", r->interface);
	put(f, &first, "member", r->member);
	put(f, &first, "path", r->path);
	put(f, &first, "path_namespace", r->path_namespace);
	put(f, &first, "destination", r->destination);
	put(f, &first, "arg0namespace", r->arg0namespace);
	for (unsigned int i = 0; i < r->n_args; i++) {
		char key[32]; /* "arg" + up to 10 digits + "path": room for any unsigned int */

		snprintf(key, sizeof(key), "arg%u%s", i, r->arg_is_path[i] ? "path" : "");
		put(f, &first, key, r->args[i]);
	}
	if (fclose(f) != 0 || !text) {
		free(text);
		return -ENOMEM;
	}
	*ret = text;
	return 0;
}

static bool str_eq(const char *rule, const char *value)
{
	return !rule || (value && strcmp(rule, value) == 0);
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* argNpath: equal, or one is a '/'-terminated prefix of the other. */
static bool path_arg_matches(const char *rule, const char *arg)
{
	size_t rn = strlen(rule), an = strlen(arg);

	if (strcmp(rule, arg) == 0)
		return true;
	if (rn > 0 && rule[rn - 1] == '/' && has_prefix(arg, rule))
		return true;
	return an > 0 && arg[an - 1] == '/' && has_prefix(rule, arg);
}

static bool path_in_namespace(const char *ns, const char *path)
{
	size_t n = strlen(ns);

	if (strcmp(ns, "/") == 0)
		return true;
	return strncmp(path, ns, n) == 0 && (path[n] == 0 || path[n] == '/');
}

static bool args_match(const struct dbus_match_rule *r, const struct dbus_match_message *m)
{
	struct dbus_reader rd;
	unsigned int needed = r->n_args ? r->n_args : 1; /* arg0namespace: arg0 */

	if (!r->n_args && !r->arg0namespace)
		return true;
	if (!m->signature || !*m->signature ||
	    dbus_reader_init(&rd, m->signature, m->body, m->body_len, m->byte_order, 0) < 0)
		return false;
	for (unsigned int i = 0; i < needed; i++) {
		const char *value = NULL;
		char type;

		if (dbus_reader_peek(&rd, &type, NULL, NULL) <= 0)
			return false; /* fewer arguments than the rule names */
		if (type == 's' || type == 'o') {
			if (dbus_reader_read_basic(&rd, type, &value) <= 0)
				return false;
		} else if (dbus_reader_skip(&rd) <= 0) {
			return false;
		}
		if (i == 0 && r->arg0namespace) {
			if (type != 's' || (strcmp(value, r->arg0namespace) != 0 &&
					    !(has_prefix(value, r->arg0namespace) &&
					      value[strlen(r->arg0namespace)] == '.')))
				return false;
		}
		if (i >= r->n_args || !r->args[i])
			continue;
		if (!value || (type == 'o' && !r->arg_is_path[i]))
			return false; /* argN compares strings only, argNpath paths too */
		if (r->arg_is_path[i] ? !path_arg_matches(r->args[i], value) : strcmp(r->args[i], value) != 0)
			return false;
	}
	return true;
}

bool dbus_match_rule_matches(const struct dbus_match_rule *r, const struct dbus_match_message *m)
{
	if (r->type && r->type != m->type)
		return false;
	if (r->sender && !str_eq(r->sender, m->sender) && !str_eq(r->sender, m->sender_name))
		return false;
	if (!str_eq(r->interface, m->interface) || !str_eq(r->member, m->member) ||
	    !str_eq(r->path, m->path) || !str_eq(r->destination, m->destination))
		return false;
	if (r->path_namespace && (!m->path || !path_in_namespace(r->path_namespace, m->path)))
		return false;
	return args_match(r, m);
}

void dbus_match_message_of(struct dbus_match_message *mm, const struct dbus_message *m, const char *sender_name)
{
	*mm = (struct dbus_match_message){
		.type = m->h.type,
		.sender = m->h.sender ? m->h.sender : "",
		.interface = m->h.interface,
		.member = m->h.member,
		.path = m->h.path,
		.destination = m->h.destination,
		.signature = m->h.signature ? m->h.signature : "",
		.body = m->body,
		.body_len = m->body_len,
		.byte_order = m->byte_order,
		.sender_name = sender_name,
	};
	if (!strcmp(mm->sender, "org.freedesktop.DBus"))
		mm->sender_name = "org.freedesktop.DBus";
}
