/*
 * fake_io: failure injection and crash simulation over a real backend (see fake_io.h).
 *
 * Every write and sync is passed to the inner backend (sync, or io_uring) and its error
 * collected at once with an inner flush (cheap with sync: the work is already done; one ring
 * submission per operation with io_uring, fine for tests), so the fake knows the outcome of each
 * operation and keeps its own first error and per-fd "failed" marks until the caller's flush.
 * On a successful sync it records the file's size as its durable length; fake_io_crash cuts or
 * damages the bytes past it.
 *
 * Invariants: fds[] holds exactly the fds opened through the fake and not yet closed; every
 * tracked file index in it is < file_count; err is the first error since the last flush.
 *
 * Rejected: an in-memory file system. Real files let the storage's own recovery and fsck read
 * the damage through the same syscalls as in production, and keep the fake small.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/events.h"
#include "tests/support/fake_io.h"

#define FAKE_IO_NONE UINT32_MAX
/* Buffer of random bytes used to overwrite or append garbage, refilled per chunk. */
#define FAKE_IO_CHUNK_BYTES 4096u

struct fake_io_file {
    char *path;
    uint64_t durable_bytes;
};

struct fake_io_dir_sync {
    char path[DS_PATH_MAX];
    uint32_t syncs;
};

struct fake_io_fd {
    int fd;
    uint32_t file_index; /* into files[], or FAKE_IO_NONE for a non-regular file */
    bool failed;         /* an op of this fd failed since the last flush: skip the rest */
};

struct fake_io {
    struct storage_io base; /* first member: the ops table casts back */
    struct storage_io *inner;
    uint64_t ops;
    uint64_t fail_at; /* absolute op number, 0 for none */
    int fail_err;
    bool fail_sticky;
    uint64_t short_at; /* absolute op number, 0 for none */
    size_t short_bytes;
    int err; /* first error since the last flush, or 0 */
    /* sync_dir calls by directory (the path its fd resolves to), failed ones included */
    uint32_t dir_syncs_total;
    uint32_t dir_count;
    struct fake_io_dir_sync dirs[FAKE_IO_DIRS_MAX];
    uint32_t file_count;
    uint32_t fd_count;
    struct fake_io_file files[FAKE_IO_FILES_MAX];
    struct fake_io_fd fds[FAKE_IO_FDS_MAX];
};

static const struct storage_io_ops fake_io_ops_table;

static struct fake_io *fake_io_from(struct storage_io *io)
{
    ASSERT(io != NULL);
    ASSERT(io->ops == &fake_io_ops_table);
    return (struct fake_io *)io;
}

static struct fake_io_fd *fake_io_fd_find(struct fake_io *f, int fd)
{
    for (uint32_t i = 0; i < f->fd_count; i++) {
        if (f->fds[i].fd == fd) {
            return &f->fds[i];
        }
    }
    return NULL;
}

static uint32_t fake_io_file_find(const struct fake_io *f, const char *path)
{
    for (uint32_t i = 0; i < f->file_count; i++) {
        if (strcmp(f->files[i].path, path) == 0) {
            return i;
        }
    }
    return FAKE_IO_NONE;
}

/* ---- open and close: track paths and their durable lengths -------------------------------- */

/* Finds or adds path's entry and applies what this open means for its durable length. */
static int fake_io_track(struct fake_io *f, const char *path, bool existed, uint64_t size_before,
                         bool truncated, uint32_t *index_out)
{
    uint32_t index = fake_io_file_find(f, path);
    if (index == FAKE_IO_NONE) {
        if (f->file_count == FAKE_IO_FILES_MAX) {
            return -EMFILE;
        }
        char *copy = strdup(path);
        if (copy == NULL) {
            return -ENOMEM;
        }
        index = f->file_count++;
        f->files[index] = (struct fake_io_file){.path = copy, .durable_bytes = size_before};
    }
    struct fake_io_file *file = &f->files[index];
    if (!existed || truncated) {
        file->durable_bytes = 0;
    } else if (file->durable_bytes > size_before) {
        file->durable_bytes = size_before;
    }
    *index_out = index;
    return 0;
}

static int fake_io_open(struct storage_io *io, const char *path, int flags, mode_t mode)
{
    struct fake_io *f = fake_io_from(io);
    ASSERT(path != NULL);
    if (f->fd_count == FAKE_IO_FDS_MAX) {
        return -EMFILE;
    }
    struct stat before;
    bool existed = stat(path, &before) == 0 && S_ISREG(before.st_mode);
    int fd = f->inner->ops->open(f->inner, path, flags, mode);
    if (fd < 0) {
        return fd;
    }
    struct stat now;
    if (fstat(fd, &now) != 0) {
        int err = -errno;
        f->inner->ops->close(f->inner, fd);
        return err;
    }
    uint32_t index = FAKE_IO_NONE;
    if (S_ISREG(now.st_mode)) {
        uint64_t size_before = existed ? (uint64_t)before.st_size : 0;
        int rc = fake_io_track(f, path, existed, size_before, (flags & O_TRUNC) != 0, &index);
        if (rc != 0) {
            f->inner->ops->close(f->inner, fd);
            return rc;
        }
    }
    ASSERT(fake_io_fd_find(f, fd) == NULL);
    f->fds[f->fd_count++] = (struct fake_io_fd){.fd = fd, .file_index = index, .failed = false};
    return fd;
}

static void fake_io_close(struct storage_io *io, int fd)
{
    struct fake_io *f = fake_io_from(io);
    struct fake_io_fd *entry = fake_io_fd_find(f, fd);
    if (entry != NULL) {
        *entry = f->fds[--f->fd_count];
    }
    f->inner->ops->close(f->inner, fd);
}

/* ---- write and sync: count, inject, forward ------------------------------------------------ */

enum fake_io_fault { FAKE_IO_FAULT_NONE, FAKE_IO_FAULT_FAIL, FAKE_IO_FAULT_SHORT };

/* Counts one operation and says what happens to it. */
static enum fake_io_fault fake_io_next(struct fake_io *f)
{
    uint64_t n = ++f->ops;
    bool fail = f->fail_at != 0 && (n == f->fail_at || (f->fail_sticky && n > f->fail_at));
    if (fail) {
        return FAKE_IO_FAULT_FAIL;
    }
    return f->short_at == n ? FAKE_IO_FAULT_SHORT : FAKE_IO_FAULT_NONE;
}

static void fake_io_fail(struct fake_io *f, struct fake_io_fd *entry, int err)
{
    ASSERT(err < 0);
    if (f->err == 0) {
        f->err = err;
    }
    if (entry != NULL) {
        entry->failed = true;
    }
}

/* Forwards a write to the sync backend and collects its outcome at once. */
static void fake_io_forward_write(struct fake_io *f, struct fake_io_fd *entry, int fd,
                                  const void *buf, size_t len, uint64_t offset)
{
    int rc = f->inner->ops->write(f->inner, fd, buf, len, offset);
    ASSERT(rc == 0); /* the range was checked before */
    rc = f->inner->ops->flush(f->inner);
    if (rc != 0) {
        fake_io_fail(f, entry, rc);
    }
}

static int fake_io_write(struct storage_io *io, int fd, const void *buf, size_t len,
                         uint64_t offset)
{
    struct fake_io *f = fake_io_from(io);
    ASSERT(buf != NULL || len == 0);
    if (offset > (uint64_t)INT64_MAX || (uint64_t)len > (uint64_t)INT64_MAX - offset) {
        return -EINVAL; /* as the real backends: rejected when queued, not counted */
    }
    enum fake_io_fault fault = fake_io_next(f);
    struct fake_io_fd *entry = fake_io_fd_find(f, fd);
    if (entry != NULL && entry->failed) {
        return 0;
    }
    if (fault == FAKE_IO_FAULT_FAIL) {
        fake_io_fail(f, entry, f->fail_err);
    } else if (fault == FAKE_IO_FAULT_SHORT && len > 0) {
        size_t written = f->short_bytes < len ? f->short_bytes : len - 1;
        fake_io_forward_write(f, entry, fd, buf, written, offset);
        if (entry == NULL || !entry->failed) {
            fake_io_fail(f, entry, -EIO);
        }
    } else {
        fake_io_forward_write(f, entry, fd, buf, len, offset);
    }
    return 0;
}

/* Counts a sync_dir of fd in the total and under the path it resolves to (past
 * FAKE_IO_DIRS_MAX directories, in the total only). */
static void fake_io_note_dir_sync(struct fake_io *f, int fd)
{
    char link[64];
    char path[DS_PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    ASSERT(n > 0);
    path[n] = '\0';
    f->dir_syncs_total++;
    for (uint32_t i = 0; i < f->dir_count; i++) {
        if (strcmp(f->dirs[i].path, path) == 0) {
            f->dirs[i].syncs++;
            return;
        }
    }
    if (f->dir_count < FAKE_IO_DIRS_MAX) {
        memcpy(f->dirs[f->dir_count].path, path, (size_t)n + 1);
        f->dirs[f->dir_count++].syncs = 1;
    }
}

/* A sync (fdatasync), or with dir a directory's fsync: counted, failed on demand, forwarded. */
static int fake_io_sync_any(struct storage_io *io, int fd, bool dir)
{
    struct fake_io *f = fake_io_from(io);
    enum fake_io_fault fault = fake_io_next(f);
    struct fake_io_fd *entry = fake_io_fd_find(f, fd);
    if (dir) {
        fake_io_note_dir_sync(f, fd);
    }
    if (entry != NULL && entry->failed) {
        return 0;
    }
    if (fault == FAKE_IO_FAULT_FAIL) {
        fake_io_fail(f, entry, f->fail_err);
        return 0;
    }
    int rc = dir ? f->inner->ops->sync_dir(f->inner, fd) : f->inner->ops->sync(f->inner, fd);
    ASSERT(rc == 0);
    rc = f->inner->ops->flush(f->inner);
    uint64_t size = 0;
    if (rc == 0 && entry != NULL && entry->file_index != FAKE_IO_NONE) {
        rc = f->inner->ops->size(f->inner, fd, &size);
        if (rc == 0) {
            f->files[entry->file_index].durable_bytes = size;
        }
    }
    if (rc != 0) {
        fake_io_fail(f, entry, rc);
    }
    return 0;
}

static int fake_io_sync(struct storage_io *io, int fd)
{
    return fake_io_sync_any(io, fd, false);
}

static int fake_io_sync_dir(struct storage_io *io, int fd)
{
    return fake_io_sync_any(io, fd, true);
}

static int fake_io_flush(struct storage_io *io)
{
    struct fake_io *f = fake_io_from(io);
    int rc = f->inner->ops->flush(f->inner);
    int err = f->err != 0 ? f->err : rc;
    f->err = 0;
    for (uint32_t i = 0; i < f->fd_count; i++) {
        f->fds[i].failed = false;
    }
    return err;
}

/* ---- synchronous pass-through -------------------------------------------------------------- */

static ssize_t fake_io_read(struct storage_io *io, int fd, void *buf, size_t len, uint64_t offset)
{
    struct fake_io *f = fake_io_from(io);
    return f->inner->ops->read(f->inner, fd, buf, len, offset);
}

static int fake_io_truncate(struct storage_io *io, int fd, uint64_t len)
{
    struct fake_io *f = fake_io_from(io);
    int rc = f->inner->ops->truncate(f->inner, fd, len);
    struct fake_io_fd *entry = fake_io_fd_find(f, fd);
    if (rc == 0 && entry != NULL && entry->file_index != FAKE_IO_NONE) {
        struct fake_io_file *file = &f->files[entry->file_index];
        if (file->durable_bytes > len) {
            file->durable_bytes = len;
        }
    }
    return rc;
}

static int fake_io_size(struct storage_io *io, int fd, uint64_t *len)
{
    struct fake_io *f = fake_io_from(io);
    return f->inner->ops->size(f->inner, fd, len);
}

/* A rename moves the durable length with the file: what the source path had synced is what
 * the target path now holds after a power cut (directory durability is not modelled). */
static int fake_io_rename(struct storage_io *io, const char *from, const char *to)
{
    struct fake_io *f = fake_io_from(io);
    int rc = f->inner->ops->rename(f->inner, from, to);
    uint32_t source = fake_io_file_find(f, from);
    if (rc != 0 || source == FAKE_IO_NONE) {
        return rc;
    }
    uint32_t target = fake_io_file_find(f, to);
    if (target != FAKE_IO_NONE) {
        f->files[target].durable_bytes = f->files[source].durable_bytes;
        return 0;
    }
    char *copy = strdup(to);
    if (copy == NULL) {
        return -ENOMEM;
    }
    free(f->files[source].path);
    f->files[source].path = copy;
    return 0;
}

static void fake_io_destroy_op(struct storage_io *io)
{
    if (io != NULL) {
        fake_io_destroy(fake_io_from(io));
    }
}

static const struct storage_io_ops fake_io_ops_table = {
    .name = "fake",
    .open = fake_io_open,
    .close = fake_io_close,
    .write = fake_io_write,
    .sync = fake_io_sync,
    .sync_dir = fake_io_sync_dir,
    .flush = fake_io_flush,
    .read = fake_io_read,
    .truncate = fake_io_truncate,
    .size = fake_io_size,
    .rename = fake_io_rename,
    .destroy = fake_io_destroy_op,
};

/* ---- lifecycle and knobs ------------------------------------------------------------------- */

int fake_io_create(struct fake_io **out)
{
    return fake_io_create_over(STORAGE_IO_SYNC, out);
}

int fake_io_create_over(enum storage_io_mode mode, struct fake_io **out)
{
    ASSERT(out != NULL);
    ASSERT(mode == STORAGE_IO_SYNC || mode == STORAGE_IO_URING);
    struct fake_io *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return -ENOMEM;
    }
    int rc = storage_io_create(mode, &f->inner);
    if (rc != 0) {
        free(f);
        return rc;
    }
    f->base.ops = &fake_io_ops_table;
    *out = f;
    return 0;
}

struct storage_io *fake_io_base(struct fake_io *f)
{
    ASSERT(f != NULL);
    return &f->base;
}

void fake_io_destroy(struct fake_io *f)
{
    if (f == NULL) {
        return;
    }
    while (f->fd_count > 0) {
        fake_io_close(&f->base, f->fds[0].fd);
    }
    for (uint32_t i = 0; i < f->file_count; i++) {
        free(f->files[i].path);
    }
    f->inner->ops->destroy(f->inner);
    free(f);
}

void fake_io_fail_nth(struct fake_io *f, uint64_t n, int err)
{
    ASSERT(f != NULL);
    ASSERT(n == 0 || err < 0);
    f->fail_at = n == 0 ? 0 : f->ops + n;
    f->fail_err = err;
    f->fail_sticky = false;
}

void fake_io_fail_from(struct fake_io *f, uint64_t n, int err)
{
    fake_io_fail_nth(f, n, err);
    f->fail_sticky = n != 0;
}

void fake_io_short_nth(struct fake_io *f, uint64_t n, size_t bytes)
{
    ASSERT(f != NULL);
    f->short_at = n == 0 ? 0 : f->ops + n;
    f->short_bytes = bytes;
}

uint64_t fake_io_ops(const struct fake_io *f)
{
    ASSERT(f != NULL);
    return f->ops;
}

uint32_t fake_io_dir_syncs(const struct fake_io *f, const char *path)
{
    ASSERT(f != NULL);
    ASSERT(path != NULL);
    char real[PATH_MAX];
    if (realpath(path, real) == NULL) {
        return 0;
    }
    uint32_t total = 0;
    for (uint32_t i = 0; i < f->dir_count; i++) {
        total += strcmp(f->dirs[i].path, real) == 0 ? f->dirs[i].syncs : 0;
    }
    return total;
}

uint32_t fake_io_dir_syncs_total(const struct fake_io *f)
{
    ASSERT(f != NULL);
    return f->dir_syncs_total;
}

int fake_io_durable_bytes(const struct fake_io *f, const char *path, uint64_t *len)
{
    ASSERT(f != NULL);
    ASSERT(path != NULL);
    uint32_t index = fake_io_file_find(f, path);
    if (index == FAKE_IO_NONE) {
        return -ENOENT;
    }
    *len = f->files[index].durable_bytes;
    return 0;
}

/* ---- crash --------------------------------------------------------------------------------- */

/* Writes len random bytes at offset. */
static int fake_io_scribble(int fd, uint64_t offset, uint64_t len, uint64_t *rng)
{
    unsigned char chunk[FAKE_IO_CHUNK_BYTES];
    while (len > 0) {
        size_t n = len < sizeof(chunk) ? (size_t)len : sizeof(chunk);
        for (size_t i = 0; i < n; i++) {
            chunk[i] = (unsigned char)test_rng_next(rng);
        }
        ssize_t written = pwrite(fd, chunk, n, (off_t)offset);
        if (written < 0 && errno == EINTR) {
            continue;
        }
        if (written <= 0) {
            return written < 0 ? -errno : -EIO;
        }
        offset += (uint64_t)written;
        len -= (uint64_t)written;
    }
    return 0;
}

/* Applies mode to the unsynced tail [durable, size) of one file. */
static int fake_io_crash_tail(int fd, uint64_t durable, uint64_t size, enum fake_crash_mode mode,
                              uint64_t *rng)
{
    ASSERT(size > durable);
    uint64_t unsynced = size - durable;
    if (mode == FAKE_CRASH_CLEAN) {
        return ftruncate(fd, (off_t)durable) == 0 ? 0 : -errno;
    }
    if (mode == FAKE_CRASH_TORN) {
        uint64_t keep = test_rng_next(rng) % (unsynced + 1);
        return ftruncate(fd, (off_t)(durable + keep)) == 0 ? 0 : -errno;
    }
    ASSERT(mode == FAKE_CRASH_GARBAGE);
    uint64_t start = durable + test_rng_next(rng) % unsynced;
    uint64_t span = 1 + test_rng_next(rng) % (size - start);
    return fake_io_scribble(fd, start, span, rng);
}

/* Opens a tracked file for damage; *fd_out is -1 when it no longer exists. */
static int fake_io_crash_open(const struct fake_io_file *file, int *fd_out, uint64_t *size_out)
{
    *fd_out = -1;
    int fd = open(file->path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = -errno;
        (void)close(fd);
        return err;
    }
    *fd_out = fd;
    *size_out = (uint64_t)st.st_size;
    return 0;
}

/* Damages one file per mode (and appends garbage when asked); afterwards its size is durable. */
static int fake_io_crash_file(struct fake_io_file *file, enum fake_crash_mode mode, bool append,
                              uint64_t *rng)
{
    int fd;
    uint64_t size = 0;
    int rc = fake_io_crash_open(file, &fd, &size);
    if (rc != 0 || fd < 0) {
        return rc;
    }
    if (size > file->durable_bytes) {
        rc = fake_io_crash_tail(fd, file->durable_bytes, size, mode, rng);
    }
    if (rc == 0 && append) {
        struct stat st;
        rc = fstat(fd, &st) == 0 ? 0 : -errno;
        uint64_t bytes = 1 + test_rng_next(rng) % FAKE_IO_GARBAGE_BYTES_MAX;
        if (rc == 0) {
            rc = fake_io_scribble(fd, (uint64_t)st.st_size, bytes, rng);
        }
    }
    struct stat after;
    if (rc == 0) {
        rc = fstat(fd, &after) == 0 ? 0 : -errno;
    }
    if (rc == 0) {
        file->durable_bytes = (uint64_t)after.st_size;
    }
    (void)close(fd);
    return rc;
}

int fake_io_crash(struct fake_io *f, uint64_t seed, enum fake_crash_mode mode)
{
    ASSERT(f != NULL);
    ASSERT(mode == FAKE_CRASH_CLEAN || mode == FAKE_CRASH_TORN || mode == FAKE_CRASH_GARBAGE);
    if (f->fd_count > 0) {
        return -EBUSY;
    }
    uint64_t rng = seed;
    uint32_t append_index = FAKE_IO_NONE;
    if (mode == FAKE_CRASH_GARBAGE && f->file_count > 0) {
        append_index = (uint32_t)(test_rng_next(&rng) % f->file_count);
    }
    for (uint32_t i = 0; i < f->file_count; i++) {
        int rc = fake_io_crash_file(&f->files[i], mode, i == append_index, &rng);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}
