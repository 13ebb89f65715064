/*
 * storage's I/O interface: struct storage_io, the one path by which data and manifest files are
 * written, synced and read, so that tests can inject faults. Part of the public API through
 * storage.h, which includes it; storage's own headers include this one instead of the facade.
 */
#ifndef DS_STORAGE_IO_H
#define DS_STORAGE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

/* ---- the I/O interface --------------------------------------------------------------------- */

/* Operations on files inside the data directory. Writes and syncs are queued and run at flush:
 * operations on the same fd run in the order queued, operations on different fds may run
 * concurrently. flush returns 0 when every queued operation succeeded, else the first error
 * (the rest of a short write is retried, so a full disk reports -ENOSPC, not -EIO); after an error
 * the state of the affected files is unknown and the caller must not acknowledge anything queued.
 */
struct storage_io;
struct storage_io_ops {
    const char *name;
    /* open(2) semantics; returns an fd or a negated errno. */
    int (*open)(struct storage_io *io, const char *path, int flags, mode_t mode);
    void (*close)(struct storage_io *io, int fd);
    /* Queue a write of len bytes at offset (buf is retained until flush returns). */
    DS_MUST_USE int (*write)(struct storage_io *io, int fd, const void *buf, size_t len,
                             uint64_t offset);
    /* Queue fdatasync(fd), after the fd's earlier queued writes. */
    DS_MUST_USE int (*sync)(struct storage_io *io, int fd);
    /* Queue fsync(fd) of a directory opened O_RDONLY | O_DIRECTORY: its new entries become
     * durable. A full fsync, not fdatasync: fsync is what file systems document for making a new
     * name durable; fdatasync of a directory's entries is left unspecified. */
    DS_MUST_USE int (*sync_dir)(struct storage_io *io, int fd);
    /* Submit everything queued and wait for all of it. */
    DS_MUST_USE int (*flush)(struct storage_io *io);
    /* Synchronous read; returns bytes read (short only at end of file) or a negated errno. */
    ssize_t (*read)(struct storage_io *io, int fd, void *buf, size_t len, uint64_t offset);
    DS_MUST_USE int (*truncate)(struct storage_io *io, int fd, uint64_t len);
    DS_MUST_USE int (*size)(struct storage_io *io, int fd, uint64_t *len);
    /* rename(2) semantics, immediate; the caller syncs the directory to make it durable. */
    DS_MUST_USE int (*rename)(struct storage_io *io, const char *from, const char *to);
    void (*destroy)(struct storage_io *io);
};
struct storage_io {
    const struct storage_io_ops *ops;
};

enum storage_io_mode {
    STORAGE_IO_AUTO = 0, /* io_uring when the kernel allows it, else sync (logged) */
    STORAGE_IO_URING,    /* io_uring or fail */
    STORAGE_IO_SYNC,     /* pwrite + fdatasync */
};

/* Creates a backend. AUTO falls back to sync when io_uring_queue_init is refused (ENOSYS,
 * EPERM: seccomp in containers) and logs the choice. Returns 0 or a negated errno. */
DS_MUST_USE int storage_io_create(enum storage_io_mode mode, struct storage_io **out);
/* Parses "auto", "uring", "sync"; returns 0 or -DS_EUSAGE. */
DS_MUST_USE int storage_io_mode_parse(const char *text, enum storage_io_mode *mode);
/* "uring" or "sync": what a backend is. */
const char *storage_io_name(const struct storage_io *io);

#endif /* DS_STORAGE_IO_H */
