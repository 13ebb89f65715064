/*
 * fsck --repair's reconciliation of the orders model (fsck_orders.h): after blocks were
 * quarantined, the orders-by-id store and the partitions agree again, so that the retractions
 * balance and every count holds each order once.
 *
 * The affected orders are those that the balance check's broken partitions hold a row or a
 * retraction of, and those the store places in a broken partition or in one without data (a
 * superset: reconciling an intact order changes nothing). One scan of every partition then
 * collects, for those orders only, each row and retraction (partition, append position, a hash
 * of the fields a retraction repeats) and copies of two rows: the one equal to the store's
 * current version, and the newest present. The newest present version (the target) is:
 *   1. the store's current version, when a row of it is still in its partition: the store is
 *      the writer's own record of the newest, and only its row can have been lost (so a second
 *      run after a crash keeps what the first decided);
 *   2. otherwise the newest row of the order still in the data: of two rows carrying a
 *      version the higher; else of two rows of one partition the later in append order; else
 *      the greater ts (rows without a version in two partitions carry nothing that orders
 *      them: an update moving the day moves the ts; the block's source offsets would, but a
 *      block's range covers many events);
 *   3. no row at all: the order is lost and leaves the store. An order the store does not hold
 *      keeps no row (the store's absence is a release or a removal whose retraction was lost).
 * The store then takes the targets (one commit: puts of reverted orders, tombstones of lost
 * ones); after it, each partition in which some affected order's rows and retractions do not
 * leave exactly its target row (when the target is there) is rewritten with the rewrite of
 * compaction (store_write.h): every row and retraction of other orders kept in append order,
 * none of the affected orders', and the target row once. Each rewrite is one MANIFEST.
 *
 * Crash: the reverted and lost orders are recorded in DIR/quarantine/<time>.orders.jsonl
 * (synced) first. A crash before the store's commit leaves the quarantined state, which a
 * second run reconciles the same way; after it, rule 1 keeps every target the store now holds
 * (its row is present, in a rewritten partition or an old one), so a second run only rewrites
 * the partitions left; a crash inside a rewrite leaves the old partition (recovery removes the
 * unfinished rewrite).
 *
 * Memory: the affected orders (with two row copies each), their rows' entries (24 bytes), a
 * flag per partition; never the whole store.
 *
 * Rejected: appending compensating rows and retractions through the writer. A row whose block
 * was quarantined leaves its retraction behind; nothing appended later can come before it in
 * append order, so the balance rule and the summaries' no-negative-prefix check would have to
 * accept a retraction before its row, and with it the writer bugs they exist to catch.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/fsck_orders.h"
#include "storage/ids.h"
#include "storage/orders.h"
#include "storage/quarantine.h"
#include "storage/storage.h"
#include "storage/store.h"
#include "storage/store_write.h"

#define RECONCILE_SEED 0x72656d656e646564ull
#define RECONCILE_NONE UINT32_MAX
/* Rows of one order left uncancelled in one partition that the check follows; more is broken. */
#define RECONCILE_GROUP_ROWS_MAX 16u

enum reconcile_outcome {
    RECONCILE_UNCHANGED, /* its current version keeps its row */
    RECONCILE_REVERTED,  /* falls back to the newest version present */
    RECONCILE_LOST,      /* no version left: leaves the store */
    RECONCILE_ABSENT,    /* not in the store: keeps no row */
};

/* A row kept to be written again (and, for a reverted order, to be put in the store). */
struct reconcile_row {
    bool set;
    uint32_t part;
    uint64_t hash;
    struct ds_event event; /* event.items points to items */
    uint8_t *items;
};

struct reconcile_order {
    struct ds_id id;
    bool looked_up; /* in_store and cur are known */
    bool in_store;
    struct storage_order cur; /* cur.items points to cur_items */
    uint8_t *cur_items;
    uint64_t cur_hash;
    struct reconcile_row cur_row; /* a row equal to cur in cur's partition */
    struct reconcile_row best;    /* the newest row present */
    enum reconcile_outcome outcome;
    const struct reconcile_row *target; /* cur_row, best or NULL */
    uint32_t written_part;              /* the rewrite wrote its target row in part - 1 */
};

/* One row or retraction of an affected order. */
struct reconcile_entry {
    uint32_t order;
    uint32_t part;
    uint64_t seq; /* scan order: partitions ascending, append order within */
    uint64_t hash;
    bool retract;
};

struct reconcile {
    const char *dir;
    FILE *out;
    const struct storage_fsck_options *options;
    uint32_t step;
    struct storage *st;     /* the writer (holds the lock) */
    struct storage *reader; /* scans and store visits, as of the state before any change */
    struct storage_part_id *parts;
    uint32_t part_count;
    bool *broken;
    bool *rewrite;
    struct reconcile_order *orders;
    uint32_t order_count;
    uint32_t order_capacity;
    uint32_t *slots; /* order index + 1, 0 empty */
    size_t slot_mask;
    struct reconcile_entry *entries;
    size_t entry_count;
    size_t entry_capacity;
    uint32_t part_index; /* the partition being scanned */
    uint64_t seq;
    struct part shadow;
    uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
    int rc; /* a callback's failure */
};

/* ---- orders by id -------------------------------------------------------------------------- */

static uint64_t id_hash(const struct ds_id *id)
{
    if (!id->is_string) {
        return ds_mix64((uint64_t)id->value ^ RECONCILE_SEED);
    }
    uint64_t h = ds_mix64(RECONCILE_SEED + id->len);
    for (uint8_t i = 0; i < id->len; i++) {
        h = ds_mix64(h ^ (uint8_t)id->text[i]);
    }
    return h;
}

static uint64_t row_hash(const struct ds_event *e)
{
    return store_orders_row_hash(RECONCILE_SEED, &e->order_id, &e->customer_id, e->ts_ms, e->status,
                                 e->status_len, e->amount_units);
}

static uint32_t *order_slot(struct reconcile *r, const struct ds_id *id)
{
    for (size_t i = (size_t)id_hash(id) & r->slot_mask;; i = (i + 1) & r->slot_mask) {
        uint32_t *s = &r->slots[i];
        if (*s == 0 || ds_id_equal(&r->orders[*s - 1].id, id)) {
            return s;
        }
    }
}

static uint32_t order_find(struct reconcile *r, const struct ds_id *id)
{
    if (r->slots == NULL) {
        return RECONCILE_NONE;
    }
    uint32_t *s = order_slot(r, id);
    return *s == 0 ? RECONCILE_NONE : *s - 1;
}

static int slots_grow(struct reconcile *r)
{
    size_t capacity = r->slots == NULL ? 1024 : 2 * (r->slot_mask + 1);
    uint32_t *old = r->slots;
    r->slots = calloc(capacity, sizeof(*r->slots));
    if (r->slots == NULL) {
        r->slots = old;
        return -ENOMEM;
    }
    r->slot_mask = capacity - 1;
    for (uint32_t i = 0; i < r->order_count; i++) {
        *order_slot(r, &r->orders[i].id) = i + 1;
    }
    free(old);
    return 0;
}

/* The index of order id, added when new. */
static int order_add(struct reconcile *r, const struct ds_id *id, uint32_t *index)
{
    uint32_t found = order_find(r, id);
    if (found != RECONCILE_NONE) {
        *index = found;
        return 0;
    }
    if (r->slots == NULL || 2 * ((size_t)r->order_count + 1) > r->slot_mask + 1) {
        int rc = slots_grow(r);
        if (rc != 0) {
            return rc;
        }
    }
    if (r->order_count == r->order_capacity) {
        if (r->order_capacity >= UINT32_MAX / 4) {
            return -DS_ELIMIT;
        }
        uint32_t capacity = r->order_capacity == 0 ? 256 : 2 * r->order_capacity;
        void *grown = realloc(r->orders, capacity * sizeof(*r->orders));
        if (grown == NULL) {
            return -ENOMEM;
        }
        r->orders = grown;
        r->order_capacity = capacity;
    }
    struct reconcile_order *o = &r->orders[r->order_count];
    *o = (struct reconcile_order){.id = *id};
    *order_slot(r, id) = r->order_count + 1;
    *index = r->order_count++;
    return 0;
}

static uint8_t *items_copy(const uint8_t *items, uint16_t bytes)
{
    uint8_t *copy = malloc(bytes > 0 ? bytes : 1);
    if (copy != NULL && bytes > 0) {
        memcpy(copy, items, bytes);
    }
    return copy;
}

static int order_set_current(struct reconcile *r, uint32_t index, const struct storage_order *cur)
{
    struct reconcile_order *o = &r->orders[index];
    ASSERT(!o->looked_up);
    uint8_t *items = cur->items != NULL ? items_copy(cur->items, cur->items_bytes) : NULL;
    if (cur->items != NULL && items == NULL) {
        return -ENOMEM;
    }
    o->looked_up = true;
    o->in_store = true;
    o->cur = *cur;
    o->cur_items = items;
    o->cur.items = items;
    o->cur_hash =
        store_orders_row_hash(RECONCILE_SEED, &cur->order_id, &cur->customer_id, cur->ts_ms,
                              cur->status, cur->status_len, cur->amount_units);
    return 0;
}

static int row_copy(struct reconcile_row *dst, const struct ds_event *e, uint32_t part,
                    uint64_t hash)
{
    uint8_t *items = e->items != NULL ? items_copy(e->items, e->items_bytes) : NULL;
    if (e->items != NULL && items == NULL) {
        return -ENOMEM;
    }
    free(dst->items);
    *dst = (struct reconcile_row){.set = true, .part = part, .hash = hash, .event = *e};
    dst->items = items;
    dst->event.items = items;
    return 0;
}

/* ---- partitions ---------------------------------------------------------------------------- */

static int part_collect(int32_t day, uint32_t shard, void *user)
{
    struct reconcile *r = user;
    ASSERT(r->part_count < STORAGE_PARTITIONS_MAX);
    r->parts[r->part_count++] = (struct storage_part_id){.day = day, .shard = shard};
    return 0;
}

static uint32_t part_find(const struct reconcile *r, int32_t day, uint32_t shard)
{
    uint32_t index = fsck_part_find(r->parts, r->part_count, day, shard);
    return index == FSCK_PART_NONE ? RECONCILE_NONE : index;
}

/* ---- finding the affected orders ----------------------------------------------------------- */

/* The store's orders placed in a broken partition or one without data. */
static int store_take(const struct storage_order *order, void *user)
{
    struct reconcile *r = user;
    uint32_t part = part_find(r, order->day, order->shard);
    if (part != RECONCILE_NONE && !r->broken[part]) {
        return 0;
    }
    uint32_t index = 0;
    r->rc = order_add(r, &order->order_id, &index);
    r->rc = r->rc == 0 ? order_set_current(r, index, order) : r->rc;
    return r->rc != 0 ? 1 : 0;
}

/* Every order a broken partition holds a row or a retraction of. */
static int broken_take(const struct ds_event *e, void *user)
{
    struct reconcile *r = user;
    uint32_t index = 0;
    r->rc = order_add(r, &e->order_id, &index);
    return r->rc != 0 ? 1 : 0;
}

static int orders_look_up(struct reconcile *r)
{
    for (uint32_t i = 0; i < r->order_count; i++) {
        struct reconcile_order *o = &r->orders[i];
        if (o->looked_up) {
            continue;
        }
        struct storage_order cur;
        int rc = storage_order_get(r->reader, &o->id, &cur, r->scratch, sizeof(r->scratch));
        if (rc == -ENOENT) {
            o->looked_up = true;
            continue;
        }
        rc = rc == 0 ? order_set_current(r, i, &cur) : rc;
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int scan_parts(struct reconcile *r, bool broken_only, storage_event_fn fn)
{
    for (uint32_t i = 0; i < r->part_count; i++) {
        if (broken_only && !r->broken[i]) {
            continue;
        }
        r->part_index = i;
        int rc = storage_partition_scan(r->reader, r->parts[i].day, r->parts[i].shard, fn, r);
        if (rc != 0) {
            return rc == 1 && r->rc != 0 ? r->rc : (rc == 1 ? -EIO : rc);
        }
    }
    return 0;
}

/* ---- collecting their rows ----------------------------------------------------------------- */

/* Whether row e (in part, seen after best) is newer than best (rule 2 above). */
static bool row_newer(const struct ds_event *e, uint32_t part, const struct reconcile_row *best)
{
    if (!best->set) {
        return true;
    }
    const struct ds_event *b = &best->event;
    if (e->has_version && b->has_version && e->version != b->version) {
        return e->version > b->version;
    }
    if (part == best->part) {
        return true; /* later in append order */
    }
    return e->ts_ms >= b->ts_ms;
}

static int entry_take(const struct ds_event *e, void *user)
{
    struct reconcile *r = user;
    uint64_t seq = r->seq++;
    uint32_t index = order_find(r, &e->order_id);
    if (index == RECONCILE_NONE) {
        return 0;
    }
    if (r->entry_count == r->entry_capacity) {
        size_t capacity = r->entry_capacity == 0 ? 1024 : 2 * r->entry_capacity;
        void *grown = realloc(r->entries, capacity * sizeof(*r->entries));
        if (grown == NULL) {
            r->rc = -ENOMEM;
            return 1;
        }
        r->entries = grown;
        r->entry_capacity = capacity;
    }
    uint64_t hash = row_hash(e);
    r->entries[r->entry_count++] = (struct reconcile_entry){
        .order = index, .part = r->part_index, .seq = seq, .hash = hash, .retract = e->retract};
    if (e->retract) {
        return 0;
    }
    struct reconcile_order *o = &r->orders[index];
    const struct storage_part_id *p = &r->parts[r->part_index];
    if (o->in_store && !o->cur_row.set && hash == o->cur_hash && p->day == o->cur.day &&
        p->shard == o->cur.shard) {
        r->rc = row_copy(&o->cur_row, e, r->part_index, hash);
    }
    if (r->rc == 0 && row_newer(e, r->part_index, &o->best)) {
        r->rc = row_copy(&o->best, e, r->part_index, hash);
    }
    return r->rc != 0 ? 1 : 0;
}

static void orders_decide(struct reconcile *r, uint64_t *reverted, uint64_t *lost)
{
    for (uint32_t i = 0; i < r->order_count; i++) {
        struct reconcile_order *o = &r->orders[i];
        ASSERT(o->looked_up);
        if (!o->in_store) {
            o->outcome = RECONCILE_ABSENT;
            o->target = NULL;
        } else if (o->cur_row.set) {
            o->outcome = RECONCILE_UNCHANGED;
            o->target = &o->cur_row;
        } else if (o->best.set) {
            o->outcome = RECONCILE_REVERTED;
            o->target = &o->best;
            (*reverted)++;
        } else {
            o->outcome = RECONCILE_LOST;
            o->target = NULL;
            (*lost)++;
        }
    }
}

static int entry_compare(const void *a, const void *b)
{
    const struct reconcile_entry *x = a;
    const struct reconcile_entry *y = b;
    if (x->order != y->order) {
        return x->order < y->order ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : (x->seq > y->seq ? 1 : 0);
}

/* Whether entries [from, to) (one order, one partition, in append order) leave exactly the
 * order's target row there when it is there, nothing otherwise, every retraction matched. */
static bool group_settled(const struct reconcile *r, size_t from, size_t to)
{
    const struct reconcile_entry *first = &r->entries[from];
    const struct reconcile_row *target = r->orders[first->order].target;
    uint64_t left[RECONCILE_GROUP_ROWS_MAX];
    uint32_t left_count = 0;
    for (size_t i = from; i < to; i++) {
        const struct reconcile_entry *e = &r->entries[i];
        if (!e->retract) {
            if (left_count == RECONCILE_GROUP_ROWS_MAX) {
                return false;
            }
            left[left_count++] = e->hash;
            continue;
        }
        uint32_t k = 0;
        while (k < left_count && left[k] != e->hash) {
            k++;
        }
        if (k == left_count) {
            return false; /* a retraction cancelling no earlier row */
        }
        left[k] = left[--left_count];
    }
    if (target != NULL && target->part == first->part) {
        return left_count == 1 && left[0] == target->hash;
    }
    return left_count == 0;
}

/* Marks the partitions to rewrite. */
static void parts_mark(struct reconcile *r)
{
    if (r->entry_count > 1) { /* entries is NULL when nothing was collected */
        qsort(r->entries, r->entry_count, sizeof(*r->entries), entry_compare);
    }
    size_t from = 0;
    while (from < r->entry_count) {
        const struct reconcile_entry *first = &r->entries[from];
        size_t to = from + 1;
        /* entries of one order and one partition are adjacent: a partition is scanned whole */
        while (to < r->entry_count && r->entries[to].order == first->order &&
               r->entries[to].part == first->part) {
            to++;
        }
        if (!group_settled(r, from, to)) {
            r->rewrite[first->part] = true;
        }
        from = to;
    }
}

/* ---- the record of what changed ------------------------------------------------------------ */

void fsck_json_id(FILE *f, const struct ds_id *id)
{
    if (!id->is_string) {
        fprintf(f, "%lld", (long long)id->value);
        return;
    }
    fputc('"', f);
    for (uint8_t i = 0; i < id->len; i++) {
        unsigned char c = (unsigned char)id->text[i];
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

void fsck_json_version(FILE *f, const char *name, int32_t day, uint32_t shard, bool has_version,
                       int64_t version, int64_t ts_ms, const char *status, uint8_t status_len)
{
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    fprintf(f, ",\"%s\":{\"day\":\"%s\",\"shard\":%u,\"ts_ms\":%lld,\"version\":", name, date,
            shard, (long long)ts_ms);
    if (has_version) {
        fprintf(f, "%lld", (long long)version);
    } else {
        fputs("null", f);
    }
    fputs(",\"status\":\"", f);
    for (uint8_t i = 0; i < status_len; i++) {
        unsigned char c = (unsigned char)status[i];
        if (c < 0x20 || c == '"' || c == '\\') {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

static void record_line(const struct reconcile *r, const struct reconcile_order *o, FILE *f)
{
    fputs("{\"order\":", f);
    fsck_json_id(f, &o->id);
    fprintf(f, ",\"outcome\":\"%s\"", o->outcome == RECONCILE_REVERTED ? "reverted" : "lost");
    const struct storage_order *c = &o->cur;
    fsck_json_version(f, "had", c->day, c->shard, c->has_version, c->version, c->ts_ms, c->status,
                      c->status_len);
    /* The count a restore that brings this version back gives the order again: the versions
     * it re-applies were counted once already. */
    fprintf(f, ",\"versions_seen\":%" PRIu32 "}", c->versions_seen);
    if (o->target == NULL) {
        fputs(",\"now\":null}\n", f);
        return;
    }
    const struct ds_event *e = &o->target->event;
    const struct storage_part_id *p = &r->parts[o->target->part];
    fsck_json_version(f, "now", p->day, p->shard, e->has_version, e->version, e->ts_ms, e->status,
                      e->status_len);
    fputs("}}\n", f);
}

/* DIR/quarantine/<now_ms>.orders.jsonl: one line per reverted or lost order, synced (a
 * temporary file renamed into place, then the directory synced). */
static int record_write(const struct reconcile *r, char *path)
{
    int rc = quarantine_prepare(r->dir);
    if (rc != 0) {
        return rc;
    }
    char tmp[DS_PATH_MAX];
    int n = snprintf(path, DS_PATH_MAX, "%s/quarantine/%lld.orders.jsonl", r->dir,
                     (long long)ds_clock_realtime_ms());
    if (n < 0 || n >= DS_PATH_MAX) {
        return -ENAMETOOLONG;
    }
    n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        return -ENAMETOOLONG;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        return -errno;
    }
    for (uint32_t i = 0; i < r->order_count; i++) {
        const struct reconcile_order *o = &r->orders[i];
        if (o->outcome == RECONCILE_REVERTED || o->outcome == RECONCILE_LOST) {
            record_line(r, o, f);
        }
    }
    rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
    rc = fclose(f) != 0 && rc == 0 ? -errno : rc;
    rc = rc == 0 && rename(tmp, path) != 0 ? -errno : rc;
    char dir[DS_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/quarantine", r->dir);
    rc = rc == 0 ? ds_fsync_dir(dir) : rc;
    if (rc != 0) {
        ds_log_error("%s: cannot write the record of reconciled orders: %s", path, ds_strerror(rc));
        (void)unlink(tmp);
    }
    return rc;
}

/* ---- changing the store, then the partitions ----------------------------------------------- */

/* The store's record of a reverted order: its target row, keeping the source partition and
 * the count of versions seen. */
static void order_of_target(const struct reconcile *r, const struct reconcile_order *o,
                            struct storage_order *out)
{
    const struct ds_event *e = &o->target->event;
    const struct storage_part_id *p = &r->parts[o->target->part];
    *out = (struct storage_order){.order_id = e->order_id,
                                  .has_version = e->has_version,
                                  .version = e->has_version ? e->version : 0,
                                  .ts_ms = e->ts_ms,
                                  .day = p->day,
                                  .shard = p->shard,
                                  .status_len = e->status_len,
                                  .amount_units = e->amount_units,
                                  .customer_id = e->customer_id,
                                  .items_bytes = e->items_bytes,
                                  .items = e->items,
                                  .versions_seen = o->cur.versions_seen,
                                  .source_partition = o->cur.source_partition};
    memcpy(out->status, e->status, e->status_len);
}

static int store_change(struct reconcile *r, const struct reconcile_order *o)
{
    if (o->outcome == RECONCILE_LOST) {
        return ids_remove(r->st->ids, &o->cur);
    }
    struct storage_order next;
    order_of_target(r, o, &next);
    return ids_put(r->st->ids, &next);
}

/* Puts the targets of reverted orders and removes lost ones, committed (in several commits when
 * they pass the store's pending bound: each commit holds only targets, so any prefix is a state
 * a second run finishes). */
static int store_apply(struct reconcile *r)
{
    ASSERT(r->st->ids != NULL);
    for (uint32_t i = 0; i < r->order_count; i++) {
        const struct reconcile_order *o = &r->orders[i];
        if (o->outcome != RECONCILE_REVERTED && o->outcome != RECONCILE_LOST) {
            continue;
        }
        int rc = store_change(r, o);
        if (rc == -EAGAIN) {
            rc = storage_commit(r->st);
            rc = rc == 0 ? store_change(r, o) : rc;
        }
        if (rc != 0) {
            return rc;
        }
    }
    return storage_commit(r->st);
}

/* A crash point (tests). */
static void crash_point(struct reconcile *r)
{
    if (r->options->step_fn != NULL) {
        r->options->step_fn(r->step, r->options->step_user);
    }
    r->step++;
}

static int rewrite_take(const struct ds_event *e, void *user)
{
    struct reconcile *r = user;
    uint32_t index = order_find(r, &e->order_id);
    if (index == RECONCILE_NONE) {
        r->rc = store_write_rewrite_append(r->st, &r->shadow, e, NULL);
        return r->rc != 0 ? 1 : 0;
    }
    struct reconcile_order *o = &r->orders[index];
    if (o->target == NULL || o->target->part != r->part_index ||
        o->written_part == r->part_index + 1) {
        return 0; /* an affected order's row or retraction: only its target stays */
    }
    o->written_part = r->part_index + 1;
    r->rc = store_write_rewrite_append(r->st, &r->shadow, &o->target->event, NULL);
    return r->rc != 0 ? 1 : 0;
}

static int part_rewrite(struct reconcile *r, uint32_t index)
{
    const struct storage_part_id *id = &r->parts[index];
    struct part *p = store_part_find(r->st, id->day, id->shard);
    if (p == NULL || p->segment_id == 0) {
        return -DS_ECORRUPT; /* the reader saw data the writer does not know */
    }
    int rc = store_write_rewrite_begin(r->st, p, &r->shadow);
    if (rc != 0) {
        return rc;
    }
    r->part_index = index;
    rc = storage_partition_scan(r->reader, id->day, id->shard, rewrite_take, r);
    rc = rc == 1 ? (r->rc != 0 ? r->rc : -EIO) : rc;
    if (rc != 0) {
        store_write_rewrite_abort(r->st);
        return rc;
    }
    rc = store_write_rewrite_sync(r->st, &r->shadow);
    if (rc == 0) {
        crash_point(r);
        rc = store_write_rewrite_commit(r->st, p, &r->shadow);
    }
    if (rc == 0) {
        crash_point(r);
    }
    return rc;
}

/* ---- the run ------------------------------------------------------------------------------- */

static int writer_open(const char *dir, struct storage **out)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.io_mode = STORAGE_IO_SYNC;
    cfg.partitions_max = STORAGE_PARTITIONS_MAX;
    cfg.model = STORAGE_MODEL_ORDERS;
    return storage_open(&cfg, out);
}

/* Opens both handles and finds the affected orders with their store records. */
static int reconcile_find(struct reconcile *r)
{
    struct storage_part_id *broken = NULL;
    uint32_t broken_count = 0;
    int rc = fsck_orders_broken(r->dir, &broken, &broken_count);
    rc = rc == 0 ? writer_open(r->dir, &r->st) : rc;
    rc = rc == 0 ? storage_open_reader(r->dir, &r->reader) : rc;
    if (rc == 0) {
        r->parts = calloc(STORAGE_PARTITIONS_MAX, sizeof(*r->parts));
        r->broken = calloc(STORAGE_PARTITIONS_MAX, sizeof(*r->broken));
        r->rewrite = calloc(STORAGE_PARTITIONS_MAX, sizeof(*r->rewrite));
        rc = r->parts == NULL || r->broken == NULL || r->rewrite == NULL ? -ENOMEM : 0;
    }
    rc = rc == 0 ? storage_partition_visit(r->reader, part_collect, r) : rc;
    for (uint32_t i = 0; rc == 0 && i < broken_count; i++) {
        uint32_t part = part_find(r, broken[i].day, broken[i].shard);
        if (part != RECONCILE_NONE) {
            r->broken[part] = true;
        }
    }
    free(broken);
    if (rc == 0) {
        rc = storage_order_visit(r->reader, store_take, r);
        rc = rc == 1 && r->rc != 0 ? r->rc : rc;
    }
    rc = rc == 0 ? scan_parts(r, true, broken_take) : rc;
    return rc == 0 ? orders_look_up(r) : rc;
}

static void reconcile_free(struct reconcile *r)
{
    for (uint32_t i = 0; i < r->order_count; i++) {
        free(r->orders[i].cur_items);
        free(r->orders[i].cur_row.items);
        free(r->orders[i].best.items);
    }
    free(r->orders);
    free(r->slots);
    free(r->entries);
    free(r->parts);
    free(r->broken);
    free(r->rewrite);
    storage_close(r->reader);
    storage_close(r->st);
    free(r);
}

static void say(const struct reconcile *r, uint64_t reverted, uint64_t lost, uint32_t rewritten,
                const char *record)
{
    if (r->out == NULL) {
        return;
    }
    fprintf(r->out,
            "%s: reconciled the orders with the data: %llu orders reverted to the newest version "
            "present, %llu lost, %u partitions rewritten%s%s\n",
            r->dir, (unsigned long long)reverted, (unsigned long long)lost, rewritten,
            record[0] != '\0' ? "; orders listed in " : "", record);
}

int fsck_reconcile(const char *dir, const struct storage_fsck_options *options,
                   struct storage_fsck_report *report)
{
    FILE *out = options->report_file;
    struct reconcile *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    r->dir = dir;
    r->out = out;
    r->options = options;
    int rc = reconcile_find(r);
    rc = rc == 0 ? scan_parts(r, false, entry_take) : rc;
    uint64_t reverted = 0;
    uint64_t lost = 0;
    char record[DS_PATH_MAX] = "";
    if (rc == 0) {
        orders_decide(r, &reverted, &lost);
        parts_mark(r);
        rc = reverted + lost > 0 ? record_write(r, record) : 0;
    }
    if (rc == 0) {
        crash_point(r);
        rc = store_apply(r);
    }
    if (rc == 0) {
        crash_point(r);
    }
    uint32_t rewritten = 0;
    for (uint32_t i = 0; rc == 0 && i < r->part_count; i++) {
        if (r->rewrite[i]) {
            rc = part_rewrite(r, i);
            rewritten++;
        }
    }
    if (rc == 0) {
        report->orders_reverted += reverted;
        report->orders_lost += lost;
        say(r, reverted, lost, rewritten, record);
    } else if (out != NULL) {
        fprintf(out, "%s: reconciling the orders with the data failed: %s\n", dir, ds_strerror(rc));
    }
    reconcile_free(r);
    return rc;
}
