/* SPDX-License-Identifier: MIT */
/*
 * test-brokerd.c - host test of libbrokerd's control plane and of brokerctl
 * against the real brokerd, run with --no-channels (the host kernel has no
 * IPC channels). Covers: names with D-Bus semantics (primary, queue,
 * DO_NOT_QUEUE, promotion), NameOwnerChanged watches, owner and credential
 * lookups (groups and pidfd as the kernel gave them to brokerd), policy
 * refusals, brokerctl's commands, --json and exit codes, listings fetched
 * page by page (and in one piece from a brokerd that predates paging), and
 * reconnecting after brokerd is killed and started again.
 *
 *   test-brokerd BROKERD BROKERCTL
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <brokerd/brokerd.h>

#include "client/test-fixture.h"
#include "protocol/ctrl.h"
#include "util/socket.h"
#include "util/test.h"

static char dir[] = "/tmp/test-brokerd-XXXXXX";
static char sock[256], policy[256];
static const char *brokerd_path, *brokerctl_path;
static pid_t daemon_pid;

static void daemon_start(void)
{
	struct stat st;

	unlink(sock);
	daemon_pid = fork();
	ASSERT(daemon_pid >= 0);
	if (daemon_pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 2);
		execl(brokerd_path, brokerd_path, "--address", sock, "--no-channels", "--policy-dir", policy,
		      "--service-dir", dir, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && stat(sock, &st) < 0; i++)
		usleep(10000);
	ASSERT(stat(sock, &st) == 0);
}

static void daemon_stop(void)
{
	int status;

	kill(daemon_pid, SIGKILL);
	waitpid(daemon_pid, &status, 0);
}

/* Runs brokerctl ARGS; returns its exit code, output in out. */
static int ctl(char *out, size_t size, const char *args)
{
	char cmd[1024];
	FILE *p;
	size_t n;
	int status;

	snprintf(cmd, sizeof(cmd), "%s --address %s %s 2>&1", brokerctl_path, sock, args);
	p = popen(cmd, "r");
	ASSERT(p);
	n = fread(out, 1, size - 1, p);
	out[n] = 0;
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/*
 * A brokerd from before paging: LIST_NAMES and LIST_PEERS in one reply,
 * UnknownMethod for every op it does not know. Serves connections on path
 * in a child until killed.
 */
static pid_t old_broker_start(const char *path)
{
	uint8_t buf[CTRL_MSG_MAX];
	int lfd, fd;
	pid_t pid;

	pid = fake_broker_fork(path, 4, &lfd);
	if (pid > 0)
		return pid;
	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		ssize_t n;

		while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
			struct ctrl_message m;
			struct ctrl_writer w;
			const void *d;
			size_t l, a, an;

			ASSERT(ctrl_message_decode(&m, buf, (size_t)n, 0) == 0);
			ctrl_writer_init(&w, CTRL_TYPE_REPLY, m.hdr.code, m.hdr.serial);
			switch (m.hdr.code) {
			case CTRL_OP_HELLO:
				ctrl_write_string(&w, ":1.1");
				ctrl_write_u64(&w, 1);
				ctrl_write_u32(&w, 0);
				break;
			case CTRL_OP_LIST_NAMES:
				a = ctrl_write_array_open(&w);
				ctrl_write_string(&w, "brokerd");
				ctrl_write_string(&w, "org.old.Name");
				ctrl_write_string(&w, ":1.1");
				ctrl_write_array_close(&w, a, 3);
				break;
			case CTRL_OP_LIST_PEERS:
				a = ctrl_write_array_open(&w);
				ctrl_write_string(&w, ":1.1");
				ctrl_write_u64(&w, 1);
				ctrl_write_u32(&w, 4242);
				ctrl_write_u32(&w, 0);
				ctrl_write_u32(&w, 0);
				ctrl_write_string(&w, "");
				an = ctrl_write_array_open(&w);
				ctrl_write_string(&w, "org.old.Name");
				ctrl_write_array_close(&w, an, 1);
				ctrl_write_u32(&w, 0);
				ctrl_write_array_close(&w, a, 1);
				break;
			default:
				ctrl_writer_deinit(&w);
				ASSERT(ctrl_writer_error(&w, m.hdr.code, m.hdr.serial, CTRL_ERROR_UNKNOWN_OP,
							 "unknown message type or op") == 0);
				break;
			}
			ASSERT(ctrl_writer_finish(&w, &d, &l) == 0);
			ASSERT(send(fd, d, l, MSG_NOSIGNAL) == (ssize_t)l);
			ctrl_writer_deinit(&w);
		}
		close(fd);
	}
	_exit(0);
}

/* brokerctl against a brokerd without paged listings: one LIST_NAMES / LIST_PEERS. */
static void test_old_broker(void)
{
	char path[300], out[4096], arg[400];
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "%s/old-socket", dir);
	pid = old_broker_start(path);
	snprintf(arg, sizeof(arg), "--address %s --page-size 1 list", path);
	ASSERT_INT(ctl(out, sizeof(out), arg), ==, 0);
	ASSERT(strstr(out, "\norg.old.Name ") && strstr(out, "\n:1.1 ") && count_lines(out) == 4);
	snprintf(arg, sizeof(arg), "--address %s peers", path);
	ASSERT_INT(ctl(out, sizeof(out), arg), ==, 0);
	ASSERT(strstr(out, ":1.1") && strstr(out, "4242") && strstr(out, "org.old.Name"));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	unlink(path);
}

static int states;

/* brokerd's credentials for name are this process's (it connected as us). */
static void check_credentials(brokerd_bus *bus, const char *name)
{
	brokerd_credentials *c = NULL;
	gid_t mine[256];
	const gid_t *gids;
	const char *label;
	char path[64], line[256];
	pid_t pid = 0, fd_pid = 0;
	uid_t uid;
	gid_t gid;
	int n, fd;
	FILE *f;

	ASSERT_INT(brokerd_bus_get_credentials(bus, name, &c), ==, 0);
	ASSERT_INT(brokerd_credentials_get_pid(c, &pid), ==, 0);
	ASSERT(pid == getpid());
	ASSERT_INT(brokerd_credentials_get_uid(c, &uid), ==, 0);
	ASSERT(uid == getuid());
	ASSERT_INT(brokerd_credentials_get_gid(c, &gid), ==, 0);
	ASSERT(gid == getgid());
	n = getgroups(256, mine);
	ASSERT(n >= 0);
	ASSERT_INT(brokerd_credentials_get_groups(c, &gids), ==, n);
	for (int i = 0; i < n; i++)
		ASSERT(gids[i] == mine[i]);
	/* SO_PEERPIDFD (Linux 6.5); SO_PEERSEC only under a security module */
	fd = brokerd_credentials_get_pidfd(c);
	if (fd == -ENODATA) {
		printf("# (kernel without SO_PEERPIDFD: no pidfd)\n");
	} else {
		ASSERT(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		f = fopen(path, "re");
		ASSERT(f);
		while (fgets(line, sizeof(line), f) && sscanf(line, "Pid: %d", &fd_pid) != 1)
			;
		fclose(f);
		ASSERT(fd_pid == getpid());
	}
	n = brokerd_credentials_get_label(c, &label);
	ASSERT(n == -ENODATA || (n == 0 && label[0]));
	brokerd_credentials_free(c);
}

static void on_state(brokerd_bus *bus, int state, void *u)
{
	if (state == BROKERD_STATE_CONNECTED)
		states++;
}

int main(int argc, char **argv)
{
	brokerd_bus *a, *b;
	brokerd_slot *watch = NULL;
	struct brokerd_creds creds;
	const char *ua, *ub;
	char out[8192], owner[64], want[256], ua_old[64];
	FILE *f;

	ASSERT(argc == 3);
	brokerd_path = argv[1];
	brokerctl_path = argv[2];
	ASSERT(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/socket", dir);
	snprintf(policy, sizeof(policy), "%s/policy", dir);
	ASSERT(mkdir(policy, 0755) == 0);
	/* this test runs as whatever user runs meson test: grant it the test names */
	f = fopen(strcat(strcpy(out, policy), "/50-test.conf"), "w");
	ASSERT(f);
	fprintf(f,
		"[user %u]\nallow own org.test.*\nallow send org.test.*\nallow receive org.test.*\n"
		"deny own org.test.Forbidden\n",
		(unsigned)getuid());
	fclose(f);
	daemon_start();

	ASSERT_INT(brokerd_bus_open(&a, sock), ==, 0);
	ASSERT_INT(brokerd_bus_open(&b, sock), ==, 0);
	ASSERT_INT(brokerd_bus_get_unique_name(a, &ua), ==, 0);
	ASSERT_INT(brokerd_bus_get_unique_name(b, &ub), ==, 0);
	ASSERT(strcmp(ua, ub) != 0);
	ASSERT_INT(brokerd_bus_watch_name(b, &watch, "org.test.Name", on_noc, NULL), ==, 0);

	/* names: owner, queue, DO_NOT_QUEUE, promotion, release */
	ASSERT_INT(brokerd_bus_request_name(a, "org.test.Name", BROKERD_NAME_ALLOW_REPLACEMENT), ==,
		   BROKERD_NAME_PRIMARY_OWNER);
	ASSERT_INT(brokerd_bus_request_name(a, "org.test.Name", 0), ==, BROKERD_NAME_ALREADY_OWNER);
	ASSERT_INT(brokerd_bus_request_name(b, "org.test.Name", BROKERD_NAME_DO_NOT_QUEUE), ==, -EEXIST);
	ASSERT_INT(brokerd_bus_request_name(b, "org.test.Name", 0), ==, BROKERD_NAME_IN_QUEUE);
	pump(b, &noc_calls, 1);
	ASSERT(strcmp(noc_last[1], "") == 0 && strcmp(noc_last[2], ua) == 0);
	ASSERT_INT(brokerd_bus_get_name_owner(b, "org.test.Name", owner, sizeof(owner)), ==, 0);
	ASSERT(strcmp(owner, ua) == 0);
	ASSERT_INT(brokerd_bus_get_creds(b, "org.test.Name", &creds), ==, 0);
	ASSERT(creds.pid == getpid() && creds.uid == getuid() && creds.gid == getgid());
	ASSERT(creds.id && strcmp(owner + 3, strrchr(ua, '.') + 1) == 0);
	check_credentials(b, "org.test.Name");
	check_credentials(b, ua);
	ASSERT_INT(brokerd_bus_request_name(a, "org.test.Forbidden", 0), ==, -EACCES);
	ASSERT_INT(brokerd_bus_request_name(a, "org.other.Name", 0), ==,
		   getuid() == 0 ? BROKERD_NAME_PRIMARY_OWNER : -EACCES);

	/* brokerctl sees the same */
	ASSERT_INT(ctl(out, sizeof(out), "list"), ==, 0);
	snprintf(want, sizeof(want), "org.test.Name");
	ASSERT(strstr(out, want));
	snprintf(want, sizeof(want), "%s %s", ua, ub);
	{
		/* "org.test.Name   :1.A  :1.B" */
		char *line = strstr(out, "org.test.Name");
		char *eol = strchr(line, '\n');

		*eol = 0;
		ASSERT(strstr(line, ua) && strstr(line, ub));
	}
	ASSERT_INT(ctl(out, sizeof(out), "--json list"), ==, 0);
	snprintf(want, sizeof(want), "{\"name\":\"org.test.Name\",\"owner\":\"%s\",\"queued\":[\"%s\"]}", ua,
		 ub);
	ASSERT(strstr(out, want));
	ASSERT_INT(ctl(out, sizeof(out), "status org.test.Name"), ==, 0);
	snprintf(want, sizeof(want), "PID:    %d\n", (int)getpid());
	ASSERT(strstr(out, want));
	ASSERT_INT(ctl(out, sizeof(out), "--json status org.test.Name"), ==, 0);
	snprintf(want, sizeof(want), "\"owner\":\"%s\",\"pid\":%d,\"uid\":%u,", ua, (int)getpid(),
		 (unsigned)getuid());
	ASSERT(strstr(out, want));
	ASSERT_INT(ctl(out, sizeof(out), "status org.test.Nobody"), ==, 4);
	ASSERT_INT(ctl(out, sizeof(out), "status not-a-name"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "--json status org.test.Nobody"), ==, 4);
	ASSERT(strstr(out, "\"error\":\"brokerd.Error.NameHasNoOwner\""));
	snprintf(want, sizeof(want), "policy check %u org.test.X own", (unsigned)getuid());
	ASSERT_INT(ctl(out, sizeof(out), want), ==, 0);
	ASSERT(strncmp(out, "allow: ", 7) == 0);
	snprintf(want, sizeof(want), "policy check %u org.test.Forbidden own", (unsigned)getuid());
	ASSERT_INT(ctl(out, sizeof(out), want), ==, 3);
	ASSERT(strncmp(out, "deny: ", 6) == 0 && strstr(out, "50-test.conf:5"));
	snprintf(want, sizeof(want), "--json policy check %u org.test.X send", (unsigned)getuid());
	ASSERT_INT(ctl(out, sizeof(out), want), ==, 0);
	ASSERT(strstr(out, "\"decision\":\"allow\""));
	ASSERT_INT(ctl(out, sizeof(out), "policy check root org.test.X fly"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "policy"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "quota"), ==, 0);
	ASSERT(strstr(out, "connections") && strstr(out, "names"));
	ASSERT_INT(ctl(out, sizeof(out), "--json quota"), ==, 0);
	ASSERT(out[0] == '[' && strstr(out, "\"connections\":{\"used\":"));
	ASSERT_INT(ctl(out, sizeof(out), "peers"), ==, 0);
	ASSERT(strstr(out, "org.test.Name"));
	ASSERT_INT(ctl(out, sizeof(out), "--json peers"), ==, 0);
	ASSERT(out[0] == '[');
	/* in pages of one entry: every entry all the same (brokerctl's own
	 * connection differs from run to run, not the number of lines) */
	{
		char paged[8192];
		const char *cmds[] = { "list", "peers", "--json list", "--json peers" };

		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
			snprintf(want, sizeof(want), "--page-size 1 %s", cmds[i]);
			ASSERT_INT(ctl(out, sizeof(out), cmds[i]), ==, 0);
			ASSERT_INT(ctl(paged, sizeof(paged), want), ==, 0);
			ASSERT(count_lines(out) == count_lines(paged));
			ASSERT(strstr(paged, ua) && strstr(paged, ub) && strstr(paged, "org.test.Name"));
		}
		ASSERT(count_lines(out) == 1); /* --json: one line */
		ASSERT(strstr(paged, "},{"));
	}
	ASSERT_INT(ctl(out, sizeof(out), "--page-size x list"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "--page-size -1 list"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "info"), ==, 0);
	ASSERT(strstr(out, "Channels:    no"));
	ASSERT_INT(ctl(out, sizeof(out), "--json info"), ==, 0);
	ASSERT(strstr(out, "\"channels\":false"));
	/* what needs channels says so */
	ASSERT_INT(ctl(out, sizeof(out), "monitor"), ==, 9);
	ASSERT(strstr(out, "NotSupported"));
	ASSERT_INT(ctl(out, sizeof(out), "call org.test.Name Ping"), ==, 9);
	ASSERT_INT(ctl(out, sizeof(out), "nonsense"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "--timeout x list"), ==, 2);
	ASSERT_INT(ctl(out, sizeof(out), "emit org.test.Name Changed"), ==, 3); /* owned by a */

	test_old_broker();

	/* releasing promotes the queued owner */
	noc_calls = 0;
	ASSERT_INT(brokerd_bus_release_name(a, "org.test.Name"), ==, 0);
	pump(b, &noc_calls, 1);
	ASSERT(strcmp(noc_last[1], ua) == 0 && strcmp(noc_last[2], ub) == 0);
	ASSERT_INT(brokerd_bus_release_name(a, "org.test.Name"), ==, -EPERM);

	/* brokerd dies and comes back: both buses reconnect, names come back */
	snprintf(ua_old, sizeof(ua_old), "%s", ua);
	ASSERT_INT(brokerd_bus_set_state_handler(a, on_state, NULL), ==, 0);
	ASSERT_INT(brokerd_bus_request_name(a, "org.test.Again", 0), ==, BROKERD_NAME_PRIMARY_OWNER);
	daemon_stop();
	daemon_start();
	pump(a, &states, 1);
	/* a new connection; its name may equal the old one, as brokerd numbers
	 * connections afresh after a restart */
	ASSERT_INT(brokerd_bus_get_unique_name(a, &ua), ==, 0);
	ASSERT(strncmp(ua, ":1.", 3) == 0);
	ASSERT_INT(brokerd_bus_get_name_owner(a, "org.test.Again", owner, sizeof(owner)), ==, 0);
	ASSERT(strcmp(owner, ua) == 0);
	ASSERT_INT(brokerd_bus_get_name_owner(a, "org.test.Name", owner, sizeof(owner)), ==, -ENXIO);
	/* b, never processed since, notices on its next request and reconnects */
	for (int i = 0; i < 100 && brokerd_bus_get_name_owner(b, "org.test.Name", owner, sizeof(owner)) != 0;
	     i++) {
		brokerd_bus_process(b);
		brokerd_bus_wait(b, 20000);
	}
	ASSERT_INT(brokerd_bus_get_name_owner(b, "org.test.Name", owner, sizeof(owner)), ==, 0);
	ASSERT_INT(brokerd_bus_get_unique_name(b, &ub), ==, 0);
	ASSERT(strcmp(owner, ub) == 0);

	brokerd_slot_free(watch);
	brokerd_bus_close(a);
	brokerd_bus_close(b);
	daemon_stop();
	unlink(sock);
	unlink(strcat(strcpy(out, policy), "/50-test.conf"));
	rmdir(policy);
	rmdir(dir);
	printf("test-brokerd: ok\n");
	return 0;
}
