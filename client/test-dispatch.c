/* SPDX-License-Identifier: MIT */
/*
 * test-dispatch.c - host unit test of the client's data path, which
 * otherwise only runs in the guest: a completed channel receive, as the
 * kernel leaves it in the chan's buffer (struct ioipc_msg_info, then the
 * message), goes through bus_dispatch_chan(), the seam fuzz-recv.c feeds
 * too, to a method, the subscriptions or a pending call, and the replies
 * go out; broker signals go through bus_dispatch_ctrl().
 *
 * No channel is needed: the test links with --wrap for chan_arm,
 * chan_send, chan_send_receipt, chan_close and chan_attach, so receives are "armed" by
 * counting, sends are kept here, decoded and checked, and caps "attach" to
 * chans of a static pool. The chans are the test's own. Where the control
 * connection matters (the asynchronous OPEN_CALL, reply caps pushed by
 * brokerd), the test plays brokerd on the other end of a socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/bus-alloc.h"
#include "client/bus-call.h"
#include "client/bus-control.h"
#include "client/bus-dispatch.h"
#include "client/bus-name.h"
#include "client/bus-taker.h"
#include "util/socket.h"
#include "util/test.h"

/* --- The wrapped channel layer ------------------------------------------------ */

int __wrap_chan_arm(struct ring *r, struct chan *c);
int __wrap_chan_arm_deferred(struct ring *r, struct chan *c);
int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len);
int __wrap_chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			     unsigned int n, uint64_t cookie, bool *ret_receipt);
void __wrap_chan_close(struct ring *r, struct chan *c);
int __wrap_chan_attach(struct ring *r, int cap_fd, unsigned int rights, size_t recv_size, unsigned int kind,
		       void *owner, struct chan **ret);

static unsigned int n_armed, n_closed;

/*
 * The allocator, counted while counting is set: what the fast paths
 * allocate per message (malloc, calloc, realloc, and strdup, which the
 * library's objects call and libc's own malloc would not show).
 */
void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__wrap_strdup(const char *s);
static bool counting;
static unsigned int n_alloc;

void *__wrap_malloc(size_t size)
{
	n_alloc += counting;
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	n_alloc += counting;
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	n_alloc += counting;
	return __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
	n_alloc += counting;
	return __real_strdup(s);
}
static struct {
	unsigned int n;
	struct chan *chan;
	uint8_t buf[CHMSG_MAX];
	size_t len;
} sent;

int __wrap_chan_arm(struct ring *r, struct chan *c)
{
	n_armed++;
	return 0;
}

/* a call chan's re-arm, submitted with the next wait: counted as one */
int __wrap_chan_arm_deferred(struct ring *r, struct chan *c)
{
	return __wrap_chan_arm(r, c);
}

int __wrap_chan_send(struct ring *r, struct chan *c, const void *buf, size_t len)
{
	ASSERT(len <= sizeof(sent.buf));
	sent.n++;
	sent.chan = c;
	memcpy(sent.buf, buf, len);
	sent.len = len;
	return (int)len;
}

/* Whether the "kernel" posts receipts for calls; the test posts them through ring.on_receipt. */
static bool receipts_on;

int __wrap_chan_send_receipt(struct ring *r, struct chan *c, const void *buf, size_t len, const int *fds,
			     unsigned int n, uint64_t cookie, bool *ret_receipt)
{
	ASSERT(cookie != 0);
	*ret_receipt = receipts_on;
	return __wrap_chan_send(r, c, buf, len);
}

void __wrap_chan_close(struct ring *r, struct chan *c)
{
	n_closed++;
}

/* Send-only chans attached from caps brokerd sent (a static pool: nothing to free). */
static struct chan attached[8];
static unsigned int n_attached;

int __wrap_chan_attach(struct ring *r, int cap_fd, unsigned int rights, size_t recv_size, unsigned int kind,
		       void *owner, struct chan **ret)
{
	struct chan *c;

	ASSERT(cap_fd >= 0 && recv_size == 0 && n_attached < ELEMENTSOF(attached));
	c = &attached[n_attached++];
	c->kind = kind;
	c->rights = rights;
	c->owner = owner;
	*ret = c;
	return 0;
}

/* The last message sent, decoded. */
static struct chmsg last_sent(void)
{
	struct chmsg m;

	ASSERT(sent.n > 0);
	ASSERT_INT(chmsg_decode(&m, sent.buf, sent.len), ==, 0);
	return m;
}

/* A body as the byte API sends it: signature "ay" (or "s"), the length, the bytes. */
static void set_bytes(struct chmsg *m, const char *sig, const char *text, uint8_t *buf)
{
	uint32_t n = (uint32_t)strlen(text);

	memcpy(buf, &n, 4);
	memcpy(buf + 4, text, n + 1);
	m->signature = sig;
	m->body = buf;
	m->body_len = 4 + n + (strcmp(sig, "s") == 0);
}

/* The bytes of a message body sent as "ay" or "s" ("" for none). */
static bool body_is(const struct chmsg *m, const char *text)
{
	uint32_t n;

	if (m->body_len == 0)
		return !*text && !m->signature;
	ASSERT(strcmp(m->signature, "ay") == 0 || strcmp(m->signature, "s") == 0);
	memcpy(&n, m->body, 4);
	return n == strlen(text) && memcmp((const uint8_t *)m->body + 4, text, n) == 0;
}

/* --- Chans and received messages ----------------------------------------------- */

#define PEER_BADGE 7
#define PEER_NAME  ":1.6" /* badge 7: ids are named from :1.0 */
#define SVC	   "org.test.Svc"

static struct chan *chan_new(unsigned int kind, unsigned int rights, void *owner)
{
	struct chan *c = calloc(1, sizeof(*c));

	ASSERT(c);
	c->kind = kind;
	c->rights = rights;
	c->owner = owner;
	if (rights & IOIPC_SUB_RECV) {
		c->buf_size = sizeof(struct ioipc_msg_info) + CHMSG_MAX;
		c->buf = calloc(1, c->buf_size);
		ASSERT(c->buf);
	}
	return c;
}

static void chan_free_test(struct chan *c)
{
	free(c->buf);
	free(c);
}

/* The pid the kernel stamps on what the test receives. */
static uint32_t recv_pid = 4242;
/* The kernel's lost count the next receive reports (then 0 again). */
static uint32_t next_lost;

/* What the kernel leaves after a receive of payload (len bytes) sent by badge. */
static void receive_raw(struct chan *c, const void *payload, size_t len, uint32_t info_len, uint64_t badge)
{
	struct ioipc_msg_info info = {
		.pid = recv_pid,
		.uid = 2001,
		.gid = 2100,
		.badge = badge,
		.len = info_len,
		.lost = next_lost,
	};

	next_lost = 0;
	ASSERT(sizeof(info) + len <= c->buf_size);
	memcpy(c->buf, &info, sizeof(info));
	memcpy(c->buf + sizeof(info), payload, len);
	c->res = (int)(sizeof(info) + len);
}

/* What the kernel leaves after a receive of m sent by badge. */
static void encode_receive(struct chan *c, const struct chmsg *m, uint64_t badge)
{
	static uint8_t buf[CHMSG_MAX];
	int k = chmsg_encode(m, buf, sizeof(buf));

	ASSERT(k > 0);
	receive_raw(c, buf, (size_t)k, (uint32_t)k, badge);
}

/* Receives m on c from the peer and dispatches it. */
static void deliver(brokerd_bus *bus, struct chan *c, const struct chmsg *m)
{
	encode_receive(c, m, PEER_BADGE);
	bus_dispatch_chan(bus, c);
}

/* --- Handlers that record what they saw ------------------------------------------ */

struct seen {
	unsigned int n;
	int error;
	char sender[64];
	char name[256];
	char member[256];
	char body[256];
	uint64_t serial;
	struct brokerd_creds creds;
};

static void seen_record(struct seen *s, brokerd_msg *msg, int error)
{
	const void *body;
	size_t size;

	s->n++;
	s->error = error;
	s->sender[0] = s->name[0] = s->member[0] = s->body[0] = 0;
	if (!msg)
		return;
	snprintf(s->sender, sizeof(s->sender), "%s", brokerd_msg_get_sender(msg));
	snprintf(s->name, sizeof(s->name), "%s", brokerd_msg_get_name(msg));
	snprintf(s->member, sizeof(s->member), "%s", brokerd_msg_get_member(msg));
	ASSERT_INT(brokerd_msg_get_body(msg, &body, &size), ==, 0);
	snprintf(s->body, sizeof(s->body), "%.*s", (int)size, (const char *)body);
	s->serial = brokerd_msg_get_serial(msg);
	ASSERT_INT(brokerd_msg_get_creds(msg, &s->creds), ==, 0);
}

static int on_msg(brokerd_msg *msg, void *userdata)
{
	seen_record(userdata, msg, 0);
	return 0;
}

static int on_echo(brokerd_msg *msg, void *userdata)
{
	const void *body;
	size_t size;

	seen_record(userdata, msg, 0);
	ASSERT_INT(brokerd_msg_get_body(msg, &body, &size), ==, 0);
	ASSERT_INT(brokerd_msg_reply(msg, body, size), ==, 0);
	ASSERT_INT(brokerd_msg_reply(msg, "again", 5), ==, -EBADMSG); /* one answer per call */
	return 0;
}

static int on_fail(brokerd_msg *msg, void *userdata)
{
	seen_record(userdata, msg, 0);
	return -ENOENT;
}

static int on_reply(brokerd_msg *msg, int error, void *userdata)
{
	seen_record(userdata, msg, error);
	return 0;
}

/* A reply the library made itself (NoReply): no sender, no credentials. */
static int on_local_reply(brokerd_msg *msg, int error, void *userdata)
{
	struct seen *s = userdata;
	struct brokerd_creds creds;
	const void *body;
	size_t size;

	s->n++;
	s->error = error;
	ASSERT(msg);
	ASSERT(strcmp(brokerd_msg_get_sender(msg), "") == 0);
	ASSERT_INT(brokerd_msg_get_creds(msg, &creds), ==, -ENODATA);
	snprintf(s->member, sizeof(s->member), "%s", brokerd_msg_get_member(msg));
	ASSERT_INT(brokerd_msg_get_body(msg, &body, &size), ==, 0);
	snprintf(s->body, sizeof(s->body), "%.*s", (int)size, (const char *)body);
	return 0;
}

static struct seen noc;
static char noc_old[64], noc_new[64];

static int on_owner_changed(brokerd_bus *bus, const char *name, const char *old_owner, const char *new_owner,
			    void *userdata)
{
	seen_record(&noc, NULL, 0);
	snprintf(noc.name, sizeof(noc.name), "%s", name);
	snprintf(noc_old, sizeof(noc_old), "%s", old_owner);
	snprintf(noc_new, sizeof(noc_new), "%s", new_owner);
	return 0;
}

/* --- The bus under test ------------------------------------------------------------- */

struct fixture {
	brokerd_bus *bus;
	struct bname *svc;
	struct chan *inbox, *call_recv, *sig_recv, *call_send, *peer_send;
};

/* NameOwnerChanged: SVC's owner PEER_NAME is gone, and nobody owns it now. */
static void svc_owner_gone(struct fixture *f)
{
	struct ctrl_writer w;
	const void *data;
	size_t len;

	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0), ==, 0);
	ctrl_write_string(&w, SVC);
	ctrl_write_string(&w, PEER_NAME);
	ctrl_write_string(&w, "");
	ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
	ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, ++f->bus->ctrl_seq), ==, 1);
	ctrl_writer_deinit(&w);
}

static int fixture_init(struct fixture *f)
{
	struct peer_inbox *p;
	int k;

	memset(f, 0, sizeof(*f));
	k = bus_alloc(&f->bus, "/nonexistent/brokerd/socket");
	if (k < 0)
		return k;
	/* connected as far as the data path can tell; a control request would
	 * find no socket and fail with -ENOTCONN */
	f->bus->connected = true;
	f->bus->features = CTRL_FEATURE_CHANNELS;
	f->svc = bname_get(f->bus, SVC, true);
	ASSERT(f->svc);
	f->inbox = f->bus->inbox = chan_new(CHAN_INBOX, IOIPC_SUB_RECV, NULL);
	f->call_recv = f->svc->call_recv = chan_new(CHAN_CALL_RECV, IOIPC_SUB_RECV, f->svc);
	f->sig_recv = f->svc->sig_recv = chan_new(CHAN_SIGNAL_RECV, IOIPC_SUB_RECV, f->svc);
	f->call_send = f->svc->call_send = chan_new(CHAN_CALL_SEND, IOIPC_SUB_SEND, f->svc);
	/* the peer's inbox is in the cache: replies need not ask brokerd */
	p = calloc(1, sizeof(*p));
	ASSERT(p);
	p->id = PEER_BADGE;
	p->send = f->peer_send = chan_new(CHAN_PEER_SEND, IOIPC_SUB_SEND, p);
	p->next = f->bus->peer_inboxes;
	f->bus->peer_inboxes = p;
	f->bus->n_peer_inboxes++;
	return 0;
}

static void fixture_deinit(struct fixture *f)
{
	/* chan_close() is wrapped: the chans stay the test's to free */
	ASSERT(brokerd_bus_close(f->bus) == NULL);
	chan_free_test(f->inbox);
	chan_free_test(f->call_recv);
	chan_free_test(f->sig_recv);
	chan_free_test(f->call_send);
	chan_free_test(f->peer_send);
}

/* --- Tests --------------------------------------------------------------------------- */

/* A call reaches the method of its member, and the reply goes to the caller's inbox. */
static void test_call(struct fixture *f)
{
	struct seen echo = { 0 }, fallback = { 0 }, failing = { 0 };
	struct chmsg call = {
		.type = CHMSG_CALL, .serial = 41, .path = "/", .interface = "org.test.Iface", .member = "Echo"
	};
	static uint8_t body[64];
	brokerd_slot *s_echo = NULL, *s_fallback = NULL, *s_fail = NULL;
	struct chmsg r;
	unsigned int armed;

	set_bytes(&call, "ay", "hello", body);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &s_echo, SVC, "Echo", on_echo, &echo), ==, 0);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &s_fail, SVC, "Fail", on_fail, &failing), ==, 0);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &s_fallback, SVC, NULL, on_msg, &fallback), ==, 0);

	sent.n = 0;
	armed = n_armed;
	deliver(f->bus, f->call_recv, &call);
	ASSERT_INT(echo.n, ==, 1);
	ASSERT_INT(fallback.n, ==, 0);
	ASSERT(strcmp(echo.sender, PEER_NAME) == 0);
	ASSERT(strcmp(echo.name, SVC) == 0);
	ASSERT(strcmp(echo.member, "Echo") == 0);
	ASSERT(strcmp(echo.body, "hello") == 0);
	ASSERT_INT(echo.serial, ==, 41);
	ASSERT_INT(echo.creds.pid, ==, 4242);
	ASSERT_INT(echo.creds.uid, ==, 2001);
	ASSERT_INT(echo.creds.gid, ==, 2100);
	ASSERT_INT(echo.creds.id, ==, PEER_BADGE);
	/* one reply, to the caller's inbox, answering serial 41 with the body */
	ASSERT_INT(sent.n, ==, 1);
	ASSERT(sent.chan == f->peer_send);
	r = last_sent();
	ASSERT_INT(r.type, ==, CHMSG_REPLY);
	ASSERT_INT(r.reply_serial, ==, 41);
	ASSERT(strcmp(r.destination, PEER_NAME) == 0);
	ASSERT(body_is(&r, "hello"));
	/* the call chan is re-armed after the handler, for the next call */
	ASSERT_INT(n_armed, ==, armed + 1);

	/* no method of that member: the fallback, which answers with an empty reply */
	call.member = "Other";
	call.serial = 42;
	deliver(f->bus, f->call_recv, &call);
	ASSERT_INT(fallback.n, ==, 1);
	ASSERT(strcmp(fallback.member, "Other") == 0);
	ASSERT_INT(sent.n, ==, 2);
	r = last_sent();
	ASSERT_INT(r.type, ==, CHMSG_REPLY);
	ASSERT_INT(r.reply_serial, ==, 42);
	ASSERT_INT(r.body_len, ==, 0);

	/* a handler that fails: an error reply with the errno's text */
	call.member = "Fail";
	call.serial = 43;
	deliver(f->bus, f->call_recv, &call);
	ASSERT_INT(failing.n, ==, 1);
	r = last_sent();
	ASSERT_INT(r.type, ==, CHMSG_ERROR);
	ASSERT_INT(r.reply_serial, ==, 43);
	ASSERT(strcmp(r.error_name, BROKERD_ERROR_FAILED) == 0);
	ASSERT(strcmp(r.signature, "s") == 0 && body_is(&r, strerror(ENOENT)));

	/* a caller that expects no reply gets none, not even the empty one */
	call.member = "Other";
	call.serial = 44;
	call.flags = CHMSG_F_NO_REPLY_EXPECTED;
	deliver(f->bus, f->call_recv, &call);
	ASSERT_INT(fallback.n, ==, 2);
	ASSERT_INT(sent.n, ==, 3);

	/* without a fallback, an unknown member is answered UnknownMethod */
	brokerd_slot_free(s_fallback);
	call.flags = 0;
	call.member = "Nope";
	call.serial = 45;
	deliver(f->bus, f->call_recv, &call);
	ASSERT_INT(fallback.n, ==, 2);
	ASSERT_INT(sent.n, ==, 4);
	r = last_sent();
	ASSERT_INT(r.type, ==, CHMSG_ERROR);
	ASSERT_INT(r.reply_serial, ==, 45);
	ASSERT(strcmp(r.error_name, BROKERD_ERROR_UNKNOWN_METHOD) == 0);
	ASSERT(body_is(&r, "Nope"));

	/* what arrives on a call chan and is no call reaches no method */
	call.type = CHMSG_SIGNAL;
	call.serial = 46;
	deliver(f->bus, f->call_recv, &call);
	ASSERT_INT(echo.n + fallback.n + failing.n, ==, 4);
	ASSERT_INT(sent.n, ==, 4);

	brokerd_slot_free(s_echo);
	brokerd_slot_free(s_fail);
}

/* Signals reach the subscriptions of their name whose filter matches. */
static void test_signal(struct fixture *f)
{
	struct seen tick = { 0 }, all = { 0 }, direct = { 0 };
	struct chmsg sig = { .type = CHMSG_SIGNAL,
			     .serial = 9,
			     .path = "/",
			     .interface = "org.test.Iface",
			     .member = "Tick" };
	static uint8_t body[64];
	brokerd_slot *s_tick = NULL, *s_all = NULL, *s_direct = NULL;
	unsigned int n_sent = sent.n;

	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_tick, SVC, "Tick*,Tock", on_msg, &tick), ==, 0);
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_all, SVC, NULL, on_msg, &all), ==, 0);
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_direct, NULL, NULL, on_msg, &direct), ==, 0);
	ASSERT_INT(f->svc->n_subs, ==, 2);

	set_bytes(&sig, "ay", "1", body);
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(tick.n, ==, 1);
	ASSERT_INT(all.n, ==, 1);
	ASSERT_INT(direct.n, ==, 0);
	ASSERT(strcmp(tick.sender, PEER_NAME) == 0);
	ASSERT(strcmp(tick.name, SVC) == 0);
	ASSERT(strcmp(tick.member, "Tick") == 0);
	ASSERT(strcmp(tick.body, "1") == 0);

	sig.member = "Changed";
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(tick.n, ==, 1); /* filtered out */
	ASSERT_INT(all.n, ==, 2);
	ASSERT(strcmp(all.member, "Changed") == 0);

	/* a signal sent to this connection's inbox: the subscriptions without a name */
	sig.member = "Poke";
	sig.destination = ":1.1";
	deliver(f->bus, f->inbox, &sig);
	ASSERT_INT(direct.n, ==, 1);
	ASSERT(strcmp(direct.member, "Poke") == 0);
	ASSERT(strcmp(direct.sender, PEER_NAME) == 0);
	ASSERT_INT(tick.n + all.n, ==, 3);

	/* nothing is ever answered for a signal */
	ASSERT_INT(sent.n, ==, n_sent);

	/* freeing a slot: that subscription hears nothing more */
	brokerd_slot_free(s_tick);
	sig.member = "Tick";
	sig.destination = "";
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(tick.n, ==, 1);
	ASSERT_INT(all.n, ==, 3);
	/* the name's last subscription slot gone: the subscription ends */
	brokerd_slot_free(s_all);
	ASSERT_INT(f->svc->n_subs, ==, 0);
	ASSERT(f->svc->sig_recv == NULL);
	f->svc->sig_recv = f->sig_recv; /* subscribed again, as far as the next test can tell */
	brokerd_slot_free(s_direct);
}

static uint64_t lost_seen;
static unsigned int lost_calls, lost_at_n;

static void on_lost(brokerd_slot *slot, uint64_t n, void *userdata)
{
	struct seen *s = userdata;

	lost_seen += n;
	lost_calls++;
	lost_at_n = s->n;
}

/*
 * Loss is never silent: the kernel's lost count on a signal channel reaches
 * every subscription of that name (its counter and lost handler, before the
 * message that told of it) and the bus's counter, not the subscriptions of
 * other names, nor slots that cannot lose messages.
 */
static void test_lost(struct fixture *f)
{
	struct seen a = { 0 }, b = { 0 }, direct = { 0 };
	struct chmsg sig = {
		.type = CHMSG_SIGNAL, .serial = 9, .path = "/", .interface = "org.test.Iface", .member = "Tick"
	};
	static uint8_t body[64];
	brokerd_slot *s_a = NULL, *s_b = NULL, *s_direct = NULL, *s_method = NULL;
	uint64_t n, before = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_LOST);

	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_a, SVC, "Tick", on_msg, &a), ==, 0);
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_b, SVC, "Tock", on_msg, &b), ==, 0);
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_direct, NULL, NULL, on_msg, &direct), ==, 0);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &s_method, SVC, "M", on_msg, &a), ==, 0);
	ASSERT_INT(brokerd_slot_set_lost_handler(s_a, on_lost), ==, 0);
	ASSERT_INT(brokerd_slot_set_lost_handler(s_method, on_lost), ==, -EOPNOTSUPP);
	ASSERT_INT(brokerd_slot_set_lost_handler(NULL, on_lost), ==, -EINVAL);
	ASSERT_INT(brokerd_slot_get_lost(s_method, &n), ==, -EOPNOTSUPP);
	ASSERT_INT(brokerd_slot_get_lost(s_a, NULL), ==, -EINVAL);

	set_bytes(&sig, "ay", "1", body);
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(a.n, ==, 1);
	ASSERT_INT(brokerd_slot_get_lost(s_a, &n), ==, 0);
	ASSERT(n == 0 && lost_calls == 0);

	next_lost = 5;
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(a.n, ==, 2);
	ASSERT(lost_seen == 5 && lost_calls == 1);
	ASSERT_INT(lost_at_n, ==, 1); /* told before the message that told of the loss */
	ASSERT_INT(brokerd_slot_get_lost(s_a, &n), ==, 0);
	ASSERT(n == 5);
	/* b's filter would not have taken a Tick, but who knows what was lost */
	ASSERT_INT(brokerd_slot_get_lost(s_b, &n), ==, 0);
	ASSERT(n == 5);
	ASSERT_INT(brokerd_slot_get_lost(s_direct, &n), ==, 0);
	ASSERT(n == 0);
	ASSERT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_LOST) == before + 5);

	/* a malformed message after a loss: dropped, the loss still counted */
	next_lost = 2;
	receive_raw(f->sig_recv, "junk", 4, 4, PEER_BADGE);
	bus_dispatch_chan(f->bus, f->sig_recv);
	ASSERT_INT(a.n, ==, 2);
	ASSERT_INT(brokerd_slot_get_lost(s_a, &n), ==, 0);
	ASSERT(n == 7 && lost_seen == 7);
	ASSERT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_LOST) == before + 7);

	brokerd_slot_free(s_method);
	brokerd_slot_free(s_direct);
	brokerd_slot_free(s_b);
	brokerd_slot_free(s_a);
	f->svc->sig_recv = f->sig_recv;
}

/* --- Reading in place ----------------------------------------------------------- */

/* A chan as chan_set_multishot() leaves it, without a kernel: nbufs provided buffers, a receive posted. */
static struct chan *multishot_new(unsigned int kind, void *owner, unsigned int nbufs)
{
	struct chan *c = chan_new(kind, IOIPC_SUB_RECV, owner);

	free(c->buf);
	c->buf_size = sizeof(struct ioipc_msg_info) + CHMSG_MAX + 8;
	c->nbufs = nbufs;
	c->bufs = calloc(nbufs, c->buf_size);
	c->br = calloc(nbufs, sizeof(struct io_uring_buf));
	c->done = calloc(nbufs + 1, sizeof(*c->done));
	ASSERT(c->bufs && c->br && c->done);
	c->buf = c->bufs;
	c->multishot = true;
	c->armed = true;
	c->cur_bid = -1;
	return c;
}

static void multishot_free(struct chan *c)
{
	free(c->bufs);
	free(c->br);
	free(c->done);
	free(c);
}

/* The kernel's completion of m into buffer bid, made c's current message and dispatched. */
static void deliver_in(brokerd_bus *bus, struct chan *c, int bid, const struct chmsg *m)
{
	c->cur = c->bufs + (size_t)bid * c->buf_size;
	c->cur_bid = bid;
	c->has_cur = true;
	c->buf = c->cur; /* where encode_receive() writes */
	encode_receive(c, m, PEER_BADGE);
	bus_dispatch_chan(bus, c);
	/* what chan_arm() does (wrapped here): done with the current message */
	c->has_cur = false;
	c->cur = NULL;
}

struct in_place {
	const struct chan *c;
	brokerd_msg *msg, *kept;
	bool in_buffer;
	unsigned int n;
};

static int on_in_place(brokerd_msg *msg, void *userdata)
{
	struct in_place *ip = userdata;
	const void *body;
	size_t size;

	ASSERT_INT(brokerd_msg_get_body(msg, &body, &size), ==, 0);
	ip->in_buffer = (const uint8_t *)body >= ip->c->bufs &&
			(const uint8_t *)body < ip->c->bufs + ip->c->nbufs * ip->c->buf_size;
	ip->msg = msg;
	ip->n++;
	if (size == 4 && memcmp(body, "keep", 4) == 0)
		ip->kept = brokerd_msg_ref(msg);
	if (strcmp(brokerd_msg_get_signature(msg), "su") == 0) {
		const char *first;

		/* a typed read under way when the message is kept goes on in the copy */
		ASSERT_INT(brokerd_msg_read(msg, "s", &first), >=, 0);
		ASSERT(strcmp(first, "first") == 0);
		ip->kept = brokerd_msg_ref(msg);
	}
	return 0;
}

/*
 * A message from a multishot receive is read where the kernel put it: the
 * handler's body points into the receive buffer, the buffer goes back to
 * the kernel when the dispatch ends, and the message struct is reused for
 * the next message (no allocation). One a handler keeps is copied out
 * once, and survives its buffer being reused.
 */
static void test_in_place(struct fixture *f)
{
	struct chan *c = multishot_new(CHAN_SIGNAL_RECV, f->svc, 2);
	struct chmsg sig = {
		.type = CHMSG_SIGNAL, .serial = 3, .path = "/", .interface = "org.test.Iface", .member = "Tick"
	};
	struct in_place ip = { .c = c };
	static uint8_t body[64];
	brokerd_slot *s = NULL;
	brokerd_msg *first;
	const void *b;
	size_t size;

	f->svc->sig_recv = c;
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s, SVC, NULL, on_in_place, &ip), ==, 0);

	set_bytes(&sig, "ay", "one", body);
	deliver_in(f->bus, c, 0, &sig);
	ASSERT(ip.n == 1 && ip.in_buffer);
	ASSERT_INT(c->holds, ==, 0);
	ASSERT_INT(c->br->tail, ==, 1); /* buffer 0 given back */
	first = ip.msg;

	set_bytes(&sig, "ay", "two", body);
	deliver_in(f->bus, c, 1, &sig);
	ASSERT(ip.n == 2 && ip.in_buffer);
	ASSERT(ip.msg == first); /* the same struct: nothing allocated per message */
	ASSERT_INT(c->br->tail, ==, 2);

	/* kept: copied out, its buffer back at once, intact when the buffer is reused */
	set_bytes(&sig, "ay", "keep", body);
	deliver_in(f->bus, c, 0, &sig);
	ASSERT(ip.n == 3 && ip.in_buffer && ip.kept);
	ASSERT_INT(c->holds, ==, 0);
	ASSERT_INT(c->br->tail, ==, 3);
	memset(c->bufs, 'X', c->nbufs * c->buf_size);
	ASSERT_INT(brokerd_msg_get_body(ip.kept, &b, &size), ==, 0);
	ASSERT(size == 4 && memcmp(b, "keep", 4) == 0);
	ASSERT(strcmp(brokerd_msg_get_member(ip.kept), "Tick") == 0);
	ASSERT(strcmp(brokerd_msg_get_path(ip.kept), "/") == 0);
	ASSERT(strcmp(brokerd_msg_get_signature(ip.kept), "ay") == 0);
	ASSERT(strcmp(brokerd_msg_get_name(ip.kept), SVC) == 0);
	ASSERT(strcmp(brokerd_msg_get_sender(ip.kept), PEER_NAME) == 0);
	brokerd_msg_unref(ip.kept);

	{
		static const uint8_t su[] = { 5, 0, 0, 0, 'f', 'i', 'r', 's', 't', 0, 0, 0, 42, 0, 0, 0 };
		uint32_t u = 0;

		ip.kept = NULL;
		sig.signature = "su";
		sig.body = su;
		sig.body_len = sizeof(su);
		deliver_in(f->bus, c, 1, &sig);
		ASSERT(ip.kept && c->holds == 0);
		memset(c->bufs, 'X', c->nbufs * c->buf_size);
		ASSERT_INT(brokerd_msg_read(ip.kept, "u", &u), >=, 0);
		ASSERT_INT(u, ==, 42);
		brokerd_msg_unref(ip.kept);
	}

	brokerd_slot_free(s);
	multishot_free(c);
	f->svc->sig_recv = f->sig_recv;
}

/* The body "s" of one string (native byte order). */
static void set_string(struct chmsg *m, const char *text, uint8_t *buf)
{
	set_bytes(m, "s", text, buf);
}

/*
 * Match rules: identical rules (whatever their spelling) share one filter
 * and one subscription; each slot of a matching rule is called; argN is
 * read from the body; the last slot ends the subscription.
 */
static void test_match(struct fixture *f)
{
	struct seen a = { 0 }, b = { 0 }, cpu = { 0 };
	struct chmsg sig = { .type = CHMSG_SIGNAL,
			     .serial = 11,
			     .path = "/org/test/obj",
			     .interface = "org.test.Iface",
			     .member = "Changed" };
	static uint8_t body[64];
	brokerd_slot *s_a = NULL, *s_b = NULL, *s_cpu = NULL, *s_bad = NULL;
	unsigned int subs = f->svc->n_subs;

	ASSERT_INT(brokerd_bus_add_match(f->bus, &s_bad, "type='signal", on_msg, &a), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_add_match(f->bus, &s_bad, "eavesdrop='true'", on_msg, &a), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_add_match(f->bus, &s_bad, "", NULL, &a), ==, -EINVAL);
	ASSERT_INT(brokerd_bus_add_match(NULL, &s_bad, "", on_msg, &a), ==, -EINVAL);
	/* without a sender the bus must ask brokerd, and there is none here */
	ASSERT(brokerd_bus_add_match(f->bus, &s_bad, "member='Changed'", on_msg, &a) < 0);
	ASSERT(f->bus->matches == NULL && f->bus->n_watch_matches == 0);

	ASSERT_INT(brokerd_bus_add_match(f->bus, &s_a,
					 "type='signal',sender='" SVC "',path_namespace='/org/test'", on_msg,
					 &a),
		   ==, 0);
	ASSERT_INT(brokerd_bus_add_match(f->bus, &s_b, "path_namespace=/org/test,sender=" SVC ",type=signal",
					 on_msg, &b),
		   ==, 0);
	ASSERT(f->bus->matches && !f->bus->matches->next);
	ASSERT_INT(f->bus->matches->n_slots, ==, 2);
	ASSERT_INT(f->svc->n_subs, ==, subs + 1);
	ASSERT_INT(brokerd_bus_add_match(f->bus, &s_cpu, "sender='" SVC "',arg0='cpu'", on_msg, &cpu), ==, 0);
	ASSERT_INT(f->svc->n_subs, ==, subs + 2);

	set_string(&sig, "cpu", body);
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(a.n, ==, 1);
	ASSERT_INT(b.n, ==, 1);
	ASSERT_INT(cpu.n, ==, 1);
	set_string(&sig, "gpu", body);
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(a.n, ==, 2);
	ASSERT_INT(cpu.n, ==, 1); /* arg0 is "gpu" */
	sig.path = "/org/testing";
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(a.n + b.n + cpu.n, ==, 5);
	/* on the inbox, nothing came on the name's channel: sender='SVC' does not match */
	sig.path = "/org/test";
	sig.destination = ":1.1";
	set_string(&sig, "cpu", body);
	deliver(f->bus, f->inbox, &sig);
	ASSERT_INT(a.n + b.n + cpu.n, ==, 5);

	/* one slot of the shared rule goes: the rule and its subscription stay */
	brokerd_slot_free(s_a);
	ASSERT_INT(f->bus->matches->next->n_slots, ==, 1);
	ASSERT_INT(f->svc->n_subs, ==, subs + 2);
	sig.destination = "";
	deliver(f->bus, f->sig_recv, &sig);
	ASSERT_INT(a.n, ==, 2);
	ASSERT_INT(b.n, ==, 3);
	ASSERT_INT(cpu.n, ==, 2);
	brokerd_slot_free(s_b);
	brokerd_slot_free(s_cpu);
	ASSERT(f->bus->matches == NULL);
	ASSERT_INT(f->svc->n_subs, ==, subs);
	f->svc->sig_recv = f->sig_recv; /* subscribed again, as far as the next test can tell */
}

/* Replies and errors on the inbox complete the pending call of their serial. */
static void test_reply(struct fixture *f)
{
	struct seen a = { 0 }, b = { 0 };
	struct chmsg r = { .type = CHMSG_REPLY, .serial = 100, .member = "", .destination = ":1.1" };
	static uint8_t body[64];
	uint32_t serial_a, serial_b;
	uint64_t unexpected = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_UNEXPECTED_REPLY);
	uint64_t forged = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_FORGED_REPLY);
	struct chmsg c;

	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, SVC, "Ping", "a", 1, 0, on_reply, &a), ==, 0);
	c = last_sent();
	ASSERT(sent.chan == f->call_send);
	ASSERT_INT(c.type, ==, CHMSG_CALL);
	ASSERT(strcmp(c.member, "Ping") == 0 && strcmp(c.path, "/") == 0);
	ASSERT(body_is(&c, "a"));
	serial_a = c.serial;
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, SVC, "Ping", "b", 1, 0, on_reply, &b), ==, 0);
	serial_b = last_sent().serial;
	ASSERT(serial_a != serial_b);

	/* brokerd said, after the calls went out, that the peer serves the name */
	f->svc->receivers[0] = PEER_BADGE;
	f->svc->n_receivers = 1;
	f->svc->receivers_usec = now_usec();

	/* a reply nobody asked for completes nothing, and is counted */
	set_bytes(&r, "ay", "pong", body);
	r.reply_serial = serial_b + 1000;
	deliver(f->bus, f->inbox, &r);
	ASSERT_INT(a.n + b.n, ==, 0);
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_UNEXPECTED_REPLY), ==, unexpected + 1);

	/* the right serial from a connection that did not take the call: dropped, counted */
	set_bytes(&r, "ay", "forged", body);
	r.reply_serial = serial_b;
	encode_receive(f->inbox, &r, PEER_BADGE + 1);
	bus_dispatch_chan(f->bus, f->inbox);
	encode_receive(f->inbox, &r, 0); /* no badge at all */
	bus_dispatch_chan(f->bus, f->inbox);
	ASSERT_INT(a.n + b.n, ==, 0);
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_FORGED_REPLY), ==, forged + 2);

	/* b's reply completes b, not a */
	set_bytes(&r, "ay", "pong", body);
	deliver(f->bus, f->inbox, &r);
	ASSERT_INT(b.n, ==, 1);
	ASSERT_INT(a.n, ==, 0);
	ASSERT_INT(b.error, ==, 0);
	ASSERT(strcmp(b.body, "pong") == 0);
	ASSERT(strcmp(b.sender, PEER_NAME) == 0);

	/* once: a second reply to b is dropped */
	deliver(f->bus, f->inbox, &r);
	ASSERT_INT(b.n, ==, 1);

	/* an error for a: -EREMOTEIO, the error name as the member */
	r.type = CHMSG_ERROR;
	r.error_name = "org.test.Error.Nope";
	set_bytes(&r, "s", "no", body);
	r.reply_serial = serial_a;
	deliver(f->bus, f->inbox, &r);
	ASSERT_INT(a.n, ==, 1);
	ASSERT_INT(a.error, ==, -EREMOTEIO);
	ASSERT(strcmp(a.member, "org.test.Error.Nope") == 0);
	ASSERT(strcmp(a.body, "no") == 0);
}

/* Malformed or truncated messages are dropped: no handler runs, nothing is sent. */
static void test_malformed(struct fixture *f)
{
	static const uint8_t garbage[] = { 0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
					   0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
					   0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19 };
	static struct seen reply; /* still pending when the bus closes */
	struct seen any = { 0 }, call = { 0 };
	struct chmsg m = { .type = CHMSG_CALL, .serial = 5, .path = "/", .member = "Echo" };
	static uint8_t body[64];
	uint64_t invalid = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_INVALID);
	brokerd_slot *s_sig = NULL, *s_method = NULL;
	static uint8_t buf[CHMSG_MAX];
	unsigned int armed, n_sent;
	int k;

	set_bytes(&m, "ay", "x", body);
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_sig, SVC, NULL, on_msg, &any), ==, 0);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &s_method, SVC, NULL, on_msg, &call), ==, 0);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, SVC, "Ping", NULL, 0, 0, on_reply, &reply), ==, 0);
	n_sent = sent.n;

	/* garbage on each kind of chan */
	receive_raw(f->sig_recv, garbage, sizeof(garbage), sizeof(garbage), PEER_BADGE);
	bus_dispatch_chan(f->bus, f->sig_recv);
	receive_raw(f->inbox, garbage, sizeof(garbage), sizeof(garbage), PEER_BADGE);
	bus_dispatch_chan(f->bus, f->inbox);
	armed = n_armed;
	receive_raw(f->call_recv, garbage, sizeof(garbage), sizeof(garbage), PEER_BADGE);
	bus_dispatch_chan(f->bus, f->call_recv);
	ASSERT_INT(n_armed, ==, armed + 1); /* a malformed call: take the next one */

	/* a well-formed call, truncated by the kernel (longer than the buffer said) */
	k = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(k > 0);
	receive_raw(f->call_recv, buf, (size_t)k - 1, (uint32_t)k + 100, PEER_BADGE);
	bus_dispatch_chan(f->bus, f->call_recv);

	/* shorter than the kernel's info header */
	f->inbox->res = 10;
	bus_dispatch_chan(f->bus, f->inbox);

	/* a header that is fine, with a body that does not follow its signature */
	k = chmsg_encode(&m, buf, sizeof(buf));
	ASSERT(k > 0);
	buf[k - 5] = 9; /* the array's length: more bytes than the body has */
	receive_raw(f->call_recv, buf, (size_t)k, (uint32_t)k, PEER_BADGE);
	bus_dispatch_chan(f->bus, f->call_recv);

	/* none reached a handler, each was counted */
	ASSERT_INT(any.n + call.n + reply.n, ==, 0);
	ASSERT_INT(sent.n, ==, n_sent);
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_INVALID), ==, invalid + 6);
	ASSERT_INT(brokerd_bus_get_counter(NULL, BROKERD_COUNTER_INVALID), ==, 0);
	ASSERT_INT(brokerd_bus_get_counter(f->bus, _BROKERD_COUNTER_MAX), ==, 0);

	/* and the bus still works: the same call, whole, is served */
	deliver(f->bus, f->call_recv, &m);
	ASSERT_INT(call.n, ==, 1);
	ASSERT_INT(sent.n, ==, n_sent + 1);
	brokerd_slot_free(s_sig);
	brokerd_slot_free(s_method);
}

/* A broker signal: NameOwnerChanged reaches the watches and fails the calls to a
 * name that lost its last owner; CallReceiverLost fails the calls sent before it. */
static void test_ctrl(struct fixture *f)
{
	struct seen pending = { 0 };
	struct ctrl_writer w;
	brokerd_slot *watch = NULL;
	const void *data;
	size_t len;
	unsigned int closed;
	uint64_t stale;

	ASSERT_INT(brokerd_bus_watch_name(f->bus, &watch, SVC, on_owner_changed, NULL), ==, 0);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, SVC, "Hang", NULL, 0, 0, on_reply, &pending), ==, 0);

	/* garbage is dropped */
	ASSERT_INT(bus_dispatch_ctrl(f->bus, (const uint8_t *)"garbage", 7, NULL, 0, ++f->bus->ctrl_seq), ==,
		   1);
	ASSERT_INT(noc.n + pending.n, ==, 0);

	/*
	 * A signal channel handed over after the watch ended (brokerd had not
	 * seen UNWATCH_SIGNALS yet): closed, and brokerd told to forget it.
	 */
	{
		uint8_t buf[CTRL_MSG_MAX];
		struct ctrl_message m;
		struct ctrl_reader rd;
		const char *name = NULL;
		int p[2], sp[2], fd;
		ssize_t n;

		ASSERT_INT(pipe2(p, O_CLOEXEC), ==, 0);
		close(p[1]);
		fd = p[0];
		ASSERT_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), ==, 0);
		f->bus->ctrl_fd = sp[0];
		ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_SIGNAL_CHANNEL, 0), ==, 0);
		ctrl_write_string(&w, "org.test.Late");
		ctrl_write_fd(&w, fd);
		ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
		ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, &fd, 1, ++f->bus->ctrl_seq), ==, 1);
		ctrl_writer_deinit(&w);
		ASSERT(fcntl(p[0], F_GETFD) < 0 && errno == EBADF);
		ASSERT(!bname_get(f->bus, "org.test.Late", false));
		n = recv(sp[1], buf, sizeof(buf), MSG_DONTWAIT);
		ASSERT(n > 0);
		ASSERT_INT(ctrl_message_decode(&m, buf, (size_t)n, 0), ==, 0);
		ASSERT_INT(m.hdr.code, ==, CTRL_OP_UNSUBSCRIBE);
		ctrl_reader_init(&rd, &m);
		ASSERT(ctrl_read_string(&rd, &name, NULL) == 0 && strcmp(name, "org.test.Late") == 0);
		f->bus->ctrl_fd = -1;
		close(sp[0]);
		close(sp[1]);
	}

	/* another name changing hands is not ours to hear */
	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0), ==, 0);
	ctrl_write_string(&w, "org.test.Other");
	ctrl_write_string(&w, "");
	ctrl_write_string(&w, ":1.9");
	ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
	ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, ++f->bus->ctrl_seq), ==, 1);
	ctrl_writer_deinit(&w);
	ASSERT_INT(noc.n + pending.n, ==, 0);

	closed = n_closed;
	svc_owner_gone(f);
	ASSERT_INT(noc.n, ==, 1);
	ASSERT(strcmp(noc.name, SVC) == 0);
	ASSERT(strcmp(noc_old, PEER_NAME) == 0 && strcmp(noc_new, "") == 0);
	/* the server is gone: so is the call it was serving, and the call chan */
	ASSERT_INT(pending.n, ==, 1);
	ASSERT_INT(pending.error, ==, -ECONNRESET);
	ASSERT(f->svc->call_send == NULL);
	ASSERT_INT(n_closed, ==, closed + 1);
	f->svc->call_send = f->call_send; /* the test's to free */

	/* a new owner takes the name's calls: its replies will be accepted */
	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0), ==, 0);
	ctrl_write_string(&w, SVC);
	ctrl_write_string(&w, "");
	ctrl_write_string(&w, ":1.11");
	ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
	ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, ++f->bus->ctrl_seq), ==, 1);
	ctrl_writer_deinit(&w);
	ASSERT(f->svc->n_receivers >= 1 && f->svc->receivers[f->svc->n_receivers - 1] == 12);

	/*
	 * CallReceiverLost read, but still queued, when a call went out: that
	 * call cannot have been the lost receiver's, so it keeps waiting; one
	 * read after the call fails it.
	 */
	pending = (struct seen){ 0 };
	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CALL_RECEIVER_LOST, 0), ==, 0);
	ctrl_write_string(&w, SVC);
	ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
	stale = ++f->bus->ctrl_seq;
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, SVC, "Hang", NULL, 0, 0, on_reply, &pending), ==, 0);
	ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, stale), ==, 1);
	ASSERT_INT(pending.n, ==, 0);
	ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, ++f->bus->ctrl_seq), ==, 1);
	ctrl_writer_deinit(&w);
	ASSERT_INT(pending.n, ==, 1);
	ASSERT_INT(pending.error, ==, -ECONNRESET);

	/*
	 * CallReceiverEnded: the calls sent before it are marked, not failed,
	 * so that a reply already in the inbox still wins; the rest fail at
	 * the end of the pass with a NoReply error naming the receiver. A
	 * call sent after it keeps waiting.
	 */
	{
		struct seen won = { 0 }, lost = { 0 }, later = { 0 }, after = { 0 };
		struct chmsg r = { .type = CHMSG_REPLY, .serial = 300, .member = "", .destination = ":1.1" };
		static uint8_t body[64];
		brokerd_slot *won_slot, *lost_slot, *later_slot, *after_slot;
		uint32_t won_serial;

		f->svc->receivers[0] = PEER_BADGE;
		f->svc->n_receivers = 1;
		f->svc->receivers_usec = now_usec();
		ASSERT_INT(brokerd_bus_call_async(f->bus, &won_slot, SVC, "Hang", NULL, 0, 0, on_reply, &won), ==,
			   0);
		won_serial = last_sent().serial;
		ASSERT_INT(brokerd_bus_call_async(f->bus, &lost_slot, SVC, "Hang", NULL, 0, 0, on_local_reply,
						  &lost),
			   ==, 0);
		/* brokerd revoked the receiver now (a clock tick after the calls were sent:
		 * in the same microsecond the test would be flaky); unread, the signal
		 * waits behind a call sent after */
		usleep(1000);
		ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CALL_RECEIVER_ENDED, 0), ==, 0);
		ctrl_write_string(&w, SVC);
		ctrl_write_string(&w, PEER_NAME);
		ctrl_write_u64(&w, now_usec());
		ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
		usleep(1000);
		ASSERT_INT(brokerd_bus_call_async(f->bus, &after_slot, SVC, "Hang", NULL, 0, 0, on_reply, &after),
			   ==, 0);
		ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, ++f->bus->ctrl_seq), ==, 1);
		ctrl_writer_deinit(&w);
		ASSERT_INT(brokerd_bus_call_async(f->bus, &later_slot, SVC, "Hang", NULL, 0, 0, on_reply, &later),
			   ==, 0);
		ASSERT_INT(won.n + lost.n + later.n + after.n, ==, 0);
		ASSERT(won_slot->ended_receiver == PEER_BADGE && lost_slot->ended_receiver == PEER_BADGE);
		ASSERT(won_slot->deadline <= now_usec() && lost_slot->deadline <= now_usec());
		ASSERT(!later_slot->ended_receiver && later_slot->deadline > now_usec());
		ASSERT(!after_slot->ended_receiver && after_slot->deadline > now_usec());

		/* the reply read in the same pass wins */
		set_bytes(&r, "ay", "pong", body);
		r.reply_serial = won_serial;
		deliver(f->bus, f->inbox, &r);
		ASSERT_INT(won.n, ==, 1);
		ASSERT_INT(won.error, ==, 0);
		ASSERT(strcmp(won.body, "pong") == 0);

		/* the end of the pass: the deadline that came due */
		bus_dispatch_receiver_ended(f->bus, lost_slot);
		ASSERT_INT(lost.n, ==, 1);
		ASSERT_INT(lost.error, ==, -EREMOTEIO);
		ASSERT(strcmp(lost.member, BROKERD_ERROR_NO_REPLY) == 0);
		ASSERT(strncmp(lost.body, "receiver ended: " PEER_NAME ",", strlen("receiver ended: " PEER_NAME ",")) == 0);
		ASSERT_INT(later.n + after.n, ==, 0);
		brokerd_slot_free(after_slot);
		brokerd_slot_free(won_slot);
		brokerd_slot_free(lost_slot);
		brokerd_slot_free(later_slot);
	}
	brokerd_slot_free(watch);
}

/* A reply from the peer (its badge), stamped with pid, to the call with serial. */
static void reply_from(struct fixture *f, uint32_t serial, uint32_t pid, const char *text)
{
	struct chmsg r = { .type = CHMSG_REPLY, .serial = 400, .member = "", .destination = ":1.1" };
	static uint8_t body[64];

	set_bytes(&r, "ay", text, body);
	r.reply_serial = serial;
	recv_pid = pid;
	deliver(f->bus, f->inbox, &r);
	recv_pid = 4242;
}

/* CallReceiverEnded for SVC's receiver PEER_NAME, with its pid (`sstu`) or without (pid < 0: `sst`). */
static void receiver_ended(struct fixture *f, int pid)
{
	struct ctrl_writer w;
	const void *data;
	size_t len;

	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_CALL_RECEIVER_ENDED, 0), ==, 0);
	ctrl_write_string(&w, SVC);
	ctrl_write_string(&w, PEER_NAME);
	ctrl_write_u64(&w, now_usec());
	if (pid >= 0)
		ctrl_write_u32(&w, (uint32_t)pid);
	ASSERT_INT(ctrl_writer_finish(&w, &data, &len), ==, 0);
	ASSERT_INT(bus_dispatch_ctrl(f->bus, data, len, NULL, 0, ++f->bus->ctrl_seq), ==, 1);
	ctrl_writer_deinit(&w);
}

/*
 * Receipts (IOIPC_SEND_RECEIPT): the kernel names the process that took a
 * call. Only a reply stamped with its pid answers it, one that comes before
 * the receipt waits in the slot for it, a call the kernel dropped untaken
 * fails at once, and CallReceiverEnded with a pid fails only the calls that
 * process took: not those another worker took, nor those nobody took yet.
 */
/*
 * Makes n calls to SVC's Hang with receipts on (PEER_BADGE its receiver):
 * their slots, outcomes and serials into slots, seen and serial; the calls
 * in local (a bit per call) expect an error the library made.
 */
static void receipt_calls(struct fixture *f, unsigned int n, brokerd_slot **slots[], struct seen *seen[],
			  uint32_t *serial, unsigned int local)
{
	f->svc->receivers[0] = PEER_BADGE;
	f->svc->n_receivers = 1;
	f->svc->receivers_usec = now_usec();
	receipts_on = true;
	for (unsigned int i = 0; i < n; i++) {
		ASSERT_INT(brokerd_bus_call_async(f->bus, slots[i], SVC, "Hang", NULL, 0, 0,
						  local & (1U << i) ? on_local_reply : on_reply, seen[i]),
			   ==, 0);
		serial[i] = last_sent().serial;
		ASSERT_INT((*slots[i])->receipt, ==, RECEIPT_PENDING);
	}
}

/* A child that sleeps until killed (reap()): a live process to name in receipts. */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0) {
		/* not left behind by a test that failed */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return pid;
}

static void reap(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
}

/* Waits up to a second until a watched process's end can be read, then reads it. */
static void takers_end_seen(brokerd_bus *bus)
{
	struct pollfd p = { .fd = bus->taker_epfd, .events = POLLIN };

	ASSERT_INT(poll(&p, 1, 1000), ==, 1);
	bus->takers_ready = true;
	bus_takers_check(bus);
}

static void test_receipts(struct fixture *f)
{
	struct seen a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 }, e = { 0 }, g = { 0 }, h = { 0 };
	brokerd_slot *sa, *sb, *sc, *sd, *se, *sg, *sh;
	uint32_t serial[7];
	uint64_t forged = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_FORGED_REPLY);
	struct seen *seen[] = { &a, &b, &c, &d, &e, &g, &h };
	brokerd_slot **slots[] = { &sa, &sb, &sc, &sd, &se, &sg, &sh };
	struct ring *ring = &f->bus->ring;
	/* the takers: live processes, each watched through a pidfd (bus-taker.c) */
	pid_t w[3] = { sleeper(), sleeper(), sleeper() };

	receipt_calls(f, ELEMENTSOF(serial), slots, seen, serial, 1U << 3);
	ASSERT(ring->on_receipt && ring->receipt_userdata == f->bus);

	/* a: its reply came before its receipt: kept, then answered once the receipt names its sender */
	reply_from(f, serial[0], w[0], "pong-a");
	ASSERT_INT(a.n, ==, 0);
	ASSERT_INT(sa->n_held, ==, 1);
	ring->on_receipt(ring->receipt_userdata, serial[0], w[0]);
	ASSERT(sa->receipt == RECEIPT_TAKEN && sa->taker == w[0] && sa->deadline <= now_usec());
	ASSERT_INT(bus_call_due(f->bus, sa), ==, 1);
	ASSERT_INT(a.n, ==, 1);
	ASSERT_INT(a.error, ==, 0);
	ASSERT(strcmp(a.body, "pong-a") == 0);

	/* b: taken by w[1]; another worker of the pool (a receiver's badge, pid w[0]) cannot answer it */
	ring->on_receipt(ring->receipt_userdata, serial[1], w[1]);
	reply_from(f, serial[1], w[0], "forged");
	ASSERT_INT(b.n, ==, 0);
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_FORGED_REPLY), ==, forged + 1);
	reply_from(f, serial[1], w[1], "pong-b");
	ASSERT_INT(b.n, ==, 1);
	ASSERT(strcmp(b.body, "pong-b") == 0);
	/* and a forgery kept before the receipt is dropped once it came */
	reply_from(f, serial[6], w[0], "forged");
	ring->on_receipt(ring->receipt_userdata, serial[6], w[1]);
	ASSERT_INT(bus_call_due(f->bus, sh), ==, 0);
	ASSERT_INT(h.n, ==, 0);
	ASSERT_INT(sh->n_held, ==, 0);
	ASSERT(sh->deadline > now_usec());
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_FORGED_REPLY), ==, forged + 2);

	/* c: dropped in the kernel, untaken (its channel gone, no receiver left): fails at once */
	ring->on_receipt(ring->receipt_userdata, serial[2], -EPIPE);
	ASSERT(sc->deadline <= now_usec());
	ASSERT_INT(bus_call_due(f->bus, sc), ==, 1);
	ASSERT_INT(c.n, ==, 1);
	ASSERT_INT(c.error, ==, -ECONNRESET);

	/* d taken by w[1], e by w[2], g by nobody yet: the receiver w[1] ended */
	ring->on_receipt(ring->receipt_userdata, serial[3], w[1]);
	ring->on_receipt(ring->receipt_userdata, serial[4], w[2]);
	usleep(1000);
	receiver_ended(f, (int)w[1]);
	ASSERT(sd->ended_receiver == PEER_BADGE && sd->ended_pid == w[1]);
	ASSERT(!se->ended_receiver && se->deadline > now_usec());
	ASSERT(sg->ended_receiver && sg->deadline <= now_usec()); /* looked at: its receipt may be unread */
	ASSERT_INT(bus_call_due(f->bus, sd), ==, 2);
	bus_dispatch_receiver_ended(f->bus, sd);
	ASSERT_INT(d.n, ==, 1);
	ASSERT_INT(d.error, ==, -EREMOTEIO);
	ASSERT_INT(bus_call_due(f->bus, sg), ==, 0);
	ASSERT(!sg->ended_receiver && sg->deadline > now_usec());
	ASSERT_INT(e.n + g.n, ==, 0);
	/* a brokerd that does not tell the pid: the calls taken, by anyone, fail as before */
	usleep(1000);
	receiver_ended(f, -1);
	ASSERT(se->ended_receiver && !se->ended_pid);
	ASSERT_INT(bus_call_due(f->bus, se), ==, 2);
	ASSERT_INT(bus_call_due(f->bus, sg), ==, 0); /* untaken still */
	ASSERT_INT(e.n + g.n, ==, 0);

	receipts_on = false;
	for (unsigned int i = 0; i < ELEMENTSOF(serial); i++)
		brokerd_slot_free(*slots[i]);
	/* their pidfds were kept idle, for the next calls they take */
	ASSERT(f->bus->takers && f->bus->n_takers_idle > 0);
	bus_takers_free(f->bus);
	for (unsigned int i = 0; i < ELEMENTSOF(w); i++)
		reap(w[i]);
}


/*
 * The processes receipts name, watched: one pidfd per process, shared by
 * the calls it took; when it ends (whether reaped or a zombie), those calls
 * fail with NoReply naming it, but a reply it sent first still answers its
 * call; a receipt naming a process gone already fails its call at once; an
 * idle pidfd is kept for the next call until its process ends. When the
 * name's last owner goes, a call taken fails the same way (NoReply), one
 * nobody took with -ECONNRESET.
 */
static void test_takers(struct fixture *f)
{
	struct seen a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	brokerd_slot *sa, *sb, *sc, *sd;
	struct seen *seen[] = { &a, &b, &c, &d };
	brokerd_slot **slots[] = { &sa, &sb, &sc, &sd };
	uint32_t serial[4];
	struct ring *ring = &f->bus->ring;
	pid_t pa = sleeper(), pb = sleeper(), gone = sleeper();
	char want[64];

	receipt_calls(f, ELEMENTSOF(serial), slots, seen, serial, 1U << 0 | 1U << 3);
	reap(gone);
	ring->on_receipt(ring->receipt_userdata, serial[0], pa);
	ring->on_receipt(ring->receipt_userdata, serial[1], pa);
	ring->on_receipt(ring->receipt_userdata, serial[2], pb);
	ASSERT(sa->watch && sa->watch == sb->watch && sa->watch->n_calls == 2);
	ASSERT(sc->watch && sc->watch != sa->watch && sc->watch->pidfd >= 0);
	ASSERT(sa->deadline > now_usec() && sc->deadline > now_usec());

	/* d: its taker was gone when the receipt was read */
	ring->on_receipt(ring->receipt_userdata, serial[3], gone);
	ASSERT(sd->watch && sd->watch->ended && sd->deadline <= now_usec());
	ASSERT_INT(bus_call_due(f->bus, sd), ==, 2);
	bus_dispatch_receiver_ended(f->bus, sd);
	ASSERT_INT(d.error, ==, -EREMOTEIO);

	/* pa ends (and is reaped): a and b are marked, c (pb's) is not */
	reap(pa);
	takers_end_seen(f->bus);
	ASSERT(sa->watch->ended && sa->deadline <= now_usec() && sb->deadline <= now_usec());
	ASSERT(!sc->watch->ended && sc->deadline > now_usec());
	/* b's reply, sent before pa ended, is dispatched first: it wins */
	reply_from(f, serial[1], (uint32_t)pa, "pong-b");
	ASSERT_INT(b.n, ==, 1);
	ASSERT_INT(b.error, ==, 0);
	ASSERT_INT(bus_call_due(f->bus, sa), ==, 2);
	bus_dispatch_receiver_ended(f->bus, sa);
	ASSERT_INT(a.n, ==, 1);
	ASSERT_INT(a.error, ==, -EREMOTEIO);
	snprintf(want, sizeof(want), "receiver ended: process %d, a receiver of %s", (int)pa, SVC);
	ASSERT(strcmp(a.member, BROKERD_ERROR_NO_REPLY) == 0);
	ASSERT(strncmp(a.body, want, strlen(want)) == 0);

	/* c answered: pb's pidfd is kept idle; pb ends unreaped (a zombie): the pidfd goes */
	reply_from(f, serial[2], (uint32_t)pb, "pong-c");
	ASSERT_INT(c.n, ==, 1);
	ASSERT_INT(c.error, ==, 0);
	ASSERT(f->bus->takers && !f->bus->takers->next && f->bus->takers->pid == pb);
	ASSERT_INT(f->bus->n_takers_idle, ==, 1);
	kill(pb, SIGKILL);
	takers_end_seen(f->bus);
	ASSERT(!f->bus->takers && f->bus->n_takers_idle == 0);
	reap(pb);
	for (unsigned int i = 0; i < ELEMENTSOF(serial); i++)
		brokerd_slot_free(*slots[i]);

	/* the name's last owner goes: a (taken by the live pc) fails with NoReply, b (untaken) is reset */
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	receipt_calls(f, 2, slots, seen, serial, 1U << 0);
	pa = sleeper();
	ring->on_receipt(ring->receipt_userdata, serial[0], pa);
	usleep(1000);
	svc_owner_gone(f);
	ASSERT(sa->owner_lost && sb->owner_lost && sa->deadline <= now_usec() && a.n + b.n == 0);
	ASSERT_INT(bus_call_due(f->bus, sa), ==, 2);
	bus_dispatch_receiver_ended(f->bus, sa);
	ASSERT_INT(a.error, ==, -EREMOTEIO);
	ASSERT_INT(bus_call_due(f->bus, sb), ==, 1);
	ASSERT_INT(b.error, ==, -ECONNRESET);
	f->svc->call_send = f->call_send; /* the test's to free */
	receipts_on = false;
	brokerd_slot_free(sa);
	brokerd_slot_free(sb);
	bus_takers_free(f->bus);
	reap(pa);
}

/* --- brokerd's end of the control connection ---------------------------------------- */

static int broker_fd = -1;

/* Gives the bus a control connection whose other end is broker_fd. */
static void broker_attach(struct fixture *f)
{
	int sv[2];

	ASSERT_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), ==, 0);
	f->bus->ctrl_fd = sv[0];
	broker_fd = sv[1];
}

static void broker_detach(struct fixture *f)
{
	close(f->bus->ctrl_fd);
	f->bus->ctrl_fd = -1;
	close(broker_fd);
	broker_fd = -1;
}

/* Whether the bus sent brokerd a request: its op, name argument and serial. */
static bool broker_request(uint16_t *op, char *name, size_t size, uint32_t *serial)
{
	uint8_t buf[CTRL_MSG_MAX];
	struct ctrl_message m;
	struct ctrl_reader rd;
	const char *s = NULL;
	ssize_t n = recv(broker_fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n < 0)
		return false;
	ASSERT_INT(ctrl_message_decode(&m, buf, (size_t)n, 0), ==, 0);
	ASSERT_INT(m.hdr.type, ==, CTRL_TYPE_REQUEST);
	*op = m.hdr.code;
	*serial = m.hdr.serial;
	ctrl_reader_init(&rd, &m);
	name[0] = 0;
	if (m.sig[0] == 's' && ctrl_read_string(&rd, &s, NULL) >= 0)
		snprintf(name, size, "%s", s);
	return true;
}

/* brokerd sends the finished writer w (with its fds) and frees it. */
static void broker_send(struct ctrl_writer *w)
{
	const void *data;
	size_t len;

	ASSERT_INT(ctrl_writer_finish(w, &data, &len), ==, 0);
	ASSERT_INT(unix_send_fds(broker_fd, data, len, w->fds, w->n_fds, 0), >=, 0);
	ctrl_writer_deinit(w);
}

/* OPEN_CALL's answer: OWNED with a cap (any fd will do: attaching is wrapped), or an error. */
static void broker_answer_open_call(uint32_t serial, const char *error)
{
	struct ctrl_writer w;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	ASSERT(fd >= 0);
	ASSERT_INT(ctrl_writer_init(&w, error ? CTRL_TYPE_ERROR : CTRL_TYPE_REPLY, CTRL_OP_OPEN_CALL, serial),
		   ==, 0);
	if (error) {
		ctrl_write_string(&w, error);
		ctrl_write_string(&w, "refused by the test");
	} else {
		ctrl_write_u32(&w, CTRL_CALL_OWNED);
		ctrl_write_fd(&w, fd);
	}
	broker_send(&w);
	close(fd);
}

/* Runs the bus until nothing is left to do. */
static void process_all(brokerd_bus *bus)
{
	for (int i = 0; i < 100 && brokerd_bus_process(bus) > 0; i++)
		;
}

/*
 * brokerd_bus_call_async() never waits for brokerd: the first call to a name
 * asks for its call chan and returns; calls made meanwhile wait, in order;
 * brokerd's refusal reaches their handlers, its cap sends them; a deadline
 * that passes while waiting ends the call, which is then never sent.
 */
static void test_async_open(struct fixture *f)
{
	const char *name = "org.test.Later";
	struct seen first = { 0 }, second = { 0 }, third = { 0 }, late = { 0 };
	uint64_t requests = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_CONTROL_REQUESTS);
	char arg[256];
	uint16_t op;
	uint32_t serial;
	uint64_t t0;

	broker_attach(f);
	sent.n = 0;
	t0 = now_usec();
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "One", "1", 1, 0, on_reply, &first), ==, 0);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "Two", "2", 1, 0, on_reply, &second), ==, 0);
	/* nobody answered, and yet both returned (a blocking request would wait 30 s) */
	ASSERT(now_usec() - t0 < 5000000);
	ASSERT(broker_request(&op, arg, sizeof(arg), &serial));
	ASSERT_INT(op, ==, CTRL_OP_OPEN_CALL);
	ASSERT(strcmp(arg, name) == 0);
	ASSERT(!broker_request(&op, arg, sizeof(arg), &serial)); /* one request for both */
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_CONTROL_REQUESTS), ==, requests + 1);
	ASSERT_INT(sent.n, ==, 0);
	process_all(f->bus);
	ASSERT_INT(first.n + second.n, ==, 0); /* still waiting */

	/* brokerd refuses: both calls fail with its error, nothing was sent */
	broker_answer_open_call(serial, CTRL_ERROR_NAME_HAS_NO_OWNER);
	process_all(f->bus);
	ASSERT_INT(first.n, ==, 1);
	ASSERT_INT(first.error, ==, -ENXIO);
	ASSERT_INT(second.n, ==, 1);
	ASSERT_INT(second.error, ==, -ENXIO);
	ASSERT_INT(sent.n, ==, 0);
	ASSERT(bname_get(f->bus, name, false) == NULL); /* nothing keeps the name */

	/* policy: -EACCES; a call whose deadline passes first ends then */
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "Late", NULL, 0, 1, on_reply, &late), ==, 0);
	ASSERT(broker_request(&op, arg, sizeof(arg), &serial));
	usleep(1000);
	process_all(f->bus);
	ASSERT_INT(late.n, ==, 1);
	ASSERT_INT(late.error, ==, -ETIMEDOUT);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "One", NULL, 0, 0, on_reply, &first), ==, 0);
	ASSERT(!broker_request(&op, arg, sizeof(arg), &serial)); /* the same request still runs */
	broker_answer_open_call(serial, CTRL_ERROR_ACCESS_DENIED);
	process_all(f->bus);
	ASSERT_INT(first.n, ==, 2);
	ASSERT_INT(first.error, ==, -EACCES);
	ASSERT_INT(late.n, ==, 1);

	/* brokerd grants it: the waiting calls go out in order, the next at once */
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "One", NULL, 0, 0, on_reply, &first), ==, 0);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "Two", NULL, 0, 0, on_reply, &second), ==, 0);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "Quiet", NULL, 0, 0, NULL, NULL), ==, 0);
	ASSERT(broker_request(&op, arg, sizeof(arg), &serial));
	broker_answer_open_call(serial, NULL);
	process_all(f->bus);
	ASSERT_INT(sent.n, ==, 3);
	ASSERT(strcmp(last_sent().member, "Quiet") == 0);
	ASSERT(last_sent().flags & CHMSG_F_NO_REPLY_EXPECTED);
	ASSERT(sent.chan == bname_get(f->bus, name, false)->call_send);
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, name, "Three", NULL, 0, 0, on_reply, &third), ==, 0);
	ASSERT_INT(sent.n, ==, 4);
	ASSERT(strcmp(last_sent().member, "Three") == 0);
	ASSERT(!broker_request(&op, arg, sizeof(arg), &serial));
	ASSERT_INT(first.n + second.n + third.n, ==, 3); /* only the earlier failures */

	/* the connection goes while an OPEN_CALL runs: the waiting call fails */
	bname_get(f->bus, name, false)->call_send = NULL; /* as if revoked */
	ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, "org.test.Gone", "X", NULL, 0, 0, on_reply, &late),
		   ==, 0);
	ASSERT(broker_request(&op, arg, sizeof(arg), &serial));
	bus_ctrl_pending_fail(f->bus, -ECONNRESET);
	ASSERT_INT(late.n, ==, 2);
	ASSERT_INT(late.error, ==, -ECONNRESET);
	for (struct brokerd_slot *s = f->bus->slots, *next; s; s = next) {
		next = s->next;
		if (s->type == SLOT_CALL && s->serial)
			bus_call_complete(s, NULL, -ECANCELED); /* calls sent to the test's broker */
	}
	broker_detach(f);
}

/*
 * A service answers a new caller through the cap brokerd pushed with the
 * caller's call grant: taken from the control socket inside the handler,
 * without a request; a caller without one is asked for (OPEN_INBOX).
 */
static void test_reply_pushed(struct fixture *f)
{
	struct seen echo = { 0 }, quiet = { 0 };
	struct chmsg call = { .type = CHMSG_CALL, .serial = 5, .path = "/", .member = "Echo" };
	uint64_t requests = brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_CONTROL_REQUESTS);
	brokerd_slot *slot = NULL, *slot_quiet = NULL;
	struct ctrl_writer w;
	char arg[256];
	uint16_t op;
	uint32_t serial;
	int fd;

	broker_attach(f);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &slot, SVC, "Echo", on_echo, &echo), ==, 0);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &slot_quiet, SVC, "Quiet", on_msg, &quiet), ==, 0);
	/* an unknown signal of a later brokerd first: ignored, not garbage */
	static const uint8_t unknown[CTRL_HEADER_SIZE] = { 1, CTRL_TYPE_SIGNAL, 9 };
	ASSERT_INT(send(broker_fd, unknown, sizeof(unknown), 0), ==, (ssize_t)sizeof(unknown));
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0);
	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_REPLY_CAPABILITY, 0), ==, 0);
	ctrl_write_string(&w, ":1.22");
	ctrl_write_string(&w, SVC);
	ctrl_write_fd(&w, fd);
	broker_send(&w);
	close(fd);

	/* the call of :1.22 (badge 23) comes before the bus read its control socket */
	sent.n = 0;
	encode_receive(f->call_recv, &call, 23);
	bus_dispatch_chan(f->bus, f->call_recv);
	ASSERT_INT(echo.n, ==, 1);
	ASSERT_INT(sent.n, ==, 1);
	ASSERT(last_sent().type == CHMSG_REPLY && last_sent().reply_serial == 5);
	ASSERT(sent.chan->kind == CHAN_PEER_SEND);
	ASSERT(!broker_request(&op, arg, sizeof(arg), &serial));
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_CONTROL_REQUESTS), ==, requests);
	ASSERT(f->bus->ctrl_fd >= 0 && !f->bus->ctrl_failed);

	/* a caller brokerd pushed nothing for: asked for (a child plays brokerd, refusing) */
	pid_t pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct pollfd p = { .fd = broker_fd, .events = POLLIN };

		if (poll(&p, 1, 10000) != 1 || !broker_request(&op, arg, sizeof(arg), &serial) ||
		    op != CTRL_OP_OPEN_INBOX || strcmp(arg, ":1.23") != 0)
			_exit(1);
		ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_ERROR, CTRL_OP_OPEN_INBOX, serial), ==, 0);
		ctrl_write_string(&w, CTRL_ERROR_ACCESS_DENIED);
		ctrl_write_string(&w, "refused by the test");
		broker_send(&w);
		_exit(0);
	}
	call.member = "Quiet";
	encode_receive(f->call_recv, &call, 24);
	bus_dispatch_chan(f->bus, f->call_recv);
	int status;
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT_INT(echo.n, ==, 1);
	ASSERT_INT(quiet.n, ==, 1);
	ASSERT_INT(sent.n, ==, 1); /* no reply could go */
	ASSERT_INT(brokerd_bus_get_counter(f->bus, BROKERD_COUNTER_CONTROL_REQUESTS), ==, requests + 1);
	brokerd_slot_free(slot);
	brokerd_slot_free(slot_quiet);
	bus_ctrl_queue_clear(f->bus);
	broker_detach(f);
}

/*
 * A wake-up costs one system call, the wait: the eventfd is edge-triggered
 * in the bus fd, so a pass after brokerd_bus_wait() leaves it unread and
 * the next wait still sleeps; the control socket is read only when the
 * wait reported it. A pass after an outside loop's poll reads both. A
 * wait interrupted by a completion's task_work (EINTR) looks again.
 */
/* The signal handler of test_wake(): the eventfd written, as a completion posted */
static void on_alarm(int sig)
{
	(void)sig; /* only to stop the wait */
}

static int on_nothing(brokerd_msg *msg, int error, void *userdata)
{
	(*(unsigned int *)userdata)++;
	return 0;
}

static int on_count(brokerd_msg *msg, void *userdata)
{
	const void *body;
	size_t size;

	ASSERT_INT(brokerd_msg_get_body(msg, &body, &size), ==, 0);
	(*(unsigned int *)userdata)++;
	return 0;
}

static int on_echo_quiet(brokerd_msg *msg, void *userdata)
{
	const void *body;
	size_t size;

	ASSERT_INT(brokerd_msg_get_body(msg, &body, &size), ==, 0);
	(*(unsigned int *)userdata)++;
	return brokerd_msg_reply(msg, body, size);
}

/*
 * No heap allocation per message on the fast paths, once warm: a signal
 * received (multishot, read in place) and handled, an emit, a call served
 * and answered, an asynchronous call and its
 * reply received in place. The allocator is wrapped and counted over N of
 * each after a few to warm up (the test's own encoding of what the
 * "kernel" delivers allocates nothing either: the header encoder writes in
 * place).
 */
static void test_no_alloc(struct fixture *f)
{
	enum { WARM = 4, N = 64 };
	struct chan *sig = multishot_new(CHAN_SIGNAL_RECV, f->svc, 2);
	struct chan *inbox = multishot_new(CHAN_INBOX, NULL, 2);
	struct chan *sig_send = chan_new(CHAN_SIGNAL_SEND, IOIPC_SUB_SEND, f->svc);
	struct chmsg m = { .type = CHMSG_SIGNAL, .path = "/", .interface = "org.test.Iface", .member = "Tick" };
	struct chmsg call = { .type = CHMSG_CALL, .path = "/", .interface = "org.test.Iface", .member = "Echo" };
	struct chmsg r = { .type = CHMSG_REPLY, .member = "", .destination = ":1.1" };
	static uint8_t body[64];
	brokerd_slot *s_sig = NULL, *s_method = NULL;
	unsigned int n_sig = 0, n_calls = 0, n_replies = 0;
	struct peer_inbox *p;

	f->bus->connected = true;
	f->svc->call_send = f->call_send;
	f->svc->opening = false;
	f->svc->sig_recv = sig;
	f->svc->sig_send = sig_send;
	f->bus->inbox = inbox;
	f->svc->receivers[0] = PEER_BADGE;
	f->svc->n_receivers = 1;
	f->svc->receivers_usec = now_usec();
	/* the caller's inbox cap in the cache again (earlier tests dropped it): replies ask nothing */
	p = calloc(1, sizeof(*p));
	ASSERT(p);
	p->id = PEER_BADGE;
	p->send = f->peer_send;
	p->next = f->bus->peer_inboxes;
	f->bus->peer_inboxes = p;
	f->bus->n_peer_inboxes++;
	ASSERT_INT(brokerd_bus_subscribe(f->bus, &s_sig, SVC, NULL, on_count, &n_sig), ==, 0);
	ASSERT_INT(brokerd_bus_add_method(f->bus, &s_method, SVC, "Echo", on_echo_quiet, &n_calls), ==, 0);

	set_bytes(&m, "ay", "tick", body);
	for (int i = 0; i < WARM + N; i++) {
		counting = i >= WARM;
		m.serial = (uint32_t)i + 1;
		deliver_in(f->bus, sig, i % 2, &m);
	}
	counting = false;
	ASSERT_INT(n_sig, ==, WARM + N);
	ASSERT_INT(n_alloc, ==, 0); /* signals received */

	for (int i = 0; i < WARM + N; i++) {
		counting = i >= WARM;
		ASSERT_INT(brokerd_bus_emit_signal(f->bus, SVC, "Tick", "tick", 4), ==, 0);
	}
	counting = false;
	ASSERT_INT(n_alloc, ==, 0); /* emits */

	set_bytes(&call, "ay", "ping", body);
	for (int i = 0; i < WARM + N; i++) {
		counting = i >= WARM;
		call.serial = (uint32_t)i + 1;
		deliver(f->bus, f->call_recv, &call);
	}
	counting = false;
	ASSERT_INT(n_calls, ==, WARM + N);
	/*
	 * Calls served and answered: none either. Call chans receive
	 * single-shot and copy each call into a message of its own, in the
	 * block the last call left (msg.c, msg_block_get()).
	 */
	ASSERT_INT(n_alloc, ==, 0);

	set_bytes(&r, "ay", "pong", body);
	for (int i = 0; i < WARM + N; i++) {
		counting = i >= WARM;
		ASSERT_INT(brokerd_bus_call_async(f->bus, NULL, SVC, "Ping", "a", 1, 0, on_nothing, &n_replies), ==, 0);
		r.reply_serial = (uint32_t)last_sent().serial;
		r.serial = (uint32_t)i + 1;
		deliver_in(f->bus, inbox, i % 2, &r);
	}
	counting = false;
	ASSERT_INT(n_replies, ==, WARM + N);
	ASSERT_INT(n_alloc, ==, 0); /* calls made (a spare slot) and their replies received */

	brokerd_slot_free(s_method);
	brokerd_slot_free(s_sig);
	f->svc->sig_recv = f->sig_recv;
	f->svc->sig_send = NULL;
	f->bus->inbox = f->inbox;
	multishot_free(sig);
	multishot_free(inbox);
	chan_free_test(sig_send);
}

static void test_wake(struct fixture *f)
{
	struct sigaction old_sa;
	struct epoll_event ev = { .events = EPOLLIN };
	struct ctrl_writer w;
	uint64_t v;
	char c;
	int k;

	/* a kick: one wake-up, the eventfd left unread, no second wake-up */
	process_all(f->bus);
	bus_kick(f->bus);
	ASSERT_INT(brokerd_bus_wait(f->bus, 0), ==, 1);
	ASSERT_INT(brokerd_bus_process(f->bus), >=, 0);
	ASSERT_INT(brokerd_bus_wait(f->bus, 0), ==, 0);
	ASSERT_INT(brokerd_bus_process(f->bus), >=, 0);
	ASSERT(read(f->bus->ring.efd, &v, sizeof(v)) == sizeof(v) && v == 1);

	/* without a wait before it, the pass reads the eventfd */
	bus_kick(f->bus);
	ASSERT_INT(brokerd_bus_process(f->bus), >=, 0);
	ASSERT(read(f->bus->ring.efd, &v, sizeof(v)) < 0 && errno == EAGAIN);

	/*
	 * The wait is in the ring, which polls the wake set: the timer going
	 * off while it sleeps wakes it, and says the pass must look at the
	 * control socket and the takers.
	 */
	f->bus->ctrl_idle = true;
	f->bus->takers_ready = false;
	ASSERT_INT(timerfd_settime(f->bus->timer_fd, 0,
				   &(struct itimerspec){ .it_value = { .tv_nsec = 20000000 } }, NULL), ==, 0);
	ASSERT_INT(brokerd_bus_wait(f->bus, 5000000), ==, 1);
	ASSERT(!f->bus->ctrl_idle && f->bus->takers_ready);
	ASSERT(read(f->bus->timer_fd, &v, sizeof(v)) == sizeof(v));
	ASSERT_INT(brokerd_bus_process(f->bus), >=, 0);
	/*
	 * A signal stops the wait (no completion, nothing to dispatch): 0, and
	 * the wait after it sleeps again.
	 */
	ASSERT_INT(sigaction(SIGALRM, &(struct sigaction){ .sa_handler = on_alarm }, &old_sa), ==, 0);
	ASSERT_INT(setitimer(ITIMER_REAL, &(struct itimerval){ .it_value = { .tv_usec = 20000 } }, NULL), ==, 0);
	k = brokerd_bus_wait(f->bus, 5000000);
	ASSERT_INT(k, ==, 0);
	ASSERT_INT(sigaction(SIGALRM, &old_sa, NULL), ==, 0);
	ASSERT_INT(brokerd_bus_wait(f->bus, 20000), ==, 0);

	/* the control socket: read when reported, until EAGAIN, then not */
	broker_attach(f);
	ev.data.fd = f->bus->ctrl_fd;
	ASSERT_INT(epoll_ctl(f->bus->epoll_fd, EPOLL_CTL_ADD, f->bus->ctrl_fd, &ev), ==, 0);
	ASSERT_INT(epoll_ctl(f->bus->wake_epfd, EPOLL_CTL_ADD, f->bus->ctrl_fd, &ev), ==, 0);
	f->bus->connected = true;
	ASSERT_INT(brokerd_bus_process(f->bus), >=, 0);
	ASSERT(f->bus->ctrl_idle);
	ASSERT_INT(ctrl_writer_init(&w, CTRL_TYPE_SIGNAL, CTRL_SIGNAL_NAME_OWNER_CHANGED, 0), ==, 0);
	ctrl_write_string(&w, "org.test.Other");
	ctrl_write_string(&w, "");
	ctrl_write_string(&w, ":1.9");
	broker_send(&w);
	ASSERT_INT(brokerd_bus_wait(f->bus, 0), ==, 1);
	ASSERT(!f->bus->ctrl_idle);
	ASSERT_INT(brokerd_bus_process(f->bus), ==, 1);
	ASSERT(f->bus->ctrl_idle);
	ASSERT(recv(f->bus->ctrl_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) < 0 && errno == EAGAIN);
	ASSERT_INT(brokerd_bus_wait(f->bus, 0), ==, 0);
	ASSERT_INT(epoll_ctl(f->bus->epoll_fd, EPOLL_CTL_DEL, f->bus->ctrl_fd, NULL), ==, 0);
	ASSERT_INT(epoll_ctl(f->bus->wake_epfd, EPOLL_CTL_DEL, f->bus->ctrl_fd, NULL), ==, 0);
	f->bus->connected = false;
	broker_detach(f);
}

int main(void)
{
	struct fixture f;
	int k;

	k = fixture_init(&f);
	if (k < 0) {
		printf("test-dispatch: no bus without io_uring (%s): skipped\n", strerror(-k));
		return 77;
	}
	test_call(&f);
	test_signal(&f);
	test_lost(&f);
	test_in_place(&f);
	test_match(&f);
	test_reply(&f);
	test_receipts(&f);
	test_takers(&f);
	test_malformed(&f);
	test_ctrl(&f);
	test_async_open(&f);
	test_reply_pushed(&f);
	test_wake(&f);
	test_no_alloc(&f);
	fixture_deinit(&f);
	printf("test-dispatch: ok\n");
	return 0;
}
