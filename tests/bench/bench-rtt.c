/* SPDX-License-Identifier: MIT */
/*
 * bench-rtt - bus-bench's method call round trip table (rtt).
 */
#include "tests/bench/bus-bench.h"

/* ---- Method call round trip -------------------------------------------------------- */

static int on_brokerd_echo(brokerd_msg *m, void *userdata)
{
	const void *body;
	size_t size;
	int r = brokerd_msg_get_body(m, &body, &size);

	return r < 0 ? r : brokerd_msg_reply(m, body, size);
}

static int on_sdbus_echo(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	sd_bus_message *reply = NULL;
	const void *p;
	size_t n;
	int r;

	r = sd_bus_message_read_array(m, 'y', &p, &n);
	if (r >= 0)
		r = sd_bus_message_new_method_return(m, &reply);
	if (r >= 0)
		r = sd_bus_message_append_array(reply, 'y', p, n);
	if (r >= 0)
		r = sd_bus_send(NULL, reply, NULL);
	sd_bus_message_unref(reply);
	return r < 0 ? r : 1;
}

/* The echo server of bus k; says 'r' on ready once it serves. */
static void echo_server(enum bus_kind k, int ready, int fd_a, int fd_b, size_t size, uint64_t spin_usec)
{
	sd_bus *b = NULL;

	switch (k) {
	case BUS_BROKERD: {
		brokerd_bus *bus = NULL;

		if (brokerd_bus_open_system(&bus) < 0 ||
		    brokerd_bus_add_method(bus, NULL, ECHO_NAME, "Echo", on_brokerd_echo, NULL) < 0 ||
		    brokerd_bus_request_name(bus, ECHO_NAME, 0) != BROKERD_NAME_PRIMARY_OWNER ||
		    brokerd_bus_set_spin(bus, spin_usec) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		brokerd_bus_run(bus);
		_exit(0);
	}
	case BUS_BROKERD_DBUS:
	case BUS_DBUS_BROKER:
	case BUS_DBUS_DAEMON:
		if (sdbus_connect(k, &b) < 0 ||
		    sd_bus_add_object(b, NULL, OBJ_PATH, on_sdbus_echo, NULL) < 0 ||
		    sd_bus_request_name(b, ECHO_NAME, 0) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		sdbus_loop(b);
		break;
	case BUS_P2P:
		if (sdbus_p2p(fd_a, true, &b) < 0 ||
		    sd_bus_add_object(b, NULL, OBJ_PATH, on_sdbus_echo, NULL) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		sdbus_loop(b);
		break;
	case BUS_PIPE: {
		char *buf = malloc(size);

		(void)!write(ready, "r", 1);
		for (;;) {
			size_t got = 0;

			while (got < size) {
				ssize_t n = read(fd_a, buf + got, size - got);

				if (n <= 0)
					_exit(0);
				got += (size_t)n;
			}
			for (size_t put = 0; put < size;) {
				ssize_t n = write(fd_b, buf + put, size - put);

				if (n <= 0)
					_exit(0);
				put += (size_t)n;
			}
		}
	}
	default:
		break;
	}
	_exit(1);
}

/* One round trip on the client's side; 0 or -errno. */
struct rtt_client {
	enum bus_kind k;
	brokerd_bus *bbus;
	sd_bus *sbus;
	int fd_out, fd_in;
	char *buf;
	size_t size;
};

static int rtt_once(struct rtt_client *c)
{
	switch (c->k) {
	case BUS_BROKERD: {
		brokerd_msg *reply = NULL;
		const void *body;
		size_t n;
		int r = brokerd_bus_call(c->bbus, ECHO_NAME, "Echo", c->buf, c->size, CALL_USEC, &reply);

		if (r < 0)
			return r;
		r = brokerd_msg_get_body(reply, &body, &n);
		brokerd_msg_unref(reply);
		return r < 0 ? r : n == c->size ? 0 : -EBADMSG;
	}
	case BUS_PIPE: {
		for (size_t put = 0; put < c->size;) {
			ssize_t n = write(c->fd_out, c->buf + put, c->size - put);

			if (n <= 0)
				return -EPIPE;
			put += (size_t)n;
		}
		for (size_t got = 0; got < c->size;) {
			ssize_t n = read(c->fd_in, c->buf + got, c->size - got);

			if (n <= 0)
				return -EPIPE;
			got += (size_t)n;
		}
		return 0;
	}
	default: {
		sd_bus_message *m = NULL, *reply = NULL;
		sd_bus_error err = SD_BUS_ERROR_NULL;
		const void *p;
		size_t n = 0;
		int r;

		r = sd_bus_message_new_method_call(c->sbus, &m, c->k == BUS_P2P ? NULL : ECHO_NAME, OBJ_PATH,
						   "org.brokerd.bench.Echo", "Echo");
		if (r >= 0)
			r = sd_bus_message_append_array(m, 'y', c->buf, c->size);
		if (r >= 0)
			r = sd_bus_call(c->sbus, m, CALL_USEC, &err, &reply);
		if (r >= 0)
			r = sd_bus_message_read_array(reply, 'y', &p, &n);
		sd_bus_error_free(&err);
		sd_bus_message_unref(m);
		sd_bus_message_unref(reply);
		return r < 0 ? r : n == c->size ? 0 : -EBADMSG;
	}
	}
}

void bench_rtt(enum bus_kind k, size_t size, int calls, uint64_t spin_usec)
{
	const char *label = spin_usec ? "brokerd-spin" : bus_label[k];
	struct rtt_client c = { .k = k, .size = size, .fd_out = -1, .fd_in = -1 };
	int ready[2], a[2] = { -1, -1 }, b[2] = { -1, -1 }, r = 0, done = 0;
	pid_t pids[3] = { 0 };
	uint64_t *lat = calloc((size_t)calls, sizeof(*lat)), cpu0 = 0, cpu1 = 0;
	char status[160] = "ok";

	if (broker_error[k][0]) {
		printf("@rtt,%s,%zu,%d,error: %s,,,,,,,\n", label, size, calls, broker_error[k]);
		free(lat);
		return;
	}
	c.buf = malloc(size);
	memset(c.buf, 0x5a, size);
	if (pipe2(ready, O_CLOEXEC) < 0)
		die("pipe", errno);
	if (k == BUS_P2P && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) < 0)
		die("socketpair", errno);
	if (k == BUS_PIPE && (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0))
		die("pipe", errno);
	pids[0] = fork();
	if (pids[0] < 0)
		die("fork", errno);
	if (pids[0] == 0) {
		close(ready[0]);
		/* p2p: the server's end is a[0]; pipe: it reads a[0] and writes b[1] */
		echo_server(k, ready[1], a[0], b[1], size, spin_usec);
	}
	close(ready[1]);
	if (!wait_byte(ready[0], 20000)) {
		snprintf(status, sizeof(status), "error: the echo server did not start");
		goto out;
	}
	switch (k) {
	case BUS_BROKERD:
		r = brokerd_bus_open_system(&c.bbus);
		if (r >= 0)
			r = brokerd_bus_set_spin(c.bbus, spin_usec);
		break;
	case BUS_P2P:
		r = sdbus_p2p(a[1], false, &c.sbus);
		break;
	case BUS_PIPE:
		c.fd_out = a[1];
		c.fd_in = b[0];
		break;
	default:
		r = sdbus_connect(k, &c.sbus);
		break;
	}
	if (r < 0) {
		snprintf(status, sizeof(status), "error: connect: %s", strerror(-r));
		goto out;
	}
	/* one call outside the measurement: it opens brokerd's call channel */
	r = rtt_once(&c);
	if (r == -EMSGSIZE || r == -ENOBUFS || r == -E2BIG) {
		snprintf(status, sizeof(status), "n/a: %s", errno_label(-r));
		goto out;
	}
	/* libbrokerd refuses a body above CHMSG_MAX before the kernel sees it */
	if (k == BUS_BROKERD && r == -EINVAL && size > CHMSG_MAX) {
		snprintf(status, sizeof(status), "n/a: EINVAL above the library's %d bytes", CHMSG_MAX);
		goto out;
	}
	if (r < 0) {
		snprintf(status, sizeof(status), "error: first call: %s", strerror(-r));
		goto out;
	}
	pids[1] = getpid();
	pids[2] = broker_pid[k];
	cpu0 = cpu_us_sum(pids, 3);
	for (done = 0; done < calls; done++) {
		uint64_t t0 = now_ns();

		r = rtt_once(&c);
		if (r < 0) {
			snprintf(status, sizeof(status), "error: call %d: %s", done, strerror(-r));
			break;
		}
		lat[done] = now_ns() - t0;
	}
	cpu1 = cpu_us_sum(pids, 3);
out:
	if (strcmp(status, "ok") == 0) {
		qsort(lat, (size_t)done, sizeof(*lat), cmp_u64);
		printf("@rtt,%s,%zu,%d,ok,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", label, size, calls,
		       (double)lat[0] / 1000.0, pct_us(lat, (size_t)done, 0.5),
		       pct_us(lat, (size_t)done, 0.9), pct_us(lat, (size_t)done, 0.99),
		       pct_us(lat, (size_t)done, 0.999), (double)lat[done - 1] / 1000.0,
		       (double)(cpu1 - cpu0) / (double)done);
	} else {
		printf("@rtt,%s,%zu,%d,%s,,,,,,,\n", label, size, calls, status);
	}
	fflush(stdout);
	brokerd_bus_close(c.bbus);
	sd_bus_flush_close_unref(c.sbus);
	for (int i = 0; i < 2; i++) {
		if (a[i] >= 0)
			close(a[i]);
		if (b[i] >= 0)
			close(b[i]);
	}
	close(ready[0]);
	kill_wait(pids, 1);
	free(c.buf);
	free(lat);
}
