/*
 * Private to storage/: the I/O backends behind storage_io_create and the synchronous helpers
 * they share. Nothing outside storage/ includes this header; tests reach the backends through
 * storage_io_create and the ops table.
 *
 * Every function follows the I/O contract of storage.h: 0 (or a count) on success, a negated
 * errno on failure, errors logged once here where they are detected (open excepted: -ENOENT is
 * an everyday answer to a probe, so open logs at debug level and its caller decides).
 */
#ifndef DS_STORAGE_IO_PRIVATE_H
#define DS_STORAGE_IO_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/io.h"

/* The io_uring backend (io_uring.c). Returns 0, -ENOSYS when DS_IO_URING_DISABLE is set or the
 * kernel lacks io_uring, -EPERM when io_uring is refused (seccomp, io_uring_disabled sysctl), or
 * another negated errno from io_uring_queue_init. The symbol avoids the io_uring_ prefix, which
 * belongs to liburing. */
DS_MUST_USE int io_uring_backend_create(struct storage_io **out);

/* The pwrite/fdatasync backend (io_sync.c). Returns 0 or -ENOMEM. */
DS_MUST_USE int io_sync_create(struct storage_io **out);

/* ---- shared synchronous operations (io_common.c), shaped to sit in an ops table ----------- */

/* openat(AT_FDCWD, path, flags | O_CLOEXEC, mode); returns the fd or a negated errno. */
int io_common_open(struct storage_io *io, const char *path, int flags, mode_t mode);
/* close(2); its error is ignored because Linux releases the fd even when close fails. */
void io_common_close(struct storage_io *io, int fd);
/* pread until len bytes or end of file; returns the bytes read or a negated errno. */
ssize_t io_common_read(struct storage_io *io, int fd, void *buf, size_t len, uint64_t offset);
DS_MUST_USE int io_common_truncate(struct storage_io *io, int fd, uint64_t len);
DS_MUST_USE int io_common_size(struct storage_io *io, int fd, uint64_t *len);
DS_MUST_USE int io_common_rename(struct storage_io *io, const char *from, const char *to);

/* The path of fd as /proc/self/fd resolves it, else "fd N", into dst (cap bytes). Error
 * paths only: it costs a readlink. */
void io_common_fd_name(int fd, char *dst, size_t cap);
/* Logs, at error level, a failed write or sync of the file name (io_common_fd_name) with its
 * cause: "PATH: write of LEN bytes at offset OFF: No space left on device". more counts further
 * failures of the same flush, folded into this one line so that a full disk reads as one
 * message and not one per open segment. */
void io_common_log_failure(const char *name, bool is_sync, size_t len, uint64_t offset, int err,
                           uint32_t more);

/* -EINVAL when [offset, offset + len) does not fit in off_t, else 0. Checked when a write is
 * queued, so a bad range fails at once and not at flush. */
DS_MUST_USE int io_common_check_range(size_t len, uint64_t offset);

#endif /* DS_STORAGE_IO_PRIVATE_H */
