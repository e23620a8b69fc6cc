/* SPDX-License-Identifier: MIT */
/* test-registry.c - unit tests of names, owner queues and peers (registry.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/registry.h"
#include "util/test.h"

static char events[4096];
static int entries;
static struct registry_peer *requester_seen; /* of the last owner change */

static void on_owner(void *ud, const char *name, struct registry_peer *o, struct registry_peer *n,
		     struct registry_peer *requester)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s:%s>%s;", name, o ? o->unique_name : "", n ? n->unique_name : "");
	strcat(events, buf);
	requester_seen = requester;
}

static void on_entry(void *ud, struct registry_peer *p, const char *name, int delta)
{
	entries += delta;
}

static const struct registry_ops ops = { .owner_changed = on_owner, .entry_changed = on_entry };

#define EXPECT_EVENTS(s)               \
	do {                           \
		ASSERT_STR(events, s); \
		events[0] = 0;         \
	} while (0)

static void test_basic(void)
{
	struct registry *r;
	struct registry_peer *a, *b, *c, *q[4];
	const char *names[4];

	ASSERT(registry_new(&r, &ops, NULL) == 0);
	ASSERT(registry_peer_add(r, 1000, &a) == 0 && a->id == 1 && strcmp(a->unique_name, ":1.0") == 0);
	ASSERT(registry_peer_add(r, 1001, &b) == 0 && b->id == 2);
	ASSERT(registry_peer_add(r, 1002, &c) == 0 && c->id == 3);

	ASSERT(registry_name_request(r, a, "org.x.Foo", 0) == CTRL_NAME_PRIMARY_OWNER);
	EXPECT_EVENTS("org.x.Foo:>:1.0;");
	ASSERT(requester_seen == a); /* the change came from a's request */
	ASSERT(registry_name_request(r, a, "org.x.Foo", 0) == CTRL_NAME_ALREADY_OWNER);
	ASSERT(registry_name_request(r, b, "org.x.Foo", 0) == CTRL_NAME_IN_QUEUE);
	ASSERT(registry_name_request(r, b, "org.x.Foo", 0) == CTRL_NAME_IN_QUEUE);
	ASSERT(registry_name_request(r, c, "org.x.Foo", CTRL_NAME_DO_NOT_QUEUE) == CTRL_NAME_EXISTS);
	EXPECT_EVENTS("");
	ASSERT(entries == 2);
	ASSERT(registry_name_queue(r, "org.x.Foo", q, 4) == 2 && q[0] == a && q[1] == b);
	ASSERT(registry_name_owner(r, "org.x.Foo") == a);
	ASSERT(registry_peer_resolve(r, "org.x.Foo") == a);
	ASSERT(registry_peer_resolve(r, ":1.1") == b);
	ASSERT(registry_peer_resolve(r, ":1.9") == NULL);

	/* replacement needs the owner's consent */
	ASSERT(registry_name_request(r, c, "org.x.Foo", CTRL_NAME_REPLACE_EXISTING) == CTRL_NAME_IN_QUEUE);
	ASSERT(registry_name_request(r, a, "org.x.Foo", CTRL_NAME_ALLOW_REPLACEMENT) ==
	       CTRL_NAME_ALREADY_OWNER);
	ASSERT(registry_name_request(r, c, "org.x.Foo", CTRL_NAME_REPLACE_EXISTING) ==
	       CTRL_NAME_PRIMARY_OWNER);
	EXPECT_EVENTS("org.x.Foo::1.0>:1.2;");
	ASSERT(requester_seen == c);
	ASSERT(registry_name_queue(r, "org.x.Foo", q, 4) == 3 && q[0] == c && q[1] == a && q[2] == b);
	ASSERT(entries == 3);

	/* release promotes the queue */
	ASSERT(registry_name_release(r, c, "org.x.Foo") == CTRL_RELEASE_RELEASED);
	ASSERT(registry_name_owner(r, "org.x.Foo") == a);
	ASSERT(requester_seen == NULL); /* a release: nobody learns of it from a reply */
	ASSERT(registry_name_release(r, c, "org.x.Foo") == CTRL_RELEASE_NOT_OWNER);
	ASSERT(registry_name_release(r, c, "org.x.Nope") == CTRL_RELEASE_NON_EXISTENT);
	ASSERT(registry_name_release(r, c, "bad") == -EINVAL);
	ASSERT(registry_name_request(r, c, ":1.0", 0) == -EINVAL);
	ASSERT(registry_name_request(r, c, "org.x.Foo", 0x100) == -EINVAL);

	/* disconnect of the owner promotes b and drops the name from b's view when b leaves */
	ASSERT(registry_name_request(r, a, "org.x.Bar", 0) == CTRL_NAME_PRIMARY_OWNER);
	events[0] = 0;
	registry_peer_remove(r, a);
	ASSERT(strstr(events, "org.x.Foo::1.0>:1.1;"));
	ASSERT(strstr(events, "org.x.Bar::1.0>;"));
	events[0] = 0;
	ASSERT(registry_names_list(r, names, 4) == 1 && strcmp(names[0], "org.x.Foo") == 0);
	ASSERT(registry_peer_find(r, 1) == NULL);

	/* ids are never reused */
	ASSERT(registry_peer_add(r, 1000, &a) == 0 && a->id == 4);
	ASSERT(registry_peer_count(r) == 3);
	ASSERT(registry_peer_next(r, NULL) == b && registry_peer_next(r, b) == c &&
	       registry_peer_next(r, c) == a);
	registry_peer_remove(r, b);
	EXPECT_EVENTS("org.x.Foo::1.1>;");
	ASSERT(entries == 0);
	ASSERT(registry_names_list(r, names, 4) == 0);
	registry_free(r);
}

static void test_replace_do_not_queue(void)
{
	struct registry *r;
	struct registry_peer *a, *b, *q[4];
	bool primary;

	ASSERT(registry_new(&r, &ops, NULL) == 0);
	events[0] = 0;
	entries = 0;
	registry_peer_add(r, 1, &a);
	registry_peer_add(r, 2, &b);
	ASSERT(registry_name_request(r, a, "a.b", CTRL_NAME_ALLOW_REPLACEMENT | CTRL_NAME_DO_NOT_QUEUE) ==
	       CTRL_NAME_PRIMARY_OWNER);
	ASSERT(registry_name_request(r, b, "a.b", CTRL_NAME_REPLACE_EXISTING) == CTRL_NAME_PRIMARY_OWNER);
	ASSERT(registry_name_queue(r, "a.b", q, 4) == 1 && q[0] == b);
	ASSERT(a->n_owners == 0 && b->n_owners == 1 && entries == 1);
	ASSERT(strcmp(registry_peer_entry_name(b, 0, &primary), "a.b") == 0 && primary);
	ASSERT(registry_peer_entry_name(b, 1, NULL) == NULL);
	/* a queued peer asking with DO_NOT_QUEUE leaves the queue */
	ASSERT(registry_name_request(r, a, "a.b", 0) == CTRL_NAME_IN_QUEUE);
	ASSERT(registry_name_entry_flags(r, a, "a.b") == 0);
	ASSERT(registry_name_request(r, a, "a.b", CTRL_NAME_DO_NOT_QUEUE) == CTRL_NAME_EXISTS);
	ASSERT(registry_name_entry_flags(r, a, "a.b") == -ENOENT);
	registry_free(r);
}

/* registry_peer_owned_next(): the names a peer is primary owner of, not those it waits for. */
static void test_owned_next(void)
{
	struct registry *r;
	struct registry_peer *a, *b;
	const char *nm;
	unsigned int i = 0, n = 0;
	bool seen_x = false, seen_z = false;

	ASSERT(registry_new(&r, &ops, NULL) == 0);
	ASSERT(registry_peer_add(r, 1, &a) == 0 && registry_peer_add(r, 2, &b) == 0);
	ASSERT(registry_name_request(r, a, "org.x", 0) == CTRL_NAME_PRIMARY_OWNER);
	ASSERT(registry_name_request(r, b, "org.y", 0) == CTRL_NAME_PRIMARY_OWNER);
	ASSERT(registry_name_request(r, a, "org.y", 0) == CTRL_NAME_IN_QUEUE);
	ASSERT(registry_name_request(r, a, "org.z", 0) == CTRL_NAME_PRIMARY_OWNER);
	while ((nm = registry_peer_owned_next(a, &i))) {
		seen_x = seen_x || strcmp(nm, "org.x") == 0;
		seen_z = seen_z || strcmp(nm, "org.z") == 0;
		ASSERT(strcmp(nm, "org.y") != 0);
		n++;
	}
	ASSERT(n == 2 && seen_x && seen_z);
	ASSERT(registry_peer_owned_next(a, &i) == NULL); /* stays at the end */
	i = 0;
	ASSERT((nm = registry_peer_owned_next(b, &i)) && strcmp(nm, "org.y") == 0);
	ASSERT(registry_peer_owned_next(b, &i) == NULL);
	registry_free(r);
}

/*
 * A restart restores a queue in two halves (native peers, then D-Bus ones,
 * each appended); registry_name_restore_order() puts them back in the
 * recorded order, silently, peers that did not come back left out.
 */
static void test_restore_order(void)
{
	struct registry *r;
	struct registry_peer *a, *b, *c, *q[4];
	const uint64_t order[] = { 3, 9, 1, 2 }; /* c first; 9 did not come back */

	events[0] = 0;
	ASSERT(registry_new(&r, &ops, NULL) == 0);
	ASSERT(registry_peer_restore(r, 1, 1, &a) == 0 && registry_peer_restore(r, 2, 2, &b) == 0);
	ASSERT(registry_peer_restore(r, 3, 3, &c) == 0);
	c->kind = REGISTRY_PEER_DBUS;
	ASSERT(registry_name_restore(r, a, "org.x", 0) == 0);
	ASSERT(registry_name_restore(r, b, "org.x", CTRL_NAME_DO_NOT_QUEUE) == 0);
	ASSERT(registry_name_restore(r, c, "org.x", CTRL_NAME_ALLOW_REPLACEMENT) == 0);
	ASSERT(registry_name_owner(r, "org.x") == a);
	registry_name_restore_order(r, "org.x", order, 4);
	ASSERT(registry_name_queue(r, "org.x", q, 4) == 3 && q[0] == c && q[1] == a && q[2] == b);
	ASSERT(registry_name_entry_flags(r, b, "org.x") == CTRL_NAME_DO_NOT_QUEUE);
	registry_name_restore_order(r, "org.x", order + 2, 1); /* a to the front, the rest as they were */
	ASSERT(registry_name_queue(r, "org.x", q, 4) == 3 && q[0] == a && q[1] == c && q[2] == b);
	registry_name_restore_order(r, "org.nobody", order, 4);
	EXPECT_EVENTS("");
	/* the queue works on as any: a goes, c is promoted */
	registry_peer_remove(r, a);
	EXPECT_EVENTS("org.x::1.0>:1.2;");
	registry_free(r);
	entries = 0;
}

int main(void)
{
	test_basic();
	test_replace_do_not_queue();
	test_owned_next();
	test_restore_order();
	printf("test-registry: ok\n");
	return 0;
}
