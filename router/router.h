/*
 * router: `dayshard router`, one HTTP API over several nodes.
 *
 * The router (router.c; its head comment has the rules) answers the HTTP API of a node by
 * asking every member of one node group in parallel and merging their answers: group 1 are the
 * --node URLs, group 2 the --replica URLs (a second consumer group over the same topic, a
 * complete copy). It answers from one complete group, fails over to the other, and answers 503
 * naming the missing nodes when neither is complete (partial=true opts in to a partial answer
 * that says what is missing). It validates requests with the node's own parser (query.h) and
 * serves them on the HTTP server core (http.h).
 *
 * Threads: its own (libmicrohttpd workers and a prober); router_start .. router_stop from one
 * thread.
 */
#ifndef DS_ROUTER_ROUTER_H
#define DS_ROUTER_ROUTER_H

#include <stdint.h>

#include "common/common.h"

/* Members of one group: each holds a TCP connection per router worker. */
#define ROUTER_NODES_MAX 64u
/* A node URL: "http://HOST:PORT" with an optional path prefix. */
#define ROUTER_NODE_URL_BYTES_MAX 256u
/* The per-request timeout of an upstream call (a consistent=true request adds its own wait). */
#define ROUTER_TIMEOUT_MS_DEFAULT 2000u
#define ROUTER_TIMEOUT_MS_MAX 60000u
/* Connecting to a node: nodes are on the same network; a dead host must not hold a request. */
#define ROUTER_CONNECT_TIMEOUT_MS_DEFAULT 250u
/* Between two /readyz probes of every node. */
#define ROUTER_PROBE_MS_DEFAULT 500u
#define ROUTER_PROBE_MS_MAX 60000u

struct router_config {
    const char *const *nodes;    /* group 1: node_count base URLs (borrowed; copied) */
    uint32_t node_count;         /* 1..ROUTER_NODES_MAX */
    const char *const *replicas; /* group 2, or NULL (borrowed; copied) */
    uint32_t replica_count;      /* 0..ROUTER_NODES_MAX */
    const char *listen;          /* "HOST:PORT" (port 0: any), NULL for the default; copied */
    uint32_t threads;            /* workers, each with its own connections; 0: the default */
    uint32_t timeout_ms;         /* per upstream call; 0: ROUTER_TIMEOUT_MS_DEFAULT */
    uint32_t connect_timeout_ms; /* 0: ROUTER_CONNECT_TIMEOUT_MS_DEFAULT */
    uint32_t probe_interval_ms;  /* 0: ROUTER_PROBE_MS_DEFAULT */
    uint32_t partitions;         /* Kafka partitions of the topic, or 0: learned (the largest
                                  * set of partitions the nodes' as_of ever covered) */
    const char *token;           /* clients must send "Authorization: Bearer token" on every
                                  * path but /healthz and /readyz; NULL: open. Copied. */
    const char *node_token;      /* sent to every node as a bearer token (data calls and
                                  * probes); NULL: a client's Authorization header is passed on
                                  * to the nodes as it came. Copied. */
};

struct router;

/* Returns 0 or -DS_EUSAGE: no node, too many, a URL that is not http://, a knob out of range. */
DS_MUST_USE int router_config_check(const struct router_config *cfg);
/* Probes every node once, binds and starts serving. Returns 0, -DS_EUSAGE, -EADDRINUSE or
 * another negated errno (bind), or -ENOMEM. */
DS_MUST_USE int router_start(const struct router_config *cfg, struct router **out);
/* "HOST:PORT" actually bound. */
const char *router_address(const struct router *r);
/* Stops accepting, finishes the requests in progress, closes everything. Accepts NULL. */
void router_stop(struct router *r);

#endif /* DS_ROUTER_ROUTER_H */
