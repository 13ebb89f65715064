/*
 * gsi_rocks.c: the test oracle of the by-customer index (gsi_rocks.h): the store dayshard used
 * before query/gsi/gsi.c, on RocksDB 7.8 (C API), one sorted WriteBatch per apply.
 *
 * Directory: DIR/FORMAT ("dayshard-gsi 1"), DIR/db (the RocksDB database). (Directories made by
 * the first version may also hold an empty DIR/staging; it is unused.)
 *
 * Keys (all big-endian, compared bytewise; RocksDB's default comparator):
 *
 *   customer  integer: 0x01, u64 id                          (9 bytes)
 *             string:  0x02, u64 FNV-1a-64(bytes), u8 len, bytes
 *   ts        u64 ~ts_ms                                      (newest first)
 *   order id  integer: 0xFE, u64 ~id
 *             string:  0xFD, ~E(bytes), where E escapes 0x00 as 0x00 0xFF and ends 0x00 0x00
 *
 * The first 9 bytes always lie inside the customer part, so they serve as RocksDB's fixed prefix
 * (prefix Bloom filters: a light customer's seek skips table files without its prefix). The
 * customer part is prefix-free and type-tagged, so 42 and "42" are different customers; the
 * hash only groups strings, the bytes that follow tell them apart. Within a customer, ~ts sorts
 * newest first; among equal ts, the inverted order-id part sorts order ids descending in the
 * order "integers ascending, then strings ascending (E is order-preserving and prefix-free)":
 * so a page lists string order ids before integer ones, each descending. Ids decode back in the
 * type they went in. The value is u8 status length, status bytes, zigzag varint amount; the day
 * is not stored, it is the UTC day of ts (gsi_rocks_apply checks that the caller agrees). The
 * cursor lives under the key "\0cursor", which sorts before every customer.
 *
 * A page token is lowercase hex of the last returned key without its customer part (ts and
 * order id): the next page seeks to customer + token and skips that exact key. New entries have
 * newer keys, so they sort before any token already handed out and never shift a later page.
 *
 * Writes: gsi_rocks_apply encodes and sorts the batch in a buffer fixed at open and writes it, the
 * cursor first, as one WriteBatch into the memtable (two write buffers of write_buffer_bytes /
 * 2) and the write-ahead log, which is never synced. Atomicity: a WriteBatch becomes visible at
 * once, and a batch lies in a single memtable and in one log record. Crash safety: a process
 * crash loses nothing (the log is in the page cache); a power cut loses the log's unsynced
 * tail, whole records in order, so the store holds exactly the batches up to some batch k and
 * the cursor of batch k (the cursor is in the same batch as its entries, so losing entries
 * loses their cursor too): the builder replays from there, and replaying entries rewrites
 * identical keys. A reader instance (`dayshard serve`, `orders --data`) catches up through
 * the log after a refresh, so it sees applies still in the writer's memtable.
 *
 * Options (gsi_options_make; bench_gsi_store measures them): large write buffers so level-0
 * files are few and big, level-0 compaction at 4 files and write stalls at 12/20 (a stall is
 * the push-back: the lag grows and the node pauses ingest), partitioned index and filter
 * blocks, prefix-only full Bloom filters, no compression on level 0, lz4 above the last level,
 * zstd in it. The WAL costs 3-18% more CPU per entry than none (bench_gsi_store), kept so
 * that readers in other processes see recent applies (off, they saw only flushed buffers).
 *
 * Rejected (bench/gsi_store.c, ARCHITECTURE.md): one SST file per apply, ingested with
 * IngestExternalFile (the first version of this file), even with the same options. It is
 * cheaper: at 10M entries its apply call ran at 290k-770k entries/s against 250k-450k here,
 * and with compaction paid for it took 3.5-4.4 us of CPU per entry against 4.1-4.7 (the
 * memtable insert is the difference). But ingestion ignores the level-0 stall triggers: level
 * 0 piled up to 66-136 files, and newest-10 of a heavy customer took p99 0.8-10 ms while
 * compaction caught up, against 0.2-0.6 ms here, with at most 6 level-0 files. The memtable
 * path costs one thing the ingest path does not: a query that seeks into a batch being
 * inserted skips that batch's not yet visible entries of its customer, one by one.
 * Not measured: the vector memtable (an iterator over a mutable one sorts a copy of it, on
 * every query). A purpose-built log + hash index: in the first version of the bench a bare
 * append log with an fdatasync per batch, no index at all, was already slower than SST
 * ingestion, and a per-customer hash index would grow with the number of customers.
 */
#include "tests/support/gsi_rocks.h"

#include "query/gsi/key.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GSI_FORMAT_TEXT "dayshard-gsi 1\n"
#define GSI_PREFIX_BYTES 9u
#define GSI_TAG_CUSTOMER_INT 0x01u
#define GSI_TAG_CUSTOMER_STRING 0x02u
#define GSI_CUSTOMER_BYTES_MAX (1u + 8u + 1u + DS_ID_BYTES_MAX)
#define GSI_KEY_BYTES_MAX (GSI_CUSTOMER_BYTES_MAX + GSI_TAIL_BYTES_MAX)
/* RocksDB's own memory outside the block cache and the write buffers (table readers of
 * max_open_files files, the table builders of a flush and a compaction, thread stacks): an
 * estimate for gsi_rocks_memory_bytes. */
#define GSI_ROCKSDB_OVERHEAD_BYTES (32ull << 20)
#define GSI_MAX_OPEN_FILES 512
/* A WriteBatch record: a type byte and two varint32 lengths around the key and value. */
#define GSI_BATCH_RECORD_OVERHEAD_BYTES 5u
/* Level 0 is compacted at 4 files (two write buffers' worth each time); writes slow down at
 * 12 and stop at 20 files, far enough above 4 that a compaction falling behind for a few
 * seconds does not throttle the builder, close enough that a newest-10 query never merges
 * more than ~20 runs. A stall makes gsi_rocks_apply slow, the lag grows, and the node's
 * back-pressure (--max-gsi-lag-ms) pauses ingest: that is the intended push-back. */
#define GSI_LEVEL0_COMPACTION_TRIGGER 4
#define GSI_LEVEL0_SLOWDOWN_TRIGGER 12
#define GSI_LEVEL0_STOP_TRIGGER 20
#define GSI_WRITE_BUFFER_COUNT 2
/* The WAL is on but never synced. Off it was 3-18% cheaper in CPU (bench_gsi_store), but a
 * reader instance (`dayshard serve`, `orders --data`) then sees only flushed write buffers,
 * up to 128 MiB behind: with the WAL it catches up through the log's tail. Unsynced, it adds
 * no fsync; after a power cut the log's tail is lost with the cursor it holds (same batch), so
 * the crash argument above still holds and the builder replays. */
#define GSI_WAL_OFF 0
#define GSI_LEVELS 7

static_assert(GSI_KEY_BYTES_MAX <= UINT16_MAX, "slot key lengths are u16");

static const char gsi_cursor_key[7] = {'\0', 'c', 'u', 'r', 's', 'o', 'r'};

/* One encoded entry of the batch being applied. */
struct gsi_slot {
    const uint8_t *key; /* key, then value, in the batch buffer */
    uint16_t key_bytes;
    uint16_t value_bytes;
    uint32_t index; /* position in the caller's array: the last of equal keys wins */
};

struct gsi_rocks {
    bool writer;
    uint32_t batch_entries_max;
    rocksdb_t *db;
    rocksdb_options_t *options;
    rocksdb_cache_t *cache;
    rocksdb_readoptions_t *read; /* prefix_same_as_start; shared by concurrent queries */
    rocksdb_writeoptions_t *write;
    rocksdb_writebatch_t *batch; /* writer: reused, its buffer keeps its capacity */
    uint8_t *buffer;             /* writer: batch_entries_max * (key + value) bytes */
    struct gsi_slot *slots;
};

/* ---- encoding ------------------------------------------------------------------------------ */

/* Writes the customer part of a key into dst (GSI_CUSTOMER_BYTES_MAX); returns its length. */
static size_t gsi_customer_encode(const struct ds_id *customer, uint8_t *dst)
{
    ASSERT(gsi_key_id_valid(customer));
    if (!customer->is_string) {
        dst[0] = GSI_TAG_CUSTOMER_INT;
        gsi_key_be64_put(dst + 1, (uint64_t)customer->value);
        return GSI_PREFIX_BYTES;
    }
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < customer->len; i++) {
        hash = (hash ^ (uint8_t)customer->text[i]) * 0x100000001b3ull;
    }
    dst[0] = GSI_TAG_CUSTOMER_STRING;
    gsi_key_be64_put(dst + 1, hash);
    dst[9] = customer->len;
    memcpy(dst + 10, customer->text, customer->len);
    return 10u + customer->len;
}

/* ---- configuration and lifecycle ----------------------------------------------------------- */

void gsi_rocks_config_defaults(struct gsi_rocks_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->cache_bytes = GSI_ROCKS_CACHE_BYTES_DEFAULT;
    cfg->batch_entries_max = GSI_BATCH_ENTRIES_DEFAULT;
    cfg->write_buffer_bytes = GSI_ROCKS_WRITE_BUFFER_BYTES_DEFAULT;
}

int gsi_rocks_config_check(const struct gsi_rocks_config *cfg)
{
    if (cfg->dir == NULL || cfg->dir[0] == '\0' || strlen(cfg->dir) + 32 > DS_PATH_MAX) {
        ds_log_error("gsi: the index directory is missing or too long");
        return -DS_EUSAGE;
    }
    if (cfg->cache_bytes < GSI_ROCKS_CACHE_BYTES_MIN ||
        cfg->cache_bytes > GSI_ROCKS_CACHE_BYTES_MAX) {
        ds_log_error("gsi: cache_bytes %" PRIu64 " outside %llu..%llu", cfg->cache_bytes,
                     GSI_ROCKS_CACHE_BYTES_MIN, GSI_ROCKS_CACHE_BYTES_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->batch_entries_max < 1 || cfg->batch_entries_max > GSI_BATCH_ENTRIES_MAX) {
        ds_log_error("gsi: batch_entries_max %" PRIu32 " outside 1..%u", cfg->batch_entries_max,
                     GSI_BATCH_ENTRIES_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->write_buffer_bytes < GSI_ROCKS_WRITE_BUFFER_BYTES_MIN ||
        cfg->write_buffer_bytes > GSI_ROCKS_WRITE_BUFFER_BYTES_MAX) {
        ds_log_error("gsi: write_buffer_bytes %" PRIu64 " outside %llu..%llu",
                     cfg->write_buffer_bytes, GSI_ROCKS_WRITE_BUFFER_BYTES_MIN,
                     GSI_ROCKS_WRITE_BUFFER_BYTES_MAX);
        return -DS_EUSAGE;
    }
    return 0;
}

/* The encoded batch, its slots and the WriteBatch holding a copy of it. */
static uint64_t gsi_buffer_bytes(uint32_t entries)
{
    uint64_t entry = GSI_KEY_BYTES_MAX + GSI_VALUE_BYTES_MAX;
    return (uint64_t)entries *
           (entry + sizeof(struct gsi_slot) + entry + GSI_BATCH_RECORD_OVERHEAD_BYTES);
}

uint64_t gsi_rocks_memory_bytes(const struct gsi_rocks_config *cfg)
{
    /* A memtable's arena may pass its write buffer size by one arena block (an eighth) before
     * RocksDB switches to the next one. */
    uint64_t memtables = cfg->write_buffer_bytes + cfg->write_buffer_bytes / 8;
    return cfg->cache_bytes + memtables + gsi_buffer_bytes(cfg->batch_entries_max) +
           GSI_ROCKSDB_OVERHEAD_BYTES;
}

/* Logs a RocksDB error with context, frees it and returns the code to propagate. */
static int gsi_rocks_error(char *err, const char *what, const char *dir)
{
    ASSERT(err != NULL);
    ds_log_error("gsi: %s %s: %s", what, dir, err);
    int rc = strstr(err, "lock") != NULL || strstr(err, "LOCK") != NULL ? -DS_ELOCKED : -EIO;
    rocksdb_free(err);
    return rc;
}

/* The block-based table: a block cache bound that also holds index and filter blocks, both
 * partitioned so that no single block outgrows a cache shard (a whole-file filter of a 64 MiB
 * table file is several MiB, a 64 MiB LRU cache has 1 MiB shards, and such a block was read
 * from disk on every query: milliseconds at 10M entries), full Bloom filters on the 9-byte
 * customer prefix only (queries seek by prefix; the one point lookup, the cursor, is rare). */
static rocksdb_block_based_table_options_t *gsi_table_make(rocksdb_cache_t *cache)
{
    rocksdb_block_based_table_options_t *table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(table, cache);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(table, 1);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(table, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(table, 1);
    rocksdb_block_based_options_set_pin_top_level_index_and_filter(table, 1);
    rocksdb_block_based_options_set_index_type(table, 2); /* kTwoLevelIndexSearch */
    rocksdb_block_based_options_set_partition_filters(table, 1);
    rocksdb_block_based_options_set_metadata_block_size(table, 4096);
    rocksdb_block_based_options_set_filter_policy(table,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    rocksdb_block_based_options_set_whole_key_filtering(table, 0);
    return table;
}

/* Options shared by the writer and readers (bench_gsi_store repeats them; keep both in step).
 * Level 0 is not compressed (flushes stay cheap; its files are compacted soon), lz4 above the
 * last level and zstd in it (most of the data, rewritten least often). The last level has no
 * filters (optimize_filters_for_hits): a customer with any order at all is almost surely
 * there, and skipping its filters saves most of the filter memory. */
static void gsi_options_make(struct gsi_rocks *g, const struct gsi_rocks_config *cfg)
{
    g->cache = rocksdb_cache_create_lru((size_t)cfg->cache_bytes);
    rocksdb_block_based_table_options_t *table = gsi_table_make(g->cache);
    g->options = rocksdb_options_create();
    rocksdb_options_set_block_based_table_factory(g->options, table);
    rocksdb_block_based_options_destroy(table); /* the factory holds a copy */
    rocksdb_options_set_prefix_extractor(
        g->options, rocksdb_slicetransform_create_fixed_prefix(GSI_PREFIX_BYTES));
    rocksdb_options_set_optimize_filters_for_hits(g->options, 1);
    rocksdb_options_set_create_if_missing(g->options, 1);
    rocksdb_options_set_max_background_jobs(g->options, 2);
    uint64_t buffer_bytes = cfg->write_buffer_bytes / GSI_WRITE_BUFFER_COUNT;
    rocksdb_options_set_write_buffer_size(g->options, (size_t)buffer_bytes);
    rocksdb_options_set_max_write_buffer_number(g->options, GSI_WRITE_BUFFER_COUNT);
    rocksdb_options_set_min_write_buffer_number_to_merge(g->options, 1);
    rocksdb_options_set_level0_file_num_compaction_trigger(g->options,
                                                           GSI_LEVEL0_COMPACTION_TRIGGER);
    rocksdb_options_set_level0_slowdown_writes_trigger(g->options, GSI_LEVEL0_SLOWDOWN_TRIGGER);
    rocksdb_options_set_level0_stop_writes_trigger(g->options, GSI_LEVEL0_STOP_TRIGGER);
    rocksdb_options_set_max_bytes_for_level_base(g->options,
                                                 GSI_LEVEL0_COMPACTION_TRIGGER * buffer_bytes);
    rocksdb_options_set_target_file_size_base(g->options, buffer_bytes);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(g->options, 1);
    int levels[GSI_LEVELS] = {rocksdb_no_compression,  rocksdb_lz4_compression,
                              rocksdb_lz4_compression, rocksdb_lz4_compression,
                              rocksdb_lz4_compression, rocksdb_lz4_compression,
                              rocksdb_lz4_compression};
    rocksdb_options_set_compression_per_level(g->options, levels, GSI_LEVELS);
    rocksdb_options_set_bottommost_compression(g->options, rocksdb_zstd_compression);
    /* One writer thread: no concurrent memtable inserts, no spinning for a write group. */
    rocksdb_options_set_allow_concurrent_memtable_write(g->options, 0);
    rocksdb_options_set_enable_write_thread_adaptive_yield(g->options, 0);
    rocksdb_options_set_bytes_per_sync(g->options, 1u << 20);
    rocksdb_options_set_info_log_level(g->options, 2); /* warnings and up */
    rocksdb_options_set_keep_log_file_num(g->options, 4);
    g->read = rocksdb_readoptions_create();
    rocksdb_readoptions_set_prefix_same_as_start(g->read, 1);
}

static int gsi_create(const struct gsi_rocks_config *cfg, bool writer, struct gsi_rocks **out)
{
    int rc = gsi_rocks_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct gsi_rocks *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->writer = writer;
    g->batch_entries_max = cfg->batch_entries_max;
    gsi_options_make(g, cfg);
    *out = g;
    return 0;
}

/* Checks DIR/FORMAT; a writer creates it in a fresh directory. */
static int gsi_format_check(const char *dir, bool create)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/FORMAT", dir);
    char *text = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, 64, &text, &len);
    if (rc == -ENOENT && create) {
        snprintf(path, sizeof(path), "%s/db", dir);
        if (access(path, F_OK) == 0) {
            ds_log_error("gsi: %s holds a database but no FORMAT file", dir);
            return -DS_EFORMAT;
        }
        snprintf(path, sizeof(path), "%s/FORMAT", dir);
        rc = ds_write_file_atomic(path, GSI_FORMAT_TEXT, strlen(GSI_FORMAT_TEXT));
        if (rc != 0) {
            ds_log_error("gsi: cannot write %s: %s", path, ds_strerror(rc));
        }
        return rc;
    }
    if (rc != 0) {
        if (rc != -ENOENT) {
            ds_log_error("gsi: cannot read %s: %s", path, ds_strerror(rc));
        }
        return rc;
    }
    bool same = len == strlen(GSI_FORMAT_TEXT) && memcmp(text, GSI_FORMAT_TEXT, len) == 0;
    free(text);
    if (!same) {
        ds_log_error("gsi: %s is not a dayshard GSI of format 1", dir);
        return -DS_EFORMAT;
    }
    return 0;
}

static int gsi_writer_buffers(struct gsi_rocks *g)
{
    g->buffer = malloc((size_t)g->batch_entries_max * (GSI_KEY_BYTES_MAX + GSI_VALUE_BYTES_MAX));
    g->slots = calloc(g->batch_entries_max, sizeof(*g->slots));
    g->batch = rocksdb_writebatch_create();
    g->write = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(g->write, GSI_WAL_OFF);
    return g->buffer != NULL && g->slots != NULL ? 0 : -ENOMEM;
}

int gsi_rocks_open(const struct gsi_rocks_config *cfg, struct gsi_rocks **out)
{
    struct gsi_rocks *g = NULL;
    int rc = gsi_create(cfg, true, &g);
    if (rc != 0) {
        return rc;
    }
    char path[DS_PATH_MAX];
    rc = ds_mkdir_p(cfg->dir);
    if (rc != 0) {
        ds_log_error("gsi: cannot create %s: %s", cfg->dir, ds_strerror(rc));
        goto fail;
    }
    rc = gsi_format_check(cfg->dir, true);
    if (rc != 0) {
        goto fail;
    }
    rc = gsi_writer_buffers(g);
    if (rc != 0) {
        goto fail;
    }
    rocksdb_options_set_max_open_files(g->options, GSI_MAX_OPEN_FILES);
    snprintf(path, sizeof(path), "%s/db", cfg->dir);
    char *err = NULL;
    g->db = rocksdb_open(g->options, path, &err);
    if (err != NULL) {
        rc = gsi_rocks_error(err, "cannot open", path);
        goto fail;
    }
    *out = g;
    return 0;
fail:
    gsi_rocks_close(g);
    return rc;
}

int gsi_rocks_open_reader(const struct gsi_rocks_config *cfg, const char *secondary_dir,
                          struct gsi_rocks **out)
{
    ASSERT(secondary_dir != NULL);
    struct gsi_rocks *g = NULL;
    int rc = gsi_create(cfg, false, &g);
    if (rc != 0) {
        return rc;
    }
    rc = gsi_format_check(cfg->dir, false);
    if (rc != 0) {
        goto fail;
    }
    rc = ds_mkdir_p(secondary_dir);
    if (rc != 0) {
        ds_log_error("gsi: cannot create %s: %s", secondary_dir, ds_strerror(rc));
        goto fail;
    }
    rocksdb_options_set_max_open_files(g->options, -1); /* a secondary instance needs -1 */
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/db", cfg->dir);
    char *err = NULL;
    g->db = rocksdb_open_as_secondary(g->options, path, secondary_dir, &err);
    if (err != NULL) {
        rc = gsi_rocks_error(err, "cannot open a reader on", path);
        goto fail;
    }
    *out = g;
    return 0;
fail:
    gsi_rocks_close(g);
    return rc;
}

int gsi_rocks_reader_refresh(struct gsi_rocks *g)
{
    ASSERT(g != NULL);
    ASSERT(!g->writer);
    char *err = NULL;
    rocksdb_try_catch_up_with_primary(g->db, &err);
    if (err != NULL) {
        return gsi_rocks_error(err, "cannot refresh the reader of", "the index");
    }
    return 0;
}

void gsi_rocks_close(struct gsi_rocks *g)
{
    if (g == NULL) {
        return;
    }
    if (g->db != NULL) {
        rocksdb_close(g->db);
    }
    if (g->batch != NULL) {
        rocksdb_writebatch_destroy(g->batch);
    }
    if (g->write != NULL) {
        rocksdb_writeoptions_destroy(g->write);
    }
    if (g->read != NULL) {
        rocksdb_readoptions_destroy(g->read);
    }
    if (g->options != NULL) {
        rocksdb_options_destroy(g->options);
    }
    if (g->cache != NULL) {
        rocksdb_cache_destroy(g->cache);
    }
    free(g->slots);
    free(g->buffer);
    free(g);
}

/* ---- apply --------------------------------------------------------------------------------- */

static int gsi_slot_compare(const void *a, const void *b)
{
    const struct gsi_slot *x = a;
    const struct gsi_slot *y = b;
    size_t common = x->key_bytes < y->key_bytes ? x->key_bytes : y->key_bytes;
    int c = memcmp(x->key, y->key, common);
    if (c != 0) {
        return c;
    }
    if (x->key_bytes != y->key_bytes) {
        return x->key_bytes < y->key_bytes ? -1 : 1;
    }
    return (x->index > y->index) - (x->index < y->index);
}

static bool gsi_slot_same_key(const struct gsi_slot *x, const struct gsi_slot *y)
{
    return x->key_bytes == y->key_bytes && memcmp(x->key, y->key, x->key_bytes) == 0;
}

static bool gsi_entry_valid(const struct gsi_entry *e)
{
    return gsi_key_id_valid(&e->customer_id) && gsi_key_id_valid(&e->order_id) &&
           e->ts_ms >= DS_TS_MS_MIN && e->ts_ms <= DS_TS_MS_MAX &&
           e->day == ds_day_from_ms(e->ts_ms) && e->status_len <= DS_STATUS_BYTES_MAX;
}

/* Validates and encodes the batch into g->slots, sorted by key. */
static int gsi_batch_encode(struct gsi_rocks *g, const struct gsi_entry *entries, size_t n)
{
    uint8_t *p = g->buffer;
    for (size_t i = 0; i < n; i++) {
        const struct gsi_entry *e = &entries[i];
        if (!gsi_entry_valid(e)) {
            ds_log_error("gsi: entry %zu of the batch is invalid (ids, ts or day)", i);
            return -DS_EUSAGE;
        }
        size_t key = gsi_customer_encode(&e->customer_id, p);
        key += gsi_key_tail_encode(e->ts_ms, &e->order_id, p + key);
        size_t value = gsi_key_value_encode(e, p + key);
        g->slots[i] = (struct gsi_slot){.key = p,
                                        .key_bytes = (uint16_t)key,
                                        .value_bytes = (uint16_t)value,
                                        .index = (uint32_t)i};
        p += key + value;
    }
    qsort(g->slots, n, sizeof(*g->slots), gsi_slot_compare);
    return 0;
}

/* Fills g->batch with the cursor and the sorted batch: keys in order make each memtable insert
 * start from the previous one's position. */
static void gsi_batch_fill(struct gsi_rocks *g, size_t n, const void *cursor, size_t cursor_len)
{
    rocksdb_writebatch_clear(g->batch);
    rocksdb_writebatch_put(g->batch, gsi_cursor_key, sizeof(gsi_cursor_key), cursor, cursor_len);
    for (size_t i = 0; i < n; i++) {
        const struct gsi_slot *s = &g->slots[i];
        if (i + 1 < n && gsi_slot_same_key(s, &g->slots[i + 1])) {
            continue; /* the last of equal keys in the caller's order wins */
        }
        rocksdb_writebatch_put(g->batch, (const char *)s->key, s->key_bytes,
                               (const char *)s->key + s->key_bytes, s->value_bytes);
    }
    ASSERT((size_t)rocksdb_writebatch_count(g->batch) <= n + 1);
}

int gsi_rocks_apply(struct gsi_rocks *g, const struct gsi_entry *entries, size_t n,
                    const void *cursor, size_t cursor_len)
{
    ASSERT(g != NULL);
    ASSERT(g->writer);
    ASSERT(n == 0 || entries != NULL);
    ASSERT(cursor_len == 0 || cursor != NULL);
    if (n > g->batch_entries_max || cursor_len > GSI_CURSOR_BYTES_MAX) {
        ds_log_error("gsi: a batch of %zu entries and a cursor of %zu bytes exceed %" PRIu32
                     " and %u",
                     n, cursor_len, g->batch_entries_max, GSI_CURSOR_BYTES_MAX);
        return -DS_ELIMIT;
    }
    int rc = gsi_batch_encode(g, entries, n);
    if (rc != 0) {
        return rc;
    }
    gsi_batch_fill(g, n, cursor_len > 0 ? cursor : "", cursor_len);
    char *err = NULL;
    rocksdb_write(g->db, g->write, g->batch, &err);
    return err == NULL ? 0 : gsi_rocks_error(err, "cannot write a batch to", "the index");
}

/* ---- reading ------------------------------------------------------------------------------- */

int gsi_rocks_cursor(struct gsi_rocks *g, void *buf, size_t cap, size_t *len)
{
    ASSERT(g != NULL);
    ASSERT(len != NULL);
    size_t value_len = 0;
    char *err = NULL;
    char *value =
        rocksdb_get(g->db, g->read, gsi_cursor_key, sizeof(gsi_cursor_key), &value_len, &err);
    if (err != NULL) {
        return gsi_rocks_error(err, "cannot read the cursor of", "the index");
    }
    if (value_len > GSI_CURSOR_BYTES_MAX) {
        rocksdb_free(value);
        ds_log_error("gsi: the stored cursor has %zu bytes, more than %u", value_len,
                     GSI_CURSOR_BYTES_MAX);
        return -DS_ECORRUPT;
    }
    *len = value_len;
    int rc = value_len > cap ? -ENOSPC : 0;
    if (rc == 0 && value_len > 0) {
        memcpy(buf, value, value_len);
    }
    rocksdb_free(value); /* NULL when the key is absent */
    return rc;
}

/* Decodes one stored entry of the customer whose key part is prefix_len bytes. */
static int gsi_entry_decode(const struct ds_id *customer, const uint8_t *key, size_t key_len,
                            size_t prefix_len, const uint8_t *value, size_t value_len,
                            struct gsi_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->customer_id = *customer;
    int rc = gsi_key_tail_decode(key + prefix_len, key_len - prefix_len, &e->ts_ms, &e->order_id);
    if (rc == 0) {
        rc = gsi_key_value_decode(value, value_len, e);
    }
    if (rc != 0) {
        ds_log_error("gsi: a stored entry of %zu key bytes does not decode", key_len);
        return rc;
    }
    e->day = ds_day_from_ms(e->ts_ms);
    return 0;
}

/* The iterator's key when it still belongs to the customer whose key part is prefix. */
static const uint8_t *gsi_iter_key(rocksdb_iterator_t *it, const uint8_t *prefix, size_t prefix_len,
                                   size_t *key_len)
{
    if (!rocksdb_iter_valid(it)) {
        return NULL;
    }
    const uint8_t *key = (const uint8_t *)rocksdb_iter_key(it, key_len);
    if (*key_len <= prefix_len || memcmp(key, prefix, prefix_len) != 0) {
        return NULL;
    }
    return key;
}

/* Fills out from the iterator, already positioned at the first entry of the page. */
static int gsi_page_fill(rocksdb_iterator_t *it, const struct ds_id *customer,
                         const uint8_t *prefix, size_t prefix_len, uint32_t limit,
                         struct gsi_page *out)
{
    size_t key_len = 0;
    const uint8_t *key = NULL;
    uint8_t last[GSI_KEY_BYTES_MAX];
    size_t last_len = 0;
    while (out->count < limit && (key = gsi_iter_key(it, prefix, prefix_len, &key_len)) != NULL) {
        size_t value_len = 0;
        const uint8_t *value = (const uint8_t *)rocksdb_iter_value(it, &value_len);
        if (key_len > GSI_KEY_BYTES_MAX) {
            return -DS_ECORRUPT;
        }
        int rc = gsi_entry_decode(customer, key, key_len, prefix_len, value, value_len,
                                  &out->entries[out->count]);
        if (rc != 0) {
            return rc;
        }
        memcpy(last, key, key_len);
        last_len = key_len;
        out->count++;
        rocksdb_iter_next(it);
    }
    if (out->count == limit && gsi_iter_key(it, prefix, prefix_len, &key_len) != NULL) {
        out->has_next = true;
        gsi_key_hex_encode(last + prefix_len, last_len - prefix_len, out->next_token);
    }
    return 0;
}

int gsi_rocks_query(struct gsi_rocks *g, const struct ds_id *customer, uint32_t limit,
                    const char *page_token, struct gsi_page *out)
{
    ASSERT(g != NULL);
    ASSERT(out != NULL && out->entries != NULL);
    if (!gsi_key_id_valid(customer) || limit < 1 || limit > GSI_PAGE_LIMIT_MAX) {
        return -DS_EUSAGE;
    }
    uint8_t seek[GSI_KEY_BYTES_MAX];
    size_t prefix_len = gsi_customer_encode(customer, seek);
    size_t seek_len = prefix_len;
    if (page_token != NULL && page_token[0] != '\0') {
        int tail = gsi_key_token_decode(page_token, seek + prefix_len);
        if (tail < 0) {
            return tail;
        }
        seek_len += (size_t)tail;
    }
    out->count = 0;
    out->has_next = false;
    out->next_token[0] = '\0';
    rocksdb_iterator_t *it = rocksdb_create_iterator(g->db, g->read);
    rocksdb_iter_seek(it, (const char *)seek, seek_len);
    size_t key_len = 0;
    const uint8_t *key = gsi_iter_key(it, seek, prefix_len, &key_len);
    if (seek_len > prefix_len && key != NULL && key_len == seek_len &&
        memcmp(key, seek, seek_len) == 0) {
        rocksdb_iter_next(it); /* the token's own entry ended the previous page */
    }
    int rc = gsi_page_fill(it, customer, seek, prefix_len, limit, out);
    char *err = NULL;
    rocksdb_iter_get_error(it, &err);
    if (rc == 0 && err != NULL) {
        rc = gsi_rocks_error(err, "cannot read", "the index");
        err = NULL;
    }
    rocksdb_free(err);
    rocksdb_iter_destroy(it);
    return rc;
}

uint64_t gsi_rocks_bytes_on_disk(struct gsi_rocks *g)
{
    ASSERT(g != NULL);
    uint64_t bytes = 0;
    if (rocksdb_property_int(g->db, "rocksdb.total-sst-files-size", &bytes) != 0) {
        return 0;
    }
    return bytes;
}
