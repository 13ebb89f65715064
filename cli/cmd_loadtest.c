/*
 * `dayshard loadtest`: drives a skewed load through the real pipeline (broker, node processes,
 * an open-loop producer, a query load) under one shard strategy or, with --compare, several,
 * and reports what sharding did: write heat per partition over time, the hottest share,
 * throttling against --shard-capacity, lag, query latency, final shard counts
 * (OUT/report.json, OUT/report.md, PNG plots).
 *
 * This file: arguments, the strategies, report.json (jansson), then loadtest_report.c renders
 * report.md and the plots from report.json alone, so a report can be drawn again
 * (`--render-only DIR`) or from another machine's run.
 *
 * Rejected: a shell script around `dayshard run` and `produce` (no precise producer
 * progress, a pacing loop of its own, and one more language to test).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/loadtest.h"
#include "cli/loadtest_report.h"
#include "storage/storage.h"

const char cmd_loadtest_usage[] =
    "usage: dayshard loadtest [--profile P] [--events N] [--rate R] [options]\n"
    "\n"
    "Drives a skewed load through the real pipeline: the embedded Kafka broker (or --brokers),\n"
    "K `dayshard run` node processes, an open-loop paced producer (a slow pipeline shows as\n"
    "lag, not as a slower producer) and Q queries a second (day counts and a customer's newest\n"
    "10), sampling every node's /v1/heat once a second. Writes OUT/report.json, OUT/report.md\n"
    "and PNG plots (gnuplot): write heat per partition over time, the hottest partition's\n"
    "share, lag, query latency.\n"
    "\n"
    "options:\n"
    "  --profile P          uniform, busy-day (default: 30% of a month's orders on one day),\n"
    "                       hot-customer (one customer places 20%) or flash-sale (a day's rate\n"
    "                       jumps 50x for a minute)\n"
    "  --events N           events to produce (default 600000)\n"
    "  --rate R             events/s, the producer's schedule (default 10000)\n"
    "  --nodes K            node processes in one consumer group, 1..8 (default 1)\n"
    "  --key K              what the producer keys messages by: order (default), customer, day\n"
    "                       (one Kafka partition takes a whole day) or partition (DAY#d#k from\n"
    "                       the shard map: salted keys)\n"
    "  --shards S           adaptive (default: start at 4, grow with the rate) or N (fixed)\n"
    "  --compare            run fixed:1, fixed:4 and adaptive with --key, then adaptive with\n"
    "                       --key day and with --key partition, side by side\n"
    "  --queries Q          query requests a second during the run (default 50; 0: none)\n"
    "  --shard-capacity R   events/s one partition should take (default 1000, DynamoDB's\n"
    "                       per-partition write limit): the growth threshold, and what\n"
    "                       would-throttle counts against\n"
    "  --max-shards M       adaptive growth stops at M shards a day (default 256)\n"
    "  --partitions P       Kafka partitions of the embedded broker's topic (default 8)\n"
    "  --brokers B          a real Kafka cluster instead (a topic per run, created on first use\n"
    "                       where the cluster allows it)\n"
    "  --seed S             the generator's seed (default 42)\n"
    "  --no-gsi             nodes without the by-customer index (customer queries then fail)\n"
    "  --model M            what the nodes' new data directories count: orders (the default:\n"
    "                       one per order_id, its latest version) or events (every event\n"
    "                       counts); given to every `dayshard run --model`\n"
    "  --out DIR            where the report goes (default loadtest-YYYYMMDD-HHMMSS); each\n"
    "                       run's node logs stay in DIR/run-N\n"
    "  --keep-data          keep the nodes' data directories too (DIR/run-N/node-K)\n"
    "  --render-only DIR    draw DIR/report.md and the plots again from DIR/report.json\n"
    "  --help               this text\n"
    "The embedded broker keeps ~5 MiB per partition: a node that falls ~80,000 messages behind\n"
    "on a partition loses events there, and the run warns when lag nears that.\n";

struct loadtest_args {
    struct lt_config cfg;
    bool compare;
    bool adaptive;
    uint32_t fixed_shards;
    uint32_t max_shards;
    enum ingest_produce_key key;
    char out[DS_PATH_MAX];
    const char *render_only;
};

static int loadtest_parse_shards(struct loadtest_args *a, const char *value)
{
    uint64_t n = 0;
    if (strcmp(value, "adaptive") == 0) {
        a->adaptive = true;
        return 0;
    }
    if (cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n) != 0) {
        return -DS_EUSAGE;
    }
    a->adaptive = false;
    a->fixed_shards = (uint32_t)n;
    return 0;
}

static int loadtest_parse_one(int c, const char *value, void *user)
{
    struct loadtest_args *a = user;
    uint64_t n = 0;
    struct lt_config *cfg = &a->cfg;
    switch (c) {
    case 'n':
    case 'p':
    case 's': return cli_parse_workload_option(c, value, &cfg->workload);
    case 'r':
        if (cli_parse_u64(value, 1, INGEST_WORKLOAD_RATE_EPS_MAX, &cfg->rate) != 0) {
            return -DS_EUSAGE;
        }
        cfg->workload.rate_eps = (double)cfg->rate;
        return 0;
    case 'K':
        if (cli_parse_u64(value, 1, LT_NODES_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->nodes = (uint32_t)n;
        return 0;
    case 'k': return ingest_produce_key_parse(value, &a->key);
    case 'S': return loadtest_parse_shards(a, value);
    case 'c': a->compare = true; return 0;
    case 'q':
        if (cli_parse_u64(value, 0, LT_QUERIES_PER_S_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->queries_per_s = (uint32_t)n;
        return 0;
    case 'C':
        if (cli_parse_u64(value, 1, SHARD_CAPACITY_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->capacity_eps = (uint32_t)n;
        return 0;
    case 'M':
        if (cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        a->max_shards = (uint32_t)n;
        return 0;
    case 'P':
        if (cli_parse_u64(value, 1, INGEST_BROKER_PARTITIONS_MAX, &n) != 0) {
            return -DS_EUSAGE;
        }
        cfg->partitions = (uint32_t)n;
        return 0;
    case 'b': cfg->brokers = value; return 0;
    case 'G': cfg->no_gsi = true; return 0;
    case 'D': cfg->keep_data = true; return 0;
    case 'o': snprintf(a->out, sizeof(a->out), "%s", value); return 0;
    case 'R': a->render_only = value; return 0;
    case 'm': {
        enum storage_model model = STORAGE_MODEL_RECORDED;
        if (storage_model_parse(value, &model) != 0) {
            return -DS_EUSAGE;
        }
        cfg->model = storage_model_name(model);
        return 0;
    }
    }
    return -DS_EUSAGE;
}

static void loadtest_defaults(struct loadtest_args *a)
{
    ingest_workload_defaults(&a->cfg.workload);
    a->cfg.workload.profile = INGEST_PROFILE_BUSY_DAY;
    a->cfg.workload.events = 600000;
    a->cfg.workload.seed = 42;
    a->cfg.rate = 10000;
    a->cfg.workload.rate_eps = 10000.0;
    a->cfg.nodes = 1;
    a->cfg.queries_per_s = 50;
    a->cfg.capacity_eps = SHARD_CAPACITY_DEFAULT;
    a->cfg.partitions = 8;
    a->adaptive = true;
    a->max_shards = SHARD_MAX_SHARDS_DEFAULT;
    a->key = INGEST_PRODUCE_KEY_ORDER;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(a->out, sizeof(a->out), "loadtest-%Y%m%d-%H%M%S", &tm);
}

/* The nodes' directories are new ones (OUT/run-N/node-K): the model they would get, checked
 * on the first before any node starts, so a refused one is a usage error here rather than a
 * node that exits. Returns 0 or CLI_USAGE (reported). */
static int loadtest_model_check(const struct loadtest_args *a)
{
    char dir[sizeof(a->out) + 32];
    snprintf(dir, sizeof(dir), "%s/run-1/node-0", a->out);
    enum storage_model wanted = STORAGE_MODEL_RECORDED;
    if (a->cfg.model != NULL) {
        int parsed = storage_model_parse(a->cfg.model, &wanted);
        ASSERT(parsed == 0); /* a name storage_model_name gave */
    }
    char why[STORAGE_MODEL_WHY_SIZE];
    enum storage_model model = STORAGE_MODEL_RECORDED;
    int rc = storage_model_check(dir, wanted, &model, why, sizeof(why));
    return rc == 0 ? 0 : cli_error("loadtest", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s", why);
}

static int loadtest_parse(int argc, char **argv, struct loadtest_args *a)
{
    static const struct option options[] = {{"profile", required_argument, NULL, 'p'},
                                            {"events", required_argument, NULL, 'n'},
                                            {"rate", required_argument, NULL, 'r'},
                                            {"nodes", required_argument, NULL, 'K'},
                                            {"key", required_argument, NULL, 'k'},
                                            {"shards", required_argument, NULL, 'S'},
                                            {"compare", no_argument, NULL, 'c'},
                                            {"queries", required_argument, NULL, 'q'},
                                            {"shard-capacity", required_argument, NULL, 'C'},
                                            {"max-shards", required_argument, NULL, 'M'},
                                            {"partitions", required_argument, NULL, 'P'},
                                            {"brokers", required_argument, NULL, 'b'},
                                            {"seed", required_argument, NULL, 's'},
                                            {"no-gsi", no_argument, NULL, 'G'},
                                            {"out", required_argument, NULL, 'o'},
                                            {"render-only", required_argument, NULL, 'R'},
                                            {"keep-data", no_argument, NULL, 'D'},
                                            {"model", required_argument, NULL, 'm'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int next = 0;
    int rc = cli_options_parse("loadtest", argc, argv, "", options, loadtest_parse_one, a, &next);
    if (rc != 0) {
        return rc;
    }
    if (next < argc) {
        return cli_error("loadtest", CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    if (!a->adaptive && a->fixed_shards > a->max_shards) {
        return cli_error("loadtest", CLI_USAGE, "--shards %u is above --max-shards %u",
                         a->fixed_shards, a->max_shards);
    }
    if (a->cfg.workload.events == 0) {
        return cli_error("loadtest", CLI_USAGE, "--events must be at least 1");
    }
    rc = loadtest_model_check(a);
    if (rc != 0) {
        return rc;
    }
    return ingest_workload_config_check(&a->cfg.workload) == 0
               ? 0
               : cli_error("loadtest", CLI_USAGE, "the workload does not fit (see above)");
}

/* ---- strategies ---------------------------------------------------------------------------- */

static void loadtest_strategy(struct lt_strategy *s, bool adaptive, uint32_t shards,
                              uint32_t max_shards, enum ingest_produce_key key)
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
    snprintf(s->name, sizeof(s->name), "%s, key %s", s->shards_text, ingest_produce_key_name(key));
}

/* The runs: one strategy, or the --compare set. Returns how many. */
static uint32_t loadtest_strategies(const struct loadtest_args *a, struct lt_strategy *out)
{
    if (!a->compare) {
        loadtest_strategy(&out[0], a->adaptive, a->fixed_shards, a->max_shards, a->key);
        return 1;
    }
    uint32_t n = 0;
    loadtest_strategy(&out[n++], false, 1, 1, a->key);
    loadtest_strategy(&out[n++], false, 4, 4, a->key);
    loadtest_strategy(&out[n++], true, 0, a->max_shards, a->key);
    loadtest_strategy(&out[n++], true, 0, a->max_shards, INGEST_PRODUCE_KEY_DAY);
    loadtest_strategy(&out[n++], true, 0, a->max_shards, INGEST_PRODUCE_KEY_PARTITION);
    ASSERT(n <= LT_STRATEGIES_MAX);
    return n;
}

/* ---- report.json --------------------------------------------------------------------------- */

static json_t *loadtest_number_or_null(double v)
{
    return v >= 0 ? json_real(v) : json_null();
}

/* The second at which the hot day wrote the most: where its skew is read. */
static const struct lt_second *loadtest_busiest(const struct lt_result *r)
{
    const struct lt_second *best = NULL;
    for (uint32_t i = 0; i < r->second_count; i++) {
        if (best == NULL || r->seconds[i].hot_day_eps > best->hot_day_eps) {
            best = &r->seconds[i];
        }
    }
    return best;
}

static json_t *loadtest_series(const struct lt_result *r)
{
    json_t *series = json_object();
    const char *names[] = {"t_s",           "produced_eps",       "stored_eps",  "lag_ms",
                           "gsi_lag_ms",    "hottest_share",      "hottest_eps", "count_p99_us",
                           "orders_p99_us", "kafka_hottest_share"};
    json_t *arrays[DS_ARRAY_LEN(names)];
    for (size_t k = 0; k < DS_ARRAY_LEN(names); k++) {
        arrays[k] = json_array();
        json_object_set_new(series, names[k], arrays[k]);
    }
    for (uint32_t i = 0; i < r->second_count; i++) {
        const struct lt_second *s = &r->seconds[i];
        const struct lt_second *prev = i > 0 ? &r->seconds[i - 1] : NULL;
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
                                                  : -1.0};
        for (size_t k = 0; k < DS_ARRAY_LEN(names); k++) {
            json_array_append_new(arrays[k], loadtest_number_or_null(values[k]));
        }
    }
    return series;
}

/* The LT_PLOT_KEYS_MAX partitions with the most events, each with its rate every second. */
static json_t *loadtest_partition_series(const struct lt_result *r)
{
    bool taken[LT_KEYS_MAX] = {false};
    json_t *parts = json_object();
    for (uint32_t n = 0; n < LT_PLOT_KEYS_MAX; n++) {
        uint32_t best = LT_KEYS_MAX;
        for (uint32_t k = 0; k < r->key_count; k++) {
            if (!taken[k] && r->keys[k].total > 0 &&
                (best == LT_KEYS_MAX || r->keys[k].total > r->keys[best].total)) {
                best = k;
            }
        }
        if (best == LT_KEYS_MAX) {
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

static json_t *loadtest_hot_partition(const struct lt_result *r, uint32_t capacity_eps)
{
    const struct lt_second *peak = NULL;
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

static json_t *loadtest_growths(const struct lt_result *r)
{
    json_t *list = json_array();
    for (uint32_t i = 0; i < r->growth_count; i++) {
        const struct lt_growth *g = &r->growths[i];
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(g->day, day);
        json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:f, s:s}", "day", day, "from",
                                              (json_int_t)g->from, "to", (json_int_t)g->to, "at_s",
                                              g->at_s, "reason", g->reason));
    }
    return list;
}

/* Percentiles of the per-second lags over a run. */
static void loadtest_lags(const struct lt_result *r, double *lag_p99, double *lag_max,
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
    *lag_p99 = lt_percentile(v, nv, 0.99);
    *gsi_p99 = lt_percentile(g, ng, 0.99);
    free(v);
    free(g);
}

static json_t *loadtest_run_json(const struct lt_result *r, const struct lt_config *cfg)
{
    char hot_day[DS_DATE_TEXT_SIZE];
    ds_date_format(r->hot_day, hot_day);
    const struct lt_second *busiest = loadtest_busiest(r);
    double skew = -1.0;
    if (busiest != NULL && busiest->hot_day_eps > 0 && busiest->hot_day_shards > 0) {
        skew = busiest->hot_day_shard_max_eps / (busiest->hot_day_eps / busiest->hot_day_shards);
    }
    double lag_p99 = 0, lag_max = 0, gsi_p99 = 0;
    loadtest_lags(r, &lag_p99, &lag_max, &gsi_p99);
    json_t *run = json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:o, s:s, s:o, s:I, s:I, s:b}", "strategy",
        r->strategy.name, "shard_strategy", r->strategy.shards_text, "key",
        ingest_produce_key_name(r->strategy.key), "events_produced", (json_int_t)r->produced,
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
    json_t *warnings = json_array();
    for (uint32_t i = 0; i < r->warning_count; i++) {
        json_array_append_new(warnings, json_string(r->warnings[i]));
    }
    json_object_set_new(run, "warnings", warnings);
    json_object_set_new(run, "overhead",
                        json_pack("{s:f, s:f, s:f}", "sampler_cpu_s", r->sampler_cpu_s,
                                  "queries_cpu_s", r->queries_cpu_s, "sampler_cpu_share",
                                  r->duration_s > 0 ? r->sampler_cpu_s / r->duration_s : 0.0));
    json_t *series = loadtest_series(r);
    json_object_set_new(series, "partitions", loadtest_partition_series(r));
    json_object_set_new(run, "series", series);
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

static json_t *loadtest_document(const struct loadtest_args *a, int argc, char **argv)
{
    char command[2048] = "dayshard";
    size_t len = strlen(command);
    for (int i = 0; i < argc && len + 2 < sizeof(command); i++) {
        int n = snprintf(command + len, sizeof(command) - len, " %s", argv[i]);
        len = n > 0 ? len + (size_t)n : len;
        len = len < sizeof(command) ? len : sizeof(command) - 1;
    }
    char started[DS_TS_TEXT_SIZE];
    ds_ts_format(ds_clock_realtime_ms(), started);
    const struct lt_config *cfg = &a->cfg;
    json_t *doc =
        json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:o, s:[]}", "version",
                  1, "command", command, "profile", cli_profile_name(cfg->workload.profile),
                  "events", (json_int_t)cfg->workload.events, "rate", (json_int_t)cfg->rate,
                  "nodes", (json_int_t)cfg->nodes, "queries_per_s", (json_int_t)cfg->queries_per_s,
                  "shard_capacity_eps", (json_int_t)cfg->capacity_eps, "max_shards",
                  (json_int_t)a->max_shards, "kafka_partitions", (json_int_t)cfg->partitions,
                  "started", started, "machine", loadtest_machine(), "runs");
    return doc;
}

/* ---- the command --------------------------------------------------------------------------- */

/* Writes OUT/report.json atomically (a run's results survive a later run's failure). */
static int loadtest_write(const char *out_dir, json_t *doc)
{
    char path[DS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/report.json", out_dir);
    char *text = json_dumps(doc, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    if (text == NULL) {
        return cli_error("loadtest", -ENOMEM, "report.json: out of memory");
    }
    int rc = ds_write_file_atomic(path, text, strlen(text));
    free(text);
    if (rc != 0) {
        return cli_error("loadtest", rc, "%s: %s", path, ds_strerror(rc));
    }
    return 0;
}

/* The table on stdout: one line per run. */
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
}

/* Draws the report again from DIR/report.json. */
static int loadtest_render_only(const char *dir)
{
    char path[DS_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/report.json", dir);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        return cli_error("loadtest", CLI_FAIL, "%s: %s (line %d)", path, err.text, err.line);
    }
    int rc = loadtest_report_render(dir, doc, stderr);
    json_decref(doc);
    if (rc != 0) {
        return cli_error("loadtest", CLI_FAIL, "cannot render the report in %s: %s", dir,
                         ds_strerror(rc));
    }
    printf("%s/report.md\n", dir);
    return CLI_OK;
}

/* Runs every strategy, writing report.json after each; returns 0 or a negative code. */
static int loadtest_runs(struct loadtest_args *a, json_t *doc)
{
    struct lt_strategy strategies[LT_STRATEGIES_MAX];
    uint32_t count = loadtest_strategies(a, strategies);
    int failed = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct lt_result *res = calloc(1, sizeof(*res));
        if (res == NULL) {
            return -ENOMEM;
        }
        int rc = lt_run(&a->cfg, &strategies[i], i, count, res);
        if (rc == 0) {
            json_array_append_new(json_object_get(doc, "runs"), loadtest_run_json(res, &a->cfg));
            failed += res->stored != res->produced ? 1 : 0;
        }
        lt_result_deinit(res);
        free(res);
        if (rc != 0) {
            return rc;
        }
        rc = loadtest_write(a->cfg.out_dir, doc);
        if (rc != 0) {
            return rc;
        }
    }
    return failed > 0 ? -DS_ECORRUPT : 0;
}

int cmd_loadtest(int argc, char **argv)
{
    struct loadtest_args *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return cli_error("loadtest", CLI_FAIL, "out of memory");
    }
    loadtest_defaults(a);
    int rc = loadtest_parse(argc, argv, a);
    if (rc != 0 || a->render_only != NULL) {
        rc = rc == -1  ? cli_help(cmd_loadtest_usage)
             : rc != 0 ? rc
                       : loadtest_render_only(a->render_only);
        free(a);
        return rc;
    }
    char self[DS_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    a->cfg.self = self;
    a->cfg.out_dir = a->out;
    a->cfg.progress_tty = isatty(STDERR_FILENO) == 1;
    rc = ds_mkdir_p(a->out);
    json_t *doc = rc == 0 ? loadtest_document(a, argc, argv) : NULL;
    if (rc != 0 || doc == NULL) {
        rc = cli_error("loadtest", CLI_FAIL, "%s: %s", a->out, ds_strerror(rc != 0 ? rc : -ENOMEM));
        free(a);
        return rc;
    }
    rc = loadtest_runs(a, doc);
    int render = json_array_size(json_object_get(doc, "runs")) > 0
                     ? loadtest_report_render(a->out, doc, stderr)
                     : 0;
    if (json_array_size(json_object_get(doc, "runs")) > 0) {
        loadtest_summary(doc);
        printf("\nreport: %s/report.md (data: %s/report.json)\n", a->out, a->out);
    }
    json_decref(doc);
    free(a);
    if (rc == -DS_ECORRUPT) {
        return cli_error("loadtest", CLI_FAIL,
                         "a run stored a different number of events than "
                         "the broker acknowledged (see report.md)");
    }
    if (rc != 0 || render != 0) {
        return cli_error("loadtest", CLI_FAIL, "%s", ds_strerror(rc != 0 ? rc : render));
    }
    return CLI_OK;
}
