/*
 * loadgen: everything that makes load for the pipeline rather than taking it in, above ingest/
 * (whose Kafka client properties, log routing and event JSON it shares) and below cli/.
 *
 * - the workload generator: deterministic synthetic order streams (uniform, busy-day,
 *   hot-customer and flash-sale profiles, Zipf-distributed customers), each event with its
 *   intended send time, for the demo, benchmarks, `dayshard generate` and the producer. One
 *   generator belongs to one thread.
 * - the embedded broker: librdkafka's mock cluster on loopback (`dayshard broker`, tests).
 * - the producer: JSON lines or the generator into a Kafka topic, paced open loop, keyed by
 *   order, customer, day or partition (`dayshard produce`).
 * - the load test (`dayshard loadtest`): the real pipeline under one or several shard
 *   strategies, with report.json, report.md and plots. Called from the main thread of the CLI.
 * - the soak (`dayshard soak`): one node over many days of compressed stream time with
 *   retention and restarts, every bounded resource sampled, failing when one still grows after
 *   twice the retention. Called from the main thread of the CLI.
 *
 * Nothing in ingest/ or below depends on this folder.
 */
#ifndef DS_LOADGEN_H
#define DS_LOADGEN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "ingest/ingest.h"

/* ---- the workload generator (workload.c) ------------------------------------------------ */

enum loadgen_profile {
    LOADGEN_PROFILE_UNIFORM = 0,  /* events spread evenly over the days, in time order */
    LOADGEN_PROFILE_BUSY_DAY,     /* like uniform, but one day takes busy_fraction of all events */
    LOADGEN_PROFILE_HOT_CUSTOMER, /* like uniform, but one customer places hot_fraction of orders */
    LOADGEN_PROFILE_FLASH_SALE    /* like uniform, plus a flash window of the schedule in which
                                   * the busy day's rate is flash_factor times its share (below) */
};

struct loadgen_workload_config {
    enum loadgen_profile profile;
    uint64_t seed;
    uint64_t events;             /* how many events in all */
    int32_t first_day;           /* days since the epoch of the first day */
    uint32_t days;               /* how many consecutive days the stream covers (>= 1) */
    uint64_t customers;          /* distinct customer ids, drawn Zipf(zipf_s) */
    double zipf_s;               /* Zipf exponent, e.g. 1.1 */
    uint32_t busy_day_index;     /* busy-day and flash-sale: which day (0-based) is busy */
    double busy_fraction;        /* busy-day: share of all events on the busy day, 0..1 */
    double hot_fraction;         /* hot-customer: share of events from customer 1 */
    uint32_t string_id_permille; /* share (1/1000) of events whose ids are strings */
    /* The schedule: the base rate (events/s) the stream is meant to be sent at, 0 = none (every
     * send time is then 0); at most LOADGEN_WORKLOAD_RATE_EPS_MAX. flash-sale needs one. */
    double rate_eps;
    uint32_t flash_factor;       /* flash-sale: the busy day's rate in the window, in shares */
    uint32_t flash_seconds;      /* flash-sale: how long the window lasts, in schedule seconds */
    double flash_start_fraction; /* flash-sale: where it starts, share of the schedule, [0, 1) */
    /* Orders, not events: all 0 by default, and then the stream is the plain event stream of
     * the fields above, byte for byte (recorded seeds keep their streams). Shares of the output
     * lines, 0..1, together at most LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX: update_fraction are new
     * versions of an order sent earlier (a status change, a changed amount, rarely a moved day or
     * customer; with updates, half of the orders carry an increasing "version" and a few of their
     * versions arrive stale, after a higher one), duplicate_fraction repeat an earlier line byte
     * for byte (a producer's retry). items_fraction is the share of new orders with an "items"
     * array (0..LOADGEN_WORKLOAD_ITEMS_MAX items). */
    double update_fraction;
    double duplicate_fraction;
    double items_fraction;
    /* An update keeps its order's day (the rare moved day still draws its random numbers, so
     * the rest of the stream is the same): a soak at small retention needs every update inside
     * its order's day, since moved days chain and would put the stream days ahead. false by
     * default, so recorded seeds keep their streams. */
    bool updates_keep_day;
};

/* flash-sale: the busy day's share of the base rate is rate_eps / days. During the window the
 * stream sends every event of the uniform stream as before (every day keeps its rate) plus
 * (flash_factor - 1) * rate_eps / days events on the busy day, so the busy day's rate is
 * flash_factor times its share and the total rate rate_eps * (1 + (flash_factor - 1) / days).
 * events counts both kinds; the uniform events take events minus the window's extra ones, and
 * the schedule's duration is their count / rate_eps. Timestamps of the uniform events follow
 * the month in order as in the uniform profile; the window's events fall on the busy day, in
 * order among themselves (so the stream as a whole is not in ts order). */
/* Limits: 10^8 events/s is beyond any one producer (and is what `--rate` accepts); a thousand
 * shares is past any sale on record; a window longer than a day is the busy-day profile. Their
 * product keeps a window's extra event count exact in a double. */
#define LOADGEN_WORKLOAD_RATE_EPS_MAX 100000000u
#define LOADGEN_WORKLOAD_FLASH_FACTOR_MAX 1000u
#define LOADGEN_WORKLOAD_FLASH_SECONDS_MAX 86400u
/* Updates and duplicates together: a stream needs new orders to update and repeat, and a
 * tenth of its lines as new orders is already a stream of mostly status changes. */
#define LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX 0.9
/* Items of one generated order: a small basket, well inside the 100 items and 8 KiB of an
 * event (docs/EVENTS.md). */
#define LOADGEN_WORKLOAD_ITEMS_MAX 5u
/* A generated line (loadgen_workload_line): an event's canonical JSON line plus its items (at
 * most 12 + 5 x 50 bytes). */
#define LOADGEN_WORKLOAD_LINE_BYTES_MAX (INGEST_JSON_LINE_BYTES_MAX + 512u)

/* Fills cfg with the defaults used by the demo and benchmarks (rate_eps 0, flash_factor 50,
 * flash_seconds 60, flash_start_fraction 1/3). */
void loadgen_workload_defaults(struct loadgen_workload_config *cfg);
/* Returns 0, or -DS_EUSAGE with the offending field and its valid range logged (ds_log_error):
 * for flash-sale also when rate_eps is 0 or the window does not fit inside the schedule. */
DS_MUST_USE int loadgen_workload_config_check(const struct loadgen_workload_config *cfg);
/* The name --profile takes for a profile ("busy-day"); "unknown" out of range. Never NULL. */
const char *loadgen_profile_name(enum loadgen_profile profile);
/* "uniform", "busy-day", "hot-customer", "flash-sale" into *out; returns 0 or -DS_EUSAGE. */
DS_MUST_USE int loadgen_profile_parse(const char *text, enum loadgen_profile *out);

struct loadgen_workload;
DS_MUST_USE int loadgen_workload_create(const struct loadgen_workload_config *cfg,
                                        struct loadgen_workload **out);
void loadgen_workload_destroy(struct loadgen_workload *w);
/* The next event; returns false when all cfg->events have been generated. New orders come in
 * non-decreasing ts order (flash-sale: the uniform events and the window's events each are),
 * with order ids unique and increasing (1, 2, ...); updates and duplicates repeat the id of an
 * order sent earlier, with its ts (or, rarely, a moved one). */
bool loadgen_workload_next(struct loadgen_workload *w, struct ds_event *event);
/* The JSON line (no newline) of the event last returned by loadgen_workload_next: exactly
 * ingest_event_format_json's line (with "version" when the event has one) when it has no
 * items, else that line with "items" appended; a duplicate's line equals the earlier line
 * byte for byte. The event itself carries the version and (event->items, valid until the
 * next call) the canonical items.
 * Returns the length, or -ENOSPC when dst_capacity is too small
 * (LOADGEN_WORKLOAD_LINE_BYTES_MAX always suffices). */
DS_MUST_USE int loadgen_workload_line(const struct loadgen_workload *w, char *dst,
                                      size_t dst_capacity);
/* What the lines so far were; orders + updates + duplicates is the number of lines. */
struct loadgen_workload_stats {
    uint64_t orders;     /* new orders */
    uint64_t updates;    /* new versions of an earlier order, stale ones included */
    uint64_t duplicates; /* byte-for-byte repeats of an earlier line */
    uint64_t stale;      /* updates whose version is below one sent before */
    uint64_t versioned;  /* lines with a "version" */
    uint64_t with_items; /* lines with an "items" array */
};
void loadgen_workload_stats(const struct loadgen_workload *w, struct loadgen_workload_stats *out);
/* The intended send time, in seconds from the stream's start, of the event last returned by
 * loadgen_workload_next (which must have returned one): index / rate_eps for the new order of
 * that 0-based index, except that flash-sale's window adds its events between the uniform ones;
 * an update or a duplicate is sent with the line before it (so rate_eps paces the new orders).
 * Non-decreasing from event to event; 0 when rate_eps is 0. */
double loadgen_workload_send_time(const struct loadgen_workload *w);
/* Generates every event of cfg as JSON lines into out (`dayshard generate`, the demo, the
 * benchmarks); adds the bytes written to *bytes when bytes is not NULL. Returns 0, a negated
 * errno when a write failed, or loadgen_workload_create's error. Does not close or flush out. */
DS_MUST_USE int loadgen_workload_write(const struct loadgen_workload_config *cfg, FILE *out,
                                       uint64_t *bytes);

/* ---- the embedded broker (kafka_broker.c; development and tests) ------------------------- */

/* librdkafka's mock cluster behind the real Kafka protocol on loopback TCP (docs/OPERATIONS.md).
 * It keeps only about the newest 5 MiB per partition and nothing across restarts. */
#define LOADGEN_BROKER_PARTITIONS_MAX 1024u
#define LOADGEN_BROKER_BROKERS_MAX 16u

struct loadgen_broker_config {
    const char *listen; /* "HOST:PORT" for the first broker, or NULL for any free port */
    const char *topic;  /* created at start */
    uint32_t partitions;
    uint32_t brokers; /* mock brokers in the cluster, 1..LOADGEN_BROKER_BROKERS_MAX */
};
void loadgen_broker_config_defaults(struct loadgen_broker_config *cfg);

struct loadgen_broker;
DS_MUST_USE int loadgen_broker_start(const struct loadgen_broker_config *cfg,
                                     struct loadgen_broker **out);
/* "127.0.0.1:PORT[,127.0.0.1:PORT...]": what clients pass as bootstrap servers. */
const char *loadgen_broker_bootstrap(const struct loadgen_broker *b);
/* Fault injection for tests, one command per call (the broker command reads them from stdin):
 *   "down ID" / "up ID"                  take mock broker ID (1-based) down or up
 *   "rtt ID MS"                          add round-trip latency to a broker
 *   "errors APIKEY COUNT ERRCODE..."     fail the next COUNT requests of a Kafka API
 *   "leader PARTITION ID"                move a partition's leadership
 * Writes a one-line answer into reply. Returns 0 or -DS_EUSAGE. */
DS_MUST_USE int loadgen_broker_control(struct loadgen_broker *b, const char *command, char *reply,
                                       size_t reply_capacity);
void loadgen_broker_stop(struct loadgen_broker *b);

/* ---- the producer (kafka_produce.c, produce_key.c) -------------------------------------- */

/* What the producer keys Kafka messages by (`dayshard produce --key`); the key picks the Kafka
 * partition (librdkafka's default partitioner). Append new modes, never renumber. */
enum loadgen_produce_key {
    LOADGEN_PRODUCE_KEY_ORDER = 0, /* the order_id's text: decimal, or a string id's bytes */
    LOADGEN_PRODUCE_KEY_CUSTOMER,  /* the customer_id's text, the same way */
    LOADGEN_PRODUCE_KEY_DAY,       /* "YYYY-MM-DD", the event's UTC day: one partition per day */
    LOADGEN_PRODUCE_KEY_PARTITION, /* "DAY#YYYY-MM-DD#k", k = shard_of_id(order_id, S(day)) */
};
/* The longest key: a 64-byte string id (a partition key is at most 23 bytes, a day 10). */
#define LOADGEN_PRODUCE_KEY_BYTES_MAX 64u

/* S(day) for --key partition, from whoever follows the shard map: 1..SHARD_COUNT_MAX, or 0 when
 * the day is unknown (the producer then uses base_shards). Called on the producing thread once
 * per event keyed by partition; must be quick. */
typedef uint32_t (*loadgen_produce_shards_fn)(int32_t day, void *user);

/* Told of each event librdkafka took, in send order, when the producer is paced: due_ns is when
 * the schedule wanted it sent, sent_ns when rd_kafka_produce() took it (both ds_clock_ns), so
 * sent_ns - due_ns is its send delay. Called on the producing thread; must be quick. */
typedef void (*loadgen_produce_sent_fn)(uint64_t due_ns, uint64_t sent_ns, void *user);

/* "order", "customer", "day", "partition" into *out; returns 0 or -DS_EUSAGE. */
DS_MUST_USE int loadgen_produce_key_parse(const char *text, enum loadgen_produce_key *out);
/* The name loadgen_produce_key_parse takes; "unknown" for a value out of range. Never NULL. */
const char *loadgen_produce_key_name(enum loadgen_produce_key mode);
/* Writes the key of a decoded (or generated) event under mode into dst, not NUL-terminated;
 * returns its length (1..LOADGEN_PRODUCE_KEY_BYTES_MAX), or -ENOSPC when dst_capacity is too
 * small (dst untouched). Order mode reads only event->order_id. Partition mode asks
 * shards_of_day (may be NULL) for S(day) and uses base_shards (1..SHARD_COUNT_MAX) when it is
 * NULL or answers 0. Pure apart from the callback; any thread. */
DS_MUST_USE int loadgen_produce_key_format(enum loadgen_produce_key mode,
                                           const struct ds_event *event, uint32_t base_shards,
                                           char *dst, size_t dst_capacity,
                                           loadgen_produce_shards_fn shards_of_day,
                                           void *shards_user);

struct loadgen_produce_config {
    const char *brokers;
    const char *topic;
    const struct ingest_kafka_props *props;  /* may be NULL */
    int input_fd;                            /* JSON lines to send, or -1 to use the generator */
    struct loadgen_workload_config workload; /* when input_fd < 0 */
    /* Events/s, 0 = as fast as possible. Open loop: event i is due at the start plus its send
     * time (the generator's schedule, with workload.rate_eps set to rate; i / rate for lines),
     * and a producer that falls behind sends at once until it has caught up, never skipping.
     * With the generator, 0 takes workload.rate_eps as the rate. */
    uint64_t rate;
    void *progress_file;          /* FILE * for a progress line (a terminal), or NULL */
    uint32_t flush_timeout_ms;    /* wait this long at the end for delivery reports; 0 = 60000 */
    enum loadgen_produce_key key; /* what messages are keyed by (default order) */
    uint32_t base_shards;         /* S(day) for --key partition: 0 = SHARD_COUNT_DEFAULT */
    loadgen_produce_shards_fn shards_of_day; /* may be NULL: then every day has base_shards */
    void *shards_user;
    /* When not NULL, kept equal to the acknowledged count as delivery reports arrive (another
     * thread may watch it: the load test's sampler). */
    atomic_uint_fast64_t *acked_live;
    /* When not NULL, the producer sends nothing while *pause is non-zero (delivery reports are
     * still served) and its schedule moves on by the time paused, so it does not burst after:
     * the soak holds it while a node's lag nears what the embedded broker keeps. */
    const atomic_int *pause;
    /* May be NULL; else called for every event sent on a schedule (rate > 0): the load test
     * measures the send delay against the schedule with it. */
    loadgen_produce_sent_fn on_sent;
    void *sent_user;
};

struct loadgen_produce_stats {
    uint64_t sent;    /* handed to librdkafka */
    uint64_t acked;   /* delivery reports with success */
    uint64_t failed;  /* delivery reports with an error, or never delivered */
    uint64_t skipped; /* input lines not sent: blank, or over the message size limit */
    double seconds;
    double behind_max_s; /* paced: how far behind its schedule the producer ever was */
    double paused_s;     /* time spent held by cfg->pause */
};

/* Sends every event (keyed by cfg->key when the event can be read, else unkeyed; the order key
 * of an input line needs only a readable order_id), idempotent and compressed, then waits for
 * every delivery report. Warns once (ds_log_warn) when it fell more than a second behind its
 * schedule. Stops early when *stop becomes non-zero (stop may be NULL). Returns 0 when every
 * sent event was acknowledged, else -DS_EKAFKA (or a negated errno for the input; -DS_EUSAGE,
 * before sending, when librdkafka refuses a property or a field of cfg is out of range).
 * Fills *stats in every case. */
DS_MUST_USE int loadgen_produce_run(const struct loadgen_produce_config *cfg,
                                    struct loadgen_produce_stats *stats, const volatile int *stop);

/* ---- the load test (loadtest.c, loadtest_run.c, loadtest_report*.c, loadtest_gate.c) ------- */

/* Nodes one run starts (each a process with its data directory and HTTP port). */
#define LOADGEN_LOADTEST_NODES_MAX 8u
/* Query requests per second the load test sends (latency each is recorded): 1000/s for an
 * hour is what one run keeps. */
#define LOADGEN_LOADTEST_QUERIES_PER_S_MAX 1000u

/* Thresholds one load test checks (--fail-if): a handful for a CI job, not a rule engine. */
#define LOADGEN_LOADTEST_GATE_EXPRS_MAX 32u

/* The gate of a load test (loadtest_gate.c): the --fail-if thresholds, parsed, and the
 * --baseline report, read, before anything runs, so a typo costs no run. Opaque. */
struct loadgen_loadtest_gate;

/* Parses exprs[0..count) ("FIELD OP NUMBER[x|%]", docs/LOADTEST_REPORT.md) and reads
 * baseline_path (NULL: none) into *out (free with loadgen_loadtest_gate_destroy). Returns 0, or
 * -DS_EUSAGE with the reason printed as "dayshard loadtest: ..." (an unknown field, a relative
 * threshold without a baseline, a baseline that cannot be read, is not a report, or has a
 * newer schema), or -ENOMEM. exprs and baseline_path are borrowed for the call. */
DS_MUST_USE int loadgen_loadtest_gate_create(const char *baseline_path, const char *const *exprs,
                                             uint32_t count, struct loadgen_loadtest_gate **out);
void loadgen_loadtest_gate_destroy(struct loadgen_loadtest_gate *gate);

/* The console's files report.html inlines, so its heat maps are drawn by the live console's
 * own renderer (query_console_text gives them; loadgen does not depend on query/, so the CLI
 * hands them in). Borrowed for the call; texts need no NUL. */
struct loadgen_report_assets {
    const char *console_js;
    size_t console_js_len;
    const char *console_css;
    size_t console_css_len;
    const char *report_js; /* the report's own drawing: charts, tables, columns */
    size_t report_js_len;
};

/* What `dayshard loadtest` was asked for. All strings are borrowed for the call. */
struct loadgen_loadtest_config {
    struct loadgen_workload_config workload; /* profile, events, seed, rate_eps */
    uint64_t rate;
    uint32_t nodes; /* 1..LOADGEN_LOADTEST_NODES_MAX */
    uint32_t queries_per_s;
    /* Seconds from the start left out of each run's whole-run latency figures (the per-second
     * series keep them, marked): below the schedule's length, events / rate. */
    uint32_t warmup_s;
    uint32_t capacity_eps;
    uint32_t partitions; /* Kafka partitions of the embedded broker's topic */
    const char *brokers; /* NULL: the embedded broker */
    const char *out_dir;
    const char *self;  /* path of the dayshard binary for the nodes */
    const char *model; /* --model given to every node ("events", "orders"), or NULL: none */
    bool no_gsi;
    bool keep_data;    /* keep each node's data directory (removed after the run otherwise) */
    bool progress_tty; /* rewrite one progress line (a terminal) instead of printing lines */
    bool open_console; /* `xdg-open` each run's first node's console when the run starts */
    /* The strategies: with compare, fixed 1, fixed 4 and adaptive (key as given, then by day
     * and by partition); else the one strategy below. */
    bool compare;
    bool adaptive;         /* adaptive sharding up to max_shards, else fixed_shards */
    uint32_t fixed_shards; /* 1..max_shards */
    uint32_t max_shards;
    enum loadgen_produce_key key;
    const char *command;                        /* the command line, recorded in report.json */
    const struct loadgen_loadtest_gate *gate;   /* borrowed; NULL: no --baseline, no --fail-if */
    const struct loadgen_report_assets *assets; /* borrowed; NULL: no report.html */
};

/* Creates cfg->out_dir, runs every strategy (report.json rewritten atomically after each, so a
 * run's results survive a later run's failure), checks cfg->gate against every run that
 * completed (its comparison and verdicts printed to stdout, each breach to stderr, all of it
 * written into report.json and report.md), renders report.md and the plots, and prints the
 * summary table to stdout (progress goes to stderr). Returns the number of thresholds breached
 * or not checkable (0: the gate passed, or there is none); -DS_ECORRUPT when a run stored a
 * different number of events than the broker acknowledged; or another negative code. Every
 * failure is printed here as "dayshard loadtest: ..."; the caller prints nothing more.
 * Spawns node processes and gnuplot and waits for them: SIGCHLD must not be ignored. */
DS_MUST_USE int loadgen_loadtest_run(const struct loadgen_loadtest_config *cfg);

/* Draws out_dir/report.md, out_dir/report.html (with assets; NULL: not it) and out_dir/plots/
 * again from out_dir/report.json (`--render-only`), which may come from another machine's run
 * or an older dayshard (schema 1). With a gate
 * (NULL: none), checks it against the document's runs first and rewrites report.json with the
 * verdicts (the measurements untouched). Returns what loadgen_loadtest_run returns for the
 * gate, or a negative code with the reason printed as "dayshard loadtest: ...". */
DS_MUST_USE int loadgen_loadtest_render(const char *out_dir,
                                        const struct loadgen_loadtest_gate *gate,
                                        const struct loadgen_report_assets *assets);

/* ---- the soak (soak_run.c, soak_report.c, soak_verdict.c, soak_prom.c) ------------------ */

/* Node arguments --node-arg may add: a handful of overrides, not a second command line. */
#define LOADGEN_SOAK_NODE_ARGS_MAX 16u
/* Retention the soak accepts, in days: its stream must cover 4x this (see the growth rule). */
#define LOADGEN_SOAK_RETENTION_DAYS_MAX 365u

/* What `dayshard soak` was asked for. All strings are borrowed for the call. */
struct loadgen_soak_config {
    uint32_t days;           /* stream days, from first_day; at least 4 x retention_days */
    int32_t first_day;       /* days since the epoch (2026-01-01 by default) */
    uint64_t orders_per_day; /* new orders a day */
    double updated;          /* updates per new order, 0..LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX */
    uint64_t seed;
    uint64_t rate;           /* events/s of the producer's open-loop schedule */
    uint32_t partitions;     /* of the embedded broker's topic */
    uint32_t retention_days; /* N, the node's --retention-days */
    uint32_t restart_every;  /* stream days between restarts, 0 = never */
    int restart_signal;      /* SIGTERM or SIGKILL */
    const char *brokers;     /* NULL: the embedded broker */
    const char *topic;       /* with brokers */
    const char *model;       /* "orders" or "events" */
    const char *node_args[LOADGEN_SOAK_NODE_ARGS_MAX];
    uint32_t node_arg_count;
    const char *out_dir;
    const char *self;    /* path of the dayshard binary for the node and the reference */
    bool keep_data;      /* keep OUT/data and OUT/ref */
    const char *command; /* the command line, recorded in report.json */
    const struct loadgen_loadtest_gate *gate; /* borrowed; NULL: no --baseline, no --fail-if */
};

void loadgen_soak_config_defaults(struct loadgen_soak_config *cfg);
/* Returns 0, or -DS_EUSAGE with the reason printed ("dayshard soak: ..."). */
DS_MUST_USE int loadgen_soak_config_check(const struct loadgen_soak_config *cfg);
/* Runs the soak into cfg->out_dir: report.json, the plots, a summary on stdout, progress on
 * stderr. Returns 0 when it passed, 1 when a resource grew, a count differed or the node died
 * (each named on stderr and in report.json), or a negative code when it could not run (printed).
 * Spawns the node, `dayshard ingest`, `dayshard count` and gnuplot and waits for them: SIGCHLD
 * must not be ignored. */
DS_MUST_USE int loadgen_soak_run(const struct loadgen_soak_config *cfg);
/* Draws the plots and prints the summary again from out_dir/report.json (`--render-only`).
 * Returns 0, or a negative code with the reason printed. */
DS_MUST_USE int loadgen_soak_render(const char *out_dir);

#endif /* DS_LOADGEN_H */
