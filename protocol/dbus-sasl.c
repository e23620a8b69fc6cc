/* SPDX-License-Identifier: MIT */
/*
 * dbus-sasl.c - the D-Bus SASL handshake, server side, EXTERNAL only
 * (dbus-sasl.h says which forms and why).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "protocol/dbus-sasl.h"

void dbus_sasl_init(struct dbus_sasl *s, uid_t uid, bool can_fds, const char *guid)
{
	memset(s, 0, sizeof(*s));
	s->state = DBUS_SASL_NUL;
	s->uid = uid;
	s->can_fds = can_fds;
	snprintf(s->guid, sizeof(s->guid), "%s", guid);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The EXTERNAL response is the uid as decimal ASCII, hex-encoded: "1000" is
 * "31303030". Empty means "whoever the transport says I am". Anything else
 * (another uid, a name, bad hex) is refused, never guessed at.
 */
static bool external_response_ok(const struct dbus_sasl *s, const char *hex, size_t len)
{
	unsigned long long v = 0;

	if (len == 0)
		return true;
	if (len % 2 || len / 2 > 20)
		return false;
	for (size_t i = 0; i < len; i += 2) {
		int hi = hexval(hex[i]), lo = hexval(hex[i + 1]);
		char c;

		if (hi < 0 || lo < 0)
			return false;
		c = (char)(hi << 4 | lo);
		if (c < '0' || c > '9' || (i == 0 && c == '0' && len > 2))
			return false;
		v = v * 10 + (unsigned long long)(c - '0');
		if (v > (uid_t)-1)
			return false;
	}
	return v == (unsigned long long)s->uid;
}

static int reply(char *out, size_t out_size, size_t *out_len, const char *fmt, const char *arg)
{
	int n = snprintf(out + *out_len, out_size - *out_len, fmt, arg);

	if (n < 0 || (size_t)n >= out_size - *out_len)
		return -ENOBUFS;
	*out_len += (size_t)n;
	return 0;
}

#define REJECTED "REJECTED EXTERNAL\r\n%s"
#define OK	 "OK %s\r\n"

/* Is line (without "\r\n") the command cmd, alone or followed by a space? *arg: what follows. */
static bool command_is(const char *line, size_t len, const char *cmd, const char **arg, size_t *arg_len)
{
	size_t n = strlen(cmd);

	if (len < n || memcmp(line, cmd, n) != 0 || (len > n && line[n] != ' '))
		return false;
	*arg = len > n ? line + n + 1 : line + n;
	*arg_len = len > n ? len - n - 1 : 0;
	return true;
}

/* One command line, without its "\r\n": 1 for BEGIN, 0 to go on, or an error. */
static int handle_line(struct dbus_sasl *s, const char *line, size_t len, char *out, size_t out_size,
		       size_t *out_len)
{
	const char *arg;
	size_t arg_len;

	if (command_is(line, len, "AUTH", &arg, &arg_len)) {
		const char *sp;

		if (s->state != DBUS_SASL_AUTH)
			return reply(out, out_size, out_len, "ERROR \"AUTH not expected now\"\r\n%s", "");
		sp = memchr(arg, ' ', arg_len);
		if (!(sp ? (size_t)(sp - arg) : arg_len) || (sp ? (size_t)(sp - arg) : arg_len) != 8 ||
		    memcmp(arg, "EXTERNAL", 8) != 0)
			return reply(out, out_size, out_len, REJECTED, "");
		if (!sp) {
			s->state = DBUS_SASL_DATA;
			return reply(out, out_size, out_len, "DATA\r\n%s", "");
		}
		if (!external_response_ok(s, sp + 1, arg_len - (size_t)(sp + 1 - arg)))
			return reply(out, out_size, out_len, REJECTED, "");
		s->state = DBUS_SASL_OK;
		return reply(out, out_size, out_len, OK, s->guid);
	}
	if (command_is(line, len, "DATA", &arg, &arg_len)) {
		if (s->state != DBUS_SASL_DATA)
			return reply(out, out_size, out_len, "ERROR \"DATA not expected now\"\r\n%s", "");
		if (!external_response_ok(s, arg, arg_len)) {
			s->state = DBUS_SASL_AUTH;
			return reply(out, out_size, out_len, REJECTED, "");
		}
		s->state = DBUS_SASL_OK;
		return reply(out, out_size, out_len, OK, s->guid);
	}
	if (command_is(line, len, "CANCEL", &arg, &arg_len) ||
	    command_is(line, len, "ERROR", &arg, &arg_len)) {
		/* Either aborts the exchange in progress, and what was agreed in it; the client may start over. */
		s->state = DBUS_SASL_AUTH;
		s->fds_agreed = false;
		return reply(out, out_size, out_len, REJECTED, "");
	}
	if (command_is(line, len, "NEGOTIATE_UNIX_FD", &arg, &arg_len)) {
		if (s->state != DBUS_SASL_OK)
			return reply(out, out_size, out_len, "ERROR \"not authenticated\"\r\n%s", "");
		if (!s->can_fds)
			return reply(out, out_size, out_len, "ERROR \"fd passing not supported\"\r\n%s", "");
		s->fds_agreed = true;
		return reply(out, out_size, out_len, "AGREE_UNIX_FD\r\n%s", "");
	}
	if (command_is(line, len, "BEGIN", &arg, &arg_len)) {
		/* BEGIN before OK would start a message stream nobody authenticated. */
		if (s->state != DBUS_SASL_OK)
			return -EPROTO;
		s->state = DBUS_SASL_DONE;
		return 1;
	}
	/* While waiting for DATA, anything else is answered by the spec as an ERROR. */
	return reply(out, out_size, out_len, "ERROR \"unknown command\"\r\n%s", "");
}

int dbus_sasl_feed(struct dbus_sasl *s, const void *in, size_t len, size_t *consumed, char *out,
		   size_t out_size, size_t *out_len)
{
	const char *p = in;
	size_t pos = 0;
	int r = 0;

	*consumed = 0;
	if (s->state == DBUS_SASL_DONE)
		return 1;
	if (s->state == DBUS_SASL_NUL) {
		if (len == 0)
			return 0;
		/* The credentials byte: sent alone by GDBus, first of a line by others. */
		if (p[0] != 0)
			return -EPROTO;
		pos = 1;
		s->state = DBUS_SASL_AUTH;
	}
	while (pos < len) {
		const char *nl = memchr(p + pos, '\n', len - pos);
		size_t line_len;

		if (!nl) {
			if (len - pos >= DBUS_SASL_LINE_MAX)
				r = -EMSGSIZE;
			break;
		}
		line_len = (size_t)(nl - (p + pos)) + 1;
		if (line_len > DBUS_SASL_LINE_MAX) {
			r = -EMSGSIZE;
			break;
		}
		if (line_len < 2 || p[pos + line_len - 2] != '\r' || memchr(p + pos, 0, line_len)) {
			r = -EPROTO;
			break;
		}
		if (++s->n_commands > DBUS_SASL_COMMANDS_MAX) {
			r = -ELOOP;
			break;
		}
		r = handle_line(s, p + pos, line_len - 2, out, out_size, out_len);
		if (r < 0)
			break;
		pos += line_len;
		if (r == 1)
			break;
	}
	*consumed = pos;
	return r;
}
