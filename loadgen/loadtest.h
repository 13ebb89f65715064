/*
 * Private to loadgen/: the load test (loadtest.c: the strategies, report.json, the runs;
 * loadtest_run.c: one run of the real pipeline; loadtest_report*.c: report.md and the plots;
 * loadtest_gate.c: each run's summary, --baseline and --fail-if).
 * `dayshard loadtest` (cli/cmd_loadtest.c) only parses arguments into a
 * struct loadgen_loadtest_config.
 *
 * A run: the embedded broker (or --brokers), K `dayshard run` processes with the run's shard
 * strategy, an open-loop paced producer and a paced query load in this process, and a sampler
 * that reads every node's /v1/heat once a second. What a run measured is a struct loadtest_result,
 * which becomes one element of report.json's "runs".
 *
 * Latency (loadtest_latency.c): the producer's send delay against its schedule for every event,
 * and end to end, from an event's scheduled send to durable and to queryable, for every
 * e2e_stride-th event, from a probe thread that reads the nodes' counts every
 * LOADTEST_PROBE_INTERVAL_MS. docs/LOADTEST_REPORT.md says how each figure is taken.
 */
#ifndef DS_LOADGEN_LOADTEST_H
#define DS_LOADGEN_LOADTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "loadgen/loadgen.h"
#include "shard/shard.h"

/* Seconds of samples one run keeps: a run past an hour is a soak, not a load test. */
#define LOADTEST_SECONDS_MAX 3600u
/* Partition keys whose per-second rates a run keeps (the heat map shows the hottest 48). */
#define LOADTEST_KEYS_MAX 1024u
#define LOADTEST_PLOT_KEYS_MAX 48u
/* Strategies one --compare runs. */
#define LOADTEST_STRATEGIES_MAX 8u
/* Growths a run records. */
#define LOADTEST_GROWTHS_MAX 256u
/* Distinct advice (case, subject) a run records: a node gives at most SHARD_ADVICE_MAX at a
 * time, and a run's hot spots are few. */
#define LOADTEST_ADVICE_MAX 16u
/* The embedded broker keeps ~5 MiB per partition (docs/OPERATIONS.md); an event costs ~60
 * bytes there compressed, so about 80,000 messages of lag per partition is where it starts to
 * drop what nodes have not read. Warn at half. */
#define LOADTEST_BROKER_LAG_WARN_MESSAGES 40000
/* The end-to-end probe reads each node's durable and queryable counts this often: it bounds the
 * resolution of the end-to-end figures (an event is counted as durable when the first probe
 * after it sees it), at 2 requests per node per probe. */
#define LOADTEST_PROBE_INTERVAL_MS 20u
#define LOADTEST_PROBES_MAX (LOADTEST_SECONDS_MAX * (1000u / LOADTEST_PROBE_INTERVAL_MS))
/* Events whose end-to-end latency a run measures at most: every ceil(events / this)-th event
 * (512 KiB of scheduled times), enough for a p99.9 of at least 65 samples a thousand. */
#define LOADTEST_MARKS_MAX 65536u

/* The latencies a run reports (report.json "latency"). */
enum loadtest_latency_kind {
    LOADTEST_LATENCY_SEND_DELAY, /* the producer's send against its schedule, every event */
    LOADTEST_LATENCY_DURABLE,    /* scheduled send to durable on a node, sampled events */
    LOADTEST_LATENCY_QUERYABLE,  /* scheduled send to counted by a day-count query, sampled */
    LOADTEST_LATENCY_COUNT,      /* the query load's day counts */
    LOADTEST_LATENCY_ORDERS,     /* the query load's customer newest-10 requests */
    LOADTEST_LATENCY_KINDS,
};

/* One latency over a run, its first warmup_s seconds left out; count 0: nothing measured (the
 * figures are then -1). */
struct loadtest_percentiles {
    uint64_t count;
    double p50_ms, p90_ms, p99_ms, p999_ms, max_ms;
};

struct loadtest_strategy {
    char name[64];        /* "adaptive, key order" */
    char shards_text[16]; /* "adaptive" or "fixed:N" */
    uint32_t base_shards;
    uint32_t max_shards; /* == base_shards for fixed */
    enum loadgen_produce_key key;
};

struct loadtest_growth {
    int32_t day;
    uint32_t from;
    uint32_t to;
    double at_s; /* seconds since the run started */
    char reason[SHARD_GROWTH_REASON_BYTES];
};

/* Advice a node gave during a run (shard.h, "advice"), once per (case, subject). */
struct loadtest_advice {
    char kind[24]; /* "kafka_partition_skew", ... */
    char subject[SHARD_ADVICE_SUBJECT_BYTES];
    double first_s;   /* seconds since the run started, at the first sample that had it */
    uint32_t samples; /* samples (node answers) that had it */
    char evidence[SHARD_ADVICE_TEXT_BYTES]; /* as the last sample had them */
    char remedy[SHARD_ADVICE_TEXT_BYTES];
};

/* One second of a run, summed over its nodes. */
struct loadtest_second {
    double t_s;
    uint64_t produced; /* acknowledged by the broker so far */
    uint64_t stored;   /* durable on the nodes so far */
    int64_t lag_messages;
    double lag_ms;      /* how long ago the producer had acknowledged `stored` events */
    int64_t gsi_lag_ms; /* max over nodes, -1 none */
    double total_eps;   /* every partition's writes in the last second */
    double hottest_eps;
    uint32_t hottest_key; /* index into loadtest_result.keys */
    double hot_day_eps;   /* the run's hot day */
    double hot_day_shard_max_eps;
    uint32_t hot_day_shards;
    double kafka_total_eps;
    double kafka_hottest_eps;
    uint64_t throttled;  /* would-throttle events so far (node totals) */
    double count_p99_us; /* < 0: no query that second */
    double orders_p99_us;
    /* Of the events scheduled in this second (< 0: none measured); filled at the end. */
    double send_delay_p99_ms;
    double durable_p99_ms;
    double queryable_p99_ms;
};

struct loadtest_key {
    char text[SHARD_KEY_TEXT_SIZE];
    uint64_t total;
    float *eps; /* LOADTEST_SECONDS_MAX */
};

struct loadtest_result {
    struct loadtest_strategy strategy;
    uint64_t produced;
    uint64_t stored;
    double duration_s;
    double producer_behind_max_s;
    int32_t hot_day;
    uint32_t second_count;
    struct loadtest_second *seconds; /* LOADTEST_SECONDS_MAX */
    uint32_t key_count;
    struct loadtest_key keys[LOADTEST_KEYS_MAX];
    uint64_t throttled;
    uint64_t over_capacity_seconds;
    bool throttle_from_samples; /* several nodes: summed from their per-second samples */
    uint32_t growth_count;
    struct loadtest_growth growths[LOADTEST_GROWTHS_MAX];
    uint32_t advice_count;
    struct loadtest_advice advice[LOADTEST_ADVICE_MAX];
    uint32_t day_count;
    int32_t days[SHARD_HEAT_TOP_MAX * LOADGEN_LOADTEST_NODES_MAX];
    uint32_t day_shards[SHARD_HEAT_TOP_MAX * LOADGEN_LOADTEST_NODES_MAX];
    uint64_t queries;
    uint64_t query_errors;
    double count_p50_us, count_p99_us, orders_p50_us, orders_p99_us;
    double sampler_cpu_s; /* the load test's own threads: its overhead */
    double queries_cpu_s;
    double probe_cpu_s;
    uint32_t warmup_s;      /* seconds left out of the whole-run latencies */
    uint32_t e2e_stride;    /* every e2e_stride-th event's end-to-end latency is measured */
    uint64_t e2e_unseen[2]; /* sampled events never seen durable, queryable by the run's end */
    struct loadtest_percentiles latency[LOADTEST_LATENCY_KINDS];
    char warnings[4][256];
    uint32_t warning_count;
    /* The nodes' heat history at the end of the run, summed by second (loadtest_live.c); owned,
     * NULL when it could not be read (a warning says why). */
    json_t *heat_history;
};

/* Prints "dayshard loadtest: <message>" to stderr (a JSON log line instead under
 * DS_LOG_FORMAT=json, as every command's errors); returns code, for `return loadtest_error(..)`. */
int loadtest_error(int code, const char *fmt, ...) DS_PRINTF(2, 3);

/* The p-th percentile (0..1) of n values, sorting them in place; -1 for none. */
double loadtest_percentile(float *v, size_t n, double p);

/* Percentiles of v[0..n) (ms; sorted in place) into *out; count 0 and -1s when n is 0. */
void loadtest_percentiles_of(float *v, size_t n, struct loadtest_percentiles *out);

/* ---- latency (loadtest_latency.c) ---------------------------------------------------------- */

/* A run's latency recorder: the producer thread records send delays and scheduled times
 * (loadtest_latency_on_sent), the probe thread records counts (loadtest_latency_probe); the
 * figures are read by loadtest_latency_finish once both threads are joined. Opaque. */
struct loadtest_latency;

/* t0_ns: the run's origin (ds_clock_ns), seconds count from it; events: the most the producer
 * sends; warmup_s: seconds left out of the whole-run figures. Returns 0 or -ENOMEM. */
DS_MUST_USE int loadtest_latency_create(uint64_t t0_ns, uint64_t events, uint32_t warmup_s,
                                        struct loadtest_latency **out);
void loadtest_latency_destroy(struct loadtest_latency *l);

/* loadgen_produce_sent_fn; user is the struct loadtest_latency. The producer thread only. */
void loadtest_latency_on_sent(uint64_t due_ns, uint64_t sent_ns, void *user);

/* One probe, at now_ns: durable and queryable events summed over the nodes. The probe thread
 * only; probes past LOADTEST_PROBES_MAX are dropped. */
void loadtest_latency_probe(struct loadtest_latency *l, uint64_t now_ns, uint64_t durable,
                            uint64_t queryable);

/* The send-delay, durable and queryable figures and per-second series into res (its seconds
 * already sampled). Both recording threads must have stopped. */
void loadtest_latency_finish(struct loadtest_latency *l, struct loadtest_result *res);

/* ---- the console's view of a run (loadtest_live.c) ----------------------------------------- */

struct http_client_conn;

/* Prints "dayshard loadtest: watch live: URL/ (run_name)" to stderr; with open, also starts
 * `xdg-open URL/` (not waited for), warning on stderr when it cannot. Returns xdg-open's pid for
 * loadtest_console_reap, or -1. */
pid_t loadtest_console_announce(const char *url, const char *run_name, bool open);
void loadtest_console_reap(pid_t pid);

/* Every node's GET /v1/heat/history?seconds=300 (conns[0..count), borrowed) merged as the
 * router merges them (http_heat_history_merge: summed by second up to the oldest node's newest
 * second), shard_capacity_eps the run's capacity_eps (when > 0). Returns a new reference, or
 * NULL with the reason in why (a node that did not answer 200 with a valid document, or out of
 * memory). */
json_t *loadtest_heat_history_fetch(struct http_client_conn *const *conns, uint32_t count,
                                    uint32_t capacity_eps, char *why, size_t why_size);

/* Runs one strategy into res (allocated by the caller, zeroed; loadtest_result_deinit frees its
 * series). Returns 0, or a negative code with the reason printed (as `dayshard loadtest: ...`). */
DS_MUST_USE int loadtest_run(const struct loadgen_loadtest_config *cfg,
                             const struct loadtest_strategy *strategy, uint32_t index,
                             uint32_t run_count, struct loadtest_result *res);
void loadtest_result_deinit(struct loadtest_result *res);

#endif /* DS_LOADGEN_LOADTEST_H */
