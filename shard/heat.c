/*
 * The heat tracker (shard.h, "heat"): per-second write counts by partition key, day and source,
 * decayed heavy hitters by customer, capacity accounting, and the adaptive growth rule.
 *
 * Counts: each key owns a struct heat_counts, a ring of HEAT_RING_SLOTS per-second buckets
 * that covers the seconds newest_second - 63 .. newest_second, where newest_second is the
 * latest second counted into it. Clearing is lazy: when an event of a newer second arrives,
 * the buckets the ring moves past are zeroed (at most HEAT_RING_SLOTS of them), so a key idle
 * for a minute costs nothing until it is written again, and a bucket of a second the ring no
 * longer covers reads as 0. Partition keys and days live in fixed open-addressing tables
 * (linear probing, Fibonacci hashing, twice as many slots as entries); sources are an array
 * indexed by Kafka partition. Customers are Space-Saving counters (Metwally, Agrawal and
 * El Abbadi, 2005) in a hash table, each counter in a queue or a 4-ary min-heap (see "the
 * least counter"); every counter and the total are multiplied by exp(-1/tau) per completed
 * second, which leaves both orders as they were. An event late by k seconds adds the weight
 * exp(-k/tau) it would still have had, had it arrived on time, so the customer rates do not depend
 * on arrival order inside the window.
 *
 * Late seconds: an event of a complete second inside the window also sets that second's bit in
 * a 64-bit mask (one OR, no branch), which the heat history's writer, on this same thread,
 * takes at each record to re-take those seconds' columns (shard_heat_late_take).
 *
 * Invariants: the current second never moves back; every bucketed second is in
 * current - SHARD_HEAT_WINDOW_S .. current, which the ring covers (64 > 61 seconds), so a late
 * event inside the window always lands in its own second's bucket; a key's newest_second is at
 * most the current second; every live table entry has exactly one slot and the table has an
 * empty slot (load factor <= 1/2), so probes end; every customer counter in use is in the
 * queue (heap_index HEAT_IN_QUEUE) or the heap, once; the queue's keys never decrease from
 * front to back and each is at most its counter's count; the heap's parent count is <= its
 * children's, and heap[heap_index[counter]] names that counter; the counts and the tables are
 * allocated once, in shard_heat_create, and never after.
 *
 * Table full: the first time in a current second that a new key finds no room, the table is
 * rebuilt without the keys idle for a whole window (no bucketed event in current - 60 ..
 * current); if there is still no room the event counts in untracked_events (partitions) or in
 * no day row (days), never in nothing: the totals always have it. A key dropped and seen again
 * starts from zero; the capacity totals are kept in the tracker, so they survive the drop.
 *
 * Rejected: one exponentially decayed rate per key (8 bytes instead of a 256-byte ring). The
 * growth rule and the capacity accounting need exact counts of particular seconds, including
 * late events added to the second they belong to, which no single decayed number can give.
 *
 * Why one file of about 1,200 lines: it is one structure, the tracker, whose per-event path
 * (shard_heat_observe) runs the table probe, the ring advance and the customer counter update as
 * static helpers the compiler inlines, and whose snapshots and growth rule read the same
 * private structs. A split (say, snapshots apart) would need those structs in a private header
 * that both halves include, trading a few lines over the guide's size for a second place to
 * look for every layout change.
 * Rejected for customers: an exact count per customer (millions of ids; memory is fixed at
 * create) and a Count-Min sketch (it over-estimates any key but cannot name the heavy ones, so
 * it would need a candidate heap anyway). Rejected for the decay: a lazy global scale factor
 * instead of the multiplying pass. It makes a clock step O(1), but needs renormalising before
 * it overflows, and the pass costs about a microsecond for 1024 counters, once per second of
 * producer time.
 *
 * Customers' cost: on the busy-day stream about 38% of events are customers no counter holds,
 * each of which takes the least counter; in a plain heap that is a sift from the root to a leaf
 * per such event. So the least counter usually comes from the front of a queue and goes to its
 * back (no sift), an event of a counter in the queue is one addition, what the per-event path
 * reads is kept apart from the ids, an integer id is confirmed by its 64-bit hash alone
 * (ds_mix64 is a bijection), the heap is 4-ary (5 levels for 1,024 counters), and sifts compare
 * counts as integers. Figures: docs/PERFORMANCE.md "Heat and adaptive sharding" and bench_heat.
 * Rejected: aggregating a consumer batch's customers in a scratch table and updating each counter
 * once per batch with the summed weight (weighted Space-Saving keeps the bounds, and partitions,
 * days and sources stay exact when counted in order): the extra probe per event cost more than the
 * merged updates saved, 70 against 60 ns/event on the busy-day stream, because the customers no
 * counter holds, which dominate, are distinct within a batch.
 */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"

/* Per-second buckets per key: a power of two above the window plus the current second. */
#define HEAT_RING_SLOTS 64u
#define HEAT_RING_MASK (HEAT_RING_SLOTS - 1u)
/* Table slots are twice the entries, so a probe meets an empty slot within a few steps. */
#define HEAT_PARTITION_SLOT_BITS 14u
#define HEAT_DAY_SLOT_BITS 11u
#define HEAT_CUSTOMER_SLOT_BITS 11u
/* A partition key packs (day, shard) into 32 bits, day above shard, so that ascending keys
 * order by day and then by shard. */
#define HEAT_SHARD_BITS 10u
/* The latest producer second: the end of the valid event timestamp range. */
#define HEAT_SECOND_MAX (DS_TS_MS_MAX / 1000)
/* A key's newest_second before its first bucketed event. */
#define HEAT_SECOND_NONE (-1)
/* "No entry" from the table lookups. */
#define HEAT_INDEX_NONE UINT32_MAX
/* The customers' heap: children per node, entries (the counters rounded up to whole groups of
 * children past the root), and the count of an entry not in use. */
#define HEAT_HEAP_ARITY 4u
#define HEAT_HEAP_ENTRIES (SHARD_HEAT_CUSTOMERS_MAX + HEAT_HEAP_ARITY)
#define HEAT_HEAP_ABSENT DBL_MAX
/* The customers' queue holds every counter at most, in a ring indexed by a mask; heap_index of
 * a counter in the queue. */
#define HEAT_QUEUE_SLOTS SHARD_HEAT_CUSTOMERS_MAX
#define HEAT_QUEUE_MASK (HEAT_QUEUE_SLOTS - 1u)
#define HEAT_IN_QUEUE UINT16_MAX
/* exp(-1 / SHARD_HEAT_CUSTOMER_TAU_S) to 17 significant digits. A literal, because ds_shard
 * links no libm and clang does not fold exp() of a constant into a static initialiser. */
#define HEAT_CUSTOMER_DECAY 0.90483741803595952
/* A decayed customer weight below this is zero. Far above the denormal range (about 1e-308),
 * whose arithmetic is a hundred times slower, and far below any rate worth reporting. */
#define HEAT_CUSTOMER_WEIGHT_MIN 1e-30

_Static_assert((HEAT_RING_SLOTS & HEAT_RING_MASK) == 0, "the ring is indexed by a mask");
_Static_assert(HEAT_RING_SLOTS >= SHARD_HEAT_WINDOW_S + 1u, "the ring holds window and now");
_Static_assert(HEAT_RING_SLOTS == SHARD_HEAT_LATE_BITS, "a late second's bit is its ring slot");
_Static_assert((1u << HEAT_PARTITION_SLOT_BITS) >= 2u * SHARD_HEAT_PARTITIONS_MAX, "load <= 1/2");
_Static_assert((1u << HEAT_DAY_SLOT_BITS) >= 2u * SHARD_HEAT_DAYS_MAX, "load <= 1/2");
_Static_assert((1u << HEAT_CUSTOMER_SLOT_BITS) >= 2u * SHARD_HEAT_CUSTOMERS_MAX, "load <= 1/2");
_Static_assert(SHARD_COUNT_MAX <= (1u << HEAT_SHARD_BITS), "a shard fits its key bits");
_Static_assert(DS_DAY_MAX < (1 << (32u - HEAT_SHARD_BITS)), "a day fits its key bits");
_Static_assert(SHARD_HEAT_CUSTOMER_TAU_S == 10u, "HEAT_CUSTOMER_DECAY is exp(-1/10): recompute");
_Static_assert(SHARD_CAPACITY_MAX < UINT32_MAX, "a saturated bucket is over any capacity");
_Static_assert(SHARD_HEAT_CUSTOMERS_MAX < UINT16_MAX, "a heap position and an entry fit 16 bits");
_Static_assert((HEAT_QUEUE_SLOTS & HEAT_QUEUE_MASK) == 0, "the queue is indexed by a mask");

/* Counts of one key. buckets[s % 64] holds second s for s in newest_second - 63 ..
 * newest_second; a bucket saturates at UINT32_MAX (4 billion events in one second). */
struct heat_counts {
    int64_t newest_second;
    uint64_t events; /* so far, including events older than the window */
    uint64_t rate_peak;
    uint64_t over_capacity_seconds; /* partition keys only */
    uint64_t would_throttle_events; /* partition keys only */
    uint32_t buckets[HEAT_RING_SLOTS];
};

struct heat_slot {
    uint32_t key;
    uint32_t entry; /* entry index + 1; 0 marks an empty slot */
};

/* A fixed table of keys, each with its counts. Entries not live are on the free stack. */
struct heat_table {
    uint32_t entries_max;
    uint32_t slot_bits;
    uint32_t free_count;
    int64_t sweep_second; /* the current second of the last sweep: at most one per second */
    struct heat_slot *slots;
    uint32_t *keys;
    bool *live;
    uint32_t *free_stack; /* free_count entry indexes */
    struct heat_counts *counts;
};

struct heat_heap_entry {
    double count; /* the counter's count (counts[counter]) */
    uint32_t counter;
};

/* What an event reads of a counter, in 32 bytes (two counters to a cache line; the tracker's
 * tables are mostly out of the caches when the node's consumer comes back to them after
 * librdkafka and the decoder, so an event should touch few lines). */
struct heat_counter {
    /* The whole 64-bit hash of the counter's id. ds_mix64 is a bijection, so for an integer id
     * the hash is the id: a probe confirms an integer id here, without reading ids[]. */
    uint64_t hash;
    double count;        /* decayed weight: at least the customer's true decayed weight */
    double error;        /* count - error is at most the true decayed weight */
    uint32_t heap_index; /* its heap position, or HEAT_IN_QUEUE */
};
_Static_assert(sizeof(struct heat_counter) == 32, "two counters to a cache line");

/* A counter in the queue, with its count when it was pushed: at most its count now. */
struct heat_queue_entry {
    double key;
    uint32_t counter;
};

/* tag = the hash's high 32 bits: its top HEAT_CUSTOMER_SLOT_BITS are the home slot, so a probe
 * and a backward shift read only the slots, not the counters. */
struct heat_customer_slot {
    uint32_t tag;
    uint16_t entry;     /* counter index + 1; 0 marks an empty slot */
    uint16_t is_string; /* the kind of the counter's id: 5 and "5" are two customers */
};

/* A counter is an index into counters[] and ids[]. Each counter in use is in exactly one of
 * two orders (see "the least counter" below): the queue, by key, or the heap, by count. What a
 * probe or an event reads is kept apart from the ids (72 bytes each, written when a counter
 * changes hands and read by snapshots and string compares). */
struct heat_customers {
    uint32_t count;       /* counters in use: 0 .. count - 1 */
    uint32_t heap_count;  /* heap[0 .. heap_count - 1] */
    uint32_t queue_head;  /* the front: queue[queue_head] */
    uint32_t queue_count; /* queue[queue_head .. queue_head + queue_count - 1], modulo */
    double total;         /* the decayed weight of every customer event */
    struct heat_customer_slot slots[1u << HEAT_CUSTOMER_SLOT_BITS];
    /* least count first; HEAT_HEAP_ABSENT from heap_count on, through the last group of four */
    struct heat_heap_entry heap[HEAT_HEAP_ENTRIES];
    /* least key first; keys never decrease from front to back */
    struct heat_queue_entry queue[HEAT_QUEUE_SLOTS];
    struct heat_counter counters[SHARD_HEAT_CUSTOMERS_MAX];
    /* Meaningful bytes only: is_string, len, value, text[0 .. len - 1]; the rest is stale. */
    struct ds_id ids[SHARD_HEAT_CUSTOMERS_MAX];
};

struct shard_heat {
    uint32_t capacity_eps;
    int64_t second;          /* the current second */
    int64_t reported_second; /* the current second when shard_heat_advance last returned */
    /* Bit s % 64 set: an event of second s arrived after s completed (shard_heat_late_take). */
    uint64_t late_seconds;
    uint64_t untracked_events;
    uint64_t over_capacity_seconds;
    uint64_t would_throttle_events;
    double decay_pow[HEAT_RING_SLOTS + 1]; /* HEAT_CUSTOMER_DECAY^k */
    struct heat_counts total;
    struct heat_table partitions;
    struct heat_table days;
    struct heat_customers customers;
    struct heat_counts sources[SHARD_HEAT_SOURCES_MAX];
    /* The tables' storage. */
    struct heat_slot partition_slots[1u << HEAT_PARTITION_SLOT_BITS];
    uint32_t partition_keys[SHARD_HEAT_PARTITIONS_MAX];
    bool partition_live[SHARD_HEAT_PARTITIONS_MAX];
    uint32_t partition_free[SHARD_HEAT_PARTITIONS_MAX];
    struct heat_counts partition_counts[SHARD_HEAT_PARTITIONS_MAX];
    struct heat_slot day_slots[1u << HEAT_DAY_SLOT_BITS];
    uint32_t day_keys[SHARD_HEAT_DAYS_MAX];
    bool day_live[SHARD_HEAT_DAYS_MAX];
    uint32_t day_free[SHARD_HEAT_DAYS_MAX];
    struct heat_counts day_counts[SHARD_HEAT_DAYS_MAX];
};

/* ---- per-key counts ------------------------------------------------------------------------ */

static void heat_counts_reset(struct heat_counts *c)
{
    memset(c, 0, sizeof(*c));
    c->newest_second = HEAT_SECOND_NONE;
}

/* Counts one event; in_window puts it in the bucket of `second` as well. Returns the bucket's
 * count after the event (0 when not bucketed). */
static uint32_t heat_counts_add(struct heat_counts *c, int64_t second, bool in_window)
{
    c->events++;
    if (!in_window) {
        return 0;
    }
    if (second > c->newest_second) {
        /* Zero the buckets of the seconds the ring moves onto: all of them after a long gap. */
        if (second - c->newest_second >= (int64_t)HEAT_RING_SLOTS) {
            memset(c->buckets, 0, sizeof(c->buckets));
        } else {
            for (int64_t s = c->newest_second + 1; s <= second; s++) {
                c->buckets[(uint64_t)s & HEAT_RING_MASK] = 0;
            }
        }
        c->newest_second = second;
    }
    /* The caller's window check keeps every bucketed second inside the ring. */
    DEBUG_ASSERT(second > c->newest_second - (int64_t)HEAT_RING_SLOTS);
    uint32_t *bucket = &c->buckets[(uint64_t)second & HEAT_RING_MASK];
    if (DS_LIKELY(*bucket != UINT32_MAX)) {
        (*bucket)++;
    }
    if (*bucket > c->rate_peak) {
        c->rate_peak = *bucket;
    }
    return *bucket;
}

/* Events of one second, 0 for a second the ring does not cover. */
static uint64_t heat_counts_at(const struct heat_counts *c, int64_t second)
{
    if (second < 0 || second > c->newest_second ||
        second <= c->newest_second - (int64_t)HEAT_RING_SLOTS) {
        return 0;
    }
    return c->buckets[(uint64_t)second & HEAT_RING_MASK];
}

/* Events of the `seconds` complete seconds before the current second `now`. */
static uint64_t heat_counts_recent(const struct heat_counts *c, int64_t now, uint32_t seconds)
{
    ASSERT(seconds <= SHARD_HEAT_WINDOW_S);
    uint64_t sum = 0;
    for (int64_t s = now - (int64_t)seconds; s < now; s++) {
        sum += heat_counts_at(c, s);
    }
    return sum;
}

/* The seconds among the last `seconds` complete ones with at least one event. */
static uint32_t heat_counts_active(const struct heat_counts *c, int64_t now, uint32_t seconds)
{
    ASSERT(seconds <= SHARD_HEAT_WINDOW_S);
    uint32_t active = 0;
    for (int64_t s = now - (int64_t)seconds; s < now; s++) {
        active += heat_counts_at(c, s) > 0 ? 1u : 0u;
    }
    return active;
}

/* ---- the key tables ------------------------------------------------------------------------ */

static void heat_table_init(struct heat_table *t, uint32_t entries_max, uint32_t slot_bits,
                            struct heat_slot *slots, uint32_t *keys, bool *live,
                            uint32_t *free_stack, struct heat_counts *counts)
{
    ASSERT(entries_max >= 1);
    ASSERT((1u << slot_bits) >= 2u * entries_max);
    *t = (struct heat_table){.entries_max = entries_max,
                             .slot_bits = slot_bits,
                             .sweep_second = HEAT_SECOND_NONE,
                             .slots = slots,
                             .keys = keys,
                             .live = live,
                             .free_stack = free_stack,
                             .counts = counts};
    /* Pushed from the top so that entries fill from index 0. */
    for (uint32_t i = 0; i < entries_max; i++) {
        t->free_stack[t->free_count++] = entries_max - 1u - i;
    }
}

/* The slot holding key, or the empty slot where it would go. */
static uint32_t heat_table_probe(const struct heat_table *t, uint32_t key)
{
    uint32_t mask = (1u << t->slot_bits) - 1u;
    uint32_t slot = (uint32_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> (64u - t->slot_bits));
    for (uint32_t probes = 0; probes <= mask; probes++) {
        const struct heat_slot *s = &t->slots[slot];
        if (s->entry == 0 || s->key == key) {
            return slot;
        }
        slot = (slot + 1u) & mask;
    }
    /* The load factor bound guarantees an empty slot. */
    ASSERT(false);
    return 0;
}

static uint32_t heat_table_find(const struct heat_table *t, uint32_t key)
{
    const struct heat_slot *s = &t->slots[heat_table_probe(t, key)];
    return s->entry == 0 ? HEAT_INDEX_NONE : s->entry - 1u;
}

/* Rebuilds the slots without the entries idle for a whole window before `now`. */
static void heat_table_sweep(struct heat_table *t, int64_t now)
{
    ASSERT(t->sweep_second < now);
    t->sweep_second = now;
    memset(t->slots, 0, sizeof(t->slots[0]) << t->slot_bits);
    for (uint32_t i = 0; i < t->entries_max; i++) {
        if (!t->live[i]) {
            continue;
        }
        if (t->counts[i].newest_second < now - (int64_t)SHARD_HEAT_WINDOW_S) {
            t->live[i] = false;
            t->free_stack[t->free_count++] = i;
            continue;
        }
        uint32_t slot = heat_table_probe(t, t->keys[i]);
        ASSERT(t->slots[slot].entry == 0);
        t->slots[slot] = (struct heat_slot){.key = t->keys[i], .entry = i + 1u};
    }
    ASSERT(t->free_count <= t->entries_max);
}

/* The entry of key, added if new; HEAT_INDEX_NONE when the table has no room for it. */
static uint32_t heat_table_add(struct heat_table *t, uint32_t key, int64_t now)
{
    uint32_t slot = heat_table_probe(t, key);
    if (DS_LIKELY(t->slots[slot].entry != 0)) {
        return t->slots[slot].entry - 1u;
    }
    if (t->free_count == 0) {
        if (t->sweep_second == now) {
            return HEAT_INDEX_NONE;
        }
        heat_table_sweep(t, now);
        if (t->free_count == 0) {
            return HEAT_INDEX_NONE;
        }
        slot = heat_table_probe(t, key);
    }
    uint32_t index = t->free_stack[--t->free_count];
    ASSERT(index < t->entries_max);
    ASSERT(!t->live[index]);
    t->live[index] = true;
    t->keys[index] = key;
    heat_counts_reset(&t->counts[index]);
    t->slots[slot] = (struct heat_slot){.key = key, .entry = index + 1u};
    return index;
}

static uint32_t heat_partition_key(int32_t day, uint32_t shard)
{
    return ((uint32_t)day << HEAT_SHARD_BITS) | shard;
}

/* ---- customers: Space-Saving with decay ---------------------------------------------------- */

static uint64_t heat_id_hash(const struct ds_id *id)
{
    if (id->is_string) {
        ASSERT(id->len >= 1);
        ASSERT(id->len <= DS_ID_BYTES_MAX);
        return ds_mix64(shard_fnv1a64(id->text, id->len));
    }
    return ds_mix64((uint64_t)id->value);
}

/* A counter's id from an event's: the meaningful bytes only (no 72-byte clear per change of
 * hands; heat_id_copy clears what a snapshot hands out). */
static void heat_id_set(struct ds_id *dst, const struct ds_id *src)
{
    dst->is_string = src->is_string;
    dst->len = src->is_string ? src->len : 0;
    dst->value = src->is_string ? 0 : src->value;
    if (src->is_string) {
        memcpy(dst->text, src->text, src->len);
    }
}

/* Cleared first, so a snapshot never carries bytes left past the id's length. */
static void heat_id_copy(struct ds_id *dst, const struct ds_id *src)
{
    memset(dst, 0, sizeof(*dst));
    heat_id_set(dst, src);
}

static uint32_t heat_customer_tag(uint64_t hash)
{
    return (uint32_t)(hash >> 32);
}

static uint32_t heat_customer_home(uint32_t tag)
{
    return tag >> (32u - HEAT_CUSTOMER_SLOT_BITS);
}

/* Whether the counter of slot s holds id (whose hash is hash). */
static bool heat_customer_holds(const struct heat_customers *c, const struct heat_customer_slot *s,
                                const struct ds_id *id, uint64_t hash)
{
    uint32_t index = s->entry - 1u;
    if (s->tag != heat_customer_tag(hash) || s->is_string != id->is_string ||
        c->counters[index].hash != hash) {
        return false;
    }
    return !id->is_string || ds_id_equal(&c->ids[index], id);
}

/* The slot holding id, or the empty slot where it would go. */
static uint32_t heat_customer_probe(const struct heat_customers *c, const struct ds_id *id,
                                    uint64_t hash)
{
    const uint32_t mask = (1u << HEAT_CUSTOMER_SLOT_BITS) - 1u;
    uint32_t slot = heat_customer_home(heat_customer_tag(hash));
    for (uint32_t probes = 0; probes <= mask; probes++) {
        const struct heat_customer_slot *s = &c->slots[slot];
        if (s->entry == 0 || heat_customer_holds(c, s, id, hash)) {
            return slot;
        }
        slot = (slot + 1u) & mask;
    }
    /* The load factor bound guarantees an empty slot. */
    ASSERT(false);
    return 0;
}

/* The slot of a counter in use: its run from its home holds it. */
static uint32_t heat_customer_slot_of(const struct heat_customers *c, uint32_t index)
{
    const uint32_t mask = (1u << HEAT_CUSTOMER_SLOT_BITS) - 1u;
    uint32_t slot = heat_customer_home(heat_customer_tag(c->counters[index].hash));
    for (uint32_t probes = 0; probes <= mask; probes++) {
        ASSERT(c->slots[slot].entry != 0);
        if (c->slots[slot].entry == index + 1u) {
            return slot;
        }
        slot = (slot + 1u) & mask;
    }
    ASSERT(false);
    return 0;
}

/* Empties a slot by backward shifting (no tombstones): each following entry of the run moves
 * into the hole unless its home lies cyclically in (hole, its slot]. */
static void heat_customer_slot_remove(struct heat_customers *c, uint32_t slot)
{
    const uint32_t mask = (1u << HEAT_CUSTOMER_SLOT_BITS) - 1u;
    ASSERT(c->slots[slot].entry != 0);
    uint32_t hole = slot;
    for (uint32_t i = (slot + 1u) & mask; c->slots[i].entry != 0; i = (i + 1u) & mask) {
        uint32_t home = heat_customer_home(c->slots[i].tag);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            c->slots[hole] = c->slots[i];
            hole = i;
        }
    }
    c->slots[hole] = (struct heat_customer_slot){0};
}

/* The heap is 4-ary: a node's children are one group of four entries, so a level of a sift
 * reads one group and the path from the root to a leaf is 5 levels for 1,024 counters, not 10.
 * Entries from count to the end of the array hold HEAT_HEAP_ABSENT, which no count reaches, so
 * the least of a group needs no bounds check. */
static uint32_t heat_heap_parent(uint32_t position)
{
    return (position - 1u) / HEAT_HEAP_ARITY;
}

static uint32_t heat_heap_first_child(uint32_t position)
{
    return HEAT_HEAP_ARITY * position + 1u;
}

/* A count's bits read as an integer: counts are never negative, and a non-negative double
 * orders like its bits, so the sifts compare in integer registers (one cycle, against several
 * for a floating-point compare, on the chain of dependent levels of a sift). */
static uint64_t heat_count_order(double count)
{
    uint64_t bits = 0;
    memcpy(&bits, &count, sizeof(bits));
    return bits;
}

/* The least entry of the group of four at first (ties: the first), without branches: on a
 * Zipf tail the counts of a group are in no predictable order. */
static uint32_t heat_heap_least_of_group(const struct heat_customers *c, uint32_t first)
{
    const struct heat_heap_entry *g = &c->heap[first];
    uint64_t count[HEAT_HEAP_ARITY];
    for (uint32_t i = 0; i < HEAT_HEAP_ARITY; i++) {
        count[i] = heat_count_order(g[i].count);
    }
    uint32_t a = (uint32_t)(count[1] < count[0]);
    uint32_t b = 2u + (uint32_t)(count[3] < count[2]);
    return first + (count[b] < count[a] ? b : a);
}

static void heat_heap_place(struct heat_customers *c, uint32_t position,
                            struct heat_heap_entry entry)
{
    c->heap[position] = entry;
    c->counters[entry.counter].heap_index = position;
}

static void heat_heap_sift_up(struct heat_customers *c, uint32_t position)
{
    ASSERT(position < c->heap_count);
    const struct heat_heap_entry moving = c->heap[position];
    while (position > 0) {
        uint32_t parent = heat_heap_parent(position);
        if (heat_count_order(c->heap[parent].count) <= heat_count_order(moving.count)) {
            break;
        }
        heat_heap_place(c, position, c->heap[parent]);
        position = parent;
    }
    heat_heap_place(c, position, moving);
}

/* Moves the entry at position down to its place after its count grew: children that are less
 * move up into the hole it leaves, and each moved counter's heap_index follows. */
static void heat_heap_sift_down(struct heat_customers *c, uint32_t position)
{
    ASSERT(position < c->heap_count);
    const struct heat_heap_entry moving = c->heap[position];
    for (;;) {
        uint32_t first = heat_heap_first_child(position);
        if (first >= c->heap_count) {
            break;
        }
        uint32_t least = heat_heap_least_of_group(c, first);
        if (heat_count_order(moving.count) <= heat_count_order(c->heap[least].count)) {
            break;
        }
        heat_heap_place(c, position, c->heap[least]);
        position = least;
    }
    heat_heap_place(c, position, moving);
}

/* The root was replaced by the heap's last entry, which belongs near the leaves: bottom-up, as
 * in Wegener's heapsort. The hole goes down the path of least children to a leaf, one
 * comparison per level and no test against the moving entry, then the entry climbs back to its
 * place, usually in a step or two. */
static void heat_heap_sift_root_down(struct heat_customers *c)
{
    ASSERT(c->heap_count >= 1);
    const struct heat_heap_entry moving = c->heap[0];
    uint32_t position = 0;
    for (;;) {
        uint32_t first = heat_heap_first_child(position);
        if (first >= c->heap_count) {
            break;
        }
        uint32_t least = heat_heap_least_of_group(c, first);
        heat_heap_place(c, position, c->heap[least]);
        position = least;
    }
    heat_heap_place(c, position, moving);
    heat_heap_sift_up(c, position);
}

/* The first empty slot of the run from tag's home: where an id known to be absent goes. */
static uint32_t heat_customer_probe_empty(const struct heat_customers *c, uint32_t tag)
{
    const uint32_t mask = (1u << HEAT_CUSTOMER_SLOT_BITS) - 1u;
    uint32_t slot = heat_customer_home(tag);
    for (uint32_t probes = 0; probes <= mask; probes++) {
        if (c->slots[slot].entry == 0) {
            return slot;
        }
        slot = (slot + 1u) & mask;
    }
    /* The load factor bound guarantees an empty slot. */
    ASSERT(false);
    return 0;
}

/* Counter index takes id: its slot, hash and id. */
static void heat_customer_claim(struct heat_customers *c, uint32_t index, const struct ds_id *id,
                                uint64_t hash)
{
    ASSERT(index < SHARD_HEAT_CUSTOMERS_MAX);
    uint32_t slot = heat_customer_probe_empty(c, heat_customer_tag(hash));
    c->slots[slot] = (struct heat_customer_slot){.tag = heat_customer_tag(hash),
                                                 .entry = (uint16_t)(index + 1u),
                                                 .is_string = id->is_string};
    c->counters[index].hash = hash;
    heat_id_set(&c->ids[index], id);
}

/* ---- customers: the least counter ------------------------------------------------------ */

/* Space-Saving takes the least counter for every customer it does not hold: on the busy-day
 * stream, 38% of events. A heap pays a sift from the root to a leaf each time, since the taken
 * counter's new count (the least plus the event) usually outweighs the whole tail. So counters
 * live in two orders. The queue holds counters by a key that is at most their count, keys never
 * decreasing from front to back: a counter taken as the least gets the least count plus the
 * event's weight, which is at least every key when the weight is 1 (keys are counts from when
 * they were pushed, the least count never decreases but by the decay, which scales every
 * weight alike), so it goes to the back, and taking the least costs no sift at all. An event of
 * a counter in the queue only adds to its count: its key goes stale. Before the front is
 * taken, stale fronts move to the heap, an exact min-heap by count for the counters that had
 * events since they were pushed (the heavy ones) and for a count below the back's key (a late
 * event weighs less than 1). The least counter is then the queue's front (fresh: its key is its
 * count, at most every key behind it and so every count there) or the heap's root, whichever
 * is less. Any least counter will do: Space-Saving's bounds hold for every order of ties.
 * Rejected: settling a stale front at the back of the queue. One heavy counter there holds a
 * key above every new count, which then all go to the heap: measured slower than the heap
 * alone (60-67 against 55 ns/event on the busy-day stream). */

static struct heat_queue_entry *heat_queue_back(struct heat_customers *c)
{
    ASSERT(c->queue_count >= 1);
    return &c->queue[(c->queue_head + c->queue_count - 1u) & HEAT_QUEUE_MASK];
}

static void heat_queue_push(struct heat_customers *c, uint32_t counter)
{
    ASSERT(c->queue_count < HEAT_QUEUE_SLOTS);
    c->queue[(c->queue_head + c->queue_count) & HEAT_QUEUE_MASK] =
        (struct heat_queue_entry){.key = c->counters[counter].count, .counter = counter};
    c->queue_count++;
    c->counters[counter].heap_index = HEAT_IN_QUEUE;
}

static uint32_t heat_queue_pop(struct heat_customers *c)
{
    ASSERT(c->queue_count >= 1);
    uint32_t counter = c->queue[c->queue_head].counter;
    c->queue_head = (c->queue_head + 1u) & HEAT_QUEUE_MASK;
    c->queue_count--;
    return counter;
}

static void heat_heap_insert(struct heat_customers *c, uint32_t counter)
{
    ASSERT(c->heap_count < SHARD_HEAT_CUSTOMERS_MAX);
    uint32_t position = c->heap_count++;
    heat_heap_place(
        c, position,
        (struct heat_heap_entry){.count = c->counters[counter].count, .counter = counter});
    heat_heap_sift_up(c, position);
}

/* Takes the root out of the heap and returns its counter. */
static uint32_t heat_heap_remove_root(struct heat_customers *c)
{
    ASSERT(c->heap_count >= 1);
    uint32_t counter = c->heap[0].counter;
    uint32_t last = --c->heap_count;
    if (last > 0) {
        c->heap[0] = c->heap[last];
    }
    c->heap[last] = (struct heat_heap_entry){.count = HEAT_HEAP_ABSENT};
    if (last > 0) {
        heat_heap_sift_root_down(c);
    }
    return counter;
}

/* A counter out of both orders goes to the back of the queue when that keeps the keys in
 * order, else into the heap. */
static void heat_customers_place(struct heat_customers *c, uint32_t counter)
{
    if (c->queue_count == 0 ||
        heat_count_order(c->counters[counter].count) >= heat_count_order(heat_queue_back(c)->key)) {
        heat_queue_push(c, counter);
    } else {
        heat_heap_insert(c, counter);
    }
}

/* Makes the queue's front fresh (its key is its count): stale fronts go to the heap. */
static void heat_queue_settle(struct heat_customers *c)
{
    for (uint32_t settled = 0; c->queue_count > 0; settled++) {
        ASSERT(settled <= HEAT_QUEUE_SLOTS);
        const struct heat_queue_entry *front = &c->queue[c->queue_head];
        if (heat_count_order(c->counters[front->counter].count) == heat_count_order(front->key)) {
            return;
        }
        heat_heap_insert(c, heat_queue_pop(c));
    }
}

/* Takes a least counter out of its order and returns it. */
static uint32_t heat_customers_take_least(struct heat_customers *c)
{
    ASSERT(c->count == SHARD_HEAT_CUSTOMERS_MAX);
    heat_queue_settle(c);
    if (c->queue_count > 0 &&
        (c->heap_count == 0 ||
         heat_count_order(c->queue[c->queue_head].key) <= heat_count_order(c->heap[0].count))) {
        return heat_queue_pop(c);
    }
    return heat_heap_remove_root(c);
}

/* Space-Saving's replacement: a least counter takes the new id, keeping its count as error. */
static void heat_customers_replace_min(struct heat_customers *c, const struct ds_id *id,
                                       uint64_t hash, double weight)
{
    uint32_t counter = heat_customers_take_least(c);
    heat_customer_slot_remove(c, heat_customer_slot_of(c, counter));
    /* The id's slot is found again after the removal, which may have shifted its run. */
    heat_customer_claim(c, counter, id, hash);
    c->counters[counter].error = c->counters[counter].count;
    c->counters[counter].count += weight;
    heat_customers_place(c, counter);
}

/* One event of customer id (hash: heat_id_hash(id)) with the given decayed weight. */
static void heat_customers_add(struct heat_customers *c, const struct ds_id *id, uint64_t hash,
                               double weight)
{
    ASSERT(weight > 0.0);
    ASSERT(weight <= 1.0);
    c->total += weight;
    uint32_t slot = heat_customer_probe(c, id, hash);
    if (c->slots[slot].entry != 0) {
        uint32_t counter = c->slots[slot].entry - 1u;
        c->counters[counter].count += weight;
        uint32_t position = c->counters[counter].heap_index;
        if (position != HEAT_IN_QUEUE) {
            c->heap[position].count = c->counters[counter].count;
            heat_heap_sift_down(c, position);
        }
        return;
    }
    if (c->count == SHARD_HEAT_CUSTOMERS_MAX) {
        heat_customers_replace_min(c, id, hash, weight);
        return;
    }
    uint32_t counter = c->count++;
    heat_customer_claim(c, counter, id, hash);
    c->counters[counter].error = 0.0;
    c->counters[counter].count = weight;
    heat_customers_place(c, counter);
}

static void heat_customers_reset(struct heat_customers *c)
{
    c->count = 0;
    c->heap_count = 0;
    c->queue_head = 0;
    c->queue_count = 0;
    c->total = 0.0;
    memset(c->slots, 0, sizeof(c->slots));
    for (uint32_t i = 0; i < HEAT_HEAP_ENTRIES; i++) {
        c->heap[i] = (struct heat_heap_entry){.count = HEAT_HEAP_ABSENT};
    }
}

/* weight x factor, flushed to zero below HEAT_CUSTOMER_WEIGHT_MIN: monotone, so every order
 * and every equality of weights survives it. */
static double heat_weight_decay(double weight, double factor)
{
    double scaled = weight * factor;
    return scaled < HEAT_CUSTOMER_WEIGHT_MIN ? 0.0 : scaled;
}

/* Scales every weight by factor: counts, errors, the heap's copies of counts and the queue's
 * keys alike, so both orders and the queue's fresh keys stay as they were. */
static void heat_customers_decay(struct heat_customers *c, double factor)
{
    ASSERT(factor >= 0.0);
    ASSERT(factor < 1.0);
    c->total *= factor;
    if (c->total < HEAT_CUSTOMER_WEIGHT_MIN) {
        heat_customers_reset(c);
        return;
    }
    for (uint32_t i = 0; i < c->count; i++) {
        c->counters[i].count = heat_weight_decay(c->counters[i].count, factor);
        c->counters[i].error = heat_weight_decay(c->counters[i].error, factor);
    }
    for (uint32_t i = 0; i < c->heap_count; i++) {
        c->heap[i].count = heat_weight_decay(c->heap[i].count, factor);
        DEBUG_ASSERT(c->heap[i].count == c->counters[c->heap[i].counter].count);
    }
    for (uint32_t k = 0; k < c->queue_count; k++) {
        struct heat_queue_entry *e = &c->queue[(c->queue_head + k) & HEAT_QUEUE_MASK];
        e->key = heat_weight_decay(e->key, factor);
    }
}

/* ---- the clock ----------------------------------------------------------------------------- */

/* HEAT_CUSTOMER_DECAY^steps. A gap longer than the ring is taken in ring-sized factors, and
 * stops as soon as the product underflows to zero (after ~120 factors, whatever the gap). */
static double heat_decay_factor(const struct shard_heat *heat, int64_t steps)
{
    ASSERT(steps >= 1);
    double factor = 1.0;
    while (steps > (int64_t)HEAT_RING_SLOTS && factor > 0.0) {
        factor *= heat->decay_pow[HEAT_RING_SLOTS];
        steps -= (int64_t)HEAT_RING_SLOTS;
    }
    uint64_t rest = steps > (int64_t)HEAT_RING_SLOTS ? HEAT_RING_SLOTS : (uint64_t)steps;
    return factor * heat->decay_pow[rest];
}

static void heat_clock_move(struct shard_heat *heat, int64_t second)
{
    ASSERT(second > heat->second);
    ASSERT(second <= HEAT_SECOND_MAX);
    if (heat->customers.count > 0) {
        heat_customers_decay(&heat->customers, heat_decay_factor(heat, second - heat->second));
    }
    heat->second = second;
}

/* ---- lifecycle, the hot path, queries ------------------------------------------------------ */

int shard_heat_create(uint32_t capacity_eps, struct shard_heat **out)
{
    ASSERT(out != NULL);
    ASSERT(capacity_eps <= SHARD_CAPACITY_MAX);
    struct shard_heat *heat = calloc(1, sizeof(*heat));
    if (heat == NULL) {
        return -ENOMEM;
    }
    heat->capacity_eps = capacity_eps;
    heat->decay_pow[0] = 1.0;
    for (uint32_t k = 1; k <= HEAT_RING_SLOTS; k++) {
        heat->decay_pow[k] = heat->decay_pow[k - 1] * HEAT_CUSTOMER_DECAY;
    }
    heat_customers_reset(&heat->customers);
    heat_counts_reset(&heat->total);
    for (uint32_t i = 0; i < SHARD_HEAT_SOURCES_MAX; i++) {
        heat_counts_reset(&heat->sources[i]);
    }
    heat_table_init(&heat->partitions, SHARD_HEAT_PARTITIONS_MAX, HEAT_PARTITION_SLOT_BITS,
                    heat->partition_slots, heat->partition_keys, heat->partition_live,
                    heat->partition_free, heat->partition_counts);
    heat_table_init(&heat->days, SHARD_HEAT_DAYS_MAX, HEAT_DAY_SLOT_BITS, heat->day_slots,
                    heat->day_keys, heat->day_live, heat->day_free, heat->day_counts);
    *out = heat;
    return 0;
}

void shard_heat_destroy(struct shard_heat *heat)
{
    free(heat);
}

static void heat_observe_partition(struct shard_heat *heat, int64_t second, uint32_t key,
                                   bool in_window)
{
    uint32_t index = heat_table_add(&heat->partitions, key, heat->second);
    if (index == HEAT_INDEX_NONE) {
        heat->untracked_events++;
        return;
    }
    struct heat_counts *c = &heat->partitions.counts[index];
    uint32_t count = heat_counts_add(c, second, in_window);
    if (heat->capacity_eps == 0 || count <= heat->capacity_eps) {
        return;
    }
    c->would_throttle_events++;
    heat->would_throttle_events++;
    if (count == heat->capacity_eps + 1u) {
        c->over_capacity_seconds++;
        heat->over_capacity_seconds++;
    }
}

static void heat_event_check(int64_t second, int32_t day, uint32_t shard)
{
    ASSERT(second >= 0);
    ASSERT(second <= HEAT_SECOND_MAX);
    ASSERT(day >= 0);
    ASSERT(day <= DS_DAY_MAX);
    ASSERT(shard < SHARD_COUNT_MAX);
}

/* The exact counts of one event (all but the customers), at an age the clock already covers. */
static void heat_observe_counts(struct shard_heat *heat, int64_t second, int32_t day,
                                uint32_t shard, int32_t source, bool in_window)
{
    heat_counts_add(&heat->total, second, in_window);
    heat_observe_partition(heat, second, heat_partition_key(day, shard), in_window);
    uint32_t day_index = heat_table_add(&heat->days, (uint32_t)day, heat->second);
    if (day_index != HEAT_INDEX_NONE) {
        heat_counts_add(&heat->days.counts[day_index], second, in_window);
    }
    if (source >= 0 && (uint32_t)source < SHARD_HEAT_SOURCES_MAX) {
        heat_counts_add(&heat->sources[source], second, in_window);
    }
}

void shard_heat_observe(struct shard_heat *heat, int64_t second, int32_t day, uint32_t shard,
                        int32_t source, const struct ds_id *customer)
{
    ASSERT(heat != NULL);
    heat_event_check(second, day, shard);
    if (second > heat->second) {
        heat_clock_move(heat, second);
    }
    int64_t age = heat->second - second;
    bool in_window = age <= (int64_t)SHARD_HEAT_WINDOW_S;
    /* A late second: the history took its column already and re-takes it (no branch on the
     * usual age 0; the mask is the history's, read on this thread). */
    heat->late_seconds |= (uint64_t)(age > 0 && in_window) << ((uint64_t)second & HEAT_RING_MASK);
    heat_observe_counts(heat, second, day, shard, source, in_window);
    if (customer != NULL && in_window) {
        heat_customers_add(&heat->customers, customer, heat_id_hash(customer),
                           heat->decay_pow[age]);
    }
}

bool shard_heat_advance(struct shard_heat *heat, int64_t now_second)
{
    ASSERT(heat != NULL);
    ASSERT(now_second >= 0);
    ASSERT(now_second <= HEAT_SECOND_MAX);
    if (now_second > heat->second) {
        heat_clock_move(heat, now_second);
    }
    /* Events may have moved the clock since the last call: those seconds completed too. */
    bool moved = heat->second > heat->reported_second;
    heat->reported_second = heat->second;
    return moved;
}

uint64_t shard_heat_late_take(struct shard_heat *heat)
{
    ASSERT(heat != NULL);
    uint64_t late = heat->late_seconds;
    heat->late_seconds = 0;
    return late;
}

int64_t shard_heat_second(const struct shard_heat *heat)
{
    ASSERT(heat != NULL);
    ASSERT(heat->second >= 0);
    return heat->second;
}

uint64_t shard_heat_day_growth_events(const struct shard_heat *heat, int32_t day)
{
    ASSERT(heat != NULL);
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    uint32_t index = heat_table_find(&heat->days, (uint32_t)day);
    if (index == HEAT_INDEX_NONE) {
        return 0;
    }
    return heat_counts_recent(&heat->days.counts[index], heat->second, SHARD_HEAT_GROWTH_WINDOW_S);
}

uint64_t shard_heat_day_events(const struct shard_heat *heat, int32_t day)
{
    ASSERT(heat != NULL);
    ASSERT(day >= 0 && day <= DS_DAY_MAX);
    uint32_t index = heat_table_find(&heat->days, (uint32_t)day);
    return index == HEAT_INDEX_NONE ? 0 : heat->days.counts[index].events;
}

int shard_heat_visit_active_days(const struct shard_heat *heat, shard_heat_day_fn fn, void *user)
{
    ASSERT(heat != NULL);
    ASSERT(fn != NULL);
    const struct heat_table *t = &heat->days;
    for (uint32_t i = 0; i < t->entries_max; i++) {
        if (!t->live[i]) {
            continue;
        }
        uint64_t events =
            heat_counts_recent(&t->counts[i], heat->second, SHARD_HEAT_GROWTH_WINDOW_S);
        uint64_t current = heat_counts_at(&t->counts[i], heat->second);
        if (events == 0 && current == 0) {
            continue;
        }
        int rc = fn((int32_t)t->keys[i], events, current, user);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

void shard_heat_visit_second(const struct shard_heat *heat, int64_t second,
                             shard_heat_partition_fn fn, void *user)
{
    ASSERT(heat != NULL);
    ASSERT(fn != NULL);
    const struct heat_table *t = &heat->partitions;
    for (uint32_t i = 0; i < t->entries_max; i++) {
        if (!t->live[i]) {
            continue;
        }
        uint64_t events = heat_counts_at(&t->counts[i], second);
        if (events == 0) {
            continue;
        }
        ASSERT(events <= UINT32_MAX); /* a bucket saturates there */
        fn((int32_t)(t->keys[i] >> HEAT_SHARD_BITS), t->keys[i] & ((1u << HEAT_SHARD_BITS) - 1u),
           (uint32_t)events, user);
    }
}

/* ---- snapshots: top N by a bounded heap ---------------------------------------------------- */

/* A candidate row: higher primary first, then higher secondary, then lower key. */
struct heat_rank {
    uint64_t primary;
    uint64_t secondary;
    uint32_t key;
    uint32_t index;
};

/* True when a comes after b in the snapshot's order. */
static bool heat_rank_after(const struct heat_rank *a, const struct heat_rank *b)
{
    if (a->primary != b->primary) {
        return a->primary < b->primary;
    }
    if (a->secondary != b->secondary) {
        return a->secondary < b->secondary;
    }
    return a->key > b->key;
}

/* Sift down in a heap whose root is the rank that comes last. */
static void heat_ranks_sift_down(struct heat_rank *ranks, uint32_t count, uint32_t position)
{
    for (;;) {
        uint32_t child = 2u * position + 1u;
        if (child >= count) {
            return;
        }
        if (child + 1u < count && heat_rank_after(&ranks[child + 1u], &ranks[child])) {
            child++;
        }
        if (!heat_rank_after(&ranks[child], &ranks[position])) {
            return;
        }
        struct heat_rank swap = ranks[position];
        ranks[position] = ranks[child];
        ranks[child] = swap;
        position = child;
    }
}

/* Keeps the top `top` ranks offered so far in ranks[0 .. *count - 1], the last one at the root. */
static void heat_ranks_offer(struct heat_rank *ranks, uint32_t *count, uint32_t top,
                             struct heat_rank candidate)
{
    ASSERT(*count <= top);
    ASSERT(top <= SHARD_HEAT_TOP_MAX);
    if (*count < top) {
        uint32_t position = (*count)++;
        ranks[position] = candidate;
        while (position > 0) {
            uint32_t parent = (position - 1u) / 2u;
            if (!heat_rank_after(&ranks[position], &ranks[parent])) {
                break;
            }
            struct heat_rank swap = ranks[position];
            ranks[position] = ranks[parent];
            ranks[parent] = swap;
            position = parent;
        }
    } else if (heat_rank_after(&ranks[0], &candidate)) {
        ranks[0] = candidate;
        heat_ranks_sift_down(ranks, *count, 0);
    }
}

/* Heapsort in place: the rank that comes last moves to the end each time, so ranks end up in
 * snapshot order (qsort could allocate, which nothing after create may do). */
static void heat_ranks_sort(struct heat_rank *ranks, uint32_t count)
{
    for (uint32_t end = count; end > 1; end--) {
        struct heat_rank swap = ranks[0];
        ranks[0] = ranks[end - 1u];
        ranks[end - 1u] = swap;
        heat_ranks_sift_down(ranks, end - 1u, 0);
    }
}

/* The top live entries of a table by rate_now, then events, then key; returns the count. */
static uint32_t heat_table_top(const struct heat_table *t, int64_t now, uint32_t top,
                               struct heat_rank *ranks)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < t->entries_max; i++) {
        if (!t->live[i]) {
            continue;
        }
        const struct heat_counts *c = &t->counts[i];
        heat_ranks_offer(ranks, &count, top,
                         (struct heat_rank){.primary = heat_counts_at(c, now - 1),
                                            .secondary = c->events,
                                            .key = t->keys[i],
                                            .index = i});
    }
    heat_ranks_sort(ranks, count);
    return count;
}

static void heat_snapshot_partitions(const struct shard_heat *heat, uint32_t top,
                                     struct shard_heat_snapshot *out)
{
    struct heat_rank ranks[SHARD_HEAT_TOP_MAX];
    out->partition_count = heat_table_top(&heat->partitions, heat->second, top, ranks);
    for (uint32_t r = 0; r < out->partition_count; r++) {
        const struct heat_counts *c = &heat->partitions.counts[ranks[r].index];
        out->partitions[r] = (struct shard_heat_partition_row){
            .day = (int32_t)(ranks[r].key >> HEAT_SHARD_BITS),
            .shard = ranks[r].key & ((1u << HEAT_SHARD_BITS) - 1u),
            .rate_now = ranks[r].primary,
            .rate_peak = c->rate_peak,
            .window_events = heat_counts_recent(c, heat->second, SHARD_HEAT_WINDOW_S),
            .events = c->events,
            .over_capacity_seconds = c->over_capacity_seconds,
            .would_throttle_events = c->would_throttle_events};
    }
}

static void heat_snapshot_days(const struct shard_heat *heat, uint32_t top,
                               struct shard_heat_snapshot *out)
{
    struct heat_rank ranks[SHARD_HEAT_TOP_MAX];
    out->day_count = heat_table_top(&heat->days, heat->second, top, ranks);
    for (uint32_t r = 0; r < out->day_count; r++) {
        const struct heat_counts *c = &heat->days.counts[ranks[r].index];
        out->days[r] = (struct shard_heat_day_row){
            .day = (int32_t)ranks[r].key,
            .rate_now = ranks[r].primary,
            .rate_peak = c->rate_peak,
            .window_events = heat_counts_recent(c, heat->second, SHARD_HEAT_WINDOW_S),
            .growth_window_events = heat_counts_recent(c, heat->second, SHARD_HEAT_GROWTH_WINDOW_S),
            .events = c->events};
    }
}

static void heat_snapshot_sources(const struct shard_heat *heat, struct shard_heat_snapshot *out)
{
    out->source_count = 0;
    for (uint32_t i = 0; i < SHARD_HEAT_SOURCES_MAX; i++) {
        const struct heat_counts *c = &heat->sources[i];
        if (c->events == 0) {
            continue;
        }
        if (out->source_count == SHARD_HEAT_SOURCES_SNAPSHOT_MAX) {
            break;
        }
        out->sources[out->source_count++] = (struct shard_heat_source_row){
            .partition = (int32_t)i,
            .rate_now = heat_counts_at(c, heat->second - 1),
            .rate_peak = c->rate_peak,
            .window_events = heat_counts_recent(c, heat->second, SHARD_HEAT_WINDOW_S),
            .window_seconds = heat_counts_active(c, heat->second, SHARD_HEAT_WINDOW_S),
            .events = c->events};
    }
}

/* Customers by count. A non-negative double orders like its bits read as an unsigned integer,
 * so the counts rank through the same heap as the integer rows. */
static void heat_snapshot_customers(const struct shard_heat *heat, uint32_t top,
                                    struct shard_heat_snapshot *out)
{
    const struct heat_customers *c = &heat->customers;
    const double per_second = 1.0 - HEAT_CUSTOMER_DECAY;
    struct heat_rank ranks[SHARD_HEAT_TOP_MAX];
    uint32_t count = 0;
    for (uint32_t i = 0; i < c->count; i++) {
        double weight = c->counters[i].count;
        ASSERT(weight >= 0.0);
        if (weight == 0.0) {
            continue;
        }
        heat_ranks_offer(
            ranks, &count, top,
            (struct heat_rank){.primary = heat_count_order(weight), .key = i, .index = i});
    }
    heat_ranks_sort(ranks, count);
    for (uint32_t r = 0; r < count; r++) {
        uint32_t counter = ranks[r].index;
        struct shard_heat_customer_row *row = &out->customers[r];
        heat_id_copy(&row->customer, &c->ids[counter]);
        row->rate_eps = c->counters[counter].count * per_second;
        row->error_eps = c->counters[counter].error * per_second;
    }
    out->customer_count = count;
    out->customer_rate_eps = c->total * per_second;
}

void shard_heat_snapshot(const struct shard_heat *heat, uint32_t top,
                         struct shard_heat_snapshot *out)
{
    ASSERT(heat != NULL);
    ASSERT(out != NULL);
    top = top < 1u ? 1u : top > SHARD_HEAT_TOP_MAX ? SHARD_HEAT_TOP_MAX : top;
    memset(out, 0, sizeof(*out));
    out->second = heat->second > 0 ? heat->second - 1 : 0;
    out->capacity_eps = heat->capacity_eps;
    out->events = heat->total.events;
    out->rate_now = heat_counts_at(&heat->total, heat->second - 1);
    out->untracked_events = heat->untracked_events;
    out->over_capacity_seconds = heat->over_capacity_seconds;
    out->would_throttle_events = heat->would_throttle_events;
    heat_snapshot_partitions(heat, top, out);
    heat_snapshot_days(heat, top, out);
    heat_snapshot_sources(heat, out);
    heat_snapshot_customers(heat, top, out);
    ASSERT(out->partition_count <= top);
    ASSERT(out->customer_count <= top);
}

/* ---- the growth rule ----------------------------------------------------------------------- */

/* shards doubled until events fit in the count's window capacity (per_shard each) with 25%
 * headroom, at most bound. */
static uint32_t doubled_for(uint64_t events, ds_i128 per_shard, uint32_t shards, uint32_t bound)
{
    uint32_t count = shards;
    while (count < bound && per_shard * count * 4 < (ds_i128)events * 5) {
        count *= 2u;
    }
    return count < bound ? count : bound;
}

uint32_t shard_growth_target(uint64_t events, uint32_t window_s, uint32_t shards,
                             uint32_t capacity_eps, uint32_t max_shards)
{
    ASSERT(max_shards <= SHARD_COUNT_MAX);
    ASSERT(shards >= 1);
    ASSERT(window_s >= 1);
    if (capacity_eps == 0 || shards >= max_shards) {
        return shards;
    }
    /* 128 bits: events * 5 and count * capacity * window * 4 both exceed 64 bits at the edges. */
    const ds_i128 per_shard = (ds_i128)capacity_eps * window_s;
    if ((ds_i128)events <= per_shard * shards) {
        return shards;
    }
    uint32_t count = doubled_for(events, per_shard, shards, max_shards);
    ASSERT(count > shards);
    return count;
}

uint32_t shard_start_target(uint64_t events, uint32_t window_s, uint32_t previous, uint32_t shards,
                            uint32_t capacity_eps, uint32_t max_shards)
{
    ASSERT(max_shards <= SHARD_COUNT_MAX);
    ASSERT(shards >= 1);
    ASSERT(window_s >= 1);
    if (capacity_eps == 0 || shards >= max_shards) {
        return shards;
    }
    uint32_t from = previous < max_shards ? previous : max_shards;
    if (from <= shards) {
        return shard_growth_target(events, window_s, shards, capacity_eps, max_shards);
    }
    const ds_i128 per_shard = (ds_i128)capacity_eps * window_s;
    if ((ds_i128)events > per_shard * from) {
        /* Past the previous count's threshold: the day before would grow too. */
        return shard_growth_target(events, window_s, from, capacity_eps, max_shards);
    }
    /* The growth's 25% headroom is the band: a count below the previous one is taken only when
     * the rate is at most 80% of that count's threshold. */
    uint32_t count = doubled_for(events, per_shard, shards, from);
    ASSERT(count >= shards);
    ASSERT(count <= from);
    return count;
}
