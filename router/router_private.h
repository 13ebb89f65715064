/*
 * Private to router/: the pieces of the router (router.c, the service and its failover rules)
 * that live in their own files: the upstream client over libcurl multi (router_fanout.c) and
 * the merging of node answers into one document (router_merge.c). Both are free of
 * libmicrohttpd, so they read as plain functions over bytes.
 */
#ifndef DS_ROUTER_ROUTER_PRIVATE_H
#define DS_ROUTER_ROUTER_PRIVATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"
#include "query/query.h"
#include "router/router.h"

/* Group 1 (--node) and group 2 (--replica). */
#define ROUTER_GROUPS 2u
#define ROUTER_NODES_TOTAL_MAX (ROUTER_GROUPS * ROUTER_NODES_MAX)
/* One node answer the router reads at most: a page of 1000 orders is ~550 KiB, a day's
 * partitions of 1024 shards ~200 KiB; a larger answer is a failure of that node. */
#define ROUTER_ANSWER_BYTES_MAX (4u * 1024 * 1024)
/* Kafka partitions the as_of merge and the completeness check know: the same bound as a
 * node's lag metrics (labels and bitmaps stay bounded). */
#define ROUTER_PARTITIONS_MAX QUERY_METRICS_LAG_PARTITIONS_MAX
#define ROUTER_PARTITION_WORDS (ROUTER_PARTITIONS_MAX / 64u)
/* A request target as the router sends it: at most HTTP_URI_BYTES_MAX bytes, each '#' sent as
 * %23 (three bytes), and a NUL. */
#define ROUTER_TARGET_BYTES_MAX (3u * HTTP_URI_BYTES_MAX + 1u)
/* A full upstream URL: the node's base and a target. */
#define ROUTER_URL_BYTES_MAX (ROUTER_NODE_URL_BYTES_MAX + ROUTER_TARGET_BYTES_MAX + 64u)
#define ROUTER_ERROR_BYTES_MAX 160u

_Static_assert(ROUTER_PARTITIONS_MAX % 64u == 0, "the partition bitmap is whole words");

/* ---- router_fanout.c: parallel GETs over kept-alive connections ---------------------------- */

/* One upstream GET of a fan-out and its answer. */
struct router_call {
    uint32_t node;                  /* the router's node index: picks the easy handle */
    char url[ROUTER_URL_BYTES_MAX]; /* set by the caller */
    long status;                    /* HTTP status, 0 when there was no answer */
    int error; /* 0, or -ECONNREFUSED, -ETIMEDOUT, -ECANCELED (abandoned), -EMSGSIZE, -EIO */
    char error_text[ROUTER_ERROR_BYTES_MAX]; /* for a failure: libcurl's words */
    char *body;                              /* owned (router_call_release), NUL-terminated */
    size_t len;
    size_t capacity;
    uint64_t latency_ns;
    uint64_t hangs_seen; /* the caller's: what abandon compares (the node's hangs at the start) */
    bool running;        /* in the multi handle now */
};

/* Whether to give up a call still waiting (its node stopped answering another call): asked
 * for every waiting call after each wake-up of the fan-out. */
typedef bool (*router_abandon_fn)(const struct router_call *call, void *user);

/* A libcurl multi handle and one easy handle per node (created on first use and kept, so each
 * node's connection stays alive across requests). One thread at a time. */
struct router_client;

/* libcurl's global state: once before the first client (counted by libcurl), and the
 * matching deinit after the last one is destroyed. Returns 0 or -ENOMEM. */
DS_MUST_USE int router_fanout_init(void);
void router_fanout_deinit(void);
DS_MUST_USE int router_client_create(uint32_t connect_timeout_ms, struct router_client **out);
void router_client_destroy(struct router_client *c);
/* GETs every call's url at once and waits until all answered, failed, were abandoned
 * (abandon, may be NULL: the call fails with -ECANCELED at once) or timeout_ms passed.
 * authorization (NULL: none) is sent as the Authorization header. */
void router_client_run(struct router_client *c, struct router_call *calls, uint32_t count,
                       uint32_t timeout_ms, const char *authorization, router_abandon_fn abandon,
                       void *abandon_user);
/* Any thread: makes a router_client_run in progress on c ask abandon again now. */
void router_client_wakeup(struct router_client *c);
/* Frees the call's body; the call can be run again. */
void router_call_release(struct router_call *call);

/* ---- router_merge.c: one document from the members' answers -------------------------------- */

/* Partition -> next offset, merged over members (the larger offset where two members have the
 * same partition: a partition handed over inside a group is in both, the newer holder ahead). */
struct router_offsets {
    bool present;  /* some member's answer had the object */
    bool has_file; /* the "file" source (a directory loaded by `ingest`) */
    int64_t file_next;
    uint64_t bits[ROUTER_PARTITION_WORDS];  /* partitions present */
    uint64_t twice[ROUTER_PARTITION_WORDS]; /* partitions more than one member named */
    int64_t next[ROUTER_PARTITIONS_MAX];
};

/* The end of an open claim: the member owns the partition now ("end" null). A member's numeric
 * end is below it (the merge refuses INT64_MAX). */
#define ROUTER_CLAIM_OPEN INT64_MAX

/* A member's latest run of a Kafka partition, from its count's "claims":{"P":[from, end]}:
 * the offsets [from, end) it read in that run and holds; empty when from >= end. */
struct router_claim {
    int64_t from;
    int64_t end; /* ROUTER_CLAIM_OPEN: open */
    uint32_t partition;
    uint32_t member; /* the answer's index among the merged bodies */
};

/* Every member's claims of a merged count (not merged: the check compares members), sorted by
 * partition, then from, then member. */
struct router_claims {
    bool all;       /* every member's answer had a "claims" object (an empty one counts) */
    uint32_t count; /* at most members * ROUTER_PARTITIONS_MAX */
    struct router_claim *items; /* malloc'd (NULL when count is 0): router_claims_free */
};

/* A merged answer: the body (malloc'd, taken by the caller), what the completeness check
 * needs, and the claims (the caller frees them with router_claims_free). */
struct router_merged {
    char *body;
    size_t len;
    struct router_offsets as_of;
    bool orders_model; /* a member's count said "model":"orders" (router_owner.c's rules) */
    bool events_model; /* a member's count said "model":"events" */
    struct router_claims claims;        /* counts only; set only when the merge returns 0 */
    char error[ROUTER_ERROR_BYTES_MAX]; /* why a member's answer could not be merged */
};

/* Each merge reads the 200 answers of bodies[0..count) (NUL-terminated), writes out->body and
 * returns 0, or returns -DS_ECORRUPT (an answer is not the document a node gives: out->error
 * says which field) or -ENOMEM. */
DS_MUST_USE int router_merge_count(const struct query_route *route, const char *const *bodies,
                                   uint32_t count, struct router_merged *out);
DS_MUST_USE int router_merge_orders(const struct query_route *route, const char *const *bodies,
                                    uint32_t count, struct router_merged *out);
DS_MUST_USE int router_merge_partitions(const char *const *bodies, uint32_t count,
                                        struct router_merged *out);
/* Frees c's items; c is then empty. NULL-safe items. */
void router_claims_free(struct router_claims *c);

/* The merges' shared pieces (router_heat.c uses them too). */
struct json_t;
typedef void (*router_render_fn)(struct http_text *b, const void *user);
/* Renders into a new buffer (out->body) of capacity cap, doubling until it fits (at most 16
 * tries). Returns 0 or -ENOMEM. */
DS_MUST_USE int router_render_new(router_render_fn render, const void *user, size_t cap,
                                  struct router_merged *out);
/* Parses bodies[0..count) into docs (released by router_docs_free, also after a failure).
 * Returns 0, or -DS_ECORRUPT (out->error: a body is not a JSON object). */
DS_MUST_USE int router_docs_load(const char *const *bodies, uint32_t count, struct json_t **docs,
                                 struct router_merged *out);
void router_docs_free(struct json_t **docs, uint32_t count);

/* ---- router_heat.c: heat through the router (one group's members) ------------------------- */

/* /v1/heat/history?seconds=N: N is 1..300 (the seconds a node's history holds), 300 unless
 * given. */
#define ROUTER_HISTORY_SECONDS_MAX 300u

/* /v1/heat: {"nodes":[{"node":URL,"heat":ANSWER},...],"merged":{...}}: each answer as the node
 * gave it, and one document shaped like a node's /v1/heat (top rows per list) summing them
 * (router_heat.c says how). Returns as the other merges. */
DS_MUST_USE int router_merge_heat(uint32_t top, const char *const *urls, const char *const *bodies,
                                  uint32_t count, struct router_merged *out);
/* /v1/heat/history: one history document (spec: columns summed by t up to the oldest of the
 * members' newest seconds, growths unioned), with "members" and, when the members' capacities
 * differ, "warnings". Returns as the other merges. */
DS_MUST_USE int router_merge_heat_history(uint32_t seconds, const char *const *bodies,
                                          uint32_t count, struct router_merged *out);
/* /v1/heat/stream's frames (spec: once a second, "event: heat" and one "data:" line). The
 * router has no heat clock: each turn it asks the members for /v1/heat?top=20 and
 * /v1/heat/history?seconds=K (K from router_heat_feed_seconds), merges them as above, counts
 * the newest days through its own count fan-out (/v1/count?by=day), and router_heat_frame
 * makes the frame, its history only the columns after the previous frame's. One feed per
 * stream (or one shared by every stream of a server, frames then shared); zeroed memory is a
 * feed before its first frame. */
struct router_heat_feed {
    int64_t last_second; /* the merged history's second of the last frame; 0: none yet */
    /* In: the merged history the previous frames were made from (router_merge_heat_history's
     * answer, borrowed for the call), NULL: none. A column of a second up to last_second goes
     * again when it differs from that history's (a member amended it: a late event). */
    const char *previous_history;
    /* Out: the columns of the frame at or before last_second (amended ones). */
    uint32_t amended_columns;
};
/* Days a frame's "counts" lists at most (the newest). */
#define ROUTER_HEAT_FRAME_DAYS 31u
/* Seconds asked beyond the wall clock's distance to the last frame: a member's heat second
 * runs ahead of the wall clock by up to the 10 s a producer's clock may lead (shard/heat.c),
 * and the frame drops what the previous one gave. */
#define ROUTER_HEAT_FEED_SLACK_S 10
/* Seconds a turn asks at least: a member amends a column while its second is in the heat's
 * window, so a turn sees every amendment of a second it has sent (with the slack). */
#define ROUTER_HEAT_AMEND_S (SHARD_HEAT_WINDOW_S + ROUTER_HEAT_FEED_SLACK_S)
_Static_assert(ROUTER_HEAT_AMEND_S <= ROUTER_HISTORY_SECONDS_MAX, "the amend window is asked");
/* K for the next turn: ROUTER_HISTORY_SECONDS_MAX before the first frame (or after a gap that
 * long), else the seconds since the last frame's (now_s: the wall clock) plus the slack, at
 * least ROUTER_HEAT_AMEND_S. */
uint32_t router_heat_feed_seconds(const struct router_heat_feed *f, int64_t now_s);
/* The frame "event: heat\ndata: {"heat":H,"history":Y,"counts":[{"day","count"},...]}\n\n"
 * into out->body: heat is router_merge_heat's answer (H its "merged"), history
 * router_merge_heat_history's (Y without the columns and growths up to f's last second, but
 * for the columns that differ from f's previous history: amended since, f->amended_columns),
 * counts a by=day count's answer (its newest ROUTER_HEAT_FRAME_DAYS groups); with
 * warning_count > 0 the frame adds "warnings":[...] (warnings[0..warning_count), plain text:
 * what the frame lacks, a member that did not answer). Advances f to the history's second.
 * Returns 0, -DS_ECORRUPT (out->error names the field; f unchanged) or -ENOMEM. */
DS_MUST_USE int router_heat_frame(struct router_heat_feed *f, const char *heat, const char *history,
                                  const char *counts, const char *const *warnings,
                                  uint32_t warning_count, struct router_merged *out);
/* The newest day of the "days" of router_merge_heat's answer ("merged"): 0 with *day (days
 * since the epoch), or -ENOENT (none listed). The frame's counts end there: the day written
 * last is the newest one the members hold. */
DS_MUST_USE int router_heat_newest_day(const char *heat, int32_t *day);
/* The query of /v1/heat/history (after '?', len bytes): returns 0 with *seconds, or 400 with
 * message set (an unknown parameter, a bad or repeated seconds). */
DS_MUST_USE unsigned router_history_parse(const char *query, size_t len, uint32_t *seconds,
                                          char *message, size_t message_size);

/* ---- router_owner.c: each Kafka partition's records counted once -------------------------- */

/* In the orders model a node holds the whole state of the Kafka partitions it stored and not
 * released, and its as_of names exactly those (both from one storage commit). A group's merged
 * answer is complete only when no partition is named by two members (its orders would be
 * summed twice: the new owner committed some before the old owner's release) and no partition
 * is behind the furthest offset the group's complete answers reached (a new owner still
 * re-reading a taken-over partition from its start holds a prefix of its orders).
 * In the events model every holder of a partition keeps its own offsets of it, so two members
 * naming it is normal; what counts an event twice is two members holding one offset, which
 * their claims (each one's latest run of the partition) show as an overlap. */
enum router_owner_fault {
    ROUTER_OWNER_TWICE = 1, /* two members named the partition */
    ROUTER_OWNER_BEHIND,    /* its offset is below the group's frontier */
    ROUTER_OWNER_CLAIMED    /* events model: two members' claims of it overlap */
};

struct router_owner_issue {
    uint32_t partition;
    enum router_owner_fault fault;
    int64_t next;     /* the answer's offset */
    int64_t frontier; /* the furthest offset of an earlier complete answer */
    /* CLAIMED: the two overlapping claims [from, end), the one starting first at [0] */
    int64_t from[2];
    int64_t end[2]; /* ROUTER_CLAIM_OPEN: open */
};

/* Per group: the furthest as_of offset of each partition in the complete answers given so far
 * (0: none yet; offsets are >= 0). Zeroed memory is an empty frontier; any thread. */
struct router_frontier {
    atomic_int_fast64_t next[ROUTER_PARTITIONS_MAX];
};

/* The issues of as_of (partitions in increasing order): all of them counted, the first cap
 * written to issues. 0: the answer counts every partition once, none behind. */
uint32_t router_owner_check(const struct router_frontier *f, const struct router_offsets *as_of,
                            struct router_owner_issue *issues, uint32_t cap);
/* The events model's rule, for an answer whose members all reported claims: the partitions
 * two members' claims overlap in ([from, end) with an open end past every offset; an empty
 * claim overlaps nothing; a claim ending where another starts does not overlap it), and the
 * partitions of as_of behind the frontier, in increasing order, one issue per partition (the
 * overlap first); counted and written as router_owner_check does. Two members naming one
 * partition in as_of is no fault here: every member keeps what it stored of a partition
 * handed over, and the claims say whether those parts are disjoint. */
uint32_t router_owner_check_claims(const struct router_frontier *f,
                                   const struct router_offsets *as_of,
                                   const struct router_claims *claims,
                                   struct router_owner_issue *issues, uint32_t cap);
/* One issue's words for the 503's "missing" list: "partition P held by two members",
 * "partition P behind (N < F)" or "partition P claimed by two members (F1..E1, F2..E2)" (an
 * open end is "open"), NUL-terminated into dst (cap >= ROUTER_OWNER_ISSUE_BYTES_MAX). */
#define ROUTER_OWNER_ISSUE_BYTES_MAX 128u
void router_owner_issue_text(const struct router_owner_issue *o, char *dst, size_t cap);
/* Raises f to as_of's offsets (an answer about to be given as complete). */
void router_frontier_advance(struct router_frontier *f, const struct router_offsets *as_of);

/* The page token of an order at (ts_ms, order id): the lowercase hex of its position in the
 * by-customer index (index/key.c's tail key, which every node's tokens use), into dst
 * (QUERY_ORDERS_TOKEN_CHARS_MAX + 1 bytes). */
void router_order_token(int64_t ts_ms, const struct ds_id *order, char *dst);

#endif /* DS_ROUTER_ROUTER_PRIVATE_H */
