/* SPDX-License-Identifier: MIT */
/*
 * util/socket.h - AF_UNIX helpers both wings need: the daemon connects to
 * its activator, the library to the daemon, and both pass fds (SCM_RIGHTS)
 * on their control sockets.
 */
#ifndef BROKERD_UTIL_SOCKET_H
#define BROKERD_UTIL_SOCKET_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Fills sa for path; -ENAMETOOLONG if it does not fit sun_path. */
int unix_address(struct sockaddr_un *sa, const char *path);

/*
 * A new socket of type (SOCK_STREAM, SOCK_SEQPACKET, ... with SOCK_CLOEXEC
 * always added) connected to path: the fd, or a negative errno.
 */
int unix_connect(const char *path, int type);

/*
 * A new socket of type (SOCK_CLOEXEC always added) bound to path and
 * listening with backlog: the fd, or a negative errno. path must not exist.
 */
int unix_listen(const char *path, int type, int backlog);

/* The most fds one SCM_RIGHTS message may carry (the kernel's SCM_MAX_FD). */
#define UNIX_FDS_MAX 253

/*
 * Sends one message of len bytes with n_fds fds (SCM_RIGHTS; none when 0;
 * the fds stay the caller's). flags as for sendmsg(), MSG_NOSIGNAL always
 * added. Meant for SOCK_SEQPACKET and datagram sockets, which send all or
 * nothing: 0, -EINVAL for more than UNIX_FDS_MAX fds, or a negative errno.
 */
int unix_send_fds(int fd, const void *data, size_t len, const int *fds, unsigned int n_fds, int flags);

/* Closes every fd that came (SCM_RIGHTS) with received message mh: how many there were. */
unsigned int unix_close_fds(struct msghdr *mh);

#endif
