/* SPDX-License-Identifier: MIT */
/*
 * test-daemon-util.c - set-up helpers of the daemon tests (see
 * test-daemon.h): the test policy, writing policy files, reloading,
 * running code as another uid, and noting what could not run.
 */
#include "brokerd/test-daemon.h"

char sock_path[256], policy_dir[256], service_dir[256];
bool have_channels, require_features;
pid_t main_pid;
const char policy_file[] = "50-brokerd-tests.conf";
static const char *skipped_what;

const char base_policy[] = "# written by brokerd's test-daemon\n"
			   "[user 2001]\n"
			   "allow own org.brokerdtest.alice.*\n"
			   "allow send org.brokerdtest.*\n"
			   "[group 2100]\n"
			   "allow receive org.brokerdtest.*\n"
			   "[user 2002]\n"
			   "deny * org.brokerdtest.*\n"
			   "allow own org.brokerdtest.bob.Allowed\n"
			   "[limits]\n"
			   "names 5\n"
			   "connections 8\n";

void write_file(const char *dir, const char *name, const char *text)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	TC_ASSERT(f);
	fputs(text, f);
	fclose(f);
	TC_ASSERT(rename(tmp, path) == 0);
}

void remove_file(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

void reload(void)
{
	struct tc c;
	struct tc_msg m;

	TC_ASSERT(tc_connect_hello(&c, sock_path, 0) == 0);
	TC_ASSERT(tc_call(&c, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);
	tc_close(&c);
}

void set_policy(const char *extra)
{
	char text[2048];

	TC_ASSERT((size_t)snprintf(text, sizeof(text), "%s%s", base_policy, extra) < sizeof(text));
	write_file(policy_dir, policy_file, text);
	reload();
}

/* Drops root for uid, with alice's supplementary group for alice. */
void become(uid_t uid)
{
	gid_t g = USERS_GID;

	TC_ASSERT(setgroups(uid == ALICE ? 1 : 0, &g) == 0);
	TC_ASSERT(setresgid(uid, uid, uid) == 0);
	TC_ASSERT(setresuid(uid, uid, uid) == 0);
}

void as_user(uid_t uid, void (*fn)(void))
{
	pid_t pid = fork();
	int status;

	TC_ASSERT(pid >= 0);
	if (pid == 0) {
		become(uid);
		fn();
		fflush(stdout);
		_exit(0);
	}
	TC_ASSERT(waitpid(pid, &status, 0) == pid);
	TC_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * A part that cannot run here. On the project's kernel (the harness sets
 * BROKERD_TESTS_REQUIRE=1) every feature is required: that fails at once.
 * Elsewhere the run goes on, and ends with exit 77 and the reason, never 0.
 */
void skip_part(const char *what)
{
	if (require_features) {
		printf("FAIL: %s, but the project kernel must have it\n", what);
		exit(1);
	}
	printf("# %s: skipped\n", what);
	skipped_what = what;
}

const char *skipped_part(void)
{
	return skipped_what;
}

/* What the uid of c uses of one quota, from QUOTA. */
uint64_t quota_used_of(struct tc *c, uid_t uid, const char *quota)
{
	struct tc_msg m;
	uint64_t used = 0, limit, found = UINT64_MAX;
	uint32_t n;

	TC_ASSERT(tc_call(c, CTRL_OP_QUOTA, &m, "u", uid) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), 1);
	TC_ASSERT_EQ(tc_read_u32(&m), uid);
	n = tc_read_u32(&m);
	for (uint32_t i = 0; i < n; i++) {
		const char *q = tc_read_string(&m);

		TC_ASSERT(ctrl_read_u64(&m.r, &used) == 0 && ctrl_read_u64(&m.r, &limit) == 0);
		if (strcmp(q, quota) == 0)
			found = used;
	}
	TC_ASSERT(found != UINT64_MAX);
	return found;
}

void expect_unsubscribe(struct tc *c, const char *name, uint32_t result)
{
	struct tc_msg m;

	TC_ASSERT(tc_call(c, CTRL_OP_UNSUBSCRIBE, &m, "s", name) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(tc_read_u32(&m), result);
}

void expect_subscribe(struct tc *c, const char *name)
{
	struct tc_msg m;

	TC_ASSERT(tc_call(c, CTRL_OP_SUBSCRIBE, &m, "s", name) == 0);
	TC_EXPECT_REPLY(&m);
	TC_ASSERT_EQ(m.n_fds, 1);
	tc_msg_close_fds(&m);
}

/* The test policy, but alice's group may no longer receive name's signals. */
void reload_deny_receive(struct tc *root, const char *name)
{
	struct tc_msg m;
	char text[1024];

	snprintf(text, sizeof(text), "%s[group 2100]\ndeny receive %s\n", base_policy, name);
	write_file(policy_dir, policy_file, text);
	TC_ASSERT(tc_call(root, CTRL_OP_RELOAD, &m, "") == 0);
	TC_EXPECT_REPLY(&m);
}
