/* SPDX-License-Identifier: MIT */
/*
 * dbus-monitor.c - org.freedesktop.DBus.Monitoring.BecomeMonitor: a
 * connection that becomes a monitor loses its names, unique one included
 * (NameLost, NameOwnerChanged), and from then on receives a copy of every
 * message on the D-Bus side that one of its rules matches (no rule: all of
 * them), whoever it is for, the driver's own included; it may send nothing
 * (a message from it closes it, as for any connection without a name).
 * What brokerd carries between D-Bus and native clients (dbus-bridge.c) is
 * on the D-Bus side too: a native name's signals, native calls to D-Bus
 * names and native replies to D-Bus callers, as the D-Bus client gets
 * them; messages between native clients, which never pass through
 * brokerd, dbus-monitor-native.c watches on their channels for monitors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/bus-state.h"
#include "brokerd/dbus-front.h"
#include "brokerd/registry.h"
#include "util/macro.h"

static bool monitor_matches(struct dbus_front *f, struct dbus_conn *c, const struct dbus_match_message *mm)
{
	if (!c->matches)
		return true;
	for (struct dbus_match *x = c->matches; x; x = x->next) {
		struct dbus_match_message m = *mm;

		/* A well-known sender in a rule stands for its owner at the time (or the native name it came on). */
		if (x->rule.sender && x->rule.sender[0] != ':' && strcmp(x->rule.sender, mm->sender) != 0 &&
		    !(mm->sender_name && !strcmp(x->rule.sender, mm->sender_name))) {
			struct registry_peer *owner = registry_name_owner(f->registry, x->rule.sender);

			if (!owner || strcmp(owner->unique_name, mm->sender) != 0)
				continue;
			m.sender_name = x->rule.sender;
		}
		/*
		 * A rule's destination is met by the connection the message is
		 * for, by any name it owns (as dbus-daemon matches it), not only
		 * by the name the sender wrote.
		 */
		if (x->rule.destination && mm->destination && strcmp(x->rule.destination, mm->destination) != 0) {
			struct registry_peer *want = registry_peer_resolve(f->registry, x->rule.destination);

			if (!want || want != registry_peer_resolve(f->registry, mm->destination))
				continue;
			m.destination = x->rule.destination;
		}
		if (dbus_match_rule_matches(&x->rule, &m))
			return true;
	}
	return false;
}

/*
 * Copies of m to the monitors whose rules match. lossy: a monitor whose
 * output limits or uid's budget cannot take it (as a message it did not
 * ask for) misses it rather than being closed as a slow reader (what
 * native clients send each other may come faster than any monitor reads,
 * and nobody waits for it).
 */
static void monitor_copy(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			 const char *sender_name, bool lossy)
{
	struct dbus_match_message mm;

	if (!f->n_monitors)
		return;
	dbus_match_message_of(&mm, m, sender_name);
	for (struct dbus_conn *c = f->conns; c; c = c->next) {
		void *data;
		int *d = NULL;
		char why[192];

		if (!c->monitor || c->dead || !monitor_matches(f, c, &mm))
			continue;
		if (lossy && !dbus_conn_out_room(c, m->len, m->h.n_fds, true, why, sizeof(why)))
			continue;
		/* A message that carries fds can only go to a monitor that takes fds. */
		if (m->h.n_fds && (!fds || !c->sasl.fds_agreed))
			continue;
		data = malloc(m->len);
		if (!data)
			continue;
		memcpy(data, m->data, m->len);
		if (m->h.n_fds) {
			d = calloc(m->h.n_fds, sizeof(int));
			for (unsigned int i = 0; d && i < m->h.n_fds; i++) {
				d[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
				if (d[i] < 0) {
					while (i--)
						close(d[i]);
					free(d);
					d = NULL;
				}
			}
			if (!d) {
				free(data);
				continue;
			}
		}
		(void)dbus_conn_queue(c, data, m->len, d, m->h.n_fds);
	}
}

void dbus_monitor_message(struct dbus_front *f, const struct dbus_message *m, const int *fds)
{
	monitor_copy(f, m, fds, NULL, false);
}

void dbus_monitor_native(struct dbus_front *f, const struct dbus_message *m, const int *fds,
			 const char *sender_name)
{
	monitor_copy(f, m, fds, sender_name, false);
}

void dbus_monitor_native_copy(struct dbus_front *f, const struct dbus_message *m, const int *fds)
{
	monitor_copy(f, m, fds, NULL, true);
}

void dbus_monitor_written(struct dbus_front *f, const void *data, size_t len, const int *fds, unsigned int n_fds)
{
	struct dbus_message m;

	if (!f->n_monitors)
		return;
	if (dbus_message_parse_copy(&m, data, len, n_fds) == 0)
		monitor_copy(f, &m, fds, NULL, false);
	dbus_message_deinit(&m);
}

void dbus_monitor_driver_message(struct dbus_front *f, const void *data, size_t len)
{
	dbus_monitor_written(f, data, len, NULL, 0);
}

void dbus_monitor_become(struct dbus_conn *c, struct dbus_match *rules)
{
	struct dbus_front *f = c->front;

	while (c->matches) {
		struct dbus_match *x = c->matches;

		c->matches = x->next;
		if (x->eavesdrop)
			f->n_eavesdrop--;
		dbus_match_rule_deinit(&x->rule);
		free(x->text);
		free(x);
	}
	c->matches = rules;
	c->n_matches = 0;
	for (struct dbus_match *x = rules; x; x = x->next)
		c->n_matches++;
	c->monitor = true;
	f->n_monitors++;
	dbus_monitor_native_update(f); /* messages between native clients too, from the first monitor on */
}
