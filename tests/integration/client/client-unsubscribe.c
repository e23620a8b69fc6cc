/* SPDX-License-Identifier: MIT */
/*
 * client-unsubscribe - ending a subscription through brokerd. A publisher
 * owns org.brokerd.test.Unsub (and .Kept); a subscriber bus subscribes to
 * both with a slot of its own and one the bus owns. brokerd_bus_unsubscribe()
 * stops delivery, brokerd stops counting the subscription (QUOTA), a second
 * call says -ENOENT; freeing the last slot of a name tells brokerd too; after
 * `systemctl restart brokerd` only the subscription still held is there
 * (handed over to the next brokerd, or restored by the reconnect).
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Unsub"
#define KEPT "org.brokerd.test.Unsub.Kept"

static int got_slot, got_floating, got_kept;

static int on_signal(brokerd_msg *m, void *u)
{
	(*(int *)u)++;
	return 0;
}

/* Processes both buses for ms milliseconds, or until *until reaches want. */
static void pump2(brokerd_bus *a, brokerd_bus *b, int *until, int want, int ms)
{
	uint64_t end = now_usec() + (uint64_t)ms * 1000;

	while (now_usec() < end && !(until && *until >= want)) {
		brokerd_bus_process(a);
		brokerd_bus_process(b);
		brokerd_bus_wait(b, 20000);
	}
}

static void emit(brokerd_bus *pub, const char *name)
{
	CHECK_R(brokerd_bus_emit_signal(pub, name, "Tick", "x", 1), 0);
}

/* A signal on each name: KEPT's arrives (the want_kept-th), NAME's no more. */
static void emit_both(brokerd_bus *pub, brokerd_bus *sub, int want_kept)
{
	emit(pub, NAME);
	emit(pub, KEPT);
	pump2(pub, sub, &got_kept, want_kept, 5000);
	pump2(pub, sub, NULL, 0, 300);
	CHECK(got_kept == want_kept);
	CHECK(got_slot == 1 && got_floating == 1);
}

int main(void)
{
	brokerd_bus *pub = t_open(), *sub = t_open();
	brokerd_slot *slot = NULL, *again = NULL;
	uint64_t before;
	char owner[64];

	CHECK_R(brokerd_bus_request_name(pub, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	CHECK_R(brokerd_bus_request_name(pub, KEPT, 0), BROKERD_NAME_PRIMARY_OWNER);
	before = t_subscriptions_used(sub);
	CHECK_R(brokerd_bus_subscribe(sub, &slot, NAME, NULL, on_signal, &got_slot), 0);
	CHECK_R(brokerd_bus_subscribe(sub, NULL, NAME, "Tick", on_signal, &got_floating), 0);
	CHECK_R(brokerd_bus_subscribe(sub, NULL, KEPT, NULL, on_signal, &got_kept), 0);
	CHECK(t_subscriptions_used(sub) == before + 2); /* one per name, not per slot */
	emit(pub, NAME);
	pump2(pub, sub, &got_floating, 1, 5000);
	pump2(pub, sub, &got_slot, 1, 1000);
	CHECK(got_slot == 1 && got_floating == 1);

	/* unsubscribed: nothing more arrives, brokerd counts one less */
	CHECK_R(brokerd_bus_unsubscribe(sub, NAME), 0);
	CHECK(t_subscriptions_used(sub) == before + 1);
	emit_both(pub, sub, 1);
	CHECK_R(brokerd_bus_unsubscribe(sub, NAME), -ENOENT);
	brokerd_slot_free(slot); /* quiet already; freeing it asks brokerd nothing */
	CHECK(t_subscriptions_used(sub) == before + 1);
	t_log("brokerd_bus_unsubscribe: delivery stops, subscriptions %llu -> %llu",
	      (unsigned long long)before + 2, (unsigned long long)before + 1);

	/* freeing the last slot of a name tells brokerd as well */
	CHECK_R(brokerd_bus_subscribe(sub, &again, NAME, NULL, on_signal, &got_slot), 0);
	CHECK(t_subscriptions_used(sub) == before + 2);
	brokerd_slot_free(again);
	CHECK(t_subscriptions_used(sub) == before + 1); /* requests are answered in order */

	/* after a brokerd restart only KEPT is subscribed again */
	if (system("systemctl --version >/dev/null 2>&1") != 0)
		SKIP("no systemctl for the restart part");
	t_log("restarting brokerd");
	if (system("systemctl restart brokerd.service") != 0)
		FAIL("systemctl restart brokerd failed");
	for (int i = 0; i < 100; i++) {
		pump2(pub, sub, NULL, 0, 100);
		if (brokerd_bus_is_connected(sub) == 1 && brokerd_bus_is_connected(pub) == 1 &&
		    brokerd_bus_get_name_owner(sub, KEPT, owner, sizeof(owner)) == 0 &&
		    brokerd_bus_get_name_owner(sub, NAME, owner, sizeof(owner)) == 0)
			break;
	}
	CHECK_R(brokerd_bus_is_connected(sub), 1);
	CHECK_R(brokerd_bus_get_name_owner(sub, NAME, owner, sizeof(owner)), 0);
	CHECK(t_subscriptions_used(sub) == 1); /* only what sub still holds */
	emit_both(pub, sub, 2);
	t_log("after the restart: %s restored, %s not", KEPT, NAME);

	brokerd_bus_close(sub);
	brokerd_bus_close(pub);
	printf("ok\n");
	return 0;
}
