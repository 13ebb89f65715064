/*
 * index_compact (index.h): rewrites the log as sealed records, every chain's distinct entries
 * (the newest copy of each key) in a few delta-encoded, zstd-compressed sections per customer,
 * written to DIR/log.compact, synced, and renamed over DIR/log under the swap lock. A crash
 * leaves the old log or the new complete one. Rejected: compacting in place (a crash would leave
 * a mix no reader could trust).
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

/* ---- compaction ---------------------------------------------------------------------------- */

/* One entry of a slot's chain being compacted: its bytes in the arena (tail key, then value). */
struct index_compact_entry {
    uint32_t customer; /* index into the slot's customers */
    uint32_t seq;      /* the order the walk met it: lower is a newer copy */
    uint64_t at;       /* arena offset */
    uint8_t key_bytes;
    uint8_t value_bytes;
};

/* A compaction in progress: the new log being written and one slot's entries. */
struct index_compactor {
    struct index *g;
    int fd;
    uint64_t end; /* bytes of the new log written or buffered */
    uint8_t *out; /* INDEX_IO_BUFFER_BYTES of the new log not yet written */
    size_t out_bytes;
    struct index_slot *slots; /* the new log's table */
    ZSTD_CCtx *cctx;
    struct index_seal_writer writer;
    uint8_t *body;      /* INDEX_SEAL_RAW_MAX */
    uint8_t *scratch;   /* INDEX_SEAL_RAW_MAX */
    uint8_t *record;    /* INDEX_SEAL_RECORD_BYTES_MAX */
    uint64_t record_at; /* where the record being built goes */
    struct index_compact_entry *entries;
    size_t entry_count;
    size_t entry_cap;
    uint8_t *arena;
    size_t arena_bytes;
    size_t arena_cap;
    struct ds_id *customers;
    size_t customer_count;
    size_t customer_cap;
    uint8_t *directory; /* INDEX_RECORD_BYTES_MAX: the customer's sections, oldest first */
    size_t directory_count;
    const uint8_t *keys[INDEX_SEAL_SECTION_ENTRIES];
    const uint8_t *values[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t key_bytes[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t value_bytes[INDEX_SEAL_SECTION_ENTRIES];
};

static int index_compact_write(struct index_compactor *k, const void *src, size_t len)
{
    if (INDEX_IO_BUFFER_BYTES - k->out_bytes < len) {
        int rc = ds_pwrite_full(k->fd, k->out, k->out_bytes, k->end - k->out_bytes);
        if (rc != 0) {
            return rc;
        }
        k->out_bytes = 0;
    }
    memcpy(k->out + k->out_bytes, src, len);
    k->out_bytes += len;
    k->end += len;
    return 0;
}

static int index_compact_record_flush(struct index_compactor *k)
{
    if (k->writer.sections == 0) {
        return 0;
    }
    ASSERT(k->record_at == k->end);
    size_t len = index_seal_writer_finish(&k->writer, k->cctx, k->scratch, k->record);
    index_seal_writer_reset(&k->writer, k->body);
    return index_compact_write(k, k->record, len);
}

static _Thread_local const struct index_compactor *index_compacting;

static int index_compact_entry_compare(const void *a, const void *b)
{
    const struct index_compact_entry *x = a;
    const struct index_compact_entry *y = b;
    const struct index_compactor *k = index_compacting;
    int c = x->customer == y->customer
                ? 0
                : index_customer_compare(&k->customers[x->customer], &k->customers[y->customer]);
    c = c != 0 ? c
               : index_key_compare(k->arena + x->at, x->key_bytes, k->arena + y->at, y->key_bytes);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int index_compact_grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) {
        return 0;
    }
    size_t n = *cap < 1024 ? 1024 : *cap;
    while (n < need) {
        n *= 2;
    }
    void *q = realloc(*p, n * size);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    *cap = n;
    return 0;
}

/* Collects every entry on slot's chain in the old log (the customer of each run found or
 * added to k->customers). */
static int index_compact_collect(struct index_compactor *k, uint32_t slot)
{
    struct index *g = k->g;
    k->entry_count = 0;
    k->arena_bytes = 0;
    k->customer_count = 0;
    uint8_t buf[INDEX_QUERY_READ_BYTES];
    uint8_t *big = NULL;
    uint64_t offset = g->slots[slot].head;
    uint32_t seq = 0;
    int rc = 0;
    while (offset != 0 && rc == 0) {
        const uint8_t *r = NULL;
        uint64_t directory = 0;
        rc = index_run_read(g, offset, slot, buf, &big, &r, &directory);
        struct ds_id customer;
        rc = rc == 0 ? index_run_customer(r, &customer) : rc;
        if (rc != 0) {
            break;
        }
        uint32_t who = 0;
        while (who < k->customer_count && !ds_id_equal(&k->customers[who], &customer)) {
            who++;
        }
        if (who == k->customer_count) {
            rc = index_compact_grow((void **)&k->customers, &k->customer_cap, who + 1,
                                    sizeof(*k->customers));
            if (rc != 0) {
                break;
            }
            k->customers[k->customer_count++] = customer;
        }
        uint32_t len = ds_get_le32(r + 4);
        uint32_t count = ds_get_le32(r + 12);
        size_t at = INDEX_RUN_HEADER_BYTES + r[10];
        rc = index_compact_grow((void **)&k->entries, &k->entry_cap, k->entry_count + count,
                                sizeof(*k->entries));
        rc = rc == 0
                 ? index_compact_grow((void **)&k->arena, &k->arena_cap, k->arena_bytes + len, 1)
                 : rc;
        for (uint32_t i = 0; rc == 0 && i < count; i++) {
            if (at + 2 > len || at + 2 + r[at] > len || at + 2 + r[at] + r[at + 1 + r[at]] > len) {
                rc = -DS_ECORRUPT;
                break;
            }
            uint8_t key_bytes = r[at];
            uint8_t value_bytes = r[at + 1 + key_bytes];
            struct index_compact_entry *e = &k->entries[k->entry_count++];
            e->customer = who;
            e->seq = seq++;
            e->at = k->arena_bytes;
            e->key_bytes = key_bytes;
            e->value_bytes = value_bytes;
            memcpy(k->arena + k->arena_bytes, r + at + 1, key_bytes);
            memcpy(k->arena + k->arena_bytes + key_bytes, r + at + 2 + key_bytes, value_bytes);
            k->arena_bytes += (uint64_t)key_bytes + value_bytes;
            at += 2u + key_bytes + value_bytes;
        }
        offset = ds_get_le64(r + 16);
    }
    free(big);
    return rc;
}

/* Writes the directory of the customer's sections written so far (k->directory, oldest first
 * as written; at most INDEX_DIRECTORY_ENTRIES_MAX, the oldest ones) as a record, newest first:
 * a walk that stops early in it still follows the chain on. *at is its offset. */
static int index_compact_directory(struct index_compactor *k, uint32_t slot, uint64_t *at)
{
    uint8_t *d = k->directory;
    size_t n = k->directory_count;
    uint8_t *e = d + INDEX_DIRECTORY_HEADER_BYTES;
    for (size_t i = 0; i < n / 2; i++) {
        uint8_t swap[INDEX_DIRECTORY_ENTRY_BYTES];
        memcpy(swap, e + i * INDEX_DIRECTORY_ENTRY_BYTES, sizeof(swap));
        memcpy(e + i * INDEX_DIRECTORY_ENTRY_BYTES, e + (n - 1 - i) * INDEX_DIRECTORY_ENTRY_BYTES,
               sizeof(swap));
        memcpy(e + (n - 1 - i) * INDEX_DIRECTORY_ENTRY_BYTES, swap, sizeof(swap));
    }
    size_t len = INDEX_DIRECTORY_HEADER_BYTES + n * INDEX_DIRECTORY_ENTRY_BYTES;
    memset(d, 0, INDEX_DIRECTORY_HEADER_BYTES);
    d[8] = INDEX_RECORD_DIRECTORY;
    ds_put_le32(d + 4, (uint32_t)len);
    ds_put_le32(d + 12, (uint32_t)n);
    ds_put_le32(d + 16, slot);
    ds_put_le32(d, ds_crc32c(0, d + 4, len - 4u));
    *at = k->end;
    return index_compact_write(k, d, len);
}

/* Writes one customer's distinct entries k->entries[first..end) (ascending tail keys) as
 * sections on slot's new chain: the newest INDEX_RUN_HEAD_ENTRIES in the head section (a
 * newest-N query decodes little), the rest in sections of INDEX_SEAL_SECTION_ENTRIES, oldest
 * first, so the chain's head is the newest. */
static int index_compact_customer(struct index_compactor *k, uint32_t slot, const uint32_t *order,
                                  size_t count)
{
    struct index_slot *s = &k->slots[slot];
    uint64_t skip = s->head;
    size_t last = count;
    k->directory_count = 0;
    size_t sections = count <= INDEX_RUN_HEAD_ENTRIES
                          ? 1
                          : 1 + (count - INDEX_RUN_HEAD_ENTRIES + INDEX_SEAL_SECTION_ENTRIES - 1) /
                                    INDEX_SEAL_SECTION_ENTRIES;
    while (last > 0) {
        size_t first = last <= INDEX_RUN_HEAD_ENTRIES
                           ? 0
                           : INDEX_RUN_HEAD_ENTRIES + (last - 1 - INDEX_RUN_HEAD_ENTRIES) /
                                                          INDEX_SEAL_SECTION_ENTRIES *
                                                          INDEX_SEAL_SECTION_ENTRIES;
        size_t n = last - first;
        for (size_t i = 0; i < n; i++) {
            const struct index_compact_entry *e = &k->entries[order[first + i]];
            k->keys[i] = k->arena + e->at;
            k->key_bytes[i] = e->key_bytes;
            k->values[i] = k->arena + e->at + e->key_bytes;
            k->value_bytes[i] = e->value_bytes;
        }
        int64_t newest = (int64_t)~index_key_be64_get(k->keys[0]);
        struct index_seal_section sec = {
            .slot = slot,
            .tag = k->g->slots[slot].tag,
            .customer = k->customers[k->entries[order[first]].customer],
            .prev = s->head,
            .chain_max_ts = s->head != 0 && s->max_ts > newest ? s->max_ts : newest,
            .prev_chain_max_ts = s->head != 0 ? s->max_ts : 0,
            .skip = skip,
        };
        if (first == 0 && sections >= INDEX_DIRECTORY_SECTIONS_MIN &&
            sections - 1 <= INDEX_DIRECTORY_ENTRIES_MAX) {
            /* The head section: the others, newest first, in a directory record before it. */
            int rc = index_compact_record_flush(k);
            rc = rc == 0 ? index_compact_directory(k, slot, &sec.directory) : rc;
            if (rc != 0) {
                return rc;
            }
        }
        if (!index_seal_writer_fits(&k->writer, slot, (uint32_t)n)) {
            int rc = index_compact_record_flush(k);
            if (rc != 0) {
                return rc;
            }
        }
        if (k->writer.sections == 0) {
            k->record_at = k->end;
        }
        int rc = index_seal_writer_add(&k->writer, &sec, (uint32_t)n, k->keys, k->key_bytes,
                                       k->values, k->value_bytes);
        if (rc != 0) {
            ds_log_error("%s: a chain's entries do not seal", k->g->dir);
            return -DS_ECORRUPT;
        }
        s->tag = sec.tag;
        s->head = k->record_at;
        s->max_ts = sec.chain_max_ts;
        if (first != 0 && k->directory_count < INDEX_DIRECTORY_ENTRIES_MAX) {
            uint8_t *d = k->directory + INDEX_DIRECTORY_HEADER_BYTES +
                         k->directory_count * INDEX_DIRECTORY_ENTRY_BYTES;
            ds_put_le64(d, k->record_at);
            ds_put_le64(d + 8, ~index_key_be64_get(k->keys[n - 1])); /* the oldest ts */
            k->directory_count++;
        }
        last = first;
    }
    return 0;
}

/* One slot's chain: collected, sorted by (customer, key, newest copy first), each customer's
 * distinct keys sealed. */
static int index_compact_slot(struct index_compactor *k, uint32_t slot)
{
    int rc = index_compact_collect(k, slot);
    if (rc != 0 || k->entry_count == 0) {
        return rc;
    }
    index_compacting = k;
    qsort(k->entries, k->entry_count, sizeof(*k->entries), index_compact_entry_compare);
    /* The distinct entries' indexes, reusing the arena's tail would alias: a separate array. */
    uint32_t *order = malloc(k->entry_count * sizeof(*order));
    if (order == NULL) {
        return -ENOMEM;
    }
    size_t first = 0;
    size_t n = 0;
    for (size_t i = 0; i < k->entry_count && rc == 0; i++) {
        const struct index_compact_entry *e = &k->entries[i];
        const struct index_compact_entry *p = n > first ? &k->entries[order[n - 1]] : NULL;
        if (p != NULL && p->customer != e->customer) {
            rc = index_compact_customer(k, slot, order + first, n - first);
            first = n;
            p = NULL;
        }
        if (p == NULL || index_key_compare(k->arena + p->at, p->key_bytes, k->arena + e->at,
                                           e->key_bytes) != 0) {
            order[n++] = (uint32_t)i; /* the newest copy of a key sorts first */
        }
    }
    rc = rc == 0 && n > first ? index_compact_customer(k, slot, order + first, n - first) : rc;
    free(order);
    return rc;
}

/* The new log: header, every chain sealed, then a cursor record that stands for the last
 * apply (same number, same cursor). Written and synced; *cursor_at and *crc name its cursor
 * record. */
static int index_compact_write_log(struct index_compactor *k, uint64_t *cursor_at, uint32_t *crc)
{
    struct index *g = k->g;
    uint8_t header[INDEX_LOG_HEADER_BYTES];
    index_log_header_make(g->slots_log2, header);
    int rc = index_compact_write(k, header, sizeof(header));
    for (uint64_t i = 0; rc == 0 && i <= g->mask; i++) {
        if (g->slots[i].head != 0) {
            rc = index_compact_slot(k, (uint32_t)i);
        }
    }
    rc = rc == 0 ? index_compact_record_flush(k) : rc;
    if (rc == 0) {
        /* The whole cursor from the empty one (RESET), in pieces when it is large. */
        pthread_mutex_lock(&g->cursor_lock);
        struct index_delta_writer w = {.next = g->cursor,
                                       .len = g->cursor_len,
                                       .ins = g->cursor_len,
                                       .apply = g->applies,
                                       .reset = true,
                                       .first = true};
        size_t len = 0;
        while (rc == 0 && (len = index_delta_writer_next(&w, k->record)) > 0) {
            *cursor_at = k->end;
            *crc = ds_get_le32(k->record);
            rc = index_compact_write(k, k->record, len);
        }
        pthread_mutex_unlock(&g->cursor_lock);
    }
    rc = rc == 0 && k->out_bytes > 0
             ? ds_pwrite_full(k->fd, k->out, k->out_bytes, k->end - k->out_bytes)
             : rc;
    rc = rc == 0 && fsync(k->fd) != 0 ? -errno : rc;
    return rc;
}

/* Swaps the new log and its table in: DIR/table goes first (it names the old log's records;
 * without it an opening handle reads the whole log), then the rename, then the handle. */
static int index_compact_swap(struct index_compactor *k, const char *tmp, uint64_t cursor_at,
                              uint32_t crc)
{
    struct index *g = k->g;
    char path[DS_PATH_MAX];
    index_path(g, "table", path);
    int rc = unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    index_path(g, "log", path);
    rc = rc == 0 && rename(tmp, path) != 0 ? -errno : rc;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    if (rc != 0) {
        return rc;
    }
    pthread_rwlock_wrlock(&g->swap_lock);
    struct index_slot *old = g->slots;
    int old_fd = g->log_fd;
    g->slots = k->slots;
    g->log_fd = k->fd;
    g->log_end = k->end;
    pthread_mutex_lock(&g->cursor_lock);
    g->cursor_at = cursor_at;
    g->cursor_crc = crc;
    g->cursor_link_crc = crc;
    pthread_mutex_unlock(&g->cursor_lock);
    g->checkpoint_end = k->end; /* the sealed log is its own checkpoint (see index_close) */
    g->sealed_end = cursor_at;
    pthread_rwlock_unlock(&g->swap_lock);
    k->slots = old;
    k->fd = old_fd;
    return 0;
}

int index_compact(struct index *g, struct index_compact_stats *stats)
{
    ASSERT(g != NULL);
    ASSERT(g->writer);
    ASSERT(g->buffered == 0);
    if (g->failed) {
        ds_log_error("%s: an earlier apply failed; reopen the index", g->dir);
        return -EIO;
    }
    /* No checkpoint of the old log may land after the swap (it would name a record of a log
     * that is gone: ignored at open, but a wasted table), and the thread's writeback offsets
     * are the old log's: stop it (it waits for one in flight); the next apply that needs it
     * starts it again. */
    index_checkpointer_stop(g);
    uint64_t started_ns = ds_clock_ns();
    uint64_t before = g->log_end;
    char tmp[DS_PATH_MAX];
    index_path(g, "log.compact", tmp);
    struct index_compactor k = {.g = g, .fd = -1};
    k.out = malloc(INDEX_IO_BUFFER_BYTES);
    k.slots = calloc((size_t)1 << g->slots_log2, sizeof(*k.slots));
    k.cctx = ZSTD_createCCtx();
    k.body = malloc(INDEX_SEAL_RAW_MAX);
    k.scratch = malloc(INDEX_SEAL_RAW_MAX);
    k.directory = malloc(INDEX_RECORD_BYTES_MAX);
    k.record = malloc(INDEX_SEAL_RECORD_BYTES_MAX > INDEX_CURSOR_RECORD_BYTES_MAX
                          ? INDEX_SEAL_RECORD_BYTES_MAX
                          : INDEX_CURSOR_RECORD_BYTES_MAX);
    int rc =
        k.out && k.slots && k.cctx && k.body && k.scratch && k.record && k.directory ? 0 : -ENOMEM;
    if (rc == 0) {
        index_seal_writer_reset(&k.writer, k.body);
        k.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        rc = k.fd < 0 ? -errno : 0;
    }
    uint64_t cursor_at = 0;
    uint32_t crc = 0;
    rc = rc == 0 ? index_compact_write_log(&k, &cursor_at, &crc) : rc;
    rc = rc == 0 ? index_compact_swap(&k, tmp, cursor_at, crc) : rc;
    if (rc != 0) {
        ds_log_error("%s: cannot compact the log: %s (the old log stays)", g->dir, ds_strerror(rc));
        (void)unlink(tmp);
    }
    if (k.fd >= 0) {
        close(k.fd); /* the new log's fd when it failed; the old log's after a swap */
    }
    free(k.out);
    free(k.slots);
    ZSTD_freeCCtx(k.cctx);
    free(k.body);
    free(k.scratch);
    free(k.record);
    free(k.directory);
    free(k.entries);
    free(k.arena);
    free(k.customers);
    if (rc == 0) {
        index_checkpointer_compacted(g);
        if (stats != NULL) {
            stats->bytes_before = before;
            stats->bytes_after = g->log_end;
            stats->seconds = (double)(ds_clock_ns() - started_ns) / 1e9;
        }
        ds_log_info("%s: compacted the log from %" PRIu64 " to %" PRIu64 " bytes", g->dir, before,
                    g->log_end);
    }
    return rc;
}
