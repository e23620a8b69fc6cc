/* SPDX-License-Identifier: MIT */
/*
 * test-msg-fds.c - file descriptors and large bodies without the kernel:
 * the typed API's 'h' (append duplicates, read returns the message's own,
 * read_dup_fd a caller's copy, all closed with the message), arrays in one
 * go, and the receive side of msg_receive() on a buffer laid out as the
 * kernel lays out IOIPC_RECV_FDS receives: a body in a sealed memfd made by
 * bus_out_encode() mapped and read back, an unsealed or wrong-sized memfd,
 * a count that differs from UNIX_FDS and fds the kernel could not install
 * all refused, with every fd that came closed; a body up to
 * BUS_BODY_READ_MAX read into the bus's reused buffer rather than mapped,
 * and memfds of another size than the header says refused there too; the byte API's bodies
 * encoded without a copy first, to the same bytes as before, and a typed
 * body sent from where it was marshalled.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/bus-chan.h"
#include "client/bus-internal.h"
#include "client/msg.h"
#include "protocol/dbus-marshal.h"
#include "util/test.h"

#define NAME "org.test.Fds"

static bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static int dup_of(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	ASSERT(d >= 0);
	return d;
}

static void test_typed_h(void)
{
	brokerd_msg *m = NULL;
	int p[2], fd = -1, fd2 = -1, copy = -1, bad = -1;
	uint32_t u = 7, ru;
	char c;

	ASSERT_INT(pipe2(p, O_CLOEXEC), ==, 0);
	ASSERT_INT(brokerd_msg_new_signal(NULL, &m, NAME, "/", "org.test.I", "S"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'h', &p[1]), ==, 0);
	ASSERT_INT(brokerd_msg_append(m, "uh", u, p[0]), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(m, 'h', &bad), ==, -EBADF);
	ASSERT_INT(brokerd_msg_seal(m), ==, 0);
	ASSERT_STR(brokerd_msg_get_signature(m), "huh");
	/* the message has duplicates: the caller's fds are the caller's to close */
	ASSERT_INT(close(p[1]), ==, 0);
	ASSERT_INT(brokerd_msg_read(m, "hu", &fd, &ru), ==, 1);
	ASSERT_INT(ru, ==, 7);
	ASSERT(fd != p[1] && fd_is_open(fd));
	ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ASSERT_INT(brokerd_msg_read_dup_fd(m, &copy), ==, 1);
	ASSERT(copy != p[0] && fd_is_open(copy));
	/* the message's write end works */
	ASSERT_INT(write(fd, "x", 1), ==, 1);
	ASSERT_INT(read(p[0], &c, 1), ==, 1);
	ASSERT_INT(c, ==, 'x');
	ASSERT_INT(brokerd_msg_rewind(m), ==, 0);
	ASSERT_INT(brokerd_msg_read_basic(m, 'h', &fd2), ==, 1);
	ASSERT_INT(fd2, ==, fd); /* the same fd each time: owned by the message */
	brokerd_msg_unref(m);
	ASSERT(!fd_is_open(fd));
	/* the caller's copy outlives it; the write end is gone with the message */
	ASSERT(fd_is_open(copy));
	ASSERT_INT(read(p[0], &c, 1), ==, 0);
	close(copy);
	close(p[0]);
}

static void test_arrays(void)
{
	static const uint32_t v[4] = { 1, 2, 3, 0xdeadbeef };
	brokerd_msg *m = NULL;
	const void *r;
	size_t n;

	ASSERT_INT(brokerd_msg_new_signal(NULL, &m, NAME, "/", "org.test.I", "S"), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(m, 'u', v, 4), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(m, 'y', "abc", 3), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(m, 's', v, 1), ==, -EINVAL);
	ASSERT_INT(brokerd_msg_seal(m), ==, 0);
	ASSERT_STR(brokerd_msg_get_signature(m), "auay");
	ASSERT_INT(brokerd_msg_read_array(m, 'u', &r, &n), ==, 1);
	ASSERT_INT(n, ==, sizeof(v));
	ASSERT(memcmp(r, v, n) == 0);
	ASSERT_INT(brokerd_msg_read_array(m, 'u', &r, &n), ==, -ENXIO);
	ASSERT_INT(brokerd_msg_read_array(m, 'y', &r, &n), ==, 1);
	ASSERT_INT(n, ==, 3);
	ASSERT(memcmp(r, "abc", 3) == 0);
	ASSERT_INT(brokerd_msg_read_array(m, 'y', &r, &n), ==, 0);
	brokerd_msg_unref(m);
}

/* A chan whose receive completed as the kernel writes one with IOIPC_RECV_FDS. */
static struct chan *fake_recv(const struct bus_out *o, const int *fds, unsigned int n, uint32_t flags)
{
	struct chan *c = calloc(1, sizeof(*c));
	struct ioipc_msg_info info = { .pid = 1, .uid = 2, .gid = 3, .badge = 5, .len = (uint32_t)o->len };
	struct ioipc_fds_hdr h = { .nr = n, .flags = flags };
	size_t off;

	ASSERT(c);
	c->want_fds = true;
	c->buf_size = sizeof(info) + ioipc_fds_size(IOIPC_MAX_FDS) + CHMSG_MAX;
	c->buf = calloc(1, c->buf_size);
	ASSERT(c->buf);
	memcpy(c->buf, &info, sizeof(info));
	memcpy(c->buf + sizeof(info), &h, sizeof(h));
	memcpy(c->buf + sizeof(info) + sizeof(h), fds, n * sizeof(int));
	off = sizeof(info) + ioipc_fds_size(n);
	memcpy(c->buf + off, o->buf, o->len);
	c->res = (int)(off + o->len);
	return c;
}

static void fake_free(struct chan *c)
{
	free(c->buf);
	free(c->br);
	free(c);
}

/* c as a multishot receive leaves it: its one buffer the current message's, to be read in place. */
static void fake_multishot(struct chan *c)
{
	c->multishot = true;
	c->armed = true; /* so chan_release() submits nothing */
	c->nbufs = 1;
	c->bufs = c->buf;
	c->cur = c->buf;
	c->cur_bid = 0;
	c->br = calloc(1, sizeof(struct io_uring_buf));
	ASSERT(c->br);
}

/* A signal whose "ay" body holds n bytes of bytes, encoded for a default chan (8 KiB inline). */
static void encode_bytes(const uint8_t *bytes, size_t n, struct bus_out *o)
{
	brokerd_bus bus = { 0 };
	brokerd_msg *built = NULL;
	struct chmsg m = {
		.type = CHMSG_SIGNAL, .path = "/", .interface = "org.test.I", .member = "Big", .serial = 1
	};

	ASSERT_INT(brokerd_msg_new_signal(NULL, &built, NAME, "/", "org.test.I", "Big"), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(built, 'y', bytes, n), ==, 0);
	ASSERT_INT(brokerd_msg_seal(built), ==, 0);
	m.signature = built->signature;
	m.body = built->data;
	m.body_len = (uint32_t)built->data_len;
	ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, o), ==, 0);
	brokerd_msg_unref(built);
}

/* o's message received on a fake chan (in place when asked), with a copy of its memfd. */
static int receive_body(brokerd_bus *bus, const struct bus_out *o, bool in_place, struct chan **c,
			brokerd_msg **ret)
{
	int fd = dup_of(o->fds[o->n_fds - 1]);
	int k;

	*c = fake_recv(o, &fd, 1, 0);
	if (in_place)
		fake_multishot(*c);
	k = in_place ? msg_receive_in_place(bus, *c, NAME, ret) : msg_receive(bus, *c, NAME, ret);
	ASSERT(!fd_is_open(fd)); /* read or mapped, then closed; or refused and closed */
	return k;
}

/* msg's byte view is the n bytes of bytes. */
static void assert_bytes(brokerd_msg *msg, const uint8_t *bytes, size_t n)
{
	const void *r;
	size_t len;

	ASSERT_INT(brokerd_msg_get_body(msg, &r, &len), ==, 0);
	ASSERT_INT(len, ==, n);
	ASSERT(memcmp(r, bytes, n) == 0);
}

/*
 * A body in a memfd up to BUS_BODY_READ_MAX is read into a buffer, not
 * mapped (the 16 KiB of a large signal; the limit; one byte over it is
 * mapped), to the bytes sent; the buffer goes back to the bus for the next
 * body and is not lent out twice while a message holds it; a message read
 * in place and kept keeps its body where it was read. A memfd one byte
 * longer or shorter than the header says, or missing a seal, is refused.
 */
static void test_body_read(void)
{
	static const size_t sizes[] = { 16384, BUS_BODY_READ_MAX - 4, BUS_BODY_READ_MAX - 3 };
	brokerd_bus bus = { .n_ref = 1 };
	size_t max = BUS_BODY_READ_MAX;
	uint8_t *bytes = malloc(max);
	brokerd_msg *msg = NULL, *msg2 = NULL;
	struct chan *c, *c2;
	struct bus_out o;
	void *buf;

	ASSERT(bytes);
	for (size_t i = 0; i < max; i++)
		bytes[i] = (uint8_t)(i * 13 + 5);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* the "ay" body: its length, then the bytes */
		bool read = 4 + sizes[i] <= BUS_BODY_READ_MAX;

		encode_bytes(bytes, sizes[i], &o);
		ASSERT_INT(o.n_fds, ==, 1);
		for (int in_place = 0; in_place < 2; in_place++) {
			ASSERT_INT(receive_body(&bus, &o, in_place, &c, &msg), ==, 0);
			ASSERT(read ? msg->body_buf && !msg->map : msg->map && !msg->body_buf);
			assert_bytes(msg, bytes, sizes[i]);
			brokerd_msg_unref(msg);
			fake_free(c);
		}
		bus_out_deinit(&o);
	}
	/* the buffer went back to the bus: the next body is read into it */
	buf = bus.body_cache;
	ASSERT(buf);
	encode_bytes(bytes, 16384, &o);
	ASSERT_INT(receive_body(&bus, &o, false, &c, &msg), ==, 0);
	ASSERT(msg->body_buf == buf && !bus.body_cache);
	/* while msg holds it, another message gets a buffer of its own */
	bytes[0] ^= 0xff;
	bus_out_deinit(&o);
	encode_bytes(bytes, 16384, &o);
	ASSERT_INT(receive_body(&bus, &o, false, &c2, &msg2), ==, 0);
	ASSERT(msg2->body_buf && msg2->body_buf != buf);
	assert_bytes(msg2, bytes, 16384);
	bytes[0] ^= 0xff;
	assert_bytes(msg, bytes, 16384);
	brokerd_msg_unref(msg);
	brokerd_msg_unref(msg2);
	ASSERT(bus.body_cache == buf); /* one spare is kept, the other freed */
	fake_free(c);
	fake_free(c2);

	/* read in place and kept past its dispatch: the chan's buffer back, the body where it was read */
	bus_out_deinit(&o);
	encode_bytes(bytes, 16384, &o);
	ASSERT_INT(receive_body(&bus, &o, true, &c, &msg), ==, 0);
	ASSERT(msg->held_chan == c && msg->body_buf);
	buf = msg->body_buf;
	ASSERT_INT(msg_keep(msg), ==, 0);
	ASSERT_INT(c->holds, ==, 0);
	memset(c->buf, 'X', c->buf_size);
	ASSERT(msg->body_buf == buf);
	assert_bytes(msg, bytes, 16384);
	ASSERT_STR(brokerd_msg_get_member(msg), "Big");
	brokerd_msg_unref(msg);
	fake_free(c);

	/* memfds other than the header says, at the read path's sizes: refused, every fd closed */
	for (int bad = 0; bad < 3; bad++) {
		uint32_t len = 4 + 16384;
		int fd = memfd_create("bad", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
		int fds[1];
		uint8_t *copy = malloc(len + 1);

		ASSERT(fd >= 0 && copy);
		ASSERT_INT(pread(o.fds[0], copy, len, 0), ==, (ssize_t)len);
		copy[len] = 0;
		if (bad == 0)
			len++; /* larger than the header says */
		else if (bad == 1)
			len--; /* shorter: the array's bytes end early */
		else
			seals &= ~F_SEAL_WRITE; /* its sender could still write to it */
		ASSERT_INT(write(fd, copy, len), ==, (ssize_t)len);
		ASSERT_INT(fcntl(fd, F_ADD_SEALS, seals), ==, 0);
		fds[0] = fd;
		c = fake_recv(&o, fds, 1, 0);
		ASSERT_INT(msg_receive(&bus, c, NAME, &msg), ==, -EBADMSG);
		ASSERT(!fd_is_open(fd));
		fake_free(c);
		free(copy);
	}
	bus_out_deinit(&o);
	/* what a bus keeps for the next message (bus_free() would) */
	free(bus.body_cache);
	free(bus.msg_cache);
	free(bus.msg_block);
	free(bytes);
}

static void test_body_memfd(void)
{
	brokerd_bus bus = { 0 };
	size_t big = 1 << 20;
	uint8_t *body = malloc(big);
	struct chmsg m = {
		.type = CHMSG_SIGNAL, .path = "/", .interface = "org.test.I", .member = "Big", .serial = 1
	};
	brokerd_msg *msg = NULL, *built = NULL;
	struct bus_out o;
	struct chan *c;
	const void *r;
	size_t n;
	int fds[3], p[2], hfd;

	ASSERT(body);
	for (size_t i = 0; i < big; i++)
		body[i] = (uint8_t)(i * 7 + 1);
	ASSERT_INT(pipe2(p, O_CLOEXEC), ==, 0);

	/* small: inline, no fd */
	ASSERT_INT(brokerd_msg_new_signal(NULL, &built, NAME, "/", "org.test.I", "Big"), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(built, 'y', body, 100), ==, 0);
	ASSERT_INT(brokerd_msg_seal(built), ==, 0);
	m.signature = built->signature;
	m.body = built->data;
	m.body_len = (uint32_t)built->data_len;
	ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, &o), ==, 0);
	ASSERT_INT(o.n_fds, ==, 0);
	ASSERT(o.len <= BUS_INLINE_MAX);
	bus_out_deinit(&o);
	brokerd_msg_unref(built);

	/* large, with an 'h' before it: the body goes in a sealed memfd, the last fd */
	ASSERT_INT(brokerd_msg_new_signal(NULL, &built, NAME, "/", "org.test.I", "Big"), ==, 0);
	ASSERT_INT(brokerd_msg_append_basic(built, 'h', &p[1]), ==, 0);
	ASSERT_INT(brokerd_msg_append_array(built, 'y', body, big), ==, 0);
	ASSERT_INT(brokerd_msg_seal(built), ==, 0);
	m.signature = built->signature;
	m.body = built->data;
	m.body_len = (uint32_t)built->data_len;
	bus.send_fds = built->fds;
	bus.n_send_fds = built->n_fds;
	ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, &o), ==, 0);
	ASSERT(bus.send_fds == NULL); /* taken once */
	ASSERT_INT(o.n_fds, ==, 2);
	ASSERT(o.len <= BUS_INLINE_MAX);
	ASSERT_INT(fcntl(o.fds[1], F_GET_SEALS), ==,
		   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);

	/* received: the kernel installed two fresh fds */
	fds[0] = dup_of(o.fds[0]);
	fds[1] = dup_of(o.fds[1]);
	c = fake_recv(&o, fds, 2, 0);
	ASSERT_INT(msg_receive(NULL, c, NAME, &msg), ==, 0);
	ASSERT(!fd_is_open(fds[1])); /* the body's memfd: mapped, then closed */
	ASSERT_STR(brokerd_msg_get_signature(msg), "hay");
	ASSERT_INT(brokerd_msg_read_basic(msg, 'h', &hfd), ==, 1);
	ASSERT_INT(hfd, ==, fds[0]);
	ASSERT_INT(write(hfd, "y", 1), ==, 1);
	ASSERT_INT(brokerd_msg_read_array(msg, 'y', &r, &n), ==, 1);
	ASSERT_INT(n, ==, big);
	ASSERT(memcmp(r, body, big) == 0);
	brokerd_msg_unref(msg);
	ASSERT(!fd_is_open(fds[0]));
	fake_free(c);

	/* the header says 2 fds, 1 came: dropped, and the one that came closed */
	fds[0] = dup_of(o.fds[0]);
	c = fake_recv(&o, fds, 1, 0);
	ASSERT_INT(msg_receive(NULL, c, NAME, &msg), ==, -EBADMSG);
	ASSERT(!fd_is_open(fds[0]));
	fake_free(c);

	/* the kernel could not install them all */
	fds[0] = dup_of(o.fds[0]);
	fds[1] = -1;
	c = fake_recv(&o, fds, 2, IOIPC_FDS_TRUNC);
	ASSERT_INT(msg_receive(NULL, c, NAME, &msg), ==, -EMFILE);
	ASSERT(!fd_is_open(fds[0]));
	fake_free(c);

	/* a memfd its sender could still write to is refused */
	fds[0] = dup_of(o.fds[0]);
	fds[1] = memfd_create("unsealed", MFD_CLOEXEC);
	ASSERT(fds[1] >= 0);
	ASSERT_INT(ftruncate(fds[1], (off_t)m.body_len), ==, 0);
	c = fake_recv(&o, fds, 2, 0);
	ASSERT_INT(msg_receive(NULL, c, NAME, &msg), ==, -EBADMSG);
	ASSERT(!fd_is_open(fds[0]) && !fd_is_open(fds[1]));
	fake_free(c);

	/* fds nobody took are closed when the chan goes (a dropped message) */
	fds[0] = dup_of(o.fds[0]);
	fds[1] = dup_of(o.fds[1]);
	fds[2] = dup_of(o.fds[1]);
	c = fake_recv(&o, fds, 3, 0);
	ASSERT(chan_take_fds(c) != NULL);
	ASSERT(chan_take_fds(c) == NULL); /* once */
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	fake_free(c);
	bus_out_deinit(&o);
	brokerd_msg_unref(built);

	/* over 128 MiB: refused before anything is made */
	m.signature = "ay";
	m.body = body;
	m.body_len = CHMSG_BODY_MAX + 1;
	ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, &o), ==, -EMSGSIZE);
	close(p[0]);
	close(p[1]);
	free(body);
}

/* The inline limit a chan's told size sets: 60 KiB inline with 64 KiB slots, above in a memfd. */
static void test_inline_max(void)
{
	brokerd_bus bus = { 0 };
	struct chan c = { 0 };
	size_t size = 60 << 10;
	uint8_t *body = calloc(1, CHMSG_MAX + 1);
	struct chmsg m = { .type = CHMSG_SIGNAL,
			   .path = "/",
			   .interface = "org.test.I",
			   .member = "Big",
			   .serial = 1,
			   .signature = "ay" };
	struct bus_out o;

	ASSERT(body);
	/* not told, told less than the smallest slot, more than a receiver holds */
	ASSERT_INT(bus_chan_inline_max(NULL), ==, BUS_INLINE_MAX);
	ASSERT_INT(bus_chan_inline_max(&c), ==, BUS_INLINE_MAX);
	c.msg_max = 4096;
	ASSERT_INT(bus_chan_inline_max(&c), ==, BUS_INLINE_MAX);
	c.msg_max = 1U << 20;
	ASSERT_INT(bus_chan_inline_max(&c), ==, CHMSG_MAX);
	c.msg_max = 65536;
	ASSERT_INT(bus_chan_inline_max(&c), ==, 65536);

	/* an "ay": its length first, in native byte order */
	m.body = body;
	m.body_len = (uint32_t)size;
	*(uint32_t *)body = m.body_len - 4;
	ASSERT_INT(bus_out_encode(&bus, &m, bus_chan_inline_max(&c), &o), ==, 0);
	ASSERT_INT(o.n_fds, ==, 0);
	ASSERT(o.len > size && o.len <= 65536);
	bus_out_deinit(&o);
	/* the same body on a chan of the default size: in a memfd */
	ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, &o), ==, 0);
	ASSERT_INT(o.n_fds, ==, 1);
	bus_out_deinit(&o);
	/* one that does not fit 64 KiB: in a memfd */
	m.body_len = 65536;
	*(uint32_t *)body = m.body_len - 4;
	ASSERT_INT(bus_out_encode(&bus, &m, bus_chan_inline_max(&c), &o), ==, 0);
	ASSERT_INT(o.n_fds, ==, 1);
	ASSERT(o.len <= BUS_INLINE_MAX);
	bus_out_deinit(&o);
	free(body);
}

/* A memfd's whole contents (of the size given). */
static uint8_t *memfd_read(int fd, size_t len)
{
	uint8_t *p = malloc(len);

	ASSERT(p);
	ASSERT_INT(pread(fd, p, len, 0), ==, (ssize_t)len);
	return p;
}

/*
 * The byte API's bodies are laid out when encoded, straight into the send
 * buffer (or the memfd): nothing is copied before, and the bytes that go
 * out are those of the "ay" marshalled first and then encoded, byte for
 * byte, inline, at the inline limit, and in a memfd.
 */
static void test_bytes_wire(void)
{
	size_t sizes[] = { 0, 1, 3, 100, 8000, 0 /* the largest inline */, 0 /* one more */, 9000, 1 << 20 };
	struct chmsg h = { .type = CHMSG_SIGNAL,
			   .path = "/p",
			   .interface = "org.test.I",
			   .member = "B",
			   .serial = 7,
			   .signature = "ay",
			   .body_len = 4 };
	size_t big = 1 << 20, hdr;
	uint8_t *bytes = malloc(big), *hbuf = malloc(CHMSG_MAX);
	brokerd_bus bus = { 0 };

	ASSERT(bytes && hbuf);
	ASSERT(chmsg_encode_header(&h, hbuf, CHMSG_MAX) > 0);
	hdr = (size_t)chmsg_encode_header(&h, hbuf, CHMSG_MAX);
	sizes[5] = BUS_INLINE_MAX - hdr - 4;
	sizes[6] = sizes[5] + 1;
	free(hbuf);
	for (size_t i = 0; i < big; i++)
		bytes[i] = (uint8_t)(i * 13 + 5);
	for (size_t s = 0; s < ELEMENTSOF(sizes); s++) {
		struct chmsg base = {
			.type = CHMSG_SIGNAL, .path = "/p", .interface = "org.test.I", .member = "B", .serial = 7
		};
		struct chmsg ref = base, m = base;
		_cleanup_(dbus_writer_deinit) struct dbus_writer w = { 0 };
		void *ref_body = NULL, *data = (void *)1;
		size_t ref_len = 0;
		struct bus_out a, b;

		/* before: the "ay" marshalled on its own, then encoded */
		if (sizes[s]) {
			ASSERT_INT(dbus_writer_init(&w, "ay"), ==, 0);
			ASSERT_INT(dbus_writer_append_array(&w, 'y', bytes, sizes[s]), ==, 0);
			ASSERT_INT(dbus_writer_finish(&w, &ref_body, &ref_len), ==, 0);
			ref.signature = "ay"; /* a caller's "ay", not the byte API's tag */
			ref.body = ref_body;
			ref.body_len = (uint32_t)ref_len;
		}
		ASSERT_INT(bus_out_encode(&bus, &ref, BUS_INLINE_MAX, &a), ==, 0);

		/* now: the bytes themselves, not copied until encoded */
		ASSERT_INT(bus_bytes_body(&m, bytes, sizes[s], &data), ==, 0);
		ASSERT(data == NULL);
		ASSERT(m.body == (sizes[s] ? bytes : NULL));
		ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, &b), ==, 0);

		ASSERT_INT(b.len, ==, a.len);
		ASSERT_INT(b.n_fds, ==, a.n_fds);
		ASSERT(memcmp(a.buf, b.buf, a.len) == 0);
		/* inline up to the limit, in a memfd above it */
		ASSERT_INT(a.n_fds, ==, hdr + ref_len > BUS_INLINE_MAX ? 1 : 0);
		ASSERT_INT(a.n_fds, ==, sizes[s] > sizes[5] ? 1 : 0);
		if (a.n_fds) {
			uint8_t *pa = memfd_read(a.fds[0], ref_len), *pb = memfd_read(b.fds[0], ref_len);
			struct stat st;

			ASSERT_INT(fstat(b.fds[0], &st), ==, 0);
			ASSERT_INT(st.st_size, ==, (off_t)ref_len);
			ASSERT(memcmp(pa, pb, ref_len) == 0);
			ASSERT_INT(fcntl(b.fds[0], F_GET_SEALS), ==,
				   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
			free(pa);
			free(pb);
		}
		bus_out_deinit(&a);
		bus_out_deinit(&b);
		free(ref_body);
	}
	free(bytes);
}

/*
 * A typed signal or reply sent at once goes from where its body was
 * marshalled: the header is written in the room in front of it, the same
 * bytes as the body copied after the header; a header too long for the
 * room falls back to that copy, a large body to the memfd.
 */
static void test_typed_in_place(void)
{
	static const char long_path[] = "/a/very/long/path/that/makes/the/header/larger/than/the/room/"
					"left/in/front/of/the/body/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/"
					"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/"
					"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
	const char *paths[] = { "/p", long_path };
	brokerd_bus bus = { 0 };

	for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
		brokerd_msg *built = NULL;
		struct chmsg m = { .type = CHMSG_SIGNAL, .serial = 3 };
		struct bus_out a, b;

		ASSERT_INT(brokerd_msg_new_signal(NULL, &built, NAME, paths[i], "org.test.I", "T"), ==, 0);
		ASSERT_INT(brokerd_msg_append(built, "sua{sv}", "text", 42u, 0), ==, 0);
		ASSERT_INT(brokerd_msg_seal(built), ==, 0);
		m.path = built->path;
		m.interface = built->interface;
		m.member = built->member;
		m.signature = built->signature;
		m.body = built->data;
		m.body_len = (uint32_t)built->data_len;
		/* before: the body copied after the header, in a buffer of its own */
		ASSERT_INT(bus_out_encode(&bus, &m, BUS_INLINE_MAX, &a), ==, 0);
		/* now: sent at once, with the room in front of the body */
		bus.send_room = built->owned_data;
		ASSERT_INT(bus_out_encode_now(&bus, &m, BUS_INLINE_MAX, &b), ==, 0);
		ASSERT(bus.send_room == NULL); /* taken once */
		ASSERT_INT(b.len, ==, a.len);
		ASSERT(memcmp(a.buf, b.buf, a.len) == 0);
		if (i == 0)
			ASSERT(b.buf + b.len == (uint8_t *)built->data + built->data_len); /* in place */
		else
			ASSERT(b.buf == bus.send_buf); /* no room for this header: copied */
		bus_out_deinit(&a);
		bus_out_deinit(&b);
		brokerd_msg_unref(built);
	}
	/* without a room (a received message, the byte API): into the send buffer */
	{
		struct chmsg m = { .type = CHMSG_SIGNAL, .serial = 3, .path = "/", .interface = "org.test.I",
				   .member = "T" };
		struct bus_out b;

		ASSERT_INT(bus_out_encode_now(&bus, &m, BUS_INLINE_MAX, &b), ==, 0);
		ASSERT(b.buf == bus.send_buf);
		bus_out_deinit(&b);
	}
	/* a room in front of another body (a send nested in the typed one's): not touched */
	{
		uint8_t room[MSG_HEADER_ROOM + 8] = { 0 }, zero[sizeof(room)] = { 0 };
		uint32_t v = 5;
		struct chmsg m = { .type = CHMSG_SIGNAL, .serial = 3, .path = "/", .interface = "org.test.I",
				   .member = "T", .signature = "u", .body = &v, .body_len = 4 };
		struct bus_out b;

		bus.send_room = room;
		ASSERT_INT(bus_out_encode_now(&bus, &m, BUS_INLINE_MAX, &b), ==, 0);
		ASSERT(b.buf == bus.send_buf);
		ASSERT(memcmp(room, zero, sizeof(room)) == 0);
		ASSERT(bus.send_room == NULL);
		bus_out_deinit(&b);
	}
	free(bus.send_buf);
}

int main(void)
{
	test_typed_h();
	test_arrays();
	test_body_memfd();
	test_body_read();
	test_inline_max();
	test_bytes_wire();
	test_typed_in_place();
	printf("test-msg-fds: ok\n");
	return 0;
}
