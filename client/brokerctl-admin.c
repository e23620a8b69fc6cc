/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-admin.c - brokerctl's administrative views: policy check
 * (explain a decision), quota use, info (this connection, brokerd's
 * features).
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/brokerctl.h"
#include "client/bus-control.h"

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

/* --- policy check -------------------------------------------------------- */

int cmd_policy(brokerd_bus *bus, int argc, char **argv)
{
	struct ctrl_writer w;
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
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
	if (ctrl_read_u32(&rd, &decision) < 0 || ctrl_read_string(&rd, &why, NULL) < 0)
		return fail(NULL, "PolicyCheck reply", -EPROTO);
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
		printf("%s: uid %" PRIu32 " %s %s (%s)\n", decision == CTRL_POLICY_ALLOW ? "allow" : "deny",
		       uid, argv[4], argv[3], why);
	}
	return decision == CTRL_POLICY_ALLOW ? EXIT_OK : EXIT_DENIED;
}

/* --- quota --------------------------------------------------------------- */

int cmd_quota(brokerd_bus *bus, int argc, char **argv)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
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
	return k < 0 ? fail(NULL, "Quota reply", k) : EXIT_OK;
}

/* --- info ---------------------------------------------------------------- */

int cmd_info(brokerd_bus *bus, int argc, char **argv)
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
