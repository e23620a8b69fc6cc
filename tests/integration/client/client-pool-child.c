/* SPDX-License-Identifier: MIT */
/*
 * client-pool-child - a pool worker that passes its call RECV cap to a
 * child process (fork): which calls fail when the child or the worker
 * ends (protocol/README.md, Worker pools, "A RECV cap passed on").
 *
 * org.brokerd.test.PoolChild has two receivers: a library worker that
 * answers at once, and a worker connection W that does not receive itself
 * but forks a child that receives through W's cap (its own ring, W's
 * badge; the kernel's receipts name the child's pid). The caller calls
 * until the child holds one call (timeout 3 s); the library worker answers
 * the others.
 *
 * - The child is killed while W lives: brokerd sees no connection end and
 *   sends nothing, but the caller watches the process its receipt named
 *   (a pidfd): the call the child held fails at once, NoReply "receiver
 *   ended" well before its timeout, and no other call fails.
 * - W forks a second child, which takes a call; then W is killed while
 *   that child lives: brokerd revokes W's badge, so the child's receive
 *   ends with an error (it can take no more calls, nor answer through W's
 *   caps), CallReceiverEnded names W's pid, which took nothing: no call
 *   fails at once, the child's call fails at its timeout, and every call
 *   after W's end is answered by the library worker.
 */
#include <poll.h>
#include <sys/syscall.h>

#include "client/bus-control.h"
#include "client/chan.h"
#include "tests/integration/client/testpool.h"

#define NAME	      "org.brokerd.test.PoolChild"
#define CHILD_TIMEOUT 3000000ULL /* the calls the child may take */
#define AT_ONCE	      1000000ULL /* "at once": well below CHILD_TIMEOUT, with room for TCG */

static int ready[2], took[2], wcmd[2], ccmd[2];

/* The library worker: answers at once. */
static int on_work(brokerd_msg *m, void *u)
{
	return brokerd_msg_reply(m, "lib", 3);
}

static int lib_worker(void *arg)
{
	return t_pool_worker(NAME, "Work", on_work, arg, ready[1], 0);
}

/* Waits for c's receive to complete: its result. */
static int child_wait(struct ring *r, int timeout_ms)
{
	struct pollfd p = { .fd = r->efd, .events = POLLIN };
	uint64_t end = now_usec() + (uint64_t)timeout_ms * 1000;
	struct chan *c;

	for (;;) {
		ring_ack(r);
		CHECK(ring_reap(r) >= 0);
		c = ring_pop_ready(r);
		if (c)
			return c->res;
		if (now_usec() > end)
			FAIL("child %d: no receive completed within %d ms", (int)getpid(), timeout_ms);
		(void)poll(&p, 1, 100);
	}
}

/*
 * The child: W's connection, ring and socket are not its (it closes every
 * fd but the cap and its pipes); it attaches W's cap with its own ring,
 * takes one call and holds it; told "again", it receives once more and
 * says how that ended.
 */
static void child(int cap)
{
	char line[32];
	struct ring r;
	struct chan *c;
	int res;

	for (int fd = 3; fd < 1024; fd++)
		if (fd != cap && fd != took[1] && fd != ccmd[0])
			close(fd);
	CHECK_R(ring_init(&r, 16), 0);
	CHECK_R(chan_attach(&r, cap, IOIPC_SUB_RECV, 65536, 0, NULL, &c), 0);
	CHECK_R(chan_arm(&r, c), 0);
	res = child_wait(&r, 30000);
	CHECK(res >= 0);
	t_say(took[1], "child %d", (int)getpid());
	CHECK_R(t_hear(ccmd[0], line, sizeof(line), 60000), 0);
	CHECK_R(chan_arm(&r, c), 0);
	res = child_wait(&r, 10000);
	t_say(took[1], "again %d", res);
	for (;;)
		pause();
}

/* W: a connection in the pool that does not receive; forks a child with its cap when told. */
static int cap_worker(void *arg)
{
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	brokerd_bus *bus = t_open();
	char line[32];
	int cap;

	CHECK(bus_ctrl_request(bus, CTRL_OP_REQUEST_NAME, NAME, CTRL_NAME_POOL, &r) >= 0);
	CHECK(r.n_fds >= 1);
	cap = ctrl_reply_take_fd(&r, 0); /* the call RECV cap */
	CHECK(cap >= 0);
	t_say(ready[1], "ready");
	for (;;) {
		if (t_hear(wcmd[0], line, sizeof(line), 100) == 0 && strcmp(line, "fork") == 0) {
			pid_t pid = fork();

			CHECK(pid >= 0);
			if (pid == 0)
				child(cap);
			t_say(took[1], "forked %d", (int)pid);
		}
		(void)brokerd_bus_process(bus);
	}
}

/*
 * Calls until the child takes one (the library worker answers the others):
 * that call's outcome into held, the child's pid returned.
 */
static pid_t call_until_child(brokerd_bus *bus, struct t_outcome *held)
{
	for (int i = 0; i < 20; i++) {
		struct t_outcome o = { 0 };
		uint64_t end = now_usec() + 5000000;
		char line[64];
		int pid;

		*held = o;
		CHECK_R(brokerd_bus_call_async(bus, NULL, NAME, "Work", "x", 1, CHILD_TIMEOUT, t_on_outcome,
					       held),
			0);
		while (!held->done) {
			if (t_hear(took[0], line, sizeof(line), 10) == 0) {
				CHECK(sscanf(line, "child %d", &pid) == 1);
				return (pid_t)pid;
			}
			(void)brokerd_bus_process(bus);
			if (now_usec() > end)
				FAIL("call %d: neither answered nor taken by the child within 5 s", i);
		}
		CHECK_R(held->error, 0);
		CHECK(strcmp(held->body, "lib") == 0);
	}
	FAIL("the child took none of 20 calls");
}

/* n calls, each answered by the library worker. */
static void calls_served(brokerd_bus *bus, int n)
{
	for (int i = 0; i < n; i++) {
		brokerd_msg *reply = NULL;
		const void *body;
		size_t size;

		CHECK_R(brokerd_bus_call(bus, NAME, "Work", "x", 1, 5000000, &reply), 0);
		CHECK_R(brokerd_msg_get_body(reply, &body, &size), 0);
		CHECK(size == 3 && memcmp(body, "lib", 3) == 0);
		brokerd_msg_unref(reply);
	}
}

/* held is not failed at once (quiet_ms, others served meanwhile), then fails at its timeout. */
static void fails_at_timeout(brokerd_bus *bus, struct t_outcome *held, uint64_t sent, const char *what)
{
	t_pool_quiet(bus, 500, held, 1);
	calls_served(bus, 5);
	t_pool_quiet(bus, 300, held, 1);
	if (!t_pump(bus, &held->done, (int)(CHILD_TIMEOUT / 1000) + 5000))
		FAIL("%s: still pending after its timeout", what);
	t_log("%s: %d %llu ms after it was sent (timeout %llu ms)", what, held->error,
	      (unsigned long long)(held->at - sent) / 1000, CHILD_TIMEOUT / 1000);
	CHECK_R(held->error, -ETIMEDOUT);
	CHECK(held->at - sent >= CHILD_TIMEOUT - 100000);
}

int main(void)
{
	brokerd_bus *bus = t_open();
	struct t_outcome held;
	pid_t lib, w, c1, c2;
	char line[64];
	uint64_t sent, killed;
	int res;

	t_pipe(ready);
	t_pipe(took);
	t_pipe(wcmd);
	t_pipe(ccmd);
	lib = t_fork(lib_worker, NULL);
	t_expect(ready[0], "ready", 10000);
	w = t_fork(cap_worker, NULL);
	t_expect(ready[0], "ready", 10000);

	/* 1. the child ends, its connection lives */
	t_say(wcmd[1], "fork");
	CHECK_R(t_hear(took[0], line, sizeof(line), 10000), 0);
	CHECK(sscanf(line, "forked %d", &res) == 1);
	c1 = call_until_child(bus, &held);
	CHECK(c1 == res);
	t_log("child %d of worker %d holds a call", (int)c1, (int)w);
	killed = now_usec();
	t_kill(c1);
	t_expect_receiver_ended(bus, &held, killed, AT_ONCE, "the call the killed child held");
	calls_served(bus, 5);

	/* 2. the connection ends, the child lives */
	t_say(wcmd[1], "fork");
	CHECK_R(t_hear(took[0], line, sizeof(line), 10000), 0);
	CHECK(sscanf(line, "forked %d", &res) == 1);
	c2 = res;
	sent = now_usec();
	CHECK_R(call_until_child(bus, &held), c2);
	t_log("child %d of worker %d holds a call; worker %d killed", (int)c2, (int)w, (int)w);
	t_kill(w);
	t_say(ccmd[1], "again");
	CHECK_R(t_hear(took[0], line, sizeof(line), 10000), 0);
	CHECK(sscanf(line, "again %d", &res) == 1);
	t_log("the child's receive after its worker's end: %d", res);
	CHECK(res < 0);
	fails_at_timeout(bus, &held, sent, "the call the child of the killed worker held");
	calls_served(bus, 5);

	t_kill(c2);
	t_kill(lib);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
