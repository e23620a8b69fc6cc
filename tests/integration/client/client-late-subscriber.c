/* SPDX-License-Identifier: MIT */
/*
 * client-late-subscriber - a subscriber that joins late sees only later
 * signals. The test owns org.brokerd.test.Late; subscriber A joins, signals
 * 1-3 go out, subscriber B joins, signals 4-6 go out. A must see 1..6 in
 * order, B exactly 4..6. A third subscriber with a member filter that does not
 * match sees nothing but Done. Senders are checked against the kernel-stamped
 * unique name of the publisher.
 */
#include "tests/integration/client/testlib.h"

#define NAME "org.brokerd.test.Late"

struct sub {
	int ready[2], out[2];
	const char *filter;
	char got[256];
	char publisher[64];
};

static int on_signal(brokerd_msg *m, void *u)
{
	struct sub *s = u;
	const void *body;
	size_t size;

	if (strcmp(brokerd_msg_get_sender(m), s->publisher) != 0)
		FAIL("signal from %s, publisher is %s", brokerd_msg_get_sender(m), s->publisher);
	if (strcmp(brokerd_msg_get_member(m), "Done") == 0) {
		t_say(s->out[1], "%s", s->got);
		brokerd_bus_exit(m->bus, 0);
		return 0;
	}
	brokerd_msg_get_body(m, &body, &size);
	snprintf(s->got + strlen(s->got), sizeof(s->got) - strlen(s->got), "%s%.*s", s->got[0] ? " " : "",
		 (int)size, (const char *)body);
	return 0;
}

static int subscriber(void *arg)
{
	struct sub *s = arg;
	brokerd_bus *bus = t_open();

	CHECK_R(brokerd_bus_get_name_owner(bus, NAME, s->publisher, sizeof(s->publisher)), 0);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, s->filter, on_signal, s), 0);
	t_say(s->ready[1], "ready");
	return brokerd_bus_run(bus) < 0;
}

static void emit_range(brokerd_bus *bus, int from, int to)
{
	for (int i = from; i <= to; i++) {
		char body[8];

		snprintf(body, sizeof(body), "%d", i);
		CHECK_R(brokerd_bus_emit_signal(bus, NAME, "Tick", body, strlen(body)), 0);
	}
}

int main(void)
{
	brokerd_bus *bus = t_open();
	struct sub a = { .filter = "Tick,Done" }, b = { .filter = "Ti*,Done" },
		   c = { .filter = "Other,Done" };
	pid_t pa, pb, pc;

	CHECK_R(brokerd_bus_request_name(bus, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	t_pipe(a.ready), t_pipe(a.out), t_pipe(b.ready), t_pipe(b.out), t_pipe(c.ready), t_pipe(c.out);
	pa = t_fork(subscriber, &a);
	pc = t_fork(subscriber, &c);
	t_expect(a.ready[0], "ready", 5000);
	t_expect(c.ready[0], "ready", 5000);
	emit_range(bus, 1, 3);
	pb = t_fork(subscriber, &b);
	t_expect(b.ready[0], "ready", 5000);
	emit_range(bus, 4, 6);
	CHECK_R(brokerd_bus_emit_signal(bus, NAME, "Done", NULL, 0), 0);
	t_expect(a.out[0], "1 2 3 4 5 6", 5000);
	t_expect(b.out[0], "4 5 6", 5000);
	t_expect(c.out[0], "", 5000);
	CHECK_R(t_wait(pa, 5000), 0);
	CHECK_R(t_wait(pb, 5000), 0);
	CHECK_R(t_wait(pc, 5000), 0);

	/* emitting needs ownership: after releasing the name it is refused */
	CHECK_R(brokerd_bus_release_name(bus, NAME), 0);
	CHECK_R(brokerd_bus_emit_signal(bus, NAME, "Tick", "7", 1), -EPERM);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
