/*
 * The load test (loadgen.h): the strategies of one invocation, report.json (jansson) written
 * after each run, then the summary table, the gate (loadtest_gate.c), report.md and the plots
 * (loadtest_report*.c).
 * loadtest_run.c runs one strategy; the report is drawn from report.json alone, so it can be
 * drawn again (`--render-only DIR`) or from another machine's run.
 *
 * Rejected: a shell script around `dayshard run` and `produce` (no precise producer
 * progress, a pacing loop of its own, and one more language to test).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "loadgen/loadgen.h"
#include "loadgen/loadtest.h"
#include "loadgen/loadtest_gate.h"
#include "loadgen/loadtest_report.h"

/* ---- strategies ---------------------------------------------------------------------------- */

static void loadtest_strategy_fill(struct loadtest_strategy *s, bool adaptive, uint32_t shards,
                                   uint32_t max_shards, enum loadgen_produce_key key)
{
    memset(s, 0, sizeof(*s));
    s->key = key;
    if (adaptive) {
        s->base_shards = SHARD_COUNT_DEFAULT < max_shards ? SHARD_COUNT_DEFAULT : max_shards;
        s->max_shards = max_shards;
        snprintf(s->shards_text, sizeof(s->shards_text), "adaptive");
    } else {
        s->base_shards = shards;
        s->max_shards = shards;
        snprintf(s->shards_text, sizeof(s->shards_text), "fixed:%u", shards);
    }
    snprintf(s->name, sizeof(s->name), "%s, key %s", s->shards_text, loadgen_produce_key_name(key));
}

/* The runs: one strategy, or the --compare set. Returns how many. */
static uint32_t loadtest_strategies(const struct loadgen_loadtest_config *a,
                                    struct loadtest_strategy *out)
{
    if (!a->compare) {
        loadtest_strategy_fill(&out[0], a->adaptive, a->fixed_shards, a->max_shards, a->key);
        return 1;
    }
    uint32_t n = 0;
    loadtest_strategy_fill(&out[n++], false, 1, 1, a->key);
    loadtest_strategy_fill(&out[n++], false, 4, 4, a->key);
    loadtest_strategy_fill(&out[n++], true, 0, a->max_shards, a->key);
    loadtest_strategy_fill(&out[n++], true, 0, a->max_shards, LOADGEN_PRODUCE_KEY_DAY);
    loadtest_strategy_fill(&out[n++], true, 0, a->max_shards, LOADGEN_PRODUCE_KEY_PARTITION);
    ASSERT(n <= LOADTEST_STRATEGIES_MAX);
    return n;
}

/* ---- report.json --------------------------------------------------------------------------- */

static json_t *loadtest_number_or_null(double v)
{
    return v >= 0 ? json_real(v) : json_null();
}

/* The second at which the hot day wrote the most: where its skew is read. */
static const struct loadtest_second *loadtest_busiest(const struct loadtest_result *r)
{
    const struct loadtest_second *best = NULL;
    for (uint32_t i = 0; i < r->second_count; i++) {
        if (best == NULL || r->seconds[i].hot_day_eps > best->hot_day_eps) {
            best = &r->seconds[i];
        }
    }
    return best;
}

/* Per second: true while the second is inside --warmup (left out of the whole-run latencies).
 * Latency series are by the second events were scheduled in (seconds[i] covers [i, i + 1)). */
static json_t *loadtest_warmup_marks(const struct loadtest_result *r)
{
    json_t *marks = json_array();
    for (uint32_t i = 0; i < r->second_count; i++) {
        json_array_append_new(marks, json_boolean(i < r->warmup_s));
    }
    return marks;
}

/* One latency's whole-run figures: null figures when nothing was measured. */
static json_t *loadtest_percentiles_json(const struct loadtest_percentiles *p)
{
    return json_pack(
        "{s:I, s:o, s:o, s:o, s:o, s:o}", "count", (json_int_t)p->count, "p50_ms",
        loadtest_number_or_null(p->p50_ms), "p90_ms", loadtest_number_or_null(p->p90_ms), "p99_ms",
        loadtest_number_or_null(p->p99_ms), "p999_ms", loadtest_number_or_null(p->p999_ms),
        "max_ms", loadtest_number_or_null(p->max_ms));
}

/* report.json's "latency" of a run (docs/LOADTEST_REPORT.md says how each is taken). */
static json_t *loadtest_latency_json(const struct loadtest_result *r)
{
    static const char *const names[LOADTEST_LATENCY_KINDS] = {
        [LOADTEST_LATENCY_SEND_DELAY] = "send_delay", [LOADTEST_LATENCY_DURABLE] = "durable",
        [LOADTEST_LATENCY_QUERYABLE] = "queryable",   [LOADTEST_LATENCY_COUNT] = "count_query",
        [LOADTEST_LATENCY_ORDERS] = "orders_query",
    };
    json_t *latency = json_pack("{s:I, s:I, s:I}", "warmup_s", (json_int_t)r->warmup_s,
                                "e2e_sample_every", (json_int_t)r->e2e_stride,
                                "e2e_probe_interval_ms", (json_int_t)LOADTEST_PROBE_INTERVAL_MS);
    for (int k = 0; k < LOADTEST_LATENCY_KINDS; k++) {
        json_object_set_new(latency, names[k], loadtest_percentiles_json(&r->latency[k]));
    }
    json_object_set_new(json_object_get(latency, "durable"), "unseen",
                        json_integer((json_int_t)r->e2e_unseen[0]));
    json_object_set_new(json_object_get(latency, "queryable"), "unseen",
                        json_integer((json_int_t)r->e2e_unseen[1]));
    return latency;
}

static json_t *loadtest_series(const struct loadtest_result *r)
{
    json_t *series = json_object();
    const char *names[] = {"t_s",
                           "produced_eps",
                           "stored_eps",
                           "lag_ms",
                           "gsi_lag_ms",
                           "hottest_share",
                           "hottest_eps",
                           "count_p99_us",
                           "orders_p99_us",
                           "kafka_hottest_share",
                           "lag_messages",
                           "send_delay_p99_ms",
                           "durable_p99_ms",
                           "queryable_p99_ms"};
    json_t *arrays[DS_ARRAY_LEN(names)];
    for (size_t k = 0; k < DS_ARRAY_LEN(names); k++) {
        arrays[k] = json_array();
        json_object_set_new(series, names[k], arrays[k]);
    }
    for (uint32_t i = 0; i < r->second_count; i++) {
        const struct loadtest_second *s = &r->seconds[i];
        const struct loadtest_second *prev = i > 0 ? &r->seconds[i - 1] : NULL;
        double dt = prev != NULL ? s->t_s - prev->t_s : s->t_s;
        dt = dt > 0 ? dt : 1.0;
        double values[] = {s->t_s,
                           (double)(s->produced - (prev != NULL ? prev->produced : 0)) / dt,
                           (double)(s->stored - (prev != NULL ? prev->stored : 0)) / dt,
                           s->lag_ms,
                           s->gsi_lag_ms >= 0 ? (double)s->gsi_lag_ms : -1.0,
                           s->total_eps > 0 ? s->hottest_eps / s->total_eps : -1.0,
                           s->hottest_eps,
                           s->count_p99_us,
                           s->orders_p99_us,
                           s->kafka_total_eps > 0 ? s->kafka_hottest_eps / s->kafka_total_eps
                                                  : -1.0,
                           (double)s->lag_messages,
                           s->send_delay_p99_ms,
                           s->durable_p99_ms,
                           s->queryable_p99_ms};
        for (size_t k = 0; k < DS_ARRAY_LEN(names); k++) {
            json_array_append_new(arrays[k], loadtest_number_or_null(values[k]));
        }
    }
    json_object_set_new(series, "warmup", loadtest_warmup_marks(r));
    return series;
}

/* The LOADTEST_PLOT_KEYS_MAX partitions with the most events, each with its rate every second. */
static json_t *loadtest_partition_series(const struct loadtest_result *r)
{
    bool taken[LOADTEST_KEYS_MAX] = {false};
    json_t *parts = json_object();
    for (uint32_t n = 0; n < LOADTEST_PLOT_KEYS_MAX; n++) {
        uint32_t best = LOADTEST_KEYS_MAX;
        for (uint32_t k = 0; k < r->key_count; k++) {
            if (!taken[k] && r->keys[k].total > 0 &&
                (best == LOADTEST_KEYS_MAX || r->keys[k].total > r->keys[best].total)) {
                best = k;
            }
        }
        if (best == LOADTEST_KEYS_MAX) {
            break;
        }
        taken[best] = true;
        json_t *rates = json_array();
        for (uint32_t i = 0; i < r->second_count; i++) {
            json_array_append_new(rates, json_real(r->keys[best].eps[i]));
        }
        json_object_set_new(parts, r->keys[best].text, rates);
    }
    return parts;
}

static json_t *loadtest_hot_partition(const struct loadtest_result *r, uint32_t capacity_eps)
{
    const struct loadtest_second *peak = NULL;
    for (uint32_t i = 0; i < r->second_count; i++) {
        if (peak == NULL || r->seconds[i].hottest_eps > peak->hottest_eps) {
            peak = &r->seconds[i];
        }
    }
    if (peak == NULL || peak->hottest_eps <= 0) {
        return json_null();
    }
    return json_pack("{s:s, s:f, s:f}", "key", r->keys[peak->hottest_key].text, "peak_eps",
                     peak->hottest_eps, "capacity_factor",
                     capacity_eps > 0 ? peak->hottest_eps / capacity_eps : 0.0);
}

static json_t *loadtest_growths(const struct loadtest_result *r)
{
    json_t *list = json_array();
    for (uint32_t i = 0; i < r->growth_count; i++) {
        const struct loadtest_growth *g = &r->growths[i];
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(g->day, day);
        json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:f, s:s}", "day", day, "from",
                                              (json_int_t)g->from, "to", (json_int_t)g->to, "at_s",
                                              g->at_s, "reason", g->reason));
    }
    return list;
}

static json_t *loadtest_advice(const struct loadtest_result *r)
{
    json_t *list = json_array();
    for (uint32_t i = 0; i < r->advice_count; i++) {
        const struct loadtest_advice *a = &r->advice[i];
        json_array_append_new(list, json_pack("{s:s, s:s, s:f, s:I, s:s, s:s}", "case", a->kind,
                                              "subject", a->subject, "first_s", a->first_s,
                                              "samples", (json_int_t)a->samples, "evidence",
                                              a->evidence, "remedy", a->remedy));
    }
    return list;
}

/* Percentiles of the per-second lags over a run. */
static void loadtest_lags(const struct loadtest_result *r, double *lag_p99, double *lag_max,
                          double *gsi_p99)
{
    float *v = calloc(r->second_count + 1, sizeof(float));
    float *g = calloc(r->second_count + 1, sizeof(float));
    size_t nv = 0, ng = 0;
    *lag_max = 0;
    for (uint32_t i = 0; v != NULL && g != NULL && i < r->second_count; i++) {
        v[nv++] = (float)r->seconds[i].lag_ms;
        *lag_max = r->seconds[i].lag_ms > *lag_max ? r->seconds[i].lag_ms : *lag_max;
        if (r->seconds[i].gsi_lag_ms >= 0) {
            g[ng++] = (float)r->seconds[i].gsi_lag_ms;
        }
    }
    *lag_p99 = loadtest_percentile(v, nv, 0.99);
    *gsi_p99 = loadtest_percentile(g, ng, 0.99);
    free(v);
    free(g);
}

static json_t *loadtest_run_json(const struct loadtest_result *r,
                                 const struct loadgen_loadtest_config *cfg)
{
    char hot_day[DS_DATE_TEXT_SIZE];
    ds_date_format(r->hot_day, hot_day);
    const struct loadtest_second *busiest = loadtest_busiest(r);
    double skew = -1.0;
    if (busiest != NULL && busiest->hot_day_eps > 0 && busiest->hot_day_shards > 0) {
        skew = busiest->hot_day_shard_max_eps / (busiest->hot_day_eps / busiest->hot_day_shards);
    }
    double lag_p99 = 0, lag_max = 0, gsi_p99 = 0;
    loadtest_lags(r, &lag_p99, &lag_max, &gsi_p99);
    json_t *run = json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:o, s:s, s:o, s:I, s:I, s:b}", "strategy",
        r->strategy.name, "shard_strategy", r->strategy.shards_text, "key",
        loadgen_produce_key_name(r->strategy.key), "events_produced", (json_int_t)r->produced,
        "events_stored", (json_int_t)r->stored, "duration_s", r->duration_s, "throughput_eps",
        r->duration_s > 0 ? (double)r->stored / r->duration_s : 0.0, "producer_behind_max_s",
        r->producer_behind_max_s, "hot_partition", loadtest_hot_partition(r, cfg->capacity_eps),
        "hot_day", hot_day, "hot_day_skew", loadtest_number_or_null(skew), "over_capacity_seconds",
        (json_int_t)r->over_capacity_seconds, "would_throttle_events", (json_int_t)r->throttled,
        "throttle_from_samples", cfg->nodes > 1);
    json_object_set_new(
        run, "kafka_hottest_share",
        loadtest_number_or_null(busiest != NULL && busiest->kafka_total_eps > 0
                                    ? busiest->kafka_hottest_eps / busiest->kafka_total_eps
                                    : -1.0));
    json_object_set_new(run, "lag_p99_ms", json_real(lag_p99 >= 0 ? lag_p99 : 0));
    json_object_set_new(run, "lag_max_ms", json_real(lag_max));
    json_object_set_new(run, "gsi_lag_p99_ms", loadtest_number_or_null(gsi_p99));
    json_object_set_new(run, "count_p50_us", loadtest_number_or_null(r->count_p50_us));
    json_object_set_new(run, "count_p99_us", loadtest_number_or_null(r->count_p99_us));
    json_object_set_new(run, "orders_p50_us", loadtest_number_or_null(r->orders_p50_us));
    json_object_set_new(run, "orders_p99_us", loadtest_number_or_null(r->orders_p99_us));
    json_object_set_new(run, "warmup_s", json_integer((json_int_t)r->warmup_s));
    json_object_set_new(run, "latency", loadtest_latency_json(r));
    json_object_set_new(run, "queries", json_integer((json_int_t)r->queries));
    json_object_set_new(run, "query_errors", json_integer((json_int_t)r->query_errors));
    json_t *shards = json_object();
    for (uint32_t i = 0; i < r->day_count; i++) {
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(r->days[i], day);
        json_object_set_new(shards, day, json_integer(r->day_shards[i]));
    }
    json_object_set_new(run, "shards", shards);
    json_object_set_new(run, "growths", loadtest_growths(r));
    json_object_set_new(run, "advice", loadtest_advice(r));
    json_t *warnings = json_array();
    for (uint32_t i = 0; i < r->warning_count; i++) {
        json_array_append_new(warnings, json_string(r->warnings[i]));
    }
    json_object_set_new(run, "warnings", warnings);
    json_object_set_new(run, "overhead",
                        json_pack("{s:f, s:f, s:f, s:f}", "sampler_cpu_s", r->sampler_cpu_s,
                                  "queries_cpu_s", r->queries_cpu_s, "probe_cpu_s", r->probe_cpu_s,
                                  "sampler_cpu_share",
                                  r->duration_s > 0 ? r->sampler_cpu_s / r->duration_s : 0.0));
    json_t *series = loadtest_series(r);
    json_object_set_new(series, "partitions", loadtest_partition_series(r));
    json_object_set_new(run, "series", series);
    json_object_set_new(run, "summary", gate_summary_derive(run));
    if (r->heat_history != NULL) {
        json_object_set(run, "heat_history", r->heat_history);
    }
    return run;
}

static json_t *loadtest_machine(void)
{
    struct utsname u;
    char cpu[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':') != NULL) {
            snprintf(cpu, sizeof(cpu), "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return json_pack("{s:I, s:s, s:s}", "cores", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN),
                     "kernel", uname(&u) == 0 ? u.release : "unknown", "cpu", cpu);
}

static json_t *loadtest_document(const struct loadgen_loadtest_config *cfg)
{
    char started[DS_TS_TEXT_SIZE];
    ds_ts_format(ds_clock_realtime_ms(), started);
    json_t *doc = json_pack(
        "{s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:o, s:[]}", "schema",
        LOADTEST_REPORT_SCHEMA, "command", cfg->command, "profile",
        loadgen_profile_name(cfg->workload.profile), "events", (json_int_t)cfg->workload.events,
        "rate", (json_int_t)cfg->rate, "nodes", (json_int_t)cfg->nodes, "queries_per_s",
        (json_int_t)cfg->queries_per_s, "warmup_s", (json_int_t)cfg->warmup_s, "shard_capacity_eps",
        (json_int_t)cfg->capacity_eps, "max_shards", (json_int_t)cfg->max_shards,
        "kafka_partitions", (json_int_t)cfg->partitions, "started", started, "machine",
        loadtest_machine(), "runs");
    return doc;
}

/* ---- the runs ---------------------------------------------------------------------------- */

/* Writes OUT/report.json atomically (a run's results survive a later run's failure). */
static int loadtest_write(const char *out_dir, json_t *doc)
{
    char path[DS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/report.json", out_dir);
    char *text = json_dumps(doc, JSON_INDENT(1) | JSON_REAL_PRECISION(LOADTEST_REPORT_REAL_DIGITS));
    if (text == NULL) {
        return loadtest_error(-ENOMEM, "report.json: out of memory");
    }
    int rc = ds_write_file_atomic(path, text, strlen(text));
    free(text);
    if (rc != 0) {
        return loadtest_error(rc, "%s: %s", path, ds_strerror(rc));
    }
    return 0;
}

static const char *loadtest_text(const json_t *o, const char *key)
{
    const char *text = json_string_value(json_object_get(o, key));
    return text != NULL ? text : "-";
}

/* Under the table: a line per advice a run's nodes gave (more shards cannot help). */
static void loadtest_summary_advice(const json_t *run)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(run, "advice"), i, a)
    {
        printf("%s: advice %s (%s): %s; remedy: %s\n", loadtest_text(run, "strategy"),
               loadtest_text(a, "case"), loadtest_text(a, "subject"), loadtest_text(a, "evidence"),
               loadtest_text(a, "remedy"));
    }
}

/* The table on stdout: one line per run, then the runs' advice. */
static void loadtest_summary(json_t *doc)
{
    printf("\n%-28s %10s %10s %9s %26s %7s %12s %9s %9s\n", "strategy", "produced", "stored",
           "events/s", "hot partition (peak/s)", "skew", "throttled", "lag p99", "count p99");
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(doc, "runs"), i, run)
    {
        json_t *hot = json_object_get(run, "hot_partition");
        char hot_text[64] = "-";
        if (json_is_object(hot)) {
            snprintf(hot_text, sizeof(hot_text), "%s %.0f",
                     json_string_value(json_object_get(hot, "key")),
                     json_number_value(json_object_get(hot, "peak_eps")));
        }
        json_t *skew = json_object_get(run, "hot_day_skew");
        json_t *count = json_object_get(run, "count_p99_us");
        printf("%-28s %10lld %10lld %9.0f %26s %7.2f %12lld %6.0f ms %6.0f us\n",
               json_string_value(json_object_get(run, "strategy")),
               (long long)json_integer_value(json_object_get(run, "events_produced")),
               (long long)json_integer_value(json_object_get(run, "events_stored")),
               json_number_value(json_object_get(run, "throughput_eps")), hot_text,
               json_is_number(skew) ? json_number_value(skew) : 0.0,
               (long long)json_integer_value(json_object_get(run, "would_throttle_events")),
               json_number_value(json_object_get(run, "lag_p99_ms")),
               json_is_number(count) ? json_number_value(count) : 0.0);
    }
    json_array_foreach(json_object_get(doc, "runs"), i, run)
    {
        loadtest_summary_advice(run);
    }
}

/* A latency figure for the table: "-" when the run has none (not measured, or an older run). */
static const char *loadtest_latency_cell(const json_t *latency, const char *key, char *dst,
                                         size_t size)
{
    const json_t *v = json_object_get(latency, key);
    if (!json_is_number(v)) {
        return "-";
    }
    snprintf(dst, size, "%.2f", json_number_value(v));
    return dst;
}

/* The latency table on stdout: per run, each latency's percentiles in ms. */
static void loadtest_latency_table(json_t *doc)
{
    static const char *const kinds[][2] = {
        {"send_delay", "send delay"},         {"durable", "schedule->durable"},
        {"queryable", "schedule->queryable"}, {"count_query", "count query"},
        {"orders_query", "orders query"},
    };
    static const char *const cols[] = {"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"};
    printf("\n%-28s %10s %10s %10s %10s %10s\n", "latency (ms)", "p50", "p90", "p99", "p99.9",
           "max");
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(doc, "runs"), i, run)
    {
        const json_t *latency = json_object_get(run, "latency");
        printf("%s", json_string_value(json_object_get(run, "strategy")));
        const json_t *warmup = json_object_get(latency, "warmup_s");
        if (json_integer_value(warmup) > 0) {
            printf(" (after a %lld s warmup)", (long long)json_integer_value(warmup));
        }
        printf("\n");
        for (size_t k = 0; k < DS_ARRAY_LEN(kinds); k++) {
            const json_t *one = json_object_get(latency, kinds[k][0]);
            char cells[DS_ARRAY_LEN(cols)][32];
            printf("  %-26s", kinds[k][1]);
            for (size_t c = 0; c < DS_ARRAY_LEN(cols); c++) {
                printf(" %10s", loadtest_latency_cell(one, cols[c], cells[c], sizeof(cells[c])));
            }
            printf("\n");
        }
    }
}

/* Draws the report again from DIR/report.json, after checking the gate when there is one. */
int loadgen_loadtest_render(const char *dir, const struct loadgen_loadtest_gate *gate,
                            const struct loadgen_report_assets *assets)
{
    char path[DS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/report.json", dir);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        return loadtest_error(-DS_EUSAGE, "%s: %s (line %d)", path, err.text, err.line);
    }
    if (gate != NULL && !json_is_array(json_object_get(doc, "runs"))) {
        json_decref(doc); /* without a gate, the renderer says what is wrong with the document */
        return loadtest_error(-DS_EUSAGE, "%s: not a load test report (no \"runs\" array)", path);
    }
    size_t breaches = gate != NULL ? gate_apply(gate, doc, stdout) : 0;
    int rc = gate != NULL ? loadtest_write(dir, doc) : 0;
    if (rc == 0) {
        rc = loadtest_report_render(dir, doc, assets, stderr);
        if (rc != 0) {
            loadtest_error(rc, "cannot render the report in %s: %s", dir, ds_strerror(rc));
        }
    }
    json_decref(doc);
    return rc != 0 ? rc : (int)breaches;
}

/* Runs every strategy, writing report.json after each; returns 0 or a negative code. */
static int loadtest_runs(const struct loadgen_loadtest_config *cfg, json_t *doc)
{
    struct loadtest_strategy strategies[LOADTEST_STRATEGIES_MAX];
    uint32_t count = loadtest_strategies(cfg, strategies);
    int failed = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct loadtest_result *res = calloc(1, sizeof(*res));
        if (res == NULL) {
            return -ENOMEM;
        }
        int rc = loadtest_run(cfg, &strategies[i], i, count, res);
        if (rc == 0) {
            json_array_append_new(json_object_get(doc, "runs"), loadtest_run_json(res, cfg));
            failed += res->stored != res->produced ? 1 : 0;
        }
        loadtest_result_deinit(res);
        free(res);
        if (rc != 0) {
            return rc;
        }
        rc = loadtest_write(cfg->out_dir, doc);
        if (rc != 0) {
            return rc;
        }
    }
    return failed > 0 ? -DS_ECORRUPT : 0;
}

/* The summary table, then the gate (its verdicts written into report.json), then report.md.
 * Returns the gate's breaches, or a negative code (printed) when a file could not be written. */
static int loadtest_finish(const struct loadgen_loadtest_config *cfg, json_t *doc)
{
    loadtest_summary(doc);
    loadtest_latency_table(doc);
    size_t breaches = 0;
    int rc = 0;
    if (cfg->gate != NULL) {
        breaches = gate_apply(cfg->gate, doc, stdout);
        rc = loadtest_write(cfg->out_dir, doc);
    }
    if (rc == 0) {
        rc = loadtest_report_render(cfg->out_dir, doc, cfg->assets, stderr);
        if (rc != 0) {
            loadtest_error(rc, "%s", ds_strerror(rc));
        }
    }
    printf("\nreport: %s/report.md%s%s%s (data: %s/report.json)\n", cfg->out_dir,
           cfg->assets != NULL ? ", " : "", cfg->assets != NULL ? cfg->out_dir : "",
           cfg->assets != NULL ? "/report.html" : "", cfg->out_dir);
    return rc != 0 ? rc : (int)breaches;
}

int loadgen_loadtest_run(const struct loadgen_loadtest_config *cfg)
{
    ASSERT(cfg->out_dir != NULL);
    ASSERT(cfg->command != NULL);
    int rc = ds_mkdir_p(cfg->out_dir);
    json_t *doc = rc == 0 ? loadtest_document(cfg) : NULL;
    if (rc != 0 || doc == NULL) {
        rc = rc != 0 ? rc : -ENOMEM;
        return loadtest_error(rc, "%s: %s", cfg->out_dir, ds_strerror(rc));
    }
    rc = loadtest_runs(cfg, doc);
    int finish = json_array_size(json_object_get(doc, "runs")) > 0 ? loadtest_finish(cfg, doc) : 0;
    json_decref(doc);
    if (rc == -DS_ECORRUPT) {
        return loadtest_error(rc, "a run stored a different number of events than "
                                  "the broker acknowledged (see report.md)");
    }
    if (rc != 0) {
        return loadtest_error(rc, "%s", ds_strerror(rc));
    }
    return finish;
}
