/*
 * `dayshard router`: the HTTP API of a node (docs/HTTP_API.md) over several nodes, with a
 * replica group to fail over to.
 *
 * Groups. Group 1 are the --node URLs, group 2 the --replica URLs: each group is one consumer
 * group of `dayshard run` nodes over the same topic, its members together holding every
 * partition (so a group is a complete copy). The router does not know which partitions each
 * member owns; it knows a group is complete for an answer when (1) every member answered
 * (no refused or timed-out connection, no 5xx), (2) the prober last saw every member ready
 * (its /readyz: joined its group, within its lag bound, its consumer and writer making
 * progress; a member that failed a request counts as not ready until the prober sees it answer
 * a real count and then its /readyz), and (3) for answers carrying
 * as_of (count, partitions), the union of the members' as_of covers every partition of the
 * topic: 0..N-1 with --partitions N, else the largest set any answer ever covered (learned),
 * and (4) in the orders model (once a count said so), no partition is named by two members
 * and none is behind the furthest offset the group's complete answers reached
 * (router_owner.c): an order is counted once, and the group's answers never go back; in the
 * events model, when every member's count reported its claims (the latest run of each
 * partition it holds), no two members' claims of a partition overlap and none is behind that
 * frontier: an event is counted once.
 *
 * A request goes to the preferred group first (group 1 at start, then whichever answered
 * completely last), to the other one when that is incomplete (a failover, counted in
 * /metrics). With neither complete it answers 503 {"error":"no complete replica","missing":
 * [...]} with Retry-After: 1, naming every node that failed (its URL) and every partition not
 * covered ("partition P"); never a partial number, unless the request says partial=true (a
 * parameter of the router only, not forwarded): then the group where most members answered
 * gives the answer, with "partial":true and the same "missing" list.
 *
 * Answers. A request is validated as a node validates it (serve_request.c), so a bad one is a
 * 400 from the router without a fan-out; its target goes unchanged (less partial) to every
 * member of the group, in parallel (router_fanout.c). A 4xx or 501 of a member is the answer
 * (a request refused by one is refused by all: answered once). Counts, a customer's orders and
 * partitions are merged (router_merge.c says how, with the orders' portable cursor: the token
 * of the last order listed, valid in either group); /v1/orders/{id} is the one member's 200
 * (404 when every member says 404); /v1/heat lists each member's answer under "nodes" and their
 * sum under "merged", and /v1/heat/history is merged by its seconds (router_heat.c: one
 * group's members read disjoint Kafka partitions, so their heats add up). Merged
 * answers add "node_group":G. /healthz is the router's own; /readyz is 200 when a group is
 * complete by the prober; /metrics are the router's own series, dayshard_router_*.
 *
 * Threads: libmicrohttpd's worker pool; each request takes a free slot (a libcurl client with
 * its connections and the call buffers of both groups, reused), round-robin like the service's
 * readers, so with as many slots as workers the slot lock is uncontended. One prober thread
 * asks every node's /readyz each probe interval on a client of its own.
 *
 * A node that hangs (stopped, a stalled disk, a lost network: connections open, no answer)
 * costs one timeout: the call that times out marks it hung (node_hung), which makes every
 * fan-out still waiting on it give up that call at once and fail over (call_abandon), and
 * later requests skip its group without a call.
 *
 * /v1/heat/stream: the streams are the server core's (http/events.c, at most 16 as on a node);
 * the core's event pump calls router_heat_tick every 100 ms while one is open, and at most
 * once a second that tick makes a feed turn: the heat (top 20) and the history of the group a
 * count would use (its ready members; one that does not answer leaves the frame to the others,
 * with a "warnings" entry naming it), the newest 31 days' counts through the count fan-out
 * above (complete answers, the other group on failover), and one frame per distinct stream
 * position (router_heat_frame: a new stream's first frame carries the whole 300 s, each other
 * the seconds after its previous frame's). Nothing is fetched while no stream is open. A turn
 * runs on the pump's thread with a slot of its own, and every call of a turn shares one
 * budget of --timeout-ms: the pump stalls for at most that (its keep-alives are due every
 * 5 s), a member that hangs costs that once (it is marked hung, and later turns skip it until
 * the prober sees it again), and stopping the server waits at most one turn.
 *
 * Rejected for the stream: a feed thread of its own handing frames to the pump (a second
 * thread, a frame buffer under a lock and its own wake-up and stop, for a turn the budget
 * already bounds), and a fan-out per stream (16 streams would ask each member 16 times a
 * second for the same answers).
 *
 * Rejected: asking every node's /readyz on every request (a second round trip on the latency
 * path; a failed request marks its node down at once anyway), and answering from a mix of both
 * groups' members (a partition of one group's member may be split differently in the other's:
 * adding them up could count an event twice or miss it).
 */
#include <errno.h>
#include <inttypes.h>
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

#include "router/router_private.h"

#define ROUTER_THREADS_DEFAULT 4u
/* Upstream latency histogram (upper bounds, microseconds), plus +Inf. */
#define ROUTER_LATENCY_BUCKETS 12u
static const uint32_t router_latency_bounds_us[ROUTER_LATENCY_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000};
/* Endpoints counted in /metrics: the query_endpoint values. */
#define ROUTER_ENDPOINTS 10u
_Static_assert(ROUTER_ENDPOINTS == QUERY_EP_CONSOLE + 1, "a name per endpoint");
_Static_assert(ROUTER_ENDPOINTS <= HTTP_TAGS_MAX, "the core counts answers by endpoint");
static const char *const router_endpoint_names[ROUTER_ENDPOINTS] = {
    "other",  "count",  "partitions", "metrics", "healthz",
    "readyz", "orders", "heat",       "order",   "console"};
/* "missing" entries one answer names: every node, and partitions up to a bound. */
#define ROUTER_MISSING_PARTITIONS_MAX 64u

struct router_node {
    char url[ROUTER_NODE_URL_BYTES_MAX]; /* without a trailing slash */
    uint32_t group;                      /* 0 or 1 */
    atomic_bool ready;                   /* the prober's view, cleared by a failed call */
    /* A data call to it failed: the prober asks it a real count before its /readyz counts. */
    atomic_bool suspect;
    atomic_uint_fast64_t hangs; /* calls to it (data or probe) that timed out */
    atomic_uint_fast64_t errors;
    atomic_uint_fast64_t latency_buckets[ROUTER_LATENCY_BUCKETS + 1];
    atomic_uint_fast64_t latency_sum_ns;
    atomic_uint_fast64_t latency_count;
};

/* A worker's upstream client and the call buffers of each group (bodies kept between
 * requests, so a warm request allocates nothing for them). */
struct router_slot {
    pthread_mutex_t lock;
    struct router_client *client;
    struct router_call *calls[ROUTER_GROUPS]; /* group_count[g] each */
};

struct router {
    struct http_server *server;
    uint32_t timeout_ms;
    uint32_t probe_interval_ms;
    uint32_t partitions;                                               /* 0: learned */
    char node_authorization[sizeof("Bearer ") + HTTP_TOKEN_BYTES_MAX]; /* "": pass the client's */
    uint32_t node_count;
    struct router_node nodes[ROUTER_NODES_TOTAL_MAX];
    uint32_t group_first[ROUTER_GROUPS];
    uint32_t group_count[ROUTER_GROUPS];
    atomic_uint preferred;
    atomic_uint_fast64_t learned[ROUTER_PARTITION_WORDS];
    /* The ownership rules (router_owner.c): a count said "model":"orders", and each group's
     * frontier (raised by the complete answers of either model's rules). */
    atomic_bool orders_seen;
    struct router_frontier frontier[ROUTER_GROUPS];
    uint32_t slot_count;
    struct router_slot slots[QUERY_HTTP_THREADS_MAX];
    atomic_uint slot_next;
    /* /v1/heat/stream's feed (the event pump's thread only): its slot and when its last turn
     * began (monotonic ns) */
    struct router_slot feed_slot;
    bool feed_slot_open;
    uint64_t feed_turn_ns;
    /* the merged history of the feed's last turn that made frames (owned), NULL: none; the next
     * frames carry the columns that changed since (router_heat_frame) */
    char *feed_history;
    /* what the feed's calls carry: the --node-token's bearer, else the --token's (a stream's
     * client proved it to open the stream, as a request's bearer is passed on); "": none */
    char feed_authorization[sizeof("Bearer ") + HTTP_TOKEN_BYTES_MAX];
    /* the prober */
    struct router_client *probe_client;
    struct router_call *probe_calls; /* node_count */
    pthread_t prober;
    bool prober_started;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    bool stopping; /* under stop_lock */
    /* figures */
    atomic_uint_fast64_t failovers;
    atomic_uint_fast64_t unavailable;
    atomic_uint_fast64_t partial;
};

/* Per request, beside the core's raw target (http_request_state). */
struct router_request {
    bool partial;
    /* /v1/heat/history (the route says QUERY_EP_HEAT, which counts it): the router parses
     * it itself, the nodes' parser being theirs to extend */
    bool history;
    uint32_t history_seconds;
    struct query_route route;
    char forward[HTTP_URI_BYTES_MAX + 1]; /* the target without partial */
    /* forward as the nodes get it: a '#' (a fragment to libcurl, data to the service's
     * parser) sent as %23, which the node decodes back */
    char upstream[ROUTER_TARGET_BYTES_MAX];
};

/* One group's try of a request. */
struct router_attempt {
    uint32_t group;
    uint32_t called;                   /* calls the fan-out made (0: skipped) */
    bool complete;                     /* every member answered and the partitions are covered */
    uint32_t ok;                       /* members with a 200 (or a 404 of /v1/orders/{id}) */
    const struct router_call *verdict; /* a member's 4xx or 501: the answer for all */
    uint32_t missing[ROUTER_NODES_MAX];
    uint32_t missing_count;
    uint32_t missing_partitions[ROUTER_MISSING_PARTITIONS_MAX];
    uint32_t missing_partition_count;
    /* orders model: partitions named by two members, or behind the group's frontier */
    struct router_owner_issue owner_issues[ROUTER_MISSING_PARTITIONS_MAX];
    uint32_t owner_issue_count; /* at most ROUTER_MISSING_PARTITIONS_MAX */
};

/* ---- answers ------------------------------------------------------------------------------- */

/* The router's bodies are measured in size_t; answers are counted under the route's endpoint
 * (the request's tag). */
static enum http_result respond_json(struct http_request *c, unsigned status, char *body,
                                     size_t len)
{
    return http_respond(c, status, body, len, "application/json");
}

/* ,"missing":["URL",...,"partition P",...] of the attempts. */
static void missing_put(const struct router *r, const struct router_attempt *attempts,
                        uint32_t count, struct http_text *b)
{
    http_text_put(b, ",\"missing\":[");
    bool first = true;
    for (uint32_t a = 0; a < count; a++) {
        for (uint32_t i = 0; i < attempts[a].missing_count; i++) {
            const char *url = r->nodes[attempts[a].missing[i]].url;
            char quoted[6u * ROUTER_NODE_URL_BYTES_MAX + 3];
            int64_t n = http_json_string(url, strlen(url), quoted, sizeof(quoted));
            ASSERT(n > 0);
            http_text_put(b, "%s%s", first ? "" : ",", quoted);
            first = false;
        }
        for (uint32_t i = 0; i < attempts[a].missing_partition_count; i++) {
            http_text_put(b, "%s\"partition %u\"", first ? "" : ",",
                          attempts[a].missing_partitions[i]);
            first = false;
        }
        for (uint32_t i = 0; i < attempts[a].owner_issue_count; i++) {
            char text[ROUTER_OWNER_ISSUE_BYTES_MAX];
            router_owner_issue_text(&attempts[a].owner_issues[i], text, sizeof(text));
            http_text_put(b, "%s\"%s\"", first ? "" : ",", text);
            first = false;
        }
    }
    http_text_put(b, "]");
}

/* The 503 of no complete replica, naming what each group missed. */
static enum http_result respond_no_replica(struct router *r, struct http_request *c,
                                           const struct router_attempt *attempts, uint32_t count)
{
    atomic_fetch_add_explicit(&r->unavailable, 1, memory_order_relaxed);
    size_t cap =
        256u + (size_t)r->node_count * (6u * ROUTER_NODE_URL_BYTES_MAX + 4u) +
        ROUTER_GROUPS * ROUTER_MISSING_PARTITIONS_MAX * (24u + ROUTER_OWNER_ISSUE_BYTES_MAX);
    struct http_text b = {.dst = malloc(cap), .capacity = cap};
    if (b.dst == NULL) {
        return respond_json(c, 503, NULL, 0);
    }
    http_text_put(&b, "{\"error\":\"no complete replica\"");
    missing_put(r, attempts, count, &b);
    http_text_put(&b, "}");
    ASSERT(!b.overflow);
    return respond_json(c, 503, b.dst, b.len);
}

/* Answers a merged body (taken) with ,"node_group":G and, for a partial answer, ,"partial":
 * true and the missing list, added before its closing brace. */
static enum http_result respond_merged(struct router *r, struct http_request *c,
                                       struct router_merged *m,
                                       const struct router_attempt *answered,
                                       const struct router_attempt *attempts, uint32_t count)
{
    ASSERT(m->len > 0 && m->body[m->len - 1] == '}');
    bool partial = !answered->complete;
    size_t cap = m->len + 64u +
                 (partial ? (size_t)r->node_count * (6u * ROUTER_NODE_URL_BYTES_MAX + 4u) +
                                ROUTER_GROUPS * ROUTER_MISSING_PARTITIONS_MAX *
                                    (24u + ROUTER_OWNER_ISSUE_BYTES_MAX)
                          : 0u);
    struct http_text b = {.dst = malloc(cap), .capacity = cap};
    if (b.dst == NULL) {
        free(m->body);
        return respond_json(c, 503, NULL, 0);
    }
    memcpy(b.dst, m->body, m->len - 1);
    b.len = m->len - 1;
    free(m->body);
    http_text_put(&b, ",\"node_group\":%u", answered->group + 1);
    if (partial) {
        atomic_fetch_add_explicit(&r->partial, 1, memory_order_relaxed);
        http_text_put(&b, ",\"partial\":true");
        missing_put(r, attempts, count, &b);
    }
    http_text_put(&b, "}");
    ASSERT(!b.overflow);
    return respond_json(c, 200, b.dst, b.len);
}

/* A member's answer copied as it is (a 4xx, a 501, one order). */
static enum http_result respond_copy(struct http_request *c, const struct router_call *call)
{
    char *body = malloc(call->len + 1);
    if (body != NULL) {
        memcpy(body, call->body, call->len + 1);
    }
    return respond_json(c, (unsigned)call->status, body, call->len);
}

/* ---- node state and figures ---------------------------------------------------------------- */

static void node_observe(struct router_node *n, const struct router_call *call)
{
    uint64_t us = call->latency_ns / 1000u;
    uint32_t bucket = 0;
    while (bucket < ROUTER_LATENCY_BUCKETS && us > router_latency_bounds_us[bucket]) {
        bucket++;
    }
    atomic_fetch_add_explicit(&n->latency_buckets[bucket], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n->latency_sum_ns, call->latency_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&n->latency_count, 1, memory_order_relaxed);
}

/* A call to node i timed out: the node hangs. Every fan-out still waiting on it gives up at
 * once (call_abandon) rather than wait out its own timeout. */
static void node_hung(struct router *r, uint32_t i)
{
    atomic_store_explicit(&r->nodes[i].ready, false, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->nodes[i].hangs, 1, memory_order_relaxed);
    for (uint32_t k = 0; k < r->slot_count; k++) {
        if (r->slots[k].client != NULL) {
            router_client_wakeup(r->slots[k].client);
        }
    }
}

/* A member failed a call: counted; with no answer at all, not ready (and suspect) until the
 * prober sees it answer a real count and then its /readyz. */
static void node_failed(struct router *r, const struct router_call *call)
{
    struct router_node *n = &r->nodes[call->node];
    atomic_fetch_add_explicit(&n->errors, 1, memory_order_relaxed);
    if (call->error != 0) {
        atomic_store_explicit(&n->suspect, true, memory_order_relaxed);
        atomic_store_explicit(&n->ready, false, memory_order_relaxed);
        if (call->error == -ETIMEDOUT) {
            node_hung(r, call->node);
        }
        ds_log_warn("router: %s: %s", n->url, call->error_text);
    }
}

/* router_abandon_fn of a data call: its node timed out on another call since this one left. */
static bool call_abandon(const struct router_call *call, void *user)
{
    const struct router *r = user;
    return atomic_load_explicit(&r->nodes[call->node].hangs, memory_order_relaxed) !=
           call->hangs_seen;
}

/* The partitions an answer must cover: 0..N-1 with --partitions N, else the learned set. */
static void expected_partitions(struct router *r, uint64_t *bits)
{
    for (uint32_t w = 0; w < ROUTER_PARTITION_WORDS; w++) {
        bits[w] = atomic_load_explicit(&r->learned[w], memory_order_relaxed);
    }
    if (r->partitions == 0) {
        return;
    }
    memset(bits, 0, ROUTER_PARTITION_WORDS * sizeof(*bits));
    for (uint32_t p = 0; p < r->partitions; p++) {
        bits[p / 64] |= 1ull << (p % 64);
    }
}

/* Checks an answer's as_of against the expected partitions; learns what it covers. */
static void check_coverage(struct router *r, const struct router_offsets *as_of,
                           struct router_attempt *a)
{
    uint64_t want[ROUTER_PARTITION_WORDS];
    expected_partitions(r, want);
    for (uint32_t p = 0; p < ROUTER_PARTITIONS_MAX; p++) {
        bool wanted = (want[p / 64] >> (p % 64)) & 1u;
        bool have = (as_of->bits[p / 64] >> (p % 64)) & 1u;
        if (wanted && !have && a->missing_partition_count < ROUTER_MISSING_PARTITIONS_MAX) {
            a->missing_partitions[a->missing_partition_count++] = p;
        }
    }
    if (a->missing_partition_count > 0) {
        a->complete = false;
        return;
    }
    for (uint32_t w = 0; w < ROUTER_PARTITION_WORDS; w++) {
        atomic_fetch_or_explicit(&r->learned[w], as_of->bits[w], memory_order_relaxed);
    }
}

/* Orders model: refuses an answer counting a partition twice or behind the group's frontier;
 * events model with every member's claims (claims not NULL): refuses overlapping claims or a
 * partition behind the frontier (router_owner.c). */
static void check_owners(struct router *r, const struct router_offsets *as_of,
                         const struct router_claims *claims, struct router_attempt *a)
{
    uint32_t n = claims == NULL
                     ? router_owner_check(&r->frontier[a->group], as_of, a->owner_issues,
                                          ROUTER_MISSING_PARTITIONS_MAX)
                     : router_owner_check_claims(&r->frontier[a->group], as_of, claims,
                                                 a->owner_issues, ROUTER_MISSING_PARTITIONS_MAX);
    a->owner_issue_count = n < ROUTER_MISSING_PARTITIONS_MAX ? n : ROUTER_MISSING_PARTITIONS_MAX;
    a->complete = n == 0;
}

/* ---- fan-out ------------------------------------------------------------------------------- */

/* Takes a free slot (its lock held on return), round-robin. */
static struct router_slot *slot_acquire(struct router *r)
{
    unsigned first = atomic_fetch_add_explicit(&r->slot_next, 1, memory_order_relaxed);
    for (uint32_t i = 0; i < r->slot_count; i++) {
        struct router_slot *s = &r->slots[(first + i) % r->slot_count];
        if (pthread_mutex_trylock(&s->lock) == 0) {
            return s;
        }
    }
    struct router_slot *s = &r->slots[first % r->slot_count];
    ASSERT(pthread_mutex_lock(&s->lock) == 0);
    return s;
}

static void slot_release(struct router_slot *s)
{
    ASSERT(pthread_mutex_unlock(&s->lock) == 0);
}

/* The upstream timeout: the router's, plus the wait a consistent=true request asks of a node. */
static uint32_t call_timeout_ms(const struct router *r, const struct query_route *route)
{
    if (!route->consistent) {
        return r->timeout_ms;
    }
    return r->timeout_ms +
           (route->timeout_ms != 0 ? route->timeout_ms : QUERY_CONSISTENT_TIMEOUT_MS_DEFAULT);
}

/* Judges one member's answer into the attempt. */
static void judge_call(struct router *r, const struct query_route *route,
                       const struct router_call *call, struct router_attempt *a)
{
    long s = call->status;
    bool order_absent = route->endpoint == QUERY_EP_ORDER && s == 404;
    if (call->error == 0 && (s == 200 || order_absent)) {
        a->ok++;
        node_observe(&r->nodes[call->node], call);
    } else if (call->error == 0 && ((s >= 400 && s < 500) || s == 501)) {
        a->verdict = a->verdict != NULL ? a->verdict : call;
        node_observe(&r->nodes[call->node], call);
    } else {
        node_failed(r, call);
        a->missing[a->missing_count++] = call->node;
    }
}

/* Asks every member of group g (or, for a partial answer, every ready one), each call given
 * timeout_ms. A member the prober sees down makes the group incomplete without a call, unless
 * partial. */
static void attempt_group(struct router *r, struct router_slot *s, uint32_t g,
                          const struct router_request *req, const char *authorization,
                          uint32_t timeout_ms, struct router_attempt *a)
{
    memset(a, 0, sizeof(*a));
    a->group = g;
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->group_count[g]; i++) {
        uint32_t node = r->group_first[g] + i;
        if (!atomic_load_explicit(&r->nodes[node].ready, memory_order_relaxed)) {
            a->missing[a->missing_count++] = node;
            continue;
        }
        struct router_call *call = &s->calls[g][n++];
        call->node = node;
        call->hangs_seen = atomic_load_explicit(&r->nodes[node].hangs, memory_order_relaxed);
        int w = snprintf(call->url, sizeof(call->url), "%s%s", r->nodes[node].url, req->upstream);
        ASSERT(w > 0 && (size_t)w < sizeof(call->url));
    }
    if (n == 0 || (a->missing_count > 0 && !req->partial)) {
        return;
    }
    router_client_run(s->client, s->calls[g], n, timeout_ms, authorization, call_abandon, r);
    a->called = n;
    for (uint32_t i = 0; i < n; i++) {
        judge_call(r, &req->route, &s->calls[g][i], a);
    }
    a->complete = a->missing_count == 0 && a->verdict == NULL;
}

/* ---- merging an attempt -------------------------------------------------------------------- */

/* Merges the answering members' bodies of a (its group's calls in s). Returns 0 with m set. */
static int merge_attempt(struct router *r, struct router_slot *s, const struct router_request *req,
                         const struct router_attempt *a, struct router_merged *m)
{
    const struct query_route *route = &req->route;
    const char *bodies[ROUTER_NODES_MAX];
    const char *urls[ROUTER_NODES_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->called; i++) {
        const struct router_call *call = &s->calls[a->group][i];
        if (call->error == 0 && call->status == 200) {
            bodies[n] = call->body;
            urls[n++] = r->nodes[call->node].url;
        }
    }
    ASSERT(n > 0);
    switch (route->endpoint) {
    case QUERY_EP_COUNT: return router_merge_count(route, bodies, n, m);
    case QUERY_EP_ORDERS: return router_merge_orders(route, bodies, n, m);
    case QUERY_EP_PARTITIONS: return router_merge_partitions(bodies, n, m);
    case QUERY_EP_HEAT:
        return req->history ? router_merge_heat_history(req->history_seconds, bodies, n, m)
                            : router_merge_heat(route->top, urls, bodies, n, m);
    default: break;
    }
    ASSERT(false);
    return -EINVAL;
}

/* The call of a's group with a 200, for /v1/orders/{id}; NULL when none has it (*absent: a
 * 404 to copy). */
static const struct router_call *found_order(const struct router_slot *s,
                                             const struct router_attempt *a,
                                             const struct router_call **absent)
{
    for (uint32_t i = 0; i < a->called; i++) {
        const struct router_call *call = &s->calls[a->group][i];
        if (call->error == 0 && call->status == 200) {
            return call;
        }
        if (call->error == 0 && call->status == 404) {
            *absent = call;
        }
    }
    return NULL;
}

/* ---- a request ----------------------------------------------------------------------------- */

/* Merges attempt a (its group's calls in s) into m and, for a complete answer with as_of
 * (counts, partitions), checks its coverage and owners. Returns 0 (m->body is the answer),
 * -EAGAIN (the checks found it incomplete: a says why, m holds nothing) or the merge's error
 * (-DS_ECORRUPT with m->error, -ENOMEM). */
static int attempt_merge(struct router *r, struct router_slot *s, const struct router_request *req,
                         struct router_attempt *a, struct router_merged *m)
{
    const struct query_route *route = &req->route;
    int rc = merge_attempt(r, s, req, a, m);
    if (rc != 0) {
        return rc;
    }
    bool has_as_of = route->endpoint == QUERY_EP_COUNT || route->endpoint == QUERY_EP_PARTITIONS;
    if (m->orders_model) {
        atomic_store_explicit(&r->orders_seen, true, memory_order_relaxed);
    }
    if (has_as_of && a->complete) {
        bool orders = atomic_load_explicit(&r->orders_seen, memory_order_relaxed);
        /* Events model: checked when every member reported its claims (an older node or
         * `serve` reports none, and its answers are not checked). */
        bool claims = !orders && m->events_model && m->claims.all;
        check_coverage(r, &m->as_of, a);
        if (a->complete && (orders || claims)) {
            check_owners(r, &m->as_of, claims ? &m->claims : NULL, a);
        }
        router_claims_free(&m->claims);
        if (!a->complete) {
            free(m->body);
            m->body = NULL;
            return -EAGAIN;
        }
        if (orders || claims) {
            /* Before the answer leaves: a request sent after it sees the frontier. */
            router_frontier_advance(&r->frontier[a->group], &m->as_of);
        }
    }
    router_claims_free(&m->claims);
    ASSERT(m->body != NULL);
    return 0;
}

/* Answers from attempt a: complete, or (partial=true) the group where most members answered.
 * Returns false, answering nothing, when a complete-looking answer misses partitions. */
static bool answer_attempt(struct router *r, struct http_request *c, struct router_slot *s,
                           const struct router_request *req, struct router_attempt *attempts,
                           uint32_t count, struct router_attempt *a, enum http_result *result)
{
    if (req->route.endpoint == QUERY_EP_ORDER) {
        const struct router_call *absent = NULL;
        const struct router_call *hit = found_order(s, a, &absent);
        ASSERT(hit != NULL || absent != NULL);
        *result = respond_copy(c, hit != NULL ? hit : absent);
        return true;
    }
    struct router_merged *m = calloc(1, sizeof(*m));
    int rc = m != NULL ? attempt_merge(r, s, req, a, m) : -ENOMEM;
    if (rc == -EAGAIN) {
        free(m);
        return false;
    }
    if (rc != 0) {
        char text[ROUTER_ERROR_BYTES_MAX + 64];
        snprintf(text, sizeof(text), "%s", rc == -ENOMEM ? "out of memory" : m->error);
        free(m);
        *result = http_respond_error(c, rc == -ENOMEM ? 503 : 502, text);
        return true;
    }
    *result = respond_merged(r, c, m, a, attempts, count);
    free(m);
    return true;
}

/* The data endpoints: the preferred group, then the other; 503 (or partial) without either. */
static enum http_result serve_data(struct router *r, struct http_request *c,
                                   const struct router_request *req, const char *authorization)
{
    struct router_attempt attempts[ROUTER_GROUPS];
    uint32_t count = 0;
    unsigned first = atomic_load_explicit(&r->preferred, memory_order_relaxed);
    struct router_slot *s = slot_acquire(r);
    enum http_result result = HTTP_RESULT_CLOSE;
    bool answered = false;
    for (uint32_t k = 0; k < ROUTER_GROUPS && !answered; k++) {
        uint32_t g = (first + k) % ROUTER_GROUPS;
        if (r->group_count[g] == 0) {
            continue;
        }
        struct router_attempt *a = &attempts[count++];
        attempt_group(r, s, g, req, authorization, call_timeout_ms(r, &req->route), a);
        if (a->verdict != NULL) {
            result = respond_copy(c, a->verdict);
            answered = true;
        } else if (a->complete && answer_attempt(r, c, s, req, attempts, count, a, &result)) {
            answered = true;
            atomic_store_explicit(&r->preferred, g, memory_order_relaxed);
            if (k > 0) {
                atomic_fetch_add_explicit(&r->failovers, 1, memory_order_relaxed);
            }
        }
    }
    if (!answered && req->partial) {
        struct router_attempt *best = NULL;
        for (uint32_t i = 0; i < count; i++) {
            best = attempts[i].ok > 0 && (best == NULL || attempts[i].ok > best->ok) ? &attempts[i]
                                                                                     : best;
        }
        answered = best != NULL && answer_attempt(r, c, s, req, attempts, count, best, &result);
    }
    if (!answered) {
        result = respond_no_replica(r, c, attempts, count);
    }
    slot_release(s);
    return result;
}

/* /readyz: ready while some group has every member ready (the prober's view). */
static enum http_result serve_readyz(struct router *r, struct http_request *c)
{
    struct router_attempt attempts[ROUTER_GROUPS];
    uint32_t count = 0;
    int ready_group = -1;
    for (uint32_t g = 0; g < ROUTER_GROUPS; g++) {
        if (r->group_count[g] == 0) {
            continue;
        }
        struct router_attempt *a = &attempts[count++];
        memset(a, 0, sizeof(*a));
        a->group = g;
        for (uint32_t i = 0; i < r->group_count[g]; i++) {
            uint32_t node = r->group_first[g] + i;
            if (!atomic_load_explicit(&r->nodes[node].ready, memory_order_relaxed)) {
                a->missing[a->missing_count++] = node;
            }
        }
        ready_group = a->missing_count == 0 && ready_group < 0 ? (int)g : ready_group;
    }
    if (ready_group < 0) {
        return respond_no_replica(r, c, attempts, count);
    }
    char text[96];
    int n = snprintf(text, sizeof(text), "{\"ready\":true,\"node_group\":%d}", ready_group + 1);
    return respond_json(c, 200, strdup(text), (size_t)n);
}

/* ---- /metrics ------------------------------------------------------------------------------ */

static void metrics_requests(struct router *r, struct http_text *b)
{
    static const char *const classes[HTTP_CLASS_COUNT] = {"2xx", "4xx", "5xx"};
    http_text_put(b,
                  "# HELP dayshard_router_requests_total Answers of the router by path and status "
                  "class.\n# TYPE dayshard_router_requests_total counter\n");
    for (uint32_t e = 0; e < ROUTER_ENDPOINTS; e++) {
        for (uint32_t k = 0; k < HTTP_CLASS_COUNT; k++) {
            http_text_put(b,
                          "dayshard_router_requests_total{path=\"%s\",code=\"%s\"} %" PRIu64 "\n",
                          router_endpoint_names[e], classes[k],
                          http_server_answers(r->server, e, (enum http_class)k));
        }
    }
    http_text_put(b,
                  "# HELP dayshard_router_failovers_total Requests answered by the group not tried "
                  "first.\n# TYPE dayshard_router_failovers_total counter\n"
                  "dayshard_router_failovers_total %" PRIuFAST64 "\n"
                  "# HELP dayshard_router_unavailable_total Requests answered 503: no complete "
                  "replica.\n# TYPE dayshard_router_unavailable_total counter\n"
                  "dayshard_router_unavailable_total %" PRIuFAST64 "\n"
                  "# HELP dayshard_router_partial_total Answers of partial=true missing a node.\n"
                  "# TYPE dayshard_router_partial_total counter\n"
                  "dayshard_router_partial_total %" PRIuFAST64 "\n",
                  atomic_load_explicit(&r->failovers, memory_order_relaxed),
                  atomic_load_explicit(&r->unavailable, memory_order_relaxed),
                  atomic_load_explicit(&r->partial, memory_order_relaxed));
}

static void metrics_nodes(struct router *r, struct http_text *b)
{
    http_text_put(
        b, "# HELP dayshard_router_node_ready Whether the node was ready at its last probe.\n"
           "# TYPE dayshard_router_node_ready gauge\n");
    for (uint32_t i = 0; i < r->node_count; i++) {
        http_text_put(b, "dayshard_router_node_ready{node=\"%s\",group=\"%u\"} %d\n",
                      r->nodes[i].url, r->nodes[i].group + 1,
                      atomic_load_explicit(&r->nodes[i].ready, memory_order_relaxed) ? 1 : 0);
    }
    http_text_put(b,
                  "# HELP dayshard_router_upstream_errors_total Calls to the node that failed "
                  "(no answer, or a 5xx).\n# TYPE dayshard_router_upstream_errors_total counter\n");
    for (uint32_t i = 0; i < r->node_count; i++) {
        http_text_put(b, "dayshard_router_upstream_errors_total{node=\"%s\"} %" PRIuFAST64 "\n",
                      r->nodes[i].url,
                      atomic_load_explicit(&r->nodes[i].errors, memory_order_relaxed));
    }
    http_text_put(b, "# HELP dayshard_router_upstream_latency_seconds Answered calls to the node.\n"
                     "# TYPE dayshard_router_upstream_latency_seconds histogram\n");
    for (uint32_t i = 0; i < r->node_count; i++) {
        const struct router_node *n = &r->nodes[i];
        uint64_t cumulative = 0;
        for (uint32_t k = 0; k <= ROUTER_LATENCY_BUCKETS; k++) {
            cumulative += atomic_load_explicit(&n->latency_buckets[k], memory_order_relaxed);
            char le[24];
            if (k < ROUTER_LATENCY_BUCKETS) {
                snprintf(le, sizeof(le), "%g", router_latency_bounds_us[k] / 1e6);
            } else {
                snprintf(le, sizeof(le), "+Inf");
            }
            http_text_put(b,
                          "dayshard_router_upstream_latency_seconds_bucket{node=\"%s\",le=\"%s\"} "
                          "%" PRIu64 "\n",
                          n->url, le, cumulative);
        }
        http_text_put(
            b,
            "dayshard_router_upstream_latency_seconds_sum{node=\"%s\"} %.6f\n"
            "dayshard_router_upstream_latency_seconds_count{node=\"%s\"} %" PRIuFAST64 "\n",
            n->url, (double)atomic_load_explicit(&n->latency_sum_ns, memory_order_relaxed) / 1e9,
            n->url, atomic_load_explicit(&n->latency_count, memory_order_relaxed));
    }
}

static enum http_result serve_metrics(struct router *r, struct http_request *c)
{
    size_t cap = 8192u + (size_t)r->node_count * (ROUTER_LATENCY_BUCKETS + 8u) *
                             (ROUTER_NODE_URL_BYTES_MAX + 96u);
    struct http_text b = {.dst = malloc(cap), .capacity = cap};
    if (b.dst == NULL) {
        return respond_json(c, 503, NULL, 0);
    }
    metrics_requests(r, &b);
    metrics_nodes(r, &b);
    ASSERT(!b.overflow); /* the capacity is computed for the node count */
    return http_respond(c, 200, b.dst, b.len, "text/plain; version=0.0.4");
}

/* ---- the prober ---------------------------------------------------------------------------- */

/* Asks every node's /readyz once and records who is ready. A suspect node (a data call to it
 * failed) is asked a real count of today instead: /readyz is answered by the node's HTTP
 * thread alone, which lives on while its reads hang (a stalled disk); once the count answers
 * (any status but a 5xx) it is no longer suspect and the next round asks its /readyz. */
static void probe_once(struct router *r)
{
    char today[16];
    time_t now = time(NULL);
    struct tm tm;
    ASSERT(gmtime_r(&now, &tm) != NULL);
    ASSERT(strftime(today, sizeof(today), "%Y-%m-%d", &tm) == 10);
    bool suspect[ROUTER_NODES_TOTAL_MAX];
    for (uint32_t i = 0; i < r->node_count; i++) {
        struct router_call *call = &r->probe_calls[i];
        call->node = i;
        suspect[i] = atomic_load_explicit(&r->nodes[i].suspect, memory_order_relaxed);
        int w = suspect[i] ? snprintf(call->url, sizeof(call->url), "%s/v1/count?day=%s",
                                      r->nodes[i].url, today)
                           : snprintf(call->url, sizeof(call->url), "%s/readyz", r->nodes[i].url);
        ASSERT(w > 0 && (size_t)w < sizeof(call->url));
    }
    router_client_run(r->probe_client, r->probe_calls, r->node_count, r->timeout_ms,
                      r->node_authorization[0] != '\0' ? r->node_authorization : NULL, NULL, NULL);
    for (uint32_t i = 0; i < r->node_count; i++) {
        const struct router_call *call = &r->probe_calls[i];
        if (call->error == -ETIMEDOUT) {
            node_hung(r, i);
        }
        if (suspect[i]) {
            if (call->error == 0 && call->status < 500) {
                atomic_store_explicit(&r->nodes[i].suspect, false, memory_order_relaxed);
                ds_log_info("router: %s answered a count again", r->nodes[i].url);
            }
            continue;
        }
        /* a data call that failed during this round outweighs an older /readyz */
        bool ready = call->error == 0 && call->status == 200 &&
                     !atomic_load_explicit(&r->nodes[i].suspect, memory_order_relaxed);
        bool was = atomic_exchange_explicit(&r->nodes[i].ready, ready, memory_order_relaxed);
        if (was != ready) {
            ds_log_info("router: %s is %s (%s)", r->nodes[i].url, ready ? "ready" : "not ready",
                        call->error != 0 ? call->error_text : "its /readyz answered");
        }
    }
}

static void *prober_main(void *arg)
{
    struct router *r = arg;
    ASSERT(pthread_mutex_lock(&r->stop_lock) == 0);
    while (!r->stopping) { /* runs until router_stop; one probe round per interval */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)r->probe_interval_ms * 1000000u;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        int rc = pthread_cond_timedwait(&r->stop_cond, &r->stop_lock, &until);
        ASSERT(rc == 0 || rc == ETIMEDOUT);
        if (r->stopping) {
            break;
        }
        ASSERT(pthread_mutex_unlock(&r->stop_lock) == 0);
        probe_once(r);
        ASSERT(pthread_mutex_lock(&r->stop_lock) == 0);
    }
    ASSERT(pthread_mutex_unlock(&r->stop_lock) == 0);
    return NULL;
}

/* ---- libmicrohttpd callbacks --------------------------------------------------------------- */

/* Takes partial=true|false out of the target (target_len bytes, at most HTTP_URI_BYTES_MAX; a
 * parameter of the router only) into req->forward. Returns 0 or 400 with message set. */
static unsigned strip_partial(struct router_request *req, const char *target, size_t target_len,
                              char *message, size_t message_size)
{
    const char *q = memchr(target, '?', target_len);
    size_t path_len = q != NULL ? (size_t)(q - target) : target_len;
    memcpy(req->forward, target, path_len);
    size_t n = path_len;
    bool seen = false;
    size_t start = path_len + 1;
    while (q != NULL && start <= target_len) { /* one parameter a turn; bounded by len */
        const char *amp = memchr(target + start, '&', target_len - start);
        size_t end = amp != NULL ? (size_t)(amp - target) : target_len;
        const char *p = target + start;
        size_t len = end - start;
        if (len >= 8 && memcmp(p, "partial=", 8) == 0) {
            bool yes = len == 12 && memcmp(p + 8, "true", 4) == 0;
            if ((!yes && !(len == 13 && memcmp(p + 8, "false", 5) == 0)) || seen) {
                snprintf(message, message_size, "%s",
                         seen ? "parameter 'partial' given twice"
                              : "bad partial: expected true or false");
                return 400;
            }
            seen = true;
            req->partial = yes;
        } else if (len > 0) {
            req->forward[n] = n == path_len ? '?' : '&';
            n++;
            memcpy(req->forward + n, p, len);
            n += len;
        }
        start = end + 1;
    }
    req->forward[n] = '\0';
    return 0;
}

/* req->forward into req->upstream, each '#' as %23. */
static void upstream_target(struct router_request *req)
{
    size_t n = 0;
    for (const char *p = req->forward; *p != '\0'; p++) {
        ASSERT(n + 4 <= sizeof(req->upstream));
        if (*p == '#') {
            memcpy(req->upstream + n, "%23", 3);
            n += 3;
        } else {
            req->upstream[n++] = *p;
        }
    }
    req->upstream[n] = '\0';
}

/* /v1/heat/history: routed by the router (as heat, a GET with a token) with its seconds
 * checked, so a bad one is a 400 without a fan-out. Returns 0 or the status of an error (with
 * message set); req->history says whether the path was this one. */
static unsigned route_history(struct router_request *req, const char *method, char *message,
                              size_t message_size)
{
    static const char path[] = "/v1/heat/history";
    size_t len = sizeof(path) - 1;
    bool prefix = strncmp(req->forward, path, len) == 0;
    char end = prefix ? req->forward[len] : '/';
    req->history = prefix && (end == '\0' || end == '?');
    if (!req->history) {
        return 0;
    }
    req->route = (struct query_route){.endpoint = QUERY_EP_HEAT, .needs_token = true};
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        snprintf(message, message_size, "method %s not allowed: use GET", method);
        return 405;
    }
    const char *query = end == '?' ? req->forward + len + 1 : "";
    return router_history_parse(query, strlen(query), &req->history_seconds, message, message_size);
}

/* First call of a request (the core checked its size): validates it as a node would, so a bad
 * request is a 4xx without a fan-out. Answering nothing accepts it. */
static enum http_result accept_request(void *user, struct http_request *c, const char *method)
{
    struct router_request *req = http_request_state(c);
    (void)user;
    size_t target_len = 0;
    const char *target = http_request_target(c, &target_len);
    char message[HTTP_ERROR_BYTES_MAX];
    if (strip_partial(req, target, target_len, message, sizeof(message)) != 0) {
        return http_respond_error(c, 400, message);
    }
    struct query_route *route = &req->route;
    unsigned status = route_history(req, method, message, sizeof(message));
    status = req->history ? status
                          : query_route_parse(method, req->forward, strlen(req->forward),
                                              QUERY_RANGE_DAYS_MAX, route);
    http_request_tag(c, route->endpoint);
    bool routed =
        status != 404 && status != 405 && status != 414 && route->endpoint != QUERY_EP_NONE;
    if (routed && route->needs_token &&
        !http_request_authorized(c)) { /* as a node: no answer about the request without it */
        return http_respond_error(c, 401, "missing or wrong bearer token");
    }
    if (status != 0) {
        return http_respond_error(c, status, req->history ? message : route->error);
    }
    upstream_target(req);
    return HTTP_RESULT_OK;
}

/* ---- /v1/heat/stream: the feed ------------------------------------------------------------- */

/* Rows of a frame's "heat" (as a node's frame: /v1/heat?top=20). */
#define ROUTER_FEED_TOP 20u
/* A feed turn at most once a second: a member's heat second moves once a second. */
#define ROUTER_FEED_PERIOD_NS 1000000000ull
/* A frame's warnings: one per member of a group, and the counts'. */
#define ROUTER_FEED_WARNINGS_MAX (ROUTER_NODES_MAX + 1u)
#define ROUTER_FEED_WARNING_BYTES (ROUTER_NODE_URL_BYTES_MAX + ROUTER_ERROR_BYTES_MAX + 48u)

/* One turn's merged answers and what the frame says it lacks. */
struct feed_turn {
    struct router_request req; /* the fan-out at hand */
    uint64_t deadline_ns;      /* the turn's calls end by then (monotonic) */
    struct router_merged heat;
    struct router_merged history;
    struct router_merged counts;
    bool missing[ROUTER_NODES_TOTAL_MAX]; /* a member that gave no heat or history */
    uint32_t warning_count;
    char warnings[ROUTER_FEED_WARNINGS_MAX][ROUTER_FEED_WARNING_BYTES];
};

static uint64_t feed_now_ns(void)
{
    struct timespec ts;
    ASSERT(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What is left of the turn's time for a fan-out, in ms (0: none). */
static uint32_t feed_time_left_ms(const struct feed_turn *t)
{
    uint64_t now = feed_now_ns();
    return now < t->deadline_ns ? (uint32_t)((t->deadline_ns - now + 999999u) / 1000000u) : 0;
}

/* The members of group g the prober sees ready. */
static uint32_t feed_ready_count(const struct router *r, uint32_t g)
{
    uint32_t ready = 0;
    for (uint32_t i = 0; i < r->group_count[g]; i++) {
        ready += atomic_load_explicit(&r->nodes[r->group_first[g] + i].ready, memory_order_relaxed)
                     ? 1u
                     : 0u;
    }
    return ready;
}

/* The group a count would use now: the preferred one while the prober sees every member of it
 * ready, else the other if it is all ready; with neither, the one with the most members ready
 * (the preferred one on a tie), whose ready members give the frame. */
static uint32_t feed_group(const struct router *r)
{
    unsigned first = atomic_load_explicit(&r->preferred, memory_order_relaxed);
    uint32_t best = first;
    uint32_t best_ready = 0;
    for (uint32_t k = 0; k < ROUTER_GROUPS; k++) {
        uint32_t g = (first + k) % ROUTER_GROUPS;
        uint32_t ready = feed_ready_count(r, g);
        if (r->group_count[g] > 0 && ready == r->group_count[g]) {
            return g;
        }
        if (ready > best_ready) {
            best = g;
            best_ready = ready;
        }
    }
    ASSERT(r->group_count[best] > 0);
    return best;
}

/* t->req's target (t->req.forward, formatted) as the nodes get it, routed as a node routes it. */
DS_PRINTF(3, 4) static void feed_target(struct feed_turn *t, bool partial, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->req.forward, sizeof(t->req.forward), fmt, ap);
    va_end(ap);
    ASSERT(n > 0 && (size_t)n < sizeof(t->req.forward));
    bool history = strncmp(t->req.forward, "/v1/heat/history?seconds=", 25) == 0;
    t->req.partial = partial;
    t->req.history = history;
    t->req.history_seconds = history ? (uint32_t)strtoul(t->req.forward + 25, NULL, 10) : 0;
    unsigned status = history ? 0
                              : query_route_parse("GET", t->req.forward, (size_t)n,
                                                  QUERY_RANGE_DAYS_MAX, &t->req.route);
    t->req.route.endpoint = history ? QUERY_EP_HEAT : t->req.route.endpoint;
    ASSERT(status == 0);
    upstream_target(&t->req);
}

/* The heat or history of group g's ready members into m (those that gave none marked in
 * t->missing). Returns 0, -ENOENT (no member answered, or no time left) or a merge's error. */
static int feed_fetch(struct router *r, uint32_t g, struct feed_turn *t, struct router_merged *m)
{
    uint32_t timeout_ms = feed_time_left_ms(t);
    if (timeout_ms == 0) {
        return -ENOENT;
    }
    struct router_attempt a;
    const char *auth = r->feed_authorization[0] != '\0' ? r->feed_authorization : NULL;
    attempt_group(r, &r->feed_slot, g, &t->req, auth, timeout_ms, &a);
    for (uint32_t i = 0; i < a.missing_count; i++) {
        t->missing[a.missing[i]] = true;
    }
    for (uint32_t i = 0; a.verdict != NULL && i < a.called; i++) {
        const struct router_call *call = &r->feed_slot.calls[g][i];
        t->missing[call->node] = t->missing[call->node] || call->status != 200;
    }
    if (a.ok == 0) {
        return -ENOENT;
    }
    int rc = merge_attempt(r, &r->feed_slot, &t->req, &a, m);
    if (rc != 0) {
        ds_log_warn("router: heat stream: %s", rc == -ENOMEM ? "out of memory" : m->error);
    }
    return rc;
}

/* The newest ROUTER_HEAT_FRAME_DAYS days up to last, counted by day as /v1/count?by=day
 * answers through the router: the preferred group, then the other; complete answers only.
 * Returns 0 with t->counts, or -EAGAIN (no complete group in the time left). */
static int feed_counts(struct router *r, int32_t last, struct feed_turn *t)
{
    char first_text[DS_DATE_TEXT_SIZE];
    char last_text[DS_DATE_TEXT_SIZE];
    ds_date_format(last - (int32_t)ROUTER_HEAT_FRAME_DAYS + 1, first_text);
    ds_date_format(last, last_text);
    feed_target(t, false, "/v1/count?day=%s&to=%s&by=day", first_text, last_text);
    const char *auth = r->feed_authorization[0] != '\0' ? r->feed_authorization : NULL;
    unsigned first = atomic_load_explicit(&r->preferred, memory_order_relaxed);
    for (uint32_t k = 0; k < ROUTER_GROUPS; k++) {
        uint32_t g = (first + k) % ROUTER_GROUPS;
        uint32_t timeout_ms = feed_time_left_ms(t);
        if (r->group_count[g] == 0 || timeout_ms == 0) {
            continue;
        }
        struct router_attempt a;
        attempt_group(r, &r->feed_slot, g, &t->req, auth, timeout_ms, &a);
        if (a.complete && a.verdict == NULL &&
            attempt_merge(r, &r->feed_slot, &t->req, &a, &t->counts) == 0) {
            return 0;
        }
        free(t->counts.body);
        t->counts = (struct router_merged){0};
    }
    return -EAGAIN;
}

/* The next warning's buffer (ROUTER_FEED_WARNING_BYTES). */
static char *feed_warning(struct feed_turn *t)
{
    ASSERT(t->warning_count < ROUTER_FEED_WARNINGS_MAX);
    return t->warnings[t->warning_count++];
}

/* Fetches and merges one turn: the heat and the history (seconds) of the group a count would
 * use, and the counts. Returns true when a frame can be made (some member gave both). */
static bool feed_turn_make(struct router *r, uint32_t seconds, struct feed_turn *t)
{
    uint32_t g = feed_group(r);
    feed_target(t, true, "/v1/heat?top=%u", ROUTER_FEED_TOP);
    if (feed_fetch(r, g, t, &t->heat) != 0) {
        /* none of its members answered: the other group's, if it has any */
        g = (g + 1) % ROUTER_GROUPS;
        memset(t->missing, 0, sizeof(t->missing));
        if (r->group_count[g] == 0 || feed_fetch(r, g, t, &t->heat) != 0) {
            return false;
        }
    }
    feed_target(t, true, "/v1/heat/history?seconds=%u", seconds);
    if (feed_fetch(r, g, t, &t->history) != 0) {
        return false;
    }
    for (uint32_t i = 0; i < r->group_count[g]; i++) {
        uint32_t node = r->group_first[g] + i;
        if (t->missing[node]) {
            snprintf(feed_warning(t), ROUTER_FEED_WARNING_BYTES,
                     "%s gave no heat: the frame holds the other members' only",
                     r->nodes[node].url);
        }
    }
    int32_t last = 0;
    if (router_heat_newest_day(t->heat.body, &last) != 0) {
        last = (int32_t)(time(NULL) / 86400); /* no day written yet: today's */
    }
    if (feed_counts(r, last, t) != 0) {
        snprintf(feed_warning(t), ROUTER_FEED_WARNING_BYTES, "%s",
                 "counts: no complete replica answered (the counts are empty)");
        t->counts.body = strdup("{\"groups\":[]}");
    }
    return t->counts.body != NULL;
}

/* Sends each stream the frame after its position (the whole history for a new one): made once
 * per distinct position, copied to the streams at it. A stream whose position is the merged
 * second already gets nothing (the pump's keep-alive covers it). */
static void feed_send(struct http_server *s, const struct http_events_cursor *cursors,
                      uint32_t count, const char *previous_history, struct feed_turn *t)
{
    const char *warnings[ROUTER_FEED_WARNINGS_MAX];
    for (uint32_t i = 0; i < t->warning_count; i++) {
        warnings[i] = t->warnings[i];
    }
    struct router_merged *frame = calloc(1, sizeof(*frame));
    int64_t made_after = -1;
    int64_t made_second = 0;
    uint32_t made_amended = 0;
    for (uint32_t i = 0; frame != NULL && i < count; i++) {
        int64_t after = cursors[i].position > 0 ? cursors[i].position : 0;
        if (made_after != after) {
            free(frame->body);
            *frame = (struct router_merged){0};
            made_after = after;
            struct router_heat_feed f = {.last_second = after,
                                         .previous_history = previous_history};
            int rc = router_heat_frame(&f, t->heat.body, t->history.body, t->counts.body, warnings,
                                       t->warning_count, frame);
            if (rc != 0) {
                ds_log_warn("router: heat stream: %s",
                            rc == -ENOMEM ? "out of memory" : frame->error);
                break;
            }
            made_second = f.last_second;
            made_amended = f.amended_columns;
        }
        if (made_second <= after && made_amended == 0) {
            continue; /* nothing new or amended for this position */
        }
        char *copy = malloc(frame->len);
        if (copy == NULL) {
            break;
        }
        memcpy(copy, frame->body, frame->len);
        (void)http_events_send(s, cursors[i].id, copy, frame->len, made_second);
    }
    if (frame != NULL) {
        free(frame->body);
    }
    free(frame);
}

static void feed_turn_free(struct feed_turn *t)
{
    free(t->heat.body);
    free(t->history.body);
    free(t->counts.body);
    free(t);
}

/* The pump's tick (http_events_tick_fn): at most one turn a second while a stream is open.
 * The history asked covers the stream furthest behind (all 300 s for a new one). */
static void router_heat_tick(void *user, struct http_server *s)
{
    struct router *r = user;
    struct http_events_cursor cursors[HTTP_EVENTS_STREAMS_MAX];
    uint32_t count = http_events_list(s, cursors, HTTP_EVENTS_STREAMS_MAX);
    uint64_t now_ns = feed_now_ns();
    if (count == 0 || now_ns - r->feed_turn_ns < ROUTER_FEED_PERIOD_NS) {
        return;
    }
    r->feed_turn_ns = now_ns;
    int64_t now_s = (int64_t)time(NULL);
    uint32_t seconds = 1;
    for (uint32_t i = 0; i < count; i++) {
        struct router_heat_feed f = {.last_second =
                                         cursors[i].position > 0 ? cursors[i].position : 0};
        uint32_t k = router_heat_feed_seconds(&f, now_s);
        seconds = k > seconds ? k : seconds;
    }
    ASSERT(seconds >= 1 && seconds <= ROUTER_HISTORY_SECONDS_MAX);
    struct feed_turn *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return;
    }
    t->deadline_ns = now_ns + (uint64_t)r->timeout_ms * 1000000u;
    if (feed_turn_make(r, seconds, t)) {
        feed_send(s, cursors, count, r->feed_history, t);
        free(r->feed_history);
        r->feed_history = t->history.body; /* taken */
        t->history.body = NULL;
    }
    feed_turn_free(t);
}

static enum http_result dispatch(void *user, struct http_request *c)
{
    struct router *r = user;
    const struct router_request *req = http_request_state(c);
    switch (req->route.endpoint) {
    case QUERY_EP_HEALTHZ: return respond_json(c, 200, strdup("{\"status\":\"ok\"}"), 15);
    case QUERY_EP_READYZ: return serve_readyz(r, c);
    case QUERY_EP_METRICS: return serve_metrics(r, c);
    /* The page is static and the same everywhere: the router's own, never fanned out. */
    case QUERY_EP_CONSOLE: return query_console_respond(c, &req->route);
    case QUERY_EP_COUNT:
    case QUERY_EP_PARTITIONS:
    case QUERY_EP_ORDERS:
    case QUERY_EP_ORDER:
    case QUERY_EP_HEAT:
        return serve_data(r, c, req,
                          r->node_authorization[0] != '\0'
                              ? r->node_authorization
                              : http_request_header(c, "Authorization"));
    /* Its frames come from the feed (router_heat_tick), the stream only waits for them. */
    case QUERY_EP_HEAT_STREAM: return http_respond_events(c);
    case QUERY_EP_HEAT_HISTORY: break; /* route_history routes it as QUERY_EP_HEAT */
    case QUERY_EP_NONE: break;
    }
    ASSERT(false);
    return HTTP_RESULT_CLOSE;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* A node URL the router accepts: http://, printable, no quote or backslash (it becomes a label
 * value and a JSON string as is), shorter than ROUTER_NODE_URL_BYTES_MAX. */
static bool url_valid(const char *url)
{
    size_t len = url != NULL ? strlen(url) : 0;
    if (len <= 7 || len >= ROUTER_NODE_URL_BYTES_MAX || strncmp(url, "http://", 7) != 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)url[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\' || ch == '?' || ch == '#') {
            return false;
        }
    }
    return true;
}

int router_config_check(const struct router_config *cfg)
{
    bool ok = cfg->node_count >= 1 && cfg->node_count <= ROUTER_NODES_MAX &&
              cfg->replica_count <= ROUTER_NODES_MAX &&
              (cfg->replica_count == 0 || cfg->replicas != NULL) &&
              cfg->threads <= QUERY_HTTP_THREADS_MAX && cfg->timeout_ms <= ROUTER_TIMEOUT_MS_MAX &&
              cfg->connect_timeout_ms <= ROUTER_TIMEOUT_MS_MAX &&
              cfg->probe_interval_ms <= ROUTER_PROBE_MS_MAX &&
              cfg->partitions <= ROUTER_PARTITIONS_MAX &&
              (cfg->token == NULL ||
               (cfg->token[0] != '\0' && strlen(cfg->token) <= HTTP_TOKEN_BYTES_MAX)) &&
              (cfg->node_token == NULL ||
               (cfg->node_token[0] != '\0' && strlen(cfg->node_token) <= HTTP_TOKEN_BYTES_MAX));
    for (uint32_t i = 0; ok && i < cfg->node_count; i++) {
        ok = url_valid(cfg->nodes[i]);
    }
    for (uint32_t i = 0; ok && i < cfg->replica_count; i++) {
        ok = url_valid(cfg->replicas[i]);
    }
    return ok ? 0 : -DS_EUSAGE;
}

/* Copies the URLs (without a trailing slash) into the node table, group by group. */
static void nodes_init(struct router *r, const struct router_config *cfg)
{
    const char *const *lists[ROUTER_GROUPS] = {cfg->nodes, cfg->replicas};
    uint32_t counts[ROUTER_GROUPS] = {cfg->node_count, cfg->replica_count};
    for (uint32_t g = 0; g < ROUTER_GROUPS; g++) {
        r->group_first[g] = r->node_count;
        r->group_count[g] = counts[g];
        for (uint32_t i = 0; i < counts[g]; i++) {
            struct router_node *n = &r->nodes[r->node_count++];
            snprintf(n->url, sizeof(n->url), "%s", lists[g][i]);
            size_t len = strlen(n->url);
            while (len > 7 && n->url[len - 1] == '/') {
                n->url[--len] = '\0';
            }
            n->group = g;
            atomic_store_explicit(&n->ready, false, memory_order_relaxed);
        }
    }
}

static int slots_open(struct router *r, uint32_t threads, uint32_t connect_timeout_ms)
{
    for (uint32_t i = 0; i < threads; i++) {
        struct router_slot *s = &r->slots[i];
        ASSERT(pthread_mutex_init(&s->lock, NULL) == 0);
        r->slot_count = i + 1;
        int rc = router_client_create(connect_timeout_ms, &s->client);
        for (uint32_t g = 0; rc == 0 && g < ROUTER_GROUPS; g++) {
            s->calls[g] = calloc(r->group_count[g] > 0 ? r->group_count[g] : 1, sizeof(**s->calls));
            rc = s->calls[g] != NULL ? 0 : -ENOMEM;
        }
        if (rc != 0) {
            return rc;
        }
    }
    struct router_slot *feed = &r->feed_slot;
    ASSERT(pthread_mutex_init(&feed->lock, NULL) == 0);
    r->feed_slot_open = true;
    int rc = router_client_create(connect_timeout_ms, &feed->client);
    for (uint32_t g = 0; rc == 0 && g < ROUTER_GROUPS; g++) {
        feed->calls[g] =
            calloc(r->group_count[g] > 0 ? r->group_count[g] : 1, sizeof(**feed->calls));
        rc = feed->calls[g] != NULL ? 0 : -ENOMEM;
    }
    if (rc != 0) {
        return rc;
    }
    rc = router_client_create(connect_timeout_ms, &r->probe_client);
    r->probe_calls = rc == 0 ? calloc(r->node_count, sizeof(*r->probe_calls)) : NULL;
    return rc != 0 ? rc : (r->probe_calls != NULL ? 0 : -ENOMEM);
}

static void slot_close(struct router *r, struct router_slot *s)
{
    for (uint32_t g = 0; g < ROUTER_GROUPS; g++) {
        for (uint32_t k = 0; s->calls[g] != NULL && k < r->group_count[g]; k++) {
            router_call_release(&s->calls[g][k]);
        }
        free(s->calls[g]);
    }
    router_client_destroy(s->client);
    pthread_mutex_destroy(&s->lock);
}

static void slots_close(struct router *r)
{
    for (uint32_t i = 0; i < r->slot_count; i++) {
        slot_close(r, &r->slots[i]);
    }
    if (r->feed_slot_open) {
        slot_close(r, &r->feed_slot);
    }
    free(r->feed_history);
    r->feed_history = NULL;
    for (uint32_t k = 0; r->probe_calls != NULL && k < r->node_count; k++) {
        router_call_release(&r->probe_calls[k]);
    }
    free(r->probe_calls);
    router_client_destroy(r->probe_client);
}

static int router_open(struct router *r, const struct router_config *cfg)
{
    uint32_t threads = cfg->threads != 0 ? cfg->threads : ROUTER_THREADS_DEFAULT;
    struct http_server_config server = {
        .name = "router",
        .listen = cfg->listen != NULL ? cfg->listen : QUERY_HTTP_LISTEN_DEFAULT,
        .threads = threads,
        .connections_max = QUERY_HTTP_CONNECTIONS_DEFAULT,
        .connections_per_ip = QUERY_HTTP_CONNECTIONS_PER_IP_DEFAULT,
        .idle_timeout_s = QUERY_HTTP_IDLE_TIMEOUT_S_DEFAULT,
        .token = cfg->token,
        /* A client told 503 may come back in a second: the prober has looked again by then. */
        .flags = HTTP_SERVER_RETRY_503,
        .request_state_bytes = sizeof(struct router_request),
        .events_streams_max = HTTP_EVENTS_STREAMS_MAX, /* as a node */
        .events_tick = router_heat_tick,
        .accept = accept_request,
        .dispatch = dispatch,
        .user = r,
    };
    int rc = http_server_open(&server, &r->server);
    if (rc != 0) {
        return rc;
    }
    rc = slots_open(r, threads,
                    cfg->connect_timeout_ms != 0 ? cfg->connect_timeout_ms
                                                 : ROUTER_CONNECT_TIMEOUT_MS_DEFAULT);
    if (rc != 0) {
        return rc;
    }
    probe_once(r); /* the first answers know which nodes are up */
    if (pthread_create(&r->prober, NULL, prober_main, r) != 0) {
        return -EAGAIN;
    }
    r->prober_started = true;
    return http_server_start(r->server);
}

int router_start(const struct router_config *cfg, struct router **out)
{
    int rc = router_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct router *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    if (router_fanout_init() != 0) {
        free(r);
        return -ENOMEM;
    }
    r->timeout_ms = cfg->timeout_ms != 0 ? cfg->timeout_ms : ROUTER_TIMEOUT_MS_DEFAULT;
    r->probe_interval_ms =
        cfg->probe_interval_ms != 0 ? cfg->probe_interval_ms : ROUTER_PROBE_MS_DEFAULT;
    r->partitions = cfg->partitions;
    if (cfg->node_token != NULL) {
        snprintf(r->node_authorization, sizeof(r->node_authorization), "Bearer %s",
                 cfg->node_token);
    }
    const char *feed_token = cfg->node_token != NULL ? cfg->node_token : cfg->token;
    if (feed_token != NULL) {
        snprintf(r->feed_authorization, sizeof(r->feed_authorization), "Bearer %s", feed_token);
    }
    ASSERT(pthread_mutex_init(&r->stop_lock, NULL) == 0);
    ASSERT(pthread_cond_init(&r->stop_cond, NULL) == 0);
    nodes_init(r, cfg);
    rc = router_open(r, cfg);
    if (rc != 0) {
        router_stop(r);
        return rc;
    }
    *out = r;
    return 0;
}

const char *router_address(const struct router *r)
{
    return http_server_address(r->server);
}

void router_stop(struct router *r)
{
    if (r == NULL) {
        return;
    }
    http_server_close(r->server); /* no request runs past this */
    if (r->prober_started) {
        ASSERT(pthread_mutex_lock(&r->stop_lock) == 0);
        r->stopping = true;
        ASSERT(pthread_cond_signal(&r->stop_cond) == 0);
        ASSERT(pthread_mutex_unlock(&r->stop_lock) == 0);
        ASSERT(pthread_join(r->prober, NULL) == 0);
    }
    slots_close(r);
    pthread_cond_destroy(&r->stop_cond);
    pthread_mutex_destroy(&r->stop_lock);
    router_fanout_deinit();
    free(r);
}
