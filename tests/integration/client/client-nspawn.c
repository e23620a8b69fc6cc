/* SPDX-License-Identifier: MIT */
/*
 * client-nspawn - a client inside a real systemd-nspawn container (issue
 * 15, item 9; brokerd/README.md, "Containers"): its own pid namespace and
 * a user namespace (--private-users=300000:65536, root inside is 300000
 * outside), brokerd's socket directory bind-mounted, the root built here
 * from the guest's own /usr (a read-only bind mount), so nothing is
 * downloaded. client-container builds the same namespaces by hand; this
 * test lets the container manager do it.
 *
 * Inside (this program run with --inside by nspawn, as pid 2 under
 * nspawn's stub init, --as-pid2): brokerd's answers are translated into
 * the container's namespaces: GET_CREDENTIALS says it is pid 2, uid 0, gid
 * 0, and the test's own connection outside (root, not in its pid
 * namespace) uid and gid 65534 without a pid. Policy holds it by its real
 * uid, 300000: it owns the name that uid may own and is refused another,
 * it may call the test's service outside (which the kernel tells uid
 * 300000 called), and it is refused a call it was not granted; no channel
 * id or key it guesses attaches without a capability.
 * Outside: the test sees the container's client as uid 300000 with its
 * pid in the test's namespace, and nspawn's exit status is the client's.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/integration/client/testlib.h"

#define NAME_OK	     "org.brokerd.test.Nspawn"
#define NAME_DENIED  "org.brokerd.test.NspawnDenied"
#define NAME_SERVICE "org.brokerd.test.NspawnHost"
#define NAME_CLOSED  "org.brokerd.test.NspawnClosed"
#define BASE	     300000
#define ROOT	     "/var/tmp/client-nspawn"
#define SYNC	     "/var/tmp/client-nspawn-sync"
#define SELF	     "/usr/libexec/brokerd-tests/client-nspawn"
#define POLICY "[user 300000]\nallow own " NAME_OK "\nallow send " NAME_SERVICE "\n"

static const struct t_method methods[] = { { "Who", t_on_who }, { NULL, NULL } };

static void creds_of(brokerd_bus *bus, const char *name, struct brokerd_creds *c)
{
	int k = brokerd_bus_get_creds(bus, name, c);

	if (k < 0)
		FAIL("credentials of %s: %s", name, strerror(-k));
	t_log("%s sees %s as pid %d uid %u gid %u", getpid() == 2 ? "container" : "host", name, (int)c->pid,
	      (unsigned)c->uid, (unsigned)c->gid);
}

/* --- inside the container ------------------------------------------------ */

static int inside(const char *host_name)
{
	struct brokerd_creds c;
	brokerd_msg *reply = NULL;
	brokerd_bus *bus;
	const char *me = "";
	const void *body;
	size_t size;
	char want[64];
	int k, tried = 0;

	t_log("inside: pid %d uid %u gid %u", (int)getpid(), (unsigned)getuid(), (unsigned)getgid());
	CHECK_R(getpid(), 2);
	CHECK(getuid() == 0 && getgid() == 0);
	bus = t_open();
	brokerd_bus_get_unique_name(bus, &me);

	creds_of(bus, me, &c);
	CHECK(c.pid == 2 && c.uid == 0 && c.gid == 0);
	creds_of(bus, host_name, &c);
	CHECK(c.pid == 0 && c.uid == 65534 && c.gid == 65534);

	/* policy by the real uid, 300000 */
	CHECK_R(brokerd_bus_request_name(bus, NAME_OK, 0), BROKERD_NAME_PRIMARY_OWNER);
	CHECK_R(brokerd_bus_request_name(bus, NAME_DENIED, 0), -EACCES);
	CHECK_R(brokerd_bus_call(bus, NAME_SERVICE, "Who", NULL, 0, 10000000, &reply), 0);
	CHECK_R(brokerd_msg_get_body(reply, &body, &size), 0);
	t_log("the service outside says the caller is %.*s", (int)size, (const char *)body);
	snprintf(want, sizeof(want), "uid %u pid ", BASE);
	CHECK(size > strlen(want) && memcmp(body, want, strlen(want)) == 0);
	CHECK_R(brokerd_msg_get_creds(reply, &c), 0);
	t_log("the reply's sender, as the kernel stamped it: pid %d uid %u", (int)c.pid, (unsigned)c.uid);
	CHECK(c.pid == 0 && c.uid == 65534);
	brokerd_msg_unref(reply);
	k = brokerd_bus_call(bus, NAME_CLOSED, "Who", NULL, 0, 10000000, &reply);
	t_log("a call it was not granted: %d (%s)", k, strerror(-k));
	CHECK_R(k, -EACCES);

	/* no channel id or key attaches without a capability */
	for (uint32_t id = 1; id <= 1024; id++)
		for (unsigned int fl = IOIPC_SUB_SEND; fl <= IOIPC_SUB_BOTH; fl++) {
			struct ioipc_channel_attach a = { .channel_id = id, .flags = fl, .channel_fd = -1 };

			if (ioipc_channel_attach(&bus->ring.uring, &a) >= 0)
				FAIL("attached channel id %u (flags %u) without a capability", id, fl);
			tried++;
		}
	for (uint64_t key = 1; key <= 64; key++) {
		struct ioipc_channel_attach a = { .key = key * 0x9e3779b97f4a7c15ULL,
						  .flags = IOIPC_SUB_BOTH,
						  .channel_fd = -1 };

		if (ioipc_channel_attach(&bus->ring.uring, &a) >= 0)
			FAIL("attached a channel by a guessed key");
		tried++;
	}
	t_log("inside: %d guessed attaches, all refused", tried);

	/* the test looks at us from outside, then lets us go */
	printf("# inside: ready %s\n", me);
	fflush(stdout);
	for (uint64_t end = now_usec() + 30000000; access("/sync/checked", F_OK) < 0;) {
		if (now_usec() > end)
			FAIL("inside: the test did not look within 30 s");
		usleep(20000);
	}
	brokerd_bus_close(bus);
	printf("# inside: ok\n");
	return 0;
}

/* --- outside ---------------------------------------------------------------- */

static void cleanup(void)
{
	(void)!system("rm -rf " ROOT " " SYNC);
}

static void mkroot(void)
{
	static const char *const dirs[] = { "usr", "etc", "run", "proc", "sys", "dev", "tmp", "var", "sync", "root" };
	static const char *const links[][2] = {
		{ "usr/bin", "bin" }, { "usr/sbin", "sbin" }, { "usr/lib", "lib" }, { "usr/lib64", "lib64" }
	};
	FILE *f;

	cleanup();
	CHECK_R(mkdir(ROOT, 0755), 0);
	CHECK_R(mkdir(SYNC, 0755), 0);
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		char p[256];

		snprintf(p, sizeof(p), ROOT "/%s", dirs[i]);
		CHECK_R(mkdir(p, 0755), 0);
	}
	for (size_t i = 0; i < ELEMENTSOF(links); i++) {
		char p[256];

		snprintf(p, sizeof(p), ROOT "/%s", links[i][1]);
		CHECK_R(symlink(links[i][0], p), 0);
	}
	f = fopen(ROOT "/etc/passwd", "we");
	CHECK(f);
	fputs("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", f);
	fclose(f);
	f = fopen(ROOT "/etc/group", "we");
	CHECK(f);
	fputs("root:x:0:\nnogroup:x:65534:\n", f);
	fclose(f);
	CHECK_R(system("cp /usr/lib/os-release " ROOT "/etc/os-release"), 0);
	/* the tree belongs to the container's root, as nspawn's own chown would make it */
	CHECK_R(system("chown -R " "300000:300000" " " ROOT), 0);
}

int main(int argc, char **argv)
{
	struct brokerd_creds c;
	brokerd_bus *bus;
	const char *host_name = "";
	char owner[64], out[4096] = "";
	pid_t srv, pid = 0, nspawn;
	int status, p[2];
	size_t n = 0;

	if (argc == 3 && strcmp(argv[1], "--inside") == 0)
		return inside(argv[2]);

	if (system("command -v systemd-nspawn >/dev/null") != 0)
		SKIP("no systemd-nspawn");
	t_atexit(cleanup);
	mkroot();
	t_policy(POLICY);
	bus = t_open();
	brokerd_bus_get_unique_name(bus, &host_name);
	srv = t_service_start(NAME_SERVICE, methods);
	/* a name the container may not call: owned here, by root */
	CHECK_R(brokerd_bus_request_name(bus, NAME_CLOSED, 0), BROKERD_NAME_PRIMARY_OWNER);

	CHECK_R(pipe2(p, O_CLOEXEC), 0);
	nspawn = fork();
	CHECK(nspawn >= 0);
	if (nspawn == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execlp("systemd-nspawn", "systemd-nspawn", "--quiet", "--register=no", "--keep-unit",
		       "--directory=" ROOT, "--private-users=300000:65536", "--private-users-ownership=off",
		       "--as-pid2", "--bind-ro=/usr", "--bind=/run/brokerd", "--bind=" SYNC ":/sync",
		       "--setenv=BROKERD_TESTS_REQUIRE=1", "--", SELF, "--inside", host_name, (char *)NULL);
		_exit(127);
	}
	close(p[1]);

	/* the container's client, seen from outside: once it says it is ready */
	for (uint64_t end = now_usec() + 60000000; !strstr(out, "inside: ready ");) {
		char line[512];

		if (t_hear(p[0], line, sizeof(line), (int)((end - now_usec()) / 1000) + 1) < 0 ||
		    now_usec() > end) {
			printf("%s", out);
			FAIL("the container's client did not get ready within 60 s");
		}
		printf("# nspawn: %s\n", line);
		fflush(stdout);
		n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\n", line);
		if (n >= sizeof(out))
			n = 0;
		if (strstr(line, "FAIL"))
			break;
	}
	if (strstr(out, "inside: ready ")) {
		CHECK_R(brokerd_bus_get_name_owner(bus, NAME_OK, owner, sizeof(owner)), 0);
		creds_of(bus, owner, &c);
		CHECK_R(c.uid, BASE);
		CHECK(c.gid == BASE);
		CHECK(c.pid > 2);
		pid = c.pid;
		t_log("the container's client is pid %d outside", (int)pid);
		CHECK_R(system("touch " SYNC "/checked"), 0);
	}
	for (;;) {
		char line[512];

		if (t_hear(p[0], line, sizeof(line), 30000) < 0)
			break;
		printf("# nspawn: %s\n", line);
	}
	CHECK_R(waitpid(nspawn, &status, 0), nspawn);
	t_log("systemd-nspawn exited with %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(pid > 0);
	t_kill(srv);
	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
