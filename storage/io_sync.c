/*
 * The plain I/O backend: write is pwrite at once, sync is fdatasync at once (sync_dir fsync),
 * flush only reports.
 *
 * The contract matches the io_uring backend so that callers (and tests) cannot tell them apart
 * by results: nothing queued is "done" until flush returns 0, and flush returns the first error
 * in queue order since the previous flush. Like a broken IOSQE_IO_LINK chain, an fd whose write
 * or sync failed has its later writes and syncs skipped until that flush, so a sync never runs
 * (and never "succeeds") after a failed write of the same file.
 *
 * Invariants: err is the first error since the last flush or 0 (logged by that flush, with the
 * path of its file and the count of failures after it); an fd is in failed_fds only while
 * an error of it is pending; a closed fd leaves failed_fds (its number may be reused at once).
 *
 * Rejected: deferring the pwrites to flush so that the two backends also match in timing. It
 * would need the same fixed queue as io_uring for no gain: this backend exists for kernels and
 * containers without io_uring, where a flush is as slow as its slowest fdatasync anyway.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/common.h"
#include "storage/io_private.h"

/* Distinct fds with an error pending, remembered so that their later ops are skipped. Errors on
 * more files than this in one flush mean the disk is gone: then every op is skipped until flush. */
#define IO_SYNC_FAILED_FDS_MAX 64u

struct io_sync {
    struct storage_io base; /* first member: the ops table casts back */
    int err;                /* first error since the last flush, or 0 */
    bool failed_overflow;   /* more failed fds than failed_fds holds: skip every op */
    uint32_t failed_count;
    int failed_fds[IO_SYNC_FAILED_FDS_MAX];
    /* The first failure since the last flush, logged by flush (with how many followed it) so
     * that a full disk is one line and not one per file: */
    uint32_t failed_ops; /* failures since the last flush, the first included */
    bool err_sync;
    size_t err_len;
    uint64_t err_offset;
    char err_name[DS_PATH_MAX]; /* resolved at once: the fd may be closed before flush */
};

static const struct storage_io_ops io_sync_ops;

static struct io_sync *io_sync_from(struct storage_io *io)
{
    ASSERT(io != NULL);
    ASSERT(io->ops == &io_sync_ops);
    return (struct io_sync *)io;
}

static bool io_sync_failed(const struct io_sync *s, int fd)
{
    if (s->failed_overflow) {
        return true;
    }
    for (uint32_t i = 0; i < s->failed_count; i++) {
        if (s->failed_fds[i] == fd) {
            return true;
        }
    }
    return false;
}

static void io_sync_fail(struct io_sync *s, int fd, int err, bool is_sync, size_t len,
                         uint64_t offset)
{
    ASSERT(err < 0);
    ASSERT(!io_sync_failed(s, fd));
    s->failed_ops++;
    if (s->err == 0) {
        s->err = err;
        s->err_sync = is_sync;
        s->err_len = len;
        s->err_offset = offset;
        io_common_fd_name(fd, s->err_name, sizeof(s->err_name));
    }
    if (s->failed_count == IO_SYNC_FAILED_FDS_MAX) {
        s->failed_overflow = true;
        return;
    }
    s->failed_fds[s->failed_count++] = fd;
}

static int io_sync_write(struct storage_io *io, int fd, const void *buf, size_t len,
                         uint64_t offset)
{
    struct io_sync *s = io_sync_from(io);
    ASSERT(fd >= 0);
    ASSERT(buf != NULL || len == 0);
    int rc = io_common_check_range(len, offset);
    if (rc != 0) {
        return rc;
    }
    if (io_sync_failed(s, fd)) {
        return 0; /* cancelled, as the rest of a broken io_uring chain */
    }
    /* ds_pwrite_full retries a short write for the rest, so a full disk answers with the
     * kernel's -ENOSPC (or -EDQUOT, -EFBIG) rather than a short count read as -EIO. */
    rc = ds_pwrite_full(fd, buf, len, offset);
    if (rc != 0) {
        io_sync_fail(s, fd, rc, false, len, offset);
    }
    return 0;
}

/* fdatasync(fd), or fsync(fd) when full (a directory's entries). */
static int io_sync_run(struct storage_io *io, int fd, bool full)
{
    struct io_sync *s = io_sync_from(io);
    ASSERT(fd >= 0);
    if (io_sync_failed(s, fd)) {
        return 0;
    }
    int rc;
    do {
        rc = full ? fsync(fd) : fdatasync(fd);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        io_sync_fail(s, fd, -errno, true, 0, 0);
    }
    return 0;
}

static int io_sync_sync(struct storage_io *io, int fd)
{
    return io_sync_run(io, fd, false);
}

static int io_sync_sync_dir(struct storage_io *io, int fd)
{
    return io_sync_run(io, fd, true);
}

static int io_sync_flush(struct storage_io *io)
{
    struct io_sync *s = io_sync_from(io);
    int err = s->err;
    if (err != 0) {
        io_common_log_failure(s->err_name, s->err_sync, s->err_len, s->err_offset, err,
                              s->failed_ops - 1);
    }
    s->err = 0;
    s->failed_ops = 0;
    s->failed_count = 0;
    s->failed_overflow = false;
    ASSERT(err <= 0);
    return err;
}

static void io_sync_close(struct storage_io *io, int fd)
{
    struct io_sync *s = io_sync_from(io);
    for (uint32_t i = 0; i < s->failed_count; i++) {
        if (s->failed_fds[i] == fd) {
            s->failed_fds[i] = s->failed_fds[--s->failed_count];
            break;
        }
    }
    io_common_close(io, fd);
}

static void io_sync_destroy(struct storage_io *io)
{
    if (io == NULL) {
        return;
    }
    free(io_sync_from(io));
}

static const struct storage_io_ops io_sync_ops = {
    .name = "sync",
    .open = io_common_open,
    .close = io_sync_close,
    .write = io_sync_write,
    .sync = io_sync_sync,
    .sync_dir = io_sync_sync_dir,
    .flush = io_sync_flush,
    .read = io_common_read,
    .truncate = io_common_truncate,
    .size = io_common_size,
    .rename = io_common_rename,
    .destroy = io_sync_destroy,
};

int io_sync_create(struct storage_io **out)
{
    ASSERT(out != NULL);
    struct io_sync *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->base.ops = &io_sync_ops;
    *out = &s->base;
    return 0;
}
