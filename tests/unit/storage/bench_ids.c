/*
 * bench_ids: the orders-by-id store (storage/ids.c) at N orders (default 1M; first argument).
 *
 * Lives beside the unit test, not in bench/, because storage/ids.h is private to storage/ and
 * scripts/check-includes.sh lets only tests/ reach a folder's private headers. Fixed seed.
 * Measures, on the plain sync backend in a scratch directory under /tmp:
 *   - put rate: N puts of distinct orders (half integer, half string ids; two small items),
 *     committed (write + fdatasync) every 256k orders, commits included;
 *   - bytes on disk per record and keydir bytes per order after the puts;
 *   - replay: a reader's open of the committed log;
 *   - hit and miss lookups: 1M gets of random held ids and of ids never put, ns per lookup,
 *     the median of 5 runs (hits read the record through storage_io: the page cache here);
 *   - the same store sealed (ids_seal: one day file), reopened by a reader: the open, and 100k
 *     hits (each reads and decompresses one block) and misses (range and bloom filter).
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/ids.h"
#include "storage/storage.h"

#define BENCH_RUNS 5
#define BENCH_LOOKUPS 1000000u
#define BENCH_SEALED_LOOKUPS 100000u
#define BENCH_COMMIT_ORDERS (256u * 1024)
#define BENCH_SEED 20261202u

static struct ds_id bench_id(uint64_t k)
{
    uint64_t x = ds_mix64(BENCH_SEED + k) >> 2;
    struct ds_id id = {0};
    if (k % 2 == 0) {
        id.value = (int64_t)x + 1;
    } else {
        id.is_string = true;
        id.len = (uint8_t)snprintf(id.text, sizeof(id.text), "ORD-%016llx", (unsigned long long)x);
    }
    return id;
}

static struct storage_order bench_record(uint64_t k, const uint8_t *items, uint16_t items_bytes)
{
    struct storage_order r = {0};
    r.order_id = bench_id(k);
    r.has_version = true;
    r.version = (int64_t)(k % 5);
    r.ts_ms = 1764633600000LL + (int64_t)(k % 86400000);
    r.day = ds_day_from_ms(r.ts_ms);
    r.shard = (uint32_t)(k % 4);
    memcpy(r.status, "paid", 4);
    r.status_len = 4;
    r.amount_units = (int64_t)(k % 100000) * 100;
    r.customer_id.value = (int64_t)(k % 50000) + 1;
    r.items = items;
    r.items_bytes = items_bytes;
    r.versions_seen = 1;
    return r;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ns per lookup of BENCH_LOOKUPS ids k = first + random below n (held or not), the median of
 * BENCH_RUNS; the ids are made before the clock starts, so only ids_get is timed. */
static double lookup_ns(struct ids *ids, uint64_t first, uint64_t n, int want, uint8_t *scratch,
                        uint64_t lookups)
{
    struct ds_id *keys = malloc(lookups * sizeof(*keys));
    ASSERT(keys != NULL);
    double runs[BENCH_RUNS];
    for (int run = 0; run < BENCH_RUNS; run++) {
        for (uint64_t j = 0; j < lookups; j++) {
            keys[j] = bench_id(first + ds_mix64(j + (uint64_t)run * lookups) % n);
        }
        uint64_t start = ds_clock_ns();
        for (uint64_t j = 0; j < lookups; j++) {
            struct storage_order rec;
            int rc = ids_get(ids, &keys[j], &rec, scratch, IDS_RECORD_BYTES_MAX);
            ASSERT(rc == want);
        }
        runs[run] = (double)(ds_clock_ns() - start) / (double)lookups;
    }
    free(keys);
    qsort(runs, BENCH_RUNS, sizeof(runs[0]), compare_double);
    return runs[BENCH_RUNS / 2];
}

static void put_all(struct storage_io *io, const char *dir, uint64_t n, uint64_t *len)
{
    static const uint8_t items[] = {2, 4, 'S', 'K', 'U', '1', 1, 5, 'S', 'K', 'U', '2', '2', 3};
    struct ids *ids = NULL;
    ASSERT(ids_open(io, dir, 0, false, &ids) == 0);
    uint64_t start = ds_clock_ns();
    for (uint64_t k = 0; k < n; k++) {
        struct storage_order r = bench_record(k, items, sizeof(items));
        ASSERT(ids_put(ids, &r) == 0);
        if ((k + 1) % BENCH_COMMIT_ORDERS == 0 || k + 1 == n) {
            ASSERT(ids_queue(ids, len) == 0);
            ASSERT(io->ops->flush(io) == 0);
            ids_committed(ids, *len);
        }
    }
    double seconds = (double)(ds_clock_ns() - start) / 1e9;
    printf("put: %llu orders in %.2f s = %.0f puts/s (commits of %u included)\n",
           (unsigned long long)n, seconds, (double)n / seconds, BENCH_COMMIT_ORDERS);
    printf("keydir: %llu bytes = %.1f bytes/order\n", (unsigned long long)ids_keydir_bytes(ids),
           (double)ids_keydir_bytes(ids) / (double)n);
    ids_close(ids);
    printf("disk: %llu bytes = %.1f bytes/record\n", (unsigned long long)*len,
           (double)*len / (double)n);
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    if (n == 0 || n > IDS_ORDERS_MAX / 2) {
        fprintf(stderr, "usage: bench_ids [orders, 1..%llu]\n",
                (unsigned long long)IDS_ORDERS_MAX / 2);
        return 2;
    }
    char dir[] = "/tmp/bench-ids-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct storage_io *io = NULL;
    ASSERT(storage_io_create(STORAGE_IO_SYNC, &io) == 0);
    uint64_t len = 0;
    put_all(io, dir, n, &len);
    struct ids *ids = NULL;
    uint64_t start = ds_clock_ns();
    ASSERT(ids_open(io, dir, len, true, &ids) == 0);
    double replay = (double)(ds_clock_ns() - start) / 1e9;
    ASSERT(ids_count(ids) == n);
    printf("replay: %.2f s = %.0f records/s\n", replay, (double)n / replay);
    uint8_t *scratch = malloc(IDS_RECORD_BYTES_MAX);
    ASSERT(scratch != NULL);
    /* Held ids are k < n; ids never put are k >= n (the same generator, further on). */
    printf("get hit: %.0f ns (median of %d runs of %u)\n",
           lookup_ns(ids, 0, n, 0, scratch, BENCH_LOOKUPS), BENCH_RUNS, BENCH_LOOKUPS);
    printf("get miss: %.0f ns (median of %d runs of %u)\n",
           lookup_ns(ids, n, BENCH_LOOKUPS * BENCH_RUNS, -ENOENT, scratch, BENCH_LOOKUPS),
           BENCH_RUNS, BENCH_LOOKUPS);
    ids_close(ids);
    /* Sealed: the writer moves every order to the day's file; a reader opens the file's index
     * and filter only. */
    ASSERT(ids_open(io, dir, len, false, &ids) == 0);
    start = ds_clock_ns();
    ASSERT(ids_seal(ids, 0) == 0);
    double seal = (double)(ds_clock_ns() - start) / 1e9;
    printf("seal: %.2f s, %llu bytes on disk = %.1f bytes/order in %u files\n", seal,
           (unsigned long long)ids_disk_bytes(ids), (double)ids_disk_bytes(ids) / (double)n,
           ids_sealed_files(ids));
    ids_close(ids);
    start = ds_clock_ns();
    ASSERT(ids_open(io, dir, len, true, &ids) == 0);
    printf("sealed open: %.3f s, %.1f bytes/order in memory\n",
           (double)(ds_clock_ns() - start) / 1e9, (double)ids_memory_bytes(ids) / (double)n);
    ASSERT(ids_count(ids) == n);
    printf("sealed get hit: %.0f ns (median of %d runs of %u)\n",
           lookup_ns(ids, 0, n, 0, scratch, BENCH_SEALED_LOOKUPS), BENCH_RUNS,
           BENCH_SEALED_LOOKUPS);
    printf("sealed get miss: %.0f ns (median of %d runs of %u)\n",
           lookup_ns(ids, n, BENCH_SEALED_LOOKUPS * BENCH_RUNS, -ENOENT, scratch,
                     BENCH_SEALED_LOOKUPS),
           BENCH_RUNS, BENCH_SEALED_LOOKUPS);
    free(scratch);
    ids_close(ids);
    io->ops->destroy(io);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
