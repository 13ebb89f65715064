/*
 * store.c: the by-customer index store (index.h): an append-only log of per-customer runs and a
 * fixed table of slots, the design a prototype bench measured against RocksDB, the store it
 * replaced (docs/PERFORMANCE.md, "The by-customer index", has the figures).
 *
 * Directory: DIR/FORMAT ("dayshard-gsi 2"), DIR/lock (flock(2)ed by the one writer), DIR/log,
 * DIR/table (the last checkpoint of the slot table; DIR/table.tmp while one is written).
 *
 * The log (all integers little-endian): a 64-byte header (magic, u32 slots_log2, u32 CRC32C of
 * the 28 bytes before it), then records, each
 *
 *   u32 crc       CRC32C of the record's bytes after this field
 *   u32 len       the record's bytes, header included
 *   u8  type      INDEX_RECORD_RUN, INDEX_RECORD_CURSOR, INDEX_RECORD_SEALED or
 * INDEX_RECORD_DIRECTORY
 *
 * A run (one customer's entries of one apply, sorted by tail key, that is newest first; at most
 * INDEX_RUN_ENTRIES_MAX, a customer with more in one apply gets several runs):
 *
 *   [9]  u8 customer kind (0 integer, 1 string)   [10] u8 customer id bytes (8 for an integer)
 *   [12] u32 entry count                          [16] u64 prev: the chain's previous run, or 0
 *   [24] i64 chain_max_ts: the newest ts in this run and every run before it on its chain
 *   [32] i64 min_ts: the oldest ts in this run
 *   [40] u32 slot index                           [44] u32 zero
 *   [48] u64 slot tag (the tag of the slot's owner, which may be another customer)
 *   [56] i64 the chain_max_ts of the previous run (0 without one), so a walk stops before
 *        reading a run it does not need
 *   [64] u64 skip: the chain's head before this customer's runs of this apply (0: none), so
 *        a walk that needs nothing older than this run from this apply jumps past the rest
 *   [72] customer id bytes, then each entry: u8 tail key bytes, tail key (key.c), u8 value
 *        bytes, value (key.c)
 *
 * A cursor delta record (type 5, index_private.h) ends every apply: the bytes of the builder's
 * cursor that changed since the apply before (a splice and patches; pieces of at most 64 KiB
 * when the change is larger, the last one ending the apply), checked against the record before
 * it by that record's CRC. Logs written before it have whole-cursor records instead (type 2:
 * [12] u32 cursor bytes, [16] u64 apply number, [24] the cursor), still read. The whole cursor
 * is kept where a reader starts: in DIR/table after the slots (the checkpoint's cursor), and
 * as one RESET delta record at the end of a compacted log; a log read from its start begins
 * with the empty cursor. Records of an apply that has no cursor record after them were never
 * acknowledged: an opening writer cuts them off (and everything from a damaged record on), and
 * the builder replays them from the cursor it finds.
 *
 * The slot table: 2^k slots of (tag, head, chain max ts). A customer's tag is a 64-bit hash of its
 * id (never 0, which marks an empty slot); its home slot is the tag's low k bits; it owns the
 * first slot from home, within INDEX_PROBE_MAX slots, that holds its tag or was empty when its
 * first run was written (slots are never emptied, so that answer never changes until a seal
 * writes a new table, which places every customer afresh and may be larger). When all of
 * them belong to others, its runs join the home slot's chain and carry their own id, which
 * queries compare: a full table costs query time, not correctness. Every run records the slot it
 * went to and that slot's tag, so a table rebuilt from the log is the writer's table exactly.
 *
 * Queries walk a chain from its head (the newest run), newest runs first, merging each run's
 * entries of the customer into the best limit + 1 distinct tail keys; equal keys (an entry
 * applied again) count once, the newest run's copy. The walk stops when the chain_max_ts of the
 * next run is older than the worst kept entry (nothing older on the chain can enter), so for
 * events that arrive roughly in time order a newest-10 query reads one or two runs.
 *
 * Concurrency: index_apply claims slots (tag stores), appends runs, then publishes each slot's new
 * head with a release store, then appends the cursor record; queries load heads with acquire and
 * read records with pread, so a query sees a customer's runs of an apply all or none. A reader
 * handle keeps a table of its own, brought up to the last complete apply by scanning the log.
 *
 * Compaction (index_compact, compact.c) rewrites the log as DIR/log.compact, renamed over DIR/log
 * once synced (DIR/table removed first): every chain's distinct entries as sealed records (type
 * 3, seal.c: one section per slot, varint and delta fields, zstd when it pays), then one cursor
 * record repeating the last apply's number. A customer with 4 or more sections gets a directory
 * record (type 4: [12] u32 count, [16] u32 slot, [20] u32 0, then count x (u64 section record
 * offset, i64 oldest ts), newest first) named by its newest section, so a walk with a token
 * jumps to the section holding it. Readers see a sealed section as the run image seal.c makes
 * of it. A compacted log is its own checkpoint until checkpoint_bytes more are appended.
 *
 * Checkpoints: the writer writes the table's used slots (CRC32C) to DIR/table atomically every
 * checkpoint_bytes of log and at close, after syncing the log (a thread of its own does it while
 * applies go on: "checkpoints" below), then the cursor ([28] u32 its bytes; the body CRC covers
 * slots and cursor). The header names the cursor
 * record it covers (offset, CRC), so a checkpoint of another log (the log cut shorter since, or
 * rebuilt) is never taken: opening then scans the whole log.
 *
 * This file holds the little helpers the store's files share, the sealed-record buffers of a
 * thread, slot lookup and the configuration; the other parts are in files.c, records.c,
 * checkpoint.c, open.c, apply.c, read.c, compact.c and check.c (index_private.h).
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

/* ---- little helpers ------------------------------------------------------------------------ */

/* The id bytes a run stores: 8 little-endian bytes for an integer, the string's bytes. */
size_t index_customer_bytes(const struct ds_id *customer, uint8_t *dst)
{
    if (!customer->is_string) {
        ds_put_le64(dst, (uint64_t)customer->value);
        return 8;
    }
    memcpy(dst, customer->text, customer->len);
    return customer->len;
}

/* pread of up to len bytes; *got is what the file had. */
int index_pread_all(int fd, void *dst, size_t len, uint64_t offset, size_t *got)
{
    ssize_t n = ds_pread_full(fd, dst, len, offset);
    if (n < 0) {
        return (int)n;
    }
    *got = (size_t)n;
    return 0;
}

void index_path(const struct index *g, const char *name, char *dst)
{
    int n = snprintf(dst, DS_PATH_MAX, "%s/%s", g->dir, name);
    ASSERT(n > 0 && n < DS_PATH_MAX);
}

/* ---- sealed records: a thread's buffers ---------------------------------------------------- */

static pthread_key_t index_seal_key;
static pthread_once_t index_seal_once = PTHREAD_ONCE_INIT;

static void index_seal_ctx_free(void *p)
{
    struct index_seal_ctx *c = p;
    if (c != NULL) {
        ZSTD_freeDCtx(c->dctx);
        free(c->record);
        free(c->raw);
        free(c->image);
        free(c);
    }
}

static void index_seal_key_make(void)
{
    int rc = pthread_key_create(&index_seal_key, index_seal_ctx_free);
    ASSERT(rc == 0);
}

/* This thread's buffers; NULL without memory. */
struct index_seal_ctx *index_seal_ctx(void)
{
    pthread_once(&index_seal_once, index_seal_key_make);
    struct index_seal_ctx *c = pthread_getspecific(index_seal_key);
    if (c != NULL) {
        return c;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->dctx = ZSTD_createDCtx();
    c->record = malloc(INDEX_SEAL_RECORD_BYTES_MAX);
    c->raw = malloc(INDEX_SEAL_RAW_MAX);
    c->image = malloc(INDEX_IMAGE_BYTES_MAX);
    if (c->dctx == NULL || c->record == NULL || c->raw == NULL || c->image == NULL ||
        pthread_setspecific(index_seal_key, c) != 0) {
        index_seal_ctx_free(c);
        return NULL;
    }
    return c;
}
/* ---- configuration ------------------------------------------------------------------------- */

void index_config_defaults(struct index_config *cfg)
{
    ASSERT(cfg != NULL);
    memset(cfg, 0, sizeof(*cfg));
    cfg->table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_DEFAULT;
    cfg->batch_entries_max = INDEX_BATCH_ENTRIES_DEFAULT;
    cfg->checkpoint_bytes = INDEX_CHECKPOINT_BYTES_DEFAULT;
}

int index_config_check(const struct index_config *cfg)
{
    ASSERT(cfg != NULL);
    if (cfg->dir == NULL || cfg->dir[0] == '\0' || strlen(cfg->dir) + 16 >= DS_PATH_MAX) {
        ds_log_error("gsi: the index directory is missing or too long");
        return -DS_EUSAGE;
    }
    if (cfg->table_slots_log2 < INDEX_TABLE_SLOTS_LOG2_MIN ||
        cfg->table_slots_log2 > INDEX_TABLE_SLOTS_LOG2_MAX) {
        ds_log_error("gsi: a table of 2^%" PRIu32 " slots is outside 2^%u..2^%u",
                     cfg->table_slots_log2, INDEX_TABLE_SLOTS_LOG2_MIN, INDEX_TABLE_SLOTS_LOG2_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->batch_entries_max < 1 || cfg->batch_entries_max > INDEX_BATCH_ENTRIES_MAX) {
        ds_log_error("gsi: a batch of %" PRIu32 " entries is outside 1..%u", cfg->batch_entries_max,
                     INDEX_BATCH_ENTRIES_MAX);
        return -DS_EUSAGE;
    }
    if (cfg->checkpoint_bytes < INDEX_CHECKPOINT_BYTES_MIN ||
        cfg->checkpoint_bytes > INDEX_CHECKPOINT_BYTES_MAX) {
        ds_log_error("gsi: a checkpoint interval of %" PRIu64 " bytes is outside %llu..%llu",
                     cfg->checkpoint_bytes, INDEX_CHECKPOINT_BYTES_MIN, INDEX_CHECKPOINT_BYTES_MAX);
        return -DS_EUSAGE;
    }
    return 0;
}

uint64_t index_memory_bytes(const struct index_config *cfg)
{
    ASSERT(cfg != NULL);
    uint64_t per_entry = 2u * sizeof(struct index_item) + INDEX_TAIL_BYTES_MAX + sizeof(uint32_t) +
                         sizeof(struct index_publish);
    /* The cursor (two copies) grows with the partitions followed, 20 bytes each: counted here
     * at the 6,400 (128 KiB) of 100 kept days of 64 shards. */
    return ((uint64_t)INDEX_SLOT_BYTES << cfg->table_slots_log2) + INDEX_IO_BUFFER_BYTES * 2u +
           2u * (128u << 10) + (uint64_t)cfg->batch_entries_max * per_entry;
}
