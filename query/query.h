/*
 * query: answering questions over stored partitions.
 *
 * Counts (DESIGN.md section 5, /v1/count): for a day range, fan out over every shard each day
 * has ever had (from the shard map), add up partition totals that storage keeps from block
 * headers (never decompressing a block), optionally for one status, optionally grouped by
 * shard, hour or day; amounts are exact. The result renders as the JSON document of the HTTP
 * API (query_count_json) and as a table for people (query_count_table).
 *
 * The HTTP service (DESIGN.md section 5) answers /v1/count, /v1/partitions, /metrics, /healthz,
 * /readyz and /v1/customers/{id}/orders over libmicrohttpd. It opens its own read-only storage
 * handles and shard maps on a data directory, exactly like `count --data`, so the same code runs
 * standalone (`dayshard serve`) and inside a node (`dayshard run --http`) without touching the
 * writer. A node feeds live figures through struct query_metrics (atomics, any thread).
 *
 * Threads: a query runs on the thread that owns the struct storage it reads. The HTTP service
 * runs its own threads (query_http_start .. query_http_stop, called from one thread).
 */
#ifndef DS_QUERY_H
#define DS_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
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

/* ---- live figures of a node, for /metrics and /readyz ------------------------------------- */

/* Rejection reasons a node may name; the ingest decoder has about two dozen. */
#define QUERY_METRICS_REASONS_MAX 64u
/* Kafka partitions whose consumer lag is reported (labels stay bounded by this). */
#define QUERY_METRICS_LAG_PARTITIONS_MAX 1024u
/* Fixed fsync latency buckets (upper bounds, microseconds), plus +Inf. */
#define QUERY_FSYNC_BUCKETS 12u
extern const uint32_t query_fsync_bucket_bounds_us[QUERY_FSYNC_BUCKETS];

/* Figures a node updates from any thread (relaxed atomics) and the service reads. The caller
 * owns the memory (embed it, or allocate it) and keeps it alive until query_http_stop returns.
 * query_metrics_init sets the reason names (borrowed: static strings) before the service
 * starts; afterwards only the atomic fields change. */
struct query_metrics {
    atomic_uint_fast64_t events_ingested;
    uint32_t reason_count;
    const char *reason_names[QUERY_METRICS_REASONS_MAX];
    atomic_uint_fast64_t rejected[QUERY_METRICS_REASONS_MAX];
    /* Messages between the consumer's position and the partition's high watermark; -1 while
     * the partition is not assigned to this node. Index = Kafka partition. */
    atomic_int_fast64_t consumer_lag[QUERY_METRICS_LAG_PARTITIONS_MAX];
    atomic_uint_fast64_t fsync_buckets[QUERY_FSYNC_BUCKETS + 1]; /* last: +Inf */
    atomic_uint_fast64_t fsync_sum_ns;
    atomic_uint_fast64_t fsync_count;
    /* The node joined its consumer group (got its first assignment, possibly empty): until
     * then /readyz answers 503, since its lag is not known. */
    atomic_bool joined;
};

/* Zeroes m, marks every partition unassigned and records reason_count names (borrowed; at most
 * QUERY_METRICS_REASONS_MAX, the rest are ignored). */
void query_metrics_init(struct query_metrics *m, const char *const *reason_names,
                        uint32_t reason_count);
void query_metrics_rejected_add(struct query_metrics *m, uint32_t reason_index, uint64_t n);
/* Partitions at or past QUERY_METRICS_LAG_PARTITIONS_MAX are ignored; lag -1 = unassigned. */
void query_metrics_lag_set(struct query_metrics *m, int32_t partition, int64_t lag);
void query_metrics_fsync_observe(struct query_metrics *m, uint64_t latency_ns);
/* Marks the node a member of its group (see joined). */
void query_metrics_joined_set(struct query_metrics *m);
/* Largest lag over assigned partitions, 0 when none is assigned. */
int64_t query_metrics_lag_max(const struct query_metrics *m);
/* Renders the node's figures as Prometheus text (names dayshard_*). Returns the length or
 * -ENOSPC. */
DS_MUST_USE int64_t query_metrics_text(const struct query_metrics *m, char *dst,
                                       size_t dst_capacity);

/* ---- the HTTP service ---------------------------------------------------------------------- */

#define QUERY_HTTP_LISTEN_DEFAULT "127.0.0.1:8080"
/* Worker threads (libmicrohttpd's epoll thread pool); each has its own storage reader. */
#define QUERY_HTTP_THREADS_MAX 16u
#define QUERY_HTTP_THREADS_DEFAULT 2u
/* Open connections in total and from one address: idle sockets cost an fd and ~32 KiB of
 * connection memory each, so 1024 bound the service to ~32 MiB however many clients come. */
#define QUERY_HTTP_CONNECTIONS_MAX 65536u
#define QUERY_HTTP_CONNECTIONS_DEFAULT 1024u
#define QUERY_HTTP_CONNECTIONS_PER_IP_DEFAULT 512u
/* Seconds a connection may stay idle (or dribble a request) before it is closed. */
#define QUERY_HTTP_IDLE_TIMEOUT_S_DEFAULT 10u
/* Consumer lag (messages) within which a node is ready. */
#define QUERY_HTTP_READY_LAG_DEFAULT 100000

struct query_http_config {
    const char *data_dir;          /* read-only; copied */
    const char *listen;            /* "HOST:PORT" (port 0: any), NULL for the default; copied */
    const char *token;             /* bearer token required on every path but /healthz and
                                    * /readyz, or NULL; copied */
    uint32_t range_days_max;       /* longest /v1/count range; 0: QUERY_RANGE_DAYS_DEFAULT */
    uint32_t threads;              /* 0: QUERY_HTTP_THREADS_DEFAULT */
    uint32_t connections_max;      /* 0: QUERY_HTTP_CONNECTIONS_DEFAULT */
    uint32_t connections_per_ip;   /* 0: QUERY_HTTP_CONNECTIONS_PER_IP_DEFAULT */
    uint32_t idle_timeout_s;       /* 0: QUERY_HTTP_IDLE_TIMEOUT_S_DEFAULT */
    int64_t ready_lag_max;         /* with metrics; 0: QUERY_HTTP_READY_LAG_DEFAULT */
    struct query_metrics *metrics; /* a node's live figures (retained until stop), or NULL */
};

struct query_http;

/* Returns 0 or -DS_EUSAGE naming nothing (the caller words it): a knob out of range. */
DS_MUST_USE int query_http_config_check(const struct query_http_config *cfg);
/* Opens the readers on cfg->data_dir, binds and starts serving on the service's own threads.
 * Returns 0, -DS_EUSAGE (bad listen address or knob), -EADDRINUSE or another negated errno
 * (bind), or a storage error. */
DS_MUST_USE int query_http_start(const struct query_http_config *cfg, struct query_http **out);
/* "HOST:PORT" actually bound (the port chosen when 0 was asked). */
const char *query_http_address(const struct query_http *h);
/* Stops accepting, finishes the requests in progress, closes everything. Accepts NULL. */
void query_http_stop(struct query_http *h);

#endif /* DS_QUERY_H */
