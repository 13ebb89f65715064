/*
 * bench_gsi_store: which RocksDB write path and options hold the by-customer index (issue 5,
 * DESIGN.md section 9).
 *
 * Usage: bench_gsi_store [events] [batch] [queries] [candidates]
 * (defaults 10,000,000 / 100,000 / 20,000 / all; candidates is a comma-separated list of names)
 *
 * For the busy-day and the hot-customer workloads (fixed seed), and for each candidate, in one
 * run: apply throughput (entries/s over the time spent in apply; a batch is one group commit's
 * worth of entries plus the builder's cursor, applied atomically), batch apply time p50/p99/max
 * (it adds to the index lag), CPU per entry, bytes per entry on disk after a full compaction,
 * peak RSS (VmHWM reset through /proc/self/clear_refs before each candidate) against the
 * candidate's configured memory bound, the largest level-0 file count seen after an apply, and
 * the latency of "newest 10 orders of customer C" for a heavy customer (the one whose order
 * count is closest to 50,000) and a light one (one order):
 * - live: a second thread queries while the batches are applied (one query per millisecond,
 *   heavy and light in turn), as the HTTP service does while the node ingests;
 * - settled: after the last apply, once flushes and background compactions are done;
 * - compacted: after a full manual compaction (the best case).
 *
 * CPU per entry is process CPU time (every thread, RocksDB's background threads included) over
 * the apply phase, minus the main thread's time generating and encoding events and the query
 * thread's own time; "+settle" adds what the flushes and compactions still owed at the end
 * cost, which a steady load pays too. It matters more than the wall rate: the node shares the
 * machine's cores with ingest.
 *
 * Candidates (RocksDB 7.8 through its C API, a 64 MiB block cache holding index and filter
 * blocks, prefix Bloom filters on the 9-byte customer prefix, queries read with
 * prefix_same_as_start exactly as gsi_query does):
 * - sst-ingest: the previous module: each batch sorted, written as one SST file (cursor
 *   included) and ingested, RocksDB's default level-0 and compaction settings.
 * - sst-tuned: the same write path with the tuned options below.
 * - batch: the module now: one sorted WriteBatch per apply (entries + cursor), WAL off, tuned
 *   options: two write buffers of 64 MiB, no compression on level 0 and the base level, lz4
 *   below and zstd at the bottom, level-0 compaction at 4 files with slowdown/stop at 12/20,
 *   full Bloom filters on the prefix only (no whole-key filter), optimize_filters_for_hits,
 *   no concurrent memtable writes (one writer).
 * - batch-wal: the same with the WAL on but never synced.
 * Env GSI_BENCH_WRITE_BUFFER_MIB (default 64) and GSI_BENCH_BOTTOM=lz4 vary the tuned options.
 *
 * The key layout is the module's (query/gsi/gsi.c) for integer ids: customer tag + big-endian
 * id, inverted big-endian ts, order id tag + inverted big-endian id; the value is status length,
 * status, zigzag varint amount. The module's header is private to query/, so the layout and the
 * options are repeated here rather than included: keep them in step with gsi.c.
 */
#include <inttypes.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/common.h"
#include "ingest/ingest.h"

#define KEY_BYTES 27
#define VALUE_BYTES_MAX (1 + DS_STATUS_BYTES_MAX + 10)
#define HEAVY_TARGET 50000u
#define LIVE_QUERIES_MAX 400000u
#define CACHE_BYTES (64ull << 20)

enum candidate { CAND_SST = 0, CAND_SST_TUNED, CAND_BATCH, CAND_BATCH_WAL, CAND_COUNT };
static const char *const candidate_names[CAND_COUNT] = {"sst-ingest", "sst-tuned", "batch",
                                                        "batch-wal"};

struct record {
    uint8_t key[KEY_BYTES];
    uint8_t value_len;
    uint8_t value[VALUE_BYTES_MAX];
};

struct latency {
    double p50_us, p99_us, max_us;
};

struct result {
    double entries_per_s;
    double batch_p50_ms, batch_p99_ms, batch_max_ms;
    double cpu_us_per_entry, cpu_settled_us_per_entry;
    double bytes_per_entry;
    double rss_mib, bound_mib;
    uint64_t level0_files_max;
    struct latency live_heavy, live_light, settled_heavy, settled_light, compacted_heavy,
        compacted_light;
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

static double cpu_seconds(clockid_t clock)
{
    struct timespec ts;
    int rc = clock_gettime(clock, &ts);
    ASSERT(rc == 0);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct store {
    enum candidate cand;
    const char *dir;
    rocksdb_t *db;
    rocksdb_options_t *options;
    rocksdb_cache_t *cache;
    rocksdb_writeoptions_t *write;
    rocksdb_writebatch_t *batch;
    rocksdb_envoptions_t *env;
    rocksdb_ingestexternalfileoptions_t *ingest;
    uint64_t batches;
    uint64_t bound_bytes;
};

static uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? strtoull(v, NULL, 10) : fallback;
}

/* The module's tuned options (query/gsi/gsi.c, gsi_options_tune); returns the memory bound. */
static uint64_t store_tune(rocksdb_options_t *o, rocksdb_block_based_table_options_t *table)
{
    uint64_t buffer_bytes = env_u64("GSI_BENCH_WRITE_BUFFER_MIB", 64) << 20;
    const char *bottom = getenv("GSI_BENCH_BOTTOM");
    rocksdb_block_based_options_set_whole_key_filtering(table, 0);
    rocksdb_block_based_options_set_index_type(table, 2); /* kTwoLevelIndexSearch */
    rocksdb_block_based_options_set_partition_filters(table, 1);
    rocksdb_block_based_options_set_metadata_block_size(table, 4096);
    rocksdb_block_based_options_set_pin_top_level_index_and_filter(table, 1);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(table, 1);
    rocksdb_options_set_optimize_filters_for_hits(o, 1);
    rocksdb_options_set_write_buffer_size(o, (size_t)buffer_bytes);
    rocksdb_options_set_max_write_buffer_number(o, 2);
    rocksdb_options_set_min_write_buffer_number_to_merge(o, 1);
    rocksdb_options_set_level0_file_num_compaction_trigger(o, 4);
    rocksdb_options_set_level0_slowdown_writes_trigger(o, 12);
    rocksdb_options_set_level0_stop_writes_trigger(o, 20);
    rocksdb_options_set_max_bytes_for_level_base(o, 4 * buffer_bytes);
    rocksdb_options_set_target_file_size_base(o, buffer_bytes);
    int levels[7] = {rocksdb_no_compression,  rocksdb_lz4_compression, rocksdb_lz4_compression,
                     rocksdb_lz4_compression, rocksdb_lz4_compression, rocksdb_lz4_compression,
                     rocksdb_lz4_compression};
    rocksdb_options_set_compression_per_level(o, levels, 7);
    rocksdb_options_set_bottommost_compression(o, bottom != NULL && strcmp(bottom, "lz4") == 0
                                                      ? rocksdb_lz4_compression
                                                      : rocksdb_zstd_compression);
    rocksdb_options_set_allow_concurrent_memtable_write(o, 0);
    rocksdb_options_set_enable_write_thread_adaptive_yield(o, 0);
    rocksdb_options_set_bytes_per_sync(o, 1u << 20);
    /* Write buffers with their arena slack (an eighth), the cache, RocksDB's fixed overhead. */
    return CACHE_BYTES + 2 * buffer_bytes + 2 * buffer_bytes / 8 + (32ull << 20);
}

static void store_open(struct store *s, enum candidate cand, const char *dir)
{
    memset(s, 0, sizeof(*s));
    s->cand = cand;
    s->dir = dir;
    int rc = ds_mkdir_p(dir);
    ASSERT(rc == 0);
    s->cache = rocksdb_cache_create_lru(CACHE_BYTES);
    rocksdb_block_based_table_options_t *table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(table, s->cache);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(table, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(table, 1);
    rocksdb_block_based_options_set_filter_policy(table,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    s->options = rocksdb_options_create();
    rocksdb_options_set_prefix_extractor(s->options, rocksdb_slicetransform_create_fixed_prefix(9));
    rocksdb_options_set_create_if_missing(s->options, 1);
    rocksdb_options_set_max_background_jobs(s->options, 2);
    rocksdb_options_set_compression(s->options, rocksdb_lz4_compression);
    rocksdb_options_set_bottommost_compression(s->options, rocksdb_zstd_compression);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(s->options, 1);
    rocksdb_options_set_max_open_files(s->options, 512);
    rocksdb_options_set_info_log_level(s->options, 2);
    s->bound_bytes = CACHE_BYTES + (32ull << 20);
    if (cand != CAND_SST) {
        s->bound_bytes = store_tune(s->options, table);
    }
    rocksdb_options_set_block_based_table_factory(s->options, table);
    rocksdb_block_based_options_destroy(table);
    char *err = NULL;
    s->db = rocksdb_open(s->options, dir, &err);
    rocks_check(err, "open");
    s->write = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(s->write, cand != CAND_BATCH_WAL);
    s->batch = rocksdb_writebatch_create();
    s->env = rocksdb_envoptions_create();
    s->ingest = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(s->ingest, 1);
}

static void store_apply_sst(struct store *s, const struct record *recs, size_t n, uint64_t cursor)
{
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
    qsort(recs, n, sizeof(*recs), record_compare);
    if (s->cand == CAND_SST || s->cand == CAND_SST_TUNED) {
        store_apply_sst(s, recs, n, cursor);
        return;
    }
    rocksdb_writebatch_clear(s->batch);
    rocksdb_writebatch_put(s->batch, "\0cursor", 7, (const char *)&cursor, sizeof(cursor));
    for (size_t i = 0; i < n; i++) {
        rocksdb_writebatch_put(s->batch, (const char *)recs[i].key, KEY_BYTES,
                               (const char *)recs[i].value, recs[i].value_len);
    }
    char *err = NULL;
    rocksdb_write(s->db, s->write, s->batch, &err);
    rocks_check(err, "write");
}

static uint64_t store_property(struct store *s, const char *name)
{
    char *text = rocksdb_property_value(s->db, name);
    ASSERT(text != NULL);
    uint64_t v = strtoull(text, NULL, 10);
    rocksdb_free(text);
    return v;
}

/* Newest 10 entries of the customer, read as gsi_query reads; returns how many were found. */
static int store_newest10(struct store *s, int64_t customer)
{
    uint8_t prefix[9];
    customer_prefix(customer, prefix);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_prefix_same_as_start(ro, 1);
    rocksdb_iterator_t *it = rocksdb_create_iterator(s->db, ro);
    int found = 0;
    int64_t sum = 0;
    for (rocksdb_iter_seek(it, (const char *)prefix, sizeof(prefix));
         rocksdb_iter_valid(it) && found < 10; rocksdb_iter_next(it)) {
        size_t klen = 0;
        size_t vlen = 0;
        const char *k = rocksdb_iter_key(it, &klen);
        (void)rocksdb_iter_value(it, &vlen);
        if (klen != KEY_BYTES || memcmp(k, prefix, sizeof(prefix)) != 0) {
            break;
        }
        sum += (int64_t)vlen + k[26];
        found++;
    }
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    (void)sum;
    return found;
}

/* p50/p99/max of n latencies (sorted in place). */
static struct latency latency_of(double *lat, int n)
{
    struct latency l = {0};
    if (n > 0) {
        l.p50_us = bench_median(lat, n);
        l.p99_us = lat[(size_t)((double)n * 0.99)];
        l.max_us = lat[n - 1];
    }
    return l;
}

static struct latency store_latency(struct store *s, int64_t customer, uint32_t expect, int queries)
{
    double *lat = calloc((size_t)queries, sizeof(*lat));
    ASSERT(lat != NULL);
    for (int i = 0; i < queries; i++) {
        uint64_t t0 = ds_clock_ns();
        int found = store_newest10(s, customer);
        lat[i] = (double)(ds_clock_ns() - t0) / 1e3;
        ASSERT(found == (int)(expect < 10 ? expect : 10));
    }
    struct latency l = latency_of(lat, queries);
    free(lat);
    return l;
}

/* Flushes the memtables and waits until no flush or compaction is pending or running. */
static void store_settle(struct store *s)
{
    char *err = NULL;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    rocksdb_flush(s->db, fo, &err);
    rocks_check(err, "flush");
    rocksdb_flushoptions_destroy(fo);
    while (store_property(s, "rocksdb.compaction-pending") != 0 ||
           store_property(s, "rocksdb.num-running-compactions") != 0 ||
           store_property(s, "rocksdb.num-running-flushes") != 0) {
        usleep(10000);
    }
}

static uint64_t store_finish(struct store *s)
{
    uint64_t sst = store_property(s, "rocksdb.total-sst-files-size");
    rocksdb_close(s->db);
    rocksdb_ingestexternalfileoptions_destroy(s->ingest);
    rocksdb_envoptions_destroy(s->env);
    rocksdb_writebatch_destroy(s->batch);
    rocksdb_writeoptions_destroy(s->write);
    rocksdb_options_destroy(s->options);
    rocksdb_cache_destroy(s->cache);
    return sst;
}

struct customers {
    uint32_t *orders; /* by integer customer id, 0..customers */
    int64_t heavy;
    int64_t light;
};

/* One pass over the workload (generation only) counts orders per customer and picks them. */
static void customers_pick(struct customers *c, enum ingest_profile profile, uint64_t events)
{
    struct ingest_workload_config cfg;
    ingest_workload_defaults(&cfg);
    cfg.profile = profile;
    cfg.events = events;
    struct ingest_workload *w = NULL;
    int rc = ingest_workload_create(&cfg, &w);
    ASSERT(rc == 0);
    c->orders = calloc(cfg.customers + 1, sizeof(uint32_t));
    ASSERT(c->orders != NULL);
    struct ds_event e;
    while (ingest_workload_next(w, &e)) {
        c->orders[e.customer_id.value]++;
    }
    ingest_workload_destroy(w);
    c->heavy = 1;
    c->light = 0;
    uint64_t best = UINT64_MAX;
    for (uint64_t id = 1; id <= cfg.customers; id++) {
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

/* The live query thread: newest 10 of heavy and light in turn, one per millisecond. */
struct live {
    struct store *s;
    const struct customers *cust;
    atomic_bool stop;
    double *heavy_us, *light_us;
    int heavy_count, light_count;
    double cpu_s;
};

static void *live_main(void *arg)
{
    struct live *l = arg;
    for (uint32_t i = 0; !atomic_load(&l->stop) && i < LIVE_QUERIES_MAX; i++) {
        bool heavy = i % 2 == 0;
        uint64_t t0 = ds_clock_ns();
        int found = store_newest10(l->s, heavy ? l->cust->heavy : l->cust->light);
        double us = (double)(ds_clock_ns() - t0) / 1e3;
        ASSERT(found <= 10);
        if (heavy) {
            l->heavy_us[l->heavy_count++] = us;
        } else {
            l->light_us[l->light_count++] = us;
        }
        usleep(1000);
    }
    l->cpu_s = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    return NULL;
}

struct apply_phase {
    double apply_s;
    double gen_cpu_s;
    uint64_t applied;
    double *batch_ms;
    size_t batches;
};

/* Generates the workload in batches and applies them; times only the applies. */
static void apply_all(struct store *s, enum ingest_profile profile, uint64_t events, size_t batch,
                      struct apply_phase *ph, uint64_t *level0_max)
{
    struct ingest_workload_config cfg;
    ingest_workload_defaults(&cfg);
    cfg.profile = profile;
    cfg.events = events;
    struct ingest_workload *w = NULL;
    int rc = ingest_workload_create(&cfg, &w);
    ASSERT(rc == 0);
    struct record *recs = calloc(batch, sizeof(*recs));
    ASSERT(recs != NULL);
    for (bool more = true; more;) {
        double g0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
        size_t n = 0;
        struct ds_event e;
        while (n < batch && (more = ingest_workload_next(w, &e))) {
            record_encode(&e, &recs[n++]);
        }
        ph->gen_cpu_s += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - g0;
        if (n == 0) {
            break;
        }
        uint64_t t0 = ds_clock_ns();
        store_apply(s, recs, n, ph->applied + n);
        double ms = (double)(ds_clock_ns() - t0) / 1e6;
        ph->batch_ms[ph->batches++] = ms;
        ph->apply_s += ms / 1e3;
        ph->applied += n;
        uint64_t level0 = store_property(s, "rocksdb.num-files-at-level0");
        *level0_max = level0 > *level0_max ? level0 : *level0_max;
    }
    ingest_workload_destroy(w);
    free(recs);
}

static void run_candidate(enum ingest_profile profile, enum candidate cand, uint64_t events,
                          size_t batch, int queries, const struct customers *cust,
                          struct result *res)
{
    char dir[] = "/tmp/bench_gsi_store.XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct apply_phase ph = {.batch_ms = calloc((events + batch - 1) / batch, sizeof(double))};
    struct live live = {.cust = cust,
                        .heavy_us = calloc(LIVE_QUERIES_MAX, sizeof(double)),
                        .light_us = calloc(LIVE_QUERIES_MAX, sizeof(double))};
    ASSERT(ph.batch_ms != NULL && live.heavy_us != NULL && live.light_us != NULL);
    bench_peak_rss_reset();
    double cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    struct store s;
    store_open(&s, cand, dir);
    live.s = &s;
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, live_main, &live);
    ASSERT(rc == 0);
    apply_all(&s, profile, events, batch, &ph, &res->level0_files_max);
    atomic_store(&live.stop, true);
    rc = pthread_join(thread, NULL);
    ASSERT(rc == 0);
    double cpu1 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - ph.gen_cpu_s - live.cpu_s;
    store_settle(&s);
    double cpu2 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - ph.gen_cpu_s - live.cpu_s;
    res->entries_per_s = (double)ph.applied / ph.apply_s;
    res->cpu_us_per_entry = (cpu1 - cpu0) * 1e6 / (double)ph.applied;
    res->cpu_settled_us_per_entry = (cpu2 - cpu0) * 1e6 / (double)ph.applied;
    res->batch_p50_ms = bench_median(ph.batch_ms, (int)ph.batches);
    res->batch_p99_ms = ph.batch_ms[(size_t)((double)ph.batches * 0.99)];
    res->batch_max_ms = ph.batch_ms[ph.batches - 1];
    res->live_heavy = latency_of(live.heavy_us, live.heavy_count);
    res->live_light = latency_of(live.light_us, live.light_count);
    uint32_t heavy_orders = cust->orders[cust->heavy];
    res->settled_heavy = store_latency(&s, cust->heavy, heavy_orders, queries);
    res->settled_light = store_latency(&s, cust->light, 1, queries);
    rocksdb_compact_range(s.db, NULL, 0, NULL, 0);
    res->compacted_heavy = store_latency(&s, cust->heavy, heavy_orders, queries);
    res->compacted_light = store_latency(&s, cust->light, 1, queries);
    res->bound_mib = (double)s.bound_bytes / (1u << 20);
    res->bytes_per_entry = (double)store_finish(&s) / (double)ph.applied;
    res->rss_mib = bench_peak_rss_mib();
    free(ph.batch_ms);
    free(live.heavy_us);
    free(live.light_us);
    bench_remove_tree(dir);
}

static void result_print(const char *name, const struct result *r)
{
    printf("  %-10s apply %7.0f entries/s, batch p50/p99/max %.1f/%.1f/%.0f ms, CPU %.2f us/entry "
           "(%.2f +settle), %5.2f B/entry, peak RSS %5.1f MiB (bound %.0f), L0 files max %" PRIu64
           "\n",
           name, r->entries_per_s, r->batch_p50_ms, r->batch_p99_ms, r->batch_max_ms,
           r->cpu_us_per_entry, r->cpu_settled_us_per_entry, r->bytes_per_entry, r->rss_mib,
           r->bound_mib, r->level0_files_max);
    const struct latency *l[6] = {&r->live_heavy,    &r->live_light,      &r->settled_heavy,
                                  &r->settled_light, &r->compacted_heavy, &r->compacted_light};
    const char *when[3] = {"live", "settled", "compacted"};
    printf("  %-10s newest-10 p50/p99/max us:", "");
    for (int i = 0; i < 3; i++) {
        printf(" %s heavy %.1f/%.1f/%.0f light %.1f/%.1f/%.0f;", when[i], l[2 * i]->p50_us,
               l[2 * i]->p99_us, l[2 * i]->max_us, l[2 * i + 1]->p50_us, l[2 * i + 1]->p99_us,
               l[2 * i + 1]->max_us);
    }
    printf("\n");
}

/* Whether name is one of the comma-separated names in list (NULL: all are). */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p != NULL; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) {
            return true;
        }
    }
    return list == NULL;
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
        struct customers cust;
        customers_pick(&cust, profiles[p], events);
        printf("%s: heavy customer %" PRId64 " (%u orders), light customer %" PRId64 " (%u)\n",
               profile_names[p], cust.heavy, cust.orders[cust.heavy], cust.light,
               cust.orders[cust.light]);
        for (int c = 0; c < CAND_COUNT; c++) {
            if (!listed(only, candidate_names[c])) {
                continue;
            }
            struct result r = {0};
            run_candidate(profiles[p], (enum candidate)c, events, batch, queries, &cust, &r);
            result_print(candidate_names[c], &r);
            fflush(stdout);
        }
        free(cust.orders);
    }
    return 0;
}
