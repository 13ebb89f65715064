/*
 * bench_index_store [EVENTS] [DIR]: the by-customer index store alone (index/), before
 * and after compaction, in one run: the busy-day workload's events (default 10M) applied in
 * batches of 65536 as the builder does, then
 *   - index bytes per event: the log as applied (plus the table checkpoint written at close),
 *     and after index_compact (the sealed log; no table until more log is appended);
 *   - newest 10 in-process (index_query) for the heaviest customer, one with about 1,000 orders
 *     and one with 2: p50 / p99 of 20,000 queries each, before and after;
 *   - paging a customer with about 100k orders to the end 100 at a time against one pass at
 *     the largest page the API allows (1000), median of 5 each, before and after.
 * Before and after alternate per measurement (the unsealed log is kept as a copy), so both see
 * the same machine. DIR (default a temporary directory) is removed at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "index/index.h"

#define BATCH 65536u
#define QUERIES 20000u
#define PAGING_RUNS 5

static void copy_file(const char *from, const char *to)
{
    char cmd[3 * DS_PATH_MAX];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
    ASSERT(system(cmd) == 0);
}

static struct index *store_open(const char *dir)
{
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.batch_entries_max = BATCH;
    struct index *g = NULL;
    ASSERT(index_open(&cfg, &g) == 0);
    return g;
}

static struct bench_latency newest10(struct index *g, int64_t customer, uint64_t *ns)
{
    struct index_entry entries[10];
    struct ds_id id = {.value = customer};
    for (uint32_t i = 0; i < QUERIES; i++) {
        struct index_page page = {.entries = entries};
        uint64_t t0 = bench_now_ns();
        ASSERT(index_query(g, &id, 10, NULL, &page) == 0);
        ns[i] = bench_now_ns() - t0;
    }
    return bench_latency_of(ns, QUERIES);
}

/* Seconds to page customer to the end at limit; *total the entries seen. */
static double page_all(struct index *g, int64_t customer, uint32_t limit, uint64_t *total)
{
    static struct index_entry entries[INDEX_PAGE_LIMIT_MAX];
    struct ds_id id = {.value = customer};
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    *total = 0;
    uint64_t t0 = bench_now_ns();
    for (;;) {
        struct index_page page = {.entries = entries};
        ASSERT(index_query(g, &id, limit, token, &page) == 0);
        *total += page.count;
        if (!page.has_next) {
            break;
        }
        memcpy(token, page.next_token, sizeof(token));
    }
    return (double)(bench_now_ns() - t0) / 1e9;
}

struct figures {
    struct bench_latency lat[3];
    double deep_s;    /* 100 at a time, median */
    double onepass_s; /* 1000 at a time, median */
    uint64_t deep_entries;
};

static void measure(struct index *g, const int64_t *customers, int64_t paged, struct figures *f,
                    uint64_t *ns)
{
    for (int c = 0; c < 3; c++) {
        f->lat[c] = newest10(g, customers[c], ns);
    }
    double deep[PAGING_RUNS];
    double one[PAGING_RUNS];
    for (int r = 0; r < PAGING_RUNS; r++) {
        uint64_t a = 0;
        uint64_t b = 0;
        deep[r] = page_all(g, paged, 100, &a);
        one[r] = page_all(g, paged, INDEX_PAGE_LIMIT_MAX, &b);
        ASSERT(a == b);
        f->deep_entries = a;
    }
    f->deep_s = bench_median(deep, PAGING_RUNS);
    f->onepass_s = bench_median(one, PAGING_RUNS);
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
    char base[DS_PATH_MAX / 2];
    bool temp = argc <= 2;
    if (temp) {
        snprintf(base, sizeof(base), "/tmp/bench_index_store.XXXXXX");
        ASSERT(mkdtemp(base) != NULL);
    } else {
        ASSERT(strlen(argv[2]) < sizeof(base));
        snprintf(base, sizeof(base), "%s", argv[2]);
    }
    char dir[DS_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/gsi", base);
    struct loadgen_workload_config wcfg = bench_busy_day_config(events);
    uint32_t *counts = calloc(wcfg.customers + 1, sizeof(*counts));
    struct index_entry *batch = calloc(BATCH, sizeof(*batch));
    ASSERT(counts != NULL && batch != NULL);
    struct loadgen_workload *w = bench_busy_day_workload(events);
    struct index *g = store_open(dir);
    struct ds_event ev;
    size_t n = 0;
    uint64_t applied = 0;
    uint64_t t0 = bench_now_ns();
    for (bool more = true; more;) {
        more = loadgen_workload_next(w, &ev);
        if (more) {
            index_entry_of_event(&ev, ds_day_from_ms(ev.ts_ms), &batch[n++]);
            if (!ev.customer_id.is_string && (uint64_t)ev.customer_id.value <= wcfg.customers) {
                counts[ev.customer_id.value]++;
            }
        }
        if (n == BATCH || (!more && n > 0)) {
            applied += n;
            char cursor[32];
            int len = snprintf(cursor, sizeof(cursor), "%llu", (unsigned long long)applied);
            ASSERT(index_apply(g, batch, n, cursor, (size_t)len) == 0);
            n = 0;
        }
    }
    double apply_s = (double)(bench_now_ns() - t0) / 1e9;
    loadgen_workload_destroy(w);
    index_close(g);
    /* The customers: heaviest, nearest 1,000, exactly 2 orders, nearest 100k (paged). */
    int64_t heavy = 1;
    int64_t mid = 1;
    int64_t light = 0;
    int64_t paged = 1;
    for (uint64_t c = 1; c <= wcfg.customers; c++) {
        uint32_t k = counts[c];
        heavy = k > counts[heavy] ? (int64_t)c : heavy;
        mid = llabs((long long)k - 1000) < llabs((long long)counts[mid] - 1000) ? (int64_t)c : mid;
        paged = llabs((long long)k - 100000) < llabs((long long)counts[paged] - 100000) ? (int64_t)c
                                                                                        : paged;
        light = light == 0 && k == 2 ? (int64_t)c : light;
    }
    ASSERT(light != 0);
    uint64_t log_before = bench_file_bytes(dir, "log");
    uint64_t table_before = bench_file_bytes(dir, "table");
    printf("bench_index_store: %llu busy-day events applied in batches of %u in %.1f s\n",
           (unsigned long long)applied, BATCH, apply_s);
    printf("customers: heaviest %lld (%u orders), mid %lld (%u), light %lld (%u), paged %lld "
           "(%u)\n",
           (long long)heavy, counts[heavy], (long long)mid, counts[mid], (long long)light,
           counts[light], (long long)paged, counts[paged]);
    /* The unsealed log and its table, kept to measure "before" again after compaction. */
    char keep[DS_PATH_MAX];
    snprintf(keep, sizeof(keep), "%s/before", base);
    ASSERT(ds_mkdir_p(keep) == 0);
    char from[DS_PATH_MAX + 16];
    char to[DS_PATH_MAX + 16];
    const char *files[] = {"FORMAT", "log", "table"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(from, sizeof(from), "%s/%s", dir, files[i]);
        snprintf(to, sizeof(to), "%s/%s", keep, files[i]);
        copy_file(from, to);
    }
    g = store_open(dir);
    struct index_compact_stats stats;
    ASSERT(index_compact(g, &stats) == 0);
    index_close(g);
    uint64_t log_after = bench_file_bytes(dir, "log");
    uint64_t table_after = bench_file_bytes(dir, "table");
    printf("compaction: %.2f s\n", stats.seconds);
    printf("index bytes per event: before %.2f (log %.2f + table %.2f), after %.2f (log %.2f + "
           "table %.2f); ratio %.3f\n",
           (double)(log_before + table_before) / (double)applied,
           (double)log_before / (double)applied, (double)table_before / (double)applied,
           (double)(log_after + table_after) / (double)applied, (double)log_after / (double)applied,
           (double)table_after / (double)applied,
           (double)(log_after + table_after) / (double)(log_before + table_before));
    int64_t customers[3] = {heavy, mid, light};
    const char *names[3] = {"heaviest", "mid", "light"};
    uint64_t *ns = malloc(QUERIES * sizeof(*ns));
    ASSERT(ns != NULL);
    struct figures before[2];
    struct figures after[2];
    for (int round = 0; round < 2; round++) {
        struct index *b = store_open(keep);
        measure(b, customers, paged, &before[round], ns);
        index_close(b);
        struct index *a = store_open(dir);
        measure(a, customers, paged, &after[round], ns);
        index_close(a);
    }
    for (int round = 0; round < 2; round++) {
        printf("round %d\n", round + 1);
        for (int c = 0; c < 3; c++) {
            printf("  newest 10, %-8s: before p50 %.1f p99 %.1f us; after p50 %.1f p99 %.1f us; "
                   "p99 after/before %.2f\n",
                   names[c], before[round].lat[c].p50_us, before[round].lat[c].p99_us,
                   after[round].lat[c].p50_us, after[round].lat[c].p99_us,
                   after[round].lat[c].p99_us / before[round].lat[c].p99_us);
        }
        printf("  paging %llu orders: before 100/page %.1f ms, 1000/page %.1f ms (x%.2f); after "
               "100/page %.1f ms, 1000/page %.1f ms (x%.2f)\n",
               (unsigned long long)before[round].deep_entries, before[round].deep_s * 1e3,
               before[round].onepass_s * 1e3, before[round].deep_s / before[round].onepass_s,
               after[round].deep_s * 1e3, after[round].onepass_s * 1e3,
               after[round].deep_s / after[round].onepass_s);
    }
    free(ns);
    free(counts);
    free(batch);
    if (temp) {
        bench_remove_tree(base);
    }
    return 0;
}
