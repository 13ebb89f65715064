/*
 * The orders-by-id store (ids.h): an append-only log of order records and an in-memory keydir.
 *
 * Log record, little-endian, 4-byte aligned (the zero padding is not counted in length):
 *   0 u32 CRC32C of bytes 4..length   4 u16 length   6 u8 flags (IDS_FLAG_*)   7 u8 status length
 *   8 order id, customer id (each a varint, or for a string id a length byte and its bytes),
 *     version (a varint, when the flag says it has one), ts_ms (varint; the day follows from it),
 *     shard, zigzag amount units, versions seen, zigzag source partition (varints), the status
 *     bytes, and when the flag says so the items: a varint length and the canonical bytes
 *     (storage/ids_record.c encodes it; docs/FORMATS.md has the table).
 * About 32 bytes for a typical order (a 72-byte fixed layout made it 102: the log is written
 * once per version, so its size is most of what the orders model adds to ingest).
 * Every record is checked (CRC, lengths, ranges) when it is encoded and again each time it is
 * read back; a record below the committed length that fails is corruption, never skipped.
 *
 * Keydir: open addressing with linear probing over n slots of 8 bytes, the slot being
 * (28 high bits of the id's hash << 36) | (offset / 4 + 1); 0 is empty. The home slot is those
 * 28 bits scaled to n (tag * n >> 28), so homes keep the hash's order at any n and a growth
 * recomputes every home from the slot alone, without reading the log. A probe stops at the
 * first empty slot: a miss touches a cache line or two and does no I/O; a hash match reads the
 * record and compares the id, so two ids sharing 28 bits are told apart by the log.
 * Growth, past 3/4 load: below 2 MiB the table doubles; from there it is a directory of 2 MiB
 * segments (one huge page each) and grows by a quarter in whole segments, reading the old table
 * a segment at a time and reusing each segment read for the new one, so it never holds the old
 * and the new table whole (doubling would hold 256 + 512 MiB at 25.2M orders, 1.1 GiB of a
 * node at 30M events). From 12 segments (2.4M orders) on, load stays between 0.59 and 0.75: 10.7
 * to 13.5 bytes per order (doubling: 10.7 to 21.3, and 32 while it held both tables). The price:
 * each entry is moved about 5 times over the table's life instead of 2 (sequential passes).
 *
 * Invariants: the log's bytes [0, committed) are records whose last one per id is what the
 * keydir points at; bytes [committed, committed + pending) live in the pending buffer until
 * ids_committed, and the keydir may point into them; nothing is queued while puts are allowed.
 *
 * Rejected: 16-byte slots holding the full 64-bit hash (no log read on a 28-bit collision, but
 * 21 to 43 bytes per order, over the 24-byte budget), and a keydir of the ids themselves (up to
 * 72 bytes per order; the lookup that hits reads the record anyway, for its version). Also
 * rejected for growth: linear hashing over fixed segments (one split at a time, but segments
 * not yet split hold twice the load of split ones, so the mean load must stay near 0.4: 20
 * bytes per order) and an incremental migration with two live tables (every lookup probes
 * both while it runs, and the memory of both is held until it ends).
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shard/shard.h"
#include "storage/format.h"
#include "storage/ids.h"
#include "storage/ids_file.h"
#include "storage/ids_record.h"
#include "storage/storage.h"

#define IDS_HASH_BITS 28u
#define IDS_OFFSET_BITS 36u
#define IDS_OFFSET_MASK ((1ull << IDS_OFFSET_BITS) - 1)
/* The first table: 8 KiB. Tables below a segment double; from one segment on they grow by a
 * quarter (IDS_GROWTH_DIVISOR), rounded up to whole segments. */
#define IDS_SLOTS_MIN 1024u
/* A segment is 2^18 slots, 2 MiB: one huge page, and small beside the tables that matter
 * (rounding a growth up to whole segments adds at most one: 1/12 of the table at 12 segments,
 * under 1/60 from 60 segments, 12M orders, on). */
#define IDS_SEGMENT_SHIFT 18u
#define IDS_SEGMENT_SLOTS (1ull << IDS_SEGMENT_SHIFT)
#define IDS_SEGMENTS_MAX (IDS_SLOTS_MAX / IDS_SEGMENT_SLOTS)
#define IDS_GROWTH_DIVISOR 4u
/* Spare segments a growth maps beyond the ones it adds: the pass reuses each old segment once it
 * has read it, but it writes a little ahead of what it has read (a probe run spilling into the
 * next segment, the run that wraps from the end to the start). Never-touched spares cost no
 * memory and are unmapped at the end. */
#define IDS_GROWTH_SPARE_SEGMENTS 4u
/* A first read of a record: the header, both ids and the status fit, and most items. */
#define IDS_READ_FIRST_BYTES 512u
/* The writer's stalls in ids_maintain: a histogram of 4 buckets per power of two of ns. */
#define IDS_STALL_SUBBUCKETS 4u
#define IDS_STALL_BUCKETS (62u * IDS_STALL_SUBBUCKETS + IDS_STALL_SUBBUCKETS)
/* A writer keeps the newest committed bytes of the log in memory: updates mostly touch recent
 * orders, and a lookup served from memory saves a read system call. */
#define IDS_TAIL_BYTES IDS_RECENT_HARD_BYTES
/* Tables of this size and more are aligned to it and asked to use transparent huge pages. */
#define IDS_HUGE_BYTES (2u * 1024 * 1024)
/* The replay buffer: sequential reads of the log in chunks of this size. */
#define IDS_REPLAY_BYTES (1u << 20)

static_assert(IDS_HASH_BITS + IDS_OFFSET_BITS == 64, "a slot is one u64");
static_assert(IDS_SLOTS_MAX <= 1ull << IDS_HASH_BITS, "homes are recomputed from stored bits");
static_assert(IDS_SLOTS_MAX % IDS_SEGMENT_SLOTS == 0, "the largest table is whole segments");
static_assert(IDS_SEGMENT_SLOTS * sizeof(uint64_t) == IDS_HUGE_BYTES, "a segment is a huge page");
static_assert(IDS_SLOTS_MIN < IDS_SEGMENT_SLOTS, "small tables double up to a segment");
static_assert(IDS_REPLAY_BYTES >= IDS_RECORD_BYTES_MAX, "a record fits the replay buffer");
static_assert(IDS_PENDING_BYTES_MAX >= IDS_RECORD_BYTES_MAX, "a record fits the pending buffer");
static_assert(STORAGE_ORDER_SCRATCH_BYTES == IDS_RECORD_BYTES_MAX, "storage.h's scratch size");

/* A sealed file: the orders whose current version is on day. */
struct ids_day {
    int32_t day;
    uint64_t gen; /* the seal that wrote it: its name is day.<day>.<gen> */
    struct ids_file *file;
};

/* Days whose sealed file holds an order the recent tier changed or removed: the next seal
 * rewrites them. A short list (the retained days at most), searched linearly. */
struct day_set {
    int32_t *days;
    uint32_t count;
    uint32_t capacity;
};

/* The frozen tier: the recent tier a seal is moving into the sealed files. Its keydir and the
 * whole log stay in memory and are read by lookups until the seal's files replace them. */
struct frozen {
    bool present;
    bool named; /* DIR/ids/CURRENT names its log: commits may go on in the next log */
    uint64_t *segments[IDS_SEGMENTS_MAX];
    uint64_t slots_count;
    uint64_t keys;
    uint8_t *mem;     /* the log's bytes [0, bytes) */
    bool mem_is_tail; /* mem was the writer's tail (IDS_TAIL_BYTES): reused as the next one */
    size_t mapped;    /* mem is the log file mapped read-only, this many bytes (0: allocated) */
    uint64_t bytes;
    uint64_t base;
    uint64_t gen;
    int64_t delta; /* orders it adds to the sealed files (new minus removed) */
    bool ordered;  /* its log is its seal's input as it lies (struct ids' ordered) */
    struct day_set touched;
    char path[DS_PATH_MAX];
};

struct seal_job;

struct ids {
    struct storage_io *io;
    int fd; /* the log; -1: a reader of a log not created yet */
    bool read_only;
    bool queued;                /* ids_queue ran; ids_committed not yet */
    char path[DS_PATH_MAX];     /* the log (the recent tier's write-ahead log) */
    char dir[DS_PATH_MAX];      /* DIR/ids */
    char data_dir[DS_PATH_MAX]; /* DIR */
    /* The descriptor's state: its generation (0: none yet, the log is DIR/ids/log), the logical
     * position of the log's byte 0 (positions the MANIFEST commits are base + log offset), and
     * the sealed files by ascending day. */
    uint64_t gen;
    uint64_t base;
    struct ids_day *days;
    uint32_t days_count;
    uint64_t recent_budget_bytes;
    uint64_t seal_retry_bytes; /* after a failed seal, the log length of the next try */
    uint8_t *block;            /* a sealed block being read */
    ZSTD_DCtx *dctx;           /* and its decompression */
    /* The keydir: slot i lives at segments[i >> IDS_SEGMENT_SHIFT][i % IDS_SEGMENT_SLOTS]. A
     * table below IDS_SEGMENT_SLOTS slots is one short segment (a power of two); a larger one
     * is a whole number of segments. */
    uint64_t *segments[IDS_SEGMENTS_MAX];
    uint64_t slots_count;
    uint64_t slots_max;    /* IDS_SLOTS_MAX, or lower (ids_set_slots_max) */
    uint64_t keys;         /* occupied slots: records and tombstones of the recent tier */
    uint64_t sealed_count; /* orders of the sealed files */
    int64_t delta;         /* orders the recent tier adds (new minus removed) */
    /* Whether the log holds one record per id, no tombstone, integer ids rising and days not
     * falling in log order (a stream of new orders): its seal then takes the records as they lie,
     * without a pass over the keydir or a sort. ordered_id and ordered_day: the last record's. */
    bool ordered;
    int64_t ordered_id;
    int32_t ordered_day;
    uint64_t committed_bytes; /* of the log file: the logical position is base + this */
    uint8_t *pending;         /* records at [committed_bytes, committed_bytes + pending_bytes) */
    size_t pending_bytes;
    size_t pending_capacity;
    uint8_t *tail; /* a writer's committed bytes [tail_start, committed_bytes), or NULL; a ring */
    uint8_t *spare_tail; /* the last frozen tier's tail: the next freeze's, its pages faulted in */
    uint64_t tail_start;
    struct frozen frozen;
    struct day_set touched;
    struct seal_job *job; /* a seal running on its thread, or NULL */
    bool background;      /* ids_maintain seals on a thread (tests turn it off) */
    /* The writer's time in ids_maintain per call that had work: a histogram (a node runs for
     * months; one figure per call would grow with them), the calls, their sum and maximum. */
    uint64_t stalls_hist[IDS_STALL_BUCKETS];
    uint64_t stalls_count;
    uint64_t stalls_total_ns;
    uint64_t stalls_max_ns;
    uint64_t seals;                        /* installed by this handle */
    uint8_t scratch[IDS_RECORD_BYTES_MAX]; /* the record a put compares against */
    /* The last ids_get's probe, valid until the keydir changes: the writer's put of the order it
     * just looked up (the orders model always does that) takes the slot without probing and
     * reading the old record again. */
    struct {
        bool valid;
        bool in_keydir; /* index is its slot, else the empty slot ending the probe */
        bool tombstone; /* the slot points at a tombstone */
        bool in_frozen; /* not in the keydir: the frozen tier has a record of it */
        bool frozen_tombstone;
        int32_t frozen_day;
        int64_t day_index; /* the sealed file holding it, -1: none */
        uint64_t hash;
        uint64_t index;
        struct ds_id id;
    } last;
};

/* ---- reading records back ------------------------------------------------------------------ */

/* Copies len bytes of the log at offset, held by the tail, into dst (the ring may wrap). */
static void tail_copy_out(const struct ids *ids, uint64_t offset, uint8_t *dst, size_t len)
{
    size_t at = (size_t)(offset % IDS_TAIL_BYTES);
    size_t first = IDS_TAIL_BYTES - at < len ? IDS_TAIL_BYTES - at : len;
    memcpy(dst, ids->tail + at, first);
    memcpy(dst + first, ids->tail, len - first);
}

/* Reads and checks the record at offset into dst (capacity >= IDS_RECORD_BYTES_MAX). */
static int ids_read_record(struct ids *ids, uint64_t offset, uint8_t *dst,
                           struct storage_order *out, bool *tombstone)
{
    uint64_t end = ids->committed_bytes + ids->pending_bytes;
    ASSERT(offset % 4 == 0);
    ASSERT(offset < end);
    if (offset >= ids->committed_bytes) {
        size_t at = (size_t)(offset - ids->committed_bytes);
        size_t avail = ids->pending_bytes - at;
        avail = avail < IDS_RECORD_BYTES_MAX ? avail : IDS_RECORD_BYTES_MAX;
        memcpy(dst, ids->pending + at, avail);
        return ids_record_decode(dst, avail, out, tombstone);
    }
    if (ids->tail != NULL && offset >= ids->tail_start) {
        size_t avail = (size_t)(ids->committed_bytes - offset);
        avail = avail < IDS_RECORD_BYTES_MAX ? avail : IDS_RECORD_BYTES_MAX;
        tail_copy_out(ids, offset, dst, avail);
        return ids_record_decode(dst, avail, out, tombstone);
    }
    uint64_t avail64 = ids->committed_bytes - offset;
    size_t want = avail64 < IDS_READ_FIRST_BYTES ? (size_t)avail64 : IDS_READ_FIRST_BYTES;
    ssize_t got = ids->io->ops->read(ids->io, ids->fd, dst, want, offset);
    if (got >= 0 && (size_t)got == want) {
        size_t length = ids_record_length(dst, want);
        if (length > want && length <= avail64) {
            size_t rest = length - want;
            ssize_t more = ids->io->ops->read(ids->io, ids->fd, dst + want, rest, offset + want);
            got = more < 0 ? more : (size_t)more == rest ? got + more : -DS_ECORRUPT;
            want = length;
        }
    }
    int rc = got < 0 ? (int)got : (size_t)got < want ? -DS_ECORRUPT : 0;
    rc = rc == 0 ? ids_record_decode(dst, (size_t)got, out, tombstone) : rc;
    if (rc < 0) {
        ds_log_error("%s: record at offset %llu: %s", ids->path, (unsigned long long)offset,
                     ds_strerror(rc));
    }
    return rc;
}

/* ---- the keydir ---------------------------------------------------------------------------- */

static uint64_t slot_make(uint64_t hash, uint64_t offset)
{
    return (hash >> IDS_OFFSET_BITS << IDS_OFFSET_BITS) | (offset / 4 + 1);
}

static uint64_t slot_offset(uint64_t slot)
{
    return ((slot & IDS_OFFSET_MASK) - 1) * 4;
}

/* The home of a slot (or of a hash) in a table of slots_count slots: the stored 28 bits scaled
 * to the table (Lemire's multiply-shift), so homes follow the hash's order at any size, and for
 * a power of two they are the hash's top bits. */
static uint64_t slot_home(uint64_t slot_or_hash, uint64_t slots_count)
{
    return ((slot_or_hash >> IDS_OFFSET_BITS) * slots_count) >> IDS_HASH_BITS;
}

static uint64_t slot_next(uint64_t index, uint64_t slots_count)
{
    return index + 1 == slots_count ? 0 : index + 1;
}

static uint64_t *table_at(uint64_t *const *segments, uint64_t index)
{
    return &segments[index >> IDS_SEGMENT_SHIFT][index & (IDS_SEGMENT_SLOTS - 1)];
}

static uint64_t *slot_at(const struct ids *ids, uint64_t index)
{
    DEBUG_ASSERT(index < ids->slots_count);
    return table_at(ids->segments, index);
}

/* Segments of a table, and slots of each: one short segment below IDS_SEGMENT_SLOTS. */
static uint64_t segments_count(uint64_t slots_count)
{
    return slots_count < IDS_SEGMENT_SLOTS ? 1 : slots_count / IDS_SEGMENT_SLOTS;
}

static uint64_t segment_slots(uint64_t slots_count)
{
    return slots_count < IDS_SEGMENT_SLOTS ? slots_count : IDS_SEGMENT_SLOTS;
}

/* Finds id: *index gets its slot (0 returned) or the empty slot ending the probe (-ENOENT). */
static int keydir_find(struct ids *ids, const struct ds_id *id, uint64_t hash, uint8_t *buf,
                       struct storage_order *rec, uint64_t *index, bool *tombstone)
{
    uint64_t n = ids->slots_count;
    uint64_t tag = hash >> IDS_OFFSET_BITS;
    for (uint64_t i = slot_home(hash, n), probes = 0;; i = slot_next(i, n)) {
        ASSERT(probes++ < n);
        uint64_t slot = *slot_at(ids, i);
        if (slot == 0) {
            *index = i;
            return -ENOENT;
        }
        if (slot >> IDS_OFFSET_BITS != tag) {
            continue;
        }
        int rc = ids_read_record(ids, slot_offset(slot), buf, rec, tombstone);
        if (rc < 0) {
            return rc;
        }
        if (ds_id_equal(&rec->order_id, id)) {
            *index = i;
            return 0;
        }
    }
}

/* A zeroed segment of slots_count slots (at most IDS_SEGMENT_SLOTS). A whole one is mapped on
 * its own, aligned to its 2 MiB and asked to use a huge page: a lookup is one random access
 * into the table, and with 4 KiB pages most would also miss the TLB; a fresh mapping is zero
 * already (no pass over it, as calloc's memset of reused memory). */
static uint64_t *segment_alloc(uint64_t slots_count)
{
    ASSERT(slots_count <= IDS_SEGMENT_SLOTS);
    size_t bytes = (size_t)slots_count * sizeof(uint64_t);
    if (bytes < IDS_HUGE_BYTES) {
        return calloc(1, bytes);
    }
    /* Twice the size, then the unaligned head and the tail are unmapped. */
    uint8_t *p = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    size_t head = (IDS_HUGE_BYTES - (uintptr_t)p % IDS_HUGE_BYTES) % IDS_HUGE_BYTES;
    if (head > 0) {
        munmap(p, head);
    }
    munmap(p + head + bytes, bytes - head);
    (void)madvise(p + head, bytes, MADV_HUGEPAGE); /* advice: refused where THP is off, and fine */
    return (uint64_t *)(void *)(p + head);
}

static void segment_free(uint64_t *segment, uint64_t slots_count)
{
    size_t bytes = (size_t)slots_count * sizeof(uint64_t);
    if (bytes < IDS_HUGE_BYTES) {
        free(segment);
    } else if (segment != NULL) {
        munmap(segment, bytes);
    }
}

/* Frees the segments of a table (NULL ones too: a growth that failed half way mapping them). */
static void table_free(uint64_t **segments, uint64_t slots_count)
{
    for (uint64_t k = 0; k < segments_count(slots_count); k++) {
        segment_free(segments[k], segment_slots(slots_count));
        segments[k] = NULL;
    }
}

/* The size a table of slots_count slots grows to: double below a segment, else a quarter more
 * in whole segments, up to slots_max. */
static uint64_t keydir_next_slots(uint64_t slots_count, uint64_t slots_max)
{
    if (slots_count < IDS_SEGMENT_SLOTS) {
        return 2 * slots_count < slots_max ? 2 * slots_count : slots_max;
    }
    uint64_t add = slots_count / IDS_GROWTH_DIVISOR;
    add = (add + IDS_SEGMENT_SLOTS - 1) / IDS_SEGMENT_SLOTS * IDS_SEGMENT_SLOTS;
    uint64_t next = slots_count + add;
    return next < slots_max ? next : slots_max;
}

/* A growth in progress: the new table's directory, filled as the pass reaches its segments,
 * from spare (fresh, zero) segments and from old ones the pass has read (cleared before use).
 * Both lists are linked through the segments' first word. */
struct regrow {
    uint64_t *segments[IDS_SEGMENTS_MAX];
    uint64_t slots_count;
    uint64_t *fresh;
    uint64_t *used;
};

static void regrow_push(uint64_t **list, uint64_t *segment)
{
    memcpy(segment, list, sizeof(*list));
    *list = segment;
}

static uint64_t *regrow_pop(uint64_t **list)
{
    uint64_t *segment = *list;
    memcpy(list, segment, sizeof(*list));
    segment[0] = 0;
    return segment;
}

/* The slot at index of the new table, taking a segment for it when the pass first gets there:
 * an old one already read (no new page to fault in) before a fresh one. */
static uint64_t *regrow_at(struct regrow *g, uint64_t index)
{
    uint64_t **segment = &g->segments[index >> IDS_SEGMENT_SHIFT];
    if (*segment == NULL) {
        uint64_t slots = segment_slots(g->slots_count);
        if (g->used != NULL) {
            *segment = regrow_pop(&g->used);
            memset(*segment, 0, slots * sizeof(uint64_t));
        } else {
            /* IDS_GROWTH_SPARE_SEGMENTS keeps this from running dry; should it, a mapping is
             * all but sure to succeed, and the keydir cannot be put back once half moved. */
            *segment = g->fresh != NULL ? regrow_pop(&g->fresh) : segment_alloc(slots);
            ASSERT(*segment != NULL);
        }
    }
    return table_at(g->segments, index);
}

static void regrow_insert(struct regrow *g, uint64_t slot)
{
    uint64_t j = slot_home(slot, g->slots_count);
    uint64_t *p = regrow_at(g, j);
    while (*p != 0) {
        j = slot_next(j, g->slots_count);
        p = regrow_at(g, j);
    }
    *p = slot;
}

/* Maps the segments a growth of the table to slots_count slots needs beyond the old ones it
 * reuses; -ENOMEM (nothing changed) when the system refuses. */
static int regrow_reserve(struct regrow *g, uint64_t old_slots_count)
{
    uint64_t segments = segments_count(g->slots_count);
    if (old_slots_count >= IDS_SEGMENT_SLOTS) {
        segments = segments - segments_count(old_slots_count) + IDS_GROWTH_SPARE_SEGMENTS;
    }
    for (uint64_t k = 0; k < segments; k++) {
        uint64_t *segment = segment_alloc(segment_slots(g->slots_count));
        if (segment == NULL) {
            while (g->fresh != NULL) {
                segment_free(regrow_pop(&g->fresh), segment_slots(g->slots_count));
            }
            return -ENOMEM;
        }
        regrow_push(&g->fresh, segment);
    }
    return 0;
}

/* Grows the table (refusing past slots_max), reading the old table a segment at a time
 * and handing each segment read to the new table, so the two are never held whole together:
 * the peak is the new table and a few segments, not old + new (768 MiB at 25.2M orders when
 * the table doubled). Every home is recomputed from the stored bits, without the log. */
static int keydir_grow(struct ids *ids)
{
    uint64_t old_slots = ids->slots_count;
    if (old_slots >= ids->slots_max) {
        ds_log_error("%s: more than %llu orders in the recent tier", ids->path,
                     (unsigned long long)(ids->slots_max / 4 * 3));
        return -DS_ELIMIT;
    }
    struct regrow *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->slots_count = keydir_next_slots(old_slots, ids->slots_max);
    int rc = regrow_reserve(g, old_slots);
    if (rc < 0) {
        free(g);
        return rc;
    }
    bool reuse = old_slots >= IDS_SEGMENT_SLOTS; /* a short segment cannot serve the new table */
    uint64_t moved = 0;
    for (uint64_t k = 0; k < segments_count(old_slots); k++) {
        uint64_t *segment = ids->segments[k];
        for (uint64_t i = 0; i < segment_slots(old_slots); i++) {
            if (segment[i] != 0) {
                regrow_insert(g, segment[i]);
                moved++;
            }
        }
        ids->segments[k] = NULL;
        if (reuse) {
            regrow_push(&g->used, segment);
        } else {
            segment_free(segment, old_slots);
        }
    }
    ASSERT(moved == ids->keys);
    /* Segments of the new table no entry reached yet (all of it empty at most). */
    for (uint64_t k = 0; k < segments_count(g->slots_count); k++) {
        (void)regrow_at(g, k << IDS_SEGMENT_SHIFT);
    }
    while (g->used != NULL) {
        segment_free(regrow_pop(&g->used), IDS_SEGMENT_SLOTS);
    }
    while (g->fresh != NULL) {
        segment_free(regrow_pop(&g->fresh), segment_slots(g->slots_count));
    }
    memcpy(ids->segments, g->segments, sizeof(g->segments));
    ids->slots_count = g->slots_count;
    free(g);
    return 0;
}

/* Points the keydir at the record (or tombstone) of id at offset, growing it for a new id
 * first. ids->last holds id's lookup (ids_note ran). */
static int keydir_set(struct ids *ids, const struct ds_id *id, uint64_t offset)
{
    ASSERT(ids->last.valid && ds_id_equal(&ids->last.id, id));
    uint64_t hash = ids->last.hash;
    uint64_t index = ids->last.index;
    bool found = ids->last.in_keydir;
    ids->last.valid = false; /* the keydir changes below */
    if (!found && (ids->keys + 1) * 4 > 3 * ids->slots_count) {
        struct storage_order old;
        bool tombstone = false;
        int rc = keydir_grow(ids);
        rc = rc == 0 ? keydir_find(ids, id, hash, ids->scratch, &old, &index, &tombstone) : rc;
        if (rc != -ENOENT) {
            ASSERT(rc != 0);
            return rc;
        }
    }
    ids->keys += !found;
    *slot_at(ids, index) = slot_make(hash, offset);
    return 0;
}

/* ---- the sealed tier in lookups ------------------------------------------------------------ */

/* Looks id up in the sealed files, newest day first (updates mostly touch recent orders); an
 * order is in one file at most. *day_index gets its file or -1. */
static int sealed_find(struct ids *ids, const struct ds_id *id, uint64_t hash, uint8_t *dst,
                       struct storage_order *out, int64_t *day_index)
{
    *day_index = -1;
    for (int64_t k = (int64_t)ids->days_count - 1; k >= 0; k--) {
        int rc = ids_file_find(ids->days[k].file, id, hash, ids->block, ids->dctx, dst, out);
        if (rc == 0) {
            *day_index = k;
        }
        if (rc != -ENOENT) {
            return rc;
        }
    }
    return -ENOENT;
}

/* Decodes the frozen tier's record at offset into dst. */
static int frozen_read(const struct frozen *fz, uint64_t offset, uint8_t *dst,
                       struct storage_order *out, bool *tombstone)
{
    ASSERT(offset < fz->bytes);
    size_t avail = (size_t)(fz->bytes - offset);
    size_t length = ids_record_length(fz->mem + offset, avail);
    if (length == 0 || length > avail) {
        return -DS_ECORRUPT;
    }
    memcpy(dst, fz->mem + offset, length);
    return ids_record_decode(dst, length, out, tombstone);
}

/* Finds id in the frozen tier's keydir: 0 (out holds its latest record or tombstone) or
 * -ENOENT. */
static int frozen_find(const struct frozen *fz, const struct ds_id *id, uint64_t hash, uint8_t *dst,
                       struct storage_order *out, bool *tombstone)
{
    if (!fz->present) {
        return -ENOENT;
    }
    uint64_t n = fz->slots_count;
    uint64_t tag = hash >> IDS_OFFSET_BITS;
    for (uint64_t i = slot_home(hash, n), probes = 0;; i = slot_next(i, n)) {
        ASSERT(probes++ < n);
        uint64_t slot = *table_at((uint64_t *const *)fz->segments, i);
        if (slot == 0) {
            return -ENOENT;
        }
        if (slot >> IDS_OFFSET_BITS != tag) {
            continue;
        }
        int rc = frozen_read(fz, slot_offset(slot), dst, out, tombstone);
        if (rc < 0 || ds_id_equal(&out->order_id, id)) {
            return rc;
        }
    }
}

static void day_set_add(struct day_set *set, int32_t day)
{
    for (uint32_t k = 0; k < set->count; k++) {
        if (set->days[k] == day) {
            return;
        }
    }
    if (set->count == set->capacity) {
        uint32_t capacity = set->capacity == 0 ? 16 : 2 * set->capacity;
        int32_t *days = realloc(set->days, capacity * sizeof(*days));
        ASSERT(days != NULL); /* a few hundred bytes; the change cannot be put back after */
        set->days = days;
        set->capacity = capacity;
    }
    set->days[set->count++] = day;
}

static bool day_set_has(const struct day_set *set, int32_t day)
{
    for (uint32_t k = 0; k < set->count; k++) {
        if (set->days[k] == day) {
            return true;
        }
    }
    return false;
}

/* Looks id up in the recent tier, the frozen one, then the sealed files, and keeps where in
 * ids->last. Returns 0 (out holds the current version), -ENOENT or an error of a read. */
static int ids_lookup(struct ids *ids, const struct ds_id *id, uint64_t hash, uint8_t *dst,
                      struct storage_order *out)
{
    uint64_t index = 0;
    bool tombstone = false, frozen_tombstone = false, in_frozen = false;
    int64_t day_index = -1;
    int32_t frozen_day = 0;
    ids->last.valid = false;
    int rc = keydir_find(ids, id, hash, dst, out, &index, &tombstone);
    bool in_keydir = rc == 0;
    if (rc == -ENOENT) {
        rc = frozen_find(&ids->frozen, id, hash, dst, out, &frozen_tombstone);
        in_frozen = rc == 0;
        frozen_day = in_frozen ? out->day : 0;
    }
    if (rc == -ENOENT) {
        rc = sealed_find(ids, id, hash, dst, out, &day_index);
    }
    if (rc != 0 && rc != -ENOENT) {
        return rc;
    }
    ids->last.valid = true;
    ids->last.in_keydir = in_keydir;
    ids->last.tombstone = in_keydir && tombstone;
    ids->last.in_frozen = in_frozen;
    ids->last.frozen_tombstone = in_frozen && frozen_tombstone;
    ids->last.frozen_day = frozen_day;
    ids->last.day_index = day_index;
    ids->last.hash = hash;
    ids->last.index = index;
    ids->last.id = *id;
    return (in_keydir && tombstone) || (in_frozen && frozen_tombstone) ? -ENOENT : rc;
}

/* Makes ids->last hold id's lookup (the writer's put follows its get, so mostly it does) and
 * tells whether the store holds the order. */
static int ids_note(struct ids *ids, const struct ds_id *id, bool *existed)
{
    uint64_t hash = ids_id_hash(id);
    if (!(ids->last.valid && ids->last.hash == hash && ds_id_equal(&ids->last.id, id))) {
        struct storage_order old;
        int rc = ids_lookup(ids, id, hash, ids->scratch, &old);
        if (rc != 0 && rc != -ENOENT) {
            return rc;
        }
    }
    *existed = ids->last.in_keydir   ? !ids->last.tombstone
               : ids->last.in_frozen ? !ids->last.frozen_tombstone
                                     : ids->last.day_index >= 0;
    return 0;
}

/* After a change of the order ids->last looked up: the sealed file its older version is
 * sealed into (now, or by the running seal of the frozen tier) must be rewritten. */
static void note_touch(struct ids *ids, bool in_keydir, bool in_frozen, bool frozen_tombstone,
                       int32_t frozen_day, int64_t day_index)
{
    if (in_keydir) {
        return;
    }
    if (in_frozen) {
        if (!frozen_tombstone) {
            day_set_add(&ids->touched, frozen_day);
        }
    } else if (day_index >= 0) {
        day_set_add(&ids->touched, ids->days[day_index].day);
    }
}

/* What freezing the recent tier needs, taken before anything changes: the new keydir's first
 * segment, and the log's bytes: the tail when it holds the whole log (no copy, no read), else
 * a writer maps the log file (its pages are in the page cache, just written: a read of a log
 * one commit took past the tail cost the writer a copy and the faults of a fresh buffer), else
 * a copy read from the file. */
struct freeze_prep {
    uint64_t *segment;
    uint8_t *mem;
    bool from_tail;
    size_t mapped;
};

/* The committed log mapped read-only, or NULL. The frozen log is never cut or written again (a
 * writer's open cuts only the log it appends to), so the mapping stays valid until unmapped. */
static uint8_t *freeze_map(const struct ids *ids, uint64_t bytes)
{
    if (ids->read_only || bytes == 0 || bytes > SIZE_MAX) {
        return NULL;
    }
    int fd = open(ids->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    void *mem = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    return mem == MAP_FAILED ? NULL : mem;
}

static int freeze_prepare(struct ids *ids, struct freeze_prep *p)
{
    uint64_t bytes = ids->committed_bytes;
    p->segment = segment_alloc(IDS_SLOTS_MIN);
    p->from_tail = ids->tail != NULL && ids->tail_start == 0 && bytes <= IDS_TAIL_BYTES;
    p->mapped = 0;
    p->mem = p->from_tail ? ids->tail : freeze_map(ids, bytes);
    if (!p->from_tail && p->mem != NULL) {
        p->mapped = (size_t)bytes;
    } else if (!p->from_tail) {
        p->mem = malloc(bytes > 0 ? (size_t)bytes : 1);
    }
    int rc = p->segment == NULL || p->mem == NULL ? -ENOMEM : 0;
    for (uint64_t at = 0; rc == 0 && !p->from_tail && p->mapped == 0 && at < bytes;) {
        size_t want = bytes - at < IDS_REPLAY_BYTES ? (size_t)(bytes - at) : IDS_REPLAY_BYTES;
        ssize_t got = ids->io->ops->read(ids->io, ids->fd, p->mem + at, want, at);
        rc = got < 0 ? (int)got : (size_t)got != want ? -DS_ECORRUPT : 0;
        at += want;
    }
    if (rc != 0) {
        segment_free(p->segment, IDS_SLOTS_MIN);
        if (p->mapped > 0) {
            munmap(p->mem, p->mapped);
        } else if (!p->from_tail) {
            free(p->mem);
        }
    }
    return rc;
}

/* Moves the recent tier (committed, nothing pending) into the frozen tier and starts an empty
 * keydir at the log's end; cannot fail. The caller switches the log file. */
static void tier_freeze(struct ids *ids, struct freeze_prep *p)
{
    ASSERT(!ids->frozen.present && ids->pending_bytes == 0 && !ids->queued);
    struct frozen *fz = &ids->frozen;
    uint64_t bytes = ids->committed_bytes;
    memcpy(fz->segments, ids->segments, sizeof(fz->segments));
    fz->slots_count = ids->slots_count;
    fz->keys = ids->keys;
    fz->mem = p->mem;
    fz->mem_is_tail = p->from_tail;
    fz->mapped = p->mapped;
    fz->bytes = bytes;
    fz->base = ids->base;
    fz->gen = ids->gen;
    fz->delta = ids->delta;
    fz->ordered = ids->ordered;
    fz->touched = ids->touched;
    memcpy(fz->path, ids->path, sizeof(fz->path));
    fz->present = true;
    memset(ids->segments, 0, sizeof(ids->segments));
    ids->segments[0] = p->segment;
    ids->slots_count = IDS_SLOTS_MIN;
    ids->keys = 0;
    ids->delta = 0;
    ids->ordered = true;
    ids->ordered_id = 0;
    ids->ordered_day = 0;
    ids->touched = (struct day_set){0};
    ids->base += bytes;
    ids->committed_bytes = 0;
    ids->tail_start = 0;
    if (p->from_tail) {
        /* optional: NULL reads the file */
        ids->tail = ids->spare_tail != NULL ? ids->spare_tail : malloc(IDS_TAIL_BYTES);
        ids->spare_tail = NULL;
    }
    ids->last.valid = false;
}

static void frozen_free(struct frozen *fz)
{
    if (fz->present) {
        table_free(fz->segments, fz->slots_count);
        if (fz->mapped > 0) {
            munmap(fz->mem, fz->mapped);
        } else {
            free(fz->mem);
        }
        free(fz->touched.days);
    }
    *fz = (struct frozen){0};
}

/* A record of the frozen tier the keydir points at, ordered by day and then order id. */
struct seal_entry {
    uint64_t key;  /* an integer id's value */
    uint32_t unit; /* the record's offset in the frozen log / 4 */
    uint32_t meta; /* the day, SEAL_STRING and SEAL_TOMBSTONE: 16 bytes an entry */
};
#define SEAL_DAY_MASK ((1u << 22) - 1)
#define SEAL_STRING (1u << 22)
#define SEAL_TOMBSTONE (1u << 23)
static_assert(DS_DAY_MAX <= SEAL_DAY_MASK, "a day fits an entry's meta");
/* Slots a seal's collection loads records ahead of the one it decodes. */
#define SEAL_PREFETCH_SLOTS 16u
/* A frozen log a seal reads: offsets / 4 fit an entry's 32 bits. */
#define SEAL_LOG_BYTES_MAX (4ull << 32)

static int32_t entry_day(const struct seal_entry *e)
{
    return (int32_t)(e->meta & SEAL_DAY_MASK);
}

static bool entry_string(const struct seal_entry *e)
{
    return (e->meta & SEAL_STRING) != 0;
}

static bool entry_tombstone(const struct seal_entry *e)
{
    return (e->meta & SEAL_TOMBSTONE) != 0;
}

/* A seal: built on the writer from the frozen tier, run on its own thread (or inline), and
 * installed by the writer. The thread reads the frozen tier and the old files, which the writer
 * only reads too until it installs the result. */
struct seal_job {
    struct ids *ids;
    char dir[DS_PATH_MAX];
    int32_t floor;
    uint64_t gen;  /* the new files' generation: the active log's */
    uint64_t base; /* the active log's base */
    struct ids_day *old;
    uint32_t old_count;
    struct seal_entry *entries;
    uint64_t entries_count;
    uint64_t *keys; /* the integer ids of entries (tombstones too), ascending */
    uint64_t keys_count;
    const uint8_t *mem;   /* the frozen log */
    struct ids_day *days; /* the result: file NULL for the old files it keeps */
    uint32_t days_count;
    int rc;
    bool freeze_descriptor;   /* first write the descriptor naming the frozen and the next log */
    _Atomic int freeze_state; /* 0 while that is pending, 1 once it is durable, or its error */
    pthread_t thread;
    bool threaded;
    _Atomic bool done;
    uint8_t scratch[IDS_RECORD_BYTES_MAX];
};

/* ---- opening and replay -------------------------------------------------------------------- */

/* Walks the records in [from, to), reading the log in IDS_REPLAY_BYTES chunks: fn gets each
 * checked record with its offset and the offset past it. A bad record or a length crossing to
 * is -DS_ECORRUPT (logged with the offset). */
typedef int (*ids_walk_fn)(struct ids *ids, const struct storage_order *rec, bool tombstone,
                           uint64_t offset, uint64_t next, void *user);
static int ids_walk(struct ids *ids, uint64_t from, uint64_t to, ids_walk_fn fn, void *user)
{
    uint8_t *buf = malloc(IDS_REPLAY_BYTES);
    if (buf == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    uint64_t at = from;
    while (rc == 0 && at < to) {
        uint64_t left = to - at;
        size_t want = left < IDS_REPLAY_BYTES ? (size_t)left : IDS_REPLAY_BYTES;
        ssize_t got = ids->io->ops->read(ids->io, ids->fd, buf, want, at);
        rc = got < 0 ? (int)got : (size_t)got < want ? -DS_ECORRUPT : 0;
        size_t used = 0;
        while (rc == 0 && used < want) {
            struct storage_order rec;
            bool tombstone = false;
            size_t in_chunk = want - used;
            if (in_chunk < 8 && left - used > in_chunk) {
                break; /* the header continues in the next chunk */
            }
            size_t length = ids_record_length(buf + used, in_chunk);
            if (length == 0 || ids_align4(length) > left - used) {
                rc = -DS_ECORRUPT; /* a bad length, or one crossing the end */
            } else if (ids_align4(length) > in_chunk) {
                break; /* the record continues in the next chunk */
            } else if ((rc = ids_record_decode(buf + used, length, &rec, &tombstone)) == 0) {
                rc = fn(ids, &rec, tombstone, at + used, at + used + ids_align4(length), user);
                used += rc == 0 ? ids_align4(length) : 0;
            }
        }
        if (rc < 0) {
            ds_log_error("%s: record at offset %llu: %s", ids->path,
                         (unsigned long long)(at + used), ds_strerror(rc));
        }
        at += used;
    }
    free(buf);
    return rc;
}

static int replay_record(struct ids *ids, const struct storage_order *rec, bool tombstone,
                         uint64_t offset, uint64_t next, void *user)
{
    (void)user;
    bool existed = false;
    int rc = ids_note(ids, &rec->order_id, &existed);
    if (rc != 0) {
        return rc;
    }
    if (tombstone && !existed) {
        return -DS_ECORRUPT; /* a tombstone always follows the order's record */
    }
    note_touch(ids, ids->last.in_keydir, ids->last.in_frozen, ids->last.frozen_tombstone,
               ids->last.frozen_day, ids->last.day_index);
    ids->ordered = false; /* a replayed log is sealed by the general path */
    /* Visible to the keydir's reads only once it is below committed_bytes. */
    ids->committed_bytes = next;
    rc = keydir_set(ids, &rec->order_id, offset);
    if (rc == 0) {
        ids->delta += tombstone ? -1 : !existed;
    }
    return rc;
}

/* Replays the records in [ids->committed_bytes, to): the keydir points at each id's last. */
static int ids_replay(struct ids *ids, uint64_t to)
{
    return ids_walk(ids, ids->committed_bytes, to, replay_record, NULL);
}

/* ---- the descriptor: DIR/ids/CURRENT ------------------------------------------------------- */

/* Little-endian: 0 u32 CRC32C of bytes 4..end, 4 u32 magic, 8 u32 version, 12 u32 files,
 * 16 u64 generation, 24 u64 base, 32 u64 frozen generation + 1 (0: none), 40 u64 frozen base,
 * then per file 16 bytes: i32 day, u32 zero, u64 generation. The frozen log is the one a running
 * seal moves into the files: its records, at logical positions [frozen base, base), come before the
 * log's. Replaced whole (a temporary file, fsync, rename, directory fsync): at every moment it
 * names one consistent set of sealed files and the logs that follow them. */
#define IDS_CURRENT_MAGIC 0x43534449u /* "IDSC" */
#define IDS_CURRENT_VERSION 2u
#define IDS_CURRENT_HEADER_BYTES 48u
#define IDS_CURRENT_FILE_BYTES 16u

static int ids_name(char *dst, const char *dir, const char *name, int64_t day, uint64_t gen)
{
    int n = day == INT64_MIN ? snprintf(dst, DS_PATH_MAX, "%s/%s", dir, name)
            : day == INT64_MAX
                ? snprintf(dst, DS_PATH_MAX, "%s/%s.%llu", dir, name, (unsigned long long)gen)
                : snprintf(dst, DS_PATH_MAX, "%s/%s.%lld.%llu", dir, name, (long long)day,
                           (unsigned long long)gen);
    return n < 0 || n >= DS_PATH_MAX ? -ENAMETOOLONG : 0;
}

/* The log of generation gen: DIR/ids/log before the first seal, log.<gen> after. */
static int log_name(char *dst, const char *dir, uint64_t gen)
{
    return gen == 0 ? ids_name(dst, dir, "log", INT64_MIN, 0)
                    : ids_name(dst, dir, "log", INT64_MAX, gen);
}

static int day_name(char *dst, const char *dir, int32_t day, uint64_t gen)
{
    return ids_name(dst, dir, "day", day, gen);
}

/* Reads the descriptor: 0 (*found false when there is none), -DS_ECORRUPT, -ENOMEM or a
 * negated errno. *days (taken by the caller) gets the files, without their handles. */
static int current_read(const char *dir, bool *found, uint64_t *gen, uint64_t *base,
                        uint64_t *frozen_gen, uint64_t *frozen_base, struct ids_day **days,
                        uint32_t *days_count)
{
    char path[DS_PATH_MAX];
    int rc = ids_name(path, dir, "CURRENT", INT64_MIN, 0);
    FILE *f = rc == 0 ? fopen(path, "rb") : NULL;
    *found = false;
    *days = NULL;
    *days_count = 0;
    if (f == NULL) {
        return rc != 0 ? rc : errno == ENOENT ? 0 : -errno;
    }
    uint8_t head[IDS_CURRENT_HEADER_BYTES];
    uint8_t *buf = NULL;
    size_t bytes = 0;
    rc = fread(head, 1, sizeof(head), f) == sizeof(head) ? 0 : -DS_ECORRUPT;
    uint32_t files = rc == 0 ? ds_get_le32(head + 12) : 0;
    if (rc == 0 && (ds_get_le32(head + 4) != IDS_CURRENT_MAGIC ||
                    ds_get_le32(head + 8) != IDS_CURRENT_VERSION || files > (1u << 24))) {
        rc = -DS_ECORRUPT;
    }
    if (rc == 0) {
        bytes = IDS_CURRENT_HEADER_BYTES + (size_t)files * IDS_CURRENT_FILE_BYTES;
        buf = malloc(bytes + 1);
        rc = buf == NULL ? -ENOMEM : 0;
    }
    if (rc == 0) {
        memcpy(buf, head, sizeof(head));
        size_t rest = bytes - sizeof(head);
        /* Exactly that long: one byte more is damage too. */
        rc = fread(buf + sizeof(head), 1, rest + 1, f) == rest &&
                     ds_get_le32(buf) == ds_crc32c(0, buf + 4, bytes - 4)
                 ? 0
                 : -DS_ECORRUPT;
    }
    fclose(f);
    struct ids_day *list = rc == 0 && files > 0 ? calloc(files, sizeof(*list)) : NULL;
    rc = rc == 0 && files > 0 && list == NULL ? -ENOMEM : rc;
    for (uint32_t k = 0; rc == 0 && k < files; k++) {
        const uint8_t *e = buf + IDS_CURRENT_HEADER_BYTES + (size_t)k * IDS_CURRENT_FILE_BYTES;
        list[k].day = (int32_t)ds_get_le32(e);
        list[k].gen = ds_get_le64(e + 8);
        if (list[k].day < 0 || list[k].day > DS_DAY_MAX ||
            (k > 0 && list[k].day <= list[k - 1].day)) {
            rc = -DS_ECORRUPT;
        }
    }
    if (rc == 0) {
        *found = true;
        *gen = ds_get_le64(buf + 16);
        *base = ds_get_le64(buf + 24);
        *frozen_gen = ds_get_le64(buf + 32);
        *frozen_base = ds_get_le64(buf + 40);
        if (*frozen_gen != 0 && (*frozen_gen > *gen || *frozen_base > *base)) {
            rc = -DS_ECORRUPT;
        }
    }
    if (rc == 0) {
        *days = list;
        *days_count = files;
    } else {
        free(list);
        ds_log_error("%s: %s", path, ds_strerror(rc));
    }
    free(buf);
    return rc;
}

static int current_write(const char *dir, uint64_t gen, uint64_t base, uint64_t frozen_gen,
                         uint64_t frozen_base, const struct ids_day *days, uint32_t days_count)
{
    char path[DS_PATH_MAX], tmp[DS_PATH_MAX];
    int rc = ids_name(path, dir, "CURRENT", INT64_MIN, 0);
    rc = rc == 0 ? ids_name(tmp, dir, "CURRENT", INT64_MAX, gen) : rc;
    size_t bytes = IDS_CURRENT_HEADER_BYTES + (size_t)days_count * IDS_CURRENT_FILE_BYTES;
    uint8_t *buf = rc == 0 ? calloc(1, bytes) : NULL;
    if (buf == NULL) {
        return rc != 0 ? rc : -ENOMEM;
    }
    ds_put_le32(buf + 4, IDS_CURRENT_MAGIC);
    ds_put_le32(buf + 8, IDS_CURRENT_VERSION);
    ds_put_le32(buf + 12, days_count);
    ds_put_le64(buf + 16, gen);
    ds_put_le64(buf + 24, base);
    ds_put_le64(buf + 32, frozen_gen);
    ds_put_le64(buf + 40, frozen_base);
    for (uint32_t k = 0; k < days_count; k++) {
        uint8_t *e = buf + IDS_CURRENT_HEADER_BYTES + (size_t)k * IDS_CURRENT_FILE_BYTES;
        ds_put_le32(e, (uint32_t)days[k].day);
        ds_put_le64(e + 8, days[k].gen);
    }
    ds_put_le32(buf, ds_crc32c(0, buf + 4, bytes - 4));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    rc = fd < 0 ? -errno : 0;
    if (rc == 0) {
        ssize_t n = write(fd, buf, bytes);
        rc = n < 0 ? -errno : (size_t)n != bytes ? -EIO : 0;
        if (rc == 0 && fsync(fd) != 0) {
            rc = -errno;
        }
        close(fd);
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -errno;
    }
    rc = rc == 0 ? ds_fsync_dir(dir) : rc;
    if (rc != 0) {
        ds_log_error("%s: cannot replace: %s", path, ds_strerror(rc));
        (void)unlink(tmp);
    }
    free(buf);
    return rc;
}

/* Whether name (an entry of DIR/ids) is one a writer's open keeps: the descriptor, the log it
 * names, and its sealed files. Others are what a seal that crashed left. */
static bool ids_entry_live(const struct ids *ids, const char *name)
{
    char want[DS_PATH_MAX], path[DS_PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", ids->dir, name);
    if (n < 0 || (size_t)n >= sizeof(path) || strcmp(name, "CURRENT") == 0 ||
        strcmp(path, ids->path) == 0 ||
        (ids->frozen.present && strcmp(path, ids->frozen.path) == 0)) {
        return true;
    }
    for (uint32_t k = 0; k < ids->days_count; k++) {
        if (day_name(want, ids->dir, ids->days[k].day, ids->days[k].gen) == 0 &&
            strcmp(want, path) == 0) {
            return true;
        }
    }
    return strncmp(name, "day.", 4) != 0 && strncmp(name, "log", 3) != 0 &&
           strncmp(name, "CURRENT.", 8) != 0;
}

/* Removes the files of seals that did not finish (their descriptor never replaced the one
 * that is current) and the log and files of ones that did (a crash before their removal). */
static void ids_remove_strays(const struct ids *ids)
{
    DIR *d = opendir(ids->dir);
    if (d == NULL) {
        return;
    }
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (e->d_name[0] != '.' && !ids_entry_live(ids, e->d_name)) {
            char path[DS_PATH_MAX];
            int n = snprintf(path, sizeof(path), "%s/%s", ids->dir, e->d_name);
            if (n > 0 && (size_t)n < sizeof(path)) {
                (void)unlink(path);
            }
        }
    }
    closedir(d);
}

/* ---- opening ------------------------------------------------------------------------------- */

/* Opens the log file: a writer creates it (syncing the directories so it stays) and cuts it to
 * committed_bytes (of the file); a reader of a log not created yet keeps fd -1. */
static int ids_open_file(struct ids *ids, uint64_t committed_bytes)
{
    struct stat st;
    bool existed = stat(ids->path, &st) == 0;
    if (!existed && ids->read_only) {
        return committed_bytes == 0 ? 0 : ids->gen > 0 ? -ENOENT : -DS_ECORRUPT;
    }
    int rc = ids->read_only || existed ? 0 : ds_mkdir_p(ids->dir);
    int flags = ids->read_only ? O_RDONLY : O_RDWR | O_CREAT;
    int fd = rc == 0 ? ids->io->ops->open(ids->io, ids->path, flags | O_CLOEXEC, 0644) : rc;
    if (fd < 0) {
        return fd;
    }
    ids->fd = fd;
    if (!existed) {
        rc = ds_fsync_dir(ids->dir);
        rc = rc == 0 ? ds_fsync_dir(ids->data_dir) : rc;
    }
    uint64_t size = 0;
    rc = rc == 0 ? ids->io->ops->size(ids->io, fd, &size) : rc;
    if (rc == 0 && size < committed_bytes) {
        ds_log_error("%s: %llu bytes, below the committed %llu", ids->path,
                     (unsigned long long)size, (unsigned long long)committed_bytes);
        rc = -DS_ECORRUPT;
    }
    if (rc == 0 && size > committed_bytes && !ids->read_only) {
        rc = ids->io->ops->truncate(ids->io, fd, committed_bytes);
    }
    return rc;
}

/* Opens the sealed files the descriptor names; -ENOENT when one is gone (a reader raced a
 * seal that replaced it). */
static int ids_open_days(struct ids *ids)
{
    for (uint32_t k = 0; k < ids->days_count; k++) {
        char path[DS_PATH_MAX];
        int rc = day_name(path, ids->dir, ids->days[k].day, ids->days[k].gen);
        rc = rc == 0 ? ids_file_open(path, ids->days[k].day, &ids->days[k].file) : rc;
        if (rc != 0) {
            return rc;
        }
        ids->sealed_count += ids_file_records(ids->days[k].file);
    }
    return 0;
}

/* Loads the descriptor, the sealed files' indexes and the log's records up to committed
 * (logical). A reader behind the descriptor (its MANIFEST older than the last seal) sees the
 * sealed state, which holds everything it committed. */
static int ids_load(struct ids *ids, uint64_t committed)
{
    bool found = false;
    uint64_t gen = 0, base = 0, frozen_gen = 0, frozen_base = 0;
    int rc = current_read(ids->dir, &found, &gen, &base, &frozen_gen, &frozen_base, &ids->days,
                          &ids->days_count);
    if (rc != 0) {
        return rc;
    }
    if (committed < base && !ids->read_only) {
        ds_log_error("%s: committed %llu, below the sealed %llu", ids->dir,
                     (unsigned long long)committed, (unsigned long long)base);
        return -DS_ECORRUPT;
    }
    uint64_t relative = committed < base ? 0 : committed - base;
    if (relative % 4 != 0 || relative > IDS_LOG_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    rc = ids_open_days(ids);
    if (rc == 0 && frozen_gen != 0) {
        /* A seal was running: its frozen log is replayed whole and frozen again in memory; the
         * writer's next ids_maintain seals it. */
        frozen_gen--;
        ids->gen = frozen_gen;
        ids->base = frozen_base;
        struct freeze_prep prep;
        rc = log_name(ids->path, ids->dir, frozen_gen);
        rc = rc == 0 ? ids_open_file(ids, base - frozen_base) : rc;
        rc = rc == 0 && base > frozen_base ? ids_replay(ids, base - frozen_base) : rc;
        rc = rc == 0 ? freeze_prepare(ids, &prep) : rc;
        if (rc == 0) {
            tier_freeze(ids, &prep);
            ids->frozen.named = true;
            ids->io->ops->close(ids->io, ids->fd);
            ids->fd = -1;
        }
    }
    ids->gen = gen;
    ids->base = base;
    rc = rc == 0 ? log_name(ids->path, ids->dir, gen) : rc;
    rc = rc == 0 ? ids_open_file(ids, relative) : rc;
    rc = rc == 0 && relative > 0 ? ids_replay(ids, relative) : rc;
    if (rc == 0 && !ids->read_only) {
        ids_remove_strays(ids);
    }
    return rc;
}

static int ids_create(struct storage_io *io, const char *dir, bool read_only, struct ids **out)
{
    struct ids *ids = calloc(1, sizeof(*ids));
    uint64_t *segment = segment_alloc(IDS_SLOTS_MIN);
    uint8_t *block = malloc(IDS_FILE_BLOCK_BYTES + IDS_RECORD_BYTES_MAX);
    if (ids == NULL || segment == NULL || block == NULL) {
        free(ids);
        free(block);
        segment_free(segment, IDS_SLOTS_MIN);
        return -ENOMEM;
    }
    ids->io = io;
    ids->fd = -1;
    ids->read_only = read_only;
    ids->segments[0] = segment;
    ids->slots_count = IDS_SLOTS_MIN;
    ids->block = block;
    ids->dctx = ZSTD_createDCtx();
    if (ids->dctx == NULL) {
        ids_close(ids);
        return -ENOMEM;
    }
    ids->recent_budget_bytes = IDS_RECENT_BYTES_DEFAULT;
    ids->slots_max = IDS_SLOTS_MAX;
    ids->background = true;
    ids->ordered = true;
    int n = snprintf(ids->dir, sizeof(ids->dir), "%s/ids", dir);
    int m = snprintf(ids->data_dir, sizeof(ids->data_dir), "%s", dir);
    if (n < 0 || (size_t)n + 32 >= sizeof(ids->dir) || m < 0) {
        ids_close(ids);
        return -ENAMETOOLONG;
    }
    *out = ids;
    return 0;
}

/* A reader retries an open that raced a seal (a file the descriptor named was removed). */
#define IDS_OPEN_TRIES 16u

int ids_open(struct storage_io *io, const char *dir, uint64_t committed_bytes, bool read_only,
             struct ids **out)
{
    ASSERT(io != NULL);
    ASSERT(dir != NULL);
    if (committed_bytes % 4 != 0) {
        return -DS_ECORRUPT;
    }
    int rc = 0;
    struct ids *ids = NULL;
    for (unsigned tries = 0; tries < IDS_OPEN_TRIES; tries++) {
        rc = ids_create(io, dir, read_only, &ids);
        if (rc != 0) {
            return rc;
        }
        rc = ids_load(ids, committed_bytes);
        if (rc == 0 || rc != -ENOENT || !read_only) {
            break;
        }
        ids_close(ids);
        ids = NULL;
    }
    if (rc < 0) {
        ds_log_error("%s/ids: cannot open: %s", dir, ds_strerror(rc));
        ids_close(ids);
        return rc;
    }
    if (!read_only) {
        ids->tail = malloc(IDS_TAIL_BYTES); /* optional: NULL reads the file */
        ids->tail_start = ids->committed_bytes;
    }
    *out = ids;
    return 0;
}

static void ids_days_close(struct ids_day *days, uint32_t days_count)
{
    for (uint32_t k = 0; k < days_count; k++) {
        ids_file_close(days[k].file);
    }
    free(days);
}

void ids_close(struct ids *ids)
{
    if (ids == NULL) {
        return;
    }
    if (ids->seals > 0) {
        uint64_t calls = 0, max_ns = 0, p99_ns = 0;
        ids_seal_stalls(ids, &calls, &max_ns, &p99_ns);
        ds_log_info("%s: %llu seals; the writer's time in them per commit: max %.2f ms, p99 "
                    "%.3f ms over %llu commits",
                    ids->dir, (unsigned long long)ids->seals, (double)max_ns / 1e6,
                    (double)p99_ns / 1e6, (unsigned long long)calls);
    }
    if (ids->job != NULL) {
        /* The seal finishes: what it wrote is the store's state on disk (its descriptor is
         * replaced or not at all); its handles go with the old ones. */
        struct seal_job *j = ids->job;
        if (j->threaded) {
            pthread_join(j->thread, NULL);
        }
        for (uint32_t k = 0; k < j->days_count; k++) {
            ids_file_close(j->days[k].file);
        }
        free(j->days);
        free(j->old);
        free(j->entries);
        free(j->keys);
        free(j);
    }
    if (ids->fd >= 0) {
        ids->io->ops->close(ids->io, ids->fd);
    }
    frozen_free(&ids->frozen);
    free(ids->touched.days);
    ids_days_close(ids->days, ids->days_count);
    free(ids->pending);
    free(ids->tail);
    free(ids->spare_tail);
    free(ids->block);
    ZSTD_freeDCtx(ids->dctx);
    table_free(ids->segments, ids->slots_count);
    free(ids);
}

void ids_set_slots_max(struct ids *ids, uint64_t slots)
{
    ASSERT(slots >= IDS_SLOTS_MIN && slots <= IDS_SLOTS_MAX && (slots & (slots - 1)) == 0);
    ASSERT(ids->slots_count <= slots);
    ids->slots_max = slots;
}

void ids_set_recent_budget(struct ids *ids, uint64_t bytes)
{
    ASSERT(bytes > 0);
    ids->recent_budget_bytes = bytes;
}

/* ---- lookups ------------------------------------------------------------------------------- */

void ids_prefetch(const struct ids *ids, const struct ds_id *id)
{
    if (ids_id_valid(id)) {
        uint64_t hash = ids_id_hash(id);
        __builtin_prefetch(slot_at(ids, slot_home(hash, ids->slots_count)));
        if (ids->frozen.present) { /* a miss of the recent keydir probes the frozen one */
            __builtin_prefetch(table_at((uint64_t *const *)ids->frozen.segments,
                                        slot_home(hash, ids->frozen.slots_count)));
        }
    }
}

int ids_get(struct ids *ids, const struct ds_id *id, struct storage_order *out, void *scratch,
            size_t scratch_capacity)
{
    ASSERT(scratch_capacity >= IDS_RECORD_BYTES_MAX);
    ASSERT(id != NULL);
    if (!ids_id_valid(id)) {
        return -ENOENT;
    }
    struct storage_order rec;
    int rc = ids_lookup(ids, id, ids_id_hash(id), scratch, &rec);
    if (rc == 0) {
        *out = rec;
    }
    return rc;
}

uint64_t ids_count(const struct ids *ids)
{
    int64_t n = (int64_t)ids->sealed_count + ids->frozen.delta + ids->delta;
    return n > 0 ? (uint64_t)n : 0;
}

uint64_t ids_keydir_bytes(const struct ids *ids)
{
    return ids->slots_count * sizeof(uint64_t);
}

uint64_t ids_memory_bytes(const struct ids *ids)
{
    uint64_t bytes =
        ids_keydir_bytes(ids) + ids->pending_capacity + (ids->tail ? IDS_TAIL_BYTES : 0);
    for (uint32_t k = 0; k < ids->days_count; k++) {
        bytes += ids_file_memory_bytes(ids->days[k].file);
    }
    if (ids->frozen.present) {
        bytes += ids->frozen.slots_count * sizeof(uint64_t) + ids->frozen.bytes;
    }
    return bytes;
}

uint32_t ids_sealed_files(const struct ids *ids)
{
    return ids->days_count;
}

uint64_t ids_disk_bytes(const struct ids *ids)
{
    uint64_t bytes = ids->committed_bytes + (ids->frozen.present ? ids->frozen.bytes : 0);
    for (uint32_t k = 0; k < ids->days_count; k++) {
        bytes += ids_file_bytes(ids->days[k].file);
    }
    return bytes;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Makes room for bytes more pending bytes: doubling, up to IDS_PENDING_BYTES_MAX. */
static int pending_reserve(struct ids *ids, size_t bytes)
{
    size_t need = ids->pending_bytes + bytes;
    if (need > IDS_PENDING_BYTES_MAX) {
        return -EAGAIN;
    }
    if (need <= ids->pending_capacity) {
        return 0;
    }
    size_t capacity = ids->pending_capacity == 0 ? 64u * 1024 : ids->pending_capacity;
    while (capacity < need) {
        capacity *= 2;
    }
    capacity = capacity < IDS_PENDING_BYTES_MAX ? capacity : IDS_PENDING_BYTES_MAX;
    uint8_t *pending = realloc(ids->pending, capacity);
    if (pending == NULL) {
        return -ENOMEM;
    }
    ids->pending = pending;
    ids->pending_capacity = capacity;
    return 0;
}

/* Appends rec (or its tombstone) to the pending records and points the keydir at it. */
static int ids_record(struct ids *ids, const struct storage_order *rec, bool tombstone)
{
    ASSERT(!ids->queued);
    if (ids->read_only) {
        return -EROFS;
    }
    if (!ids_record_valid(rec)) {
        return -DS_EUSAGE;
    }
    size_t bound = ids_record_bound(rec);
    uint64_t offset = ids->committed_bytes + ids->pending_bytes;
    if (offset + bound > IDS_LOG_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    bool existed = false;
    int rc = pending_reserve(ids, bound);
    rc = rc == 0 ? ids_note(ids, &rec->order_id, &existed) : rc;
    if (rc == 0 && tombstone && !existed) {
        rc = -DS_ECORRUPT;
    }
    if (rc < 0) {
        return rc;
    }
    int64_t day_index = ids->last.day_index;
    bool in_keydir = ids->last.in_keydir, in_frozen = ids->last.in_frozen;
    bool frozen_tombstone = ids->last.frozen_tombstone;
    int32_t frozen_day = ids->last.frozen_day;
    size_t padded = ids_record_encode(rec, tombstone, ids->pending + ids->pending_bytes);
    ASSERT(padded <= bound);
    ids->pending_bytes += padded;
    rc = keydir_set(ids, &rec->order_id, offset);
    if (rc < 0) {
        ids->pending_bytes -= padded; /* the keydir is unchanged on failure */
        return rc;
    }
    note_touch(ids, in_keydir, in_frozen, frozen_tombstone, frozen_day, day_index);
    ids->delta += tombstone ? -1 : !existed;
    if (ids->ordered) {
        ids->ordered = !tombstone && !in_keydir && !rec->order_id.is_string &&
                       rec->order_id.value > ids->ordered_id && rec->day >= ids->ordered_day;
        ids->ordered_id = rec->order_id.value;
        ids->ordered_day = rec->day;
    }
    return 0;
}

int ids_put(struct ids *ids, const struct storage_order *rec)
{
    return ids_record(ids, rec, false);
}

int ids_remove(struct ids *ids, const struct storage_order *current)
{
    return ids_record(ids, current, true);
}

uint64_t ids_pending_bytes(const struct ids *ids)
{
    return ids->pending_bytes;
}

static void stall_note(struct ids *ids, uint64_t ns);

/* The first commit in a new log waits until the running seal made the descriptor naming it
 * durable (mostly done already: the seal starts with it). */
static int freeze_wait(struct ids *ids)
{
    uint64_t start_ns = ds_clock_ns();
    int state = 0;
    while (ids->job != NULL && (state = atomic_load(&ids->job->freeze_state)) == 0) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 20000};
        nanosleep(&pause, NULL);
    }
    stall_note(ids, ds_clock_ns() - start_ns);
    if (state > 0) {
        ids->frozen.named = true;
        return 0;
    }
    int rc = state < 0 ? state : -EIO;
    ds_log_error("%s: the descriptor naming log %llu was not written: %s", ids->dir,
                 (unsigned long long)ids->gen, ds_strerror(rc));
    return rc;
}

int ids_queue(struct ids *ids, uint64_t *committed_bytes)
{
    ASSERT(!ids->read_only);
    ASSERT(!ids->queued);
    ASSERT(ids->fd >= 0);
    if (ids->pending_bytes > 0 && ids->frozen.present && !ids->frozen.named) {
        int rc = freeze_wait(ids);
        if (rc != 0) {
            return rc;
        }
    }
    if (ids->pending_bytes > 0) {
        struct storage_io *io = ids->io;
        int rc =
            io->ops->write(io, ids->fd, ids->pending, ids->pending_bytes, ids->committed_bytes);
        rc = rc == 0 ? io->ops->sync(io, ids->fd) : rc;
        if (rc < 0) {
            ds_log_error("%s: cannot queue %zu bytes: %s", ids->path, ids->pending_bytes,
                         ds_strerror(rc));
            return rc;
        }
    }
    ids->queued = true;
    *committed_bytes = ids->base + ids->committed_bytes + ids->pending_bytes;
    return 0;
}

/* Moves the newly committed bytes into the tail, whose oldest bytes they overwrite past
 * IDS_TAIL_BYTES (a ring: log offset x lives at x % IDS_TAIL_BYTES, so a commit copies only its
 * own bytes; shifting the tail down cost up to 16 MiB of memmove per commit). */
static void tail_append(struct ids *ids)
{
    if (ids->tail == NULL || ids->pending_bytes == 0) {
        return; /* the allocation failed at open (lookups read the file), or nothing new */
    }
    size_t add = ids->pending_bytes;
    const uint8_t *src = ids->pending;
    uint64_t at = ids->committed_bytes;
    if (add > IDS_TAIL_BYTES) { /* only the newest IDS_TAIL_BYTES stay */
        src += add - IDS_TAIL_BYTES;
        at += add - IDS_TAIL_BYTES;
        add = IDS_TAIL_BYTES;
    }
    size_t first = IDS_TAIL_BYTES - (size_t)(at % IDS_TAIL_BYTES);
    first = first < add ? first : add;
    memcpy(ids->tail + at % IDS_TAIL_BYTES, src, first);
    memcpy(ids->tail, src + first, add - first);
    uint64_t end = ids->committed_bytes + ids->pending_bytes;
    if (end - ids->tail_start > IDS_TAIL_BYTES) {
        ids->tail_start = end - IDS_TAIL_BYTES;
    }
}

void ids_committed(struct ids *ids, uint64_t committed_bytes)
{
    ASSERT(ids->queued);
    ASSERT(committed_bytes == ids->base + ids->committed_bytes + ids->pending_bytes);
    tail_append(ids);
    ids->committed_bytes = committed_bytes - ids->base;
    ids->pending_bytes = 0;
    ids->queued = false;
}

uint64_t ids_committed_bytes(const struct ids *ids)
{
    return ids->base + ids->committed_bytes;
}

/* ---- following a writer -------------------------------------------------------------------- */

/* Swaps a fresh handle's state into ids (whose caller keeps its pointer) and frees the old. */
static void ids_swap(struct ids *ids, struct ids *fresh)
{
    struct ids old = *ids;
    *ids = *fresh;
    *fresh = old;
    ids_close(fresh);
}

int ids_refresh(struct ids *ids, uint64_t committed_bytes)
{
    ASSERT(ids->read_only);
    bool found = false;
    uint64_t gen = 0, base = 0, frozen_gen = 0, frozen_base = 0;
    struct ids_day *days = NULL;
    uint32_t days_count = 0;
    int rc =
        current_read(ids->dir, &found, &gen, &base, &frozen_gen, &frozen_base, &days, &days_count);
    free(days);
    if (rc != 0) {
        return rc;
    }
    if (found && (gen != ids->gen || (frozen_gen != 0) != ids->frozen.present)) {
        /* The writer sealed: the sealed files and the log are others; open them afresh. */
        struct ids *fresh = NULL;
        rc = ids_open(ids->io, ids->data_dir, committed_bytes, true, &fresh);
        if (rc == 0) {
            ids_swap(ids, fresh);
        }
        return rc;
    }
    uint64_t held = ids->base + ids->committed_bytes;
    if (committed_bytes < held) {
        return committed_bytes < ids->base ? 0 : -ERANGE;
    }
    if (committed_bytes == held) {
        return 0;
    }
    uint64_t relative = committed_bytes - ids->base;
    if (relative % 4 != 0 || relative > IDS_LOG_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    if (ids->fd < 0) {
        int fd = ids->io->ops->open(ids->io, ids->path, O_RDONLY | O_CLOEXEC, 0);
        if (fd < 0) {
            ds_log_error("%s: cannot open: %s", ids->path, ds_strerror(fd));
            return fd;
        }
        ids->fd = fd;
    }
    uint64_t size = 0;
    rc = ids->io->ops->size(ids->io, ids->fd, &size);
    if (rc == 0 && size < relative) {
        ds_log_error("%s: %llu bytes, below the committed %llu", ids->path,
                     (unsigned long long)size, (unsigned long long)relative);
        rc = -DS_ECORRUPT;
    }
    return rc == 0 ? ids_replay(ids, relative) : rc;
}

/* ---- visiting ------------------------------------------------------------------------------ */

/* Whether the keydir points at the record of hash at offset: the slot is unique to it. */
static bool keydir_points_at(const struct ids *ids, uint64_t hash, uint64_t offset)
{
    uint64_t want = slot_make(hash, offset);
    for (uint64_t i = slot_home(hash, ids->slots_count);; i = slot_next(i, ids->slots_count)) {
        uint64_t slot = *slot_at(ids, i);
        if (slot == 0 || slot == want) {
            return slot == want;
        }
    }
}

struct visit {
    int (*fn)(const struct storage_order *rec, void *user);
    void *user;
};

/* Whether the recent or frozen tier has a record or a tombstone of id (it shadows the sealed
 * one). */
static int keydir_has(struct ids *ids, const struct ds_id *id, bool *has)
{
    struct storage_order rec;
    uint64_t index = 0;
    bool tombstone = false;
    uint64_t hash = ids_id_hash(id);
    int rc = keydir_find(ids, id, hash, ids->scratch, &rec, &index, &tombstone);
    if (rc == -ENOENT) {
        rc = frozen_find(&ids->frozen, id, hash, ids->scratch, &rec, &tombstone);
    }
    *has = rc == 0;
    return rc == -ENOENT ? 0 : rc;
}

/* The frozen tier's latest records the recent tier does not shadow. */
static int visit_frozen(struct ids *ids, struct visit *v)
{
    const struct frozen *fz = &ids->frozen;
    for (uint64_t at = 0; at < fz->bytes;) {
        uint8_t bytes[IDS_RECORD_BYTES_MAX];
        struct storage_order rec;
        bool tombstone = false;
        size_t padded = ids_record_padded(fz->mem + at, (size_t)(fz->bytes - at));
        int rc = padded == 0 ? -DS_ECORRUPT : frozen_read(fz, at, bytes, &rec, &tombstone);
        if (rc != 0) {
            return rc;
        }
        uint64_t hash = ids_id_hash(&rec.order_id);
        uint64_t want = slot_make(hash, at);
        bool latest = false;
        for (uint64_t i = slot_home(hash, fz->slots_count);; i = slot_next(i, fz->slots_count)) {
            uint64_t slot = *table_at((uint64_t *const *)fz->segments, i);
            if (slot == 0 || slot == want) {
                latest = slot == want;
                break;
            }
        }
        if (latest && !tombstone) {
            struct storage_order cur;
            uint64_t index = 0;
            bool t = false;
            rc = keydir_find(ids, &rec.order_id, hash, ids->scratch, &cur, &index, &t);
            rc = rc == -ENOENT ? v->fn(&rec, v->user) : rc < 0 ? rc : 0;
            if (rc != 0) {
                return rc;
            }
        }
        at += padded;
    }
    return 0;
}

static int visit_record(struct ids *ids, const struct storage_order *rec, bool tombstone,
                        uint64_t offset, uint64_t next, void *user)
{
    (void)next;
    struct visit *v = user;
    return !tombstone && keydir_points_at(ids, ids_id_hash(&rec->order_id), offset)
               ? v->fn(rec, v->user)
               : 0;
}

/* The sealed orders the recent tier does not shadow. */
static int visit_sealed(struct ids *ids, struct ids_file *f, struct visit *v)
{
    struct ids_file_iter *it = malloc(sizeof(*it));
    if (it == NULL) {
        return -ENOMEM;
    }
    ids_file_iter_start(f, it);
    const uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = 0;
    while ((rc = ids_file_iter_next(it, &bytes, &len)) == 1) {
        uint8_t rec_bytes[IDS_RECORD_BYTES_MAX];
        struct storage_order rec;
        bool tombstone = false, shadowed = false;
        memcpy(rec_bytes, bytes, len);
        rc = ids_record_decode(rec_bytes, len, &rec, &tombstone);
        rc = rc == 0 && tombstone ? -DS_ECORRUPT : rc;
        rc = rc == 0 ? keydir_has(ids, &rec.order_id, &shadowed) : rc;
        rc = rc == 0 && !shadowed ? v->fn(&rec, v->user) : rc;
        if (rc != 0) {
            break;
        }
    }
    ids_file_iter_end(it);
    free(it);
    return rc;
}

int ids_visit(struct ids *ids, int (*fn)(const struct storage_order *rec, void *user), void *user)
{
    struct visit v = {.fn = fn, .user = user};
    uint32_t days_count = ids->days_count;
    for (uint32_t k = 0; k < days_count; k++) {
        int rc = visit_sealed(ids, ids->days[k].file, &v);
        if (rc != 0) {
            return rc;
        }
    }
    int rc = ids->frozen.present ? visit_frozen(ids, &v) : 0;
    if (rc != 0) {
        return rc;
    }
    return ids->committed_bytes == 0 ? 0 : ids_walk(ids, 0, ids->committed_bytes, visit_record, &v);
}

/* ---- sealing ------------------------------------------------------------------------------- */

/* The frozen log of the string run qsort is sorting (qsort has no user pointer): one per
 * thread, as a seal's sort runs on one thread. */
static _Thread_local const uint8_t *seal_string_mem;

/* String ids within one day: by their bytes (rare: most stores key on integers). */
static int seal_string_compare(const void *pa, const void *pb)
{
    const struct seal_entry *a = pa, *b = pb;
    struct ds_id x, y;
    (void)ids_record_id(seal_string_mem + (uint64_t)a->unit * 4, IDS_RECORD_BYTES_MAX, &x);
    (void)ids_record_id(seal_string_mem + (uint64_t)b->unit * 4, IDS_RECORD_BYTES_MAX, &y);
    return ids_id_compare(&x, &y);
}

/* The digit of pass kind (0: a byte of key, 1: is_string, 2: a byte of day - day_min). */
static unsigned entry_digit(const struct seal_entry *e, unsigned kind, unsigned shift,
                            int32_t day_min)
{
    return kind == 0   ? (unsigned)(e->key >> shift) & 255u
           : kind == 1 ? entry_string(e)
                       : (unsigned)((uint32_t)(entry_day(e) - day_min) >> shift) & 255u;
}

/* Sorts entries by day, then integer ids by value, then string ids by bytes: a least
 * significant digit radix sort over the key and day bytes that vary (three or four passes for
 * a day's worth of rising ids), then the string runs by comparison. qsort's comparisons were
 * 13% of an ingest. */
static int seal_sort(struct seal_job *j)
{
    uint64_t n = j->entries_count;
    struct seal_entry *tmp = malloc((n > 0 ? n : 1) * sizeof(*tmp));
    if (tmp == NULL) {
        return -ENOMEM;
    }
    uint64_t key_or = 0, key_and = ~0ull;
    int32_t day_min = INT32_MAX, day_max = INT32_MIN;
    bool strings = false, integers = false;
    for (uint64_t i = 0; i < n; i++) {
        const struct seal_entry *e = &j->entries[i];
        key_or |= e->key;
        key_and &= e->key;
        day_min = entry_day(e) < day_min ? entry_day(e) : day_min;
        day_max = entry_day(e) > day_max ? entry_day(e) : day_max;
        strings |= entry_string(e);
        integers |= !entry_string(e);
    }
    struct seal_entry *src = j->entries, *dst = tmp;
    for (unsigned kind = 0; kind < 3 && n > 1; kind++) {
        for (unsigned shift = 0; shift < (kind == 1 ? 1u : kind == 0 ? 64u : 32u); shift += 8) {
            bool varies = kind == 0   ? ((key_or ^ key_and) >> shift & 255u) != 0
                          : kind == 1 ? strings && integers
                                      : ((uint32_t)(day_max - day_min) >> shift) != 0;
            if (!varies) {
                continue;
            }
            uint64_t count[257] = {0};
            for (uint64_t i = 0; i < n; i++) {
                count[entry_digit(&src[i], kind, shift, day_min) + 1]++;
            }
            for (unsigned d = 1; d < 257; d++) {
                count[d] += count[d - 1];
            }
            for (uint64_t i = 0; i < n; i++) {
                dst[count[entry_digit(&src[i], kind, shift, day_min)]++] = src[i];
            }
            struct seal_entry *t = src;
            src = dst;
            dst = t;
        }
    }
    if (src != j->entries) {
        memcpy(j->entries, src, n * sizeof(*src));
    }
    for (uint64_t i = 0; strings && i < n;) {
        uint64_t end = i + 1;
        while (end < n && entry_day(&j->entries[end]) == entry_day(&j->entries[i]) &&
               entry_string(&j->entries[end]) == entry_string(&j->entries[i])) {
            end++;
        }
        if (entry_string(&j->entries[i])) {
            seal_string_mem = j->mem;
            qsort(j->entries + i, (size_t)(end - i), sizeof(*j->entries), seal_string_compare);
        }
        i = end;
    }
    /* The integer ids alone, ascending, for the merge's check of which old records the frozen
     * tier replaced: a walk beside each old file instead of a keydir probe per record. */
    static_assert(sizeof(struct seal_entry) == 2 * sizeof(uint64_t), "keys fit the sort's buffer");
    j->keys = (uint64_t *)(void *)tmp; /* the keys and their sort's buffer, in the entries' */
    uint64_t *ktmp = j->keys + n;
    for (uint64_t i = 0; i < n; i++) {
        if (!entry_string(&j->entries[i])) {
            j->keys[j->keys_count++] = j->entries[i].key;
        }
    }
    uint64_t *ks = j->keys, *kd = ktmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (((key_or ^ key_and) >> shift & 255u) == 0) {
            continue;
        }
        uint64_t count[257] = {0};
        for (uint64_t i = 0; i < j->keys_count; i++) {
            count[(ks[i] >> shift & 255u) + 1]++;
        }
        for (unsigned d = 1; d < 257; d++) {
            count[d] += count[d - 1];
        }
        for (uint64_t i = 0; i < j->keys_count; i++) {
            kd[count[ks[i] >> shift & 255u]++] = ks[i];
        }
        uint64_t *t = ks;
        ks = kd;
        kd = t;
    }
    if (ks != j->keys) {
        memcpy(j->keys, ks, j->keys_count * sizeof(*ks));
    }
    return 0;
}

/* The frozen tier's records as they lie in its log, when it is ordered: one per id, in (day, id)
 * order with ids rising across days, so they are the entries and their keys as they come. */
static int seal_collect_ordered(struct seal_job *j)
{
    const struct frozen *fz = &j->ids->frozen;
    j->keys = malloc((fz->keys > 0 ? fz->keys : 1) * sizeof(*j->keys));
    if (j->keys == NULL) {
        return -ENOMEM;
    }
    for (uint64_t at = 0; at < fz->bytes;) {
        struct ds_id id;
        int32_t day = 0;
        bool tombstone = false;
        size_t padded = ids_record_padded(fz->mem + at, (size_t)(fz->bytes - at));
        if (padded == 0 || j->entries_count == fz->keys ||
            !ids_record_key(fz->mem + at, (size_t)(fz->bytes - at), &id, &day, &tombstone) ||
            id.is_string || tombstone) {
            return -DS_ECORRUPT;
        }
        j->keys[j->entries_count] = (uint64_t)id.value;
        j->entries[j->entries_count++] = (struct seal_entry){
            .key = (uint64_t)id.value, .unit = (uint32_t)(at / 4), .meta = (uint32_t)day};
        at += padded;
    }
    j->keys_count = j->entries_count;
    return j->entries_count == fz->keys ? 0 : -DS_ECORRUPT;
}

/* The frozen tier's latest record of each id, from its keydir (no pass over the log), sorted by
 * day and id. */
static int seal_collect(struct seal_job *j)
{
    const struct frozen *fz = &j->ids->frozen;
    j->mem = fz->mem;
    if (fz->bytes > SEAL_LOG_BYTES_MAX) {
        ds_log_error("%s: a recent tier of %llu bytes, over the %llu a seal takes", j->dir,
                     (unsigned long long)fz->bytes, (unsigned long long)SEAL_LOG_BYTES_MAX);
        return -DS_ELIMIT;
    }
    j->entries = malloc((fz->keys > 0 ? fz->keys : 1) * sizeof(*j->entries));
    if (j->entries == NULL) {
        return -ENOMEM;
    }
    if (fz->ordered) {
        return seal_collect_ordered(j);
    }
    for (uint64_t i = 0; i < fz->slots_count; i++) {
        uint64_t slot = *table_at((uint64_t *const *)fz->segments, i);
        if (i + SEAL_PREFETCH_SLOTS < fz->slots_count) {
            /* The records are in hash order, random in the log: a load ahead hides the miss
             * (without it the seal spent a tenth of an ingest's time waiting on them). */
            uint64_t ahead = *table_at((uint64_t *const *)fz->segments, i + SEAL_PREFETCH_SLOTS);
            if (ahead != 0) {
                __builtin_prefetch(fz->mem + slot_offset(ahead));
            }
        }
        if (slot == 0) {
            continue;
        }
        struct ds_id id;
        int32_t day = 0;
        bool tombstone = false;
        uint64_t offset = slot_offset(slot);
        if (offset >= fz->bytes || !ids_record_key(fz->mem + offset, (size_t)(fz->bytes - offset),
                                                   &id, &day, &tombstone)) {
            return -DS_ECORRUPT;
        }
        j->entries[j->entries_count++] =
            (struct seal_entry){.key = id.is_string ? 0 : (uint64_t)id.value,
                                .unit = (uint32_t)(offset / 4),
                                .meta = (uint32_t)day | (id.is_string ? SEAL_STRING : 0) |
                                        (tombstone ? SEAL_TOMBSTONE : 0)};
    }
    ASSERT(j->entries_count == fz->keys);
    return seal_sort(j);
}

/* Writes day's new file from old (NULL: none) and the frozen records of day in entries
 * [from, to): an old order the frozen tier holds (changed, moved or removed) is left out.
 * *file stays NULL when no order is left on the day. */
static int seal_write_day(struct seal_job *j, int32_t day, struct ids_file *old, uint64_t from,
                          uint64_t to, struct ids_file **file)
{
    const struct frozen *fz = &j->ids->frozen;
    uint64_t most = old != NULL ? ids_file_records(old) : 0; /* sizes the filter */
    most += to - from;
    char path[DS_PATH_MAX];
    struct ids_file_writer *w = NULL;
    struct ids_file_iter *it = old != NULL ? malloc(sizeof(*it)) : NULL;
    int rc = old != NULL && it == NULL ? -ENOMEM : day_name(path, j->dir, day, j->gen);
    rc = rc == 0 ? ids_file_writer_open(path, day, most, &w) : rc;
    if (rc != 0) {
        free(it);
        return rc;
    }
    if (old != NULL) {
        ids_file_iter_start(old, it);
    }
    const uint8_t *bytes = NULL;
    size_t len = 0;
    struct ds_id previous = {0};
    uint64_t e = from, n = 0, kc = 0;
    for (;;) {
        int more = old != NULL ? ids_file_iter_next(it, &bytes, &len) : 0;
        if (more < 0) {
            rc = more;
            break;
        }
        struct storage_order rec;
        bool tombstone = false;
        if (more == 1) {
            rc = ids_record_decode(bytes, len, &rec, &tombstone);
            if (rc == 0 && (tombstone || rec.day != day ||
                            (n++ > 0 && ids_id_compare(&previous, &rec.order_id) >= 0))) {
                rc = -DS_ECORRUPT; /* a file's records are checked before they are written again */
            }
            if (rc != 0) {
                break;
            }
            previous = rec.order_id;
        }
        /* The frozen records of the day before this old record (all of them at the end). */
        for (; rc == 0 && e < to; e++) {
            const struct seal_entry *x = &j->entries[e];
            if (more == 1) {
                struct ds_id xid = {0};
                if (entry_string(x)) {
                    (void)ids_record_id(j->mem + (uint64_t)x->unit * 4, IDS_RECORD_BYTES_MAX, &xid);
                } else {
                    xid.value = (int64_t)x->key;
                }
                if (ids_id_compare(&xid, &rec.order_id) > 0) {
                    break;
                }
            }
            if (!entry_tombstone(x)) {
                const uint8_t *xb = j->mem + (uint64_t)x->unit * 4;
                rc = ids_file_writer_add(w, xb, ids_record_padded(xb, IDS_RECORD_BYTES_MAX));
            }
        }
        if (rc != 0 || more == 0) {
            break;
        }
        int found = -ENOENT;
        if (!rec.order_id.is_string) {
            uint64_t v = (uint64_t)rec.order_id.value;
            while (kc < j->keys_count && j->keys[kc] < v) {
                kc++;
            }
            found = kc < j->keys_count && j->keys[kc] == v ? 0 : -ENOENT;
        } else {
            struct storage_order shadow;
            bool shadow_tombstone = false;
            found = frozen_find(fz, &rec.order_id, ids_id_hash(&rec.order_id), j->scratch, &shadow,
                                &shadow_tombstone);
        }
        if (found == 0) {
            continue; /* the frozen tier's version replaces it (written above when on day) */
        }
        rc = found == -ENOENT ? ids_file_writer_add(w, bytes, len) : found;
        if (rc != 0) {
            break;
        }
    }
    if (it != NULL) {
        ids_file_iter_end(it);
    }
    free(it);
    if (rc < 0 || ids_file_writer_records(w) == 0) {
        ids_file_writer_abort(w);
        return rc < 0 ? rc : 0;
    }
    rc = ids_file_writer_finish(w);
    rc = rc == 0 ? ids_file_open(path, day, file) : rc;
    if (rc != 0) {
        (void)unlink(path);
    }
    return rc;
}

/* Removes the seal's new files (before its descriptor, or on a handle closed unused). */
static void seal_discard(struct seal_job *j)
{
    for (uint32_t k = 0; k < j->days_count; k++) {
        if (j->days[k].file != NULL) {
            char path[DS_PATH_MAX];
            ids_file_close(j->days[k].file);
            if (day_name(path, j->dir, j->days[k].day, j->days[k].gen) == 0) {
                (void)unlink(path);
            }
        }
    }
    free(j->days);
    j->days = NULL;
    j->days_count = 0;
}

/* The seal proper: the new files of the days the frozen tier or the touched set changed, the
 * old files kept as they are, the ones below the floor left out; then the descriptor naming
 * them and the active log alone, and the removal of the frozen log and replaced files. */
static int seal_run(struct seal_job *j)
{
    const struct frozen *fz = &j->ids->frozen;
    int rc = 0;
    if (j->freeze_descriptor) {
        /* Off the writer: its next commit in the new log waits for this (ids_queue). */
        rc = ds_fsync_dir(j->dir);
        rc = rc == 0 ? current_write(j->dir, j->gen, j->base, fz->gen + 1, fz->base, j->old,
                                     j->old_count)
                     : rc;
        atomic_store(&j->freeze_state, rc == 0 ? 1 : rc);
        if (rc != 0) {
            return rc;
        }
    }
    rc = seal_collect(j);
    uint32_t most = j->old_count + (uint32_t)(j->entries_count < UINT32_MAX / 2 ? j->entries_count
                                                                                : UINT32_MAX / 2);
    j->days = rc == 0 ? calloc((size_t)most + 1, sizeof(*j->days)) : NULL;
    rc = rc == 0 && j->days == NULL ? -ENOMEM : rc;
    uint64_t e = 0;
    uint32_t k = 0;
    while (rc == 0 && (k < j->old_count || e < j->entries_count)) {
        int32_t day = e < j->entries_count ? entry_day(&j->entries[e]) : INT32_MAX;
        day = k < j->old_count && j->old[k].day < day ? j->old[k].day : day;
        uint64_t to = e;
        while (to < j->entries_count && entry_day(&j->entries[to]) == day) {
            to++;
        }
        struct ids_file *old = k < j->old_count && j->old[k].day == day ? j->old[k].file : NULL;
        bool live = false;
        for (uint64_t x = e; x < to && !live; x++) {
            live = !entry_tombstone(&j->entries[x]);
        }
        if (day >= j->floor && (live || (old != NULL && day_set_has(&fz->touched, day)))) {
            struct ids_file *file = NULL;
            rc = seal_write_day(j, day, old, e, to, &file);
            if (rc == 0 && file != NULL) {
                j->days[j->days_count++] =
                    (struct ids_day){.day = day, .gen = j->gen, .file = file};
            }
        } else if (day >= j->floor && old != NULL) {
            j->days[j->days_count++] = (struct ids_day){.day = day, .gen = j->old[k].gen};
        }
        e = to;
        k += old != NULL;
    }
    /* The new files' names are durable before the descriptor that names them. */
    rc = rc == 0 ? ds_fsync_dir(j->dir) : rc;
    rc = rc == 0 ? current_write(j->dir, j->gen, j->base, 0, 0, j->days, j->days_count) : rc;
    if (rc != 0) {
        ds_log_error("%s: seal %llu failed: %s", j->dir, (unsigned long long)j->gen,
                     ds_strerror(rc));
        seal_discard(j);
        return rc;
    }
    (void)unlink(fz->path);
    for (uint32_t o = 0; o < j->old_count; o++) {
        bool kept = false;
        for (uint32_t n = 0; n < j->days_count && !kept; n++) {
            kept = j->days[n].day == j->old[o].day && j->days[n].gen == j->old[o].gen;
        }
        char path[DS_PATH_MAX];
        if (!kept && day_name(path, j->dir, j->old[o].day, j->old[o].gen) == 0) {
            (void)unlink(path); /* the writer's open handle reads it until it installs */
        }
    }
    return 0;
}

static void *seal_thread(void *arg)
{
    struct seal_job *j = arg;
    if (j->threaded) {
        pthread_setname_np(pthread_self(), "ds-ids-seal");
    }
    j->rc = seal_run(j);
    atomic_store(&j->done, true);
    return NULL;
}

/* The writer takes the finished seal's result: the new files (the kept ones carry their open
 * handles over), and the frozen tier goes. A failed seal leaves the frozen tier for a retry. */
static int seal_install(struct ids *ids)
{
    struct seal_job *j = ids->job;
    if (j->threaded) {
        pthread_join(j->thread, NULL);
    }
    ids->job = NULL;
    int rc = j->rc;
    if (atomic_load(&j->freeze_state) > 0) {
        ids->frozen.named = true;
    }
    if (rc == 0) {
        for (uint32_t o = 0; o < ids->days_count; o++) {
            struct ids_day *old = &ids->days[o];
            bool kept = false;
            for (uint32_t n = 0; n < j->days_count && !kept; n++) {
                if (j->days[n].day == old->day && j->days[n].gen == old->gen) {
                    j->days[n].file = old->file;
                    kept = true;
                }
            }
            if (!kept) {
                ids_file_close(old->file);
            }
        }
        free(ids->days);
        ids->days = j->days;
        ids->days_count = j->days_count;
        ids->sealed_count = 0;
        for (uint32_t k = 0; k < ids->days_count; k++) {
            ids->sealed_count += ids_file_records(ids->days[k].file);
        }
        if (ids->frozen.mem_is_tail && ids->spare_tail == NULL) {
            ids->spare_tail = ids->frozen.mem;
            ids->frozen.mem = NULL;
        }
        frozen_free(&ids->frozen);
        ids->seal_retry_bytes = 0;
        ids->seals++;
        ids->last.valid = false; /* it may name a file by its index in the old list */
    } else {
        ids->seal_retry_bytes = ids->committed_bytes + ids->recent_budget_bytes / 4 + 1;
    }
    free(j->old);
    free(j->entries);
    free(j->keys);
    free(j);
    return rc;
}

/* Starts the seal of the frozen tier: on its thread when background, else here. */
static int seal_start(struct ids *ids, int32_t floor, bool background)
{
    ASSERT(ids->frozen.present && ids->job == NULL);
    struct seal_job *j = calloc(1, sizeof(*j));
    struct ids_day *old = calloc((size_t)ids->days_count + 1, sizeof(*old));
    if (j == NULL || old == NULL) {
        free(j);
        free(old);
        return -ENOMEM;
    }
    if (ids->days_count > 0) {
        memcpy(old, ids->days, ids->days_count * sizeof(*old));
    }
    memcpy(j->dir, ids->dir, sizeof(j->dir));
    j->ids = ids;
    j->floor = floor;
    j->gen = ids->gen;
    j->base = ids->base;
    j->old = old;
    j->old_count = ids->days_count;
    j->freeze_descriptor = !ids->frozen.named;
    ids->job = j;
    j->threaded = background;
    if (background && pthread_create(&j->thread, NULL, seal_thread, j) == 0) {
        return 0;
    }
    j->threaded = false;
    seal_thread(j);
    return 0;
}

/* Freezes the recent tier: a new log of the next generation and the tiers' switch in memory,
 * no I/O waited for. The seal's thread then makes the new log's name durable and replaces the
 * descriptor with one naming it after the frozen log (so a crash from there on replays both);
 * until then nothing in the new log may be committed (ids_queue waits). */
static int seal_freeze(struct ids *ids)
{
    uint64_t gen = ids->gen + 1;
    char path[DS_PATH_MAX];
    int rc = log_name(path, ids->dir, gen);
    int fd = rc == 0
                 ? ids->io->ops->open(ids->io, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                 : rc;
    if (fd < 0) {
        return fd;
    }
    struct freeze_prep prep;
    rc = freeze_prepare(ids, &prep);
    if (rc != 0) {
        ds_log_error("%s: cannot start a seal: %s", ids->dir, ds_strerror(rc));
        ids->io->ops->close(ids->io, fd);
        (void)unlink(path);
        return rc;
    }
    tier_freeze(ids, &prep);
    ids->io->ops->close(ids->io, ids->fd);
    ids->fd = fd;
    ids->gen = gen;
    memcpy(ids->path, path, sizeof(ids->path));
    return 0;
}

int ids_seal(struct ids *ids, int32_t floor)
{
    ASSERT(!ids->read_only);
    ASSERT(!ids->queued && ids->pending_bytes == 0);
    int rc = ids->job != NULL ? seal_install(ids) : 0;
    if (rc == 0 && ids->frozen.present) {
        rc = seal_start(ids, floor, false);
        rc = rc == 0 ? seal_install(ids) : rc;
    }
    rc = rc == 0 ? seal_freeze(ids) : rc;
    if (rc == 0) {
        rc = seal_start(ids, floor, false);
        rc = rc == 0 ? seal_install(ids) : rc;
    }
    return rc;
}

/* A stall's histogram bucket: IDS_STALL_SUBBUCKETS per power of two, so a percentile read from
 * a bucket's upper bound is at most a quarter above the true figure. */
static uint32_t stall_bucket(uint64_t ns)
{
    if (ns < IDS_STALL_SUBBUCKETS) {
        return (uint32_t)ns;
    }
    uint32_t msb = 63u - (uint32_t)__builtin_clzll(ns);
    uint32_t sub = (uint32_t)(ns >> (msb - 2u)) & (IDS_STALL_SUBBUCKETS - 1u);
    return (msb - 1u) * IDS_STALL_SUBBUCKETS + sub;
}

/* The largest stall bucket b holds. */
static uint64_t stall_bucket_upper(uint32_t b)
{
    if (b < IDS_STALL_SUBBUCKETS) {
        return b;
    }
    uint32_t msb = b / IDS_STALL_SUBBUCKETS + 1u;
    uint64_t sub = b % IDS_STALL_SUBBUCKETS;
    return ((IDS_STALL_SUBBUCKETS + sub + 1u) << (msb - 2u)) - 1u;
}

/* Keeps the writer's time in ids_maintain for ids_seal_stalls. */
static void stall_note(struct ids *ids, uint64_t ns)
{
    ids->stalls_total_ns += ns;
    ids->stalls_max_ns = ns > ids->stalls_max_ns ? ns : ids->stalls_max_ns;
    ids->stalls_hist[stall_bucket(ns)]++;
    ids->stalls_count++;
}

int ids_maintain(struct ids *ids, int32_t floor)
{
    ASSERT(!ids->read_only);
    uint64_t start_ns = ds_clock_ns();
    int rc = 0, sealed = 0;
    if (ids->job != NULL) {
        bool done = atomic_load(&ids->job->done);
        if (!done && ids->committed_bytes >= IDS_RECENT_HARD_BYTES) {
            ds_log_info("%s: the recent tier reached %llu bytes: waiting for the seal", ids->dir,
                        (unsigned long long)ids->committed_bytes);
            done = true;
        }
        if (done) {
            rc = seal_install(ids);
            sealed = rc == 0;
        }
    }
    bool retry = ids->committed_bytes >= ids->seal_retry_bytes;
    if (ids->job == NULL && ids->frozen.present && rc == 0 && retry) {
        rc = seal_start(ids, floor, ids->background); /* after an open or a failed seal */
    } else if (ids->job == NULL && !ids->frozen.present && rc == 0 && retry) {
        bool dropped = ids->days_count > 0 && ids->days[0].day < floor;
        bool full = ids->committed_bytes >= ids->recent_budget_bytes;
        if (dropped || full) {
            rc = seal_freeze(ids);
            rc = rc == 0 ? seal_start(ids, floor, ids->background) : rc;
        }
    }
    if (rc == 0 && !ids->background && ids->job != NULL) {
        rc = seal_install(ids);
        sealed = rc == 0;
    }
    if (rc != 0 && ids->seal_retry_bytes <= ids->committed_bytes) {
        /* The store stays as it was and the next try waits for a quarter budget more: a full
         * disk does not turn every commit into a failed seal. */
        ids->seal_retry_bytes = ids->committed_bytes + ids->recent_budget_bytes / 4 + 1;
    }
    if (sealed || ids->job != NULL || ids->frozen.present) {
        stall_note(ids, ds_clock_ns() - start_ns);
    }
    return rc != 0 ? rc : sealed;
}

void ids_progress(const struct ids *ids, struct ids_progress *out)
{
    ASSERT(ids != NULL && out != NULL);
    *out = (struct ids_progress){.recent_bytes = ids->committed_bytes,
                                 .seals = ids->seals,
                                 .sealing = ids->job != NULL,
                                 .stall_calls = ids->stalls_count,
                                 .stall_total_ns = ids->stalls_total_ns,
                                 .stall_max_ns = ids->stalls_max_ns};
}

void ids_set_background(struct ids *ids, bool background)
{
    ids->background = background;
}

void ids_seal_stalls(const struct ids *ids, uint64_t *calls, uint64_t *max_ns, uint64_t *p99_ns)
{
    *calls = ids->stalls_count;
    *max_ns = ids->stalls_max_ns;
    *p99_ns = 0;
    if (ids->stalls_count == 0) {
        return;
    }
    uint64_t rank = (ids->stalls_count - 1) * 99 / 100; /* 0-based, as in a sorted array */
    uint64_t seen = 0;
    for (uint32_t b = 0; b < IDS_STALL_BUCKETS; b++) {
        seen += ids->stalls_hist[b];
        if (seen > rank) {
            uint64_t upper = stall_bucket_upper(b);
            *p99_ns = upper < ids->stalls_max_ns ? upper : ids->stalls_max_ns;
            return;
        }
    }
}
