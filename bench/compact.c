/*
 * bench_compact [ORDERS] [VERSIONS] [RUNS] [FAST_EVENTS]: what segment compaction costs the
 * writer and what the small-block merge saves.
 *
 * (a) The writer's longest stall, orders model, one day/shard: VERSIONS events (default
 *     1,000,000) over ORDERS orders (default 200,000; each event a new version of order
 *     i % ORDERS, so most are updates making a retraction and a new row) in commits of 1,000.
 *     "one go": the whole partition compacted by storage_compact after the feed, the call's
 *     time. "slices": storage_compact_due after every commit of the feed, as the ingest stage
 *     calls it (compactions start and finish while the partition is written); the longest
 *     single call. Both also give the longest commit. Medians over RUNS (default 3) fresh
 *     directories, and their ratio.
 * (b) A day fed fast: FAST_EVENTS events (default 20,000) into one partition in commits of 4,
 *     so it holds a block per commit; then commits that leave it idle until storage_compact_due
 *     merges it. Blocks, bytes per event and rows before and after, in both models (the orders
 *     model fed new orders only, so the rewrite is the merge alone).
 *
 * Events are synthetic: sequential order ids, 50,000 customers, timestamps spread over the
 * day, four statuses, amounts up to 100.00. Directories go under /tmp and are removed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define BENCH_DAY 20474 /* 2026-01-21 */
#define RUNS_MAX 15
#define STALL_COMMIT_EVENTS 1000u
#define FAST_COMMIT_EVENTS 4u

static const char *const STATUSES[] = {"pending", "paid", "shipped", "cancelled"};

/* Event n of order id (n picks status and amount, so every event is a new version). */
static void event_of(uint64_t id, uint64_t n, struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    e->order_id.value = (int64_t)id;
    e->customer_id.value = (int64_t)(ds_mix64(id) % 50000) + 1;
    e->ts_ms = (int64_t)BENCH_DAY * 86400000 + (int64_t)(ds_mix64(id ^ 0x5a5a) % 86400000);
    const char *status = STATUSES[n % DS_ARRAY_LEN(STATUSES)];
    e->status_len = (uint8_t)strlen(status);
    memcpy(e->status, status, e->status_len);
    e->amount_units = (int64_t)(ds_mix64(n + 1) % 10000) * (DS_AMOUNT_SCALE / 100);
}

static struct storage *open_writer(const char *dir, enum storage_model model)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.model = model;
    cfg.partitions_max = 1024;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    if (rc != 0) {
        fprintf(stderr, "bench_compact: open %s: %s\n", dir, ds_strerror(rc));
        exit(1);
    }
    return st;
}

/* CPU time of the calling thread: on a shared machine a call's wall time includes waiting for
 * a core, which says nothing of the work the call does. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The longest call seen: wall time, and the thread's CPU time in the longest one by CPU. */
struct longest {
    uint64_t wall_ns, cpu_ns;
};

static void longest_add(struct longest *l, uint64_t wall_ns, uint64_t cpu_ns)
{
    l->wall_ns = wall_ns > l->wall_ns ? wall_ns : l->wall_ns;
    l->cpu_ns = cpu_ns > l->cpu_ns ? cpu_ns : l->cpu_ns;
}

static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "bench_compact: %s: %s\n", what, ds_strerror(rc));
        exit(1);
    }
}

static void append_one(struct storage *st, uint32_t shard, uint64_t id, uint64_t n)
{
    struct ds_event e;
    event_of(id, n, &e);
    check(storage_append(st, BENCH_DAY, shard, &e, NULL), "append");
}

static uint64_t commit_timed(struct storage *st, uint64_t *max_ns)
{
    uint64_t t0 = bench_now_ns();
    check(storage_commit(st), "commit");
    uint64_t ns = bench_now_ns() - t0;
    *max_ns = ns > *max_ns ? ns : *max_ns;
    return ns;
}

/* ---- (a) the longest stall ------------------------------------------------------------- */

struct stall_run {
    double stall_ms;     /* one go: storage_compact's time; slices: the longest due call */
    double stall_cpu_ms; /* the same, the thread's CPU time */
    double commit_ms;    /* the longest commit */
    uint64_t compactions;
    uint64_t rows_end, count_end;
};

static struct stall_run stall_run(uint64_t orders, uint64_t versions, bool slices)
{
    char dir[] = "/tmp/dayshard-bench-compact-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct storage *st = open_writer(dir, STORAGE_MODEL_ORDERS);
    struct stall_run r = {0};
    uint64_t commit_max_ns = 0;
    struct longest due = {0};
    for (uint64_t n = 0; n < versions; n++) {
        append_one(st, 0, n % orders + 1, n);
        if ((n + 1) % STALL_COMMIT_EVENTS != 0 && n + 1 < versions) {
            continue;
        }
        (void)commit_timed(st, &commit_max_ns);
        if (slices) {
            struct storage_compact_report rep;
            uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
            int rc = storage_compact_due(st, &rep);
            longest_add(&due, bench_now_ns() - t0, thread_cpu_ns() - c0);
            check(rc, "compact_due");
            r.compactions += rc == 1;
        }
    }
    if (!slices) {
        struct storage_compact_report rep;
        uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
        int rc = storage_compact(st, BENCH_DAY, 0, &rep);
        longest_add(&due, bench_now_ns() - t0, thread_cpu_ns() - c0);
        check(rc, "compact");
        r.compactions = rc == 1;
    }
    struct storage_partition_total t;
    check(storage_partition_totals(st, BENCH_DAY, 0, NULL, 0, &t), "totals");
    r.rows_end = t.rows;
    r.count_end = t.count;
    r.stall_ms = (double)due.wall_ns / 1e6;
    r.stall_cpu_ms = (double)due.cpu_ns / 1e6;
    r.commit_ms = (double)commit_max_ns / 1e6;
    storage_close(st);
    bench_remove_tree(dir);
    return r;
}

static void stall_part(uint64_t orders, uint64_t versions, int runs)
{
    printf("(a) orders model, one day/shard: %llu versions of %llu orders, commits of %u "
           "events, %d runs\n",
           (unsigned long long)versions, (unsigned long long)orders, STALL_COMMIT_EVENTS, runs);
    double one[RUNS_MAX], sliced[RUNS_MAX], one_commit[RUNS_MAX], sliced_commit[RUNS_MAX];
    double one_cpu[RUNS_MAX], sliced_cpu[RUNS_MAX];
    for (int i = 0; i < runs; i++) {
        struct stall_run a = stall_run(orders, versions, false);
        struct stall_run b = stall_run(orders, versions, true);
        printf("  run %d: one go %.1f ms (CPU %.1f ms; rows left %llu of %llu orders); slices: "
               "longest call %.1f ms (CPU %.1f ms), %llu compactions (rows left %llu); longest "
               "commit %.1f / %.1f ms\n",
               i + 1, a.stall_ms, a.stall_cpu_ms, (unsigned long long)a.rows_end,
               (unsigned long long)a.count_end, b.stall_ms, b.stall_cpu_ms,
               (unsigned long long)b.compactions, (unsigned long long)b.rows_end, a.commit_ms,
               b.commit_ms);
        one_cpu[i] = a.stall_cpu_ms;
        sliced_cpu[i] = b.stall_cpu_ms;
        one[i] = a.stall_ms;
        sliced[i] = b.stall_ms;
        one_commit[i] = a.commit_ms;
        sliced_commit[i] = b.commit_ms;
    }
    double m_one = bench_median(one, runs);
    double m_sliced = bench_median(sliced, runs);
    printf("  longest writer stall from compaction, median: one go %.1f ms, slices %.1f ms "
           "(%.0fx shorter)\n",
           m_one, m_sliced, m_sliced > 0 ? m_one / m_sliced : 0.0);
    double c_one = bench_median(one_cpu, runs);
    double c_sliced = bench_median(sliced_cpu, runs);
    printf("  the same in the writer thread's CPU time, median: one go %.1f ms, slices %.1f ms "
           "(%.0fx shorter)\n",
           c_one, c_sliced, c_sliced > 0 ? c_one / c_sliced : 0.0);
    printf("  longest commit, median: %.1f ms (one go's feed), %.1f ms (sliced feed)\n",
           bench_median(one_commit, runs), bench_median(sliced_commit, runs));
}

/* ---- (b) the merge ----------------------------------------------------------------------- */

static void merge_part(enum storage_model model, uint64_t events)
{
    char dir[] = "/tmp/dayshard-bench-compact-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct storage *st = open_writer(dir, model);
    uint64_t commit_max_ns = 0;
    for (uint64_t n = 0; n < events; n++) {
        append_one(st, 0, n + 1, n);
        if ((n + 1) % FAST_COMMIT_EVENTS == 0 || n + 1 == events) {
            (void)commit_timed(st, &commit_max_ns);
        }
    }
    struct storage_partition_total before;
    check(storage_partition_totals(st, BENCH_DAY, 0, NULL, 0, &before), "totals");
    /* Idle commits (one event elsewhere each) until the merge is due and done. */
    struct storage_compact_report rep = {0};
    uint32_t idle = 0;
    struct longest due = {0};
    for (int rc = 0; rc == 0; idle++) {
        ASSERT(idle < 100000);
        append_one(st, 1, events + idle + 1, idle);
        (void)commit_timed(st, &commit_max_ns);
        uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
        rc = storage_compact_due(st, &rep);
        longest_add(&due, bench_now_ns() - t0, thread_cpu_ns() - c0);
        check(rc, "compact_due");
    }
    struct storage_partition_total after;
    check(storage_partition_totals(st, BENCH_DAY, 0, NULL, 0, &after), "totals");
    ASSERT(after.count == before.count && after.rows == before.rows);
    printf("  %-6s model: %llu events in commits of %u: %llu blocks, %.1f bytes/event -> "
           "merged after %u idle commits in %u slices (longest call %.1f ms, CPU %.1f ms): %llu "
           "blocks, %.1f bytes/event (%.1fx smaller)\n",
           model == STORAGE_MODEL_ORDERS ? "orders" : "events", (unsigned long long)events,
           FAST_COMMIT_EVENTS, (unsigned long long)before.blocks,
           (double)before.bytes / (double)before.count, idle, rep.slices, (double)due.wall_ns / 1e6,
           (double)due.cpu_ns / 1e6, (unsigned long long)after.blocks,
           (double)after.bytes / (double)after.count,
           (double)before.bytes / (double)(after.bytes > 0 ? after.bytes : 1));
    storage_close(st);
    bench_remove_tree(dir);
}

int main(int argc, char **argv)
{
    uint64_t orders = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    uint64_t versions = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    uint64_t fast = argc > 4 ? strtoull(argv[4], NULL, 10) : 20000;
    if (orders < 1 || versions < orders || runs < 1 || runs > RUNS_MAX || fast < 1) {
        fprintf(stderr,
                "usage: bench_compact [ORDERS >= 1] [VERSIONS >= ORDERS] [RUNS 1..%d] "
                "[FAST_EVENTS >= 1]\n",
                RUNS_MAX);
        return 2;
    }
    stall_part(orders, versions, runs);
    printf("(b) a day fed fast, one day/shard, merged by storage_compact_due\n");
    merge_part(STORAGE_MODEL_EVENTS, fast);
    merge_part(STORAGE_MODEL_ORDERS, fast);
    return 0;
}
