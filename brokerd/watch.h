/* SPDX-License-Identifier: MIT */
/*
 * watch.h - signal watches (watch.c): a connection that asked WATCH_SIGNALS
 * is handed the signal RECV cap of every owned name it may receive from,
 * now and whenever a name gets an owner later, so that a match rule without
 * a sender sees every signal it could match.
 *
 * Below driver.c; above grant and conn.
 */
#ifndef BROKERD_WATCH_H
#define BROKERD_WATCH_H

#include "brokerd/bus-state.h"
#include "protocol/ctrl.h"

int watch_handle_watch(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
int watch_handle_unwatch(struct bus_conn *c, const struct ctrl_message *m, struct ctrl_reader *rd);
/*
 * name got an owner, a native or a D-Bus client: offer its signal channel to
 * every watcher (made for a D-Bus client's name that has none yet).
 */
void watch_name_owned(struct bus *b, const char *name);

#endif
