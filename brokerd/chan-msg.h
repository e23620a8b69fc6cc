/* SPDX-License-Identifier: MIT */
/*
 * chan-msg.h - a channel message as brokerd's D-Bus side receives it (the
 * bridge, dbus-bridge.c, and the D-Bus monitors of native traffic,
 * dbus-monitor-native.c): taken whole from a completed receive, decoded,
 * its body mapped when it came in a memfd, and the body brought to native
 * byte order for a D-Bus message, never re-marshalled.
 */
#ifndef BROKERD_CHAN_MSG_H
#define BROKERD_CHAN_MSG_H

#include "client/chan.h"
#include "protocol/message.h"

/*
 * Takes ch's received message: its info header, m decoded (strings and body
 * point into ch's buffer or *map), and its fds (*fds, *n; malloc'ed, the
 * body's memfd mapped at *map and closed). 0, or -EBADMSG (malformed, fds
 * cut off) or -ENOMEM. Whatever it set is the caller's either way: fds to
 * close and free, *map to munmap (m->body_len bytes).
 */
int chan_msg_take(struct chan *ch, const struct ioipc_msg_info **info, struct chmsg *m, int **fds,
		  unsigned int *n, void **map);
/* Done with a taken message: the n fds left in fds closed (fds itself is not freed), map and body freed. */
void chan_msg_release(const int *fds, unsigned int n, void *map, const struct chmsg *m, void *body);
/* m's body copied into *ret (malloc'ed; NULL for none) in native byte order: 0, -EBADMSG, -ENOMEM. */
int chan_msg_body_native(const struct chmsg *m, unsigned int n_fds, void **ret);

#endif
