/* SPDX-License-Identifier: MIT */
/*
 * restart-io.c - the byte encoding of a handed-over state, its sealed
 * memfd, systemd's fd store and finding a stored socket again (see
 * restart-io.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "brokerd/log.h"
#include "brokerd/registry.h"
#include "brokerd/restart-io.h"
#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/macro.h"

#define FDS_PER_MESSAGE 250 /* below the kernel's SCM_MAX_FD (253) */

void wbuf_put(struct wbuf *w, const void *p, size_t n)
{
	if (w->oom || ARRAY_RESERVE(w->data, w->alloc, w->len + n) < 0) {
		w->oom = true;
		return;
	}
	memcpy(w->data + w->len, p, n);
	w->len += n;
}

void wbuf_put_u32(struct wbuf *w, uint32_t v)
{
	wbuf_put(w, &v, sizeof(v));
}

void wbuf_put_u64(struct wbuf *w, uint64_t v)
{
	wbuf_put(w, &v, sizeof(v));
}

void wbuf_put_str(struct wbuf *w, const char *s)
{
	wbuf_put_u32(w, (uint32_t)strlen(s));
	wbuf_put(w, s, strlen(s));
}

size_t wbuf_record_begin(struct wbuf *w, uint32_t t)
{
	size_t at;

	wbuf_put_u32(w, t);
	w->records++;
	at = w->len;
	wbuf_put_u32(w, 0);
	return at;
}

void wbuf_record_end(struct wbuf *w, size_t at)
{
	uint32_t len = (uint32_t)(w->len - at - sizeof(uint32_t));

	if (!w->oom)
		memcpy(w->data + at, &len, sizeof(len));
}

void rbuf_get(struct rbuf *r, void *out, size_t n)
{
	if (r->bad || r->left < n) {
		r->bad = true;
		memset(out, 0, n);
		return;
	}
	memcpy(out, r->p, n);
	r->p += n;
	r->left -= n;
}

uint32_t rbuf_get_u32(struct rbuf *r)
{
	uint32_t v;

	rbuf_get(r, &v, sizeof(v));
	return v;
}

uint64_t rbuf_get_u64(struct rbuf *r)
{
	uint64_t v;

	rbuf_get(r, &v, sizeof(v));
	return v;
}

char *rbuf_get_str(struct rbuf *r)
{
	uint32_t n = rbuf_get_u32(r);
	char *s;

	if (r->bad || n > r->left || n > CTRL_MSG_MAX) {
		r->bad = true;
		return NULL;
	}
	s = strndup((const char *)r->p, n);
	if (!s || strlen(s) != n) {
		free(s);
		r->bad = true;
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return s;
}

void wbuf_put_socket(struct wbuf *w, int fd, const struct ucred *cred)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		w->oom = true; /* cannot be found again: no state at all */
		return;
	}
	wbuf_put_u64(w, st.st_dev);
	wbuf_put_u64(w, st.st_ino);
	wbuf_put_u32(w, (uint32_t)cred->pid);
	wbuf_put_u32(w, cred->uid);
	wbuf_put_u32(w, cred->gid);
}

void rbuf_get_socket(struct rbuf *r, struct restart_socket *s)
{
	s->dev = rbuf_get_u64(r);
	s->ino = rbuf_get_u64(r);
	s->cred.pid = (pid_t)rbuf_get_u32(r);
	s->cred.uid = rbuf_get_u32(r);
	s->cred.gid = rbuf_get_u32(r);
}

#define OWNER_OTHER (1U << 31) /* beyond every CTRL_NAME_* flag */

void wbuf_put_queue(struct wbuf *w, struct registry *reg, const char *name, enum registry_peer_kind kind)
{
	size_t count = registry_name_queue(reg, name, NULL, 0);
	struct registry_peer **q = calloc(count ? count : 1, sizeof(*q));

	if (!q) {
		w->oom = true;
		return;
	}
	registry_name_queue(reg, name, q, count);
	wbuf_put_u32(w, (uint32_t)count);
	for (size_t i = 0; i < count; i++) {
		wbuf_put_u64(w, q[i]->id);
		wbuf_put_u32(w, (uint32_t)registry_name_entry_flags(reg, q[i], name) |
					(q[i]->kind != kind ? OWNER_OTHER : 0));
	}
	free(q);
}

int rbuf_get_queue(struct rbuf *r, struct restart_owner **ret, size_t *n)
{
	uint32_t count = rbuf_get_u32(r);
	struct restart_owner *o;

	if (r->bad || count > r->left / 12)
		return -EBADMSG;
	o = calloc(count ? count : 1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		o[i].peer_id = rbuf_get_u64(r);
		o[i].flags = rbuf_get_u32(r);
		o[i].other = o[i].flags & OWNER_OTHER;
		o[i].flags &= ~OWNER_OTHER;
	}
	*ret = o;
	*n = count;
	return 0;
}

void restart_state_write(struct wbuf *w, const char *magic, uint32_t version,
			 const struct restart_record *types, size_t n_types, void *ctx)
{
	wbuf_put(w, magic, 8);
	wbuf_put_u32(w, version);
	wbuf_put_u32(w, 1); /* clean: written whole by a stop that went through */
	for (size_t i = 0; i < n_types; i++)
		types[i].save(ctx, w);
	if (version >= RESTART_END_VERSION) {
		uint32_t n = w->records;
		size_t at = wbuf_record_begin(w, RESTART_REC_END);

		wbuf_put_u32(w, n);
		wbuf_record_end(w, at);
	}
}

int restart_state_parse_bytes(const void *data, size_t size, const char *what, const char *magic,
			      uint32_t version, const struct restart_record *types, size_t n_types,
			      void *state)
{
	struct rbuf r = { .p = data, .left = size };
	size_t last = 0; /* the row of the last record: a writer writes them in the rows' order */
	uint32_t v, records = 0;
	bool end = false;
	char m[8];

	rbuf_get(&r, m, sizeof(m));
	v = rbuf_get_u32(&r);
	if (r.bad || memcmp(m, magic, 8) != 0 ||
	    (v != version && !(version == RESTART_END_VERSION && v == 1))) {
		log_warning("restart: the stored %s is not of version %u", what, version);
		return -EPROTO;
	}
	if (rbuf_get_u32(&r) != 1) {
		log_warning("restart: the stored %s has no clean mark", what);
		return -EPROTO;
	}
	while (r.left > 0) {
		uint32_t type = rbuf_get_u32(&r), len = rbuf_get_u32(&r);
		struct rbuf rec = { .p = r.p, .left = len };
		size_t i;
		int ret;

		if (r.bad || len > r.left) {
			log_warning("restart: the stored %s is cut short (%zu bytes)", what, size);
			return -EBADMSG;
		}
		r.p += len;
		r.left -= len;
		if (type == RESTART_REC_END && v >= RESTART_END_VERSION) {
			struct rbuf e = { .p = rec.p, .left = rec.left };

			if (rbuf_get_u32(&e) != records || e.bad || e.left != 0 || r.left != 0) {
				log_warning("restart: the stored %s does not end as it was written", what);
				return -EBADMSG;
			}
			end = true;
			break;
		}
		records++;
		for (i = 0; i < n_types; i++)
			if (types[i].type == type)
				break;
		if (i == n_types) {
			log_warning("restart: unknown record type %u in the stored %s", type, what);
			return -EPROTO;
		}
		if (i < last) {
			log_warning("restart: %s record out of order in the stored %s", types[i].what, what);
			return -EBADMSG;
		}
		last = i;
		ret = types[i].load(state, &rec);
		if (ret == 0 && (rec.bad || rec.left != 0))
			ret = -EBADMSG;
		if (ret < 0) {
			if (ret != -ENOMEM)
				log_warning("restart: malformed %s record in the stored %s", types[i].what,
					    what);
			return ret;
		}
	}
	if (v >= RESTART_END_VERSION && !end) {
		log_warning("restart: the stored %s is cut short (%zu bytes)", what, size);
		return -EBADMSG;
	}
	return 0;
}

int restart_state_parse(int fd, const char *what, const char *magic, uint32_t version,
			const struct restart_record *types, size_t n_types, void *state)
{
	const int sealed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
	struct stat st;
	void *map;
	int seals, ret;

	/*
	 * Only a memfd sealed as restart_memfd() seals it: an fd anyone could
	 * still write or shrink would change under the reader (a mapping
	 * shrunk away is a SIGBUS, not an error).
	 */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & sealed) != sealed) {
		log_warning("restart: the stored %s is not a sealed memfd", what);
		return -EPROTO;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 16 || st.st_size > RESTART_STATE_MAX) {
		log_warning("restart: the stored %s has an impossible size", what);
		return -EBADMSG;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	ret = restart_state_parse_bytes(map, (size_t)st.st_size, what, magic, version, types, n_types, state);
	munmap(map, (size_t)st.st_size);
	return ret;
}

int restart_memfd(const char *name, const struct wbuf *w)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), r;

	/* Sealed: the next brokerd reads what this one wrote, nobody changes it meanwhile. */
	if (fd < 0 || write(fd, w->data, w->len) != (ssize_t)w->len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		r = errno ? -errno : -EIO;
		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

int restart_store(const char *name, const int *fds, size_t n)
{
	char msg[64];
	int r = 1;

	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
	for (size_t i = 0; i < n && r > 0; i += FDS_PER_MESSAGE)
		r = sd_pid_notify_with_fds(0, 0, msg, fds + i,
					   (unsigned int)(n - i < FDS_PER_MESSAGE ? n - i : FDS_PER_MESSAGE));
	return r;
}

int restart_socket_take(int *fds, size_t n, const struct restart_socket *s)
{
	for (size_t j = 0; j < n; j++) {
		struct ucred now;
		socklen_t l = sizeof(now);
		struct stat st;
		int fd = fds[j];

		if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_dev != s->dev ||
		    (uint64_t)st.st_ino != s->ino)
			continue;
		fds[j] = -1;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &now, &l) < 0 || now.pid != s->cred.pid ||
		    now.uid != s->cred.uid || now.gid != s->cred.gid) {
			close(fd);
			return -EPERM;
		}
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		return fd;
	}
	return -ENOENT;
}

/* One round of restart_settle(): flush until nothing is left to send or it is end. */
static void restart_drain(uint64_t end, size_t (*flush)(void *ctx, struct pollfd *p, size_t max), void *ctx)
{
	for (;;) {
		size_t n = flush(ctx, NULL, 0), m;
		struct pollfd *p;

		if (n == 0 || now_usec() >= end)
			return;
		p = calloc(n, sizeof(*p));
		if (!p)
			return;
		m = flush(ctx, p, n);
		(void)poll(p, m < n ? m : n, 50);
		free(p);
	}
}

void restart_settle(uint64_t usec, size_t (*flush)(void *ctx, struct pollfd *p, size_t max),
		    bool (*close_rest)(void *ctx), void *ctx)
{
	uint64_t end = now_usec() + usec;

	for (int round = 0; round < 4; round++) {
		restart_drain(end, flush, ctx);
		if (!close_rest(ctx))
			return;
	}
}
