/* SPDX-License-Identifier: MIT */
/*
 * client-match - D-Bus match rules (brokerd_bus_add_match()) between real
 * processes. Publisher A owns org.brokerd.test.MatchA before the rules are
 * added, publisher B takes org.brokerd.test.MatchB afterwards; each emits,
 * when called, a signal of signature "sos" with the path, interface,
 * member and arguments it is told. The subscriber (this process) adds
 * rules with a sender (one twice, spelt differently: shared), with argN,
 * and without a sender (argNpath, path_namespace, arg2), and on the bus's
 * NameOwnerChanged (sender org.freedesktop.DBus, arg0): every rule gets
 * exactly the signals it matches, B's included once B appears, and
 * brokerd's count of the uid's subscriptions (QUOTA) says one subscription
 * per name, however many rules use it. Freeing the slots ends the rules,
 * the watch, and at last every subscription.
 */
#include "client/bus-name.h"
#include "protocol/dbus-marshal.h"
#include "tests/integration/client/testlib.h"

#define NAME_A "org.brokerd.test.MatchA"
#define NAME_B "org.brokerd.test.MatchB"

/* Emit(text "PATH INTERFACE MEMBER ARG0 ARG1PATH ARG2"): that signal on the name called. */
static int on_emit(brokerd_msg *m, void *u)
{
	char text[512], path[128], iface[128], member[64], a0[64], a1[128], a2[64];
	struct dbus_writer w;
	const void *body;
	void *data;
	size_t size, len;

	CHECK_R(brokerd_msg_get_body(m, &body, &size), 0);
	CHECK(size < sizeof(text));
	memcpy(text, body, size);
	text[size] = 0;
	CHECK(sscanf(text, "%127s %127s %63s %63s %127s %63s", path, iface, member, a0, a1, a2) == 6);
	CHECK_R(dbus_writer_init(&w, "sos"), 0);
	CHECK_R(dbus_writer_append_basic(&w, 's', a0), 0);
	CHECK_R(dbus_writer_append_basic(&w, 'o', a1), 0);
	CHECK_R(dbus_writer_append_basic(&w, 's', a2), 0);
	CHECK_R(dbus_writer_finish(&w, &data, &len), 0);
	dbus_writer_deinit(&w);
	CHECK_R(brokerd_bus_emit(u, brokerd_msg_get_name(m), path, iface, member, "sos", data, len), 0);
	free(data);
	return brokerd_msg_reply(m, NULL, 0);
}

static const struct t_method publisher[] = { { "Emit", on_emit }, { NULL, NULL } };

/* The rules of this test, and the signals each has seen. */
enum { R_A, R_A_AGAIN, R_ARG0, R_ARG1PATH, R_NAMESPACE, R_ARG2, R_OWNER, _R_MAX };

static const char *const rules[_R_MAX] = {
	[R_A] = "type='signal',sender='" NAME_A "',member='Changed'",
	[R_A_AGAIN] = "member=Changed,sender=" NAME_A ",type=signal",
	[R_ARG0] = "sender='" NAME_A "',arg0='cpu'",
	[R_ARG1PATH] = "arg1path='/dev/'",
	[R_NAMESPACE] = "path_namespace='/org/match/b'",
	[R_ARG2] = "interface='org.match.I',arg2='z'",
	/* the bus itself, by D-Bus's name for it */
	[R_OWNER] = "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='" NAME_B "'",
};

static int seen[_R_MAX];
static brokerd_slot *slots[_R_MAX];

static int on_match(brokerd_msg *m, void *u)
{
	CHECK_R(brokerd_msg_get_type(m), BROKERD_MSG_SIGNAL);
	(*(int *)u)++;
	return 0;
}

static void add(brokerd_bus *bus, int r)
{
	CHECK_R(brokerd_bus_add_match(bus, &slots[r], rules[r], on_match, &seen[r]), 0);
}

static unsigned int n_matches(brokerd_bus *bus)
{
	unsigned int n = 0;

	for (struct bus_match *m = bus->matches; m; m = m->next)
		n++;
	return n;
}

/* Names handed over by the watch (the bus's own channel, not counted by brokerd, aside). */
static unsigned int n_watched(brokerd_bus *bus)
{
	unsigned int n = 0;

	for (struct bname *b = bus->names; b; b = b->next)
		n += b->watched && strcmp(b->name, CTRL_BUS_NAME) != 0;
	return n;
}

static int total(void)
{
	int n = 0;

	for (int i = 0; i < _R_MAX; i++)
		n += seen[i];
	return n;
}

/*
 * Has name emit the signal described by text, then processes sub until
 * the rules have seen want signals in all, and 300 ms more for any extra.
 */
static void emit(brokerd_bus *pub, brokerd_bus *sub, const char *name, const char *text, int want)
{
	uint64_t end;

	CHECK_R(brokerd_bus_call(pub, name, "Emit", text, strlen(text), 5000000, NULL), 0);
	end = now_usec() + 5000000;
	while (total() < want && now_usec() < end) {
		brokerd_bus_process(sub);
		brokerd_bus_wait(sub, 20000);
	}
	end = now_usec() + 300000;
	while (now_usec() < end) {
		brokerd_bus_process(sub);
		brokerd_bus_wait(sub, 20000);
	}
	if (total() != want)
		FAIL("after \"%s\" from %s: %d signals matched, want %d", text, name, total(), want);
}

static void expect_seen(const int want[_R_MAX])
{
	for (int i = 0; i < _R_MAX; i++)
		if (seen[i] != want[i])
			FAIL("rule \"%s\" saw %d signals, want %d", rules[i], seen[i], want[i]);
}

int main(void)
{
	brokerd_bus *sub = t_open(), *pub = t_open();
	struct bname *b;
	uint64_t before, with_a;
	uint64_t end;
	pid_t pa, pb;

	pa = t_service_start(NAME_A, publisher);
	before = t_subscriptions_used(sub);

	/* bad rules */
	CHECK_R(brokerd_bus_add_match(sub, NULL, "type='signal", on_match, NULL), -EINVAL);
	CHECK_R(brokerd_bus_add_match(sub, NULL, "arg64='x'", on_match, NULL), -EINVAL);
	CHECK_R(brokerd_bus_add_match(sub, NULL, "path='/a',path_namespace='/a'", on_match, NULL), -EINVAL);

	/* with a sender: one subscription to A, shared by identical rules */
	add(sub, R_A);
	add(sub, R_A_AGAIN);
	add(sub, R_ARG0);
	CHECK_R(n_matches(sub), 2);
	CHECK(slots[R_A]->match == slots[R_A_AGAIN]->match && slots[R_A]->match->n_slots == 2);
	with_a = before + 1;
	CHECK(t_subscriptions_used(sub) == with_a);

	/* without: brokerd hands over every owned name but A, held already */
	add(sub, R_ARG1PATH);
	CHECK_R(n_matches(sub), 3);
	b = bname_get(sub, NAME_A, false);
	CHECK(b && !b->watched && b->sig_recv);
	b = bname_get(sub, CTRL_BUS_NAME, false);
	CHECK(b && b->watched && b->sig_recv);
	t_log("the watch attached %u other names", n_watched(sub));
	CHECK(t_subscriptions_used(sub) == with_a + n_watched(sub));

	emit(pub, sub, NAME_A, "/org/match/a org.match.I Changed cpu /dev/sda z", 4);
	expect_seen((const int[_R_MAX]){ [R_A] = 1, [R_A_AGAIN] = 1, [R_ARG0] = 1, [R_ARG1PATH] = 1 });
	emit(pub, sub, NAME_A, "/org/match/a org.match.I Other gpu /proc z", 4);
	emit(pub, sub, NAME_A, "/org/match/a org.match.I Other cpu /dev y", 5);
	expect_seen((const int[_R_MAX]){ [R_A] = 1, [R_A_AGAIN] = 1, [R_ARG0] = 2, [R_ARG1PATH] = 1 });

	/* a name that appears after the rules: B's channel comes by itself */
	add(sub, R_NAMESPACE);
	add(sub, R_ARG2);
	add(sub, R_OWNER);
	pb = t_service_start(NAME_B, publisher);
	end = now_usec() + 5000000;
	while (!((b = bname_get(sub, NAME_B, false)) && b->watched) && now_usec() < end) {
		brokerd_bus_process(sub);
		brokerd_bus_wait(sub, 20000);
	}
	CHECK(b && b->watched && b->sig_recv);
	CHECK(t_subscriptions_used(sub) == with_a + n_watched(sub));
	/* NameOwnerChanged of B's arrival: one more */
	emit(pub, sub, NAME_B, "/org/match/b/x org.match.I Changed gpu /dev/sdb z", 9);
	expect_seen((const int[_R_MAX]){ [R_A] = 1,
					 [R_A_AGAIN] = 1,
					 [R_ARG0] = 2,
					 [R_ARG1PATH] = 2,
					 [R_NAMESPACE] = 1,
					 [R_ARG2] = 1,
					 [R_OWNER] = 1 });
	emit(pub, sub, NAME_B, "/org/match/bb org.match.J Changed cpu /devices y", 9);
	/* A's signals reach the rules without a sender too */
	emit(pub, sub, NAME_A, "/org/match/b org.match.I Other x /dev/sdb z", 12);
	expect_seen((const int[_R_MAX]){ [R_A] = 1,
					 [R_A_AGAIN] = 1,
					 [R_ARG0] = 2,
					 [R_ARG1PATH] = 3,
					 [R_NAMESPACE] = 2,
					 [R_ARG2] = 2,
					 [R_OWNER] = 1 });

	/* unsubscribing: a shared rule lives while one slot does */
	slots[R_A] = brokerd_slot_free(slots[R_A]);
	CHECK_R(n_matches(sub), 6);
	emit(pub, sub, NAME_A, "/org/match/a org.match.J Changed x /x y", 13);
	CHECK_R(seen[R_A_AGAIN], 2);
	slots[R_A_AGAIN] = brokerd_slot_free(slots[R_A_AGAIN]);
	slots[R_ARG0] = brokerd_slot_free(slots[R_ARG0]);
	CHECK_R(n_matches(sub), 4);
	/* the rules without a sender still want A's signals: the watch keeps them */
	b = bname_get(sub, NAME_A, false);
	CHECK(b && b->watched && b->sig_recv);
	emit(pub, sub, NAME_A, "/org/match/a org.match.I Changed cpu /dev/sdc z", 15);
	CHECK(seen[R_ARG1PATH] == 4 && seen[R_ARG2] == 3);
	/* B's publisher goes: NameOwnerChanged again */
	t_kill(pb);
	end = now_usec() + 5000000;
	while (seen[R_OWNER] < 2 && now_usec() < end) {
		brokerd_bus_process(sub);
		brokerd_bus_wait(sub, 20000);
	}
	CHECK_R(seen[R_OWNER], 2);
	slots[R_ARG1PATH] = brokerd_slot_free(slots[R_ARG1PATH]);
	slots[R_NAMESPACE] = brokerd_slot_free(slots[R_NAMESPACE]);
	slots[R_ARG2] = brokerd_slot_free(slots[R_ARG2]);
	CHECK_R(n_matches(sub), 1);
	CHECK_R(n_watched(sub), 0);
	b = bname_get(sub, CTRL_BUS_NAME, false);
	CHECK(b && !b->watched && b->sig_recv); /* R_OWNER holds it */
	emit(pub, sub, NAME_A, "/org/match/b org.match.I Changed cpu /dev/sdd z", 16);
	slots[R_OWNER] = brokerd_slot_free(slots[R_OWNER]);
	CHECK_R(n_matches(sub), 0);
	CHECK(!bname_get(sub, CTRL_BUS_NAME, false));
	/* UNSUBSCRIBE goes out without waiting: brokerd has it before this QUOTA */
	CHECK(t_subscriptions_used(sub) == before);

	t_kill(pa);
	brokerd_bus_close(pub);
	brokerd_bus_close(sub);
	printf("ok\n");
	return 0;
}
