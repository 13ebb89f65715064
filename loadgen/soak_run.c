/*
 * One soak (`dayshard soak`, loadgen.h): a `dayshard run` node fed many days of compressed
 * stream time through the embedded broker (or --brokers), sampled once a second, restarted
 * every few stream days, its last N days counted against `dayshard ingest` of the same stream.
 *
 * Threads: the caller samples, restarts and ends; a producer thread runs loadgen_produce_run
 * with the generator (uniform, updates keeping their order's day) on its open-loop schedule.
 * The producer is held (cfg->pause) while the node's read lag nears what the embedded broker
 * keeps (~80,000 of these messages a partition): holding above SOAK_LAG_HOLD_MESSAGES and
 * releasing below half of it, judged on the last sample plus everything acknowledged since
 * (an over-estimate, so the guard never waits a sample too long). A restart and the end hold it
 * too, and wait until the node has taken in everything acknowledged: a consistent=true count,
 * which answers once the broker's high watermarks are durable on the node.
 *
 * What is sampled comes from the node's /metrics (soak_prom.c: every sample line; the table
 * below says which become series, summed over labels, with a per-label series for the stores)
 * and from /proc/PID (VmRSS, VmHWM, the fd directory). Rejected: /v1/heat as the load test
 * reads (it has rates, not the bounded resources); reading the data directory ourselves (the
 * node already walks it for dayshard_disk_bytes, and two walks could disagree).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "loadgen/broker_embed.h"
#include "loadgen/node_proc.h"
#include "loadgen/soak.h"

/* A compressed stream writes a whole day at the feed rate, and heat counts rates in producer
 * time: at `run`'s default capacity (1,000 events/s a shard) a day fed at 100,000 orders/s
 * would need 150 shards, and its count would follow every hold of the producer. The node gets
 * --shard-capacity of the feed's line rate / SOAK_DAY_SHARDS, so a day at the full rate needs
 * that many shards and a held one fewer (a --node-arg --shard-capacity wins). */
#define SOAK_DAY_SHARDS 4u
#define SOAK_NODE_START_TIMEOUT_MS 30000
#define SOAK_READY_TIMEOUT_MS 120000
#define SOAK_STOP_TIMEOUT_MS 60000
/* A node that stores nothing new for this long while it has events to take in is stuck. */
#define SOAK_CATCH_UP_STALL_MS 120000
/* The embedded broker keeps ~5 MiB a partition, ~80,000 of these messages: hold the producer
 * at a quarter of that, so a second of stale lag at full rate still leaves half of it. */
#define SOAK_LAG_HOLD_MESSAGES 20000.0
#define SOAK_TICK_MS 100
#define SOAK_SAMPLE_MS 1000
#define SOAK_PROGRESS_MS 5000
/* Why the producer is held (bits of the pause word). */
#define SOAK_HOLD_LAG 1
#define SOAK_HOLD_RESTART 2

extern char **environ;

/* A metric of the node and the series it becomes; per_label: also one series per value of
 * that label ("disk_bytes.parts"). A missing metric stays NAN (null in report.json). */
struct soak_metric {
    const char *metric;
    const char *series;
    const char *per_label;
};

static const struct soak_metric soak_metrics[] = {
    {"dayshard_disk_bytes", "disk_bytes", "store"},
    {"dayshard_disk_files", "disk_files", NULL},
    {"dayshard_partitions_held", "partitions_held", NULL},
    {"dayshard_days_held", "days_held", NULL},
    {"dayshard_shards_total", "shards_total", NULL},
    {"dayshard_day_shards_max", "day_shards_max", NULL},
    {"dayshard_segment_fds", "segment_fds", NULL},
    {"dayshard_ids_keydir_bytes", "ids_keydir_bytes", NULL},
    {"dayshard_ids_memory_bytes", "ids_memory_bytes", NULL},
    {"dayshard_ids_sealed_files", "ids_sealed_files", NULL},
    {"dayshard_gsi_log_bytes", "gsi_log_bytes", NULL},
    {"dayshard_consumer_lag_messages", "lag_messages", NULL},
    {"dayshard_events_ingested_total", "events_ingested", NULL},
    {"dayshard_events_rejected_total", "events_rejected", NULL},
    {"dayshard_writer_stall_seconds_max", "writer_stall_s", NULL},
    {"dayshard_ids_seal_stall_seconds_max", "ids_seal_stall_s", NULL},
    {"dayshard_gsi_seal_stall_seconds_max", "gsi_seal_stall_s", NULL},
    {"dayshard_compactions_total", "compactions", NULL},
    {"dayshard_compaction_slice_seconds_max", "compaction_slice_s", NULL},
    {"dayshard_compacting", "compacting", NULL},
};

struct soak_state {
    const struct loadgen_soak_config *cfg;
    struct soak_samples *samples;
    struct soak_outcome *out;
    char data[DS_PATH_MAX];
    char log[DS_PATH_MAX];
    char topic[128];
    char group[64];
    const char *brokers;
    struct loadgen_broker *broker;
    pid_t pid;
    char url[128];
    struct http_client_conn *conn;
    uint64_t t0_ns;
    /* the producer thread */
    pthread_t producer;
    bool producer_started;
    struct loadgen_produce_config produce;
    struct loadgen_produce_stats produce_stats;
    struct ingest_kafka_props props;
    atomic_uint_fast64_t acked;
    atomic_bool producer_done;
    atomic_int pause;
    int produce_rc;
    volatile int produce_stop;
    double lines_per_day;
    /* the last sample, for the lag guard, restarts and progress */
    double lag_partition_max;
    uint64_t acked_at_sample;
    double stream_day;
    double rss_bytes;
    double lag_messages;
    uint32_t next_restart_day;
};

static double soak_elapsed_s(const struct soak_state *s)
{
    return (double)(ds_clock_ns() - s->t0_ns) / 1e9;
}

static void soak_sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the node ------------------------------------------------------------------------------ */

static int soak_node_start(struct soak_state *s)
{
    const struct loadgen_soak_config *cfg = s->cfg;
    char retention[16];
    char capacity[32];
    snprintf(retention, sizeof(retention), "%u", cfg->retention_days);
    double lines_per_s = (double)cfg->rate * (1.0 + cfg->updated);
    snprintf(capacity, sizeof(capacity), "%.0f", ceil(lines_per_s / SOAK_DAY_SHARDS));
    const char *argv[24 + LOADGEN_SOAK_NODE_ARGS_MAX] = {cfg->self,
                                                         "run",
                                                         "--brokers",
                                                         s->brokers,
                                                         "--topic",
                                                         s->topic,
                                                         "--group",
                                                         s->group,
                                                         "--data",
                                                         s->data,
                                                         "--http",
                                                         "127.0.0.1:0",
                                                         "--model",
                                                         cfg->model,
                                                         "--retention-days",
                                                         retention,
                                                         "-X",
                                                         "session.timeout.ms=6000",
                                                         "--shard-capacity",
                                                         capacity};
    size_t argc = 20;
    for (uint32_t i = 0; i < cfg->node_arg_count; i++) {
        argv[argc++] = cfg->node_args[i];
    }
    char address[96] = "";
    int rc = node_proc_spawn(argv, s->log, true, SOAK_NODE_START_TIMEOUT_MS, &s->pid, address,
                             sizeof(address));
    if (rc != 0) {
        return soak_error(rc, "the node did not start (%s): see %s", ds_strerror(rc), s->log);
    }
    snprintf(s->url, sizeof(s->url), "http://%s", address);
    return http_client_conn_open(s->url, NULL, &s->conn);
}

/* Stops the node with sig; returns its wait status. */
static int soak_node_stop(struct soak_state *s, int sig)
{
    http_client_conn_close(s->conn);
    s->conn = NULL;
    int status = s->pid > 0 ? node_proc_stop(s->pid, sig, SOAK_STOP_TIMEOUT_MS) : 0;
    s->pid = 0;
    return status;
}

/* The node's answer to path: its status (0: no answer). */
static long soak_get_status(struct soak_state *s, const char *path)
{
    struct http_client_answer ans;
    int rc = http_client_conn_get(s->conn, path, &ans);
    long status = rc == 0 ? ans.status : 0;
    http_client_answer_deinit(&ans);
    return status;
}

/* Names why the node is gone into out->failure and returns true when it exited. */
static bool soak_node_died(struct soak_state *s)
{
    int status = 0;
    if (s->pid <= 0 || waitpid(s->pid, &status, WNOHANG) != s->pid) {
        return false;
    }
    s->pid = 0;
    snprintf(s->out->failure, sizeof(s->out->failure),
             "the node died (%s %d) at stream day %.0f: see %s",
             WIFEXITED(status) ? "exit" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), s->stream_day, s->log);
    return true;
}

static int soak_wait_ready(struct soak_state *s)
{
    uint64_t deadline = ds_clock_ns() + (uint64_t)SOAK_READY_TIMEOUT_MS * 1000000u;
    while (soak_get_status(s, "/readyz") != 200) { /* bounded by the deadline */
        if (soak_node_died(s) || ds_clock_ns() > deadline) {
            return soak_error(-ETIMEDOUT, "the node (%s) was not ready within %d s: see %s", s->url,
                              SOAK_READY_TIMEOUT_MS / 1000, s->log);
        }
        soak_sleep_ms(50);
    }
    return 0;
}

/* Waits until the producer's acknowledged count stands still (held, its queue delivered). */
static void soak_wait_acked_settled(struct soak_state *s)
{
    uint64_t last = atomic_load(&s->acked);
    for (int still = 0; still < 5;) { /* five still turns of 50 ms; the producer is held */
        soak_sleep_ms(50);
        uint64_t now = atomic_load(&s->acked);
        still = now == last ? still + 1 : 0;
        last = now;
    }
}

/* Waits until the node stored everything the broker acknowledged (a consistent count answers
 * 200), retrying its 503s while the node makes progress. */
static int soak_wait_caught_up(struct soak_state *s)
{
    char first[DS_DATE_TEXT_SIZE], path[128];
    ds_date_format(s->cfg->first_day, first);
    snprintf(path, sizeof(path), "/v1/count?day=%s&consistent=true&timeout_ms=10000", first);
    uint64_t deadline = ds_clock_ns() + (uint64_t)SOAK_CATCH_UP_STALL_MS * 1000000u;
    while (soak_get_status(s, path) != 200) { /* bounded by the deadline */
        if (soak_node_died(s)) {
            return soak_error(-EPIPE, "%s", s->out->failure);
        }
        if (ds_clock_ns() > deadline) {
            return soak_error(-ETIMEDOUT,
                              "the node did not take in every acknowledged event "
                              "within %d s: see %s",
                              SOAK_CATCH_UP_STALL_MS / 1000, s->log);
        }
        soak_sleep_ms(100);
    }
    return 0;
}

/* ---- sampling ------------------------------------------------------------------------------ */

struct soak_fold {
    struct soak_samples *samples;
    int rc;
    double stream_day_ts;
    double lag_partition_max;
};

static void soak_fold_metric(const struct soak_prom_sample *m, void *user)
{
    struct soak_fold *f = user;
    if (m->name_len == strlen("dayshard_stream_day_timestamp_seconds") &&
        memcmp(m->name, "dayshard_stream_day_timestamp_seconds", m->name_len) == 0) {
        f->stream_day_ts = m->value;
        return;
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(soak_metrics) && f->rc == 0; i++) {
        const struct soak_metric *w = &soak_metrics[i];
        if (strlen(w->metric) != m->name_len || memcmp(w->metric, m->name, m->name_len) != 0) {
            continue;
        }
        f->rc = soak_samples_add(f->samples, w->series, m->value);
        if (strcmp(w->series, "lag_messages") == 0 && m->value > f->lag_partition_max) {
            f->lag_partition_max = m->value;
        }
        char value[32], series[SOAK_NAME_BYTES];
        if (w->per_label != NULL && f->rc == 0 &&
            soak_prom_label(m, w->per_label, value, sizeof(value)) > 0 &&
            (size_t)snprintf(series, sizeof(series), "%s.%s", w->series, value) < sizeof(series)) {
            f->rc = soak_samples_add(f->samples, series, m->value);
        }
    }
}

/* VmRSS and VmHWM (bytes) and the number of open fds of pid; NAN when unreadable. */
static void soak_proc(pid_t pid, double *rss, double *hwm, double *fds)
{
    char path[64], line[256];
    *rss = *hwm = *fds = NAN;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long kb = 0;
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) {
            *rss = (double)kb * 1024.0;
        } else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) {
            *hwm = (double)kb * 1024.0;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL) {
        return;
    }
    double n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        n += e->d_name[0] != '.' ? 1 : 0;
    }
    closedir(d);
    *fds = n;
}

/* One sample of the node: /metrics, /proc, the feed. Returns 0 or a negative code (printed). */
static int soak_sample(struct soak_state *s)
{
    struct soak_samples *sm = s->samples;
    int rc = soak_samples_begin(sm);
    if (rc != 0) {
        return soak_error(rc, "the soak ran past %u samples (one a second)", SOAK_SAMPLES_MAX);
    }
    uint64_t acked = atomic_load(&s->acked);
    double rss, hwm, fds;
    soak_proc(s->pid, &rss, &hwm, &fds);
    struct soak_fold fold = {.samples = sm, .stream_day_ts = NAN, .lag_partition_max = 0};
    struct http_client_answer ans;
    int got = http_client_conn_get(s->conn, "/metrics", &ans);
    if (got == 0 && ans.status == 200) {
        rc = soak_prom_parse(ans.body, ans.body_len, soak_fold_metric, &fold);
        rc = rc < 0 ? rc : fold.rc;
    }
    http_client_answer_deinit(&ans);
    double day = fold.stream_day_ts / 86400.0 - (double)s->cfg->first_day;
    rc = rc < 0 ? rc : soak_samples_set(sm, "t_s", soak_elapsed_s(s));
    rc = rc < 0 ? rc : soak_samples_set(sm, "stream_day", day);
    rc = rc < 0 ? rc : soak_samples_set(sm, "fed_day", (double)acked / s->lines_per_day);
    rc = rc < 0 ? rc : soak_samples_set(sm, "lines_acked", (double)acked);
    rc = rc < 0 ? rc : soak_samples_set(sm, "rss_bytes", rss);
    rc = rc < 0 ? rc : soak_samples_set(sm, "hwm_bytes", hwm);
    rc = rc < 0 ? rc : soak_samples_set(sm, "open_fds", fds);
    rc = rc < 0 ? rc : soak_samples_set(sm, "paused", atomic_load(&s->pause) != 0 ? 1.0 : 0.0);
    if (rc < 0) {
        return soak_error(rc, "sampling the node: %s", ds_strerror(rc));
    }
    soak_samples_end(sm);
    if (got == 0) {
        s->acked_at_sample = acked;
        s->lag_partition_max = fold.lag_partition_max;
        s->stream_day = isnan(day) ? s->stream_day : day;
        s->rss_bytes = rss;
        int lag = soak_samples_series(sm, "lag_messages");
        s->lag_messages = lag >= 0 ? sm->values[lag][sm->count - 1] : NAN;
    }
    return 0;
}

/* The lag guard: holds the producer while the read lag (the last sample's largest partition
 * lag plus what was acknowledged since, spread over the partitions) is above the bound. */
static void soak_guard(struct soak_state *s, bool fresh)
{
    uint64_t since = atomic_load(&s->acked) - s->acked_at_sample;
    double estimate = s->lag_partition_max + (double)since / (double)s->cfg->partitions;
    if (estimate > SOAK_LAG_HOLD_MESSAGES) {
        atomic_fetch_or(&s->pause, SOAK_HOLD_LAG);
    } else if (fresh && s->lag_partition_max < SOAK_LAG_HOLD_MESSAGES / 2.0) {
        atomic_fetch_and(&s->pause, ~SOAK_HOLD_LAG);
    }
}

static void soak_progress(const struct soak_state *s)
{
    fprintf(stderr, "soak: %6.0f s  stream day %.0f/%u  fed %llu lines  lag %.0f  RSS %.0f MiB%s\n",
            soak_elapsed_s(s), s->stream_day, s->cfg->days,
            (unsigned long long)atomic_load(&s->acked), s->lag_messages, s->rss_bytes / 1048576.0,
            atomic_load(&s->pause) != 0 ? "  (producer held)" : "");
}

/* ---- restarts ------------------------------------------------------------------------------ */

/* Holds the producer, waits until the node took in everything acknowledged, stops it (with
 * cfg->restart_signal), starts it again, times it, and releases the producer. */
static int soak_restart(struct soak_state *s)
{
    atomic_fetch_or(&s->pause, SOAK_HOLD_RESTART);
    soak_wait_acked_settled(s);
    int rc = soak_wait_caught_up(s);
    if (rc != 0) {
        return rc;
    }
    struct soak_restart *r = &s->out->restarts[s->out->restart_count];
    *r = (struct soak_restart){.stream_day = s->stream_day, .at_s = soak_elapsed_s(s)};
    uint64_t t = ds_clock_ns();
    r->exit_status = soak_node_stop(s, s->cfg->restart_signal);
    r->stop_ms = (double)(ds_clock_ns() - t) / 1e6;
    fprintf(stderr, "soak: restarting the node at stream day %.0f (%s)\n", s->stream_day,
            s->cfg->restart_signal == SIGKILL ? "kill -9" : "SIGTERM");
    t = ds_clock_ns();
    rc = soak_node_start(s);
    rc = rc == 0 ? soak_wait_ready(s) : rc;
    r->ready_ms = (double)(ds_clock_ns() - t) / 1e6;
    rc = rc == 0 ? soak_wait_caught_up(s) : rc;
    r->caught_up_ms = (double)(ds_clock_ns() - t) / 1e6;
    if (rc != 0) {
        return rc;
    }
    s->out->restart_count++;
    atomic_fetch_and(&s->pause, ~SOAK_HOLD_RESTART);
    return 0;
}

static bool soak_restart_due(const struct soak_state *s)
{
    return s->cfg->restart_every > 0 && s->out->restart_count < SOAK_RESTARTS_MAX &&
           !atomic_load(&s->producer_done) && s->stream_day >= (double)s->next_restart_day &&
           s->next_restart_day < s->cfg->days;
}

/* ---- the run ------------------------------------------------------------------------------- */

static void *soak_producer_main(void *arg)
{
    struct soak_state *s = arg;
    s->produce_rc = loadgen_produce_run(&s->produce, &s->produce_stats, &s->produce_stop);
    atomic_store(&s->producer_done, true);
    return NULL;
}

static int soak_producer_start(struct soak_state *s)
{
    struct loadgen_produce_config *p = &s->produce;
    p->brokers = s->brokers;
    p->topic = s->topic;
    p->input_fd = -1;
    soak_workload(s->cfg, &p->workload);
    p->rate = s->cfg->rate;
    p->key = LOADGEN_PRODUCE_KEY_ORDER;
    p->acked_live = &s->acked;
    p->pause = &s->pause;
    s->out->lines = p->workload.events;
    s->lines_per_day = (double)p->workload.events / (double)s->cfg->days;
    if (s->cfg->brokers == NULL) {
        broker_embed_producer_props(&s->props);
        p->props = &s->props;
    }
    int rc = -pthread_create(&s->producer, NULL, soak_producer_main, s);
    s->producer_started = rc == 0;
    return rc;
}

static int soak_setup(struct soak_state *s)
{
    const struct loadgen_soak_config *cfg = s->cfg;
    int rc = ds_mkdir_p(cfg->out_dir);
    if (rc != 0) {
        return soak_error(rc, "%s: %s", cfg->out_dir, ds_strerror(rc));
    }
    snprintf(s->data, sizeof(s->data), "%s/data", cfg->out_dir);
    snprintf(s->log, sizeof(s->log), "%s/node.log", cfg->out_dir);
    snprintf(s->group, sizeof(s->group), "soak-%d", (int)getpid());
    /* Absent is what we want; anything else shows at the node's start. gcc keeps
     * warn_unused_result through a (void) cast, hence the named result. */
    int removed = ds_remove_tree(s->data);
    (void)removed;
    (void)unlink(s->log);
    if (cfg->brokers != NULL) {
        snprintf(s->topic, sizeof(s->topic), "%s", cfg->topic);
        s->brokers = cfg->brokers;
    } else {
        snprintf(s->topic, sizeof(s->topic), "%s", BROKER_EMBED_TOPIC);
        rc = broker_embed_start(s->topic, cfg->partitions, soak_error, &s->broker, &s->brokers);
        if (rc != 0) {
            return rc;
        }
    }
    rc = soak_node_start(s);
    return rc != 0 ? rc : soak_wait_ready(s);
}

/* Samples once a second, guards the lag, restarts when due, until the producer is done. */
static int soak_loop(struct soak_state *s)
{
    uint64_t next_sample = ds_clock_ns();
    uint64_t next_progress = next_sample + (uint64_t)SOAK_PROGRESS_MS * 1000000u;
    s->next_restart_day = s->cfg->restart_every;
    while (!atomic_load(&s->producer_done)) { /* until the stream is sent; a tick a turn */
        if (soak_node_died(s)) {
            return 1;
        }
        uint64_t now = ds_clock_ns();
        bool fresh = now >= next_sample;
        if (fresh) {
            next_sample += (uint64_t)SOAK_SAMPLE_MS * 1000000u;
            int rc = soak_sample(s);
            if (rc != 0) {
                return rc;
            }
        }
        soak_guard(s, fresh);
        if (now >= next_progress) {
            next_progress += (uint64_t)SOAK_PROGRESS_MS * 1000000u;
            soak_progress(s);
        }
        if (soak_restart_due(s)) {
            int rc = soak_restart(s);
            if (rc != 0) {
                return s->out->failure[0] != '\0' ? 1 : rc;
            }
            s->next_restart_day += s->cfg->restart_every;
            next_sample = ds_clock_ns();
        }
        soak_sleep_ms(SOAK_TICK_MS);
    }
    return 0;
}

/* Everything acknowledged stored, then a few more samples (the node's state at rest). */
static int soak_drain(struct soak_state *s)
{
    int rc = soak_wait_caught_up(s);
    for (int i = 0; i < 3 && rc == 0; i++) {
        soak_sleep_ms(SOAK_SAMPLE_MS);
        rc = soak_sample(s);
    }
    return rc;
}

static void soak_teardown(struct soak_state *s)
{
    if (s->producer_started) {
        s->produce_stop = 2;
        atomic_store(&s->pause, 0);
        pthread_join(s->producer, NULL);
    }
    if (s->pid > 0) {
        int status = soak_node_stop(s, SIGTERM);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "dayshard soak: warning: the node did not stop cleanly: see %s\n",
                    s->log);
        }
    }
    http_client_conn_close(s->conn);
    if (s->broker != NULL) {
        loadgen_broker_stop(s->broker);
    }
}

/* The feed: what the producer sent, held and achieved. */
static void soak_feed(struct soak_state *s)
{
    struct soak_outcome *out = s->out;
    out->lines_acked = s->produce_stats.acked;
    out->paused_s = s->produce_stats.paused_s;
    out->behind_max_s = s->produce_stats.behind_max_s;
    /* The producer's seconds exclude the time held: its schedule's origin moved by it. */
    double active_s = s->produce_stats.seconds;
    out->feed_s = active_s;
    out->feed_eps = active_s > 0 ? (double)out->lines_acked / active_s : 0.0;
    fprintf(stderr,
            "soak: fed %llu lines in %.1f s of feeding plus %.1f s held (node lag or restarts): "
            "%.0f lines/s while feeding (asked: %llu new orders/s)\n",
            (unsigned long long)out->lines_acked, active_s, out->paused_s, out->feed_eps,
            (unsigned long long)s->cfg->rate);
}

static int soak_drive(struct soak_state *s)
{
    s->t0_ns = ds_clock_ns();
    int rc = soak_producer_start(s);
    rc = rc == 0 ? soak_loop(s) : rc;
    if (s->producer_started && rc == 0) {
        pthread_join(s->producer, NULL);
        s->producer_started = false;
        soak_feed(s);
        if (s->produce_rc != 0) {
            snprintf(s->out->failure, sizeof(s->out->failure),
                     "the producer could not deliver every event: %s", ds_strerror(s->produce_rc));
            return 1;
        }
        rc = soak_drain(s);
    }
    s->out->seconds = soak_elapsed_s(s);
    if (rc == 0) {
        rc = soak_count_check(s->cfg, s->out, s->url);
    }
    return rc;
}

int soak_run(const struct loadgen_soak_config *cfg, struct soak_samples *samples,
             struct soak_outcome *out)
{
    struct soak_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->cfg = cfg;
    s->samples = samples;
    s->out = out;
    s->stream_day = NAN;
    s->lag_messages = NAN;
    s->rss_bytes = NAN;
    int rc = soak_setup(s);
    rc = rc == 0 ? soak_drive(s) : rc;
    if (rc != 0 && out->failure[0] == '\0' && soak_node_died(s)) {
        rc = 1;
    }
    soak_teardown(s);
    free(s);
    return rc;
}
