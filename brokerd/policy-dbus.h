/* SPDX-License-Identifier: MIT */
/*
 * policy-dbus.h - what brokerd makes of dbus-daemon's XML configuration
 * (dbus-config.h): its <allow>/<deny> rules as brokerd policy rules (own,
 * send, receive by name), its limits as brokerd quotas, its servicedirs as
 * activation directories. On native channels brokerd decides per name, not
 * per message, so there a rule is applied exactly, agrees with what brokerd
 * does anyway, is applied more strictly, or is not honoured. Messages on the
 * D-Bus socket pass through brokerd, which decides each one by the send and
 * receive rules as written (policy-dbus-msg.h). Every rule and element gets
 * one outcome, with the reason, through a callback (logged at load, printed
 * by --dbus-config-report): for a send or receive rule the D-Bus socket's,
 * with the native one in the text. See brokerd/README.md, "D-Bus
 * configuration".
 */
#ifndef BROKERD_POLICY_DBUS_H
#define BROKERD_POLICY_DBUS_H

#include <stdio.h>

#include "brokerd/dbus-config.h"
#include "brokerd/policy-dbus-msg.h"
#include "brokerd/policy.h"
#include "brokerd/service.h"

enum policy_dbus_outcome {
	POLICY_DBUS_APPLIED,	  /* as a brokerd rule, same meaning */
	POLICY_DBUS_BUILTIN,	  /* brokerd behaves so anyway: nothing to add */
	POLICY_DBUS_PARTLY,	  /* applied for what brokerd decides; the rest not honoured */
	POLICY_DBUS_STRICTER,	  /* a deny of part of a name's traffic applied to all of it */
	POLICY_DBUS_NOT_HONOURED, /* nothing applied */
	_POLICY_DBUS_OUTCOME_MAX,
};

const char *policy_dbus_outcome_to_string(enum policy_dbus_outcome o);

/*
 * One outcome: file:line of the element, the element as written (for rules
 * "<allow own=\"x\"/>"), and what became of it ("allow own x", or why not).
 */
typedef void (*policy_dbus_report_fn)(void *userdata, enum policy_dbus_outcome o, const char *file,
				      unsigned int line, const char *element, const char *what);

/* Outcomes counted by kind: as reported (n), and on native channels (native). */
struct policy_dbus_counts {
	unsigned int n[_POLICY_DBUS_OUTCOME_MAX];
	unsigned int native[_POLICY_DBUS_OUTCOME_MAX];
	unsigned int services, services_bad;
};

/* Appends c's rules and limits to p, reporting each through fn (may be NULL). */
int policy_dbus_apply(struct policy *p, const struct dbus_config *c, policy_dbus_report_fn fn, void *userdata,
		      struct policy_dbus_counts *counts);

/*
 * The whole load brokerd does with --dbus-config=FILE: the XML (rules first),
 * then brokerd's own policy_dirs appended (so within a context they win),
 * and the activation files of service_dirs followed by the XML's
 * servicedirs (earlier ones mask later ones), and (ret_msg, may be NULL)
 * the send and receive rules decided per message on the D-Bus socket
 * (policy-dbus-msg.h). Every outcome goes to fn.
 * On error nothing is returned and err says FILE:LINE: reason.
 */
int policy_dbus_load(const char *config, const char *const *policy_dirs, const char *const *service_dirs,
		     struct policy **ret_policy, struct service_set **ret_services, struct policy_dbus_msg **ret_msg,
		     policy_dbus_report_fn fn, void *userdata, struct policy_dbus_counts *counts, char *err,
		     size_t err_len);

/*
 * brokerd --dbus-config-report: the same load, written to f (files read,
 * settings, one line per rule, limit, element and service file with its
 * outcome, a summary). Returns 0, or negative errno after writing the error.
 */
int policy_dbus_report(FILE *f, const char *config, const char *const *policy_dirs,
		       const char *const *service_dirs);

#endif
