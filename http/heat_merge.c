/*
 * The heat history merge (http.h, "heat history documents"): one GET /v1/heat/history document
 * from those of nodes whose heats add up (one consumer group's members read disjoint Kafka
 * partitions). The router answers /v1/heat/history and makes its stream frames with it; the
 * load test sums its nodes' histories into its report with it. It lives here, under both,
 * because the layering lets the load test use neither the router nor the query service, and
 * the merge is JSON in, JSON out, which http/ already reads with jansson.
 *
 * Columns are matched by t and their per-day arrays summed element-wise (the shorter padded
 * with zeros). The window: "second" is the oldest of the members' newest complete seconds and
 * no column after it is given: a later column is still being counted by that member (and a
 * member amends its columns while late events of them come), so a sum there would show a dip
 * that fills in later, drawn as a false drop at the right edge. Growths are the union, one per
 * (day, from, to), the oldest kept, those with t in the window, oldest first. The members'
 * shard_capacity_eps should agree (one flag for the whole deployment); when they differ the
 * merged one is the largest and "warnings" says so.
 *
 * Invariants: every member document has version 1, columns of non-negative integer arrays of at
 * most HTTP_HEAT_SHARDS_MAX cells, and sums fit int64_t, else the merge fails naming the field;
 * the merged columns are ascending t in (second - seconds, second].
 *
 * Rejected: the newest member's newest second as the window's end (what the load test took
 * before): every column past the slowest member's second lacks that member's events, and at
 * the end of a run it gains at most the second or two the slowest member is behind.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

_Static_assert(sizeof(json_int_t) == sizeof(int64_t), "history sums are checked against int64_t");
#define HEAT_MERGE_DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

static int heat_merge_bad(char *error, size_t error_size, const char *field)
{
    snprintf(error, error_size, "a node's heat has no valid \"%s\"", field);
    return -DS_ECORRUPT;
}

static bool heat_merge_uint(const json_t *o, const char *name, uint64_t *out)
{
    const json_t *v = json_object_get(o, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        return false;
    }
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* The members' heads: the oldest newest second, the capacities. */
struct heat_merge_head {
    bool has_second;
    int64_t second;
    uint64_t capacity_eps;
    bool capacity_differs;
    uint64_t max_shards;
};

static bool heat_merge_head_member(struct heat_merge_head *h, const json_t *doc, uint32_t i)
{
    const json_t *second = json_object_get(doc, "second");
    const json_t *version = json_object_get(doc, "version");
    uint64_t capacity = 0;
    uint64_t max_shards = 0;
    if (!json_is_integer(version) || json_integer_value(version) != 1 ||
        !(json_is_null(second) || json_is_integer(second)) ||
        !heat_merge_uint(doc, "shard_capacity_eps", &capacity) ||
        !heat_merge_uint(doc, "max_shards", &max_shards) ||
        !json_is_array(json_object_get(doc, "columns"))) {
        return false;
    }
    if (json_is_integer(second)) {
        int64_t s = json_integer_value(second);
        h->second = h->has_second && h->second < s ? h->second : s;
        h->has_second = true;
    }
    h->capacity_differs |= i > 0 && capacity != h->capacity_eps;
    h->capacity_eps = capacity > h->capacity_eps ? capacity : h->capacity_eps;
    h->max_shards = max_shards > h->max_shards ? max_shards : h->max_shards;
    return true;
}

/* Adds one column's days {"DAY":[n,...],...} into slot (an object of the same shape). */
static bool heat_merge_column_add(json_t *slot, const json_t *days)
{
    ASSERT(json_is_object(slot));
    if (!json_is_object(days)) {
        return false;
    }
    const char *day = NULL;
    json_t *counts = NULL;
    json_object_foreach((json_t *)days, day, counts)
    {
        if (!json_is_array(counts) || json_array_size(counts) > HTTP_HEAT_SHARDS_MAX) {
            return false;
        }
        json_t *sum = json_object_get(slot, day);
        if (sum == NULL) {
            sum = json_array();
            json_object_set_new(slot, day, sum);
        }
        for (size_t k = 0; k < json_array_size(counts); k++) {
            const json_t *v = json_array_get(counts, k);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                return false;
            }
            if (k == json_array_size(sum)) {
                json_array_append_new(sum, json_integer(0));
            }
            json_t *cell = json_array_get(sum, k);
            if (json_integer_value(v) > INT64_MAX - json_integer_value(cell)) {
                return false;
            }
            json_integer_set(cell, json_integer_value(cell) + json_integer_value(v));
        }
    }
    return true;
}

/* Sums every member's columns with t in [first, first + seconds) into slots[t - first]. */
static bool heat_merge_columns(json_t *const *docs, uint32_t count, int64_t first, uint32_t seconds,
                               json_t **slots)
{
    ASSERT(seconds >= 1 && seconds <= HTTP_HEAT_HISTORY_SECONDS_MAX);
    for (uint32_t i = 0; i < count; i++) {
        const json_t *columns = json_object_get(docs[i], "columns");
        for (size_t j = 0; j < json_array_size(columns); j++) {
            const json_t *c = json_array_get(columns, j);
            const json_t *t = json_object_get(c, "t");
            if (!json_is_integer(t)) {
                return false;
            }
            int64_t at = json_integer_value(t) - first;
            if (at < 0 || at >= (int64_t)seconds) {
                continue; /* outside the window, or not complete in every member yet */
            }
            slots[at] = slots[at] != NULL ? slots[at] : json_object();
            if (!heat_merge_column_add(slots[at], json_object_get(c, "days"))) {
                return false;
            }
        }
    }
    return true;
}

/* A growth as the union compares it. */
struct heat_merge_growth {
    const json_t *src;
    const char *day;
    int64_t t;
    uint64_t from;
    uint64_t to;
};

/* (day, from, to), then oldest first: the first of a run is the one kept. */
static int heat_merge_growth_same_compare(const void *a, const void *b)
{
    const struct heat_merge_growth *x = a;
    const struct heat_merge_growth *y = b;
    int c = strcmp(x->day, y->day);
    if (c != 0) {
        return c;
    }
    if (x->from != y->from) {
        return x->from < y->from ? -1 : 1;
    }
    if (x->to != y->to) {
        return x->to < y->to ? -1 : 1;
    }
    return (x->t > y->t) - (x->t < y->t);
}

static int heat_merge_growth_oldest_compare(const void *a, const void *b)
{
    const struct heat_merge_growth *x = a;
    const struct heat_merge_growth *y = b;
    return x->t != y->t ? (x->t < y->t ? -1 : 1) : heat_merge_growth_same_compare(a, b);
}

/* The members' growths with t in [t_min, t_max] into all (total of them at most); returns the
 * count, or -1 when one is malformed. */
static int64_t heat_merge_growths_collect(json_t *const *docs, uint32_t count, int64_t t_min,
                                          int64_t t_max, struct heat_merge_growth *all)
{
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "growths");
        for (size_t j = 0; j < json_array_size(list); j++) {
            const json_t *o = json_array_get(list, j);
            struct heat_merge_growth *g = &all[n];
            uint64_t t = 0;
            *g = (struct heat_merge_growth){.src = o,
                                            .day = json_string_value(json_object_get(o, "day"))};
            if (g->day == NULL || !heat_merge_uint(o, "from", &g->from) ||
                !heat_merge_uint(o, "to", &g->to) || !heat_merge_uint(o, "t", &t)) {
                return -1;
            }
            g->t = (int64_t)t;
            n += g->t >= t_min && g->t <= t_max ? 1u : 0u;
        }
    }
    return (int64_t)n;
}

/* "growths": the union of the members' with t in [t_min, t_max], oldest first. */
static int heat_merge_growths(json_t *const *docs, uint32_t count, int64_t t_min, int64_t t_max,
                              json_t *merged, char *error, size_t error_size)
{
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "growths");
        if (!json_is_array(list)) {
            return heat_merge_bad(error, error_size, "growths");
        }
        total += json_array_size(list);
    }
    struct heat_merge_growth *all = calloc(total > 0 ? total : 1, sizeof(*all));
    if (all == NULL) {
        return -ENOMEM;
    }
    int64_t n = heat_merge_growths_collect(docs, count, t_min, t_max, all);
    if (n < 0) {
        free(all);
        return heat_merge_bad(error, error_size, "growths");
    }
    qsort(all, (size_t)n, sizeof(*all), heat_merge_growth_same_compare);
    size_t kept = 0;
    for (size_t i = 0; i < (size_t)n; i++) {
        const struct heat_merge_growth *p = kept > 0 ? &all[kept - 1] : NULL;
        if (p == NULL || strcmp(p->day, all[i].day) != 0 || p->from != all[i].from ||
            p->to != all[i].to) {
            all[kept++] = all[i];
        }
    }
    qsort(all, kept, sizeof(*all), heat_merge_growth_oldest_compare);
    json_t *arr = json_array();
    for (size_t j = 0; j < kept; j++) {
        json_array_append(arr, (json_t *)all[j].src);
    }
    json_object_set_new(merged, "growths", arr);
    free(all);
    return 0;
}

/* The merged head, up to the lists. */
static json_t *heat_merge_head_json(const struct heat_merge_head *h, uint32_t seconds)
{
    json_t *m = json_object();
    json_object_set_new(m, "version", json_integer(1));
    json_object_set_new(m, "second", h->has_second ? json_integer(h->second) : json_null());
    json_object_set_new(m, "seconds", json_integer(seconds));
    json_object_set_new(m, "shard_capacity_eps", json_integer((json_int_t)h->capacity_eps));
    json_object_set_new(m, "max_shards", json_integer((json_int_t)h->max_shards));
    return m;
}

/* The merged document, or NULL with *rc. */
static json_t *heat_merge_doc(json_t *const *docs, uint32_t count, uint32_t seconds, int *rc,
                              char *error, size_t error_size)
{
    struct heat_merge_head h = {0};
    for (uint32_t i = 0; i < count; i++) {
        if (!heat_merge_head_member(&h, docs[i], i)) {
            *rc = heat_merge_bad(error, error_size, "version");
            return NULL;
        }
    }
    json_t *m = heat_merge_head_json(&h, seconds);
    json_t *columns = json_array();
    json_object_set_new(m, "columns", columns);
    int64_t first = h.second - (int64_t)seconds + 1;
    json_t **slots = h.has_second ? calloc(seconds, sizeof(*slots)) : NULL;
    *rc = !h.has_second ? 0 : (slots != NULL ? 0 : -ENOMEM);
    if (*rc == 0 && h.has_second && !heat_merge_columns(docs, count, first, seconds, slots)) {
        *rc = heat_merge_bad(error, error_size, "columns");
    }
    for (uint32_t k = 0; slots != NULL && k < seconds; k++) {
        if (slots[k] != NULL && *rc == 0) {
            json_array_append_new(
                columns, json_pack("{s:I,s:o}", "t", (json_int_t)(first + k), "days", slots[k]));
        } else {
            json_decref(slots[k]);
        }
    }
    free(slots);
    if (*rc == 0) {
        *rc = heat_merge_growths(docs, count, first, h.has_second ? h.second : -1, m, error,
                                 error_size);
    }
    if (*rc == 0 && h.capacity_differs) {
        json_object_set_new(m, "warnings",
                            json_pack("[s]", "members' shard_capacity_eps differ: the largest is "
                                             "shown (start every node with one --shard-capacity)"));
    }
    if (*rc != 0) {
        json_decref(m);
        return NULL;
    }
    json_object_set_new(m, "members", json_integer(count));
    return m;
}

int http_heat_history_merge(uint32_t seconds, const char *const *bodies, uint32_t count,
                            char **body, size_t *len, char *error, size_t error_size)
{
    ASSERT(count >= 1 && count <= HTTP_HEAT_MERGE_MEMBERS_MAX);
    ASSERT(seconds >= 1 && seconds <= HTTP_HEAT_HISTORY_SECONDS_MAX);
    ASSERT(body != NULL && len != NULL && error != NULL && error_size > 0);
    json_t *docs[HTTP_HEAT_MERGE_MEMBERS_MAX] = {0};
    int rc = 0;
    for (uint32_t i = 0; i < count && rc == 0; i++) {
        json_error_t err;
        docs[i] = json_loads(bodies[i], 0, &err);
        if (!json_is_object(docs[i])) {
            snprintf(error, error_size, "a node's answer is not a JSON object: %.80s", err.text);
            rc = -DS_ECORRUPT;
        }
    }
    json_t *merged = rc == 0 ? heat_merge_doc(docs, count, seconds, &rc, error, error_size) : NULL;
    char *text = merged != NULL ? json_dumps(merged, HEAT_MERGE_DUMP_FLAGS) : NULL;
    rc = rc != 0 ? rc : (text == NULL ? -ENOMEM : 0);
    if (rc == 0) {
        *body = text;
        *len = strlen(text);
    }
    json_decref(merged);
    for (uint32_t i = 0; i < count; i++) {
        json_decref(docs[i]);
    }
    return rc;
}
