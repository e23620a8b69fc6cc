/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-xml.c - the D-Bus introspection XML read by a reader of its
 * own for the subset the DTD defines (no external parser in the image):
 * elements, attributes, entities, comments, the DOCTYPE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/brokerctl-xml.h"
#include "util/array.h"
#include "util/macro.h"

void node_done(struct node *n)
{
	for (size_t i = 0; i < n->n_members; i++) {
		free(n->members[i].interface);
		free(n->members[i].name);
		free(n->members[i].value);
	}
	for (size_t i = 0; i < n->n_children; i++)
		free(n->children[i]);
	free(n->members);
	free(n->children);
}

/* An attribute's value with the five predefined entities decoded, or NULL. */
static char *xml_attr(const char *attrs, size_t len, const char *name)
{
	static const struct {
		const char *entity;
		char c;
	} entities[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' }
	};
	size_t n = strlen(name);

	for (size_t i = 0; i + n + 2 < len; i++) {
		char q, *v, *o;
		const char *e, *p;

		/* a name starts after a blank and is followed by '=' and a quote */
		if ((i > 0 && attrs[i - 1] != ' ' && attrs[i - 1] != '\t' && attrs[i - 1] != '\n') ||
		    strncmp(attrs + i, name, n) != 0 || attrs[i + n] != '=')
			continue;
		q = attrs[i + n + 1];
		if (q != '"' && q != '\'')
			return NULL;
		p = attrs + i + n + 2;
		e = memchr(p, q, len - (size_t)(p - attrs));
		if (!e)
			return NULL;
		v = o = malloc((size_t)(e - p) + 1);
		if (!v)
			return NULL;
		while (p < e) {
			size_t j;

			for (j = 0; j < ELEMENTSOF(entities); j++)
				if (strncmp(p, entities[j].entity, strlen(entities[j].entity)) == 0)
					break;
			if (j < ELEMENTSOF(entities)) {
				*o++ = entities[j].c;
				p += strlen(entities[j].entity);
			} else {
				*o++ = *p++;
			}
		}
		*o = 0;
		return v;
	}
	return NULL;
}

static bool attr_is(const char *attrs, size_t len, const char *name, const char *want)
{
	char *v = xml_attr(attrs, len, name);
	bool r = v && strcmp(v, want) == 0;

	free(v);
	return r;
}

static void sig_add(char *sig, const char *type)
{
	size_t n = strlen(sig);

	if (type && n + strlen(type) < 256)
		strcpy(sig + n, type);
}

/* One element: its tag (name, len), attributes and depth (the root node is 0). */
static int xml_element(struct node *node, char **interface, const char *tag, size_t tag_len,
		       const char *attrs, size_t attrs_len, unsigned int depth)
{
	struct member *m = node->n_members ? &node->members[node->n_members - 1] : NULL;
	char *v;

#define TAG_IS(s) (tag_len == strlen(s) && strncmp(tag, s, tag_len) == 0)
	if (depth == 1 && TAG_IS("node")) {
		v = xml_attr(attrs, attrs_len, "name");
		if (!v)
			return 0;
		if (ARRAY_RESERVE(node->children, node->cap_children, node->n_children + 1) < 0) {
			free(v);
			return -ENOMEM;
		}
		node->children[node->n_children++] = v;
	} else if (depth == 1 && TAG_IS("interface")) {
		free(*interface);
		*interface = xml_attr(attrs, attrs_len, "name");
		if (!*interface)
			return -EBADMSG;
	} else if (depth == 2 && *interface && (TAG_IS("method") || TAG_IS("property") || TAG_IS("signal"))) {
		if (ARRAY_RESERVE(node->members, node->cap_members, node->n_members + 1) < 0)
			return -ENOMEM;
		m = &node->members[node->n_members];
		memset(m, 0, sizeof(*m));
		m->kind = TAG_IS("method")   ? MEMBER_METHOD :
			  TAG_IS("property") ? MEMBER_PROPERTY :
					       MEMBER_SIGNAL;
		m->interface = strdup(*interface);
		m->name = xml_attr(attrs, attrs_len, "name");
		if (!m->interface || !m->name) {
			free(m->interface);
			free(m->name);
			return -EBADMSG;
		}
		node->n_members++;
		if (m->kind == MEMBER_PROPERTY) {
			v = xml_attr(attrs, attrs_len, "type");
			sig_add(m->sig, v);
			free(v);
			m->writable = attr_is(attrs, attrs_len, "access", "readwrite") ||
				      attr_is(attrs, attrs_len, "access", "write");
			m->emits = "emits-change";
		}
	} else if (depth == 3 && m && TAG_IS("arg")) {
		v = xml_attr(attrs, attrs_len, "type");
		sig_add(m->kind == MEMBER_METHOD && attr_is(attrs, attrs_len, "direction", "out") ?
				m->result :
				m->sig,
			v);
		free(v);
	} else if (depth == 3 && m && TAG_IS("annotation")) {
		if (attr_is(attrs, attrs_len, "name", "org.freedesktop.DBus.Deprecated"))
			m->deprecated = attr_is(attrs, attrs_len, "value", "true");
		else if (attr_is(attrs, attrs_len, "name", "org.freedesktop.DBus.Method.NoReply"))
			m->no_reply = attr_is(attrs, attrs_len, "value", "true");
		else if (attr_is(attrs, attrs_len, "name",
				 "org.freedesktop.DBus.Property.EmitsChangedSignal"))
			m->emits = attr_is(attrs, attrs_len, "value", "invalidates") ? "emits-invalidation" :
				   attr_is(attrs, attrs_len, "value", "const")	     ? "const" :
				   attr_is(attrs, attrs_len, "value", "false")	     ? NULL :
										       "emits-change";
	}
#undef TAG_IS
	return 0;
}

int xml_read(const char *xml, struct node *node)
{
	_cleanup_free_ char *interface = NULL;
	unsigned int depth = 0;
	const char *p = xml, *e;
	int k;

	while ((p = strchr(p, '<'))) {
		if (strncmp(p, "<!--", 4) == 0) {
			e = strstr(p, "-->");
			if (!e)
				return -EBADMSG;
			p = e + 3;
			continue;
		}
		e = strchr(p, '>');
		if (!e)
			return -EBADMSG;
		if (p[1] == '!' || p[1] == '?') {
			p = e + 1; /* the DOCTYPE and the XML declaration */
			continue;
		}
		if (p[1] == '/') {
			if (depth == 0)
				return -EBADMSG;
			depth--;
		} else {
			size_t tag_len = strcspn(p + 1, " \t\n/>");
			bool empty = e[-1] == '/';
			const char *attrs = p + 1 + tag_len;

			k = xml_element(node, &interface, p + 1, tag_len, attrs, (size_t)(e - attrs), depth);
			if (k < 0)
				return k;
			if (!empty)
				depth++;
		}
		p = e + 1;
	}
	return depth == 0 ? 0 : -EBADMSG;
}
