/* SPDX-License-Identifier: MIT */
/*
 * test-daemon.h - what brokerd's daemon test programs share: the test
 * policy, the set-up helpers (policy files, reloads, running code as alice
 * or bob) and the control-plane tests that run in both of them:
 *
 *   test-daemon (test-daemon.c)          host, meson test: its own brokerd
 *                                        --no-channels on a temp socket
 *   brokerd-daemon (test-daemon-guest.c) guest integration test: the system
 *                                        brokerd on the kernel's channels
 *
 * The helper the guest's shell tests drive is a program of its own
 * (test-daemon-helper.c). All must run as root; exit 0 pass, 77 skip, 1 fail.
 */
#ifndef BROKERD_TEST_DAEMON_H
#define BROKERD_TEST_DAEMON_H

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "brokerd/test-client.h"
#include "protocol/ioipc.h"
#include "protocol/message.h"

#define ALICE	  2001
#define BOB	  2002
#define USERS_GID 2100

/* Where the brokerd under test listens and reads its policy and services. */
extern char sock_path[256], policy_dir[256], service_dir[256];
extern bool have_channels;
/* BROKERD_TESTS_REQUIRE=1 (the project kernel): nothing may be skipped. */
extern bool require_features;
extern pid_t main_pid;
extern const char policy_file[];
extern const char base_policy[];

void write_file(const char *dir, const char *name, const char *text);
void remove_file(const char *dir, const char *name);
/* RELOAD as root; the reply must not be an error. */
void reload(void);
/* The test policy followed by extra, written and reloaded; set_policy("") restores it. */
void set_policy(const char *extra);
void become(uid_t uid);
/* Runs fn in a child as uid; the child must exit 0. */
void as_user(uid_t uid, void (*fn)(void));
/* A part that cannot run here: fails if require_features, else noted. */
void skip_part(const char *what);
/* The last part skipped, NULL if none: the program must then exit 77. */
const char *skipped_part(void);

uint64_t quota_used_of(struct tc *c, uid_t uid, const char *quota);
void expect_unsubscribe(struct tc *c, const char *name, uint32_t result);
void expect_subscribe(struct tc *c, const char *name);
void reload_deny_receive(struct tc *root, const char *name);

/* test-daemon-control.c: the control plane, in host and guest alike. */
void control_tests_run(void);
int list_pages(struct tc *c, uint16_t op, uint32_t flags, uint32_t max, char *out, size_t size,
	       uint32_t *max_names);
size_t count_words(const char *s);

/* test-daemon-flood.c: peers that flood (both) or never read (host). */
void test_flood(void);
void test_flood_disconnect(void);

/* test-daemon-limits.c: channel sizes on the kernel (guest). */
void test_channel_limits(void);

/* test-daemon-channels.c: the data plane (guest). */
uint32_t attach_cap(struct io_uring *ring, int fd, uint32_t rights);
int chan_send(struct io_uring *ring, uint32_t sub, const struct chmsg *msg);
int chan_recv(struct io_uring *ring, uint32_t sub, struct ioipc_msg_info *info, struct chmsg *msg,
	      uint8_t *buf, size_t size, int timeout_ms);
void test_channels_more(void);
void test_revocation(void);
void test_revocation_inbox(void);
void test_unsubscribe_revocation(void);
void test_pool_queued_member(void);
void test_inbox_sizes(void);

#endif
