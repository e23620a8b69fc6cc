/* SPDX-License-Identifier: MIT */
/*
 * bus-internal.h - the inside of a brokerd_bus: the structs every module of
 * the library shares (and brokerctl and the guest tests read), no
 * functions. Each module's functions are in its own header; client/README.md
 * says which module may use which.
 */
#ifndef BROKERD_CLIENT_BUS_INTERNAL_H
#define BROKERD_CLIENT_BUS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "brokerd/brokerd.h"
#include "client/chan.h"
#include "protocol/ctrl.h"
#include "protocol/dbus-match.h"
#include "protocol/message.h"
#include "util/clock.h" /* now_usec() */
#include "util/macro.h"

#define _public_ __attribute__((visibility("default")))

/* chan kinds */
enum {
	CHAN_INBOX = 1,	  /* our unicast inbox: replies, unicast signals */
	CHAN_CALL_RECV,	  /* a name we own: calls to serve */
	CHAN_SIGNAL_RECV, /* a name we subscribe to */
	CHAN_CALL_SEND,	  /* a name we call */
	CHAN_SIGNAL_SEND, /* a name we own: signals to emit */
	CHAN_PEER_SEND,	  /* a peer's inbox: our replies */
	CHAN_MONITOR,	  /* monitor copy of some channel */
};

#define BUS_DEFAULT_TIMEOUT_USEC (25ULL * 1000000ULL)
#define BUS_CTRL_TIMEOUT_MSEC	 30000 /* > brokerd's 25 s activation wait */
#define BUS_PEERS_MAX		 1024  /* inbox SEND caps kept (bus-inbox.c) */
#define BUS_RECONNECT_MIN_MSEC	 50
#define BUS_RECONNECT_MAX_MSEC	 2000
#define BNAME_RECEIVERS_MAX	 32
#define BUS_HELD_REPLIES	 4 /* replies a call keeps while its receipt is due */
/*
 * Largest message sent inline on a chan whose size brokerd did not tell
 * (chan.msg_max 0): the max_msg_size of its default channels, and the
 * smallest slot size it makes (brokerd/policy.h). A message whose header and
 * body do not fit goes as its header, with the body in a sealed memfd
 * (BODY_FD, protocol/README.md 7.2).
 */
#define BUS_INLINE_MAX 8192
/*
 * The largest body that came in a memfd read into a buffer (msg.c,
 * chmsg_body_read()) rather than mapped: up to here one pread() costs less
 * than a mapping, its page faults and its munmap() (client/README.md).
 */
#define BUS_BODY_READ_MAX 65536
/*
 * A copied message's block (msg.c, msg_block_get()): at least this many
 * bytes, so that the next message fits the one kept; one larger than
 * MSG_BLOCK_KEEP_MAX (a body of nearly a slot's 64 KiB) is freed instead.
 */
#define MSG_BLOCK_MIN	   4096
#define MSG_BLOCK_KEEP_MAX (CHMSG_MAX + 4096)

/*
 * Room a typed message's body is marshalled after (dbus_writer_init_room()),
 * for the header to be written in front of it when it is sent: what a
 * header with a long path, interface, member and destination takes.
 */
#define MSG_HEADER_ROOM 256
/*
 * Provided buffers per multishot chan (client/chan.c): the messages one
 * subscription can take before the layer above dispatches them; as many as
 * brokerd's channels have slots by default. Each is CHMSG_MAX plus headers,
 * mapped, so only the pages messages were written to are backed.
 */
#define BUS_RECV_BUFS 32

/* A message encoded for chan_send_fds(): its bytes and the fds to pass (owned). */
struct bus_out {
	uint8_t *buf; /* CHMSG_MAX bytes: its own, or the bus's send_buf (borrowed) */
	bool borrowed;
	size_t len;
	unsigned int n_fds;
	int fds[CHMSG_FDS_MAX];
};

/*
 * A send batch (brokerd_bus_batch_begin()): signals emitted while it is
 * open are encoded one after the other into buf and queued in the ring,
 * submitted together (one io_uring_enter) by brokerd_bus_batch_end(), or
 * earlier when BUS_BATCH_MAX are queued or buf has no room for another.
 * Made at the first batch and kept: no allocation per message.
 */
#define BUS_BATCH_MAX	32
#define BUS_BATCH_BYTES (256 * 1024)
struct bus_batch {
	bool open;
	unsigned int n; /* queued, in out[] and op[] */
	size_t used;	/* bytes of buf they take */
	int error;	/* the first send that failed since the batch began (-errno) */
	uint8_t *buf;	/* BUS_BATCH_BYTES */
	struct bus_out out[BUS_BATCH_MAX];
	struct chan_send_op op[BUS_BATCH_MAX];
};

/* State per well-known name this bus uses. */
struct bname {
	struct bname *next;
	char *name;
	struct chan *sig_recv, *sig_send, *call_recv, *call_send;
	unsigned int n_subs; /* subscription slots */
	bool requested;	     /* re-request after reconnect */
	unsigned int req_flags;
	/*
	 * Connection ids brokerd listed as the name's owner and queue (pool
	 * workers among them) when last asked, at receivers_usec (0: never):
	 * replies to our calls are accepted from these only (bus-call.c).
	 */
	uint64_t receivers[BNAME_RECEIVERS_MAX];
	unsigned int n_receivers;
	uint64_t receivers_usec;
	bool watched; /* handed over by WATCH_SIGNALS: holds one of n_subs */
	/* an OPEN_CALL is on its way (bus-call.c): calls wait in their slots */
	bool opening;
	bool flushing; /* the waiting calls are going out: b must stay */
	/* subscribers that lost a signal to our emits, not yet told to the handler (bus-name.c) */
	uint64_t emit_lost;
};

/*
 * A call channel subscription replaced by a new cap for the same name (a pool
 * member promoted to primary owner): it keeps receiving, so that no call it
 * already took is lost, until its receive fails (revoked: -EACCES) or the
 * name or the connection goes.
 */
struct retired_chan {
	struct retired_chan *next;
	struct chan *chan;
};

/* A SEND cap to another connection's inbox (bus-inbox.c). */
struct peer_inbox {
	struct peer_inbox *next;
	uint64_t id;
	struct chan *send;
};

/*
 * A control request whose reply is dispatched when it comes (bus-control.c):
 * handler gets the reply (r, its fds to take) or an error (r NULL).
 */
struct ctrl_reply;
typedef void (*bus_ctrl_handler_t)(brokerd_bus *bus, struct ctrl_reply *r, int error, void *userdata);
struct ctrl_pending {
	struct ctrl_pending *next;
	uint32_t serial;
	bus_ctrl_handler_t handler;
	void *userdata;
};

/* A control datagram kept for later (signals that arrived during a request). */
struct ctrl_queued {
	struct ctrl_queued *next;
	uint64_t seq; /* its place among the datagrams read (bus->ctrl_seq) */
	size_t len;
	unsigned int n_fds;
	int fds[CTRL_FDS_MAX];
	uint8_t data[];
};

/*
 * A match rule (bus-match.c), shared by every slot that added the same
 * canonical rule: one filter, one subscription.
 */
struct bus_match {
	struct bus_match *next;
	char *text; /* canonical */
	struct dbus_match_rule rule;
	unsigned int n_slots;
	unsigned int n_ref;  /* n_slots, and dispatches running */
	struct bname *bname; /* a well-known sender: its subscription */
	bool watch;	     /* no well-known sender: counted in bus->n_watch_matches */
};

/* What the kernel said of a call's message (IOIPC_SEND_RECEIPT, bus-call.c). */
enum call_receipt {
	RECEIPT_NONE,	 /* not asked for (a kernel without receipts): any receiver may have it */
	RECEIPT_PENDING, /* not taken yet */
	RECEIPT_TAKEN,	 /* taken by the process slot.taker */
};

/*
 * A process that took calls of ours (the pid a receipt named), watched
 * through a pidfd (bus-taker.c): its end fails the calls it took.
 */
struct bus_taker {
	struct bus_taker *next;
	pid_t pid;
	int pidfd;	      /* in bus.taker_epfd; -1 once ended */
	unsigned int n_calls; /* pending calls it took (slot.watch); 0: kept idle */
	bool ended;	      /* its calls fail (bus_call_due()) */
};

enum slot_type {
	SLOT_SUBSCRIBE,
	SLOT_METHOD,
	SLOT_WATCH,
	SLOT_CALL,
	SLOT_MONITOR,
	SLOT_MATCH,
	/* bus-object.c: name is the object path, member the interface */
	SLOT_OBJECT,
	SLOT_OBJECT_MANAGER,
};

typedef void (*bus_monitor_handler_t)(brokerd_bus *bus, const char *name, unsigned int kind, brokerd_msg *msg,
				      int error, void *userdata);

struct brokerd_slot {
	brokerd_bus *bus;
	struct brokerd_slot *next, *prev;
	enum slot_type type;
	bool floating; /* owned by the bus, not the caller */
	char *name;
	char *member; /* member (method) or filter (subscribe) */
	struct bname *bname;
	struct bus_match *match; /* SLOT_MATCH */
	union {
		brokerd_msg_handler_t msg;
		brokerd_name_handler_t name;
		brokerd_reply_handler_t reply;
		bus_monitor_handler_t monitor;
	} handler;
	void *userdata;
	uint32_t serial;   /* calls */
	uint64_t deadline; /* calls: CLOCK_MONOTONIC usec */
	uint64_t sent;	   /* calls: when, CLOCK_MONOTONIC usec */
	uint64_t ctrl_seq; /* calls: control datagrams read before it was sent */
	/* calls: the encoded call, until the name's call chan is open */
	struct bus_out *queued;
	bool reopened;			     /* calls: its chan was reopened once for it (revoked) */
	uint64_t ended_receiver;	     /* calls: a receiver that may have taken it ended (its id) */
	pid_t ended_pid;		     /* calls: with ended_receiver, its pid if brokerd told (or 0) */
	uint64_t timeout_at;		     /* calls: its timeout (deadline may be 1: "look at it now") */
	enum call_receipt receipt;	     /* calls: see enum call_receipt */
	pid_t taker;			     /* calls: RECEIPT_TAKEN: its pid, 0 if not visible to us */
	struct bus_taker *watch;	     /* calls: taker's pidfd, if it could be watched */
	int dropped;			     /* calls: the kernel dropped it untaken (-errno) */
	bool owner_lost;		     /* calls: its name's last owner went (bus-dispatch.c) */
	brokerd_msg *held[BUS_HELD_REPLIES]; /* calls: replies that came before the receipt */
	unsigned int n_held;
	const struct brokerd_vtable *vtable; /* objects: the caller's */
	uint64_t lost;			     /* subscriptions, matches, monitors: what the kernel dropped */
	brokerd_lost_handler_t lost_handler;
};

struct monitor_chan {
	struct monitor_chan *next;
	char *name;
	unsigned int kind;
	struct chan *chan;
};

struct brokerd_bus {
	unsigned int n_ref;
	char *path;
	int ctrl_fd;
	int epoll_fd;
	int timer_fd;
	/*
	 * The control socket, the timerfd and taker_epfd once more, in a set of
	 * their own that the ring polls (ring.wake_fd): brokerd_bus_wait()
	 * waits in the ring (ring_wait()), for completions and these alike.
	 */
	int wake_epfd;
	struct ring ring;

	bool connected;
	bool ctrl_failed; /* a control request found it broken */
	bool closed;
	bool reconnect;
	unsigned int backoff_msec;
	uint64_t reconnect_at;
	brokerd_state_handler_t state_handler;
	void *state_userdata;

	uint64_t id;
	char unique_name[CTRL_UNIQUE_NAME_MAX];
	uint32_t features;
	struct chan *inbox;

	uint32_t ctrl_serial;
	uint32_t msg_serial;
	struct bname *names;
	struct peer_inbox *peer_inboxes;
	unsigned int n_peer_inboxes;
	struct brokerd_slot *slots;
	/* the last call slot freed, its name and member kept: the next call's, without an allocation */
	struct brokerd_slot *slot_spare;
	struct ctrl_queued *cq_head, **cq_tail;
	/*
	 * Control datagrams read so far. brokerd writes a signal that a call's
	 * receiver is gone only after that receiver can no longer take calls,
	 * so a call sent after the signal was read (even if it still waits in
	 * the queue) cannot have been that receiver's: bus-dispatch.c compares.
	 */
	uint64_t ctrl_seq;
	struct ctrl_pending *ctrl_pending; /* requests whose replies are dispatched */
	struct monitor_chan *monitors;
	struct retired_chan *retired;
	/* processes that took our calls (bus-taker.c): a pidfd each, in taker_epfd (in epoll_fd) */
	struct bus_taker *takers;
	unsigned int n_takers_idle;
	int taker_epfd;	   /* -1 until the first */
	bool takers_ready; /* taker_epfd may have ends to read */
	/* match rules (bus-match.c); those without a well-known sender need the watch */
	struct bus_match *matches;
	unsigned int n_watch_matches;

	unsigned int sync_depth; /* inside a synchronous call */
	bool sync_opening;	 /* brokerd_bus_call() is sending its call */
	bool exit;
	int exit_code;

	void *event_source; /* sd_event_source */
	void *event;	    /* sd_event */

	/*
	 * The fds of the typed message being sent (msg-typed.c): the public
	 * byte-and-signature functions it sends through take no fds, so the
	 * next message encoded (bus_out_encode()) takes these, once.
	 */
	const int *send_fds;
	unsigned int n_send_fds;
	/*
	 * The typed signal or reply being sent: its sealed body has
	 * MSG_HEADER_ROOM bytes free in front of it (from here to the body),
	 * where bus_chan_send() writes the header and sends from, copying
	 * nothing; taken once, like send_fds.
	 */
	uint8_t *send_room;

	uint64_t spin_usec; /* low-latency mode: spin this long on the CQ before sleeping */
	uint64_t timer_next; /* what timer_fd is armed for (UINT64_MAX: nothing, 0: not set yet) */
	/*
	 * What the last wait of brokerd_bus_wait() told, for the next pass:
	 * set, the pass needs no read of the eventfd and reads the control
	 * socket only if ctrl_idle is clear. A pass without a wait before it
	 * (an outside event loop) reads both.
	 */
	bool waited;
	bool ctrl_idle; /* the control socket said EAGAIN, and the wake set's poll said nothing since */
	bool kicked;	/* bus_kick() since the last pass began: brokerd_bus_wait() does not sleep */
	/*
	 * Where messages sent at once are encoded (bus_chan_send()), reused:
	 * the send completes before anything else runs, so one is enough.
	 */
	uint8_t *send_buf;
	struct bus_batch *batch; /* NULL until the first brokerd_bus_batch_begin() */
	/* what emits cost subscribers, told to this handler (bus_emit_lost_notify()) */
	brokerd_emit_lost_handler_t emit_lost_handler;
	void *emit_lost_userdata;
	uint64_t emit_lost_unowned; /* not yet told, for names no longer ours */

	/* a received message's struct, kept for the next (msg.c) */
	struct brokerd_msg *msg_cache;
	/* a copied message's block (a call's, received single-shot), kept for the next (msg.c) */
	struct brokerd_msg *msg_block;
	/* a buffer of BUS_BODY_READ_MAX + 1 bytes for a memfd body, kept for the next (msg.c) */
	void *body_cache;

	/* messages dropped, by BROKERD_COUNTER_* (brokerd_bus_get_counter()) */
	uint64_t counters[_BROKERD_COUNTER_MAX];

	char error_name[CTRL_NAME_MAX + 1]; /* last control error */
	char error_message[256];
};

struct brokerd_msg {
	unsigned int n_ref;
	brokerd_bus *bus; /* holds a reference */
	int type;
	uint16_t flags;
	uint32_t serial;
	uint32_t reply_serial;
	bool replied;
	char sender[CTRL_UNIQUE_NAME_MAX];
	struct brokerd_creds creds;
	char *name;
	char *member; /* of a call or signal; an error's error name */
	char *path, *interface, *error_name, *destination, *signature; /* "" when absent */
	/* the dbus1 body, in native byte order */
	void *data;
	size_t data_len;
	/*
	 * A body that came in a memfd: data points into this private read-only
	 * mapping, or, up to BUS_BODY_READ_MAX, into body_buf, where it was
	 * read (owned; back to bus->body_cache when the message is freed).
	 */
	void *map;
	size_t map_len;
	void *body_buf;
	/* the fds 'h' values index: received (installed O_CLOEXEC) or dup'ed by append; owned */
	int *fds;
	unsigned int n_fds;
	/* what the byte API sees: an "ay" body's bytes, an "s" body's text, else data */
	void *body;
	size_t body_len;
	/* the typed API (msg-typed.c) */
	bool outgoing;		    /* built here, not received */
	struct dbus_writer *writer; /* until sealed */
	struct dbus_reader *reader; /* from the first read */
	brokerd_msg *call;	    /* a reply: the call it answers (a reference) */
	void *owned_data;	    /* the sealed body */
	char *owned_signature;
	char peeked[256]; /* brokerd_msg_peek_type()'s contents */
	uint32_t lost;	  /* received: messages the kernel dropped for us just before this one */
	/*
	 * Read in place (msg.c): data and the strings point into a receive
	 * buffer that held_chan lent (chan_hold()) until the message is freed
	 * or kept (msg_keep() copies it out); name is in name_buf. The struct
	 * goes back to bus->msg_cache when freed, so that dispatching a message
	 * allocates nothing.
	 */
	struct chan *held_chan;
	int held_bid;
	bool cached; /* a struct without buf[]: reused, not freed */
	size_t block_size; /* msg_new()'s: the bytes of the block (struct and buf[]), kept for the next */
	void *kept;  /* msg_keep()'s copy of the body and strings */
	char name_buf[256];
	uint8_t buf[] __attribute__((aligned(8)));
};

/* A decoded control reply with the fds that came with it (owned). */
struct ctrl_reply {
	uint8_t *buf;
	struct ctrl_message msg;
	int fds[CTRL_FDS_MAX];
	unsigned int n_fds;
};

#endif
