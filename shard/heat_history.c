/*
 * The heat history (shard.h, "heat history"): a ring of SHARD_HEAT_HISTORY_S per-second
 * columns of partition counts and a ring of growths, one writer, readers on any thread.
 *
 * Layout: each column has a fixed slab of SHARD_HEAT_PARTITIONS_MAX cells, a cell packing the
 * partition key (day above shard, so cells sort by day and then shard) and the second's events
 * into 64 bits. Every second has a column, an empty one (no cells) when nothing was written in
 * it, and second t lives in slot t % SHARD_HEAT_HISTORY_S: the ring is exactly the seconds
 * (second - column_count, second], so the column of any kept second is found without a search
 * and can be taken again in place. The slabs are allocated at create (calloc, so the kernel
 * backs a slab's pages only as cells are written there): the writer never allocates.
 *
 * Taking a column: the writer reads the heat's ring for one second into its own scratch slab
 * (no lock: only the writer touches it), sorts it, and then, under the lock, copies the used
 * cells into the second's slab. A reader holds the lock while it copies the columns it asked
 * for out. So the writer waits at most one copy-out and a reader at most one column; neither
 * waits on the heat's event path, which never touches the history.
 *
 * Amending: an event of a second the history took already (a lagging Kafka partition: the
 * heat's clock is stream time, moved by the partitions ahead) sets that second's bit in the
 * heat's late mask (shard_heat_late_take, one OR on the event path, on the same consumer thread
 * as this writer, so the mask needs no lock). Each record takes the mask and takes the marked
 * seconds' columns again, whole, from the heat's ring; a second older than the heat's window is
 * out of that ring and stays as it was taken (the heat does not bucket it either).
 *
 * Revisions: one sequence, bumped by every column taken (appended or amended); a column carries
 * the revision it was last taken at, the history the newest. A growth gets the then-newest
 * revision when it becomes visible (its t is complete). So "what changed since revision V" is
 * the columns and growths whose revision exceeds V, whatever their t.
 *
 * Invariants: the kept columns are the consecutive seconds second - column_count + 1 ..
 * second, column t in slot t % SHARD_HEAT_HISTORY_S; second moves only forward, one column at
 * a time (so a reader never sees a revision whose column it cannot copy); revisions only grow,
 * a column's is at most the history's; a column's cells are in ascending key order, each with
 * events > 0; growths are in the order they were appended.
 *
 * Rejected: publishing a whole copy of the history per second (like struct shard_heat_report):
 * 300 columns of up to 8192 cells is megabytes a second copied on the consumer thread for
 * readers that mostly ask for one new column. Rejected too: a column per partition key (a
 * 300-second ring per key, 8192 of them): every second would then write all 8192 rings, and
 * most keys are idle most seconds. Rejected for amendments: re-taking the whole heat window
 * (60 columns) every second, which costs 60 times the copy when nothing was late, and adding
 * each late event to its column from the event path, which would put the history's lock there.
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
    uint64_t revision; /* when it was last taken */
    uint32_t cell_count;
};

struct shard_heat_history {
    /* Writer only. */
    int64_t recorded; /* the heat's current second at the last record; HISTORY_NONE before */
    uint32_t scratch_count;
    uint64_t *scratch; /* SHARD_HEAT_PARTITIONS_MAX packed cells */
    /* Under lock. */
    pthread_mutex_t lock;
    int64_t second;        /* the newest column's t; HISTORY_NONE before any */
    uint64_t revision;     /* the newest revision given; 0 before any */
    uint32_t column_count; /* columns kept: t in second - column_count + 1 .. second */
    struct history_column columns[SHARD_HEAT_HISTORY_S]; /* t in slot t % SHARD_HEAT_HISTORY_S */
    uint64_t *cells; /* SHARD_HEAT_HISTORY_S slabs of SHARD_HEAT_PARTITIONS_MAX packed cells */
    uint32_t growth_next;
    uint32_t growth_count;
    struct shard_growth growths[SHARD_HEAT_HISTORY_GROWTHS_MAX];
    uint64_t growth_revisions[SHARD_HEAT_HISTORY_GROWTHS_MAX]; /* 0: its t is not complete */
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

static uint32_t history_slot(int64_t t)
{
    ASSERT(t >= 0);
    return (uint32_t)(t % (int64_t)SHARD_HEAT_HISTORY_S);
}

/* Gives the growths whose t is now complete the newest revision. */
static void history_reveal_growths_locked(struct shard_heat_history *h)
{
    for (uint32_t i = 0; i < h->growth_count; i++) { /* the ring's used slots, any order */
        if (h->growth_revisions[i] == 0 && h->growths[i].t <= h->second) {
            h->growth_revisions[i] = h->revision;
        }
    }
}

/* Copies the scratch column into slot of second t under a new revision. */
static void history_put_locked(struct shard_heat_history *h, int64_t t)
{
    uint32_t slot = history_slot(t);
    memcpy(&h->cells[(size_t)slot * SHARD_HEAT_PARTITIONS_MAX], h->scratch,
           h->scratch_count * sizeof(*h->scratch));
    h->revision++;
    h->columns[slot] =
        (struct history_column){.t = t, .revision = h->revision, .cell_count = h->scratch_count};
}

/* Appends the scratch column as second t, the one after the newest (the oldest goes when the
 * ring is full). */
static void history_append(struct shard_heat_history *h, int64_t t)
{
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    ASSERT(h->column_count == 0 || t == h->second + 1);
    history_put_locked(h, t);
    h->second = t;
    h->column_count += h->column_count < SHARD_HEAT_HISTORY_S ? 1u : 0u;
    history_reveal_growths_locked(h);
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
}

/* Takes the scratch column of second t again (a late event came for it). */
static void history_amend(struct shard_heat_history *h, int64_t t)
{
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    ASSERT(t <= h->second && t > h->second - (int64_t)h->column_count);
    ASSERT(h->columns[history_slot(t)].t == t);
    history_put_locked(h, t);
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
}

/* Reads the heat's ring for second s into the scratch column, sorted (s outside the heat's
 * window: empty). */
static void history_take(struct shard_heat_history *h, const struct shard_heat *heat,
                         int64_t window_first, int64_t s)
{
    h->scratch_count = 0;
    if (s >= window_first) {
        shard_heat_visit_second(heat, s, history_take_cell, h);
        history_sort(h->scratch, h->scratch_count);
    }
}

void shard_heat_history_record(struct shard_heat_history *h, struct shard_heat *heat)
{
    ASSERT(h != NULL && heat != NULL);
    int64_t now = shard_heat_second(heat);
    ASSERT(now >= h->recorded);
    uint64_t late = shard_heat_late_take(heat);
    /* Seconds before the window are no longer in the heat's ring, so they have no counts. */
    int64_t window_first = now - (int64_t)SHARD_HEAT_WINDOW_S;
    window_first = window_first > 0 ? window_first : 0;
    if (h->recorded != HISTORY_NONE) {
        /* The window's seconds taken already whose late bit is set: each bit names one. */
        for (int64_t s = window_first; late != 0 && s < h->recorded; s++) {
            if ((late >> ((uint64_t)s % SHARD_HEAT_LATE_BITS) & 1u) != 0) {
                history_take(h, heat, window_first, s);
                history_amend(h, s);
            }
        }
    }
    /* Every second since the last record gets a column; of a jump longer than the ring, only
     * the ring's seconds. */
    int64_t first = h->recorded == HISTORY_NONE ? window_first : h->recorded;
    first =
        first > now - (int64_t)SHARD_HEAT_HISTORY_S ? first : now - (int64_t)SHARD_HEAT_HISTORY_S;
    if (h->column_count > 0 && first != h->second + 1) {
        ASSERT(pthread_mutex_lock(&h->lock) == 0);
        h->column_count = 0; /* the jump left none of the kept seconds in the ring */
        ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    }
    for (int64_t s = first; s < now; s++) {
        history_take(h, heat, window_first, s);
        history_append(h, s);
    }
    h->recorded = now;
}

void shard_heat_history_growth(struct shard_heat_history *h, const struct shard_growth *growth)
{
    ASSERT(h != NULL && growth != NULL);
    ASSERT(growth->to > growth->from);
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    h->growths[h->growth_next] = *growth;
    h->growth_revisions[h->growth_next] = 0;
    h->growth_next = (h->growth_next + 1u) % SHARD_HEAT_HISTORY_GROWTHS_MAX;
    if (h->growth_count < SHARD_HEAT_HISTORY_GROWTHS_MAX) {
        h->growth_count++;
    }
    if (growth->t <= h->second) {
        h->revision++; /* a growth of a complete second: visible now, as a change */
        history_reveal_growths_locked(h);
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

uint64_t shard_heat_history_revision(struct shard_heat_history *h)
{
    ASSERT(h != NULL);
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    uint64_t revision = h->revision;
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    return revision;
}

/* Which columns and growths a copy takes: t > lower and revision > after. */
struct history_pick {
    int64_t lower;
    uint64_t after;
};

static bool history_picks(const struct history_pick *p, int64_t t, uint64_t revision)
{
    return t > p->lower && revision > p->after;
}

/* The picked columns, oldest first, and the cells they hold; false when cells are too few
 * (out->cell_count then says how many are needed). */
static bool history_copy_columns(const struct shard_heat_history *h, const struct history_pick *p,
                                 struct shard_heat_history_view *out, struct shard_heat_cell *cells,
                                 size_t cells_capacity)
{
    int64_t oldest = h->second - (int64_t)h->column_count + 1;
    size_t needed = 0;
    for (int64_t t = oldest; t <= h->second; t++) {
        const struct history_column *c = &h->columns[history_slot(t)];
        ASSERT(c->t == t);
        needed += history_picks(p, t, c->revision) ? c->cell_count : 0;
    }
    ASSERT(needed <= (size_t)SHARD_HEAT_HISTORY_S * SHARD_HEAT_PARTITIONS_MAX);
    out->cell_count = (uint32_t)needed;
    if (needed > cells_capacity) {
        return false;
    }
    uint32_t at = 0;
    for (int64_t t = oldest; t <= h->second; t++) {
        uint32_t slot = history_slot(t);
        const struct history_column *c = &h->columns[slot];
        if (!history_picks(p, t, c->revision)) {
            continue;
        }
        const uint64_t *packed = &h->cells[(size_t)slot * SHARD_HEAT_PARTITIONS_MAX];
        for (uint32_t i = 0; i < c->cell_count; i++) {
            cells[at + i] = history_cell_unpack(packed[i]);
        }
        out->columns[out->column_count++] = (struct shard_heat_column){
            .t = t, .revision = c->revision, .first_cell = at, .cell_count = c->cell_count};
        at += c->cell_count;
    }
    ASSERT(at == needed);
    ASSERT(out->column_count <= SHARD_HEAT_HISTORY_S);
    return true;
}

static void history_copy_growths(const struct shard_heat_history *h, const struct history_pick *p,
                                 struct shard_heat_history_view *out)
{
    uint32_t oldest = (h->growth_next + SHARD_HEAT_HISTORY_GROWTHS_MAX - h->growth_count) %
                      SHARD_HEAT_HISTORY_GROWTHS_MAX;
    for (uint32_t k = 0; k < h->growth_count; k++) {
        uint32_t i = (oldest + k) % SHARD_HEAT_HISTORY_GROWTHS_MAX;
        const struct shard_growth *g = &h->growths[i];
        if (h->growth_revisions[i] != 0 && history_picks(p, g->t, h->growth_revisions[i])) {
            out->growths[out->growth_count++] = *g;
        }
    }
    ASSERT(out->growth_count <= SHARD_HEAT_HISTORY_GROWTHS_MAX);
}

static int history_copy(struct shard_heat_history *h, struct history_pick *p, uint32_t seconds,
                        struct shard_heat_history_view *out, struct shard_heat_cell *cells,
                        size_t cells_capacity)
{
    ASSERT(pthread_mutex_lock(&h->lock) == 0);
    out->second = h->second;
    out->revision = h->revision;
    out->column_count = 0;
    out->growth_count = 0;
    int64_t lower = h->second - (int64_t)seconds;
    p->lower = p->lower > lower ? p->lower : lower;
    bool fits = history_copy_columns(h, p, out, cells, cells_capacity);
    if (fits) {
        history_copy_growths(h, p, out);
    }
    ASSERT(pthread_mutex_unlock(&h->lock) == 0);
    if (!fits) {
        out->column_count = 0;
        return -ENOSPC;
    }
    return 0;
}

int shard_heat_history_copy(struct shard_heat_history *h, uint32_t seconds, int64_t after,
                            struct shard_heat_history_view *out, struct shard_heat_cell *cells,
                            size_t cells_capacity)
{
    ASSERT(h != NULL && out != NULL);
    ASSERT(seconds >= 1 && seconds <= SHARD_HEAT_HISTORY_S);
    ASSERT(cells != NULL || cells_capacity == 0);
    struct history_pick p = {.lower = after, .after = 0};
    return history_copy(h, &p, seconds, out, cells, cells_capacity);
}

int shard_heat_history_copy_since(struct shard_heat_history *h, uint64_t after_revision,
                                  struct shard_heat_history_view *out,
                                  struct shard_heat_cell *cells, size_t cells_capacity)
{
    ASSERT(h != NULL && out != NULL);
    ASSERT(cells != NULL || cells_capacity == 0);
    struct history_pick p = {.lower = SHARD_HEAT_HISTORY_ALL, .after = after_revision};
    return history_copy(h, &p, SHARD_HEAT_HISTORY_S, out, cells, cells_capacity);
}
