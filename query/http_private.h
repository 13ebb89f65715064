/*
 * Private to query/: the HTTP request router and validator (http_request.c), kept free of
 * libmicrohttpd so unit tests drive it with plain strings, and the limits of the service.
 */
#ifndef DS_QUERY_HTTP_PRIVATE_H
#define DS_QUERY_HTTP_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "query/query.h"

/* The raw request target (path and query): a count needs under 120 bytes; 2 KiB leaves room
 * for long status values and is what common proxies accept without complaint. Longer: 414. */
#define HTTP_URI_BYTES_MAX 2048u
/* All request header names and values together; longer: 431. */
#define HTTP_HEADERS_BYTES_MAX 8192u
/* libmicrohttpd's per-connection memory; past it libmicrohttpd answers 414/431 itself (with
 * its own HTML body). It must leave room above our own JSON-answered limits. */
#define HTTP_CONNECTION_MEMORY_BYTES 32768u
/* A decoded parameter name and value; a status is at most DS_STATUS_BYTES_MAX. */
#define HTTP_PARAM_NAME_BYTES_MAX 32u
#define HTTP_PARAM_VALUE_BYTES_MAX 256u
/* Parameters in one request: the richest endpoint (/v1/count) takes six. */
#define HTTP_PARAMS_MAX 8u
#define HTTP_ERROR_BYTES_MAX 256u
/* Orders per page a client may ask for (the GSI issue may lower it). */
#define HTTP_ORDERS_LIMIT_MAX 1000u

/* Token bytes: enough for any generated secret, small enough to compare in constant time. */
#define HTTP_TOKEN_BYTES_MAX 256u
/* Whether an Authorization header value is "Bearer " and token (http_request.c). Constant time
 * over the token's length: the answer must not reveal a matching prefix. authorization may be
 * NULL (no header). */
bool http_bearer_ok(const char *authorization, const char *token, size_t token_len);

/* Binds and listens on "HOST:PORT" (listen.c): *fd gets the non-blocking socket and address
 * the bound "HOST:PORT" (the port picked for 0). Returns 0, -DS_EUSAGE for an address that
 * does not parse or resolve, or a negated errno of socket/bind/listen. */
DS_MUST_USE int http_listen(const char *listen_text, int *fd, char *address, size_t address_size);

enum http_endpoint {
    HTTP_EP_NONE = 0,
    HTTP_EP_COUNT,
    HTTP_EP_PARTITIONS,
    HTTP_EP_METRICS,
    HTTP_EP_HEALTHZ,
    HTTP_EP_READYZ,
    HTTP_EP_ORDERS,
    HTTP_EP_HEAT,
    HTTP_EP_ORDER, /* /v1/orders/{order_id}: one order (P2, the orders model) */
};
/* Rows per list of /v1/heat by default (?top=N, 1..SHARD_HEAT_TOP_MAX). */
#define HTTP_HEAT_TOP_DEFAULT 10u

struct http_route {
    enum http_endpoint endpoint;      /* set as soon as the path is known, even on a later error */
    bool needs_token;                 /* every endpoint but the probes */
    struct query_count_request count; /* HTTP_EP_COUNT */
    int32_t day;                      /* HTTP_EP_PARTITIONS */
    uint32_t limit;                   /* HTTP_EP_ORDERS: 1..HTTP_ORDERS_LIMIT_MAX */
    uint32_t top;                     /* HTTP_EP_HEAT: 1..SHARD_HEAT_TOP_MAX */
    struct ds_id customer;            /* HTTP_EP_ORDERS */
    struct ds_id order_id;            /* HTTP_EP_ORDER */
    bool consistent;                  /* HTTP_EP_ORDERS, HTTP_EP_ORDER, HTTP_EP_COUNT */
    uint32_t timeout_ms; /* with consistent: 1..QUERY_CONSISTENT_TIMEOUT_MS_MAX, 0 not given */
    char cursor[QUERY_ORDERS_TOKEN_CHARS_MAX + 1]; /* HTTP_EP_ORDERS; "" for the first page */
    char error[HTTP_ERROR_BYTES_MAX];              /* the message of a 4xx answer */
};

/* Routes and validates one request: method, raw target (path and query, len bytes, not
 * NUL-terminated; it may contain NUL bytes, which are refused). Returns 0 with out filled, or
 * the HTTP status of the error (400, 404, 405, 414) with out->error set. range_days_max bounds
 * /v1/count ranges (1..QUERY_RANGE_DAYS_MAX). */
DS_MUST_USE unsigned http_route_parse(const char *method, const char *target, size_t len,
                                      uint32_t range_days_max, struct http_route *out);

/* "GET, HEAD": what every endpoint allows (the Allow header of a 405). */
#define HTTP_ALLOW "GET, HEAD"

/* Renders {"error": message} into dst. Returns the length or -ENOSPC. */
DS_MUST_USE int64_t http_error_json(const char *message, char *dst, size_t dst_capacity);

/* What a consistent=true answer waited for (http_consistent.c renders it). */
enum http_consistency {
    HTTP_CONSISTENCY_DURABLE = 0,  /* serve: everything durable when the request arrived */
    HTTP_CONSISTENCY_ACKNOWLEDGED, /* a node: everything the topic had acknowledged */
};
/* Why a consistent=true request is answered 503. */
enum http_unmet {
    HTTP_UNMET_TIMEOUT = 0, /* the store (or the index) did not get there in time */
    HTTP_UNMET_REBALANCE,   /* the node's assignment changed while waiting */
    HTTP_UNMET_INDEX,       /* the store got there, the by-customer index did not in time */
};
/* A 503 of consistent=true: the positions the answer would have had to include and what the
 * store held when the wait ended. */
struct http_unmet_wait {
    enum http_unmet why;
    uint32_t timeout_ms;
    uint32_t count;
    const struct query_position *positions; /* count entries, borrowed */
    const int64_t *durable_next;            /* per position: the store's next offset, -1 none */
    uint64_t index_needed_seq;              /* HTTP_UNMET_INDEX: the store commit the index
                                             * must hold */
};

/* ,"consistency":"durable" or ,"consistency":"acknowledged","high_watermarks":{"P":HW,...}
 * (count positions, may be NULL for durable). Returns the length or -ENOSPC. */
DS_MUST_USE int64_t http_consistency_json(enum http_consistency kind,
                                          const struct query_position *positions, uint32_t count,
                                          char *dst, size_t dst_capacity);
/* Bytes http_consistency_json needs at most for count positions. */
size_t http_consistency_json_bound(uint32_t count);
/* The 503 document: {"error":"...","consistency":"acknowledged","timeout_ms":T,"missing":[
 * {"partition":P,"high_watermark":H,"durable_next":D|null},...]} listing every position the
 * store had not reached (HTTP_UNMET_INDEX: every position, and "index_needed_seq":S). Returns
 * the length or -ENOSPC. */
DS_MUST_USE int64_t http_unmet_json(const struct http_unmet_wait *w, char *dst,
                                    size_t dst_capacity);
size_t http_unmet_json_bound(uint32_t count);
/* Whether the store's next offset has reached the position (or the node does not store it). */
bool http_position_reached(const struct query_position *p, int64_t durable_next);

struct text_buf;
/* Appends the heat series of /metrics (top rows only: bounded labels) to b (query/heat.c). */
void heat_metrics_put(const struct shard_heat_report *report, struct text_buf *b);

#endif /* DS_QUERY_HTTP_PRIVATE_H */
