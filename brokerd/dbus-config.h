/* SPDX-License-Identifier: MIT */
/*
 * dbus-config.h - dbus-daemon's XML configuration (dbus-daemon(1),
 * "CONFIGURATION FILE"), read with expat into what it says, element by
 * element: <busconfig> with its includes resolved (<include>, <includedir>),
 * the bus settings, the policies with their <allow>/<deny> rules in file
 * order, and the limits. No bus semantics here: what brokerd makes of it is
 * policy-dbus.c's job. Elements that are only about how dbus-daemon runs
 * (<fork/>, <pidfile>, <apparmor>, ...) are kept as notes, so a report can
 * list every one of them instead of dropping them silently.
 */
#ifndef BROKERD_DBUS_CONFIG_H
#define BROKERD_DBUS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

/* How deep <include> may nest (dbus-daemon stops at 32 too). */
#define DBUS_CONFIG_MAX_DEPTH 32

/* What dbus-daemon's <standard_system_servicedirs/> stands for. */
#define DBUS_CONFIG_SYSTEM_SERVICEDIRS                                                  \
	"/usr/local/share/dbus-1/system-services", "/usr/share/dbus-1/system-services", \
		"/lib/dbus-1/system-services"

/* The <policy> a rule is in. */
enum dbus_policy_context {
	DBUS_POLICY_DEFAULT,   /* context="default" */
	DBUS_POLICY_MANDATORY, /* context="mandatory" */
	DBUS_POLICY_USER,      /* user="NAME|UID" */
	DBUS_POLICY_GROUP,     /* group="NAME|GID" */
	DBUS_POLICY_CONSOLE,   /* at_console="true|false" */
	_DBUS_POLICY_MAX,
};

/* Every attribute dbus-daemon(1) lists for <allow> and <deny>. */
enum dbus_rule_attr {
	DBUS_ATTR_SEND_INTERFACE,
	DBUS_ATTR_SEND_MEMBER,
	DBUS_ATTR_SEND_ERROR,
	DBUS_ATTR_SEND_BROADCAST,
	DBUS_ATTR_SEND_DESTINATION,
	DBUS_ATTR_SEND_DESTINATION_PREFIX,
	DBUS_ATTR_SEND_TYPE,
	DBUS_ATTR_SEND_PATH,
	DBUS_ATTR_SEND_REQUESTED_REPLY,
	DBUS_ATTR_RECEIVE_INTERFACE,
	DBUS_ATTR_RECEIVE_MEMBER,
	DBUS_ATTR_RECEIVE_ERROR,
	DBUS_ATTR_RECEIVE_SENDER,
	DBUS_ATTR_RECEIVE_TYPE,
	DBUS_ATTR_RECEIVE_PATH,
	DBUS_ATTR_RECEIVE_REQUESTED_REPLY,
	DBUS_ATTR_EAVESDROP,
	DBUS_ATTR_MIN_FDS,
	DBUS_ATTR_MAX_FDS,
	DBUS_ATTR_OWN,
	DBUS_ATTR_OWN_PREFIX,
	DBUS_ATTR_USER,
	DBUS_ATTR_GROUP,
	_DBUS_ATTR_MAX,
};

const char *dbus_rule_attr_to_string(enum dbus_rule_attr a);
const char *dbus_policy_context_to_string(enum dbus_policy_context c);

struct dbus_config_rule {
	bool allow;
	enum dbus_policy_context context;
	char *who;		    /* user or group name/id, "true"/"false" for at_console */
	char *attr[_DBUS_ATTR_MAX]; /* as written; NULL when absent */
	const char *file;	    /* owned by the config's file list */
	unsigned int line;
};

struct dbus_config_limit {
	char *name;
	uint64_t value;
	const char *file;
	unsigned int line;
};

/* An element that was read but that brokerd does not act on, and why. */
struct dbus_config_note {
	char *text;
	const char *file;
	unsigned int line;
};

struct dbus_config {
	char *type; /* <type>: "system", "session", ...; the last one wins */
	char *user; /* <user> */
	char *pidfile;
	char *servicehelper;
	bool fork, keep_umask, syslog, allow_anonymous;
	char **listen, **auth, **servicedirs; /* in order; servicedirs absolute */
	size_t n_listen, n_auth, n_servicedirs;
	size_t alloc_listen, alloc_auth, alloc_servicedirs;
	struct dbus_config_rule *rules; /* every policy's rules, in file order */
	size_t n_rules, alloc_rules;
	struct dbus_config_limit *limits;
	size_t n_limits, alloc_limits;
	struct dbus_config_note *notes;
	size_t n_notes, alloc_notes;
	char **files; /* every file read, the main one first */
	size_t n_files, alloc_files;
};

/*
 * Read path and everything it includes. On failure returns a negative errno
 * (-EINVAL for a bad file, -ELOOP for an include cycle or too deep nesting,
 * -ENOENT for a missing file not marked ignore_missing) and writes
 * "FILE:LINE: reason" to err.
 */
int dbus_config_load(struct dbus_config **ret, const char *path, char *err, size_t err_len);

/*
 * The same from a string (file is the name used in messages and to resolve
 * relative includes).
 */
int dbus_config_parse_string(struct dbus_config **ret, const char *file, const char *text, size_t len,
			     char *err, size_t err_len);

struct dbus_config *dbus_config_free(struct dbus_config *c);
DEFINE_FREE_FUNC(struct dbus_config, dbus_config_free);

#endif
