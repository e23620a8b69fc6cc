/* SPDX-License-Identifier: MIT */
/*
 * body-memfd.h - the sealed memfd that carries a body too large for a
 * channel's slot (protocol/README.md 7.6), as a receiver takes it: checked
 * for its seals and size, then mapped, or read into the receiver's own
 * buffer. One place for the rules that the client library and brokerd's
 * bridge both apply.
 */
#ifndef BROKERD_PROTOCOL_BODY_MEMFD_H
#define BROKERD_PROTOCOL_BODY_MEMFD_H

#include <fcntl.h>
#include <stddef.h>

/* The seals a body memfd must have: nobody, the sender included, can change it. */
#define CHMSG_BODY_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

/*
 * Maps the body memfd fd, which must carry CHMSG_BODY_SEALS and be a
 * regular file of exactly len bytes (len > 0), read-only and private: a
 * byte-order conversion writes to the caller's copy of the pages, never
 * the sender's. The fd may be closed afterwards; munmap(*ret, len) ends
 * the mapping. Returns 0, -EBADMSG (not such a memfd) or -ENOMEM.
 */
int chmsg_body_map(int fd, size_t len, void **ret);

/*
 * Reads the body memfd fd into buf, which has room for len + 1 bytes: the
 * same rules as chmsg_body_map() with one fcntl() and one pread() and no
 * mapping (no fstat, mmap, page faults, munmap). The seals are checked
 * first; the pread() asks for one byte more than len, so that it returns
 * exactly len only for a file of exactly len bytes, and the seals keep
 * that size from changing. The copy is the caller's: nothing the sender
 * does later reaches it. Returns 0 or -EBADMSG (not such a memfd).
 */
int chmsg_body_read(int fd, size_t len, void *buf);

#endif
