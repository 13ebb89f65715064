/*
 * bench_index_seal [EVENTS] [BATCH] [RATE]: the by-customer index sealed beside its applies, in
 * one run. The busy-day workload's events (default 1M) are applied in batches (default 8192) at
 * RATE events/s (default 500,000, a node's ingest rate, so that applies go on while seals run;
 * 0: flat out) twice,
 * each time into a fresh directory: once without sealing, once with index_seal_due's rule
 * driving index_seal_start / index_seal_finish between applies as the builder does, and the
 * builder's idle seal after the last apply. Per pass it prints the apply rate, each apply's
 * stall (its own time plus a seal's finish just before it, the time the builder could not
 * apply) p50 / p99 / max, and the index's bytes per event at the end; for the sealing pass the
 * seals, their time, the longest finish and the bytes they wrote against the log appended
 * (write amplification). The directories are removed at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "index/index.h"

struct pass {
    uint64_t events;
    double seconds;     /* until the last apply returned */
    double seconds_end; /* until the last seal was swapped in */
    struct bench_latency stall;
    uint64_t seals;
    double seal_seconds;
    uint64_t finish_ns_max;
    uint64_t written; /* by the seals */
    uint64_t appended;
    uint64_t bytes_end; /* log + table after close */
};

static void seal_done(struct pass *p, const struct index_compact_stats *st)
{
    printf("  seal: %.2f s, log %llu -> %llu bytes, %llu copied after its snapshot, finish "
           "%.2f ms\n",
           st->seconds, (unsigned long long)st->bytes_before, (unsigned long long)st->bytes_after,
           (unsigned long long)st->tail_bytes, (double)st->finish_ns / 1e6);
    p->seals++;
    p->seal_seconds += st->seconds;
    p->written += st->written_bytes;
    p->finish_ns_max = st->finish_ns > p->finish_ns_max ? st->finish_ns : p->finish_ns_max;
}

/* Between applies, as the builder does: finishes a seal whose thread is done, or starts one. */
static uint64_t maintain(struct index *g, struct index_seal **seal, struct pass *p)
{
    uint64_t t0 = bench_now_ns();
    if (*seal != NULL) {
        struct index_compact_stats st;
        int rc = index_seal_finish(*seal, false, &st);
        if (rc == -EAGAIN) {
            return bench_now_ns() - t0;
        }
        ASSERT(rc == 0);
        *seal = NULL;
        seal_done(p, &st);
    } else if (index_seal_due(g, false)) {
        ASSERT(index_seal_start(g, INT32_MIN, seal) == 0);
    }
    return bench_now_ns() - t0;
}

static void run_pass(uint64_t events, uint32_t batch_max, uint64_t rate, bool seal_on,
                     const char *dir, struct pass *p)
{
    memset(p, 0, sizeof(*p));
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.batch_entries_max = batch_max;
    struct index *g = NULL;
    ASSERT(index_open(&cfg, &g) == 0);
    struct index_entry *batch = calloc(batch_max, sizeof(*batch));
    uint64_t *stalls = calloc(events / batch_max + 2, sizeof(*stalls));
    ASSERT(batch != NULL && stalls != NULL);
    struct loadgen_workload *w = bench_busy_day_workload(events);
    struct index_seal *seal = NULL;
    struct ds_event ev;
    size_t n = 0;
    uint64_t applies = 0;
    uint64_t t0 = bench_now_ns();
    for (bool more = true; more;) {
        more = loadgen_workload_next(w, &ev);
        if (more) {
            index_entry_of_event(&ev, ds_day_from_ms(ev.ts_ms), &batch[n++]);
        }
        if (n == batch_max || (!more && n > 0)) {
            uint64_t held = seal_on ? maintain(g, &seal, p) : 0;
            p->events += n;
            char cursor[32];
            int len = snprintf(cursor, sizeof(cursor), "%llu", (unsigned long long)p->events);
            uint64_t a0 = bench_now_ns();
            uint64_t before = 0;
            uint64_t live = 0;
            index_log_bytes(g, &before, &live);
            before += live;
            ASSERT(index_apply(g, batch, n, cursor, (size_t)len) == 0);
            uint64_t after = 0;
            index_log_bytes(g, &after, &live);
            p->appended += after + live - before;
            stalls[applies++] = held + bench_now_ns() - a0;
            n = 0;
            uint64_t due = rate > 0 ? t0 + p->events * 1000000000ull / rate : 0;
            uint64_t now = bench_now_ns();
            if (due > now) {
                struct timespec ts = {.tv_sec = (time_t)((due - now) / 1000000000ull),
                                      .tv_nsec = (long)((due - now) % 1000000000ull)};
                nanosleep(&ts, NULL);
            }
        }
    }
    p->seconds = (double)(bench_now_ns() - t0) / 1e9;
    if (seal != NULL) {
        struct index_compact_stats st;
        ASSERT(index_seal_finish(seal, true, &st) == 0);
        seal_done(p, &st);
    }
    if (seal_on && index_seal_due(g, true)) { /* the builder's idle seal */
        ASSERT(index_seal_start(g, INT32_MIN, &seal) == 0);
        struct index_compact_stats st;
        ASSERT(index_seal_finish(seal, true, &st) == 0);
        seal_done(p, &st);
    }
    p->seconds_end = (double)(bench_now_ns() - t0) / 1e9;
    loadgen_workload_destroy(w);
    index_close(g);
    p->stall = bench_latency_of(stalls, applies);
    p->bytes_end = bench_file_bytes(dir, "log") + bench_file_bytes(dir, "table");
    free(stalls);
    free(batch);
}

static void print_pass(const char *name, const struct pass *p)
{
    printf("%-8s %.0f events/s applied (%.2f s; %.2f s until sealed); apply stall p50 %.2f ms, p99 "
           "%.2f ms, max %.2f ms (%llu "
           "applies); index %.1f B/event (%llu bytes)\n",
           name, (double)p->events / p->seconds, p->seconds, p->seconds_end, p->stall.p50_us / 1e3,
           p->stall.p99_us / 1e3, p->stall.max_us / 1e3, (unsigned long long)p->stall.count,
           (double)p->bytes_end / (double)p->events, (unsigned long long)p->bytes_end);
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ull;
    uint32_t batch = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 8192u;
    uint64_t rate = argc > 3 ? strtoull(argv[3], NULL, 10) : 500000u;
    if (events == 0 || batch == 0 || batch > INDEX_BATCH_ENTRIES_MAX) {
        fprintf(stderr, "usage: bench_index_seal [EVENTS >= 1] [BATCH 1..%u] [RATE events/s]\n",
                INDEX_BATCH_ENTRIES_MAX);
        return 2;
    }
    char base[DS_PATH_MAX / 2];
    snprintf(base, sizeof(base), "/tmp/bench_index_seal.XXXXXX");
    ASSERT(mkdtemp(base) != NULL);
    char off_dir[DS_PATH_MAX];
    char on_dir[DS_PATH_MAX];
    snprintf(off_dir, sizeof(off_dir), "%s/off", base);
    snprintf(on_dir, sizeof(on_dir), "%s/on", base);
    struct pass off;
    struct pass on;
    run_pass(events, batch, rate, false, off_dir, &off);
    run_pass(events, batch, rate, true, on_dir, &on);
    printf("bench_index_seal: %llu busy-day events in batches of %u at %llu events/s (0: flat "
           "out), sealing off then on\n",
           (unsigned long long)events, batch, (unsigned long long)rate);
    print_pass("off", &off);
    print_pass("sealing", &on);
    printf("seals: %llu, %.2f s in all (thread), longest finish (applies held) %.2f ms; wrote "
           "%llu bytes for %llu appended: write amplification %.2f; rate on/off %.3f\n",
           (unsigned long long)on.seals, on.seal_seconds, (double)on.finish_ns_max / 1e6,
           (unsigned long long)on.written, (unsigned long long)on.appended,
           (double)on.written / (double)on.appended,
           ((double)on.events / on.seconds) / ((double)off.events / off.seconds));
    char cmd[DS_PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    ASSERT(system(cmd) == 0);
    return 0;
}
