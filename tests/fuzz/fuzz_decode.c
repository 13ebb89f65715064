/*
 * libFuzzer harness for ingest_decode, the parser of outside bytes on the hot path.
 *
 * Any input: the decoder must not crash, read out of bounds or trip a sanitizer, and a rejection
 * must name a real reason at an offset inside the input. An accepted input: the canonical line
 * from ingest_event_format_json must decode to the identical event, and formatting that event
 * again must give the same bytes, and ingest_decode_order_id (the producer's key) must return the
 * same order_id. ingest_decoder_decode gives the same verdict and reason, and its canonical
 * items are well formed (count <= 100, products of 1..64 bytes, quantities 1..2^31-1, nothing
 * left over). Any broken property aborts, so libFuzzer keeps the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
           a->has_version == b->has_version && a->version == b->version;
}

/* The canonical items of an accepted event are well formed (common/common.h). */
static void check_items(const struct ds_event *event)
{
    if (event->items_bytes == 0) {
        if (event->items != NULL) {
            abort();
        }
        return;
    }
    const uint8_t *p = event->items;
    const uint8_t *end = p + event->items_bytes;
    if (event->items_bytes > DS_ITEMS_BYTES_MAX || *p > DS_ITEMS_COUNT_MAX) {
        abort();
    }
    for (uint8_t i = 0, count = *p++; i < count; i++) {
        if (p >= end || *p == 0 || *p > DS_ITEM_PRODUCT_BYTES_MAX || end - p < 1 + *p) {
            abort();
        }
        p += 1 + *p;
        uint64_t quantity = 0;
        for (unsigned shift = 0; p < end && shift <= 28; shift += 7) {
            quantity |= (uint64_t)(*p & 0x7fu) << shift;
            if ((*p++ & 0x80u) == 0) {
                break;
            }
        }
        if (quantity == 0 || quantity > DS_ITEM_QUANTITY_MAX) {
            abort();
        }
    }
    if (p != end) {
        abort();
    }
}

static void check_rejection(const struct ingest_error *error, size_t size)
{
    if (error->reason == INGEST_OK || error->reason >= INGEST_REASON_COUNT ||
        error->byte_offset > (size > INGEST_EVENT_BYTES_MAX ? INGEST_EVENT_BYTES_MAX : size)) {
        abort();
    }
}

static void check_round_trip(const struct ds_event *event)
{
    char line[INGEST_JSON_LINE_BYTES_MAX];
    int len = ingest_event_format_json(event, line, sizeof(line));
    if (len <= 0 || (size_t)len > sizeof(line)) {
        abort();
    }
    struct ds_event back;
    struct ingest_error error;
    if (ingest_decode(line, (size_t)len, &back, &error) != 0 || !event_equal(event, &back)) {
        abort();
    }
    char again[INGEST_JSON_LINE_BYTES_MAX];
    if (ingest_event_format_json(&back, again, sizeof(again)) != len ||
        memcmp(line, again, (size_t)len) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ds_event event;
    struct ingest_error error;
    static struct ingest_decoder decoder; /* a harness is the one place a mutable static is fine */
    struct ds_event kept;
    struct ingest_error kept_error;
    int kept_rc = ingest_decoder_decode(&decoder, (const char *)data, size, &kept, &kept_error);
    if (ingest_decode((const char *)data, size, &event, &error) != 0) {
        check_rejection(&error, size);
        if (kept_rc == 0 || kept_error.reason != error.reason ||
            kept_error.byte_offset != error.byte_offset) {
            abort();
        }
        struct ds_id key;
        (void)ingest_decode_order_id((const char *)data, size, &key); /* any answer, no crash */
        return 0;
    }
    if (kept_rc != 0 || !event_equal(&event, &kept)) {
        abort();
    }
    check_items(&kept);
    check_round_trip(&event);
    struct ds_id key;
    if (ingest_decode_order_id((const char *)data, size, &key) != 0 ||
        !id_equal(&key, &event.order_id)) {
        abort();
    }
    return 0;
}
