/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-xml.h - the introspection XML of a D-Bus object read into its
 * members and child nodes (brokerctl-xml.c), for brokerctl's introspect
 * and tree.
 */
#ifndef BROKERD_CLIENT_BROKERCTL_XML_H
#define BROKERD_CLIENT_BROKERCTL_XML_H

#include <stdbool.h>
#include <stddef.h>

enum { MEMBER_METHOD, MEMBER_PROPERTY, MEMBER_SIGNAL };

struct member {
	int kind;
	char *interface;
	char *name;
	char sig[256], result[256]; /* method: in, out; property: type; signal: args */
	bool writable, deprecated, no_reply;
	const char *emits; /* property: "emits-change" (the default), ... or NULL for none */
	char *value;	   /* property: as busctl prints it, NULL if unread (the reader leaves it so) */
};

struct node {
	struct member *members;
	size_t n_members, cap_members;
	char **children;
	size_t n_children, cap_children;
};

/*
 * Reads the XML (elements, attributes with the five predefined entities,
 * comments, the DOCTYPE and XML declaration) into node, zeroed by the
 * caller: the members of its interfaces and the names of its child
 * nodes. Returns 0, -EBADMSG for XML it cannot read (unbalanced, an
 * interface or member without a name), -ENOMEM. node_done() either way.
 */
int xml_read(const char *xml, struct node *node);
void node_done(struct node *n);

#endif
