/* SPDX-License-Identifier: MIT */
/*
 * test-brokerctl-xml.c - brokerctl's reader of introspection XML: what
 * libbrokerd writes and what other D-Bus services write (an XML
 * declaration, comments, entities, single quotes, annotations on
 * interfaces left alone, nested child nodes not descended into), and the
 * XML it refuses.
 */
#include <errno.h>
#include <string.h>

#include "client/brokerctl-xml.h"
#include "util/test.h"

static const char xml[] =
	"<?xml version=\"1.0\"?>\n"
	"<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
	"\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n"
	"<!-- a comment with <node name=\"fake\"/> inside -->\n"
	"<node name=\"/org/example\">\n"
	" <interface name='org.example.A'>\n"
	"  <annotation name=\"org.freedesktop.DBus.Deprecated\" value=\"true\"/>\n"
	"  <method name=\"Frob\">\n"
	"   <arg name=\"x\" type=\"a{sv}\" direction=\"in\"/>\n"
	"   <arg type=\"(ii)\"/>\n"
	"   <arg name=\"r\" type=\"s\" direction=\"out\"/>\n"
	"   <annotation name=\"org.freedesktop.DBus.Method.NoReply\" value=\"true\"/>\n"
	"  </method>\n"
	"  <property name=\"Level\" type=\"u\" access=\"readwrite\"/>\n"
	"  <property name=\"Id\" type=\"s\" access=\"read\">\n"
	"   <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"const\"/>\n"
	"  </property>\n"
	"  <property name=\"Quiet\" type=\"b\" access=\"read\">\n"
	"   <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"false\"/>\n"
	"  </property>\n"
	"  <signal name=\"Moved\"><arg name=\"to\" type=\"o\"/><arg type=\"d\"/></signal>\n"
	" </interface>\n"
	" <interface name=\"org.example.B&amp;C\"><method name=\"Ping\"/></interface>\n"
	" <node name=\"child1\"/>\n"
	" <node name=\"child2\"><interface name=\"org.example.Inner\"><method name=\"Hidden\"/></interface></node>\n"
	"</node>\n";

static void test_read(void)
{
	struct node n = { 0 };
	const struct member *m;

	ASSERT_INT(xml_read(xml, &n), ==, 0);
	ASSERT_INT(n.n_members, ==, 6);
	ASSERT_INT(n.n_children, ==, 2);
	ASSERT_STR(n.children[0], "child1");
	ASSERT_STR(n.children[1], "child2");

	m = &n.members[0];
	ASSERT_INT(m->kind, ==, MEMBER_METHOD);
	ASSERT_STR(m->interface, "org.example.A");
	ASSERT_STR(m->name, "Frob");
	ASSERT_STR(m->sig, "a{sv}(ii)"); /* an arg without direction is an input */
	ASSERT_STR(m->result, "s");
	ASSERT(m->no_reply && !m->deprecated); /* the interface's annotation is not the method's */
	m = &n.members[1];
	ASSERT(m->kind == MEMBER_PROPERTY && strcmp(m->name, "Level") == 0 && strcmp(m->sig, "u") == 0);
	ASSERT(m->writable);
	ASSERT_STR(m->emits, "emits-change"); /* the specification's default */
	ASSERT(!m->value);
	m = &n.members[2];
	ASSERT(!m->writable);
	ASSERT_STR(m->emits, "const");
	ASSERT(!n.members[3].emits);
	m = &n.members[4];
	ASSERT(m->kind == MEMBER_SIGNAL && strcmp(m->sig, "od") == 0 && !*m->result);
	m = &n.members[5];
	ASSERT_STR(m->interface, "org.example.B&C");
	ASSERT_STR(m->name, "Ping");
	node_done(&n);
}

static void test_refused(void)
{
	static const char *const bad[] = {
		"<node><interface name=\"a.b\">",			    /* never closed */
		"<node></node></node>",					    /* closed twice */
		"<node><interface><method name=\"X\"/></interface></node>", /* an interface without a name */
		"<node><interface name=\"a.b\"><method/></interface></node>", /* a member without one */
		"<node><!-- unterminated </node>",
		"<node",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct node n = { 0 };

		ASSERT_INT(xml_read(bad[i], &n), ==, -EBADMSG);
		node_done(&n);
	}
}

int main(void)
{
	test_read();
	test_refused();
	return 0;
}
