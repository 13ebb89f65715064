/*
 * The answers read from one reader's view (http_private.h): /v1/count and the order lookup
 * (/v1/orders/{id}), from a reader refreshed on arrival or, for consistent=true on a node,
 * from the very reader that held every acknowledged position (serve_wait.c).
 *
 * The order lookup reads the order's current version from the reader it takes
 * (storage_order_get: a keydir probe, and one read for a hit), exactly as a count does,
 * consistent=true included; a directory of the events model answers 409 (its question is
 * valid, the directory cannot answer it: no order store).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

/* ---- /v1/count ----------------------------------------------------------------------------- */

/* Counts on r (held; released here) and answers, with the consistency field when given. */
static enum http_result count_answer(struct query_http *h, struct http_request *c,
                                     const struct query_route *route, struct serve_reader *r,
                                     const char *consistency, size_t consistency_len)
{
    struct query_count_result res;
    struct query_count_request req = route->count;
    req.fanout = req.fanout || h->count_fanout;
    int rc = query_count(r->st, r->map, &req, &res);
    if (rc != 0) {
        serve_reader_release(r);
        return serve_storage_error(c, rc);
    }
    size_t cap =
        query_count_json_bound(&res) + r->as_of_len + SERVE_CLAIMS_BYTES_MAX + consistency_len + 16;
    char *body = malloc(cap);
    int64_t len = -ENOMEM;
    if (body != NULL) {
        len = query_count_json(&route->count, &res, body, cap);
        ASSERT(len > 0);
        len = (int64_t)serve_append_as_of(body, (size_t)len, r);
        len = serve_append_claims(h, body, (size_t)len, r);
        if (consistency != NULL && len > 0) {
            len = (int64_t)serve_append_fields(body, (size_t)len, consistency, consistency_len);
        }
    }
    serve_reader_release(r);
    query_count_result_deinit(&res);
    if (len == -EAGAIN) {
        free(body);
        return serve_respond_starting(c);
    }
    return http_respond_json(c, 200, body, len);
}

/* An answer read from one reader's view (a count, an order): r is held and released by it;
 * consistency (consistency_len bytes, or NULL) is the field a consistent=true answer carries. */
typedef enum http_result (*reader_answer_fn)(struct query_http *h, struct http_request *c,
                                             const struct query_route *route,
                                             struct serve_reader *r, const char *consistency,
                                             size_t consistency_len);

/* consistent=true on a node: waits until the store holds every acknowledged position, then
 * answers from the very reader that held them. */
static enum http_result serve_acknowledged(struct query_http *h, struct http_request *c,
                                           const struct query_route *route, reader_answer_fn answer)
{
    struct serve_wait w;
    struct serve_reader *r = NULL;
    int rc = serve_wait_begin(h, route, &w);
    rc = rc == 0 ? serve_wait_store(h, &w, &r) : rc;
    size_t text_len = 0;
    char *text = rc == 0 ? serve_consistency_text(&w, &text_len) : NULL;
    enum http_result result;
    if (rc != 0) {
        result = serve_respond_unmet(c, &w, rc, 0);
    } else if (text == NULL) {
        serve_reader_release(r);
        result = serve_storage_error(c, -ENOMEM);
    } else {
        result = answer(h, c, route, r, text, text_len);
    }
    free(text);
    serve_wait_end(&w);
    return result;
}

/* A count or an order: from a reader refreshed on arrival, or for consistent=true on a node
 * after the wait for the acknowledged positions. */
static enum http_result serve_from_reader(struct query_http *h, struct http_request *c,
                                          const struct query_route *route, reader_answer_fn answer)
{
    if (route->consistent && h->positions != NULL) {
        return serve_acknowledged(h, c, route, answer);
    }
    struct serve_reader *r = NULL;
    int rc = serve_reader_acquire(h, &r);
    if (rc != 0) {
        return serve_storage_error(c, rc);
    }
    /* Without a node, a reader refreshed on arrival holds everything durable then: what every
     * count gives, said explicitly when asked for. */
    size_t text_len = 0;
    char *text = route->consistent ? serve_consistency_text(NULL, &text_len) : NULL;
    if (route->consistent && text == NULL) {
        serve_reader_release(r);
        return serve_storage_error(c, -ENOMEM);
    }
    enum http_result result = answer(h, c, route, r, text, text_len);
    free(text);
    return result;
}

/* ---- /v1/orders/{id} (the order lookup) ---------------------------------------------------- */

/* 404 naming the order: {"error":"no order ID","order_id":ID}. */
static enum http_result respond_no_order(struct http_request *c, const struct ds_id *id)
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
        len = (int64_t)serve_append_fields(body, (size_t)len, field, (size_t)f);
    }
    return http_respond_json(c, 404, body, len);
}

/* The order lookup on r (held; released here): the order's current version as r's view holds
 * it, with as_of and the consistency field like a count. */
static enum http_result order_answer(struct query_http *h, struct http_request *c,
                                     const struct query_route *route, struct serve_reader *r,
                                     const char *consistency, size_t consistency_len)
{
    (void)h; /* the answer type's: a count needs it */
    struct storage_order order;
    int rc = storage_model(r->st) == STORAGE_MODEL_ORDERS
                 ? storage_order_get(r->st, &route->order_id, &order, r->order_scratch,
                                     STORAGE_ORDER_SCRATCH_BYTES)
                 : -DS_EUSAGE;
    if (rc != 0) {
        serve_reader_release(r);
        if (rc == -ENOENT) {
            return respond_no_order(c, &route->order_id);
        }
        return rc == -DS_EUSAGE
                   ? http_respond_error(
                         c, 409,
                         "the order lookup needs the orders model: this data directory "
                         "counts events (it was created with --model events)")
                   : serve_storage_error(c, rc);
    }
    size_t cap = query_order_json_bound(&order) + r->as_of_len + consistency_len + 16;
    char *body = malloc(cap);
    int64_t len = body != NULL ? query_order_json(&order, body, cap) : -ENOMEM;
    if (len > 0) {
        len = (int64_t)serve_append_as_of(body, (size_t)len, r);
        if (consistency != NULL) {
            len = (int64_t)serve_append_fields(body, (size_t)len, consistency, consistency_len);
        }
    }
    serve_reader_release(r);
    if (len < 0) {
        ASSERT(len != -ENOSPC); /* the bound holds */
        free(body);
        return serve_storage_error(c, (int)len);
    }
    return http_respond_json(c, 200, body, len);
}

/* ---- the endpoints ------------------------------------------------------------------------- */

enum http_result serve_count(struct query_http *h, struct http_request *c,
                             const struct query_route *route)
{
    return serve_from_reader(h, c, route, count_answer);
}

enum http_result serve_order(struct query_http *h, struct http_request *c,
                             const struct query_route *route)
{
    return serve_from_reader(h, c, route, order_answer);
}
