/*
 * Benchmark: the order lookup (target: p99 <= 100 us over HTTP). It builds a data
 * directory of the orders model with N orders through the storage API (integer ids 1..N over 28
 * days, one in five with 1-3 items, then a share of them updated once: pending -> paid, one in
 * ten of those to another day), starts the query service in-process on 127.0.0.1:0 and asks GET
 * /v1/orders/{id} sequentially on one keep-alive connection: hits (ids drawn from 1..N) and
 * misses (ids above N, the new orders a lookup-before-insert would ask for). Baseline in the
 * same run: storage_order_get on a reader handle for the same ids, and the ratio. Every answer
 * is checked (200 naming the id, 404), so a wrong answer cannot look fast. Second baseline: the
 * loopback floor (bench.h), a bare TCP round trip on this machine, which no HTTP answer beats.
 *
 * Usage: bench_http_order [orders=1000000] [iterations=20000] [update_share=0.3] [seed=14]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define BENCH_DAYS 28
#define BENCH_FIRST_DAY 20454 /* 2026-01-01 */
#define BENCH_CUSTOMERS 100000u
#define BENCH_COMMIT_EVERY 65536u

/* splitmix64: the fixed-seed stream every choice comes from. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Canonical items (common.h) of 1-3 items "sku-K" into dst; returns the length. */
static uint16_t make_items(uint64_t order, uint8_t *dst)
{
    uint32_t count = 1 + (uint32_t)(order % 3);
    uint16_t n = 0;
    dst[n++] = (uint8_t)count;
    for (uint32_t i = 0; i < count; i++) {
        char product[16];
        int len = snprintf(product, sizeof(product), "sku-%u", (unsigned)((order * 7 + i) % 5000));
        ASSERT(len > 0 && len < (int)sizeof(product));
        dst[n++] = (uint8_t)len;
        memcpy(dst + n, product, (size_t)len);
        n = (uint16_t)(n + len);
        dst[n++] = (uint8_t)(1 + i); /* quantity 1..3: one varint byte */
    }
    return n;
}

/* Routes and appends; commits and appends again when the uncommitted versions are full. */
static void append(struct storage *st, struct shard_map *map, const struct ds_event *e)
{
    int32_t day = 0;
    uint32_t shard = 0;
    ASSERT(ingest_route(map, e, &day, &shard) == 0);
    int rc = storage_append(st, day, shard, e, NULL);
    if (rc == -EAGAIN) {
        ASSERT(storage_commit(st) == 0);
        rc = storage_append(st, day, shard, e, NULL);
    }
    ASSERT(rc == 0);
}

/* Order id's first version: its fields come from its own random stream, so an update can
 * repeat them and change only what it means to. */
static struct ds_event order_event(uint64_t id, uint64_t seed, uint8_t *items)
{
    uint64_t state = seed ^ (id * 0xd1b54a32d192ed03ull);
    uint64_t *rng = &state;
    struct ds_event e = {.order_id = {.value = (int64_t)id},
                         .customer_id = {.value = 1 + (int64_t)(id % BENCH_CUSTOMERS)},
                         .ts_ms = (BENCH_FIRST_DAY + (int64_t)(next_random(rng) % BENCH_DAYS)) *
                                      DS_DAY_MS +
                                  (int64_t)(next_random(rng) % DS_DAY_MS),
                         .amount_units = (int64_t)(next_random(rng) % 1000000),
                         .status_len = 7};
    memcpy(e.status, "pending", 7);
    if (id % 5 == 0) {
        e.items_bytes = make_items(id, items);
        e.items = items;
    }
    return e;
}

/* N orders, then round(N * share) updates of distinct random orders. Returns the seconds. */
static double build(const char *dir, uint64_t orders, double share, uint64_t seed)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.model = STORAGE_MODEL_ORDERS;
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    ASSERT(storage_open(&cfg, &st) == 0);
    ASSERT(storage_model(st) == STORAGE_MODEL_ORDERS);
    ASSERT(shard_map_open(dir, SHARD_COUNT_DEFAULT, 0, &map) == 0);
    uint8_t items[DS_ITEMS_BYTES_MAX];
    uint64_t t0 = ds_clock_ns();
    for (uint64_t id = 1; id <= orders; id++) {
        struct ds_event e = order_event(id, seed, items);
        append(st, map, &e);
        if (id % BENCH_COMMIT_EVERY == 0) {
            ASSERT(storage_commit(st) == 0);
        }
    }
    uint64_t updates = (uint64_t)((double)orders * share + 0.5);
    for (uint64_t k = 0; k < updates; k++) { /* a stride coprime to N visits distinct orders */
        uint64_t id = 1 + (k * 2654435761ull) % orders;
        struct ds_event e = order_event(id, seed, items); /* its fields again, then the change */
        e.status_len = 4;
        memcpy(e.status, "paid", 4);
        if (k % 10 == 0) {
            e.ts_ms += DS_DAY_MS;
        }
        append(st, map, &e);
        if ((k + 1) % BENCH_COMMIT_EVERY == 0) {
            ASSERT(storage_commit(st) == 0);
        }
    }
    ASSERT(storage_commit(st) == 0);
    struct storage_order_stats stats;
    storage_order_stats(st, &stats);
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    printf("built %llu orders (%llu created, %llu applied) in %.1f s\n",
           (unsigned long long)stats.orders, (unsigned long long)stats.created,
           (unsigned long long)stats.applied, seconds);
    ASSERT(stats.orders == orders);
    shard_map_close(map);
    storage_close(st);
    return seconds;
}

/* The ids asked: hits from 1..N, misses above N. */
static uint64_t *draw_ids(uint64_t n, uint64_t orders, bool hits, uint64_t seed)
{
    uint64_t *ids = calloc(n, sizeof(*ids));
    ASSERT(ids != NULL);
    uint64_t rng = seed * 31 + (hits ? 1 : 2);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = next_random(&rng);
        ids[i] = hits ? 1 + r % orders : orders + 1 + r % (1ull << 40);
    }
    return ids;
}

static struct bench_latency measure_inprocess(const char *dir, const uint64_t *ids, uint64_t n,
                                              bool hits, double *load_s)
{
    struct storage *st = NULL;
    ASSERT(storage_open_reader(dir, &st) == 0);
    void *scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    uint64_t *ns = calloc(n, sizeof(*ns));
    ASSERT(scratch != NULL && ns != NULL);
    struct storage_order o;
    struct ds_id probe = {.value = (int64_t)ids[0]};
    uint64_t t0 = ds_clock_ns();
    int rc = storage_order_get(st, &probe, &o, scratch, STORAGE_ORDER_SCRATCH_BYTES);
    *load_s = (double)(ds_clock_ns() - t0) / 1e9; /* the first lookup loads the store */
    ASSERT(rc == (hits ? 0 : -ENOENT));
    for (uint64_t i = 0; i < n; i++) {
        struct ds_id id = {.value = (int64_t)ids[i]};
        uint64_t t1 = ds_clock_ns();
        rc = storage_order_get(st, &id, &o, scratch, STORAGE_ORDER_SCRATCH_BYTES);
        ns[i] = ds_clock_ns() - t1;
        ASSERT(rc == (hits ? 0 : -ENOENT));
        ASSERT(!hits || o.order_id.value == id.value);
    }
    struct bench_latency l = bench_latency_of(ns, n);
    free(ns);
    free(scratch);
    storage_close(st);
    return l;
}

static struct bench_latency measure_http(const char *address, const uint64_t *ids, uint64_t n,
                                         bool hits)
{
    int fd = bench_http_connect(address);
    static char buf[1 << 16];
    uint64_t *ns = calloc(n, sizeof(*ns));
    ASSERT(ns != NULL);
    int want = hits ? 200 : 404;
    for (uint64_t i = 0; i < 16; i++) { /* warm-up: every service reader loads its store */
        char path[64];
        snprintf(path, sizeof(path), "/v1/orders/%llu", (unsigned long long)ids[i % n]);
        int status = 0;
        (void)bench_http_request(fd, path, buf, sizeof(buf), &status);
        ASSERT(status == want);
    }
    for (uint64_t i = 0; i < n; i++) {
        char path[64];
        char expect[48];
        snprintf(path, sizeof(path), "/v1/orders/%llu", (unsigned long long)ids[i]);
        snprintf(expect, sizeof(expect), "\"order_id\":%llu%c", (unsigned long long)ids[i],
                 hits ? ',' : '}'); /* a hit's document, a miss's error naming it */
        int status = 0;
        uint64_t t0 = ds_clock_ns();
        const char *body = bench_http_request(fd, path, buf, sizeof(buf), &status);
        ns[i] = ds_clock_ns() - t0;
        if (status != want || strstr(body, expect) == NULL) {
            fprintf(stderr, "GET %s: %d %.300s\n", path, status, body);
            exit(1);
        }
    }
    close(fd);
    struct bench_latency l = bench_latency_of(ns, n);
    free(ns);
    return l;
}

static void report(const char *what, const struct bench_latency *http,
                   const struct bench_latency *inproc, const struct bench_latency *floor)
{
    printf("  %-6s HTTP p50 %6.1f us  p99 %6.1f us  max %8.1f us | in-process p50 %5.2f us  p99 "
           "%5.2f us | p99 / loopback floor p99 %4.2f  %s\n",
           what, http->p50_us, http->p99_us, http->max_us, inproc->p50_us, inproc->p99_us,
           http->p99_us / (floor->p99_us > 0 ? floor->p99_us : 1),
           http->p99_us <= 100.0 ? "(p99 <= 100 us: met)" : "(p99 <= 100 us: MISSED)");
}

int main(int argc, char **argv)
{
    uint64_t orders = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ull;
    uint64_t iterations = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000ull;
    double share = argc > 3 ? strtod(argv[3], NULL) : 0.3;
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 14;
    ASSERT(orders >= 1 && orders <= (1ull << 40));
    ASSERT(share >= 0 && share <= 1);
    iterations = iterations < 16 ? 16 : iterations;
    printf("bench_http_order: %llu orders (1 in 5 with items), %.0f%% updated once, %llu "
           "sequential lookups each for hits and misses on one keep-alive connection, 2 service "
           "threads, seed %llu\n",
           (unsigned long long)orders, share * 100, (unsigned long long)iterations,
           (unsigned long long)seed);
    char dir[] = "/tmp/dayshard-bench-order-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    (void)build(dir, orders, share, seed);
    uint64_t *hit_ids = draw_ids(iterations, orders, true, seed);
    uint64_t *miss_ids = draw_ids(iterations, orders, false, seed);
    double load_s = 0;
    struct bench_latency in_hit = measure_inprocess(dir, hit_ids, iterations, true, &load_s);
    printf("store load on a reader's first lookup: %.2f s\n", load_s);
    struct bench_latency in_miss = measure_inprocess(dir, miss_ids, iterations, false, &load_s);
    struct query_http_config hcfg = {.data_dir = dir, .listen = "127.0.0.1:0"};
    struct query_http *h = NULL;
    ASSERT(query_http_start(&hcfg, &h) == 0);
    struct bench_latency http_hit = measure_http(query_http_address(h), hit_ids, iterations, true);
    struct bench_latency http_miss =
        measure_http(query_http_address(h), miss_ids, iterations, false);
    struct bench_latency floor = bench_loopback_floor(iterations);
    bench_wakeup_note();
    printf("  loopback floor (bare TCP round trip, same run) p50 %6.1f us  p99 %6.1f us\n",
           floor.p50_us, floor.p99_us);
    report("hits", &http_hit, &in_hit, &floor);
    report("misses", &http_miss, &in_miss, &floor);
    query_http_stop(h);
    free(hit_ids);
    free(miss_ids);
    bench_remove_tree(dir);
    return 0;
}
