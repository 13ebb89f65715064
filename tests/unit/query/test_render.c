/*
 * Unit tests of query/render.c's order rendering (the order lookup): canonical items (common.h) as
 * a JSON array, and the document of GET /v1/orders/{id}. Every document is parsed back with
 * libjansson (an independent JSON reader), so escaping mistakes fail as invalid JSON or wrong
 * values; every way canonical bytes can be malformed is refused as -DS_ECORRUPT, and the bounds
 * hold for the largest items there can be.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

/* Appends an LEB128 varint; returns its length. */
static size_t put_varint(uint8_t *dst, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}

/* Canonical bytes of count items from parallel arrays. */
static size_t put_items(uint8_t *dst, size_t count, const char *const *products,
                        const uint32_t *quantities)
{
    size_t n = put_varint(dst, count);
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(products[i]);
        dst[n++] = (uint8_t)len;
        memcpy(dst + n, products[i], len);
        n += len;
        n += put_varint(dst + n, quantities[i]);
    }
    return n;
}

/* Renders items and parses the text back; fails the test unless it is a JSON array. */
static json_t *items_doc(const uint8_t *items, size_t len)
{
    size_t cap = query_items_json_bound(len);
    char *text = malloc(cap);
    assert_non_null(text);
    int64_t n = query_items_json(items, len, text, cap);
    assert_true(n > 0);
    assert_int_equal(strlen(text), (size_t)n);
    json_error_t err;
    json_t *doc = json_loadb(text, (size_t)n, 0, &err);
    if (!json_is_array(doc)) {
        fail_msg("not a JSON array (%s): %s", err.text, text);
    }
    free(text);
    return doc;
}

static void test_render_items_two(void **state)
{
    /* The fixtures' order 108: two items, in their order, with their quantities. */
    (void)state;
    static const char *const products[] = {"Pen", "Notebook"};
    static const uint32_t quantities[] = {2, 1};
    uint8_t items[64];
    size_t len = put_items(items, 2, products, quantities);
    char text[256];
    assert_int_equal(query_items_json(items, len, text, sizeof(text)),
                     (int64_t)strlen("[{\"product\":\"Pen\",\"quantity\":2},"
                                     "{\"product\":\"Notebook\",\"quantity\":1}]"));
    assert_string_equal(text, "[{\"product\":\"Pen\",\"quantity\":2},"
                              "{\"product\":\"Notebook\",\"quantity\":1}]");
    /* [] is the one byte 0: an empty array, not null. */
    uint8_t empty = 0;
    assert_int_equal(query_items_json(&empty, 1, text, sizeof(text)), 2);
    assert_string_equal(text, "[]");
}

static void test_render_items_escaped(void **state)
{
    /* Products come back byte for byte through a JSON reader: quotes, backslashes, control
     * bytes and UTF-8; quantities up to the maximum (a 5-byte varint). */
    (void)state;
    static const char *const products[] = {"say \"hi\"", "back\\slash", "tab\there\n",
                                           "caf\xc3\xa9 \xe2\x82\xac", "</script>"};
    static const uint32_t quantities[] = {1, 127, 128, 16384, DS_ITEM_QUANTITY_MAX};
    uint8_t items[256];
    size_t len = put_items(items, 5, products, quantities);
    json_t *doc = items_doc(items, len);
    assert_int_equal(json_array_size(doc), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *item = json_array_get(doc, i);
        assert_int_equal(json_object_size(item), 2);
        assert_string_equal(json_string_value(json_object_get(item, "product")), products[i]);
        assert_int_equal(json_integer_value(json_object_get(item, "quantity")), quantities[i]);
    }
    json_decref(doc);
}

static void test_render_items_largest_fits_bound(void **state)
{
    /* The largest canonical items (100 items of 64 control bytes each, the worst escaping, and
     * 5-byte quantities) fit query_items_json_bound, and one byte less is -ENOSPC, never a
     * cut document. */
    (void)state;
    uint8_t items[DS_ITEMS_BYTES_MAX];
    size_t n = put_varint(items, DS_ITEMS_COUNT_MAX);
    for (uint32_t i = 0; i < DS_ITEMS_COUNT_MAX; i++) {
        items[n++] = DS_ITEM_PRODUCT_BYTES_MAX;
        memset(items + n, 0x01, DS_ITEM_PRODUCT_BYTES_MAX);
        n += DS_ITEM_PRODUCT_BYTES_MAX;
        n += put_varint(items + n, DS_ITEM_QUANTITY_MAX);
    }
    assert_int_equal(n, DS_ITEMS_BYTES_MAX);
    size_t cap = query_items_json_bound(n);
    char *text = malloc(cap);
    assert_non_null(text);
    int64_t len = query_items_json(items, n, text, cap);
    assert_true(len > 0);
    assert_true((size_t)len < cap);
    assert_int_equal(query_items_json(items, n, text, (size_t)len), -ENOSPC);
    assert_int_equal(query_items_json(items, n, text, (size_t)len + 1), len);
    json_decref(items_doc(items, n));
    /* The smallest item per byte (1-byte product, quantity 1) fits as well. */
    n = put_varint(items, DS_ITEMS_COUNT_MAX);
    for (uint32_t i = 0; i < DS_ITEMS_COUNT_MAX; i++) {
        items[n++] = 1;
        items[n++] = '"';
        items[n++] = 1;
    }
    len = query_items_json(items, n, text, query_items_json_bound(n));
    assert_true(len > 0);
    free(text);
}

static void test_render_items_corrupt(void **state)
{
    /* Each way bytes can fail to be canonical items is -DS_ECORRUPT, not a document. */
    (void)state;
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
    } bad[] = {
        {"count over 100", {101}, 1},
        {"count past the bytes", {2, 1, 'a', 1}, 4},
        {"product of 0 bytes", {1, 0, 1}, 3},
        {"product of 65 bytes", {1, 65, 'a'}, 3},
        {"product cut short", {1, 5, 'a', 'b'}, 4},
        {"quantity 0", {1, 1, 'a', 0}, 4},
        {"quantity missing", {1, 1, 'a'}, 3},
        {"quantity cut short", {1, 1, 'a', 0x80}, 4},
        {"quantity 2^31", {1, 1, 'a', 0x80, 0x80, 0x80, 0x80, 0x08}, 8},
        {"varint of 6 bytes", {1, 1, 'a', 0x81, 0x80, 0x80, 0x80, 0x80, 0x00}, 9},
        {"count varint cut short", {0x80}, 1},
        {"bytes left over", {1, 1, 'a', 1, 7}, 5},
        {"empty list with a tail", {0, 0}, 2},
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        char text[512];
        int64_t n = query_items_json(bad[i].bytes, bad[i].len, text, sizeof(text));
        if (n != -DS_ECORRUPT) {
            fail_msg("%s: %lld", bad[i].what, (long long)n);
        }
    }
}

static struct storage_order order_of(const uint8_t *items, size_t items_bytes)
{
    struct storage_order o = {.order_id = {.value = 108},
                              .has_version = false,
                              .ts_ms = 1769040000000LL, /* 2026-01-22T00:00:00Z */
                              .day = 20475,
                              .shard = 0,
                              .status_len = 4,
                              .amount_units = 120000,
                              .customer_id = {.value = 5},
                              .items_bytes = (uint16_t)items_bytes,
                              .items = items,
                              .versions_seen = 1};
    memcpy(o.status, "paid", 4);
    return o;
}

static json_t *order_doc(const struct storage_order *o)
{
    size_t cap = query_order_json_bound(o);
    char *text = malloc(cap);
    assert_non_null(text);
    int64_t n = query_order_json(o, text, cap);
    assert_true(n > 0);
    json_error_t err;
    json_t *doc = json_loadb(text, (size_t)n, 0, &err);
    if (!json_is_object(doc)) {
        fail_msg("not a JSON object (%s): %s", err.text, text);
    }
    free(text);
    return doc;
}

static void test_render_order_document(void **state)
{
    /* Every field of the order lookup's document, in the customer view's forms (ts with
     * milliseconds and Z, day, amount with four places), and the exact text of the fixtures' order
     * 108. */
    (void)state;
    static const char *const products[] = {"Pen", "Notebook"};
    static const uint32_t quantities[] = {2, 1};
    uint8_t items[64];
    size_t len = put_items(items, 2, products, quantities);
    struct storage_order o = order_of(items, len);
    char text[2048];
    int64_t n = query_order_json(&o, text, sizeof(text));
    assert_true(n > 0);
    assert_string_equal(
        text, "{\"order_id\":108,\"customer_id\":5,\"ts\":\"2026-01-22T00:00:00.000Z\","
              "\"day\":\"2026-01-22\",\"shard\":0,\"status\":\"paid\",\"amount\":\"12.0000\","
              "\"version\":null,\"items\":[{\"product\":\"Pen\",\"quantity\":2},"
              "{\"product\":\"Notebook\",\"quantity\":1}],\"versions_seen\":1,"
              "\"model\":\"orders\"}");
    /* A version (0 is a version, not null), no items field (null, not []). */
    o = order_of(NULL, 0);
    o.has_version = true;
    o.version = 0;
    o.versions_seen = 3;
    json_t *doc = order_doc(&o);
    assert_true(json_is_integer(json_object_get(doc, "version")));
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), 0);
    assert_true(json_is_null(json_object_get(doc, "items")));
    assert_int_equal(json_integer_value(json_object_get(doc, "versions_seen")), 3);
    assert_string_equal(json_string_value(json_object_get(doc, "model")), "orders");
    json_decref(doc);
    o.version = INT64_MAX;
    doc = order_doc(&o);
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), INT64_MAX);
    json_decref(doc);
}

static void test_render_order_strings_and_bounds(void **state)
{
    /* String ids and status with bytes that need escaping read back exactly; a negative amount
     * keeps its sign; the largest record fits its bound and one byte less is -ENOSPC; corrupt
     * items are -DS_ECORRUPT for the whole document. */
    (void)state;
    uint8_t items[DS_ITEMS_BYTES_MAX];
    size_t n = put_varint(items, DS_ITEMS_COUNT_MAX);
    for (uint32_t i = 0; i < DS_ITEMS_COUNT_MAX; i++) {
        items[n++] = DS_ITEM_PRODUCT_BYTES_MAX;
        memset(items + n, '\\', DS_ITEM_PRODUCT_BYTES_MAX);
        n += DS_ITEM_PRODUCT_BYTES_MAX;
        n += put_varint(items + n, DS_ITEM_QUANTITY_MAX);
    }
    struct storage_order o = order_of(items, n);
    o.order_id = (struct ds_id){.is_string = true, .len = DS_ID_BYTES_MAX};
    memset(o.order_id.text, 0x1f, DS_ID_BYTES_MAX);
    o.customer_id = (struct ds_id){.is_string = true, .len = 5};
    memcpy(o.customer_id.text, "c \"9\"", 5);
    o.status_len = DS_STATUS_BYTES_MAX;
    memset(o.status, '"', DS_STATUS_BYTES_MAX);
    o.amount_units = -12345;
    o.has_version = true;
    o.version = INT64_MAX;
    o.versions_seen = UINT32_MAX;
    o.shard = UINT32_MAX;
    json_t *doc = order_doc(&o);
    const char *id = json_string_value(json_object_get(doc, "order_id"));
    assert_non_null(id);
    assert_int_equal(strlen(id), DS_ID_BYTES_MAX);
    assert_int_equal(id[0], 0x1f);
    assert_string_equal(json_string_value(json_object_get(doc, "customer_id")), "c \"9\"");
    assert_int_equal(strlen(json_string_value(json_object_get(doc, "status"))),
                     DS_STATUS_BYTES_MAX);
    assert_string_equal(json_string_value(json_object_get(doc, "amount")), "-1.2345");
    assert_int_equal(json_array_size(json_object_get(doc, "items")), DS_ITEMS_COUNT_MAX);
    json_decref(doc);
    size_t cap = query_order_json_bound(&o);
    char *text = malloc(cap);
    assert_non_null(text);
    int64_t len = query_order_json(&o, text, cap);
    assert_true(len > 0 && (size_t)len < cap);
    assert_int_equal(query_order_json(&o, text, (size_t)len), -ENOSPC);
    /* Cut inside the items: still -ENOSPC, not a corrupt verdict. */
    assert_int_equal(query_order_json(&o, text, (size_t)len / 2), -ENOSPC);
    items[1] = 0; /* the first product of 0 bytes */
    assert_int_equal(query_order_json(&o, text, cap), -DS_ECORRUPT);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_items_two),
        cmocka_unit_test(test_render_items_escaped),
        cmocka_unit_test(test_render_items_largest_fits_bound),
        cmocka_unit_test(test_render_items_corrupt),
        cmocka_unit_test(test_render_order_document),
        cmocka_unit_test(test_render_order_strings_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
