/* SPDX-License-Identifier: MIT */
/*
 * client-container - clients in containers with private user and pid
 * namespaces (brokerd/README.md, "Containers"; issue 15, item 9). Two
 * containers, made here as the container managers make them: a new user
 * namespace whose uid and gid maps the test writes from outside (A: 0..65535
 * inside are 100000.. outside; B: 200000..), then a new pid namespace whose
 * first process (pid 1) connects to the bus and starts the client proper
 * (pid 2), which runs as root inside.
 *
 * A's client: sees itself as pid 2, uid 0, gid 0, its container's init as
 * pid 1, uid 0, the test's own connection (root outside, not in its pid
 * namespace) as uid and gid 65534 without a pid, and B's client as 65534
 * without a pid (another pid namespace at the same depth); LIST_PEERS
 * agrees. The test sees it as uid 100000 with its pid outside. Policy holds
 * it by its real uid: it owns the name its uid may own, is refused another,
 * calls a service outside (the kernel stamps the call as uid 100000 for the
 * service, and the reply as uid 65534 without a pid for the container).
 * B's client (uid 200000, granted nothing): refused the name and the call,
 * no channel id or key it tries attaches, and the call capability A's
 * client passed it after disconnecting is stale: attaching through it
 * fails. (systemd-nspawn is not in the image; what it sets up for these
 * namespaces is what this test does.)
 */
#include <sched.h>
#include <sys/socket.h>

#include "tests/integration/client/testlib.h"
#include "util/socket.h"

#define NAME_OK	     "org.brokerd.test.Ctr"
#define NAME_DENIED  "org.brokerd.test.CtrDenied"
#define NAME_SERVICE "org.brokerd.test.CtrHost"
#define BASE_A	     100000
#define BASE_B	     200000
#define POLICY	     "[user 100000]\nallow own " NAME_OK "\nallow send " NAME_SERVICE "\n"

static const struct t_method methods[] = { { "Who", t_on_who }, { NULL, NULL } };

/* test -> client and back, per container; the socket carries a cap from A to B */
static int to_a[2], from_a[2], to_b[2], from_b[2], caps[2];

struct container {
	uid_t base;
	int (*client)(const char *init_name);
	int sync[2]; /* the container's first process waits here for its maps */
	int init_pipe[2];
};

static void creds_of(brokerd_bus *bus, const char *name, struct brokerd_creds *c)
{
	int k = brokerd_bus_get_creds(bus, name, c);

	if (k < 0)
		FAIL("credentials of %s: %s", name, strerror(-k));
	t_log("%s sees %s as pid %d uid %u gid %u", getpid() == 2 ? "container" : "host", name, (int)c->pid,
	      (unsigned)c->uid, (unsigned)c->gid);
}

/* pid 1 of the container: connects (so others can look at it), runs the client as pid 2. */
static int container_init(void *arg)
{
	struct container *ct = arg;
	const char *me = "";
	brokerd_bus *bus;
	pid_t client;
	int r;

	CHECK_R(getpid(), 1);
	client = fork();
	if (client < 0)
		FAIL("fork: %m");
	if (client == 0) {
		char name[64];

		close(ct->init_pipe[1]);
		CHECK_R(t_hear(ct->init_pipe[0], name, sizeof(name), 10000), 0);
		_exit(ct->client(name));
	}
	bus = t_open();
	brokerd_bus_get_unique_name(bus, &me);
	t_say(ct->init_pipe[1], "%s", me);
	r = t_wait(client, 40000);
	brokerd_bus_close(bus);
	return r;
}

/* The user namespace's first process: waits to be mapped, becomes root there, makes the pid namespace. */
static int container_run(void *arg)
{
	struct container *ct = arg;
	char line[16];

	if (unshare(CLONE_NEWUSER) < 0)
		FAIL("unshare(CLONE_NEWUSER): %m");
	t_say(ct->sync[1], "unshared");
	CHECK_R(t_hear(ct->sync[0], line, sizeof(line), 10000), 0);
	if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
		FAIL("cannot become root in the user namespace: %m");
	if (unshare(CLONE_NEWPID) < 0)
		FAIL("unshare(CLONE_NEWPID): %m");
	return t_wait(t_fork(container_init, ct), 50000);
}

static void write_map(pid_t pid, const char *which, uid_t base)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	f = fopen(path, "we");
	if (!f || fprintf(f, "0 %u 65536\n", (unsigned)base) < 0 || fclose(f) != 0)
		FAIL("cannot write %s: %m", path);
}

/* Starts a container as a container manager would; returns the pid of its first process. */
static pid_t container_start(struct container *ct)
{
	int up[2], down[2];
	char line[16];
	pid_t pid;

	t_pipe(up);
	t_pipe(down);
	t_pipe(ct->init_pipe);
	ct->sync[0] = down[0];
	ct->sync[1] = up[1];
	pid = t_fork(container_run, ct);
	CHECK_R(t_hear(up[0], line, sizeof(line), 10000), 0);
	write_map(pid, "uid_map", ct->base);
	write_map(pid, "gid_map", ct->base);
	t_say(down[1], "mapped");
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	return pid;
}

static int recv_fd(int sock)
{
	char c;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u = { 0 };
	struct iovec iov = { &c, 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)
	};
	struct cmsghdr *cm;
	int fd = -1;

	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
		FAIL("recvmsg: %m");
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		FAIL("no fd came");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* LIST_PEERS gives name's pid and uid as GET_CREDENTIALS does. */
static void check_listed(brokerd_bus *bus, const char *name, pid_t pid, uid_t uid)
{
	struct ctrl_writer w;
	struct ctrl_reply r;
	struct ctrl_reader rd;
	uint32_t n = 0, p_pid, p_uid, p_gid, n_names, n_caps;
	const char *unique, *label, *owned;
	uint64_t id;
	bool found = false;

	CHECK_R(ctrl_writer_init(&w, CTRL_TYPE_REQUEST, CTRL_OP_LIST_PEERS, 0), 0);
	ctrl_write_u32(&w, 0);
	CHECK_R(bus_ctrl_call(bus, &w, &r), 0);
	ctrl_writer_deinit(&w);
	ctrl_reader_init(&rd, &r.msg);
	CHECK_R(ctrl_read_array(&rd, &n), 0);
	for (uint32_t i = 0; i < n; i++) {
		CHECK_R(ctrl_read_string(&rd, &unique, NULL), 0);
		CHECK_R(ctrl_read_u64(&rd, &id), 0);
		CHECK_R(ctrl_read_u32(&rd, &p_pid), 0);
		CHECK_R(ctrl_read_u32(&rd, &p_uid), 0);
		CHECK_R(ctrl_read_u32(&rd, &p_gid), 0);
		CHECK_R(ctrl_read_string(&rd, &label, NULL), 0);
		CHECK_R(ctrl_read_array(&rd, &n_names), 0);
		for (uint32_t k = 0; k < n_names; k++)
			CHECK_R(ctrl_read_string(&rd, &owned, NULL), 0);
		CHECK_R(ctrl_read_u32(&rd, &n_caps), 0);
		if (strcmp(unique, name) != 0)
			continue;
		t_log("LIST_PEERS in the container: %s pid %u uid %u gid %u", unique, p_pid, p_uid, p_gid);
		CHECK(p_pid == (uint32_t)pid && p_uid == uid && p_gid == uid);
		found = true;
	}
	ctrl_reply_done(&r);
	if (!found)
		FAIL("%s is not in LIST_PEERS", name);
}

static int client_a(const char *init_name)
{
	struct brokerd_creds c;
	struct ctrl_reply r;
	brokerd_msg *reply = NULL;
	char host_name[64], b_name[64], want[64];
	const char *me = "";
	const void *body;
	size_t size;
	brokerd_bus *bus;
	int cap;

	CHECK_R(getpid(), 2);
	CHECK(getuid() == 0 && getgid() == 0);
	bus = t_open();
	brokerd_bus_get_unique_name(bus, &me);
	CHECK_R(t_hear(to_a[0], host_name, sizeof(host_name), 10000), 0);

	creds_of(bus, me, &c);
	CHECK(c.pid == 2 && c.uid == 0 && c.gid == 0);
	creds_of(bus, init_name, &c);
	CHECK(c.pid == 1 && c.uid == 0 && c.gid == 0);
	creds_of(bus, host_name, &c);
	CHECK(c.pid == 0 && c.uid == 65534 && c.gid == 65534);
	check_listed(bus, me, 2, 0);
	check_listed(bus, init_name, 1, 0);
	check_listed(bus, host_name, 0, 65534);

	/* policy by the real uid, 100000 */
	CHECK_R(brokerd_bus_request_name(bus, NAME_OK, 0), BROKERD_NAME_PRIMARY_OWNER);
	CHECK_R(brokerd_bus_request_name(bus, NAME_DENIED, 0), -EACCES);
	CHECK_R(brokerd_bus_call(bus, NAME_SERVICE, "Who", NULL, 0, 10000000, &reply), 0);
	CHECK_R(brokerd_msg_get_body(reply, &body, &size), 0);
	snprintf(want, sizeof(want), "uid %u pid ", BASE_A);
	t_log("the service outside says the caller is %.*s", (int)size, (const char *)body);
	CHECK(size > strlen(want) && memcmp(body, want, strlen(want)) == 0);
	/* and the kernel stamps the reply of root outside as nobody, without a pid */
	CHECK_R(brokerd_msg_get_creds(reply, &c), 0);
	t_log("the reply's sender: pid %d uid %u gid %u", (int)c.pid, (unsigned)c.uid, (unsigned)c.gid);
	CHECK(c.pid == 0 && c.uid == 65534 && c.gid == 65534);
	brokerd_msg_unref(reply);

	t_say(from_a[1], "%s", me);
	CHECK_R(t_hear(to_a[0], b_name, sizeof(b_name), 10000), 0);
	creds_of(bus, b_name, &c); /* B's uids are not mapped here, nor its pids */
	CHECK(c.pid == 0 && c.uid == 65534 && c.gid == 65534);

	/* a call capability of its own, passed to B, then the connection ends */
	CHECK_R(bus_ctrl_request(bus, CTRL_OP_OPEN_CALL, NAME_SERVICE, 0, &r), 0);
	cap = ctrl_reply_take_fd(&r, 0);
	ctrl_reply_done(&r);
	CHECK(cap >= 0);
	CHECK_R(unix_send_fds(caps[0], "c", 1, &cap, 1, 0), 0);
	close(cap);
	brokerd_bus_close(bus);
	t_say(from_a[1], "closed");
	return 0;
}

static int client_b(const char *init_name)
{
	struct brokerd_creds c;
	brokerd_bus *bus;
	brokerd_msg *reply = NULL;
	const char *me = "";
	char line[16];
	int cap, k, tried = 0;

	(void)init_name;
	CHECK_R(getpid(), 2);
	bus = t_open();
	brokerd_bus_get_unique_name(bus, &me);
	creds_of(bus, me, &c);
	CHECK(c.pid == 2 && c.uid == 0 && c.gid == 0);
	CHECK_R(brokerd_bus_request_name(bus, NAME_OK, 0), -EACCES);
	k = brokerd_bus_call(bus, NAME_SERVICE, "Who", NULL, 0, 10000000, &reply);
	if (k != -EACCES)
		FAIL("B's call: %d (%s), want -EACCES", k, strerror(-k));

	/* guessing: no channel id and no key attaches without a capability */
	for (uint32_t id = 1; id <= 1024; id++) {
		for (unsigned int fl = IOIPC_SUB_SEND; fl <= IOIPC_SUB_BOTH; fl++) {
			struct ioipc_channel_attach a = { .channel_id = id, .flags = fl, .channel_fd = -1 };

			k = ioipc_channel_attach(&bus->ring.uring, &a);
			if (k >= 0)
				FAIL("B attached channel id %u (flags %u) without a capability", id, fl);
			tried++;
		}
	}
	for (uint64_t key = 1; key <= 64; key++) {
		struct ioipc_channel_attach a = { .key = key * 0x9e3779b97f4a7c15ULL,
						  .flags = IOIPC_SUB_BOTH,
						  .channel_fd = -1 };

		if (ioipc_channel_attach(&bus->ring.uring, &a) >= 0)
			FAIL("B attached a channel by a guessed key");
		tried++;
	}
	t_log("B: %d guessed attaches, all refused", tried);
	t_say(from_b[1], "%s", me);

	/* A's cap, after A's connection ended: stale */
	CHECK_R(t_hear(to_b[0], line, sizeof(line), 20000), 0);
	cap = recv_fd(caps[1]);
	{
		struct ioipc_channel_attach a = { .channel_id = (uint32_t)cap,
						  .flags = IOIPC_SUB_BY_FD | IOIPC_SUB_SEND,
						  .channel_fd = -1 };

		k = ioipc_channel_attach(&bus->ring.uring, &a);
		t_log("B: attaching through A's stale cap: %d (%s)", k, strerror(-k));
		CHECK(k == -EACCES || k == -ENOENT);
	}
	close(cap);
	brokerd_bus_close(bus);
	return 0;
}

/* The host's view of a container's client: its uid outside, its pid outside (pid 2 inside). */
static void check_from_host(brokerd_bus *bus, const char *name, uid_t uid)
{
	struct brokerd_creds c;
	char path[64], buf[4096], *l;
	FILE *f;
	size_t n;

	creds_of(bus, name, &c);
	CHECK(c.uid == uid && c.gid == uid && c.pid > 2);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)c.pid);
	f = fopen(path, "re");
	CHECK(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	l = strstr(buf, "NSpid:");
	CHECK(l);
	snprintf(path, sizeof(path), "NSpid:\t%d\t2\n", (int)c.pid);
	if (strncmp(l, path, strlen(path)) != 0)
		FAIL("the pid brokerd reports is not the container's pid 2: %.40s", l);
}

int main(void)
{
	struct container a = { .base = BASE_A, .client = client_a },
			 b = { .base = BASE_B, .client = client_b };
	brokerd_bus *bus;
	const char *me = "";
	char a_name[64], b_name[64];
	struct brokerd_creds c;
	pid_t pa, pb;

	t_policy(POLICY);
	t_service_start(NAME_SERVICE, methods);
	bus = t_open();
	brokerd_bus_get_unique_name(bus, &me);
	t_pipe(to_a);
	t_pipe(from_a);
	t_pipe(to_b);
	t_pipe(from_b);
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, caps) < 0)
		FAIL("socketpair: %m");

	pa = container_start(&a);
	pb = container_start(&b);
	t_say(to_a[1], "%s", me);
	CHECK_R(t_hear(from_a[0], a_name, sizeof(a_name), 20000), 0);
	check_from_host(bus, a_name, BASE_A);
	CHECK_R(t_hear(from_b[0], b_name, sizeof(b_name), 30000), 0);
	check_from_host(bus, b_name, BASE_B);
	t_say(to_a[1], "%s", b_name);
	t_expect(from_a[0], "closed", 20000);

	/* A's connection is gone: its name at once, its caps' rights a batch later */
	for (int i = 0; i < 100 && brokerd_bus_get_creds(bus, a_name, &c) == 0; i++)
		usleep(20000);
	usleep(300000);
	t_say(to_b[1], "go");
	CHECK_R(t_wait(pa, 30000), 0);
	CHECK_R(t_wait(pb, 30000), 0);
	brokerd_bus_close(bus);
	printf("ok: container clients see translated credentials and are held to policy\n");
	return 0;
}
