/* SPDX-License-Identifier: MIT */
/*
 * dbus-match.h - D-Bus match rules (the specification's "Match Rules"):
 * parsing a rule string, its canonical text (identical rules compare
 * equal), and matching a message against it. Pure: no I/O, no bus state.
 * protocol/README.md section 10 is the normative description.
 */
#ifndef BROKERD_PROTOCOL_DBUS_MATCH_H
#define BROKERD_PROTOCOL_DBUS_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DBUS_MATCH_ARGS_MAX 64	 /* arg0 .. arg63 */
#define DBUS_MATCH_TEXT_MAX 4096 /* a rule string, as the control protocol's strings */

struct dbus_match_rule {
	uint8_t type; /* 0: any, else enum chmsg_type */
	/* NULL: not part of the rule */
	char *sender, *interface, *member, *path, *path_namespace, *destination, *arg0namespace;
	char *args[DBUS_MATCH_ARGS_MAX];
	bool arg_is_path[DBUS_MATCH_ARGS_MAX]; /* argNpath rather than argN */
	unsigned int n_args;		       /* highest N given + 1 */
};

/* What a message offers to a rule: fields of a decoded message, "" or NULL when absent. */
struct dbus_match_message {
	uint8_t type;
	const char *sender;	 /* the unique name the kernel's stamp names */
	const char *sender_name; /* the well-known name whose channel carried it, or NULL */
	const char *interface, *member, *path, *destination, *signature;
	const void *body; /* dbus1, in byte_order */
	size_t body_len;
	char byte_order;
};

/* Parse text into r (zeroed first): 0, -EINVAL for a bad rule, -ENOMEM. */
int dbus_match_rule_parse(struct dbus_match_rule *r, const char *text);
void dbus_match_rule_deinit(struct dbus_match_rule *r);

/*
 * The canonical text of r (malloc'ed): keys in a fixed order, every value
 * quoted. Two rules match the same messages if their canonical texts are
 * equal; rules that differ only in key order or quoting get the same text.
 */
int dbus_match_rule_format(const struct dbus_match_rule *r, char **ret);

bool dbus_match_rule_matches(const struct dbus_match_rule *r, const struct dbus_match_message *m);

/*
 * What m, a message of the D-Bus socket protocol (parsed, SENDER set),
 * offers to a rule, pointing into m; sender_name as in struct
 * dbus_match_message. A message of the bus driver offers its name
 * (org.freedesktop.DBus) as its well-known sender too.
 */
struct dbus_message;
void dbus_match_message_of(struct dbus_match_message *mm, const struct dbus_message *m, const char *sender_name);

#endif
