/*
 * The router's merges: one document of the HTTP API from the answers of a group's members,
 * each a document a node gave (parsed with jansson; rendered with the node's own renderers, so
 * a router's answer reads exactly like a node's).
 *
 * Counts: count, amount_sum, partitions, blocks, bytes and damaged_blocks are summed (amounts
 * as exact integers of 1/10000, parsed from their decimal text: never through a double), groups
 * are summed by key (day, shard or hour) and listed in the node's order. as_of (and the
 * high_watermarks of consistent=true) is the union of the members' objects, the larger offset
 * where two members name the same partition: inside one consumer group a partition handed over
 * is in the old and the new holder, the new one ahead (in the events model both keep their
 * part; in the orders model the router refuses such an answer, router_owner.c, so the merge
 * marks the partitions named twice). A count's claims (each member's latest run of each
 * partition it holds) are kept per member and not rendered: router_owner.c compares members'
 * runs, which a merged one would hide. retention_floor is the latest of the
 * members' floors: nodes keep their own stream time, so their floors can differ for a while, and
 * below the latest one some member's part of a day is gone.
 *
 * A customer's orders: a k-way merge newest first in the index's own order (ts descending, then
 * the order id as index/key.c orders it), with one portable cursor: the page token of the last
 * order listed, which is also what every node's index resumes after. Each node's answer is
 * complete up to its own next token (its frontier: it listed every order before it); the merge
 * lists orders up to the nearest frontier only, so an order a node did not list yet can never be
 * skipped, and the next page, asked of every node after the same token, never repeats one. A
 * token names a position in the data, not in a node, so a cursor stays valid across a failover
 * to the other group. Rejected: a list of per-node cursors (bound to one group's members, and
 * a node's token past orders the router did not list would skip them).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_private.h"

/* The tail key of an order (index/key.c): ~ts big-endian, then 0xFE ~id for an integer id, or
 * 0xFD and the complemented bytes (a zero byte escaped) and 0xFF 0xFF for a string id. */
#define ROUTER_KEY_BYTES_MAX (QUERY_ORDERS_TOKEN_CHARS_MAX / 2u)

static void be64_put(uint8_t *dst, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        dst[i] = (uint8_t)v;
        v >>= 8;
    }
}

static size_t order_key(int64_t ts_ms, const struct ds_id *order, uint8_t *dst)
{
    be64_put(dst, ~(uint64_t)ts_ms);
    if (!order->is_string) {
        dst[8] = 0xFE;
        be64_put(dst + 9, ~(uint64_t)order->value);
        return 17;
    }
    size_t n = 8;
    dst[n++] = 0xFD;
    for (size_t i = 0; i < order->len; i++) {
        uint8_t b = (uint8_t)order->text[i];
        dst[n++] = (uint8_t)~b;
        if (b == 0x00) {
            dst[n++] = 0x00;
        }
    }
    dst[n++] = 0xFF;
    dst[n++] = 0xFF;
    ASSERT(n <= ROUTER_KEY_BYTES_MAX);
    return n;
}

static void hex_encode(const uint8_t *src, size_t len, char *dst)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        dst[2 * i] = digits[src[i] >> 4];
        dst[2 * i + 1] = digits[src[i] & 15];
    }
    dst[2 * len] = '\0';
}

void router_order_token(int64_t ts_ms, const struct ds_id *order, char *dst)
{
    uint8_t key[ROUTER_KEY_BYTES_MAX];
    size_t n = order_key(ts_ms, order, key);
    hex_encode(key, n, dst);
}

/* Decodes a node's next token; returns its byte count or -1 when it is not lowercase hex. */
static int hex_decode(const char *text, uint8_t *dst)
{
    size_t chars = strlen(text);
    if (chars == 0 || chars % 2 != 0 || chars > QUERY_ORDERS_TOKEN_CHARS_MAX) {
        return -1;
    }
    for (size_t i = 0; i < chars; i++) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1);
        if (v < 0) {
            return -1;
        }
        dst[i / 2] = (uint8_t)(i % 2 == 0 ? v << 4 : dst[i / 2] | v);
    }
    return (int)(chars / 2);
}

/* memcmp order, a key that is a prefix of a longer one first: the index's page order. */
static int key_compare(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    if (c != 0) {
        return c;
    }
    return (a_len > b_len) - (a_len < b_len);
}

/* ---- parsing helpers ----------------------------------------------------------------------- */

static int bad(struct router_merged *out, const char *field)
{
    snprintf(out->error, sizeof(out->error), "a node's answer has no valid \"%s\"", field);
    return -DS_ECORRUPT;
}

/* "-123.4500" (at most four decimals) into units of 1/10000; false when it is not one. */
static bool amount_parse(const char *text, ds_i128 *out)
{
    bool negative = text[0] == '-';
    const char *p = text + (negative ? 1 : 0);
    ds_i128 units = 0;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 30; p++, digits++) {
        units = units * 10 + (*p - '0');
    }
    uint32_t decimals = 0;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9' && decimals < 4; p++, decimals++) {
            units = units * 10 + (*p - '0');
        }
    }
    if (digits == 0 || *p != '\0') {
        return false;
    }
    for (; decimals < 4; decimals++) {
        units *= 10;
    }
    *out = negative ? -units : units;
    return true;
}

static bool uint_field(const json_t *doc, const char *name, uint64_t *out)
{
    const json_t *v = json_object_get(doc, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        return false;
    }
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static bool date_field(const json_t *doc, const char *name, int32_t *day)
{
    const char *s = json_string_value(json_object_get(doc, name));
    return s != NULL && ds_date_parse(s, strlen(s), day) == 0;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" (ds_ts_format's form) into epoch milliseconds. */
static bool ts_parse(const char *s, int64_t *ts_ms)
{
    int32_t day = 0;
    if (s == NULL || strlen(s) != DS_TS_TEXT_SIZE - 1 || ds_date_parse(s, 10, &day) != 0 ||
        s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z') {
        return false;
    }
    static const int at[] = {11, 12, 14, 15, 17, 18, 20, 21, 22};
    int v[9];
    for (size_t i = 0; i < DS_ARRAY_LEN(at); i++) {
        if (s[at[i]] < '0' || s[at[i]] > '9') {
            return false;
        }
        v[i] = s[at[i]] - '0';
    }
    int64_t ms =
        (int64_t)((v[0] * 10 + v[1]) * 3600 + (v[2] * 10 + v[3]) * 60 + v[4] * 10 + v[5]) * 1000 +
        v[6] * 100 + v[7] * 10 + v[8];
    *ts_ms = (int64_t)day * DS_DAY_MS + ms;
    return *ts_ms >= DS_TS_MS_MIN && *ts_ms <= DS_TS_MS_MAX;
}

static bool id_value(const json_t *v, struct ds_id *id)
{
    if (json_is_integer(v) && json_integer_value(v) >= 1) {
        *id = (struct ds_id){.is_string = false, .value = json_integer_value(v)};
        return true;
    }
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (s == NULL || len == 0 || len > DS_ID_BYTES_MAX) {
        return false;
    }
    *id = (struct ds_id){.is_string = true, .len = (uint8_t)len};
    memcpy(id->text, s, len);
    return true;
}

/* Merges an object {"P": next, ..., "file": next} into o. */
static bool offsets_add(struct router_offsets *o, const json_t *obj)
{
    if (obj == NULL) {
        return true;
    }
    if (!json_is_object(obj)) {
        return false;
    }
    o->present = true;
    const char *key = NULL;
    json_t *v = NULL;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!json_is_integer(v)) {
            return false;
        }
        int64_t next = json_integer_value(v);
        if (strcmp(key, "file") == 0) {
            o->file_next = o->has_file && o->file_next > next ? o->file_next : next;
            o->has_file = true;
            continue;
        }
        char *end = NULL;
        unsigned long p = strtoul(key, &end, 10);
        if (end == key || *end != '\0' || p >= ROUTER_PARTITIONS_MAX) {
            return false;
        }
        bool seen = (o->bits[p / 64] >> (p % 64)) & 1u;
        o->next[p] = seen && o->next[p] > next ? o->next[p] : next;
        o->bits[p / 64] |= 1ull << (p % 64);
        o->twice[p / 64] |= seen ? 1ull << (p % 64) : 0u;
    }
    return true;
}

void router_claims_free(struct router_claims *c)
{
    free(c->items);
    *c = (struct router_claims){0};
}

/* One claim's [from, end]: from an offset, end an offset or null (open); false otherwise. */
static bool claim_parse(const json_t *v, struct router_claim *claim)
{
    const json_t *from = json_array_get(v, 0);
    const json_t *end = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(from) ||
        json_integer_value(from) < 0 || !(json_is_null(end) || json_is_integer(end))) {
        return false;
    }
    claim->from = json_integer_value(from);
    claim->end = json_is_null(end) ? ROUTER_CLAIM_OPEN : json_integer_value(end);
    return json_is_null(end) || (claim->end >= 0 && claim->end < ROUTER_CLAIM_OPEN);
}

/* Appends member's claims, an object {"P":[from, end], ...}, to c (room for them was made by
 * the caller: claims_room). */
static bool claims_add(struct router_claims *c, uint32_t member, const json_t *obj)
{
    if (!json_is_object(obj) || json_object_size(obj) > ROUTER_PARTITIONS_MAX) {
        return false;
    }
    const char *key = NULL;
    json_t *v = NULL;
    json_object_foreach((json_t *)obj, key, v)
    {
        /* One spelling per partition ("7", never "07" or "+7"), so a member claims each once. */
        char *end = NULL;
        unsigned long p = strtoul(key, &end, 10);
        struct router_claim claim = {.partition = (uint32_t)p, .member = member};
        if (end == key || *end != '\0' || key[0] < '0' || key[0] > '9' ||
            (key[0] == '0' && key[1] != '\0') || p >= ROUTER_PARTITIONS_MAX ||
            !claim_parse(v, &claim)) {
            return false;
        }
        c->items[c->count++] = claim;
    }
    return true;
}

/* Room for every member's claims: claims_add takes at most ROUTER_PARTITIONS_MAX of one
 * member, so the members' object sizes, capped, bound the list. */
static int claims_room(struct router_claims *c, json_t *const *docs, uint32_t count)
{
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t n = json_object_size(json_object_get(docs[i], "claims"));
        total += n < ROUTER_PARTITIONS_MAX ? n : ROUTER_PARTITIONS_MAX;
    }
    c->items = total > 0 ? malloc(total * sizeof(*c->items)) : NULL;
    return total == 0 || c->items != NULL ? 0 : -ENOMEM;
}

static int claim_compare(const void *a, const void *b)
{
    const struct router_claim *x = a;
    const struct router_claim *y = b;
    if (x->partition != y->partition) {
        return x->partition < y->partition ? -1 : 1;
    }
    if (x->from != y->from) {
        return x->from < y->from ? -1 : 1;
    }
    return (x->member > y->member) - (x->member < y->member);
}

/* ,"NAME":{...} of o. */
static void offsets_put(struct http_text *b, const char *name, const struct router_offsets *o)
{
    http_text_put(b, ",\"%s\":{", name);
    bool first = true;
    if (o->has_file) {
        http_text_put(b, "\"file\":%" PRId64, o->file_next);
        first = false;
    }
    for (uint32_t p = 0; p < ROUTER_PARTITIONS_MAX; p++) {
        if ((o->bits[p / 64] >> (p % 64)) & 1u) {
            http_text_put(b, "%s\"%u\":%" PRId64, first ? "" : ",", p, o->next[p]);
            first = false;
        }
    }
    http_text_put(b, "}");
}

int router_render_new(router_render_fn render, const void *user, size_t cap,
                      struct router_merged *out)
{
    for (int tries = 0; tries < 16; tries++, cap *= 2) {
        struct http_text b = {.dst = malloc(cap), .capacity = cap};
        if (b.dst == NULL) {
            return -ENOMEM;
        }
        render(&b, user);
        if (!b.overflow) {
            out->body = b.dst;
            out->len = b.len;
            return 0;
        }
        free(b.dst);
    }
    return -ENOMEM;
}

int router_docs_load(const char *const *bodies, uint32_t count, struct json_t **docs,
                     struct router_merged *out)
{
    for (uint32_t i = 0; i < count; i++) {
        json_error_t err;
        docs[i] = json_loads(bodies[i], 0, &err);
        if (!json_is_object(docs[i])) {
            snprintf(out->error, sizeof(out->error), "a node's answer is not a JSON object: %.80s",
                     err.text);
            return -DS_ECORRUPT;
        }
    }
    return 0;
}

void router_docs_free(struct json_t **docs, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        json_decref(docs[i]);
    }
}

/* ,"consistency":"..." (a consistent=true answer's kind, as a member gave it). */
static void consistency_put(struct http_text *b, const char *consistency)
{
    char text[64];
    int64_t n = http_json_string(consistency, strnlen(consistency, 16), text, sizeof(text));
    http_text_put(b, ",\"consistency\":%s", n > 0 ? text : "null");
}

/* ---- /v1/count ----------------------------------------------------------------------------- */

struct count_merge {
    const struct query_route *route;
    struct query_count_result res;
    const char *consistency; /* a member's "consistency" value, or NULL */
    struct router_offsets as_of;
    struct router_offsets *watermarks; /* high_watermarks of consistent=true */
    bool orders_model;                 /* some member counts orders */
    bool events_model;                 /* some member said it counts events */
    struct router_claims claims;       /* every member's */
    uint32_t members_with_claims;
};

static int group_row_compare(const void *a, const void *b)
{
    const struct query_group_row *x = a;
    const struct query_group_row *y = b;
    if (x->day != y->day) {
        return x->day < y->day ? -1 : 1;
    }
    if (x->shard != y->shard) {
        return x->shard < y->shard ? -1 : 1;
    }
    return (x->hour > y->hour) - (x->hour < y->hour);
}

static bool group_row_parse(enum query_group by, const json_t *g, struct query_group_row *row)
{
    const json_t *key = json_object_get(g, "key");
    const char *text = json_string_value(key);
    const char *amount = json_string_value(json_object_get(g, "amount_sum"));
    *row = (struct query_group_row){0};
    if (amount == NULL || !amount_parse(amount, &row->amount_units) ||
        !uint_field(g, "count", &row->count)) {
        return false;
    }
    if (by == QUERY_GROUP_SHARD) {
        row->shard = (uint32_t)json_integer_value(key);
        return json_is_integer(key) && json_integer_value(key) >= 0 &&
               json_integer_value(key) < SHARD_COUNT_MAX && date_field(g, "day", &row->day);
    }
    if (text == NULL || ds_date_parse(text, strnlen(text, 10), &row->day) != 0) {
        return false;
    }
    if (by == QUERY_GROUP_HOUR) {
        if (strlen(text) != 20 || text[11] < '0' || text[11] > '2' || text[12] < '0' ||
            text[12] > '9') {
            return false;
        }
        row->hour = (uint32_t)((text[11] - '0') * 10 + (text[12] - '0'));
        return row->hour < 24;
    }
    return strlen(text) == 10;
}

/* Collects every member's groups, sorts them by key and adds up rows of the same key. */
static int count_groups(struct count_merge *m, json_t **docs, uint32_t count,
                        struct router_merged *out)
{
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *groups = json_object_get(docs[i], "groups");
        if (!json_is_array(groups)) {
            return bad(out, "groups");
        }
        total += json_array_size(groups);
    }
    m->res.groups = calloc(total > 0 ? total : 1, sizeof(*m->res.groups));
    if (m->res.groups == NULL) {
        return -ENOMEM;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *groups = json_object_get(docs[i], "groups");
        for (size_t j = 0; j < json_array_size(groups); j++) {
            if (!group_row_parse(m->route->count.by, json_array_get(groups, j),
                                 &m->res.groups[n++])) {
                return bad(out, "groups");
            }
        }
    }
    qsort(m->res.groups, n, sizeof(*m->res.groups), group_row_compare);
    size_t kept = 0;
    for (size_t j = 0; j < n; j++) {
        struct query_group_row *row = &m->res.groups[j];
        if (kept > 0 && group_row_compare(&m->res.groups[kept - 1], row) == 0) {
            m->res.groups[kept - 1].count += row->count;
            m->res.groups[kept - 1].amount_units += row->amount_units;
        } else {
            m->res.groups[kept++] = *row;
        }
    }
    m->res.group_count = kept;
    return 0;
}

static bool model_of(const json_t *doc, enum storage_model *model)
{
    const char *name = json_string_value(json_object_get(doc, "model"));
    if (name == NULL) {
        return json_object_get(doc, "model") == NULL; /* RECORDED: the field is left out */
    }
    return storage_model_parse(name, model) == 0;
}

static int count_member(struct count_merge *m, uint32_t member, const json_t *doc,
                        struct router_merged *out)
{
    struct query_count_result *res = &m->res;
    uint64_t v[5];
    static const char *const names[] = {"count", "partitions", "blocks", "bytes", "damaged_blocks"};
    for (size_t i = 0; i < DS_ARRAY_LEN(names); i++) {
        if (!uint_field(doc, names[i], &v[i])) {
            return bad(out, names[i]);
        }
    }
    const char *amount = json_string_value(json_object_get(doc, "amount_sum"));
    ds_i128 units = 0;
    if (amount == NULL || !amount_parse(amount, &units)) {
        return bad(out, "amount_sum");
    }
    if (!model_of(doc, &res->model)) {
        return bad(out, "model");
    }
    m->orders_model = m->orders_model || res->model == STORAGE_MODEL_ORDERS;
    m->events_model = m->events_model ||
                      (json_object_get(doc, "model") != NULL && res->model == STORAGE_MODEL_EVENTS);
    /* The first day every member still keeps: below it some member's part is dropped, so the
     * latest of the members' floors is the merged answer's. */
    int32_t floor = 0;
    if (json_object_get(doc, "retention_floor") != NULL &&
        !date_field(doc, "retention_floor", &floor)) {
        return bad(out, "retention_floor");
    }
    res->retention_floor = floor > res->retention_floor ? floor : res->retention_floor;
    res->count += v[0];
    res->partitions += (uint32_t)v[1];
    res->blocks += v[2];
    res->bytes += v[3];
    res->damaged_blocks += v[4];
    res->amount_units += units;
    if (!offsets_add(&m->as_of, json_object_get(doc, "as_of"))) {
        return bad(out, "as_of");
    }
    if (!offsets_add(m->watermarks, json_object_get(doc, "high_watermarks"))) {
        return bad(out, "high_watermarks");
    }
    const json_t *claims = json_object_get(doc, "claims");
    if (claims != NULL && !claims_add(&m->claims, member, claims)) {
        return bad(out, "claims");
    }
    m->members_with_claims += claims != NULL;
    const char *consistency = json_string_value(json_object_get(doc, "consistency"));
    m->consistency = consistency != NULL ? consistency : m->consistency;
    return 0;
}

static void count_render(struct http_text *b, const void *user)
{
    const struct count_merge *m = user;
    int64_t n = query_count_json(&m->route->count, &m->res, b->dst, b->capacity);
    if (n < 0) {
        b->overflow = true;
        return;
    }
    b->len = (size_t)n - 1; /* reopen the object: drop its closing brace */
    if (m->as_of.present) {
        offsets_put(b, "as_of", &m->as_of);
    }
    if (m->consistency != NULL) {
        consistency_put(b, m->consistency);
    }
    if (m->watermarks->present) {
        offsets_put(b, "high_watermarks", m->watermarks);
    }
    http_text_put(b, "}");
}

int router_merge_count(const struct query_route *route, const char *const *bodies, uint32_t count,
                       struct router_merged *out)
{
    ASSERT(route->endpoint == QUERY_EP_COUNT);
    ASSERT(count >= 1 && count <= ROUTER_NODES_TOTAL_MAX);
    json_t *docs[ROUTER_NODES_TOTAL_MAX] = {0};
    struct count_merge *m = calloc(1, sizeof(*m));
    struct router_offsets *watermarks = calloc(1, sizeof(*watermarks));
    int rc = m != NULL && watermarks != NULL ? router_docs_load(bodies, count, docs, out) : -ENOMEM;
    if (rc == 0) {
        m->route = route;
        m->watermarks = watermarks;
        m->res.model = STORAGE_MODEL_RECORDED;
        rc = claims_room(&m->claims, docs, count);
        for (uint32_t i = 0; i < count && rc == 0; i++) {
            rc = count_member(m, i, docs[i], out);
        }
    }
    if (rc == 0 && route->count.by != QUERY_GROUP_NONE) {
        rc = count_groups(m, docs, count, out);
    }
    if (rc == 0) {
        size_t cap = query_count_json_bound(&m->res) + 2u * 32u * ROUTER_PARTITIONS_MAX / 8u;
        rc = router_render_new(count_render, m, cap, out);
        out->as_of = m->as_of;
        out->orders_model = m->orders_model;
    }
    if (rc == 0) {
        if (m->claims.count > 1) {
            qsort(m->claims.items, m->claims.count, sizeof(*m->claims.items), claim_compare);
        }
        m->claims.all = m->members_with_claims == count;
        out->events_model = m->events_model;
        out->claims = m->claims;
        m->claims = (struct router_claims){0};
    }
    if (m != NULL) {
        router_claims_free(&m->claims);
        query_count_result_deinit(&m->res);
    }
    free(m);
    free(watermarks);
    router_docs_free(docs, count);
    return rc;
}

/* ---- /v1/customers/{id}/orders ------------------------------------------------------------- */

struct merge_order {
    struct query_order order;
    uint8_t key[ROUTER_KEY_BYTES_MAX];
    uint8_t key_len;
};

static int merge_order_compare(const void *a, const void *b)
{
    const struct merge_order *x = a;
    const struct merge_order *y = b;
    return key_compare(x->key, x->key_len, y->key, y->key_len);
}

static bool order_parse(const json_t *o, struct merge_order *m)
{
    const char *status = json_string_value(json_object_get(o, "status"));
    const char *amount = json_string_value(json_object_get(o, "amount"));
    ds_i128 units = 0;
    memset(m, 0, sizeof(*m));
    if (!id_value(json_object_get(o, "order_id"), &m->order.order_id) ||
        !ts_parse(json_string_value(json_object_get(o, "ts")), &m->order.ts_ms) ||
        !date_field(o, "day", &m->order.day) || status == NULL ||
        json_string_length(json_object_get(o, "status")) > DS_STATUS_BYTES_MAX || amount == NULL ||
        !amount_parse(amount, &units) || units > INT64_MAX || units < INT64_MIN) {
        return false;
    }
    m->order.status_len = (uint8_t)json_string_length(json_object_get(o, "status"));
    memcpy(m->order.status, status, m->order.status_len);
    m->order.amount_units = (int64_t)units;
    m->key_len = (uint8_t)order_key(m->order.ts_ms, &m->order.order_id, m->key);
    return true;
}

struct orders_merge {
    const struct query_route *route;
    struct merge_order *all;
    size_t all_count;
    bool has_frontier; /* some member has more after its frontier */
    uint8_t frontier[ROUTER_KEY_BYTES_MAX];
    size_t frontier_len;
    uint64_t gsi_lag_ms;
    const char *consistency; /* a member's "consistency" (consistent=true), or NULL */
    struct query_orders_page page;
};

/* Takes one member's orders and its frontier (its next token: it listed everything before). */
static int orders_member(struct orders_merge *m, const json_t *doc, struct router_merged *out)
{
    const json_t *orders = json_object_get(doc, "orders");
    const json_t *next = json_object_get(doc, "next");
    uint64_t lag = 0;
    if (!json_is_array(orders) || !(json_is_null(next) || json_is_string(next))) {
        return bad(out, json_is_array(orders) ? "next" : "orders");
    }
    if (!uint_field(doc, "gsi_lag_ms", &lag)) {
        return bad(out, "gsi_lag_ms");
    }
    m->gsi_lag_ms = lag > m->gsi_lag_ms ? lag : m->gsi_lag_ms;
    const char *consistency = json_string_value(json_object_get(doc, "consistency"));
    m->consistency = consistency != NULL ? consistency : m->consistency;
    for (size_t j = 0; j < json_array_size(orders); j++) {
        if (!order_parse(json_array_get(orders, j), &m->all[m->all_count++])) {
            return bad(out, "orders");
        }
    }
    if (json_is_string(next)) {
        uint8_t key[ROUTER_KEY_BYTES_MAX];
        int n = hex_decode(json_string_value(next), key);
        if (n <= 0) {
            return bad(out, "next");
        }
        if (!m->has_frontier || key_compare(key, (size_t)n, m->frontier, m->frontier_len) < 0) {
            memcpy(m->frontier, key, (size_t)n);
            m->frontier_len = (size_t)n;
        }
        m->has_frontier = true;
    }
    return 0;
}

/* The page: up to limit orders in key order, none past the nearest frontier, each once. */
static void orders_page(struct orders_merge *m)
{
    qsort(m->all, m->all_count, sizeof(*m->all), merge_order_compare);
    uint32_t limit = m->route->limit;
    size_t j = 0;
    const struct merge_order *last = NULL;
    for (; j < m->all_count && m->page.count < limit; j++) {
        const struct merge_order *o = &m->all[j];
        if (m->has_frontier && key_compare(o->key, o->key_len, m->frontier, m->frontier_len) > 0) {
            break;
        }
        if (last != NULL && merge_order_compare(last, o) == 0) {
            continue; /* the same order from two members: listed once */
        }
        m->page.orders[m->page.count++] = o->order;
        last = o;
    }
    if (m->page.count == limit) {
        m->page.has_next = m->has_frontier || j < m->all_count;
        hex_encode(last->key, last->key_len, m->page.next_token);
    } else if (m->has_frontier) {
        m->page.has_next = true;
        hex_encode(m->frontier, m->frontier_len, m->page.next_token);
    }
    if (!m->page.has_next) {
        m->page.next_token[0] = '\0';
    }
}

static void orders_render(struct http_text *b, const void *user)
{
    const struct orders_merge *m = user;
    int64_t n =
        query_orders_json(&m->route->customer, &m->page, m->gsi_lag_ms, b->dst, b->capacity);
    if (n < 0) {
        b->overflow = true;
        return;
    }
    b->len = (size_t)n;
    if (m->consistency != NULL) {
        b->len--; /* reopen the object */
        consistency_put(b, m->consistency);
        http_text_put(b, "}");
    }
}

int router_merge_orders(const struct query_route *route, const char *const *bodies, uint32_t count,
                        struct router_merged *out)
{
    ASSERT(route->endpoint == QUERY_EP_ORDERS);
    ASSERT(count >= 1 && count <= ROUTER_NODES_TOTAL_MAX);
    json_t *docs[ROUTER_NODES_TOTAL_MAX] = {0};
    struct orders_merge m = {.route = route};
    int rc = router_docs_load(bodies, count, docs, out);
    size_t total = 0;
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        total += json_array_size(json_object_get(docs[i], "orders"));
    }
    m.all = rc == 0 ? calloc(total > 0 ? total : 1, sizeof(*m.all)) : NULL;
    m.page.orders = rc == 0 ? calloc(route->limit, sizeof(*m.page.orders)) : NULL;
    rc = rc != 0 ? rc : (m.all == NULL || m.page.orders == NULL ? -ENOMEM : 0);
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        rc = orders_member(&m, docs[i], out);
    }
    if (rc == 0) {
        orders_page(&m);
        rc = router_render_new(orders_render, &m, query_orders_json_bound(m.page.count), out);
    }
    free(m.all);
    free(m.page.orders);
    router_docs_free(docs, count);
    return rc;
}

/* ---- /v1/partitions ------------------------------------------------------------------------ */

struct partition_sum {
    bool present;
    char key[SHARD_KEY_TEXT_SIZE];
    uint64_t events;
    uint64_t bytes;
    uint64_t blocks;
    bool has_rate;
    double rate;
};

struct partitions_merge {
    int32_t day;
    uint32_t shards;
    struct partition_sum *sums; /* SHARD_COUNT_MAX */
    struct router_offsets as_of;
};

static bool partition_add(struct partitions_merge *m, const json_t *p)
{
    uint64_t shard = 0;
    const char *key = json_string_value(json_object_get(p, "partition"));
    const json_t *rate = json_object_get(p, "write_rate_per_s");
    if (!uint_field(p, "shard", &shard) || shard >= SHARD_COUNT_MAX || key == NULL ||
        strlen(key) >= SHARD_KEY_TEXT_SIZE || !(json_is_null(rate) || json_is_number(rate))) {
        return false;
    }
    struct partition_sum *s = &m->sums[shard];
    uint64_t v[3];
    if (!uint_field(p, "events", &v[0]) || !uint_field(p, "bytes", &v[1]) ||
        !uint_field(p, "blocks", &v[2])) {
        return false;
    }
    s->present = true;
    snprintf(s->key, sizeof(s->key), "%s", key);
    s->events += v[0];
    s->bytes += v[1];
    s->blocks += v[2];
    if (json_is_number(rate)) {
        s->rate += json_number_value(rate);
        s->has_rate = true;
    }
    return true;
}

static int partitions_member(struct partitions_merge *m, const json_t *doc,
                             struct router_merged *out)
{
    uint64_t shards = 0;
    int32_t day = 0;
    const json_t *list = json_object_get(doc, "partitions");
    if (!date_field(doc, "day", &day) || !uint_field(doc, "shards", &shards) ||
        shards > SHARD_COUNT_MAX || !json_is_array(list)) {
        return bad(out, "partitions");
    }
    m->day = day;
    m->shards = (uint32_t)shards > m->shards ? (uint32_t)shards : m->shards;
    for (size_t j = 0; j < json_array_size(list); j++) {
        if (!partition_add(m, json_array_get(list, j))) {
            return bad(out, "partitions");
        }
    }
    return offsets_add(&m->as_of, json_object_get(doc, "as_of")) ? 0 : bad(out, "as_of");
}

static void partitions_render(struct http_text *b, const void *user)
{
    const struct partitions_merge *m = user;
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(m->day, date);
    http_text_put(b, "{\"day\":\"%s\",\"shards\":%u,\"partitions\":[", date, m->shards);
    bool first = true;
    for (uint32_t shard = 0; shard < SHARD_COUNT_MAX; shard++) {
        const struct partition_sum *s = &m->sums[shard];
        if (!s->present) {
            continue;
        }
        char rate[32];
        snprintf(rate, sizeof(rate), s->has_rate ? "%.1f" : "null", s->rate);
        http_text_put(b,
                      "%s{\"shard\":%u,\"partition\":\"%s\",\"events\":%" PRIu64
                      ",\"bytes\":%" PRIu64 ",\"blocks\":%" PRIu64 ",\"write_rate_per_s\":%s}",
                      first ? "" : ",", shard, s->key, s->events, s->bytes, s->blocks, rate);
        first = false;
    }
    http_text_put(b, "]");
    if (m->as_of.present) {
        offsets_put(b, "as_of", &m->as_of);
    }
    http_text_put(b, "}");
}

int router_merge_partitions(const char *const *bodies, uint32_t count, struct router_merged *out)
{
    ASSERT(count >= 1 && count <= ROUTER_NODES_TOTAL_MAX);
    json_t *docs[ROUTER_NODES_TOTAL_MAX] = {0};
    struct partitions_merge *m = calloc(1, sizeof(*m));
    int rc = m != NULL ? router_docs_load(bodies, count, docs, out) : -ENOMEM;
    if (rc == 0) {
        m->sums = calloc(SHARD_COUNT_MAX, sizeof(*m->sums));
        rc = m->sums != NULL ? 0 : -ENOMEM;
    }
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        rc = partitions_member(m, docs[i], out);
    }
    if (rc == 0) {
        rc = router_render_new(partitions_render, m, 64u * 1024, out);
        out->as_of = m->as_of;
    }
    if (m != NULL) {
        free(m->sums);
    }
    free(m);
    router_docs_free(docs, count);
    return rc;
}
