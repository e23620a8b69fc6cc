/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-args.c - typed bodies on brokerctl's command line in busctl's
 * syntax: the arguments of call and emit appended to a message by
 * signature, and a reply printed back in the same syntax or as busctl's
 * JSON. Only the public typed API of libbrokerd is used, so this file is
 * unit-tested on the host without a bus (test-brokerctl-args.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/brokerctl-args.h"
#include "client/json.h"
#include "protocol/dbus-signature.h"

/* --- building ------------------------------------------------------------- */

struct args {
	brokerd_msg *m;
	char **v;
	int n, i;
	char *err;
	size_t err_size;
};

__attribute__((format(printf, 2, 3))) static int args_error(struct args *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->err, a->err_size, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *next_arg(struct args *a, char type)
{
	if (a->i >= a->n) {
		args_error(a, "too few arguments: a value of type '%c' is missing", type);
		return NULL;
	}
	return a->v[a->i++];
}

static int parse_bool(const char *s)
{
	static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
	static const char *const no[] = { "0", "no", "n", "false", "f", "off" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0)
			return 1;
		if (strcmp(s, no[i]) == 0)
			return 0;
	}
	return -EINVAL;
}

/* Whole-string integers in [min, max]; strtoll/strtoull alone accept
 * leading blanks and, for unsigned, a minus sign. */
static int parse_signed(const char *s, int64_t min, int64_t max, int64_t *ret)
{
	char *end;
	long long v;

	if (!*s || *s == ' ' || *s == '\t')
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_unsigned(const char *s, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == ' ' || *s == '\t' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* Room for any basic value: what brokerd_msg_append_basic() takes and brokerd_msg_read_basic() reads. */
union basic_value {
	uint8_t y;
	int b;
	int16_t n;
	uint16_t q;
	int32_t i;
	uint32_t u;
	int64_t x;
	uint64_t t;
	double d;
	const char *s;
};

static int append_basic(struct args *a, char type)
{
	const char *s = next_arg(a, type);
	union basic_value v;
	int64_t sv = 0;
	uint64_t uv = 0;
	char *end;
	int k = 0;

	if (!s)
		return -EINVAL;
	switch (type) {
	case 'y':
		k = parse_unsigned(s, UINT8_MAX, &uv);
		v.y = (uint8_t)uv;
		break;
	case 'b':
		k = parse_bool(s);
		v.b = k;
		break;
	case 'n':
		k = parse_signed(s, INT16_MIN, INT16_MAX, &sv);
		v.n = (int16_t)sv;
		break;
	case 'q':
		k = parse_unsigned(s, UINT16_MAX, &uv);
		v.q = (uint16_t)uv;
		break;
	case 'i':
		k = parse_signed(s, INT32_MIN, INT32_MAX, &sv);
		v.i = (int32_t)sv;
		break;
	case 'u':
		k = parse_unsigned(s, UINT32_MAX, &uv);
		v.u = (uint32_t)uv;
		break;
	case 'x':
		k = parse_signed(s, INT64_MIN, INT64_MAX, &v.x);
		break;
	case 't':
		k = parse_unsigned(s, UINT64_MAX, &v.t);
		break;
	case 'd':
		errno = 0;
		v.d = strtod(s, &end);
		k = !*s || *end || errno ? -EINVAL : 0;
		break;
	case 'h': {
		/* as busctl: the argument names a file, passed opened read-only */
		int fd = open(s, O_RDONLY | O_CLOEXEC | O_NOCTTY);

		if (fd < 0)
			return args_error(a, "cannot open \"%s\": %s", s, strerror(errno));
		k = brokerd_msg_append_basic(a->m, 'h', &fd); /* the message keeps a duplicate */
		close(fd);
		return k < 0 ? args_error(a, "cannot append \"%s\": %s", s, strerror(-k)) : 0;
	}
	case 's':
	case 'o':
	case 'g':
		if ((type == 'o' && !dbus_object_path_is_valid(s)) ||
		    (type == 'g' && !dbus_signature_is_valid(s)))
			return args_error(a, "\"%s\" is not a valid %s", s,
					  type == 'o' ? "object path" : "signature");
		k = brokerd_msg_append_basic(a->m, type, s);
		return k < 0 ? args_error(a, "cannot append \"%s\": %s", s, strerror(-k)) : 0;
	default:
		return args_error(a, "unknown type '%c'", type);
	}
	if (k < 0)
		return args_error(a, "\"%s\" is not a valid value of type '%c'", s, type);
	k = brokerd_msg_append_basic(a->m, type, &v);
	return k < 0 ? args_error(a, "cannot append \"%s\": %s", s, strerror(-k)) : 0;
}

static int append_types(struct args *a, const char *types, size_t len);

/* One complete type of n bytes at t. */
static int append_one(struct args *a, const char *t, size_t n)
{
	char contents[DBUS_SIGNATURE_MAX + 1];
	const char *s;
	uint64_t count;
	int k;

	switch (t[0]) {
	case 'a':
		s = next_arg(a, 'a');
		if (!s)
			return -EINVAL;
		if (parse_unsigned(s, INT_MAX, &count) < 0)
			return args_error(a, "\"%s\" is not an element count for '%.*s'", s, (int)n, t);
		memcpy(contents, t + 1, n - 1);
		contents[n - 1] = 0;
		k = brokerd_msg_open_container(a->m, 'a', contents);
		if (k < 0)
			return args_error(a, "cannot open '%.*s': %s", (int)n, t, strerror(-k));
		for (uint64_t i = 0; i < count; i++) {
			k = append_types(a, contents, n - 1);
			if (k < 0)
				return k;
		}
		break;
	case '(':
	case '{':
		memcpy(contents, t + 1, n - 2);
		contents[n - 2] = 0;
		k = brokerd_msg_open_container(a->m, t[0], contents);
		if (k < 0)
			return args_error(a, "cannot open '%.*s': %s", (int)n, t, strerror(-k));
		k = append_types(a, contents, n - 2);
		if (k < 0)
			return k;
		break;
	case 'v':
		s = next_arg(a, 'v');
		if (!s)
			return -EINVAL;
		if (!dbus_signature_is_single(s))
			return args_error(a, "\"%s\" is not a single complete type for a variant", s);
		k = brokerd_msg_open_container(a->m, 'v', s);
		if (k < 0)
			return args_error(a, "cannot open a variant of '%s': %s", s, strerror(-k));
		k = append_types(a, s, strlen(s));
		if (k < 0)
			return k;
		break;
	default:
		return append_basic(a, t[0]);
	}
	k = brokerd_msg_close_container(a->m);
	return k < 0 ? args_error(a, "cannot close '%.*s': %s", (int)n, t, strerror(-k)) : 0;
}

static int append_types(struct args *a, const char *types, size_t len)
{
	char buf[DBUS_SIGNATURE_MAX + 1];
	int n, k;

	memcpy(buf, types, len);
	buf[len] = 0;
	for (size_t i = 0; i < len; i += (size_t)n) {
		n = dbus_signature_next_element(buf + i);
		if (n < 0)
			return args_error(a, "invalid signature \"%s\"", buf);
		k = append_one(a, buf + i, (size_t)n);
		if (k < 0)
			return k;
	}
	return 0;
}

int args_append(brokerd_msg *m, const char *signature, int n, char **args, char *err, size_t err_size)
{
	struct args a = { .m = m, .v = args, .n = n, .err = err, .err_size = err_size };
	int k;

	if (!dbus_signature_is_valid(signature))
		return args_error(&a, "invalid signature \"%s\"", signature);
	k = append_types(&a, signature, strlen(signature));
	if (k < 0)
		return k;
	if (a.i < a.n)
		return args_error(&a, "too many arguments for signature \"%s\": \"%s\" is left over",
				  signature, a.v[a.i]);
	return 0;
}

/* --- text ----------------------------------------------------------------- */

/* A string as busctl quotes it: C escapes, other control bytes in octal. */
static void print_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		switch (c) {
		case '"':
		case '\\':
			fputc('\\', f);
			fputc(c, f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		default:
			if (c < ' ' || c == 0x7f)
				fprintf(f, "\\%03o", c);
			else
				fputc(c, f);
		}
	}
	fputc('"', f);
}

/* The shortest text that reads back as the same double: 0.1, not
 * 0.10000000000000001 as %.17g writes it. */
static void format_double(char *buf, size_t size, double d)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, size, "%.*g", p, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

/* Reads one basic value of type and prints it after a space. */
static int print_basic(brokerd_msg *m, char type, FILE *f)
{
	union basic_value v;
	int k = brokerd_msg_read_basic(m, type, &v);

	if (k < 0)
		return k;
	fputc(' ', f);
	switch (type) {
	case 'y':
		fprintf(f, "%u", v.y);
		break;
	case 'b':
		fputs(v.b ? "true" : "false", f);
		break;
	case 'n':
		fprintf(f, "%d", v.n);
		break;
	case 'q':
		fprintf(f, "%u", v.q);
		break;
	case 'i':
		fprintf(f, "%" PRIi32, v.i);
		break;
	case 'u':
	case 'h':
		fprintf(f, "%" PRIu32, v.u);
		break;
	case 'x':
		fprintf(f, "%" PRIi64, v.x);
		break;
	case 't':
		fprintf(f, "%" PRIu64, v.t);
		break;
	case 'd': {
		char num[64];

		format_double(num, sizeof(num), v.d);
		fputs(num, f);
		break;
	}
	default:
		print_quoted(f, v.s);
	}
	return 0;
}

/* Prints the values up to the end of the current container; returns how
 * many, or -errno. */
static int print_values(brokerd_msg *m, FILE *f)
{
	int count = 0;

	for (;;) {
		char type, contents[DBUS_SIGNATURE_MAX + 1] = "";
		const char *c = NULL;
		int k = brokerd_msg_peek_type(m, &type, &c);

		if (k < 0)
			return k;
		if (k == 0)
			return count;
		if (c)
			snprintf(contents, sizeof(contents), "%s", c);
		if (type == 'a') {
			/* busctl puts the count first: the elements go to a buffer */
			char *buf = NULL;
			size_t size = 0;
			FILE *inner = open_memstream(&buf, &size);
			int n;

			if (!inner)
				return -ENOMEM;
			k = brokerd_msg_enter_container(m, 'a', NULL);
			n = k < 0 ? k : print_values(m, inner);
			fclose(inner);
			if (n >= 0)
				fprintf(f, " %d%s", n, buf);
			free(buf);
			if (n < 0)
				return n;
			k = brokerd_msg_exit_container(m);
		} else if (type == '(' || type == '{' || type == 'v') {
			k = brokerd_msg_enter_container(m, type, NULL);
			if (k >= 0 && type == 'v')
				fprintf(f, " %s", contents);
			if (k >= 0)
				k = print_values(m, f);
			if (k >= 0)
				k = brokerd_msg_exit_container(m);
		} else {
			k = print_basic(m, type, f);
		}
		if (k < 0)
			return k;
		count++;
	}
}

int body_print(brokerd_msg *m, FILE *f)
{
	const char *sig = brokerd_msg_get_signature(m);
	int k;

	if (!sig || !*sig)
		return 0;
	k = brokerd_msg_rewind(m);
	if (k < 0)
		return k;
	fputs(sig, f);
	k = print_values(m, f);
	fputc('\n', f);
	return k < 0 ? k : 0;
}

/* Enters the variant that comes next in m, its signature into sig. */
static int variant_enter(brokerd_msg *m, char sig[DBUS_SIGNATURE_MAX + 1])
{
	const char *c = NULL;
	char type;
	int k = brokerd_msg_peek_type(m, &type, &c);

	if (k < 0)
		return k;
	if (k == 0 || type != 'v')
		return -ENXIO;
	snprintf(sig, DBUS_SIGNATURE_MAX + 1, "%s", c);
	k = brokerd_msg_enter_container(m, 'v', sig);
	return k < 0 ? k : 0;
}

int variant_print(brokerd_msg *m, FILE *f, bool with_signature)
{
	char sig[DBUS_SIGNATURE_MAX + 1], *buf = NULL;
	size_t size = 0;
	FILE *inner;
	int k = variant_enter(m, sig);

	if (k < 0)
		return k;
	/* the values come with a blank before each: a table's cell has none first */
	inner = open_memstream(&buf, &size);
	if (!inner)
		return -ENOMEM;
	k = print_values(m, inner);
	fclose(inner);
	if (k >= 0 && with_signature)
		fprintf(f, "%s%s\n", sig, buf);
	else if (k >= 0)
		fputs(buf + (buf[0] == ' '), f);
	free(buf);
	return k < 0 ? k : brokerd_msg_exit_container(m);
}

/* --- JSON ----------------------------------------------------------------- */

/* A small writer of its own: busctl's layout (pretty: one value a line,
 * indented, "key" : value) and doubles, which json.h does not write. */
struct jw {
	FILE *f;
	bool pretty;
	unsigned int depth;
	bool first; /* no value yet in the current object or array */
	bool after_key;
};

static void jw_indent(struct jw *w)
{
	fputc('\n', w->f);
	for (unsigned int i = 0; i < w->depth; i++)
		fputc('\t', w->f);
}

static void jw_prefix(struct jw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->depth == 0)
		return;
	if (!w->first)
		fputc(',', w->f);
	w->first = false;
	if (w->pretty)
		jw_indent(w);
}

static void jw_open(struct jw *w, char c)
{
	jw_prefix(w);
	fputc(c, w->f);
	w->depth++;
	w->first = true;
}

static void jw_close(struct jw *w, char c)
{
	bool empty = w->first;

	w->depth--;
	w->first = false;
	if (w->pretty && !empty)
		jw_indent(w);
	fputc(c, w->f);
}

static void jw_string(struct jw *w, const char *s)
{
	struct json j;

	jw_prefix(w);
	json_init(&j, w->f); /* for its escaping alone */
	json_string(&j, s);
}

static void jw_key(struct jw *w, const char *key)
{
	jw_string(w, key);
	fputs(w->pretty ? " : " : ":", w->f);
	w->after_key = true;
}

static int json_values(brokerd_msg *m, struct jw *w);

/* A basic value as JSON, or (as_key) as the string a JSON object's key is. */
static int json_basic(brokerd_msg *m, char type, struct jw *w, bool as_key)
{
	union basic_value v;
	char num[64];
	int k = brokerd_msg_read_basic(m, type, &v);

	if (k < 0)
		return k;
	switch (type) {
	case 'y':
		snprintf(num, sizeof(num), "%u", v.y);
		break;
	case 'b':
		snprintf(num, sizeof(num), "%s", v.b ? "true" : "false");
		break;
	case 'n':
		snprintf(num, sizeof(num), "%d", v.n);
		break;
	case 'q':
		snprintf(num, sizeof(num), "%u", v.q);
		break;
	case 'i':
		snprintf(num, sizeof(num), "%" PRIi32, v.i);
		break;
	case 'u':
	case 'h':
		snprintf(num, sizeof(num), "%" PRIu32, v.u);
		break;
	case 'x':
		snprintf(num, sizeof(num), "%" PRIi64, v.x);
		break;
	case 't':
		snprintf(num, sizeof(num), "%" PRIu64, v.t);
		break;
	case 'd':
		/* JSON has no NaN or infinity */
		if (v.d != v.d || v.d > 1.7976931348623157e308 || v.d < -1.7976931348623157e308)
			snprintf(num, sizeof(num), "null");
		else
			format_double(num, sizeof(num), v.d);
		break;
	default:
		if (as_key)
			jw_key(w, v.s);
		else
			jw_string(w, v.s);
		return 0;
	}
	if (as_key) {
		jw_key(w, num);
	} else {
		jw_prefix(w);
		fputs(num, w->f);
	}
	return 0;
}

/* An array of dict entries is an object, keyed by the entries' keys. */
static int json_dict(brokerd_msg *m, struct jw *w)
{
	int k;

	jw_open(w, '{');
	for (;;) {
		char type;
		const char *c;

		k = brokerd_msg_peek_type(m, &type, &c);
		if (k <= 0)
			break;
		k = brokerd_msg_enter_container(m, '{', NULL);
		if (k >= 0)
			k = brokerd_msg_peek_type(m, &type, NULL);
		if (k >= 0)
			k = json_basic(m, type, w, true);
		if (k >= 0)
			k = json_values(m, w);
		if (k >= 0)
			k = brokerd_msg_exit_container(m);
		if (k < 0)
			return k;
	}
	jw_close(w, '}');
	return k;
}

static int json_values(brokerd_msg *m, struct jw *w)
{
	for (;;) {
		char type, contents[DBUS_SIGNATURE_MAX + 1] = "";
		const char *c = NULL;
		int k = brokerd_msg_peek_type(m, &type, &c);

		if (k <= 0)
			return k;
		if (c)
			snprintf(contents, sizeof(contents), "%s", c);
		if (type == 'a' || type == '(' || type == 'v')
			k = brokerd_msg_enter_container(m, type, NULL);
		if (k < 0)
			return k;
		if (type == 'a' && contents[0] == '{') {
			k = json_dict(m, w);
		} else if (type == 'a' || type == '(') {
			/* arrays and structs are both JSON arrays */
			jw_open(w, '[');
			k = json_values(m, w);
			jw_close(w, ']');
		} else if (type == 'v') {
			jw_open(w, '{');
			jw_key(w, "type");
			jw_string(w, contents);
			jw_key(w, "data");
			k = json_values(m, w);
			jw_close(w, '}');
		} else {
			k = json_basic(m, type, w, false);
		}
		if (k >= 0 && (type == 'a' || type == '(' || type == 'v'))
			k = brokerd_msg_exit_container(m);
		if (k < 0)
			return k;
	}
}

int variant_print_json(brokerd_msg *m, FILE *f, bool pretty)
{
	struct jw w = { .f = f, .pretty = pretty };
	char sig[DBUS_SIGNATURE_MAX + 1];
	int k = variant_enter(m, sig);

	if (k < 0)
		return k;
	jw_open(&w, '{');
	jw_key(&w, "type");
	jw_string(&w, sig);
	jw_key(&w, "data");
	k = json_values(m, &w);
	jw_close(&w, '}');
	fputc('\n', f);
	return k < 0 ? k : brokerd_msg_exit_container(m);
}

int body_print_json(brokerd_msg *m, FILE *f, bool pretty)
{
	struct jw w = { .f = f, .pretty = pretty };
	const char *sig = brokerd_msg_get_signature(m);
	int k;

	k = brokerd_msg_rewind(m);
	if (k < 0)
		return k;
	jw_open(&w, '{');
	jw_key(&w, "type");
	jw_string(&w, sig ? sig : "");
	jw_key(&w, "data");
	jw_open(&w, '[');
	k = json_values(m, &w);
	jw_close(&w, ']');
	jw_close(&w, '}');
	fputc('\n', f);
	return k < 0 ? k : 0;
}
