/*
 * libFuzzer harness for the block reader of storage/block.c (block_header_check,
 * block_view_parse, block_decode): segment bytes are outside input after a crash or a bad disk.
 *
 * Input: a mode byte, then the rest.
 *   MODE_RAW (mode % 4 == 0): the rest is a block as read from a segment, in a buffer of its
 *     exact length (so ASan sees a read past it), decoded against the day of its ts_min_ms.
 *   otherwise (structured): the rest describes events (see event_take; with versions, items
 *     and retraction rows, and with bit 1 of the multiplier byte each row's source kept, so
 *     blocks of format 1, 2, 3 and 4 all appear), which are added to an open block and sealed
 *     with block_seal, so the fuzzer starts from a block that passes both CRCs. The unmutated
 *     block must decode to exactly the events added, with their sources, in order. Then the
 *     trailing bytes mutate it (see mutate): the header and table (MODE_HEADER), the zstd
 *     payload (MODE_PAYLOAD) or the decompressed columns, compressed again (MODE_COLUMNS); when
 *     bit 2 of the mode byte is set the CRCs (and the payload lengths) are recomputed after the
 *     mutation, so the fuzzer gets past them to the cell checks and the column decoder.
 *
 * Properties, any broken one aborts: every call returns 0 or -DS_ECORRUPT (block_decode also
 * -DS_EZSTD); a block_decode returning 0 called its callback exactly header event_count times
 * with events inside the header's time range and the partition's day, retraction rows only in
 * a block of version 3 or 4, row sources only in version 4 and inside the header's source
 * range, and the events re-aggregate to the header's cells (block_decode checks that itself,
 * so a 0 is the claim).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "storage/format.h"
#include "tests/fuzz/fuzz_input.h"

#define MODE_RAW 0u
#define MODE_HEADER 1u
#define MODE_PAYLOAD 2u
#define MODE_COLUMNS 3u
#define MODE_FIX_CRC 0x04u
/* Events of one structured block: enough for several hours, statuses and string ids; a
 * fuzzer input of a few KB describes at most a few hundred. */
#define EVENTS_MAX 512u
/* Mutations applied to one block: each is 3 bytes of input (offset, offset, xor value). */
#define MUTATIONS_MAX 64u
#define FUZZ_DAY 19000 /* 2022-01-08: any day works, one keeps the seeds readable */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct events {
    struct ds_event items[EVENTS_MAX];
    struct ds_source sources[EVENTS_MAX]; /* partition BLOCK_SOURCE_NONE: none kept */
    uint8_t item_buffers[EVENTS_MAX][DS_ITEMS_BYTES_MAX]; /* each event's canonical items */
    uint32_t count;
    uint32_t seen; /* callback calls */
    int64_t day_start_ms;
    bool compare;        /* compare each decoded event with items[seen] */
    bool retract_format; /* the block decoded is version 3 or 4: rows may be retractions */
    const struct block_header *header; /* of the block decoded */
};

/* One codec for the whole run: block_codec_init allocates megabytes of scratch, which would
 * dominate each run under ASan. A harness is the one place a mutable static is fine. */
static struct block_codec *codec_get(void)
{
    static struct block_codec codec;
    static bool ready;
    if (!ready) {
        if (block_codec_init(&codec, 1) != 0) {
            abort();
        }
        ready = true;
    }
    return &codec;
}

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

static bool id_equal(const struct ds_id *a, const struct ds_id *b)
{
    return a->is_string == b->is_string && a->len == b->len && a->value == b->value &&
           memcmp(a->text, b->text, a->len) == 0;
}

static bool event_equal(const struct ds_event *a, const struct ds_event *b)
{
    return id_equal(&a->order_id, &b->order_id) && id_equal(&a->customer_id, &b->customer_id) &&
           a->ts_ms == b->ts_ms && a->amount_units == b->amount_units &&
           a->status_len == b->status_len && memcmp(a->status, b->status, a->status_len) == 0 &&
           a->has_version == b->has_version && a->version == b->version &&
           a->retract == b->retract && a->items_bytes == b->items_bytes &&
           (a->items_bytes == 0 || memcmp(a->items, b->items, a->items_bytes) == 0);
}

static void source_check(const struct events *ev, const struct ds_source *source)
{
    const struct block_header *h = ev->header;
    if (source == NULL) {
        check(!ev->compare || ev->sources[ev->seen].partition == BLOCK_SOURCE_NONE);
        return;
    }
    check(h->version == BLOCK_VERSION_SOURCES);
    check(source->partition >= DS_SOURCE_FILE);
    check(h->source_partition == BLOCK_SOURCE_MIXED || source->partition == h->source_partition);
    check(source->offset >= h->source_offset_min && source->offset <= h->source_offset_max);
    check(!ev->compare || (ev->sources[ev->seen].partition == source->partition &&
                           ev->sources[ev->seen].offset == source->offset));
}

static int on_event(const struct ds_event *event, const struct ds_source *source, void *user)
{
    struct events *ev = user;
    check(event->ts_ms >= ev->day_start_ms && event->ts_ms < ev->day_start_ms + DS_DAY_MS);
    check(event->status_len <= DS_STATUS_BYTES_MAX);
    check(!event->order_id.is_string ||
          (event->order_id.len >= 1 && event->order_id.len <= DS_ID_BYTES_MAX));
    check(!event->customer_id.is_string ||
          (event->customer_id.len >= 1 && event->customer_id.len <= DS_ID_BYTES_MAX));
    check(ev->seen < STORAGE_BLOCK_EVENTS_MAX);
    check(event->has_version ? event->version >= 0 : event->version == 0);
    check(!event->retract || ev->retract_format);
    check(event->items_bytes <= DS_ITEMS_BYTES_MAX &&
          (event->items_bytes == 0) == (event->items == NULL));
    check(event->items_bytes == 0 || event->items[0] <= DS_ITEMS_COUNT_MAX);
    if (ev->compare) {
        check(ev->seen < ev->count && event_equal(event, &ev->items[ev->seen]));
    }
    source_check(ev, source);
    ev->seen++;
    return 0;
}

/* Parses and decodes the block in buf[0..len); returns block_decode's answer, or the parse
 * error. */
static int block_read(const uint8_t *buf, size_t len, struct events *ev)
{
    int rc = block_header_check(buf, len);
    check(rc == 0 || rc == -DS_ECORRUPT);
    struct block_view view;
    rc = block_view_parse(buf, len, &view);
    check(rc == 0 || rc == -DS_ECORRUPT);
    if (rc != 0) {
        return rc;
    }
    const struct block_header *h = view.header;
    check(h->header_bytes <= len && h->event_count >= 1 && h->cell_count >= 1);
    if (len - h->header_bytes < h->payload_bytes) {
        return -DS_ECORRUPT; /* the reader refuses a block that runs past the segment's end */
    }
    ev->seen = 0;
    ev->retract_format = h->version >= BLOCK_VERSION_RETRACT;
    ev->header = h;
    rc = block_decode(codec_get(), &view, buf + h->header_bytes, ev->day_start_ms, on_event, ev);
    check(rc == 0 || rc == -DS_ECORRUPT || rc == -DS_EZSTD);
    check(rc != 0 || ev->seen == h->event_count);
    return rc;
}

/* ---- raw mode ----------------------------------------------------------------------------- */

static void raw_run(const uint8_t *data, size_t size, struct events *ev)
{
    uint8_t *buf = malloc(size > 0 ? size : 1);
    check(buf != NULL);
    memcpy(buf, data, size);
    struct block_header h = {0};
    if (size >= sizeof(h)) {
        memcpy(&h, buf, sizeof(h));
    }
    /* The partition's day: the header's own when it is a real one, so a block need not be
     * built for one fixed day. */
    int64_t day = h.ts_min_ms >= DS_TS_MS_MIN && h.ts_min_ms <= DS_TS_MS_MAX
                      ? h.ts_min_ms / DS_DAY_MS
                      : FUZZ_DAY;
    ev->day_start_ms = day * DS_DAY_MS;
    ev->compare = false;
    (void)block_read(buf, size, ev);
    free(buf);
}

/* ---- structured mode ---------------------------------------------------------------------- */

static void id_take(struct fuzz_input *r, uint8_t kind, struct ds_id *id)
{
    memset(id, 0, sizeof(*id));
    if (kind & 1u) {
        id->is_string = true;
        id->len = (uint8_t)(1u + fuzz_take_u8(r) % DS_ID_BYTES_MAX);
        for (uint8_t i = 0; i < id->len; i++) {
            id->text[i] = (char)fuzz_take_u8(r);
        }
        return;
    }
    /* Small ids, large ids and the largest one. */
    uint32_t v = (uint32_t)fuzz_take_le(r, 4);
    id->value = kind & 2u ? INT64_MAX - (int64_t)v : 1 + (int64_t)v;
}

/* The extras of an event (kinds bit 7): u8 flags (bit 0 a version, bit 1 a large one, bit 2
 * items, bit 3 a retraction row), u32 version, then for items u8 count (% 101) and per item u8
 * product length (1 + % 64), the product bytes (any, as the block stores them) and u32 quantity (1
 * + % 2^31-1), encoded canonically into items. */
static void extras_take(struct fuzz_input *r, uint8_t *items, struct ds_event *e)
{
    uint8_t flags = fuzz_take_u8(r);
    e->retract = (flags & 8u) != 0;
    if (flags & 1u) {
        uint32_t v = (uint32_t)fuzz_take_le(r, 4);
        e->has_version = true;
        e->version = flags & 2u ? INT64_MAX - (int64_t)v : (int64_t)v;
    }
    if ((flags & 4u) == 0) {
        return;
    }
    size_t count = fuzz_take_u8(r) % (DS_ITEMS_COUNT_MAX + 1u);
    size_t n = 0;
    items[n++] = (uint8_t)count;
    for (size_t i = 0; i < count; i++) {
        uint8_t len = (uint8_t)(1u + fuzz_take_u8(r) % DS_ITEM_PRODUCT_BYTES_MAX);
        items[n++] = len;
        for (uint8_t j = 0; j < len; j++) {
            items[n++] = fuzz_take_u8(r);
        }
        uint32_t quantity = 1u + (uint32_t)fuzz_take_le(r, 4) % DS_ITEM_QUANTITY_MAX;
        for (; quantity >= 0x80u; quantity >>= 7) {
            items[n++] = (uint8_t)(quantity | 0x80u);
        }
        items[n++] = (uint8_t)quantity;
    }
    check(n <= DS_ITEMS_BYTES_MAX);
    e->items = items;
    e->items_bytes = (uint16_t)n;
}

/* An event: u8 kinds (order id string bit 0, large bit 1; customer bits 2, 3; status index
 * bits 4..6; extras bit 7), the ids, u32 ms into the day, u32 amount (bit 31 scales it up to
 * the extremes), then the extras when bit 7 is set. */
static void event_take(struct fuzz_input *r, int64_t day_start_ms, uint8_t *items,
                       struct ds_event *e)
{
    static const char *const statuses[] = {"paid", "shipped", "cancelled", "refunded",
                                           "",     "x",       "\xff\x00z", "pending"};
    static const uint8_t status_lens[] = {4, 7, 9, 8, 0, 1, 3, 7};
    uint8_t kinds = fuzz_take_u8(r);
    id_take(r, kinds, &e->order_id);
    id_take(r, (uint8_t)(kinds >> 2), &e->customer_id);
    e->ts_ms = day_start_ms + (int64_t)((uint32_t)fuzz_take_le(r, 4) % DS_DAY_MS);
    uint32_t amount = (uint32_t)fuzz_take_le(r, 4);
    e->amount_units = (int64_t)(int32_t)amount;
    if (amount & 0x80000000u) {
        e->amount_units *= (int64_t)1 << 31; /* near INT64_MIN and INT64_MAX */
    }
    uint8_t s = (uint8_t)((kinds >> 4) & 7u);
    e->status_len = status_lens[s];
    memcpy(e->status, statuses[s], e->status_len);
    e->has_version = false;
    e->retract = false;
    e->version = 0;
    e->items = NULL;
    e->items_bytes = 0;
    if (kinds & 0x80u) {
        extras_take(r, items, e);
    }
}

/* Applies the mutations of r to buf[lo..hi): offset u16, xor u8 each; returns how many. */
static uint32_t mutate(struct fuzz_input *r, uint8_t *buf, size_t lo, size_t hi)
{
    uint32_t n = 0;
    while (hi > lo && r->p + 3 <= r->end && n < MUTATIONS_MAX) {
        size_t at = fuzz_take_u8(r);
        at |= (size_t)fuzz_take_u8(r) << 8;
        buf[lo + at % (hi - lo)] ^= fuzz_take_u8(r);
        n++;
    }
    return n;
}

/* Recomputes both CRCs over what the (perhaps mutated) header claims, when it lies inside the
 * buffer's capacity bytes. */
static void crc_fix(uint8_t *block, size_t capacity)
{
    struct block_header h;
    memcpy(&h, block, sizeof(h));
    if (h.header_bytes >= sizeof(h) && (size_t)h.header_bytes + h.payload_bytes <= capacity) {
        h.payload_crc = ds_crc32c(0, block + h.header_bytes, h.payload_bytes);
        h.header_crc = 0;
        memcpy(block, &h, sizeof(h));
        h.header_crc = ds_crc32c(0, block, h.header_bytes);
        memcpy(block, &h, sizeof(h));
    }
}

/* Decompresses the payload, mutates the columns, compresses them again in place of the old
 * payload (the block has room: block_seal_bound) and sets payload_bytes. */
static void columns_mutate(struct fuzz_input *r, uint8_t *block, size_t capacity)
{
    struct block_header h;
    memcpy(&h, block, sizeof(h));
    struct block_codec *codec = codec_get();
    size_t raw_len = ZSTD_decompressDCtx(codec->zstd_dctx, codec->raw, codec->raw_capacity,
                                         block + h.header_bytes, h.payload_bytes);
    check(!ZSTD_isError(raw_len) && raw_len == h.raw_bytes);
    /* Column lengths and the scale live in the first 25 bytes (33 in a version 2 or 3 block,
     * 41 in a version 4 one): aim a third of the mutations there. */
    size_t preamble = h.version == BLOCK_VERSION           ? 25u
                      : h.version == BLOCK_VERSION_SOURCES ? 41u
                                                           : 33u;
    if (fuzz_take_u8(r) % 3u == 0) {
        (void)mutate(r, codec->raw, 0, raw_len < preamble ? raw_len : preamble);
    } else {
        (void)mutate(r, codec->raw, 0, raw_len);
    }
    size_t z = ZSTD_compressCCtx(codec->zstd_cctx, block + h.header_bytes,
                                 capacity - h.header_bytes, codec->raw, raw_len, 1);
    check(!ZSTD_isError(z));
    h.payload_bytes = (uint32_t)z;
    memcpy(block, &h, sizeof(h));
}

static void structured_run(uint8_t mode, const uint8_t *data, size_t size, struct events *ev)
{
    struct fuzz_input r = {data, data + size};
    ev->day_start_ms = (int64_t)FUZZ_DAY * DS_DAY_MS;
    uint32_t want = fuzz_take_u8(&r) % 64u;
    uint8_t multiplier = fuzz_take_u8(&r);
    want = 1u + want * (multiplier & 1u ? 8u : 1u);
    bool row_sources = (multiplier & 2u) != 0; /* the events model: version 4 blocks */
    struct open_block ob = {0};
    open_block_reset(&ob);
    ev->count = 0;
    for (uint32_t i = 0; i < want && i < EVENTS_MAX; i++) {
        struct ds_event *e = &ev->items[ev->count];
        event_take(&r, ev->day_start_ms, ev->item_buffers[ev->count], e);
        uint8_t kind = fuzz_take_u8(&r);
        struct ds_source source = {.partition = (int32_t)(kind % 3u), .offset = i};
        bool none = false;
        if (row_sources) {
            /* Rows without a source, file lines and offsets far apart, as well. */
            none = (kind & 0x80u) != 0;
            source.partition = kind & 0x40u ? DS_SOURCE_FILE : source.partition;
            source.offset += kind & 0x20u ? (int64_t)1 << 40 : 0;
        }
        ev->sources[ev->count] =
            row_sources && !none ? source : (struct ds_source){.partition = BLOCK_SOURCE_NONE};
        int rc =
            open_block_add(&ob, e, none ? NULL : &source, row_sources, STORAGE_BLOCK_EVENTS_MAX);
        if (rc == -DS_ELIMIT) {
            /* Only the items cap can refuse here: the writer would seal and start a new block. */
            check(ob.items_bytes + e->items_bytes > BLOCK_ITEMS_BYTES_MAX);
            break;
        }
        check(rc == 0);
        ev->count++;
    }
    for (uint32_t i = 0; i < ev->count && ob.sourced_count == 0; i++) {
        /* No row with a Kafka source: the block is of an older version, keeping none. */
        ev->sources[i].partition = BLOCK_SOURCE_NONE;
    }
    size_t capacity = block_seal_bound(&ob);
    uint8_t *block = calloc(1, capacity); /* zeros: a mutated length reads no garbage */
    check(block != NULL);
    int64_t len = block_seal(codec_get(), &ob, ev->day_start_ms, block, capacity);
    check(len > 0 && (size_t)len <= capacity);
    open_block_free(&ob);

    /* The sealed block, unmutated, in a buffer of its exact length: a perfect round trip. */
    uint8_t *exact = malloc((size_t)len);
    check(exact != NULL);
    memcpy(exact, block, (size_t)len);
    ev->compare = true;
    check(block_read(exact, (size_t)len, ev) == 0 && ev->seen == ev->count);
    free(exact);

    struct block_header h;
    memcpy(&h, block, sizeof(h));
    uint32_t target = mode & 3u;
    if (target == MODE_HEADER) {
        (void)mutate(&r, block, 0, h.header_bytes);
    } else if (target == MODE_PAYLOAD) {
        (void)mutate(&r, block, h.header_bytes, (size_t)len);
    } else {
        columns_mutate(&r, block, capacity);
    }
    if (mode & MODE_FIX_CRC) {
        crc_fix(block, capacity);
    }
    memcpy(&h, block, sizeof(h));
    size_t total = (size_t)h.header_bytes + h.payload_bytes;
    if (h.header_bytes < sizeof(h) || total > capacity) {
        total = target == MODE_COLUMNS ? capacity : (size_t)len;
    }
    exact = malloc(total);
    check(exact != NULL);
    memcpy(exact, block, total);
    ev->compare = false;
    (void)block_read(exact, total, ev);
    free(exact);
    free(block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    static struct events ev; /* ~3.7 MB with the item buffers: off the stack */
    uint8_t mode = data[0];
    if ((mode & 3u) == MODE_RAW) {
        raw_run(data + 1, size - 1, &ev);
    } else {
        structured_run(mode, data + 1, size - 1, &ev);
    }
    return 0;
}
