/* SPDX-License-Identifier: MIT */
/*
 * brokerctl - inspect and poke a running brokerd, like busctl: list names
 * and owners, show a name's owner and credentials, call, emit, monitor,
 * explain a policy decision, show quota use. Human output by default,
 * --json for scripts; the exit code says what happened (see usage()).
 *
 * Bus introspection requests go through the library's internal
 * bus_ctrl_request() and bus_ctrl_call() and bus-introspect.c; calls and
 * signals through the public API. This file holds the command line and the
 * output helpers; the commands are in brokerctl-names.c (list, status,
 * peers), brokerctl-msg.c (call, emit, monitor) and brokerctl-admin.c
 * (policy, quota, info).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/brokerctl.h"

bool arg_json;
bool arg_json_pretty;
const char *arg_name;
static const char *arg_address;
uint64_t arg_timeout_usec = 25ULL * 1000000ULL;
long arg_count = -1;
uint32_t arg_page_size;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: brokerctl [OPTIONS] COMMAND ...\n"
		"\n"
		"Commands:\n"
		"  info                          this connection and what brokerd offers\n"
		"  list                          names, their owners and queued owners\n"
		"  status NAME                   owner and credentials of a name\n"
		"  call SERVICE OBJECT INTERFACE METHOD [SIGNATURE [ARGUMENT...]]\n"
		"                                call a method with typed arguments\n"
		"  call NAME MEMBER [ARG]        call a method with bytes, print the reply's\n"
		"  emit OBJECT INTERFACE SIGNAL [SIGNATURE [ARGUMENT...]]\n"
		"                                emit a typed signal on --name's channel\n"
		"  emit NAME MEMBER [ARG]        emit a signal with bytes (takes the name meanwhile)\n"
		"  introspect SERVICE OBJECT     an object's interfaces, methods, properties\n"
		"                                (with their values) and signals\n"
		"  tree SERVICE                  the object paths of a service\n"
		"  get-property SERVICE OBJECT INTERFACE PROPERTY...\n"
		"                                print property values\n"
		"  set-property SERVICE OBJECT INTERFACE PROPERTY SIGNATURE ARGUMENT...\n"
		"                                set a property\n"
		"  monitor [NAME] [MATCH...]     print bus traffic, or what matches a rule (privileged)\n"
		"  peers                         connections with credentials and names\n"
		"  policy check USER NAME ACTION explain a decision (own, send, receive)\n"
		"  quota [UID|all]               quota use per uid\n"
		"\n"
		"Options:\n"
		"  -j, --json[=short|pretty]     JSON output (pretty: typed bodies indented)\n"
		"  -N, --name NAME               emit: the name whose signal channel to use\n"
		"  -a, --address PATH            broker socket (default $BROKERD_SOCKET or %s)\n"
		"  -t, --timeout SEC             call timeout (default 25)\n"
		"  -n, --count N                 monitor: stop after N messages\n"
		"  -p, --page-size N             list, peers: ask for N entries a request\n"
		"                                (default: as many as fit)\n"
		"  -h, --help\n"
		"\n"
		"Exit status: 0 ok/allowed, 1 failure, 2 usage, 3 denied, 4 no owner,\n"
		"5 timeout, 6 error reply, 7 cannot connect, 8 quota exceeded, 9 not supported.\n",
		BROKERD_SYSTEM_SOCKET);
}

int errno_to_exit(int k)
{
	switch (k) {
	case 0:
		return EXIT_OK;
	case -EACCES:
	case -EPERM:
		return EXIT_DENIED;
	case -ENXIO:
	case -ENOENT:
		return EXIT_NO_OWNER;
	case -ETIMEDOUT:
		return EXIT_TIMEOUT;
	case -EREMOTEIO:
		return EXIT_REMOTE;
	case -EDQUOT:
		return EXIT_QUOTA;
	case -EOPNOTSUPP:
		return EXIT_UNSUPPORTED;
	case -EINVAL:
		return EXIT_USAGE;
	default:
		return EXIT_FAIL;
	}
}

void out_begin(struct json *j)
{
	json_init(j, stdout);
	json_begin_object(j);
}

void out_end(struct json *j)
{
	json_end_object(j);
	json_finish(j);
}

void listing_begin(struct json *j, const char *header, ...)
{
	va_list ap;

	json_init(j, stdout);
	if (arg_json) {
		json_begin_array(j);
		return;
	}
	va_start(ap, header);
	vprintf(header, ap);
	va_end(ap);
}

void listing_end(struct json *j)
{
	if (arg_json) {
		json_end_array(j);
		json_finish(j);
	}
}

int fail(brokerd_bus *bus, const char *what, int k)
{
	if (arg_json) {
		struct json j;

		out_begin(&j);
		json_member_string(&j, "error", bus && bus->error_name[0] ? bus->error_name : strerror(-k));
		json_member_string(&j, "message", bus && bus->error_message[0] ? bus->error_message : what);
		json_key(&j, "errno");
		json_int(&j, -k);
		out_end(&j);
	}
	if (bus && bus->error_name[0])
		fprintf(stderr, "brokerctl: %s: %s: %s\n", what, bus->error_name, bus->error_message);
	else
		fprintf(stderr, "brokerctl: %s: %s\n", what, strerror(-k));
	return errno_to_exit(k);
}

static int bus_open(brokerd_bus **ret)
{
	int k;

	k = arg_address ? brokerd_bus_open(ret, arg_address) : brokerd_bus_open_system(ret);
	if (k < 0) {
		fprintf(stderr, "brokerctl: cannot connect to brokerd at %s: %s\n",
			arg_address ? arg_address : BROKERD_SYSTEM_SOCKET, strerror(-k));
		return EXIT_CONNECT;
	}
	(void)brokerd_bus_set_reconnect(*ret, 0);
	return 0;
}

/* --- main ---------------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*run)(brokerd_bus *bus, int argc, char **argv);
} commands[] = {
	{ "info", cmd_info },
	{ "list", cmd_list },
	{ "status", cmd_status },
	{ "call", cmd_call },
	{ "emit", cmd_emit },
	{ "monitor", cmd_monitor },
	{ "peers", cmd_peers },
	{ "policy", cmd_policy },
	{ "quota", cmd_quota },
	/* objects (brokerctl-objects.c) */
	{ "introspect", cmd_introspect },
	{ "tree", cmd_tree },
	{ "get-property", cmd_get_property },
	{ "set-property", cmd_set_property },
};

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", optional_argument, NULL, 'j' },    { "name", required_argument, NULL, 'N' },
		{ "address", required_argument, NULL, 'a' }, { "timeout", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'n' },   { "page-size", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },	     {}
	};
	brokerd_bus *bus = NULL;
	int c, k;

	while ((c = getopt_long(argc, argv, "+ja:N:t:n:p:h", options, NULL)) >= 0) {
		char *end;

		switch (c) {
		case 'j':
			if (optarg && strcmp(optarg, "short") != 0 && strcmp(optarg, "pretty") != 0) {
				fprintf(stderr, "brokerctl: invalid JSON mode %s (short or pretty)\n",
					optarg);
				return EXIT_USAGE;
			}
			arg_json = true;
			arg_json_pretty = optarg && strcmp(optarg, "pretty") == 0;
			break;
		case 'N':
			arg_name = optarg;
			break;
		case 'a':
			arg_address = optarg;
			break;
		case 't': {
			double s = strtod(optarg, &end);

			if (*end || s <= 0 || s > 86400) {
				fprintf(stderr, "brokerctl: invalid timeout %s\n", optarg);
				return EXIT_USAGE;
			}
			arg_timeout_usec = (uint64_t)(s * 1e6);
			break;
		}
		case 'n':
			arg_count = strtol(optarg, &end, 10);
			if (*end || arg_count <= 0) {
				fprintf(stderr, "brokerctl: invalid count %s\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'p': {
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !*optarg || optarg[0] == '-' || v > UINT32_MAX) {
				fprintf(stderr, "brokerctl: invalid page size %s\n", optarg);
				return EXIT_USAGE;
			}
			arg_page_size = (uint32_t)v;
			break;
		}
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
		if (strcmp(argv[optind], commands[i].name) != 0)
			continue;
		k = bus_open(&bus);
		if (k)
			return k;
		k = commands[i].run(bus, argc - optind, argv + optind);
		brokerd_bus_close(bus);
		return k;
	}
	fprintf(stderr, "brokerctl: unknown command %s\n", argv[optind]);
	usage(stderr);
	return EXIT_USAGE;
}
