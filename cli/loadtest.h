/*
 * Private to cli/: `dayshard loadtest` (cmd_loadtest.c: arguments, strategies, report.json;
 * loadtest_run.c: one run of the real pipeline; loadtest_report.c: report.md and the plots).
 *
 * A run: the embedded broker (or --brokers), K `dayshard run` processes with the run's shard
 * strategy, an open-loop paced producer and a paced query load in this process, and a sampler
 * that reads every node's /v1/heat once a second. What a run measured is a struct lt_result,
 * which becomes one element of report.json's "runs".
 */
#ifndef DS_CLI_LOADTEST_H
#define DS_CLI_LOADTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ingest/ingest.h"
#include "shard/shard.h"

/* Nodes one run starts (each a process with its data directory and HTTP port). */
#define LT_NODES_MAX 8u
/* Seconds of samples one run keeps: a run past an hour is a soak, not a load test. */
#define LT_SECONDS_MAX 3600u
/* Partition keys whose per-second rates a run keeps (the heat map shows the hottest 48). */
#define LT_KEYS_MAX 1024u
#define LT_PLOT_KEYS_MAX 48u
/* Strategies one --compare runs. */
#define LT_STRATEGIES_MAX 8u
/* Growths a run records. */
#define LT_GROWTHS_MAX 256u
/* Query requests a run records (latency each): 1000/s for an hour. */
#define LT_QUERIES_PER_S_MAX 1000u
/* The embedded broker keeps ~5 MiB per partition (DESIGN.md section 7); an event costs ~60
 * bytes there compressed, so about 80,000 messages of lag per partition is where it starts to
 * drop what nodes have not read. Warn at half. */
#define LT_BROKER_LAG_WARN_MESSAGES 40000

struct lt_strategy {
    char name[64];        /* "adaptive, key order" */
    char shards_text[16]; /* "adaptive" or "fixed:N" */
    uint32_t base_shards;
    uint32_t max_shards; /* == base_shards for fixed */
    enum ingest_produce_key key;
};

struct lt_config {
    struct ingest_workload_config workload; /* profile, events, seed, rate_eps */
    uint64_t rate;
    uint32_t nodes;
    uint32_t queries_per_s;
    uint32_t capacity_eps;
    uint32_t partitions; /* Kafka partitions of the embedded broker's topic */
    const char *brokers; /* NULL: the embedded broker */
    const char *out_dir;
    const char *self;  /* path of the dayshard binary for the nodes */
    const char *model; /* --model given to every node ("events", "orders"), or NULL: none */
    bool no_gsi;
    bool keep_data;    /* keep each node's data directory (removed after the run otherwise) */
    bool progress_tty; /* rewrite one progress line (a terminal) instead of printing lines */
};

struct lt_growth {
    int32_t day;
    uint32_t from;
    uint32_t to;
    double at_s; /* seconds since the run started */
    char reason[SHARD_GROWTH_REASON_BYTES];
};

/* One second of a run, summed over its nodes. */
struct lt_second {
    double t_s;
    uint64_t produced; /* acknowledged by the broker so far */
    uint64_t stored;   /* durable on the nodes so far */
    int64_t lag_messages;
    double lag_ms;      /* how long ago the producer had acknowledged `stored` events */
    int64_t gsi_lag_ms; /* max over nodes, -1 none */
    double total_eps;   /* every partition's writes in the last second */
    double hottest_eps;
    uint32_t hottest_key; /* index into lt_result.keys */
    double hot_day_eps;   /* the run's hot day */
    double hot_day_shard_max_eps;
    uint32_t hot_day_shards;
    double kafka_total_eps;
    double kafka_hottest_eps;
    uint64_t throttled;  /* would-throttle events so far (node totals) */
    double count_p99_us; /* < 0: no query that second */
    double orders_p99_us;
};

struct lt_key {
    char text[SHARD_KEY_TEXT_SIZE];
    uint64_t total;
    float *eps; /* LT_SECONDS_MAX */
};

struct lt_result {
    struct lt_strategy strategy;
    uint64_t produced;
    uint64_t stored;
    double duration_s;
    double producer_behind_max_s;
    int32_t hot_day;
    uint32_t second_count;
    struct lt_second *seconds; /* LT_SECONDS_MAX */
    uint32_t key_count;
    struct lt_key keys[LT_KEYS_MAX];
    uint64_t throttled;
    uint64_t over_capacity_seconds;
    bool throttle_from_samples; /* several nodes: summed from their per-second samples */
    uint32_t growth_count;
    struct lt_growth growths[LT_GROWTHS_MAX];
    uint32_t day_count;
    int32_t days[SHARD_HEAT_TOP_MAX * LT_NODES_MAX];
    uint32_t day_shards[SHARD_HEAT_TOP_MAX * LT_NODES_MAX];
    uint64_t queries;
    uint64_t query_errors;
    double count_p50_us, count_p99_us, orders_p50_us, orders_p99_us;
    double sampler_cpu_s; /* the load test's own threads: its overhead */
    double queries_cpu_s;
    char warnings[4][256];
    uint32_t warning_count;
};

/* The p-th percentile (0..1) of n values, sorting them in place; -1 for none. */
double lt_percentile(float *v, size_t n, double p);

/* Runs one strategy into res (allocated by the caller, zeroed; lt_result_deinit frees its
 * series). Returns 0, or a negative code with the reason printed (as `dayshard loadtest: ...`). */
DS_MUST_USE int lt_run(const struct lt_config *cfg, const struct lt_strategy *strategy,
                       uint32_t index, uint32_t run_count, struct lt_result *res);
void lt_result_deinit(struct lt_result *res);

#endif /* DS_CLI_LOADTEST_H */
