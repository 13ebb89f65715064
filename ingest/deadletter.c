/*
 * Dead-letter files rotated by size (deadletter.h): the file number and committed length in
 * one MANIFEST position, recovery to exactly that position, retention by stream day.
 *
 * Invariant: every file below the committed position's number is complete and synced (it was
 * fdatasync'ed before the commit that named its successor), and no file above it holds an
 * acknowledged line. So recovery removes the files above the committed number and cuts the
 * committed file to the committed length; nothing else is touched, and a crash at any moment
 * (after the next file's creation, before the commit that names it, between retention's
 * unlinks) leaves exactly the acknowledged dead letters, in file order.
 *
 * Rotation creates a new file and never renames one that holds data, so a crash cannot leave
 * the acknowledged lines under a name recovery does not expect. Rejected: the logrotate shape
 * (deadletter.jsonl renamed to deadletter.N.jsonl, then a new deadletter.jsonl): the current
 * file's name then says nothing about its number, recovery after a crash between the rename
 * and the commit must rename back, and a reader listing the directory mid-rotation sees the
 * newest lines in the oldest-looking name. Numbered names of fixed width sort in write order,
 * so `cat DIR/deadletter.*.jsonl` reads every dead letter once, oldest first.
 *
 * Retention is by stream day, not by a byte budget: a rotated file goes once the retention
 * floor passes the stream day at which it was closed (every line in it was written on that
 * day or before), the rule the data follows, so dead letters last as long as the days they
 * were rejected from. A line carries no trustworthy day of its own (most are unparsable), so
 * the stream day at writing stands in for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ingest/deadletter.h"

#define DEADLETTER_SUFFIX ".jsonl"

void deadletter_path(const struct deadletter *d, uint32_t number, char *dst, size_t dst_capacity)
{
    ASSERT(number <= DEADLETTER_NUMBER_MAX);
    int len = snprintf(dst, dst_capacity, "%s.%08" PRIu32 DEADLETTER_SUFFIX, d->base, number);
    ASSERT(len > 0 && (size_t)len < dst_capacity);
}

/* The directory part of base, for listing and fsync. */
static void base_dir(const struct deadletter *d, char *dst, size_t dst_capacity)
{
    const char *slash = strrchr(d->base, '/');
    size_t len = slash == NULL ? 0 : (size_t)(slash - d->base);
    ASSERT(len + 2 <= dst_capacity);
    if (slash == NULL || len == 0) {
        snprintf(dst, dst_capacity, "%s", slash == NULL ? "." : "/");
        return;
    }
    memcpy(dst, d->base, len);
    dst[len] = '\0';
}

static int sync_dir(const struct deadletter *d)
{
    char dir[DS_PATH_MAX];
    base_dir(d, dir, sizeof(dir));
    int rc = ds_fsync_dir(dir);
    if (rc != 0) {
        ds_log_error("%s: cannot sync the directory of the dead letters: %s", dir, ds_strerror(rc));
    }
    return rc;
}

/* The number of a directory entry named like one of our files, or -1. */
static int64_t entry_number(const struct deadletter *d, const char *name)
{
    const char *slash = strrchr(d->base, '/');
    const char *stem = slash != NULL ? slash + 1 : d->base;
    size_t stem_len = strlen(stem);
    if (strncmp(name, stem, stem_len) != 0 || name[stem_len] != '.') {
        return -1;
    }
    const char *digits = name + stem_len + 1;
    for (int i = 0; i < 8; i++) {
        if (digits[i] < '0' || digits[i] > '9') {
            return -1;
        }
    }
    if (strcmp(digits + 8, DEADLETTER_SUFFIX) != 0) {
        return -1;
    }
    int64_t number = strtoll(digits, NULL, 10);
    return number <= DEADLETTER_NUMBER_MAX ? number : -1;
}

/* Removes the files above number (a rotation no commit reached) and finds the oldest file. */
static int scan_files(struct deadletter *d, uint32_t number)
{
    char dir[DS_PATH_MAX];
    base_dir(d, dir, sizeof(dir));
    DIR *listing = opendir(dir);
    if (listing == NULL) {
        int err = -errno;
        ds_log_error("%s: cannot list: %s", dir, ds_strerror(err));
        return err;
    }
    d->oldest = number;
    int rc = 0;
    for (struct dirent *e = readdir(listing); e != NULL && rc == 0; e = readdir(listing)) {
        int64_t found = entry_number(d, e->d_name);
        if (found >= 0 && found < d->oldest) {
            d->oldest = (uint32_t)found;
        }
        if (found > (int64_t)number) {
            char path[DS_PATH_MAX];
            deadletter_path(d, (uint32_t)found, path, sizeof(path));
            ds_log_warn("%s: removing dead letters no commit reached (their events are read "
                        "again)",
                        path);
            rc = unlink(path) == 0 ? 0 : -errno;
        }
    }
    closedir(listing);
    return rc;
}

/* A directory written before rotation holds deadletter.jsonl; it becomes file 0, whose
 * position is the length its MANIFEST holds. */
static int adopt_legacy(struct deadletter *d, const char *legacy_path, uint32_t number)
{
    struct stat sb;
    if (stat(legacy_path, &sb) != 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    char first[DS_PATH_MAX];
    deadletter_path(d, 0, first, sizeof(first));
    if (number != 0 || access(first, F_OK) == 0) {
        ds_log_error("%s: a dead-letter file of the old layout beside numbered ones (%s); move it "
                     "out of the directory",
                     legacy_path, first);
        return -EEXIST;
    }
    if (rename(legacy_path, first) != 0) {
        int err = -errno;
        ds_log_error("%s: cannot rename to %s: %s", legacy_path, first, ds_strerror(err));
        return err;
    }
    ds_log_info("%s: renamed to %s (dead letters rotate into numbered files)", legacy_path, first);
    return sync_dir(d);
}

/* Opens file number, cut back to length (or shorter when lines were lost), for appending. */
static int open_current(struct deadletter *d, uint32_t number, uint64_t length)
{
    char path[DS_PATH_MAX];
    deadletter_path(d, number, path, sizeof(path));
    bool existed = access(path, F_OK) == 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int err = -errno;
        ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        if (fd >= 0) {
            close(fd);
        }
        return err;
    }
    if ((uint64_t)sb.st_size > length) {
        ds_log_warn("%s: cutting %llu bytes of dead letters no commit reached (their events are "
                    "read again)",
                    path, (unsigned long long)((uint64_t)sb.st_size - length));
        if (ftruncate(fd, (off_t)length) != 0 || fdatasync(fd) != 0) {
            int err = -errno;
            close(fd);
            return err;
        }
    } else if ((uint64_t)sb.st_size < length) {
        ds_log_warn("%s: %llu bytes, shorter than the %llu committed: dead letters were lost", path,
                    (unsigned long long)sb.st_size, (unsigned long long)length);
    }
    d->file = fdopen(fd, "a");
    if (d->file == NULL) {
        int err = -errno;
        close(fd);
        return err;
    }
    d->number = number;
    return existed ? 0 : sync_dir(d);
}

int deadletter_open(struct deadletter *d, const char *legacy_path, uint64_t committed,
                    uint64_t file_bytes_max, int32_t stream_day)
{
    ASSERT(file_bytes_max >= 1 && file_bytes_max <= DEADLETTER_FILE_BYTES_MAX);
    size_t len = strlen(legacy_path);
    size_t suffix = strlen(DEADLETTER_SUFFIX);
    ASSERT(len > suffix && len - suffix < sizeof(d->base));
    ASSERT(strcmp(legacy_path + len - suffix, DEADLETTER_SUFFIX) == 0);
    memset(d, 0, sizeof(*d));
    memcpy(d->base, legacy_path, len - suffix);
    d->base[len - suffix] = '\0';
    d->file_bytes_max = file_bytes_max;
    d->held_day = stream_day >= 0 ? stream_day : DEADLETTER_DAY_UNKNOWN;
    uint64_t number = committed >> DEADLETTER_LENGTH_BITS;
    uint64_t length = committed & ((1ull << DEADLETTER_LENGTH_BITS) - 1u);
    if (number > DEADLETTER_NUMBER_MAX) {
        ds_log_error("%s: committed dead-letter position %llu names no file", legacy_path,
                     (unsigned long long)committed);
        return -DS_ECORRUPT;
    }
    int rc = adopt_legacy(d, legacy_path, (uint32_t)number);
    rc = rc == 0 ? scan_files(d, (uint32_t)number) : rc;
    rc = rc == 0 ? open_current(d, (uint32_t)number, length) : rc;
    ASSERT(rc != 0 || d->oldest <= d->number);
    return rc;
}

void deadletter_write(struct deadletter *d, const char *record, size_t len)
{
    ASSERT(d->file != NULL);
    fwrite(record, 1, len, d->file);
    fputc('\n', d->file);
}

/* Remembers the closing day of the file just rotated; a full table folds its oldest entry
 * into held_day, which can only make that file's day later (kept longer). */
static void closed_push(struct deadletter *d, uint32_t number, int32_t day)
{
    if (d->closed_count == DEADLETTER_CLOSED_MAX) {
        int32_t folded = d->closed[0].day;
        d->held_day = folded == DEADLETTER_DAY_UNKNOWN || d->held_day == DEADLETTER_DAY_UNKNOWN
                          ? DEADLETTER_DAY_UNKNOWN
                          : (folded > d->held_day ? folded : d->held_day);
        memmove(&d->closed[0], &d->closed[1], (d->closed_count - 1) * sizeof(d->closed[0]));
        d->closed_count--;
    }
    d->closed[d->closed_count++] = (struct deadletter_closed){.number = number, .day = day};
}

static int rotate(struct deadletter *d, int32_t stream_day)
{
    if (d->number == DEADLETTER_NUMBER_MAX) {
        ds_log_error("%s: %u dead-letter files, the most a position can name", d->base,
                     DEADLETTER_NUMBER_MAX + 1u);
        return -DS_ELIMIT;
    }
    char path[DS_PATH_MAX];
    deadletter_path(d, d->number + 1, path, sizeof(path));
    /* O_TRUNC: a file of this number left by a crash before its commit holds nothing
     * acknowledged. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = -errno;
        ds_log_error("%s: cannot create: %s", path, ds_strerror(err));
        return err;
    }
    FILE *next = fdopen(fd, "a");
    if (next == NULL) {
        int err = -errno;
        close(fd);
        return err;
    }
    int rc = sync_dir(d);
    if (rc != 0) {
        fclose(next);
        return rc;
    }
    fclose(d->file); /* flushed and synced by the caller */
    d->file = next;
    closed_push(d, d->number, stream_day >= 0 ? stream_day : DEADLETTER_DAY_UNKNOWN);
    d->number++;
    return 0;
}

int deadletter_sync(struct deadletter *d, int32_t stream_day, uint64_t *position)
{
    ASSERT(d->file != NULL);
    if (fflush(d->file) != 0 || fdatasync(fileno(d->file)) != 0) {
        int err = -errno;
        ds_log_error("%s: cannot sync dead letters: %s", d->base, ds_strerror(err));
        return err;
    }
    long end = ftell(d->file);
    ASSERT(end >= 0);
    if (end > 0 && (uint64_t)end >= d->file_bytes_max) {
        int rc = rotate(d, stream_day);
        if (rc != 0) {
            return rc;
        }
        end = 0;
    }
    if ((uint64_t)end >= 1ull << DEADLETTER_LENGTH_BITS) {
        ds_log_error("%s: a dead-letter file of %ld bytes", d->base, end);
        return -DS_ELIMIT;
    }
    *position = DEADLETTER_POSITION(d->number, (uint64_t)end);
    return 0;
}

/* The closing day of rotated file number; unknown days become stream_day once it is known. */
static int32_t closed_day(struct deadletter *d, uint32_t number, int32_t stream_day)
{
    int32_t *day = &d->held_day;
    for (uint32_t i = 0; i < d->closed_count; i++) {
        if (d->closed[i].number == number) {
            day = &d->closed[i].day;
        }
    }
    if (*day == DEADLETTER_DAY_UNKNOWN && stream_day >= 0) {
        *day = stream_day;
    }
    return *day;
}

int deadletter_retire(struct deadletter *d, int32_t floor, int32_t stream_day)
{
    int removed = 0;
    while (floor > 0 && d->oldest < d->number) {
        int32_t day = closed_day(d, d->oldest, stream_day);
        if (day == DEADLETTER_DAY_UNKNOWN || day >= floor) {
            break;
        }
        char path[DS_PATH_MAX];
        deadletter_path(d, d->oldest, path, sizeof(path));
        if (unlink(path) != 0 && errno != ENOENT) {
            int err = -errno;
            ds_log_error("%s: cannot remove: %s", path, ds_strerror(err));
            return err;
        }
        ds_log_info("%s: removed (closed on a day below the retention floor)", path);
        if (d->closed_count > 0 && d->closed[0].number == d->oldest) {
            memmove(&d->closed[0], &d->closed[1], (d->closed_count - 1) * sizeof(d->closed[0]));
            d->closed_count--;
        }
        d->oldest++;
        removed++;
    }
    ASSERT(d->oldest <= d->number);
    return removed;
}

void deadletter_close(struct deadletter *d)
{
    if (d != NULL && d->file != NULL) {
        fclose(d->file);
        d->file = NULL;
    }
}
