/*
 * libFuzzer harness for the two cursors of the by-customer index:
 *   - the page token of /v1/customers/{id}/orders ("next" in an answer, ?cursor= in the next
 *     request: outside input), decoded by index_key_token_decode into a tail key (index/key.c), and
 *     the tail key itself, which index_key_tail_decode also reads back from the index's log;
 *   - the builder's cursor (index/builder.c: "GSC1", commit sequence, partition positions),
 *     stored in the index's log by index_apply and decoded by cursor_load after a restart.
 *
 * Input: a mode byte (mode % 5), then the rest:
 *   MODE_TOKEN     the rest is a token; when it decodes, the tail key decodes to (ts, order id),
 *                  encoding those gives the same key, and its hex is the token itself.
 *   MODE_TAIL      the rest is a tail key in a buffer of its exact length; when it decodes,
 *                  encoding the result gives the same bytes.
 *   MODE_TAIL_MADE (ts, order id) built from the rest: the key decodes back to them, and the
 *                  token of the key decodes to the key.
 *   MODE_BUILDER   the rest is a stored builder cursor: cursor_load returns 0, -DS_ECORRUPT or
 *                  -ENOSPC; on 0 the positions are sorted without duplicates, y =
 *                  cursor_encode(positions) loads again to the same positions and encodes to y
 *                  (stable), and y is the input itself when its entries were already sorted.
 *   MODE_BUILDER_MADE positions built from the rest: encode then load gives them back.
 *
 * The builder's functions are static, so this file includes index/builder.c, with
 * index_cursor renamed to a fake that hands out the input (the harness runs no index); the rest of
 * query/ links from ds_query (its index_builder.o is never pulled: this file defines all of its
 * symbols).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_private.h"

static int fuzz_index_cursor_get(struct index *g, void *buf, size_t cap, size_t *len);
#define index_cursor fuzz_index_cursor_get
#include "index/builder.c"
#include "tests/fuzz/fuzz_input.h"
#undef index_cursor

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MODE_TOKEN 0u
#define MODE_TAIL 1u
#define MODE_TAIL_MADE 2u
#define MODE_BUILDER 3u
#define MODE_BUILDER_MADE 4u
#define MODE_COUNT 5u
#define MADE_POSITIONS_MAX 64u

/* What the fake index_cursor hands out: the harness's one mutable static. */
static struct {
    const uint8_t *bytes;
    size_t len;
} stored;

static int fuzz_index_cursor_get(struct index *g, void *buf, size_t cap, size_t *len)
{
    (void)g;
    *len = stored.len;
    if (stored.len > cap) {
        return -ENOSPC;
    }
    if (stored.len > 0) {
        memcpy(buf, stored.bytes, stored.len); /* buf may be NULL with cap 0, as index.h allows */
    }
    return 0;
}

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

static bool fuzz_id_same(const struct ds_id *a, const struct ds_id *b)
{
    return a->is_string == b->is_string && a->len == b->len && a->value == b->value &&
           memcmp(a->text, b->text, a->len) == 0;
}

/* ---- page tokens and tail keys ------------------------------------------------------------ */

static void token_run(const uint8_t *data, size_t size)
{
    char *token = malloc(size + 1);
    check(token != NULL);
    memcpy(token, data, size);
    token[size] = '\0';
    uint8_t key[INDEX_TAIL_BYTES_MAX];
    int n = index_key_token_decode(token, key);
    check(n == -DS_EUSAGE || (n > 0 && (size_t)n <= INDEX_TAIL_BYTES_MAX));
    if (n > 0) {
        int64_t ts_ms = 0;
        struct ds_id order;
        check(index_key_tail_decode(key, (size_t)n, &ts_ms, &order) == 0);
        uint8_t again[INDEX_TAIL_BYTES_MAX];
        check(index_key_tail_encode(ts_ms, &order, again) == (size_t)n);
        check(memcmp(again, key, (size_t)n) == 0);
        char hex[INDEX_TOKEN_CHARS_MAX + 1];
        index_key_hex_encode(key, (size_t)n, hex);
        check(strcmp(hex, token) == 0);
    }
    free(token);
}

static void tail_run(const uint8_t *data, size_t size)
{
    uint8_t *key = malloc(size > 0 ? size : 1); /* exact length: ASan sees a read past it */
    check(key != NULL);
    memcpy(key, data, size);
    int64_t ts_ms = 0;
    struct ds_id order;
    int rc = index_key_tail_decode(key, size, &ts_ms, &order);
    check(rc == 0 || rc == -DS_ECORRUPT);
    if (rc == 0) {
        check(ts_ms >= DS_TS_MS_MIN && ts_ms <= DS_TS_MS_MAX && index_key_id_valid(&order));
        uint8_t again[INDEX_TAIL_BYTES_MAX];
        check(index_key_tail_encode(ts_ms, &order, again) == size);
        check(memcmp(again, key, size) == 0);
    }
    free(key);
}

static void tail_made_run(const uint8_t *data, size_t size)
{
    struct fuzz_input r = {data, data + size};
    int64_t ts_ms = (int64_t)(fuzz_take_le(&r, 8) % ((uint64_t)DS_TS_MS_MAX + 1u));
    struct ds_id order = {0};
    uint8_t kind = fuzz_take_u8(&r);
    if (kind & 1u) {
        order.is_string = true;
        order.len = (uint8_t)(1u + fuzz_take_u8(&r) % DS_ID_BYTES_MAX);
        for (uint8_t i = 0; i < order.len; i++) {
            order.text[i] =
                (char)(kind & 2u ? 0x00 : fuzz_take_u8(&r)); /* all zeros: every escape */
        }
    } else {
        order.value = (int64_t)(1u + fuzz_take_le(&r, 8) % (uint64_t)INT64_MAX);
    }
    uint8_t key[INDEX_TAIL_BYTES_MAX];
    size_t n = index_key_tail_encode(ts_ms, &order, key);
    check(n > 8 && n <= INDEX_TAIL_BYTES_MAX);
    int64_t ts_back = -1;
    struct ds_id back;
    check(index_key_tail_decode(key, n, &ts_back, &back) == 0);
    check(ts_back == ts_ms && fuzz_id_same(&back, &order));
    char token[INDEX_TOKEN_CHARS_MAX + 1];
    index_key_hex_encode(key, n, token);
    uint8_t key_back[INDEX_TAIL_BYTES_MAX];
    check(index_key_token_decode(token, key_back) == (int)n);
    check(memcmp(key_back, key, n) == 0);
}

/* ---- the builder's cursor ----------------------------------------------------------------- */

static struct index_builder *builder_make(void)
{
    struct index_builder *g = calloc(1, sizeof(*g));
    check(g != NULL);
    memcpy(g->gsi_dir, "fuzz", 5);
    return g;
}

static void builder_free(struct index_builder *g)
{
    free(g->positions);
    free(g->cursor);
    free(g);
}

/* Loads bytes[0..len) as the stored cursor into a fresh builder; returns cursor_load's answer
 * and the builder (freed by the caller). */
static int builder_load(const uint8_t *bytes, size_t len, struct index_builder **out)
{
    struct index_builder *g = builder_make();
    stored.bytes = bytes;
    stored.len = len;
    int rc = cursor_load(g);
    stored.bytes = NULL;
    check(rc == 0 || rc == -DS_ECORRUPT || rc == -ENOSPC);
    if (rc == 0) {
        for (uint32_t i = 1; i < g->position_count; i++) {
            const struct builder_position *p = &g->positions[i];
            check(position_cmp(p->day, p->shard, &g->positions[i - 1]) > 0);
        }
    }
    *out = g;
    return rc;
}

static bool positions_equal(const struct index_builder *a, const struct index_builder *b)
{
    if (a->position_count != b->position_count || a->applied_seq != b->applied_seq) {
        return false;
    }
    for (uint32_t i = 0; i < a->position_count; i++) {
        const struct builder_position *p = &a->positions[i];
        const struct builder_position *q = &b->positions[i];
        if (p->day != q->day || p->shard != q->shard || p->pos.segment_id != q->pos.segment_id ||
            p->pos.offset != q->pos.offset) {
            return false;
        }
    }
    return true;
}

/* True when the entries of a cursor of the right shape are strictly sorted by (day, shard). */
static bool entries_sorted(const uint8_t *bytes, size_t len)
{
    for (size_t at = CURSOR_HEADER_BYTES + CURSOR_ENTRY_BYTES; at + CURSOR_ENTRY_BYTES <= len;
         at += CURSOR_ENTRY_BYTES) {
        struct builder_position prev = {.day =
                                            (int32_t)ds_get_le32(bytes + at - CURSOR_ENTRY_BYTES),
                                        .shard = ds_get_le32(bytes + at - CURSOR_ENTRY_BYTES + 4)};
        if (position_cmp((int32_t)ds_get_le32(bytes + at), ds_get_le32(bytes + at + 4), &prev) <=
            0) {
            return false;
        }
    }
    return true;
}

static void builder_run(const uint8_t *data, size_t size)
{
    uint8_t *bytes = malloc(size > 0 ? size : 1);
    check(bytes != NULL);
    memcpy(bytes, data, size);
    struct index_builder *g = NULL;
    if (builder_load(bytes, size, &g) == 0 && size > 0) {
        uint8_t *y = malloc(CURSOR_HEADER_BYTES + (size_t)g->position_count * CURSOR_ENTRY_BYTES);
        check(y != NULL);
        size_t y_len = cursor_encode(g, g->applied_seq, y);
        check(y_len <= size);
        check(!entries_sorted(bytes, size) || (y_len == size && memcmp(y, bytes, size) == 0));
        struct index_builder *h = NULL;
        check(builder_load(y, y_len, &h) == 0);
        check(positions_equal(g, h));
        check(cursor_encode(h, h->applied_seq, g->cursor) == y_len);
        check(memcmp(g->cursor, y, y_len) == 0);
        builder_free(h);
        free(y);
    }
    builder_free(g);
    free(bytes);
}

static void builder_made_run(const uint8_t *data, size_t size)
{
    struct fuzz_input r = {data, data + size};
    struct index_builder *g = builder_make();
    uint64_t seq = fuzz_take_le(&r, 8);
    uint32_t want = fuzz_take_u8(&r) % (MADE_POSITIONS_MAX + 1u);
    for (uint32_t i = 0; i < want; i++) {
        int32_t day = (int32_t)(fuzz_take_u8(&r) | (uint32_t)fuzz_take_u8(&r) << 8) - 100;
        uint32_t shard = fuzz_take_u8(&r);
        struct builder_position *p = position_get(g, day, shard);
        check(p != NULL);
        p->pos.segment_id = fuzz_take_u8(&r);
        p->pos.offset = fuzz_take_le(&r, 8);
    }
    g->applied_seq = seq;
    uint8_t *y = malloc(CURSOR_HEADER_BYTES + (size_t)g->position_count * CURSOR_ENTRY_BYTES);
    check(y != NULL);
    size_t y_len = cursor_encode(g, seq, y);
    check(y_len == CURSOR_HEADER_BYTES + (size_t)g->position_count * CURSOR_ENTRY_BYTES);
    struct index_builder *h = NULL;
    check(builder_load(y, y_len, &h) == 0);
    check(positions_equal(g, h));
    builder_free(h);
    builder_free(g);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    switch (data[0] % MODE_COUNT) {
    case MODE_TOKEN: token_run(data + 1, size - 1); break;
    case MODE_TAIL: tail_run(data + 1, size - 1); break;
    case MODE_TAIL_MADE: tail_made_run(data + 1, size - 1); break;
    case MODE_BUILDER: builder_run(data + 1, size - 1); break;
    default: builder_made_run(data + 1, size - 1); break;
    }
    return 0;
}
