/* SPDX-License-Identifier: MIT */
/*
 * brokerd.h - libbrokerd, the client library of the brokerd message bus.
 *
 * The one public header of the library. A program connects to brokerd,
 * owns names, emits and subscribes to signals, calls and serves methods.
 * brokerd only hands out channel capabilities over its control socket; the
 * messages themselves travel on io_uring IPC channels, and every received
 * message carries the sender's unique name and credentials as stamped by the
 * kernel, never as claimed by the sender.
 *
 * Conventions: every function returns 0 (or a documented non-negative value)
 * on success and a negative errno on failure, -EINVAL for bad arguments.
 * Destructors accept NULL and return NULL. The library never logs, never
 * aborts and never sets errno. A brokerd_bus is not thread-safe: use it from
 * one thread at a time. Each function has a man page, brokerd_bus_open(3)
 * and so on.
 */
#ifndef BROKERD_BROKERD_H
#define BROKERD_BROKERD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BROKERD_SYSTEM_SOCKET "/run/brokerd/socket"
/* Overrides the system bus socket path for brokerd_bus_open_system(). */
#define BROKERD_SOCKET_ENV "BROKERD_SOCKET"

typedef struct brokerd_bus brokerd_bus;
typedef struct brokerd_msg brokerd_msg;
typedef struct brokerd_slot brokerd_slot;
struct sd_event;

/* --- Connections ---------------------------------------------------------- */

int brokerd_bus_open_system(brokerd_bus **ret);
int brokerd_bus_open(brokerd_bus **ret, const char *path);
brokerd_bus *brokerd_bus_close(brokerd_bus *bus);
int brokerd_bus_get_unique_name(brokerd_bus *bus, const char **ret);
int brokerd_bus_is_connected(brokerd_bus *bus);

/*
 * Reconnect after brokerd goes away: on by default. While reconnecting the
 * library retries with backoff, then says HELLO again (the unique name
 * changes), re-requests owned names and re-subscribes. Pending calls fail
 * with -ECONNRESET.
 */
int brokerd_bus_set_reconnect(brokerd_bus *bus, int enable);

enum {
	BROKERD_STATE_DISCONNECTED = 0,
	BROKERD_STATE_CONNECTED = 1, /* also after each successful reconnect */
	/* after CONNECTED: a name or subscription was not restored (refused, or queued) */
	BROKERD_STATE_NOT_RESTORED = 2,
};
typedef void (*brokerd_state_handler_t)(brokerd_bus *bus, int state, void *userdata);
int brokerd_bus_set_state_handler(brokerd_bus *bus, brokerd_state_handler_t handler, void *userdata);

/* --- Event loop ------------------------------------------------------------ */

/* One fd (epoll) that becomes readable when brokerd_bus_process() has work. */
int brokerd_bus_get_fd(brokerd_bus *bus);
/* Handles everything that is ready without blocking: > 0 if something was done. */
int brokerd_bus_process(brokerd_bus *bus);
/* Waits up to timeout_usec (UINT64_MAX: forever) for the fd: > 0 when ready. */
int brokerd_bus_wait(brokerd_bus *bus, uint64_t timeout_usec);
/*
 * Low-latency mode, off by default (usec 0): brokerd_bus_wait() (and so
 * brokerd_bus_run() and the synchronous calls) first spins on the ring's
 * completion queue for up to usec microseconds (at most 1 s: -ERANGE)
 * before it sleeps, so that a message arriving meanwhile is handled without
 * the wake-up of a sleeping thread. Costs up to usec of CPU time per wait.
 */
int brokerd_bus_set_spin(brokerd_bus *bus, uint64_t usec);
/* Blocking convenience loop: process and wait until brokerd_bus_exit(). */
int brokerd_bus_run(brokerd_bus *bus);
/* Ends brokerd_bus_run(); the bus also stops taking new calls (a worker
 * leaving its pool leaves them to the others) until it runs again. */
int brokerd_bus_exit(brokerd_bus *bus, int code);
int brokerd_bus_attach_event(brokerd_bus *bus, struct sd_event *event, int64_t priority);
int brokerd_bus_detach_event(brokerd_bus *bus);

/* Slots: a registration (subscription, method, watch, pending call). Freeing
 * the slot undoes it. */
brokerd_slot *brokerd_slot_free(brokerd_slot *slot);

/*
 * Loss is never silent. Signal channels are lossy: a subscriber that falls a
 * whole channel ring behind loses the oldest signals instead of holding back
 * the emitter, and a monitor that falls behind skips ahead. The kernel tells
 * how many with the next message received; the library counts them for
 * every slot that would have heard them (subscriptions and match rules of
 * that name, monitors of that channel) and for the bus
 * (BROKERD_COUNTER_LOST), and calls the slot's lost handler, if any, with
 * the number just lost (and the slot's userdata) before that next message is
 * dispatched. brokerd_slot_get_lost() returns the slot's total; -EINVAL for
 * NULL, -EOPNOTSUPP for a slot that cannot lose messages (methods, calls,
 * watches, objects).
 */
typedef void (*brokerd_lost_handler_t)(brokerd_slot *slot, uint64_t n, void *userdata);
int brokerd_slot_get_lost(brokerd_slot *slot, uint64_t *ret);
int brokerd_slot_set_lost_handler(brokerd_slot *slot, brokerd_lost_handler_t handler);

/*
 * The emitter's side of the same: an emit is never failed nor held back
 * because subscribers lag; instead, on a kernel that tells senders
 * (IOIPC_SEND_LOST), each emit learns how many subscribers lost a signal to
 * it (those that had not read the signal whose place in the ring it took).
 * The bus counts them (BROKERD_COUNTER_EMIT_LOST: every signal a subscriber
 * was told it lost was counted by exactly one emit of its name's owner) and
 * calls the handler, if set, with the name emitted on (NULL when the bus no
 * longer owns it) and the number since the last call: at the end of the
 * emit outside a send batch, at the end of brokerd_bus_batch_end() for a
 * batch, or from brokerd_bus_process(). The handler may emit.
 * brokerd_bus_set_emit_lost_handler() returns -EOPNOTSUPP (and sets
 * nothing) where the kernel does not tell: the counter then stays 0.
 */
typedef void (*brokerd_emit_lost_handler_t)(brokerd_bus *bus, const char *name, uint64_t n, void *userdata);
int brokerd_bus_set_emit_lost_handler(brokerd_bus *bus, brokerd_emit_lost_handler_t handler, void *userdata);

/* --- Names ----------------------------------------------------------------- */

#define BROKERD_NAME_ALLOW_REPLACEMENT (1U << 0)
#define BROKERD_NAME_REPLACE_EXISTING  (1U << 1)
#define BROKERD_NAME_DO_NOT_QUEUE      (1U << 2)
#define BROKERD_NAME_POOL	       (1U << 3) /* worker pool: receive calls while queued */

/* Positive results of brokerd_bus_request_name() */
#define BROKERD_NAME_PRIMARY_OWNER 1
#define BROKERD_NAME_IN_QUEUE	   2
#define BROKERD_NAME_ALREADY_OWNER 3

int brokerd_bus_request_name(brokerd_bus *bus, const char *name, unsigned int flags);
int brokerd_bus_release_name(brokerd_bus *bus, const char *name);

/* old_owner/new_owner are "" when there is none. name NULL watches all names. */
typedef int (*brokerd_name_handler_t)(brokerd_bus *bus, const char *name, const char *old_owner,
				      const char *new_owner, void *userdata);
int brokerd_bus_watch_name(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
			   brokerd_name_handler_t handler, void *userdata);
/* Writes the unique name owning `name` into buf. -ENXIO: no owner. */
int brokerd_bus_get_name_owner(brokerd_bus *bus, const char *name, char *buf, size_t size);

/* --- Messages -------------------------------------------------------------- */

enum {
	BROKERD_MSG_CALL = 1,
	BROKERD_MSG_REPLY = 2,
	BROKERD_MSG_ERROR = 3,
	BROKERD_MSG_SIGNAL = 4,
};

struct brokerd_creds {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint64_t id; /* broker connection id: unique name ":1.<id - 1>" */
};

typedef int (*brokerd_msg_handler_t)(brokerd_msg *msg, void *userdata);

brokerd_msg *brokerd_msg_ref(brokerd_msg *msg);
brokerd_msg *brokerd_msg_unref(brokerd_msg *msg);
int brokerd_msg_get_type(brokerd_msg *msg);
/* The sender's unique name, derived from the kernel-stamped badge. */
const char *brokerd_msg_get_sender(brokerd_msg *msg);
int brokerd_msg_get_creds(brokerd_msg *msg, struct brokerd_creds *ret);
/* Well-known name the message was sent on (signals, calls); may be "". */
const char *brokerd_msg_get_name(brokerd_msg *msg);
/* Member of a call or signal; error name of an error reply. */
const char *brokerd_msg_get_member(brokerd_msg *msg);
const char *brokerd_msg_get_error_name(brokerd_msg *msg);
/*
 * The body as bytes: for a body of signature "ay" (what the byte-oriented
 * functions send) the array's bytes, for "s" (an error's message) the
 * string, otherwise the body as brokerd_msg_get_data() returns it.
 */
int brokerd_msg_get_body(brokerd_msg *msg, const void **ret, size_t *ret_size);
uint64_t brokerd_msg_get_serial(brokerd_msg *msg);
/* Header fields of channel message version 2; "" when the message has none. */
const char *brokerd_msg_get_path(brokerd_msg *msg);
const char *brokerd_msg_get_interface(brokerd_msg *msg);
const char *brokerd_msg_get_signature(brokerd_msg *msg);
const char *brokerd_msg_get_destination(brokerd_msg *msg);
/* The body in the D-Bus wire format (dbus1), native byte order, validated
 * against brokerd_msg_get_signature(). */
int brokerd_msg_get_data(brokerd_msg *msg, const void **ret, size_t *ret_size);

/* --- Signals --------------------------------------------------------------- */

/* The caller must own `name` (signals go out on the name's signal channel). */
int brokerd_bus_emit_signal(brokerd_bus *bus, const char *name, const char *member, const void *body,
			    size_t size);
/* A signal to one connection (unique name, or a well-known name's primary
 * owner), through its inbox; it receives it with a NULL-name subscription. */
/*
 * The byte-oriented functions send their bytes as a body of signature "ay"
 * (none for zero bytes), calls with path "/", signals with path "/" and
 * this interface.
 */
#define BROKERD_BYTES_INTERFACE "org.brokerd.Bytes"
/*
 * A signal with a pre-marshalled dbus1 body (native byte order) of the given
 * signature (NULL or "" for none), on the signal channel of a name the
 * caller owns.
 */
int brokerd_bus_emit(brokerd_bus *bus, const char *name, const char *path, const char *interface,
		     const char *member, const char *signature, const void *body, size_t size);
/*
 * A send batch: signals emitted (brokerd_bus_emit*(), a typed signal's
 * brokerd_bus_send()) between these two are queued and go to the kernel
 * together, in one system call, at the latest when the batch ends (earlier
 * when 32 are queued); each emit returns 0 once its signal is queued, or
 * the error found before the kernel (-EINVAL, -EPERM, ...); the end returns
 * 0 or the first error the kernel gave a send of the batch.
 */
int brokerd_bus_batch_begin(brokerd_bus *bus);
int brokerd_bus_batch_end(brokerd_bus *bus);
int brokerd_bus_send_signal(brokerd_bus *bus, const char *destination, const char *member, const void *body,
			    size_t size);
/*
 * name: a well-known name's broadcast signals, or NULL for signals sent to
 * this connection with brokerd_bus_send_signal().
 * member_filter: NULL or "" for every member, an exact member, or a prefix
 * ending in '*' ("Temperature*"); several alternatives separated by ','.
 */
int brokerd_bus_subscribe(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
			  const char *member_filter, brokerd_msg_handler_t handler, void *userdata);
/*
 * Ends every subscription of this bus to name's signals: the bus detaches
 * from the channel and brokerd forgets the subscription (it no longer counts
 * against the uid's quotas and is not restored after a reconnect). Slots
 * the bus owns (ret_slot was NULL) are freed; the caller's slots receive
 * nothing more and are freed as usual. -ENOENT: no subscription to name.
 */
int brokerd_bus_unsubscribe(brokerd_bus *bus, const char *name);

/* --- Match rules ---------------------------------------------------------- */

/*
 * Calls handler for every signal this bus receives that matches rule, a
 * D-Bus match rule ("type='signal',sender='org.example.A',arg0='x'"; keys
 * type, sender, interface, member, path, path_namespace, destination,
 * argN, argNpath, arg0namespace). A rule with a well-known sender
 * subscribes to that name's signals; one without a sender (or with a
 * unique name) to the signals of every name it may receive from, names
 * that get an owner later included. Identical rules share one filter and
 * one subscription; freeing the last slot of a rule ends its subscription.
 * -EINVAL for a bad rule.
 */
int brokerd_bus_add_match(brokerd_bus *bus, brokerd_slot **ret_slot, const char *rule,
			  brokerd_msg_handler_t handler, void *userdata);

/* --- Methods --------------------------------------------------------------- */

#define BROKERD_ERROR_FAILED	     "org.brokerd.Error.Failed"
#define BROKERD_ERROR_UNKNOWN_METHOD "org.brokerd.Error.UnknownMethod"
#define BROKERD_ERROR_ACCESS_DENIED  "org.brokerd.Error.AccessDenied"
/* a call the service had taken when it closed its connection */
#define BROKERD_ERROR_DISCONNECTED "org.brokerd.Error.Disconnected"
/* a call a receiver (a pool's worker) may have taken when its connection ended */
#define BROKERD_ERROR_NO_REPLY "org.freedesktop.DBus.Error.NoReply"

/*
 * Synchronous call. On a reply returns 0 and *ret_reply. On an error reply
 * returns -EREMOTEIO and *ret_reply holds the error (ret_reply may be NULL).
 * -ETIMEDOUT after timeout_usec (0: 25 s default), -ECONNRESET when the
 * service went away mid-call or brokerd restarted, -EREMOTEIO with a
 * BROKERD_ERROR_NO_REPLY error made by the library when one of several
 * receivers of the name ended mid-call, -ENXIO when nobody owns the name,
 * -EACCES when policy refuses the call.
 */
int brokerd_bus_call(brokerd_bus *bus, const char *name, const char *member, const void *body, size_t size,
		     uint64_t timeout_usec, brokerd_msg **ret_reply);

/* error is 0 (reply), -EREMOTEIO (msg is the error reply), or a local error
 * (msg NULL): -ETIMEDOUT, -ECONNRESET. */
typedef int (*brokerd_reply_handler_t)(brokerd_msg *msg, int error, void *userdata);
int brokerd_bus_call_async(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name, const char *member,
			   const void *body, size_t size, uint64_t timeout_usec,
			   brokerd_reply_handler_t handler, void *userdata);

/*
 * Serve `member` of `name` (NULL member: every member without its own
 * handler). Calls arrive once the bus owns the name. The handler replies with
 * brokerd_msg_reply() or brokerd_msg_reply_error(), now or later if it keeps
 * a reference; if it returns without replying or keeping a reference, a
 * negative return becomes an org.brokerd.Error.Failed reply and a
 * non-negative one an empty reply.
 */
int brokerd_bus_add_method(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name, const char *member,
			   brokerd_msg_handler_t handler, void *userdata);
int brokerd_msg_reply(brokerd_msg *call, const void *body, size_t size);
int brokerd_msg_reply_error(brokerd_msg *call, const char *error_name, const char *text);
/* Reply with a pre-marshalled dbus1 body (native byte order) of this signature. */
int brokerd_msg_reply_data(brokerd_msg *call, const char *signature, const void *body, size_t size);
/*
 * Calls with a path, an interface (NULL for none), a member and a
 * pre-marshalled dbus1 body (native byte order) of this signature (NULL or
 * "" for none); otherwise as brokerd_bus_call() and brokerd_bus_call_async().
 */
int brokerd_bus_call_method(brokerd_bus *bus, const char *name, const char *path, const char *interface,
			    const char *member, const char *signature, const void *body, size_t size,
			    uint64_t timeout_usec, brokerd_msg **ret_reply);
int brokerd_bus_call_method_async(brokerd_bus *bus, brokerd_slot **ret_slot, const char *name,
				  const char *path, const char *interface, const char *member,
				  const char *signature, const void *body, size_t size, uint64_t timeout_usec,
				  brokerd_reply_handler_t handler, void *userdata);

/* --- Typed messages ----------------------------------------------------------- */

/*
 * A message built value by value in the D-Bus type system (basic types as
 * in protocol/README.md section 9.1: y uint8_t, b int, n int16_t, q
 * uint16_t, i int32_t, u uint32_t, x int64_t, t uint64_t, d double, h int
 * (a file descriptor), s o g const char *). A call to name, a signal on a
 * name the caller owns, or the reply to a received call; bus may be NULL to
 * build a message that is only read back. Bodies up to 128 MiB: one too
 * large for a channel's slot travels in a sealed memfd, unseen by the caller.
 */
int brokerd_msg_new_call(brokerd_bus *bus, brokerd_msg **ret, const char *name, const char *path,
			 const char *interface, const char *member);
int brokerd_msg_new_signal(brokerd_bus *bus, brokerd_msg **ret, const char *name, const char *path,
			   const char *interface, const char *member);
int brokerd_msg_new_reply(brokerd_msg *call, brokerd_msg **ret);
/*
 * Append one value (for s, o and g, value is the string itself, else a
 * pointer to it); open a container 'a' (contents: element type), '(' or
 * '{' (contents: the fields) or 'v' (contents: the value's type), append
 * its values, close it. At the top level the signature grows with what is
 * appended; inside a container the signature decides.
 */
int brokerd_msg_append_basic(brokerd_msg *m, char type, const void *value);
/* An array of a fixed-size basic type (not h) in one go: n elements at values. */
int brokerd_msg_append_array(brokerd_msg *m, char type, const void *values, size_t n);
int brokerd_msg_open_container(brokerd_msg *m, char type, const char *contents);
int brokerd_msg_close_container(brokerd_msg *m);
/*
 * printf-like: values for the complete types of `types`, basic types by
 * value (y, b, n, q, i, h as int or unsigned), an array as an unsigned
 * count then its elements, a struct or dict entry as its fields, a variant
 * as the value's signature then the value.
 */
int brokerd_msg_append(brokerd_msg *m, const char *types, ...);
/* Ends building: the body can be read and no longer appended to. */
int brokerd_msg_seal(brokerd_msg *m);
/*
 * Reading a sealed or received message: 1 for a value read or a container
 * entered, 0 at the end of the current container, -ENXIO for another type.
 * Strings point into the message.
 */
int brokerd_msg_peek_type(brokerd_msg *m, char *type, const char **contents);
int brokerd_msg_read_basic(brokerd_msg *m, char type, void *ret);
/* The next 'h' as a new fd (O_CLOEXEC) of the caller's own, to keep after the message. */
int brokerd_msg_read_dup_fd(brokerd_msg *m, int *ret);
/* The next array of a fixed-size basic type (not h): its elements, in the message, and their bytes. */
int brokerd_msg_read_array(brokerd_msg *m, char type, const void **ret, size_t *ret_size);
int brokerd_msg_enter_container(brokerd_msg *m, char type, const char *contents);
int brokerd_msg_exit_container(brokerd_msg *m);
/* scanf-like: pointers for the values, as for append; arrays need enter_container. */
int brokerd_msg_read(brokerd_msg *m, const char *types, ...);
/* Back to the first value of the body. */
int brokerd_msg_rewind(brokerd_msg *m);
/* Sends (sealing it) a signal, a reply, or a call expecting no reply. */
int brokerd_bus_send(brokerd_bus *bus, brokerd_msg *m);
/* A call built with brokerd_msg_new_call(), as brokerd_bus_call(). */
int brokerd_bus_call_msg(brokerd_bus *bus, brokerd_msg *m, uint64_t timeout_usec, brokerd_msg **ret_reply);

/* --- Objects ------------------------------------------------------------------ */

/*
 * Objects in the D-Bus sense: a path with interfaces, each described by a
 * vtable of methods, properties and signals. The library routes a call
 * to the handler of its path, interface and method (any well-known name
 * the bus owns reaches the same objects), checks its arguments against
 * the method's input signature, and answers the standard interfaces
 * itself: org.freedesktop.DBus.Properties, .Introspectable, .Peer (on
 * every path) and .ObjectManager (where one is registered). A method
 * registered with brokerd_bus_add_method() for the exact member wins.
 */
#define BROKERD_DBUS_ERROR_FAILED	      "org.freedesktop.DBus.Error.Failed"
#define BROKERD_DBUS_ERROR_NO_MEMORY	      "org.freedesktop.DBus.Error.NoMemory"
#define BROKERD_DBUS_ERROR_ACCESS_DENIED      "org.freedesktop.DBus.Error.AccessDenied"
#define BROKERD_DBUS_ERROR_INVALID_ARGS	      "org.freedesktop.DBus.Error.InvalidArgs"
#define BROKERD_DBUS_ERROR_UNKNOWN_OBJECT     "org.freedesktop.DBus.Error.UnknownObject"
#define BROKERD_DBUS_ERROR_UNKNOWN_INTERFACE  "org.freedesktop.DBus.Error.UnknownInterface"
#define BROKERD_DBUS_ERROR_UNKNOWN_METHOD     "org.freedesktop.DBus.Error.UnknownMethod"
#define BROKERD_DBUS_ERROR_UNKNOWN_PROPERTY   "org.freedesktop.DBus.Error.UnknownProperty"
#define BROKERD_DBUS_ERROR_PROPERTY_READ_ONLY "org.freedesktop.DBus.Error.PropertyReadOnly"

/*
 * A property's getter appends one value of the property's signature to
 * msg (the library has opened the variant around it); a setter reads the
 * new value from msg (the library has entered the variant and checked its
 * type). Both return 0 or a negative errno, which becomes the caller's
 * error (-EINVAL InvalidArgs, -EACCES or -EPERM AccessDenied, -ENOMEM
 * NoMemory, others Failed); a setter may also reply an error itself.
 */
typedef int (*brokerd_property_get_t)(brokerd_bus *bus, const char *path, const char *interface,
				      const char *property, brokerd_msg *msg, void *userdata);
typedef int (*brokerd_property_set_t)(brokerd_bus *bus, const char *path, const char *interface,
				      const char *property, brokerd_msg *msg, void *userdata);

enum {
	BROKERD_VTABLE_END = 0,
	BROKERD_VTABLE_METHOD,
	BROKERD_VTABLE_PROPERTY,
	BROKERD_VTABLE_SIGNAL,
};

/* Flags of a vtable entry, shown as annotations by Introspect. */
#define BROKERD_VTABLE_DEPRECATED (1U << 0)
#define BROKERD_METHOD_NO_REPLY	  (1U << 1) /* callers should not wait for a reply */
/* A property's changes: never (none of these), with the new value, as
 * invalidated only, or it never changes. */
#define BROKERD_PROPERTY_EMITS_CHANGE	    (1U << 2)
#define BROKERD_PROPERTY_EMITS_INVALIDATION (1U << 3)
#define BROKERD_PROPERTY_CONST		    (1U << 4)

/*
 * One entry of an interface: build vtables with the macros below and end
 * them with BROKERD_VTABLE_END_ENTRY. signature: a method's input, a
 * property's type (one complete type) or a signal's arguments; result: a
 * method's output. names and result_names (optional) name the arguments
 * for introspection, separated by spaces, one per complete type.
 */
struct brokerd_vtable {
	unsigned int kind;
	unsigned int flags;
	const char *member;
	const char *signature;
	const char *result;
	const char *names;
	const char *result_names;
	brokerd_msg_handler_t method;
	brokerd_property_get_t get;
	brokerd_property_set_t set;
};

#define BROKERD_METHOD_NAMED(member_, in_, in_names_, out_, out_names_, handler_, flags_)                  \
	{                                                                                                  \
		.kind = BROKERD_VTABLE_METHOD, .flags = (flags_), .member = (member_), .signature = (in_), \
		.result = (out_), .names = (in_names_), .result_names = (out_names_), .method = (handler_) \
	}
#define BROKERD_METHOD(member_, in_, out_, handler_) \
	BROKERD_METHOD_NAMED(member_, in_, NULL, out_, NULL, handler_, 0)
#define BROKERD_PROPERTY(member_, sig_, get_, flags_)                                    \
	{                                                                                \
		.kind = BROKERD_VTABLE_PROPERTY, .flags = (flags_), .member = (member_), \
		.signature = (sig_), .get = (get_)                                       \
	}
#define BROKERD_WRITABLE_PROPERTY(member_, sig_, get_, set_, flags_)                     \
	{                                                                                \
		.kind = BROKERD_VTABLE_PROPERTY, .flags = (flags_), .member = (member_), \
		.signature = (sig_), .get = (get_), .set = (set_)                        \
	}
#define BROKERD_SIGNAL_NAMED(member_, sig_, names_, flags_)                                                 \
	{                                                                                                   \
		.kind = BROKERD_VTABLE_SIGNAL, .flags = (flags_), .member = (member_), .signature = (sig_), \
		.names = (names_)                                                                           \
	}
#define BROKERD_SIGNAL(member_, sig_) BROKERD_SIGNAL_NAMED(member_, sig_, NULL, 0)
#define BROKERD_VTABLE_END_ENTRY           \
	{                                  \
		.kind = BROKERD_VTABLE_END \
	}

/*
 * Registers interface on path with the vtable (which must outlive the
 * slot) and userdata for its callbacks. -EEXIST: the interface is already
 * on that path, or is one of the standard ones; -EINVAL: an invalid name,
 * signature or entry.
 */
int brokerd_bus_add_object(brokerd_bus *bus, brokerd_slot **ret_slot, const char *path, const char *interface,
			   const struct brokerd_vtable *vtable, void *userdata);
/* Serves org.freedesktop.DBus.ObjectManager on path for the objects below it. */
int brokerd_bus_add_object_manager(brokerd_bus *bus, brokerd_slot **ret_slot, const char *path);
/*
 * PropertiesChanged on the signal channel of name (owned by the caller)
 * from path: the current values of the listed properties that emit their
 * change, the names of those that emit invalidation. properties is
 * NULL-terminated, or NULL for every property of the interface that emits.
 */
int brokerd_bus_emit_properties_changed(brokerd_bus *bus, const char *name, const char *path,
					const char *interface, const char *const *properties);
/*
 * InterfacesAdded or InterfacesRemoved, from the object manager above
 * path (-ENOENT: none), for the listed interfaces of path (NULL: all it
 * has registered now).
 */
int brokerd_bus_emit_interfaces_added(brokerd_bus *bus, const char *name, const char *path,
				      const char *const *interfaces);
int brokerd_bus_emit_interfaces_removed(brokerd_bus *bus, const char *name, const char *path,
					const char *const *interfaces);
/* Replies to call with the values of types, as brokerd_msg_append(). */
int brokerd_msg_return(brokerd_msg *call, const char *types, ...);
/* An error reply whose message is printf-formatted. */
int brokerd_msg_reply_errorf(brokerd_msg *call, const char *error_name, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Messages this connection received and dropped, by reason: invalid (the
 * header or the body failed validation), replies to no pending call, and
 * replies to a pending call from a connection that did not take the call,
 * and messages whose fds could not all be installed in this process (its fd
 * table full: the kernel's -EMFILE, RLIMIT_NOFILE); and messages that never
 * reached this connection: signals and monitor copies lost on a channel it
 * fell behind on (see brokerd_slot_get_lost()). And one that counts no
 * drop: the control requests this bus sent brokerd.
 */
enum {
	BROKERD_COUNTER_INVALID,
	BROKERD_COUNTER_UNEXPECTED_REPLY,
	BROKERD_COUNTER_FORGED_REPLY,
	BROKERD_COUNTER_CONTROL_REQUESTS,
	BROKERD_COUNTER_FDS_LOST,
	BROKERD_COUNTER_LOST, /* signals and monitor copies the kernel dropped before we received them */
	BROKERD_COUNTER_EMIT_LOST, /* signals subscribers lost to our emits (brokerd_bus_set_emit_lost_handler()) */
	_BROKERD_COUNTER_MAX,
};
uint64_t brokerd_bus_get_counter(brokerd_bus *bus, int counter);

/* --- Bus introspection (for tools like brokerctl) --------------------------- */

/* Credentials brokerd recorded at connect for a unique or well-known name. */
int brokerd_bus_get_creds(brokerd_bus *bus, const char *name, struct brokerd_creds *ret);

/*
 * All of them, for deciding what a peer may do (what D-Bus's
 * GetConnectionCredentials answers): pid, uid, gid, supplementary groups,
 * a pidfd of the process that connected (owned by the object: dup() it to
 * keep it) and its security label (SO_PEERSEC, e.g. a Smack label). A
 * well-known name stands for its primary owner. Each getter returns
 * -ENODATA for what brokerd did not report.
 */
typedef struct brokerd_credentials brokerd_credentials;

int brokerd_bus_get_credentials(brokerd_bus *bus, const char *name, brokerd_credentials **ret);
brokerd_credentials *brokerd_credentials_free(brokerd_credentials *creds);
int brokerd_credentials_get_pid(brokerd_credentials *creds, pid_t *ret);
int brokerd_credentials_get_uid(brokerd_credentials *creds, uid_t *ret);
int brokerd_credentials_get_gid(brokerd_credentials *creds, gid_t *ret);
/* Returns how many; *ret (NULL when none) lives as long as creds. */
int brokerd_credentials_get_groups(brokerd_credentials *creds, const gid_t **ret);
/* Returns the pidfd itself. */
int brokerd_credentials_get_pidfd(brokerd_credentials *creds);
/* *ret lives as long as creds. */
int brokerd_credentials_get_label(brokerd_credentials *creds, const char **ret);

#ifdef __cplusplus
}
#endif

#endif
