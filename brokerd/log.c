/* SPDX-License-Identifier: MIT */
/* log.c - journal or stderr logging (see log.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <time.h>

#include "brokerd/log.h"

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

/* Send MESSAGE= and PRIORITY= plus the non-empty extra fields; false if journald is not there. */
static bool journal_send(int prio, const char *msg, const char *const *fields, size_t n_fields)
{
	char buf[8][1100];
	struct iovec iov[8];
	size_t n = 0;

	snprintf(buf[n], sizeof(buf[n]), "MESSAGE=%s", msg);
	n++;
	snprintf(buf[n], sizeof(buf[n]), "PRIORITY=%d", prio);
	n++;
	snprintf(buf[n], sizeof(buf[n]), "SYSLOG_IDENTIFIER=brokerd");
	n++;
	for (size_t i = 0; i < n_fields && n < 8; i++)
		if (fields[i]) {
			snprintf(buf[n], sizeof(buf[n]), "%s", fields[i]);
			n++;
		}
	for (size_t i = 0; i < n; i++)
		iov[i] = (struct iovec){ .iov_base = buf[i], .iov_len = strlen(buf[i]) };
	return sd_journal_sendv(iov, (int)n) >= 0;
}

void log_full(int prio, const char *peer, uid_t uid, const char *fmt, ...)
{
	char msg[1024], f_peer[64], f_uid[32];
	const char *fields[2] = { NULL, NULL };
	va_list ap;

	if (prio > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (use_journal()) {
		if (peer) {
			snprintf(f_peer, sizeof(f_peer), "BROKERD_PEER=%s", peer);
			fields[0] = f_peer;
		}
		if (uid != (uid_t)-1) {
			snprintf(f_uid, sizeof(f_uid), "BROKERD_UID=%u", uid);
			fields[1] = f_uid;
		}
		if (journal_send(prio, msg, fields, 2))
			return;
	}
	fprintf(stderr, "<%d>%s\n", prio, msg);
}

void log_quota(const char *peer, uid_t uid, const char *quota, unsigned long long used,
	       unsigned long long limit)
{
	char msg[256], f_quota[64], f_uid[32], f_peer[64];
	const char *fields[3] = { f_quota, f_uid, NULL };

	snprintf(msg, sizeof(msg), "uid %u hit quota %s (%llu of %llu used)%s%s", uid, quota, used, limit,
		 peer ? " on " : "", peer ? peer : "");
	snprintf(f_quota, sizeof(f_quota), "BROKERD_QUOTA=%s", quota);
	snprintf(f_uid, sizeof(f_uid), "BROKERD_UID=%u", uid);
	if (peer) {
		snprintf(f_peer, sizeof(f_peer), "BROKERD_PEER=%s", peer);
		fields[2] = f_peer;
	}
	if (use_journal() && journal_send(LOG_WARNING, msg, fields, 3))
		return;
	fprintf(stderr, "<%d>%s\n", LOG_WARNING, msg);
}

bool log_ratelimit_test(struct log_ratelimit *rl)
{
	struct timespec ts;
	unsigned long long now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
	if (rl->begin == 0 || now - rl->begin >= rl->interval_usec) {
		if (rl->suppressed)
			log_full(LOG_INFO, NULL, (uid_t)-1, "%lu %s message(s) suppressed in %llu s",
				 rl->suppressed, rl->what, (now - rl->begin) / 1000000ULL);
		rl->begin = now;
		rl->n = 0;
		rl->suppressed = 0;
	}
	if (rl->n < rl->burst) {
		rl->n++;
		return true;
	}
	rl->suppressed++;
	return false;
}
