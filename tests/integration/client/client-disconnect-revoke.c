/* SPDX-License-Identifier: MIT */
/*
 * client-disconnect-revoke - a connection ends while its process lives on,
 * still holding its io_uring ring, a subscription and a mapping of the
 * channel's region: brokerd must take everything back (protocol/README.md,
 * Revocation; the kernel's io_uring_ipc.rst, "Revoking capabilities").
 *
 * A child subscribes to the signals of two names through caps of its own
 * (attached on its bus's ring, the regions mapped and read):
 * org.brokerd.test.Gone, which a service owns and the test subscribes to
 * as well, and org.brokerd.test.Gone.Alone, which nobody else uses (its
 * channels go with the child's connection: destroying a channel does not
 * detach its subscribers, brokerd must revoke first). It parks a receive on
 * each and on its inbox, and closes its control socket. Then, with nothing
 * sent meanwhile: the parked receives complete with -EACCES (the kernel's
 * revocation), both mappings raise SIGBUS, a new mmap and a new attach
 * through the caps fail (-EACCES; -ENOENT once the channel is gone), and a
 * new receive on the old subscriber ids fails (-ENOENT): nothing more can
 * reach it. The test's own subscription, as root, keeps receiving the
 * signals emitted after that.
 */
#include <setjmp.h>
#include <sys/mman.h>

#include "tests/integration/client/testlib.h"

#define NAME	    "org.brokerd.test.Gone"
#define ALONE	    NAME ".Alone"
#define TAG_PARKED  0x5eed0000ULL /* + the subscription's index */
#define TAG_REARMED 0x5eed0010ULL
#define RECV_SIZE   (sizeof(struct ioipc_msg_info) + 8192)

static const struct t_method methods[] = { { "Tick", t_on_tick }, { NULL, NULL } };

static int to_child[2], from_child[2];
static sigjmp_buf bus_error;

static void on_sigbus(int sig)
{
	siglongjmp(bus_error, 1);
}

/* Whether reading the page at p faults (SIGBUS: the mapping was zapped). */
static bool read_faults(const volatile uint8_t *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	volatile bool faulted = false;
	uint8_t v;

	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(bus_error, 1) == 0) {
		v = *p;
		(void)v;
	} else {
		faulted = true;
	}
	sigaction(SIGBUS, &old, NULL);
	return faulted;
}

/* Submits a waiting receive on sub_id tagged tag. */
static void park(struct io_uring *ring, uint32_t sub_id, void *buf, uint64_t tag)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	CHECK(sqe);
	ioipc_prep_recv(sqe, sub_id, buf, RECV_SIZE, IOIPC_RECV_WAIT | IOIPC_RECV_INFO);
	io_uring_sqe_set_data64(sqe, tag);
	CHECK(io_uring_submit(ring) >= 0);
}

/*
 * Waits up to timeout_ms for the completion tagged tag (its result in
 * *res); others that come meanwhile are kept in results[] (tags
 * TAG_PARKED + i) or, the inbox's, in *inbox_res.
 */
static bool completion(struct io_uring *ring, uint64_t tag, int *res, int *results, uint64_t inbox_tag,
		       int *inbox_res, int timeout_ms)
{
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000;

	while (now_usec() < end) {
		struct __kernel_timespec ts = { .tv_nsec = 50000000 };
		struct io_uring_cqe *cqe;
		uint64_t ud;
		int r;

		if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) < 0)
			continue;
		ud = cqe->user_data;
		r = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		if (ud == tag) {
			*res = r;
			return true;
		}
		if (ud == inbox_tag)
			*inbox_res = r;
		else if (ud >= TAG_PARKED && ud < TAG_PARKED + 2)
			results[ud - TAG_PARKED] = r;
		else
			t_log("other completion %llx: %d", (unsigned long long)ud, r);
	}
	return false;
}

/* A subscription the child attached itself, with its region mapped. */
struct sub {
	const char *name;
	int cap;
	struct ioipc_channel_attach a;
	uint8_t *map;
	uint8_t *buf;
	int res; /* of the receive parked before the disconnect; 1: none yet */
};

static void subscribe(brokerd_bus *bus, struct sub *s)
{
	struct ctrl_reply r;

	CHECK_R(bus_ctrl_request(bus, CTRL_OP_SUBSCRIBE, s->name, 0, &r), 0);
	s->cap = ctrl_reply_take_fd(&r, 0);
	ctrl_reply_done(&r);
	CHECK(s->cap >= 0);
	s->a = (struct ioipc_channel_attach){
		.channel_id = (uint32_t)s->cap,
		.flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV,
		.channel_fd = -1,
	};
	CHECK_R(ioipc_channel_attach(&bus->ring.uring, &s->a), 0);
	CHECK(s->a.channel_fd >= 0 && s->a.region_size > 0);
	s->map = mmap(NULL, s->a.region_size, PROT_READ, MAP_SHARED, s->a.channel_fd,
		      (off_t)s->a.mmap_offset_out);
	CHECK(s->map != MAP_FAILED);
	CHECK(!read_faults(s->map));
	CHECK_R(((struct ioipc_region_hdr *)s->map)->ring_entries, 32); /* brokerd's CHANNEL_SLOTS */
	s->buf = malloc(RECV_SIZE);
	CHECK(s->buf);
	s->res = 1;
}

/* After the disconnect: the subscription is gone for good. */
static void check_revoked(struct io_uring *ring, struct sub *s, int *results, uint64_t inbox_tag,
			  int *inbox_res)
{
	struct ioipc_channel_attach again = {
		.channel_id = (uint32_t)s->cap,
		.flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV,
		.channel_fd = -1,
	};
	int k, res;

	t_log("%s: the parked receive ended with %d (%s)", s->name, s->res, strerror(-s->res));
	CHECK_R(s->res, -EACCES);
	if (!read_faults(s->map))
		FAIL("%s: the channel's region is still readable after the disconnect", s->name);
	CHECK(mmap(NULL, s->a.region_size, PROT_READ, MAP_SHARED, s->a.channel_fd,
		   (off_t)s->a.mmap_offset_out) == MAP_FAILED);
	t_log("%s: a new mmap: %m", s->name);
	k = ioipc_channel_attach(ring, &again);
	t_log("%s: attaching again through the cap: %d (%s)", s->name, k, strerror(-k));
	/* the cap lost its rights; or the channel is gone, when nobody else used it */
	CHECK(k == -EACCES || k == -ENOENT);
	park(ring, s->a.local_id_out, s->buf, TAG_REARMED);
	if (!completion(ring, TAG_REARMED, &res, results, inbox_tag, inbox_res, 5000))
		FAIL("%s: a new receive on the old subscriber id did not complete", s->name);
	t_log("%s: a new receive on the old subscriber: %d (%s)", s->name, res, strerror(-res));
	CHECK_R(res, -ENOENT);
}

static int child(void *arg)
{
	brokerd_bus *bus = t_open();
	struct io_uring *ring = &bus->ring.uring;
	uint64_t inbox_tag = (uintptr_t)bus->inbox; /* chan.c: the chan | TAG_RECV (0) */
	struct sub subs[2] = { { .name = NAME }, { .name = ALONE } };
	int results[2] = { 1, 1 }, inbox_res = 1, res;
	uint64_t t0;

	for (int i = 0; i < 2; i++) {
		subscribe(bus, &subs[i]);
		park(ring, subs[i].a.local_id_out, subs[i].buf, TAG_PARKED + (uint64_t)i);
	}
	/* the library armed its inbox's receive when it attached it */
	CHECK(bus->inbox && bus->inbox->armed);

	/* the connection ends; the process, its ring and mappings stay */
	t0 = now_usec();
	CHECK_R(close(bus->ctrl_fd), 0);
	bus->ctrl_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (results[i] == 1 && !completion(ring, TAG_PARKED + (uint64_t)i, &results[i], results,
						   inbox_tag, &inbox_res, 10000))
			FAIL("%s: the parked receive did not end within 10 s of the disconnect",
			     subs[i].name);
		subs[i].res = results[i];
	}
	t_log("the parked receives ended within %llu ms", (unsigned long long)(now_usec() - t0) / 1000);
	if (inbox_res == 1)
		(void)completion(ring, inbox_tag, &inbox_res, results, 0, &res, 10000);
	t_log("the parked inbox receive ended with %d (%s)", inbox_res, strerror(-inbox_res));
	CHECK_R(inbox_res, -EACCES);
	for (int i = 0; i < 2; i++)
		check_revoked(ring, &subs[i], results, inbox_tag, &inbox_res);

	t_say(from_child[1], "revoked");
	t_expect(to_child[0], "ticked", 20000);
	/* what was emitted meanwhile did not reach the old subscriber */
	park(ring, subs[0].a.local_id_out, subs[0].buf, TAG_REARMED);
	CHECK(completion(ring, TAG_REARMED, &res, results, inbox_tag, &inbox_res, 5000));
	CHECK_R(res, -ENOENT);
	t_say(from_child[1], "done");
	return 0;
}

int main(void)
{
	struct t_hearing t = { 0 };
	brokerd_bus *bus = t_open();
	pid_t srv, pid;

	srv = t_service_start(NAME, methods);
	CHECK_R(brokerd_bus_subscribe(bus, NULL, NAME, "Tick", t_on_heard, &t), 0);
	t_pipe(to_child);
	t_pipe(from_child);
	pid = t_fork(child, NULL);
	t_expect(from_child[0], "revoked", 30000);
	t_tick(bus, NAME, "after");
	CHECK(t_heard(bus, &t, "after", 5000));
	t_say(to_child[1], "ticked");
	t_expect(from_child[0], "done", 20000);
	CHECK_R(t_wait(pid, 20000), 0);
	t_tick(bus, NAME, "still");
	CHECK(t_heard(bus, &t, "still", 5000));
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
