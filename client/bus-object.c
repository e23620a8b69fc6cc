/* SPDX-License-Identifier: MIT */
/*
 * bus-object.c - objects: interfaces registered on object paths as vtables
 * of methods, properties and signals; a call routed to its method with the
 * arguments checked against the input signature, or answered with the
 * D-Bus error that says what was not found; and the standard interfaces
 * the library serves for them: Properties (and PropertiesChanged),
 * Introspectable (XML from the vtables), Peer and ObjectManager (and
 * InterfacesAdded/Removed). Everything is built with the typed message API
 * and sent through the public reply and signal functions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/bus-object.h"
#include "client/bus-slot.h"
#include "protocol/dbus-signature.h"

#define IFACE_PEER	     "org.freedesktop.DBus.Peer"
#define IFACE_INTROSPECTABLE "org.freedesktop.DBus.Introspectable"
#define IFACE_PROPERTIES     "org.freedesktop.DBus.Properties"
#define IFACE_OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#define MACHINE_ID_PATH	     "/etc/machine-id"

/* The standard interfaces, in the order Introspect lists them. */
static const char *const standard_interfaces[] = {
	IFACE_PEER,
	IFACE_INTROSPECTABLE,
	IFACE_PROPERTIES,
	IFACE_OBJECT_MANAGER,
};

static bool interface_is_standard(const char *interface)
{
	for (size_t i = 0; i < ELEMENTSOF(standard_interfaces); i++)
		if (strcmp(interface, standard_interfaces[i]) == 0)
			return true;
	return false;
}

static const char *sig_or_empty(const char *sig)
{
	return sig ? sig : "";
}

/* --- Finding objects -------------------------------------------------------------- */

/*
 * Slots are kept newest first; objects are listed in the order they were
 * registered, so walks start from the oldest.
 */
static struct brokerd_slot *slot_oldest(brokerd_bus *bus)
{
	struct brokerd_slot *s = bus->slots;

	while (s && s->next)
		s = s->next;
	return s;
}

#define FOREACH_OBJECT_SLOT(s, bus)                                     \
	for (struct brokerd_slot *s = slot_oldest(bus); s; s = s->prev) \
		if (s->type == SLOT_OBJECT)

static struct brokerd_slot *object_find(brokerd_bus *bus, const char *path, const char *interface)
{
	FOREACH_OBJECT_SLOT(s, bus)
	if (strcmp(s->name, path) == 0 && strcmp(s->member, interface) == 0)
		return s;
	return NULL;
}

static struct brokerd_slot *manager_find(brokerd_bus *bus, const char *path)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_OBJECT_MANAGER && strcmp(s->name, path) == 0)
			return s;
	return NULL;
}

static bool bus_has_objects(brokerd_bus *bus)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_OBJECT || s->type == SLOT_OBJECT_MANAGER)
			return true;
	return false;
}

/* Where the part of path below prefix starts, or NULL if path is not strictly below it. */
static const char *path_below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strcmp(prefix, "/") == 0)
		return path[1] ? path + 1 : NULL;
	if (strncmp(path, prefix, n) != 0 || path[n] != '/')
		return NULL;
	return path + n + 1;
}

/* Whether an object or an object manager lies below path (busctl tree walks through such paths). */
static bool path_has_children(brokerd_bus *bus, const char *path)
{
	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if ((s->type == SLOT_OBJECT || s->type == SLOT_OBJECT_MANAGER) && path_below(s->name, path))
			return true;
	return false;
}

/* The object manager nearest above path. */
static struct brokerd_slot *manager_above(brokerd_bus *bus, const char *path)
{
	struct brokerd_slot *best = NULL;

	for (struct brokerd_slot *s = bus->slots; s; s = s->next)
		if (s->type == SLOT_OBJECT_MANAGER && path_below(path, s->name) &&
		    (!best || strlen(s->name) > strlen(best->name)))
			best = s;
	return best;
}

static const struct brokerd_vtable *vtable_find(const struct brokerd_vtable *v, unsigned int kind,
						const char *member)
{
	for (; v->kind != BROKERD_VTABLE_END; v++)
		if (v->kind == kind && strcmp(v->member, member) == 0)
			return v;
	return NULL;
}

/* The first object registered on path, which stands for the path in listings. */
static struct brokerd_slot *object_first(brokerd_bus *bus, const char *path)
{
	FOREACH_OBJECT_SLOT(s, bus)
	if (strcmp(s->name, path) == 0)
		return s;
	return NULL;
}

static void msg_unrefp(brokerd_msg **m)
{
	brokerd_msg_unref(*m);
}

static bool strv_contains(const char *const *l, const char *s)
{
	for (; l && *l; l++)
		if (strcmp(*l, s) == 0)
			return true;
	return false;
}

/* --- Registering --------------------------------------------------------------------- */

/* Complete types in sig, or -EINVAL. */
static int signature_count(const char *sig)
{
	size_t len = strlen(sig);
	int n = 0, k;

	if (dbus_signature_validate(sig, len) < 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i += (size_t)k, n++) {
		k = dbus_signature_next(sig + i, len - i);
		if (k <= 0)
			return -EINVAL;
	}
	return n;
}

/* Whether names (NULL: none given) names each complete type of sig with a plain word. */
static bool names_fit(const char *names, const char *sig)
{
	int words = 0;

	if (!names)
		return true;
	for (const char *p = names; *p;) {
		size_t w = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

		if (w == 0)
			return false;
		words++;
		p += w;
		if (*p == ' ' && p[1])
			p++;
		else if (*p)
			return false;
	}
	return words == signature_count(sig);
}

static bool vtable_entry_is_valid(const struct brokerd_vtable *vtable, const struct brokerd_vtable *v)
{
	unsigned int emits = v->flags & (BROKERD_PROPERTY_EMITS_CHANGE | BROKERD_PROPERTY_EMITS_INVALIDATION |
					 BROKERD_PROPERTY_CONST);

	if (!ctrl_name_is_valid_member(v->member) || vtable_find(vtable, v->kind, v->member) != v)
		return false; /* invalid, or a second entry of that name */
	if (signature_count(sig_or_empty(v->signature)) < 0 ||
	    !names_fit(v->names, sig_or_empty(v->signature)))
		return false;
	switch (v->kind) {
	case BROKERD_VTABLE_METHOD:
		return v->method && signature_count(sig_or_empty(v->result)) >= 0 &&
		       names_fit(v->result_names, sig_or_empty(v->result)) &&
		       !(v->flags & ~(BROKERD_VTABLE_DEPRECATED | BROKERD_METHOD_NO_REPLY));
	case BROKERD_VTABLE_PROPERTY:
		/* one way of telling changes at the most */
		return v->get && v->signature && dbus_signature_is_single(v->signature) &&
		       (emits & (emits - 1)) == 0 && !(v->flags & BROKERD_METHOD_NO_REPLY);
	case BROKERD_VTABLE_SIGNAL:
		return !(v->flags & ~BROKERD_VTABLE_DEPRECATED);
	default:
		return false;
	}
}

_public_ int brokerd_bus_add_object(brokerd_bus *bus, brokerd_slot **ret_slot, const char *path,
				    const char *interface, const struct brokerd_vtable *vtable,
				    void *userdata)
{
	struct brokerd_slot *s;

	if (!bus || bus->closed || !path || !dbus_object_path_is_valid(path) || !interface ||
	    !chmsg_interface_is_valid(interface) || !vtable)
		return -EINVAL;
	for (const struct brokerd_vtable *v = vtable; v->kind != BROKERD_VTABLE_END; v++)
		if (!vtable_entry_is_valid(vtable, v))
			return -EINVAL;
	if (interface_is_standard(interface) || object_find(bus, path, interface))
		return -EEXIST;
	s = slot_new(bus, SLOT_OBJECT, path, interface, userdata);
	if (!s)
		return -ENOMEM;
	s->vtable = vtable;
	return slot_hand_out(s, ret_slot);
}

_public_ int brokerd_bus_add_object_manager(brokerd_bus *bus, brokerd_slot **ret_slot, const char *path)
{
	struct brokerd_slot *s;

	if (!bus || bus->closed || !path || !dbus_object_path_is_valid(path))
		return -EINVAL;
	if (manager_find(bus, path))
		return -EEXIST;
	s = slot_new(bus, SLOT_OBJECT_MANAGER, path, NULL, NULL);
	if (!s)
		return -ENOMEM;
	return slot_hand_out(s, ret_slot);
}

/* --- Values of properties ---------------------------------------------------------------- */

/* Appends the value of property v of object s as a variant. */
static int append_property(brokerd_msg *m, struct brokerd_slot *s, const struct brokerd_vtable *v)
{
	int k;

	k = brokerd_msg_open_container(m, 'v', v->signature);
	if (k < 0)
		return k;
	k = v->get(s->bus, s->name, s->member, v->member, m, s->userdata);
	if (k < 0)
		return k;
	return brokerd_msg_close_container(m);
}

/* Appends the a{sv} of object s's properties: those listed (NULL: all), and only those that emit their value. */
static int append_properties(brokerd_msg *m, struct brokerd_slot *s, const char *const *only, bool emitting)
{
	int k;

	k = brokerd_msg_open_container(m, 'a', "{sv}");
	for (const struct brokerd_vtable *v = s->vtable; k >= 0 && v->kind != BROKERD_VTABLE_END; v++) {
		if (v->kind != BROKERD_VTABLE_PROPERTY || (only && !strv_contains(only, v->member)) ||
		    (emitting && !(v->flags & BROKERD_PROPERTY_EMITS_CHANGE)))
			continue;
		k = brokerd_msg_open_container(m, '{', "sv");
		if (k >= 0)
			k = brokerd_msg_append_basic(m, 's', v->member);
		if (k >= 0)
			k = append_property(m, s, v);
		if (k >= 0)
			k = brokerd_msg_close_container(m);
	}
	return k < 0 ? k : brokerd_msg_close_container(m);
}

/* Appends the a{sa{sv}} of the interfaces of path: those listed (NULL: all) and their properties. */
static int append_interfaces(brokerd_msg *m, brokerd_bus *bus, const char *path, const char *const *only)
{
	int k;

	for (const char *const *i = only; i && *i; i++)
		if (!object_find(bus, path, *i))
			return -ENOENT;
	k = brokerd_msg_open_container(m, 'a', "{sa{sv}}");
	FOREACH_OBJECT_SLOT(s, bus)
	{
		if (k < 0)
			break;
		if (strcmp(s->name, path) != 0 || (only && !strv_contains(only, s->member)))
			continue;
		k = brokerd_msg_open_container(m, '{', "sa{sv}");
		if (k >= 0)
			k = brokerd_msg_append_basic(m, 's', s->member);
		if (k >= 0)
			k = append_properties(m, s, NULL, false);
		if (k >= 0)
			k = brokerd_msg_close_container(m);
	}
	return k < 0 ? k : brokerd_msg_close_container(m);
}

/* --- Emitting ------------------------------------------------------------------------------ */

_public_ int brokerd_bus_emit_properties_changed(brokerd_bus *bus, const char *name, const char *path,
						 const char *interface, const char *const *properties)
{
	_cleanup_(msg_unrefp) brokerd_msg *m = NULL;
	const struct brokerd_vtable *v;
	struct brokerd_slot *s;
	int k;

	if (!bus || !path || !interface)
		return -EINVAL;
	s = object_find(bus, path, interface);
	if (!s)
		return -ENOENT;
	for (const char *const *p = properties; p && *p; p++) {
		v = vtable_find(s->vtable, BROKERD_VTABLE_PROPERTY, *p);
		if (!v)
			return -ENOENT;
		if (!(v->flags & (BROKERD_PROPERTY_EMITS_CHANGE | BROKERD_PROPERTY_EMITS_INVALIDATION)))
			return -EINVAL; /* declared as never changing visibly */
	}
	k = brokerd_msg_new_signal(bus, &m, name, path, IFACE_PROPERTIES, "PropertiesChanged");
	if (k >= 0)
		k = brokerd_msg_append_basic(m, 's', interface);
	if (k >= 0)
		k = append_properties(m, s, properties, true);
	if (k >= 0)
		k = brokerd_msg_open_container(m, 'a', "s");
	for (v = s->vtable; k >= 0 && v->kind != BROKERD_VTABLE_END; v++)
		if (v->kind == BROKERD_VTABLE_PROPERTY && (v->flags & BROKERD_PROPERTY_EMITS_INVALIDATION) &&
		    (!properties || strv_contains(properties, v->member)))
			k = brokerd_msg_append_basic(m, 's', v->member);
	if (k >= 0)
		k = brokerd_msg_close_container(m);
	return k < 0 ? k : brokerd_bus_send(bus, m);
}

static int emit_interfaces(brokerd_bus *bus, const char *name, const char *path,
			   const char *const *interfaces, bool added)
{
	_cleanup_(msg_unrefp) brokerd_msg *m = NULL;
	struct brokerd_slot *manager;
	int k;

	if (!bus || !path || !dbus_object_path_is_valid(path))
		return -EINVAL;
	manager = manager_above(bus, path);
	if (!manager)
		return -ENOENT;
	k = brokerd_msg_new_signal(bus, &m, name, manager->name, IFACE_OBJECT_MANAGER,
				   added ? "InterfacesAdded" : "InterfacesRemoved");
	if (k >= 0)
		k = brokerd_msg_append_basic(m, 'o', path);
	if (k < 0)
		return k;
	if (added) {
		k = append_interfaces(m, bus, path, interfaces);
	} else if (interfaces) {
		/* removed: they need no longer be registered */
		k = brokerd_msg_open_container(m, 'a', "s");
		for (const char *const *i = interfaces; k >= 0 && *i; i++)
			k = brokerd_msg_append_basic(m, 's', *i);
		if (k >= 0)
			k = brokerd_msg_close_container(m);
	} else {
		k = brokerd_msg_open_container(m, 'a', "s");
		FOREACH_OBJECT_SLOT(s, bus)
		if (k >= 0 && strcmp(s->name, path) == 0)
			k = brokerd_msg_append_basic(m, 's', s->member);
		if (k >= 0)
			k = brokerd_msg_close_container(m);
	}
	return k < 0 ? k : brokerd_bus_send(bus, m);
}

_public_ int brokerd_bus_emit_interfaces_added(brokerd_bus *bus, const char *name, const char *path,
					       const char *const *interfaces)
{
	return emit_interfaces(bus, name, path, interfaces, true);
}

_public_ int brokerd_bus_emit_interfaces_removed(brokerd_bus *bus, const char *name, const char *path,
						 const char *const *interfaces)
{
	return emit_interfaces(bus, name, path, interfaces, false);
}

/* --- Answering calls ------------------------------------------------------------------------ */

/* An errno of a handler as the D-Bus error a caller can act on. */
static int reply_errno(brokerd_msg *call, int error)
{
	const char *name;

	switch (error) {
	case -EINVAL:
		name = BROKERD_DBUS_ERROR_INVALID_ARGS;
		break;
	case -EACCES:
	case -EPERM:
		name = BROKERD_DBUS_ERROR_ACCESS_DENIED;
		break;
	case -ENOMEM:
		name = BROKERD_DBUS_ERROR_NO_MEMORY;
		break;
	default:
		name = BROKERD_DBUS_ERROR_FAILED;
		break;
	}
	return brokerd_msg_reply_error(call, name, strerror(-error));
}

/* Whether the call is answered, will be (the handler kept it), or wants no answer. */
static bool call_is_settled(brokerd_msg *call)
{
	return call->replied || (call->flags & CHMSG_F_NO_REPLY_EXPECTED) || call->n_ref > 1;
}

/* Sends reply (built, owned here) or, when building it failed with k, the error. */
static int reply_or_error(brokerd_msg *call, brokerd_msg *reply, int k)
{
	if (k >= 0)
		k = brokerd_bus_send(call->bus, reply);
	brokerd_msg_unref(reply);
	if (k < 0 && !call->replied)
		(void)reply_errno(call, k);
	return k;
}

static bool call_has_signature(brokerd_msg *call, const char *sig)
{
	if (strcmp(call->signature, sig) == 0)
		return true;
	(void)brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_INVALID_ARGS,
				       "Invalid arguments '%s' to call %s.%s(), expecting '%s'.",
				       call->signature, call->interface, call->member, sig);
	return false;
}

static int reply_unknown_interface(brokerd_msg *call, const char *interface)
{
	return brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE,
					"Unknown interface '%s' on object '%s'.", interface, call->path);
}

static int reply_unknown_method(brokerd_msg *call)
{
	return brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_UNKNOWN_METHOD,
					"Unknown method '%s' or interface '%s' on object '%s'.", call->member,
					call->interface, call->path);
}

/* Whether call is of this member and signature; if not, it is answered so. */
static bool call_is_method(brokerd_msg *call, const char *member, const char *sig)
{
	if (strcmp(call->member, member) == 0)
		return call_has_signature(call, sig);
	(void)reply_unknown_method(call);
	return false;
}

static void peer_call(brokerd_msg *call)
{
	char id[64];
	FILE *f;
	size_t n;

	if (strcmp(call->member, "Ping") == 0) {
		if (call_has_signature(call, ""))
			(void)brokerd_msg_reply_data(call, NULL, NULL, 0);
		return;
	}
	if (!call_is_method(call, "GetMachineId", ""))
		return;
	f = fopen(MACHINE_ID_PATH, "re");
	n = f ? fread(id, 1, sizeof(id) - 1, f) : 0;
	if (f)
		fclose(f);
	/* 32 lower-case hex digits and a newline */
	if (n < 32 || strspn(id, "0123456789abcdef") < 32 || (n > 32 && id[32] != '\n')) {
		(void)brokerd_msg_reply_error(call, BROKERD_DBUS_ERROR_FAILED,
					      "No machine ID in " MACHINE_ID_PATH);
		return;
	}
	id[32] = 0;
	(void)brokerd_msg_return(call, "s", id);
}

/* Writes the <arg> elements of sig, named by names. */
static void xml_args(FILE *f, const char *sig, const char *names, const char *direction)
{
	size_t len = strlen(sig), w;
	int k;

	for (size_t i = 0; i < len; i += (size_t)k) {
		k = dbus_signature_next(sig + i, len - i);
		BUG_ON(k <= 0); /* checked when registered */
		fputs("   <arg", f);
		if (names && *names) {
			w = strcspn(names, " ");
			fprintf(f, " name=\"%.*s\"", (int)w, names);
			names += w + (names[w] == ' ');
		}
		fprintf(f, " type=\"%.*s\"", k, sig + i);
		if (direction)
			fprintf(f, " direction=\"%s\"", direction);
		fputs("/>\n", f);
	}
}

static void xml_annotation(FILE *f, const char *name, const char *value)
{
	fprintf(f, "   <annotation name=\"%s\" value=\"%s\"/>\n", name, value);
}

static void xml_interface(FILE *f, const char *interface, const struct brokerd_vtable *vtable)
{
	static const char *const kinds[] = {
		[BROKERD_VTABLE_METHOD] = "method",
		[BROKERD_VTABLE_PROPERTY] = "property",
		[BROKERD_VTABLE_SIGNAL] = "signal",
	};

	fprintf(f, " <interface name=\"%s\">\n", interface);
	for (const struct brokerd_vtable *v = vtable; v->kind != BROKERD_VTABLE_END; v++) {
		const char *emits = (v->flags & BROKERD_PROPERTY_CONST)		     ? "const" :
				    (v->flags & BROKERD_PROPERTY_EMITS_INVALIDATION) ? "invalidates" :
				    (v->flags & BROKERD_PROPERTY_EMITS_CHANGE)	     ? NULL /* the default */
										 :
										 "false";

		fprintf(f, "  <%s name=\"%s\"", kinds[v->kind], v->member);
		if (v->kind == BROKERD_VTABLE_PROPERTY)
			fprintf(f, " type=\"%s\" access=\"%s\"", v->signature, v->set ? "readwrite" : "read");
		fputs(">\n", f);
		if (v->kind == BROKERD_VTABLE_METHOD) {
			xml_args(f, sig_or_empty(v->signature), v->names, "in");
			xml_args(f, sig_or_empty(v->result), v->result_names, "out");
		} else if (v->kind == BROKERD_VTABLE_SIGNAL) {
			xml_args(f, sig_or_empty(v->signature), v->names, NULL);
		} else if (emits) {
			xml_annotation(f, "org.freedesktop.DBus.Property.EmitsChangedSignal", emits);
		}
		if (v->flags & BROKERD_VTABLE_DEPRECATED)
			xml_annotation(f, "org.freedesktop.DBus.Deprecated", "true");
		if (v->flags & BROKERD_METHOD_NO_REPLY)
			xml_annotation(f, "org.freedesktop.DBus.Method.NoReply", "true");
		fprintf(f, "  </%s>\n", kinds[v->kind]);
	}
	fputs(" </interface>\n", f);
}

/* The standard interfaces, as the specification declares them. */
static const struct brokerd_vtable peer_vtable[] = {
	BROKERD_METHOD("Ping", "", "", NULL),
	BROKERD_METHOD_NAMED("GetMachineId", "", NULL, "s", "machine_uuid", NULL, 0),
	BROKERD_VTABLE_END_ENTRY,
};
static const struct brokerd_vtable introspectable_vtable[] = {
	BROKERD_METHOD_NAMED("Introspect", "", NULL, "s", "xml_data", NULL, 0),
	BROKERD_VTABLE_END_ENTRY,
};
static const struct brokerd_vtable properties_vtable[] = {
	BROKERD_METHOD_NAMED("Get", "ss", "interface_name property_name", "v", "value", NULL, 0),
	BROKERD_METHOD_NAMED("GetAll", "s", "interface_name", "a{sv}", "props", NULL, 0),
	BROKERD_METHOD_NAMED("Set", "ssv", "interface_name property_name value", "", NULL, NULL, 0),
	BROKERD_SIGNAL_NAMED("PropertiesChanged", "sa{sv}as",
			     "interface_name changed_properties invalidated_properties", 0),
	BROKERD_VTABLE_END_ENTRY,
};
static const struct brokerd_vtable object_manager_vtable[] = {
	BROKERD_METHOD_NAMED("GetManagedObjects", "", NULL, "a{oa{sa{sv}}}",
			     "object_paths_interfaces_and_properties", NULL, 0),
	BROKERD_SIGNAL_NAMED("InterfacesAdded", "oa{sa{sv}}", "object_path interfaces_and_properties", 0),
	BROKERD_SIGNAL_NAMED("InterfacesRemoved", "oas", "object_path interfaces", 0),
	BROKERD_VTABLE_END_ENTRY,
};

/* The XML D-Bus tools expect of Introspect: the standard interfaces, ours, the child nodes. */
static int introspect_xml(brokerd_bus *bus, const char *path, char **ret)
{
	_cleanup_free_ char *xml = NULL;
	bool here = object_first(bus, path);
	size_t size = 0;
	FILE *f;

	f = open_memstream(&xml, &size);
	if (!f)
		return -ENOMEM;
	fputs("<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
	      "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n"
	      "<node>\n",
	      f);
	xml_interface(f, IFACE_PEER, peer_vtable);
	xml_interface(f, IFACE_INTROSPECTABLE, introspectable_vtable);
	if (here)
		xml_interface(f, IFACE_PROPERTIES, properties_vtable);
	if (manager_find(bus, path))
		xml_interface(f, IFACE_OBJECT_MANAGER, object_manager_vtable);
	FOREACH_OBJECT_SLOT(s, bus)
	if (strcmp(s->name, path) == 0)
		xml_interface(f, s->member, s->vtable);
	/* each child once, in the order of registration */
	for (struct brokerd_slot *s = slot_oldest(bus); s; s = s->prev) {
		const char *rest = (s->type == SLOT_OBJECT || s->type == SLOT_OBJECT_MANAGER) ?
					   path_below(s->name, path) :
					   NULL;
		size_t n = rest ? strcspn(rest, "/") : 0;
		bool seen = false;

		for (struct brokerd_slot *t = s->next; rest && t && !seen; t = t->next) {
			const char *r = (t->type == SLOT_OBJECT || t->type == SLOT_OBJECT_MANAGER) ?
						path_below(t->name, path) :
						NULL;

			seen = r && strcspn(r, "/") == n && strncmp(r, rest, n) == 0;
		}
		if (rest && !seen)
			fprintf(f, " <node name=\"%.*s\"/>\n", (int)n, rest);
	}
	fputs("</node>\n", f);
	if (fclose(f) != 0)
		return -ENOMEM;
	*ret = TAKE_PTR(xml);
	return 0;
}

static void introspectable_call(brokerd_bus *bus, brokerd_msg *call)
{
	_cleanup_free_ char *xml = NULL;
	int k;

	if (!call_is_method(call, "Introspect", ""))
		return;
	k = introspect_xml(bus, call->path, &xml);
	if (k >= 0)
		k = brokerd_msg_return(call, "s", xml);
	if (k < 0 && !call->replied)
		(void)reply_errno(call, k);
}

/* Get, GetAll and Set on a path with objects. */
static void properties_call(brokerd_bus *bus, brokerd_msg *call)
{
	const char *interface = NULL, *property = NULL;
	const struct brokerd_vtable *v = NULL;
	brokerd_msg *reply = NULL;
	struct brokerd_slot *s;
	bool get = strcmp(call->member, "Get") == 0, get_all = strcmp(call->member, "GetAll") == 0,
	     set = strcmp(call->member, "Set") == 0;
	int k;

	if (!get && !get_all && !set) {
		(void)reply_unknown_method(call);
		return;
	}
	if (!call_has_signature(call, get ? "ss" : get_all ? "s" : "ssv"))
		return;
	k = get_all ? brokerd_msg_read(call, "s", &interface) :
		      brokerd_msg_read(call, "ss", &interface, &property);
	BUG_ON(k <= 0); /* the signature was checked */
	s = object_find(bus, call->path, interface);
	if (!s && get_all && interface_is_standard(interface)) {
		/* they have no properties */
		(void)brokerd_msg_return(call, "a{sv}", 0U);
		return;
	}
	if (!s) {
		(void)reply_unknown_interface(call, interface);
		return;
	}
	if (!get_all) {
		v = vtable_find(s->vtable, BROKERD_VTABLE_PROPERTY, property);
		if (!v) {
			(void)brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_UNKNOWN_PROPERTY,
						       "Unknown property '%s' on interface '%s'.", property,
						       interface);
			return;
		}
	}
	if (get || get_all) {
		k = brokerd_msg_new_reply(call, &reply);
		if (k >= 0)
			k = get ? append_property(reply, s, v) : append_properties(reply, s, NULL, false);
		(void)reply_or_error(call, reply, k);
		return;
	}
	if (!v->set) {
		(void)brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_PROPERTY_READ_ONLY,
					       "Property '%s' on interface '%s' is read-only.", property,
					       interface);
		return;
	}
	if (brokerd_msg_enter_container(call, 'v', v->signature) <= 0) {
		(void)brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_INVALID_ARGS,
					       "Property '%s' has type '%s'.", property, v->signature);
		return;
	}
	k = v->set(bus, s->name, s->member, v->member, call, s->userdata);
	if (call->replied)
		return;
	if (k < 0) {
		(void)reply_errno(call, k);
		return;
	}
	(void)brokerd_msg_reply_data(call, NULL, NULL, 0);
	/* the new value goes out on the name the call came in on; a name
	 * without its signal channel simply has no listeners to tell */
	if (v->flags & (BROKERD_PROPERTY_EMITS_CHANGE | BROKERD_PROPERTY_EMITS_INVALIDATION)) {
		const char *const changed[] = { v->member, NULL };

		(void)brokerd_bus_emit_properties_changed(bus, call->name, s->name, s->member, changed);
	}
}

static void object_manager_call(brokerd_bus *bus, brokerd_msg *call)
{
	brokerd_msg *reply = NULL;
	int k;

	if (!call_is_method(call, "GetManagedObjects", ""))
		return;
	k = brokerd_msg_new_reply(call, &reply);
	if (k >= 0)
		k = brokerd_msg_open_container(reply, 'a', "{oa{sa{sv}}}");
	/* each path below the manager once */
	for (struct brokerd_slot *s = slot_oldest(bus); k >= 0 && s; s = s->prev) {
		if (s->type != SLOT_OBJECT || !path_below(s->name, call->path) ||
		    object_first(bus, s->name) != s)
			continue;
		k = brokerd_msg_open_container(reply, '{', "oa{sa{sv}}");
		if (k >= 0)
			k = brokerd_msg_append_basic(reply, 'o', s->name);
		if (k >= 0)
			k = append_interfaces(reply, bus, s->name, NULL);
		if (k >= 0)
			k = brokerd_msg_close_container(reply);
	}
	if (k >= 0)
		k = brokerd_msg_close_container(reply);
	(void)reply_or_error(call, reply, k);
}

/* Runs the handler of method v of object s, and answers for it if it did not. */
static void method_call(struct brokerd_slot *s, const struct brokerd_vtable *v, brokerd_msg *call)
{
	int k;

	if (!call_has_signature(call, sig_or_empty(v->signature)))
		return;
	k = v->method(call, s->userdata);
	/* s may be gone now (a handler may free its own object): only v and call are used */
	if (call_is_settled(call))
		return;
	if (k < 0)
		(void)reply_errno(call, k);
	else if (!*sig_or_empty(v->result))
		(void)brokerd_msg_reply_data(call, NULL, NULL, 0);
	else
		(void)brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_FAILED, "%s.%s() returned no value.",
					       call->interface, v->member);
}

/* A call without an interface: the first registered method of that name, else a standard one. */
static const char *interface_guess(brokerd_bus *bus, const char *path, const char *member)
{
	FOREACH_OBJECT_SLOT(s, bus)
	if (strcmp(s->name, path) == 0 && vtable_find(s->vtable, BROKERD_VTABLE_METHOD, member))
		return s->member;
	if (vtable_find(properties_vtable, BROKERD_VTABLE_METHOD, member))
		return IFACE_PROPERTIES;
	if (vtable_find(object_manager_vtable, BROKERD_VTABLE_METHOD, member))
		return IFACE_OBJECT_MANAGER;
	if (vtable_find(introspectable_vtable, BROKERD_VTABLE_METHOD, member))
		return IFACE_INTROSPECTABLE;
	return "";
}

int bus_object_dispatch(brokerd_bus *bus, brokerd_msg *call, bool fallback)
{
	const char *path = call->path, *interface = call->interface;
	bool here, manager;
	struct brokerd_slot *s;
	const struct brokerd_vtable *v;

	BUG_ON(call->type != BROKERD_MSG_CALL);
	/* the byte API calls without an interface: a catch-all method keeps its "Ping" */
	if (!*interface && !fallback && vtable_find(peer_vtable, BROKERD_VTABLE_METHOD, call->member))
		interface = IFACE_PEER;
	/* Peer is every connection's, on every path */
	if (strcmp(interface, IFACE_PEER) == 0) {
		peer_call(call);
		return 1;
	}
	if (!*path || !bus_has_objects(bus))
		return 0;
	here = object_first(bus, path);
	manager = manager_find(bus, path);
	if (!*interface)
		interface = interface_guess(bus, path, call->member);
	if (!here && !manager && !path_has_children(bus, path)) {
		if (fallback)
			return 0;
		(void)brokerd_msg_reply_errorf(call, BROKERD_DBUS_ERROR_UNKNOWN_OBJECT,
					       "Unknown object '%s'.", path);
		return 1;
	}
	if (strcmp(interface, IFACE_INTROSPECTABLE) == 0) {
		introspectable_call(bus, call);
		return 1;
	}
	if (here && strcmp(interface, IFACE_PROPERTIES) == 0) {
		properties_call(bus, call);
		return 1;
	}
	if (manager && strcmp(interface, IFACE_OBJECT_MANAGER) == 0) {
		object_manager_call(bus, call);
		return 1;
	}
	s = *interface ? object_find(bus, path, interface) : NULL;
	v = s ? vtable_find(s->vtable, BROKERD_VTABLE_METHOD, call->member) : NULL;
	if (!v && fallback)
		return 0; /* what the objects do not serve, the catch-all method may */
	if (!s && *interface)
		(void)reply_unknown_interface(call, interface);
	else if (!v)
		(void)reply_unknown_method(call);
	else
		method_call(s, v, call);
	return 1;
}
