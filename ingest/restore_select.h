/*
 * Private to ingest/: which events read back from the topic a quarantined range of the events
 * model lost, when its offsets hold more events of its (day, shard) than it had (a range from
 * several Kafka partitions, whose offsets interleave with other blocks'): those the partition
 * does not hold any more. Events are compared by a hash of their content; equal contents are
 * a multiset (a present copy takes away one read copy). Pure; kafka_restore.c is the caller.
 */
#ifndef DS_INGEST_RESTORE_SELECT_H
#define DS_INGEST_RESTORE_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"

struct restore_key {
    uint64_t hash;  /* restore_select_hash of the event */
    uint64_t index; /* the caller's index of the event */
    bool taken;     /* an event with this content is present */
};

/* A 64-bit hash of what an event of the events model stores: order and customer ids, ts,
 * amount, status and version (items aside: storage may keep them in another form). */
uint64_t restore_select_hash(const struct ds_event *event);
/* Sorts keys by hash, then index (so equal contents are taken in read order). */
void restore_select_sort(struct restore_key *keys, uint64_t count);
/* Marks the first key with this hash not taken yet; returns whether there was one. keys are
 * sorted. */
bool restore_select_take(struct restore_key *keys, uint64_t count, uint64_t hash);

#endif /* DS_INGEST_RESTORE_SELECT_H */
