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

/* A merged answer: the body (malloc'd, taken by the caller) and what the completeness check
 * needs. */
struct router_merged {
    char *body;
    size_t len;
    struct router_offsets as_of;
    bool orders_model; /* a member's count said "model":"orders" (router_owner.c's rules) */
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
/* /v1/heat: {"nodes":[{"node":URL,"heat":ANSWER},...]}, each answer as the node gave it. */
DS_MUST_USE int router_merge_heat(const char *const *urls, const char *const *bodies,
                                  uint32_t count, struct router_merged *out);

/* ---- router_owner.c: each Kafka partition counted from one holder (orders model) ----------- */

/* In the orders model a node holds the whole state of the Kafka partitions it stored and not
 * released, and its as_of names exactly those (both from one storage commit). A group's merged
 * answer is complete only when no partition is named by two members (its orders would be
 * summed twice: the new owner committed some before the old owner's release) and no partition
 * is behind the furthest offset the group's complete answers reached (a new owner still
 * re-reading a taken-over partition from its start holds a prefix of its orders). */
enum router_owner_fault {
    ROUTER_OWNER_TWICE = 1, /* two members named the partition */
    ROUTER_OWNER_BEHIND     /* its offset is below the group's frontier */
};

struct router_owner_issue {
    uint32_t partition;
    enum router_owner_fault fault;
    int64_t next;     /* the answer's offset */
    int64_t frontier; /* the furthest offset of an earlier complete answer */
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
/* Raises f to as_of's offsets (an answer about to be given as complete). */
void router_frontier_advance(struct router_frontier *f, const struct router_offsets *as_of);

/* The page token of an order at (ts_ms, order id): the lowercase hex of its position in the
 * by-customer index (index/key.c's tail key, which every node's tokens use), into dst
 * (QUERY_ORDERS_TOKEN_CHARS_MAX + 1 bytes). */
void router_order_token(int64_t ts_ms, const struct ds_id *order, char *dst);

#endif /* DS_ROUTER_ROUTER_PRIVATE_H */
