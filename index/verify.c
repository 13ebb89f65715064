/*
 * index_verify (index.h): the by-customer index's part of `dayshard fsck` and all of `dayshard
 * gsi check`. It verifies DATA/gsi in two steps, without any lock, so it runs
 * beside a live node:
 *
 * 1. index_check reads every file of the index (index/index.h has the list): a damaged record,
 * table or FORMAT is damage; a torn tail a crash left is not (the builder replays it).
 * 2. The index against the base data. The builder's cursor (index_cursor_decode: the
 *    base commit sequence it reached and, per partition, the position of the next block to
 *    read) says what the index must hold. Each side's entries become 64-bit hashes of their key
 *    (customer, ts, order id), sorted: every event of the base before its partition's cursor
 *    position must be in the index, and every index entry must be an event of the base. The
 *    index may hold events past a position: a batch that filled up in the middle of a block
 *    is applied with the position at that block's start. Keys, not counts, because the index
 *    keeps one copy of a key (a replay, or an event ingested twice, adds none) while the base
 *    keeps every copy. The base is opened after the index was checked, so beside a live node it
 *    holds at least every commit the cursor covers.
 *
 * Memory: one hash (8 bytes) per base event, per base event after the cursor and per stored
 * index entry, in passes over disjoint hash ranges of at most VERIFY_HASHES_PER_PASS each.
 *
 * With repair, a damaged index (or one whose base lost blocks to quarantine) is rebuilt by
 * index_rebuild, `dayshard gsi rebuild`'s own code, and checked again.
 *
 * Rejected: comparing per-customer counts of the base with counts of the index's runs (a
 * replayed apply stores entries twice, so counts need the same deduplication as keys, and
 * keys catch more); reading the index through queries (a customer's pages re-read the newer
 * runs of its chain for every page: quadratic for a heavy customer). The cursor is decoded by
 * the builder's own index_cursor_decode, so the format has one reader.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/index.h"

/* Hashes one pass holds per side: 64 MiB each; a larger store takes more passes. */
#define VERIFY_HASHES_PER_PASS (1u << 23)
struct verify_hashes {
    uint64_t *items;
    size_t count;
    size_t capacity;
};

/* One comparison of the index with the base. */
struct verify_compare {
    const char *gsi_dir;
    uint64_t committed_bytes; /* of the index's log, as index_check saw it */
    struct storage *st;
    struct index_cursor_position *positions; /* the cursor's, sorted by (day, shard) */
    uint32_t position_count;
    uint8_t *position_seen; /* per position: the base holds that partition */
    uint64_t pass;
    uint64_t passes;
    struct verify_hashes all;   /* every base event */
    struct verify_hashes after; /* base events at or after the cursor's positions */
    struct verify_hashes index; /* every stored index entry */
    uint64_t base_events;
    uint64_t distinct; /* distinct index entries (all passes) */
    uint64_t missing;  /* base events before the cursor the index lacks */
    uint64_t foreign;  /* index entries the base does not hold */
    /* Orders model: a compaction removes superseded rows but not their index entries, which the
     * orders view passes over. Entries not in the base are looked up: only those that are an
     * order's current (customer, ts) are damage (foreign_current), the rest superseded. */
    bool orders_model;
    struct verify_hashes foreign_hashes;
    uint64_t foreign_current;
    uint64_t superseded;
    bool foreign_failed; /* no memory to keep them: counted as damage */
    char problem[160];   /* a cursor that disagrees with the base; "" when none */
};

static uint64_t verify_id_hash(uint64_t h, const struct ds_id *id)
{
    if (!id->is_string) {
        return ds_mix64(h ^ ds_mix64((uint64_t)id->value));
    }
    h ^= 0x9e3779b97f4a7c15ull + id->len;
    for (size_t i = 0; i < id->len; i++) {
        h = (h ^ (uint8_t)id->text[i]) * 0x100000001b3ull;
    }
    return ds_mix64(h);
}

/* The key of an entry or event: customer, ts, order id. */
static uint64_t verify_key_hash(const struct ds_id *customer, int64_t ts_ms,
                                const struct ds_id *order)
{
    uint64_t h = verify_id_hash(0x5ca1ab1e, customer);
    h = ds_mix64(h ^ (uint64_t)ts_ms);
    return verify_id_hash(h, order);
}

static int verify_hashes_push(struct verify_hashes *v, uint64_t h)
{
    if (v->count == v->capacity) {
        size_t capacity = v->capacity == 0 ? 4096 : v->capacity * 2;
        uint64_t *grown = realloc(v->items, capacity * sizeof(*grown));
        if (grown == NULL) {
            return -ENOMEM;
        }
        v->items = grown;
        v->capacity = capacity;
    }
    v->items[v->count++] = h;
    return 0;
}

/* Adds h when it belongs to this pass. Returns 0 or -ENOMEM. */
static int verify_hashes_add(const struct verify_compare *c, struct verify_hashes *v, uint64_t h)
{
    return h % c->passes == c->pass ? verify_hashes_push(v, h) : 0;
}

static int verify_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void verify_hashes_sort(struct verify_hashes *v)
{
    if (v->count > 1) {
        qsort(v->items, v->count, sizeof(*v->items), verify_u64_cmp);
    }
}

/* ---- the cursor ---------------------------------------------------------------------------- */

/* Decodes the builder's cursor (index_cursor_decode) into c. */
static int verify_cursor_decode(const uint8_t *cursor, size_t len, struct verify_compare *c,
                                uint64_t *seq)
{
    return index_cursor_decode(cursor, len, seq, &c->positions, &c->position_count);
}

static const struct index_cursor_position *verify_position_find(const struct verify_compare *c,
                                                                int32_t day, uint32_t shard)
{
    uint32_t lo = 0;
    uint32_t hi = c->position_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct index_cursor_position *p = &c->positions[mid];
        if (p->day == day && p->shard == shard) {
            return p;
        }
        if (p->day < day || (p->day == day && p->shard < shard)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

/* ---- collecting ------------------------------------------------------------------------------ */

/* Retractions (orders model) are not index entries: the builder skips them, and so does the
 * comparison. */
static int verify_event_all(const struct ds_event *event, void *user)
{
    struct verify_compare *c = user;
    if (event->retract) {
        return 0;
    }
    return verify_hashes_add(c, &c->all,
                             verify_key_hash(&event->customer_id, event->ts_ms, &event->order_id));
}

static int verify_event_after(const struct ds_event *event, void *user)
{
    struct verify_compare *c = user;
    if (event->retract) {
        return 0;
    }
    return verify_hashes_add(c, &c->after,
                             verify_key_hash(&event->customer_id, event->ts_ms, &event->order_id));
}

static int verify_entry(const struct index_entry *entry, void *user)
{
    struct verify_compare *c = user;
    if (ds_day_from_ms(entry->ts_ms) < storage_retention_floor(c->st)) {
        return 0; /* a day retention dropped: hidden from every view, kept until a rebuild */
    }
    return verify_hashes_add(c, &c->index,
                             verify_key_hash(&entry->customer_id, entry->ts_ms, &entry->order_id));
}

/* One base partition: all its events, and those from the cursor's position on (from the
 * start when the cursor does not name it). */
static int verify_partition(int32_t day, uint32_t shard, void *user)
{
    struct verify_compare *c = user;
    int rc = storage_partition_scan(c->st, day, shard, verify_event_all, c);
    if (rc != 0) {
        return rc;
    }
    const struct index_cursor_position *p = verify_position_find(c, day, shard);
    const struct storage_position start = p != NULL ? p->pos : (struct storage_position){0, 0};
    struct storage_position pos = start;
    rc = storage_partition_scan_from(c->st, day, shard, &pos, verify_event_after, c);
    if (rc == -ERANGE || rc == -DS_ECORRUPT) {
        /* The whole partition read back intact above, so the position is the index's fault. */
        snprintf(c->problem, sizeof(c->problem),
                 "its cursor's position in partition %" PRId32 "/%" PRIu32 " (segment %" PRIu32
                 ", offset %" PRIu64 ") is %s of the base data",
                 day, shard, start.segment_id, start.offset,
                 rc == -ERANGE ? "past the committed end" : "not the start of a block");
        return 0;
    }
    return rc;
}

/* Partitions the cursor names must exist in the base (unless it names their start). A
 * partition exists when the base visits it, even empty (an orders-model partition whose orders
 * all moved away nets to 0, and a compaction may leave it no row). */
static int verify_positions_known(struct verify_compare *c)
{
    for (uint32_t i = 0; i < c->position_count && c->problem[0] == '\0'; i++) {
        const struct index_cursor_position *p = &c->positions[i];
        if (c->position_seen[i] == 0 && (p->pos.segment_id != 0 || p->pos.offset != 0) &&
            p->day >= storage_retention_floor(c->st)) {
            snprintf(c->problem, sizeof(c->problem),
                     "its cursor names partition %" PRId32 "/%" PRIu32
                     ", which the base data does not hold",
                     p->day, p->shard);
        }
    }
    return 0;
}

static int verify_base_count(int32_t day, uint32_t shard, void *user)
{
    struct verify_compare *c = user;
    struct storage_partition_total total;
    int rc = storage_partition_totals(c->st, day, shard, NULL, 0, &total);
    c->base_events += rc == 0 ? total.rows : 0; /* what a pass holds: every row */
    const struct index_cursor_position *p = verify_position_find(c, day, shard);
    if (p != NULL) {
        c->position_seen[p - c->positions] = 1;
    }
    return rc;
}

/* The sorted hashes of one pass: what the cursor covers (all minus after, as multisets) must
 * be in the index, and the index must be in all. */
static void verify_pass_compare(struct verify_compare *c)
{
    const struct verify_hashes *all = &c->all;
    const struct verify_hashes *after = &c->after;
    const struct verify_hashes *index = &c->index;
    size_t a = 0;
    size_t f = 0;
    size_t x = 0;
    while (a < all->count || x < index->count) {
        uint64_t h = a < all->count ? all->items[a] : UINT64_MAX;
        if (x < index->count && index->items[x] < h) {
            h = index->items[x];
        }
        size_t in_all = 0;
        size_t in_after = 0;
        bool in_index = false;
        for (; a < all->count && all->items[a] == h; a++) {
            in_all++;
        }
        for (; f < after->count && after->items[f] < h; f++) {
        }
        for (; f < after->count && after->items[f] == h; f++) {
            in_after++;
        }
        for (; x < index->count && index->items[x] == h; x++) {
            in_index = true;
        }
        c->distinct += in_index;
        c->missing += in_all > in_after && !in_index;
        c->foreign += in_index && in_all == 0;
        if (in_index && in_all == 0 && c->orders_model) {
            c->foreign_failed = c->foreign_failed || verify_hashes_push(&c->foreign_hashes, h) != 0;
        }
    }
}

static int verify_pass(struct verify_compare *c)
{
    c->all.count = 0;
    c->after.count = 0;
    c->index.count = 0;
    int rc = storage_partition_visit(c->st, verify_partition, c);
    if (rc != 0 || c->problem[0] != '\0') {
        return rc;
    }
    rc = index_check_entries(c->gsi_dir, c->committed_bytes, verify_entry, c);
    if (rc != 0) {
        return rc;
    }
    verify_hashes_sort(&c->all);
    verify_hashes_sort(&c->after);
    verify_hashes_sort(&c->index);
    verify_pass_compare(c);
    return 0;
}

/* ---- the check ------------------------------------------------------------------------------- */

static void verify_damage(struct index_verify_report *out, const char *fmt, ...) DS_PRINTF(2, 3);

static void verify_damage(struct index_verify_report *out, const char *fmt, ...)
{
    out->damaged = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
    va_end(ap);
}

/* The index entries whose hash the base lacks (orders model): superseded (the order's current
 * customer or ts differ, or the order is gone) or damage (it is the current version). */
static int verify_foreign_entry(const struct index_entry *entry, void *user)
{
    struct verify_compare *c = user;
    uint64_t h = verify_key_hash(&entry->customer_id, entry->ts_ms, &entry->order_id);
    if (bsearch(&h, c->foreign_hashes.items, c->foreign_hashes.count, sizeof(h), verify_u64_cmp) ==
        NULL) {
        return 0;
    }
    uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
    struct storage_order o;
    int rc = storage_order_get(c->st, &entry->order_id, &o, scratch, sizeof(scratch));
    if (rc != 0 && rc != -ENOENT) {
        return rc;
    }
    bool current =
        rc == 0 && o.ts_ms == entry->ts_ms && ds_id_equal(&o.customer_id, &entry->customer_id);
    c->foreign_current += current;
    c->superseded += !current;
    return 0;
}

static int verify_foreign_sort_out(struct verify_compare *c)
{
    verify_hashes_sort(&c->foreign_hashes);
    return index_check_entries(c->gsi_dir, c->committed_bytes, verify_foreign_entry, c);
}

/* Step 2 for an index that passed index_check. Damage goes to out; a base that cannot be read
 * (its own damage, which storage's check reports) skips the comparison with a note. */
static int verify_against_base(const char *data_dir, struct verify_compare *c, uint64_t covered_seq,
                               FILE *report, struct index_verify_report *out)
{
    int rc = storage_open_reader(data_dir, &c->st);
    c->position_seen = calloc(c->position_count + 1, 1);
    if (c->position_seen == NULL) {
        return -ENOMEM;
    }
    c->orders_model = rc == 0 && storage_model(c->st) == STORAGE_MODEL_ORDERS;
    if (rc == 0 && storage_commit_seq(c->st) < covered_seq) {
        verify_damage(out, "%s: covers base commit %" PRIu64 ", the base data only %" PRIu64,
                      c->gsi_dir, covered_seq, storage_commit_seq(c->st));
        return 0;
    }
    rc = rc == 0 ? storage_partition_visit(c->st, verify_base_count, c) : rc;
    rc = rc == 0 ? verify_positions_known(c) : rc;
    uint64_t larger = c->base_events > out->entries ? c->base_events : out->entries;
    c->passes = larger / VERIFY_HASHES_PER_PASS + 1;
    for (c->pass = 0; rc == 0 && c->pass < c->passes && c->problem[0] == '\0'; c->pass++) {
        rc = verify_pass(c);
    }
    if (rc == 0 && c->foreign > 0 && c->orders_model && !c->foreign_failed) {
        rc = verify_foreign_sort_out(c);
    }
    if (rc == -ENOMEM) {
        return rc;
    }
    if (rc == -DS_ECORRUPT && c->st != NULL && c->problem[0] == '\0') {
        /* index_check_entries saw a log that changed since the check, or a base block failed. */
        if (report != NULL) {
            fprintf(report, "gsi: %s: not compared with the base data: %s\n", c->gsi_dir,
                    ds_strerror(rc));
        }
        return 0;
    }
    if (rc != 0) {
        if (report != NULL) {
            fprintf(report, "gsi: %s: not compared with the base data (%s): %s\n", c->gsi_dir,
                    data_dir, ds_strerror(rc));
        }
        return 0;
    }
    if (c->orders_model && !c->foreign_failed) {
        c->foreign = c->foreign_current; /* the superseded ones are no damage */
    }
    if (report != NULL && c->superseded > 0) {
        fprintf(report,
                "gsi: %s: %" PRIu64 " entries of superseded versions whose rows a compaction "
                "removed (the orders view passes over them)\n",
                c->gsi_dir, c->superseded);
    }
    if (c->problem[0] != '\0') {
        verify_damage(out, "%s: %s", c->gsi_dir, c->problem);
    } else if (c->missing > 0 || c->foreign > 0) {
        verify_damage(out,
                      "%s: disagrees with the base data up to commit %" PRIu64 ": %" PRIu64
                      " events missing from the index, %" PRIu64 " entries not in the base",
                      c->gsi_dir, covered_seq, c->missing, c->foreign);
    }
    out->entries = c->distinct;
    return 0;
}

/* Both steps into out (present, damaged, reason, entries, covered_seq); *slots_log2 is the
 * table size of the index's log (0 when it has none), for a rebuild to keep. */
static int verify_once(const char *data_dir, const char *gsi_dir, FILE *report,
                       struct index_verify_report *out, uint32_t *slots_log2)
{
    uint8_t *cursor = NULL;
    struct index_check_report check;
    int rc = index_check(gsi_dir, &cursor, &check);
    *slots_log2 = rc == 0 ? check.slots_log2 : 0;
    out->present = check.present;
    out->damaged = false;
    out->reason[0] = '\0';
    out->entries = check.entries;
    out->covered_seq = 0;
    struct verify_compare c = {.gsi_dir = gsi_dir, .committed_bytes = check.committed_bytes};
    if (rc == 0 && check.damaged) {
        verify_damage(out, "%s", check.reason);
    } else if (rc == 0 && check.present) {
        rc = verify_cursor_decode(cursor, check.cursor_len, &c, &out->covered_seq);
        if (rc == -DS_ECORRUPT) {
            verify_damage(out, "%s/log: the builder's cursor does not decode", gsi_dir);
            rc = 0;
        } else if (rc == 0) {
            rc = verify_against_base(data_dir, &c, out->covered_seq, report, out);
        }
    }
    if (rc == 0 && report != NULL && check.present && !out->damaged) {
        fprintf(report,
                "gsi: %s: clean: %" PRIu64 " entries up to base commit %" PRIu64 " (%" PRIu64
                " applies, %" PRIu64 " bytes of log, %" PRIu64 " bytes of torn tail)\n",
                gsi_dir, out->entries, out->covered_seq, check.applies, check.log_bytes,
                check.tail_bytes);
    }
    storage_close(c.st);
    free(c.positions);
    free(c.all.items);
    free(c.after.items);
    free(c.index.items);
    free(c.foreign_hashes.items);
    free(c.position_seen);
    free(cursor);
    return rc;
}

int index_verify(const char *data_dir, bool repair, bool base_changed, FILE *report,
                 index_note_fn note, void *user, struct index_verify_report *out)
{
    ASSERT(data_dir != NULL);
    ASSERT(!repair || note != NULL);
    struct index_verify_report local;
    out = out != NULL ? out : &local;
    memset(out, 0, sizeof(*out));
    char gsi_dir[DS_PATH_MAX];
    index_dir(data_dir, gsi_dir);
    uint32_t slots_log2 = 0;
    int rc = verify_once(data_dir, gsi_dir, report, out, &slots_log2);
    if (rc != 0) {
        return rc;
    }
    if (!out->present) {
        if (report != NULL) {
            fprintf(report, "gsi: %s: no index (nothing to check)\n", gsi_dir);
        }
        return 0;
    }
    if (out->damaged && report != NULL) {
        fprintf(report, "gsi: %s: damaged: %s\n", gsi_dir, out->reason);
    }
    if (!repair || (!out->damaged && !base_changed)) {
        return out->damaged ? 1 : 0;
    }
    struct index_rebuilt rebuilt;
    if (index_rebuild(data_dir, slots_log2, note, user, &rebuilt) != 0) {
        return out->damaged ? 1 : 0; /* the rebuild printed why; a clean index stays */
    }
    out->rebuilt = true;
    struct index_verify_report after;
    memset(&after, 0, sizeof(after));
    rc = verify_once(data_dir, gsi_dir, NULL, &after, &slots_log2);
    if (rc != 0) {
        return rc;
    }
    out->entries = after.entries;
    out->covered_seq = after.covered_seq;
    if (report != NULL) {
        fprintf(report, "gsi: %s: rebuilt from %" PRIu64 " base events: %s\n", gsi_dir,
                rebuilt.events, after.damaged ? after.reason : "clean");
    }
    if (after.damaged) {
        verify_damage(out, "after the rebuild: %.200s", after.reason);
        return 1;
    }
    return 0;
}
