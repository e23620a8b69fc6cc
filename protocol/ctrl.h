/* SPDX-License-Identifier: MIT */
/*
 * ctrl.h - the control protocol between clients and brokerd.
 *
 * One control message per AF_UNIX SOCK_SEQPACKET datagram: a 16-byte
 * little-endian header followed by a payload whose layout is given by a
 * signature per (type, op) in a table. This layer only encodes and decodes
 * bytes; it never does I/O. protocol/README.md is the normative spec.
 */
#ifndef BROKERD_PROTOCOL_CTRL_H
#define BROKERD_PROTOCOL_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTRL_SOCKET_PATH     "/run/brokerd/socket"
#define CTRL_VERSION	     1
#define CTRL_HEADER_SIZE     16
#define CTRL_MSG_MAX	     65536 /* whole datagram, header included */
#define CTRL_FDS_MAX	     4	   /* SCM_RIGHTS fds per message */
#define CTRL_STRING_MAX	     4096  /* bytes, excluding the NUL */
#define CTRL_NAME_MAX	     255   /* well-known and unique names */
#define CTRL_SIG_DEPTH_MAX   4	   /* nesting of arrays and structs */
#define CTRL_UNIQUE_NAME_MAX 32	   /* ":1." + 20 digits + NUL, rounded */

/* The bus's own name: its signal channel carries NameOwnerChanged. */
#define CTRL_BUS_NAME "brokerd"

enum ctrl_type {
	CTRL_TYPE_REQUEST = 1, /* client -> broker, code = enum ctrl_op */
	CTRL_TYPE_REPLY = 2,   /* broker -> client, code = op of the request */
	CTRL_TYPE_ERROR = 3,   /* broker -> client, code = op of the request (0 if unknown) */
	CTRL_TYPE_SIGNAL = 4,  /* broker -> client, code = enum ctrl_signal, serial 0 */
	_CTRL_TYPE_MAX,
};

enum ctrl_op {
	CTRL_OP_HELLO = 1,
	CTRL_OP_REQUEST_NAME,
	CTRL_OP_RELEASE_NAME,
	CTRL_OP_LIST_NAMES,
	CTRL_OP_LIST_QUEUED_OWNERS,
	CTRL_OP_GET_NAME_OWNER,
	CTRL_OP_GET_CREDENTIALS,
	CTRL_OP_SUBSCRIBE,
	CTRL_OP_OPEN_CALL,
	CTRL_OP_OPEN_INBOX,
	CTRL_OP_MONITOR,
	CTRL_OP_LIST_PEERS,
	CTRL_OP_POLICY_CHECK,
	CTRL_OP_RELOAD,
	CTRL_OP_QUOTA,
	CTRL_OP_UNSUBSCRIBE,
	CTRL_OP_LIST_NAMES_PAGE,
	CTRL_OP_LIST_PEERS_PAGE,
	/* signal channels of every name a match rule without sender could match */
	CTRL_OP_WATCH_SIGNALS = 19,
	CTRL_OP_UNWATCH_SIGNALS = 20,
	_CTRL_OP_MAX,
};

enum ctrl_signal {
	CTRL_SIGNAL_NAME_OWNER_CHANGED = 1,
	CTRL_SIGNAL_NAME_ACQUIRED,
	CTRL_SIGNAL_NAME_LOST,
	CTRL_SIGNAL_MONITOR_CHANNEL,
	CTRL_SIGNAL_CAPABILITY_RENEWED, /* reserved: brokerd no longer sends it */
	CTRL_SIGNAL_CAPABILITY_REVOKED,
	CTRL_SIGNAL_CALL_RECEIVER_LOST, /* reserved: brokerd now sends CallReceiverEnded */
	CTRL_SIGNAL_SIGNAL_CHANNEL = 8, /* a name's signal RECV cap for a watcher */
	/* a SEND cap to a caller's inbox, for replies (protocol/README.md, Reply capabilities) */
	CTRL_SIGNAL_REPLY_CAPABILITY = 10,
	/* a receiver of a name's calls ended: its callers' calls fail (protocol/README.md, Worker pools) */
	CTRL_SIGNAL_CALL_RECEIVER_ENDED,
	_CTRL_SIGNAL_MAX,
};

/* HELLO request flags */
#define CTRL_HELLO_NAME_EVENTS (1U << 0) /* send NameOwnerChanged as control signals */
/* inbox sizes told: HELLO's reply `stuu` (our inbox's), OPEN_INBOX's `su` and ReplyCapability `ssu` (the peer's) */
#define CTRL_HELLO_SIZES       (1U << 1)

/* HELLO reply features */
#define CTRL_FEATURE_CHANNELS  (1U << 0) /* the kernel has IPC channels; fds are passed */
#define CTRL_FEATURE_BADGES    (1U << 1) /* capability fds are badged (IOIPC_REGISTER_MINT) */
#define CTRL_FEATURE_MSG_SIZE  (1U << 2) /* OPEN_CALL and REQUEST_NAME take their MSG_SIZE flag */
#define CTRL_FEATURE_ENDED_PID (1U << 3) /* OPEN_CALL takes its ENDED_PID flag */

/* REQUEST_NAME flags and results (D-Bus numbering) */
#define CTRL_NAME_ALLOW_REPLACEMENT (1U << 0)
#define CTRL_NAME_REPLACE_EXISTING  (1U << 1)
#define CTRL_NAME_DO_NOT_QUEUE	    (1U << 2)
#define CTRL_NAME_POOL		    (1U << 3) /* queued owners receive calls too */
#define CTRL_NAME_FLAGS_ALL	    0xfU /* those an owner has; not MSG_SIZE, which only shapes the reply */
#define CTRL_NAME_MSG_SIZE	    (1U << 4) /* reply `uu`: the signal channel's max message size too */

enum ctrl_request_name_result {
	CTRL_NAME_PRIMARY_OWNER = 1,
	CTRL_NAME_IN_QUEUE = 2,
	CTRL_NAME_EXISTS = 3,
	CTRL_NAME_ALREADY_OWNER = 4,
};

enum ctrl_release_name_result {
	CTRL_RELEASE_RELEASED = 1,
	CTRL_RELEASE_NON_EXISTENT = 2,
	CTRL_RELEASE_NOT_OWNER = 3,
};

enum ctrl_unsubscribe_result {
	CTRL_UNSUBSCRIBE_DONE = 1,	     /* brokerd forgot the subscription */
	CTRL_UNSUBSCRIBE_NOT_SUBSCRIBED = 2, /* there was none */
};

enum ctrl_unwatch_signals_result {
	CTRL_UNWATCH_DONE = 1,	       /* no more SignalChannel signals */
	CTRL_UNWATCH_NOT_WATCHING = 2, /* there was no watch */
};

/* LIST_NAMES (and LIST_NAMES_PAGE) flags */
#define CTRL_LIST_ACTIVATABLE (1U << 0) /* activatable names, not owned ones */

/*
 * LIST_NAMES_PAGE and LIST_PEERS_PAGE: a request names the page size (0: as
 * many entries as fit in one reply) and a cursor ("" for the first page);
 * the reply ends with the cursor of the next page ("" after the last).
 * Cursors are opaque to clients (brokerd uses the last name listed) and
 * never longer than a name.
 */
#define CTRL_CURSOR_MAX CTRL_NAME_MAX

/* OPEN_CALL flags and results */
#define CTRL_CALL_NO_ACTIVATE (1U << 0) /* unowned: fail instead of activating */
#define CTRL_CALL_NO_WAIT     (1U << 1) /* reply at once while activating */
#define CTRL_CALL_MSG_SIZE    (1U << 2) /* reply `uu`: the call channel's max message size too */
#define CTRL_CALL_ENDED_PID   (1U << 3) /* CallReceiverEnded to us: `sstu`, with the receiver's pid */

enum ctrl_open_call_result {
	CTRL_CALL_OWNED = 1,
	CTRL_CALL_ACTIVATING = 2,
};

/* GET_CREDENTIALS reply mask: which fields are valid */
#define CTRL_CREDS_PID	 (1U << 0)
#define CTRL_CREDS_UID	 (1U << 1)
#define CTRL_CREDS_GID	 (1U << 2)
#define CTRL_CREDS_GIDS	 (1U << 3)
#define CTRL_CREDS_PIDFD (1U << 4)
#define CTRL_CREDS_LABEL (1U << 5)

/* MONITOR_CHANNEL signal kinds, also used by LIST_PEERS */
enum ctrl_channel_kind {
	CTRL_CHANNEL_INBOX = 1,	 /* unicast, per connection */
	CTRL_CHANNEL_CALL = 2,	 /* multicast, per well-known name */
	CTRL_CHANNEL_SIGNAL = 3, /* broadcast, per well-known name */
	CTRL_CHANNEL_DBUS = 4,	 /* broadcast, brokerd's own: copies of D-Bus clients' messages for monitors */
};

/* POLICY_CHECK decisions */
enum ctrl_policy_decision {
	CTRL_POLICY_DENY = 0,
	CTRL_POLICY_ALLOW = 1,
};

/* QUOTA request: this uid means "all uids" (privileged) */
#define CTRL_QUOTA_ALL_UIDS UINT32_MAX

/* Error names (the first string of every ERROR payload). Stable ABI. */
#define CTRL_ERROR_FAILED	     "brokerd.Error.Failed"
#define CTRL_ERROR_PROTOCOL	     "brokerd.Error.ProtocolError"
#define CTRL_ERROR_VERSION	     "brokerd.Error.VersionMismatch"
#define CTRL_ERROR_UNKNOWN_OP	     "brokerd.Error.UnknownMethod"
#define CTRL_ERROR_INVALID_ARGS	     "brokerd.Error.InvalidArgs"
#define CTRL_ERROR_NO_HELLO	     "brokerd.Error.NoHello"
#define CTRL_ERROR_ALREADY_HELLO     "brokerd.Error.AlreadyHello"
#define CTRL_ERROR_ACCESS_DENIED     "brokerd.Error.AccessDenied"
#define CTRL_ERROR_QUOTA_EXCEEDED    "brokerd.Error.QuotaExceeded"
#define CTRL_ERROR_NAME_HAS_NO_OWNER "brokerd.Error.NameHasNoOwner"
#define CTRL_ERROR_SERVICE_UNKNOWN   "brokerd.Error.ServiceUnknown"
#define CTRL_ERROR_ACTIVATION_FAILED "brokerd.Error.ActivationFailed"
#define CTRL_ERROR_TIMEOUT	     "brokerd.Error.Timeout"
#define CTRL_ERROR_NOT_SUPPORTED     "brokerd.Error.NotSupported"
#define CTRL_ERROR_INVALID_POLICY    "brokerd.Error.InvalidPolicy"
#define CTRL_ERROR_NO_MEMORY	     "brokerd.Error.NoMemory"

/* Decoded header; on the wire every field is little-endian. */
struct ctrl_header {
	uint8_t version;   /* CTRL_VERSION */
	uint8_t type;	   /* enum ctrl_type */
	uint16_t code;	   /* enum ctrl_op or enum ctrl_signal */
	uint32_t serial;   /* request serial, echoed in the reply or error; 0 in signals */
	uint32_t length;   /* payload bytes after the header */
	uint16_t n_fds;	   /* fds passed with SCM_RIGHTS in the same datagram */
	uint16_t reserved; /* 0 */
};

/*
 * One entry per op (and per signal). Signatures use:
 *   u  uint32   t  uint64   s  string (u16 length, bytes, NUL)
 *   aX array of X (u32 count, elements)   (...)  struct (fields in order)
 */
struct ctrl_op_info {
	const char *name;
	const char *request_sig; /* NULL for signals */
	const char *reply_sig;	 /* payload of the reply, or of the signal */
	/*
	 * NULL, or the longer reply a request flag asks for: reply_sig and
	 * optional fields after it. Only clients that ask get it, so the
	 * others never see trailing bytes (protocol/README.md, section 4).
	 */
	const char *reply_sig_ext;
	uint32_t min_len;      /* smallest valid request (signal) payload */
	uint8_t max_reply_fds; /* fds that may come with the reply (signal) */
	bool privileged;       /* only root (or policy "allow bus") may call it */
};

const struct ctrl_op_info *ctrl_op_get(unsigned int op);
const struct ctrl_op_info *ctrl_signal_get(unsigned int signal);
const char *ctrl_type_to_string(unsigned int type);

/* Signature helpers; both return negative errno for an invalid signature. */
int ctrl_sig_min_len(const char *sig);
int ctrl_sig_validate(const char *sig, const void *payload, size_t len);

/* --- Decoding ------------------------------------------------------------ */

struct ctrl_message {
	struct ctrl_header hdr;
	const struct ctrl_op_info *info; /* NULL for an ERROR with code 0 */
	const char *sig;		 /* payload signature */
	const uint8_t *payload;		 /* points into the decoded buffer */
	size_t payload_len;
};

/*
 * Decode and fully validate one datagram of len bytes that arrived with
 * n_fds fds. Returns 0, or -EBADMSG (malformed, lengths disagree, bad
 * signature data), -EPROTO (wrong version), -EOPNOTSUPP (unknown type or
 * code), -EMSGSIZE (too large), -ETOOMANYREFS (fd count wrong). The header
 * fields are filled as far as they could be read, so a broker can still
 * echo the serial in its error reply.
 */
int ctrl_message_decode(struct ctrl_message *m, const void *buf, size_t len, unsigned int n_fds);

struct ctrl_reader {
	const uint8_t *p;
	size_t len;
	size_t pos;
};

void ctrl_reader_init(struct ctrl_reader *r, const struct ctrl_message *m);
void ctrl_reader_init_raw(struct ctrl_reader *r, const void *payload, size_t len);
int ctrl_read_u32(struct ctrl_reader *r, uint32_t *v);
int ctrl_read_u64(struct ctrl_reader *r, uint64_t *v);
/* *s points into the buffer and is NUL-terminated; len may be NULL. */
int ctrl_read_string(struct ctrl_reader *r, const char **s, size_t *len);
int ctrl_read_array(struct ctrl_reader *r, uint32_t *count);
bool ctrl_reader_at_end(const struct ctrl_reader *r);

/* --- Encoding ------------------------------------------------------------ */

struct ctrl_writer {
	uint8_t *buf;
	size_t len;
	size_t cap;
	int error; /* first error; sticky, reported by finish */
	uint8_t type;
	uint16_t code;
	int fds[CTRL_FDS_MAX]; /* borrowed, not closed by the writer */
	unsigned int n_fds;
};

int ctrl_writer_init(struct ctrl_writer *w, enum ctrl_type type, uint16_t code, uint32_t serial);
void ctrl_writer_deinit(struct ctrl_writer *w);
void ctrl_write_u32(struct ctrl_writer *w, uint32_t v);
void ctrl_write_u64(struct ctrl_writer *w, uint64_t v);
void ctrl_write_string(struct ctrl_writer *w, const char *s);
/* Arrays: open returns a cookie; close patches in the element count. */
size_t ctrl_write_array_open(struct ctrl_writer *w);
void ctrl_write_array_close(struct ctrl_writer *w, size_t cookie, uint32_t count);
void ctrl_write_fd(struct ctrl_writer *w, int fd);
/*
 * Patch the header, check the payload against the signature of (type, code)
 * and return the datagram. The data stays owned by the writer.
 */
int ctrl_writer_finish(struct ctrl_writer *w, const void **data, size_t *len);

/* Error helper: init + the two strings, as a finished message. */
int ctrl_writer_error(struct ctrl_writer *w, uint16_t op, uint32_t serial, const char *name,
		      const char *message);

/* --- Names --------------------------------------------------------------- */

/* D-Bus bus-name rules: 2+ dot-separated elements of [A-Za-z0-9_-], no leading digit. */
bool ctrl_name_is_valid_wellknown(const char *name);
bool ctrl_name_is_valid_unique(const char *name);
/* Error names and members: like interface names / member names. */
bool ctrl_name_is_valid_error(const char *name);
bool ctrl_name_is_valid_member(const char *name);
/* ":1.<id - 1>": connection id 1 is :1.0 (dbus-daemon's numbering); id 0 has no name */
int ctrl_unique_name_format(uint64_t id, char buf[static CTRL_UNIQUE_NAME_MAX]);
int ctrl_unique_name_parse(const char *name, uint64_t *id);

#endif
