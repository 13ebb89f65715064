/*
 * Writes the seed corpora of the fuzz targets block, manifest, index_cursor and http_request,
 * with the project's own encoders, so the seeds are real blocks, manifests and tokens rather
 * than bytes typed by hand. Run it when a format changes; the files are committed:
 *   build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
 * Each file is the harness's mode byte(s) followed by its input (see each fuzz_<name>.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_private.h"
#include "storage/format.h"

#define FUZZ_DAY 19000
#define SEED_BYTES_MAX (256u * 1024u)

static void seed_write(const char *root, const char *target, const char *name, uint8_t mode,
                       const void *bytes, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(&mode, 1, 1, file) != 1 ||
        (len > 0 && fwrite(bytes, 1, len, file) != len) || fclose(file) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Event i of a small realistic block: ids, statuses and hours vary as in the fixtures. */
static void event_make(uint32_t i, bool strings, struct ds_event *e)
{
    static const char *const statuses[] = {"paid", "shipped", "cancelled", "refunded"};
    memset(e, 0, sizeof(*e));
    if (strings && i % 3 == 0) {
        e->order_id.is_string = true;
        e->order_id.len = (uint8_t)snprintf(e->order_id.text, sizeof(e->order_id.text), "o-%u", i);
    } else {
        e->order_id.value = 1000 + i * 7;
    }
    if (strings && i % 2 == 0) {
        e->customer_id.is_string = true;
        memcpy(e->customer_id.text, "c\0\xff", 3); /* a NUL and a 0xff inside */
        e->customer_id.len = 3;
    } else {
        e->customer_id.value = 1 + i % 5;
    }
    e->ts_ms = (int64_t)FUZZ_DAY * DS_DAY_MS + (int64_t)(i * 2654435761u % DS_DAY_MS);
    e->amount_units = i % 4 == 3 ? -12500 : 100 * (int64_t)(i + 1);
    const char *s = statuses[i % 4];
    e->status_len = (uint8_t)strlen(s);
    memcpy(e->status, s, e->status_len);
}

/* Version 4 (the events model keeps each row's source): a raw block of rows from two Kafka
 * partitions, a file line and a row without a source, one retracted; and the structured
 * description of block_seeds with bit 1 of its multiplier byte set (rows keep their sources). */
static void block_seeds_sources(const char *root, struct block_codec *codec, uint8_t *block)
{
    struct open_block ob = {0};
    open_block_reset(&ob);
    for (uint32_t i = 0; i < 24; i++) {
        struct ds_event e;
        event_make(i, true, &e);
        e.retract = i == 5;
        struct ds_source source = {.partition = (int32_t)(i % 2), .offset = 500 + i / 2};
        if (i == 7) {
            source = (struct ds_source){.partition = DS_SOURCE_FILE, .offset = 3};
        }
        if (open_block_add(&ob, &e, i == 11 ? NULL : &source, true, STORAGE_BLOCK_EVENTS_MAX) !=
            0) {
            exit(1);
        }
    }
    int64_t len = block_seal(codec, &ob, (int64_t)FUZZ_DAY * DS_DAY_MS, block, SEED_BYTES_MAX);
    if (len <= 0) {
        exit(1);
    }
    seed_write(root, "block", "raw_sealed_24_events_v4", 0x00, block, (size_t)len);
    open_block_free(&ob);
    /* Count 6, multiplier byte 2 (row sources), then six events as in block_seeds; the
     * partition bytes 0x00, 0x01, 0x42 (a file line), 0x80 (none), 0x21 (far), 0x02. */
    static const uint8_t sourced[] = {
        6, 2,    0x00, 1, 0,    0,    0, 2,    0,    0,    0,   0x10, 0x27, 0, 0, 0xe8, 3,    0,
        0, 0x00, 0x00, 1, 0,    0,    0, 3,    0,    0,    0,   0x20, 0x4e, 0, 0, 0xd0, 7,    0,
        0, 0x01, 0x00, 2, 0,    0,    0, 4,    0,    0,    0,   0x30, 0x75, 0, 0, 0xb8, 0x0b, 0,
        0, 0x42, 0x00, 3, 0,    0,    0, 5,    0,    0,    0,   0x40, 0x9c, 0, 0, 0xa0, 0x0f, 0,
        0, 0x80, 0x00, 4, 0,    0,    0, 6,    0,    0,    0,   0x50, 0xc3, 0, 0, 0x88, 0x13, 0,
        0, 0x21, 0x00, 5, 0,    0,    0, 7,    0,    0,    0,   0x60, 0xea, 0, 0, 0x70, 0x17, 0,
        0, 0x02, 0x10, 0, 0x01, 0x31, 0, 0x04, 0x18, 0x00, 0x80};
    static const uint8_t modes[] = {0x01, 0x03, 0x07};
    for (size_t k = 0; k < DS_ARRAY_LEN(modes); k++) {
        char name[64];
        snprintf(name, sizeof(name), "structured_sources_%02x", modes[k]);
        seed_write(root, "block", name, modes[k], sourced, sizeof(sourced));
    }
}

static void block_seeds(const char *root)
{
    struct block_codec codec;
    if (block_codec_init(&codec, 1) != 0) {
        exit(1);
    }
    static const uint32_t counts[] = {1, 5, 40};
    uint8_t *block = malloc(SEED_BYTES_MAX);
    for (size_t k = 0; k < DS_ARRAY_LEN(counts); k++) {
        struct open_block ob = {0};
        open_block_reset(&ob);
        for (uint32_t i = 0; i < counts[k]; i++) {
            struct ds_event e;
            event_make(i, k > 0, &e);
            struct ds_source source = {.partition = 0, .offset = i};
            if (open_block_add(&ob, &e, &source, false, STORAGE_BLOCK_EVENTS_MAX) != 0) {
                exit(1);
            }
        }
        int64_t len = block_seal(&codec, &ob, (int64_t)FUZZ_DAY * DS_DAY_MS, block, SEED_BYTES_MAX);
        if (len <= 0) {
            exit(1);
        }
        char name[64];
        snprintf(name, sizeof(name), "raw_sealed_%u_events", counts[k]);
        seed_write(root, "block", name, 0x00, block, (size_t)len);
        open_block_free(&ob);
    }
    /* Structured descriptions: count, multiplier, then events (kinds, ids, ms, amount,
     * partition); the tail bytes are mutations. One per mode, with and without CRC repair. */
    static const uint8_t events[] = {
        6,    0, /* six events */
        0x00, 1, 0,    0,    0,    2,    0,    0,    0,    0x10, 0x27, 0,    0,    0xe8, 3,    0,
        0,    0, 0x35, 3,    0x61, 0x62, 0x63, 0x40, 0x42, 0x0f, 0,    0x18, 0xfc, 0xff, 0xff, 1,
        0x0a, 7, 0,    0,    0,    9,    0,    0,    0,    0x80, 0xee, 0x36, 0,    0x01, 0,    0,
        0x80, 2, 0x0f, 0,    0,    0,    0,    0x20, 0x00, 0,    0,    0,    0,    0,    0,    0,
        0,    0, 0x01, 0,    0,    0,    0,    0x01, 0,    0,    0,    0,    0,    0,    0,    0,
        0,    0, 0,    0,    0,    0x7f, 0xff, 0xff, 0x00, 0,    0,    0,    0,    0,    0,    0,
        0,    0, 0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
        0x10, 0, 0x01, 0x31, 0,    0x04, 0x18, 0x00, 0x80};
    static const uint8_t modes[] = {0x01, 0x02, 0x03, 0x05, 0x06, 0x07};
    for (size_t k = 0; k < DS_ARRAY_LEN(modes); k++) {
        char name[64];
        snprintf(name, sizeof(name), "structured_mode_%02x", modes[k]);
        seed_write(root, "block", name, modes[k], events, sizeof(events));
    }
    /* Two events with extras (kinds bit 7): a version 7 and two items ("Pen" x2, "Ink" x300),
     * then a large version alone; the tail mutates the columns behind repaired CRCs. */
    static const uint8_t extras[] = {
        1,    0, /* two events (1 + 1) */
        0x80, 5,    0,   0,    0,    6, 0, 0, 0,
        0x10, 0x27, 0,   0,    0xe8, 3, 0, 0, /* ids, ms, amount */
        0x05, 7,    0,   0,    0,    2,       /* version 7, two items */
        2,    'P',  'e', 'n',  1,    0, 0, 0, 2,
        'I',  'n',  'k', 0x2b, 1,    0, 0, 0, /* partition */
        0x90, 9,    0,   0,    0,    9, 0, 0, 0,
        0x20, 0x4e, 0,   0,    0x10, 0, 0, 0, /* ids, ms, amount */
        0x03, 1,    0,   0,    0,    1,       /* version INT64_MAX - 1, partition */
        0x21, 0x00, 0x01};
    seed_write(root, "block", "structured_extras_07", 0x07, extras, sizeof(extras));
    seed_write(root, "block", "structured_extras_01", 0x01, extras, sizeof(extras));
    struct open_block ob = {0};
    open_block_reset(&ob);
    static const uint8_t items[] = {2, 3, 'P', 'e', 'n', 2, 3, 'I', 'n', 'k', 0xac, 0x02};
    for (uint32_t i = 0; i < 8; i++) {
        struct ds_event e;
        event_make(i, true, &e);
        e.has_version = i % 2 == 0;
        e.version = e.has_version ? (int64_t)i + 1 : 0;
        e.items = i % 3 == 0 ? items : NULL;
        e.items_bytes = i % 3 == 0 ? sizeof(items) : 0;
        struct ds_source source = {.partition = 0, .offset = i};
        if (open_block_add(&ob, &e, &source, false, STORAGE_BLOCK_EVENTS_MAX) != 0) {
            exit(1);
        }
    }
    int64_t len = block_seal(&codec, &ob, (int64_t)FUZZ_DAY * DS_DAY_MS, block, SEED_BYTES_MAX);
    if (len <= 0) {
        exit(1);
    }
    seed_write(root, "block", "raw_sealed_8_events_v2", 0x00, block, (size_t)len);
    open_block_free(&ob);
    block_seeds_sources(root, &codec, block);
    free(block);
    block_codec_deinit(&codec);
}

static size_t manifest_file(uint8_t *dst, size_t cap, bool torn)
{
    uint64_t magic = MANIFEST_FILE_MAGIC;
    memcpy(dst, &magic, sizeof(magic));
    size_t len = sizeof(magic);
    struct manifest_part parts[3] = {
        {.day = FUZZ_DAY, .shard = 0, .segment_id = 1, .end = 4096},
        {.day = FUZZ_DAY, .shard = 1, .segment_id = 1, .end = 64},
        {.day = FUZZ_DAY + 1, .shard = 0, .segment_id = 2, .end = 900}};
    struct manifest_source sources[2] = {{.partition = 0, .next_offset = 120},
                                         {.partition = DS_SOURCE_FILE, .next_offset = 7}};
    int64_t n = manifest_encode(MANIFEST_SNAPSHOT, 10, parts, 2, sources, 2, dst + len, cap - len);
    len += (size_t)n;
    n = manifest_encode(MANIFEST_DELTA, 11, parts + 2, 1, sources, 1, dst + len, cap - len);
    len += (size_t)n;
    n = manifest_encode(MANIFEST_DELTA, 12, NULL, 0, sources + 1, 1, dst + len, cap - len);
    len += (size_t)n;
    return torn ? len - 5 : len;
}

static void manifest_seeds(const char *root)
{
    uint8_t file[4096];
    size_t len = manifest_file(file, sizeof(file), false);
    seed_write(root, "manifest", "raw_three_records", 0x00, file, len);
    len = manifest_file(file, sizeof(file), true);
    seed_write(root, "manifest", "raw_torn_tail", 0x00, file, len);
    file[7] = '2'; /* "DSMANIF2": another format version */
    seed_write(root, "manifest", "raw_other_version", 0x00, file, 8);
    seed_write(root, "manifest", "raw_empty", 0x00, NULL, 0);
    /* Structured: record count, seq base, then per record head, step, parts, sources. */
    static const uint8_t desc[] = {
        3, 0x00, 0x07, 1, 0x50, 0x4a, 0, 0,    0,    1,    0, 0,    0,    0x10, 0, 0,
        0, 0,    0,    0, 0,    0,    0, 0x40, 0,    0,    0, 0,    0,    0,    0, 0x02,
        1, 0x4b, 0x4a, 0, 0,    2,    2, 0,    0x10, 0x10, 0, 0,    0,    0x20, 5, 0,
        0, 0,    0,    9, 0,    0,    0, 0,    0x33, 0x00, 0, 0x20, 0x44, 0x01};
    static const uint8_t modes[] = {0x01, 0x03, 0x05, 0x07};
    for (size_t k = 0; k < DS_ARRAY_LEN(modes); k++) {
        char name[64];
        snprintf(name, sizeof(name), "structured_mode_%02x", modes[k]);
        seed_write(root, "manifest", name, modes[k], desc, sizeof(desc));
    }
}

static void index_cursor_seeds(const char *root)
{
    struct ds_id ids[3] = {{.value = 42},
                           {.is_string = true, .len = 5, .text = "o-123"},
                           {.is_string = true, .len = 3, .text = "a\0\xff"}};
    static const char *const names[] = {"int", "string", "string_escapes"};
    for (size_t k = 0; k < DS_ARRAY_LEN(ids); k++) {
        uint8_t key[INDEX_TAIL_BYTES_MAX];
        size_t n = index_key_tail_encode((int64_t)FUZZ_DAY * DS_DAY_MS + 1234, &ids[k], key);
        char token[INDEX_TOKEN_CHARS_MAX + 1];
        index_key_hex_encode(key, n, token);
        char name[64];
        snprintf(name, sizeof(name), "token_%s", names[k]);
        seed_write(root, "index_cursor", name, 0x00, token, strlen(token));
        snprintf(name, sizeof(name), "tail_%s", names[k]);
        seed_write(root, "index_cursor", name, 0x01, key, n);
    }
    static const uint8_t made[] = {0x80, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0, 0x01, 5, 'x', 0, 'y'};
    seed_write(root, "index_cursor", "tail_made", 0x02, made, sizeof(made));
    /* The builder's cursor: "GSC1", u64 seq, u32 count, (i32 day, u32 shard, u32 segment, u64
     * offset) per partition, little-endian, sorted by (day, shard). */
    uint8_t cursor[16 + 3 * 20] = {'G', 'S', 'C', '1', 77, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0};
    static const uint32_t positions[3][4] = {
        {FUZZ_DAY, 0, 1, 4096}, {FUZZ_DAY, 3, 2, 72}, {FUZZ_DAY + 1, 0, 1, 1 << 20}};
    for (size_t i = 0; i < 3; i++) {
        uint8_t *p = cursor + 16 + i * 20;
        memcpy(p, &positions[i][0], 4);
        memcpy(p + 4, &positions[i][1], 4);
        memcpy(p + 8, &positions[i][2], 4);
        uint64_t offset = positions[i][3];
        memcpy(p + 12, &offset, 8);
    }
    seed_write(root, "index_cursor", "builder_three", 0x03, cursor, sizeof(cursor));
    cursor[12] = 0;
    seed_write(root, "index_cursor", "builder_empty", 0x03, cursor, 16);
    static const uint8_t built[] = {9,    0, 0, 0,    0, 0, 0, 0, 3, 0x10, 0x4a,
                                    2,    1, 0, 0,    0, 0, 0, 0, 0, 0,    0x10,
                                    0x4a, 1, 1, 0x40, 0, 0, 0, 0, 0, 0,    0};
    seed_write(root, "index_cursor", "builder_made", 0x04, built, sizeof(built));
}

/* Requests of the unit tests (tests/unit/query/test_serve_request.c), good and bad: byte 0
 * picks range_days_max (24: 361 days), byte 1 the method (0 GET, 1 HEAD, 2 POST, 3 the text up
 * to a newline). */
static void http_request_seeds(const char *root)
{
    static const struct {
        const char *name;
        uint8_t range;
        uint8_t method;
        const char *target;
    } seeds[] = {
        {"count_full", 24, 0, "/v1/count?day=2026-01-21&to=2026-01-23&status=pa%69d&by=hour"},
        {"count_plus_head", 24, 1, "/v1/count?day=2026-01-21&status=a+b"},
        {"count_range_long", 24, 0, "/v1/count?day=2025-01-01&to=2026-01-02"},
        {"count_repeated", 24, 0, "/v1/count?day=2026-01-21&day=2026-01-22"},
        {"count_bad_escape", 24, 0, "/v1/count?day=2026-01-21&status=%4"},
        {"count_many", 24, 0, "/v1/count?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9"},
        {"partitions", 24, 0, "/v1/partitions?day=2026-01-21"},
        {"orders", 24, 0, "/v1/customers/c%2042/orders?limit=5&consistent=true"},
        {"orders_cursor", 24, 0,
         "/v1/customers/%2242%22/orders?cursor=fffffe3ccb7a2f2dfeffffffffffffffd5"},
        {"heat", 24, 0, "/v1/heat?top=64"},
        {"metrics_post", 24, 2, "/metrics"},
        {"method_other", 24, 3, "DELETE\n/healthz"},
        {"readyz", 1, 0, "/readyz"},
        {"nul_path", 24, 0, "/v1/co%00unt"},
    };
    for (size_t k = 0; k < DS_ARRAY_LEN(seeds); k++) {
        uint8_t bytes[256];
        size_t len = strlen(seeds[k].target);
        bytes[0] = seeds[k].method;
        memcpy(bytes + 1, seeds[k].target, len);
        seed_write(root, "http_request", seeds[k].name, seeds[k].range, bytes, len + 1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_ROOT (tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    block_seeds(argv[1]);
    manifest_seeds(argv[1]);
    index_cursor_seeds(argv[1]);
    http_request_seeds(argv[1]);
    return 0;
}
