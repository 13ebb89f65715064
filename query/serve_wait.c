/*
 * consistent=true on the query service (http_private.h): on a node, the positions (the broker's
 * high watermarks of the partitions the node is assigned) asked after the request arrived, the
 * wait until a refreshed reader's source offsets reach them, and the 503 naming what was still
 * missing when the time was up or the assignment changed. The documents themselves are
 * rendered by serve_consistent.c.
 *
 * Both waits are bounded polls (ds_wait_until): a look costs a stat(2) of the manifest, and
 * the service also runs beside no node, so nothing could signal it. Rejected: a condition
 * variable signalled by the node's commits (http.c's head comment).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

uint32_t serve_timeout_ms(const struct query_http *h, const struct query_route *route)
{
    return route->timeout_ms != 0 ? route->timeout_ms : h->consistent_timeout_ms;
}

/* One ask of the node's positions (a ds_wait_until test): over unless the node has no
 * assignment yet (-EAGAIN). */
struct positions_ask {
    struct query_http *h;
    struct serve_wait *w;
    int n; /* the last answer: a count or a negative code */
};

static bool positions_asked(void *user)
{
    struct positions_ask *a = user;
    struct serve_wait *w = a->w;
    uint32_t left_ms = serve_wait_left_ms(w);
    a->n = a->h->positions(a->h->positions_user, w->positions, SERVE_POSITIONS_MAX,
                           left_ms > 0 ? left_ms : 1u, &w->generation);
    return a->n != -EAGAIN;
}

/* Asks the node, on arrival, for the high watermark of every partition it is assigned.
 * Returns 0, or the callback's code; serve_wait_end releases w either way. */
int serve_wait_begin(struct query_http *h, const struct query_route *route, struct serve_wait *w)
{
    ASSERT(h->positions != NULL);
    memset(w, 0, sizeof(*w));
    w->timeout_ms = serve_timeout_ms(h, route);
    w->deadline_ns = ds_clock_ns() + (uint64_t)w->timeout_ms * 1000000u;
    w->positions = malloc(sizeof(*w->positions) * SERVE_POSITIONS_MAX);
    w->durable_next = malloc(sizeof(*w->durable_next) * SERVE_POSITIONS_MAX);
    if (w->positions == NULL || w->durable_next == NULL) {
        return -ENOMEM;
    }
    /* A node starting, joining its group or rebalancing has no assignment to ask about yet:
     * wait for one within the request's timeout (watermarks read later are at least those of
     * the arrival, so the guarantee holds), then answer 503 "retry". */
    struct positions_ask ask = {.h = h, .w = w, .n = -EAGAIN};
    (void)ds_wait_until(positions_asked, &ask, w->deadline_ns, SERVE_CONSISTENT_STEP_NS);
    if (ask.n < 0) {
        return ask.n;
    }
    ASSERT((uint32_t)ask.n <= SERVE_POSITIONS_MAX);
    w->asked = true;
    w->count = (uint32_t)ask.n;
    for (uint32_t i = 0; i < w->count; i++) {
        w->durable_next[i] = -1;
    }
    return 0;
}

void serve_wait_end(struct serve_wait *w)
{
    free(w->positions);
    free(w->durable_next);
}

/* One look: whether r's view holds every position; records what it holds. */
static bool wait_reached(struct serve_wait *w, const struct serve_reader *r)
{
    bool all = true;
    for (uint32_t i = 0; i < w->count; i++) {
        w->durable_next[i] = storage_source_next(r->st, w->positions[i].partition);
        all = all && serve_position_reached(&w->positions[i], w->durable_next[i]);
    }
    return all;
}

/* One look at the store (a ds_wait_until test): over once a reader's view holds every
 * position (that reader stays held), on a storage error, or when the assignment changed. */
struct store_look {
    struct query_http *h;
    struct serve_wait *w;
    struct serve_reader *held;
    int rc;
};

static bool store_looked(void *user)
{
    struct store_look *l = user;
    struct serve_reader *r = NULL;
    l->rc = serve_reader_acquire(l->h, &r);
    if (l->rc != 0) {
        return true;
    }
    if (wait_reached(l->w, r)) {
        l->held = r;
        return true;
    }
    serve_reader_release(r);
    /* Partitions revoked mid-wait will not reach their positions here: say so at once. */
    if (l->h->positions_generation(l->h->positions_user) != l->w->generation) {
        l->rc = SERVE_WAIT_REBALANCED;
        return true;
    }
    return false;
}

/* Looks at the store until a reader's view holds every position. Returns 0 with that reader
 * held (the answer must come from the very view that held them; the caller releases it),
 * -ETIMEDOUT, SERVE_WAIT_REBALANCED, or a storage error. Never a busy loop: a look, then a
 * sleep of SERVE_CONSISTENT_STEP_NS without any lock. */
int serve_wait_store(struct query_http *h, struct serve_wait *w, struct serve_reader **out)
{
    ASSERT(w->asked);
    struct store_look look = {.h = h, .w = w};
    if (!ds_wait_until(store_looked, &look, w->deadline_ns, SERVE_CONSISTENT_STEP_NS)) {
        return -ETIMEDOUT;
    }
    if (look.rc == 0) {
        *out = look.held;
    }
    return look.rc;
}

/* The milliseconds left of w's timeout (0 when it passed). */
uint32_t serve_wait_left_ms(const struct serve_wait *w)
{
    uint64_t now = ds_clock_ns();
    return now >= w->deadline_ns ? 0u : (uint32_t)((w->deadline_ns - now) / 1000000u);
}

/* The 503 (or other error) of a consistent read that failed with rc; index_needed_seq is the
 * store commit the by-customer index did not reach in time (rc -ETIMEDOUT after the store
 * wait), 0 otherwise. */
enum http_result serve_respond_unmet(struct http_request *c, const struct serve_wait *w, int rc,
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
                     SERVE_POSITIONS_MAX);
        } else {
            snprintf(text, sizeof(text), "the broker: %s", ds_strerror(rc));
        }
        char *body = malloc(HTTP_ERROR_BYTES_MAX * 2u);
        int64_t len = body != NULL ? http_error_json(text, body, HTTP_ERROR_BYTES_MAX * 2u) : 0;
        ASSERT(len >= 0);
        return http_respond_unavailable(c, body, len, rc == -ETIMEDOUT ? retry_s : 1u);
    }
    if (rc != -ETIMEDOUT && rc != SERVE_WAIT_REBALANCED) {
        return serve_storage_error(c, rc);
    }
    struct serve_unmet_wait unmet = {
        .why = rc == SERVE_WAIT_REBALANCED
                   ? SERVE_UNMET_REBALANCE
                   : (index_needed_seq > 0 ? SERVE_UNMET_INDEX : SERVE_UNMET_TIMEOUT),
        .timeout_ms = w->timeout_ms,
        .count = w->count,
        .positions = w->positions,
        .durable_next = w->durable_next,
        .index_needed_seq = index_needed_seq};
    size_t cap = serve_unmet_json_bound(w->count);
    char *body = malloc(cap);
    int64_t len = body != NULL ? serve_unmet_json(&unmet, body, cap) : 0;
    ASSERT(len >= 0);
    return http_respond_unavailable(c, body, len, rc == -ETIMEDOUT ? retry_s : 1u);
}

/* ,"consistency":... for w (NULL: durable at arrival) into a new buffer; NULL when out of
 * memory. */
char *serve_consistency_text(const struct serve_wait *w, size_t *len)
{
    uint32_t count = w != NULL ? w->count : 0;
    size_t cap = serve_consistency_json_bound(count);
    char *text = malloc(cap);
    if (text == NULL) {
        return NULL;
    }
    int64_t n = serve_consistency_json(w != NULL ? SERVE_CONSISTENCY_ACKNOWLEDGED
                                                 : SERVE_CONSISTENCY_DURABLE,
                                       w != NULL ? w->positions : NULL, count, text, cap);
    ASSERT(n > 0);
    *len = (size_t)n;
    return text;
}
