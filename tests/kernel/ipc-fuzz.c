/* SPDX-License-Identifier: MIT */
/*
 * ipc-fuzz.c - a bounded randomized fuzzer of the IPC channel register
 * operations and SQEs: random flags, sizes, ids, reserved words, bad and
 * read-only pointers, from several threads with rings of their own that
 * share the ids they learn, while rings are torn down under waiting and
 * multishot receives. Sends carry file descriptors now and then (pipe
 * ends, and the capability and region fds learned, which must be
 * refused), and receives install them. Every call may fail; only a kernel
 * splat counts, which tests/vm/vm-run reports from the console.
 *
 * usage: ipc-fuzz SECONDS [SEED]    (built against the kernel's uapi)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define POOL	64
#define BUF	8192

struct ring {
	int fd;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail;
	unsigned int sq_entries, tail;
	struct io_uring_sqe *sqes;
	void *map, *sqe_map;
	size_t map_size, sqe_size;
};

static atomic_uint ids[POOL]; /* channel and subscriber ids seen */
static atomic_int fds[POOL];  /* capability and region fds seen */
static time_t deadline;
static int pipe_fds[2]; /* what sends carry besides the fds learned */
static char *bad_ptr;
static __thread char *ro_page; /* made read-only around each use */

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int ring_init(struct ring *r, uint64_t *s)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	memset(r, 0, sizeof(*r));
	if (rnd(s) % 4 == 0)
		p.flags |= IORING_SETUP_SUBMIT_ALL;
	if (rnd(s) % 5 == 0)
		p.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	r->fd = syscall(__NR_io_uring_setup, 16, &p);
	if (r->fd < 0) {
		memset(&p, 0, sizeof(p));
		r->fd = syscall(__NR_io_uring_setup, 16, &p);
		if (r->fd < 0)
			return -1;
	}
	r->map_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.sq_off.array + p.sq_entries * 4 > r->map_size)
		r->map_size = p.sq_off.array + p.sq_entries * 4;
	r->map = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		      IORING_OFF_SQ_RING);
	r->sqe_size = p.sq_entries * sizeof(struct io_uring_sqe);
	r->sqe_map = mmap(NULL, r->sqe_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
			  IORING_OFF_SQES);
	if (r->map == MAP_FAILED || r->sqe_map == MAP_FAILED)
		return -1;
	r->sqes = r->sqe_map;
	r->sq_entries = p.sq_entries;
	r->sq_tail = r->map + p.sq_off.tail;
	r->sq_mask = r->map + p.sq_off.ring_mask;
	r->sq_array = r->map + p.sq_off.array;
	r->cq_head = r->map + p.cq_off.head;
	r->cq_tail = r->map + p.cq_off.tail;
	r->tail = *r->sq_tail;
	return 0;
}

static void ring_exit(struct ring *r)
{
	munmap(r->sqe_map, r->sqe_size);
	munmap(r->map, r->map_size);
	close(r->fd);
}

static uint32_t pick_id(uint64_t *s)
{
	switch (rnd(s) % 8) {
	case 0:
		return rnd(s);
	case 1:
		return 0;
	default:
		return atomic_load(&ids[rnd(s) % POOL]);
	}
}

static void learn_id(uint64_t *s, uint32_t id)
{
	if (id)
		atomic_store(&ids[rnd(s) % POOL], id);
}

static void learn_fd(uint64_t *s, int fd)
{
	int old = atomic_exchange(&fds[rnd(s) % POOL], fd);

	if (old > 2 && rnd(s) % 2)
		close(old);
}

/* A pointer for an argument: good, NULL, read-only, or unmapped */
static void *pick_ptr(uint64_t *s, void *good)
{
	switch (rnd(s) % 10) {
	case 0:
		return NULL;
	case 1:
		return ro_page;
	case 2:
		return bad_ptr;
	default:
		return good;
	}
}

static uint32_t pick_len(uint64_t *s)
{
	switch (rnd(s) % 6) {
	case 0:
		return rnd(s);
	case 1:
		return 0;
	default:
		return rnd(s) % 300;
	}
}

static void do_register(struct ring *r, uint64_t *s, char *buf)
{
	unsigned int op = IORING_REGISTER_IPC_CHANNEL_CREATE + rnd(s) % 6;
	unsigned int nr = rnd(s) % 16 ? 1 : rnd(s) % 3;
	union {
		struct io_uring_ipc_channel_create c;
		struct io_uring_ipc_channel_attach a;
		struct io_uring_ipc_channel_mint m;
		struct io_uring_ipc_channel_revoke v;
		char raw[64];
	} u;
	void *arg;
	int ret;

	memset(&u, 0, sizeof(u));
	switch (op) {
	case IORING_REGISTER_IPC_CHANNEL_CREATE:
		u.c.flags = rnd(s) % 3 ? rnd(s) % 16 : rnd(s);
		u.c.ring_entries = rnd(s) % 4 ? 1u << (rnd(s) % 7) : rnd(s);
		u.c.max_msg_size = rnd(s) % 4 ? 1 + rnd(s) % 256 : rnd(s);
		u.c.mode = rnd(s) % 4 ? 0666 : rnd(s);
		u.c.key = rnd(s) % 2 ? 0 : rnd(s) % 16;
		break;
	case IORING_REGISTER_IPC_CHANNEL_ATTACH:
		u.a.flags = rnd(s) % 3 ? rnd(s) % 16 : rnd(s);
		if (u.a.flags & IOIPC_SUB_BY_FD)
			u.a.channel_id = atomic_load(&fds[rnd(s) % POOL]);
		else
			u.a.channel_id = pick_id(s);
		u.a.key = rnd(s) % 3 ? 0 : rnd(s) % 16;
		break;
	case IORING_REGISTER_IPC_CHANNEL_DETACH:
	case IORING_REGISTER_IPC_CHANNEL_DESTROY:
		ret = syscall(__NR_io_uring_register, r->fd, op, rnd(s) % 8 ? NULL : buf, pick_id(s));
		return;
	case IORING_REGISTER_IPC_CHANNEL_MINT:
		u.m.channel_id = pick_id(s);
		u.m.rights = rnd(s) % 3 ? rnd(s) % 8 : rnd(s);
		u.m.badge = rnd(s) % 4;
		u.m.flags = rnd(s) % 4 ? 0 : rnd(s);
		break;
	default:
		u.v.channel_id = pick_id(s);
		u.v.rights = rnd(s) % 3 ? rnd(s) % 8 : rnd(s);
		u.v.badge = rnd(s) % 4;
		break;
	}
	if (rnd(s) % 12 == 0)
		u.raw[sizeof(u) - 1 - rnd(s) % 16] = rnd(s); /* reserved */
	arg = pick_ptr(s, &u);
	if (arg == ro_page) {
		/* copy_from_user works, copy_to_user fails */
		mprotect(ro_page, 4096, PROT_READ | PROT_WRITE);
		memcpy(ro_page, &u, sizeof(u));
		mprotect(ro_page, 4096, PROT_READ);
	}
	ret = syscall(__NR_io_uring_register, r->fd, op, arg, nr);
	if (ret < 0 || arg != &u)
		return;
	if (op == IORING_REGISTER_IPC_CHANNEL_CREATE) {
		learn_id(s, u.c.channel_id_out);
	} else if (op == IORING_REGISTER_IPC_CHANNEL_ATTACH) {
		learn_id(s, u.a.local_id_out);
		if (rnd(s) % 3 == 0 && u.a.region_size) {
			void *m = mmap(NULL, u.a.region_size, PROT_READ, MAP_SHARED, u.a.channel_fd, 0);

			if (m != MAP_FAILED) {
				(void)*(volatile char *)m;
				munmap(m, u.a.region_size);
			}
		}
		learn_fd(s, u.a.channel_fd);
	} else if (op == IORING_REGISTER_IPC_CHANNEL_MINT) {
		learn_fd(s, u.m.fd_out);
	}
}

static void do_sqes(struct ring *r, uint64_t *s, char *buf)
{
	unsigned int n = 1 + rnd(s) % 4, i;

	for (i = 0; i < n; i++) {
		unsigned int idx = r->tail & *r->sq_mask;
		struct io_uring_sqe *sqe = &r->sqes[idx];
		unsigned int k = rnd(s) % 10;

		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = k < 4 ? IORING_OP_IPC_SEND :
			      k < 9 ? IORING_OP_IPC_RECV :
				      IORING_OP_ASYNC_CANCEL;
		sqe->fd = pick_id(s);
		sqe->addr = (unsigned long)pick_ptr(s, buf);
		sqe->len = pick_len(s);
		if (sqe->opcode == IORING_OP_ASYNC_CANCEL) {
			sqe->fd = -1;
			sqe->cancel_flags = IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL;
		} else if (sqe->opcode == IORING_OP_IPC_SEND) {
			sqe->file_index = rnd(s) % 3 ? 0 : pick_id(s);
			if (rnd(s) % 8 == 0) {
				/* the array lives in this thread's buffer's tail */
				int *a = (int *)(buf + BUF) - 4, j;

				for (j = 0; j < 4; j++)
					a[j] = rnd(s) % 4 ? pipe_fds[rnd(s) % 2] :
							    atomic_load(&fds[rnd(s) % POOL]);
				sqe->ioprio = rnd(s) % 10 ? IOIPC_SEND_FDS : rnd(s);
				sqe->addr3 = (unsigned long)(rnd(s) % 10 ? (void *)a : pick_ptr(s, a));
				sqe->off = rnd(s) % 10 ? 1 + rnd(s) % 4 : rnd(s) % 300;
			}
		} else {
			sqe->ioprio = rnd(s) % 3 ? rnd(s) % 32 : rnd(s);
			if (rnd(s) % 8 == 0)
				sqe->ioprio |=
					rnd(s) % 2 ? IOIPC_RECV_FDS : IOIPC_RECV_FDS | IOIPC_RECV_FDS_CLOEXEC;
			if (sqe->ioprio & IOIPC_RECV_RELEASE)
				sqe->addr = rnd(s) % 64;
			if (rnd(s) % 4 == 0) {
				sqe->flags |= IOSQE_BUFFER_SELECT;
				sqe->buf_group = 1;
				sqe->addr = 0;
			}
		}
		if (rnd(s) % 6 == 0)
			sqe->flags |= IOSQE_ASYNC;
		if (rnd(s) % 20 == 0)
			sqe->rw_flags = rnd(s);
		if (rnd(s) % 20 == 0)
			sqe->off = rnd(s);
		sqe->user_data = rnd(s);
		r->sq_array[idx] = idx;
		r->tail++;
	}
	__atomic_store_n(r->sq_tail, r->tail, __ATOMIC_RELEASE);
	syscall(__NR_io_uring_enter, r->fd, n, rnd(s) % 4 ? 0 : 1, IORING_ENTER_GETEVENTS, NULL, 0);
	/* reap whatever is there */
	__atomic_store_n(r->cq_head, __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

/* A provided buffer ring, group 1, for multishot receives */
static void pbuf_setup(struct ring *r, char *buf)
{
	struct io_uring_buf_reg reg = { .ring_entries = 8, .bgid = 1 };
	struct io_uring_buf_ring *br;
	int i;

	br = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (br == MAP_FAILED)
		return;
	reg.ring_addr = (unsigned long)br;
	if (syscall(__NR_io_uring_register, r->fd, IORING_REGISTER_PBUF_RING, &reg, 1) < 0)
		return;
	for (i = 0; i < 8; i++) {
		br->bufs[i].addr = (unsigned long)buf + i * 512;
		br->bufs[i].len = 512;
		br->bufs[i].bid = i;
	}
	__atomic_store_n(&br->tail, 8, __ATOMIC_RELEASE);
}

static void *worker(void *arg)
{
	uint64_t s = (uintptr_t)arg;
	char *buf = malloc(BUF);
	struct ring r;
	long ops = 0;

	ro_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!buf || ro_page == MAP_FAILED || ring_init(&r, &s))
		return NULL;
	pbuf_setup(&r, buf);
	while (time(NULL) < deadline) {
		switch (rnd(&s) % 64) {
		case 0:
			/* tear the ring down under whatever waits on it */
			ring_exit(&r);
			if (ring_init(&r, &s))
				return NULL;
			pbuf_setup(&r, buf);
			break;
		case 1 ... 24:
			do_register(&r, &s, buf);
			break;
		case 25:
			/*
			 * The fds receives installed are not tracked: close
			 * the high ones before the table fills up, whatever
			 * they are (a stale fd only makes a call fail).
			 */
			if (rnd(&s) % 16 == 0)
				for (int fd = 512; fd < 1024; fd++)
					close(fd);
			break;
		default:
			do_sqes(&r, &s, buf);
			break;
		}
		ops++;
	}
	ring_exit(&r);
	printf("ipc-fuzz: thread %lx: %ld operations\n", (unsigned long)arg, ops);
	return NULL;
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 60;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
	pthread_t t[THREADS];
	int i;

	bad_ptr = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (bad_ptr == MAP_FAILED || pipe(pipe_fds))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ipc-fuzz: %d s, seed %#llx\n", secs, (unsigned long long)seed);
	deadline = time(NULL) + secs;
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(seed * 2654435761u + i + 1));
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
