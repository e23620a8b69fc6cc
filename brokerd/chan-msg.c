/* SPDX-License-Identifier: MIT */
/* chan-msg.c - a channel message as brokerd's D-Bus side receives it (chan-msg.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "brokerd/chan-msg.h"
#include "protocol/body-memfd.h"
#include "protocol/dbus-marshal.h"

int chan_msg_take(struct chan *ch, const struct ioipc_msg_info **info, struct chmsg *m, int **fds,
		  unsigned int *n, void **map)
{
	const struct ioipc_fds_hdr *fh;
	const void *payload;
	size_t len = 0;
	int r;

	*info = NULL;
	*fds = NULL;
	*n = 0;
	*map = NULL;
	r = chan_message(ch, info, &payload, &len);
	fh = chan_take_fds(ch); /* ours from here on, whatever becomes of the message */
	if (fh && fh->nr) {
		*fds = malloc(fh->nr * sizeof(int));
		if (!*fds) {
			for (unsigned int i = 0; i < fh->nr; i++)
				close(fh->fds[i]);
			return -ENOMEM;
		}
		*n = fh->nr;
		memcpy(*fds, fh->fds, *n * sizeof(int));
	}
	if (r < 0 || (fh && (fh->flags & IOIPC_FDS_TRUNC)) || chmsg_decode(m, payload, len) < 0 ||
	    m->n_fds != *n)
		return -EBADMSG;
	if (m->body_in_fd) {
		if (chmsg_body_map((*fds)[*n - 1], m->body_len, map) < 0 || chmsg_decode_body(m, *map) < 0)
			return -EBADMSG;
		close((*fds)[--*n]);
	}
	return 0;
}

void chan_msg_release(const int *fds, unsigned int n, void *map, const struct chmsg *m, void *body)
{
	for (unsigned int i = 0; fds && i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (map)
		munmap(map, m->body_len);
	free(body);
}

int chan_msg_body_native(const struct chmsg *m, unsigned int n_fds, void **ret)
{
	void *body;
	int r;

	*ret = NULL;
	if (!m->body_len)
		return 0;
	/* a copy: the buffer is the ring's, or the sender's sealed pages */
	body = malloc(m->body_len);
	if (!body)
		return -ENOMEM;
	memcpy(body, m->body, m->body_len);
	r = dbus_body_to_native(m->signature ? m->signature : "", body, m->body_len, m->byte_order, n_fds);
	if (r < 0) {
		free(body);
		return -EBADMSG;
	}
	*ret = body;
	return 0;
}
