/*
 * fsck's balance check of the orders model: the retractions cancel rows, and the
 * rows left are the orders' current versions.
 *
 * For each applied version the writer of the orders model appends a retraction of the
 * superseded version to that version's (day, shard) partition, always after it, and keeps each
 * order's current version in the orders-by-id store, in the same commit. So in a consistent
 * directory, per partition and in append order, every retraction cancels an earlier, not yet
 * cancelled row with the same (order id, customer, ts, status, amount), and the rows left are,
 * as a multiset, exactly the current versions the store places there. Checksums cannot see a
 * break of this: a block quarantined by --repair, a lost retraction or a store that disagrees
 * with the rows all pass them, and each makes counts wrong.
 *
 * Memory, for stores of tens of millions of orders: one visit of the store reduces each
 * current order to a 16-byte digest (a 64-bit hash of those five fields and the index of its
 * partition), grouped by partition in place; then one partition at a time is scanned into an
 * open-addressing table of 16-byte slots (hash, rows not cancelled, current orders), at most
 * half full. The check holds 16 bytes per order plus 32..64 bytes per distinct row of the
 * partition being scanned, never the rows of two partitions. Rows are compared by hash: two
 * different rows of one partition sharing 64 bits (odds about n^2 / 2^65 for n rows) could
 * hide a violation, never invent one.
 *
 * Naming a violation needs the full order id, which digests do not keep: a retraction that
 * cancels nothing is named while it is scanned; the excess rows of a partition by a second
 * scan of it, and orders without their row by a second visit of the store, both only when such
 * violations exist, and only for the first FSCK_ORDERS_NAMED_MAX.
 *
 * The check opens a reader handle of its own: a reader settles the directory's model, loads
 * the store as of the commit it opened at, and scans partitions up to that same commit, so a
 * writer committing meanwhile cannot make a consistent directory look unbalanced.
 *
 * Rejected: comparing full rows (ids of up to 64 bytes: about 200 bytes per order instead of
 * 16), and one walk of the store per partition (as many reads of the whole store as
 * partitions).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/data_model.h"
#include "storage/fsck_orders.h"
#include "storage/orders.h"
#include "storage/storage.h"
#include "storage/store.h"

#define FSCK_ORDERS_SEED 0x6473686172640e14ull
#define FSCK_ORDERS_SLOTS_MIN 64u
/* "order " + a quoted id + " (customer " + a quoted id + ts, status, amount and their words */
#define FSCK_ORDERS_TEXT_BYTES (4u * (2u * DS_ID_BYTES_MAX + DS_STATUS_BYTES_MAX) + 192u)

/* A current order, as the balance needs it. */
struct fsck_orders_digest {
    uint64_t hash;
    uint32_t part_index; /* into fsck_orders.parts */
    uint32_t reserved;
};
static_assert(sizeof(struct fsck_orders_digest) == 16, "16 bytes per order");

struct fsck_orders_slot {
    uint64_t hash;   /* 0: empty (a row hashing to 0 counts as 1) */
    uint32_t rows;   /* rows of the partition not cancelled so far */
    uint32_t orders; /* current orders the store places in the partition */
};
static_assert(sizeof(struct fsck_orders_slot) == 16, "16 bytes per slot");

/* Orders without their row, kept to be named by a second visit of the store. */
struct fsck_orders_missing {
    uint64_t hash;
    uint32_t part_index;
    uint32_t count;
};

struct fsck_orders {
    struct storage *st;
    FILE *out;
    struct storage_fsck_report *report;
    struct storage_part_id *parts; /* ascending (day, shard): the partitions with data */
    uint32_t part_count;
    struct fsck_orders_digest *digests; /* grouped by partition once collected */
    size_t *starts;                     /* partition i's digests: [starts[i], starts[i + 1]) */
    size_t digest_count;
    size_t digest_capacity;
    struct fsck_orders_slot *slots; /* the partition being checked */
    size_t slot_capacity;           /* a power of two */
    size_t slot_used;
    uint32_t part_index;
    uint32_t named; /* violations named on out, and missing ones reserved to be */
    struct fsck_orders_missing missing[FSCK_ORDERS_NAMED_MAX];
    uint32_t missing_count;
    bool *broken; /* per partition: its balance breaks (fsck_orders_broken only), or NULL */
    int rc;       /* a callback's failure (the scan's own are -DS_ECORRUPT or I/O errors) */
};

/* ---- hashing ------------------------------------------------------------------------------- */

/* The fields a retraction repeats (store_orders_row_hash); 0 marks an empty slot here. */
static uint64_t hash_row(const struct ds_id *order_id, const struct ds_id *customer_id,
                         int64_t ts_ms, const char *status, uint8_t status_len,
                         int64_t amount_units)
{
    uint64_t h = store_orders_row_hash(FSCK_ORDERS_SEED, order_id, customer_id, ts_ms, status,
                                       status_len, amount_units);
    return h != 0 ? h : 1;
}

static uint64_t hash_event(const struct ds_event *e)
{
    return hash_row(&e->order_id, &e->customer_id, e->ts_ms, e->status, e->status_len,
                    e->amount_units);
}

static uint64_t hash_order(const struct storage_order *o)
{
    return hash_row(&o->order_id, &o->customer_id, o->ts_ms, o->status, o->status_len,
                    o->amount_units);
}

/* ---- naming -------------------------------------------------------------------------------- */

/* bytes as a JSON-like quoted string, other bytes than printable ASCII as \xNN; dst has at
 * least 4 * len + 3 bytes. */
static void text_quote(const char *bytes, size_t len, char *dst)
{
    size_t at = 0;
    dst[at++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            snprintf(dst + at, 5, "\\x%02x", c);
            at += 4;
        } else {
            dst[at++] = (char)c;
        }
    }
    dst[at++] = '"';
    dst[at] = '\0';
}

static void id_text(const struct ds_id *id, char *dst)
{
    if (id->is_string) {
        text_quote(id->text, id->len, dst);
    } else {
        snprintf(dst, 24, "%lld", (long long)id->value);
    }
}

/* "order ID (customer ID, ts T, status S, amount A)" into dst (FSCK_ORDERS_TEXT_BYTES). */
static void row_text(const struct ds_id *order_id, const struct ds_id *customer_id, int64_t ts_ms,
                     const char *status, uint8_t status_len, int64_t amount_units, char *dst)
{
    char order[4 * DS_ID_BYTES_MAX + 3];
    char customer[4 * DS_ID_BYTES_MAX + 3];
    char quoted[4 * DS_STATUS_BYTES_MAX + 3];
    char ts[DS_TS_TEXT_SIZE];
    char amount[DS_AMOUNT_TEXT_SIZE];
    id_text(order_id, order);
    id_text(customer_id, customer);
    text_quote(status, status_len, quoted);
    if (ts_ms >= DS_TS_MS_MIN && ts_ms <= DS_TS_MS_MAX) {
        ds_ts_format(ts_ms, ts);
    } else {
        snprintf(ts, sizeof(ts), "%lld", (long long)ts_ms);
    }
    ds_amount_format(amount_units, amount);
    snprintf(dst, FSCK_ORDERS_TEXT_BYTES, "order %s (customer %s, ts %s, status %s, amount %s)",
             order, customer, ts, quoted, amount);
}

/* Whether one more violation may be named (and counts it as named). */
static bool name_next(struct fsck_orders *fo)
{
    if (fo->out == NULL || fo->named >= FSCK_ORDERS_NAMED_MAX) {
        return false;
    }
    fo->named++;
    return true;
}

static void name_event(struct fsck_orders *fo, const struct ds_event *e, const char *what)
{
    const struct storage_part_id *p = &fo->parts[fo->part_index];
    char path[DS_PATH_MAX];
    char text[FSCK_ORDERS_TEXT_BYTES];
    store_part_dir(fo->st, p->day, p->shard, path);
    row_text(&e->order_id, &e->customer_id, e->ts_ms, e->status, e->status_len, e->amount_units,
             text);
    fprintf(fo->out, "%s: %s %s\n", path, what, text);
}

static void name_order(struct fsck_orders *fo, const struct storage_order *o, const char *what)
{
    char path[DS_PATH_MAX];
    char text[FSCK_ORDERS_TEXT_BYTES];
    store_part_dir(fo->st, o->day, o->shard, path);
    row_text(&o->order_id, &o->customer_id, o->ts_ms, o->status, o->status_len, o->amount_units,
             text);
    fprintf(fo->out, "%s: the current version of %s %s\n", path, text, what);
}

/* ---- the current orders, by partition ------------------------------------------------------ */

static int part_collect(int32_t day, uint32_t shard, void *user)
{
    struct fsck_orders *fo = user;
    ASSERT(fo->part_count < STORAGE_PARTITIONS_MAX); /* a reader tracks no more */
    if (fo->part_count > 0) {
        const struct storage_part_id *last = &fo->parts[fo->part_count - 1];
        ASSERT(last->day < day || (last->day == day && last->shard < shard));
    }
    fo->parts[fo->part_count++] = (struct storage_part_id){.day = day, .shard = shard};
    return 0;
}

uint32_t fsck_part_find(const struct storage_part_id *parts, uint32_t count, int32_t day,
                        uint32_t shard)
{
    uint32_t low = 0;
    uint32_t high = count;
    while (low < high) {
        uint32_t mid = low + (high - low) / 2;
        const struct storage_part_id *p = &parts[mid];
        if (p->day == day && p->shard == shard) {
            return mid;
        }
        if (p->day < day || (p->day == day && p->shard < shard)) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    return FSCK_PART_NONE;
}

static uint32_t part_find(const struct fsck_orders *fo, int32_t day, uint32_t shard)
{
    return fsck_part_find(fo->parts, fo->part_count, day, shard);
}

static int order_collect(const struct storage_order *order, void *user)
{
    struct fsck_orders *fo = user;
    fo->report->orders++;
    uint32_t index = part_find(fo, order->day, order->shard);
    if (index == FSCK_PART_NONE) {
        fo->report->orders_mismatched++;
        if (name_next(fo)) {
            name_order(fo, order, "has no row there: the partition holds no data");
        }
        return 0;
    }
    if (fo->digest_count == fo->digest_capacity) {
        size_t capacity = fo->digest_capacity == 0 ? 4096 : 2 * fo->digest_capacity;
        void *grown = realloc(fo->digests, capacity * sizeof(*fo->digests));
        if (grown == NULL) {
            fo->rc = -ENOMEM;
            return 1;
        }
        fo->digests = grown;
        fo->digest_capacity = capacity;
    }
    fo->digests[fo->digest_count++] =
        (struct fsck_orders_digest){.hash = hash_order(order), .part_index = index};
    return 0;
}

/* Groups the digests by partition in place, partition i's in [starts[i], starts[i + 1])
 * (starts has part_count + 1 entries). American flag sort: one pass counts, then each swap
 * puts one digest into its partition's range for good. Rejected: qsort, which in glibc sorts
 * through a second array as large as the first whenever memory allows (32 bytes per order at
 * the peak instead of 16), and in O(n log n) where grouping needs O(n). */
static int digests_group(struct fsck_orders *fo)
{
    size_t *next = calloc(fo->part_count + 1, sizeof(*next));
    if (next == NULL) {
        return -ENOMEM;
    }
    size_t *starts = fo->starts;
    for (size_t i = 0; i < fo->digest_count; i++) {
        starts[fo->digests[i].part_index + 1]++;
    }
    for (uint32_t p = 0; p < fo->part_count; p++) {
        starts[p + 1] += starts[p];
        next[p] = starts[p];
    }
    ASSERT(starts[fo->part_count] == fo->digest_count);
    for (uint32_t p = 0; p < fo->part_count; p++) {
        while (next[p] < starts[p + 1]) {
            uint32_t home = fo->digests[next[p]].part_index;
            if (home == p) {
                next[p]++;
                continue;
            }
            ASSERT(home > p); /* the ranges before p are complete */
            struct fsck_orders_digest moved = fo->digests[next[home]];
            fo->digests[next[home]++] = fo->digests[next[p]];
            fo->digests[next[p]] = moved;
        }
    }
    free(next);
    return 0;
}

/* ---- one partition's table ----------------------------------------------------------------- */

static struct fsck_orders_slot *slot_probe(struct fsck_orders_slot *slots, size_t capacity,
                                           uint64_t hash)
{
    size_t mask = capacity - 1;
    for (size_t i = (size_t)(ds_mix64(hash) & mask);; i = (i + 1) & mask) {
        if (slots[i].hash == hash || slots[i].hash == 0) {
            return &slots[i];
        }
    }
}

/* An empty table of at least capacity slots (a power of two); a much larger one is given back,
 * so that clearing it does not cost more than the partition. */
static int table_reset(struct fsck_orders *fo, size_t capacity)
{
    ASSERT(capacity >= FSCK_ORDERS_SLOTS_MIN);
    ASSERT((capacity & (capacity - 1)) == 0);
    fo->slot_used = 0;
    if (fo->slots != NULL && fo->slot_capacity >= capacity && fo->slot_capacity <= 4 * capacity) {
        memset(fo->slots, 0, fo->slot_capacity * sizeof(*fo->slots));
        return 0;
    }
    free(fo->slots);
    fo->slots = calloc(capacity, sizeof(*fo->slots));
    fo->slot_capacity = fo->slots != NULL ? capacity : 0;
    return fo->slots != NULL ? 0 : -ENOMEM;
}

static int table_grow(struct fsck_orders *fo)
{
    size_t capacity = 2 * fo->slot_capacity;
    struct fsck_orders_slot *slots = calloc(capacity, sizeof(*slots));
    if (slots == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < fo->slot_capacity; i++) {
        if (fo->slots[i].hash != 0) {
            *slot_probe(slots, capacity, fo->slots[i].hash) = fo->slots[i];
        }
    }
    free(fo->slots);
    fo->slots = slots;
    fo->slot_capacity = capacity;
    return 0;
}

/* The slot of hash, added when new (the table stays at most half full). */
static int table_get(struct fsck_orders *fo, uint64_t hash, struct fsck_orders_slot **out)
{
    ASSERT(hash != 0);
    if (2 * (fo->slot_used + 1) > fo->slot_capacity) {
        int rc = table_grow(fo);
        if (rc != 0) {
            return rc;
        }
    }
    struct fsck_orders_slot *s = slot_probe(fo->slots, fo->slot_capacity, hash);
    if (s->hash == 0) {
        s->hash = hash;
        fo->slot_used++;
    }
    *out = s;
    return 0;
}

/* ---- scanning ------------------------------------------------------------------------------ */

static int row_take(const struct ds_event *e, void *user)
{
    struct fsck_orders *fo = user;
    uint64_t hash = hash_event(e);
    if (e->retract) {
        fo->report->retractions++;
        struct fsck_orders_slot *s = slot_probe(fo->slots, fo->slot_capacity, hash);
        if (s->hash == 0 || s->rows == 0) {
            fo->report->retractions_unmatched++;
            if (name_next(fo)) {
                name_event(fo, e, "retraction cancels no earlier row:");
            }
            return 0;
        }
        s->rows--;
        return 0;
    }
    struct fsck_orders_slot *s = NULL;
    fo->rc = table_get(fo, hash, &s);
    if (fo->rc == 0 && s->rows == UINT32_MAX) {
        fo->rc = -DS_ELIMIT;
    }
    if (fo->rc != 0) {
        return 1;
    }
    s->rows++;
    return 0;
}

/* Second scan of a partition with rows left over: names the first of them. */
static int row_name_excess(const struct ds_event *e, void *user)
{
    struct fsck_orders *fo = user;
    if (e->retract) {
        return 0;
    }
    struct fsck_orders_slot *s = slot_probe(fo->slots, fo->slot_capacity, hash_event(e));
    if (s->hash == 0 || s->rows <= s->orders) {
        return 0;
    }
    s->rows--;
    if (!name_next(fo)) {
        return 1;
    }
    name_event(fo, e, "row is left uncancelled and is not its order's current version:");
    return 0;
}

/* After the scan: rows left without their order and orders without their row. */
static uint64_t table_settle(struct fsck_orders *fo, uint64_t *excess)
{
    uint64_t mismatched = 0;
    *excess = 0;
    for (size_t i = 0; i < fo->slot_capacity; i++) {
        const struct fsck_orders_slot *s = &fo->slots[i];
        if (s->rows > s->orders) {
            *excess += s->rows - s->orders;
            mismatched += s->rows - s->orders;
        } else if (s->orders > s->rows) {
            mismatched += s->orders - s->rows;
            if (fo->out != NULL && fo->missing_count < FSCK_ORDERS_NAMED_MAX && name_next(fo)) {
                /* one name per reservation: equal orders missing twice are named once */
                fo->missing[fo->missing_count++] = (struct fsck_orders_missing){
                    .hash = s->hash, .part_index = fo->part_index, .count = 1};
            }
        }
    }
    return mismatched;
}

static size_t pow2_at_least(size_t n)
{
    size_t p = FSCK_ORDERS_SLOTS_MIN;
    while (p < n) {
        p *= 2;
    }
    return p;
}

/* Checks partition index against its current orders, digests[0..count). */
static int part_check(struct fsck_orders *fo, uint32_t index,
                      const struct fsck_orders_digest *digests, size_t count)
{
    const struct storage_part_id *p = &fo->parts[index];
    fo->part_index = index;
    int rc = table_reset(fo, pow2_at_least(4 * count));
    for (size_t i = 0; rc == 0 && i < count; i++) {
        struct fsck_orders_slot *s = NULL;
        rc = table_get(fo, digests[i].hash, &s);
        if (rc == 0) {
            s->orders++;
        }
    }
    if (rc != 0) {
        return rc;
    }
    struct storage_fsck_report before = *fo->report;
    rc = storage_partition_scan(fo->st, p->day, p->shard, row_take, fo);
    if (rc == 1 && fo->rc != 0) {
        return fo->rc;
    }
    if (rc == -DS_ECORRUPT) {
        /* The block check names the damage; a balance over part of the rows means nothing. */
        fo->report->retractions = before.retractions;
        fo->report->retractions_unmatched = before.retractions_unmatched;
        fo->report->balance_unchecked++;
        if (name_next(fo)) {
            char path[DS_PATH_MAX];
            store_part_dir(fo->st, p->day, p->shard, path);
            fprintf(fo->out, "%s: balance of retractions not checked: a block fails its checks\n",
                    path);
        }
        return 0;
    }
    if (rc != 0) {
        return rc;
    }
    uint64_t excess = 0;
    fo->report->orders_mismatched += table_settle(fo, &excess);
    if (fo->broken != NULL) {
        fo->broken[index] = fo->report->orders_mismatched != before.orders_mismatched ||
                            fo->report->retractions_unmatched != before.retractions_unmatched;
    }
    if (excess > 0 && fo->out != NULL && fo->named < FSCK_ORDERS_NAMED_MAX) {
        rc = storage_partition_scan(fo->st, p->day, p->shard, row_name_excess, fo);
        rc = rc == 1 ? 0 : rc;
    }
    return rc;
}

static int order_name_missing(const struct storage_order *order, void *user)
{
    struct fsck_orders *fo = user;
    uint32_t index = part_find(fo, order->day, order->shard);
    uint64_t hash = hash_order(order);
    for (uint32_t i = 0; i < fo->missing_count; i++) {
        struct fsck_orders_missing *m = &fo->missing[i];
        if (m->count > 0 && m->hash == hash && m->part_index == index) {
            m->count--;
            name_order(fo, order, "has no row there");
            break;
        }
    }
    return 0;
}

/* ---- the check ----------------------------------------------------------------------------- */

/* What a damaged file reads as (as opposed to an operating error: memory, descriptors, I/O). */
static bool damage_code(int rc)
{
    return rc == -DS_ECORRUPT || rc == -DS_EFORMAT || rc == -ENOENT;
}

/* The partitions and the current orders by partition. Returns 0, 1 when the store cannot be
 * read for damage (counted, named: nothing to balance against), or an error. */
static int check_open(struct fsck_orders *fo)
{
    fo->parts = calloc(STORAGE_PARTITIONS_MAX, sizeof(*fo->parts));
    fo->starts = calloc(STORAGE_PARTITIONS_MAX + 1, sizeof(*fo->starts));
    if (fo->parts == NULL || fo->starts == NULL) {
        return -ENOMEM;
    }
    int rc = storage_partition_visit(fo->st, part_collect, fo);
    if (rc != 0) {
        return rc;
    }
    struct storage_fsck_report before = *fo->report;
    rc = storage_order_visit(fo->st, order_collect, fo);
    rc = rc == 1 && fo->rc != 0 ? fo->rc : rc;
    if (damage_code(rc)) {
        fo->report->orders = before.orders;
        fo->report->orders_mismatched = before.orders_mismatched;
        fo->report->balance_unchecked++;
        if (fo->out != NULL) {
            fprintf(fo->out,
                    "%s/ids: the orders-by-id store cannot be read: %s: balance of retractions "
                    "not checked\n",
                    fo->st->dir, ds_strerror(rc));
        }
        return 1;
    }
    return rc == 0 ? digests_group(fo) : rc;
}

static int check_run(struct fsck_orders *fo)
{
    int rc = check_open(fo);
    if (rc == 1) {
        return 0;
    }
    for (uint32_t index = 0; rc == 0 && index < fo->part_count; index++) {
        const size_t *starts = fo->starts;
        rc = part_check(fo, index, fo->digests + starts[index], starts[index + 1] - starts[index]);
    }
    if (rc == 0 && fo->missing_count > 0) {
        rc = storage_order_visit(fo->st, order_name_missing, fo);
    }
    const struct storage_fsck_report *r = fo->report;
    uint64_t violations = r->retractions_unmatched + r->orders_mismatched + r->balance_unchecked;
    if (rc == 0 && fo->out != NULL && violations > fo->named) {
        fprintf(fo->out, "%s: %llu more balance violations not listed\n", fo->st->dir,
                (unsigned long long)(violations - fo->named));
    }
    return rc;
}

static void check_free(struct fsck_orders *fo)
{
    free(fo->slots);
    free(fo->digests);
    free(fo->starts);
    free(fo->parts);
    free(fo->broken);
    storage_close(fo->st);
}

int fsck_orders_broken(const char *dir, struct storage_part_id **out, uint32_t *count)
{
    struct storage_fsck_report report = {0};
    struct fsck_orders fo = {.out = NULL, .report = &report};
    int rc = storage_open_reader(dir, &fo.st);
    fo.broken = rc == 0 ? calloc(STORAGE_PARTITIONS_MAX, sizeof(*fo.broken)) : NULL;
    rc = rc == 0 && fo.broken == NULL ? -ENOMEM : rc;
    if (rc == 0 && storage_model(fo.st) != STORAGE_MODEL_ORDERS) {
        rc = -DS_EUSAGE;
    }
    rc = rc == 0 ? check_run(&fo) : rc;
    if (rc == 0 && report.balance_unchecked > 0) {
        rc = -DS_ECORRUPT; /* a damaged block or store: the quarantine's work comes first */
    }
    uint32_t n = 0;
    struct storage_part_id *ids = NULL;
    if (rc == 0) {
        ids = calloc(fo.part_count + 1, sizeof(*ids));
        rc = ids == NULL ? -ENOMEM : 0;
    }
    for (uint32_t i = 0; rc == 0 && i < fo.part_count; i++) {
        if (fo.broken[i]) {
            ids[n++] = (struct storage_part_id){.day = fo.parts[i].day, .shard = fo.parts[i].shard};
        }
    }
    check_free(&fo);
    if (rc != 0) {
        free(ids);
        return rc;
    }
    *out = ids;
    *count = n;
    return 0;
}

int fsck_orders_check(const char *dir, FILE *out, struct storage_fsck_report *report)
{
    struct fsck_orders fo = {.out = out, .report = report};
    int rc = storage_open_reader(dir, &fo.st);
    if (rc != 0 && !damage_code(rc)) {
        if (out != NULL) {
            fprintf(out, "%s: balance of retractions not checked: %s\n", dir, ds_strerror(rc));
        }
        return rc;
    }
    if (rc != 0) {
        /* The block and manifest checks, or cmd_fsck's model check, say why; this only counts
         * that the balance of a directory recording the orders model went unchecked. */
        struct data_model_state state;
        char why[STORAGE_MODEL_WHY_SIZE];
        if (data_model_read(dir, &state, why, sizeof(why)) == 0 &&
            state.recorded == STORAGE_MODEL_ORDERS) {
            report->balance_unchecked++;
            if (out != NULL) {
                fprintf(out, "%s: balance of retractions not checked: readers cannot open it: %s\n",
                        dir, ds_strerror(rc));
            }
        }
        return 0;
    }
    if (storage_model(fo.st) == STORAGE_MODEL_ORDERS) {
        rc = check_run(&fo);
    }
    if (rc != 0 && out != NULL) {
        fprintf(out, "%s: balance of retractions not checked: %s\n", dir, ds_strerror(rc));
    }
    check_free(&fo);
    return rc;
}
