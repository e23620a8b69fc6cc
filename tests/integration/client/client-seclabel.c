/* SPDX-License-Identifier: MIT */
/*
 * client-seclabel - the security label brokerd reports for a connection
 * (GET_CREDENTIALS, from SO_PEERSEC at connect) is the peer's own, under
 * Smack. An ordinary connection: the label the peer reads from
 * /proc/self/attr/current, never empty. A process that took the Smack label
 * brokerd-test before connecting: exactly "brokerd-test", as root and as
 * alice (who has no CAP_MAC_OVERRIDE, so the two rules this test loads are
 * what let her reach brokerd). A label taken after connecting changes
 * nothing: brokerd keeps the one of the connect. brokerctl status shows the
 * same labels. A reply without a label fails; a kernel without Smack skips.
 *
 * All through the public brokerd_bus_get_credentials(), which also has to
 * give each peer's pid, uid, gid and supplementary groups, and a pidfd that
 * refers to the peer's process (its fdinfo names the pid).
 */
#include "tests/integration/client/testlib.h"

#define LABEL	   "brokerd-test"
#define SMACK_LOAD "/sys/fs/smackfs/load2"

/* The caller's own label, as the kernel gives it: 0 or -errno. */
static int self_label(char *buf, size_t size)
{
	ssize_t n;
	int fd, k = 0;

	fd = open("/proc/self/attr/current", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		k = -errno;
	close(fd);
	if (k < 0)
		return k;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static void set_self_label(const char *label)
{
	int fd = open("/proc/self/attr/current", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, label, strlen(label)) != (ssize_t)strlen(label))
		FAIL("cannot take label %s: %m", label);
	close(fd);
}

/*
 * Sets one Smack rule: subject object access ("-" takes every access away;
 * rules cannot be deleted). Smack denials are not logged in the guest (its
 * kernel has no audit): a missing rule shows only as EACCES.
 */
static int smack_rule(const char *subject, const char *object, const char *access)
{
	char rule[256];
	int fd, n, k = 0;

	n = snprintf(rule, sizeof(rule), "%s %s %s", subject, object, access);
	fd = open(SMACK_LOAD, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, rule, (size_t)n) != n)
		k = -errno;
	close(fd);
	return k;
}

static void smack_rules_remove(void)
{
	smack_rule(LABEL, "_", "-");
	smack_rule("_", LABEL, "-");
}

/* Like t_open(), but labels need no channels: this test runs without them too. */
static brokerd_bus *open_bus(void)
{
	brokerd_bus *bus = NULL;
	int k = brokerd_bus_open_system(&bus);

	if (k < 0)
		FAIL("cannot connect to brokerd: %s", strerror(-k));
	return bus;
}

/* Who a peer is: what brokerd must report for it. */
struct identity {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t groups[64];
	int n_groups;
	const char *label;
};

/* The pid a pidfd refers to, from its fdinfo ("Pid:\t<pid>"). */
static pid_t pidfd_pid(int fd)
{
	char path[64], line[256];
	pid_t pid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		FAIL("%s: %m", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	fclose(f);
	return pid;
}

/* brokerd's credentials for name must be want's, and brokerctl status must
 * show the same label. */
static void check_credentials(brokerd_bus *bus, const char *name, const struct identity *want)
{
	brokerd_credentials *c = NULL;
	char cmd[256], out[1024], key[300];
	const gid_t *groups;
	const char *label;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	size_t n;
	FILE *f;
	int k;

	k = brokerd_bus_get_credentials(bus, name, &c);
	if (k < 0)
		FAIL("brokerd_bus_get_credentials(%s): %s", name, strerror(-k));
	k = brokerd_credentials_get_label(c, &label);
	if (k < 0)
		FAIL("brokerd reports no security label for %s: %s", name, strerror(-k));
	t_log("%s: brokerd reports label \"%s\"", name, label);
	if (strcmp(label, want->label) != 0)
		FAIL("%s: brokerd reports label \"%s\", want \"%s\"", name, label, want->label);
	CHECK_R(brokerd_credentials_get_pid(c, &pid), 0);
	CHECK_R(brokerd_credentials_get_uid(c, &uid), 0);
	CHECK_R(brokerd_credentials_get_gid(c, &gid), 0);
	if (pid != want->pid || uid != want->uid || gid != want->gid)
		FAIL("%s: brokerd reports pid %d uid %u gid %u, want %d %u %u", name, (int)pid, (unsigned)uid,
		     (unsigned)gid, (int)want->pid, (unsigned)want->uid, (unsigned)want->gid);
	CHECK_R(brokerd_credentials_get_groups(c, &groups), want->n_groups);
	for (int i = 0; i < want->n_groups; i++)
		if (groups[i] != want->groups[i])
			FAIL("%s: group %d is %u, want %u", name, i, (unsigned)groups[i],
			     (unsigned)want->groups[i]);
	/* the guest kernel has SO_PEERPIDFD (6.5) */
	k = brokerd_credentials_get_pidfd(c);
	if (k < 0)
		FAIL("%s: no pidfd: %s", name, strerror(-k));
	if (pidfd_pid(k) != want->pid)
		FAIL("%s: the pidfd refers to pid %d, want %d", name, (int)pidfd_pid(k), (int)want->pid);
	brokerd_credentials_free(c);

	snprintf(cmd, sizeof(cmd), "brokerctl --json status %s", name);
	f = popen(cmd, "re");
	if (!f)
		FAIL("popen %s: %m", cmd);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	if (pclose(f) != 0)
		FAIL("%s failed: %s", cmd, out);
	snprintf(key, sizeof(key), "\"label\":\"%s\"", want->label);
	if (!strstr(out, key))
		FAIL("%s: no %s in %s", cmd, key, out);
}

/* This process as it is now (peers it forks inherit it until they change). */
static void identity_self(struct identity *id, const char *label)
{
	id->pid = getpid();
	id->uid = getuid();
	id->gid = getgid();
	id->n_groups = getgroups(sizeof(id->groups) / sizeof(id->groups[0]), id->groups);
	if (id->n_groups < 0)
		FAIL("getgroups: %m");
	id->label = label;
}

struct labeled_peer {
	uid_t uid;
	bool relabel_after; /* take LABEL after connecting, not before */
};

static int to_parent[2], to_peer[2];

/* Connects under LABEL (or takes it afterwards), tells its name, stays until "done". */
static int peer(void *arg)
{
	const struct labeled_peer *p = arg;
	char label[256];
	const char *me;
	brokerd_bus *bus;

	if (!p->relabel_after)
		set_self_label(LABEL);
	if (p->uid)
		t_become(p->uid);
	bus = open_bus();
	if (p->relabel_after)
		set_self_label(LABEL);
	CHECK_R(self_label(label, sizeof(label)), 0);
	if (strcmp(label, LABEL) != 0)
		FAIL("peer runs as \"%s\", want \"%s\"", label, LABEL);
	CHECK_R(brokerd_bus_get_unique_name(bus, &me), 0);
	t_say(to_parent[1], "%s", me);
	t_expect(to_peer[0], "done", 20000);
	brokerd_bus_close(bus);
	return 0;
}

/* Starts a peer, checks brokerd's credentials for it, lets it go. */
static void check_peer(brokerd_bus *bus, const struct labeled_peer *p, const char *label)
{
	struct identity want;
	char name[128];
	pid_t pid;
	int k;

	identity_self(&want, label);
	if (p->uid) {
		/* as t_become() makes it */
		want.uid = p->uid;
		want.gid = p->uid == UID_ALICE ? GID_USERS : p->uid;
		want.groups[0] = GID_USERS;
		want.n_groups = p->uid == UID_ALICE ? 1 : 0;
	}
	pid = want.pid = t_fork(peer, (void *)p);
	k = t_hear(to_parent[0], name, sizeof(name), 10000);
	if (k < 0) {
		FAIL("peer (uid %u%s) did not connect: %s (exit %d)", (unsigned)p->uid,
		     p->relabel_after ? ", relabeled after connect" : "", strerror(-k), t_wait(pid, 1000));
	}
	check_credentials(bus, name, &want);
	t_say(to_peer[1], "done");
	CHECK_R(t_wait(pid, 10000), 0);
}

int main(void)
{
	static const struct labeled_peer root = { 0, false }, alice = { UID_ALICE, false },
					 late = { 0, true };
	struct identity self;
	char mine[256];
	const char *me;
	brokerd_bus *bus;

	if (access("/proc/self/attr/smack", F_OK) < 0)
		SKIP("the kernel has no Smack");
	CHECK_R(self_label(mine, sizeof(mine)), 0);
	if (!mine[0])
		FAIL("/proc/self/attr/current is empty");
	if (access(SMACK_LOAD, W_OK) < 0)
		FAIL("%s: %m (systemd mounts smackfs when the kernel has Smack)", SMACK_LOAD);

	/* (a) an ordinary connection carries the label its process runs under */
	bus = open_bus();
	CHECK_R(brokerd_bus_get_unique_name(bus, &me), 0);
	t_log("this test runs as \"%s\"", mine);
	identity_self(&self, mine);
	check_credentials(bus, me, &self);

	/*
	 * (b) a process under another label. PID 1, which made brokerd's
	 * listening socket, and brokerd run as "_": a peer without
	 * CAP_MAC_OVERRIDE needs write access to "_" (the socket file and the
	 * listener) and "_" to it (the connection's other end); with the
	 * first rule alone alice is refused.
	 */
	t_atexit(smack_rules_remove);
	CHECK_R(smack_rule(LABEL, "_", "rwxa"), 0);
	CHECK_R(smack_rule("_", LABEL, "rwxa"), 0);
	t_pipe(to_parent);
	t_pipe(to_peer);
	check_peer(bus, &root, LABEL);
	check_peer(bus, &alice, LABEL);
	/* a label taken after the connect is not the connection's */
	check_peer(bus, &late, mine);

	brokerd_bus_close(bus);
	printf("ok\n");
	return 0;
}
