/*
 * The heat history (shard.h, "heat history"): a ring of SHARD_HEAT_HISTORY_S per-second
 * columns of partition counts and a ring of growths, one writer, readers on any thread.
 *
 * Layout: each column has a fixed slab of SHARD_HEAT_PARTITIONS_MAX cells, a cell packing the
 * partition key (day above shard, so cells sort by day and then shard) and the second's events
 * into 64 bits. Columns are sparse: a column holds only the partitions written in its second,
 * and a second with no event has no column, so the ring holds the newest SHARD_HEAT_HISTORY_S
 * seconds that had events, which include every such second of the last SHARD_HEAT_HISTORY_S.
 * The slabs are allocated at create (calloc, so the kernel backs a slab's pages only as cells
 * are written there): the writer never allocates.
 *
 * Appending a column: the writer reads the heat's ring for the completed second into its own
 * scratch slab (no lock: only the writer touches it), sorts it, and then, under the lock, copies
 * the used cells into the ring's oldest slab and moves the ring on. A reader holds the lock
 * while it copies the columns it asked for out. So the writer waits at most one copy-out and
 * a reader at most one append; neither waits on the heat's event path, which never touches the
 * history.
 *
 * Invariants: columns are in ascending t from the ring's oldest to its newest, every t at most
 * `second`; a column's cells are in ascending key order, each with events > 0; growths are in
 * the order they were appended.
 *
 * Rejected: publishing a whole copy of the history per second (like struct shard_heat_report):
 * 300 columns of up to 8192 cells is megabytes a second copied on the consumer thread for
 * readers that mostly ask for one new column. Rejected too: a column per partition key (a
 * 300-second ring per key, 8192 of them): every second would then write all 8192 rings, and
 * most keys are idle most seconds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"

/* A key: day above HISTORY_SHARD_BITS of shard, as the heat's partition key. */
#define HISTORY_SHARD_BITS 10u
#define HISTORY_NONE (-1)

_Static_assert(SHARD_COUNT_MAX <= (1u << HISTORY_SHARD_BITS), "a shard fits its key bits");
_Static_assert(DS_DAY_MAX < (1 << (32u - HISTORY_SHARD_BITS)), "a day fits its key bits");
_Static_assert(SHARD_HEAT_HISTORY_S >= SHARD_HEAT_WINDOW_S, "a record fits the ring");

struct history_column {
    int64_t t;
    uint32_t cell_count;
};

struct shard_heat_history {
    /* Writer only. */
    int64_t recorded; /* the heat's current second at the last record; HISTORY_NONE before */
    uint32_t scratch_count;
    uint64_t *scratch; /* SHARD_HEAT_PARTITIONS_MAX packed cells */
    /* Under lock. */
    pthread_mutex_t lock;
    int64_t second;        /* the last complete second recorded; HISTORY_NONE before */
    uint32_t column_next;  /* the slab the next column goes to */
    uint32_t column_count; /* columns kept, the newest ending at column_next - 1 */
    struct history_column columns[SHARD_HEAT_HISTORY_S];
    uint64_t *cells; /* SHARD_HEAT_HISTORY_S slabs of SHARD_HEAT_PARTITIONS_MAX packed cells */
    uint32_t growth_next;
    uint32_t growth_count;
    struct shard_growth growths[SHARD_HEAT_HISTORY_GROWTHS_MAX];
};

static uint64_t history_cell_pack(int32_t day, uint32_t shard, uint32_t events)
{
    uint64_t key = ((uint64_t)(uint32_t)day << HISTORY_SHARD_BITS) | shard;
    return key << 32 | events;
}

static struct shard_heat_cell history_cell_unpack(uint64_t packed)
{
    uint32_t key = (uint32_t)(packed >> 32);
    return (struct shard_heat_cell){.day = (int32_t)(key >> HISTORY_SHARD_BITS),
                                    .shard = key & ((1u << HISTORY_SHARD_BITS) - 1u),
                                    .events = (uint32_t)packed};
}

int shard_heat_history_create(struct shard_heat_history **out)
{
    ASSERT(out != NULL);
    struct shard_heat_history *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return -ENOMEM;
    }
    h->scratch = calloc(SHARD_HEAT_PARTITIONS_MAX, sizeof(*h->scratch));
    h->cells = calloc((size_t)SHARD_HEAT_HISTORY_S * SHARD_HEAT_PARTITIONS_MAX, sizeof(*h->cells));
    if (h->scratch == NULL || h->cells == NULL) {
        free(h->scratch);
        free(h->cells);
        free(h);
        return -ENOMEM;
    }
    ASSERT(pthread_mutex_init(&h->lock, NULL) == 0);
    h->recorded = HISTORY_NONE;
    h->second = HISTORY_NONE;
    *out = h;
    return 0;
}

void shard_heat_history_destroy(struct shard_heat_history *h)
{
    if (h == NULL) {
        return;
    }
    pthread_mutex_destroy(&h->lock);
    free(h->scratch);
    free(h->cells);
    free(h);
}

/* ---- the writer ---------------------------------------------------------------------------- */

static void history_sift_down(uint64_t *a, uint32_t count, uint32_t position)
{
    for (;;) {
        uint32_t child = 2u * position + 1u;
        if (child >= count) {
            return;
        }
        if (child + 1u < count && a[child + 1u] > a[child]) {
            child++;
        }
        if (a[child] <= a[position]) {
            return;
        }
        uint64_t swap = a[position];
        a[position] = a[child];
        a[child] = swap;
        position = child;
    }
}

/* Heapsort, ascending (qsort may allocate, which the writer must not). */
static void history_sort(uint64_t *a, uint32_t count)
{
    for (uint32_t i = count / 2u; i-- > 0;) {
        history_sift_down(a, count, i);
    }
    for (uint32_t end = count; end > 1; end--) {
        uint64_t swap = a[0];
        a[0] = a[end - 1u];
        a[end - 1u] = swap;
        history_sift_down(a, end - 1u, 0);
    }
}

static void history_take_cell(int32_t day, uint32_t shard, uint32_t events, void *user)
{
    struct shard_heat_history *h = user;
    ASSERT(h->scratch_count < SHARD_HEAT_PARTITIONS_MAX); /* one per tracked partition */
    ASSERT(events > 0);
    h->scratch[h->scratch_count++] = history_cell_pack(day, shard, events);
}

/* Moves the scratch column into the ring (the oldest column goes when the ring is full). */
static void history_append_locked(struct shard_heat_history *h, int64_t t)
{
    ASSERT(h->column_count == 0 ||
           h->columns[(h->column_next + SHARD_HEAT_HISTORY_S - 1u) % SHARD_HEAT_HISTORY_S].t < t);
    uint32_t slot = h->column_next;
    memcpy(&h->cells[(size_t)slot * SHARD_HEAT_PARTITIONS_MAX], h->scratch,
           h->scratch_count * sizeof(*h->scratch));
    h->columns[slot] = (struct history_column){.t = t, .cell_count = h->scratch_count};
    h->column_next = (slot + 1u) % SHARD_HEAT_HISTORY_S;
    if (h->column_count < SHARD_HEAT_HISTORY_S) {
        h->column_count++;
    }
}

void shard_heat_history_record(struct shard_heat_history *h, const struct shard_heat *heat)
{
    ASSERT(h != NULL && heat != NULL);
    int64_t now = shard_heat_second(heat);
    ASSERT(now >= h->recorded);
    if (now == h->recorded) {
        return;
    }
    /* Seconds before the window are no longer in the heat's ring, so they have no counts. */
    int64_t first = now - (int64_t)SHARD_HEAT_WINDOW_S;
    first = h->recorded != HISTORY_NONE && h->recorded > first ? h->recorded : first;
    first = first > 0 ? first : 0;
    for (int64_t s = first; s < now; s++) {
        h->scratch_count = 0;
        shard_heat_visit_second(heat, s, history_take_cell, h);
        if (h->scratch_count == 0) {
            continue;
        }
        history_sort(h->scratch, h->scratch_count);
        ASSERT(pthread_mutex_lock(&h->lock) == 0);
        history_append_locked(h, s);
        ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    }
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    h->second = now - 1;
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    h->recorded = now;
}

void shard_heat_history_growth(struct shard_heat_history *h, const struct shard_growth *growth)
{
    ASSERT(h != NULL && growth != NULL);
    ASSERT(growth->to > growth->from);
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    h->growths[h->growth_next] = *growth;
    h->growth_next = (h->growth_next + 1u) % SHARD_HEAT_HISTORY_GROWTHS_MAX;
    if (h->growth_count < SHARD_HEAT_HISTORY_GROWTHS_MAX) {
        h->growth_count++;
    }
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
}

/* ---- readers ------------------------------------------------------------------------------- */

int64_t shard_heat_history_second(struct shard_heat_history *h)
{
    ASSERT(h != NULL);
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    int64_t second = h->second;
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    return second;
}

/* The columns with t > lower, oldest first, and the cells they hold; false when cells are too
 * few (out->cell_count then says how many are needed). */
static bool history_copy_columns(const struct shard_heat_history *h, int64_t lower,
                                 struct shard_heat_history_view *out, struct shard_heat_cell *cells,
                                 size_t cells_capacity)
{
    uint32_t oldest =
        (h->column_next + SHARD_HEAT_HISTORY_S - h->column_count) % SHARD_HEAT_HISTORY_S;
    size_t needed = 0;
    for (uint32_t k = 0; k < h->column_count; k++) {
        const struct history_column *c = &h->columns[(oldest + k) % SHARD_HEAT_HISTORY_S];
        needed += c->t > lower ? c->cell_count : 0;
    }
    ASSERT(needed <= (size_t)SHARD_HEAT_HISTORY_S * SHARD_HEAT_PARTITIONS_MAX);
    out->cell_count = (uint32_t)needed;
    if (needed > cells_capacity) {
        return false;
    }
    uint32_t at = 0;
    for (uint32_t k = 0; k < h->column_count; k++) {
        uint32_t slot = (oldest + k) % SHARD_HEAT_HISTORY_S;
        const struct history_column *c = &h->columns[slot];
        if (c->t <= lower) {
            continue;
        }
        const uint64_t *packed = &h->cells[(size_t)slot * SHARD_HEAT_PARTITIONS_MAX];
        for (uint32_t i = 0; i < c->cell_count; i++) {
            cells[at + i] = history_cell_unpack(packed[i]);
        }
        out->columns[out->column_count++] =
            (struct shard_heat_column){.t = c->t, .first_cell = at, .cell_count = c->cell_count};
        at += c->cell_count;
    }
    ASSERT(at == needed);
    return true;
}

static void history_copy_growths(const struct shard_heat_history *h, int64_t lower,
                                 struct shard_heat_history_view *out)
{
    uint32_t oldest = (h->growth_next + SHARD_HEAT_HISTORY_GROWTHS_MAX - h->growth_count) %
                      SHARD_HEAT_HISTORY_GROWTHS_MAX;
    for (uint32_t k = 0; k < h->growth_count; k++) {
        const struct shard_growth *g = &h->growths[(oldest + k) % SHARD_HEAT_HISTORY_GROWTHS_MAX];
        if (g->t > lower && g->t <= h->second) {
            out->growths[out->growth_count++] = *g;
        }
    }
    ASSERT(out->growth_count <= SHARD_HEAT_HISTORY_GROWTHS_MAX);
}

int shard_heat_history_copy(struct shard_heat_history *h, uint32_t seconds, int64_t after,
                            struct shard_heat_history_view *out, struct shard_heat_cell *cells,
                            size_t cells_capacity)
{
    ASSERT(h != NULL && out != NULL);
    ASSERT(seconds >= 1 && seconds <= SHARD_HEAT_HISTORY_S);
    ASSERT(cells != NULL || cells_capacity == 0);
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    out->second = h->second;
    out->column_count = 0;
    out->growth_count = 0;
    int64_t lower = h->second - (int64_t)seconds;
    lower = after > lower ? after : lower;
    bool fits = history_copy_columns(h, lower, out, cells, cells_capacity);
    if (fits) {
        history_copy_growths(h, lower, out);
    }
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    if (!fits) {
        out->column_count = 0;
        return -ENOSPC;
    }
    return 0;
}
