/* SPDX-License-Identifier: MIT */
/*
 * brokerctl.h - what brokerctl's command files share: exit codes, options,
 * output helpers (brokerctl.c) and the commands.
 */
#ifndef BROKERD_CLIENT_BROKERCTL_H
#define BROKERD_CLIENT_BROKERCTL_H

#include <stdbool.h>
#include <stdint.h>

#include "client/bus-internal.h"
#include "client/json.h"

enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	      /* anything else */
	EXIT_USAGE = 2,	      /* bad command line */
	EXIT_DENIED = 3,      /* access denied, or policy check says deny */
	EXIT_NO_OWNER = 4,    /* name has no owner / unknown */
	EXIT_TIMEOUT = 5,     /* call timed out */
	EXIT_REMOTE = 6,      /* the service replied with an error */
	EXIT_CONNECT = 7,     /* cannot reach brokerd */
	EXIT_QUOTA = 8,	      /* a quota refused the request */
	EXIT_UNSUPPORTED = 9, /* brokerd or the kernel cannot do it */
};

extern bool arg_json;
extern bool arg_json_pretty;
extern const char *arg_name;
extern uint64_t arg_timeout_usec;
extern long arg_count;
extern uint32_t arg_page_size;

int errno_to_exit(int k);
/* --json output that is one object: out_begin(), its members, out_end(). */
void out_begin(struct json *j);
void out_end(struct json *j);
/* A listing: a JSON array of what follows, or a table under this header. */
__attribute__((format(printf, 2, 3))) void listing_begin(struct json *j, const char *header, ...);
void listing_end(struct json *j);
/* Reports a failure (as JSON too with --json): the exit code for k. */
int fail(brokerd_bus *bus, const char *what, int k);

/* the commands: argv[0] is the command's name */
int cmd_list(brokerd_bus *bus, int argc, char **argv);
int cmd_status(brokerd_bus *bus, int argc, char **argv);
int cmd_peers(brokerd_bus *bus, int argc, char **argv);
int cmd_call(brokerd_bus *bus, int argc, char **argv);
int cmd_emit(brokerd_bus *bus, int argc, char **argv);
int cmd_monitor(brokerd_bus *bus, int argc, char **argv);
int cmd_introspect(brokerd_bus *bus, int argc, char **argv);
int cmd_tree(brokerd_bus *bus, int argc, char **argv);
int cmd_get_property(brokerd_bus *bus, int argc, char **argv);
int cmd_set_property(brokerd_bus *bus, int argc, char **argv);
int cmd_policy(brokerd_bus *bus, int argc, char **argv);
int cmd_quota(brokerd_bus *bus, int argc, char **argv);
int cmd_info(brokerd_bus *bus, int argc, char **argv);

#endif
