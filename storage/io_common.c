/*
 * The synchronous half of every I/O backend: open, close, read, truncate, size and rename are
 * plain system calls in both the io_uring and the sync backend, so they live here once.
 *
 * Invariants: results are a count or a negated errno read right after the failing call; reads
 * are short only at end of file (EINTR and partial reads are retried).
 *
 * Rejected: running reads through io_uring too. Reads happen at open (recovery, fsck) and for
 * queries, one at a time and in the caller's order; a ring adds latency and code without letting
 * anything overlap.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "storage/io_private.h"

int io_common_check_range(size_t len, uint64_t offset)
{
    if (offset > (uint64_t)INT64_MAX || (uint64_t)len > (uint64_t)INT64_MAX - offset) {
        return -EINVAL;
    }
    return 0;
}

void io_common_fd_name(int fd, char *dst, size_t cap)
{
    ASSERT(dst != NULL && cap > 1);
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, dst, cap - 1);
    if (n <= 0) {
        snprintf(dst, cap, "fd %d", fd);
        return;
    }
    dst[n] = '\0'; /* readlink does not terminate; a longer path is cut, which is fine here */
}

void io_common_log_failure(const char *name, bool is_sync, size_t len, uint64_t offset, int err,
                           uint32_t more)
{
    ASSERT(name != NULL);
    ASSERT(err < 0);
    char also[80] = "";
    if (more > 0) {
        snprintf(also, sizeof(also), " (and %u more failed operations in this flush)", more);
    }
    if (is_sync) {
        ds_log_error("%s: fdatasync: %s%s", name, ds_strerror(err), also);
    } else {
        ds_log_error("%s: write of %zu bytes at offset %llu: %s%s", name, len,
                     (unsigned long long)offset, ds_strerror(err), also);
    }
}

int io_common_open(struct storage_io *io, const char *path, int flags, mode_t mode)
{
    (void)io;
    ASSERT(path != NULL);
    int fd = openat(AT_FDCWD, path, flags | O_CLOEXEC, mode);
    if (fd < 0) {
        int err = -errno;
        ds_log_debug("open %s: %s", path, ds_strerror(err));
        return err;
    }
    return fd;
}

void io_common_close(struct storage_io *io, int fd)
{
    (void)io;
    ASSERT(fd >= 0);
    /* Linux frees the descriptor even when close fails (EINTR included): retrying could close
     * a descriptor another thread just opened. */
    (void)close(fd);
}

ssize_t io_common_read(struct storage_io *io, int fd, void *buf, size_t len, uint64_t offset)
{
    (void)io;
    ASSERT(fd >= 0);
    ASSERT(buf != NULL || len == 0);
    ASSERT(len <= (size_t)SSIZE_MAX);
    if (io_common_check_range(len, offset) != 0) {
        return -EINVAL;
    }
    char *dst = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, dst + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            int err = -errno;
            ds_log_error("read fd=%d offset=%llu len=%zu: %s", fd,
                         (unsigned long long)(offset + done), len - done, ds_strerror(err));
            return err;
        }
        if (n == 0) {
            break; /* end of file */
        }
        done += (size_t)n;
    }
    ASSERT(done <= len);
    return (ssize_t)done;
}

int io_common_truncate(struct storage_io *io, int fd, uint64_t len)
{
    (void)io;
    ASSERT(fd >= 0);
    if (len > (uint64_t)INT64_MAX) {
        return -EINVAL;
    }
    int rc;
    do {
        rc = ftruncate(fd, (off_t)len);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int err = -errno;
        ds_log_error("truncate fd=%d len=%llu: %s", fd, (unsigned long long)len, ds_strerror(err));
        return err;
    }
    return 0;
}

int io_common_size(struct storage_io *io, int fd, uint64_t *len)
{
    (void)io;
    ASSERT(fd >= 0);
    ASSERT(len != NULL);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = -errno;
        ds_log_error("fstat fd=%d: %s", fd, ds_strerror(err));
        return err;
    }
    ASSERT(st.st_size >= 0);
    *len = (uint64_t)st.st_size;
    return 0;
}

int io_common_rename(struct storage_io *io, const char *from, const char *to)
{
    (void)io;
    ASSERT(from != NULL);
    ASSERT(to != NULL);
    if (renameat(AT_FDCWD, from, AT_FDCWD, to) != 0) {
        int err = -errno;
        ds_log_error("rename %s to %s: %s", from, to, ds_strerror(err));
        return err;
    }
    return 0;
}
