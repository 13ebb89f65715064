/*
 * Count fan-out: for every day of the range, every shard the shard map says the day has ever
 * had, add the partition's totals. The partition count in the answer is that fan-out, so a day
 * whose shards are partly empty still reports every partition read.
 *
 * An unfiltered count not grouped by shard reads each day's totals instead (storage_day_totals:
 * a reader keeps them current as its refreshes take in commits), so a day costs one lookup, not
 * one per shard (at S = 256 a 28-day range fanned out took 4.9 ms in-process). The answer is the
 * fan-out's, field for field: the day's totals are sums of the same summaries, and a day whose
 * storage holds data in shards the map does not name (a reader's map behind its storage) is
 * fanned out as before, since the fan-out leaves those shards out. A status filter and by=shard
 * always fan out: a day's totals keep neither statuses nor shards.
 *
 * Rejected: enumerating partitions from storage instead of the shard map. A shard that never
 * received an event would vanish from by=shard groups, and a day that grew its shard count
 * could be under-counted if a reader's view of storage lagged the map.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"

int query_group_parse(const char *text, enum query_group *out)
{
    static const struct {
        const char *name;
        enum query_group group;
    } names[] = {
        {"shard", QUERY_GROUP_SHARD}, {"hour", QUERY_GROUP_HOUR}, {"day", QUERY_GROUP_DAY}};
    for (size_t i = 0; i < DS_ARRAY_LEN(names); i++) {
        if (strcmp(text, names[i].name) == 0) {
            *out = names[i].group;
            return 0;
        }
    }
    return -DS_EUSAGE;
}

static size_t groups_needed(const struct shard_map *map, const struct query_count_request *req)
{
    uint32_t days = (uint32_t)(req->day_last - req->day_first) + 1;
    switch (req->by) {
    case QUERY_GROUP_NONE: return 0;
    case QUERY_GROUP_DAY: return days;
    case QUERY_GROUP_HOUR: return (size_t)days * 24u;
    case QUERY_GROUP_SHARD: break;
    }
    size_t n = 0;
    for (int32_t day = req->day_first; day <= req->day_last; day++) {
        n += shard_map_get(map, day);
    }
    return n;
}

static void add_partition(const struct query_count_request *req, int32_t day, uint32_t shard,
                          const struct storage_partition_total *t, struct query_count_result *res,
                          struct query_group_row *day_row)
{
    res->count += t->count;
    res->amount_units += t->amount_units;
    res->blocks += t->blocks;
    res->bytes += t->bytes;
    res->damaged_blocks += t->damaged_blocks;
    res->partitions++;
    if (req->by == QUERY_GROUP_SHARD) {
        res->groups[res->group_count++] = (struct query_group_row){
            .day = day, .shard = shard, .count = t->count, .amount_units = t->amount_units};
    } else if (req->by == QUERY_GROUP_HOUR) {
        for (uint32_t h = 0; h < 24; h++) {
            day_row[h].count += (uint64_t)t->hours[h].count; /* >= 0: storage.h */
            day_row[h].amount_units += t->hours[h].amount_units;
        }
    } else if (req->by == QUERY_GROUP_DAY) {
        day_row->count += t->count;
        day_row->amount_units += t->amount_units;
    }
}

static struct query_group_row *open_day_rows(const struct query_count_request *req, int32_t day,
                                             struct query_count_result *res)
{
    size_t rows = req->by == QUERY_GROUP_HOUR ? 24u : (req->by == QUERY_GROUP_DAY ? 1u : 0u);
    struct query_group_row *first = res->groups + res->group_count;
    for (size_t i = 0; i < rows; i++) {
        first[i] = (struct query_group_row){.day = day, .hour = (uint32_t)i};
    }
    res->group_count += rows;
    return first;
}

/* The day's totals in place of its partitions'; partitions is still the map's shards. */
static void add_day(const struct query_count_request *req, uint32_t shards,
                    const struct storage_day_total *t, struct query_count_result *res,
                    struct query_group_row *day_row)
{
    ASSERT(req->by != QUERY_GROUP_SHARD);
    res->count += t->count;
    res->amount_units += t->amount_units;
    res->blocks += t->blocks;
    res->bytes += t->bytes;
    res->damaged_blocks += t->damaged_blocks;
    res->partitions += shards;
    if (req->by == QUERY_GROUP_HOUR) {
        for (uint32_t h = 0; h < 24; h++) {
            /* the sum of the partitions' hours, each >= 0, as add_partition adds them */
            day_row[h].count += (uint64_t)t->hours[h].count;
            day_row[h].amount_units += t->hours[h].amount_units;
        }
    } else if (req->by == QUERY_GROUP_DAY) {
        day_row->count += t->count;
        day_row->amount_units += t->amount_units;
    }
}

/* One day of the range: from its totals when they can answer, else partition by partition. */
static int count_day(struct storage *st, const struct query_count_request *req, int32_t day,
                     uint32_t shards, struct query_count_result *res,
                     struct query_group_row *day_row)
{
    if (!req->fanout && !req->has_status && req->by != QUERY_GROUP_SHARD) {
        struct storage_day_total t;
        int rc = storage_day_totals(st, day, shards, &t);
        if (rc == 0) {
            add_day(req, shards, &t, res, day_row);
        }
        if (rc <= 0) {
            return rc;
        }
    }
    const char *status = req->has_status ? req->status : NULL;
    for (uint32_t shard = 0; shard < shards; shard++) {
        struct storage_partition_total t;
        int rc = storage_partition_totals(st, day, shard, status, req->status_len, &t);
        if (rc != 0) {
            return rc;
        }
        add_partition(req, day, shard, &t, res, day_row);
    }
    return 0;
}

int query_count(struct storage *st, const struct shard_map *map,
                const struct query_count_request *req, struct query_count_result *res)
{
    memset(res, 0, sizeof(*res));
    res->model = storage_model(st);
    int32_t floor = storage_retention_floor(st);
    res->retention_floor = floor > 0 && req->day_first < floor ? floor : 0;
    uint32_t range_max = req->range_days_max != 0 ? req->range_days_max : QUERY_RANGE_DAYS_DEFAULT;
    ASSERT(range_max <= QUERY_RANGE_DAYS_MAX);
    if (req->day_first < 0 || req->day_last < req->day_first || req->day_last > DS_DAY_MAX) {
        return -DS_EUSAGE;
    }
    /* status is a fixed array: a longer length would read past it here and when rendering. */
    if (req->has_status && req->status_len > DS_STATUS_BYTES_MAX) {
        return -DS_EUSAGE;
    }
    if ((uint32_t)(req->day_last - req->day_first) + 1 > range_max) {
        return -DS_ELIMIT;
    }
    size_t groups = groups_needed(map, req);
    if (groups > 0) {
        res->groups = calloc(groups, sizeof(*res->groups));
        if (res->groups == NULL) {
            return -ENOMEM;
        }
    }
    for (int32_t day = req->day_first; day <= req->day_last; day++) {
        struct query_group_row *day_row = open_day_rows(req, day, res);
        int rc = count_day(st, req, day, shard_map_get(map, day), res, day_row);
        if (rc != 0) {
            query_count_result_deinit(res);
            return rc;
        }
    }
    ASSERT(res->group_count == groups);
    return 0;
}

void query_count_result_deinit(struct query_count_result *res)
{
    if (res == NULL) {
        return;
    }
    free(res->groups);
    res->groups = NULL;
    res->group_count = 0;
}
