/* SPDX-License-Identifier: MIT */
/*
 * fuzz-bus.c - libFuzzer target for brokerd's request handling: the input is
 * a sequence of datagrams (u16 little-endian length, bytes) sent by one
 * client on a socketpair to a bus with brokerd's real channel code (on a host
 * kernel without IPC channels it runs without a data plane; in the guest it
 * mints, attaches and revokes capabilities on the kernel's channels). As the
 * protocol says, brokerd must answer every datagram with exactly one REPLY
 * or ERROR (signals may come in between) and never hang up without one: the
 * target aborts otherwise, and on any crash. Bus state (names, ids) carries
 * over between inputs, as in a long-running daemon.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokerd/bus.h"
#include "brokerd/log.h"
#include "protocol/ctrl.h"
#include "protocol/fuzz/fuzz.h"

static sd_event *event;
static struct bus *bus;

static void setup(void)
{
	static const char *const none[] = { "/nonexistent/brokerd-fuzz", NULL };
	struct bus_config config = {
		.policy_dirs = none,
		.service_dirs = none,
		.activator_path = "/nonexistent/brokerd-fuzz/activator",
		.no_channels = false, /* channels when the kernel has them */
	};

	log_set_max_level(-1);
	if (sd_event_new(&event) < 0 || bus_new(&bus, event, &config) < 0)
		abort();
}

static void run_loop(void)
{
	for (int i = 0; i < 64; i++)
		if (sd_event_run(event, 0) <= 0)
			break;
}

/*
 * Reads everything brokerd sent so far: returns how many REPLY and ERROR
 * messages (signals do not count), sets *eof when it hung up. Passed fds are
 * not taken (recv without control data: the kernel closes them).
 */
static unsigned int drain(int fd, bool *eof)
{
	static uint8_t buf[65600];
	unsigned int answers = 0;
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		if (n < 2 || buf[1] != CTRL_TYPE_SIGNAL)
			answers++;
	if (n == 0)
		*eof = true;
	return answers;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool eof = false;
	int sv[2];

	if (!bus)
		setup();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	if (bus_add_connection(bus, sv[0]) < 0) {
		close(sv[1]);
		return 0;
	}
	while (size >= 2 && !eof) {
		size_t len = (size_t)data[0] | (size_t)data[1] << 8;
		unsigned int answers;
		bool sent;

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		/* an empty datagram reads as a hangup on SOCK_SEQPACKET: not a request */
		sent = len > 0 && send(sv[1], data, len, MSG_NOSIGNAL) == (ssize_t)len;
		data += len;
		size -= len;
		run_loop();
		answers = drain(sv[1], &eof);
		if (!sent)
			continue;
		if (answers == 0) {
			fprintf(stderr, "fuzz-bus: %s without an answer to a %zu-byte request\n",
				eof ? "hung up" : "stayed silent", len);
			abort();
		}
		if (answers > 1) {
			fprintf(stderr, "fuzz-bus: %u answers to one %zu-byte request\n", answers, len);
			abort();
		}
	}
	close(sv[1]);
	run_loop();
	return 0;
}
