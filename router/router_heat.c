/*
 * Heat through the router: /v1/heat's "merged" document and /v1/heat/history, each one
 * document shaped like a node's, from the answers of one group's members (router.c picks the
 * group as for a count: the members of one consumer group read disjoint Kafka partitions, so
 * their heats add up; two groups' heats would count every write twice).
 *
 * /v1/heat. Partition keys and days are summed per key (rates, events, over-capacity seconds,
 * would-throttle events), rate_peak is the largest member's (the peak of the sum lies between
 * it and the sum of the peaks; the members' peaks may be in different seconds), share is
 * recomputed over the merged rate, and the lists are cut to the asked top again. Each member
 * lists only its own top rows, so a key outside some member's top counts only the members that
 * listed it (a lower bound). Kafka partitions are concatenated (a partition is read by one
 * member of a group). Customers merge as Space-Saving summaries merge (Agarwal, Cormode,
 * Huang, Phillips, Wei, Yi, "Mergeable summaries", PODS 2012): a customer's estimate and error
 * are the sums over members, where a member that did not list it contributes its bound, the
 * least rate it listed when its list is full (an unlisted customer weighs no more there), 0
 * otherwise (it listed every counter it has), to both. So the node's guarantee carries over:
 * no merged estimate is below the truth, nor above it by more than its error_eps. Growths are
 * the union, newest first, one per (day, from, to). "second" is the oldest of the members'
 * last complete seconds.
 *
 * /v1/heat/history: http_heat_history_merge (http/heat_merge.c, which the load test uses too):
 * columns summed by t up to the oldest of the members' newest complete seconds.
 *
 * /v1/heat/stream's frames (router_heat_frame) are made from these merges: the router has no
 * heat clock, so a frame's history is a merged history asked for the seconds since the previous
 * frame, cut to the columns after that frame's second (each column is then sent once every
 * member completed it), and the columns of earlier seconds whose merged cells differ from the
 * previous turn's merged history: a member amended the column (an event of that second read
 * late), so the frame carries the new sum and the console repaints it. A member amends only
 * inside its heat's window, so each turn asks at least that many seconds (ROUTER_HEAT_AMEND_S)
 * and the comparison is bounded by it. Rejected: remembering each member's last revision and
 * asking for what changed since (the fan-out sends one target to every member, and a member's
 * revision means nothing after a failover to the other group); comparing merged sums needs
 * neither and costs one compare per column of the window.
 *
 * Rejected: re-rendering through the node's renderer (query/heat_render.c) from a rebuilt
 * struct shard_heat_report: its lists hold SHARD_HEAT_TOP_MAX rows and no error for merged
 * customers, and a report is 26 KiB per member; the answers are small documents, so they are
 * merged as documents (jansson) and rounded as the node rounds them.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_private.h"

/* Growths the merged /v1/heat lists: as many as a node keeps. */
#define ROUTER_HEAT_GROWTHS_MAX SHARD_GROWTHS_KEPT
_Static_assert(ROUTER_NODES_TOTAL_MAX <= HTTP_HEAT_MERGE_MEMBERS_MAX, "a merge takes every node");
_Static_assert(ROUTER_HISTORY_SECONDS_MAX == HTTP_HEAT_HISTORY_SECONDS_MAX, "one history length");
_Static_assert(SHARD_HEAT_HISTORY_S == HTTP_HEAT_HISTORY_SECONDS_MAX, "one history length");
_Static_assert(SHARD_COUNT_MAX == HTTP_HEAT_SHARDS_MAX, "a merged day holds every shard");
#define ROUTER_HEAT_DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12))

static int heat_bad(struct router_merged *out, const char *field)
{
    snprintf(out->error, sizeof(out->error), "a node's heat has no valid \"%s\"", field);
    return -DS_ECORRUPT;
}

static bool heat_uint(const json_t *o, const char *name, uint64_t *out)
{
    const json_t *v = json_object_get(o, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        return false;
    }
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static bool heat_real(const json_t *o, const char *name, double *out)
{
    const json_t *v = json_object_get(o, name);
    if (!json_is_number(v) || json_number_value(v) < 0) {
        return false;
    }
    *out = json_number_value(v);
    return true;
}

/* A non-negative value rounded to decimals places, as the node prints it (%.1f, %.4f). */
static json_t *heat_rounded(double v, double scale)
{
    if (!(v * scale < 1e15)) {
        return json_real(v); /* no fraction left to round (and beyond int64_t) */
    }
    return json_real((double)(int64_t)(v * scale + 0.5) / scale);
}

static json_t *heat_u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static double heat_ratio(double part, double whole)
{
    double r = whole > 0 ? part / whole : 0.0;
    return r > 1.0 ? 1.0 : r;
}

/* ---- partition keys and days: sums per key ------------------------------------------------- */

/* One member's row of "partitions" (key "key") or "days" (key "day"). */
struct heat_row {
    const char *key;
    const json_t *src; /* borrowed from the member's document */
    uint64_t shard;
    uint64_t shards; /* day_shards or shards */
    uint64_t rate_now;
    uint64_t rate_peak;
    uint64_t events;
    uint64_t over_capacity_seconds;
    uint64_t would_throttle_events;
    double rate_avg;
};

static int heat_row_key_compare(const void *a, const void *b)
{
    return strcmp(((const struct heat_row *)a)->key, ((const struct heat_row *)b)->key);
}

/* Hottest first (as a node lists them), then the key, so the order is the same every time. */
static int heat_row_rank_compare(const void *a, const void *b)
{
    const struct heat_row *x = a;
    const struct heat_row *y = b;
    if (x->rate_now != y->rate_now) {
        return x->rate_now > y->rate_now ? -1 : 1;
    }
    if (x->events != y->events) {
        return x->events > y->events ? -1 : 1;
    }
    return strcmp(x->key, y->key);
}

static bool heat_row_parse(const json_t *o, bool partition, struct heat_row *row)
{
    *row = (struct heat_row){.src = o};
    row->key = json_string_value(json_object_get(o, partition ? "key" : "day"));
    bool ok = row->key != NULL && heat_uint(o, "rate_now", &row->rate_now) &&
              heat_uint(o, "rate_peak", &row->rate_peak) && heat_uint(o, "events", &row->events) &&
              heat_real(o, "rate_avg", &row->rate_avg) &&
              heat_uint(o, partition ? "day_shards" : "shards", &row->shards);
    if (ok && partition) {
        ok = heat_uint(o, "shard", &row->shard) &&
             heat_uint(o, "over_capacity_seconds", &row->over_capacity_seconds) &&
             heat_uint(o, "would_throttle_events", &row->would_throttle_events) &&
             json_is_string(json_object_get(o, "day"));
    }
    return ok;
}

/* Sums the runs of equal keys of rows[0..n) (sorted by key) into their first row; returns the
 * number of distinct keys, now at rows[0..k). */
static size_t heat_rows_fold(struct heat_row *rows, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && strcmp(rows[k - 1].key, rows[i].key) == 0) {
            struct heat_row *s = &rows[k - 1];
            s->rate_now += rows[i].rate_now;
            s->events += rows[i].events;
            s->rate_avg += rows[i].rate_avg;
            s->over_capacity_seconds += rows[i].over_capacity_seconds;
            s->would_throttle_events += rows[i].would_throttle_events;
            s->rate_peak = rows[i].rate_peak > s->rate_peak ? rows[i].rate_peak : s->rate_peak;
            s->shards = rows[i].shards > s->shards ? rows[i].shards : s->shards;
            continue;
        }
        rows[k++] = rows[i];
    }
    ASSERT(k <= n);
    return k;
}

static json_t *heat_row_json(const struct heat_row *r, bool partition, uint64_t rate_total)
{
    json_t *o = json_object();
    if (partition) {
        json_object_set_new(o, "key", json_string(r->key));
        json_object_set(o, "day", json_object_get(r->src, "day"));
        json_object_set_new(o, "shard", heat_u64(r->shard));
        json_object_set_new(o, "day_shards", heat_u64(r->shards));
    } else {
        json_object_set_new(o, "day", json_string(r->key));
        json_object_set_new(o, "shards", heat_u64(r->shards));
    }
    json_object_set_new(o, "rate_now", heat_u64(r->rate_now));
    json_object_set_new(o, "rate_avg", heat_rounded(r->rate_avg, 10.0));
    json_object_set_new(o, "rate_peak", heat_u64(r->rate_peak));
    json_object_set_new(o, "events", heat_u64(r->events));
    json_object_set_new(o, "share",
                        heat_rounded(heat_ratio((double)r->rate_now, (double)rate_total), 1e4));
    if (partition) {
        json_object_set_new(o, "over_capacity_seconds", heat_u64(r->over_capacity_seconds));
        json_object_set_new(o, "would_throttle_events", heat_u64(r->would_throttle_events));
    }
    return o;
}

/* The merged list "partitions" (partition) or "days" of docs[0..count), top rows at most. */
static int heat_merge_rows(json_t *const *docs, uint32_t count, bool partition, uint32_t top,
                           uint64_t rate_total, json_t *merged, struct router_merged *out)
{
    ASSERT(count >= 1);
    ASSERT(top >= 1 && top <= SHARD_HEAT_TOP_MAX);
    const char *name = partition ? "partitions" : "days";
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], name);
        if (!json_is_array(list)) {
            return heat_bad(out, name);
        }
        total += json_array_size(list);
    }
    struct heat_row *rows = calloc(total > 0 ? total : 1, sizeof(*rows));
    if (rows == NULL) {
        return -ENOMEM;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], name);
        for (size_t j = 0; j < json_array_size(list); j++) {
            if (!heat_row_parse(json_array_get(list, j), partition, &rows[n++])) {
                free(rows);
                return heat_bad(out, name);
            }
        }
    }
    qsort(rows, n, sizeof(*rows), heat_row_key_compare);
    n = heat_rows_fold(rows, n);
    qsort(rows, n, sizeof(*rows), heat_row_rank_compare);
    json_t *arr = json_array();
    for (size_t j = 0; j < n && j < top; j++) {
        json_array_append_new(arr, heat_row_json(&rows[j], partition, rate_total));
    }
    json_object_set_new(merged, name, arr);
    free(rows);
    return 0;
}

/* ---- Kafka partitions: concatenated -------------------------------------------------------- */

struct heat_source {
    json_int_t partition;
    uint32_t member;
    const json_t *src;
};

static int heat_source_compare(const void *a, const void *b)
{
    const struct heat_source *x = a;
    const struct heat_source *y = b;
    if (x->partition != y->partition) {
        return x->partition < y->partition ? -1 : 1;
    }
    return (x->member > y->member) - (x->member < y->member);
}

static int heat_merge_sources(json_t *const *docs, uint32_t count, json_t *merged,
                              struct router_merged *out)
{
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "kafka_partitions");
        if (!json_is_array(list)) {
            return heat_bad(out, "kafka_partitions");
        }
        total += json_array_size(list);
    }
    struct heat_source *all = calloc(total > 0 ? total : 1, sizeof(*all));
    if (all == NULL) {
        return -ENOMEM;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "kafka_partitions");
        for (size_t j = 0; j < json_array_size(list); j++) {
            const json_t *p = json_array_get(list, j);
            if (!json_is_integer(json_object_get(p, "partition"))) {
                free(all);
                return heat_bad(out, "kafka_partitions");
            }
            all[n++] =
                (struct heat_source){json_integer_value(json_object_get(p, "partition")), i, p};
        }
    }
    qsort(all, n, sizeof(*all), heat_source_compare);
    json_t *arr = json_array();
    for (size_t j = 0; j < n; j++) {
        json_array_append(arr, (json_t *)all[j].src);
    }
    json_object_set_new(merged, "kafka_partitions", arr);
    free(all);
    return 0;
}

/* ---- customers: Space-Saving summaries merged ---------------------------------------------- */

struct heat_customer {
    const json_t *id; /* borrowed: an integer or a string */
    uint32_t member;
    double rate_eps;
    double error_eps;
};

/* Integers before strings, then by value (a string by its bytes), then by member. */
static int heat_customer_compare(const void *a, const void *b)
{
    const struct heat_customer *x = a;
    const struct heat_customer *y = b;
    bool xs = json_is_string(x->id);
    bool ys = json_is_string(y->id);
    if (xs != ys) {
        return xs ? 1 : -1;
    }
    int c = 0;
    if (!xs) {
        json_int_t u = json_integer_value(x->id);
        json_int_t v = json_integer_value(y->id);
        c = (u > v) - (u < v);
    } else {
        size_t lx = json_string_length(x->id);
        size_t ly = json_string_length(y->id);
        c = memcmp(json_string_value(x->id), json_string_value(y->id), lx < ly ? lx : ly);
        c = c != 0 ? c : (lx > ly) - (lx < ly);
    }
    return c != 0 ? c : (x->member > y->member) - (x->member < y->member);
}

static int heat_customer_rank_compare(const void *a, const void *b)
{
    const struct heat_customer *x = a;
    const struct heat_customer *y = b;
    if (x->rate_eps != y->rate_eps) {
        return x->rate_eps > y->rate_eps ? -1 : 1;
    }
    return heat_customer_compare(a, b);
}

/* What each member's summary says of the customers it did not list, and its total rate. */
struct heat_member_summary {
    double bound_eps; /* an unlisted customer's rate there is at most this */
    double total_eps; /* the member's whole customer rate (the denominator of its shares) */
};

/* One member's customers into all[*n..]; its summary from its list (listed hottest first). */
static bool heat_customers_member(const json_t *list, uint32_t member, uint32_t top,
                                  struct heat_customer *all, size_t *n,
                                  struct heat_member_summary *s)
{
    double best_share = 0.0;
    *s = (struct heat_member_summary){0};
    for (size_t j = 0; j < json_array_size(list); j++) {
        const json_t *c = json_array_get(list, j);
        const json_t *id = json_object_get(c, "customer_id");
        struct heat_customer *h = &all[(*n)++];
        double share = 0.0;
        *h = (struct heat_customer){.id = id, .member = member};
        if (!(json_is_integer(id) || json_is_string(id)) ||
            !heat_real(c, "rate_eps", &h->rate_eps) || !heat_real(c, "error_eps", &h->error_eps) ||
            !heat_real(c, "share", &share)) {
            return false;
        }
        /* The member's total from its largest share: the fewest digits lost to rounding. */
        if (share > best_share) {
            best_share = share;
            s->total_eps = h->rate_eps / share;
        }
        if (json_array_size(list) >= top) {
            s->bound_eps = h->rate_eps; /* the last row is the least listed */
        }
    }
    return true;
}

/* Sums the runs of one customer in all[0..n) (sorted by id, then member) into their first
 * entry, each member that did not list it adding its bound to both the estimate and the
 * error. Returns the customers left, or SIZE_MAX when a member listed one customer twice (not
 * a node's answer). */
static size_t heat_customers_fold(struct heat_customer *all, size_t n,
                                  const struct heat_member_summary *s, uint32_t count)
{
    double bound_total = 0.0;
    for (uint32_t i = 0; i < count; i++) {
        bound_total += s[i].bound_eps;
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        struct heat_customer m = all[i];
        double bound_listed = s[m.member].bound_eps;
        size_t j = i + 1;
        for (; j < n && json_equal(all[j].id, m.id); j++) {
            if (all[j].member == all[j - 1].member) {
                return SIZE_MAX;
            }
            m.rate_eps += all[j].rate_eps;
            m.error_eps += all[j].error_eps;
            bound_listed += s[all[j].member].bound_eps;
        }
        /* The unlisted members' bounds (the difference may round below 0 by an ulp). */
        double unlisted = bound_total > bound_listed ? bound_total - bound_listed : 0.0;
        m.rate_eps += unlisted;
        m.error_eps += unlisted;
        all[k++] = m;
        i = j;
    }
    ASSERT(k <= n);
    return k;
}

static int heat_merge_customers(json_t *const *docs, uint32_t count, uint32_t top, json_t *merged,
                                struct router_merged *out)
{
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "customers");
        if (!json_is_array(list)) {
            return heat_bad(out, "customers");
        }
        total += json_array_size(list);
    }
    struct heat_customer *all = calloc(total > 0 ? total : 1, sizeof(*all));
    struct heat_member_summary *s = calloc(count, sizeof(*s));
    int rc = all != NULL && s != NULL ? 0 : -ENOMEM;
    size_t n = 0;
    double rate_total = 0.0;
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        rc = heat_customers_member(json_object_get(docs[i], "customers"), i, top, all, &n, &s[i])
                 ? 0
                 : heat_bad(out, "customers");
        rate_total += s[i].total_eps;
    }
    if (rc == 0) {
        qsort(all, n, sizeof(*all), heat_customer_compare);
        n = heat_customers_fold(all, n, s, count);
        rc = n != SIZE_MAX ? 0 : heat_bad(out, "customers");
    }
    if (rc == 0) {
        qsort(all, n, sizeof(*all), heat_customer_rank_compare);
        json_t *arr = json_array();
        for (size_t j = 0; j < n && j < top; j++) {
            json_t *o = json_object();
            json_object_set(o, "customer_id", (json_t *)all[j].id);
            json_object_set_new(o, "rate_eps", heat_rounded(all[j].rate_eps, 10.0));
            json_object_set_new(o, "error_eps", heat_rounded(all[j].error_eps, 10.0));
            json_object_set_new(o, "share",
                                heat_rounded(heat_ratio(all[j].rate_eps, rate_total), 1e4));
            json_array_append_new(arr, o);
        }
        json_object_set_new(merged, "customers", arr);
    }
    free(all);
    free(s);
    return rc;
}

/* ---- growths: a union ---------------------------------------------------------------------- */

struct heat_growth {
    const json_t *src;
    const char *day;
    const char *at;
    uint64_t from;
    uint64_t to;
};

/* (day, from, to), then the earliest made: the first of a run is the one kept. */
static int heat_growth_same_compare(const void *a, const void *b)
{
    const struct heat_growth *x = a;
    const struct heat_growth *y = b;
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
    return strcmp(x->at, y->at);
}

/* Newest first by the time it was made. */
static int heat_growth_newest_compare(const void *a, const void *b)
{
    const struct heat_growth *x = a;
    const struct heat_growth *y = b;
    int c = strcmp(y->at, x->at);
    return c != 0 ? c : heat_growth_same_compare(a, b);
}

static bool heat_growth_parse(const json_t *o, struct heat_growth *g)
{
    *g = (struct heat_growth){.src = o};
    g->day = json_string_value(json_object_get(o, "day"));
    g->at = json_string_value(json_object_get(o, "at"));
    return g->day != NULL && g->at != NULL && heat_uint(o, "from", &g->from) &&
           heat_uint(o, "to", &g->to);
}

/* Removes the repeats of one (day, from, to) from g[0..n) (sorted by heat_growth_same_compare),
 * keeping the oldest; returns the count left. */
static size_t heat_growths_unique(struct heat_growth *g, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct heat_growth *p = k > 0 ? &g[k - 1] : NULL;
        if (p != NULL && strcmp(p->day, g[i].day) == 0 && p->from == g[i].from &&
            p->to == g[i].to) {
            continue;
        }
        g[k++] = g[i];
    }
    return k;
}

/* The union of docs' "growths", newest first, at most ROUTER_HEAT_GROWTHS_MAX. */
static int heat_merge_growths(json_t *const *docs, uint32_t count, json_t *merged,
                              struct router_merged *out)
{
    size_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "growths");
        if (!json_is_array(list)) {
            return heat_bad(out, "growths");
        }
        total += json_array_size(list);
    }
    struct heat_growth *all = calloc(total > 0 ? total : 1, sizeof(*all));
    if (all == NULL) {
        return -ENOMEM;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "growths");
        for (size_t j = 0; j < json_array_size(list); j++) {
            if (!heat_growth_parse(json_array_get(list, j), &all[n])) {
                free(all);
                return heat_bad(out, "growths");
            }
            n++;
        }
    }
    qsort(all, n, sizeof(*all), heat_growth_same_compare);
    n = heat_growths_unique(all, n);
    qsort(all, n, sizeof(*all), heat_growth_newest_compare);
    json_t *arr = json_array();
    for (size_t j = 0; j < n && j < ROUTER_HEAT_GROWTHS_MAX; j++) {
        json_array_append(arr, (json_t *)all[j].src);
    }
    json_object_set_new(merged, "growths", arr);
    free(all);
    return 0;
}

/* ---- advice: concatenated ------------------------------------------------------------------ */

/* Every member's advice, one per (case, subject): the same day at its maximum is one fact. */
static int heat_merge_advice(json_t *const *docs, uint32_t count, json_t *merged,
                             struct router_merged *out)
{
    json_t *arr = NULL;
    for (uint32_t i = 0; i < count; i++) {
        const json_t *list = json_object_get(docs[i], "advice");
        if (list == NULL) {
            continue;
        }
        if (!json_is_array(list)) {
            json_decref(arr);
            return heat_bad(out, "advice");
        }
        arr = arr != NULL ? arr : json_array();
        for (size_t j = 0; j < json_array_size(list); j++) {
            const json_t *a = json_array_get(list, j);
            bool seen = false;
            for (size_t k = 0; k < json_array_size(arr) && !seen; k++) {
                const json_t *b = json_array_get(arr, k);
                seen = json_equal(json_object_get(a, "case"), json_object_get(b, "case")) &&
                       json_equal(json_object_get(a, "subject"), json_object_get(b, "subject"));
            }
            if (!seen) {
                json_array_append(arr, (json_t *)a);
            }
        }
    }
    if (arr != NULL) {
        json_object_set_new(merged, "advice", arr);
    }
    return 0;
}

/* ---- /v1/heat: the top-level fields -------------------------------------------------------- */

/* The sums and maxima of the members' top-level fields. */
struct heat_totals {
    const char *second; /* the oldest member's; NULL while none has one */
    uint64_t window_s;
    uint64_t capacity_eps;
    bool capacity_differs;
    uint64_t max_shards;
    uint64_t base_shards;
    bool adaptive;
    bool growth_failed;
    uint64_t sums[6]; /* heat_sum_names */
    bool has_durable;
    uint64_t events_durable;
    int64_t gsi_lag_ms; /* -1: every member's was null */
};

static const char *const heat_sum_names[6] = {
    "growths_total",        "events", "rate_now", "untracked_events", "over_capacity_seconds",
    "would_throttle_events"};

/* Adds one member's head to t; returns NULL, or the name of a field that is not valid. */
static const char *heat_totals_member(struct heat_totals *t, const json_t *doc, uint32_t i)
{
    const json_t *second = json_object_get(doc, "second");
    uint64_t v[4];
    if (!(json_is_null(second) || json_is_string(second)) || !heat_uint(doc, "window_s", &v[0]) ||
        !heat_uint(doc, "shard_capacity_eps", &v[1]) || !heat_uint(doc, "max_shards", &v[2]) ||
        !heat_uint(doc, "base_shards", &v[3]) ||
        !json_is_boolean(json_object_get(doc, "adaptive"))) {
        return "second";
    }
    const char *s = json_string_value(second);
    t->second = s != NULL && (t->second == NULL || strcmp(s, t->second) < 0) ? s : t->second;
    t->window_s = v[0];
    t->capacity_differs |= i > 0 && v[1] != t->capacity_eps;
    t->capacity_eps = v[1] > t->capacity_eps ? v[1] : t->capacity_eps;
    t->max_shards = v[2] > t->max_shards ? v[2] : t->max_shards;
    t->base_shards = v[3] > t->base_shards ? v[3] : t->base_shards;
    t->adaptive = (i == 0 || t->adaptive) && json_is_true(json_object_get(doc, "adaptive"));
    t->growth_failed |= json_is_true(json_object_get(doc, "growth_failed"));
    for (size_t k = 0; k < DS_ARRAY_LEN(heat_sum_names); k++) {
        uint64_t x = 0;
        if (!heat_uint(doc, heat_sum_names[k], &x)) {
            return heat_sum_names[k];
        }
        t->sums[k] += x;
    }
    uint64_t durable = 0;
    if (heat_uint(doc, "events_durable", &durable)) {
        t->has_durable = true;
        t->events_durable += durable;
    }
    uint64_t lag = 0;
    if (heat_uint(doc, "gsi_lag_ms", &lag) && (int64_t)lag > t->gsi_lag_ms) {
        t->gsi_lag_ms = (int64_t)lag;
    }
    return NULL;
}

/* "warnings" of members whose --shard-capacity differ (the colour scale is then not one). */
static json_t *heat_capacity_warnings(void)
{
    return json_pack("[s]", "members' shard_capacity_eps differ: the largest is shown (start "
                            "every node with one --shard-capacity)");
}

/* The merged document's head, up to the lists. */
static json_t *heat_head(const struct heat_totals *t)
{
    json_t *m = json_object();
    json_object_set_new(m, "second", t->second != NULL ? json_string(t->second) : json_null());
    json_object_set_new(m, "window_s", heat_u64(t->window_s));
    json_object_set_new(m, "shard_capacity_eps", heat_u64(t->capacity_eps));
    json_object_set_new(m, "max_shards", heat_u64(t->max_shards));
    json_object_set_new(m, "base_shards", heat_u64(t->base_shards));
    json_object_set_new(m, "adaptive", json_boolean(t->adaptive));
    json_object_set_new(m, "growth_failed", json_boolean(t->growth_failed));
    for (size_t k = 0; k < DS_ARRAY_LEN(heat_sum_names); k++) {
        json_object_set_new(m, heat_sum_names[k], heat_u64(t->sums[k]));
    }
    return m;
}

/* The merged /v1/heat document of docs[0..count) (top rows per list), or NULL with rc set. */
static json_t *heat_merged(json_t *const *docs, uint32_t count, uint32_t top, int *rc,
                           struct router_merged *out)
{
    struct heat_totals t = {.gsi_lag_ms = -1};
    for (uint32_t i = 0; i < count; i++) {
        const char *field = heat_totals_member(&t, docs[i], i);
        if (field != NULL) {
            *rc = heat_bad(out, field);
            return NULL;
        }
    }
    json_t *m = heat_head(&t);
    uint64_t rate = t.sums[2];
    *rc = heat_merge_rows(docs, count, true, top, rate, m, out);
    *rc = *rc != 0 ? *rc : heat_merge_rows(docs, count, false, top, rate, m, out);
    *rc = *rc != 0 ? *rc : heat_merge_sources(docs, count, m, out);
    *rc = *rc != 0 ? *rc : heat_merge_customers(docs, count, top, m, out);
    *rc = *rc != 0 ? *rc : heat_merge_growths(docs, count, m, out);
    *rc = *rc != 0 ? *rc : heat_merge_advice(docs, count, m, out);
    if (*rc != 0) {
        json_decref(m);
        return NULL;
    }
    if (t.has_durable) {
        json_object_set_new(m, "events_durable", heat_u64(t.events_durable));
    }
    json_object_set_new(m, "gsi_lag_ms",
                        t.gsi_lag_ms >= 0 ? json_integer(t.gsi_lag_ms) : json_null());
    json_object_set_new(m, "members", json_integer(count));
    if (t.capacity_differs) {
        json_object_set_new(m, "warnings", heat_capacity_warnings());
    }
    return m;
}

/* ---- /v1/heat: the answer ------------------------------------------------------------------ */

struct heat_answer {
    const char *const *urls;
    const char *const *bodies;
    uint32_t count;
    const char *merged; /* the merged document's text */
};

static void heat_answer_render(struct http_text *b, const void *user)
{
    const struct heat_answer *m = user;
    http_text_put(b, "{\"nodes\":[");
    for (uint32_t i = 0; i < m->count; i++) {
        char url[6u * ROUTER_NODE_URL_BYTES_MAX + 3];
        int64_t n = http_json_string(m->urls[i], strlen(m->urls[i]), url, sizeof(url));
        ASSERT(n > 0);
        http_text_put(b, "%s{\"node\":%s,\"heat\":%s}", i == 0 ? "" : ",", url, m->bodies[i]);
    }
    http_text_put(b, "],\"merged\":%s}", m->merged);
}

int router_merge_heat(uint32_t top, const char *const *urls, const char *const *bodies,
                      uint32_t count, struct router_merged *out)
{
    ASSERT(count >= 1 && count <= ROUTER_NODES_TOTAL_MAX);
    ASSERT(top >= 1 && top <= SHARD_HEAT_TOP_MAX);
    json_t *docs[ROUTER_NODES_TOTAL_MAX] = {0};
    int rc = router_docs_load(bodies, count, docs, out);
    json_t *merged = rc == 0 ? heat_merged(docs, count, top, &rc, out) : NULL;
    char *text = merged != NULL ? json_dumps(merged, ROUTER_HEAT_DUMP_FLAGS) : NULL;
    rc = rc != 0 ? rc : (text == NULL ? -ENOMEM : 0);
    if (rc == 0) {
        size_t cap = 64 + strlen(text);
        for (uint32_t i = 0; i < count; i++) {
            cap += strlen(bodies[i]) + 6u * ROUTER_NODE_URL_BYTES_MAX + 32u;
        }
        struct heat_answer a = {.urls = urls, .bodies = bodies, .count = count, .merged = text};
        rc = router_render_new(heat_answer_render, &a, cap, out);
    }
    free(text);
    json_decref(merged);
    router_docs_free(docs, count);
    return rc;
}

/* ---- /v1/heat/history ---------------------------------------------------------------------- */

unsigned router_history_parse(const char *query, size_t len, uint32_t *seconds, char *message,
                              size_t message_size)
{
    *seconds = ROUTER_HISTORY_SECONDS_MAX;
    bool seen = false;
    size_t start = 0;
    while (start < len) { /* one parameter a turn; bounded by len */
        const char *amp = memchr(query + start, '&', len - start);
        size_t end = amp != NULL ? (size_t)(amp - query) : len;
        const char *p = query + start;
        size_t n = end - start;
        if (n > 0 && (n < 8 || memcmp(p, "seconds=", 8) != 0)) {
            snprintf(message, message_size, "unknown parameter '%.*s'", (int)(n < 32 ? n : 32), p);
            return 400;
        }
        uint32_t v = 0;
        bool ok = n > 8 && n <= 11;
        for (size_t i = 8; ok && i < n; i++) {
            ok = p[i] >= '0' && p[i] <= '9';
            v = v * 10u + (uint32_t)(p[i] - '0');
        }
        if (n > 0 && (seen || !ok || v == 0 || v > ROUTER_HISTORY_SECONDS_MAX)) {
            snprintf(message, message_size,
                     seen ? "parameter 'seconds' given twice" : "bad seconds: expected 1..%u",
                     ROUTER_HISTORY_SECONDS_MAX);
            return 400;
        }
        if (n > 0) {
            seen = true;
            *seconds = v;
        }
        start = end + 1;
    }
    return 0;
}

int router_merge_heat_history(uint32_t seconds, const char *const *bodies, uint32_t count,
                              struct router_merged *out)
{
    ASSERT(count >= 1 && count <= ROUTER_NODES_TOTAL_MAX);
    ASSERT(seconds >= 1 && seconds <= ROUTER_HISTORY_SECONDS_MAX);
    return http_heat_history_merge(seconds, bodies, count, &out->body, &out->len, out->error,
                                   sizeof(out->error));
}

/* ---- /v1/heat/stream: a frame from merged documents ---------------------------------------- */

uint32_t router_heat_feed_seconds(const struct router_heat_feed *f, int64_t now_s)
{
    if (f->last_second <= 0 || now_s - f->last_second >= (int64_t)ROUTER_HISTORY_SECONDS_MAX) {
        return ROUTER_HISTORY_SECONDS_MAX;
    }
    ASSERT(f->last_second > 0);
    int64_t k = now_s - f->last_second + ROUTER_HEAT_FEED_SLACK_S;
    k = k < (int64_t)ROUTER_HEAT_AMEND_S ? (int64_t)ROUTER_HEAT_AMEND_S : k;
    return k < (int64_t)ROUTER_HISTORY_SECONDS_MAX ? (uint32_t)k : ROUTER_HISTORY_SECONDS_MAX;
}

/* Keeps the items of history's array name whose "t" is after last (both lists are oldest
 * first, so that is a tail). */
static bool frame_after(json_t *history, const char *name, int64_t last)
{
    json_t *list = json_object_get(history, name);
    if (!json_is_array(list)) {
        return false;
    }
    while (json_array_size(list) > 0) { /* bounded: one item less a turn */
        const json_t *t = json_object_get(json_array_get(list, 0), "t");
        if (!json_is_integer(t)) {
            return false;
        }
        if (json_integer_value(t) > last) {
            break;
        }
        json_array_remove(list, 0);
    }
    return true;
}

/* previous's column of second t (its columns are oldest first), NULL: none. */
static const json_t *frame_column_of(const json_t *previous, int64_t t)
{
    const json_t *columns = json_object_get(previous, "columns");
    for (size_t i = 0; i < json_array_size(columns); i++) { /* bounded by the seconds asked */
        const json_t *c = json_array_get(columns, i);
        if (json_integer_value(json_object_get(c, "t")) == t) {
            return c;
        }
    }
    return NULL;
}

/* Whether a column of second t <= the last frame's differs from previous's (which covers
 * (second - seconds, second]): amended since. Outside that range it cannot be told: no. */
static bool frame_amended(const json_t *previous, const json_t *column, int64_t t)
{
    const json_t *second = json_object_get(previous, "second");
    const json_t *seconds = json_object_get(previous, "seconds");
    if (!json_is_integer(second) || !json_is_integer(seconds) ||
        t <= json_integer_value(second) - json_integer_value(seconds) ||
        t > json_integer_value(second)) {
        return false;
    }
    const json_t *before = frame_column_of(previous, t);
    return before == NULL ||
           !json_equal(json_object_get(before, "days"), json_object_get(column, "days"));
}

/* Keeps the columns of history after last, and those up to last that previous (may be NULL)
 * shows amended since (counted in *amended). */
static bool frame_columns(json_t *history, int64_t last, const json_t *previous, uint32_t *amended)
{
    json_t *list = json_object_get(history, "columns");
    if (!json_is_array(list)) {
        return false;
    }
    *amended = 0;
    size_t i = 0;
    while (i < json_array_size(list)) { /* bounded: one item kept or removed a turn */
        const json_t *c = json_array_get(list, i);
        const json_t *t = json_object_get(c, "t");
        if (!json_is_integer(t)) {
            return false;
        }
        if (json_integer_value(t) > last) {
            i++;
        } else if (previous != NULL && frame_amended(previous, c, json_integer_value(t))) {
            (*amended)++;
            i++;
        } else {
            json_array_remove(list, i);
        }
    }
    return true;
}

/* [{"day":D,"count":N},...] of a by=day count's groups, the newest ROUTER_HEAT_FRAME_DAYS. */
static json_t *frame_counts(const json_t *count)
{
    const json_t *groups = json_object_get(count, "groups");
    if (!json_is_array(groups)) {
        return NULL;
    }
    size_t n = json_array_size(groups);
    size_t from = n > ROUTER_HEAT_FRAME_DAYS ? n - ROUTER_HEAT_FRAME_DAYS : 0;
    json_t *out = json_array();
    for (size_t i = from; i < n; i++) {
        const json_t *g = json_array_get(groups, i);
        const json_t *day = json_object_get(g, "key");
        const json_t *c = json_object_get(g, "count");
        if (!json_is_string(day) || !json_is_integer(c)) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, json_pack("{s:O,s:O}", "day", day, "count", c));
    }
    return out;
}

/* ["...",...] of the frame's warnings. */
static json_t *frame_warnings(const char *const *warnings, uint32_t count)
{
    json_t *list = json_array();
    for (uint32_t i = 0; list != NULL && i < count; i++) {
        ASSERT(warnings[i] != NULL);
        json_array_append_new(list, json_string(warnings[i]));
    }
    return list;
}

int router_heat_newest_day(const char *heat, int32_t *day)
{
    json_t *doc = json_loads(heat, 0, NULL);
    const json_t *days = json_object_get(json_object_get(doc, "merged"), "days");
    int32_t newest = -1;
    for (size_t i = 0; i < json_array_size(days); i++) { /* bounded by the answer's top */
        const char *text = json_string_value(json_object_get(json_array_get(days, i), "day"));
        int32_t d = -1;
        if (text != NULL && ds_date_parse(text, strlen(text), &d) == 0 && d > newest) {
            newest = d;
        }
    }
    json_decref(doc);
    if (newest < 0) {
        return -ENOENT;
    }
    *day = newest;
    return 0;
}

int router_heat_frame(struct router_heat_feed *f, const char *heat, const char *history,
                      const char *counts, const char *const *warnings, uint32_t warning_count,
                      struct router_merged *out)
{
    ASSERT(heat != NULL && history != NULL && counts != NULL);
    ASSERT(f->last_second >= 0);
    const char *bodies[] = {heat, history, counts};
    json_t *docs[3] = {0};
    int rc = router_docs_load(bodies, 3, docs, out);
    const json_t *merged = json_object_get(docs[0], "merged");
    const json_t *second = json_object_get(docs[1], "second");
    /* The router's own earlier answer: unreadable only if memory ran out, then no amendments. */
    json_t *previous =
        f->previous_history != NULL ? json_loads(f->previous_history, 0, NULL) : NULL;
    uint32_t amended = 0;
    if (rc == 0 && (!json_is_object(merged) || !(json_is_null(second) || json_is_integer(second)) ||
                    !frame_columns(docs[1], f->last_second, previous, &amended) ||
                    !frame_after(docs[1], "growths", f->last_second))) {
        rc = heat_bad(out, json_is_object(merged) ? "columns" : "merged");
    }
    json_decref(previous);
    json_t *days = rc == 0 ? frame_counts(docs[2]) : NULL;
    rc = rc != 0 ? rc : (days == NULL ? heat_bad(out, "groups") : 0);
    char *text = NULL;
    if (rc == 0) {
        json_t *frame =
            json_pack("{s:O,s:O,s:o}", "heat", merged, "history", docs[1], "counts", days);
        if (frame != NULL && warning_count > 0) {
            json_object_set_new(frame, "warnings", frame_warnings(warnings, warning_count));
        }
        text = frame != NULL ? json_dumps(frame, ROUTER_HEAT_DUMP_FLAGS) : NULL;
        json_decref(frame);
        rc = text != NULL ? 0 : -ENOMEM;
    }
    if (rc == 0) {
        /* One data line: the JSON has no newline (JSON_COMPACT escapes them in strings). */
        struct http_text b = {.capacity = strlen(text) + 32u};
        b.dst = malloc(b.capacity);
        rc = b.dst != NULL ? 0 : -ENOMEM;
        if (rc == 0) {
            http_text_put(&b, "event: heat\ndata: %s\n\n", text);
            ASSERT(!b.overflow);
            out->body = b.dst;
            out->len = b.len;
            int64_t s = json_is_integer(second) ? json_integer_value(second) : 0;
            f->last_second = s > f->last_second ? s : f->last_second;
            f->amended_columns = amended;
        }
    }
    free(text);
    router_docs_free(docs, 3);
    return rc;
}
