/* SPDX-License-Identifier: MIT */
/*
 * test-fixture.h - what the client library's tests against a bus share
 * (test-api with its fake broker, test-brokerd with the real one and an old
 * one): starting a fake broker's child, a NameOwnerChanged callback that
 * records the last change, and running the bus until such a counter reaches
 * a value. Static: each test program has its own copy of the record.
 */
#ifndef BROKERD_CLIENT_TEST_FIXTURE_H
#define BROKERD_CLIENT_TEST_FIXTURE_H

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <brokerd/brokerd.h>

#include "util/socket.h"
#include "util/test.h"

/*
 * Listens on path and forks a fake broker: the parent gets the child's pid;
 * the child gets 0 and *lfd, the listening socket to serve until killed.
 */
static inline pid_t fake_broker_fork(const char *path, int backlog, int *lfd)
{
	pid_t pid;

	*lfd = unix_listen(path, SOCK_SEQPACKET, backlog);
	ASSERT(*lfd >= 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid > 0) {
		close(*lfd);
		return pid;
	}
	/* a failing test must not leave the fake behind holding meson's pipe */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return 0;
}

/* How many NameOwnerChanged on_noc() saw, and the last one's name, old and new owner. */
static int noc_calls;
static char noc_last[3][256];

static inline int on_noc(brokerd_bus *bus, const char *name, const char *old, const char *new, void *u)
{
	noc_calls++;
	snprintf(noc_last[0], sizeof(noc_last[0]), "%s", name);
	snprintf(noc_last[1], sizeof(noc_last[1]), "%s", old);
	snprintf(noc_last[2], sizeof(noc_last[2]), "%s", new);
	return 0;
}

/* Processes bus until *count reaches want; fails the test after 200 waits of 20 ms. */
static inline void pump(brokerd_bus *bus, int *count, int want)
{
	for (int i = 0; i < 200 && *count < want; i++) {
		ASSERT(brokerd_bus_process(bus) >= 0);
		if (*count < want)
			brokerd_bus_wait(bus, 20000);
	}
	ASSERT(*count >= want);
}

#endif
