/* SPDX-License-Identifier: MIT */
/*
 * brokerctl - inspect and poke a running brokerd, like busctl: list names
 * and owners, show a name's owner and credentials, call, emit, monitor,
 * explain a policy decision, show quota use. Human output by default,
 * --json for scripts; the exit code says what happened (see usage()).
 *
 * Bus introspection requests go through the library's internal
 * bus_ctrl_request() and bus_ctrl_call(); calls, signals and monitoring
 * through the public API.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/bus-control.h"
#include "client/bus-internal.h"
#include "client/bus-introspect.h"
#include "client/json.h"
#include "util/macro.h"

enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,		/* anything else */
	EXIT_USAGE = 2,		/* bad command line */
	EXIT_DENIED = 3,	/* access denied, or policy check says deny */
	EXIT_NO_OWNER = 4,	/* name has no owner / unknown */
	EXIT_TIMEOUT = 5,	/* call timed out */
	EXIT_REMOTE = 6,	/* the service replied with an error */
	EXIT_CONNECT = 7,	/* cannot reach brokerd */
	EXIT_QUOTA = 8,		/* a quota refused the request */
	EXIT_UNSUPPORTED = 9,	/* brokerd or the kernel cannot do it */
};

static bool arg_json;
static const char *arg_address;
static uint64_t arg_timeout_usec = 25ULL * 1000000ULL;
static long arg_count = -1;
static uint32_t arg_page_size;
static volatile sig_atomic_t quit;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: brokerctl [OPTIONS] COMMAND ...\n"
		"\n"
		"Commands:\n"
		"  info                          this connection and what brokerd offers\n"
		"  list                          names, their owners and queued owners\n"
		"  status NAME                   owner and credentials of a name\n"
		"  call NAME MEMBER [ARG]        call a method, print the reply\n"
		"  emit NAME MEMBER [ARG]        emit a signal (takes the name meanwhile)\n"
		"  monitor [NAME]                print bus traffic (privileged)\n"
		"  peers                         connections with credentials and names\n"
		"  policy check USER NAME ACTION explain a decision (own, send, receive)\n"
		"  quota [UID|all]               quota use per uid\n"
		"\n"
		"Options:\n"
		"  -j, --json                    JSON output\n"
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

static int errno_to_exit(int k)
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

/* --json output that is one object: out_begin(), its members, out_end(). */
static void out_begin(struct json *j)
{
	json_init(j, stdout);
	json_begin_object(j);
}

static void out_end(struct json *j)
{
	json_end_object(j);
	json_finish(j);
}

/* A listing: a JSON array of what follows, or a table under this header. */
__attribute__((format(printf, 2, 3)))
static void listing_begin(struct json *j, const char *header, ...)
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

static void listing_end(struct json *j)
{
	if (arg_json) {
		json_end_array(j);
		json_finish(j);
	}
}

static int fail(brokerd_bus *bus, const char *what, int k)
{
	if (arg_json) {
		struct json j;

		out_begin(&j);
		json_member_string(&j, "error",
				   bus && bus->error_name[0] ? bus->error_name : strerror(-k));
		json_member_string(&j, "message",
				   bus && bus->error_message[0] ? bus->error_message : what);
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
	brokerd_bus_set_reconnect(*ret, 0);
	return 0;
}

/* Reads an "as" reply into a NULL-terminated array pointing into r. */
static int read_strv(struct ctrl_reply *r, const char ***ret)
{
	struct ctrl_reader rd;
	const char **v;
	uint32_t n;
	int k;

	ctrl_reader_init(&rd, &r->msg);
	k = ctrl_read_array(&rd, &n);
	if (k < 0)
		return k;
	v = calloc((size_t)n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if ((k = ctrl_read_string(&rd, &v[i], NULL)) < 0) {
			free(v);
			return k;
		}
	*ret = v;
	return (int)n;
}

/* --- list ------------------------------------------------------------------------- */

static int cmd_list(brokerd_bus *bus, int argc, char **argv)
{
	char **v = NULL;
	struct json j;
	int n;

	if (argc != 1)
		return fail(NULL, "list takes no arguments", -EINVAL);
	/* every page: a busy bus has more names than one reply holds */
	n = bus_list_names(bus, 0, arg_page_size, &v);
	if (n < 0)
		return fail(bus, "ListNames", n);
	listing_begin(&j, "%-40s %-12s %s\n", "NAME", "OWNER", "QUEUED");
	for (int i = 0; i < n; i++) {
		struct ctrl_reply o = { 0 }, q = { 0 };
		struct ctrl_reader rd;
		_cleanup_free_ const char **queued = NULL;
		const char *owner = "";
		int nq = 0;

		if (v[i][0] == ':') {
			owner = v[i];
		} else {
			if (bus_ctrl_request(bus, CTRL_OP_GET_NAME_OWNER, v[i], 0, &o) >= 0) {
				ctrl_reader_init(&rd, &o.msg);
				if (ctrl_read_string(&rd, &owner, NULL) < 0)
					owner = "";
			}
			if (bus_ctrl_request(bus, CTRL_OP_LIST_QUEUED_OWNERS, v[i], 0, &q) >= 0)
				nq = read_strv(&q, &queued);
		}
		if (arg_json) {
			json_begin_object(&j);
			json_member_string(&j, "name", v[i]);
			json_member_string(&j, "owner", owner);
			json_key(&j, "queued");
			json_begin_array(&j);
			/* the queue lists the primary owner first */
			for (int x = 1; x < nq; x++)
				json_string(&j, queued[x]);
			json_end_array(&j);
			json_end_object(&j);
		} else {
			printf("%-40s %-12s", v[i], owner[0] ? owner : "-");
			for (int x = 1; x < nq; x++)
				printf("%s%s", x > 1 ? "," : " ", queued[x]);
			printf("\n");
		}
		ctrl_reply_done(&o);
		ctrl_reply_done(&q);
	}
	listing_end(&j);
	strv_free(v);
	return EXIT_OK;
}

/* --- status ----------------------------------------------------------------------- */

/* A member brokerd may not have reported (k < 0): null then. */
static void json_member_id(struct json *j, const char *key, int k, uint32_t v)
{
	json_key(j, key);
	if (k >= 0)
		json_uint(j, v);
	else
		json_null(j);
}

static void brokerd_credentials_freep(brokerd_credentials **c)
{
	brokerd_credentials_free(*c);
}

static int cmd_status(brokerd_bus *bus, int argc, char **argv)
{
	_cleanup_(brokerd_credentials_freep) brokerd_credentials *c = NULL;
	struct ctrl_reply o = { 0 };
	struct ctrl_reader rd;
	const char *owner = NULL, *label = "";
	const gid_t *gids = NULL;
	pid_t pid = 0;
	uid_t uid = 0;
	gid_t gid = 0;
	int k, kpid, kuid, kgid, ngids;
	struct json j;

	if (argc != 2)
		return fail(NULL, "usage: status NAME", -EINVAL);
	if (!ctrl_name_is_valid_wellknown(argv[1]) && !ctrl_name_is_valid_unique(argv[1]))
		return fail(NULL, "invalid name", -EINVAL);
	k = bus_ctrl_request(bus, CTRL_OP_GET_NAME_OWNER, argv[1], 0, &o);
	if (k < 0)
		return fail(bus, argv[1], k);
	ctrl_reader_init(&rd, &o.msg);
	if (ctrl_read_string(&rd, &owner, NULL) < 0)
		owner = "";
	k = brokerd_bus_get_credentials(bus, argv[1], &c);
	if (k < 0) {
		ctrl_reply_done(&o);
		return fail(bus, "GetCredentials", k);
	}
	kpid = brokerd_credentials_get_pid(c, &pid);
	kuid = brokerd_credentials_get_uid(c, &uid);
	kgid = brokerd_credentials_get_gid(c, &gid);
	ngids = brokerd_credentials_get_groups(c, &gids);
	(void)brokerd_credentials_get_label(c, &label);	/* stays "" without one */
	if (arg_json) {
		out_begin(&j);
		json_member_string(&j, "name", argv[1]);
		json_member_string(&j, "owner", owner);
		json_member_id(&j, "pid", kpid, (uint32_t)pid);
		json_member_id(&j, "uid", kuid, uid);
		json_member_id(&j, "gid", kgid, gid);
		json_key(&j, "gids");
		json_begin_array(&j);
		for (int i = 0; i < ngids; i++)
			json_uint(&j, gids[i]);
		json_end_array(&j);
		json_member_string(&j, "label", label);
		json_key(&j, "pidfd");
		json_bool(&j, brokerd_credentials_get_pidfd(c) >= 0);
		out_end(&j);
	} else {
		struct passwd *pw = kuid >= 0 ? getpwuid(uid) : NULL;

		printf("Name:   %s\n", argv[1]);
		printf("Owner:  %s\n", owner[0] ? owner : "-");
		if (kpid >= 0)
			printf("PID:    %" PRIu32 "\n", (uint32_t)pid);
		if (kuid >= 0)
			printf("UID:    %" PRIu32 "%s%s%s\n", (uint32_t)uid, pw ? " (" : "",
			       pw ? pw->pw_name : "", pw ? ")" : "");
		if (kgid >= 0)
			printf("GID:    %" PRIu32 "\n", (uint32_t)gid);
		if (ngids >= 0) {
			printf("Groups:");
			for (int i = 0; i < ngids; i++)
				printf(" %" PRIu32, (uint32_t)gids[i]);
			printf("\n");
		}
		if (label[0])
			printf("Label:  %s\n", label);
	}
	ctrl_reply_done(&o);
	return EXIT_OK;
}

/* --- call / emit -------------------------------------------------------------------- */

static void print_msg_json(struct json *j, brokerd_msg *m)
{
	struct brokerd_creds cr = { 0 };
	const void *body;
	size_t size;
	static const char *const types[] = { "?", "call", "reply", "error", "signal" };
	int t = brokerd_msg_get_type(m);

	brokerd_msg_get_body(m, &body, &size);
	json_member_string(j, "type", types[t >= 1 && t <= 4 ? t : 0]);
	json_member_string(j, "sender", brokerd_msg_get_sender(m));
	if (brokerd_msg_get_creds(m, &cr) >= 0) {
		json_member_uint(j, "pid", (uint64_t)cr.pid);
		json_member_uint(j, "uid", cr.uid);
		json_member_uint(j, "gid", cr.gid);
	}
	json_member_string(j, t == BROKERD_MSG_ERROR ? "error" : "member", brokerd_msg_get_member(m));
	json_key(j, "body");
	json_string_len(j, body, size);
}

static int cmd_call(brokerd_bus *bus, int argc, char **argv)
{
	brokerd_msg *reply = NULL;
	const char *arg = argc > 3 ? argv[3] : "";
	const void *body;
	size_t size;
	int k;

	if (argc < 3 || argc > 4)
		return fail(NULL, "usage: call NAME MEMBER [ARG]", -EINVAL);
	k = brokerd_bus_call(bus, argv[1], argv[2], arg, strlen(arg), arg_timeout_usec, &reply);
	if (k < 0 && k != -EREMOTEIO) {
		char what[300];

		snprintf(what, sizeof(what), "call %s %s", argv[1], argv[2]);
		return fail(bus, what, k);
	}
	brokerd_msg_get_body(reply, &body, &size);
	if (arg_json) {
		struct json j;

		out_begin(&j);
		print_msg_json(&j, reply);
		out_end(&j);
	} else if (k == -EREMOTEIO) {
		fprintf(stderr, "brokerctl: %s: %.*s\n", brokerd_msg_get_error_name(reply),
			(int)size, (const char *)body);
	} else {
		fwrite(body, 1, size, stdout);
		if (size && ((const char *)body)[size - 1] != '\n')
			fputc('\n', stdout);
	}
	brokerd_msg_unref(reply);
	return errno_to_exit(k);
}

static int cmd_emit(brokerd_bus *bus, int argc, char **argv)
{
	const char *arg = argc > 3 ? argv[3] : "";
	int k;

	if (argc < 3 || argc > 4)
		return fail(NULL, "usage: emit NAME MEMBER [ARG]", -EINVAL);
	/* signals go out on the name's signal channel, which only its owner may use */
	k = brokerd_bus_request_name(bus, argv[1], BROKERD_NAME_DO_NOT_QUEUE);
	if (k == -EEXIST) {
		fprintf(stderr, "brokerctl: %s is owned by another connection: only its owner can emit its signals\n",
			argv[1]);
		return EXIT_DENIED;
	}
	if (k < 0)
		return fail(bus, "RequestName", k);
	k = brokerd_bus_emit_signal(bus, argv[1], argv[2], arg, strlen(arg));
	brokerd_bus_release_name(bus, argv[1]);
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

/* --- monitor ----------------------------------------------------------------------- */

static long monitor_seen;

static void on_monitor(brokerd_bus *bus, const char *name, unsigned int kind, brokerd_msg *m,
		       int error, void *userdata)
{
	static const char *const kinds[] = { "?", "inbox", "call", "signal" };
	const char *k = kinds[kind <= 3 ? kind : 0];

	if (!m)
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

		brokerd_msg_get_creds(m, &cr);
		brokerd_msg_get_body(m, &body, &size);
		printf("%-6s %-30s type=%d sender=%s uid=%u pid=%d member=%s serial=%" PRIu64
		       " body=%.*s\n", k, name, brokerd_msg_get_type(m), brokerd_msg_get_sender(m),
		       (unsigned int)cr.uid, (int)cr.pid, brokerd_msg_get_member(m),
		       brokerd_msg_get_serial(m), (int)(size > 200 ? 200 : size), (const char *)body);
		fflush(stdout);
	}
	if (arg_count > 0 && ++monitor_seen >= arg_count)
		brokerd_bus_exit(bus, 0);
}

static void on_signal(int sig)
{
	quit = 1;
}

static int cmd_monitor(brokerd_bus *bus, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	int k;

	if (argc > 2)
		return fail(NULL, "usage: monitor [NAME]", -EINVAL);
	if (argc == 2 && !ctrl_name_is_valid_wellknown(argv[1]))
		return fail(NULL, "invalid name", -EINVAL);
	k = bus_monitor_start(bus, NULL, argc == 2 ? argv[1] : NULL, on_monitor, NULL);
	if (k < 0)
		return fail(bus, "Monitor", k);
	/* brokerd announced k channels: if it could mint no monitor capability
	 * for any of them (a kernel without IOIPC_SUB_MONITOR), say so */
	for (int i = 0; k > 0 && !bus->monitors && i < 20; i++) {
		brokerd_bus_process(bus);
		if (!bus->monitors)
			brokerd_bus_wait(bus, 50000);
	}
	if (k > 0 && !bus->monitors) {
		fprintf(stderr, "brokerctl: brokerd announced %d channels but handed out no monitor "
			"capability: the kernel lacks the monitor extension?\n", k);
		return EXIT_UNSUPPORTED;
	}
	if (!arg_json) {
		printf("Monitoring %s (Ctrl-C to stop)\n", argc == 2 ? argv[1] : "the bus");
		fflush(stdout);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
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
			brokerd_bus_wait(bus, 500000);
	}
	return EXIT_OK;
}

/* --- peers ------------------------------------------------------------------------- */

/* One page of LIST_PEERS_PAGE: print each peer. */
static int print_peers(struct ctrl_reader *rd, uint32_t n, void *userdata)
{
	struct json *j = userdata;
	int k = 0;

	for (uint32_t i = 0; k >= 0 && i < n; i++) {
		const char *unique = NULL, *label = NULL;
		uint64_t id;
		uint32_t pid, uid, gid, nn, caps;
		const char *names[32];

		if ((k = ctrl_read_string(rd, &unique, NULL)) < 0 || (k = ctrl_read_u64(rd, &id)) < 0 ||
		    (k = ctrl_read_u32(rd, &pid)) < 0 || (k = ctrl_read_u32(rd, &uid)) < 0 ||
		    (k = ctrl_read_u32(rd, &gid)) < 0 || (k = ctrl_read_string(rd, &label, NULL)) < 0 ||
		    (k = ctrl_read_array(rd, &nn)) < 0)
			break;
		for (uint32_t x = 0; k >= 0 && x < nn; x++) {
			const char *s;

			k = ctrl_read_string(rd, &s, NULL);
			if (x < ELEMENTSOF(names))
				names[x] = s;
		}
		if (k < 0 || (k = ctrl_read_u32(rd, &caps)) < 0)
			break;
		if (nn > ELEMENTSOF(names))
			nn = ELEMENTSOF(names);
		if (arg_json) {
			json_begin_object(j);
			json_member_string(j, "peer", unique);
			json_member_uint(j, "id", id);
			json_member_uint(j, "pid", pid);
			json_member_uint(j, "uid", uid);
			json_member_uint(j, "gid", gid);
			json_member_string(j, "label", label);
			json_key(j, "names");
			json_begin_array(j);
			for (uint32_t x = 0; x < nn; x++)
				json_string(j, names[x]);
			json_end_array(j);
			json_member_uint(j, "caps", caps);
			json_end_object(j);
		} else {
			printf("%-12s %8" PRIu32 " %6" PRIu32 " %6" PRIu32 " %5" PRIu32 " ", unique, pid,
			       uid, gid, caps);
			for (uint32_t x = 0; x < nn; x++)
				printf("%s%s", x ? "," : "", names[x]);
			printf("\n");
		}
	}
	return k;
}

static int cmd_peers(brokerd_bus *bus, int argc, char **argv)
{
	struct json j;
	int k;

	if (argc != 1)
		return fail(NULL, "peers takes no arguments", -EINVAL);
	listing_begin(&j, "%-12s %8s %6s %6s %5s %s\n", "PEER", "PID", "UID", "GID", "CAPS", "NAMES");
	k = bus_list(bus, CTRL_OP_LIST_PEERS_PAGE, 0, arg_page_size, print_peers, &j);
	listing_end(&j);
	return k < 0 ? fail(bus, "ListPeers", k) : EXIT_OK;
}

/* --- policy check ------------------------------------------------------------------- */

static int parse_uid(const char *s, uint32_t *ret)
{
	struct passwd *pw;
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s && !*end && errno == 0 && v < UINT32_MAX) {
		*ret = (uint32_t)v;
		return 0;
	}
	pw = getpwnam(s);
	if (!pw)
		return -ENOENT;
	*ret = pw->pw_uid;
	return 0;
}

static int cmd_policy(brokerd_bus *bus, int argc, char **argv)
{
	struct ctrl_writer w;
	struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	const char *why = "";
	uint32_t uid, decision = 0;
	int k;

	if (argc != 5 || strcmp(argv[1], "check") != 0)
		return fail(NULL, "usage: policy check USER NAME ACTION", -EINVAL);
	if (parse_uid(argv[2], &uid) < 0) {
		fprintf(stderr, "brokerctl: unknown user %s\n", argv[2]);
		return EXIT_USAGE;
	}
	if (strcmp(argv[4], "own") && strcmp(argv[4], "send") && strcmp(argv[4], "receive"))
		return fail(NULL, "ACTION is own, send or receive", -EINVAL);
	k = ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_POLICY_CHECK, 0);
	if (k < 0)
		return fail(NULL, "PolicyCheck", k);
	ctrl_write_u32(&w, uid);
	ctrl_write_string(&w, argv[3]);
	ctrl_write_string(&w, argv[4]);
	k = bus_ctrl_call(bus, &w, &r);
	ctrl_writer_deinit(&w);
	if (k < 0)
		return fail(bus, "PolicyCheck", k);
	ctrl_reader_init(&rd, &r.msg);
	if (ctrl_read_u32(&rd, &decision) < 0 || ctrl_read_string(&rd, &why, NULL) < 0) {
		ctrl_reply_done(&r);
		return fail(NULL, "PolicyCheck reply", -EPROTO);
	}
	if (arg_json) {
		struct json j;

		out_begin(&j);
		json_member_uint(&j, "uid", uid);
		json_member_string(&j, "name", argv[3]);
		json_member_string(&j, "action", argv[4]);
		json_member_string(&j, "decision", decision == CTRL_POLICY_ALLOW ? "allow" : "deny");
		json_member_string(&j, "rule", why);
		out_end(&j);
	} else {
		printf("%s: uid %" PRIu32 " %s %s (%s)\n",
		       decision == CTRL_POLICY_ALLOW ? "allow" : "deny", uid, argv[4], argv[3], why);
	}
	ctrl_reply_done(&r);
	return decision == CTRL_POLICY_ALLOW ? EXIT_OK : EXIT_DENIED;
}

/* --- quota --------------------------------------------------------------------------- */

static int cmd_quota(brokerd_bus *bus, int argc, char **argv)
{
	struct ctrl_reply r = { 0 };
	struct ctrl_reader rd;
	struct json j;
	uint32_t uid = (uint32_t)getuid(), n = 0;
	int k;

	if (argc > 2)
		return fail(NULL, "usage: quota [UID|USER|all]", -EINVAL);
	if (argc == 2) {
		if (strcmp(argv[1], "all") == 0)
			uid = CTRL_QUOTA_ALL_UIDS;
		else if (parse_uid(argv[1], &uid) < 0)
			return fail(NULL, "unknown user", -EINVAL);
	}
	k = bus_ctrl_request(bus, CTRL_OP_QUOTA, NULL, uid, &r);
	if (k < 0)
		return fail(bus, "Quota", k);
	ctrl_reader_init(&rd, &r.msg);
	k = ctrl_read_array(&rd, &n);
	listing_begin(&j, "%8s %-14s %12s %12s\n", "UID", "QUOTA", "USED", "LIMIT");
	for (uint32_t i = 0; k >= 0 && i < n; i++) {
		uint32_t u, nq = 0;

		if ((k = ctrl_read_u32(&rd, &u)) < 0 || (k = ctrl_read_array(&rd, &nq)) < 0)
			break;
		if (arg_json) {
			json_begin_object(&j);
			json_member_uint(&j, "uid", u);
			json_key(&j, "quotas");
			json_begin_object(&j);
		}
		for (uint32_t x = 0; k >= 0 && x < nq; x++) {
			const char *name;
			uint64_t used, limit;

			if ((k = ctrl_read_string(&rd, &name, NULL)) < 0 ||
			    (k = ctrl_read_u64(&rd, &used)) < 0 || (k = ctrl_read_u64(&rd, &limit)) < 0)
				break;
			if (arg_json) {
				json_key(&j, name);
				json_begin_object(&j);
				json_member_uint(&j, "used", used);
				json_member_uint(&j, "limit", limit);
				json_end_object(&j);
			} else {
				printf("%8" PRIu32 " %-14s %12" PRIu64 " %12" PRIu64 "\n", u, name, used,
				       limit);
			}
		}
		if (arg_json) {
			json_end_object(&j);
			json_end_object(&j);
		}
	}
	listing_end(&j);
	ctrl_reply_done(&r);
	return k < 0 ? fail(NULL, "Quota reply", k) : EXIT_OK;
}

/* --- info ------------------------------------------------------------------------------ */

static int cmd_info(brokerd_bus *bus, int argc, char **argv)
{
	bool channels = bus->features & CTRL_FEATURE_CHANNELS;
	bool badges = bus->features & CTRL_FEATURE_BADGES;

	if (argc != 1)
		return fail(NULL, "info takes no arguments", -EINVAL);
	if (arg_json) {
		struct json j;

		out_begin(&j);
		json_member_string(&j, "address", bus->path);
		json_member_string(&j, "unique_name", bus->unique_name);
		json_member_uint(&j, "protocol", CTRL_VERSION);
		json_key(&j, "channels");
		json_bool(&j, channels);
		json_key(&j, "badges");
		json_bool(&j, badges);
		out_end(&j);
	} else {
		printf("Address:     %s\n", bus->path);
		printf("Unique name: %s\n", bus->unique_name);
		printf("Protocol:    %u\n", CTRL_VERSION);
		printf("Channels:    %s\n", channels ? "yes" : "no (control plane only)");
		printf("Badges:      %s\n", badges ? "yes" : "no");
	}
	return EXIT_OK;
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
};

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "address", required_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'n' },
		{ "page-size", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	brokerd_bus *bus = NULL;
	int c, k;

	while ((c = getopt_long(argc, argv, "+ja:t:n:p:h", options, NULL)) >= 0) {
		char *end;

		switch (c) {
		case 'j':
			arg_json = true;
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
