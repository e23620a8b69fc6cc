/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-msg.c - brokerctl's traffic commands: call a method, emit a
 * signal (typed as busctl writes them, or as bytes), monitor the bus.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/brokerctl-args.h"
#include "client/brokerctl.h"
#include "client/bus-introspect.h"
#include "client/bus-match.h"

static long monitor_seen;
static uint64_t monitor_lost; /* messages the kernel dropped for our monitor channels */
static volatile sig_atomic_t quit;

static void print_msg_json(struct json *j, brokerd_msg *m)
{
	struct brokerd_creds cr = { 0 };
	const void *body;
	size_t size;
	static const char *const types[] = { "?", "call", "reply", "error", "signal" };
	int t = brokerd_msg_get_type(m);

	(void)brokerd_msg_get_body(m, &body, &size);
	json_member_string(j, "type", types[t >= 1 && t <= 4 ? t : 0]);
	json_member_string(j, "sender", brokerd_msg_get_sender(m));
	if (brokerd_msg_get_creds(m, &cr) >= 0) {
		json_member_uint(j, "pid", (uint64_t)cr.pid);
		json_member_uint(j, "uid", cr.uid);
		json_member_uint(j, "gid", cr.gid);
	}
	json_member_string(j, t == BROKERD_MSG_ERROR ? "error" : "member", brokerd_msg_get_member(m));
	/* the other header fields of version 2, where the message has them */
	if (*brokerd_msg_get_path(m))
		json_member_string(j, "path", brokerd_msg_get_path(m));
	if (*brokerd_msg_get_interface(m))
		json_member_string(j, "interface", brokerd_msg_get_interface(m));
	if (*brokerd_msg_get_destination(m))
		json_member_string(j, "destination", brokerd_msg_get_destination(m));
	json_member_string(j, "signature", brokerd_msg_get_signature(m));
	json_member_uint(j, "serial", brokerd_msg_get_serial(m));
	if (m->n_fds) {
		/* as this process received them: the h values of the body index these */
		json_key(j, "fds");
		json_begin_array(j);
		for (unsigned int i = 0; i < m->n_fds; i++)
			json_int(j, m->fds[i]);
		json_end_array(j);
	}
	if (t == BROKERD_MSG_REPLY || t == BROKERD_MSG_ERROR)
		json_member_uint(j, "reply_serial", m->reply_serial);
	json_key(j, "body");
	json_string_len(j, body, size);
}

/* --- call / emit --------------------------------------------------------- */

/*
 * argv: [SIGNATURE [ARGUMENT...]] appended to m. A bad argument is a usage
 * error, reported before anything is sent.
 */
static int append_args(brokerd_msg *m, int argc, char **argv)
{
	char err[512];
	int k;

	if (argc == 0)
		return 0;
	k = args_append(m, argv[0], argc - 1, argv + 1, err, sizeof(err));
	if (k < 0) {
		fprintf(stderr, "brokerctl: %s\n", err);
		return EXIT_USAGE;
	}
	return 0;
}

/* call SERVICE OBJECT INTERFACE METHOD [SIGNATURE [ARGUMENT...]] */
static int call_typed(brokerd_bus *bus, int argc, char **argv)
{
	brokerd_msg *m = NULL, *reply = NULL;
	char what[600];
	int k, r;

	snprintf(what, sizeof(what), "call %s %s %s.%s", argv[1], argv[2], argv[3], argv[4]);
	k = brokerd_msg_new_call(bus, &m, argv[1], argv[2], argv[3], argv[4]);
	if (k < 0) {
		fprintf(stderr, "brokerctl: invalid service name, object path, interface or method: %s\n",
			what + 5);
		return EXIT_USAGE;
	}
	r = append_args(m, argc - 5, argv + 5);
	if (r) {
		brokerd_msg_unref(m);
		return r;
	}
	k = brokerd_bus_call_msg(bus, m, arg_timeout_usec, &reply);
	brokerd_msg_unref(m);
	if (k < 0 && k != -EREMOTEIO)
		return fail(bus, what, k);
	if (k == -EREMOTEIO) {
		const void *body;
		size_t size;

		/* as the bytes form reports it: the error's name and message */
		(void)brokerd_msg_get_body(reply, &body, &size);
		if (arg_json) {
			struct json j;

			out_begin(&j);
			print_msg_json(&j, reply);
			out_end(&j);
		}
		fprintf(stderr, "brokerctl: %s: %.*s\n", brokerd_msg_get_error_name(reply), (int)size,
			(const char *)body);
	} else {
		r = arg_json ? body_print_json(reply, stdout, arg_json_pretty) : body_print(reply, stdout);
		if (r < 0) {
			brokerd_msg_unref(reply);
			return fail(NULL, "reading the reply", r);
		}
	}
	brokerd_msg_unref(reply);
	return errno_to_exit(k);
}

int cmd_call(brokerd_bus *bus, int argc, char **argv)
{
	brokerd_msg *reply = NULL;
	const char *arg = argc > 3 ? argv[3] : "";
	const void *body;
	size_t size;
	int k;

	/* busctl's form has an object path where the bytes form has a member */
	if (argc >= 3 && argv[2][0] == '/') {
		if (argc < 5)
			return fail(NULL,
				    "usage: call SERVICE OBJECT INTERFACE METHOD [SIGNATURE [ARGUMENT...]]",
				    -EINVAL);
		return call_typed(bus, argc, argv);
	}
	if (argc < 3 || argc > 4)
		return fail(NULL, "usage: call NAME MEMBER [ARG]", -EINVAL);
	k = brokerd_bus_call(bus, argv[1], argv[2], arg, strlen(arg), arg_timeout_usec, &reply);
	if (k < 0 && k != -EREMOTEIO) {
		char what[300];

		snprintf(what, sizeof(what), "call %s %s", argv[1], argv[2]);
		return fail(bus, what, k);
	}
	(void)brokerd_msg_get_body(reply, &body, &size);
	if (arg_json) {
		struct json j;

		out_begin(&j);
		print_msg_json(&j, reply);
		out_end(&j);
	} else if (k == -EREMOTEIO) {
		fprintf(stderr, "brokerctl: %s: %.*s\n", brokerd_msg_get_error_name(reply), (int)size,
			(const char *)body);
	} else {
		fwrite(body, 1, size, stdout);
		if (size && ((const char *)body)[size - 1] != '\n')
			fputc('\n', stdout);
	}
	brokerd_msg_unref(reply);
	return errno_to_exit(k);
}

/*
 * Signals go out on the name's signal channel, which only its owner may
 * use: brokerctl takes the name for the moment. Returns 0 or an exit code.
 */
static int take_name(brokerd_bus *bus, const char *name)
{
	int k = brokerd_bus_request_name(bus, name, BROKERD_NAME_DO_NOT_QUEUE);

	if (k == -EEXIST) {
		fprintf(stderr,
			"brokerctl: %s is owned by another connection: only its owner can emit its signals\n",
			name);
		return EXIT_DENIED;
	}
	return k < 0 ? fail(bus, "RequestName", k) : 0;
}

/* emit OBJECT INTERFACE SIGNAL [SIGNATURE [ARGUMENT...]] on --name's channel */
static int emit_typed(brokerd_bus *bus, int argc, char **argv, brokerd_msg **m)
{
	int k, r;

	if (!arg_name) {
		fprintf(stderr, "brokerctl: emit OBJECT ... needs --name NAME: the name whose signal "
				"channel carries it\n");
		return EXIT_USAGE;
	}
	k = brokerd_msg_new_signal(bus, m, arg_name, argv[1], argv[2], argv[3]);
	if (k < 0) {
		fprintf(stderr, "brokerctl: invalid name, object path, interface or signal: %s %s %s.%s\n",
			arg_name, argv[1], argv[2], argv[3]);
		return EXIT_USAGE;
	}
	r = append_args(*m, argc - 4, argv + 4);
	return r ? r : take_name(bus, arg_name);
}

int cmd_emit(brokerd_bus *bus, int argc, char **argv)
{
	const char *arg = argc > 3 ? argv[3] : "";
	brokerd_msg *m = NULL;
	const char *name;
	int k;

	if (argc >= 2 && argv[1][0] == '/') {
		if (argc < 4)
			return fail(NULL, "usage: emit OBJECT INTERFACE SIGNAL [SIGNATURE [ARGUMENT...]]",
				    -EINVAL);
		k = emit_typed(bus, argc, argv, &m);
		if (k) {
			brokerd_msg_unref(m);
			return k;
		}
		name = arg_name;
		k = brokerd_bus_send(bus, m);
		brokerd_msg_unref(m);
	} else {
		if (argc < 3 || argc > 4)
			return fail(NULL, "usage: emit NAME MEMBER [ARG]", -EINVAL);
		k = take_name(bus, argv[1]);
		if (k)
			return k;
		name = argv[1];
		k = brokerd_bus_emit_signal(bus, argv[1], argv[2], arg, strlen(arg));
	}
	(void)brokerd_bus_release_name(bus, name);
	if (k < 0)
		return fail(bus, "emit", k);
	if (arg_json) {
		struct json j;

		out_begin(&j);
		json_key(&j, "emitted");
		json_bool(&j, true);
		out_end(&j);
	}
	return EXIT_OK;
}

/* --- monitor ------------------------------------------------------------- */

/* monitor's match rules: a message is shown if it matches one (or there are none) */
static struct dbus_match_rule *monitor_rules;
static int n_monitor_rules;

static bool monitor_wants(brokerd_msg *m, const char *name, unsigned int kind)
{
	struct dbus_match_message mm;

	if (n_monitor_rules == 0)
		return true;
	/* only a signal channel says who sent: a call channel's name is the destination */
	bus_match_message_init(&mm, m, kind == CTRL_CHANNEL_SIGNAL ? name : NULL);
	for (int i = 0; i < n_monitor_rules; i++)
		if (dbus_match_rule_matches(&monitor_rules[i], &mm))
			return true;
	return false;
}

/* " (kind kind ...)": what the fds a monitored message carried are, as fstat() sees them here. */
static const char *monitor_fds_text(brokerd_msg *m)
{
	static char text[256];
	size_t n = 0;

	text[0] = 0;
	for (unsigned int i = 0; i < m->n_fds && n + 16 < sizeof(text); i++) {
		struct stat st;
		const char *kind = "?";

		if (fstat(m->fds[i], &st) == 0)
			kind = S_ISREG(st.st_mode)    ? "file"
			       : S_ISFIFO(st.st_mode) ? "pipe"
			       : S_ISSOCK(st.st_mode) ? "socket"
			       : S_ISCHR(st.st_mode)  ? "chardev"
			       : S_ISDIR(st.st_mode)  ? "dir"
						      : "other";
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s", i ? "," : " (", kind);
	}
	if (n)
		(void)snprintf(text + n, sizeof(text) - n, ")");
	return text;
}

static void on_monitor(brokerd_bus *bus, const char *name, unsigned int kind, brokerd_msg *m, int error,
		       void *userdata)
{
	static const char *const kinds[] = { "?", "inbox", "call", "signal", "dbus" };
	const char *k = kinds[kind <= 4 ? kind : 0];

	if (!m)
		return;
	/* the monitor fell a ring behind and the kernel skipped ahead: say so, whatever the filter */
	if (m->lost && !arg_json) {
		monitor_lost += m->lost;
		printf("%-6s %-30s lost=%u total_lost=%" PRIu64 "\n", k, name, m->lost, monitor_lost);
		fflush(stdout);
	} else if (m->lost) {
		struct json j;

		monitor_lost += m->lost;
		out_begin(&j);
		json_member_string(&j, "channel", k);
		json_member_string(&j, "name", name);
		json_member_uint(&j, "lost", m->lost);
		json_member_uint(&j, "total_lost", monitor_lost);
		out_end(&j);
	}
	if (!monitor_wants(m, name, kind))
		return;
	if (arg_json) {
		struct json j;

		out_begin(&j);
		json_member_string(&j, "channel", k);
		json_member_string(&j, "name", name);
		print_msg_json(&j, m);
		out_end(&j);
	} else {
		struct brokerd_creds cr = { 0 };
		const void *body;
		size_t size;

		(void)brokerd_msg_get_creds(m, &cr);
		(void)brokerd_msg_get_body(m, &body, &size);
		printf("%-6s %-30s type=%d sender=%s uid=%u pid=%d path=%s interface=%s member=%s "
		       "destination=%s serial=%" PRIu64 " reply_serial=%u signature=%s fds=%u%s body=%.*s\n",
		       k, name, brokerd_msg_get_type(m), brokerd_msg_get_sender(m), (unsigned int)cr.uid,
		       (int)cr.pid, brokerd_msg_get_path(m), brokerd_msg_get_interface(m),
		       brokerd_msg_get_member(m), brokerd_msg_get_destination(m), brokerd_msg_get_serial(m),
		       (unsigned int)m->reply_serial, brokerd_msg_get_signature(m), m->n_fds,
		       monitor_fds_text(m), (int)(size > 200 ? 200 : size), (const char *)body);
		fflush(stdout);
	}
	if (arg_count > 0 && ++monitor_seen >= arg_count)
		(void)brokerd_bus_exit(bus, 0);
}

static void on_signal(int sig)
{
	quit = 1;
}

int cmd_monitor(brokerd_bus *bus, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const char *name = argc >= 2 && !strchr(argv[1], '=') ? argv[1] : NULL;
	int k;

	if (name && !ctrl_name_is_valid_wellknown(name))
		return fail(NULL, "invalid name", -EINVAL);
	/* the rest are match rules (they have a '=', a name never does) */
	monitor_rules = calloc((size_t)argc, sizeof(*monitor_rules));
	if (!monitor_rules)
		return fail(NULL, "monitor", -ENOMEM);
	for (int i = name ? 2 : 1; i < argc; i++) {
		if (dbus_match_rule_parse(&monitor_rules[n_monitor_rules], argv[i]) < 0) {
			fprintf(stderr, "brokerctl: invalid match rule: %s\n", argv[i]);
			return fail(NULL, "usage: monitor [NAME] [MATCH...]", -EINVAL);
		}
		n_monitor_rules++;
	}
	k = bus_monitor_start(bus, NULL, name, on_monitor, NULL);
	if (k < 0)
		return fail(bus, "Monitor", k);
	/* brokerd announced k channels: if it could mint no monitor capability
	 * for any of them (a kernel without IOIPC_SUB_MONITOR), say so */
	for (int i = 0; k > 0 && !bus->monitors && i < 20; i++) {
		(void)brokerd_bus_process(bus);
		if (!bus->monitors)
			(void)brokerd_bus_wait(bus, 50000);
	}
	if (k > 0 && !bus->monitors) {
		fprintf(stderr,
			"brokerctl: brokerd announced %d channels but handed out no monitor "
			"capability: the kernel lacks the monitor extension?\n",
			k);
		return EXIT_UNSUPPORTED;
	}
	if (!arg_json) {
		printf("Monitoring %s (Ctrl-C to stop)\n", name ? name : "the bus");
		fflush(stdout);
	}
	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigaction(SIGTERM, &sa, NULL);
	while (!quit) {
		k = brokerd_bus_process(bus);
		if (k < 0)
			return fail(bus, "monitor", k);
		if (arg_count > 0 && monitor_seen >= arg_count)
			break;
		if (!brokerd_bus_is_connected(bus)) {
			fprintf(stderr, "brokerctl: brokerd went away\n");
			return EXIT_CONNECT;
		}
		if (k == 0)
			(void)brokerd_bus_wait(bus, 500000);
	}
	return EXIT_OK;
}
