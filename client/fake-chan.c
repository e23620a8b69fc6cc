/* SPDX-License-Identifier: MIT */
/*
 * fake-chan.c - a user-space stand-in for the kernel's IPC channels with the
 * interface of chan.h, so that test-bus.c can run the whole library (calls,
 * replies, signals, worker pools, timeouts, dying servers) on a host whose
 * kernel has no channels. Test-only: linked instead of chan.c.
 *
 * All buses live in one process (one thread each). A channel is an entry in
 * a global table; a capability is a memfd holding struct fake_cap (channel,
 * rights, badge), so it survives SCM_RIGHTS like the real fd. Delivery
 * follows the ABI: unicast and multicast receivers compete for each message,
 * broadcast receivers each see every message sent after they attached.
 * Completions are queued on the receiving ring and its eventfd signalled.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chan.h"
#include "fake-chan.h"

#define FAKE_CHANNELS	256
#define FAKE_SLOTS	32
#define FAKE_SUBS	64

struct fake_msg {
	struct ioipc_msg_info info;
	size_t len;
	uint8_t *data;
	uint64_t seq;
};

struct fake_sub {
	struct chan *chan;	/* NULL: free entry */
	struct ring *ring;
	uint64_t badge;
	uint64_t pos;		/* broadcast: next seq to receive */
};

struct fake_channel {
	bool used;
	bool dead;		/* killed: drained by its subscribers, then -EPIPE */
	unsigned int flags;	/* IOIPC_F_* */
	uint64_t next_seq;	/* seq of the next message sent */
	uint64_t head;		/* unicast/multicast: next seq to hand out */
	struct fake_msg msgs[FAKE_SLOTS];	/* by seq % FAKE_SLOTS */
	struct fake_sub subs[FAKE_SUBS];
	unsigned int rr;	/* multicast: next receiver to prefer */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_channel channels[FAKE_CHANNELS];

/* completion list per ring, protected by lock: chans whose receive completed */
struct fake_done {
	struct fake_done *next;
	struct chan *chan;
};

static void deliver(struct fake_channel *ch);

int fake_channel_create(unsigned int flags)
{
	pthread_mutex_lock(&lock);
	for (int i = 1; i < FAKE_CHANNELS; i++)
		if (!channels[i].used) {
			memset(&channels[i], 0, sizeof(channels[i]));
			channels[i].used = true;
			channels[i].flags = flags;
			pthread_mutex_unlock(&lock);
			return i;
		}
	pthread_mutex_unlock(&lock);
	return -ENOSPC;
}

void fake_channel_kill(int id)
{
	pthread_mutex_lock(&lock);
	if (id > 0 && id < FAKE_CHANNELS && channels[id].used) {
		channels[id].dead = true;
		deliver(&channels[id]);
	}
	pthread_mutex_unlock(&lock);
}

void fake_channel_destroy(int id)
{
	pthread_mutex_lock(&lock);
	if (id > 0 && id < FAKE_CHANNELS) {
		for (int s = 0; s < FAKE_SLOTS; s++)
			free(channels[id].msgs[s].data);
		/* attached subscribers keep their chan; they just never hear again */
		for (int s = 0; s < FAKE_SUBS; s++)
			if (channels[id].subs[s].chan)
				channels[id].subs[s].chan->sub_id = 0;
		memset(&channels[id], 0, sizeof(channels[id]));
	}
	pthread_mutex_unlock(&lock);
}

int fake_cap_mint(int channel, unsigned int rights, uint64_t badge)
{
	struct fake_cap cap = { .channel = (uint32_t)channel, .rights = rights, .badge = badge };
	int fd = memfd_create("fake-cap", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (write(fd, &cap, sizeof(cap)) != sizeof(cap)) {
		close(fd);
		return -EIO;
	}
	return fd;
}

int ring_init(struct ring *r, unsigned int entries)
{
	memset(r, 0, sizeof(*r));
	r->ready_tail = &r->ready_head;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0)
		return -errno;
	r->initialized = true;
	return 0;
}

static void chan_free(struct chan *c)
{
	free(c->buf);
	free(c);
}

void ring_deinit(struct ring *r)
{
	struct chan *c;

	pthread_mutex_lock(&lock);
	/* tearing down the ring detaches everything it held */
	for (int i = 0; i < FAKE_CHANNELS; i++)
		for (int s = 0; s < FAKE_SUBS; s++)
			if (channels[i].subs[s].ring == r)
				memset(&channels[i].subs[s], 0, sizeof(channels[i].subs[s]));
	while (r->pending) {
		struct fake_done *d = r->pending;

		r->pending = d->next;
		free(d);	/* closing chans are freed with the zombies below */
	}
	pthread_mutex_unlock(&lock);
	while ((c = r->zombies)) {
		r->zombies = c->ready_next;
		chan_free(c);
	}
	if (r->efd >= 0)
		close(r->efd);
	r->efd = -1;
	r->initialized = false;
	r->ready_head = NULL;
	r->ready_tail = &r->ready_head;
}

void ring_ack(struct ring *r)
{
	uint64_t v;

	if (r->efd >= 0)
		(void)!read(r->efd, &v, sizeof(v));
}

/* called with lock held: the receive of c completes with res */
static void complete(struct chan *c, int res)
{
	struct ring *r = c->fake_ring;
	struct fake_done *d = calloc(1, sizeof(*d)), **p;

	c->armed = false;
	c->res = res;
	if (!d)
		abort();
	d->chan = c;
	for (p = (struct fake_done **)&r->pending; *p; p = &(*p)->next)
		;
	*p = d;
	(void)!eventfd_write(r->efd, 1);
}

static void deliver_live(struct fake_channel *ch);

/* called with lock held: hand queued messages to armed receivers; on a dead
 * channel, receivers with nothing left fail with -EPIPE */
static void deliver(struct fake_channel *ch)
{
	deliver_live(ch);
	if (!ch->dead)
		return;
	for (int s = 0; s < FAKE_SUBS; s++) {
		struct fake_sub *sub = &ch->subs[s];

		if (sub->chan && sub->chan->armed)
			complete(sub->chan, -EPIPE);
	}
}

static void deliver_live(struct fake_channel *ch)
{
	if (ch->flags & IOIPC_F_BROADCAST) {
		for (int s = 0; s < FAKE_SUBS; s++) {
			struct fake_sub *sub = &ch->subs[s];
			struct fake_msg *m;

			if (!sub->chan || !sub->chan->armed || !(sub->chan->rights & IOIPC_SUB_RECV) ||
			    sub->pos >= ch->next_seq)
				continue;
			m = &ch->msgs[sub->pos % FAKE_SLOTS];
			memcpy(sub->chan->buf, &m->info, sizeof(m->info));
			memcpy(sub->chan->buf + sizeof(m->info), m->data, m->len);
			sub->pos++;
			complete(sub->chan, (int)(sizeof(m->info) + m->len));
		}
		return;
	}
	while (ch->head < ch->next_seq) {
		struct fake_msg *m = &ch->msgs[ch->head % FAKE_SLOTS];
		struct fake_sub *sub = NULL;

		for (unsigned int k = 0; k < FAKE_SUBS && !sub; k++) {
			struct fake_sub *x = &ch->subs[(ch->rr + k) % FAKE_SUBS];

			if (x->chan && x->chan->armed && (x->chan->rights & IOIPC_SUB_RECV)) {
				sub = x;
				ch->rr = (ch->rr + k + 1) % FAKE_SUBS;
			}
		}
		if (!sub)
			return;
		memcpy(sub->chan->buf, &m->info, sizeof(m->info));
		memcpy(sub->chan->buf + sizeof(m->info), m->data, m->len);
		ch->head++;
		complete(sub->chan, (int)(sizeof(m->info) + m->len));
	}
}

int ring_reap(struct ring *r)
{
	struct fake_done *d;
	int n = 0;

	pthread_mutex_lock(&lock);
	while ((d = r->pending)) {
		struct chan *c = d->chan;

		r->pending = d->next;
		free(d);
		n++;
		if (c->closing) {
			for (struct chan **p = &r->zombies; *p; p = &(*p)->ready_next)
				if (*p == c) {
					*p = c->ready_next;
					break;
				}
			chan_free(c);
			continue;
		}
		c->ready = true;
		c->ready_next = NULL;
		*r->ready_tail = c;
		r->ready_tail = &c->ready_next;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

bool ring_has_ready_kind(const struct ring *r, unsigned int kind)
{
	for (const struct chan *c = r->ready_head; c; c = c->ready_next)
		if (c->kind == kind)
			return true;
	return false;
}

struct chan *ring_pop_ready_kind(struct ring *r, unsigned int kind)
{
	for (struct chan **p = &r->ready_head; *p; p = &(*p)->ready_next) {
		struct chan *c = *p;

		if (kind != UINT32_MAX && c->kind != kind)
			continue;
		*p = c->ready_next;
		if (!*p)
			r->ready_tail = p;
		c->ready = false;
		c->ready_next = NULL;
		return c;
	}
	return NULL;
}

struct chan *ring_pop_ready(struct ring *r)
{
	return ring_pop_ready_kind(r, UINT32_MAX);
}

int chan_attach(struct ring *r, int cap_fd, unsigned int rights, size_t recv_size,
		unsigned int kind, void *owner, struct chan **ret)
{
	struct fake_cap cap;
	struct fake_channel *ch;
	struct chan *c;

	if (!r->initialized || cap_fd < 0 || !rights || !ret)
		return -EINVAL;
	if (pread(cap_fd, &cap, sizeof(cap), 0) != sizeof(cap))
		return -EBADF;
	if (rights & ~cap.rights)
		return -EACCES;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (recv_size) {
		c->buf_size = sizeof(struct ioipc_msg_info) + recv_size;
		c->buf = malloc(c->buf_size);
		if (!c->buf) {
			free(c);
			return -ENOMEM;
		}
	}
	pthread_mutex_lock(&lock);
	ch = cap.channel < FAKE_CHANNELS ? &channels[cap.channel] : NULL;
	if (!ch || !ch->used || ch->dead) {	/* the kernel attaches live channels only */
		pthread_mutex_unlock(&lock);
		chan_free(c);
		return -ENOENT;
	}
	for (int s = 0; s < FAKE_SUBS; s++)
		if (!ch->subs[s].chan) {
			ch->subs[s] = (struct fake_sub){ .chan = c, .ring = r, .badge = cap.badge,
							 .pos = ch->next_seq };
			c->sub_id = cap.channel;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (!c->sub_id) {
		chan_free(c);
		return -ENOSPC;
	}
	c->rights = rights;
	c->kind = kind;
	c->owner = owner;
	c->fake_ring = r;
	*ret = c;
	return 0;
}

static struct fake_sub *sub_of(struct chan *c)
{
	struct fake_channel *ch;

	if (!c->sub_id || c->sub_id >= FAKE_CHANNELS)
		return NULL;
	ch = &channels[c->sub_id];
	for (int s = 0; s < FAKE_SUBS; s++)
		if (ch->subs[s].chan == c)
			return &ch->subs[s];
	return NULL;
}

int chan_arm(struct ring *r, struct chan *c)
{
	if (!c || !c->buf || c->closing)
		return -EINVAL;
	if (c->armed || c->ready)
		return 0;
	pthread_mutex_lock(&lock);
	c->armed = true;
	if (!sub_of(c))
		complete(c, -ENOENT);
	else
		deliver(&channels[c->sub_id]);
	pthread_mutex_unlock(&lock);
	return 0;
}

int chan_send(struct ring *r, struct chan *c, const void *buf, size_t len)
{
	struct fake_channel *ch;
	struct fake_sub *sub;
	struct fake_msg *m;
	uint8_t *copy;

	if (!c || !(c->rights & IOIPC_SUB_SEND) || !buf)
		return -EINVAL;
	if (len > FAKE_MSG_MAX)
		return -EMSGSIZE;
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	pthread_mutex_lock(&lock);
	sub = sub_of(c);
	if (!sub) {
		pthread_mutex_unlock(&lock);
		free(copy);
		return -ENOENT;
	}
	ch = &channels[c->sub_id];
	/* like the kernel, a subscriber may still send into a destroyed channel:
	 * only those still attached to it can receive that */
	/* the slot about to be reused must have been consumed by everyone */
	if (ch->next_seq >= FAKE_SLOTS) {
		uint64_t oldest = ch->next_seq - FAKE_SLOTS;
		bool busy = false;

		if (ch->flags & IOIPC_F_BROADCAST) {
			for (int s = 0; s < FAKE_SUBS; s++)
				if (ch->subs[s].chan && (ch->subs[s].chan->rights & IOIPC_SUB_RECV) &&
				    ch->subs[s].pos <= oldest)
					busy = true;
		} else {
			busy = ch->head <= oldest;
		}
		if (busy) {
			pthread_mutex_unlock(&lock);
			free(copy);
			return -ENOBUFS;
		}
	}
	m = &ch->msgs[ch->next_seq % FAKE_SLOTS];
	free(m->data);
	m->data = copy;
	m->len = len;
	m->seq = ch->next_seq++;
	m->info = (struct ioipc_msg_info){
		.sender_id = 1, .pid = (uint32_t)getpid(), .uid = (uint32_t)getuid(),
		.gid = (uint32_t)getgid(), .badge = sub->badge, .len = (uint32_t)len,
	};
	deliver(ch);
	pthread_mutex_unlock(&lock);
	return (int)len;
}

void ring_unready(struct ring *r, struct chan *c)
{
	if (!c->ready)
		return;
	for (struct chan **p = &r->ready_head; *p; p = &(*p)->ready_next)
		if (*p == c) {
			*p = c->ready_next;
			if (!*p)
				r->ready_tail = p;
			break;
		}
	c->ready = false;
	c->ready_next = NULL;
}

void chan_cancel_wait(struct ring *r, struct chan *c)
{
	if (!c || !c->armed)
		return;
	pthread_mutex_lock(&lock);
	if (c->armed)
		complete(c, -ECANCELED);
	pthread_mutex_unlock(&lock);
	ring_reap(r);
	if (c->ready && c->res < 0)
		ring_unready(r, c);
}

void chan_close(struct ring *r, struct chan *c)
{
	struct fake_sub *sub;

	if (!c)
		return;
	if (c->ready) {
		for (struct chan **p = &r->ready_head; *p; p = &(*p)->ready_next)
			if (*p == c) {
				*p = c->ready_next;
				if (!*p)
					r->ready_tail = p;
				break;
			}
		c->ready = false;
	}
	pthread_mutex_lock(&lock);
	sub = sub_of(c);
	if (sub)
		memset(sub, 0, sizeof(*sub));
	if (c->armed) {
		/* like the cancel of the real receive: completes later */
		c->closing = true;
		c->ready_next = r->zombies;
		r->zombies = c;
		complete(c, -ECANCELED);
		pthread_mutex_unlock(&lock);
		return;
	}
	pthread_mutex_unlock(&lock);
	chan_free(c);
}

int chan_message(const struct chan *c, const struct ioipc_msg_info **ret_info,
		 const void **ret_payload, size_t *ret_len)
{
	const struct ioipc_msg_info *info;

	if (c->res < 0)
		return c->res;
	if ((size_t)c->res < sizeof(*info))
		return -EBADMSG;
	info = (const struct ioipc_msg_info *)c->buf;
	*ret_info = info;
	*ret_payload = c->buf + sizeof(*info);
	*ret_len = (size_t)c->res - sizeof(*info);
	return 0;
}
