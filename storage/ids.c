/*
 * The orders-by-id store (ids.h): an append-only log of order records and an in-memory keydir.
 *
 * Log record, little-endian, 4-byte aligned (the zero padding is not counted in length):
 *   0 u32 CRC32C of bytes 4..length   4 u16 length   6 u8 flags (IDS_FLAG_*)   7 u8 status length
 *   8 order id, customer id (each a varint, or for a string id a length byte and its bytes),
 *     version (a varint, when the flag says it has one), ts_ms (varint; the day follows from it),
 *     shard, zigzag amount units, versions seen (varints), the status bytes, and when the flag
 *     says so the items: a varint length and the canonical bytes.
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
 * and the new table whole (that was 256 + 512 MiB at 25.2M orders, 1.1 GiB of a node at 30M
 * events). From 12 segments (2.4M orders) on, load stays between 0.59 and 0.75: 10.7 to 13.5
 * bytes per order (doubling: 10.7 to 21.3, and 32 while it held both tables). The price: each
 * entry is moved about 5 times over the table's life instead of 2 (sequential passes).
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
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shard/shard.h"
#include "storage/format.h"
#include "storage/ids.h"
#include "storage/storage.h"

#define IDS_FLAG_ID_STRING 1u
#define IDS_FLAG_HAS_VERSION 2u
#define IDS_FLAG_CUSTOMER_STRING 4u
#define IDS_FLAG_ITEMS 8u
/* A tombstone: the order (the version the record repeats) left this store (storage_release). */
#define IDS_FLAG_TOMBSTONE 16u
#define IDS_FLAGS_ALL 31u
/* Before the varint fields: CRC32C, length, flags, status length. */
#define IDS_RECORD_FIXED_BYTES 8u

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
/* A writer keeps the newest committed bytes of the log in memory: updates mostly touch recent
 * orders, and a lookup served from memory saves a read system call. */
#define IDS_TAIL_BYTES (16u * 1024 * 1024)
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

struct ids {
    struct storage_io *io;
    int fd; /* -1: a reader of a log not created yet */
    bool read_only;
    bool queued; /* ids_queue ran; ids_committed not yet */
    char path[DS_PATH_MAX];
    /* The keydir: slot i lives at segments[i >> IDS_SEGMENT_SHIFT][i % IDS_SEGMENT_SLOTS]. A
     * table below IDS_SEGMENT_SLOTS slots is one short segment (a power of two); a larger one
     * is a whole number of segments. */
    uint64_t *segments[IDS_SEGMENTS_MAX];
    uint64_t slots_count;
    uint64_t count; /* occupied slots = distinct orders */
    uint64_t committed_bytes;
    uint8_t *pending; /* records at [committed_bytes, committed_bytes + pending_bytes) */
    size_t pending_bytes;
    size_t pending_capacity;
    uint8_t *tail; /* a writer's committed bytes [tail_start, committed_bytes), or NULL; a ring */
    uint64_t tail_start;
    uint8_t scratch[IDS_RECORD_BYTES_MAX]; /* the record a put compares against */
    /* The last ids_get's probe, valid until the keydir changes: the writer's put of the order it
     * just looked up (the orders model always does that) takes the slot without probing and
     * reading the old record again. */
    struct {
        bool valid;
        bool found;
        uint64_t hash;
        uint64_t index;
        struct ds_id id;
    } last;
};

/* ---- encoding ------------------------------------------------------------------------------ */

static size_t align4(size_t n)
{
    return (n + 3u) & ~(size_t)3u;
}

static bool id_valid(const struct ds_id *id)
{
    if (id->is_string) {
        return id->len >= 1 && id->len <= DS_ID_BYTES_MAX && id->value == 0;
    }
    return id->len == 0 && id->value >= 1;
}

/* The hash of an id: integers through splitmix's finaliser, strings through FNV-1a (the
 * routing hash) and the same finaliser, so the high bits the keydir keeps are well mixed. */
static uint64_t id_hash(const struct ds_id *id)
{
    if (!id->is_string) {
        return ds_mix64((uint64_t)id->value);
    }
    return ds_mix64(shard_fnv1a64(id->text, id->len) ^ 0x9e3779b97f4a7c15ull);
}

bool ids_record_valid(const struct storage_order *rec)
{
    return id_valid(&rec->order_id) && id_valid(&rec->customer_id) && rec->version >= 0 &&
           (rec->has_version || rec->version == 0) && rec->ts_ms >= DS_TS_MS_MIN &&
           rec->ts_ms <= DS_TS_MS_MAX && rec->day == ds_day_from_ms(rec->ts_ms) &&
           rec->status_len <= DS_STATUS_BYTES_MAX && rec->items_bytes <= DS_ITEMS_BYTES_MAX &&
           (rec->items_bytes == 0) == (rec->items == NULL);
}

/* Writes id as the record holds it: a varint for an integer, a length byte and the bytes for a
 * string (its kind is a flag). */
static size_t put_id(uint8_t *dst, const struct ds_id *id)
{
    if (!id->is_string) {
        return ds_varint_put(dst, (uint64_t)id->value);
    }
    dst[0] = id->len;
    memcpy(dst + 1, id->text, id->len);
    return 1u + id->len;
}

static bool get_id(const uint8_t **p, const uint8_t *end, bool is_string, struct ds_id *id)
{
    memset(id, 0, sizeof(*id));
    id->is_string = is_string;
    if (!is_string) {
        uint64_t v = 0;
        if (!ds_varint_next(p, end, &v) || v > INT64_MAX) {
            return false;
        }
        id->value = (int64_t)v;
        return true;
    }
    if (*p >= end || **p > DS_ID_BYTES_MAX || (size_t)(end - *p) < 1u + **p) {
        return false;
    }
    id->len = *(*p)++;
    memcpy(id->text, *p, id->len);
    *p += id->len;
    return true;
}

/* At least the padded size record_encode gives rec. */
static size_t record_bound(const struct storage_order *rec)
{
    size_t ids = (rec->order_id.is_string ? 1u + rec->order_id.len : 10u) +
                 (rec->customer_id.is_string ? 1u + rec->customer_id.len : 10u);
    return align4(IDS_RECORD_FIXED_BYTES + ids + 10u + 10u + 5u + 10u + 5u + 5u + rec->status_len +
                  3u + rec->items_bytes);
}

/* Encodes rec (valid) into dst, zero padding included; returns the padded size. */
size_t ids_record_encode(const struct storage_order *rec, bool tombstone, uint8_t *dst)
{
    uint8_t *p = dst + IDS_RECORD_FIXED_BYTES;
    p += put_id(p, &rec->order_id);
    p += put_id(p, &rec->customer_id);
    if (rec->has_version) {
        p += ds_varint_put(p, (uint64_t)rec->version);
    }
    p += ds_varint_put(p, (uint64_t)rec->ts_ms);
    p += ds_varint_put(p, rec->shard);
    p += ds_varint_put(p, ds_zigzag(rec->amount_units));
    p += ds_varint_put(p, rec->versions_seen);
    p += ds_varint_put(p, ds_zigzag(rec->source_partition));
    memcpy(p, rec->status, rec->status_len);
    p += rec->status_len;
    if (rec->items != NULL) {
        p += ds_varint_put(p, rec->items_bytes);
        memcpy(p, rec->items, rec->items_bytes);
        p += rec->items_bytes;
    }
    size_t length = (size_t)(p - dst);
    size_t padded = align4(length);
    ASSERT(padded <= IDS_RECORD_BYTES_MAX);
    memset(p, 0, padded - length);
    ds_put_le16(dst + 4, (uint16_t)length);
    dst[6] = (uint8_t)((rec->order_id.is_string ? IDS_FLAG_ID_STRING : 0u) |
                       (rec->has_version ? IDS_FLAG_HAS_VERSION : 0u) |
                       (rec->customer_id.is_string ? IDS_FLAG_CUSTOMER_STRING : 0u) |
                       (rec->items != NULL ? IDS_FLAG_ITEMS : 0u) |
                       (tombstone ? IDS_FLAG_TOMBSTONE : 0u));
    dst[7] = rec->status_len;
    ds_put_le32(dst, ds_crc32c(0, dst + 4, length - 4));
    return padded;
}

/* The record length a header announces, or 0 when it cannot be one (avail bytes at src). */
static size_t record_announced(const uint8_t *src, size_t avail)
{
    if (avail < IDS_RECORD_FIXED_BYTES) {
        return 0;
    }
    size_t length = ds_get_le16(src + 4);
    if (length < IDS_RECORD_FIXED_BYTES + 5u || align4(length) > IDS_RECORD_BYTES_MAX) {
        return 0;
    }
    return length;
}

/* Decodes and checks the record at src (avail bytes, at least its announced length); out->items
 * points into src. Returns 0 or -DS_ECORRUPT. */
int ids_record_decode(const uint8_t *src, size_t avail, struct storage_order *out, bool *tombstone)
{
    size_t length = record_announced(src, avail);
    if (length == 0 || length > avail || ds_get_le32(src) != ds_crc32c(0, src + 4, length - 4)) {
        return -DS_ECORRUPT;
    }
    uint8_t flags = src[6];
    const uint8_t *p = src + IDS_RECORD_FIXED_BYTES;
    const uint8_t *end = src + length;
    struct storage_order rec = {0};
    rec.status_len = src[7];
    rec.has_version = flags & IDS_FLAG_HAS_VERSION;
    uint64_t version = 0, ts = 0, shard = 0, amount = 0, seen = 0, items = 0, source = 0;
    bool ok = (flags & ~IDS_FLAGS_ALL) == 0 && rec.status_len <= DS_STATUS_BYTES_MAX &&
              get_id(&p, end, flags & IDS_FLAG_ID_STRING, &rec.order_id) &&
              get_id(&p, end, flags & IDS_FLAG_CUSTOMER_STRING, &rec.customer_id) &&
              (!rec.has_version || ds_varint_next(&p, end, &version)) &&
              ds_varint_next(&p, end, &ts) && ds_varint_next(&p, end, &shard) &&
              ds_varint_next(&p, end, &amount) && ds_varint_next(&p, end, &seen) &&
              ds_varint_next(&p, end, &source) && (size_t)(end - p) >= rec.status_len;
    if (ok) {
        memcpy(rec.status, p, rec.status_len);
        p += rec.status_len;
    }
    if (ok && (flags & IDS_FLAG_ITEMS) != 0) {
        ok = ds_varint_next(&p, end, &items) && items <= DS_ITEMS_BYTES_MAX &&
             (uint64_t)(end - p) >= items;
        rec.items = p;
        rec.items_bytes = (uint16_t)items;
        p += ok ? items : 0;
    }
    if (!ok || p != end || version > INT64_MAX || ts > (uint64_t)DS_TS_MS_MAX ||
        shard > UINT32_MAX || seen > UINT32_MAX || ds_unzigzag(source) < INT32_MIN ||
        ds_unzigzag(source) > INT32_MAX) {
        return -DS_ECORRUPT;
    }
    rec.source_partition = (int32_t)ds_unzigzag(source);
    rec.version = (int64_t)version;
    rec.ts_ms = (int64_t)ts;
    rec.day = ds_day_from_ms(rec.ts_ms);
    rec.shard = (uint32_t)shard;
    rec.amount_units = ds_unzigzag(amount);
    rec.versions_seen = (uint32_t)seen;
    if (!ids_record_valid(&rec)) {
        return -DS_ECORRUPT;
    }
    *out = rec;
    *tombstone = (flags & IDS_FLAG_TOMBSTONE) != 0;
    return 0;
}

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
                           struct storage_order *out)
{
    bool tombstone = false; /* the keydir never points at one */
    uint64_t end = ids->committed_bytes + ids->pending_bytes;
    ASSERT(offset % 4 == 0);
    ASSERT(offset < end);
    if (offset >= ids->committed_bytes) {
        size_t at = (size_t)(offset - ids->committed_bytes);
        size_t avail = ids->pending_bytes - at;
        avail = avail < IDS_RECORD_BYTES_MAX ? avail : IDS_RECORD_BYTES_MAX;
        memcpy(dst, ids->pending + at, avail);
        return ids_record_decode(dst, avail, out, &tombstone);
    }
    if (ids->tail != NULL && offset >= ids->tail_start) {
        size_t avail = (size_t)(ids->committed_bytes - offset);
        avail = avail < IDS_RECORD_BYTES_MAX ? avail : IDS_RECORD_BYTES_MAX;
        tail_copy_out(ids, offset, dst, avail);
        return ids_record_decode(dst, avail, out, &tombstone);
    }
    uint64_t avail64 = ids->committed_bytes - offset;
    size_t want = avail64 < IDS_READ_FIRST_BYTES ? (size_t)avail64 : IDS_READ_FIRST_BYTES;
    ssize_t got = ids->io->ops->read(ids->io, ids->fd, dst, want, offset);
    if (got >= 0 && (size_t)got == want) {
        size_t length = record_announced(dst, want);
        if (length > want && length <= avail64) {
            size_t rest = length - want;
            ssize_t more = ids->io->ops->read(ids->io, ids->fd, dst + want, rest, offset + want);
            got = more < 0 ? more : (size_t)more == rest ? got + more : -DS_ECORRUPT;
            want = length;
        }
    }
    int rc = got < 0 ? (int)got : (size_t)got < want ? -DS_ECORRUPT : 0;
    rc = rc == 0 ? ids_record_decode(dst, (size_t)got, out, &tombstone) : rc;
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
                       struct storage_order *rec, uint64_t *index)
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
        int rc = ids_read_record(ids, slot_offset(slot), buf, rec);
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
 * in whole segments, up to IDS_SLOTS_MAX. */
static uint64_t keydir_next_slots(uint64_t slots_count)
{
    if (slots_count < IDS_SEGMENT_SLOTS) {
        return 2 * slots_count;
    }
    uint64_t add = slots_count / IDS_GROWTH_DIVISOR;
    add = (add + IDS_SEGMENT_SLOTS - 1) / IDS_SEGMENT_SLOTS * IDS_SEGMENT_SLOTS;
    uint64_t next = slots_count + add;
    return next < IDS_SLOTS_MAX ? next : IDS_SLOTS_MAX;
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

/* Grows the table (refusing past IDS_SLOTS_MAX), reading the old table a segment at a time
 * and handing each segment read to the new table, so the two are never held whole together:
 * the peak is the new table and a few segments, not old + new (768 MiB at 25.2M orders when
 * the table doubled). Every home is recomputed from the stored bits, without the log. */
static int keydir_grow(struct ids *ids)
{
    uint64_t old_slots = ids->slots_count;
    if (old_slots >= IDS_SLOTS_MAX) {
        ds_log_error("%s: more than %llu orders", ids->path, (unsigned long long)IDS_ORDERS_MAX);
        return -DS_ELIMIT;
    }
    struct regrow *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->slots_count = keydir_next_slots(old_slots);
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
    ASSERT(moved == ids->count);
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

/* Points the keydir at the record of id at offset, growing it for a new id first. */
static int keydir_set(struct ids *ids, const struct ds_id *id, uint64_t offset)
{
    uint64_t hash = id_hash(id);
    struct storage_order old;
    uint64_t index = 0;
    int rc = 0;
    if (ids->last.valid && ids->last.hash == hash && ds_id_equal(&ids->last.id, id)) {
        index = ids->last.index;
        rc = ids->last.found ? 0 : -ENOENT;
    } else {
        rc = keydir_find(ids, id, hash, ids->scratch, &old, &index);
    }
    ids->last.valid = false; /* the keydir changes below */
    if (rc == -ENOENT && (ids->count + 1) * 4 > 3 * ids->slots_count) {
        rc = keydir_grow(ids);
        rc = rc == 0 ? keydir_find(ids, id, hash, ids->scratch, &old, &index) : rc;
        ASSERT(rc != 0);
    }
    if (rc == -ENOENT) {
        ids->count++;
    } else if (rc < 0) {
        return rc;
    }
    *slot_at(ids, index) = slot_make(hash, offset);
    return 0;
}

/* Removes id's slot (a tombstone): later slots of its probe run move back (backward-shift
 * deletion), so that every probe still ends at the first empty slot. A missing id is
 * -DS_ECORRUPT (a tombstone always follows the order's record). */
static int keydir_remove(struct ids *ids, const struct ds_id *id)
{
    struct storage_order old;
    uint64_t i = 0;
    int rc = keydir_find(ids, id, id_hash(id), ids->scratch, &old, &i);
    if (rc != 0) {
        return rc == -ENOENT ? -DS_ECORRUPT : rc;
    }
    ids->last.valid = false;
    uint64_t n = ids->slots_count;
    for (uint64_t j = slot_next(i, n); *slot_at(ids, j) != 0; j = slot_next(j, n)) {
        uint64_t home = slot_home(*slot_at(ids, j), n);
        /* The slot stays when its home lies cyclically in (i, j]. */
        bool stays = i <= j ? i < home && home <= j : i < home || home <= j;
        if (!stays) {
            *slot_at(ids, i) = *slot_at(ids, j);
            i = j;
        }
    }
    *slot_at(ids, i) = 0;
    ids->count--;
    return 0;
}

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
            size_t length = record_announced(buf + used, in_chunk);
            if (length == 0 || align4(length) > left - used) {
                rc = -DS_ECORRUPT; /* a bad length, or one crossing the end */
            } else if (align4(length) > in_chunk) {
                break; /* the record continues in the next chunk */
            } else if ((rc = ids_record_decode(buf + used, length, &rec, &tombstone)) == 0) {
                rc = fn(ids, &rec, tombstone, at + used, at + used + align4(length), user);
                used += rc == 0 ? align4(length) : 0;
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
    /* Visible to the keydir's reads only once it is below committed_bytes. */
    ids->committed_bytes = next;
    return tombstone ? keydir_remove(ids, &rec->order_id) : keydir_set(ids, &rec->order_id, offset);
}

/* Replays the records in [ids->committed_bytes, to): the keydir points at each id's last. */
static int ids_replay(struct ids *ids, uint64_t to)
{
    return ids_walk(ids, ids->committed_bytes, to, replay_record, NULL);
}

/* Opens the log file: a writer creates it (syncing the directories so it stays) and cuts it to
 * committed_bytes; a reader of a log not created yet keeps fd -1. */
static int ids_open_file(struct ids *ids, const char *dir, uint64_t committed_bytes)
{
    char ids_dir[DS_PATH_MAX];
    int n = snprintf(ids->path, sizeof(ids->path), "%s/ids/log", dir);
    if (n < 0 || (size_t)n >= sizeof(ids->path)) {
        return -ENAMETOOLONG;
    }
    memcpy(ids_dir, ids->path, (size_t)n - 4);
    ids_dir[n - 4] = '\0';
    struct stat st;
    bool existed = stat(ids->path, &st) == 0;
    if (!existed && ids->read_only) {
        return committed_bytes == 0 ? 0 : -DS_ECORRUPT;
    }
    int rc = ids->read_only || existed ? 0 : ds_mkdir_p(ids_dir);
    int flags = ids->read_only ? O_RDONLY : O_RDWR | O_CREAT;
    int fd = rc == 0 ? ids->io->ops->open(ids->io, ids->path, flags | O_CLOEXEC, 0644) : rc;
    if (fd < 0) {
        return fd;
    }
    ids->fd = fd;
    if (!existed) {
        rc = ds_fsync_dir(ids_dir);
        rc = rc == 0 ? ds_fsync_dir(dir) : rc;
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

int ids_open(struct storage_io *io, const char *dir, uint64_t committed_bytes, bool read_only,
             struct ids **out)
{
    ASSERT(io != NULL);
    ASSERT(dir != NULL);
    if (committed_bytes % 4 != 0 || committed_bytes > IDS_LOG_BYTES_MAX) {
        return -DS_ECORRUPT;
    }
    struct ids *ids = calloc(1, sizeof(*ids));
    uint64_t *segment = segment_alloc(IDS_SLOTS_MIN);
    if (ids == NULL || segment == NULL) {
        free(ids);
        segment_free(segment, IDS_SLOTS_MIN);
        return -ENOMEM;
    }
    ids->io = io;
    ids->fd = -1;
    ids->read_only = read_only;
    ids->segments[0] = segment;
    ids->slots_count = IDS_SLOTS_MIN;
    int rc = ids_open_file(ids, dir, committed_bytes);
    rc = rc == 0 && committed_bytes > 0 ? ids_replay(ids, committed_bytes) : rc;
    if (rc < 0) {
        ds_log_error("%s/ids/log: cannot open: %s", dir, ds_strerror(rc));
        ids_close(ids);
        return rc;
    }
    ASSERT(ids->committed_bytes == committed_bytes);
    if (!read_only) {
        ids->tail = malloc(IDS_TAIL_BYTES); /* optional: NULL reads the file */
        ids->tail_start = committed_bytes;
    }
    *out = ids;
    return 0;
}

void ids_close(struct ids *ids)
{
    if (ids == NULL) {
        return;
    }
    if (ids->fd >= 0) {
        ids->io->ops->close(ids->io, ids->fd);
    }
    free(ids->pending);
    free(ids->tail);
    table_free(ids->segments, ids->slots_count);
    free(ids);
}

/* ---- lookups ------------------------------------------------------------------------------- */

void ids_prefetch(const struct ids *ids, const struct ds_id *id)
{
    if (id_valid(id)) {
        __builtin_prefetch(slot_at(ids, slot_home(id_hash(id), ids->slots_count)));
    }
}

int ids_get(struct ids *ids, const struct ds_id *id, struct storage_order *out, void *scratch,
            size_t scratch_capacity)
{
    ASSERT(scratch_capacity >= IDS_RECORD_BYTES_MAX);
    ASSERT(id != NULL);
    if (!id_valid(id)) {
        return -ENOENT;
    }
    struct storage_order rec;
    uint64_t index = 0;
    uint64_t hash = id_hash(id);
    int rc = keydir_find(ids, id, hash, scratch, &rec, &index);
    if (rc == 0) {
        *out = rec;
    }
    if (rc == 0 || rc == -ENOENT) {
        ids->last.valid = true;
        ids->last.found = rc == 0;
        ids->last.hash = hash;
        ids->last.index = index;
        ids->last.id = *id;
    }
    return rc;
}

uint64_t ids_count(const struct ids *ids)
{
    return ids->count;
}

uint64_t ids_keydir_bytes(const struct ids *ids)
{
    return ids->slots_count * sizeof(uint64_t);
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

int ids_put(struct ids *ids, const struct storage_order *rec)
{
    ASSERT(!ids->queued);
    if (ids->read_only) {
        return -EROFS;
    }
    if (!ids_record_valid(rec)) {
        return -DS_EUSAGE;
    }
    size_t bound = record_bound(rec);
    uint64_t offset = ids->committed_bytes + ids->pending_bytes;
    if (offset + bound > IDS_LOG_BYTES_MAX) {
        return -DS_ELIMIT;
    }
    int rc = pending_reserve(ids, bound);
    if (rc < 0) {
        return rc;
    }
    size_t padded = ids_record_encode(rec, false, ids->pending + ids->pending_bytes);
    ASSERT(padded <= bound);
    ids->pending_bytes += padded;
    rc = keydir_set(ids, &rec->order_id, offset);
    if (rc < 0) {
        ids->pending_bytes -= padded; /* the keydir is unchanged on failure */
    }
    return rc;
}

int ids_remove(struct ids *ids, const struct storage_order *current)
{
    ASSERT(!ids->queued);
    if (ids->read_only) {
        return -EROFS;
    }
    if (!ids_record_valid(current)) {
        return -DS_EUSAGE;
    }
    size_t bound = record_bound(current);
    int rc = pending_reserve(ids, bound);
    if (rc < 0) {
        return rc;
    }
    size_t padded = ids_record_encode(current, true, ids->pending + ids->pending_bytes);
    ASSERT(padded <= bound);
    rc = keydir_remove(ids, &current->order_id);
    if (rc == 0) {
        ids->pending_bytes += padded;
    }
    return rc;
}

uint64_t ids_pending_bytes(const struct ids *ids)
{
    return ids->pending_bytes;
}

int ids_queue(struct ids *ids, uint64_t *committed_bytes)
{
    ASSERT(!ids->read_only);
    ASSERT(!ids->queued);
    ASSERT(ids->fd >= 0);
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
    *committed_bytes = ids->committed_bytes + ids->pending_bytes;
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
    ASSERT(committed_bytes == ids->committed_bytes + ids->pending_bytes);
    tail_append(ids);
    ids->committed_bytes = committed_bytes;
    ids->pending_bytes = 0;
    ids->queued = false;
}

uint64_t ids_committed_bytes(const struct ids *ids)
{
    return ids->committed_bytes;
}

int ids_refresh(struct ids *ids, uint64_t committed_bytes)
{
    ASSERT(ids->read_only);
    if (committed_bytes < ids->committed_bytes) {
        return -ERANGE;
    }
    if (committed_bytes == ids->committed_bytes) {
        return 0;
    }
    if (committed_bytes % 4 != 0 || committed_bytes > IDS_LOG_BYTES_MAX) {
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
    int rc = ids->io->ops->size(ids->io, ids->fd, &size);
    if (rc == 0 && size < committed_bytes) {
        ds_log_error("%s: %llu bytes, below the committed %llu", ids->path,
                     (unsigned long long)size, (unsigned long long)committed_bytes);
        rc = -DS_ECORRUPT;
    }
    return rc == 0 ? ids_replay(ids, committed_bytes) : rc;
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

static int visit_record(struct ids *ids, const struct storage_order *rec, bool tombstone,
                        uint64_t offset, uint64_t next, void *user)
{
    (void)next;
    (void)tombstone; /* the keydir never points at one */
    struct visit *v = user;
    return keydir_points_at(ids, id_hash(&rec->order_id), offset) ? v->fn(rec, v->user) : 0;
}

int ids_visit(struct ids *ids, int (*fn)(const struct storage_order *rec, void *user), void *user)
{
    struct visit v = {.fn = fn, .user = user};
    return ids->committed_bytes == 0 ? 0 : ids_walk(ids, 0, ids->committed_bytes, visit_record, &v);
}
