/* SPDX-License-Identifier: MIT */
/*
 * fuzz-restart.c - libFuzzer target for the states a restart hands over
 * (restart.c's native state, dbus-restart.c's D-Bus state; the first byte
 * picks which): every check a starting brokerd makes of the bytes before
 * it touches anything. A state is refused cleanly or taken whole; nothing
 * is read outside it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "brokerd/dbus-front.h"
#include "brokerd/log.h"
#include "brokerd/restart.h"
#include "protocol/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	log_set_max_level(-1);
	if (size < 1 || size > (1 << 20))
		return 0;
	if (data[0] & 1)
		(void)dbus_front_state_check(data + 1, size - 1);
	else
		(void)restart_state_check(data + 1, size - 1);
	return 0;
}
