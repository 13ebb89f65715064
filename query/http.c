/*
 * The HTTP query service on libmicrohttpd (DESIGN.md section 5).
 *
 * Threads: libmicrohttpd's epoll thread pool (cfg.threads workers, each accepting and serving
 * its own connections). Storage handles are single-threaded, so the service opens one reader
 * (a read-only struct storage and shard map) per worker, each behind a mutex; a request takes
 * the first free reader, round-robin from a shared counter, so with as many readers as workers
 * the lock is uncontended. Each reader keeps its own partition summaries (built lazily from
 * block headers and extended after refreshes).
 *
 * Freshness: every request refreshes its reader first: one stat(2) of the manifest when
 * nothing changed (about a microsecond), a re-read of the manifest tail when a commit arrived,
 * and then a reload of the shard map (a writer syncs the map before it commits data of a new
 * day, so the map read after a commit covers every committed partition). Refreshing per request
 * is what keeps counts monotonic for a client: its next request starts after its previous one
 * ended, so it always refreshes later, whichever reader serves it. Rejected: refreshing on a
 * timer every few milliseconds (two readers refreshed at different moments could answer a
 * client's consecutive requests out of order, and a stat per request is well under 1% of the
 * 250 us budget).
 *
 * consistent=true (count, orders): on a node, the service asks it (query_positions_fn) for the
 * broker's high watermark of every partition it is assigned, after the request arrived, then
 * looks at a refreshed reader every 5 ms until that reader's source offsets reach them (dead
 * letters advance offsets too) and answers from that very reader; orders then wait for the
 * index to hold the store commit that did. The deadline is the request's timeout_ms; past it,
 * or when the assignment changes mid-wait, a 503 with Retry-After names the positions still
 * missing. Without a node (serve) the guarantee is what was durable on arrival, and every
 * answer of consistent=true says which one it gave ("consistency"). Rejected: a condition
 * variable signalled by the node's commits (the service also runs beside no node, and a look
 * is a stat(2): polling keeps one mechanism for both).
 *
 * Orders model: GET /v1/orders/{id} (P2) reads the order's current version from the reader it
 * takes (storage_order_get: a keydir probe, and one read for a hit), exactly as a count does,
 * consistent=true included; a directory of the events model answers 409 (its question is valid,
 * the directory cannot answer it: no order store). A customer's page holds the index view's
 * read lock and then takes a reader to tell current versions from superseded entries. Lock
 * order: gsi_lock before a reader's mutex; nothing takes gsi_lock while it holds a reader.
 *
 * Hostile input: the raw request target is captured by the URI log callback and validated in
 * http_request.c; sizes are bounded below libmicrohttpd's own per-connection memory so our
 * JSON answers (414, 431) come first; connections are bounded in total and per address and
 * idle ones time out. The bearer token is compared in constant time.
 *
 * Rejected: a thread per connection (hundreds of idle sockets would hold hundreds of threads)
 * and one shared reader behind one lock (the count itself is ~1 us, but a refresh that re-reads
 * the manifest would stall every worker).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "index/index.h"
#include "query/http_private.h"
#include "query/mhd.h"
#include "query/text.h"

/* "as_of" of every source partition the manifest knows: up to STORAGE_SOURCES_MAX entries of
 * at most 32 bytes each. */
#define HTTP_AS_OF_BYTES_MAX (STORAGE_SOURCES_MAX * 32u + 16u)
/* Write-rate observations kept, direct-mapped by (day, shard): bounded memory whatever days
 * are asked about; a collision only restarts that partition's rate. */
#define HTTP_HEAT_ENTRIES 4096u
/* A rate is computed over at least this interval between two observations. */
#define HTTP_HEAT_INTERVAL_NS 1000000000ull
/* Days of per-shard series in /metrics: the last ones present, so label cardinality stays
 * bounded by 7 * S instead of growing with history. */
#define HTTP_METRICS_RECENT_DAYS 7u
#define HTTP_METRICS_BYTES_MAX (16u * 1024 * 1024)
#define HTTP_ADDRESS_TEXT_SIZE 300u

struct http_reader {
    pthread_mutex_t lock;
    struct storage *st;
    struct shard_map *map;
    uint64_t seq; /* storage_commit_seq at the last shard map reload */
    char *as_of;  /* {"partition": next offset, ...} of the last refresh */
    size_t as_of_len;
    void *order_scratch; /* STORAGE_ORDER_SCRATCH_BYTES: an order's record (P2) */
};

struct heat_entry {
    bool used;
    bool has_rate;
    int32_t day;
    uint32_t shard;
    uint64_t t0_ns;
    uint64_t events0;
    double rate_per_s;
};

enum http_class { HTTP_CLASS_2XX = 0, HTTP_CLASS_4XX, HTTP_CLASS_5XX, HTTP_CLASS_COUNT };

struct query_http {
    struct MHD_Daemon *daemon;
    int listen_fd;
    char address[HTTP_ADDRESS_TEXT_SIZE];
    char token[HTTP_TOKEN_BYTES_MAX + 1];
    size_t token_len;
    uint32_t range_days_max;
    int64_t ready_lag_max;
    struct query_metrics *metrics;
    struct index_builder *gsi;
    uint32_t consistent_timeout_ms;
    bool count_fanout;            /* query_http_config.count_fanout */
    query_positions_fn positions; /* NULL: consistent=true means durable at arrival */
    query_generation_fn positions_generation;
    void *positions_user;
    /* serve (no builder here): a read-only view of DATA/gsi, opened on first use */
    char data_dir[DS_PATH_MAX];
    pthread_rwlock_t gsi_lock; /* write: open and refresh; read: queries */
    struct index_reader *gsi_reader;
    uint64_t gsi_refreshed_ns;
    uint64_t gsi_behind_since_ns; /* when the view was first seen behind the data, 0 if not */
    enum storage_model model;     /* the data directory's (fixed when it was created) */
    uint32_t reader_count;
    struct http_reader readers[QUERY_HTTP_THREADS_MAX];
    atomic_uint reader_next;
    pthread_mutex_t heat_lock;
    struct heat_entry *heat;
    atomic_uint_fast64_t requests[HTTP_CLASS_COUNT];
};

/* Per request: the raw target as the client sent it, captured before libmicrohttpd decodes. */
struct http_request {
    bool validated;
    bool valid;
    struct http_route route;
    size_t target_len; /* may exceed HTTP_URI_BYTES_MAX: then only the length is kept */
    char target[HTTP_URI_BYTES_MAX + 1];
};

/* ---- readers ------------------------------------------------------------------------------- */

static void render_as_of(struct http_reader *r)
{
    size_t n = 0;
    r->as_of[n++] = '{';
    for (int32_t p = DS_SOURCE_FILE; p < (int32_t)STORAGE_SOURCES_MAX - 2; p++) {
        int64_t next = storage_source_next(r->st, p);
        if (next < 0) {
            continue;
        }
        char key[16];
        if (p == DS_SOURCE_FILE) {
            snprintf(key, sizeof(key), "file");
        } else {
            snprintf(key, sizeof(key), "%" PRId32, p);
        }
        int w = snprintf(r->as_of + n, HTTP_AS_OF_BYTES_MAX - n, "%s\"%s\":%" PRId64,
                         n > 1 ? "," : "", key, next);
        ASSERT(w > 0 && (size_t)w < HTTP_AS_OF_BYTES_MAX - n);
        n += (size_t)w;
    }
    r->as_of[n++] = '}';
    r->as_of[n] = '\0';
    r->as_of_len = n;
}

/* Brings a reader up to the last commit. Called with r->lock held. */
static int reader_refresh(struct http_reader *r)
{
    int rc = storage_refresh(r->st);
    if (rc != 0) {
        ds_log_error("serve: refreshing the storage view: %s", ds_strerror(rc));
        return rc;
    }
    uint64_t seq = storage_commit_seq(r->st);
    if (seq == r->seq && r->as_of_len > 0) {
        return 0;
    }
    rc = shard_map_reload(r->map);
    if (rc != 0) {
        ds_log_error("serve: reloading the shard map: %s", ds_strerror(rc));
        return rc;
    }
    r->seq = seq;
    render_as_of(r);
    return 0;
}

static int reader_open(struct http_reader *r, const char *dir)
{
    r->as_of = malloc(HTTP_AS_OF_BYTES_MAX);
    r->order_scratch = malloc(STORAGE_ORDER_SCRATCH_BYTES);
    if (r->as_of == NULL || r->order_scratch == NULL) {
        return -ENOMEM;
    }
    int rc = storage_open_reader(dir, &r->st);
    if (rc == 0) {
        rc = shard_map_open(dir, SHARD_COUNT_DEFAULT, SHARD_MAP_READ_ONLY, &r->map);
    }
    if (rc == 0) {
        rc = reader_refresh(r);
    }
    return rc;
}

static void reader_close(struct http_reader *r)
{
    shard_map_close(r->map);
    storage_close(r->st);
    free(r->as_of);
    free(r->order_scratch);
    r->map = NULL;
    r->st = NULL;
    r->as_of = NULL;
    r->order_scratch = NULL;
}

/* Takes a free reader (the lock is held on return), refreshed to the last commit. */
static int reader_acquire(struct query_http *h, struct http_reader **out)
{
    unsigned first = atomic_fetch_add_explicit(&h->reader_next, 1, memory_order_relaxed);
    struct http_reader *r = NULL;
    for (uint32_t i = 0; i < h->reader_count && r == NULL; i++) {
        struct http_reader *c = &h->readers[(first + i) % h->reader_count];
        if (pthread_mutex_trylock(&c->lock) == 0) {
            r = c;
        }
    }
    if (r == NULL) {
        r = &h->readers[first % h->reader_count];
        ASSERT(pthread_mutex_lock(&r->lock) == 0);
    }
    int rc = reader_refresh(r);
    if (rc != 0) {
        ASSERT(pthread_mutex_unlock(&r->lock) == 0);
        return rc;
    }
    *out = r;
    return 0;
}

static void reader_release(struct http_reader *r)
{
    ASSERT(pthread_mutex_unlock(&r->lock) == 0);
}

/* ---- answers ------------------------------------------------------------------------------- */

static enum MHD_Result respond(struct query_http *h, struct MHD_Connection *c, unsigned status,
                               char *body, size_t len, const char *content_type)
{
    static const char oom[] = "{\"error\":\"out of memory\"}";
    struct MHD_Response *resp =
        body != NULL
            ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
            : MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        free(body);
        return MHD_NO;
    }
    status = body != NULL ? status : MHD_HTTP_SERVICE_UNAVAILABLE;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, HTTP_ALLOW);
    }
    if (status == MHD_HTTP_UNAUTHORIZED) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    }
    enum http_class cls =
        status < 400 ? HTTP_CLASS_2XX : (status < 500 ? HTTP_CLASS_4XX : HTTP_CLASS_5XX);
    atomic_fetch_add_explicit(&h->requests[cls], 1, memory_order_relaxed);
    enum MHD_Result result = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return result;
}

static enum MHD_Result respond_json(struct query_http *h, struct MHD_Connection *c, unsigned status,
                                    char *body, int64_t len)
{
    ASSERT(body == NULL || len >= 0);
    return respond(h, c, status, body, body != NULL ? (size_t)len : 0, "application/json");
}

static enum MHD_Result respond_error(struct query_http *h, struct MHD_Connection *c,
                                     unsigned status, const char *message)
{
    size_t cap = strlen(message) * 6 + 32;
    char *body = malloc(cap);
    int64_t len = body != NULL ? http_error_json(message, body, cap) : 0;
    ASSERT(len >= 0);
    return respond_json(h, c, status, body, len);
}

static enum MHD_Result respond_storage_error(struct query_http *h, struct MHD_Connection *c, int rc)
{
    char message[160];
    snprintf(message, sizeof(message), "storage: %s", ds_strerror(rc));
    /* -ESTALE: a file this reader's view named was removed since (a day retention dropped, a
     * compaction's replaced segment): the next request refreshes first, so it is a retry. */
    return respond_error(h, c, rc == -ENOMEM || rc == -ESTALE ? 503 : 500, message);
}

/* A 503 of consistent=true: body (taken) with a Retry-After of retry_after_s (>= 1). */
static enum MHD_Result respond_unavailable(struct query_http *h, struct MHD_Connection *c,
                                           char *body, int64_t len, uint32_t retry_after_s)
{
    ASSERT(retry_after_s >= 1);
    if (body == NULL) {
        return respond_json(h, c, 503, NULL, 0);
    }
    ASSERT(len > 0);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer((size_t)len, body, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(body);
        return MHD_NO;
    }
    char seconds[16];
    snprintf(seconds, sizeof(seconds), "%u", retry_after_s);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, seconds);
    atomic_fetch_add_explicit(&h->requests[HTTP_CLASS_5XX], 1, memory_order_relaxed);
    enum MHD_Result result = MHD_queue_response(c, MHD_HTTP_SERVICE_UNAVAILABLE, resp);
    MHD_destroy_response(resp);
    return result;
}

/* Appends text (len bytes) before the closing brace of the JSON object in body (body_len
 * bytes; capacity for it was reserved). Returns the new length. */
static size_t append_fields(char *body, size_t body_len, const char *text, size_t len)
{
    ASSERT(body_len > 0);
    ASSERT(body[body_len - 1] == '}');
    memcpy(body + body_len - 1, text, len);
    body[body_len - 1 + len] = '}';
    body[body_len + len] = '\0';
    return body_len + len;
}

/* Appends ,"as_of":{...} before the closing brace of the JSON object in body (len bytes;
 * capacity for it was reserved). Returns the new length. */
static size_t append_as_of(char *body, size_t len, const struct http_reader *r)
{
    ASSERT(len > 0 && body[len - 1] == '}');
    static const char key[] = ",\"as_of\":";
    len--;
    memcpy(body + len, key, sizeof(key) - 1);
    len += sizeof(key) - 1;
    memcpy(body + len, r->as_of, r->as_of_len);
    len += r->as_of_len;
    body[len++] = '}';
    body[len] = '\0';
    return len;
}

/* ---- consistent=true ----------------------------------------------------------------------- */

/* Between two looks at the store while a consistent read waits. A look costs a stat(2) of the
 * manifest when nothing changed; the node commits at most every commit_interval_ms (100 by
 * default), so 5 ms adds at most a twentieth of that to a wait. */
#define HTTP_CONSISTENT_STEP_NS (5u * 1000000u)
/* Kafka partitions one consistent read can wait for: every source storage can track. */
#define HTTP_POSITIONS_MAX STORAGE_SOURCES_MAX
/* The wait ended because the node's assignment changed (a rebalance). */
#define HTTP_WAIT_REBALANCED (-ECANCELED)

/* A consistent read of a node: the positions asked on arrival and what the store held. */
struct consistent_wait {
    uint32_t timeout_ms;
    uint64_t deadline_ns;
    bool asked; /* the node answered its positions */
    uint64_t generation;
    uint32_t count;
    struct query_position *positions; /* owned, count entries */
    int64_t *durable_next;            /* owned: per position, the store's at the last look */
};

static uint32_t request_timeout_ms(const struct query_http *h, const struct http_route *route)
{
    return route->timeout_ms != 0 ? route->timeout_ms : h->consistent_timeout_ms;
}

/* Asks the node, on arrival, for the high watermark of every partition it is assigned.
 * Returns 0, or the callback's code; wait_end releases w either way. */
static int wait_begin(struct query_http *h, const struct http_route *route,
                      struct consistent_wait *w)
{
    ASSERT(h->positions != NULL);
    memset(w, 0, sizeof(*w));
    w->timeout_ms = request_timeout_ms(h, route);
    w->deadline_ns = ds_clock_ns() + (uint64_t)w->timeout_ms * 1000000u;
    w->positions = malloc(sizeof(*w->positions) * HTTP_POSITIONS_MAX);
    w->durable_next = malloc(sizeof(*w->durable_next) * HTTP_POSITIONS_MAX);
    if (w->positions == NULL || w->durable_next == NULL) {
        return -ENOMEM;
    }
    /* A node starting, joining its group or rebalancing has no assignment to ask about yet:
     * wait for one within the request's timeout (watermarks read later are at least those of
     * the arrival, so the guarantee holds), then answer 503 "retry". */
    int n = -EAGAIN;
    for (;;) {
        uint64_t now = ds_clock_ns();
        uint32_t left_ms =
            now >= w->deadline_ns ? 0u : (uint32_t)((w->deadline_ns - now) / 1000000u);
        n = h->positions(h->positions_user, w->positions, HTTP_POSITIONS_MAX,
                         left_ms > 0 ? left_ms : 1u, &w->generation);
        if (n != -EAGAIN || ds_clock_ns() >= w->deadline_ns) {
            break;
        }
        struct timespec step = {.tv_sec = 0, .tv_nsec = HTTP_CONSISTENT_STEP_NS};
        nanosleep(&step, NULL);
    }
    if (n < 0) {
        return n;
    }
    ASSERT((uint32_t)n <= HTTP_POSITIONS_MAX);
    w->asked = true;
    w->count = (uint32_t)n;
    for (uint32_t i = 0; i < w->count; i++) {
        w->durable_next[i] = -1;
    }
    return 0;
}

static void wait_end(struct consistent_wait *w)
{
    free(w->positions);
    free(w->durable_next);
}

/* One look: whether r's view holds every position; records what it holds. */
static bool wait_reached(struct consistent_wait *w, const struct http_reader *r)
{
    bool all = true;
    for (uint32_t i = 0; i < w->count; i++) {
        w->durable_next[i] = storage_source_next(r->st, w->positions[i].partition);
        all = all && http_position_reached(&w->positions[i], w->durable_next[i]);
    }
    return all;
}

/* Looks at the store until a reader's view holds every position. Returns 0 with that reader
 * held (the answer must come from the very view that held them; the caller releases it),
 * -ETIMEDOUT, HTTP_WAIT_REBALANCED, or a storage error. Never a busy loop: a look, then a
 * sleep of HTTP_CONSISTENT_STEP_NS without any lock. */
static int wait_store(struct query_http *h, struct consistent_wait *w, struct http_reader **out)
{
    ASSERT(w->asked);
    for (;;) { /* bounded by the deadline */
        struct http_reader *r = NULL;
        int rc = reader_acquire(h, &r);
        if (rc != 0) {
            return rc;
        }
        if (wait_reached(w, r)) {
            *out = r;
            return 0;
        }
        reader_release(r);
        /* Partitions revoked mid-wait will not reach their positions here: say so at once. */
        if (h->positions_generation(h->positions_user) != w->generation) {
            return HTTP_WAIT_REBALANCED;
        }
        if (ds_clock_ns() >= w->deadline_ns) {
            return -ETIMEDOUT;
        }
        struct timespec step = {.tv_sec = 0, .tv_nsec = HTTP_CONSISTENT_STEP_NS};
        nanosleep(&step, NULL);
    }
}

/* The milliseconds left of w's timeout (0 when it passed). */
static uint32_t wait_left_ms(const struct consistent_wait *w)
{
    uint64_t now = ds_clock_ns();
    return now >= w->deadline_ns ? 0u : (uint32_t)((w->deadline_ns - now) / 1000000u);
}

/* The 503 (or other error) of a consistent read that failed with rc; index_needed_seq is the
 * store commit the by-customer index did not reach in time (rc -ETIMEDOUT after the store
 * wait), 0 otherwise. */
static enum MHD_Result respond_unmet(struct query_http *h, struct MHD_Connection *c,
                                     const struct consistent_wait *w, int rc,
                                     uint64_t index_needed_seq)
{
    uint32_t retry_s = w->timeout_ms >= 1000u ? (w->timeout_ms + 999u) / 1000u : 1u;
    char text[HTTP_ERROR_BYTES_MAX];
    if (!w->asked && rc != -ENOMEM) {
        if (rc == -EAGAIN) {
            snprintf(text, sizeof(text),
                     "the node is not consuming now (starting, joining its "
                     "consumer group, rebalancing or stopping): retry");
        } else if (rc == -ETIMEDOUT) {
            snprintf(text, sizeof(text),
                     "the broker did not report the high watermarks within "
                     "timeout_ms %u",
                     w->timeout_ms);
        } else if (rc == -ENOSPC) {
            snprintf(text, sizeof(text), "the node is assigned more than %u partitions",
                     HTTP_POSITIONS_MAX);
        } else {
            snprintf(text, sizeof(text), "the broker: %s", ds_strerror(rc));
        }
        char *body = malloc(HTTP_ERROR_BYTES_MAX * 2u);
        int64_t len = body != NULL ? http_error_json(text, body, HTTP_ERROR_BYTES_MAX * 2u) : 0;
        ASSERT(len >= 0);
        return respond_unavailable(h, c, body, len, rc == -ETIMEDOUT ? retry_s : 1u);
    }
    if (rc != -ETIMEDOUT && rc != HTTP_WAIT_REBALANCED) {
        return respond_storage_error(h, c, rc);
    }
    struct http_unmet_wait unmet = {
        .why = rc == HTTP_WAIT_REBALANCED
                   ? HTTP_UNMET_REBALANCE
                   : (index_needed_seq > 0 ? HTTP_UNMET_INDEX : HTTP_UNMET_TIMEOUT),
        .timeout_ms = w->timeout_ms,
        .count = w->count,
        .positions = w->positions,
        .durable_next = w->durable_next,
        .index_needed_seq = index_needed_seq};
    size_t cap = http_unmet_json_bound(w->count);
    char *body = malloc(cap);
    int64_t len = body != NULL ? http_unmet_json(&unmet, body, cap) : 0;
    ASSERT(len >= 0);
    return respond_unavailable(h, c, body, len, rc == -ETIMEDOUT ? retry_s : 1u);
}

/* ,"consistency":... for w (NULL: durable at arrival) into a new buffer; NULL when out of
 * memory. */
static char *consistency_text(const struct consistent_wait *w, size_t *len)
{
    uint32_t count = w != NULL ? w->count : 0;
    size_t cap = http_consistency_json_bound(count);
    char *text = malloc(cap);
    if (text == NULL) {
        return NULL;
    }
    int64_t n =
        http_consistency_json(w != NULL ? HTTP_CONSISTENCY_ACKNOWLEDGED : HTTP_CONSISTENCY_DURABLE,
                              w != NULL ? w->positions : NULL, count, text, cap);
    ASSERT(n > 0);
    *len = (size_t)n;
    return text;
}

/* ---- /v1/count ----------------------------------------------------------------------------- */

/* Counts on r (held; released here) and answers, with the consistency field when given. */
static enum MHD_Result count_answer(struct query_http *h, struct MHD_Connection *c,
                                    const struct http_route *route, struct http_reader *r,
                                    const char *consistency, size_t consistency_len)
{
    struct query_count_result res;
    struct query_count_request req = route->count;
    req.fanout = req.fanout || h->count_fanout;
    int rc = query_count(r->st, r->map, &req, &res);
    if (rc != 0) {
        reader_release(r);
        return respond_storage_error(h, c, rc);
    }
    size_t cap = query_count_json_bound(&res) + r->as_of_len + consistency_len + 16;
    char *body = malloc(cap);
    int64_t len = -ENOMEM;
    if (body != NULL) {
        len = query_count_json(&route->count, &res, body, cap);
        ASSERT(len > 0);
        len = (int64_t)append_as_of(body, (size_t)len, r);
        if (consistency != NULL) {
            len = (int64_t)append_fields(body, (size_t)len, consistency, consistency_len);
        }
    }
    reader_release(r);
    query_count_result_deinit(&res);
    return respond_json(h, c, 200, body, len);
}

/* An answer read from one reader's view (a count, an order): r is held and released by it;
 * consistency (consistency_len bytes, or NULL) is the field a consistent=true answer carries. */
typedef enum MHD_Result (*reader_answer_fn)(struct query_http *h, struct MHD_Connection *c,
                                            const struct http_route *route, struct http_reader *r,
                                            const char *consistency, size_t consistency_len);

/* consistent=true on a node: waits until the store holds every acknowledged position, then
 * answers from the very reader that held them. */
static enum MHD_Result serve_acknowledged(struct query_http *h, struct MHD_Connection *c,
                                          const struct http_route *route, reader_answer_fn answer)
{
    struct consistent_wait w;
    struct http_reader *r = NULL;
    int rc = wait_begin(h, route, &w);
    rc = rc == 0 ? wait_store(h, &w, &r) : rc;
    size_t text_len = 0;
    char *text = rc == 0 ? consistency_text(&w, &text_len) : NULL;
    enum MHD_Result result;
    if (rc != 0) {
        result = respond_unmet(h, c, &w, rc, 0);
    } else if (text == NULL) {
        reader_release(r);
        result = respond_storage_error(h, c, -ENOMEM);
    } else {
        result = answer(h, c, route, r, text, text_len);
    }
    free(text);
    wait_end(&w);
    return result;
}

/* A count or an order: from a reader refreshed on arrival, or for consistent=true on a node
 * after the wait for the acknowledged positions. */
static enum MHD_Result serve_from_reader(struct query_http *h, struct MHD_Connection *c,
                                         const struct http_route *route, reader_answer_fn answer)
{
    if (route->consistent && h->positions != NULL) {
        return serve_acknowledged(h, c, route, answer);
    }
    struct http_reader *r = NULL;
    int rc = reader_acquire(h, &r);
    if (rc != 0) {
        return respond_storage_error(h, c, rc);
    }
    /* Without a node, a reader refreshed on arrival holds everything durable then: what every
     * count gives, said explicitly when asked for. */
    size_t text_len = 0;
    char *text = route->consistent ? consistency_text(NULL, &text_len) : NULL;
    if (route->consistent && text == NULL) {
        reader_release(r);
        return respond_storage_error(h, c, -ENOMEM);
    }
    enum MHD_Result result = answer(h, c, route, r, text, text_len);
    free(text);
    return result;
}

/* ---- /v1/orders/{id} (P2) ------------------------------------------------------------------ */

/* 404 naming the order: {"error":"no order ID","order_id":ID}. */
static enum MHD_Result respond_no_order(struct query_http *h, struct MHD_Connection *c,
                                        const struct ds_id *id)
{
    char id_json[6u * DS_ID_BYTES_MAX + 3];
    int64_t n = query_id_json(id, id_json, sizeof(id_json));
    ASSERT(n > 0);
    char message[sizeof(id_json) + 32];
    snprintf(message, sizeof(message), "no order %s", id_json);
    size_t cap = 2u * sizeof(message) * 6u + 32u;
    char *body = malloc(cap);
    int64_t len = body != NULL ? http_error_json(message, body, cap) : 0;
    ASSERT(len > 0 || body == NULL);
    if (body != NULL) {
        char field[sizeof(id_json) + 16];
        int f = snprintf(field, sizeof(field), ",\"order_id\":%s", id_json);
        ASSERT(f > 0 && (size_t)f < sizeof(field));
        len = (int64_t)append_fields(body, (size_t)len, field, (size_t)f);
    }
    return respond_json(h, c, 404, body, len);
}

/* The order lookup on r (held; released here): the order's current version as r's view holds
 * it, with as_of and the consistency field like a count. */
static enum MHD_Result order_answer(struct query_http *h, struct MHD_Connection *c,
                                    const struct http_route *route, struct http_reader *r,
                                    const char *consistency, size_t consistency_len)
{
    struct storage_order order;
    int rc = storage_model(r->st) == STORAGE_MODEL_ORDERS
                 ? storage_order_get(r->st, &route->order_id, &order, r->order_scratch,
                                     STORAGE_ORDER_SCRATCH_BYTES)
                 : -DS_EUSAGE;
    if (rc != 0) {
        reader_release(r);
        if (rc == -ENOENT) {
            return respond_no_order(h, c, &route->order_id);
        }
        return rc == -DS_EUSAGE
                   ? respond_error(h, c, 409,
                                   "the order lookup needs the orders model: this data directory "
                                   "counts events (it was created with --model events)")
                   : respond_storage_error(h, c, rc);
    }
    size_t cap = query_order_json_bound(&order) + r->as_of_len + consistency_len + 16;
    char *body = malloc(cap);
    int64_t len = body != NULL ? query_order_json(&order, body, cap) : -ENOMEM;
    if (len > 0) {
        len = (int64_t)append_as_of(body, (size_t)len, r);
        if (consistency != NULL) {
            len = (int64_t)append_fields(body, (size_t)len, consistency, consistency_len);
        }
    }
    reader_release(r);
    if (len < 0) {
        ASSERT(len != -ENOSPC); /* the bound holds */
        free(body);
        return respond_storage_error(h, c, (int)len);
    }
    return respond_json(h, c, 200, body, len);
}

/* ---- partition heat ------------------------------------------------------------------------ */

/* Records an observation of a partition's event count and returns its write rate (events/s
 * between the two latest observations at least HTTP_HEAT_INTERVAL_NS apart), or -1 when no
 * rate is known yet. */
static double heat_observe(struct query_http *h, int32_t day, uint32_t shard, uint64_t events,
                           uint64_t now_ns)
{
    uint64_t key = shard_fnv1a64(&day, sizeof(day)) ^ ((uint64_t)shard * 0x9e3779b97f4a7c15ull);
    struct heat_entry *e = &h->heat[key % HTTP_HEAT_ENTRIES];
    ASSERT(pthread_mutex_lock(&h->heat_lock) == 0);
    if (!e->used || e->day != day || e->shard != shard || events < e->events0) {
        *e = (struct heat_entry){
            .used = true, .day = day, .shard = shard, .t0_ns = now_ns, .events0 = events};
    } else if (now_ns - e->t0_ns >= HTTP_HEAT_INTERVAL_NS) {
        e->rate_per_s = (double)(events - e->events0) * 1e9 / (double)(now_ns - e->t0_ns);
        e->has_rate = true;
        e->t0_ns = now_ns;
        e->events0 = events;
    }
    double rate = e->has_rate ? e->rate_per_s : -1.0;
    ASSERT(pthread_mutex_unlock(&h->heat_lock) == 0);
    return rate;
}

static int put_partition(char *dst, size_t cap, int32_t day, uint32_t shard,
                         const struct storage_partition_total *t, double rate)
{
    char key[SHARD_KEY_TEXT_SIZE];
    char rate_text[32];
    shard_key_format(day, shard, key);
    if (rate < 0) {
        snprintf(rate_text, sizeof(rate_text), "null");
    } else {
        snprintf(rate_text, sizeof(rate_text), "%.1f", rate);
    }
    return snprintf(dst, cap,
                    "%s{\"shard\":%u,\"partition\":\"%s\",\"events\":%" PRIu64 ",\"bytes\":%" PRIu64
                    ",\"blocks\":%" PRIu64 ",\"write_rate_per_s\":%s}",
                    shard == 0 ? "" : ",", shard, key, t->count, t->bytes, t->blocks, rate_text);
}

/* Renders /v1/partitions for the reader's view. Returns the length or a negative code. */
static int64_t render_partitions(struct query_http *h, struct http_reader *r, int32_t day,
                                 char *body, size_t cap)
{
    uint32_t shards = shard_map_get(r->map, day);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    int n = snprintf(body, cap, "{\"day\":\"%s\",\"shards\":%u,\"partitions\":[", date, shards);
    size_t len = (size_t)n;
    uint64_t now_ns = ds_clock_ns();
    for (uint32_t shard = 0; shard < shards; shard++) {
        struct storage_partition_total t;
        int rc = storage_partition_totals(r->st, day, shard, NULL, 0, &t);
        if (rc != 0) {
            return rc;
        }
        double rate = heat_observe(h, day, shard, t.count, now_ns);
        n = put_partition(body + len, cap - len, day, shard, &t, rate);
        ASSERT(n > 0 && (size_t)n < cap - len);
        len += (size_t)n;
    }
    ASSERT(len + 3 < cap);
    memcpy(body + len, "]}", 3);
    return (int64_t)append_as_of(body, len + 2, r);
}

static enum MHD_Result serve_partitions(struct query_http *h, struct MHD_Connection *c,
                                        const struct http_route *route)
{
    struct http_reader *r = NULL;
    int rc = reader_acquire(h, &r);
    if (rc != 0) {
        return respond_storage_error(h, c, rc);
    }
    size_t cap = 128u + (size_t)shard_map_get(r->map, route->day) * 192u + r->as_of_len;
    char *body = malloc(cap);
    int64_t len = body != NULL ? render_partitions(h, r, route->day, body, cap) : -ENOMEM;
    reader_release(r);
    if (len < 0) {
        free(body);
        return respond_storage_error(h, c, (int)len);
    }
    return respond_json(h, c, 200, body, len);
}

/* ---- /metrics ------------------------------------------------------------------------------ */

struct recent_days {
    uint32_t count;
    int32_t days[HTTP_METRICS_RECENT_DAYS];
    uint32_t shards[HTTP_METRICS_RECENT_DAYS];
};

static int keep_recent(int32_t day, uint32_t shard_count, void *user)
{
    struct recent_days *recent = user;
    if (recent->count == HTTP_METRICS_RECENT_DAYS) {
        memmove(recent->days, recent->days + 1, sizeof(recent->days[0]) * (recent->count - 1));
        memmove(recent->shards, recent->shards + 1,
                sizeof(recent->shards[0]) * (recent->count - 1));
        recent->count--;
    }
    recent->days[recent->count] = day;
    recent->shards[recent->count] = shard_count;
    recent->count++;
    return 0;
}

enum recent_series { SERIES_EVENTS = 0, SERIES_BYTES, SERIES_RATE, SERIES_COUNT };

/* One metric family over the recent days' shards (the exposition format wants each family's
 * samples together, so the partitions are visited once per family; their totals are cached). */
static int put_recent_series(struct query_http *h, struct http_reader *r,
                             const struct recent_days *recent, enum recent_series series,
                             struct text_buf *b)
{
    static const char *const names[SERIES_COUNT] = {
        "dayshard_partition_events", "dayshard_partition_bytes", "dayshard_partition_write_rate"};
    static const char *const help[SERIES_COUNT] = {
        "Events stored per shard of the most recent days.",
        "Bytes stored per shard of the most recent days.",
        "Events per second written per shard, between two observations of the service."};
    text_put(b, "# HELP %s %s\n# TYPE %s gauge\n", names[series], help[series], names[series]);
    uint64_t now_ns = ds_clock_ns();
    for (uint32_t i = 0; i < recent->count; i++) {
        char date[DS_DATE_TEXT_SIZE];
        ds_date_format(recent->days[i], date);
        for (uint32_t shard = 0; shard < recent->shards[i]; shard++) {
            struct storage_partition_total t;
            int rc = storage_partition_totals(r->st, recent->days[i], shard, NULL, 0, &t);
            if (rc != 0) {
                return rc;
            }
            double rate = series == SERIES_RATE
                              ? heat_observe(h, recent->days[i], shard, t.count, now_ns)
                              : 0.0;
            if (series == SERIES_EVENTS || series == SERIES_BYTES) {
                text_put(b, "%s{day=\"%s\",shard=\"%u\"} %" PRIu64 "\n", names[series], date, shard,
                         series == SERIES_EVENTS ? t.count : t.bytes);
            } else if (rate >= 0) {
                text_put(b, "%s{day=\"%s\",shard=\"%u\"} %.1f\n", names[series], date, shard, rate);
            }
        }
    }
    return 0;
}

static int put_recent_partitions(struct query_http *h, struct http_reader *r, struct text_buf *b)
{
    struct recent_days recent = {0};
    (void)shard_map_visit(r->map, keep_recent, &recent);
    for (uint32_t series = 0; series < SERIES_COUNT; series++) {
        int rc = put_recent_series(h, r, &recent, (enum recent_series)series, b);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static void put_sources(struct http_reader *r, struct text_buf *b)
{
    text_put(b,
             "# HELP dayshard_storage_commit_seq Sequence number of the last durable commit.\n"
             "# TYPE dayshard_storage_commit_seq gauge\ndayshard_storage_commit_seq %" PRIu64 "\n"
             "# HELP dayshard_source_next_offset Next source offset after the durable data.\n"
             "# TYPE dayshard_source_next_offset gauge\n",
             storage_commit_seq(r->st));
    for (int32_t p = DS_SOURCE_FILE; p < (int32_t)STORAGE_SOURCES_MAX - 2; p++) {
        int64_t next = storage_source_next(r->st, p);
        if (next < 0) {
            continue;
        }
        if (p == DS_SOURCE_FILE) {
            text_put(b, "dayshard_source_next_offset{partition=\"file\"} %" PRId64 "\n", next);
        } else {
            text_put(b, "dayshard_source_next_offset{partition=\"%" PRId32 "\"} %" PRId64 "\n", p,
                     next);
        }
    }
}

static void put_http_counters(struct query_http *h, struct text_buf *b)
{
    static const char *const names[HTTP_CLASS_COUNT] = {"2xx", "4xx", "5xx"};
    text_put(b, "# HELP dayshard_http_requests_total HTTP answers by status class.\n"
                "# TYPE dayshard_http_requests_total counter\n");
    for (uint32_t i = 0; i < HTTP_CLASS_COUNT; i++) {
        text_put(b, "dayshard_http_requests_total{code=\"%s\"} %" PRIuFAST64 "\n", names[i],
                 atomic_load_explicit(&h->requests[i], memory_order_relaxed));
    }
}

/* Renders /metrics into b. Returns 0, or a storage error. */
static int render_metrics(struct query_http *h, struct http_reader *r, struct text_buf *b,
                          struct shard_heat_report *heat)
{
    if (h->metrics != NULL) {
        int64_t n = query_metrics_text(h->metrics, b->dst, b->capacity);
        if (n < 0) {
            b->overflow = true;
            return 0;
        }
        b->len = (size_t)n;
    }
    put_sources(r, b);
    put_http_counters(h, b);
    if (h->metrics != NULL && heat != NULL && query_metrics_heat_get(h->metrics, heat)) {
        heat_metrics_put(heat, b);
    }
    return put_recent_partitions(h, r, b);
}

static enum MHD_Result serve_metrics(struct query_http *h, struct MHD_Connection *c)
{
    struct http_reader *r = NULL;
    int rc = reader_acquire(h, &r);
    if (rc != 0) {
        return respond_storage_error(h, c, rc);
    }
    struct text_buf b = {.capacity = 64u * 1024};
    /* Without a node there is no heat to copy. */
    struct shard_heat_report *heat = h->metrics != NULL ? malloc(sizeof(*heat)) : NULL;
    for (;;) { /* doubles the buffer until the text fits, at most HTTP_METRICS_BYTES_MAX */
        b.dst = malloc(b.capacity);
        b.len = 0;
        b.overflow = false;
        rc = b.dst != NULL ? render_metrics(h, r, &b, heat) : -ENOMEM;
        if (rc != 0 || !b.overflow || b.capacity >= HTTP_METRICS_BYTES_MAX) {
            break;
        }
        free(b.dst);
        b.capacity *= 2;
    }
    reader_release(r);
    free(heat);
    if (rc != 0 || b.overflow) {
        free(b.dst);
        return respond_storage_error(h, c, rc != 0 ? rc : -ENOSPC);
    }
    return respond(h, c, 200, b.dst, b.len, "text/plain; version=0.0.4");
}

/* ---- probes and the not-yet-built index ---------------------------------------------------- */

static enum MHD_Result serve_readyz(struct query_http *h, struct MHD_Connection *c)
{
    int64_t lag = h->metrics != NULL ? query_metrics_lag_max(h->metrics) : 0;
    char text[160];
    if (h->metrics != NULL && !atomic_load_explicit(&h->metrics->joined, memory_order_relaxed)) {
        return respond_error(h, c, 503, "the node has not joined its consumer group yet");
    }
    if (lag > h->ready_lag_max) {
        snprintf(text, sizeof(text), "consumer lag %" PRId64 " exceeds %" PRId64, lag,
                 h->ready_lag_max);
        return respond_error(h, c, 503, text);
    }
    int n = snprintf(text, sizeof(text), "{\"ready\":true,\"consumer_lag\":%" PRId64 "}", lag);
    return respond_json(h, c, 200, strdup(text), n);
}

/* ---- a customer's orders (the GSI) -------------------------------------------------------- */

/* The view refreshes at most this often, or at once for consistent=true. */
#define HTTP_GSI_REFRESH_NS (100u * 1000000u)

/* serve: opens (first use) and refreshes the view of the node's index until it holds every
 * commit up to want_seq (0: no wait; index_reader_wait) or timeout_ms pass; estimates the
 * lag against durable_seq. On 0 the caller holds the read lock and must unlock it. */
static int gsi_view(struct query_http *h, uint64_t durable_seq, uint64_t want_seq,
                    uint32_t timeout_ms, uint64_t *lag_ms)
{
    ASSERT(pthread_rwlock_wrlock(&h->gsi_lock) == 0);
    int rc = h->gsi_reader == NULL ? index_reader_open(h->data_dir, &h->gsi_reader) : 0;
    uint64_t now = ds_clock_ns();
    bool refresh = rc == 0 && (want_seq > 0 || now - h->gsi_refreshed_ns >= HTTP_GSI_REFRESH_NS);
    h->gsi_refreshed_ns = refresh ? now : h->gsi_refreshed_ns;
    uint64_t indexed = 0;
    if (rc == 0 && !refresh) {
        rc = index_reader_indexed_seq(h->gsi_reader, &indexed);
    }
    ASSERT(pthread_rwlock_unlock(&h->gsi_lock) == 0);
    if (rc == 0 && refresh) {
        rc = index_reader_wait(h->gsi_reader, want_seq, timeout_ms, &h->gsi_lock, &indexed);
    }
    if (rc != 0) {
        return rc;
    }
    ASSERT(pthread_rwlock_wrlock(&h->gsi_lock) == 0);
    now = ds_clock_ns();
    if (indexed >= durable_seq) {
        h->gsi_behind_since_ns = 0;
    } else if (h->gsi_behind_since_ns == 0) {
        h->gsi_behind_since_ns = now;
    }
    *lag_ms = h->gsi_behind_since_ns == 0 ? 0 : (now - h->gsi_behind_since_ns) / 1000000u;
    ASSERT(pthread_rwlock_unlock(&h->gsi_lock) == 0);
    ASSERT(pthread_rwlock_rdlock(&h->gsi_lock) == 0);
    return 0;
}

/* The storage commit a request sees on arrival: everything durable then. */
static int durable_seq(struct query_http *h, uint64_t *seq)
{
    struct http_reader *r = NULL;
    int rc = reader_acquire(h, &r);
    if (rc == 0) {
        *seq = storage_commit_seq(r->st);
        reader_release(r);
    }
    return rc;
}

/* What a page of orders answers besides the page: the index lag, the consistency field of
 * consistent=true (NULL without), and the wait of a node's consistent read (NULL otherwise). */
struct orders_extra {
    uint64_t lag_ms;
    const char *consistency;
    size_t consistency_len;
    const struct consistent_wait *wait;
};

/* Answers one page of route's customer from gsi; releases `held` (a read lock on the view,
 * or NULL) once the index was read. */
static enum MHD_Result respond_orders(struct query_http *h, struct MHD_Connection *c,
                                      const struct http_route *route, struct index *gsi,
                                      const struct orders_extra *extra, pthread_rwlock_t *held)
{
    struct query_orders_page page = {.orders = calloc(route->limit, sizeof(struct query_order))};
    int rc = page.orders == NULL ? -ENOMEM : 0;
    /* The orders model lists an entry only when it is its order's current version: a reader
     * taken now (after the index view, so at least as recent) says which. */
    struct http_reader *r = NULL;
    if (rc == 0 && h->model == STORAGE_MODEL_ORDERS) {
        rc = reader_acquire(h, &r);
    }
    if (rc == 0) {
        rc = query_orders_get(gsi, r != NULL ? r->st : NULL, &route->customer, route->limit,
                              route->cursor, &page);
    }
    if (r != NULL) {
        reader_release(r);
    }
    if (held != NULL) {
        ASSERT(pthread_rwlock_unlock(held) == 0);
    }
    if (rc != 0) {
        free(page.orders);
        return rc == -DS_EUSAGE
                   ? respond_error(h, c, 400, "bad cursor: not one this service handed out")
                   : respond_storage_error(h, c, rc);
    }
    size_t cap = query_orders_json_bound(page.count) + extra->consistency_len;
    char *body = malloc(cap);
    int64_t len = -ENOMEM;
    if (body != NULL) {
        len = query_orders_json(&route->customer, &page, extra->lag_ms, body, cap);
        ASSERT(len > 0);
        if (extra->consistency != NULL) {
            len = (int64_t)append_fields(body, (size_t)len, extra->consistency,
                                         extra->consistency_len);
        }
    }
    free(page.orders);
    return respond_json(h, c, 200, body, len);
}

/* A consistent read whose index did not hold want_seq within timeout_ms. */
static enum MHD_Result respond_not_caught_up(struct query_http *h, struct MHD_Connection *c,
                                             const struct orders_extra *extra, uint64_t want_seq,
                                             uint32_t timeout_ms)
{
    if (extra->wait != NULL) {
        return respond_unmet(h, c, extra->wait, -ETIMEDOUT, want_seq);
    }
    char text[HTTP_ERROR_BYTES_MAX];
    snprintf(text, sizeof(text),
             "the by-customer index did not hold store commit %" PRIu64 " within timeout_ms %u",
             want_seq, timeout_ms);
    char *body = malloc(HTTP_ERROR_BYTES_MAX * 2u);
    int64_t len = body != NULL ? http_error_json(text, body, HTTP_ERROR_BYTES_MAX * 2u) : 0;
    ASSERT(len >= 0);
    return respond_unavailable(h, c, body, len,
                               timeout_ms >= 1000u ? (timeout_ms + 999u) / 1000u : 1u);
}

/* A page from the node's builder (run --http) or from a view of the node's index (serve),
 * after waiting (timeout_ms) until it holds store commit want_seq (0: no wait); durable_seq is
 * the store's commit on arrival, for the lag estimate of a view. */
static enum MHD_Result orders_at(struct query_http *h, struct MHD_Connection *c,
                                 const struct http_route *route, uint64_t durable_seq,
                                 uint64_t want_seq, uint32_t timeout_ms, struct orders_extra *extra)
{
    if (h->gsi == NULL) {
        int rc = gsi_view(h, durable_seq, want_seq, timeout_ms, &extra->lag_ms);
        if (rc == -ENOENT) {
            return respond_error(h, c, 503,
                                 "no by-customer index in this data directory yet (the node "
                                 "builds it; it runs without --no-gsi)");
        }
        if (rc != 0) {
            return rc == -ETIMEDOUT ? respond_not_caught_up(h, c, extra, want_seq, timeout_ms)
                                    : respond_storage_error(h, c, rc);
        }
        return respond_orders(h, c, route, index_reader_store(h->gsi_reader), extra, &h->gsi_lock);
    }
    if (want_seq > 0) {
        int rc = index_builder_wait(h->gsi, want_seq, timeout_ms);
        if (rc != 0) {
            return rc == -ETIMEDOUT ? respond_not_caught_up(h, c, extra, want_seq, timeout_ms)
                                    : respond_storage_error(h, c, rc);
        }
    }
    uint64_t lag_events = 0;
    index_builder_lag(h->gsi, &extra->lag_ms, &lag_events);
    return respond_orders(h, c, route, index_builder_store(h->gsi), extra, NULL);
}

/* consistent=true on a node: the store must hold every acknowledged position, then the index
 * the store commit that held them, all within the request's timeout. */
static enum MHD_Result serve_orders_acknowledged(struct query_http *h, struct MHD_Connection *c,
                                                 const struct http_route *route)
{
    struct consistent_wait w;
    struct http_reader *r = NULL;
    int rc = wait_begin(h, route, &w);
    rc = rc == 0 ? wait_store(h, &w, &r) : rc;
    if (rc != 0) {
        enum MHD_Result result = respond_unmet(h, c, &w, rc, 0);
        wait_end(&w);
        return result;
    }
    uint64_t seq = storage_commit_seq(r->st);
    reader_release(r);
    struct orders_extra extra = {.wait = &w};
    char *text = consistency_text(&w, &extra.consistency_len);
    extra.consistency = text;
    enum MHD_Result result = text != NULL
                                 ? orders_at(h, c, route, seq, seq, wait_left_ms(&w), &extra)
                                 : respond_storage_error(h, c, -ENOMEM);
    free(text);
    wait_end(&w);
    return result;
}

/* The orders endpoint. consistent=true without a node waits for what was durable on arrival. */
static enum MHD_Result serve_orders(struct query_http *h, struct MHD_Connection *c,
                                    const struct http_route *route)
{
    if (route->consistent && h->positions != NULL) {
        return serve_orders_acknowledged(h, c, route);
    }
    uint64_t seq = 0;
    int rc = durable_seq(h, &seq);
    if (rc != 0) {
        return respond_storage_error(h, c, rc);
    }
    struct orders_extra extra = {0};
    char *text = route->consistent ? consistency_text(NULL, &extra.consistency_len) : NULL;
    if (route->consistent && text == NULL) {
        return respond_storage_error(h, c, -ENOMEM);
    }
    extra.consistency = text;
    enum MHD_Result result = orders_at(h, c, route, seq, route->consistent ? seq : 0,
                                       request_timeout_ms(h, route), &extra);
    free(text);
    return result;
}

/* ---- /v1/heat ------------------------------------------------------------------------------ */

/* Heat is measured by a node's consumer thread: `serve` (no node) answers 501, like the orders
 * of a node without an index; a node before its first second of heat answers 503. */
static enum MHD_Result serve_heat(struct query_http *h, struct MHD_Connection *c,
                                  const struct http_route *route)
{
    if (h->metrics == NULL) {
        return respond_error(h, c, 501,
                             "heat is measured by a node: ask the --http address of `dayshard "
                             "run`, not `dayshard serve`");
    }
    struct shard_heat_report *report = malloc(sizeof(*report));
    if (report == NULL) {
        return respond_storage_error(h, c, -ENOMEM);
    }
    if (!query_metrics_heat_get(h->metrics, report)) {
        free(report);
        return respond_error(h, c, 503, "no heat yet: the node has not completed a second");
    }
    size_t cap = query_heat_json_bound();
    char *body = malloc(cap);
    int64_t len = body != NULL ? query_heat_json(report, h->metrics, route->top, body, cap) : 0;
    free(report);
    ASSERT(len >= 0);
    return respond_json(h, c, 200, body, len);
}

static enum MHD_Result dispatch(struct query_http *h, struct MHD_Connection *c,
                                const struct http_route *route)
{
    switch (route->endpoint) {
    case HTTP_EP_COUNT: return serve_from_reader(h, c, route, count_answer);
    case HTTP_EP_ORDER: return serve_from_reader(h, c, route, order_answer);
    case HTTP_EP_PARTITIONS: return serve_partitions(h, c, route);
    case HTTP_EP_METRICS: return serve_metrics(h, c);
    case HTTP_EP_READYZ: return serve_readyz(h, c);
    case HTTP_EP_HEALTHZ: return respond_json(h, c, 200, strdup("{\"status\":\"ok\"}"), 15);
    case HTTP_EP_ORDERS: return serve_orders(h, c, route);
    case HTTP_EP_HEAT: return serve_heat(h, c, route);
    case HTTP_EP_NONE: break;
    }
    ASSERT(false);
    return MHD_NO;
}

/* ---- libmicrohttpd callbacks --------------------------------------------------------------- */

static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind, const char *key,
                                        size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    (void)key;
    (void)value;
    size_t *total = cls;
    *total += key_size + value_size + 4;
    return MHD_YES;
}

static bool token_ok(const struct query_http *h, struct MHD_Connection *c)
{
    return http_bearer_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                          h->token, h->token_len);
}

/* First call of a request (headers read): validates it. An error is answered at once (the
 * connection then closes, which also drops any body); a valid request is answered on the last
 * call, after the body (if any) was drained, so that the connection can be kept alive. */
static enum MHD_Result handle_first(struct query_http *h, struct MHD_Connection *c,
                                    const char *method, struct http_request *req)
{
    req->validated = true;
    size_t header_bytes = 0;
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, add_header_bytes, &header_bytes);
    if (header_bytes > HTTP_HEADERS_BYTES_MAX) {
        return respond_error(h, c, 431, "request headers larger than 8192 bytes");
    }
    struct http_route *route = &req->route;
    unsigned status =
        http_route_parse(method, req->target, req->target_len, h->range_days_max, route);
    if (status == 404 || status == 405 || status == 414 || route->endpoint == HTTP_EP_NONE) {
        return respond_error(h, c, status, route->error);
    }
    if (h->token_len > 0 && route->needs_token && !token_ok(h, c)) {
        return respond_error(h, c, 401, "missing or wrong bearer token");
    }
    if (status != 0) {
        return respond_error(h, c, status, route->error);
    }
    req->valid = true;
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)url;
    (void)version;
    (void)upload_data;
    struct query_http *h = cls;
    struct http_request *req = *con_cls;
    if (req == NULL) {
        return respond_error(h, c, 503, "out of memory");
    }
    if (!req->validated) {
        return handle_first(h, c, method, req);
    }
    if (*upload_data_size > 0) { /* a body on a GET or HEAD: drained and ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    ASSERT(req->valid);
    return dispatch(h, c, &req->route);
}

static void *capture_target(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    struct http_request *req = malloc(sizeof(*req));
    if (req == NULL) {
        return NULL;
    }
    req->validated = false;
    req->valid = false;
    req->target_len = strlen(uri);
    size_t keep = req->target_len <= HTTP_URI_BYTES_MAX ? req->target_len : 0;
    memcpy(req->target, uri, keep);
    req->target[keep] = '\0';
    return req;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

int query_http_config_check(const struct query_http_config *cfg)
{
    bool ok = cfg->data_dir != NULL && cfg->range_days_max <= QUERY_RANGE_DAYS_MAX &&
              cfg->threads <= QUERY_HTTP_THREADS_MAX &&
              cfg->connections_max <= QUERY_HTTP_CONNECTIONS_MAX &&
              cfg->connections_per_ip <= QUERY_HTTP_CONNECTIONS_MAX && cfg->ready_lag_max >= 0 &&
              cfg->consistent_timeout_ms <= QUERY_CONSISTENT_TIMEOUT_MS_MAX &&
              (cfg->positions == NULL) == (cfg->positions_generation == NULL) &&
              (cfg->token == NULL ||
               (strlen(cfg->token) > 0 && strlen(cfg->token) <= HTTP_TOKEN_BYTES_MAX));
    return ok ? 0 : -DS_EUSAGE;
}

static int start_daemon(struct query_http *h, const struct query_http_config *cfg, uint32_t threads)
{
    unsigned connections =
        cfg->connections_max != 0 ? cfg->connections_max : QUERY_HTTP_CONNECTIONS_DEFAULT;
    unsigned per_ip = cfg->connections_per_ip != 0 ? cfg->connections_per_ip
                                                   : QUERY_HTTP_CONNECTIONS_PER_IP_DEFAULT;
    unsigned timeout_s =
        cfg->idle_timeout_s != 0 ? cfg->idle_timeout_s : QUERY_HTTP_IDLE_TIMEOUT_S_DEFAULT;
    h->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, h,
        MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, (void *)"serve", MHD_OPTION_LISTEN_SOCKET,
        h->listen_fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(threads > 1 ? threads : 0),
        MHD_OPTION_CONNECTION_LIMIT, connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_CONNECTION_MEMORY_BYTES, MHD_OPTION_URI_LOG_CALLBACK, capture_target, h,
        MHD_OPTION_NOTIFY_COMPLETED, http_mhd_request_done, NULL, MHD_OPTION_END);
    if (h->daemon == NULL) {
        ds_log_error("serve: libmicrohttpd refused to start on %s", h->address);
        return -EIO;
    }
    return 0;
}

static int http_open(struct query_http *h, const struct query_http_config *cfg)
{
    uint32_t threads = cfg->threads != 0 ? cfg->threads : QUERY_HTTP_THREADS_DEFAULT;
    /* The address first: a bad one is a usage error whatever the data directory holds. */
    int rc = http_listen(cfg->listen != NULL ? cfg->listen : QUERY_HTTP_LISTEN_DEFAULT,
                         &h->listen_fd, h->address, sizeof(h->address));
    if (rc != 0) {
        ds_log_error("serve: cannot listen on %s: %s",
                     cfg->listen != NULL ? cfg->listen : QUERY_HTTP_LISTEN_DEFAULT,
                     ds_strerror(rc));
        return rc;
    }
    for (uint32_t i = 0; i < threads; i++) {
        ASSERT(pthread_mutex_init(&h->readers[i].lock, NULL) == 0);
        h->reader_count = i + 1;
        rc = reader_open(&h->readers[i], cfg->data_dir);
        if (rc != 0) {
            ds_log_error("serve: opening %s read-only: %s", cfg->data_dir, ds_strerror(rc));
            return rc;
        }
    }
    h->model = storage_model(h->readers[0].st);
    h->heat = calloc(HTTP_HEAT_ENTRIES, sizeof(*h->heat));
    if (h->heat == NULL) {
        return -ENOMEM;
    }
    return start_daemon(h, cfg, threads);
}

int query_http_start(const struct query_http_config *cfg, struct query_http **out)
{
    int rc = query_http_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct query_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return -ENOMEM;
    }
    h->listen_fd = -1;
    h->range_days_max = cfg->range_days_max != 0 ? cfg->range_days_max : QUERY_RANGE_DAYS_DEFAULT;
    h->count_fanout = cfg->count_fanout;
    h->ready_lag_max = cfg->ready_lag_max != 0 ? cfg->ready_lag_max : QUERY_HTTP_READY_LAG_DEFAULT;
    h->metrics = cfg->metrics;
    h->gsi = cfg->gsi;
    snprintf(h->data_dir, sizeof(h->data_dir), "%s", cfg->data_dir);
    ASSERT(pthread_rwlock_init(&h->gsi_lock, NULL) == 0);
    h->consistent_timeout_ms = cfg->consistent_timeout_ms != 0
                                   ? cfg->consistent_timeout_ms
                                   : QUERY_CONSISTENT_TIMEOUT_MS_DEFAULT;
    h->positions = cfg->positions;
    h->positions_generation = cfg->positions_generation;
    h->positions_user = cfg->positions_user;
    if (cfg->token != NULL) {
        h->token_len = strlen(cfg->token);
        memcpy(h->token, cfg->token, h->token_len);
    }
    ASSERT(pthread_mutex_init(&h->heat_lock, NULL) == 0);
    rc = http_open(h, cfg);
    if (rc != 0) {
        query_http_stop(h);
        return rc;
    }
    *out = h;
    return 0;
}

const char *query_http_address(const struct query_http *h)
{
    return h->address;
}

void query_http_stop(struct query_http *h)
{
    if (h == NULL) {
        return;
    }
    if (h->daemon != NULL) {
        MHD_stop_daemon(h->daemon); /* closes the listening socket too */
    } else if (h->listen_fd >= 0) {
        close(h->listen_fd);
    }
    for (uint32_t i = 0; i < h->reader_count; i++) {
        reader_close(&h->readers[i]);
        pthread_mutex_destroy(&h->readers[i].lock);
    }
    pthread_mutex_destroy(&h->heat_lock);
    index_reader_close(h->gsi_reader);
    pthread_rwlock_destroy(&h->gsi_lock);
    free(h->heat);
    free(h);
}
