/*
 * Private to storage/: the on-disk format of segments, blocks and the manifest, and the codecs
 * that read and write them. Everything on disk is little-endian with fixed-width fields; the
 * structs below are written as they are (static_asserts pin sizes and offsets), so this code
 * only builds for little-endian hosts.
 *
 * Segment file  = segment_header, then blocks back to back.
 * Block         = block_header (72 bytes), status table, cells, zstd payload.
 *   status table: status_count entries of (u8 length, bytes), zero-padded to a multiple of 8.
 *   cells:        cell_count block_cell entries sorted by (status_index, hour), one per
 *                 non-empty (status, hour) pair: the aggregates a count reads.
 *   payload:      zstd frame of the columnar raw payload (see block.c).
 * Manifest file = manifest_file_header, then records (see manifest.c).
 */
#ifndef DS_STORAGE_FORMAT_H
#define DS_STORAGE_FORMAT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "storage/limits.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "on-disk structs are little-endian");

#define SEGMENT_MAGIC 0x544E454D47455344ull /* "DSEGMENT" */
#define SEGMENT_VERSION 1u
#define BLOCK_MAGIC 0x4B425344u /* "DSBK" */
/* Version 1: no event of the block has a `version` or `items`. Version 2 adds a versions and an
 * items column (see block.c); a block is written as version 2 only when some event needs it, so
 * streams without them keep writing blocks that older binaries read. Both are read. */
#define BLOCK_VERSION 1u
#define BLOCK_VERSION_EXTRAS 2u
/* Version 3 = version 2 plus retraction rows (struct ds_event.retract, the orders model): bit 7 of
 * a row's flags byte marks one, and a cell's count is signed (inserts minus retractions), its
 * amount the inserts' amounts minus the retractions'. Written only for a block holding a
 * retraction, so older binaries refuse it ("not a block they know") instead of adding its
 * retractions as orders; they still write and read versions 1 and 2 exactly as before. */
#define BLOCK_VERSION_RETRACT 3u
/* Version 4 = version 3 plus each row's source (events model): two more columns, the source
 * partition and offset of every row (block.c), so that a node can take back the rows of a Kafka
 * partition's offset range it should not have kept (storage_release_range). Written only in the
 * events model and only for a block holding a row with a Kafka source (partition >= 0); older
 * binaries refuse it ("not a block they know"), as they refuse version 3. */
#define BLOCK_VERSION_SOURCES 4u
#define MANIFEST_MAGIC 0x464D5344u                /* "DSMF" (a record) */
#define MANIFEST_FILE_MAGIC 0x3146494E414D5344ull /* "DSMANIF1" */
/* Format 2 = format 1 plus MANIFEST_QUARANTINE records. A writer starts a file with it only when
 * the store has quarantined ranges, so a store never repaired stays readable by format-1
 * binaries; those refuse a format-2 file as "another format version" (-DS_EFORMAT) instead of
 * reading quarantined bytes as blocks or cutting the record as a torn tail. */
#define MANIFEST_FILE_MAGIC_V2 0x3246494E414D5344ull /* "DSMANIF2" */
/* Format 3 = format 2 plus MANIFEST_BASE records (compaction of the orders model): a partition
 * whose segments below some id were replaced by a rewrite. Written only by a store holding such a
 * partition; older binaries refuse it as another format version instead of reading segment 1. */
#define MANIFEST_FILE_MAGIC_V3 0x3346494E414D5344ull /* "DSMANIF3" */
/* Format 4 = format 3 plus the retention floor (source slot -4, STORE_SOURCE_FLOOR): days below
 * it were dropped. Written only by a store that dropped a day (it starts with a snapshot that
 * lacks their partitions); older binaries refuse it as another format version instead of
 * failing on an unknown source slot. */
#define MANIFEST_FILE_MAGIC_V4 0x3446494E414D5344ull /* "DSMANIF4" */

struct segment_header {
    uint64_t magic;
    uint32_t version;
    int32_t day;
    uint32_t shard;
    uint32_t segment_id;
    uint8_t reserved[36];
    uint32_t header_crc; /* CRC32C of the first 60 bytes */
};
static_assert(sizeof(struct segment_header) == 64, "segment header is 64 bytes");

struct block_header {
    uint32_t magic;
    uint16_t version;
    uint16_t header_bytes; /* fixed part + status table + cells */
    uint32_t payload_bytes;
    uint32_t raw_bytes;
    uint32_t event_count;
    uint16_t status_count;
    uint16_t cell_count;
    int64_t ts_min_ms;
    int64_t ts_max_ms;
    /* BLOCK_SOURCE_MIXED when events came from several, BLOCK_SOURCE_NONE when none has a
     * source; the offsets are the least and greatest of all the rows' sources (of every
     * partition when mixed). */
    int32_t source_partition;
    uint32_t payload_crc;
    int64_t source_offset_min;
    int64_t source_offset_max;
    uint32_t reserved;
    uint32_t header_crc; /* CRC32C of all header_bytes with this field zero */
};
static_assert(sizeof(struct block_header) == 72, "block header is 72 bytes");
static_assert(offsetof(struct block_header, header_crc) == 68, "crc is the last field");
#define BLOCK_SOURCE_NONE (-3)
#define BLOCK_SOURCE_MIXED (-2)

struct block_cell {
    uint8_t status_index;
    uint8_t hour;
    uint16_t reserved;
    /* Inserts minus retractions: >= 1 in blocks of version 1 and 2 (where it was a u32 of the
     * same bits), any value in versions 3 and 4, where a cell exists for every (status, hour)
     * that has rows (0 when they cancel). */
    int32_t count;
    uint64_t amount_lo; /* the 128-bit amount sum, low and high halves */
    int64_t amount_hi;
};
static_assert(sizeof(struct block_cell) == 24, "cell is 24 bytes");

#define BLOCK_CELLS_MAX (STORAGE_BLOCK_STATUS_MAX * 24u)
#define BLOCK_STATUS_TABLE_BYTES_MAX (STORAGE_BLOCK_STATUS_MAX * (1u + DS_STATUS_BYTES_MAX) + 8u)
#define BLOCK_HEADER_BYTES_MAX                                                                     \
    (sizeof(struct block_header) + BLOCK_STATUS_TABLE_BYTES_MAX +                                  \
     BLOCK_CELLS_MAX * sizeof(struct block_cell))
static_assert(BLOCK_HEADER_BYTES_MAX <= UINT16_MAX, "header_bytes fits in u16");
/* Worst-case raw bytes of one event in the columnar payload, without its canonical items:
 * flags, four 10-byte varints (ts, order, customer, amount), two length-prefixed strings, the
 * version varint (10), the items length varint (2: DS_ITEMS_BYTES_MAX < 2^14) and the source
 * partition (5) and offset (10) varints. */
#define BLOCK_EVENT_FIXED_RAW_BYTES_MAX                                                            \
    (1u + 10u + 10u + 10u + 10u + 2u * (1u + DS_ID_BYTES_MAX) + 10u + 2u + 5u + 10u)
static_assert(DS_ITEMS_BYTES_MAX < (1u << 14), "an items length is a 2-byte varint");
/* ... and with the largest canonical items (7001 bytes: 100 items of 64-byte products). */
#define BLOCK_EVENT_RAW_BYTES_MAX (BLOCK_EVENT_FIXED_RAW_BYTES_MAX + DS_ITEMS_BYTES_MAX)
/* Bytes of string ids one open block may hold before it is sealed early. */
#define BLOCK_STRING_BYTES_MAX (1024u * 1024u)
/* Bytes of canonical items one open block may hold before it is sealed early: at least 149
 * events with the largest items, some 20000 with a typical two or three; it keeps a block of
 * item-heavy events as small as one of string ids. */
#define BLOCK_ITEMS_BYTES_MAX (1024u * 1024u)
static_assert(BLOCK_ITEMS_BYTES_MAX >= DS_ITEMS_BYTES_MAX, "any one event's items fit a block");
/* Preamble (scale and ten column lengths), the fixed columns of every event, every string
 * and every item byte a block may hold. */
#define BLOCK_RAW_BYTES_MAX                                                                        \
    (48u + STORAGE_BLOCK_EVENTS_MAX * (1u + 10u + 10u + 10u + 10u + 10u + 2u + 5u + 10u) +         \
     2u * BLOCK_STRING_BYTES_MAX + BLOCK_ITEMS_BYTES_MAX)

static inline ds_i128 block_cell_amount(const struct block_cell *cell)
{
    __extension__ unsigned __int128 bits =
        ((unsigned __int128)(uint64_t)cell->amount_hi << 64) | cell->amount_lo;
    return (ds_i128)bits;
}

static inline void block_cell_set_amount(struct block_cell *cell, ds_i128 amount)
{
    __extension__ unsigned __int128 bits = (unsigned __int128)amount;
    cell->amount_lo = (uint64_t)bits;
    cell->amount_hi = (int64_t)(uint64_t)(bits >> 64);
}

/* ---- the open block: events of one partition not yet sealed -------------------------------- */

struct open_row {
    int64_t ts_ms;
    int64_t source_offset;    /* the row's source (version 4 blocks only) */
    int32_t source_partition; /* BLOCK_SOURCE_NONE: the row has none */
    int64_t order;            /* the integer id, or the offset of the string in strings */
    int64_t customer;         /* likewise */
    int64_t amount_units;
    uint64_t version_code; /* 0: no version; else the version + 1 (as stored) */
    uint32_t items_offset; /* where the canonical items start in the block's items */
    uint16_t items_bytes;  /* 0: no items field */
    uint8_t flags;         /* OPEN_ROW_* | status index << 2 */
};
#define OPEN_ROW_ORDER_STRING 1u
#define OPEN_ROW_CUSTOMER_STRING 2u
#define OPEN_ROW_STATUS_SHIFT 2u
#define OPEN_ROW_STATUS_MASK 0x1Fu /* bits 2..6: STORAGE_BLOCK_STATUS_MAX statuses */
#define OPEN_ROW_RETRACT 0x80u     /* a retraction row (version 3 blocks only) */
static_assert(STORAGE_BLOCK_STATUS_MAX <= OPEN_ROW_STATUS_MASK + 1u, "status index fits 5 bits");

struct open_block {
    uint32_t count;
    uint32_t capacity; /* rows allocated */
    struct open_row *rows;
    uint32_t strings_bytes;
    uint32_t strings_capacity;
    uint8_t *strings;
    uint32_t items_bytes; /* canonical items of every row, back to back */
    uint32_t items_capacity;
    uint8_t *items;
    uint32_t extras_count;  /* rows with a version or items: the block is then version 2 */
    uint32_t retract_count; /* retraction rows: the block is then version 3 */
    uint32_t sourced_count; /* rows keeping a Kafka source: the block is then version 4 */
    uint16_t status_count;
    uint8_t status_len[STORAGE_BLOCK_STATUS_MAX];
    char status[STORAGE_BLOCK_STATUS_MAX][DS_STATUS_BYTES_MAX];
    int64_t ts_min_ms, ts_max_ms;
    int32_t source_partition;
    int64_t source_offset_min, source_offset_max;
};

/* Adds an event (its version and a copy of its items included); source (may be NULL) widens the
 * header's source range, and with row_source (the events model) is kept as the row's own, which
 * makes the block version 4 when its partition is a Kafka one. Returns 0, or -DS_ELIMIT when
 * the block cannot take it (full rows, status table, strings or items) and must be sealed
 * first, or -ENOMEM. */
DS_MUST_USE int open_block_add(struct open_block *ob, const struct ds_event *event,
                               const struct ds_source *source, bool row_source,
                               uint32_t events_max);
/* Bytes of memory the block holds. */
size_t open_block_memory(const struct open_block *ob);
void open_block_reset(struct open_block *ob);
void open_block_free(struct open_block *ob);

/* Scratch space for sealing and reading blocks, owned by one thread. */
struct block_codec {
    void *zstd_cctx;
    void *zstd_dctx;
    int zstd_level;
    uint8_t *raw; /* BLOCK_RAW_BYTES_MAX */
    size_t raw_capacity;
    void *grid; /* per-(status, hour) aggregation scratch */
};
DS_MUST_USE int block_codec_init(struct block_codec *codec, int zstd_level);
void block_codec_deinit(struct block_codec *codec);

/* Seals ob into dst: a complete block (header, table, cells, payload) ready to be written.
 * day_start_ms is the partition's day start (for hours). Returns the block's length, or
 * -ENOSPC if dst_capacity is too small, -DS_EZSTD. */
DS_MUST_USE int64_t block_seal(struct block_codec *codec, const struct open_block *ob,
                               int64_t day_start_ms, uint8_t *dst, size_t dst_capacity);
/* An upper bound of block_seal's output for ob. */
size_t block_seal_bound(const struct open_block *ob);

/* Checks a block header read from disk: the fixed part of buf (at least 72 bytes) and, when
 * full_len >= header_bytes, the whole header with its CRC. Returns 0 or -DS_ECORRUPT. */
DS_MUST_USE int block_header_check(const uint8_t *buf, size_t len);
/* Status name of a header's status table entry; header must have passed block_header_check. */
struct block_view {
    const struct block_header *header;
    uint8_t status_len[STORAGE_BLOCK_STATUS_MAX];
    const char *status[STORAGE_BLOCK_STATUS_MAX];
    const struct block_cell *cells;
};
DS_MUST_USE int block_view_parse(const uint8_t *buf, size_t len, struct block_view *view);

/* Decodes a block's payload (the bytes after header_bytes, payload_bytes long), verifying the
 * payload CRC and that the events re-aggregate to the header's cells (a retraction counting -1
 * and its negated amount) and that each row's source lies in the header's source range;
 * calls fn per event, retraction rows with event->retract set, with the row's source (NULL in
 * blocks before version 4 and for a row of one stored without a source). An event's items
 * point into codec's scratch, valid during the call of fn only.
 * Returns 0, fn's non-zero value, -DS_ECORRUPT or -DS_EZSTD. */
typedef int (*block_event_fn)(const struct ds_event *event, const struct ds_source *source,
                              void *user);
int block_decode(struct block_codec *codec, const struct block_view *view, const uint8_t *payload,
                 int64_t day_start_ms, block_event_fn fn, void *user);

/* ---- manifest ------------------------------------------------------------------------------ */

struct manifest_part {
    int32_t day;
    uint32_t shard;
    uint32_t segment_id;
    uint32_t reserved;
    uint64_t end; /* committed bytes of that segment */
};
static_assert(sizeof(struct manifest_part) == 24, "manifest part entry is 24 bytes");

struct manifest_source {
    int32_t partition;
    uint32_t reserved;
    int64_t next_offset;
};
static_assert(sizeof(struct manifest_source) == 16, "manifest source entry is 16 bytes");

/* A committed range that fsck --repair took out of the store (its bytes and a JSON record are
 * in DIR/quarantine/): readers pass over [offset, offset + length) of the segment as if it were
 * not there. Ranges start where a reader walking the segment arrives (a block start). */
struct manifest_skip {
    int32_t day;
    uint32_t shard;
    uint32_t segment_id;
    uint32_t flags; /* MANIFEST_SKIP_EVENTS_KNOWN */
    uint64_t offset;
    uint64_t length;
    uint64_t events; /* events of the range, when known (the block header was readable) */
};
static_assert(sizeof(struct manifest_skip) == 40, "manifest skip entry is 40 bytes");
#define MANIFEST_SKIP_EVENTS_KNOWN 1u

struct manifest_record_header {
    uint32_t magic;
    uint32_t body_bytes;
    uint32_t body_crc;
    uint32_t kind; /* MANIFEST_DELTA, MANIFEST_SNAPSHOT, MANIFEST_QUARANTINE or MANIFEST_BASE */
    uint64_t seq;
    uint32_t part_count; /* for MANIFEST_QUARANTINE: manifest_skip entries */
    uint32_t source_count;
};
static_assert(sizeof(struct manifest_record_header) == 32, "manifest record header");
#define MANIFEST_DELTA 1u
#define MANIFEST_SNAPSHOT 2u
/* Adds skip entries (format 2 only); written by repair and after every snapshot of a store
 * that has any, so a rotated file carries the whole list. */
#define MANIFEST_QUARANTINE 3u
/* Sets the first segment of partitions (format 3 only): manifest_part entries whose segment_id
 * is the partition's first live segment (end unused, 0). The segments below it were replaced by
 * a compaction's rewrite and are deleted; readers start at it. Written after the snapshot of a
 * rotation and as the one record of a compaction's commit. */
#define MANIFEST_BASE 4u
/* The manifest is rewritten as one snapshot when it grows past this. */
#define MANIFEST_BYTES_ROTATE (4u * 1024u * 1024u)
/* Source entries one record may hold: the Kafka and file sources (STORAGE_SOURCES_MAX - 1 of
 * them, -1 .. STORAGE_SOURCES_MAX - 3), the dead-letter length, the ids log length and the
 * retention floor. */
#define MANIFEST_SOURCES_MAX (STORAGE_SOURCES_MAX + 2u)
/* Largest manifest file accepted at open: a rotation's snapshot plus a full log. */
#define MANIFEST_BYTES_MAX                                                                         \
    (MANIFEST_BYTES_ROTATE + 96u + (uint64_t)STORAGE_PARTITIONS_MAX * 48u +                        \
     MANIFEST_SOURCES_MAX * 16u + (uint64_t)STORAGE_QUARANTINE_MAX * sizeof(struct manifest_skip))

/* Called for each valid record while replaying; entries point into the replay buffer. */
struct manifest_replay_fn_args {
    uint32_t kind;
    uint64_t seq;
    const struct manifest_part *parts;
    uint32_t part_count;
    const struct manifest_source *sources;
    uint32_t source_count;
    const struct manifest_skip *skips; /* MANIFEST_QUARANTINE records */
    uint32_t skip_count;
};
typedef int (*manifest_record_fn)(const struct manifest_replay_fn_args *record, void *user);
/* Replays buf (a whole manifest file). *valid_end_out gets the end of the last valid record.
 * A damaged record followed only by bytes that hold no valid record is a torn tail (fine); one
 * followed by a valid record means acknowledged commits are damaged: -DS_ECORRUPT. */
DS_MUST_USE int manifest_replay(const uint8_t *buf, size_t len, manifest_record_fn fn, void *user,
                                uint64_t *valid_end_out);
/* For repair: replays the valid prefix of buf, stopping at the first damaged record (or
 * sequence going backwards) even when valid records follow, and sets *damaged_out when some
 * did. A damaged file magic is read past (its records may be intact); another format version
 * is still -DS_EFORMAT. */
DS_MUST_USE int manifest_replay_prefix(const uint8_t *buf, size_t len, manifest_record_fn fn,
                                       void *user, uint64_t *valid_end_out, bool *damaged_out);
/* Encodes a record into dst; returns its length or -ENOSPC. */
DS_MUST_USE int64_t manifest_encode(uint32_t kind, uint64_t seq, const struct manifest_part *parts,
                                    uint32_t part_count, const struct manifest_source *sources,
                                    uint32_t source_count, uint8_t *dst, size_t dst_capacity);
size_t manifest_record_bound(uint32_t part_count, uint32_t source_count);
/* Encodes a MANIFEST_QUARANTINE record of skip_count entries; returns its length or -ENOSPC. */
DS_MUST_USE int64_t manifest_encode_skips(uint64_t seq, const struct manifest_skip *skips,
                                          uint32_t skip_count, uint8_t *dst, size_t dst_capacity);

#endif /* DS_STORAGE_FORMAT_H */
