/*
 * Opening and closing handles (index.h: index_open, index_open_reader, index_refresh,
 * index_replaced, index_close): a writer checks FORMAT, takes the lock, loads the checkpoint and
 * scans the log past it, cutting a torn tail; a reader does the same without the lock and
 * without cutting, and refreshes by scanning what the writer appended since.
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

/* ---- open and close ------------------------------------------------------------------------ */

int index_create(const struct index_config *cfg, bool writer, struct index **out)
{
    int rc = index_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct index *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->writer = writer;
    g->log_fd = -1;
    g->lock_fd = -1;
    snprintf(g->dir, sizeof(g->dir), "%s", cfg->dir);
    pthread_mutex_init(&g->cursor_lock, NULL);
    pthread_rwlock_init(&g->swap_lock, NULL);
    /* The cursor grows with the partitions the builder follows (20 bytes each). */
    int grown = index_bytes_grow(&g->cursor, &g->cursor_cap, 1);
    grown = grown == 0 ? index_bytes_grow(&g->cursor_spare, &g->cursor_spare_cap, 1) : grown;
    g->scan = malloc(INDEX_IO_BUFFER_BYTES);
    g->batch_entries_max = cfg->batch_entries_max;
    g->checkpoint_bytes = cfg->checkpoint_bytes;
    g->seal_batch_bytes =
        cfg->seal_batch_bytes > 0 ? cfg->seal_batch_bytes : INDEX_SEAL_MOVE_BATCH_BYTES;
    *out = g;
    return grown == 0 && g->scan != NULL ? 0 : -ENOMEM;
}

static int index_writer_buffers(struct index *g)
{
    size_t n = g->batch_entries_max;
    g->buffer = malloc(INDEX_IO_BUFFER_BYTES);
    g->items = malloc(n * sizeof(*g->items));
    g->items_spare = malloc(n * sizeof(*g->items_spare));
    g->tails = malloc(n * INDEX_TAIL_BYTES_MAX);
    g->run = malloc(n * sizeof(*g->run));
    g->publish = malloc(n * sizeof(*g->publish));
    bool ok = g->buffer && g->items && g->items_spare && g->tails && g->run && g->publish;
    return ok ? 0 : -ENOMEM;
}

/* Table, checkpoint, then the log beyond it. */
static int index_load(struct index *g, const struct index_config *cfg)
{
    int rc = index_log_open(g, cfg);
    if (rc != 0) {
        return rc;
    }
    g->slots = calloc((size_t)1 << g->slots_log2, sizeof(*g->slots));
    if (g->slots == NULL) {
        return -ENOMEM;
    }
    g->log_end = INDEX_LOG_HEADER_BYTES;
    rc = index_checkpoint_load(g);
    if (rc != 0) {
        return rc;
    }
    g->checkpoint_end = g->cursor_at != 0 ? g->log_end : 0;
    uint64_t size = 0;
    uint64_t end = 0;
    rc = index_catch_up(g, &size, &end);
    if (g->checkpoint_end == 0 && g->sealed_end != 0) {
        g->checkpoint_end = g->sealed_end; /* a compacted log is its own checkpoint */
    }
    if (rc != 0 || !g->writer || size == end) {
        return rc;
    }
    ds_log_warn("%s/log: cutting %" PRIu64 " bytes after the last complete apply (an apply a "
                "crash interrupted, or damage); the builder replays them",
                g->dir, size - end);
    if (ftruncate(g->log_fd, (off_t)end) != 0 || fsync(g->log_fd) != 0) {
        rc = -errno;
        ds_log_error("%s/log: cannot cut: %s", g->dir, ds_strerror(rc));
    }
    return rc;
}

int index_open(const struct index_config *cfg, struct index **out)
{
    ASSERT(out != NULL);
    struct index *g = NULL;
    int rc = index_create(cfg, true, &g);
    rc = rc == 0 ? index_format_check(cfg->dir, true) : rc;
    rc = rc == 0 ? index_lock(g) : rc;
    rc = rc == 0 ? index_writer_buffers(g) : rc;
    if (rc == 0) {
        /* A compaction a crash interrupted before its rename: the log it was made from stays. */
        char tmp[DS_PATH_MAX];
        index_path(g, "log.compact", tmp);
        rc = unlink(tmp) == 0 || errno == ENOENT ? 0 : -errno;
    }
    rc = rc == 0 ? index_load(g, cfg) : rc;
    rc = rc == 0 ? index_checkpointer_start(g, cfg) : rc;
    if (rc != 0) {
        index_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int index_open_reader(const struct index_config *cfg, struct index **out)
{
    ASSERT(out != NULL);
    for (int attempt = 0;; attempt++) {
        struct index *g = NULL;
        int rc = index_create(cfg, false, &g);
        rc = rc == 0 ? index_format_check(cfg->dir, false) : rc;
        rc = rc == 0 ? index_load(g, cfg) : rc;
        /* A compaction replaced the log between opening it and reading DIR/table (which then
         * names the new log's records): open again. */
        bool raced = rc == -DS_ECORRUPT && g != NULL && g->log_fd >= 0 && index_replaced(g);
        if (rc != 0) {
            index_close(g);
            if (raced && attempt < 3) {
                continue;
            }
            return rc;
        }
        *out = g;
        return 0;
    }
}

int index_refresh(struct index *g)
{
    ASSERT(g != NULL);
    ASSERT(!g->writer);
    uint64_t size = 0;
    uint64_t end = 0;
    return index_catch_up(g, &size, &end);
}

bool index_replaced(struct index *g)
{
    ASSERT(g != NULL);
    char path[DS_PATH_MAX];
    index_path(g, "log", path);
    struct stat now;
    struct stat mine;
    if (stat(path, &now) != 0 || fstat(g->log_fd, &mine) != 0) {
        return false;
    }
    return now.st_dev != mine.st_dev || now.st_ino != mine.st_ino;
}

void index_close(struct index *g)
{
    if (g == NULL) {
        return;
    }
    index_checkpointer_stop(g);
    /* A compacted log with less than checkpoint_bytes appended is its own checkpoint: opening
     * reads its sealed records' section headers and the rest, and the table's 28 bytes per
     * customer stay off the disk. */
    bool sealed_enough = g->sealed_end != 0 && g->log_end - g->sealed_end < g->checkpoint_bytes;
    if (g->checkpointer != NULL && !g->failed && g->slots != NULL && g->log_fd >= 0 &&
        g->buffered == 0 && !sealed_enough) {
        (void)index_checkpoint_write(g); /* logged; the next open reads more log instead */
    }
    if (g->log_fd >= 0) {
        close(g->log_fd);
    }
    if (g->lock_fd >= 0) {
        close(g->lock_fd);
    }
    pthread_mutex_destroy(&g->cursor_lock);
    pthread_rwlock_destroy(&g->swap_lock);
    free(g->slots);
    free(g->cursor);
    free(g->cursor_spare);
    free(g->scan);
    free(g->buffer);
    free(g->items);
    free(g->items_spare);
    free(g->tails);
    free(g->run);
    free(g->publish);
    index_checkpointer_free(g->checkpointer);
    free(g);
}
