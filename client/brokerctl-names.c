/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-names.c - brokerctl's views of who is on the bus: list (names,
 * owners, queues), status (a name's owner and credentials), peers.
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/brokerctl.h"
#include "client/bus-control.h"
#include "client/bus-introspect.h"

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

/* --- list ---------------------------------------------------------------- */

int cmd_list(brokerd_bus *bus, int argc, char **argv)
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
		_cleanup_ctrl_reply_ struct ctrl_reply o = { 0 }, q = { 0 };
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
	}
	listing_end(&j);
	strv_free(v);
	return EXIT_OK;
}

/* --- status -------------------------------------------------------------- */

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

int cmd_status(brokerd_bus *bus, int argc, char **argv)
{
	_cleanup_(brokerd_credentials_freep) brokerd_credentials *c = NULL;
	_cleanup_ctrl_reply_ struct ctrl_reply o = { 0 };
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
	if (k < 0)
		return fail(bus, "GetCredentials", k);
	kpid = brokerd_credentials_get_pid(c, &pid);
	kuid = brokerd_credentials_get_uid(c, &uid);
	kgid = brokerd_credentials_get_gid(c, &gid);
	ngids = brokerd_credentials_get_groups(c, &gids);
	(void)brokerd_credentials_get_label(c, &label); /* stays "" without one */
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
	return EXIT_OK;
}

/* --- peers --------------------------------------------------------------- */

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
			printf("%-12s %8" PRIu32 " %6" PRIu32 " %6" PRIu32 " %5" PRIu32 " ", unique, pid, uid,
			       gid, caps);
			for (uint32_t x = 0; x < nn; x++)
				printf("%s%s", x ? "," : "", names[x]);
			printf("\n");
		}
	}
	return k;
}

int cmd_peers(brokerd_bus *bus, int argc, char **argv)
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
