/* SPDX-License-Identifier: MIT */
/*
 * test-restart-io.c - the state of a restart hand-over (restart-io.c): a
 * state written and read back record by record, every way a stored state
 * can be refused (an fd that is not a sealed memfd, a state cut between
 * two records), the memfd sealed, owner queues, and a stored socket
 * found again only while its peer is the one recorded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokerd/registry.h"
#include "brokerd/restart-io.h"
#include "util/macro.h"
#include "util/test.h"

#define MAGIC "TESTSTAT"

struct thing {
	uint64_t a;
	char *s;
	int n_loaded;
};

static void save_thing(void *ctx, struct wbuf *w)
{
	const struct thing *t = ctx;

	for (int i = 0; i < 2; i++) {
		size_t at = wbuf_record_begin(w, 7);

		wbuf_put_u64(w, t->a + (uint64_t)i);
		wbuf_put_str(w, t->s);
		wbuf_record_end(w, at);
	}
}

static int load_thing(void *state, struct rbuf *r)
{
	struct thing *t = state;

	t->a = rbuf_get_u64(r);
	free(t->s);
	t->s = rbuf_get_str(r);
	t->n_loaded++;
	return r->bad ? -EBADMSG : 0;
}

/* Reads only half of each record: the rest must make the state malformed. */
static int load_half(void *state, struct rbuf *r)
{
	(void)state;
	(void)rbuf_get_u64(r);
	return 0;
}

static const struct restart_record types[] = { { 7, "thing", save_thing, load_thing } };
static const struct restart_record half[] = { { 7, "thing", save_thing, load_half } };

/* A memfd holding these bytes as a state. */
static int memfd_of(const void *p, size_t n)
{
	struct wbuf w = { 0 };
	int fd;

	wbuf_put(&w, p, n);
	ASSERT(!w.oom);
	fd = restart_memfd("test", &w);
	free(w.data);
	ASSERT(fd >= 0);
	return fd;
}

static void test_round_trip(void)
{
	struct thing in = { .a = 41, .s = (char *)"hello" }, out = { 0 };
	struct wbuf w = { 0 };
	int fd;

	restart_state_write(&w, MAGIC, 3, types, ELEMENTSOF(types), &in);
	ASSERT(!w.oom);
	fd = restart_memfd("test", &w);
	ASSERT(fd >= 0);
	/* sealed: nobody changes it between the two brokerds */
	ASSERT(write(fd, "x", 1) < 0 && errno == EPERM);
	ASSERT(ftruncate(fd, 0) < 0);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, 3, types, ELEMENTSOF(types), &out), ==, 0);
	ASSERT_INT(out.n_loaded, ==, 2);
	ASSERT_INT(out.a, ==, 42);
	ASSERT_STR(out.s, "hello");
	free(out.s);
	out = (struct thing){ 0 };

	/* another version, another magic: refused as a whole */
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, 4, types, ELEMENTSOF(types), &out), ==,
		   -EPROTO);
	ASSERT_INT(restart_state_parse(fd, "test state", "OTHERSTA", 3, types, ELEMENTSOF(types), &out), ==,
		   -EPROTO);
	/* a reader that does not know the type refuses it, one that reads half finds it malformed */
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, 3, NULL, 0, &out), ==, -EPROTO);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, 3, half, ELEMENTSOF(half), &out), ==,
		   -EBADMSG);
	close(fd);

	/* no clean mark */
	w.data[12] = 0;
	fd = memfd_of(w.data, w.len);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, 3, types, ELEMENTSOF(types), &out), ==,
		   -EPROTO);
	close(fd);
	w.data[12] = 1;
	/* cut short inside the last record */
	fd = memfd_of(w.data, w.len - 3);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, 3, types, ELEMENTSOF(types), &out), ==,
		   -EBADMSG);
	close(fd);
	free(out.s);
	free(w.data);
	printf("# a state read back; other versions, unknown and malformed records refused: ok\n");
}

/* Only a sealed memfd is a state; a cut between two records is not a smaller state. */
static void test_sealed_and_whole(void)
{
	struct thing in = { .a = 1, .s = (char *)"x" }, out = { 0 };
	struct wbuf w = { 0 };
	size_t first;
	int fd;

	restart_state_write(&w, MAGIC, RESTART_END_VERSION, types, ELEMENTSOF(types), &in);
	ASSERT(!w.oom);
	/* the same bytes in a memfd nobody sealed, and in a file */
	fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ASSERT(fd >= 0 && write(fd, w.data, w.len) == (ssize_t)w.len);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, RESTART_END_VERSION, types, ELEMENTSOF(types),
				       &out),
		   ==, -EPROTO);
	ASSERT_INT(out.n_loaded, ==, 0);
	/* sealed against writes only: it could still shrink under the mapping (SIGBUS) */
	ASSERT(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, RESTART_END_VERSION, types, ELEMENTSOF(types),
				       &out),
		   ==, -EPROTO);
	close(fd);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ASSERT_INT(restart_state_parse(fd, "test state", MAGIC, RESTART_END_VERSION, types, ELEMENTSOF(types),
				       &out),
		   ==, -EPROTO);
	close(fd);

	/* whole: two records and the end */
	ASSERT_INT(restart_state_parse_bytes(w.data, w.len, "test state", MAGIC, RESTART_END_VERSION, types,
					     ELEMENTSOF(types), &out),
		   ==, 0);
	ASSERT_INT(out.n_loaded, ==, 2);
	/* cut after the first record: each record whole, the end missing */
	first = 16 + 8 + 8 + 4 + 1;
	out.n_loaded = 0;
	ASSERT_INT(restart_state_parse_bytes(w.data, first, "test state", MAGIC, RESTART_END_VERSION, types,
					     ELEMENTSOF(types), &out),
		   ==, -EBADMSG);
	ASSERT_INT(out.n_loaded, ==, 1);
	/* the end record not last, or counting other records */
	w.data[w.len - 4]++;
	ASSERT_INT(restart_state_parse_bytes(w.data, w.len, "test state", MAGIC, RESTART_END_VERSION, types,
					     ELEMENTSOF(types), &out),
		   ==, -EBADMSG);
	w.data[w.len - 4]--;
	/* version 1, before the end record: its records alone are the state */
	w.data[8] = 1;
	out.n_loaded = 0;
	ASSERT_INT(restart_state_parse_bytes(w.data, w.len - 12, "test state", MAGIC, RESTART_END_VERSION,
					     types, ELEMENTSOF(types), &out),
		   ==, 0);
	ASSERT_INT(out.n_loaded, ==, 2);
	free(out.s);
	free(w.data);
	printf("# a state in an unsealed memfd or a file refused; cut between records, or not ending with "
	       "its end record, refused; version 1 read without one: ok\n");
}

static void test_strings(void)
{
	static const uint8_t nul[] = { 3, 0, 0, 0, 'a', 0, 'b' }, longer[] = { 9, 0, 0, 0, 'a', 'b' };
	struct rbuf r = { .p = nul, .left = sizeof(nul) };

	ASSERT(!rbuf_get_str(&r) && r.bad);
	r = (struct rbuf){ .p = longer, .left = sizeof(longer) };
	ASSERT(!rbuf_get_str(&r) && r.bad);
	/* past the end: zeros, and bad */
	ASSERT_INT(rbuf_get_u64(&r), ==, 0);
	printf("# strings with a NUL or longer than the record refused: ok\n");
}

static void on_owner(void *u, const char *name, struct registry_peer *o, struct registry_peer *n,
		     struct registry_peer *req)
{
}

static void on_entry(void *u, struct registry_peer *p, const char *name, int delta)
{
}

static const struct registry_ops ops = { .owner_changed = on_owner, .entry_changed = on_entry };

static void test_queue(void)
{
	struct registry *reg = NULL;
	struct registry_peer *a, *b;
	struct restart_owner *q = NULL;
	struct wbuf w = { 0 };
	struct rbuf r;
	size_t n = 0;

	ASSERT_INT(registry_new(&reg, &ops, NULL), ==, 0);
	ASSERT_INT(registry_peer_add(reg, 1000, &a), ==, 0);
	ASSERT_INT(registry_peer_add(reg, 1001, &b), ==, 0);
	ASSERT(registry_name_request(reg, a, "org.example.Q", 0) >= 0);
	ASSERT(registry_name_request(reg, b, "org.example.Q", 8) >= 0);
	b->kind = REGISTRY_PEER_DBUS; /* one queue, two protocols: each half restores its own */
	wbuf_put_queue(&w, reg, "org.example.Q", REGISTRY_PEER_NATIVE);
	r = (struct rbuf){ .p = w.data, .left = w.len };
	ASSERT_INT(rbuf_get_queue(&r, &q, &n), ==, 0);
	ASSERT_INT(n, ==, 2);
	ASSERT_INT(q[0].peer_id, ==, a->id);
	ASSERT(!q[0].other);
	ASSERT_INT(q[1].peer_id, ==, b->id);
	ASSERT(q[1].other);
	ASSERT_INT(q[1].flags, ==, registry_name_entry_flags(reg, b, "org.example.Q"));
	ASSERT_INT(r.left, ==, 0);
	free(q);
	/* a count larger than what follows */
	r = (struct rbuf){ .p = w.data, .left = 16 };
	ASSERT_INT(rbuf_get_queue(&r, &q, &n), ==, -EBADMSG);
	free(w.data);
	registry_free(reg);
	printf("# an owner queue in order with its flags and the other protocol's peers marked: ok\n");
}

static void test_socket(void)
{
	struct restart_socket s, other;
	struct ucred cred;
	socklen_t l = sizeof(cred);
	struct wbuf w = { 0 };
	struct rbuf r;
	int sp[2], fds[3], want;

	ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
	ASSERT(getsockopt(sp[0], SOL_SOCKET, SO_PEERCRED, &cred, &l) == 0);
	wbuf_put_socket(&w, sp[0], &cred);
	ASSERT(!w.oom);
	r = (struct rbuf){ .p = w.data, .left = w.len };
	rbuf_get_socket(&r, &s);
	ASSERT(!r.bad && r.left == 0);
	ASSERT_INT(s.cred.pid, ==, cred.pid);

	/* among others, found by inode, its slot emptied, made non-blocking */
	fds[0] = sp[1];
	fds[1] = want = dup(sp[0]);
	fds[2] = -1;
	ASSERT(want >= 0);
	ASSERT_INT(restart_socket_take(fds, 3, &s), ==, want);
	ASSERT(fds[1] == -1 && fds[0] == sp[1]);
	ASSERT(fcntl(want, F_GETFL) & O_NONBLOCK);
	close(want);
	/* not there (any more) */
	ASSERT_INT(restart_socket_take(fds, 3, &s), ==, -ENOENT);
	/* there, but its peer is not the process recorded: closed, refused */
	other = s;
	other.cred.pid++;
	fds[1] = dup(sp[0]);
	ASSERT_INT(restart_socket_take(fds, 3, &other), ==, -EPERM);
	ASSERT(fds[1] == -1);
	/* an fd that is gone cannot be recorded: the whole state fails */
	wbuf_put_socket(&w, -1, &cred);
	ASSERT(w.oom);
	free(w.data);
	close(sp[0]);
	close(sp[1]);
	printf("# a stored socket found again only with the peer recorded: ok\n");
}

int main(void)
{
	test_round_trip();
	test_sealed_and_whole();
	test_strings();
	test_queue();
	test_socket();
	return 0;
}
