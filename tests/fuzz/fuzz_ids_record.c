/*
 * libFuzzer harness for the orders-by-id store's record codec (storage/ids.c): DIR/ids/log is
 * outside input after a crash or a bad disk, and every record below the committed length is
 * decoded at open and at each lookup.
 *
 * Input: a mode byte (mode % 2), then the rest:
 *   MODE_BYTES  the rest is a record, in a buffer of its exact length: ids_record_decode returns
 *               0 or -DS_ECORRUPT; on 0 the record is valid, its items lie inside the input,
 *               and encoding it gives a record no longer than the input that decodes to the
 *               same fields (and encodes to the same bytes again).
 *   MODE_MADE   a record built from the rest (ids, version, ts, shard, amount, versions seen,
 *               source partition, status, items, tombstone or not): when ids_record_valid accepts
 * it, it encodes and decodes back to the same fields, and every shorter prefix of its bytes is
 * refused. Properties, any broken one aborts.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/ids.h"
#include "storage/storage.h"
#include "tests/fuzz/fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MODE_BYTES, MODE_MADE, MODE_COUNT };

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

static bool id_same(const struct ds_id *a, const struct ds_id *b)
{
    return a->is_string == b->is_string && a->len == b->len && a->value == b->value &&
           memcmp(a->text, b->text, a->len) == 0;
}

static bool order_same(const struct storage_order *a, const struct storage_order *b)
{
    return id_same(&a->order_id, &b->order_id) && id_same(&a->customer_id, &b->customer_id) &&
           a->has_version == b->has_version && a->version == b->version && a->ts_ms == b->ts_ms &&
           a->day == b->day && a->shard == b->shard && a->status_len == b->status_len &&
           memcmp(a->status, b->status, a->status_len) == 0 && a->amount_units == b->amount_units &&
           a->items_bytes == b->items_bytes && (a->items == NULL) == (b->items == NULL) &&
           (a->items_bytes == 0 || memcmp(a->items, b->items, a->items_bytes) == 0) &&
           a->versions_seen == b->versions_seen && a->source_partition == b->source_partition;
}

static uint8_t encoded[IDS_RECORD_BYTES_MAX];
static uint8_t again[IDS_RECORD_BYTES_MAX];

/* rec decoded or built and valid: encode, decode, compare; returns the encoded size. */
static size_t round_trip(const struct storage_order *rec, bool tombstone)
{
    size_t n = ids_record_encode(rec, tombstone, encoded);
    check(n > 0 && n % 4 == 0 && n <= IDS_RECORD_BYTES_MAX);
    struct storage_order back;
    bool back_tombstone = !tombstone;
    check(ids_record_decode(encoded, n, &back, &back_tombstone) == 0);
    check(order_same(rec, &back) && back_tombstone == tombstone);
    check(ids_record_encode(&back, tombstone, again) == n && memcmp(encoded, again, n) == 0);
    return n;
}

static void read_id(struct fuzz_input *in, struct ds_id *id)
{
    memset(id, 0, sizeof(*id));
    uint8_t kind = fuzz_take_u8(in);
    if (kind & 1u) {
        id->is_string = true;
        id->len = (uint8_t)(kind >> 1);
        for (uint8_t i = 0; i < id->len && i < DS_ID_BYTES_MAX; i++) {
            id->text[i] = (char)fuzz_take_u8(in);
        }
    } else {
        id->value = (int64_t)fuzz_take_le(in, 8);
    }
}

static void made(struct fuzz_input *in)
{
    static uint8_t items[DS_ITEMS_BYTES_MAX];
    struct storage_order rec = {0};
    read_id(in, &rec.order_id);
    read_id(in, &rec.customer_id);
    uint8_t flags = fuzz_take_u8(in);
    rec.has_version = flags & 1u;
    rec.version = rec.has_version ? (int64_t)fuzz_take_le(in, 8) : 0;
    rec.ts_ms = (int64_t)fuzz_take_le(in, 6);
    rec.day = ds_day_from_ms(rec.ts_ms);
    rec.shard = (uint32_t)fuzz_take_le(in, flags & 2u ? 4 : 1);
    rec.amount_units = (int64_t)fuzz_take_le(in, 8);
    rec.versions_seen = (uint32_t)fuzz_take_le(in, 4);
    rec.source_partition = (int32_t)(uint32_t)fuzz_take_le(in, flags & 8u ? 4 : 1);
    rec.status_len = (uint8_t)(fuzz_take_u8(in) % (DS_STATUS_BYTES_MAX + 2));
    for (uint8_t i = 0; i < rec.status_len && i < DS_STATUS_BYTES_MAX; i++) {
        rec.status[i] = (char)fuzz_take_u8(in);
    }
    if (flags & 4u) {
        rec.items_bytes = (uint16_t)(fuzz_take_le(in, 2) % (DS_ITEMS_BYTES_MAX + 2));
        for (uint16_t i = 0; i < rec.items_bytes && i < DS_ITEMS_BYTES_MAX; i++) {
            items[i] = fuzz_take_u8(in);
        }
        rec.items = items;
    }
    if (!ids_record_valid(&rec)) {
        return;
    }
    size_t n = round_trip(&rec, (flags & 16u) != 0);
    static uint8_t prefix[IDS_RECORD_BYTES_MAX];
    size_t length = n;
    while (length > 0 && encoded[length - 1] == 0) {
        length--; /* the padding is not part of the record */
    }
    for (size_t cut = 0; cut + 4 <= length; cut += 1 + cut / 8) {
        memcpy(prefix, encoded, cut);
        struct storage_order out;
        bool dead = false;
        check(ids_record_decode(prefix, cut, &out, &dead) != 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    struct fuzz_input in = {.p = data + 1, .end = data + size};
    if (data[0] % MODE_COUNT == MODE_MADE) {
        made(&in);
        return 0;
    }
    size_t len = size - 1;
    uint8_t *buf = malloc(len > 0 ? len : 1);
    check(buf != NULL);
    memcpy(buf, data + 1, len);
    struct storage_order rec;
    bool tombstone = false;
    int rc = ids_record_decode(buf, len, &rec, &tombstone);
    check(rc == 0 || rc == -DS_ECORRUPT);
    if (rc == 0) {
        check(ids_record_valid(&rec));
        check(rec.items == NULL || (rec.items >= buf && rec.items + rec.items_bytes <= buf + len));
        check(round_trip(&rec, tombstone) <= ((len + 3u) & ~(size_t)3u));
    }
    free(buf);
    return 0;
}
