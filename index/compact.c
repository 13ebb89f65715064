/*
 * index_compact and online sealing (index.h): the log rewritten as sealed records, every chain's
 * distinct entries (the newest copy of each key) in a few delta-encoded, zstd-compressed sections
 * per customer, written to DIR/log.compact, synced, and renamed over DIR/log under the swap lock.
 * A crash leaves the old log or the new complete one. Rejected: compacting in place (a crash
 * would leave a mix no reader could trust).
 *
 * The new log has a new slot table: the old one's size, doubled while more than half of it would
 * be used (index_seal_slots_log2), and every customer is placed in it by its hash, as an apply
 * places it. The sealed sections go to their customer's new slot; chains are collected in
 * batches of old slots and sorted by new home, so the slots a sealed record's sections name
 * ascend and a record packs many customers; a table grown by d bits is written in 2^d passes,
 * each over the customers whose new home lies in one old-table-sized region.
 *
 * A seal runs beside the applies (index_seal_start): the applying thread notes where the log
 * ends (from0: every record before it belongs to an apply whose cursor record is there too), and
 * a thread seals each chain as it was there: it walks from the slot's current head back past
 * the runs at or after from0 (a run's prev is always the slot's previous run, so that walk ends
 * at the head the snapshot saw). The sealed part ends with a cursor record for the snapshot's
 * apply, then the records applied since are copied in log order, each run moved to its
 * customer's slot in the new table: its prev that slot's head there, its skip the same for the
 * customer's first run of its apply and that run's skip for the later ones; its chain max ts
 * recomputed along the slot, since the sealed chain may have lost entries below the floor. The
 * old pointers are only checked: in a grown table a run's old chain may hold customers now on
 * other slots, so no fixed translation of old offsets exists. The
 * thread copies in rounds while the applies go on; index_seal_finish, on the applying thread,
 * copies only what was applied after its last round and swaps. Rejected: a two-file index
 * (sealed + live, offsets naming the file): every reader, the checker and the fsck visitor
 * would learn a second address space, where the copy keeps one log and one format.
 *
 * Entries of days below the floor are left out, and a customer left with none leaves the index
 * (the new table is placed afresh, so no probe window needs its slot): the table holds the
 * customers retention keeps.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "index/index_private.h"

/* ---- compaction ---------------------------------------------------------------------------- */

/* One entry of a batch of chains being compacted: its bytes in the arena (tail key, then
 * value). */
struct index_compact_entry {
    uint32_t customer; /* index into the batch's customers */
    uint32_t seq;      /* the order the walk met it: lower is a newer copy */
    uint64_t at;       /* arena offset */
    uint8_t key_bytes;
    uint8_t value_bytes;
};

/* A customer met in a batch, and its tag (its home in the new table). */
struct index_compact_customer {
    struct ds_id id;
    uint64_t tag;
};

/* A compaction in progress: the new log being written and a batch of chains' entries. */
struct index_compactor {
    struct index *g;
    int fd;
    uint64_t end; /* bytes of the new log written or buffered */
    uint8_t *out; /* INDEX_IO_BUFFER_BYTES of the new log not yet written */
    size_t out_bytes;
    struct index_slot *slots; /* the new log's table: 2^slots_log2 (index_seal_table_create) */
    uint32_t slots_log2;
    uint64_t mask;
    /* The pass: the customers whose new home's bits above the old table's mask are this. */
    uint32_t region;
    size_t slots_mapped_bytes;    /* > 0: slots maps an unnamed file of that size */
    size_t slots_released_bytes;  /* the mapping's pages below this are out of RSS */
    size_t slots_populated_bytes; /* a walk's: the mapping's pages below this are mapped */
    ZSTD_CCtx *cctx;
    struct index_seal_writer writer;
    uint8_t *body;      /* INDEX_SEAL_RAW_MAX */
    uint8_t *scratch;   /* INDEX_SEAL_RAW_MAX */
    uint8_t *record;    /* INDEX_SEAL_RECORD_BYTES_MAX */
    uint64_t record_at; /* where the record being built goes */
    struct index_compact_entry *entries;
    size_t entry_count;
    size_t entry_cap;
    uint8_t *arena;
    size_t arena_bytes;
    size_t arena_cap;
    struct index_compact_customer *customers;
    size_t customer_count;
    size_t customer_cap;
    uint8_t *directory; /* INDEX_RECORD_BYTES_MAX: the customer's sections, oldest first */
    size_t directory_count;
    const uint8_t *keys[INDEX_SEAL_SECTION_ENTRIES];
    const uint8_t *values[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t key_bytes[INDEX_SEAL_SECTION_ENTRIES];
    uint8_t value_bytes[INDEX_SEAL_SECTION_ENTRIES];
    int32_t floor_day; /* entries of days below it are left out */
    uint64_t dropped;  /* entries left out so far */
};

static int index_compact_write(struct index_compactor *k, const void *src, size_t len)
{
    if (INDEX_IO_BUFFER_BYTES - k->out_bytes < len) {
        int rc = ds_pwrite_full(k->fd, k->out, k->out_bytes, k->end - k->out_bytes);
        if (rc != 0) {
            return rc;
        }
        k->out_bytes = 0;
    }
    memcpy(k->out + k->out_bytes, src, len);
    k->out_bytes += len;
    k->end += len;
    return 0;
}

static int index_compact_record_flush(struct index_compactor *k)
{
    if (k->writer.sections == 0) {
        return 0;
    }
    ASSERT(k->record_at == k->end);
    size_t len = index_seal_writer_finish(&k->writer, k->cctx, k->scratch, k->record);
    index_seal_writer_reset(&k->writer, k->body);
    return index_compact_write(k, k->record, len);
}

static _Thread_local const struct index_compactor *index_compacting;

static int index_compact_entry_compare(const void *a, const void *b)
{
    const struct index_compact_entry *x = a;
    const struct index_compact_entry *y = b;
    const struct index_compactor *k = index_compacting;
    const struct index_compact_customer *cx = &k->customers[x->customer];
    const struct index_compact_customer *cy = &k->customers[y->customer];
    uint64_t hx = cx->tag & k->mask;
    uint64_t hy = cy->tag & k->mask;
    int c = x->customer == y->customer ? 0
            : hx != hy                 ? (hx > hy) - (hx < hy)
                                       : index_customer_compare(&cx->id, &cy->id);
    c = c != 0 ? c
               : index_key_compare(k->arena + x->at, x->key_bytes, k->arena + y->at, y->key_bytes);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int index_compact_grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) {
        return 0;
    }
    size_t n = *cap < 1024 ? 1024 : *cap;
    while (n < need) {
        n *= 2;
    }
    void *q = realloc(*p, n * size);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    *cap = n;
    return 0;
}

static bool index_compact_below_floor(const struct index_compactor *k, const uint8_t *key)
{
    if (k->floor_day == INT32_MIN) {
        return false;
    }
    int64_t ts = (int64_t)~index_key_be64_get(key);
    return ds_day_from_ms(ts) < k->floor_day;
}

/* Whether the pass collects the customer of tag: its new home is in the pass's region. */
static bool index_compact_in_region(const struct index_compactor *k, uint64_t tag)
{
    return ((tag & k->mask) >> k->g->slots_log2) == k->region;
}

/* Adds the entries on slot's chain in the old log of the customers in the pass's region to
 * the batch (the customer of each run found among the chain's or added to k->customers). Entries
 * of days below the floor are left out: a customer left with none leaves the index, and no slot
 * is claimed for it in the new table, which is placed afresh. */
static int index_compact_collect(struct index_compactor *k, uint32_t slot, uint64_t head)
{
    struct index *g = k->g;
    size_t chain_customers = k->customer_count; /* a customer's runs are on one chain */
    uint8_t buf[INDEX_QUERY_READ_BYTES];
    uint8_t *big = NULL;
    uint64_t offset = head;
    uint32_t seq = 0;
    int rc = 0;
    while (offset != 0 && rc == 0) {
        const uint8_t *r = NULL;
        uint64_t directory = 0;
        rc = index_run_read(g, offset, slot, buf, &big, &r, &directory);
        struct ds_id customer;
        rc = rc == 0 ? index_run_customer(r, &customer) : rc;
        if (rc != 0) {
            break;
        }
        uint32_t who = (uint32_t)chain_customers;
        while (who < k->customer_count && !ds_id_equal(&k->customers[who].id, &customer)) {
            who++;
        }
        if (who == k->customer_count) {
            rc = index_compact_grow((void **)&k->customers, &k->customer_cap, who + 1,
                                    sizeof(*k->customers));
            if (rc != 0) {
                break;
            }
            k->customers[k->customer_count++] =
                (struct index_compact_customer){.id = customer, .tag = index_key_tag(&customer)};
        }
        offset = ds_get_le64(r + 16);
        if (!index_compact_in_region(k, k->customers[who].tag)) {
            continue;
        }
        uint32_t len = ds_get_le32(r + 4);
        uint32_t count = ds_get_le32(r + 12);
        size_t at = INDEX_RUN_HEADER_BYTES + r[10];
        rc = index_compact_grow((void **)&k->entries, &k->entry_cap, k->entry_count + count,
                                sizeof(*k->entries));
        rc = rc == 0
                 ? index_compact_grow((void **)&k->arena, &k->arena_cap, k->arena_bytes + len, 1)
                 : rc;
        for (uint32_t i = 0; rc == 0 && i < count; i++) {
            if (at + 2 > len || at + 2 + r[at] > len || at + 2 + r[at] + r[at + 1 + r[at]] > len) {
                rc = -DS_ECORRUPT;
                break;
            }
            uint8_t key_bytes = r[at];
            uint8_t value_bytes = r[at + 1 + key_bytes];
            if (key_bytes < 8 || key_bytes > INDEX_TAIL_BYTES_MAX ||
                value_bytes > INDEX_VALUE_BYTES_MAX) {
                rc = -DS_ECORRUPT;
                break;
            }
            if (index_compact_below_floor(k, r + at + 1)) {
                at += 2u + key_bytes + value_bytes;
                k->dropped++;
                continue;
            }
            struct index_compact_entry *e = &k->entries[k->entry_count++];
            e->customer = who;
            e->seq = seq++;
            e->at = k->arena_bytes;
            e->key_bytes = key_bytes;
            e->value_bytes = value_bytes;
            memcpy(k->arena + k->arena_bytes, r + at + 1, key_bytes);
            memcpy(k->arena + k->arena_bytes + key_bytes, r + at + 2 + key_bytes, value_bytes);
            k->arena_bytes += (uint64_t)key_bytes + value_bytes;
            at += 2u + key_bytes + value_bytes;
        }
    }
    free(big);
    return rc;
}

/* Writes the directory of the customer's sections written so far (k->directory, oldest first
 * as written; at most INDEX_DIRECTORY_ENTRIES_MAX, the oldest ones) as a record, newest first:
 * a walk that stops early in it still follows the chain on. *at is its offset. */
static int index_compact_directory(struct index_compactor *k, uint32_t slot, uint64_t *at)
{
    uint8_t *d = k->directory;
    size_t n = k->directory_count;
    uint8_t *e = d + INDEX_DIRECTORY_HEADER_BYTES;
    for (size_t i = 0; i < n / 2; i++) {
        uint8_t swap[INDEX_DIRECTORY_ENTRY_BYTES];
        memcpy(swap, e + i * INDEX_DIRECTORY_ENTRY_BYTES, sizeof(swap));
        memcpy(e + i * INDEX_DIRECTORY_ENTRY_BYTES, e + (n - 1 - i) * INDEX_DIRECTORY_ENTRY_BYTES,
               sizeof(swap));
        memcpy(e + (n - 1 - i) * INDEX_DIRECTORY_ENTRY_BYTES, swap, sizeof(swap));
    }
    size_t len = INDEX_DIRECTORY_HEADER_BYTES + n * INDEX_DIRECTORY_ENTRY_BYTES;
    memset(d, 0, INDEX_DIRECTORY_HEADER_BYTES);
    d[8] = INDEX_RECORD_DIRECTORY;
    ds_put_le32(d + 4, (uint32_t)len);
    ds_put_le32(d + 12, (uint32_t)n);
    ds_put_le32(d + 16, slot);
    ds_put_le32(d, ds_crc32c(0, d + 4, len - 4u));
    *at = k->end;
    return index_compact_write(k, d, len);
}

/* Writes one customer's distinct entries k->entries[first..end) (ascending tail keys) as
 * sections on slot's new chain: the newest INDEX_RUN_HEAD_ENTRIES in the head section (a
 * newest-N query decodes little), the rest in sections of INDEX_SEAL_SECTION_ENTRIES, oldest
 * first, so the chain's head is the newest. */
static int index_compact_customer(struct index_compactor *k, uint32_t slot, const uint32_t *order,
                                  size_t count)
{
    struct index_slot *s = &k->slots[slot];
    uint64_t skip = s->head;
    size_t last = count;
    k->directory_count = 0;
    size_t sections = count <= INDEX_RUN_HEAD_ENTRIES
                          ? 1
                          : 1 + (count - INDEX_RUN_HEAD_ENTRIES + INDEX_SEAL_SECTION_ENTRIES - 1) /
                                    INDEX_SEAL_SECTION_ENTRIES;
    while (last > 0) {
        size_t first = last <= INDEX_RUN_HEAD_ENTRIES
                           ? 0
                           : INDEX_RUN_HEAD_ENTRIES + (last - 1 - INDEX_RUN_HEAD_ENTRIES) /
                                                          INDEX_SEAL_SECTION_ENTRIES *
                                                          INDEX_SEAL_SECTION_ENTRIES;
        size_t n = last - first;
        for (size_t i = 0; i < n; i++) {
            const struct index_compact_entry *e = &k->entries[order[first + i]];
            k->keys[i] = k->arena + e->at;
            k->key_bytes[i] = e->key_bytes;
            k->values[i] = k->arena + e->at + e->key_bytes;
            k->value_bytes[i] = e->value_bytes;
        }
        int64_t newest = (int64_t)~index_key_be64_get(k->keys[0]);
        struct index_seal_section sec = {
            .slot = slot,
            .tag = s->tag, /* set when the customer was placed */
            .customer = k->customers[k->entries[order[first]].customer].id,
            .prev = s->head,
            .chain_max_ts = s->head != 0 && s->max_ts > newest ? s->max_ts : newest,
            .prev_chain_max_ts = s->head != 0 ? s->max_ts : 0,
            .skip = skip,
        };
        if (first == 0 && sections >= INDEX_DIRECTORY_SECTIONS_MIN &&
            sections - 1 <= INDEX_DIRECTORY_ENTRIES_MAX) {
            /* The head section: the others, newest first, in a directory record before it. */
            int rc = index_compact_record_flush(k);
            rc = rc == 0 ? index_compact_directory(k, slot, &sec.directory) : rc;
            if (rc != 0) {
                return rc;
            }
        }
        if (!index_seal_writer_fits(&k->writer, slot, (uint32_t)n)) {
            int rc = index_compact_record_flush(k);
            if (rc != 0) {
                return rc;
            }
        }
        if (k->writer.sections == 0) {
            k->record_at = k->end;
        }
        int rc = index_seal_writer_add(&k->writer, &sec, (uint32_t)n, k->keys, k->key_bytes,
                                       k->values, k->value_bytes);
        if (rc != 0) {
            ds_log_error("%s: a chain's entries do not seal", k->g->dir);
            return -DS_ECORRUPT;
        }
        s->tag = sec.tag;
        s->head = k->record_at;
        s->max_ts = sec.chain_max_ts;
        if (first != 0 && k->directory_count < INDEX_DIRECTORY_ENTRIES_MAX) {
            uint8_t *d = k->directory + INDEX_DIRECTORY_HEADER_BYTES +
                         k->directory_count * INDEX_DIRECTORY_ENTRY_BYTES;
            ds_put_le64(d, k->record_at);
            ds_put_le64(d + 8, ~index_key_be64_get(k->keys[n - 1])); /* the oldest ts */
            k->directory_count++;
        }
        last = first;
    }
    return 0;
}

/* The new table's slot for the customer of tag, placed as an apply places it: the first slot
 * from its home in the new table that holds its tag, or that is empty (claimed now), within
 * INDEX_PROBE_MAX; when all hold others, the home slot's chain, shared. */
static uint32_t index_compact_place(struct index_compactor *k, uint64_t tag)
{
    ASSERT(tag != 0);
    uint64_t home = tag & k->mask;
    for (uint32_t i = 0; i < INDEX_PROBE_MAX; i++) {
        uint32_t slot = (uint32_t)((home + i) & k->mask);
        if (k->slots[slot].tag == tag) {
            return slot;
        }
        if (k->slots[slot].tag == 0) {
            k->slots[slot].tag = tag;
            return slot;
        }
    }
    return (uint32_t)home;
}

/* The batch's entries, sorted by (new home, customer, key, newest copy first), each customer
 * placed in the new table in the order of its home (so the slots its sections go to ascend
 * and a sealed record packs many) and its distinct keys sealed there; the batch is emptied. */
static int index_compact_batch(struct index_compactor *k)
{
    if (k->entry_count == 0) {
        k->customer_count = 0;
        return 0;
    }
    index_compacting = k;
    qsort(k->entries, k->entry_count, sizeof(*k->entries), index_compact_entry_compare);
    /* The distinct entries' indexes, reusing the arena's tail would alias: a separate array. */
    uint32_t *order = malloc(k->entry_count * sizeof(*order));
    if (order == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    size_t first = 0;
    size_t n = 0;
    for (size_t i = 0; i <= k->entry_count && rc == 0; i++) {
        const struct index_compact_entry *e = i < k->entry_count ? &k->entries[i] : NULL;
        const struct index_compact_entry *p = n > first ? &k->entries[order[n - 1]] : NULL;
        if (p != NULL && (e == NULL || p->customer != e->customer)) {
            uint32_t slot = index_compact_place(k, k->customers[p->customer].tag);
            rc = index_compact_customer(k, slot, order + first, n - first);
            first = n;
            p = NULL;
        }
        if (e != NULL && (p == NULL || index_key_compare(k->arena + p->at, p->key_bytes,
                                                         k->arena + e->at, e->key_bytes) != 0)) {
            order[n++] = (uint32_t)i; /* the newest copy of a key sorts first */
        }
    }
    free(order);
    k->entry_count = 0;
    k->arena_bytes = 0;
    k->customer_count = 0;
    return rc;
}

/* ---- sealing beside the applies ------------------------------------------------------------ */

/* Copy rounds of the seal's thread at most (copying runs at memory speed, applying an order
 * of magnitude slower, so each round leaves a shorter tail: the bound is only a bound), and
 * the tail below which it stops copying and leaves the rest to index_seal_finish (on the
 * applying thread: 256 KiB take well under a millisecond to copy). */
#define INDEX_SEAL_COPY_ROUNDS_MAX 1024u
#define INDEX_SEAL_COPY_SMALL_BYTES (256u << 10)
/* The seal's thread runs below the builder's priority (applies come first: a seal may take
 * longer, applies may not) but at the default's, not below it: at nice 5 beside ten busy
 * processes on 2 cores it got about 6% of a core, and a node fed 150,000 lines/s finished no
 * seal in the 30 s between restarts while its log grew past 230 MiB. */
#define INDEX_SEAL_NICE 0
/* A batch of chains collected, sorted and placed together ends after this many old slots or
 * once its entries pass this many bytes: a customer's home and the old slot of its chain differ
 * by less than a probe window, so only the customers near a batch's edge go to slots below the
 * last one written (each such costs the sealed record it ends), and the memory stays small. */
#define INDEX_SEAL_BATCH_SLOTS 4096u
#define INDEX_SEAL_BATCH_BYTES (4u << 20)
/* The new table grows when more than this share of the old one's slots are used (1/GROW_LOAD):
 * at half load a lookup probes about two slots and a probe window is almost never full, and
 * the next seal comes before the customers can grow much further (a seal is due when the log
 * grew by half). A table used at 3/4 or more is saturated (customers share chains, which the
 * used slots do not count) and grows once more. */
#define INDEX_SEAL_GROW_LOAD 2u
#define INDEX_SEAL_SATURATED_NUM 3u
#define INDEX_SEAL_SATURATED_DEN 4u
static_assert(INDEX_SEAL_BATCH_SLOTS >= INDEX_PROBE_MAX, "a batch spans a probe window");
/* The walk releases the mapped table's pages behind it every 2^16 slots (1.5 MiB); the swap
 * copies it into the live table a MiB at a time, releasing each. */
#define INDEX_SEAL_TABLE_RELEASE_MASK 0xFFFFu
#define INDEX_SEAL_TABLE_PAGE_BYTES 4096u
#define INDEX_SEAL_TABLE_COPY_BYTES ((size_t)1 << 20)
/* A walk maps the pages of runs this close together in one call, and the pages between them
 * with them (a page mapped for nothing costs less than a call). */
#define INDEX_SEAL_POPULATE_GAP_BYTES ((size_t)64 << 10)
/* Tables below 2^16 slots (1.5 MiB) are allocated: a file per seal costs more than it saves
 * (test_index_oracle, which seals small tables thousands of times: 90 -> 117 s). */
#define INDEX_SEAL_TABLE_MAPPED_LOG2_MIN 16u

/* A record of the tail in the batch being moved. */
struct index_seal_move {
    uint64_t old_offset;
    uint64_t new_offset;
    uint64_t tag;      /* runs: the customer's */
    uint64_t new_skip; /* runs: the skip written */
    uint32_t at;       /* in the batch */
    uint32_t len;
    uint32_t crc;    /* the record's as read */
    uint32_t before; /* runs: the customer's run this one follows in its apply, or NO_RUN */
    uint8_t type;
};
#define INDEX_SEAL_MOVE_NO_RUN UINT32_MAX
#define INDEX_SEAL_MOVE_EARLIER_BATCH (UINT32_MAX - 1u)

/* A run of the batch by its slot in the new table, ties in log order. */
struct index_seal_order {
    uint64_t slot;
    uint32_t move;
};

struct index_seal {
    struct index_compactor k; /* the new log */
    uint64_t started_ns;
    uint64_t from0;     /* the old log's end at the snapshot: the first record copied as is */
    uint64_t tail_new;  /* where that record goes in the new log */
    uint64_t from;      /* the old log: copied up to here */
    uint64_t cursor_at; /* the new log's last cursor record that ends an apply, its crc field */
    uint32_t cursor_crc;
    /* The crc field of the new log's last cursor record (a piece too): the next delta record
     * copied names it as the record it follows, in place of the one it named in the old log. */
    uint32_t link_crc;
    uint8_t *snapshot; /* the snapshot's cursor (snapshot_len bytes) and the apply it ends */
    size_t snapshot_len;
    uint64_t snapshot_applies;
    uint8_t *scan; /* INDEX_IO_BUFFER_BYTES: reads of the old log's tail */
    uint8_t *copy; /* INDEX_RECORD_BYTES_MAX: one run being moved */
    /* The last run moved: its offset in the old log, its customer and its skip in the new one
     * (a customer's later runs of one apply follow it and skip where it does). */
    uint64_t last_old;
    uint64_t last_skip;
    struct ds_id last_customer;
    /* The batch of the tail's records being moved (INDEX_SEAL_MOVE_BATCH_BYTES or a little
     * more: it ends only before a customer's first run of an apply). */
    uint8_t *batch;
    size_t batch_bytes;
    size_t batch_cap;
    struct index_seal_move *moves; /* its records, in log order */
    size_t move_count;
    size_t move_cap;
    struct index_seal_order *order; /* its runs, by slot */
    size_t order_count;
    size_t order_cap;
    uint32_t last_move; /* the batch's last run, or INDEX_SEAL_MOVE_NO_RUN */
    pthread_t thread;
    bool thread_started;
    int thread_rc;   /* the thread's outcome, once done */
    bool done;       /* __atomic: the thread finished */
    bool cancel;     /* __atomic: stop early */
    uint64_t copied; /* records the copy rounds have copied (how often they look at cancel) */
    char tmp[DS_PATH_MAX];
};

/* The head slot's chain had at the snapshot: back from its current head past every run
 * appended at or after from0 (a run's prev is the slot's previous run). */
static int index_seal_snapshot_head(struct index_seal *s, uint32_t slot, uint64_t *head)
{
    struct index *g = s->k.g;
    uint64_t at = __atomic_load_n(&g->slots[slot].head, __ATOMIC_ACQUIRE);
    while (at >= s->from0) {
        uint8_t h[INDEX_RUN_HEADER_BYTES];
        size_t got = 0;
        int rc = index_pread_all(g->log_fd, h, sizeof(h), at, &got);
        if (rc != 0 || got != sizeof(h) || h[8] != INDEX_RECORD_RUN ||
            ds_get_le32(h + 40) != slot || ds_get_le64(h + 16) >= at) {
            ds_log_error("%s/log: the run at %" PRIu64 " does not lead back to slot %" PRIu32
                         "'s chain",
                         g->dir, at, slot);
            return rc != 0 ? rc : -DS_ECORRUPT;
        }
        at = ds_get_le64(h + 16);
    }
    *head = at;
    return 0;
}

/* The new table's size (log2): the old one's, doubled until at most 1/INDEX_SEAL_GROW_LOAD of
 * it holds the old one's used slots, once more when the old one is saturated; never smaller,
 * at most INDEX_TABLE_SLOTS_LOG2_MAX. Slots claimed while it counts count or not: an estimate. */
static uint32_t index_seal_slots_log2(const struct index *g)
{
    uint64_t used = 0;
    for (uint64_t i = 0; i <= g->mask; i++) {
        used += index_slot_tag_load(&g->slots[i]) != 0;
    }
    uint32_t log2 = g->slots_log2;
    while (log2 < INDEX_TABLE_SLOTS_LOG2_MAX && used * INDEX_SEAL_GROW_LOAD > 1ull << log2) {
        log2++;
    }
    if (log2 > g->slots_log2 && log2 < INDEX_TABLE_SLOTS_LOG2_MAX &&
        used * INDEX_SEAL_SATURATED_DEN >= (g->mask + 1) * INDEX_SEAL_SATURATED_NUM) {
        log2++;
    }
    ASSERT(log2 >= g->slots_log2 && log2 <= INDEX_TABLE_SLOTS_LOG2_MAX);
    return log2;
}

/* The new table is written as the walk goes, slot after slot, and read once more at the swap:
 * it lives in a shared mapping of an unnamed file in DIR (O_TMPFILE, its blocks reserved up
 * front, so a write to it cannot fault on a full disk), and the pages the walk has passed leave
 * the process's RSS for the page cache (MADV_DONTNEED keeps a shared mapping's data). A node
 * then holds one table in memory, not two, while it seals (2^21 slots: 48 MiB). What the copy
 * rounds touch comes back in, a page per slot named by the applies made meanwhile, until the
 * next 64 runs moved release it again. Where DIR
 * cannot hold such a file (no O_TMPFILE, no space), and for a small table, the table is
 * allocated, and the swap takes it whole. Rejected: the table in slices written with pwrite (the
 * copy rounds update any slot, one pread and pwrite each). */
static struct index_slot *index_seal_table_create(struct index *g, uint32_t slots_log2,
                                                  size_t *mapped_bytes)
{
    size_t bytes = sizeof(struct index_slot) << slots_log2;
    *mapped_bytes = 0;
    int fd = slots_log2 >= INDEX_SEAL_TABLE_MAPPED_LOG2_MIN
                 ? open(g->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)
                 : -1;
    if (fd >= 0) {
        void *p = posix_fallocate(fd, 0, (off_t)bytes) == 0
                      ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : MAP_FAILED;
        close(fd); /* the mapping keeps the file */
        if (p != MAP_FAILED) {
            *mapped_bytes = bytes;
            return p;
        }
    }
    return calloc(1, bytes);
}

/* The mapped table's pages below up_to leave RSS (their data stays in the file). */
static void index_seal_table_release(struct index_compactor *k, size_t up_to)
{
    size_t page = INDEX_SEAL_TABLE_PAGE_BYTES;
    size_t end = up_to / page * page;
    if (k->slots_mapped_bytes == 0 || end <= k->slots_released_bytes) {
        return;
    }
    (void)madvise((uint8_t *)k->slots + k->slots_released_bytes, end - k->slots_released_bytes,
                  MADV_DONTNEED);
    k->slots_released_bytes = end;
}

/* The whole mapping leaves RSS: the passes of a growing seal write anywhere in it. */
static void index_seal_table_release_all(struct index_compactor *k)
{
    k->slots_released_bytes = 0;
    index_seal_table_release(k, k->slots_mapped_bytes);
}

/* Copies the mapped table to dst a MiB at a time, each MiB leaving RSS once copied. */
static void index_seal_table_copy_out(struct index_compactor *k, void *dst)
{
    k->slots_released_bytes = 0;
    for (size_t at = 0; at < k->slots_mapped_bytes; at += INDEX_SEAL_TABLE_COPY_BYTES) {
        size_t n = k->slots_mapped_bytes - at < INDEX_SEAL_TABLE_COPY_BYTES
                       ? k->slots_mapped_bytes - at
                       : INDEX_SEAL_TABLE_COPY_BYTES;
        memcpy((uint8_t *)dst + at, (const uint8_t *)k->slots + at, n);
        index_seal_table_release(k, at + n);
    }
}

/* A grown table cannot be copied into the live one in place: it is made an allocated table,
 * which the swap then takes whole. */
static int index_seal_table_unmap(struct index_compactor *k)
{
    uint8_t *heap = malloc(k->slots_mapped_bytes);
    if (heap == NULL) {
        return -ENOMEM;
    }
    index_seal_table_copy_out(k, heap);
    munmap(k->slots, k->slots_mapped_bytes);
    k->slots = (struct index_slot *)(void *)heap;
    k->slots_mapped_bytes = 0;
    k->slots_released_bytes = 0;
    return 0;
}

static void index_seal_table_free(struct index_compactor *k)
{
    if (k->slots_mapped_bytes > 0) {
        munmap(k->slots, k->slots_mapped_bytes);
    } else {
        free(k->slots);
    }
    k->slots = NULL;
}

/* One pass of the sealed part: the chains of the snapshot, in batches, for the customers of
 * the region k->region (one pass when the table keeps its size; 2^d when it grows by d bits,
 * so that the slots written ascend within each pass). */
static int index_seal_write_region(struct index_seal *s)
{
    struct index_compactor *k = &s->k;
    struct index *g = k->g;
    int rc = 0;
    uint64_t batch_start = 0;
    for (uint64_t i = 0; rc == 0 && i <= g->mask; i++) {
        if ((i & 0xFFFu) == 0 && __atomic_load_n(&s->cancel, __ATOMIC_RELAXED)) {
            return -ECANCELED;
        }
        if ((i & INDEX_SEAL_TABLE_RELEASE_MASK) == 0) {
            index_seal_table_release_all(k);
        }
        uint64_t head = 0;
        rc = index_seal_snapshot_head(s, (uint32_t)i, &head);
        rc = rc == 0 && head != 0 ? index_compact_collect(k, (uint32_t)i, head) : rc;
        if (rc == 0 && (i == g->mask || i + 1 - batch_start >= INDEX_SEAL_BATCH_SLOTS ||
                        k->arena_bytes >= INDEX_SEAL_BATCH_BYTES)) {
            rc = index_compact_batch(k);
            batch_start = i + 1;
        }
    }
    return rc;
}

/* The sealed part: header, every chain as the snapshot saw it placed in the new table, the
 * snapshot's cursor record. */
static int index_seal_write_sealed(struct index_seal *s)
{
    struct index_compactor *k = &s->k;
    struct index *g = k->g;
    k->slots_log2 = index_seal_slots_log2(g);
    k->mask = (1ull << k->slots_log2) - 1;
    k->slots = index_seal_table_create(g, k->slots_log2, &k->slots_mapped_bytes);
    if (k->slots == NULL) {
        return -ENOMEM;
    }
    uint8_t header[INDEX_LOG_HEADER_BYTES];
    index_log_header_make(k->slots_log2, header);
    int rc = index_compact_write(k, header, sizeof(header));
    uint32_t regions = 1u << (k->slots_log2 - g->slots_log2);
    for (uint32_t region = 0; rc == 0 && region < regions; region++) {
        k->region = region;
        rc = index_seal_write_region(s);
    }
    index_seal_table_release_all(k);
    rc = rc == 0 ? index_compact_record_flush(k) : rc;
    if (rc == 0) {
        /* The snapshot's whole cursor from the empty one (RESET), in pieces when it is large. */
        struct index_delta_writer w = {.next = s->snapshot,
                                       .len = s->snapshot_len,
                                       .ins = s->snapshot_len,
                                       .apply = s->snapshot_applies,
                                       .reset = true,
                                       .first = true};
        size_t len = 0;
        while (rc == 0 && (len = index_delta_writer_next(&w, k->record)) > 0) {
            s->cursor_at = k->end;
            s->cursor_crc = ds_get_le32(k->record);
            rc = index_compact_write(k, k->record, len);
        }
        s->link_crc = s->cursor_crc;
    }
    s->tail_new = k->end;
    return rc;
}

/* A run of the tail, checked against the chain it continues in log order and added to the
 * batch: the customer's first run of its apply (its skip equals its prev) or a later one, which
 * follows that one in the log and skips where it does. The old pointers are only checked: with
 * the table grown, a run's old chain may hold other customers, now on other slots. */
static int index_seal_batch_run(struct index_seal *s, const struct index_record *rec,
                                struct index_seal_move *m)
{
    const uint8_t *r = rec->bytes;
    uint64_t prev = ds_get_le64(r + 16);
    uint64_t skip = ds_get_le64(r + 64);
    bool later = skip != prev;
    size_t first = INDEX_RUN_HEADER_BYTES + r[10];
    struct ds_id customer;
    bool ok = index_run_customer(r, &customer) == 0 && first + 9 <= rec->len &&
              prev < rec->offset &&
              (!later || (prev == s->last_old && ds_id_equal(&customer, &s->last_customer)));
    if (!ok) {
        ds_log_error("%s/log: the run at %" PRIu64 " does not continue its chain (prev %" PRIu64
                     " skip %" PRIu64 " from0 %" PRIu64 " last run %" PRIu64 ")",
                     s->k.g->dir, rec->offset, prev, skip, s->from0, s->last_old);
        return -DS_ECORRUPT;
    }
    if (s->order_count == s->order_cap) {
        size_t cap = s->order_cap > 0 ? s->order_cap * 2 : 4096;
        struct index_seal_order *order = realloc(s->order, cap * sizeof(*order));
        if (order == NULL) {
            return -ENOMEM;
        }
        s->order = order;
        s->order_cap = cap;
    }
    m->tag = index_key_tag(&customer);
    m->before = !later                         ? INDEX_SEAL_MOVE_NO_RUN
                : s->last_move < s->move_count ? s->last_move
                                               : INDEX_SEAL_MOVE_EARLIER_BATCH;
    s->order[s->order_count++] = (struct index_seal_order){
        .slot = m->tag & s->k.mask,
        .move = (uint32_t)s->move_count,
    };
    s->last_old = rec->offset;
    s->last_customer = customer;
    s->last_move = (uint32_t)s->move_count;
    return 0;
}

static int index_seal_order_compare(const void *a, const void *b)
{
    const struct index_seal_order *x = a;
    const struct index_seal_order *y = b;
    if (x->slot != y->slot) {
        return x->slot < y->slot ? -1 : 1;
    }
    return x->move < y->move ? -1 : x->move > y->move;
}

/* A walk over the mapped table in ascending slots starts with none of it in RSS. */
static void index_seal_walk_start(struct index_compactor *k)
{
    index_seal_table_release_all(k);
    k->slots_released_bytes = 0;
    k->slots_populated_bytes = 0;
}

/* The walk is at the batch's i-th run in order: the mapped table's pages from its slot on are
 * mapped writable in one call as far as the next runs' slots lie close together (at most
 * INDEX_SEAL_POPULATE_GAP_BYTES apart, at most 2^16 slots at once), as a write fault per page
 * costs far more (perf showed them as most of a seal's copy rounds), and the pages below it,
 * less a probe window, leave RSS. A kernel without MADV_POPULATE_WRITE (before 5.14) faults
 * them in one by one. */
static void index_seal_walk_at(struct index_seal *s, size_t i)
{
    struct index_compactor *k = &s->k;
    if (k->slots_mapped_bytes == 0) {
        return;
    }
    size_t page = INDEX_SEAL_TABLE_PAGE_BYTES;
    size_t chunk = ((size_t)INDEX_SEAL_TABLE_RELEASE_MASK + 1u) * sizeof(struct index_slot);
    size_t window = INDEX_PROBE_MAX * sizeof(struct index_slot);
    uint64_t slot = s->order[i].slot;
    size_t at = (size_t)slot * sizeof(struct index_slot);
    if (at + window > k->slots_populated_bytes) {
        size_t from = at / page * page;
        from = from > k->slots_populated_bytes ? from : k->slots_populated_bytes;
        size_t to = at + window;
        for (size_t j = i + 1; j < s->order_count; j++) {
            size_t next = (size_t)s->order[j].slot * sizeof(struct index_slot) + window;
            if (next > from + chunk || next > to + INDEX_SEAL_POPULATE_GAP_BYTES) {
                break;
            }
            to = next > to ? next : to;
        }
        to = (to + page - 1) / page * page;
        to = to < k->slots_mapped_bytes ? to : k->slots_mapped_bytes;
        if (to > from) {
            (void)madvise((uint8_t *)k->slots + from, to - from, MADV_POPULATE_WRITE);
            k->slots_populated_bytes = to;
        }
    }
    if (slot >= INDEX_PROBE_MAX) {
        uint64_t below = (slot - INDEX_PROBE_MAX) & ~(uint64_t)INDEX_SEAL_TABLE_RELEASE_MASK;
        index_seal_table_release(k, (size_t)below * sizeof(struct index_slot));
    }
}

/* The batch's runs, each placed in its customer's slot of the new table (in the order of their
 * homes) and then chained there (in the order of their slots, a slot's runs in log order): prev
 * the slot's new head, skip that too for a customer's first run of its apply and the first
 * one's skip for its later runs, the chain max ts recomputed along the slot's new chain. */
static void index_seal_batch_chain(struct index_seal *s)
{
    struct index_compactor *k = &s->k;
    qsort(s->order, s->order_count, sizeof(*s->order), index_seal_order_compare);
    index_seal_walk_start(k);
    for (size_t i = 0; i < s->order_count; i++) {
        struct index_seal_order *o = &s->order[i];
        index_seal_walk_at(s, i);
        o->slot = index_compact_place(k, s->moves[o->move].tag);
    }
    /* A customer placed past the table's end wraps to its start; a shared chain (a full probe
     * window) holds customers of other homes: the slots, not the homes, order the chains. */
    qsort(s->order, s->order_count, sizeof(*s->order), index_seal_order_compare);
    index_seal_walk_start(k);
    for (size_t i = 0; i < s->order_count; i++) {
        const struct index_seal_order *o = &s->order[i];
        index_seal_walk_at(s, i);
        struct index_seal_move *m = &s->moves[o->move];
        uint8_t *r = s->batch + m->at;
        struct index_slot *n = &k->slots[o->slot];
        uint64_t new_skip = m->before == INDEX_SEAL_MOVE_NO_RUN ? n->head
                            : m->before == INDEX_SEAL_MOVE_EARLIER_BATCH
                                ? s->last_skip
                                : s->moves[m->before].new_skip;
        size_t first = INDEX_RUN_HEADER_BYTES + r[10];
        int64_t newest = (int64_t)~index_key_be64_get(r + first + 1);
        int64_t chain_max = n->head == 0 || newest > n->max_ts ? newest : n->max_ts;
        ds_put_le64(r + 16, n->head);
        ds_put_le64(r + 24, (uint64_t)chain_max);
        ds_put_le32(r + 40, (uint32_t)o->slot);
        ds_put_le64(r + 48, n->tag);
        ds_put_le64(r + 56, n->head != 0 ? (uint64_t)n->max_ts : 0);
        ds_put_le64(r + 64, new_skip);
        ds_put_le32(r, ds_crc32c(0, r + 4, m->len - 4u));
        m->new_skip = new_skip;
        n->head = m->new_offset;
        n->max_ts = chain_max;
    }
    index_seal_table_release_all(k);
    if (s->last_move < s->move_count) {
        s->last_skip = s->moves[s->last_move].new_skip;
    }
}

/* A cursor record of the tail, written: a delta one follows the new log's last cursor record,
 * not the old log's. */
static int index_seal_write_cursor(struct index_seal *s, const struct index_seal_move *m)
{
    const uint8_t *r = s->batch + m->at;
    uint32_t crc = m->crc;
    if (m->type == INDEX_RECORD_CURSOR_DELTA && (r[9] & INDEX_DELTA_RESET) == 0) {
        memcpy(s->copy, r, m->len);
        ds_put_le32(s->copy + 24, s->link_crc);
        crc = ds_crc32c(0, s->copy + 4, m->len - 4u);
        ds_put_le32(s->copy, crc);
        r = s->copy;
    }
    if (index_record_commits(m->type, r)) {
        s->cursor_at = s->k.end;
        s->cursor_crc = crc;
    }
    s->link_crc = crc;
    return index_compact_write(&s->k, r, m->len);
}

/* The batch moved: its runs chained in the new table, then every record written in log order. */
static int index_seal_batch_write(struct index_seal *s)
{
    if (s->order_count > 0) {
        index_seal_batch_chain(s);
    }
    int rc = 0;
    for (size_t i = 0; i < s->move_count && rc == 0; i++) {
        const struct index_seal_move *m = &s->moves[i];
        ASSERT(m->new_offset == s->k.end);
        rc = m->type == INDEX_RECORD_RUN ? index_compact_write(&s->k, s->batch + m->at, m->len)
                                         : index_seal_write_cursor(s, m);
    }
    s->batch_bytes = 0;
    s->move_count = 0;
    s->order_count = 0;
    s->last_move = INDEX_SEAL_MOVE_NO_RUN;
    return rc;
}

static int index_seal_copy_record(struct index *g, const struct index_record *rec, void *user)
{
    (void)g;
    struct index_seal *s = user;
    /* A round may copy hundreds of MiB applied since the snapshot: a stop must not wait it out
     * (a node fed 10M orders took over a minute to exit). */
    if ((++s->copied & 0xFFFu) == 0 && __atomic_load_n(&s->cancel, __ATOMIC_RELAXED)) {
        return -ECANCELED;
    }
    if (rec->type != INDEX_RECORD_RUN && rec->type != INDEX_RECORD_CURSOR &&
        rec->type != INDEX_RECORD_CURSOR_DELTA) {
        /* Sealed records come only from a seal, and one runs at a time. */
        ds_log_error("%s/log: a record of type %u at %" PRIu64 " after the sealed part",
                     s->k.g->dir, rec->type, rec->offset);
        return -DS_ECORRUPT;
    }
    int rc = 0;
    if (s->batch_bytes > 0 && s->batch_bytes + rec->len > s->k.g->seal_batch_bytes) {
        rc = index_seal_batch_write(s);
    }
    if (rc == 0 && s->move_count == s->move_cap) {
        size_t cap = s->move_cap > 0 ? s->move_cap * 2 : 4096;
        struct index_seal_move *moves = realloc(s->moves, cap * sizeof(*moves));
        rc = moves != NULL ? 0 : -ENOMEM;
        if (rc == 0) {
            s->moves = moves;
            s->move_cap = cap;
        }
    }
    if (rc != 0) {
        return rc;
    }
    struct index_seal_move *m = &s->moves[s->move_count];
    *m = (struct index_seal_move){
        .old_offset = rec->offset,
        .new_offset = rec->offset - s->from0 + s->tail_new,
        .at = (uint32_t)s->batch_bytes,
        .len = rec->len,
        .crc = rec->crc,
        .type = rec->type,
    };
    ASSERT(m->new_offset == s->k.end + s->batch_bytes);
    rc = rec->type == INDEX_RECORD_RUN ? index_seal_batch_run(s, rec, m) : 0;
    if (rc == 0) {
        memcpy(s->batch + s->batch_bytes, rec->bytes, rec->len);
        s->batch_bytes += rec->len;
        s->move_count++;
    }
    return rc;
}

/* Copies the old log's records in [s->from, until) (whole applies) to the new log. */
static int index_seal_copy(struct index_seal *s, uint64_t until)
{
    if (until <= s->from) {
        return 0;
    }
    uint64_t end = 0;
    int rc = index_scan(s->k.g, s->scan, s->from, until, index_seal_copy_record, s, &end);
    if (rc == 0 && end != until) {
        ds_log_error("%s/log: a damaged record at %" PRIu64 " stops the seal", s->k.g->dir, end);
        rc = -DS_ECORRUPT;
    }
    rc = rc == 0 ? index_seal_batch_write(s) : rc;
    if (rc == 0) {
        __atomic_store_n(&s->from, until, __ATOMIC_RELAXED);
    }
    return rc;
}

/* The end of the last whole apply, as another thread than the applying one may read it. */
static int index_seal_applied_end(struct index *g, uint64_t *end)
{
    pthread_mutex_lock(&g->cursor_lock);
    uint64_t at = g->cursor_at;
    pthread_mutex_unlock(&g->cursor_lock);
    uint8_t prefix[INDEX_RECORD_PREFIX_BYTES];
    size_t got = 0;
    int rc = index_pread_all(g->log_fd, prefix, sizeof(prefix), at, &got);
    if (rc != 0 || got != sizeof(prefix)) {
        return rc != 0 ? rc : -DS_ECORRUPT;
    }
    *end = at + ds_get_le32(prefix + 4);
    return 0;
}

static int index_seal_flush(struct index_compactor *k)
{
    int rc =
        k->out_bytes > 0 ? ds_pwrite_full(k->fd, k->out, k->out_bytes, k->end - k->out_bytes) : 0;
    k->out_bytes = rc == 0 ? 0 : k->out_bytes;
    return rc;
}

/* The thread's part: the sealed part, synced, then the applies made meanwhile in rounds until
 * what is left is small. */
static int index_seal_prepare(struct index_seal *s, bool background)
{
    int rc = index_seal_write_sealed(s);
    rc = rc == 0 ? index_seal_flush(&s->k) : rc;
    rc = rc == 0 && fsync(s->k.fd) != 0 ? -errno : rc;
    for (uint32_t round = 0; background && rc == 0 && round < INDEX_SEAL_COPY_ROUNDS_MAX; round++) {
        uint64_t end = 0;
        rc = index_seal_applied_end(s->k.g, &end);
        if (rc != 0 || end - s->from < INDEX_SEAL_COPY_SMALL_BYTES ||
            __atomic_load_n(&s->cancel, __ATOMIC_RELAXED)) {
            break;
        }
        rc = index_seal_copy(s, end);
        if (rc == 0 && round == 0) {
            /* The copied tail written back now, not by the directory sync of the swap on the
             * applying thread (ext4 commits the new file's allocated blocks with it). */
            rc = index_seal_flush(&s->k);
            rc = rc == 0 && fdatasync(s->k.fd) != 0 ? -errno : rc;
        }
    }
    return rc;
}

static void *index_seal_main(void *arg)
{
    struct index_seal *s = arg;
    pthread_setname_np(pthread_self(), "ds-gsi-seal");
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), INDEX_SEAL_NICE);
    s->thread_rc = index_seal_prepare(s, true);
    __atomic_store_n(&s->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static void index_seal_free(struct index_seal *s)
{
    struct index_compactor *k = &s->k;
    if (k->fd >= 0) {
        close(k->fd);
    }
    free(k->out);
    index_seal_table_free(k);
    ZSTD_freeCCtx(k->cctx);
    free(k->body);
    free(k->scratch);
    free(k->record);
    free(k->directory);
    free(k->entries);
    free(k->arena);
    free(k->customers);
    free(s->snapshot);
    free(s->scan);
    free(s->copy);
    free(s->batch);
    free(s->moves);
    free(s->order);
    free(s);
}

/* The snapshot's cursor: the last apply's number and cursor (the applying thread). */
static int index_seal_snapshot_cursor(struct index_seal *s, struct index *g)
{
    pthread_mutex_lock(&g->cursor_lock);
    s->snapshot = malloc(g->cursor_len > 0 ? g->cursor_len : 1u);
    if (s->snapshot != NULL) {
        memcpy(s->snapshot, g->cursor, g->cursor_len);
        s->snapshot_len = g->cursor_len;
        s->snapshot_applies = g->applies;
    }
    pthread_mutex_unlock(&g->cursor_lock);
    return s->snapshot != NULL ? 0 : -ENOMEM;
}

static int index_seal_create(struct index *g, int32_t floor_day, struct index_seal **out)
{
    struct index_seal *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    struct index_compactor *k = &s->k;
    k->g = g;
    k->fd = -1;
    k->floor_day = floor_day;
    k->out = malloc(INDEX_IO_BUFFER_BYTES);
    k->cctx = ZSTD_createCCtx();
    k->body = malloc(INDEX_SEAL_RAW_MAX);
    k->scratch = malloc(INDEX_SEAL_RAW_MAX);
    k->directory = malloc(INDEX_RECORD_BYTES_MAX);
    k->record = malloc(INDEX_RECORD_BYTES_MAX);
    s->scan = malloc(INDEX_IO_BUFFER_BYTES);
    s->copy = malloc(INDEX_RECORD_BYTES_MAX);
    s->batch = malloc(g->seal_batch_bytes > INDEX_RECORD_BYTES_MAX ? g->seal_batch_bytes
                                                                   : INDEX_RECORD_BYTES_MAX);
    s->last_move = INDEX_SEAL_MOVE_NO_RUN;
    int rc = k->out && k->cctx && k->body && k->scratch && k->record && k->directory && s->scan &&
                     s->copy && s->batch
                 ? 0
                 : -ENOMEM;
    if (rc == 0) {
        index_seal_writer_reset(&k->writer, k->body);
        index_path(g, "log.compact", s->tmp);
        k->fd = open(s->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        rc = k->fd < 0 ? -errno : 0;
    }
    if (rc != 0) {
        ds_log_error("%s: cannot start a seal: %s", g->dir, ds_strerror(rc));
        index_seal_free(s);
        return rc;
    }
    s->started_ns = ds_clock_ns();
    s->from0 = g->log_end;
    s->from = g->log_end;
    rc = index_seal_snapshot_cursor(s, g);
    if (rc != 0) {
        index_seal_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static_assert(INDEX_SEAL_RECORD_BYTES_MAX <= INDEX_RECORD_BYTES_MAX,
              "k->record holds a sealed one");

int index_seal_start(struct index *g, int32_t floor_day, struct index_seal **out)
{
    ASSERT(g != NULL && out != NULL);
    ASSERT(g->writer);
    ASSERT(g->buffered == 0);
    if (g->failed) {
        ds_log_error("%s: an earlier apply failed; reopen the index", g->dir);
        return -EIO;
    }
    struct index_seal *s = NULL;
    int rc = index_seal_create(g, floor_day, &s);
    if (rc != 0) {
        return rc;
    }
    rc = -pthread_create(&s->thread, NULL, index_seal_main, s);
    if (rc != 0) {
        ds_log_error("%s: cannot start the seal's thread: %s", g->dir, ds_strerror(rc));
        (void)unlink(s->tmp);
        index_seal_free(s);
        return rc;
    }
    s->thread_started = true;
    *out = s;
    return 0;
}

uint64_t index_seal_moved_end(const struct index_seal *s)
{
    return __atomic_load_n(&s->from, __ATOMIC_RELAXED);
}

bool index_seal_ready(const struct index_seal *s)
{
    ASSERT(s != NULL);
    return __atomic_load_n(&s->done, __ATOMIC_ACQUIRE);
}

/* Whether a checkpoint of the thread's is in flight: its table would name the old log. */
static bool index_seal_checkpoint_busy(struct index *g)
{
    struct index_checkpoint_stats c;
    index_checkpoint_stats_get(g, &c);
    return c.started > c.done + c.failed;
}

/* Renames the new log over DIR/log and swaps it and its table into the handle: DIR/table goes
 * first (it names the old log's records; without it an opening handle reads the whole log). */
static int index_seal_swap(struct index_seal *s)
{
    struct index_compactor *k = &s->k;
    struct index *g = k->g;
    char path[DS_PATH_MAX];
    /* Before anything changes on disk: the swap itself cannot fail. */
    int rc =
        k->slots_mapped_bytes > 0 && k->slots_log2 != g->slots_log2 ? index_seal_table_unmap(k) : 0;
    index_path(g, "table", path);
    rc = rc == 0 && unlink(path) != 0 && errno != ENOENT ? -errno : rc;
    rc = rc == 0 ? ds_fsync_dir(g->dir) : rc;
    index_path(g, "log", path);
    rc = rc == 0 && rename(s->tmp, path) != 0 ? -errno : rc;
    if (rc != 0) {
        return rc;
    }
    pthread_rwlock_wrlock(&g->swap_lock);
    int old_fd = g->log_fd;
    if (k->slots_mapped_bytes > 0 && k->slots_log2 == g->slots_log2) {
        /* Into the live table in place (the readers wait: ~10 ms for 48 MiB). */
        index_seal_table_copy_out(k, g->slots);
    } else {
        ASSERT(k->slots_mapped_bytes == 0); /* a grown table was made an allocated one above */
        struct index_slot *old = g->slots;
        g->slots = k->slots;
        g->slots_log2 = k->slots_log2;
        g->mask = k->mask;
        k->slots = old;
    }
    g->log_fd = k->fd;
    g->log_end = k->end;
    pthread_mutex_lock(&g->cursor_lock);
    g->cursor_at = s->cursor_at;
    g->cursor_crc = s->cursor_crc;
    g->cursor_link_crc = s->link_crc;
    pthread_mutex_unlock(&g->cursor_lock);
    g->checkpoint_end = s->tail_new; /* the sealed part is its own checkpoint (see index_close) */
    g->sealed_end = s->tail_new;
    pthread_rwlock_unlock(&g->swap_lock);
    k->fd = old_fd;
    /* Durable rename: until then a power cut keeps the old log, whole, which is also right. */
    rc = ds_fsync_dir(g->dir);
    if (rc != 0) {
        ds_log_warn("%s: cannot sync the directory after a seal: %s", g->dir, ds_strerror(rc));
    }
    return 0;
}

/* The applying thread's part: the last applies copied, the swap. */
static int index_seal_complete(struct index_seal *s, struct index_compact_stats *stats)
{
    struct index *g = s->k.g;
    uint64_t t0 = ds_clock_ns();
    uint32_t slots_log2_before = g->slots_log2;
    /* No checkpoint of the old log may land after the swap, and the thread's writeback offsets
     * are the old log's: stop it (nothing is in flight, see the caller); the next apply that
     * needs it starts it again. */
    index_checkpointer_stop(g);
    uint64_t before = g->log_end;
    uint64_t t1 = ds_clock_ns();
    int rc = index_seal_copy(s, g->log_end);
    rc = rc == 0 ? index_seal_flush(&s->k) : rc;
    uint64_t t2 = ds_clock_ns();
    rc = rc == 0 ? index_seal_swap(s) : rc;
    ds_log_debug("%s: seal finish: checkpointer %.1f ms, copy %.1f ms, swap %.1f ms", g->dir,
                 (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
                 (double)(ds_clock_ns() - t2) / 1e6);
    if (rc != 0) {
        return rc;
    }
    index_checkpointer_compacted(g);
    uint64_t now = ds_clock_ns();
    if (stats != NULL) {
        *stats = (struct index_compact_stats){
            .bytes_before = before,
            .bytes_after = g->log_end,
            .seconds = (double)(now - s->started_ns) / 1e9,
            .written_bytes = g->log_end,
            .tail_bytes = g->log_end - s->tail_new,
            .dropped_entries = s->k.dropped,
            .finish_ns = now - t0,
            .slots_log2 = g->slots_log2,
        };
    }
    ds_log_info("%s: sealed the log from %" PRIu64 " to %" PRIu64 " bytes (%" PRIu64
                " copied after the seal's snapshot, %" PRIu64 " entries below the floor left "
                "out; applies held %.1f ms)",
                g->dir, before, g->log_end, g->log_end - s->tail_new, s->k.dropped,
                (double)(now - t0) / 1e6);
    if (g->slots_log2 != slots_log2_before) {
        ds_log_info("%s: the seal grew the slot table from 2^%" PRIu32 " to 2^%" PRIu32 " slots",
                    g->dir, slots_log2_before, g->slots_log2);
    }
    return 0;
}

int index_seal_finish(struct index_seal *s, bool wait, struct index_compact_stats *stats)
{
    ASSERT(s != NULL);
    struct index *g = s->k.g;
    ASSERT(g->buffered == 0);
    if (!wait && (!index_seal_ready(s) || index_seal_checkpoint_busy(g))) {
        return -EAGAIN;
    }
    if (s->thread_started) {
        pthread_join(s->thread, NULL);
        s->thread_started = false;
    }
    int rc = s->thread_rc;
    if (rc == 0 && g->failed) {
        ds_log_error("%s: an earlier apply failed; reopen the index", g->dir);
        rc = -EIO;
    }
    rc = rc == 0 ? index_seal_complete(s, stats) : rc;
    if (rc != 0) {
        ds_log_error("%s: cannot seal the log: %s (the old log stays)", g->dir, ds_strerror(rc));
        (void)unlink(s->tmp);
    }
    index_seal_free(s);
    return rc;
}

void index_seal_cancel(struct index_seal *s)
{
    if (s == NULL) {
        return;
    }
    __atomic_store_n(&s->cancel, true, __ATOMIC_RELAXED);
    if (s->thread_started) {
        pthread_join(s->thread, NULL);
    }
    (void)unlink(s->tmp);
    index_seal_free(s);
}

void index_log_bytes(const struct index *g, uint64_t *sealed, uint64_t *live)
{
    ASSERT(g != NULL && g->writer);
    *sealed = g->sealed_end;
    *live = g->log_end - g->sealed_end;
}

bool index_seal_due(const struct index *g, bool idle)
{
    uint64_t sealed = 0;
    uint64_t live = 0;
    index_log_bytes(g, &sealed, &live);
    if (live >= INDEX_SEAL_LIVE_MIN_BYTES && live >= sealed / 2) {
        return true;
    }
    return idle && live >= INDEX_SEAL_IDLE_MIN_BYTES + sealed / 32;
}

int index_compact(struct index *g, struct index_compact_stats *stats)
{
    ASSERT(g != NULL);
    ASSERT(g->writer);
    ASSERT(g->buffered == 0);
    if (g->failed) {
        ds_log_error("%s: an earlier apply failed; reopen the index", g->dir);
        return -EIO;
    }
    if (g->cursor_at == 0) {
        return 0; /* nothing applied: nothing to seal */
    }
    /* The same code as a seal beside the applies, on the calling thread: the tail is the
     * snapshot's cursor record alone. */
    struct index_seal *s = NULL;
    int rc = index_seal_create(g, INT32_MIN, &s);
    if (rc != 0) {
        return rc;
    }
    s->thread_rc = index_seal_prepare(s, false);
    s->done = true;
    return index_seal_finish(s, true, stats);
}
