/*
 * bench_index_cursor [APPLIES] [DIR]: what the builder's cursor costs the index per apply, for
 * the cursor of 1 day x 4 shards (96 bytes) and of 90 days x 64 shards (115 KB) followed. Each
 * of APPLIES (default 2000) applies carries 256 entries and a cursor in the builder's format
 * ("GSC1", sequence, count, 20 bytes per partition) whose sequence and last day's four busiest
 * positions moved, as a builder round at 2,500 events/s does. Printed per shape: log bytes per
 * apply, the cursor's share per apply and per event (the log's growth over that of the same
 * applies with an empty cursor, measured alongside), and the median and p99 of index_apply in
 * microseconds. The shapes alternate apply by apply across three stores, so all see the same
 * machine. Only the public API is used, so the same source measures an older tree of the index.
 * DIR (default a temporary directory) is removed at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "index/index.h"

#define ENTRIES 256u
#define TS0 1768953600000LL /* 2026-01-21T00:00:00Z */
#define SHAPES 3u           /* empty cursor, 1 x 4, 90 x 64 */

struct shape {
    const char *name;
    uint32_t days;
    uint32_t shards;
    char dir[DS_PATH_MAX];
    struct index *g;
    uint8_t *cursor;
    size_t cursor_len;
    uint64_t *ns;
    uint64_t log_start;
};

static void cursor_init(struct shape *s)
{
    uint32_t count = s->days * s->shards;
    s->cursor_len = count > 0 ? 16u + (size_t)count * 20u : 0;
    s->cursor = calloc(1, s->cursor_len + 1);
    ASSERT(s->cursor != NULL);
    if (count == 0) {
        return;
    }
    memcpy(s->cursor, "GSC1", 4);
    ds_put_le32(s->cursor + 12, count);
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *p = s->cursor + 16 + (size_t)i * 20;
        ds_put_le32(p, 20000u + i / s->shards);
        ds_put_le32(p + 4, i % s->shards);
        ds_put_le32(p + 8, 1);
        ds_put_le64(p + 12, 4096u * (i + 1u));
    }
}

/* The round a: sequence a, four positions of the last day moved on. */
static void cursor_round(struct shape *s, uint64_t a)
{
    if (s->cursor_len == 0) {
        return;
    }
    ds_put_le64(s->cursor + 4, a);
    uint32_t count = s->days * s->shards;
    for (uint32_t k = 0; k < 4 && k < count; k++) {
        uint8_t *p = s->cursor + 16 + (size_t)(count - 1 - (uint32_t)((a + k) % s->shards)) * 20;
        ds_put_le64(p + 12, ds_get_le64(p + 12) + 977u * (k + 1u));
    }
}

static void entries_make(struct index_entry *e, uint64_t a)
{
    for (uint32_t i = 0; i < ENTRIES; i++) {
        memset(&e[i], 0, sizeof(e[i]));
        e[i].customer_id.value = (int64_t)(1u + (a * 7919u + i * 104729u) % 100000u);
        e[i].order_id.value = (int64_t)(1u + a * ENTRIES + i);
        e[i].ts_ms = TS0 + (int64_t)(a * ENTRIES + i) * 10;
        e[i].day = ds_day_from_ms(e[i].ts_ms);
        e[i].status_len = 4;
        memcpy(e[i].status, "paid", 4);
        e[i].amount_units = 1999;
    }
}

int main(int argc, char **argv)
{
    uint64_t applies = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000u;
    char base[DS_PATH_MAX - 16];
    if (argc > 2) {
        snprintf(base, sizeof(base), "%s", argv[2]);
    } else {
        snprintf(base, sizeof(base), "/tmp/bench-index-cursor-XXXXXX");
        ASSERT(mkdtemp(base) != NULL);
    }
    struct shape shapes[SHAPES] = {
        {.name = "empty", .days = 0, .shards = 0},
        {.name = "1 day x 4 shards", .days = 1, .shards = 4},
        {.name = "90 days x 64 shards", .days = 90, .shards = 64},
    };
    struct index_entry *entries = calloc(ENTRIES, sizeof(*entries));
    ASSERT(entries != NULL);
    for (uint32_t k = 0; k < SHAPES; k++) {
        struct shape *s = &shapes[k];
        snprintf(s->dir, sizeof(s->dir), "%s/gsi-%u", base, k);
        struct index_config cfg;
        index_config_defaults(&cfg);
        cfg.dir = s->dir;
        cfg.batch_entries_max = ENTRIES;
        cfg.table_slots_log2 = 18;
        ASSERT(index_open(&cfg, &s->g) == 0);
        cursor_init(s);
        s->ns = calloc(applies, sizeof(*s->ns));
        ASSERT(s->ns != NULL);
        /* a first apply that writes the whole cursor once, outside the figures */
        entries_make(entries, 0);
        ASSERT(index_apply(s->g, entries, ENTRIES, s->cursor, s->cursor_len) == 0);
        s->log_start = bench_file_bytes(s->dir, "log");
    }
    for (uint64_t a = 1; a <= applies; a++) {
        entries_make(entries, a);
        for (uint32_t k = 0; k < SHAPES; k++) {
            struct shape *s = &shapes[(k + a) % SHAPES];
            cursor_round(s, a);
            uint64_t t0 = bench_now_ns();
            ASSERT(index_apply(s->g, entries, ENTRIES, s->cursor, s->cursor_len) == 0);
            s->ns[a - 1] = bench_now_ns() - t0;
        }
    }
    double empty_per_apply =
        (double)(bench_file_bytes(shapes[0].dir, "log") - shapes[0].log_start) / (double)applies;
    printf("bench_index_cursor: %llu applies of %u entries each\n", (unsigned long long)applies,
           ENTRIES);
    for (uint32_t k = 0; k < SHAPES; k++) {
        struct shape *s = &shapes[k];
        double per_apply =
            (double)(bench_file_bytes(s->dir, "log") - s->log_start) / (double)applies;
        double cursor_share = per_apply - empty_per_apply;
        qsort(s->ns, applies, sizeof(*s->ns), bench_compare_u64);
        printf("  %-20s cursor %7zu B: log %9.1f B/apply, over an empty cursor %9.1f B/apply = "
               "%7.3f B/event; index_apply p50 %7.1f us, p99 %7.1f us\n",
               s->name, s->cursor_len, per_apply, cursor_share, cursor_share / ENTRIES,
               (double)s->ns[applies / 2] / 1e3, (double)s->ns[applies * 99 / 100] / 1e3);
        index_close(s->g);
        free(s->cursor);
        free(s->ns);
    }
    free(entries);
    bench_remove_tree(base);
    return 0;
}
