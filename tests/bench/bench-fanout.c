/* SPDX-License-Identifier: MIT */
/*
 * bench-fanout - bus-bench's signal fan-out table (fanout), and its floor:
 * the row shm-ring, the same emitter and subscribers on a shared-memory
 * broadcast ring instead of a bus.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "tests/bench/bus-bench.h"

/* ---- Signal fan-out -------------------------------------------------------------- */

struct sub_stats {
	uint64_t delivered;
	uint32_t nsamples;
	uint64_t lat_ns[SAMPLES];
};

struct fan_result {
	uint64_t t_start, t_end, sent, window_timeouts, retries;
	int error;
};

/* What the forked emitter and subscribers share with the parent. */
static struct {
	struct sub_stats *subs;
	struct fan_result *res;
	int ack[2];
	uint64_t signals;
	size_t size;
	bool unbatched;
	/* row shm-ring: the ring's control block, then its slots */
	unsigned char *ring;
	size_t ring_len, slot_len;
} fan;

/* The first 16 bytes of a signal: its sequence number and when it was sent. */
struct fan_head {
	uint64_t seq, sent_ns;
};

static void fan_received(struct sub_stats *st, const void *body, size_t size)
{
	struct fan_head h;

	if (size < sizeof(h))
		return;
	memcpy(&h, body, sizeof(h));
	if (st->nsamples < SAMPLES)
		st->lat_ns[st->nsamples++] = now_ns() - h.sent_ns;
	__atomic_add_fetch(&st->delivered, 1, __ATOMIC_RELEASE);
	if ((h.seq + 1) % WINDOW == 0 || h.seq + 1 == fan.signals)
		(void)!write(fan.ack[1], "a", 1);
}

static int on_brokerd_tick(brokerd_msg *m, void *userdata)
{
	const void *body;
	size_t size;

	if (brokerd_msg_get_body(m, &body, &size) >= 0)
		fan_received(userdata, body, size);
	return 0;
}

static int on_sdbus_tick(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const void *p;
	size_t n;

	if (sd_bus_message_read_array(m, 'y', &p, &n) >= 0)
		fan_received(userdata, p, n);
	return 0;
}

/* ---- The shared-memory ring floor (row shm-ring) ---------------------------------- */

/*
 * What a bus's fan-out is held against: one writer broadcasting into a
 * memfd mapped by every subscriber, each reading at its own position; no
 * broker, no system call per signal unless a reader sleeps. As many slots
 * as brokerd's channels, so the window keeps the writer from lapping a
 * reader; if it did (a window timed out) the reader's stamp check says
 * so and the signal counts as lost. A reader with nothing to read sleeps
 * on a futex on the published count, as every bus's subscriber sleeps;
 * the writer publishes a window's signals and then wakes the sleepers
 * with one system call, if one sleeps, as brokerd's emitter sends a
 * window in one batch: the floor is the cheapest this layout allows.
 */
#define RING_SLOTS 32

struct ring_ctl {
	uint32_t head;	   /* signals published: the futex word */
	uint32_t sleepers; /* readers about to sleep on head, or sleeping */
};

/* A slot: its stamp, then the signal's bytes inline. */
struct ring_slot {
	uint64_t stamp; /* signal number + 1 once written; 0 while being written */
	unsigned char data[];
};

#define RING_CTL_LEN 64 /* the control block on a cache line of its own */

static struct ring_ctl *ring_ctl(void)
{
	return (struct ring_ctl *)fan.ring;
}

static struct ring_slot *ring_slot(uint64_t n)
{
	return (struct ring_slot *)(fan.ring + RING_CTL_LEN + (n % RING_SLOTS) * fan.slot_len);
}

static long ring_futex(uint32_t *word, int op, uint32_t val)
{
	/* shared, not FUTEX_PRIVATE_FLAG: the word is in a mapping of several processes */
	return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* The ring for signals of fan.size bytes, mapped before the fork so every process shares it. */
static int ring_map(void)
{
	int fd = memfd_create("bus-bench-ring", MFD_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	fan.slot_len = (sizeof(struct ring_slot) + fan.size + 63) / 64 * 64;
	fan.ring_len = RING_CTL_LEN + RING_SLOTS * fan.slot_len;
	if (ftruncate(fd, (off_t)fan.ring_len) < 0)
		r = -errno;
	if (r == 0) {
		fan.ring = mmap(NULL, fan.ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (fan.ring == MAP_FAILED) {
			fan.ring = NULL;
			r = -errno;
		}
	}
	close(fd);
	return r;
}

/* Signal n into its slot (a seqlock: stamp 0, the bytes, the stamp), then the count; ring_wake() wakes. */
static void ring_publish(uint64_t n, const void *body)
{
	struct ring_slot *s = ring_slot(n);
	struct ring_ctl *c = ring_ctl();

	__atomic_store_n(&s->stamp, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(s->data, body, fan.size);
	__atomic_store_n(&s->stamp, n + 1, __ATOMIC_RELEASE);
	/* sequentially consistent with the reader's sleepers then head: one of the two sees the other */
	__atomic_store_n(&c->head, (uint32_t)(n + 1), __ATOMIC_SEQ_CST);
}

/* After a window's signals: every sleeping reader woken with one system call, none if none sleeps. */
static void ring_wake(void)
{
	struct ring_ctl *c = ring_ctl();

	if (__atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST))
		ring_futex(&c->head, FUTEX_WAKE, INT_MAX);
}

/* A subscriber of the ring: copies each signal out of its slot, as a bus's receiver gets its own copy, then handles it. */
static void ring_subscriber(struct sub_stats *st, int ready)
{
	struct ring_ctl *c = ring_ctl();
	unsigned char *buf = malloc(fan.size);
	uint64_t pos = 0;

	if (!buf)
		_exit(1);
	(void)!write(ready, "r", 1);
	for (;;) {
		uint32_t head = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);

		if (head == (uint32_t)pos) {
			__atomic_add_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
			/* the kernel compares head again: a signal published meanwhile is no lost wake-up */
			if (__atomic_load_n(&c->head, __ATOMIC_SEQ_CST) == head)
				ring_futex(&c->head, FUTEX_WAIT, head);
			__atomic_sub_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		for (; (uint32_t)pos != head; pos++) {
			struct ring_slot *s = ring_slot(pos);
			uint64_t stamp = __atomic_load_n(&s->stamp, __ATOMIC_ACQUIRE);

			memcpy(buf, s->data, fan.size);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			/* overwritten before or while it was copied: lost */
			if (stamp != pos + 1 || __atomic_load_n(&s->stamp, __ATOMIC_RELAXED) != stamp)
				continue;
			fan_received(st, buf, fan.size);
		}
	}
}

static void subscriber(enum bus_kind k, struct sub_stats *st, int ready)
{
	if (k == BUS_SHM_RING) {
		ring_subscriber(st, ready);
	} else if (k == BUS_BROKERD) {
		brokerd_bus *bus = NULL;

		if (brokerd_bus_open_system(&bus) < 0 ||
		    brokerd_bus_subscribe(bus, NULL, FAN_NAME, "Tick", on_brokerd_tick, st) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		brokerd_bus_run(bus);
	} else {
		sd_bus *b = NULL;

		if (sdbus_connect(k, &b) < 0 ||
		    sd_bus_add_match(b, NULL, "type='signal',interface='" FAN_IFACE "',member='Tick'",
				     on_sdbus_tick, st) < 0)
			_exit(1);
		(void)!write(ready, "r", 1);
		sdbus_loop(b);
	}
	_exit(1);
}

/*
 * Sends one signal (on the ring: into its slot); brokerd's -ENOBUFS (ring full, only on a kernel without
 * lossy channels, and never inside a batch: its end would say) is retried,
 * and counted.
 */
static int emit_one(enum bus_kind k, brokerd_bus *bbus, sd_bus *sbus, const void *body)
{
	if (k == BUS_SHM_RING) {
		ring_publish(fan.res->sent, body);
		return 0;
	} else if (k == BUS_BROKERD) {
		for (int tries = 0;; tries++) {
			int r = brokerd_bus_emit_signal(bbus, FAN_NAME, "Tick", body, fan.size);

			if (r != -ENOBUFS || tries > 2000)
				return r;
			fan.res->retries++;
			brokerd_bus_process(bbus);
			usleep(500);
		}
	} else {
		sd_bus_message *m = NULL;
		int r = sd_bus_message_new_signal(sbus, &m, OBJ_PATH, FAN_IFACE, "Tick");

		if (r >= 0)
			r = sd_bus_message_append_array(m, 'y', body, fan.size);
		if (r >= 0)
			r = sd_bus_send(sbus, m, NULL);
		sd_bus_message_unref(m);
		return r;
	}
}

static void emitter(enum bus_kind k, int nsubs, int ready, int go, int done)
{
	brokerd_bus *bbus = NULL;
	sd_bus *sbus = NULL;
	char *body = calloc(1, fan.size);
	int r = 0;

	if (k == BUS_BROKERD) {
		if (brokerd_bus_open_system(&bbus) < 0 ||
		    brokerd_bus_request_name(bbus, FAN_NAME, 0) != BROKERD_NAME_PRIMARY_OWNER)
			_exit(1);
	} else if (k != BUS_SHM_RING && sdbus_connect(k, &sbus) < 0) {
		_exit(1);
	}
	(void)!write(ready, "r", 1);
	if (!wait_byte(go, 60000))
		_exit(1);
	fan.res->t_start = now_ns();
	for (uint64_t i = 0; i < fan.signals; i++) {
		struct fan_head h = { .seq = i, .sent_ns = now_ns() };

		/* brokerd: a window's signals in one batch, one submit for all (row brokerd-unbatched: one each) */
		if (bbus && !fan.unbatched && i % WINDOW == 0 && (r = brokerd_bus_batch_begin(bbus)) < 0)
			break;
		memcpy(body, &h, sizeof(h));
		r = emit_one(k, bbus, sbus, body);
		if (r < 0)
			break;
		fan.res->sent++;
		if ((i + 1) % WINDOW == 0 || i + 1 == fan.signals) {
			if (sbus && (r = sd_bus_flush(sbus)) < 0)
				break;
			if (bbus && !fan.unbatched && (r = brokerd_bus_batch_end(bbus)) < 0)
				break;
			if (k == BUS_SHM_RING)
				ring_wake();
			r = 0;
			/* every subscriber's acknowledgement, as many as are there in one read */
			for (int got = 0; got < nsubs;) {
				struct pollfd p = { .fd = fan.ack[0], .events = POLLIN };
				char acks[256];
				ssize_t n;

				n = poll(&p, 1, ACK_MSEC) == 1 ?
					    read(fan.ack[0], acks,
						 (size_t)(nsubs - got) < sizeof(acks) ? (size_t)(nsubs - got) :
											sizeof(acks)) :
					    0;
				if (n <= 0) {
					fan.res->window_timeouts++;
					break;
				}
				got += (int)n;
			}
		}
	}
	fan.res->t_end = now_ns();
	fan.res->error = r < 0 ? -r : 0;
	(void)!write(done, "d", 1);
	pause();
	_exit(0);
}

void bench_fanout(enum bus_kind k, int nsubs, size_t size, uint64_t signals, bool unbatched)
{
	const char *label = unbatched ? "brokerd-unbatched" : bus_label[k];
	size_t shm_size = sizeof(struct fan_result) + (size_t)nsubs * sizeof(struct sub_stats);
	int ready[2], go[2], done[2], started = 0;
	pid_t *pids = calloc((size_t)nsubs + 2, sizeof(*pids));
	uint64_t cpu0 = 0, cpu1 = 0, delivered = 0, lost, *lat = NULL;
	uint64_t emitter_csw0 = 0, emitter_csw1 = 0, subs_csw0 = 0, subs_csw1 = 0;
	size_t nlat = 0;
	char status[160] = "ok";
	void *shm;

	if (broker_error[k][0]) {
		printf("@fanout,%s,%d,%zu,%" PRIu64 ",error: %s,,,,,,,,,\n", label, nsubs, size, signals,
		       broker_error[k]);
		free(pids);
		return;
	}
	/* a signal brokerd cannot carry at all: one send says so, as a row */
	shm = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		die("mmap", errno);
	fan.res = shm;
	fan.subs = (struct sub_stats *)(fan.res + 1);
	fan.signals = signals;
	fan.size = size;
	fan.unbatched = unbatched;
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0 ||
	    pipe2(fan.ack, O_CLOEXEC) < 0)
		die("pipe", errno);
	if (k == BUS_SHM_RING) {
		int r = ring_map();

		if (r < 0)
			die("the ring's memfd", -r);
	}

	/* the emitter first: on brokerd it owns the name the subscribers ask for */
	pids[nsubs] = fork();
	if (pids[nsubs] < 0)
		die("fork", errno);
	if (pids[nsubs] == 0)
		emitter(k, nsubs, ready[1], go[0], done[1]);
	if (!wait_byte(ready[0], 30000)) {
		snprintf(status, sizeof(status), "error: the emitter did not start");
		goto out;
	}
	for (started = 0; started < nsubs; started++) {
		pids[started] = fork();
		if (pids[started] < 0)
			die("fork", errno);
		if (pids[started] == 0)
			subscriber(k, &fan.subs[started], ready[1]);
		if (!wait_byte(ready[0], 30000)) {
			snprintf(status, sizeof(status), "error: subscriber %d did not start", started);
			started++;
			goto out;
		}
	}
	pids[nsubs + 1] = broker_pid[k];
	cpu0 = cpu_us_sum(pids, (size_t)nsubs + 2) + cpu_us(getpid());
	emitter_csw0 = csw_sum(pids + nsubs, 1);
	subs_csw0 = csw_sum(pids, (size_t)nsubs);
	(void)!write(go[1], "g", 1);
	if (!wait_byte(done[0], short_mode ? 60000 : 600000)) {
		snprintf(status, sizeof(status), "error: the emitter did not finish");
		goto out;
	}
	/*
	 * Signals still on their way when a window's acknowledgements timed out
	 * (a bus far behind under TCG): wait while they keep arriving, so that
	 * "lost" counts what never came, not what came late; give up after 3 s
	 * without progress.
	 */
	for (uint64_t last = 0, idle_ms = 0; idle_ms < 3000; idle_ms += 50) {
		delivered = 0;
		for (int s = 0; s < nsubs; s++)
			delivered += __atomic_load_n(&fan.subs[s].delivered, __ATOMIC_ACQUIRE);
		if (delivered >= fan.res->sent * (uint64_t)nsubs)
			break;
		if (delivered > last)
			idle_ms = 0;
		last = delivered;
		usleep(50000);
	}
	cpu1 = cpu_us_sum(pids, (size_t)nsubs + 2) + cpu_us(getpid());
	emitter_csw1 = csw_sum(pids + nsubs, 1);
	subs_csw1 = csw_sum(pids, (size_t)nsubs);
	if (fan.res->error == EMSGSIZE || fan.res->error == ENOBUFS || fan.res->error == E2BIG) {
		if (fan.res->sent == 0) {
			snprintf(status, sizeof(status), "n/a: %s", errno_label(fan.res->error));
			goto out;
		}
		snprintf(status, sizeof(status), "error: emit %" PRIu64 ": %s", fan.res->sent,
			 errno_label(fan.res->error));
		goto out;
	}
	if (fan.res->error) {
		snprintf(status, sizeof(status), "error: emit %" PRIu64 ": %s", fan.res->sent,
			 strerror(fan.res->error));
		goto out;
	}
	lat = malloc((size_t)nsubs * SAMPLES * sizeof(*lat));
	for (int s = 0; s < nsubs; s++) {
		memcpy(lat + nlat, fan.subs[s].lat_ns, fan.subs[s].nsamples * sizeof(*lat));
		nlat += fan.subs[s].nsamples;
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
out:
	if (strcmp(status, "ok") == 0) {
		double secs = (double)(fan.res->t_end - fan.res->t_start) / 1e9;

		lost = signals * (uint64_t)nsubs - delivered;
		printf("@fanout,%s,%d,%zu,%" PRIu64 ",ok,%" PRIu64 ",%" PRIu64 ",%.0f,%.1f,%.1f,%.2f,%" PRIu64
		       ",%.3f,%.3f\n",
		       label, nsubs, size, signals, delivered, lost, (double)delivered / secs,
		       pct_us(lat, nlat, 0.5), pct_us(lat, nlat, 0.99),
		       delivered ? (double)(cpu1 - cpu0) / (double)delivered : 0.0, fan.res->window_timeouts,
		       fan.res->sent ? (double)(emitter_csw1 - emitter_csw0) / (double)fan.res->sent : 0.0,
		       delivered ? (double)(subs_csw1 - subs_csw0) / (double)delivered : 0.0);
	} else {
		printf("@fanout,%s,%d,%zu,%" PRIu64 ",%s,,,,,,,,,\n", label, nsubs, size, signals,
		       status);
	}
	fflush(stdout);
	pids[nsubs + 1] = 0;
	kill_wait(pids, (size_t)nsubs + 1);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
	close(fan.ack[0]);
	close(fan.ack[1]);
	munmap(shm, shm_size);
	if (fan.ring) {
		munmap(fan.ring, fan.ring_len);
		fan.ring = NULL;
	}
	free(lat);
	free(pids);
}

/* Signals per fan-out run: fewer for more subscribers, so that the largest
 * runs stay within minutes under TCG; whole windows of WINDOW each. */
uint64_t fan_signals(int subs)
{
	if (short_mode)
		return 3 * WINDOW;
	if (subs >= 200)
		return 6 * WINDOW;
	if (subs >= 64)
		return 16 * WINDOW;
	if (subs >= 16)
		return 64 * WINDOW;
	return 128 * WINDOW;
}
