/*
 * Differential and crash tests of index/store.c, the by-customer index store, against an in-memory
 * model of what index.h promises (the model section below: per customer, the set of (ts, order
 * id) keys with their last values, in the order of their tail keys). Tested:
 * - random batches applied to both, then every page of a sample of customers (heavy, light and
 *   absent ones) at limits 1, 3, 10 and 1000 equal field by field, with equal has_next and
 *   next_token, and equal cursors. The workload mixes integer and string customer ids that look
 *   alike (42 and "42", "4" a prefix of "42"), string order ids with bytes 0x00 and 0xFF that
 *   are prefixes of each other, many entries on one timestamp, late events, partial batches
 *   re-applied in later applies (exact duplicates), other entries of an existing (customer, ts,
 *   order id) with new status and amount, batches of 1 up to batch_entries_max entries;
 * - the same with slot tables of 2^5, 2^8 and the default size, after close and reopen (from the
 *   table checkpoint), after reopen without DIR/table (from the log alone), through a reader
 *   handle after a refresh (and not before), and after more applies following the reopen;
 * - seals beside the applies and compactions: the same answers, checks clean, reopened; a table
 *   of 2^5 slots, overfilled, grows at the first one (every customer placed anew, the runs
 *   applied meanwhile moved to their new slots);
 * - equal keys inside one batch: the last one in the caller's order is kept, as the model does;
 * - DIR/log cut at many points inside the last two applies (with the table left by close and
 *   without it) or extended with garbage: the store reopens as after applies 1..j exactly, j the
 *   last apply whose records all survive, its cursor names j, and it keeps applying from there;
 * - one byte of the log's records flipped, DIR/table removed: the store reopens as after the
 *   applies before the damaged one, with the log cut back to their end;
 * - a writer process killed with SIGKILL while applying in a loop: the reopened store equals
 *   the model after exactly the applies its cursor names, and that number never goes back.
 * The seed prints once (DS_TEST_SEED replays it). Sizes: 24 differential batches and 4 kill
 * rounds; DS_SHORT=1 (the sanitizer passes) 16 and 3; DS_GSI_ORACLE_LONG=1 or DS_LONG=1 400
 * larger batches, 40 kill rounds and every cut point instead of a sample.
 *
 * Rejected: keeping the RocksDB store the index replaced as the oracle (tests/support/gsi_rocks.c,
 * now in history). It agreed on every page, but it made RocksDB a build dependency for one test,
 * and a model of a few hundred lines states the contract itself rather than another
 * implementation of it.
 *
 * Assumptions beyond index.h, from the store's on-disk description (a failure of the crash tests
 * may mean one no longer holds): DIR/log is not preallocated, so its size after index_apply
 * returns is the end of that apply's records; after the 64-byte header every byte of the log
 * belongs to a checksummed record, so any flipped byte damages its apply.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "index/index_private.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define TS0 1768953600000LL /* 2026-01-21T00:00:00Z */
#define DAY_MS 86400000LL
#define SEED_DEFAULT 20260121u
#define LONG_ENV "DS_GSI_ORACLE_LONG"
#define SUITE_LONG_ENV "DS_LONG" /* the whole suite's long tier */
/* Set: only the tests whose names match this cmocka pattern (`*`, `?`) run. The TSan pass runs
 * "*seal*": the online seal is the only code here that starts a thread; the rest is one thread
 * and runs in the plain and ASan passes. */
#define FILTER_ENV "DS_GSI_ORACLE_FILTER"
#define WRITER_DIR_ENV "TEST_GSI_ORACLE_WRITER_DIR"
/* Set: the writer child compacts the log after every WRITER_COMPACT_EVERY applies. */
#define WRITER_COMPACT_ENV "TEST_GSI_ORACLE_WRITER_COMPACT"
#define WRITER_COMPACT_EVERY 3u
/* Set: the writer child starts a seal beside its applies after every WRITER_COMPACT_EVERY
 * applies and finishes it after a later one. */
#define WRITER_SEAL_ENV "TEST_GSI_ORACLE_WRITER_SEAL"
#define WRITER_SEED_ENV "TEST_GSI_ORACLE_WRITER_SEED"
#define WRITER_READY_FD_ENV "TEST_GSI_ORACLE_WRITER_READY_FD"

/* The customer pool: HEAVY_COUNT heavy customers get HEAVY_PERCENT of the entries, the light
 * ones share the rest; the absent ones never get any. */
#define HEAVY_COUNT 3u
#define HEAVY_PERCENT 60u
#define LIGHT_COUNT 30u
#define ABSENT_COUNT 6u
#define POOL_COUNT (HEAVY_COUNT + LIGHT_COUNT)
/* Customers compared after each step: every heavy and absent one and this many light ones. */
#define SAMPLE_LIGHT_COUNT 8u
#define SAMPLE_COUNT (HEAVY_COUNT + SAMPLE_LIGHT_COUNT + ABSENT_COUNT)

/* The differential run: batches applied, the largest batch, more batches after the reopen. */
#define DIFF_BATCHES 24u
#define DIFF_BATCHES_SHORT 16u /* DS_SHORT: the sanitizer passes */
#define DIFF_BATCHES_LONG 400u
#define DIFF_BATCH_MAX 1000u
#define DIFF_BATCH_MAX_LONG 4096u

/* The crash tests: small batches (the cut points span the last two of them), applies before
 * the cut, and cut points or flipped bytes tried per variant unless the run is long. */
#define CRASH_BATCH_MAX 24u
#define CRASH_APPLIES 8u
#define CRASH_SAMPLES 120u
#define CRASH_RESUMES 4u
#define CRASH_CURSOR_BYTES_MAX 16u
/* The log's header (store.c's format): flipped bytes lie beyond it. */
#define LOG_HEADER_BYTES 64u
/* The kill -9 test: rounds, and the applies after which the writer stops (so that the model
 * replaying them stays quick); the kill lands 0..KILL_DELAY_US_MAX after the writer opened. */
#define KILL_ROUNDS 4u
#define KILL_ROUNDS_SHORT 3u
#define KILL_ROUNDS_LONG 40u
#define KILL_APPLIES_MAX 4000u
#define KILL_APPLIES_MAX_LONG 40000u
#define KILL_DELAY_US_MAX 20000u

struct pool {
    struct ds_id customers[POOL_COUNT]; /* heavy ones first */
    struct ds_id absent[ABSENT_COUNT];
    struct ds_id sample[SAMPLE_COUNT];
};

/* Every batch the differential run applied, so that later batches can re-apply parts of them. */
struct history {
    struct index_entry *entries;
    size_t count;
    size_t capacity;
    /* Batch b is entries[starts[b]..starts[b + 1]); grown as batches come: a seal beside the
     * applies takes as many as it runs long (up to 200 before it is forced to finish). */
    size_t *starts;
    size_t starts_capacity;
    size_t batches;
};

/* ---- the model ----------------------------------------------------------------------------- */

/* The truth the store is compared with: for each customer, the set of its (ts, order id) keys
 * with the value of the last apply that gave the key (the last in the caller's order within
 * one apply), and the cursor of the last apply. Membership is decided here on the fields, with a
 * hash table of our own; key.c only spells the order: entries are sorted by their tail keys,
 * compared bytewise, which is the page order index.h promises (newest first; among equal ts, order
 * ids descending, strings before integers), and a token is the hex of a tail key. */
#define MODEL_CURSOR_BYTES_MAX 64u

struct model_entry {
    struct index_entry entry;
    uint8_t tail[INDEX_TAIL_BYTES_MAX];
    uint8_t tail_len;
};

struct model_customer {
    struct ds_id id;
    struct model_entry *entries; /* in the order keys first arrived */
    size_t count;
    size_t capacity;
    uint32_t *slots; /* open addressing over (ts, order id): entry index + 1, 0 empty */
    size_t slot_count;
    const struct model_entry **sorted; /* by tail key; rebuilt when stale */
    bool sorted_stale;
};

struct model {
    struct model_customer customers[POOL_COUNT];
    size_t customer_count;
    uint8_t cursor[MODEL_CURSOR_BYTES_MAX];
    size_t cursor_len;
};

static uint64_t model_hash_bytes(uint64_t h, const void *bytes, size_t len)
{
    const uint8_t *p = bytes;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
    }
    return h;
}

static uint64_t model_hash(const struct index_entry *e)
{
    uint64_t h = model_hash_bytes(0xcbf29ce484222325ull, &e->ts_ms, sizeof(e->ts_ms));
    const struct ds_id *o = &e->order_id;
    h = model_hash_bytes(h, &o->is_string, sizeof(o->is_string));
    return o->is_string ? model_hash_bytes(h, o->text, o->len)
                        : model_hash_bytes(h, &o->value, sizeof(o->value));
}

static struct model_customer *model_customer_of(struct model *m, const struct ds_id *id)
{
    for (size_t i = 0; i < m->customer_count; i++) {
        if (test_id_equal(&m->customers[i].id, id)) {
            return &m->customers[i];
        }
    }
    return NULL;
}

/* The slot of e's key: the one holding it, or the empty one where it would go. */
static uint32_t *model_slot(struct model_customer *c, const struct index_entry *e)
{
    size_t mask = c->slot_count - 1;
    for (size_t i = (size_t)model_hash(e) & mask;; i = (i + 1) & mask) {
        uint32_t *slot = &c->slots[i];
        if (*slot == 0) {
            return slot;
        }
        const struct index_entry *have = &c->entries[*slot - 1].entry;
        if (have->ts_ms == e->ts_ms && test_id_equal(&have->order_id, &e->order_id)) {
            return slot;
        }
    }
}

/* Keeps the hash table at most half full: doubles it and puts every key back. */
static void model_grow(struct model_customer *c)
{
    if (2 * (c->count + 1) <= c->slot_count) {
        return;
    }
    free(c->slots);
    c->slot_count = c->slot_count == 0 ? 64 : 2 * c->slot_count;
    c->slots = calloc(c->slot_count, sizeof(*c->slots));
    assert_non_null(c->slots);
    for (size_t i = 0; i < c->count; i++) {
        *model_slot(c, &c->entries[i].entry) = (uint32_t)(i + 1);
    }
    if (c->count == c->capacity) {
        c->capacity = c->capacity == 0 ? 64 : 2 * c->capacity;
        c->entries = realloc(c->entries, c->capacity * sizeof(*c->entries));
        c->sorted = realloc(c->sorted, c->capacity * sizeof(*c->sorted));
        assert_non_null(c->entries);
        assert_non_null(c->sorted);
    }
}

static void model_put(struct model *m, const struct index_entry *e)
{
    struct model_customer *c = model_customer_of(m, &e->customer_id);
    if (c == NULL) {
        assert_true(m->customer_count < DS_ARRAY_LEN(m->customers));
        c = &m->customers[m->customer_count++];
        c->id = e->customer_id;
    }
    model_grow(c);
    uint32_t *slot = model_slot(c, e);
    if (*slot == 0) {
        assert_true(c->count < c->capacity);
        *slot = (uint32_t)(++c->count);
    }
    struct model_entry *me = &c->entries[*slot - 1];
    me->entry = *e;
    me->tail_len = (uint8_t)index_key_tail_encode(e->ts_ms, &e->order_id, me->tail);
    c->sorted_stale = true;
}

static void model_apply(struct model *m, const struct index_entry *entries, size_t n,
                        const void *cursor, size_t cursor_len)
{
    assert_true(cursor_len <= sizeof(m->cursor));
    for (size_t i = 0; i < n; i++) {
        model_put(m, &entries[i]);
    }
    memcpy(m->cursor, cursor, cursor_len);
    m->cursor_len = cursor_len;
}

static void model_free(struct model *m)
{
    for (size_t i = 0; i < m->customer_count; i++) {
        free(m->customers[i].entries);
        free(m->customers[i].slots);
        free(m->customers[i].sorted);
    }
    memset(m, 0, sizeof(*m));
}

static int tail_compare(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    if (c != 0) {
        return c;
    }
    return (a_len > b_len) - (a_len < b_len);
}

static int model_entry_compare(const void *x, const void *y)
{
    const struct model_entry *a = *(const struct model_entry *const *)x;
    const struct model_entry *b = *(const struct model_entry *const *)y;
    return tail_compare(a->tail, a->tail_len, b->tail, b->tail_len);
}

static void model_sort(struct model_customer *c)
{
    if (!c->sorted_stale) {
        return;
    }
    for (size_t i = 0; i < c->count; i++) {
        c->sorted[i] = &c->entries[i];
    }
    qsort(c->sorted, c->count, sizeof(*c->sorted), model_entry_compare);
    for (size_t i = 1; i < c->count; i++) { /* distinct keys, so strictly ascending */
        assert_true(model_entry_compare(&c->sorted[i - 1], &c->sorted[i]) < 0);
    }
    c->sorted_stale = false;
}

/* The page index.h describes: after the token's key (strictly), at most limit entries, has_next
 * when more follow, next_token the hex of the last entry's tail key. */
static void model_query(struct model *m, const struct ds_id *customer, uint32_t limit,
                        const char *token, struct index_page *out)
{
    out->count = 0;
    out->has_next = false;
    out->next_token[0] = '\0';
    struct model_customer *c = model_customer_of(m, customer);
    if (c == NULL) {
        return;
    }
    model_sort(c);
    size_t first = 0;
    if (token != NULL && token[0] != '\0') {
        uint8_t after[INDEX_TAIL_BYTES_MAX];
        int len = index_key_token_decode(token, after);
        assert_true(len > 0);
        size_t high = c->count; /* the first key above the token lies in [first, high] */
        while (first < high) {
            size_t mid = first + (high - first) / 2;
            const struct model_entry *e = c->sorted[mid];
            if (tail_compare(e->tail, e->tail_len, after, (size_t)len) <= 0) {
                first = mid + 1;
            } else {
                high = mid;
            }
        }
    }
    size_t end = first + limit < c->count ? first + limit : c->count;
    for (size_t i = first; i < end; i++) {
        struct index_entry *e = &out->entries[out->count++];
        *e = c->sorted[i]->entry;
        e->customer_id = *customer;
    }
    if (end < c->count) {
        const struct model_entry *last = c->sorted[end - 1];
        out->has_next = true;
        index_key_hex_encode(last->tail, last->tail_len, out->next_token);
    }
}

struct fixture {
    char dir[64];
    char store_dir[128];
    uint64_t seed;
    bool long_run;
    bool short_run;
    struct index_config cfg;
    struct index *store;
    struct model model;
    uint64_t model_applies; /* crash tests: the model holds crash applies 1..this */
    struct pool pool;
    struct history history;
    struct index_entry batch[DIFF_BATCH_MAX_LONG];
    struct index_entry store_page[INDEX_PAGE_LIMIT_MAX];
    struct index_entry model_page[INDEX_PAGE_LIMIT_MAX];
};

/* ---- the workload -------------------------------------------------------------------------- */

static void id_text(struct ds_id *id, const char *text)
{
    test_id_string(id, text, strlen(text));
}

/* Heavy 42, "42" and "\0\xff"; light integers 1..12 and their look-alike strings "1".."12",
 * and "4" (a prefix of "42"), "420", "42\0", "\xff", 64 bytes of 0xff, "\0"; absent 43, "43",
 * "4200", INT64_MAX, "42\0\0" and "\xff\xff". */
static void pool_make(struct pool *p)
{
    size_t n = 0;
    test_id_int(&p->customers[n++], 42);
    id_text(&p->customers[n++], "42");
    test_id_string(&p->customers[n++], "\0\xff", 2);
    for (int64_t i = 1; i <= 12; i++) {
        char text[24];
        snprintf(text, sizeof(text), "%" PRId64, i);
        test_id_int(&p->customers[n++], i);
        id_text(&p->customers[n++], text);
    }
    id_text(&p->customers[n++], "4");
    id_text(&p->customers[n++], "420");
    test_id_string(&p->customers[n++], "42\0", 3);
    id_text(&p->customers[n++], "\xff");
    char ff[DS_ID_BYTES_MAX];
    memset(ff, 0xff, sizeof(ff));
    test_id_string(&p->customers[n++], ff, sizeof(ff));
    test_id_string(&p->customers[n++], "\0", 1);
    assert_int_equal(n, POOL_COUNT);
    test_id_int(&p->absent[0], 43);
    id_text(&p->absent[1], "43");
    id_text(&p->absent[2], "4200");
    test_id_int(&p->absent[3], INT64_MAX);
    test_id_string(&p->absent[4], "42\0\0", 4);
    id_text(&p->absent[5], "\xff\xff");
    /* The sample: heavy ones, light look-alikes and prefixes (7, "7", "4", "42\0", "\xff",
     * 64 x 0xff, "\0", 12), absent ones. */
    static const size_t light_picks[SAMPLE_LIGHT_COUNT] = {15, 16, 27, 29, 30, 31, 32, 25};
    n = 0;
    for (size_t i = 0; i < HEAVY_COUNT; i++) {
        p->sample[n++] = p->customers[i];
    }
    for (size_t i = 0; i < SAMPLE_LIGHT_COUNT; i++) {
        p->sample[n++] = p->customers[light_picks[i]];
    }
    for (size_t i = 0; i < ABSENT_COUNT; i++) {
        p->sample[n++] = p->absent[i];
    }
}

/* An order id: small integers (ties on (ts, id) across batches), strings of 1..4 bytes from
 * {0x00, 0xff, '7', 'a'} (prefixes of each other, escaped bytes), integer/string look-alikes,
 * and the extremes (INT64_MAX, 64 bytes). */
static void order_random(uint64_t *rng, struct ds_id *id)
{
    static const char alphabet[4] = {'\0', '\xff', '7', 'a'};
    uint64_t pick = test_rng_below(rng, 100);
    if (pick < 35) {
        test_id_int(id, 1 + (int64_t)test_rng_below(rng, 40));
    } else if (pick < 75) {
        char text[4];
        size_t len = 1 + (size_t)test_rng_below(rng, 4);
        for (size_t i = 0; i < len; i++) {
            text[i] = alphabet[test_rng_below(rng, 4)];
        }
        test_id_string(id, text, len);
    } else if (pick < 97) {
        int64_t value = 1 + (int64_t)test_rng_below(rng, 20);
        char text[24];
        snprintf(text, sizeof(text), "%" PRId64, value);
        if (test_rng_below(rng, 2) == 0) {
            test_id_int(id, value);
        } else {
            id_text(id, text);
        }
    } else if (pick < 99) {
        test_id_int(id, INT64_MAX);
    } else {
        char text[DS_ID_BYTES_MAX];
        memset(text, '\xff', sizeof(text));
        text[test_rng_below(rng, DS_ID_BYTES_MAX)] = '\0';
        test_id_string(id, text, sizeof(text));
    }
}

/* A timestamp: mostly one of 40 seconds after clock (so ties are many), a fifth of them late
 * (anywhere since TS0, older than entries already applied), a few on neighbouring days and at
 * both ends of the valid range. */
static int64_t ts_random(uint64_t *rng, int64_t clock)
{
    uint64_t pick = test_rng_below(rng, 100);
    if (pick < 70) {
        return clock + 1000 * (int64_t)test_rng_below(rng, 40);
    }
    if (pick < 90) {
        return TS0 + 1000 * (int64_t)test_rng_below(rng, (uint64_t)(clock - TS0) / 1000 + 1);
    }
    if (pick < 98) {
        return TS0 + DAY_MS * (int64_t)test_rng_below(rng, 3) - (int64_t)test_rng_below(rng, 2);
    }
    return pick == 98 ? DS_TS_MS_MIN : DS_TS_MS_MAX;
}

static void entry_random(const struct pool *p, uint64_t *rng, int64_t clock, struct index_entry *e)
{
    memset(e, 0, sizeof(*e));
    size_t c = test_rng_below(rng, 100) < HEAVY_PERCENT
                   ? (size_t)test_rng_below(rng, HEAVY_COUNT)
                   : HEAVY_COUNT + (size_t)test_rng_below(rng, LIGHT_COUNT);
    e->customer_id = p->customers[c];
    e->ts_ms = ts_random(rng, clock);
    e->day = ds_day_from_ms(e->ts_ms);
    order_random(rng, &e->order_id);
    const char *status = test_status_pool[test_rng_below(rng, TEST_STATUS_POOL_COUNT)];
    e->status_len = (uint8_t)strlen(status);
    memcpy(e->status, status, e->status_len);
    e->amount_units = (int64_t)test_rng_next(rng);
}

static bool entry_same_key(const struct index_entry *a, const struct index_entry *b)
{
    return a->ts_ms == b->ts_ms && test_id_equal(&a->customer_id, &b->customer_id) &&
           test_id_equal(&a->order_id, &b->order_id);
}

/* index.h does not say which of two entries with one key inside one batch wins (the model keeps
 * the last): random batches give such entries the same status and amount, the last one's, and
 * test_index_oracle_same_key_in_one_batch_keeps_the_last tests the rule on its own. */
static void batch_same_keys_agree(struct index_entry *batch, size_t n)
{
    for (size_t i = n; i-- > 1;) {
        for (size_t j = 0; j < i; j++) {
            if (entry_same_key(&batch[j], &batch[i])) {
                batch[j] = batch[i];
            }
        }
    }
}

static void batch_random(const struct pool *p, uint64_t *rng, int64_t clock, size_t n,
                         struct index_entry *out)
{
    for (size_t i = 0; i < n; i++) {
        entry_random(p, rng, clock, &out[i]);
    }
    batch_same_keys_agree(out, n);
}

/* A batch size: 1, a few, many, or exactly max. */
static size_t batch_size_random(uint64_t *rng, size_t max)
{
    uint64_t pick = test_rng_below(rng, 10);
    if (pick == 0) {
        return 1;
    }
    if (pick < 6) {
        return 2 + (size_t)test_rng_below(rng, max < 40 ? max - 1 : 39);
    }
    return pick < 9 ? 1 + (size_t)test_rng_below(rng, max) : max;
}

/* ---- fixture ------------------------------------------------------------------------------- */

static bool long_run_wanted(void)
{
    const char *env = getenv(LONG_ENV);
    const char *all = getenv(SUITE_LONG_ENV);
    return (env != NULL && strcmp(env, "1") == 0) || (all != NULL && strcmp(all, "1") == 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    snprintf(f->store_dir, sizeof(f->store_dir), "%s/gsi", f->dir);
    f->seed = test_seed_or(SEED_DEFAULT);
    f->long_run = long_run_wanted();
    f->short_run = test_short_run();
    pool_make(&f->pool);
    index_config_defaults(&f->cfg);
    f->cfg.dir = f->store_dir;
    f->cfg.checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN; /* checkpoints while applying */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    index_close(f->store);
    model_free(&f->model);
    test_tempdir_remove(f->dir);
    free(f->history.entries);
    free(f->history.starts);
    free(f);
    return 0;
}

static void store_open(struct fixture *f)
{
    assert_null(f->store);
    assert_int_equal(index_open(&f->cfg, &f->store), 0);
}

static void store_close(struct fixture *f)
{
    index_close(f->store);
    f->store = NULL;
}

static void store_path(const struct fixture *f, const char *name, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s/%s", f->store_dir, name);
}

/* Removes DIR/table (absent is fine: the store may not have written one). */
static void table_remove(const struct fixture *f)
{
    char path[160];
    store_path(f, "table", path, sizeof(path));
    assert_true(unlink(path) == 0 || errno == ENOENT);
}

static void apply_both(struct fixture *f, const struct index_entry *entries, size_t n,
                       const void *cursor, size_t cursor_len)
{
    assert_int_equal(index_apply(f->store, entries, n, cursor, cursor_len), 0);
    model_apply(&f->model, entries, n, cursor, cursor_len);
}

/* ---- comparison ---------------------------------------------------------------------------- */

static void id_assert_equal(const struct ds_id *want, const struct ds_id *got)
{
    assert_int_equal(want->is_string, got->is_string);
    assert_int_equal(want->len, got->len);
    assert_int_equal(want->value, got->value);
    assert_memory_equal(want->text, got->text, want->len);
}

static void entry_assert_equal(const struct index_entry *want, const struct index_entry *got)
{
    id_assert_equal(&want->customer_id, &got->customer_id);
    assert_int_equal(want->ts_ms, got->ts_ms);
    id_assert_equal(&want->order_id, &got->order_id);
    assert_int_equal(want->day, got->day);
    assert_int_equal(want->status_len, got->status_len);
    assert_memory_equal(want->status, got->status, want->status_len);
    assert_int_equal(want->amount_units, got->amount_units);
}

/* Reads every page of customer at limit from g and from the model, following the model's
 * tokens, and asserts that each page is the same: entries, has_next and next_token. */
static void pages_assert_equal(struct fixture *f, struct index *g, const struct ds_id *customer,
                               uint32_t limit)
{
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    for (size_t pages = 0;; pages++) {
        struct index_page want = {.entries = f->model_page};
        struct index_page got = {.entries = f->store_page};
        model_query(&f->model, customer, limit, token, &want);
        assert_int_equal(index_query(g, customer, limit, token, &got), 0);
        assert_int_equal(want.count, got.count);
        for (uint32_t i = 0; i < want.count; i++) {
            entry_assert_equal(&want.entries[i], &got.entries[i]);
        }
        assert_int_equal(want.has_next, got.has_next);
        assert_string_equal(want.next_token, got.next_token);
        if (!want.has_next) {
            break;
        }
        assert_true(pages < 1000000); /* a token that does not advance loops forever */
        strcpy(token, want.next_token);
    }
}

static void cursor_assert_equal(struct fixture *f, struct index *g)
{
    uint8_t got[MODEL_CURSOR_BYTES_MAX];
    size_t got_len = 0;
    assert_int_equal(index_cursor(g, got, sizeof(got), &got_len), 0);
    assert_int_equal(f->model.cursor_len, got_len);
    assert_memory_equal(f->model.cursor, got, got_len);
}

/* The cursor and every sampled customer at each of the limits. */
static void sample_assert_equal(struct fixture *f, struct index *g, const uint32_t *limits,
                                size_t limit_count)
{
    cursor_assert_equal(f, g);
    for (size_t c = 0; c < SAMPLE_COUNT; c++) {
        for (size_t l = 0; l < limit_count; l++) {
            /* A heavy customer paged 1 or 3 at a time would take thousands of pages, each
             * walking its chain from the head: 10 at a time covers the same page seams. */
            uint32_t limit = c < HEAVY_COUNT && limits[l] < 10 ? 10 * limits[l] : limits[l];
            pages_assert_equal(f, g, &f->pool.sample[c], limit);
        }
    }
}

static const uint32_t all_limits[] = {1, 3, 10, 1000};
static const uint32_t quick_limits[] = {7, 1000};

static void sample_assert_equal_all_limits(struct fixture *f, struct index *g)
{
    sample_assert_equal(f, g, all_limits, DS_ARRAY_LEN(all_limits));
}

/* ---- the differential run ------------------------------------------------------------------ */

static void history_add(struct history *h, const struct index_entry *batch, size_t n)
{
    if (h->count + n > h->capacity) {
        h->capacity = (h->count + n) * 2;
        h->entries = realloc(h->entries, h->capacity * sizeof(*h->entries));
        assert_non_null(h->entries);
    }
    if (h->batches + 2 > h->starts_capacity) {
        h->starts_capacity = (h->batches + 2) * 2;
        h->starts = realloc(h->starts, h->starts_capacity * sizeof(*h->starts));
        assert_non_null(h->starts);
    }
    memcpy(h->entries + h->count, batch, n * sizeof(*batch));
    h->starts[h->batches] = h->count;
    h->count += n;
    h->batches++;
    h->starts[h->batches] = h->count;
}

/* The next batch into f->batch: a quarter of the time a part of an earlier batch (its entries
 * re-applied exactly, as the builder replays a partial batch), otherwise fresh entries. */
static size_t batch_next(struct fixture *f, uint64_t *rng, size_t batch_max)
{
    struct history *h = &f->history;
    size_t n = 0;
    if (h->batches > 0 && test_rng_below(rng, 4) == 0) {
        size_t b = (size_t)test_rng_below(rng, h->batches);
        size_t len = h->starts[b + 1] - h->starts[b];
        size_t first = (size_t)test_rng_below(rng, len);
        n = 1 + (size_t)test_rng_below(rng, len - first);
        memcpy(f->batch, h->entries + h->starts[b] + first, n * sizeof(*f->batch));
    } else {
        n = batch_size_random(rng, batch_max);
        int64_t clock = TS0 + 4000 * (int64_t)h->batches;
        batch_random(&f->pool, rng, clock, n, f->batch);
    }
    history_add(h, f->batch, n);
    return n;
}

static void apply_batches(struct fixture *f, uint64_t *rng, size_t count, size_t batch_max)
{
    for (size_t i = 0; i < count; i++) {
        size_t n = batch_next(f, rng, batch_max);
        char cursor[32];
        int len = snprintf(cursor, sizeof(cursor), "apply-%zu", f->history.batches);
        apply_both(f, f->batch, n, cursor, (size_t)len);
    }
}

/* Applies random batches to the store (slot table of 2^table_slots_log2) and the model and
 * compares them, as the header comment lists: while applying, through a reader, after reopen
 * with and without the table checkpoint, and after applying more. */
static void differential_run(struct fixture *f, uint32_t table_slots_log2)
{
    uint64_t rng = f->seed ^ table_slots_log2;
    size_t batches = f->long_run    ? DIFF_BATCHES_LONG
                     : f->short_run ? DIFF_BATCHES_SHORT
                                    : DIFF_BATCHES;
    size_t batch_max = f->long_run ? DIFF_BATCH_MAX_LONG : DIFF_BATCH_MAX;
    f->cfg.table_slots_log2 = table_slots_log2;
    f->cfg.batch_entries_max = (uint32_t)batch_max;
    store_open(f);
    sample_assert_equal_all_limits(f, f->store); /* empty: no pages, empty cursor */
    apply_batches(f, &rng, batches / 2, batch_max);
    sample_assert_equal_all_limits(f, f->store);
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&f->cfg, &reader), 0);
    sample_assert_equal(f, reader, quick_limits, DS_ARRAY_LEN(quick_limits));
    apply_batches(f, &rng, batches - batches / 2 - batches / 8, batch_max);
    char want[32];
    snprintf(want, sizeof(want), "apply-%zu", batches / 2);
    char cursor[32];
    size_t len = 0;
    assert_int_equal(index_cursor(reader, cursor, sizeof(cursor), &len), 0); /* no refresh yet */
    assert_int_equal(len, strlen(want));
    assert_memory_equal(cursor, want, len);
    sample_assert_equal_all_limits(f, f->store);
    assert_int_equal(index_refresh(reader), 0);
    sample_assert_equal_all_limits(f, reader);
    index_close(reader);
    store_close(f);
    store_open(f); /* from the table checkpoint written at close */
    sample_assert_equal_all_limits(f, f->store);
    store_close(f);
    table_remove(f);
    f->cfg.table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_MIN + 1; /* the index keeps its own size */
    store_open(f);                                            /* from the log alone */
    sample_assert_equal_all_limits(f, f->store);
    apply_batches(f, &rng, batches / 8, batch_max);
    sample_assert_equal_all_limits(f, f->store);
    store_close(f);
}

/* The index's own check finds nothing wrong with the store's files. */
static void store_check_clean(struct fixture *f)
{
    uint8_t *cursor = NULL;
    struct index_check_report report;
    assert_int_equal(index_check(f->store_dir, &cursor, &report), 0);
    /* The cursor the log's records build is the model's. */
    assert_int_equal(report.cursor_len, f->model.cursor_len);
    if (report.cursor_len > 0) {
        assert_memory_equal(cursor, f->model.cursor, report.cursor_len);
    }
    free(cursor);
    if (report.damaged) {
        fail_msg("gsi_check: %s", report.reason);
    }
    assert_int_equal(report.tail_bytes, 0);
}

/* Pages customer at limit to the end with a small random batch applied to both between pages
 * (late entries among them land on later pages) and a compaction at page compact_at, comparing
 * every page with the model's at that moment. */
static void pages_with_ingest_assert_equal(struct fixture *f, uint64_t *rng,
                                           const struct ds_id *customer, uint32_t limit,
                                           size_t compact_at)
{
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    for (size_t pages = 0;; pages++) {
        struct index_page want = {.entries = f->model_page};
        struct index_page got = {.entries = f->store_page};
        model_query(&f->model, customer, limit, token, &want);
        assert_int_equal(index_query(f->store, customer, limit, token, &got), 0);
        assert_int_equal(want.count, got.count);
        for (uint32_t i = 0; i < want.count; i++) {
            entry_assert_equal(&want.entries[i], &got.entries[i]);
        }
        assert_int_equal(want.has_next, got.has_next);
        assert_string_equal(want.next_token, got.next_token);
        if (!want.has_next) {
            break;
        }
        assert_true(pages < 1000000);
        strcpy(token, want.next_token);
        apply_batches(f, rng, 1, 50);
        if (pages == compact_at) {
            assert_int_equal(index_compact(f->store, NULL), 0);
        }
    }
}

/* The table a seal or compaction of a store created with 2^created slots leaves: a pool that
 * overfills it (more customers than half the slots) makes the first one grow it, past the
 * pool's customers at half load; the default table keeps its size. */
static void table_assert_grown(uint32_t created, uint32_t after)
{
    if (2u * POOL_COUNT > 1u << created) {
        assert_true(after > created);
        assert_true(2u * POOL_COUNT <= 1u << after);
    } else {
        assert_int_equal(after, created);
    }
}

/* Applies batches until the seal s is swapped in (the first two before the first try, so the
 * seal copies applies made while it ran); the table it leaves is table_assert_grown's. */
static void seal_with_applies(struct fixture *f, uint64_t *rng, struct index_seal *s,
                              size_t batch_max)
{
    uint32_t created = f->cfg.table_slots_log2;
    for (size_t i = 0;; i++) {
        apply_batches(f, rng, 1, batch_max);
        if (i < 2) {
            continue;
        }
        struct index_compact_stats stats;
        int rc = index_seal_finish(s, i >= 200, &stats);
        if (rc == 0) {
            table_assert_grown(created, stats.slots_log2);
            return;
        }
        assert_int_equal(rc, -EAGAIN);
    }
}

/* Seals beside the applies against the model: sealed while batches go on, compared, checked
 * clean, through a reader opened before and one after, reopened with and without the table,
 * sealed again over sealed and live parts. */
static void seal_run(struct fixture *f, uint32_t table_slots_log2, uint32_t seal_batch_bytes)
{
    uint64_t rng = f->seed ^ table_slots_log2 ^ 0x5ea1;
    size_t batches = f->long_run    ? DIFF_BATCHES_LONG
                     : f->short_run ? DIFF_BATCHES_SHORT
                                    : DIFF_BATCHES;
    size_t batch_max = f->long_run ? DIFF_BATCH_MAX_LONG : DIFF_BATCH_MAX;
    f->cfg.table_slots_log2 = table_slots_log2;
    f->cfg.batch_entries_max = (uint32_t)batch_max;
    f->cfg.seal_batch_bytes = seal_batch_bytes;
    store_open(f);
    apply_batches(f, &rng, batches / 2, batch_max);
    struct index *before = NULL;
    assert_int_equal(index_open_reader(&f->cfg, &before), 0);
    struct index_seal *s = NULL;
    assert_int_equal(index_seal_start(f->store, INT32_MIN, &s), 0);
    seal_with_applies(f, &rng, s, batch_max);
    sample_assert_equal_all_limits(f, f->store);
    store_check_clean(f);
    assert_true(index_replaced(before));
    index_close(before);
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&f->cfg, &reader), 0);
    sample_assert_equal_all_limits(f, reader);
    index_close(reader);
    apply_batches(f, &rng, batches / 8, batch_max);
    assert_int_equal(index_seal_start(f->store, INT32_MIN, &s), 0);
    seal_with_applies(f, &rng, s, batch_max);
    sample_assert_equal_all_limits(f, f->store);
    store_check_clean(f);
    store_close(f);
    store_open(f);
    sample_assert_equal(f, f->store, quick_limits, DS_ARRAY_LEN(quick_limits));
    store_close(f);
    table_remove(f);
    store_open(f); /* from the log alone */
    sample_assert_equal_all_limits(f, f->store);
    store_close(f);
}

static void test_index_oracle_sealed_beside_applies_pages_equal_with_table_2e5(void **state)
{
    /* A seal runs while batches are applied (many customers share chains in a 2^5 table, which
     * the first seal grows, placing every customer anew and moving the runs applied meanwhile
     * to their new slots): the store answers as the model before and after the swap, reopened,
     * through readers. The seal moves the applies made meanwhile a record at a time. */
    seal_run(*state, 5, 1);
}

static void test_index_oracle_sealed_beside_applies_pages_equal_with_default_table(void **state)
{
    /* The same with the default table: one chain per customer, the table being built mapped
     * from a file, the applies made meanwhile moved in the default batches. */
    seal_run(*state, INDEX_TABLE_SLOTS_LOG2_DEFAULT, 0);
}

/* n orders of one customer (the first random entry's) into f->batch, recorded, applied. */
static void apply_one_customer(struct fixture *f, uint64_t *rng, size_t n)
{
    int64_t clock = TS0 + 4000 * (int64_t)f->history.batches;
    batch_random(&f->pool, rng, clock, n, f->batch);
    for (size_t i = 1; i < n; i++) {
        f->batch[i].customer_id = f->batch[0].customer_id;
    }
    batch_same_keys_agree(f->batch, n);
    history_add(&f->history, f->batch, n);
    char cursor[32];
    int len = snprintf(cursor, sizeof(cursor), "apply-%zu", f->history.batches);
    apply_both(f, f->batch, n, cursor, (size_t)len);
}

static void test_index_oracle_seal_moves_one_customers_runs_across_its_batches(void **state)
{
    /* An apply of 3,000 orders of one customer is three runs, the later two skipping where the
     * first does; the seal moves the applies made meanwhile a record at a time, so a later
     * run's first is in an earlier batch. */
    struct fixture *f = *state;
    uint64_t rng = f->seed ^ 0xba7c;
    f->cfg.table_slots_log2 = 8;
    f->cfg.batch_entries_max = DIFF_BATCH_MAX_LONG;
    f->cfg.seal_batch_bytes = 1;
    store_open(f);
    apply_batches(f, &rng, 8, DIFF_BATCH_MAX);
    struct index_seal *s = NULL;
    assert_int_equal(index_seal_start(f->store, INT32_MIN, &s), 0);
    for (int i = 0; i < 12; i++) {
        apply_one_customer(f, &rng, 3000);
        apply_batches(f, &rng, 1, DIFF_BATCH_MAX);
    }
    assert_int_equal(index_seal_finish(s, true, NULL), 0);
    sample_assert_equal_all_limits(f, f->store);
    store_check_clean(f);
    store_close(f);
    store_open(f);
    sample_assert_equal_all_limits(f, f->store);
    store_close(f);
}

/* Compaction against the model: compacted, reopened with and without the table,
 * through a reader opened before (it sees the log replaced) and after, compacted again with
 * applies after the first compaction, and checked clean by index_check each time. */
static void compact_run(struct fixture *f, uint32_t table_slots_log2)
{
    uint64_t rng = f->seed ^ table_slots_log2 ^ 0xc0ac7;
    size_t batches = f->long_run    ? DIFF_BATCHES_LONG
                     : f->short_run ? DIFF_BATCHES_SHORT
                                    : DIFF_BATCHES;
    size_t batch_max = f->long_run ? DIFF_BATCH_MAX_LONG : DIFF_BATCH_MAX;
    f->cfg.table_slots_log2 = table_slots_log2;
    f->cfg.batch_entries_max = (uint32_t)batch_max;
    store_open(f);
    assert_int_equal(index_compact(f->store, NULL), 0); /* empty: nothing to seal */
    sample_assert_equal(f, f->store, quick_limits, DS_ARRAY_LEN(quick_limits));
    apply_batches(f, &rng, batches / 2, batch_max);
    struct index *before = NULL;
    assert_int_equal(index_open_reader(&f->cfg, &before), 0);
    struct index_compact_stats stats;
    assert_int_equal(index_compact(f->store, &stats), 0);
    assert_true(stats.bytes_after < stats.bytes_before);
    table_assert_grown(table_slots_log2, stats.slots_log2);
    sample_assert_equal_all_limits(f, f->store);
    store_check_clean(f);
    assert_true(index_replaced(before));
    sample_assert_equal(f, before, quick_limits, DS_ARRAY_LEN(quick_limits)); /* old view */
    index_close(before);
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&f->cfg, &reader), 0);
    sample_assert_equal(f, reader, quick_limits, DS_ARRAY_LEN(quick_limits));
    apply_batches(f, &rng, batches / 4, batch_max); /* runs linked to sealed sections */
    assert_int_equal(index_refresh(reader), 0);
    sample_assert_equal_all_limits(f, reader);
    index_close(reader);
    store_check_clean(f);
    /* Deep pages of the heaviest customer (sealed sections with a directory) with ingest
     * between pages and a compaction in the middle: the tokens stay valid across it. */
    pages_with_ingest_assert_equal(f, &rng, &f->pool.sample[0], 10, 20);
    pages_with_ingest_assert_equal(f, &rng, &f->pool.sample[1], 100, 3);
    store_close(f);
    store_open(f); /* the checkpoint of the compacted log */
    sample_assert_equal(f, f->store, quick_limits, DS_ARRAY_LEN(quick_limits));
    assert_int_equal(index_compact(f->store, NULL), 0); /* sealed and unsealed into sealed */
    sample_assert_equal_all_limits(f, f->store);
    store_check_clean(f);
    apply_batches(f, &rng, batches / 8, batch_max);
    store_close(f);
    table_remove(f);
    store_open(f); /* the sealed log alone */
    sample_assert_equal_all_limits(f, f->store);
    store_check_clean(f);
    store_close(f);
}

static void test_index_oracle_compacted_pages_equal_with_table_2e5(void **state)
{
    /* Shared chains: several customers' sections on one slot, tags of other owners; the first
     * compaction grows the table and gives each customer a chain of its own. */
    compact_run(*state, 5);
}

static void test_index_oracle_compacted_pages_equal_with_default_table(void **state)
{
    compact_run(*state, INDEX_TABLE_SLOTS_LOG2_DEFAULT);
}

static void test_index_oracle_pages_equal_with_table_2e5(void **state)
{
    /* 32 slots: every customer shares a probe window with others. */
    differential_run(*state, 5);
}

static void test_index_oracle_pages_equal_with_table_2e8(void **state)
{
    /* 256 slots: more slots than customers, some still collide. */
    differential_run(*state, 8);
}

static void test_index_oracle_pages_equal_with_default_table(void **state)
{
    /* The production size, 2^21 slots. */
    differential_run(*state, INDEX_TABLE_SLOTS_LOG2_DEFAULT);
}

static void test_index_oracle_same_key_in_one_batch_keeps_the_last(void **state)
{
    /* Three entries with one (customer, ts, order id) in one batch, between others: the store
     * keeps the last one in the caller's order, as the model does (index.h is silent; the
     * builder hands events over in the order of the base data, so the last is the newest). */
    struct fixture *f = *state;
    uint64_t rng = f->seed;
    f->cfg.table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_MIN;
    store_open(f);
    struct index_entry batch[12];
    batch_random(&f->pool, &rng, TS0, DS_ARRAY_LEN(batch), batch);
    for (size_t i = 3; i < DS_ARRAY_LEN(batch); i += 4) {
        batch[i] = batch[1];
        batch[i].amount_units = (int64_t)i;
        batch[i].status_len = 1;
        batch[i].status[0] = (char)('a' + i);
    }
    apply_both(f, batch, DS_ARRAY_LEN(batch), "1", 1);
    sample_assert_equal(f, f->store, quick_limits, DS_ARRAY_LEN(quick_limits));
    pages_assert_equal(f, f->store, &batch[1].customer_id, 1000);
    store_close(f);
    table_remove(f);
    store_open(f);
    pages_assert_equal(f, f->store, &batch[1].customer_id, 1);
    store_close(f);
}

/* ---- crash tests: deterministic applies ---------------------------------------------------- */

/* The fresh entries of crash apply i into out; returns their count. */
static size_t crash_batch_fresh(const struct pool *p, uint64_t seed, uint64_t i,
                                struct index_entry *out)
{
    uint64_t rng = seed ^ (i * 0x9e3779b97f4a7c15ull);
    size_t n = batch_size_random(&rng, CRASH_BATCH_MAX);
    batch_random(p, &rng, TS0 + 4000 * (int64_t)i, n, out);
    return n;
}

/* Crash apply i (1, 2, ...) of a seed: up to CRASH_BATCH_MAX entries; every fourth apply
 * re-applies the tail of apply i - 1 (never itself a replay) and adds fresh ones. Its cursor
 * is i (8 bytes, host order) followed by i % 7 bytes 0xc5, so cursors differ in length too.
 * Returns the entry count. */
static size_t crash_batch(const struct pool *p, uint64_t seed, uint64_t i, struct index_entry *out,
                          uint8_t *cursor, size_t *cursor_len)
{
    memcpy(cursor, &i, sizeof(i));
    memset(cursor + sizeof(i), 0xc5, i % 7);
    *cursor_len = sizeof(i) + i % 7;
    size_t n = crash_batch_fresh(p, seed, i, out);
    if (i % 4 != 0) {
        return n;
    }
    struct index_entry previous[CRASH_BATCH_MAX];
    size_t previous_n = crash_batch_fresh(p, seed, i - 1, previous);
    size_t replayed = (previous_n + 1) / 2;
    if (replayed > CRASH_BATCH_MAX - n) {
        replayed = CRASH_BATCH_MAX - n;
    }
    memcpy(out + n, previous + previous_n - replayed, replayed * sizeof(*out));
    batch_same_keys_agree(out, n + replayed);
    return n + replayed;
}

/* The apply number a crash cursor names, 0 for the empty cursor. */
static uint64_t crash_cursor(struct index *g)
{
    uint8_t cursor[CRASH_CURSOR_BYTES_MAX];
    size_t len = 0;
    assert_int_equal(index_cursor(g, cursor, sizeof(cursor), &len), 0);
    if (len == 0) {
        return 0;
    }
    uint64_t i = 0;
    assert_true(len >= sizeof(i));
    memcpy(&i, cursor, sizeof(i));
    assert_int_equal(len, sizeof(i) + i % 7);
    return i;
}

static int crash_apply(const struct pool *p, uint64_t seed, uint64_t i, struct index *store,
                       struct model *model)
{
    struct index_entry batch[CRASH_BATCH_MAX];
    uint8_t cursor[CRASH_CURSOR_BYTES_MAX];
    size_t cursor_len = 0;
    size_t n = crash_batch(p, seed, i, batch, cursor, &cursor_len);
    if (store != NULL) {
        return index_apply(store, batch, n, cursor, cursor_len);
    }
    model_apply(model, batch, n, cursor, cursor_len);
    return 0;
}

/* Brings the model to crash applies 1..applies; it only moves forward. */
static void model_advance(struct fixture *f, uint64_t applies)
{
    assert_true(applies >= f->model_applies);
    for (uint64_t i = f->model_applies + 1; i <= applies; i++) {
        assert_int_equal(crash_apply(&f->pool, f->seed, i, NULL, &f->model), 0);
    }
    f->model_applies = applies;
}

/* The configuration of the crash tests: the smallest table (long chains) and checkpoints. */
static void crash_config(struct index_config *cfg, const char *dir)
{
    index_config_defaults(cfg);
    cfg->dir = dir;
    cfg->table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_MIN;
    cfg->batch_entries_max = CRASH_BATCH_MAX;
    cfg->checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN;
}

/* Opens the store, asserts that its cursor names exactly `applies` and that it equals the
 * model after those applies; leaves the store open. */
static void store_assert_applies(struct fixture *f, uint64_t applies)
{
    store_open(f);
    assert_int_equal(crash_cursor(f->store), applies);
    model_advance(f, applies);
    sample_assert_equal(f, f->store, quick_limits, DS_ARRAY_LEN(quick_limits));
}

/* ---- crash tests: cut and damaged logs ----------------------------------------------------- */

struct file_copy {
    uint8_t *bytes;
    size_t len;
    bool present;
};

static void file_load(const char *path, struct file_copy *out)
{
    char *data = NULL;
    size_t len = 0;
    int rc = ds_read_file(path, (size_t)1 << 30, &data, &len);
    assert_true(rc == 0 || rc == -ENOENT);
    out->present = rc == 0;
    out->bytes = (uint8_t *)data;
    out->len = len;
}

static void file_store(const char *path, const uint8_t *bytes, size_t len)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(bytes, 1, len, file), len);
    assert_int_equal(fclose(file), 0);
}

static uint64_t log_size(const struct fixture *f)
{
    char path[160];
    store_path(f, "log", path, sizeof(path));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* The log and table of CRASH_APPLIES applies, and the log's size after each apply. */
struct crash_image {
    struct file_copy log;
    struct file_copy table;
    uint64_t ends[CRASH_APPLIES + 1]; /* ends[i]: the log's size after apply i, ends[0] empty */
};

static void crash_image_make(struct fixture *f, struct crash_image *image)
{
    crash_config(&f->cfg, f->store_dir);
    store_open(f);
    image->ends[0] = log_size(f);
    for (uint64_t i = 1; i <= CRASH_APPLIES; i++) {
        assert_int_equal(crash_apply(&f->pool, f->seed, i, f->store, NULL), 0);
        image->ends[i] = log_size(f);
        assert_true(image->ends[i] > image->ends[i - 1]); /* written at return, not preallocated */
    }
    store_close(f);
    char path[160];
    store_path(f, "log", path, sizeof(path));
    file_load(path, &image->log);
    assert_true(image->log.present);
    assert_int_equal(image->log.len, image->ends[CRASH_APPLIES]);
    store_path(f, "table", path, sizeof(path));
    file_load(path, &image->table);
}

static void crash_image_free(struct crash_image *image)
{
    free(image->log.bytes);
    free(image->table.bytes);
}

/* The applies whose records lie wholly in the first `bytes` bytes of the log. */
static uint64_t applies_within(const struct crash_image *image, uint64_t bytes)
{
    uint64_t applies = 0;
    while (applies < CRASH_APPLIES && image->ends[applies + 1] <= bytes) {
        applies++;
    }
    return applies;
}

/* Writes a damaged copy of the image into the store's directory: the log's first cut bytes,
 * then extra_len bytes of garbage (none when 0), with flip xor-ed into byte flip_at (none
 * when flip is 0); the table as close left it or none. */
struct damage {
    size_t cut;
    size_t extra_len;
    size_t flip_at;
    uint8_t flip;
    bool keep_table;
    uint64_t applies; /* what the store must answer as after reopening */
};

static void damage_write(const struct fixture *f, const struct crash_image *image,
                         const struct damage *d)
{
    size_t len = d->cut + d->extra_len;
    uint8_t *log = malloc(len + 1);
    assert_non_null(log);
    memcpy(log, image->log.bytes, d->cut);
    for (size_t i = 0; i < d->extra_len; i++) {
        log[d->cut + i] = (uint8_t)(i * 37u + d->extra_len);
    }
    if (d->flip != 0) {
        assert_true(d->flip_at < len);
        log[d->flip_at] ^= d->flip;
    }
    char path[160];
    store_path(f, "log", path, sizeof(path));
    file_store(path, log, len);
    free(log);
    table_remove(f);
    if (d->keep_table && image->table.present) {
        store_path(f, "table", path, sizeof(path));
        file_store(path, image->table.bytes, image->table.len);
    }
}

static int damage_by_applies(const void *x, const void *y)
{
    const struct damage *a = x;
    const struct damage *b = y;
    return (a->applies > b->applies) - (a->applies < b->applies);
}

/* Writes each damage in turn (ordered by the applies expected, so that one model moving
 * forward serves them all), reopens and checks the store. */
static void damages_check(struct fixture *f, const struct crash_image *image, struct damage *d,
                          size_t count)
{
    qsort(d, count, sizeof(*d), damage_by_applies);
    for (size_t i = 0; i < count; i++) {
        damage_write(f, image, &d[i]);
        store_assert_applies(f, d[i].applies);
        assert_int_equal(log_size(f), image->ends[d[i].applies]); /* the tail is cut off */
        store_close(f);
    }
}

/* Cut points: every byte of the last two applies' records when the run is long or they are
 * few, else a random sample plus each apply's end and its neighbours; all with and without the
 * table; then a few tails of garbage after the last apply. Returns the count written to d. */
static size_t cuts_make(struct fixture *f, const struct crash_image *image, uint64_t *rng,
                        struct damage *d, size_t capacity)
{
    size_t first = (size_t)image->ends[CRASH_APPLIES - 2];
    size_t span = (size_t)image->ends[CRASH_APPLIES] - first + 1;
    bool every = f->long_run || span <= CRASH_SAMPLES;
    size_t per_variant = every ? span : CRASH_SAMPLES + 9;
    size_t n = 0;
    for (size_t v = 0; v < 2; v++) {
        for (size_t k = 0; k < per_variant; k++) {
            size_t cut = first + k;
            if (!every && k >= CRASH_SAMPLES) {
                /* One byte before, at and after the end of each of the last three applies. */
                size_t apply = CRASH_APPLIES - 2 + (k - CRASH_SAMPLES) / 3;
                cut = (size_t)image->ends[apply] + (k - CRASH_SAMPLES) % 3;
                cut = cut - 1 < image->log.len ? cut - 1 : image->log.len;
            } else if (!every) {
                cut = first + (size_t)test_rng_below(rng, span);
            }
            assert_true(n < capacity);
            d[n++] = (struct damage){.cut = cut, .keep_table = v == 0};
        }
    }
    for (size_t k = 1; k <= 8; k++) {
        assert_true(n < capacity);
        d[n++] = (struct damage){
            .cut = image->log.len, .extra_len = k * k * 7, .keep_table = k % 2 == 0};
    }
    for (size_t i = 0; i < n; i++) {
        d[i].applies = applies_within(image, d[i].cut);
    }
    return n;
}

/* After a cut, the store applies from its cursor on (re-applying what the cut lost) and ends
 * up equal to the model of all applies, from the log alone too. */
static void cut_then_resume(struct fixture *f, const struct crash_image *image, uint64_t *rng)
{
    model_advance(f, CRASH_APPLIES);
    size_t first = (size_t)image->ends[CRASH_APPLIES - 2];
    size_t span = (size_t)image->ends[CRASH_APPLIES] - first;
    for (size_t r = 0; r < CRASH_RESUMES; r++) {
        struct damage d = {.cut = first + (size_t)test_rng_below(rng, span), .keep_table = true};
        damage_write(f, image, &d);
        store_open(f);
        uint64_t applied = crash_cursor(f->store);
        assert_int_equal(applied, applies_within(image, d.cut));
        for (uint64_t i = applied + 1; i <= CRASH_APPLIES; i++) {
            assert_int_equal(crash_apply(&f->pool, f->seed, i, f->store, NULL), 0);
        }
        store_close(f);
        table_remove(f);
        store_assert_applies(f, CRASH_APPLIES);
        store_close(f);
    }
}

static void test_index_oracle_cut_log_reopens_at_last_whole_apply(void **state)
{
    /* DIR/log cut at many points within the last two applies, kept or without DIR/table, or
     * followed by garbage: the store answers as after exactly the applies that survived whole,
     * names the last of them in its cursor, and applies on from there. */
    struct fixture *f = *state;
    uint64_t rng = f->seed;
    struct crash_image image;
    crash_image_make(f, &image);
    size_t capacity = 2 * (size_t)(image.ends[CRASH_APPLIES] - image.ends[0]) + 64;
    struct damage *d = calloc(capacity, sizeof(*d));
    assert_non_null(d);
    size_t n = cuts_make(f, &image, &rng, d, capacity);
    damages_check(f, &image, d, n);
    cut_then_resume(f, &image, &rng);
    free(d);
    crash_image_free(&image);
}

static void test_index_oracle_damaged_byte_cuts_from_its_apply(void **state)
{
    /* One byte flipped after the log's header (half of them within the last two applies),
     * DIR/table removed so that opening reads the whole log: the store answers as after the
     * applies before the damaged one. */
    struct fixture *f = *state;
    uint64_t rng = f->seed;
    struct crash_image image;
    crash_image_make(f, &image);
    size_t header = image.ends[0] > LOG_HEADER_BYTES ? (size_t)image.ends[0] : LOG_HEADER_BYTES;
    size_t records = image.log.len - header;
    size_t count = f->long_run ? records : 2 * CRASH_SAMPLES;
    struct damage *d = calloc(count, sizeof(*d));
    assert_non_null(d);
    size_t tail = (size_t)image.ends[CRASH_APPLIES - 2];
    for (size_t i = 0; i < count; i++) {
        size_t at = header + (f->long_run ? i : (size_t)test_rng_below(&rng, records));
        if (!f->long_run && i % 2 == 0) {
            at = tail + (size_t)test_rng_below(&rng, image.log.len - tail);
        }
        d[i] = (struct damage){.cut = image.log.len,
                               .flip_at = at,
                               .flip = (uint8_t)(1 + test_rng_below(&rng, 255)),
                               .applies = applies_within(&image, at)};
    }
    damages_check(f, &image, d, count);
    free(d);
    crash_image_free(&image);
}

/* ---- crash tests: kill -9 ------------------------------------------------------------------ */

/* The writer process of the kill -9 test (a fresh exec of this binary, as in test_index.c):
 * opens the store, tells the parent through the ready pipe, applies crash batches from its
 * cursor on until KILL_APPLIES_MAX, then waits to be killed. */
static int writer_child_main(const char *dir, const char *seed_text, const char *ready_fd_text)
{
    struct pool pool;
    pool_make(&pool);
    uint64_t seed = strtoull(seed_text, NULL, 10);
    int ready_fd = (int)strtol(ready_fd_text, NULL, 10);
    struct index_config cfg;
    crash_config(&cfg, dir);
    struct index *g = NULL;
    if (index_open(&cfg, &g) != 0) {
        return 2;
    }
    if (write(ready_fd, "r", 1) != 1) {
        return 3;
    }
    signal(SIGPIPE, SIG_IGN); /* the parent reads the "applied" byte only when it waits for it */
    uint64_t first = crash_cursor(g) + 1;
    uint64_t last = long_run_wanted() ? KILL_APPLIES_MAX_LONG : KILL_APPLIES_MAX;
    bool compact = getenv(WRITER_COMPACT_ENV) != NULL;
    bool seal = getenv(WRITER_SEAL_ENV) != NULL;
    struct index_seal *running = NULL;
    for (uint64_t i = first; i <= last; i++) {
        if (crash_apply(&pool, seed, i, g, NULL) != 0) {
            return 1;
        }
        if (i == first && write(ready_fd, "a", 1) != 1 && errno != EPIPE) {
            return 8;
        }
        if (compact && i % WRITER_COMPACT_EVERY == 0 && index_compact(g, NULL) != 0) {
            return 4;
        }
        int rc = running != NULL ? index_seal_finish(running, false, NULL) : -EAGAIN;
        if (rc != -EAGAIN && rc != 0) {
            return 5;
        }
        running = rc == 0 ? NULL : running;
        if (seal && running == NULL && i % WRITER_COMPACT_EVERY == 0 &&
            index_seal_start(g, INT32_MIN, &running) != 0) {
            return 6;
        }
    }
    if (running != NULL && index_seal_finish(running, true, NULL) != 0) {
        return 7;
    }
    for (;;) {
        pause(); /* runs until the parent's SIGKILL */
    }
}

/* compact: the writer child's mode, the name of its environment variable (NULL: none). */
static void kill9_run(struct fixture *f, const char *compact)
{
    uint64_t rng = f->seed;
    crash_config(&f->cfg, f->store_dir);
    char seed_text[32];
    snprintf(seed_text, sizeof(seed_text), "%" PRIu64, f->seed);
    uint64_t applied = 0;
    size_t rounds = f->long_run ? KILL_ROUNDS_LONG : f->short_run ? KILL_ROUNDS_SHORT : KILL_ROUNDS;
    for (size_t round = 0; round < rounds; round++) {
        int ready[2];
        assert_int_equal(pipe(ready), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            char fd_text[16];
            snprintf(fd_text, sizeof(fd_text), "%d", ready[1]);
            setenv(WRITER_DIR_ENV, f->store_dir, 1);
            setenv(WRITER_SEED_ENV, seed_text, 1);
            setenv(WRITER_READY_FD_ENV, fd_text, 1);
            if (compact != NULL) {
                setenv(compact, "1", 1);
            }
            execl("/proc/self/exe", "test_index_oracle", (char *)NULL);
            _exit(127);
        }
        assert_int_equal(close(ready[1]), 0);
        char byte = 0;
        assert_int_equal(read(ready[0], &byte, 1), 1); /* the writer has opened the store */
        if (round + 1 == rounds && applied == 0) {
            /* No kill landed after an apply yet (a slow writer: TSan on a busy machine): the
             * last one waits for the writer's first apply, so every run kills after one. */
            assert_int_equal(read(ready[0], &byte, 1), 1);
        }
        assert_int_equal(close(ready[0]), 0);
        usleep((useconds_t)test_rng_below(&rng, KILL_DELAY_US_MAX));
        assert_int_equal(kill(child, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        store_open(f);
        uint64_t now = crash_cursor(f->store);
        store_close(f);
        assert_true(now >= applied);
        applied = now;
        store_assert_applies(f, applied);
        store_close(f);
        if (compact != NULL) {
            char leftover[160];
            store_path(f, "log.compact", leftover, sizeof(leftover));
            store_check_clean(f);                            /* the old log or the new one, whole */
            assert_int_not_equal(access(leftover, F_OK), 0); /* removed by the open */
        }
    }
    assert_true(applied > 0); /* the writer did apply between the kills */
}

static void test_index_oracle_kill9_keeps_whole_applies(void **state)
{
    /* A writer process killed at random moments: reopened, the store equals the model after
     * exactly the applies its cursor names, a number that never goes back (a process crash
     * loses nothing the log was given). */
    kill9_run(*state, NULL);
}

static void test_index_oracle_kill9_during_compaction_keeps_whole_applies(void **state)
{
    /* The same with the writer compacting after every third apply: a kill inside a
     * compaction leaves the old log or the new complete one, never a mix. */
    kill9_run(*state, WRITER_COMPACT_ENV);
}

static void test_index_oracle_kill9_during_online_seal_keeps_whole_applies(void **state)
{
    /* The same with the writer sealing beside its applies (a seal started every third apply,
     * finished after a later one): a kill while the seal's thread writes, copies or swaps leaves
     * exactly the applies whose cursor records survive, in the old log or the new one. The
     * store starts at 2^5 slots for more customers than half of them, so its first seal grows
     * the table: until one completes, every kill inside a seal lands in a growing one. */
    kill9_run(*state, WRITER_SEAL_ENV);
}

int main(void)
{
    const char *writer_dir = getenv(WRITER_DIR_ENV);
    if (writer_dir != NULL) {
        return writer_child_main(writer_dir, getenv(WRITER_SEED_ENV), getenv(WRITER_READY_FD_ENV));
    }
    setenv("DS_LOG", "error", 0); /* the store warns at every cut log: thousands of lines */
    const char *filter = getenv(FILTER_ENV);
    if (filter != NULL && filter[0] != '\0') {
        cmocka_set_test_filter(filter);
    }
    fprintf(stderr, "seed=%" PRIu64 " (DS_TEST_SEED=<seed> replays it)\n",
            test_seed_or(SEED_DEFAULT));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index_oracle_pages_equal_with_table_2e5, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_pages_equal_with_table_2e8, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_pages_equal_with_default_table, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_compacted_pages_equal_with_table_2e5,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_compacted_pages_equal_with_default_table,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_same_key_in_one_batch_keeps_the_last,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_cut_log_reopens_at_last_whole_apply,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_damaged_byte_cuts_from_its_apply, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_oracle_kill9_keeps_whole_applies, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_index_oracle_kill9_during_compaction_keeps_whole_applies, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_oracle_kill9_during_online_seal_keeps_whole_applies, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_oracle_sealed_beside_applies_pages_equal_with_table_2e5, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_oracle_sealed_beside_applies_pages_equal_with_default_table, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_index_oracle_seal_moves_one_customers_runs_across_its_batches, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
