/*
 * query: answering questions over stored partitions.
 *
 * Counts (docs/HTTP_API.md, /v1/count): for a day range, fan out over every shard each day
 * has ever had (from the shard map), add up partition totals that storage keeps from block
 * headers (never decompressing a block), optionally for one status, optionally grouped by
 * shard, hour or day; amounts are exact. The result renders as the JSON document of the HTTP
 * API (query_count_json) and as a table for people (query_count_table).
 *
 * The HTTP service (docs/HTTP_API.md) answers /v1/count, /v1/partitions, /metrics, /healthz,
 * /readyz, /v1/customers/{id}/orders and /v1/orders/{id} over libmicrohttpd. It opens its own
 * read-only storage handles and shard maps on a data directory, exactly like `count --data`, so the
 * same code runs standalone (`dayshard serve`) and inside a node (`dayshard run --http`) without
 * touching the writer. A node feeds live figures through struct query_metrics (atomics, any
 * thread).
 *
 * Threads: a query runs on the thread that owns the struct storage it reads. The HTTP service
 * runs its own threads (query_http_start .. query_http_stop, called from one thread).
 */
#ifndef DS_QUERY_H
#define DS_QUERY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "http/http.h"
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
    /* Add every partition's totals even where a day's totals (storage_day_totals) would answer:
     * the oracle of the tests and the baseline of the benchmarks; the answer is the same. */
    bool fanout;
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
    /* Damaged blocks in the partitions read (storage_partition_total.damaged_blocks): non-zero
     * means the count is not backed by readable records until `dayshard fsck --repair`. */
    uint64_t damaged_blocks;
    /* What the counts count: storage_model of the directory, rendered as "model"; RECORDED
     * (unknown: a document of a service that did not say) is left out. */
    enum storage_model model;
    /* The retention floor (storage_retention_floor) when the range reaches below it, else 0:
     * rendered as "retention_floor", the first day still kept (the days before count 0). */
    int32_t retention_floor;
    size_t group_count;
    struct query_group_row *groups; /* owned; query_count_result_deinit frees it */
};

/* Runs a count: an unfiltered count (by nothing, day or hour) takes each day from the
 * day's totals a reader keeps (storage_day_totals: one lookup per day, whatever the shard
 * count); a status filter, by=shard, a writer's handle, or a day whose storage holds shards
 * the map does not name fans out over the day's partitions. Either way partitions counts the
 * shard map's shards of each day. Returns 0, -DS_EUSAGE (bad range, or a status longer than
 * DS_STATUS_BYTES_MAX), -DS_ELIMIT (range too long), -ENOMEM, or a storage error. On success the
 * caller releases res with query_count_result_deinit. */
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

struct query_orders_page; /* below, with the by-customer index */
/* Renders a page of a customer's orders as the HTTP API document: {"customer_id":...,
 * "orders":[{"order_id":...,"ts":"...Z","day":"...","status":"...","amount":"12.3400"}],
 * "next":"token"|null,"gsi_lag_ms":L}. Returns the length, or -ENOSPC. */
DS_MUST_USE int64_t query_orders_json(const struct ds_id *customer,
                                      const struct query_orders_page *page, uint64_t gsi_lag_ms,
                                      char *dst, size_t dst_capacity);
/* Bytes query_orders_json needs at most for count orders. */
size_t query_orders_json_bound(uint32_t count);
/* An id as JSON: a number, or a string literal. Returns the length, or -ENOSPC. */
DS_MUST_USE int64_t query_id_json(const struct ds_id *id, char *dst, size_t dst_capacity);

/* ---- one order (the order lookup: GET /v1/orders/{id}, `dayshard order`; orders model) --- */

/* An order id given as text follows query_customer_id_parse's rule (below). */

/* Renders canonical items (common.h; len bytes, len > 0) as a JSON array
 * [{"product":"...","quantity":N},...], products escaped. Returns the length, -ENOSPC, or
 * -DS_ECORRUPT when the bytes are not canonical items (a count over DS_ITEMS_COUNT_MAX, a
 * product of 0 or over DS_ITEM_PRODUCT_BYTES_MAX bytes, a quantity of 0 or over
 * DS_ITEM_QUANTITY_MAX, an overlong varint, or bytes left over). */
DS_MUST_USE int64_t query_items_json(const uint8_t *items, size_t len, char *dst,
                                     size_t dst_capacity);
/* Bytes query_items_json needs at most for len canonical bytes. */
size_t query_items_json_bound(size_t len);
/* Renders an order's current version as the document of GET /v1/orders/{id}:
 * {"order_id":...,"customer_id":...,"ts":"...Z","day":"YYYY-MM-DD","shard":S,"status":"...",
 * "amount":"12.3400","version":N|null,"items":null|[...],"versions_seen":N,"model":"orders"}
 * (ts, day and amount in the customer view's forms). Returns the length, -ENOSPC, or
 * -DS_ECORRUPT (items that are not canonical). */
DS_MUST_USE int64_t query_order_json(const struct storage_order *order, char *dst,
                                     size_t dst_capacity);
/* Bytes query_order_json needs at most for order. */
size_t query_order_json_bound(const struct storage_order *order);

/* ---- live figures of a node, for /metrics and /readyz -------------------------------------- */

/* Rejection reasons a node may name; the ingest decoder has about two dozen. */
#define QUERY_METRICS_REASONS_MAX 64u
/* Kafka partitions whose consumer lag is reported (labels stay bounded by this). */
#define QUERY_METRICS_LAG_PARTITIONS_MAX 1024u
/* Fixed fsync latency buckets (upper bounds, microseconds), plus +Inf. */
#define QUERY_FSYNC_BUCKETS 12u
extern const uint32_t query_fsync_bucket_bounds_us[QUERY_FSYNC_BUCKETS];
/* GSI lag buckets (upper bounds, milliseconds), plus +Inf. */
#define QUERY_GSI_LAG_BUCKETS 10u
extern const uint32_t query_gsi_lag_bucket_bounds_ms[QUERY_GSI_LAG_BUCKETS];

/* What the node's writer holds after its last commit (ingest_node_progress: storage_held and
 * storage_ids_held), one gauge or counter each in /metrics. */
enum query_held {
    QUERY_HELD_PARTITIONS = 0,
    QUERY_HELD_SEGMENT_FDS,
    QUERY_HELD_RETENTION_FLOOR_DAY, /* 0: nothing dropped */
    QUERY_HELD_STREAM_DAY,
    QUERY_HELD_IDS_KEYDIR_BYTES, /* the orders-by-id store: orders model only */
    QUERY_HELD_IDS_RECENT_BYTES,
    QUERY_HELD_IDS_RECENT_HARD_BYTES,
    QUERY_HELD_IDS_MEMORY_BYTES,
    QUERY_HELD_IDS_SEALED_FILES,
    QUERY_HELD_IDS_SEALS,
    QUERY_HELD_IDS_SEALING,
    QUERY_HELD_IDS_STALL_CALLS,
    QUERY_HELD_IDS_STALL_NS,
    QUERY_HELD_IDS_STALL_MAX_NS,
    QUERY_HELD_WRITER_STALL_MAX_NS, /* the writer's maintenance: both models */
    QUERY_HELD_COMPACTIONS,
    QUERY_HELD_COMPACTION_SLICES,
    QUERY_HELD_COMPACTION_SLICE_MAX_NS,
    QUERY_HELD_COMPACTING,
    QUERY_HELD_COUNT
};

/* The writer's maintenance and its longest stall (ingest_writer_maintenance, copied here so
 * this folder needs nothing of ingest/). */
struct query_writer_figures {
    uint64_t stall_ns_max;
    uint64_t compactions;
    uint64_t compaction_slices;
    uint64_t compaction_slice_ns_max;
    bool compacting;
};

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
    atomic_int_fast64_t gsi_lag_ms; /* -1 without a GSI builder */
    /* The orders model (storage_order_stats): distinct orders, -1 in the events model; and the
     * events taken by what they did to their order (created, applied, stale, unchanged). */
    atomic_int_fast64_t orders;
    atomic_uint_fast64_t order_events[4];
    atomic_uint_fast64_t gsi_lag_buckets[QUERY_GSI_LAG_BUCKETS + 1]; /* last: +Inf */
    atomic_uint_fast64_t gsi_lag_sum_ns;
    atomic_uint_fast64_t gsi_lag_count;
    /* enum query_held; -1 until the writer's first commit (and the store's figures in the
     * events model, which has no orders-by-id store): not rendered. */
    atomic_int_fast64_t held[QUERY_HELD_COUNT];
    /* The node's own progress, for /readyz (ds_clock_ns; 0: not yet): the consumer thread's
     * last report (query_metrics_joined_set, about once a second) and the writer's last commit
     * (query_metrics_held_set; the first report stands for it until the first commit). */
    atomic_uint_fast64_t consumer_seen_ns;
    atomic_uint_fast64_t writer_seen_ns;
    /* The node's heat report, replaced once a second by the consumer thread and copied out by
     * /v1/heat and /metrics: a mutex held for one 26 KiB copy a second on each side, never on
     * the ingest path. */
    pthread_mutex_t heat_lock;
    bool heat_present;             /* under heat_lock */
    struct shard_heat_report heat; /* under heat_lock */
    /* The heat console's history (GET /v1/heat/history, /v1/heat/stream): set by the node
     * before the service starts, NULL without one; retained until query_http_stop returns. */
    struct shard_heat_history *heat_history;
};

/* Zeroes m, marks every partition unassigned and records reason_count names (borrowed; at most
 * QUERY_METRICS_REASONS_MAX, the rest are ignored). */
void query_metrics_init(struct query_metrics *m, const char *const *reason_names,
                        uint32_t reason_count);
/* Replaces the heat report (the node's consumer thread, once a second). */
void query_metrics_heat_set(struct query_metrics *m, const struct shard_heat_report *report);
/* Copies the heat report into *out; false when no report arrived yet. */
bool query_metrics_heat_get(struct query_metrics *m, struct shard_heat_report *out);
/* Renders GET /v1/heat?top=N (docs/HTTP_API.md) from a report, with consumer lag per Kafka
 * partition and the GSI lag from m (may be NULL). Returns the length or -ENOSPC. */
DS_MUST_USE int64_t query_heat_json(const struct shard_heat_report *report,
                                    const struct query_metrics *m, uint32_t top, char *dst,
                                    size_t dst_capacity);
/* Bytes query_heat_json needs at most. */
size_t query_heat_json_bound(void);
/* The fields of a history document that are not in the copy. */
struct query_heat_history_scale {
    uint32_t seconds;      /* the N asked */
    uint32_t capacity_eps; /* a cell at this is full */
    uint32_t max_shards;
};
/* Renders GET /v1/heat/history (docs/ARCHITECTURE.md, the heat console) from a copy of the
 * history (shard_heat_history_copy) and its cells: {"version":1,"second":S|null,"seconds":N,
 * "shard_capacity_eps":C,"max_shards":M,"revision":R,"columns":[{"t":T,"revision":V,
 * "days":{"YYYY-MM-DD":[n,...]}}],"growths":[{"t":T,"day":...,"from":F,"to":T,"at":...,
 * "reason":...}]}, no newlines; the copy's empty columns are left out. R is the history's
 * revision at the copy, V the revision a column was last taken at (V > a reader's R: new or
 * amended since). Returns the length or -ENOSPC. */
DS_MUST_USE int64_t query_heat_history_json(const struct shard_heat_history_view *view,
                                            const struct shard_heat_cell *cells,
                                            const struct query_heat_history_scale *scale, char *dst,
                                            size_t dst_capacity);
/* Bytes query_heat_history_json needs at most for this copy. */
size_t query_heat_history_json_bound(const struct shard_heat_history_view *view,
                                     const struct shard_heat_cell *cells);
void query_metrics_rejected_add(struct query_metrics *m, uint32_t reason_index, uint64_t n);
/* Partitions at or past QUERY_METRICS_LAG_PARTITIONS_MAX are ignored; lag -1 = unassigned. */
void query_metrics_lag_set(struct query_metrics *m, int32_t partition, int64_t lag);
void query_metrics_fsync_observe(struct query_metrics *m, uint64_t latency_ns);
/* Marks the node a member of its group (see joined); the consumer thread calls it again about
 * once a second while it runs (its heartbeat, consumer_seen_ns). */
void query_metrics_joined_set(struct query_metrics *m);
/* Why a node with these figures is not ready at now_ns (ds_clock_ns), or QUERY_READY. Its HTTP
 * thread answering is not enough: a node whose disk stalled answers /readyz while its consumer
 * thread waits on the writer, or its writer commits nothing with messages waiting. */
enum query_readiness {
    QUERY_READY = 0,
    QUERY_UNREADY_JOINING,  /* not a member of its group yet: its lag is not known */
    QUERY_UNREADY_LAG,      /* *lag > lag_max */
    QUERY_UNREADY_CONSUMER, /* the consumer thread has not reported for stall_ns */
    QUERY_UNREADY_WRITER,   /* *lag > 0 and the writer has not committed for stall_ns */
};
/* *lag gets the largest consumer lag, *silent_ns how long the thread named has been silent. */
enum query_readiness query_metrics_readiness(const struct query_metrics *m, int64_t lag_max,
                                             uint64_t stall_ns, uint64_t now_ns, int64_t *lag,
                                             uint64_t *silent_ns);
/* The GSI lag: the current value (gauge) and each commit's lag once queryable (histogram). */
void query_metrics_gsi_lag_set(struct query_metrics *m, int64_t lag_ms);
/* The writer's storage_order_stats after a commit (storage.h). */
void query_metrics_orders_set(struct query_metrics *m, const struct storage_order_stats *stats);
void query_metrics_gsi_lag_observe(struct query_metrics *m, uint64_t lag_ns);
/* The writer's holdings after a commit (writer thread): ids NULL in the events model; floor and
 * stream_day as storage_retention_floor and storage_stream_day give them; writer NULL when not
 * known (its figures are then not rendered). */
void query_metrics_held_set(struct query_metrics *m, const struct storage_held *held,
                            const struct storage_ids_held *ids, int32_t floor, int32_t stream_day,
                            const struct query_writer_figures *writer);
/* Largest lag over assigned partitions, 0 when none is assigned. */
int64_t query_metrics_lag_max(const struct query_metrics *m);
/* Renders the node's figures as Prometheus text (names dayshard_*). Returns the length or
 * -ENOSPC. */
DS_MUST_USE int64_t query_metrics_text(const struct query_metrics *m, char *dst,
                                       size_t dst_capacity);

/* ---- the by-customer index (GSI) ----------------------------------------------------------- */

#define QUERY_ORDERS_LIMIT_DEFAULT 20u
#define QUERY_ORDERS_LIMIT_MAX 1000u
/* A page token: lowercase hex of the last entry's (ts, order id) key part. */
#define QUERY_ORDERS_TOKEN_CHARS_MAX (2u * (8u + 1u + 2u * DS_ID_BYTES_MAX + 2u))

/* One order of a customer's view. */
struct query_order {
    struct ds_id order_id;
    int64_t ts_ms;
    int32_t day;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    int64_t amount_units;
};

/* A page of a customer's orders, newest first. The caller points orders at an array of at
 * least `limit` entries. */
struct query_orders_page {
    struct query_order *orders;
    uint32_t count;
    bool has_next;
    char next_token[QUERY_ORDERS_TOKEN_CHARS_MAX + 1]; /* "" when !has_next */
};

struct index;         /* an index handle (index/index.h) */
struct index_builder; /* the node's builder (index/index.h) */
/* The API's rule for a customer id given as text (already percent-decoded): a positive decimal
 * integer without leading zeros, up to 2^63-1, is an integer id; "..." is the string between
 * the quotes (so "42" is the string 42); anything else is a string id. Returns 0, or
 * -DS_EUSAGE for an empty id, one over DS_ID_BYTES_MAX bytes or one holding a NUL byte. */
DS_MUST_USE int query_customer_id_parse(const char *text, size_t len, struct ds_id *id);
/* Entries of the index one page of the orders model may pass over (superseded versions) before
 * it answers a short page, with a next token after the last entry it looked at: it bounds the
 * work of one request for a customer whose orders changed day or customer many times. */
#define QUERY_ORDERS_EXAMINED_MAX 65536u
/* One page of customer's orders from an index handle. st (NULL, or a storage handle of the
 * index's data directory, used on the calling thread) decides what an entry means: in the
 * orders model the index keeps an entry per (customer, ts, order id) ever stored, and the page
 * lists only those that are an order's current version (its customer and ts as st knows them),
 * with the current status, amount and day, fetching further entries until the page is full, the
 * index ends or QUERY_ORDERS_EXAMINED_MAX entries were looked at. NULL, or a directory of the
 * events model, lists every entry as stored. st should be at least as recent as the index view
 * (refresh it after the view): an entry newer than st is skipped, never listed twice. Returns
 * 0, -DS_EUSAGE (limit outside 1..QUERY_ORDERS_LIMIT_MAX, a malformed token, a bad id), -ENOMEM,
 * -DS_ECORRUPT or -EIO. */
DS_MUST_USE int query_orders_get(struct index *ix, struct storage *st, const struct ds_id *customer,
                                 uint32_t limit, const char *page_token,
                                 struct query_orders_page *out);

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
/* A node whose consumer thread is silent this long, or whose writer commits nothing this long
 * while messages wait, is not ready. Above the longest commit (fdatasync and seal waits) seen
 * on a loaded machine (~2 s), several consumer reports (one a second), and well below the
 * time an operator takes to notice. */
#define QUERY_HTTP_READY_STALL_MS_DEFAULT 10000u
#define QUERY_HTTP_READY_STALL_MS_MAX 600000u

/* consistent=true (docs/HTTP_API.md): a node's answer includes every event its topic had
 * acknowledged, on the partitions the node is assigned, when the request arrived; `serve` (no
 * node) answers with everything durable when the request arrived. timeout_ms bounds the wait:
 * 2 s by default (a read-your-writes client retries sooner than it gives up), at most a minute
 * (longer than any proxy in front keeps a request open, and a waiting request holds one of
 * the service's few worker threads). */
#define QUERY_CONSISTENT_TIMEOUT_MS_DEFAULT 2000u
#define QUERY_CONSISTENT_TIMEOUT_MS_MAX 60000u

/* One Kafka partition a consistent read waits for. */
struct query_position {
    int32_t partition;
    int64_t high_watermark; /* the next offset the broker will write, asked after arrival */
    int64_t stored_from;    /* below it this node does not store the partition (another
                             * member's data, or gone from the log): nothing to wait for */
};
/* A node's positions for consistent=true (any service thread): fills out with one entry per
 * partition the node is assigned now, asking the broker within timeout_ms, and *generation
 * with the assignment's generation. Returns the count (0: no partition assigned), -ENOSPC
 * (more than cap), -EAGAIN (the node is not consuming: starting, joining its group,
 * rebalancing or stopping), -ETIMEDOUT (the broker did not answer in time), or -DS_EKAFKA. */
typedef int (*query_positions_fn)(void *user, struct query_position *out, size_t cap,
                                  uint32_t timeout_ms, uint64_t *generation);
/* The node's current assignment generation (cheap): a change means a rebalance. */
typedef uint64_t (*query_generation_fn)(void *user);
/* One claim of a node (events model): the Kafka partition, the offset where the node's latest
 * run of it started, and whether the run is open (the node reads the partition now). */
struct query_claim {
    int32_t partition;
    int64_t from;
    bool open;
};
/* A node's claims (any service thread): fills out, returns the count, -ENOENT (the node makes
 * none: the orders model, or not started) or -ENOSPC (more than cap). */
typedef int (*query_claims_fn)(void *user, struct query_claim *out, size_t cap);

struct query_http_config {
    const char *data_dir;           /* read-only; copied */
    const char *listen;             /* "HOST:PORT" (port 0: any), NULL for the default; copied */
    const char *token;              /* bearer token required on every path but /healthz and
                                     * /readyz, or NULL; copied */
    uint32_t range_days_max;        /* longest /v1/count range; 0: QUERY_RANGE_DAYS_DEFAULT */
    uint32_t threads;               /* 0: QUERY_HTTP_THREADS_DEFAULT */
    uint32_t connections_max;       /* 0: QUERY_HTTP_CONNECTIONS_DEFAULT */
    uint32_t connections_per_ip;    /* 0: QUERY_HTTP_CONNECTIONS_PER_IP_DEFAULT */
    uint32_t idle_timeout_s;        /* 0: QUERY_HTTP_IDLE_TIMEOUT_S_DEFAULT */
    int64_t ready_lag_max;          /* with metrics; 0: QUERY_HTTP_READY_LAG_DEFAULT */
    uint32_t ready_stall_ms;        /* with metrics; 0: QUERY_HTTP_READY_STALL_MS_DEFAULT */
    struct query_metrics *metrics;  /* a node's live figures (retained until stop), or NULL */
    struct index_builder *gsi;      /* a node's GSI builder (retained until stop): serves
                                     * /v1/customers/{id}/orders; NULL answers it with 501 */
    uint32_t consistent_timeout_ms; /* consistent=true without timeout_ms waits at most this;
                                     * 0: QUERY_CONSISTENT_TIMEOUT_MS_DEFAULT */
    query_positions_fn positions;   /* a node's (run --http), or NULL (serve): see above */
    query_generation_fn positions_generation; /* with positions */
    void *positions_user;                     /* retained until stop */
    /* A node's claims (run --http), or NULL: counts and partitions of the events model carry
     * them beside as_of, so that a router can tell two members holding one range. */
    query_claims_fn claims;
    void *claims_user; /* retained until stop */
    /* Counts fan out over every partition (query_count_request.fanout): the baseline of
     * bench_http_count; the answers are the same. */
    bool count_fanout;
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

/* ---- requests of the HTTP API (serve_request.c) --------------------------------------------- */

/* What a request asks for, validated: the node's service dispatches on it, and the router
 * validates a request exactly as a node would before it asks any node. */
enum query_endpoint {
    QUERY_EP_NONE = 0,
    QUERY_EP_COUNT,
    QUERY_EP_PARTITIONS,
    QUERY_EP_METRICS,
    QUERY_EP_HEALTHZ,
    QUERY_EP_READYZ,
    QUERY_EP_ORDERS,
    QUERY_EP_HEAT,
    QUERY_EP_ORDER,   /* /v1/orders/{order_id}: one order (the order lookup, the orders model) */
    QUERY_EP_CONSOLE, /* GET / and its assets: the live console (console.c) */
    QUERY_EP_HEAT_HISTORY, /* /v1/heat/history?seconds=N: the heat console's history */
    QUERY_EP_HEAT_STREAM,  /* /v1/heat/stream: server-sent events, one frame a heat second */
};
struct query_route {
    enum query_endpoint endpoint;     /* set as soon as the path is known, even on a later error */
    bool needs_token;                 /* every endpoint but the probes and the console, which
                                       * checks the token itself (query_console_respond) */
    struct query_count_request count; /* QUERY_EP_COUNT */
    int32_t day;                      /* QUERY_EP_PARTITIONS */
    uint32_t limit;                   /* QUERY_EP_ORDERS: 1..QUERY_ORDERS_LIMIT_MAX */
    uint32_t top;                     /* QUERY_EP_HEAT: 1..SHARD_HEAT_TOP_MAX */
    uint32_t seconds;                 /* QUERY_EP_HEAT_HISTORY: 1..SHARD_HEAT_HISTORY_S */
    struct ds_id customer;            /* QUERY_EP_ORDERS */
    struct ds_id order_id;            /* QUERY_EP_ORDER */
    bool consistent;                  /* QUERY_EP_ORDERS, QUERY_EP_ORDER, QUERY_EP_COUNT */
    uint32_t timeout_ms; /* with consistent: 1..QUERY_CONSISTENT_TIMEOUT_MS_MAX, 0 not given */
    char cursor[QUERY_ORDERS_TOKEN_CHARS_MAX + 1]; /* QUERY_EP_ORDERS; "" for the first page */
    char error[HTTP_ERROR_BYTES_MAX];              /* the message of a 4xx answer */
    bool has_token;                                /* QUERY_EP_CONSOLE: /?token=T given */
    uint32_t token_len;
    char token[HTTP_TOKEN_BYTES_MAX + 1]; /* QUERY_EP_CONSOLE: T, decoded */
};

/* Routes and validates one request: method, raw target (path and query, len bytes, not
 * NUL-terminated; it may contain NUL bytes, which are refused). Returns 0 with out filled, or
 * the HTTP status of the error (400, 404, 405, 414) with out->error set. range_days_max bounds
 * /v1/count ranges (1..QUERY_RANGE_DAYS_MAX). */
DS_MUST_USE unsigned query_route_parse(const char *method, const char *target, size_t len,
                                       uint32_t range_days_max, struct query_route *out);

/* ---- the console (console.c) ----------------------------------------------------------------- */

/* Answers a QUERY_EP_CONSOLE request (the query service and the router alike): the page when
 * the request is authorized (bearer or cookie, or no token asked), its script and style sheet
 * to anyone (public bytes, and the 401 page uses the style sheet); /?token=T
 * with the server's token: 303 to the path, setting the cookie; a wrong token or none: 401
 * with a small HTML page saying to open /?token=... (no cookie). */
enum http_result query_console_respond(struct http_request *req, const struct query_route *route);

/* The text of a console file compiled into the binary: "console.js", "console.css" or
 * "report.js" (the load test's report.html inlines the three, so its heat maps are drawn by the
 * console's own renderer), with its length in *len; NULL (and *len untouched) for another name.
 * Static storage, not NUL-terminated. */
const char *query_console_text(const char *name, size_t *len);

#endif /* DS_QUERY_H */
