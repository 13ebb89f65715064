/*
 * Private to query/: the limits of the request validator (serve_request.c), the documents of
 * consistent=true (serve_consistent.c), and the query service's own pieces shared by its files
 * (http*.c): its state, its readers and the answers every endpoint builds on. The route a
 * request asks for is public (query.h): the router validates requests exactly as a node does.
 */
#ifndef DS_QUERY_HTTP_PRIVATE_H
#define DS_QUERY_HTTP_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"
#include "query/query.h"

/* A decoded parameter name and value; a status is at most DS_STATUS_BYTES_MAX. */
#define SERVE_PARAM_NAME_BYTES_MAX 32u
#define SERVE_PARAM_VALUE_BYTES_MAX 256u
/* Parameters in one request: the richest endpoint (/v1/count) takes six. */
#define SERVE_PARAMS_MAX 8u
/* Orders per page a client may ask for: what one page of the by-customer index answers. */
#define SERVE_ORDERS_LIMIT_MAX QUERY_ORDERS_LIMIT_MAX

/* Rows per list of /v1/heat by default (?top=N, 1..SHARD_HEAT_TOP_MAX). */
#define SERVE_HEAT_TOP_DEFAULT 10u

/* What a consistent=true answer waited for (http_consistent.c renders it). */
enum serve_consistency {
    SERVE_CONSISTENCY_DURABLE = 0,  /* serve: everything durable when the request arrived */
    SERVE_CONSISTENCY_ACKNOWLEDGED, /* a node: everything the topic had acknowledged */
};
/* Why a consistent=true request is answered 503. */
enum serve_unmet {
    SERVE_UNMET_TIMEOUT = 0, /* the store (or the index) did not get there in time */
    SERVE_UNMET_REBALANCE,   /* the node's assignment changed while waiting */
    SERVE_UNMET_INDEX,       /* the store got there, the by-customer index did not in time */
};
/* A 503 of consistent=true: the positions the answer would have had to include and what the
 * store held when the wait ended. */
struct serve_unmet_wait {
    enum serve_unmet why;
    uint32_t timeout_ms;
    uint32_t count;
    const struct query_position *positions; /* count entries, borrowed */
    const int64_t *durable_next;            /* per position: the store's next offset, -1 none */
    uint64_t index_needed_seq;              /* SERVE_UNMET_INDEX: the store commit the index
                                             * must hold */
};

/* ,"consistency":"durable" or ,"consistency":"acknowledged","high_watermarks":{"P":HW,...}
 * (count positions, may be NULL for durable). Returns the length or -ENOSPC. */
DS_MUST_USE int64_t serve_consistency_json(enum serve_consistency kind,
                                           const struct query_position *positions, uint32_t count,
                                           char *dst, size_t dst_capacity);
/* Bytes serve_consistency_json needs at most for count positions. */
size_t serve_consistency_json_bound(uint32_t count);
/* The 503 document: {"error":"...","consistency":"acknowledged","timeout_ms":T,"missing":[
 * {"partition":P,"high_watermark":H,"durable_next":D|null},...]} listing every position the
 * store had not reached (SERVE_UNMET_INDEX: every position, and "index_needed_seq":S). Returns
 * the length or -ENOSPC. */
DS_MUST_USE int64_t serve_unmet_json(const struct serve_unmet_wait *w, char *dst,
                                     size_t dst_capacity);
size_t serve_unmet_json_bound(uint32_t count);
/* Whether the store's next offset has reached the position (or the node does not store it). */
bool serve_position_reached(const struct query_position *p, int64_t durable_next);

struct http_text;
/* Appends the heat series of /metrics (top rows only: bounded labels) to b (heat_render.c). */
void heat_metrics_put(const struct shard_heat_report *report, struct http_text *b);
/* Appends one growth as /v1/heat and /v1/heat/history list it (heat_render.c), with a comma
 * before it unless first: {"t":S,"day":"D","from":F,"to":T,"at":"...","reason":"..."}. */
void heat_growth_json(struct http_text *b, const struct shard_growth *growth, bool first);

/* ---- the query service's state (http.c) ---------------------------------------------------- */

/* "as_of" of every source partition the manifest knows: up to STORAGE_SOURCES_MAX entries of
 * at most 32 bytes each. */
#define SERVE_AS_OF_BYTES_MAX (STORAGE_SOURCES_MAX * 32u + 16u)
/* Write-rate observations kept, direct-mapped by (day, shard): bounded memory whatever days
 * are asked about; a collision only restarts that partition's rate. */
#define SERVE_HEAT_ENTRIES 4096u
/* A rate is computed over at least this interval between two observations. */
#define SERVE_HEAT_INTERVAL_NS 1000000000ull
/* Days of per-shard series in /metrics: the last ones present, so label cardinality stays
 * bounded by 7 * S instead of growing with history. */
#define SERVE_METRICS_RECENT_DAYS 7u
#define SERVE_METRICS_BYTES_MAX (16u * 1024 * 1024)

/* One worker's storage view (serve_reader.c). */
struct serve_reader {
    pthread_mutex_t lock;
    struct storage *st;
    struct shard_map *map;
    uint64_t seq; /* storage_commit_seq at the last shard map reload */
    char *as_of;  /* {"partition": next offset, ...} of the last refresh */
    size_t as_of_len;
    void *order_scratch; /* STORAGE_ORDER_SCRATCH_BYTES: an order's record (the order lookup) */
};

/* One partition's last observation (serve_stats.c). */
struct heat_entry {
    bool used;
    bool has_rate;
    int32_t day;
    uint32_t shard;
    uint64_t t0_ns;
    uint64_t events0;
    double rate_per_s;
};

/* The query service (http.c): its state, shared by its files. */
struct query_http {
    struct http_server *server; /* the core: socket, workers, token, answer counters */
    uint32_t range_days_max;
    int64_t ready_lag_max;
    uint32_t ready_stall_ms;
    struct query_metrics *metrics;
    struct index_builder *gsi;
    uint32_t consistent_timeout_ms;
    bool count_fanout;            /* query_http_config.count_fanout */
    query_positions_fn positions; /* NULL: consistent=true means durable at arrival */
    query_generation_fn positions_generation;
    query_claims_fn claims;
    void *claims_user;
    void *positions_user;
    /* serve (no builder here): a read-only view of DATA/gsi, opened on first use */
    char data_dir[DS_PATH_MAX];
    pthread_rwlock_t gsi_lock; /* write: open and refresh; read: queries */
    struct index_reader *gsi_reader;
    uint64_t gsi_refreshed_ns;
    uint64_t gsi_behind_since_ns; /* when the view was first seen behind the data, 0 if not */
    enum storage_model model;     /* the data directory's (fixed when it was created) */
    uint32_t reader_count;
    struct serve_reader readers[QUERY_HTTP_THREADS_MAX];
    atomic_uint reader_next;
    pthread_mutex_t heat_lock;
    struct heat_entry *heat;
};

/* ---- serve_reader.c: readers, and the pieces every answer from one shares ------------------ */

DS_MUST_USE int serve_reader_open(struct serve_reader *r, const char *dir);
void serve_reader_close(struct serve_reader *r);
/* Takes a free reader (the lock is held on return), refreshed to the last commit. */
DS_MUST_USE int serve_reader_acquire(struct query_http *h, struct serve_reader **out);
void serve_reader_release(struct serve_reader *r);
/* A storage error as 500, or 503 when a retry can succeed (-ENOMEM, -ESTALE). */
enum http_result serve_storage_error(struct http_request *c, int rc);
/* Appends text (len bytes) before the closing brace of the JSON object in body (body_len
 * bytes; capacity for it was reserved). Returns the new length. */
size_t serve_append_fields(char *body, size_t body_len, const char *text, size_t len);
/* Appends ,"as_of":{...} of r before the closing brace of the JSON object in body (len bytes;
 * capacity for it was reserved). Returns the new length. */
size_t serve_append_as_of(char *body, size_t len, const struct serve_reader *r);
/* "claims" of every Kafka partition: up to STORAGE_SOURCES_MAX entries of at most 48 bytes. */
#define SERVE_CLAIMS_BYTES_MAX (STORAGE_SOURCES_MAX * 48u + 16u)
/* Events model on a node that makes claims: appends ,"claims":{"<partition>":[from,end],...}
 * before the closing brace of the JSON object in body (len bytes; SERVE_CLAIMS_BYTES_MAX more
 * reserved), end null for an open run, else the reader's next offset of the partition (a
 * claim with nothing stored is left out). Returns the new length (len when nothing to add), or
 * -EAGAIN while the node has not loaded its claims (starting: answer 503, since a router must
 * not sum this member with another one unchecked). */
int64_t serve_append_claims(const struct query_http *h, char *body, size_t len,
                            const struct serve_reader *r);
/* The 503 of a node whose claims are not loaded yet. */
enum http_result serve_respond_starting(struct http_request *c);

/* ---- serve_wait.c: consistent=true on a node ----------------------------------------------- */

/* Between two looks at the store while a consistent read waits. A look costs a stat(2) of the
 * manifest when nothing changed; the node commits at most every commit_interval_ms (100 by
 * default), so 5 ms adds at most a twentieth of that to a wait. */
#define SERVE_CONSISTENT_STEP_NS (5u * 1000000u)
/* Kafka partitions one consistent read can wait for: every source storage can track. */
#define SERVE_POSITIONS_MAX STORAGE_SOURCES_MAX
/* The wait ended because the node's assignment changed (a rebalance). */
#define SERVE_WAIT_REBALANCED (-ECANCELED)

/* A consistent read of a node: the positions asked on arrival and what the store held. */
struct serve_wait {
    uint32_t timeout_ms;
    uint64_t deadline_ns;
    bool asked; /* the node answered its positions */
    uint64_t generation;
    uint32_t count;
    struct query_position *positions; /* owned, count entries */
    int64_t *durable_next;            /* owned: per position, the store's at the last look */
};

/* The request's timeout_ms, or the service's default. */
uint32_t serve_timeout_ms(const struct query_http *h, const struct query_route *route);
/* Asks the node, on arrival, for the high watermark of every partition it is assigned.
 * Returns 0, or the callback's code; serve_wait_end releases w either way. */
DS_MUST_USE int serve_wait_begin(struct query_http *h, const struct query_route *route,
                                 struct serve_wait *w);
void serve_wait_end(struct serve_wait *w);
/* Looks at the store until a reader's view holds every position. Returns 0 with that reader
 * held (the caller releases it), -ETIMEDOUT, SERVE_WAIT_REBALANCED, or a storage error. */
DS_MUST_USE int serve_wait_store(struct query_http *h, struct serve_wait *w,
                                 struct serve_reader **out);
/* The milliseconds left of w's timeout (0 when it passed). */
uint32_t serve_wait_left_ms(const struct serve_wait *w);
/* The 503 (or other error) of a consistent read that failed with rc; index_needed_seq is the
 * store commit the by-customer index did not reach in time (rc -ETIMEDOUT after the store
 * wait), 0 otherwise. */
enum http_result serve_respond_unmet(struct http_request *c, const struct serve_wait *w, int rc,
                                     uint64_t index_needed_seq);
/* ,"consistency":... for w (NULL: durable at arrival) into a new buffer; NULL when out of
 * memory. */
char *serve_consistency_text(const struct serve_wait *w, size_t *len);

/* ---- the endpoints (serve_read.c, serve_stats.c, serve_orders.c) --------------------------- */

enum http_result serve_count(struct query_http *h, struct http_request *c,
                             const struct query_route *route);
enum http_result serve_order(struct query_http *h, struct http_request *c,
                             const struct query_route *route);
enum http_result serve_partitions(struct query_http *h, struct http_request *c,
                                  const struct query_route *route);
enum http_result serve_metrics(struct query_http *h, struct http_request *c);
/* Why the node is not ready (/readyz's 503, written into why), or NULL when it is; *lag gets
 * the largest consumer lag (serve.c). */
const char *serve_ready(struct query_http *h, int64_t *lag, char *why, size_t why_size);
/* Appends the resource figures read on the scrape to /metrics (serve_held.c). */
void serve_held_put(struct query_http *h, struct serve_reader *r, struct http_text *b);
enum http_result serve_orders(struct query_http *h, struct http_request *c,
                              const struct query_route *route);

/* ---- serve_heat.c: the heat console's history and stream (a node) -------------------------- */

enum http_result serve_heat_history(struct query_http *h, struct http_request *c,
                                    const struct query_route *route);
enum http_result serve_heat_stream(struct query_http *h, struct http_request *c);
/* A copy of the node's latest heat report (the caller frees it), or NULL with the answer already
 * given in *answered: 501 on a server with no heat (with history: no heat history either), 503
 * before the heat's first complete second, or the out-of-memory error. */
struct shard_heat_report *serve_heat_report(struct query_http *h, struct http_request *c,
                                            bool history, enum http_result *answered);
/* The event pump's tick (http_events_tick_fn): a frame to each stream whose last frame is
 * older than the history's last complete second. */
void serve_heat_tick(void *user, struct http_server *s);

#endif /* DS_QUERY_HTTP_PRIVATE_H */
