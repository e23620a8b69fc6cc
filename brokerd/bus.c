/* SPDX-License-Identifier: MIT */
/*
 * bus.c - the broker (see bus.h): setup and teardown, accepting control
 * connections and reading their requests, status.
 *
 * The top of the broker's stack; each layer calls only those below it:
 *   bus.c       setup, accept, a connection's life, status
 *   driver.c    op table and dispatch, state-changing requests, registry callbacks
 *   query.c     read-only requests (listings, owners, credentials, policy, quota)
 *   activation.c  starting units, calls waiting for a name
 *   grant.c     channels, grants and caps, monitors, revocation, reload
 *   conn.c      a connection's transport: sending, replies, signals, credentials
 * with the shared structs in bus-state.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/bus.h"
#include "brokerd/bus-state.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
#include "brokerd/driver.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/macro.h"

#define CONN_BATCH		32	/* requests handled per wakeup, for fairness */
#define ACTIVATION_TIMEOUT_USEC	(25ULL * 1000000ULL)

static const char *const default_policy_dirs[] = { POLICY_DIR_ETC, POLICY_DIR_VENDOR, NULL };
static const char *const default_service_dirs[] = { SERVICE_DIR_ETC, SERVICE_DIR_VENDOR, NULL };

static void bus_conn_free(struct bus_conn *c);

/* --- connections ----------------------------------------------------------- */

/* Has the peer closed (or shut down) its end? */
static bool conn_eof(struct bus_conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) != 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int conn_read(struct bus_conn *c)
{
	static uint8_t buf[CTRL_MSG_MAX + 1];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 253)];
	} u;

	for (unsigned int i = 0; i < CONN_BATCH && !c->dead && !c->out_head; i++) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u,
				     .msg_controllen = sizeof(u) };
		unsigned int n_fds = 0;
		ssize_t n;

		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		/*
		 * 0 is the end of the connection or a zero-length datagram; only
		 * the first has shut the socket down. Fds make it a datagram.
		 */
		if (n == 0 && !CMSG_FIRSTHDR(&mh) && conn_eof(c))
			return -ECONNRESET;
		/* Clients never send fds: close whatever came, then let the decoder complain. */
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				int *fds = (int *)CMSG_DATA(cm);

				for (size_t j = 0; j < k; j++)
					close(fds[j]);
				n_fds += (unsigned int)k;
			}
		}
		driver_dispatch(c, buf, (size_t)n, n_fds,
				(mh.msg_flags & MSG_TRUNC) || (size_t)n > CTRL_MSG_MAX);
	}
	return 0;
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus_conn *c = userdata;
	int r = 0;

	if (revents & EPOLLOUT)
		r = conn_flush(c);
	if (r == 0 && !c->dead && (revents & EPOLLIN))
		r = conn_read(c);
	if (r == 0 && !c->dead && !c->out_head && (revents & (EPOLLHUP | EPOLLERR)))
		r = -ECONNRESET;
	if (r < 0 || c->dead)
		bus_conn_free(c);
	return 0;
}

static void bus_conn_free(struct bus_conn *c)
{
	struct bus *b;

	if (!c)
		return;
	b = c->bus;
	c->dead = true;
	activation_drop_conn(b, c);
	if (c->peer) {
		uint64_t id = c->peer->id;

		log_full(LOG_INFO, c->peer->unique_name, c->cred.uid, "%s disconnected", c->peer->unique_name);
		registry_peer_remove(b->registry, c->peer);	/* names go, queues are promoted */
		c->peer = NULL;
		/*
		 * The process may live on, attached to channels, without its
		 * connection: all it was granted goes with the connection.
		 */
		for (struct bus_name *n = b->names; n; n = n->next) {
			grant_revoke(b, n->call, id, GRANT_ALL);
			grant_revoke(b, n->signal, id, GRANT_ALL);
		}
		grant_revoke(b, b->bus_signal, id, GRANT_ALL);
		for (struct bus_conn *o = b->conns; o; o = o->next)
			grant_revoke(b, o->inbox, id, GRANT_ALL);
	}
	c->inbox = bus_channel_free(b, c->inbox);
	if (c->n_subscriptions)
		quota_release(b->quota, c->cred.uid, QUOTA_SUBSCRIPTIONS, c->n_subscriptions);
	if (!c->over_quota)
		quota_release(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1);
	conn_out_clear(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		b->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	sd_event_source_disable_unref(c->src);
	close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c->gids);
	free(c->label);
	free(c);
	b->gc_needed = true;
	grant_revoke_pending(b);
}

int bus_add_connection(struct bus *b, int cfd)
{
	struct bus_conn *c;
	int r;

	if (!b || cfd < 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(cfd);
		return -ENOMEM;
	}
	c->bus = b;
	c->fd = cfd;
	conn_creds_read(c);
	/* Over quota: keep the connection long enough to say so (and log it) in reply to HELLO. */
	if (quota_charge(b->quota, c->cred.uid, QUOTA_CONNECTIONS, 1) < 0)
		c->over_quota = true;
	r = sd_event_add_io(b->event, &c->src, cfd, EPOLLIN, on_conn_io, c);
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	if (r < 0) {
		bus_conn_free(c);
		return r;
	}
	return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus *b = userdata;
	int cfd;

	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warning("accept: %s", strerror(errno));
		return 0;
	}
	(void)bus_add_connection(b, cfd);
	return 0;
}

/* --- setup --------------------------------------------------------------- */

int bus_reload(struct bus *b, char *err, size_t err_len)
{
	return grant_reload(b, err, err_len);
}

static int on_ring(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus *b = userdata;

	chanmgr_process(&b->chanmgr);
	return 0;
}

int bus_new(struct bus **ret, sd_event *event, const struct bus_config *config)
{
	struct bus *b;
	char err[512] = "";
	int r, failed_quota;

	if (!ret || !event)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->event = sd_event_ref(event);
	b->listen_fd = -1;
	b->policy_dirs = config && config->policy_dirs ? config->policy_dirs : default_policy_dirs;
	b->service_dirs = config && config->service_dirs ? config->service_dirs : default_service_dirs;
	b->activator_path = config && config->activator_path ? config->activator_path : BUS_ACTIVATOR_PATH;
	b->activation_timeout = config && config->activation_timeout_usec ? config->activation_timeout_usec
									   : ACTIVATION_TIMEOUT_USEC;
	r = registry_new(&b->registry, &driver_registry_ops, b);
	if (r < 0)
		goto fail;
	r = quota_new(&b->quota);
	if (r < 0)
		goto fail;
	b->state_path = config ? config->state_path : NULL;
	driver_ids_load(b);
	if (!(config && config->no_channels)) {
		chanmgr_init(&b->chanmgr);
		if (!b->chanmgr.available)
			log_warning("io_uring IPC channels unavailable (%s failed: %s): running without a data plane",
				    b->chanmgr.probe_step, strerror(-b->chanmgr.probe_error));
	} else {
		b->chanmgr.probe_error = -EOPNOTSUPP;
	}
	if (b->chanmgr.available) {
		/* A slow subscriber should lose old signals, not block the publisher (or the bus). */
		uint32_t id;

		if (chanmgr_create(&b->chanmgr, IOIPC_F_BROADCAST | IOIPC_F_LOSSY, &id) == 0) {
			(void)chanmgr_destroy(&b->chanmgr, id);
			b->lossy = IOIPC_F_LOSSY;
		} else {
			log_warning("kernel has no IOIPC_F_LOSSY: a subscriber that stops reading blocks its publisher");
		}
	}
	if (b->chanmgr.ring_ok) {
		r = sd_event_add_io(event, &b->ring_src, chanmgr_fd(&b->chanmgr), EPOLLIN, on_ring, b);
		if (r < 0)
			goto fail;
	}
	if (b->chanmgr.available) {
		r = bus_channel_new(b, CTRL_CHANNEL_SIGNAL, CTRL_BUS_NAME, geteuid(), &failed_quota, &b->bus_signal);
		if (r < 0)
			goto fail;
	}
	/* A bad policy at startup: run with the built-in one (root only), never a looser one. */
	r = bus_reload(b, err, sizeof(err));
	if (r == -EINVAL) {
		r = policy_new(&b->policy);
		if (r < 0)
			goto fail;
		log_error("running with the built-in policy (root only) until the policy is fixed and reloaded");
	} else if (r < 0) {
		goto fail;
	}
	*ret = b;
	return 0;
fail:
	bus_free(b);
	return r;
}

struct bus *bus_free(struct bus *b)
{
	if (!b)
		return NULL;
	activation_deinit(b);	/* first: a pending StartUnit callback may still run here */
	while (b->conns)
		bus_conn_free(b->conns);
	while (b->names) {
		struct bus_name *n = b->names;

		b->names = n->next;
		bus_name_free(b, n);
	}
	b->bus_signal = bus_channel_free(b, b->bus_signal);
	sd_event_source_disable_unref(b->listen_src);
	sd_event_source_disable_unref(b->ring_src);
	if (b->listen_fd >= 0)
		close(b->listen_fd);
	chanmgr_deinit(&b->chanmgr);
	registry_free(b->registry);
	policy_free(b->policy);
	quota_free(b->quota);
	service_set_free(b->services);
	sd_event_unref(b->event);
	free(b);
	return NULL;
}

int bus_listen(struct bus *b, int fd)
{
	int r;

	if (!b || fd < 0)
		return -EINVAL;
	r = sd_event_add_io(b->event, &b->listen_src, fd, EPOLLIN, on_accept, b);
	if (r < 0)
		return r;
	b->listen_fd = fd;
	return 0;
}

bool bus_channels_available(struct bus *b)
{
	return b && b->chanmgr.available;
}

void bus_status(struct bus *b, char *buf, size_t len)
{
	snprintf(buf, len, "%zu peers, %zu names, channels %s", registry_peer_count(b->registry),
		 registry_names_list(b->registry, NULL, 0), b->chanmgr.available ? "on" : "unavailable");
}
