/* SPDX-License-Identifier: MIT */
/*
 * nsview.h - how a client in a container sees the ids brokerd knows: its
 * user namespace's uid and gid maps and its place in the pid namespace
 * tree, read from /proc at HELLO, so that brokerd's answers about other
 * peers (GET_CREDENTIALS, LIST_PEERS) name them as the client would.
 *
 * A leaf module: reads /proc, knows nothing of the bus.
 */
#ifndef BROKERD_NSVIEW_H
#define BROKERD_NSVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What an id without a mapping becomes (the kernel's default overflowuid/gid). */
#define NSVIEW_OVERFLOW_ID 65534u
/* Lines of a uid_map or gid_map kept; a map with more is not translated (opaque). */
#define NSVIEW_MAP_MAX 32
/* The kernel's MAX_PID_NS_LEVEL: pid namespaces nest at most this deep. */
#define NSVIEW_LEVEL_MAX 32

struct nsview_range {
	uint32_t inside, outside, count;
};

struct nsview {
	/* The namespaces could not be read (or the process was gone): uids and
	 * gids show as the overflow id, pids as 0, except the client's own. */
	bool opaque;
	unsigned int n_uid, n_gid;
	struct nsview_range uid[NSVIEW_MAP_MAX], gid[NSVIEW_MAP_MAX];
	unsigned int level;	       /* of its pid namespace, below that of brokerd's /proc */
	pid_t self_nr;		       /* the client's pid in its own pid namespace */
	pid_t init;		       /* its pid namespace's init in brokerd's /proc; 0: not found */
	unsigned long long init_start; /* that init's start time, against pid reuse */
};

/* Parses a uid_map/gid_map text into r (at most NSVIEW_MAP_MAX lines): 0, -EINVAL or -E2BIG. */
int nsview_map_parse(const char *text, struct nsview_range *r, unsigned int *n);
/* id (in brokerd's user namespace) as seen through map r, or NSVIEW_OVERFLOW_ID. */
uint32_t nsview_map_id(const struct nsview_range *r, unsigned int n, uint32_t id);
/*
 * Parses /proc/PID/status text: NSpid (pids from the /proc's namespace down
 * to the process's own; at most NSVIEW_LEVEL_MAX + 1) and PPid. 0 or -EINVAL.
 */
int nsview_status_parse(const char *text, pid_t *nspid, unsigned int *n, pid_t *ppid);

/*
 * The view of the process pid, whose pidfd (if >= 0) is checked afterwards
 * to say that what was read was its own. *ret is NULL when the process
 * shares brokerd's view (same maps, same pid namespace): nothing to
 * translate. -ENOMEM only; anything unreadable makes an opaque view.
 */
int nsview_read(pid_t pid, int pidfd, struct nsview **ret);

/* uid, gid as the view sees them (v NULL: unchanged). */
uint32_t nsview_uid(const struct nsview *v, uint32_t uid);
uint32_t nsview_gid(const struct nsview *v, uint32_t gid);
/*
 * The running process pid (of brokerd's /proc) as the view sees it: its
 * number in the view's pid namespace when brokerd can tell that it is
 * there (the same process, or a process whose ancestry at the view's
 * level leads to the view's init), else 0. v NULL: pid.
 */
pid_t nsview_pid(const struct nsview *v, pid_t pid);
/*
 * The client's own pid as it sees it, given its pid in brokerd's /proc
 * while it runs (0: gone). A client that joined its namespace with setns
 * has no init brokerd can find, but still learns its own pid.
 */
pid_t nsview_self_pid(const struct nsview *v, pid_t pid);

#endif
