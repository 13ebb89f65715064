/*
 * `dayshard run --brokers B --topic T --group G --data DIR [...]`: a node. Consumes the topic as
 * a member of group G into durable day partitions in DIR, exactly once (see
 * ingest/kafka_node.c). SIGINT/SIGTERM drain, commit and exit 0 within 10 s whatever the
 * broker's state (kafka_node.c, "Stopping"); a fatal broker error exits 1.
 */
#include <errno.h>
#include <getopt.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

/* glibc's default mmap threshold, held fixed (cmd_run). */
#define RUN_MMAP_THRESHOLD_BYTES (128 * 1024)

const char cmd_run_usage[] =
    "usage: dayshard run --brokers HOST:PORT[,...] --topic T --group G --data DIR [options]\n"
    "\n"
    "A node: consumes topic T as a member of consumer group G, writes every event to durable\n"
    "day partitions in DIR and bad events to DIR/deadletter.NNNNNNNN.jsonl (with reason,\n"
    "partition and offset; numbered files in write order). Kafka offsets are committed only\n"
    "after the data holding them is durable; a restarted node resumes from its own durable\n"
    "position, so nothing is stored twice.\n"
    "SIGINT or SIGTERM: drain, commit, exit 0 within 10 s, the broker gone or not (then the\n"
    "next start commits). Consumer lag is logged every few seconds.\n"
    "\n"
    "options:\n"
    "  --brokers B            bootstrap servers (`dayshard broker` prints them first)\n"
    "  --topic T              topic to consume (default orders)\n"
    "  --group G              consumer group id (default dayshard)\n"
    "  --data DIR             data directory (created if missing; one node per directory)\n"
    "  --model M              what a new DIR counts, recorded in DIR/MODEL: orders (the\n"
    "                         default: one per order_id, its latest version) or events\n"
    "                         (every event counts); an existing DIR keeps its\n"
    "                         own (a different M is a usage error)\n"
    "  --retention-days N     keep the newest N days of stream time (the greatest event day\n"
    "                         committed): older days are dropped whole\n"
    "                         with their index entries, later events of them are dead letters\n"
    "                         (too_late); N in 1..36500, 0 (the default) keeps every day\n"
    "  --deadletter-file-bytes N  rotate dead letters at N bytes (default 64 MiB)\n"
    "  --shards N             shard count for days seen for the first time (default 4)\n"
    "  --shard-capacity R     adaptive sharding: a day whose write rate (Kafka message time,\n"
    "                         over the last 5 s) exceeds R events/s per shard doubles its\n"
    "                         shards, with 25% headroom (default 1000; 0 keeps every day at\n"
    "                         its count); a new day starts from the day before's rate over\n"
    "                         the last 5 s, not its count\n"
    "  --max-shards M         adaptive growth stops at M shards a day (default 256)\n"
    "  --no-shardmap-topic    do not share growth through the topic T.shardmap (nodes of one\n"
    "                         topic otherwise publish and follow it; maps merge by maximum)\n"
    "  --commit-interval-ms N group commit every N ms (default 100)\n"
    "  --io MODE              auto (default), uring or sync\n"
    "  --dlq-topic T          also send every dead letter to topic T (keyed by partition)\n"
    "  -X key=value           a librdkafka property (SASL, TLS, ...); repeatable\n"
    "  --http HOST:PORT       also serve the HTTP query API (as `dayshard serve`) with this\n"
    "                         node's live figures in /metrics and /readyz; port 0 picks one.\n"
    "                         consistent=true waits until the answer includes every event the\n"
    "                         topic had acknowledged on arrival (else 503, Retry-After)\n"
    "  --http-token TOKEN     require 'Authorization: Bearer TOKEN' (use it off loopback)\n"
    "  --max-gsi-lag-ms N     bound on the by-customer index's lag (default 1000): above half\n"
    "                         of it consumption pauses until the index catches up\n"
    "  --no-gsi               do not build the by-customer index (DIR/gsi)\n"
    "  --gsi-slots-log2 K     a new index's initial customer table: 2^K slots of 24 bytes, K in\n"
    "                         5..30 (default 21: 48 MiB); seals double it past half load\n"
    "  --restore-quarantine   first restore DIR's unrestored quarantined ranges from T\n"
    "                         (`fsck --help`: --brokers)\n"
    "  --ready-max-lag N      /readyz is ready while the consumer lag is at most N messages\n"
    "                         (default 100000)\n"
    "  --help                 this text\n"
    "Heat: on --http, GET / is a live console (heat map, hottest keys, advice), /v1/heat the\n"
    "same as JSON, `dayshard top --server URL` in a terminal; growths also in DIR/shardmap.log.\n"
    "With --http-token, open /?token=TOKEN once: the page keeps it as an HttpOnly cookie.\n"
    "Logging: DS_LOG=info by default for this command.\n";

struct run_args {
    struct ingest_node_config node;
    struct ingest_kafka_props props;
    char owned[8][512]; /* string option values, copied by set_option */
    struct query_http_config http;
    struct index_builder_config gsi;
    bool no_gsi;
    bool restore_quarantine;
};

/* The node's figures for the query service: its observer callbacks feed query_metrics. */
struct run_observer {
    struct query_metrics metrics;
    uint64_t rejected_seen[INGEST_REASON_COUNT]; /* writer thread: totals already added */
    /* Test hook (DS_TEST_PAUSE_FILE): consumption pauses while this file exists, to exercise
     * the node's back-pressure path without a slow follower. */
    const char *pause_file;
    struct index_builder *gsi;       /* the by-customer index builder, NULL with --no-gsi */
    struct ingest_node_watch *watch; /* the node's assignment, for consistent=true */
    bool gsi_failed;                 /* consumer thread: the builder's error stopped the node */
    /* The heat console's history (--http only): the consumer thread records, the query service
     * reads. */
    struct shard_heat_history *heat_history;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int signo)
{
    (void)signo;
    stop_requested = 1;
}

static int set_option(struct run_args *a, const char *key, const char *value)
{
    static const char *const keys[] = {"brokers",   "topic", "group",     "data",
                                       "dlq-topic", "http",  "http-token"};
    for (size_t i = 0; i < DS_ARRAY_LEN(keys); i++) {
        if (strcmp(key, keys[i]) == 0) {
            snprintf(a->owned[i], sizeof(a->owned[i]), "%s", value);
            const char **slot[] = {&a->node.brokers,  &a->node.topic,     &a->node.group,
                                   &a->node.data_dir, &a->node.dlq_topic, &a->http.listen,
                                   &a->http.token};
            _Static_assert(DS_ARRAY_LEN(slot) == DS_ARRAY_LEN(keys), "a slot per key");
            *slot[i] = a->owned[i];
            return 0;
        }
    }
    uint64_t n = 0;
    if (strcmp(key, "max-gsi-lag-ms") == 0 && cli_parse_u64(value, 1, 3600000, &n) == 0) {
        a->gsi.max_lag_ms = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "gsi-slots-log2") == 0 &&
        cli_parse_u64(value, INDEX_TABLE_SLOTS_LOG2_MIN, INDEX_TABLE_SLOTS_LOG2_MAX, &n) == 0) {
        a->gsi.table_slots_log2 = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "gsi") == 0 && (strcmp(value, "on") == 0 || strcmp(value, "off") == 0)) {
        a->no_gsi = strcmp(value, "off") == 0;
        return 0;
    }
    if (strcmp(key, "ready-max-lag") == 0 && cli_parse_u64(value, 1, INT64_MAX, &n) == 0) {
        a->http.ready_lag_max = (int64_t)n;
        return 0;
    }
    if (strcmp(key, "shards") == 0 && cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n) == 0) {
        a->node.base_shards = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "commit-interval-ms") == 0 && cli_parse_u64(value, 1, 60000, &n) == 0) {
        a->node.commit_interval_ms = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "shard-capacity") == 0 &&
        cli_parse_u64(value, 0, SHARD_CAPACITY_MAX, &n) == 0) {
        a->node.shard_capacity_eps = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "retention-days") == 0 &&
        cli_parse_u64(value, 0, STORAGE_RETENTION_DAYS_MAX, &n) == 0) {
        a->node.retention_days = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "deadletter-file-bytes") == 0 &&
        cli_parse_u64(value, 1, INGEST_DEADLETTER_FILE_BYTES_MAX, &n) == 0) {
        a->node.deadletter_file_bytes = n;
        return 0;
    }
    if (strcmp(key, "max-shards") == 0 && cli_parse_u64(value, 1, SHARD_COUNT_MAX, &n) == 0) {
        a->node.max_shards = (uint32_t)n;
        return 0;
    }
    enum storage_model model = STORAGE_MODEL_RECORDED;
    if (strcmp(key, "model") == 0 && storage_model_parse(value, &model) == 0) {
        a->node.model = (int)model;
        return 0;
    }
    if (strcmp(key, "shardmap-topic") == 0 &&
        (strcmp(value, "on") == 0 || strcmp(value, "off") == 0)) {
        a->node.no_shardmap_topic = strcmp(value, "off") == 0;
        return 0;
    }
    return -DS_EUSAGE;
}

static int parse_one(int c, const char *value, void *user)
{
    struct run_args *a = user;
    enum storage_io_mode io = STORAGE_IO_AUTO;
    switch (c) {
    case 'b': return set_option(a, "brokers", value);
    case 't': return set_option(a, "topic", value);
    case 'g': return set_option(a, "group", value);
    case 'd': return set_option(a, "data", value);
    case 'Q': return set_option(a, "dlq-topic", value);
    case 's': return set_option(a, "shards", value);
    case 'c': return set_option(a, "commit-interval-ms", value);
    case 'X': return ingest_kafka_props_add(&a->props, value);
    case 'i':
        if (storage_io_mode_parse(value, &io) != 0) {
            return -DS_EUSAGE;
        }
        a->node.io_mode = (int)io;
        return 0;
    case 'H': return set_option(a, "http", value);
    case 'T':
        return value[0] != '\0' && strlen(value) <= 256 ? set_option(a, "http-token", value)
                                                        : -DS_EUSAGE;
    case 'L': return set_option(a, "ready-max-lag", value);
    case 'G': return set_option(a, "max-gsi-lag-ms", value);
    case 'N': return set_option(a, "gsi", "off");
    case 'Y': a->restore_quarantine = true; return 0;
    case 'K': return set_option(a, "gsi-slots-log2", value);
    case 'R': return set_option(a, "shard-capacity", value);
    case 'M': return set_option(a, "max-shards", value);
    case 'O': return set_option(a, "shardmap-topic", "off");
    case 'm': return set_option(a, "model", value);
    case 'r': return set_option(a, "retention-days", value);
    case 'D': return set_option(a, "deadletter-file-bytes", value);
    }
    return -DS_EUSAGE;
}

static int parse_args(int argc, char **argv, struct run_args *a)
{
    static const struct option options[] = {{"brokers", required_argument, NULL, 'b'},
                                            {"topic", required_argument, NULL, 't'},
                                            {"group", required_argument, NULL, 'g'},
                                            {"data", required_argument, NULL, 'd'},
                                            {"dlq-topic", required_argument, NULL, 'Q'},
                                            {"shards", required_argument, NULL, 's'},
                                            {"commit-interval-ms", required_argument, NULL, 'c'},
                                            {"io", required_argument, NULL, 'i'},
                                            {"http", required_argument, NULL, 'H'},
                                            {"http-token", required_argument, NULL, 'T'},
                                            {"ready-max-lag", required_argument, NULL, 'L'},
                                            {"max-gsi-lag-ms", required_argument, NULL, 'G'},
                                            {"no-gsi", no_argument, NULL, 'N'},
                                            {"restore-quarantine", no_argument, NULL, 'Y'},
                                            {"gsi-slots-log2", required_argument, NULL, 'K'},
                                            {"shard-capacity", required_argument, NULL, 'R'},
                                            {"max-shards", required_argument, NULL, 'M'},
                                            {"no-shardmap-topic", no_argument, NULL, 'O'},
                                            {"model", required_argument, NULL, 'm'},
                                            {"retention-days", required_argument, NULL, 'r'},
                                            {"deadletter-file-bytes", required_argument, NULL, 'D'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int next = 0;
    int rc = cli_options_parse("run", argc, argv, "X:", options, parse_one, a, &next);
    if (rc != 0) {
        return rc;
    }
    if (next < argc) {
        return cli_error("run", CLI_USAGE, "unexpected argument '%s'", argv[next]);
    }
    if (a->node.brokers == NULL || a->node.data_dir == NULL) {
        return cli_error("run", CLI_USAGE, "--brokers and --data are required");
    }
    if ((a->http.token != NULL || a->http.ready_lag_max != 0) && a->http.listen == NULL) {
        return cli_error("run", CLI_USAGE, "--http-token and --ready-max-lag need --http");
    }
    if (a->node.max_shards < a->node.base_shards) {
        return cli_error("run", CLI_USAGE, "--max-shards %u is below --shards %u",
                         a->node.max_shards, a->node.base_shards);
    }
    char why[STORAGE_MODEL_WHY_SIZE];
    enum storage_model model = STORAGE_MODEL_RECORDED;
    rc = storage_model_check(a->node.data_dir, (enum storage_model)a->node.model, &model, why,
                             sizeof(why));
    if (rc != 0) {
        return cli_error("run", rc == -DS_EUSAGE ? CLI_USAGE : CLI_FAIL, "%s", why);
    }
    return 0;
}

/* Writer thread, after each durable commit. */
static void observe_commit(const struct ingest_node_progress *progress, void *user)
{
    struct run_observer *o = user;
    atomic_store_explicit(&o->metrics.events_ingested, progress->events_durable,
                          memory_order_relaxed);
    for (uint32_t r = 1; r < INGEST_REASON_COUNT; r++) {
        uint64_t total = progress->rejected_by_reason[r];
        if (total > o->rejected_seen[r]) {
            query_metrics_rejected_add(&o->metrics, r - 1, total - o->rejected_seen[r]);
            o->rejected_seen[r] = total;
        }
    }
    query_metrics_fsync_observe(&o->metrics, progress->commit_ns);
    if (progress->orders_model) {
        query_metrics_orders_set(&o->metrics, &progress->orders);
    }
    const struct ingest_writer_maintenance *w = &progress->maintenance;
    struct query_writer_figures writer = {.stall_ns_max = w->stall_ns_max,
                                          .compactions = w->compactions,
                                          .compaction_slices = w->compaction_slices,
                                          .compaction_slice_ns_max = w->compaction_slice_ns_max,
                                          .compacting = w->compacting};
    query_metrics_held_set(&o->metrics, &progress->held,
                           progress->orders_model ? &progress->ids : NULL,
                           progress->retention_floor, progress->stream_day, &writer);
    if (o->gsi != NULL) {
        index_builder_notify(o->gsi, progress->commit_seq, progress->events_durable);
    }
}

/* Consumer thread, about once a second per partition. */
static void observe_lag(int32_t partition, int64_t lag, void *user)
{
    struct run_observer *o = user;
    if (partition < 0) {
        query_metrics_joined_set(&o->metrics);
        return;
    }
    query_metrics_lag_set(&o->metrics, partition, lag);
}

/* Consumer thread, once a second: the heat report for /v1/heat and /metrics. */
static void observe_heat(const struct shard_heat_report *report, void *user)
{
    struct run_observer *o = user;
    query_metrics_heat_set(&o->metrics, report);
}

/* Consumer thread, every loop: whether a follower asks the node to pause (1), or stopped for
 * good (its error: the node stops too, rather than stay paused with the index behind). */
static int observe_pause(void *user)
{
    struct run_observer *o = user;
    if (o->gsi != NULL) {
        int rc = index_builder_error(o->gsi);
        if (rc != 0) {
            o->gsi_failed = true;
            return rc;
        }
        if (index_builder_should_pause(o->gsi)) {
            return 1;
        }
    }
    return o->pause_file != NULL && access(o->pause_file, F_OK) == 0 ? 1 : 0;
}

/* Service threads, consistent=true: the node's positions (ingest and query do not know each
 * other; this adapts one's watch to the other's callback). */
struct run_positions {
    struct query_position *out;
    size_t cap;
    size_t count;
};

static int run_position(int32_t partition, int64_t high_watermark, int64_t stored_from, void *user)
{
    struct run_positions *f = user;
    if (f->count == f->cap) {
        return -ENOSPC;
    }
    f->out[f->count++] = (struct query_position){
        .partition = partition, .high_watermark = high_watermark, .stored_from = stored_from};
    return 0;
}

static int observe_positions(void *user, struct query_position *out, size_t cap,
                             uint32_t timeout_ms, uint64_t *generation)
{
    struct run_observer *o = user;
    struct run_positions f = {.out = out, .cap = cap};
    int rc = ingest_node_watch_positions(o->watch, timeout_ms, run_position, &f, generation);
    return rc < 0 ? rc : (int)f.count;
}

/* Service threads: the node's claims (events model), for the count answers a router checks. */
struct run_claims {
    struct query_claim *out;
    size_t cap;
    size_t count;
};

static int run_claim(int32_t partition, int64_t from, bool open, void *user)
{
    struct run_claims *f = user;
    if (f->count == f->cap) {
        return -ENOSPC;
    }
    f->out[f->count++] = (struct query_claim){.partition = partition, .from = from, .open = open};
    return 0;
}

static int observe_claims(void *user, struct query_claim *out, size_t cap)
{
    struct run_observer *o = user;
    struct run_claims f = {.out = out, .cap = cap};
    int rc = ingest_node_watch_claims(o->watch, run_claim, &f);
    return rc < 0 ? rc : (int)f.count;
}

static uint64_t observe_generation(void *user)
{
    const struct run_observer *o = user;
    return ingest_node_watch_generation(o->watch);
}

/* Connects the node's observer callbacks to the metrics (kept even without --http: the
 * back-pressure hook needs them). */
static void observer_init(struct run_observer *o, struct ingest_node_config *node)
{
    /* Every rejection reason (INGEST_OK, 0, is none): metrics index = reason - 1. */
    static const char *reason_names[INGEST_REASON_COUNT - 1];
    for (uint32_t r = 1; r < INGEST_REASON_COUNT; r++) {
        reason_names[r - 1] = ingest_reason_name((enum ingest_reason)r);
    }
    query_metrics_init(&o->metrics, reason_names, INGEST_REASON_COUNT - 1);
    o->pause_file = getenv("DS_TEST_PAUSE_FILE");
    node->on_commit = observe_commit;
    node->on_lag = observe_lag;
    node->on_heat = observe_heat;
    node->should_pause = observe_pause;
    node->observer_user = o;
    node->watch = o->watch;
}

/* The query service and the index builder read the data directory on their own handles, so
 * the directory must exist before they start: create it (storage and shard map) the way the
 * node will open it. An existing one is left to the node's own open (which recovers it once). */
static int prepare_data_dir(const struct ingest_node_config *node)
{
    char manifest[DS_PATH_MAX];
    char shardmap[DS_PATH_MAX];
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", node->data_dir);
    snprintf(shardmap, sizeof(shardmap), "%s/shardmap", node->data_dir);
    if (access(manifest, F_OK) == 0 && access(shardmap, F_OK) == 0) {
        return 0;
    }
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = node->data_dir;
    cfg.model = (enum storage_model)node->model;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    struct shard_map *map = NULL;
    if (rc == 0) {
        rc = shard_map_open(node->data_dir, node->base_shards, 0, &map);
    }
    shard_map_close(map);
    storage_close(st);
    return rc;
}

/* --restore-quarantine: restores the ranges a repair quarantined in DIR from the node's topic
 * (ingest_restore_run), before the index builder and the consumer start, so that they see the
 * restored data like any other commits. 0 or a CLI exit code (reported). */
static int restore_quarantine(const struct run_args *a)
{
    struct ingest_restore_config cfg;
    ingest_restore_config_defaults(&cfg);
    cfg.data_dir = a->node.data_dir;
    cfg.brokers = a->node.brokers;
    cfg.topic = a->node.topic;
    cfg.props = &a->props;
    cfg.base_shards = a->node.base_shards;
    struct ingest_restore_report x = {0};
    int rc = ingest_restore_run(&cfg, &x);
    if (rc != 0) {
        return cli_error("run", CLI_FAIL, "%s: restoring the quarantined ranges from %s: %s",
                         a->node.data_dir, cfg.topic, ds_strerror(rc));
    }
    ds_log_info("node: restore from %s: %llu of %llu quarantined ranges restored (%llu before), "
                "%llu events applied, %llu offsets missing, %llu events lost, orders: %llu "
                "restored, %llu still reverted, %llu still lost%s%s",
                cfg.topic, (unsigned long long)x.ranges_restored, (unsigned long long)x.ranges,
                (unsigned long long)x.ranges_done_before, (unsigned long long)x.events_applied,
                (unsigned long long)x.offsets_missing, (unsigned long long)x.events_lost,
                (unsigned long long)x.orders.restored, (unsigned long long)x.orders.reverted,
                (unsigned long long)x.orders.lost, x.orders.file[0] != '\0' ? ": see " : "",
                x.orders.file);
    return 0;
}

/* The builder's lag into the node's metrics (index_builder_config's lag callbacks). */
static void run_lag_observe(void *user, uint64_t lag_ns)
{
    query_metrics_gsi_lag_observe(user, lag_ns);
}

static void run_lag_gauge(void *user, int64_t lag_ms)
{
    query_metrics_gsi_lag_set(user, lag_ms);
}

/* Starts the by-customer index builder (unless --no-gsi); 0 or a CLI exit code (reported). */
static int start_gsi(struct run_args *a, struct run_observer *o)
{
    if (a->no_gsi) {
        return 0;
    }
    a->gsi.data_dir = a->node.data_dir;
    a->gsi.lag_observe = run_lag_observe;
    a->gsi.lag_gauge = run_lag_gauge;
    a->gsi.lag_user = &o->metrics;
    const char *slow = getenv("DS_TEST_GSI_SLOW_MS"); /* test hook: a slow builder */
    a->gsi.test_slow_ms = slow != NULL ? (uint32_t)strtoul(slow, NULL, 10) : 0;
    int rc = index_builder_start(&a->gsi, &o->gsi);
    if (rc != 0) {
        char dir[DS_PATH_MAX];
        index_dir(a->node.data_dir, dir);
        return cli_error("run", CLI_FAIL, "by-customer index %s: %s%s", dir, ds_strerror(rc),
                         rc == -DS_ELOCKED ? " (another node uses it)" : "");
    }
    return 0;
}

/* Starts the query service for `--http`; 0 or a CLI exit code (reported). */
static int start_http(struct run_args *a, struct run_observer *o, struct query_http **out)
{
    int rc = shard_heat_history_create(&o->heat_history);
    if (rc != 0) {
        return cli_error("run", CLI_FAIL, "the heat history: %s", ds_strerror(rc));
    }
    o->metrics.heat_history = o->heat_history;
    a->node.heat_history = o->heat_history;
    a->http.data_dir = a->node.data_dir;
    a->http.metrics = &o->metrics;
    a->http.gsi = o->gsi;
    a->http.positions = observe_positions;
    a->http.positions_generation = observe_generation;
    a->http.positions_user = o;
    a->http.claims = observe_claims;
    a->http.claims_user = o;
    rc = query_http_start(&a->http, out);
    if (rc != 0) {
        return cli_listen_error("run", "--http ", a->http.listen, rc);
    }
    /* The bound address, for scripts that asked for port 0. */
    printf("%s\n", query_http_address(*out));
    fflush(stdout);
    ds_log_info("node: query service on http://%s", query_http_address(*out));
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct run_args *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return cli_error("run", CLI_FAIL, "out of memory");
    }
    ingest_node_config_defaults(&a->node);
    index_builder_config_defaults(&a->gsi);
    a->node.props = &a->props;
    int rc = parse_args(argc, argv, a);
    if (rc != 0) {
        free(a);
        return rc == -1 ? cli_help(cmd_run_usage) : rc;
    }
    setenv("DS_LOG", "info", 0);
#if defined(__GLIBC__)
    /* glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB): the
     * builder's and the seal's arrays, zstd's contexts and librdkafka's fetch buffers then come
     * from the heaps, where what they leave behind when freed stays resident. A fixed threshold
     * (which also fixes the trim threshold) returns every block of 128 KiB or more to the kernel
     * when freed: a node's VmHWM at 3M orders 610 -> 329-386 MiB (bench/steady_state.sh rss
     * SCALE=0.3, docs/PERFORMANCE.md "Memory"). */
    (void)mallopt(M_MMAP_THRESHOLD, RUN_MMAP_THRESHOLD_BYTES);
#endif
    struct sigaction action = {.sa_handler = on_signal};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    /* A daemon whose log reader went away must keep going (and leave the group cleanly). */
    signal(SIGPIPE, SIG_IGN);
    struct run_observer *observer = NULL;
    struct query_http *http = NULL;
    observer = calloc(1, sizeof(*observer));
    if (observer == NULL || ingest_node_watch_create(&observer->watch) != 0) {
        free(observer);
        free(a);
        return cli_error("run", CLI_FAIL, "out of memory");
    }
    observer_init(observer, &a->node);
    /* The readers of the builder and the query service need the directory to exist. */
    rc = prepare_data_dir(&a->node);
    if (rc != 0) {
        rc = cli_error("run", CLI_FAIL, "%s: %s", a->node.data_dir, ds_strerror(rc));
    }
    rc = rc == 0 && a->restore_quarantine ? restore_quarantine(a) : rc;
    rc = rc == 0 ? start_gsi(a, observer) : rc;
    rc = rc == 0 && a->http.listen != NULL ? start_http(a, observer, &http) : rc;
    if (rc != 0) {
        index_builder_stop(observer->gsi);
        ingest_node_watch_destroy(observer->watch);
        shard_heat_history_destroy(observer->heat_history);
        free(observer);
        free(a);
        return rc;
    }
    ds_log_info("node: consuming %s from %s as group %s into %s", a->node.topic, a->node.brokers,
                a->node.group, a->node.data_dir);
    struct ingest_node_stats stats;
    char data_dir[DS_PATH_MAX]; /* for the messages below, after a is freed (a owns the path) */
    snprintf(data_dir, sizeof(data_dir), "%s", a->node.data_dir);
    rc = ingest_node_run(&a->node, &stats, (const volatile int *)&stop_requested);
    query_http_stop(http);
    index_builder_stop(observer->gsi);
    ingest_node_watch_destroy(observer->watch);         /* after the service that asks it */
    shard_heat_history_destroy(observer->heat_history); /* after the node and the service */
    bool gsi_failed = observer->gsi_failed;
    free(observer);
    free(a);
    if (gsi_failed) {
        /* The base data stays exact (the builder follows it); a restart resumes the index from
         * its cursor once the cause is gone. */
        return cli_error("run", CLI_FAIL,
                         "%s/gsi: the by-customer index builder stopped: %s; the node stopped "
                         "with it (the stored data is intact); restart it once the cause is "
                         "fixed, or run with --no-gsi",
                         data_dir, ds_strerror(rc));
    }
    if (rc == -ENOSPC || rc == -EDQUOT) {
        /* A full disk stops the node (it acknowledges nothing it could not make durable);
         * restarted once there is space (systemd Restart=on-failure), it resumes from the
         * durable positions in the manifest: nothing lost, nothing twice. */
        return cli_error("run", CLI_FAIL,
                         "%s: %s: stopped; nothing after the last commit was acknowledged to "
                         "Kafka; restart the node once there is space and it resumes exactly",
                         data_dir, ds_strerror(rc));
    }
    if (rc != 0) {
        return cli_error("run", CLI_FAIL, "%s", ds_strerror(rc));
    }
    char summary[256];
    snprintf(summary, sizeof(summary),
             "stopped: %llu events durable, %llu dead letters, %llu commits, %llu rebalances, "
             "%llu back-pressure pauses",
             (unsigned long long)stats.accepted, (unsigned long long)stats.rejected,
             (unsigned long long)stats.commits, (unsigned long long)stats.rebalances,
             (unsigned long long)stats.pauses);
    if (cli_log_json()) {
        ds_log_info("run: %s", summary); /* run logs at info unless DS_LOG says otherwise */
    } else {
        fprintf(stderr, "dayshard run: %s\n", summary);
    }
    return CLI_OK;
}
