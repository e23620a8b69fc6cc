/* SPDX-License-Identifier: MIT */
/*
 * client-objects - objects between real processes. A root service owns
 * org.brokerd.test.Objects and registers, with libbrokerd's vtables, an
 * object manager on /org/brokerd/test and the object
 * /org/brokerd/test/thermo (interface org.brokerd.test.Thermo1: a method
 * echoing every D-Bus type, properties of which one is writable and one
 * holds nested variants, methods that change a property and add or remove
 * child objects). A client in another process calls it with the typed API,
 * reads and sets properties, hears PropertiesChanged and
 * InterfacesAdded/Removed as a subscriber, gets the D-Bus errors for
 * wrong arguments and for what does not exist, pings the peer, and parses
 * the Introspect XML with expat, the XML parser dbus-daemon uses (loaded
 * at run time: the image has the library through the dbus package).
 */
#include <dlfcn.h>
#include <inttypes.h>

#include "tests/integration/client/testlib.h"

#define NAME	   "org.brokerd.test.Objects"
#define ROOT	   "/org/brokerd/test"
#define THERMO	   ROOT "/thermo"
#define IFACE	   "org.brokerd.test.Thermo1"
#define PROPS	   "org.freedesktop.DBus.Properties"
#define ECHO_TYPES "ybnqiuxtdsogva{sv}(iav)"
#define DOCTYPE	   "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\""

/* --- The service ------------------------------------------------------------------ */

static brokerd_bus *service_bus;
static int32_t target = 21;

/* Copies the next value of src to dst, whatever its type; 0 at the end of the container. */
static int copy_value(brokerd_msg *src, brokerd_msg *dst)
{
	const char *contents;
	char type, sig[256];
	/* room for any basic value: read_basic() stores the C type of the value's code */
	union {
		uint64_t n;
		double d;
		const char *s;
	} v;
	int k;

	k = brokerd_msg_peek_type(src, &type, &contents);
	if (k <= 0)
		return k;
	if (type == 'a' || type == '(' || type == '{' || type == 'v') {
		snprintf(sig, sizeof(sig), "%s", contents);
		CHECK_R(brokerd_msg_enter_container(src, type, sig), 1);
		CHECK_R(brokerd_msg_open_container(dst, type, sig), 0);
		while ((k = copy_value(src, dst)) > 0)
			;
		CHECK_R(k, 0);
		CHECK_R(brokerd_msg_exit_container(src), 0);
		CHECK_R(brokerd_msg_close_container(dst), 0);
		return 1;
	}
	CHECK_R(brokerd_msg_read_basic(src, type, &v), 1);
	CHECK_R(brokerd_msg_append_basic(dst, type,
					 type == 's' || type == 'o' || type == 'g' ? (void *)v.s : &v),
		0);
	return 1;
}

/* Echo: answers with its arguments, copied value by value. */
static int on_echo(brokerd_msg *call, void *u)
{
	brokerd_msg *r = NULL;
	int k;

	CHECK_R(brokerd_msg_new_reply(call, &r), 0);
	while ((k = copy_value(call, r)) > 0)
		;
	CHECK_R(k, 0);
	k = brokerd_bus_send(service_bus, r);
	brokerd_msg_unref(r);
	return k;
}

/* Bump: the target goes up by one, and the subscribers are told. */
static int on_bump(brokerd_msg *call, void *u)
{
	target++;
	CHECK_R(brokerd_bus_emit_properties_changed(service_bus, NAME, THERMO, IFACE, NULL), 0);
	return brokerd_msg_return(call, "i", target);
}

static int on_fail(brokerd_msg *call, void *u)
{
	return brokerd_msg_reply_errorf(call, "org.brokerd.test.Error.Broken", "broken by %s",
					brokerd_msg_get_sender(call));
}

static int get_target(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *u)
{
	return brokerd_msg_append_basic(m, 'i', &target);
}

static int set_target(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *u)
{
	int32_t v;

	CHECK_R(brokerd_msg_read_basic(m, 'i', &v), 1);
	if (v < 5 || v > 40)
		return -EINVAL;
	target = v;
	return 0;
}

static int get_mode(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		    brokerd_msg *m, void *u)
{
	return brokerd_msg_append(m, "s", target > 25 ? "cool" : "heat");
}

static int get_limits(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		      brokerd_msg *m, void *u)
{
	/* variants in variants: {"range": <(5, 40)>, "nested": <<<"deep">>>} */
	return brokerd_msg_append(m, "a{sv}", 2U, "range", "(ii)", 5, 40, "nested", "v", "v", "s", "deep");
}

static int get_name(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		    brokerd_msg *m, void *u)
{
	return brokerd_msg_append(m, "s", strrchr(path, '/') + 1);
}

static const struct brokerd_vtable child_vtable[] = {
	BROKERD_PROPERTY("Name", "s", get_name, BROKERD_PROPERTY_CONST),
	BROKERD_VTABLE_END_ENTRY,
};

static brokerd_slot *child_slot;

static int on_add_child(brokerd_msg *call, void *u)
{
	const char *name;
	char path[128];

	CHECK_R(brokerd_msg_read(call, "s", &name), 1);
	snprintf(path, sizeof(path), ROOT "/%s", name);
	CHECK(!child_slot);
	CHECK_R(brokerd_bus_add_object(service_bus, &child_slot, path, "org.brokerd.test.Child1",
				       child_vtable, NULL),
		0);
	CHECK_R(brokerd_bus_emit_interfaces_added(service_bus, NAME, path, NULL), 0);
	return brokerd_msg_return(call, "o", path);
}

static int on_remove_child(brokerd_msg *call, void *u)
{
	const char *name;
	char path[128];

	CHECK_R(brokerd_msg_read(call, "s", &name), 1);
	snprintf(path, sizeof(path), ROOT "/%s", name);
	CHECK(child_slot);
	CHECK_R(brokerd_bus_emit_interfaces_removed(service_bus, NAME, path, NULL), 0);
	child_slot = brokerd_slot_free(child_slot);
	return 0;
}

static const struct brokerd_vtable thermo_vtable[] = {
	BROKERD_METHOD_NAMED("Echo", ECHO_TYPES, NULL, ECHO_TYPES, NULL, on_echo, 0),
	BROKERD_METHOD_NAMED("Bump", "", NULL, "i", "target", on_bump, 0),
	BROKERD_METHOD("Fail", "", "", on_fail),
	BROKERD_METHOD_NAMED("AddChild", "s", "name", "o", "path", on_add_child, 0),
	BROKERD_METHOD_NAMED("RemoveChild", "s", "name", "", NULL, on_remove_child, 0),
	BROKERD_WRITABLE_PROPERTY("Target", "i", get_target, set_target, BROKERD_PROPERTY_EMITS_CHANGE),
	BROKERD_PROPERTY("Mode", "s", get_mode, BROKERD_PROPERTY_EMITS_INVALIDATION),
	BROKERD_PROPERTY("Limits", "a{sv}", get_limits, BROKERD_PROPERTY_CONST),
	BROKERD_SIGNAL_NAMED("Alarm", "su", "reason level", 0),
	BROKERD_VTABLE_END_ENTRY,
};

static int service(void *arg)
{
	int ready_fd = (int)(intptr_t)arg;

	service_bus = t_open();
	CHECK_R(brokerd_bus_add_object_manager(service_bus, NULL, ROOT), 0);
	CHECK_R(brokerd_bus_add_object(service_bus, NULL, THERMO, IFACE, thermo_vtable, NULL), 0);
	CHECK_R(brokerd_bus_request_name(service_bus, NAME, 0), BROKERD_NAME_PRIMARY_OWNER);
	t_say(ready_fd, "ready");
	return brokerd_bus_run(service_bus) < 0;
}

/* --- The client ------------------------------------------------------------------------- */

static brokerd_bus *bus;

/* path.interface.member() with the values of types: the reply (or error) and the call's result. */
static int call(brokerd_msg **reply, const char *path, const char *interface, const char *member,
		const char *types, ...)
{
	brokerd_msg *m = NULL;
	va_list ap;
	int k;

	CHECK_R(brokerd_msg_new_call(bus, &m, NAME, path, interface, member), 0);
	if (types) {
		/* the typed API has no va_list form: the tests pass at most three values */
		const void *a[3] = { NULL };

		va_start(ap, types);
		for (size_t i = 0; i < strlen(types) && i < 3; i++)
			a[i] = va_arg(ap, const void *);
		va_end(ap);
		CHECK_R(brokerd_msg_append(m, types, a[0], a[1], a[2]), 0);
	}
	*reply = NULL;
	k = brokerd_bus_call_msg(bus, m, 10000000, reply);
	brokerd_msg_unref(m);
	return k;
}

/* The call fails with error name want; its message is returned (static). */
static const char *call_error(const char *want, const char *path, const char *interface, const char *member,
			      const char *types, const char *arg)
{
	static char text[256];
	brokerd_msg *r;
	const char *s;

	CHECK_R(call(&r, path, interface, member, types, arg), -EREMOTEIO);
	if (strcmp(brokerd_msg_get_error_name(r), want) != 0)
		FAIL("%s.%s: error %s, want %s", interface, member, brokerd_msg_get_error_name(r), want);
	CHECK_R(brokerd_msg_read(r, "s", &s), 1);
	snprintf(text, sizeof(text), "%s", s);
	brokerd_msg_unref(r);
	return text;
}

static void test_echo(void)
{
	brokerd_msg *m = NULL, *r = NULL;
	uint8_t y;
	int b;
	int16_t n;
	uint16_t q;
	int32_t i, st;
	uint32_t u;
	int64_t x;
	uint64_t t;
	double d;
	const char *s, *o, *g, *key, *deep;

	CHECK_R(brokerd_msg_new_call(bus, &m, NAME, THERMO, IFACE, "Echo"), 0);
	CHECK_R(brokerd_msg_append(m, "ybnqiuxtdsog", 0xfe, 1, -2, 65535, INT32_MIN, UINT32_MAX, INT64_MIN,
				   UINT64_MAX, -0.5, "grüße", "/a/b", "a{sv}"),
		0);
	/* v: a variant holding a variant holding a struct with an array of variants */
	CHECK_R(brokerd_msg_append(m, "v", "v", "(sav)", "in", 2U, "u", 7U, "v", "s", "deepest"), 0);
	CHECK_R(brokerd_msg_append(m, "a{sv}", 2U, "one", "i", 1, "two", "as", 2U, "x", "y"), 0);
	CHECK_R(brokerd_msg_append(m, "(iav)", 9, 1U, "d", 2.25), 0);
	CHECK_R(brokerd_bus_call_msg(bus, m, 10000000, &r), 0);
	brokerd_msg_unref(m);

	CHECK(strcmp(brokerd_msg_get_signature(r), ECHO_TYPES) == 0);
	CHECK_R(brokerd_msg_read(r, "ybnqiuxtdsog", &y, &b, &n, &q, &i, &u, &x, &t, &d, &s, &o, &g), 1);
	CHECK(y == 0xfe && b == 1 && n == -2 && q == 65535 && i == INT32_MIN && u == UINT32_MAX &&
	      x == INT64_MIN && t == UINT64_MAX && d == -0.5);
	CHECK(strcmp(s, "grüße") == 0 && strcmp(o, "/a/b") == 0 && strcmp(g, "a{sv}") == 0);
	CHECK_R(brokerd_msg_enter_container(r, 'v', "v"), 1);
	CHECK_R(brokerd_msg_enter_container(r, 'v', "(sav)"), 1);
	CHECK_R(brokerd_msg_enter_container(r, '(', "sav"), 1);
	CHECK_R(brokerd_msg_read(r, "s", &s), 1);
	CHECK(strcmp(s, "in") == 0);
	CHECK_R(brokerd_msg_enter_container(r, 'a', "v"), 1);
	CHECK_R(brokerd_msg_read(r, "vv", "u", &u, "v", "s", &deep), 1);
	CHECK(u == 7 && strcmp(deep, "deepest") == 0);
	CHECK_R(brokerd_msg_exit_container(r), 0);
	CHECK_R(brokerd_msg_exit_container(r), 0);
	CHECK_R(brokerd_msg_exit_container(r), 0);
	CHECK_R(brokerd_msg_exit_container(r), 0);
	CHECK_R(brokerd_msg_enter_container(r, 'a', "{sv}"), 1);
	CHECK_R(brokerd_msg_read(r, "{sv}", &key, "i", &i), 1);
	CHECK(strcmp(key, "one") == 0 && i == 1);
	CHECK_R(brokerd_msg_exit_container(r), 0);
	CHECK_R(brokerd_msg_enter_container(r, '(', "iav"), 1);
	CHECK_R(brokerd_msg_read(r, "i", &st), 1);
	CHECK_R(brokerd_msg_enter_container(r, 'a', "v"), 1);
	CHECK_R(brokerd_msg_read(r, "v", "d", &d), 1);
	CHECK(st == 9 && d == 2.25);
	brokerd_msg_unref(r);
	t_log("Echo of %s: every value back", ECHO_TYPES);
}

static void test_errors(void)
{
	const char *text;

	text = call_error(BROKERD_DBUS_ERROR_INVALID_ARGS, THERMO, IFACE, "Echo", "s", "wrong");
	CHECK(strcmp(text, "Invalid arguments 's' to call " IFACE ".Echo(), expecting '" ECHO_TYPES "'.") ==
	      0);
	text = call_error(BROKERD_DBUS_ERROR_UNKNOWN_OBJECT, ROOT "/nothing", IFACE, "Bump", NULL, NULL);
	CHECK(strcmp(text, "Unknown object '" ROOT "/nothing'.") == 0);
	text = call_error(BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE, THERMO, "org.brokerd.test.Nope", "Bump", NULL,
			  NULL);
	CHECK(strstr(text, "org.brokerd.test.Nope"));
	text = call_error(BROKERD_DBUS_ERROR_UNKNOWN_METHOD, THERMO, IFACE, "Melt", NULL, NULL);
	CHECK(strstr(text, "'Melt'"));
	text = call_error("org.brokerd.test.Error.Broken", THERMO, IFACE, "Fail", NULL, NULL);
	CHECK(strncmp(text, "broken by :1.", 13) == 0);
	t_log("errors: InvalidArgs, UnknownObject, UnknownInterface, UnknownMethod, a custom one");
}

/* PropertiesChanged heard by the subscriber: "Target=N" and/or "-Mode" for an invalidation. */
static char changed[128];
static volatile bool heard_changed;

static int on_properties_changed(brokerd_msg *m, void *u)
{
	const char *iface, *name;
	size_t n = 0;
	int32_t v;

	if (strcmp(brokerd_msg_get_member(m), "PropertiesChanged") != 0)
		return 0;
	CHECK(strcmp(brokerd_msg_get_path(m), THERMO) == 0);
	CHECK(strcmp(brokerd_msg_get_signature(m), "sa{sv}as") == 0);
	CHECK_R(brokerd_msg_read(m, "s", &iface), 1);
	CHECK(strcmp(iface, IFACE) == 0);
	CHECK_R(brokerd_msg_enter_container(m, 'a', "{sv}"), 1);
	while (brokerd_msg_read(m, "{sv}", &name, "i", &v) == 1)
		n += (size_t)snprintf(changed + n, sizeof(changed) - n, "%s=%d ", name, v);
	CHECK_R(brokerd_msg_exit_container(m), 0);
	CHECK_R(brokerd_msg_enter_container(m, 'a', "s"), 1);
	while (brokerd_msg_read(m, "s", &name) == 1)
		n += (size_t)snprintf(changed + n, sizeof(changed) - n, "-%s ", name);
	heard_changed = true;
	return 0;
}

static void expect_changed(const char *want)
{
	CHECK(t_pump(bus, &heard_changed, 5000));
	if (strcmp(changed, want) != 0)
		FAIL("PropertiesChanged \"%s\", want \"%s\"", changed, want);
	heard_changed = false;
	changed[0] = 0;
}

static void test_properties(void)
{
	brokerd_msg *m = NULL, *r = NULL;
	const char *key, *s;
	int32_t v, lo, hi;

	CHECK_R(call(&r, THERMO, PROPS, "Get", "ss", IFACE, "Target"), 0);
	CHECK_R(brokerd_msg_read(r, "v", "i", &v), 1);
	CHECK(v == 21);
	brokerd_msg_unref(r);

	CHECK_R(call(&r, THERMO, PROPS, "Get", "ss", IFACE, "Limits"), 0);
	CHECK_R(brokerd_msg_enter_container(r, 'v', "a{sv}"), 1);
	CHECK_R(brokerd_msg_enter_container(r, 'a', "{sv}"), 1);
	CHECK_R(brokerd_msg_read(r, "{sv}", &key, "(ii)", &lo, &hi), 1);
	CHECK(strcmp(key, "range") == 0 && lo == 5 && hi == 40);
	CHECK_R(brokerd_msg_read(r, "{sv}", &key, "v", "v", "s", &s), 1);
	CHECK(strcmp(key, "nested") == 0 && strcmp(s, "deep") == 0);
	brokerd_msg_unref(r);

	CHECK_R(call(&r, THERMO, PROPS, "GetAll", "s", IFACE), 0);
	CHECK(strcmp(brokerd_msg_get_signature(r), "a{sv}") == 0);
	CHECK_R(brokerd_msg_enter_container(r, 'a', "{sv}"), 1);
	CHECK_R(brokerd_msg_read(r, "{sv}", &key, "i", &v), 1);
	CHECK(strcmp(key, "Target") == 0 && v == 21);
	CHECK_R(brokerd_msg_read(r, "{sv}", &key, "s", &s), 1);
	CHECK(strcmp(key, "Mode") == 0 && strcmp(s, "heat") == 0);
	brokerd_msg_unref(r);

	/* Set: the reply, then PropertiesChanged with the new value */
	CHECK_R(brokerd_msg_new_call(bus, &m, NAME, THERMO, PROPS, "Set"), 0);
	CHECK_R(brokerd_msg_append(m, "ssv", IFACE, "Target", "i", 30), 0);
	CHECK_R(brokerd_bus_call_msg(bus, m, 10000000, &r), 0);
	brokerd_msg_unref(m);
	brokerd_msg_unref(r);
	expect_changed("Target=30 ");
	/* the setter refuses: InvalidArgs, nothing emitted */
	CHECK_R(brokerd_msg_new_call(bus, &m, NAME, THERMO, PROPS, "Set"), 0);
	CHECK_R(brokerd_msg_append(m, "ssv", IFACE, "Target", "i", 99), 0);
	CHECK_R(brokerd_bus_call_msg(bus, m, 10000000, &r), -EREMOTEIO);
	CHECK(strcmp(brokerd_msg_get_error_name(r), BROKERD_DBUS_ERROR_INVALID_ARGS) == 0);
	brokerd_msg_unref(m);
	brokerd_msg_unref(r);
	CHECK_R(brokerd_msg_new_call(bus, &m, NAME, THERMO, PROPS, "Set"), 0);
	CHECK_R(brokerd_msg_append(m, "ssv", IFACE, "Mode", "s", "cool"), 0);
	CHECK_R(brokerd_bus_call_msg(bus, m, 10000000, &r), -EREMOTEIO);
	CHECK(strcmp(brokerd_msg_get_error_name(r), BROKERD_DBUS_ERROR_PROPERTY_READ_ONLY) == 0);
	brokerd_msg_unref(m);
	brokerd_msg_unref(r);
	CHECK_R(call(&r, THERMO, PROPS, "Get", "ss", IFACE, "Colour"), -EREMOTEIO);
	CHECK(strcmp(brokerd_msg_get_error_name(r), BROKERD_DBUS_ERROR_UNKNOWN_PROPERTY) == 0);
	brokerd_msg_unref(r);

	/* the service changes the value itself: the value, and the invalidated name */
	CHECK_R(call(&r, THERMO, IFACE, "Bump", NULL), 0);
	CHECK_R(brokerd_msg_read(r, "i", &v), 1);
	CHECK(v == 31);
	brokerd_msg_unref(r);
	expect_changed("Target=31 -Mode ");
	t_log("properties: Get, GetAll, Set, nested variants, PropertiesChanged heard twice");
}

/* --- Introspection, parsed by expat -------------------------------------------------------- */

typedef void *(*xml_create_t)(const char *encoding);
typedef void (*xml_set_handlers_t)(void *p, void (*start)(void *, const char *, const char **),
				   void (*end)(void *, const char *));
typedef int (*xml_parse_t)(void *p, const char *s, int len, int final);
typedef int (*xml_error_t)(void *p);
typedef const char *(*xml_error_string_t)(int code);
typedef void (*xml_free_t)(void *p);

/* What the parser saw: each element as "name(name attribute)" or "name" , separated by spaces. */
static char outline[8192];
static size_t outline_len;

static void on_start(void *u, const char *el, const char **attrs)
{
	const char *name = NULL;

	for (size_t i = 0; attrs[i]; i += 2)
		if (strcmp(attrs[i], "name") == 0)
			name = attrs[i + 1];
	if (strcmp(el, "arg") == 0 || strcmp(el, "annotation") == 0)
		return; /* the outline keeps the structure */
	outline_len += (size_t)snprintf(outline + outline_len, sizeof(outline) - outline_len,
					name ? "%s(%s) " : "%s ", el, name);
	CHECK(outline_len < sizeof(outline));
}

static void on_end(void *u, const char *el)
{
}

/* Introspects path and returns the outline of the parsed XML. */
static const char *introspect(const char *path)
{
	static void *expat;
	static xml_create_t create;
	static xml_set_handlers_t set_handlers;
	static xml_parse_t parse;
	static xml_error_t error;
	static xml_error_string_t error_string;
	static xml_free_t parser_free;
	brokerd_msg *r = NULL;
	const char *xml;
	void *p;

	if (!expat) {
		expat = dlopen("libexpat.so.1", RTLD_NOW);
		if (!expat)
			FAIL("no XML parser: %s", dlerror());
		create = (xml_create_t)dlsym(expat, "XML_ParserCreate");
		set_handlers = (xml_set_handlers_t)dlsym(expat, "XML_SetElementHandler");
		parse = (xml_parse_t)dlsym(expat, "XML_Parse");
		error = (xml_error_t)dlsym(expat, "XML_GetErrorCode");
		error_string = (xml_error_string_t)dlsym(expat, "XML_ErrorString");
		parser_free = (xml_free_t)dlsym(expat, "XML_ParserFree");
		CHECK(create && set_handlers && parse && error && error_string && parser_free);
	}
	CHECK_R(call(&r, path, "org.freedesktop.DBus.Introspectable", "Introspect", NULL), 0);
	CHECK_R(brokerd_msg_read(r, "s", &xml), 1);
	CHECK(strncmp(xml, DOCTYPE, strlen(DOCTYPE)) == 0);
	outline_len = 0;
	outline[0] = 0;
	p = create(NULL);
	CHECK(p);
	set_handlers(p, on_start, on_end);
	if (!parse(p, xml, (int)strlen(xml), 1))
		FAIL("Introspect XML of %s does not parse: %s\n%s", path, error_string(error(p)), xml);
	parser_free(p);
	brokerd_msg_unref(r);
	return outline;
}

/* The standard interfaces of a path with an object, in the order they are listed. */
#define STANDARD_OUTLINE                                                                     \
	"node interface(org.freedesktop.DBus.Peer) method(Ping) method(GetMachineId) "       \
	"interface(org.freedesktop.DBus.Introspectable) method(Introspect) "                 \
	"interface(org.freedesktop.DBus.Properties) method(Get) method(GetAll) method(Set) " \
	"signal(PropertiesChanged) "

static void test_introspect(void)
{
	const char *o;

	o = introspect(THERMO);
	CHECK(strncmp(o, STANDARD_OUTLINE, strlen(STANDARD_OUTLINE)) == 0);
	if (!strstr(o, "interface(" IFACE ") method(Echo) method(Bump) method(Fail) method(AddChild) "
		       "method(RemoveChild) property(Target) property(Mode) property(Limits) signal(Alarm) "))
		FAIL("outline of " THERMO ": %s", o);
	CHECK(!strstr(o, "node("));
	o = introspect("/");
	if (strcmp(o, "node interface(org.freedesktop.DBus.Peer) method(Ping) method(GetMachineId) "
		      "interface(org.freedesktop.DBus.Introspectable) method(Introspect) node(org) ") != 0)
		FAIL("outline of /: %s", o);
	o = introspect(ROOT);
	CHECK(strstr(o, "interface(org.freedesktop.DBus.ObjectManager) method(GetManagedObjects) "
			"signal(InterfacesAdded) signal(InterfacesRemoved) "));
	CHECK(strstr(o, " node(thermo) "));
	t_log("Introspect XML of /, " ROOT " and " THERMO " parsed by expat");
}

/* --- The object manager and the peer ---------------------------------------------------------- */

static char om_event[256];
static volatile bool heard_om;

static int on_interfaces(brokerd_msg *m, void *u)
{
	const char *path, *iface, *key, *value;

	if (strcmp(brokerd_msg_get_member(m), "InterfacesAdded") == 0) {
		CHECK(strcmp(brokerd_msg_get_signature(m), "oa{sa{sv}}") == 0);
		CHECK_R(brokerd_msg_read(m, "o", &path), 1);
		CHECK_R(brokerd_msg_enter_container(m, 'a', "{sa{sv}}"), 1);
		CHECK_R(brokerd_msg_enter_container(m, '{', "sa{sv}"), 1);
		CHECK_R(brokerd_msg_read(m, "s", &iface), 1);
		CHECK_R(brokerd_msg_enter_container(m, 'a', "{sv}"), 1);
		CHECK_R(brokerd_msg_read(m, "{sv}", &key, "s", &value), 1);
		snprintf(om_event, sizeof(om_event), "added %s %s %s=%s", path, iface, key, value);
	} else if (strcmp(brokerd_msg_get_member(m), "InterfacesRemoved") == 0) {
		CHECK(strcmp(brokerd_msg_get_signature(m), "oas") == 0);
		CHECK_R(brokerd_msg_read(m, "o", &path), 1);
		CHECK_R(brokerd_msg_enter_container(m, 'a', "s"), 1);
		CHECK_R(brokerd_msg_read(m, "s", &iface), 1);
		snprintf(om_event, sizeof(om_event), "removed %s %s", path, iface);
	} else {
		return 0;
	}
	CHECK(strcmp(brokerd_msg_get_path(m), ROOT) == 0);
	heard_om = true;
	return 0;
}

static void expect_om(const char *want)
{
	CHECK(t_pump(bus, &heard_om, 5000));
	if (strcmp(om_event, want) != 0)
		FAIL("object manager said \"%s\", want \"%s\"", om_event, want);
	heard_om = false;
}

/* GetManagedObjects as "path:iface,iface; ..." */
static void managed_objects(char *buf, size_t size)
{
	brokerd_msg *r = NULL;
	const char *path, *iface;
	size_t n = 0;

	buf[0] = 0;
	CHECK_R(call(&r, ROOT, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", NULL), 0);
	CHECK(strcmp(brokerd_msg_get_signature(r), "a{oa{sa{sv}}}") == 0);
	CHECK_R(brokerd_msg_enter_container(r, 'a', "{oa{sa{sv}}}"), 1);
	while (brokerd_msg_enter_container(r, '{', "oa{sa{sv}}") > 0) {
		CHECK_R(brokerd_msg_read(r, "o", &path), 1);
		n += (size_t)snprintf(buf + n, size - n, "%s:", path);
		CHECK_R(brokerd_msg_enter_container(r, 'a', "{sa{sv}}"), 1);
		while (brokerd_msg_enter_container(r, '{', "sa{sv}") > 0) {
			CHECK_R(brokerd_msg_read(r, "s", &iface), 1);
			n += (size_t)snprintf(buf + n, size - n, "%s,", iface);
			CHECK_R(brokerd_msg_exit_container(r), 0);
		}
		CHECK_R(brokerd_msg_exit_container(r), 0);
		CHECK_R(brokerd_msg_exit_container(r), 0);
		n += (size_t)snprintf(buf + n, size - n, " ");
	}
	brokerd_msg_unref(r);
}

static void test_object_manager(void)
{
	char objects[512];
	brokerd_msg *r = NULL;
	const char *path;

	managed_objects(objects, sizeof(objects));
	CHECK(strcmp(objects, THERMO ":" IFACE ", ") == 0);
	CHECK_R(call(&r, THERMO, IFACE, "AddChild", "s", "fan"), 0);
	CHECK_R(brokerd_msg_read(r, "o", &path), 1);
	CHECK(strcmp(path, ROOT "/fan") == 0);
	brokerd_msg_unref(r);
	expect_om("added " ROOT "/fan org.brokerd.test.Child1 Name=fan");
	managed_objects(objects, sizeof(objects));
	if (strcmp(objects, THERMO ":" IFACE ", " ROOT "/fan:org.brokerd.test.Child1, ") != 0)
		FAIL("managed objects: %s", objects);
	CHECK_R(call(&r, THERMO, IFACE, "RemoveChild", "s", "fan"), 0);
	brokerd_msg_unref(r);
	expect_om("removed " ROOT "/fan org.brokerd.test.Child1");
	call_error(BROKERD_DBUS_ERROR_UNKNOWN_OBJECT, ROOT "/fan", PROPS, "GetAll", "s",
		   "org.brokerd.test.Child1");
	t_log("object manager: GetManagedObjects, InterfacesAdded, InterfacesRemoved");
}

static void test_peer(void)
{
	brokerd_msg *r = NULL;
	char want[64] = "";
	const char *id;
	FILE *f;

	CHECK_R(call(&r, "/", "org.freedesktop.DBus.Peer", "Ping", NULL), 0);
	brokerd_msg_unref(r);
	f = fopen("/etc/machine-id", "re");
	CHECK(f && fgets(want, sizeof(want), f));
	fclose(f);
	want[strcspn(want, "\n")] = 0;
	CHECK_R(call(&r, "/any/where", "org.freedesktop.DBus.Peer", "GetMachineId", NULL), 0);
	CHECK_R(brokerd_msg_read(r, "s", &id), 1);
	CHECK(strcmp(id, want) == 0);
	brokerd_msg_unref(r);
	t_log("peer: Ping, GetMachineId %s", id);
}

int main(void)
{
	int ready[2];
	pid_t srv;

	t_policy("[default]\nallow own org.brokerd.test.*\nallow send org.brokerd.test.*\n"
		 "allow receive org.brokerd.test.*\n");
	t_pipe(ready);
	srv = t_fork(service, (void *)(intptr_t)ready[1]);
	close(ready[1]);
	t_expect(ready[0], "ready", 5000);
	close(ready[0]);

	bus = t_open();
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "PropertiesChanged", on_properties_changed, NULL), 0);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Interfaces*", on_interfaces, NULL), 0);
	test_echo();
	test_errors();
	test_properties();
	test_introspect();
	test_object_manager();
	test_peer();
	CHECK(brokerd_bus_get_counter(bus, BROKERD_COUNTER_INVALID) == 0);
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
