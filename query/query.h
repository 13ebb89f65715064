/*
 * query: answering questions over stored partitions.
 *
 * Counts (DESIGN.md section 5, /v1/count): for a day range, fan out over every shard each day
 * has ever had (from the shard map), add up partition totals that storage keeps from block
 * headers (never decompressing a block), optionally for one status, optionally grouped by
 * shard, hour or day; amounts are exact. The result renders as the JSON document of the HTTP
 * API (query_count_json) and as a table for people (query_count_table).
 *
 * Threads: a query runs on the thread that owns the struct storage it reads.
 */
#ifndef DS_QUERY_H
#define DS_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "shard/shard.h"
#include "storage/storage.h"

/* Longest day range one count may cover (the HTTP service makes it configurable below this). */
#define QUERY_RANGE_DAYS_MAX 3660u
#define QUERY_RANGE_DAYS_DEFAULT 366u

enum query_group { QUERY_GROUP_NONE = 0, QUERY_GROUP_SHARD, QUERY_GROUP_HOUR, QUERY_GROUP_DAY };

/* "shard", "hour", "day"; returns 0 or -DS_EUSAGE. */
DS_MUST_USE int query_group_parse(const char *text, enum query_group *out);

struct query_count_request {
    int32_t day_first;
    int32_t day_last; /* inclusive, >= day_first */
    bool has_status;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    enum query_group by;
    uint32_t range_days_max; /* refuse longer ranges (-DS_ELIMIT); 0 means the default */
};

struct query_group_row {
    int32_t day;
    uint32_t shard; /* by shard */
    uint32_t hour;  /* by hour */
    uint64_t count;
    ds_i128 amount_units;
};

struct query_count_result {
    uint64_t count;
    ds_i128 amount_units;
    uint32_t partitions; /* partitions the fan-out covered */
    uint64_t blocks;
    uint64_t bytes;
    size_t group_count;
    struct query_group_row *groups; /* owned; query_count_result_deinit frees it */
};

/* Runs a count. Returns 0, -DS_EUSAGE (bad range, or a status longer than DS_STATUS_BYTES_MAX),
 * -DS_ELIMIT (range too long), -ENOMEM, or a storage error. On success the caller releases res
 * with query_count_result_deinit. */
DS_MUST_USE int query_count(struct storage *st, const struct shard_map *map,
                            const struct query_count_request *req, struct query_count_result *res);
void query_count_result_deinit(struct query_count_result *res);

/* Renders the HTTP API document. Returns its length, or -ENOSPC when dst is too small. */
DS_MUST_USE int64_t query_count_json(const struct query_count_request *req,
                                     const struct query_count_result *res, char *dst,
                                     size_t dst_capacity);
/* Bytes query_count_json needs at most for res. */
size_t query_count_json_bound(const struct query_count_result *res);
/* Prints a table for people. */
void query_count_table(const struct query_count_request *req, const struct query_count_result *res,
                       FILE *out);

/* Writes s as a JSON string literal (quotes included) into dst; returns the length or -ENOSPC. */
DS_MUST_USE int64_t query_json_string(const char *s, size_t len, char *dst, size_t dst_capacity);

#endif /* DS_QUERY_H */
