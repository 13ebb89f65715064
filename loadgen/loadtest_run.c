/*
 * One run of `dayshard loadtest` (see loadtest.h): the real pipeline under one shard strategy.
 *
 * Threads: the caller samples (every node's /v1/heat once a second, the progress line, the
 * end of the run); a producer thread runs loadgen_produce_run open loop (each event is due at
 * its scheduled time, so a slow pipeline shows as lag, never as a slower producer); a query
 * thread sends day counts and customer newest-10 requests on its own schedule over keep-alive
 * connections and times each. Nodes are `dayshard run` processes (this binary), so a node's
 * CPU, memory and crashes are its own, as in production.
 *
 * A fourth thread probes every node's durable and queryable totals every
 * LOADTEST_PROBE_INTERVAL_MS for the end-to-end latencies (loadtest_latency.c), which the
 * producer's send times complete.
 *
 * Lag in time is the horizontal distance between the produced and the stored curves: at each
 * sample, how long ago the producer had acknowledged as many events as are now durable
 * (interpolated between samples). Unlike the consumer lag in messages it reads the same at any
 * rate, and it covers the broker, the node and the commit.
 *
 * Rejected: sampling /metrics (Prometheus text to parse for figures /v1/heat has as JSON);
 * running the nodes as threads of this process (their CPU and failures would mix with the
 * producer's, and a kill would take the test down).
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "loadgen/broker_embed.h"
#include "loadgen/loadtest.h"
#include "loadgen/node_proc.h"

#define LOADTEST_NODE_START_TIMEOUT_MS 30000
#define LOADTEST_READY_TIMEOUT_MS 60000
#define LOADTEST_STOP_TIMEOUT_MS 30000
/* After the producer finished, the run waits for the nodes at most this long without
 * progress before it gives up and reports what was stored. */
#define LOADTEST_DRAIN_STALL_MS 30000
/* Samples are taken this far into each second, after the nodes' heat closed the previous one. */
#define LOADTEST_SAMPLE_OFFSET_MS 300
/* After the sampler saw every event durable, the probe goes on at most this long for the
 * queryable total to catch up, so the last events are measured rather than left unseen. */
#define LOADTEST_PROBE_DRAIN_MS 5000

extern char **environ;

int loadtest_error(int code, const char *fmt, ...)
{
    char message[2048]; /* an unknown --fail-if field lists every field */
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    const char *format = getenv("DS_LOG_FORMAT");
    if (format != NULL && strcmp(format, "json") == 0) {
        ds_log_error("loadtest: %s", message); /* a collector reads one JSON object per line */
        return code;
    }
    fprintf(stderr, "dayshard loadtest: %s\n", message);
    return code;
}

struct loadtest_node {
    pid_t pid;
    char url[128];
    char data[DS_PATH_MAX + 32];
    struct http_client_conn *conn; /* the sampler's */
};

/* One query's latency, for per-second and whole-run percentiles. */
struct loadtest_query {
    uint32_t second;
    bool orders; /* else a day count */
    bool ok;
    float us;
};

struct loadtest_state {
    const struct loadgen_loadtest_config *cfg;
    const struct loadtest_strategy *strategy;
    struct loadtest_result *res;
    char dir[DS_PATH_MAX];
    char topic[128];
    const char *brokers;
    struct loadgen_broker *broker;
    struct loadtest_node nodes[LOADGEN_LOADTEST_NODES_MAX];
    uint32_t node_count;
    uint64_t t0_ns;
    /* producer thread */
    pthread_t producer;
    bool producer_started;
    struct loadgen_produce_config produce;
    struct loadgen_produce_stats produce_stats;
    struct ingest_shardmap_follower *follower;
    struct ingest_kafka_props props; /* the producer's */
    atomic_uint_fast64_t acked;
    atomic_bool producer_done;
    int produce_rc;
    volatile int produce_stop;
    /* query thread */
    pthread_t querier;
    bool querier_started;
    atomic_bool stop_queries;
    struct loadtest_query *queries; /* queries_max */
    uint64_t queries_max;
    atomic_uint_fast64_t query_count;
    clockid_t querier_clock;
    char hot_customer[32];
    pid_t xdg_open; /* --open-console's, -1 none */
    /* probe thread (end-to-end latency) */
    struct loadtest_latency *latency;
    pthread_t prober;
    bool prober_started;
    atomic_int stop_probes; /* LOADTEST_PROBES_* */
};

/* How the probe thread is asked to stop. */
enum {
    LOADTEST_PROBES_RUN = 0,
    LOADTEST_PROBES_DRAIN, /* once both totals reached the acknowledged events */
    LOADTEST_PROBES_STOP,  /* now (a failed run) */
};

static double loadtest_elapsed_s(const struct loadtest_state *s)
{
    return (double)(ds_clock_ns() - s->t0_ns) / 1e9;
}

static void loadtest_sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void loadtest_warn(struct loadtest_result *res, const char *text)
{
    fprintf(stderr, "\ndayshard loadtest: warning: %s\n", text);
    if (res->warning_count < DS_ARRAY_LEN(res->warnings)) {
        snprintf(res->warnings[res->warning_count++], sizeof(res->warnings[0]), "%s", text);
    }
}

/* ---- nodes --------------------------------------------------------------------------------- */

/* Starts node k: `dayshard run` with the run's strategy; its log goes to DIR/node-k.log. */
static int loadtest_node_start(struct loadtest_state *s, uint32_t k)
{
    struct loadtest_node *node = &s->nodes[k];
    char log[DS_PATH_MAX + 64], group[64], shards[16], max_shards[16], capacity[16];
    snprintf(node->data, sizeof(node->data), "%s/node-%u", s->dir, k);
    snprintf(log, sizeof(log), "%s/node-%u.log", s->dir, k);
    snprintf(group, sizeof(group), "loadtest-%d", (int)getpid());
    snprintf(shards, sizeof(shards), "%u", s->strategy->base_shards);
    snprintf(max_shards, sizeof(max_shards), "%u", s->strategy->max_shards);
    snprintf(capacity, sizeof(capacity), "%u", s->cfg->capacity_eps);
    const char *argv[32] = {
        s->cfg->self,       "run",      "--brokers",    s->brokers,
        "--topic",          s->topic,   "--group",      group,
        "--data",           node->data, "--http",       "127.0.0.1:0",
        "--shards",         shards,     "--max-shards", max_shards,
        "--shard-capacity", capacity,   "-X",           "session.timeout.ms=6000"};
    size_t argc = 20;
    if (s->cfg->no_gsi) {
        argv[argc++] = "--no-gsi";
    }
    if (s->cfg->model != NULL) {
        argv[argc++] = "--model";
        argv[argc++] = s->cfg->model;
    }
    char address[96] = "";
    int rc = node_proc_spawn(argv, log, false, LOADTEST_NODE_START_TIMEOUT_MS, &node->pid, address,
                             sizeof(address));
    if (rc != 0) {
        return loadtest_error(-1, "node %u did not start (%s): see %s", k, ds_strerror(rc), log);
    }
    snprintf(node->url, sizeof(node->url), "http://%s", address);
    return http_client_conn_open(node->url, NULL, &node->conn);
}

/* Stops every node: SIGTERM, then SIGKILL after LOADTEST_STOP_TIMEOUT_MS. Returns how many exited
 * with a failure. */
static int loadtest_nodes_stop(struct loadtest_state *s)
{
    int failed = 0;
    for (uint32_t k = 0; k < s->node_count; k++) {
        struct loadtest_node *node = &s->nodes[k];
        http_client_conn_close(node->conn);
        node->conn = NULL;
        if (node->pid <= 0) {
            continue;
        }
        int status = node_proc_stop(node->pid, SIGTERM, LOADTEST_STOP_TIMEOUT_MS);
        failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
        node->pid = 0;
    }
    return failed;
}

/* Waits until every node answers /readyz with 200 (joined its group, caught up). */
static int loadtest_nodes_ready(struct loadtest_state *s)
{
    uint64_t deadline = ds_clock_ns() + (uint64_t)LOADTEST_READY_TIMEOUT_MS * 1000000u;
    for (uint32_t k = 0; k < s->node_count; k++) {
        for (;;) { /* bounded by the deadline */
            struct http_client_answer ans;
            int rc = http_client_conn_get(s->nodes[k].conn, "/readyz", &ans);
            long status = ans.status;
            http_client_answer_deinit(&ans);
            if (rc == 0 && status == 200) {
                break;
            }
            if (ds_clock_ns() > deadline) {
                return loadtest_error(-1, "node %u (%s) not ready within %d s", k, s->nodes[k].url,
                                      LOADTEST_READY_TIMEOUT_MS / 1000);
            }
            loadtest_sleep_ms(100);
        }
    }
    return 0;
}

/* ---- the producer and the query load ----------------------------------------------------- */

static void *loadtest_producer_main(void *arg)
{
    struct loadtest_state *s = arg;
    s->produce_rc = loadgen_produce_run(&s->produce, &s->produce_stats, &s->produce_stop);
    atomic_store(&s->producer_done, true);
    return NULL;
}

static int loadtest_producer_start(struct loadtest_state *s)
{
    const struct loadgen_loadtest_config *cfg = s->cfg;
    struct loadgen_produce_config *p = &s->produce;
    p->brokers = s->brokers;
    p->topic = s->topic;
    p->input_fd = -1;
    p->workload = cfg->workload;
    p->rate = cfg->rate;
    p->key = s->strategy->key;
    p->base_shards = s->strategy->base_shards;
    p->acked_live = &s->acked;
    p->on_sent = loadtest_latency_on_sent;
    p->sent_user = s->latency;
    if (cfg->brokers == NULL) {
        broker_embed_producer_props(&s->props);
        p->props = &s->props;
    }
    if (p->key == LOADGEN_PRODUCE_KEY_PARTITION) {
        int rc = ingest_shardmap_follower_open(s->brokers, s->topic, NULL, s->strategy->base_shards,
                                               &s->follower);
        if (rc != 0) {
            return loadtest_error(rc, "cannot follow %s.shardmap: %s", s->topic, ds_strerror(rc));
        }
        p->shards_of_day = ingest_shardmap_follower_shards;
        p->shards_user = s->follower;
    }
    int rc = -pthread_create(&s->producer, NULL, loadtest_producer_main, s);
    s->producer_started = rc == 0;
    return rc;
}

/* Sends one query to node k and records its latency. */
static void loadtest_query_one(struct loadtest_state *s, struct http_client_conn *conn, uint64_t i)
{
    char path[160];
    bool orders = (i & 1u) == 1u;
    if (orders) {
        snprintf(path, sizeof(path), "/v1/customers/%s/orders?limit=10", s->hot_customer);
    } else {
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(s->res->hot_day, day);
        snprintf(path, sizeof(path), "/v1/count?day=%s", day);
    }
    uint64_t start = ds_clock_ns();
    struct http_client_answer ans;
    int rc = http_client_conn_get(conn, path, &ans);
    uint64_t took = ds_clock_ns() - start;
    bool ok = rc == 0 && ans.status == 200;
    http_client_answer_deinit(&ans);
    uint64_t n = atomic_load(&s->query_count);
    if (n < s->queries_max) {
        s->queries[n] =
            (struct loadtest_query){.second = (uint32_t)((start - s->t0_ns) / 1000000000u),
                                    .orders = orders,
                                    .ok = ok,
                                    .us = (float)((double)took / 1000.0)};
        atomic_store(&s->query_count, n + 1);
    }
}

static void *loadtest_querier_main(void *arg)
{
    struct loadtest_state *s = arg;
    pthread_getcpuclockid(pthread_self(), &s->querier_clock);
    struct http_client_conn *conns[LOADGEN_LOADTEST_NODES_MAX] = {0};
    for (uint32_t k = 0; k < s->node_count; k++) {
        if (http_client_conn_open(s->nodes[k].url, NULL, &conns[k]) != 0) {
            conns[k] = NULL;
        }
    }
    uint64_t interval_ns = 1000000000ull / s->cfg->queries_per_s;
    uint64_t start = ds_clock_ns();
    for (uint64_t i = 0; !atomic_load(&s->stop_queries); i++) { /* until stopped; one a turn */
        uint64_t due = start + i * interval_ns;
        uint64_t now = ds_clock_ns();
        if (due > now) {
            struct timespec ts = {.tv_sec = (time_t)((due - now) / 1000000000u),
                                  .tv_nsec = (long)((due - now) % 1000000000u)};
            nanosleep(&ts, NULL);
        }
        struct http_client_conn *conn = conns[i % s->node_count];
        if (conn != NULL) {
            loadtest_query_one(s, conn, i);
        }
    }
    for (uint32_t k = 0; k < s->node_count; k++) {
        http_client_conn_close(conns[k]);
    }
    struct timespec cpu;
    if (clock_gettime(s->querier_clock, &cpu) == 0) {
        s->res->queries_cpu_s = (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9;
    }
    return NULL;
}

/* ---- the end-to-end probe ---------------------------------------------------------------- */

/* The day-count request over the workload's days: what is stored, or queryable. */
static void loadtest_count_path(const struct loadtest_state *s, char *path, size_t size)
{
    const struct loadgen_workload_config *w = &s->cfg->workload;
    char first[DS_DATE_TEXT_SIZE], last[DS_DATE_TEXT_SIZE];
    ds_date_format(w->first_day, first);
    ds_date_format(w->first_day + (int32_t)w->days - 1, last);
    snprintf(path, size, "/v1/count?day=%s&to=%s", first, last);
}

/* The non-negative integer `field` of the JSON answer to GET path; false when there is none. */
static bool loadtest_get_count(struct http_client_conn *conn, const char *path, const char *field,
                               uint64_t *out)
{
    struct http_client_answer ans;
    int rc = http_client_conn_get(conn, path, &ans);
    json_t *doc = rc == 0 && ans.status == 200 ? json_loadb(ans.body, ans.body_len, 0, NULL) : NULL;
    http_client_answer_deinit(&ans);
    json_t *v = json_object_get(doc, field);
    bool ok = json_is_integer(v) && json_integer_value(v) >= 0;
    *out = ok ? (uint64_t)json_integer_value(v) : 0;
    json_decref(doc);
    return ok;
}

/* One probe of every node: durable events (the heat's events_durable) and queryable ones (a day
 * count, not consistent: what a reader sees now). Recorded only when every node answered.
 * Returns the smaller total, so that a drain waits for both to reach the acknowledged events. */
static uint64_t loadtest_probe_once(struct loadtest_state *s, struct http_client_conn **conns,
                                    const char *count_path)
{
    uint64_t durable = 0, queryable = 0;
    for (uint32_t k = 0; k < s->node_count; k++) {
        uint64_t d = 0, q = 0;
        if (conns[k] == NULL ||
            !loadtest_get_count(conns[k], "/v1/heat?top=1", "events_durable", &d) ||
            !loadtest_get_count(conns[k], count_path, "count", &q)) {
            return 0;
        }
        durable += d;
        queryable += q;
    }
    loadtest_latency_probe(s->latency, ds_clock_ns(), durable, queryable);
    return durable < queryable ? durable : queryable;
}

/* Whether the probe should end now: asked to stop, or to drain and both totals (the smaller,
 * `seen`) caught up with the acknowledged events (or LOADTEST_PROBE_DRAIN_MS passed since). */
static bool loadtest_probe_done(struct loadtest_state *s, uint64_t seen, uint64_t *drain_ns)
{
    int stop = atomic_load(&s->stop_probes);
    if (stop == LOADTEST_PROBES_RUN) {
        return false;
    }
    uint64_t now = ds_clock_ns();
    *drain_ns = *drain_ns != 0 ? *drain_ns : now + LOADTEST_PROBE_DRAIN_MS * 1000000ull;
    return stop == LOADTEST_PROBES_STOP || seen >= atomic_load(&s->acked) || now > *drain_ns;
}

static void *loadtest_prober_main(void *arg)
{
    struct loadtest_state *s = arg;
    clockid_t clock;
    pthread_getcpuclockid(pthread_self(), &clock);
    struct http_client_conn *conns[LOADGEN_LOADTEST_NODES_MAX] = {0};
    for (uint32_t k = 0; k < s->node_count; k++) {
        if (http_client_conn_open(s->nodes[k].url, NULL, &conns[k]) != 0) {
            conns[k] = NULL;
        }
    }
    char count_path[96];
    loadtest_count_path(s, count_path, sizeof(count_path));
    const uint64_t interval_ns = LOADTEST_PROBE_INTERVAL_MS * 1000000ull;
    uint64_t start = ds_clock_ns(), seen = 0, drain_ns = 0;
    for (uint64_t i = 0; !loadtest_probe_done(s, seen, &drain_ns); i++) { /* one a turn */
        uint64_t now = ds_clock_ns();
        i = start + i * interval_ns + interval_ns < now ? (now - start) / interval_ns : i;
        uint64_t due = start + i * interval_ns;
        if (due > now) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(due - now)};
            nanosleep(&ts, NULL);
        }
        uint64_t both = loadtest_probe_once(s, conns, count_path);
        seen = both > seen ? both : seen;
    }
    for (uint32_t k = 0; k < s->node_count; k++) {
        http_client_conn_close(conns[k]);
    }
    struct timespec cpu;
    if (clock_gettime(clock, &cpu) == 0) {
        s->res->probe_cpu_s = (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9;
    }
    return NULL;
}

static void loadtest_prober_stop(struct loadtest_state *s, int how)
{
    if (s->prober_started) {
        atomic_store(&s->stop_probes, how);
        pthread_join(s->prober, NULL);
        s->prober_started = false;
    }
}

/* ---- sampling ------------------------------------------------------------------------------ */

/* The run's index of a partition key, adding it; LOADTEST_KEYS_MAX when the table is full. */
static uint32_t loadtest_key_index(struct loadtest_result *res, const char *text)
{
    for (uint32_t i = 0; i < res->key_count; i++) {
        if (strcmp(res->keys[i].text, text) == 0) {
            return i;
        }
    }
    if (res->key_count == LOADTEST_KEYS_MAX || strlen(text) >= SHARD_KEY_TEXT_SIZE) {
        return LOADTEST_KEYS_MAX;
    }
    struct loadtest_key *k = &res->keys[res->key_count];
    snprintf(k->text, sizeof(k->text), "%s", text);
    return res->key_count++;
}

/* Epoch milliseconds of "YYYY-MM-DDTHH:MM:SS.mmmZ", or -1. */
static int64_t loadtest_parse_ts_ms(const char *text)
{
    int32_t day = 0;
    unsigned h = 0, m = 0, sec = 0, ms = 0;
    if (text == NULL || strlen(text) < 24 || ds_date_parse(text, 10, &day) != 0 ||
        sscanf(text + 10, "T%2u:%2u:%2u.%3uZ", &h, &m, &sec, &ms) != 4) {
        return -1;
    }
    return (int64_t)day * DS_DAY_MS + ((int64_t)h * 3600 + m * 60 + sec) * 1000 + ms;
}

static void loadtest_fold_growths(struct loadtest_state *s, json_t *growths, int64_t t0_wall_ms)
{
    struct loadtest_result *res = s->res;
    size_t i;
    json_t *g;
    json_array_foreach(growths, i, g)
    {
        int32_t day = 0;
        const char *day_text = json_string_value(json_object_get(g, "day"));
        if (day_text == NULL || ds_date_parse(day_text, strlen(day_text), &day) != 0) {
            continue;
        }
        uint32_t to = (uint32_t)json_integer_value(json_object_get(g, "to"));
        bool known = false;
        for (uint32_t k = 0; k < res->growth_count && !known; k++) {
            known = res->growths[k].day == day && res->growths[k].to == to;
        }
        if (known || res->growth_count == LOADTEST_GROWTHS_MAX) {
            continue;
        }
        struct loadtest_growth *r = &res->growths[res->growth_count++];
        r->day = day;
        r->to = to;
        r->from = (uint32_t)json_integer_value(json_object_get(g, "from"));
        int64_t at = loadtest_parse_ts_ms(json_string_value(json_object_get(g, "at")));
        r->at_s = at >= 0 ? (double)(at - t0_wall_ms) / 1000.0 : -1.0;
        snprintf(r->reason, sizeof(r->reason), "%s",
                 json_string_value(json_object_get(g, "reason")) != NULL
                     ? json_string_value(json_object_get(g, "reason"))
                     : "");
    }
}

/* A node's advice: each (case, subject) once, with when it first appeared. */
static void loadtest_fold_advice(struct loadtest_result *res, json_t *advice, double t_s)
{
    size_t i;
    json_t *a;
    json_array_foreach(advice, i, a)
    {
        const char *kind = json_string_value(json_object_get(a, "case"));
        const char *subject = json_string_value(json_object_get(a, "subject"));
        if (kind == NULL || subject == NULL) {
            continue;
        }
        uint32_t k = 0;
        while (k < res->advice_count && (strcmp(res->advice[k].kind, kind) != 0 ||
                                         strcmp(res->advice[k].subject, subject) != 0)) {
            k++;
        }
        if (k == res->advice_count) {
            if (k == LOADTEST_ADVICE_MAX) {
                continue;
            }
            struct loadtest_advice *r = &res->advice[res->advice_count++];
            snprintf(r->kind, sizeof(r->kind), "%s", kind);
            snprintf(r->subject, sizeof(r->subject), "%s", subject);
            r->first_s = t_s;
        }
        /* The latest texts: their figures cover the most of the run. */
        struct loadtest_advice *r = &res->advice[k];
        const char *evidence = json_string_value(json_object_get(a, "evidence"));
        const char *remedy = json_string_value(json_object_get(a, "remedy"));
        snprintf(r->evidence, sizeof(r->evidence), "%s", evidence != NULL ? evidence : "");
        snprintf(r->remedy, sizeof(r->remedy), "%s", remedy != NULL ? remedy : "");
        r->samples++;
    }
}

/* Days and their shard counts (the largest any node reports); the hot day's rate. */
static void loadtest_fold_days(struct loadtest_result *res, json_t *days,
                               struct loadtest_second *sec)
{
    size_t i;
    json_t *d;
    json_array_foreach(days, i, d)
    {
        int32_t day = 0;
        const char *text = json_string_value(json_object_get(d, "day"));
        if (text == NULL || ds_date_parse(text, strlen(text), &day) != 0) {
            continue;
        }
        uint32_t shards = (uint32_t)json_integer_value(json_object_get(d, "shards"));
        uint32_t k = 0;
        while (k < res->day_count && res->days[k] != day) {
            k++;
        }
        if (k == res->day_count && k < DS_ARRAY_LEN(res->days)) {
            res->days[res->day_count++] = day;
            res->day_shards[k] = 0;
        }
        if (k < res->day_count && shards > res->day_shards[k]) {
            res->day_shards[k] = shards;
        }
        if (day == res->hot_day) {
            sec->hot_day_eps += json_number_value(json_object_get(d, "rate_now"));
            sec->hot_day_shards = shards > sec->hot_day_shards ? shards : sec->hot_day_shards;
        }
    }
}

static void loadtest_fold_sources(json_t *sources, struct loadtest_second *sec, int64_t *lag_max)
{
    size_t i;
    json_t *k;
    json_array_foreach(sources, i, k)
    {
        double eps = json_number_value(json_object_get(k, "rate_now"));
        sec->kafka_total_eps += eps;
        sec->kafka_hottest_eps = eps > sec->kafka_hottest_eps ? eps : sec->kafka_hottest_eps;
        json_t *lag = json_object_get(k, "lag");
        if (json_is_integer(lag)) {
            sec->lag_messages += json_integer_value(lag);
            *lag_max = json_integer_value(lag) > *lag_max ? json_integer_value(lag) : *lag_max;
        }
    }
}

/* One node's heat document into the second being sampled. */
static void loadtest_fold_node(struct loadtest_state *s, json_t *doc, struct loadtest_second *sec,
                               float *eps_now, int64_t t0_wall_ms, int64_t *lag_max)
{
    struct loadtest_result *res = s->res;
    sec->stored += (uint64_t)json_integer_value(json_object_get(doc, "events_durable"));
    sec->total_eps += json_number_value(json_object_get(doc, "rate_now"));
    sec->throttled += (uint64_t)json_integer_value(json_object_get(doc, "would_throttle_events"));
    json_t *gsi = json_object_get(doc, "gsi_lag_ms");
    if (json_is_integer(gsi) && json_integer_value(gsi) > sec->gsi_lag_ms) {
        sec->gsi_lag_ms = json_integer_value(gsi);
    }
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(doc, "partitions"), i, p)
    {
        uint32_t k = loadtest_key_index(res, json_string_value(json_object_get(p, "key")) != NULL
                                                 ? json_string_value(json_object_get(p, "key"))
                                                 : "");
        if (k < LOADTEST_KEYS_MAX) {
            eps_now[k] += (float)json_number_value(json_object_get(p, "rate_now"));
        }
    }
    loadtest_fold_days(res, json_object_get(doc, "days"), sec);
    loadtest_fold_sources(json_object_get(doc, "kafka_partitions"), sec, lag_max);
    loadtest_fold_growths(s, json_object_get(doc, "growths"), t0_wall_ms);
    loadtest_fold_advice(res, json_object_get(doc, "advice"), sec->t_s);
    if (s->node_count == 1) {
        res->throttled =
            (uint64_t)json_integer_value(json_object_get(doc, "would_throttle_events"));
        res->over_capacity_seconds =
            (uint64_t)json_integer_value(json_object_get(doc, "over_capacity_seconds"));
    }
}

/* The time since the producer had acknowledged `stored` events (curves in res->seconds up to
 * index n, the current sample included), in ms; 0 when everything is stored. */
static double loadtest_lag_ms(const struct loadtest_result *res, uint32_t n, uint64_t stored)
{
    const struct loadtest_second *now = &res->seconds[n];
    if (stored >= now->produced) {
        return 0.0;
    }
    for (uint32_t i = n + 1; i > 0; i--) {
        /* Before the first sample: nothing produced at the start. */
        const struct loadtest_second start = {0};
        const struct loadtest_second *a = i >= 2 ? &res->seconds[i - 2] : &start;
        const struct loadtest_second *b = &res->seconds[i - 1];
        if (a->produced <= stored && stored <= b->produced) {
            double f = b->produced > a->produced
                           ? (double)(stored - a->produced) / (double)(b->produced - a->produced)
                           : 1.0;
            double t = a->t_s + f * (b->t_s - a->t_s);
            return (now->t_s - t) * 1000.0;
        }
    }
    return now->t_s * 1000.0;
}

/* Per-partition rates of this second into the run's keys; the hottest partition; throttling
 * over several nodes (each node sees only part of a partition's writes). */
static void loadtest_fold_keys(struct loadtest_state *s, struct loadtest_second *sec,
                               const float *eps_now)
{
    struct loadtest_result *res = s->res;
    uint32_t n = res->second_count;
    char hot_prefix[SHARD_KEY_TEXT_SIZE];
    shard_key_format(res->hot_day, 0, hot_prefix);
    size_t prefix_len = strlen(hot_prefix) - 1; /* "DAY#YYYY-MM-DD#" */
    for (uint32_t k = 0; k < res->key_count; k++) {
        res->keys[k].eps[n] = eps_now[k];
        res->keys[k].total += (uint64_t)eps_now[k];
        if (eps_now[k] > sec->hottest_eps) {
            sec->hottest_eps = eps_now[k];
            sec->hottest_key = k;
        }
        if (strncmp(res->keys[k].text, hot_prefix, prefix_len) == 0 &&
            eps_now[k] > sec->hot_day_shard_max_eps) {
            sec->hot_day_shard_max_eps = eps_now[k];
        }
        if (s->node_count > 1 && eps_now[k] > (float)s->cfg->capacity_eps &&
            s->cfg->capacity_eps > 0) {
            res->throttled += (uint64_t)(eps_now[k] - (float)s->cfg->capacity_eps);
            res->over_capacity_seconds++;
        }
    }
}

/* One sample: every node's heat, the producer's progress. Returns 0 or the first node's error
 * (a node that stopped answering). */
static int loadtest_sample(struct loadtest_state *s, int64_t t0_wall_ms)
{
    struct loadtest_result *res = s->res;
    uint32_t n = res->second_count;
    ASSERT(n < LOADTEST_SECONDS_MAX);
    struct loadtest_second *sec = &res->seconds[n];
    *sec = (struct loadtest_second){.t_s = loadtest_elapsed_s(s), .gsi_lag_ms = -1};
    sec->produced = atomic_load(&s->acked);
    float *eps_now = calloc(LOADTEST_KEYS_MAX, sizeof(float));
    if (eps_now == NULL) {
        return -ENOMEM;
    }
    int64_t lag_max = 0;
    int rc = 0;
    for (uint32_t k = 0; k < s->node_count && rc == 0; k++) {
        struct http_client_answer ans;
        rc = http_client_conn_get(s->nodes[k].conn, "/v1/heat?top=64", &ans);
        json_t *doc =
            rc == 0 && ans.status == 200 ? json_loadb(ans.body, ans.body_len, 0, NULL) : NULL;
        if (doc != NULL) {
            loadtest_fold_node(s, doc, sec, eps_now, t0_wall_ms, &lag_max);
            json_decref(doc);
        } else if (rc != 0) {
            loadtest_error(rc, "node %u (%s): %s", k, s->nodes[k].url, ans.error);
        }
        http_client_answer_deinit(&ans);
    }
    loadtest_fold_keys(s, sec, eps_now);
    free(eps_now);
    sec->lag_ms = loadtest_lag_ms(res, n, sec->stored);
    res->second_count = n + 1;
    if (s->cfg->brokers == NULL && lag_max > LOADTEST_BROKER_LAG_WARN_MESSAGES &&
        res->warning_count == 0) {
        char text[256];
        snprintf(text, sizeof(text),
                 "a Kafka partition is %lld messages behind; the embedded broker keeps only "
                 "~5 MiB per partition, so the nodes may lose events at the broker: lower --rate "
                 "or add --nodes",
                 (long long)lag_max);
        loadtest_warn(res, text);
    }
    return rc;
}

static void loadtest_progress(const struct loadtest_state *s, uint32_t index, uint32_t runs)
{
    const struct loadtest_result *res = s->res;
    const struct loadtest_second *sec = &res->seconds[res->second_count - 1];
    double share = sec->total_eps > 0 ? sec->hottest_eps / sec->total_eps : 0.0;
    fprintf(stderr,
            "%s[%u/%u %s] %5.0f s  produced %llu/%llu  stored %llu  lag %.0f ms  hottest %s "
            "%.0f/s (%.0f%%)  hot day %u shards%s",
            s->cfg->progress_tty ? "\r\033[K" : "", index + 1, runs, s->strategy->name, sec->t_s,
            (unsigned long long)sec->produced, (unsigned long long)s->cfg->workload.events,
            (unsigned long long)sec->stored, sec->lag_ms,
            sec->hottest_eps > 0 ? res->keys[sec->hottest_key].text : "-", sec->hottest_eps,
            100.0 * share, sec->hot_day_shards, s->cfg->progress_tty ? "" : "\n");
    fflush(stderr);
}

/* Samples once a second until the producer is done and every acknowledged event is durable
 * (or the nodes stop making progress). */
static int loadtest_sample_loop(struct loadtest_state *s, uint32_t index, uint32_t runs)
{
    int64_t t0_wall_ms = ds_clock_realtime_ms() - (int64_t)((ds_clock_ns() - s->t0_ns) / 1000000u);
    uint64_t last_stored = 0;
    uint64_t last_progress_ns = ds_clock_ns();
    for (uint32_t second = 1; second < LOADTEST_SECONDS_MAX; second++) {
        uint64_t due =
            s->t0_ns + (uint64_t)second * 1000000000u + LOADTEST_SAMPLE_OFFSET_MS * 1000000ull;
        uint64_t now = ds_clock_ns();
        if (due > now) {
            loadtest_sleep_ms((due - now) / 1000000u);
        }
        int rc = loadtest_sample(s, t0_wall_ms);
        if (rc != 0) {
            return rc;
        }
        loadtest_progress(s, index, runs);
        const struct loadtest_second *sec = &s->res->seconds[s->res->second_count - 1];
        if (sec->stored != last_stored) {
            last_stored = sec->stored;
            last_progress_ns = ds_clock_ns();
        }
        if (atomic_load(&s->producer_done)) {
            if (sec->stored >= atomic_load(&s->acked)) {
                return 0;
            }
            if (ds_clock_ns() - last_progress_ns > LOADTEST_DRAIN_STALL_MS * 1000000ull) {
                loadtest_warn(s->res,
                              "the nodes stopped storing before every acknowledged event was "
                              "durable (see the node logs)");
                return 0;
            }
        }
    }
    loadtest_warn(s->res, "the run reached the sampler's limit of an hour");
    return 0;
}

/* ---- the end of a run ---------------------------------------------------------------------- */

/* Events stored over all nodes: each node's count over the workload's days. */
static int loadtest_count_stored(struct loadtest_state *s, uint64_t *stored)
{
    char path[96];
    loadtest_count_path(s, path, sizeof(path));
    *stored = 0;
    for (uint32_t k = 0; k < s->node_count; k++) {
        struct http_client_answer ans;
        int rc = http_client_conn_get(s->nodes[k].conn, path, &ans);
        json_t *doc =
            rc == 0 && ans.status == 200 ? json_loadb(ans.body, ans.body_len, 0, NULL) : NULL;
        if (doc == NULL) {
            rc = loadtest_error(rc != 0 ? rc : -EIO, "count on node %u (%s): %s", k,
                                s->nodes[k].url, ans.error[0] != '\0' ? ans.error : "bad answer");
            http_client_answer_deinit(&ans);
            return rc;
        }
        *stored += (uint64_t)json_integer_value(json_object_get(doc, "count"));
        json_decref(doc);
        http_client_answer_deinit(&ans);
    }
    return 0;
}

/* The nodes' heat history into the result, while they still answer; a failure costs the
 * report its heat maps only, so it is a warning. */
static void loadtest_history(struct loadtest_state *s)
{
    struct http_client_conn *conns[LOADGEN_LOADTEST_NODES_MAX];
    for (uint32_t k = 0; k < s->node_count; k++) {
        conns[k] = s->nodes[k].conn;
    }
    char why[200] = "";
    s->res->heat_history =
        loadtest_heat_history_fetch(conns, s->node_count, s->cfg->capacity_eps, why, sizeof(why));
    if (s->res->heat_history == NULL) {
        char text[sizeof(s->res->warnings[0])];
        snprintf(text, sizeof(text), "no heat history for report.html: %.200s", why);
        loadtest_warn(s->res, text);
    }
}

/* The answered queries of one kind (orders, or day counts) into v, in the order they were
 * sent (so by second); returns how many. */
static size_t loadtest_query_latencies(const struct loadtest_state *s, uint64_t n, bool orders,
                                       float *v, uint32_t *second)
{
    size_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        const struct loadtest_query *q = &s->queries[i];
        if (q->orders == orders && q->ok) {
            second[m] = q->second;
            v[m++] = q->us;
        }
    }
    return m;
}

/* The latencies v[0..m) of queries sent from second warmup_s on, into all; returns how many. */
static size_t loadtest_after_warmup(const float *v, const uint32_t *second, size_t m,
                                    uint32_t warmup_s, float *all)
{
    size_t kept = 0;
    for (size_t i = 0; i < m; i++) {
        if (second[i] >= warmup_s) {
            all[kept++] = v[i];
        }
    }
    return kept;
}

/* Whole-run (from --warmup on) and per-second query latency percentiles. One thread sends the
 * queries in time order, so each second's latencies are one run of the list: one pass per kind. */
static void loadtest_query_stats(struct loadtest_state *s)
{
    struct loadtest_result *res = s->res;
    uint64_t n = atomic_load(&s->query_count);
    float *v = malloc((n > 0 ? n : 1) * sizeof(float));
    float *all = malloc((n > 0 ? n : 1) * sizeof(float));
    uint32_t *second = malloc((n > 0 ? n : 1) * sizeof(uint32_t));
    loadtest_percentiles_of(NULL, 0, &res->latency[LOADTEST_LATENCY_COUNT]);
    loadtest_percentiles_of(NULL, 0, &res->latency[LOADTEST_LATENCY_ORDERS]);
    if (v != NULL && all != NULL && second != NULL) {
        res->queries = n;
        for (uint64_t i = 0; i < n; i++) {
            res->query_errors += s->queries[i].ok ? 0 : 1;
        }
        for (int orders = 0; orders <= 1; orders++) {
            size_t m = loadtest_query_latencies(s, n, orders == 1, v, second);
            size_t kept = loadtest_after_warmup(v, second, m, s->cfg->warmup_s, all);
            *(orders ? &res->orders_p50_us : &res->count_p50_us) =
                loadtest_percentile(all, kept, 0.50);
            *(orders ? &res->orders_p99_us : &res->count_p99_us) =
                loadtest_percentile(all, kept, 0.99);
            for (size_t i = 0; i < kept; i++) {
                all[i] /= 1000.0f; /* us to ms */
            }
            loadtest_percentiles_of(
                all, kept,
                &res->latency[orders ? LOADTEST_LATENCY_ORDERS : LOADTEST_LATENCY_COUNT]);
            for (uint32_t sec = 0; sec < res->second_count; sec++) {
                *(orders ? &res->seconds[sec].orders_p99_us : &res->seconds[sec].count_p99_us) = -1;
            }
            for (size_t at = 0; at < m;) {
                size_t end = at;
                while (end < m && second[end] == second[at]) {
                    end++;
                }
                if (second[at] < res->second_count) {
                    struct loadtest_second *sec = &res->seconds[second[at]];
                    *(orders ? &sec->orders_p99_us : &sec->count_p99_us) =
                        loadtest_percentile(v + at, end - at, 0.99);
                }
                at = end;
            }
        }
    }
    free(second);
    free(all);
    free(v);
}

static double loadtest_thread_cpu_s(clockid_t clock)
{
    struct timespec ts;
    return clock_gettime(clock, &ts) == 0 ? (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 : 0.0;
}

/* ---- a run ----------------------------------------------------------------------------------- */

static int loadtest_setup(struct loadtest_state *s, uint32_t index)
{
    const struct loadgen_loadtest_config *cfg = s->cfg;
    int n = snprintf(s->dir, sizeof(s->dir), "%s/run-%u", cfg->out_dir, index + 1);
    if (n < 0 || (size_t)n >= sizeof(s->dir)) {
        return loadtest_error(-ENAMETOOLONG, "--out is too long");
    }
    int rc = ds_mkdir_p(s->dir);
    if (rc != 0) {
        return loadtest_error(rc, "%s: %s", s->dir, ds_strerror(rc));
    }
    if (cfg->brokers != NULL) {
        /* A topic of its own per run on a real cluster (created on first use where the
         * cluster allows it), so runs do not read each other's events. */
        snprintf(s->topic, sizeof(s->topic), "dayshard-loadtest-%d-%u", (int)getpid(), index + 1);
        s->brokers = cfg->brokers;
    } else {
        snprintf(s->topic, sizeof(s->topic), "%s", BROKER_EMBED_TOPIC);
        rc = broker_embed_start(s->topic, cfg->partitions, loadtest_error, &s->broker, &s->brokers);
        if (rc != 0) {
            return rc;
        }
    }
    for (uint32_t k = 0; k < cfg->nodes && rc == 0; k++) {
        rc = loadtest_node_start(s, k);
        s->node_count = k + 1;
    }
    rc = rc != 0 ? rc : loadtest_nodes_ready(s);
    if (rc == 0) {
        char name[sizeof(s->strategy->name) + 32];
        snprintf(name, sizeof(name), "run %u, %s", index + 1, s->strategy->name);
        for (uint32_t k = 0; k < s->node_count; k++) {
            /* One browser tab a run: node 0's console (the others are printed). */
            pid_t pid =
                loadtest_console_announce(s->nodes[k].url, name, k == 0 && cfg->open_console);
            s->xdg_open = k == 0 ? pid : s->xdg_open;
        }
    }
    return rc;
}

static void loadtest_teardown(struct loadtest_state *s)
{
    loadtest_prober_stop(s, LOADTEST_PROBES_STOP);
    loadtest_console_reap(s->xdg_open);
    if (s->querier_started) {
        atomic_store(&s->stop_queries, true);
        pthread_join(s->querier, NULL);
    }
    if (s->producer_started) {
        s->produce_stop = 2;
        pthread_join(s->producer, NULL);
    }
    ingest_shardmap_follower_close(s->follower);
    if (loadtest_nodes_stop(s) > 0) {
        loadtest_warn(s->res, "a node did not stop cleanly (see its log)");
    }
    if (s->broker != NULL) {
        loadgen_broker_stop(s->broker);
    }
    for (uint32_t k = 0; k < s->node_count && !s->cfg->keep_data; k++) {
        int removed = ds_remove_tree(s->nodes[k].data);
        if (removed != 0) {
            fprintf(stderr, "dayshard loadtest: warning: cannot remove %s: %s\n", s->nodes[k].data,
                    ds_strerror(removed));
        }
    }
    free(s->queries);
    loadtest_latency_destroy(s->latency);
}

/* The load itself: producer, queries, sampling, then the final count. */
static int loadtest_drive(struct loadtest_state *s, uint32_t index, uint32_t runs)
{
    struct loadtest_result *res = s->res;
    s->t0_ns = ds_clock_ns();
    int rc =
        loadtest_latency_create(s->t0_ns, s->cfg->workload.events, s->cfg->warmup_s, &s->latency);
    rc = rc == 0 ? loadtest_producer_start(s) : rc;
    if (rc == 0) {
        rc = -pthread_create(&s->prober, NULL, loadtest_prober_main, s);
        s->prober_started = rc == 0;
    }
    if (rc == 0 && s->cfg->queries_per_s > 0) {
        rc = -pthread_create(&s->querier, NULL, loadtest_querier_main, s);
        s->querier_started = rc == 0;
    }
    clockid_t self_clock;
    pthread_getcpuclockid(pthread_self(), &self_clock);
    double cpu0 = loadtest_thread_cpu_s(self_clock);
    rc = rc == 0 ? loadtest_sample_loop(s, index, runs) : rc;
    res->sampler_cpu_s = loadtest_thread_cpu_s(self_clock) - cpu0;
    res->duration_s = loadtest_elapsed_s(s);
    if (s->querier_started) {
        atomic_store(&s->stop_queries, true);
        pthread_join(s->querier, NULL);
        s->querier_started = false;
    }
    if (s->producer_started) {
        pthread_join(s->producer, NULL);
        s->producer_started = false;
    }
    loadtest_prober_stop(s, rc == 0 ? LOADTEST_PROBES_DRAIN : LOADTEST_PROBES_STOP);
    if (s->cfg->progress_tty) {
        fputc('\n', stderr);
    }
    res->produced = s->produce_stats.acked;
    res->producer_behind_max_s = s->produce_stats.behind_max_s;
    if (rc == 0 && s->produce_rc != 0) {
        loadtest_warn(res, "the producer reported failed deliveries (see produce stats)");
    }
    rc = rc == 0 ? loadtest_count_stored(s, &res->stored) : rc;
    if (rc == 0) {
        loadtest_history(s);
    }
    loadtest_query_stats(s);
    if (s->latency != NULL) {
        loadtest_latency_finish(s->latency, res);
    }
    if (rc == 0 && res->latency[LOADTEST_LATENCY_SEND_DELAY].count == 0) {
        char text[256];
        snprintf(text, sizeof(text),
                 "--warmup %u s left no event to measure: the whole-run latencies are empty",
                 s->cfg->warmup_s);
        loadtest_warn(res, text);
    }
    return rc;
}

int loadtest_run(const struct loadgen_loadtest_config *cfg,
                 const struct loadtest_strategy *strategy, uint32_t index, uint32_t run_count,
                 struct loadtest_result *res)
{
    ASSERT(cfg->nodes >= 1 && cfg->nodes <= LOADGEN_LOADTEST_NODES_MAX);
    ASSERT(strategy->max_shards >= strategy->base_shards);
    struct loadtest_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->cfg = cfg;
    s->strategy = strategy;
    s->res = res;
    s->xdg_open = -1;
    res->strategy = *strategy;
    res->hot_day = cfg->workload.first_day + (int32_t)cfg->workload.busy_day_index;
    snprintf(s->hot_customer, sizeof(s->hot_customer), "1");
    res->seconds = calloc(LOADTEST_SECONDS_MAX, sizeof(*res->seconds));
    s->queries_max = (uint64_t)cfg->queries_per_s * LOADTEST_SECONDS_MAX;
    s->queries = calloc(s->queries_max > 0 ? s->queries_max : 1, sizeof(*s->queries));
    int rc = res->seconds != NULL && s->queries != NULL ? 0 : -ENOMEM;
    for (uint32_t k = 0; k < LOADTEST_KEYS_MAX && rc == 0; k++) {
        res->keys[k].eps = calloc(LOADTEST_SECONDS_MAX, sizeof(float));
        rc = res->keys[k].eps != NULL ? 0 : -ENOMEM;
    }
    rc = rc == 0 ? loadtest_setup(s, index) : rc;
    rc = rc == 0 ? loadtest_drive(s, index, run_count) : rc;
    loadtest_teardown(s);
    free(s);
    return rc;
}

void loadtest_result_deinit(struct loadtest_result *res)
{
    for (uint32_t k = 0; k < LOADTEST_KEYS_MAX; k++) {
        free(res->keys[k].eps);
        res->keys[k].eps = NULL;
    }
    free(res->seconds);
    res->seconds = NULL;
    json_decref(res->heat_history);
    res->heat_history = NULL;
}
