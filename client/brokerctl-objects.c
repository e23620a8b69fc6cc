/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-objects.c - brokerctl's object commands, as busctl has them:
 * introspect (a service's object as a table of interfaces, methods,
 * properties with their values, and signals), tree (the object paths
 * found by introspecting from /), get-property and set-property. The
 * introspection XML is read by brokerctl-xml.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/brokerctl-args.h"
#include "client/brokerctl-xml.h"
#include "client/brokerctl.h"
#include "protocol/dbus-signature.h"
#include "util/array.h"

#define MAX_SZ(a, b)   ((a) > (b) ? (a) : (b))
#define INTROSPECTABLE "org.freedesktop.DBus.Introspectable"
#define PROPERTIES     "org.freedesktop.DBus.Properties"

/* --- Calls --------------------------------------------------------------------------------- */

/* Reports a failed call (an error reply as busctl does: its name and message); the exit code. */
static int call_failed(brokerd_bus *bus, const char *what, int k, brokerd_msg *reply)
{
	const void *body;
	size_t size;

	if (k != -EREMOTEIO)
		return fail(bus, what, k);
	(void)brokerd_msg_get_body(reply, &body, &size);
	fprintf(stderr, "brokerctl: %s: %.*s\n", brokerd_msg_get_error_name(reply), (int)size,
		(const char *)body);
	return errno_to_exit(k);
}

/* service path interface.member(values of types): 0 with *ret, or an exit code (reported). */
static int call_simple(brokerd_bus *bus, const char *service, const char *path, const char *interface,
		       const char *member, brokerd_msg **ret, const char *types, const char *a, const char *b)
{
	brokerd_msg *m = NULL;
	char what[600];
	int k;

	snprintf(what, sizeof(what), "%s %s %s.%s", service, path, interface, member);
	k = brokerd_msg_new_call(bus, &m, service, path, interface, member);
	if (k < 0) {
		fprintf(stderr, "brokerctl: invalid service name, object path or interface: %s\n", what);
		return EXIT_USAGE;
	}
	if (types)
		k = brokerd_msg_append(m, types, a, b);
	*ret = NULL;
	if (k >= 0)
		k = brokerd_bus_call_msg(bus, m, arg_timeout_usec, ret);
	brokerd_msg_unref(m);
	if (k < 0) {
		k = call_failed(bus, what, k, *ret);
		*ret = brokerd_msg_unref(*ret);
		return k;
	}
	return 0;
}

static int introspect_node(brokerd_bus *bus, const char *service, const char *path, struct node *node)
{
	brokerd_msg *r = NULL;
	const char *xml;
	int k;

	k = call_simple(bus, service, path, INTROSPECTABLE, "Introspect", &r, NULL, NULL, NULL);
	if (k)
		return k;
	k = brokerd_msg_read(r, "s", &xml);
	k = k > 0 ? xml_read(xml, node) : -EBADMSG;
	brokerd_msg_unref(r);
	if (k < 0) {
		fprintf(stderr, "brokerctl: %s %s: invalid introspection data\n", service, path);
		return EXIT_FAIL;
	}
	return 0;
}

/* --- introspect ------------------------------------------------------------------------------------- */

static int member_order(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int k = strcmp(x->interface, y->interface);

	if (k)
		return k;
	if (x->kind != y->kind)
		return x->kind - y->kind;
	return strcmp(x->name, y->name);
}

/* The values of the properties of interface, from GetAll (left unread if it fails). */
static void read_values(brokerd_bus *bus, const char *service, const char *path, struct node *node,
			const char *interface)
{
	brokerd_msg *r = NULL;
	const char *name;

	if (call_simple(bus, service, path, PROPERTIES, "GetAll", &r, "s", interface, NULL))
		return;
	if (brokerd_msg_enter_container(r, 'a', "{sv}") > 0) {
		while (brokerd_msg_enter_container(r, '{', "sv") > 0) {
			char *buf = NULL;
			size_t size = 0;
			FILE *f;

			if (brokerd_msg_read_basic(r, 's', &name) <= 0)
				break;
			f = open_memstream(&buf, &size);
			if (!f)
				break;
			(void)variant_print(r, f, false);
			fclose(f);
			for (size_t i = 0; i < node->n_members; i++)
				if (node->members[i].kind == MEMBER_PROPERTY &&
				    strcmp(node->members[i].interface, interface) == 0 &&
				    strcmp(node->members[i].name, name) == 0 && !node->members[i].value) {
					node->members[i].value = buf;
					buf = NULL;
				}
			free(buf);
			(void)brokerd_msg_exit_container(r);
		}
	}
	brokerd_msg_unref(r);
}

/* One row's columns: NAME TYPE SIGNATURE RESULT/VALUE FLAGS. */
static void member_columns(const struct member *m, const char *col[5], char *flags, size_t size)
{
	static const char *const kinds[] = { "method", "property", "signal" };

	col[0] = m->name;
	col[1] = kinds[m->kind];
	col[2] = *m->sig ? m->sig : "-";
	col[3] = m->kind == MEMBER_METHOD		? (*m->result ? m->result : "-") :
		 m->kind == MEMBER_PROPERTY && m->value ? m->value :
							  "-";
	snprintf(flags, size, "%s%s%s%s", m->deprecated ? "deprecated " : "", m->no_reply ? "no-reply " : "",
		 m->kind == MEMBER_PROPERTY && m->emits ? m->emits : "",
		 m->kind == MEMBER_PROPERTY && m->writable ? " writable" : "");
	/* no trailing blank, "-" for none */
	while (*flags && flags[strlen(flags) - 1] == ' ')
		flags[strlen(flags) - 1] = 0;
	if (flags[0] == ' ')
		memmove(flags, flags + 1, strlen(flags));
	col[4] = *flags ? flags : "-";
}

static void introspect_json(struct node *node)
{
	char flags[128];
	struct json j;

	listing_begin(&j, "%s", "");
	for (size_t i = 0; i < node->n_members; i++) {
		const char *col[5];

		member_columns(&node->members[i], col, flags, sizeof(flags));
		json_begin_object(&j);
		json_member_string(&j, "interface", node->members[i].interface);
		json_member_string(&j, "name", col[0]);
		json_member_string(&j, "type", col[1]);
		json_member_string(&j, "signature", node->members[i].sig);
		if (node->members[i].kind == MEMBER_METHOD)
			json_member_string(&j, "result", node->members[i].result);
		if (node->members[i].value)
			json_member_string(&j, "value", node->members[i].value);
		json_member_string(&j, "flags", *flags ? flags : "");
		json_end_object(&j);
	}
	listing_end(&j);
}

/* introspect SERVICE OBJECT */
int cmd_introspect(brokerd_bus *bus, int argc, char **argv)
{
	struct node node = { 0 };
	size_t w[4] = { strlen("NAME"), strlen("TYPE"), strlen("SIGNATURE"), strlen("RESULT/VALUE") };
	char flags[128];
	int k;

	if (argc != 3)
		return fail(NULL, "usage: introspect SERVICE OBJECT", -EINVAL);
	k = introspect_node(bus, argv[1], argv[2], &node);
	if (k)
		return k;
	qsort(node.members, node.n_members, sizeof(*node.members), member_order);
	for (size_t i = 0; i < node.n_members; i++)
		if (node.members[i].kind == MEMBER_PROPERTY &&
		    (i == 0 || node.members[i - 1].kind != MEMBER_PROPERTY ||
		     strcmp(node.members[i - 1].interface, node.members[i].interface) != 0))
			read_values(bus, argv[1], argv[2], &node, node.members[i].interface);
	if (arg_json) {
		introspect_json(&node);
		node_done(&node);
		return EXIT_OK;
	}
	/* busctl's table: columns as wide as their widest cell, member names after a dot */
	for (size_t i = 0; i < node.n_members; i++) {
		const char *col[5];

		member_columns(&node.members[i], col, flags, sizeof(flags));
		w[0] = MAX_SZ(w[0], MAX_SZ(strlen(node.members[i].interface), strlen(col[0]) + 1));
		for (size_t c = 1; c < 4; c++)
			w[c] = MAX_SZ(w[c], strlen(col[c]));
	}
	w[1] = MAX_SZ(w[1], strlen("interface"));
	printf("%-*s %-*s %-*s %-*s %s\n", (int)w[0], "NAME", (int)w[1], "TYPE", (int)w[2], "SIGNATURE",
	       (int)w[3], "RESULT/VALUE", "FLAGS");
	for (size_t i = 0; i < node.n_members; i++) {
		const char *col[5];

		if (i == 0 || strcmp(node.members[i - 1].interface, node.members[i].interface) != 0)
			printf("%-*s %-*s %-*s %-*s %s\n", (int)w[0], node.members[i].interface, (int)w[1],
			       "interface", (int)w[2], "-", (int)w[3], "-", "-");
		member_columns(&node.members[i], col, flags, sizeof(flags));
		printf(".%-*s %-*s %-*s %-*s %s\n", (int)w[0] - 1, col[0], (int)w[1], col[1], (int)w[2],
		       col[2], (int)w[3], col[3], col[4]);
	}
	node_done(&node);
	return EXIT_OK;
}

/* --- tree ----------------------------------------------------------------------------------------- */

struct paths {
	char **v;
	size_t n, cap;
};

/* Introspects path and, depth first, the children it names: every path into out. */
static int walk(brokerd_bus *bus, const char *service, const char *path, struct paths *out,
		unsigned int depth)
{
	struct node node = { 0 };
	int k;

	if (depth > 64)
		return 0; /* deeper than any path a message can carry */
	k = introspect_node(bus, service, path, &node);
	for (size_t i = 0; !k && i < node.n_children; i++) {
		char *child;

		if (asprintf(&child, "%s/%s", strcmp(path, "/") == 0 ? "" : path, node.children[i]) < 0 ||
		    ARRAY_RESERVE(out->v, out->cap, out->n + 1) < 0) {
			k = fail(NULL, "tree", -ENOMEM);
			break;
		}
		out->v[out->n++] = child;
		k = walk(bus, service, child, out, depth + 1);
	}
	node_done(&node);
	return k;
}

static int path_order(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether p is directly below parent. */
static bool path_is_child(const char *p, const char *parent)
{
	size_t n = strcmp(parent, "/") == 0 ? 0 : strlen(parent);

	return strncmp(p, parent, n) == 0 && p[n] == '/' && p[n + 1] && !strchr(p + n + 1, '/');
}

/* Prints the children of parent as busctl's tree, each line after prefix. */
static void print_tree(struct paths *ps, const char *parent, const char *prefix)
{
	for (size_t i = 0; i < ps->n; i++) {
		bool last = true;
		char sub[512];

		if (!path_is_child(ps->v[i], parent))
			continue;
		for (size_t j = i + 1; j < ps->n && last; j++)
			last = !path_is_child(ps->v[j], parent);
		printf("%s%s%s\n", prefix, last ? "└─" : "├─", ps->v[i]);
		snprintf(sub, sizeof(sub), "%s%s", prefix, last ? "  " : "│ ");
		print_tree(ps, ps->v[i], sub);
	}
}

/* tree SERVICE */
int cmd_tree(brokerd_bus *bus, int argc, char **argv)
{
	struct paths ps = { 0 };
	int k;

	if (argc != 2)
		return fail(NULL, "usage: tree SERVICE", -EINVAL);
	k = walk(bus, argv[1], "/", &ps, 0);
	if (!k) {
		qsort(ps.v, ps.n, sizeof(*ps.v), path_order);
		if (arg_json) {
			struct json j;

			listing_begin(&j, "%s", "");
			for (size_t i = 0; i < ps.n; i++)
				json_string(&j, ps.v[i]);
			listing_end(&j);
		} else {
			print_tree(&ps, "/", "");
		}
	}
	for (size_t i = 0; i < ps.n; i++)
		free(ps.v[i]);
	free(ps.v);
	return k;
}

/* --- get-property / set-property -------------------------------------------------------------------- */

/* get-property SERVICE OBJECT INTERFACE PROPERTY... */
int cmd_get_property(brokerd_bus *bus, int argc, char **argv)
{
	if (argc < 5)
		return fail(NULL, "usage: get-property SERVICE OBJECT INTERFACE PROPERTY...", -EINVAL);
	for (int i = 4; i < argc; i++) {
		brokerd_msg *r = NULL;
		int k = call_simple(bus, argv[1], argv[2], PROPERTIES, "Get", &r, "ss", argv[3], argv[i]);

		if (k)
			return k;
		k = arg_json ? variant_print_json(r, stdout, arg_json_pretty) :
			       variant_print(r, stdout, true);
		brokerd_msg_unref(r);
		if (k < 0)
			return fail(NULL, "reading the reply", k);
	}
	return EXIT_OK;
}

/* set-property SERVICE OBJECT INTERFACE PROPERTY SIGNATURE ARGUMENT... */
int cmd_set_property(brokerd_bus *bus, int argc, char **argv)
{
	brokerd_msg *m = NULL, *r = NULL;
	char what[600], err[512];
	int k;

	if (argc < 7)
		return fail(NULL,
			    "usage: set-property SERVICE OBJECT INTERFACE PROPERTY SIGNATURE ARGUMENT...",
			    -EINVAL);
	snprintf(what, sizeof(what), "set-property %s %s %s %s", argv[1], argv[2], argv[3], argv[4]);
	k = brokerd_msg_new_call(bus, &m, argv[1], argv[2], PROPERTIES, "Set");
	if (k < 0) {
		fprintf(stderr, "brokerctl: invalid service name or object path: %s\n", what + 13);
		return EXIT_USAGE;
	}
	k = brokerd_msg_append(m, "ss", argv[3], argv[4]);
	if (k >= 0 && !dbus_signature_is_single(argv[5])) {
		fprintf(stderr, "brokerctl: a property's signature is one complete type: %s\n", argv[5]);
		brokerd_msg_unref(m);
		return EXIT_USAGE;
	}
	if (k >= 0)
		k = brokerd_msg_open_container(m, 'v', argv[5]);
	if (k >= 0) {
		k = args_append(m, argv[5], argc - 6, argv + 6, err, sizeof(err));
		if (k < 0) {
			fprintf(stderr, "brokerctl: %s\n", err);
			brokerd_msg_unref(m);
			return EXIT_USAGE;
		}
		k = brokerd_msg_close_container(m);
	}
	if (k >= 0)
		k = brokerd_bus_call_msg(bus, m, arg_timeout_usec, &r);
	brokerd_msg_unref(m);
	if (k < 0)
		k = call_failed(bus, what, k, r);
	brokerd_msg_unref(r);
	return k;
}
