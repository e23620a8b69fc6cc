/* SPDX-License-Identifier: MIT */
/*
 * dbus-activation.c - activatable names for D-Bus clients: a message to a
 * name nobody owns that has a service file (and no NO_AUTO_START) waits
 * until the name is owned, then goes on as if sent then; StartServiceByName
 * waits the same way. The service starts through its SystemdService= unit
 * (activation.c: the activator or systemd) when it has one and systemd can
 * be asked; otherwise brokerd runs its Exec= line itself, as dbus-daemon
 * does without systemd (a private bus such as brokerd-dbus-daemon's),
 * telling it where the bus is (DBUS_STARTER_ADDRESS, and
 * DBUS_SESSION_BUS_ADDRESS on a session bus); on a system bus as the user
 * its User= names, as dbus-daemon's setuid helper runs it. With
 * --dbus-systemd-activation (brokerd-dbus-daemon --systemd-activation) a
 * unit is asked for as dbus-daemon asks a systemd that is a client of this
 * very bus: an org.freedesktop.systemd1.Activator.ActivationRequest signal
 * to the owner of org.freedesktop.systemd1 (held back until the name has
 * one), failed by an ActivationFailure signal from that owner only. A
 * start that fails (the
 * process fails or is killed before it owns the name, the unit fails, the
 * timeout)
 * answers everything waiting with the error dbus-daemon gives.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brokerd/activation.h"
#include "brokerd/bus-state.h"
#include "brokerd/dbus-access.h"
#include "brokerd/dbus-config.h"
#include "brokerd/dbus-front.h"
#include "brokerd/policy.h"
#include "brokerd/registry.h"
#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/macro.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define ERR(x) "org.freedesktop.DBus.Error." x
/* Messages that may wait for one connection (each holds its bytes and fds in brokerd). */
#define PENDING_PER_CONN_MAX 256U

extern char **environ;

/* A message (or a StartServiceByName) waiting for its name. */
struct pending {
	struct dbus_conn *conn;
	uint8_t type, flags;
	uint32_t serial;
	bool start; /* StartServiceByName: answer 1 when owned */
	uint8_t *data;
	size_t len;
	int *fds;
	unsigned int n_fds;
	struct pending *next;
};

/* UpdateActivationEnvironment's variables, for systemd's SetEnvironment once it is on the bus. */
struct env_update {
	void *body;
	size_t len;
	struct env_update *next;
};

/* SetEnvironment calls kept for a systemd that has not come yet; more are dropped (logged). */
#define ENV_UPDATES_MAX 64U

/* One name being started. */
struct starting {
	struct dbus_activation_state *st;
	char *name;
	struct pending *head, *tail;
	sd_event_source *timer;
	pid_t pid;	/* its Exec= process, 0 if started through systemd */
	char *unit;	/* asked for by ActivationRequest (systemd mode), else NULL */
	void *request;	/* that ActivationRequest, written and shown to monitors, until sent */
	size_t request_len;
	bool requested; /* that request was sent */
	bool owned;
	struct starting *next;
};

/* A process brokerd ran, watched until it exits (also after it took its name). */
struct child {
	struct dbus_activation_state *st;
	pid_t pid;
	int pidfd;
	sd_event_source *src;
	char *name;
	struct child *next;
};

struct dbus_activation_state {
	struct dbus_front *front;
	struct starting *starting;
	struct child *children;
	char **env; /* UpdateActivationEnvironment's KEY=VALUE */
	size_t n_env;
	char *bus_type;			/* the XML configuration's <type>, NULL if none */
	bool session;			/* the XML names no <servicehelper>: User= means nothing */
	struct env_update *env_updates; /* SetEnvironment bodies for a systemd not yet on the bus */
	unsigned int n_env_updates;
	sd_event_source *deliver_src;
};

static void on_unit_failed(void *userdata, const char *name, const char *msg);

static struct dbus_activation_state *state_get(struct dbus_front *f)
{
	struct dbus_activation_state *st = f->activation;

	if (st)
		return st;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->front = f;
	if (f->bus->dbus_config) {
		struct dbus_config *c = NULL;
		char err[256];

		if (dbus_config_load(&c, f->bus->dbus_config, err, sizeof(err)) == 0) {
			if (c->type)
				st->bus_type = strdup(c->type);
			st->session = !c->servicehelper;
		} else
			log_warning("D-Bus activation: %s", err);
		dbus_config_free(c);
	}
	f->bus->activation_failed = on_unit_failed;
	f->bus->activation_failed_userdata = f;
	f->activation = st;
	return st;
}

/*
 * Read once, when the front is made: the configuration file may be gone by
 * the first activation (GLib's GTestDBus removes its generated one once the
 * bus is up), and what it says decides whether User= is needed.
 */
int dbus_activation_init(struct dbus_front *f)
{
	return state_get(f) ? 0 : -ENOMEM;
}

static void pending_free(struct pending *p)
{
	for (unsigned int i = 0; i < p->n_fds; i++)
		close(p->fds[i]);
	free(p->fds);
	free(p->data);
	free(p);
}

static struct starting *starting_find(struct dbus_activation_state *st, const char *name)
{
	for (struct starting *s = st->starting; s; s = s->next)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

static void starting_unlink(struct dbus_activation_state *st, struct starting *s)
{
	for (struct starting **pp = &st->starting; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	sd_event_source_disable_unref(s->timer);
	s->timer = NULL;
}

static void starting_free(struct starting *s)
{
	while (s->head) {
		struct pending *p = s->head;

		s->head = p->next;
		pending_free(p);
	}
	sd_event_source_disable_unref(s->timer);
	free(s->request);
	free(s->unit);
	free(s->name);
	free(s);
}

/* The error for a waiting message (only calls that want a reply get one). */
static void pending_fail(struct pending *p, const char *error, const char *text)
{
	struct dbus_message m = { .h = { .type = p->type, .flags = p->flags, .serial = p->serial } };

	if (!p->conn->dead)
		(void)dbus_driver_reply_error(p->conn, &m, error, text);
}

/* Everything waiting for s fails with error; s is freed. */
static void starting_fail(struct dbus_activation_state *st, struct starting *s, const char *error,
			  const char *text)
{
	starting_unlink(st, s);
	log_warning("D-Bus activation of %s failed: %s", s->name, text);
	for (struct pending *p = s->head; p; p = p->next)
		pending_fail(p, error, text);
	starting_free(s);
}

static void on_unit_failed(void *userdata, const char *name, const char *msg)
{
	struct dbus_front *f = userdata;
	struct dbus_activation_state *st = f->activation;
	struct starting *s = st ? starting_find(st, name) : NULL;

	if (s && !s->pid)
		starting_fail(st, s, ERR("Spawn.Failed"), msg);
}

static int on_timeout(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct starting *s = userdata;
	char text[400];

	/* Nothing waits any more after this: the next message starts the name again. */
	snprintf(text, sizeof(text), "Activation of %s timed out", s->name);
	starting_fail(s->st, s, ERR("TimedOut"), text);
	return 0;
}

/* ---- Exec= ---------------------------------------------------------------------- */

/*
 * Exec= split as dbus-daemon splits it (a shell's quoting without the
 * shell): words by blanks, '...' literal, "..." with \" \\ \$ \` escapes, \x
 * outside quotes. Returns a NULL-terminated argv, or NULL for an unbalanced
 * quote or an empty line.
 */
static char **exec_split(const char *line)
{
	size_t n = 0, cap = 8;
	char **argv = calloc(cap, sizeof(char *));
	char *word = malloc(strlen(line) + 1);
	const char *p = line;

	if (!argv || !word)
		goto fail;
	for (;;) {
		size_t l = 0;
		bool any = false;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
			any = true;
			if (*p == '\'') {
				const char *e = strchr(p + 1, '\'');

				if (!e)
					goto fail;
				memcpy(word + l, p + 1, (size_t)(e - p - 1));
				l += (size_t)(e - p - 1);
				p = e + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
						p++;
					word[l++] = *p;
				}
				if (*p != '"')
					goto fail;
				p++;
			} else if (*p == '\\' && p[1]) {
				word[l++] = p[1];
				p += 2;
			} else {
				word[l++] = *p++;
			}
		}
		if (!any)
			continue;
		if (n + 2 > cap) {
			char **a = realloc(argv, (cap *= 2) * sizeof(char *));

			if (!a)
				goto fail;
			argv = a;
		}
		argv[n] = strndup(word, l);
		if (!argv[n])
			goto fail;
		argv[++n] = NULL;
	}
	free(word);
	if (!n)
		goto fail_nofree;
	return argv;
fail:
	free(word);
fail_nofree:
	if (argv)
		for (size_t i = 0; i < n; i++)
			free(argv[i]);
	free(argv);
	return NULL;
}

static void strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

/* The address clients use for the socket brokerd serves (its bound name), escaped as D-Bus wants. */
static int front_address(struct dbus_front *f, char *buf, size_t size)
{
	struct sockaddr_un sa;
	socklen_t l = sizeof(sa);
	const char *path;
	size_t plen, o;
	bool abstract;

	if (f->listen_fd < 0 || getsockname(f->listen_fd, (struct sockaddr *)&sa, &l) < 0 ||
	    l <= offsetof(struct sockaddr_un, sun_path))
		return -ENOENT;
	plen = l - offsetof(struct sockaddr_un, sun_path);
	abstract = sa.sun_path[0] == 0;
	path = sa.sun_path + abstract;
	plen -= abstract;
	if (!abstract)
		plen = strnlen(path, plen);
	o = (size_t)snprintf(buf, size, "unix:%s=", abstract ? "abstract" : "path");
	for (size_t i = 0; i < plen && o + 4 < size; i++) {
		unsigned char ch = (unsigned char)path[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    (ch && strchr("-_/.\\*", ch)))
			buf[o++] = (char)ch;
		else
			o += (size_t)snprintf(buf + o, size - o, "%%%02x", ch);
	}
	buf[o] = 0;
	return 0;
}

static bool env_overridden(char *const *over, size_t n, const char *kv)
{
	size_t kl = strcspn(kv, "=");

	for (size_t i = 0; i < n; i++)
		if (over[i] && !strncmp(over[i], kv, kl) && over[i][kl] == '=')
			return true;
	return false;
}

static int on_child(sd_event_source *src, int fd, uint32_t revents, void *userdata);

/* Whom an Exec= runs as: brokerd itself, or (change) the user its User= names. */
struct exec_user {
	bool change;
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* the user's groups, as initgroups() would set them */
	int n_groups;
};

#define EXEC_GROUPS_MAX 65536

/*
 * dbus-daemon honours User= only through its setuid launch helper, which a
 * system bus's configuration names (<servicehelper>) and a session bus's
 * does not: there the service runs as the bus's user, whatever User= says.
 * brokerd runs no helper and changes users itself where dbus-daemon's
 * helper would: on a system bus (brokerd's own, without an XML
 * configuration, or one that names a <servicehelper>), when it is root; not
 * root, it cannot, and the service runs as brokerd (logged). Resolved here,
 * in brokerd, so that a user that does not exist fails the activation at
 * once. -ESRCH (err set): no such user; -ENOKEY: no User= where one is
 * needed; -ENOMEM.
 */
static int exec_user_get(struct dbus_activation_state *st, const struct service *svc, struct exec_user *ret,
			 char *err, size_t err_len)
{
	struct passwd *pw;
	int n = 32;

	*ret = (struct exec_user){ 0 };
	if (st->front->bus->dbus_config && st->session)
		return 0;
	/*
	 * dbus-daemon's helper reads User= as compulsory and exits 1 without
	 * it, which dbus-daemon answers with Spawn.ChildExited ("unknown
	 * return code 1"): on an XML system bus brokerd refuses the file
	 * likewise, rather than running a system service as itself. brokerd's
	 * own bus (no XML) keeps running such a file as brokerd.
	 */
	if (!svc->user && st->front->bus->dbus_config) {
		snprintf(err, err_len,
			 "Cannot run %s: %s has no User=, which a system bus (<servicehelper>) needs to run Exec=",
			 svc->name, svc->file);
		return -ENOKEY;
	}
	if (!svc->user)
		return 0;
	if (geteuid() != 0) {
		log_info("D-Bus activation of %s: User=%s not used, brokerd (uid %u) cannot change users",
			 svc->name, svc->user, (unsigned int)geteuid());
		return 0;
	}
	errno = 0;
	pw = getpwnam(svc->user);
	if (!pw) {
		snprintf(err, err_len, "Cannot run %s as user '%s' (User= of %s): %s", svc->name, svc->user,
			 svc->file, errno ? strerror(errno) : "no such user");
		return -ESRCH;
	}
	ret->uid = pw->pw_uid;
	ret->gid = pw->pw_gid;
	for (;;) {
		gid_t *g = realloc(ret->groups, (size_t)n * sizeof(gid_t));
		int want = n;

		if (!g)
			break;
		ret->groups = g;
		if (getgrouplist(svc->user, ret->gid, g, &want) >= 0) {
			ret->n_groups = want;
			ret->change = true;
			return 0;
		}
		/* too small: want says how many there are */
		n = want > n ? want : n * 2;
		if (n > EXEC_GROUPS_MAX)
			break;
	}
	free(ret->groups);
	ret->groups = NULL;
	snprintf(err, err_len, "Cannot find the groups of user '%s' for %s", svc->user, svc->name);
	return -ENOMEM;
}

/*
 * What the child writes on the report pipe when it gets no further than
 * its execve(): the first byte says which step failed, the parent answers
 * with that step's error (dbus-daemon's babysitter tells the two apart too).
 */
#define EXEC_REPORT_USER 'u' /* then the text: cannot become its User= */
#define EXEC_REPORT_EXEC 'x' /* then the execve()'s errno, an int */

/* The child, before its execve(): becomes u. On failure why goes to fd, and it exits. */
static void exec_child_user(const struct exec_user *u, int fd)
{
	const char *what = NULL;
	char msg[160];
	int n;

	if (!u->change)
		return;
	if (setgroups((size_t)u->n_groups, u->groups) < 0)
		what = "setgroups";
	else if (setgid(u->gid) < 0)
		what = "setgid";
	else if (setuid(u->uid) < 0)
		what = "setuid";
	if (!what)
		return;
	n = snprintf(msg, sizeof(msg), "%c%s(%u): %s", EXEC_REPORT_USER, what,
		     (unsigned int)(!strcmp(what, "setuid") ? u->uid : u->gid), strerror(errno));
	if (n > 0)
		(void)!write(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(127);
}

/* What the child said before or of its execve() (nothing: it succeeded); blocks until then. */
static ssize_t exec_child_report(int fd, char *buf, size_t size)
{
	size_t n = 0;

	while (n + 1 < size) {
		ssize_t r = read(fd, buf + n, size - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	return (ssize_t)n;
}

/*
 * Runs svc's Exec= line; the process is watched until it exits. *error is
 * the D-Bus error when it cannot be run: Spawn.SetupFailed when it cannot
 * be run as its User= (as dbus-daemon's helper fails), else
 * Spawn.ExecFailed (also when its execve() fails).
 */
static int exec_start(struct dbus_activation_state *st, const struct service *svc, pid_t *ret_pid,
		      const char **error, char *err, size_t err_len)
{
	struct dbus_front *f = st->front;
	char **argv = exec_split(svc->exec), **envp = NULL;
	char address[sizeof(((struct sockaddr_un *)0)->sun_path) * 3 + 32], kv[3][sizeof(address) + 32];
	char path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", said[200];
	struct exec_user user = { 0 };
	size_t n_environ = 0, n = 0;
	ssize_t said_len;
	struct child *ch = NULL;
	int pidfd = -1, report[2] = { -1, -1 }, r;
	pid_t pid;

	*error = ERR("Spawn.ExecFailed");
	if (!argv) {
		snprintf(err, err_len, "Cannot parse Exec= line '%s' of %s", svc->exec, svc->file);
		return -EINVAL;
	}
	r = front_address(f, address, sizeof(address));
	if (r < 0) {
		strv_free(argv);
		snprintf(err, err_len, "The bus has no address to give to %s", svc->name);
		return r;
	}
	r = exec_user_get(st, svc, &user, err, err_len);
	if (r < 0) {
		strv_free(argv);
		*error = r == -ENOKEY ? ERR("Spawn.ChildExited") : ERR("Spawn.SetupFailed");
		return r;
	}
	/*
	 * brokerd's environment, UpdateActivationEnvironment's over it, then
	 * where the bus is. Run as another user, not brokerd's own: as
	 * dbus-daemon's helper clears it, only a PATH.
	 */
	snprintf(kv[0], sizeof(kv[0]), "DBUS_STARTER_ADDRESS=%s", address);
	snprintf(kv[1], sizeof(kv[1]), "DBUS_STARTER_BUS_TYPE=%s",
		 st->bus_type && !strcmp(st->bus_type, "system") ? "system" : "session");
	snprintf(kv[2], sizeof(kv[2]), "%s=%s",
		 st->bus_type && !strcmp(st->bus_type, "system") ? "DBUS_SYSTEM_BUS_ADDRESS" :
								   "DBUS_SESSION_BUS_ADDRESS",
		 address);
	while (!user.change && environ[n_environ])
		n_environ++;
	envp = calloc(n_environ + st->n_env + 5, sizeof(char *));
	if (!envp) {
		r = -ENOMEM;
		snprintf(err, err_len, "Out of memory");
		goto out;
	}
	{
		char *fixed[3] = { kv[0], kv[1], kv[2] };

		if (user.change && !env_overridden(st->env, st->n_env, path))
			envp[n++] = path;
		for (size_t i = 0; i < n_environ; i++)
			if (!env_overridden(st->env, st->n_env, environ[i]) &&
			    !env_overridden(fixed, 3, environ[i]))
				envp[n++] = environ[i];
		for (size_t i = 0; i < st->n_env; i++)
			if (!env_overridden(fixed, 3, st->env[i]))
				envp[n++] = st->env[i];
		for (size_t i = 0; i < 3; i++)
			envp[n++] = kv[i];
	}
	/* the child says on it why it could not become its user; closed by its execve() */
	if (pipe2(report, O_CLOEXEC) < 0) {
		r = -errno;
		snprintf(err, err_len, "Cannot make a pipe for %s: %s", svc->name, strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		snprintf(err, err_len, "Cannot fork for %s: %s", svc->name, strerror(errno));
		goto out;
	}
	if (pid == 0) {
		sigset_t all;
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* sd-event blocked some signals in brokerd: the service starts with none blocked */
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		for (int sig = 1; sig < NSIG; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		(void)setsid();
		if (null >= 0)
			dup2(null, STDIN_FILENO);
		/* the report pipe as fd 3 (still closed on exec), every other fd closed */
		if (report[1] != 3 && dup3(report[1], 3, O_CLOEXEC) < 0)
			_exit(127);
		(void)syscall(SYS_close_range, 4U, ~0U, 0U);
		exec_child_user(&user, 3);
		execve(argv[0], argv, envp);
		{
			char msg[1 + sizeof(int)] = { EXEC_REPORT_EXEC };
			int e = errno;

			memcpy(msg + 1, &e, sizeof(e));
			(void)!write(3, msg, sizeof(msg));
		}
		_exit(127);
	}
	close(report[1]);
	report[1] = -1;
	/*
	 * Exec= that cannot be run (missing, not executable) is told apart
	 * from a service that ran and exited: Spawn.ExecFailed at once, as
	 * dbus-daemon answers, not Spawn.ChildExited when its exit is seen.
	 */
	said_len = exec_child_report(report[0], said, sizeof(said));
	if (said_len > 0) {
		(void)waitpid(pid, NULL, 0);
		if (said[0] == EXEC_REPORT_EXEC && (size_t)said_len == 1 + sizeof(int)) {
			int e;

			memcpy(&e, said + 1, sizeof(e));
			*error = ERR("Spawn.ExecFailed");
			snprintf(err, err_len, "Failed to execute program %s (%s): %s", svc->name, argv[0],
				 strerror(e));
			r = -e;
		} else {
			*error = ERR("Spawn.SetupFailed");
			snprintf(err, err_len, "Cannot run %s as user '%s': %s", svc->name, svc->user, said + 1);
			r = -EPERM;
		}
		goto out;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	ch = calloc(1, sizeof(*ch));
	if (pidfd < 0 || !ch || !(ch->name = strdup(svc->name)) ||
	    sd_event_add_io(f->event, &ch->src, pidfd, EPOLLIN, on_child, ch) < 0) {
		/* not watched, not reaped: never left behind as a zombie, nor half started */
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		if (pidfd >= 0)
			close(pidfd);
		if (ch)
			free(ch->name);
		free(ch);
		r = -ENOMEM;
		snprintf(err, err_len, "Cannot watch the process of %s", svc->name);
		goto out;
	}
	ch->st = st;
	ch->pid = pid;
	ch->pidfd = pidfd;
	ch->next = st->children;
	st->children = ch;
	*ret_pid = pid;
	if (user.change)
		log_info("D-Bus activation of %s: started %s (pid %d) as %s (uid %u)", svc->name, argv[0], (int)pid,
			 svc->user, (unsigned int)user.uid);
	else
		log_info("D-Bus activation of %s: started %s (pid %d)", svc->name, argv[0], (int)pid);
	r = 0;
out:
	if (report[0] >= 0)
		close(report[0]);
	if (report[1] >= 0)
		close(report[1]);
	free(user.groups);
	strv_free(argv);
	free(envp);
	return r;
}

static void child_free(struct dbus_activation_state *st, struct child *ch)
{
	for (struct child **pp = &st->children; *pp; pp = &(*pp)->next)
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	sd_event_source_disable_unref(ch->src);
	close(ch->pidfd);
	free(ch->name);
	free(ch);
}

static int on_child(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct child *ch = userdata;
	struct dbus_activation_state *st = ch->st;
	siginfo_t si = { 0 };
	struct starting *s;
	char text[400];

	if (waitid((idtype_t)P_PIDFD, (id_t)ch->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
		return 0;
	s = starting_find(st, ch->name);
	/*
	 * It ended before it owned its name: whatever waits for it fails,
	 * unless it exited with status 0, as a service that daemonizes does
	 * (its child takes the name): that waits on, until the activation
	 * timeout, as on dbus-daemon.
	 */
	if (s && s->pid == ch->pid && !s->owned && !(si.si_code == CLD_EXITED && si.si_status == 0)) {
		if (si.si_code == CLD_EXITED) {
			snprintf(text, sizeof(text), "Process %s exited with status %d", ch->name,
				 si.si_status);
			starting_fail(st, s, ERR("Spawn.ChildExited"), text);
		} else {
			snprintf(text, sizeof(text), "Process %s received signal %d", ch->name, si.si_status);
			starting_fail(st, s, ERR("Spawn.ChildSignaled"), text);
		}
	}
	child_free(st, ch);
	return 0;
}

/* ---- Starting, waiting, delivering ------------------------------------------ */

/* ---- systemd on this bus (--dbus-systemd-activation) --------------------- */

#define SYSTEMD_NAME	  "org.freedesktop.systemd1"
#define SYSTEMD_ACTIVATOR "org.freedesktop.systemd1.Activator"

/*
 * The ActivationRequest(unit) for s, written once when the start is asked
 * for and shown to monitors at once, as dbus-daemon shows it: before the
 * message that caused it, also while systemd is not on the bus yet. The
 * same bytes go to systemd1's owner (request_send), not shown again.
 */
static void request_write(struct dbus_activation_state *st, struct starting *s)
{
	struct dbus_front *f = st->front;
	struct dbus_header h = {
		.type = DBUS_MESSAGE_SIGNAL,
		.path = DBUS_DRIVER_PATH,
		.interface = SYSTEMD_ACTIVATOR,
		.member = "ActivationRequest",
		.destination = SYSTEMD_NAME,
		.sender = DBUS_DRIVER_NAME,
		.signature = "s",
	};
	struct dbus_writer w;
	void *body = NULL;
	size_t len = 0;

	if (s->request || dbus_writer_init(&w, "s") < 0)
		return;
	dbus_writer_append_basic(&w, 's', s->unit);
	h.serial = ++f->serial ? f->serial : ++f->serial;
	if (dbus_writer_finish(&w, &body, &len) == 0 &&
	    dbus_message_write(&h, body, len, &s->request, &s->request_len) == 0)
		dbus_monitor_driver_message(f, s->request, s->request_len);
	dbus_writer_deinit(&w);
	free(body);
}

/* That request to systemd1's owner, if it has one yet (otherwise sent when it appears). */
static void request_send(struct dbus_activation_state *st, struct starting *s)
{
	struct dbus_conn *systemd = dbus_front_conn_by_name(st->front, SYSTEMD_NAME);

	if (!systemd || s->requested)
		return;
	request_write(st, s); /* again if writing it or an earlier send failed */
	if (!s->request)
		return;
	if (dbus_conn_queue(systemd, TAKE_PTR(s->request), s->request_len, NULL, 0) == 0) {
		s->requested = true;
		log_info("D-Bus activation of %s: asked %s for %s", s->name, systemd->name, s->unit);
	}
}

/* SetEnvironment(as) to systemd, which takes no reply; destination as dbus-daemon names it. */
static int send_set_environment(struct dbus_conn *systemd, const char *destination, const void *body,
				size_t len)
{
	struct dbus_header h = {
		.type = DBUS_MESSAGE_METHOD_CALL,
		.flags = DBUS_FLAG_NO_REPLY_EXPECTED,
		.path = "/org/freedesktop/systemd1",
		.interface = "org.freedesktop.systemd1.Manager",
		.member = "SetEnvironment",
		.destination = destination,
		.signature = "as",
	};

	return dbus_conn_send_driver(systemd, &h, body, len);
}

/* The SetEnvironment calls kept while systemd was not on the bus, now that it is. */
static void send_env_updates(struct dbus_activation_state *st)
{
	struct dbus_conn *systemd = dbus_front_conn_by_name(st->front, SYSTEMD_NAME);

	while (systemd && st->env_updates) {
		struct env_update *u = st->env_updates;

		st->env_updates = u->next;
		st->n_env_updates--;
		/* as if it had waited for systemd1's activation: to the well-known name */
		(void)send_set_environment(systemd, SYSTEMD_NAME, u->body, u->len);
		free(u->body);
		free(u);
	}
}

int dbus_activation_env_forward(struct dbus_front *f, char *const *kv, size_t n)
{
	struct dbus_activation_state *st = state_get(f);
	struct dbus_conn *systemd;
	struct dbus_writer w;
	struct env_update *u, **tail;
	void *body = NULL;
	size_t len = 0;
	int r;

	if (!st)
		return -ENOMEM;
	if (!f->bus->dbus_systemd_activation)
		return 0;
	r = dbus_writer_init(&w, "as");
	if (r < 0)
		return r;
	dbus_writer_open(&w, 'a', "s");
	for (size_t i = 0; i < n; i++)
		dbus_writer_append_basic(&w, 's', kv[i]);
	dbus_writer_close(&w);
	r = dbus_writer_finish(&w, &body, &len);
	dbus_writer_deinit(&w);
	if (r < 0)
		return r;
	systemd = dbus_front_conn_by_name(f, SYSTEMD_NAME);
	if (systemd) {
		r = send_set_environment(systemd, systemd->name, body, len);
		free(body);
		return r;
	}
	if (st->n_env_updates >= ENV_UPDATES_MAX) {
		log_warning(
			"UpdateActivationEnvironment: %u updates wait for %s already, this one is dropped",
			st->n_env_updates, SYSTEMD_NAME);
		free(body);
		return 0;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		free(body);
		return -ENOMEM;
	}
	u->body = body;
	u->len = len;
	for (tail = &st->env_updates; *tail; tail = &(*tail)->next)
		;
	*tail = u;
	st->n_env_updates++;
	return 0;
}

void dbus_activation_signal(struct dbus_conn *c, const struct dbus_message *m)
{
	struct dbus_activation_state *st = c->front->activation;
	const char *unit = NULL, *error = NULL, *text = NULL;
	struct dbus_reader r;

	if (!st || !m->h.interface || strcmp(m->h.interface, SYSTEMD_ACTIVATOR) != 0 ||
	    strcmp(m->h.member, "ActivationFailure") != 0 || !m->h.signature ||
	    strcmp(m->h.signature, "sss") != 0)
		return;
	/* Only systemd says a unit failed: anybody else could fail any activation. */
	if (dbus_front_conn_by_name(c->front, SYSTEMD_NAME) != c) {
		log_debug("ActivationFailure from %s ignored: it does not own %s", c->name, SYSTEMD_NAME);
		return;
	}
	if (dbus_reader_init(&r, "sss", m->body, m->body_len, m->byte_order, m->h.n_fds) < 0 ||
	    dbus_reader_read_basic(&r, 's', &unit) < 0 || dbus_reader_read_basic(&r, 's', &error) < 0 ||
	    dbus_reader_read_basic(&r, 's', &text) < 0)
		return;
	for (struct starting *s = st->starting; s; s = s->next)
		if (s->unit && !strcmp(s->unit, unit) && !s->owned) {
			/* systemd's error as it gave it, if it is one */
			starting_fail(st, s, ctrl_name_is_valid_error(error) ? error : ERR("Spawn.Failed"),
				      text);
			return;
		}
}

/* Starts name (svc) unless it is starting already; returns it, or NULL with error and text set. */
static struct starting *start(struct dbus_activation_state *st, const struct service *svc, const char **error,
			      char *text, size_t text_len)
{
	struct dbus_front *f = st->front;
	struct starting *s = starting_find(st, svc->name);
	int r = -EOPNOTSUPP;

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(svc->name))) {
		free(s);
		s = NULL;
		*error = ERR("NoMemory");
		snprintf(text, text_len, "%s", "Out of memory");
		return NULL;
	}
	/* systemd's unit first; without one, or with no systemd to ask, the Exec= line */
	if (svc->unit && f->bus->dbus_systemd_activation)
		r = (s->unit = strdup(svc->unit)) ? 0 : -ENOMEM;
	else if (svc->unit)
		r = activation_start(f->bus, svc, text, text_len);
	*error = ERR("Spawn.ExecFailed");
	if (r < 0 && svc->exec)
		r = exec_start(st, svc, &s->pid, error, text, text_len);
	if (r < 0) {
		free(s->name);
		free(s->unit);
		free(s);
		log_warning("D-Bus activation of %s: %s", svc->name, text);
		return NULL;
	}
	s->st = st;
	if (sd_event_add_time_relative(f->event, &s->timer, CLOCK_MONOTONIC, f->bus->activation_timeout, 0,
				       on_timeout, s) < 0)
		s->timer = NULL;
	s->next = st->starting;
	st->starting = s;
	if (s->unit) {
		request_write(st, s);
		request_send(st, s);
	}
	return s;
}

static unsigned int pending_of(struct dbus_activation_state *st, struct dbus_conn *c)
{
	unsigned int n = 0;

	for (struct starting *s = st->starting; s; s = s->next)
		for (struct pending *p = s->head; p; p = p->next)
			n += p->conn == c;
	return n;
}

static int add_pending(struct dbus_activation_state *st, struct starting *s, struct dbus_conn *c,
		       const struct dbus_header *h, struct pending **ret)
{
	struct pending *p;

	if (pending_of(st, c) >= PENDING_PER_CONN_MAX)
		return -ENOBUFS;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->conn = c;
	p->type = h->type;
	p->flags = h->flags;
	p->serial = h->serial;
	if (s->tail)
		s->tail->next = p;
	else
		s->head = p;
	s->tail = p;
	*ret = p;
	return 0;
}

/* The service m would start if its destination had no owner: none for a unique name, a reply, NO_AUTO_START. */
static const struct service *service_of(struct dbus_front *f, const struct dbus_message *m)
{
	const char *dest = m->h.destination;

	if (!dest || dest[0] == ':' || (m->h.flags & DBUS_FLAG_NO_AUTO_START) ||
	    m->h.type == DBUS_MESSAGE_METHOD_RETURN || m->h.type == DBUS_MESSAGE_ERROR)
		return NULL;
	return service_set_find(f->bus->services, dest);
}

void dbus_activation_before_monitors(struct dbus_conn *c, const struct dbus_message *m)
{
	struct dbus_front *f = c->front;
	const struct service *svc = service_of(f, m);
	struct dbus_activation_state *st;
	const char *error = NULL;
	char text[512];

	/* Only a start through systemd on this bus sends anything (ActivationRequest) monitors see. */
	if (!svc || !svc->unit || !f->bus->dbus_systemd_activation ||
	    dbus_front_conn_by_name(f, m->h.destination) ||
	    registry_peer_resolve(f->bus->registry, m->h.destination) ||
	    !dbus_access_send_to_name(c, m, m->h.destination, text, sizeof(text)))
		return;
	st = state_get(f);
	/* dbus_activation_queue() finds it started when the message is routed */
	if (st)
		(void)start(st, svc, &error, text, sizeof(text));
}

int dbus_activation_queue(struct dbus_conn *c, struct dbus_message *m, int **fds)
{
	struct dbus_front *f = c->front;
	const char *dest = m->h.destination;
	const struct service *svc = service_of(f, m);
	struct dbus_activation_state *st;
	struct starting *s;
	struct pending *p;
	const char *error = NULL;
	char text[512];
	int r;

	if (!svc)
		return 0;
	/* Nobody starts what they may not send to. */
	if (!dbus_access_send_to_name(c, m, dest, text, sizeof(text))) {
		(void)dbus_driver_reply_error(c, m, ERR("AccessDenied"), text);
		return 1;
	}
	st = state_get(f);
	if (!st)
		return -ENOMEM;
	s = start(st, svc, &error, text, sizeof(text));
	if (!s) {
		(void)dbus_driver_reply_error(c, m, error, text);
		return 1;
	}
	r = add_pending(st, s, c, &m->h, &p);
	if (r < 0) {
		snprintf(text, sizeof(text), "Too many messages of %s wait for activated names", c->name);
		(void)dbus_driver_reply_error(c, m, ERR("LimitsExceeded"), text);
		return 1;
	}
	p->data = TAKE_PTR(m->data);
	p->len = m->len;
	p->fds = TAKE_PTR(*fds);
	p->n_fds = m->h.n_fds;
	return 1;
}

int dbus_activation_start_by_name(struct dbus_conn *c, const struct dbus_message *m, const char *name,
				  uint32_t *result, const char **error, char *text, size_t text_len)
{
	struct dbus_front *f = c->front;
	const struct service *svc = service_set_find(f->bus->services, name);
	struct dbus_activation_state *st;
	struct starting *s;
	struct pending *p;

	if (!svc) {
		*error = ERR("ServiceUnknown");
		snprintf(text, text_len, "The name %s was not provided by any .service files", name);
		return 1;
	}
	if (!dbus_access_send_to_name(c, NULL, name, text, text_len)) {
		*error = ERR("AccessDenied");
		return 1;
	}
	st = state_get(f);
	if (!st)
		return -ENOMEM;
	s = start(st, svc, error, text, text_len);
	if (!s)
		return 1;
	if (add_pending(st, s, c, &m->h, &p) < 0) {
		*error = ERR("LimitsExceeded");
		snprintf(text, text_len, "Too many calls of %s wait for activated names", c->name);
		return 1;
	}
	p->start = true;
	*result = 0; /* answered when the name is owned */
	return 0;
}

/* StartServiceByName's reply: 1, the name was started for it. */
static void reply_started(struct pending *p)
{
	struct dbus_header h = {
		.type = DBUS_MESSAGE_METHOD_RETURN,
		.reply_serial = p->serial,
		.signature = "u",
	};
	struct dbus_writer w;
	uint32_t one = 1;
	void *body = NULL;
	size_t len = 0;

	if (p->conn->dead || (p->flags & DBUS_FLAG_NO_REPLY_EXPECTED) || dbus_writer_init(&w, "u") < 0)
		return;
	dbus_writer_append_basic(&w, 'u', &one);
	if (dbus_writer_finish(&w, &body, &len) == 0)
		(void)dbus_conn_send_driver(p->conn, &h, body, len);
	dbus_writer_deinit(&w);
	free(body);
}

/* Later than the owner change: the RequestName that made it is answered first, then this goes on. */
static int on_deliver(sd_event_source *src, void *userdata)
{
	struct dbus_activation_state *st = userdata;

	st->deliver_src = sd_event_source_disable_unref(st->deliver_src);
	send_env_updates(st);
	for (struct starting *s = st->starting; s; s = s->next)
		if (s->unit && !s->requested)
			request_send(st, s);
	for (struct starting *s = st->starting, *next; s; s = next) {
		next = s->next;
		if (!s->owned)
			continue;
		starting_unlink(st, s);
		for (struct pending *p = s->head; p; p = p->next) {
			struct dbus_message m;

			if (p->conn->dead)
				continue;
			if (p->start) {
				reply_started(p);
				continue;
			}
			if (dbus_message_parse(&m, TAKE_PTR(p->data), p->len, p->n_fds) == 0)
				(void)dbus_conn_route(p->conn, &m, &p->fds);
			dbus_message_deinit(&m);
		}
		starting_free(s);
		/* routing may have started other names: start from the top */
		next = st->starting;
	}
	return 0;
}

void dbus_activation_owned(struct dbus_front *f, const char *name)
{
	struct dbus_activation_state *st = f->activation;
	struct starting *s = st ? starting_find(st, name) : NULL;

	/* systemd came: on_deliver asks for the units wanted before (the registry names it by then) */
	if (st && !strcmp(name, SYSTEMD_NAME) && !st->deliver_src &&
	    sd_event_add_defer(f->event, &st->deliver_src, on_deliver, st) < 0)
		st->deliver_src = NULL;
	if (!s)
		return;
	s->owned = true;
	if (!st->deliver_src && sd_event_add_defer(f->event, &st->deliver_src, on_deliver, st) < 0)
		st->deliver_src = NULL;
}

void dbus_activation_conn_gone(struct dbus_conn *c)
{
	struct dbus_activation_state *st = c->front->activation;

	if (!st)
		return;
	for (struct starting *s = st->starting; s; s = s->next) {
		struct pending **pp = &s->head;

		s->tail = NULL;
		while (*pp) {
			struct pending *p = *pp;

			if (p->conn != c) {
				s->tail = p;
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			pending_free(p);
		}
	}
}

int dbus_activation_setenv(struct dbus_front *f, const char *key, const char *value)
{
	struct dbus_activation_state *st = state_get(f);
	size_t kl = strlen(key);
	char *kv, **e;

	if (!st)
		return -ENOMEM;
	if (asprintf(&kv, "%s=%s", key, value) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_env; i++)
		if (!strncmp(st->env[i], key, kl) && st->env[i][kl] == '=') {
			free(st->env[i]);
			st->env[i] = kv;
			return 0;
		}
	e = realloc(st->env, (st->n_env + 1) * sizeof(char *));
	if (!e) {
		free(kv);
		return -ENOMEM;
	}
	st->env = e;
	st->env[st->n_env++] = kv;
	return 0;
}

bool dbus_activation_system_bus(struct dbus_front *f)
{
	struct dbus_activation_state *st = state_get(f);

	return st && st->bus_type && !strcmp(st->bus_type, "system");
}

void dbus_activation_free(struct dbus_front *f)
{
	struct dbus_activation_state *st = f->activation;

	if (!st)
		return;
	while (st->starting) {
		struct starting *s = st->starting;

		st->starting = s->next;
		starting_free(s);
	}
	/* What brokerd started keeps running, as dbus-daemon's do; only the watch ends. */
	while (st->children)
		child_free(st, st->children);
	for (size_t i = 0; i < st->n_env; i++)
		free(st->env[i]);
	free(st->env);
	while (st->env_updates) {
		struct env_update *u = st->env_updates;

		st->env_updates = u->next;
		free(u->body);
		free(u);
	}
	free(st->bus_type);
	sd_event_source_disable_unref(st->deliver_src);
	if (f->bus->activation_failed_userdata == f)
		f->bus->activation_failed = NULL;
	free(st);
	f->activation = NULL;
}
