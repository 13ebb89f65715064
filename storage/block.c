/*
 * Blocks: the open (in-memory) block of a partition, sealing it into the on-disk format, and
 * reading it back.
 *
 * The raw payload is columnar so that zstd sees like next to like:
 *   u8 amount_scale (amounts are stored divided by 10^amount_scale, the largest power of ten
 *      dividing every amount of the block: whole-cent prices lose two zero digits),
 *   u32 column byte lengths of flags, ts, order ints, order strings, customer ints, customer
 *      strings; the amount column runs to the end.
 *   flags:      one byte per event: order id is a string (bit 0), customer id is a string
 *               (bit 1), status index (bits 2..6), a retraction row (bit 7, version 3 only);
 *   ts:         zigzag varint of the difference to the previous event (the first to ts_min);
 *   order ints: zigzag varint of the difference to the previous integer order id;
 *   strings:    u8 length + bytes, in event order;
 *   customers:  varint of the id (ids are Zipf-like: small ones are common);
 *   amounts:    zigzag varint.
 * Version 2 blocks (BLOCK_VERSION_EXTRAS: some event has a `version` or `items`) have eight
 * column lengths, the six above then:
 *   versions:   varint per event: 0 when it has none, else the version + 1;
 *   items:      per event, varint of its canonical items' length (0: no items field) and the
 *               bytes (the encoding of struct ds_event.items, checked again when read);
 * and the amounts after them. A version 1 block is exactly what the encoder wrote before
 * version 2 existed, so a stream without versions and items costs nothing and stays readable
 * by older binaries. Rejected: a flag bit per event for "has version/items" (the flags byte's
 * free bit 7 would make a v1 reader mistake the status index) and a row-wise side table.
 * Version 3 blocks (BLOCK_VERSION_RETRACT: some row is a retraction) are version 2 blocks whose
 * flags may have bit 7 set and whose cells are signed (format.h); only such a block is written
 * as version 3, and a version 1 or 2 block with bit 7 set is corrupt. Rejected: a separate
 * retraction count per cell (the reserved u16): a summary wants the net, and the signed cell
 * keeps the header 24 bytes a cell with the bits of a u32 for every older block.
 * Version 4 blocks (BLOCK_VERSION_SOURCES: the events model, some row with a Kafka source) are
 * version 3 blocks with ten column lengths, the eight above then:
 *   partitions: zigzag varint per row of its source partition (BLOCK_SOURCE_NONE: none);
 *   offsets:    per row with a source, zigzag varint of the difference to the offset of the
 *               previous row of its partition (see source_base; the first to the header's
 *               source_offset_min);
 * and the amounts after them. A row's source lies in the header's source range (its partition,
 * or any when mixed; offsets in [min, max]); the decoder checks that. Rows from one Kafka
 * partition in offset order make both columns runs of one byte, which zstd takes to almost
 * nothing; rows of many partitions interleaved (a node's blocks: a partition's events spread
 * over every (day, shard)) still give each offset a small difference to its own partition's
 * last one. docs/ARCHITECTURE.md has the figure. Rejected: a source per block (blocks mix
 * partitions, and a compaction merges blocks); a row-wise (partition, offset) table of fixed
 * 12-byte entries (zstd does less with it than with the deltas); and the difference to the
 * previous row whatever its partition (measured: 2.3 bytes per event more than without the
 * columns on the busy-day workload from 12 partitions, against the figure in the docs).
 * Measured on the busy-day workload: 9-10 raw bytes per event, ~6-7 after zstd -1 (see
 * docs/ARCHITECTURE.md). Rejected: row-wise records (zstd -1 gave ~11 B/event on the same data),
 * and per-column zstd frames (more headers, no gain at these block sizes).
 *
 * Invariants: a sealed block's cells re-aggregate exactly from its events; block_decode checks
 * that, so a block whose payload and header disagree is corrupt even if both CRCs pass.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "storage/format.h"

#define COLUMN_COUNT 6u
#define PREAMBLE_BYTES (1u + COLUMN_COUNT * 4u)
#define COLUMN_COUNT_EXTRAS 8u
#define PREAMBLE_BYTES_EXTRAS (1u + COLUMN_COUNT_EXTRAS * 4u)
#define COLUMN_COUNT_SOURCES 10u
#define PREAMBLE_BYTES_SOURCES (1u + COLUMN_COUNT_SOURCES * 4u)
static_assert(PREAMBLE_BYTES_SOURCES <= 48u, "BLOCK_RAW_BYTES_MAX counts 48 preamble bytes");
#define HOUR_MS 3600000

/* ---- open blocks --------------------------------------------------------------------------- */

static int open_block_reserve_rows(struct open_block *ob, uint32_t events_max)
{
    if (ob->count < ob->capacity) {
        return 0;
    }
    uint32_t capacity = ob->capacity == 0 ? 1024u : ob->capacity * 2u;
    if (capacity > events_max) {
        capacity = events_max;
    }
    ASSERT(capacity > ob->count);
    struct open_row *rows = realloc(ob->rows, (size_t)capacity * sizeof(*rows));
    if (rows == NULL) {
        return -ENOMEM;
    }
    ob->rows = rows;
    ob->capacity = capacity;
    return 0;
}

/* Grows *buf (doubling from first) to hold need bytes; returns 0 or -ENOMEM. */
static int buffer_reserve(uint8_t **buf, uint32_t *capacity, uint32_t need, uint32_t first)
{
    if (need <= *capacity) {
        return 0;
    }
    uint32_t grown = *capacity == 0 ? first : *capacity * 2u;
    while (grown < need) {
        grown *= 2u;
    }
    uint8_t *bigger = realloc(*buf, grown);
    if (bigger == NULL) {
        return -ENOMEM;
    }
    *buf = bigger;
    *capacity = grown;
    return 0;
}

static int open_block_add_string(struct open_block *ob, const struct ds_id *id, int64_t *offset)
{
    uint32_t need = ob->strings_bytes + 1u + id->len;
    if (need > BLOCK_STRING_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    if (buffer_reserve(&ob->strings, &ob->strings_capacity, need, 4096u) != 0) {
        return -ENOMEM;
    }
    *offset = ob->strings_bytes;
    ob->strings[ob->strings_bytes] = id->len;
    memcpy(ob->strings + ob->strings_bytes + 1, id->text, id->len);
    ob->strings_bytes = need;
    return 0;
}

/* Copies the event's canonical items into the block's items buffer (sealing early at
 * BLOCK_ITEMS_BYTES_MAX) and notes where they are in row. */
static int open_block_add_items(struct open_block *ob, const struct ds_event *event,
                                struct open_row *row)
{
    ASSERT(event->items_bytes <= DS_ITEMS_BYTES_MAX);
    ASSERT(event->items_bytes == 0 || event->items != NULL);
    uint32_t need = ob->items_bytes + event->items_bytes;
    if (need > BLOCK_ITEMS_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    if (buffer_reserve(&ob->items, &ob->items_capacity, need, 16384u) != 0) {
        return -ENOMEM;
    }
    row->items_offset = ob->items_bytes;
    row->items_bytes = event->items_bytes;
    memcpy(ob->items + ob->items_bytes, event->items, event->items_bytes);
    ob->items_bytes = need;
    return 0;
}

static int open_block_status_index(struct open_block *ob, const struct ds_event *event)
{
    for (uint16_t i = 0; i < ob->status_count; i++) {
        if (ob->status_len[i] == event->status_len &&
            memcmp(ob->status[i], event->status, event->status_len) == 0) {
            return i;
        }
    }
    if (ob->status_count == STORAGE_BLOCK_STATUS_MAX) {
        return -DS_ELIMIT;
    }
    uint16_t index = ob->status_count++;
    ob->status_len[index] = event->status_len;
    memcpy(ob->status[index], event->status, event->status_len);
    return index;
}

static void open_block_note_source(struct open_block *ob, const struct ds_source *source)
{
    if (source == NULL) {
        return;
    }
    if (ob->count == 0 || ob->source_partition == BLOCK_SOURCE_NONE) {
        ob->source_partition = source->partition;
        ob->source_offset_min = source->offset;
        ob->source_offset_max = source->offset;
        return;
    }
    if (ob->source_partition != source->partition) {
        ob->source_partition = BLOCK_SOURCE_MIXED;
    }
    if (source->offset < ob->source_offset_min) {
        ob->source_offset_min = source->offset;
    }
    if (source->offset > ob->source_offset_max) {
        ob->source_offset_max = source->offset;
    }
}

int open_block_add(struct open_block *ob, const struct ds_event *event,
                   const struct ds_source *source, bool row_source, uint32_t events_max)
{
    ASSERT(events_max >= 1 && events_max <= STORAGE_BLOCK_EVENTS_MAX);
    ASSERT(event->status_len <= DS_STATUS_BYTES_MAX);
    if (ob->count >= events_max) {
        return -DS_ELIMIT;
    }
    ASSERT(!event->has_version || event->version >= 0);
    uint32_t strings_before = ob->strings_bytes;
    uint32_t items_before = ob->items_bytes;
    uint16_t statuses_before = ob->status_count;
    int rc = open_block_reserve_rows(ob, events_max);
    struct open_row row = {.ts_ms = event->ts_ms, .amount_units = event->amount_units};
    row.version_code = event->has_version ? (uint64_t)event->version + 1u : 0u;
    row.source_partition = BLOCK_SOURCE_NONE;
    if (row_source && source != NULL) {
        ASSERT(source->partition >= DS_SOURCE_FILE);
        row.source_partition = source->partition;
        row.source_offset = source->offset;
    }
    int status_index = rc == 0 ? open_block_status_index(ob, event) : rc;
    if (status_index < 0) {
        return status_index;
    }
    row.flags = (uint8_t)((unsigned)status_index << OPEN_ROW_STATUS_SHIFT);
    if (event->retract) {
        row.flags |= OPEN_ROW_RETRACT;
    }
    row.order = event->order_id.value;
    row.customer = event->customer_id.value;
    if (event->order_id.is_string) {
        row.flags |= OPEN_ROW_ORDER_STRING;
        rc = open_block_add_string(ob, &event->order_id, &row.order);
    }
    if (rc == 0 && event->customer_id.is_string) {
        row.flags |= OPEN_ROW_CUSTOMER_STRING;
        rc = open_block_add_string(ob, &event->customer_id, &row.customer);
    }
    if (rc == 0 && event->items_bytes > 0) {
        rc = open_block_add_items(ob, event, &row);
    }
    if (rc != 0) {
        /* Leave the block exactly as it was, so the caller can seal it and retry. */
        ob->strings_bytes = strings_before;
        ob->items_bytes = items_before;
        ob->status_count = statuses_before;
        return rc;
    }
    if (row.version_code != 0 || row.items_bytes != 0) {
        ob->extras_count++;
    }
    if (event->retract) {
        ob->retract_count++;
    }
    if (row.source_partition >= 0) {
        ob->sourced_count++;
    }
    if (ob->count == 0 || event->ts_ms < ob->ts_min_ms) {
        ob->ts_min_ms = event->ts_ms;
    }
    if (ob->count == 0 || event->ts_ms > ob->ts_max_ms) {
        ob->ts_max_ms = event->ts_ms;
    }
    open_block_note_source(ob, source);
    ob->rows[ob->count++] = row;
    return 0;
}

size_t open_block_memory(const struct open_block *ob)
{
    return sizeof(*ob) + (size_t)ob->capacity * sizeof(struct open_row) + ob->strings_capacity +
           ob->items_capacity;
}

void open_block_reset(struct open_block *ob)
{
    ob->count = 0;
    ob->strings_bytes = 0;
    ob->items_bytes = 0;
    ob->extras_count = 0;
    ob->retract_count = 0;
    ob->sourced_count = 0;
    ob->status_count = 0;
    ob->ts_min_ms = 0;
    ob->ts_max_ms = 0;
    ob->source_partition = BLOCK_SOURCE_NONE;
    ob->source_offset_min = 0;
    ob->source_offset_max = 0;
}

void open_block_free(struct open_block *ob)
{
    if (ob == NULL) {
        return;
    }
    free(ob->rows);
    free(ob->strings);
    free(ob->items);
    memset(ob, 0, sizeof(*ob));
}

/* ---- codec --------------------------------------------------------------------------------- */

/* Per-(status, hour) aggregates of a set of events; the cell table of a header. count and
 * amount are signed (a retraction subtracts); rows says which cells exist. */
struct cell_grid {
    uint32_t rows[STORAGE_BLOCK_STATUS_MAX][24];
    int32_t count[STORAGE_BLOCK_STATUS_MAX][24];
    ds_i128 amount[STORAGE_BLOCK_STATUS_MAX][24];
};

static inline uint32_t row_status(uint8_t flags)
{
    return (flags >> OPEN_ROW_STATUS_SHIFT) & OPEN_ROW_STATUS_MASK;
}

/* Adds one row to the grid: +1 and its amount, or -1 and the negated amount for a retraction. */
static inline void grid_add(struct cell_grid *grid, uint8_t flags, uint32_t hour, int64_t amount)
{
    uint32_t s = row_status(flags);
    grid->rows[s][hour]++;
    if ((flags & OPEN_ROW_RETRACT) != 0) {
        grid->count[s][hour]--;
        grid->amount[s][hour] -= amount;
    } else {
        grid->count[s][hour]++;
        grid->amount[s][hour] += amount;
    }
}

int block_codec_init(struct block_codec *codec, int zstd_level)
{
    memset(codec, 0, sizeof(*codec));
    codec->zstd_level = zstd_level;
    codec->zstd_cctx = ZSTD_createCCtx();
    codec->zstd_dctx = ZSTD_createDCtx();
    codec->raw_capacity = BLOCK_RAW_BYTES_MAX;
    codec->raw = malloc(codec->raw_capacity);
    codec->grid = malloc(sizeof(struct cell_grid));
    if (codec->zstd_cctx == NULL || codec->zstd_dctx == NULL || codec->raw == NULL ||
        codec->grid == NULL) {
        block_codec_deinit(codec);
        return -ENOMEM;
    }
    return 0;
}

void block_codec_deinit(struct block_codec *codec)
{
    if (codec == NULL) {
        return;
    }
    ZSTD_freeCCtx(codec->zstd_cctx);
    ZSTD_freeDCtx(codec->zstd_dctx);
    free(codec->raw);
    free(codec->grid);
    memset(codec, 0, sizeof(*codec));
}

/* ---- sealing ------------------------------------------------------------------------------- */

static const int64_t scale_divisors[5] = {1, 10, 100, 1000, 10000};

static uint8_t amount_scale_of(const struct open_block *ob)
{
    uint8_t scale = 4;
    for (uint32_t i = 0; i < ob->count && scale > 0; i++) {
        while (scale > 0 && ob->rows[i].amount_units % scale_divisors[scale] != 0) {
            scale--;
        }
    }
    return scale;
}

static size_t encode_strings(const struct open_block *ob, uint8_t flag, bool order, uint8_t *dst)
{
    size_t n = 0;
    for (uint32_t i = 0; i < ob->count; i++) {
        const struct open_row *row = &ob->rows[i];
        if ((row->flags & flag) == 0) {
            continue;
        }
        int64_t offset = order ? row->order : row->customer;
        const uint8_t *s = ob->strings + offset;
        memcpy(dst + n, s, 1u + s[0]);
        n += 1u + s[0];
    }
    return n;
}

/* The versions and items columns of a version 2 block at p; returns their lengths. */
static void encode_extras(const struct open_block *ob, uint8_t *p, uint32_t *versions_len,
                          uint32_t *items_len)
{
    size_t n = 0;
    for (uint32_t i = 0; i < ob->count; i++) {
        n += ds_varint_put(p + n, ob->rows[i].version_code);
    }
    *versions_len = (uint32_t)n;
    p += n;
    n = 0;
    for (uint32_t i = 0; i < ob->count; i++) {
        const struct open_row *row = &ob->rows[i];
        n += ds_varint_put(p + n, row->items_bytes);
        if (row->items_bytes > 0) { /* ob->items is NULL in a block of versions only */
            memcpy(p + n, ob->items + row->items_offset, row->items_bytes);
            n += row->items_bytes;
        }
    }
    *items_len = (uint32_t)n;
}

/* The last offset of each recent partition, by partition modulo SOURCE_SLOTS: what an offset
 * is the difference to. A partition sharing its slot with another one in the block only costs
 * longer differences, never correctness: encoder and decoder update the slots alike. */
#define SOURCE_SLOTS 256u
struct source_slots {
    int32_t partition[SOURCE_SLOTS]; /* BLOCK_SOURCE_NONE: empty */
    int64_t last[SOURCE_SLOTS];
};

static void source_slots_init(struct source_slots *slots)
{
    for (uint32_t i = 0; i < SOURCE_SLOTS; i++) {
        slots->partition[i] = BLOCK_SOURCE_NONE;
        slots->last[i] = 0;
    }
}

/* The offset a row of partition's offset is the difference to: its partition's last one, or
 * the block's least offset. */
static int64_t source_base(const struct source_slots *slots, int32_t partition, int64_t min)
{
    uint32_t slot = (uint32_t)partition % SOURCE_SLOTS;
    return slots->partition[slot] == partition ? slots->last[slot] : min;
}

static void source_slots_note(struct source_slots *slots, int32_t partition, int64_t offset)
{
    uint32_t slot = (uint32_t)partition % SOURCE_SLOTS;
    slots->partition[slot] = partition;
    slots->last[slot] = offset;
}

/* The partitions and offsets columns of a version 4 block at p; returns their lengths. */
static void encode_sources(const struct open_block *ob, uint8_t *p, uint32_t *partitions_len,
                           uint32_t *offsets_len)
{
    size_t n = 0;
    for (uint32_t i = 0; i < ob->count; i++) {
        n += ds_varint_put(p + n, ds_zigzag(ob->rows[i].source_partition));
    }
    *partitions_len = (uint32_t)n;
    p += n;
    n = 0;
    struct source_slots slots;
    source_slots_init(&slots);
    for (uint32_t i = 0; i < ob->count; i++) {
        const struct open_row *row = &ob->rows[i];
        if (row->source_partition != BLOCK_SOURCE_NONE) {
            int64_t base = source_base(&slots, row->source_partition, ob->source_offset_min);
            /* Wrapping difference, unwrapped identically by the decoder. */
            uint64_t delta = (uint64_t)row->source_offset - (uint64_t)base;
            n += ds_varint_put(p + n, ds_zigzag((int64_t)delta));
            source_slots_note(&slots, row->source_partition, row->source_offset);
        }
    }
    *offsets_len = (uint32_t)n;
}

/* The number of column lengths in the preamble of a block of this version. */
static unsigned column_count_of(uint16_t version)
{
    return version == BLOCK_VERSION           ? COLUMN_COUNT
           : version == BLOCK_VERSION_SOURCES ? COLUMN_COUNT_SOURCES
                                              : COLUMN_COUNT_EXTRAS;
}

static size_t encode_columns(const struct open_block *ob, uint16_t version, uint8_t *raw)
{
    uint8_t scale = amount_scale_of(ob);
    unsigned columns = column_count_of(version);
    uint32_t lengths[COLUMN_COUNT_SOURCES] = {0};
    uint8_t *p = raw + 1u + columns * 4u;
    raw[0] = scale;
    for (uint32_t i = 0; i < ob->count; i++) {
        p[i] = ob->rows[i].flags;
    }
    lengths[0] = ob->count;
    p += ob->count;

    size_t n = 0;
    int64_t prev = ob->ts_min_ms;
    for (uint32_t i = 0; i < ob->count; i++) {
        n += ds_varint_put(p + n, ds_zigzag(ob->rows[i].ts_ms - prev));
        prev = ob->rows[i].ts_ms;
    }
    lengths[1] = (uint32_t)n;
    p += n;

    n = 0;
    prev = 0;
    for (uint32_t i = 0; i < ob->count; i++) {
        if ((ob->rows[i].flags & OPEN_ROW_ORDER_STRING) == 0) {
            /* Wrapping difference: ids are positive, so it never overflows in practice, and
             * the decoder wraps back identically. */
            n += ds_varint_put(p + n,
                               ds_zigzag((int64_t)((uint64_t)ob->rows[i].order - (uint64_t)prev)));
            prev = ob->rows[i].order;
        }
    }
    lengths[2] = (uint32_t)n;
    p += n;

    lengths[3] = (uint32_t)encode_strings(ob, OPEN_ROW_ORDER_STRING, true, p);
    p += lengths[3];

    n = 0;
    for (uint32_t i = 0; i < ob->count; i++) {
        if ((ob->rows[i].flags & OPEN_ROW_CUSTOMER_STRING) == 0) {
            n += ds_varint_put(p + n, (uint64_t)ob->rows[i].customer);
        }
    }
    lengths[4] = (uint32_t)n;
    p += n;

    lengths[5] = (uint32_t)encode_strings(ob, OPEN_ROW_CUSTOMER_STRING, false, p);
    p += lengths[5];

    if (columns >= COLUMN_COUNT_EXTRAS) {
        encode_extras(ob, p, &lengths[6], &lengths[7]);
        p += lengths[6] + lengths[7];
    }
    if (columns == COLUMN_COUNT_SOURCES) {
        encode_sources(ob, p, &lengths[8], &lengths[9]);
        p += lengths[8] + lengths[9];
    }
    for (uint32_t i = 0; i < ob->count; i++) {
        p += ds_varint_put(p, ds_zigzag(ob->rows[i].amount_units / scale_divisors[scale]));
    }
    memcpy(raw + 1, lengths, columns * sizeof(uint32_t));
    return (size_t)(p - raw);
}

static uint32_t hour_of(int64_t ts_ms, int64_t day_start_ms)
{
    int64_t offset = ts_ms - day_start_ms;
    ASSERT(offset >= 0 && offset < DS_DAY_MS);
    return (uint32_t)(offset / HOUR_MS);
}

static size_t status_table_bytes(const struct open_block *ob)
{
    size_t n = 0;
    for (uint16_t i = 0; i < ob->status_count; i++) {
        n += 1u + ob->status_len[i];
    }
    return (n + 7u) & ~(size_t)7u;
}

size_t block_seal_bound(const struct open_block *ob)
{
    size_t raw = PREAMBLE_BYTES_SOURCES + (size_t)ob->count * BLOCK_EVENT_FIXED_RAW_BYTES_MAX +
                 ob->items_bytes;
    return BLOCK_HEADER_BYTES_MAX + ZSTD_compressBound(raw);
}

static size_t write_cells(const struct open_block *ob, const struct cell_grid *grid, uint8_t *dst)
{
    size_t cells = 0;
    for (uint16_t s = 0; s < ob->status_count; s++) {
        for (uint8_t h = 0; h < 24; h++) {
            if (grid->rows[s][h] == 0) {
                continue;
            }
            struct block_cell cell = {
                .status_index = (uint8_t)s, .hour = h, .count = grid->count[s][h]};
            block_cell_set_amount(&cell, grid->amount[s][h]);
            memcpy(dst + cells * sizeof(cell), &cell, sizeof(cell));
            cells++;
        }
    }
    return cells;
}

static size_t write_status_table(const struct open_block *ob, uint8_t *dst)
{
    size_t n = 0;
    for (uint16_t i = 0; i < ob->status_count; i++) {
        dst[n] = ob->status_len[i];
        memcpy(dst + n + 1, ob->status[i], ob->status_len[i]);
        n += 1u + ob->status_len[i];
    }
    size_t padded = status_table_bytes(ob);
    memset(dst + n, 0, padded - n);
    return padded;
}

int64_t block_seal(struct block_codec *codec, const struct open_block *ob, int64_t day_start_ms,
                   uint8_t *dst, size_t dst_capacity)
{
    ASSERT(ob->count > 0);
    ASSERT(ob->count <= STORAGE_BLOCK_EVENTS_MAX);
    if (dst_capacity < block_seal_bound(ob)) {
        return -ENOSPC;
    }
    struct cell_grid *grid = codec->grid;
    memset(grid, 0, sizeof(*grid));
    for (uint32_t i = 0; i < ob->count; i++) {
        grid_add(grid, ob->rows[i].flags, hour_of(ob->rows[i].ts_ms, day_start_ms),
                 ob->rows[i].amount_units);
    }
    uint16_t version = ob->sourced_count > 0   ? BLOCK_VERSION_SOURCES
                       : ob->retract_count > 0 ? BLOCK_VERSION_RETRACT
                       : ob->extras_count > 0  ? BLOCK_VERSION_EXTRAS
                                               : BLOCK_VERSION;
    struct block_header header = {
        .magic = BLOCK_MAGIC,
        .version = version,
        .event_count = ob->count,
        .status_count = ob->status_count,
        .ts_min_ms = ob->ts_min_ms,
        .ts_max_ms = ob->ts_max_ms,
        .source_partition = ob->source_partition,
        .source_offset_min = ob->source_offset_min,
        .source_offset_max = ob->source_offset_max,
    };
    size_t at = sizeof(header);
    at += write_status_table(ob, dst + at);
    size_t cells = write_cells(ob, grid, dst + at);
    at += cells * sizeof(struct block_cell);
    header.cell_count = (uint16_t)cells;
    header.header_bytes = (uint16_t)at;

    size_t raw_len = encode_columns(ob, version, codec->raw);
    ASSERT(raw_len <= codec->raw_capacity);
    size_t z = ZSTD_compressCCtx(codec->zstd_cctx, dst + at, dst_capacity - at, codec->raw, raw_len,
                                 codec->zstd_level);
    if (ZSTD_isError(z)) {
        ds_log_error("zstd compress of a %u-event block failed: %s", ob->count,
                     ZSTD_getErrorName(z));
        return -DS_EZSTD;
    }
    header.raw_bytes = (uint32_t)raw_len;
    header.payload_bytes = (uint32_t)z;
    header.payload_crc = ds_crc32c(0, dst + at, z);
    memcpy(dst, &header, sizeof(header));
    header.header_crc = ds_crc32c(0, dst, at);
    memcpy(dst, &header, sizeof(header));
    /* Check the block as a reader will, just before it reaches the disk. */
    ASSERT(block_header_check(dst, at) == 0);
    return (int64_t)(at + z);
}

/* ---- reading ------------------------------------------------------------------------------- */

int block_header_check(const uint8_t *buf, size_t len)
{
    struct block_header h;
    if (len < sizeof(h)) {
        return -DS_ECORRUPT;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.magic != BLOCK_MAGIC || h.version < BLOCK_VERSION || h.version > BLOCK_VERSION_SOURCES ||
        (h.version == BLOCK_VERSION_SOURCES &&
         ((h.source_partition < 0 && h.source_partition != BLOCK_SOURCE_MIXED) ||
          h.source_offset_min > h.source_offset_max)) ||
        h.header_bytes < sizeof(h) || h.header_bytes > BLOCK_HEADER_BYTES_MAX ||
        h.event_count == 0 || h.event_count > STORAGE_BLOCK_EVENTS_MAX || h.status_count == 0 ||
        h.status_count > STORAGE_BLOCK_STATUS_MAX || h.cell_count == 0 ||
        h.cell_count > BLOCK_CELLS_MAX || h.raw_bytes > BLOCK_RAW_BYTES_MAX ||
        h.ts_min_ms > h.ts_max_ms || h.payload_bytes > ZSTD_compressBound(BLOCK_RAW_BYTES_MAX)) {
        return -DS_ECORRUPT;
    }
    if (len < h.header_bytes) {
        return 0; /* the fixed part is plausible; the caller reads the rest */
    }
    uint32_t stored = h.header_crc;
    uint8_t zero[4] = {0};
    uint32_t crc = ds_crc32c(0, buf, offsetof(struct block_header, header_crc));
    crc = ds_crc32c(crc, zero, sizeof(zero));
    crc = ds_crc32c(crc, buf + sizeof(h), h.header_bytes - sizeof(h));
    return crc == stored ? 0 : -DS_ECORRUPT;
}

/* Cells are sorted and in range. Before version 3 every count is positive and they sum to the
 * event count; from version 3 a cell holds inserts - retractions of rows that are all in the
 * block, so each |count| is at most the event count, and so is |sum|, with the same parity. */
static int view_check_cells(const struct block_view *view)
{
    const struct block_header *h = view->header;
    bool signed_cells = h->version >= BLOCK_VERSION_RETRACT;
    int64_t total = 0;
    int last = -1;
    for (uint16_t i = 0; i < h->cell_count; i++) {
        const struct block_cell *cell = &view->cells[i];
        int key = cell->status_index * 24 + cell->hour;
        int64_t count = cell->count;
        if (cell->status_index >= h->status_count || cell->hour >= 24 || key <= last ||
            (signed_cells ? (count > h->event_count || -count > h->event_count) : count <= 0)) {
            return -DS_ECORRUPT;
        }
        last = key;
        total += count;
    }
    if (!signed_cells) {
        return total == h->event_count ? 0 : -DS_ECORRUPT;
    }
    bool ok =
        total <= h->event_count && -total <= h->event_count && ((total - h->event_count) & 1) == 0;
    return ok ? 0 : -DS_ECORRUPT;
}

int block_view_parse(const uint8_t *buf, size_t len, struct block_view *view)
{
    int rc = block_header_check(buf, len);
    if (rc != 0) {
        return rc;
    }
    const struct block_header *h = (const struct block_header *)(const void *)buf;
    if (len < h->header_bytes) {
        return -DS_ECORRUPT;
    }
    memset(view, 0, sizeof(*view));
    view->header = h;
    size_t at = sizeof(*h);
    for (uint16_t i = 0; i < h->status_count; i++) {
        if (at >= h->header_bytes || buf[at] > DS_STATUS_BYTES_MAX ||
            at + 1u + buf[at] > h->header_bytes) {
            return -DS_ECORRUPT;
        }
        view->status_len[i] = buf[at];
        view->status[i] = (const char *)buf + at + 1;
        at += 1u + buf[at];
    }
    at = (at + 7u) & ~(size_t)7u;
    if (at + (size_t)h->cell_count * sizeof(struct block_cell) != h->header_bytes) {
        return -DS_ECORRUPT;
    }
    view->cells = (const struct block_cell *)(const void *)(buf + at);
    return view_check_cells(view);
}

/* Cursor over the decompressed columns; version and items are NULL in a version 1 block,
 * partition and offset before version 4. */
struct column_cursor {
    const uint8_t *flags, *ts, *order_int, *order_str, *customer_int, *customer_str, *version,
        *items, *partition, *offset, *amount;
    const uint8_t *ts_end, *order_int_end, *order_str_end, *customer_int_end, *customer_str_end,
        *version_end, *items_end, *partition_end, *offset_end, *amount_end;
    struct source_slots slots;
    /* What the rows' sources came to, which must be the header's range exactly. */
    int64_t seen_offset_min, seen_offset_max;
    int32_t seen_partition; /* BLOCK_SOURCE_NONE, then the first one, then BLOCK_SOURCE_MIXED */
    uint8_t scale;
};

static int cursor_init(struct column_cursor *c, const uint8_t *raw, size_t raw_len,
                       const struct block_header *h)
{
    uint32_t lengths[COLUMN_COUNT_SOURCES] = {0};
    unsigned columns = column_count_of(h->version);
    uint32_t count = h->event_count;
    size_t preamble = 1u + columns * 4u;
    if (raw_len < preamble || raw[0] > 4) {
        return -DS_ECORRUPT;
    }
    c->scale = raw[0];
    memcpy(lengths, raw + 1, columns * sizeof(uint32_t));
    uint64_t sum = preamble;
    for (unsigned i = 0; i < columns; i++) {
        sum += lengths[i];
    }
    if (lengths[0] != count || sum > raw_len) {
        return -DS_ECORRUPT;
    }
    const uint8_t *p = raw + preamble;
    c->flags = p;
    p += lengths[0];
    c->ts = p;
    c->ts_end = p += lengths[1];
    c->order_int = p;
    c->order_int_end = p += lengths[2];
    c->order_str = p;
    c->order_str_end = p += lengths[3];
    c->customer_int = p;
    c->customer_int_end = p += lengths[4];
    c->customer_str = p;
    c->customer_str_end = p += lengths[5];
    bool extras = columns >= COLUMN_COUNT_EXTRAS;
    bool sources = columns == COLUMN_COUNT_SOURCES;
    c->version = extras ? p : NULL;
    c->version_end = p += lengths[6];
    c->items = extras ? p : NULL;
    c->items_end = p += lengths[7];
    c->partition = sources ? p : NULL;
    c->partition_end = p += lengths[8];
    c->offset = sources ? p : NULL;
    c->offset_end = p += lengths[9];
    if (sources) {
        source_slots_init(&c->slots);
    }
    c->seen_partition = BLOCK_SOURCE_NONE;
    c->amount = p;
    c->amount_end = raw + raw_len;
    return 0;
}

static bool take_string(const uint8_t **p, const uint8_t *end, struct ds_id *id)
{
    if (*p >= end || **p == 0 || **p > DS_ID_BYTES_MAX || end - *p < 1 + **p) {
        return false;
    }
    id->is_string = true;
    id->len = **p;
    id->value = 0;
    memcpy(id->text, *p + 1, id->len);
    *p += 1 + id->len;
    return true;
}

static bool take_int_id(const uint8_t **p, const uint8_t *end, int64_t *prev, bool delta,
                        struct ds_id *id)
{
    uint64_t v = 0;
    if (!ds_varint_next(p, end, &v)) {
        return false;
    }
    int64_t value = delta ? (int64_t)((uint64_t)*prev + (uint64_t)ds_unzigzag(v)) : (int64_t)v;
    *prev = value;
    id->is_string = false;
    id->len = 0;
    id->value = value;
    return value >= 1;
}

/* Whether len bytes at p are canonical items (struct ds_event.items): the count, then that
 * many items of a 1..64-byte product and a quantity 1..2^31-1, and nothing after. */
static bool items_valid(const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    uint64_t count = 0;
    if (!ds_varint_next(&p, end, &count) || count > DS_ITEMS_COUNT_MAX) {
        return false;
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t quantity = 0;
        if (p >= end || *p == 0 || *p > DS_ITEM_PRODUCT_BYTES_MAX || end - p < 1 + *p) {
            return false;
        }
        p += 1 + *p;
        if (!ds_varint_next(&p, end, &quantity) || quantity == 0 ||
            quantity > DS_ITEM_QUANTITY_MAX) {
            return false;
        }
    }
    return p == end;
}

/* The version and items of event i of a version 2 block. */
static bool take_extras(struct column_cursor *c, struct ds_event *event)
{
    uint64_t code = 0;
    uint64_t len = 0;
    if (!ds_varint_next(&c->version, c->version_end, &code) || code > (uint64_t)INT64_MAX + 1u ||
        !ds_varint_next(&c->items, c->items_end, &len) || len > DS_ITEMS_BYTES_MAX ||
        len > (uint64_t)(c->items_end - c->items)) {
        return false;
    }
    event->has_version = code != 0;
    event->version = code != 0 ? (int64_t)(code - 1u) : 0;
    event->items_bytes = (uint16_t)len;
    event->items = len != 0 ? c->items : NULL;
    c->items += len;
    return len == 0 || items_valid(event->items, len);
}

/* The source of a row of a version 4 block: false when the columns are damaged or the source
 * lies outside the header's range. *has_source is false for a row stored without one. */
static bool take_source(struct column_cursor *c, const struct block_header *h,
                        struct ds_source *source, bool *has_source)
{
    uint64_t v = 0;
    if (!ds_varint_next(&c->partition, c->partition_end, &v)) {
        return false;
    }
    int64_t partition = ds_unzigzag(v);
    *has_source = partition != BLOCK_SOURCE_NONE;
    if (!*has_source) {
        return true;
    }
    if (partition < DS_SOURCE_FILE || partition > INT32_MAX ||
        (h->source_partition != BLOCK_SOURCE_MIXED && partition != h->source_partition) ||
        !ds_varint_next(&c->offset, c->offset_end, &v)) {
        return false;
    }
    source->partition = (int32_t)partition;
    int64_t base = source_base(&c->slots, source->partition, h->source_offset_min);
    int64_t offset = (int64_t)((uint64_t)base + (uint64_t)ds_unzigzag(v));
    source_slots_note(&c->slots, source->partition, offset);
    source->offset = offset;
    if (c->seen_partition == BLOCK_SOURCE_NONE) {
        c->seen_partition = source->partition;
        c->seen_offset_min = offset;
        c->seen_offset_max = offset;
    } else if (c->seen_partition != source->partition) {
        c->seen_partition = BLOCK_SOURCE_MIXED;
    }
    c->seen_offset_min = offset < c->seen_offset_min ? offset : c->seen_offset_min;
    c->seen_offset_max = offset > c->seen_offset_max ? offset : c->seen_offset_max;
    return offset >= h->source_offset_min && offset <= h->source_offset_max;
}

/* After the last row of a version 4 block: both columns read to their ends, and the header's
 * source range is exactly the rows' (the writer computes both from the same sources), so a
 * damaged offset delta, which moves every later offset, shows at an end of the range. */
static bool sources_complete(const struct column_cursor *c, const struct block_header *h)
{
    return c->partition == c->partition_end && c->offset == c->offset_end &&
           c->seen_partition == h->source_partition && c->seen_offset_min == h->source_offset_min &&
           c->seen_offset_max == h->source_offset_max;
}

static int decode_event(struct column_cursor *c, const struct block_view *view, uint32_t i,
                        int64_t *prev_ts, int64_t *prev_order, struct ds_event *event)
{
    uint8_t flags = c->flags[i];
    uint32_t status = row_status(flags);
    uint64_t v = 0;
    int64_t ignored = 0;
    bool retract = (flags & OPEN_ROW_RETRACT) != 0;
    if (status >= view->header->status_count ||
        (retract && view->header->version < BLOCK_VERSION_RETRACT) ||
        !ds_varint_next(&c->ts, c->ts_end, &v)) {
        return -DS_ECORRUPT;
    }
    /* Damaged columns must fail here, not overflow (undefined behaviour): a delta or an amount
     * that cannot be represented is corrupt. */
    if (__builtin_add_overflow(*prev_ts, ds_unzigzag(v), &event->ts_ms)) {
        return -DS_ECORRUPT;
    }
    *prev_ts = event->ts_ms;
    bool ok =
        (flags & OPEN_ROW_ORDER_STRING)
            ? take_string(&c->order_str, c->order_str_end, &event->order_id)
            : take_int_id(&c->order_int, c->order_int_end, prev_order, true, &event->order_id);
    ok = ok && ((flags & OPEN_ROW_CUSTOMER_STRING)
                    ? take_string(&c->customer_str, c->customer_str_end, &event->customer_id)
                    : take_int_id(&c->customer_int, c->customer_int_end, &ignored, false,
                                  &event->customer_id));
    event->has_version = false;
    event->retract = retract;
    event->version = 0;
    event->items_bytes = 0;
    event->items = NULL;
    ok = ok && (c->version == NULL || take_extras(c, event));
    ok = ok && ds_varint_next(&c->amount, c->amount_end, &v);
    if (!ok) {
        return -DS_ECORRUPT;
    }
    if (__builtin_mul_overflow(ds_unzigzag(v), scale_divisors[c->scale], &event->amount_units)) {
        return -DS_ECORRUPT;
    }
    event->status_len = view->status_len[status];
    memcpy(event->status, view->status[status], event->status_len);
    return 0;
}

/* The header's cells are exactly the (status, hour) pairs that have rows, with their signed
 * counts and sums. */
static int check_regrouped(const struct block_view *view, const struct cell_grid *grid)
{
    uint32_t pairs = 0;
    for (uint16_t s = 0; s < view->header->status_count; s++) {
        for (uint32_t h = 0; h < 24; h++) {
            pairs += grid->rows[s][h] != 0 ? 1u : 0u;
        }
    }
    if (pairs != view->header->cell_count) {
        return -DS_ECORRUPT;
    }
    for (uint16_t i = 0; i < view->header->cell_count; i++) {
        const struct block_cell *cell = &view->cells[i];
        if (grid->rows[cell->status_index][cell->hour] == 0 ||
            grid->count[cell->status_index][cell->hour] != cell->count ||
            grid->amount[cell->status_index][cell->hour] != block_cell_amount(cell)) {
            return -DS_ECORRUPT;
        }
    }
    return 0;
}

static int decode_events(struct block_codec *codec, const struct block_view *view, size_t raw_len,
                         int64_t day_start_ms, block_event_fn fn, void *user)
{
    const struct block_header *h = view->header;
    struct column_cursor c;
    int rc = cursor_init(&c, codec->raw, raw_len, h);
    if (rc != 0) {
        return rc;
    }
    struct cell_grid *grid = codec->grid;
    memset(grid, 0, sizeof(*grid));
    int64_t prev_ts = h->ts_min_ms;
    int64_t prev_order = 0;
    for (uint32_t i = 0; i < h->event_count && rc == 0; i++) {
        struct ds_event event;
        struct ds_source source = {0};
        bool has_source = false;
        rc = decode_event(&c, view, i, &prev_ts, &prev_order, &event);
        if (rc == 0 && c.partition != NULL && !take_source(&c, h, &source, &has_source)) {
            rc = -DS_ECORRUPT;
        }
        if (rc == 0 && (event.ts_ms < h->ts_min_ms || event.ts_ms > h->ts_max_ms ||
                        event.ts_ms < day_start_ms || event.ts_ms >= day_start_ms + DS_DAY_MS)) {
            rc = -DS_ECORRUPT;
        }
        if (rc == 0) {
            grid_add(grid, c.flags[i], hour_of(event.ts_ms, day_start_ms), event.amount_units);
            rc = fn != NULL ? fn(&event, has_source ? &source : NULL, user) : 0;
        }
    }
    if (rc == 0 && c.partition != NULL && !sources_complete(&c, h)) {
        rc = -DS_ECORRUPT;
    }
    if (rc == 0) {
        rc = check_regrouped(view, grid);
    }
    return rc;
}

int block_decode(struct block_codec *codec, const struct block_view *view, const uint8_t *payload,
                 int64_t day_start_ms, block_event_fn fn, void *user)
{
    const struct block_header *h = view->header;
    if (ds_crc32c(0, payload, h->payload_bytes) != h->payload_crc) {
        return -DS_ECORRUPT;
    }
    size_t raw_len = ZSTD_decompressDCtx(codec->zstd_dctx, codec->raw, codec->raw_capacity, payload,
                                         h->payload_bytes);
    if (ZSTD_isError(raw_len) || raw_len != h->raw_bytes) {
        return -DS_ECORRUPT;
    }
    return decode_events(codec, view, raw_len, day_start_ms, fn, user);
}
