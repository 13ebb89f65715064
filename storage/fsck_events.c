/*
 * fsck's balance check of the events model: each retraction row cancels a row of the same
 * source (Kafka partition and offset) stored before it in the same (day, shard) partition.
 *
 * storage_release_range appends a retraction only for a row it read with that source, in the
 * row's partition, after it; a release repeated passes over rows already cancelled. So a
 * retraction without its row (a block quarantined by --repair, a retraction written by
 * something else) makes counts too low, and checksums cannot see it. One partition at a time
 * is scanned into an open-addressing table of (partition, offset) -> rows not yet cancelled,
 * at most half full: 16 bytes per distinct source of the partition being scanned. Only
 * partitions holding a retraction are scanned (their totals say so from block headers), so a
 * directory no release touched costs fsck no second decode of its blocks.
 *
 * Rejected: matching by all of a row's fields (as the orders model must): in the events model a
 * row's source names it, and the release retracts by source.
 */
#include <errno.h>
#include <stdlib.h>

#include "storage/fsck_events.h"
#include "storage/fsck_orders.h"
#include "storage/storage.h"

#define FSCK_EVENTS_SLOTS_MIN 1024u

struct fsck_events_slot {
    int64_t offset;
    int32_t partition;
    uint32_t rows; /* 1 + rows not yet cancelled; 0: an empty slot */
};

struct fsck_events {
    struct storage *st;
    FILE *out;
    struct storage_fsck_report *report;
    struct fsck_events_slot *slots;
    uint32_t mask;
    uint32_t used;
    uint64_t named;
    int32_t day;
    uint32_t shard;
};

static struct fsck_events_slot *slot_of(struct fsck_events *fe, int32_t partition, int64_t offset)
{
    uint64_t h = ds_mix64((uint64_t)offset ^ ((uint64_t)(uint32_t)partition << 40));
    uint32_t i = (uint32_t)h & fe->mask;
    while (fe->slots[i].rows != 0 &&
           (fe->slots[i].partition != partition || fe->slots[i].offset != offset)) {
        i = (i + 1) & fe->mask;
    }
    return &fe->slots[i];
}

static int slots_grow(struct fsck_events *fe)
{
    uint32_t old_slots = fe->slots == NULL ? 0 : fe->mask + 1u;
    uint32_t slots = old_slots == 0 ? FSCK_EVENTS_SLOTS_MIN : old_slots * 2u;
    struct fsck_events_slot *old = fe->slots;
    fe->slots = calloc(slots, sizeof(*fe->slots));
    if (fe->slots == NULL) {
        fe->slots = old;
        return -ENOMEM;
    }
    fe->mask = slots - 1u;
    for (uint32_t i = 0; i < old_slots; i++) {
        if (old[i].rows != 0) {
            *slot_of(fe, old[i].partition, old[i].offset) = old[i];
        }
    }
    free(old);
    return 0;
}

static void unmatched(struct fsck_events *fe, const struct ds_source *source)
{
    fe->report->retractions_unmatched++;
    if (fe->out == NULL) {
        return;
    }
    if (fe->named < FSCK_ORDERS_NAMED_MAX) {
        fprintf(fe->out, "partition %d/%u: a retraction of source %d offset %lld cancels no row\n",
                fe->day, fe->shard, source != NULL ? source->partition : -3,
                source != NULL ? (long long)source->offset : -1LL);
    } else if (fe->named == FSCK_ORDERS_NAMED_MAX) {
        fprintf(fe->out, "... more retractions that cancel no row (counted, not named)\n");
    }
    fe->named++;
}

static int balance_row(const struct ds_event *event, const struct ds_source *source, void *user)
{
    struct fsck_events *fe = user;
    if (event->retract) {
        fe->report->retractions++;
    }
    if (source == NULL) {
        if (event->retract) {
            unmatched(fe, NULL);
        }
        return 0;
    }
    if ((fe->used + 1u) * 2u > fe->mask + 1u) {
        int rc = slots_grow(fe);
        if (rc != 0) {
            return rc;
        }
    }
    struct fsck_events_slot *s = slot_of(fe, source->partition, source->offset);
    if (!event->retract) {
        if (s->rows == 0) {
            fe->used++;
            *s = (struct fsck_events_slot){
                .offset = source->offset, .partition = source->partition, .rows = 1u};
        }
        s->rows++;
        return 0;
    }
    if (s->rows <= 1u) {
        unmatched(fe, source);
        return 0;
    }
    s->rows--;
    return 0;
}

static int balance_part(int32_t day, uint32_t shard, void *user)
{
    struct fsck_events *fe = user;
    struct storage_partition_total t;
    if (storage_partition_totals(fe->st, day, shard, NULL, 0, &t) == 0 && t.rows == t.count) {
        return 0; /* no retraction (each makes rows - count 2 more): nothing to balance */
    }
    fe->day = day;
    fe->shard = shard;
    fe->used = 0;
    for (uint32_t i = 0; i <= fe->mask; i++) {
        fe->slots[i].rows = 0;
    }
    struct storage_position from = {0};
    int rc = storage_partition_scan_sources(fe->st, day, shard, &from, balance_row, fe);
    if (rc == -DS_ECORRUPT) {
        fe->report->balance_unchecked++; /* the block check names the damage */
        return 0;
    }
    return rc;
}

int fsck_events_check(const char *dir, FILE *out, struct storage_fsck_report *report)
{
    struct fsck_events fe = {.out = out, .report = report};
    if (storage_open_reader(dir, &fe.st) != 0) {
        return 0; /* the block and manifest checks say why */
    }
    int rc = 0;
    if (storage_model(fe.st) == STORAGE_MODEL_EVENTS) {
        rc = slots_grow(&fe);
        rc = rc == 0 ? storage_partition_visit(fe.st, balance_part, &fe) : rc;
    }
    if (rc != 0 && out != NULL) {
        fprintf(out, "%s: balance of retractions not checked: %s\n", dir, ds_strerror(rc));
    }
    free(fe.slots);
    storage_close(fe.st);
    return rc;
}
