/* SPDX-License-Identifier: MIT */
/*
 * nsview.c - a client's view of ids from inside its namespaces (see
 * nsview.h and README.md, "Containers"). Everything comes from world-
 * readable /proc files (uid_map, gid_map, status, stat): brokerd has no
 * capabilities, so it cannot open another uid's /proc/PID/ns/ links.
 *
 * Which pid namespace a process is in is not readable that way, only how
 * deep it is (the length of NSpid). Two sibling containers are equally
 * deep, so a pid is only shown to a client when brokerd can tell the
 * target is in the client's namespace, by the kernel's rules for parents:
 * a child's pid namespace is its parent's or a descendant of it (clone,
 * unshare and setns only go down, and an orphan's new parent is a reaper
 * in its old parent's namespace). So a parent at the same depth is in the
 * same namespace, and the first ancestor at depth L is in the namespace
 * that contains the target at depth L. Following parents at the client's
 * depth up to the pid 1 there names that namespace by its init; the
 * client's init was found the same way at HELLO. A chain that leaves the
 * depth before reaching a pid 1 (a process that joined with setns) proves
 * nothing, and the pid is not shown.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd/nsview.h"

/* Parents followed at most, per walk: a bound for a loop over live data. */
#define WALK_MAX 4096

int nsview_map_parse(const char *text, struct nsview_range *r, unsigned int *n)
{
	const char *p = text;
	unsigned int k = 0;

	for (;;) {
		unsigned long long in, out, count;
		char *end;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		errno = 0;
		in = strtoull(p, &end, 10);
		if (end == p)
			return -EINVAL;
		p = end;
		out = strtoull(p, &end, 10);
		if (end == p)
			return -EINVAL;
		p = end;
		count = strtoull(p, &end, 10);
		if (end == p || errno || in > UINT32_MAX || out > UINT32_MAX || count > UINT32_MAX)
			return -EINVAL;
		p = end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n')
			p++;
		else if (*p)
			return -EINVAL;
		if (k == NSVIEW_MAP_MAX)
			return -E2BIG;
		r[k++] = (struct nsview_range){ (uint32_t)in, (uint32_t)out, (uint32_t)count };
	}
	*n = k;
	return 0;
}

uint32_t nsview_map_id(const struct nsview_range *r, unsigned int n, uint32_t id)
{
	for (unsigned int i = 0; i < n; i++)
		if (id >= r[i].outside && (uint64_t)id - r[i].outside < r[i].count)
			return r[i].inside + (id - r[i].outside);
	return NSVIEW_OVERFLOW_ID;
}

int nsview_status_parse(const char *text, pid_t *nspid, unsigned int *n, pid_t *ppid)
{
	const char *l;
	unsigned int k = 0;
	bool have_ppid = false;

	for (l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, "PPid:", 5) == 0) {
			*ppid = (pid_t)strtol(l + 5, NULL, 10);
			have_ppid = true;
		} else if (strncmp(l, "NSpid:", 6) == 0) {
			const char *p = l + 6;

			for (;;) {
				char *end;
				long v;

				while (*p == ' ' || *p == '\t')
					p++;
				if (*p == '\n' || !*p)
					break;
				v = strtol(p, &end, 10);
				if (end == p || v <= 0 || k > NSVIEW_LEVEL_MAX)
					return -EINVAL;
				nspid[k++] = (pid_t)v;
				p = end;
			}
		}
	}
	if (!have_ppid || k == 0)
		return -EINVAL;
	*n = k;
	return 0;
}

/* Reads a small /proc file whole: its length, or -errno. */
static ssize_t read_text(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	while (len < size - 1) {
		r = read(fd, buf + len, size - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (len == size - 1)
		return -E2BIG;
	buf[len] = 0;
	return (ssize_t)len;
}

static int proc_status(pid_t pid, pid_t *nspid, unsigned int *n, pid_t *ppid)
{
	char path[64], buf[8192];
	ssize_t r;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	r = read_text(path, buf, sizeof(buf));
	if (r < 0)
		return (int)r;
	return nsview_status_parse(buf, nspid, n, ppid);
}

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks after boot. */
static int proc_start(pid_t pid, unsigned long long *ret)
{
	char path[64], buf[4096], *p;
	ssize_t r;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = read_text(path, buf, sizeof(buf));
	if (r < 0)
		return (int)r;
	p = strrchr(buf, ')'); /* the command may contain anything but ends there */
	if (!p)
		return -EINVAL;
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	*ret = strtoull(p + 1, NULL, 10);
	return 0;
}

static int proc_map(pid_t pid, const char *which, struct nsview_range *r, unsigned int *n)
{
	char path[64], buf[16384];
	ssize_t k;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	k = read_text(path, buf, sizeof(buf));
	if (k < 0)
		return (int)k;
	return nsview_map_parse(buf, r, n);
}

/*
 * The init of the pid namespace at depth level that contains pid: the
 * first ancestor at that depth, then parents at that depth up to pid 1
 * there. 0 when the chain does not show it (see the top of the file).
 */
static pid_t ns_init(pid_t pid, unsigned int level)
{
	pid_t nspid[NSVIEW_LEVEL_MAX + 1], ppid;
	unsigned int n;

	for (int i = 0; i < WALK_MAX && pid > 0; i++, pid = ppid) {
		if (proc_status(pid, nspid, &n, &ppid) < 0 || n < level + 1)
			return 0;
		if (n > level + 1)
			continue; /* deeper: its ancestors lead up to the depth */
		if (nspid[level] == 1)
			return pid;
	}
	return 0;
}

/* brokerd's own maps and depth, read once: its namespaces do not change. */
static struct {
	bool read, failed;
	unsigned int n_uid, n_gid, depth;
	struct nsview_range uid[NSVIEW_MAP_MAX], gid[NSVIEW_MAP_MAX];
} own;

static void own_read(void)
{
	pid_t nspid[NSVIEW_LEVEL_MAX + 1], ppid;
	pid_t self = getpid();

	if (own.read)
		return;
	own.read = true;
	own.failed = proc_map(self, "uid_map", own.uid, &own.n_uid) < 0 ||
		     proc_map(self, "gid_map", own.gid, &own.n_gid) < 0 ||
		     proc_status(self, nspid, &own.depth, &ppid) < 0;
}

static bool maps_equal(const struct nsview_range *a, unsigned int na, const struct nsview_range *b,
		       unsigned int nb)
{
	return na == nb && memcmp(a, b, na * sizeof(*a)) == 0;
}

static bool pidfd_running(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	/* readable once the process has exited; till then its pid is its own */
	return pidfd >= 0 && poll(&p, 1, 0) == 0;
}

int nsview_read(pid_t pid, int pidfd, struct nsview **ret)
{
	pid_t nspid[NSVIEW_LEVEL_MAX + 1], ppid;
	struct nsview *v = calloc(1, sizeof(*v));
	unsigned int n = 0;

	if (!v)
		return -ENOMEM;
	own_read();
	if (pid <= 0 || proc_map(pid, "uid_map", v->uid, &v->n_uid) < 0 ||
	    proc_map(pid, "gid_map", v->gid, &v->n_gid) < 0 || proc_status(pid, nspid, &n, &ppid) < 0)
		v->opaque = true;
	if (!v->opaque) {
		v->level = n - 1;
		v->self_nr = nspid[n - 1];
		if (v->level > 0) {
			v->init = ns_init(pid, v->level);
			if (v->init > 0 && proc_start(v->init, &v->init_start) < 0)
				v->init = 0;
		}
	}
	/* Read after the process was gone, the files could be another's. */
	if (!pidfd_running(pidfd))
		v->opaque = true;
	if (!v->opaque && !own.failed && n == own.depth && maps_equal(v->uid, v->n_uid, own.uid, own.n_uid) &&
	    maps_equal(v->gid, v->n_gid, own.gid, own.n_gid)) {
		free(v);
		v = NULL;
	}
	*ret = v;
	return 0;
}

uint32_t nsview_uid(const struct nsview *v, uint32_t uid)
{
	if (!v)
		return uid;
	return v->opaque ? NSVIEW_OVERFLOW_ID : nsview_map_id(v->uid, v->n_uid, uid);
}

uint32_t nsview_gid(const struct nsview *v, uint32_t gid)
{
	if (!v)
		return gid;
	return v->opaque ? NSVIEW_OVERFLOW_ID : nsview_map_id(v->gid, v->n_gid, gid);
}

pid_t nsview_pid(const struct nsview *v, pid_t pid)
{
	pid_t nspid[NSVIEW_LEVEL_MAX + 1], ppid, init;
	unsigned long long start;
	unsigned int n;

	if (!v)
		return pid;
	if (pid <= 0 || v->opaque)
		return 0;
	if (proc_status(pid, nspid, &n, &ppid) < 0 || n < v->level + 1)
		return 0;
	if (v->level == 0)
		return nspid[0]; /* the namespace of brokerd's /proc: every process is there */
	if (v->init <= 0)
		return 0;
	init = ns_init(pid, v->level);
	if (init != v->init || proc_start(init, &start) < 0 || start != v->init_start)
		return 0;
	return nspid[v->level];
}

pid_t nsview_self_pid(const struct nsview *v, pid_t pid)
{
	if (!v)
		return pid;
	return pid <= 0 || v->opaque ? 0 : v->self_nr;
}
