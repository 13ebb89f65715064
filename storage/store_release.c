/*
 * storage_release_range's work (events model): a retraction row for every committed row of one
 * Kafka partition at offsets >= lo, in the row's own (day, shard) partition, with the row's
 * fields and source, so that counts drop by exactly the rows released.
 *
 * Per partition, two scans through a reader handle at the writer's last commit (decoding never
 * shares the writer's codec, which seals the retractions), deciding from each block's header
 * whether it can hold a row of (source, >= lo) at all (its partition, or mixed, with
 * source_offset_max >= lo: for a mixed block min and max span every partition's rows, so the
 * test can only pass too many blocks, never too few):
 *   1. every retraction of (source, offset >= lo) into a multiset of offsets;
 *   2. each row of (source, offset >= lo) takes one retraction of its offset from the multiset
 *      when there is one (it is cancelled already: a retraction follows its row), else gets a
 *      retraction appended.
 * So a release repeated after a crash, or resumed after -EAGAIN and a commit, retracts each row
 * once, and a row stored again after a release (the node read the range again) is released by
 * the next one like any other. Counting by offset rather than marking rows keeps the rows
 * immutable: nothing but appends, so the commit protocol and recovery are the usual ones.
 *
 * Rows of blocks without row sources (versions 1-3, written before rows carried them) cannot
 * be told apart: their blocks are counted into *unreleasable (the facade logs them).
 *
 * Rejected: an index of (source, offset) -> row kept beside the blocks (a second structure to
 * keep durable and in step for an operation that runs at a rebalance), and retracting by
 * rewriting the partition without the rows (a compaction's cost and delay on the node's
 * hand-over path, and no idempotence across a crash without a record of what was taken).
 */
#include <errno.h>
#include <stdlib.h>

#include "storage/storage.h"
#include "storage/store_read.h"
#include "storage/store_release.h"
#include "storage/store_write.h"

/* The scan's stop when rows_max retractions were appended. */
#define RELEASE_FULL 1

struct release {
    struct storage *st;
    struct part *p; /* the writer's partition the retractions go to */
    int32_t source;
    int64_t lo;
    uint32_t rows_max;
    uint32_t appended; /* retractions appended by this call */
    bool collect;      /* pass 1 */
    uint64_t *released;
    uint64_t *unreleasable;
    /* The multiset of pass 1: offsets and 1 + how many retractions of each are not yet
     * matched (0: an empty slot; a slot taken down to 1 stays, so probes pass it), open
     * addressing, mask + 1 slots (a power of two). */
    int64_t *offsets;
    uint32_t *counts;
    uint32_t mask;
    uint32_t used;
};

static uint32_t *multiset_slot(struct release *r, int64_t offset)
{
    uint32_t i = (uint32_t)ds_mix64((uint64_t)offset) & r->mask;
    while (r->counts[i] != 0 && r->offsets[i] != offset) {
        i = (i + 1) & r->mask;
    }
    r->offsets[i] = offset;
    return &r->counts[i];
}

static int multiset_grow(struct release *r)
{
    uint32_t slots = r->counts == NULL ? 1024u : (r->mask + 1u) * 2u;
    int64_t *old_offsets = r->offsets;
    uint32_t *old_counts = r->counts;
    uint32_t old_slots = r->counts == NULL ? 0 : r->mask + 1u;
    r->offsets = malloc(slots * sizeof(*r->offsets));
    r->counts = calloc(slots, sizeof(*r->counts));
    if (r->offsets == NULL || r->counts == NULL) {
        free(r->offsets);
        free(r->counts);
        r->offsets = old_offsets;
        r->counts = old_counts;
        return -ENOMEM;
    }
    r->mask = slots - 1u;
    for (uint32_t i = 0; i < old_slots; i++) {
        if (old_counts[i] != 0) {
            *multiset_slot(r, old_offsets[i]) = old_counts[i];
        }
    }
    free(old_offsets);
    free(old_counts);
    return 0;
}

static int multiset_add(struct release *r, int64_t offset)
{
    if (r->counts == NULL || (r->used + 1u) * 2u > r->mask + 1u) {
        int rc = multiset_grow(r);
        if (rc != 0) {
            return rc;
        }
    }
    uint32_t *count = multiset_slot(r, offset);
    r->used += *count == 0 ? 1u : 0u;
    *count = *count == 0 ? 2u : *count + 1u;
    return 0;
}

/* Takes one of offset from the multiset; false when it holds none. */
static bool multiset_take(struct release *r, int64_t offset)
{
    if (r->counts == NULL) {
        return false;
    }
    uint32_t i = (uint32_t)ds_mix64((uint64_t)offset) & r->mask;
    while (r->counts[i] != 0) {
        if (r->offsets[i] == offset) {
            if (r->counts[i] == 1u) {
                return false; /* every retraction of it matched already */
            }
            r->counts[i]--;
            return true;
        }
        i = (i + 1) & r->mask;
    }
    return false;
}

static bool block_may_hold(const struct block_header *header, void *user)
{
    struct release *r = user;
    bool partition =
        header->source_partition == r->source || header->source_partition == BLOCK_SOURCE_MIXED;
    if (!partition || header->source_offset_max < r->lo) {
        return false;
    }
    if (header->version < BLOCK_VERSION_SOURCES) {
        *r->unreleasable += r->collect ? header->event_count : 0u;
        return false;
    }
    return true;
}

static int release_row(const struct ds_event *event, const struct ds_source *source, void *user)
{
    struct release *r = user;
    if (source == NULL || source->partition != r->source || source->offset < r->lo) {
        return 0;
    }
    if (r->collect) {
        return event->retract ? multiset_add(r, source->offset) : 0;
    }
    if (event->retract || multiset_take(r, source->offset)) {
        return 0;
    }
    if (r->appended == r->rows_max) {
        return RELEASE_FULL;
    }
    struct ds_event retraction = *event;
    retraction.retract = true;
    int rc = store_write_append_kept(r->st, r->p, &retraction, source);
    if (rc != 0) {
        return rc;
    }
    r->appended++;
    (*r->released)++;
    return 0;
}

/* Both passes over one partition (rp: the reader's, p: the writer's). */
static int release_part(struct release *r, struct storage *reader, const struct part *rp)
{
    r->used = 0;
    if (r->counts != NULL) {
        for (uint32_t i = 0; i <= r->mask; i++) {
            r->counts[i] = 0;
        }
    }
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        r->collect = pass == 0;
        struct storage_position from = {0};
        rc = store_read_scan_from(reader, rp, &from, block_may_hold, release_row, r);
    }
    return rc == RELEASE_FULL ? -EAGAIN : rc;
}

int store_release_range(struct storage *st, struct storage *reader, int32_t source, int64_t lo,
                        uint32_t rows_max, uint64_t *released, uint64_t *unreleasable)
{
    ASSERT(st->cfg.model == STORAGE_MODEL_EVENTS);
    ASSERT(source >= 0 && lo >= 0 && rows_max >= 1);
    struct release r = {.st = st,
                        .source = source,
                        .lo = lo,
                        .rows_max = rows_max,
                        .released = released,
                        .unreleasable = unreleasable};
    int32_t floor = store_floor(st);
    int rc = 0;
    for (uint32_t i = 0; i < st->part_count && rc == 0; i++) {
        struct part *p = st->parts[i];
        if (p->segment_id == 0 || p->day < floor) {
            continue;
        }
        const struct part *rp = store_part_find(reader, p->day, p->shard);
        ASSERT(rp != NULL && rp->segment_id == p->segment_id);
        r.p = p;
        rc = release_part(&r, reader, rp);
    }
    free(r.offsets);
    free(r.counts);
    return rc;
}
