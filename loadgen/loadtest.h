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
 */
#ifndef DS_LOADGEN_LOADTEST_H
#define DS_LOADGEN_LOADTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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
/* The embedded broker keeps ~5 MiB per partition (DESIGN.md section 7); an event costs ~60
 * bytes there compressed, so about 80,000 messages of lag per partition is where it starts to
 * drop what nodes have not read. Warn at half. */
#define LOADTEST_BROKER_LAG_WARN_MESSAGES 40000

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
    char warnings[4][256];
    uint32_t warning_count;
};

/* Prints "dayshard loadtest: <message>" to stderr (a JSON log line instead under
 * DS_LOG_FORMAT=json, as every command's errors); returns code, for `return loadtest_error(..)`. */
int loadtest_error(int code, const char *fmt, ...) DS_PRINTF(2, 3);

/* The p-th percentile (0..1) of n values, sorting them in place; -1 for none. */
double loadtest_percentile(float *v, size_t n, double p);

/* Runs one strategy into res (allocated by the caller, zeroed; loadtest_result_deinit frees its
 * series). Returns 0, or a negative code with the reason printed (as `dayshard loadtest: ...`). */
DS_MUST_USE int loadtest_run(const struct loadgen_loadtest_config *cfg,
                             const struct loadtest_strategy *strategy, uint32_t index,
                             uint32_t run_count, struct loadtest_result *res);
void loadtest_result_deinit(struct loadtest_result *res);

#endif /* DS_LOADGEN_LOADTEST_H */
