/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-echo - the other end of client-brokerctl's typed checks, a
 * helper, not a test. "serve NAME": owns NAME and answers every method
 * with the call's own body (same signature, same bytes), and the method
 * Fail with an error, so brokerctl's output of a reply is compared with
 * its input; it also has the object /org/brokerd/test/obj (interface
 * org.brokerd.test.Props, properties Level, Name and Tags), for
 * introspect, tree, get-property and set-property. "listen NAME": prints the first signal on NAME's channel as
 * "MEMBER PATH INTERFACE" and its body in busctl's syntax, then exits.
 * Both print "ready" once they are in place.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "brokerd/brokerd.h"
#include "client/brokerctl-args.h"

static int on_call(brokerd_msg *call, void *userdata)
{
	const void *data;
	size_t size;
	int k;

	if (strcmp(brokerd_msg_get_member(call), "Fail") == 0)
		return brokerd_msg_reply_error(call, "org.brokerd.test.Error.AsAsked", "failing as asked");
	k = brokerd_msg_get_data(call, &data, &size);
	if (k < 0)
		return k;
	return brokerd_msg_reply_data(call, brokerd_msg_get_signature(call), data, size);
}

static uint32_t level = 7;

static int on_scale(brokerd_msg *call, void *userdata)
{
	uint32_t by;
	int k = brokerd_msg_read(call, "u", &by);

	return k < 0 ? k : brokerd_msg_return(call, "u", level * by);
}

static int get_level(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		     brokerd_msg *m, void *userdata)
{
	return brokerd_msg_append(m, "u", level);
}

static int set_level(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		     brokerd_msg *m, void *userdata)
{
	int k = brokerd_msg_read(m, "u", &level);

	return k < 0 ? k : 0;
}

static int get_name(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		    brokerd_msg *m, void *userdata)
{
	return brokerd_msg_append(m, "s", "echo");
}

static int get_tags(brokerd_bus *bus, const char *path, const char *interface, const char *property,
		    brokerd_msg *m, void *userdata)
{
	return brokerd_msg_append(m, "as", 2U, "hot", "dry");
}

static const struct brokerd_vtable props_vtable[] = {
	BROKERD_METHOD_NAMED("Scale", "u", "factor", "u", "result", on_scale, 0),
	BROKERD_WRITABLE_PROPERTY("Level", "u", get_level, set_level, BROKERD_PROPERTY_EMITS_CHANGE),
	BROKERD_PROPERTY("Name", "s", get_name, BROKERD_PROPERTY_CONST),
	BROKERD_PROPERTY("Tags", "as", get_tags, BROKERD_PROPERTY_EMITS_INVALIDATION),
	BROKERD_SIGNAL("Changed", "u"),
	BROKERD_VTABLE_END_ENTRY,
};

static int on_signal(brokerd_msg *m, void *userdata)
{
	printf("%s %s %s\n", brokerd_msg_get_member(m), brokerd_msg_get_path(m),
	       brokerd_msg_get_interface(m));
	(void)body_print(m, stdout);
	fflush(stdout);
	return brokerd_bus_exit(userdata, 0);
}

int main(int argc, char **argv)
{
	brokerd_bus *bus = NULL;
	int k;

	if (argc != 3 || (strcmp(argv[1], "serve") != 0 && strcmp(argv[1], "listen") != 0)) {
		fprintf(stderr, "usage: brokerctl-echo serve|listen NAME\n");
		return 2;
	}
	k = brokerd_bus_open_system(&bus);
	if (k < 0) {
		fprintf(stderr, "brokerctl-echo: connect: %s\n", strerror(-k));
		return 1;
	}
	if (strcmp(argv[1], "serve") == 0) {
		k = brokerd_bus_add_method(bus, NULL, argv[2], NULL, on_call, NULL);
		if (k >= 0)
			k = brokerd_bus_add_object(bus, NULL, "/org/brokerd/test/obj",
						   "org.brokerd.test.Props", props_vtable, NULL);
		if (k >= 0)
			k = brokerd_bus_request_name(bus, argv[2], BROKERD_NAME_DO_NOT_QUEUE);
	} else {
		k = brokerd_bus_subscribe(bus, NULL, argv[2], NULL, on_signal, bus);
	}
	if (k < 0) {
		fprintf(stderr, "brokerctl-echo: %s %s: %s\n", argv[1], argv[2], strerror(-k));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	k = brokerd_bus_run(bus);
	brokerd_bus_close(bus);
	return k < 0 ? 1 : 0;
}
