/*
 * index: the by-customer index (a "global secondary index", GSI, in DynamoDB's words), the
 * second durable store of a node beside storage/, kept in DATA/gsi: the store itself (its
 * files: store.c and the files it names), the builder that keeps it up to date from storage's
 * durable blocks (builder.c), read-only views for other processes (builder.c, reader_wait.c),
 * its rebuild from the base data (rebuild.c) and its check against the base (verify.c).
 *
 * It keeps, for every customer, that customer's orders (order id, ts, day, status, amount)
 * and the builder's opaque cursor, in a directory of its own: an append-only log of per-customer
 * runs (each run: one customer's entries of one apply, sorted newest first, with a pointer to
 * that customer's previous run) and a fixed table of slots (customer -> newest run) in memory,
 * checkpointed to a file. ARCHITECTURE.md ("The by-customer index") has the format and the
 * measurements that chose it over RocksDB, the store it replaced.
 * The builder adds entries in batches (index_apply), each batch together with the cursor that says
 * how far into the base data it reaches, atomically; queries read one customer's orders a page
 * at a time (index_query) with an opaque page token.
 *
 * Threads and ownership: one writer handle per directory (index_open; a lock file refuses a
 * second one). index_apply and index_close belong to one thread; index_query, index_cursor and
 * index_bytes_on_disk may run on any number of threads at once, on the writer's handle or on a
 * reader's. A reader (index_open_reader) is a read-only view for another process, such as
 * `dayshard serve`: it sees what the writer had applied when it was opened or last refreshed
 * (index_refresh, which belongs to one thread and must not overlap queries on that reader).
 *
 * Memory is bounded by configuration, not by the number of customers or orders: the slot table
 * (2^table_slots_log2 slots of 24 bytes when the index is created, doubled by a seal while more
 * than half is used: bounded by the customers retention keeps) and, for the writer,
 * the batch buffers of batch_entries_max entries; see index_memory_bytes.
 */
#ifndef DS_INDEX_INDEX_H
#define DS_INDEX_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>

#include "common/common.h"
#include "storage/storage.h"

/* One apply may carry at most this many entries: a group commit of the node holds up to 1M
 * events (ARCHITECTURE.md, file ingest), and the batch buffer is sized for the worst case. */
#define INDEX_BATCH_ENTRIES_MAX (1u << 20)
#define INDEX_BATCH_ENTRIES_DEFAULT 65536u
/* The builder's cursor, 20 bytes per partition followed: 256 MiB is 13.4M partitions, 143 years
 * of days of 256 shards without retention (with it, the kept days' only). The store keeps it in
 * memory and writes only what changed with each apply (store.c). */
#define INDEX_CURSOR_BYTES_MAX (256u << 20)
/* A page holds 1..INDEX_PAGE_LIMIT_MAX entries (docs/HTTP_API.md: limit at most 1000). */
#define INDEX_PAGE_LIMIT_MAX 1000u
/* A page token is lowercase hex of the last entry's (ts, order id) key part: at most
 * 8 + 1 + 2 * DS_ID_BYTES_MAX + 2 bytes, two characters each. */
#define INDEX_TOKEN_CHARS_MAX (2u * (8u + 1u + 2u * DS_ID_BYTES_MAX + 2u))
/* The slot table: 2^k slots of INDEX_SLOT_BYTES. At least 2^5 (one probe window), at most 2^30
 * (24 GiB). 2^21 (48 MiB) keeps a million customers at a quarter load. */
#define INDEX_TABLE_SLOTS_LOG2_MIN 5u
#define INDEX_TABLE_SLOTS_LOG2_MAX 30u
#define INDEX_TABLE_SLOTS_LOG2_DEFAULT 21u
#define INDEX_SLOT_BYTES 24u
/* The writer checkpoints the table after the log grew this much (and at close), so an opening
 * handle reads at most this much log beyond the checkpoint. */
#define INDEX_CHECKPOINT_BYTES_MIN (1ull << 20)
#define INDEX_CHECKPOINT_BYTES_MAX (1ull << 40)
#define INDEX_CHECKPOINT_BYTES_DEFAULT (512ull << 20)

struct index_config {
    const char *dir;            /* the index directory; index_open creates it when missing */
    uint32_t table_slots_log2;  /* slot table size when the index is created (an existing index
                                   keeps its size; seals grow it, index_seal_start) */
    uint32_t batch_entries_max; /* largest n index_apply accepts (sizes the batch buffer) */
    uint64_t checkpoint_bytes;  /* writer: log growth between table checkpoints */
    bool checkpoint_inline;     /* writer: the apply that passes checkpoint_bytes syncs the log and
                                   the checkpoint itself (kept to compare
                                   with the thread); false: a thread of the writer's does the syncs */
    uint32_t seal_batch_bytes;  /* writer: a seal moves the applies made since its snapshot this
                                   many bytes at a time (0: 8 MiB; a batch holds one record at
                                   least: tests set 1 to move each record alone) */
};

/* One order in a customer's view. day is the UTC day of ts_ms (the partition it came from);
 * index_apply refuses an entry whose day disagrees. */
struct index_entry {
    struct ds_id customer_id;
    int64_t ts_ms;
    struct ds_id order_id;
    int32_t day;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    int64_t amount_units;
};

/* The entry of an inserted event stored on day (its partition's day, the UTC day of its ts).
 * Inline: the builder calls it for every event it indexes. */
static inline void index_entry_of_event(const struct ds_event *event, int32_t day,
                                        struct index_entry *e)
{
    e->customer_id = event->customer_id;
    e->order_id = event->order_id;
    e->ts_ms = event->ts_ms;
    e->day = day;
    e->status_len = event->status_len;
    memcpy(e->status, event->status, event->status_len);
    e->amount_units = event->amount_units;
}

/* One page of a customer's orders. The caller points entries at an array of at least `limit`
 * entries (borrowed for the call); index_query fills count entries and the next token. */
struct index_page {
    struct index_entry *entries;
    uint32_t count;
    bool has_next;                              /* false: this was the last page */
    char next_token[INDEX_TOKEN_CHARS_MAX + 1]; /* NUL-terminated, "" when !has_next */
};

struct index;

/* Sets every field to its default; the caller still sets dir. */
void index_config_defaults(struct index_config *cfg);
/* Returns 0 or -DS_EUSAGE (no dir, or a knob outside its limits), logging why. */
DS_MUST_USE int index_config_check(const struct index_config *cfg);
/* Memory a writer handle needs at most (slot table + batch buffers + I/O buffers). */
uint64_t index_memory_bytes(const struct index_config *cfg);

/* Opens (creating when missing) the writer handle on cfg->dir. cfg is borrowed for the call.
 * Opening finds the end of the last complete apply (a torn or damaged tail after a crash is cut
 * off, logged with its size: the builder replays it from the cursor). Returns 0, -DS_EUSAGE,
 * -DS_EFORMAT (not a GSI directory of this version), -DS_ELOCKED (another writer holds it),
 * -ENOMEM, or -EIO (logged). */
DS_MUST_USE int index_open(const struct index_config *cfg, struct index **out);
/* Opens a read-only view of the index a writer (perhaps in another process) keeps in cfg->dir,
 * with a slot table of its own (the size the index was created with). Returns 0, -ENOENT (no
 * index there yet), -DS_EFORMAT, -DS_ECORRUPT (DIR/table is not a checkpoint of the log, or a
 * damaged record of the log is followed by intact ones: damage a reader must not answer past;
 * logged, naming the file and the repair), -ENOMEM or -EIO. */
DS_MUST_USE int index_open_reader(const struct index_config *cfg, struct index **out);
/* Makes a reader see what the writer has applied since. Returns 0, -DS_ECORRUPT (a damaged
 * record followed by intact ones, as at open) or -EIO. */
DS_MUST_USE int index_refresh(struct index *g);
/* True when DIR/log is no longer the file the handle reads (`dayshard gsi rebuild` moved the
 * index aside and made a new one): the caller opens a new reader. False while DIR/log is
 * missing (a rebuild in progress): the old view stays the best answer. */
bool index_replaced(struct index *g);
/* Closes either kind of handle; NULL is fine. */
void index_close(struct index *g);

/* Adds n entries (borrowed) and replaces the cursor with cursor[0..cursor_len) (borrowed),
 * atomically (the log gets only the bytes that changed, a few dozen for a cursor that differs in
 * a few places, whatever its length): a customer's query sees all of that customer's entries of the
 * apply or none, and an entry is queryable before index_cursor returns the cursor that covers it.
 * Not durable at return (the log is written, not synced; checkpoints sync it): after a power cut
 * the store holds the entries and the cursor of the applies up to some earlier one, and the builder
 * replays from that cursor; a process crash loses nothing. A reader sees the apply after its
 * next refresh. An entry equal to one already present (same customer, ts and order id) hides
 * it (queries return the newest apply's copy once), so re-applying a batch changes no answer.
 * Writer handle only. Returns
 * 0, -DS_EUSAGE (an invalid entry, logged with its index), -DS_ELIMIT (n above batch_entries_max or
 * cursor_len above INDEX_CURSOR_BYTES_MAX), or -EIO. */
DS_MUST_USE int index_apply(struct index *g, const struct index_entry *entries, size_t n,
                            const void *cursor, size_t cursor_len);

/* Copies the last applied cursor into buf (cap bytes) and its length into *len (0 before the
 * first apply; at most INDEX_CURSOR_BYTES_MAX). Returns 0, -ENOSPC when cap is too small (*len
 * still set: call again with a buffer that large), -DS_ECORRUPT or -EIO. */
DS_MUST_USE int index_cursor(struct index *g, void *buf, size_t cap, size_t *len);

/* One page of customer's orders, newest first: ts descending; among equal ts, order ids
 * descending with every string id before every integer id (strings compare bytewise, a longer
 * string after its own prefix comes first). page_token NULL or "" starts at the newest entry;
 * otherwise it is a next_token of an earlier page of the same customer, and the page starts
 * right after that entry (entries applied since are newer, so they never shift later pages).
 * Returns 0, -DS_EUSAGE (limit outside 1..INDEX_PAGE_LIMIT_MAX, a malformed token, an invalid
 * customer id), -DS_ECORRUPT (a stored entry fails to decode) or -EIO. */
DS_MUST_USE int index_query(struct index *g, const struct ds_id *customer, uint32_t limit,
                            const char *page_token, struct index_page *out);

/* What index_compact or a seal (index_seal_finish) did. */
struct index_compact_stats {
    uint64_t bytes_before; /* the log's size before and after */
    uint64_t bytes_after;
    double seconds;
    uint64_t written_bytes;   /* bytes the seal wrote: the sealed part and the copied tail */
    uint64_t tail_bytes;      /* of those, the records applied while the seal ran, copied */
    uint64_t dropped_entries; /* entries of days below the floor left out */
    uint64_t finish_ns;       /* the applying thread's share: the last tail copy and the swap */
    uint32_t slots_log2;      /* the new log's slot table (a seal grows it: index_seal_start) */
};

/* Compacts the log: every customer's entries (each distinct key once, the newest
 * copy) are rewritten into sealed records, a few large delta-encoded zstd-compressed sections
 * per customer, in a new log that replaces DIR/log by rename (DIR/log.compact while it is
 * written, synced before the rename; DIR/table is removed first and written again after).
 * A crash at any point leaves the old log or the new complete one, never a mix; queries on
 * this handle keep answering from the old log until the swap, and readers in other processes
 * see index_replaced. Answers are the same before and after. Writer handle, between
 * applies (the thread that applies). stats may be NULL. Returns 0, -ENOMEM, -DS_ECORRUPT (a
 * damaged run on a chain: `gsi rebuild`) or -EIO; on failure the old log stays in use. */
DS_MUST_USE int index_compact(struct index *g, struct index_compact_stats *stats);

/*
 * Online sealing: the compaction above, run beside the applies. index_seal_start (the applying
 * thread, between applies) notes where the log ends and starts a thread that writes every chain
 * up to there as sealed records into DIR/log.compact (leaving out entries of days below
 * floor_day, INT32_MIN: none), then copies the applies made meanwhile after them, their chain
 * pointers moved to the new log. The new log's table is the old one's size, doubled while more
 * than half of it would be used (compact.c); every customer is placed in it by its hash.
 * index_seal_finish (the applying thread, between applies)
 * copies the last applies, renames the new log over DIR/log and swaps it in: the only part that
 * holds up applies. Crash-safe as index_compact. One seal per handle at a time; the caller
 * finishes or cancels it before index_close.
 */
struct index_seal;
/* Returns 0 with *out set, -ENOMEM, -EIO (an earlier apply failed) or the thread's error. */
DS_MUST_USE int index_seal_start(struct index *g, int32_t floor_day, struct index_seal **out);
/* Whether the seal's thread is done (index_seal_finish would not wait for it). Any thread. */
bool index_seal_ready(const struct index_seal *s);
/* The log's offset up to which the seal has moved what was applied since its snapshot: the log's
 * end less this is what it has still to move. Any thread. */
uint64_t index_seal_moved_end(const struct index_seal *s);
/* Completes the seal when its thread is done (wait: waits for it and for a checkpoint in
 * flight). Returns 0 (swapped in; s freed, stats filled when not NULL), -EAGAIN (not yet: call
 * again after a later apply), or a negative code (logged; s freed, the old log stays). */
DS_MUST_USE int index_seal_finish(struct index_seal *s, bool wait,
                                  struct index_compact_stats *stats);
/* Stops the seal's thread and removes its file; the old log stays. NULL is fine. */
void index_seal_cancel(struct index_seal *s);
/* The log's sealed part (header and sealed records: what the last seal wrote) and the bytes
 * appended since. Writer thread. */
void index_log_bytes(const struct index *g, uint64_t *sealed, uint64_t *live);
/* When to seal: the live part passed INDEX_SEAL_LIVE_MIN_BYTES and half the sealed part (each
 * seal then rewrites at most three times what was appended since the last), or, once the
 * writer has been idle (the caller says so), it passed INDEX_SEAL_IDLE_MIN_BYTES and a 32nd of
 * the sealed part, so a quiet index ends sealed without resealing for every few applies.
 * Writer thread. */
#define INDEX_SEAL_LIVE_MIN_BYTES (4ull << 20)
#define INDEX_SEAL_IDLE_MIN_BYTES (64ull << 10)
bool index_seal_due(const struct index *g, bool idle);

/* Bytes of the index's files on disk (log and table checkpoint). */
uint64_t index_bytes_on_disk(struct index *g);

/* What the writer's checkpoints cost (benchmarks and tests; any thread, relaxed counters). */
struct index_checkpoint_stats {
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
void index_checkpoint_stats_get(struct index *g, struct index_checkpoint_stats *out);

/* ---- checking (`dayshard fsck`, `dayshard gsi check`) --------------------------------------- */

/* What index_check found in an index directory. */
struct index_check_report {
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
    size_t cursor_len;           /* bytes of the last cursor */
};

/* Reads every file of the index in dir without changing any and without the writer's lock, so
 * it may run beside a live writer (it checks the log as long as it was when the check began):
 * FORMAT; the log's header and every record (checksum, fields, entries that decode in order,
 * each run linked to its chain's previous run, apply numbers in sequence); DIR/table, the
 * checkpoint (checksums, size, slots sorted and in bounds, the cursor record it names), which
 * must equal the table the log's records build up to the point it covers, and the cursor it
 * holds the one the log's cursor records build (each delta record checked against the record
 * before it). A record that fails its checks is damage when an intact record follows it or
 * when DIR/table covers it; otherwise it is a torn tail a crash left (tail_bytes), which is
 * not. With cursor not NULL, *cursor gets a malloc'd copy of the last complete apply's cursor
 * (cursor_len bytes; NULL when empty), which the caller frees. Returns 0 with *out filled (a
 * missing dir: present false), -DS_EUSAGE (dir too long) or -ENOMEM; an unreadable file is
 * damage, named in the reason. */
DS_MUST_USE int index_check(const char *dir, uint8_t **cursor, struct index_check_report *out);

/* One entry, borrowed for the call; a non-zero return stops the visit. */
typedef int (*index_entry_fn)(const struct index_entry *entry, void *user);
/* Calls fn for every entry of the runs in the first `until` bytes of dir's log (until: the
 * committed_bytes of a index_check that found no damage), in log order, once per stored copy (an
 * entry applied again comes again). Returns 0, fn's non-zero value, -DS_ECORRUPT (a record
 * there no longer reads back intact: the log changed since the check), -ENOENT, -ENOMEM or
 * -EIO. */
DS_MUST_USE int index_check_entries(const char *dir, uint64_t until, index_entry_fn fn, void *user);

/* ---- the builder (builder.c) and views for other processes (reader_wait.c) ----------------- */
/*
 * The builder is a thread of the node that follows the durable base data of a data directory
 * (its own read-only storage handle) and keeps DATA/gsi up to date with a measured lag; a
 * reader is a read-only view of DATA/gsi for another process (`serve`, `orders --data`).
 */

/* Default bound of the GSI lag (--max-gsi-lag-ms): above half of it the node pauses. */
#define INDEX_BUILDER_MAX_LAG_MS_DEFAULT 1000u

/* One commit's lag once queryable, in nanoseconds (user: index_builder_config.lag_user). */
typedef void (*index_lag_observe_fn)(void *user, uint64_t lag_ns);
/* The current lag in milliseconds. */
typedef void (*index_lag_gauge_fn)(void *user, int64_t lag_ms);

struct index_builder_config {
    const char *data_dir;      /* the base data to follow (read-only); the index is DATA/gsi */
    uint32_t table_slots_log2; /* the index's slot table for a new index; 0: its default */
    uint32_t max_lag_ms;       /* the lag bound back-pressure keeps; 0 refused */
    uint32_t test_slow_ms;     /* test hook: sleep this long after each apply */
    bool checkpoint_inline;    /* benchmark: the index's checkpoints synced on the builder's
                                  thread (index_config) */
    /* The lag as the node's metrics show it (any of them may be NULL): lag_observe gets each
     * commit's lag once it is queryable (a histogram), lag_gauge the current lag on every
     * index_builder_should_pause. Called with the builder's lock held: they must be cheap and
     * must not call back into the builder. */
    index_lag_observe_fn lag_observe;
    index_lag_gauge_fn lag_gauge;
    void *lag_user; /* retained until index_builder_stop */
};

struct index_builder; /* the builder: a thread and the index's writer handle */

void index_builder_config_defaults(struct index_builder_config *cfg);
/* DATA/gsi into dst (DS_PATH_MAX bytes). */
void index_dir(const char *data_dir, char *dst);
/* Opens (creating) the index, resumes from its own cursor and starts following the base
 * data. Returns 0, -DS_EUSAGE, -DS_ELOCKED (another builder), -DS_ECORRUPT (damaged cursor:
 * `dayshard gsi rebuild`), a storage error, or -ENOMEM/-EIO. */
DS_MUST_USE int index_builder_start(const struct index_builder_config *cfg,
                                    struct index_builder **out);
/* Stops the thread and closes everything; NULL is fine. */
void index_builder_stop(struct index_builder *g);
/* The writer announces a durable commit (any thread; cheap): wakes the builder and starts the
 * commit's lag clock. */
void index_builder_notify(struct index_builder *g, uint64_t commit_seq, uint64_t events_durable);
/* Back-pressure for the node (any thread; cheap): true while the lag is above half the bound,
 * until it is back below a quarter, and once the builder failed. Also updates the lag gauge. */
bool index_builder_should_pause(struct index_builder *g);
/* One partition's position in the builder's cursor: the next block to index. */
struct index_cursor_position {
    int32_t day;
    uint32_t shard;
    struct storage_position pos;
};
/* Decodes a cursor the builder stored with its applies (index_cursor): the base commit it covers
 * and its positions, strictly in (day, shard) order, in a malloc'd array the caller frees (NULL
 * when there are none). An empty cursor is commit 0 and no positions. Returns 0, -DS_ECORRUPT
 * (bad magic, length or order) or -ENOMEM. */
DS_MUST_USE int index_cursor_decode(const uint8_t *cursor, size_t len, uint64_t *seq,
                                    struct index_cursor_position **positions, uint32_t *count);
/* 0 while the builder runs, else the error that stopped it (it logged the cause). */
int index_builder_error(struct index_builder *g);
/* The current lag: age of the oldest durable commit not yet queryable, and the events behind. */
void index_builder_lag(struct index_builder *g, uint64_t *lag_ms, uint64_t *lag_events);
/* Waits until every commit up to commit_seq is queryable. Returns 0, -ETIMEDOUT, or the
 * builder's error. */
DS_MUST_USE int index_builder_wait(struct index_builder *g, uint64_t commit_seq,
                                   uint32_t timeout_ms);
/* The builder's seals (any thread; cheap): installed and failed since start, whether one runs,
 * the longest time one held up applies (its finish: the last tail copy and the swap), and the
 * log's sealed part and the bytes appended since the last seal (index_log_bytes), as of the
 * builder's last round. */
struct index_builder_seals {
    uint64_t seals;
    uint64_t failures;
    bool sealing;
    uint64_t finish_ns_max;
    uint64_t sealed_bytes;
    uint64_t live_bytes;
};
void index_builder_seals(struct index_builder *g, struct index_builder_seals *out);
/* The builder's index handle, for queries on any thread. */
struct index *index_builder_store(struct index_builder *g);
/* A read-only view of DATA/gsi for another process (`dayshard serve`, `orders --data`): it
 * sees what the node's builder had applied when it was opened or last refreshed. */
struct index_reader;
/* Returns 0, -ENOENT (no index there: the node runs with --no-gsi, or never ran), or an
 * error. */
DS_MUST_USE int index_reader_open(const char *data_dir, struct index_reader **out);
/* Catches up with the builder; after `gsi rebuild` replaced the index, opens the new one (so
 * index_reader_store may return another handle). Not concurrently with queries on the
 * same reader. */
DS_MUST_USE int index_reader_refresh(struct index_reader *r);
/* The storage commit sequence every order up to which the view holds (0: none yet). */
DS_MUST_USE int index_reader_indexed_seq(struct index_reader *r, uint64_t *seq);
struct index *index_reader_store(struct index_reader *r);
/* Refreshes r until it holds every commit up to want_seq (0: one refresh, no wait) or
 * timeout_ms pass, 20 ms between refreshes. lock (may be NULL) is taken for writing around each
 * refresh, for a view that other threads query under it for reading. *indexed gets the
 * sequence reached. Returns 0, -ETIMEDOUT (still behind), or the refresh's error: never an
 * older view taken for a consistent one. */
DS_MUST_USE int index_reader_wait(struct index_reader *r, uint64_t want_seq, uint32_t timeout_ms,
                                  pthread_rwlock_t *lock, uint64_t *indexed);
/* Closes the view; NULL is fine. */
void index_reader_close(struct index_reader *r);

/* ---- rebuild (rebuild.c) and the check against the base data (verify.c) --------------------- */

/* Lines for the person running a maintenance command. ERROR explains why the call failed (the
 * caller reports it as its command's error); INFO is progress or a note, one line each. */
enum index_note_kind { INDEX_NOTE_ERROR, INDEX_NOTE_INFO };
/* text is borrowed for the call and has no trailing newline. */
typedef void (*index_note_fn)(enum index_note_kind kind, const char *text, void *user);

/* What a rebuild did. */
struct index_rebuilt {
    char gsi_dir[DS_PATH_MAX];
    uint64_t events;     /* base events indexed */
    uint64_t partitions; /* base partitions */
    uint64_t commit_seq; /* the base commit the new index covers */
    uint64_t index_bytes;
    double seconds;
};
/* Rebuilds DATA/gsi from the base data (`dayshard gsi rebuild`, `fsck --repair`): takes DATA's
 * writer lock (so it refuses beside a running node, and the caller must not hold the lock
 * itself), moves the old index to DATA/gsi.old-PID, runs the node's builder from empty up to
 * the last commit, then removes the old files. slots_log2 0 takes the default table size.
 * Progress goes to note as INFO lines. Returns 0 with *out filled, or a negative code after an
 * ERROR line that says why. */
DS_MUST_USE int index_rebuild(const char *data_dir, uint32_t slots_log2, index_note_fn note,
                              void *user, struct index_rebuilt *out);

struct index_verify_report {
    bool present;         /* DIR/gsi exists */
    bool damaged;         /* found damaged (before any repair) */
    bool rebuilt;         /* repair rebuilt it */
    uint64_t entries;     /* entries the index holds (after repair) */
    uint64_t covered_seq; /* the base commit its cursor covers */
    char reason[256];     /* what was wrong, "" when clean */
};
/* Verifies DIR/gsi (index_check) and then its entries against the base data; with repair,
 * rebuilds it (index_rebuild, its lines going to note) when damaged or when base_changed
 * (blocks were quarantined). Returns 0 clean (or repaired clean), 1 damage found and left, or
 * a negated errno. Writes human-readable findings to report (may be NULL). Without repair it
 * takes no lock (it runs beside a live node); the rebuild takes DATA's writer lock, so call it
 * after storage_fsck has released it. */
DS_MUST_USE int index_verify(const char *data_dir, bool repair, bool base_changed, FILE *report,
                             index_note_fn note, void *user, struct index_verify_report *out);

#endif /* DS_INDEX_INDEX_H */
