/* SPDX-License-Identifier: MIT */
/*
 * test-api.c - host tests of libbrokerd's public API through the shared
 * library: every entry point rejects bad arguments with -EINVAL, and the
 * control-plane half (connect, unique name, names, NameOwnerChanged watches,
 * credentials with their pidfd and label and without them, the epoll fd,
 * sd_event, reconnect after the broker goes away) works against
 * a fake broker in a child process that speaks protocol/ctrl.h but offers no
 * channels (the host kernel has none; channel paths are tested in the guest).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <brokerd/brokerd.h>

#include "client/test-fixture.h"
#include "protocol/ctrl.h"
#include "util/socket.h"
#include "util/test.h"

/* --- fake broker -------------------------------------------------------------- */

struct fake {
	uint64_t next_id;
	bool closed_once;
	char owner[8][64]; /* owner of names[i] */
	char names[8][256];
	int n_names;
};

/* Sends w with the fds written to it (closed here, as brokerd does). */
static void fake_send(int fd, struct ctrl_writer *w)
{
	const void *d;
	size_t l;

	ASSERT(ctrl_writer_finish(w, &d, &l) == 0);
	ASSERT(unix_send_fds(fd, d, l, w->fds, w->n_fds, 0) == 0);
	for (unsigned int i = 0; i < w->n_fds; i++)
		close(w->fds[i]);
	ctrl_writer_deinit(w);
}

static void fake_error(int fd, uint16_t op, uint32_t serial, const char *name, const char *text)
{
	struct ctrl_writer w;

	ASSERT(ctrl_writer_error(&w, op, serial, name, text) == 0);
	{
		const void *d;
		size_t l;

		ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
		ASSERT(send(fd, d, l, MSG_NOSIGNAL) == (ssize_t)l);
	}
	ctrl_writer_deinit(&w);
}

static void fake_noc(int fd, const char *name, const char *old, const char *new)
{
	struct ctrl_writer w;

	ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0);
	ctrl_write_string(&w, name);
	ctrl_write_string(&w, old);
	ctrl_write_string(&w, new);
	fake_send(fd, &w);
}

#define FAKE_LABEL "brokerd-test"
static const uint32_t fake_gids[] = { 10, 2100, 4294967294U };

/*
 * GET_CREDENTIALS: "org.test.Bare" has pid, uid and gid only;
 * "org.test.Liar" claims a label and a pidfd and sends neither;
 * "org.test.Extra" sends a pidfd its mask does not announce; every other
 * name has everything, with a pidfd of this process.
 */
static void fake_credentials(int fd, const struct ctrl_message *m, const char *name)
{
	uint32_t mask = CTRL_CREDS_PID | CTRL_CREDS_UID | CTRL_CREDS_GID;
	const char *label = "";
	bool with_gids = false, send_fd = false;
	struct ctrl_writer w;
	size_t a;

	if (strcmp(name, "org.test.Liar") == 0) {
		mask |= CTRL_CREDS_LABEL | CTRL_CREDS_PIDFD;
	} else if (strcmp(name, "org.test.Extra") == 0) {
		send_fd = true;
	} else if (strcmp(name, "org.test.Bare") != 0) {
		mask |= CTRL_CREDS_GIDS | CTRL_CREDS_PIDFD | CTRL_CREDS_LABEL;
		with_gids = send_fd = true;
		label = FAKE_LABEL;
	}
	ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_GET_CREDENTIALS, m->hdr.serial);
	ctrl_write_u32(&w, mask);
	ctrl_write_u32(&w, 4242);
	ctrl_write_u32(&w, 2001);
	ctrl_write_u32(&w, 2100);
	a = ctrl_write_array_open(&w);
	for (size_t i = 0; with_gids && i < sizeof(fake_gids) / sizeof(fake_gids[0]); i++)
		ctrl_write_u32(&w, fake_gids[i]);
	ctrl_write_array_close(&w, a, with_gids ? sizeof(fake_gids) / sizeof(fake_gids[0]) : 0);
	ctrl_write_string(&w, label);
	if (send_fd) {
		int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);

		ASSERT(pidfd >= 0);
		ctrl_write_fd(&w, pidfd);
	}
	fake_send(fd, &w);
}

static int fake_find(struct fake *f, const char *name)
{
	for (int i = 0; i < f->n_names; i++)
		if (strcmp(f->names[i], name) == 0)
			return i;
	return -1;
}

/* Serves one connection; returns when it closes. */
static void fake_serve(struct fake *f, int fd)
{
	char me[CTRL_UNIQUE_NAME_MAX] = "";
	uint8_t buf[CTRL_MSG_MAX];

	for (;;) {
		struct ctrl_message m;
		struct ctrl_reader r;
		struct ctrl_writer w;
		const char *s = NULL;
		uint32_t u = 0;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		int i;

		if (n <= 0)
			break;
		ASSERT(ctrl_message_decode(&m, buf, (size_t)n, 0) == 0);
		ASSERT(m.hdr.type == CTRL_TYPE_REQUEST);
		ctrl_reader_init(&r, &m);
		switch (m.hdr.code) {
		case CTRL_OP_HELLO:
			ctrl_unique_name_format(++f->next_id, me);
			ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_HELLO, m.hdr.serial);
			ctrl_write_string(&w, me);
			ctrl_write_u64(&w, f->next_id);
			ctrl_write_u32(&w, 0); /* no CHANNELS on the host */
			fake_send(fd, &w);
			break;
		case CTRL_OP_REQUEST_NAME:
			ctrl_read_string(&r, &s, NULL);
			ctrl_read_u32(&r, &u);
			i = fake_find(f, s);
			if (i < 0) {
				i = f->n_names++;
				snprintf(f->names[i], sizeof(f->names[i]), "%s", s);
			}
			if (strcmp(s, "org.test.Denied") == 0) {
				fake_error(fd, CTRL_OP_REQUEST_NAME, m.hdr.serial, CTRL_ERROR_ACCESS_DENIED,
					   "own denied by test.conf:3");
				break;
			}
			fake_noc(fd, s, f->owner[i], me);
			snprintf(f->owner[i], sizeof(f->owner[i]), "%s", me);
			ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_REQUEST_NAME, m.hdr.serial);
			ctrl_write_u32(&w, CTRL_NAME_PRIMARY_OWNER);
			fake_send(fd, &w);
			if (strcmp(s, "org.test.Close") == 0 && !f->closed_once) {
				/* a broker restart, as the client sees it */
				f->closed_once = true;
				return;
			}
			break;
		case CTRL_OP_RELEASE_NAME:
			ctrl_read_string(&r, &s, NULL);
			i = fake_find(f, s);
			ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_RELEASE_NAME, m.hdr.serial);
			ctrl_write_u32(&w, i < 0 || !f->owner[i][0] ? CTRL_RELEASE_NON_EXISTENT :
					   strcmp(f->owner[i], me)  ? CTRL_RELEASE_NOT_OWNER :
								      CTRL_RELEASE_RELEASED);
			if (i >= 0 && strcmp(f->owner[i], me) == 0)
				f->owner[i][0] = 0;
			fake_send(fd, &w);
			break;
		case CTRL_OP_GET_NAME_OWNER:
			ctrl_read_string(&r, &s, NULL);
			i = fake_find(f, s);
			if (i < 0 || !f->owner[i][0]) {
				fake_error(fd, CTRL_OP_GET_NAME_OWNER, m.hdr.serial,
					   CTRL_ERROR_NAME_HAS_NO_OWNER, s);
				break;
			}
			ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_GET_NAME_OWNER, m.hdr.serial);
			ctrl_write_string(&w, f->owner[i]);
			fake_send(fd, &w);
			break;
		case CTRL_OP_GET_CREDENTIALS:
			ctrl_read_string(&r, &s, NULL);
			if (strcmp(s, "org.test.Nobody") == 0)
				fake_error(fd, CTRL_OP_GET_CREDENTIALS, m.hdr.serial,
					   CTRL_ERROR_NAME_HAS_NO_OWNER, s);
			else
				fake_credentials(fd, &m, s);
			break;
		default:
			fake_error(fd, m.hdr.code, m.hdr.serial, CTRL_ERROR_NOT_SUPPORTED, "fake");
			break;
		}
	}
	/* the connection's names go with it */
	for (int i = 0; i < f->n_names; i++)
		if (strcmp(f->owner[i], me) == 0)
			f->owner[i][0] = 0;
}

static pid_t fake_start(const char *path)
{
	struct fake f = { 0 };
	int lfd;
	pid_t pid;

	unlink(path);
	pid = fake_broker_fork(path, 8, &lfd);
	if (pid > 0)
		return pid;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			_exit(1);
		fake_serve(&f, fd);
		close(fd);
	}
}

/* --- tests ----------------------------------------------------------------------- */

static void test_arguments(void)
{
	brokerd_bus *bus = NULL;
	brokerd_slot *slot = NULL;
	struct brokerd_creds cr;
	brokerd_credentials *creds = NULL;
	const gid_t *gids;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	const char *s;
	const void *body;
	size_t size;
	char buf[64];
	uint64_t u64;

	ASSERT(brokerd_bus_open(NULL, "/run/brokerd/socket") == -EINVAL);
	ASSERT(brokerd_bus_open(&bus, NULL) == -EINVAL);
	ASSERT(brokerd_bus_open(&bus, "relative/path") == -EINVAL);
	ASSERT(brokerd_bus_open(&bus, "/nonexistent/brokerd/socket") == -ENOENT);
	ASSERT(bus == NULL);
	ASSERT(brokerd_bus_open_system(NULL) == -EINVAL);
	ASSERT(brokerd_bus_close(NULL) == NULL);
	ASSERT(brokerd_bus_get_unique_name(NULL, &s) == -EINVAL);
	ASSERT(brokerd_bus_is_connected(NULL) == -EINVAL);
	ASSERT(brokerd_bus_set_reconnect(NULL, 1) == -EINVAL);
	ASSERT(brokerd_bus_set_spin(NULL, 10) == -EINVAL);
	ASSERT(brokerd_bus_set_emit_lost_handler(NULL, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_slot_get_lost(NULL, &u64) == -EINVAL);
	ASSERT(brokerd_slot_set_lost_handler(NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_set_state_handler(NULL, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_get_fd(NULL) == -EINVAL);
	ASSERT(brokerd_bus_process(NULL) == -EINVAL);
	ASSERT(brokerd_bus_wait(NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_run(NULL) == -EINVAL);
	ASSERT(brokerd_bus_exit(NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_attach_event(NULL, NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_detach_event(NULL) == -EINVAL);
	ASSERT(brokerd_slot_free(NULL) == NULL);
	ASSERT(brokerd_bus_request_name(NULL, "org.a.B", 0) == -EINVAL);
	ASSERT(brokerd_bus_release_name(NULL, "org.a.B") == -EINVAL);
	ASSERT(brokerd_bus_watch_name(NULL, &slot, NULL, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_get_name_owner(NULL, "org.a.B", buf, sizeof(buf)) == -EINVAL);
	ASSERT(brokerd_bus_get_creds(NULL, "org.a.B", &cr) == -EINVAL);
	ASSERT(brokerd_bus_get_credentials(NULL, "org.a.B", &creds) == -EINVAL);
	ASSERT(brokerd_credentials_free(NULL) == NULL);
	ASSERT(brokerd_credentials_get_pid(NULL, &pid) == -EINVAL);
	ASSERT(brokerd_credentials_get_uid(NULL, &uid) == -EINVAL);
	ASSERT(brokerd_credentials_get_gid(NULL, &gid) == -EINVAL);
	ASSERT(brokerd_credentials_get_groups(NULL, &gids) == -EINVAL);
	ASSERT(brokerd_credentials_get_pidfd(NULL) == -EINVAL);
	ASSERT(brokerd_credentials_get_label(NULL, &s) == -EINVAL);
	ASSERT(brokerd_bus_emit_signal(NULL, "org.a.B", "M", NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_send_signal(NULL, ":1.1", "M", NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_subscribe(NULL, &slot, "org.a.B", NULL, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_unsubscribe(NULL, "org.a.B") == -EINVAL);
	ASSERT(brokerd_bus_call(NULL, "org.a.B", "M", NULL, 0, 0, NULL) == -EINVAL);
	ASSERT(brokerd_bus_call_async(NULL, &slot, "org.a.B", "M", NULL, 0, 0, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_add_method(NULL, &slot, "org.a.B", "M", NULL, NULL) == -EINVAL);
	ASSERT(brokerd_msg_ref(NULL) == NULL);
	ASSERT(brokerd_msg_unref(NULL) == NULL);
	ASSERT(brokerd_msg_get_type(NULL) == -EINVAL);
	ASSERT(brokerd_msg_get_sender(NULL) == NULL);
	ASSERT(brokerd_msg_get_creds(NULL, &cr) == -EINVAL);
	ASSERT(brokerd_msg_get_name(NULL) == NULL);
	ASSERT(brokerd_msg_get_member(NULL) == NULL);
	ASSERT(brokerd_msg_get_error_name(NULL) == NULL);
	ASSERT(brokerd_msg_get_body(NULL, &body, &size) == -EINVAL);
	ASSERT(brokerd_msg_get_serial(NULL) == 0);
	ASSERT(brokerd_msg_reply(NULL, NULL, 0) == -EINVAL);
	ASSERT(brokerd_msg_reply_error(NULL, "org.a.Error", NULL) == -EINVAL);
	ASSERT(slot == NULL);
}

static int noop_msg(brokerd_msg *m, void *u)
{
	return 0;
}
static int noop_reply(brokerd_msg *m, int e, void *u)
{
	return 0;
}

static int states[16], n_states;

static void on_state(brokerd_bus *bus, int state, void *u)
{
	if (n_states < 16)
		states[n_states++] = state;
}

/* invalid arguments on a live bus */
static void test_arguments_connected(brokerd_bus *bus)
{
	brokerd_credentials *creds = NULL;
	brokerd_slot *slot = NULL;
	char buf[4];

	ASSERT(brokerd_bus_set_spin(bus, 1000001) == -ERANGE);
	ASSERT(brokerd_bus_set_spin(bus, 50) == 0);
	ASSERT(brokerd_bus_set_spin(bus, 0) == 0);
	ASSERT(brokerd_bus_request_name(bus, NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_request_name(bus, "nodots", 0) == -EINVAL);
	ASSERT(brokerd_bus_request_name(bus, ":1.5", 0) == -EINVAL);
	ASSERT(brokerd_bus_request_name(bus, "org.a.B", 0x100) == -EINVAL);
	ASSERT(brokerd_bus_release_name(bus, "org..B") == -EINVAL);
	ASSERT(brokerd_bus_watch_name(bus, &slot, "bad name", on_noc, NULL) == -EINVAL);
	ASSERT(brokerd_bus_watch_name(bus, &slot, NULL, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.a.B", NULL, 10) == -EINVAL);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.a.B", buf, 0) == -EINVAL);
	ASSERT(brokerd_bus_emit_signal(bus, "org.a.B", "bad-member", NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_emit_signal(bus, "org.a.B", "M", NULL, 5) == -EINVAL);
	/* bytes go as an "ay", which holds at most 64 MiB (larger bodies: typed, in a memfd) */
	ASSERT(brokerd_bus_emit_signal(bus, "org.a.B", "M", "x", (1 << 26) + 1) == -EMSGSIZE);
	ASSERT(brokerd_bus_send_signal(bus, NULL, "M", NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_send_signal(bus, "x", "M", NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_send_signal(bus, ":1.1", "", NULL, 0) == -EINVAL);
	ASSERT(brokerd_bus_send_signal(bus, ":1.1", "M", NULL, 3) == -EINVAL);
	ASSERT(brokerd_bus_subscribe(bus, &slot, "org.a.B", "a,,b", noop_msg, NULL) == -EINVAL);
	ASSERT(brokerd_bus_subscribe(bus, &slot, "org.a.B", NULL, NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_unsubscribe(bus, NULL) == -EINVAL);
	ASSERT(brokerd_bus_unsubscribe(bus, ":1.1") == -EINVAL);
	ASSERT(brokerd_bus_unsubscribe(bus, "org.a.B") == -ENOENT); /* never subscribed */
	ASSERT(brokerd_bus_call(bus, "org.a.B", "", NULL, 0, 0, NULL) == -EINVAL);
	ASSERT(brokerd_bus_call_async(bus, &slot, "x", "M", NULL, 0, 0, noop_reply, NULL) == -EINVAL);
	ASSERT(brokerd_bus_add_method(bus, &slot, "org.a.B", "1x", noop_msg, NULL) == -EINVAL);
	ASSERT(brokerd_bus_add_method(bus, &slot, "org.a.B", "M", NULL, NULL) == -EINVAL);
	ASSERT(brokerd_bus_attach_event(bus, NULL, 0) == -EINVAL);
	ASSERT(slot == NULL);
	ASSERT(brokerd_bus_get_credentials(bus, NULL, &creds) == -EINVAL);
	ASSERT(brokerd_bus_get_credentials(bus, "bad name", &creds) == -EINVAL);
	ASSERT(brokerd_bus_get_credentials(bus, "org.a.B", NULL) == -EINVAL);
	ASSERT(creds == NULL);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ASSERT(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/*
 * Whether fd is a pidfd of a running child of ours: waitid() on a pidfd of
 * any other process fails with ECHILD. The fake broker is our only child.
 */
static bool pidfd_is_running_child(int fd)
{
	siginfo_t si = { 0 };

	if (waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) < 0)
		return false;
	return si.si_pid == 0; /* not exited */
}

static void test_credentials(brokerd_bus *bus)
{
	brokerd_credentials *c = NULL;
	struct brokerd_creds cr;
	const gid_t *gids;
	const char *label;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int fds, pidfd;

	/* the check tells a pidfd of the fake from one of another process */
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	ASSERT(pidfd >= 0 && !pidfd_is_running_child(pidfd));
	close(pidfd);
	fds = count_fds();

	/* everything, and the pidfd is the broker's (the fake's own process) */
	ASSERT(brokerd_bus_get_credentials(bus, ":1.0", &c) == 0);
	ASSERT(brokerd_credentials_get_pid(c, &pid) == 0 && pid == 4242);
	ASSERT(brokerd_credentials_get_uid(c, &uid) == 0 && uid == 2001);
	ASSERT(brokerd_credentials_get_gid(c, &gid) == 0 && gid == 2100);
	ASSERT(brokerd_credentials_get_groups(c, &gids) == 3);
	ASSERT(gids[0] == 10 && gids[1] == 2100 && gids[2] == (gid_t)4294967294U);
	ASSERT(brokerd_credentials_get_label(c, &label) == 0 && strcmp(label, FAKE_LABEL) == 0);
	pidfd = brokerd_credentials_get_pidfd(c);
	ASSERT(pidfd >= 0);
	ASSERT(brokerd_credentials_get_pidfd(c) == pidfd); /* the same, not a new one */
	ASSERT(fcntl(pidfd, F_GETFD) == FD_CLOEXEC);
	ASSERT(pidfd_is_running_child(pidfd));
	ASSERT(count_fds() == fds + 1);
	/* owned by the object: freeing it closes the fd */
	ASSERT(brokerd_credentials_free(c) == NULL);
	ASSERT(fcntl(pidfd, F_GETFD) < 0 && errno == EBADF);
	ASSERT(count_fds() == fds);

	/* only pid, uid and gid: the rest is -ENODATA, not 0 or "" */
	c = NULL;
	ASSERT(brokerd_bus_get_credentials(bus, "org.test.Bare", &c) == 0);
	ASSERT(brokerd_credentials_get_pid(c, &pid) == 0 && pid == 4242);
	ASSERT(brokerd_credentials_get_uid(c, &uid) == 0 && uid == 2001);
	ASSERT(brokerd_credentials_get_gid(c, &gid) == 0 && gid == 2100);
	gids = (const gid_t *)1;
	ASSERT(brokerd_credentials_get_groups(c, &gids) == -ENODATA);
	ASSERT(gids == (const gid_t *)1);
	label = "untouched";
	ASSERT(brokerd_credentials_get_label(c, &label) == -ENODATA);
	ASSERT(strcmp(label, "untouched") == 0);
	ASSERT(brokerd_credentials_get_pidfd(c) == -ENODATA);
	brokerd_credentials_free(c);

	/* a mask that promises what the reply does not hold */
	ASSERT(brokerd_bus_get_credentials(bus, "org.test.Liar", &c) == 0);
	ASSERT(brokerd_credentials_get_label(c, &label) == -ENODATA);
	ASSERT(brokerd_credentials_get_pidfd(c) == -ENODATA);
	brokerd_credentials_free(c);

	/* an fd the mask does not announce is not handed out, and not leaked */
	ASSERT(brokerd_bus_get_credentials(bus, "org.test.Extra", &c) == 0);
	ASSERT(brokerd_credentials_get_pidfd(c) == -ENODATA);
	ASSERT(count_fds() == fds);
	brokerd_credentials_free(c);

	c = NULL;
	ASSERT(brokerd_bus_get_credentials(bus, "org.test.Nobody", &c) == -ENXIO);
	ASSERT(c == NULL);

	/* the fixed-size struct from the same reply; its pidfd is not leaked */
	ASSERT(brokerd_bus_get_creds(bus, ":1.0", &cr) == 0);
	ASSERT(cr.pid == 4242 && cr.uid == 2001 && cr.gid == 2100 && cr.id == 1);
	ASSERT(count_fds() == fds);
	ASSERT(brokerd_bus_get_creds(bus, "org.test.Nobody", &cr) == -ENXIO);
}

static void test_fake_broker(const char *path)
{
	brokerd_bus *bus = NULL;
	brokerd_slot *watch = NULL;
	const char *unique;
	char owner[64];
	struct pollfd pfd;

	ASSERT(brokerd_bus_open(&bus, path) == 0);
	ASSERT(brokerd_bus_is_connected(bus) == 1);
	ASSERT(brokerd_bus_get_unique_name(bus, &unique) == 0);
	ASSERT(strcmp(unique, ":1.0") == 0);
	ASSERT(brokerd_bus_set_state_handler(bus, on_state, NULL) == 0);
	test_arguments_connected(bus);

	ASSERT(brokerd_bus_watch_name(bus, &watch, "org.test.A", on_noc, NULL) == 0);
	ASSERT(brokerd_bus_request_name(bus, "org.test.A", 0) == BROKERD_NAME_PRIMARY_OWNER);
	/* the NameOwnerChanged came during the request: the fd must say so */
	pfd = (struct pollfd){ .fd = brokerd_bus_get_fd(bus), .events = POLLIN };
	ASSERT(poll(&pfd, 1, 1000) == 1);
	ASSERT(brokerd_bus_process(bus) > 0);
	ASSERT(noc_calls == 1);
	ASSERT(strcmp(noc_last[0], "org.test.A") == 0 && strcmp(noc_last[1], "") == 0 &&
	       strcmp(noc_last[2], ":1.0") == 0);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.test.A", owner, sizeof(owner)) == 0);
	ASSERT(strcmp(owner, ":1.0") == 0);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.test.A", owner, 3) == -ENOBUFS);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.test.Nobody", owner, sizeof(owner)) == -ENXIO);
	ASSERT(brokerd_bus_request_name(bus, "org.test.Denied", 0) == -EACCES);
	test_credentials(bus);

	/* no channels on this fake: channel operations say so, and nothing leaks */
	ASSERT(brokerd_bus_emit_signal(bus, "org.test.A", "M", NULL, 0) == -EOPNOTSUPP);
	ASSERT(brokerd_bus_subscribe(bus, NULL, "org.test.A", NULL, noop_msg, NULL) == -EOPNOTSUPP);
	ASSERT(brokerd_bus_call(bus, "org.test.A", "M", NULL, 0, 0, NULL) == -EOPNOTSUPP);

	/* the broker goes away: reconnect, new unique name, names re-requested */
	ASSERT(brokerd_bus_request_name(bus, "org.test.Close", 0) == BROKERD_NAME_PRIMARY_OWNER);
	for (int i = 0; i < 200 && n_states < 2; i++) {
		ASSERT(brokerd_bus_process(bus) >= 0);
		if (n_states < 2)
			ASSERT(brokerd_bus_wait(bus, 100000) >= 0);
	}
	ASSERT(n_states == 2);
	ASSERT(states[0] == BROKERD_STATE_DISCONNECTED && states[1] == BROKERD_STATE_CONNECTED);
	ASSERT(brokerd_bus_get_unique_name(bus, &unique) == 0);
	ASSERT(strcmp(unique, ":1.1") == 0);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.test.A", owner, sizeof(owner)) == 0);
	ASSERT(strcmp(owner, ":1.1") == 0);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.test.Close", owner, sizeof(owner)) == 0);
	ASSERT(strcmp(owner, ":1.1") == 0);
	pump(bus, &noc_calls, 2); /* ":1.1" took org.test.A */
	ASSERT(noc_calls >= 2 && strcmp(noc_last[2], ":1.1") == 0);

	ASSERT(brokerd_bus_release_name(bus, "org.test.A") == 0);
	ASSERT(brokerd_bus_release_name(bus, "org.test.A") == -ENXIO);
	ASSERT(brokerd_bus_get_name_owner(bus, "org.test.A", owner, sizeof(owner)) == -ENXIO);

	/* a slot the caller still holds outlives the bus it came from */
	ASSERT(brokerd_bus_close(bus) == NULL);
	ASSERT(brokerd_slot_free(watch) == NULL);
}

static int sd_hits;

static int on_noc_sd(brokerd_bus *bus, const char *name, const char *old, const char *new, void *u)
{
	sd_hits++;
	return 0;
}

static void test_sd_event(const char *path)
{
	brokerd_bus *bus = NULL;
	sd_event *e = NULL;

	ASSERT(sd_event_new(&e) >= 0);
	ASSERT(brokerd_bus_open(&bus, path) == 0);
	ASSERT(brokerd_bus_attach_event(bus, e, 0) == 0);
	ASSERT(brokerd_bus_attach_event(bus, e, 0) == -EBUSY);
	ASSERT(brokerd_bus_watch_name(bus, NULL, NULL, on_noc_sd, NULL) == 0);
	ASSERT(brokerd_bus_request_name(bus, "org.test.Sd", 0) == BROKERD_NAME_PRIMARY_OWNER);
	for (int i = 0; i < 50 && !sd_hits; i++)
		ASSERT(sd_event_run(e, 100000) >= 0);
	ASSERT(sd_hits == 1);
	ASSERT(brokerd_bus_detach_event(bus) == 0);
	brokerd_bus_close(bus);
	sd_event_unref(e);
}

int main(void)
{
	char path[] = "/tmp/test-api-XXXXXX";
	char sock[64];
	pid_t pid;
	int status;

	test_arguments();
	ASSERT(mkdtemp(path));
	snprintf(sock, sizeof(sock), "%s/socket", path);
	pid = fake_start(sock);
	test_fake_broker(sock);
	test_sd_event(sock);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	unlink(sock);
	rmdir(path);
	printf("test-api: ok\n");
	return 0;
}
