/*
 * The orders model (storage.h, "orders"): the writer's step that turns an event into a version
 * of its order, and the lookups of current versions. It sits between the facade (storage.c) and
 * the write side: it decides with the orders-by-id store (ids.h) and appends rows through
 * store_write_append, so the write side never knows about orders.
 *
 * An applied version is two rows and one record, all in the same commit: a retraction of the
 * current version in the current version's (day, shard), the new version in (day, shard), and
 * the new current version in the orders-by-id store's log. The log's committed position travels in
 * the MANIFEST's source table (slot STORE_SOURCE_IDS), so recovery cuts the log exactly where it
 * cuts the segments: the rows and the record of a version are acknowledged together or not at all.
 *
 * Invariants: in every partition a retraction follows the row it cancels (the row was appended
 * before, in this commit or an earlier one); the uncancelled rows of a partition are exactly the
 * current versions the store places there (fsck checks both).
 *
 * Rejected: deciding in the ingest stage (every writer would have to repeat it, and the
 * decision must commit with the rows it makes); keeping only a set of seen ids (a retraction
 * needs the superseded version's fields, the order lookup needs the whole current version).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/ids.h"
#include "storage/orders.h"
#include "storage/storage.h"
#include "storage/store_read.h"
#include "storage/store_write.h"

/* ---- the store ----------------------------------------------------------------------------- */

int store_orders_open(struct storage *st)
{
    ASSERT(st->ids == NULL);
    if (st->order_scratch == NULL) {
        st->order_scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
        if (st->order_scratch == NULL) {
            return -ENOMEM;
        }
    }
    return ids_open(st->io, st->dir, store_length_committed(st, STORE_SOURCE_IDS), st->read_only,
                    &st->ids);
}

int store_orders_refresh(struct storage *st)
{
    if (st->ids == NULL) {
        return 0; /* loaded by the first lookup */
    }
    int rc = ids_refresh(st->ids, store_length_committed(st, STORE_SOURCE_IDS));
    if (rc != 0) {
        ids_close(st->ids); /* it may hold part of what it replayed: loaded again on next use */
        st->ids = NULL;
    }
    return rc;
}

int store_orders_queue(struct storage *st)
{
    uint64_t bytes = 0;
    int rc = ids_queue(st->ids, &bytes);
    if (rc != 0) {
        return rc;
    }
    store_length_set(st, STORE_SOURCE_IDS, bytes);
    return 0;
}

void store_orders_committed(struct storage *st)
{
    ids_committed(st->ids, store_length_committed(st, STORE_SOURCE_IDS));
    /* Orders of days below the committed floor were dropped with their data: their sealed
     * files go with the next seal. A failed seal leaves the store as it was (logged, retried
     * later), so it does not fail the commit that was already acknowledged. */
    ids_maintain(st->ids, store_floor(st));
}

/* ---- the writer's step --------------------------------------------------------------------- */

/* The content the rules compare: customer, ts, status, amount and items (absent differs from
 * an empty list). */
static bool content_equal(const struct ds_event *e, const struct storage_order *o)
{
    return ds_id_equal(&e->customer_id, &o->customer_id) && e->ts_ms == o->ts_ms &&
           e->amount_units == o->amount_units && e->status_len == o->status_len &&
           memcmp(e->status, o->status, e->status_len) == 0 && e->items_bytes == o->items_bytes &&
           (e->items == NULL) == (o->items == NULL) &&
           (e->items_bytes == 0 || memcmp(e->items, o->items, e->items_bytes) == 0);
}

enum order_fate { ORDER_CREATED, ORDER_APPLIED, ORDER_STALE, ORDER_UNCHANGED };

/* docs/EVENTS.md's rules, in tests/integration/orders_oracle.py's order of tests. */
static enum order_fate order_fate(const struct ds_event *e, const struct storage_order *cur)
{
    bool same = content_equal(e, cur);
    if (e->has_version && cur->has_version &&
        (e->version < cur->version || (e->version == cur->version && !same))) {
        return ORDER_STALE;
    }
    if (same && (!e->has_version || (cur->has_version && e->version == cur->version))) {
        return ORDER_UNCHANGED;
    }
    return ORDER_APPLIED;
}

static void order_from_event(const struct ds_event *e, int32_t day, uint32_t shard,
                             const struct ds_source *source, struct storage_order *out)
{
    *out = (struct storage_order){.order_id = e->order_id,
                                  .has_version = e->has_version,
                                  .version = e->has_version ? e->version : 0,
                                  .ts_ms = e->ts_ms,
                                  .day = day,
                                  .shard = shard,
                                  .status_len = e->status_len,
                                  .amount_units = e->amount_units,
                                  .customer_id = e->customer_id,
                                  .items_bytes = e->items_bytes,
                                  .items = e->items,
                                  .versions_seen = 1,
                                  .source_partition =
                                      source != NULL ? source->partition : STORAGE_ORDER_NO_SOURCE};
    memcpy(out->status, e->status, e->status_len);
}

/* The row that cancels the stored version cur. */
static void retraction_of(const struct storage_order *cur, struct ds_event *out)
{
    memset(out, 0, sizeof(*out));
    out->order_id = cur->order_id;
    out->customer_id = cur->customer_id;
    out->ts_ms = cur->ts_ms;
    out->amount_units = cur->amount_units;
    out->status_len = cur->status_len;
    memcpy(out->status, cur->status, cur->status_len);
    out->has_version = cur->has_version;
    out->version = cur->version;
    out->retract = true;
}

int store_orders_append(struct storage *st, int32_t day, uint32_t shard,
                        const struct ds_event *event, const struct ds_source *source)
{
    ASSERT(st->ids != NULL && !event->retract);
    struct storage_order cur;
    int rc =
        ids_get(st->ids, &event->order_id, &cur, st->order_scratch, STORAGE_ORDER_SCRATCH_BYTES);
    if (rc < 0 && rc != -ENOENT) {
        return rc;
    }
    if (rc == 0 && cur.day < store_retention_floor(st)) {
        rc = -ENOENT; /* its day is (being) dropped by retention: the order is gone, a new one */
    }
    enum order_fate fate = rc == -ENOENT ? ORDER_CREATED : order_fate(event, &cur);
    if (fate == ORDER_STALE || fate == ORDER_UNCHANGED) {
        if (source != NULL) {
            store_write_source_note(st, source);
        }
        st->order_stats.stale += fate == ORDER_STALE;
        st->order_stats.unchanged += fate == ORDER_UNCHANGED;
        return 0;
    }
    /* Both partitions first: a refused one (-DS_ELIMIT) must leave the order as it was. */
    struct part *old_part = NULL;
    struct part *new_part = NULL;
    rc = fate == ORDER_APPLIED ? store_part_get(st, cur.day, cur.shard, &old_part) : 0;
    rc = rc == 0 ? store_part_get(st, day, shard, &new_part) : rc;
    if (rc != 0) {
        return rc;
    }
    struct storage_order next;
    order_from_event(event, day, shard, source, &next);
    if (fate == ORDER_APPLIED) {
        /* An event without a version keeps the floor (the oracle's "mixed streams"). */
        next.has_version = event->has_version || cur.has_version;
        next.version = event->has_version ? event->version : cur.version;
        next.versions_seen = cur.versions_seen + 1;
    }
    struct ds_event retraction;
    if (fate == ORDER_APPLIED) {
        retraction_of(&cur, &retraction); /* before the put: cur points into the scratch */
    }
    rc = ids_put(st->ids, &next);
    if (rc != 0) {
        return rc; /* -EAGAIN: the caller commits and appends again; nothing changed */
    }
    if (fate == ORDER_APPLIED) {
        rc = store_write_append(st, old_part, &retraction, NULL);
        old_part->dead_rows_hint += 2; /* the superseded row and its retraction */
    }
    rc = rc == 0 ? store_write_append(st, new_part, event, source) : rc;
    if (rc != 0) {
        /* The record is in the store and a row may be missing (an I/O error of an early block
         * seal, -ENOMEM): the writer fails and must be reopened, which drops the put with
         * everything else uncommitted. */
        st->failed = st->failed != 0 ? st->failed : rc;
        return rc;
    }
    st->order_stats.created += fate == ORDER_CREATED;
    st->order_stats.applied += fate == ORDER_APPLIED;
    return 0;
}

/* ---- giving up a source partition ---------------------------------------------------------- */

struct release {
    struct storage *st;
    int32_t source;
    uint64_t released;
};

static int release_one(const struct storage_order *o, void *user)
{
    struct release *r = user;
    if (o->source_partition != r->source) {
        return 0;
    }
    if (o->day < store_floor(r->st)) {
        return ids_remove(r->st->ids, o); /* its day was dropped: nothing to retract */
    }
    struct part *p = NULL;
    int rc = store_part_get(r->st, o->day, o->shard, &p);
    if (rc != 0) {
        return rc;
    }
    rc = ids_remove(r->st->ids, o); /* first: -EAGAIN leaves nothing half done */
    if (rc != 0) {
        return rc;
    }
    struct ds_event retraction;
    retraction_of(o, &retraction);
    rc = store_write_append(r->st, p, &retraction, NULL);
    if (rc != 0) {
        r->st->failed = r->st->failed != 0 ? r->st->failed : rc;
        return rc;
    }
    p->dead_rows_hint += 2;
    r->released++;
    return 0;
}

int store_orders_release(struct storage *st, int32_t source, uint64_t *released)
{
    ASSERT(st->touched_count == 0 && st->pending_events == 0);
    struct release r = {.st = st, .source = source};
    int rc = ids_visit(st->ids, release_one, &r);
    *released = r.released;
    return rc;
}

/* ---- lookups ------------------------------------------------------------------------------- */

int store_orders_get(struct storage *st, const struct ds_id *id, struct storage_order *out,
                     void *scratch, size_t scratch_capacity)
{
    ASSERT(scratch_capacity >= STORAGE_ORDER_SCRATCH_BYTES);
    if (st->ids == NULL) {
        int rc = store_orders_open(st);
        if (rc != 0) {
            return rc;
        }
    }
    return ids_get(st->ids, id, out, scratch, scratch_capacity);
}

int store_orders_visit(struct storage *st, storage_order_fn fn, void *user)
{
    if (st->ids == NULL) {
        int rc = store_orders_open(st);
        if (rc != 0) {
            return rc;
        }
    }
    return ids_visit(st->ids, fn, user);
}

void store_orders_prefetch(const struct storage *st, const struct ds_id *id)
{
    ids_prefetch(st->ids, id);
}

uint64_t store_orders_count(const struct storage *st)
{
    return st->ids != NULL ? ids_count(st->ids) : 0;
}

void storage_ids_held(const struct storage *st, struct storage_ids_held *out)
{
    ASSERT(st != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    if (st->ids == NULL) {
        return;
    }
    struct ids_progress progress;
    ids_progress(st->ids, &progress);
    *out = (struct storage_ids_held){.orders = ids_count(st->ids),
                                     .keydir_bytes = ids_keydir_bytes(st->ids),
                                     .recent_bytes = progress.recent_bytes,
                                     .recent_hard_bytes = IDS_RECENT_HARD_BYTES,
                                     .memory_bytes = ids_memory_bytes(st->ids),
                                     .sealed_files = ids_sealed_files(st->ids),
                                     .disk_bytes = ids_disk_bytes(st->ids),
                                     .seals = progress.seals,
                                     .sealing = progress.sealing,
                                     .stall_calls = progress.stall_calls,
                                     .stall_total_ns = progress.stall_total_ns,
                                     .stall_max_ns = progress.stall_max_ns};
}

/* ---- compaction ---------------------------------------------------------------------------- */

/* Compaction serves both models: it lives here because only the orders model supersedes rows
 * (pass 1); in the events model it merges small blocks, every row kept. */

/* The rows a retraction cancels are those with its fields (the superseded version's order id,
 * customer, ts, status, amount); a 128-bit digest of them keys a multiset of pending
 * retractions. Within a partition every retraction follows its row and the current version of
 * an order comes after all its superseded rows there, so cancelling, for each digest, its
 * earliest rows leaves exactly the current versions. */
struct digest {
    uint64_t a, b;
    uint32_t count;   /* retractions not matched yet */
    uint32_t present; /* 0: an empty slot (a slot stays present when its count drops to 0) */
};
enum compaction_phase {
    COMPACTION_COLLECT, /* pass 1 over the partition as committed at the start */
    COMPACTION_KEEP,    /* pass 2 over it, writing the rows that stay */
    COMPACTION_TAIL,    /* what the partition took since, copied whole, up to its last commit */
};
struct compaction {
    struct storage *st;
    struct storage *reader;
    int32_t day;
    uint32_t shard;
    bool merge;
    bool collect; /* pass 1 runs: only the orders model has retractions to collect */
    enum compaction_phase phase;
    struct storage_position pos;   /* where the current pass goes on */
    struct storage_position block; /* the block the scan is in (its events come one by one) */
    uint64_t deadline_ns;
    struct part shadow; /* the rewrite (store_write.h) */
    struct digest *slots;
    uint64_t mask;
    uint64_t used;
    uint64_t retractions;
    uint64_t kept;
    struct storage_partition_total before;
    uint64_t start_ns;
    uint64_t slice_ns_max;
    uint32_t slices;
};

/* A scan callback's answer that ends the slice: returned only on the first event of a block,
 * so that the scan's position stays at that block's start and nothing is taken twice. */
#define COMPACTION_PAUSE 1

static uint64_t hash_step(uint64_t h, uint64_t word)
{
    return ds_mix64((h ^ word) + 0x9e3779b97f4a7c15ull);
}

static uint64_t hash_bytes(uint64_t h, const char *bytes, size_t len)
{
    for (size_t at = 0; at < len; at += 8) {
        uint8_t word[8] = {0};
        memcpy(word, bytes + at, len - at < 8 ? len - at : 8);
        h = hash_step(h, ds_get_le64(word));
    }
    return h;
}

/* Type and length first, so that no two ids (5 and "5", "a" and "a\0") feed the same words. */
static uint64_t hash_id(uint64_t h, const struct ds_id *id)
{
    if (!id->is_string) {
        return hash_step(hash_step(h, 1), (uint64_t)id->value);
    }
    h = hash_step(h, 2u | (uint64_t)id->len << 8);
    return hash_bytes(h, id->text, id->len);
}

uint64_t store_orders_row_hash(uint64_t seed, const struct ds_id *order_id,
                               const struct ds_id *customer_id, int64_t ts_ms, const char *status,
                               uint8_t status_len, int64_t amount_units)
{
    uint64_t h = hash_id(seed, order_id);
    h = hash_id(h, customer_id);
    h = hash_step(h, (uint64_t)ts_ms);
    h = hash_step(h, (uint64_t)amount_units);
    h = hash_step(h, status_len);
    return hash_bytes(h, status, status_len);
}

/* Two independent 64-bit hashes of the row's fields: a 128-bit digest. */
static void digest_of(const struct ds_event *e, uint64_t *a, uint64_t *b)
{
    *a = store_orders_row_hash(0x243f6a8885a308d3ull, &e->order_id, &e->customer_id, e->ts_ms,
                               e->status, e->status_len, e->amount_units);
    *b = store_orders_row_hash(0x13198a2e03707344ull, &e->order_id, &e->customer_id, e->ts_ms,
                               e->status, e->status_len, e->amount_units);
}

static struct digest *digest_slot(struct compaction *c, uint64_t a, uint64_t b)
{
    for (uint64_t i = ds_mix64(a) & c->mask;; i = (i + 1) & c->mask) {
        struct digest *d = &c->slots[i];
        if (d->present == 0 || (d->a == a && d->b == b)) {
            return d;
        }
    }
}

static int digests_grow(struct compaction *c)
{
    uint64_t capacity = c->slots == NULL ? 1024 : (c->mask + 1) * 2;
    struct digest *old = c->slots;
    uint64_t old_capacity = c->slots == NULL ? 0 : c->mask + 1;
    c->slots = calloc(capacity, sizeof(*c->slots));
    if (c->slots == NULL) {
        c->slots = old;
        return -ENOMEM;
    }
    c->mask = capacity - 1;
    for (uint64_t i = 0; i < old_capacity; i++) {
        if (old[i].present != 0) {
            *digest_slot(c, old[i].a, old[i].b) = old[i];
        }
    }
    free(old);
    return 0;
}

/* True when the slice's time is up at the first event of a new block. */
static bool slice_over(struct compaction *c)
{
    if (c->block.segment_id == c->pos.segment_id && c->block.offset == c->pos.offset) {
        return false; /* inside the block the slice started with, or one under way */
    }
    c->block = c->pos;
    return ds_clock_ns() >= c->deadline_ns;
}

/* Pass 1: every retraction into the multiset. */
static int collect_retraction(const struct ds_event *e, const struct ds_source *source, void *user)
{
    (void)source;
    struct compaction *c = user;
    if (slice_over(c)) {
        return COMPACTION_PAUSE;
    }
    if (!e->retract) {
        return 0;
    }
    if ((c->used + 1) * 2 > c->mask + 1 || c->slots == NULL) {
        int rc = digests_grow(c);
        if (rc != 0) {
            return rc;
        }
    }
    uint64_t a = 0, b = 0;
    digest_of(e, &a, &b);
    struct digest *d = digest_slot(c, a, b);
    c->used += d->present == 0;
    *d = (struct digest){.a = a, .b = b, .count = d->count + 1, .present = 1};
    c->retractions++;
    return 0;
}

/* Pass 2: a row a retraction cancels is dropped, every other row is kept. */
static int keep_row(const struct ds_event *e, const struct ds_source *source, void *user)
{
    struct compaction *c = user;
    if (slice_over(c)) {
        return COMPACTION_PAUSE;
    }
    if (e->retract && c->collect) {
        return 0; /* the orders model drops it with the row it cancels */
    }
    if (c->slots != NULL) {
        uint64_t a = 0, b = 0;
        digest_of(e, &a, &b);
        struct digest *d = digest_slot(c, a, b);
        if (d->present != 0 && d->count > 0) {
            d->count--;
            return 0;
        }
    }
    c->kept++;
    return store_write_rewrite_append(c->st, &c->shadow, e, source);
}

/* The tail: rows and retractions appended since the start are kept as they are (a retraction
 * there may cancel a row of the rewrite; the next compaction removes both). */
static int keep_all(const struct ds_event *e, const struct ds_source *source, void *user)
{
    struct compaction *c = user;
    if (slice_over(c)) {
        return COMPACTION_PAUSE;
    }
    c->kept++;
    return store_write_rewrite_append(c->st, &c->shadow, e, source);
}

bool store_orders_compact_tailing(const struct storage *st)
{
    return st->compaction != NULL && st->compaction->phase == COMPACTION_TAIL;
}

void store_orders_compact_stop(struct storage *st)
{
    struct compaction *c = st->compaction;
    if (c == NULL) {
        return;
    }
    if (st->rewrite == &c->shadow) {
        store_write_rewrite_abort(st);
    }
    free(c->slots);
    free(c);
    st->compaction = NULL;
}

int store_orders_compact_start(struct storage *st, struct storage *reader, const struct part *p,
                               bool merge)
{
    ASSERT(st->compaction == NULL);
    ASSERT(p->segment_id != 0);
    struct part *rp = store_part_find(reader, p->day, p->shard);
    ASSERT(rp != NULL && rp->segment_id == p->segment_id);
    struct compaction *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    *c = (struct compaction){.st = st,
                             .reader = reader,
                             .day = p->day,
                             .shard = p->shard,
                             .merge = merge,
                             .collect = st->cfg.model == STORAGE_MODEL_ORDERS,
                             .phase = COMPACTION_COLLECT,
                             .start_ns = ds_clock_ns()};
    int rc = store_read_totals(reader, rp, NULL, 0, &c->before);
    if (rc != 0) {
        free(c);
        return rc;
    }
    st->compaction = c;
    return 0;
}

/* Runs the current pass from c->pos until it ends (0), the slice ends (COMPACTION_PAUSE) or an
 * error. */
static int compaction_pass(struct compaction *c, const struct part *rp)
{
    static const storage_source_event_fn fns[] = {
        [COMPACTION_COLLECT] = collect_retraction,
        [COMPACTION_KEEP] = keep_row,
        [COMPACTION_TAIL] = keep_all,
    };
    if (c->phase == COMPACTION_COLLECT && !c->collect) {
        return 0;
    }
    c->block = c->pos;
    return store_read_scan_from(c->reader, rp, &c->pos, NULL, fns[c->phase], c);
}

/* Moves to the next pass once one ended: 0 to go on, 1 when there is nothing to rewrite. */
static int compaction_next(struct storage *st, struct compaction *c, const struct part *p)
{
    if (c->phase == COMPACTION_COLLECT) {
        if (c->retractions == 0 && !c->merge) {
            return 1;
        }
        int rc = store_write_rewrite_begin(st, p, &c->shadow);
        if (rc != 0) {
            return rc;
        }
        c->pos = (struct storage_position){0};
    }
    c->phase = c->phase == COMPACTION_COLLECT ? COMPACTION_KEEP : COMPACTION_TAIL;
    return 0;
}

/* What one slice's work came to, besides an error. */
enum compaction_outcome {
    COMPACTION_PAUSED = COMPACTION_PAUSE, /* the slice's time is up */
    COMPACTION_CAUGHT_UP,                 /* the rewrite holds every row p committed */
    COMPACTION_NOTHING,                   /* no retraction, no merge: nothing to rewrite */
};

static int compaction_report(struct storage *st, struct compaction *c, struct part *p,
                             const struct storage_partition_total *replaced,
                             struct storage_compact_report *out)
{
    struct storage_partition_total after = {0};
    int rc = store_read_totals(st, p, NULL, 0, &after);
    if (rc != 0) {
        return rc;
    }
    ASSERT(after.count == replaced->count);
    ASSERT(after.amount_units == replaced->amount_units);
    *out = (struct storage_compact_report){.day = p->day,
                                           .shard = p->shard,
                                           .rows_before = replaced->rows,
                                           .rows_after = after.rows,
                                           .bytes_before = replaced->bytes,
                                           .bytes_after = after.bytes,
                                           .ns = ds_clock_ns() - c->start_ns,
                                           .slices = c->slices,
                                           .slice_ns_max = c->slice_ns_max};
    return 0;
}

/* One slice's passes: a negative code or an enum compaction_outcome. Once caught up, *replaced
 * has the totals of the partition the rewrite replaces. */
static int compaction_work(struct storage *st, struct compaction *c, struct part *p,
                           struct storage_partition_total *replaced)
{
    for (;;) {
        struct part *rp = store_part_find(c->reader, c->day, c->shard);
        if (rp == NULL || rp->segment_id == 0) {
            return -DS_ECORRUPT; /* the writer still has it: the reader must see it too */
        }
        int rc = compaction_pass(c, rp);
        if (rc != 0) {
            return rc;
        }
        if (c->phase == COMPACTION_TAIL) {
            ASSERT(rp->segment_id == p->segment_id && rp->committed_end == p->committed_end);
            rc = store_read_totals(c->reader, rp, NULL, 0, replaced);
            return rc == 0 ? COMPACTION_CAUGHT_UP : rc;
        }
        rc = compaction_next(st, c, p);
        if (rc != 0) {
            return rc == 1 ? COMPACTION_NOTHING : rc;
        }
        if (c->phase == COMPACTION_TAIL) {
            return COMPACTION_PAUSED; /* the tail starts with the reader refreshed */
        }
    }
}

int store_orders_compact_step(struct storage *st, uint64_t deadline_ns,
                              struct storage_compact_report *out)
{
    struct compaction *c = st->compaction;
    ASSERT(c != NULL);
    ASSERT(st->touched_count == 0 && st->pending_events == 0);
    uint64_t slice_start_ns = ds_clock_ns();
    struct part *p = store_part_find(st, c->day, c->shard);
    bool given_up = c->phase != COMPACTION_COLLECT && st->rewrite != &c->shadow;
    if (p == NULL || p->day < store_floor(st) || given_up) {
        store_orders_compact_stop(st); /* dropped by retention, or outgrew its gap */
        return 0;
    }
    c->deadline_ns = deadline_ns;
    struct storage_partition_total replaced = {0};
    int rc = compaction_work(st, c, p, &replaced);
    if (rc == COMPACTION_PAUSED) {
        rc = st->rewrite == &c->shadow ? store_write_rewrite_sync(st, &c->shadow) : 0;
        rc = rc == 0 ? COMPACTION_PAUSED : rc;
    } else if (rc == COMPACTION_CAUGHT_UP) {
        rc = store_write_rewrite_commit(st, p, &c->shadow);
        rc = rc == 0 ? COMPACTION_CAUGHT_UP : rc;
    }
    uint64_t slice_ns = ds_clock_ns() - slice_start_ns;
    c->slices++;
    c->slice_ns_max = slice_ns > c->slice_ns_max ? slice_ns : c->slice_ns_max;
    if (rc == COMPACTION_PAUSED) {
        return 0;
    }
    if (rc == COMPACTION_CAUGHT_UP) {
        rc = compaction_report(st, c, p, &replaced, out);
        rc = rc == 0 ? 1 : rc;
    }
    if (rc < 0) {
        st->failed = st->failed != 0 ? st->failed : rc;
    }
    store_orders_compact_stop(st);
    return rc == COMPACTION_NOTHING ? 0 : rc;
}
