/*
 * The index directory's files (index_private.h): DIR/FORMAT, the log's header, opening DIR/log
 * and the writer's lock on DIR/lock. The formats are in store.c's opening comment. Rejected: a
 * lock on DIR/log itself (a compaction replaces that file by rename, and the lock must outlive
 * it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_private.h"

/* ---- files --------------------------------------------------------------------------------- */

/* Checks DIR/FORMAT, writing it (and creating DIR) when create and the directory is new. */
int index_format_check(const char *dir, bool create)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/FORMAT", dir);
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, INDEX_FORMAT_BYTES_MAX, &text, &len);
    if (rc == -ENOENT && create) {
        rc = ds_mkdir_p(dir);
        rc =
            rc == 0 ? ds_write_file_atomic(path, INDEX_FORMAT_TEXT, strlen(INDEX_FORMAT_TEXT)) : rc;
        if (rc != 0) {
            ds_log_error("%s: cannot create: %s", path, ds_strerror(rc));
        }
        return rc;
    }
    if (rc == -ENOENT) {
        return rc;
    }
    if (rc != 0 && rc != -EFBIG) {
        ds_log_error("%s: cannot read: %s", path, ds_strerror(rc));
        return rc;
    }
    bool ours =
        rc == 0 && len == strlen(INDEX_FORMAT_TEXT) && memcmp(text, INDEX_FORMAT_TEXT, len) == 0;
    free(text);
    if (!ours) {
        ds_log_error("%s: not an index of this version of dayshard (expected \"dayshard-gsi 2\"); "
                     "`dayshard gsi rebuild` makes a new one",
                     path);
        return -DS_EFORMAT;
    }
    return 0;
}

void index_log_header_make(uint32_t slots_log2, uint8_t *dst)
{
    memset(dst, 0, INDEX_LOG_HEADER_BYTES);
    memcpy(dst, INDEX_LOG_MAGIC, sizeof(INDEX_LOG_MAGIC) - 1);
    ds_put_le32(dst + 24, slots_log2);
    ds_put_le32(dst + 28, ds_crc32c(0, dst, 28));
}

/* Opens DIR/log (creating it with a table of cfg's size when the writer finds none) and reads
 * its table size (a seal's new log may have a larger one than the log it replaced). */
int index_log_open(struct index *g, const struct index_config *cfg)
{
    char path[DS_PATH_MAX];
    index_path(g, "log", path);
    int flags = g->writer ? O_RDWR | O_CREAT : O_RDONLY;
    g->log_fd = open(path, flags | O_CLOEXEC, 0644);
    if (g->log_fd < 0) {
        int err = -errno;
        if (err != -ENOENT) {
            ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        }
        return err;
    }
    uint8_t header[INDEX_LOG_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, header, sizeof(header), 0, &got);
    if (rc == 0 && got < sizeof(header) && g->writer) {
        /* New, or a crash cut the header before anything followed it. */
        index_log_header_make(cfg->table_slots_log2, header);
        rc = ftruncate(g->log_fd, 0) == 0 ? 0 : -errno;
        rc = rc == 0 ? ds_pwrite_full(g->log_fd, header, sizeof(header), 0) : rc;
        rc = rc == 0 && fsync(g->log_fd) != 0 ? -errno : rc;
        rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
        got = rc == 0 ? sizeof(header) : got;
    }
    if (rc != 0) {
        ds_log_error("%s: cannot read or write the header: %s", path, ds_strerror(rc));
        return rc;
    }
    if (got < sizeof(header)) {
        return -ENOENT; /* a reader before the writer finished creating it */
    }
    uint32_t log2 = ds_get_le32(header + 24);
    if (memcmp(header, INDEX_LOG_MAGIC, sizeof(INDEX_LOG_MAGIC) - 1) != 0 ||
        ds_get_le32(header + 28) != ds_crc32c(0, header, 28) || log2 < INDEX_TABLE_SLOTS_LOG2_MIN ||
        log2 > INDEX_TABLE_SLOTS_LOG2_MAX) {
        ds_log_error("%s: not an index log (bad header); " INDEX_REPAIR_HINT, path);
        return -DS_EFORMAT;
    }
    if (g->writer && log2 != cfg->table_slots_log2) {
        ds_log_info("%s: keeps its table of 2^%" PRIu32 " slots (2^%" PRIu32
                    " asked: the size of a new index; seals grow the table, never shrink it)",
                    g->dir, log2, cfg->table_slots_log2);
    }
    g->slots_log2 = log2;
    g->mask = (1ull << log2) - 1;
    return 0;
}

int index_lock(struct index *g)
{
    char path[DS_PATH_MAX];
    index_path(g, "lock", path);
    g->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (g->lock_fd < 0) {
        int err = -errno;
        ds_log_error("%s: cannot open: %s", path, ds_strerror(err));
        return err;
    }
    if (flock(g->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno == EWOULDBLOCK ? -DS_ELOCKED : -errno;
        ds_log_error("%s: %s", g->dir, ds_strerror(err));
        return err;
    }
    return 0;
}
