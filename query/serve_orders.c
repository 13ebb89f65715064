/*
 * A customer's orders (/v1/customers/{id}/orders, serve_private.h): one page from the node's
 * by-customer index builder (run --http) or from a read-only view of the node's index
 * (serve), consistent=true included: the store must hold every acknowledged position, then
 * the index the store commit that held them.
 *
 * A customer's page holds the index view's read lock and then takes a reader to tell current
 * versions from superseded entries. Lock order: gsi_lock before a reader's mutex; nothing takes
 * gsi_lock while it holds a reader.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

/* ---- a customer's orders (the GSI) --------------------------------------------------------- */

/* The view refreshes at most this often, or at once for consistent=true. */
#define SERVE_GSI_REFRESH_NS (100u * 1000000u)

/* serve: opens (first use) and refreshes the view of the node's index until it holds every
 * commit up to want_seq (0: no wait; index_reader_wait) or timeout_ms pass; estimates the
 * lag against durable_seq. On 0 the caller holds the read lock and must unlock it. */
static int gsi_view(struct query_http *h, uint64_t durable_seq, uint64_t want_seq,
                    uint32_t timeout_ms, uint64_t *lag_ms)
{
    ASSERT(pthread_rwlock_wrlock(&h->gsi_lock) == 0);
    int rc = h->gsi_reader == NULL ? index_reader_open(h->data_dir, &h->gsi_reader) : 0;
    uint64_t now = ds_clock_ns();
    bool refresh = rc == 0 && (want_seq > 0 || now - h->gsi_refreshed_ns >= SERVE_GSI_REFRESH_NS);
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
    struct serve_reader *r = NULL;
    int rc = serve_reader_acquire(h, &r);
    if (rc == 0) {
        *seq = storage_commit_seq(r->st);
        serve_reader_release(r);
    }
    return rc;
}

/* What a page of orders answers besides the page: the index lag, the consistency field of
 * consistent=true (NULL without), and the wait of a node's consistent read (NULL otherwise). */
struct orders_extra {
    uint64_t lag_ms;
    const char *consistency;
    size_t consistency_len;
    const struct serve_wait *wait;
};

/* Answers one page of route's customer from gsi; releases `held` (a read lock on the view,
 * or NULL) once the index was read. */
static enum http_result respond_orders(struct query_http *h, struct http_request *c,
                                       const struct query_route *route, struct index *gsi,
                                       const struct orders_extra *extra, pthread_rwlock_t *held)
{
    struct query_orders_page page = {.orders = calloc(route->limit, sizeof(struct query_order))};
    int rc = page.orders == NULL ? -ENOMEM : 0;
    /* The orders model lists an entry only when it is its order's current version: a reader
     * taken now (after the index view, so at least as recent) says which. */
    struct serve_reader *r = NULL;
    if (rc == 0 && h->model == STORAGE_MODEL_ORDERS) {
        rc = serve_reader_acquire(h, &r);
    }
    if (rc == 0) {
        rc = query_orders_get(gsi, r != NULL ? r->st : NULL, &route->customer, route->limit,
                              route->cursor, &page);
    }
    if (r != NULL) {
        serve_reader_release(r);
    }
    if (held != NULL) {
        ASSERT(pthread_rwlock_unlock(held) == 0);
    }
    if (rc != 0) {
        free(page.orders);
        return rc == -DS_EUSAGE
                   ? http_respond_error(c, 400, "bad cursor: not one this service handed out")
                   : serve_storage_error(c, rc);
    }
    size_t cap = query_orders_json_bound(page.count) + extra->consistency_len;
    char *body = malloc(cap);
    int64_t len = -ENOMEM;
    if (body != NULL) {
        len = query_orders_json(&route->customer, &page, extra->lag_ms, body, cap);
        ASSERT(len > 0);
        if (extra->consistency != NULL) {
            len = (int64_t)serve_append_fields(body, (size_t)len, extra->consistency,
                                               extra->consistency_len);
        }
    }
    free(page.orders);
    return http_respond_json(c, 200, body, len);
}

/* A consistent read whose index did not hold want_seq within timeout_ms. */
static enum http_result respond_not_caught_up(struct http_request *c,
                                              const struct orders_extra *extra, uint64_t want_seq,
                                              uint32_t timeout_ms)
{
    if (extra->wait != NULL) {
        return serve_respond_unmet(c, extra->wait, -ETIMEDOUT, want_seq);
    }
    char text[HTTP_ERROR_BYTES_MAX];
    snprintf(text, sizeof(text),
             "the by-customer index did not hold store commit %" PRIu64 " within timeout_ms %u",
             want_seq, timeout_ms);
    char *body = malloc(HTTP_ERROR_BYTES_MAX * 2u);
    int64_t len = body != NULL ? http_error_json(text, body, HTTP_ERROR_BYTES_MAX * 2u) : 0;
    ASSERT(len >= 0);
    return http_respond_unavailable(c, body, len,
                                    timeout_ms >= 1000u ? (timeout_ms + 999u) / 1000u : 1u);
}

/* A page from the node's builder (run --http) or from a view of the node's index (serve),
 * after waiting (timeout_ms) until it holds store commit want_seq (0: no wait); durable_seq is
 * the store's commit on arrival, for the lag estimate of a view. */
static enum http_result orders_at(struct query_http *h, struct http_request *c,
                                  const struct query_route *route, uint64_t durable_seq,
                                  uint64_t want_seq, uint32_t timeout_ms,
                                  struct orders_extra *extra)
{
    if (h->gsi == NULL) {
        int rc = gsi_view(h, durable_seq, want_seq, timeout_ms, &extra->lag_ms);
        if (rc == -ENOENT) {
            return http_respond_error(c, 503,
                                      "no by-customer index in this data directory yet (the node "
                                      "builds it; it runs without --no-gsi)");
        }
        if (rc != 0) {
            return rc == -ETIMEDOUT ? respond_not_caught_up(c, extra, want_seq, timeout_ms)
                                    : serve_storage_error(c, rc);
        }
        return respond_orders(h, c, route, index_reader_store(h->gsi_reader), extra, &h->gsi_lock);
    }
    if (want_seq > 0) {
        int rc = index_builder_wait(h->gsi, want_seq, timeout_ms);
        if (rc != 0) {
            return rc == -ETIMEDOUT ? respond_not_caught_up(c, extra, want_seq, timeout_ms)
                                    : serve_storage_error(c, rc);
        }
    }
    uint64_t lag_events = 0;
    index_builder_lag(h->gsi, &extra->lag_ms, &lag_events);
    return respond_orders(h, c, route, index_builder_store(h->gsi), extra, NULL);
}

/* consistent=true on a node: the store must hold every acknowledged position, then the index
 * the store commit that held them, all within the request's timeout. */
static enum http_result serve_orders_acknowledged(struct query_http *h, struct http_request *c,
                                                  const struct query_route *route)
{
    struct serve_wait w;
    struct serve_reader *r = NULL;
    int rc = serve_wait_begin(h, route, &w);
    rc = rc == 0 ? serve_wait_store(h, &w, &r) : rc;
    if (rc != 0) {
        enum http_result result = serve_respond_unmet(c, &w, rc, 0);
        serve_wait_end(&w);
        return result;
    }
    uint64_t seq = storage_commit_seq(r->st);
    serve_reader_release(r);
    struct orders_extra extra = {.wait = &w};
    char *text = serve_consistency_text(&w, &extra.consistency_len);
    extra.consistency = text;
    enum http_result result = text != NULL
                                  ? orders_at(h, c, route, seq, seq, serve_wait_left_ms(&w), &extra)
                                  : serve_storage_error(c, -ENOMEM);
    free(text);
    serve_wait_end(&w);
    return result;
}

/* The orders endpoint. consistent=true without a node waits for what was durable on arrival. */
enum http_result serve_orders(struct query_http *h, struct http_request *c,
                              const struct query_route *route)
{
    if (route->consistent && h->positions != NULL) {
        return serve_orders_acknowledged(h, c, route);
    }
    uint64_t seq = 0;
    int rc = durable_seq(h, &seq);
    if (rc != 0) {
        return serve_storage_error(c, rc);
    }
    struct orders_extra extra = {0};
    char *text = route->consistent ? serve_consistency_text(NULL, &extra.consistency_len) : NULL;
    if (route->consistent && text == NULL) {
        return serve_storage_error(c, -ENOMEM);
    }
    extra.consistency = text;
    enum http_result result = orders_at(h, c, route, seq, route->consistent ? seq : 0,
                                        serve_timeout_ms(h, route), &extra);
    free(text);
    return result;
}
