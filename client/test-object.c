/* SPDX-License-Identifier: MIT */
/*
 * test-object.c - host unit test of objects (bus-object.c): calls built with
 * the typed API are handed to bus_object_dispatch() as a received call, and
 * what the library answers or emits is read back as a message: methods
 * with checked arguments, the D-Bus errors for what is not there, the
 * Properties, Introspectable, Peer and ObjectManager interfaces, and the
 * PropertiesChanged and InterfacesAdded/Removed signals; and, through
 * bus_dispatch_chan(), which of a method slot, the objects and a
 * catch-all slot takes a call.
 *
 * The channel layer's chan_send, chan_arm and chan_close are wrapped at
 * link time: what the bus sends is kept here, so no channel is needed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-alloc.h"
#include "client/bus-dispatch.h"
#include "client/bus-name.h"
#include "client/bus-object.h"
#include "client/msg.h"
#include "util/test.h"

int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len);
void __wrap_chan_close(struct ring *r, struct chan *c);
int __wrap_chan_arm(struct ring *r, struct chan *c);
int __wrap_chan_arm_deferred(struct ring *r, struct chan *c);

/* Receives are "armed" by bus_dispatch_chan(): nothing to do without a ring. */
int __wrap_chan_arm(struct ring *r, struct chan *c)
{
	return 0;
}

/* a call chan's re-arm, submitted with the next wait: counted as one */
int __wrap_chan_arm_deferred(struct ring *r, struct chan *c)
{
	return __wrap_chan_arm(r, c);
}

/* The test's chans are plain memory, freed by the test. */
void __wrap_chan_close(struct ring *r, struct chan *c)
{
}

/* The last messages the bus sent: n_out counts them all, the ring keeps the newest. */
#define OUTBOX_RING 8
static uint8_t outbox[OUTBOX_RING][CHMSG_MAX];
static size_t outbox_len[OUTBOX_RING];
static unsigned int n_out;

int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len)
{
	ASSERT(len <= CHMSG_MAX);
	memcpy(outbox[n_out % OUTBOX_RING], buf, len);
	outbox_len[n_out++ % OUTBOX_RING] = len;
	return (int)len;
}

/* Sent message i as a message to read (the caller unrefs it). */
static brokerd_msg *sent_msg(unsigned int i)
{
	struct chmsg m;
	brokerd_msg *msg;

	ASSERT(i < n_out && i + OUTBOX_RING >= n_out);
	ASSERT_INT(chmsg_decode(&m, outbox[i % OUTBOX_RING], outbox_len[i % OUTBOX_RING]), ==, 0);
	msg = msg_new(NULL, &m, NULL, "");
	ASSERT(msg);
	return msg;
}

#define SVC	   "org.test.Objects"
#define PEER_BADGE 9

static brokerd_bus *bus;
static struct chan *sig_send, *peer_send, *call_recv;

static void setup(void)
{
	struct bname *b;
	struct peer_inbox *p;

	ASSERT_INT(bus_alloc(&bus, "/nonexistent/brokerd/socket"), ==, 0);
	bus->connected = true;
	bus->features = CTRL_FEATURE_CHANNELS;
	b = bname_get(bus, SVC, true);
	ASSERT(b);
	/* the chans are never used: chan_send is ours */
	b->sig_send = sig_send = calloc(1, sizeof(struct chan));
	/* calls arrive here when a test goes through the whole dispatch */
	b->call_recv = call_recv = calloc(1, sizeof(struct chan));
	ASSERT(call_recv);
	call_recv->kind = CHAN_CALL_RECV;
	call_recv->rights = IOIPC_SUB_RECV;
	call_recv->owner = b;
	call_recv->buf_size = sizeof(struct ioipc_msg_info) + CHMSG_MAX;
	call_recv->buf = calloc(1, call_recv->buf_size);
	ASSERT(call_recv->buf);
	p = calloc(1, sizeof(*p));
	ASSERT(b->sig_send && p);
	p->id = PEER_BADGE;
	p->send = peer_send = calloc(1, sizeof(struct chan));
	ASSERT(p->send);
	bus->peer_inboxes = p;
	bus->n_peer_inboxes = 1;
}

static void teardown(void)
{
	ASSERT(brokerd_bus_close(bus) == NULL);
	free(sig_send);
	free(peer_send);
	free(call_recv->buf);
	free(call_recv);
}

/*
 * Hands call (built with brokerd_msg_new_call(), sealed here) to the objects
 * as if received from the peer; returns what bus_object_dispatch() did and
 * leaves the answer, if any, in the outbox.
 */
static const struct ioipc_msg_info peer_info = { .pid = 1, .uid = 2, .gid = 3, .badge = PEER_BADGE };

/* call (sealed here) as a channel message from the peer; its strings and body stay call's. */
static struct chmsg call_chmsg(brokerd_msg *call)
{
	struct chmsg m = { .type = CHMSG_CALL, .serial = 77 };
	size_t len;

	ASSERT_INT(brokerd_msg_seal(call), ==, 0);
	m.path = brokerd_msg_get_path(call);
	m.interface = brokerd_msg_get_interface(call);
	m.member = brokerd_msg_get_member(call);
	m.signature = brokerd_msg_get_signature(call);
	ASSERT_INT(brokerd_msg_get_data(call, &m.body, &len), ==, 0);
	m.body_len = (uint32_t)len;
	return m;
}

static int receive(brokerd_msg *call, bool fallback)
{
	struct chmsg m = call_chmsg(call);
	brokerd_msg *msg;
	int k;

	msg = msg_new(bus, &m, &peer_info, SVC);
	ASSERT(msg);
	brokerd_msg_unref(call);
	k = bus_object_dispatch(bus, msg, fallback);
	brokerd_msg_unref(msg);
	return k;
}

/* Receives call on the name's call chan, through bus_dispatch_chan() as the ring would hand it over. */
static void receive_on_chan(brokerd_msg *call)
{
	struct chmsg m = call_chmsg(call);
	struct ioipc_msg_info info = peer_info;
	int k;

	k = chmsg_encode(&m, call_recv->buf + sizeof(info), CHMSG_MAX);
	ASSERT(k > 0);
	brokerd_msg_unref(call);
	info.len = (uint32_t)k;
	memcpy(call_recv->buf, &info, sizeof(info));
	call_recv->res = (int)sizeof(info) + k;
	bus_dispatch_chan(bus, call_recv);
}

static brokerd_msg *new_call(const char *path, const char *interface, const char *member)
{
	brokerd_msg *m = NULL;

	ASSERT_INT(brokerd_msg_new_call(NULL, &m, SVC, path, interface, member), ==, 0);
	return m;
}

/* Receives call and returns the one answer (the caller unrefs it). */
static brokerd_msg *answer(brokerd_msg *call)
{
	unsigned int before = n_out;

	ASSERT_INT(receive(call, false), ==, 1);
	ASSERT_INT(n_out, ==, before + 1);
	return sent_msg(n_out - 1);
}

/* The answer to call is the error `name`; returns its text in a static buffer. */
static const char *answer_error(brokerd_msg *call, const char *name)
{
	static char text[256];
	brokerd_msg *r = answer(call);
	const char *s = NULL;

	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_ERROR);
	ASSERT_STR(brokerd_msg_get_error_name(r), name);
	ASSERT_INT(brokerd_msg_read(r, "s", &s), ==, 1);
	snprintf(text, sizeof(text), "%s", s);
	brokerd_msg_unref(r);
	return text;
}

/* --- The objects under test --------------------------------------------------------- */

struct thermostat {
	int32_t target;
	char mode[32];
	unsigned int n_frobs;
};

static int method_add(brokerd_msg *call, void *userdata)
{
	int32_t a, b;

	ASSERT_INT(brokerd_msg_read(call, "ii", &a, &b), ==, 1);
	return brokerd_msg_return(call, "i", a + b);
}

static int method_frob(brokerd_msg *call, void *userdata)
{
	struct thermostat *t = userdata;

	t->n_frobs++;
	return 0; /* no output: the library answers with an empty reply */
}

static int method_deny(brokerd_msg *call, void *userdata)
{
	return -EACCES;
}

static int method_forget(brokerd_msg *call, void *userdata)
{
	return 0; /* declares an output, returns none */
}

static int get_target(brokerd_bus *b, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;

	ASSERT(b == bus);
	ASSERT_STR(interface, "org.test.Thermostat");
	return brokerd_msg_append_basic(m, 'i', &t->target);
}

static int set_target(brokerd_bus *b, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;
	int32_t v;

	ASSERT_INT(brokerd_msg_read_basic(m, 'i', &v), ==, 1);
	if (v > 40)
		return -EINVAL;
	t->target = v;
	return 0;
}

static int get_mode(brokerd_bus *b, const char *path, const char *interface, const char *property,
		    brokerd_msg *m, void *userdata)
{
	struct thermostat *t = userdata;

	return brokerd_msg_append_basic(m, 's', t->mode);
}

static int get_limits(brokerd_bus *b, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *userdata)
{
	/* a nested variant: a{sv} with a variant holding a struct */
	return brokerd_msg_append(m, "a{sv}", 2U, "min", "i", 5, "range", "(ii)", 5, 40);
}

static const struct brokerd_vtable thermostat_vtable[] = {
	BROKERD_METHOD_NAMED("Add", "ii", "a b", "i", "sum", method_add, 0),
	BROKERD_METHOD("Frob", "", "", method_frob),
	BROKERD_METHOD_NAMED("Deny", "", NULL, "", NULL, method_deny, BROKERD_VTABLE_DEPRECATED),
	BROKERD_METHOD("Forget", "", "s", method_forget),
	BROKERD_WRITABLE_PROPERTY("Target", "i", get_target, set_target, BROKERD_PROPERTY_EMITS_CHANGE),
	BROKERD_PROPERTY("Mode", "s", get_mode, BROKERD_PROPERTY_EMITS_INVALIDATION),
	BROKERD_PROPERTY("Limits", "a{sv}", get_limits, BROKERD_PROPERTY_CONST),
	BROKERD_SIGNAL_NAMED("Alarm", "su", "reason level", 0),
	BROKERD_VTABLE_END_ENTRY,
};

static const struct brokerd_vtable other_vtable[] = {
	BROKERD_METHOD("Frob", "", "", method_frob),
	BROKERD_VTABLE_END_ENTRY,
};

static struct thermostat hall = { .target = 21, .mode = "heat" };

/* --- Tests --------------------------------------------------------------------------------- */

static void test_register(brokerd_slot **slots)
{
	static const struct brokerd_vtable bad_sig[] = {
		BROKERD_METHOD("Add", "i(", "", method_add),
		BROKERD_VTABLE_END_ENTRY,
	};
	static const struct brokerd_vtable bad_names[] = {
		BROKERD_METHOD_NAMED("Add", "ii", "a", "", NULL, method_add, 0),
		BROKERD_VTABLE_END_ENTRY,
	};
	static const struct brokerd_vtable twice[] = {
		BROKERD_METHOD("Add", "", "", method_add),
		BROKERD_METHOD("Add", "i", "", method_add),
		BROKERD_VTABLE_END_ENTRY,
	};
	static const struct brokerd_vtable two_emits[] = {
		BROKERD_PROPERTY("P", "i", get_target,
				 BROKERD_PROPERTY_EMITS_CHANGE | BROKERD_PROPERTY_EMITS_INVALIDATION),
		BROKERD_VTABLE_END_ENTRY,
	};
	static const struct brokerd_vtable no_getter[] = {
		BROKERD_PROPERTY("P", "i", NULL, 0),
		BROKERD_VTABLE_END_ENTRY,
	};
	static const struct brokerd_vtable two_types[] = {
		BROKERD_PROPERTY("P", "ii", get_target, 0),
		BROKERD_VTABLE_END_ENTRY,
	};

	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.test.X", bad_sig, NULL), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.test.X", bad_names, NULL), ==,
		   -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.test.X", twice, NULL), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.test.X", two_emits, NULL), ==,
		   -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.test.X", no_getter, NULL), ==,
		   -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.test.X", two_types, NULL), ==,
		   -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test/", "org.test.X", other_vtable, NULL), ==,
		   -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "nodots", other_vtable, NULL), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test", "org.freedesktop.DBus.Properties",
					  other_vtable, NULL),
		   ==, -EEXIST);

	ASSERT_INT(brokerd_bus_add_object_manager(bus, &slots[0], "/org/test"), ==, 0);
	ASSERT_INT(brokerd_bus_add_object_manager(bus, NULL, "/org/test"), ==, -EEXIST);
	ASSERT_INT(brokerd_bus_add_object(bus, &slots[1], "/org/test/hall", "org.test.Thermostat",
					  thermostat_vtable, &hall),
		   ==, 0);
	ASSERT_INT(brokerd_bus_add_object(bus, NULL, "/org/test/hall", "org.test.Thermostat", other_vtable,
					  NULL),
		   ==, -EEXIST);
	ASSERT_INT(brokerd_bus_add_object(bus, &slots[2], "/org/test/hall", "org.test.Other", other_vtable,
					  &hall),
		   ==, 0);
	ASSERT_INT(brokerd_bus_add_object(bus, &slots[3], "/org/test/attic/fan", "org.test.Other",
					  other_vtable, &hall),
		   ==, 0);
}

static void test_methods(void)
{
	brokerd_msg *c, *r;
	int32_t sum = 0;

	c = new_call("/org/test/hall", "org.test.Thermostat", "Add");
	ASSERT_INT(brokerd_msg_append(c, "ii", 40, 2), ==, 0);
	r = answer(c);
	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_REPLY);
	ASSERT_STR(brokerd_msg_get_signature(r), "i");
	ASSERT_INT(brokerd_msg_read(r, "i", &sum), ==, 1);
	ASSERT_INT(sum, ==, 42);
	brokerd_msg_unref(r);

	/* without an interface: the method of that name */
	c = new_call("/org/test/hall", NULL, "Add");
	ASSERT_INT(brokerd_msg_append(c, "ii", 1, 2), ==, 0);
	r = answer(c);
	ASSERT_INT(brokerd_msg_read(r, "i", &sum), ==, 1);
	ASSERT_INT(sum, ==, 3);
	brokerd_msg_unref(r);

	/* arguments of another signature never reach the handler */
	c = new_call("/org/test/hall", "org.test.Thermostat", "Add");
	ASSERT_INT(brokerd_msg_append(c, "is", 1, "2"), ==, 0);
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_INVALID_ARGS),
		   "Invalid arguments 'is' to call org.test.Thermostat.Add(), expecting 'ii'.");

	c = new_call("/org/test/hall", "org.test.Thermostat", "Frob");
	r = answer(c);
	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_REPLY);
	ASSERT_STR(brokerd_msg_get_signature(r), "");
	ASSERT_INT(hall.n_frobs, ==, 1);
	brokerd_msg_unref(r);

	c = new_call("/org/test/hall", "org.test.Thermostat", "Deny");
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_ACCESS_DENIED), strerror(EACCES));
	c = new_call("/org/test/hall", "org.test.Thermostat", "Forget");
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_FAILED),
		   "org.test.Thermostat.Forget() returned no value.");

	c = new_call("/org/test/cellar", "org.test.Thermostat", "Frob");
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_UNKNOWN_OBJECT), "Unknown object '/org/test/cellar'.");
	c = new_call("/org/test/hall", "org.test.Nope", "Frob");
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE),
		   "Unknown interface 'org.test.Nope' on object '/org/test/hall'.");
	c = new_call("/org/test/hall", "org.test.Thermostat", "Melt");
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_UNKNOWN_METHOD),
		   "Unknown method 'Melt' or interface 'org.test.Thermostat' on object '/org/test/hall'.");
	/* a path between objects has no interfaces but the standard ones */
	c = new_call("/org/test/attic", "org.test.Other", "Frob");
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE),
		   "Unknown interface 'org.test.Other' on object '/org/test/attic'.");

	/* with a catch-all method, what no object serves is left to it */
	c = new_call("/org/test/cellar", "org.test.Thermostat", "Frob");
	ASSERT_INT(receive(c, true), ==, 0);
	c = new_call("/org/test/hall", "org.test.Thermostat", "Melt");
	ASSERT_INT(receive(c, true), ==, 0);
	c = new_call("/", NULL, "Ping"); /* a byte call of that member, not Peer's */
	ASSERT_INT(receive(c, true), ==, 0);
}

/* Reads a PropertiesChanged body: interface, the changed properties as "name=value " of
 * int or string values, the invalidated names. */
static void read_changed(brokerd_msg *s, char *changed, size_t size, char *invalidated, size_t isize)
{
	const char *iface, *name, *sv, *contents;
	size_t n = 0, in = 0;
	int32_t iv;
	char t;

	ASSERT_STR(brokerd_msg_get_member(s), "PropertiesChanged");
	ASSERT_STR(brokerd_msg_get_signature(s), "sa{sv}as");
	ASSERT_INT(brokerd_msg_read(s, "s", &iface), ==, 1);
	ASSERT_STR(iface, "org.test.Thermostat");
	changed[0] = invalidated[0] = 0;
	ASSERT_INT(brokerd_msg_enter_container(s, 'a', "{sv}"), ==, 1);
	while (brokerd_msg_enter_container(s, '{', "sv") > 0) {
		ASSERT_INT(brokerd_msg_read_basic(s, 's', &name), ==, 1);
		ASSERT_INT(brokerd_msg_peek_type(s, &t, &contents), ==, 1);
		if (strcmp(contents, "i") == 0) {
			ASSERT_INT(brokerd_msg_read(s, "v", "i", &iv), ==, 1);
			n += (size_t)snprintf(changed + n, size - n, "%s=%d ", name, iv);
		} else {
			ASSERT_INT(brokerd_msg_read(s, "v", "s", &sv), ==, 1);
			n += (size_t)snprintf(changed + n, size - n, "%s=%s ", name, sv);
		}
		ASSERT_INT(brokerd_msg_exit_container(s), ==, 0);
	}
	ASSERT_INT(brokerd_msg_exit_container(s), ==, 0);
	ASSERT_INT(brokerd_msg_enter_container(s, 'a', "s"), ==, 1);
	while (brokerd_msg_read_basic(s, 's', &name) > 0)
		in += (size_t)snprintf(invalidated + in, isize - in, "%s ", name);
	ASSERT_INT(brokerd_msg_exit_container(s), ==, 0);
}

static void test_properties(void)
{
	const char *iface = "org.test.Thermostat", *key, *s1;
	char changed[128], invalidated[128];
	int32_t v, lo, hi;
	unsigned int before;
	brokerd_msg *c, *r;

	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Get");
	ASSERT_INT(brokerd_msg_append(c, "ss", iface, "Target"), ==, 0);
	r = answer(c);
	ASSERT_STR(brokerd_msg_get_signature(r), "v");
	ASSERT_INT(brokerd_msg_read(r, "v", "i", &v), ==, 1);
	ASSERT_INT(v, ==, 21);
	brokerd_msg_unref(r);

	/* the nested variant comes through as the getter wrote it */
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Get");
	ASSERT_INT(brokerd_msg_append(c, "ss", iface, "Limits"), ==, 0);
	r = answer(c);
	ASSERT_INT(brokerd_msg_enter_container(r, 'v', "a{sv}"), ==, 1);
	ASSERT_INT(brokerd_msg_enter_container(r, 'a', "{sv}"), ==, 1);
	ASSERT_INT(brokerd_msg_read(r, "{sv}", &key, "i", &v), ==, 1);
	ASSERT_STR(key, "min");
	ASSERT_INT(brokerd_msg_read(r, "{sv}", &key, "(ii)", &lo, &hi), ==, 1);
	ASSERT_STR(key, "range");
	ASSERT_INT(hi, ==, 40);
	brokerd_msg_unref(r);

	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "GetAll");
	ASSERT_INT(brokerd_msg_append(c, "s", iface), ==, 0);
	r = answer(c);
	ASSERT_STR(brokerd_msg_get_signature(r), "a{sv}");
	ASSERT_INT(brokerd_msg_enter_container(r, 'a', "{sv}"), ==, 1);
	ASSERT_INT(brokerd_msg_read(r, "{sv}", &key, "i", &v), ==, 1);
	ASSERT_STR(key, "Target");
	ASSERT_INT(brokerd_msg_read(r, "{sv}", &key, "s", &s1), ==, 1);
	ASSERT_STR(key, "Mode");
	ASSERT_STR(s1, "heat");
	brokerd_msg_unref(r);

	/* Set: the value, an empty reply, then PropertiesChanged with the new value */
	before = n_out;
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Set");
	ASSERT_INT(brokerd_msg_append(c, "ssv", iface, "Target", "i", 19), ==, 0);
	ASSERT_INT(receive(c, false), ==, 1);
	ASSERT_INT(n_out, ==, before + 2);
	ASSERT_INT(hall.target, ==, 19);
	r = sent_msg(before);
	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_REPLY);
	brokerd_msg_unref(r);
	r = sent_msg(before + 1);
	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_SIGNAL);
	ASSERT_STR(brokerd_msg_get_path(r), "/org/test/hall");
	ASSERT_STR(brokerd_msg_get_interface(r), "org.freedesktop.DBus.Properties");
	read_changed(r, changed, sizeof(changed), invalidated, sizeof(invalidated));
	ASSERT_STR(changed, "Target=19 ");
	ASSERT_STR(invalidated, "");
	brokerd_msg_unref(r);

	/* refusals */
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Set");
	ASSERT_INT(brokerd_msg_append(c, "ssv", iface, "Target", "s", "warm"), ==, 0);
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_INVALID_ARGS), "Property 'Target' has type 'i'.");
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Set");
	ASSERT_INT(brokerd_msg_append(c, "ssv", iface, "Target", "i", 99), ==, 0);
	answer_error(c, BROKERD_DBUS_ERROR_INVALID_ARGS); /* the setter's -EINVAL */
	ASSERT_INT(hall.target, ==, 19);
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Set");
	ASSERT_INT(brokerd_msg_append(c, "ssv", iface, "Mode", "s", "cool"), ==, 0);
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_PROPERTY_READ_ONLY),
		   "Property 'Mode' on interface 'org.test.Thermostat' is read-only.");
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Get");
	ASSERT_INT(brokerd_msg_append(c, "ss", iface, "Colour"), ==, 0);
	ASSERT_STR(answer_error(c, BROKERD_DBUS_ERROR_UNKNOWN_PROPERTY),
		   "Unknown property 'Colour' on interface 'org.test.Thermostat'.");
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Get");
	ASSERT_INT(brokerd_msg_append(c, "ss", "org.test.Nope", "Colour"), ==, 0);
	answer_error(c, BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE);
	c = new_call("/org/test/hall", "org.freedesktop.DBus.Properties", "Get");
	ASSERT_INT(brokerd_msg_append(c, "s", iface), ==, 0);
	answer_error(c, BROKERD_DBUS_ERROR_INVALID_ARGS);

	/* emitted on request: values of the emitting ones, names of the invalidating ones */
	strcpy(hall.mode, "cool");
	ASSERT_INT(brokerd_bus_emit_properties_changed(bus, SVC, "/org/test/hall", iface, NULL), ==, 0);
	r = sent_msg(n_out - 1);
	read_changed(r, changed, sizeof(changed), invalidated, sizeof(invalidated));
	ASSERT_STR(changed, "Target=19 ");
	ASSERT_STR(invalidated, "Mode ");
	brokerd_msg_unref(r);
	ASSERT_INT(brokerd_bus_emit_properties_changed(bus, SVC, "/org/test/hall", iface,
						       (const char *const[]){ "Mode", NULL }),
		   ==, 0);
	r = sent_msg(n_out - 1);
	read_changed(r, changed, sizeof(changed), invalidated, sizeof(invalidated));
	ASSERT_STR(changed, "");
	ASSERT_STR(invalidated, "Mode ");
	brokerd_msg_unref(r);
	ASSERT_INT(brokerd_bus_emit_properties_changed(bus, SVC, "/org/test/hall", iface,
						       (const char *const[]){ "Limits", NULL }),
		   ==, -EINVAL);
	ASSERT_INT(brokerd_bus_emit_properties_changed(bus, SVC, "/org/test/hall", iface,
						       (const char *const[]){ "Colour", NULL }),
		   ==, -ENOENT);
	ASSERT_INT(
		brokerd_bus_emit_properties_changed(bus, "org.test.NotOurs", "/org/test/hall", iface, NULL),
		==, -EPERM);
}

static char *introspect(const char *path)
{
	brokerd_msg *r = answer(new_call(path, "org.freedesktop.DBus.Introspectable", "Introspect"));
	const char *xml = NULL;
	char *copy;

	ASSERT_INT(brokerd_msg_read(r, "s", &xml), ==, 1);
	copy = strdup(xml);
	ASSERT(copy);
	brokerd_msg_unref(r);
	return copy;
}

static void test_introspect(void)
{
	static const char doctype[] =
		"<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
		"\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>\n";
	char *xml = introspect("/org/test/hall");

	ASSERT(strncmp(xml, doctype, sizeof(doctype) - 1) == 0);
	ASSERT(strstr(xml, " <interface name=\"org.freedesktop.DBus.Peer\">\n"));
	ASSERT(strstr(xml, " <interface name=\"org.freedesktop.DBus.Properties\">\n"));
	ASSERT(!strstr(xml, "org.freedesktop.DBus.ObjectManager"));
	ASSERT(strstr(xml, " <interface name=\"org.test.Thermostat\">\n"
			   "  <method name=\"Add\">\n"
			   "   <arg name=\"a\" type=\"i\" direction=\"in\"/>\n"
			   "   <arg name=\"b\" type=\"i\" direction=\"in\"/>\n"
			   "   <arg name=\"sum\" type=\"i\" direction=\"out\"/>\n"
			   "  </method>\n"));
	ASSERT(strstr(xml, "  <method name=\"Deny\">\n"
			   "   <annotation name=\"org.freedesktop.DBus.Deprecated\" value=\"true\"/>\n"));
	ASSERT(strstr(xml, "  <property name=\"Target\" type=\"i\" access=\"readwrite\">\n  </property>\n"));
	ASSERT(strstr(xml, "  <property name=\"Mode\" type=\"s\" access=\"read\">\n"
			   "   <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" "
			   "value=\"invalidates\"/>\n"));
	ASSERT(strstr(xml, "value=\"const\""));
	ASSERT(strstr(xml, "  <signal name=\"Alarm\">\n"
			   "   <arg name=\"reason\" type=\"s\"/>\n"
			   "   <arg name=\"level\" type=\"u\"/>\n"
			   "  </signal>\n"));
	ASSERT(strstr(xml, " <interface name=\"org.test.Other\">\n"));
	ASSERT(!strstr(xml, "<node name="));
	ASSERT(strcmp(xml + strlen(xml) - 8, "</node>\n") == 0);
	free(xml);

	/* paths above objects: the standard interfaces and the children, each once */
	xml = introspect("/");
	ASSERT(strstr(xml, "<node>\n <interface name=\"org.freedesktop.DBus.Peer\">"));
	ASSERT(!strstr(xml, "org.freedesktop.DBus.Properties"));
	ASSERT(strstr(xml, " </interface>\n <node name=\"org\"/>\n</node>\n"));
	free(xml);
	xml = introspect("/org/test");
	ASSERT(strstr(xml, " <interface name=\"org.freedesktop.DBus.ObjectManager\">\n"));
	ASSERT(strstr(xml, " <node name=\"hall\"/>\n <node name=\"attic\"/>\n</node>\n"));
	free(xml);
}

static void test_peer(void)
{
	char id[64] = "", *want = NULL;
	const char *got;
	brokerd_msg *r;
	FILE *f;

	r = answer(new_call("/any/path", "org.freedesktop.DBus.Peer", "Ping"));
	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_REPLY);
	brokerd_msg_unref(r);
	r = answer(new_call("/", NULL, "Ping"));
	ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_REPLY);
	brokerd_msg_unref(r);

	f = fopen("/etc/machine-id", "re");
	if (f && fgets(id, sizeof(id), f) && strlen(id) == 33)
		want = strndup(id, 32);
	if (f)
		fclose(f);
	r = answer(new_call("/", "org.freedesktop.DBus.Peer", "GetMachineId"));
	if (want) {
		ASSERT_INT(brokerd_msg_read(r, "s", &got), ==, 1);
		ASSERT_STR(got, want);
	} else {
		/* a machine without an ID says so */
		ASSERT_INT(brokerd_msg_get_type(r), ==, BROKERD_MSG_ERROR);
	}
	brokerd_msg_unref(r);
	free(want);
}

/* Reads one interface's a{sv} from an ObjectManager body: its property names, space-separated. */
static void read_props(brokerd_msg *r, char *buf, size_t size)
{
	const char *key;
	size_t n = 0;

	buf[0] = 0;
	ASSERT_INT(brokerd_msg_enter_container(r, 'a', "{sv}"), ==, 1);
	while (brokerd_msg_enter_container(r, '{', "sv") > 0) {
		ASSERT_INT(brokerd_msg_read_basic(r, 's', &key), ==, 1);
		n += (size_t)snprintf(buf + n, size - n, "%s ", key);
		ASSERT_INT(brokerd_msg_exit_container(r), ==, 0);
	}
	ASSERT_INT(brokerd_msg_exit_container(r), ==, 0);
}

/* Reads a{sa{sv}} as "iface: props; ..." */
static void read_interfaces(brokerd_msg *r, char *buf, size_t size)
{
	char props[128];
	const char *iface;
	size_t n = 0;

	buf[0] = 0;
	ASSERT_INT(brokerd_msg_enter_container(r, 'a', "{sa{sv}}"), ==, 1);
	while (brokerd_msg_enter_container(r, '{', "sa{sv}") > 0) {
		ASSERT_INT(brokerd_msg_read_basic(r, 's', &iface), ==, 1);
		read_props(r, props, sizeof(props));
		n += (size_t)snprintf(buf + n, size - n, "%s: %s; ", iface, props);
		ASSERT_INT(brokerd_msg_exit_container(r), ==, 0);
	}
	ASSERT_INT(brokerd_msg_exit_container(r), ==, 0);
}

static void test_object_manager(void)
{
	char ifaces[256];
	const char *path;
	brokerd_msg *r;

	r = answer(new_call("/org/test", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"));
	ASSERT_STR(brokerd_msg_get_signature(r), "a{oa{sa{sv}}}");
	ASSERT_INT(brokerd_msg_enter_container(r, 'a', "{oa{sa{sv}}}"), ==, 1);
	ASSERT_INT(brokerd_msg_enter_container(r, '{', "oa{sa{sv}}"), ==, 1);
	ASSERT_INT(brokerd_msg_read_basic(r, 'o', &path), ==, 1);
	ASSERT_STR(path, "/org/test/hall");
	read_interfaces(r, ifaces, sizeof(ifaces));
	ASSERT_STR(ifaces, "org.test.Thermostat: Target Mode Limits ; org.test.Other: ; ");
	ASSERT_INT(brokerd_msg_exit_container(r), ==, 0);
	ASSERT_INT(brokerd_msg_enter_container(r, '{', "oa{sa{sv}}"), ==, 1);
	ASSERT_INT(brokerd_msg_read_basic(r, 'o', &path), ==, 1);
	ASSERT_STR(path, "/org/test/attic/fan");
	ASSERT_INT(brokerd_msg_exit_container(r), ==, 0);
	ASSERT_INT(brokerd_msg_enter_container(r, '{', "oa{sa{sv}}"), ==, 0);
	brokerd_msg_unref(r);
	/* only where a manager is registered */
	answer_error(new_call("/org/test/hall", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"),
		     BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE);

	ASSERT_INT(brokerd_bus_emit_interfaces_added(bus, SVC, "/org/test/hall",
						     (const char *const[]){ "org.test.Thermostat", NULL }),
		   ==, 0);
	r = sent_msg(n_out - 1);
	ASSERT_STR(brokerd_msg_get_path(r), "/org/test");
	ASSERT_STR(brokerd_msg_get_member(r), "InterfacesAdded");
	ASSERT_INT(brokerd_msg_read_basic(r, 'o', &path), ==, 1);
	ASSERT_STR(path, "/org/test/hall");
	read_interfaces(r, ifaces, sizeof(ifaces));
	ASSERT_STR(ifaces, "org.test.Thermostat: Target Mode Limits ; ");
	brokerd_msg_unref(r);

	ASSERT_INT(brokerd_bus_emit_interfaces_removed(bus, SVC, "/org/test/hall", NULL), ==, 0);
	r = sent_msg(n_out - 1);
	ASSERT_STR(brokerd_msg_get_member(r), "InterfacesRemoved");
	ASSERT_STR(brokerd_msg_get_signature(r), "oas");
	ASSERT_INT(brokerd_msg_read_basic(r, 'o', &path), ==, 1);
	ASSERT_INT(brokerd_msg_enter_container(r, 'a', "s"), ==, 1);
	ASSERT_INT(brokerd_msg_read_basic(r, 's', &path), ==, 1);
	ASSERT_STR(path, "org.test.Thermostat");
	ASSERT_INT(brokerd_msg_read_basic(r, 's', &path), ==, 1);
	ASSERT_STR(path, "org.test.Other");
	ASSERT_INT(brokerd_msg_read_basic(r, 's', &path), ==, 0);
	brokerd_msg_unref(r);

	ASSERT_INT(brokerd_bus_emit_interfaces_added(bus, SVC, "/elsewhere", NULL), ==, -ENOENT);
	ASSERT_INT(brokerd_bus_emit_interfaces_added(bus, SVC, "/org/test/hall",
						     (const char *const[]){ "org.test.Nope", NULL }),
		   ==, -ENOENT);
}

static int on_method_slot(brokerd_msg *call, void *userdata)
{
	(*(unsigned int *)userdata)++;
	return 0;
}

/*
 * Through the whole dispatch: a method slot of the exact member comes
 * before the objects, the objects before the catch-all slot, which gets
 * what they do not serve.
 */
static void test_routing(void)
{
	unsigned int exact = 0, any = 0, frobs = hall.n_frobs, before = n_out;
	brokerd_slot *s_exact = NULL, *s_any = NULL;
	brokerd_msg *r;

	ASSERT_INT(brokerd_bus_add_method(bus, &s_exact, SVC, "Frob", on_method_slot, &exact), ==, 0);
	receive_on_chan(new_call("/org/test/hall", "org.test.Thermostat", "Frob"));
	ASSERT_INT(exact, ==, 1);
	ASSERT_INT(hall.n_frobs, ==, frobs);
	brokerd_slot_free(s_exact);
	receive_on_chan(new_call("/org/test/hall", "org.test.Thermostat", "Frob"));
	ASSERT_INT(hall.n_frobs, ==, frobs + 1);

	ASSERT_INT(brokerd_bus_add_method(bus, &s_any, SVC, NULL, on_method_slot, &any), ==, 0);
	receive_on_chan(new_call("/org/test/hall", "org.test.Thermostat", "Frob"));
	ASSERT_INT(hall.n_frobs, ==, frobs + 2);
	ASSERT_INT(any, ==, 0);
	receive_on_chan(new_call("/org/test/cellar", "org.test.Thermostat", "Frob"));
	receive_on_chan(new_call("/org/test/hall", "org.test.Thermostat", "Melt"));
	ASSERT_INT(any, ==, 2);
	brokerd_slot_free(s_any);
	/* every call was answered once */
	ASSERT_INT(n_out, ==, before + 5);

	receive_on_chan(new_call("/org/test/cellar", "org.test.Thermostat", "Frob"));
	r = sent_msg(n_out - 1);
	ASSERT_STR(brokerd_msg_get_error_name(r), BROKERD_DBUS_ERROR_UNKNOWN_OBJECT);
	brokerd_msg_unref(r);
}

int main(void)
{
	brokerd_slot *slots[4] = { NULL };

	setup();
	test_register(slots);
	test_methods();
	test_properties();
	test_introspect();
	test_peer();
	test_object_manager();
	test_routing();

	/* freed, the object is gone */
	for (size_t i = 0; i < ELEMENTSOF(slots); i++)
		brokerd_slot_free(slots[i]);
	ASSERT_INT(receive(new_call("/org/test/hall", "org.test.Thermostat", "Frob"), false), ==, 0);
	teardown();
	printf("objects: all passed\n");
	return 0;
}
