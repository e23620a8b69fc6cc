/* SPDX-License-Identifier: MIT */
/*
 * bench-ctrl - bus-bench's control-plane (ctrl) and memory per
 * connection (mem) tables.
 */
#include "tests/bench/bus-bench.h"

/* ---- Control plane -------------------------------------------------------------- */

/* brokerd's operation / the D-Bus one it is compared with */
static const char *const op_label[N_OPS][2] = {
	[OP_CONNECT] = { "connect+HELLO", "connect+Hello" },
	[OP_NAME] = { "REQUEST_NAME", "RequestName" },
	[OP_SUBSCRIBE] = { "SUBSCRIBE", "AddMatch" },
	[OP_REACH] = { "OPEN_CALL", "GetNameOwner" },
};

/* No signal is emitted during the ctrl table: the handlers only subscribe. */
static int noop_brokerd(brokerd_msg *m, void *userdata)
{
	return 0;
}

static int noop_sdbus(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	return 0;
}

/* One timed operation number i; the undo after it is not timed. */
static int ctrl_once(enum bus_kind k, enum bench_op op, brokerd_bus *bb, sd_bus *sb, int i, uint64_t *ns)
{
	char name[64];
	uint64_t t0;
	int r;

	snprintf(name, sizeof(name), "org.brokerd.bench.N%d", i);
	t0 = now_ns();
	if (k == BUS_BROKERD) {
		brokerd_bus *nb = NULL;
		brokerd_slot *slot = NULL;

		switch (op) {
		case OP_CONNECT:
			r = brokerd_bus_open_system(&nb);
			*ns = now_ns() - t0;
			brokerd_bus_close(nb);
			return r;
		case OP_NAME:
			r = brokerd_bus_request_name(bb, name, BROKERD_NAME_DO_NOT_QUEUE);
			*ns = now_ns() - t0;
			if (r >= 0)
				r = brokerd_bus_release_name(bb, name);
			return r;
		case OP_SUBSCRIBE:
			r = brokerd_bus_subscribe(bb, &slot, name, NULL, noop_brokerd, NULL);
			*ns = now_ns() - t0;
			if (r >= 0)
				r = brokerd_bus_unsubscribe(bb, name);
			brokerd_slot_free(slot);
			return r;
		case OP_REACH: {
			struct bname *b = bname_get(bb, ECHO_NAME, true);

			if (!b)
				return -ENOMEM;
			t0 = now_ns();
			r = bname_open_call(bb, b, false);
			*ns = now_ns() - t0;
			bname_close_chans(bb, b);
			bname_gc(bb, b);
			return r;
		}
		default:
			return -EINVAL;
		}
	} else {
		sd_bus_error err = SD_BUS_ERROR_NULL;
		sd_bus_message *reply = NULL;
		sd_bus_slot *slot = NULL;
		sd_bus *nb = NULL;
		char match[128];

		switch (op) {
		case OP_CONNECT:
			r = sdbus_connect(k, &nb);
			*ns = now_ns() - t0;
			sd_bus_flush_close_unref(nb);
			return r;
		case OP_NAME:
			r = sd_bus_request_name(sb, name, 0);
			*ns = now_ns() - t0;
			if (r >= 0)
				r = sd_bus_release_name(sb, name);
			return r;
		case OP_SUBSCRIBE:
			snprintf(match, sizeof(match), "type='signal',sender='%s',member='Tick'", name);
			t0 = now_ns();
			r = sd_bus_add_match(sb, &slot, match, noop_sdbus, NULL);
			*ns = now_ns() - t0;
			sd_bus_slot_unref(slot);
			return r;
		case OP_REACH:
			r = sd_bus_call_method(sb, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					       "org.freedesktop.DBus", "GetNameOwner", &err, &reply, "s",
					       ECHO_NAME);
			*ns = now_ns() - t0;
			sd_bus_message_unref(reply);
			sd_bus_error_free(&err);
			return r;
		default:
			return -EINVAL;
		}
	}
}

void bench_ctrl(enum bus_kind k, enum bench_op op, int n)
{
	brokerd_bus *bb = NULL, *owner = NULL;
	sd_bus *sb = NULL;
	uint64_t *lat = calloc((size_t)n, sizeof(*lat)), total = 0;
	const char *label = op_label[op][k != BUS_BROKERD];
	char status[160] = "ok";
	int r = 0, i = 0;

	if (broker_error[k][0]) {
		printf("@ctrl,%s,%s,%d,error: %s,,\n", bus_label[k], label, n, broker_error[k]);
		free(lat);
		return;
	}
	/* the name OPEN_CALL and GetNameOwner reach is owned by a second connection */
	if (k == BUS_BROKERD) {
		r = brokerd_bus_open_system(&bb);
		if (r >= 0 && op == OP_REACH) {
			r = brokerd_bus_open_system(&owner);
			if (r >= 0)
				r = brokerd_bus_request_name(owner, ECHO_NAME, 0);
		}
	} else {
		r = sdbus_connect(k, &sb);
		if (r >= 0 && op == OP_REACH)
			r = sd_bus_request_name(sb, ECHO_NAME, 0);
	}
	if (r < 0) {
		snprintf(status, sizeof(status), "error: set-up: %s", strerror(-r));
		goto out;
	}
	for (i = 0; i < n; i++) {
		r = ctrl_once(k, op, bb, sb, i, &lat[i]);
		if (r < 0) {
			snprintf(status, sizeof(status), "error: %s %d: %s", label, i, strerror(-r));
			break;
		}
		total += lat[i];
	}
out:
	if (strcmp(status, "ok") == 0) {
		qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
		printf("@ctrl,%s,%s,%d,ok,%.0f,%.1f\n", bus_label[k], label, n,
		       (double)n * 1e9 / (double)total, pct_us(lat, (size_t)n, 0.5));
	} else {
		printf("@ctrl,%s,%s,%d,%s,,\n", bus_label[k], label, n, status);
	}
	fflush(stdout);
	brokerd_bus_close(bb);
	brokerd_bus_close(owner);
	sd_bus_flush_close_unref(sb);
	free(lat);
}

/* ---- Memory per connection ----------------------------------------------------------- */

void bench_mem(enum bus_kind k, int n)
{
	brokerd_bus **bb = calloc((size_t)n, sizeof(*bb));
	sd_bus **sb = calloc((size_t)n, sizeof(*sb));
	long before, after = -1;
	char status[160] = "ok";
	int r = 0;

	if (broker_error[k][0]) {
		printf("@mem,%s,%d,error: %s,,,\n", bus_label[k], n, broker_error[k]);
		goto out;
	}
	usleep(300000);
	before = rss_kb(broker_pid[k]);
	for (int i = 0; i < n && r >= 0; i++)
		r = k == BUS_BROKERD ? brokerd_bus_open_system(&bb[i]) : sdbus_connect(k, &sb[i]);
	if (r < 0) {
		snprintf(status, sizeof(status), "error: connect: %s", strerror(-r));
	} else {
		/* whatever the broker does after HELLO (brokerd: the inbox) settles */
		usleep(500000);
		after = rss_kb(broker_pid[k]);
	}
	if (strcmp(status, "ok") == 0 && before > 0 && after > 0)
		printf("@mem,%s,%d,ok,%ld,%ld,%.0f\n", bus_label[k], n, before, after,
		       (double)(after - before) * 100.0 / n);
	else
		printf("@mem,%s,%d,%s,,,\n", bus_label[k], n,
		       strcmp(status, "ok") ? status : "error: no VmRSS for the broker");
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		brokerd_bus_close(bb[i]);
		sd_bus_flush_close_unref(sb[i]);
	}
out:
	free(bb);
	free(sb);
}
