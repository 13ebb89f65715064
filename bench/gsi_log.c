/*
 * bench_gsi_log: a purpose-built candidate for the by-customer index (issue 5, DESIGN.md
 * section 9), FASTER/Bitcask style, measured on the workloads bench_gsi_store gives RocksDB.
 *
 * Usage: bench_gsi_log [events=10000000] [slots_log2=22]
 *
 * The design, self-contained here because this measures a design, not product code:
 * - an append-only log of length-prefixed records (CRC32C, length, status length, back-pointer,
 *   customer id, ts, order id, amount, day, status bytes). The back-pointer is the log offset of
 *   the previous record on the same chain, 0 for none (offset 0 holds the file header, so no
 *   record lives there). Records are encoded into a 1 MiB buffer written with one pwrite when
 *   full; each apply batch (APPLY_BATCH_ENTRIES, one group commit of the builder) ends with a
 *   pwrite of the rest and an fdatasync;
 * - a fixed table of 2^slots_log2 slots of 16 bytes in memory: (customer tag, log offset of the
 *   chain's newest record). The tag is a 64-bit hash of the customer id (never 0: 0 marks an
 *   empty slot). A customer's slot is found by linear probing from its home slot over at most
 *   PROBE_MAX slots: the slot with its tag, else the first empty one (claimed on insert). When
 *   all PROBE_MAX slots belong to other customers the customer shares its home slot: its
 *   records join that slot's chain. The table never grows, so memory is set by configuration
 *   whatever the number of customers; a full table costs query time, not correctness;
 * - newest N of customer C: find C's slot, follow back-pointers from its head, keep the records
 *   whose customer id is C, stop after N of them or at the chain's end. Since every record of C
 *   went to the same slot (the probe window only ever fills up, so the answer of the slot
 *   search for C never changes once C has a record), the chain holds all of C's records, newest
 *   first in append order. The generator appends a customer's records in non-decreasing ts with
 *   increasing order ids, so equal ts come back with the higher order id first, which is the
 *   API's order (ts descending, then order_id descending). With arbitrary ids, equal ts would
 *   come back in reverse arrival order and the query would have to read on while ts equals the
 *   N-th record's ts and sort that tie group by order id.
 *
 * Measured, for the busy-day and hot-customer profiles (fixed seed, the generator's default
 * 1M Zipf customers), once with the configured table and once with a small one (2^16 slots, or
 * slots_log2 - 4 when that is not smaller) to show the full-table case:
 * - apply: CPU per entry (getrusage around the applies only, so generating the events is not
 *   counted, but encoding, hashing, the table, the pwrites and the fdatasyncs are), entries/s
 *   over the apply wall time, batch apply p50/p99/max (adds to the index lag), bytes per entry on
 *   disk, table memory, peak RSS (VmHWM reset through /proc/self/clear_refs before each run);
 * - newest 10 for the customer with the most orders, the one nearest 80,000 orders and one with
 *   2 (or 1) orders: QUERIES queries each (events / 10 in a smoke run under 200k events; fewer
 *   when they exceed QUERY_BUDGET_NS), through pread and through mmap, page cache warm (the log
 *   was just written, nothing dropped), answers checked against the last 10 orders seen while
 *   generating; plus one query each (pread) for LIGHT_SAMPLE_MAX other customers with 1-2
 *   orders, where a shared chain hurts most, and a few for one that shares the longest chain
 *   (the worst case: the walk reads the whole chain to learn there is nothing older);
 * - restart: rebuilding the table by scanning the whole log (the crash-recovery path), with the
 *   page cache warm and after posix_fadvise(DONTNEED) on the log (cold), checked equal to the
 *   table built by the applies; and the alternative, a checkpoint of the table: writing it with
 *   an fdatasync, and loading it cold.
 *
 * CPU per entry misses, for both this and bench_gsi_store, the kernel's writeback threads
 * (they run outside the process); it includes the copy into the page cache (pwrite).
 *
 * Rejected alternatives: one chain per customer kept in memory (memory grows with customers);
 * resizing the table when full (the back-pointers encode the old table's sharing, so a resize
 * needs a log rewrite); fixed 84-byte records (status inline at its maximum) waste a third of
 * the log for the generator's statuses of 6-9 bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/common.h"
#include "ingest/ingest.h"

/* The record layout below is little-endian through memcpy: this bench runs on x86-64/arm64. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host");

#define LOG_HEADER_BYTES 64u
#define REC_CRC 0           /* u32 CRC32C of bytes 4..len */
#define REC_LEN 4           /* u8 record bytes */
#define REC_STATUS_LEN 5    /* u8 */
#define REC_PREV 8          /* u64 offset of the chain's previous record, 0 for none */
#define REC_CUSTOMER 16     /* i64 */
#define REC_TS 24           /* i64 ms */
#define REC_ORDER 32        /* i64 */
#define REC_AMOUNT 40       /* i64 units */
#define REC_DAY 48          /* i32 days since the epoch */
#define REC_FIXED_BYTES 52u /* then status_len bytes of status */
#define REC_BYTES_MAX (REC_FIXED_BYTES + DS_STATUS_BYTES_MAX)
_Static_assert(REC_BYTES_MAX <= UINT8_MAX, "record length fits its u8");

/* One pwrite per MiB: large enough that syscalls cost nothing per entry, small enough to keep
 * the write buffer out of the memory budget's way. */
#define WRITE_CHUNK_BYTES (1u << 20)
/* Entries per apply (one fdatasync): ~100 ms of ingest at 500k events/s. */
#define APPLY_BATCH_ENTRIES 50000u
/* Slots a lookup may inspect: 32 x 16 bytes = 8 adjacent cache lines, prefetched together. */
#define PROBE_MAX 32u
#define SLOTS_LOG2_MIN 5u  /* at least PROBE_MAX slots */
#define SLOTS_LOG2_MAX 30u /* 16 GiB of table */
#define SLOTS_LOG2_FULL 16u
#define NEWEST 10
#define QUERIES 20000
#define QUERY_BUDGET_NS 2000000000ull
#define LIGHT_SAMPLE_MAX 2000u
#define MIDDLE_TARGET 80000u
#define QUERIES_WORST 50 /* each may read a million records */
_Static_assert(LIGHT_SAMPLE_MAX <= QUERIES, "one latency array serves both");

struct slot {
    uint64_t tag;  /* hash of the customer id with the low bit set; 0: empty */
    uint64_t head; /* offset of the chain's newest record */
};
_Static_assert(sizeof(struct slot) == 16, "16-byte slots");

struct table {
    struct slot *slots;
    uint32_t log2;
    uint64_t mask;
    uint64_t used;           /* slots claimed */
    uint64_t shared_records; /* records appended to a chain whose slot another customer owns */
};

struct record {
    uint64_t prev;
    int64_t customer, ts_ms, order_id, amount_units;
    int32_t day;
    uint8_t len, status_len;
    char status[DS_STATUS_BYTES_MAX];
};

struct writer {
    int fd;
    uint8_t *buf;
    size_t used;
    uint64_t buf_offset; /* file offset of buf[0] */
    uint64_t syncs;
};

struct reader {
    int fd;
    const uint8_t *map; /* NULL: pread */
    uint64_t size;
};

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}

/* splitmix64's finalizer: every bit of the id moves the home slot (high bits) and the tag. */
static uint64_t customer_tag(int64_t customer)
{
    uint64_t z = (uint64_t)customer + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) | 1u;
}

static void pwrite_all(int fd, const void *data, size_t len, uint64_t offset)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)offset);
        ASSERT(n > 0);
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
}

static void pread_all(int fd, void *dst, size_t len, uint64_t offset)
{
    uint8_t *p = dst;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)offset);
        ASSERT(n > 0);
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
}

/* ---- the table ----------------------------------------------------------------------------- */

static void table_init(struct table *t, uint32_t log2)
{
    ASSERT(log2 >= SLOTS_LOG2_MIN && log2 <= SLOTS_LOG2_MAX);
    memset(t, 0, sizeof(*t));
    t->log2 = log2;
    t->mask = (1ull << log2) - 1;
    /* calloc then touch every page: the budget is resident from the start, as in a node. */
    t->slots = calloc(1ull << log2, sizeof(struct slot));
    ASSERT(t->slots != NULL);
    memset(t->slots, 0, (1ull << log2) * sizeof(struct slot));
}

static void table_deinit(struct table *t)
{
    free(t->slots);
    t->slots = NULL;
}

static uint64_t table_bytes(const struct table *t)
{
    return (t->mask + 1) * sizeof(struct slot);
}

/* The slot of the customer whose tag is given: its own, else the first empty one in the probe
 * window (tag 0: no record yet), else, the window being full of others, its home slot. */
static struct slot *table_slot(const struct table *t, uint64_t tag)
{
    uint64_t home = tag >> (64 - t->log2);
    for (uint64_t i = 0; i < PROBE_MAX; i++) {
        struct slot *s = &t->slots[(home + i) & t->mask];
        if (s->tag == tag || s->tag == 0) {
            return s;
        }
    }
    return &t->slots[home];
}

/* Links a record at offset into the customer's chain; returns the back-pointer it must carry. */
static uint64_t table_link(struct table *t, uint64_t tag, uint64_t offset)
{
    struct slot *s = table_slot(t, tag);
    if (s->tag == 0) {
        s->tag = tag;
        t->used++;
    } else if (s->tag != tag) {
        t->shared_records++;
    }
    uint64_t prev = s->head;
    ASSERT(prev < offset);
    s->head = offset;
    return prev;
}

/* ---- records and the writer ---------------------------------------------------------------- */

static void record_encode(uint8_t *r, const struct ds_event *e, uint64_t prev)
{
    size_t len = REC_FIXED_BYTES + e->status_len;
    memset(r, 0, REC_FIXED_BYTES);
    r[REC_LEN] = (uint8_t)len;
    r[REC_STATUS_LEN] = e->status_len;
    put64(r + REC_PREV, prev);
    put64(r + REC_CUSTOMER, (uint64_t)e->customer_id.value);
    put64(r + REC_TS, (uint64_t)e->ts_ms);
    put64(r + REC_ORDER, (uint64_t)e->order_id.value);
    put64(r + REC_AMOUNT, (uint64_t)e->amount_units);
    put32(r + REC_DAY, (uint32_t)ds_day_from_ms(e->ts_ms));
    memcpy(r + REC_FIXED_BYTES, e->status, e->status_len);
    put32(r + REC_CRC, ds_crc32c(0, r + 4, len - 4));
}

/* Decodes the record at p (avail bytes readable); -DS_ECORRUPT for a bad length or checksum. */
static int record_decode(const uint8_t *p, size_t avail, struct record *out)
{
    if (avail < REC_FIXED_BYTES) {
        return -DS_ECORRUPT;
    }
    size_t len = p[REC_LEN];
    if (len != REC_FIXED_BYTES + p[REC_STATUS_LEN] || len > avail ||
        p[REC_STATUS_LEN] > DS_STATUS_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    if (ds_crc32c(0, p + 4, len - 4) != get32(p + REC_CRC)) {
        return -DS_ECORRUPT;
    }
    out->len = (uint8_t)len;
    out->status_len = p[REC_STATUS_LEN];
    out->prev = get64(p + REC_PREV);
    out->customer = (int64_t)get64(p + REC_CUSTOMER);
    out->ts_ms = (int64_t)get64(p + REC_TS);
    out->order_id = (int64_t)get64(p + REC_ORDER);
    out->amount_units = (int64_t)get64(p + REC_AMOUNT);
    out->day = (int32_t)get32(p + REC_DAY);
    memcpy(out->status, p + REC_FIXED_BYTES, out->status_len);
    return 0;
}

static void writer_open(struct writer *w, const char *path)
{
    memset(w, 0, sizeof(*w));
    w->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT(w->fd >= 0);
    w->buf = malloc(WRITE_CHUNK_BYTES);
    ASSERT(w->buf != NULL);
    uint8_t header[LOG_HEADER_BYTES] = "dayshard gsi log v1";
    pwrite_all(w->fd, header, sizeof(header), 0);
    w->buf_offset = LOG_HEADER_BYTES;
}

static void writer_flush(struct writer *w)
{
    if (w->used > 0) {
        pwrite_all(w->fd, w->buf, w->used, w->buf_offset);
        w->buf_offset += w->used;
        w->used = 0;
    }
}

static void writer_sync(struct writer *w)
{
    writer_flush(w);
    int rc = fdatasync(w->fd);
    ASSERT(rc == 0);
    w->syncs++;
}

/* Appends one event: links it into the table and encodes it with its back-pointer. */
static void writer_append(struct writer *w, struct table *t, const struct ds_event *e)
{
    ASSERT(!e->customer_id.is_string);
    ASSERT(!e->order_id.is_string);
    size_t len = REC_FIXED_BYTES + e->status_len;
    if (w->used + len > WRITE_CHUNK_BYTES) {
        writer_flush(w);
    }
    uint64_t offset = w->buf_offset + w->used;
    uint64_t prev = table_link(t, customer_tag(e->customer_id.value), offset);
    record_encode(w->buf + w->used, e, prev);
    w->used += len;
}

/* ---- queries ------------------------------------------------------------------------------- */

static int reader_get(const struct reader *rd, uint64_t offset, struct record *out)
{
    if (offset < LOG_HEADER_BYTES || offset >= rd->size) {
        return -DS_ECORRUPT;
    }
    size_t avail = (size_t)(rd->size - offset);
    if (rd->map != NULL) {
        return record_decode(rd->map + offset, avail, out);
    }
    uint8_t buf[REC_BYTES_MAX];
    ssize_t n = pread(rd->fd, buf, avail < sizeof(buf) ? avail : sizeof(buf), (off_t)offset);
    if (n < 0) {
        return -errno;
    }
    return record_decode(buf, (size_t)n, out);
}

/* The newest (up to limit) records of customer, newest first; returns how many, or an error.
 * *visited counts the records read, the customer's and those of customers sharing its chain. */
static int log_newest(const struct table *t, const struct reader *rd, int64_t customer,
                      struct record *out, int limit, uint64_t *visited)
{
    uint64_t tag = customer_tag(customer);
    const struct slot *s = table_slot(t, tag);
    int found = 0;
    for (uint64_t offset = s->tag == 0 ? 0 : s->head; offset != 0 && found < limit;) {
        struct record r = {0};
        int rc = reader_get(rd, offset, &r);
        if (rc < 0) {
            return rc;
        }
        (*visited)++;
        if (r.customer == customer) {
            out[found++] = r;
        }
        /* Strictly decreasing offsets: a corrupt pointer cannot loop. */
        if (r.prev >= offset) {
            return -DS_ECORRUPT;
        }
        offset = r.prev;
    }
    return found;
}

/* ---- the workload's customers -------------------------------------------------------------- */

struct pick {
    const char *name;
    int64_t id;
    uint32_t orders;
    int64_t last_order[NEWEST]; /* ring of the last NEWEST order ids seen while generating */
    uint32_t seen;
};

struct customers {
    uint32_t *orders; /* by integer customer id */
    uint64_t count;   /* ids 1..count */
    uint64_t distinct;
    struct pick picks[3]; /* most orders, nearest MIDDLE_TARGET, 2 (or 1) orders */
    int64_t sample[LIGHT_SAMPLE_MAX];
    uint32_t sample_count;
    int queries; /* per picked customer and read mode: QUERIES, fewer for a tiny smoke run */
};

static void workload_config(struct ingest_workload_config *cfg, enum ingest_profile profile,
                            uint64_t events)
{
    ingest_workload_defaults(cfg);
    cfg->profile = profile;
    cfg->events = events;
}

static void customers_choose(struct customers *c)
{
    uint64_t middle_distance = UINT64_MAX;
    int64_t light1 = 0;
    for (uint64_t id = 1; id <= c->count; id++) {
        uint32_t n = c->orders[id];
        c->distinct += n > 0;
        if (n > c->picks[0].orders) {
            c->picks[0].id = (int64_t)id;
            c->picks[0].orders = n;
        }
        uint64_t d = n > MIDDLE_TARGET ? n - MIDDLE_TARGET : MIDDLE_TARGET - n;
        if (d < middle_distance) {
            middle_distance = d;
            c->picks[1].id = (int64_t)id;
            c->picks[1].orders = n;
        }
        if (n == 2 && c->picks[2].id == 0) {
            c->picks[2].id = (int64_t)id;
        }
        light1 = n == 1 && light1 == 0 ? (int64_t)id : light1;
    }
    c->picks[2].id = c->picks[2].id != 0 ? c->picks[2].id : light1;
    ASSERT(c->picks[2].id != 0);
    c->picks[2].orders = c->orders[c->picks[2].id];
    /* The sample: customers with 1-2 orders spread over the id range (deterministic stride). */
    uint64_t stride = c->count / (4 * LIGHT_SAMPLE_MAX) + 1;
    for (uint64_t id = 7; id <= c->count && c->sample_count < LIGHT_SAMPLE_MAX; id += stride) {
        if (c->orders[id] >= 1 && c->orders[id] <= 2 && (int64_t)id != c->picks[2].id) {
            c->sample[c->sample_count++] = (int64_t)id;
        }
    }
}

/* One generation pass counts orders per customer and picks the customers to query. */
static void customers_pick(struct customers *c, enum ingest_profile profile, uint64_t events)
{
    memset(c, 0, sizeof(*c));
    struct ingest_workload_config cfg;
    workload_config(&cfg, profile, events);
    struct ingest_workload *w = NULL;
    int rc = ingest_workload_create(&cfg, &w);
    ASSERT(rc == 0);
    c->count = cfg.customers;
    c->orders = calloc(cfg.customers + 1, sizeof(uint32_t));
    ASSERT(c->orders != NULL);
    struct ds_event e;
    while (ingest_workload_next(w, &e)) {
        ASSERT(!e.customer_id.is_string);
        c->orders[e.customer_id.value]++;
    }
    ingest_workload_destroy(w);
    c->picks[0].name = "most";
    c->picks[1].name = "~80k";
    c->picks[2].name = "light";
    customers_choose(c);
}

/* ---- one run: apply, query, rebuild, checkpoint -------------------------------------------- */

struct latency {
    double p50_us, p99_us, max_us, visited_avg;
    int queries;
};

struct run {
    uint32_t slots_log2;
    uint64_t entries, log_bytes, disk_bytes, used, shared_records, syncs;
    double apply_s, cpu_s, rss_mib;
    double batch_p50_ms, batch_p99_ms, batch_max_ms;
    struct latency pick[3][2]; /* [customer][pread, mmap] */
    struct latency sample;
    uint64_t longest_chain;  /* records on the longest chain */
    int64_t worst_id;        /* a 1-2-order customer sharing that chain, 0 if none */
    struct latency worst[2]; /* its newest 10: [pread, mmap] */
    double rebuild_warm_per_s, rebuild_warm_cpu_us, rebuild_cold_per_s;
    double checkpoint_write_ms, checkpoint_load_ms;
};

static void pick_note(struct customers *c, const struct ds_event *e)
{
    for (int i = 0; i < 3; i++) {
        struct pick *p = &c->picks[i];
        if (p->id == e->customer_id.value) {
            p->last_order[p->seen++ % NEWEST] = e->order_id.value;
        }
    }
}

/* Generates the workload in batches; times and accounts CPU of the applies only. */
static void run_apply(struct run *r, struct writer *w, struct table *t, struct customers *c,
                      enum ingest_profile profile, uint64_t events)
{
    struct ingest_workload_config cfg;
    workload_config(&cfg, profile, events);
    struct ingest_workload *gen = NULL;
    int rc = ingest_workload_create(&cfg, &gen);
    ASSERT(rc == 0);
    struct ds_event *batch = calloc(APPLY_BATCH_ENTRIES, sizeof(*batch));
    double *batch_ms = calloc(events / APPLY_BATCH_ENTRIES + 1, sizeof(double));
    ASSERT(batch != NULL && batch_ms != NULL);
    int batches = 0;
    for (bool more = true; more;) {
        size_t n = 0;
        while (n < APPLY_BATCH_ENTRIES && (more = ingest_workload_next(gen, &batch[n]))) {
            pick_note(c, &batch[n++]);
        }
        if (n == 0) {
            break;
        }
        double cpu0 = bench_cpu_seconds();
        uint64_t t0 = ds_clock_ns();
        for (size_t i = 0; i < n; i++) {
            writer_append(w, t, &batch[i]);
        }
        writer_sync(w);
        double ms = (double)(ds_clock_ns() - t0) / 1e6;
        r->cpu_s += bench_cpu_seconds() - cpu0;
        r->apply_s += ms / 1e3;
        batch_ms[batches++] = ms;
        r->entries += n;
    }
    r->batch_p50_ms = bench_median(batch_ms, batches);
    r->batch_p99_ms = batch_ms[(size_t)((double)batches * 0.99)];
    r->batch_max_ms = batch_ms[batches - 1];
    free(batch_ms);
    free(batch);
    ingest_workload_destroy(gen);
}

static struct latency latency_of(double *lat, int n, uint64_t visited)
{
    struct latency l = {.queries = n};
    ASSERT(n >= 1);
    l.p50_us = bench_median(lat, n);
    l.p99_us = lat[(size_t)((double)n * 0.99)];
    l.max_us = lat[n - 1];
    l.visited_avg = (double)visited / n;
    return l;
}

/* Newest 10 of one picked customer, repeated; each answer is checked against the ring. */
static struct latency query_pick(const struct table *t, const struct reader *rd,
                                 const struct pick *p, int queries, double *lat)
{
    uint32_t expect = p->seen < NEWEST ? p->seen : NEWEST;
    ASSERT(p->seen == p->orders);
    uint64_t visited = 0;
    uint64_t start = ds_clock_ns();
    int i = 0;
    while (i < queries && (i == 0 || ds_clock_ns() - start < QUERY_BUDGET_NS)) {
        struct record out[NEWEST];
        uint64_t t0 = ds_clock_ns();
        int found = log_newest(t, rd, p->id, out, NEWEST, &visited);
        lat[i++] = (double)(ds_clock_ns() - t0) / 1e3;
        ASSERT(found == (int)expect);
        for (uint32_t k = 0; k < expect; k++) {
            ASSERT(out[k].order_id == p->last_order[(p->seen - 1 - k) % NEWEST]);
            ASSERT(k == 0 || out[k].ts_ms <= out[k - 1].ts_ms);
        }
    }
    return latency_of(lat, i, visited);
}

static struct latency query_sample(const struct table *t, const struct reader *rd,
                                   const struct customers *c, double *lat)
{
    uint64_t visited = 0;
    for (uint32_t i = 0; i < c->sample_count; i++) {
        struct record out[NEWEST];
        uint64_t t0 = ds_clock_ns();
        int found = log_newest(t, rd, c->sample[i], out, NEWEST, &visited);
        lat[i] = (double)(ds_clock_ns() - t0) / 1e3;
        ASSERT(found == (int)c->orders[c->sample[i]]);
    }
    return latency_of(lat, (int)c->sample_count, visited);
}

static void run_queries(struct run *r, const struct table *t, int fd, const struct customers *c)
{
    struct reader rd = {.fd = fd, .size = r->log_bytes};
    double *lat = calloc(QUERIES, sizeof(double));
    ASSERT(lat != NULL);
    for (int i = 0; i < 3; i++) {
        r->pick[i][0] = query_pick(t, &rd, &c->picks[i], c->queries, lat);
    }
    r->sample = query_sample(t, &rd, c, lat);
    void *map = mmap(NULL, (size_t)r->log_bytes, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT(map != MAP_FAILED);
    rd.map = map;
    for (int i = 0; i < 3; i++) {
        r->pick[i][1] = query_pick(t, &rd, &c->picks[i], c->queries, lat);
    }
    munmap(map, (size_t)r->log_bytes);
    free(lat);
}

/* The worst case of a full table: finds the longest chain (from the order counts: every
 * customer's records are on the chain of its slot) and a customer with 1-2 orders that shares
 * it without owning it; its newest-10 query reads the whole chain to learn it has no more. */
static void run_worst(struct run *r, const struct table *t, int fd, const struct customers *c)
{
    uint64_t *chain = calloc(t->mask + 1, sizeof(uint64_t));
    ASSERT(chain != NULL);
    for (uint64_t id = 1; id <= c->count; id++) {
        if (c->orders[id] > 0) {
            chain[table_slot(t, customer_tag((int64_t)id)) - t->slots] += c->orders[id];
        }
    }
    uint64_t longest = 0;
    for (uint64_t i = 1; i <= t->mask; i++) {
        longest = chain[i] > chain[longest] ? i : longest;
    }
    r->longest_chain = chain[longest];
    free(chain);
    const struct slot *s = &t->slots[longest];
    for (uint64_t id = 1; id <= c->count && r->worst_id == 0; id++) {
        uint64_t tag = customer_tag((int64_t)id);
        if (c->orders[id] >= 1 && c->orders[id] <= 2 && tag != s->tag && table_slot(t, tag) == s) {
            r->worst_id = (int64_t)id;
        }
    }
    if (r->worst_id == 0) {
        return;
    }
    struct reader rd = {.fd = fd, .size = r->log_bytes};
    void *map = mmap(NULL, (size_t)r->log_bytes, PROT_READ, MAP_SHARED, fd, 0);
    ASSERT(map != MAP_FAILED);
    double lat[QUERIES_WORST];
    int queries = c->queries / 100 + 1 < QUERIES_WORST ? c->queries / 100 + 1 : QUERIES_WORST;
    for (int m = 0; m < 2; m++) {
        rd.map = m == 0 ? NULL : map;
        uint64_t visited = 0;
        uint64_t start = ds_clock_ns();
        int i = 0;
        while (i < queries && (i == 0 || ds_clock_ns() - start < QUERY_BUDGET_NS)) {
            struct record out[NEWEST];
            uint64_t t0 = ds_clock_ns();
            int found = log_newest(t, &rd, r->worst_id, out, NEWEST, &visited);
            lat[i++] = (double)(ds_clock_ns() - t0) / 1e3;
            ASSERT(found == (int)c->orders[r->worst_id]);
        }
        r->worst[m] = latency_of(lat, i, visited);
    }
    munmap(map, (size_t)r->log_bytes);
}

/* Rebuilds a table by reading the log front to back in 1 MiB chunks, checking every record's
 * checksum and that its back-pointer is the head the rebuilt table held for its slot; stops at
 * the first bad record (a torn tail after a crash). Returns the records scanned. */
static uint64_t log_scan(int fd, uint64_t size, struct table *t)
{
    uint8_t *buf = malloc(WRITE_CHUNK_BYTES);
    ASSERT(buf != NULL);
    uint64_t entries = 0;
    uint64_t pos = LOG_HEADER_BYTES; /* file offset of buf[0] */
    for (bool torn = false; pos < size && !torn;) {
        size_t want = size - pos < WRITE_CHUNK_BYTES ? (size_t)(size - pos) : WRITE_CHUNK_BYTES;
        pread_all(fd, buf, want, pos);
        size_t at = 0;
        struct record r;
        while (record_decode(buf + at, want - at, &r) == 0) {
            uint64_t prev = table_link(t, customer_tag(r.customer), pos + at);
            ASSERT(prev == r.prev);
            at += r.len;
            entries++;
        }
        /* A record cut by the chunk's end is read again at the start of the next chunk. */
        torn = at == 0 || (want == size - pos && at < want);
        pos += at;
    }
    free(buf);
    return entries;
}

static void run_rebuild(struct run *r, const struct table *t, int fd)
{
    for (int cold = 0; cold < 2; cold++) {
        if (cold) {
            int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            ASSERT(rc == 0);
        }
        struct table rebuilt;
        table_init(&rebuilt, t->log2);
        double cpu0 = bench_cpu_seconds();
        uint64_t t0 = ds_clock_ns();
        uint64_t entries = log_scan(fd, r->log_bytes, &rebuilt);
        double s = (double)(ds_clock_ns() - t0) / 1e9;
        double cpu_s = bench_cpu_seconds() - cpu0;
        ASSERT(entries == r->entries);
        ASSERT(memcmp(rebuilt.slots, t->slots, table_bytes(t)) == 0);
        if (cold) {
            r->rebuild_cold_per_s = (double)entries / s;
        } else {
            r->rebuild_warm_per_s = (double)entries / s;
            r->rebuild_warm_cpu_us = cpu_s * 1e6 / (double)entries;
        }
        table_deinit(&rebuilt);
    }
}

/* The alternative to a full scan: a checkpoint of the table (written in 1 MiB pwrites, one
 * fdatasync) that recovery loads cold, then scans only the log written after it. */
static void run_checkpoint(struct run *r, const struct table *t, const char *dir)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/table.ckpt", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT(fd >= 0);
    uint64_t bytes = table_bytes(t);
    const uint8_t *src = (const uint8_t *)t->slots;
    uint64_t t0 = ds_clock_ns();
    for (uint64_t at = 0; at < bytes; at += WRITE_CHUNK_BYTES) {
        uint64_t left = bytes - at;
        pwrite_all(fd, src + at, left < WRITE_CHUNK_BYTES ? (size_t)left : WRITE_CHUNK_BYTES, at);
    }
    int rc = fdatasync(fd);
    ASSERT(rc == 0);
    r->checkpoint_write_ms = (double)(ds_clock_ns() - t0) / 1e6;
    rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ASSERT(rc == 0);
    uint8_t *dst = malloc((size_t)bytes);
    ASSERT(dst != NULL);
    t0 = ds_clock_ns();
    pread_all(fd, dst, (size_t)bytes, 0);
    r->checkpoint_load_ms = (double)(ds_clock_ns() - t0) / 1e6;
    ASSERT(memcmp(dst, src, (size_t)bytes) == 0);
    free(dst);
    close(fd);
    unlink(path);
}

static void run_one(struct run *r, enum ingest_profile profile, uint64_t events,
                    uint32_t slots_log2, struct customers *c)
{
    memset(r, 0, sizeof(*r));
    r->slots_log2 = slots_log2;
    for (int i = 0; i < 3; i++) {
        c->picks[i].seen = 0;
    }
    char dir[] = "/tmp/bench_gsi_log.XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/gsi.log", dir);
    bench_peak_rss_reset();
    struct table t;
    table_init(&t, slots_log2);
    struct writer w;
    writer_open(&w, path);
    run_apply(r, &w, &t, c, profile, events);
    r->rss_mib = bench_peak_rss_mib();
    r->log_bytes = w.buf_offset;
    r->syncs = w.syncs;
    r->used = t.used;
    r->shared_records = t.shared_records;
    struct stat st;
    int rc = fstat(w.fd, &st);
    ASSERT(rc == 0);
    ASSERT((uint64_t)st.st_size == r->log_bytes);
    r->disk_bytes = (uint64_t)st.st_blocks * 512u;
    run_queries(r, &t, w.fd, c);
    run_worst(r, &t, w.fd, c);
    run_rebuild(r, &t, w.fd);
    run_checkpoint(r, &t, dir);
    close(w.fd);
    free(w.buf);
    table_deinit(&t);
    bench_remove_tree(dir);
}

/* ---- output -------------------------------------------------------------------------------- */

static void latency_print(const char *what, const struct latency *l)
{
    printf("%-35s p50 %8.2f  p99 %8.2f  max %9.1f us  (%d queries, %.1f records read each)\n", what,
           l->p50_us, l->p99_us, l->max_us, l->queries, l->visited_avg);
}

static void run_print(const struct run *r, const struct customers *c)
{
    double n = (double)r->entries;
    printf("  table 2^%u slots (%.0f MiB), %" PRIu64 " used (%.1f%%), %" PRIu64
           " records on shared chains (%.2f%%)\n",
           r->slots_log2, (double)((1ull << r->slots_log2) * sizeof(struct slot)) / 1048576.0,
           r->used, 100.0 * (double)r->used / (double)(1ull << r->slots_log2), r->shared_records,
           100.0 * (double)r->shared_records / n);
    printf("    apply: %.2f us CPU/entry, %.0f entries/s, batch (%u entries + fdatasync) "
           "p50/p99/max %.1f/%.1f/%.1f ms, %" PRIu64 " fdatasyncs\n",
           r->cpu_s * 1e6 / n, n / r->apply_s, APPLY_BATCH_ENTRIES, r->batch_p50_ms,
           r->batch_p99_ms, r->batch_max_ms, r->syncs);
    printf("    log %.1f MiB: %.2f B/entry (%.2f allocated), peak RSS %.1f MiB\n",
           (double)r->log_bytes / 1048576.0, (double)r->log_bytes / n, (double)r->disk_bytes / n,
           r->rss_mib);
    for (int i = 0; i < 3; i++) {
        char what[80];
        const struct pick *p = &c->picks[i];
        for (int m = 0; m < 2; m++) {
            snprintf(what, sizeof(what), "newest-10 %s %" PRId64 " (%u) %s", p->name, p->id,
                     p->orders, m == 0 ? "pread" : "mmap");
            printf("    ");
            latency_print(what, &r->pick[i][m]);
        }
    }
    char what[80];
    snprintf(what, sizeof(what), "newest-10 %u others w/ 1-2, pread", c->sample_count);
    printf("    ");
    latency_print(what, &r->sample);
    printf("    longest chain %" PRIu64 " records; %s\n", r->longest_chain,
           r->worst_id == 0 ? "no 1-2-order customer shares it"
                            : "a 1-2-order customer sharing it:");
    for (int m = 0; r->worst_id != 0 && m < 2; m++) {
        snprintf(what, sizeof(what), "newest-10 %" PRId64 " (%u) %s", r->worst_id,
                 c->orders[r->worst_id], m == 0 ? "pread" : "mmap");
        printf("    ");
        latency_print(what, &r->worst[m]);
    }
    printf("    rebuild by log scan: %.0f entries/s warm (%.3f us CPU/entry), %.0f entries/s cold;"
           " checkpoint %.0f MiB: write+fdatasync %.1f ms, load cold %.1f ms\n",
           r->rebuild_warm_per_s, r->rebuild_warm_cpu_us, r->rebuild_cold_per_s,
           (double)((1ull << r->slots_log2) * sizeof(struct slot)) / 1048576.0,
           r->checkpoint_write_ms, r->checkpoint_load_ms);
}

static void summary_print(const char *profile, const struct run *big, const struct run *full)
{
    double n = (double)big->entries;
    printf("summary %s: CPU %.2f us/entry (2^%u) / %.2f (2^%u) vs RocksDB 4.1-4.7; %.0f "
           "entries/s; %.1f B/entry; table %.0f MiB, peak RSS %.0f MiB\n",
           profile, big->cpu_s * 1e6 / n, big->slots_log2, full->cpu_s * 1e6 / n, full->slots_log2,
           n / big->apply_s, (double)big->log_bytes / n,
           (double)((1ull << big->slots_log2) * sizeof(struct slot)) / 1048576.0, big->rss_mib);
    const struct run *runs[2] = {big, full};
    for (int k = 0; k < 2; k++) {
        const struct run *r = runs[k];
        printf("  2^%-2u newest-10 p50/p99 us (mmap | pread): most %.1f/%.1f | %.1f/%.1f, "
               "~80k %.1f/%.1f | %.1f/%.1f, light %.1f/%.1f | %.1f/%.1f, 1-2 sample p99 %.1f\n",
               r->slots_log2, r->pick[0][1].p50_us, r->pick[0][1].p99_us, r->pick[0][0].p50_us,
               r->pick[0][0].p99_us, r->pick[1][1].p50_us, r->pick[1][1].p99_us,
               r->pick[1][0].p50_us, r->pick[1][0].p99_us, r->pick[2][1].p50_us,
               r->pick[2][1].p99_us, r->pick[2][0].p50_us, r->pick[2][0].p99_us, r->sample.p99_us);
    }
    printf("  restart: scan %.2f M entries/s warm, %.2f M cold -> %.1f s per 10M entries cold; "
           "checkpoint load %.0f ms\n",
           big->rebuild_warm_per_s / 1e6, big->rebuild_cold_per_s / 1e6,
           1e7 / big->rebuild_cold_per_s, big->checkpoint_load_ms);
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000u;
    uint32_t slots_log2 = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 22u;
    if (events == 0 || slots_log2 < SLOTS_LOG2_MIN + 4 || slots_log2 > SLOTS_LOG2_MAX) {
        fprintf(stderr, "usage: bench_gsi_log [events=10000000] [slots_log2=22 (%u..%u)]\n",
                SLOTS_LOG2_MIN + 4, SLOTS_LOG2_MAX);
        return 2;
    }
    uint32_t full_log2 = slots_log2 > SLOTS_LOG2_FULL ? SLOTS_LOG2_FULL : slots_log2 - 4;
    const enum ingest_profile profiles[2] = {INGEST_PROFILE_BUSY_DAY, INGEST_PROFILE_HOT_CUSTOMER};
    const char *names[2] = {"busy-day", "hot-customer"};
    printf("events %" PRIu64 ", tables 2^%u and 2^%u slots, probe %u, apply batch %u, write "
           "chunk %u KiB; queries page-cache warm (nothing dropped)\n",
           events, slots_log2, full_log2, PROBE_MAX, APPLY_BATCH_ENTRIES, WRITE_CHUNK_BYTES >> 10);
    for (int p = 0; p < 2; p++) {
        struct customers *c = calloc(1, sizeof(*c));
        ASSERT(c != NULL);
        customers_pick(c, profiles[p], events);
        c->queries = events / 10 < QUERIES ? (int)(events / 10) + 1 : QUERIES;
        printf("%s: %" PRIu64 " distinct customers; most %" PRId64 " (%u orders), ~80k %" PRId64
               " (%u), light %" PRId64 " (%u)\n",
               names[p], c->distinct, c->picks[0].id, c->picks[0].orders, c->picks[1].id,
               c->picks[1].orders, c->picks[2].id, c->picks[2].orders);
        struct run runs[2];
        run_one(&runs[0], profiles[p], events, slots_log2, c);
        run_print(&runs[0], c);
        fflush(stdout);
        run_one(&runs[1], profiles[p], events, full_log2, c);
        run_print(&runs[1], c);
        summary_print(names[p], &runs[0], &runs[1]);
        fflush(stdout);
        free(c->orders);
        free(c);
    }
    return 0;
}
