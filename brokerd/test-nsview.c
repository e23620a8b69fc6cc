/* SPDX-License-Identifier: MIT */
/*
 * test-nsview.c - host tests of nsview.c: uid_map and status parsing, ids
 * through a map (unmapped ids become the overflow id), and that brokerd's
 * own process and its children share its view (nothing to translate) while
 * a view that could not be read shows nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brokerd/nsview.h"
#include "util/test.h"

static void test_map(void)
{
	struct nsview_range r[NSVIEW_MAP_MAX];
	unsigned int n = 0;
	char big[NSVIEW_MAP_MAX * 40 + 64], *p = big;

	ASSERT(nsview_map_parse("         0          0 4294967295\n", r, &n) == 0);
	ASSERT(n == 1 && nsview_map_id(r, n, 0) == 0 && nsview_map_id(r, n, 4294967294u) == 4294967294u);

	/* an nspawn-like container: 0..65535 inside are 100000.. outside, plus one extra line */
	ASSERT(nsview_map_parse("0 100000 65536\n70000 2001 1\n", r, &n) == 0);
	ASSERT(n == 2);
	ASSERT(nsview_map_id(r, n, 100000) == 0);
	ASSERT(nsview_map_id(r, n, 100000 + 65535) == 65535);
	ASSERT(nsview_map_id(r, n, 100000 + 65536) == NSVIEW_OVERFLOW_ID);
	ASSERT(nsview_map_id(r, n, 99999) == NSVIEW_OVERFLOW_ID);
	ASSERT(nsview_map_id(r, n, 0) == NSVIEW_OVERFLOW_ID); /* root outside is nobody inside */
	ASSERT(nsview_map_id(r, n, 2001) == 70000);

	/* an empty map (a new user namespace before it is written) maps nothing */
	ASSERT(nsview_map_parse("", r, &n) == 0 && n == 0 && nsview_map_id(r, n, 5) == NSVIEW_OVERFLOW_ID);

	ASSERT(nsview_map_parse("0 1\n", r, &n) == -EINVAL);
	ASSERT(nsview_map_parse("0 1 x\n", r, &n) == -EINVAL);
	ASSERT(nsview_map_parse("0 1 2 3\n", r, &n) == -EINVAL);
	ASSERT(nsview_map_parse("0 1 4294967296\n", r, &n) == -EINVAL);
	for (int i = 0; i <= NSVIEW_MAP_MAX; i++)
		p += sprintf(p, "%d %d 1\n", i, 1000 + i);
	ASSERT(nsview_map_parse(big, r, &n) == -E2BIG);
}

static void test_status(void)
{
	pid_t nspid[NSVIEW_LEVEL_MAX + 1], ppid = 0;
	unsigned int n = 0;

	ASSERT(nsview_status_parse("Name:\tx\nPPid:\t17\nNSpid:\t4242\t12\t1\nNSsid:\t1\n", nspid, &n,
				   &ppid) == 0);
	ASSERT(n == 3 && nspid[0] == 4242 && nspid[1] == 12 && nspid[2] == 1 && ppid == 17);
	ASSERT(nsview_status_parse("PPid:\t0\nNSpid:\t1\n", nspid, &n, &ppid) == 0 && n == 1 && ppid == 0);
	ASSERT(nsview_status_parse("Name:\tx\nNSpid:\t5\n", nspid, &n, &ppid) == -EINVAL); /* no PPid */
	ASSERT(nsview_status_parse("PPid:\t1\n", nspid, &n, &ppid) == -EINVAL);		   /* no NSpid */
	ASSERT(nsview_status_parse("PPid:\t1\nNSpid:\t5 x\n", nspid, &n, &ppid) == -EINVAL);
}

static void test_views(void)
{
	struct nsview *v = (void *)1;
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	pid_t child;

	ASSERT(pidfd >= 0);
	/* this process shares its own view: nothing to translate */
	ASSERT(nsview_read(getpid(), pidfd, &v) == 0 && v == NULL);
	ASSERT(nsview_uid(NULL, 1234) == 1234 && nsview_pid(NULL, 77) == 77);

	/* a process that exited before it was read gives an opaque view */
	child = fork();
	ASSERT(child >= 0);
	if (child == 0)
		_exit(0);
	int cfd = (int)syscall(SYS_pidfd_open, child, 0);
	ASSERT(cfd >= 0);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	ASSERT(nsview_read(child, cfd, &v) == 0 && v && v->opaque);
	ASSERT(nsview_uid(v, 0) == NSVIEW_OVERFLOW_ID && nsview_gid(v, 0) == NSVIEW_OVERFLOW_ID);
	ASSERT(nsview_pid(v, getpid()) == 0 && nsview_self_pid(v, child) == 0);
	free(v);
	close(cfd);
	close(pidfd);
}

int main(void)
{
	test_map();
	test_status();
	test_views();
	printf("nsview: ok\n");
	return 0;
}
