/* SPDX-License-Identifier: MIT */
/*
 * fuzz-bus.c - libFuzzer target for brokerd's request handling: the input is
 * a sequence of datagrams (u16 little-endian length, bytes) sent by one
 * client on a socketpair to a bus with brokerd's real channel code (on a host
 * kernel without IPC channels it runs without a data plane); brokerd must
 * answer or drop each and never crash. Bus state (names, ids) carries over
 * between inputs, as in a long-running daemon.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brokerd/bus.h"
#include "brokerd/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sd_event *event;
static struct bus *bus;

static void setup(void)
{
	static const char *const none[] = { "/nonexistent/brokerd-fuzz", NULL };
	struct bus_config config = {
		.policy_dirs = none,
		.service_dirs = none,
		.activator_path = "/nonexistent/brokerd-fuzz/activator",
		.no_channels = false,	/* channels when the kernel has them */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t buf[65600];
	int sv[2];

	if (!bus)
		setup();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	if (bus_add_connection(bus, sv[0]) < 0) {
		close(sv[1]);
		return 0;
	}
	while (size >= 2) {
		size_t len = (size_t)data[0] | (size_t)data[1] << 8;

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		(void)send(sv[1], data, len, MSG_NOSIGNAL);
		data += len;
		size -= len;
		run_loop();
		while (recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
	}
	close(sv[1]);
	run_loop();
	return 0;
}
