/*
 * gsi: the store of the by-customer global secondary index (issue 5), private to query/.
 *
 * It keeps, for every customer, that customer's orders (order id, ts, day, status, amount)
 * sorted newest first, plus the builder's opaque cursor, in a RocksDB database under a
 * directory of its own. The builder adds entries in batches (gsi_apply), each batch together
 * with the cursor that says how far into the base data it reaches, atomically; queries read one
 * customer's orders a page at a time (gsi_query) with an opaque page token.
 *
 * Threads and ownership: one writer handle per directory (gsi_open; RocksDB's LOCK file refuses
 * a second one). gsi_apply and gsi_close belong to one thread; gsi_query, gsi_cursor and
 * gsi_bytes_on_disk may run on any number of threads at once, on the writer's handle or on a
 * reader's. A reader (gsi_open_reader) is a read-only view for another process, such as
 * `dayshard serve`: it sees what the writer had applied when it was opened or last refreshed
 * (gsi_reader_refresh, which belongs to one thread and must not overlap queries on that reader).
 *
 * Memory is bounded by configuration, not by the number of customers or orders: the block cache
 * (which also holds index and filter blocks), and for the writer the write buffers
 * (write_buffer_bytes) and the batch buffers of batch_entries_max entries; see gsi_memory_bytes.
 */
#ifndef DS_QUERY_GSI_H
#define DS_QUERY_GSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* One apply may carry at most this many entries: a group commit of the node holds up to 1M
 * events (ARCHITECTURE.md, file ingest), and the batch buffer is sized for the worst case. */
#define GSI_BATCH_ENTRIES_MAX (1u << 20)
#define GSI_BATCH_ENTRIES_DEFAULT 65536u
/* The builder's cursor: positions of a few thousand partitions fit. */
#define GSI_CURSOR_BYTES_MAX 65536u
/* A page holds 1..GSI_PAGE_LIMIT_MAX entries (DESIGN.md section 5: limit at most 1000). */
#define GSI_PAGE_LIMIT_MAX 1000u
/* A page token is lowercase hex of the last entry's (ts, order id) key part: at most
 * 8 + 1 + 2 * DS_ID_BYTES_MAX + 2 bytes, two characters each. */
#define GSI_TOKEN_CHARS_MAX (2u * (8u + 1u + 2u * DS_ID_BYTES_MAX + 2u))
/* Block cache: at least 1 MiB (below that every query misses), at most 64 GiB. */
#define GSI_CACHE_BYTES_MIN (1ull << 20)
#define GSI_CACHE_BYTES_MAX (64ull << 30)
#define GSI_CACHE_BYTES_DEFAULT (64ull << 20)
/* Write buffers (RocksDB memtables; two, each of half this): at least 1 MiB (tests force
 * flushes with it), at most 16 GiB. 128 MiB holds ~1.4M entries per buffer, so level-0 files
 * are large and few and compaction rewrites each entry fewer times (bench_gsi_store). */
#define GSI_WRITE_BUFFER_BYTES_MIN (1ull << 20)
#define GSI_WRITE_BUFFER_BYTES_MAX (16ull << 30)
#define GSI_WRITE_BUFFER_BYTES_DEFAULT (128ull << 20)

struct gsi_config {
    const char *dir;             /* the index directory; gsi_open creates it when missing */
    uint64_t cache_bytes;        /* RocksDB block cache, index and filter blocks included */
    uint32_t batch_entries_max;  /* largest n gsi_apply accepts (sizes the batch buffer) */
    uint64_t write_buffer_bytes; /* writer: RocksDB memtables, both together */
};

/* One order in a customer's view. day is the UTC day of ts_ms (the partition it came from);
 * gsi_apply refuses an entry whose day disagrees. */
struct gsi_entry {
    struct ds_id customer_id;
    int64_t ts_ms;
    struct ds_id order_id;
    int32_t day;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    int64_t amount_units;
};

/* One page of a customer's orders. The caller points entries at an array of at least `limit`
 * entries (borrowed for the call); gsi_query fills count entries and the next token. */
struct gsi_page {
    struct gsi_entry *entries;
    uint32_t count;
    bool has_next;                            /* false: this was the last page */
    char next_token[GSI_TOKEN_CHARS_MAX + 1]; /* NUL-terminated, "" when !has_next */
};

struct gsi;

/* Sets every field to its default; the caller still sets dir. */
void gsi_config_defaults(struct gsi_config *cfg);
/* Returns 0 or -DS_EUSAGE (no dir, or a knob outside its limits), logging why. */
DS_MUST_USE int gsi_config_check(const struct gsi_config *cfg);
/* Memory a writer handle needs at most (cache + write buffers + batch buffers + RocksDB's fixed
 * overheads). */
uint64_t gsi_memory_bytes(const struct gsi_config *cfg);

/* Opens (creating when missing) the writer handle on cfg->dir. cfg is borrowed for the call.
 * Returns 0, -DS_EUSAGE, -DS_EFORMAT (not a GSI directory of this version), -DS_ELOCKED
 * (another writer holds it), -ENOMEM, or -EIO (RocksDB refused, logged with its message). */
DS_MUST_USE int gsi_open(const struct gsi_config *cfg, struct gsi **out);
/* Opens a read-only view of the index a writer (perhaps in another process) keeps in cfg->dir;
 * secondary_dir is a directory of the reader's own for RocksDB's logs (created when missing).
 * Returns 0, -ENOENT (no index there yet), -DS_EFORMAT, -ENOMEM or -EIO. */
DS_MUST_USE int gsi_open_reader(const struct gsi_config *cfg, const char *secondary_dir,
                                struct gsi **out);
/* Makes a reader see what the writer has applied since. Returns 0 or -EIO. */
DS_MUST_USE int gsi_reader_refresh(struct gsi *g);
/* Closes either kind of handle; NULL is fine. */
void gsi_close(struct gsi *g);

/* Adds n entries (borrowed) and replaces the cursor with cursor[0..cursor_len) (borrowed),
 * atomically: queries see all of them or none, and the cursor never runs ahead of its
 * entries. Not durable at return (the write-ahead log is written, not synced): after a power
 * cut the store holds the entries and the cursor of the applies up to some earlier one, and
 * the builder replays from that cursor; a process crash loses nothing. A reader instance sees
 * the apply after its next refresh. Entries already present (same customer, ts and order id) are
 * replaced by the same bytes, so re-applying a batch changes nothing. Writer handle only. Returns
 * 0, -DS_EUSAGE (an invalid entry, logged with its index), -DS_ELIMIT (n above batch_entries_max or
 * cursor_len above GSI_CURSOR_BYTES_MAX), or -EIO. */
DS_MUST_USE int gsi_apply(struct gsi *g, const struct gsi_entry *entries, size_t n,
                          const void *cursor, size_t cursor_len);

/* Copies the last applied cursor into buf (cap bytes) and its length into *len (0 before the
 * first apply). Returns 0, -ENOSPC when cap is too small (*len still set), -DS_ECORRUPT or
 * -EIO. */
DS_MUST_USE int gsi_cursor(struct gsi *g, void *buf, size_t cap, size_t *len);

/* One page of customer's orders, newest first: ts descending; among equal ts, order ids
 * descending with every string id before every integer id (strings compare bytewise, a longer
 * string after its own prefix comes first). page_token NULL or "" starts at the newest entry;
 * otherwise it is a next_token of an earlier page of the same customer, and the page starts
 * right after that entry (entries applied since are newer, so they never shift later pages).
 * Returns 0, -DS_EUSAGE (limit outside 1..GSI_PAGE_LIMIT_MAX, a malformed token, an invalid
 * customer id), -DS_ECORRUPT (a stored entry fails to decode) or -EIO. */
DS_MUST_USE int gsi_query(struct gsi *g, const struct ds_id *customer, uint32_t limit,
                          const char *page_token, struct gsi_page *out);

/* Bytes of the index's table files on disk (RocksDB's live SST size). */
uint64_t gsi_bytes_on_disk(struct gsi *g);

#endif /* DS_QUERY_GSI_H */
