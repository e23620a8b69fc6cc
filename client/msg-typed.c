/* SPDX-License-Identifier: MIT */
/*
 * msg-typed.c - messages built and read by D-Bus type: a new call, signal
 * or reply gets its body appended value by value (basic types, arrays,
 * structs, dict entries, variants; the signature grows with what is
 * appended), or printf-like from a type string; a sealed or received
 * message is read the same way, scanf-like. The body codec is
 * protocol/dbus-marshal.h; this file keeps a writer and a reader per
 * message and sends what was built through the pre-marshalled API, and
 * answers a call with typed values or a formatted error in one go.
 * Unix fds ('h') as sd-bus has them: appending duplicates the caller's fd,
 * reading returns the message's own fd (closed with the message).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/bus-internal.h"
#include "client/msg.h"
#include "protocol/dbus-marshal.h"

/* A message to build: strings as msg_new() stores them, an empty writer. */
static int msg_new_outgoing(brokerd_bus *bus, const struct chmsg *m, const char *name, brokerd_msg **ret)
{
	brokerd_msg *msg;

	if (!ret)
		return -EINVAL;
	msg = msg_new(bus, m, NULL, name);
	if (!msg)
		return -ENOMEM;
	msg->outgoing = true;
	msg->writer = calloc(1, sizeof(*msg->writer));
	/* room in front of the body: the header goes there when it is sent (bus_chan_send()) */
	if (!msg->writer || dbus_writer_init_room(msg->writer, "", MSG_HEADER_ROOM) < 0) {
		brokerd_msg_unref(msg);
		return -ENOMEM;
	}
	*ret = msg;
	return 0;
}

_public_ int brokerd_msg_new_call(brokerd_bus *bus, brokerd_msg **ret, const char *name, const char *path,
				  const char *interface, const char *member)
{
	struct chmsg m = { .type = CHMSG_CALL, .path = path, .interface = interface, .member = member };

	if (!ctrl_name_is_valid_wellknown(name) || !path || !dbus_object_path_is_valid(path) ||
	    (interface && !chmsg_interface_is_valid(interface)) || !ctrl_name_is_valid_member(member))
		return -EINVAL;
	return msg_new_outgoing(bus, &m, name, ret);
}

_public_ int brokerd_msg_new_signal(brokerd_bus *bus, brokerd_msg **ret, const char *name, const char *path,
				    const char *interface, const char *member)
{
	struct chmsg m = { .type = CHMSG_SIGNAL, .path = path, .interface = interface, .member = member };

	if (!ctrl_name_is_valid_wellknown(name) || !path || !dbus_object_path_is_valid(path) ||
	    !chmsg_interface_is_valid(interface) || !ctrl_name_is_valid_member(member))
		return -EINVAL;
	return msg_new_outgoing(bus, &m, name, ret);
}

_public_ int brokerd_msg_new_reply(brokerd_msg *call, brokerd_msg **ret)
{
	struct chmsg m = { .type = CHMSG_REPLY };
	int k;

	if (!call || call->type != BROKERD_MSG_CALL || call->outgoing)
		return -EINVAL;
	k = msg_new_outgoing(call->bus, &m, call->name, ret);
	if (k < 0)
		return k;
	(*ret)->call = brokerd_msg_ref(call);
	(*ret)->reply_serial = call->serial;
	return 0;
}

/*
 * At the top level, with the signature used up, what is appended next
 * extends it by the complete type (type, len bytes): the signature grows
 * with the body. Inside a container the signature already says what comes.
 */
static int writer_grow(struct dbus_writer *w, const char *type, size_t len)
{
	size_t n = strlen(w->signature);

	if (w->depth > 0 || w->frames[0].sig_pos != w->frames[0].sig_end)
		return 0;
	if (n + len > DBUS_SIGNATURE_MAX)
		return -EMSGSIZE;
	memcpy(w->signature + n, type, len);
	w->signature[n + len] = 0;
	if (dbus_signature_validate(w->signature, n + len) < 0) {
		w->signature[n] = 0;
		return -EINVAL;
	}
	w->frames[0].sig_end = n + len;
	return 0;
}

/*
 * An 'h': a duplicate of the caller's fd joins the message's fds, its index
 * goes in the body. Checked and made before the signature grows, so that a
 * refused fd leaves the message as it was.
 */
static int append_fd(brokerd_msg *m, int fd)
{
	uint32_t idx = m->n_fds;
	int *fds, dup, k;

	if (fd < 0)
		return -EBADF;
	/* one place stays free for the body's memfd, should the body be large */
	if (m->n_fds >= CHMSG_FDS_MAX - 1)
		return -ETOOMANYREFS;
	fds = realloc(m->fds, (m->n_fds + 1) * sizeof(int));
	if (!fds)
		return -ENOMEM;
	m->fds = fds;
	dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return -errno;
	k = writer_grow(m->writer, "h", 1);
	if (k >= 0)
		k = dbus_writer_append_basic(m->writer, 'h', &idx);
	if (k < 0) {
		close(dup);
		return k;
	}
	m->fds[m->n_fds++] = dup;
	return 0;
}

_public_ int brokerd_msg_append_basic(brokerd_msg *m, char type, const void *value)
{
	int k;

	if (!m || !value || !dbus_type_is_basic(type))
		return -EINVAL;
	if (!m->writer)
		return -EPERM; /* sealed or received */
	if (type == 'h')
		return append_fd(m, *(const int *)value);
	k = writer_grow(m->writer, &type, 1);
	if (k < 0)
		return k;
	return dbus_writer_append_basic(m->writer, type, value);
}

_public_ int brokerd_msg_append_array(brokerd_msg *m, char type, const void *values, size_t n)
{
	char t[3] = { 'a', type, 0 };
	int k;

	if (!m || (n && !values) || !dbus_type_is_basic(type) || dbus_type_fixed_size(type) == 0 || type == 'h')
		return -EINVAL;
	if (!m->writer)
		return -EPERM;
	k = writer_grow(m->writer, t, 2);
	if (k < 0)
		return k;
	return dbus_writer_append_array(m->writer, type, values, n);
}

_public_ int brokerd_msg_open_container(brokerd_msg *m, char type, const char *contents)
{
	char t[DBUS_SIGNATURE_MAX + 3];
	size_t n;
	int k;

	if (!m || (type != 'a' && type != '(' && type != '{' && type != 'v'))
		return -EINVAL;
	if (!m->writer)
		return -EPERM;
	if (m->writer->depth == 0 && m->writer->frames[0].sig_pos == m->writer->frames[0].sig_end) {
		/* a new top-level value: its type must be given whole */
		if (!contents || type == '{')
			return -EINVAL;
		n = strlen(contents);
		if (n > DBUS_SIGNATURE_MAX)
			return -EINVAL;
		if (type == 'v') {
			t[0] = 'v';
			n = 1;
		} else {
			t[0] = type;
			memcpy(t + 1, contents, n);
			if (type == '(')
				t[++n] = ')';
			n++;
		}
		k = writer_grow(m->writer, t, n);
		if (k < 0)
			return k;
	}
	return dbus_writer_open(m->writer, type, contents);
}

_public_ int brokerd_msg_close_container(brokerd_msg *m)
{
	if (!m)
		return -EINVAL;
	if (!m->writer)
		return -EPERM;
	return dbus_writer_close(m->writer);
}

/* Whether types is a sequence of complete types as dbus_signature_next_element() sees them. */
static bool types_are_valid(const char *types)
{
	int n;

	if (!types)
		return false;
	for (; *types; types += n) {
		n = dbus_signature_next_element(types);
		if (n < 0)
			return false;
	}
	return true;
}

typedef int (*one_fn)(brokerd_msg *m, const char **types, va_list *ap);

/*
 * Runs one (appending or reading one value) on each complete type of
 * contents (len bytes) in turn. For a read, 0 (the container ended early)
 * is -ENXIO. Returns 1 when done, or -errno.
 */
static int each_type(brokerd_msg *m, const char *contents, size_t len, va_list *ap, one_fn one, bool reading)
{
	char buf[DBUS_SIGNATURE_MAX + 1];
	const char *p = buf;
	int k;

	memcpy(buf, contents, len);
	buf[len] = 0;
	while (*p) {
		k = one(m, &p, ap);
		if (k < 0)
			return k;
		if (reading && k == 0)
			return -ENXIO;
	}
	return 1;
}

static int append_one(brokerd_msg *m, const char **types, va_list *ap);

static int append_contents(brokerd_msg *m, const char *contents, size_t len, va_list *ap)
{
	return each_type(m, contents, len, ap, append_one, false);
}

/* Appends the value of the complete type at *types from ap and moves past it. */
static int append_one(brokerd_msg *m, const char **types, va_list *ap)
{
	const char *t = *types;
	char contents[DBUS_SIGNATURE_MAX + 1];
	int n = dbus_signature_next_element(t), k;

	if (n < 0)
		return -EINVAL;
	*types += n;
	switch (t[0]) {
	case 'y': {
		uint8_t v = (uint8_t)va_arg(*ap, int);
		return brokerd_msg_append_basic(m, 'y', &v);
	}
	case 'b': {
		int v = va_arg(*ap, int);
		return brokerd_msg_append_basic(m, 'b', &v);
	}
	case 'n': {
		int16_t v = (int16_t)va_arg(*ap, int);
		return brokerd_msg_append_basic(m, 'n', &v);
	}
	case 'q': {
		uint16_t v = (uint16_t)va_arg(*ap, unsigned int);
		return brokerd_msg_append_basic(m, 'q', &v);
	}
	case 'i': {
		int32_t v = va_arg(*ap, int32_t);
		return brokerd_msg_append_basic(m, 'i', &v);
	}
	case 'u': {
		uint32_t v = va_arg(*ap, uint32_t);
		return brokerd_msg_append_basic(m, 'u', &v);
	}
	case 'h': {
		int v = va_arg(*ap, int);
		return brokerd_msg_append_basic(m, 'h', &v);
	}
	case 'x': {
		int64_t v = va_arg(*ap, int64_t);
		return brokerd_msg_append_basic(m, 'x', &v);
	}
	case 't': {
		uint64_t v = va_arg(*ap, uint64_t);
		return brokerd_msg_append_basic(m, 't', &v);
	}
	case 'd': {
		double v = va_arg(*ap, double);
		return brokerd_msg_append_basic(m, 'd', &v);
	}
	case 's':
	case 'o':
	case 'g':
		return brokerd_msg_append_basic(m, t[0], va_arg(*ap, const char *));
	case 'a': {
		/* a count, then that many elements */
		unsigned int count = va_arg(*ap, unsigned int);

		memcpy(contents, t + 1, (size_t)n - 1);
		contents[n - 1] = 0;
		k = brokerd_msg_open_container(m, 'a', contents);
		for (unsigned int i = 0; k >= 0 && i < count; i++)
			k = append_contents(m, contents, (size_t)n - 1, ap);
		return k < 0 ? k : brokerd_msg_close_container(m);
	}
	case '(':
	case '{':
		memcpy(contents, t + 1, (size_t)n - 2);
		contents[n - 2] = 0;
		k = brokerd_msg_open_container(m, t[0], contents);
		if (k >= 0)
			k = append_contents(m, contents, (size_t)n - 2, ap);
		return k < 0 ? k : brokerd_msg_close_container(m);
	case 'v': {
		/* the value's signature, then the value */
		const char *sig = va_arg(*ap, const char *);

		if (!sig || !dbus_signature_is_single(sig))
			return -EINVAL;
		k = brokerd_msg_open_container(m, 'v', sig);
		if (k >= 0)
			k = append_contents(m, sig, strlen(sig), ap);
		return k < 0 ? k : brokerd_msg_close_container(m);
	}
	default:
		return -EINVAL;
	}
}

static int msg_appendv(brokerd_msg *m, const char *types, va_list *ap)
{
	int k = 0;

	if (!m || !types_are_valid(types))
		return -EINVAL;
	while (*types && k >= 0)
		k = append_one(m, &types, ap);
	return k < 0 ? k : 0;
}

_public_ int brokerd_msg_append(brokerd_msg *m, const char *types, ...)
{
	va_list ap;
	int k;

	va_start(ap, types);
	k = msg_appendv(m, types, &ap);
	va_end(ap);
	return k;
}

_public_ int brokerd_msg_seal(brokerd_msg *m)
{
	void *data = NULL;
	size_t len = 0, room;
	int k;

	if (!m)
		return -EINVAL;
	if (!m->writer)
		return 0; /* already sealed, or received */
	room = m->writer->room;
	k = dbus_writer_finish(m->writer, &data, &len);
	if (k < 0)
		return k;
	m->owned_signature = strdup(m->writer->signature);
	if (!m->owned_signature) {
		free(data);
		return -ENOMEM;
	}
	dbus_writer_deinit(m->writer);
	free(m->writer);
	m->writer = NULL;
	m->owned_data = data;
	m->signature = m->owned_signature;
	/* the body starts after the room for the header (nothing allocated for an empty one) */
	m->data = data ? (uint8_t *)data + room : NULL;
	m->data_len = len - room;
	msg_set_byte_view(m);
	return 0;
}

/* The reader of a sealed or received message, started on first use. */
static int msg_reader(brokerd_msg *m, struct dbus_reader **ret)
{
	if (!m)
		return -EINVAL;
	if (m->writer)
		return -EPERM; /* not sealed */
	if (!m->reader) {
		m->reader = malloc(sizeof(*m->reader));
		if (!m->reader)
			return -ENOMEM;
		if (dbus_reader_init(m->reader, m->signature, m->data, m->data_len, DBUS_NATIVE_ENDIAN,
				     m->n_fds) < 0) {
			free(m->reader);
			m->reader = NULL;
			return -EBADMSG;
		}
	}
	*ret = m->reader;
	return 0;
}

_public_ int brokerd_msg_rewind(brokerd_msg *m)
{
	if (!m)
		return -EINVAL;
	free(m->reader);
	m->reader = NULL;
	return 0;
}

_public_ int brokerd_msg_peek_type(brokerd_msg *m, char *type, const char **contents)
{
	struct dbus_reader *r;
	const char *c;
	size_t n;
	int k;

	if (!type)
		return -EINVAL;
	k = msg_reader(m, &r);
	if (k < 0)
		return k;
	k = dbus_reader_peek(r, type, &c, &n);
	if (k <= 0 || !contents)
		return k;
	/* the reader's contents are not NUL-terminated */
	memcpy(m->peeked, c, n);
	m->peeked[n] = 0;
	*contents = m->peeked;
	return 1;
}

_public_ int brokerd_msg_read_basic(brokerd_msg *m, char type, void *ret)
{
	struct dbus_reader *r;
	int k;

	if (!ret || !dbus_type_is_basic(type))
		return -EINVAL;
	k = msg_reader(m, &r);
	if (k < 0)
		return k;
	if (type == 'h') {
		uint32_t idx;

		/* the message's own fd, valid as long as the message */
		k = dbus_reader_read_basic(r, 'h', &idx);
		if (k <= 0)
			return k;
		if (idx >= m->n_fds)
			return -EBADMSG; /* validated against n_fds: cannot happen */
		*(int *)ret = m->fds[idx];
		return 1;
	}
	return dbus_reader_read_basic(r, type, ret);
}

_public_ int brokerd_msg_read_dup_fd(brokerd_msg *m, int *ret)
{
	int fd, k;

	if (!ret)
		return -EINVAL;
	k = brokerd_msg_read_basic(m, 'h', &fd);
	if (k <= 0)
		return k;
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	*ret = fd;
	return 1;
}

_public_ int brokerd_msg_read_array(brokerd_msg *m, char type, const void **ret, size_t *ret_size)
{
	const char t[2] = { type, 0 };
	struct dbus_reader *r;
	size_t end;
	int k;

	if (!ret || !ret_size || !dbus_type_is_basic(type) || dbus_type_fixed_size(type) == 0 || type == 'h')
		return -EINVAL;
	k = brokerd_msg_enter_container(m, 'a', t);
	if (k <= 0)
		return k;
	r = m->reader;
	/* validated, native order: the elements lie in the body as the C type has them */
	end = r->frames[r->depth].data_end;
	*ret = end > r->pos ? r->data + r->pos : NULL;
	*ret_size = end - r->pos;
	k = brokerd_msg_exit_container(m);
	return k < 0 ? k : 1;
}

_public_ int brokerd_msg_enter_container(brokerd_msg *m, char type, const char *contents)
{
	struct dbus_reader *r;
	const char *c;
	size_t n;
	char t;
	int k;

	k = msg_reader(m, &r);
	if (k < 0)
		return k;
	k = dbus_reader_peek(r, &t, &c, &n);
	if (k <= 0)
		return k;
	if (t != type || (contents && (strlen(contents) != n || memcmp(contents, c, n) != 0)))
		return -ENXIO;
	return dbus_reader_enter(r, type);
}

_public_ int brokerd_msg_exit_container(brokerd_msg *m)
{
	struct dbus_reader *r;
	int k;

	k = msg_reader(m, &r);
	if (k < 0)
		return k;
	return dbus_reader_exit(r);
}

static int read_one(brokerd_msg *m, const char **types, va_list *ap);

static int read_contents(brokerd_msg *m, const char *contents, size_t len, va_list *ap)
{
	return each_type(m, contents, len, ap, read_one, true);
}

/* Reads the value of the complete type at *types into the pointers of ap: 1, 0 at the end, -errno. */
static int read_one(brokerd_msg *m, const char **types, va_list *ap)
{
	const char *t = *types;
	int n = dbus_signature_next_element(t), k;

	if (n < 0)
		return -EINVAL;
	*types += n;
	switch (t[0]) {
	case '(':
	case '{':
		k = brokerd_msg_enter_container(m, t[0], NULL);
		if (k <= 0)
			return k;
		k = read_contents(m, t + 1, (size_t)n - 2, ap);
		if (k < 0)
			return k;
		k = brokerd_msg_exit_container(m);
		return k < 0 ? k : 1;
	case 'v': {
		/* the signature the value must have, then where it goes */
		const char *sig = va_arg(*ap, const char *);

		if (!sig || !dbus_signature_is_single(sig))
			return -EINVAL;
		k = brokerd_msg_enter_container(m, 'v', sig);
		if (k <= 0)
			return k;
		k = read_contents(m, sig, strlen(sig), ap);
		if (k < 0)
			return k;
		k = brokerd_msg_exit_container(m);
		return k < 0 ? k : 1;
	}
	case 'a':
		return -EOPNOTSUPP; /* arrays: brokerd_msg_enter_container() */
	default:
		return brokerd_msg_read_basic(m, t[0], va_arg(*ap, void *));
	}
}

_public_ int brokerd_msg_read(brokerd_msg *m, const char *types, ...)
{
	va_list ap;
	int k = 1;

	if (!m || !types_are_valid(types))
		return -EINVAL;
	va_start(ap, types);
	while (*types && k > 0)
		k = read_one(m, &types, &ap);
	va_end(ap);
	return k;
}

_public_ int brokerd_bus_send(brokerd_bus *bus, brokerd_msg *m)
{
	int k;

	if (!bus || !m || !m->outgoing)
		return -EINVAL; /* a received message is not sent again */
	k = brokerd_msg_seal(m);
	if (k < 0)
		return k;
	/* the message's fds go with it: the next message encoded takes them */
	bus->send_fds = m->fds;
	bus->n_send_fds = m->n_fds;
	/*
	 * Sent at once: the header is written in front of the body, which is
	 * sent from where it lies (a call that waits for its chan is copied
	 * into a buffer of its own instead, bus_call_encode()).
	 */
	if (m->data && m->owned_data)
		bus->send_room = m->owned_data;
	switch (m->type) {
	case BROKERD_MSG_SIGNAL:
		k = brokerd_bus_emit(bus, m->name, m->path, m->interface, m->member, m->signature, m->data,
				     m->data_len);
		break;
	case BROKERD_MSG_REPLY:
		k = -EINVAL;
		if (m->call && m->call->bus == bus)
			k = brokerd_msg_reply_data(m->call, m->signature, m->data, m->data_len);
		break;
	case BROKERD_MSG_CALL:
		/* no handler: sent with NO_REPLY_EXPECTED */
		k = brokerd_bus_call_method_async(bus, NULL, m->name, m->path, *m->interface ? m->interface : NULL,
						  m->member, m->signature, m->data, m->data_len, 0, NULL, NULL);
		break;
	default:
		k = -EINVAL;
		break;
	}
	bus->send_fds = NULL; /* not taken if it failed before encoding */
	bus->n_send_fds = 0;
	bus->send_room = NULL;
	return k;
}

_public_ int brokerd_bus_call_msg(brokerd_bus *bus, brokerd_msg *m, uint64_t timeout_usec,
				  brokerd_msg **ret_reply)
{
	int k;

	if (!bus || !m || !m->outgoing || m->type != BROKERD_MSG_CALL)
		return -EINVAL;
	k = brokerd_msg_seal(m);
	if (k < 0)
		return k;
	bus->send_fds = m->fds;
	bus->n_send_fds = m->n_fds;
	/* as brokerd_bus_send(): the header goes in front of the body, the body is not copied */
	if (m->data && m->owned_data)
		bus->send_room = m->owned_data;
	k = brokerd_bus_call_method(bus, m->name, m->path, *m->interface ? m->interface : NULL, m->member,
				    m->signature, m->data, m->data_len, timeout_usec, ret_reply);
	bus->send_fds = NULL;
	bus->n_send_fds = 0;
	bus->send_room = NULL;
	return k;
}

_public_ int brokerd_msg_return(brokerd_msg *call, const char *types, ...)
{
	brokerd_msg *reply = NULL;
	va_list ap;
	int k;

	if (!call || !call->bus || !types)
		return -EINVAL;
	k = brokerd_msg_new_reply(call, &reply);
	if (k < 0)
		return k;
	va_start(ap, types);
	k = msg_appendv(reply, types, &ap);
	va_end(ap);
	if (k >= 0)
		k = brokerd_bus_send(call->bus, reply);
	brokerd_msg_unref(reply);
	return k;
}

_public_ int brokerd_msg_reply_errorf(brokerd_msg *call, const char *error_name, const char *format, ...)
{
	char text[1024];
	va_list ap;

	if (!format)
		return -EINVAL;
	/* a longer message is cut: an error's text is for people */
	va_start(ap, format);
	(void)vsnprintf(text, sizeof(text), format, ap);
	va_end(ap);
	return brokerd_msg_reply_error(call, error_name, text);
}
