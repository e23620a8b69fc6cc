/* SPDX-License-Identifier: MIT */
/*
 * ctrl.c - encoder and decoder of the control protocol (see ctrl.h and
 * README.md). Every byte that comes from another process goes through
 * ctrl_message_decode(), which checks every length against the op table
 * before anyone reads a field.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/macro.h"

static const struct ctrl_op_info ops[] = {
	[CTRL_OP_HELLO] = {
		.name = "Hello", .request_sig = "u", .reply_sig = "stu", .reply_sig_ext = "stuu",
		.min_len = 4, .max_reply_fds = 1,
	},
	[CTRL_OP_REQUEST_NAME] = {
		.name = "RequestName", .request_sig = "su", .reply_sig = "u", .reply_sig_ext = "uu",
		.min_len = 7, .max_reply_fds = 2,
	},
	[CTRL_OP_RELEASE_NAME] = {
		.name = "ReleaseName", .request_sig = "s", .reply_sig = "u",
		.min_len = 3,
	},
	[CTRL_OP_LIST_NAMES] = {
		.name = "ListNames", .request_sig = "u", .reply_sig = "as",
		.min_len = 4,
	},
	[CTRL_OP_LIST_QUEUED_OWNERS] = {
		.name = "ListQueuedOwners", .request_sig = "s", .reply_sig = "as",
		.min_len = 3,
	},
	[CTRL_OP_GET_NAME_OWNER] = {
		.name = "GetNameOwner", .request_sig = "s", .reply_sig = "s",
		.min_len = 3,
	},
	[CTRL_OP_GET_CREDENTIALS] = {
		.name = "GetCredentials", .request_sig = "s", .reply_sig = "uuuuaus",
		.min_len = 3, .max_reply_fds = 1,
	},
	[CTRL_OP_SUBSCRIBE] = {
		.name = "Subscribe", .request_sig = "s", .reply_sig = "",
		.min_len = 3, .max_reply_fds = 1,
	},
	[CTRL_OP_OPEN_CALL] = {
		.name = "OpenCall", .request_sig = "su", .reply_sig = "u", .reply_sig_ext = "uu",
		.min_len = 7, .max_reply_fds = 1,
	},
	[CTRL_OP_OPEN_INBOX] = {
		.name = "OpenInbox", .request_sig = "s", .reply_sig = "s", .reply_sig_ext = "su",
		.min_len = 3, .max_reply_fds = 1,
	},
	[CTRL_OP_MONITOR] = {
		.name = "Monitor", .request_sig = "u", .reply_sig = "u",
		.min_len = 4, .privileged = true,
	},
	[CTRL_OP_LIST_PEERS] = {
		.name = "ListPeers", .request_sig = "u", .reply_sig = "a(stuuusasu)",
		.min_len = 4,
	},
	[CTRL_OP_POLICY_CHECK] = {
		.name = "PolicyCheck", .request_sig = "uss", .reply_sig = "us",
		.min_len = 10,
	},
	[CTRL_OP_RELOAD] = {
		.name = "Reload", .request_sig = "", .reply_sig = "",
		.min_len = 0, .privileged = true,
	},
	[CTRL_OP_QUOTA] = {
		.name = "Quota", .request_sig = "u", .reply_sig = "a(ua(stt))",
		.min_len = 4,
	},
	[CTRL_OP_UNSUBSCRIBE] = {
		.name = "Unsubscribe", .request_sig = "s", .reply_sig = "u",
		.min_len = 3,
	},
	[CTRL_OP_LIST_NAMES_PAGE] = {
		.name = "ListNamesPage", .request_sig = "uus", .reply_sig = "ass",
		.min_len = 11,
	},
	[CTRL_OP_LIST_PEERS_PAGE] = {
		.name = "ListPeersPage", .request_sig = "uus", .reply_sig = "a(stuuusasu)s",
		.min_len = 11,
	},
	[CTRL_OP_WATCH_SIGNALS] = {
		.name = "WatchSignals", .request_sig = "u", .reply_sig = "u",
		.min_len = 4,
	},
	[CTRL_OP_UNWATCH_SIGNALS] = {
		.name = "UnwatchSignals", .request_sig = "u", .reply_sig = "u",
		.min_len = 4,
	},
};
_Static_assert(ELEMENTSOF(ops) == _CTRL_OP_MAX, "every op needs an entry in ops[]");

static const struct ctrl_op_info signals[] = {
	[CTRL_SIGNAL_NAME_OWNER_CHANGED] = {
		.name = "NameOwnerChanged", .reply_sig = "sss", .min_len = 9,
	},
	[CTRL_SIGNAL_NAME_ACQUIRED] = {
		.name = "NameAcquired", .reply_sig = "s", .min_len = 3, .max_reply_fds = 2,
	},
	[CTRL_SIGNAL_NAME_LOST] = {
		.name = "NameLost", .reply_sig = "s", .min_len = 3,
	},
	[CTRL_SIGNAL_MONITOR_CHANNEL] = {
		.name = "MonitorChannel", .reply_sig = "su", .min_len = 7, .max_reply_fds = 1,
	},
	[CTRL_SIGNAL_CAPABILITY_RENEWED] = {
		.name = "CapabilityRenewed", .reply_sig = "su", .min_len = 7, .max_reply_fds = 1,
	},
	[CTRL_SIGNAL_CAPABILITY_REVOKED] = {
		.name = "CapabilityRevoked", .reply_sig = "su", .min_len = 7,
	},
	[CTRL_SIGNAL_CALL_RECEIVER_LOST] = {
		.name = "CallReceiverLost", .reply_sig = "s", .min_len = 3,
	},
	[CTRL_SIGNAL_SIGNAL_CHANNEL] = {
		.name = "SignalChannel", .reply_sig = "s", .min_len = 3, .max_reply_fds = 1,
	},
	[CTRL_SIGNAL_REPLY_CAPABILITY] = {
		.name = "ReplyCapability", .reply_sig = "ss", .reply_sig_ext = "ssu", .min_len = 6,
		.max_reply_fds = 1,
	},
	[CTRL_SIGNAL_CALL_RECEIVER_ENDED] = {
		.name = "CallReceiverEnded", .reply_sig = "sst", .reply_sig_ext = "sstu", .min_len = 14,
	},
};
_Static_assert(ELEMENTSOF(signals) == _CTRL_SIGNAL_MAX, "every signal needs an entry in signals[]");

static const char *const type_names[] = {
	[CTRL_TYPE_REQUEST] = "request",
	[CTRL_TYPE_REPLY] = "reply",
	[CTRL_TYPE_ERROR] = "error",
	[CTRL_TYPE_SIGNAL] = "signal",
};
_Static_assert(ELEMENTSOF(type_names) == _CTRL_TYPE_MAX, "every type needs a name");

#define ERROR_SIG "ss"

const struct ctrl_op_info *ctrl_op_get(unsigned int op)
{
	if (op == 0 || op >= ELEMENTSOF(ops))
		return NULL;
	return &ops[op];
}

const struct ctrl_op_info *ctrl_signal_get(unsigned int signal)
{
	/* numbers may be left unused between signals (reserved for others) */
	if (signal == 0 || signal >= ELEMENTSOF(signals) || !signals[signal].name)
		return NULL;
	return &signals[signal];
}

const char *ctrl_type_to_string(unsigned int type)
{
	if (type == 0 || type >= ELEMENTSOF(type_names))
		return NULL;
	return type_names[type];
}

/* --- Signatures ---------------------------------------------------------- */

/* Length of the single complete type at sig, or -EINVAL. */
static int sig_type_len(const char *sig, unsigned int depth)
{
	int n, l;

	if (depth > CTRL_SIG_DEPTH_MAX)
		return -EINVAL;
	switch (*sig) {
	case 'u':
	case 't':
	case 's':
		return 1;
	case 'a':
		l = sig_type_len(sig + 1, depth + 1);
		return l < 0 ? l : l + 1;
	case '(':
		n = 1;
		if (sig[n] == ')')
			return -EINVAL;
		while (sig[n] != ')') {
			l = sig_type_len(sig + n, depth + 1);
			if (l < 0)
				return l;
			n += l;
		}
		return n + 1;
	default:
		return -EINVAL;
	}
}

/* Minimum encoded size of the single type at sig (which is known valid). */
static size_t sig_type_min(const char *sig)
{
	size_t n = 0;
	int l;

	switch (*sig) {
	case 'u':
		return 4;
	case 't':
		return 8;
	case 's':
		return 3;
	case 'a':
		return 4;
	case '(':
		for (sig++; *sig != ')'; sig += l) {
			l = sig_type_len(sig, 0);
			n += sig_type_min(sig);
		}
		return n;
	}
	return 0;
}

int ctrl_sig_min_len(const char *sig)
{
	size_t n = 0;
	int l;

	if (!sig)
		return -EINVAL;
	for (; *sig; sig += l) {
		l = sig_type_len(sig, 0);
		if (l < 0)
			return l;
		n += sig_type_min(sig);
	}
	return (int)n;
}

static uint16_t get_le16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* Validate one value of the (valid) single type at sig at r->pos. */
static int sig_check_value(struct ctrl_reader *r, const char *sig)
{
	const char *s;
	uint32_t count;
	size_t min;
	int l, k;

	switch (*sig) {
	case 'u':
		return ctrl_read_u32(r, &count);
	case 't':
		if (r->len - r->pos < 8)
			return -EBADMSG;
		r->pos += 8;
		return 0;
	case 's':
		return ctrl_read_string(r, &s, NULL);
	case 'a':
		k = ctrl_read_array(r, &count);
		if (k < 0)
			return k;
		/* A count the remaining bytes cannot hold is rejected up front. */
		min = sig_type_min(sig + 1);
		if (min == 0 || count > (r->len - r->pos) / min)
			return -EBADMSG;
		for (uint32_t i = 0; i < count; i++) {
			k = sig_check_value(r, sig + 1);
			if (k < 0)
				return k;
		}
		return 0;
	case '(':
		for (sig++; *sig != ')'; sig += l) {
			l = sig_type_len(sig, 0);
			k = sig_check_value(r, sig);
			if (k < 0)
				return k;
		}
		return 0;
	}
	return -EINVAL;
}

int ctrl_sig_validate(const char *sig, const void *payload, size_t len)
{
	struct ctrl_reader r;
	int l, k;

	if (!sig || (!payload && len))
		return -EINVAL;
	ctrl_reader_init_raw(&r, payload, len);
	for (; *sig; sig += l) {
		l = sig_type_len(sig, 0);
		if (l < 0)
			return l;
		k = sig_check_value(&r, sig);
		if (k < 0)
			return k;
	}
	return ctrl_reader_at_end(&r) ? 0 : -EBADMSG;
}

/* --- Decoding ------------------------------------------------------------ */

int ctrl_message_decode(struct ctrl_message *m, const void *buf, size_t len, unsigned int n_fds)
{
	const uint8_t *p = buf;
	const struct ctrl_op_info *info;
	const char *sig;
	unsigned int max_fds;

	if (!m || (!buf && len))
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	if (len > CTRL_MSG_MAX)
		return -EMSGSIZE;
	/* Take what we can from a short header, so errors can echo the serial. */
	if (len >= 1)
		m->hdr.version = p[0];
	if (len >= 2)
		m->hdr.type = p[1];
	if (len >= 4)
		m->hdr.code = get_le16(p + 2);
	if (len >= 8)
		m->hdr.serial = get_le32(p + 4);
	if (len < CTRL_HEADER_SIZE)
		return -EBADMSG;
	m->hdr.length = get_le32(p + 8);
	m->hdr.n_fds = get_le16(p + 12);
	m->hdr.reserved = get_le16(p + 14);

	if (m->hdr.version != CTRL_VERSION)
		return -EPROTO;
	if (m->hdr.reserved != 0 || m->hdr.length != len - CTRL_HEADER_SIZE)
		return -EBADMSG;
	if (m->hdr.n_fds != n_fds)
		return -ETOOMANYREFS;

	switch (m->hdr.type) {
	case CTRL_TYPE_REQUEST:
		info = ctrl_op_get(m->hdr.code);
		if (!info)
			return -EOPNOTSUPP;
		sig = info->request_sig;
		max_fds = 0;
		break;
	case CTRL_TYPE_REPLY:
		info = ctrl_op_get(m->hdr.code);
		if (!info)
			return -EOPNOTSUPP;
		sig = info->reply_sig;
		max_fds = info->max_reply_fds;
		break;
	case CTRL_TYPE_ERROR:
		/* Code 0: error about a request whose op could not be read. */
		info = ctrl_op_get(m->hdr.code);
		if (!info && m->hdr.code != 0)
			return -EOPNOTSUPP;
		sig = ERROR_SIG;
		max_fds = 0;
		break;
	case CTRL_TYPE_SIGNAL:
		info = ctrl_signal_get(m->hdr.code);
		if (!info)
			return -EOPNOTSUPP;
		if (m->hdr.serial != 0)
			return -EBADMSG;
		sig = info->reply_sig;
		max_fds = info->max_reply_fds;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (n_fds > max_fds)
		return -ETOOMANYREFS;
	if (m->hdr.type == CTRL_TYPE_REQUEST && m->hdr.length < info->min_len)
		return -EBADMSG;
	if (ctrl_sig_validate(sig, p + CTRL_HEADER_SIZE, m->hdr.length) < 0) {
		/* a reply or signal with the fields a request's flag asked for */
		if ((m->hdr.type != CTRL_TYPE_REPLY && m->hdr.type != CTRL_TYPE_SIGNAL) ||
		    !info->reply_sig_ext ||
		    ctrl_sig_validate(info->reply_sig_ext, p + CTRL_HEADER_SIZE, m->hdr.length) < 0)
			return -EBADMSG;
		sig = info->reply_sig_ext;
	}

	m->info = info;
	m->sig = sig;
	m->payload = p + CTRL_HEADER_SIZE;
	m->payload_len = m->hdr.length;
	return 0;
}

void ctrl_reader_init_raw(struct ctrl_reader *r, const void *payload, size_t len)
{
	r->p = payload;
	r->len = len;
	r->pos = 0;
}

void ctrl_reader_init(struct ctrl_reader *r, const struct ctrl_message *m)
{
	ctrl_reader_init_raw(r, m->payload, m->payload_len);
}

int ctrl_read_u32(struct ctrl_reader *r, uint32_t *v)
{
	if (r->len - r->pos < 4)
		return -EBADMSG;
	*v = get_le32(r->p + r->pos);
	r->pos += 4;
	return 0;
}

int ctrl_read_u64(struct ctrl_reader *r, uint64_t *v)
{
	if (r->len - r->pos < 8)
		return -EBADMSG;
	*v = get_le64(r->p + r->pos);
	r->pos += 8;
	return 0;
}

int ctrl_read_string(struct ctrl_reader *r, const char **s, size_t *len)
{
	size_t n;

	if (r->len - r->pos < 3)
		return -EBADMSG;
	n = get_le16(r->p + r->pos);
	if (n > CTRL_STRING_MAX || r->len - r->pos - 2 < n + 1)
		return -EBADMSG;
	/* Exactly n non-NUL bytes, then the NUL. */
	if (r->p[r->pos + 2 + n] != 0 || memchr(r->p + r->pos + 2, 0, n))
		return -EBADMSG;
	*s = (const char *)r->p + r->pos + 2;
	if (len)
		*len = n;
	r->pos += 2 + n + 1;
	return 0;
}

int ctrl_read_array(struct ctrl_reader *r, uint32_t *count)
{
	return ctrl_read_u32(r, count);
}

bool ctrl_reader_at_end(const struct ctrl_reader *r)
{
	return r->pos == r->len;
}

/* --- Encoding ------------------------------------------------------------ */

static uint8_t *writer_grow(struct ctrl_writer *w, size_t n)
{
	uint8_t *p;

	if (w->error)
		return NULL;
	if (n > CTRL_MSG_MAX - w->len) {
		w->error = -EMSGSIZE;
		return NULL;
	}
	/* 256 bytes at first: most messages fit without growing again. */
	if (ARRAY_RESERVE(w->buf, w->cap, w->len + n > 256 ? w->len + n : 256) < 0) {
		w->error = -ENOMEM;
		return NULL;
	}
	p = w->buf + w->len;
	w->len += n;
	return p;
}

int ctrl_writer_init(struct ctrl_writer *w, enum ctrl_type type, uint16_t code, uint32_t serial)
{
	uint8_t *p;

	if (!w || !ctrl_type_to_string(type))
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->type = type;
	w->code = code;
	p = writer_grow(w, CTRL_HEADER_SIZE);
	if (!p)
		return w->error;
	memset(p, 0, CTRL_HEADER_SIZE);
	p[0] = CTRL_VERSION;
	p[1] = (uint8_t)type;
	code = htole16(code);
	memcpy(p + 2, &code, 2);
	serial = htole32(serial);
	memcpy(p + 4, &serial, 4);
	return 0;
}

void ctrl_writer_deinit(struct ctrl_writer *w)
{
	if (!w)
		return;
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}

void ctrl_write_u32(struct ctrl_writer *w, uint32_t v)
{
	uint8_t *p = writer_grow(w, 4);

	v = htole32(v);
	if (p)
		memcpy(p, &v, 4);
}

void ctrl_write_u64(struct ctrl_writer *w, uint64_t v)
{
	uint8_t *p = writer_grow(w, 8);

	v = htole64(v);
	if (p)
		memcpy(p, &v, 8);
}

void ctrl_write_string(struct ctrl_writer *w, const char *s)
{
	size_t n;
	uint16_t l;
	uint8_t *p;

	if (!s)
		s = "";
	n = strlen(s);
	if (n > CTRL_STRING_MAX) {
		if (!w->error)
			w->error = -E2BIG;
		return;
	}
	p = writer_grow(w, 2 + n + 1);
	if (!p)
		return;
	l = htole16((uint16_t)n);
	memcpy(p, &l, 2);
	memcpy(p + 2, s, n + 1);
}

size_t ctrl_write_array_open(struct ctrl_writer *w)
{
	size_t cookie = w->len;

	ctrl_write_u32(w, 0);
	return cookie;
}

void ctrl_write_array_close(struct ctrl_writer *w, size_t cookie, uint32_t count)
{
	if (w->error || cookie + 4 > w->len)
		return;
	count = htole32(count);
	memcpy(w->buf + cookie, &count, 4);
}

void ctrl_write_fd(struct ctrl_writer *w, int fd)
{
	if (w->error)
		return;
	if (fd < 0 || w->n_fds >= CTRL_FDS_MAX) {
		w->error = fd < 0 ? -EBADF : -ETOOMANYREFS;
		return;
	}
	w->fds[w->n_fds++] = fd;
}

int ctrl_writer_finish(struct ctrl_writer *w, const void **data, size_t *len)
{
	struct ctrl_message m;
	uint32_t l;
	uint16_t n;
	int r;

	if (!w || !data || !len)
		return -EINVAL;
	if (w->error)
		return w->error;
	l = htole32((uint32_t)(w->len - CTRL_HEADER_SIZE));
	memcpy(w->buf + 8, &l, 4);
	n = htole16((uint16_t)w->n_fds);
	memcpy(w->buf + 12, &n, 2);
	/* What we send must pass our own decoder: catches signature mistakes. */
	r = ctrl_message_decode(&m, w->buf, w->len, w->n_fds);
	if (r < 0)
		return r;
	*data = w->buf;
	*len = w->len;
	return 0;
}

int ctrl_writer_error(struct ctrl_writer *w, uint16_t op, uint32_t serial, const char *name,
		      const char *message)
{
	const void *d;
	size_t l;
	int r;

	if (!w || !name || !ctrl_name_is_valid_error(name))
		return -EINVAL;
	if (!ctrl_op_get(op))
		op = 0;
	r = ctrl_writer_init(w, CTRL_TYPE_ERROR, op, serial);
	if (r < 0)
		return r;
	ctrl_write_string(w, name);
	ctrl_write_string(w, message ? message : "");
	return ctrl_writer_finish(w, &d, &l);
}

/* --- Names --------------------------------------------------------------- */

static bool is_name_char(char c, bool dash)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       (dash && c == '-');
}

/* Dot-separated elements, each non-empty, no leading digit, >= 2 elements. */
static bool dotted_name_is_valid(const char *name, bool dash)
{
	size_t n = 0, elements = 1;
	bool start = true;

	if (!name)
		return false;
	for (const char *p = name; *p; p++, n++) {
		if (*p == '.') {
			if (start)
				return false;
			elements++;
			start = true;
			continue;
		}
		if (!is_name_char(*p, dash) || (start && *p >= '0' && *p <= '9'))
			return false;
		start = false;
	}
	return n > 0 && n <= CTRL_NAME_MAX && !start && elements >= 2;
}

bool ctrl_name_is_valid_wellknown(const char *name)
{
	return dotted_name_is_valid(name, true);
}

bool ctrl_name_is_valid_error(const char *name)
{
	return dotted_name_is_valid(name, false);
}

bool ctrl_name_is_valid_member(const char *name)
{
	size_t n = 0;

	if (!name || !*name || (*name >= '0' && *name <= '9'))
		return false;
	for (const char *p = name; *p; p++, n++)
		if (!is_name_char(*p, false))
			return false;
	return n <= CTRL_NAME_MAX;
}

/*
 * Id N is named :1.(N-1): the first connection of a fresh bus is :1.0, the
 * second :1.1, as dbus-daemon numbers them (clients and test suites count
 * on it), while id 0 stays what it is in the kernel's message info, no
 * badge, and so has no name.
 */
int ctrl_unique_name_format(uint64_t id, char buf[static CTRL_UNIQUE_NAME_MAX])
{
	char digits[20];
	size_t n = 0;

	if (id == 0)
		return -EINVAL;
	/* by hand, not snprintf(): every received message names its sender (700 instructions less each) */
	id--;
	do {
		digits[n++] = (char)('0' + id % 10);
		id /= 10;
	} while (id);
	memcpy(buf, ":1.", 3);
	for (size_t i = 0; i < n; i++)
		buf[3 + i] = digits[n - 1 - i];
	buf[3 + n] = 0;
	return 0;
}

int ctrl_unique_name_parse(const char *name, uint64_t *id)
{
	uint64_t v = 0;
	const char *p;

	if (!name || strncmp(name, ":1.", 3) != 0)
		return -EINVAL;
	p = name + 3;
	/* Decimal, no leading zero (0 alone is a number), no overflow of the id it names. */
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1]))
		return -EINVAL;
	for (; *p; p++) {
		uint64_t digit = (uint64_t)(*p - '0');

		if (*p < '0' || *p > '9' || v > (UINT64_MAX - 1 - digit) / 10)
			return -EINVAL;
		v = v * 10 + digit;
	}
	if (id)
		*id = v + 1;
	return 0;
}

bool ctrl_name_is_valid_unique(const char *name)
{
	return ctrl_unique_name_parse(name, NULL) == 0;
}
