/* SPDX-License-Identifier: MIT */
/*
 * log.h - brokerd's logging: to the journal with structured fields when
 * started by systemd (JOURNAL_STREAM is set), else to stderr with <N>
 * priority prefixes. Library modules (registry, policy, quota, service)
 * never log; the bus and main do.
 */
#ifndef BROKERD_LOG_H
#define BROKERD_LOG_H

#include <stdbool.h>
#include <sys/types.h>
#include <syslog.h>

void log_set_max_level(int level);

/* peer, uid: extra fields BROKERD_PEER=, BROKERD_UID= (peer NULL / uid -1 to omit). */
void log_full(int prio, const char *peer, uid_t uid, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "uid U hit quota Q": MESSAGE_ID-less but with BROKERD_QUOTA= for journalctl filtering. */
void log_quota(const char *peer, uid_t uid, const char *quota, unsigned long long used,
	       unsigned long long limit);

/*
 * At most burst messages per interval pass (log_ratelimit_test() true); the
 * others are counted, and the first to pass in a later interval is preceded
 * by a line saying how many of what were suppressed.
 */
struct log_ratelimit {
	const char *what; /* "connection", for the summary line */
	unsigned long long interval_usec;
	unsigned int burst, n;
	unsigned long long begin;
	unsigned long suppressed;
};

bool log_ratelimit_test(struct log_ratelimit *rl);

#define log_error(...)	 log_full(LOG_ERR, NULL, (uid_t)-1, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, NULL, (uid_t)-1, __VA_ARGS__)
#define log_notice(...)	 log_full(LOG_NOTICE, NULL, (uid_t)-1, __VA_ARGS__)
#define log_info(...)	 log_full(LOG_INFO, NULL, (uid_t)-1, __VA_ARGS__)
#define log_debug(...)	 log_full(LOG_DEBUG, NULL, (uid_t)-1, __VA_ARGS__)

#endif
