/*
 * Checkpoints of the slot table (index_private.h, index.h: index_checkpoint_stats_get): loading
 * DIR/table at open, and the writer's checkpoints, written after syncing the log every
 * checkpoint_bytes of log and at close, by a thread of the writer's own while applies go on
 * (or inline when configured). The reasons and the rejected alternatives are with struct
 * index_checkpointer below.
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

/* ---- checkpoints --------------------------------------------------------------------------- */

/* Reads the slots, then the cursor of cursor_len bytes after them; crc covers both. */
static int index_checkpoint_body_read(struct index *g, int fd, uint32_t count, uint32_t cursor_len,
                                      uint32_t crc)
{
    uint8_t *buf = g->scan;
    const size_t per_read = INDEX_IO_BUFFER_BYTES / INDEX_CHECKPOINT_ENTRY_BYTES;
    uint32_t sum = 0;
    uint64_t at = INDEX_TABLE_HEADER_BYTES;
    int rc = 0;
    for (uint32_t done = 0; rc == 0 && done < count;) {
        size_t n = count - done < per_read ? count - done : per_read;
        size_t got = 0;
        rc = index_pread_all(fd, buf, n * INDEX_CHECKPOINT_ENTRY_BYTES, at, &got);
        if (rc == 0 && got != n * INDEX_CHECKPOINT_ENTRY_BYTES) {
            rc = -DS_ECORRUPT;
        }
        for (size_t k = 0; rc == 0 && k < n; k++) {
            const uint8_t *e = buf + k * INDEX_CHECKPOINT_ENTRY_BYTES;
            uint32_t index = ds_get_le32(e);
            struct index_slot slot;
            memcpy(&slot, e + 4, sizeof(slot));
            if (index > g->mask || slot.tag == 0 || slot.head >= g->log_end) {
                rc = -DS_ECORRUPT;
                break;
            }
            g->slots[index] = slot;
        }
        sum = ds_crc32c(sum, buf, got);
        at += got;
        done += (uint32_t)n;
    }
    if (rc == 0 && index_bytes_grow(&g->cursor, &g->cursor_cap, cursor_len) != 0) {
        return -ENOMEM;
    }
    size_t got = 0;
    rc = rc == 0 ? index_pread_all(fd, g->cursor, cursor_len, at, &got) : rc;
    if (rc == 0 && got != cursor_len) {
        rc = -DS_ECORRUPT;
    }
    g->cursor_len = cursor_len;
    sum = ds_crc32c(sum, g->cursor, got);
    return rc == 0 && sum != crc ? -DS_ECORRUPT : rc;
}

/* Loads DIR/table when it covers a cursor record of this log; otherwise leaves the table empty
 * (and the writer removes the stale file). */
int index_checkpoint_load(struct index *g)
{
    char path[DS_PATH_MAX];
    index_path(g, "table", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    uint8_t h[INDEX_TABLE_HEADER_BYTES];
    size_t got = 0;
    int rc = index_pread_all(fd, h, sizeof(h), 0, &got);
    uint64_t end = ds_get_le64(h + 32);
    uint64_t cursor_at = ds_get_le64(h + 40);
    uint32_t count = ds_get_le32(h + 56);
    uint32_t cursor_len = ds_get_le32(h + 28);
    uint64_t size = 0;
    uint8_t record[INDEX_RECORD_PREFIX_BYTES];
    size_t record_got = 0;
    bool ok = rc == 0 && got == sizeof(h) &&
              memcmp(h, INDEX_TABLE_MAGIC, sizeof(INDEX_TABLE_MAGIC) - 1) == 0 &&
              ds_get_le32(h + 60) == ds_crc32c(0, h, 60) && ds_get_le32(h + 24) == g->slots_log2 &&
              count <= g->mask + 1 && index_log_size(g, &size) == 0 && end <= size &&
              cursor_at >= INDEX_LOG_HEADER_BYTES && cursor_at < end &&
              index_pread_all(g->log_fd, record, sizeof(record), cursor_at, &record_got) == 0 &&
              record_got == sizeof(record) && ds_get_le32(record) == ds_get_le32(h + 48) &&
              cursor_at + ds_get_le32(record + 4) == end && cursor_len <= INDEX_CURSOR_BYTES_MAX &&
              /* a whole cursor record (older logs), or a delta whose result the table holds */
              ((record[8] == INDEX_RECORD_CURSOR && cursor_len == 0) ||
               (record[8] == INDEX_RECORD_CURSOR_DELTA && (record[9] & INDEX_DELTA_MORE) == 0));
    bool touched = ok; /* the body read writes slots and the cursor */
    if (ok) {
        g->log_end = end;
        ok = index_checkpoint_body_read(g, fd, count, cursor_len, ds_get_le32(h + 52)) == 0;
    }
    close(fd);
    if (ok) {
        /* The cursor record it covers, read back through the scanner's checks (a delta record
         * is checked against the table's cursor, not applied to it again). */
        g->log_end = cursor_at;
        g->cursor_preloaded_at = record[8] == INDEX_RECORD_CURSOR_DELTA ? cursor_at : 0;
        uint64_t covered = 0;
        rc = index_catch_up_to(g, end, &covered);
        g->cursor_preloaded_at = 0;
        if (rc != 0) {
            return rc;
        }
        ok = covered == end && g->cursor_at == cursor_at;
    }
    if (!ok && !g->writer) {
        /* The writer syncs the log before it writes a checkpoint and never cuts the log below
         * one, so this is damage (of the table, or of the log it covers). A writer reads the
         * whole log instead (and its builder replays what the log lost). */
        ds_log_error("%s: not a checkpoint of %s/log (damaged, or the log lost what it "
                     "covers); " INDEX_REPAIR_HINT,
                     path, g->dir);
        return -DS_ECORRUPT;
    }
    if (!ok) {
        ds_log_warn("%s: not a checkpoint of this log; reading the whole log", path);
        if (touched) {
            memset(g->slots, 0, (size_t)INDEX_SLOT_BYTES << g->slots_log2);
        }
        g->log_end = INDEX_LOG_HEADER_BYTES;
        g->cursor_len = 0;
        g->cursor_at = 0;
        g->cursor_crc = 0;
        g->cursor_link_crc = 0;
        g->applies = 0;
        if (g->writer && unlink(path) != 0) {
            return -errno;
        }
    }
    return 0;
}

/* Writes the used slots after the header of DIR/table.tmp through buf (INDEX_IO_BUFFER_BYTES). */
static int index_checkpoint_body_write(const struct index *g, uint8_t *buf, int fd, uint32_t *count,
                                       uint32_t *crc)
{
    uint64_t at = INDEX_TABLE_HEADER_BYTES;
    size_t used = 0;
    uint32_t sum = 0;
    uint32_t n = 0;
    for (uint64_t i = 0; i <= g->mask; i++) {
        const struct index_slot *slot = &g->slots[i];
        if (slot->head == 0) {
            continue; /* empty, or claimed by an apply that failed */
        }
        ds_put_le32(buf + used, (uint32_t)i);
        memcpy(buf + used + 4, slot, sizeof(*slot));
        used += INDEX_CHECKPOINT_ENTRY_BYTES;
        n++;
        if (used + INDEX_CHECKPOINT_ENTRY_BYTES > INDEX_IO_BUFFER_BYTES || i == g->mask) {
            int rc = ds_pwrite_full(fd, buf, used, at);
            if (rc != 0) {
                return rc;
            }
            sum = ds_crc32c(sum, buf, used);
            at += used;
            used = 0;
        }
    }
    if (used > 0) {
        int rc = ds_pwrite_full(fd, buf, used, at);
        if (rc != 0) {
            return rc;
        }
        sum = ds_crc32c(sum, buf, used);
        at += used;
    }
    /* The whole cursor after the slots: the starting point for the delta records after the
     * cursor record this table names (the caller holds table_lock, so it is that record's). */
    if (g->cursor_len > 0) {
        int rc = ds_pwrite_full(fd, g->cursor, g->cursor_len, at);
        if (rc != 0) {
            return rc;
        }
        sum = ds_crc32c(sum, g->cursor, g->cursor_len);
    }
    *count = n;
    *crc = sum;
    return 0;
}

/* The writer's checkpoints, done by a thread of the writer's beside the applies (they waited
 * 0-42 ms, and the syncs took 17-60 ms instead of 150-285). Rejected (kept as
 * checkpoint_inline, to compare): the apply that passes the interval doing the whole
 * checkpoint itself, an fdatasync of up to 512 MiB of log and then the table written and
 * synced, on the builder's thread (applies waited 230-430 ms every ~10M events in
 * bench_index_e2e's lag mode). The thread:
 *
 * - it writes the table (the used slots and the header) to DIR/table.tmp while holding
 *   table_lock, which index_apply holds for its whole run, so the table it writes is the table of
 *   exactly the last cursor record (log_end, cursor_at, cursor_crc are read under the same lock).
 *   The builder spends most of its time scanning base data between applies, so the ~50 ms of
 *   the write overlap that; an apply that comes meanwhile waits for the rest of it;
 * - it then syncs the log (so DIR/table never names a cursor record the disk may lose), the
 *   temp file, renames it into place and syncs the directory, without the lock;
 * - between checkpoints it starts the writeback of each INDEX_WRITEBACK_BYTES of new log, so a
 *   checkpoint's fdatasync finds little left to write and the disk sees a steady stream.
 *
 * One checkpoint is in flight at a time; the applying thread collects its outcome after a later
 * apply, and a failed one (logged) is retried after checkpoint_bytes / 8 more log. The crash
 * contract is the one before: a checkpoint is the table at a cursor record the log holds
 * durably. Rejected: writing the table on the applying thread and only the syncs on the thread
 * (measured: the write costs 50-60 ms of CPU for 600k customers, most of a 2^21-slot scan and
 * the page cache copy, and the apply waited for all of it: max lag 145-200 ms); a copy of the
 * table for the thread (up to 48 MiB more memory per checkpoint); a fuzzy checkpoint written in
 * chunks between applies and replayed from its start (a change of what DIR/table means for
 * readers and index_check). */
struct index_checkpointer {
    bool inline_sync;                    /* cfg->checkpoint_inline */
    uint64_t retry_end;                  /* writer: no checkpoint before log_end reaches it */
    uint64_t writeback_requested;        /* writer: log_end of the last writeback request */
    struct index_checkpoint_stats stats; /* __atomic, relaxed */
    pthread_mutex_t table_lock; /* held by index_apply, and by the thread writing the table */
    uint8_t *buffer;            /* the thread's INDEX_IO_BUFFER_BYTES for the table's body */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* under lock (busy is written by the writer only) */
    bool stop;
    bool busy;     /* a checkpoint asked for and not yet collected */
    bool finished; /* the thread is done with it: rc, end */
    int rc;
    uint64_t end;          /* the log prefix it covers */
    uint64_t writeback_to; /* start the log's writeback up to here */
};

/* Log written between two requests to start its writeback: enough for large writes, small
 * enough that a checkpoint's fdatasync finds at most this much dirty. */
#define INDEX_WRITEBACK_BYTES (8u << 20)

static void index_stat_max(uint64_t *max, uint64_t *last, uint64_t ns)
{
    __atomic_store_n(last, ns, __ATOMIC_RELAXED);
    if (ns > __atomic_load_n(max, __ATOMIC_RELAXED)) {
        __atomic_store_n(max, ns, __ATOMIC_RELAXED);
    }
}

/* Writes the table (used slots and header) to DIR/table.tmp through buf (INDEX_IO_BUFFER_BYTES),
 * at a cursor boundary: the writer's thread between applies, or the checkpoint thread under
 * table_lock. Returns the open temp file in *fd_out and the log end it covers in *end, or a
 * negated errno with nothing left open. */
static int index_checkpoint_begin(struct index *g, uint8_t *buf, int *fd_out, uint64_t *end)
{
    ASSERT(g->writer);
    ASSERT(g->buffered == 0);
    uint64_t t0 = ds_clock_ns();
    char tmp[DS_PATH_MAX];
    index_path(g, "table.tmp", tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    uint32_t count = 0;
    uint32_t crc = 0;
    rc = rc == 0 ? index_checkpoint_body_write(g, buf, fd, &count, &crc) : rc;
    if (rc == 0) {
        uint8_t h[INDEX_TABLE_HEADER_BYTES] = {0};
        memcpy(h, INDEX_TABLE_MAGIC, sizeof(INDEX_TABLE_MAGIC) - 1);
        ds_put_le32(h + 24, g->slots_log2);
        ds_put_le32(h + 28, (uint32_t)g->cursor_len);
        ds_put_le64(h + 32, g->log_end);
        ds_put_le64(h + 40, g->cursor_at);
        ds_put_le32(h + 48, g->cursor_crc);
        ds_put_le32(h + 52, crc);
        ds_put_le32(h + 56, count);
        ds_put_le32(h + 60, ds_crc32c(0, h, 60));
        rc = ds_pwrite_full(fd, h, sizeof(h), 0);
    }
    if (rc != 0) {
        ds_log_error("%s: cannot write the checkpoint: %s", tmp, ds_strerror(rc));
        if (fd >= 0) {
            close(fd);
        }
        (void)unlink(tmp);
        return rc;
    }
    struct index_checkpointer *c = g->checkpointer;
    index_stat_max(&c->stats.table_ns_max, &c->stats.table_ns_last, ds_clock_ns() - t0);
    *fd_out = fd;
    *end = g->log_end;
    return 0;
}

/* Makes a begun checkpoint durable and current: the log first (so DIR/table never names a
 * cursor record the disk may lose), then the temp file, the rename and the directory. Takes
 * fd (closed here). Any thread, without table_lock: it touches only the files. */
static int index_checkpoint_finish(struct index *g, int fd, uint64_t end)
{
    uint64_t t0 = ds_clock_ns();
    char path[DS_PATH_MAX];
    char tmp[DS_PATH_MAX];
    index_path(g, "table", path);
    index_path(g, "table.tmp", tmp);
    int rc = fdatasync(g->log_fd) == 0 ? 0 : -errno;
    rc = rc == 0 && fdatasync(fd) != 0 ? -errno : rc;
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
    }
    rc = rc == 0 && rename(tmp, path) != 0 ? -errno : rc;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    struct index_checkpointer *c = g->checkpointer;
    if (rc != 0) {
        ds_log_error("%s: cannot write the checkpoint: %s", path, ds_strerror(rc));
        (void)unlink(tmp);
        return rc;
    }
    uint64_t ns = ds_clock_ns() - t0;
    index_stat_max(&c->stats.sync_ns_max, &c->stats.sync_ns_last, ns);
    __atomic_store_n(&c->stats.log_bytes_last, end, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->stats.done, 1, __ATOMIC_RELAXED);
    ds_log_info("%s: checkpoint of %" PRIu64 " MiB of log: table written in %.1f ms, log and "
                "table synced in %.1f ms",
                path, end >> 20,
                (double)__atomic_load_n(&c->stats.table_ns_last, __ATOMIC_RELAXED) / 1e6,
                (double)ns / 1e6);
    return 0;
}

/* A whole checkpoint on the calling thread (at close, and after each apply with
 * checkpoint_inline). Writer thread only, between applies (it borrows the write buffer), with
 * no checkpoint of the thread in flight. */
int index_checkpoint_write(struct index *g)
{
    ASSERT(g->writer);
    ASSERT(!g->checkpointer->busy);
    if (g->cursor_at == 0 || g->checkpoint_end == g->log_end) {
        return 0;
    }
    struct index_checkpointer *c = g->checkpointer;
    uint64_t t0 = ds_clock_ns();
    __atomic_add_fetch(&c->stats.started, 1, __ATOMIC_RELAXED);
    int fd = -1;
    uint64_t end = 0;
    int rc = index_checkpoint_begin(g, g->buffer, &fd, &end);
    rc = rc == 0 ? index_checkpoint_finish(g, fd, end) : rc;
    index_stat_max(&c->stats.apply_wait_ns_max, &c->stats.apply_wait_ns_last, ds_clock_ns() - t0);
    if (rc != 0) {
        __atomic_add_fetch(&c->stats.failed, 1, __ATOMIC_RELAXED);
        return rc;
    }
    g->checkpoint_end = end;
    return 0;
}

/* One checkpoint on the thread: the table under table_lock, then the syncs without it. */
static int index_checkpoint_take(struct index *g, uint64_t *end)
{
    struct index_checkpointer *c = g->checkpointer;
    int fd = -1;
    pthread_mutex_lock(&c->table_lock);
    /* After a failed apply the log may end inside one: no checkpoint until a reopen cuts it. */
    int rc = g->failed ? -EIO : index_checkpoint_begin(g, c->buffer, &fd, end);
    pthread_mutex_unlock(&c->table_lock);
    return rc == 0 ? index_checkpoint_finish(g, fd, *end) : rc;
}

/* The thread: takes each checkpoint asked for and starts the log's writeback as it grows.
 * Stops once asked and nothing is left to take. */
static void *index_checkpointer_main(void *arg)
{
    struct index *g = arg;
    struct index_checkpointer *c = g->checkpointer;
    pthread_setname_np(pthread_self(), "ds-gsi-ckpt");
    uint64_t written_back = 0; /* writeback started up to here */
    pthread_mutex_lock(&c->lock);
    for (;;) { /* runs until stopped; each turn does one step */
        while (!c->stop && !(c->busy && !c->finished) && c->writeback_to <= written_back) {
            pthread_cond_wait(&c->wake, &c->lock);
        }
        if (c->busy && !c->finished) {
            pthread_mutex_unlock(&c->lock);
            uint64_t end = 0;
            int rc = index_checkpoint_take(g, &end);
            pthread_mutex_lock(&c->lock);
            c->rc = rc;
            c->end = end;
            c->finished = true;
            written_back = rc == 0 && end > written_back ? end : written_back;
            pthread_cond_broadcast(&c->wake);
        } else if (c->writeback_to > written_back) {
            uint64_t to = c->writeback_to;
            pthread_mutex_unlock(&c->lock);
            /* Best effort: an error here shows again at the checkpoint's fdatasync. */
            (void)sync_file_range(g->log_fd, (off_t)written_back, (off_t)(to - written_back),
                                  SYNC_FILE_RANGE_WRITE);
            written_back = to;
            pthread_mutex_lock(&c->lock);
        } else {
            break; /* stopped with nothing in flight */
        }
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* The outcome of a checkpoint the thread finished (non-blocking; writer thread). */
static void index_checkpointer_collect(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (!c->busy) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    bool finished = c->finished;
    int rc = c->rc;
    uint64_t end = c->end;
    if (finished) {
        c->busy = false;
        c->finished = false;
    }
    pthread_mutex_unlock(&c->lock);
    if (!finished) {
        return;
    }
    if (rc == 0) {
        g->checkpoint_end = end;
    } else {
        __atomic_add_fetch(&c->stats.failed, 1, __ATOMIC_RELAXED);
        c->retry_end = g->log_end + g->checkpoint_bytes / 8u; /* logged; retried later */
    }
}

/* Starts the thread from the applying thread, so that it runs at that thread's priority (a
 * thread inherits its creator's nice value): the builder runs at nice -5, and a checkpoint
 * thread at the default nice, starved on a busy machine while it held table_lock, made applies
 * wait up to 145-175 ms for a table write of 50-60 ms of CPU. Without a thread (pthread_create
 * failed, logged) checkpoints go inline. */
static void index_checkpointer_thread_start(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    ASSERT(!c->started && !c->inline_sync);
    int rc = -pthread_create(&c->thread, NULL, index_checkpointer_main, g);
    if (rc != 0) {
        ds_log_error("%s: no checkpoint thread (%s): checkpoints go inline", g->dir,
                     ds_strerror(rc));
        c->inline_sync = true;
        return;
    }
    c->started = true;
}

/* After an apply (writer thread, outside table_lock): collects a finished checkpoint, asks for
 * the next one when the log grew by checkpoint_bytes since the last, or for the writeback of
 * the log written since the last request. */
void index_checkpoint_after_apply(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (!c->inline_sync) {
        index_checkpointer_collect(g); /* before due: it moves checkpoint_end */
    }
    bool due = g->log_end - g->checkpoint_end >= g->checkpoint_bytes &&
               g->log_end >= c->retry_end && g->cursor_at != 0;
    bool writeback = g->log_end - c->writeback_requested >= INDEX_WRITEBACK_BYTES;
    if (!c->inline_sync && !c->started && (due || writeback)) {
        index_checkpointer_thread_start(g); /* on failure, inline from now on */
    }
    if (c->inline_sync) {
        if (due && index_checkpoint_write(g) != 0) { /* logged; only costs opening time */
            c->retry_end = g->log_end + g->checkpoint_bytes / 8u;
        }
        return;
    }
    if ((!due || c->busy) && !writeback) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    if (due && !c->busy) {
        __atomic_add_fetch(&c->stats.started, 1, __ATOMIC_RELAXED);
        c->busy = true;
    }
    c->writeback_to = g->log_end;
    c->writeback_requested = g->log_end;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
}

int index_checkpointer_start(struct index *g, const struct index_config *cfg)
{
    ASSERT(g->writer);
    ASSERT(g->checkpointer == NULL);
    struct index_checkpointer *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    g->checkpointer = c;
    c->inline_sync = cfg->checkpoint_inline;
    c->writeback_requested = g->log_end;
    c->writeback_to = g->log_end;
    pthread_mutex_init(&c->table_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    if (c->inline_sync) {
        return 0;
    }
    c->buffer = malloc(INDEX_IO_BUFFER_BYTES);
    return c->buffer != NULL ? 0 : -ENOMEM;
}

/* Waits for a checkpoint in flight, stops the thread and collects the outcome. */
void index_checkpointer_stop(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (c == NULL || !c->started) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    c->started = false;
    c->stop = false; /* index_compact stops it mid-life: a thread started again must not exit */
    index_checkpointer_collect(g);
    ASSERT(!c->busy);
}

void index_checkpointer_free(struct index_checkpointer *c)
{
    if (c == NULL) {
        return;
    }
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->table_lock);
    free(c->buffer);
    free(c);
}

/* index_apply's side of table_lock: the time an apply waited for a checkpoint's table write. */
void index_checkpoint_table_lock(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    if (pthread_mutex_trylock(&c->table_lock) == 0) {
        return;
    }
    uint64_t t0 = ds_clock_ns();
    pthread_mutex_lock(&c->table_lock);
    index_stat_max(&c->stats.apply_wait_ns_max, &c->stats.apply_wait_ns_last, ds_clock_ns() - t0);
}

/* After a compaction swapped in a new log: it is its own checkpoint (nothing to write back, no
 * retry pending) until checkpoint_bytes more are appended. */
void index_checkpointer_compacted(struct index *g)
{
    struct index_checkpointer *c = g->checkpointer;
    c->writeback_requested = g->log_end;
    c->writeback_to = g->log_end;
    c->retry_end = 0;
}

/* Releases what index_checkpoint_table_lock took. */
void index_checkpoint_table_unlock(struct index *g)
{
    pthread_mutex_unlock(&g->checkpointer->table_lock);
}

void index_checkpoint_stats_get(struct index *g, struct index_checkpoint_stats *out)
{
    ASSERT(g != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    const struct index_checkpointer *c = g->checkpointer;
    if (c == NULL) {
        return;
    }
    out->started = __atomic_load_n(&c->stats.started, __ATOMIC_RELAXED);
    out->done = __atomic_load_n(&c->stats.done, __ATOMIC_RELAXED);
    out->failed = __atomic_load_n(&c->stats.failed, __ATOMIC_RELAXED);
    out->table_ns_last = __atomic_load_n(&c->stats.table_ns_last, __ATOMIC_RELAXED);
    out->table_ns_max = __atomic_load_n(&c->stats.table_ns_max, __ATOMIC_RELAXED);
    out->sync_ns_last = __atomic_load_n(&c->stats.sync_ns_last, __ATOMIC_RELAXED);
    out->sync_ns_max = __atomic_load_n(&c->stats.sync_ns_max, __ATOMIC_RELAXED);
    out->apply_wait_ns_last = __atomic_load_n(&c->stats.apply_wait_ns_last, __ATOMIC_RELAXED);
    out->apply_wait_ns_max = __atomic_load_n(&c->stats.apply_wait_ns_max, __ATOMIC_RELAXED);
    out->log_bytes_last = __atomic_load_n(&c->stats.log_bytes_last, __ATOMIC_RELAXED);
}
