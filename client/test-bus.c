/* SPDX-License-Identifier: MIT */
/*
 * test-bus.c - host test of the whole library, channel paths included,
 * against a fake broker thread that speaks protocol/ctrl.h and hands out
 * capabilities for the user-space channels of fake-chan.c. Each bus runs in
 * its own thread, as separate processes would. Covers: calls and replies
 * with kernel-style credentials, error replies, unknown members, auto
 * replies, timeouts (sync and async), a server that goes away mid-call,
 * signals with filters and late subscribers, a worker pool serving each call
 * once, and unsubscribing. The real kernel paths are tested in the guest.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus-internal.h"
#include "fake-chan.h"
#include "util.h"

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x); exit(1); } } while (0)
#define CHECK_R(e, want) do { int _r = (e); if (_r != (want)) { fprintf(stderr, "%s:%d: %s = %d, want %d\n", __FILE__, __LINE__, #e, _r, (want)); exit(1); } } while (0)

/* --- fake broker -------------------------------------------------------------- */

#define MAX_CONNS 32
#define MAX_NAMES 16

struct conn {
	int fd;
	uint64_t id;
	char unique[CTRL_UNIQUE_NAME_MAX];
	int inbox;
	bool events;
};

struct name {
	char name[256];
	int owner;		/* conn index, -1 none */
	int queue[MAX_CONNS];	/* conn indices, pool members and waiting owners */
	bool pool[MAX_CONNS];
	int n_queue;
	int call_ch, sig_ch;
	bool subscribed[MAX_CONNS];	/* holds a signal RECV cap */
	bool caller[MAX_CONNS];		/* holds a call SEND cap */
};

static struct conn conns[MAX_CONNS];
static int restart_fd = -1;	/* eventfd: the test asks for a "brokerd restart" */
static int renew_fd = -1;	/* eventfd: recreate the signal channel of names[0..] */
static struct name names[MAX_NAMES];
static int n_names;
static uint64_t next_id;
static char sock_path[108];

static void send_msg(int fd, struct ctrl_writer *w)
{
	const void *d;
	size_t l;
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int) * CTRL_FDS_MAX)];
	} ctl;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	CHECK(ctrl_writer_finish(w, &d, &l) == 0);
	iov = (struct iovec){ .iov_base = (void *)d, .iov_len = l };
	if (w->n_fds) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = &ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * w->n_fds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * w->n_fds);
		memcpy(CMSG_DATA(c), w->fds, sizeof(int) * w->n_fds);
	}
	(void)sendmsg(fd, &mh, MSG_NOSIGNAL);
	for (unsigned int i = 0; i < w->n_fds; i++)
		close(w->fds[i]);
	ctrl_writer_deinit(w);
}

static void send_error(int fd, uint16_t op, uint32_t serial, const char *name)
{
	struct ctrl_writer w;

	CHECK(ctrl_writer_error(&w, op, serial, name, "fake") == 0);
	send_msg(fd, &w);
}

static void noc(const char *name, const char *old, const char *new)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		struct ctrl_writer w;

		if (conns[i].fd < 0 || !conns[i].events)
			continue;
		ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0);
		ctrl_write_string(&w, name);
		ctrl_write_string(&w, old);
		ctrl_write_string(&w, new);
		send_msg(conns[i].fd, &w);
	}
}

static struct name *name_get(const char *s)
{
	for (int i = 0; i < n_names; i++)
		if (strcmp(names[i].name, s) == 0)
			return &names[i];
	CHECK(n_names < MAX_NAMES);
	struct name *n = &names[n_names++];
	snprintf(n->name, sizeof(n->name), "%s", s);
	n->owner = -1;
	n->call_ch = fake_channel_create(IOIPC_F_MULTICAST);
	n->sig_ch = fake_channel_create(IOIPC_F_BROADCAST);
	return n;
}

static void owner_fds(struct ctrl_writer *w, struct name *n, int c)
{
	ctrl_write_fd(w, fake_cap_mint(n->call_ch, IOIPC_SUB_RECV, conns[c].id));
	ctrl_write_fd(w, fake_cap_mint(n->sig_ch, IOIPC_SUB_SEND, conns[c].id));
}

/*
 * What brokerd does when the owner of a pooled name leaves: the caps it just
 * sent with NameAcquired are for channels it now recreates, and every holder
 * gets the new cap with CapabilityRenewed.
 */
static void renewed(int c, const char *name, unsigned int kind, int ch, unsigned int rights)
{
	struct ctrl_writer w;

	ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CAPABILITY_RENEWED, 0);
	ctrl_write_string(&w, name);
	ctrl_write_u32(&w, kind);
	ctrl_write_fd(&w, fake_cap_mint(ch, rights, conns[c].id));
	send_msg(conns[c].fd, &w);
}

static void stale_recreate(struct name *n)
{
	int old_call = n->call_ch, old_sig = n->sig_ch;

	n->call_ch = fake_channel_create(IOIPC_F_MULTICAST);
	n->sig_ch = fake_channel_create(IOIPC_F_BROADCAST);
	fake_channel_kill(old_call);
	fake_channel_kill(old_sig);
	/* the owner's grants: the pool member's RECV and the NameAcquired ones */
	renewed(n->owner, n->name, CTRL_CHANNEL_CALL, n->call_ch, IOIPC_SUB_RECV);
	renewed(n->owner, n->name, CTRL_CHANNEL_CALL, n->call_ch, IOIPC_SUB_RECV);
	renewed(n->owner, n->name, CTRL_CHANNEL_SIGNAL, n->sig_ch, IOIPC_SUB_SEND);
	for (int q = 0; q < n->n_queue; q++)
		if (n->pool[q])
			renewed(n->queue[q], n->name, CTRL_CHANNEL_CALL, n->call_ch, IOIPC_SUB_RECV);
	for (int c = 0; c < MAX_CONNS; c++)
		if (n->caller[c] && conns[c].fd >= 0)
			renewed(c, n->name, CTRL_CHANNEL_CALL, n->call_ch, IOIPC_SUB_SEND);
}

/* promote the first queued owner of n, if any */
static void promote(struct name *n)
{
	const char *old = n->owner >= 0 ? conns[n->owner].unique : "";
	char oldbuf[CTRL_UNIQUE_NAME_MAX];

	snprintf(oldbuf, sizeof(oldbuf), "%s", old);
	n->owner = -1;
	if (n->n_queue > 0) {
		struct ctrl_writer w;
		int c = n->queue[0];

		memmove(n->queue, n->queue + 1, sizeof(int) * (size_t)--n->n_queue);
		memmove(n->pool, n->pool + 1, sizeof(bool) * (size_t)n->n_queue);
		n->owner = c;
		ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_ACQUIRED, 0);
		ctrl_write_string(&w, n->name);
		owner_fds(&w, n, c);
		send_msg(conns[c].fd, &w);
		if (strncmp(n->name, "org.test.Stale", 14) == 0)
			stale_recreate(n);
	}
	noc(n->name, oldbuf, n->owner >= 0 ? conns[n->owner].unique : "");
}

static void conn_gone(int c)
{
	char unique[CTRL_UNIQUE_NAME_MAX];

	snprintf(unique, sizeof(unique), "%s", conns[c].unique);
	close(conns[c].fd);
	conns[c].fd = -1;
	for (int i = 0; i < n_names; i++) {
		struct name *n = &names[i];

		for (int q = 0; q < n->n_queue; q++)
			if (n->queue[q] == c) {
				memmove(n->queue + q, n->queue + q + 1, sizeof(int) * (size_t)(n->n_queue - q - 1));
				memmove(n->pool + q, n->pool + q + 1, sizeof(bool) * (size_t)(n->n_queue - q - 1));
				n->n_queue--;
				q--;
			}
		if (n->owner == c)
			promote(n);
	}
	fake_channel_destroy(conns[c].inbox);
	noc(unique, unique, "");
}

static void handle(int c, const uint8_t *buf, size_t len)
{
	struct ctrl_message m;
	struct ctrl_reader r;
	struct ctrl_writer w;
	const char *s = NULL;
	uint32_t u = 0;
	int fd = conns[c].fd;
	struct name *n;

	CHECK(ctrl_message_decode(&m, buf, len, 0) == 0);
	ctrl_reader_init(&r, &m);
	switch (m.hdr.code) {
	case CTRL_OP_HELLO:
		ctrl_read_u32(&r, &u);
		conns[c].events = u & CTRL_HELLO_NAME_EVENTS;
		conns[c].id = ++next_id;
		ctrl_unique_name_format(conns[c].id, conns[c].unique);
		conns[c].inbox = fake_channel_create(0);
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_HELLO, m.hdr.serial);
		ctrl_write_string(&w, conns[c].unique);
		ctrl_write_u64(&w, conns[c].id);
		ctrl_write_u32(&w, CTRL_FEATURE_CHANNELS | CTRL_FEATURE_BADGES);
		ctrl_write_fd(&w, fake_cap_mint(conns[c].inbox, IOIPC_SUB_RECV, conns[c].id));
		send_msg(fd, &w);
		noc(conns[c].unique, "", conns[c].unique);
		break;
	case CTRL_OP_REQUEST_NAME:
		ctrl_read_string(&r, &s, NULL);
		ctrl_read_u32(&r, &u);
		n = name_get(s);
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_REQUEST_NAME, m.hdr.serial);
		if (n->owner == c) {
			ctrl_write_u32(&w, CTRL_NAME_ALREADY_OWNER);
			owner_fds(&w, n, c);
			send_msg(fd, &w);
		} else if (n->owner < 0) {
			n->owner = c;
			ctrl_write_u32(&w, CTRL_NAME_PRIMARY_OWNER);
			owner_fds(&w, n, c);
			send_msg(fd, &w);
			noc(n->name, "", conns[c].unique);
		} else if (u & CTRL_NAME_DO_NOT_QUEUE) {
			ctrl_write_u32(&w, CTRL_NAME_EXISTS);
			send_msg(fd, &w);
		} else {
			n->pool[n->n_queue] = u & CTRL_NAME_POOL;
			n->queue[n->n_queue++] = c;
			ctrl_write_u32(&w, CTRL_NAME_IN_QUEUE);
			if (u & CTRL_NAME_POOL)
				ctrl_write_fd(&w, fake_cap_mint(n->call_ch, IOIPC_SUB_RECV, conns[c].id));
			send_msg(fd, &w);
		}
		break;
	case CTRL_OP_RELEASE_NAME:
		ctrl_read_string(&r, &s, NULL);
		n = name_get(s);
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_RELEASE_NAME, m.hdr.serial);
		ctrl_write_u32(&w, n->owner == c ? CTRL_RELEASE_RELEASED :
				   n->owner < 0 ? CTRL_RELEASE_NON_EXISTENT : CTRL_RELEASE_NOT_OWNER);
		send_msg(fd, &w);
		if (n->owner == c)
			promote(n);
		break;
	case CTRL_OP_SUBSCRIBE:
		ctrl_read_string(&r, &s, NULL);
		n = name_get(s);
		n->subscribed[c] = true;
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_SUBSCRIBE, m.hdr.serial);
		ctrl_write_fd(&w, fake_cap_mint(n->sig_ch, IOIPC_SUB_RECV, conns[c].id));
		send_msg(fd, &w);
		break;
	case CTRL_OP_OPEN_CALL:
		ctrl_read_string(&r, &s, NULL);
		n = name_get(s);
		if (n->owner < 0) {
			send_error(fd, CTRL_OP_OPEN_CALL, m.hdr.serial, CTRL_ERROR_NAME_HAS_NO_OWNER);
			break;
		}
		if (strcmp(s, "org.test.Forbidden") == 0) {
			send_error(fd, CTRL_OP_OPEN_CALL, m.hdr.serial, CTRL_ERROR_ACCESS_DENIED);
			break;
		}
		n->caller[c] = true;
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_OPEN_CALL, m.hdr.serial);
		ctrl_write_u32(&w, CTRL_CALL_OWNED);
		ctrl_write_fd(&w, fake_cap_mint(n->call_ch, IOIPC_SUB_SEND, conns[c].id));
		send_msg(fd, &w);
		break;
	case CTRL_OP_OPEN_INBOX: {
		int p = -1;

		ctrl_read_string(&r, &s, NULL);
		for (int i = 0; i < MAX_CONNS; i++)
			if (conns[i].fd >= 0 && strcmp(conns[i].unique, s) == 0)
				p = i;
		for (int i = 0; i < n_names; i++)	/* a well-known name: its owner */
			if (strcmp(names[i].name, s) == 0)
				p = names[i].owner;
		if (p < 0) {
			send_error(fd, CTRL_OP_OPEN_INBOX, m.hdr.serial, CTRL_ERROR_NAME_HAS_NO_OWNER);
			break;
		}
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_OPEN_INBOX, m.hdr.serial);
		ctrl_write_string(&w, conns[p].unique);
		ctrl_write_fd(&w, fake_cap_mint(conns[p].inbox, IOIPC_SUB_SEND, conns[c].id));
		send_msg(fd, &w);
		break;
	}
	case CTRL_OP_GET_NAME_OWNER:
		ctrl_read_string(&r, &s, NULL);
		n = name_get(s);
		if (n->owner < 0) {
			send_error(fd, CTRL_OP_GET_NAME_OWNER, m.hdr.serial, CTRL_ERROR_NAME_HAS_NO_OWNER);
			break;
		}
		ctrl_writer_init(&w, CTRL_TYPE_REPLY, CTRL_OP_GET_NAME_OWNER, m.hdr.serial);
		ctrl_write_string(&w, conns[n->owner].unique);
		send_msg(fd, &w);
		break;
	default:
		send_error(fd, m.hdr.code, m.hdr.serial, CTRL_ERROR_NOT_SUPPORTED);
	}
}

/* Like a brokerd restart: every connection and channel is gone, names too;
 * connection ids go on increasing. */
static void broker_restart(void)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (conns[i].fd >= 0) {
			close(conns[i].fd);
			conns[i].fd = -1;
			fake_channel_destroy(conns[i].inbox);
		}
	for (int i = 0; i < n_names; i++) {
		fake_channel_destroy(names[i].call_ch);
		fake_channel_destroy(names[i].sig_ch);
	}
	n_names = 0;
}

/* Like a policy reload that recreates every signal channel: the old one is
 * killed (drained by its subscribers), holders get the new cap pushed. */
static void broker_renew(void)
{
	for (int i = 0; i < n_names; i++) {
		struct name *n = &names[i];
		int old = n->sig_ch;

		n->sig_ch = fake_channel_create(IOIPC_F_BROADCAST);
		for (int c = 0; c < MAX_CONNS; c++) {
			struct ctrl_writer w;
			unsigned int rights = 0;

			if (conns[c].fd < 0)
				continue;
			if (n->owner == c)
				rights = IOIPC_SUB_SEND;
			else if (n->subscribed[c])
				rights = IOIPC_SUB_RECV;
			if (!rights)
				continue;
			ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CAPABILITY_RENEWED, 0);
			ctrl_write_string(&w, n->name);
			ctrl_write_u32(&w, CTRL_CHANNEL_SIGNAL);
			ctrl_write_fd(&w, fake_cap_mint(n->sig_ch, rights, conns[c].id));
			send_msg(conns[c].fd, &w);
		}
		fake_channel_kill(old);
	}
}

static void *broker(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (int i = 0; i < MAX_CONNS; i++)
		conns[i].fd = -1;
	for (;;) {
		struct pollfd p[MAX_CONNS + 3];
		int map[MAX_CONNS + 3], n = 0;

		p[n] = (struct pollfd){ .fd = restart_fd, .events = POLLIN };
		map[n++] = -2;
		p[n] = (struct pollfd){ .fd = renew_fd, .events = POLLIN };
		map[n++] = -3;
		p[n] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		map[n++] = -1;
		for (int i = 0; i < MAX_CONNS; i++)
			if (conns[i].fd >= 0) {
				p[n] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN };
				map[n++] = i;
			}
		if (poll(p, (nfds_t)n, -1) < 0)
			continue;
		for (int k = 0; k < n; k++) {
			uint8_t buf[CTRL_MSG_MAX];
			ssize_t l;

			if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (map[k] == -3) {
				uint64_t v;

				(void)!read(renew_fd, &v, sizeof(v));
				broker_renew();
				continue;
			}
			if (map[k] == -2) {
				uint64_t v;

				(void)!read(restart_fd, &v, sizeof(v));
				broker_restart();
				break;	/* the poll set is stale now */
			}
			if (map[k] < 0) {
				int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

				for (int i = 0; fd >= 0 && i < MAX_CONNS; i++)
					if (conns[i].fd < 0) {
						conns[i] = (struct conn){ .fd = fd, .inbox = 0 };
						fd = -1;
					}
				continue;
			}
			l = recv(p[k].fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (l > 0)
				handle(map[k], buf, (size_t)l);
			else if (l == 0 || (errno != EAGAIN && errno != EINTR))
				conn_gone(map[k]);
		}
	}
	return NULL;
}

static void broker_start(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_t t;
	int lfd;

	snprintf(sock_path, sizeof(sock_path), "/tmp/test-bus-%d.sock", (int)getpid());
	unlink(sock_path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(lfd, 16) == 0);
	restart_fd = eventfd(0, EFD_CLOEXEC);
	renew_fd = eventfd(0, EFD_CLOEXEC);
	CHECK(restart_fd >= 0 && renew_fd >= 0);
	CHECK(pthread_create(&t, NULL, broker, (void *)(intptr_t)lfd) == 0);
	pthread_detach(t);
}

/* --- services, each in its own thread ---------------------------------------- */

struct service {
	const char *name;
	unsigned int flags;
	int id;
	pthread_t thread;
	brokerd_bus *bus;
	char unique[CTRL_UNIQUE_NAME_MAX];
	int served;
	volatile bool ready;
	volatile bool die_now;
	brokerd_msg *held;
	int direct;		/* signals sent straight to this service */
};

static int on_echo(brokerd_msg *m, void *u)
{
	struct service *s = u;
	struct brokerd_creds c;
	const void *body;
	size_t size;
	char buf[256];

	CHECK(brokerd_msg_get_creds(m, &c) == 0);
	CHECK(c.pid == getpid() && c.uid == getuid());
	CHECK(strcmp(brokerd_msg_get_name(m), s->name) == 0);
	brokerd_msg_get_body(m, &body, &size);
	snprintf(buf, sizeof(buf), "%d:%s:%.*s", s->id, brokerd_msg_get_sender(m), (int)size,
		 (const char *)body);
	s->served++;
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int on_fail(brokerd_msg *m, void *u)
{
	return brokerd_msg_reply_error(m, "org.test.Error.Nope", "nope");
}

static int on_negative(brokerd_msg *m, void *u)
{
	return -EPERM;	/* no reply: the library answers with Error.Failed */
}

static int on_hold(brokerd_msg *m, void *u)
{
	struct service *s = u;

	brokerd_msg_unref(s->held);
	s->held = brokerd_msg_ref(m);	/* answered later, or never */
	return 0;
}

static int on_die(brokerd_msg *m, void *u)
{
	struct service *s = u;
	const void *body;
	size_t size;

	/* a body names the worker that is to die: the others decline */
	brokerd_msg_get_body(m, &body, &size);
	if (size && atoi(body) != s->id)
		return brokerd_msg_reply_error(m, "org.test.Error.NotMe", "not me");

	s->die_now = true;
	brokerd_msg_unref(s->held);
	s->held = brokerd_msg_ref(m);	/* keeping it: no automatic reply */
	brokerd_bus_exit(s->bus, 0);
	return 0;
}

static int on_direct(brokerd_msg *m, void *u)
{
	struct service *s = u;

	CHECK(strcmp(brokerd_msg_get_name(m), "") == 0);
	s->direct++;
	return 0;
}

/* answers with a signal sent straight back to the caller, then the count */
static int on_poke(brokerd_msg *m, void *u)
{
	struct service *s = u;
	char buf[32];

	CHECK_R(brokerd_bus_send_signal(s->bus, brokerd_msg_get_sender(m), "Poked", "p", 1), 0);
	snprintf(buf, sizeof(buf), "%d", s->direct);
	return brokerd_msg_reply(m, buf, strlen(buf));
}

static int on_emit(brokerd_msg *m, void *u)
{
	struct service *s = u;
	const void *body;
	size_t size;

	brokerd_msg_get_body(m, &body, &size);
	/* body "Member:payload" */
	{
		char member[64];
		const char *colon = memchr(body, ':', size);
		size_t ml = colon ? (size_t)(colon - (const char *)body) : size;

		snprintf(member, sizeof(member), "%.*s", (int)ml, (const char *)body);
		int r = brokerd_bus_emit_signal(s->bus, s->name, member, colon ? colon + 1 : "",
						colon ? size - ml - 1 : 0);

		if (r < 0)
			return brokerd_msg_reply_error(m, "org.test.Error.Emit", strerror(-r));
	}
	return 0;
}

static void *service_main(void *arg)
{
	struct service *s = arg;
	const char *me;
	int r;

	CHECK_R(brokerd_bus_open(&s->bus, sock_path), 0);
	CHECK_R(brokerd_bus_get_unique_name(s->bus, &me), 0);
	snprintf(s->unique, sizeof(s->unique), "%s", me);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Echo", on_echo, s), 0);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Fail", on_fail, s), 0);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Negative", on_negative, s), 0);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Hold", on_hold, s), 0);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Die", on_die, s), 0);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Emit", on_emit, s), 0);
	CHECK_R(brokerd_bus_add_method(s->bus, NULL, s->name, "Poke", on_poke, s), 0);
	CHECK_R(brokerd_bus_subscribe(s->bus, NULL, NULL, "Hello", on_direct, s), 0);
	r = brokerd_bus_request_name(s->bus, s->name, s->flags);
	CHECK(r == BROKERD_NAME_PRIMARY_OWNER || r == BROKERD_NAME_IN_QUEUE);
	s->ready = true;
	CHECK(brokerd_bus_run(s->bus) >= 0);
	brokerd_msg_unref(s->held);
	s->held = NULL;
	brokerd_bus_close(s->bus);	/* with die_now: mid-call, nothing answered */
	return NULL;
}

static void service_start(struct service *s)
{
	CHECK(pthread_create(&s->thread, NULL, service_main, s) == 0);
	while (!s->ready)
		usleep(1000);
}

static void service_stop(struct service *s)
{
	brokerd_bus *c;

	if (!s->die_now) {
		CHECK_R(brokerd_bus_open(&c, sock_path), 0);
		brokerd_bus_call(c, s->name, "Die", NULL, 0, 200000, NULL);
		brokerd_bus_close(c);
	}
	pthread_join(s->thread, NULL);
}

/* --- tests -------------------------------------------------------------------- */

static void expect_body(brokerd_msg *m, const char *want)
{
	const void *body;
	size_t size;

	CHECK(brokerd_msg_get_body(m, &body, &size) == 0);
	if (size != strlen(want) || memcmp(body, want, size) != 0) {
		fprintf(stderr, "body \"%.*s\", want \"%s\"\n", (int)size, (const char *)body, want);
		exit(1);
	}
}

static bool async_done;
static int async_error;
static char async_body[256];

static int on_reply(brokerd_msg *m, int error, void *u)
{
	async_done = true;
	async_error = error;
	async_body[0] = 0;
	if (m) {
		const void *b;
		size_t n;

		brokerd_msg_get_body(m, &b, &n);
		snprintf(async_body, sizeof(async_body), "%.*s", (int)n, (const char *)b);
	}
	return 0;
}

static void pump(brokerd_bus *bus, bool *flag, int ms)
{
	for (int i = 0; i < ms / 10 && !*flag; i++) {
		CHECK(brokerd_bus_process(bus) >= 0);
		if (!*flag)
			brokerd_bus_wait(bus, 10000);
	}
	CHECK(*flag);
}

static void test_calls(void)
{
	struct service s = { .name = "org.test.Calls", .id = 1 };
	brokerd_bus *bus;
	brokerd_msg *reply = NULL;
	const char *me;
	char want[128];
	uint64_t t0;

	service_start(&s);
	CHECK_R(brokerd_bus_open(&bus, sock_path), 0);
	CHECK_R(brokerd_bus_get_unique_name(bus, &me), 0);

	CHECK_R(brokerd_bus_call(bus, s.name, "Echo", "hi", 2, 0, &reply), 0);
	snprintf(want, sizeof(want), "1:%s:hi", me);
	expect_body(reply, want);
	CHECK(brokerd_msg_get_type(reply) == BROKERD_MSG_REPLY);
	CHECK(strcmp(brokerd_msg_get_sender(reply), s.unique) == 0);
	reply = brokerd_msg_unref(reply);

	CHECK_R(brokerd_bus_call(bus, s.name, "Fail", NULL, 0, 0, &reply), -EREMOTEIO);
	CHECK(strcmp(brokerd_msg_get_error_name(reply), "org.test.Error.Nope") == 0);
	expect_body(reply, "nope");
	reply = brokerd_msg_unref(reply);
	CHECK_R(brokerd_bus_call(bus, s.name, "Negative", NULL, 0, 0, &reply), -EREMOTEIO);
	CHECK(strcmp(brokerd_msg_get_error_name(reply), BROKERD_ERROR_FAILED) == 0);
	reply = brokerd_msg_unref(reply);
	CHECK_R(brokerd_bus_call(bus, s.name, "Nope", NULL, 0, 0, &reply), -EREMOTEIO);
	CHECK(strcmp(brokerd_msg_get_error_name(reply), BROKERD_ERROR_UNKNOWN_METHOD) == 0);
	reply = brokerd_msg_unref(reply);
	CHECK_R(brokerd_bus_call(bus, "org.test.Nobody", "Echo", NULL, 0, 0, NULL), -ENXIO);
	{
		static char big[FAKE_MSG_MAX];

		/* the channel's limit includes the header */
		CHECK_R(brokerd_bus_call(bus, s.name, "Echo", big, sizeof(big), 0, NULL), -EMSGSIZE);
	}

	/* timeouts, sync and async; the late answer is dropped */
	t0 = now_usec();
	CHECK_R(brokerd_bus_call(bus, s.name, "Hold", NULL, 0, 200000, &reply), -ETIMEDOUT);
	CHECK(now_usec() - t0 >= 190000 && now_usec() - t0 < 2000000);
	CHECK_R(brokerd_bus_call_async(bus, NULL, s.name, "Hold", NULL, 0, 100000, on_reply, NULL), 0);
	pump(bus, &async_done, 3000);
	CHECK_R(async_error, -ETIMEDOUT);

	/* async reply */
	async_done = false;
	CHECK_R(brokerd_bus_call_async(bus, NULL, s.name, "Echo", "a", 1, 0, on_reply, NULL), 0);
	pump(bus, &async_done, 3000);
	CHECK_R(async_error, 0);
	snprintf(want, sizeof(want), "1:%s:a", me);
	CHECK(strcmp(async_body, want) == 0);

	/* a cancelled async call never calls back */
	{
		brokerd_slot *slot = NULL;

		async_done = false;
		CHECK_R(brokerd_bus_call_async(bus, &slot, s.name, "Echo", "c", 1, 0, on_reply, NULL), 0);
		brokerd_slot_free(slot);
		for (int i = 0; i < 20; i++) {
			brokerd_bus_process(bus);
			usleep(5000);
		}
		CHECK(!async_done);
	}

	/* the service goes away mid-call: -ECONNRESET, long before the timeout */
	t0 = now_usec();
	CHECK_R(brokerd_bus_call(bus, s.name, "Die", NULL, 0, 10000000, NULL), -ECONNRESET);
	CHECK(now_usec() - t0 < 3000000);
	service_stop(&s);
	CHECK_R(brokerd_bus_call(bus, s.name, "Echo", NULL, 0, 0, NULL), -ENXIO);
	brokerd_bus_close(bus);
	printf("calls: ok\n");
}

struct subscriber {
	const char *filter;
	char got[512];
	brokerd_slot *slot;
};

static int on_signal(brokerd_msg *m, void *u)
{
	struct subscriber *x = u;
	const void *body;
	size_t size;

	brokerd_msg_get_body(m, &body, &size);
	snprintf(x->got + strlen(x->got), sizeof(x->got) - strlen(x->got), "%s%s=%.*s",
		 x->got[0] ? " " : "", brokerd_msg_get_member(m), (int)size, (const char *)body);
	return 0;
}

static void drain(brokerd_bus *bus)
{
	for (int i = 0; i < 20; i++) {
		brokerd_bus_process(bus);
		brokerd_bus_wait(bus, 2000);
	}
}

static void test_signals(void)
{
	struct service s = { .name = "org.test.Signals", .id = 1 };
	struct subscriber a = { .filter = NULL }, b = { .filter = "Tick" }, c = { .filter = "T*,Other" };
	brokerd_bus *bus, *late;

	service_start(&s);
	CHECK_R(brokerd_bus_open(&bus, sock_path), 0);
	CHECK_R(brokerd_bus_open(&late, sock_path), 0);
	CHECK_R(brokerd_bus_subscribe(bus, &a.slot, s.name, a.filter, on_signal, &a), 0);
	CHECK_R(brokerd_bus_subscribe(bus, &b.slot, s.name, b.filter, on_signal, &b), 0);
	/* emitting needs the name */
	CHECK_R(brokerd_bus_emit_signal(bus, s.name, "Tick", "x", 1), -EPERM);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tick:1", 6, 0, NULL), 0);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tock:2", 6, 0, NULL), 0);
	CHECK_R(brokerd_bus_subscribe(late, &c.slot, s.name, c.filter, on_signal, &c), 0);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tick:3", 6, 0, NULL), 0);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Other:4", 7, 0, NULL), 0);
	drain(bus);
	drain(late);
	CHECK(strcmp(a.got, "Tick=1 Tock=2 Tick=3 Other=4") == 0);
	CHECK(strcmp(b.got, "Tick=1 Tick=3") == 0);
	CHECK(strcmp(c.got, "Tick=3 Other=4") == 0);

	/* unsubscribing one slot leaves the other of the same name working */
	b.slot = brokerd_slot_free(b.slot);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tick:5", 6, 0, NULL), 0);
	drain(bus);
	CHECK(strcmp(a.got, "Tick=1 Tock=2 Tick=3 Other=4 Tick=5") == 0);
	CHECK(strcmp(b.got, "Tick=1 Tick=3") == 0);
	a.slot = brokerd_slot_free(a.slot);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tick:6", 6, 0, NULL), 0);
	drain(bus);
	CHECK(strcmp(a.got, "Tick=1 Tock=2 Tick=3 Other=4 Tick=5") == 0);

	/* a subscriber that never reads fills its ring: the emitter hears it */
	{
		brokerd_msg *reply = NULL;
		int r = 0, n;

		for (n = 0; n < 100 && r == 0; n++) {
			reply = brokerd_msg_unref(reply);
			r = brokerd_bus_call(bus, s.name, "Emit", "Tick:z", 6, 0, &reply);
		}
		CHECK_R(r, -EREMOTEIO);
		expect_body(reply, strerror(ENOBUFS));
		brokerd_msg_unref(reply);
		/* 2 of the 32 slots were read before; the ring is full after 30 more */
		CHECK(n > 28 && n <= 33);
	}
	/* unicast signals: to the service by its well-known name and by its
	 * unique name, and back to us; named subscriptions do not see them */
	{
		struct subscriber d = { .filter = "Poked" };
		struct subscriber named = { .filter = NULL };
		brokerd_msg *reply = NULL;
		char uniq[CTRL_UNIQUE_NAME_MAX];

		CHECK_R(brokerd_bus_subscribe(bus, &d.slot, NULL, d.filter, on_signal, &d), 0);
		CHECK_R(brokerd_bus_subscribe(bus, &named.slot, s.name, NULL, on_signal, &named), 0);
		CHECK_R(brokerd_bus_send_signal(bus, s.name, "Hello", "1", 1), 0);
		CHECK_R(brokerd_bus_get_name_owner(bus, s.name, uniq, sizeof(uniq)), 0);
		CHECK_R(brokerd_bus_send_signal(bus, uniq, "Hello", "2", 1), 0);
		CHECK_R(brokerd_bus_send_signal(bus, uniq, "Ignored", "3", 1), 0);
		/* the inbox and the call channel are not ordered with each other:
		 * ask until the service has seen both */
		for (int i = 0; i < 100; i++) {
			const void *pb;
			size_t n;
			bool both;

			CHECK_R(brokerd_bus_call(bus, s.name, "Poke", NULL, 0, 0, &reply), 0);
			brokerd_msg_get_body(reply, &pb, &n);
			both = n == 1 && *(const char *)pb == '2';
			reply = brokerd_msg_unref(reply);
			if (both)
				break;
			CHECK(i < 99);
			usleep(1000);
		}
		drain(bus);
		/* every Poke sent one Poked back, and nothing else came */
		for (char *x = strtok(d.got, " "); x; x = strtok(NULL, " "))
			CHECK(strcmp(x, "Poked=p") == 0);
		strcpy(d.got, "Poked=p");
		drain(bus);
		CHECK(strcmp(d.got, "Poked=p") == 0);
		CHECK(strcmp(named.got, "") == 0);
		CHECK_R(brokerd_bus_send_signal(bus, "org.test.Nobody", "Hello", NULL, 0), -ENXIO);
		CHECK_R(brokerd_bus_send_signal(bus, "not a name", "Hello", NULL, 0), -EINVAL);
		brokerd_slot_free(d.slot);
		brokerd_slot_free(named.slot);
	}

	brokerd_bus_close(late);
	brokerd_slot_free(c.slot);	/* outlives its bus */
	service_stop(&s);
	brokerd_bus_close(bus);
	printf("signals: ok\n");
}

static void test_pool(void)
{
	struct service w[3] = {
		{ .name = "org.test.Pool", .id = 1, .flags = BROKERD_NAME_POOL },
		{ .name = "org.test.Pool", .id = 2, .flags = BROKERD_NAME_POOL },
		{ .name = "org.test.Pool", .id = 3, .flags = BROKERD_NAME_POOL },
	};
	int per[4] = { 0 };
	brokerd_bus *bus;

	for (int i = 0; i < 3; i++)
		service_start(&w[i]);
	CHECK_R(brokerd_bus_open(&bus, sock_path), 0);
	for (int i = 0; i < 30; i++) {
		brokerd_msg *reply = NULL;
		const void *body;
		size_t size;

		CHECK_R(brokerd_bus_call(bus, "org.test.Pool", "Echo", "p", 1, 0, &reply), 0);
		brokerd_msg_get_body(reply, &body, &size);
		per[atoi(body)]++;
		brokerd_msg_unref(reply);
	}
	CHECK(per[1] + per[2] + per[3] == 30);
	CHECK(w[0].served + w[1].served + w[2].served == 30);
	CHECK((per[1] > 0) + (per[2] > 0) + (per[3] > 0) >= 2);
	printf("pool: %d/%d/%d\n", per[1], per[2], per[3]);
	brokerd_bus_close(bus);
	/* Die goes to one worker each time, round-robin over those left */
	for (int left = 3, tries = 0; left > 0; tries++) {
		brokerd_bus *c;

		CHECK(tries < 100);
		CHECK_R(brokerd_bus_open(&c, sock_path), 0);
		brokerd_bus_call(c, "org.test.Pool", "Die", NULL, 0, 100000, NULL);
		brokerd_bus_close(c);
		left = 0;
		for (int i = 0; i < 3; i++)
			if (w[i].thread && pthread_tryjoin_np(w[i].thread, NULL) != 0)
				left++;
			else
				w[i].thread = 0;
	}
	printf("pool: ok\n");
}

/* The pool's primary owner leaves; the promoted worker's NameAcquired caps
 * are stale at once, its renewed ones are not: it keeps serving. */
static void test_stale_promotion(void)
{
	struct service w[2] = {
		{ .name = "org.test.StalePool", .id = 1, .flags = BROKERD_NAME_POOL },
		{ .name = "org.test.StalePool", .id = 2, .flags = BROKERD_NAME_POOL },
	};
	brokerd_bus *bus;
	brokerd_msg *reply = NULL;
	int r = -1;

	service_start(&w[0]);
	service_start(&w[1]);
	CHECK_R(brokerd_bus_open(&bus, sock_path), 0);
	/* worker 1 (primary) leaves */
	for (int i = 0; i < 50 && !w[0].die_now; i++)
		brokerd_bus_call(bus, "org.test.StalePool", "Die", "1", 1, 200000, NULL);
	CHECK(w[0].die_now && !w[1].die_now);
	pthread_join(w[0].thread, NULL);
	for (int i = 0; i < 300 && r != 0; i++) {
		r = brokerd_bus_call(bus, "org.test.StalePool", "Echo", "s", 1, 500000, &reply);
		if (r != 0)
			usleep(10000);
	}
	CHECK_R(r, 0);
	{
		const void *body;
		size_t size;

		brokerd_msg_get_body(reply, &body, &size);
		CHECK(size > 2 && memcmp(body, "2:", 2) == 0);
	}
	brokerd_msg_unref(reply);
	service_stop(&w[1]);
	brokerd_bus_close(bus);
	printf("stale promotion: ok\n");
}

/* A reload recreates the signal channel while signals wait in the old one
 * for a subscriber that has not read them yet: none is lost. */
static void test_renew(void)
{
	struct service s = { .name = "org.test.Renew", .id = 1 };
	struct subscriber sub = { .filter = NULL };
	brokerd_bus *bus, *sbus;
	char *x;
	int n = 0;

	service_start(&s);
	CHECK_R(brokerd_bus_open(&bus, sock_path), 0);
	CHECK_R(brokerd_bus_open(&sbus, sock_path), 0);
	CHECK_R(brokerd_bus_subscribe(sbus, NULL, s.name, NULL, on_signal, &sub), 0);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "A:1", 3, 0, NULL), 0);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "B:2", 3, 0, NULL), 0);
	CHECK(eventfd_write(renew_fd, 1) == 0);
	/* A and B wait in the old channel; the subscriber attaches the new one
	 * when it processes CapabilityRenewed (what is sent there before that
	 * it cannot see: broadcast delivers what is sent after attaching) */
	for (int i = 0; i < 30; i++) {
		brokerd_bus_process(sbus);
		brokerd_bus_wait(sbus, 10000);
	}
	/* the service needs the new SEND cap before C can go out */
	for (int i = 0; i < 300; i++) {
		brokerd_msg *reply = NULL;
		int r = brokerd_bus_call(bus, s.name, "Emit", "C:3", 3, 0, &reply);

		brokerd_msg_unref(reply);
		if (r == 0)
			break;
		usleep(10000);
	}
	for (int i = 0; i < 100 && n < 3; i++) {
		brokerd_bus_process(sbus);
		brokerd_bus_wait(sbus, 10000);
		n = 0;
		for (const char *p = sub.got; (p = strchr(p, '=')); p++)
			n++;
	}
	/* order across the two channels is not defined; each arrives once */
	if (n != 3)
		fprintf(stderr, "renew: got \"%s\"\n", sub.got);
	CHECK(n == 3);
	for (x = strtok(sub.got, " "); x; x = strtok(NULL, " "))
		CHECK(strcmp(x, "A=1") == 0 || strcmp(x, "B=2") == 0 || strcmp(x, "C=3") == 0);
	service_stop(&s);
	brokerd_bus_close(sbus);
	brokerd_bus_close(bus);
	printf("renew: ok\n");
}

static int reconnects;

static void on_state(brokerd_bus *bus, int state, void *u)
{
	if (state == BROKERD_STATE_CONNECTED)
		(*(int *)u)++;
}

static void test_restart(void)
{
	struct service s = { .name = "org.test.Restart", .id = 1 };
	struct subscriber sub = { .filter = "Tick" };
	int sub_reconnects = 0;
	brokerd_bus *bus, *sbus;
	brokerd_msg *reply = NULL;
	const char *me;
	char before[CTRL_UNIQUE_NAME_MAX];
	int r = -1;

	service_start(&s);
	CHECK_R(brokerd_bus_open(&bus, sock_path), 0);
	CHECK_R(brokerd_bus_open(&sbus, sock_path), 0);
	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, &reconnects), 0);
	CHECK_R(brokerd_bus_set_state_handler(sbus, on_state, &sub_reconnects), 0);
	CHECK_R(brokerd_bus_subscribe(sbus, NULL, s.name, sub.filter, on_signal, &sub), 0);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tick:before", 11, 0, NULL), 0);
	drain(sbus);
	CHECK(strcmp(sub.got, "Tick=before") == 0);
	CHECK_R(brokerd_bus_get_unique_name(bus, &me), 0);
	snprintf(before, sizeof(before), "%s", me);

	/* a call in flight when the broker goes away fails, it does not hang */
	async_done = false;
	CHECK_R(brokerd_bus_call_async(bus, NULL, s.name, "Hold", NULL, 0, 10000000, on_reply, NULL), 0);
	for (int i = 0; i < 20; i++) {
		brokerd_bus_process(bus);
		usleep(2000);
	}
	CHECK(eventfd_write(restart_fd, 1) == 0);
	pump(bus, &async_done, 3000);
	CHECK_R(async_error, -ECONNRESET);
	for (int i = 0; i < 300 && (!reconnects || !sub_reconnects); i++) {
		brokerd_bus_process(bus);
		brokerd_bus_process(sbus);
		brokerd_bus_wait(bus, 10000);
	}
	CHECK(reconnects == 1 && sub_reconnects == 1);
	CHECK_R(brokerd_bus_get_unique_name(bus, &me), 0);
	CHECK(strcmp(me, before) != 0);

	/* the service owns its name again and the subscriber hears it again */
	for (int i = 0; i < 300 && r != 0; i++) {
		r = brokerd_bus_call(bus, s.name, "Echo", "again", 5, 1000000, &reply);
		if (r != 0)
			usleep(10000);
	}
	CHECK_R(r, 0);
	brokerd_msg_unref(reply);
	CHECK_R(brokerd_bus_call(bus, s.name, "Emit", "Tick:after", 10, 0, NULL), 0);
	drain(sbus);
	CHECK(strcmp(sub.got, "Tick=before Tick=after") == 0);
	service_stop(&s);
	brokerd_bus_close(sbus);
	brokerd_bus_close(bus);
	printf("restart: ok\n");
}

int main(void)
{
	broker_start();
	test_calls();
	test_signals();
	test_pool();
	test_renew();
	test_stale_promotion();
	test_restart();
	unlink(sock_path);
	printf("test-bus: ok\n");
	return 0;
}
