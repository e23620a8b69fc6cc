/* SPDX-License-Identifier: MIT */
/*
 * fake-chan.h - the test-only user-space channels of fake-chan.c: what a
 * fake broker needs to create channels and mint capabilities.
 */
#ifndef BROKERD_CLIENT_FAKE_CHAN_H
#define BROKERD_CLIENT_FAKE_CHAN_H

#include <stdint.h>

#define FAKE_MSG_MAX	8192	/* brokerd's max_msg_size */

struct fake_cap {
	uint32_t channel;
	uint32_t rights;	/* IOIPC_SUB_* */
	uint64_t badge;
};

/* IOIPC_F_BROADCAST, IOIPC_F_MULTICAST or 0 (unicast): channel id or -errno */
int fake_channel_create(unsigned int flags);
void fake_channel_destroy(int id);
/* Like a kernel DESTROY: no new messages, subscribers drain what is left. */
void fake_channel_kill(int id);
/* A capability fd (memfd) for the channel, or -errno. */
int fake_cap_mint(int channel, unsigned int rights, uint64_t badge);

#endif
