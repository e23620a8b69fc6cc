/* SPDX-License-Identifier: MIT */
/*
 * test-dbus.c - the D-Bus front end end to end: starts the real brokerd
 * (argv[1]) with --dbus-address on a temp socket and talks to it with
 * libsystemd's sd-bus, the client most system services use, and with a raw
 * socket for what sd-bus would never send. Host test (meson) and guest test
 * (brokerd-dbus, argv[1] = "--system": the system brokerd's socket).
 *
 * A server process owns org.brokerdtest.Echo and answers Echo (s), ReadFd
 * (h: reads the pipe), Emit (sends a signal Other and then Ping) and Die
 * (exits without answering); the parent is the client.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "brokerd/dbus-front.h"
#include "brokerd/test-client.h"
#include "brokerd/test-dbus-util.h"
#include "protocol/ctrl.h"
#include "protocol/dbus-message.h"
#include "util/macro.h"
#include "util/socket.h"
#include "util/test.h"

#define NAME  "org.brokerdtest.Echo"
#define PATH  "/org/brokerdtest"
#define IFACE "org.brokerdtest.I"

static char address[300], sock_path[256];
static sd_bus *connect_bus(void)
{
	return sdbus_connect(address);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- The server ------------------------------------------------------------ */

static int on_echo(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	const char *s;
	int r = sd_bus_message_read(m, "s", &s);

	return r < 0 ? r : sd_bus_reply_method_return(m, "s", s);
}

static int on_read_fd(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	char buf[64] = "";
	int fd, r = sd_bus_message_read(m, "h", &fd);
	ssize_t n;

	if (r < 0)
		return r;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0)
		buf[n] = 0;
	return sd_bus_reply_method_return(m, "s", buf);
}

static int on_emit(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	sd_bus *b = sd_bus_message_get_bus(m);

	(void)sd_bus_emit_signal(b, PATH, IFACE, "Other", "s", "not for you");
	(void)sd_bus_emit_signal(b, PATH, IFACE, "Ping", "u", 42U);
	return sd_bus_reply_method_return(m, "");
}

static int on_die(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	_exit(0);
}

static const sd_bus_vtable vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Echo", "s", "s", on_echo, 0),
	SD_BUS_METHOD("ReadFd", "h", "s", on_read_fd, 0),
	SD_BUS_METHOD("Emit", "", "", on_emit, 0),
	SD_BUS_METHOD("Die", "", "", on_die, 0),
	SD_BUS_VTABLE_END,
};

static void server_setup(sd_bus *b)
{
	ASSERT_INT(sd_bus_add_object_vtable(b, NULL, PATH, IFACE, vtable, NULL), >=, 0);
}

static pid_t start_server(void)
{
	return sdbus_serve(address, NAME, server_setup);
}

/* ---- The client ------------------------------------------------------------ */

static unsigned int pings, others, unsolicited;
static char order[16];

static int filter(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	uint64_t cookie;

	if (sd_bus_message_is_signal(m, DBUS_DRIVER_INTERFACE, "NameOwnerChanged")) {
		const char *name, *old, *new;

		if (sd_bus_message_read(m, "sss", &name, &old, &new) >= 0 &&
		    !strcmp(name, "org.brokerdtest.Order") && strlen(order) < sizeof(order) - 1)
			order[strlen(order)] = *new ? 'N' : 'L';
		(void)sd_bus_message_rewind(m, true);
	}
	if (sd_bus_message_is_signal(m, IFACE, "Hi") && strlen(order) < sizeof(order) - 1)
		order[strlen(order)] = 'H';

	if (sd_bus_message_is_signal(m, IFACE, "Other"))
		others++;
	if (sd_bus_message_get_type(m, &(uint8_t){ 0 }) >= 0 &&
	    sd_bus_message_get_reply_cookie(m, &cookie) >= 0 && cookie == 999)
		unsolicited++;
	return 0;
}

static int on_ping(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	pings++;
	return 0;
}

static bool list_has(char **l, const char *s)
{
	for (; l && *l; l++)
		if (!strcmp(*l, s))
			return true;
	return false;
}

static void test_names(sd_bus *b)
{
	char **names = NULL;
	const char *unique;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *owner;
	uint32_t uid;

	ASSERT_INT(sd_bus_get_unique_name(b, &unique), ==, 0);
	ASSERT(unique[0] == ':');
	ASSERT_INT(sd_bus_list_names(b, &names, NULL), >=, 0);
	ASSERT(list_has(names, DBUS_DRIVER_NAME));
	ASSERT(list_has(names, NAME));
	ASSERT(list_has(names, unique));
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetNameOwner", &e, &reply, "s", NAME),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &owner), >=, 0);
	ASSERT(owner[0] == ':' && strcmp(owner, unique) != 0);
	reply = sd_bus_message_unref(reply);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetConnectionUnixUser", &e, &reply, "s", unique),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "u", &uid), >=, 0);
	ASSERT_INT(uid, ==, getuid());
	reply = sd_bus_message_unref(reply);

	/* the server holds the name: a second owner queues, then gives up its place */
	ASSERT_INT(sd_bus_request_name(b, NAME, SD_BUS_NAME_QUEUE), ==, 0); /* 0: queued */
	ASSERT_INT(sd_bus_release_name(b, NAME), >=, 0);
	ASSERT_INT(sd_bus_request_name(b, NAME, 0), ==, -EEXIST);
	/* the driver's own name is nobody's */
	ASSERT_INT(sd_bus_request_name(b, DBUS_DRIVER_NAME, 0), <, 0);
	/* unknown driver methods */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "NoSuchMethod", &e, NULL, ""),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownMethod"));
	sd_bus_error_free(&e);
	ok("names: unique name, ListNames, GetNameOwner, queueing, UnknownMethod");

	/* what the bus knows of us */
	uint32_t got_uid = UINT32_MAX, got_pid = 0;
	bool got_fd = false, got_gids = false;
	char got_label[256] = "", own_label[256] = "";
	socklen_t own_len = sizeof(own_label) - 1;
	int pair[2];
	const char *key;

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetConnectionCredentials", &e, &reply, "s", unique),
		   >=, 0);
	ASSERT_INT(sd_bus_message_enter_container(reply, 'a', "{sv}"), >, 0);
	while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
		ASSERT_INT(sd_bus_message_read(reply, "s", &key), >, 0);
		if (!strcmp(key, "UnixUserID"))
			ASSERT_INT(sd_bus_message_read(reply, "v", "u", &got_uid), >, 0);
		else if (!strcmp(key, "ProcessID"))
			ASSERT_INT(sd_bus_message_read(reply, "v", "u", &got_pid), >, 0);
		else if (!strcmp(key, "ProcessFD")) {
			int pfd;

			ASSERT_INT(sd_bus_message_read(reply, "v", "h", &pfd), >, 0);
			got_fd = pfd >= 0;
		} else if (!strcmp(key, "LinuxSecurityLabel")) {
			const void *l;
			size_t n;

			ASSERT_INT(sd_bus_message_enter_container(reply, 'v', "ay"), >, 0);
			ASSERT_INT(sd_bus_message_read_array(reply, 'y', &l, &n), >=, 0);
			/* the label and its NUL, as dbus-daemon sends it */
			ASSERT(n >= 2 && n <= sizeof(got_label) && ((const char *)l)[n - 1] == 0);
			memcpy(got_label, l, n);
			ASSERT_INT(sd_bus_message_exit_container(reply), >, 0);
		} else {
			got_gids |= !strcmp(key, "UnixGroupIDs");
			ASSERT_INT(sd_bus_message_skip(reply, "v"), >, 0);
		}
		ASSERT_INT(sd_bus_message_exit_container(reply), >, 0);
	}
	reply = sd_bus_message_unref(reply);
	ASSERT_INT(got_uid, ==, getuid());
	ASSERT_INT(got_pid, ==, getpid());
	ASSERT(got_gids);
	/* our own label, as a socket to ourselves shows it: the one the bus must report, or none */
	ASSERT_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), ==, 0);
	if (getsockopt(pair[0], SOL_SOCKET, SO_PEERSEC, own_label, &own_len) < 0)
		own_len = 0;
	own_label[own_len] = 0;
	close(pair[0]);
	close(pair[1]);
	ASSERT_STR(got_label, own_label);
	printf("# GetConnectionCredentials: uid %u pid %u, %s, label '%s'\n", got_uid, got_pid,
	       got_fd ? "with ProcessFD" : "no ProcessFD (kernel without SO_PEERPIDFD)", got_label);
	ok("GetConnectionCredentials: uid, groups, pid (and ProcessFD where the kernel has pidfds, "
	   "LinuxSecurityLabel where an LSM labels sockets)");
}

static void test_calls(sd_bus *b)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *s;
	int p[2];

	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Echo", &e, &reply, "s", "hello"), >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT_STR(s, "hello");
	reply = sd_bus_message_unref(reply);
	ok("a method call between two sd-bus connections");

	/* A figure for the log, not a test: round trips through brokerd. */
	uint64_t t0 = now_ms();
	for (int i = 0; i < 1000; i++)
		ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Echo", NULL, NULL, "s", "x"), >=, 0);
	printf("# 1000 Echo round trips through brokerd in %llu ms\n", (unsigned long long)(now_ms() - t0));

	ASSERT_INT(pipe(p), ==, 0);
	ASSERT_INT(write(p[1], "through a pipe", 14), ==, 14);
	close(p[1]);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "ReadFd", &e, &reply, "h", p[0]), >=, 0);
	close(p[0]);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT_STR(s, "through a pipe");
	reply = sd_bus_message_unref(reply);
	ok("an fd passed with a call");

	ASSERT_INT(sd_bus_call_method(b, "org.brokerdtest.Nobody", PATH, IFACE, "Echo", &e, NULL, "s", "x"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.ServiceUnknown"));
	sd_bus_error_free(&e);
	ok("a call to a name nobody owns: ServiceUnknown");
}

static void test_signals(sd_bus *b)
{
	sd_bus_slot *slot = NULL;
	uint64_t end;

	/* the sender as a well-known name: brokerd resolves it to the owner's messages */
	ASSERT_INT(sd_bus_match_signal(b, &slot, NAME, PATH, IFACE, "Ping", on_ping, NULL), >=, 0);
	/* a rule for Other from a name nobody owns must not let Other through */
	ASSERT_INT(sd_bus_add_match(b, NULL, "type='signal',sender='org.brokerdtest.Nobody',member='Other'",
				    NULL, NULL),
		   >=, 0);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Emit", NULL, NULL, ""), >=, 0);
	end = now_ms() + 5000;
	while (!pings && now_ms() < end) {
		if (sd_bus_process(b, NULL) == 0)
			(void)sd_bus_wait(b, 100000);
	}
	ASSERT_INT(pings, ==, 1);
	/* Other was sent before Ping and matches no rule of ours: it never came */
	ASSERT_INT(others, ==, 0);
	ok("a broadcast signal reaches a matching rule (well-known sender), not an unmatched one");

	/* rules on the body and the path: arg0 of another value and another namespace keep Other out... */
	ASSERT_INT(sd_bus_add_match(b, NULL,
				    "type='signal',member='Other',arg0='for you',path_namespace='/org'", NULL,
				    NULL),
		   >=, 0);
	ASSERT_INT(sd_bus_add_match(b, NULL,
				    "type='signal',member='Other',arg0='not for you',path_namespace='/net'",
				    NULL, NULL),
		   >=, 0);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Emit", NULL, NULL, ""), >=, 0);
	end = now_ms() + 5000;
	while (pings < 2 && now_ms() < end)
		if (sd_bus_process(b, NULL) == 0)
			(void)sd_bus_wait(b, 100000);
	ASSERT_INT(pings, ==, 2);
	ASSERT_INT(others, ==, 0);
	/* ... the right ones let it in */
	ASSERT_INT(
		sd_bus_add_match(
			b, NULL,
			"type='signal',member='Other',arg0='not for you',path_namespace='/org/brokerdtest',"
			"arg0namespace='not for you'",
			NULL, NULL),
		<, 0); /* arg0 twice: invalid */
	ASSERT_INT(
		sd_bus_add_match(
			b, NULL,
			"type='signal',member='Other',arg0='not for you',path_namespace='/org/brokerdtest'",
			NULL, NULL),
		>=, 0);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Emit", NULL, NULL, ""), >=, 0);
	end = now_ms() + 5000;
	while (pings < 3 && now_ms() < end)
		if (sd_bus_process(b, NULL) == 0)
			(void)sd_bus_wait(b, 100000);
	ASSERT_INT(pings, ==, 3);
	ASSERT_INT(others, ==, 1);
	sd_bus_slot_unref(slot);
	ok("match rules on arg0 and path_namespace, read from the forwarded body");
}

/* ---- A raw client, for what sd-bus would not send -------------------------- */

/* Hello, the first call of every raw connection. */
static const struct dbus_header hello_call = { .type = DBUS_MESSAGE_METHOD_CALL,
					       .serial = 1,
					       .path = DBUS_DRIVER_PATH,
					       .interface = DBUS_DRIVER_INTERFACE,
					       .member = "Hello",
					       .destination = DBUS_DRIVER_NAME };

/* "AUTH EXTERNAL <our uid, hex-encoded>\r\n" and then more. */
static void auth_line(char *cmd, size_t size, const char *more)
{
	char uid[16];
	size_t n;

	snprintf(uid, sizeof(uid), "%u", (unsigned int)getuid());
	n = (size_t)snprintf(cmd, size, "AUTH EXTERNAL ");
	for (const char *p = uid; *p; p++)
		n += (size_t)snprintf(cmd + n, size - n, "%02x", *p);
	snprintf(cmd + n, size - n, "\r\n%s", more);
}

/* Authenticate (EXTERNAL with our uid, hex-encoded) and, if fds, negotiate fd passing. */
static int raw_connect_fds(bool fds)
{
	char buf[512] = "", cmd[128];
	int fd = unix_connect(sock_path, SOCK_STREAM);
	size_t have = 0;

	ASSERT(fd >= 0);
	auth_line(cmd, sizeof(cmd), fds ? "NEGOTIATE_UNIX_FD\r\n" : "");
	ASSERT_INT(write(fd, "\0", 1), ==, 1);
	ASSERT_INT(write(fd, cmd, strlen(cmd)), ==, (ssize_t)strlen(cmd));
	while (!strstr(buf, fds ? "AGREE_UNIX_FD\r\n" : "\r\n")) {
		ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);

		ASSERT(got > 0);
		have += (size_t)got;
		buf[have] = 0;
	}
	ASSERT(!memcmp(buf, "OK ", 3));
	ASSERT_INT(write(fd, "BEGIN\r\n", 7), ==, 7);
	return fd;
}

static int raw_connect(void)
{
	return raw_connect_fds(false);
}

static void read_exact(int fd, void *buf, size_t len)
{
	for (size_t have = 0; have < len;) {
		ssize_t n = read(fd, (char *)buf + have, len - have);

		ASSERT(n > 0);
		have += (size_t)n;
	}
}

/* The next message on fd, whatever it is. */
static void raw_next(int fd, struct dbus_message *m)
{
	uint8_t head[DBUS_HEADER_FIXED_SIZE];
	size_t size;
	uint8_t *data;

	read_exact(fd, head, sizeof(head));
	ASSERT_INT(dbus_message_frame_size(head, sizeof(head), &size), ==, 0);
	data = malloc(size);
	ASSERT(data);
	memcpy(data, head, sizeof(head));
	read_exact(fd, data + sizeof(head), size - sizeof(head));
	ASSERT_INT(dbus_message_parse(m, data, size, 0), ==, 0);
}

/* Read messages (exactly, so nothing of the next is read) until the reply to serial. */
static void raw_reply(int fd, uint32_t serial, struct dbus_message *m)
{
	for (;;) {
		raw_next(fd, m);
		if (m->h.reply_serial == serial)
			return;
		dbus_message_deinit(m);
	}
}

static unsigned int count_fds(pid_t pid)
{
	char path[64];
	unsigned int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	ASSERT(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void raw_send(int fd, const struct dbus_header *h, const void *body, size_t len)
{
	void *data;
	size_t n;

	ASSERT_INT(dbus_message_write(h, body, len, &data, &n), ==, 0);
	ASSERT_INT(write(fd, data, n), ==, (ssize_t)n);
	free(data);
}

static void test_raw(sd_bus *b)
{
	const char *unique;
	char buf[4096];
	int fd;

	ASSERT_INT(sd_bus_get_unique_name(b, &unique), ==, 0);

	/* a message before Hello: the connection is closed */
	struct dbus_header list = hello_call;

	fd = raw_connect();
	list.member = "ListNames";
	raw_send(fd, &list, NULL, 0);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	ok("a message before Hello closes the connection");

	/* authenticated but no Hello: closed at the HELLO deadline (1 s here; the system's 5 s) */
	if (sock_path[0] && strcmp(sock_path, DBUS_SOCKET_PATH) != 0) {
		uint64_t t0 = now_ms(), waited;

		fd = raw_connect();
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		waited = now_ms() - t0;
		close(fd);
		printf("# closed %llu ms after connecting without Hello\n", (unsigned long long)waited);
		ASSERT(waited >= 900 && waited < 5000);
		ok("no Hello: closed at the HELLO deadline");
	}

	/* an unsolicited reply is refused */
	fd = raw_connect();
	raw_send(fd, &hello_call, NULL, 0);
	struct dbus_header reply = {
		.type = DBUS_MESSAGE_METHOD_RETURN, .serial = 2, .reply_serial = 999, .destination = unique
	};
	raw_send(fd, &reply, NULL, 0);
	/* a round trip of b's after it: the forged reply would have come before */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, "org.freedesktop.DBus.Peer",
				      "Ping", NULL, NULL, ""),
		   >=, 0);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Echo", NULL, NULL, "s", "sync"), >=, 0);
	while (sd_bus_process(b, NULL) > 0)
		;
	ASSERT_INT(unsolicited, ==, 0);
	ok("an unsolicited reply is refused");

	/* garbage after Hello: closed, and brokerd serves on */
	ASSERT_INT(write(fd, "lxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 33), ==, 33);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Echo", NULL, NULL, "s", "still"), >=, 0);
	ok("an invalid message closes its connection only");
}

/* Hello (serial 1) on fd and its answer, whatever it is. */
static void raw_hello_answer(int fd, struct dbus_message *m)
{

	raw_send(fd, &hello_call, NULL, 0);
	raw_reply(fd, 1, m);
}

static void raw_hello(int fd)
{
	struct dbus_message m;

	raw_hello_answer(fd, &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	dbus_message_deinit(&m);
}

static void raw_hello_name(int fd, char *name, size_t len)
{
	struct dbus_message m;

	raw_hello_answer(fd, &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	snprintf(name, len, "%s", (const char *)m.body + 4); /* "s": its length, then it */
	dbus_message_deinit(&m);
}

/* The driver's member called on fd with one string argument; its answer must be want_error, or a return. */
/* A driver method with a string argument (and a uint32 if u): its reply or want_error. */
static void raw_driver_call(int fd, uint32_t serial, const char *member, const char *arg, const uint32_t *u,
			    const char *want_error)
{
	struct dbus_header h = { .type = DBUS_MESSAGE_METHOD_CALL,
				 .serial = serial,
				 .path = DBUS_DRIVER_PATH,
				 .interface = DBUS_DRIVER_INTERFACE,
				 .member = member,
				 .destination = DBUS_DRIVER_NAME,
				 .signature = u ? "su" : "s" };
	struct dbus_writer w;
	struct dbus_message m;
	void *body;
	size_t len;

	ASSERT_INT(dbus_writer_init(&w, h.signature), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 's', arg), ==, 0);
	if (u)
		ASSERT_INT(dbus_writer_append_basic(&w, 'u', u), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, 0);
	dbus_writer_deinit(&w);
	raw_send(fd, &h, body, len);
	free(body);
	raw_reply(fd, serial, &m);
	if (want_error) {
		ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_ERROR);
		ASSERT_STR(m.h.error_name, want_error);
	} else {
		ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	}
	dbus_message_deinit(&m);
}

static void raw_driver_call_s(int fd, uint32_t serial, const char *member, const char *arg, const char *want_error)
{
	raw_driver_call(fd, serial, member, arg, NULL, want_error);
}

static void raw_add_match(int fd, uint32_t serial, const char *rule, const char *want_error)
{
	raw_driver_call_s(fd, serial, "AddMatch", rule, want_error);
}

/* brokerd's pid, as the driver tells it (the system brokerd's, in the guest). */
static pid_t driver_pid(sd_bus *b)
{
	sd_bus_message *reply = NULL;
	uint32_t pid = 0;

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetConnectionUnixProcessID", NULL, &reply, "s", DBUS_DRIVER_NAME),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "u", &pid), >=, 0);
	sd_bus_message_unref(reply);
	ASSERT(pid > 1);
	return (pid_t)pid;
}

/* A message carrying more fds than UNIX_FDS says: the first is passed on, brokerd closes the other. */
static void test_stray_fds(pid_t daemon)
{
	struct dbus_header call = { .type = DBUS_MESSAGE_METHOD_CALL,
				    .serial = 2,
				    .path = PATH,
				    .interface = IFACE,
				    .member = "ReadFd",
				    .destination = NAME,
				    .signature = "h",
				    .n_fds = 1 };
	struct dbus_message m;
	uint32_t idx = 0;
	unsigned int before, after;
	const char *s;
	void *data;
	size_t len;
	int fd, p[2], fds[2];

	fd = raw_connect_fds(true);
	raw_hello(fd);
	before = count_fds(daemon);
	ASSERT_INT(pipe(p), ==, 0);
	ASSERT_INT(write(p[1], "raw", 3), ==, 3);
	close(p[1]);
	fds[0] = p[0];
	fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ASSERT(fds[1] >= 0);
	ASSERT_INT(dbus_message_write(&call, &idx, 4, &data, &len), ==, 0);
	ASSERT_INT(unix_send_fds(fd, data, len, fds, 2, 0), ==, 0);
	free(data);
	close(fds[0]);
	close(fds[1]);
	raw_reply(fd, 2, &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	s = (const char *)m.body + 4;
	ASSERT_STR(s, "raw");
	dbus_message_deinit(&m);
	after = count_fds(daemon);
	printf("# brokerd fds: %u before, %u after a message with a stray fd\n", before, after);
	ASSERT_INT(after, ==, before);
	close(fd);
	ok("one set of fds per message: the first passed on, a stray one closed");
}

/* A connection that subscribes to everything and never reads is dropped, alone. */
static void test_slow_reader(sd_bus *b)
{
	static char payload[4096];
	unsigned int sent = 0;
	char buf[4096];
	ssize_t n;
	int fd;

	fd = raw_connect();
	raw_hello(fd);
	raw_add_match(fd, 2, "type='signal',interface='org.brokerdtest.Flood'", NULL);

	/* 24 MiB of signals, past the 16 MiB brokerd holds for one reader (and the socket's buffer) */
	memset(payload, 'x', sizeof(payload) - 1);
	for (; sent < 6 * 1024; sent++) {
		ASSERT_INT(sd_bus_emit_signal(b, PATH, "org.brokerdtest.Flood", "Data", "s", payload), >=, 0);
		if (sent % 256 == 0)
			ASSERT_INT(sd_bus_flush(b), >=, 0);
	}
	ASSERT_INT(sd_bus_flush(b), >=, 0);
	/* brokerd answers b at once, while the reader is cut off: it reads what was sent, then EOF */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, "org.freedesktop.DBus.Peer",
				      "Ping", NULL, NULL, ""),
		   >=, 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	ASSERT_INT(n, ==, 0);
	close(fd);
	ok("a reader that does not keep up is disconnected, the bus serves on");
}

static unsigned int partings;

static int on_parting(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	partings++;
	return 0;
}

/*
 * busctl emit's way: authentication, Hello and a signal in one go, and
 * the socket closed before brokerd has read any of it. brokerd's answers
 * find no reader (EPIPE), but the signal was sent and must be routed.
 */
static void test_emit_and_hang_up(sd_bus *b)
{
	struct dbus_header sig = { .type = DBUS_MESSAGE_SIGNAL,
				   .flags = DBUS_FLAG_NO_REPLY_EXPECTED,
				   .serial = 2,
				   .path = PATH,
				   .interface = IFACE,
				   .member = "Parting" };
	char buf[4096];
	void *m1, *m2;
	size_t n = 1, l1, l2;
	sd_bus_slot *slot = NULL;
	uint64_t end;
	int fd;

	ASSERT_INT(sd_bus_match_signal(b, &slot, NULL, PATH, IFACE, "Parting", on_parting, NULL), >=, 0);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, "org.freedesktop.DBus.Peer",
				      "Ping", NULL, NULL, ""),
		   >=, 0); /* the rule is in place */
	buf[0] = 0;
	auth_line(buf + 1, sizeof(buf) - 1, "BEGIN\r\n");
	n += strlen(buf + 1);
	ASSERT_INT(dbus_message_write(&hello_call, NULL, 0, &m1, &l1), ==, 0);
	ASSERT_INT(dbus_message_write(&sig, NULL, 0, &m2, &l2), ==, 0);
	ASSERT(n + l1 + l2 <= sizeof(buf));
	memcpy(buf + n, m1, l1);
	memcpy(buf + n + l1, m2, l2);
	free(m1);
	free(m2);
	fd = unix_connect(sock_path, SOCK_STREAM);
	ASSERT(fd >= 0);
	ASSERT_INT(write(fd, buf, n + l1 + l2), ==, (ssize_t)(n + l1 + l2));
	close(fd);
	end = now_ms() + 5000;
	while (!partings && now_ms() < end)
		if (sd_bus_process(b, NULL) == 0)
			(void)sd_bus_wait(b, 100000);
	ASSERT_INT(partings, ==, 1);
	sd_bus_slot_unref(slot);
	ok("a signal sent just before hanging up is routed (its sender's answers find no reader)");
}

/* NameOwnerChanged comes before anything the new owner sends after RequestName, the loss after its last. */
static void test_owner_order(sd_bus *b)
{
	uint64_t end;
	pid_t pid;
	int status;

	ASSERT_INT(sd_bus_add_match(b, NULL,
				    "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
				    "arg0='org.brokerdtest.Order'",
				    NULL, NULL),
		   >=, 0);
	ASSERT_INT(sd_bus_add_match(b, NULL, "type='signal',interface='" IFACE "',member='Hi'", NULL, NULL),
		   >=, 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		sd_bus *o = connect_bus();

		ASSERT_INT(sd_bus_request_name(o, "org.brokerdtest.Order", 0), >=, 0);
		ASSERT_INT(sd_bus_emit_signal(o, PATH, IFACE, "Hi", ""), >=, 0);
		sd_bus_flush_close_unref(o);
		_exit(0);
	}
	end = now_ms() + 10000;
	while (strlen(order) < 3 && now_ms() < end)
		if (sd_bus_process(b, NULL) == 0)
			(void)sd_bus_wait(b, 100000);
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT_STR(order, "NHL");
	ok("NameOwnerChanged before the new owner's first signal, and after its last");
}

/* The driver's other calls, as a D-Bus client sees them. */
static char **strv_free(char **l)
{
	for (char **p = l; p && *p; p++)
		free(*p);
	free(l);
	return NULL;
}

static void test_driver(sd_bus *b)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *s;
	char **owners = NULL, **strv = NULL;
	uint32_t u;

	/* queued owners: the server first, then us */
	ASSERT_INT(sd_bus_request_name(b, NAME, SD_BUS_NAME_QUEUE), ==, 0);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "ListQueuedOwners", &e, &reply, "s", NAME),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read_strv(reply, &owners), >=, 0);
	reply = sd_bus_message_unref(reply);
	ASSERT(owners && owners[0] && owners[1] && !owners[2]);
	ASSERT_INT(sd_bus_get_unique_name(b, &s), ==, 0);
	ASSERT_STR(owners[1], s);
	for (char **p = owners; *p; p++)
		free(*p);
	free(owners);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "ReleaseName", &e, &reply, "s", NAME),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "u", &u), >=, 0);
	ASSERT_INT(u, ==, 1); /* released (from the queue) */
	reply = sd_bus_message_unref(reply);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "ReleaseName", &e, &reply, "s", NAME),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "u", &u), >=, 0);
	ASSERT_INT(u, ==, 3); /* not an owner */
	reply = sd_bus_message_unref(reply);

	/* match rules: an invalid one, removing one never added */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "AddMatch", &e, NULL, "s", "type='nonsense'"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.MatchRuleInvalid"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "RemoveMatch", &e, NULL, "s", "member='Never'"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.MatchRuleNotFound"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "AddMatch", &e, NULL, "s", "member='Once',type='signal'"),
		   >=, 0);
	/* the same rule written otherwise is the same rule */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "RemoveMatch", &e, NULL, "s", "type=signal,member=Once"),
		   >=, 0);

	/* wrong arguments, the standard interfaces of the bus object */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetNameOwner", &e, NULL, "u", 1U),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.InvalidArgs"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
				      "org.freedesktop.DBus.Introspectable", "Introspect", &e, &reply, ""),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT(strstr(s, "<method name=\"RequestName\">") != NULL);
	reply = sd_bus_message_unref(reply);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
				      "org.freedesktop.DBus.Properties", "Get", &e, &reply, "ss",
				      DBUS_DRIVER_INTERFACE, "Features"),
		   >=, 0);
	ASSERT_INT(sd_bus_message_enter_container(reply, 'v', "as"), >, 0);
	ASSERT_INT(sd_bus_message_read(reply, "as", 1, &s), >, 0);
	ASSERT_STR(s, "HeaderFiltering");
	reply = sd_bus_message_unref(reply);
	ASSERT_INT(sd_bus_get_property_strv(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
					    "Interfaces", &e, &strv),
		   >=, 0);
	ASSERT(strv && strv[0] && !strcmp(strv[0], "org.freedesktop.DBus.Monitoring") && strv[1] &&
	       !strcmp(strv[1], "org.freedesktop.DBus.Debug.Stats") && !strv[2]);
	strv = strv_free(strv);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
				      "org.freedesktop.DBus.Properties", "Get", &e, &reply, "ss",
				      DBUS_DRIVER_INTERFACE, "Nothing"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownProperty"));
	sd_bus_error_free(&e);
	/* as dbus-daemon: only on the bus object's path, unknown interfaces named, nothing writable */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, "/", "org.freedesktop.DBus.Properties", "Get", &e,
				      &reply, "ss", DBUS_DRIVER_INTERFACE, "Features"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownInterface"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, "org.freedesktop.DBus.Properties",
				      "GetAll", &e, &reply, "s", "com.example.Nope"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownInterface"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, "org.freedesktop.DBus.Properties",
				      "Set", &e, &reply, "ssv", DBUS_DRIVER_INTERFACE, "Features", "b", 0),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.PropertyReadOnly"));
	sd_bus_error_free(&e);
	ok("driver: ListQueuedOwners, ReleaseName, AddMatch/RemoveMatch errors, InvalidArgs, Introspect, Properties");
}

/*
 * A native client's name: listed, its owner known. The host's brokerd runs
 * without kernel channels, so a call across is refused as NotSupported,
 * saying why (with channels the bridge carries it: the guest test
 * brokerd-dbus-bridge); RequestName of a name a native client owns too.
 */
static void test_native(sd_bus *b, const char *ctrl)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	struct tc c;
	struct tc_msg m;
	char **names = NULL;
	const char *owner;

	ASSERT_INT(tc_connect_hello(&c, ctrl, 0), ==, 0);
	ASSERT_INT(tc_call(&c, CTRL_OP_REQUEST_NAME, &m, "su", "org.brokerdtest.Native", 0), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	tc_msg_close_fds(&m);
	ASSERT_INT(sd_bus_list_names(b, &names, NULL), >=, 0);
	ASSERT(list_has(names, "org.brokerdtest.Native"));
	ASSERT(list_has(names, c.unique));
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetNameOwner", &e, &reply, "s", "org.brokerdtest.Native"),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &owner), >=, 0);
	ASSERT_STR(owner, c.unique);
	reply = sd_bus_message_unref(reply);
	ASSERT_INT(sd_bus_call_method(b, "org.brokerdtest.Native", PATH, IFACE, "Echo", &e, NULL, "s", "x"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.NotSupported"));
	ASSERT(e.message && strstr(e.message, "no kernel IPC channels"));
	sd_bus_error_free(&e);
	/* one queue: sd-bus asks DO_NOT_QUEUE, so the name a native client owns exists */
	ASSERT_INT(sd_bus_request_name(b, "org.brokerdtest.Native", 0), ==, -EEXIST);
	close(c.fd);
	ok("a native client's name: in ListNames, GetNameOwner; without channels calls across are NotSupported");
}

/*
 * The other way: a D-Bus client's name, as native clients see it (what
 * their calls through the bridge rely on): NameOwnerChanged, LIST_NAMES,
 * GET_NAME_OWNER and LIST_QUEUED_OWNERS know it and its owner.
 */
static void test_dbus_name_seen_natively(sd_bus *b, const char *ctrl)
{
	const char *name = "org.brokerdtest.DBusOwned", *unique = NULL;
	struct tc c;
	struct tc_msg m;
	bool listed = false, unique_listed = false;
	uint32_t count;

	ASSERT_INT(sd_bus_get_unique_name(b, &unique), >=, 0);
	ASSERT_INT(tc_connect_hello(&c, ctrl, CTRL_HELLO_NAME_EVENTS), ==, 0);
	ASSERT_INT(sd_bus_request_name(b, name, 0), >=, 0);
	ASSERT_INT(tc_wait_signal(&c, CTRL_SIGNAL_NAME_OWNER_CHANGED, &m, 5000), ==, 0);
	ASSERT_STR(tc_read_string(&m), name);
	ASSERT_STR(tc_read_string(&m), "");
	ASSERT_STR(tc_read_string(&m), unique);
	ASSERT_INT(tc_call(&c, CTRL_OP_GET_NAME_OWNER, &m, "s", name), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	ASSERT_STR(tc_read_string(&m), unique);
	ASSERT_INT(tc_call(&c, CTRL_OP_LIST_QUEUED_OWNERS, &m, "s", name), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	ASSERT_INT(tc_read_u32(&m), ==, 1);
	ASSERT_STR(tc_read_string(&m), unique);
	ASSERT_INT(tc_call(&c, CTRL_OP_LIST_NAMES, &m, "u", 0), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	count = tc_read_u32(&m);
	for (uint32_t i = 0; i < count; i++) {
		const char *s = tc_read_string(&m);

		listed |= !strcmp(s, name);
		unique_listed |= !strcmp(s, unique);
	}
	ASSERT(listed && unique_listed);
	ASSERT_INT(sd_bus_release_name(b, name), >=, 0);
	ASSERT_INT(tc_wait_signal(&c, CTRL_SIGNAL_NAME_OWNER_CHANGED, &m, 5000), ==, 0);
	ASSERT_STR(tc_read_string(&m), name);
	ASSERT_STR(tc_read_string(&m), unique);
	ASSERT_STR(tc_read_string(&m), "");
	close(c.fd);
	ok("a D-Bus client's name: native NameOwnerChanged, LIST_NAMES, GET_NAME_OWNER, LIST_QUEUED_OWNERS");
}

/* RequestName on a raw connection: the result code (1 primary, 2 queued, 3 exists, 4 already). */
static uint32_t raw_request_name(int fd, uint32_t serial, const char *name, uint32_t flags)
{
	struct dbus_header h = { .type = DBUS_MESSAGE_METHOD_CALL,
				 .serial = serial,
				 .path = DBUS_DRIVER_PATH,
				 .interface = DBUS_DRIVER_INTERFACE,
				 .member = "RequestName",
				 .destination = DBUS_DRIVER_NAME,
				 .signature = "su" };
	struct dbus_writer w;
	struct dbus_message m;
	uint32_t result;
	void *body;
	size_t len;

	ASSERT_INT(dbus_writer_init(&w, h.signature), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 's', name), ==, 0);
	ASSERT_INT(dbus_writer_append_basic(&w, 'u', &flags), ==, 0);
	ASSERT_INT(dbus_writer_finish(&w, &body, &len), ==, 0);
	dbus_writer_deinit(&w);
	raw_send(fd, &h, body, len);
	free(body);
	raw_reply(fd, serial, &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	memcpy(&result, m.body, 4);
	dbus_message_deinit(&m);
	return result;
}

/* Read fd until the driver's signal member about name; its owners (NameOwnerChanged) into old and new. */
static void raw_wait_name_signal(int fd, const char *member, const char *name, char *old, char *new)
{
	for (;;) {
		struct dbus_message m;
		struct dbus_reader r;
		const char *a = NULL, *o = NULL, *n = NULL;
		bool hit;

		raw_next(fd, &m);
		hit = m.h.type == DBUS_MESSAGE_SIGNAL && !strcmp(m.h.member, member) &&
		      dbus_reader_init(&r, m.h.signature ? m.h.signature : "", m.body, m.body_len, m.byte_order,
				       0) == 0 &&
		      dbus_reader_read_basic(&r, 's', &a) == 1 && !strcmp(a, name);
		if (hit && old) {
			ASSERT_INT(dbus_reader_read_basic(&r, 's', &o), ==, 1);
			ASSERT_INT(dbus_reader_read_basic(&r, 's', &n), ==, 1);
			strcpy(old, o);
			strcpy(new, n);
		}
		dbus_message_deinit(&m);
		if (hit)
			return;
	}
}

/* The next native NameOwnerChanged about name: its old and new owner must be these. */
static void native_wait_owner_changed(struct tc *c, const char *name, const char *old, const char *new)
{
	struct tc_msg m;

	for (;;) {
		ASSERT_INT(tc_wait_signal(c, CTRL_SIGNAL_NAME_OWNER_CHANGED, &m, 5000), ==, 0);
		if (strcmp(tc_read_string(&m), name) == 0)
			break;
	}
	ASSERT_STR(tc_read_string(&m), old);
	ASSERT_STR(tc_read_string(&m), new);
}

static uint32_t native_request(struct tc *c, const char *name, uint32_t flags)
{
	struct tc_msg m;
	uint32_t r;

	ASSERT_INT(tc_call(c, CTRL_OP_REQUEST_NAME, &m, "su", name, flags), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	r = tc_read_u32(&m);
	tc_msg_close_fds(&m);
	return r;
}

/* LIST_QUEUED_OWNERS of name as one string "a b c", and the same from ListQueuedOwners. */
static void queues_agree(struct tc *c, sd_bus *b, const char *name, const char *want)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	char got[512] = "", dgot[512] = "";
	const char *s;
	struct tc_msg m;
	uint32_t n;

	ASSERT_INT(tc_call(c, CTRL_OP_LIST_QUEUED_OWNERS, &m, "s", name), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? " " : "", tc_read_string(&m));
	ASSERT_STR(got, want);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "ListQueuedOwners", &e, &reply, "s", name),
		   >=, 0);
	ASSERT_INT(sd_bus_message_enter_container(reply, 'a', "s"), >, 0);
	for (int i = 0; sd_bus_message_read(reply, "s", &s) > 0; i++)
		snprintf(dgot + strlen(dgot), sizeof(dgot) - strlen(dgot), "%s%s", i ? " " : "", s);
	sd_bus_message_unref(reply);
	ASSERT_STR(dgot, want);
}

/*
 * One owner queue for both protocols: a D-Bus client queues behind a native
 * owner and takes over when it releases, and the other way round (with the
 * three flags, the native ones mapped bit for bit); a native owner that
 * goes promotes a D-Bus one. Both sides see the same queue and the same
 * NameOwnerChanged; the D-Bus client gets NameAcquired and NameLost.
 */
static void test_shared_queue(sd_bus *b, const char *ctrl)
{
	const char *name = "org.brokerdtest.Shared";
	char d[64], old[64], new[64], want[256];
	struct tc c, w;
	struct tc_msg m;
	int fd = raw_connect();

	raw_hello_name(fd, d, sizeof(d));
	raw_add_match(fd, 9, "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged'", NULL);
	ASSERT_INT(tc_connect_hello(&c, ctrl, 0), ==, 0);
	ASSERT_INT(tc_connect_hello(&w, ctrl, CTRL_HELLO_NAME_EVENTS), ==, 0);

	/* native first, D-Bus queued behind it */
	ASSERT_INT(native_request(&c, name, 0), ==, CTRL_NAME_PRIMARY_OWNER);
	native_wait_owner_changed(&w, name, "", c.unique);
	ASSERT_INT(raw_request_name(fd, 10, name, 4 /* DO_NOT_QUEUE */), ==, 3 /* EXISTS */);
	ASSERT_INT(raw_request_name(fd, 11, name, 0), ==, 2 /* IN_QUEUE */);
	snprintf(want, sizeof(want), "%s %s", c.unique, d);
	queues_agree(&w, b, name, want);
	/* the native owner releases: the D-Bus client is the owner, for both sides */
	ASSERT_INT(tc_call(&c, CTRL_OP_RELEASE_NAME, &m, "s", name), ==, 0);
	ASSERT_INT(tc_read_u32(&m), ==, CTRL_RELEASE_RELEASED);
	raw_wait_name_signal(fd, "NameOwnerChanged", name, old, new);
	ASSERT_STR(old, c.unique);
	ASSERT_STR(new, d);
	raw_wait_name_signal(fd, "NameAcquired", name, NULL, NULL);
	native_wait_owner_changed(&w, name, c.unique, d);
	ASSERT_INT(tc_call(&w, CTRL_OP_GET_NAME_OWNER, &m, "s", name), ==, 0);
	ASSERT_STR(tc_read_string(&m), d);
	ok("a D-Bus client queued behind a native owner (DO_NOT_QUEUE: exists) owns the name when it releases");

	/* the other way: native queued behind the D-Bus owner; REPLACE_EXISTING needs its ALLOW_REPLACEMENT */
	ASSERT_INT(native_request(&c, name, CTRL_NAME_REPLACE_EXISTING), ==, CTRL_NAME_IN_QUEUE);
	ASSERT_INT(raw_request_name(fd, 12, name, 1 /* ALLOW_REPLACEMENT */), ==, 4 /* ALREADY_OWNER */);
	ASSERT_INT(native_request(&c, name, CTRL_NAME_REPLACE_EXISTING), ==, CTRL_NAME_PRIMARY_OWNER);
	raw_wait_name_signal(fd, "NameLost", name, NULL, NULL);
	raw_wait_name_signal(fd, "NameOwnerChanged", name, old, new);
	ASSERT_STR(old, d);
	ASSERT_STR(new, c.unique);
	native_wait_owner_changed(&w, name, d, c.unique);
	snprintf(want, sizeof(want), "%s %s", c.unique, d); /* the replaced owner waits first in line */
	queues_agree(&w, b, name, want);
	ok("a native REQUEST_NAME with REPLACE_EXISTING takes a D-Bus owner's name it allowed to be replaced");

	/* the native owner goes: the D-Bus client is promoted */
	tc_close(&c);
	raw_wait_name_signal(fd, "NameOwnerChanged", name, old, new);
	ASSERT_STR(new, d);
	raw_wait_name_signal(fd, "NameAcquired", name, NULL, NULL);
	native_wait_owner_changed(&w, name, old, d);
	ASSERT_INT(tc_connect_hello(&c, ctrl, 0), ==, 0);
	ASSERT_INT(native_request(&c, name, CTRL_NAME_DO_NOT_QUEUE), ==, CTRL_NAME_EXISTS);
	ASSERT_INT(native_request(&c, name, 0), ==, CTRL_NAME_IN_QUEUE);
	/* and the D-Bus owner goes: the native one is promoted */
	close(fd);
	native_wait_owner_changed(&w, name, d, c.unique);
	ASSERT_INT(tc_call(&c, CTRL_OP_RELEASE_NAME, &m, "s", name), ==, 0);
	ASSERT_INT(tc_read_u32(&m), ==, CTRL_RELEASE_RELEASED);
	native_wait_owner_changed(&w, name, c.unique, "");
	tc_close(&c);
	tc_close(&w);
	ok("a native owner that goes promotes a queued D-Bus client, and the other way round");
}

struct creds_reply {
	uint32_t mask, pid, uid, gid, n_gids;
	char label[256];
	int pidfd;
};

static void get_creds(struct tc *c, const char *name, struct creds_reply *cr)
{
	struct tc_msg m;

	ASSERT_INT(tc_call(c, CTRL_OP_GET_CREDENTIALS, &m, "s", name), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	cr->mask = tc_read_u32(&m);
	cr->pid = tc_read_u32(&m);
	cr->uid = tc_read_u32(&m);
	cr->gid = tc_read_u32(&m);
	cr->n_gids = tc_read_u32(&m);
	for (uint32_t i = 0; i < cr->n_gids; i++)
		tc_read_u32(&m);
	snprintf(cr->label, sizeof(cr->label), "%s", tc_read_string(&m));
	cr->pidfd = m.n_fds ? m.fds[0] : -1;
	for (unsigned int i = 1; i < m.n_fds; i++)
		close(m.fds[i]);
}

/*
 * A D-Bus client's credentials as native clients see them, by its unique
 * name and by a name it owns: GET_CREDENTIALS gives what it gives for a
 * native peer (compared with the native client's own, made by this same
 * process), and LIST_PEERS lists it with its names.
 */
static void test_dbus_creds_natively(sd_bus *b, const char *ctrl)
{
	const char *name = "org.brokerdtest.DBusCreds", *unique = NULL;
	struct creds_reply self, byu, byn;
	struct tc c;
	struct tc_msg m;
	uint32_t n;
	bool listed = false;

	ASSERT_INT(sd_bus_get_unique_name(b, &unique), >=, 0);
	ASSERT_INT(sd_bus_request_name(b, name, 0), >=, 0);
	ASSERT_INT(tc_connect_hello(&c, ctrl, 0), ==, 0);
	get_creds(&c, c.unique, &self);
	get_creds(&c, unique, &byu);
	get_creds(&c, name, &byn);
	for (const struct creds_reply *cr = &byu; cr; cr = cr == &byu ? &byn : NULL) {
		ASSERT_INT(cr->mask, ==, self.mask);
		ASSERT(cr->mask & CTRL_CREDS_UID && cr->mask & CTRL_CREDS_GIDS);
		ASSERT_INT(cr->pid, ==, cr->mask & CTRL_CREDS_PID ? (uint32_t)getpid() : 0);
		ASSERT_INT(cr->uid, ==, (uint32_t)getuid());
		ASSERT_INT(cr->gid, ==, (uint32_t)getgid());
		ASSERT_INT(cr->n_gids, >=, 1); /* the primary group at least, as GetConnectionCredentials */
		ASSERT_STR(cr->label, self.label);
		/* no SO_PEERPIDFD (before Linux 6.5): neither pid nor pidfd, for either kind of peer */
		if (cr->mask & CTRL_CREDS_PIDFD) {
			ASSERT_INT(tc_pidfd_pid(cr->pidfd), ==, getpid());
			close(cr->pidfd);
		}
	}
	if (self.pidfd >= 0)
		close(self.pidfd);
	ASSERT_INT(tc_call(&c, CTRL_OP_GET_CREDENTIALS, &m, "s", ":1.999999999"), ==, 0);
	ASSERT_STR(m.error_name, CTRL_ERROR_NAME_HAS_NO_OWNER);
	ASSERT_INT(tc_call(&c, CTRL_OP_LIST_PEERS, &m, "u", 0), ==, 0);
	ASSERT_INT(m.m.hdr.type, ==, CTRL_TYPE_REPLY);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++) {
		const char *u = tc_read_string(&m);
		uint64_t id;
		uint32_t pid, uid, k;
		bool mine = !strcmp(u, unique), owns = false;

		ASSERT_INT(ctrl_read_u64(&m.r, &id), ==, 0);
		pid = tc_read_u32(&m);
		uid = tc_read_u32(&m);
		tc_read_u32(&m);
		tc_read_string(&m);
		k = tc_read_u32(&m);
		for (uint32_t j = 0; j < k; j++)
			owns |= !strcmp(tc_read_string(&m), name);
		tc_read_u32(&m);
		if (!mine)
			continue;
		ASSERT_INT(pid, ==, (uint32_t)getpid());
		ASSERT_INT(uid, ==, (uint32_t)getuid());
		ASSERT(owns);
		listed = true;
	}
	ASSERT(listed);
	ASSERT_INT(sd_bus_release_name(b, name), >=, 0);
	close(c.fd);
	ok("a D-Bus client's credentials: native GET_CREDENTIALS by unique and owned name, LIST_PEERS");
}

static bool dbus_connect_works(void)
{
	sd_bus *b = NULL;
	bool ok;

	ASSERT_INT(sd_bus_new(&b), >=, 0);
	ASSERT_INT(sd_bus_set_address(b, address), >=, 0);
	ASSERT_INT(sd_bus_set_bus_client(b, 1), >=, 0);
	ok = sd_bus_start(b) >= 0 &&
	     sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, "org.freedesktop.DBus.Peer", "Ping",
				NULL, NULL, "") >= 0;
	sd_bus_flush_close_unref(b);
	return ok;
}

/*
 * One budget per uid for both protocols: with "connections 2" for uid 2003,
 * a native and a D-Bus connection use it up, a third of either kind is
 * refused, and closing one makes room again.
 */
static void test_quota(const char *ctrl)
{
	pid_t pid;
	int status;

	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct dbus_message m;
		struct tc c;
		sd_bus *b;
		bool again = false;
		int fd;

		ASSERT_INT(setgroups(0, NULL), ==, 0);
		ASSERT_INT(setgid(2003), ==, 0);
		ASSERT_INT(setuid(2003), ==, 0);
		ASSERT_INT(tc_connect_hello(&c, ctrl, 0), ==, 0);
		b = connect_bus();
		ASSERT(!dbus_connect_works());
		/* As dbus-daemon: the client over the limit hears why from its Hello (libdbus's tests ask). */
		fd = raw_connect();
		raw_hello_answer(fd, &m);
		ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_ERROR);
		ASSERT_STR(m.h.error_name, "org.freedesktop.DBus.Error.LimitsExceeded");
		ASSERT(m.body_len > 4 && strstr((const char *)m.body + 4, "connections: uid 2003 uses 2 of 2"));
		dbus_message_deinit(&m);
		close(fd);
		ASSERT(tc_connect_hello(&(struct tc){ .fd = -1 }, ctrl, 0) != 0);
		close(c.fd);
		for (int i = 0; i < 200 && !again; i++) {
			again = dbus_connect_works();
			if (!again)
				usleep(10000);
		}
		ASSERT(again);
		sd_bus_flush_close_unref(b);
		_exit(0);
	}
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ok("one connections quota per uid for native and D-Bus connections");
}

/* ---- A second brokerd, for limits and state the first must not share ---------- */

struct second {
	char dir[64], dbus[128], ctrl[128], state[128];
	pid_t pid;
};

/* Starts brokerd (exe) in a fresh directory with policy (a policy file's text) and a state file. */
static void second_start(struct second *s, const char *exe, const char *policy)
{
	char pdir[128], pfile[160], sdir[128];
	FILE *fp;

	if (!s->dir[0]) {
		snprintf(s->dir, sizeof(s->dir), "/tmp/test-dbus2-XXXXXX");
		ASSERT(mkdtemp(s->dir));
		ASSERT_INT(chmod(s->dir, 0755), ==, 0);
	}
	snprintf(s->dbus, sizeof(s->dbus), "%s/dbus", s->dir);
	snprintf(s->ctrl, sizeof(s->ctrl), "%s/socket", s->dir);
	snprintf(s->state, sizeof(s->state), "%s/next-id", s->dir);
	snprintf(pdir, sizeof(pdir), "%s/policy.d", s->dir);
	snprintf(sdir, sizeof(sdir), "%s/services", s->dir);
	(void)mkdir(pdir, 0755);
	(void)mkdir(sdir, 0755);
	snprintf(pfile, sizeof(pfile), "%s/50-test.conf", pdir);
	fp = fopen(pfile, "we");
	ASSERT(fp);
	fputs(policy, fp);
	ASSERT_INT(fclose(fp), ==, 0);
	(void)unlink(s->dbus);
	s->pid = fork();
	ASSERT(s->pid >= 0);
	if (s->pid == 0) {
		char dbus_arg[160];

		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(dbus_arg, sizeof(dbus_arg), "--dbus-address=unix:path=%s", s->dbus);
		execl(exe, exe, "--state", s->state, "--address", s->ctrl, "--policy-dir", pdir,
		      "--service-dir", sdir, "--no-channels", dbus_arg, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && access(s->dbus, F_OK) < 0; i++)
		usleep(10000);
	ASSERT_INT(access(s->dbus, F_OK), ==, 0);
}

static void second_stop(struct second *s, int sig)
{
	int status;

	kill(s->pid, sig);
	ASSERT_INT(waitpid(s->pid, &status, 0), ==, s->pid);
}

static void second_cleanup(struct second *s)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	ASSERT_INT(system(cmd), ==, 0);
}

static bool dbus_works_at(const char *path)
{
	char saved[sizeof(address)];
	bool r;

	snprintf(saved, sizeof(saved), "%s", address);
	snprintf(address, sizeof(address), "unix:path=%s", path);
	r = dbus_connect_works();
	snprintf(address, sizeof(address), "%s", saved);
	return r;
}

static sd_bus *connect_at(const char *path)
{
	char saved[sizeof(address)];
	sd_bus *b;

	snprintf(saved, sizeof(saved), "%s", address);
	snprintf(address, sizeof(address), "unix:path=%s", path);
	b = connect_bus();
	snprintf(address, sizeof(address), "%s", saved);
	return b;
}

/*
 * D-Bus connections count against the bus-wide cap and its reserve as
 * native ones do: max_connections 4 with 2 reserved; uid 2003 (connections
 * 8, so "light" below 2) gets a D-Bus and a native connection, then a third
 * of either kind is refused by the reserve; root takes the last two (one of
 * each kind), then a fifth of either kind is refused by the cap, and a
 * D-Bus connection that closes makes room for a D-Bus one again.
 */
static void test_cap(const char *exe)
{
	struct second s = { 0 };
	int ready[2], hold[2], status;
	pid_t pid;
	sd_bus *r1;
	struct tc n1;
	bool again = false;
	char x;

	second_start(&s, exe,
		     "[default]\nallow * org.brokerdtest.*\n[limits]\nmax_connections 4\n"
		     "reserved_connections 2\n[limits user 2003]\nconnections 8\n");
	ASSERT_INT(pipe(ready), ==, 0);
	ASSERT_INT(pipe(hold), ==, 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct tc c;
		sd_bus *b;

		close(ready[0]);
		close(hold[1]);
		ASSERT_INT(setgroups(0, NULL), ==, 0);
		ASSERT_INT(setgid(2003), ==, 0);
		ASSERT_INT(setuid(2003), ==, 0);
		b = connect_at(s.dbus);
		ASSERT_INT(tc_connect_hello(&c, s.ctrl, 0), ==, 0);
		ASSERT(!dbus_works_at(s.dbus));
		ASSERT(tc_connect_hello(&(struct tc){ .fd = -1 }, s.ctrl, 0) != 0);
		ASSERT_INT(write(ready[1], "r", 1), ==, 1);
		(void)read(hold[0], &x, 1); /* until the parent is done */
		sd_bus_flush_close_unref(b);
		close(c.fd);
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	ASSERT_INT(read(ready[0], &x, 1), ==, 1);
	r1 = connect_at(s.dbus);
	ASSERT_INT(tc_connect_hello(&n1, s.ctrl, 0), ==, 0);
	ASSERT(!dbus_works_at(s.dbus));
	ASSERT(tc_connect_hello(&(struct tc){ .fd = -1 }, s.ctrl, 0) != 0);
	sd_bus_flush_close_unref(r1);
	for (int i = 0; i < 200 && !again; i++) {
		again = dbus_works_at(s.dbus);
		if (!again)
			usleep(10000);
	}
	ASSERT(again);
	close(n1.fd);
	close(hold[1]);
	close(ready[0]);
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	second_stop(&s, SIGTERM);
	second_cleanup(&s);
	ok("D-Bus connections count against max_connections and its reserve, with native ones");
}

static unsigned long long hello_id(sd_bus *b)
{
	const char *u;

	uint64_t id;

	ASSERT_INT(sd_bus_get_unique_name(b, &u), >=, 0);
	ASSERT_INT(ctrl_unique_name_parse(u, &id), ==, 0);
	return id;
}

/*
 * A D-Bus Hello records its id in the state file as a native HELLO does:
 * after 1100 Hellos (beyond the block recorded at start) and a SIGKILL (no
 * clean shutdown), the next brokerd starts above every id the first gave.
 */
static void test_ids_durable(const char *exe)
{
	struct second s = { 0 };
	unsigned long long first, recorded = 0, later;
	sd_bus *b;
	FILE *fp;

	second_start(&s, exe, "[default]\nallow * org.brokerdtest.*\n");
	/* past the first block brokerd records at start (1024 ids) */
	for (;;) {
		b = connect_at(s.dbus);
		first = hello_id(b);
		if (first > 1100)
			break;
		sd_bus_flush_close_unref(b);
	}
	fp = fopen(s.state, "re");
	ASSERT(fp);
	ASSERT_INT(fscanf(fp, "%llu", &recorded), ==, 1);
	fclose(fp);
	ASSERT(recorded > first);
	sd_bus_flush_close_unref(b);
	second_stop(&s, SIGKILL);
	second_start(&s, exe, "[default]\nallow * org.brokerdtest.*\n");
	b = connect_at(s.dbus);
	later = hello_id(b);
	ASSERT(later >= recorded);
	sd_bus_flush_close_unref(b);
	second_stop(&s, SIGTERM);
	second_cleanup(&s);
	printf("# D-Bus Hello of id %llu, recorded %llu, after SIGKILL id %llu\n", first, recorded, later);
	ok("a D-Bus Hello's unique id is recorded: never given again after a crash");
}

static void test_noreply(sd_bus *b, pid_t server)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	uint64_t t0 = now_ms();
	int status;

	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Die", &e, NULL, ""), <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.NoReply"));
	ASSERT_STR(e.message, "Message recipient disconnected from message bus without replying");
	ASSERT(now_ms() - t0 < 10000);
	printf("# NoReply %llu ms after the call\n", (unsigned long long)(now_ms() - t0));
	sd_bus_error_free(&e);
	ASSERT_INT(waitpid(server, &status, 0), ==, server);
	wait_owner(b, NAME, false);
	ok("a callee that exits in a call: NoReply, and its name is released");
}

/* ---- Activation, the driver's other methods, monitors ---------------------- */

#define ACT_NAME    "org.brokerdtest.Activated"
#define AUTO_NAME   "org.brokerdtest.Auto"
#define BROKEN_NAME "org.brokerdtest.Broken"
#define FORK_NAME   "org.brokerdtest.Forking"

/* What brokerd runs for an activatable name (Exec=): owns it and answers Env (the variable asked for). */
static int on_env(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	const char *k, *v;
	int r = sd_bus_message_read(m, "s", &k);

	if (r < 0)
		return r;
	v = getenv(k);
	return sd_bus_reply_method_return(m, "s", v ? v : "(unset)");
}

static const sd_bus_vtable activated_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Echo", "s", "s", on_echo, 0),
	SD_BUS_METHOD("Env", "s", "s", on_env, 0),
	SD_BUS_VTABLE_END,
};

static int activated_main(const char *name)
{
	const char *a = getenv("DBUS_STARTER_ADDRESS");
	sd_bus *b = NULL;

	/* the bus's address comes from brokerd, as dbus-daemon gives it */
	if (!a || sd_bus_new(&b) < 0 || sd_bus_set_address(b, a) < 0 || sd_bus_set_bus_client(b, 1) < 0 ||
	    sd_bus_start(b) < 0)
		return 2;
	if (sd_bus_add_object_vtable(b, NULL, PATH, IFACE, activated_vtable, NULL) < 0 ||
	    sd_bus_request_name(b, name, 0) < 0)
		return 3;
	for (int i = 0; i < 600; i++) {
		int r = sd_bus_process(b, NULL);

		if (r < 0)
			return 0; /* brokerd went: so do we */
		if (r == 0)
			(void)sd_bus_wait(b, 100000);
	}
	return 0;
}

static void write_service(const char *dir, const char *name, const char *exec)
{
	char path[400];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s.service", dir, name);
	fp = fopen(path, "we");
	ASSERT(fp);
	fprintf(fp, "[D-BUS Service]\nName=%s\nExec=%s\n", name, exec);
	ASSERT_INT(fclose(fp), ==, 0);
}

static uint32_t start_by_name(sd_bus *b, const char *name, sd_bus_error *e)
{
	sd_bus_message *reply = NULL;
	uint32_t u = 0;

	if (sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
			       "StartServiceByName", e, &reply, "su", name, 0U) < 0)
		return 0;
	ASSERT_INT(sd_bus_message_read(reply, "u", &u), >=, 0);
	sd_bus_message_unref(reply);
	return u;
}

/*
 * Service files with Exec= only (a private bus has no systemd): ReloadConfig
 * finds them, StartServiceByName starts one (1) and then finds it running
 * (2), a call to a name nobody owns starts it and gets its answer, an Exec=
 * that fails fails the call, NO_AUTO_START does not start anything, and
 * UpdateActivationEnvironment reaches what is started later.
 */
static void test_activation(sd_bus *b, const char *services, const char *self)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL, *m = NULL;
	char exec[600], **names = NULL;
	const char *s;

	snprintf(exec, sizeof(exec), "'%s' --activated " ACT_NAME, self);
	write_service(services, ACT_NAME, exec);
	snprintf(exec, sizeof(exec), "'%s' --activated " AUTO_NAME, self);
	write_service(services, AUTO_NAME, exec);
	/* runs and fails (an Exec= that cannot be executed: Spawn.ExecFailed, brokerd-dbus-daemon's test) */
	write_service(services, BROKEN_NAME, "/bin/false");
	snprintf(exec, sizeof(exec), "'%s' --activated-fork " FORK_NAME, self);
	write_service(services, FORK_NAME, exec);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "ReloadConfig", &e, NULL, ""),
		   >=, 0);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "ListActivatableNames", &e, &reply, ""),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read_strv(reply, &names), >=, 0);
	reply = sd_bus_message_unref(reply);
	ASSERT(list_has(names, ACT_NAME) && list_has(names, AUTO_NAME) && list_has(names, DBUS_DRIVER_NAME));
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
	ok("ReloadConfig reads new service files; ListActivatableNames lists them");

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "UpdateActivationEnvironment", &e, NULL, "a{ss}", 1, "BROKERD_TEST_ENV",
				      "from UpdateActivationEnvironment"),
		   >=, 0);
	ASSERT_INT(start_by_name(b, ACT_NAME, &e), ==, 1);
	ASSERT_INT(start_by_name(b, ACT_NAME, &e), ==, 2);
	ASSERT_INT(sd_bus_call_method(b, ACT_NAME, PATH, IFACE, "Env", &e, &reply, "s", "BROKERD_TEST_ENV"),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT_STR(s, "from UpdateActivationEnvironment");
	reply = sd_bus_message_unref(reply);
	ok("StartServiceByName runs Exec= (1), then finds it running (2); UpdateActivationEnvironment reaches it");

	/* NO_AUTO_START: refused, nothing started */
	ASSERT_INT(sd_bus_message_new_method_call(b, &m, AUTO_NAME, PATH, IFACE, "Echo"), >=, 0);
	ASSERT_INT(sd_bus_message_set_auto_start(m, 0), >=, 0);
	ASSERT_INT(sd_bus_message_append(m, "s", "hi"), >=, 0);
	ASSERT_INT(sd_bus_call(b, m, 0, &e, NULL), <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.ServiceUnknown"));
	sd_bus_error_free(&e);
	m = sd_bus_message_unref(m);
	/* auto-start: the call waits for the name, then is answered by what was started */
	ASSERT_INT(sd_bus_call_method(b, AUTO_NAME, PATH, IFACE, "Echo", &e, &reply, "s", "auto"), >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT_STR(s, "auto");
	reply = sd_bus_message_unref(reply);
	ok("a call to an activatable name nobody owns starts it and is answered (not with NO_AUTO_START)");

	/* an Exec= that exits 1 before its name is owned: the call fails with the child's exit */
	ASSERT_INT(sd_bus_call_method(b, BROKEN_NAME, PATH, IFACE, "Echo", &e, NULL, "s", "x"), <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.Spawn.ChildExited"));
	sd_bus_error_free(&e);
	ASSERT(start_by_name(b, "org.brokerdtest.NoSuchService", &e) == 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.ServiceUnknown"));
	sd_bus_error_free(&e);
	ok("an activation that fails answers Spawn.ChildExited; an unknown name ServiceUnknown");

	/* a service that daemonizes: its Exec= exits 0 at once, the child it left takes the name */
	ASSERT_INT(sd_bus_call_method(b, FORK_NAME, PATH, IFACE, "Echo", &e, &reply, "s", "forked"), >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &s), >=, 0);
	ASSERT_STR(s, "forked");
	reply = sd_bus_message_unref(reply);
	ok("an Exec= that forks and exits 0 before the name is owned: the call waits and its child answers");

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetConnectionSELinuxSecurityContext", &e, NULL, "s", DBUS_DRIVER_NAME),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.SELinuxSecurityContextUnknown"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetConnectionSELinuxSecurityContext", &e, NULL, "s", ":1.999999"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.NameHasNoOwner"));
	sd_bus_error_free(&e);
	ok("GetConnectionSELinuxSecurityContext: SELinuxSecurityContextUnknown, NameHasNoOwner");
}

/* A connection that sd-bus lets read messages for others, before it calls BecomeMonitor. */
static sd_bus *monitor_connect(void)
{
	sd_bus *mon = NULL;

	ASSERT_INT(sd_bus_new(&mon), ==, 0);
	ASSERT_INT(sd_bus_set_address(mon, address), >=, 0);
	ASSERT_INT(sd_bus_set_bus_client(mon, 1), >=, 0);
	ASSERT_INT(sd_bus_set_monitor(mon, 1), >=, 0);
	ASSERT_INT(sd_bus_start(mon), >=, 0);
	return mon;
}

/*
 * A monitor's rule destination='UNIQUE' meets a call written to a
 * well-known name that UNIQUE owns (dbus-daemon matches the connection the
 * message is for), and destination='WELL.KNOWN' one written to its owner's
 * unique name; a call to the driver meets neither.
 */
static void test_monitor_destination(sd_bus *b)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *owner;
	char rule[2][128], unique[64];

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "GetNameOwner", &e, &reply, "s", NAME),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "s", &owner), >=, 0);
	snprintf(unique, sizeof(unique), "%s", owner);
	reply = sd_bus_message_unref(reply);
	snprintf(rule[0], sizeof(rule[0]), "destination='%s'", unique);
	snprintf(rule[1], sizeof(rule[1]), "destination='%s'", NAME);
	for (int i = 0; i < 2; i++) {
		sd_bus *mon = NULL;
		unsigned int seen = 0, other = 0;
		const char *name;
		char self[64];
		uint64_t t0;

		mon = monitor_connect();
		ASSERT_INT(sd_bus_get_unique_name(mon, &name), >=, 0);
		snprintf(self, sizeof(self), "%s", name);
		ASSERT_INT(sd_bus_call_method(mon, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
					      "org.freedesktop.DBus.Monitoring", "BecomeMonitor", &e, NULL, "asu",
					      1, rule[i], 0U),
			   >=, 0);
		ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE, "GetId",
					      &e, NULL, ""),
			   >=, 0);
		/* the one to i ? the unique name : the well-known name */
		ASSERT_INT(sd_bus_call_method(b, i ? unique : NAME, PATH, IFACE, "Echo", &e, &reply, "s", "d"), >=,
			   0);
		reply = sd_bus_message_unref(reply);
		t0 = now_ms();
		while (!seen && now_ms() - t0 < 5000) {
			sd_bus_message *m = NULL;
			int r = sd_bus_process(mon, &m);

			ASSERT(r >= 0);
			if (m && sd_bus_message_is_method_call(m, IFACE, "Echo"))
				seen++;
			else if (m && (!sd_bus_message_get_destination(m) ||
					    strcmp(sd_bus_message_get_destination(m), self) != 0))
				other++; /* its own NameAcquired and NameLost are its own, not monitored */
			sd_bus_message_unref(m);
			if (r == 0)
				(void)sd_bus_wait(mon, 100000);
		}
		ASSERT_INT(seen, ==, 1);
		ASSERT_INT(other, ==, 0); /* GetId and its reply, Echo's reply: for others */
		sd_bus_flush_close_unref(mon);
	}
	ok("a monitor's destination rule meets a message to any name of the connection it is for");
}

/*
 * BecomeMonitor: the monitor loses its unique name, sees a call between two
 * other connections and its reply, and is closed when it sends anything.
 */
static void test_monitor(sd_bus *b)
{
	sd_bus *mon = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *mon_name;
	char *unique = NULL;
	bool saw_call = false, saw_reply = false;
	uint64_t t0;

	mon = monitor_connect();
	ASSERT_INT(sd_bus_get_unique_name(mon, &mon_name), >=, 0);
	unique = strdup(mon_name);
	ASSERT_INT(sd_bus_call_method(mon, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
				      "org.freedesktop.DBus.Monitoring", "BecomeMonitor", &e, NULL, "asu", 1,
				      "eavesdrop=true,type='method_call',member='Echo'", 0U),
		   >=, 0);
	wait_owner(b, unique, false);
	ASSERT_INT(sd_bus_call_method(b, NAME, PATH, IFACE, "Echo", &e, &reply, "s", "watched"), >=, 0);
	reply = sd_bus_message_unref(reply);
	t0 = now_ms();
	while (!saw_call && now_ms() - t0 < 5000) {
		sd_bus_message *m = NULL;
		int r = sd_bus_process(mon, &m);

		ASSERT(r >= 0);
		if (m && sd_bus_message_is_method_call(m, IFACE, "Echo") &&
		    !strcmp(sd_bus_message_get_destination(m), NAME))
			saw_call = true;
		/* the rule asked for Echo calls only */
		uint8_t type = 0;

		if (m && sd_bus_message_get_type(m, &type) >= 0 && type == SD_BUS_MESSAGE_METHOD_RETURN)
			saw_reply = true;
		sd_bus_message_unref(m);
		if (r == 0)
			(void)sd_bus_wait(mon, 100000);
	}
	ASSERT(saw_call && !saw_reply);
	ok("BecomeMonitor: the monitor's unique name goes, it sees the call its rule matches");
	/* receive-only: anything it sends closes it */
	ASSERT_INT(sd_bus_call_method(mon, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE, "GetId",
				      &e, NULL, ""),
		   <, 0);
	sd_bus_error_free(&e);
	sd_bus_flush_close_unref(mon);
	free(unique);
	ok("a monitor that sends is disconnected");

	/* no rules: everything, the driver's replies included */
	mon = monitor_connect();
	ASSERT_INT(sd_bus_call_method(mon, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
				      "org.freedesktop.DBus.Monitoring", "BecomeMonitor", &e, NULL, "asu", 0,
				      0U),
		   >=, 0);
	ASSERT_INT(sd_bus_get_unique_name(b, &mon_name), >=, 0);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE, "GetId",
				      &e, &reply, ""),
		   >=, 0);
	reply = sd_bus_message_unref(reply);
	saw_reply = false;
	t0 = now_ms();
	while (!saw_reply && now_ms() - t0 < 5000) {
		sd_bus_message *m = NULL;
		uint8_t type = 0;
		int r = sd_bus_process(mon, &m);

		ASSERT(r >= 0);
		if (m && sd_bus_message_get_type(m, &type) >= 0 && type == SD_BUS_MESSAGE_METHOD_RETURN &&
		    !strcmp(sd_bus_message_get_sender(m), DBUS_DRIVER_NAME) &&
		    !strcmp(sd_bus_message_get_destination(m), mon_name))
			saw_reply = true;
		sd_bus_message_unref(m);
		if (r == 0)
			(void)sd_bus_wait(mon, 100000);
	}
	ASSERT(saw_reply);
	sd_bus_flush_close_unref(mon);
	ok("a monitor without rules sees the driver's replies too");

	/* Its rules are read as AddMatch's: a long one is no less valid, a bad eavesdrop value no more. */
	char rule[1400];
	int n = snprintf(rule, sizeof(rule), "type='signal',arg0='");

	memset(rule + n, 'a', 1200);
	snprintf(rule + n + 1200, sizeof(rule) - (size_t)n - 1200, "'");
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE, "AddMatch",
				      &e, NULL, "s", rule),
		   >=, 0);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "RemoveMatch", &e, NULL, "s", rule),
		   >=, 0);
	for (int bad = 0; bad < 2; bad++) {
		mon = monitor_connect();
		if (bad) {
			ASSERT_INT(sd_bus_call_method(mon, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
						      "org.freedesktop.DBus.Monitoring", "BecomeMonitor", &e, NULL,
						      "asu", 1, "eavesdrop='maybe'", 0U),
				   <, 0);
			ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.MatchRuleInvalid"));
			sd_bus_error_free(&e);
		} else {
			ASSERT_INT(sd_bus_call_method(mon, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
						      "org.freedesktop.DBus.Monitoring", "BecomeMonitor", &e, NULL,
						      "asu", 2, rule, "eavesdrop='false',type='signal'", 0U),
				   >=, 0);
		}
		sd_bus_flush_close_unref(mon);
	}
	ok("BecomeMonitor reads its rules as AddMatch does (a 1.2 KiB rule, eavesdrop='maybe' invalid)");
}

/* A method of an interface the bus object does not have: UnknownInterface; of one it has: UnknownMethod. */
static void test_unknown_interface(sd_bus *b)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH,
				      "org.freedesktop.DBus.Containers1", "GetConnectionInstance", &e, NULL,
				      "s", ":1.1"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownInterface"));
	sd_bus_error_free(&e);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "NoSuchMethod", &e, NULL, ""),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownMethod"));
	sd_bus_error_free(&e);
	/* Monitoring is only on the bus object's path */
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, "/", "org.freedesktop.DBus.Monitoring",
				      "BecomeMonitor", &e, NULL, "asu", 0, 0U),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.UnknownInterface"));
	sd_bus_error_free(&e);
	ok("the driver: UnknownInterface for an interface it lacks (Monitoring off its path), UnknownMethod for a method");
}

/* ---- Reply timeouts ------------------------------------------------------------ */

/* Hello on a raw connection; its unique name in name. */
/* The next method call on fd (signals such as NameAcquired skipped). */
static uint32_t raw_next_call(int fd)
{
	struct dbus_message m;
	uint32_t serial;

	for (;;) {
		raw_reply(fd, 0, &m);
		if (m.h.type == DBUS_MESSAGE_METHOD_CALL)
			break;
		dbus_message_deinit(&m);
	}
	serial = m.h.serial;
	dbus_message_deinit(&m);
	return serial;
}

static void raw_ping(int fd, uint32_t serial)
{
	struct dbus_header ping = { .type = DBUS_MESSAGE_METHOD_CALL,
				    .serial = serial,
				    .path = DBUS_DRIVER_PATH,
				    .interface = "org.freedesktop.DBus.Peer",
				    .member = "Ping",
				    .destination = DBUS_DRIVER_NAME };
	struct dbus_message m;

	raw_send(fd, &ping, NULL, 0);
	raw_reply(fd, serial, &m);
	dbus_message_deinit(&m);
}

/* A second brokerd with a caller and a callee on its D-Bus socket, which sock_path names meanwhile. */
struct pair {
	struct second s;
	char saved[sizeof(sock_path)], callee_name[64], caller_name[64];
	int caller, callee;
};

static void pair_open(struct pair *p, const char *exe, const char *policy)
{
	second_start(&p->s, exe, policy);
	memcpy(p->saved, sock_path, sizeof(p->saved));
	snprintf(sock_path, sizeof(sock_path), "%s", p->s.dbus);
	p->callee = raw_connect();
	raw_hello_name(p->callee, p->callee_name, sizeof(p->callee_name));
	p->caller = raw_connect();
	raw_hello_name(p->caller, p->caller_name, sizeof(p->caller_name));
}

static void pair_close(struct pair *p)
{
	close(p->caller);
	close(p->callee);
	second_stop(&p->s, SIGTERM);
	second_cleanup(&p->s);
	memcpy(sock_path, p->saved, sizeof(p->saved));
}

/*
 * reply_timeout_ms 300: a call its callee leaves unanswered gets the
 * driver's NoReply after that long, and the callee's late reply is refused
 * as unsolicited; a call answered in time passes as before.
 */
static void test_reply_timeout(const char *exe)
{
	struct pair p = { 0 };
	struct dbus_header call = { .type = DBUS_MESSAGE_METHOD_CALL,
				    .serial = 2,
				    .path = PATH,
				    .interface = IFACE,
				    .member = "Slow",
				    .destination = p.callee_name };
	struct dbus_header reply = { .type = DBUS_MESSAGE_METHOD_RETURN, .destination = p.caller_name };
	struct pollfd pfd;
	struct dbus_message m;
	uint64_t t0, waited;

	pair_open(&p, exe, "[default]\nallow * org.brokerdtest.*\n[limits]\nreply_timeout_ms 300\n");

	/* answered in time: passes */
	raw_send(p.caller, &call, NULL, 0);
	reply.serial = 2;
	reply.reply_serial = raw_next_call(p.callee);
	raw_send(p.callee, &reply, NULL, 0);
	raw_reply(p.caller, 2, &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	dbus_message_deinit(&m);

	/* not answered: NoReply from the driver after 300 ms */
	t0 = now_ms();
	call.serial = 3;
	raw_send(p.caller, &call, NULL, 0);
	reply.serial = 3;
	reply.reply_serial = raw_next_call(p.callee);
	pfd = (struct pollfd){ .fd = p.caller, .events = POLLIN };
	ASSERT_INT(poll(&pfd, 1, 5000), ==, 1); /* without the timeout: nothing, ever */
	raw_reply(p.caller, 3, &m);
	waited = now_ms() - t0;
	printf("# NoReply %llu ms after the call (reply_timeout_ms 300)\n", (unsigned long long)waited);
	ASSERT(waited >= 250 && waited < 5000);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_ERROR);
	ASSERT_STR(m.h.error_name, "org.freedesktop.DBus.Error.NoReply");
	ASSERT_STR(m.h.sender, DBUS_DRIVER_NAME);
	ASSERT_STR((const char *)m.body + 4, "Message did not receive a reply (timeout by message bus)");
	dbus_message_deinit(&m);

	/* the late reply is refused: the p.caller's next message is its Ping's answer */
	raw_send(p.callee, &reply, NULL, 0);
	raw_ping(p.callee, 4); /* brokerd has handled the late reply */
	raw_ping(p.caller, 4);
	pfd = (struct pollfd){ .fd = p.caller, .events = POLLIN };
	ASSERT_INT(poll(&pfd, 1, 100), ==, 0);
	pair_close(&p);
	ok("reply_timeout_ms: an unanswered call gets NoReply, the late reply is refused");
}

/*
 * max_replies_per_connection 3: a fourth call waiting gets LimitsExceeded
 * from the driver and never reaches the callee; once one is answered the
 * caller may call again; calls without NO_REPLY_EXPECTED only count.
 * max_match_rules_per_connection 2: a third AddMatch gets LimitsExceeded,
 * and passes once a rule is removed. max_names_per_connection 3: the
 * unique name and two more, a third RequestName gets LimitsExceeded.
 */
static void test_max_replies(const char *exe)
{
	struct pair p = { 0 };
	struct dbus_header call = { .type = DBUS_MESSAGE_METHOD_CALL,
				    .path = PATH,
				    .interface = IFACE,
				    .member = "Hold",
				    .destination = p.callee_name };
	struct dbus_header reply = { .type = DBUS_MESSAGE_METHOD_RETURN, .destination = p.caller_name };
	struct dbus_message m;
	uint32_t held[3];

	pair_open(&p, exe, "[default]\nallow * org.brokerdtest.*\n[limits]\nmax_replies_per_connection 3\nmax_match_rules_per_connection 2\n"
			 "max_names_per_connection 3\n");

	for (uint32_t i = 0; i < 3; i++) {
		call.serial = 10 + i;
		raw_send(p.caller, &call, NULL, 0);
		held[i] = raw_next_call(p.callee);
		ASSERT_INT(held[i], ==, 10 + i);
	}
	/* one without a reply wanted passes even now */
	call.serial = 20;
	call.flags = DBUS_FLAG_NO_REPLY_EXPECTED;
	raw_send(p.caller, &call, NULL, 0);
	ASSERT_INT(raw_next_call(p.callee), ==, 20);
	call.flags = 0;
	call.serial = 21;
	raw_send(p.caller, &call, NULL, 0);
	raw_reply(p.caller, 21, &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_ERROR);
	ASSERT_STR(m.h.error_name, "org.freedesktop.DBus.Error.LimitsExceeded");
	ASSERT_STR(m.h.sender, DBUS_DRIVER_NAME);
	dbus_message_deinit(&m);

	/* one answered: room for one more, which reaches the p.callee */
	reply.serial = 2;
	reply.reply_serial = held[0];
	raw_send(p.callee, &reply, NULL, 0);
	raw_reply(p.caller, held[0], &m);
	ASSERT_INT(m.h.type, ==, DBUS_MESSAGE_METHOD_RETURN);
	dbus_message_deinit(&m);
	call.serial = 22;
	raw_send(p.caller, &call, NULL, 0);
	ASSERT_INT(raw_next_call(p.callee), ==, 22); /* the refused 21 never came */
	ok("max_replies_per_connection: a call over it gets LimitsExceeded, an answer makes room");

	raw_add_match(p.caller, 30, "member='A'", NULL);
	raw_add_match(p.caller, 31, "member='B'", NULL);
	raw_add_match(p.caller, 32, "member='C'", "org.freedesktop.DBus.Error.LimitsExceeded");
	raw_driver_call_s(p.caller, 33, "RemoveMatch", "member='A'", NULL);
	raw_add_match(p.caller, 34, "member='C'", NULL);
	ok("max_match_rules_per_connection: an AddMatch over it gets LimitsExceeded, a RemoveMatch makes room");

	uint32_t no_flags = 0;

	raw_driver_call(p.caller, 40, "RequestName", "org.brokerdtest.N1", &no_flags, NULL);
	raw_driver_call(p.caller, 41, "RequestName", "org.brokerdtest.N2", &no_flags, NULL);
	raw_driver_call(p.caller, 42, "RequestName", "org.brokerdtest.N1", &no_flags, NULL); /* has it: no more */
	raw_driver_call(p.caller, 43, "RequestName", "org.brokerdtest.N3", &no_flags,
			"org.freedesktop.DBus.Error.LimitsExceeded");
	raw_driver_call_s(p.caller, 44, "ReleaseName", "org.brokerdtest.N1", NULL);
	raw_driver_call(p.caller, 45, "RequestName", "org.brokerdtest.N3", &no_flags, NULL);
	pair_close(&p);
	ok("max_names_per_connection: a RequestName over it (the unique name counted) gets LimitsExceeded");
}

/* ---- Eavesdropping without BecomeMonitor ------------------------------------- */

/* A Ping round trip on fd: how many messages with member came before its answer. */
static unsigned int raw_count_until_ping(int fd, uint32_t serial, const char *member)
{
	struct dbus_header ping = { .type = DBUS_MESSAGE_METHOD_CALL,
				    .serial = serial,
				    .path = DBUS_DRIVER_PATH,
				    .interface = "org.freedesktop.DBus.Peer",
				    .member = "Ping",
				    .destination = DBUS_DRIVER_NAME };
	unsigned int n = 0;

	raw_send(fd, &ping, NULL, 0);
	for (;;) {
		struct dbus_message m;
		bool done;

		raw_next(fd, &m);
		done = m.h.reply_serial == serial;
		if (m.h.member && !strcmp(m.h.member, member))
			n++;
		dbus_message_deinit(&m);
		if (done)
			return n;
	}
}

/*
 * AddMatch with eavesdrop='true' (refused before as MatchRuleInvalid): a
 * call between two other connections reaches a connection allowed to
 * eavesdrop (without the XML: brokerd's uid, as the test's brokerd runs,
 * and root), a rule without the key does not see it, and a uid not allowed
 * (2003, when the test runs as root) sees nothing; RemoveMatch finds the rule
 * again by its eavesdrop key.
 */
static void test_eavesdrop(void)
{
	char callee_name[64];
	struct dbus_header call = { .type = DBUS_MESSAGE_METHOD_CALL,
				    .serial = 2,
				    .path = PATH,
				    .interface = IFACE,
				    .member = "Overheard",
				    .flags = DBUS_FLAG_NO_REPLY_EXPECTED,
				    .destination = callee_name };
	int caller, callee, eaves, polite, ready[2], go[2], status;
	pid_t pid = -1;
	char x;

	callee = raw_connect();
	raw_hello_name(callee, callee_name, sizeof(callee_name));
	caller = raw_connect();
	raw_hello(caller);
	eaves = raw_connect();
	raw_hello(eaves);
	polite = raw_connect();
	raw_hello(polite);
	raw_add_match(eaves, 2, "eavesdrop='sometimes',member='Overheard'",
		      "org.freedesktop.DBus.Error.MatchRuleInvalid");
	raw_add_match(eaves, 3, "member='Overheard',eavesdrop=true", NULL);
	raw_add_match(polite, 2, "member='Overheard'", NULL);
	ASSERT_INT(pipe(ready), ==, 0);
	ASSERT_INT(pipe(go), ==, 0);
	if (getuid() == 0) {
		pid = fork();
		ASSERT(pid >= 0);
		if (pid == 0) {
			int fd;

			close(ready[0]);
			close(go[1]);
			ASSERT_INT(setgroups(0, NULL), ==, 0);
			ASSERT_INT(setgid(2003), ==, 0);
			ASSERT_INT(setuid(2003), ==, 0);
			fd = raw_connect();
			raw_hello(fd);
			raw_add_match(fd, 2, "eavesdrop=true", NULL);
			ASSERT_INT(write(ready[1], "r", 1), ==, 1);
			ASSERT_INT(read(go[0], &x, 1), ==, 1); /* the call has reached its callee */
			ASSERT_INT(raw_count_until_ping(fd, 3, "Overheard"), ==, 0);
			close(fd);
			_exit(0);
		}
		ASSERT_INT(read(ready[0], &x, 1), ==, 1);
	}

	raw_send(caller, &call, NULL, 0);
	(void)raw_next_call(callee);
	ASSERT_INT(raw_count_until_ping(eaves, 4, "Overheard"), ==, 1);
	ASSERT_INT(raw_count_until_ping(polite, 3, "Overheard"), ==, 0);
	ASSERT_INT(write(go[1], "g", 1), ==, 1);
	if (pid > 0) {
		ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
		ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}

	/* the rule goes by its text with the key; then nothing more is overheard */
	raw_add_match(eaves, 5, "member='Overheard'", NULL);
	raw_driver_call_s(eaves, 6, "RemoveMatch", "eavesdrop='true',member='Overheard'", NULL);
	call.serial = 3;
	raw_send(caller, &call, NULL, 0);
	(void)raw_next_call(callee);
	ASSERT_INT(raw_count_until_ping(eaves, 7, "Overheard"), ==, 0);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	close(caller);
	close(callee);
	close(eaves);
	close(polite);
	ok(getuid() == 0 ? "eavesdrop='true' outside BecomeMonitor: a call between others seen by brokerd's "
			   "uid, not by a rule without it nor by another uid; RemoveMatch with the key" :
			   "eavesdrop='true' outside BecomeMonitor: a call between others seen by brokerd's "
			   "uid, not by a rule without it; RemoveMatch with the key");
}

/* The value of key in the a{sv} of a Debug.Stats reply: a u (as a number) or an s (in *str). */
static int64_t stats_get(sd_bus_message *reply, const char *key, const char **str)
{
	int64_t v = -1;
	const char *k;

	ASSERT_INT(sd_bus_message_rewind(reply, true), >=, 0);
	ASSERT_INT(sd_bus_message_enter_container(reply, 'a', "{sv}"), >, 0);
	while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
		ASSERT_INT(sd_bus_message_read(reply, "s", &k), >, 0);
		if (!strcmp(k, key) && str) {
			ASSERT_INT(sd_bus_message_read(reply, "v", "s", str), >, 0);
			v = 0;
		} else if (!strcmp(k, key)) {
			uint32_t u;

			ASSERT_INT(sd_bus_message_read(reply, "v", "u", &u), >, 0);
			v = u;
		} else {
			ASSERT_INT(sd_bus_message_skip(reply, "v"), >=, 0);
		}
		ASSERT_INT(sd_bus_message_exit_container(reply), >=, 0);
	}
	return v;
}

static sd_bus_message *stats_call(sd_bus *b, const char *path, const char *member, const char *error,
				  const char *arg)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	int r = arg ? sd_bus_call_method(b, DBUS_DRIVER_NAME, path, "org.freedesktop.DBus.Debug.Stats",
					 member, &e, &reply, "s", arg) :
		      sd_bus_call_method(b, DBUS_DRIVER_NAME, path, "org.freedesktop.DBus.Debug.Stats",
					 member, &e, &reply, "");

	if (error) {
		ASSERT_INT(r, <, 0);
		ASSERT_STR(e.name, error);
	} else {
		ASSERT_INT(r, >=, 0);
	}
	sd_bus_error_free(&e);
	return reply;
}

/*
 * Debug.Stats: figures that move with what a connection does (a match
 * rule, a name), the rules by connection, the errors dbus-daemon gives;
 * refused to another uid (when the test runs as root).
 */
static void test_stats(sd_bus *b)
{
	sd_bus_message *reply;
	const char *me, *s = NULL, *rule = "type='signal',member='Counted'";
	int64_t rules, names, active;
	bool found = false;

	ASSERT_INT(sd_bus_get_unique_name(b, &me), ==, 0);
	reply = stats_call(b, DBUS_DRIVER_PATH, "GetStats", NULL, NULL);
	active = stats_get(reply, "ActiveConnections", NULL);
	rules = stats_get(reply, "MatchRules", NULL);
	names = stats_get(reply, "BusNames", NULL);
	ASSERT_INT(active, >=, 2); /* us and the server */
	ASSERT_INT(names, >=, 3);  /* both unique names and the server's name */
	ASSERT_INT(stats_get(reply, "IncompleteConnections", NULL), >=, 0);
	reply = sd_bus_message_unref(reply);

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "AddMatch", NULL, NULL, "s", rule),
		   >=, 0);
	ASSERT_INT(sd_bus_request_name(b, "org.brokerdtest.Counted", 0), >=, 0);
	reply = stats_call(b, DBUS_DRIVER_PATH, "GetStats", NULL, NULL);
	ASSERT_INT(stats_get(reply, "MatchRules", NULL), ==, rules + 1);
	ASSERT_INT(stats_get(reply, "BusNames", NULL), ==, names + 1);
	reply = sd_bus_message_unref(reply);

	reply = stats_call(b, DBUS_DRIVER_PATH, "GetConnectionStats", NULL, me);
	ASSERT_INT(stats_get(reply, "UniqueName", &s), ==, 0);
	ASSERT_STR(s, me);
	ASSERT_INT(stats_get(reply, "BusNames", NULL), ==, 2);
	ASSERT_INT(stats_get(reply, "MatchRules", NULL), >=, 1);
	ASSERT_INT(stats_get(reply, "OutgoingBytes", NULL), >=, 0);
	reply = sd_bus_message_unref(reply);
	/* by a well-known name: its owner */
	reply = stats_call(b, DBUS_DRIVER_PATH, "GetConnectionStats", NULL, "org.brokerdtest.Counted");
	ASSERT_INT(stats_get(reply, "UniqueName", &s), ==, 0);
	ASSERT_STR(s, me);
	reply = sd_bus_message_unref(reply);

	reply = stats_call(b, DBUS_DRIVER_PATH, "GetAllMatchRules", NULL, NULL);
	ASSERT_INT(sd_bus_message_enter_container(reply, 'a', "{sas}"), >, 0);
	while (sd_bus_message_enter_container(reply, 'e', "sas") > 0) {
		char **l = NULL;

		ASSERT_INT(sd_bus_message_read(reply, "s", &s), >, 0);
		ASSERT_INT(sd_bus_message_read_strv(reply, &l), >=, 0);
		if (!strcmp(s, me)) {
			found = list_has(l, "type='signal',member='Counted'");
			ASSERT(found);
		}
		l = strv_free(l);
		ASSERT_INT(sd_bus_message_exit_container(reply), >=, 0);
	}
	ASSERT(found);
	reply = sd_bus_message_unref(reply);

	(void)stats_call(b, DBUS_DRIVER_PATH, "GetConnectionStats",
			 "org.freedesktop.DBus.Error.NameHasNoOwner", "org.brokerdtest.Nobody");
	(void)stats_call(b, DBUS_DRIVER_PATH, "GetConnectionStats", "org.freedesktop.DBus.Error.InvalidArgs",
			 DBUS_DRIVER_NAME);
	(void)stats_call(b, "/", "GetStats", "org.freedesktop.DBus.Error.UnknownInterface", NULL);
	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, DBUS_DRIVER_PATH, DBUS_DRIVER_INTERFACE,
				      "RemoveMatch", NULL, NULL, "s", rule),
		   >=, 0);
	ASSERT_INT(sd_bus_release_name(b, "org.brokerdtest.Counted"), >=, 0);

	if (getuid() == 0) {
		pid_t pid = fork();
		int status;

		ASSERT(pid >= 0);
		if (pid == 0) {
			sd_bus *o;

			ASSERT_INT(setgroups(0, NULL), ==, 0);
			ASSERT_INT(setgid(2003), ==, 0);
			ASSERT_INT(setuid(2003), ==, 0);
			o = connect_bus();
			(void)stats_call(o, DBUS_DRIVER_PATH, "GetStats",
					 "org.freedesktop.DBus.Error.AccessDenied", NULL);
			(void)stats_call(o, DBUS_DRIVER_PATH, "GetAllMatchRules",
					 "org.freedesktop.DBus.Error.AccessDenied", NULL);
			sd_bus_flush_close_unref(o);
			_exit(0);
		}
		ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
		ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	ok(getuid() == 0 ? "Debug.Stats: GetStats, GetConnectionStats, GetAllMatchRules follow a match rule "
			   "and a name; errors as dbus-daemon's; refused to another uid" :
			   "Debug.Stats: GetStats, GetConnectionStats, GetAllMatchRules follow a match rule "
			   "and a name; errors as dbus-daemon's");
}

/* UpdateActivationEnvironment only at /org/freedesktop/DBus (allowed there: test_activation()). */
static void test_uae_canonical_path(sd_bus *b)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;

	ASSERT_INT(sd_bus_call_method(b, DBUS_DRIVER_NAME, "/", DBUS_DRIVER_INTERFACE,
				      "UpdateActivationEnvironment", &e, NULL, "a{ss}", 1, "BROKERD_TEST_ENV",
				      "not at /"),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.AccessDenied"));
	sd_bus_error_free(&e);
	ok("UpdateActivationEnvironment off the canonical path: AccessDenied");
}


/* ---- The D-Bus budget: what brokerd holds for a uid's connections ------------ */

/* The uid's dbus_bytes in use, as brokerd's QUOTA tells it on its control socket ctrl. */
static uint64_t dbus_bytes_used(const char *ctrl, uid_t uid)
{
	struct tc c;
	struct tc_msg m;
	uint64_t used = UINT64_MAX, u, l;
	uint32_t n;

	TC_ASSERT(tc_connect_hello(&c, ctrl, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_QUOTA, &m, "u", (uint32_t)uid) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 1);
	TC_ASSERT_EQ(tc_read_u32(&m), (uint32_t)uid);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++) {
		const char *q = tc_read_string(&m);

		ctrl_read_u64(&m.r, &u);
		ctrl_read_u64(&m.r, &l);
		if (!strcmp(q, "dbus_bytes"))
			used = u;
	}
	tc_close(&c);
	ASSERT(used != UINT64_MAX);
	return used;
}

/* A call to dest with an "ay" body of n bytes, written whole (data, len: free it). */
static void big_call(const char *dest, uint32_t serial, size_t n, void **data, size_t *len)
{
	struct dbus_header h = { .type = DBUS_MESSAGE_METHOD_CALL,
				 .serial = serial,
				 .path = PATH,
				 .interface = IFACE,
				 .member = "Big",
				 .destination = dest,
				 .signature = "ay" };
	uint8_t *body = calloc(1, n + 4);
	uint32_t l = (uint32_t)n;

	ASSERT(body);
	memcpy(body, &l, 4);
	memset(body + 4, 'x', n);
	ASSERT_INT(dbus_message_write(&h, body, n + 4, data, len), ==, 0);
	free(body);
}

/* Writes what fd takes now of data from *done on; true when all of it is written. */
static bool write_some(int fd, const void *data, size_t len, size_t *done)
{
	while (*done < len) {
		ssize_t n = send(fd, (const char *)data + *done, len - *done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			ASSERT(errno == EAGAIN);
			return false;
		}
		*done += (size_t)n;
	}
	return true;
}

/* Does fd see EOF (brokerd closed it) within ms, whatever came before? */
static bool closed_within(int fd, int ms)
{
	char buf[4096];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end && poll(&pfd, 1, (int)(end - now_ms())) == 1) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			return true;
	}
	return false;
}

/*
 * max_outgoing_bytes 1 MiB, dbus_bytes 8 MiB for root (the test's uid: 6
 * MiB of it for bulk), max_message_size 8 MiB. A callee that does not read: calls to it are
 * refused to their caller with LimitsExceeded once its queue is full, it
 * stays connected and gets the next call once it read the others. A
 * connection whose message's header announces 5 MiB holds those 5 MiB of
 * the uid's budget while the rest comes: a second one's 5 MiB message is
 * then not read (its sender's writes block), while a small call of the
 * same uid still passes, and it is read once the first was delivered.
 * Messages over the uid's bulk budget or max_message_size close their
 * connection. QUOTA shows the budget in use, back near zero at the end.
 */
static void test_budget(const char *exe)
{
	struct pair p = { 0 };
	struct dbus_message m;
	size_t len_a, len_b, done_a = 0, done_b = 0, len;
	unsigned int accepted = 0;
	void *a, *b, *big;
	bool refused = false;
	uint64_t used;
	int fa, fb;

	pair_open(&p, exe,
		  "[default]\nallow * org.brokerdtest.*\n[limits]\nmax_outgoing_bytes 1048576\n"
		  "max_message_size 8388608\n[limits user root]\ndbus_bytes 8388608\n");

	/* calls of 128 KiB to a callee that does not read: refused once 1 MiB waits for it */
	for (uint32_t serial = 2; serial < 200 && !refused; serial++) {
		struct dbus_header ping = { .type = DBUS_MESSAGE_METHOD_CALL,
					    .serial = 10000 + serial,
					    .path = DBUS_DRIVER_PATH,
					    .interface = "org.freedesktop.DBus.Peer",
					    .member = "Ping",
					    .destination = DBUS_DRIVER_NAME };

		big_call(p.callee_name, serial, 128 * 1024, &big, &len);
		ASSERT_INT(write(p.caller, big, len), ==, (ssize_t)len);
		free(big);
		/* the error, if any, comes before the answer to a Ping sent after the call */
		raw_send(p.caller, &ping, NULL, 0);
		for (;;) {
			raw_next(p.caller, &m);
			if (m.h.type == DBUS_MESSAGE_ERROR && m.h.reply_serial == serial) {
				ASSERT_STR(m.h.error_name, "org.freedesktop.DBus.Error.LimitsExceeded");
				ASSERT(strstr((const char *)m.body + 4, "full message queue"));
				refused = true;
			}
			if (m.h.reply_serial == ping.serial) {
				dbus_message_deinit(&m);
				break;
			}
			dbus_message_deinit(&m);
		}
		if (!refused)
			accepted++;
	}
	used = dbus_bytes_used(p.s.ctrl, 0);
	printf("# %u calls of 128 KiB taken for a callee that does not read, then LimitsExceeded; dbus_bytes %llu\n",
	       accepted, (unsigned long long)used);
	ASSERT(refused);
	/* 1 MiB queued and one more on top, besides what the callee's socket holds */
	ASSERT(accepted >= 8 && accepted <= 24);
	ASSERT(used >= (1U << 20) && used <= (6U << 20));
	/* the callee is still there: it reads what waited, and then the next call reaches it */
	for (unsigned int i = 0; i < accepted; i++)
		(void)raw_next_call(p.callee);
	big_call(p.callee_name, 300, 16, &big, &len);
	ASSERT_INT(write(p.caller, big, len), ==, (ssize_t)len);
	free(big);
	ASSERT_INT(raw_next_call(p.callee), ==, 300);
	ok("a call to a connection whose queue is full gets LimitsExceeded; the connection stays and is served again");

	/* two 5 MiB messages of one uid: the second waits until the first is through */
	fa = raw_connect();
	raw_hello(fa);
	fb = raw_connect();
	raw_hello(fb);
	big_call(p.callee_name, 2, 5U << 20, &a, &len_a);
	big_call(p.callee_name, 2, 5U << 20, &b, &len_b);
	ASSERT_INT(write(fa, a, len_a / 2), ==, (ssize_t)(len_a / 2));
	done_a = len_a / 2;
	for (int i = 0; i < 500 && dbus_bytes_used(p.s.ctrl, 0) < (5U << 20); i++)
		usleep(10000);
	ASSERT(dbus_bytes_used(p.s.ctrl, 0) >= (5U << 20));
	for (int i = 0; i < 20; i++) {
		(void)write_some(fb, b, len_b, &done_b);
		usleep(20000);
	}
	used = dbus_bytes_used(p.s.ctrl, 0);
	printf("# a 5 MiB message half sent and another begun: %zu of its %zu bytes written, dbus_bytes %llu\n",
	       done_b, len_b, (unsigned long long)used);
	ASSERT(done_b < len_b / 2);
	ASSERT(used <= (8U << 20));
	/* the uid's other connections are still read */
	big_call(p.callee_name, 301, 16, &big, &len);
	ASSERT_INT(write(p.caller, big, len), ==, (ssize_t)len);
	free(big);
	ASSERT_INT(raw_next_call(p.callee), ==, 301);
	/* the first is finished and delivered; then the second is read */
	ASSERT(write_some(fa, a, len_a, &done_a) || true);
	while (done_a < len_a) {
		struct pollfd pfd = { .fd = fa, .events = POLLOUT };

		ASSERT_INT(poll(&pfd, 1, 5000), ==, 1);
		(void)write_some(fa, a, len_a, &done_a);
	}
	ASSERT_INT(raw_next_call(p.callee), ==, 2);
	while (done_b < len_b) {
		struct pollfd pfd = { .fd = fb, .events = POLLOUT };

		ASSERT_INT(poll(&pfd, 1, 5000), ==, 1);
		(void)write_some(fb, b, len_b, &done_b);
	}
	ASSERT_INT(raw_next_call(p.callee), ==, 2);
	raw_ping(fb, 3);
	used = dbus_bytes_used(p.s.ctrl, 0);
	printf("# both delivered; dbus_bytes %llu afterwards\n", (unsigned long long)used);
	ASSERT(used < (256U << 10));
	free(a);
	free(b);
	close(fa);
	close(fb);
	ok("a message begun holds its size of the uid's budget; another waits unread until it is through");

	/* announced over the uid's bulk budget (7 MiB), and over max_message_size (9 MiB): closed */
	for (size_t mib = 7; mib <= 9; mib += 2) {
		fa = raw_connect();
		raw_hello(fa);
		big_call(p.callee_name, 2, mib << 20, &a, &len_a);
		ASSERT_INT(write(fa, a, 65536), ==, 65536);
		ASSERT(closed_within(fa, 5000));
		free(a);
		close(fa);
	}
	raw_ping(p.caller, 400);
	ok("a message over its uid's bulk budget or max_message_size closes its connection");
	pair_close(&p);
}

int main(int argc, char **argv)
{
	char tmpdir[] = "/tmp/test-dbus-XXXXXX", ctrl[300], policy[300], services[300], policy_file[400];
	pid_t daemon = -1, server;
	sd_bus *b;

	/* brokerd runs this for an activatable name (test_activation) */
	if (argc == 3 && !strcmp(argv[1], "--activated"))
		return activated_main(argv[2]);
	/* the same as a service that daemonizes: the process brokerd ran is gone before the name is taken */
	if (argc == 3 && !strcmp(argv[1], "--activated-fork")) {
		pid_t pid = fork();

		if (pid != 0)
			return pid < 0 ? 4 : 0;
		usleep(300000);
		return activated_main(argv[2]);
	}

	/* No argument: the guest test, against the system brokerd. */
	if (argc < 2 || !strcmp(argv[1], "--system")) {
		snprintf(sock_path, sizeof(sock_path), "%s", DBUS_SOCKET_PATH);
	} else {
		ASSERT(mkdtemp(tmpdir));
		ASSERT_INT(chmod(tmpdir, 0755), ==, 0); /* test_quota() connects as uid 2003 */
		snprintf(sock_path, sizeof(sock_path), "%s/dbus", tmpdir);
		snprintf(ctrl, sizeof(ctrl), "%s/socket", tmpdir);
		snprintf(policy, sizeof(policy), "%s/policy.d", tmpdir);
		snprintf(services, sizeof(services), "%s/services", tmpdir);
		ASSERT(mkdir(policy, 0755) == 0 && mkdir(services, 0755) == 0);
		/* Whoever runs the test may own and call its names (root may anyway). */
		snprintf(policy_file, sizeof(policy_file), "%s/50-test.conf", policy);
		FILE *fp = fopen(policy_file, "we");
		ASSERT(fp);
		fputs("[default]\nallow * org.brokerdtest.*\n[limits]\nhello_timeout_ms 1000\n"
		      "[limits user 2003]\nconnections 2\n",
		      fp);
		ASSERT_INT(fclose(fp), ==, 0);
		daemon = fork();
		ASSERT(daemon >= 0);
		if (daemon == 0) {
			char dbus_arg[400];

			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			snprintf(dbus_arg, sizeof(dbus_arg), "--dbus-address=unix:path=%s", sock_path);
			execl(argv[1], argv[1], "--state", "", "--address", ctrl, "--policy-dir", policy,
			      "--service-dir", services, "--no-channels", dbus_arg, (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 500 && access(sock_path, F_OK) < 0; i++)
			usleep(10000);
	}
	snprintf(address, sizeof(address), "unix:path=%s", sock_path);

	server = start_server();
	b = connect_bus();
	ASSERT_INT(sd_bus_add_filter(b, NULL, filter, NULL), >=, 0);
	wait_owner(b, NAME, true);
	test_names(b);
	test_calls(b);
	test_signals(b);
	test_raw(b);
	test_driver(b);
	test_stats(b);
	if (daemon > 0) {
		test_native(b, ctrl);
		test_dbus_name_seen_natively(b, ctrl);
		test_dbus_creds_natively(b, ctrl);
		test_shared_queue(b, ctrl);
	}
	if (daemon > 0 && getuid() == 0) {
		test_quota(ctrl);
		test_cap(argv[1]);
	}
	if (daemon > 0) {
		test_ids_durable(argv[1]);
		test_reply_timeout(argv[1]);
		test_max_replies(argv[1]);
		test_budget(argv[1]);
	}
	test_owner_order(b);
	test_slow_reader(b);
	test_emit_and_hang_up(b);
	if (daemon > 0)
		ASSERT_INT(driver_pid(b), ==, daemon);
	test_stray_fds(daemon > 0 ? daemon : driver_pid(b));
	if (daemon > 0) {
		char self[300] = "";

		ASSERT(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
		test_activation(b, services, self);
	}
	test_monitor(b);
	test_monitor_destination(b);
	test_unknown_interface(b);
	if (daemon > 0) {
		test_eavesdrop();
		test_uae_canonical_path(b);
	}
	test_noreply(b, server);
	sd_bus_flush_close_unref(b);

	if (daemon > 0) {
		int status;

		/* brokerd survived all of it */
		ASSERT_INT(waitpid(daemon, &status, WNOHANG), ==, 0);
		kill(daemon, SIGTERM);
		ASSERT_INT(waitpid(daemon, &status, 0), ==, daemon);
		ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		unlink(sock_path);
		unlink(ctrl);
		unlink(policy_file);
		for (const char *n = ACT_NAME; n; n = !strcmp(n, ACT_NAME)    ? AUTO_NAME :
						      !strcmp(n, AUTO_NAME)   ? BROKEN_NAME :
						      !strcmp(n, BROKEN_NAME) ? FORK_NAME :
										NULL) {
			char p[400];

			snprintf(p, sizeof(p), "%s/%s.service", services, n);
			unlink(p);
		}
		rmdir(policy);
		rmdir(services);
		rmdir(tmpdir);
	}
	ok_plan();
	return 0;
}
