/*
 * bench_gsi_store: which store holds the by-customer index (issue 5, DESIGN.md section 9).
 *
 * Usage: bench_gsi_store [events] [batch] [queries] [candidates]
 * (defaults 10,000,000 / 100,000 / 20,000 / all; wal-off always runs, it picks the customers)
 *
 * For the busy-day and the hot-customer workloads (fixed seed), and for each candidate store,
 * in one run: apply throughput (entries/s; a batch is one group commit's worth of entries plus
 * the builder's cursor, applied atomically), bytes per entry on disk after a full compaction,
 * peak RSS of the candidate (VmHWM reset through /proc/self/clear_refs before each one), and the
 * latency of "newest 10 orders of customer C" for a heavy customer (the one whose order count
 * is closest to 50,000) and a light one (one order), p50/p99/max over `queries` queries each,
 * measured right after the last apply (background compactions still running, as in a live
 * index catching up) and again after a full compaction (the steady state).
 *
 * Candidates (all RocksDB 7.8 through its C API, with the memory bounds and filters of the
 * module: a 64 MiB block cache holding index and filter blocks too, two 64 MiB write buffers,
 * prefix Bloom filters on the 9-byte customer prefix):
 * - wal-off: one WriteBatch per group commit (entries + cursor), WAL disabled. Crash-safe
 *   because a flushed memtable holds whole batches, so the store recovers to a batch prefix.
 * - wal-off-sorted: the same, the batch sorted by key first (memtable inserts in key order).
 * - wal-on: the same with the WAL on but never synced (a kill -9 loses nothing, a power cut
 *   loses an unsynced tail, again a batch prefix); it lets a secondary instance see every
 *   batch at once instead of only flushed memtables.
 * - sst-ingest: each batch sorted in memory, written as one SST file (cursor included) and
 *   ingested (IngestExternalFile is atomic and needs no WAL). This is the "purpose-built" idea
 *   at its cheapest: a sorted run per batch appended to the tree, without a memtable.
 * - append-log: the entries appended to one file and fdatasync'ed per batch, no index at all:
 *   an upper bound for any Bitcask/FASTER-like log, which must still pay for its index on top.
 *
 * The key layout is the module's (query/gsi/gsi.c) for integer ids: customer tag + big-endian
 * id, inverted big-endian ts, order id tag + inverted big-endian id; the value is status length,
 * status, zigzag varint amount. The module's header is private to query/, so the layout is
 * repeated here rather than included.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/common.h"
#include "ingest/ingest.h"

#define KEY_BYTES 27
#define VALUE_BYTES_MAX (1 + DS_STATUS_BYTES_MAX + 10)
#define HEAVY_TARGET 50000u

enum candidate {
    CAND_WAL_OFF = 0,
    CAND_WAL_OFF_SORTED,
    CAND_WAL_ON,
    CAND_SST,
    CAND_LOG,
    CAND_COUNT
};
static const char *const candidate_names[CAND_COUNT] = {"wal-off", "wal-off-sorted", "wal-on",
                                                        "sst-ingest", "append-log"};

struct record {
    uint8_t key[KEY_BYTES];
    uint8_t value_len;
    uint8_t value[VALUE_BYTES_MAX];
};

struct result {
    double entries_per_s;
    double batch_median_s;
    double bytes_per_entry;
    double rss_mib;
    double heavy_p50_us, heavy_p99_us, heavy_max_us;
    double light_p50_us, light_p99_us, light_max_us;
    double compacted_heavy_p50_us, compacted_heavy_p99_us, compacted_heavy_max_us;
    double compacted_light_p50_us, compacted_light_p99_us, compacted_light_max_us;
};

static void be64_put(uint8_t *dst, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        dst[i] = (uint8_t)v;
        v >>= 8;
    }
}

static void customer_prefix(int64_t customer, uint8_t dst[9])
{
    dst[0] = 0x01;
    be64_put(dst + 1, (uint64_t)customer);
}

static void record_encode(const struct ds_event *e, struct record *r)
{
    ASSERT(!e->customer_id.is_string);
    ASSERT(!e->order_id.is_string);
    customer_prefix(e->customer_id.value, r->key);
    be64_put(r->key + 9, ~(uint64_t)e->ts_ms);
    r->key[17] = 0xFE;
    be64_put(r->key + 18, ~(uint64_t)e->order_id.value);
    size_t n = 0;
    r->value[n++] = e->status_len;
    memcpy(r->value + n, e->status, e->status_len);
    n += e->status_len;
    uint64_t zz = ((uint64_t)e->amount_units << 1) ^ (uint64_t)(e->amount_units >> 63);
    while (zz >= 0x80) {
        r->value[n++] = (uint8_t)(zz | 0x80);
        zz >>= 7;
    }
    r->value[n++] = (uint8_t)zz;
    r->value_len = (uint8_t)n;
}

static int record_compare(const void *a, const void *b)
{
    return memcmp(((const struct record *)a)->key, ((const struct record *)b)->key, KEY_BYTES);
}

static void rocks_check(char *err, const char *what)
{
    if (err != NULL) {
        fprintf(stderr, "bench_gsi_store: %s: %s\n", what, err);
        rocksdb_free(err);
        abort();
    }
}

static double peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ASSERT(f != NULL);
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtod(line + 6, NULL);
        }
    }
    fclose(f);
    return kib / 1024.0;
}

static void peak_rss_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f != NULL) {
        fputs("5", f);
        fclose(f);
    }
}

struct store {
    enum candidate cand;
    const char *dir;
    rocksdb_t *db;
    rocksdb_options_t *options;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_writeoptions_t *write;
    rocksdb_envoptions_t *env;
    rocksdb_ingestexternalfileoptions_t *ingest;
    int log_fd;
    uint64_t batches;
};

static void store_open(struct store *s, enum candidate cand, const char *dir)
{
    memset(s, 0, sizeof(*s));
    s->cand = cand;
    s->dir = dir;
    s->log_fd = -1;
    int rc = ds_mkdir_p(dir);
    ASSERT(rc == 0);
    if (cand == CAND_LOG) {
        char path[DS_PATH_MAX];
        snprintf(path, sizeof(path), "%s/log", dir);
        s->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT(s->log_fd >= 0);
        return;
    }
    s->cache = rocksdb_cache_create_lru(64u << 20);
    s->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(s->table, s->cache);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(s->table, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(s->table, 1);
    rocksdb_block_based_options_set_filter_policy(s->table,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    s->options = rocksdb_options_create();
    rocksdb_options_set_prefix_extractor(s->options, rocksdb_slicetransform_create_fixed_prefix(9));
    rocksdb_options_set_block_based_table_factory(s->options, s->table);
    rocksdb_options_set_create_if_missing(s->options, 1);
    rocksdb_options_set_write_buffer_size(s->options, 64u << 20);
    rocksdb_options_set_max_write_buffer_number(s->options, 2);
    rocksdb_options_set_max_background_jobs(s->options, 2);
    rocksdb_options_set_compression(s->options, rocksdb_lz4_compression);
    rocksdb_options_set_bottommost_compression(s->options, rocksdb_zstd_compression);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(s->options, 1);
    rocksdb_options_set_max_open_files(s->options, 512);
    rocksdb_options_set_info_log_level(s->options, 2);
    char *err = NULL;
    s->db = rocksdb_open(s->options, dir, &err);
    rocks_check(err, "open");
    s->write = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(s->write, cand != CAND_WAL_ON);
    s->env = rocksdb_envoptions_create();
    s->ingest = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(s->ingest, 1);
}

static void store_apply_sst(struct store *s, struct record *recs, size_t n, uint64_t cursor)
{
    qsort(recs, n, sizeof(*recs), record_compare);
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/ingest-%" PRIu64 ".sst", s->dir, s->batches);
    rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(s->env, s->options);
    char *err = NULL;
    rocksdb_sstfilewriter_open(w, path, &err);
    rocks_check(err, "sst open");
    rocksdb_sstfilewriter_put(w, "\0cursor", 7, (const char *)&cursor, sizeof(cursor), &err);
    rocks_check(err, "sst put");
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && memcmp(recs[i].key, recs[i - 1].key, KEY_BYTES) == 0) {
            continue;
        }
        rocksdb_sstfilewriter_put(w, (const char *)recs[i].key, KEY_BYTES,
                                  (const char *)recs[i].value, recs[i].value_len, &err);
        rocks_check(err, "sst put");
    }
    rocksdb_sstfilewriter_finish(w, &err);
    rocks_check(err, "sst finish");
    rocksdb_sstfilewriter_destroy(w);
    const char *files[1] = {path};
    rocksdb_ingest_external_file(s->db, files, 1, s->ingest, &err);
    rocks_check(err, "ingest");
}

static void store_apply(struct store *s, struct record *recs, size_t n, uint64_t cursor)
{
    s->batches++;
    if (s->cand == CAND_LOG) {
        for (size_t i = 0; i < n; i++) {
            ssize_t w = write(s->log_fd, &recs[i], KEY_BYTES + 1u + recs[i].value_len);
            ASSERT(w > 0);
        }
        ssize_t w = write(s->log_fd, &cursor, sizeof(cursor));
        ASSERT(w == (ssize_t)sizeof(cursor));
        int rc = fdatasync(s->log_fd);
        ASSERT(rc == 0);
        return;
    }
    if (s->cand == CAND_SST) {
        store_apply_sst(s, recs, n, cursor);
        return;
    }
    if (s->cand == CAND_WAL_OFF_SORTED) {
        qsort(recs, n, sizeof(*recs), record_compare);
    }
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();
    for (size_t i = 0; i < n; i++) {
        rocksdb_writebatch_put(b, (const char *)recs[i].key, KEY_BYTES, (const char *)recs[i].value,
                               recs[i].value_len);
    }
    rocksdb_writebatch_put(b, "\0cursor", 7, (const char *)&cursor, sizeof(cursor));
    char *err = NULL;
    rocksdb_write(s->db, s->write, b, &err);
    rocks_check(err, "write");
    rocksdb_writebatch_destroy(b);
}

/* Newest 10 entries of the customer; returns how many were found. */
static int store_newest10(struct store *s, int64_t customer)
{
    uint8_t lower[9];
    uint8_t upper[9];
    customer_prefix(customer, lower);
    customer_prefix(customer + 1, upper);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)upper, sizeof(upper));
    rocksdb_readoptions_set_prefix_same_as_start(ro, 1);
    rocksdb_iterator_t *it = rocksdb_create_iterator(s->db, ro);
    int found = 0;
    int64_t sum = 0;
    for (rocksdb_iter_seek(it, (const char *)lower, sizeof(lower));
         rocksdb_iter_valid(it) && found < 10; rocksdb_iter_next(it)) {
        size_t klen = 0;
        size_t vlen = 0;
        const char *k = rocksdb_iter_key(it, &klen);
        (void)rocksdb_iter_value(it, &vlen);
        ASSERT(klen == KEY_BYTES);
        sum += (int64_t)vlen + k[26];
        found++;
    }
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    (void)sum;
    return found;
}

static void store_latency(struct store *s, int64_t customer, uint32_t expect, int queries,
                          double *p50, double *p99, double *max)
{
    double *lat = calloc((size_t)queries, sizeof(*lat));
    ASSERT(lat != NULL);
    for (int i = 0; i < queries; i++) {
        uint64_t t0 = ds_clock_ns();
        int found = store_newest10(s, customer);
        lat[i] = (double)(ds_clock_ns() - t0) / 1e3;
        ASSERT(found == (int)(expect < 10 ? expect : 10));
    }
    *p50 = bench_median(lat, queries);
    *p99 = lat[(size_t)((double)queries * 0.99)];
    *max = lat[queries - 1];
    free(lat);
}

static void store_compact(struct store *s)
{
    char *err = NULL;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    rocksdb_flush(s->db, fo, &err);
    rocks_check(err, "flush");
    rocksdb_flushoptions_destroy(fo);
    rocksdb_compact_range(s->db, NULL, 0, NULL, 0);
}

static uint64_t store_finish(struct store *s)
{
    if (s->cand == CAND_LOG) {
        struct stat st;
        int rc = fstat(s->log_fd, &st);
        ASSERT(rc == 0);
        close(s->log_fd);
        return (uint64_t)st.st_size;
    }
    uint64_t sst = 0;
    int rc = rocksdb_property_int(s->db, "rocksdb.total-sst-files-size", &sst);
    ASSERT(rc == 0);
    rocksdb_close(s->db);
    rocksdb_ingestexternalfileoptions_destroy(s->ingest);
    rocksdb_envoptions_destroy(s->env);
    rocksdb_writeoptions_destroy(s->write);
    rocksdb_options_destroy(s->options);
    rocksdb_block_based_options_destroy(s->table);
    rocksdb_cache_destroy(s->cache);
    return sst;
}

struct customers {
    uint32_t *orders; /* by integer customer id, 0..customers */
    int64_t heavy;
    int64_t light;
};

static void customers_pick(struct customers *c, uint64_t customers)
{
    c->heavy = 1;
    c->light = 0;
    uint64_t best = UINT64_MAX;
    for (uint64_t id = 1; id <= customers; id++) {
        uint32_t n = c->orders[id];
        uint64_t dist = n > HEAVY_TARGET ? n - HEAVY_TARGET : HEAVY_TARGET - n;
        if (dist < best) {
            best = dist;
            c->heavy = (int64_t)id;
        }
        if (c->light == 0 && n == 1) {
            c->light = (int64_t)id;
        }
    }
    ASSERT(c->light != 0);
}

static void run_candidate(enum ingest_profile profile, enum candidate cand, uint64_t events,
                          size_t batch, int queries, struct customers *cust, struct result *res)
{
    char dir[] = "/tmp/bench_gsi_store.XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct ingest_workload_config cfg;
    ingest_workload_defaults(&cfg);
    cfg.profile = profile;
    cfg.events = events;
    struct ingest_workload *w = NULL;
    int rc = ingest_workload_create(&cfg, &w);
    ASSERT(rc == 0);
    struct record *recs = calloc(batch, sizeof(*recs));
    size_t batch_count = (size_t)((events + batch - 1) / batch);
    double *batch_s = calloc(batch_count, sizeof(*batch_s));
    ASSERT(recs != NULL && batch_s != NULL);
    peak_rss_reset();
    struct store s;
    store_open(&s, cand, dir);
    double apply_s = 0;
    uint64_t applied = 0;
    size_t b = 0;
    for (bool more = true; more;) {
        size_t n = 0;
        struct ds_event e;
        while (n < batch && (more = ingest_workload_next(w, &e))) {
            record_encode(&e, &recs[n++]);
            if (cust->orders != NULL && cand == CAND_WAL_OFF) {
                cust->orders[e.customer_id.value]++;
            }
        }
        if (n == 0) {
            break;
        }
        uint64_t t0 = ds_clock_ns();
        store_apply(&s, recs, n, applied + n);
        batch_s[b] = (double)(ds_clock_ns() - t0) / 1e9;
        apply_s += batch_s[b++];
        applied += n;
    }
    res->entries_per_s = (double)applied / apply_s;
    res->batch_median_s = bench_median(batch_s, (int)b);
    if (cand == CAND_WAL_OFF) {
        customers_pick(cust, cfg.customers);
    }
    if (cand != CAND_LOG) {
        store_latency(&s, cust->heavy, cust->orders[cust->heavy], queries, &res->heavy_p50_us,
                      &res->heavy_p99_us, &res->heavy_max_us);
        store_latency(&s, cust->light, 1, queries, &res->light_p50_us, &res->light_p99_us,
                      &res->light_max_us);
        store_compact(&s);
        store_latency(&s, cust->heavy, cust->orders[cust->heavy], queries,
                      &res->compacted_heavy_p50_us, &res->compacted_heavy_p99_us,
                      &res->compacted_heavy_max_us);
        store_latency(&s, cust->light, 1, queries, &res->compacted_light_p50_us,
                      &res->compacted_light_p99_us, &res->compacted_light_max_us);
    }
    res->bytes_per_entry = (double)store_finish(&s) / (double)applied;
    res->rss_mib = peak_rss_mib();
    ingest_workload_destroy(w);
    free(recs);
    free(batch_s);
    bench_remove_tree(dir);
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000u;
    size_t batch = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 100000u;
    int queries = argc > 3 ? atoi(argv[3]) : 20000;
    const char *only = argc > 4 ? argv[4] : NULL; /* comma-separated candidate names */
    ASSERT(events > 0 && batch > 0 && queries > 0);
    const enum ingest_profile profiles[2] = {INGEST_PROFILE_BUSY_DAY, INGEST_PROFILE_HOT_CUSTOMER};
    const char *profile_names[2] = {"busy-day", "hot-customer"};
    printf("events %" PRIu64 ", batch %zu entries, %d queries per customer\n", events, batch,
           queries);
    for (int p = 0; p < 2; p++) {
        struct ingest_workload_config cfg;
        ingest_workload_defaults(&cfg);
        struct customers cust = {.orders = calloc(cfg.customers + 1, sizeof(uint32_t))};
        ASSERT(cust.orders != NULL);
        for (int c = 0; c < CAND_COUNT; c++) {
            if (c != CAND_WAL_OFF && only != NULL && strstr(only, candidate_names[c]) == NULL) {
                continue; /* wal-off always runs: it counts orders and picks the customers */
            }
            struct result r = {0};
            run_candidate(profiles[p], (enum candidate)c, events, batch, queries, &cust, &r);
            if (c == 0) {
                printf("%s: heavy customer %" PRId64 " (%u orders), light customer %" PRId64
                       " (%u)\n",
                       profile_names[p], cust.heavy, cust.orders[cust.heavy], cust.light,
                       cust.orders[cust.light]);
            }
            printf("  %-14s apply %9.0f entries/s (batch median %.1f ms), %5.2f B/entry, "
                   "peak RSS %6.1f MiB",
                   candidate_names[c], r.entries_per_s, r.batch_median_s * 1e3, r.bytes_per_entry,
                   r.rss_mib);
            if (c != CAND_LOG) {
                printf(", newest-10 heavy p50/p99/max %.1f/%.1f/%.0f us, light %.1f/%.1f/%.0f us",
                       r.heavy_p50_us, r.heavy_p99_us, r.heavy_max_us, r.light_p50_us,
                       r.light_p99_us, r.light_max_us);
                printf("; compacted: heavy %.1f/%.1f/%.0f us, light %.1f/%.1f/%.0f us",
                       r.compacted_heavy_p50_us, r.compacted_heavy_p99_us, r.compacted_heavy_max_us,
                       r.compacted_light_p50_us, r.compacted_light_p99_us,
                       r.compacted_light_max_us);
            }
            printf("\n");
            fflush(stdout);
        }
        free(cust.orders);
    }
    return 0;
}
