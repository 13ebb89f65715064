/*
 * The gate of the load test (loadtest_gate.h): each run's summary, the --fail-if thresholds and
 * the --baseline comparison, so that a load test can fail a CI job.
 *
 * The summary is derived from the fields a run object already has (a field table names where
 * each figure comes from), not collected while the run goes: so a report.json of schema 1,
 * written before summaries existed, gives the same summary as a new one, and a baseline from an
 * older dayshard compares figure for figure. A figure a run did not measure (no query load, no
 * hot partition) is null, and a threshold on it is "unchecked", which fails the gate like a
 * breach: a gate that passes because the figure is missing would pass forever unnoticed.
 *
 * Thresholds are `FIELD OP NUMBER` with an optional suffix: `x` compares the value with NUMBER
 * times the baseline's, `%` compares the change against the baseline in percent. Rejected: a
 * general expression language (and, or, arithmetic between fields): repeated --fail-if already
 * is an "or" of breaches, and one comparison a line is what a CI log must show when it fails.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "loadgen/loadgen.h"
#include "loadgen/loadtest.h"
#include "loadgen/loadtest_gate.h"

/* ---- the summary --------------------------------------------------------------------------- */

static const struct gate_field gate_field_table[] = {
    {"events_produced", "events", GATE_SOURCE_NUMBER, "events_produced",
     "events the broker acknowledged to the producer"},
    {"events_stored", "events", GATE_SOURCE_NUMBER, "events_stored",
     "events durable on the nodes after the run"},
    {"duration_s", "s", GATE_SOURCE_NUMBER, "duration_s", "wall time of the run"},
    {"events_per_s", "events/s", GATE_SOURCE_NUMBER, "throughput_eps",
     "events_stored / duration_s"},
    {"producer_behind_max_s", "s", GATE_SOURCE_NUMBER, "producer_behind_max_s",
     "furthest the producer fell behind its schedule"},
    {"hot_partition_peak_eps", "events/s", GATE_SOURCE_NUMBER, "hot_partition.peak_eps",
     "the hottest partition's highest one-second write rate"},
    {"hot_partition_capacity_factor", "x capacity", GATE_SOURCE_NUMBER,
     "hot_partition.capacity_factor", "hot_partition_peak_eps / --shard-capacity"},
    {"hottest_share_max", "fraction", GATE_SOURCE_SERIES_MAX, "hottest_share",
     "largest share of a second's writes that one partition took"},
    {"hot_day_skew", "ratio", GATE_SOURCE_NUMBER, "hot_day_skew",
     "the hot day's busiest shard against its shards' mean, in its busiest second"},
    {"over_capacity_seconds", "partition-seconds", GATE_SOURCE_NUMBER, "over_capacity_seconds",
     "seconds a partition wrote above --shard-capacity, summed over partitions"},
    {"would_throttle_events", "events", GATE_SOURCE_NUMBER, "would_throttle_events",
     "events above --shard-capacity, which a capped store would have throttled"},
    {"kafka_hottest_share", "fraction", GATE_SOURCE_NUMBER, "kafka_hottest_share",
     "the busiest Kafka partition's share of all, in the hot day's busiest second"},
    {"lag_p99_ms", "ms", GATE_SOURCE_NUMBER, "lag_p99_ms",
     "99th percentile over the seconds of the run of the lag in time"},
    {"lag_max_ms", "ms", GATE_SOURCE_NUMBER, "lag_max_ms", "largest lag in time"},
    {"lag_max_messages", "messages", GATE_SOURCE_SERIES_MAX, "lag_messages",
     "largest consumer lag, summed over Kafka partitions, of a one-second sample"},
    {"gsi_lag_p99_ms", "ms", GATE_SOURCE_NUMBER, "gsi_lag_p99_ms",
     "99th percentile of the by-customer index's lag behind the store"},
    {"count_p50_us", "us", GATE_SOURCE_NUMBER, "count_p50_us", "median day-count query latency"},
    {"count_p99_us", "us", GATE_SOURCE_NUMBER, "count_p99_us",
     "99th percentile day-count query latency"},
    {"orders_p50_us", "us", GATE_SOURCE_NUMBER, "orders_p50_us",
     "median latency of a customer's newest 10 orders"},
    {"orders_p99_us", "us", GATE_SOURCE_NUMBER, "orders_p99_us",
     "99th percentile latency of a customer's newest 10 orders"},
    {"send_delay_p50_ms", "ms", GATE_SOURCE_NUMBER, "latency.send_delay.p50_ms",
     "median delay of the producer's sends behind their schedule (from --warmup on)"},
    {"send_delay_p90_ms", "ms", GATE_SOURCE_NUMBER, "latency.send_delay.p90_ms",
     "90th percentile send delay behind the schedule"},
    {"send_delay_p99_ms", "ms", GATE_SOURCE_NUMBER, "latency.send_delay.p99_ms",
     "99th percentile send delay behind the schedule"},
    {"send_delay_p999_ms", "ms", GATE_SOURCE_NUMBER, "latency.send_delay.p999_ms",
     "99.9th percentile send delay behind the schedule"},
    {"send_delay_max_ms", "ms", GATE_SOURCE_NUMBER, "latency.send_delay.max_ms",
     "largest send delay behind the schedule"},
    {"durable_p50_ms", "ms", GATE_SOURCE_NUMBER, "latency.durable.p50_ms",
     "median time from an event's scheduled send to durable on a node (sampled events)"},
    {"durable_p90_ms", "ms", GATE_SOURCE_NUMBER, "latency.durable.p90_ms",
     "90th percentile scheduled send to durable"},
    {"durable_p99_ms", "ms", GATE_SOURCE_NUMBER, "latency.durable.p99_ms",
     "99th percentile scheduled send to durable"},
    {"durable_p999_ms", "ms", GATE_SOURCE_NUMBER, "latency.durable.p999_ms",
     "99.9th percentile scheduled send to durable"},
    {"durable_max_ms", "ms", GATE_SOURCE_NUMBER, "latency.durable.max_ms",
     "longest scheduled send to durable"},
    {"queryable_p50_ms", "ms", GATE_SOURCE_NUMBER, "latency.queryable.p50_ms",
     "median time from an event's scheduled send to counted by a query (sampled events)"},
    {"queryable_p90_ms", "ms", GATE_SOURCE_NUMBER, "latency.queryable.p90_ms",
     "90th percentile scheduled send to queryable"},
    {"queryable_p99_ms", "ms", GATE_SOURCE_NUMBER, "latency.queryable.p99_ms",
     "99th percentile scheduled send to queryable"},
    {"queryable_p999_ms", "ms", GATE_SOURCE_NUMBER, "latency.queryable.p999_ms",
     "99.9th percentile scheduled send to queryable"},
    {"queryable_max_ms", "ms", GATE_SOURCE_NUMBER, "latency.queryable.max_ms",
     "longest scheduled send to queryable"},
    {"count_p90_ms", "ms", GATE_SOURCE_NUMBER, "latency.count_query.p90_ms",
     "90th percentile day-count query latency"},
    {"count_p999_ms", "ms", GATE_SOURCE_NUMBER, "latency.count_query.p999_ms",
     "99.9th percentile day-count query latency"},
    {"count_max_ms", "ms", GATE_SOURCE_NUMBER, "latency.count_query.max_ms",
     "slowest day-count query"},
    {"orders_p90_ms", "ms", GATE_SOURCE_NUMBER, "latency.orders_query.p90_ms",
     "90th percentile latency of a customer's newest 10 orders"},
    {"orders_p999_ms", "ms", GATE_SOURCE_NUMBER, "latency.orders_query.p999_ms",
     "99.9th percentile latency of a customer's newest 10 orders"},
    {"orders_max_ms", "ms", GATE_SOURCE_NUMBER, "latency.orders_query.max_ms",
     "slowest customer newest-10 query"},
    {"queries", "requests", GATE_SOURCE_NUMBER, "queries", "query requests answered"},
    {"query_errors", "requests", GATE_SOURCE_NUMBER, "query_errors", "query requests that failed"},
    {"growths", "growths", GATE_SOURCE_COUNT, "growths", "shard growths during the run"},
    {"final_shards_max", "shards", GATE_SOURCE_SHARDS_MAX, "final_shards",
     "largest shard count of any day at the end"},
    {"warnings", "warnings", GATE_SOURCE_COUNT, "warnings", "warnings the run recorded"},
    {"advice_count", "advice", GATE_SOURCE_COUNT, "advice",
     "advice the nodes gave (hot spots more shards cannot relieve), once per case and subject"},
    {"advice_kafka_partition_skew", "partitions", GATE_SOURCE_ADVICE, "kafka_partition_skew",
     "Kafka partitions the nodes advised as skewed (more shards cannot help)"},
    {"advice_hot_customer", "customers", GATE_SOURCE_ADVICE, "hot_customer",
     "customers the nodes advised as hot, each loading one Kafka partition"},
    {"advice_day_at_max_shards", "days", GATE_SOURCE_ADVICE, "day_at_max_shards",
     "days the nodes advised as over capacity at --max-shards"},
    {"sampler_cpu_share", "fraction of a core", GATE_SOURCE_NUMBER, "overhead.sampler_cpu_share",
     "the load test's sampler's own CPU, its overhead"},
};

const struct gate_field *gate_fields(size_t *count)
{
    *count = DS_ARRAY_LEN(gate_field_table);
    return gate_field_table;
}

const struct gate_field *gate_field_find(const char *name)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(gate_field_table); i++) {
        if (strcmp(gate_field_table[i].name, name) == 0) {
            return &gate_field_table[i];
        }
    }
    return NULL;
}

size_t gate_field_names(char *dst, size_t capacity)
{
    ASSERT(capacity > 0);
    size_t n = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < DS_ARRAY_LEN(gate_field_table); i++) {
        int w = snprintf(dst + n, capacity - n, "%s%s", i > 0 ? " " : "", gate_field_table[i].name);
        ASSERT(w > 0);
        if ((size_t)w >= capacity - n) {
            dst[n] = '\0'; /* whole names only */
            return capacity;
        }
        n += (size_t)w;
    }
    return n;
}

/* run's value at path "a", "a.b" or deeper (each part a key inside the object before it). */
static const json_t *gate_path_get(const json_t *run, const char *path)
{
    const json_t *at = run;
    for (const char *dot = strchr(path, '.'); dot != NULL; dot = strchr(path, '.')) {
        char head[GATE_FIELD_NAME_SIZE];
        size_t len = (size_t)(dot - path);
        ASSERT(len < sizeof(head));
        memcpy(head, path, len);
        head[len] = '\0';
        at = json_object_get(at, head); /* NULL (a missing object) stays NULL */
        path = dot + 1;
    }
    return json_object_get(at, path);
}

/* The largest number among the values of an array or an object; null when none is a number. */
static json_t *gate_max_of(const json_t *values)
{
    double best = -INFINITY;
    const json_t *v;
    size_t i;
    const char *key;
    if (json_is_array(values)) {
        json_array_foreach(values, i, v)
        {
            best = json_is_number(v) && json_number_value(v) > best ? json_number_value(v) : best;
        }
    } else if (json_is_object(values)) {
        json_object_foreach((json_t *)values, key, v)
        {
            best = json_is_number(v) && json_number_value(v) > best ? json_number_value(v) : best;
        }
    }
    if (best == -INFINITY) {
        return json_null();
    }
    return best == floor(best) && fabs(best) < 1e15 ? json_integer((json_int_t)best)
                                                    : json_real(best);
}

/* The entries of advice whose "case" is kind: one per subject (a partition, a customer, a
 * day), as a run records each (case, subject) once. Null when the run has no advice array (a
 * report from before advice was recorded): an older run did not measure it, it did not see 0. */
static json_t *gate_advice_count(const json_t *advice, const char *kind)
{
    if (!json_is_array(advice)) {
        return json_null();
    }
    json_int_t n = 0;
    const json_t *a;
    size_t i;
    json_array_foreach(advice, i, a)
    {
        const char *c = json_string_value(json_object_get(a, "case"));
        n += c != NULL && strcmp(c, kind) == 0;
    }
    ASSERT((size_t)n <= json_array_size(advice));
    return json_integer(n);
}

static json_t *gate_field_value(const json_t *run, const struct gate_field *f)
{
    switch (f->source) {
    case GATE_SOURCE_NUMBER: {
        const json_t *v = gate_path_get(run, f->path);
        return json_is_number(v) ? json_copy((json_t *)v) : json_null();
    }
    case GATE_SOURCE_COUNT: {
        const json_t *v = json_object_get(run, f->path);
        return json_is_array(v) ? json_integer((json_int_t)json_array_size(v)) : json_null();
    }
    case GATE_SOURCE_SERIES_MAX:
        return gate_max_of(json_object_get(json_object_get(run, "series"), f->path));
    case GATE_SOURCE_SHARDS_MAX: return gate_max_of(report_final_shards(run));
    case GATE_SOURCE_ADVICE: return gate_advice_count(json_object_get(run, "advice"), f->path);
    }
    ASSERT(false);
    return json_null();
}

json_t *gate_summary_derive(const json_t *run)
{
    ASSERT(run != NULL);
    json_t *summary = json_object();
    for (size_t i = 0; i < DS_ARRAY_LEN(gate_field_table); i++) {
        json_object_set_new(summary, gate_field_table[i].name,
                            gate_field_value(run, &gate_field_table[i]));
    }
    ASSERT(json_object_size(summary) == DS_ARRAY_LEN(gate_field_table));
    return summary;
}

json_t *gate_summary_of(const json_t *run)
{
    json_t *summary = json_object_get(run, "summary");
    if (json_is_object(summary)) {
        return json_incref(summary);
    }
    return gate_summary_derive(run);
}

/* ---- thresholds ---------------------------------------------------------------------------- */

static const char *const gate_op_text[] = {">", ">=", "<", "<=", "==", "!="};

/* Reads an operator at *p, moving past it. Returns false when none is there. */
static bool gate_op_read(const char **p, enum gate_op *op)
{
    static const enum gate_op order[] = {GATE_GE, GATE_LE, GATE_EQ, GATE_NE, GATE_GT, GATE_LT};
    for (size_t i = 0; i < DS_ARRAY_LEN(order); i++) {
        const char *t = gate_op_text[order[i]];
        if (strncmp(*p, t, strlen(t)) == 0) {
            *op = order[i];
            *p += strlen(t);
            return true;
        }
    }
    return false;
}

/* text without spaces into dst (capacity bytes). Returns false when it does not fit. */
static bool gate_squeeze(const char *text, char *dst, size_t capacity)
{
    size_t n = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == ' ' || *p == '\t') {
            continue;
        }
        if (n + 1 >= capacity) {
            return false;
        }
        dst[n++] = *p;
    }
    dst[n] = '\0';
    return true;
}

/* A decimal number at *p ("12", "-1.5", "2e3"; no hex, inf or nan), moving past it. */
static bool gate_number_read(const char **p, double *out)
{
    size_t len = strspn(*p, "0123456789.eE+-");
    if (len == 0 || strspn(*p, "+-.") == len) {
        return false;
    }
    char digits[GATE_EXPR_TEXT_SIZE];
    ASSERT(len < sizeof(digits));
    memcpy(digits, *p, len);
    digits[len] = '\0';
    char *end = NULL;
    errno = 0;
    double x = strtod(digits, &end);
    if (errno != 0 || end != digits + len || !isfinite(x)) {
        return false;
    }
    *out = x;
    *p += len;
    return true;
}

int gate_expr_parse(const char *text, struct gate_expr *e, char *why, size_t why_size)
{
    ASSERT(text != NULL);
    ASSERT(why_size > 0);
    struct gate_expr x = {.form = GATE_ABSOLUTE};
    if (!gate_squeeze(text, x.text, sizeof(x.text))) {
        snprintf(why, why_size, "'%.40s...' is longer than %d bytes", text,
                 GATE_EXPR_TEXT_SIZE - 1);
        return -DS_EUSAGE;
    }
    const char *p = x.text;
    size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (len == 0 || len >= sizeof(x.field)) {
        snprintf(why, why_size, "'%s' does not start with a field name (FIELD OP NUMBER)", x.text);
        return -DS_EUSAGE;
    }
    memcpy(x.field, p, len);
    x.field[len] = '\0';
    p += len;
    if (!gate_op_read(&p, &x.op)) {
        snprintf(why, why_size, "'%s': no operator after %s (one of > >= < <= == !=)", x.text,
                 x.field);
        return -DS_EUSAGE;
    }
    if (!gate_number_read(&p, &x.number)) {
        snprintf(why, why_size, "'%s': no number after %s%s", x.text, x.field, gate_op_text[x.op]);
        return -DS_EUSAGE;
    }
    if (*p == 'x' || *p == '%') {
        x.form = *p == 'x' ? GATE_RATIO : GATE_PERCENT;
        p++;
    }
    if (*p != '\0') {
        snprintf(why, why_size, "'%s': unexpected '%s' after the number (only x or %%)", x.text, p);
        return -DS_EUSAGE;
    }
    *e = x;
    return 0;
}

static bool gate_compare(double a, enum gate_op op, double b)
{
    switch (op) {
    case GATE_GT: return a > b;
    case GATE_GE: return a >= b;
    case GATE_LT: return a < b;
    case GATE_LE: return a <= b;
    case GATE_EQ: return a == b;
    case GATE_NE: return a != b;
    }
    ASSERT(false);
    return false;
}

static double gate_summary_number(const json_t *summary, const char *field)
{
    const json_t *v = json_object_get(summary, field);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The change from base to value in percent; +-inf from a baseline of 0. */
static double gate_change_percent(double value, double base)
{
    if (base == 0) {
        return value == 0 ? 0.0 : value > 0 ? INFINITY : -INFINITY;
    }
    return (value - base) / fabs(base) * 100.0;
}

void gate_expr_eval(const struct gate_expr *e, const json_t *summary,
                    const json_t *baseline_summary, struct gate_verdict *v)
{
    ASSERT(e != NULL);
    ASSERT(summary != NULL);
    *v = (struct gate_verdict){.state = GATE_UNCHECKED, .baseline = NAN, .compared = NAN};
    v->value = gate_summary_number(summary, e->field);
    v->limit = e->number;
    if (baseline_summary != NULL) {
        v->baseline = gate_summary_number(baseline_summary, e->field);
    }
    if (isnan(v->value)) {
        v->why = "not measured in this run";
        return;
    }
    if (e->form != GATE_ABSOLUTE && baseline_summary == NULL) {
        v->why = "the baseline has no run of this strategy";
        return;
    }
    if (e->form != GATE_ABSOLUTE && isnan(v->baseline)) {
        v->why = "not measured in the baseline's run";
        return;
    }
    v->compared = e->form == GATE_PERCENT ? gate_change_percent(v->value, v->baseline) : v->value;
    v->limit = e->form == GATE_RATIO ? e->number * v->baseline : e->number;
    v->state = gate_compare(v->compared, e->op, v->limit) ? GATE_BREACHED : GATE_PASSED;
}

/* ---- the gate object ------------------------------------------------------------------------ */

struct loadgen_loadtest_gate {
    char baseline_path[DS_PATH_MAX];
    json_t *baseline; /* NULL: no --baseline */
    uint32_t expr_count;
    struct gate_expr exprs[LOADGEN_LOADTEST_GATE_EXPRS_MAX];
};

/* Reads path as a baseline report. Returns the document, or NULL with the reason printed. */
static json_t *gate_baseline_load(const char *path)
{
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        /* jansson names the file itself when it cannot be opened, and its position otherwise */
        if (err.line < 1) {
            loadtest_error(-DS_EUSAGE, "--baseline %s: %s", path, err.text);
        } else {
            loadtest_error(-DS_EUSAGE, "--baseline %s: not JSON: %s (line %d)", path, err.text,
                           err.line);
        }
        return NULL;
    }
    const json_t *schema = json_object_get(doc, "schema");
    const char *why = NULL;
    if (!json_is_object(doc) || !json_is_array(json_object_get(doc, "runs"))) {
        why = "not a load test report (no \"runs\" array)";
    } else if (schema != NULL && (!json_is_integer(schema) || json_integer_value(schema) < 1)) {
        why = "its \"schema\" is not a positive integer";
    } else if (json_array_size(json_object_get(doc, "runs")) > LOADTEST_REPORT_RUNS_MAX) {
        why = "more runs than a report holds";
    }
    if (why == NULL && schema != NULL && json_integer_value(schema) > LOADTEST_REPORT_SCHEMA) {
        loadtest_error(-DS_EUSAGE,
                       "--baseline %s: schema %lld, newer than the %d this dayshard "
                       "reads",
                       path, (long long)json_integer_value(schema), LOADTEST_REPORT_SCHEMA);
        json_decref(doc);
        return NULL;
    }
    if (why != NULL) {
        loadtest_error(-DS_EUSAGE, "--baseline %s: %s", path, why);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* Parses and checks one --fail-if. Returns 0 or -DS_EUSAGE, printed. */
static int gate_expr_add(struct loadgen_loadtest_gate *g, const char *text)
{
    char why[256];
    struct gate_expr *e = &g->exprs[g->expr_count];
    if (gate_expr_parse(text, e, why, sizeof(why)) != 0) {
        return loadtest_error(-DS_EUSAGE, "--fail-if %s", why);
    }
    if (gate_field_find(e->field) == NULL) {
        char names[REPORT_TEXT_SIZE];
        size_t n = gate_field_names(names, sizeof(names));
        ASSERT(n < sizeof(names)); /* the table fits the list (test_loadtest_gate checks) */
        return loadtest_error(-DS_EUSAGE, "--fail-if '%s': unknown field %s (the fields: %s)",
                              e->text, e->field, names);
    }
    if (e->form != GATE_ABSOLUTE && g->baseline == NULL) {
        return loadtest_error(-DS_EUSAGE,
                              "--fail-if '%s': %s compared with a baseline needs --baseline",
                              e->text, e->field);
    }
    g->expr_count++;
    return 0;
}

int loadgen_loadtest_gate_create(const char *baseline_path, const char *const *exprs,
                                 uint32_t count, struct loadgen_loadtest_gate **out)
{
    ASSERT(out != NULL);
    ASSERT(count == 0 || exprs != NULL);
    if (count > LOADGEN_LOADTEST_GATE_EXPRS_MAX) {
        return loadtest_error(-DS_EUSAGE, "more than %u --fail-if thresholds",
                              LOADGEN_LOADTEST_GATE_EXPRS_MAX);
    }
    struct loadgen_loadtest_gate *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return loadtest_error(-ENOMEM, "out of memory");
    }
    int rc = 0;
    if (baseline_path != NULL) {
        snprintf(g->baseline_path, sizeof(g->baseline_path), "%s", baseline_path);
        g->baseline = gate_baseline_load(baseline_path);
        rc = g->baseline == NULL ? -DS_EUSAGE : 0;
    }
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        rc = gate_expr_add(g, exprs[i]);
    }
    if (rc != 0) {
        loadgen_loadtest_gate_destroy(g);
        return rc;
    }
    ASSERT(g->expr_count == count);
    *out = g;
    return 0;
}

void loadgen_loadtest_gate_destroy(struct loadgen_loadtest_gate *gate)
{
    if (gate == NULL) {
        return;
    }
    json_decref(gate->baseline);
    free(gate);
}

/* ---- applying the gate ------------------------------------------------------------------- */

/* x as text: "-" for NAN, whole numbers without decimals, one decimal from 100 up, three
 * significant digits below (at most 6 decimals), trailing zeros dropped: "1.2", "0.00069".
 * dst has REPORT_NUMBER_SIZE bytes. */
static const char *gate_value_text(double x, char *dst)
{
    if (isnan(x)) {
        snprintf(dst, REPORT_NUMBER_SIZE, "-");
        return dst;
    }
    if (isinf(x)) {
        snprintf(dst, REPORT_NUMBER_SIZE, "%sinf", x > 0 ? "+" : "-");
        return dst;
    }
    int decimals = 0;
    if (x != floor(x)) {
        double digits_before = floor(log10(fabs(x))) + 1; /* 0 for 0.1..1, -3 for 0.0001.. */
        decimals = fabs(x) >= 100 ? 1 : (int)fmin(6.0, fmax(1.0, 3.0 - digits_before));
    }
    report_number_text(x, decimals, dst);
    if (strchr(dst, '.') != NULL) {
        size_t n = strlen(dst);
        while (n > 0 && dst[n - 1] == '0') {
            dst[--n] = '\0';
        }
        if (n > 0 && dst[n - 1] == '.') {
            dst[--n] = '\0';
        }
    }
    return dst;
}

/* The change from base to value: "+2 (+3.4%)", "-0.5", or "" when either is missing. */
static const char *gate_change_text(double value, double base, char *dst, size_t capacity)
{
    if (isnan(value) || isnan(base)) {
        snprintf(dst, capacity, "%s", "");
        return dst;
    }
    char diff[REPORT_NUMBER_SIZE];
    gate_value_text(value - base, diff);
    if (base == 0) {
        snprintf(dst, capacity, "%s%s", value - base > 0 ? "+" : "", diff);
        return dst;
    }
    char percent[REPORT_NUMBER_SIZE];
    gate_value_text(gate_change_percent(value, base), percent);
    snprintf(dst, capacity, "%s%s (%s%s%%)", value - base > 0 ? "+" : "", diff,
             value - base > 0 ? "+" : "", percent);
    return dst;
}

/* The run of baseline with the strategy of run, or NULL. */
static const json_t *gate_baseline_run(const json_t *baseline, const json_t *run)
{
    const char *strategy = report_string(run, "strategy");
    const json_t *old;
    size_t i;
    json_array_foreach(json_object_get(baseline, "runs"), i, old)
    {
        const char *name = report_string(old, "strategy");
        if (strategy != NULL && name != NULL && strcmp(strategy, name) == 0) {
            return old;
        }
    }
    return NULL;
}

/* "fixed:1, adaptive" from the strategies of doc's runs. dst has REPORT_TEXT_SIZE bytes. */
static const char *gate_strategies_text(const json_t *doc, char *dst)
{
    size_t n = 0;
    const json_t *run;
    size_t i;
    dst[0] = '\0';
    json_array_foreach(json_object_get(doc, "runs"), i, run)
    {
        const char *name = report_string(run, "strategy");
        int w = snprintf(dst + n, REPORT_TEXT_SIZE - n, "%s%s", i > 0 ? "; " : "",
                         name != NULL ? name : "(unnamed)");
        if (w < 0 || (size_t)w >= REPORT_TEXT_SIZE - n) {
            break;
        }
        n += (size_t)w;
    }
    return dst[0] != '\0' ? dst : "no runs";
}

/* Prints each summary field of a run against the baseline's: old -> new, change. */
static void gate_compare_print(FILE *out, const char *run_name, const json_t *summary,
                               const json_t *old_summary)
{
    fprintf(out, "%s against the baseline:\n", run_name);
    fprintf(out, "  %-30s %16s %16s  %s\n", "field", "baseline", "this run", "change");
    for (size_t i = 0; i < DS_ARRAY_LEN(gate_field_table); i++) {
        const char *name = gate_field_table[i].name;
        double now = gate_summary_number(summary, name);
        double old = gate_summary_number(old_summary, name);
        char a[REPORT_NUMBER_SIZE], b[REPORT_NUMBER_SIZE], c[96];
        fprintf(out, "  %-30s %16s %16s  %s\n", name, gate_value_text(old, a),
                gate_value_text(now, b), gate_change_text(now, old, c, sizeof(c)));
    }
}

static const char *gate_state_name(enum gate_state s)
{
    return s == GATE_PASSED ? "passed" : s == GATE_BREACHED ? "breached" : "unchecked";
}

/* What a verdict compared, for a line of text: "58 (limit > 0)". dst has REPORT_TEXT_SIZE. */
static const char *gate_verdict_text(const struct gate_expr *e, const struct gate_verdict *v,
                                     char *dst)
{
    char value[REPORT_NUMBER_SIZE], base[REPORT_NUMBER_SIZE], cmp[REPORT_NUMBER_SIZE],
        limit[REPORT_NUMBER_SIZE];
    gate_value_text(v->value, value);
    gate_value_text(v->baseline, base);
    if (v->state == GATE_UNCHECKED && isnan(v->value)) {
        snprintf(dst, REPORT_TEXT_SIZE, "%s: %s", e->field, v->why);
    } else if (v->state == GATE_UNCHECKED) {
        snprintf(dst, REPORT_TEXT_SIZE, "%s = %s: %s", e->field, value, v->why);
    } else if (e->form == GATE_ABSOLUTE) {
        snprintf(dst, REPORT_TEXT_SIZE, "%s = %s", e->field, value);
    } else if (e->form == GATE_RATIO) {
        snprintf(dst, REPORT_TEXT_SIZE, "%s = %s, baseline %s, limit %s x %s = %s", e->field, value,
                 base, gate_value_text(e->number, cmp), base, gate_value_text(v->limit, limit));
    } else {
        snprintf(dst, REPORT_TEXT_SIZE, "%s = %s, baseline %s, change %s%%", e->field, value, base,
                 gate_value_text(v->compared, cmp));
    }
    return dst;
}

static json_t *gate_number_json(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *gate_verdict_json(size_t index, const json_t *run, const struct gate_expr *e,
                                 const struct gate_verdict *v, const char *text)
{
    const char *strategy = report_string(run, "strategy");
    json_t *o =
        json_pack("{s:I, s:s?, s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:s}", "run",
                  (json_int_t)(index + 1), "strategy", strategy, "expr", e->text, "field", e->field,
                  "value", gate_number_json(v->value), "baseline", gate_number_json(v->baseline),
                  "compared", gate_number_json(v->compared), "limit", gate_number_json(v->limit),
                  "state", gate_state_name(v->state), "text", text);
    ASSERT(o != NULL);
    return o;
}

/* Every threshold against one run; verdicts appended to list. Returns the breaches. */
static size_t gate_check_run(const struct loadgen_loadtest_gate *g, size_t index, const json_t *run,
                             const json_t *summary, const json_t *old_summary, json_t *list,
                             FILE *out)
{
    char name[REPORT_TEXT_SIZE];
    report_run_name(run, index, "run", name);
    size_t breaches = 0;
    for (uint32_t k = 0; k < g->expr_count; k++) {
        const struct gate_expr *e = &g->exprs[k];
        struct gate_verdict v;
        gate_expr_eval(e, summary, old_summary, &v);
        char text[REPORT_TEXT_SIZE];
        gate_verdict_text(e, &v, text);
        fprintf(out, "  %s: --fail-if '%s': %s: %s\n", name, e->text, text,
                v.state == GATE_PASSED     ? "passed"
                : v.state == GATE_BREACHED ? "BREACHED"
                                           : "UNCHECKED");
        if (v.state != GATE_PASSED) {
            breaches++;
            loadtest_error(-DS_EUSAGE, "%s %s --fail-if '%s': %s", name,
                           v.state == GATE_BREACHED ? "breached" : "could not check", e->text,
                           text);
        }
        json_array_append_new(list, gate_verdict_json(index, run, e, &v, text));
    }
    return breaches;
}

/* The comparison of one run with the baseline: printed, and the baseline run's summary kept in
 * the run ("baseline_summary", null when the baseline has no run of its strategy). */
static void gate_baseline_of(const struct loadgen_loadtest_gate *g, size_t index, json_t *run,
                             const json_t *summary, FILE *out)
{
    char name[REPORT_TEXT_SIZE];
    report_run_name(run, index, "run", name);
    const json_t *old = gate_baseline_run(g->baseline, run);
    if (old == NULL) {
        char have[REPORT_TEXT_SIZE];
        fprintf(out, "%s: not in the baseline (%s has: %s)\n\n", name, g->baseline_path,
                gate_strategies_text(g->baseline, have));
        json_object_set_new(run, "baseline_summary", json_null());
        return;
    }
    json_t *old_summary = gate_summary_of(old);
    gate_compare_print(out, name, summary, old_summary);
    fprintf(out, "\n");
    json_object_set_new(run, "baseline_summary", old_summary);
}

size_t gate_apply(const struct loadgen_loadtest_gate *g, json_t *doc, FILE *out)
{
    ASSERT(g != NULL);
    ASSERT(json_is_array(json_object_get(doc, "runs")));
    json_t *runs = json_object_get(doc, "runs");
    json_t *run;
    size_t i;
    if (g->baseline != NULL) {
        const json_t *schema = json_object_get(g->baseline, "schema");
        size_t old_runs = json_array_size(json_object_get(g->baseline, "runs"));
        fprintf(out, "\nbaseline: %s (schema %lld, %zu run%s)\n\n", g->baseline_path,
                json_is_integer(schema) ? (long long)json_integer_value(schema) : 1LL, old_runs,
                old_runs == 1 ? "" : "s");
        json_array_foreach(runs, i, run)
        {
            json_t *summary = gate_summary_of(run);
            gate_baseline_of(g, i, run, summary, out);
            json_decref(summary);
        }
    } else {
        json_array_foreach(runs, i, run)
        {
            json_object_del(run, "baseline_summary"); /* an earlier check's, if any */
        }
    }
    json_t *verdicts = json_array();
    size_t breaches = 0;
    if (g->expr_count > 0) {
        fprintf(out, "\ngate: %u threshold%s on each of %zu run%s\n", g->expr_count,
                g->expr_count == 1 ? "" : "s", json_array_size(runs),
                json_array_size(runs) == 1 ? "" : "s");
    }
    json_array_foreach(runs, i, run)
    {
        json_t *summary = gate_summary_of(run);
        const json_t *old_summary = json_object_get(run, "baseline_summary");
        breaches += gate_check_run(g, i, run, summary,
                                   json_is_object(old_summary) ? old_summary : NULL, verdicts, out);
        json_decref(summary);
    }
    json_t *fail_if = json_array();
    for (uint32_t k = 0; k < g->expr_count; k++) {
        json_array_append_new(fail_if, json_string(g->exprs[k].text));
    }
    json_object_set_new(doc, "gate",
                        json_pack("{s:s?, s:o, s:b, s:I, s:o}", "baseline",
                                  g->baseline != NULL ? g->baseline_path : NULL, "fail_if", fail_if,
                                  "passed", breaches == 0, "breaches", (json_int_t)breaches,
                                  "verdicts", verdicts));
    fprintf(out, "gate: %s (%zu of %zu checks breached or not checkable)\n",
            breaches == 0 ? "passed" : "FAILED", breaches,
            (size_t)g->expr_count * json_array_size(runs));
    return breaches;
}

/* ---- report.md ------------------------------------------------------------------------- */

static void gate_md_comparison(struct report_file *rf, const json_t *doc)
{
    const json_t *run;
    size_t i;
    json_array_foreach(json_object_get(doc, "runs"), i, run)
    {
        char name[REPORT_TEXT_SIZE], quoted[REPORT_TEXT_SIZE];
        report_quote(report_run_name(run, i, "Run", name), REPORT_QUOTE_MD, quoted);
        const json_t *old = json_object_get(run, "baseline_summary");
        if (!json_is_object(old)) {
            report_printf(rf, "%s: not in the baseline.\n\n", quoted);
            continue;
        }
        json_t *now = gate_summary_of(run);
        report_printf(rf,
                      "%s against the baseline:\n\n| field | baseline | this run | change |\n"
                      "| --- | ---: | ---: | ---: |\n",
                      quoted);
        for (size_t k = 0; k < DS_ARRAY_LEN(gate_field_table); k++) {
            const char *field = gate_field_table[k].name;
            double a = gate_summary_number(old, field);
            double b = gate_summary_number(now, field);
            char ta[REPORT_NUMBER_SIZE], tb[REPORT_NUMBER_SIZE], tc[96];
            report_printf(rf, "| `%s` | %s | %s | %s |\n", field, gate_value_text(a, ta),
                          gate_value_text(b, tb), gate_change_text(b, a, tc, sizeof(tc)));
        }
        report_printf(rf, "\n");
        json_decref(now);
    }
}

void gate_md_write(struct report_file *rf, const json_t *doc)
{
    const json_t *gate = json_object_get(doc, "gate");
    if (!json_is_object(gate)) {
        return;
    }
    char quoted[REPORT_TEXT_SIZE];
    const char *baseline = report_string(gate, "baseline");
    report_printf(rf, "## Gate\n\n");
    report_printf(rf, "%s",
                  json_is_true(json_object_get(gate, "passed"))
                      ? "Every threshold held in every run.\n\n"
                      : "**Failed**: a threshold was breached or could not be "
                        "checked.\n\n");
    if (baseline != NULL) {
        report_printf(rf, "Baseline: `%s`.\n\n", report_quote(baseline, REPORT_QUOTE_CODE, quoted));
    }
    const json_t *verdicts = json_object_get(gate, "verdicts");
    if (json_array_size(verdicts) > 0) {
        report_printf(rf, "| run | threshold | verdict | what was compared |\n"
                          "| --- | --- | --- | --- |\n");
    }
    const json_t *v;
    size_t i;
    json_array_foreach(verdicts, i, v)
    {
        char expr[REPORT_TEXT_SIZE], text[REPORT_TEXT_SIZE];
        const char *strategy = report_string(v, "strategy");
        char run[REPORT_TEXT_SIZE];
        snprintf(run, sizeof(run), "%s", strategy != NULL ? strategy : "-");
        report_quote(run, REPORT_QUOTE_MD, quoted);
        const char *e = report_string(v, "expr");
        const char *t = report_string(v, "text");
        const char *state = report_string(v, "state");
        report_printf(rf, "| %s | `%s` | %s | %s |\n", quoted,
                      report_quote(e != NULL ? e : "-", REPORT_QUOTE_CODE, expr),
                      state == NULL                    ? "-"
                      : strcmp(state, "passed") == 0   ? "passed"
                      : strcmp(state, "breached") == 0 ? "**breached**"
                                                       : "**unchecked**",
                      report_quote(t != NULL ? t : "-", REPORT_QUOTE_MD, text));
    }
    report_printf(rf, "\n");
    if (baseline != NULL) {
        gate_md_comparison(rf, doc);
    }
}
