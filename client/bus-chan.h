/* SPDX-License-Identifier: MIT */
/*
 * bus-chan.h - the chans of a bus (bus-chan.c).
 */
#ifndef BROKERD_CLIENT_BUS_CHAN_H
#define BROKERD_CLIENT_BUS_CHAN_H

#include <stdbool.h>
#include <stdint.h>
#include "client/bus-internal.h"

/* Attaches cap fd (always closed) with rights as a chan of kind for owner,
 * with a receive armed if it receives. */
int bus_chan_attach(brokerd_bus *bus, int fd, unsigned int rights, unsigned int kind, void *owner,
		    struct chan **ret);
/*
 * Encodes m (with the typed message's fds, bus->send_fds, dup'ed) into o:
 * inline when it fits inline_max (bus_chan_inline_max()), else the header
 * with the body in a sealed memfd passed as the last fd. 0, -EINVAL,
 * -EMSGSIZE (a body over CHMSG_BODY_MAX), -ENOMEM, or memfd's errors.
 * bus_out_deinit() frees it.
 */
int bus_out_encode(brokerd_bus *bus, const struct chmsg *m, size_t inline_max, struct bus_out *o);
/*
 * The OPEN_CALL flags that ask for the channel's size and for the pid in
 * CallReceiverEnded, if this brokerd tells them.
 */
static inline uint32_t bus_open_call_flags(const brokerd_bus *bus)
{
	return ((bus->features & CTRL_FEATURE_MSG_SIZE) ? CTRL_CALL_MSG_SIZE : 0) |
	       ((bus->features & CTRL_FEATURE_ENDED_PID) ? CTRL_CALL_ENDED_PID : 0);
}
/* The largest message sent inline on c: what brokerd told, else BUS_INLINE_MAX (c may be NULL). */
size_t bus_chan_inline_max(const struct chan *c);
/*
 * The channel size an OPEN_CALL or REQUEST_NAME reply tells (asked with
 * its MSG_SIZE flag): its second field, or 0 when it has none.
 */
uint32_t bus_reply_msg_max(const struct ctrl_reply *r);
void bus_out_deinit(struct bus_out *o);
struct bus_out *bus_out_free(struct bus_out *o);
DEFINE_FREE_FUNC(struct bus_out, bus_out_free);
/* Sends o on c (its fds too): bytes sent or -errno. */
int bus_out_send(brokerd_bus *bus, struct chan *c, const struct bus_out *o);
/*
 * bus_out_encode() for a message sent at once (bus_chan_send()): into the
 * bus's send buffer, which o borrows, or, for a typed body with room in
 * front (bus->send_room, taken once), in place: the header written in the
 * room and o's bytes those of the message. Valid until the next send.
 */
int bus_out_encode_now(brokerd_bus *bus, const struct chmsg *m, size_t inline_max, struct bus_out *o);
/* Encodes m and sends it on c: 0 or -errno. */
int bus_chan_send(brokerd_bus *bus, struct chan *c, const struct chmsg *m);
/*
 * bus_chan_send() in the open batch: m encoded into the batch's buffer (a
 * typed body copied there too, so that the caller may free it) and its send
 * queued, not submitted; the batch submitted first if it is full. 0 or the
 * encoding's -errno; the send's own result goes to bus->batch->error.
 */
int bus_batch_send(brokerd_bus *bus, struct chan *c, const struct chmsg *m);
/*
 * Submits the batch's queued sends in one system call, waits for their
 * completions and gives their buffers back: 0 (their errors go to
 * bus->batch->error) or io_uring_enter()'s error (they stay queued).
 */
int bus_batch_flush(brokerd_bus *bus);
/*
 * The signature a byte API message carries (bus_bytes_body()): this very
 * pointer, not the string, tells bus_out_encode() and bus_chan_send() that
 * body/body_len are the user's bytes, to be sent as an "ay" of them.
 */
extern const char bus_bytes_signature[];
/*
 * Makes bytes (size of them) the body of m as the byte-oriented API sends
 * them: signature "ay", or no body for no bytes. Nothing is copied: m
 * points at the bytes, tagged by bus_bytes_signature, and the "ay" is laid
 * out when m is encoded, straight into the buffer it is sent from; only
 * bus_out_encode() and bus_chan_send() may encode such an m (chmsg_encode()
 * would take the bytes for the marshalled body). *ret_data is always NULL
 * (kept for the callers' cleanup). 0, -EINVAL (bytes NULL with a size),
 * -EMSGSIZE (more than DBUS_ARRAY_MAX, what an "ay" holds).
 */
int bus_bytes_body(struct chmsg *m, const void *bytes, size_t size, void **ret_data);
/* The next message serial (never 0). */
uint32_t bus_next_serial(brokerd_bus *bus);

/* Keeps c receiving until it is drained (see struct retired_chan). */
void bus_chan_retire(brokerd_bus *bus, struct chan *c);
bool bus_chan_is_retired(brokerd_bus *bus, struct chan *c);
/* Closes retired chans: c only, those owned by owner, or all (both NULL). */
void bus_retired_close(brokerd_bus *bus, struct chan *c, void *owner);

/* Attaches a monitor cap (fd, always consumed) for name's chan of kind. */
int bus_monitor_add(brokerd_bus *bus, const char *name, unsigned int kind, int fd);
void bus_monitors_clear(brokerd_bus *bus);

#endif
