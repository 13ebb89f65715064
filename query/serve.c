/*
 * The HTTP query service on libmicrohttpd (docs/HTTP_API.md).
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
 * Orders model: the order lookup (GET /v1/orders/{id}) reads the order's current version from the
 * reader it takes (storage_order_get: a keydir probe, and one read for a hit), exactly as a count
 * does, consistent=true included; a directory of the events model answers 409 (its question is
 * valid, the directory cannot answer it: no order store). A customer's page holds the index view's
 * read lock and then takes a reader to tell current versions from superseded entries. Lock
 * order: gsi_lock before a reader's mutex; nothing takes gsi_lock while it holds a reader.
 *
 * Hostile input: the server core (http/server.c) captures the raw request target, bounds
 * sizes, connections and idle time, and checks the bearer token in constant time; the target is
 * validated here (http_request.c, query_route_parse) before any handler runs.
 *
 * Files: this one starts and stops the service and dispatches; the handlers live beside it
 * (serve_read.c: count and the order lookup; serve_stats.c: partitions and /metrics;
 * serve_orders.c: a customer's orders), over serve_wait.c (consistent=true) and serve_reader.c
 * (the readers).
 *
 * Rejected: one shared reader behind one lock (the count itself is ~1 us, but a refresh that
 * re-reads the manifest would stall every worker).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

/* ---- probes ---------------------------------------------------------------------------------- */

const char *serve_ready(struct query_http *h, int64_t *lag, char *why, size_t why_size)
{
    *lag = 0;
    if (h->metrics == NULL) {
        return NULL;
    }
    uint64_t silent_ns = 0;
    enum query_readiness ready = query_metrics_readiness(h->metrics, h->ready_lag_max,
                                                         (uint64_t)h->ready_stall_ms * 1000000u,
                                                         ds_clock_ns(), lag, &silent_ns);
    uint64_t silent_ms = silent_ns / 1000000u;
    switch (ready) {
    case QUERY_READY: return NULL;
    case QUERY_UNREADY_JOINING:
        snprintf(why, why_size, "the node has not joined its consumer group yet");
        break;
    case QUERY_UNREADY_LAG:
        snprintf(why, why_size, "consumer lag %" PRId64 " exceeds %" PRId64, *lag,
                 h->ready_lag_max);
        break;
    case QUERY_UNREADY_CONSUMER:
        snprintf(why, why_size, "the consumer has not reported for %" PRIu64 " ms", silent_ms);
        break;
    case QUERY_UNREADY_WRITER:
        snprintf(why, why_size,
                 "the writer has not committed for %" PRIu64 " ms with consumer lag %" PRId64,
                 silent_ms, *lag);
        break;
    }
    return why;
}

static enum http_result serve_readyz(struct query_http *h, struct http_request *c)
{
    int64_t lag = 0;
    char text[160];
    const char *why = serve_ready(h, &lag, text, sizeof(text));
    if (why != NULL) {
        return http_respond_error(c, 503, why);
    }
    int n = snprintf(text, sizeof(text), "{\"ready\":true,\"consumer_lag\":%" PRId64 "}", lag);
    return http_respond_json(c, 200, strdup(text), n);
}

/* ---- /v1/heat ------------------------------------------------------------------------------ */

/* Heat is measured by a node's consumer thread: `serve` (no node) answers 501, like the orders
 * of a node without an index; a node before its first second of heat answers 503. */
static enum http_result serve_heat(struct query_http *h, struct http_request *c,
                                   const struct query_route *route)
{
    enum http_result answered;
    struct shard_heat_report *report = serve_heat_report(h, c, false, &answered);
    if (report == NULL) {
        return answered;
    }
    size_t cap = query_heat_json_bound();
    char *body = malloc(cap);
    int64_t len = body != NULL ? query_heat_json(report, h->metrics, route->top, body, cap) : 0;
    free(report);
    ASSERT(len >= 0);
    return http_respond_json(c, 200, body, len);
}

static enum http_result dispatch(void *user, struct http_request *c)
{
    struct query_http *h = user;
    const struct query_route *route = http_request_state(c);
    switch (route->endpoint) {
    case QUERY_EP_COUNT: return serve_count(h, c, route);
    case QUERY_EP_ORDER: return serve_order(h, c, route);
    case QUERY_EP_PARTITIONS: return serve_partitions(h, c, route);
    case QUERY_EP_METRICS: return serve_metrics(h, c);
    case QUERY_EP_READYZ: return serve_readyz(h, c);
    case QUERY_EP_HEALTHZ: return http_respond_json(c, 200, strdup("{\"status\":\"ok\"}"), 15);
    case QUERY_EP_ORDERS: return serve_orders(h, c, route);
    case QUERY_EP_HEAT: return serve_heat(h, c, route);
    case QUERY_EP_CONSOLE: return query_console_respond(c, route);
    case QUERY_EP_HEAT_HISTORY: return serve_heat_history(h, c, route);
    case QUERY_EP_HEAT_STREAM: return serve_heat_stream(h, c);
    case QUERY_EP_NONE: break;
    }
    ASSERT(false);
    return HTTP_RESULT_CLOSE;
}

/* First call of a request (the core checked its size): routes and validates it. An error is
 * answered at once; answering nothing accepts it. */
static enum http_result accept_request(void *user, struct http_request *c, const char *method)
{
    struct query_http *h = user;
    struct query_route *route = http_request_state(c);
    size_t target_len = 0;
    const char *target = http_request_target(c, &target_len);
    unsigned status = query_route_parse(method, target, target_len, h->range_days_max, route);
    if (status == 404 || status == 405 || status == 414 || route->endpoint == QUERY_EP_NONE) {
        return http_respond_error(c, status, route->error);
    }
    if (route->needs_token && !http_request_authorized(c)) {
        return http_respond_error(c, 401, "missing or wrong bearer token");
    }
    if (status != 0) {
        return http_respond_error(c, status, route->error);
    }
    return HTTP_RESULT_OK;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

int query_http_config_check(const struct query_http_config *cfg)
{
    bool ok = cfg->data_dir != NULL && cfg->range_days_max <= QUERY_RANGE_DAYS_MAX &&
              cfg->threads <= QUERY_HTTP_THREADS_MAX &&
              cfg->connections_max <= QUERY_HTTP_CONNECTIONS_MAX &&
              cfg->connections_per_ip <= QUERY_HTTP_CONNECTIONS_MAX && cfg->ready_lag_max >= 0 &&
              cfg->ready_stall_ms <= QUERY_HTTP_READY_STALL_MS_MAX &&
              cfg->consistent_timeout_ms <= QUERY_CONSISTENT_TIMEOUT_MS_MAX &&
              (cfg->positions == NULL) == (cfg->positions_generation == NULL) &&
              (cfg->token == NULL ||
               (strlen(cfg->token) > 0 && strlen(cfg->token) <= HTTP_TOKEN_BYTES_MAX));
    return ok ? 0 : -DS_EUSAGE;
}

static int serve_open(struct query_http *h, const struct query_http_config *cfg)
{
    uint32_t threads = cfg->threads != 0 ? cfg->threads : QUERY_HTTP_THREADS_DEFAULT;
    struct http_server_config server = {
        .name = "serve",
        .listen = cfg->listen != NULL ? cfg->listen : QUERY_HTTP_LISTEN_DEFAULT,
        .threads = threads,
        .connections_max =
            cfg->connections_max != 0 ? cfg->connections_max : QUERY_HTTP_CONNECTIONS_DEFAULT,
        .connections_per_ip = cfg->connections_per_ip != 0 ? cfg->connections_per_ip
                                                           : QUERY_HTTP_CONNECTIONS_PER_IP_DEFAULT,
        .idle_timeout_s =
            cfg->idle_timeout_s != 0 ? cfg->idle_timeout_s : QUERY_HTTP_IDLE_TIMEOUT_S_DEFAULT,
        .token = cfg->token,
        .flags = HTTP_SERVER_CHALLENGE,
        .request_state_bytes = sizeof(struct query_route),
        .accept = accept_request,
        .dispatch = dispatch,
        .user = h,
        /* A node's heat console streams (serve_heat.c); `serve` has no heat to stream. */
        .events_streams_max =
            h->metrics != NULL && h->metrics->heat_history != NULL ? HTTP_EVENTS_STREAMS_MAX : 0,
        .events_tick = serve_heat_tick,
    };
    /* The address first: a bad one is a usage error whatever the data directory holds. */
    int rc = http_server_open(&server, &h->server);
    if (rc != 0) {
        return rc;
    }
    for (uint32_t i = 0; i < threads; i++) {
        ASSERT(pthread_mutex_init(&h->readers[i].lock, NULL) == 0);
        h->reader_count = i + 1;
        rc = serve_reader_open(&h->readers[i], cfg->data_dir);
        if (rc != 0) {
            ds_log_error("serve: opening %s read-only: %s", cfg->data_dir, ds_strerror(rc));
            return rc;
        }
    }
    h->model = storage_model(h->readers[0].st);
    h->heat = calloc(SERVE_HEAT_ENTRIES, sizeof(*h->heat));
    if (h->heat == NULL) {
        return -ENOMEM;
    }
    return http_server_start(h->server);
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
    h->range_days_max = cfg->range_days_max != 0 ? cfg->range_days_max : QUERY_RANGE_DAYS_DEFAULT;
    h->count_fanout = cfg->count_fanout;
    h->ready_lag_max = cfg->ready_lag_max != 0 ? cfg->ready_lag_max : QUERY_HTTP_READY_LAG_DEFAULT;
    h->ready_stall_ms =
        cfg->ready_stall_ms != 0 ? cfg->ready_stall_ms : QUERY_HTTP_READY_STALL_MS_DEFAULT;
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
    h->claims = cfg->claims;
    h->claims_user = cfg->claims_user;
    ASSERT(pthread_mutex_init(&h->heat_lock, NULL) == 0);
    rc = serve_open(h, cfg);
    if (rc != 0) {
        query_http_stop(h);
        return rc;
    }
    *out = h;
    return 0;
}

const char *query_http_address(const struct query_http *h)
{
    return http_server_address(h->server);
}

void query_http_stop(struct query_http *h)
{
    if (h == NULL) {
        return;
    }
    http_server_close(h->server); /* no request runs past this */
    for (uint32_t i = 0; i < h->reader_count; i++) {
        serve_reader_close(&h->readers[i]);
        pthread_mutex_destroy(&h->readers[i].lock);
    }
    pthread_mutex_destroy(&h->heat_lock);
    index_reader_close(h->gsi_reader);
    pthread_rwlock_destroy(&h->gsi_lock);
    free(h->heat);
    free(h);
}
