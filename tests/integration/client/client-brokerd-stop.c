/* SPDX-License-Identifier: MIT */
/*
 * client-brokerd-stop - `systemctl stop brokerd` takes every channel
 * capability back at once (brokerd/README.md, "Restart": the keeper's
 * watch), not when the ring's keeper gives up a minute later; after
 * `systemctl start brokerd` the clients reconnect.
 *
 * A stopping brokerd hands its ring to a keeper process in case a next
 * brokerd comes; on a stop none does, systemd drops the fd store, and with
 * it the keeper's watch socket: the keeper must revoke every grant then.
 * A child subscribes to org.brokerd.test.Stop's signals through a cap of
 * its own and parks a receive on that subscription (the library parked
 * one on its inbox), then never touches its control socket again, so that
 * only the kernel can end those receives: both must complete with -EACCES
 * within STOP_BOUND_MS of `systemctl stop` returning. Then brokerd is
 * started again; this process's bus reconnects (state handler:
 * DISCONNECTED, CONNECTED) and the service, which reconnected too and
 * owns its name again, answers a call.
 */
#include "tests/integration/client/testlib.h"

#define NAME	      "org.brokerd.test.Stop"
#define TAG_SUB	      0x5709000ULL
#define RECV_SIZE     (sizeof(struct ioipc_msg_info) + 8192)
#define STOP_BOUND_MS 3000
#define WAIT_MS	      30000 /* the keeper gives up after 60 s: the old behaviour fails here */

static const struct t_method methods[] = { { "Ping", t_on_ping }, { NULL, NULL } };

static int to_parent[2];
static bool started;

static void restart_brokerd(void)
{
	if (!started)
		(void)system("systemctl start brokerd.service");
}

static int child(void *arg)
{
	brokerd_bus *bus = t_open();
	struct io_uring *ring = &bus->ring.uring;
	uint64_t inbox_tag = (uintptr_t)bus->inbox; /* chan.c: the chan | TAG_RECV (0) */
	struct ioipc_channel_attach a;
	struct ctrl_reply r;
	struct io_uring_sqe *sqe;
	int cap, sub_res = 1, inbox_res = 1;
	uint64_t sub_at = 0, inbox_at = 0, end;
	void *buf = malloc(RECV_SIZE);

	CHECK(buf);
	CHECK_R(bus_ctrl_request(bus, CTRL_OP_SUBSCRIBE, NAME, 0, &r), 0);
	cap = ctrl_reply_take_fd(&r, 0);
	ctrl_reply_done(&r);
	CHECK(cap >= 0);
	a = (struct ioipc_channel_attach){
		.channel_id = (uint32_t)cap,
		.flags = IOIPC_SUB_BY_FD | IOIPC_SUB_RECV,
		.channel_fd = -1,
	};
	CHECK_R(ioipc_channel_attach(ring, &a), 0);
	sqe = io_uring_get_sqe(ring);
	CHECK(sqe);
	ioipc_prep_recv(sqe, a.local_id_out, buf, RECV_SIZE, IOIPC_RECV_WAIT | IOIPC_RECV_INFO);
	io_uring_sqe_set_data64(sqe, TAG_SUB);
	CHECK(io_uring_submit(ring) >= 0);
	CHECK(bus->inbox && bus->inbox->armed);
	t_say(to_parent[1], "parked");

	/* from here on only the kernel can end them: the bus is never dispatched */
	end = now_usec() + (uint64_t)WAIT_MS * 1000;
	while ((sub_res == 1 || inbox_res == 1) && now_usec() < end) {
		struct __kernel_timespec ts = { .tv_nsec = 20000000 };
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) < 0)
			continue;
		if (cqe->user_data == TAG_SUB) {
			sub_res = cqe->res;
			sub_at = now_usec();
		} else if (cqe->user_data == inbox_tag) {
			inbox_res = cqe->res;
			inbox_at = now_usec();
		}
		io_uring_cqe_seen(ring, cqe);
	}
	/* CLOCK_MONOTONIC is the same clock in both processes */
	t_say(to_parent[1], "%d %llu %d %llu", sub_res, (unsigned long long)sub_at, inbox_res,
	      (unsigned long long)inbox_at);
	return 0;
}

static int states;
static volatile bool connected;

static void on_state(brokerd_bus *bus, int state, void *u)
{
	states = states * 10 + state + 1; /* 1 disconnected, 2 connected: 12 */
	if (state == BROKERD_STATE_CONNECTED)
		connected = true;
}

int main(void)
{
	brokerd_bus *bus = t_open();
	brokerd_msg *reply;
	char line[128];
	int sub_res, inbox_res;
	unsigned long long sub_at, inbox_at;
	uint64_t stopped;
	pid_t srv, pid;

	t_atexit(restart_brokerd);
	CHECK_R(brokerd_bus_set_state_handler(bus, on_state, NULL), 0);
	srv = t_service_start(NAME, methods);
	brokerd_msg_unref(t_call_retry(bus, NAME, "Ping", "", 5000));
	t_pipe(to_parent);
	pid = t_fork(child, NULL);
	t_expect(to_parent[0], "parked", 10000);

	CHECK_R(system("systemctl stop brokerd.service"), 0);
	stopped = now_usec();
	t_log("brokerd stopped");
	if (t_hear(to_parent[0], line, sizeof(line), WAIT_MS + 5000) < 0)
		FAIL("the child did not report");
	CHECK_R(sscanf(line, "%d %llu %d %llu", &sub_res, &sub_at, &inbox_res, &inbox_at), 4);
	if (sub_res == 1 || inbox_res == 1)
		FAIL("after %d s a parked receive still waits (subscription %d, inbox %d): "
		     "the stopped bus's capabilities still work",
		     WAIT_MS / 1000, sub_res, inbox_res);
	t_log("subscription's receive: %d (%s) %lld ms after the stop returned", sub_res, strerror(-sub_res),
	      ((long long)sub_at - (long long)stopped) / 1000);
	t_log("inbox's receive: %d (%s) %lld ms after the stop returned", inbox_res, strerror(-inbox_res),
	      ((long long)inbox_at - (long long)stopped) / 1000);
	CHECK_R(sub_res, -EACCES);
	CHECK_R(inbox_res, -EACCES);
	CHECK((long long)sub_at - (long long)stopped < STOP_BOUND_MS * 1000LL);
	CHECK((long long)inbox_at - (long long)stopped < STOP_BOUND_MS * 1000LL);
	CHECK_R(t_wait(pid, 10000), 0);

	CHECK_R(system("systemctl start brokerd.service"), 0);
	started = true;
	t_log("brokerd started again");
	if (!t_pump(bus, &connected, 20000))
		FAIL("the bus did not reconnect within 20 s of the start (states %d)", states);
	reply = t_call_retry(bus, NAME, "Ping", "", 20000);
	brokerd_msg_unref(reply);
	t_log("state changes: %d", states);
	CHECK_R(states, 12);
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
