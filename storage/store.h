/*
 * Private to storage/: the bottom layer of the engine (store_base.c). It holds the engine's
 * state and what both sides need: paths, the partition table, the directory walker, manifest
 * replay, and the arena. The layers, each calling only downward through one narrow header:
 *
 *   storage.c, fsck.c   the public facade (storage.h): checks, (day, shard) lookup, lifecycle
 *   store_read.c        summaries, totals, scans, verification   (store_read.h)
 *   store_write.c       appends, group commit, rotation, recovery (store_write.h)
 *   store_base.c        this header
 *   io*.c, block.c, manifest.c   I/O backends and the on-disk codecs (format.h)
 *
 * The read and write sides never call each other (scripts/check-includes.sh rejects a call
 * circle between the files of a folder); what one side must see of the other's work goes
 * through the facade, as storage_commit extending summaries after store_write_commit.
 */
#ifndef DS_STORAGE_STORE_H
#define DS_STORAGE_STORE_H

#include <stdio.h>
#include <sys/types.h>

#include "storage/format.h"
#include "storage/limits.h"
#include "storage/types.h"

/* Totals of one partition by (status, hour), built from block headers. Row
 * STORAGE_SUMMARY_STATUS_MAX holds statuses past the named ones ("other"). */
struct ids; /* ids.h */

struct summary {
    uint64_t blocks;
    uint64_t bytes;
    uint64_t rows; /* stored rows: versions and retractions (count is their net) */
    uint64_t count;
    int64_t ts_min_ms, ts_max_ms;
    uint16_t status_count;
    bool overflow; /* some status is only in the "other" row */
    uint8_t status_len[STORAGE_SUMMARY_STATUS_MAX];
    char status[STORAGE_SUMMARY_STATUS_MAX][DS_STATUS_BYTES_MAX];
    /* hours[i]: status i's counts by hour, one row per named status (rows_capacity allocated):
     * a fixed row for each of the 32 possible statuses made a summary 26 KiB, and a reader
     * that counted a month at 256 shards held 7,168 of them (186 MiB); with the 4-6 statuses
     * of a typical stream it is 5-6 KiB. A status past the named ones adds to all only. */
    struct storage_hour_total (*hours)[24];
    uint16_t rows_capacity;
    struct storage_hour_total all[24]; /* every status: the unfiltered count reads only this */
    ds_i128 amount_units;
    uint64_t damaged_blocks; /* payload CRC failures and unreadable ranges passed */
    /* Position the summary covers up to: everything before (segment_id, end). */
    uint32_t segment_id;
    uint64_t end;
};

/* A reader's totals of one day over the summaries of its partitions (storage_day_totals), so
 * that an unfiltered count costs one lookup per day instead of one per shard. Invariant: the
 * sums are those of the summaries of the day's partitions with folded set, and every partition
 * whose summary is missing or behind its committed position is in stale (a superset: a
 * partition may be current and still listed). A manifest load lists the partitions it moves
 * (store_day_touch), dropping a summary takes it out first (store_day_unfold), and the read
 * side brings the day current on its next use, folding in only the listed partitions. Writers
 * keep none: their commits move partitions without a manifest load. */
struct day_totals {
    int32_t day;
    uint32_t shard_end;  /* 1 + the highest shard of the day with committed data, 0 while none */
    uint32_t part_count; /* partitions of the day in the table: the stale list's bound */
    struct part **stale;
    uint32_t stale_count;
    uint32_t stale_capacity;
    uint64_t count; /* net, as summary.count */
    uint64_t rows;
    uint64_t blocks;
    uint64_t bytes;
    uint64_t damaged_blocks;
    ds_i128 amount_units;
    struct storage_hour_total hours[24];
};

struct part {
    int32_t day;
    uint32_t shard;
    int64_t day_start_ms;
    uint32_t segment_id; /* current segment, 0 while none */
    /* The first live segment when a compaction rewrote the partition (MANIFEST_BASE), else 0:
     * the partition is segments store_part_first(p) .. segment_id. */
    uint32_t base_segment_id;
    /* writer, orders model: rows made dead since the last compaction look (2 per retraction) */
    uint64_t dead_rows_hint;
    /* writer, orders model: storage_compact_due looked at its blocks since it was last idle */
    bool merge_looked;
    uint64_t committed_end; /* committed bytes of the current segment */
    /* writer only: where the next block goes (may be ahead of the committed position) */
    int fd;                    /* segment write_segment_id, -1 while closed */
    uint32_t write_segment_id; /* segment being written, 0 while none */
    uint64_t write_end;        /* bytes written to it, committed or not */
    bool touched;              /* in storage.touched since the last commit */
    uint64_t touched_commit;   /* writer: storage.commits when it was last touched */
    bool holding;              /* in storage.holding (has or recently had an open block) */
    bool recovered;            /* recovery found the committed current segment */
    bool dir_sync;             /* writer: its directory got a segment the next commit syncs */
    struct open_block *ob;     /* events not yet sealed, or NULL */
    /* read side */
    struct summary *summary;       /* NULL until first needed */
    struct day_totals *day_totals; /* a reader's: its day's (never NULL there), NULL in a writer */
    bool folded;                   /* summary is in day_totals' sums */
    bool stale;                    /* listed in day_totals->stale */
    /* Ranges fsck --repair took out, sorted by (segment_id, offset), not overlapping: every
     * reader passes over them (manifest format 2). */
    struct manifest_skip *skips;
    uint32_t skip_count;
    uint32_t skip_capacity;
};

/* Empties s, keeping its rows' memory. */
void store_summary_clear(struct summary *s);
/* Frees s and its rows. Accepts NULL. */
void store_summary_free(struct summary *s);

/* The first segment of p (1 unless a compaction rewrote it). */
static inline uint32_t store_part_first(const struct part *p)
{
    return p->base_segment_id > 0 ? p->base_segment_id : 1;
}

/* Whether p's summary is missing or ends before p's committed position (extending it would
 * read something). */
static inline bool store_summary_behind(const struct part *p)
{
    const struct summary *s = p->summary;
    if (s == NULL || s->segment_id < store_part_first(p) || s->segment_id < p->segment_id) {
        return true;
    }
    return s->segment_id == p->segment_id && s->end < p->committed_end;
}

/* A damaged range fsck found, for --repair: a committed block or range to quarantine and
 * skip, a segment header to rewrite, or a past-the-end range holding CRC-valid blocks to copy
 * before recovery cuts it. */
struct damage {
    int32_t day;
    uint32_t shard;
    uint32_t segment_id;
    uint64_t offset;
    uint64_t length;
    bool events_known; /* the block header (or, past the end, every block header) was readable */
    uint64_t events;
    uint64_t blocks;          /* blocks with a readable header in the range */
    uint64_t block_length;    /* with one readable header: the block's length as it says */
    int32_t source_partition; /* BLOCK_SOURCE_NONE when unknown, BLOCK_SOURCE_MIXED */
    int64_t source_offset_min, source_offset_max;
    const char *reason;  /* static text */
    bool past_end;       /* not committed: copied, then cut by recovery; no skip entry */
    bool segment_header; /* the 64-byte segment header: copied, then rewritten */
};
struct damage_list {
    struct damage *v;
    uint32_t count;
    uint32_t capacity;
    bool overflow; /* more than STORAGE_QUARANTINE_MAX entries: the rest are not listed */
};

#define STORE_SPARE_BLOCKS 8u
/* Segments a compaction replaced stay this long before removal: a reader that refreshed just
 * before the rewrite's commit may still be reading them. */
#define STORE_RETIRE_DELAY_NS (30ull * 1000000000ull)

/* Segment ids left between a partition and its rewrite's first segment: the partition may roll
 * this many times less one while a compaction runs (at the default 64 MiB segments, about
 * 1 GiB appended to one partition during one rewrite) before the rewrite gives way. */
#define STORE_REWRITE_GAP 16u
/* Replaced segments waiting for removal: segments [from, to) of partition (day, shard). */
struct retired_segments {
    int32_t day;
    uint32_t shard;
    uint32_t from, to;
    uint64_t due_ns;
};
/* Days a retention drop took out, waiting for their files' removal (DIR/parts/<day>/). */
struct dropped_day {
    int32_t day;
    uint64_t due_ns;
};
/* Days whose directory got a new partition directory since the last commit, listed for that
 * commit's flush to sync each once. A commit creating partitions in more days than this syncs
 * the other days' directories at once, as every new partition used to: a backlog spans ~30. */
#define STORE_SYNC_DAYS_MAX 64u
/* A writer closes the segment descriptor of a partition untouched for this many commits
 * (reopened by its next block): open descriptors follow the partitions being written, not every
 * partition written since start (a shell's 1,024 lasted about two weeks at 64 shards a day).
 * Checked every STORE_IDLE_COMMITS commits, so a descriptor stays at most twice that. */
#define STORE_IDLE_COMMITS 64u
/* Directory descriptors a commit holds open while their syncs are queued; past it the queue is
 * flushed and they are closed before more are opened. */
#define STORE_DIR_FDS_MAX 64u

/* The arena holds sealed blocks waiting for the next I/O flush, and a commit's manifest record.
 * Allocated by store_create for a writer, bounded by store_write.c: one constant for both. */
#define STORE_ARENA_BYTES (24u * 1024u * 1024u)

/* Not a source of events either: the committed length of the orders-by-id log (DIR/ids/log),
 * kept in the source table so that it commits with the data (orders model). */
#define STORE_SOURCE_IDS (-3)
/* Nor this: the retention floor (a day number; days below it were dropped), in the source
 * table so that every snapshot carries it and readers load it with the rest (format 4). */
#define STORE_SOURCE_FLOOR (-4)
/* Slots STORE_SOURCE_FLOOR (-4), STORE_SOURCE_IDS (-3), DS_SOURCE_DEADLETTER (-2), then the
 * sources DS_SOURCE_FILE (-1) .. STORAGE_SOURCES_MAX - 3: MANIFEST_SOURCES_MAX of them. */
#define STORE_SOURCE_FIRST STORE_SOURCE_FLOOR
static inline bool store_source_valid(int32_t partition)
{
    return partition >= STORE_SOURCE_FIRST && partition < (int32_t)STORAGE_SOURCES_MAX - 2;
}
static inline uint32_t store_source_index(int32_t partition)
{
    return (uint32_t)(partition - STORE_SOURCE_FIRST);
}

/* The reserved slots that hold a file's committed length instead of a source's offset (the
 * dead-letter file, the orders store's log): the length to commit with the next record, and
 * the length the last one committed (0 when none). */
struct storage;
void store_length_set(struct storage *st, int32_t slot, uint64_t bytes);
uint64_t store_length_committed(const struct storage *st, int32_t slot);

struct source_state {
    bool known;
    bool dirty;
    int64_t next;           /* one past the highest appended offset */
    int64_t committed_next; /* one past the highest committed offset */
};

struct storage {
    struct storage_config cfg;
    char dir[DS_PATH_MAX];
    bool read_only;
    int failed; /* first I/O error of a commit: the writer must be reopened */
    int lock_fd;
    struct storage_io *io;
    struct storage_io *owned_io;
    struct block_codec codec;

    struct part **table; /* open addressing by (day, shard) */
    size_t table_capacity;
    struct part **parts; /* insertion order */
    uint32_t part_count;
    int32_t forgotten_below; /* store_parts_forget_below's last floor: no partition below it */
    /* A reader's per-day totals, open addressing by day (grown at half full); NULL in a writer. */
    struct day_totals **days;
    size_t day_capacity;
    uint32_t day_count;
    struct part **touched; /* partitions written since the last commit */
    uint32_t touched_count;
    /* partitions that got an open block since they were last checked: a commit releases the
     * blocks of those it did not touch, without scanning every partition */
    struct part **holding;
    uint32_t holding_count;
    struct source_state *sources; /* index: store_source_index */
    /* The orders model (orders.c): the orders-by-id store (a writer opens it with the storage,
     * a reader on its first lookup), a lookup buffer, and what the writer did with events. */
    struct ids *ids;
    uint8_t *order_scratch;
    struct storage *compact_reader; /* a reader of the same directory: compaction scans with it */
    struct compaction *compaction;  /* a writer's compaction in progress (orders.c), or NULL */
    struct part *rewrite;           /* its rewrite's segments (store_write.h), or NULL */
    uint32_t rewrite_base;          /* the rewrite's first segment id */
    struct retired_segments *retired;
    uint32_t retired_count;
    /* Retention (storage_config.retention_days): the committed floor is the FLOOR slot; the
     * writer's stream day is the greatest day it appended (pending included), -1 before any. */
    int32_t stream_day;
    struct dropped_day *dropped;
    uint32_t dropped_count;
    struct storage_order_stats order_stats;

    uint64_t seq;
    uint64_t commits; /* writer: commits done since open (the idle clock of segment fds) */
    int manifest_fd;
    uint64_t manifest_size;
    uint64_t manifest_torn_bytes; /* past the last valid record, at the last load */
    ino_t manifest_ino;
    /* A reader's open descriptor of the MANIFEST it loaded last (-1: none). While it is open no
     * other file can take that inode number, so storage_refresh's (inode, size) comparison is
     * exact: without it a MANIFEST replaced by one that reused the freed inode number and had
     * the same size would look unchanged, and a compaction could then rewrite a partition from
     * a stale view and drop the rows committed since (docs/ARCHITECTURE.md, "The manifest").
     */
    int manifest_pin_fd;
    uint32_t skip_total; /* skip entries over all partitions (<= STORAGE_QUARANTINE_MAX) */
    /* Repair loads the valid prefix of a manifest damaged before its tail (manifest_prefix set
     * before store_manifest_load); manifest_damaged then says valid records were left behind. */
    bool manifest_prefix;
    bool manifest_damaged;

    /* Released open blocks kept for reuse, so a new partition (a new day) does not page-fault
     * fresh buffers in; their memory stays counted in open_bytes. */
    struct open_block *spare[STORE_SPARE_BLOCKS];
    uint32_t spare_count;

    /* Writer: directories the next commit's flush syncs, beside its segments (store_write.c):
     * DIR itself once parts/ was made or found, parts/ once a day directory was, the days
     * listed once a partition directory was, and each touched partition with dir_sync. */
    bool parts_made; /* parts/ was made or found since open: no mkdir of it again */
    bool root_sync;
    bool parts_sync;
    uint32_t sync_day_count;
    int32_t sync_days[STORE_SYNC_DAYS_MAX];
    uint32_t dir_fd_count; /* open directory fds whose syncs are queued */
    int dir_fds[STORE_DIR_FDS_MAX];

    uint8_t *arena; /* sealed blocks waiting for the next I/O flush */
    size_t arena_used;
    uint64_t pending_events;
    uint64_t open_bytes;
};

/* The committed retention floor: days below it were dropped (0 when none). */
static inline int32_t store_floor(const struct storage *st)
{
    uint64_t floor = store_length_committed(st, STORE_SOURCE_FLOOR);
    return floor <= DS_DAY_MAX ? (int32_t)floor : DS_DAY_MAX;
}

/* storage_retention_floor: a writer's floor counts the stream day of its pending appends. */
static inline int32_t store_retention_floor(const struct storage *st)
{
    int32_t floor = store_floor(st);
    if (!st->read_only && st->cfg.retention_days > 0 && st->stream_day >= 0) {
        int32_t window_floor = st->stream_day - (int32_t)st->cfg.retention_days + 1;
        floor = window_floor > floor ? window_floor : floor;
    }
    return floor;
}

/* Allocates the state for cfg (already checked): table, lists, codec, and for a writer the
 * arena. No file is touched. Returns 0 or -ENOMEM. */
DS_MUST_USE int store_create(const struct storage_config *cfg, struct storage **out);
/* Closes every fd the state holds (through st->io), destroys an owned backend, frees all.
 * Accepts NULL. */
void store_destroy(struct storage *st);

/* DIR/name for a short fixed name (MANIFEST, LOCK, parts). */
void store_path(const struct storage *st, const char *name, char *dst);
void store_part_dir(const struct storage *st, int32_t day, uint32_t shard, char *dst);
void store_segment_path(const struct storage *st, const struct part *p, uint32_t segment_id,
                        char *dst);

/* Directory-entry names written by the engine, parsed strictly: "%08u.seg" with id >= 1, and a
 * shard number in plain decimal (no sign, no leading zero) below 65536. */
bool store_parse_segment_name(const char *name, uint32_t *id);
bool store_parse_shard_name(const char *name, uint32_t *shard);

/* Walks parts/<day>/<shard>/ over the names the engine writes (other entries are left alone):
 * segment() for each segment file, then part_done() (may be NULL) once per partition directory.
 * Stops at the first nonzero return and returns it; a directory that cannot be read returns its
 * -errno; a missing parts/ is an empty tree. Shared by recovery and fsck so that both see the
 * same files. */
struct store_walk {
    int (*segment)(struct storage *st, const char *dir, const char *name, int32_t day,
                   uint32_t shard, uint32_t segment_id, void *user);
    int (*part_done)(struct storage *st, const char *dir, int32_t day, uint32_t shard, void *user);
    void *user;
};
DS_MUST_USE int store_walk_tree(struct storage *st, const struct store_walk *walk);

/* The partition table: find returns NULL for a partition never seen; get adds it (-DS_ELIMIT
 * past partitions_max or for a day out of range, -ENOMEM). */
struct part *store_part_find(const struct storage *st, int32_t day, uint32_t shard);
DS_MUST_USE int store_part_get(struct storage *st, int32_t day, uint32_t shard, struct part **out);
/* Frees the partitions of days below floor (days retention dropped) and, in a reader, those
 * days' totals, so that dropped days hold no memory, table entry or descriptor. Nothing of
 * them may be pending, touched or in use by a caller (a writer calls it after a commit's
 * summaries were extended, a reader after loading a MANIFEST). Cheap when the floor did not
 * move since the last call. */
void store_parts_forget_below(struct storage *st, int32_t floor);

/* A reader's totals of day, NULL when no partition of it was ever seen (or for a writer). */
struct day_totals *store_day_find(const struct storage *st, int32_t day);
/* p's position moved (a manifest record named it): lists it as stale in its day's totals when
 * its summary does not cover that position, and notes its shard when it has committed data. */
void store_day_touch(struct part *p);
/* Adds p's summary (current, not folded) to its day's totals, or takes it out (folded) before
 * the summary changes or goes. No-ops for a writer's partitions. */
void store_day_fold(struct part *p);
void store_day_unfold(struct part *p);

/* Takes the writer's exclusive lock on DIR/LOCK into st->lock_fd: 0, -DS_ELOCKED when another
 * process holds it, or a negated errno. Logged. */
DS_MUST_USE int store_lock(struct storage *st);

/* The first skip entry of p in segment_id at or after offset, or NULL: a walk arriving at its
 * offset jumps over it, and a walk looking for the next block header stops before it. */
const struct manifest_skip *store_skip_from(const struct part *p, uint32_t segment_id,
                                            uint64_t offset);
/* Adds a skip entry to its partition (created if new), keeping the order; an entry already
 * there is a no-op. A new entry drops the partition's summary (rebuilt without the range).
 * Returns 0, -DS_ELIMIT past STORAGE_QUARANTINE_MAX or partitions_max, -DS_ECORRUPT for an
 * entry overlapping another, -ENOMEM. */
DS_MUST_USE int store_skip_add(struct storage *st, const struct manifest_skip *skip);
/* Makes base_segment_id (above the current first) p's first segment: the segments below are
 * replaced by a compaction's rewrite; their skip entries and p's summary go with them. */
void store_part_rebase(struct storage *st, struct part *p, uint32_t base_segment_id);

/* Replays the MANIFEST into the table and sources. *valid_end is the end of its last valid
 * record, *file_size its length (both 0 when there is no MANIFEST). */
DS_MUST_USE int store_manifest_load(struct storage *st, uint64_t *valid_end, uint64_t *file_size);

#endif /* DS_STORAGE_STORE_H */
