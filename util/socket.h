/* SPDX-License-Identifier: MIT */
/*
 * util/socket.h - AF_UNIX helpers both wings need: the daemon connects to
 * its activator, the library to the daemon.
 */
#ifndef BROKERD_UTIL_SOCKET_H
#define BROKERD_UTIL_SOCKET_H

#include <sys/socket.h>
#include <sys/un.h>

/* Fills sa for path; -ENAMETOOLONG if it does not fit sun_path. */
int unix_address(struct sockaddr_un *sa, const char *path);

/*
 * A new socket of type (SOCK_STREAM, SOCK_SEQPACKET, ... with SOCK_CLOEXEC
 * always added) connected to path: the fd, or a negative errno.
 */
int unix_connect(const char *path, int type);

#endif
