/*
 * libFuzzer harness for the HTTP request router of query/serve_request.c (query_route_parse):
 * the method and the raw request target are bytes from any client.
 *
 * Input: a byte choosing range_days_max (1 + b * 15 % QUERY_RANGE_DAYS_MAX: 1, the default
 * neighbourhood and the maximum all occur), a byte choosing the method (GET, HEAD, POST, or the
 * bytes up to the first newline of the rest), then the target, in a buffer of its exact length
 * and not NUL-terminated, as libmicrohttpd hands it over.
 *
 * Properties, any broken one aborts: the status is 0, 400, 404, 405 or 414; an error has a
 * message of printable ASCII (the answer must stay valid JSON) and a success none; 414 exactly
 * for targets over HTTP_URI_BYTES_MAX; 404 exactly when no endpoint was recognised; 405 only for
 * a method other than GET and HEAD; needs_token for every endpoint but the probes. On success
 * the route's fields hold what its endpoint promises: a count has 0 <= day_first <= day_last
 * <= DS_DAY_MAX within range_days_max days, a status of at most DS_STATUS_BYTES_MAX bytes and a
 * known grouping; partitions a real day; orders a limit in 1..SERVE_ORDERS_LIMIT_MAX, a valid
 * customer id and a NUL-terminated cursor of at most QUERY_ORDERS_TOKEN_CHARS_MAX characters;
 * heat a top in 1..SHARD_HEAT_TOP_MAX; an order (the order lookup) a valid order id. A second parse
 * of the same request gives the same route.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define METHOD_BYTES_MAX 32u

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

static bool id_valid(const struct ds_id *id)
{
    return id->is_string ? id->len >= 1 && id->len <= DS_ID_BYTES_MAX && id->value == 0
                         : id->value >= 1 && id->len == 0;
}

static void check_error(unsigned status, const struct query_route *route)
{
    size_t len = strnlen(route->error, sizeof(route->error));
    check(len < sizeof(route->error));
    check(status == 0 ? len == 0 : len > 0);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)route->error[i];
        check(c >= 0x20 && c < 0x7f);
    }
}

static void check_success(const struct query_route *route, uint32_t range_days_max)
{
    const struct query_count_request *count = &route->count;
    switch (route->endpoint) {
    case QUERY_EP_COUNT:
        check(count->day_first >= 0 && count->day_first <= count->day_last &&
              count->day_last <= DS_DAY_MAX);
        check((uint32_t)(count->day_last - count->day_first) < range_days_max);
        check(count->range_days_max == range_days_max);
        check(count->has_status || count->status_len == 0);
        check(count->status_len <= DS_STATUS_BYTES_MAX);
        check(count->by >= QUERY_GROUP_NONE && count->by <= QUERY_GROUP_DAY);
        break;
    case QUERY_EP_PARTITIONS: check(route->day >= 0 && route->day <= DS_DAY_MAX); break;
    case QUERY_EP_ORDERS:
        check(route->limit >= 1 && route->limit <= SERVE_ORDERS_LIMIT_MAX);
        check(id_valid(&route->customer));
        check(strnlen(route->cursor, sizeof(route->cursor)) <= QUERY_ORDERS_TOKEN_CHARS_MAX);
        break;
    case QUERY_EP_HEAT: check(route->top >= 1 && route->top <= SHARD_HEAT_TOP_MAX); break;
    case QUERY_EP_HEAT_HISTORY:
        check(route->seconds >= 1 && route->seconds <= SHARD_HEAT_HISTORY_S);
        break;
    case QUERY_EP_HEAT_STREAM: break;
    case QUERY_EP_ORDER: check(id_valid(&route->order_id)); break;
    case QUERY_EP_CONSOLE:
        check(!route->has_token ||
              (route->token_len >= 1 && route->token_len <= HTTP_TOKEN_BYTES_MAX &&
               strlen(route->token) == route->token_len));
        break;
    case QUERY_EP_METRICS:
    case QUERY_EP_HEALTHZ:
    case QUERY_EP_READYZ: break;
    default: abort(); /* QUERY_EP_NONE or out of the enum */
    }
}

static void check_route(unsigned status, const char *method, size_t len,
                        const struct query_route *route, uint32_t range_days_max)
{
    check(status == 0 || status == 400 || status == 404 || status == 405 || status == 414);
    check_error(status, route);
    check((status == 414) == (len > HTTP_URI_BYTES_MAX));
    check(route->endpoint >= QUERY_EP_NONE && route->endpoint <= QUERY_EP_HEAT_STREAM);
    check(status != 404 || route->endpoint == QUERY_EP_NONE);
    check(status != 0 || route->endpoint != QUERY_EP_NONE);
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    check(status != 405 || !get);
    if (route->endpoint != QUERY_EP_NONE) {
        /* the console checks the token itself (a 401 page, the cookie login) */
        bool open = route->endpoint == QUERY_EP_HEALTHZ || route->endpoint == QUERY_EP_READYZ ||
                    route->endpoint == QUERY_EP_CONSOLE;
        check(route->needs_token == !open);
    }
    if (status == 0) {
        check(get);
        check_success(route, range_days_max);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    uint32_t range_days_max = 1u + (uint32_t)data[0] * 15u % QUERY_RANGE_DAYS_MAX;
    static const char *const methods[] = {"GET", "HEAD", "POST"};
    char method[METHOD_BYTES_MAX + 1];
    const uint8_t *target = data + 2;
    size_t len = size - 2;
    if (data[1] % 4u < 3u) {
        strcpy(method, methods[data[1] % 4u]);
    } else {
        const uint8_t *nl = memchr(target, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - target) : 0;
        n = n > METHOD_BYTES_MAX ? METHOD_BYTES_MAX : n;
        memcpy(method, target, n);
        method[n] = '\0';
        target += nl != NULL ? (size_t)(nl - target) + 1u : 0u;
        len = size - (size_t)(target - data);
    }
    char *copy = malloc(len > 0 ? len : 1); /* exact length: ASan sees a read past it */
    check(copy != NULL);
    memcpy(copy, target, len);
    static struct query_route route, again; /* ~2.5 KB each: off the stack */
    unsigned status = query_route_parse(method, copy, len, range_days_max, &route);
    check_route(status, method, len, &route, range_days_max);
    check(query_route_parse(method, copy, len, range_days_max, &again) == status);
    check(memcmp(&route, &again, sizeof(route)) == 0);
    free(copy);
    return 0;
}
