/*
 * gsi: the store of the by-customer global secondary index (issue 5), the second durable store
 * of a node beside storage/ (query/'s builder keeps it up to date; it depends on common/ only).
 *
 * It keeps, for every customer, that customer's orders (order id, ts, day, status, amount)
 * and the builder's opaque cursor, in a directory of its own: an append-only log of per-customer
 * runs (each run: one customer's entries of one apply, sorted newest first, with a pointer to
 * that customer's previous run) and a fixed table of slots (customer -> newest run) in memory,
 * checkpointed to a file. ARCHITECTURE.md ("The by-customer index") has the format and the
 * measurements that chose it over RocksDB, the store it replaced.
 * The builder adds entries in batches (gsi_apply), each batch together with the cursor that says
 * how far into the base data it reaches, atomically; queries read one customer's orders a page
 * at a time (gsi_query) with an opaque page token.
 *
 * Threads and ownership: one writer handle per directory (gsi_open; a lock file refuses a
 * second one). gsi_apply and gsi_close belong to one thread; gsi_query, gsi_cursor and
 * gsi_bytes_on_disk may run on any number of threads at once, on the writer's handle or on a
 * reader's. A reader (gsi_open_reader) is a read-only view for another process, such as
 * `dayshard serve`: it sees what the writer had applied when it was opened or last refreshed
 * (gsi_reader_refresh, which belongs to one thread and must not overlap queries on that reader).
 *
 * Memory is bounded by configuration, not by the number of customers or orders: the slot table
 * (2^table_slots_log2 slots of 24 bytes, fixed when the index is created) and, for the writer,
 * the batch buffers of batch_entries_max entries; see gsi_memory_bytes.
 */
#ifndef DS_GSI_GSI_H
#define DS_GSI_GSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* One apply may carry at most this many entries: a group commit of the node holds up to 1M
 * events (ARCHITECTURE.md, file ingest), and the batch buffer is sized for the worst case. */
#define GSI_BATCH_ENTRIES_MAX (1u << 20)
#define GSI_BATCH_ENTRIES_DEFAULT 65536u
/* The builder's cursor: positions of 13,106 partitions fit (20 bytes each), 51 days grown to
 * 256 shards. 64 KiB held 3,276, and adaptive sharding passed that within a month (the builder
 * stopped, issue 16). Each apply writes the whole cursor: a log's cost that compaction drops. */
#define GSI_CURSOR_BYTES_MAX (256u * 1024u)
/* A page holds 1..GSI_PAGE_LIMIT_MAX entries (DESIGN.md section 5: limit at most 1000). */
#define GSI_PAGE_LIMIT_MAX 1000u
/* A page token is lowercase hex of the last entry's (ts, order id) key part: at most
 * 8 + 1 + 2 * DS_ID_BYTES_MAX + 2 bytes, two characters each. */
#define GSI_TOKEN_CHARS_MAX (2u * (8u + 1u + 2u * DS_ID_BYTES_MAX + 2u))
/* The slot table: 2^k slots of GSI_SLOT_BYTES. At least 2^5 (one probe window), at most 2^30
 * (24 GiB). 2^21 (48 MiB) keeps a million customers at a quarter load. */
#define GSI_TABLE_SLOTS_LOG2_MIN 5u
#define GSI_TABLE_SLOTS_LOG2_MAX 30u
#define GSI_TABLE_SLOTS_LOG2_DEFAULT 21u
#define GSI_SLOT_BYTES 24u
/* The writer checkpoints the table after the log grew this much (and at close), so an opening
 * handle reads at most this much log beyond the checkpoint. */
#define GSI_CHECKPOINT_BYTES_MIN (1ull << 20)
#define GSI_CHECKPOINT_BYTES_MAX (1ull << 40)
#define GSI_CHECKPOINT_BYTES_DEFAULT (512ull << 20)

struct gsi_config {
    const char *dir;            /* the index directory; gsi_open creates it when missing */
    uint32_t table_slots_log2;  /* slot table size when the index is created (an existing index
                                   keeps the size it was created with) */
    uint32_t batch_entries_max; /* largest n gsi_apply accepts (sizes the batch buffer) */
    uint64_t checkpoint_bytes;  /* writer: log growth between table checkpoints */
    bool checkpoint_inline;     /* writer: the apply that passes checkpoint_bytes syncs the log and
                                   the checkpoint itself (the behaviour before issue 16, kept to
                                   compare); false: a thread of the writer's does the syncs */
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
/* Memory a writer handle needs at most (slot table + batch buffers + I/O buffers). */
uint64_t gsi_memory_bytes(const struct gsi_config *cfg);

/* Opens (creating when missing) the writer handle on cfg->dir. cfg is borrowed for the call.
 * Opening finds the end of the last complete apply (a torn or damaged tail after a crash is cut
 * off, logged with its size: the builder replays it from the cursor). Returns 0, -DS_EUSAGE,
 * -DS_EFORMAT (not a GSI directory of this version), -DS_ELOCKED (another writer holds it),
 * -ENOMEM, or -EIO (logged). */
DS_MUST_USE int gsi_open(const struct gsi_config *cfg, struct gsi **out);
/* Opens a read-only view of the index a writer (perhaps in another process) keeps in cfg->dir,
 * with a slot table of its own (the size the index was created with). Returns 0, -ENOENT (no
 * index there yet), -DS_EFORMAT, -DS_ECORRUPT (DIR/table is not a checkpoint of the log, or a
 * damaged record of the log is followed by intact ones: damage a reader must not answer past;
 * logged, naming the file and the repair), -ENOMEM or -EIO. */
DS_MUST_USE int gsi_open_reader(const struct gsi_config *cfg, struct gsi **out);
/* Makes a reader see what the writer has applied since. Returns 0, -DS_ECORRUPT (a damaged
 * record followed by intact ones, as at open) or -EIO. */
DS_MUST_USE int gsi_reader_refresh(struct gsi *g);
/* True when DIR/log is no longer the file the handle reads (`dayshard gsi rebuild` moved the
 * index aside and made a new one): the caller opens a new reader. False while DIR/log is
 * missing (a rebuild in progress): the old view stays the best answer. */
bool gsi_reader_replaced(struct gsi *g);
/* Closes either kind of handle; NULL is fine. */
void gsi_close(struct gsi *g);

/* Adds n entries (borrowed) and replaces the cursor with cursor[0..cursor_len) (borrowed),
 * atomically: a customer's query sees all of that customer's entries of the apply or none, and
 * an entry is queryable before gsi_cursor returns the cursor that covers it. Not durable at
 * return (the log is written, not synced; checkpoints sync it): after a power cut the store
 * holds the entries and the cursor of the applies up to some earlier one, and the builder
 * replays from that cursor; a process crash loses nothing. A reader sees the apply after its
 * next refresh. An entry equal to one already present (same customer, ts and order id) hides
 * it (queries return the newest apply's copy once), so re-applying a batch changes no answer.
 * Writer handle only. Returns
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

/* What gsi_compact did. */
struct gsi_compact_stats {
    uint64_t bytes_before; /* the log's size before and after */
    uint64_t bytes_after;
    double seconds;
};

/* Compacts the log (issue 16): every customer's entries (each distinct key once, the newest
 * copy) are rewritten into sealed records, a few large delta-encoded zstd-compressed sections
 * per customer, in a new log that replaces DIR/log by rename (DIR/log.compact while it is
 * written, synced before the rename; DIR/table is removed first and written again after).
 * A crash at any point leaves the old log or the new complete one, never a mix; queries on
 * this handle keep answering from the old log until the swap, and readers in other processes
 * see gsi_reader_replaced. Answers are the same before and after. Writer handle, between
 * applies (the thread that applies). stats may be NULL. Returns 0, -ENOMEM, -DS_ECORRUPT (a
 * damaged run on a chain: `gsi rebuild`) or -EIO; on failure the old log stays in use. */
DS_MUST_USE int gsi_compact(struct gsi *g, struct gsi_compact_stats *stats);

/* Bytes of the index's files on disk (log and table checkpoint). */
uint64_t gsi_bytes_on_disk(struct gsi *g);

/* What the writer's checkpoints cost (benchmarks and tests; any thread, relaxed counters). */
struct gsi_checkpoint_stats {
    uint64_t started;            /* checkpoints asked for (inline: begun) */
    uint64_t done;               /* renamed into place */
    uint64_t failed;             /* logged; a later one retries */
    uint64_t table_ns_last;      /* writing the last one's table to DIR/table.tmp */
    uint64_t table_ns_max;       /* the longest of those */
    uint64_t sync_ns_last;       /* the last one's syncs of the log and the table, and the rename */
    uint64_t sync_ns_max;        /* the longest of those */
    uint64_t apply_wait_ns_last; /* the last time an apply waited for a checkpoint: the whole
                                    checkpoint inline, else for the thread's table write */
    uint64_t apply_wait_ns_max;  /* the longest of those */
    uint64_t log_bytes_last;     /* the log prefix the last one covers */
};
/* The writer's checkpoint figures so far (zeros on a reader). */
void gsi_checkpoint_stats_get(struct gsi *g, struct gsi_checkpoint_stats *out);

/* ---- checking (`dayshard fsck`, `dayshard gsi check`) --------------------------------------- */

/* What gsi_check found in an index directory. */
struct gsi_check_report {
    bool present;                /* the directory exists */
    bool damaged;                /* reason names the first damage found */
    char reason[256];            /* "DIR/file: where: what"; "" when clean */
    uint32_t slots_log2;         /* the table size the log was made with (0: no log yet) */
    uint64_t log_bytes;          /* the log's size when the check began: the part checked */
    uint64_t committed_bytes;    /* where the last cursor record ends: what readers see */
    uint64_t tail_bytes;         /* after it: an apply a crash cut short, or a torn record */
    uint64_t applies;            /* complete applies (cursor records) */
    uint64_t runs;               /* their runs */
    uint64_t entries;            /* their entries; an entry applied again counts again */
    uint64_t slots_used;         /* chains in the table the log builds */
    bool table_present;          /* DIR/table exists */
    uint64_t table_covers_bytes; /* the log prefix DIR/table covers */
    size_t cursor_len;           /* bytes of the last cursor, copied to the caller's buffer */
};

/* Reads every file of the index in dir without changing any and without the writer's lock, so
 * it may run beside a live writer (it checks the log as long as it was when the check began):
 * FORMAT; the log's header and every record (checksum, fields, entries that decode in order,
 * each run linked to its chain's previous run, apply numbers in sequence); DIR/table, the
 * checkpoint (checksums, size, slots sorted and in bounds, the cursor record it names), which
 * must equal the table the log's records build up to the point it covers. A record that fails
 * its checks is damage when an intact record follows it or when DIR/table covers it; otherwise
 * it is a torn tail a crash left (tail_bytes), which is not. The last cursor goes to
 * cursor[0..cursor_cap) (GSI_CURSOR_BYTES_MAX always suffices; a longer one is damage).
 * Returns 0 with *out filled (a missing dir: present false), -DS_EUSAGE (dir too long) or
 * -ENOMEM; an unreadable file is damage, named in the reason. */
DS_MUST_USE int gsi_check(const char *dir, void *cursor, size_t cursor_cap,
                          struct gsi_check_report *out);

/* One entry, borrowed for the call; a non-zero return stops the visit. */
typedef int (*gsi_entry_fn)(const struct gsi_entry *entry, void *user);
/* Calls fn for every entry of the runs in the first `until` bytes of dir's log (until: the
 * committed_bytes of a gsi_check that found no damage), in log order, once per stored copy (an
 * entry applied again comes again). Returns 0, fn's non-zero value, -DS_ECORRUPT (a record
 * there no longer reads back intact: the log changed since the check), -ENOENT, -ENOMEM or
 * -EIO. */
DS_MUST_USE int gsi_check_entries(const char *dir, uint64_t until, gsi_entry_fn fn, void *user);

#endif /* DS_GSI_GSI_H */
