/* SPDX-License-Identifier: MIT */
/*
 * activation.c - starting the unit of an activatable name, and the calls
 * that wait for it (see activation.h). Two back-ends: brokerd-activator
 * (brokerd is unprivileged) and, without it, systemd's StartUnit over D-Bus.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/bus-state.h"
#include "brokerd/conn.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/quota.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/macro.h"
#include "util/socket.h"

/* --- calls waiting for an activation ------------------------------------- */

static void activator_reqs_close(struct bus *b, const char *name);

static struct activation *activation_free(struct bus *b, struct activation *a)
{
	struct activation **pp;

	if (!a)
		return NULL;
	for (pp = &b->activations; *pp; pp = &(*pp)->next) {
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	}
	quota_release(b->quota, a->conn->cred.uid, QUOTA_ACTIVATIONS, 1);
	b->gc_needed = true;
	sd_event_source_unref(a->timer);
	free(a->name);
	free(a);
	return NULL;
}

static void activation_reply(struct bus *b, struct activation *a, const char *error, const char *msg)
{
	struct ctrl_message m = { .hdr = { .code = CTRL_OP_OPEN_CALL, .serial = a->serial } };
	_cleanup_(ctrl_writer_deinit) struct ctrl_writer w = { 0 };
	_cleanup_close_ int fd = -1;
	struct bus_name *n = bus_name_find(b, a->name);

	m.info = ctrl_op_get(CTRL_OP_OPEN_CALL);
	if (error) {
		(void)conn_reply_error(a->conn, &m, error, "%s", msg);
		return;
	}
	if (conn_reply_init(&w, &m) < 0)
		return;
	ctrl_write_u32(&w, CTRL_CALL_OWNED);
	grant_write_msg_size(&w, a->flags & CTRL_CALL_MSG_SIZE, n ? n->call : NULL);
	if (n && n->call) {
		fd = cap_mint(b, n->call, a->conn, IOIPC_SUB_SEND);
		if (fd < 0) {
			(void)conn_reply_error(a->conn, &m, CTRL_ERROR_FAILED, "cannot mint capability: %s",
					       strerror(-fd));
			return;
		}
		ctrl_write_fd(&w, fd);
		/* before the caller has the cap, so before its first call */
		reply_caps_for_caller(b, n, a->conn);
	}
	(void)conn_send(a->conn, &w);
}

/*
 * Answers every call waiting for the activation of @name: with the caps when
 * @error is NULL (the name is owned now), otherwise with @error and @msg.
 */
void activation_settle(struct bus *b, const char *name, const char *error, const char *msg)
{
	struct bus_name *n;
	struct activation *a, *next;

	/*
	 * name may belong to what this frees: an activator request (closed
	 * below) or a waiting call. A name is at most 255 bytes.
	 */
	name = strdupa(name);
	/* A unit that failed fails the D-Bus clients waiting for the name too. */
	if (error && b->activation_failed)
		b->activation_failed(b->activation_failed_userdata, name, msg);
	n = bus_name_find(b, name);
	if (n)
		n->activating = false;
	activator_reqs_close(b, name); /* nothing more to hear about this start */
	for (a = b->activations; a; a = next) {
		next = a->next;
		if (strcmp(a->name, name) != 0)
			continue;
		activation_reply(b, a, error, msg);
		activation_free(b, a);
	}
}

static int on_activation_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct activation *a = userdata;
	struct bus *b = a->conn->bus;
	char msg[300];

	snprintf(msg, sizeof(msg), "%s was not owned within %llu s of its activation", a->name,
		 (unsigned long long)(b->activation_timeout / 1000000));
	log_full(LOG_WARNING, conn_name(a->conn), a->conn->cred.uid, "%s", msg);
	activation_reply(b, a, CTRL_ERROR_TIMEOUT, msg);
	_cleanup_free_ char *name = strdup(a->name);
	activation_free(b, a);
	/* Nobody waits any more: the next call starts the unit again. */
	bool waiting = false;
	for (struct activation *o = b->activations; o; o = o->next)
		waiting = waiting || (name && strcmp(o->name, name) == 0);
	struct bus_name *n = name ? bus_name_find(b, name) : NULL;
	if (n && !waiting) {
		n->activating = false;
		activator_reqs_close(b, name);
	}
	return 0;
}

int activation_add(struct bus *b, struct bus_conn *c, uint32_t serial, uint32_t flags, const char *name)
{
	struct activation *a;
	int r;

	a = calloc(1, sizeof(*a));
	if (!a || !(a->name = strdup(name))) {
		free(a);
		quota_release(b->quota, c->cred.uid, QUOTA_ACTIVATIONS, 1);
		return -ENOMEM;
	}
	a->conn = c;
	a->serial = serial;
	a->flags = flags;
	r = sd_event_add_time_relative(b->event, &a->timer, CLOCK_MONOTONIC, b->activation_timeout, 0,
				       on_activation_timeout, a);
	a->next = b->activations;
	b->activations = a;
	if (r < 0) {
		activation_free(b, a);
		return r;
	}
	return 0;
}

void activation_drop_conn(struct bus *b, struct bus_conn *c)
{
	for (struct activation *a = b->activations, *next; a; a = next) {
		next = a->next;
		if (a->conn == c)
			activation_free(b, a);
	}
}

/* --- starting the unit: systemd's StartUnit ------------------------------- */

struct start_job {
	struct bus *bus;
	char name[];
};

static int on_start_unit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error)
{
	struct start_job *j = userdata;
	const sd_bus_error *e = sd_bus_message_get_error(reply);

	if (e) {
		char msg[512];

		snprintf(msg, sizeof(msg), "systemd refused to start the unit of %s: %s", j->name,
			 e->message ? e->message : e->name);
		log_warning("%s", msg);
		activation_settle(j->bus, j->name, CTRL_ERROR_ACTIVATION_FAILED, msg);
	}
	free(j);
	return 0;
}

/* --- starting the unit: the activator ------------------------------------ */

/*
 * Preferred path: brokerd-activator.socket (root helper that only starts
 * units named by activation files), because brokerd itself is unprivileged
 * and may not start units. It answers one line, "ok" (start job queued) or
 * "error: REASON", read asynchronously. After "ok" the connection stays
 * open and the activator watches the unit: a unit that fails or ends
 * without taking the name comes as "failed: REASON". brokerd hangs up when
 * the activation is settled (owner, failure, timeout), which ends the
 * activator; an activator that hangs up first (EOF) has nothing to report.
 */
struct activator_req {
	struct bus *bus;
	struct activator_req *next;
	sd_event_source *src, *timer;
	int fd;
	bool started; /* "ok" came: the unit start was queued */
	size_t len;
	char buf[512];
	char name[];
};

static void activator_req_free(struct activator_req *q)
{
	for (struct activator_req **pp = &q->bus->activator_reqs; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	sd_event_source_disable_unref(q->src);
	sd_event_source_disable_unref(q->timer);
	close(q->fd);
	free(q);
}

static void activator_reqs_close(struct bus *b, const char *name)
{
	for (struct activator_req *q = b->activator_reqs, *next; q; q = next) {
		next = q->next;
		if (strcmp(q->name, name) == 0)
			activator_req_free(q);
	}
}

/* Ends q with an activation failure: "error: ..." or "failed: ..." (or garbage). */
static void activator_req_fail(struct activator_req *q, const char *what)
{
	struct bus *b = q->bus;
	char msg[700];

	if (strncmp(what, "error: ", 7) == 0)
		what += 7;
	else if (strncmp(what, "failed: ", 8) == 0)
		what += 8;
	snprintf(msg, sizeof(msg), "activation of %s failed: %s", q->name, what);
	log_warning("%s", msg);
	/* settling closes every request for the name, q included */
	activation_settle(b, q->name, CTRL_ERROR_ACTIVATION_FAILED, msg);
}

static int on_activator_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct activator_req *q = userdata;
	ssize_t n = read(fd, q->buf + q->len, sizeof(q->buf) - 1 - q->len);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n > 0)
		q->len += (size_t)n;
	q->buf[q->len] = 0;
	while ((nl = strchr(q->buf, '\n'))) {
		*nl = 0;
		if (strcmp(q->buf, "ok") != 0 || q->started) {
			activator_req_fail(q, q->buf);
			return 0;
		}
		q->started = true;
		log_info("activation of %s: unit start queued", q->name);
		q->len -= (size_t)(nl + 1 - q->buf);
		memmove(q->buf, nl + 1, q->len + 1);
	}
	if (n > 0 && q->len < sizeof(q->buf) - 1)
		return 0; /* the rest of the line is still to come */
	/* EOF, an error or an overlong line */
	if (!q->started) {
		activator_req_fail(q, q->len ? q->buf : "activator gave no answer");
		return 0;
	}
	activator_req_free(q); /* it watched until the end: only the timeout is left */
	return 0;
}

static int on_activator_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	/* Waiting callers time out by their own timers; this ends the watch. */
	activator_req_free(userdata);
	return 0;
}

static int activator_start(struct bus *b, const struct service *svc)
{
	_cleanup_close_ int fd = -1;
	struct activator_req *q;
	char line[300];
	int r;

	fd = unix_connect(b->activator_path, SOCK_STREAM);
	if (fd < 0)
		return fd;
	snprintf(line, sizeof(line), "%s\n", svc->name);
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		return -EIO;
	(void)fcntl(fd, F_SETFL, O_NONBLOCK);
	q = calloc(1, sizeof(*q) + strlen(svc->name) + 1);
	if (!q)
		return -ENOMEM;
	q->bus = b;
	q->fd = TAKE_FD(fd);
	strcpy(q->name, svc->name);
	q->next = b->activator_reqs;
	b->activator_reqs = q;
	r = sd_event_add_io(b->event, &q->src, q->fd, EPOLLIN, on_activator_io, q);
	if (r >= 0)
		r = sd_event_add_time_relative(b->event, &q->timer, CLOCK_MONOTONIC, b->activation_timeout, 0,
					       on_activator_timeout, q);
	if (r < 0) {
		activator_req_free(q);
		return r;
	}
	log_info("activating %s: asked the activator to start %s", svc->name, svc->unit);
	return 0;
}

int activation_start(struct bus *b, const struct service *svc, char *err, size_t err_len)
{
	struct start_job *j;
	int r;

	if (!svc->unit) {
		snprintf(err, err_len,
			 "%s has no SystemdService= unit: only its Exec= line (%s), run for D-Bus clients",
			 svc->name, svc->file);
		return -EOPNOTSUPP;
	}
	/* --activator="": a bus no systemd knows (brokerd-dbus-daemon's), which starts no units */
	if (!b->activator_path[0]) {
		snprintf(err, err_len,
			 "this bus starts no systemd units (--activator=\"\"): %s is not started", svc->unit);
		return -EOPNOTSUPP;
	}
	r = activator_start(b, svc);
	if (r == 0)
		return 0;
	if (r != -ENOENT && r != -ECONNREFUSED) {
		snprintf(err, err_len, "cannot reach the activator %s: %s", b->activator_path, strerror(-r));
		return r;
	}
	/* No activator (brokerd run by hand, as root): ask systemd directly. */
	if (!b->sdbus) {
		r = sd_bus_open_system(&b->sdbus);
		if (r < 0) {
			snprintf(err, err_len, "cannot connect to the system bus to reach systemd: %s",
				 strerror(-r));
			return r;
		}
		r = sd_bus_attach_event(b->sdbus, b->event, 0);
		if (r < 0) {
			b->sdbus = sd_bus_flush_close_unref(b->sdbus);
			snprintf(err, err_len, "cannot attach to the event loop: %s", strerror(-r));
			return r;
		}
	}
	j = malloc(sizeof(*j) + strlen(svc->name) + 1);
	if (!j)
		return -ENOMEM;
	j->bus = b;
	strcpy(j->name, svc->name);
	r = sd_bus_call_method_async(b->sdbus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
				     "org.freedesktop.systemd1.Manager", "StartUnit", on_start_unit_reply, j,
				     "ss", svc->unit, "replace");
	if (r < 0) {
		free(j);
		snprintf(err, err_len, "cannot ask systemd to start %s: %s", svc->unit, strerror(-r));
		b->sdbus = sd_bus_flush_close_unref(b->sdbus);
		return r;
	}
	log_info("activating %s: starting %s", svc->name, svc->unit);
	return 0;
}

void activation_deinit(struct bus *b)
{
	while (b->activator_reqs)
		activator_req_free(b->activator_reqs);
	/* Before the rest goes: a pending StartUnit callback may still run here. */
	b->sdbus = sd_bus_flush_close_unref(b->sdbus);
}
