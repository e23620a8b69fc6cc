/* SPDX-License-Identifier: MIT */
/* log.c - journal or stderr logging (see log.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-journal.h>

#include "log.h"

static int max_level = LOG_INFO;

void log_set_max_level(int level)
{
	max_level = level;
}

static bool use_journal(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = getenv("JOURNAL_STREAM") != NULL;
	return cached;
}

void log_full(int prio, const char *peer, uid_t uid, const char *fmt, ...)
{
	char msg[1024], uidbuf[16] = "";
	va_list ap;

	if (prio > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (uid != (uid_t)-1)
		snprintf(uidbuf, sizeof(uidbuf), "%u", uid);
	if (use_journal() &&
	    sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", prio, "SYSLOG_IDENTIFIER=brokerd",
			    "BROKERD_PEER=%s", peer ? peer : "", "BROKERD_UID=%s", uidbuf, NULL) >= 0)
		return;
	fprintf(stderr, "<%d>%s\n", prio, msg);
}

void log_quota(const char *peer, uid_t uid, const char *quota, unsigned long long used,
	       unsigned long long limit)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "uid %u hit quota %s (%llu of %llu used)%s%s", uid, quota, used, limit,
		 peer ? " on " : "", peer ? peer : "");
	if (use_journal() &&
	    sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", LOG_WARNING, "SYSLOG_IDENTIFIER=brokerd",
			    "BROKERD_QUOTA=%s", quota, "BROKERD_UID=%u", uid, "BROKERD_PEER=%s",
			    peer ? peer : "", NULL) >= 0)
		return;
	fprintf(stderr, "<%d>%s\n", LOG_WARNING, msg);
}
