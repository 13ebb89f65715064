/*
 * Rendering count results (the JSON document of the HTTP API and a table for people), a page of
 * a customer's orders, and one order with its items (the order lookup).
 * JSON is written by hand into a caller's buffer with a computed bound: the documents are flat
 * and the bound is exact enough to allocate once. Rejected: a JSON library for output (an
 * allocation per node, and nothing to parse).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "query/query.h"

/* Worst case per group: key text, counts, an amount, field names. */
#define GROUP_JSON_BYTES_MAX 192u

size_t query_count_json_bound(const struct query_count_result *res)
{
    return 560u + 8u * DS_STATUS_BYTES_MAX + res->group_count * GROUP_JSON_BYTES_MAX;
}

static const char *group_name(enum query_group by)
{
    switch (by) {
    case QUERY_GROUP_SHARD: return "shard";
    case QUERY_GROUP_HOUR: return "hour";
    case QUERY_GROUP_DAY: return "day";
    case QUERY_GROUP_NONE: break;
    }
    return NULL;
}

static void put_group(struct http_text *b, enum query_group by, const struct query_group_row *g)
{
    char date[DS_DATE_TEXT_SIZE];
    char amount[DS_AMOUNT_TEXT_SIZE];
    char key[SHARD_KEY_TEXT_SIZE];
    ds_date_format(g->day, date);
    ds_amount_format(g->amount_units, amount);
    if (by == QUERY_GROUP_SHARD) {
        shard_key_format(g->day, g->shard, key);
        http_text_put(b, "{\"key\":%u,\"day\":\"%s\",\"partition\":\"%s\"", g->shard, date, key);
    } else if (by == QUERY_GROUP_HOUR) {
        http_text_put(b, "{\"key\":\"%sT%02u:00:00Z\"", date, g->hour);
    } else {
        http_text_put(b, "{\"key\":\"%s\"", date);
    }
    http_text_put(b, ",\"count\":%" PRIu64 ",\"amount_sum\":\"%s\"}", g->count, amount);
}

int64_t query_count_json(const struct query_count_request *req,
                         const struct query_count_result *res, char *dst, size_t dst_capacity)
{
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    char first[DS_DATE_TEXT_SIZE];
    char last[DS_DATE_TEXT_SIZE];
    char amount[DS_AMOUNT_TEXT_SIZE];
    ds_date_format(req->day_first, first);
    ds_date_format(req->day_last, last);
    ds_amount_format(res->amount_units, amount);
    http_text_put(&b, "{\"day\":\"%s\",\"to\":\"%s\",\"status\":", first, last);
    if (req->has_status) {
        char status[8 * DS_STATUS_BYTES_MAX];
        int64_t n = http_json_string(req->status, req->status_len, status, sizeof(status));
        ASSERT(n > 0);
        http_text_put(&b, "%s", status);
    } else {
        http_text_put(&b, "null");
    }
    http_text_put(
        &b,
        ",\"count\":%" PRIu64 ",\"amount_sum\":\"%s\",\"partitions\":%u,\"blocks\":%" PRIu64
        ",\"bytes\":%" PRIu64 ",\"damaged_blocks\":%" PRIu64,
        res->count, amount, res->partitions, res->blocks, res->bytes, res->damaged_blocks);
    if (res->model != STORAGE_MODEL_RECORDED) {
        http_text_put(&b, ",\"model\":\"%s\"", storage_model_name(res->model));
    }
    if (res->retention_floor > 0) {
        char floor[DS_DATE_TEXT_SIZE];
        ds_date_format(res->retention_floor, floor);
        http_text_put(&b, ",\"retention_floor\":\"%s\"", floor);
    }
    if (req->by != QUERY_GROUP_NONE) {
        http_text_put(&b, ",\"by\":\"%s\",\"groups\":[", group_name(req->by));
        for (size_t i = 0; i < res->group_count; i++) {
            http_text_put(&b, "%s", i == 0 ? "" : ",");
            put_group(&b, req->by, &res->groups[i]);
        }
        http_text_put(&b, "]");
    }
    http_text_put(&b, "}");
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}

int64_t query_id_json(const struct ds_id *id, char *dst, size_t dst_capacity)
{
    if (id->is_string) {
        return http_json_string(id->text, id->len, dst, dst_capacity);
    }
    int n = snprintf(dst, dst_capacity, "%" PRId64, id->value);
    return n > 0 && (size_t)n < dst_capacity ? n : -ENOSPC;
}

/* One order's JSON: at most 6 bytes per id or status byte, plus fixed text. */
#define ORDER_JSON_BYTES_MAX (6u * (DS_ID_BYTES_MAX + DS_STATUS_BYTES_MAX) + 160u)

size_t query_orders_json_bound(uint32_t count)
{
    return ((size_t)count + 1) * ORDER_JSON_BYTES_MAX + 2 * QUERY_ORDERS_TOKEN_CHARS_MAX + 96;
}

int64_t query_orders_json(const struct ds_id *customer, const struct query_orders_page *page,
                          uint64_t gsi_lag_ms, char *dst, size_t dst_capacity)
{
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    char id[6u * DS_ID_BYTES_MAX + 3];
    int64_t n = query_id_json(customer, id, sizeof(id));
    ASSERT(n > 0);
    http_text_put(&b, "{\"customer_id\":%s,\"orders\":[", id);
    for (uint32_t i = 0; i < page->count; i++) {
        const struct query_order *o = &page->orders[i];
        char ts[DS_TS_TEXT_SIZE];
        char day[11];
        char status[6u * DS_STATUS_BYTES_MAX + 3];
        char amount[48];
        ds_ts_format(o->ts_ms, ts);
        ds_date_format(o->day, day);
        n = query_id_json(&o->order_id, id, sizeof(id));
        ASSERT(n > 0);
        int64_t s = http_json_string(o->status, o->status_len, status, sizeof(status));
        ASSERT(s > 0);
        ds_amount_format((ds_i128)o->amount_units, amount);
        http_text_put(&b,
                      "%s{\"order_id\":%s,\"ts\":\"%s\",\"day\":\"%s\",\"status\":%s,"
                      "\"amount\":\"%s\"}",
                      i > 0 ? "," : "", id, ts, day, status, amount);
    }
    if (page->has_next) {
        http_text_put(&b, "],\"next\":\"%s\"", page->next_token);
    } else {
        http_text_put(&b, "],\"next\":null");
    }
    http_text_put(&b, ",\"gsi_lag_ms\":%" PRIu64 "}", gsi_lag_ms);
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}

/* ---- one order (the order lookup) ------------------------------------------------------- */

/* A varint (common.h) of at most 5 bytes at *p, before end: every varint of canonical items
 * fits (a count up to 100, a quantity up to 2^31-1), so a longer one is corrupt even when it
 * would decode. A value past 32 bits reads as UINT32_MAX, which every caller's bound refuses.
 * False for a bad or longer varint, with *p untouched. */
static bool items_varint(const uint8_t **p, const uint8_t *end, uint32_t *out)
{
    size_t avail = (size_t)(end - *p);
    uint64_t value = 0;
    size_t n = ds_varint_get(*p, avail < 5u ? avail : 5u, &value);
    if (n == 0) {
        return false;
    }
    *p += n;
    *out = value <= UINT32_MAX ? (uint32_t)value : UINT32_MAX;
    return true;
}

/* Per item: {"product":,"quantity":}, a comma, at most 6 bytes per product byte and 10 digits.
 * An item takes at least 3 canonical bytes (length, one product byte, one quantity byte), so 16
 * output bytes per canonical byte cover the fixed text of the smallest item too. */
size_t query_items_json_bound(size_t len)
{
    return 16u * len + 8u;
}

int64_t query_items_json(const uint8_t *items, size_t len, char *dst, size_t dst_capacity)
{
    ASSERT(items != NULL);
    ASSERT(len > 0);
    const uint8_t *p = items;
    const uint8_t *end = items + len;
    uint32_t count = 0;
    if (!items_varint(&p, end, &count) || count > DS_ITEMS_COUNT_MAX) {
        return -DS_ECORRUPT;
    }
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    http_text_put(&b, "[");
    for (uint32_t i = 0; i < count; i++) { /* at most DS_ITEMS_COUNT_MAX */
        size_t product_len = p < end ? *p : 0;
        if (product_len == 0 || product_len > DS_ITEM_PRODUCT_BYTES_MAX ||
            (size_t)(end - p) < 1 + product_len) {
            return -DS_ECORRUPT;
        }
        const char *product = (const char *)p + 1;
        p += 1 + product_len;
        uint32_t quantity = 0;
        if (!items_varint(&p, end, &quantity) || quantity == 0 || quantity > DS_ITEM_QUANTITY_MAX) {
            return -DS_ECORRUPT;
        }
        char text[6u * DS_ITEM_PRODUCT_BYTES_MAX + 3];
        int64_t n = http_json_string(product, product_len, text, sizeof(text));
        ASSERT(n > 0);
        http_text_put(&b, "%s{\"product\":%s,\"quantity\":%" PRIu32 "}", i > 0 ? "," : "", text,
                      quantity);
    }
    if (p != end) {
        return -DS_ECORRUPT;
    }
    http_text_put(&b, "]");
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}

/* Fixed text, two ids and a status at 6 bytes a byte, numbers. */
#define ORDER_DOC_BYTES_MAX (6u * (2u * DS_ID_BYTES_MAX + DS_STATUS_BYTES_MAX) + 320u)

size_t query_order_json_bound(const struct storage_order *order)
{
    return ORDER_DOC_BYTES_MAX + query_items_json_bound(order->items_bytes);
}

int64_t query_order_json(const struct storage_order *order, char *dst, size_t dst_capacity)
{
    ASSERT(order->items_bytes == 0 || order->items != NULL);
    ASSERT(order->status_len <= DS_STATUS_BYTES_MAX);
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    char order_id[6u * DS_ID_BYTES_MAX + 3];
    char customer[6u * DS_ID_BYTES_MAX + 3];
    char status[6u * DS_STATUS_BYTES_MAX + 3];
    char ts[DS_TS_TEXT_SIZE];
    char day[DS_DATE_TEXT_SIZE];
    char amount[DS_AMOUNT_TEXT_SIZE];
    int64_t n = query_id_json(&order->order_id, order_id, sizeof(order_id));
    ASSERT(n > 0);
    n = query_id_json(&order->customer_id, customer, sizeof(customer));
    ASSERT(n > 0);
    n = http_json_string(order->status, order->status_len, status, sizeof(status));
    ASSERT(n > 0);
    ds_ts_format(order->ts_ms, ts);
    ds_date_format(order->day, day);
    ds_amount_format((ds_i128)order->amount_units, amount);
    http_text_put(
        &b,
        "{\"order_id\":%s,\"customer_id\":%s,\"ts\":\"%s\",\"day\":\"%s\",\"shard\":%" PRIu32
        ",\"status\":%s,\"amount\":\"%s\",\"version\":",
        order_id, customer, ts, day, order->shard, status, amount);
    if (order->has_version) {
        http_text_put(&b, "%" PRId64, order->version);
    } else {
        http_text_put(&b, "null");
    }
    http_text_put(&b, ",\"items\":");
    if (order->items_bytes == 0) {
        http_text_put(&b, "null");
    } else if (!b.overflow) {
        n = query_items_json(order->items, order->items_bytes, b.dst + b.len, b.capacity - b.len);
        if (n == -DS_ECORRUPT) {
            return n;
        }
        b.overflow = n < 0;
        b.len += n > 0 ? (size_t)n : 0;
    }
    http_text_put(&b, ",\"versions_seen\":%" PRIu32 ",\"model\":\"orders\"}", order->versions_seen);
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}

void query_count_table(const struct query_count_request *req, const struct query_count_result *res,
                       FILE *out)
{
    char first[DS_DATE_TEXT_SIZE];
    char last[DS_DATE_TEXT_SIZE];
    char amount[DS_AMOUNT_TEXT_SIZE];
    ds_date_format(req->day_first, first);
    ds_date_format(req->day_last, last);
    ds_amount_format(res->amount_units, amount);
    if (req->day_first == req->day_last) {
        fprintf(out, "day %s", first);
    } else {
        fprintf(out, "days %s .. %s", first, last);
    }
    if (req->has_status) {
        fprintf(out, ", status \"%.*s\"", (int)req->status_len, req->status);
    }
    fprintf(out, ": %" PRIu64 " orders, amount %s, %u partitions read", res->count, amount,
            res->partitions);
    if (res->model != STORAGE_MODEL_RECORDED) {
        fprintf(out, " (model %s)", storage_model_name(res->model));
    }
    fprintf(out, "\n");
    if (res->retention_floor > 0) {
        char floor[DS_DATE_TEXT_SIZE];
        ds_date_format(res->retention_floor, floor);
        fprintf(out, "retention: days before %s were dropped (they count 0)\n", floor);
    }
    if (req->by == QUERY_GROUP_NONE) {
        return;
    }
    fprintf(out, "%-22s %12s %20s\n", group_name(req->by), "count", "amount_sum");
    for (size_t i = 0; i < res->group_count; i++) {
        const struct query_group_row *g = &res->groups[i];
        char key[32];
        char date[DS_DATE_TEXT_SIZE];
        ds_date_format(g->day, date);
        ds_amount_format(g->amount_units, amount);
        if (req->by == QUERY_GROUP_SHARD) {
            shard_key_format(g->day, g->shard, key);
        } else if (req->by == QUERY_GROUP_HOUR) {
            snprintf(key, sizeof(key), "%sT%02u", date, g->hour);
        } else {
            snprintf(key, sizeof(key), "%s", date);
        }
        fprintf(out, "%-22s %12" PRIu64 " %20s\n", key, g->count, amount);
    }
}
