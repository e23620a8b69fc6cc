/* SPDX-License-Identifier: MIT */
/*
 * test-dbus-daemon-cmd.c - brokerd-dbus-daemon (argv[1], running brokerd
 * argv[2] through BROKERD_PATH, unless the environment names another, such
 * as a valgrind wrapper) started as the peers' suites and GTestDBus
 * start dbus-daemon: a configuration with <listen>unix:tmpdir=DIR</listen>
 * deleted as soon as the address is printed, --print-address=FD and
 * --print-pid=FD, --nofork; then --fork, and --address with an abstract
 * socket, also with XDG_RUNTIME_DIR naming a file. Each bus is used with
 * sd-bus (Hello, ListNames, RequestName) and stopped by SIGTERM to the
 * printed pid, after which its socket and private directory are gone.
 * Then --systemd-activation with a fake systemd on the bus, as dbus's
 * test-sd-activation drives it, and last the User= of services brokerd
 * runs itself, on a system and a session bus.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/test.h"

static int n_tests;
static char tmpdir[] = "/tmp/test-dbus-daemon-cmd-XXXXXX";

static void ok(const char *what)
{
	printf("ok %d - %s\n", ++n_tests, what);
	fflush(stdout);
}

/* A line from fd (blocking), without its newline. */
static void read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);

		ASSERT(r == 1);
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
}

/* Starts the command with args (NULL-terminated); address and pid come on pipes. */
static pid_t start(const char *cmd, char *address, size_t alen, pid_t *printed_pid, const char *const *args)
{
	int pa[2], pp[2];
	char pidline[32], fa[32], fp[32];
	const char *argv[16];
	size_t n = 0;
	pid_t pid;

	ASSERT_INT(pipe(pa), ==, 0);
	ASSERT_INT(pipe(pp), ==, 0);
	snprintf(fa, sizeof(fa), "--print-address=%d", pa[1]);
	snprintf(fp, sizeof(fp), "--print-pid=%d", pp[1]);
	argv[n++] = cmd;
	for (; *args; args++)
		argv[n++] = *args;
	argv[n++] = fa;
	argv[n++] = fp;
	argv[n] = NULL;
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		close(pa[0]);
		close(pp[0]);
		execv(cmd, (char *const *)argv);
		_exit(127);
	}
	close(pa[1]);
	close(pp[1]);
	read_line(pa[0], address, alen);
	read_line(pp[0], pidline, sizeof(pidline));
	*printed_pid = atoi(pidline);
	close(pa[0]);
	close(pp[0]);
	return pid;
}

static bool list_has(char **l, const char *s)
{
	for (; l && *l; l++)
		if (!strcmp(*l, s))
			return true;
	return false;
}

/* The bus object's Features property lists feature. */
static bool has_feature(sd_bus *b, const char *feature)
{
	char **features = NULL;
	bool has;

	ASSERT_INT(sd_bus_get_property_strv(b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					    "org.freedesktop.DBus", "Features", NULL, &features),
		   >=, 0);
	has = list_has(features, feature);
	for (char **p = features; p && *p; p++)
		free(*p);
	free(features);
	return has;
}

/* Hello, ListNames (the driver and ourselves), RequestName, through sd-bus; no SystemdActivation. */
static void use_bus(const char *address)
{
	sd_bus *b = NULL;
	char **names = NULL;
	const char *unique;

	ASSERT_INT(sd_bus_new(&b), >=, 0);
	ASSERT_INT(sd_bus_set_address(b, address), >=, 0);
	ASSERT_INT(sd_bus_set_bus_client(b, 1), >=, 0);
	ASSERT_INT(sd_bus_start(b), >=, 0);
	ASSERT_INT(sd_bus_get_unique_name(b, &unique), >=, 0);
	ASSERT(!strncmp(unique, ":1.", 3));
	ASSERT_INT(sd_bus_request_name(b, "org.brokerdtest.DaemonCmd", 0), >=, 0);
	ASSERT_INT(sd_bus_list_names(b, &names, NULL), >=, 0);
	ASSERT(list_has(names, "org.freedesktop.DBus"));
	ASSERT(list_has(names, unique));
	ASSERT(list_has(names, "org.brokerdtest.DaemonCmd"));
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
	ASSERT(!has_feature(b, "SystemdActivation"));
	sd_bus_flush_close_unref(b);
}

static sd_bus *connect_to(const char *address)
{
	sd_bus *b = NULL;

	ASSERT_INT(sd_bus_new(&b), >=, 0);
	ASSERT_INT(sd_bus_set_address(b, address), >=, 0);
	ASSERT_INT(sd_bus_set_bus_client(b, 1), >=, 0);
	ASSERT_INT(sd_bus_start(b), >=, 0);
	return b;
}

static unsigned int name_signals;

/* NameLost or NameOwnerChanged about org.brokerdtest.Owner */
static int count_name_signals(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	const char *name;

	if ((sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameLost") ||
	     sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameOwnerChanged")) &&
	    sd_bus_message_read(m, "s", &name) >= 0 && !strcmp(name, "org.brokerdtest.Owner"))
		name_signals++;
	return 0;
}

/*
 * SIGTERM while clients are connected: one owns a name, others listen to
 * NameOwnerChanged and have just shut their sockets. The owner sees its
 * connection close, and no NameLost or NameOwnerChanged before (GLib's
 * name owners would take that for a refusal by a live bus); brokerd exits
 * cleanly (it once crashed dropping the others: a reap scheduled on an
 * event loop that had ended).
 */
static void stop_with_clients(const char *address, pid_t printed)
{
	sd_bus *owner = connect_to(address), *gone[8];
	int r;

	ASSERT_INT(sd_bus_request_name(owner, "org.brokerdtest.Owner", 0), >=, 0);
	for (size_t i = 0; i < ELEMENTSOF(gone); i++) {
		gone[i] = connect_to(address);
		ASSERT_INT(sd_bus_match_signal(gone[i], NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					       "org.freedesktop.DBus", "NameOwnerChanged", NULL, NULL),
			   >=, 0);
	}
	/* the owner is accepted last, so brokerd frees it first */
	sd_bus_flush_close_unref(owner);
	owner = connect_to(address);
	ASSERT_INT(sd_bus_match_signal(owner, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				       "org.freedesktop.DBus", "NameOwnerChanged", NULL, NULL),
		   >=, 0);
	ASSERT_INT(sd_bus_request_name(owner, "org.brokerdtest.Owner", 0), >=, 0);
	while (sd_bus_process(owner, NULL) > 0)
		; /* what came before the stop */
	ASSERT_INT(sd_bus_add_filter(owner, NULL, count_name_signals, NULL), >=, 0);
	for (size_t i = 0; i < ELEMENTSOF(gone); i++)
		ASSERT_INT(shutdown(sd_bus_get_fd(gone[i]), SHUT_RDWR), ==, 0);
	ASSERT_INT(kill(printed, SIGTERM), ==, 0);
	for (;;) {
		r = sd_bus_process(owner, NULL);
		if (r < 0)
			break;
		if (r == 0 && sd_bus_wait(owner, 5000000) <= 0)
			break;
	}
	ASSERT(r < 0); /* the connection closed */
	ASSERT_INT(name_signals, ==, 0);
	for (size_t i = 0; i < ELEMENTSOF(gone); i++)
		sd_bus_close_unref(gone[i]);
	sd_bus_close_unref(owner);
}

/* The next message to b that is not the driver's NameAcquired/NameLost (5 s at most). */
static sd_bus_message *next_message(sd_bus *b)
{
	for (int i = 0; i < 500; i++) {
		sd_bus_message *m = NULL;
		int r = sd_bus_process(b, &m);

		ASSERT(r >= 0);
		if (m && !sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameAcquired") &&
		    !sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameLost"))
			return m;
		sd_bus_message_unref(m);
		if (r == 0)
			ASSERT(sd_bus_wait(b, 10000) >= 0);
	}
	ASSERT(!"no message within 5 s");
	return NULL;
}

/* systemd (the owner of org.freedesktop.systemd1) is asked for unit by a signal from the driver. */
static void expect_request(sd_bus *systemd, const char *unit)
{
	sd_bus_message *m = next_message(systemd);
	const char *s;

	ASSERT(sd_bus_message_is_signal(m, "org.freedesktop.systemd1.Activator", "ActivationRequest"));
	ASSERT_STR(sd_bus_message_get_sender(m), "org.freedesktop.DBus");
	ASSERT_STR(sd_bus_message_get_destination(m), "org.freedesktop.systemd1");
	ASSERT_STR(sd_bus_message_get_path(m), "/org/freedesktop/DBus");
	ASSERT_INT(sd_bus_message_read(m, "s", &s), >=, 0);
	ASSERT_STR(s, unit);
	sd_bus_message_unref(m);
}

/* systemd gets SetEnvironment(as) from the driver, with no reply wanted, addressed to destination. */
static void expect_set_environment(sd_bus *systemd, const char *destination, const char *kv)
{
	sd_bus_message *m = next_message(systemd);
	char **env = NULL;

	ASSERT(sd_bus_message_is_method_call(m, "org.freedesktop.systemd1.Manager", "SetEnvironment"));
	ASSERT_STR(sd_bus_message_get_sender(m), "org.freedesktop.DBus");
	ASSERT_STR(sd_bus_message_get_destination(m), destination);
	ASSERT_STR(sd_bus_message_get_path(m), "/org/freedesktop/systemd1");
	ASSERT(!sd_bus_message_get_expect_reply(m));
	ASSERT_INT(sd_bus_message_read_strv(m, &env), >=, 0);
	if (kv) {
		ASSERT(env && env[0] && !env[1]);
		ASSERT_STR(env[0], kv);
	} else {
		ASSERT(!env || !env[0]);
	}
	for (char **p = env; p && *p; p++)
		free(*p);
	free(env);
	sd_bus_message_unref(m);
}

static void update_environment(sd_bus *b, unsigned int n, const char *key, const char *value)
{
	ASSERT_INT(n ? sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					  "org.freedesktop.DBus", "UpdateActivationEnvironment", NULL, NULL,
					  "a{ss}", 1, key, value) :
		       sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					  "org.freedesktop.DBus", "UpdateActivationEnvironment", NULL, NULL,
					  "a{ss}", 0),
		   >=, 0);
}

static void activation_failure(sd_bus *b, const char *unit, const char *error)
{
	sd_bus_message *m = NULL;

	ASSERT_INT(sd_bus_message_new_signal(b, &m, "/org/freedesktop/systemd1",
					     "org.freedesktop.systemd1.Activator", "ActivationFailure"),
		   >=, 0);
	ASSERT_INT(sd_bus_message_set_destination(m, "org.freedesktop.DBus"), >=, 0);
	ASSERT_INT(sd_bus_message_append(m, "sss", unit, error, "it failed"), >=, 0);
	ASSERT_INT(sd_bus_send(b, m, NULL), >=, 0);
	sd_bus_message_unref(m);
}

/* The service file of org.brokerdtest.SdN, whose unit is dbus-org.brokerdtest.SdN.service. */
static void write_service(const char *file, int n)
{
	FILE *f = fopen(file, "we");

	ASSERT(f);
	fprintf(f,
		"[D-BUS Service]\nName=org.brokerdtest.Sd%d\nExec=/bin/false\n"
		"SystemdService=dbus-org.brokerdtest.Sd%d.service\n",
		n, n);
	ASSERT_INT(fclose(f), ==, 0);
}

static char call_error[256];

static int on_call_reply(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
	const sd_bus_error *err = sd_bus_message_get_error(m);

	snprintf(call_error, sizeof(call_error), "%s", err ? err->name : "(none)");
	return 0;
}

/*
 * --systemd-activation: a unicast signal to an activatable name with
 * SystemdService= makes an ActivationRequest, held back until somebody owns
 * org.freedesktop.systemd1; the signal reaches the name once it is owned.
 * A call to another such name: ActivationFailure from a connection that is
 * not systemd is ignored, systemd's fails the call with its error.
 * UpdateActivationEnvironment is passed on as SetEnvironment: kept for
 * org.freedesktop.systemd1 before it is owned, to its owner after. The
 * transient services directory ($XDG_RUNTIME_DIR/dbus-1/services) is made
 * at start and a file put there is activatable after ReloadConfig.
 */
static void test_systemd_activation(const char *cmd)
{
	char config[300], dir[300], file[400], address[400], arg[400];
	sd_bus *caller, *systemd, *activated;
	sd_bus_message *m = NULL;
	sd_bus_slot *slot = NULL;
	const char *unique;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	pid_t pid, printed;
	int status;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/sd-services", tmpdir);
	ASSERT_INT(mkdir(dir, 0755), ==, 0);
	for (int i = 1; i <= 2; i++) {
		snprintf(file, sizeof(file), "%s/org.brokerdtest.Sd%d.service", dir, i);
		write_service(file, i);
	}
	snprintf(config, sizeof(config), "%s/sd.conf", tmpdir);
	f = fopen(config, "we");
	ASSERT(f);
	fprintf(f,
		"<busconfig><listen>unix:tmpdir=%s</listen><servicedir>%s</servicedir><standard_session_servicedirs/>"
		"<policy context=\"default\"><allow send_destination=\"*\"/><allow receive_sender=\"*\"/><allow own=\"*\"/>"
		"</policy>"
		"</busconfig>\n",
		tmpdir, dir);
	ASSERT_INT(fclose(f), ==, 0);
	snprintf(arg, sizeof(arg), "--config-file=%s", config);
	pid = start(cmd, address, sizeof(address), &printed,
		    (const char *const[]){ arg, "--nofork", "--systemd-activation", NULL });

	caller = connect_to(address);
	ASSERT(has_feature(caller, "SystemdActivation"));
	update_environment(caller, 0, NULL, NULL);
	ASSERT_INT(sd_bus_message_new_signal(caller, &m, "/foo", "org.brokerdtest.I", "Unicast"), >=, 0);
	ASSERT_INT(sd_bus_message_set_destination(m, "org.brokerdtest.Sd1"), >=, 0);
	ASSERT_INT(sd_bus_send(caller, m, NULL), >=, 0);
	m = sd_bus_message_unref(m);
	ASSERT_INT(sd_bus_flush(caller), >=, 0);
	usleep(100000); /* brokerd has it, with nobody to ask yet */
	systemd = connect_to(address);
	ASSERT_INT(sd_bus_request_name(systemd, "org.freedesktop.systemd1", 0), >=, 0);
	expect_set_environment(systemd, "org.freedesktop.systemd1", NULL);
	expect_request(systemd, "dbus-org.brokerdtest.Sd1.service");
	activated = connect_to(address);
	ASSERT_INT(sd_bus_request_name(activated, "org.brokerdtest.Sd1", 0), >=, 0);
	m = next_message(activated);
	ASSERT(sd_bus_message_is_signal(m, "org.brokerdtest.I", "Unicast"));
	ASSERT_STR(sd_bus_message_get_destination(m), "org.brokerdtest.Sd1");
	m = sd_bus_message_unref(m);
	ok("--systemd-activation: Features has SystemdActivation; a unicast signal asks for the unit "
	   "(ActivationRequest) once "
	   "org.freedesktop.systemd1 is owned, and reaches the name when it is owned");

	ASSERT_INT(sd_bus_call_method_async(caller, &slot, "org.brokerdtest.Sd2", "/foo", "org.brokerdtest.I",
					    "Call", on_call_reply, NULL, ""),
		   >=, 0);
	expect_request(systemd, "dbus-org.brokerdtest.Sd2.service");
	activation_failure(caller, "dbus-org.brokerdtest.Sd2.service", "org.brokerdtest.Malice");
	/* the driver has read the malicious signal once it answers the next call */
	ASSERT_INT(sd_bus_call_method(caller, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				      "org.freedesktop.DBus", "GetId", NULL, NULL, ""),
		   >=, 0);
	activation_failure(systemd, "dbus-org.brokerdtest.Sd2.service", "org.brokerdtest.Nope");
	ASSERT_INT(sd_bus_flush(systemd), >=, 0);
	for (int i = 0; i < 500 && !call_error[0]; i++)
		if (sd_bus_process(caller, NULL) == 0)
			ASSERT(sd_bus_wait(caller, 10000) >= 0);
	ASSERT_STR(call_error, "org.brokerdtest.Nope");
	ok("ActivationFailure fails the call with systemd's error; from anybody else it is ignored");

	update_environment(caller, 1, "Key1", "Value1");
	ASSERT_INT(sd_bus_get_unique_name(systemd, &unique), >=, 0);
	expect_set_environment(systemd, unique, "Key1=Value1");
	ok("UpdateActivationEnvironment: SetEnvironment to org.freedesktop.systemd1 once owned "
	   "(kept until then), to its unique name when it is on the bus");

	ASSERT_INT(sd_bus_call_method(caller, "org.brokerdtest.Sd3", "/foo", "org.brokerdtest.I", "Call", &e,
				      NULL, ""),
		   <, 0);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.ServiceUnknown"));
	sd_bus_error_free(&e);
	snprintf(file, sizeof(file), "%s/dbus-1/services/org.brokerdtest.Sd3.service", tmpdir);
	write_service(file, 3); /* the directory is there: brokerd-dbus-daemon made it */
	ASSERT_INT(sd_bus_call_method(caller, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				      "org.freedesktop.DBus", "ReloadConfig", NULL, NULL, ""),
		   >=, 0);
	m = sd_bus_message_unref(m);
	ASSERT_INT(sd_bus_message_new_method_call(caller, &m, "org.brokerdtest.Sd3", "/foo",
						  "org.brokerdtest.I", "Call"),
		   >=, 0);
	ASSERT_INT(sd_bus_send(caller, m, NULL), >=, 0);
	m = sd_bus_message_unref(m);
	expect_request(systemd, "dbus-org.brokerdtest.Sd3.service");
	ASSERT_INT(unlink(file), ==, 0);
	snprintf(file, sizeof(file), "%s/dbus-1/services", tmpdir);
	ASSERT_INT(rmdir(file), ==, 0);
	snprintf(file, sizeof(file), "%s/dbus-1", tmpdir);
	ASSERT_INT(rmdir(file), ==, 0);
	ok("<standard_session_servicedirs/>: $XDG_RUNTIME_DIR/dbus-1/services made at start, "
	   "a service file put there found by ReloadConfig");

	sd_bus_slot_unref(slot);
	sd_bus_flush_close_unref(activated);
	sd_bus_flush_close_unref(systemd);
	sd_bus_flush_close_unref(caller);
	ASSERT_INT(kill(printed, SIGTERM), ==, 0);
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	for (int i = 1; i <= 2; i++) {
		snprintf(file, sizeof(file), "%s/org.brokerdtest.Sd%d.service", dir, i);
		unlink(file);
	}
	unlink(config);
	ASSERT_INT(rmdir(dir), ==, 0);
}

/* What brokerd runs for test_user()'s names (--activated NAME): takes NAME, stays until the bus goes. */
static int activated_main(const char *name)
{
	const char *a = getenv("DBUS_STARTER_ADDRESS");
	sd_bus *b = NULL;

	if (!a || sd_bus_new(&b) < 0 || sd_bus_set_address(b, a) < 0 || sd_bus_set_bus_client(b, 1) < 0 ||
	    sd_bus_start(b) < 0)
		return 2;
	if (sd_bus_request_name(b, name, 0) < 0)
		return 3;
	for (int i = 0; i < 600; i++) {
		int r = sd_bus_process(b, NULL);

		if (r < 0)
			return 0; /* the bus went: so do we */
		if (r == 0)
			(void)sd_bus_wait(b, 100000);
	}
	return 0;
}

static void write_user_service(const char *dir, const char *name, const char *user, const char *self)
{
	char file[400];
	FILE *f;

	snprintf(file, sizeof(file), "%s/%s.service", dir, name);
	f = fopen(file, "we");
	ASSERT(f);
	if (user)
		fprintf(f, "[D-BUS Service]\nName=%s\nUser=%s\nExec='%s' --activated %s\n", name, user, self, name);
	else
		fprintf(f, "[D-BUS Service]\nName=%s\nExec='%s' --activated %s\n", name, self, name);
	ASSERT_INT(fclose(f), ==, 0);
}

/* StartServiceByName(name): its answer (1: started), or 0 with e set. */
static uint32_t start_service(sd_bus *b, const char *name, sd_bus_error *e)
{
	sd_bus_message *reply = NULL;
	uint32_t u = 0;

	if (sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
			       "StartServiceByName", e, &reply, "su", name, 0U) < 0)
		return 0;
	ASSERT_INT(sd_bus_message_read(reply, "u", &u), >=, 0);
	sd_bus_message_unref(reply);
	return u;
}

static uid_t owner_uid(sd_bus *b, const char *name)
{
	sd_bus_message *reply = NULL;
	uint32_t uid = 0;

	ASSERT_INT(sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
				      "GetConnectionUnixUser", NULL, &reply, "s", name),
		   >=, 0);
	ASSERT_INT(sd_bus_message_read(reply, "u", &uid), >=, 0);
	sd_bus_message_unref(reply);
	return (uid_t)uid;
}

#define AS_NOBODY "org.brokerdtest.AsNobody"
#define NO_USER	  "org.brokerdtest.NoUser"
#define NO_USER_KEY "org.brokerdtest.NoUserKey"
#define MISSING	  "org.brokerdtest.Missing"
#define NOT_EXEC  "org.brokerdtest.NotExecutable"

static void write_exec_service(const char *dir, const char *name, const char *exec)
{
	char file[400];
	FILE *f;

	snprintf(file, sizeof(file), "%s/%s.service", dir, name);
	f = fopen(file, "we");
	ASSERT(f);
	fprintf(f, "[D-BUS Service]\nName=%s\nUser=nobody\nExec=%s --activated %s\n", name, exec, name);
	ASSERT_INT(fclose(f), ==, 0);
}

/*
 * An Exec= that cannot be executed (no such file; a file without x
 * permission) fails the activation with Spawn.ExecFailed and the execve()'s
 * reason, as dbus-daemon answers, not with Spawn.ChildExited.
 */
static void check_exec_failed(sd_bus *b, const char *name, const char *reason)
{
	sd_bus_error e = SD_BUS_ERROR_NULL;

	ASSERT_INT(start_service(b, name, &e), ==, 0);
	if (!sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.Spawn.ExecFailed"))
		fprintf(stderr, "# %s: %s: %s\n", name, e.name, e.message);
	ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.Spawn.ExecFailed"));
	ASSERT(strstr(e.message, reason));
	sd_bus_error_free(&e);
}

/*
 * User= of a service that brokerd runs itself (Exec=, no systemd). On a
 * system bus (a configuration that names a <servicehelper>, as system.conf
 * does) root's brokerd runs it as that user, and a user that does not
 * exist fails the activation with Spawn.SetupFailed, as dbus-daemon's
 * helper fails it; a brokerd that is not root cannot change users and runs
 * both as itself. On a session bus (no <servicehelper>) User= means
 * nothing, as on dbus-daemon: both run as the bus's user.
 */
static void test_user(const char *cmd, const char *self)
{
	struct passwd *pw = getpwnam("nobody");
	uid_t nobody;

	ASSERT(pw);
	nobody = pw->pw_uid;
	for (int system = 1; system >= 0; system--) {
		char config[300], dir[300], file[400], address[400], arg[400], abstract[96];
		sd_bus_error e = SD_BUS_ERROR_NULL;
		bool root = geteuid() == 0;
		pid_t pid, printed;
		int status;
		sd_bus *b;
		FILE *f;

		snprintf(dir, sizeof(dir), "%s/user-services-%d", tmpdir, system);
		ASSERT_INT(mkdir(dir, 0755), ==, 0);
		write_user_service(dir, AS_NOBODY, "nobody", self);
		write_user_service(dir, NO_USER, "brokerd-test-no-such-user", self);
		write_user_service(dir, NO_USER_KEY, NULL, self);
		write_exec_service(dir, MISSING, "/nonexistent/brokerd-test-missing");
		snprintf(file, sizeof(file), "%s/not-executable", dir);
		f = fopen(file, "we");
		ASSERT(f);
		fputs("#!/bin/sh\nexit 0\n", f);
		ASSERT_INT(fclose(f), ==, 0);
		ASSERT_INT(chmod(file, 0644), ==, 0);
		write_exec_service(dir, NOT_EXEC, file);
		snprintf(config, sizeof(config), "%s/user-%d.conf", tmpdir, system);
		f = fopen(config, "we");
		ASSERT(f);
		fprintf(f,
			"<busconfig><listen>unix:tmpdir=%s</listen>%s<servicedir>%s</servicedir>"
			"<policy context=\"default\"><allow send_destination=\"*\"/><allow receive_sender=\"*\"/>"
			"<allow own=\"*\"/></policy></busconfig>\n",
			tmpdir,
			system ? "<servicehelper>/usr/lib/dbus-1.0/dbus-daemon-launch-helper</servicehelper>" : "",
			dir);
		ASSERT_INT(fclose(f), ==, 0);
		snprintf(arg, sizeof(arg), "--config-file=%s", config);
		/* abstract: the service, maybe another user, reaches it whatever tmpdir's mode */
		snprintf(abstract, sizeof(abstract), "--address=unix:abstract=test-dbus-daemon-cmd-user-%d-%d",
			 (int)getpid(), system);
		pid = start(cmd, address, sizeof(address), &printed,
			    (const char *const[]){ arg, "--nofork", abstract, NULL });
		b = connect_to(address);
		/*
		 * Gone before the first activation, as GTestDBus removes its
		 * configuration once the bus is up: what it said (a
		 * <servicehelper> or not) must still decide User=.
		 */
		ASSERT_INT(unlink(config), ==, 0);

		ASSERT_INT(start_service(b, AS_NOBODY, &e), ==, 1);
		ASSERT_INT(owner_uid(b, AS_NOBODY), ==, system && root ? nobody : geteuid());
		if (system && root) {
			ASSERT_INT(start_service(b, NO_USER, &e), ==, 0);
			ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.Spawn.SetupFailed"));
			ASSERT(strstr(e.message, "'brokerd-test-no-such-user'"));
			sd_bus_error_free(&e);
			ok("system bus (<servicehelper>), brokerd root: the service runs as its User=; "
			   "a User= nobody has fails the activation with Spawn.SetupFailed");
		} else {
			ASSERT_INT(start_service(b, NO_USER, &e), ==, 1);
			ASSERT_INT(owner_uid(b, NO_USER), ==, geteuid());
			ok(system ? "system bus, brokerd not root: User= cannot be honoured, the services run "
				    "as brokerd" :
				    "session bus (no <servicehelper>): User= means nothing, as on dbus-daemon; "
				    "the services run as the bus's user");
		}

		/*
		 * No User=: dbus-daemon's launch helper exits 1 for that
		 * ("No "User" key"), answered as Spawn.ChildExited; on a
		 * session bus the file is fine.
		 */
		if (system) {
			ASSERT_INT(start_service(b, NO_USER_KEY, &e), ==, 0);
			if (!sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.Spawn.ChildExited"))
				fprintf(stderr, "# %s: %s: %s\n", NO_USER_KEY, e.name, e.message);
			ASSERT(sd_bus_error_has_name(&e, "org.freedesktop.DBus.Error.Spawn.ChildExited"));
			ASSERT(strstr(e.message, "no User="));
			sd_bus_error_free(&e);
			ok("system bus (<servicehelper>): a service file with Exec= and no User= is refused with "
			   "Spawn.ChildExited, as dbus-daemon's launch helper refuses it");
		} else {
			ASSERT_INT(start_service(b, NO_USER_KEY, &e), ==, 1);
			ASSERT_INT(owner_uid(b, NO_USER_KEY), ==, geteuid());
			ok("session bus: a service file without User= runs as the bus's user");
		}
		check_exec_failed(b, MISSING, strerror(ENOENT));
		check_exec_failed(b, NOT_EXEC, strerror(EACCES));
		ok(system ? "system bus: an Exec= missing or not executable fails with Spawn.ExecFailed" :
			    "session bus: an Exec= missing or not executable fails with Spawn.ExecFailed");

		sd_bus_flush_close_unref(b);
		ASSERT_INT(kill(printed, SIGTERM), ==, 0);
		ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
		ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		for (int i = 0; i < 5; i++) {
			const char *n = (const char *[]){ AS_NOBODY, NO_USER, NO_USER_KEY, MISSING, NOT_EXEC }[i];

			snprintf(file, sizeof(file), "%s/%s.service", dir, n);
			ASSERT_INT(unlink(file), ==, 0);
		}
		snprintf(file, sizeof(file), "%s/not-executable", dir);
		ASSERT_INT(unlink(file), ==, 0);
		ASSERT_INT(rmdir(dir), ==, 0);
	}
}

static unsigned int count_private_dirs(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	unsigned int n = 0;

	ASSERT(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "brokerd-dbus-daemon.", 20))
			n++;
	closedir(d);
	return n;
}

static bool gone(pid_t pid)
{
	for (int i = 0; i < 500; i++) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		usleep(10000);
	}
	return false;
}

int main(int argc, char **argv)
{
	char config[300], address[400], arg[400], abstract[64];
	const char *socket_path;
	struct rlimit ours, low, theirs;
	pid_t pid, printed;
	int status;
	FILE *f;

	if (argc == 3 && !strcmp(argv[1], "--activated"))
		return activated_main(argv[2]);
	ASSERT(argc == 3);
	setenv("BROKERD_PATH", argv[2], 0);
	ASSERT(mkdtemp(tmpdir));
	setenv("XDG_RUNTIME_DIR", tmpdir, 1); /* where the private directories go */

	/* GTestDBus's configuration, as it writes it */
	snprintf(config, sizeof(config), "%s/bus.conf", tmpdir);
	f = fopen(config, "we");
	ASSERT(f);
	fprintf(f,
		"<busconfig>\n  <type>session</type>\n  <listen>unix:tmpdir=%s</listen>\n"
		"  <policy context=\"default\">\n    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
		"    <allow eavesdrop=\"true\"/>\n    <allow own=\"*\"/>\n  </policy>\n</busconfig>\n",
		tmpdir);
	ASSERT_INT(fclose(f), ==, 0);
	snprintf(arg, sizeof(arg), "--config-file=%s", config);
	/* started with a low soft fd limit, which the bus raises (libdbus's /fd-limit reads it) */
	ASSERT_INT(getrlimit(RLIMIT_NOFILE, &ours), ==, 0);
	low = ours;
	if (low.rlim_max > 512)
		low.rlim_cur = 512;
	ASSERT_INT(setrlimit(RLIMIT_NOFILE, &low), ==, 0);
	pid = start(argv[1], address, sizeof(address), &printed,
		    (const char *const[]){ arg, "--nofork", NULL });
	ASSERT_INT(setrlimit(RLIMIT_NOFILE, &ours), ==, 0);
	ASSERT_INT(prlimit(printed, RLIMIT_NOFILE, NULL, &theirs), ==, 0);
	ASSERT(theirs.rlim_cur == ours.rlim_max || (getuid() == 0 && theirs.rlim_cur >= 65536));
	ASSERT_INT(unlink(config), ==, 0); /* as GTestDBus does, at once */
	printf("# address %s, pid %d\n", address, (int)printed);
	ASSERT(!strncmp(address, "unix:path=", 10));
	socket_path = address + 10;
	ASSERT(!strncmp(socket_path, tmpdir, strlen(tmpdir)));
	ASSERT_INT(printed, ==, pid);
	ASSERT_INT(count_private_dirs(), ==, 1);
	use_bus(address);
	stop_with_clients(address, printed);
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT(access(socket_path, F_OK) < 0);
	ASSERT_INT(count_private_dirs(), ==, 0);
	ok("--config-file (tmpdir listen, file deleted at once) --nofork: Hello, ListNames, RequestName; "
	   "the printed pid's fd limit raised; SIGTERM to the printed pid with clients connected: exit 0, "
	   "cleaned up");

	/* --fork and --address: the command returns once the bus is up, the daemon is another pid */
	f = fopen(config, "we");
	ASSERT(f);
	fputs("<busconfig><type>session</type><listen>unix:path=/nonexistent/never</listen>"
	      "<policy context=\"default\"><allow own=\"*\"/><allow send_destination=\"*\"/></policy>"
	      "</busconfig>\n",
	      f);
	ASSERT_INT(fclose(f), ==, 0);
	/* '=' in the name: the printed address escapes it (%3d), as clients parse addresses */
	snprintf(abstract, sizeof(abstract), "--address=unix:abstract=test-dbus-daemon-cmd=%d",
		 (int)getpid());
	pid = start(argv[1], address, sizeof(address), &printed,
		    (const char *const[]){ arg, "--fork", abstract, NULL });
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT(printed != pid);
	ASSERT(!strncmp(address, "unix:abstract=test-dbus-daemon-cmd%3d", 37));
	use_bus(address);
	ASSERT_INT(kill(printed, SIGTERM), ==, 0);
	ASSERT(gone(printed));
	ASSERT_INT(count_private_dirs(), ==, 0);
	ok("--fork --address=unix:abstract=: returns when the bus is up; the printed pid is the bus; "
	   "the address printed escaped");

	/* XDG_RUNTIME_DIR naming a file (GLib's gdbus-method-invocation): the private directory goes to /tmp */
	setenv("XDG_RUNTIME_DIR", config, 1);
	pid = start(argv[1], address, sizeof(address), &printed,
		    (const char *const[]){ arg, "--fork", abstract, NULL });
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	use_bus(address);
	ASSERT_INT(kill(printed, SIGTERM), ==, 0);
	ASSERT(gone(printed));
	setenv("XDG_RUNTIME_DIR", tmpdir, 1);
	ok("XDG_RUNTIME_DIR not a directory: the bus starts all the same");

	/* a configuration brokerd cannot read: an error, nothing printed, nothing left */
	f = fopen(config, "we");
	ASSERT(f);
	fputs("<busconfig><listen>unix:tmpdir=/tmp</listen><nonsense/></busconfig>\n", f);
	ASSERT_INT(fclose(f), ==, 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		execl(argv[1], argv[1], arg, "--print-address", (char *)NULL);
		_exit(127);
	}
	ASSERT_INT(waitpid(pid, &status, 0), ==, pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	ASSERT_INT(count_private_dirs(), ==, 0);
	ok("an unreadable configuration: exit status 1");

	unlink(config);
	test_systemd_activation(argv[1]);
	{
		char self[300] = "";

		ASSERT(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
		test_user(argv[1], self);
	}
	ASSERT_INT(rmdir(tmpdir), ==, 0);
	printf("1..%d\n", n_tests);
	return 0;
}
