/* SPDX-License-Identifier: MIT */
/*
 * bus.c - the broker (see bus.h): setup and teardown, accepting control
 * connections and reading their requests, status.
 *
 * The top of the broker's stack; each layer calls only those below it:
 *   bus.c       setup, accept, reading requests, status
 *   driver.c    op table and dispatch, state-changing requests, registry callbacks
 *   admission.c connection limits at accept, HELLO deadline, a connection's end
 *   query.c     read-only requests (listings, owners, credentials, policy, quota)
 *   activation.c  starting units, calls waiting for a name
 *   grant.c     channels, grants and caps, monitors, revocation, reload
 *   conn.c      a connection's transport: sending, replies, signals, credentials
 * with the shared structs in bus-state.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/admission.h"
#include "brokerd/bus-state.h"
#include "brokerd/bus.h"
#include "brokerd/channel.h"
#include "brokerd/conn.h"
#include "brokerd/driver.h"
#include "brokerd/grant.h"
#include "brokerd/log.h"
#include "brokerd/policy-dbus-msg.h"
#include "brokerd/policy.h"
#include "brokerd/quota.h"
#include "brokerd/registry.h"
#include "brokerd/restart.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/socket.h"

#define CONN_BATCH		32 /* requests handled per wakeup, for fairness */
#define ACCEPT_BATCH		16 /* connections accepted per wakeup */
#define ACTIVATION_TIMEOUT_USEC (25ULL * 1000000ULL)

static const char *const default_policy_dirs[] = { POLICY_DIR_ETC, POLICY_DIR_VENDOR, NULL };
static const char *const default_service_dirs[] = { SERVICE_DIR_ETC, SERVICE_DIR_VENDOR, NULL };

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
		char buf[CMSG_SPACE(sizeof(int) * UNIX_FDS_MAX)];
	} u;

	for (unsigned int i = 0; !c->dead && !c->out_head; i++) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &u, .msg_controllen = sizeof(u)
		};
		unsigned int n_fds;
		ssize_t n;

		if (i == CONN_BATCH) {
			/* Others' turn: re-arm the edge, so that what is left is reported again. */
			(void)sd_event_source_set_io_events(c->src, EPOLLIN | EPOLLET);
			return 0;
		}
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
		n_fds = unix_close_fds(&mh);
		driver_dispatch(c, buf, (size_t)n, n_fds,
				(mh.msg_flags & MSG_TRUNC) || (size_t)n > CTRL_MSG_MAX);
		if (c->peer && c->fifo)
			admission_conn_hello(c); /* HELLO came in time */
	}
	return 0;
}

/*
 * Connections are edge-triggered: sd-event asks epoll for every ready fd
 * each iteration but dispatches one source, so thousands of level-triggered
 * sockets that stay ready (all hung up at once) made each dispatch O(n) and
 * a mass disconnect O(n^2). An edge is reported once; conn_read() reads to
 * EAGAIN or re-arms the edge (its batch is done, or input is paused until
 * the output queue drains, see conn.c).
 */
static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus_conn *c = userdata;
	int r = 0;

	/* A bus too busy to reap at low priority reaps here, a batch at a time. */
	admission_reap_overdue(c->bus);

	/* A peer that went away while output is queued: the flush fails and ends it. */
	if (c->out_head && (revents & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		r = conn_flush(c);
	if (r == 0 && !c->dead && (revents & EPOLLIN))
		r = conn_read(c);
	if (r == 0 && !c->dead && !c->out_head && (revents & (EPOLLHUP | EPOLLERR)))
		r = -ECONNRESET;
	if (r < 0 || c->dead)
		admission_conn_reap_later(c);
	return 0;
}

int bus_add_connection(struct bus *b, int cfd)
{
	struct bus_conn *c;
	int r, admitted;

	if (!b || cfd < 0)
		return -EINVAL;
	admitted = admission_conn_new(b, cfd, &c);
	if (!c)
		return admitted;
	r = sd_event_add_io(b->event, &c->src, cfd, EPOLLIN | EPOLLET, on_conn_io, c);
	if (r < 0) {
		admission_conn_free(c);
		return r;
	}
	return admitted;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct bus *b = userdata;

	for (unsigned int i = 0; i < ACCEPT_BATCH; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				admission_accept_pause(b, errno);
			else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warning("accept: %s", strerror(errno));
			return 0;
		}
		(void)bus_add_connection(b, cfd);
	}
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
	bool restored = false;
	int r, failed_quota;

	if (!ret || !event)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->event = sd_event_ref(event);
	b->conn_log = (struct log_ratelimit){ .what = "connect/disconnect",
					      .interval_usec = 10000000ULL,
					      .burst = 100 };
	b->listen_fd = -1;
	b->policy_dirs = config && config->policy_dirs ? config->policy_dirs : default_policy_dirs;
	b->service_dirs = config && config->service_dirs ? config->service_dirs : default_service_dirs;
	b->dbus_config = config ? config->dbus_config : NULL;
	b->activator_path = config && config->activator_path ? config->activator_path : BUS_ACTIVATOR_PATH;
	b->dbus_systemd_activation = config && config->dbus_systemd_activation;
	b->activation_timeout = config && config->activation_timeout_usec ? config->activation_timeout_usec :
									    ACTIVATION_TIMEOUT_USEC;
	r = registry_new(&b->registry, &driver_registry_ops, b);
	if (r < 0)
		goto fail;
	r = quota_new(&b->quota);
	if (r < 0)
		goto fail;
	r = admission_init(b);
	if (r < 0)
		goto fail;
	b->state_path = config ? config->state_path : NULL;
	driver_ids_load(b);
	if (config && config->restore && !config->no_channels) {
		r = restart_load(b, config->restore);
		if (r < 0)
			goto fail;
		restored = r > 0;
	} else if (config && config->restore) {
		/* its sockets would stay open unserved, and the keeper hold the channels for a minute */
		restart_discard(b, config->restore,
				"running without channels: the stored bus is not taken over");
	}
	if (restored) {
		for (struct bus_conn *c = b->conns; c; c = c->next) {
			/* Edge-triggered: requests already waiting are reported when added. */
			r = sd_event_add_io(event, &c->src, c->fd, EPOLLIN | EPOLLET, on_conn_io, c);
			if (r < 0)
				goto fail;
		}
	} else if (!(config && config->no_channels)) {
		chanmgr_init(&b->chanmgr);
		if (!b->chanmgr.available)
			log_warning(
				"io_uring IPC channels unavailable (%s failed: %s): running without a data plane",
				b->chanmgr.probe_step, strerror(-b->chanmgr.probe_error));
	} else {
		b->chanmgr.probe_error = -EOPNOTSUPP;
	}
	if (b->chanmgr.available && !restored) {
		/* A slow subscriber should lose old signals, not block the publisher (or the bus). */
		uint32_t id;

		if (chanmgr_create(&b->chanmgr, IOIPC_F_BROADCAST | IOIPC_F_LOSSY, CHANNEL_SLOTS,
				   CHANNEL_MSG_MAX, &id) == 0) {
			(void)chanmgr_destroy(&b->chanmgr, id);
			b->lossy = IOIPC_F_LOSSY;
		} else {
			log_warning(
				"kernel has no IOIPC_F_LOSSY: a subscriber that stops reading blocks its publisher");
		}
	}
	if (b->chanmgr.ring_ok) {
		r = sd_event_add_io(event, &b->ring_src, chanmgr_fd(&b->chanmgr), EPOLLIN, on_ring, b);
		if (r < 0)
			goto fail;
	}
	if (b->chanmgr.available && !b->bus_signal) {
		r = bus_channel_new(b, CTRL_CHANNEL_SIGNAL, CTRL_BUS_NAME, geteuid(), &failed_quota,
				    &b->bus_signal);
		if (r < 0)
			goto fail;
	}
	/* A bad policy at startup: run with the built-in one (root only), never a looser one. */
	r = bus_reload(b, err, sizeof(err));
	if (r == -EINVAL) {
		r = policy_new(&b->policy);
		if (r < 0)
			goto fail;
		log_error(
			"running with the built-in policy (root only) until the policy is fixed and reloaded");
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
	activation_deinit(b); /* first: a pending StartUnit callback may still run here */
	admission_deinit(b);  /* every connection, before the names they own */
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
	policy_dbus_msg_free(b->dbus_policy);
	quota_free(b->quota);
	service_set_free(b->services);
	sd_event_unref(b->event);
	free(b);
	return NULL;
}

int bus_listen(struct bus *b, int fd)
{
	int r, flags;

	if (!b || fd < 0)
		return -EINVAL;
	/* on_accept() accepts until EAGAIN; systemd passes sockets blocking. */
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	r = sd_event_add_io(b->event, &b->listen_src, fd, EPOLLIN, on_accept, b);
	if (r < 0)
		return r;
	b->listen_fd = fd;
	return 0;
}

int bus_handover(struct bus *b)
{
	return b ? restart_save(b) : -EINVAL;
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
